//! The CCENodeClass CRD's every rule as a table, judged by `karpenter-rs validate`'s machinery
//! (schema, CEL, runtime checks). Each row is a fact read off upstream's generated CRD, or one
//! of upstream's own create-time cases (`ccenodeclass_test.go`, `ValidateKubeletForCreateNode`):
//! what the CRD admits but upstream refuses when it creates a node is a runtime check here
//! (`NotReady`). Then the types' defaults against the CRD's (it has none), and the CRD's names.

use karpenter_api::crd::{CORE, Crd};
use karpenter_api::validation::table::{Case, Expect::*, failures, set};
use karpenter_huawei::CCENodeClass;
use karpenter_huawei::ccenodeclass::CRD;
use serde_json::{Value, json};

const SUBNET_ID: &str = "123e4567-e89b-12d3-a456-426614174000";

/// A minimal valid class: upstream's hash controller test's.
fn ccenc() -> Value {
    json!({
        "apiVersion": "karpenter.k8s.huawei/v1alpha1",
        "kind": "CCENodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "subnetSelectorTerms": [{"id": SUBNET_ID}],
            "imsSelector": {"imsFamily": "Huawei Cloud EulerOS 2.0"},
            "blockDeviceMappings": {"root": {"volumeSize": 120, "volumeType": "SAS"}},
            "login": {"userPassword": {"password": "ciphertext"}},
        },
    })
}

fn with(pointer: &str, value: Value) -> Value {
    set(ccenc(), pointer, value)
}

fn crds() -> Vec<Crd> {
    CORE.iter().copied().chain([CRD]).collect()
}

fn subnet_cases() -> Vec<Case> {
    let terms = |v: Value| with("/spec/subnetSelectorTerms", v);
    let at = "spec.subnetSelectorTerms";
    vec![
        ("minimal class", ccenc(), Valid),
        (
            "subnet by name",
            terms(json!([{"name": "subnet-a"}])),
            Valid,
        ),
        (
            "subnet by id and name in one term",
            terms(json!([{"id": SUBNET_ID, "name": "subnet-a"}])),
            Valid,
        ),
        (
            "subnet id upper case",
            terms(json!([{"id": "123E4567-E89B-12D3-A456-426614174000"}])),
            Valid,
        ),
        (
            "subnetSelectorTerms missing",
            with("/spec/subnetSelectorTerms", Value::Null),
            Rejected(at, "required"),
        ),
        (
            "subnetSelectorTerms empty",
            terms(json!([])),
            Rejected(at, "subnetSelectorTerms cannot be empty"),
        ),
        (
            "subnet term without id or name",
            terms(json!([{}])),
            Rejected(at, "expected at least one, got none, ['name', 'id']"),
        ),
        // `self.all`: one empty term among good ones fails the list.
        (
            "an empty subnet term beside a good one",
            terms(json!([{"id": SUBNET_ID}, {}])),
            Rejected(at, "expected at least one, got none, ['name', 'id']"),
        ),
        (
            "subnet id not a UUID",
            terms(json!([{"id": "subnet-123"}])),
            Rejected("spec.subnetSelectorTerms[0].id", ""),
        ),
        // The pattern is anchored both ends.
        (
            "subnet id with a prefix",
            terms(json!([{"id": format!("x{SUBNET_ID}")}])),
            Rejected("spec.subnetSelectorTerms[0].id", ""),
        ),
        (
            "subnet id with a suffix",
            terms(json!([{"id": format!("{SUBNET_ID}0")}])),
            Rejected("spec.subnetSelectorTerms[0].id", ""),
        ),
        (
            "subnet id not hex",
            terms(json!([{"id": "g23e4567-e89b-12d3-a456-426614174000"}])),
            Rejected("spec.subnetSelectorTerms[0].id", ""),
        ),
        (
            "subnet id empty",
            terms(json!([{"id": ""}])),
            Rejected("spec.subnetSelectorTerms[0].id", ""),
        ),
        (
            "subnet name empty",
            terms(json!([{"name": ""}])),
            Rejected("spec.subnetSelectorTerms[0].name", "may not be empty"),
        ),
        (
            "30 subnet terms",
            terms(json!(vec![json!({"id": SUBNET_ID}); 30])),
            Valid,
        ),
        (
            "31 subnet terms",
            terms(json!(vec![json!({"id": SUBNET_ID}); 31])),
            Rejected(at, "at most 30 items"),
        ),
        (
            "subnet by tags, which upstream has not",
            terms(json!([{"tags": {"a": "b"}}])),
            Rejected("spec.subnetSelectorTerms[0].tags", "unknown field"),
        ),
    ]
}

fn ims_cases() -> Vec<Case> {
    vec![
        (
            "another OS family",
            with("/spec/imsSelector/imsFamily", json!("Ubuntu 22.04")),
            Valid,
        ),
        // Upstream hands the family to CCE as written.
        (
            "OS family with spaces around it",
            with(
                "/spec/imsSelector/imsFamily",
                json!(" Huawei Cloud EulerOS 2.0 "),
            ),
            Valid,
        ),
        (
            "imsSelector missing",
            with("/spec/imsSelector", Value::Null),
            Rejected("spec.imsSelector", "required"),
        ),
        (
            "imsFamily missing",
            with("/spec/imsSelector", json!({})),
            Rejected("spec.imsSelector.imsFamily", "required"),
        ),
        (
            "imsFamily empty",
            with("/spec/imsSelector/imsFamily", json!("")),
            Rejected("spec.imsSelector.imsFamily", "may not be empty"),
        ),
        (
            "image id, which upstream has not",
            with("/spec/imsSelector/imsId", json!("img-1")),
            Rejected("spec.imsSelector.imsId", "unknown field"),
        ),
    ]
}

fn disk_cases() -> Vec<Case> {
    let disks = |v: Value| with("/spec/blockDeviceMappings", v);
    let root = |size: i64| json!({"volumeSize": size, "volumeType": "SSD"});
    let at = "spec.blockDeviceMappings";
    vec![
        (
            "every disk",
            disks(json!({
                "root": {"volumeSize": 120, "volumeType": "GPSSD2", "iops": 3000, "throughput": 125},
                "k8s": {"volumeSize": 120, "volumeType": "ESSD2", "iops": 5000},
                "users": [{"volumeSize": 100, "volumeType": "SAS"}, {"volumeSize": 100, "volumeType": "SATA"}],
            })),
            Valid,
        ),
        // Upstream's create-time minimums, each exactly.
        (
            "upstream: every disk at its minimum",
            disks(json!({"root": root(40), "k8s": root(20), "users": [root(10)]})),
            Valid,
        ),
        (
            "upstream: root below 40",
            disks(json!({"root": root(39)})),
            Rejected(
                at,
                "blockDeviceMappings.root.volumeSize must be at least 40Gi",
            ),
        ),
        (
            "upstream: k8s below 20",
            disks(json!({"root": root(40), "k8s": root(19)})),
            Rejected(
                at,
                "blockDeviceMappings.k8s.volumeSize must be at least 20Gi when specified",
            ),
        ),
        // The disk's own minimum (10) is checked before any rule runs.
        (
            "upstream: user disk below 10",
            disks(json!({"root": root(40), "users": [root(100), root(9)]})),
            Rejected(
                "spec.blockDeviceMappings.users[1].volumeSize",
                "greater than or equal to 10",
            ),
        ),
        (
            "root below every disk's minimum",
            disks(json!({"root": root(9)})),
            Rejected(
                "spec.blockDeviceMappings.root.volumeSize",
                "greater than or equal to 10",
            ),
        ),
        (
            "k8s below every disk's minimum",
            disks(json!({"root": root(40), "k8s": root(5)})),
            Rejected(
                "spec.blockDeviceMappings.k8s.volumeSize",
                "greater than or equal to 10",
            ),
        ),
        (
            "users empty",
            disks(json!({"root": root(40), "users": []})),
            Valid,
        ),
        // No maximum in the CRD: CCE refuses what the disk type cannot be.
        (
            "a very large root",
            disks(json!({"root": root(32768)})),
            Valid,
        ),
        (
            "volumeSize beyond 32 bits",
            disks(json!({"root": root(1 << 31)})),
            Rejected("spec.blockDeviceMappings.root.volumeSize", "32-bit integer"),
        ),
        (
            "volumeSize not an integer",
            disks(json!({"root": {"volumeSize": 40.5, "volumeType": "SSD"}})),
            Rejected("spec.blockDeviceMappings.root.volumeSize", ""),
        ),
        (
            "volumeSize as a quantity",
            disks(json!({"root": {"volumeSize": "40Gi", "volumeType": "SSD"}})),
            Rejected("spec.blockDeviceMappings.root.volumeSize", ""),
        ),
        (
            "blockDeviceMappings missing",
            with("/spec/blockDeviceMappings", Value::Null),
            Rejected(at, "required"),
        ),
        (
            "root missing",
            disks(json!({"k8s": root(100)})),
            Rejected("spec.blockDeviceMappings.root", "required"),
        ),
        (
            "root size missing",
            disks(json!({"root": {"volumeType": "SSD"}})),
            Rejected("spec.blockDeviceMappings.root.volumeSize", "required"),
        ),
        (
            "root type missing",
            disks(json!({"root": {"volumeSize": 40}})),
            Rejected("spec.blockDeviceMappings.root.volumeType", "required"),
        ),
        (
            "root type empty",
            disks(json!({"root": {"volumeSize": 40, "volumeType": ""}})),
            Rejected(
                "spec.blockDeviceMappings.root.volumeType",
                "may not be empty",
            ),
        ),
        (
            "user disk type missing",
            disks(json!({"root": root(40), "users": [{"volumeSize": 40}]})),
            Rejected("spec.blockDeviceMappings.users[0].volumeType", "required"),
        ),
        // Any type: EVS's list is CCE's to enforce.
        (
            "an unknown disk type",
            disks(json!({"root": {"volumeSize": 40, "volumeType": "NVME"}})),
            Valid,
        ),
        (
            "iops not an integer",
            disks(json!({"root": {"volumeSize": 40, "volumeType": "ESSD2", "iops": "3000"}})),
            Rejected("spec.blockDeviceMappings.root.iops", ""),
        ),
        (
            "a disk field upstream lacks",
            disks(json!({"root": {"volumeSize": 40, "volumeType": "SSD", "encrypted": true}})),
            Rejected("spec.blockDeviceMappings.root.encrypted", "unknown field"),
        ),
    ]
}

fn runtime_and_group_cases() -> Vec<Case> {
    let runtime = |v: Value| with("/spec/runtimeConfiguration", v);
    vec![
        ("runtime docker", runtime(json!({"type": "docker"})), Valid),
        (
            "runtime containerd",
            runtime(json!({"type": "containerd"})),
            Valid,
        ),
        ("runtime unset", runtime(json!({})), Valid),
        (
            "runtime cri-o",
            runtime(json!({"type": "cri-o"})),
            Rejected("spec.runtimeConfiguration.type", ""),
        ),
        (
            "runtime in upper case",
            runtime(json!({"type": "Containerd"})),
            Rejected("spec.runtimeConfiguration.type", ""),
        ),
        (
            "ecsGroupId",
            with(
                "/spec/ecsGroupId",
                json!("46ebaf04-ca42-48ca-8057-0b96e6126e1b"),
            ),
            Valid,
        ),
        (
            "ecsGroupId not a string",
            with("/spec/ecsGroupId", json!(1)),
            Rejected("spec.ecsGroupId", ""),
        ),
        (
            "ecsGroupID spelled as the Go field",
            with("/spec/ecsGroupID", json!("g")),
            Rejected("spec.ecsGroupID", "unknown field"),
        ),
    ]
}

fn login_cases() -> Vec<Case> {
    let login = |v: Value| with("/spec/login", v);
    let at = "spec.login";
    let exactly_one = "exactly one of login.userPassword or login.sshKey must be set";
    vec![
        (
            "upstream: ssh key login",
            login(json!({"sshKey": "cluster-keypair"})),
            Valid,
        ),
        (
            "password for root",
            login(json!({"userPassword": {"username": "root", "password": "ciphertext"}})),
            Valid,
        ),
        (
            "upstream: both logins",
            login(json!({"userPassword": {"password": "ciphertext"}, "sshKey": "cluster-keypair"})),
            Rejected(at, exactly_one),
        ),
        (
            "upstream: no login",
            login(json!({})),
            Rejected(at, exactly_one),
        ),
        (
            "login missing",
            with("/spec/login", Value::Null),
            Rejected(at, "required"),
        ),
        (
            "ssh key empty",
            login(json!({"sshKey": ""})),
            Rejected("spec.login.sshKey", "may not be empty"),
        ),
        (
            "password missing",
            login(json!({"userPassword": {"username": "root"}})),
            Rejected("spec.login.userPassword.password", "required"),
        ),
        (
            "password empty",
            login(json!({"userPassword": {"password": ""}})),
            Rejected("spec.login.userPassword.password", "may not be empty"),
        ),
        (
            "user other than root",
            login(json!({"userPassword": {"username": "admin", "password": "c"}})),
            Rejected("spec.login.userPassword.username", ""),
        ),
    ]
}

fn kubelet_cases() -> Vec<Case> {
    let kubelet = |v: Value| with("/spec/kubelet", v);
    let reserved = |map: &str, key: &str, value: &str| kubelet(json!({ map: { key: value } }));
    let at = "spec.kubelet";
    let mut cases = vec![
        (
            "kubelet all fields",
            kubelet(json!({
                "maxPods": 110,
                "kubeReserved": {"cpu": "200m", "memory": "256Mi", "ephemeral-storage": "1Gi", "pid": "1000"},
                "systemReserved": {"cpu": "0.5", "memory": "1.5Gi", "ephemeral-storage": "10Gi", "pid": "100"},
            })),
            Valid,
        ),
        ("kubelet empty", kubelet(json!({})), Valid),
        ("maxPods 16", kubelet(json!({"maxPods": 16})), Valid),
        ("maxPods 256", kubelet(json!({"maxPods": 256})), Valid),
        (
            "maxPods 15",
            kubelet(json!({"maxPods": 15})),
            Rejected("spec.kubelet.maxPods", "greater than or equal to 16"),
        ),
        (
            "maxPods 257",
            kubelet(json!({"maxPods": 257})),
            Rejected("spec.kubelet.maxPods", "less than or equal to 256"),
        ),
        (
            "maxPods as a string",
            kubelet(json!({"maxPods": "110"})),
            Rejected("spec.kubelet.maxPods", ""),
        ),
        (
            "a kubelet field upstream lacks",
            kubelet(json!({"evictionHard": {"memory.available": "5%"}})),
            Rejected("spec.kubelet.evictionHard", "unknown field"),
        ),
        (
            "kubelet under Alibaba's name",
            with("/spec/kubeletConfiguration", json!({"maxPods": 110})),
            Rejected("spec.kubeletConfiguration", "unknown field"),
        ),
        (
            "a reserved value not a string",
            kubelet(json!({"kubeReserved": {"pid": 100}})),
            Rejected("spec.kubelet.kubeReserved", "must be of type string"),
        ),
    ];
    for map in ["kubeReserved", "systemReserved"] {
        let keys: &'static str = Box::leak(
            format!("valid keys for {map} are ['cpu','memory','ephemeral-storage','pid']")
                .into_boxed_str(),
        );
        let negative: &'static str = Box::leak(
            format!("{map} value cannot be a negative resource quantity").into_boxed_str(),
        );
        cases.extend([
            (
                "a reserved resource CCE does not take",
                reserved(map, "nvidia.com/gpu", "1"),
                Rejected(at, keys),
            ),
            (
                "a reserved key in upper case",
                reserved(map, "CPU", "1"),
                Rejected(at, keys),
            ),
            (
                "a negative reservation",
                reserved(map, "memory", "-10Mi"),
                Rejected(at, negative),
            ),
            (
                "a negative pid",
                reserved(map, "pid", "-1"),
                Rejected(at, negative),
            ),
        ]);
        // What the CRD admits but CCE's integer fields cannot hold exactly: upstream's
        // `ValidateKubeletForCreateNode` refuses these at every launch.
        let not_ready: [(&str, &str, &str, &str); 11] = [
            ("cpu", "one", "cpu", "must be a resource quantity"),
            ("cpu", "", "cpu", "must be a resource quantity"),
            ("cpu", "0.5m", "cpu", "must be a whole number of millicores"),
            ("cpu", "100u", "cpu", "must be a whole number of millicores"),
            ("cpu", "3000000", "cpu", "must be at most 2147483647"),
            ("memory", "1G", "memory", "must be a whole number of Mi"),
            ("memory", "1000Ki", "memory", "must be a whole number of Mi"),
            ("memory", "2Pi", "memory", "must be at most 2147483647"),
            (
                "ephemeral-storage",
                "512Mi",
                "ephemeral-storage",
                "must be a whole number of Gi",
            ),
            ("pid", "1.5", "pid", "must be an integer"),
            ("pid", "2147483648", "pid", "must be at most 2147483647"),
        ];
        for (key, value, field, message) in not_ready {
            let path: &'static str =
                Box::leak(format!("spec.kubelet.{map}.{field}").into_boxed_str());
            cases.push((
                "a reservation CCE cannot take",
                reserved(map, key, value),
                NotReady(path, message),
            ));
        }
        for (key, value) in [
            ("cpu", "100m"),
            ("cpu", "0.5"),
            ("cpu", "2"),
            ("memory", "1Gi"),
            ("memory", "1.5Gi"),
            ("memory", "1048576"),
            ("ephemeral-storage", "10Gi"),
            ("ephemeral-storage", "1Ti"),
            ("pid", "1000"),
            ("pid", "0"),
        ] {
            cases.push(("a reservation CCE takes", reserved(map, key, value), Valid));
        }
    }
    cases
}

fn status_cases() -> Vec<Case> {
    let condition = json!({
        "type": "Ready", "status": "True", "reason": "Ready", "message": "",
        "lastTransitionTime": "2025-01-01T00:00:00Z",
    });
    vec![
        (
            "status as upstream writes it",
            with(
                "/status",
                json!({
                    "subnets": [{"id": SUBNET_ID}],
                    "conditions": [condition.clone(), set(condition.clone(), "/type", json!("SubnetsReady"))],
                }),
            ),
            Valid,
        ),
        (
            "status subnet without id",
            with("/status/subnets", json!([{"zone": "cn-north-4a"}])),
            Rejected("status.subnets[0]", ""),
        ),
        (
            "status condition without reason",
            with(
                "/status/conditions",
                json!([set(condition.clone(), "/reason", Value::Null)]),
            ),
            Rejected("status.conditions[0].reason", "required"),
        ),
        (
            "status condition without message",
            with(
                "/status/conditions",
                json!([set(condition.clone(), "/message", Value::Null)]),
            ),
            Rejected("status.conditions[0].message", "required"),
        ),
        (
            "status condition with an unknown status",
            with(
                "/status/conditions",
                json!([set(condition, "/status", json!("Maybe"))]),
            ),
            Rejected("status.conditions[0].status", ""),
        ),
        (
            "spec missing",
            with("/spec", Value::Null),
            Rejected("spec", "required"),
        ),
    ]
}

#[test]
fn ccenodeclass_rules() {
    let cases: Vec<Case> = [
        subnet_cases(),
        ims_cases(),
        disk_cases(),
        runtime_and_group_cases(),
        login_cases(),
        kubelet_cases(),
        status_cases(),
    ]
    .into_iter()
    .flatten()
    .collect();
    let failures = failures(&crds(), cases);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every problem the runtime checks find is reported, not just the first.
#[test]
fn every_reservation_problem_is_reported() {
    let object = with(
        "/spec/kubelet",
        json!({
            "kubeReserved": {"cpu": "0.5m", "memory": "1Gi"},
            "systemReserved": {"memory": "1G", "pid": "x"},
        }),
    );
    let report = karpenter_api::validation::validate_object(&crds(), &object).unwrap();
    let paths: Vec<&str> = report.problems.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "spec.kubelet.kubeReserved.cpu",
            "spec.kubelet.systemReserved.memory",
            "spec.kubelet.systemReserved.pid",
        ],
        "{:?}",
        report.problems
    );
}

#[test]
fn ccenodeclasses_are_unknown_without_the_provider() {
    assert!(karpenter_api::validation::validate_object(&CORE, &ccenc()).is_none());
}

#[test]
fn other_versions_are_not_served() {
    let v1 = with("/apiVersion", json!("karpenter.k8s.huawei/v1"));
    assert!(karpenter_api::validation::validate_object(&crds(), &v1).is_none());
}

/// Upstream's CRD declares no defaults, so the API server stores a class as written; the types
/// must read it so and write it back unchanged (no serde default may invent a value).
#[test]
fn type_defaults_match_crd_defaults() {
    let schema = CRD.schema();
    for object in [
        ccenc(),
        with("/spec/kubelet", json!({})),
        with("/spec/runtimeConfiguration", json!({})),
        with(
            "/spec/login",
            json!({"userPassword": {"username": "root", "password": "c"}}),
        ),
        with(
            "/spec/blockDeviceMappings",
            json!({"root": {"volumeSize": 40, "volumeType": "SSD", "iops": 0},
                "k8s": {"volumeSize": 100, "volumeType": "SSD"},
                "users": [{"volumeSize": 10, "volumeType": "SAS"}]}),
        ),
    ] {
        let defaulted = kube_cel::apply_defaults(&schema, &object);
        assert_eq!(defaulted, object, "the CRD defaults nothing");
        let typed: CCENodeClass = serde_json::from_value(object.clone()).unwrap();
        assert_eq!(serde_json::to_value(&typed).unwrap(), object);
    }
    // What CCE does with an unset field is the accessors', not the types' defaults.
    let typed: CCENodeClass = serde_json::from_value(ccenc()).unwrap();
    assert_eq!(typed.spec.runtime(), None);
    assert!(typed.spec.block_device_mappings.k8s.is_none());
    assert_eq!(
        typed.spec.login.user_password.as_ref().unwrap().username,
        None
    );
}

/// The generated CRD's shape as upstream's: names, scope, one stored version with a status
/// subresource, no printer columns, and the required lists.
#[test]
fn the_crd_is_named_as_upstreams() {
    assert_eq!(CRD.file_name(), "karpenter.k8s.huawei_ccenodeclasses.yaml");
    let definition = CRD.definition();
    assert_eq!(
        definition["metadata"]["name"],
        "ccenodeclasses.karpenter.k8s.huawei"
    );
    let spec = &definition["spec"];
    assert_eq!(spec["group"], "karpenter.k8s.huawei");
    assert_eq!(spec["scope"], "Cluster");
    assert_eq!(
        spec["names"],
        json!({"categories": ["karpenter"], "kind": "CCENodeClass", "listKind": "CCENodeClassList",
            "plural": "ccenodeclasses", "singular": "ccenodeclass"})
    );
    let versions = spec["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 1);
    assert_eq!(versions[0]["name"], "v1alpha1");
    assert_eq!(versions[0]["served"], true);
    assert_eq!(versions[0]["storage"], true);
    assert_eq!(versions[0]["subresources"], json!({"status": {}}));
    assert!(versions[0].get("additionalPrinterColumns").is_none());
    let root = &versions[0]["schema"]["openAPIV3Schema"];
    assert_eq!(root["required"], json!(["spec"]));
    assert_eq!(
        root["properties"]["spec"]["required"],
        json!([
            "blockDeviceMappings",
            "imsSelector",
            "login",
            "subnetSelectorTerms"
        ])
    );
    // Upstream's conditions are a plain list, every field but observedGeneration required.
    let conditions = &root["properties"]["status"]["properties"]["conditions"];
    assert!(conditions.get("x-kubernetes-list-type").is_none());
    assert_eq!(
        conditions["items"]["required"],
        json!(["lastTransitionTime", "message", "reason", "status", "type"])
    );
}
