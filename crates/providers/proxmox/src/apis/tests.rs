//! The APIs' pure parts: upstream's own hash numbers (computed with its hashing library,
//! hashstructure v2.0.2, over the same specs as upstream's types read them), the status
//! readers, disk sizes, the kubelet settings handed to cloud-init, and the create-time checks.

use serde_json::{Value, json};

use super::*;

fn template(spec: Value) -> ProxmoxTemplateSpec {
    serde_json::from_value(spec).expect("a template spec")
}

const TALOS_URL: &str = "https://factory.talos.dev/image/376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba/v1.10.5/nocloud-amd64.raw";

/// The spec of upstream's template documentation, with a checksum.
fn full_template() -> Value {
    json!({
        "sourceImage": {
            "url": "https://cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.img",
            "imageName": "ubuntu-amd64.qcow2",
            "checksum": "0123456789abcdef0123456789abcdef",
            "checksumType": "md5",
        },
        "storageIDs": ["local", "system"],
        "agent": {"enabled": true, "type": "virtio", "fsFreezeOnBackup": true, "fsTrimClonedDisks": false},
        "cpu": {"type": "x86-64-v2-AES", "flags": ["+pdpe1gb"]},
        "vga": {"type": "serial0", "memory": 16},
        "network": [{
            "name": "net0", "model": "virtio", "bridge": "vmbr0", "mtu": 1500, "vlan": 15, "firewall": true,
            "address4": "192.168.0.0/24", "address6": "fd00::/64",
            "gateway4": "192.168.0.1", "gateway6": "fd00::1",
            "dnsServers": ["1.1.1.1", "2001:4860:4860::8888"],
        }],
        "pciDevices": [{"mapping": "nvidia", "mdev": "nvidia-660", "pcie": true, "xvga": false}],
        "tags": ["talos-k8s-proxmox", "karpenter"],
        "onBoot": true,
    })
}

fn minimal_template() -> Value {
    json!({
        "sourceImage": {"url": TALOS_URL, "imageName": "talos-nocloud-amd64.raw"},
        "storageIDs": ["local"],
        "network": [{"bridge": "vmbr0"}],
    })
}

/// (case, spec, upstream's `Hash()`, upstream's `InPlaceHash()`, upstream's `GetImageID()`).
/// The specs leave the CRD's defaults out; upstream hashed them defaulted, as the API server
/// stores them, and the types fill the same defaults in.
#[test]
fn template_hashes_are_upstreams() {
    let cases = [
        (
            "upstream's documented template",
            full_template(),
            "1502175623993540137",
            "15267111262350737302",
            "ubuntu-amd64-9606822589293882907.qcow2",
        ),
        (
            "a minimal template",
            minimal_template(),
            "14323153300886231537",
            "13165882920411807815",
            "talos-nocloud-amd64-12728312047773611970.raw",
        ),
        (
            "OVMF with a TPM: a new hash, the same in-place hash",
            json!({
                "sourceImage": {"url": TALOS_URL, "imageName": "talos-nocloud-amd64.raw"},
                "storageIDs": ["local"],
                "bios": "ovmf",
                "tpm": {},
                "network": [{"bridge": "vmbr0"}],
            }),
            "13441584066677545965",
            "13165882920411807815",
            "talos-nocloud-amd64-12728312047773611970.raw",
        ),
        (
            "other hardware: the same hash, a new in-place hash",
            json!({
                "region": "cluster-1",
                "description": "Talos",
                "sourceImage": {"url": TALOS_URL, "imageName": "talos-nocloud-amd64.raw"},
                "storageIDs": ["local"],
                "machine": "pc",
                "cpu": {"type": "host"},
                "onBoot": false,
                "agent": {"type": "isa"},
                "network": [
                    {"name": "net0", "bridge": "vmbr0", "mtu": 1},
                    {"name": "net1", "bridge": "vmbr1", "model": "e1000", "mtu": 9000, "vlan": 4094},
                ],
            }),
            "14323153300886231537",
            "8851098092893889994",
            "talos-nocloud-amd64-12728312047773611970.raw",
        ),
    ];
    for (case, spec, hash, in_place, image) in cases {
        let spec = template(spec);
        assert_eq!(spec.hash(), hash, "{case}: hash");
        assert_eq!(spec.in_place_hash(), in_place, "{case}: in-place hash");
        assert_eq!(spec.image_id().as_deref(), Ok(image), "{case}: image id");
    }
}

#[test]
fn template_hash_reads_storages_as_a_set() {
    let mut reversed = full_template();
    reversed["storageIDs"] = json!(["system", "local"]);
    assert_eq!(template(reversed).hash(), "1502175623993540137");
}

#[test]
fn node_class_in_place_hashes_are_upstreams() {
    let class = |spec: Value| -> ProxmoxNodeClassSpec { serde_json::from_value(spec).unwrap() };
    let groups = class(json!({
        "instanceTemplateRef": {"kind": "ProxmoxUnmanagedTemplate", "name": "talos"},
        "securityGroups": [{"name": "kubernetes"}, {"interface": "net1", "name": "ssh"}],
        "tags": ["karpenter", "k8s"],
        "resourcePool": "k8s-pool",
    }));
    assert_eq!(groups.in_place_hash(), "13859508692652894221");
    let empty = class(json!({"instanceTemplateRef": {"kind": "ProxmoxTemplate", "name": "t"}}));
    assert_eq!(empty.in_place_hash(), "3728091669883753481");
}

#[test]
fn unmanaged_template_hashes_are_upstreams() {
    let spec =
        |spec: Value| -> ProxmoxUnmanagedTemplateSpec { serde_json::from_value(spec).unwrap() };
    assert_eq!(
        spec(json!({"templateName": "talos", "tags": ["karpenter"]})).hash(),
        "372371346332944726"
    );
    assert_eq!(
        spec(json!({"templateName": "talos", "region": "cluster-1"})).hash(),
        "7739926023149529277"
    );
}

#[test]
fn go_string_hash_is_upstreams() {
    assert_eq!(go_string_hash(""), 14695981039346656037);
    assert_eq!(go_string_hash("a"), 12638153115695167422);
    assert_eq!(go_string_hash("abc"), 15626587013303479755);
}

#[test]
fn image_id_needs_a_file_name_with_an_extension() {
    let image = |name: Option<&str>| {
        let mut spec = minimal_template();
        spec["sourceImage"]["imageName"] = json!(name);
        template(spec).image_id()
    };
    // Split at the first dot, as upstream's.
    assert_eq!(
        image(Some("talos.raw.xz")).unwrap(),
        "talos-12728312047773611970.raw.xz"
    );
    for name in [None, Some("talos")] {
        let err = image(name).unwrap_err();
        assert_eq!(err.field, "spec.sourceImage.imageName", "{name:?}");
        assert!(err.reason.contains("extension"), "{err}");
    }
}

#[test]
fn selected_zones_read_as_upstreams() {
    let class: ProxmoxNodeClass = serde_json::from_value(json!({
        "metadata": {"name": "default"},
        "spec": {"instanceTemplateRef": {"kind": "ProxmoxTemplate", "name": "t"}},
        "status": {"selectedZones": [
            "cluster-1/pve-1/1001",
            "cluster-1/pve-2/1002",
            "cluster-2/pve-1/2001",
            "cluster-1/pve-3",
            "cluster-1/pve-4/not-a-number",
            "cluster-10/pve-9/9",
        ]},
    }))
    .unwrap();
    assert_eq!(class.zones("cluster-1"), ["pve-1", "pve-2"]);
    assert_eq!(class.template_ids("cluster-1"), [1001, 1002]);
    assert_eq!(class.zones("cluster-2"), ["pve-1"]);
    assert!(
        class.zones("cluster").is_empty(),
        "a region is matched whole"
    );
    assert!(ProxmoxNodeClass::default().zones("cluster-1").is_empty());

    let zone = SelectedZone::parse("cluster-1/pve-1/1001").unwrap();
    assert_eq!(zone.to_string(), "cluster-1/pve-1/1001");
    assert_eq!(
        (zone.region.as_str(), zone.zone.as_str(), zone.template_id),
        ("cluster-1", "pve-1", 1001)
    );
}

#[test]
fn readiness_is_the_ready_condition() {
    let condition = |type_: &str, status: &str| {
        json!({"type": type_, "status": status, "reason": "R", "message": "",
            "lastTransitionTime": "2025-01-01T00:00:00Z"})
    };
    let class = |conditions: Value| -> ProxmoxNodeClass {
        serde_json::from_value(json!({
            "metadata": {"name": "c"},
            "spec": {"instanceTemplateRef": {"kind": "ProxmoxTemplate", "name": "t"}},
            "status": {"conditions": conditions},
        }))
        .unwrap()
    };
    assert!(class(json!([condition("Ready", "True")])).is_ready());
    assert!(!class(json!([condition("Ready", "Unknown")])).is_ready());
    assert!(
        !class(json!([condition(
            CONDITION_INSTANCE_TEMPLATE_READY,
            "True"
        )]))
        .is_ready()
    );
    assert!(!ProxmoxNodeClass::default().is_ready());

    let unmanaged: ProxmoxUnmanagedTemplate = serde_json::from_value(json!({
        "metadata": {"name": "u"},
        "spec": {"templateName": "talos"},
        "status": {"conditions": [condition("Ready", "True")], "zones": ["c/pve-1/100"], "imageID": "100-42"},
    }))
    .unwrap();
    assert!(unmanaged.is_ready());
    assert_eq!(unmanaged.image_id().as_deref(), Some("100-42"));
    assert_eq!(unmanaged.selected_zones()[0].template_id, 100);
}

#[test]
fn disk_sizes_in_bytes() {
    let size = |s: &str| {
        BlockDevice {
            size: Some(s.into()),
            storage: None,
        }
        .size_bytes()
    };
    assert_eq!(size("30G"), Some(30_000_000_000));
    assert_eq!(size("30Gi"), Some(30 << 30));
    assert_eq!(size("1T"), Some(1_000_000_000_000));
    assert_eq!(size("2Ti"), Some(2 << 40));
    for bad in ["30", "30M", "G", "1.5G", " 30G", "99999999999999T"] {
        assert_eq!(size(bad), None, "{bad}");
    }
    let gib = BlockDevice {
        size: Some("30Gi".into()),
        storage: None,
    };
    assert_eq!(gib.size_gigabytes(), Some(33), "rounded up, as upstream's");
    assert_eq!(BlockDevice::default().size_bytes(), None);
}

#[test]
fn kubelet_settings_for_cloud_init_use_gos_durations() {
    let kubelet: KubeletConfiguration = serde_json::from_value(json!({
        "cpuCFSQuotaPeriod": "0.1s",
        "shutdownGracePeriod": "90s",
        "maxPods": 110,
        "clusterDNS": ["10.96.0.10"],
        "cpuCFSQuota": false,
    }))
    .unwrap();
    assert_eq!(
        kubelet.to_json(),
        json!({
            "cpuCFSQuota": false,
            "cpuCFSQuotaPeriod": "100ms",
            "shutdownGracePeriod": "1m30s",
            "clusterDNS": ["10.96.0.10"],
            "maxPods": 110,
        })
    );
}

#[test]
fn node_class_create_checks_name_their_fields() {
    let spec = |spec: Value| -> ProxmoxNodeClassSpec { serde_json::from_value(spec).unwrap() };
    let fields = |spec: ProxmoxNodeClassSpec| -> Vec<String> {
        match spec.validate_for_create() {
            Ok(()) => Vec::new(),
            Err(InvalidSpec(found)) => found.into_iter().map(|e| e.field).collect(),
        }
    };
    let reference = json!({"kind": "ProxmoxTemplate", "name": "t"});
    assert!(fields(spec(json!({"instanceTemplateRef": reference}))).is_empty());
    assert_eq!(
        fields(ProxmoxNodeClassSpec::default()),
        ["spec.instanceTemplateRef"]
    );
    assert_eq!(
        fields(spec(json!({
            "instanceTemplateRef": reference,
            "bootDevice": {"size": 30},
            "kubeletConfiguration": {"cpuCFSQuotaPeriod": "100", "shutdownGracePeriod": "1m"},
            "metadataOptions": {"type": "cdrom", "templatesRef": {"name": "user-data"}},
        }))),
        [
            "spec.bootDevice.size",
            "spec.kubeletConfiguration.cpuCFSQuotaPeriod",
            "spec.metadataOptions.templatesRef",
        ]
    );
    let err = spec(json!({"instanceTemplateRef": reference, "bootDevice": {"size": 30}}))
        .validate_for_create()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "spec.bootDevice.size must be a whole number of G, Gi, T or Ti such as 30G (it is \"30\")"
    );
}
