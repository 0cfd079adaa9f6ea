//! Turns `karpenter.sh/v1beta1` NodePools and NodeClaims into `karpenter.sh/v1`, the way
//! upstream's v1 migration guide and conversion webhook do, and says what changed.

use serde_json::{Map, Value, json};

use crate::crd::GroupKind;

/// The result of converting one object.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversion {
    /// The `karpenter.sh/v1` object.
    pub object: Value,
    /// What was changed and why, one sentence each, for the user to review.
    pub changes: Vec<String>,
}

/// Why an object could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    /// The object is not a v1beta1 NodePool or NodeClaim.
    #[error("{api_version} {kind} is not a karpenter.sh/v1beta1 NodePool or NodeClaim")]
    NotV1beta1 {
        /// The object's apiVersion.
        api_version: String,
        /// The object's kind.
        kind: String,
    },
    /// v1 requires `nodeClassRef.group` and `kind`, and nothing says which provider this is.
    #[error(
        "spec.template.spec.nodeClassRef names no kind and the requirements name no provider; pass the NodeClass as GROUP/KIND (for example karpenter.k8s.aws/EC2NodeClass)"
    )]
    UnknownNodeClass,
    /// The object's shape is not a NodePool's.
    #[error("{0} is not an object")]
    Malformed(&'static str),
}

/// The annotation upstream's AWS provider keeps v1beta1 kubelet settings in during migration.
pub const AWS_KUBELET_COMPATIBILITY_ANNOTATION: &str =
    "compatibility.karpenter.sh/v1beta1-kubelet-conversion";

/// Converts a v1beta1 object. `providers` are the NodeClasses the binary knows, one per
/// provider; a provider's labels share its NodeClass's group as their domain, which is how
/// the provider is inferred from the requirements. `node_class` (`(group, kind)`) is used
/// when neither the nodeClassRef nor the requirements tell which provider the NodePool is for.
pub fn convert_v1beta1(
    object: &Value,
    node_class: Option<(&str, &str)>,
    providers: &[GroupKind],
) -> Result<Conversion, ConvertError> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    if api_version != "karpenter.sh/v1beta1" || !matches!(kind, "NodePool" | "NodeClaim") {
        return Err(ConvertError::NotV1beta1 {
            api_version: api_version.into(),
            kind: kind.into(),
        });
    }
    let mut out = object.clone();
    let mut changes = Vec::new();
    out["apiVersion"] = json!("karpenter.sh/v1");
    changes.push("apiVersion: karpenter.sh/v1beta1 → karpenter.sh/v1".to_string());
    if kind == "NodePool" {
        convert_node_pool(&mut out, node_class, providers, &mut changes)?;
    } else {
        let spec = out
            .get_mut("spec")
            .and_then(Value::as_object_mut)
            .ok_or(ConvertError::Malformed("spec"))?;
        let provider =
            convert_node_class_ref(spec, "spec", &[], node_class, providers, &mut changes)?;
        if let Some(kubelet) = spec.remove("kubelet") {
            changes.push(kubelet_note(&provider, &kubelet, "spec"));
        }
    }
    Ok(Conversion {
        object: out,
        changes,
    })
}

fn convert_node_pool(
    out: &mut Value,
    node_class: Option<(&str, &str)>,
    providers: &[GroupKind],
    changes: &mut Vec<String>,
) -> Result<(), ConvertError> {
    let spec = out
        .get_mut("spec")
        .and_then(Value::as_object_mut)
        .ok_or(ConvertError::Malformed("spec"))?;

    let disruption = spec
        .entry("disruption")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or(ConvertError::Malformed("spec.disruption"))?;
    if disruption.get("consolidationPolicy") == Some(&json!("WhenUnderutilized")) {
        disruption.insert(
            "consolidationPolicy".into(),
            json!("WhenEmptyOrUnderutilized"),
        );
        changes.push(
            "spec.disruption.consolidationPolicy: WhenUnderutilized is now WhenEmptyOrUnderutilized"
                .into(),
        );
    }
    if !disruption.contains_key("consolidateAfter") {
        disruption.insert("consolidateAfter".into(), json!("0s"));
        changes.push("spec.disruption.consolidateAfter: set to 0s, the v1beta1 behaviour (v1 allows it with every policy)".into());
    }
    let expire_after = disruption.remove("expireAfter");

    let template = spec
        .entry("template")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or(ConvertError::Malformed("spec.template"))?;
    let template_labels: Vec<String> = template
        .get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .map(|l| l.keys().cloned().collect())
        .unwrap_or_default();
    let template_spec = template
        .entry("spec")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or(ConvertError::Malformed("spec.template.spec"))?;
    if let Some(expire_after) = expire_after {
        changes.push(format!(
            "spec.disruption.expireAfter ({}) moved to spec.template.spec.expireAfter",
            expire_after.as_str().unwrap_or("?")
        ));
        template_spec.insert("expireAfter".into(), expire_after);
    }
    let provider = convert_node_class_ref(
        template_spec,
        "spec.template.spec",
        &template_labels,
        node_class,
        providers,
        changes,
    )?;
    if template_spec.remove("resources").is_some() {
        changes.push("spec.template.spec.resources removed: v1 NodePools have no resources field (NodeClaims compute theirs)".into());
    }
    if let Some(kubelet) = template_spec.remove("kubelet") {
        changes.push(kubelet_note(&provider, &kubelet, "spec.template.spec"));
        if provider.0 == "karpenter.k8s.aws" {
            let annotations = out["metadata"]
                .as_object_mut()
                .ok_or(ConvertError::Malformed("metadata"))?
                .entry("annotations")
                .or_insert_with(|| json!({}));
            annotations[AWS_KUBELET_COMPATIBILITY_ANNOTATION] = json!(kubelet.to_string());
        }
    }
    Ok(())
}

fn kubelet_note(provider: &(String, String), kubelet: &Value, path: &str) -> String {
    format!(
        "{path}.kubelet removed: v1 moved kubelet settings to the NodeClass; add `kubelet: {kubelet}` to the spec of your {} (group {}){}",
        provider.1,
        provider.0,
        if provider.0 == "karpenter.k8s.aws" {
            format!(
                ", as upstream's migration does via the {AWS_KUBELET_COMPATIBILITY_ANNOTATION} annotation kept on the NodePool"
            )
        } else {
            String::new()
        }
    )
}

/// Rewrites nodeClassRef `{apiVersion, kind, name}` to `{group, kind, name}`; returns the
/// provider's `(group, kind)`.
fn convert_node_class_ref(
    spec: &mut Map<String, Value>,
    path: &str,
    extra_label_keys: &[String],
    node_class: Option<(&str, &str)>,
    providers: &[GroupKind],
    changes: &mut Vec<String>,
) -> Result<(String, String), ConvertError> {
    let requirement_keys: Vec<String> = spec
        .get("requirements")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(|r| r["key"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let reference = spec
        .entry("nodeClassRef")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or(ConvertError::Malformed("nodeClassRef"))?;
    let api_version = reference.remove("apiVersion");
    let group_from_api_version = api_version
        .as_ref()
        .and_then(Value::as_str)
        .map(|v| v.split('/').next().unwrap_or(v).to_string());
    let kind = reference
        .get("kind")
        .and_then(Value::as_str)
        .map(str::to_string);
    let inferred = providers.iter().find(|p| {
        requirement_keys
            .iter()
            .chain(extra_label_keys)
            .any(|k| crate::labels::label_domain(k) == p.group)
    });
    let (group, kind, how) = match (group_from_api_version, kind, inferred, node_class) {
        (Some(group), Some(kind), _, _) => (group, kind, "from its apiVersion"),
        (Some(group), None, _, _) => {
            let kind = providers
                .iter()
                .find(|p| p.group == group)
                .map(|p| p.kind.to_string())
                .ok_or(ConvertError::UnknownNodeClass)?;
            (group, kind, "from its apiVersion")
        }
        (None, _, _, Some((group, kind))) => (group.into(), kind.into(), "as given"),
        (None, Some(kind), _, None) => {
            let group = providers
                .iter()
                .find(|p| p.kind == kind)
                .map(|p| p.group.to_string())
                .ok_or(ConvertError::UnknownNodeClass)?;
            (group, kind, "from its kind")
        }
        (None, None, Some(p), None) => (
            p.group.to_string(),
            p.kind.to_string(),
            "inferred from the provider labels in the requirements",
        ),
        (None, None, None, None) => return Err(ConvertError::UnknownNodeClass),
    };
    let name = reference.remove("name").unwrap_or(json!(""));
    reference.clear();
    reference.insert("group".into(), json!(group));
    reference.insert("kind".into(), json!(kind));
    reference.insert("name".into(), name);
    changes.push(format!(
        "{path}.nodeClassRef: now {{group: {group}, kind: {kind}}} ({how}); v1 requires both"
    ));
    Ok((group, kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two providers, as a binary's registry would list them.
    const PROVIDERS: [GroupKind; 2] = [
        GroupKind::new("karpenter.k8s.aws", "EC2NodeClass"),
        GroupKind::new("karpenter.azure.com", "AKSNodeClass"),
    ];

    fn seed_004() -> Value {
        // The v1beta1 AKS NodePool of seed article 004.
        json!({
            "apiVersion": "karpenter.sh/v1beta1",
            "kind": "NodePool",
            "metadata": {"name": "default"},
            "spec": {
                "disruption": {"consolidationPolicy": "WhenUnderutilized", "expireAfter": "Never"},
                "template": {"spec": {
                    "nodeClassRef": {"name": "default"},
                    "requirements": [
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                        {"key": "karpenter.azure.com/sku-family", "operator": "In", "values": ["D"]},
                    ],
                }},
                "limits": {"cpu": "1000", "memory": "1000Gi"},
                "weight": 100,
            },
        })
    }

    #[test]
    fn converts_the_aks_seed() {
        let c = convert_v1beta1(&seed_004(), None, &PROVIDERS).unwrap();
        let spec = &c.object["spec"];
        assert_eq!(c.object["apiVersion"], "karpenter.sh/v1");
        assert_eq!(
            spec["disruption"]["consolidationPolicy"],
            "WhenEmptyOrUnderutilized"
        );
        assert_eq!(spec["disruption"]["consolidateAfter"], "0s");
        assert!(spec["disruption"].get("expireAfter").is_none());
        assert_eq!(spec["template"]["spec"]["expireAfter"], "Never");
        assert_eq!(
            spec["template"]["spec"]["nodeClassRef"],
            json!({"group": "karpenter.azure.com", "kind": "AKSNodeClass", "name": "default"})
        );
        assert_eq!(spec["weight"], 100);
        assert!(
            c.changes
                .iter()
                .any(|c| c.contains("WhenEmptyOrUnderutilized"))
        );
        assert!(c.changes.iter().any(|c| c.contains("inferred")));
    }

    #[test]
    fn aws_kubelet_moves_to_an_annotation() {
        let mut np = seed_004();
        np["spec"]["template"]["spec"]["nodeClassRef"] = json!({"apiVersion": "karpenter.k8s.aws/v1beta1", "kind": "EC2NodeClass", "name": "default"});
        np["spec"]["template"]["spec"]["kubelet"] = json!({"maxPods": 110});
        np["spec"]["disruption"] =
            json!({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"});
        let c = convert_v1beta1(&np, None, &PROVIDERS).unwrap();
        let template = &c.object["spec"]["template"]["spec"];
        assert!(template.get("kubelet").is_none());
        assert_eq!(template["nodeClassRef"]["group"], "karpenter.k8s.aws");
        assert_eq!(
            c.object["metadata"]["annotations"][AWS_KUBELET_COMPATIBILITY_ANNOTATION],
            r#"{"maxPods":110}"#
        );
        assert_eq!(c.object["spec"]["disruption"]["consolidateAfter"], "30s");
        assert_eq!(
            c.object["spec"]["disruption"]["consolidationPolicy"],
            "WhenEmpty"
        );
    }

    #[test]
    fn unknown_provider_needs_a_node_class() {
        let mut np = seed_004();
        np["spec"]["template"]["spec"]["requirements"] = json!([]);
        assert_eq!(
            convert_v1beta1(&np, None, &PROVIDERS),
            Err(ConvertError::UnknownNodeClass)
        );
        let c = convert_v1beta1(
            &np,
            Some(("karpenter.kwok.sh", "KWOKNodeClass")),
            &PROVIDERS,
        )
        .unwrap();
        assert_eq!(
            c.object["spec"]["template"]["spec"]["nodeClassRef"]["kind"],
            "KWOKNodeClass"
        );
    }

    #[test]
    fn v1_objects_are_refused() {
        let mut np = seed_004();
        np["apiVersion"] = json!("karpenter.sh/v1");
        assert!(matches!(
            convert_v1beta1(&np, None, &PROVIDERS),
            Err(ConvertError::NotV1beta1 { .. })
        ));
    }
}
