//! The hashes behind drift and in-place updates, by what moves them: the NodeClass hash over
//! every field upstream hashes and none it ignores (tags, metadata options, security groups,
//! resource pool), read as upstream's options read them (lists as sets, unset like zero, but a
//! kubelet setting set to `false` or `0` apart from unset); the in-place hash over exactly the
//! ignored fields bar the metadata; the templates' hashes split the same way upstream splits
//! them. (Upstream's own numbers for the template and in-place hashes are the unit tests'.)

use karpenter_api::validation::table::set;
use karpenter_proxmox::apis::{
    PROXMOX_NODE_CLASS_HASH_ANNOTATION, PROXMOX_NODE_CLASS_HASH_VERSION,
    PROXMOX_NODE_CLASS_HASH_VERSION_ANNOTATION, PROXMOX_TEMPLATE_HASH_ANNOTATION,
    PROXMOX_TEMPLATE_HASH_VERSION, PROXMOX_TEMPLATE_HASH_VERSION_ANNOTATION, ProxmoxNodeClass,
    ProxmoxTemplate, ProxmoxUnmanagedTemplate,
};
use serde_json::{Value, json};

fn class(spec: Value) -> ProxmoxNodeClass {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.proxmox.sinextra.dev/v1alpha1",
        "kind": "ProxmoxNodeClass",
        "metadata": {"name": "default"},
        "spec": spec,
    }))
    .expect("a ProxmoxNodeClass")
}

/// A class setting every field.
fn base() -> Value {
    json!({
        "region": "cluster-1",
        "placementStrategy": {"zoneBalance": "Balanced"},
        "instanceTemplateRef": {"kind": "ProxmoxTemplate", "name": "talos"},
        "kubeletConfiguration": {
            "cpuManagerPolicy": "static",
            "cpuCFSQuota": true,
            "cpuCFSQuotaPeriod": "100ms",
            "topologyManagerPolicy": "best-effort",
            "topologyManagerScope": "container",
            "imageGCHighThresholdPercent": 85,
            "imageGCLowThresholdPercent": 80,
            "shutdownGracePeriod": "1m",
            "allowedUnsafeSysctls": ["net.core.somaxconn", "kernel.msg*"],
            "clusterDNS": ["10.96.0.10", "fd00::10"],
            "maxPods": 110,
            "failSwapOn": true,
        },
        "bootDevice": {"size": "50G", "storage": "local-lvm"},
        "tags": ["karpenter", "k8s"],
        "metadataOptions": {
            "type": "cdrom",
            "templatesRef": {"name": "templates", "namespace": "kube-system"},
            "valuesRef": {"name": "values", "namespace": "kube-system"},
        },
        "securityGroups": [{"name": "kubernetes", "interface": "net0"}],
        "resourcePool": "k8s",
    })
}

fn changed(pointer: &str, value: Value) -> ProxmoxNodeClass {
    class(set(base(), pointer, value))
}

#[test]
fn the_hash_is_stable() {
    let hash = class(base()).hash();
    assert_eq!(hash, class(base()).hash());
    // Pinned: a change to the encoding changes every class's hash, which would drift every
    // node; it needs a new PROXMOX_NODE_CLASS_HASH_VERSION instead.
    assert_eq!(hash, "12227427421965222061");
    let minimal = class(
        json!({"instanceTemplateRef": {"kind": "ProxmoxUnmanagedTemplate", "name": "talos"}}),
    );
    assert_eq!(minimal.hash(), "629260722637112955");
}

#[test]
fn hashed_fields_drift() {
    let base_hash = class(base()).hash();
    let kubelet =
        |field: &str, value: Value| changed(&format!("/kubeletConfiguration/{field}"), value);
    let cases = [
        ("region", changed("/region", json!("cluster-2"))),
        ("region removed", changed("/region", Value::Null)),
        (
            "placement",
            changed("/placementStrategy/zoneBalance", json!("AvailabilityFirst")),
        ),
        (
            "template kind",
            changed(
                "/instanceTemplateRef/kind",
                json!("ProxmoxUnmanagedTemplate"),
            ),
        ),
        (
            "template name",
            changed("/instanceTemplateRef/name", json!("ubuntu")),
        ),
        ("boot disk size", changed("/bootDevice/size", json!("60G"))),
        (
            "boot disk size, decimal to binary",
            changed("/bootDevice/size", json!("50Gi")),
        ),
        (
            "boot disk size removed",
            changed("/bootDevice", json!({"storage": "local-lvm"})),
        ),
        (
            "boot disk storage",
            changed("/bootDevice/storage", json!("ceph")),
        ),
        (
            "kubelet removed",
            changed("/kubeletConfiguration", Value::Null),
        ),
        (
            "cpuManagerPolicy",
            kubelet("cpuManagerPolicy", json!("none")),
        ),
        ("cpuCFSQuota", kubelet("cpuCFSQuota", json!(false))),
        (
            "cpuCFSQuotaPeriod",
            kubelet("cpuCFSQuotaPeriod", json!("200ms")),
        ),
        (
            "topologyManagerPolicy",
            kubelet("topologyManagerPolicy", json!("restricted")),
        ),
        (
            "topologyManagerScope",
            kubelet("topologyManagerScope", json!("pod")),
        ),
        (
            "imageGCHighThresholdPercent",
            kubelet("imageGCHighThresholdPercent", json!(90)),
        ),
        (
            "imageGCLowThresholdPercent",
            kubelet("imageGCLowThresholdPercent", json!(0)),
        ),
        (
            "shutdownGracePeriod",
            kubelet("shutdownGracePeriod", json!("2m")),
        ),
        (
            "allowedUnsafeSysctls",
            kubelet("allowedUnsafeSysctls", json!(["net.core.somaxconn"])),
        ),
        ("clusterDNS", kubelet("clusterDNS", json!(["10.96.0.10"]))),
        ("maxPods", kubelet("maxPods", json!(64))),
        ("failSwapOn", kubelet("failSwapOn", json!(false))),
    ];
    let mut seen = vec![base_hash.clone()];
    for (case, changed) in cases {
        let hash = changed.hash();
        assert_ne!(hash, base_hash, "{case}");
        assert!(!seen.contains(&hash), "{case}: collides with another case");
        seen.push(hash);
    }
}

#[test]
fn ignored_and_equivalent_changes_do_not_drift() {
    let base_hash = class(base()).hash();
    let cases = [
        // Upstream's hash:"ignore": applied in place, or at boot only.
        ("tags", changed("/tags", json!(["a", "b"]))),
        ("tags removed", changed("/tags", Value::Null)),
        (
            "metadata options",
            changed("/metadataOptions", json!({"type": "none"})),
        ),
        (
            "security groups",
            changed(
                "/securityGroups",
                json!([{"name": "ssh", "interface": "net1"}]),
            ),
        ),
        (
            "resource pool",
            changed("/resourcePool", json!("other/pool")),
        ),
        // Lists are sets.
        (
            "clusterDNS reordered",
            changed(
                "/kubeletConfiguration/clusterDNS",
                json!(["fd00::10", "10.96.0.10"]),
            ),
        ),
        (
            "allowedUnsafeSysctls reordered",
            changed(
                "/kubeletConfiguration/allowedUnsafeSysctls",
                json!(["kernel.msg*", "net.core.somaxconn"]),
            ),
        ),
        // Durations by their length.
        (
            "shutdownGracePeriod as seconds",
            changed("/kubeletConfiguration/shutdownGracePeriod", json!("60s")),
        ),
        (
            "cpuCFSQuotaPeriod as a fraction",
            changed("/kubeletConfiguration/cpuCFSQuotaPeriod", json!("0.1s")),
        ),
    ];
    for (case, changed) in cases {
        assert_eq!(changed.hash(), base_hash, "{case}");
    }
    let tera = |size: &str| class(set(base(), "/bootDevice/size", json!(size))).hash();
    assert_eq!(tera("1000G"), tera("1T"), "the same number of bytes");
    assert_eq!(tera("1024Gi"), tera("1Ti"));
    assert_ne!(tera("1T"), tera("1Ti"));
}

#[test]
fn defaults_spelled_out_do_not_drift() {
    let minimal = json!({"instanceTemplateRef": {"kind": "ProxmoxTemplate", "name": "talos"}});
    let spelled = set(
        set(
            set(
                minimal.clone(),
                "/placementStrategy",
                json!({"zoneBalance": "Balanced"}),
            ),
            "/bootDevice",
            json!({"size": "30G"}),
        ),
        "/metadataOptions",
        json!({"type": "none"}),
    );
    assert_eq!(class(minimal.clone()).hash(), class(spelled).hash());
    // An empty boot device is not the default one: it keeps the template's disk.
    assert_ne!(
        class(minimal.clone()).hash(),
        class(set(minimal, "/bootDevice", json!({}))).hash()
    );
}

/// Upstream hashes a kubelet setting through a pointer: set to `false` or `0` is not unset.
#[test]
fn set_zero_kubelet_settings_are_not_unset() {
    let minimal = json!({"instanceTemplateRef": {"kind": "ProxmoxTemplate", "name": "talos"}});
    let with =
        |kubelet: Value| class(set(minimal.clone(), "/kubeletConfiguration", kubelet)).hash();
    let empty = with(json!({}));
    assert_eq!(
        empty,
        class(minimal.clone()).hash(),
        "no settings is no kubelet configuration"
    );
    for (field, zero) in [
        ("cpuCFSQuota", json!(false)),
        ("failSwapOn", json!(false)),
        ("imageGCHighThresholdPercent", json!(0)),
        ("imageGCLowThresholdPercent", json!(0)),
    ] {
        assert_ne!(with(json!({field: zero})), empty, "{field}");
    }
}

#[test]
fn the_in_place_hash_covers_tags_groups_and_pool() {
    let base_hash = class(base()).in_place_hash();
    for (case, changed) in [
        ("tags", changed("/tags", json!(["a"]))),
        (
            "a security group's interface",
            changed("/securityGroups/0/interface", json!("net1")),
        ),
        (
            "a security group's name",
            changed("/securityGroups/0/name", json!("ssh")),
        ),
        ("resource pool", changed("/resourcePool", json!("other"))),
    ] {
        assert_ne!(changed.in_place_hash(), base_hash, "{case}");
    }
    for (case, changed) in [
        ("region", changed("/region", json!("cluster-2"))),
        ("boot disk", changed("/bootDevice/size", json!("60G"))),
        (
            "metadata options",
            changed("/metadataOptions", json!({"type": "none"})),
        ),
        (
            "tags reordered",
            changed("/tags", json!(["k8s", "karpenter"])),
        ),
        (
            "a security group's default interface spelled out",
            changed("/securityGroups", json!([{"name": "kubernetes"}])),
        ),
    ] {
        assert_eq!(changed.in_place_hash(), base_hash, "{case}");
    }
}

fn template(spec: Value) -> ProxmoxTemplate {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.proxmox.sinextra.dev/v1alpha1",
        "kind": "ProxmoxTemplate",
        "metadata": {"name": "ubuntu"},
        "spec": spec,
    }))
    .expect("a ProxmoxTemplate")
}

fn template_base() -> Value {
    json!({
        "region": "cluster-1",
        "description": "Ubuntu",
        "sourceImage": {
            "url": "https://cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.img",
            "imageName": "ubuntu-amd64.qcow2",
            "checksum": "0123456789abcdef0123456789abcdef",
            "checksumType": "md5",
        },
        "storageIDs": ["local", "ceph"],
        "machine": "q35",
        "bios": "seabios",
        "tpm": {"version": "v2.0"},
        "agent": {"enabled": true},
        "cpu": {"type": "host", "flags": ["+aes"]},
        "vga": {"type": "serial0", "memory": 16},
        "network": [{"name": "net0", "bridge": "vmbr0", "vlan": 10, "firewall": true, "dnsServers": ["1.1.1.1"]}],
        "pciDevices": [{"mapping": "gpu", "pcie": true}],
        "tags": ["k8s"],
        "resourcePool": "templates",
        "onBoot": true,
    })
}

/// Upstream splits a template's fields: the image, storages, BIOS and TPM make the template
/// again (the hash, which is also the nodes' image id); the rest is applied to the templates
/// in place (the in-place hash); the resource pool is in neither.
#[test]
fn template_hashes_split_the_fields_as_upstreams() {
    let base = template(template_base());
    let at = |pointer: &str, value: Value| template(set(template_base(), pointer, value));
    let remade = [
        (
            "url",
            at("/sourceImage/url", json!("https://example.com/b.img")),
        ),
        (
            "image name",
            at("/sourceImage/imageName", json!("ubuntu.raw")),
        ),
        (
            "checksum",
            at("/sourceImage/checksum", json!("f".repeat(32))),
        ),
        (
            "checksum type",
            at("/sourceImage/checksumType", json!("sha256")),
        ),
        ("storages", at("/storageIDs", json!(["local"]))),
        ("bios", at("/bios", json!("ovmf"))),
        ("tpm version", at("/tpm/version", json!("v1.2"))),
        ("tpm removed", at("/tpm", Value::Null)),
    ];
    for (case, t) in remade {
        assert_ne!(t.hash(), base.hash(), "{case}");
        assert_eq!(t.in_place_hash(), base.in_place_hash(), "{case}");
    }
    let in_place = [
        ("region", at("/region", json!("cluster-2"))),
        ("description", at("/description", json!("Noble"))),
        ("machine", at("/machine", json!("pc"))),
        ("agent", at("/agent/enabled", json!(false))),
        ("agent type", at("/agent/type", json!("isa"))),
        ("agent removed", at("/agent", Value::Null)),
        ("cpu type", at("/cpu/type", json!("x86-64-v3"))),
        ("cpu flags", at("/cpu/flags", json!(["+aes", "+pdpe1gb"]))),
        ("vga type", at("/vga/type", json!("std"))),
        ("vga memory", at("/vga/memory", json!(32))),
        ("bridge", at("/network/0/bridge", json!("vmbr1"))),
        ("vlan", at("/network/0/vlan", json!(11))),
        ("mtu", at("/network/0/mtu", json!(9000))),
        ("model", at("/network/0/model", json!("e1000"))),
        ("firewall", at("/network/0/firewall", json!(false))),
        ("interface name", at("/network/0/name", json!("net1"))),
        ("dns", at("/network/0/dnsServers", json!(["8.8.8.8"]))),
        ("address", at("/network/0/address4", json!("10.0.0.5/24"))),
        ("pci device", at("/pciDevices/0/pcie", json!(false))),
        ("pci mdev", at("/pciDevices/0/mdev", json!("nvidia-660"))),
        ("tags", at("/tags", json!(["k8s", "talos"]))),
        ("onBoot", at("/onBoot", json!(false))),
        ("onBoot removed", at("/onBoot", Value::Null)),
    ];
    for (case, t) in in_place {
        assert_eq!(t.hash(), base.hash(), "{case}");
        assert_ne!(t.in_place_hash(), base.in_place_hash(), "{case}");
    }
    let pool = at("/resourcePool", json!("other"));
    assert_eq!(pool.hash(), base.hash());
    assert_eq!(pool.in_place_hash(), base.in_place_hash());
    // Sets and spelled-out defaults.
    let same = [
        (
            "storages reordered",
            at("/storageIDs", json!(["ceph", "local"])),
        ),
        ("model spelled out", at("/network/0/model", json!("virtio"))),
        ("mtu spelled out", at("/network/0/mtu", json!(1500))),
        ("agent type spelled out", at("/agent/type", json!("virtio"))),
    ];
    for (case, t) in same {
        assert_eq!(t.hash(), base.hash(), "{case}");
        assert_eq!(t.in_place_hash(), base.in_place_hash(), "{case}");
    }
}

#[test]
fn unmanaged_template_hash_covers_its_spec() {
    let unmanaged = |spec: Value| -> ProxmoxUnmanagedTemplate {
        serde_json::from_value(json!({"metadata": {"name": "t"}, "spec": spec})).unwrap()
    };
    let base = unmanaged(json!({"templateName": "talos", "tags": ["a", "b"]})).hash();
    assert_eq!(
        unmanaged(json!({"templateName": "talos", "tags": ["b", "a"]})).hash(),
        base
    );
    for spec in [
        json!({"templateName": "ubuntu", "tags": ["a", "b"]}),
        json!({"templateName": "talos", "tags": ["a"]}),
        json!({"templateName": "talos", "tags": ["a", "b"], "region": "cluster-1"}),
    ] {
        assert_ne!(unmanaged(spec.clone()).hash(), base, "{spec}");
    }
}

#[test]
fn annotations_and_versions() {
    assert_eq!(
        PROXMOX_NODE_CLASS_HASH_ANNOTATION,
        "karpenter.proxmox.sinextra.dev/proxmoxnodeclass-hash"
    );
    assert_eq!(
        PROXMOX_NODE_CLASS_HASH_VERSION_ANNOTATION,
        "karpenter.proxmox.sinextra.dev/proxmoxnodeclass-hash-version"
    );
    assert_eq!(
        PROXMOX_TEMPLATE_HASH_ANNOTATION,
        "karpenter.proxmox.sinextra.dev/proxmoxtemplate-hash"
    );
    assert_eq!(
        PROXMOX_TEMPLATE_HASH_VERSION_ANNOTATION,
        "karpenter.proxmox.sinextra.dev/proxmoxtemplate-hash-version"
    );
    // Ours beside upstream's v1 for the NodeClass (re-stamped, not judged); upstream's own for
    // the templates, whose numbers are upstream's.
    assert_eq!(PROXMOX_NODE_CLASS_HASH_VERSION, "rs-v1");
    assert_eq!(PROXMOX_TEMPLATE_HASH_VERSION, "v1");
}
