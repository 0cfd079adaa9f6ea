//! The instance types of upstream's fake cloud provider, which its unit tests and scheduling
//! benchmark use: type `i` has `i+1` vCPUs, `2(i+1)` GiB, `10(i+1)` pods and five offerings.

use karpenter_api::Operator;
use karpenter_api::labels::{
    ARCH_LABEL, CAPACITY_TYPE_LABEL, INSTANCE_TYPE_LABEL, OS_LABEL, ZONE_LABEL,
};

use super::{InstanceType, Offering, Overhead};
use crate::resources::Resources;
use crate::scheduling::{Requirement, Requirements};

/// The label the fake types use for their size class (`small` up to 4 vCPU, else `large`).
pub const SIZE_LABEL: &str = "size";
/// A label only large fake types define.
pub const SPECIAL_LABEL: &str = "special";
/// A label holding the vCPU count, for numeric requirements.
pub const INTEGER_LABEL: &str = "integer";

/// Upstream's price for a shape: 0.1 per vCPU plus 0.1 per GB of memory.
pub fn price_from_resources(resources: &Resources) -> f64 {
    0.1 * (resources.cpu as f64 / 1000.0) + 0.1 * (resources.memory as f64 / 1000.0) / 1e9
}

/// `n` fake instance types named `fake-it-0` … as upstream's `fake.InstanceTypes(n)`.
pub fn instance_types(n: usize) -> Vec<InstanceType> {
    (1..=n as i64)
        .map(|k| {
            let capacity = Resources::parse(&[
                ("cpu", &k.to_string()),
                ("memory", &format!("{}Gi", 2 * k)),
                ("pods", &(10 * k).to_string()),
            ]);
            let price = price_from_resources(&capacity);
            let offerings = [
                ("spot", "test-zone-1"),
                ("spot", "test-zone-2"),
                ("on-demand", "test-zone-1"),
                ("on-demand", "test-zone-2"),
                ("on-demand", "test-zone-3"),
            ]
            .into_iter()
            .map(|(ct, zone)| Offering {
                zone: zone.into(),
                capacity_type: ct.into(),
                price,
                available: true,
            })
            .collect();
            let large = k > 4;
            let name = format!("fake-it-{}", k - 1);
            let mut requirements: Requirements = [
                Requirement::new(INSTANCE_TYPE_LABEL, Operator::In, &[name.as_str()]),
                Requirement::new(ARCH_LABEL, Operator::In, &["amd64"]),
                Requirement::new(OS_LABEL, Operator::In, &["darwin", "linux", "windows"]),
                Requirement::new(
                    ZONE_LABEL,
                    Operator::In,
                    &["test-zone-1", "test-zone-2", "test-zone-3"],
                ),
                Requirement::new(CAPACITY_TYPE_LABEL, Operator::In, &["on-demand", "spot"]),
                Requirement::new(
                    SIZE_LABEL,
                    Operator::In,
                    &[if large { "large" } else { "small" }],
                ),
                Requirement::new(INTEGER_LABEL, Operator::In, &[k.to_string()]),
            ]
            .into_iter()
            .collect();
            requirements.add(if large {
                Requirement::new(SPECIAL_LABEL, Operator::In, &["optional"])
            } else {
                Requirement::new::<&str>(SPECIAL_LABEL, Operator::DoesNotExist, &[])
            });
            let overhead = Overhead {
                kube_reserved: Resources::parse(&[("cpu", "100m"), ("memory", "10Mi")]),
                ..Default::default()
            };
            InstanceType::new(name, requirements, offerings, capacity, overhead)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_upstreams_catalog() {
        let types = instance_types(400);
        assert_eq!(types.len(), 400);
        let first = &types[0];
        assert_eq!(first.name, "fake-it-0");
        assert_eq!(first.allocatable().cpu, 900);
        assert_eq!(first.allocatable().memory, 2038 * (1 << 20) * 1000);
        assert!((first.offerings[0].price - 0.3147483648).abs() < 1e-12);
        assert!((types[399].offerings[0].price - 125.89934592).abs() < 1e-9);
        assert!(types[4].requirements.allows(SIZE_LABEL, "large"));
        assert!(!types[3].requirements.allows(SPECIAL_LABEL, "optional"));
        let zone3 =
            Requirements::from_iter([Requirement::new(ZONE_LABEL, Operator::In, &["test-zone-3"])]);
        assert!(
            first
                .compatible_offerings(&zone3)
                .all(|o| o.capacity_type == "on-demand"),
            "no spot in zone 3"
        );
    }
}
