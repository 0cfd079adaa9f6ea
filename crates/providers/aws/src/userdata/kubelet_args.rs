//! The kubelet command-line flags AL2's `bootstrap.sh` and Windows' `Start-EKSBootstrap.ps1`
//! pass on (`--kubelet-extra-args`), in upstream's order: labels, taints, then the kubelet
//! settings of the EC2NodeClass that have a flag.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use serde_json::Value;

use super::Bootstrap;

/// A Go `%q`-style quoted string: what the flags' values look like upstream.
fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// `key=value:Effect`, or `key:Effect` without a value (Kubernetes' taint notation).
pub fn taint_string(t: &Taint) -> String {
    let mut out = t.key.clone();
    if let Some(v) = t.value.as_deref().filter(|v| !v.is_empty()) {
        out.push('=');
        out.push_str(v);
    }
    if !t.effect.is_empty() {
        out.push(':');
        out.push_str(&t.effect);
    }
    out
}

/// A map setting as one flag, its entries sorted so the user data is stable.
fn map_flag(name: &str, kubelet: &serde_json::Map<String, Value>, key: &str, sep: &str) -> String {
    let Some(map) = kubelet.get(key).and_then(Value::as_object) else {
        return String::new();
    };
    let entries: BTreeMap<&String, String> = map
        .iter()
        .map(|(k, v)| (k, v.as_str().map_or_else(|| v.to_string(), str::to_string)))
        .collect();
    if entries.is_empty() {
        return String::new();
    }
    let joined = entries
        .iter()
        .map(|(k, v)| format!("{k}{sep}{v}"))
        .collect::<Vec<_>>()
        .join(",");
    format!("{name}={}", quoted(&joined))
}

/// The max pods the node runs: the EC2NodeClass's `kubelet.maxPods`, else the type's.
pub fn max_pods(b: &Bootstrap) -> Option<i64> {
    b.kubelet
        .get("maxPods")
        .and_then(Value::as_i64)
        .or(b.max_pods)
}

/// The flags, empty ones left out.
pub fn kubelet_extra_args(b: &Bootstrap) -> Vec<String> {
    let mut args = Vec::new();
    if !b.labels.is_empty() {
        let labels = b
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        args.push(format!("--node-labels={}", quoted(&labels)));
    }
    let taints = b
        .taints
        .iter()
        .map(taint_string)
        .collect::<Vec<_>>()
        .join(",");
    args.push(format!("--register-with-taints={}", quoted(&taints)));
    let k = &b.kubelet;
    if let Some(max) = max_pods(b) {
        args.push(format!("--max-pods={max}"));
    }
    if let Some(ppc) = k.get("podsPerCore").and_then(Value::as_i64) {
        args.push(format!("--pods-per-core={ppc}"));
    }
    args.push(map_flag("--system-reserved", k, "systemReserved", "="));
    args.push(map_flag("--kube-reserved", k, "kubeReserved", "="));
    args.push(map_flag("--eviction-hard", k, "evictionHard", "<"));
    args.push(map_flag("--eviction-soft", k, "evictionSoft", "<"));
    args.push(map_flag(
        "--eviction-soft-grace-period",
        k,
        "evictionSoftGracePeriod",
        "=",
    ));
    for (key, flag) in [
        (
            "evictionMaxPodGracePeriod",
            "--eviction-max-pod-grace-period",
        ),
        ("imageGCHighThresholdPercent", "--image-gc-high-threshold"),
        ("imageGCLowThresholdPercent", "--image-gc-low-threshold"),
        ("cpuCFSQuota", "--cpu-cfs-quota"),
    ] {
        if let Some(v) = k.get(key).filter(|v| v.is_number() || v.is_boolean()) {
            args.push(format!("{flag}={v}"));
        }
    }
    args.retain(|a| !a.is_empty());
    args
}

/// The first `kubelet.clusterDNS` address, if any.
pub fn cluster_dns(b: &Bootstrap) -> Option<&str> {
    b.kubelet
        .get("clusterDNS")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(Value::as_str)
}
