//! Instance types through the public API as the provider builds them: the instance types file
//! (`tests/testdata/instance-types/`, our own files in upstream's format) parsed or refused
//! naming the field, the built-in list written out and read back, instance types on a Proxmox
//! cluster's nodes, and the `proxmox` catalog as the simulator and the planner use it.

use std::path::PathBuf;
use std::sync::Arc;

use karpenter_api::labels::{CAPACITY_TYPE_LABEL, ZONE_LABEL};
use karpenter_api::{NodeClaim, NodeSelectorRequirementWithMinValues, Operator};
use karpenter_core::instancetype::{InstanceType, cheapest_launch};
use karpenter_core::resources::Resources;
use karpenter_proxmox::capacity::{Capacities, VmShape};
use karpenter_proxmox::catalog::{self, NODES, REGION};
use karpenter_proxmox::instancetype::{
    self, InstanceTypeOptions, InstanceTypeSpec, InstanceTypesFileError, LABELS,
};
use karpenter_proxmox::pricing;

/// Resource requests as (name, quantity).
type Requests<'a> = &'a [(&'a str, &'a str)];
/// Requirements as (key, values).
type Terms<'a> = &'a [(&'a str, &'a [&'a str])];

const MI: i64 = (1 << 20) * 1000;
const GI: i64 = (1 << 30) * 1000;

fn testdata(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/testdata/instance-types")
        .join(name)
}

fn read(name: &str) -> String {
    std::fs::read_to_string(testdata(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn never(_: &str, _: &str, _: &str) -> bool {
    false
}

fn find<'a>(types: &'a [InstanceType], name: &str) -> &'a InstanceType {
    types
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("{name} is listed"))
}

#[test]
fn the_file_parses_as_go_reads_it() {
    let specs = instancetype::parse_file(&read("valid.json")).unwrap();
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "c1.1VCPU-2GB",
            "s1.4VCPU-16GB",
            "spot.2VCPU-4GB",
            "hp1.8VCPU-32GB",
            "gpu1.4VCPU-16GB"
        ]
    );
    // (name, capacity type, family)
    let cases = [
        ("c1.1VCPU-2GB", "on-demand", "c1"),
        ("s1.4VCPU-16GB", "on-demand", "s1"),
        ("spot.2VCPU-4GB", "spot", "spot"),
        ("hp1.8VCPU-32GB", "on-demand", "hp1"),
        ("gpu1.4VCPU-16GB", "on-demand", "gpu1"),
    ];
    for (spec, (name, capacity_type, family)) in specs.iter().zip(cases) {
        assert_eq!(spec.name, name);
        assert_eq!(spec.capacity_type, capacity_type, "{name}");
        assert_eq!(spec.family(), family, "{name}");
    }
    // Bare numbers are quantities; keys match whatever their case.
    assert_eq!(specs[1].capacity.cpu, 4000);
    assert_eq!(specs[1].capacity.pods, 110_000);
    assert_eq!(specs[2].overhead.kube_reserved.cpu, 50);
    assert_eq!(specs[4].capacity.get("nvidia.com/gpu"), 1000);
}

/// Allocatable is capacity less the file's reservations (and huge pages out of memory).
#[test]
fn file_types_get_the_files_reservations() {
    let specs = instancetype::parse_file(&read("valid.json")).unwrap();
    let types = instancetype::instance_types(
        &specs,
        &catalog::homelab(),
        &InstanceTypeOptions::default(),
        &never,
    );
    // (name, allocatable CPU m, memory MiB, pods, ephemeral storage GiB)
    let cases = [
        ("c1.1VCPU-2GB", 980, 2048 - 384, 64, 30),
        ("s1.4VCPU-16GB", 3890, 16384 - 548, 110, 50),
        ("spot.2VCPU-4GB", 1950, 4096 - 384, 110, 0),
        ("hp1.8VCPU-32GB", 7890, 32768 - 548 - 8192, 110, 100),
        ("gpu1.4VCPU-16GB", 4000, 16384, 110, 0),
    ];
    for (name, cpu, memory, pods, storage) in cases {
        let a = find(&types, name).allocatable();
        assert_eq!(a.cpu, cpu, "{name}");
        assert_eq!(a.memory, memory * MI, "{name}");
        assert_eq!(a.pods, pods * 1000, "{name}");
        assert_eq!(a.ephemeral_storage, storage * GI, "{name}");
    }
    let spot = find(&types, "spot.2VCPU-4GB");
    assert!(spot.offerings.iter().all(|o| o.capacity_type == "spot"));
    assert_eq!(
        spot.offerings[0].price,
        pricing::on_demand(&spot.capacity) / 2.0
    );
    // The file's offerings are not read: every node is offered.
    assert_eq!(find(&types, "hp1.8VCPU-32GB").offerings.len(), NODES.len());
}

#[test]
fn invalid_files_are_refused_naming_the_field() {
    const OK: &str = r#""capacity": {"cpu": "1", "memory": "2Gi", "pods": "64"}"#;
    let entry = |fields: &str| format!("[{{{fields}}}]");
    // (case, file, entry index, field, part of the reason)
    let cases: Vec<(&str, String, usize, &str, &str)> = vec![
        (
            "not an object",
            r#"["c1"]"#.into(),
            0,
            "",
            "expected an object, not a string",
        ),
        ("no name", entry(OK), 0, "name", "is required"),
        (
            "name not a string",
            entry(&format!(r#""name": 5, {OK}"#)),
            0,
            "name",
            "expected a string, not a number",
        ),
        (
            "empty name",
            entry(&format!(r#""name": "", {OK}"#)),
            0,
            "name",
            "must not be empty",
        ),
        (
            "name with a blank",
            entry(&format!(r#""name": "c1 big", {OK}"#)),
            0,
            "name",
            "letters, digits",
        ),
        (
            "name starting with a dash",
            entry(&format!(r#""name": "-c1", {OK}"#)),
            0,
            "name",
            "starting and ending",
        ),
        (
            "name too long",
            entry(&format!(r#""name": "{}", {OK}"#, "a".repeat(64))),
            0,
            "name",
            "at most 63",
        ),
        (
            "repeated name",
            format!(r#"[{{"name": "a", {OK}}}, {{"name": "b", {OK}}}, {{"name": "a", {OK}}}]"#),
            2,
            "name",
            "repeats entry [0]'s name",
        ),
        (
            "unknown field",
            entry(&format!(r#""name": "a", "capcity": {{}}, {OK}"#)),
            0,
            "capcity",
            "unknown field",
        ),
        (
            "no capacity",
            entry(r#""name": "a""#),
            0,
            "capacity",
            "is required",
        ),
        (
            "capacity not an object",
            entry(r#""name": "a", "capacity": "1""#),
            0,
            "capacity",
            "expected resources by name, not a string",
        ),
        (
            "no cpu",
            entry(r#""name": "a", "capacity": {"memory": "2Gi", "pods": "64"}"#),
            0,
            "capacity.cpu",
            "is required",
        ),
        (
            "part of a vCPU",
            entry(r#""name": "a", "capacity": {"cpu": "1500m", "memory": "2Gi", "pods": "64"}"#),
            0,
            "capacity.cpu",
            "whole vCPUs",
        ),
        (
            "cpu not a quantity",
            entry(r#""name": "a", "capacity": {"cpu": true, "memory": "2Gi", "pods": "64"}"#),
            0,
            "capacity.cpu",
            "expected a quantity, not a boolean",
        ),
        (
            "no memory",
            entry(r#""name": "a", "capacity": {"cpu": "1", "pods": "64"}"#),
            0,
            "capacity.memory",
            "is required",
        ),
        (
            "memory not a quantity",
            entry(r#""name": "a", "capacity": {"cpu": "1", "memory": "2Xi", "pods": "64"}"#),
            0,
            "capacity.memory",
            "invalid quantity \"2Xi\"",
        ),
        (
            "negative memory",
            entry(r#""name": "a", "capacity": {"cpu": "1", "memory": "-2Gi", "pods": "64"}"#),
            0,
            "capacity.memory",
            "must not be negative",
        ),
        (
            "no pods",
            entry(r#""name": "a", "capacity": {"cpu": "1", "memory": "2Gi"}"#),
            0,
            "capacity.pods",
            "is required",
        ),
        (
            "part of a pod",
            entry(r#""name": "a", "capacity": {"cpu": "1", "memory": "2Gi", "pods": "1.5"}"#),
            0,
            "capacity.pods",
            "whole number",
        ),
        (
            "storage not a quantity",
            entry(
                r#""name": "a", "capacity": {"cpu": "1", "memory": "2Gi", "pods": "64", "ephemeral-storage": "lots"}"#,
            ),
            0,
            "capacity.ephemeral-storage",
            "invalid quantity",
        ),
        (
            "reserved capacity type",
            entry(&format!(r#""name": "a", "capacitytype": "reserved", {OK}"#)),
            0,
            "capacitytype",
            "\"reserved\" is not a capacity type (expected on-demand or spot)",
        ),
        (
            "capacity type not a string",
            entry(&format!(r#""name": "a", "capacitytype": 1, {OK}"#)),
            0,
            "capacitytype",
            "expected a string",
        ),
        (
            "overhead not an object",
            entry(&format!(r#""name": "a", "overhead": [], {OK}"#)),
            0,
            "overhead",
            "expected an object of KubeReserved, SystemReserved, EvictionThreshold",
        ),
        (
            "unknown reservation",
            entry(&format!(
                r#""name": "a", "overhead": {{"Reserved": {{}}}}, {OK}"#
            )),
            0,
            "overhead.Reserved",
            "unknown field",
        ),
        (
            "reservation not a quantity",
            entry(&format!(
                r#""name": "a", "overhead": {{"KubeReserved": {{"memory": "lots"}}}}, {OK}"#
            )),
            0,
            "overhead.KubeReserved.memory",
            "invalid quantity",
        ),
        (
            "reservations beyond the capacity",
            entry(&format!(
                r#""name": "a", "overhead": {{"KubeReserved": {{"memory": "1Gi"}}, "SystemReserved": {{"memory": "1536Mi"}}}}, {OK}"#
            )),
            0,
            "overhead",
            "reserves 2560Mi memory, more than the capacity's 2Gi",
        ),
    ];
    for (case, file, index, field, reason) in cases {
        let e = instancetype::parse_file(&file).expect_err(case);
        match &e {
            InstanceTypesFileError::Entry {
                index: got_index,
                field: got_field,
                reason: got_reason,
                ..
            } => {
                assert_eq!(*got_index, index, "{case}: {e}");
                assert_eq!(got_field, field, "{case}: {e}");
                assert!(got_reason.contains(reason), "{case}: {e}");
            }
            other => panic!("{case}: {other}"),
        }
    }
}

#[test]
fn errors_read_with_the_entry_and_field() {
    let e = instancetype::parse_file(
        r#"[{"name": "c1.x", "capacity": {"cpu": "1", "memory": "2Xi", "pods": "64"}}]"#,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "instance types file: [0] (c1.x) capacity.memory: invalid quantity \"2Xi\": unknown suffix (use m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei)"
    );
    assert_eq!(e.field(), Some("capacity.memory"));
    // The whole file's problems.
    let cases = [
        ("[", "instance types file: not JSON: "),
        (
            "{}",
            "instance types file: expected a list of instance types, not an object",
        ),
        ("[]", "instance types file: the list is empty"),
    ];
    for (text, message) in cases {
        let e = instancetype::parse_file(text).unwrap_err().to_string();
        assert!(e.starts_with(message), "{text}: {e}");
    }
}

/// The built-in list in the file's format (`built-in.json`, written by `to_file`): what an
/// operator starts a file of their own from. `UPDATE_GOLDEN=1` rewrites it.
#[test]
fn the_built_in_list_round_trips_through_the_file() {
    let written = instancetype::to_file(&instancetype::default_specs());
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(testdata("built-in.json"), &written).unwrap();
    }
    assert_eq!(
        written,
        read("built-in.json"),
        "UPDATE_GOLDEN=1 rewrites it"
    );
    let read_back: Vec<InstanceTypeSpec> = instancetype::parse_file(&written).unwrap();
    assert_eq!(read_back, instancetype::default_specs());
}

fn claim(requirements: Terms<'_>, requests: Requests<'_>) -> NodeClaim {
    let mut c = NodeClaim::default();
    c.metadata.name = Some("default-x7k2p".into());
    c.spec.requirements = requirements
        .iter()
        .map(|(key, values)| NodeSelectorRequirementWithMinValues {
            key: key.to_string(),
            operator: Operator::In,
            values: values.iter().map(|v| v.to_string()).collect(),
            min_values: None,
        })
        .collect();
    c.spec.resources.requests = Resources::parse(requests).to_list();
    c
}

#[test]
fn the_catalog_offers_upstreams_types_on_the_homelab() {
    let catalog = catalog::catalog();
    assert_eq!(catalog.name, "proxmox");
    assert_eq!(catalog.instance_types.len(), 20);
    assert_eq!(catalog.provider_labels, LABELS.map(String::from));
    // (type, nodes with room)
    let cases: [(&str, &[&str]); 5] = [
        ("c1.1VCPU-2GB", &["pve1", "pve2", "pve3"]),
        ("s1.16VCPU-64GB", &["pve1", "pve2"]),
        ("m1.8VCPU-64GB", &["pve1", "pve2"]),
        ("t1.16VCPU-48GB", &["pve1", "pve2", "pve3"]),
        ("m1.16VCPU-128GB", &[]),
    ];
    for (name, open) in cases {
        let it = catalog
            .instance_types
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("{name}"));
        let zones: Vec<&str> = it.offerings.iter().map(|o| o.zone.as_str()).collect();
        assert_eq!(zones, ["pve1", "pve2", "pve3"], "{name}");
        let available: Vec<&str> = it
            .offerings
            .iter()
            .filter(|o| o.available)
            .map(|o| o.zone.as_str())
            .collect();
        assert_eq!(available, open, "{name}");
        assert!(
            it.requirements
                .allows("topology.kubernetes.io/region", REGION)
        );
    }
    for it in &catalog.instance_types {
        let price = pricing::on_demand(&it.capacity);
        for o in &it.offerings {
            assert_eq!(o.capacity_type, "on-demand", "{}", it.name);
            assert_eq!(o.price, price, "{}", it.name);
            assert!(it.requirements.allows(ZONE_LABEL, &o.zone), "{}", it.name);
            assert!(
                it.requirements
                    .allows(CAPACITY_TYPE_LABEL, &o.capacity_type)
            );
        }
    }
}

#[test]
fn the_catalog_launches_the_cheapest_type_that_holds_the_claim() {
    let types = catalog::catalog().instance_types;
    // (requests, requirements, type, zone)
    let cases: [(Requests<'_>, Terms<'_>, &str, &str); 4] = [
        (
            &[("cpu", "500m"), ("memory", "1Gi")],
            &[],
            "c1.1VCPU-2GB",
            "pve1",
        ),
        // More than c1.1VCPU-2GB's 1500Mi allocatable: the next cheapest, 2524Mi.
        (
            &[("cpu", "500m"), ("memory", "1600Mi")],
            &[],
            "t1.1VCPU-3GB",
            "pve1",
        ),
        // 3890m allocatable on 4 vCPUs.
        (
            &[("cpu", "3500m"), ("memory", "4Gi")],
            &[],
            "c1.4VCPU-8GB",
            "pve1",
        ),
        (
            &[("cpu", "12"), ("memory", "40Gi")],
            &[(ZONE_LABEL, &["pve3"])],
            "t1.16VCPU-48GB",
            "pve3",
        ),
    ];
    for (requests, requirements, name, zone) in cases {
        let (it, offering) = cheapest_launch(&types, &claim(requirements, requests))
            .unwrap_or_else(|| panic!("{name}: a launch"));
        assert_eq!(it.name, name, "{requests:?}");
        assert_eq!(offering.zone, zone, "{requests:?}");
    }
    // 64 GiB for pods needs a 128 GB type: no node has room for one.
    assert!(cheapest_launch(&types, &claim(&[], &[("memory", "64Gi")])).is_none());
}

#[test]
fn the_catalog_takes_assumed_spot_prices() {
    let catalog = catalog::catalog().with_assumed_spot_prices(0.5);
    let it: &Arc<InstanceType> = &catalog.instance_types[0];
    let spot: Vec<_> = it
        .offerings
        .iter()
        .filter(|o| o.capacity_type == "spot")
        .collect();
    assert_eq!(spot.len(), NODES.len());
    assert!(
        spot.iter()
            .all(|o| o.price == pricing::price(&it.capacity, "spot"))
    );
}

#[test]
fn a_create_in_progress_is_seen_by_the_next_listing() {
    let mut nodes: Capacities = catalog::homelab();
    let s = instancetype::default_specs()
        .into_iter()
        .find(|s| s.name == "m1.8VCPU-64GB")
        .unwrap();
    let listing = |nodes: &Capacities| {
        instancetype::instance_type(&s, nodes, &InstanceTypeOptions::default(), &never)
            .offerings
            .iter()
            .filter(|o| o.available)
            .map(|o| o.zone.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(listing(&nodes), ["pve1", "pve2"]);
    nodes
        .reserve(REGION, "pve1", "default-x7k2p", VmShape::of(&s.capacity))
        .unwrap();
    // 127 GiB less 64 leaves 63 on pve1: a second one does not fit there.
    assert_eq!(listing(&nodes), ["pve2"]);
    nodes
        .reserve(REGION, "pve1", "default-q9w3e", VmShape::of(&s.capacity))
        .unwrap_err();
    let smaller = VmShape {
        cpus: 8,
        memory: 60 << 30,
    };
    nodes
        .reserve(REGION, "pve1", "default-q9w3e", smaller)
        .unwrap();
    // The first create fails: its 64 GiB come back, 67 are free.
    assert!(nodes.release("default-x7k2p"));
    assert_eq!(listing(&nodes), ["pve1", "pve2"]);
}
