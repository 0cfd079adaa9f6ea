//! `karpenter.k8s.aws/v1beta1` EC2NodeClasses as `v1`, the way upstream's conversion webhook
//! (v1.0) turned them, so `karpenter-rs convert` migrates them offline with the NodePools:
//! - a standard AMI family without `amiSelectorTerms` becomes an alias term
//!   (`al2023@latest`, or the version the `…/v1-alias-version` annotation pins) and loses
//!   `amiFamily`; with terms, both are kept;
//! - Ubuntu, gone in v1, becomes AL2 (same user data format) with Ubuntu's root volume when
//!   none was given, and without terms a placeholder term that marks the class incompatible;
//!   the `…/v1beta1-ubuntu` annotation records what was changed, as upstream's does;
//! - any other family is Custom;
//! - selector terms, block devices and the other fields carry over; status keeps the resolved
//!   subnets, security groups, AMIs (requirements without `minValues`) and instance profile.

use karpenter_api::convert::{Conversion, ConvertError};
use serde_json::{Map, Value, json};

use super::GROUP;

/// The annotation pinning the alias version a v1beta1 class converts to.
pub const ALIAS_VERSION_ANNOTATION: &str = "compatibility.karpenter.k8s.aws/v1-alias-version";
/// The annotation recording what the conversion of an Ubuntu class changed.
pub const UBUNTU_COMPATIBILITY_ANNOTATION: &str = "compatibility.karpenter.k8s.aws/v1beta1-ubuntu";

const FAMILIES_WITH_ALIASES: [&str; 5] = [
    "AL2",
    "AL2023",
    "Bottlerocket",
    "Windows2019",
    "Windows2022",
];

/// Converts a v1beta1 EC2NodeClass to v1.
pub fn convert_v1beta1(object: &Value) -> Result<Conversion, ConvertError> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    if api_version != format!("{GROUP}/v1beta1") || kind != "EC2NodeClass" {
        return Err(ConvertError::NotV1beta1 {
            api_version: api_version.into(),
            kind: kind.into(),
        });
    }
    let mut out = object.clone();
    let mut changes = vec![format!("apiVersion: {GROUP}/v1beta1 → {GROUP}/v1")];
    out["apiVersion"] = json!(format!("{GROUP}/v1"));
    let alias_version = out
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
        .and_then(|a| a.remove(ALIAS_VERSION_ANNOTATION))
        .and_then(|v| v.as_str().map(str::to_string));
    let spec = out
        .get_mut("spec")
        .and_then(Value::as_object_mut)
        .ok_or(ConvertError::Malformed("spec"))?;
    let family = spec
        .get("amiFamily")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let has_terms = spec
        .get("amiSelectorTerms")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    let mut ubuntu_changes = Vec::new();
    match family.as_str() {
        f if FAMILIES_WITH_ALIASES.contains(&f) => {
            if !has_terms {
                let alias = format!(
                    "{}@{}",
                    f.to_lowercase(),
                    alias_version.as_deref().unwrap_or("latest")
                );
                spec.remove("amiFamily");
                spec.insert("amiSelectorTerms".into(), json!([{"alias": alias}]));
                changes.push(format!(
                    "spec.amiFamily {f} with no amiSelectorTerms → spec.amiSelectorTerms [{{alias: {alias}}}]"
                ));
            }
        }
        "Ubuntu" => {
            ubuntu_changes.push("amiFamily");
            spec.insert("amiFamily".into(), json!("AL2"));
            changes.push(
                "spec.amiFamily Ubuntu → AL2: v1 has no Ubuntu family; AL2 bootstraps Ubuntu AMIs alike"
                    .into(),
            );
            if spec.get("blockDeviceMappings").is_none_or(Value::is_null) {
                ubuntu_changes.push("blockDeviceMappings");
                spec.insert(
                    "blockDeviceMappings".into(),
                    json!([{"deviceName": "/dev/sda1", "rootVolume": true, "ebs": {"encrypted": true, "volumeType": "gp3", "volumeSize": "20Gi"}}]),
                );
                changes.push(
                    "spec.blockDeviceMappings set to Ubuntu's default root volume (/dev/sda1, 20Gi gp3, encrypted)"
                        .into(),
                );
            }
            if !has_terms {
                ubuntu_changes.push("incompatible");
                spec.insert(
                    "amiSelectorTerms".into(),
                    json!([{"id": "ami-placeholder"}]),
                );
                changes.push(
                    "spec.amiSelectorTerms: Ubuntu without terms has no v1 equivalent; a placeholder term marks the class incompatible: select your Ubuntu AMIs by id, name or tags"
                        .into(),
                );
            }
        }
        other => {
            spec.insert("amiFamily".into(), json!("Custom"));
            if other != "Custom" {
                changes.push(format!("spec.amiFamily {other:?} → Custom"));
            }
        }
    }
    if !ubuntu_changes.is_empty() {
        let annotations = out["metadata"]
            .as_object_mut()
            .ok_or(ConvertError::Malformed("metadata"))?
            .entry("annotations")
            .or_insert_with(|| json!({}));
        annotations[UBUNTU_COMPATIBILITY_ANNOTATION] = json!(ubuntu_changes.join(","));
    }
    if let Some(status) = out.get_mut("status").and_then(Value::as_object_mut) {
        convert_status(status);
        changes.push(
            "status: resolved subnets, security groups, AMIs and instance profile kept; conditions are recomputed by the controller"
                .into(),
        );
    }
    Ok(Conversion {
        object: out,
        changes,
    })
}

fn convert_status(status: &mut Map<String, Value>) {
    let keep = |item: &Value, fields: &[&str]| {
        let mut kept = Map::new();
        for f in fields {
            if let Some(v) = item.get(*f) {
                kept.insert(f.to_string(), v.clone());
            }
        }
        Value::Object(kept)
    };
    let mut converted = Map::new();
    for (field, keys) in [
        ("subnets", &["id", "zone"][..]),
        ("securityGroups", &["id", "name"][..]),
    ] {
        if let Some(items) = status.get(field).and_then(Value::as_array) {
            let items: Vec<Value> = items.iter().map(|i| keep(i, keys)).collect();
            converted.insert(field.into(), Value::Array(items));
        }
    }
    if let Some(amis) = status.get("amis").and_then(Value::as_array) {
        let amis: Vec<Value> = amis
            .iter()
            .map(|ami| {
                let mut kept = keep(ami, &["id", "name"]);
                if let Some(reqs) = ami.get("requirements").and_then(Value::as_array) {
                    let reqs: Vec<Value> = reqs
                        .iter()
                        .map(|r| keep(r, &["key", "operator", "values"]))
                        .collect();
                    kept["requirements"] = Value::Array(reqs);
                }
                kept
            })
            .collect();
        converted.insert("amis".into(), Value::Array(amis));
    }
    if let Some(profile) = status.get("instanceProfile") {
        converted.insert("instanceProfile".into(), profile.clone());
    }
    *status = converted;
}
