//! Why a CCE node no longer matches its CCENodeClass, in upstream's order: the NodeClass's
//! static fields changed (its hash, compared only within one hash version), then — judged
//! against the CCE node — its primary NIC's subnet is no longer among the NodeClass's.

use karpenter_api::NodeClaim;

use crate::cce::Node;
use crate::ccenodeclass::{
    CCE_NODE_CLASS_HASH_ANNOTATION, CCE_NODE_CLASS_HASH_VERSION,
    CCE_NODE_CLASS_HASH_VERSION_ANNOTATION, CCENodeClass,
};

/// The NodeClass's static fields changed.
pub const NODE_CLASS_DRIFT: &str = "NodeClassDrift";
/// The node's subnet is not one of the NodeClass's.
pub const SUBNET_DRIFT: &str = "SubnetDrift";

/// Drift cannot be judged: the NodeClass has not resolved its subnets.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("CCENodeClass {0:?}: no subnets are discovered")]
pub struct NoSubnets(pub String);

fn annotation<'a>(claim: &'a NodeClaim, key: &str) -> Option<&'a str> {
    claim
        .metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// The NodeClass's static fields changed since the claim's node was created: the claim carries
/// this hash version and another hash. A claim without the annotations (or of another hash
/// version) is not judged.
pub fn static_drift(claim: &NodeClaim, class: &CCENodeClass) -> Option<&'static str> {
    let version = annotation(claim, CCE_NODE_CLASS_HASH_VERSION_ANNOTATION)?;
    let hash = annotation(claim, CCE_NODE_CLASS_HASH_ANNOTATION)?;
    (version == CCE_NODE_CLASS_HASH_VERSION && hash != class.hash()).then_some(NODE_CLASS_DRIFT)
}

/// Subnet drift of the CCE `node` against the NodeClass's status.
pub fn node_drift(class: &CCENodeClass, node: &Node) -> Result<Option<&'static str>, NoSubnets> {
    let subnets = class
        .status
        .as_ref()
        .map(|s| s.subnets.as_slice())
        .unwrap_or_default();
    if subnets.is_empty() {
        return Err(NoSubnets(class.metadata.name.clone().unwrap_or_default()));
    }
    let current = node.subnet_id().unwrap_or_default();
    Ok((!subnets.iter().any(|s| s.id == current)).then_some(SUBNET_DRIFT))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use crate::ccenodeclass::{CCENodeClassStatus, Subnet};

    fn class(subnets: &[&str]) -> CCENodeClass {
        let mut c: CCENodeClass = serde_json::from_value(json!({
            "apiVersion": "karpenter.k8s.huawei/v1alpha1",
            "kind": "CCENodeClass",
            "metadata": {"name": "default"},
            "spec": {
                "subnetSelectorTerms": [{"name": "subnet-a"}],
                "imsSelector": {"imsFamily": "Huawei Cloud EulerOS 2.0"},
                "blockDeviceMappings": {"root": {"volumeSize": 40, "volumeType": "SSD"}},
                "login": {"sshKey": "ops"},
            },
        }))
        .unwrap();
        c.status = Some(CCENodeClassStatus {
            subnets: subnets
                .iter()
                .map(|id| Subnet { id: id.to_string() })
                .collect(),
            conditions: Vec::new(),
        });
        c
    }

    fn claim(annotations: &[(&str, &str)]) -> NodeClaim {
        let mut c = NodeClaim::default();
        c.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        );
        c
    }

    fn node(subnet: Option<&str>) -> Node {
        serde_json::from_value(json!({
            "metadata": {"uid": "n1"},
            "spec": {"flavor": "c7.large.2", "az": "ap-southeast-3a",
                "nodeNicSpec": {"primaryNic": {"subnetId": subnet}}},
        }))
        .unwrap()
    }

    #[test]
    fn static_drift_compares_hashes_of_one_version_only() {
        let c = class(&["s1"]);
        let hash = c.hash();
        let v = CCE_NODE_CLASS_HASH_VERSION;
        for (annotations, want) in [
            (
                vec![
                    (CCE_NODE_CLASS_HASH_ANNOTATION, hash.as_str()),
                    (CCE_NODE_CLASS_HASH_VERSION_ANNOTATION, v),
                ],
                None,
            ),
            (
                vec![
                    (CCE_NODE_CLASS_HASH_ANNOTATION, "other"),
                    (CCE_NODE_CLASS_HASH_VERSION_ANNOTATION, v),
                ],
                Some(NODE_CLASS_DRIFT),
            ),
            (
                vec![
                    (CCE_NODE_CLASS_HASH_ANNOTATION, "other"),
                    (CCE_NODE_CLASS_HASH_VERSION_ANNOTATION, "v1"),
                ],
                None,
            ),
            (vec![(CCE_NODE_CLASS_HASH_ANNOTATION, "other")], None),
            (vec![], None),
        ] {
            assert_eq!(
                static_drift(&claim(&annotations), &c),
                want,
                "{annotations:?}"
            );
        }
    }

    #[test]
    fn subnet_drift_when_the_node_left_the_classs_subnets() {
        assert_eq!(
            node_drift(&class(&["s1", "s2"]), &node(Some("s2"))),
            Ok(None)
        );
        assert_eq!(
            node_drift(&class(&["s1"]), &node(Some("s2"))),
            Ok(Some(SUBNET_DRIFT))
        );
        assert_eq!(
            node_drift(&class(&["s1"]), &node(None)),
            Ok(Some(SUBNET_DRIFT))
        );
        assert_eq!(
            node_drift(&class(&[]), &node(Some("s1"))),
            Err(NoSubnets("default".into())),
            "not judged before the subnets are known, as upstream"
        );
    }
}
