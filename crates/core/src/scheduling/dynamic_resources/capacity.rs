//! Consumable capacity: how much of a shared (multi-allocatable) device a request consumes,
//! under the device's request policy (Kubernetes' `DRAConsumableCapacity`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use karpenter_api::dra::{CapacityRequestPolicy, Device};

use super::Amounts;
use crate::resources::parse_milli_saturating;

/// A quantity in thousandths; a malformed one (the API server refuses them) counts as zero.
pub(crate) fn milli(q: &Quantity) -> i64 {
    parse_milli_saturating(&q.0).unwrap_or(0)
}

/// What a request asking `requested` consumes of `device`: every capacity of the device, the
/// amount asked (rounded up to what the policy allows), else the policy's default, else all of
/// it. `None` when the device has no capacity (nothing to account); `Err` when the request
/// names a capacity the device lacks or asks an amount its policy forbids.
pub(crate) fn consumed(
    device: &Device,
    requested: &BTreeMap<String, Quantity>,
) -> Result<Option<Amounts>, ()> {
    if requested.keys().any(|k| !device.capacity.contains_key(k)) {
        return Err(());
    }
    if device.capacity.is_empty() {
        return Ok(None);
    }
    let mut out = Amounts::new();
    for (name, capacity) in &device.capacity {
        let policy = capacity.request_policy.as_ref();
        let default = policy.and_then(|p| p.default.as_ref()).map(milli);
        let amount = match requested.get(name).map(milli) {
            Some(asked) => match policy {
                Some(p) => round_up(asked, p),
                None => asked,
            },
            None => default.unwrap_or_else(|| milli(&capacity.value)),
        };
        if let Some(p) = policy
            && Some(amount) != default
            && violates(amount, p)
        {
            return Err(());
        }
        out.insert(name.clone(), amount);
    }
    Ok(Some(out))
}

/// The least amount at or above `asked` the policy hands out.
fn round_up(asked: i64, policy: &CapacityRequestPolicy) -> i64 {
    if let Some(range) = &policy.valid_range {
        let Some(min) = range.min.as_ref().map(milli) else {
            return asked;
        };
        if asked <= min {
            return min;
        }
        return match range.step.as_ref().map(milli).filter(|s| *s > 0) {
            Some(step) => min.saturating_add((asked - min).saturating_add(step - 1) / step * step),
            None => asked,
        };
    }
    if !policy.valid_values.is_empty() {
        return policy
            .valid_values
            .iter()
            .map(milli)
            .find(|v| *v >= asked)
            .unwrap_or(asked);
    }
    asked
}

fn violates(amount: i64, policy: &CapacityRequestPolicy) -> bool {
    if let Some(range) = &policy.valid_range {
        let min = range.min.as_ref().map_or(0, milli);
        let over = range.max.as_ref().is_some_and(|m| amount > milli(m));
        let off_step = range
            .step
            .as_ref()
            .map(milli)
            .filter(|s| *s > 0)
            .is_some_and(|s| (amount - min) % s != 0);
        return over || off_step;
    }
    !policy.valid_values.is_empty() && !policy.valid_values.iter().any(|v| milli(v) == amount)
}

/// Whether `used` plus `more` stays within the device's capacities.
pub(crate) fn fits(device: &Device, used: &Amounts, more: &Amounts) -> bool {
    more.iter().all(|(name, amount)| {
        let total = device.capacity.get(name).map_or(0, |c| milli(&c.value));
        used.get(name).copied().unwrap_or(0).saturating_add(*amount) <= total
    })
}

/// Adds `more` into `into`.
pub(crate) fn add(into: &mut Amounts, more: &Amounts) {
    for (k, v) in more {
        *into.entry(k.clone()).or_default() += v;
    }
}

/// Each name's larger amount, into `into`.
pub(crate) fn max_into(into: &mut Amounts, other: &Amounts) {
    for (k, v) in other {
        let e = into.entry(k.clone()).or_default();
        *e = (*e).max(*v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_api::dra::{CapacityRequestPolicyRange, DeviceCapacity};

    fn q(s: &str) -> Quantity {
        Quantity(s.into())
    }

    fn device(value: &str, policy: Option<CapacityRequestPolicy>) -> Device {
        Device {
            name: "d".into(),
            allow_multiple_allocations: Some(true),
            capacity: [(
                "memory".to_string(),
                DeviceCapacity {
                    value: q(value),
                    request_policy: policy,
                },
            )]
            .into(),
            ..Default::default()
        }
    }

    fn asking(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
        pairs.iter().map(|(k, v)| (k.to_string(), q(v))).collect()
    }

    fn gi(n: i64) -> i64 {
        n * 1024 * 1024 * 1024 * 1000
    }

    // Kubernetes' request-policy rules, as upstream's consumable-capacity cases use them.
    #[test]
    fn a_request_consumes_what_the_policy_allows() {
        let values = CapacityRequestPolicy {
            default: Some(q("4Gi")),
            valid_values: vec![q("4Gi"), q("8Gi"), q("16Gi")],
            valid_range: None,
        };
        let range = CapacityRequestPolicy {
            default: None,
            valid_values: vec![],
            valid_range: Some(CapacityRequestPolicyRange {
                min: Some(q("2Gi")),
                max: Some(q("10Gi")),
                step: Some(q("2Gi")),
            }),
        };
        type Case<'a> = (
            &'a str,
            Option<CapacityRequestPolicy>,
            &'a [(&'a str, &'a str)],
            Result<Option<i64>, ()>,
        );
        let cases: [Case; 9] = [
            (
                "asked, no policy",
                None,
                &[("memory", "4Gi")],
                Ok(Some(gi(4))),
            ),
            (
                "nothing asked, no policy: all of it",
                None,
                &[],
                Ok(Some(gi(16))),
            ),
            (
                "nothing asked: the default",
                Some(values.clone()),
                &[],
                Ok(Some(gi(4))),
            ),
            (
                "rounded up to a valid value",
                Some(values.clone()),
                &[("memory", "5Gi")],
                Ok(Some(gi(8))),
            ),
            (
                "past every valid value",
                Some(values.clone()),
                &[("memory", "32Gi")],
                Err(()),
            ),
            (
                "below the range's min",
                Some(range.clone()),
                &[("memory", "1Gi")],
                Ok(Some(gi(2))),
            ),
            (
                "rounded up to a step",
                Some(range.clone()),
                &[("memory", "3Gi")],
                Ok(Some(gi(4))),
            ),
            (
                "past the range's max",
                Some(range),
                &[("memory", "11Gi")],
                Err(()),
            ),
            (
                "a capacity the device lacks",
                None,
                &[("memory", "1Gi"), ("bandwidth", "10")],
                Err(()),
            ),
        ];
        for (case, policy, asked, expected) in cases {
            let got =
                consumed(&device("16Gi", policy), &asking(asked)).map(|c| c.map(|c| c["memory"]));
            assert_eq!(got, expected, "{case}");
        }
    }

    #[test]
    fn capacity_is_used_up() {
        let d = device("16Gi", None);
        let used: Amounts = [("memory".to_string(), gi(12))].into();
        assert!(fits(&d, &used, &[("memory".to_string(), gi(4))].into()));
        assert!(!fits(&d, &used, &[("memory".to_string(), gi(5))].into()));
    }
}
