//! The kubelet's command line (`KUBELET_FLAGS`), node labels (`KUBELET_NODE_LABELS`) and the
//! taints a node registers with.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use karpenter_api::labels::UNREGISTERED_TAINT_KEY;
use karpenter_core::resources::{CPU, MEMORY, Resources, format_milli};
use karpenter_core::scheduling::taints::describe;

use super::Options;
use super::artifacts::uses_credential_provider;
use crate::aksnodeclass::KubeletConfiguration;

/// The flags of every node, before the Kubernetes version and the node's settings adjust
/// them: AKS's hardened kubelet (webhook auth, no anonymous or read-only port, cipher suites),
/// its file layout and defaults the node's settings override.
const BASE_FLAGS: [(&str, &str); 29] = [
    ("--address", "0.0.0.0"),
    ("--anonymous-auth", "false"),
    ("--authentication-token-webhook", "true"),
    ("--authorization-mode", "Webhook"),
    ("--cgroups-per-qos", "true"),
    ("--client-ca-file", "/etc/kubernetes/certs/ca.crt"),
    ("--cloud-config", "/etc/kubernetes/azure.json"),
    ("--cloud-provider", "external"),
    ("--cluster-dns", "10.0.0.10"),
    ("--cluster-domain", "cluster.local"),
    ("--enforce-node-allocatable", "pods"),
    ("--event-qps", "0"),
    (
        "--eviction-hard",
        "memory.available<750Mi,nodefs.available<10%,nodefs.inodesFree<5%",
    ),
    ("--image-gc-high-threshold", "85"),
    ("--image-gc-low-threshold", "80"),
    ("--kubeconfig", "/var/lib/kubelet/kubeconfig"),
    ("--max-pods", "110"),
    ("--node-status-update-frequency", "10s"),
    (
        "--pod-infra-container-image",
        "mcr.microsoft.com/oss/kubernetes/pause:3.6",
    ),
    ("--pod-manifest-path", "/etc/kubernetes/manifests"),
    ("--pod-max-pids", "-1"),
    ("--protect-kernel-defaults", "true"),
    ("--read-only-port", "0"),
    ("--resolv-conf", "/run/systemd/resolve/resolv.conf"),
    ("--rotate-certificates", "true"),
    ("--streaming-connection-idle-timeout", "4h"),
    ("--tls-cert-file", "/etc/kubernetes/certs/kubeletserver.crt"),
    (
        "--tls-cipher-suites",
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305,TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_RSA_WITH_AES_256_GCM_SHA384,TLS_RSA_WITH_AES_128_GCM_SHA256",
    ),
    (
        "--tls-private-key-file",
        "/etc/kubernetes/certs/kubeletserver.key",
    ),
];

/// Flags, by name.
pub(super) type Flags = BTreeMap<&'static str, String>;

/// Every flag of the node's kubelet: the base flags for its version, then the taints, then
/// its own settings, each overriding the last.
pub(super) fn kubelet_flags(options: &Options, minor_version: u64) -> Flags {
    let mut flags = versioned_base_flags(minor_version);
    if let Some(taints) = register_with_taints(&options.taints) {
        flags.insert("--register-with-taints", taints);
    }
    flags.extend(node_flags(options));
    flags
}

/// `--a=1 --b=2`, sorted by name.
pub(super) fn join_flags(flags: &Flags) -> String {
    let pairs: Vec<String> = flags.iter().map(|(k, v)| format!("{k}={v}")).collect();
    pairs.join(" ")
}

/// The base flags as the kubelet of `minor_version` takes them: flags it has dropped are
/// left out, and it reads ACR credentials either from the out-of-tree provider or, before
/// that, from the cloud config.
fn versioned_base_flags(minor_version: u64) -> Flags {
    let mut flags: Flags = BASE_FLAGS.iter().map(|&(k, v)| (k, v.into())).collect();
    if minor_version < 31 {
        flags.insert("--keep-terminated-pod-volumes", "false".into());
    }
    if minor_version >= 34 {
        flags.remove("--cloud-config");
    }
    if minor_version >= 35 {
        flags.remove("--pod-infra-container-image");
    }
    if uses_credential_provider(minor_version) {
        flags.insert(
            "--image-credential-provider-config",
            "/var/lib/kubelet/credential-provider-config.yaml".into(),
        );
        flags.insert(
            "--image-credential-provider-bin-dir",
            "/var/lib/kubelet/credential-provider".into(),
        );
    } else {
        flags.insert(
            "--feature-gates",
            "DisableKubeletCloudCredentialProviders=false".into(),
        );
        flags.insert(
            "--azure-container-registry-config",
            "/etc/kubernetes/azure.json".into(),
        );
    }
    flags
}

/// `--register-with-taints`: the taints as `key=value:effect`, in order; none without taints.
fn register_with_taints(taints: &[Taint]) -> Option<String> {
    if taints.is_empty() {
        return None;
    }
    let list: Vec<String> = taints.iter().map(describe).collect();
    Some(list.join(","))
}

/// The flags the node's own settings decide: pods, reservations, eviction, the AKSNodeClass's
/// kubelet block and the cluster DNS.
fn node_flags(options: &Options) -> Flags {
    let overhead = &options.overhead;
    let mut flags = Flags::new();
    flags.insert("--max-pods", options.max_pods.to_string());
    flags.insert(
        "--system-reserved",
        reservation_list(&overhead.system_reserved),
    );
    flags.insert("--kube-reserved", reservation_list(&overhead.kube_reserved));
    // Only the memory threshold: the base flag's disk thresholds are replaced, as upstream's.
    flags.insert(
        "--eviction-hard",
        format!(
            "memory.available<{}",
            format_milli(MEMORY, overhead.eviction_threshold.memory)
        ),
    );
    if let Some(kubelet) = &options.kubelet {
        flags.extend(kubelet_configuration_flags(kubelet));
    }
    if let Some(dns) = options.cluster_dns.as_deref().filter(|d| !d.is_empty()) {
        flags.insert("--cluster-dns", dns.into());
    }
    flags
}

/// `cpu=100m,memory=1843Mi`: AKS reserves CPU and memory only, and lists both even when zero.
fn reservation_list(reserved: &Resources) -> String {
    format!(
        "cpu={},memory={}",
        format_milli(CPU, reserved.cpu),
        format_milli(MEMORY, reserved.memory)
    )
}

/// The AKSNodeClass's kubelet settings as flags. Empty strings and unset numbers leave the
/// kubelet's default; `cpuCFSQuotaPeriod` and `failSwapOn` are not passed, as upstream.
fn kubelet_configuration_flags(kubelet: &KubeletConfiguration) -> Flags {
    let mut flags = Flags::new();
    let mut set_nonempty = |name: &'static str, value: &str| {
        if !value.is_empty() {
            flags.insert(name, value.to_string());
        }
    };
    set_nonempty("--cpu-manager-policy", &kubelet.cpu_manager_policy);
    set_nonempty(
        "--topology-manager-policy",
        &kubelet.topology_manager_policy,
    );
    set_nonempty("--container-log-max-size", &kubelet.container_log_max_size);
    set_nonempty(
        "--allowed-unsafe-sysctls",
        &kubelet.allowed_unsafe_sysctls.join(","),
    );
    flags.insert("--cpu-cfs-quota", kubelet.cpu_cfs_quota.to_string());
    flags.insert(
        "--container-log-max-files",
        kubelet.container_log_max_files.to_string(),
    );
    let numbers = [
        (
            "--image-gc-high-threshold",
            kubelet.image_gc_high_threshold_percent.map(i64::from),
        ),
        (
            "--image-gc-low-threshold",
            kubelet.image_gc_low_threshold_percent.map(i64::from),
        ),
        ("--pod-max-pids", kubelet.pod_pids_limit),
    ];
    for (name, value) in numbers {
        if let Some(value) = value {
            flags.insert(name, value.to_string());
        }
    }
    flags
}

/// `KUBELET_NODE_LABELS`: `key=value` pairs sorted by key, without the labels the kubelet may
/// not set.
pub(super) fn node_labels(labels: &BTreeMap<String, String>) -> String {
    let pairs: Vec<String> = labels
        .iter()
        .filter(|(k, _)| can_kubelet_set_label(k))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    pairs.join(",")
}

/// Labels the kubelet sets on its node by name, though their namespaces are Kubernetes'.
const KUBELET_LABELS: [&str; 11] = [
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
];

/// The Kubernetes namespaces (and their subdomains) a kubelet may label its node in.
const KUBELET_NAMESPACES: [&str; 2] = ["kubelet.kubernetes.io", "node.kubernetes.io"];

/// The domains whose labels Kubernetes reserves.
const KUBERNETES_DOMAINS: [&str; 2] = ["kubernetes.io", "k8s.io"];

/// Whether a kubelet may register its node with the label `key`: any label outside
/// Kubernetes' domains, the well-known ones it sets itself, and those in its own namespaces.
/// The kubelet refuses to start with any other in `--node-labels`.
pub fn can_kubelet_set_label(key: &str) -> bool {
    if KUBELET_LABELS.contains(&key) {
        return true;
    }
    let namespace = key.split_once('/').map_or("", |(ns, _)| ns);
    let within = |domain: &str| {
        namespace == domain
            || namespace
                .strip_suffix(domain)
                .is_some_and(|rest| rest.ends_with('.'))
    };
    !KUBERNETES_DOMAINS.into_iter().any(within) || KUBELET_NAMESPACES.into_iter().any(within)
}

/// The taints a node registers with: the NodeClaim's taints, then its startup taints, then
/// `karpenter.sh/unregistered:NoExecute` unless one of them already is that taint (which
/// Karpenter removes once it has adopted the node).
pub fn node_taints(taints: &[Taint], startup_taints: &[Taint]) -> Vec<Taint> {
    let mut all: Vec<Taint> = taints.iter().chain(startup_taints).cloned().collect();
    let unregistered = |t: &Taint| t.key == UNREGISTERED_TAINT_KEY && t.effect == "NoExecute";
    if !all.iter().any(unregistered) {
        all.push(Taint {
            key: UNREGISTERED_TAINT_KEY.into(),
            effect: "NoExecute".into(),
            ..Default::default()
        });
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog;

    fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: value.map(Into::into),
            effect: effect.into(),
            ..Default::default()
        }
    }

    fn options() -> Options {
        Options {
            max_pods: 110,
            overhead: catalog::overhead(2, 8.0),
            ..Default::default()
        }
    }

    /// Upstream's `TestKubeletConfigMap`, for the settings an AKSNodeClass has (its eviction
    /// soft thresholds are never set from one).
    #[test]
    fn kubelet_configuration_as_flags() {
        let kubelet = KubeletConfiguration {
            cpu_manager_policy: "static".into(),
            cpu_cfs_quota: true,
            image_gc_high_threshold_percent: Some(42),
            image_gc_low_threshold_percent: Some(24),
            topology_manager_policy: "best-effort".into(),
            allowed_unsafe_sysctls: vec!["Allowed".into(), "Unsafe".into(), "Sysctls".into()],
            container_log_max_size: "42Mi".into(),
            container_log_max_files: 13,
            pod_pids_limit: Some(99),
            ..Default::default()
        };
        let options = Options {
            kubelet: Some(kubelet),
            max_pods: 0,
            cluster_dns: Some("10.20.0.10".into()),
            ..options()
        };
        let flags = node_flags(&options);
        let want = [
            ("--allowed-unsafe-sysctls", "Allowed,Unsafe,Sysctls"),
            ("--cluster-dns", "10.20.0.10"),
            ("--container-log-max-files", "13"),
            ("--container-log-max-size", "42Mi"),
            ("--cpu-cfs-quota", "true"),
            ("--cpu-manager-policy", "static"),
            ("--eviction-hard", "memory.available<750Mi"),
            ("--image-gc-high-threshold", "42"),
            ("--image-gc-low-threshold", "24"),
            ("--kube-reserved", "cpu=100m,memory=1843Mi"),
            ("--max-pods", "0"),
            ("--pod-max-pids", "99"),
            ("--system-reserved", "cpu=0,memory=0"),
            ("--topology-manager-policy", "best-effort"),
        ];
        let got: Vec<(&str, &str)> = flags.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn kubelet_block_defaults_and_absence() {
        // The CRD's defaults when the block is present; nothing when it is absent.
        let cases = [
            (
                Some(KubeletConfiguration::default()),
                vec![
                    ("--container-log-max-files", "5"),
                    ("--container-log-max-size", "50Mi"),
                    ("--cpu-cfs-quota", "true"),
                    ("--cpu-manager-policy", "none"),
                    ("--topology-manager-policy", "none"),
                ],
            ),
            (None, vec![]),
        ];
        for (kubelet, want) in cases {
            let got = kubelet
                .as_ref()
                .map(kubelet_configuration_flags)
                .unwrap_or_default();
            let got: Vec<(&str, &str)> = got.iter().map(|(k, v)| (*k, v.as_str())).collect();
            assert_eq!(got, want, "{kubelet:?}");
        }
    }

    /// Reservations as upstream's instance type suite expects them for a size's vCPUs and
    /// memory.
    #[test]
    fn reservations_by_size() {
        let cases = [
            (2, 8.0, "cpu=100m,memory=1843Mi"),
            (3, 64.0, "cpu=120m,memory=5611Mi"),
            (4, 16.0, "cpu=140m,memory=2662Mi"),
            (16, 64.0, "cpu=260m,memory=5611Mi"),
            (2, 4.0, "cpu=100m,memory=1Gi"),
        ];
        for (vcpus, memory_gib, want) in cases {
            let overhead = catalog::overhead(vcpus, memory_gib);
            assert_eq!(
                reservation_list(&overhead.kube_reserved),
                want,
                "{vcpus} {memory_gib}"
            );
        }
        assert_eq!(reservation_list(&Resources::new()), "cpu=0,memory=0");
    }

    #[test]
    fn flags_by_kubernetes_version() {
        // (minor, present, absent)
        let cases: [(u64, &[&str], &[&str]); 5] = [
            (
                29,
                &[
                    "--keep-terminated-pod-volumes",
                    "--azure-container-registry-config",
                    "--feature-gates",
                    "--cloud-config",
                    "--pod-infra-container-image",
                ],
                &["--image-credential-provider-config"],
            ),
            (
                30,
                &[
                    "--keep-terminated-pod-volumes",
                    "--image-credential-provider-config",
                    "--image-credential-provider-bin-dir",
                ],
                &["--azure-container-registry-config", "--feature-gates"],
            ),
            (
                31,
                &["--cloud-config", "--image-credential-provider-config"],
                &["--keep-terminated-pod-volumes"],
            ),
            (
                34,
                &["--pod-infra-container-image"],
                &["--cloud-config", "--keep-terminated-pod-volumes"],
            ),
            (
                35,
                &["--image-credential-provider-bin-dir"],
                &["--cloud-config", "--pod-infra-container-image"],
            ),
        ];
        for (minor, present, absent) in cases {
            let flags = versioned_base_flags(minor);
            for flag in present {
                assert!(flags.contains_key(flag), "1.{minor} lacks {flag}");
            }
            for flag in absent {
                assert!(!flags.contains_key(flag), "1.{minor} has {flag}");
            }
        }
    }

    #[test]
    fn node_settings_override_base_flags() {
        let options = Options {
            max_pods: 250,
            cluster_dns: Some(String::new()),
            taints: vec![taint("sku", Some("gpu"), "NoSchedule")],
            ..options()
        };
        let flags = kubelet_flags(&options, 33);
        let cases = [
            ("--max-pods", "250"),
            ("--eviction-hard", "memory.available<750Mi"),
            ("--cluster-dns", "10.0.0.10"),
            ("--register-with-taints", "sku=gpu:NoSchedule"),
            ("--image-gc-high-threshold", "85"),
        ];
        for (flag, want) in cases {
            assert_eq!(flags.get(flag).map(String::as_str), Some(want), "{flag}");
        }
    }

    #[test]
    fn register_with_taints_lists_in_order() {
        let cases = [
            (vec![], None),
            (
                vec![taint("karpenter.sh/unregistered", None, "NoExecute")],
                Some("karpenter.sh/unregistered:NoExecute"),
            ),
            (
                vec![
                    taint("sku", Some("gpu"), "NoSchedule"),
                    taint("empty", Some(""), "PreferNoSchedule"),
                    taint("a", None, "NoExecute"),
                ],
                Some("sku=gpu:NoSchedule,empty:PreferNoSchedule,a:NoExecute"),
            ),
        ];
        for (taints, want) in cases {
            assert_eq!(register_with_taints(&taints).as_deref(), want);
        }
    }

    #[test]
    fn joined_flags_are_sorted() {
        let flags: Flags = [("--b", "2".to_string()), ("--a", "1".to_string())].into();
        assert_eq!(join_flags(&flags), "--a=1 --b=2");
    }

    /// Upstream's `TestIsKubeletLabel`, and the well-known labels.
    #[test]
    fn labels_the_kubelet_may_set() {
        let cases = [
            ("example.com/custom-label", true),
            ("kubernetes.io/hostname", true),
            ("beta.kubernetes.io/instance-type", true),
            ("topology.kubernetes.io/zone", true),
            ("kubernetes.io/arch", true),
            ("beta.kubernetes.io/os", true),
            ("kubelet.kubernetes.io/custom", true),
            ("my-component.kubelet.kubernetes.io/custom", true),
            ("node.kubernetes.io/custom", true),
            ("my-component.node.kubernetes.io/custom", true),
            ("node-restriction.kubernetes.io/test", false),
            ("custom.node-restriction.kubernetes.io/test", false),
            ("scheduler.kubernetes.io/custom", false),
            ("example.k8s.io/custom", false),
            ("k8s.io/custom", false),
            ("kubernetes.io/custom", false),
            ("karpenter.sh/capacity-type", true),
            ("kubernetes.azure.com/cluster", true),
            ("notkubernetes.io/custom", true),
            ("no-namespace", true),
        ];
        for (key, want) in cases {
            assert_eq!(can_kubelet_set_label(key), want, "{key}");
        }
    }

    #[test]
    fn node_labels_are_sorted_and_filtered() {
        let labels: BTreeMap<String, String> = [
            ("karpenter.sh/nodepool", "default"),
            ("kubernetes.azure.com/mode", "user"),
            ("node-restriction.kubernetes.io/team", "a"),
            ("node.kubernetes.io/instance-type", "Standard_D2s_v3"),
            ("app", "web"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(
            node_labels(&labels),
            "app=web,karpenter.sh/nodepool=default,kubernetes.azure.com/mode=user,node.kubernetes.io/instance-type=Standard_D2s_v3"
        );
        assert_eq!(node_labels(&BTreeMap::new()), "");
    }

    #[test]
    fn node_taints_end_with_unregistered() {
        let unregistered = taint("karpenter.sh/unregistered", None, "NoExecute");
        let gpu = taint("sku", Some("gpu"), "NoSchedule");
        let startup = taint("example.com/startup", None, "NoSchedule");
        let cases = [
            (vec![], vec![], vec![unregistered.clone()]),
            (
                vec![gpu.clone()],
                vec![startup.clone()],
                vec![gpu.clone(), startup.clone(), unregistered.clone()],
            ),
            // Already there (by key and effect, whatever its value): not added again.
            (
                vec![],
                vec![
                    taint("karpenter.sh/unregistered", Some("x"), "NoExecute"),
                    gpu.clone(),
                ],
                vec![
                    taint("karpenter.sh/unregistered", Some("x"), "NoExecute"),
                    gpu.clone(),
                ],
            ),
            // Another effect is another taint.
            (
                vec![taint("karpenter.sh/unregistered", None, "NoSchedule")],
                vec![],
                vec![
                    taint("karpenter.sh/unregistered", None, "NoSchedule"),
                    unregistered.clone(),
                ],
            ),
        ];
        for (taints, startup_taints, want) in cases {
            assert_eq!(node_taints(&taints, &startup_taints), want);
        }
    }
}
