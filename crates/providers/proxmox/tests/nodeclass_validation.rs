//! The three kinds' every rule as tables, judged by `karpenter-rs validate`'s machinery (schema,
//! CEL, runtime checks). Each row is a fact read off upstream's generated CRDs, or something
//! upstream refuses later (when it reads the object or makes a node), which is a runtime check
//! here (`NotReady`). Then the CRDs' defaults against the types', and the CRDs' names and
//! columns.

use karpenter_api::crd::{CORE, Crd};
use karpenter_api::validation::table::{Case, Expect::*, failures, set};
use karpenter_api::validation::validate_object;
use karpenter_proxmox::apis::{
    CRDS, NODE_CLASS_CRD, ProxmoxNodeClass, ProxmoxTemplate, ProxmoxUnmanagedTemplate,
    TEMPLATE_CRD, UNMANAGED_TEMPLATE_CRD,
};
use serde_json::{Value, json};

fn crds() -> Vec<Crd> {
    CORE.iter().copied().chain(CRDS).collect()
}

fn assert_cases(cases: Vec<Case>) {
    let failures = failures(&crds(), cases);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn text(n: usize) -> String {
    "a".repeat(n)
}

// ProxmoxNodeClass

/// The smallest class upstream's CRD admits.
fn nodeclass() -> Value {
    json!({
        "apiVersion": "karpenter.proxmox.sinextra.dev/v1alpha1",
        "kind": "ProxmoxNodeClass",
        "metadata": {"name": "default"},
        "spec": {"instanceTemplateRef": {"kind": "ProxmoxUnmanagedTemplate", "name": "talos"}},
    })
}

fn class_with(pointer: &str, value: Value) -> Value {
    set(nodeclass(), pointer, value)
}

fn template_ref_cases() -> Vec<Case> {
    let at = "spec.instanceTemplateRef";
    vec![
        ("minimal class", nodeclass(), Valid),
        (
            "a managed template",
            class_with("/spec/instanceTemplateRef/kind", json!("ProxmoxTemplate")),
            Valid,
        ),
        (
            "instanceTemplateRef missing",
            class_with("/spec/instanceTemplateRef", Value::Null),
            Rejected(at, "required"),
        ),
        (
            "kind missing",
            class_with("/spec/instanceTemplateRef/kind", Value::Null),
            Rejected("spec.instanceTemplateRef.kind", "required"),
        ),
        (
            "kind not a template kind",
            class_with("/spec/instanceTemplateRef/kind", json!("ProxmoxNodeClass")),
            Rejected("spec.instanceTemplateRef.kind", "unsupported value"),
        ),
        (
            "name missing",
            class_with("/spec/instanceTemplateRef/name", Value::Null),
            Rejected("spec.instanceTemplateRef.name", "required"),
        ),
        (
            "name empty",
            class_with("/spec/instanceTemplateRef/name", json!("")),
            Rejected("spec.instanceTemplateRef.name", "may not be empty"),
        ),
        (
            "a group, which upstream's reference has not",
            class_with("/spec/instanceTemplateRef/group", json!("x")),
            Rejected("spec.instanceTemplateRef.group", "unknown field"),
        ),
        // Upstream's CRD requires neither the spec nor, without one, the reference; its status
        // then fails for want of one.
        (
            "spec missing",
            class_with("/spec", Value::Null),
            NotReady(at, "required"),
        ),
        (
            "an unknown spec field",
            class_with("/spec/subnetSelectorTerms", json!([])),
            Rejected("spec.subnetSelectorTerms", "unknown field"),
        ),
    ]
}

fn placement_cases() -> Vec<Case> {
    vec![
        (
            "region",
            class_with("/spec/region", json!("cluster-1")),
            Valid,
        ),
        (
            "region empty",
            class_with("/spec/region", json!("")),
            Rejected("spec.region", "may not be empty"),
        ),
        (
            "balanced",
            class_with(
                "/spec/placementStrategy",
                json!({"zoneBalance": "Balanced"}),
            ),
            Valid,
        ),
        (
            "availability first",
            class_with(
                "/spec/placementStrategy",
                json!({"zoneBalance": "AvailabilityFirst"}),
            ),
            Valid,
        ),
        (
            "an empty placement strategy",
            class_with("/spec/placementStrategy", json!({})),
            Valid,
        ),
        (
            "zoneBalance not a strategy",
            class_with(
                "/spec/placementStrategy",
                json!({"zoneBalance": "balanced"}),
            ),
            Rejected("spec.placementStrategy.zoneBalance", "unsupported value"),
        ),
    ]
}

fn boot_device_cases() -> Vec<Case> {
    let size = |v: Value| class_with("/spec/bootDevice", json!({"size": v}));
    let at = "spec.bootDevice.size";
    let mut cases: Vec<Case> = ["30G", "50Gi", "1T", "2Ti", "1024G"]
        .into_iter()
        .map(|s| ("a size upstream's pattern admits", size(json!(s)), Valid))
        .collect();
    cases.extend(
        ["30", "30M", "30g", "1.5G", "30GB", " 30G", "-30G", "G"]
            .into_iter()
            .map(|s| {
                (
                    "a size upstream's pattern refuses",
                    size(json!(s)),
                    Rejected(at, "invalid value"),
                )
            }),
    );
    cases.extend([
        // The schema's int-or-string admits a bare integer (bytes); no VM boots from 30 bytes.
        (
            "a size as an integer",
            size(json!(30)),
            NotReady(at, "whole number of G, Gi, T or Ti"),
        ),
        (
            "a size as a float",
            size(json!(30.5)),
            Rejected(at, "integer or a string"),
        ),
        (
            "a size too large to count",
            size(json!("99999999999999999999T")),
            NotReady(at, "too large"),
        ),
        (
            "storage only: the template's disk size",
            class_with("/spec/bootDevice", json!({"storage": "local-lvm"})),
            Valid,
        ),
        (
            "storage of 30 characters",
            class_with("/spec/bootDevice", json!({"storage": text(30)})),
            Valid,
        ),
        (
            "storage of 31 characters",
            class_with("/spec/bootDevice", json!({"storage": text(31)})),
            Rejected("spec.bootDevice.storage", "longer than 30"),
        ),
    ]);
    cases
}

fn metadata_cases() -> Vec<Case> {
    let options = |v: Value| class_with("/spec/metadataOptions", v);
    let secret = json!({"name": "user-data", "namespace": "kube-system"});
    vec![
        ("none", options(json!({"type": "none"})), Valid),
        (
            "cdrom with its templates and values",
            options(json!({"type": "cdrom", "templatesRef": secret, "valuesRef": secret})),
            Valid,
        ),
        (
            "type not a metadata type",
            options(json!({"type": "iso"})),
            Rejected("spec.metadataOptions.type", "unsupported value"),
        ),
        // Upstream's metadata status condition turns False.
        (
            "cdrom without templates",
            options(json!({"type": "cdrom"})),
            NotReady("spec.metadataOptions.templatesRef", "when type is cdrom"),
        ),
        (
            "cdrom with templates lacking a namespace",
            options(json!({"type": "cdrom", "templatesRef": {"name": "user-data"}})),
            NotReady("spec.metadataOptions.templatesRef", "namespace"),
        ),
        (
            "templates without cdrom, unused",
            options(json!({"templatesRef": secret})),
            Valid,
        ),
        (
            "a Secret reference with a key, which it has not",
            options(
                json!({"type": "cdrom", "templatesRef": {"name": "a", "namespace": "b", "key": "c"}}),
            ),
            Rejected("spec.metadataOptions.templatesRef.key", "unknown field"),
        ),
    ]
}

fn security_group_and_tag_cases() -> Vec<Case> {
    let groups = |v: Value| class_with("/spec/securityGroups", v);
    let group = json!({"name": "kubernetes"});
    vec![
        (
            "a group on the default interface",
            groups(json!([group])),
            Valid,
        ),
        (
            "a group on net12",
            groups(json!([{"name": "ssh", "interface": "net12"}])),
            Valid,
        ),
        // Upstream's interface pattern is not anchored.
        (
            "an interface merely containing netN",
            groups(json!([{"name": "ssh", "interface": "my-net0-x"}])),
            Valid,
        ),
        (
            "an interface without netN",
            groups(json!([{"name": "ssh", "interface": "eth0"}])),
            Rejected("spec.securityGroups[0].interface", "invalid value"),
        ),
        (
            "a group without a name",
            groups(json!([{"interface": "net0"}])),
            Rejected("spec.securityGroups[0].name", "required"),
        ),
        (
            "a name of 30 characters",
            groups(json!([{"name": text(30)}])),
            Valid,
        ),
        (
            "a name of 31 characters",
            groups(json!([{"name": text(31)}])),
            Rejected("spec.securityGroups[0].name", "longer than 30"),
        ),
        ("10 groups", groups(json!(vec![group.clone(); 10])), Valid),
        (
            "11 groups",
            groups(json!(vec![group.clone(); 11])),
            Rejected("spec.securityGroups", "at most 10"),
        ),
        (
            "10 tags",
            class_with("/spec/tags", json!(vec!["k8s"; 10])),
            Valid,
        ),
        (
            "11 tags",
            class_with("/spec/tags", json!(vec!["k8s"; 11])),
            Rejected("spec.tags", "at most 10"),
        ),
    ]
}

/// Resource pools: the same rule on the class and the managed template.
fn resource_pool_cases(object: fn() -> Value) -> Vec<Case> {
    let pool = |v: &str| set(object(), "/spec/resourcePool", json!(v));
    let mut cases: Vec<Case> = [
        "k8s-pool",
        "parent/child/grandchild",
        "pool_1.a",
        // PVE 8 still allows a leading digit, and so does upstream's pattern.
        "0pool",
    ]
    .into_iter()
    .map(|p| ("a pool upstream's pattern admits", pool(p), Valid))
    .collect();
    cases.extend(
        ["a/b/c/d", "/a", "a/", "-a", "a b", "a//b", "_a"]
            .into_iter()
            .map(|p| {
                (
                    "a pool upstream's pattern refuses",
                    pool(p),
                    Rejected("spec.resourcePool", "invalid value"),
                )
            }),
    );
    cases.push(("a pool of 64 characters", pool(&text(64)), Valid));
    cases.push((
        "a pool of 65 characters",
        pool(&text(65)),
        Rejected("spec.resourcePool", "longer than 64"),
    ));
    cases
}

fn kubelet_cases() -> Vec<Case> {
    let kubelet = |v: Value| class_with("/spec/kubeletConfiguration", v);
    let at = |field: &'static str| field;
    vec![
        (
            "every kubelet setting",
            kubelet(json!({
                "cpuManagerPolicy": "static",
                "cpuCFSQuota": true,
                "cpuCFSQuotaPeriod": "100ms",
                "topologyManagerPolicy": "single-numa-node",
                "topologyManagerScope": "pod",
                "imageGCHighThresholdPercent": 85,
                "imageGCLowThresholdPercent": 80,
                "shutdownGracePeriod": "1m30s",
                "allowedUnsafeSysctls": ["net.core.somaxconn", "kernel.msg*"],
                "clusterDNS": ["10.96.0.10", "fd00::10", "10.96.0.11"],
                "maxPods": 110,
                "failSwapOn": false,
            })),
            Valid,
        ),
        ("maxPods 10", kubelet(json!({"maxPods": 10})), Valid),
        ("maxPods 250", kubelet(json!({"maxPods": 250})), Valid),
        (
            "maxPods 9",
            kubelet(json!({"maxPods": 9})),
            Rejected(
                at("spec.kubeletConfiguration.maxPods"),
                "greater than or equal to 10",
            ),
        ),
        (
            "maxPods 251",
            kubelet(json!({"maxPods": 251})),
            Rejected(
                at("spec.kubeletConfiguration.maxPods"),
                "less than or equal to 250",
            ),
        ),
        (
            "image GC thresholds at their bounds",
            kubelet(json!({"imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 0})),
            Valid,
        ),
        (
            "image GC high threshold above 100",
            kubelet(json!({"imageGCHighThresholdPercent": 101})),
            Rejected(
                at("spec.kubeletConfiguration.imageGCHighThresholdPercent"),
                "less than or equal to 100",
            ),
        ),
        (
            "image GC low threshold below 0",
            kubelet(json!({"imageGCLowThresholdPercent": -1})),
            Rejected(
                at("spec.kubeletConfiguration.imageGCLowThresholdPercent"),
                "greater than or equal to 0",
            ),
        ),
        (
            "cpuManagerPolicy not a policy",
            kubelet(json!({"cpuManagerPolicy": "dynamic"})),
            Rejected(
                at("spec.kubeletConfiguration.cpuManagerPolicy"),
                "unsupported value",
            ),
        ),
        (
            "topologyManagerPolicy not a policy",
            kubelet(json!({"topologyManagerPolicy": "best_effort"})),
            Rejected(
                at("spec.kubeletConfiguration.topologyManagerPolicy"),
                "unsupported value",
            ),
        ),
        (
            "topologyManagerScope not a scope",
            kubelet(json!({"topologyManagerScope": "node"})),
            Rejected(
                at("spec.kubeletConfiguration.topologyManagerScope"),
                "unsupported value",
            ),
        ),
        (
            "4 cluster DNS servers",
            kubelet(json!({"clusterDNS": ["a", "b", "c", "d"]})),
            Rejected(at("spec.kubeletConfiguration.clusterDNS"), "at most 3"),
        ),
        (
            "cpuCFSQuota not a bool",
            kubelet(json!({"cpuCFSQuota": "true"})),
            Rejected(at("spec.kubeletConfiguration.cpuCFSQuota"), "type boolean"),
        ),
        // A string to the schema; upstream cannot read the object at all.
        (
            "shutdownGracePeriod not a duration",
            kubelet(json!({"shutdownGracePeriod": "thirty seconds"})),
            NotReady(
                at("spec.kubeletConfiguration.shutdownGracePeriod"),
                "duration",
            ),
        ),
        (
            "cpuCFSQuotaPeriod without a unit",
            kubelet(json!({"cpuCFSQuotaPeriod": "100"})),
            NotReady(
                at("spec.kubeletConfiguration.cpuCFSQuotaPeriod"),
                "duration",
            ),
        ),
        (
            "a kubelet setting upstream has not",
            kubelet(json!({"systemReserved": {"cpu": "1"}})),
            Rejected(
                at("spec.kubeletConfiguration.systemReserved"),
                "unknown field",
            ),
        ),
    ]
}

fn condition() -> Value {
    json!({
        "type": "Ready",
        "status": "True",
        "reason": "Ready",
        "message": "",
        "lastTransitionTime": "2025-01-01T00:00:00Z",
    })
}

fn class_status_cases() -> Vec<Case> {
    vec![
        (
            "a status as upstream writes it",
            class_with(
                "/status",
                json!({
                    "conditions": [condition()],
                    "resources": {"zones": "2"},
                    "selectedZones": ["cluster-1/pve-1/1001", "cluster-1/pve-2/1002"],
                }),
            ),
            Valid,
        ),
        (
            "resources not quantities",
            class_with("/status/resources", json!({"zones": "two"})),
            Rejected("status.resources[zones]", "quantity"),
        ),
        (
            "a condition without a reason",
            class_with(
                "/status/conditions",
                json!([set(condition(), "/reason", Value::Null)]),
            ),
            Rejected("status.conditions[0].reason", "required"),
        ),
        // Upstream's conditions are a plain list: a repeated type is not refused.
        (
            "a condition listed twice",
            class_with("/status/conditions", json!([condition(), condition()])),
            Valid,
        ),
    ]
}

#[test]
fn node_class_rules() {
    assert_cases(
        [
            template_ref_cases(),
            placement_cases(),
            boot_device_cases(),
            metadata_cases(),
            security_group_and_tag_cases(),
            resource_pool_cases(nodeclass),
            kubelet_cases(),
            class_status_cases(),
        ]
        .into_iter()
        .flatten()
        .collect(),
    );
}

/// Every problem the runtime checks find is reported, not just the first.
#[test]
fn every_create_problem_is_reported() {
    let object = set(
        set(nodeclass(), "/spec/bootDevice", json!({"size": 50})),
        "/spec/metadataOptions",
        json!({"type": "cdrom"}),
    );
    let report = validate_object(&crds(), &object).unwrap();
    let paths: Vec<&str> = report.problems.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(
        paths,
        ["spec.bootDevice.size", "spec.metadataOptions.templatesRef"],
        "{:?}",
        report.problems
    );
}

// ProxmoxTemplate

const URL: &str = "https://cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.img";

fn template() -> Value {
    json!({
        "apiVersion": "karpenter.proxmox.sinextra.dev/v1alpha1",
        "kind": "ProxmoxTemplate",
        "metadata": {"name": "ubuntu"},
        "spec": {
            "sourceImage": {"url": URL, "imageName": "ubuntu-amd64.qcow2"},
            "storageIDs": ["local"],
            "network": [{"bridge": "vmbr0"}],
        },
    })
}

fn template_with(pointer: &str, value: Value) -> Value {
    set(template(), pointer, value)
}

fn source_image_cases() -> Vec<Case> {
    let url = |v: &str| template_with("/spec/sourceImage/url", json!(v));
    let at = "spec.sourceImage";
    let mut cases: Vec<Case> = vec![
        ("minimal template", template(), Valid),
        (
            "sourceImage missing",
            template_with("/spec/sourceImage", Value::Null),
            Rejected(at, "required"),
        ),
        (
            "url missing",
            template_with("/spec/sourceImage/url", Value::Null),
            Rejected("spec.sourceImage.url", "required"),
        ),
    ];
    cases.extend(
        [
            "http://example.com",
            "https://example.com/",
            "https://factory.talos.dev/image/abc/v1.10.5/nocloud-amd64.raw",
            "https://mirror.example.co.uk/a?b=c",
        ]
        .into_iter()
        .map(|u| ("a URL upstream's pattern admits", url(u), Valid)),
    );
    cases.extend(
        [
            "ftp://example.com/a.img",
            "https://localhost/a.img",
            // A host must end in letters: no IP addresses.
            "https://192.168.1.1/a.img",
            "https://example.com:8080/a.img",
            "https://example.com/a b.img",
            "example.com/a.img",
        ]
        .into_iter()
        .map(|u| {
            (
                "a URL upstream's pattern refuses",
                url(u),
                Rejected("spec.sourceImage.url", "invalid value"),
            )
        }),
    );
    cases.extend([
        (
            "imageName empty",
            template_with("/spec/sourceImage/imageName", json!("")),
            Rejected("spec.sourceImage.imageName", "may not be empty"),
        ),
        (
            "imageName of 64 characters",
            template_with(
                "/spec/sourceImage/imageName",
                json!(format!("{}.raw", text(60))),
            ),
            Valid,
        ),
        (
            "imageName of 65 characters",
            template_with(
                "/spec/sourceImage/imageName",
                json!(format!("{}.raw", text(61))),
            ),
            Rejected("spec.sourceImage.imageName", "longer than 64"),
        ),
        // Upstream builds the image's file name from it and crashes without an extension.
        (
            "imageName missing",
            template_with("/spec/sourceImage/imageName", Value::Null),
            NotReady("spec.sourceImage.imageName", "extension"),
        ),
        (
            "imageName without an extension",
            template_with("/spec/sourceImage/imageName", json!("ubuntu")),
            NotReady("spec.sourceImage.imageName", "extension"),
        ),
        (
            "a checksum of 32 characters",
            template_with(
                "/spec/sourceImage",
                json!({"url": URL, "imageName": "a.img", "checksum": text(32), "checksumType": "md5"}),
            ),
            Valid,
        ),
        (
            "a checksum of 128 characters",
            template_with("/spec/sourceImage/checksum", json!(text(128))),
            Valid,
        ),
        (
            "a checksum of 31 characters",
            template_with("/spec/sourceImage/checksum", json!(text(31))),
            Rejected("spec.sourceImage.checksum", "at least 32"),
        ),
        (
            "a checksum of 129 characters",
            template_with("/spec/sourceImage/checksum", json!(text(129))),
            Rejected("spec.sourceImage.checksum", "longer than 128"),
        ),
        (
            "checksumType sha512",
            template_with("/spec/sourceImage/checksumType", json!("sha512")),
            Valid,
        ),
        (
            "checksumType not an algorithm",
            template_with("/spec/sourceImage/checksumType", json!("crc32")),
            Rejected("spec.sourceImage.checksumType", "unsupported value"),
        ),
    ]);
    cases
}

fn hardware_cases() -> Vec<Case> {
    let enum_case =
        |field: &'static str, pointer: &'static str, good: &[&'static str], bad: &'static str| {
            let mut cases: Vec<Case> = good
                .iter()
                .map(|v| ("an allowed value", template_with(pointer, json!(v)), Valid))
                .collect();
            cases.push((
                "a value not allowed",
                template_with(pointer, json!(bad)),
                Rejected(field, "unsupported value"),
            ));
            cases
        };
    let mut cases = Vec::new();
    cases.extend(enum_case(
        "spec.machine",
        "/spec/machine",
        &["pc", "q35"],
        "i440fx",
    ));
    cases.extend(enum_case(
        "spec.bios",
        "/spec/bios",
        &["seabios", "ovmf"],
        "uefi",
    ));
    cases.extend(enum_case(
        "spec.tpm.version",
        "/spec/tpm/version",
        &["v1.2", "v2.0"],
        "v3.0",
    ));
    cases.extend(enum_case(
        "spec.agent.type",
        "/spec/agent/type",
        &["virtio", "isa"],
        "serial",
    ));
    cases.extend(enum_case(
        "spec.cpu.type",
        "/spec/cpu/type",
        &[
            "host",
            "kvm64",
            "x86-64-v2",
            "x86-64-v2-AES",
            "x86-64-v3",
            "x86-64-v4",
        ],
        "x86-64-v1",
    ));
    cases.extend(enum_case(
        "spec.vga.type",
        "/spec/vga/type",
        &["none", "serial0", "std", "vmware"],
        "qxl",
    ));
    cases.extend([
        (
            "the guest agent in full",
            template_with(
                "/spec/agent",
                json!({"enabled": true, "type": "virtio", "fsFreezeOnBackup": true, "fsTrimClonedDisks": false}),
            ),
            Valid,
        ),
        (
            "10 CPU flags",
            template_with("/spec/cpu/flags", json!(vec!["+aes"; 10])),
            Valid,
        ),
        (
            "11 CPU flags",
            template_with("/spec/cpu/flags", json!(vec!["+aes"; 11])),
            Rejected("spec.cpu.flags", "at most 10"),
        ),
        (
            "VGA memory 4",
            template_with("/spec/vga/memory", json!(4)),
            Valid,
        ),
        (
            "VGA memory 512",
            template_with("/spec/vga/memory", json!(512)),
            Valid,
        ),
        (
            "VGA memory 3",
            template_with("/spec/vga/memory", json!(3)),
            Rejected("spec.vga.memory", "greater than or equal to 4"),
        ),
        (
            "VGA memory 513",
            template_with("/spec/vga/memory", json!(513)),
            Rejected("spec.vga.memory", "less than or equal to 512"),
        ),
        (
            "description empty",
            template_with("/spec/description", json!("")),
            Rejected("spec.description", "may not be empty"),
        ),
        (
            "region empty",
            template_with("/spec/region", json!("")),
            Rejected("spec.region", "may not be empty"),
        ),
        (
            "onBoot",
            template_with("/spec/onBoot", json!(true)),
            Valid,
        ),
        (
            "storageIDs missing",
            template_with("/spec/storageIDs", Value::Null),
            Rejected("spec.storageIDs", "required"),
        ),
        (
            "storageIDs empty",
            template_with("/spec/storageIDs", json!([])),
            Rejected("spec.storageIDs", "at least 1"),
        ),
        (
            "10 tags",
            template_with("/spec/tags", json!(vec!["k8s"; 10])),
            Valid,
        ),
        (
            "11 tags",
            template_with("/spec/tags", json!(vec!["k8s"; 11])),
            Rejected("spec.tags", "at most 10"),
        ),
        (
            "spec missing",
            template_with("/spec", Value::Null),
            NotReady("spec.sourceImage.url", "required"),
        ),
    ]);
    cases
}

fn network_cases() -> Vec<Case> {
    let nic = |v: Value| template_with("/spec/network", json!([v]));
    let mtu = |m: i64| nic(json!({"bridge": "vmbr0", "mtu": m}));
    let at = "spec.network[0]";
    let mut cases: Vec<Case> = vec![
        (
            "an interface in full",
            nic(json!({
                "name": "net0", "bridge": "vmbr0", "model": "virtio", "mtu": 1500, "vlan": 15,
                "firewall": true, "address4": "192.168.0.10/24", "address6": "fd00::10/64",
                "gateway4": "192.168.0.1", "gateway6": "fd00::1", "dnsServers": ["1.1.1.1"],
            })),
            Valid,
        ),
        (
            "network missing",
            template_with("/spec/network", Value::Null),
            Rejected("spec.network", "required"),
        ),
        (
            "no interface",
            template_with("/spec/network", json!([])),
            Rejected("spec.network", "at least 1"),
        ),
        (
            "6 interfaces",
            template_with("/spec/network", json!(vec![json!({"bridge": "vmbr0"}); 6])),
            Valid,
        ),
        (
            "7 interfaces",
            template_with("/spec/network", json!(vec![json!({"bridge": "vmbr0"}); 7])),
            Rejected("spec.network", "at most 6"),
        ),
        (
            "bridge missing",
            nic(json!({"name": "net0"})),
            Rejected("spec.network[0].bridge", "required"),
        ),
        (
            "bridge empty",
            nic(json!({"bridge": ""})),
            Rejected("spec.network[0].bridge", "may not be empty"),
        ),
        (
            "name empty",
            nic(json!({"bridge": "vmbr0", "name": ""})),
            Rejected("spec.network[0].name", "may not be empty"),
        ),
        (
            "address4 empty",
            nic(json!({"bridge": "vmbr0", "address4": ""})),
            Rejected("spec.network[0].address4", "may not be empty"),
        ),
        (
            "no DNS servers",
            nic(json!({"bridge": "vmbr0", "dnsServers": []})),
            Rejected("spec.network[0].dnsServers", "at least 1"),
        ),
        (
            "model e1000e",
            nic(json!({"bridge": "vmbr0", "model": "e1000e"})),
            Valid,
        ),
        (
            "model not a card",
            nic(json!({"bridge": "vmbr0", "model": "ne2k_pci"})),
            Rejected("spec.network[0].model", "unsupported value"),
        ),
        ("vlan 1", nic(json!({"bridge": "vmbr0", "vlan": 1})), Valid),
        (
            "vlan 4094",
            nic(json!({"bridge": "vmbr0", "vlan": 4094})),
            Valid,
        ),
        (
            "vlan 0",
            nic(json!({"bridge": "vmbr0", "vlan": 0})),
            Rejected("spec.network[0].vlan", "greater than or equal to 1"),
        ),
        (
            "vlan 4095",
            nic(json!({"bridge": "vmbr0", "vlan": 4095})),
            Rejected("spec.network[0].vlan", "less than or equal to 4094"),
        ),
        (
            "an interface field upstream has not",
            nic(json!({"bridge": "vmbr0", "macaddr": "BC:24:11:00:00:01"})),
            Rejected("spec.network[0].macaddr", "unknown field"),
        ),
    ];
    // Upstream's MTU rule: 1 (the bridge's), or 576 to 65520.
    for m in [1, 576, 1500, 9000, 65520] {
        cases.push(("an MTU the rule admits", mtu(m), Valid));
    }
    for m in [0, 2, 575, 65521, -1] {
        cases.push((
            "an MTU the rule refuses",
            mtu(m),
            Rejected(at, "self == 1 || ( self >= 576 && self <= 65520)"),
        ));
    }
    cases
}

fn pci_cases() -> Vec<Case> {
    let pci = |v: Value| template_with("/spec/pciDevices", v);
    vec![
        (
            "a device in full",
            pci(json!([{"mapping": "nvidia", "mdev": "nvidia-660", "pcie": true, "xvga": false}])),
            Valid,
        ),
        (
            "mapping missing",
            pci(json!([{"pcie": true}])),
            Rejected("spec.pciDevices[0].mapping", "required"),
        ),
        (
            "mapping empty",
            pci(json!([{"mapping": ""}])),
            Rejected("spec.pciDevices[0].mapping", "may not be empty"),
        ),
        (
            "6 devices",
            pci(json!(vec![json!({"mapping": "gpu"}); 6])),
            Valid,
        ),
        (
            "7 devices",
            pci(json!(vec![json!({"mapping": "gpu"}); 7])),
            Rejected("spec.pciDevices", "at most 6"),
        ),
    ]
}

fn template_status_cases() -> Vec<Case> {
    vec![(
        "a status as upstream writes it",
        template_with(
            "/status",
            json!({
                "conditions": [condition()],
                "resources": {"zones": "3"},
                "zones": ["cluster-1/pve-1/1000", "cluster-1/pve-2/1001"],
                "imageID": "ubuntu-amd64-9606822589293882907.qcow2",
            }),
        ),
        Valid,
    )]
}

#[test]
fn template_rules() {
    assert_cases(
        [
            source_image_cases(),
            hardware_cases(),
            network_cases(),
            pci_cases(),
            resource_pool_cases(template),
            template_status_cases(),
        ]
        .into_iter()
        .flatten()
        .collect(),
    );
}

// ProxmoxUnmanagedTemplate

fn unmanaged(spec: Value) -> Value {
    json!({
        "apiVersion": "karpenter.proxmox.sinextra.dev/v1alpha1",
        "kind": "ProxmoxUnmanagedTemplate",
        "metadata": {"name": "talos"},
        "spec": spec,
    })
}

#[test]
fn unmanaged_template_rules() {
    let rule = "at least one of templateName or tags must be specified";
    assert_cases(vec![
        (
            "by name",
            unmanaged(json!({"templateName": "talos"})),
            Valid,
        ),
        ("by tags", unmanaged(json!({"tags": ["karpenter"]})), Valid),
        (
            "by name and tags in a region",
            unmanaged(
                json!({"templateName": "talos", "tags": ["karpenter"], "region": "cluster-1"}),
            ),
            Valid,
        ),
        ("by neither", unmanaged(json!({})), Rejected("spec", rule)),
        (
            "a region only",
            unmanaged(json!({"region": "cluster-1"})),
            Rejected("spec", rule),
        ),
        (
            "templateName empty",
            unmanaged(json!({"templateName": ""})),
            Rejected("spec.templateName", "may not be empty"),
        ),
        (
            "region empty",
            unmanaged(json!({"templateName": "talos", "region": ""})),
            Rejected("spec.region", "may not be empty"),
        ),
        (
            "no tags",
            unmanaged(json!({"templateName": "talos", "tags": []})),
            Rejected("spec.tags", "at least 1"),
        ),
        (
            "10 tags",
            unmanaged(json!({"tags": vec!["k8s"; 10]})),
            Valid,
        ),
        (
            "11 tags",
            unmanaged(json!({"tags": vec!["k8s"; 11]})),
            Rejected("spec.tags", "at most 10"),
        ),
        // The CRD's rule runs only inside a spec; upstream's Validate catches the rest.
        (
            "spec missing",
            set(unmanaged(json!({})), "/spec", Value::Null),
            NotReady("spec", "templateName or tags"),
        ),
        (
            "a status as upstream writes it",
            set(
                unmanaged(json!({"templateName": "talos"})),
                "/status",
                json!({"conditions": [condition()], "zones": ["cluster-1/pve-1/1002"],
                    "resources": {"zones": "1"}, "imageID": "1002-8342947165913574381"}),
            ),
            Valid,
        ),
    ]);
}

#[test]
fn the_kinds_are_unknown_without_the_provider() {
    for object in [
        nodeclass(),
        template(),
        unmanaged(json!({"templateName": "t"})),
    ] {
        assert!(validate_object(&CORE, &object).is_none());
        let v1 = set(
            object,
            "/apiVersion",
            json!("karpenter.proxmox.sinextra.dev/v1"),
        );
        assert!(
            validate_object(&crds(), &v1).is_none(),
            "only v1alpha1 is served"
        );
    }
}

/// The types' serde defaults must be the CRDs': an object read by the provider means what the
/// API server stored, and written back is what the server would store.
#[test]
fn type_defaults_match_crd_defaults() {
    fn check<T>(crd: &Crd, objects: Vec<Value>)
    where
        T: serde::de::DeserializeOwned + serde::Serialize + PartialEq + std::fmt::Debug,
    {
        let schema = crd.schema();
        for object in objects {
            let defaulted = kube_cel::apply_defaults(&schema, &object);
            let typed: T = serde_json::from_value(object.clone()).unwrap();
            let stored: T = serde_json::from_value(defaulted.clone()).unwrap();
            assert_eq!(typed, stored, "{object}");
            let written = serde_json::to_value(&typed).unwrap();
            assert_eq!(written["spec"], defaulted["spec"], "{object}");
        }
    }
    check::<ProxmoxNodeClass>(
        &NODE_CLASS_CRD,
        vec![
            nodeclass(),
            class_with("/spec/placementStrategy", json!({})),
            class_with("/spec/bootDevice", json!({"storage": "local-lvm"})),
            class_with("/spec/bootDevice", json!({})),
            class_with(
                "/spec/metadataOptions",
                json!({"templatesRef": {"name": "a", "namespace": "b"}}),
            ),
            class_with(
                "/spec/securityGroups",
                json!([{"name": "a"}, {"name": "b", "interface": "net1"}]),
            ),
            class_with(
                "/spec/kubeletConfiguration",
                json!({"cpuCFSQuota": false, "maxPods": 10}),
            ),
        ],
    );
    check::<ProxmoxTemplate>(
        &TEMPLATE_CRD,
        vec![
            template(),
            template_with("/spec/agent", json!({})),
            template_with("/spec/cpu", json!({"flags": ["+aes"]})),
            template_with("/spec/tpm", json!({})),
            template_with("/spec/vga", json!({"memory": 16})),
            template_with(
                "/spec/network",
                json!([{"bridge": "vmbr0", "vlan": 5}, {"bridge": "vmbr1", "mtu": 1, "model": "e1000"}]),
            ),
        ],
    );
    check::<ProxmoxUnmanagedTemplate>(
        &UNMANAGED_TEMPLATE_CRD,
        vec![unmanaged(json!({"templateName": "talos", "tags": ["a"]}))],
    );

    // What the CRDs default, spelled out.
    let defaulted = kube_cel::apply_defaults(&NODE_CLASS_CRD.schema(), &nodeclass());
    assert_eq!(
        defaulted["spec"],
        json!({
            "instanceTemplateRef": {"kind": "ProxmoxUnmanagedTemplate", "name": "talos"},
            "placementStrategy": {"zoneBalance": "Balanced"},
            "bootDevice": {"size": "30G"},
            "metadataOptions": {"type": "none"},
        })
    );
    let defaulted = kube_cel::apply_defaults(
        &TEMPLATE_CRD.schema(),
        &template_with("/spec/agent", json!({})),
    );
    assert_eq!(
        defaulted["spec"],
        json!({
            "sourceImage": {"url": URL, "imageName": "ubuntu-amd64.qcow2"},
            "storageIDs": ["local"],
            "network": [{"bridge": "vmbr0", "model": "virtio", "mtu": 1500}],
            "machine": "q35",
            "bios": "seabios",
            "cpu": {"type": "x86-64-v2-AES"},
            "agent": {"enabled": false, "type": "virtio"},
        })
    );
}

/// The generated CRDs' shape as upstream's: names, scope, the `karpenter` category, one stored
/// version with a status subresource, and the printer columns.
#[test]
fn the_crds_are_named_as_upstreams() {
    let cases = [
        (
            &NODE_CLASS_CRD,
            "proxmoxnodeclasses",
            "ProxmoxNodeClass",
            vec![
                ("Zones", ".status.resources.zones", "string"),
                ("Balance", ".spec.placementStrategy.zoneBalance", "string"),
                ("Template", ".spec.instanceTemplateRef.name", "string"),
                ("Metadata", ".spec.metadataOptions.type", "string"),
                ("Disk", ".spec.bootDevice.size", "string"),
                (
                    "Ready",
                    r#".status.conditions[?(@.type=="Ready")].status"#,
                    "string",
                ),
                ("Age", ".metadata.creationTimestamp", "date"),
            ],
        ),
        (
            &TEMPLATE_CRD,
            "proxmoxtemplates",
            "ProxmoxTemplate",
            vec![
                ("Zones", ".status.resources.zones", "string"),
                ("Machine", ".spec.machine", "string"),
                ("CPU", ".spec.cpu.type", "string"),
                ("VGA", ".spec.vga.type", "string"),
                (
                    "Ready",
                    r#".status.conditions[?(@.type=="Ready")].status"#,
                    "string",
                ),
                ("Age", ".metadata.creationTimestamp", "date"),
            ],
        ),
        (
            &UNMANAGED_TEMPLATE_CRD,
            "proxmoxunmanagedtemplates",
            "ProxmoxUnmanagedTemplate",
            vec![
                ("Zones", ".status.resources.zones", "string"),
                ("Name", ".spec.templateName", "string"),
                (
                    "Ready",
                    r#".status.conditions[?(@.type=="Ready")].status"#,
                    "string",
                ),
                ("Age", ".metadata.creationTimestamp", "date"),
            ],
        ),
    ];
    for (crd, plural, kind, columns) in cases {
        assert_eq!(
            crd.file_name(),
            format!("karpenter.proxmox.sinextra.dev_{plural}.yaml")
        );
        let definition = crd.definition();
        assert_eq!(
            definition["metadata"]["name"],
            format!("{plural}.karpenter.proxmox.sinextra.dev")
        );
        let spec = &definition["spec"];
        assert_eq!(spec["scope"], "Cluster");
        assert_eq!(
            spec["names"],
            json!({"categories": ["karpenter"], "kind": kind, "listKind": format!("{kind}List"),
                "plural": plural, "singular": kind.to_lowercase()})
        );
        let versions = spec["versions"].as_array().unwrap();
        assert_eq!(versions.len(), 1);
        assert_eq!(versions[0]["name"], "v1alpha1");
        assert_eq!(versions[0]["storage"], true);
        assert_eq!(versions[0]["subresources"], json!({"status": {}}));
        let shown: Vec<(&str, &str, &str)> = versions[0]["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["name"].as_str().unwrap(),
                    c["jsonPath"].as_str().unwrap(),
                    c["type"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(shown, columns, "{kind}");
        // Upstream's kinds do not require a spec, and its conditions are a plain list.
        let root = &versions[0]["schema"]["openAPIV3Schema"];
        assert!(root.get("required").is_none(), "{kind}");
        let conditions = &root["properties"]["status"]["properties"]["conditions"];
        assert!(conditions.get("x-kubernetes-list-type").is_none(), "{kind}");
    }
    assert_eq!(
        CRDS.map(|c| c.kind()),
        [
            "ProxmoxNodeClass",
            "ProxmoxTemplate",
            "ProxmoxUnmanagedTemplate"
        ]
    );
}
