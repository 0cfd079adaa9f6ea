//! Why an instance no longer matches its ECSNodeClass, in upstream's order: the NodeClass's
//! static fields changed (its hash), then — judged against the running instance — its
//! security groups are not exactly the NodeClass's, or its vSwitch is not among them.

use karpenter_api::NodeClaim;

use crate::ecsnodeclass::{
    ECS_NODE_CLASS_HASH_ANNOTATION, ECS_NODE_CLASS_HASH_VERSION,
    ECS_NODE_CLASS_HASH_VERSION_ANNOTATION, ECSNodeClass,
};
use crate::instance::Instance;

/// The NodeClass's static fields changed.
pub const NODE_CLASS_DRIFT: &str = "NodeClassDrift";
/// The instance's security groups are not the NodeClass's.
pub const SECURITY_GROUP_DRIFT: &str = "SecurityGroupDrift";
/// The instance's vSwitch is not one of the NodeClass's.
pub const V_SWITCH_DRIFT: &str = "VSwitchDrift";

/// Drift cannot be judged: the NodeClass has not resolved what the instance is compared with.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DriftError {
    /// `status.securityGroups` is empty.
    #[error("ECSNodeClass {0:?}: status.securityGroups is empty")]
    NoSecurityGroups(String),
    /// `status.vSwitches` is empty.
    #[error("ECSNodeClass {0:?}: status.vSwitches is empty")]
    NoVSwitches(String),
}

fn annotation<'a>(claim: &'a NodeClaim, key: &str) -> Option<&'a str> {
    claim
        .metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// The NodeClass's static fields changed since the claim launched: the claim carries this
/// hash version and another hash.
pub fn static_drift(claim: &NodeClaim, class: &ECSNodeClass) -> Option<&'static str> {
    let version = annotation(claim, ECS_NODE_CLASS_HASH_VERSION_ANNOTATION)?;
    let hash = annotation(claim, ECS_NODE_CLASS_HASH_ANNOTATION)?;
    (version == ECS_NODE_CLASS_HASH_VERSION && hash != class.hash()).then_some(NODE_CLASS_DRIFT)
}

/// Security group or vSwitch drift of the running `instance` against the NodeClass's status.
pub fn instance_drift(
    class: &ECSNodeClass,
    instance: &Instance,
) -> Result<Option<&'static str>, DriftError> {
    let name = || class.metadata.name.clone().unwrap_or_default();
    let status = class.status.as_ref();
    let mut wanted: Vec<&str> = status
        .map(|s| s.security_groups.iter().map(|g| g.id.as_str()).collect())
        .unwrap_or_default();
    if wanted.is_empty() {
        return Err(DriftError::NoSecurityGroups(name()));
    }
    let mut has: Vec<&str> = instance
        .security_group_ids
        .security_group_id
        .iter()
        .map(String::as_str)
        .collect();
    for ids in [&mut wanted, &mut has] {
        ids.sort_unstable();
        ids.dedup();
    }
    if wanted != has {
        return Ok(Some(SECURITY_GROUP_DRIFT));
    }
    let v_switches = status.map(|s| s.v_switches.as_slice()).unwrap_or_default();
    if v_switches.is_empty() {
        return Err(DriftError::NoVSwitches(name()));
    }
    if !v_switches
        .iter()
        .any(|v| v.id == instance.vpc_attributes.v_switch_id)
    {
        return Ok(Some(V_SWITCH_DRIFT));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn class(security_groups: &[&str], v_switches: &[&str]) -> ECSNodeClass {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.k8s.alibabacloud/v1alpha1",
            "kind": "ECSNodeClass",
            "metadata": {"name": "default"},
            "spec": {"tags": {"team": "a"}},
            "status": {
                "securityGroups": security_groups.iter().map(|id| json!({"id": id})).collect::<Vec<_>>(),
                "vSwitches": v_switches.iter().map(|id| json!({"id": id, "zoneID": "cn-hangzhou-i"})).collect::<Vec<_>>(),
            },
        }))
        .unwrap()
    }

    fn instance(security_groups: &[&str], v_switch: &str) -> Instance {
        serde_json::from_value(json!({
            "InstanceId": "i-1",
            "SecurityGroupIds": {"SecurityGroupId": security_groups},
            "VpcAttributes": {"VSwitchId": v_switch},
        }))
        .unwrap()
    }

    fn claim(annotations: serde_json::Value) -> NodeClaim {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {"name": "c", "annotations": annotations},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.alibabacloud", "kind": "ECSNodeClass", "name": "default"}},
        }))
        .unwrap()
    }

    #[test]
    fn static_drift_needs_the_same_hash_version() {
        let c = class(&["sg-1"], &["vsw-1"]);
        let same = claim(json!({
            ECS_NODE_CLASS_HASH_ANNOTATION: c.hash(),
            ECS_NODE_CLASS_HASH_VERSION_ANNOTATION: ECS_NODE_CLASS_HASH_VERSION,
        }));
        assert_eq!(static_drift(&same, &c), None);
        let changed = claim(json!({
            ECS_NODE_CLASS_HASH_ANNOTATION: "123",
            ECS_NODE_CLASS_HASH_VERSION_ANNOTATION: ECS_NODE_CLASS_HASH_VERSION,
        }));
        assert_eq!(static_drift(&changed, &c), Some(NODE_CLASS_DRIFT));
        let upstream_version = claim(json!({
            ECS_NODE_CLASS_HASH_ANNOTATION: "123",
            ECS_NODE_CLASS_HASH_VERSION_ANNOTATION: "v3",
        }));
        assert_eq!(static_drift(&upstream_version, &c), None);
        assert_eq!(static_drift(&claim(json!({})), &c), None);
    }

    #[test]
    fn the_instance_is_judged_against_the_status() {
        // (what, the class's groups, its vSwitches, the instance's groups, its vSwitch, drift)
        type Case<'a> = (
            &'a str,
            &'a [&'a str],
            &'a [&'a str],
            &'a [&'a str],
            &'a str,
            Result<Option<&'a str>, ()>,
        );
        let cases: [Case; 7] = [
            (
                "matches",
                &["sg-1", "sg-2"],
                &["vsw-1"],
                &["sg-2", "sg-1"],
                "vsw-1",
                Ok(None),
            ),
            (
                "a group removed from the class",
                &["sg-1"],
                &["vsw-1"],
                &["sg-1", "sg-2"],
                "vsw-1",
                Ok(Some(SECURITY_GROUP_DRIFT)),
            ),
            (
                "a group added to the class",
                &["sg-1", "sg-3"],
                &["vsw-1"],
                &["sg-1"],
                "vsw-1",
                Ok(Some(SECURITY_GROUP_DRIFT)),
            ),
            (
                "another vSwitch",
                &["sg-1"],
                &["vsw-1", "vsw-2"],
                &["sg-1"],
                "vsw-9",
                Ok(Some(V_SWITCH_DRIFT)),
            ),
            (
                "security groups first",
                &["sg-1"],
                &["vsw-1"],
                &["sg-9"],
                "vsw-9",
                Ok(Some(SECURITY_GROUP_DRIFT)),
            ),
            (
                "no groups resolved",
                &[],
                &["vsw-1"],
                &["sg-1"],
                "vsw-1",
                Err(()),
            ),
            (
                "no vSwitches resolved",
                &["sg-1"],
                &[],
                &["sg-1"],
                "vsw-1",
                Err(()),
            ),
        ];
        for (what, sgs, vsws, has_sgs, has_vsw, expected) in cases {
            let got = instance_drift(&class(sgs, vsws), &instance(has_sgs, has_vsw));
            assert_eq!(got.map_err(|_| ()), expected, "{what}");
        }
    }
}
