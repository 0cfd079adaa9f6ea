//! The ECSNodeClass CRD's every rule as a table, judged by `karpenter-rs validate`'s machinery
//! (schema, CEL, runtime checks). Upstream ships no validation suite for it, so each row is a
//! fact read off its generated CRD — including the quirks that CRD has (`!self.all(...)`
//! mutual exclusions that only fire when every term breaks them, unanchored id patterns, a
//! bare-family alias) — and the kubelet rows follow the suite upstream Karpenter wrote for the
//! same kubelet rules. Then the types' defaults against the CRD's.

use karpenter_alibaba::ECSNodeClass;
use karpenter_api::crd::CORE;
use karpenter_api::validation::table::{Case, Expect::*, failures, set};
use serde_json::{Value, json};

/// A minimal valid class, as upstream's example writes one.
fn ecsnc() -> Value {
    json!({
        "apiVersion": "karpenter.k8s.alibabacloud/v1alpha1",
        "kind": "ECSNodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "vSwitchSelectorTerms": [{"tags": {"karpenter.sh/discovery": "cluster"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "cluster"}}],
            "imageSelectorTerms": [{"alias": "ContainerOS"}],
        },
    })
}

fn with(pointer: &str, value: Value) -> Value {
    set(ecsnc(), pointer, value)
}

fn crds() -> Vec<karpenter_api::crd::Crd> {
    CORE.iter()
        .chain(karpenter_alibaba::CRDS)
        .copied()
        .collect()
}

fn tags(n: usize) -> Value {
    (0..n)
        .map(|i| (format!("key{i}"), json!("value")))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

fn v_switch_cases() -> Vec<Case> {
    let terms = |v: Value| with("/spec/vSwitchSelectorTerms", v);
    let at = "spec.vSwitchSelectorTerms";
    vec![
        ("minimal class", ecsnc(), Valid),
        ("vSwitch by id", terms(json!([{"id": "vsw-bp1abc"}])), Valid),
        (
            "vSwitch by tags and another by id",
            terms(json!([{"tags": {"a": "b"}}, {"id": "vsw-1"}])),
            Valid,
        ),
        (
            "vSwitchSelectorTerms missing",
            with("/spec/vSwitchSelectorTerms", Value::Null),
            Rejected(at, "required"),
        ),
        (
            "vSwitchSelectorTerms empty",
            terms(json!([])),
            Rejected(at, "vSwitchSelectorTerms cannot be empty"),
        ),
        (
            "vSwitch term without tags or id",
            terms(json!([{}])),
            Rejected(at, "expected at least one, got none, ['tags', 'id']"),
        ),
        (
            "vSwitch term with id and tags",
            terms(json!([{"id": "vsw-1", "tags": {"a": "b"}}])),
            Rejected(at, "'id' is mutually exclusive"),
        ),
        // The rule is `!self.all(...)`: one clean term lets a mixed one through.
        (
            "vSwitch id and tags beside a clean term",
            terms(json!([{"id": "vsw-1", "tags": {"a": "b"}}, {"id": "vsw-2"}])),
            Valid,
        ),
        (
            "vSwitch tag with empty key",
            terms(json!([{"tags": {"": "b"}}])),
            Rejected(at, "empty tag keys aren't supported"),
        ),
        // Unlike AWS's, an empty tag value is admitted.
        (
            "vSwitch tag with empty value",
            terms(json!([{"tags": {"a": ""}}])),
            Valid,
        ),
        ("vSwitch 20 tags", terms(json!([{"tags": tags(20)}])), Valid),
        (
            "vSwitch 21 tags",
            terms(json!([{"tags": tags(21)}])),
            Rejected(at, "at most 20 entries"),
        ),
        (
            "vSwitch id not vsw-",
            terms(json!([{"id": "subnet-123"}])),
            Rejected("spec.vSwitchSelectorTerms[0].id", ""),
        ),
        (
            "vSwitch id uppercase",
            terms(json!([{"id": "vsw-ABC"}])),
            Rejected("spec.vSwitchSelectorTerms[0].id", ""),
        ),
        // Upstream's pattern is not anchored.
        (
            "vSwitch id with a prefix",
            terms(json!([{"id": "my-vsw-1"}])),
            Valid,
        ),
        (
            "vSwitch 30 terms",
            terms(json!(vec![json!({"id": "vsw-1"}); 30])),
            Valid,
        ),
        (
            "vSwitch 31 terms",
            terms(json!(vec![json!({"id": "vsw-1"}); 31])),
            Rejected(at, "at most 30 items"),
        ),
        (
            "vSwitch term zoneID unknown",
            terms(json!([{"id": "vsw-1", "zoneID": "cn-hangzhou-h"}])),
            Rejected("spec.vSwitchSelectorTerms[0].zoneID", "unknown field"),
        ),
        (
            "vSwitchSelectionPolicy balanced",
            with("/spec/vSwitchSelectionPolicy", json!("balanced")),
            Valid,
        ),
        (
            "vSwitchSelectionPolicy cheapest",
            with("/spec/vSwitchSelectionPolicy", json!("cheapest")),
            Valid,
        ),
        (
            "vSwitchSelectionPolicy invalid",
            with("/spec/vSwitchSelectionPolicy", json!("random")),
            Rejected("spec.vSwitchSelectionPolicy", ""),
        ),
    ]
}

fn security_group_cases() -> Vec<Case> {
    let terms = |v: Value| with("/spec/securityGroupSelectorTerms", v);
    let at = "spec.securityGroupSelectorTerms";
    vec![
        (
            "security group by id",
            terms(json!([{"id": "sg-bp1abc"}])),
            Valid,
        ),
        (
            "security group by name",
            terms(json!([{"name": "default"}])),
            Valid,
        ),
        (
            "security group by id, name and tags in separate terms",
            terms(json!([{"id": "sg-1"}, {"name": "n"}, {"tags": {"a": "b"}}])),
            Valid,
        ),
        (
            "securityGroupSelectorTerms missing",
            with("/spec/securityGroupSelectorTerms", Value::Null),
            Rejected(at, "required"),
        ),
        (
            "securityGroupSelectorTerms empty",
            terms(json!([])),
            Rejected(at, "securityGroupSelectorTerms cannot be empty"),
        ),
        (
            "security group term empty",
            terms(json!([{}])),
            Rejected(
                at,
                "expected at least one, got none, ['tags', 'id', 'name']",
            ),
        ),
        (
            "security group id and tags",
            terms(json!([{"id": "sg-1", "tags": {"a": "b"}}])),
            Rejected(at, "'id' is mutually exclusive"),
        ),
        (
            "security group id and name",
            terms(json!([{"id": "sg-1", "name": "n"}])),
            Rejected(at, "'id' is mutually exclusive"),
        ),
        (
            "security group name and tags",
            terms(json!([{"name": "n", "tags": {"a": "b"}}])),
            Rejected(at, "'name' is mutually exclusive"),
        ),
        (
            "security group id and name beside a clean term",
            terms(json!([{"id": "sg-1", "name": "n"}, {"id": "sg-2"}])),
            Valid,
        ),
        (
            "security group tag with empty key",
            terms(json!([{"tags": {"": "b"}}])),
            Rejected(at, "empty tag keys aren't supported"),
        ),
        (
            "security group 21 tags",
            terms(json!([{"tags": tags(21)}])),
            Rejected(at, "at most 20 entries"),
        ),
        (
            "security group id not sg-",
            terms(json!([{"id": "vsw-1"}])),
            Rejected("spec.securityGroupSelectorTerms[0].id", ""),
        ),
        (
            "security group 31 terms",
            terms(json!(vec![json!({"id": "sg-1"}); 31])),
            Rejected(at, "at most 30 items"),
        ),
    ]
}

fn image_cases() -> Vec<Case> {
    let terms = |v: Value| with("/spec/imageSelectorTerms", v);
    let at = "spec.imageSelectorTerms";
    vec![
        (
            "image alias AlibabaCloudLinux3",
            terms(json!([{"alias": "AlibabaCloudLinux3"}])),
            Valid,
        ),
        (
            "image alias ContainerOS",
            terms(json!([{"alias": "ContainerOS"}])),
            Valid,
        ),
        // Upstream's CRD admits a bare family only; a version is refused.
        (
            "image alias with a version",
            terms(json!([{"alias": "ContainerOS@latest"}])),
            Rejected(
                "spec.imageSelectorTerms[0].alias",
                "'alias' is improperly formatted, must match the format 'family'",
            ),
        ),
        (
            "image alias unknown family",
            terms(json!([{"alias": "Ubuntu"}])),
            Rejected(
                "spec.imageSelectorTerms[0].alias",
                "family is not supported, must be one of the following: 'AlibabaCloudLinux3,ContainerOS'",
            ),
        ),
        (
            "image alias family in the wrong case",
            terms(json!([{"alias": "containeros"}])),
            Rejected(
                "spec.imageSelectorTerms[0].alias",
                "family is not supported",
            ),
        ),
        (
            "image alias longer than 30",
            terms(json!([{"alias": "A".repeat(31)}])),
            Rejected("spec.imageSelectorTerms[0].alias", ""),
        ),
        ("image by id", terms(json!([{"id": "m-bp1abc"}])), Valid),
        (
            "images by several ids",
            terms(json!([{"id": "m-1"}, {"id": "aliyun_3_x64_20G_alibase_20240819.vhd"}])),
            Valid,
        ),
        (
            "imageSelectorTerms missing",
            with("/spec/imageSelectorTerms", Value::Null),
            Rejected(at, "required"),
        ),
        (
            "imageSelectorTerms empty",
            terms(json!([])),
            Rejected(at, "at least 1 item"),
        ),
        (
            "image term empty",
            terms(json!([{}])),
            Rejected(at, "expected at least one, got none, ['id', 'alias']"),
        ),
        (
            "image id and alias",
            terms(json!([{"id": "m-1", "alias": "ContainerOS"}])),
            Rejected(at, "'id' is mutually exclusive"),
        ),
        // `exists`, not `all`: one mixed term is enough here.
        (
            "image id and alias beside an id",
            terms(json!([{"id": "m-1", "alias": "ContainerOS"}, {"id": "m-2"}])),
            Rejected(at, "'alias' is mutually exclusive"),
        ),
        (
            "image alias with another term",
            terms(json!([{"alias": "ContainerOS"}, {"id": "m-2"}])),
            Rejected(
                at,
                "'alias' is mutually exclusive, cannot be set with a combination of other imageSelectorTerms",
            ),
        ),
        (
            "image 31 terms",
            terms(json!(vec![json!({"id": "m-1"}); 31])),
            Rejected(at, "at most 30 items"),
        ),
        (
            "image term tags unknown",
            terms(json!([{"tags": {"a": "b"}}])),
            Rejected("spec.imageSelectorTerms[0].tags", "unknown field"),
        ),
    ]
}

fn kubelet_cases() -> Vec<Case> {
    let kubelet = |v: Value| with("/spec/kubeletConfiguration", v);
    let at = "spec.kubeletConfiguration";
    vec![
        (
            "kubelet all fields",
            kubelet(json!({
                "clusterDNS": ["10.0.0.10"], "maxPods": 110, "podsPerCore": 10,
                "systemReserved": {"cpu": "100m", "memory": "100Mi", "ephemeral-storage": "1Gi", "pid": "100"},
                "kubeReserved": {"cpu": "100m", "memory": "100Mi", "ephemeral-storage": "1Gi", "pid": "100"},
                "evictionHard": {"memory.available": "5%", "nodefs.available": "10%", "nodefs.inodesFree": "5%",
                    "imagefs.available": "15%", "imagefs.inodesFree": "5%", "pid.available": "10%"},
                "evictionSoft": {"memory.available": "10%", "nodefs.available": "15%"},
                "evictionSoftGracePeriod": {"memory.available": "1m30s", "nodefs.available": "2m"},
                "evictionMaxPodGracePeriod": 60,
                "imageGCHighThresholdPercent": 85, "imageGCLowThresholdPercent": 80,
                "cpuCFSQuota": false,
            })),
            Valid,
        ),
        ("kubelet empty", kubelet(json!({})), Valid),
        ("kubelet maxPods 0", kubelet(json!({"maxPods": 0})), Valid),
        (
            "kubelet maxPods negative",
            kubelet(json!({"maxPods": -1})),
            Rejected("spec.kubeletConfiguration.maxPods", ""),
        ),
        (
            "kubelet podsPerCore negative",
            kubelet(json!({"podsPerCore": -1})),
            Rejected("spec.kubeletConfiguration.podsPerCore", ""),
        ),
        (
            "kubelet maxPods not an integer",
            kubelet(json!({"maxPods": "110"})),
            Rejected("spec.kubeletConfiguration.maxPods", ""),
        ),
        (
            "kubelet clusterDNS not a list",
            kubelet(json!({"clusterDNS": "10.0.0.10"})),
            Rejected("spec.kubeletConfiguration.clusterDNS", ""),
        ),
        (
            "kubelet systemReserved invalid key",
            kubelet(json!({"systemReserved": {"nvidia.com/gpu": "1"}})),
            Rejected(
                at,
                "valid keys for systemReserved are ['cpu','memory','ephemeral-storage','pid']",
            ),
        ),
        (
            "kubelet systemReserved negative",
            kubelet(json!({"systemReserved": {"cpu": "-1"}})),
            Rejected(
                at,
                "systemReserved value cannot be a negative resource quantity",
            ),
        ),
        (
            "kubelet kubeReserved invalid key",
            kubelet(json!({"kubeReserved": {"gpu": "1"}})),
            Rejected(
                at,
                "valid keys for kubeReserved are ['cpu','memory','ephemeral-storage','pid']",
            ),
        ),
        (
            "kubelet kubeReserved negative",
            kubelet(json!({"kubeReserved": {"memory": "-10Mi"}})),
            Rejected(
                at,
                "kubeReserved value cannot be a negative resource quantity",
            ),
        ),
        (
            "kubelet evictionHard invalid key",
            kubelet(json!({"evictionHard": {"memory": "5%"}})),
            Rejected(at, "valid keys for evictionHard are ['memory.available',"),
        ),
        (
            "kubelet evictionSoft invalid key",
            kubelet(
                json!({"evictionSoft": {"memory": "5%"}, "evictionSoftGracePeriod": {"memory": "1m"}}),
            ),
            Rejected(at, "valid keys for evictionSoft are"),
        ),
        (
            "kubelet evictionSoftGracePeriod invalid key",
            kubelet(
                json!({"evictionSoft": {"memory": "5%"}, "evictionSoftGracePeriod": {"memory": "1m"}}),
            ),
            Rejected(at, "valid keys for evictionSoftGracePeriod are"),
        ),
        (
            "kubelet evictionSoft with a matching grace period",
            kubelet(
                json!({"evictionSoft": {"memory.available": "5%"}, "evictionSoftGracePeriod": {"memory.available": "1m"}}),
            ),
            Valid,
        ),
        (
            "kubelet evictionSoft without its grace period",
            kubelet(
                json!({"evictionSoft": {"memory.available": "5%"}, "evictionSoftGracePeriod": {"nodefs.available": "1m"}}),
            ),
            Rejected(
                at,
                "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod",
            ),
        ),
        (
            "kubelet evictionSoftGracePeriod without its threshold",
            kubelet(
                json!({"evictionSoft": {"memory.available": "5%"}, "evictionSoftGracePeriod": {"memory.available": "1m", "nodefs.available": "1m"}}),
            ),
            Rejected(
                at,
                "evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft",
            ),
        ),
        // The rule reads the other map without `has`, so leaving it out is an error too.
        (
            "kubelet evictionSoft alone",
            kubelet(json!({"evictionSoft": {"memory.available": "5%"}})),
            Rejected(at, "evictionSoftGracePeriod"),
        ),
        (
            "kubelet evictionSoftGracePeriod alone",
            kubelet(json!({"evictionSoftGracePeriod": {"memory.available": "1m"}})),
            Rejected(at, "evictionSoft"),
        ),
        (
            "kubelet evictionSoftGracePeriod not a duration",
            kubelet(
                json!({"evictionSoft": {"memory.available": "5%"}, "evictionSoftGracePeriod": {"memory.available": "a minute"}}),
            ),
            NotReady(
                "spec.kubeletConfiguration.evictionSoftGracePeriod.memory.available",
                "",
            ),
        ),
        (
            "kubelet gc high above low",
            kubelet(json!({"imageGCHighThresholdPercent": 50, "imageGCLowThresholdPercent": 49})),
            Valid,
        ),
        (
            "kubelet gc high equal to low",
            kubelet(json!({"imageGCHighThresholdPercent": 50, "imageGCLowThresholdPercent": 50})),
            Rejected(
                at,
                "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",
            ),
        ),
        (
            "kubelet gc high below low",
            kubelet(json!({"imageGCHighThresholdPercent": 10, "imageGCLowThresholdPercent": 60})),
            Rejected(
                at,
                "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",
            ),
        ),
        (
            "kubelet gc high alone",
            kubelet(json!({"imageGCHighThresholdPercent": 0})),
            Valid,
        ),
        (
            "kubelet gc high over 100",
            kubelet(json!({"imageGCHighThresholdPercent": 101})),
            Rejected("spec.kubeletConfiguration.imageGCHighThresholdPercent", ""),
        ),
        (
            "kubelet gc low negative",
            kubelet(json!({"imageGCLowThresholdPercent": -1})),
            Rejected("spec.kubeletConfiguration.imageGCLowThresholdPercent", ""),
        ),
        (
            "kubelet field upstream lacks",
            kubelet(json!({"cpuManagerPolicy": "static"})),
            Rejected(
                "spec.kubeletConfiguration.cpuManagerPolicy",
                "unknown field",
            ),
        ),
        (
            "kubelet under the AWS name",
            with("/spec/kubelet", json!({"maxPods": 10})),
            Rejected("spec.kubelet", "unknown field"),
        ),
    ]
}

fn disk_cases() -> Vec<Case> {
    let system = |v: Value| with("/spec/systemDisk", v);
    let size = |s: &str| system(json!({"volumeSize": s}));
    let data = |v: Value| with("/spec/dataDisks", v);
    let mut cases = vec![
        (
            "systemDisk all fields",
            system(
                json!({"categories": ["cloud_essd", "cloud_auto"], "volumeSize": "60Gi", "size": 40, "performanceLevel": "PL1"}),
            ),
            Valid,
        ),
        ("systemDisk empty", system(json!({})), Valid),
        // The Go marker's enum never reached upstream's CRD.
        (
            "systemDisk unknown category",
            system(json!({"categories": ["cloud_x"]})),
            Valid,
        ),
        (
            "systemDisk performanceLevel PL3",
            system(json!({"performanceLevel": "PL3"})),
            Valid,
        ),
        (
            "systemDisk performanceLevel PL4",
            system(json!({"performanceLevel": "PL4"})),
            Rejected("spec.systemDisk.performanceLevel", ""),
        ),
        ("systemDisk size 20", system(json!({"size": 20})), Valid),
        (
            "systemDisk size 19",
            system(json!({"size": 19})),
            Rejected("spec.systemDisk.size", "size invalid"),
        ),
        // Only the lower bound is a rule; the per-category maximum is ECS's to refuse.
        ("systemDisk size 4096", system(json!({"size": 4096})), Valid),
        (
            "systemDisk unknown field",
            system(json!({"iops": 3000})),
            Rejected("spec.systemDisk.iops", "unknown field"),
        ),
        (
            "dataDisks with device",
            data(json!([{"volumeSize": "100Gi", "device": "/dev/xvdb"}, {}])),
            Valid,
        ),
        (
            "dataDisks bad size",
            data(json!([{"volumeSize": "100Mi"}])),
            Rejected("spec.dataDisks[0].volumeSize", ""),
        ),
        (
            "dataDisks not a list",
            data(json!({"volumeSize": "100Gi"})),
            Rejected("spec.dataDisks", ""),
        ),
        (
            "dataDiskCategories",
            with(
                "/spec/dataDiskCategories",
                json!(["cloud_essd", "cloud_efficiency"]),
            ),
            Valid,
        ),
        (
            "formatDataDisk",
            with("/spec/formatDataDisk", json!(true)),
            Valid,
        ),
        (
            "formatDataDisk not a boolean",
            with("/spec/formatDataDisk", json!("true")),
            Rejected("spec.formatDataDisk", ""),
        ),
    ];
    for valid in [
        "1Gi", "20Gi", "9999Gi", "10000Gi", "49999Gi", "58999Gi", "59000Gi", "1G", "64000G",
        "63999G", "1Ti", "9Ti", "58Ti", "1T", "64T", "59T",
    ] {
        cases.push(("systemDisk volumeSize valid", size(valid), Valid));
    }
    for invalid in [
        "0Gi", "59001Gi", "60000Gi", "64001G", "65000G", "0Ti", "59Ti", "65T", "100T", "1.5Gi",
        "60Mi", "60", "60gi", "-1Gi", "",
    ] {
        cases.push((
            "systemDisk volumeSize invalid",
            size(invalid),
            Rejected("spec.systemDisk.volumeSize", ""),
        ));
    }
    cases
}

fn tag_cases() -> Vec<Case> {
    let tags = |v: Value| with("/spec/tags", v);
    let mut cases = vec![
        (
            "tags",
            tags(json!({"team": "a", "karpenter.sh/discovery": "cluster", "empty": ""})),
            Valid,
        ),
        (
            "tags empty key",
            tags(json!({"": "a"})),
            Rejected("spec.tags", "empty tag keys aren't supported"),
        ),
        (
            "tags not strings",
            tags(json!({"a": 1})),
            Rejected("spec.tags[a]", "must be of type string"),
        ),
        // Only the exact restricted keys; near misses pass.
        (
            "tags near misses",
            tags(
                json!({"karpenter.sh/nodepool-name": "a", "ecs:ecs-cluster-id": "b", "karpenter.k8s.alibabacloud/other": "c"}),
            ),
            Valid,
        ),
    ];
    for (key, restricted) in [
        ("ecs:ecs-cluster-name", "ecs:ecs-cluster-name"),
        ("kubernetes.io/cluster/my-cluster", "kubernetes.io/cluster/"),
        ("kubernetes.io/cluster", "kubernetes.io/cluster/"),
        ("karpenter.sh/nodepool", "karpenter.sh/nodepool"),
        ("karpenter.sh/nodeclaim", "karpenter.sh/nodeclaim"),
        (
            "karpenter.k8s.alibabacloud/ecsnodeclass",
            "karpenter.k8s.alibabacloud/ecsnodeclass",
        ),
    ] {
        let message: &'static str = Box::leak(
            format!("tag contains a restricted tag matching {restricted}").into_boxed_str(),
        );
        cases.push((
            "tags restricted key",
            with("/spec/tags", json!({ key: "x" })),
            Rejected("spec.tags", message),
        ));
    }
    cases
}

fn login_and_placement_cases() -> Vec<Case> {
    vec![
        (
            "resourceGroupId",
            with("/spec/resourceGroupId", json!("rg-acfm2abc")),
            Valid,
        ),
        (
            "resourceGroupId invalid",
            with("/spec/resourceGroupId", json!("default")),
            Rejected("spec.resourceGroupId", ""),
        ),
        // Unanchored, as upstream's.
        (
            "resourceGroupId with a prefix",
            with("/spec/resourceGroupId", json!("my-rg-1")),
            Valid,
        ),
        (
            "userData",
            with("/spec/userData", json!("#!/bin/bash\necho hello\n")),
            Valid,
        ),
        (
            "password",
            with("/spec/password", json!("Passw0rd!@#$%^&*()")),
            Valid,
        ),
        (
            "password with symbols ECS allows",
            with("/spec/password", json!("Aa1~!@#$%^&*()_+-=[]{}|")),
            Valid,
        ),
        (
            "password with the other symbols ECS allows",
            with("/spec/password", json!(r#"Aa1\:;"'<>,.?/"#)),
            Valid,
        ),
        (
            "password too short",
            with("/spec/password", json!("Pass1!")),
            Rejected("spec.password", ""),
        ),
        (
            "password too long",
            with("/spec/password", json!("P".repeat(31))),
            Rejected("spec.password", ""),
        ),
        (
            "password with a space",
            with("/spec/password", json!("Pass word1")),
            Rejected("spec.password", ""),
        ),
        (
            "password with passwordInherit",
            set(
                with("/spec/password", json!("Passw0rd!")),
                "/spec/passwordInherit",
                json!(true),
            ),
            Rejected(
                "spec",
                "password cannot be set when passwordInherit is true",
            ),
        ),
        (
            "password with passwordInherit false",
            set(
                with("/spec/password", json!("Passw0rd!")),
                "/spec/passwordInherit",
                json!(false),
            ),
            Valid,
        ),
        (
            "passwordInherit alone",
            with("/spec/passwordInherit", json!(true)),
            Valid,
        ),
        (
            "keyPairName",
            with("/spec/keyPairName", json!("my_key-pair.1:a")),
            Valid,
        ),
        (
            "keyPairName starting with a digit",
            with("/spec/keyPairName", json!("1key")),
            Rejected("spec.keyPairName", ""),
        ),
        (
            "keyPairName one character",
            with("/spec/keyPairName", json!("k")),
            Rejected("spec.keyPairName", ""),
        ),
        (
            "keyPairName 128 characters",
            with("/spec/keyPairName", json!("k".repeat(128))),
            Valid,
        ),
        (
            "keyPairName 129 characters",
            with("/spec/keyPairName", json!("k".repeat(129))),
            Rejected("spec.keyPairName", ""),
        ),
        (
            "unknown spec field",
            with("/spec/instanceTypes", json!(["ecs.g7.large"])),
            Rejected("spec.instanceTypes", "unknown field"),
        ),
    ]
}

fn status_cases() -> Vec<Case> {
    let condition = json!({"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"});
    vec![
        (
            "status",
            with(
                "/status",
                json!({
                    "vSwitches": [{"id": "vsw-1", "zoneID": "cn-hangzhou-h"}],
                    "securityGroups": [{"id": "sg-1", "name": "default"}, {"id": "sg-2"}],
                    "images": [{"id": "m-1", "name": "ContainerOS 3.3",
                        "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}],
                    "conditions": [condition.clone(), set(condition.clone(), "/type", json!("VSwitchesReady"))],
                }),
            ),
            Valid,
        ),
        (
            "status vSwitch without zoneID",
            with("/status/vSwitches", json!([{"id": "vsw-1"}])),
            Rejected("status.vSwitches[0].zoneID", ""),
        ),
        (
            "status security group without id",
            with("/status/securityGroups", json!([{"name": "n"}])),
            Rejected("status.securityGroups[0].id", ""),
        ),
        (
            "status image without requirements",
            with("/status/images", json!([{"id": "m-1"}])),
            Rejected("status.images[0].requirements", ""),
        ),
        (
            "status condition without reason",
            with(
                "/status/conditions",
                json!([set(condition.clone(), "/reason", Value::Null)]),
            ),
            Rejected("status.conditions[0].reason", ""),
        ),
        (
            "status condition with an unknown status",
            with(
                "/status/conditions",
                json!([set(condition, "/status", json!("Maybe"))]),
            ),
            Rejected("status.conditions[0].status", ""),
        ),
    ]
}

#[test]
fn ecsnodeclass_rules() {
    let cases: Vec<Case> = [
        v_switch_cases(),
        security_group_cases(),
        image_cases(),
        kubelet_cases(),
        disk_cases(),
        tag_cases(),
        login_and_placement_cases(),
        status_cases(),
    ]
    .into_iter()
    .flatten()
    .collect();
    let failures = failures(&crds(), cases);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn ecsnodeclasses_are_unknown_without_the_provider() {
    assert!(karpenter_api::validation::validate_object(&CORE, &ecsnc()).is_none());
}

#[test]
fn other_versions_are_not_served() {
    let v1 = set(
        ecsnc(),
        "/apiVersion",
        json!("karpenter.k8s.alibabacloud/v1"),
    );
    assert!(karpenter_api::validation::validate_object(&crds(), &v1).is_none());
}

/// The Rust types' serde defaults must be the CRD's defaults: an object read by the provider
/// must mean what the API server stored.
#[test]
fn type_defaults_match_crd_defaults() {
    let schema = karpenter_alibaba::ecsnodeclass::CRD.schema();
    for object in [
        ecsnc(),
        with("/spec/systemDisk", json!({})),
        with("/spec/systemDisk", json!({"categories": [], "size": 40})),
        with("/spec/dataDisks", json!([{}, {"device": "/dev/xvdb"}])),
        with("/spec/kubeletConfiguration", json!({})),
        with(
            "/spec/kubeletConfiguration",
            json!({"cpuCFSQuota": false, "maxPods": 0}),
        ),
        with("/spec/passwordInherit", json!(true)),
    ] {
        let defaulted = kube_cel::apply_defaults(&schema, &object);
        let typed: ECSNodeClass = serde_json::from_value(object.clone()).unwrap();
        assert_eq!(
            typed,
            serde_json::from_value::<ECSNodeClass>(defaulted.clone()).unwrap(),
            "{object}"
        );
        // And serialized, the type writes out what the API server would have stored.
        let written = serde_json::to_value(&typed).unwrap();
        assert_eq!(written["spec"], defaulted["spec"], "{object}");
    }
    let defaulted = kube_cel::apply_defaults(
        &schema,
        &set(
            with("/spec/systemDisk", json!({})),
            "/spec/dataDisks",
            json!([{}]),
        ),
    );
    let spec = &defaulted["spec"];
    assert_eq!(spec["vSwitchSelectionPolicy"], "cheapest");
    assert_eq!(spec["formatDataDisk"], false);
    assert_eq!(spec["passwordInherit"], false);
    assert_eq!(
        spec["systemDisk"],
        json!({"categories": ["cloud", "cloud_efficiency", "cloud_ssd", "cloud_essd", "cloud_auto", "cloud_essd_entry"],
            "performanceLevel": "PL0"})
    );
    assert_eq!(spec["dataDisks"], json!([{"volumeSize": "20Gi"}]));
}

/// The generated CRD's shape as upstream's: names, scope, one stored version with a status
/// subresource, and no printer columns.
#[test]
fn the_crd_is_named_as_upstreams() {
    let crd = karpenter_alibaba::ecsnodeclass::CRD;
    assert_eq!(
        crd.file_name(),
        "karpenter.k8s.alibabacloud_ecsnodeclasses.yaml"
    );
    let definition = crd.definition();
    assert_eq!(
        definition["metadata"]["name"],
        "ecsnodeclasses.karpenter.k8s.alibabacloud"
    );
    let spec = &definition["spec"];
    assert_eq!(spec["scope"], "Cluster");
    assert_eq!(
        spec["names"],
        json!({"categories": ["karpenter"], "kind": "ECSNodeClass", "listKind": "ECSNodeClassList",
            "plural": "ecsnodeclasses", "shortNames": ["ecsnc", "ecsncs"], "singular": "ecsnodeclass"})
    );
    let versions = spec["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 1);
    assert_eq!(versions[0]["name"], "v1alpha1");
    assert_eq!(versions[0]["served"], true);
    assert_eq!(versions[0]["storage"], true);
    assert_eq!(versions[0]["subresources"], json!({"status": {}}));
    assert!(versions[0].get("additionalPrinterColumns").is_none());
    let root = &versions[0]["schema"]["openAPIV3Schema"];
    assert_eq!(
        root["properties"]["spec"]["required"],
        json!([
            "imageSelectorTerms",
            "securityGroupSelectorTerms",
            "vSwitchSelectorTerms"
        ])
    );
    assert!(root.get("required").is_none(), "spec itself is optional");
}
