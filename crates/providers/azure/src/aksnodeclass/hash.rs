//! The AKSNodeClass hash behind static drift, and the annotations a NodeClaim carries it in.
//!
//! Upstream hashes the whole spec except the fields it tags `hash:"ignore"` — only `tags`,
//! which are updated on running VMs instead of replacing them — treating lists as sets and
//! unset, nil and zero values alike. This hashes the same fields the same way, in this
//! project's own encoding (FNV-1a over canonical JSON), so it changes exactly when upstream's
//! would but not to the same number.

use serde_json::Value;

use karpenter_api::hash::json_hash;

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
        json_hash(&spec)
    }
}
