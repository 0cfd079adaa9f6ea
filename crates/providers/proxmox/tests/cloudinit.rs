//! Cloud-init NoCloud data: upstream's template functions, the values built from a VM's config
//! and the NodeClass, the default documents, K3s and Talos templates rendered against golden
//! files, the `cidata` ISO read back by an independent reader, and bootstrap tokens.
//!
//! Golden files live in `tests/testdata/cloudinit/`; `UPDATE_GOLDEN=1` rewrites them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use karpenter_core::instancetype::Overhead;
use karpenter_core::resources::Resources as Capacity;
use karpenter_proxmox::cloudinit::bootstrap::{self, BootstrapToken};
use karpenter_proxmox::cloudinit::template::{self, GoStruct, TemplateError, Value};
use karpenter_proxmox::cloudinit::values::{
    InterfaceConfig, KubeletConfiguration, Kubernetes, KubernetesTaint, MetaData, NetworkConfig,
    NodeInterface, Resources, UserDataValues, provider_id,
};
use karpenter_proxmox::cloudinit::{NoCloud, defaults, iso, render};
use serde_json::json;

fn testdata(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/testdata/cloudinit")
        .join(path)
}

fn read(path: &str) -> String {
    std::fs::read_to_string(testdata(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Compares `actual` with the golden file `path` (or rewrites it under `UPDATE_GOLDEN=1`).
fn golden(path: &str, actual: &str) {
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(testdata(path), actual).unwrap();
        return;
    }
    let want = read(path);
    assert!(
        want == actual,
        "{path} differs from the golden file\n--- want\n{want}\n--- got\n{actual}"
    );
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// A VM cloned from a template with two NICs: `net0` on `vmbr0` (DHCP, SLAAC, the bridge's
/// MTU), `net1` on `vmbr1` with static addresses.
const TWO_NIC_VM: [(&str, &str); 7] = [
    (
        "net0",
        "virtio=BC:24:11:CD:B9:41,bridge=vmbr0,firewall=1,mtu=1",
    ),
    (
        "net1",
        "virtio=BC:24:11:EE:9A:23,bridge=vmbr1,firewall=0,mtu=1400",
    ),
    ("ipconfig0", "ip=dhcp,ip6=auto"),
    (
        "ipconfig1",
        "ip=192.168.10.5/24,gw=192.168.10.1,ip6=2001:db8:2::5/64,gw6=2001:db8:2::1",
    ),
    ("nameserver", "1.1.1.1 2001:4860:4860::8888"),
    ("searchdomain", "example.com"),
    ("cores", "2"),
];

fn node_bridges() -> BTreeMap<String, NodeInterface> {
    BTreeMap::from([(
        "vmbr0".to_string(),
        NodeInterface {
            address4: "10.0.0.2/24".to_string(),
            address6: "2001:db8:1::2/64".to_string(),
            gateway4: "10.0.0.1".to_string(),
            gateway6: String::new(),
            mtu: 9000,
        },
    )])
}

/// The values of VM 20001 in region `region-1` on node `pve-1`, a `c1.2VCPU-4GB` with the
/// provider's usual overhead and a NodeClass setting a few kubelet options.
fn fixture(values: &[(&str, &str)]) -> UserDataValues {
    let overhead = Overhead {
        kube_reserved: Capacity::parse(&[("cpu", "50m"), ("memory", "384Mi")]),
        system_reserved: Capacity::parse(&[("cpu", "10m"), ("memory", "64Mi")]),
        eviction_threshold: Capacity::parse(&[("memory", "100Mi")]),
    };
    let kubelet = json!({
        "maxPods": 110,
        "clusterDNS": ["10.96.0.10"],
        "allowedUnsafeSysctls": ["net.core.somaxconn"],
        "topologyManagerPolicy": "best-effort",
    });
    let pid = provider_id("region-1", 20001);
    UserDataValues {
        metadata: MetaData {
            hostname: "default-6ggrl".to_string(),
            instance_id: "20001".to_string(),
            instance_uuid: "4f0c6c43-0e7d-4b4f-9a3c-2f5d0d2b8e11".to_string(),
            instance_type: "c1.2VCPU-4GB".to_string(),
            provider_id: pid.clone(),
            region: "region-1".to_string(),
            zone: "pve-1".to_string(),
            tags: strings(&["karpenter"]),
            node_class: "default".to_string(),
        },
        network: NetworkConfig::from_vm_config(TWO_NIC_VM, &node_bridges()),
        resources: Resources::from_capacity(&Capacity::parse(&[
            ("cpu", "2"),
            ("memory", "4Gi"),
            ("hugepages-2Mi", "512Mi"),
        ])),
        kubernetes: Kubernetes {
            version: "v1.33.4".to_string(),
            root_ca: "-----BEGIN CERTIFICATE-----\nMIIBdzCCAR2gAwIBAgIBADAKBggqhkjOPQQDAjAjMSEwHwYDVQQDDBhrM3Mt\n-----END CERTIFICATE-----\n".to_string(),
            bootstrap_token: "abcdef.0123456789abcdef".to_string(),
            kubelet_configuration: KubeletConfiguration::for_instance(
                Some(&kubelet),
                &overhead,
                &pid,
            ),
        },
        values: values
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

fn render_with(text: &str, data: &Value) -> String {
    template::execute("test", text, data).unwrap_or_else(|e| panic!("{text}: {e}"))
}

// ---- functions (upstream's functions_test.go and docs/functions.md) -------------------

#[test]
fn network_functions_as_upstream_tests_them() {
    for (name, tpl, want) in [
        (
            "default",
            r#"ipv6: {{ "2001:db8:1::/64" | cidrslaac "00:1A:2B:3C:4D:5E" }}"#,
            "ipv6: 2001:db8:1:0:21a:2bff:fe3c:4d5e/64",
        ),
        (
            "mask-80",
            r#"ipv6: {{ "2001:db8:1:2:3::/80" | cidrslaac "00:1A:2B:3C:4D:5E" }}"#,
            "ipv6: 2001:db8:1:2:3:2bff:fe3c:4d5e/80",
        ),
        (
            "mask-88",
            r#"ipv6: {{ "2001:db8:1:2:3::/88" | cidrslaac "00:1A:2B:3C:4D:5E" }}"#,
            "ipv6: 2001:db8:1:2:3:ff:fe3c:4d5e/88",
        ),
        (
            "mask-112",
            r#"ipv6: {{ "2001:db8:1:2:3::/112" | cidrslaac "00:1A:2B:3C:4D:5E" }}"#,
            "ipv6: 2001:db8:1:2:3::4d5e/112",
        ),
        (
            "cidrhost",
            r#"ipv4: {{ "192.168.1.5/24" | cidrhost }}"#,
            "ipv4: 192.168.1.5",
        ),
        (
            "cidrhost with host number",
            r#"ipv4: {{ cidrhost "192.168.1.5/24" 15 }}"#,
            "ipv4: 192.168.1.15",
        ),
        (
            "cidrhost from the end",
            r#"{{ cidrhost "10.12.112.0/20" -2 }}"#,
            "10.12.127.254",
        ),
    ] {
        assert_eq!(render_with(tpl, &Value::Nil), want, "{name}");
    }
}

#[test]
fn every_function_with_upstreams_argument_order() {
    let data = Value::from(&fixture(&[
        ("SSHAuthorizedKeys", "ssh-ed25519 AAAA1,ssh-ed25519 AAAA2"),
        ("flag", "true"),
        ("empty", ""),
        ("source", "ds=nocloud;i=1234"),
    ]));
    for (tpl, want) in [
        // Logic.
        (r#"{{ default "world" "" }}"#, "world"),
        (r#"{{ default "world" "hello" }}"#, "hello"),
        (r#"{{ .Values.missing | default "none" }}"#, "none"),
        (r#"{{ .Values.empty | default "none" }}"#, "none"),
        (r#"{{ .Resources.Hugepages1Gi | default 8 }}"#, "8"),
        (r#"{{ coalesce "" "" "hello" "world" }}"#, "hello"),
        (r#"{{ coalesce .Values.empty .Metadata.Zone }}"#, "pve-1"),
        (r#"{{ ternary "yes" "no" true }}"#, "yes"),
        (r#"{{ ternary "yes" "no" false }}"#, "no"),
        (
            r#"{{ eq .Metadata.Zone "pve-1" | ternary "here" "there" }}"#,
            "here",
        ),
        (
            r#"{{ toJson .Metadata.Tags }} {{ toJson .Resources }}"#,
            r#"["karpenter"] {"CPU":2,"Memory":4294967296,"Hugepages1Gi":0,"Hugepages2Mi":256}"#,
        ),
        (
            r#"{{ toPrettyJson .Metadata.Tags }}"#,
            "[\n  \"karpenter\"\n]",
        ),
        (
            r#"{{ toYaml .Resources }}"#,
            "cpu: 2\nmemory: 4294967296\nhugepages2Mi: 256",
        ),
        (
            r#"{{ toYaml .Kubernetes.KubeletConfiguration.RegisterWithTaints }}"#,
            "- key: karpenter.sh/unregistered\n  effect: NoExecute",
        ),
        (
            r#"{{ toYamlPretty .Kubernetes.KubeletConfiguration.KubeReserved }}"#,
            "cpu: 50m\nmemory: 384Mi",
        ),
        (r#"{{ toPrettyYaml .Metadata.Tags }}"#, "- karpenter"),
        // Strings.
        (r#"{{ indent 4 "hello\nworld" }}"#, "    hello\n    world"),
        (
            r#"{{ nindent 4 "hello\nworld" }}"#,
            "\n    hello\n    world",
        ),
        (r#"{{ quote "hello" }}"#, r#""hello""#),
        (
            r#"{{ quote "say \"hi\"" .Resources.CPU .Values.missing }}"#,
            r#""say \"hi\"" "2""#,
        ),
        (r#"{{ upper "hello" }} {{ lower "HELLO" }}"#, "HELLO hello"),
        (r#"[{{ trim "  hello  " }}]"#, "[hello]"),
        (r#"{{ trimSuffix "lo" "hello" }}"#, "hel"),
        (r#"{{ trimPrefix "he" "hello" }}"#, "llo"),
        (
            r#"{{ "node.example.com" | trimSuffix ".example.com" }}"#,
            "node",
        ),
        (r#"{{ join (split "a,b,c" ",") "-" }}"#, "a-b-c"),
        (r#"{{ join .Metadata.Tags "," }}"#, "karpenter"),
        (r#"{{ replace "l" "L" "hello" }}"#, "heLLo"),
        (r#"{{ regexFind "[a-zA-Z][1-9]" "abcd1234" }}"#, "d1"),
        (
            r#"{{ regexFindString "^type-([a-z0-9]+)-(.*)$" "type-metal1-asz" 1 }}"#,
            "metal1",
        ),
        (
            r#"[{{ regexFindString "^type-([a-z0-9]+)$" "other" 1 }}]"#,
            "[]",
        ),
        (
            r#"{{ regexReplaceAll "a(x*)b" "-ab-axxb-" "${1}W" }}"#,
            "-W-xxW-",
        ),
        // Maps and key=value lists.
        (
            r#"{{ get .Values "flag" }}|{{ get .Values "missing" }}"#,
            "true|",
        ),
        (
            r#"{{ getValue .Values.source "i" }}|{{ getValue "a=1" "b" }}"#,
            "1234|",
        ),
        // Conditions.
        (
            r#"{{ empty "" }} {{ empty "x" }} {{ empty 0 }} {{ empty .Values.missing }}"#,
            "true false true true",
        ),
        (
            r#"{{ contains "lo" "hello" }} {{ contains "xx" "hello" }}"#,
            "true false",
        ),
        (
            r#"{{ hasPrefix "he" "hello" }} {{ hasPrefix "hello" "he" }}"#,
            "true false",
        ),
        (r#"{{ hasSuffix "lo" "hello" }}"#, "true"),
        (
            r#"{{ hasKey .Values "flag" }} {{ hasKey .Values "missing" }}"#,
            "true false",
        ),
        (
            r#"{{ hasTag .Metadata.Tags "karpenter" }} {{ hasTag .Metadata.Tags "" }}"#,
            "true false",
        ),
        // Encoding.
        (
            r#"{{ b64enc "hello" }} {{ b64dec "aGVsbG8=" }}"#,
            "aGVsbG8= hello",
        ),
        // Go's own language: variables, ranges, comparisons, printf.
        (
            r#"{{ range $i, $nic := .Network.Interfaces }}{{ $i }}:{{ $nic.Name }} {{ end }}"#,
            "0:eth0 1:eth1 ",
        ),
        (
            r#"{{ with $zone := .Metadata.Zone }}{{ $zone }}{{ end }}"#,
            "pve-1",
        ),
        (
            r#"{{ if and .Metadata.Tags (ne .Resources.CPU 0) }}ok{{ end }}"#,
            "ok",
        ),
        (
            r#"{{ printf "%s/%d" .Metadata.Region 5 }} {{ len .Metadata.Tags }}"#,
            "region-1/5 1",
        ),
        (r#"{{ .Values.missing }}"#, "<no value>"),
    ] {
        assert_eq!(render_with(tpl, &data), want, "{tpl}");
    }
}

#[test]
fn function_errors_say_which_function_and_why() {
    for (tpl, reason) in [
        (
            r#"{{ b64dec "!!" }}"#,
            "error calling b64dec: illegal base64 data at input byte 0",
        ),
        (
            r#"{{ cidrhost "10.0.0.0/24" 300 }}"#,
            "prefix of 24 does not accommodate a host numbered 300",
        ),
        (
            r#"{{ cidrslaac "00:11:22:33:44:55" "2001:db8::/120" }}"#,
            "requires a mask of /64 to /112",
        ),
        (
            r#"{{ upper 5 }}"#,
            "upper: argument 1 must be a string, got number",
        ),
        (r#"{{ .Missing | upper }}"#, "no field Missing"),
        (
            r#"{{ .Values.missing | upper }}"#,
            "upper: argument 1 must be a string, got invalid value",
        ),
        (r#"{{ regexFind "(" "x" }}"#, "error calling regexFind"),
        (r#"{{ getValue "a;b=1" "a" }}"#, "error calling getValue"),
        (
            r#"{{ indent 2 }}"#,
            "wrong number of args for indent: want 2 got 1",
        ),
        (
            r#"{{ ternary "a" "b" "yes" }}"#,
            "ternary: argument 3 must be a bool",
        ),
    ] {
        let data = Value::from(&fixture(&[]));
        let err = template::execute("user-data", tpl, &data).unwrap_err();
        assert!(
            matches!(err, TemplateError::Render { .. }) && err.to_string().contains(reason),
            "{tpl}: {err}"
        );
    }
}

// ---- values (upstream's utils_test.go) -------------------------------------------------

fn iface(name: &str, mac: &str) -> InterfaceConfig {
    InterfaceConfig {
        name: name.to_string(),
        mac_addr: mac.to_string(),
        ..InterfaceConfig::default()
    }
}

/// A VM's config, key by key.
type VmConfig = Vec<(&'static str, &'static str)>;

#[test]
fn network_config_from_the_vm_config_as_upstream_reads_it() {
    let nodes = BTreeMap::from([(
        "vmbr0".to_string(),
        NodeInterface {
            mtu: 9000,
            ..NodeInterface::default()
        },
    )]);
    let dns = || strings(&["1.1.1.1", "2001:4860:4860::8888"]);
    let cases: Vec<(&str, VmConfig, NetworkConfig)> = vec![
        ("empty", vec![], NetworkConfig::default()),
        (
            "1-interface-defaults-with-mtu",
            vec![
                (
                    "net0",
                    "virtio=BC:24:11:CD:B9:41,bridge=vmbr0,firewall=1,mtu=1,tag=70,trunks=70,100,200",
                ),
                ("ipconfig0", "ip=dhcp,ip6=auto"),
                ("nameserver", "1.1.1.1 2001:4860:4860::8888"),
            ],
            NetworkConfig {
                interfaces: vec![InterfaceConfig {
                    dhcp_v4: true,
                    slaac: true,
                    mtu: 9000,
                    ..iface("eth0", "BC:24:11:CD:B9:41")
                }],
                name_servers: dns(),
                ..NetworkConfig::default()
            },
        ),
        (
            "1-interface-defaults",
            vec![
                (
                    "net0",
                    "virtio=BC:24:11:CD:B9:41,bridge=vmbr0,firewall=1,tag=70,trunks=70,100,200",
                ),
                ("ipconfig0", "ip=dhcp,ip6=auto"),
                ("nameserver", "1.1.1.1 2001:4860:4860::8888"),
            ],
            NetworkConfig {
                interfaces: vec![InterfaceConfig {
                    dhcp_v4: true,
                    slaac: true,
                    mtu: 9000,
                    ..iface("eth0", "BC:24:11:CD:B9:41")
                }],
                name_servers: dns(),
                ..NetworkConfig::default()
            },
        ),
        (
            "1-interface-defaults-no-mtu-defined-in-node-iface",
            vec![
                (
                    "net0",
                    "virtio=BC:24:11:CD:B9:41,bridge=vmbr1,firewall=1,tag=70,trunks=70,100,200",
                ),
                ("ipconfig0", "ip=dhcp,ip6=auto"),
                ("nameserver", "1.1.1.1 2001:4860:4860::8888"),
            ],
            NetworkConfig {
                interfaces: vec![InterfaceConfig {
                    dhcp_v4: true,
                    slaac: true,
                    mtu: 1500,
                    ..iface("eth0", "BC:24:11:CD:B9:41")
                }],
                name_servers: dns(),
                ..NetworkConfig::default()
            },
        ),
        (
            "2-interfaces",
            vec![
                (
                    "net1",
                    "virtio=BC:24:11:EE:9A:23,bridge=vmbr1,firewall=0,mtu=1400",
                ),
                (
                    "net0",
                    "virtio=BC:24:11:CD:B9:41,bridge=vmbr0,firewall=1,mtu=1500",
                ),
                ("ipconfig0", "ip=dhcp,ip6=auto"),
                ("ipconfig1", "ip=1.2.3.4/24"),
                ("nameserver", "1.1.1.1 2001:4860:4860::8888"),
                ("searchdomain", "example.com"),
            ],
            NetworkConfig {
                interfaces: vec![
                    InterfaceConfig {
                        dhcp_v4: true,
                        slaac: true,
                        mtu: 1500,
                        ..iface("eth0", "BC:24:11:CD:B9:41")
                    },
                    InterfaceConfig {
                        address4: strings(&["1.2.3.4/24"]),
                        mtu: 1400,
                        ..iface("eth1", "BC:24:11:EE:9A:23")
                    },
                ],
                name_servers: dns(),
                search_domains: strings(&["example.com"]),
            },
        ),
        (
            "other NIC models, IPv6 by DHCP and a NIC that does not parse",
            vec![
                ("net0", "e1000=AA:BB:CC:00:00:01,bridge=vmbr9"),
                ("net1", "virtio=AA:BB:CC:00:00:02,bridge=vmbr0,mtu=jumbo"),
                ("net2", "vmxnet3=AA:BB:CC:00:00:03,bridge=vmbr0,mtu=1450"),
                ("ipconfig0", "ip=10.1.1.5/24,gw=10.1.1.1,ip6=dhcp"),
                ("ipconfig2", "ip6=2001:db8::9/64,gw6=2001:db8::1"),
            ],
            NetworkConfig {
                interfaces: vec![
                    InterfaceConfig {
                        address4: strings(&["10.1.1.5/24"]),
                        gateway4: "10.1.1.1".to_string(),
                        dhcp_v6: true,
                        mtu: 1500,
                        ..iface("eth0", "AA:BB:CC:00:00:01")
                    },
                    InterfaceConfig {
                        address6: strings(&["2001:db8::9/64"]),
                        gateway6: "2001:db8::1".to_string(),
                        mtu: 1450,
                        ..iface("eth2", "AA:BB:CC:00:00:03")
                    },
                ],
                ..NetworkConfig::default()
            },
        ),
    ];
    for (name, config, want) in cases {
        assert_eq!(
            NetworkConfig::from_vm_config(config, &nodes),
            want,
            "{name}"
        );
    }
}

#[test]
fn the_nodes_bridge_addresses_reach_the_interface() {
    let network = NetworkConfig::from_vm_config(TWO_NIC_VM, &node_bridges());
    let eth0 = &network.interfaces[0];
    assert_eq!(
        (
            eth0.node_address4.as_str(),
            eth0.node_address6.as_str(),
            eth0.node_gateway4.as_str(),
            eth0.mtu
        ),
        ("10.0.0.2/24", "2001:db8:1::2/64", "10.0.0.1", 9000)
    );
    // vmbr1 is not known on the node: nothing copied, the NIC's own MTU kept.
    let eth1 = &network.interfaces[1];
    assert_eq!((eth1.node_address4.as_str(), eth1.mtu), ("", 1400));
}

#[test]
fn kubelet_configuration_from_the_node_class_and_the_overhead() {
    let overhead = Overhead {
        kube_reserved: Capacity::parse(&[
            ("cpu", "100m"),
            ("memory", "384Mi"),
            ("ephemeral-storage", "1536Mi"),
        ]),
        system_reserved: Capacity::parse(&[("cpu", "10m"), ("memory", "1000Ki")]),
        eviction_threshold: Capacity::parse(&[("memory", "200Mi")]),
    };
    let node_class = json!({
        "cpuManagerPolicy": "static",
        "CPUCFSQuota": false,
        "cpuCFSQuotaPeriod": "100ms",
        "shutdownGracePeriod": "90s",
        "imageGCHighThresholdPercent": 85,
        "maxPods": "110",
        "clusterDNS": ["10.96.0.10", 53],
        "registerWithTaints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}],
        "unknown": true,
    });
    let c = KubeletConfiguration::for_instance(Some(&node_class), &overhead, "proxmox://r/7");
    assert_eq!(c.cpu_manager_policy, "static");
    assert_eq!(c.cpu_cfs_quota, Some(false));
    assert_eq!(c.shutdown_grace_period.as_deref(), Some("1m30s"));
    assert_eq!(c.image_gc_high_threshold_percent, Some(85));
    // A string where Go wants a number is skipped, as json.Unmarshal skips it.
    assert_eq!(c.max_pods, None);
    assert_eq!(c.cluster_dns, strings(&["10.96.0.10", ""]));
    assert_eq!(c.provider_id, "proxmox://r/7");
    assert_eq!(
        c.register_with_taints,
        vec![KubernetesTaint {
            key: "dedicated".to_string(),
            value: "db".to_string(),
            effect: "NoSchedule".to_string(),
        }]
    );
    let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    assert_eq!(
        c.kube_reserved,
        map(&[
            ("cpu", "100m"),
            ("memory", "384Mi"),
            ("ephemeral-storage", "1Gi")
        ])
    );
    // Under a MiB of memory is left out.
    assert_eq!(c.system_reserved, map(&[("cpu", "10m")]));
    assert_eq!(
        c.eviction_hard,
        map(&[
            ("memory.available", "200Mi"),
            ("nodefs.available", "10%"),
            ("imagefs.available", "15%"),
        ])
    );
    // The NodeClass's cpuCFSQuotaPeriod has no place in upstream's struct.
    let yaml = render_with("{{ toYamlPretty . }}", &Value::from(&c));
    assert!(!yaml.contains("100ms"), "{yaml}");
    assert!(yaml.contains("shutdownGracePeriod: 1m30s"), "{yaml}");

    // Without NodeClass settings and overhead: the provider ID and Karpenter's taint.
    let bare = KubeletConfiguration::for_instance(None, &Overhead::default(), "proxmox://r/8");
    assert_eq!(
        render_with("{{ toYamlPretty . }}", &Value::from(&bare)),
        "providerID: proxmox://r/8\nregisterWithTaints:\n  - key: karpenter.sh/unregistered\n    effect: NoExecute"
    );
}

// ---- default documents (upstream's network_test.go and userdata_test.go) ----------------

fn network(interfaces: Vec<InterfaceConfig>, search: &[&str]) -> Value {
    Value::from(&NetworkConfig {
        interfaces,
        search_domains: strings(search),
        name_servers: strings(&["4.3.2.1", "1.2.3.4"]),
    })
}

fn static_iface(mac: &str) -> InterfaceConfig {
    InterfaceConfig {
        mtu: 1500,
        address4: strings(&["192.168.1.100/24"]),
        gateway4: "192.168.1.1".to_string(),
        address6: strings(&["2000:db8::5/64"]),
        gateway6: "2000:db8::1".to_string(),
        ..iface("eth0", mac)
    }
}

#[test]
fn network_v1_as_upstream_writes_it() {
    let cases = [
        (
            "static",
            network(vec![static_iface("AA:11:22:33:44:55")], &["example.com"]),
            r#"version: 1
config:
- type: physical
  name: eth0
  mac_address: "aa:11:22:33:44:55"
  mtu: 1500
  subnets:
  - type: static
    address: "192.168.1.100/24"
    gateway: "192.168.1.1"
  - type: static6
    address: "2000:db8::5/64"
    gateway: "2000:db8::1"
- type: nameserver
  address:
  - "4.3.2.1"
  - "1.2.3.4"
  search:
  - example.com
"#,
        ),
        (
            "dhcp",
            network(
                vec![InterfaceConfig {
                    dhcp_v4: true,
                    dhcp_v6: true,
                    ..static_iface("00:11:22:33:44:55")
                }],
                &[],
            ),
            r#"version: 1
config:
- type: physical
  name: eth0
  mac_address: "00:11:22:33:44:55"
  mtu: 1500
  subnets:
  - type: dhcp
  - type: dhcp6
- type: nameserver
  address:
  - "4.3.2.1"
  - "1.2.3.4"
"#,
        ),
        (
            "slaac",
            network(
                vec![InterfaceConfig {
                    mtu: 1500,
                    slaac: true,
                    ..iface("eth0", "00:11:22:33:44:55")
                }],
                &[],
            ),
            r#"version: 1
config:
- type: physical
  name: eth0
  mac_address: "00:11:22:33:44:55"
  mtu: 1500
  subnets:
  - type: ipv6_slaac
- type: nameserver
  address:
  - "4.3.2.1"
  - "1.2.3.4"
"#,
        ),
        (
            "slaac on a bridge with a known node address",
            network(
                vec![InterfaceConfig {
                    mtu: 1500,
                    slaac: true,
                    node_address6: "2001:db8:1::128/64".to_string(),
                    ..iface("eth0", "00:11:22:33:44:55")
                }],
                &[],
            ),
            r#"version: 1
config:
- type: physical
  name: eth0
  mac_address: "00:11:22:33:44:55"
  mtu: 1500
  subnets:
  - type: static6
    address: "2001:db8:1:0:211:22ff:fe33:4455/64"
    gateway: "2001:db8:1::128"
- type: nameserver
  address:
  - "4.3.2.1"
  - "1.2.3.4"
"#,
        ),
    ];
    for (name, data, want) in cases {
        assert_eq!(render_with(defaults::NETWORK_V1, &data), want, "{name}");
    }
}

#[test]
fn network_v2_as_upstream_writes_it() {
    let cases = [
        (
            "static",
            network(vec![static_iface("AA:11:22:33:44:55")], &["example.com"]),
            r#"network:
  version: 2
  renderer: networkd
  ethernets:
    eth0:
      match:
        macaddress: "aa:11:22:33:44:55"
      mtu: 1500
      addresses:
      - "192.168.1.100/24"
      - "2000:db8::5/64"
      routes:
      - to: "0.0.0.0/0"
        via: "192.168.1.1"
      - to: "::/0"
        via: "2000:db8::1"
      nameservers:
        addresses:
        - "4.3.2.1"
        - "1.2.3.4"
        search:
        - "example.com"
"#,
        ),
        (
            "dhcp",
            network(
                vec![InterfaceConfig {
                    mtu: 1500,
                    dhcp_v4: true,
                    dhcp_v6: true,
                    ..iface("eth0", "00:11:22:33:44:55")
                }],
                &[],
            ),
            r#"network:
  version: 2
  renderer: networkd
  ethernets:
    eth0:
      match:
        macaddress: "00:11:22:33:44:55"
      mtu: 1500
      dhcp4: true
      dhcp6: true
      nameservers:
        addresses:
        - "4.3.2.1"
        - "1.2.3.4"
"#,
        ),
        (
            "nothing configured",
            network(
                vec![InterfaceConfig {
                    mtu: 1500,
                    ..iface("eth0", "00:11:22:33:44:55")
                }],
                &[],
            ),
            r#"network:
  version: 2
  renderer: networkd
  ethernets:
    eth0:
      match:
        macaddress: "00:11:22:33:44:55"
      mtu: 1500
      nameservers:
        addresses:
        - "4.3.2.1"
        - "1.2.3.4"
"#,
        ),
        (
            "slaac on a bridge with a known node address",
            network(
                vec![InterfaceConfig {
                    mtu: 1500,
                    slaac: true,
                    node_address6: "2001:db8:1::128/64".to_string(),
                    ..iface("eth0", "00:11:22:33:44:55")
                }],
                &[],
            ),
            r#"network:
  version: 2
  renderer: networkd
  ethernets:
    eth0:
      match:
        macaddress: "00:11:22:33:44:55"
      mtu: 1500
      addresses:
      - "2001:db8:1:0:211:22ff:fe33:4455/64"
      routes:
      - to: "::/0"
        via: "2001:db8:1::128"
      nameservers:
        addresses:
        - "4.3.2.1"
        - "1.2.3.4"
"#,
        ),
    ];
    for (name, data, want) in cases {
        assert_eq!(render_with(defaults::NETWORK_V2, &data), want, "{name}");
    }
}

/// Upstream's userdata test data: a `t1.2VCPU-6GB` with huge pages, two SSH keys and a few
/// kubelet settings.
fn userdata_test_values() -> UserDataValues {
    let pid = provider_id("test-region", 100);
    UserDataValues {
        metadata: MetaData {
            hostname: "hostname-1".to_string(),
            instance_id: "100".to_string(),
            instance_type: "t1.2VCPU-6GB".to_string(),
            provider_id: pid.clone(),
            region: "test-region".to_string(),
            zone: "test-zone".to_string(),
            tags: strings(&["tag1", "tag2"]),
            node_class: "node-class-1".to_string(),
            ..MetaData::default()
        },
        resources: Resources {
            cpu: 2,
            memory: 6144,
            hugepages_1gi: 1,
            hugepages_2mi: 1024,
        },
        kubernetes: Kubernetes {
            kubelet_configuration: KubeletConfiguration {
                allowed_unsafe_sysctls: strings(&["kernel.msgmax", "kernel.shmmax"]),
                topology_manager_policy: "best-effort".to_string(),
                provider_id: pid,
                register_with_taints: vec![KubernetesTaint {
                    key: "example-key".to_string(),
                    value: String::new(),
                    effect: "NoSchedule".to_string(),
                }],
                ..KubeletConfiguration::default()
            },
            ..Kubernetes::default()
        },
        values: BTreeMap::from([(
            "SSHAuthorizedKeys".to_string(),
            "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQCu...,ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQDk..."
                .to_string(),
        )]),
        ..UserDataValues::default()
    }
}

#[test]
fn a_custom_user_data_template_prints_the_kubelet_configuration_as_upstream() {
    let tpl = r#"#cloud-config
package_update: true
write_files:
  - path: /etc/hostname
    permissions: 0o600
    defer: true
    content: {{ .Metadata.Hostname }}
  - path: /etc/kubernetes/kubelet.conf
    permissions: 0o600
    defer: true
    content: |
      {{- .Kubernetes.KubeletConfiguration | toYamlPretty | nindent 6 }}
{{- if hasTag .Metadata.Tags "tag2" }}
  - path: /etc/kubernetes/kubelet-labels.conf
    permissions: 0o600
    defer: true
    content: |
      {{- join .Metadata.Tags "," | nindent 6 }}
{{- end }}
"#;
    let want = r#"#cloud-config
package_update: true
write_files:
  - path: /etc/hostname
    permissions: 0o600
    defer: true
    content: hostname-1
  - path: /etc/kubernetes/kubelet.conf
    permissions: 0o600
    defer: true
    content: |
      topologyManagerPolicy: best-effort
      allowedUnsafeSysctls:
        - kernel.msgmax
        - kernel.shmmax
      providerID: proxmox://test-region/100
      registerWithTaints:
        - key: example-key
          effect: NoSchedule
  - path: /etc/kubernetes/kubelet-labels.conf
    permissions: 0o600
    defer: true
    content: |
      tag1,tag2
"#;
    let templates = BTreeMap::from([("user-data".to_string(), tpl.to_string())]);
    let docs = render(&templates, &userdata_test_values()).unwrap();
    assert_eq!(docs.user_data, want);
}

#[test]
fn the_default_user_data_has_upstreams_keys_and_meaning() {
    let values = userdata_test_values();
    let docs = render(&BTreeMap::new(), &values).unwrap();
    assert!(docs.user_data.starts_with("#cloud-config\n"));
    let doc: serde_json::Value = serde_saphyr::from_str(&docs.user_data).unwrap();
    assert_eq!(doc["hostname"], "hostname-1");
    assert_eq!(doc["manage_etc_hosts"], true);
    assert_eq!(doc["package_update"], true);
    assert_eq!(doc["packages"], json!(["qemu-guest-agent"]));
    assert_eq!(
        doc["runcmd"],
        json!([["systemctl", "enable", "--now", "qemu-guest-agent.service"]])
    );
    let user = &doc["users"][0];
    assert_eq!(user["name"], "karpenter");
    assert_eq!(user["sudo"], "ALL=(ALL) NOPASSWD:ALL");
    assert_eq!(user["groups"], json!(["users"]));
    assert_eq!(user["shell"], "/bin/bash");
    assert_eq!(
        user["ssh_authorized_keys"],
        json!([
            "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQCu...",
            "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQDk..."
        ])
    );
    let files = doc["write_files"].as_array().unwrap();
    assert_eq!(files[0]["path"], "/etc/sysctl.d/99-hugepages.conf");
    assert_eq!(files[0]["content"], "vm.nr_hugepages = 1024\n");
    assert_eq!(files[1]["path"], "/etc/karpenter.yaml");
    assert_eq!(files[1]["owner"], "root:root");
    // The values file is the values, in upstream's YAML.
    let dump: serde_json::Value =
        serde_saphyr::from_str(files[1]["content"].as_str().unwrap()).unwrap();
    assert_eq!(dump["metadata"]["instanceid"], "100");
    assert_eq!(dump["metadata"]["tags"], json!(["tag1", "tag2"]));
    assert_eq!(dump["resources"]["hugepages2Mi"], 1024);
    assert_eq!(
        dump["kubernetes"]["kubeletconfiguration"]["registerWithTaints"],
        json!([{"key": "example-key", "effect": "NoSchedule"}])
    );
    assert_eq!(
        dump["values"]["SSHAuthorizedKeys"],
        values.values["SSHAuthorizedKeys"]
    );

    // No keys, no huge pages: neither the key list nor the sysctl file.
    let bare = UserDataValues {
        values: BTreeMap::new(),
        resources: Resources::default(),
        ..values
    };
    let doc: serde_json::Value =
        serde_saphyr::from_str(&render(&BTreeMap::new(), &bare).unwrap().user_data).unwrap();
    assert!(doc["users"][0].get("ssh_authorized_keys").is_none());
    assert_eq!(doc["write_files"].as_array().unwrap().len(), 1);
}

// ---- rendering ---------------------------------------------------------------------------

#[test]
fn missing_or_empty_keys_fall_back_to_the_defaults_and_vendor_data_only_when_given() {
    let values = fixture(&[]);
    let defaults_only = render(&BTreeMap::new(), &values).unwrap();
    golden("defaults/user-data", &defaults_only.user_data);
    golden("defaults/meta-data", &defaults_only.meta_data);
    golden("defaults/network-config", &defaults_only.network_config);
    assert_eq!(defaults_only.vendor_data, "");

    let empty_keys = BTreeMap::from([
        ("user-data".to_string(), String::new()),
        ("meta-data".to_string(), String::new()),
        ("network-config".to_string(), String::new()),
        ("vendor-data".to_string(), String::new()),
    ]);
    assert_eq!(render(&empty_keys, &values).unwrap(), defaults_only);

    // meta-data and vendor-data see the instance's metadata itself.
    let custom = BTreeMap::from([
        (
            "meta-data".to_string(),
            "instance-id: {{ .InstanceID }}\n".to_string(),
        ),
        (
            "vendor-data".to_string(),
            "#cloud-config\nfqdn: {{ .Hostname }}.{{ .Zone }}.example\n".to_string(),
        ),
    ]);
    let docs = render(&custom, &values).unwrap();
    assert_eq!(docs.meta_data, "instance-id: 20001\n");
    assert_eq!(
        docs.vendor_data,
        "#cloud-config\nfqdn: default-6ggrl.pve-1.example\n"
    );
    assert_eq!(docs.user_data, defaults_only.user_data);
}

#[test]
fn template_errors_name_the_template() {
    let values = fixture(&[]);
    for (key, text, kind) in [
        (
            "user-data",
            "{{ if .Metadata.Hostname }}unclosed",
            "does not parse",
        ),
        ("meta-data", "{{ .NoSuchField }}", "failed to render"),
        ("vendor-data", "{{ nosuchfunction }}", "does not parse"),
        (
            "network-config",
            "{{ range .Interfaces }}{{ .Name | cidrhost }}{{ end }}",
            "failed to render",
        ),
    ] {
        let templates = BTreeMap::from([(key.to_string(), text.to_string())]);
        let err = render(&templates, &values).unwrap_err();
        assert_eq!(err.template(), key);
        let message = err.to_string();
        assert!(
            message.starts_with(&format!("the {key} template {kind}: ")),
            "{message}"
        );
    }
}

#[test]
fn a_k3s_agent_joins_with_the_provider_id_and_the_unregistered_taint() {
    let values = fixture(&[
        ("K3sURL", "https://api.example.com:6443"),
        ("K3sToken", "K10abc::server:secret"),
        ("K3sVersion", "v1.33.4+k3s1"),
        ("SSHAuthorizedKeys", "ssh-ed25519 AAAAC3Nza admin@example"),
    ]);
    let templates = BTreeMap::from([
        ("user-data".to_string(), read("k3s/user-data.tmpl")),
        (
            "network-config".to_string(),
            read("k3s/network-config.tmpl"),
        ),
    ]);
    let docs = render(&templates, &values).unwrap();
    golden("k3s/user-data", &docs.user_data);
    golden("k3s/network-config", &docs.network_config);
    golden("k3s/meta-data", &docs.meta_data);
    for arg in [
        "--kubelet-arg \"provider-id=proxmox://region-1/20001\"",
        "--kubelet-arg \"register-with-taints=karpenter.sh/unregistered:NoExecute\"",
        "--kubelet-arg \"cloud-provider=external\"",
    ] {
        assert!(docs.user_data.contains(arg), "{arg}");
    }
}

#[test]
fn a_talos_worker_gets_the_kubelet_configuration_and_the_cluster_ca() {
    let values = fixture(&[
        ("machineToken", "mtoken.0123456789abcdef"),
        ("machineCA", "LS0tLS1CRUdJTi..."),
        ("clusterID", "cluster-id"),
        ("clusterSecret", "cluster-secret"),
        ("clusterEndpoint", "https://api.example.com:6443"),
        ("clusterName", "proxmox"),
    ]);
    let templates = BTreeMap::from([("user-data".to_string(), read("talos/user-data.tmpl"))]);
    let docs = render(&templates, &values).unwrap();
    golden("talos/user-data", &docs.user_data);
    let config: serde_json::Value = serde_saphyr::from_str(&docs.user_data).unwrap();
    assert_eq!(config["machine"]["kubelet"]["extraConfig"]["maxPods"], 110);
    assert_eq!(
        config["machine"]["kubelet"]["extraConfig"]["providerID"],
        "proxmox://region-1/20001"
    );
    assert_eq!(config["cluster"]["token"], "abcdef.0123456789abcdef");
    let ca = config["cluster"]["ca"]["crt"].as_str().unwrap();
    assert_eq!(
        render_with(&format!("{{{{ b64dec {ca:?} }}}}"), &Value::Nil),
        values.kubernetes.root_ca
    );
}

#[test]
fn structs_print_with_their_yaml_keys_and_json_field_names() {
    let value = GoStruct::new()
        .field("InstanceID", "100")
        .omitempty("Zone", "zone", "")
        .build();
    assert_eq!(render_with("{{ toYaml . }}", &value), "instanceid: \"100\"");
    assert_eq!(
        render_with("{{ toJson . }}", &value),
        r#"{"InstanceID":"100","Zone":""}"#
    );
    assert_eq!(render_with("{{ .InstanceID }}", &value), "100");
}

// ---- the ISO -----------------------------------------------------------------------------

/// Lists a disc with pycdlib (an independent ISO 9660 implementation): the volume ids, the
/// root's names as ISO 9660, Joliet and Rock Ridge see them, and each file's content read
/// through the Rock Ridge and the Joliet name.
const PYCDLIB_LISTING: &str = r#"
import io, json, sys
import pycdlib

iso = pycdlib.PyCdlib()
iso.open(sys.argv[1])

def names(**path):
    out = []
    for child in iso.list_children(**path):
        if child.is_dot() or child.is_dotdot():
            continue
        out.append(child)
    return out

def read(**path):
    buf = io.BytesIO()
    iso.get_file_from_iso_fp(buf, **path)
    return buf.getvalue().decode()

rr = [c.rock_ridge.name().decode() for c in names(rr_path="/")]
print(json.dumps({
    "volume_id": iso.pvd.volume_identifier.decode().rstrip(),
    "joliet_volume_id": iso.joliet_vd.volume_identifier.decode("utf-16-be").rstrip(),
    "rock_ridge": iso.rock_ridge,
    "iso_names": [c.file_identifier().decode() for c in names(iso_path="/")],
    "joliet_names": [c.file_identifier().decode("utf-16-be") for c in names(joliet_path="/")],
    "rr_names": rr,
    "contents": {n: read(rr_path="/" + n) for n in rr},
    "joliet_contents": {n: read(joliet_path="/" + n) for n in rr},
}, sort_keys=True))
"#;

/// A `python3` that can import pycdlib, installing it from PyPI into the target directory
/// when missing; `None` when there is no python3 at all.
fn pycdlib_python() -> Option<(String, Option<PathBuf>)> {
    let python = "python3".to_string();
    let probe = |pythonpath: Option<&Path>| {
        let mut cmd = Command::new(&python);
        cmd.args(["-c", "import pycdlib"]);
        if let Some(p) = pythonpath {
            cmd.env("PYTHONPATH", p);
        }
        cmd.output().map(|o| o.status.success())
    };
    match probe(None) {
        Err(_) => return None,
        Ok(true) => return Some((python, None)),
        Ok(false) => {}
    }
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("pycdlib");
    if !probe(Some(&target)).unwrap_or(false) {
        let status = Command::new(&python)
            .args(["-m", "pip", "install", "--quiet", "--target"])
            .arg(&target)
            .arg("pycdlib")
            .status()
            .expect("run pip");
        assert!(status.success(), "pip could not install pycdlib");
    }
    Some((python, Some(target)))
}

#[test]
fn the_seed_iso_reads_back_with_an_independent_reader() {
    let Some((python, pythonpath)) = pycdlib_python() else {
        eprintln!("python3 is not installed: the ISO is not read back");
        return;
    };
    let values = fixture(&[]);
    let mut files = render(&BTreeMap::new(), &values).unwrap();
    files.vendor_data = "#cloud-config\nruncmd: [\"echo vendor\"]\n".to_string();
    // Large enough to span sectors.
    files
        .user_data
        .push_str(&format!("# {}\n", "x".repeat(5000)));
    let recorded: Timestamp = "2025-06-01T12:00:00Z".parse().unwrap();
    let image = iso::nocloud_iso(&files, recorded);
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cidata-test.iso");
    std::fs::write(&path, &image).unwrap();

    let mut cmd = Command::new(python);
    cmd.args(["-c", PYCDLIB_LISTING]).arg(&path);
    if let Some(p) = pythonpath {
        cmd.env("PYTHONPATH", p);
    }
    let out = cmd.output().expect("run python3");
    assert!(
        out.status.success(),
        "pycdlib failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listing: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names = ["meta-data", "network-config", "user-data", "vendor-data"];
    assert_eq!(listing["volume_id"], "cidata");
    assert_eq!(listing["joliet_volume_id"], "cidata");
    assert_eq!(listing["rock_ridge"], "1.09");
    assert_eq!(
        listing["iso_names"],
        json!(["META_DAT.;1", "NETWORK_.;1", "USER_DAT.;1", "VENDOR_D.;1"])
    );
    assert_eq!(listing["joliet_names"], json!(names));
    assert_eq!(listing["rr_names"], json!(names));
    let packed = json!({
        "meta-data": files.meta_data,
        "network-config": files.network_config,
        "user-data": files.user_data,
        "vendor-data": files.vendor_data,
    });
    assert_eq!(listing["contents"], packed);
    assert_eq!(listing["joliet_contents"], packed);

    // Without vendor-data the disc has three files.
    let NoCloud {
        user_data,
        meta_data,
        network_config,
        ..
    } = files;
    let image = iso::nocloud_iso(
        &NoCloud {
            user_data,
            meta_data,
            network_config,
            vendor_data: String::new(),
        },
        recorded,
    );
    std::fs::write(&path, &image).unwrap();
    let out = cmd.output().expect("run python3");
    let listing: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        listing["rr_names"],
        json!(["meta-data", "network-config", "user-data"])
    );
}

// ---- bootstrap tokens --------------------------------------------------------------------

#[test]
fn the_bootstrap_token_secret_is_upstreams() {
    let mut n = 0u8;
    let bytes = move || {
        n = n.wrapping_add(7);
        n
    };
    let now: Timestamp = "2025-06-01T12:34:56.789Z".parse().unwrap();
    let (secret, token) = bootstrap::new_token(bytes, now);
    let (id, secret_part) = token.split_once('.').unwrap();
    assert_eq!((id.len(), secret_part.len()), (6, 16));
    assert!(
        token
            .bytes()
            .all(|b| b == b'.' || b.is_ascii_digit() || b.is_ascii_lowercase())
    );
    assert_eq!(
        secret.metadata.name.as_deref(),
        Some(format!("bootstrap-token-{id}").as_str())
    );
    assert_eq!(secret.metadata.namespace.as_deref(), Some("kube-system"));
    assert_eq!(
        secret.metadata.labels,
        Some(BTreeMap::from([(
            "karpenter.proxmox.sinextra.dev/bootstrap-token".to_string(),
            "true".to_string()
        )]))
    );
    assert_eq!(
        secret.type_.as_deref(),
        Some("bootstrap.kubernetes.io/token")
    );
    let data = secret.string_data.clone().unwrap();
    let want: BTreeMap<String, String> = [
        ("token-id", id),
        ("token-secret", secret_part),
        ("usage-bootstrap-authentication", "true"),
        (
            "auth-extra-groups",
            "system:bootstrappers:karpenter:proxmox",
        ),
        ("description", "Karpenter Proxmox Bootstrap Token"),
        ("expiration", "2025-06-01T13:34:56Z"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(data, want);

    // Expired an hour later, by its own expiration, also once read back as bytes.
    assert!(!bootstrap::is_expired(&secret, now));
    let later: Timestamp = "2025-06-01T13:35:00Z".parse().unwrap();
    assert!(bootstrap::is_expired(&secret, later));
    let stored = Secret {
        data: Some(
            data.iter()
                .map(|(k, v)| (k.clone(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        string_data: None,
        ..secret.clone()
    };
    assert!(bootstrap::is_expired(&stored, later));
    let other_type = Secret {
        type_: Some("Opaque".to_string()),
        ..stored.clone()
    };
    assert!(!bootstrap::is_expired(&other_type, later));
    assert_eq!(
        bootstrap::token_id(secret.metadata.name.as_deref().unwrap()),
        Some(id)
    );

    // The same bytes give the same token.
    let again = BootstrapToken::generate({
        let mut n = 0u8;
        move || {
            n = n.wrapping_add(7);
            n
        }
    });
    assert_eq!(again.token(), token);
}
