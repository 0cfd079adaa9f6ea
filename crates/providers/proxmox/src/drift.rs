//! Why a Proxmox node drifted, as upstream's `IsDrifted` says it: the NodeClass changed
//! (`NodeClassDrift`, by the hash its NodeClaim recorded at launch) or the template it was
//! cloned from was replaced (`ImageDrift`: the template its zone clones from now has another
//! hash than the NodeClaim's image id).

use karpenter_api::NodeClaim;
use karpenter_api::labels::ZONE_LABEL;

use crate::apis::{
    PROXMOX_NODE_CLASS_HASH_ANNOTATION, PROXMOX_NODE_CLASS_HASH_VERSION,
    PROXMOX_NODE_CLASS_HASH_VERSION_ANNOTATION, ProxmoxNodeClass,
};
use crate::templates::{TemplateVm, for_zone};

/// The NodeClass's hash changed since the node was launched.
pub const NODE_CLASS_DRIFT: &str = "NodeClassDrift";
/// The node's template was replaced.
pub const IMAGE_DRIFT: &str = "ImageDrift";

fn annotation<'a>(claim: &'a NodeClaim, key: &str) -> Option<&'a str> {
    claim
        .metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// `NodeClassDrift` when the NodeClaim's recorded hash, of the current hash version, differs
/// from the NodeClass's. A claim of another hash version (upstream's, an older one) never
/// drifts by hash, as upstream has it.
pub fn static_drift(claim: &NodeClaim, class: &ProxmoxNodeClass) -> Option<&'static str> {
    let version = annotation(claim, PROXMOX_NODE_CLASS_HASH_VERSION_ANNOTATION)?;
    let hash = annotation(claim, PROXMOX_NODE_CLASS_HASH_ANNOTATION)?;
    (version == PROXMOX_NODE_CLASS_HASH_VERSION && hash != class.hash()).then_some(NODE_CLASS_DRIFT)
}

/// `ImageDrift` when the template the NodeClass clones from in the node's region and zone has
/// a hash other than the NodeClaim's image id. Nothing when the claim has no image id, no
/// Proxmox providerID, or its zone has no template any more (upstream: not drifted).
pub fn image_drift(
    claim: &NodeClaim,
    class: &ProxmoxNodeClass,
    templates: &[TemplateVm],
) -> Option<&'static str> {
    let status = claim.status.as_ref()?;
    let image = status.image_id.as_deref().filter(|i| !i.is_empty())?;
    let (region, _) = crate::provider_id::parse(status.provider_id.as_deref()?)?;
    let zone = claim.metadata.labels.as_ref()?.get(ZONE_LABEL)?;
    let template = for_zone(templates, region, zone, &class.template_ids(region))?;
    (template.hash != image).then_some(IMAGE_DRIFT)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::templates::TemplateConfig;

    fn class() -> ProxmoxNodeClass {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.proxmox.sinextra.dev/v1alpha1",
            "kind": "ProxmoxNodeClass",
            "metadata": {"name": "default"},
            "spec": {"instanceTemplateRef": {"kind": "ProxmoxUnmanagedTemplate", "name": "k3s"}},
            "status": {"selectedZones": ["pve/pve1/9000", "pve/pve2/9001"]},
        }))
        .unwrap()
    }

    fn claim(annotations: serde_json::Value, image: Option<&str>, zone: &str) -> NodeClaim {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "default-x", "annotations": annotations, "labels": {ZONE_LABEL: zone}},
            "spec": {"nodeClassRef": {"group": "karpenter.proxmox.sinextra.dev", "kind": "ProxmoxNodeClass", "name": "default"}, "requirements": []},
            "status": {"providerID": "proxmox://pve/20001", "imageID": image},
        }))
        .unwrap()
    }

    fn template(zone: &str, vmid: u32, hash: &str) -> TemplateVm {
        let description = format!("Hash: {hash}");
        TemplateVm::new(
            "pve",
            zone,
            vmid,
            "k3s",
            &TemplateConfig {
                description: &description,
                ..Default::default()
            },
        )
    }

    #[test]
    fn node_class_drift_by_hash_of_the_same_version_only() {
        let c = class();
        let hash = c.hash();
        let cases = [
            (json!({}), None),
            (
                json!({PROXMOX_NODE_CLASS_HASH_ANNOTATION: hash, PROXMOX_NODE_CLASS_HASH_VERSION_ANNOTATION: PROXMOX_NODE_CLASS_HASH_VERSION}),
                None,
            ),
            (
                json!({PROXMOX_NODE_CLASS_HASH_ANNOTATION: "1", PROXMOX_NODE_CLASS_HASH_VERSION_ANNOTATION: PROXMOX_NODE_CLASS_HASH_VERSION}),
                Some(NODE_CLASS_DRIFT),
            ),
            (
                json!({PROXMOX_NODE_CLASS_HASH_ANNOTATION: "1", PROXMOX_NODE_CLASS_HASH_VERSION_ANNOTATION: "v1"}),
                None,
            ),
        ];
        for (annotations, want) in cases {
            assert_eq!(
                static_drift(&claim(annotations.clone(), None, "pve1"), &c),
                want,
                "{annotations}"
            );
        }
    }

    #[test]
    fn image_drift_when_the_zones_template_changed() {
        let c = class();
        let templates = [template("pve1", 9000, "111"), template("pve2", 9001, "222")];
        let cases = [
            (Some("111"), "pve1", None),
            (Some("999"), "pve1", Some(IMAGE_DRIFT)),
            (Some("111"), "pve2", Some(IMAGE_DRIFT)),
            (None, "pve1", None),
            // A zone whose template is gone: upstream does not call that drift.
            (Some("111"), "pve3", None),
        ];
        for (image, zone, want) in cases {
            assert_eq!(
                image_drift(&claim(json!({}), image, zone), &c, &templates),
                want,
                "{image:?} in {zone}"
            );
        }
    }
}
