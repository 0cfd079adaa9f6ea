//! The ECSNodeClass hash behind static drift. Upstream ships no hash suite for it, so these
//! rows follow its hash options: every spec field but the three selector term lists moves the
//! hash, and order, spelling and unset-versus-zero (where upstream's fields are not pointers)
//! do not. (Upstream's numbers are its Go encoding's; this project's differ, under its own
//! hash version.)

use karpenter_alibaba::ECSNodeClass;
use karpenter_alibaba::ecsnodeclass::{
    ECS_NODE_CLASS_HASH_ANNOTATION, ECS_NODE_CLASS_HASH_VERSION,
    ECS_NODE_CLASS_HASH_VERSION_ANNOTATION,
};
use karpenter_api::validation::table::set;
use serde_json::{Value, json};

fn class(spec: Value) -> ECSNodeClass {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.k8s.alibabacloud/v1alpha1",
        "kind": "ECSNodeClass",
        "metadata": {"name": "default"},
        "spec": spec,
    }))
    .expect("valid ECSNodeClass")
}

/// A class with every hashed field set.
fn base() -> Value {
    json!({
        "vSwitchSelectorTerms": [{"tags": {"karpenter.sh/discovery": "cluster"}}],
        "securityGroupSelectorTerms": [{"id": "sg-1"}],
        "imageSelectorTerms": [{"alias": "ContainerOS"}],
        "vSwitchSelectionPolicy": "cheapest",
        "kubeletConfiguration": {
            "clusterDNS": ["10.0.0.10", "10.0.0.11"],
            "maxPods": 110,
            "podsPerCore": 10,
            "systemReserved": {"cpu": "100m", "memory": "100Mi"},
            "kubeReserved": {"cpu": "200m", "memory": "200Mi"},
            "evictionHard": {"memory.available": "5%"},
            "evictionSoft": {"memory.available": "10%"},
            "evictionSoftGracePeriod": {"memory.available": "1m"},
            "evictionMaxPodGracePeriod": 60,
            "imageGCHighThresholdPercent": 85,
            "imageGCLowThresholdPercent": 80,
            "cpuCFSQuota": true,
        },
        "systemDisk": {
            "categories": ["cloud_essd", "cloud_auto"],
            "volumeSize": "60Gi",
            "size": 40,
            "performanceLevel": "PL1",
        },
        "dataDisks": [{"volumeSize": "100Gi", "device": "/dev/xvdb"}, {"volumeSize": "2Ti"}],
        "dataDiskCategories": ["cloud_essd", "cloud_efficiency"],
        "formatDataDisk": true,
        "tags": {"team": "a", "env": "prod"},
        "resourceGroupId": "rg-abc",
        "userData": "#!/bin/bash\necho hello\n",
        "password": "Passw0rd!",
        "keyPairName": "my-key",
        "passwordInherit": false,
    })
}

fn changed(pointer: &str, value: Value) -> Value {
    set(base(), pointer, value)
}

#[test]
fn the_hash_is_stable() {
    let hash = class(base()).hash();
    assert_eq!(hash, class(base()).hash());
    // Pinned: a change to the encoding changes every class's hash, which would drift every
    // node in every cluster; it needs a new ECS_NODE_CLASS_HASH_VERSION instead.
    assert_eq!(hash, "5750085661848457309");
    assert_eq!(class(json!({})).hash(), "9753107044820362395");
}

#[test]
fn hashed_fields_drift() {
    let base_hash = class(base()).hash();
    let cases = [
        (
            "vSwitchSelectionPolicy",
            changed("/vSwitchSelectionPolicy", json!("balanced")),
        ),
        (
            "kubeletConfiguration.clusterDNS",
            changed("/kubeletConfiguration/clusterDNS", json!(["10.0.0.12"])),
        ),
        (
            "kubeletConfiguration.maxPods",
            changed("/kubeletConfiguration/maxPods", json!(64)),
        ),
        (
            "kubeletConfiguration.podsPerCore",
            changed("/kubeletConfiguration/podsPerCore", json!(4)),
        ),
        (
            "kubeletConfiguration.systemReserved",
            changed("/kubeletConfiguration/systemReserved/cpu", json!("150m")),
        ),
        (
            "kubeletConfiguration.kubeReserved",
            changed("/kubeletConfiguration/kubeReserved/pid", json!("100")),
        ),
        (
            "kubeletConfiguration.evictionHard",
            changed(
                "/kubeletConfiguration/evictionHard/memory.available",
                json!("6%"),
            ),
        ),
        (
            "kubeletConfiguration.evictionSoft",
            changed(
                "/kubeletConfiguration/evictionSoft/memory.available",
                json!("11%"),
            ),
        ),
        (
            "kubeletConfiguration.evictionSoftGracePeriod",
            changed(
                "/kubeletConfiguration/evictionSoftGracePeriod/memory.available",
                json!("2m"),
            ),
        ),
        (
            "kubeletConfiguration.evictionMaxPodGracePeriod",
            changed("/kubeletConfiguration/evictionMaxPodGracePeriod", json!(30)),
        ),
        (
            "kubeletConfiguration.imageGCHighThresholdPercent",
            changed(
                "/kubeletConfiguration/imageGCHighThresholdPercent",
                json!(90),
            ),
        ),
        (
            "kubeletConfiguration.imageGCLowThresholdPercent",
            changed(
                "/kubeletConfiguration/imageGCLowThresholdPercent",
                json!(70),
            ),
        ),
        (
            "kubeletConfiguration.cpuCFSQuota",
            changed("/kubeletConfiguration/cpuCFSQuota", json!(false)),
        ),
        (
            "systemDisk.categories",
            changed("/systemDisk/categories", json!(["cloud_essd"])),
        ),
        (
            "systemDisk.volumeSize",
            changed("/systemDisk/volumeSize", json!("80Gi")),
        ),
        (
            "systemDisk.volumeSize decimal",
            changed("/systemDisk/volumeSize", json!("60G")),
        ),
        ("systemDisk.size", changed("/systemDisk/size", json!(50))),
        (
            "systemDisk.performanceLevel",
            changed("/systemDisk/performanceLevel", json!("PL2")),
        ),
        (
            "dataDisks.volumeSize",
            changed("/dataDisks/1/volumeSize", json!("300Gi")),
        ),
        (
            "dataDisks.device",
            changed("/dataDisks/0/device", json!("/dev/xvdc")),
        ),
        (
            "dataDisks one more",
            changed(
                "/dataDisks",
                json!([{"volumeSize": "100Gi", "device": "/dev/xvdb"}, {"volumeSize": "2Ti"}, {}]),
            ),
        ),
        (
            "dataDiskCategories",
            changed("/dataDiskCategories", json!(["cloud_ssd"])),
        ),
        ("formatDataDisk", changed("/formatDataDisk", json!(false))),
        // Upstream hashes tags: instances are tagged at launch only.
        ("tags value", changed("/tags/team", json!("b"))),
        ("tags added", changed("/tags/owner", json!("me"))),
        ("tags removed", changed("/tags", Value::Null)),
        ("tags empty value", changed("/tags/owner", json!(""))),
        (
            "resourceGroupId",
            changed("/resourceGroupId", json!("rg-def")),
        ),
        ("userData", changed("/userData", json!("#!/bin/bash\n"))),
        ("password", changed("/password", json!("Passw0rd!2"))),
        ("keyPairName", changed("/keyPairName", json!("other-key"))),
    ];
    for (field, spec) in cases {
        assert_ne!(class(spec).hash(), base_hash, "changing {field} must drift");
    }
    // passwordInherit, which the CRD admits only without a password.
    let without_password = changed("/password", Value::Null);
    assert_ne!(
        class(set(
            without_password.clone(),
            "/passwordInherit",
            json!(true)
        ))
        .hash(),
        class(without_password).hash(),
        "changing passwordInherit must drift"
    );
}

/// Upstream keeps its kubelet scalars as pointers, so `false` or `0` set is not the same as
/// unset: turning CFS quota off must replace nodes.
#[test]
fn set_zero_kubelet_values_drift_from_unset() {
    let unset = class(json!({"kubeletConfiguration": {"clusterDNS": ["10.0.0.10"]}})).hash();
    for (field, zero) in [
        ("cpuCFSQuota", json!(false)),
        ("maxPods", json!(0)),
        ("podsPerCore", json!(0)),
        ("evictionMaxPodGracePeriod", json!(0)),
        ("imageGCHighThresholdPercent", json!(0)),
        ("imageGCLowThresholdPercent", json!(0)),
    ] {
        let spec = json!({"kubeletConfiguration": {"clusterDNS": ["10.0.0.10"], field: zero}});
        assert_ne!(class(spec).hash(), unset, "{field} set to zero must drift");
    }
    assert_ne!(
        class(json!({"kubeletConfiguration": {"cpuCFSQuota": false}})).hash(),
        class(json!({"kubeletConfiguration": {"cpuCFSQuota": true}})).hash()
    );
}

#[test]
fn selectors_order_spelling_and_defaults_do_not_drift() {
    let base_hash = class(base()).hash();
    let same = [
        // Upstream tags the selector terms `hash:"ignore"`: drift of what they select is
        // judged against the instance instead.
        (
            "vSwitchSelectorTerms",
            changed("/vSwitchSelectorTerms", json!([{"id": "vsw-2"}])),
        ),
        (
            "securityGroupSelectorTerms",
            changed("/securityGroupSelectorTerms", json!([{"name": "other"}])),
        ),
        (
            "imageSelectorTerms",
            changed("/imageSelectorTerms", json!([{"id": "m-1"}])),
        ),
        // Lists are sets.
        (
            "clusterDNS reordered",
            changed(
                "/kubeletConfiguration/clusterDNS",
                json!(["10.0.0.11", "10.0.0.10"]),
            ),
        ),
        (
            "systemDisk.categories reordered",
            changed(
                "/systemDisk/categories",
                json!(["cloud_auto", "cloud_essd"]),
            ),
        ),
        (
            "dataDisks reordered",
            changed(
                "/dataDisks",
                json!([{"volumeSize": "2Ti"}, {"volumeSize": "100Gi", "device": "/dev/xvdb"}]),
            ),
        ),
        (
            "dataDiskCategories reordered",
            changed(
                "/dataDiskCategories",
                json!(["cloud_efficiency", "cloud_essd"]),
            ),
        ),
        // Sizes and durations by what they mean, as upstream's canonical quantities and
        // time.Duration do.
        (
            "dataDisks.volumeSize 2Ti as 2048Gi",
            changed("/dataDisks/1/volumeSize", json!("2048Gi")),
        ),
        (
            "evictionSoftGracePeriod 60s",
            changed(
                "/kubeletConfiguration/evictionSoftGracePeriod/memory.available",
                json!("60s"),
            ),
        ),
        (
            "evictionSoftGracePeriod 1m0s",
            changed(
                "/kubeletConfiguration/evictionSoftGracePeriod/memory.available",
                json!("1m0s"),
            ),
        ),
        ("the same spec again", base()),
    ];
    for (what, spec) in same {
        assert_eq!(class(spec).hash(), base_hash, "{what} must not drift");
    }
    // A binary size hashes as the same size in a larger binary unit.
    let size = |s: &str| class(changed("/systemDisk/volumeSize", json!(s))).hash();
    assert_eq!(size("1024Gi"), size("1Ti"));
    assert_eq!(size("1000G"), size("1T"));
    assert_ne!(size("1000G"), size("1Ti"), "decimal and binary differ");
    // Defaults spelled out hash as the defaults left unset.
    assert_eq!(
        class(json!({})).hash(),
        class(json!({"vSwitchSelectionPolicy": "cheapest", "formatDataDisk": false, "passwordInherit": false}))
            .hash()
    );
    assert_eq!(
        class(json!({"systemDisk": {}, "dataDisks": [{}]})).hash(),
        class(json!({
            "systemDisk": {"performanceLevel": "PL0",
                "categories": ["cloud", "cloud_efficiency", "cloud_ssd", "cloud_essd", "cloud_auto", "cloud_essd_entry"]},
            "dataDisks": [{"volumeSize": "20Gi"}],
        }))
        .hash()
    );
    // Zero values of upstream's plain (non-pointer) fields hash as unset.
    assert_eq!(
        class(json!({})).hash(),
        class(json!({"dataDisks": [], "dataDiskCategories": [], "tags": {}})).hash()
    );
    // But a system disk block, with its defaults, is not no block.
    assert_ne!(
        class(json!({})).hash(),
        class(json!({"systemDisk": {}})).hash()
    );
}

#[test]
fn annotations_are_upstreams() {
    assert_eq!(
        ECS_NODE_CLASS_HASH_ANNOTATION,
        "karpenter.k8s.alibabacloud/ecsnodeclass-hash"
    );
    assert_eq!(
        ECS_NODE_CLASS_HASH_VERSION_ANNOTATION,
        "karpenter.k8s.alibabacloud/ecsnodeclass-hash-version"
    );
    // Not upstream's `v3`: the numbers differ, so the version must too, or a cluster moved
    // from upstream would see every node drift.
    assert_ne!(ECS_NODE_CLASS_HASH_VERSION, "v3");
}
