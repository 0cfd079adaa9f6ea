//! The hashes upstream keeps: the NodeClass hash behind static drift, the in-place hashes
//! behind updating VMs and templates without replacing them, and the template hash a managed
//! template's VMs are known by.
//!
//! The NodeClass hash travels with a hash version, so it is this project's own (FNV-1a over
//! canonical JSON, `karpenter_api::hash::json_hash`) under [`PROXMOX_NODE_CLASS_HASH_VERSION`]:
//! a NodeClaim stamped with another version is re-stamped rather than judged, as upstream's
//! drift check and hash controller do, so moving a cluster between upstream and karpenter-rs
//! drifts no node. The others travel with no version (see `gohash`), so they are upstream's
//! numbers exactly.

use serde_json::{Value, json};

use karpenter_api::duration::parse_go_duration;
use karpenter_api::hash::json_hash;

use super::gohash::Go;
use super::nodeclass::{KubeletConfiguration, ProxmoxNodeClass, ProxmoxNodeClassSpec};

/// NodeClass and NodeClaim annotation: the hash of the NodeClass.
pub const PROXMOX_NODE_CLASS_HASH_ANNOTATION: &str =
    "karpenter.proxmox.sinextra.dev/proxmoxnodeclass-hash";
/// NodeClass and NodeClaim annotation: the version of the hash beside it.
pub const PROXMOX_NODE_CLASS_HASH_VERSION_ANNOTATION: &str =
    "karpenter.proxmox.sinextra.dev/proxmoxnodeclass-hash-version";
/// This implementation's NodeClass hash version, `rs-v1` as every provider of this project
/// stamps. Upstream's is `v1`; the numbers differ, and a claim of another version is
/// re-stamped, not judged, so no node drifts when a cluster changes implementation. Stamping
/// `v1` beside a different number would drift them all.
pub const PROXMOX_NODE_CLASS_HASH_VERSION: &str = "rs-v1";

/// Template annotation: the template's hash.
pub const PROXMOX_TEMPLATE_HASH_ANNOTATION: &str =
    "karpenter.proxmox.sinextra.dev/proxmoxtemplate-hash";
/// Template annotation: the version of the hash beside it.
pub const PROXMOX_TEMPLATE_HASH_VERSION_ANNOTATION: &str =
    "karpenter.proxmox.sinextra.dev/proxmoxtemplate-hash-version";
/// The template hash version: upstream's `v1`, unlike the NodeClass's, because the template
/// hashes here are upstream's numbers (they are also kept in Proxmox and on nodes, where no
/// version travels with them).
pub const PROXMOX_TEMPLATE_HASH_VERSION: &str = "v1";

/// Upstream's hash of a Go string (`hashstructure.Hash(s, FormatV2, nil)`: FNV-1 64-bit of its
/// bytes), which it uses for a managed template's image name and for an unmanaged template VM's
/// `meta` config when its description holds no hash.
pub fn go_string_hash(text: &str) -> u64 {
    Go::Str(text).hash()
}

/// A set scalar as text, which the canonical JSON never drops as a zero value: upstream keeps a
/// kubelet setting set to `false` or `0` apart from one unset.
fn set_scalar<T: ToString>(value: Option<T>) -> Value {
    value.map_or(Value::Null, |v| Value::String(v.to_string()))
}

/// A duration by its length (`60s` is `1m`), as upstream hashes a Go duration; one that does
/// not parse by its text.
fn duration(value: &Option<String>) -> Value {
    match value.as_deref().map(|d| (d, parse_go_duration(d))) {
        None => Value::Null,
        Some((_, Ok(d))) => Value::String(format!("{}ns", d.as_nanos())),
        Some((text, Err(_))) => Value::String(text.to_string()),
    }
}

fn kubelet(k: &KubeletConfiguration) -> Value {
    json!({
        "cpuManagerPolicy": k.cpu_manager_policy,
        "cpuCFSQuota": set_scalar(k.cpu_cfs_quota),
        "cpuCFSQuotaPeriod": duration(&k.cpu_cfs_quota_period),
        "topologyManagerPolicy": k.topology_manager_policy,
        "topologyManagerScope": k.topology_manager_scope,
        "imageGCHighThresholdPercent": set_scalar(k.image_gc_high_threshold_percent),
        "imageGCLowThresholdPercent": set_scalar(k.image_gc_low_threshold_percent),
        "shutdownGracePeriod": duration(&k.shutdown_grace_period),
        "allowedUnsafeSysctls": k.allowed_unsafe_sysctls,
        "clusterDNS": k.cluster_dns,
        "maxPods": set_scalar(k.max_pods),
        "failSwapOn": set_scalar(k.fail_swap_on),
    })
}

impl ProxmoxNodeClassSpec {
    /// The hash behind static drift: the region, placement, template reference, kubelet
    /// settings and boot disk. Not the tags, metadata options, security groups or resource pool
    /// (upstream's `hash:"ignore"`: the first three are updated in place, and the metadata
    /// applies at boot only). Lists hash as sets and unset fields like zero ones, as upstream's;
    /// the boot disk's size by its bytes (`1000G` is `1T`) and durations by their length.
    ///
    /// Upstream hashes the size's Go `Quantity` through its one exported field, the format, so
    /// there `30G` and `50G` hash alike and resizing the boot disk drifts nothing; here it
    /// drifts the nodes, as the field's documentation promises.
    pub fn hash(&self) -> String {
        let boot = &self.boot_device;
        let size = match (boot.size_bytes(), &boot.size) {
            (Some(bytes), _) => Value::String(bytes.to_string()),
            (None, Some(text)) => Value::String(text.clone()),
            (None, None) => Value::Null,
        };
        let hashed = json!({
            "region": self.region,
            "placementStrategy": {"zoneBalance": self.placement_strategy.zone_balance.as_str()},
            "instanceTemplateRef": self.instance_template_ref.as_ref().map(|r| {
                json!({"kind": r.kind.as_str(), "name": r.name})
            }),
            "kubeletConfiguration": self.kubelet_configuration.as_ref().map(kubelet),
            "bootDevice": {"size": size, "storage": boot.storage},
        });
        json_hash(&hashed)
    }

    /// Upstream's in-place hash, number for number: the security groups, tags and resource
    /// pool, which the provider applies to running VMs when this changes.
    pub fn in_place_hash(&self) -> String {
        let groups = self
            .security_groups
            .iter()
            .map(|g| {
                Go::Struct(
                    "SecurityGroups",
                    vec![
                        ("Interface", Go::Str(&g.interface)),
                        ("Name", Go::Str(&g.name)),
                    ],
                )
            })
            .collect();
        Go::Struct(
            "inPlaceUpdateFields",
            vec![
                ("SecurityGroups", Go::Slice(groups)),
                ("Tags", Go::strings(&self.tags)),
                ("ResourcePool", Go::str_or_empty(&self.resource_pool)),
            ],
        )
        .hash()
        .to_string()
    }
}

impl ProxmoxNodeClass {
    /// [`ProxmoxNodeClassSpec::hash`] of the class's spec.
    pub fn hash(&self) -> String {
        self.spec.hash()
    }

    /// [`ProxmoxNodeClassSpec::in_place_hash`] of the class's spec.
    pub fn in_place_hash(&self) -> String {
        self.spec.in_place_hash()
    }
}
