//! Why a node no longer matches its AKSNodeClass, in upstream's order: the NodeClass's
//! static fields changed (its hash), the cluster's Kubernetes version moved past the node's,
//! the kubelet identity changed, or the node's image is no longer one the NodeClass offers.
//! The Kubernetes version and images count only while the NodeClass's status says they are
//! ready for its current generation, as upstream reads them.

use k8s_openapi::api::core::v1::Node;
use karpenter_api::NodeClaim;

use crate::aksnodeclass::{
    AKS_NODE_CLASS_HASH_ANNOTATION, AKS_NODE_CLASS_HASH_VERSION,
    AKS_NODE_CLASS_HASH_VERSION_ANNOTATION, AKSNodeClass,
};
use crate::images;

/// The NodeClass's static fields changed.
pub const NODE_CLASS_DRIFT: &str = "NodeClassDrift";
/// The node runs another Kubernetes version than the NodeClass's.
pub const K8S_VERSION_DRIFT: &str = "K8sVersionDrift";
/// The node's image is not one of the NodeClass's images.
pub const IMAGE_DRIFT: &str = "ImageDrift";
/// The node's kubelet identity is not the cluster's.
pub const KUBELET_IDENTITY_DRIFT: &str = "KubeletIdentityDrift";

/// The node label carrying the kubelet identity's client id.
pub const LABEL_KUBELET_IDENTITY_CLIENT_ID: &str =
    "kubernetes.azure.com/kubelet-identity-client-id";

/// Drift cannot be judged.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DriftError {
    /// Images are ready but none matches: the NodeClass cannot launch anything.
    #[error("AKSNodeClass {0:?} has no images for its constraints")]
    NoImages(String),
    /// The claim was not launched with an image (not launched yet).
    #[error("NodeClaim {0:?} has no image id in its status")]
    NoImageId(String),
}

fn annotation<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

/// `NodeClassDrift` when the NodeClass's static fields changed since the claim launched.
pub fn static_drift(claim: &NodeClaim, class: &AKSNodeClass) -> Option<&'static str> {
    static_fields_drifted(claim, class).then_some(NODE_CLASS_DRIFT)
}

/// The NodeClass's static fields changed since the claim launched: both carry the same hash
/// version and the hashes differ.
fn static_fields_drifted(claim: &NodeClaim, class: &AKSNodeClass) -> bool {
    let claim_version = annotation(&claim.metadata, AKS_NODE_CLASS_HASH_VERSION_ANNOTATION);
    let Some(claim_hash) = annotation(&claim.metadata, AKS_NODE_CLASS_HASH_ANNOTATION) else {
        return false;
    };
    claim_version == Some(AKS_NODE_CLASS_HASH_VERSION) && claim_hash != class.hash()
}

/// The node's drift, or `None`. `node` is the claim's node when it has registered (and is not
/// being deleted); `kubelet_identity_client_id` is the cluster's (`KUBELET_IDENTITY_CLIENT_ID`).
pub fn drift_reason(
    claim: &NodeClaim,
    class: &AKSNodeClass,
    node: Option<&Node>,
    kubelet_identity_client_id: &str,
) -> Result<Option<&'static str>, DriftError> {
    if static_fields_drifted(claim, class) {
        return Ok(Some(NODE_CLASS_DRIFT));
    }
    let node = node.filter(|n| n.metadata.deletion_timestamp.is_none());
    if let (Ok(want), Some(node)) = (images::kubernetes_version(class), node) {
        let have = node
            .status
            .as_ref()
            .and_then(|s| s.node_info.as_ref())
            .map(|i| i.kubelet_version.trim_start_matches('v'))
            .unwrap_or_default();
        if have != want {
            return Ok(Some(K8S_VERSION_DRIFT));
        }
    }
    if let Some(node) = node {
        // Nodes launched before the label existed are not rolled for lacking it.
        let have = node
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(LABEL_KUBELET_IDENTITY_CLIENT_ID))
            .filter(|v| !v.is_empty());
        if have.is_some_and(|id| id != kubelet_identity_client_id) {
            return Ok(Some(KUBELET_IDENTITY_DRIFT));
        }
    }
    let Ok(images) = images::ready_images(class) else {
        return Ok(None);
    };
    let name = || claim.metadata.name.clone().unwrap_or_default();
    if images.is_empty() {
        return Err(DriftError::NoImages(
            class.metadata.name.clone().unwrap_or_default(),
        ));
    }
    let image_id = claim
        .status
        .as_ref()
        .and_then(|s| s.image_id.as_deref())
        .filter(|i| !i.is_empty())
        .ok_or_else(|| DriftError::NoImageId(name()))?;
    if images.iter().any(|i| i.id == image_id) {
        Ok(None)
    } else {
        Ok(Some(IMAGE_DRIFT))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::images::{CONDITION_IMAGES_READY, CONDITION_KUBERNETES_VERSION_READY};
    use serde_json::json;

    const IMAGE_OLD: &str = "/CommunityGalleries/AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2/images/2204gen2containerd/versions/202410.09.0";
    const IMAGE_NEW: &str = "/CommunityGalleries/AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2/images/2204gen2containerd/versions/202411.12.0";

    fn class(generation: i64, observed: i64, images: &[&str], version: &str) -> AKSNodeClass {
        let ready = |t: &str| {
            json!({"type": t, "status": "True", "reason": t, "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": observed})
        };
        serde_json::from_value(json!({
            "apiVersion": "karpenter.azure.com/v1beta1", "kind": "AKSNodeClass",
            "metadata": {"name": "default", "generation": generation},
            "spec": {},
            "status": {
                "images": images.iter().map(|i| json!({"id": i, "requirements": []})).collect::<Vec<_>>(),
                "kubernetesVersion": version,
                "conditions": [ready(CONDITION_IMAGES_READY), ready(CONDITION_KUBERNETES_VERSION_READY)],
            }
        }))
        .unwrap()
    }

    fn claim(hash: Option<(&str, &str)>, image: Option<&str>) -> NodeClaim {
        let mut c = NodeClaim::default();
        c.metadata.name = Some("default-x".into());
        if let Some((hash, version)) = hash {
            c.metadata.annotations = Some(
                [
                    (AKS_NODE_CLASS_HASH_ANNOTATION.to_string(), hash.to_string()),
                    (
                        AKS_NODE_CLASS_HASH_VERSION_ANNOTATION.to_string(),
                        version.to_string(),
                    ),
                ]
                .into(),
            );
        }
        c.status = Some(karpenter_api::NodeClaimStatus {
            image_id: image.map(str::to_string),
            ..Default::default()
        });
        c
    }

    fn node(kubelet: &str, identity: Option<&str>) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "aks-default-x", "labels": identity.map(|i| json!({LABEL_KUBELET_IDENTITY_CLIENT_ID: i})).unwrap_or(json!({}))},
            "status": {"nodeInfo": {"kubeletVersion": kubelet, "architecture": "amd64", "bootID": "", "containerRuntimeVersion": "", "kernelVersion": "", "kubeProxyVersion": "", "machineID": "", "operatingSystem": "linux", "osImage": "", "systemUUID": ""}}
        }))
        .unwrap()
    }

    #[test]
    fn drift_reasons_in_upstreams_order() {
        let current = class(1, 1, &[IMAGE_NEW], "1.33.2");
        let hash = current.hash();
        let same = Some((hash.as_str(), AKS_NODE_CLASS_HASH_VERSION));
        let up_to_date = node("v1.33.2", Some("kubelet-id"));
        type Case<'a> = (
            &'a str,
            AKSNodeClass,
            NodeClaim,
            Option<Node>,
            Option<&'a str>,
        );
        let cases: Vec<Case> = vec![
            (
                "nothing changed",
                current.clone(),
                claim(same, Some(IMAGE_NEW)),
                Some(up_to_date.clone()),
                None,
            ),
            (
                "the hash changed",
                current.clone(),
                claim(
                    Some(("other", AKS_NODE_CLASS_HASH_VERSION)),
                    Some(IMAGE_OLD),
                ),
                Some(node("v1.32.0", None)),
                Some(NODE_CLASS_DRIFT),
            ),
            (
                "another hash version is not compared",
                current.clone(),
                claim(Some(("other", "v2")), Some(IMAGE_NEW)),
                Some(up_to_date.clone()),
                None,
            ),
            (
                "the cluster was upgraded",
                current.clone(),
                claim(same, Some(IMAGE_OLD)),
                Some(node("v1.32.5", Some("kubelet-id"))),
                Some(K8S_VERSION_DRIFT),
            ),
            (
                "no node yet: no version check",
                current.clone(),
                claim(same, Some(IMAGE_NEW)),
                None,
                None,
            ),
            (
                "the kubelet identity changed",
                current.clone(),
                claim(same, Some(IMAGE_NEW)),
                Some(node("v1.33.2", Some("old-id"))),
                Some(KUBELET_IDENTITY_DRIFT),
            ),
            (
                "no identity label is not drift",
                current.clone(),
                claim(same, Some(IMAGE_NEW)),
                Some(node("v1.33.2", None)),
                None,
            ),
            (
                "a newer image",
                current.clone(),
                claim(same, Some(IMAGE_OLD)),
                Some(up_to_date.clone()),
                Some(IMAGE_DRIFT),
            ),
            (
                "a status of an older generation is not read",
                class(2, 1, &[IMAGE_NEW], "1.34.0"),
                claim(None, Some(IMAGE_OLD)),
                Some(up_to_date.clone()),
                None,
            ),
        ];
        for (name, class, claim, node, want) in cases {
            assert_eq!(
                drift_reason(&claim, &class, node.as_ref(), "kubelet-id"),
                Ok(want),
                "{name}"
            );
        }
    }

    #[test]
    fn images_ready_but_unusable_is_an_error() {
        let c = class(1, 1, &[], "1.33.2");
        assert!(matches!(
            drift_reason(&claim(None, Some(IMAGE_NEW)), &c, None, ""),
            Err(DriftError::NoImages(_))
        ));
        let c = class(1, 1, &[IMAGE_NEW], "1.33.2");
        assert!(matches!(
            drift_reason(&claim(None, None), &c, None, ""),
            Err(DriftError::NoImageId(_))
        ));
    }
}
