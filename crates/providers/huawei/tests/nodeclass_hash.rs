//! The CCENodeClass hash behind static drift: upstream's `TestCCENodeClassHash` cases, and
//! rows for what its hash options imply — every field but the subnet selectors moves the hash;
//! the order of the user disks, zero values and defaults spelled out (a disk's 40 GiB `SSD`,
//! containerd, `root`) do not. (Upstream's numbers are its Go encoding's; this project's
//! differ, under its own hash version.)

use karpenter_api::validation::table::set;
use karpenter_huawei::CCENodeClass;
use karpenter_huawei::ccenodeclass::{
    CCE_NODE_CLASS_HASH_ANNOTATION, CCE_NODE_CLASS_HASH_VERSION,
    CCE_NODE_CLASS_HASH_VERSION_ANNOTATION,
};
use serde_json::{Value, json};

fn class(spec: Value) -> CCENodeClass {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.k8s.huawei/v1alpha1",
        "kind": "CCENodeClass",
        "metadata": {"name": "default"},
        "spec": spec,
    }))
    .expect("valid CCENodeClass")
}

/// Upstream's base class, with kubelet settings added so they have something to change.
fn base() -> Value {
    json!({
        "ecsGroupId": "46ebaf04-ca42-48ca-8057-0b96e6126e1b",
        "subnetSelectorTerms": [{"id": "123e4567-e89b-12d3-a456-426614174000"}],
        "imsSelector": {"imsFamily": "HCE OS 2.0"},
        "blockDeviceMappings": {
            "k8s": {"volumeSize": 120, "volumeType": "SAS"},
            "root": {"volumeSize": 120, "volumeType": "GPSSD2", "iops": 3000, "throughput": 125},
            "users": [{"volumeSize": 100, "volumeType": "SATA"}],
        },
        "runtimeConfiguration": {"type": "docker"},
        "login": {"userPassword": {"password": "ciphertext"}},
        "kubelet": {
            "maxPods": 64,
            "kubeReserved": {"cpu": "200m", "memory": "256Mi"},
            "systemReserved": {"memory": "1Gi"},
        },
    })
}

fn changed(pointer: &str, value: Value) -> Value {
    set(base(), pointer, value)
}

fn ssh(key: &str) -> Value {
    changed("/login", json!({"sshKey": key}))
}

#[test]
fn the_hash_is_stable() {
    let hash = class(base()).hash();
    assert_eq!(hash, class(base()).hash());
    // Pinned: a change to the encoding changes every class's hash, which would drift every
    // node in every cluster; it needs a new CCE_NODE_CLASS_HASH_VERSION instead.
    assert_eq!(hash, "8703289133055424452");
    // Upstream's hash controller test's class.
    let minimal = class(json!({
        "subnetSelectorTerms": [{"id": "123e4567-e89b-12d3-a456-426614174000"}],
        "imsSelector": {"imsFamily": "Huawei Cloud EulerOS 2.0"},
        "blockDeviceMappings": {"root": {"volumeSize": 120, "volumeType": "SAS"}},
        "login": {"userPassword": {"password": "ciphertext"}},
    }));
    assert_eq!(minimal.hash(), "10884459590291420405");
}

#[test]
fn hashed_fields_drift() {
    let base_hash = class(base()).hash();
    let cases = [
        // Upstream's cases.
        (
            "root block device size",
            changed("/blockDeviceMappings/root/volumeSize", json!(160)),
        ),
        (
            "runtime type",
            changed("/runtimeConfiguration/type", json!("containerd")),
        ),
        ("password login to ssh key", ssh("cluster-keypair")),
        (
            "ims family",
            changed("/imsSelector/imsFamily", json!("Ubuntu 22.04")),
        ),
        (
            "user data volume type",
            changed("/blockDeviceMappings/users/0/volumeType", json!("SAS")),
        ),
        // The rest of the disks.
        (
            "root type",
            changed("/blockDeviceMappings/root/volumeType", json!("ESSD2")),
        ),
        (
            "root iops",
            changed("/blockDeviceMappings/root/iops", json!(4000)),
        ),
        (
            "root throughput",
            changed("/blockDeviceMappings/root/throughput", json!(250)),
        ),
        (
            "root iops removed",
            changed("/blockDeviceMappings/root/iops", Value::Null),
        ),
        (
            "k8s size",
            changed("/blockDeviceMappings/k8s/volumeSize", json!(200)),
        ),
        (
            "k8s type",
            changed("/blockDeviceMappings/k8s/volumeType", json!("SSD")),
        ),
        (
            "k8s iops",
            changed("/blockDeviceMappings/k8s/iops", json!(3000)),
        ),
        (
            "k8s removed",
            changed("/blockDeviceMappings/k8s", Value::Null),
        ),
        (
            "user disk size",
            changed("/blockDeviceMappings/users/0/volumeSize", json!(200)),
        ),
        (
            "user disk added",
            changed(
                "/blockDeviceMappings/users",
                json!([{"volumeSize": 100, "volumeType": "SATA"}, {"volumeSize": 50, "volumeType": "SSD"}]),
            ),
        ),
        (
            "user disks removed",
            changed("/blockDeviceMappings/users", Value::Null),
        ),
        // An identical disk more is a disk more (upstream's set hash would cancel the pair).
        (
            "the same user disk twice",
            changed(
                "/blockDeviceMappings/users",
                json!([{"volumeSize": 100, "volumeType": "SATA"}, {"volumeSize": 100, "volumeType": "SATA"}]),
            ),
        ),
        // Unset, the runtime is containerd: leaving docker drifts.
        (
            "runtime removed",
            changed("/runtimeConfiguration", Value::Null),
        ),
        // The login.
        (
            "password",
            changed("/login/userPassword/password", json!("other")),
        ),
        // The OS family as written: upstream hands it to CCE untrimmed.
        (
            "ims family with spaces",
            changed("/imsSelector/imsFamily", json!(" HCE OS 2.0 ")),
        ),
        // Hashed as written (upstream's Spec minus the ignored fields).
        ("ecsGroupId", changed("/ecsGroupId", json!("other-group"))),
        ("ecsGroupId removed", changed("/ecsGroupId", Value::Null)),
        ("kubelet maxPods", changed("/kubelet/maxPods", json!(110))),
        (
            "kubelet maxPods removed",
            changed("/kubelet/maxPods", Value::Null),
        ),
        (
            "kubeReserved value",
            changed("/kubelet/kubeReserved/cpu", json!("300m")),
        ),
        // As written, not by what it means: upstream hashes the strings.
        (
            "kubeReserved respelled",
            changed("/kubelet/kubeReserved/cpu", json!("0.2")),
        ),
        (
            "kubeReserved added",
            changed("/kubelet/kubeReserved/pid", json!("1000")),
        ),
        (
            "kubeReserved empty value",
            changed("/kubelet/kubeReserved/pid", json!("")),
        ),
        (
            "kubeReserved removed",
            changed("/kubelet/kubeReserved", Value::Null),
        ),
        (
            "systemReserved value",
            changed("/kubelet/systemReserved/memory", json!("2Gi")),
        ),
        (
            "reservation moved from system to kube",
            changed(
                "/kubelet",
                json!({"maxPods": 64, "kubeReserved": {"cpu": "200m", "memory": "256Mi"}, "systemReserved": {"memory": "1Gi", "cpu": "200m"}}),
            ),
        ),
        ("kubelet removed", changed("/kubelet", Value::Null)),
    ];
    for (field, spec) in cases {
        assert_ne!(class(spec).hash(), base_hash, "changing {field} must drift");
    }
    // Upstream's "ssh key changes hash".
    assert_ne!(
        class(ssh("keypair-a")).hash(),
        class(ssh("keypair-b")).hash()
    );
    // A reservation moved between the maps is a different node.
    assert_ne!(
        class(changed("/kubelet", json!({"kubeReserved": {"cpu": "1"}}))).hash(),
        class(changed("/kubelet", json!({"systemReserved": {"cpu": "1"}}))).hash()
    );
}

#[test]
fn selectors_order_spelling_and_defaults_do_not_drift() {
    let base_hash = class(base()).hash();
    let same = [
        // Upstream's cases.
        (
            "subnet selector",
            changed(
                "/subnetSelectorTerms",
                json!([{"id": "123e4567-e89b-12d3-a456-426614174111"}]),
            ),
        ),
        (
            "login username default spelled out",
            changed("/login/userPassword/username", json!("root")),
        ),
        // Subnets are not hashed at all.
        (
            "subnet by name",
            changed(
                "/subnetSelectorTerms",
                json!([{"name": "a"}, {"name": "b"}]),
            ),
        ),
        // Zero values are unset.
        (
            "k8s iops 0",
            changed("/blockDeviceMappings/k8s/iops", json!(0)),
        ),
        (
            "k8s throughput 0",
            changed("/blockDeviceMappings/k8s/throughput", json!(0)),
        ),
        ("the same spec again", base()),
    ];
    for (what, spec) in same {
        assert_eq!(class(spec).hash(), base_hash, "{what} must not drift");
    }
    let hash = |spec: Value| class(spec).hash();
    // Lists are sets.
    let two_disks = |first: Value, second: Value| {
        hash(changed(
            "/blockDeviceMappings/users",
            json!([first, second]),
        ))
    };
    let sata = json!({"volumeSize": 100, "volumeType": "SATA"});
    let ssd = json!({"volumeSize": 50, "volumeType": "SSD"});
    assert_eq!(
        two_disks(sata.clone(), ssd.clone()),
        two_disks(ssd, sata),
        "user disks reordered must not drift"
    );
    // Defaults spelled out hash as the defaults unset.
    let containerd = changed("/runtimeConfiguration", json!({"type": "containerd"}));
    assert_eq!(
        hash(containerd.clone()),
        hash(changed("/runtimeConfiguration", Value::Null)),
        "containerd is the runtime unset"
    );
    assert_eq!(
        hash(containerd),
        hash(changed("/runtimeConfiguration", json!({}))),
        "containerd is the runtime type unset"
    );
    // An empty ECS group is none: upstream sends none to CCE.
    assert_eq!(
        hash(changed("/ecsGroupId", json!(""))),
        hash(changed("/ecsGroupId", Value::Null))
    );
    // Empty blocks are the blocks unset.
    let no_kubelet = changed("/kubelet", Value::Null);
    assert_eq!(
        hash(changed("/kubelet", json!({}))),
        hash(no_kubelet.clone())
    );
    assert_eq!(
        hash(changed(
            "/kubelet",
            json!({"kubeReserved": {}, "systemReserved": {}})
        )),
        hash(no_kubelet)
    );
    assert_eq!(
        hash(changed("/blockDeviceMappings/users", json!([]))),
        hash(changed("/blockDeviceMappings/users", Value::Null))
    );
    // A key pair wins over a password (the CRD allows only one; CCE is sent the key).
    assert_eq!(
        hash(changed(
            "/login",
            json!({"sshKey": "kp", "userPassword": {"password": "c"}})
        )),
        hash(ssh("kp"))
    );
}

/// The CRD requires a disk's size and type, so unset ones come only from a class built in
/// code; they are hashed as the 40 GiB SSD CCE would be asked for.
#[test]
fn unset_disk_size_and_type_hash_as_cces_defaults() {
    let explicit = class(base());
    let mut unset = explicit.clone();
    unset.spec.block_device_mappings.users[0].volume_size = 0;
    unset.spec.block_device_mappings.users[0].volume_type = String::new();
    let mut forty_ssd = explicit.clone();
    forty_ssd.spec.block_device_mappings.users[0].volume_size = 40;
    forty_ssd.spec.block_device_mappings.users[0].volume_type = "SSD".into();
    assert_eq!(unset.hash(), forty_ssd.hash());
    assert_ne!(unset.hash(), explicit.hash());
    let mut root_unset_type = explicit.clone();
    root_unset_type.spec.block_device_mappings.root.volume_type = String::new();
    let mut root_ssd = explicit;
    root_ssd.spec.block_device_mappings.root.volume_type = "SSD".into();
    assert_eq!(root_unset_type.hash(), root_ssd.hash());
}

/// Metadata and status are not the spec.
#[test]
fn only_the_spec_is_hashed() {
    let base_hash = class(base()).hash();
    let mut other = class(base());
    other.metadata.name = Some("other".into());
    other.metadata.annotations =
        Some([(CCE_NODE_CLASS_HASH_ANNOTATION.to_string(), "1".to_string())].into());
    other.status = Some(serde_json::from_value(json!({"subnets": [{"id": "s"}]})).unwrap());
    assert_eq!(other.hash(), base_hash);
}

#[test]
fn annotations_are_upstreams() {
    assert_eq!(
        CCE_NODE_CLASS_HASH_ANNOTATION,
        "karpenter.k8s.huawei/ccenodeclass-hash"
    );
    assert_eq!(
        CCE_NODE_CLASS_HASH_VERSION_ANNOTATION,
        "karpenter.k8s.huawei/ccenodeclass-hash-version"
    );
    // Not upstream's `v3`: the numbers differ, so the version must too, or a cluster moved
    // from upstream would see every node drift.
    assert_ne!(CCE_NODE_CLASS_HASH_VERSION, "v3");
}
