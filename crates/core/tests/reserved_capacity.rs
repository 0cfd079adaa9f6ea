//! Upstream's "Reserved Instance Types" scheduling cases (`scheduling/suite_test.go`), played
//! over several provisioning rounds: each round launches its NodeClaims as upstream's fake
//! provider does (the cheapest instance type, its cheapest allowed offering) and a launch into a
//! reservation takes one instance of it, marking the offering unavailable when none is left.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use karpenter_api::Operator;
use karpenter_core::instancetype::fake::FakeInstanceType;
use karpenter_core::instancetype::{InstanceType, Offering, Reservation};
use karpenter_core::provisioning::scheduling::{
    BoundPod, NodePoolInput, ReservedOfferingMode, Results, Scheduler,
};
use support::*;

const RESERVATION_LABEL: &str = "karpenter.test.sh/reservation-id";
const NODE_POOL: &str = "karpenter.sh/nodepool";

fn reserved(zone: &str, id: &str, capacity: u32, price: f64) -> Offering {
    Offering {
        zone: zone.into(),
        capacity_type: "reserved".into(),
        price,
        available: true,
        reservation: Some(Reservation {
            id: id.into(),
            capacity,
            label: RESERVATION_LABEL.into(),
        }),
    }
}

/// Upstream's fake type with its five default offerings plus `extra` (reserved ones).
fn instance_type(name: &str, cpu: &str, memory: &str, extra: Vec<Offering>) -> InstanceType {
    let mut it = FakeInstanceType::new(name)
        .resources(&[("cpu", cpu), ("memory", memory)])
        .build();
    // Reserved capacity is all but free: upstream's fake divides the price by 100,000.
    let price = it.offerings[0].price;
    for mut o in extra {
        o.price = price / 100_000.0;
        it.offerings.push(o);
    }
    let mut cts: Vec<String> = it
        .offerings
        .iter()
        .map(|o| o.capacity_type.clone())
        .collect();
    cts.sort();
    cts.dedup();
    it.requirements.remove(CAPACITY_TYPE);
    it.requirements
        .add(karpenter_core::scheduling::Requirement::new(
            CAPACITY_TYPE,
            Operator::In,
            &cts,
        ));
    it
}

/// Upstream's three types; medium and small each have one instance reserved in test-zone-1.
fn catalog() -> Vec<InstanceType> {
    vec![
        instance_type("large-instance-type", "6", "6Gi", vec![]),
        instance_type(
            "medium-instance-type",
            "3",
            "3Gi",
            vec![reserved("test-zone-1", "r-medium-instance-type", 1, 0.0)],
        ),
        instance_type(
            "small-instance-type",
            "2",
            "2Gi",
            vec![reserved("test-zone-1", "r-small-instance-type", 1, 0.0)],
        ),
    ]
}

/// A launched node.
#[derive(Clone, Debug)]
struct Launched {
    labels: BTreeMap<String, String>,
    pods: Vec<usize>,
}

impl Launched {
    fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).map(String::as_str)
    }
}

/// NodePools with their own copies of the instance types (capacity counts down per launch).
struct Cluster {
    pools: Vec<(PoolBuilder, Vec<InstanceType>)>,
    nodes: Vec<karpenter_core::provisioning::scheduling::ExistingNodeInput>,
    mode: ReservedOfferingMode,
    gate: bool,
}

impl Cluster {
    fn new(pools: Vec<(PoolBuilder, Vec<InstanceType>)>) -> Self {
        Self {
            pools,
            nodes: Vec::new(),
            mode: ReservedOfferingMode::Strict,
            gate: true,
        }
    }

    /// One provisioning round over `pods`: what launched, and the results.
    fn provision(&mut self, pods: &[Pod]) -> (Vec<Launched>, Results) {
        let inputs: Vec<NodePoolInput> = self
            .pools
            .iter()
            .map(|(p, types)| NodePoolInput {
                node_pool: p.0.clone(),
                instance_types: types.iter().cloned().map(Arc::new).collect(),
            })
            .collect();
        let mut options = Env::new(node_pool("unused")).options;
        options.reserved_offering_mode = self.mode;
        options.reserved_capacity = self.gate;
        let results = Scheduler::new(&inputs, &self.nodes, &[], options).solve(pods, &|| false);
        let mut launched = Vec::new();
        for claim in &results.new_node_claims {
            let it = claim.instance_types.first().expect("a claim lists a type");
            let offering = it
                .compatible_offerings(&claim.requirements)
                .min_by(|a, b| a.price.total_cmp(&b.price))
                .expect("the cheapest type has an offering the claim allows")
                .clone();
            let mut labels = claim.labels.clone();
            labels.insert(INSTANCE_TYPE.into(), it.name.clone());
            labels.insert(ZONE.into(), offering.zone.clone());
            labels.insert(CAPACITY_TYPE.into(), offering.capacity_type.clone());
            labels.insert(NODE_POOL.into(), claim.node_pool.clone());
            if let Some(r) = &offering.reservation {
                labels.insert(r.label.clone(), r.id.clone());
                self.take(&r.id);
            }
            let name = format!("node-{}", self.nodes.len());
            labels.insert(HOSTNAME.into(), name.clone());
            let mut node = existing_node(&name, &[], &[("cpu", "6"), ("memory", "6Gi")]);
            node.labels = labels.clone();
            node.pods = BoundPod::all(claim.pods.iter().map(|&p| &pods[p]));
            self.nodes.push(node);
            launched.push(Launched {
                labels,
                pods: claim.pods.clone(),
            });
        }
        (launched, results)
    }

    /// As upstream's fake provider: a launch takes one instance of the reservation, in every
    /// NodePool offering it.
    fn take(&mut self, id: &str) {
        for (_, types) in &mut self.pools {
            for it in types {
                for o in &mut it.offerings {
                    if let Some(r) = o.reservation.as_mut().filter(|r| r.id == id) {
                        r.capacity -= 1;
                        if r.capacity == 0 {
                            o.available = false;
                        }
                    }
                }
            }
        }
    }
}

fn remaining(pods: &[Pod], launched: &[Launched]) -> Vec<Pod> {
    (0..pods.len())
        .filter(|i| !launched.iter().any(|l| l.pods.contains(i)))
        .map(|i| pods[i].clone())
        .collect()
}

fn scheduled(launched: &[Launched]) -> usize {
    launched.iter().map(|l| l.pods.len()).sum()
}

/// A pod that repels its peers per host, on `instance_type` (and in `node_pool` if given).
fn spread_pod(instance_type: &str) -> PodBuilder {
    spread_pod_in(instance_type, None)
}

fn spread_pod_in(instance_type: &str, node_pool: Option<&str>) -> PodBuilder {
    let pod = pod()
        .labels(&[("app", "test")])
        .anti_affinity_to(HOSTNAME, &[("app", "test")]);
    // One term: separate terms would be alternatives.
    match node_pool {
        Some(np) => pod.require(&[
            (INSTANCE_TYPE, "In", &[instance_type]),
            (NODE_POOL, "In", &[np]),
        ]),
        None => pod.require(&[(INSTANCE_TYPE, "In", &[instance_type])]),
    }
}

#[test]
fn no_fallback_to_on_demand_or_spot_while_compatible_reservations_exist() {
    let mut cluster = Cluster::new(vec![(node_pool("default"), catalog())]);
    // Fits on small and medium, but two do not fit on medium.
    let pods = pod().cpu("1800m").times(3);

    // The one claim holds both reservations (the launch may pick either type), so the other
    // pods wait instead of falling back to a large on-demand or spot node.
    let (launched, results) = cluster.provision(&pods);
    assert_eq!(scheduled(&launched), 1, "{:?}", results.pod_errors);
    assert_eq!(
        results.deferred.len(),
        2,
        "the others are deferred, not unschedulable"
    );
    let node = &launched[0];
    assert_eq!(node.label(RESERVATION_LABEL), Some("r-small-instance-type"));
    assert_eq!(node.label(CAPACITY_TYPE), Some("reserved"));
    assert_eq!(node.label(INSTANCE_TYPE), Some("small-instance-type"));

    let pods = remaining(&pods, &launched);
    let (launched, _) = cluster.provision(&pods);
    assert_eq!(scheduled(&launched), 1);
    let node = &launched[0];
    assert_eq!(
        node.label(RESERVATION_LABEL),
        Some("r-medium-instance-type")
    );
    assert_eq!(node.label(CAPACITY_TYPE), Some("reserved"));
    assert_eq!(node.label(INSTANCE_TYPE), Some("medium-instance-type"));

    // Both reservations are used up: the last pod falls back.
    let pods = remaining(&pods, &launched);
    let (launched, results) = cluster.provision(&pods);
    assert_eq!(scheduled(&launched), 1, "{:?}", results.pod_errors);
    let node = &launched[0];
    assert_eq!(node.label(RESERVATION_LABEL), None);
    assert_ne!(node.label(CAPACITY_TYPE), Some("reserved"));
    assert_eq!(node.label(INSTANCE_TYPE), Some("small-instance-type"));
}

#[test]
fn reservations_shared_across_node_pools_count_once() {
    let mut cluster = Cluster::new(vec![
        (node_pool("np-1"), catalog()),
        (node_pool("np-2"), catalog()),
    ]);
    let pods: Vec<Pod> = (1..=2)
        .map(|i| spread_pod_in("small-instance-type", Some(&format!("np-{i}"))).build())
        .collect();
    let (launched, _) = cluster.provision(&pods);
    assert_eq!(scheduled(&launched), 1);
    assert_eq!(
        launched[0].label(RESERVATION_LABEL),
        Some("r-small-instance-type")
    );
    assert_eq!(launched[0].label(CAPACITY_TYPE), Some("reserved"));

    let pods = remaining(&pods, &launched);
    let (launched, _) = cluster.provision(&pods);
    assert_eq!(scheduled(&launched), 1);
    assert_eq!(launched[0].label(RESERVATION_LABEL), None);
    assert_ne!(launched[0].label(CAPACITY_TYPE), Some("reserved"));
    assert_eq!(
        launched[0].label(INSTANCE_TYPE),
        Some("small-instance-type")
    );
}

#[test]
fn distinct_reservations_per_node_pool_for_one_instance_pool() {
    let distinct = instance_type(
        "small-instance-type",
        "2",
        "2Gi",
        vec![reserved("test-zone-1", "r-distinct", 1, 0.0)],
    );
    let mut cluster = Cluster::new(vec![
        (node_pool("np-1"), catalog()),
        (node_pool("np-2"), vec![distinct]),
    ]);
    let pods: Vec<Pod> = (1..=2)
        .map(|i| spread_pod_in("small-instance-type", Some(&format!("np-{i}"))).build())
        .collect();
    let (launched, results) = cluster.provision(&pods);
    assert_eq!(scheduled(&launched), 2, "{:?}", results.pod_errors);
    for node in &launched {
        assert_eq!(node.label(CAPACITY_TYPE), Some("reserved"));
        assert_eq!(node.label(INSTANCE_TYPE), Some("small-instance-type"));
    }
    assert_ne!(
        launched[0].label(RESERVATION_LABEL),
        launched[1].label(RESERVATION_LABEL)
    );
}

#[test]
fn several_reservations_for_one_instance_pool() {
    let mut types = catalog();
    let small = types
        .iter_mut()
        .find(|it| it.name == "small-instance-type")
        .unwrap();
    let price = small.offerings[0].price / 100_000.0;
    small
        .offerings
        .push(reserved("test-zone-1", "r-small-instance-type-2", 2, price));
    let mut cluster = Cluster::new(vec![(node_pool("default"), types)]);
    let pods: Vec<Pod> = (0..4)
        .map(|_| spread_pod("small-instance-type").build())
        .collect();

    // Three instances are reserved in all, but each claim holds both reservations: two launch.
    let (launched, _) = cluster.provision(&pods);
    assert_eq!(scheduled(&launched), 2);
    for node in &launched {
        assert!(node.label(RESERVATION_LABEL).is_some());
        assert_eq!(node.label(CAPACITY_TYPE), Some("reserved"));
    }
    // One instance is left in one of them; the pessimistic count still defers the last pod.
    let pods = remaining(&pods, &launched);
    let (launched, _) = cluster.provision(&pods);
    assert_eq!(scheduled(&launched), 1);
    assert_eq!(launched[0].label(CAPACITY_TYPE), Some("reserved"));
    // None left: on-demand or spot.
    let pods = remaining(&pods, &launched);
    let (launched, _) = cluster.provision(&pods);
    assert_eq!(scheduled(&launched), 1);
    assert_eq!(launched[0].label(RESERVATION_LABEL), None);
    assert_ne!(launched[0].label(CAPACITY_TYPE), Some("reserved"));
    assert_eq!(
        launched[0].label(INSTANCE_TYPE),
        Some("small-instance-type")
    );
}

#[test]
fn no_fallback_to_a_lighter_node_pool_while_a_reservation_is_held() {
    let fallback_type = instance_type(
        "small-instance-type",
        "2",
        "2Gi",
        vec![reserved("test-zone-1", "r-fallback", 1, 0.0)],
    );
    let mut cluster = Cluster::new(vec![
        (node_pool("np-primary").weight(100), catalog()),
        (node_pool("np-fallback").weight(50), vec![fallback_type]),
    ]);
    let pods: Vec<Pod> = (0..2)
        .map(|_| spread_pod("small-instance-type").build())
        .collect();
    let (launched, _) = cluster.provision(&pods);
    assert_eq!(scheduled(&launched), 1);
    assert_eq!(launched[0].label(NODE_POOL), Some("np-primary"));
    assert_eq!(launched[0].label(CAPACITY_TYPE), Some("reserved"));

    // The primary pool's reservation is used up: the heavier pool still wins, on demand.
    let pods = remaining(&pods, &launched);
    let (launched, _) = cluster.provision(&pods);
    assert_eq!(scheduled(&launched), 1);
    assert_eq!(launched[0].label(NODE_POOL), Some("np-primary"));
    assert_eq!(launched[0].label(RESERVATION_LABEL), None);
    assert_ne!(launched[0].label(CAPACITY_TYPE), Some("reserved"));
}

#[test]
fn preferences_are_not_relaxed_for_a_reserved_offering_error() {
    let distinct = instance_type(
        "small-instance-type",
        "2",
        "2Gi",
        vec![reserved("test-zone-1", "r-distinct", 1, 0.0)],
    );
    // Equal weights: names in reverse order make np-2 the first choice once the preference
    // for np-1 is relaxed.
    let mut cluster = Cluster::new(vec![
        (node_pool("np-1"), catalog()),
        (node_pool("np-2"), vec![distinct]),
    ]);
    let pods: Vec<Pod> = (0..2)
        .map(|_| {
            spread_pod("small-instance-type")
                .prefer(1, &[(NODE_POOL, "In", &["np-1"])])
                .build()
        })
        .collect();
    let (launched, results) = cluster.provision(&pods);
    assert_eq!(scheduled(&launched), 1, "{:?}", results.pod_errors);
    assert_eq!(launched[0].label(NODE_POOL), Some("np-1"));
    assert_eq!(launched[0].label(CAPACITY_TYPE), Some("reserved"));
    assert_eq!(results.deferred.len(), 1);

    // Still preferring np-1: it goes there on demand, though np-2 has a reservation left.
    let pods = remaining(&pods, &launched);
    let (launched, _) = cluster.provision(&pods);
    assert_eq!(scheduled(&launched), 1);
    assert_eq!(launched[0].label(NODE_POOL), Some("np-1"));
    assert_eq!(launched[0].label(RESERVATION_LABEL), None);
    assert_ne!(launched[0].label(CAPACITY_TYPE), Some("reserved"));
}

#[test]
fn several_pods_share_a_reserved_node() {
    let mut cluster = Cluster::new(vec![(node_pool("np-1"), catalog())]);
    let pods: Vec<Pod> = (0..2)
        .map(|_| {
            pod()
                .labels(&[("app", "test")])
                .require(&[
                    (INSTANCE_TYPE, "In", &["small-instance-type"]),
                    (NODE_POOL, "In", &["np-1"]),
                    (CAPACITY_TYPE, "In", &["reserved"]),
                    (ZONE, "In", &["test-zone-1"]),
                ])
                .affinity_to(ZONE, &[("app", "test")])
                .build()
        })
        .collect();
    let (launched, results) = cluster.provision(&pods);
    assert_eq!(launched.len(), 1, "{:?}", results.pod_errors);
    assert_eq!(launched[0].pods.len(), 2);
    assert_eq!(
        launched[0].label(RESERVATION_LABEL),
        Some("r-small-instance-type")
    );
    assert_eq!(launched[0].label(CAPACITY_TYPE), Some("reserved"));
}

#[test]
fn fallback_mode_places_every_pod_and_only_holders_launch_reserved() {
    // Disruption's simulations must place every pod at once: a claim that cannot take a
    // reservation falls back to spot or on-demand instead of deferring the pod.
    let mut cluster = Cluster::new(vec![(node_pool("default"), catalog())]);
    cluster.mode = ReservedOfferingMode::Fallback;
    let pods: Vec<Pod> = (0..3)
        .map(|_| spread_pod("small-instance-type").build())
        .collect();
    let (launched, results) = cluster.provision(&pods);
    assert_eq!(scheduled(&launched), 3, "{:?}", results.pod_errors);
    assert!(results.deferred.is_empty());
    let reserved: Vec<&Launched> = launched
        .iter()
        .filter(|l| l.label(CAPACITY_TYPE) == Some("reserved"))
        .collect();
    // One instance is reserved: one node gets it, no other counts on it.
    assert_eq!(reserved.len(), 1, "{launched:?}");
    assert_eq!(
        reserved[0].label(RESERVATION_LABEL),
        Some("r-small-instance-type")
    );
    assert!(
        launched
            .iter()
            .filter(|l| l.label(CAPACITY_TYPE) != Some("reserved"))
            .all(|l| l.label(RESERVATION_LABEL).is_none())
    );
}

#[test]
fn reserved_claims_pin_capacity_type_and_reservation_ids() {
    let cluster = Cluster::new(vec![(node_pool("default"), catalog())]);
    let inputs: Vec<NodePoolInput> = cluster
        .pools
        .iter()
        .map(|(p, types)| NodePoolInput {
            node_pool: p.0.clone(),
            instance_types: types.iter().cloned().map(Arc::new).collect(),
        })
        .collect();
    let mut options = Env::new(node_pool("unused")).options;
    options.reserved_offering_mode = ReservedOfferingMode::Strict;
    let results =
        Scheduler::new(&inputs, &[], &[], options).solve(&[pod().cpu("1").build()], &|| false);
    let claim = &results.new_node_claims[0];
    let ct = claim.requirements.get(CAPACITY_TYPE).unwrap();
    assert_eq!(ct.values().collect::<Vec<_>>(), ["reserved"]);
    let ids = claim.requirements.get(RESERVATION_LABEL).unwrap();
    assert_eq!(
        ids.values().collect::<Vec<_>>(),
        ["r-medium-instance-type", "r-small-instance-type"]
    );
    // Only the types that can launch into them are listed; small (cheapest) first.
    let names: Vec<&str> = claim
        .instance_types
        .iter()
        .map(|it| it.name.as_str())
        .collect();
    assert_eq!(names, ["small-instance-type", "medium-instance-type"]);
}

#[test]
fn gate_off_drops_reserved_offerings() {
    let mut cluster = Cluster::new(vec![(node_pool("default"), catalog())]);
    cluster.gate = false;
    let pods = pod().cpu("1800m").times(3);
    let (launched, results) = cluster.provision(&pods);
    assert_eq!(scheduled(&launched), 3, "{:?}", results.pod_errors);
    assert!(launched.iter().all(
        |l| l.label(CAPACITY_TYPE) != Some("reserved") && l.label(RESERVATION_LABEL).is_none()
    ));
    // Nor may the provider's launch pick a reservation the scheduler did not count.
    assert!(
        results
            .new_node_claims
            .iter()
            .all(|c| !c.requirements.allows(CAPACITY_TYPE, "reserved")),
        "{:?}",
        results.new_node_claims[0].requirements
    );
}
