//! The script-less custom data: whole scripts against golden files under
//! `testdata/bootstrap/`, and the expectations upstream's provider suites have of the custom
//! data they decode (kubelet flags, node labels, GPU and network variables), as tables.
//!
//! `UPDATE_GOLDENS=1 cargo test -p karpenter-azure --test bootstrap` rewrites the goldens.

use std::collections::BTreeMap;
use std::path::PathBuf;

use base64::Engine;
use k8s_openapi::api::core::v1::Taint;
use karpenter_azure::aksnodeclass::KubeletConfiguration;
use karpenter_azure::bootstrap::{self, Arch, Error, Network, Options, node_taints};
use karpenter_azure::catalog;

const SUBNET_ID: &str = "/subscriptions/12345678-1234-1234-1234-123456789012/resourceGroups/test-resourceGroup/providers/Microsoft.Network/virtualNetworks/aks-vnet-12345678/subnets/aks-subnet";
const KUBELET_IDENTITY: &str = "61f71907-753f-4802-a901-47361c3664f2";

fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
    Taint {
        key: key.into(),
        value: value.map(Into::into),
        effect: effect.into(),
        ..Default::default()
    }
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The labels upstream's provider gives every node of an overlay cluster with Cilium, for an
/// image family, with the NodePool's and instance type's on top.
fn node_labels(
    os_sku: &str,
    requested: &str,
    effective: &str,
    extra: &[(&str, &str)],
) -> BTreeMap<String, String> {
    let mut all = labels(&[
        ("karpenter.sh/do-not-sync-taints", "true"),
        ("karpenter.sh/nodepool", "default"),
        ("karpenter.sh/capacity-type", "on-demand"),
        ("kubernetes.azure.com/azure-cni-overlay", "true"),
        (
            "kubernetes.azure.com/cluster",
            "MC_test-rg_test-cluster_eastus",
        ),
        ("kubernetes.azure.com/ebpf-dataplane", "cilium"),
        (
            "kubernetes.azure.com/kubelet-identity-client-id",
            KUBELET_IDENTITY,
        ),
        ("kubernetes.azure.com/localdns-state", "disabled"),
        ("kubernetes.azure.com/mode", "user"),
        ("kubernetes.azure.com/network-stateless-cni", "false"),
        ("kubernetes.azure.com/network-subnet", "aks-subnet"),
        (
            "kubernetes.azure.com/nodenetwork-vnetguid",
            "a519e60a-cac0-40b2-b883-084477fe6f5c",
        ),
        ("kubernetes.azure.com/os-sku", os_sku),
        ("kubernetes.azure.com/os-sku-effective", effective),
        ("kubernetes.azure.com/os-sku-requested", requested),
        ("kubernetes.azure.com/podnetwork-type", "overlay"),
        ("kubernetes.azure.com/priority", "regular"),
        ("kubernetes.azure.com/role", "agent"),
        ("kubernetes.azure.com/scalesetpriority", "regular"),
        ("karpenter.azure.com/placement-scope", "zonal"),
        ("karpenter.azure.com/sku-storage-ultra-ssd", "false"),
        ("topology.kubernetes.io/region", "eastus"),
        ("kubernetes.io/os", "linux"),
    ]);
    all.extend(labels(extra));
    all
}

/// A node of an Azure CNI overlay cluster with Cilium, as upstream's defaults make it:
/// Ubuntu 22.04, Kubernetes 1.33, a Standard_D2s_v3 (2 vCPUs, 8 GiB), no kubelet block.
fn ubuntu2204_default() -> Options {
    Options {
        cluster_endpoint: "https://test-cluster-dns-abc123.hcp.eastus.azmk8s.io:443".into(),
        ca_bundle: "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUNZVENDQWNxZ0F3SUJBZ0lRCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K".into(),
        tls_bootstrap_token: "abcdef.0123456789abcdef".into(),
        kubernetes_version: "1.33.2".into(),
        arch: Arch::Amd64,
        tenant_id: "72f988bf-86f1-41af-91ab-2d7cd011db47".into(),
        subscription_id: "12345678-1234-1234-1234-123456789012".into(),
        location: "eastus".into(),
        node_resource_group: "MC_test-rg_test-cluster_eastus".into(),
        kubelet_identity_client_id: KUBELET_IDENTITY.into(),
        subnet_id: SUBNET_ID.into(),
        network_security_group: "aks-agentpool-12345678-nsg".into(),
        network: Network::default(),
        cluster_dns: None,
        labels: node_labels(
            "Ubuntu",
            "Ubuntu2204",
            "Ubuntu2204",
            &[
                ("karpenter.azure.com/sku-name", "Standard_D2s_v3"),
                ("node.kubernetes.io/instance-type", "Standard_D2s_v3"),
                ("kubernetes.io/arch", "amd64"),
            ],
        ),
        taints: node_taints(&[], &[]),
        kubelet: None,
        max_pods: Network::default().max_pods(None),
        overhead: catalog::overhead(2, 8.0),
        vm_size: "Standard_D2s_v3".into(),
        install_gpu_driver: true,
    }
}

/// Azure Linux on Kubernetes 1.30 (the in-tree ACR credentials are gone, terminated pod
/// volumes still a flag), Azure CNI on the node subnet with Calico, a custom DNS service, a
/// kubelet block with every setting, NodeClaim and startup taints, 40 pods, a
/// Standard_D4s_v5 (4 vCPUs, 16 GiB).
fn azurelinux_kubelet_taints() -> Options {
    Options {
        kubernetes_version: "1.30.4".into(),
        network: Network {
            plugin: "azure".into(),
            plugin_mode: String::new(),
            dataplane: "azure".into(),
            policy: "calico".into(),
        },
        cluster_dns: Some("10.20.0.10".into()),
        labels: labels(&[
            ("karpenter.sh/do-not-sync-taints", "true"),
            ("karpenter.sh/nodepool", "batch"),
            ("karpenter.sh/capacity-type", "on-demand"),
            (
                "kubernetes.azure.com/cluster",
                "MC_test-rg_test-cluster_eastus",
            ),
            (
                "kubernetes.azure.com/kubelet-identity-client-id",
                KUBELET_IDENTITY,
            ),
            ("kubernetes.azure.com/mode", "user"),
            ("kubernetes.azure.com/os-sku", "AzureLinux"),
            ("kubernetes.azure.com/os-sku-effective", "AzureLinux3"),
            ("kubernetes.azure.com/os-sku-requested", "AzureLinux"),
            ("kubernetes.azure.com/role", "agent"),
            ("node.kubernetes.io/instance-type", "Standard_D4s_v5"),
            ("team", "batch"),
        ]),
        taints: node_taints(
            &[taint("dedicated", Some("batch"), "NoSchedule")],
            &[taint("example.com/agent-not-ready", None, "NoExecute")],
        ),
        kubelet: Some(KubeletConfiguration {
            cpu_manager_policy: "static".into(),
            cpu_cfs_quota: false,
            image_gc_high_threshold_percent: Some(75),
            image_gc_low_threshold_percent: Some(60),
            topology_manager_policy: "single-numa-node".into(),
            allowed_unsafe_sysctls: vec!["net.core.somaxconn".into(), "kernel.msg*".into()],
            container_log_max_size: "100Mi".into(),
            container_log_max_files: 3,
            pod_pids_limit: Some(4096),
            ..Default::default()
        }),
        max_pods: 40,
        overhead: catalog::overhead(4, 16.0),
        vm_size: "Standard_D4s_v5".into(),
        ..ubuntu2204_default()
    }
}

/// A GPU size whose NVIDIA driver the node installs: a Standard_NC16as_T4_v3 (16 vCPUs,
/// 110 GiB) on Kubernetes 1.34 (no kubelet download, no cloud config flag), tainted for GPU
/// pods.
fn gpu_driver_install() -> Options {
    Options {
        kubernetes_version: "1.34.1".into(),
        labels: node_labels(
            "Ubuntu",
            "Ubuntu",
            "Ubuntu2204",
            &[
                ("karpenter.azure.com/sku-gpu-count", "1"),
                ("karpenter.azure.com/sku-gpu-manufacturer", "nvidia"),
                ("karpenter.azure.com/sku-gpu-name", "T4"),
                ("karpenter.azure.com/sku-name", "Standard_NC16as_T4_v3"),
                ("kubernetes.azure.com/network-stateless-cni", "true"),
            ],
        ),
        taints: node_taints(&[taint("sku", Some("gpu"), "NoSchedule")], &[]),
        overhead: catalog::overhead(16, 110.0),
        vm_size: "Standard_NC16as_T4_v3".into(),
        install_gpu_driver: true,
        ..ubuntu2204_default()
    }
}

/// A spot arm64 node on Kubernetes 1.35 (no pause image flag), Ubuntu 24.04, a
/// Standard_D4ps_v5 (4 vCPUs, 16 GiB). The labels include two the kubelet may not set, which
/// are left out.
fn spot_arm64() -> Options {
    Options {
        kubernetes_version: "1.35.0".into(),
        arch: Arch::Arm64,
        labels: node_labels(
            "Ubuntu",
            "Ubuntu2404",
            "Ubuntu2404",
            &[
                ("karpenter.sh/capacity-type", "spot"),
                ("kubernetes.azure.com/scalesetpriority", "spot"),
                ("kubernetes.azure.com/priority", "spot"),
                ("kubernetes.azure.com/network-stateless-cni", "true"),
                ("kubernetes.io/arch", "arm64"),
                ("node-restriction.kubernetes.io/reserved", "true"),
                ("kubernetes.io/team", "a"),
            ],
        ),
        overhead: catalog::overhead(4, 16.0),
        vm_size: "Standard_D4ps_v5".into(),
        ..ubuntu2204_default()
    }
}

/// Compares `actual` with the golden file `name`, or rewrites it under `UPDATE_GOLDENS`.
fn check_golden(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/testdata/bootstrap")
        .join(name);
    if std::env::var_os("UPDATE_GOLDENS").is_some() {
        std::fs::write(&path, actual).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDENS=1 writes it)", path.display()));
    if expected == actual {
        return;
    }
    let first_difference = expected
        .lines()
        .zip(actual.lines())
        .position(|(e, a)| e != a)
        .unwrap_or_else(|| expected.lines().count().min(actual.lines().count()));
    panic!(
        "{name} differs from line {}:\n  golden: {:?}\n  actual: {:?}\n(UPDATE_GOLDENS=1 rewrites it)",
        first_difference + 1,
        expected.lines().nth(first_difference),
        actual.lines().nth(first_difference),
    );
}

#[test]
fn goldens() {
    let cases = [
        ("ubuntu2204_default.sh", ubuntu2204_default()),
        ("azurelinux_kubelet_taints.sh", azurelinux_kubelet_taints()),
        ("gpu_driver_install.sh", gpu_driver_install()),
        ("spot_arm64.sh", spot_arm64()),
    ];
    for (name, options) in cases {
        let script = bootstrap::script(&options).unwrap();
        check_golden(name, &script);
    }
}

#[test]
fn custom_data_decodes_to_the_golden_script() {
    let options = ubuntu2204_default();
    let custom_data = bootstrap::custom_data(&options).unwrap();
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(custom_data)
        .unwrap();
    assert_eq!(
        String::from_utf8(decoded).unwrap(),
        bootstrap::script(&options).unwrap()
    );
}

/// The value of `NAME="…"` or `NAME=…` in a script.
fn variable<'a>(script: &'a str, name: &str) -> Option<&'a str> {
    let prefix = format!("{name}=");
    let line = script.lines().find(|l| l.starts_with(&prefix))?;
    let value = &line[prefix.len()..];
    Some(
        value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(value),
    )
}

/// The kubelet's flags, by name without dashes, as upstream's `ExpectKubeletFlags` reads them.
fn kubelet_flags(script: &str) -> BTreeMap<String, String> {
    let flags = variable(script, "KUBELET_FLAGS").expect("KUBELET_FLAGS is set");
    flags
        .split(' ')
        .map(|flag| {
            let (name, value) = flag.split_once('=').expect("--name=value");
            (name.trim_start_matches('-').to_string(), value.to_string())
        })
        .collect()
}

fn decoded(script: &str, name: &str) -> String {
    let value = variable(script, name).unwrap_or_default();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(value)
        .unwrap();
    String::from_utf8(bytes).unwrap()
}

fn expect_flags(options: &Options, expected: &[(&str, &str)]) {
    let flags = kubelet_flags(&bootstrap::script(options).unwrap());
    for (name, want) in expected {
        assert_eq!(
            flags.get(*name).map(String::as_str),
            Some(*want),
            "--{name}"
        );
    }
}

/// The kubelet block upstream's instance type suite provisions with.
fn suite_kubelet() -> KubeletConfiguration {
    KubeletConfiguration {
        cpu_manager_policy: "static".into(),
        cpu_cfs_quota: true,
        image_gc_high_threshold_percent: Some(30),
        image_gc_low_threshold_percent: Some(20),
        topology_manager_policy: "best-effort".into(),
        allowed_unsafe_sysctls: vec!["Allowed".into(), "Unsafe".into(), "Sysctls".into()],
        container_log_max_size: "42Mi".into(),
        container_log_max_files: 13,
        pod_pids_limit: Some(99),
        ..Default::default()
    }
}

/// Upstream's "Nodepool with KubeletConfig" contexts: an overlay and a kubenet cluster, with
/// and without the NodeClass's `maxPods`.
#[test]
fn kubelet_configuration_flags() {
    let kubenet = Network {
        plugin: "kubenet".into(),
        plugin_mode: String::new(),
        dataplane: String::new(),
        policy: String::new(),
    };
    let cases = [
        (Network::default(), None, "250"),
        (kubenet.clone(), None, "110"),
        (kubenet, Some(15), "15"),
    ];
    for (network, node_class_max_pods, max_pods) in cases {
        let options = Options {
            max_pods: network.max_pods(node_class_max_pods),
            network,
            kubelet: Some(suite_kubelet()),
            ..ubuntu2204_default()
        };
        expect_flags(
            &options,
            &[
                ("eviction-hard", "memory.available<750Mi"),
                ("image-gc-high-threshold", "30"),
                ("image-gc-low-threshold", "20"),
                ("cpu-cfs-quota", "true"),
                ("max-pods", max_pods),
                ("topology-manager-policy", "best-effort"),
                ("container-log-max-size", "42Mi"),
                ("allowed-unsafe-sysctls", "Allowed,Unsafe,Sysctls"),
                ("cpu-manager-policy", "static"),
                ("container-log-max-files", "13"),
                ("pod-max-pids", "99"),
                ("system-reserved", "cpu=0,memory=0"),
                ("kube-reserved", "cpu=100m,memory=1843Mi"),
            ],
        );
    }
}

/// Upstream's "Custom DNS" context, and the default when the controller has none.
#[test]
fn cluster_dns() {
    let cases = [
        (Some("10.244.0.1"), "10.244.0.1"),
        (None, "10.0.0.10"),
        (Some(""), "10.0.0.10"),
    ];
    for (dns, want) in cases {
        let options = Options {
            cluster_dns: dns.map(Into::into),
            ..ubuntu2204_default()
        };
        expect_flags(&options, &[("cluster-dns", want)]);
    }
}

/// Upstream's "Bootstrap" context, across the versions it branches on: terminated pod
/// volumes, the ACR credential provider and its download, the kubelet download, the cloud
/// config and pause image flags.
#[test]
fn flags_and_downloads_by_kubernetes_version() {
    struct Case {
        version: &'static str,
        keep_terminated_pod_volumes: bool,
        credential_provider: Option<&'static str>,
        kube_binary: bool,
        cloud_config: bool,
        pause_image: bool,
    }
    let cases = [
        Case {
            version: "1.29.7",
            keep_terminated_pod_volumes: true,
            credential_provider: None,
            kube_binary: true,
            cloud_config: true,
            pause_image: true,
        },
        Case {
            version: "1.30.0",
            keep_terminated_pod_volumes: true,
            credential_provider: Some("1.30.12"),
            kube_binary: true,
            cloud_config: true,
            pause_image: true,
        },
        Case {
            version: "1.31.3",
            keep_terminated_pod_volumes: false,
            credential_provider: Some("1.31.6"),
            kube_binary: true,
            cloud_config: true,
            pause_image: true,
        },
        Case {
            version: "1.32.1",
            keep_terminated_pod_volumes: false,
            credential_provider: Some("1.32.5"),
            kube_binary: true,
            cloud_config: true,
            pause_image: true,
        },
        Case {
            version: "1.33.0",
            keep_terminated_pod_volumes: false,
            credential_provider: Some("1.33.0"),
            kube_binary: true,
            cloud_config: true,
            pause_image: true,
        },
        Case {
            version: "1.34.0",
            keep_terminated_pod_volumes: false,
            credential_provider: Some("1.33.0"),
            kube_binary: false,
            cloud_config: false,
            pause_image: true,
        },
        Case {
            version: "1.35.5",
            keep_terminated_pod_volumes: false,
            credential_provider: Some("1.33.0"),
            kube_binary: false,
            cloud_config: false,
            pause_image: false,
        },
    ];
    for case in cases {
        let v = case.version;
        let options = Options {
            kubernetes_version: v.into(),
            ..ubuntu2204_default()
        };
        let script = bootstrap::script(&options).unwrap();
        let flags = kubelet_flags(&script);
        let has = |flag: &str| flags.contains_key(flag);
        assert_eq!(
            has("keep-terminated-pod-volumes"),
            case.keep_terminated_pod_volumes,
            "{v}"
        );
        assert_eq!(has("cloud-config"), case.cloud_config, "{v}");
        assert_eq!(has("pod-infra-container-image"), case.pause_image, "{v}");
        assert_eq!(variable(&script, "KUBERNETES_VERSION"), Some(v));
        let kube_binary = format!(
            "https://acs-mirror.azureedge.net/kubernetes/v{v}/binaries/kubernetes-node-linux-amd64.tar.gz"
        );
        let kube_binary = if case.kube_binary {
            kube_binary.as_str()
        } else {
            ""
        };
        assert_eq!(
            variable(&script, "KUBE_BINARY_URL"),
            Some(kube_binary),
            "{v}"
        );
        let download = variable(&script, "CREDENTIAL_PROVIDER_DOWNLOAD_URL");
        match case.credential_provider {
            Some(release) => {
                assert!(!has("azure-container-registry-config"), "{v}");
                assert!(!has("feature-gates"), "{v}");
                assert_eq!(
                    flags
                        .get("image-credential-provider-config")
                        .map(String::as_str),
                    Some("/var/lib/kubelet/credential-provider-config.yaml"),
                    "{v}"
                );
                assert_eq!(
                    flags
                        .get("image-credential-provider-bin-dir")
                        .map(String::as_str),
                    Some("/var/lib/kubelet/credential-provider"),
                    "{v}"
                );
                let url = format!(
                    "https://acs-mirror.azureedge.net/cloud-provider-azure/v{release}/binaries/azure-acr-credential-provider-linux-amd64-v{release}.tar.gz"
                );
                assert_eq!(download, Some(url.as_str()), "{v}");
            }
            None => {
                assert_eq!(
                    flags
                        .get("azure-container-registry-config")
                        .map(String::as_str),
                    Some("/etc/kubernetes/azure.json"),
                    "{v}"
                );
                assert_eq!(
                    flags.get("feature-gates").map(String::as_str),
                    Some("DisableKubeletCloudCredentialProviders=false"),
                    "{v}"
                );
                assert!(!has("image-credential-provider-config"), "{v}");
                assert!(!has("image-credential-provider-bin-dir"), "{v}");
                assert_eq!(download, Some(""), "{v}");
            }
        }
    }
}

/// Upstream's "should include karpenter.sh/unregistered taint", and the order of the rest.
#[test]
fn registered_taints() {
    let cases = [
        (vec![], vec![], "karpenter.sh/unregistered:NoExecute"),
        (
            vec![taint("sku", Some("gpu"), "NoSchedule")],
            vec![taint("example.com/not-ready", None, "NoExecute")],
            "sku=gpu:NoSchedule,example.com/not-ready:NoExecute,karpenter.sh/unregistered:NoExecute",
        ),
    ];
    for (taints, startup_taints, want) in cases {
        let options = Options {
            taints: node_taints(&taints, &startup_taints),
            ..ubuntu2204_default()
        };
        expect_flags(&options, &[("register-with-taints", want)]);
    }
}

/// Upstream's "Azure CNI node labels and agentbaker network plugin" table: what the image is
/// told to do about the CNI, and the policy passed through.
#[test]
fn network_plugin_variables() {
    let cases = [
        ("azure", "", "", "", "azure"),
        ("azure", "overlay", "", "", "none"),
        ("none", "", "", "", "none"),
        ("azure", "overlay", "cilium", "cilium", "none"),
        ("azure", "", "cilium", "cilium", "none"),
    ];
    for (plugin, plugin_mode, dataplane, policy, want) in cases {
        let options = Options {
            network: Network {
                plugin: plugin.into(),
                plugin_mode: plugin_mode.into(),
                dataplane: dataplane.into(),
                policy: policy.into(),
            },
            ..ubuntu2204_default()
        };
        let script = bootstrap::script(&options).unwrap();
        assert_eq!(
            variable(&script, "NETWORK_PLUGIN"),
            Some(want),
            "{plugin}/{plugin_mode}/{dataplane}"
        );
        assert_eq!(variable(&script, "NETWORK_POLICY"), Some(policy));
        assert!(script.contains(&format!("NETWORK_POLICY=\"{policy}\"\n")));
    }
}

/// A variable's name and value.
type Variable = (&'static str, &'static str);

/// Upstream's "should schedule GPU pod on GPU capable node" expectations, and the same size
/// with `gpu.mode: None` or a size without an NVIDIA GPU.
#[test]
fn gpu_variables() {
    let cuda = [
        ("GPU_NODE", "true"),
        ("SGX_NODE", "false"),
        ("MIG_NODE", "false"),
        ("CONFIG_GPU_DRIVER_IF_NEEDED", "true"),
        ("ENABLE_GPU_DEVICE_PLUGIN_IF_NEEDED", "false"),
        ("GPU_DRIVER_TYPE", "cuda-lts"),
        ("GPU_DRIVER_VERSION", "580.159.04"),
        ("GPU_IMAGE_SHA", "20260629214430"),
        ("GPU_NEEDS_FABRIC_MANAGER", "false"),
        ("GPU_INSTANCE_PROFILE", ""),
    ];
    let none = [
        ("GPU_NODE", "false"),
        ("CONFIG_GPU_DRIVER_IF_NEEDED", "false"),
        ("GPU_DRIVER_TYPE", ""),
        ("GPU_DRIVER_VERSION", ""),
        ("GPU_IMAGE_SHA", ""),
    ];
    let grid = [
        ("GPU_NODE", "true"),
        ("GPU_DRIVER_TYPE", "grid"),
        ("GPU_DRIVER_VERSION", "570.211.01"),
        ("GPU_IMAGE_SHA", "20260522192315"),
    ];
    // (size, driver wanted, variables, containerd's default runtime)
    let cases: [(&str, bool, &[Variable], &str); 5] = [
        (
            "Standard_NC16as_T4_v3",
            true,
            &cuda,
            "nvidia-container-runtime",
        ),
        ("Standard_NC16as_T4_v3", false, &none, "runc"),
        (
            "Standard_NV36ads_A10_v5",
            true,
            &grid,
            "nvidia-container-runtime",
        ),
        ("Standard_NV4ads_V710_v5", true, &none, "runc"),
        ("Standard_D2s_v3", true, &none, "runc"),
    ];
    for (size, install, expected, runtime) in cases {
        let options = Options {
            vm_size: size.into(),
            install_gpu_driver: install,
            ..ubuntu2204_default()
        };
        let script = bootstrap::script(&options).unwrap();
        for (name, want) in expected {
            assert_eq!(
                variable(&script, name),
                Some(*want),
                "{size} {install} {name}"
            );
        }
        let containerd = decoded(&script, "CONTAINERD_CONFIG_CONTENT");
        let default_runtime = format!("default_runtime_name = \"{runtime}\"\n");
        assert!(containerd.contains(&default_runtime), "{size} {install}");
    }
}

/// Upstream's well-known label table: what reaches `KUBELET_NODE_LABELS` and what the kubelet
/// could not set.
#[test]
fn node_labels_variable() {
    let options = spot_arm64();
    let script = bootstrap::script(&options).unwrap();
    let value = variable(&script, "KUBELET_NODE_LABELS").unwrap();
    let listed: Vec<&str> = value.split(',').collect();
    let present = [
        "karpenter.sh/capacity-type=spot",
        "kubernetes.azure.com/scalesetpriority=spot",
        "kubernetes.azure.com/azure-cni-overlay=true",
        "kubernetes.azure.com/network-subnet=aks-subnet",
        "kubernetes.azure.com/nodenetwork-vnetguid=a519e60a-cac0-40b2-b883-084477fe6f5c",
        "kubernetes.azure.com/podnetwork-type=overlay",
        "kubernetes.azure.com/ebpf-dataplane=cilium",
        "kubernetes.io/arch=arm64",
        "topology.kubernetes.io/region=eastus",
    ];
    for label in present {
        assert!(listed.contains(&label), "{label} missing from {value}");
    }
    for key in [
        "node-restriction.kubernetes.io/reserved",
        "kubernetes.io/team",
    ] {
        assert!(!value.contains(key), "{key} in {value}");
    }
    let keys: Vec<&str> = listed
        .iter()
        .filter_map(|l| l.split_once('='))
        .map(|(k, _)| k)
        .collect();
    assert!(keys.is_sorted(), "sorted by key: {value}");
}

/// The parts of the cluster the node's cloud config is written from.
#[test]
fn cluster_variables() {
    let options = spot_arm64();
    let script = bootstrap::script(&options).unwrap();
    let cases = [
        (
            "API_SERVER_NAME",
            "test-cluster-dns-abc123.hcp.eastus.azmk8s.io",
        ),
        ("TENANT_ID", "72f988bf-86f1-41af-91ab-2d7cd011db47"),
        ("SUBSCRIPTION_ID", "12345678-1234-1234-1234-123456789012"),
        ("RESOURCE_GROUP", "MC_test-rg_test-cluster_eastus"),
        ("LOCATION", "eastus"),
        ("SUBNET", "aks-subnet"),
        ("VIRTUAL_NETWORK", "aks-vnet-12345678"),
        ("VIRTUAL_NETWORK_RESOURCE_GROUP", "test-resourceGroup"),
        ("NETWORK_SECURITY_GROUP", "aks-agentpool-12345678-nsg"),
        ("ROUTE_TABLE", "aks-agentpool-12345678-routetable"),
        ("USER_ASSIGNED_IDENTITY_ID", KUBELET_IDENTITY),
        ("TLS_BOOTSTRAP_TOKEN", "abcdef.0123456789abcdef"),
        ("KUBE_CA_CRT", options.ca_bundle.as_str()),
        (
            "VNET_CNI_PLUGINS_URL",
            "https://acs-mirror.azureedge.net/azure-cni/v1.4.32/binaries/azure-vnet-cni-linux-arm64-v1.4.32.tgz",
        ),
        (
            "CNI_PLUGINS_URL",
            "https://acs-mirror.azureedge.net/cni-plugins/v1.1.1/binaries/cni-plugins-linux-arm64-v1.1.1.tgz",
        ),
        (
            "CREDENTIAL_PROVIDER_DOWNLOAD_URL",
            "https://acs-mirror.azureedge.net/cloud-provider-azure/v1.33.0/binaries/azure-acr-credential-provider-linux-arm64-v1.33.0.tar.gz",
        ),
    ];
    for (name, want) in cases {
        assert_eq!(variable(&script, name), Some(want), "{name}");
    }
    let sysctl = decoded(&script, "SYSCTL_CONTENT");
    assert!(sysctl.starts_with("net.ipv4.tcp_retries2=8\n"));
    assert_eq!(decoded(&script, "SERVICE_PRINCIPAL_FILE_CONTENT"), "msi");
}

/// A value the shell would read as syntax is quoted; upstream's unquoted resource group
/// would end the script with a syntax error.
#[test]
fn values_stay_one_shell_word() {
    let options = Options {
        node_resource_group: "MC_rg(prod)_cluster_eastus".into(),
        subnet_id: "/subscriptions/s/resourceGroups/net(shared)/providers/Microsoft.Network/virtualNetworks/vnet/subnets/nodes".into(),
        ..ubuntu2204_default()
    };
    let script = bootstrap::script(&options).unwrap();
    assert!(script.contains("\nRESOURCE_GROUP='MC_rg(prod)_cluster_eastus'\n"));
    assert!(script.contains("\nVIRTUAL_NETWORK_RESOURCE_GROUP='net(shared)'\n"));
}

#[test]
fn invalid_options_are_refused() {
    let cases = [
        (
            Options {
                tls_bootstrap_token: String::new(),
                ..ubuntu2204_default()
            },
            "tls_bootstrap_token",
        ),
        (
            Options {
                kubernetes_version: "latest".into(),
                ..ubuntu2204_default()
            },
            "kubernetes_version",
        ),
        (
            Options {
                subnet_id: "aks-subnet".into(),
                ..ubuntu2204_default()
            },
            "subnet_id",
        ),
    ];
    for (options, field) in cases {
        let error = bootstrap::custom_data(&options).unwrap_err();
        let named = match &error {
            Error::Missing { field } | Error::Invalid { field, .. } => *field,
        };
        assert_eq!(named, field, "{error}");
    }
}
