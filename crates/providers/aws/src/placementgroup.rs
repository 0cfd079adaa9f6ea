//! Placement groups: which group an EC2NodeClass's `placementGroupSelector` names, the partition
//! a NodeClaim asks for, the labels a launched NodeClaim carries, and when a node no longer
//! sits in its NodeClass's group (`PlacementGroupDrift`), as upstream judges them.

use std::collections::BTreeMap;

use karpenter_api::{NodeClaim, Operator};

use crate::ec2_extra::{PlacementGroupInfo, PlacementGroupQuery, PlacementGroups};
use crate::ec2nodeclass::PlacementGroupSelector;
use crate::nodeclass::NodeClassError;

/// The label holding the id of the placement group a node launched into.
pub const LABEL_PLACEMENT_GROUP_ID: &str = "karpenter.k8s.aws/placement-group-id";
/// The label holding the partition of a partition placement group a node launched into.
pub const LABEL_PLACEMENT_GROUP_PARTITION: &str = "karpenter.k8s.aws/placement-group-partition";

/// The field whose resolution a failure names (the status condition is found by it).
pub const FIELD: &str = "spec.placementGroupSelector";

/// The selector's id when set, else its name (what messages name the group by).
pub fn selector_text(selector: &PlacementGroupSelector) -> String {
    selector
        .id
        .clone()
        .filter(|i| !i.is_empty())
        .or_else(|| selector.name.clone())
        .unwrap_or_default()
}

/// Resolves the selector: no selector is no group; a selector matching no `available` group
/// is an error naming it, so the NodeClass is not Ready and launches nothing (upstream's
/// `PlacementGroupNotFound`), as is a failed describe (`PlacementGroupResolutionFailed`).
pub async fn resolve<A: PlacementGroups>(
    api: &A,
    selector: Option<&PlacementGroupSelector>,
) -> Result<Option<PlacementGroupInfo>, NodeClassError> {
    let Some(selector) = selector else {
        return Ok(None);
    };
    let query = PlacementGroupQuery {
        id: selector.id.clone().filter(|i| !i.is_empty()),
        name: selector.name.clone().filter(|n| !n.is_empty()),
    };
    let wanted = selector_text(selector);
    let found = api
        .describe_placement_groups(query.clone())
        .await
        .map_err(|e| {
            NodeClassError::NotReady(format!(
                "{FIELD}: failed to resolve placement group {wanted:?}: {e}"
            ))
        })?;
    // EC2 filters by id or name already; matching again keeps a lenient answer honest.
    let group = found.into_iter().find(|g| match (&query.id, &query.name) {
        (Some(id), _) => g.id == *id,
        (None, Some(name)) => g.name == *name,
        (None, None) => false,
    });
    match group {
        Some(g) => Ok(Some(g)),
        None => Err(NodeClassError::NotReady(format!(
            "{FIELD}: placement group {wanted:?} not found"
        ))),
    }
}

/// The partition a NodeClaim launches into: for a partition group, the lowest partition its
/// `karpenter.k8s.aws/placement-group-partition In [...]` requirement allows (deterministic,
/// as upstream picks it); none otherwise, and EC2 spreads instances over the partitions.
pub fn partition(claim: &NodeClaim, group: &PlacementGroupInfo) -> Option<i32> {
    if !group.is_partition() {
        return None;
    }
    claim
        .spec
        .requirements
        .iter()
        .filter(|r| r.key == LABEL_PLACEMENT_GROUP_PARTITION && r.operator == Operator::In)
        .flat_map(|r| r.values.iter().filter_map(|v| v.parse::<i32>().ok()))
        .filter(|p| *p >= 1 && (group.partition_count == 0 || *p <= group.partition_count))
        .min()
}

/// The labels a NodeClaim launched into `group` (and `partition`) carries.
pub fn labels(group: &PlacementGroupInfo, partition: Option<i32>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::from([(LABEL_PLACEMENT_GROUP_ID.to_string(), group.id.clone())]);
    if let Some(p) = partition {
        out.insert(LABEL_PLACEMENT_GROUP_PARTITION.to_string(), p.to_string());
    }
    out
}

/// Whether a NodeClaim's placement group (its label) differs from the one its NodeClass
/// resolves to now: a selector added, removed, or pointed at another group.
pub fn is_drifted(claim: &NodeClaim, resolved: Option<&PlacementGroupInfo>) -> bool {
    let launched = claim
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_PLACEMENT_GROUP_ID))
        .map(String::as_str)
        .unwrap_or_default();
    let wanted = resolved.map(|g| g.id.as_str()).unwrap_or_default();
    launched != wanted
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_api::NodeSelectorRequirementWithMinValues;

    fn group(strategy: &str, partitions: i32) -> PlacementGroupInfo {
        PlacementGroupInfo {
            id: "pg-1".into(),
            name: "training".into(),
            strategy: strategy.into(),
            partition_count: partitions,
            spread_level: None,
        }
    }

    fn claim_wanting(values: &[&str]) -> NodeClaim {
        let mut c = NodeClaim::default();
        c.spec
            .requirements
            .push(NodeSelectorRequirementWithMinValues {
                key: LABEL_PLACEMENT_GROUP_PARTITION.into(),
                operator: Operator::In,
                values: values.iter().map(|v| v.to_string()).collect(),
                min_values: None,
            });
        c
    }

    #[test]
    fn the_lowest_allowed_partition_of_a_partition_group() {
        let cases: [(&str, i32, &[&str], Option<i32>); 6] = [
            ("partition", 7, &["5", "3", "6"], Some(3)),
            ("partition", 7, &["9", "4"], Some(4)),
            ("partition", 7, &["x"], None),
            ("partition", 7, &[], None),
            ("cluster", 0, &["1"], None),
            ("spread", 0, &["2"], None),
        ];
        for (strategy, count, values, want) in cases {
            assert_eq!(
                partition(&claim_wanting(values), &group(strategy, count)),
                want,
                "{strategy} {values:?}"
            );
        }
    }

    #[test]
    fn labels_name_the_group_and_the_partition() {
        let l = labels(&group("partition", 3), Some(2));
        assert_eq!(l[LABEL_PLACEMENT_GROUP_ID], "pg-1");
        assert_eq!(l[LABEL_PLACEMENT_GROUP_PARTITION], "2");
        assert!(!labels(&group("cluster", 0), None).contains_key(LABEL_PLACEMENT_GROUP_PARTITION));
    }

    #[test]
    fn drift_when_the_group_was_added_removed_or_changed() {
        let mut in_group = NodeClaim::default();
        in_group.metadata.labels =
            Some([(LABEL_PLACEMENT_GROUP_ID.to_string(), "pg-1".to_string())].into());
        let outside = NodeClaim::default();
        let g = group("cluster", 0);
        let other = PlacementGroupInfo {
            id: "pg-2".into(),
            ..g.clone()
        };
        assert!(!is_drifted(&in_group, Some(&g)));
        assert!(!is_drifted(&outside, None));
        assert!(is_drifted(&outside, Some(&g)), "selector added");
        assert!(is_drifted(&in_group, None), "selector removed");
        assert!(is_drifted(&in_group, Some(&other)), "selector changed");
    }
}
