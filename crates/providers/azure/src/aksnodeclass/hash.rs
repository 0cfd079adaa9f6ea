//! The AKSNodeClass hash behind static drift, and the annotations a NodeClaim carries it in.
//!
//! Upstream hashes the whole spec except the fields it tags `hash:"ignore"` — only `tags`,
//! which are updated on running VMs instead of replacing them — treating lists as sets and
//! unset, nil and zero values alike. This hashes the same fields the same way, in this
//! project's own encoding (FNV-1a over canonical JSON), so it changes exactly when upstream's
//! would but not to the same number.

use serde_json::Value;

use karpenter_api::hash::Fnv;

use super::AKSNodeClass;

/// The annotation carrying the hash of the AKSNodeClass a NodeClaim was launched from.
pub const AKS_NODE_CLASS_HASH_ANNOTATION: &str = "karpenter.azure.com/aksnodeclass-hash";
/// The hash algorithm's version, beside the hash.
pub const AKS_NODE_CLASS_HASH_VERSION_ANNOTATION: &str =
    "karpenter.azure.com/aksnodeclass-hash-version";
/// This implementation's hash version. Upstream's is `v3`; the number differs, and a claim
/// stamped with another version is re-stamped rather than judged (see `karpenter_api::hash`),
/// so moving a cluster between upstream and karpenter-rs drifts no node.
pub const AKS_NODE_CLASS_HASH_VERSION: &str = "rs-v1";
/// The annotation naming the ARM resource id of the AKS machine behind a NodeClaim.
pub const AKS_MACHINE_RESOURCE_ID_ANNOTATION: &str = "karpenter.azure.com/aks-machine-resource-id";

/// Spec fields upstream leaves out of the hash.
const IGNORED: &[&str] = &["tags"];

impl AKSNodeClass {
    /// The hash behind static drift: every spec field but the tags. Zero values and absent
    /// fields hash alike and lists hash as sets, so reordering LocalDNS overrides or writing
    /// out `false` drifts nothing.
    pub fn hash(&self) -> String {
        let mut spec = serde_json::to_value(&self.spec).unwrap_or(Value::Null);
        if let Some(fields) = spec.as_object_mut() {
            for ignored in IGNORED {
                fields.remove(*ignored);
            }
        }
        let mut fnv = Fnv::default();
        fnv.str(&canonical(&spec));
        fnv.0.to_string()
    }
}

/// A JSON value's canonical text: object keys sorted, arrays as sorted sets, and zero values
/// (null, false, 0, "", empty list or object) dropped.
fn canonical(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut fields: Vec<(&String, String)> = map
                .iter()
                .filter(|(_, v)| !is_zero(v))
                .map(|(k, v)| (k, canonical(v)))
                .collect();
            fields.sort();
            let inner: Vec<String> = fields
                .into_iter()
                .map(|(k, v)| format!("{}:{v}", Value::String(k.clone())))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(items) => {
            let mut inner: Vec<String> = items.iter().map(canonical).collect();
            inner.sort();
            inner.dedup();
            format!("[{}]", inner.join(","))
        }
        other => other.to_string(),
    }
}

fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.values().all(is_zero),
    }
}
