//! `karpenter.azure.com/v1alpha2` AKSNodeClasses as `v1beta1`. Upstream serves both versions
//! with one schema and no conversion webhook, so the API server converts by relabelling; this
//! does the same offline, for `karpenter-rs convert`.

use karpenter_api::convert::{Conversion, ConvertError};
use serde_json::json;

use super::{DEPRECATED_VERSION, GROUP, VERSION};

/// Converts a v1alpha2 AKSNodeClass: only `apiVersion` changes.
pub fn convert_v1alpha2(object: &serde_json::Value) -> Result<Conversion, ConvertError> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let from = format!("{GROUP}/{DEPRECATED_VERSION}");
    if api_version != from || kind != "AKSNodeClass" {
        // The error's wording names karpenter.sh's kinds, but its fields say what was given.
        return Err(ConvertError::NotV1beta1 {
            api_version: api_version.into(),
            kind: kind.into(),
        });
    }
    let to = format!("{GROUP}/{VERSION}");
    let mut out = object.clone();
    out["apiVersion"] = json!(to);
    Ok(Conversion {
        object: out,
        changes: vec![format!(
            "apiVersion: {from} → {to} (the same schema; {DEPRECATED_VERSION} is deprecated)"
        )],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_api_version_changes() {
        let object = json!({
            "apiVersion": "karpenter.azure.com/v1alpha2",
            "kind": "AKSNodeClass",
            "metadata": {"name": "default"},
            "spec": {"imageFamily": "AzureLinux", "tags": {"team": "a"}},
        });
        let converted = convert_v1alpha2(&object).unwrap();
        let mut expected = object.clone();
        expected["apiVersion"] = json!("karpenter.azure.com/v1beta1");
        assert_eq!(converted.object, expected);
        assert_eq!(converted.changes.len(), 1);
    }

    #[test]
    fn other_objects_are_refused() {
        let object = json!({"apiVersion": "karpenter.azure.com/v1beta1", "kind": "AKSNodeClass"});
        assert!(convert_v1alpha2(&object).is_err());
    }
}
