//! Topology domains as bits. A pod under a zonal spread or affinity may only join a NodeClaim
//! whose requirements allow one of the domains its constraints leave open; with thousands of
//! claims that check, on strings, dominated large solves. Here each claim's allowed domains
//! per topology key are kept as a mask over the NodePools' domains, so the check is an AND.

use std::collections::{BTreeSet, HashMap};

use karpenter_api::labels::HOSTNAME_LABEL;

use crate::scheduling::Requirements;

/// Keys with more domains than this are judged on strings.
const MAX_DOMAINS: usize = 63;

/// The top bit: the claim does not constrain the key. Every wanted mask carries it too, so a
/// claim that allows any domain admits the pod even when its constraints leave none open.
const UNCONSTRAINED: u64 = 1 << 63;

/// One topology key's domains, each with its bit.
struct Key {
    name: String,
    domains: Vec<String>,
}

/// Every claim's allowed domains, per key.
pub(super) struct DomainMasks {
    keys: Vec<Key>,
    /// Per claim, per key (claim-major, flat): the allowed domains, or every bit when the
    /// claim does not constrain the key (any domain is allowed, known or not).
    masks: Vec<u64>,
}

/// What a pod's constraints leave open, per key, as masks.
pub(super) struct Wanted(Vec<(usize, u64)>);

impl DomainMasks {
    /// Masks over `universe` (each key's domains across the NodePools' instance types).
    pub(super) fn new(universe: &HashMap<String, BTreeSet<String>>) -> Self {
        let mut keys: Vec<Key> = universe
            .iter()
            .filter(|(k, d)| k.as_str() != HOSTNAME_LABEL && d.len() <= MAX_DOMAINS)
            .map(|(k, d)| Key {
                name: k.clone(),
                domains: d.iter().cloned().collect(),
            })
            .collect();
        keys.sort_by(|a, b| a.name.cmp(&b.name));
        Self {
            keys,
            masks: Vec::new(),
        }
    }

    /// Records claim `claim`'s requirements (a new claim is the next index).
    pub(super) fn update(&mut self, claim: usize, requirements: &Requirements) {
        let stride = self.keys.len();
        if self.masks.len() < (claim + 1) * stride {
            self.masks.resize((claim + 1) * stride, u64::MAX);
        }
        for (k, key) in self.keys.iter().enumerate() {
            self.masks[claim * stride + k] = match requirements.get(&key.name) {
                Some(r) => key
                    .domains
                    .iter()
                    .enumerate()
                    .filter(|(_, d)| r.has(d))
                    .fold(0u64, |mask, (bit, _)| mask | 1 << bit),
                None => u64::MAX,
            };
        }
    }

    /// `required` (key, open domains) as masks; `None` when a key or a domain is not known
    /// here, and the strings must decide.
    pub(super) fn wanted(&self, required: &[(String, Vec<String>)]) -> Option<Wanted> {
        let mut wanted = Vec::with_capacity(required.len());
        for (key, domains) in required {
            let k = self.keys.iter().position(|k| &k.name == key)?;
            let mut mask = UNCONSTRAINED;
            for d in domains {
                let bit = self.keys[k].domains.iter().position(|known| known == d)?;
                mask |= 1 << bit;
            }
            wanted.push((k, mask));
        }
        Some(Wanted(wanted))
    }

    /// Whether claim `claim` allows one of the wanted domains of every key.
    pub(super) fn admits(&self, claim: usize, wanted: &Wanted) -> bool {
        let stride = self.keys.len();
        let masks = &self.masks[claim * stride..(claim + 1) * stride];
        wanted.0.iter().all(|&(k, mask)| masks[k] & mask != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduling::Requirement;
    use karpenter_api::Operator;
    use karpenter_api::labels::ZONE_LABEL;

    fn requirements(reqs: &[(&str, Operator, &[&str])]) -> Requirements {
        reqs.iter()
            .map(|(k, op, v)| Requirement::new(k, *op, v))
            .collect()
    }

    /// The string check the masks stand for.
    fn by_strings(claim: &Requirements, required: &[(String, Vec<String>)]) -> bool {
        required.iter().all(|(key, domains)| {
            claim
                .get(key)
                .is_none_or(|r| domains.iter().any(|d| r.has(d)))
        })
    }

    #[test]
    fn masks_agree_with_the_string_check() {
        let universe: HashMap<String, BTreeSet<String>> = [
            (
                ZONE_LABEL.to_string(),
                ["a", "b", "c"].map(String::from).into(),
            ),
            (HOSTNAME_LABEL.to_string(), ["h"].map(String::from).into()),
        ]
        .into();
        let claims = [
            requirements(&[]),
            requirements(&[(ZONE_LABEL, Operator::In, &["a"])]),
            requirements(&[(ZONE_LABEL, Operator::In, &["b", "c"])]),
            requirements(&[(ZONE_LABEL, Operator::NotIn, &["a"])]),
            requirements(&[(ZONE_LABEL, Operator::Exists, &[])]),
            requirements(&[(ZONE_LABEL, Operator::DoesNotExist, &[])]),
        ];
        let mut masks = DomainMasks::new(&universe);
        for (i, c) in claims.iter().enumerate() {
            masks.update(i, c);
        }
        let zone = |d: &[&str]| {
            vec![(
                ZONE_LABEL.to_string(),
                d.iter().map(|s| s.to_string()).collect(),
            )]
        };
        let cases = [
            zone(&[]),
            zone(&["a"]),
            zone(&["b"]),
            zone(&["a", "c"]),
            Vec::new(),
        ];
        for required in &cases {
            let wanted = masks.wanted(required).expect("known domains");
            for (i, c) in claims.iter().enumerate() {
                assert_eq!(
                    masks.admits(i, &wanted),
                    by_strings(c, required),
                    "claim {i} ({c:?}), required {required:?}"
                );
            }
        }
        // A domain or key outside the universe is left to the strings.
        assert!(masks.wanted(&zone(&["z"])).is_none());
        assert!(
            masks
                .wanted(&[("custom".into(), vec!["x".into()])])
                .is_none()
        );
        // A claim's requirements narrowed later are judged as they are now.
        masks.update(0, &requirements(&[(ZONE_LABEL, Operator::In, &["c"])]));
        assert!(!masks.admits(0, &masks.wanted(&zone(&["a"])).unwrap()));
    }
}
