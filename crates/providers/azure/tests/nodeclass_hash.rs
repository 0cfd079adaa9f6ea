//! Upstream's AKSNodeClass hash suite: the hash moves when a hashed field changes and stays
//! put for tags, order and spelled-out zero values. (Upstream's static numbers are its Go
//! encoding's; this project's differ, under its own hash version.)

use karpenter_azure::AKSNodeClass;
use karpenter_azure::aksnodeclass::{
    AKS_MACHINE_RESOURCE_ID_ANNOTATION, AKS_NODE_CLASS_HASH_ANNOTATION,
    AKS_NODE_CLASS_HASH_VERSION, AKS_NODE_CLASS_HASH_VERSION_ANNOTATION,
};
use serde_json::{Value, json};

fn class(spec: Value) -> AKSNodeClass {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.azure.com/v1beta1",
        "kind": "AKSNodeClass",
        "metadata": {"name": "default"},
        "spec": spec,
    }))
    .expect("valid AKSNodeClass")
}

/// Upstream's base class.
fn base() -> Value {
    json!({
        "vnetSubnetID": "subnet-id",
        "osDiskSizeGB": 30,
        "imageFamily": "Ubuntu2204",
        "tags": {"keyTag-1": "valueTag-1", "keyTag-2": "valueTag-2"},
        "kubelet": {
            "cpuManagerPolicy": "static",
            "cpuCFSQuota": true,
            "cpuCFSQuotaPeriod": "100ms",
            "imageGCHighThresholdPercent": 85,
            "imageGCLowThresholdPercent": 80,
            "topologyManagerPolicy": "none",
            "allowedUnsafeSysctls": ["net.core.somaxconn"],
            "containerLogMaxSize": "10Mi",
            "containerLogMaxFiles": 10,
        },
        "maxPods": 100,
    })
}

fn changed(pointer: &str, value: Value) -> Value {
    karpenter_api::validation::table::set(base(), pointer, value)
}

fn zone(zone: &str) -> Value {
    json!({"zone": zone, "queryLogging": "Error", "protocol": "PreferUDP",
        "forwardDestination": "VnetDNS", "forwardPolicy": "Sequential", "maxConcurrent": 100,
        "cacheDuration": "1h", "serveStaleDuration": "30m", "serveStale": "Verify"})
}

fn local_dns(vnet: Vec<Value>, kube: Vec<Value>) -> Value {
    json!({"mode": "Preferred", "vnetDNSOverrides": vnet, "kubeDNSOverrides": kube})
}

#[test]
fn hashed_fields_drift() {
    let base_hash = class(base()).hash();
    let mut with_dns = base();
    with_dns["localDNS"] = local_dns(vec![zone("example.com")], vec![zone(".")]);
    let dns_hash = class(with_dns.clone()).hash();
    assert_ne!(dns_hash, base_hash);
    let dns = |pointer: &str, value: Value| {
        karpenter_api::validation::table::set(with_dns.clone(), pointer, value)
    };
    let cases = [
        // Upstream's rows.
        (
            "vnetSubnetID",
            changed("/vnetSubnetID", json!("subnet-id-2")),
            &base_hash,
        ),
        (
            "osDiskSizeGB",
            changed("/osDiskSizeGB", json!(40)),
            &base_hash,
        ),
        (
            "imageFamily",
            changed("/imageFamily", json!("AzureLinux")),
            &base_hash,
        ),
        (
            "kubelet.cpuManagerPolicy",
            changed("/kubelet/cpuManagerPolicy", json!("none")),
            &base_hash,
        ),
        ("maxPods", changed("/maxPods", json!(200)), &base_hash),
        (
            "localDNS.mode",
            dns("/localDNS/mode", json!("Required")),
            &dns_hash,
        ),
        (
            "localDNS.vnetDNSOverrides.queryLogging",
            dns("/localDNS/vnetDNSOverrides/0/queryLogging", json!("Log")),
            &dns_hash,
        ),
        (
            "localDNS.kubeDNSOverrides.protocol",
            dns("/localDNS/kubeDNSOverrides/0/protocol", json!("ForceTCP")),
            &dns_hash,
        ),
        (
            "localDNS.vnetDNSOverrides.cacheDuration",
            dns("/localDNS/vnetDNSOverrides/0/cacheDuration", json!("2h")),
            &dns_hash,
        ),
        (
            "localDNS.vnetDNSOverrides.serveStaleDuration",
            dns(
                "/localDNS/vnetDNSOverrides/0/serveStaleDuration",
                json!("1h"),
            ),
            &dns_hash,
        ),
        (
            "localDNS.vnetDNSOverrides.zone",
            dns("/localDNS/vnetDNSOverrides/0/zone", json!("example.org")),
            &dns_hash,
        ),
        (
            "artifactStreaming.enabled",
            changed("/artifactStreaming", json!({"enabled": true})),
            &base_hash,
        ),
        // Every other hashed field.
        ("fipsMode", changed("/fipsMode", json!("FIPS")), &base_hash),
        (
            "kubelet.cpuCFSQuota",
            changed("/kubelet/cpuCFSQuota", json!(false)),
            &base_hash,
        ),
        (
            "kubelet.cpuCFSQuotaPeriod",
            changed("/kubelet/cpuCFSQuotaPeriod", json!("200ms")),
            &base_hash,
        ),
        (
            "kubelet.imageGCHighThresholdPercent",
            changed("/kubelet/imageGCHighThresholdPercent", json!(90)),
            &base_hash,
        ),
        (
            "kubelet.imageGCLowThresholdPercent",
            changed("/kubelet/imageGCLowThresholdPercent", json!(70)),
            &base_hash,
        ),
        (
            "kubelet.topologyManagerPolicy",
            changed("/kubelet/topologyManagerPolicy", json!("restricted")),
            &base_hash,
        ),
        (
            "kubelet.allowedUnsafeSysctls",
            changed("/kubelet/allowedUnsafeSysctls", json!(["net.*"])),
            &base_hash,
        ),
        (
            "kubelet.containerLogMaxSize",
            changed("/kubelet/containerLogMaxSize", json!("20Mi")),
            &base_hash,
        ),
        (
            "kubelet.containerLogMaxFiles",
            changed("/kubelet/containerLogMaxFiles", json!(3)),
            &base_hash,
        ),
        (
            "kubelet.podPidsLimit",
            changed("/kubelet/podPidsLimit", json!(1024)),
            &base_hash,
        ),
        (
            "kubelet.failSwapOn",
            changed("/kubelet/failSwapOn", json!(true)),
            &base_hash,
        ),
        (
            "security.encryptionAtHost",
            changed("/security", json!({"encryptionAtHost": true})),
            &base_hash,
        ),
        (
            "security.trustedLaunch.vtpm",
            changed("/security", json!({"trustedLaunch": {"vtpm": true}})),
            &base_hash,
        ),
        (
            "security.trustedLaunch.secureBoot",
            changed("/security", json!({"trustedLaunch": {"secureBoot": true}})),
            &base_hash,
        ),
        (
            "gpu.mode",
            changed("/gpu", json!({"mode": "None"})),
            &base_hash,
        ),
        (
            "linuxOSConfig.swapFileSize",
            changed("/linuxOSConfig", json!({"swapFileSize": "1Gi"})),
            &base_hash,
        ),
        (
            "linuxOSConfig.transparentHugePageEnabled",
            changed(
                "/linuxOSConfig",
                json!({"transparentHugePageEnabled": "never"}),
            ),
            &base_hash,
        ),
        (
            "linuxOSConfig.transparentHugePageDefrag",
            changed(
                "/linuxOSConfig",
                json!({"transparentHugePageDefrag": "never"}),
            ),
            &base_hash,
        ),
        (
            "linuxOSConfig.sysctls.vmSwappiness",
            changed("/linuxOSConfig", json!({"sysctls": {"vmSwappiness": 10}})),
            &base_hash,
        ),
        (
            "linuxOSConfig.sysctls.netIPv4IPLocalPortRange",
            changed(
                "/linuxOSConfig",
                json!({"sysctls": {"netIPv4IPLocalPortRange": "1024 65535"}}),
            ),
            &base_hash,
        ),
    ];
    for (field, spec, before) in cases {
        assert_ne!(&class(spec).hash(), before, "changing {field} must drift");
    }
}

#[test]
fn tags_order_and_zero_values_do_not_drift() {
    let base_hash = class(base()).hash();
    let same = [
        (
            "tags reordered",
            changed(
                "/tags",
                json!({"keyTag-2": "valueTag-2", "keyTag-1": "valueTag-1"}),
            ),
        ),
        (
            "tags changed",
            changed("/tags", json!({"keyTag-3": "valueTag-3"})),
        ),
        ("tags removed", changed("/tags", Value::Null)),
        (
            "artifactStreaming off",
            changed("/artifactStreaming", json!({"enabled": false})),
        ),
        ("empty security", changed("/security", json!({}))),
        (
            "failSwapOn false",
            changed("/kubelet/failSwapOn", json!(false)),
        ),
        ("the same spec again", base()),
    ];
    for (what, spec) in same {
        assert_eq!(class(spec).hash(), base_hash, "{what} must not drift");
    }
    // Defaults spelled out hash as the defaults left unset.
    assert_eq!(
        class(json!({})).hash(),
        class(json!({"imageFamily": "Ubuntu", "osDiskSizeGB": 128})).hash()
    );
    assert_eq!(
        class(json!({"gpu": {}})).hash(),
        class(json!({"gpu": {"mode": "Driver"}})).hash()
    );
    // A duration hashes by its value, not its spelling.
    assert_eq!(
        class(changed("/kubelet/cpuCFSQuotaPeriod", json!("0.1s"))).hash(),
        base_hash
    );
    // Lists are sets.
    let dns = |vnet: Vec<Value>| {
        let mut spec = base();
        spec["localDNS"] = local_dns(vnet, vec![zone(".")]);
        class(spec).hash()
    };
    assert_eq!(
        dns(vec![zone("a.com"), zone("b.com")]),
        dns(vec![zone("b.com"), zone("a.com")])
    );
}

#[test]
fn annotations_are_upstreams() {
    assert_eq!(
        AKS_NODE_CLASS_HASH_ANNOTATION,
        "karpenter.azure.com/aksnodeclass-hash"
    );
    assert_eq!(
        AKS_NODE_CLASS_HASH_VERSION_ANNOTATION,
        "karpenter.azure.com/aksnodeclass-hash-version"
    );
    assert_eq!(
        AKS_MACHINE_RESOURCE_ID_ANNOTATION,
        "karpenter.azure.com/aks-machine-resource-id"
    );
    // Not upstream's `v3`: the numbers differ, so the version must too, or a cluster moved
    // from upstream would see every node drift.
    assert_ne!(AKS_NODE_CLASS_HASH_VERSION, "v3");
}
