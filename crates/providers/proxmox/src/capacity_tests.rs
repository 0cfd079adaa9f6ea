//! Upstream's cases for the `simple` policy and the resource manager
//! (`cpumanager/policy_simple_test.go`, `resourcemanager/resourcemanager_test.go`,
//! `docs/noderesource.md`'s example) as tables, and the reservations of VMs being created.

use super::*;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const REGION: &str = "pve";

/// Running VMs as (vCPUs, affinity).
type Vms<'a> = &'a [(u32, Option<&'a str>)];

fn node(name: &str, cpus: u32, memory_gib: u64) -> NodeStatus {
    NodeStatus {
        name: name.into(),
        online: true,
        cpus,
        memory: memory_gib * GIB,
        cpu_load: 0.0,
    }
}

fn vm(id: u32, cpus: u32, memory_mib: u64, affinity: Option<&str>) -> VmStatus {
    VmStatus {
        id,
        name: format!("vm-{id}"),
        node: "pve1".into(),
        running: true,
        cpus,
        memory: memory_mib * MIB,
        affinity: affinity.map(|a| CpuSet::parse(a).unwrap()),
    }
}

fn settings(reserved_cpus: &str, reserved_memory: u64) -> HostSettings {
    HostSettings {
        reserved_cpus: CpuSet::parse(reserved_cpus).unwrap(),
        reserved_memory,
        ..HostSettings::default()
    }
}

/// upstream's `topoDualSocketHT` host: 12 CPUs, 32 GiB, no memory reserved.
fn dual_socket(reserved_cpus: &str, vms: &[VmStatus]) -> NodeCapacity {
    NodeCapacity::new(
        REGION,
        &node("pve1", 12, 32),
        &settings(reserved_cpus, 0),
        vms,
    )
    .unwrap()
}

fn one_node(capacity: NodeCapacity) -> Capacities {
    let mut all = Capacities::new();
    all.replace_region(REGION, vec![capacity]);
    all
}

#[test]
fn running_vms_take_their_cpus_and_pinned_cpus_count_once() {
    // (case, reserved CPUs, running VMs as (cpus, affinity), free CPUs)
    let cases: [(&str, &str, Vms<'_>, u32); 9] = [
        ("nothing running", "", &[], 12),
        ("floating vCPUs", "", &[(4, None)], 8),
        ("pinned CPUs", "", &[(4, Some("2-3,10-11"))], 8),
        ("floating beside reserved", "0-1", &[(8, None)], 2),
        ("pinned beside reserved", "0-1", &[(2, Some("3-4"))], 8),
        // Only CPU 2 is not reserved: the VM takes one CPU of the ten.
        ("pinned over reserved", "0-1", &[(2, Some("1-2"))], 9),
        ("pinned to reserved only", "0-1", &[(2, Some("0-1"))], 10),
        // Upstream skips a VM that does not fit and so shows the room as free; it is taken.
        ("more vCPUs than the host", "", &[(16, None)], 0),
        ("pinned beyond the host", "", &[(16, Some("0-15"))], 0),
    ];
    for (case, reserved, vms, free) in cases {
        let vms: Vec<VmStatus> = vms
            .iter()
            .enumerate()
            .map(|(i, (cpus, affinity))| vm(i as u32 + 100, *cpus, 1024, *affinity))
            .collect();
        assert_eq!(dual_socket(reserved, &vms).free().cpus, free, "{case}");
    }
}

/// upstream's resource manager cases: 16 CPUs in two NUMA nodes of 16 GiB, 1 GiB reserved.
#[test]
fn the_resource_managers_cases() {
    let numa = HostSettings {
        numa_nodes: [(0, "0-7"), (1, "8-15")]
            .into_iter()
            .map(|(id, cpus)| {
                (
                    id,
                    NumaNode {
                        cpus: CpuSet::parse(cpus).unwrap(),
                        memory: 16 * GIB,
                    },
                )
            })
            .collect(),
        ..HostSettings::default()
    };
    let cases: [(&str, Vms<'_>, u32, u64); 5] = [
        ("empty", &[], 16, 31_744),
        ("one VM", &[(4, None)], 12, 23_552),
        ("two VMs", &[(4, None), (4, None)], 8, 15_360),
        (
            "a pinned and a floating VM",
            &[(4, Some("0-1,8-9")), (4, None)],
            8,
            15_360,
        ),
        (
            "two VMs pinned with an overlap",
            &[(4, Some("0-1,8-9")), (4, Some("2-3,8-9"))],
            10,
            15_360,
        ),
    ];
    for (case, vms, cpus, memory_mib) in cases {
        let vms: Vec<VmStatus> = vms
            .iter()
            .enumerate()
            .map(|(i, (c, a))| vm(i as u32 + 1, *c, 8192, *a))
            .collect();
        // The API's figures (32 CPUs, 64 GiB) give way to the NUMA nodes of the settings.
        let capacity = NodeCapacity::new(REGION, &node("pve1", 32, 64), &numa, &vms).unwrap();
        assert_eq!(
            capacity.free(),
            VmShape {
                cpus,
                memory: memory_mib * MIB
            },
            "{case}"
        );
    }
}

#[test]
fn the_documented_example() {
    // 16 vCPUs and 64 GB; two VMs pinned to 0-3 and 2-4 with 16 GB each: 0-4 are used, so 11
    // vCPUs and 32 GB are free (the example reserves nothing for the host).
    let vms = [
        vm(1, 4, 16 * 1024, Some("0-3")),
        vm(2, 3, 16 * 1024, Some("2-4")),
    ];
    let capacity =
        NodeCapacity::new(REGION, &node("pve1", 16, 64), &settings("", 0), &vms).unwrap();
    assert_eq!(capacity.used().cpus, 5);
    assert_eq!(
        capacity.free(),
        VmShape {
            cpus: 11,
            memory: 32 * GIB
        }
    );
    // With the default settings the host keeps 1 GiB.
    let capacity = NodeCapacity::new(
        REGION,
        &node("pve1", 16, 64),
        &HostSettings::default(),
        &vms,
    )
    .unwrap();
    assert_eq!(capacity.free().memory, 31 * GIB);
}

#[test]
fn only_running_vms_on_the_node_count() {
    let mut elsewhere = vm(1, 4, 4096, None);
    elsewhere.node = "pve2".into();
    let mut stopped = vm(2, 4, 4096, None);
    stopped.running = false;
    let here = vm(3, 2, 2048, None);
    let capacity = dual_socket("", &[elsewhere, stopped, here]);
    assert_eq!(
        capacity.free(),
        VmShape {
            cpus: 10,
            memory: 30 * GIB
        }
    );
}

#[test]
fn settings_that_reserve_everything_leave_the_node_out() {
    let too_many_cpus = NodeCapacity::new(REGION, &node("pve1", 2, 8), &settings("0-3", GIB), &[]);
    assert_eq!(
        too_many_cpus.unwrap_err().to_string(),
        "node pve/pve1: 4 reserved CPUs, but the node has 2"
    );
    let all_memory = NodeCapacity::new(REGION, &node("pve1", 2, 1), &HostSettings::default(), &[]);
    assert!(matches!(
        all_memory,
        Err(CapacityError::ReservedMemory { reserved, memory, .. }) if reserved == GIB && memory == GIB
    ));
}

#[test]
fn region_nodes_skip_offline_nodes_and_report_unusable_ones() {
    let mut offline = node("pve3", 8, 16);
    offline.online = false;
    let file = NodeSettingsFile::parse(
        r#"{"pve": {"pve1": {"reservedcpus": [0, 1]}, "pve2": {"reservedmemory": 17179869184}}}"#,
    )
    .unwrap();
    let (nodes, errors) = region_nodes(
        REGION,
        &[node("pve1", 8, 16), node("pve2", 8, 16), offline],
        &[vm(1, 2, 1024, None)],
        Some(&file),
    );
    let names: Vec<&str> = nodes.iter().map(NodeCapacity::name).collect();
    assert_eq!(names, ["pve1"]);
    // 8 CPUs less two reserved less the VM's two; 16 GiB less 1 GiB less 1 GiB.
    assert_eq!(
        nodes[0].free(),
        VmShape {
            cpus: 4,
            memory: 14 * GIB
        }
    );
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0].to_string().starts_with("node pve/pve2: "),
        "{}",
        errors[0]
    );
}

#[test]
fn reservations_fail_where_upstreams_allocate_does() {
    // (case, reserved CPUs, vCPUs, memory GiB, error)
    let cases: [(&str, &str, u32, u64, Option<&str>); 6] = [
        ("some CPUs", "", 4, 4, None),
        ("some CPUs beside reserved", "0-1", 8, 4, None),
        ("every CPU", "", 12, 4, None),
        (
            "more CPUs than free",
            "",
            16,
            4,
            Some("zone pve/pve1: not enough CPUs: requested 16, free 12"),
        ),
        (
            "more memory than free",
            "",
            8,
            34,
            Some("zone pve/pve1: not enough memory: requested 36507222016 bytes, free 34359738368"),
        ),
        (
            "more CPUs than free beside reserved",
            "0-1",
            16,
            32,
            Some("zone pve/pve1: not enough CPUs: requested 16, free 10"),
        ),
    ];
    for (case, reserved, cpus, memory_gib, error) in cases {
        let mut all = one_node(dual_socket(reserved, &[]));
        let before = all.free(REGION, "pve1").unwrap();
        let shape = VmShape {
            cpus,
            memory: memory_gib * GIB,
        };
        match error {
            Some(message) => {
                let e = all.reserve(REGION, "pve1", "claim", shape).unwrap_err();
                assert_eq!(e.to_string(), message, "{case}");
                assert_eq!(all.free(REGION, "pve1").unwrap(), before, "{case}");
            }
            None => {
                all.reserve(REGION, "pve1", "claim", shape).unwrap();
                let after = all.free(REGION, "pve1").unwrap();
                assert_eq!(after.cpus, before.cpus - cpus, "{case}");
                assert_eq!(after.memory, before.memory - memory_gib * GIB, "{case}");
                assert!(all.release("claim"), "{case}");
                assert_eq!(all.free(REGION, "pve1").unwrap(), before, "{case}");
            }
        }
    }
}

#[test]
fn two_creates_cannot_both_take_the_last_room() {
    // Room for one 4-vCPU VM: 6 CPUs, 9 GiB less the 1 GiB the host keeps.
    let capacity =
        NodeCapacity::new(REGION, &node("pve1", 6, 9), &HostSettings::default(), &[]).unwrap();
    let mut all = one_node(capacity);
    let four = Resources::parse(&[("cpu", "4"), ("memory", "4Gi")]);
    assert!(all.fits(REGION, "pve1", &four));
    all.reserve(REGION, "pve1", "first", VmShape::of(&four))
        .unwrap();
    assert!(
        !all.fits(REGION, "pve1", &four),
        "the first create holds the room"
    );
    assert!(matches!(
        all.reserve(REGION, "pve1", "second", VmShape::of(&four)),
        Err(CapacityError::NotEnoughCpus {
            requested: 4,
            free: 2,
            ..
        })
    ));
    // A retried create of the first moves its reservation rather than adding one.
    all.reserve(REGION, "pve1", "first", VmShape::of(&four))
        .unwrap();
    assert_eq!(all.pending_count(REGION, "pve1"), 1);
    // The first fails: its room is free again.
    assert!(all.release("first"));
    assert!(!all.release("first"));
    all.reserve(REGION, "pve1", "second", VmShape::of(&four))
        .unwrap();
}

#[test]
fn a_reservation_ends_when_the_api_lists_the_vm_running() {
    let host = node("pve1", 8, 9);
    let mut all =
        one_node(NodeCapacity::new(REGION, &host, &HostSettings::default(), &[]).unwrap());
    let shape = VmShape {
        cpus: 4,
        memory: 4 * GIB,
    };
    all.reserve(REGION, "pve1", "claim-a", shape).unwrap();
    let expected = VmShape {
        cpus: 4,
        memory: 4 * GIB,
    };
    // Cloned but not started: not counted by the API yet, still pending.
    let mut listed = VmStatus {
        id: 101,
        name: "claim-a".into(),
        node: "pve1".into(),
        running: false,
        cpus: 4,
        memory: 4 * GIB,
        affinity: None,
    };
    let read =
        |vms: &[VmStatus]| NodeCapacity::new(REGION, &host, &HostSettings::default(), vms).unwrap();
    all.replace_region(REGION, vec![read(std::slice::from_ref(&listed))]);
    assert_eq!(all.pending_count(REGION, "pve1"), 1);
    assert_eq!(all.free(REGION, "pve1"), Some(expected));
    // Running: counted by its node, no longer pending; the room is taken once.
    listed.running = true;
    all.replace_region(REGION, vec![read(std::slice::from_ref(&listed))]);
    assert_eq!(all.pending_count(REGION, "pve1"), 0);
    assert_eq!(all.free(REGION, "pve1"), Some(expected));
    // Deleted: forgetting it frees the room before the next read.
    assert!(all.forget_vm(REGION, "pve1", 101));
    assert_eq!(all.free(REGION, "pve1").unwrap().cpus, 8);
    // Another region's read leaves this region's reservations alone.
    all.reserve(REGION, "pve1", "claim-b", shape).unwrap();
    all.replace_region("other", vec![]);
    assert_eq!(all.pending_count(REGION, "pve1"), 1);
}

#[test]
fn unknown_zones_hold_nothing() {
    let mut all = one_node(dual_socket("", &[]));
    let tiny = Resources::parse(&[("cpu", "1"), ("memory", "1Mi")]);
    assert!(!all.fits(REGION, "pve9", &tiny));
    assert!(!all.fits("elsewhere", "pve1", &tiny));
    assert_eq!(
        all.reserve(REGION, "pve9", "claim", VmShape::of(&tiny))
            .unwrap_err()
            .to_string(),
        "zone pve/pve9 is not known"
    );
}

#[test]
fn fit_compares_the_types_quantities() {
    // 12 CPUs and 32 GiB free.
    let all = one_node(dual_socket("", &[]));
    let cases = [
        ("12", "32Gi", true),
        ("12001m", "1Gi", false),
        ("1", "32Gi", true),
        ("1", "34359738369", false),
        ("11500m", "1Gi", true),
    ];
    for (cpu, memory, fits) in cases {
        let capacity = Resources::parse(&[("cpu", cpu), ("memory", memory)]);
        assert_eq!(all.fits(REGION, "pve1", &capacity), fits, "{cpu} {memory}");
    }
}

#[test]
fn vm_shapes_round_cpus_up() {
    let cases = [("1", 1), ("1500m", 2), ("100m", 1), ("16", 16)];
    for (cpu, cpus) in cases {
        let shape = VmShape::of(&Resources::parse(&[("cpu", cpu), ("memory", "3Gi")]));
        assert_eq!(shape.cpus, cpus, "{cpu}");
        assert_eq!(shape.memory, 3 * GIB);
    }
}

#[test]
fn cpu_load_is_a_truncated_percent() {
    let mut host = node("pve1", 4, 8);
    host.cpu_load = 0.257;
    let mut all =
        one_node(NodeCapacity::new(REGION, &host, &HostSettings::default(), &[]).unwrap());
    assert_eq!(all.node(REGION, "pve1").unwrap().cpu_load(), 25);
    all.set_cpu_load(REGION, "pve1", 0.999);
    assert_eq!(all.node(REGION, "pve1").unwrap().cpu_load(), 99);
    all.set_cpu_load(REGION, "pve1", f64::NAN);
    assert_eq!(all.node(REGION, "pve1").unwrap().cpu_load(), 0);
}
