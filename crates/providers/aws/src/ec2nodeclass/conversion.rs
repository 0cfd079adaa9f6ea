//! `karpenter.k8s.aws/v1beta1` EC2NodeClasses as `v1`, the way upstream's conversion webhook
//! (Karpenter v1.0.x, the only releases that served both versions) turned them, so
//! `karpenter-rs convert` migrates them offline together with their NodePools.
//!
//! What the webhook did, and so what this does:
//! - a standard AMI family (AL2, AL2023, Bottlerocket, Windows2019, Windows2022) without
//!   `amiSelectorTerms` becomes a single alias term, `<family>@latest` (or the version the
//!   `…/v1-alias-version` annotation pins), and loses `amiFamily`; with terms, both are kept;
//! - Ubuntu, gone in v1, becomes AL2 (same user data format), with Ubuntu's root volume when
//!   no block devices were given and, without terms, a placeholder term that leaves the class
//!   unusable until AMIs are selected; the `…/v1beta1-ubuntu` annotation records which of
//!   these were done;
//! - any other family (Custom, or none) is Custom;
//! - every other v1beta1 field carries over unchanged, and fields v1beta1 does not have are
//!   dropped (the webhook decoded into the v1beta1 types); status carries over likewise.
//!
//! The webhook converted objects the API server had already defaulted; a manifest has not been,
//! so where v1beta1 and v1 default differently (the IMDS hop limit) the v1beta1 default is
//! written out or pointed out. The kubelet settings the v1 EC2NodeClass gained are not moved
//! here: they live on v1beta1 NodePools, whose conversion (`karpenter_api::convert`) reports
//! them. Where the webhook's output would not be a valid v1 object (a Custom class without
//! terms, a tag v1 reserves), a change note says so and validation reports the rest.

use karpenter_api::convert::{Conversion, ConvertError};
use serde_json::{Map, Value, json};

use super::GROUP;

/// The annotation pinning the version of the alias a v1beta1 class converts to (upstream wrote
/// it when converting a pinned alias back to v1beta1); the conversion consumes it.
pub const ALIAS_VERSION_ANNOTATION: &str = "compatibility.karpenter.k8s.aws/v1-alias-version";
/// The annotation recording what the conversion of an Ubuntu class changed: a comma-separated
/// list of `amiFamily`, `blockDeviceMappings` and `incompatible`.
pub const UBUNTU_COMPATIBILITY_ANNOTATION: &str = "compatibility.karpenter.k8s.aws/v1beta1-ubuntu";

/// The families v1 has aliases for; their alias is the lowercased name.
const FAMILIES_WITH_ALIASES: [&str; 5] = [
    "AL2",
    "AL2023",
    "Bottlerocket",
    "Windows2019",
    "Windows2022",
];

/// The fields of a v1beta1 EC2NodeClass spec; the webhook carried exactly these.
const SPEC_FIELDS: &[&str] = &[
    "amiFamily",
    "amiSelectorTerms",
    "associatePublicIPAddress",
    "blockDeviceMappings",
    "context",
    "detailedMonitoring",
    "instanceProfile",
    "instanceStorePolicy",
    "metadataOptions",
    "role",
    "securityGroupSelectorTerms",
    "subnetSelectorTerms",
    "tags",
    "userData",
];
const SUBNET_TERM_FIELDS: &[&str] = &["id", "tags"];
const SECURITY_GROUP_TERM_FIELDS: &[&str] = &["id", "name", "tags"];
const AMI_TERM_FIELDS: &[&str] = &["id", "name", "owner", "tags"];
const BLOCK_DEVICE_MAPPING_FIELDS: &[&str] = &["deviceName", "ebs", "rootVolume"];
const EBS_FIELDS: &[&str] = &[
    "deleteOnTermination",
    "encrypted",
    "iops",
    "kmsKeyID",
    "snapshotID",
    "throughput",
    "volumeSize",
    "volumeType",
];
const METADATA_OPTIONS_FIELDS: &[&str] = &[
    "httpEndpoint",
    "httpProtocolIPv6",
    "httpPutResponseHopLimit",
    "httpTokens",
];

/// v1beta1's default `httpPutResponseHopLimit` (v1's is 1).
const V1BETA1_HOP_LIMIT: i64 = 2;
/// The tag v1 reserves for itself (v1beta1 allowed users to set it).
const RESERVED_V1_TAG: &str = "eks:eks-cluster-name";

/// Converts a `karpenter.k8s.aws/v1beta1` EC2NodeClass to `karpenter.k8s.aws/v1`, returning
/// the v1 object and one sentence per change.
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
    let alias_version = take_annotation(&mut out, ALIAS_VERSION_ANNOTATION)?;

    let spec = out
        .get_mut("spec")
        .and_then(Value::as_object_mut)
        .ok_or(ConvertError::Malformed("spec"))?;
    drop_unknown_fields(spec, &mut changes);
    default_hop_limit(spec, &mut changes);

    let family = spec.get("amiFamily").cloned();
    let has_terms = spec
        .get("amiSelectorTerms")
        .and_then(Value::as_array)
        .is_some_and(|terms| !terms.is_empty());
    let mut alias_version_used = false;
    let mut ubuntu = Vec::new();
    match family.as_ref().and_then(Value::as_str) {
        Some(f) if FAMILIES_WITH_ALIASES.contains(&f) => {
            if !has_terms {
                alias_version_used = alias_version.is_some();
                let version = alias_version.as_deref().unwrap_or("latest");
                let alias = format!("{}@{version}", f.to_lowercase());
                spec.remove("amiFamily");
                spec.insert("amiSelectorTerms".into(), json!([{"alias": alias}]));
                changes.push(format!(
                    "spec.amiFamily {f} with no amiSelectorTerms → spec.amiSelectorTerms [{{alias: {alias}}}]{}",
                    if alias_version_used {
                        format!(" (the version {ALIAS_VERSION_ANNOTATION} pinned)")
                    } else {
                        String::new()
                    }
                ));
                if f.starts_with("Windows") && version != "latest" {
                    changes.push(format!(
                        "spec.amiSelectorTerms: v1 accepts only {}@latest for Windows, so this class will not validate until the version is latest",
                        f.to_lowercase()
                    ));
                }
            }
        }
        Some("Ubuntu") => {
            ubuntu.push("amiFamily");
            spec.insert("amiFamily".into(), json!("AL2"));
            changes.push(
                "spec.amiFamily Ubuntu → AL2: v1 has no Ubuntu family, and AL2's user data is the same format (compatibility is not guaranteed; Custom is the fallback)"
                    .into(),
            );
            if spec.get("blockDeviceMappings").is_none_or(Value::is_null) {
                ubuntu.push("blockDeviceMappings");
                spec.insert(
                    "blockDeviceMappings".into(),
                    json!([{"deviceName": "/dev/sda1", "rootVolume": true, "ebs": {"encrypted": true, "volumeType": "gp3", "volumeSize": "20Gi"}}]),
                );
                changes.push(
                    "spec.blockDeviceMappings: none given, so Ubuntu's default root volume is written out (/dev/sda1, 20Gi gp3, encrypted), as AL2's default differs"
                        .into(),
                );
            }
            if !has_terms {
                ubuntu.push("incompatible");
                spec.insert(
                    "amiSelectorTerms".into(),
                    json!([{"id": "ami-placeholder"}]),
                );
                changes.push(
                    "spec.amiSelectorTerms: v1 cannot discover Ubuntu AMIs: a placeholder term [{id: ami-placeholder}] is written and the class is marked incompatible, which keeps it NotReady and launching nothing until you select your Ubuntu AMIs by id, name or tags"
                        .into(),
                );
            }
            let annotation = ubuntu.join(",");
            changes.push(format!(
                "metadata.annotations: {UBUNTU_COMPATIBILITY_ANNOTATION}: {annotation} records what the Ubuntu conversion changed"
            ));
        }
        other => {
            spec.insert("amiFamily".into(), json!("Custom"));
            match (other, &family) {
                (Some("Custom"), _) => {}
                (Some(other), _) => changes.push(format!(
                    "spec.amiFamily {other:?} is not a v1beta1 family → Custom"
                )),
                (None, None | Some(Value::Null)) => changes.push(
                    "spec.amiFamily missing (v1beta1 required it) → Custom, as upstream's conversion treats it"
                        .into(),
                ),
                (None, Some(other)) => changes.push(format!(
                    "spec.amiFamily {other} is not a family name → Custom"
                )),
            }
            if !has_terms {
                changes.push(
                    "spec.amiSelectorTerms: a Custom class needs terms (v1beta1 required them too) and the conversion adds none, so this class will not validate: select the AMIs by id, name or tags"
                        .into(),
                );
            }
            changes.push(
                "spec.amiFamily Custom: v1 expects your userData to register nodes with the karpenter.sh/unregistered:NoExecute taint, which Karpenter then removes"
                    .into(),
            );
        }
    }
    if spec
        .get("tags")
        .and_then(Value::as_object)
        .is_some_and(|tags| tags.contains_key(RESERVED_V1_TAG))
    {
        changes.push(format!(
            "spec.tags: v1 reserves {RESERVED_V1_TAG} (Karpenter sets it), so this class will not validate until the tag is removed"
        ));
    }
    if alias_version.is_some() && !alias_version_used {
        changes.push(format!(
            "metadata.annotations: {ALIAS_VERSION_ANNOTATION} removed; it only pins an alias, and this class got none"
        ));
    }
    if !ubuntu.is_empty() {
        let annotations = out
            .as_object_mut()
            .ok_or(ConvertError::Malformed("metadata"))?
            .entry("metadata")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .ok_or(ConvertError::Malformed("metadata"))?
            .entry("annotations")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .ok_or(ConvertError::Malformed("metadata.annotations"))?;
        annotations.insert(
            UBUNTU_COMPATIBILITY_ANNOTATION.into(),
            json!(ubuntu.join(",")),
        );
    }
    if let Some(status) = out.get_mut("status").and_then(Value::as_object_mut) {
        convert_status(status);
        changes.push(
            "status: subnets, security groups, AMIs, instance profile and conditions carried over; the controller recomputes them"
                .into(),
        );
    }
    Ok(Conversion {
        object: out,
        changes,
    })
}

/// Removes and returns a string annotation, and the annotations map if that empties it.
fn take_annotation(object: &mut Value, key: &str) -> Result<Option<String>, ConvertError> {
    let Some(metadata) = object.get_mut("metadata") else {
        return Ok(None);
    };
    let metadata = metadata
        .as_object_mut()
        .ok_or(ConvertError::Malformed("metadata"))?;
    let Some(annotations) = metadata
        .get_mut("annotations")
        .and_then(Value::as_object_mut)
    else {
        return Ok(None);
    };
    let value = annotations.remove(key);
    if value.is_some() && annotations.is_empty() {
        metadata.remove("annotations");
    }
    Ok(value.map(|v| match v {
        Value::String(s) => s,
        other => other.to_string(),
    }))
}

/// Drops what the v1beta1 types have no field for, at every level the webhook rebuilt.
fn drop_unknown_fields(spec: &mut Map<String, Value>, changes: &mut Vec<String>) {
    keep_fields(spec, SPEC_FIELDS, "spec", changes);
    for (list, fields) in [
        ("subnetSelectorTerms", SUBNET_TERM_FIELDS),
        ("securityGroupSelectorTerms", SECURITY_GROUP_TERM_FIELDS),
        ("amiSelectorTerms", AMI_TERM_FIELDS),
        ("blockDeviceMappings", BLOCK_DEVICE_MAPPING_FIELDS),
    ] {
        let Some(items) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for (i, item) in items.iter_mut().enumerate() {
            let Some(item) = item.as_object_mut() else {
                continue;
            };
            keep_fields(item, fields, &format!("spec.{list}[{i}]"), changes);
            if let Some(ebs) = item.get_mut("ebs").and_then(Value::as_object_mut) {
                keep_fields(ebs, EBS_FIELDS, &format!("spec.{list}[{i}].ebs"), changes);
            }
        }
    }
    if let Some(options) = spec
        .get_mut("metadataOptions")
        .and_then(Value::as_object_mut)
    {
        keep_fields(
            options,
            METADATA_OPTIONS_FIELDS,
            "spec.metadataOptions",
            changes,
        );
    }
}

fn keep_fields(
    object: &mut Map<String, Value>,
    known: &[&str],
    path: &str,
    changes: &mut Vec<String>,
) {
    let unknown: Vec<String> = object
        .keys()
        .filter(|k| !known.contains(&k.as_str()))
        .cloned()
        .collect();
    for field in unknown {
        object.remove(&field);
        let hint = if path == "spec" && field == "kubelet" {
            "; v1 has spec.kubelet, so add it back to the v1 manifest if you meant it (v1beta1 kept kubelet settings on the NodePool)"
        } else {
            ""
        };
        changes.push(format!(
            "{path}.{field} removed: not a v1beta1 EC2NodeClass field, so the API server would have pruned it and upstream's conversion drops it{hint}"
        ));
    }
}

/// The webhook saw objects the v1beta1 schema had defaulted; v1 defaults the hop limit lower.
fn default_hop_limit(spec: &mut Map<String, Value>, changes: &mut Vec<String>) {
    match spec.get_mut("metadataOptions") {
        Some(Value::Object(options)) => {
            if !options.contains_key("httpPutResponseHopLimit") {
                options.insert("httpPutResponseHopLimit".into(), json!(V1BETA1_HOP_LIMIT));
                changes.push(format!(
                    "spec.metadataOptions.httpPutResponseHopLimit set to {V1BETA1_HOP_LIMIT}, v1beta1's default for it (v1's is 1), so pods keep their IMDS access"
                ));
            }
        }
        None | Some(Value::Null) => changes.push(format!(
            "spec.metadataOptions unset: v1 defaults httpPutResponseHopLimit to 1 (v1beta1 before Karpenter v1.0 defaulted {V1BETA1_HOP_LIMIT}), so pods without hostNetwork lose IMDS access unless you set it"
        )),
        Some(_) => {}
    }
}

/// Status field for field as the webhook copied it; anything else is dropped.
fn convert_status(status: &mut Map<String, Value>) {
    fn keep(item: &Value, fields: &[&str]) -> Value {
        match item.as_object() {
            Some(object) => Value::Object(
                object
                    .iter()
                    .filter(|(k, _)| fields.contains(&k.as_str()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            ),
            None => item.clone(),
        }
    }
    let mut converted = Map::new();
    for (field, fields) in [
        ("subnets", &["id", "zone", "zoneID"][..]),
        ("securityGroups", &["id", "name"][..]),
    ] {
        if let Some(items) = status.get(field).and_then(Value::as_array) {
            let items = items.iter().map(|i| keep(i, fields)).collect();
            converted.insert(field.into(), Value::Array(items));
        }
    }
    if let Some(amis) = status.get("amis").and_then(Value::as_array) {
        let amis = amis
            .iter()
            .map(|ami| {
                let mut kept = keep(ami, &["id", "name", "requirements"]);
                if let Some(requirements) =
                    kept.get_mut("requirements").and_then(Value::as_array_mut)
                {
                    for requirement in requirements.iter_mut() {
                        *requirement = keep(requirement, &["key", "operator", "values"]);
                    }
                }
                kept
            })
            .collect();
        converted.insert("amis".into(), Value::Array(amis));
    }
    for field in ["instanceProfile", "conditions"] {
        if let Some(value) = status.get(field) {
            converted.insert(field.into(), value.clone());
        }
    }
    *status = converted;
}
