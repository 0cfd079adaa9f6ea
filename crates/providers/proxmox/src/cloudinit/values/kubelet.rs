//! `.Kubernetes.KubeletConfiguration`: the kubelet settings a template writes into the node's
//! kubelet config (Talos' `extraConfig`, a kubelet config file), as upstream's
//! `applyKubernetesConfiguration` builds them (`pkg/providers/instance/instance_cloudinit.go`,
//! the struct in `pkg/providers/instance/types.go`):
//!
//! 1. the NodeClass's `kubeletConfiguration`, read the way Go's `encoding/json` fills
//!    upstream's struct: keys matched to the Go field names ignoring case, unknown keys (the
//!    NodeClass's `cpuCFSQuotaPeriod`) dropped, a value of the wrong type skipped;
//! 2. from the instance type's overhead, `kubeReserved` and `systemReserved` (`cpu` in
//!    millicores, `memory` in whole MiB, `ephemeral-storage` in whole GiB, zeros left out),
//!    and `evictionHard`: kubelet's usual `nodefs`/`imagefs` thresholds with the overhead's
//!    memory as `memory.available`;
//! 3. `providerID` set to the VM's, and `registerWithTaints` defaulting to Karpenter's
//!    `karpenter.sh/unregistered:NoExecute` when the NodeClass sets none.
//!
//! Durations are kept as Go prints them (`30s`, `1m30s`). Upstream's YAML for them is a
//! nested `duration:` mapping (go-yaml does not know `metav1.Duration`), which no kubelet
//! reads; here `toYaml` prints the duration string itself.

use std::collections::BTreeMap;

use gtmpl::Value;
use karpenter_api::labels::UNREGISTERED_TAINT_KEY;
use karpenter_core::instancetype::Overhead;
use karpenter_core::resources::{self, Resources};
use serde_json::Value as Json;

use super::{string_map, strings};
use crate::cloudinit::template::GoStruct;

/// A taint the kubelet registers the node with (upstream's `KubernetesTaint`): `.Key`,
/// `.Value`, `.Effect`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KubernetesTaint {
    /// The taint's key.
    pub key: String,
    /// The taint's value; often empty.
    pub value: String,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

/// The kubelet settings (upstream's `KubeletConfiguration`); every field is optional and
/// left out of `toYaml` when unset. In templates the Go field names apply
/// (`.MaxPods`, `.ClusterDNS`, `.RegisterWithTaints`, …).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KubeletConfiguration {
    /// `cpuManagerPolicy`.
    pub cpu_manager_policy: String,
    /// `cpuCFSQuota`.
    pub cpu_cfs_quota: Option<bool>,
    /// `cpuManagerPolicyOptions`.
    pub cpu_manager_policy_options: BTreeMap<String, String>,
    /// `cpuManagerReconcilePeriod`, a Go duration.
    pub cpu_manager_reconcile_period: Option<String>,
    /// `memoryManagerPolicy`.
    pub memory_manager_policy: String,
    /// `topologyManagerPolicy`.
    pub topology_manager_policy: String,
    /// `topologyManagerScope`.
    pub topology_manager_scope: String,
    /// `topologyManagerPolicyOptions`.
    pub topology_manager_policy_options: BTreeMap<String, String>,
    /// `imageMinimumGCAge`, a Go duration.
    pub image_minimum_gc_age: Option<String>,
    /// `imageMaximumGCAge`, a Go duration.
    pub image_maximum_gc_age: Option<String>,
    /// `imageGCHighThresholdPercent`.
    pub image_gc_high_threshold_percent: Option<i32>,
    /// `imageGCLowThresholdPercent`.
    pub image_gc_low_threshold_percent: Option<i32>,
    /// `shutdownGracePeriod`, a Go duration.
    pub shutdown_grace_period: Option<String>,
    /// `shutdownGracePeriodCriticalPods`, a Go duration.
    pub shutdown_grace_period_critical_pods: Option<String>,
    /// `allowedUnsafeSysctls`.
    pub allowed_unsafe_sysctls: Vec<String>,
    /// `clusterDNS`.
    pub cluster_dns: Vec<String>,
    /// `maxPods`.
    pub max_pods: Option<i32>,
    /// `providerID`.
    pub provider_id: String,
    /// `failSwapOn`.
    pub fail_swap_on: Option<bool>,
    /// `systemReserved`.
    pub system_reserved: BTreeMap<String, String>,
    /// `kubeReserved`.
    pub kube_reserved: BTreeMap<String, String>,
    /// `evictionHard`.
    pub eviction_hard: BTreeMap<String, String>,
    /// `registerWithTaints`.
    pub register_with_taints: Vec<KubernetesTaint>,
}

/// Kubelet's default hard eviction thresholds, which upstream starts `evictionHard` from.
pub const DEFAULT_EVICTION_HARD: [(&str, &str); 3] = [
    ("memory.available", "100Mi"),
    ("nodefs.available", "10%"),
    ("imagefs.available", "15%"),
];

const MIB: i64 = 1 << 20;
const GIB: i64 = 1 << 30;

/// Whole units of a quantity kept in thousandths, rounded up as Go's `Quantity.Value()`.
fn whole(milli: i64) -> i64 {
    milli.div_euclid(1000) + i64::from(milli.rem_euclid(1000) != 0)
}

/// Upstream's `requestsToMap`.
fn reserved(list: &Resources) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if list.cpu > 0 {
        out.insert(resources::CPU.to_string(), format!("{}m", list.cpu));
    }
    let mem = whole(list.memory) / MIB;
    if mem > 0 {
        out.insert(resources::MEMORY.to_string(), format!("{mem}Mi"));
    }
    let storage = whole(list.ephemeral_storage) / GIB;
    if storage > 0 {
        out.insert(
            resources::EPHEMERAL_STORAGE.to_string(),
            format!("{storage}Gi"),
        );
    }
    out
}

impl KubeletConfiguration {
    /// The kubelet settings of a VM of an instance type with `overhead` and provider ID
    /// `provider_id`, starting from the NodeClass's `kubeletConfiguration` (its JSON), as the
    /// module describes.
    pub fn for_instance(kubelet: Option<&Json>, overhead: &Overhead, provider_id: &str) -> Self {
        let mut config = kubelet.map(Self::from_json).unwrap_or_default();
        if overhead.kube_reserved.iter().next().is_some() {
            config.kube_reserved = reserved(&overhead.kube_reserved);
        }
        if overhead.system_reserved.iter().next().is_some() {
            config.system_reserved = reserved(&overhead.system_reserved);
        }
        if overhead.eviction_threshold.iter().next().is_some() {
            config.eviction_hard = DEFAULT_EVICTION_HARD
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            config.eviction_hard.insert(
                "memory.available".to_string(),
                resources::format_milli(resources::MEMORY, overhead.eviction_threshold.memory),
            );
        }
        config.provider_id = provider_id.to_string();
        if config.register_with_taints.is_empty() {
            config.register_with_taints = vec![KubernetesTaint {
                key: UNREGISTERED_TAINT_KEY.to_string(),
                value: String::new(),
                effect: "NoExecute".to_string(),
            }];
        }
        config
    }

    /// Upstream's struct filled from JSON the way `json.Unmarshal` fills it (see the module).
    pub fn from_json(json: &Json) -> Self {
        let mut c = Self::default();
        let Json::Object(map) = json else {
            return c;
        };
        for (key, value) in map {
            let Some(field) = match_field(key, FIELDS) else {
                continue;
            };
            if value.is_null() {
                continue;
            }
            match field {
                "CPUManagerPolicy" => set_string(&mut c.cpu_manager_policy, value),
                "CPUCFSQuota" => c.cpu_cfs_quota = value.as_bool().or(c.cpu_cfs_quota),
                "CPUManagerPolicyOptions" => set_map(&mut c.cpu_manager_policy_options, value),
                "CPUManagerReconcilePeriod" => {
                    set_duration(&mut c.cpu_manager_reconcile_period, value)
                }
                "MemoryManagerPolicy" => set_string(&mut c.memory_manager_policy, value),
                "TopologyManagerPolicy" => set_string(&mut c.topology_manager_policy, value),
                "TopologyManagerScope" => set_string(&mut c.topology_manager_scope, value),
                "TopologyManagerPolicyOptions" => {
                    set_map(&mut c.topology_manager_policy_options, value)
                }
                "ImageMinimumGCAge" => set_duration(&mut c.image_minimum_gc_age, value),
                "ImageMaximumGCAge" => set_duration(&mut c.image_maximum_gc_age, value),
                "ImageGCHighThresholdPercent" => {
                    set_i32(&mut c.image_gc_high_threshold_percent, value)
                }
                "ImageGCLowThresholdPercent" => {
                    set_i32(&mut c.image_gc_low_threshold_percent, value)
                }
                "ShutdownGracePeriod" => set_duration(&mut c.shutdown_grace_period, value),
                "ShutdownGracePeriodCriticalPods" => {
                    set_duration(&mut c.shutdown_grace_period_critical_pods, value)
                }
                "AllowedUnsafeSysctls" => set_list(&mut c.allowed_unsafe_sysctls, value),
                "ClusterDNS" => set_list(&mut c.cluster_dns, value),
                "MaxPods" => set_i32(&mut c.max_pods, value),
                "ProviderID" => set_string(&mut c.provider_id, value),
                "FailSwapOn" => c.fail_swap_on = value.as_bool().or(c.fail_swap_on),
                "SystemReserved" => set_map(&mut c.system_reserved, value),
                "KubeReserved" => set_map(&mut c.kube_reserved, value),
                "EvictionHard" => set_map(&mut c.eviction_hard, value),
                "RegisterWithTaints" => {
                    if let Json::Array(items) = value {
                        c.register_with_taints = items.iter().map(taint_from_json).collect();
                    }
                }
                _ => {}
            }
        }
        c
    }
}

/// Upstream's field names, in declaration order.
const FIELDS: &[&str] = &[
    "CPUManagerPolicy",
    "CPUCFSQuota",
    "CPUManagerPolicyOptions",
    "CPUManagerReconcilePeriod",
    "MemoryManagerPolicy",
    "TopologyManagerPolicy",
    "TopologyManagerScope",
    "TopologyManagerPolicyOptions",
    "ImageMinimumGCAge",
    "ImageMaximumGCAge",
    "ImageGCHighThresholdPercent",
    "ImageGCLowThresholdPercent",
    "ShutdownGracePeriod",
    "ShutdownGracePeriodCriticalPods",
    "AllowedUnsafeSysctls",
    "ClusterDNS",
    "MaxPods",
    "ProviderID",
    "FailSwapOn",
    "SystemReserved",
    "KubeReserved",
    "EvictionHard",
    "RegisterWithTaints",
];

/// The Go field a JSON key fills: an exact match, else one equal ignoring case.
fn match_field<'a>(key: &str, fields: &[&'a str]) -> Option<&'a str> {
    fields
        .iter()
        .find(|f| **f == key)
        .or_else(|| fields.iter().find(|f| f.eq_ignore_ascii_case(key)))
        .copied()
}

fn set_string(field: &mut String, value: &Json) {
    if let Some(s) = value.as_str() {
        *field = s.to_string();
    }
}

fn set_i32(field: &mut Option<i32>, value: &Json) {
    if let Some(n) = value.as_i64().and_then(|n| i32::try_from(n).ok()) {
        *field = Some(n);
    }
}

fn set_duration(field: &mut Option<String>, value: &Json) {
    if let Some(d) = value.as_str().and_then(go_duration) {
        *field = Some(d);
    }
}

/// A `[]string`: an element of another type decodes to "" as Go leaves it.
fn set_list(field: &mut Vec<String>, value: &Json) {
    if let Json::Array(items) = value {
        *field = items
            .iter()
            .map(|i| i.as_str().unwrap_or_default().to_string())
            .collect();
    }
}

/// A `map[string]string`, merged into what is there as Go merges into an existing map.
fn set_map(field: &mut BTreeMap<String, String>, value: &Json) {
    if let Json::Object(entries) = value {
        for (k, v) in entries {
            if let Some(s) = v.as_str() {
                field.insert(k.clone(), s.to_string());
            }
        }
    }
}

fn taint_from_json(value: &Json) -> KubernetesTaint {
    let mut taint = KubernetesTaint::default();
    if let Json::Object(map) = value {
        for (key, value) in map {
            match match_field(key, &["Key", "Value", "Effect"]) {
                Some("Key") => set_string(&mut taint.key, value),
                Some("Value") => set_string(&mut taint.value, value),
                Some("Effect") => set_string(&mut taint.effect, value),
                _ => {}
            }
        }
    }
    taint
}

/// A Go duration (`1m30s`, `1.5h`, `300ms`) in the form Go prints it (`time.Duration.String`);
/// `None` when Go's `time.ParseDuration` would refuse it.
pub fn go_duration(s: &str) -> Option<String> {
    nanos_to_string(parse_duration(s)?)
}

fn parse_duration(s: &str) -> Option<i128> {
    let (negative, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let int_end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (int, after) = rest.split_at(int_end);
        let (frac, after) = match after.strip_prefix('.') {
            Some(a) => {
                let end = a.find(|c: char| !c.is_ascii_digit()).unwrap_or(a.len());
                a.split_at(end)
            }
            None => ("", after),
        };
        if int.is_empty() && frac.is_empty() {
            return None;
        }
        let unit_end = after
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_end);
        let scale: i128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        let whole: i128 = if int.is_empty() { 0 } else { int.parse().ok()? };
        let mut value = whole.checked_mul(scale)?;
        if !frac.is_empty() {
            let digits: i128 = frac[..frac.len().min(30)].parse().ok()?;
            let denom = 10i128.checked_pow(frac.len().min(30) as u32)?;
            value += digits * scale / denom;
        }
        total = total.checked_add(value)?;
        if total > i128::from(i64::MAX) {
            return None;
        }
        rest = after;
    }
    Some(if negative { -total } else { total })
}

fn nanos_to_string(nanos: i128) -> Option<String> {
    let negative = nanos < 0;
    let u = nanos.unsigned_abs();
    let sign = if negative { "-" } else { "" };
    if u < 1_000_000_000 {
        // Under a second: the largest unit that keeps a whole part.
        let (unit, scale) = match u {
            0 => return Some("0s".to_string()),
            1..=999 => ("ns", 1),
            1_000..=999_999 => ("µs", 1_000),
            _ => ("ms", 1_000_000),
        };
        return Some(format!("{sign}{}{unit}", fraction(u, scale)));
    }
    let hours = u / 3_600_000_000_000;
    let minutes = (u / 60_000_000_000) % 60;
    let seconds = fraction(u % 60_000_000_000, 1_000_000_000);
    Some(if hours > 0 {
        format!("{sign}{hours}h{minutes}m{seconds}s")
    } else if minutes > 0 {
        format!("{sign}{minutes}m{seconds}s")
    } else {
        format!("{sign}{seconds}s")
    })
}

/// `value / scale` with the fraction's trailing zeros dropped.
fn fraction(value: u128, scale: u128) -> String {
    let int = value / scale;
    let frac = value % scale;
    if frac == 0 {
        return int.to_string();
    }
    let width = scale.ilog10() as usize;
    let digits = format!("{frac:0width$}");
    format!("{int}.{}", digits.trim_end_matches('0'))
}

impl From<&KubernetesTaint> for Value {
    fn from(t: &KubernetesTaint) -> Self {
        GoStruct::new()
            .omitempty("Key", "key", t.key.as_str())
            .omitempty("Value", "value", t.value.as_str())
            .omitempty("Effect", "effect", t.effect.as_str())
            .build()
    }
}

impl From<&KubeletConfiguration> for Value {
    fn from(c: &KubeletConfiguration) -> Self {
        let duration = |d: &Option<String>| d.as_deref().map(Value::from);
        GoStruct::new()
            .omitempty(
                "CPUManagerPolicy",
                "cpuManagerPolicy",
                c.cpu_manager_policy.as_str(),
            )
            .pointer(
                "CPUCFSQuota",
                "cpuCFSQuota",
                c.cpu_cfs_quota.map(Value::from),
            )
            .omitempty_collection(
                "CPUManagerPolicyOptions",
                "cpuManagerPolicyOptions",
                string_map(&c.cpu_manager_policy_options),
            )
            .pointer(
                "CPUManagerReconcilePeriod",
                "cpuManagerReconcilePeriod",
                duration(&c.cpu_manager_reconcile_period),
            )
            .omitempty(
                "MemoryManagerPolicy",
                "memoryManagerPolicy",
                c.memory_manager_policy.as_str(),
            )
            .omitempty(
                "TopologyManagerPolicy",
                "topologyManagerPolicy",
                c.topology_manager_policy.as_str(),
            )
            .omitempty(
                "TopologyManagerScope",
                "topologyManagerScope",
                c.topology_manager_scope.as_str(),
            )
            .omitempty_collection(
                "TopologyManagerPolicyOptions",
                "topologyManagerPolicyOptions",
                string_map(&c.topology_manager_policy_options),
            )
            .pointer(
                "ImageMinimumGCAge",
                "imageMinimumGCAge",
                duration(&c.image_minimum_gc_age),
            )
            .pointer(
                "ImageMaximumGCAge",
                "imageMaximumGCAge",
                duration(&c.image_maximum_gc_age),
            )
            .pointer(
                "ImageGCHighThresholdPercent",
                "imageGCHighThresholdPercent",
                c.image_gc_high_threshold_percent.map(Value::from),
            )
            .pointer(
                "ImageGCLowThresholdPercent",
                "imageGCLowThresholdPercent",
                c.image_gc_low_threshold_percent.map(Value::from),
            )
            .pointer(
                "ShutdownGracePeriod",
                "shutdownGracePeriod",
                duration(&c.shutdown_grace_period),
            )
            .pointer(
                "ShutdownGracePeriodCriticalPods",
                "shutdownGracePeriodCriticalPods",
                duration(&c.shutdown_grace_period_critical_pods),
            )
            .omitempty_collection(
                "AllowedUnsafeSysctls",
                "allowedUnsafeSysctls",
                strings(&c.allowed_unsafe_sysctls),
            )
            .omitempty_collection("ClusterDNS", "clusterDNS", strings(&c.cluster_dns))
            .pointer("MaxPods", "maxPods", c.max_pods.map(Value::from))
            .omitempty("ProviderID", "providerID", c.provider_id.as_str())
            .pointer("FailSwapOn", "failSwapOn", c.fail_swap_on.map(Value::from))
            .omitempty_collection(
                "SystemReserved",
                "systemReserved",
                string_map(&c.system_reserved),
            )
            .omitempty_collection("KubeReserved", "kubeReserved", string_map(&c.kube_reserved))
            .omitempty_collection("EvictionHard", "evictionHard", string_map(&c.eviction_hard))
            .omitempty_collection(
                "RegisterWithTaints",
                "registerWithTaints",
                Value::Array(c.register_with_taints.iter().map(Value::from).collect()),
            )
            .build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_as_go_prints_them() {
        for (input, want) in [
            ("30s", Some("30s")),
            ("90s", Some("1m30s")),
            ("1h", Some("1h0m0s")),
            ("1.5h", Some("1h30m0s")),
            ("1h2m3.5s", Some("1h2m3.5s")),
            ("300ms", Some("300ms")),
            ("1500ms", Some("1.5s")),
            ("2us", Some("2µs")),
            ("0", Some("0s")),
            ("-5m", Some("-5m0s")),
            ("", None),
            ("5", None),
            ("5d", None),
            (".s", None),
        ] {
            assert_eq!(go_duration(input).as_deref(), want, "{input:?}");
        }
    }
}
