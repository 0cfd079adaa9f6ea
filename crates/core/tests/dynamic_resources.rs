//! Upstream's Dynamic Resource Allocation suites (`pkg/controllers/provisioning/dra_test.go`
//! and `pkg/controllers/disruption/consolidation_dra_test.go`), run as upstream runs them:
//! with `IGNORE_DRA_REQUESTS=false`. Each case is one round (`round::decide`) over Kubernetes
//! objects — ResourceClaims, DeviceClasses, ResourceSlices and the instance types' slice
//! templates — as the controller, the simulator and `plan` run it.
//!
//! Where upstream provisions in a first run, launches the node and lets its drivers publish
//! before a second run, the cluster here is given that node, its published slice, the claim's
//! allocation status and the pod bound to it (what upstream's `ExpectProvisioned` writes).
//! Upstream's fake instance types (4 CPU, 4 GiB, 5 pods) are the fake catalog's defaults.

mod support;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use karpenter_api::dra::{
    CapacityRequestPolicy, Counter, CounterSet, Device, DeviceCapacity, DeviceClass,
    DeviceCounterConsumption, ResourceClaim, ResourceSlice,
};
use karpenter_core::instancetype::InstanceType;
use karpenter_core::instancetype::fake::FakeInstanceType;
use karpenter_core::scheduling::dynamic_resources::{
    DeviceInventory, DeviceKey, DynamicResources, ResourceSliceTemplate,
};
use serde_json::{Value, json};
use std::sync::Arc;
use support::cluster::*;
use support::*;

const GPU: &str = "gpu.example.com";
const NIC: &str = "nic.example.com";
const MEMORY: &str = "gpu.example.com/memory";

fn from<T: k8s_openapi::serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("a valid object")
}

fn q(s: &str) -> Quantity {
    Quantity(s.into())
}

fn device(name: &str) -> Device {
    Device {
        name: name.into(),
        ..Default::default()
    }
}

/// An instance type whose drivers will publish `templates`.
fn with_templates(name: &str, templates: Vec<ResourceSliceTemplate>) -> InstanceType {
    let mut it = FakeInstanceType::new(name).build();
    it.dynamic_resources = Arc::new(DynamicResources {
        resource_slice_templates: templates,
        attribute_bindings: Vec::new(),
    });
    it
}

fn template(driver: &str, pool: &str, devices: Vec<Device>) -> ResourceSliceTemplate {
    ResourceSliceTemplate {
        driver: driver.into(),
        pool: pool.into(),
        devices,
        shared_counters: Vec::new(),
    }
}

/// Upstream's `GPUInstanceType(name, k)`: `k` GPUs in pool `<name>-pool`.
fn gpu_it(name: &str, k: usize) -> InstanceType {
    let devices = (0..k).map(|i| device(&format!("{name}-gpu-{i}"))).collect();
    with_templates(name, vec![template(GPU, &format!("{name}-pool"), devices)])
}

fn plain_it(name: &str) -> InstanceType {
    FakeInstanceType::new(name).build()
}

/// Upstream's `CapacityGPUInstanceType`: one shared GPU with `memory` to hand out.
fn capacity_gpu_it(
    name: &str,
    memory: &str,
    policy: Option<CapacityRequestPolicy>,
) -> InstanceType {
    let gpu = Device {
        name: format!("{name}-gpu-0"),
        allow_multiple_allocations: Some(true),
        capacity: [(
            MEMORY.to_string(),
            DeviceCapacity {
                value: q(memory),
                request_policy: policy,
            },
        )]
        .into(),
        ..Default::default()
    };
    with_templates(
        name,
        vec![template(GPU, &format!("{name}-pool"), vec![gpu])],
    )
}

/// Upstream's `PartitionableGPUInstanceType`: `k` profiles each drawing `per` from a counter
/// set of `budget`.
fn partitionable_it(
    name: &str,
    set: &str,
    budget: &[(&str, &str)],
    k: usize,
    per: &[(&str, &str)],
) -> InstanceType {
    let counters = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), Counter { value: q(v) }))
            .collect()
    };
    let pool = format!("{name}-pool");
    let mut budget_slice = template(GPU, &pool, Vec::new());
    budget_slice.shared_counters = vec![CounterSet {
        name: "gpu-slices".into(),
        counters: counters(budget),
    }];
    let profiles = (0..k)
        .map(|i| Device {
            name: format!("{name}-profile-{i}"),
            consumes_counters: vec![DeviceCounterConsumption {
                counter_set: set.into(),
                counters: counters(per),
            }],
            ..Default::default()
        })
        .collect();
    with_templates(name, vec![budget_slice, template(GPU, &pool, profiles)])
}

fn class(name: &str, driver: &str) -> DeviceClass {
    from(json!({"metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{driver}\"")}}]}}))
}

fn claim_of(name: &str, devices: Value) -> ResourceClaim {
    from(json!({"metadata": {"name": name, "namespace": "default"}, "spec": {"devices": devices}}))
}

/// A claim for `count` devices of class `class`.
fn claim(name: &str, class: &str, count: i64) -> ResourceClaim {
    claim_of(
        name,
        json!({"requests": [{"name": "req", "exactly": {"deviceClassName": class, "count": count}}]}),
    )
}

fn capacity_claim(name: &str, requests: Value) -> ResourceClaim {
    claim_of(
        name,
        json!({"requests": [{"name": "req", "exactly": {"deviceClassName": "gpu", "count": 1,
        "capacity": {"requests": requests}}}]}),
    )
}

/// Upstream's `draPod`: a pending pod whose container uses claims by reference.
fn dra_pod(name: &str, claims: &[&str]) -> Pod {
    let mut pod = named(name, pod().build());
    pod.metadata.uid = Some(format!("{name}-uid"));
    let spec = pod.spec.as_mut().unwrap();
    spec.resource_claims = Some(
        claims
            .iter()
            .enumerate()
            .map(|(i, c)| from(json!({"name": format!("ref-{i}"), "resourceClaimName": c})))
            .collect(),
    );
    spec.containers[0].resources = Some(from(json!({"claims":
        (0..claims.len()).map(|i| json!({"name": format!("ref-{i}")})).collect::<Vec<_>>()})));
    pod
}

/// A cluster whose one NodePool offers `types`, with device claims simulated.
fn cluster(types: Vec<InstanceType>) -> Cluster {
    let mut c = Cluster::with_types([node_pool("default")], types);
    c.options.ignore_dra_requests = false;
    c
}

fn devices(
    c: &mut Cluster,
    claims: Vec<ResourceClaim>,
    classes: Vec<DeviceClass>,
    slices: Vec<ResourceSlice>,
) {
    c.devices = DeviceInventory::new(claims, classes, slices);
}

/// A slice every node reaches.
fn cluster_wide(pool: &str, names: &[&str]) -> ResourceSlice {
    from(
        json!({"metadata": {"name": pool}, "spec": {"driver": GPU, "allNodes": true,
        "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
        "devices": names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>()}}),
    )
}

/// A slice whose devices nodes in `zone` reach.
fn zoned(driver: &str, pool: &str, zone: &str, name: &str) -> ResourceSlice {
    from(
        json!({"metadata": {"name": pool}, "spec": {"driver": driver,
        "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]}]},
        "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": name}]}}),
    )
}

/// What a node's driver publishes: a slice it owns, pool `<driver>/<node>`.
fn node_local(node: &str, names: &[&str]) -> ResourceSlice {
    from(json!({"metadata": {"name": format!("{node}-gpu"),
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": node}]},
        "spec": {"driver": GPU, "nodeName": node,
            "pool": {"name": format!("{GPU}/{node}"), "generation": 1, "resourceSliceCount": 1},
            "devices": names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>()}}))
}

/// `claim` as the scheduler leaves it once allocated to `device` (`driver/pool/device`) for
/// the pods `reserved`.
fn allocated(
    mut claim: ResourceClaim,
    devices: &[(&str, &str, Option<Value>)],
    reserved: &[&str],
) -> ResourceClaim {
    claim.status = Some(from(json!({
        "allocation": {"devices": {"results": devices.iter().map(|(pool, d, consumed)| json!({
            "request": "req", "driver": GPU, "pool": pool, "device": d, "consumedCapacity": consumed,
        })).collect::<Vec<_>>()}},
        "reservedFor": reserved.iter().map(|p| json!({"resource": "pods", "name": p, "uid": format!("{p}-uid")})).collect::<Vec<_>>(),
    })));
    claim
}

/// The devices claim `default/<name>` got, on the instance type its NodeClaim launches as
/// (or its node).
fn allocated_devices(p: &Provisioned, name: &str) -> Vec<DeviceKey> {
    let meta = p
        .claim_allocations
        .get(&format!("default/{name}"))
        .unwrap_or_else(|| panic!("claim {name} was not allocated: {:?}", p.failed));
    let it = p
        .claims
        .iter()
        .flat_map(|c| c.instance_types.first())
        .find(|it| meta.devices.contains_key(*it))
        .or_else(|| meta.devices.keys().next())
        .expect("allocated on some instance type");
    meta.devices[it].iter().map(|d| d.device.clone()).collect()
}

fn names(devices: &[DeviceKey]) -> Vec<&str> {
    devices.iter().map(|d| d.device.as_str()).collect()
}

fn node_of<'a>(p: &'a Provisioned, pod: &str) -> Option<&'a str> {
    p.existing
        .iter()
        .find(|(_, pods)| pods.iter().any(|x| x == pod))
        .map(|(n, _)| n.as_str())
}

fn claim_with(p: &Provisioned, pod: &str) -> Option<usize> {
    p.claims
        .iter()
        .position(|c| c.pods.iter().any(|x| x == pod))
}

// --- Single unallocated claim (A) ---

#[test]
fn a1_a_new_nodeclaim_gets_the_claim_and_names_its_driver() {
    let mut c = cluster(vec![gpu_it("gpu-it", 2)]);
    devices(
        &mut c,
        vec![claim("gpu-claim", "gpu", 1)],
        vec![class("gpu", GPU)],
        vec![],
    );
    c = c.pods([dra_pod("p", &["gpu-claim"])]);
    let p = c.provision();
    assert_eq!(p.claims.len(), 1, "{:?}", p.failed);
    assert_eq!(p.claims[0].instance_types, ["gpu-it"]);
    assert_eq!(p.claims[0].dra_drivers, [GPU]);
    let got = allocated_devices(&p, "gpu-claim");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].driver, GPU);
}

#[test]
fn a2_only_instance_types_with_the_device_are_launched() {
    let mut c = cluster(vec![gpu_it("gpu-it", 1), plain_it("no-gpu-it")]);
    devices(
        &mut c,
        vec![claim("gpu-claim", "gpu", 1)],
        vec![class("gpu", GPU)],
        vec![],
    );
    let p = c.pods([dra_pod("p", &["gpu-claim"])]).provision();
    assert_eq!(p.claims.len(), 1);
    assert_eq!(p.claims[0].instance_types, ["gpu-it"]);
}

#[test]
fn a3_a_pod_without_claims_gets_no_driver_annotation() {
    let mut c = cluster(vec![gpu_it("gpu-it", 1)]);
    devices(&mut c, vec![], vec![class("gpu", GPU)], vec![]);
    let p = c.pods([named("plain", pod().build())]).provision();
    assert_eq!(p.claims.len(), 1);
    assert!(p.claims[0].dra_drivers.is_empty());
    assert!(p.claim_allocations.is_empty());
}

#[test]
fn a4_a_claim_generated_from_a_template_is_found_through_the_pod_status() {
    let mut c = cluster(vec![gpu_it("gpu-it", 1)]);
    devices(
        &mut c,
        vec![claim("p-gpu", "gpu", 1)],
        vec![class("gpu", GPU)],
        vec![],
    );
    let mut pod = dra_pod("p", &[]);
    pod.spec.as_mut().unwrap().resource_claims = Some(vec![from(
        json!({"name": "gpu", "resourceClaimTemplateName": "gpu-template"}),
    )]);
    pod.status
        .get_or_insert_with(Default::default)
        .resource_claim_statuses = Some(vec![from(
        json!({"name": "gpu", "resourceClaimName": "p-gpu"}),
    )]);
    let p = c.pods([pod]).provision();
    assert_eq!(p.claims.len(), 1, "{:?}", p.failed);
    assert_eq!(p.claims[0].dra_drivers, [GPU]);
    assert_eq!(allocated_devices(&p, "p-gpu").len(), 1);
}

// --- Template (in-flight) device allocation (B) ---

#[test]
fn b1_two_pods_share_a_nodeclaim_on_distinct_devices() {
    let mut c = cluster(vec![gpu_it("gpu-it", 2)]);
    devices(
        &mut c,
        vec![claim("claim-a", "gpu", 1), claim("claim-b", "gpu", 1)],
        vec![class("gpu", GPU)],
        vec![],
    );
    let p = c
        .pods([dra_pod("a", &["claim-a"]), dra_pod("b", &["claim-b"])])
        .provision();
    assert_eq!(p.claims.len(), 1, "{:?}", p.failed);
    assert_ne!(
        allocated_devices(&p, "claim-a"),
        allocated_devices(&p, "claim-b")
    );
}

#[test]
fn b2_a_second_nodeclaim_opens_when_the_devices_run_out() {
    let mut c = cluster(vec![gpu_it("gpu-it", 1)]);
    devices(
        &mut c,
        vec![claim("claim-a", "gpu", 1), claim("claim-b", "gpu", 1)],
        vec![class("gpu", GPU)],
        vec![],
    );
    let p = c
        .pods([dra_pod("a", &["claim-a"]), dra_pod("b", &["claim-b"])])
        .provision();
    assert_eq!(p.claims.len(), 2, "{:?}", p.failed);
    assert_ne!(claim_with(&p, "a"), claim_with(&p, "b"));
}

// --- Allocation modes & constraints (F) ---

#[test]
fn f1_all_mode_takes_every_matching_device() {
    let mut c = cluster(vec![gpu_it("gpu-it", 3)]);
    let all = claim_of(
        "all",
        json!({"requests": [{"name": "req", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}}]}),
    );
    devices(&mut c, vec![all], vec![class("gpu", GPU)], vec![]);
    let p = c.pods([dra_pod("p", &["all"])]).provision();
    assert_eq!(allocated_devices(&p, "all").len(), 3);
}

#[test]
fn f2_match_attribute_holds_across_two_requests() {
    let root = |n: &str, r: &str| Device {
        name: n.into(),
        attributes: [(
            "gpu.example.com/pcieRoot".to_string(),
            from(json!({"string": r})),
        )]
        .into(),
        ..Default::default()
    };
    let it = with_templates(
        "gpu-it",
        vec![template(
            GPU,
            "gpu-it-pool",
            vec![
                root("gpu-0", "root-a"),
                root("gpu-1", "root-b"),
                root("gpu-2", "root-a"),
            ],
        )],
    );
    let mut c = cluster(vec![it]);
    let matched = claim_of(
        "m",
        json!({"requests": [
        {"name": "req-a", "exactly": {"deviceClassName": "gpu"}},
        {"name": "req-b", "exactly": {"deviceClassName": "gpu"}}],
        "constraints": [{"matchAttribute": "gpu.example.com/pcieRoot"}]}),
    );
    devices(&mut c, vec![matched], vec![class("gpu", GPU)], vec![]);
    let p = c.pods([dra_pod("p", &["m"])]).provision();
    // gpu-0 pins root-a: gpu-1 is passed over for gpu-2.
    assert_eq!(names(&allocated_devices(&p, "m")), ["gpu-0", "gpu-2"]);
}

// --- Prioritized alternatives / FirstAvailable (H) ---

fn first_available() -> ResourceClaim {
    claim_of(
        "fa",
        json!({"requests": [{"name": "req", "firstAvailable": [
        {"name": "prefer-4", "deviceClassName": "gpu", "count": 4},
        {"name": "fallback-2", "deviceClassName": "gpu", "count": 2}]}]}),
    )
}

#[test]
fn h1_falling_back_names_the_sub_request() {
    let mut c = cluster(vec![gpu_it("gpu-it", 2)]);
    devices(
        &mut c,
        vec![first_available()],
        vec![class("gpu", GPU)],
        vec![],
    );
    let p = c.pods([dra_pod("p", &["fa"])]).provision();
    let meta = &p.claim_allocations["default/fa"];
    let got = &meta.devices["gpu-it"];
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|d| d.request == "req/fallback-2"), "{got:?}");
}

#[test]
fn h2_the_preferred_sub_request_wins_when_it_fits() {
    let mut c = cluster(vec![gpu_it("gpu-it", 4)]);
    devices(
        &mut c,
        vec![first_available()],
        vec![class("gpu", GPU)],
        vec![],
    );
    let p = c.pods([dra_pod("p", &["fa"])]).provision();
    let got = &p.claim_allocations["default/fa"].devices["gpu-it"];
    assert_eq!(got.len(), 4);
    assert!(got.iter().all(|d| d.request == "req/prefer-4"), "{got:?}");
}

// --- requested-dra-drivers annotation (G) ---

#[test]
fn g1_every_driver_allocated_is_listed() {
    let it = with_templates(
        "multi-it",
        vec![
            template(GPU, "multi-it-gpu-pool", vec![device("multi-it-gpu-0")]),
            template(NIC, "multi-it-nic-pool", vec![device("multi-it-nic-0")]),
        ],
    );
    let mut c = cluster(vec![it]);
    devices(
        &mut c,
        vec![claim("gpu-claim", "gpu", 1), claim("nic-claim", "nic", 1)],
        vec![class("gpu", GPU), class("nic", NIC)],
        vec![],
    );
    let p = c
        .pods([dra_pod("p", &["gpu-claim", "nic-claim"])])
        .provision();
    assert_eq!(p.claims.len(), 1, "{:?}", p.failed);
    assert_eq!(p.claims[0].dra_drivers, [GPU, NIC]);
}

// --- Multiple provisioner runs (H) ---

/// The cluster after the first run launched node `node` (of `it`) for `pod`, whose claim got
/// the node's `device`: the node initialized, its driver published, the claim's status written.
fn launched(
    c: Cluster,
    node: &str,
    it: InstanceType,
    pod: Pod,
    claim: ResourceClaim,
    device: &str,
) -> (Cluster, ResourceClaim, ResourceSlice) {
    let pool = format!("{GPU}/{node}");
    let claim = allocated(claim, &[(&pool, device, None)], &[]);
    let slice = node_local(node, &[device]);
    let c = c
        .node(managed(node, "default", "default-instance-type").instance_type(it))
        .pods([on(node, pod)]);
    (c, claim, slice)
}

#[test]
fn h1_a_device_is_not_given_twice_across_runs() {
    let it = gpu_it("gpu-it", 1);
    let mut c = cluster(vec![it.clone()]);
    devices(
        &mut c,
        vec![claim("claim-a", "gpu", 1)],
        vec![class("gpu", GPU)],
        vec![],
    );
    let first = c.pods([dra_pod("a", &["claim-a"])]);
    let p = first.provision();
    let device = names(&allocated_devices(&p, "claim-a"))[0].to_string();
    let (mut c, claim_a, slice) = launched(
        cluster(vec![it.clone()]),
        "node-a",
        it,
        dra_pod("a", &["claim-a"]),
        claim("claim-a", "gpu", 1),
        &device,
    );
    devices(
        &mut c,
        vec![claim_a, claim("claim-b", "gpu", 1)],
        vec![class("gpu", GPU)],
        vec![slice],
    );
    let p = c.pods([dra_pod("b", &["claim-b"])]).provision();
    assert_eq!(node_of(&p, "b"), None, "node-a's only device is claim-a's");
    assert_eq!(p.claims.len(), 1, "{:?}", p.failed);
    assert!(allocated_devices(&p, "claim-b")[0].pool != format!("{GPU}/node-a"));
}

#[test]
fn h2_a_claim_allocated_before_is_not_allocated_again() {
    let it = gpu_it("gpu-it", 2);
    let (mut c, shared, slice) = launched(
        cluster(vec![it.clone()]),
        "node-a",
        it,
        dra_pod("a", &["shared"]),
        claim("shared", "gpu", 1),
        "gpu-it-gpu-0",
    );
    devices(&mut c, vec![shared], vec![class("gpu", GPU)], vec![slice]);
    let c = c.pods([dra_pod("b", &["shared"])]);
    let p = c.provision();
    assert!(p.scheduled("b"), "{:?}", p.failed);
    assert!(
        !p.claim_allocations.contains_key("default/shared"),
        "no new allocation"
    );
}

#[test]
fn h3_a_pod_waits_for_its_claim_and_schedules_once_it_exists() {
    let mut c = cluster(vec![gpu_it("gpu-it", 1)]);
    devices(&mut c, vec![], vec![class("gpu", GPU)], vec![]);
    c = c.pods([dra_pod("p", &["late-claim"])]);
    let p = c.provision();
    assert!(!p.scheduled("p"));
    assert!(p.claims.is_empty());
    assert_eq!(
        p.failed["p"],
        "resourceclaim \"default/late-claim\" not found"
    );
    devices(
        &mut c,
        vec![claim("late-claim", "gpu", 1)],
        vec![class("gpu", GPU)],
        vec![],
    );
    let p = c.provision();
    assert!(p.scheduled("p"));
    assert_eq!(p.claims.len(), 1);
}

// --- Enablement gating (N) ---

#[test]
fn n1_with_dra_requests_ignored_a_pod_with_claims_is_not_supported() {
    let mut c = cluster(vec![gpu_it("gpu-it", 1)]);
    c.options.ignore_dra_requests = true;
    devices(
        &mut c,
        vec![claim("gpu-claim", "gpu", 1)],
        vec![class("gpu", GPU)],
        vec![],
    );
    let p = c.pods([dra_pod("p", &["gpu-claim"])]).provision();
    assert!(p.claims.is_empty());
    assert_eq!(
        p.failed["p"],
        karpenter_core::provisioning::scheduling::DRA_NOT_SUPPORTED
    );
}

// --- Unsatisfiable / deferred (U) ---

#[test]
fn u_pods_whose_claims_cannot_be_met_get_no_nodeclaim() {
    type Unmet<'a> = (
        &'a str,
        Vec<InstanceType>,
        Vec<ResourceClaim>,
        Vec<DeviceClass>,
        &'a str,
    );
    let cases: [Unmet; 3] = [
        (
            "U1 the claim does not exist",
            vec![gpu_it("gpu-it", 1)],
            vec![],
            vec![class("gpu", GPU)],
            "not found",
        ),
        (
            "U2 no instance type has the device",
            vec![plain_it("no-gpu-it")],
            vec![claim("gpu-claim", "gpu", 1)],
            vec![class("gpu", GPU)],
            "no instance type can satisfy the allocation",
        ),
        (
            "U3 the DeviceClass is missing",
            vec![gpu_it("gpu-it", 1)],
            vec![claim("gpu-claim", "gpu", 1)],
            vec![],
            "DeviceClass \"gpu\" not found",
        ),
    ];
    for (case, types, claims, classes, why) in cases {
        let mut c = cluster(types);
        devices(&mut c, claims, classes, vec![]);
        let p = c.pods([dra_pod("p", &["gpu-claim"])]).provision();
        assert!(!p.scheduled("p"), "{case}");
        assert!(p.claims.is_empty(), "{case}");
        assert!(p.failed["p"].contains(why), "{case}: {}", p.failed["p"]);
    }
}

#[test]
fn u4_a_template_reference_without_a_generated_claim_needs_nothing() {
    let mut c = cluster(vec![gpu_it("gpu-it", 1)]);
    devices(&mut c, vec![], vec![class("gpu", GPU)], vec![]);
    let mut pod = dra_pod("p", &[]);
    pod.spec.as_mut().unwrap().resource_claims = Some(vec![from(
        json!({"name": "gpu", "resourceClaimTemplateName": "gpu-template"}),
    )]);
    pod.status
        .get_or_insert_with(Default::default)
        .resource_claim_statuses = Some(vec![from(json!({"name": "gpu"}))]);
    let p = c.pods([pod]).provision();
    assert!(p.scheduled("p"), "{:?}", p.failed);
    assert_eq!(p.claims.len(), 1);
    assert!(p.claims[0].dra_drivers.is_empty());
}

// --- Conflicts & contention (X) ---

#[test]
fn x1_two_claims_in_disjoint_zones_cannot_share_a_node() {
    let mut c = cluster(vec![plain_it("plain-it")]);
    devices(
        &mut c,
        vec![claim("gpu-claim", "gpu", 1), claim("nic-claim", "nic", 1)],
        vec![class("gpu", GPU), class("nic", NIC)],
        vec![
            zoned(GPU, "zoned-gpu-pool", "test-zone-1", "zoned-gpu-0"),
            zoned(NIC, "zoned-nic-pool", "test-zone-2", "zoned-nic-0"),
        ],
    );
    let p = c
        .pods([dra_pod("p", &["gpu-claim", "nic-claim"])])
        .provision();
    assert!(!p.scheduled("p"));
    assert!(p.claims.is_empty());
    let why = &p.failed["p"];
    assert!(
        why.contains("no instance type can satisfy the allocation"),
        "{why}"
    );
}

#[test]
fn x3_devices_and_requirements_leave_no_instance_type() {
    let arm = {
        let mut it = FakeInstanceType::new("arm-gpu-it").arch("arm64").build();
        it.dynamic_resources = Arc::new(DynamicResources {
            resource_slice_templates: vec![template(
                GPU,
                "arm-gpu-pool",
                vec![device("arm-gpu-0")],
            )],
            attribute_bindings: Vec::new(),
        });
        it
    };
    let mut c = cluster(vec![arm, plain_it("amd-no-gpu-it")]);
    devices(
        &mut c,
        vec![claim("gpu-claim", "gpu", 1)],
        vec![class("gpu", GPU)],
        vec![],
    );
    let mut pod = dra_pod("p", &["gpu-claim"]);
    pod.spec.as_mut().unwrap().node_selector =
        Some([("kubernetes.io/arch".to_string(), "amd64".to_string())].into());
    let p = c.pods([pod]).provision();
    assert!(!p.scheduled("p"));
    assert!(p.claims.is_empty());
    let why = &p.failed["p"];
    assert!(
        why.contains(
            "no instance type satisfies both scheduling and dynamic resource requirements"
        ),
        "{why}"
    );
}

// --- Cross-cutting / regression (R) ---

#[test]
fn r1_pods_with_and_without_claims_schedule_together() {
    let mut c = cluster(vec![gpu_it("gpu-it", 1)]);
    devices(
        &mut c,
        vec![claim("gpu-claim", "gpu", 1)],
        vec![class("gpu", GPU)],
        vec![],
    );
    let p = c
        .pods([
            dra_pod("dra", &["gpu-claim"]),
            named("plain", pod().build()),
        ])
        .provision();
    assert!(p.scheduled("dra") && p.scheduled("plain"), "{:?}", p.failed);
    assert_eq!(allocated_devices(&p, "gpu-claim").len(), 1);
}

#[test]
fn r2_allocations_are_keyed_by_the_claim_namespace_and_name() {
    let mut c = cluster(vec![gpu_it("gpu-it", 1)]);
    devices(
        &mut c,
        vec![claim("gpu-claim", "gpu", 1)],
        vec![class("gpu", GPU)],
        vec![],
    );
    let p = c.pods([dra_pod("p", &["gpu-claim"])]).provision();
    assert_eq!(
        p.claim_allocations.keys().collect::<Vec<_>>(),
        ["default/gpu-claim"]
    );
}

// --- In-cluster device allocation against existing nodes (C) ---

fn with_existing_gpu_node(initialized: bool) -> Cluster {
    let mut node =
        managed("gpu-node", "default", "default-instance-type").instance_type(gpu_it("gpu-it", 1));
    if !initialized {
        node = node.uninitialized();
    }
    let mut c = cluster(vec![gpu_it("gpu-it", 1)]).node(node);
    devices(
        &mut c,
        vec![claim("gpu-claim", "gpu", 1)],
        vec![class("gpu", GPU)],
        vec![node_local("gpu-node", &["incluster-gpu-0"])],
    );
    c
}

#[test]
fn c1_c2_an_existing_node_with_the_published_device_takes_the_pod() {
    let p = with_existing_gpu_node(true)
        .pods([dra_pod("p", &["gpu-claim"])])
        .provision();
    assert_eq!(node_of(&p, "p"), Some("gpu-node"), "{:?}", p.failed);
    assert!(p.claims.is_empty(), "no new node");
    let got = &p.claim_allocations["default/gpu-claim"].devices["gpu-it"];
    assert_eq!(
        got[0].device,
        DeviceKey::new(GPU, &format!("{GPU}/gpu-node"), "incluster-gpu-0")
    );
}

// --- Topology propagation from node-local devices (D) ---

#[test]
fn d1_a_zoned_cluster_device_narrows_the_nodeclaim_to_its_zone() {
    let mut c = cluster(vec![gpu_it("gpu-it", 1)]);
    devices(
        &mut c,
        vec![claim("gpu-claim", "gpu", 1)],
        vec![class("gpu", GPU)],
        vec![zoned(GPU, "zoned-gpu-pool", "test-zone-2", "zoned-gpu-0")],
    );
    let p = c.pods([dra_pod("p", &["gpu-claim"])]).provision();
    assert_eq!(p.claims.len(), 1, "{:?}", p.failed);
    assert_eq!(
        p.claims[0]
            .labels
            .get("topology.kubernetes.io/zone")
            .map(String::as_str),
        Some("test-zone-2")
    );
    assert_eq!(
        names(&allocated_devices(&p, "gpu-claim")),
        ["zoned-gpu-0"],
        "the cluster's device first"
    );
}

#[test]
fn d2_two_claims_in_one_zone_keep_the_nodeclaim_there() {
    let mut c = cluster(vec![plain_it("plain-it")]);
    devices(
        &mut c,
        vec![claim("gpu-claim", "gpu", 1), claim("nic-claim", "nic", 1)],
        vec![class("gpu", GPU), class("nic", NIC)],
        vec![
            zoned(GPU, "zoned-gpu-pool", "test-zone-2", "zoned-gpu-0"),
            zoned(NIC, "zoned-nic-pool", "test-zone-2", "zoned-nic-0"),
        ],
    );
    let p = c
        .pods([dra_pod("p", &["gpu-claim", "nic-claim"])])
        .provision();
    assert_eq!(p.claims.len(), 1, "{:?}", p.failed);
    assert_eq!(
        p.claims[0]
            .labels
            .get("topology.kubernetes.io/zone")
            .map(String::as_str),
        Some("test-zone-2")
    );
}

// --- Cross-loop in-memory claim reuse (E) ---

#[test]
fn e1_a_shared_cluster_claim_is_allocated_once_for_two_pods() {
    // One device: the second pod can only schedule by reusing the first one's allocation.
    let mut c = cluster(vec![plain_it("plain-it")]);
    devices(
        &mut c,
        vec![claim("shared", "gpu", 1)],
        vec![class("gpu", GPU)],
        vec![cluster_wide("shared-gpu-pool", &["shared-gpu-0"])],
    );
    let p = c
        .pods([dra_pod("a", &["shared"]), dra_pod("b", &["shared"])])
        .provision();
    assert!(p.scheduled("a") && p.scheduled("b"), "{:?}", p.failed);
    assert_eq!(allocated_devices(&p, "shared").len(), 1);
}

#[test]
fn e2_a_second_pod_of_a_template_allocated_claim_joins_its_nodeclaim() {
    // One GPU per node: the second pod joins the first one's NodeClaim through the claim, not
    // by a device of its own.
    let mut c = cluster(vec![gpu_it("gpu-it", 1)]);
    devices(
        &mut c,
        vec![claim("shared", "gpu", 1)],
        vec![class("gpu", GPU)],
        vec![],
    );
    let p = c
        .pods([dra_pod("a", &["shared"]), dra_pod("b", &["shared"])])
        .provision();
    assert_eq!(p.claims.len(), 1, "{:?}", p.failed);
    assert_eq!(p.claims[0].pods.len(), 2);
}

// --- Device availability (V) ---

#[test]
fn v2_a_device_held_by_a_live_pod_is_not_given_again() {
    let mut c = cluster(vec![plain_it("plain-it")]);
    let held = allocated(
        claim("held", "gpu", 1),
        &[("shared-gpu-pool", "shared-gpu-0", None)],
        &["live-pod"],
    );
    devices(
        &mut c,
        vec![held, claim("new-claim", "gpu", 1)],
        vec![class("gpu", GPU)],
        vec![cluster_wide(
            "shared-gpu-pool",
            &["shared-gpu-0", "shared-gpu-1"],
        )],
    );
    let p = c.pods([dra_pod("p", &["new-claim"])]).provision();
    assert_eq!(names(&allocated_devices(&p, "new-claim")), ["shared-gpu-1"]);
}

#[test]
fn v1_a_device_whose_only_consumer_is_leaving_is_given_again() {
    let mut c = cluster(vec![plain_it("plain-it")])
        .node(managed("old", "default", "default-instance-type").deleting())
        .pods([on("old", replicated(dra_pod("consumer-pod", &["held"])))]);
    let held = allocated(
        claim("held", "gpu", 1),
        &[("shared-gpu-pool", "shared-gpu-0", None)],
        &["consumer-pod"],
    );
    devices(
        &mut c,
        vec![held, claim("new-claim", "gpu", 1)],
        vec![class("gpu", GPU)],
        vec![cluster_wide("shared-gpu-pool", &["shared-gpu-0"])],
    );
    let p = c.pods([dra_pod("p", &["new-claim"])]).provision();
    assert_eq!(
        names(&allocated_devices(&p, "new-claim")),
        ["shared-gpu-0"],
        "{:?}",
        p.failed
    );
}

// --- Slice sourcing (S) and partially initialized nodes (I) ---

#[test]
fn s1_i1_a_node_not_initialized_stands_for_its_instance_types_devices() {
    let p = with_existing_gpu_node(false)
        .pods([dra_pod("p", &["gpu-claim"])])
        .provision();
    assert!(p.scheduled("p"), "{:?}", p.failed);
    let got = allocated_devices(&p, "gpu-claim");
    assert_ne!(
        got[0].device, "incluster-gpu-0",
        "its published slice is not used yet"
    );
}

#[test]
fn s2_slices_of_a_node_not_in_state_are_not_used() {
    let mut c = cluster(vec![gpu_it("gpu-it", 1)]);
    devices(
        &mut c,
        vec![claim("gpu-claim", "gpu", 1)],
        vec![class("gpu", GPU)],
        vec![node_local("orphan-node", &["orphan-gpu-0"])],
    );
    let p = c.pods([dra_pod("p", &["gpu-claim"])]).provision();
    assert!(p.scheduled("p"));
    assert_ne!(names(&allocated_devices(&p, "gpu-claim")), ["orphan-gpu-0"]);
}

#[test]
fn i2_a_node_devices_are_not_counted_twice_once_it_initializes() {
    let mut c = with_existing_gpu_node(true);
    let first = allocated(
        claim("claim-a", "gpu", 1),
        &[(&format!("{GPU}/gpu-node"), "incluster-gpu-0", None)],
        &["a"],
    );
    c = c.pods([on("gpu-node", dra_pod("a", &["claim-a"]))]);
    devices(
        &mut c,
        vec![first, claim("claim-b", "gpu", 1)],
        vec![class("gpu", GPU)],
        vec![node_local("gpu-node", &["incluster-gpu-0"])],
    );
    let p = c.pods([dra_pod("b", &["claim-b"])]).provision();
    assert!(p.scheduled("b"), "{:?}", p.failed);
    assert_eq!(node_of(&p, "b"), None, "gpu-node's one device is claim-a's");
    assert_eq!(allocated_devices(&p, "claim-b").len(), 1);
}

// --- Consumable capacity (P) ---

#[test]
fn p_shared_device_capacity_packs_and_runs_out() {
    let default_4 = CapacityRequestPolicy {
        default: Some(q("4Gi")),
        valid_values: vec![q("4Gi"), q("8Gi"), q("16Gi")],
        valid_range: None,
    };
    type Shared<'a> = (
        &'a str,
        Option<CapacityRequestPolicy>,
        Vec<Value>,
        Option<usize>,
    );
    let cases: [Shared; 7] = [
        (
            "P1 one slice of a shared device",
            None,
            vec![json!({MEMORY: "4Gi"})],
            Some(1),
        ),
        (
            "P2 three pods share one device",
            None,
            vec![json!({MEMORY: "4Gi"}); 3],
            Some(1),
        ),
        (
            "P3 the fourth does not fit: a second node",
            None,
            vec![
                json!({MEMORY: "4Gi"}),
                json!({MEMORY: "4Gi"}),
                json!({MEMORY: "4Gi"}),
                json!({MEMORY: "8Gi"}),
            ],
            Some(2),
        ),
        (
            "P6 a request beyond the device",
            None,
            vec![json!({MEMORY: "32Gi"})],
            None,
        ),
        (
            "P8 a capacity the device lacks",
            None,
            vec![json!({MEMORY: "4Gi", "bandwidth": "10"})],
            None,
        ),
        (
            "P9 a value the policy does not allow",
            Some(default_4.clone()),
            vec![json!({MEMORY: "32Gi"})],
            None,
        ),
        (
            "P10 the policy's default lets three pods share",
            Some(default_4),
            vec![json!({}); 3],
            Some(1),
        ),
    ];
    for (case, policy, requests, nodes) in cases {
        let mut c = cluster(vec![capacity_gpu_it("gpu-it", "16Gi", policy)]);
        let claims: Vec<ResourceClaim> = requests
            .iter()
            .enumerate()
            .map(|(i, r)| capacity_claim(&format!("cap-{i}"), r.clone()))
            .collect();
        let pods: Vec<Pod> = (0..claims.len())
            .map(|i| dra_pod(&format!("p{i}"), &[&format!("cap-{i}")]))
            .collect();
        devices(&mut c, claims, vec![class("gpu", GPU)], vec![]);
        let p = c.pods(pods).provision();
        match nodes {
            Some(n) => {
                assert!(p.failed.is_empty(), "{case}: {:?}", p.failed);
                assert_eq!(p.claims.len(), n, "{case}");
            }
            None => {
                assert!(!p.scheduled("p0"), "{case}");
                assert!(p.claims.is_empty(), "{case}");
                let why = &p.failed["p0"];
                assert!(
                    why.contains("no instance type can satisfy the allocation"),
                    "{case}: {why}"
                );
            }
        }
    }
}

#[test]
fn p4_a_leaving_pods_share_of_a_shared_device_comes_free() {
    // 16Gi shared: a live pod's 4Gi stays taken, a leaving pod's 10Gi comes free.
    let provision = |asked: &str| {
        let shared: ResourceSlice = from(
            json!({"metadata": {"name": "shared"}, "spec": {"driver": GPU, "allNodes": true,
            "pool": {"name": "shared-gpu-pool", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "shared-gpu-0", "allowMultipleAllocations": true, "capacity": {MEMORY: {"value": "16Gi"}}}]}}),
        );
        let mut c = cluster(vec![plain_it("plain-it")])
            .node(managed("old", "default", "default-instance-type").deleting())
            .pods([on(
                "old",
                replicated(dra_pod("leaving", &["deleting-claim"])),
            )]);
        let share = |name: &str, amount: &str, pod: &str| {
            allocated(
                capacity_claim(name, json!({MEMORY: amount})),
                &[(
                    "shared-gpu-pool",
                    "shared-gpu-0",
                    Some(json!({MEMORY: amount})),
                )],
                &[pod],
            )
        };
        devices(
            &mut c,
            vec![
                share("live-claim", "4Gi", "live-pod"),
                share("deleting-claim", "10Gi", "leaving"),
                capacity_claim("new-claim", json!({MEMORY: asked})),
            ],
            vec![class("gpu", GPU)],
            vec![shared],
        );
        c.pods([dra_pod("p", &["new-claim"])]).provision()
    };
    let p = provision("10Gi");
    assert!(p.scheduled("p"), "{:?}", p.failed);
    assert_eq!(names(&allocated_devices(&p, "new-claim")), ["shared-gpu-0"]);
    let p = provision("13Gi");
    assert!(!p.scheduled("p"), "4Gi + 13Gi is more than 16Gi: {p:?}");
}

// --- Partitionable devices (K) ---

#[test]
fn k_counter_budgets_bound_what_shares_a_node() {
    let cases: [(&str, InstanceType, usize, Option<usize>); 6] = [
        (
            "K1 two 40Gi profiles in 80Gi",
            partitionable_it(
                "gpu-it",
                "gpu-slices",
                &[("memory", "80Gi")],
                2,
                &[("memory", "40Gi")],
            ),
            2,
            Some(1),
        ),
        (
            "K2 a third profile needs a second node",
            partitionable_it(
                "gpu-it",
                "gpu-slices",
                &[("memory", "80Gi")],
                3,
                &[("memory", "40Gi")],
            ),
            3,
            Some(2),
        ),
        (
            "K3 two counters, each within budget",
            partitionable_it(
                "gpu-it",
                "gpu-slices",
                &[("memory", "80Gi"), ("compute", "100")],
                2,
                &[("memory", "40Gi"), ("compute", "50")],
            ),
            2,
            Some(1),
        ),
        (
            "K5 one profile beyond the budget",
            partitionable_it(
                "gpu-it",
                "gpu-slices",
                &[("memory", "40Gi")],
                1,
                &[("memory", "80Gi")],
            ),
            1,
            None,
        ),
        (
            "K6 a profile drawing on a counter set that does not exist",
            partitionable_it(
                "gpu-it",
                "nonexistent-counter-set",
                &[("memory", "80Gi")],
                1,
                &[("memory", "40Gi")],
            ),
            1,
            None,
        ),
        (
            "K7 two profiles of 60 compute never share 100",
            partitionable_it(
                "gpu-it",
                "gpu-slices",
                &[("compute", "100")],
                2,
                &[("compute", "60")],
            ),
            2,
            Some(2),
        ),
    ];
    for (case, it, pods, nodes) in cases {
        let mut c = cluster(vec![it]);
        let claims: Vec<ResourceClaim> = (0..pods)
            .map(|i| claim(&format!("claim-{i}"), "gpu", 1))
            .collect();
        let batch: Vec<Pod> = (0..pods)
            .map(|i| dra_pod(&format!("p{i}"), &[&format!("claim-{i}")]))
            .collect();
        devices(&mut c, claims, vec![class("gpu", GPU)], vec![]);
        let p = c.pods(batch).provision();
        match nodes {
            Some(n) => {
                assert!(p.failed.is_empty(), "{case}: {:?}", p.failed);
                assert_eq!(p.claims.len(), n, "{case}");
            }
            None => {
                assert!(p.claims.is_empty() && !p.scheduled("p0"), "{case}");
                let why = &p.failed["p0"];
                assert!(
                    why.contains("no instance type can satisfy the allocation"),
                    "{case}: {why}"
                );
            }
        }
    }
}

// --- consolidation_dra_test.go ---
//
// Upstream calls `SimulateScheduling` on chosen candidates; here the round's decision shows
// the simulation's outcome: a candidate is replaced (or deleted) only if its pods' claims can
// be allocated elsewhere. Candidates run on a pricier instance type than the one offered, so
// a successful simulation always yields a command.

fn consolidating(types: Vec<InstanceType>) -> Cluster {
    let mut pool = node_pool("default");
    pool.0.spec.disruption.consolidate_after = karpenter_api::NillableDuration::from_secs(0);
    // Every candidate at once, as upstream's simulation takes them.
    pool.0.spec.disruption.budgets = vec![karpenter_api::Budget {
        nodes: "100%".into(),
        ..Default::default()
    }];
    let mut c = Cluster::with_types([pool], types);
    c.options.ignore_dra_requests = false;
    c
}

/// An 8-CPU type with one GPU: dearer than `gpu-it`.
fn big_gpu_it() -> InstanceType {
    let mut it = FakeInstanceType::new("big-gpu-it")
        .resources(&[("cpu", "8"), ("memory", "16Gi")])
        .build();
    it.dynamic_resources = gpu_it("x", 1).dynamic_resources;
    it
}

fn big_gpu_node(name: &str) -> ManagedNode {
    managed(name, "default", "default-instance-type").instance_type(big_gpu_it())
}

fn holding(node: &str, pod: &str, name: &str) -> (Pod, ResourceClaim) {
    (
        on(node, replicated(dra_pod(pod, &[name]))),
        allocated(
            claim(name, "gpu", 1),
            &[(&format!("{GPU}/{node}"), "incluster-gpu-0", None)],
            &[pod],
        ),
    )
}

#[test]
fn consolidation_moves_a_pods_device_onto_a_replacement() {
    let (pod, held) = holding("candidate", "p", "gpu-claim");
    let mut c = consolidating(vec![
        gpu_it("gpu-it", 1),
        plain_it("no-gpu-it"),
        big_gpu_it(),
    ])
    .node(big_gpu_node("candidate"))
    .pods([pod]);
    devices(
        &mut c,
        vec![held],
        vec![class("gpu", GPU)],
        vec![node_local("candidate", &["incluster-gpu-0"])],
    );
    let d = c.disrupt();
    assert_eq!(d.commands.len(), 1, "{d:?}");
    let m = &d.commands[0];
    assert_eq!(m.candidates, ["candidate"]);
    // The claim is allocated anew on the replacement's own GPU: only gpu-it has one.
    assert_eq!(m.replacements, [vec!["gpu-it".to_string()]]);
}

#[test]
fn consolidation_keeps_a_node_whose_claim_fits_nowhere_else() {
    let (bound, held) = holding("candidate", "p", "gpu-claim");
    let mut c = consolidating(vec![plain_it("no-gpu-it"), big_gpu_it()])
        .node(big_gpu_node("candidate"))
        .pods([bound]);
    devices(
        &mut c,
        vec![held],
        vec![class("gpu", GPU)],
        vec![node_local("candidate", &["incluster-gpu-0"])],
    );
    assert!(c.disrupt().commands.is_empty());
    // Without the claim the pod would move to the cheaper type: the claim is what holds it.
    let mut c = consolidating(vec![plain_it("no-gpu-it"), big_gpu_it()])
        .node(big_gpu_node("candidate"))
        .pods([on("candidate", replicated(named("p", pod().build())))]);
    c.options.ignore_dra_requests = false;
    assert_eq!(c.disrupt().removed(), ["candidate"]);
}

#[test]
fn consolidation_does_not_free_a_device_a_live_pod_holds() {
    let mut c = consolidating(vec![
        plain_it("no-gpu-it"),
        plain_it("default-instance-type"),
    ])
    .node(managed("live", "default", "default-instance-type"))
    .node(managed("candidate", "default", "default-instance-type"))
    .pods([
        on("live", replicated(dra_pod("live-pod", &["held-claim"]))),
        on(
            "candidate",
            replicated(dra_pod("candidate-pod", &["candidate-claim"])),
        ),
    ]);
    // Both claims name the one shared device (as upstream's case sets them up): whichever
    // node goes, its pod's claim must be allocated anew and the device stays the other's.
    let held = allocated(
        claim("held-claim", "gpu", 1),
        &[("shared-gpu-pool", "shared-gpu-0", None)],
        &["live-pod"],
    );
    let candidate = allocated(
        claim("candidate-claim", "gpu", 1),
        &[("shared-gpu-pool", "shared-gpu-0", None)],
        &["candidate-pod"],
    );
    devices(
        &mut c,
        vec![held, candidate],
        vec![class("gpu", GPU)],
        vec![cluster_wide("shared-gpu-pool", &["shared-gpu-0"])],
    );
    assert!(c.disrupt().commands.is_empty());
    // With a second device in the pool the moving claim is allocated anew: one node goes.
    c.devices.slices = vec![Arc::new(cluster_wide(
        "shared-gpu-pool",
        &["shared-gpu-0", "shared-gpu-1"],
    ))];
    assert_eq!(c.disrupt().commands.len(), 1);
}

#[test]
fn consolidation_moves_devices_of_two_candidates_onto_one_replacement() {
    let (pod1, c1) = holding("node1", "pod1", "gpu-claim-1");
    let (pod2, c2) = holding("node2", "pod2", "gpu-claim-2");
    let mut c = consolidating(vec![gpu_it("gpu-it", 2), big_gpu_it()])
        .node(big_gpu_node("node1"))
        .node(big_gpu_node("node2"))
        .pods([pod1, pod2]);
    devices(
        &mut c,
        vec![c1, c2],
        vec![class("gpu", GPU)],
        vec![
            node_local("node1", &["incluster-gpu-0"]),
            node_local("node2", &["incluster-gpu-0"]),
        ],
    );
    let d = c.disrupt();
    assert_eq!(d.commands.len(), 1, "{d:?}");
    assert_eq!(d.removed(), ["node1", "node2"], "{d:?}");
    assert_eq!(
        d.commands[0].replacements.len(),
        1,
        "one node with two GPUs takes both claims"
    );
}

#[test]
fn consolidation_frees_only_the_candidates_share_of_a_shared_device() {
    let shared: ResourceSlice = from(
        json!({"metadata": {"name": "shared"}, "spec": {"driver": GPU, "allNodes": true,
        "pool": {"name": "shared-gpu-pool", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "shared-gpu-0", "allowMultipleAllocations": true, "capacity": {MEMORY: {"value": "16Gi"}}}]}}),
    );
    let mut c = consolidating(vec![
        plain_it("no-gpu-it"),
        plain_it("default-instance-type"),
    ])
    .node(managed("live", "default", "default-instance-type"))
    .node(managed("candidate", "default", "default-instance-type"))
    .pods([
        on("live", replicated(dra_pod("live-pod", &["live-claim"]))),
        on(
            "candidate",
            replicated(dra_pod("candidate-pod", &["candidate-claim"])),
        ),
    ]);
    let live = allocated(
        capacity_claim("live-claim", json!({MEMORY: "4Gi"})),
        &[(
            "shared-gpu-pool",
            "shared-gpu-0",
            Some(json!({MEMORY: "4Gi"})),
        )],
        &["live-pod"],
    );
    let moving = allocated(
        capacity_claim("candidate-claim", json!({MEMORY: "10Gi"})),
        &[(
            "shared-gpu-pool",
            "shared-gpu-0",
            Some(json!({MEMORY: "10Gi"})),
        )],
        &["candidate-pod"],
    );
    devices(
        &mut c,
        vec![live, moving],
        vec![class("gpu", GPU)],
        vec![shared],
    );
    // 4Gi live + 10Gi moving ≤ 16Gi: one node's pod joins the other with its share.
    let d = c.disrupt();
    assert_eq!(d.commands.len(), 1, "{d:?}");
    assert_eq!(d.commands[0].candidates.len(), 1);
    assert!(d.commands[0].replacements.is_empty(), "a deletion");
}

// --- scheduling suite › Dynamic Resource Allocation (DRA) ---

#[test]
fn a_daemonset_pod_with_claims_adds_its_overhead_only_when_claims_are_simulated() {
    // A 1 CPU DaemonSet pod with a claim and a 3.5 CPU pod: the 4 CPU type holds both only
    // when the DaemonSet pod is left out (upstream's IgnoreDRARequests=true).
    let small = FakeInstanceType::new("small").build();
    let large = FakeInstanceType::new("large")
        .resources(&[("cpu", "8"), ("memory", "8Gi")])
        .build();
    let mut ds_pod = dra_pod("ds", &["ds-claim"]);
    ds_pod.spec.as_mut().unwrap().containers[0].resources = Some(from(json!({
        "requests": {"cpu": "1"}, "claims": [{"name": "ref-0"}]})));
    let daemonset: k8s_openapi::api::apps::v1::DaemonSet = from(json!({
        "metadata": {"name": "ds", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "ds"}}, "template": {"metadata": {"labels": {"app": "ds"}},
            "spec": ds_pod.spec}}}));
    for (ignore, expected) in [(true, "small"), (false, "large")] {
        let mut c = cluster(vec![small.clone(), large.clone()]).daemonset(daemonset.clone());
        c.options.ignore_dra_requests = ignore;
        let p = c
            .pods([named("big", pod().cpu("3500m").build())])
            .provision();
        assert_eq!(
            p.claims[0].instance_types[0], expected,
            "ignore_dra_requests={ignore}"
        );
    }
}

// --- backtracking and the search's bound ---

#[test]
fn a_request_backtracks_when_a_later_one_cannot_match_the_first_choice() {
    // gpu-0 is tried first for req-a, but no other device shares its root: the search must
    // give it up (and unpin the constraint) for gpu-1, whose root gpu-2 shares.
    let root = |n: &str, r: &str| Device {
        name: n.into(),
        attributes: [(
            "gpu.example.com/pcieRoot".to_string(),
            from(json!({"string": r})),
        )]
        .into(),
        ..Default::default()
    };
    let it = with_templates(
        "gpu-it",
        vec![template(
            GPU,
            "gpu-it-pool",
            vec![
                root("gpu-0", "root-a"),
                root("gpu-1", "root-b"),
                root("gpu-2", "root-b"),
            ],
        )],
    );
    let mut c = cluster(vec![it]);
    let matched = claim_of(
        "m",
        json!({"requests": [
        {"name": "req-a", "exactly": {"deviceClassName": "gpu"}},
        {"name": "req-b", "exactly": {"deviceClassName": "gpu"}}],
        "constraints": [{"matchAttribute": "gpu.example.com/pcieRoot"}]}),
    );
    devices(&mut c, vec![matched], vec![class("gpu", GPU)], vec![]);
    let p = c.pods([dra_pod("p", &["m"])]).provision();
    assert_eq!(
        names(&allocated_devices(&p, "m")),
        ["gpu-1", "gpu-2"],
        "{:?}",
        p.failed
    );
}

#[test]
fn a_zone_taken_for_a_device_given_up_is_given_up_with_it() {
    // Two devices wanted: the zone-1 device is tried first, no second one is in zone 1, so the
    // search drops it and its zone, and takes the two of zone 2.
    let mut c = cluster(vec![plain_it("plain-it")]);
    devices(
        &mut c,
        vec![claim("two", "gpu", 2)],
        vec![class("gpu", GPU)],
        vec![
            zoned(GPU, "a-zone-1", "test-zone-1", "z1-gpu"),
            zoned(GPU, "b-zone-2", "test-zone-2", "z2-gpu-0"),
            zoned(GPU, "c-zone-2", "test-zone-2", "z2-gpu-1"),
        ],
    );
    let p = c.pods([dra_pod("p", &["two"])]).provision();
    assert_eq!(
        names(&allocated_devices(&p, "two")),
        ["z2-gpu-0", "z2-gpu-1"],
        "{:?}",
        p.failed
    );
    assert_eq!(
        p.claims[0]
            .labels
            .get("topology.kubernetes.io/zone")
            .map(String::as_str),
        Some("test-zone-2")
    );
}

#[test]
fn a_search_that_cannot_end_gives_up_with_why() {
    // Claim b can never be met; claim a's 4 of 40 devices would be tried in every order first.
    let names: Vec<String> = (0..40).map(|i| format!("gpu-{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut c = cluster(vec![plain_it("plain-it")]);
    // No NIC anywhere.
    devices(
        &mut c,
        vec![claim("a", "gpu", 4), claim("b", "nic", 1)],
        vec![class("gpu", GPU), class("nic", NIC)],
        vec![cluster_wide("many", &refs)],
    );
    let p = c.pods([dra_pod("p", &["a", "b"])]).provision();
    assert!(!p.scheduled("p"));
    assert!(
        p.failed["p"].contains("gave up searching for devices"),
        "{}",
        p.failed["p"]
    );
}
