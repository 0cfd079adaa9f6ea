//! Upstream's placement cases (`instance_placement_test.go`: `TestGetValuesByKey`,
//! `TestGetCapacityType`) as tables — offerings here always name their zone, so the region
//! cases are asked of zones — and the zone order of each strategy.

use karpenter_api::Operator;
use karpenter_api::labels::{CAPACITY_TYPE_LABEL, ZONE_LABEL};
use karpenter_core::instancetype::Offering;
use karpenter_core::resources::Resources;
use karpenter_core::scheduling::Requirement;

use super::*;
use crate::capacity::{HostSettings, NodeCapacity, NodeStatus, VmShape};

const REGION: &str = "pve";

type Names<'a> = &'a [&'a str];

fn offering(zone: &str, capacity_type: &str, available: bool) -> Offering {
    Offering {
        zone: zone.into(),
        capacity_type: capacity_type.into(),
        price: 1.0,
        available,
        reservation: None,
    }
}

fn instance_type(offerings: Vec<Offering>) -> InstanceType {
    InstanceType::new(
        "type-1",
        Requirements::new(),
        offerings,
        Resources::parse(&[("cpu", "2"), ("memory", "4Gi"), ("pods", "110")]),
        Default::default(),
    )
}

fn requirements(pairs: &[(&str, &[&str])]) -> Requirements {
    pairs
        .iter()
        .map(|(key, values)| Requirement::new(key, Operator::In, values))
        .collect()
}

/// Three nodes with 8 CPUs and 17 GiB each, at the given CPU loads.
fn capacities(loads: &[(&str, f64)]) -> Capacities {
    let nodes = loads
        .iter()
        .map(|(name, load)| {
            let status = NodeStatus {
                name: (*name).into(),
                online: true,
                cpus: 8,
                memory: 17 << 30,
                cpu_load: *load,
            };
            NodeCapacity::new(REGION, &status, &HostSettings::default(), &[]).unwrap()
        })
        .collect();
    let mut all = Capacities::new();
    all.replace_region(REGION, nodes);
    all
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn offered_zones_are_the_available_ones_the_claim_allows() {
    let od = "on-demand";
    // (case, offerings, allowed zones (empty: no requirement), expected)
    let cases: [(&str, Vec<Offering>, Names<'_>, Names<'_>); 6] = [
        (
            "with-restriction",
            vec![offering("a", od, true), offering("a", od, true)],
            &["a", "b"],
            &["a"],
        ),
        (
            "with-different-restriction",
            vec![offering("a", od, true), offering("b", od, true)],
            &["a", "b"],
            &["a", "b"],
        ),
        (
            "with-different-zones",
            vec![offering("a", od, true), offering("c", od, true)],
            &["a", "b"],
            &["a"],
        ),
        (
            "empty-zones",
            vec![offering("a", od, true), offering("c", od, true)],
            &[],
            &["a", "c"],
        ),
        (
            "unavailable offerings are not offered",
            vec![offering("a", od, false), offering("b", od, true)],
            &[],
            &["b"],
        ),
        (
            "one zone per capacity type counts once",
            vec![offering("a", "spot", true), offering("a", od, true)],
            &[],
            &["a"],
        ),
    ];
    for (case, offerings, allowed, expected) in cases {
        let reqs = if allowed.is_empty() {
            Requirements::new()
        } else {
            requirements(&[(ZONE_LABEL, allowed)])
        };
        assert_eq!(
            offered_zones(&instance_type(offerings), &reqs),
            strings(expected),
            "{case}"
        );
    }
}

#[test]
fn offered_zones_follow_the_claims_capacity_types() {
    let it = instance_type(vec![
        offering("a", "spot", true),
        offering("b", "on-demand", true),
    ]);
    let reqs = requirements(&[(CAPACITY_TYPE_LABEL, &["on-demand"])]);
    assert_eq!(offered_zones(&it, &reqs), strings(&["b"]));
}

#[test]
fn capacity_types_as_upstream_chooses_them() {
    let zone = "us-west-1a";
    // (case, claim's capacity types (None: no requirement), offerings, expected)
    let cases: [(&str, Option<Names<'_>>, Vec<Offering>, &str); 6] = [
        (
            "spot-available",
            Some(&["spot", "on-demand"]),
            vec![offering(zone, "spot", true)],
            "spot",
        ),
        (
            "spot-unavailable-use-on-demand",
            Some(&["spot", "on-demand"]),
            vec![offering(zone, "on-demand", true)],
            "on-demand",
        ),
        (
            "no-capacity-type-requested-use-on-demand",
            None,
            vec![
                offering(zone, "spot", true),
                offering(zone, "on-demand", true),
            ],
            "on-demand",
        ),
        (
            "reserved-available",
            Some(&["reserved", "spot"]),
            vec![
                offering(zone, "on-demand", true),
                offering(zone, "reserved", true),
            ],
            "reserved",
        ),
        (
            "spot offered in another zone only",
            Some(&["spot", "on-demand"]),
            vec![
                offering("us-west-1b", "spot", true),
                offering(zone, "on-demand", true),
            ],
            "on-demand",
        ),
        (
            "spot offering marked unavailable",
            Some(&["spot"]),
            vec![offering(zone, "spot", false)],
            "on-demand",
        ),
    ];
    for (case, capacity_types, offerings, expected) in cases {
        let mut reqs = requirements(&[("topology.kubernetes.io/region", &["us-west-1"])]);
        reqs.add(Requirement::new(
            ZONE_LABEL,
            Operator::In,
            &["us-west-1a", "us-west-1b"],
        ));
        if let Some(types) = capacity_types {
            reqs.add(Requirement::new(CAPACITY_TYPE_LABEL, Operator::In, types));
        }
        assert_eq!(
            capacity_type(&reqs, &instance_type(offerings), zone),
            expected,
            "{case}"
        );
    }
}

#[test]
fn excluding_a_capacity_type_does_not_choose_it() {
    // Upstream reads a NotIn's values as if listed; a claim refusing spot gets on demand.
    let mut reqs = Requirements::new();
    reqs.add(Requirement::new(
        CAPACITY_TYPE_LABEL,
        Operator::NotIn,
        &["spot"],
    ));
    let it = instance_type(vec![
        offering("a", "spot", true),
        offering("a", "on-demand", true),
    ]);
    assert_eq!(capacity_type(&reqs, &it, "a"), "on-demand");
}

#[test]
fn zone_balance_reads_the_nodeclass_value() {
    let cases = [
        (None, ZoneBalance::Balanced),
        (Some(""), ZoneBalance::Balanced),
        (Some("Balanced"), ZoneBalance::Balanced),
        (Some("AvailabilityFirst"), ZoneBalance::AvailabilityFirst),
        (Some("availabilityfirst"), ZoneBalance::Balanced),
    ];
    for (value, expected) in cases {
        assert_eq!(ZoneBalance::from_spec(value), expected, "{value:?}");
    }
    assert_eq!(ZoneBalance::AvailabilityFirst.as_str(), "AvailabilityFirst");
}

#[test]
fn balanced_puts_the_least_loaded_zone_first() {
    let all = capacities(&[("pve1", 0.50), ("pve2", 0.10), ("pve3", 0.30)]);
    // (case, zones asked, order)
    let cases: [(&str, &[&str], &[&str]); 4] = [
        (
            "by load",
            &["pve1", "pve2", "pve3"],
            &["pve2", "pve3", "pve1"],
        ),
        (
            "input order does not matter",
            &["pve3", "pve1", "pve2"],
            &["pve2", "pve3", "pve1"],
        ),
        ("unknown nodes are dropped", &["pve9", "pve1"], &["pve1"]),
        ("a single unknown node too", &["pve9"], &[]),
    ];
    for (case, zones, expected) in cases {
        let order = order_zones(
            ZoneBalance::Balanced,
            REGION,
            &strings(zones),
            &all,
            "claim",
        );
        assert_eq!(order, strings(expected), "{case}");
    }
}

#[test]
fn balanced_ties_go_to_fewer_creates_then_by_name() {
    let mut all = capacities(&[("pve1", 0.2), ("pve2", 0.2), ("pve3", 0.2)]);
    let zones = strings(&["pve3", "pve2", "pve1"]);
    let order = |all: &Capacities| order_zones(ZoneBalance::Balanced, REGION, &zones, all, "x");
    assert_eq!(order(&all), strings(&["pve1", "pve2", "pve3"]));
    let shape = VmShape {
        cpus: 1,
        memory: 1 << 30,
    };
    all.reserve(REGION, "pve1", "claim-a", shape).unwrap();
    assert_eq!(order(&all), strings(&["pve2", "pve3", "pve1"]));
    all.reserve(REGION, "pve2", "claim-b", shape).unwrap();
    assert_eq!(order(&all), strings(&["pve3", "pve1", "pve2"]));
    // Load still comes first.
    all.set_cpu_load(REGION, "pve1", 0.1);
    assert_eq!(order(&all)[0], "pve1");
}

#[test]
fn availability_first_shuffles_by_the_seed() {
    let names = ["pve1", "pve2", "pve3", "pve4"];
    let all = capacities(&names.map(|n| (n, 0.0)));
    let zones = strings(&names);
    let order = |seed: &str, zones: &[String]| {
        order_zones(ZoneBalance::AvailabilityFirst, REGION, zones, &all, seed)
    };
    let mut firsts = BTreeSet::new();
    for i in 0..40 {
        let seed = format!("nodeclaim-{i}");
        let shuffled = order(&seed, &zones);
        let mut sorted = shuffled.clone();
        sorted.sort();
        assert_eq!(sorted, zones, "{seed}: a permutation of the zones");
        assert_eq!(
            order(&seed, &zones),
            shuffled,
            "{seed}: the same seed, the same order"
        );
        let reversed: Vec<String> = zones.iter().rev().cloned().collect();
        assert_eq!(
            order(&seed, &reversed),
            shuffled,
            "{seed}: whatever the input order"
        );
        firsts.insert(shuffled[0].clone());
    }
    assert_eq!(
        firsts.len(),
        names.len(),
        "every zone comes first for some NodeClaim"
    );
}

#[test]
fn zones_for_a_create_are_offered_selected_and_roomy() {
    // pve3 is busy (least room), pve2 not selected by the NodeClass.
    let mut all = capacities(&[("pve1", 0.4), ("pve2", 0.0), ("pve3", 0.1), ("pve4", 0.2)]);
    let shape = VmShape {
        cpus: 7,
        memory: 1 << 30,
    };
    all.reserve(REGION, "pve3", "other-claim", shape).unwrap();
    let it = instance_type(
        ["pve1", "pve2", "pve3", "pve4"]
            .iter()
            .map(|z| offering(z, "on-demand", true))
            .collect(),
    );
    let selected = strings(&["pve1", "pve3", "pve4"]);
    let request = |reqs| PlacementRequest {
        instance_type: &it,
        requirements: reqs,
        region: REGION,
        selected_zones: &selected,
        strategy: ZoneBalance::Balanced,
        seed: "claim",
    };
    let any = Requirements::new();
    assert_eq!(
        zones_for_create(&request(&any), &all),
        strings(&["pve4", "pve1"])
    );
    let only_pve1 = requirements(&[(ZONE_LABEL, &["pve1", "pve2"])]);
    assert_eq!(
        zones_for_create(&request(&only_pve1), &all),
        strings(&["pve1"])
    );
    let elsewhere = requirements(&[(ZONE_LABEL, &["pve2"])]);
    assert!(zones_for_create(&request(&elsewhere), &all).is_empty());
    let other_region = PlacementRequest {
        region: "other",
        ..request(&any)
    };
    assert!(zones_for_create(&other_region, &all).is_empty());
}
