//! Upstream's built-in list and reservations (`generate.go`, `hack/instance-types.json`) as
//! tables, and the offerings, requirements and NodeClass settings around them.

use karpenter_api::labels::{ARCH_LABEL, CAPACITY_TYPE_LABEL, ZONE_LABEL};

use super::*;
use crate::capacity::{HostSettings, NodeCapacity, NodeStatus, VmShape};

const MI: i64 = MIB * 1000;
const GI: i64 = GIB * 1000;

fn spec(name: &str) -> InstanceTypeSpec {
    default_specs()
        .into_iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("{name} is built in"))
}

fn never(_: &str, _: &str, _: &str) -> bool {
    false
}

/// Region `pve` with nodes of (name, CPUs, GiB), nothing running.
fn homelab(nodes: &[(&str, u32, u64)]) -> Capacities {
    let nodes = nodes
        .iter()
        .map(|(name, cpus, gib)| {
            let status = NodeStatus {
                name: (*name).into(),
                online: true,
                cpus: *cpus,
                memory: gib << 30,
                cpu_load: 0.0,
            };
            NodeCapacity::new("pve", &status, &HostSettings::default(), &[]).unwrap()
        })
        .collect();
    let mut all = Capacities::new();
    all.replace_region("pve", nodes);
    all
}

#[test]
fn the_built_in_list_is_upstreams() {
    let names: Vec<String> = default_specs().into_iter().map(|s| s.name).collect();
    assert_eq!(
        names,
        [
            "c1.1VCPU-2GB",
            "t1.1VCPU-3GB",
            "s1.1VCPU-4GB",
            "m1.1VCPU-8GB",
            "c1.2VCPU-4GB",
            "t1.2VCPU-6GB",
            "s1.2VCPU-8GB",
            "m1.2VCPU-16GB",
            "c1.4VCPU-8GB",
            "t1.4VCPU-12GB",
            "s1.4VCPU-16GB",
            "m1.4VCPU-32GB",
            "c1.8VCPU-16GB",
            "t1.8VCPU-24GB",
            "s1.8VCPU-32GB",
            "m1.8VCPU-64GB",
            "c1.16VCPU-32GB",
            "t1.16VCPU-48GB",
            "s1.16VCPU-64GB",
            "m1.16VCPU-128GB",
        ]
    );
}

#[test]
fn built_in_sizes() {
    // (name, vCPUs, GiB, pods, family)
    let cases = [
        ("c1.1VCPU-2GB", 1, 2, 64, "c1"),
        ("t1.1VCPU-3GB", 1, 3, 110, "t1"),
        ("m1.1VCPU-8GB", 1, 8, 110, "m1"),
        ("s1.4VCPU-16GB", 4, 16, 110, "s1"),
        ("m1.16VCPU-128GB", 16, 128, 110, "m1"),
    ];
    for (name, cpus, gib, pods, family) in cases {
        let s = spec(name);
        assert_eq!(s.capacity.cpu, cpus * 1000, "{name}");
        assert_eq!(s.capacity.memory, gib * GI, "{name}");
        assert_eq!(s.capacity.pods, pods * 1000, "{name}");
        assert_eq!(s.capacity.ephemeral_storage, 30 * GI, "{name}");
        assert_eq!(s.capacity_type, "on-demand", "{name}");
        assert_eq!(s.family(), family, "{name}");
    }
}

#[test]
fn families_and_names_by_ratio() {
    let cases = [
        (1, 2, "c1.1VCPU-2GB"),
        (2, 3, "t1.2VCPU-6GB"),
        (4, 4, "s1.4VCPU-16GB"),
        (8, 8, "m1.8VCPU-64GB"),
        (2, 16, "x1.2VCPU-32GB"),
        (2, 6, "e1.2VCPU-12GB"),
    ];
    for (cpus, factor, name) in cases {
        assert_eq!(type_name(cpus, factor), name);
    }
}

#[test]
fn pods_by_memory() {
    let cases = [(1, 32), (2, 64), (3, 110), (128, 110)];
    for (gib, pods) in cases {
        assert_eq!(default_pods(gib), pods, "{gib} GiB");
    }
    // A 1 GiB type only comes from a generator run with a factor of 1.
    let one = generate(&GenerateOptions {
        cpus: vec![1],
        memory_factors: vec![1],
        ..GenerateOptions::default()
    });
    assert_eq!(one[0].name, "e1.1VCPU-1GB");
    assert_eq!(one[0].capacity.pods, 32_000);
}

#[test]
fn kube_reserved_as_upstream_computes_it() {
    // (cpu, memory, reserved CPU m, reserved memory MiB): CPU by whole vCPUs, memory 384Mi
    // for every VM of 4 MiB or more (upstream's tiers compare MiB against 1, 2, 4).
    let cases = [
        ("500m", "2Gi", 20, 384),
        ("1", "2Gi", 20, 384),
        ("2", "4Gi", 50, 384),
        ("3", "6Gi", 50, 384),
        ("4", "8Gi", 100, 384),
        ("16", "128Gi", 100, 384),
        ("0", "512Ki", 10, 128),
        ("0", "1Mi", 10, 192),
        ("0", "3Mi", 10, 256),
        ("0", "4Mi", 10, 384),
    ];
    for (cpu, memory, cpu_m, memory_mib) in cases {
        let r = kube_reserved(&Resources::parse(&[("cpu", cpu), ("memory", memory)]));
        assert_eq!(r.cpu, cpu_m, "{cpu} {memory}");
        assert_eq!(r.memory, memory_mib * MI, "{cpu} {memory}");
    }
}

/// Allocatable by upstream's formula: capacity less kube-reserved (20m/50m/100m, 384Mi),
/// system-reserved (10m, 64Mi) and the eviction threshold (100Mi).
#[test]
fn allocatable_of_built_in_types() {
    // (name, allocatable CPU m, allocatable memory MiB)
    let cases = [
        ("c1.1VCPU-2GB", 1000 - 20 - 10, 2048 - 384 - 64 - 100),
        ("s1.2VCPU-8GB", 2000 - 50 - 10, 8192 - 548),
        ("s1.4VCPU-16GB", 4000 - 100 - 10, 16384 - 548),
        ("m1.16VCPU-128GB", 16000 - 100 - 10, 131_072 - 548),
    ];
    let all = homelab(&[("pve1", 32, 256)]);
    for (name, cpu, memory) in cases {
        let it = instance_type(&spec(name), &all, &InstanceTypeOptions::default(), &never);
        assert_eq!(it.allocatable().cpu, cpu, "{name}");
        assert_eq!(it.allocatable().memory, memory * MI, "{name}");
        assert_eq!(it.allocatable().ephemeral_storage, 30 * GI, "{name}");
    }
}

#[test]
fn generator_flags_choose_the_reservations() {
    let bare = generate(&GenerateOptions {
        cpus: vec![2],
        memory_factors: vec![4],
        storage_gib: 0,
        kube_reserved: false,
        system_reserved: false,
        eviction_threshold: false,
    });
    assert_eq!(bare.len(), 1);
    assert_eq!(bare[0].overhead, Overhead::default());
    assert_eq!(bare[0].capacity.ephemeral_storage, 0);
    let kubelet_only = generate(&GenerateOptions {
        cpus: vec![2],
        memory_factors: vec![4],
        system_reserved: false,
        eviction_threshold: false,
        ..GenerateOptions::default()
    });
    assert_eq!(kubelet_only[0].overhead.kube_reserved.cpu, 50);
    assert_eq!(kubelet_only[0].overhead.system_reserved, Resources::new());
}

#[test]
fn offerings_are_available_where_the_vm_fits() {
    // pve1 and pve2 have 127 GiB for VMs, pve3 63 GiB and 8 CPUs.
    let all = homelab(&[("pve1", 32, 128), ("pve2", 32, 128), ("pve3", 8, 64)]);
    // (type, zones with room)
    let cases: [(&str, &[&str]); 4] = [
        ("c1.1VCPU-2GB", &["pve1", "pve2", "pve3"]),
        ("m1.8VCPU-64GB", &["pve1", "pve2"]),
        ("c1.16VCPU-32GB", &["pve1", "pve2"]),
        ("m1.16VCPU-128GB", &[]),
    ];
    for (name, available) in cases {
        let it = instance_type(&spec(name), &all, &InstanceTypeOptions::default(), &never);
        let zones: Vec<&str> = it.offerings.iter().map(|o| o.zone.as_str()).collect();
        assert_eq!(
            zones,
            ["pve1", "pve2", "pve3"],
            "{name}: offered in every zone"
        );
        let open: Vec<&str> = it
            .offerings
            .iter()
            .filter(|o| o.available)
            .map(|o| o.zone.as_str())
            .collect();
        assert_eq!(open, available, "{name}");
        assert!(it.offerings.iter().all(|o| o.capacity_type == "on-demand"));
        let price = pricing::on_demand(&spec(name).capacity);
        assert!(it.offerings.iter().all(|o| o.price == price), "{name}");
    }
}

#[test]
fn a_vm_being_created_takes_the_room_from_the_offerings() {
    let mut all = homelab(&[("pve1", 4, 9)]);
    let s = spec("s1.2VCPU-8GB");
    let available = |all: &Capacities| {
        instance_type(&s, all, &InstanceTypeOptions::default(), &never).offerings[0].available
    };
    assert!(available(&all));
    all.reserve("pve", "pve1", "claim", VmShape::of(&s.capacity))
        .unwrap();
    assert!(!available(&all));
}

#[test]
fn recent_launch_failures_make_offerings_unavailable() {
    let all = homelab(&[("pve1", 8, 32), ("pve2", 8, 32)]);
    let failed = |name: &str, zone: &str, ct: &str| {
        name == "c1.2VCPU-4GB" && zone == "pve2" && ct == "on-demand"
    };
    let types = instance_types(
        &default_specs(),
        &all,
        &InstanceTypeOptions::default(),
        &failed,
    );
    for it in &types {
        let pve2 = it.offerings.iter().find(|o| o.zone == "pve2").unwrap();
        // The nodes have 8 CPUs and 31 GiB for VMs.
        let fits = it.capacity.cpu <= 8000 && it.capacity.memory <= 31 * GI;
        let expected = fits && it.name != "c1.2VCPU-4GB";
        assert_eq!(pve2.available, expected, "{}", it.name);
    }
}

#[test]
fn max_pods_replaces_the_types_pods() {
    let all = homelab(&[("pve1", 8, 32)]);
    let options = InstanceTypeOptions {
        max_pods: Some(20),
        ..InstanceTypeOptions::default()
    };
    for name in ["c1.1VCPU-2GB", "s1.4VCPU-16GB"] {
        let it = instance_type(&spec(name), &all, &options, &never);
        assert_eq!(it.capacity.pods, 20_000, "{name}");
        assert_eq!(it.allocatable().pods, 20_000, "{name}");
    }
    let it = instance_type(
        &spec("c1.1VCPU-2GB"),
        &all,
        &InstanceTypeOptions::default(),
        &never,
    );
    assert_eq!(it.capacity.pods, 64_000);
}

#[test]
fn requirements_carry_upstreams_labels() {
    let all = homelab(&[("pve1", 8, 32), ("pve2", 8, 32)]);
    let it = instance_type(
        &spec("t1.2VCPU-6GB"),
        &all,
        &InstanceTypeOptions::default(),
        &never,
    );
    let r = &it.requirements;
    assert!(r.allows(INSTANCE_TYPE_LABEL, "t1.2VCPU-6GB"));
    assert!(!r.allows(INSTANCE_TYPE_LABEL, "c1.2VCPU-4GB"));
    assert!(r.allows(ARCH_LABEL, "amd64") && !r.allows(ARCH_LABEL, "arm64"));
    assert!(r.allows(OS_LABEL, "linux") && !r.allows(OS_LABEL, "windows"));
    assert!(r.allows(REGION_LABEL, "pve") && !r.allows(REGION_LABEL, "other"));
    assert!(r.allows(ZONE_LABEL, "pve2") && !r.allows(ZONE_LABEL, "pve9"));
    assert!(r.allows(CAPACITY_TYPE_LABEL, "on-demand") && !r.allows(CAPACITY_TYPE_LABEL, "spot"));
    assert!(r.allows(LABEL_INSTANCE_FAMILY, "t1") && !r.allows(LABEL_INSTANCE_FAMILY, "c1"));
    for absent in [LABEL_INSTANCE_CPU_TYPE, LABEL_INSTANCE_IMAGE_ID] {
        assert_eq!(
            r.get(absent).map(|req| req.operator()),
            Some(Operator::DoesNotExist),
            "{absent}"
        );
    }
}

#[test]
fn spot_types_are_offered_as_spot_at_half_price() {
    let mut s = spec("c1.2VCPU-4GB");
    s.capacity_type = "spot".into();
    let all = homelab(&[("pve1", 8, 32)]);
    let it = instance_type(&s, &all, &InstanceTypeOptions::default(), &never);
    assert_eq!(it.offerings[0].capacity_type, "spot");
    assert_eq!(it.offerings[0].price, pricing::on_demand(&s.capacity) * 0.5);
    assert!(it.requirements.allows(CAPACITY_TYPE_LABEL, "spot"));
    assert!(!it.requirements.allows(CAPACITY_TYPE_LABEL, "on-demand"));
}

#[test]
fn the_nodeclass_scopes_regions_and_zones() {
    let mut all = homelab(&[("pve1", 8, 32), ("pve2", 8, 32)]);
    let other = NodeStatus {
        name: "node-a".into(),
        online: true,
        cpus: 8,
        memory: 32 << 30,
        cpu_load: 0.0,
    };
    all.replace_region(
        "lab",
        vec![NodeCapacity::new("lab", &other, &HostSettings::default(), &[]).unwrap()],
    );
    let zones_of = |options: &InstanceTypeOptions| {
        let it = instance_type(&spec("c1.1VCPU-2GB"), &all, options, &never);
        let zones: Vec<String> = it.offerings.iter().map(|o| o.zone.clone()).collect();
        (zones, it.requirements.allows(REGION_LABEL, "lab"))
    };
    // Every region's nodes, as upstream offers them.
    assert_eq!(
        zones_of(&InstanceTypeOptions::default()),
        (vec!["node-a".into(), "pve1".into(), "pve2".into()], true)
    );
    let pve = InstanceTypeOptions {
        region: Some("pve".into()),
        ..InstanceTypeOptions::default()
    };
    assert_eq!(zones_of(&pve), (vec!["pve1".into(), "pve2".into()], false));
    let selected = InstanceTypeOptions {
        region: Some("pve".into()),
        zones: Some(["pve2".to_string()].into()),
        ..InstanceTypeOptions::default()
    };
    assert_eq!(zones_of(&selected), (vec!["pve2".into()], false));
}

#[test]
fn nothing_known_yet_offers_nothing() {
    let it = instance_type(
        &spec("c1.1VCPU-2GB"),
        &Capacities::new(),
        &InstanceTypeOptions::default(),
        &never,
    );
    assert!(it.offerings.is_empty());
    assert!(it.requirements.get(ZONE_LABEL).is_none());
}
