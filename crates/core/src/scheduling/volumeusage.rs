//! Upstream's CSI volume limits: a node can attach only so many volumes of each CSI driver
//! (its CSINode says how many), so a pod whose claims would take a driver past that limit does
//! not fit the node however much room it has. A claim counts once per node, whichever pods
//! share it.

use std::collections::{BTreeMap, BTreeSet};

/// One persistent volume a pod attaches: the CSI driver that attaches it and the claim
/// (`namespace/name`) it comes from.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Attachment {
    /// The CSI driver's name (`ebs.csi.aws.com`).
    pub driver: String,
    /// The claim, `namespace/name`.
    pub claim: String,
}

/// The volumes attached to a node, per driver, against the node's limits.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VolumeUsage {
    limits: BTreeMap<String, usize>,
    in_use: BTreeMap<String, BTreeSet<String>>,
}

impl VolumeUsage {
    /// A node with these per-driver limits (a CSINode's `allocatable.count`s) and nothing
    /// attached yet.
    pub fn new(limits: BTreeMap<String, usize>) -> Self {
        Self {
            limits,
            in_use: BTreeMap::new(),
        }
    }

    /// Whether any driver is limited on this node: a node without limits never refuses a pod
    /// for its volumes, and does not need to count them.
    pub fn limited(&self) -> bool {
        !self.limits.is_empty()
    }

    /// Counts a pod's attachments against the node.
    pub fn add(&mut self, attachments: &[Attachment]) {
        for a in attachments {
            if self.limits.contains_key(&a.driver) {
                self.in_use
                    .entry(a.driver.clone())
                    .or_default()
                    .insert(a.claim.clone());
            }
        }
    }

    /// Why adding a pod's attachments would exceed a driver's limit, if it would.
    pub fn exceeds_limits(&self, attachments: &[Attachment]) -> Option<String> {
        let mut wanted: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for a in attachments {
            if self.limits.contains_key(&a.driver) {
                wanted.entry(&a.driver).or_default().insert(&a.claim);
            }
        }
        wanted.into_iter().find_map(|(driver, claims)| {
            let limit = self.limits[driver];
            let in_use = self.in_use.get(driver);
            let count = in_use.map_or(0, BTreeSet::len)
                + claims
                    .iter()
                    .filter(|c| in_use.is_none_or(|u| !u.contains(**c)))
                    .count();
            (count > limit).then(|| {
                format!(
                    "would exceed volume limit, provisioner {driver} volume-count {count} volume-limit {limit}"
                )
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attach(driver: &str, claims: &[&str]) -> Vec<Attachment> {
        claims
            .iter()
            .map(|c| Attachment {
                driver: driver.into(),
                claim: format!("ns/{c}"),
            })
            .collect()
    }

    #[test]
    fn limits_count_distinct_claims_per_driver() {
        let mut node = VolumeUsage::new([("ebs.csi.aws.com".to_string(), 2)].into());
        assert!(node.limited());
        node.add(&attach("ebs.csi.aws.com", &["a"]));
        assert_eq!(
            node.exceeds_limits(&attach("ebs.csi.aws.com", &["b"])),
            None
        );
        assert_eq!(
            node.exceeds_limits(&attach("ebs.csi.aws.com", &["a", "a"])),
            None,
            "a claim already attached counts once"
        );
        let why = node
            .exceeds_limits(&attach("ebs.csi.aws.com", &["b", "c"]))
            .expect("three volumes on a limit of two");
        assert!(why.contains("volume-count 3 volume-limit 2"), "{why}");
        assert_eq!(
            node.exceeds_limits(&attach("efs.csi.aws.com", &["x", "y", "z"])),
            None,
            "a driver without a limit is not counted"
        );
        node.add(&attach("ebs.csi.aws.com", &["b"]));
        assert!(
            node.exceeds_limits(&attach("ebs.csi.aws.com", &["c"]))
                .is_some()
        );
    }

    #[test]
    fn a_node_without_limits_takes_any_volumes() {
        let mut node = VolumeUsage::default();
        assert!(!node.limited());
        node.add(&attach("ebs.csi.aws.com", &["a", "b", "c"]));
        assert_eq!(
            node.exceeds_limits(&attach("ebs.csi.aws.com", &["d"])),
            None
        );
        assert_eq!(node, VolumeUsage::default(), "nothing is tracked");
    }
}
