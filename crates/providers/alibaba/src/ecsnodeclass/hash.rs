//! The ECSNodeClass hash behind static drift, and the annotations a NodeClaim carries it in.
//!
//! Upstream hashes the whole spec except the three selector term lists (tagged
//! `hash:"ignore"`: they are judged against the running instance instead), treating lists as
//! sets and skipping unset and zero fields; disk sizes are hashed as canonical quantities and
//! durations by length. This hashes the same fields the same way, in this project's own
//! encoding (FNV-1a over canonical JSON, `karpenter_api::hash::json_hash`), so it changes
//! exactly when upstream's would but not to the same number.

use serde_json::{Map, Value};

use karpenter_api::duration::parse_go_duration;
use karpenter_api::hash::json_hash;

use super::ECSNodeClass;

/// The annotation carrying the hash of the ECSNodeClass a NodeClaim was launched from.
pub const ECS_NODE_CLASS_HASH_ANNOTATION: &str = "karpenter.k8s.alibabacloud/ecsnodeclass-hash";
/// The hash algorithm's version, beside the hash.
pub const ECS_NODE_CLASS_HASH_VERSION_ANNOTATION: &str =
    "karpenter.k8s.alibabacloud/ecsnodeclass-hash-version";
/// This implementation's hash version. Upstream's is `v3`; the number differs, and a claim
/// stamped with another version is re-stamped rather than judged (see `karpenter_api::hash`),
/// so moving a cluster between upstream and karpenter-rs drifts no node.
pub const ECS_NODE_CLASS_HASH_VERSION: &str = "rs-v1";

/// Spec fields upstream leaves out of the hash.
const IGNORED: &[&str] = &[
    "vSwitchSelectorTerms",
    "securityGroupSelectorTerms",
    "imageSelectorTerms",
];

/// Kubelet fields upstream holds as pointers: set to zero (`cpuCFSQuota: false`, `maxPods: 0`)
/// is not unset, so they must not hash alike.
const KUBELET_OPTIONAL_SCALARS: &[&str] = &[
    "maxPods",
    "podsPerCore",
    "evictionMaxPodGracePeriod",
    "imageGCHighThresholdPercent",
    "imageGCLowThresholdPercent",
    "cpuCFSQuota",
];

/// Kubelet maps, hashed entry by entry as the tags are.
const KUBELET_MAPS: &[&str] = &[
    "systemReserved",
    "kubeReserved",
    "evictionHard",
    "evictionSoft",
];

impl ECSNodeClass {
    /// The hash behind static drift: every spec field but the selector terms. Absent fields and
    /// zero values hash alike (except where upstream keeps a set zero apart from unset), lists
    /// hash as sets, and sizes and durations by what they mean (`1024Gi` is `1Ti`, `60s` is
    /// `1m`), so reordering disk categories or spelling out `formatDataDisk: false` drifts
    /// nothing.
    pub fn hash(&self) -> String {
        let mut spec = serde_json::to_value(&self.spec).unwrap_or(Value::Null);
        canonicalize(&mut spec, "/systemDisk/volumeSize", canonical_quantity);
        canonicalize(&mut spec, "/systemDisk/size", set_scalar);
        if let Some(disks) = spec.pointer_mut("/dataDisks").and_then(Value::as_array_mut) {
            for disk in disks {
                canonicalize(disk, "/volumeSize", canonical_quantity);
            }
        }
        if let Some(kubelet) = spec
            .pointer_mut("/kubeletConfiguration")
            .and_then(Value::as_object_mut)
        {
            canonical_kubelet(kubelet);
        }
        if let Some(fields) = spec.as_object_mut() {
            for ignored in IGNORED {
                fields.remove(*ignored);
            }
            canonical_map(fields, "tags", Value::clone);
        }
        json_hash(&spec)
    }
}

/// Replaces the value at `pointer`, if there is one, with `canonical` of it.
fn canonicalize(value: &mut Value, pointer: &str, canonical: fn(&Value) -> Value) {
    if let Some(field) = value.pointer_mut(pointer) {
        let replaced = canonical(field);
        *field = replaced;
    }
}

fn canonical_kubelet(kubelet: &mut Map<String, Value>) {
    for field in KUBELET_OPTIONAL_SCALARS {
        if let Some(value) = kubelet.get_mut(*field) {
            let replaced = set_scalar(value);
            *value = replaced;
        }
    }
    for field in KUBELET_MAPS {
        canonical_map(kubelet, field, Value::clone);
    }
    canonical_map(kubelet, "evictionSoftGracePeriod", |period| {
        match period.as_str().map(parse_go_duration) {
            Some(Ok(d)) => Value::String(format!("{}ns", d.as_nanos())),
            _ => period.clone(),
        }
    });
}

/// A set scalar as a string, which is never a zero value to the hash, so `false` and `0` stay
/// apart from unset.
fn set_scalar(value: &Value) -> Value {
    match value {
        Value::Null => Value::Null,
        other => Value::String(other.to_string()),
    }
}

/// A map as a set of `[key, value]` entries written out as text. The canonical JSON drops zero
/// values, so left a map, `{"team": ""}` would hash like no tag at all; upstream hashes every
/// entry of a map.
fn canonical_map(fields: &mut Map<String, Value>, field: &str, value: impl Fn(&Value) -> Value) {
    let Some(Value::Object(map)) = fields.get(field) else {
        return;
    };
    let entries: Vec<Value> = map
        .iter()
        .map(|(k, v)| {
            Value::String(Value::Array(vec![Value::String(k.clone()), value(v)]).to_string())
        })
        .collect();
    fields.insert(field.to_string(), Value::Array(entries));
}

/// A disk size as upstream hashes it: the quantity's canonical form, which depends only on its
/// value and whether its suffix is binary (`Gi`, `Ti`) or decimal (`G`, `T`). One that does
/// not parse is hashed as written.
fn canonical_quantity(size: &Value) -> Value {
    let Some(text) = size.as_str() else {
        return size.clone();
    };
    match karpenter_core::resources::parse_milli(text) {
        Ok(milli) => {
            let family = if text.trim_end().ends_with('i') {
                "binary"
            } else {
                "decimal"
            };
            Value::String(format!("{milli}m {family}"))
        }
        Err(_) => size.clone(),
    }
}
