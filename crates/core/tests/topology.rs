//! Upstream's topology suite (`topology_test.go`): zonal, hostname and capacity-type spread,
//! pod affinity and anti-affinity (including the inverse direction), namespaces, minDomains and
//! matchLabelKeys.

mod support;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodAffinityTerm, Taint, TopologySpreadConstraint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use karpenter_api::Operator;
use karpenter_core::provisioning::scheduling::{BoundPod, ExistingNodeInput};
use support::*;

const APP: &[(&str, &str)] = &[("app", "test")];

fn spread_pods(key: &str, skew: i32, n: usize) -> Vec<k8s_openapi::api::core::v1::Pod> {
    pod()
        .labels(APP)
        .spread(key, skew, "DoNotSchedule", APP)
        .times(n)
}

/// The topology suite's NodePool: any capacity type (`Exists`), so no reserved domain that no
/// instance type offers.
fn topology_pool() -> PoolBuilder {
    node_pool("default").only(CAPACITY_TYPE, Operator::Exists, &[])
}

fn zonal(pool: PoolBuilder, pods: &[k8s_openapi::api::core::v1::Pod]) -> Vec<usize> {
    Env::new(pool).provision(pods).skew_of(pods, ZONE, APP, &[])
}

#[test]
fn zonal_spread() {
    let any = topology_pool();
    assert_eq!(
        zonal(any.clone(), &spread_pods(ZONE, 1, 4)),
        [1, 1, 2],
        "balance across zones"
    );
    // Match expressions select the same pods.
    let expr = TopologySpreadConstraint {
        max_skew: 1,
        topology_key: ZONE.into(),
        when_unsatisfiable: "DoNotSchedule".into(),
        label_selector: Some(LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "app".into(),
                operator: "In".into(),
                values: Some(vec!["test".into()]),
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert_eq!(
        zonal(any.clone(), &pod().labels(APP).spread_with(expr).times(4)),
        [1, 1, 2],
        "match expressions"
    );
    assert_eq!(
        zonal(
            any.clone()
                .only(ZONE, Operator::In, &["test-zone-1", "test-zone-2"]),
            &spread_pods(ZONE, 1, 4)
        ),
        [2, 2],
        "NodePool zones"
    );
    assert_eq!(
        zonal(
            any.clone().label(ZONE, "test-zone-2"),
            &spread_pods(ZONE, 1, 4)
        ),
        [4],
        "NodePool label pins the zone"
    );
    // A pod requirement narrows the domains it may use, not the ones counted.
    let pods = pod()
        .labels(APP)
        .spread(ZONE, 1, "DoNotSchedule", APP)
        .require(&[(ZONE, "In", &["test-zone-1", "test-zone-2"])])
        .times(4);
    assert_eq!(zonal(any.clone(), &pods), [2, 2], "pod zone requirements");
    // A selector that matches nothing constrains nothing beyond its own count.
    let others = pod()
        .labels(APP)
        .spread(ZONE, 1, "DoNotSchedule", &[("app", "other")])
        .times(4);
    assert_eq!(
        Env::new(any.clone()).provision(&others).nodes.len(),
        1,
        "non-matching selector: all pods pack together"
    );
    // Pods not selected by the constraint do not count.
    let mut pods = spread_pods(ZONE, 1, 3);
    pods.extend(pod().labels(&[("app", "other")]).times(3));
    assert_eq!(zonal(any, &pods), [1, 1, 1]);
}

#[test]
fn spread_with_existing_domains() {
    // Upstream's "should schedule to the non-minimum domain if its all that's available".
    let pool = |zone: &str| topology_pool().require(ZONE, Operator::In, &[zone]);
    let big = |n| {
        pod()
            .cpu("1.1")
            .labels(APP)
            .spread(ZONE, 5, "DoNotSchedule", APP)
            .times(n)
    };
    let round1 = big(1);
    let o1 = Env::new(pool("test-zone-1")).provision(&round1);
    let cluster = o1.cluster(&round1, Vec::new());
    let round2 = big(1);
    let mut env = Env::new(pool("test-zone-2"));
    env.existing = cluster.clone();
    let o2 = env.provision(&round2);
    let cluster = o2.cluster(&round2, cluster);
    let round3 = big(10);
    let mut env = Env::new(pool("test-zone-3"));
    env.existing = cluster.clone();
    let o3 = env.provision(&round3);
    assert_eq!(
        o3.skew_of(&round3, ZONE, APP, &cluster),
        [1, 1, 6],
        "max skew 5 above the minimum of 1"
    );
    assert_eq!(o3.results.pod_errors.len(), 4);

    // "should not violate max-skew when unsat = do not schedule": zone 1 has one pod, the
    // NodePool now only reaches zones 2 and 3.
    let skew1 = |n| {
        pod()
            .cpu("1.1")
            .labels(APP)
            .spread(ZONE, 1, "DoNotSchedule", APP)
            .times(n)
    };
    let first = skew1(1);
    let o = Env::new(pool("test-zone-1")).provision(&first);
    let cluster = o.cluster(&first, Vec::new());
    let more = skew1(10);
    let mut env =
        Env::new(topology_pool().require(ZONE, Operator::In, &["test-zone-2", "test-zone-3"]));
    env.existing = cluster.clone();
    let o = env.provision(&more);
    assert_eq!(o.skew_of(&more, ZONE, APP, &cluster), [1, 2, 2]);
}

#[test]
fn min_domains() {
    // With minDomains 3 but only two zones, the global minimum counts as 0, so each zone holds
    // at most max skew (1) pods.
    let constraint = |min| TopologySpreadConstraint {
        max_skew: 1,
        topology_key: ZONE.into(),
        when_unsatisfiable: "DoNotSchedule".into(),
        label_selector: Some(LabelSelector {
            match_labels: Some([("app".to_string(), "test".to_string())].into()),
            ..Default::default()
        }),
        min_domains: Some(min),
        ..Default::default()
    };
    let two_zones = topology_pool().require(ZONE, Operator::In, &["test-zone-1", "test-zone-2"]);
    let pods = pod().labels(APP).spread_with(constraint(3)).times(3);
    let o = Env::new(two_zones.clone()).provision(&pods);
    assert_eq!(o.skew_of(&pods, ZONE, APP, &[]), [1, 1]);
    assert_eq!(o.results.pod_errors.len(), 1);
    // minDomains met (2 of 2): spreading proceeds normally.
    let pods = pod().labels(APP).spread_with(constraint(2)).times(4);
    assert_eq!(
        Env::new(two_zones)
            .provision(&pods)
            .skew_of(&pods, ZONE, APP, &[]),
        [2, 2]
    );
}

#[test]
fn hostname_spread() {
    let pool = topology_pool();
    let pods = spread_pods(HOSTNAME, 1, 4);
    let o = Env::new(pool.clone()).provision(&pods);
    assert_eq!(
        o.skew_of(&pods, HOSTNAME, APP, &[]),
        [1, 1, 1, 1],
        "one pod per node"
    );
    let pods = spread_pods(HOSTNAME, 4, 4);
    let o = Env::new(pool.clone()).provision(&pods);
    assert_eq!(
        o.skew_of(&pods, HOSTNAME, APP, &[]),
        [4],
        "max skew 4 lets them share"
    );
    // Two deployments spread independently: each node gets one of each.
    let mut pods = pod()
        .labels(&[("app", "a")])
        .spread(HOSTNAME, 1, "DoNotSchedule", &[("app", "a")])
        .times(3);
    pods.extend(
        pod()
            .labels(&[("app", "b")])
            .spread(HOSTNAME, 1, "DoNotSchedule", &[("app", "b")])
            .times(3),
    );
    let o = Env::new(pool).provision(&pods);
    assert_eq!(o.nodes.len(), 3);
    assert!(o.nodes.iter().all(|n| n.pods.len() == 2));
}

#[test]
fn capacity_type_spread() {
    let pool = topology_pool();
    let pods = spread_pods(CAPACITY_TYPE, 1, 4);
    let o = Env::new(pool.clone()).provision(&pods);
    assert_eq!(o.skew_of(&pods, CAPACITY_TYPE, APP, &[]), [2, 2]);
    let pods = spread_pods(CAPACITY_TYPE, 1, 4);
    let o = Env::new(pool.clone().only(CAPACITY_TYPE, Operator::In, &["spot"])).provision(&pods);
    assert_eq!(
        o.skew_of(&pods, CAPACITY_TYPE, APP, &[]),
        [4],
        "only spot allowed"
    );
    // ScheduleAnyway spread is relaxed when it cannot be met.
    let pods = pod()
        .labels(APP)
        .spread(CAPACITY_TYPE, 1, "ScheduleAnyway", APP)
        .node_selector(&[(CAPACITY_TYPE, "spot")])
        .times(3);
    let o = Env::new(pool).provision(&pods);
    assert!((0..3).all(|i| o.scheduled(i)), "{:?}", o.results.pod_errors);
}

#[test]
fn combined_spread() {
    // Both a zonal and a hostname constraint: three zones, one pod per node.
    let pods = pod()
        .labels(APP)
        .spread(ZONE, 1, "DoNotSchedule", APP)
        .spread(HOSTNAME, 1, "DoNotSchedule", APP)
        .times(6);
    let o = Env::new(topology_pool()).provision(&pods);
    assert_eq!(o.skew_of(&pods, ZONE, APP, &[]), [2, 2, 2]);
    assert_eq!(o.nodes.len(), 6);
    // Zone and capacity type together: spot is not offered in zone 3.
    let pods = pod()
        .labels(APP)
        .spread(ZONE, 1, "DoNotSchedule", APP)
        .spread(CAPACITY_TYPE, 1, "DoNotSchedule", APP)
        .times(4);
    let o = Env::new(topology_pool()).provision(&pods);
    assert!((0..4).all(|i| o.scheduled(i)), "{:?}", o.results.pod_errors);
    assert_eq!(o.skew_of(&pods, CAPACITY_TYPE, APP, &[]), [2, 2]);
}

#[test]
fn spread_options_are_limited_by_the_pods_own_domains() {
    // Pods pinned to one zone each count only their zone as a valid domain.
    let mut pods = pod()
        .labels(APP)
        .spread(ZONE, 1, "DoNotSchedule", APP)
        .node_selector(&[(ZONE, "test-zone-1")])
        .times(5);
    pods.extend(
        pod()
            .labels(APP)
            .spread(ZONE, 1, "DoNotSchedule", APP)
            .node_selector(&[(ZONE, "test-zone-2")])
            .times(10),
    );
    let o = Env::new(topology_pool()).provision(&pods);
    assert_eq!(o.skew_of(&pods, ZONE, APP, &[]), [5, 10]);
    // The same with capacity type and ScheduleAnyway.
    let mut pods = pod()
        .labels(APP)
        .spread(CAPACITY_TYPE, 1, "ScheduleAnyway", APP)
        .node_selector(&[(CAPACITY_TYPE, "spot")])
        .times(5);
    pods.extend(
        pod()
            .labels(APP)
            .spread(CAPACITY_TYPE, 1, "ScheduleAnyway", APP)
            .node_selector(&[(CAPACITY_TYPE, "on-demand")])
            .times(5),
    );
    let o = Env::new(topology_pool()).provision(&pods);
    assert_eq!(o.skew_of(&pods, CAPACITY_TYPE, APP, &[]), [5, 5]);
    // A preferred node affinity does not limit the domains: the spread still covers all zones.
    let pods = pod()
        .labels(APP)
        .spread(ZONE, 1, "DoNotSchedule", APP)
        .prefer(1, &[(ZONE, "In", &["test-zone-1", "test-zone-2"])])
        .times(6);
    let o = Env::new(topology_pool()).provision(&pods);
    assert_eq!(o.skew_of(&pods, ZONE, APP, &[]), [2, 2, 2]);
}

#[test]
fn match_label_keys() {
    // Pods of two revisions spread separately through matchLabelKeys.
    let constraint = TopologySpreadConstraint {
        max_skew: 1,
        topology_key: HOSTNAME.into(),
        when_unsatisfiable: "DoNotSchedule".into(),
        label_selector: Some(LabelSelector {
            match_labels: Some([("app".to_string(), "test".to_string())].into()),
            ..Default::default()
        }),
        match_label_keys: Some(vec!["rev".into()]),
        ..Default::default()
    };
    let mut pods = pod()
        .labels(&[("app", "test"), ("rev", "1")])
        .spread_with(constraint.clone())
        .times(2);
    pods.extend(
        pod()
            .labels(&[("app", "test"), ("rev", "2")])
            .spread_with(constraint)
            .times(2),
    );
    let o = Env::new(topology_pool()).provision(&pods);
    assert_eq!(o.nodes.len(), 2, "each node gets one pod of each revision");
}

#[test]
fn pod_affinity() {
    let pool = topology_pool();
    // Hostname affinity: the second pod follows the first.
    let target = pod().labels(&[("security", "s2")]).build();
    let follower = pod().affinity_to(HOSTNAME, &[("security", "s2")]).build();
    let mut pods = spread_pods(HOSTNAME, 1, 10);
    pods.push(target);
    pods.push(follower);
    let o = Env::new(pool.clone()).provision(&pods);
    assert_eq!(o.node(10).name, o.node(11).name);
    // Affinity to arch: the follower takes the target's architecture.
    let pods = vec![
        pod()
            .labels(&[("security", "s2")])
            .node_selector(&[(ARCH, "arm64")])
            .cpu("2")
            .build(),
        pod().affinity_to(ARCH, &[("security", "s2")]).build(),
    ];
    let o = Env::new(pool.clone()).provision(&pods);
    assert_eq!(o.label(1, ARCH), Some("arm64"));
    // Self affinity by hostname packs every replica on one node.
    let pods = pod().labels(APP).affinity_to(HOSTNAME, APP).times(3);
    assert_eq!(Env::new(pool.clone()).provision(&pods).nodes.len(), 1);
    // Self affinity by zone keeps replicas in one zone, even across nodes.
    let pods = pod().labels(APP).affinity_to(ZONE, APP).cpu("3").times(3);
    let o = Env::new(pool.clone()).provision(&pods);
    assert_eq!(o.skew_of(&pods, ZONE, APP, &[]), [3]);
    // ...within the zones the pod allows.
    let pods = pod()
        .labels(APP)
        .affinity_to(ZONE, APP)
        .node_selector(&[(ZONE, "test-zone-3")])
        .times(3);
    let o = Env::new(pool.clone()).provision(&pods);
    assert!((0..3).all(|i| o.label(i, ZONE) == Some("test-zone-3")));
    // Affinity to a pod that does not exist cannot be met.
    let o = Env::new(pool.clone())
        .provision(&[pod().affinity_to(HOSTNAME, &[("security", "s2")]).build()]);
    assert!(!o.scheduled(0));
    // A chain of dependent hostname affinities (db <- web <- cache <- ui) is resolved in one
    // batch, whatever the order.
    let chain = vec![
        pod().labels(&[("type", "db")]).build(),
        pod()
            .labels(&[("type", "web")])
            .affinity_to(HOSTNAME, &[("type", "db")])
            .build(),
        pod()
            .labels(&[("type", "cache")])
            .affinity_to(HOSTNAME, &[("type", "web")])
            .build(),
        pod()
            .labels(&[("type", "ui")])
            .affinity_to(HOSTNAME, &[("type", "cache")])
            .build(),
    ];
    for rotation in 0..4 {
        let mut pods = chain.clone();
        pods.rotate_left(rotation);
        let o = Env::new(pool.clone()).provision(&pods);
        assert!(
            (0..4).all(|i| o.scheduled(i)),
            "rotation {rotation}: {:?}",
            o.results.pod_errors
        );
        assert_eq!(o.nodes.len(), 1);
    }
    // Affinity to a pod that itself has unmet affinity never schedules (and does not loop).
    let o = Env::new(pool.clone()).provision(&[pod()
        .labels(&[("type", "db")])
        .affinity_to(HOSTNAME, &[("type", "web")])
        .build()]);
    assert!(!o.scheduled(0));
    // Preferred affinity to nothing is relaxed.
    let o = Env::new(pool).provision(&[pod()
        .prefer_affinity_to(10, HOSTNAME, &[("security", "s2")])
        .build()]);
    assert!(o.scheduled(0));
}

#[test]
fn pod_affinity_namespaces() {
    let pool = topology_pool();
    // The term selects pods in its own namespace only.
    let pods = vec![
        pod()
            .namespace("other")
            .labels(&[("security", "s2")])
            .build(),
        pod().affinity_to(HOSTNAME, &[("security", "s2")]).build(),
    ];
    assert!(!Env::new(pool.clone()).provision(&pods).scheduled(1));
    // Listing the namespace makes it match.
    let term = PodAffinityTerm {
        label_selector: Some(LabelSelector {
            match_labels: Some([("security".to_string(), "s2".to_string())].into()),
            ..Default::default()
        }),
        topology_key: HOSTNAME.into(),
        namespaces: Some(vec!["other".into()]),
        ..Default::default()
    };
    let pods = vec![
        pod()
            .namespace("other")
            .labels(&[("security", "s2")])
            .build(),
        pod().affinity_to_term(term).build(),
    ];
    let o = Env::new(pool.clone()).provision(&pods);
    assert_eq!(o.node(0).name, o.node(1).name);

    // A namespaceSelector picks namespaces by their labels (upstream's "should support
    // namespace selectors"); it needs the cluster's namespaces to answer.
    let by_label = |selector: LabelSelector| PodAffinityTerm {
        label_selector: Some(LabelSelector {
            match_labels: Some([("security".to_string(), "s2".to_string())].into()),
            ..Default::default()
        }),
        topology_key: HOSTNAME.into(),
        namespace_selector: Some(selector),
        ..Default::default()
    };
    let team_cache = LabelSelector {
        match_labels: Some([("team".to_string(), "cache".to_string())].into()),
        ..Default::default()
    };
    let pods = |term: PodAffinityTerm| {
        vec![
            pod()
                .namespace("other")
                .labels(&[("security", "s2")])
                .build(),
            pod().affinity_to_term(term).build(),
        ]
    };
    let namespaces = vec![
        (
            "other".to_string(),
            [("team".to_string(), "cache".to_string())].into(),
        ),
        ("default".to_string(), Default::default()),
    ];
    let with_namespaces = |pool| {
        let mut env = Env::new(pool);
        env.options.namespaces = namespaces.clone();
        env
    };
    let o = with_namespaces(pool.clone()).provision(&pods(by_label(team_cache.clone())));
    assert_eq!(
        o.node(0).name,
        o.node(1).name,
        "the labelled namespace matches"
    );
    let o = Env::new(pool.clone()).provision(&pods(by_label(team_cache)));
    assert!(!o.scheduled(1), "no namespace is known to carry the label");
    let o = with_namespaces(pool).provision(&pods(by_label(LabelSelector::default())));
    assert_eq!(
        o.node(0).name,
        o.node(1).name,
        "an empty namespaceSelector selects every namespace"
    );
}

#[test]
fn pod_anti_affinity() {
    let pool = topology_pool();
    // Hostname anti-affinity separates the pods, whichever comes first.
    for order in [[0, 1], [1, 0]] {
        let both = [
            pod().labels(&[("security", "s2")]).build(),
            pod()
                .anti_affinity_to(HOSTNAME, &[("security", "s2")])
                .build(),
        ];
        let pods = vec![both[order[0]].clone(), both[order[1]].clone()];
        let o = Env::new(pool.clone()).provision(&pods);
        assert_ne!(o.node(0).name, o.node(1).name);
    }
    // Zone anti-affinity: three zone-pinned pods fill every zone, the repelled pod has none left.
    let s2 = &[("security", "s2")];
    let mut pods: Vec<_> = ["test-zone-1", "test-zone-2", "test-zone-3"]
        .iter()
        .map(|z| {
            pod()
                .labels(s2)
                .cpu("2")
                .node_selector(&[(ZONE, z)])
                .build()
        })
        .collect();
    pods.push(pod().anti_affinity_to(ZONE, s2).build());
    let o = Env::new(pool.clone()).provision(&pods);
    assert!((0..3).all(|i| o.scheduled(i)));
    assert!(!o.scheduled(3));
    // Inverse: the pod holding the term goes first; the selected pods must avoid its zone.
    let pods = vec![
        pod()
            .anti_affinity_to(ZONE, s2)
            .cpu("2")
            .node_selector(&[(ZONE, "test-zone-1")])
            .build(),
        pod()
            .labels(s2)
            .node_selector(&[(ZONE, "test-zone-1")])
            .build(),
    ];
    let o = Env::new(pool.clone()).provision(&pods);
    assert!(o.scheduled(0));
    assert!(
        !o.scheduled(1),
        "the selected pod may not join the zone of the pod that repels it"
    );
    // Inverse with an existing pod: a running pod with anti-affinity blocks its zone.
    let mut node = existing_node(
        "running",
        &[(ZONE, "test-zone-1")],
        &[("cpu", "4"), ("memory", "8Gi"), ("pods", "10")],
    );
    node.pods = BoundPod::all(&[pod().anti_affinity_to(ZONE, s2).build()]);
    let o = Env::new(pool.clone())
        .existing(node)
        .provision(&[pod().labels(s2).cpu("1").build()]);
    assert_ne!(o.label(0, ZONE), Some("test-zone-1"));
    // Arch anti-affinity.
    let pods = vec![
        pod()
            .labels(s2)
            .cpu("2")
            .node_selector(&[(ARCH, "arm64")])
            .build(),
        pod().anti_affinity_to(ARCH, s2).build(),
    ];
    let o = Env::new(pool.clone()).provision(&pods);
    assert_eq!(o.label(1, ARCH), Some("amd64"));
    // Preferred anti-affinity is relaxed when it cannot be met.
    let mut pods: Vec<_> = ["test-zone-1", "test-zone-2", "test-zone-3"]
        .iter()
        .map(|z| {
            pod()
                .labels(s2)
                .cpu("2")
                .node_selector(&[(ZONE, z)])
                .build()
        })
        .collect();
    pods.push(pod().prefer_anti_affinity_to(10, ZONE, s2).build());
    let o = Env::new(pool).provision(&pods);
    assert!(o.scheduled(3));
}

#[test]
fn self_anti_affinity_gives_one_node_per_pod() {
    let pods = pod().labels(APP).anti_affinity_to(HOSTNAME, APP).times(5);
    let o = Env::new(topology_pool()).provision(&pods);
    assert_eq!(o.nodes.len(), 5);
}

#[test]
fn zonal_self_anti_affinity_settles_over_batches() {
    // A pod on a claim that may still land in any zone blocks all of them, so zonal
    // anti-affinity places one pod per batch until every zone is taken (as upstream).
    let mut cluster = Vec::new();
    let mut placed = Vec::new();
    for expected in [vec![1], vec![1, 1], vec![1, 1, 1], vec![1, 1, 1]] {
        let pods = pod().labels(APP).anti_affinity_to(ZONE, APP).times(3);
        let mut env = Env::new(topology_pool());
        env.existing = cluster.clone();
        let o = env.provision(&pods);
        let skew = o.skew_of(&pods, ZONE, APP, &cluster);
        assert_eq!(skew, expected);
        placed.push(o.nodes.len());
        cluster = o.cluster(&pods, cluster);
    }
    assert_eq!(placed, [1, 1, 1, 0]);
}

#[test]
fn preference_pods_follow_upstreams_benchmark_outcome() {
    // Upstream's preference benchmark: zone-1 preference, weight-10 zonal and weight-1 hostname
    // anti-affinity preferences. Every pod ends on its own node in zone 1.
    let pods = pod()
        .labels(&[("app", "nginx")])
        .prefer(1, &[(ZONE, "In", &["test-zone-1"])])
        .prefer_anti_affinity_to(10, ZONE, &[("app", "nginx")])
        .prefer_anti_affinity_to(1, HOSTNAME, &[("app", "nginx")])
        .times(40);
    let o = Env::with_types(
        topology_pool(),
        karpenter_core::instancetype::fake::instance_types(400),
    )
    .provision(&pods);
    assert_eq!(o.nodes.len(), 40);
    assert!((0..40).all(|i| o.label(i, ZONE) == Some("test-zone-1")));
}

/// Upstream's "volume requirements do not count against minDomains": a pod whose volume is in
/// zone 1 spreads over every zone the NodePool reaches, not over its volume's zone alone (which
/// would leave one domain of three and a global minimum of 0); it lands in zone 1 with skew 1.
#[test]
fn volume_zones_constrain_the_node_not_the_spread() {
    use karpenter_core::state::volumes::PodVolumes;
    let constraint = TopologySpreadConstraint {
        max_skew: 1,
        topology_key: ZONE.into(),
        when_unsatisfiable: "DoNotSchedule".into(),
        label_selector: Some(LabelSelector {
            match_labels: Some([("app".to_string(), "test".to_string())].into()),
            ..Default::default()
        }),
        min_domains: Some(3),
        ..Default::default()
    };
    let first = pod().labels(APP).spread_with(constraint.clone()).times(3);
    let o = Env::new(topology_pool()).provision(&first);
    let cluster = o.cluster(&first, Vec::new());
    assert_eq!(o.skew_of(&first, ZONE, APP, &[]), [1, 1, 1]);
    let mut with_volume = pod().labels(APP).spread_with(constraint).build();
    with_volume.metadata.name = Some("db-0".into());
    with_volume.metadata.namespace = Some("default".into());
    let mut env = Env::new(topology_pool());
    env.existing = cluster.clone();
    let zone_1 = karpenter_core::scheduling::Requirements::from_node_selector(&[
        k8s_openapi::api::core::v1::NodeSelectorRequirement {
            key: ZONE.into(),
            operator: "In".into(),
            values: Some(vec!["test-zone-1".into()]),
        },
    ]);
    env.options.pod_volumes = std::sync::Arc::new(
        [(
            "default/db-0".to_string(),
            PodVolumes {
                requirements: Some(zone_1),
                alternatives: Vec::new(),
                attachments: Vec::new(),
            },
        )]
        .into(),
    );
    let second = [with_volume];
    let o = env.provision(&second);
    assert!(
        o.results.pod_errors.is_empty(),
        "{:?}",
        o.results.pod_errors
    );
    let node = o
        .results
        .existing_nodes
        .keys()
        .next()
        .and_then(|name| cluster.iter().find(|n| &n.name == name))
        .map(|n| &n.labels)
        .unwrap_or_else(|| &o.node(0).labels);
    assert_eq!(node.get(ZONE).map(String::as_str), Some("test-zone-1"));
    assert_eq!(o.skew_of(&second, ZONE, APP, &cluster), [1, 1, 2]);
}

// ---------------------------------------------------------------------------------------------
// Upstream's cases one by one (`topology_test.go`), with its labels (`test: test`) and its fake
// instance types (`karpenter_core::instancetype::fake`). Where a case runs several provisioning
// rounds, the nodes of a round are the next round's existing nodes, as the suite's API server
// keeps them.

const TEST: &[(&str, &str)] = &[("test", "test")];
const S2: &[(&str, &str)] = &[("security", "s2")];

fn tsc(key: &str, max_skew: i32, when: &str) -> TopologySpreadConstraint {
    TopologySpreadConstraint {
        max_skew,
        topology_key: key.into(),
        when_unsatisfiable: when.into(),
        label_selector: Some(selector(TEST)),
        ..Default::default()
    }
}

fn spread_test(key: &str, skew: i32, n: usize) -> Vec<Pod> {
    pod()
        .labels(TEST)
        .spread_with(tsc(key, skew, "DoNotSchedule"))
        .times(n)
}

fn zones_pool(zones: &[&str]) -> PoolBuilder {
    node_pool("default").only(ZONE, Operator::In, zones)
}

/// A cluster carried from one provisioning round to the next.
#[derive(Default)]
struct Rounds {
    cluster: Vec<ExistingNodeInput>,
}

impl Rounds {
    /// Provisions `pods` with `env`'s NodePools over the cluster so far (plus `env`'s own
    /// existing nodes), then binds the scheduled pods.
    fn run(&mut self, mut env: Env, pods: &[Pod]) -> Outcome {
        let mut existing = std::mem::take(&mut self.cluster);
        existing.append(&mut env.existing);
        env.existing = existing;
        let o = env.provision(pods);
        self.cluster = o.cluster(pods, std::mem::take(&mut env.existing));
        o
    }

    /// Pods of `default` carrying `labels` per domain of `key`, sorted (upstream's
    /// `ExpectSkew`): a node without the label is no domain, hostname counts by node, and
    /// terminating pods do not count.
    fn skew(&self, key: &str, labels: &[(&str, &str)]) -> Vec<usize> {
        let mut per: BTreeMap<String, usize> = BTreeMap::new();
        for node in &self.cluster {
            let domain = if key == HOSTNAME {
                Some(node.name.clone())
            } else {
                node.labels.get(key).cloned()
            };
            let Some(domain) = domain else { continue };
            let n = node
                .pods
                .iter()
                .filter(|p| {
                    p.namespace == "default"
                        && !p.terminating
                        && labels
                            .iter()
                            .all(|(k, v)| p.labels.get(*k).map(String::as_str) == Some(*v))
                })
                .count();
            if n > 0 {
                *per.entry(domain).or_default() += n;
            }
        }
        let mut v: Vec<usize> = per.into_values().collect();
        v.sort_unstable();
        v
    }

    /// The largest difference between two populated domains (upstream's `ExpectMaxSkew`).
    fn max_skew(&self, key: &str, labels: &[(&str, &str)]) -> usize {
        let v = self.skew(key, labels);
        v.last().copied().unwrap_or(0) - v.first().copied().unwrap_or(0)
    }
}

fn all_scheduled(name: &str, o: &Outcome) {
    assert!(
        o.placement.iter().all(Option::is_some),
        "{name}: every pod schedules: {:?}",
        o.results.pod_errors
    );
}

fn none_scheduled(name: &str, o: &Outcome) {
    assert!(
        o.placement.iter().all(Option::is_none),
        "{name}: no pod schedules: {:?}",
        o.placement
    );
}

#[test]
fn constraints_that_do_not_spread() {
    let o = Env::new(topology_pool()).provision(&[
        pod()
            .labels(TEST)
            .spread_with(tsc("unknown", 1, "DoNotSchedule"))
            .build(),
        pod().build(),
    ]);
    assert!(
        !o.scheduled(0),
        "unknown topology key: no node has the key, the pod waits"
    );
    assert!(
        o.scheduled(1),
        "unknown topology key: the other pod schedules"
    );

    let cases = [
        (
            "invalid label selector value",
            TopologySpreadConstraint {
                label_selector: Some(selector(&[("app.kubernetes.io/name", "{{ zqfmgb }}")])),
                ..tsc(ZONE, 1, "DoNotSchedule")
            },
        ),
        (
            "nil label selector",
            TopologySpreadConstraint {
                label_selector: None,
                ..tsc(ZONE, 1, "DoNotSchedule")
            },
        ),
    ];
    for (name, constraint) in cases {
        let pods = pod().labels(TEST).spread_with(constraint).times(2);
        let mut r = Rounds::default();
        let o = r.run(Env::new(topology_pool()), &pods);
        all_scheduled(name, &o);
        assert_eq!(r.skew(ZONE, TEST), [2], "{name}: nothing to spread from");
    }
}

/// A single-round spread: case, cluster, pods, topology key, pods per domain.
type SkewCase = (&'static str, Env, Vec<Pod>, &'static str, Vec<usize>);

/// Single-round spreads.
#[test]
fn spread_table() {
    let fake = "fake-label";
    let policy_pods = |taints: Option<&str>, affinity: Option<&str>, selector_value: bool| {
        let mut c = tsc(fake, 1, "DoNotSchedule");
        c.node_taints_policy = taints.map(Into::into);
        c.node_affinity_policy = affinity.map(Into::into);
        let mut b = pod().labels(TEST).cpu("1").spread_with(c);
        if selector_value {
            b = b.node_selector(&[("selector", "value")]);
        }
        b.times(5)
    };
    let small_node = |name: &str, labels: &[(&str, &str)], tainted: bool| {
        let mut n = existing_node(name, labels, &[("cpu", "100m")]);
        if tainted {
            n.taints = vec![Taint {
                key: "taintname".into(),
                value: Some("taintvalue".into()),
                effect: "NoSchedule".into(),
                time_added: None,
            }];
        }
        n
    };
    let tainted_nodes = |pool: PoolBuilder| {
        Env::new(pool)
            .existing(small_node("foo", &[(fake, "foo")], true))
            .existing(small_node("bar", &[(fake, "bar")], true))
    };
    let unselected_nodes = |pool: PoolBuilder| {
        Env::new(pool)
            .existing(small_node(
                "foo",
                &[(fake, "foo"), ("selector", "mismatch")],
                false,
            ))
            .existing(small_node(
                "bar",
                &[(fake, "bar"), ("selector", "mismatch")],
                false,
            ))
    };
    let tainted_pool = |name: &str, domains: &[&str], value: &str| {
        node_pool(name)
            .only(CAPACITY_TYPE, Operator::Exists, &[])
            .require(fake, Operator::In, domains)
            .taint("taint-key", value, "NoSchedule")
    };
    let two_pools = |taints: &str| {
        let env = Env::new(topology_pool().require(fake, Operator::In, &["foo"]))
            .pool(tainted_pool("tainted", &["bar"], "taint-value"));
        let pods = pod()
            .labels(TEST)
            .spread_with(TopologySpreadConstraint {
                node_taints_policy: Some(taints.into()),
                ..tsc(fake, 1, "DoNotSchedule")
            })
            .times(2);
        (env, pods)
    };
    let (ignore_env, ignore_pods) = two_pools("Ignore");
    let (honor_env, honor_pods) = two_pools("Honor");
    let min_domains = |min| {
        pod()
            .labels(TEST)
            .spread_with(TopologySpreadConstraint {
                min_domains: Some(min),
                ..tsc(ZONE, 1, "DoNotSchedule")
            })
            .times(11)
    };
    let shared_domain_pods = {
        let honor = TopologySpreadConstraint {
            node_taints_policy: Some("Honor".into()),
            ..tsc(fake, 1, "DoNotSchedule")
        };
        let mut pods = pod()
            .labels(TEST)
            .spread_with(honor.clone())
            .tolerate("taint-key", "", "nodepool-0", "NoSchedule")
            .times(2);
        pods.extend(
            pod()
                .labels(TEST)
                .spread_with(honor)
                .tolerate("taint-key", "", "nodepool-1", "NoSchedule")
                .times(4),
        );
        pods
    };
    let cases: Vec<SkewCase> = vec![
        (
            "NodePool zones listed",
            Env::new(zones_pool(&["test-zone-1", "test-zone-2", "test-zone-3"])),
            spread_test(ZONE, 1, 4),
            ZONE,
            vec![1, 1, 2],
        ),
        (
            "NodePool zones and a zone label",
            Env::new(zones_pool(&["test-zone-1", "test-zone-2"]).label(ZONE, "test-zone-1")),
            spread_test(ZONE, 1, 4),
            ZONE,
            vec![4],
        ),
        (
            "zone labels across NodePools",
            Env::new(zones_pool(&["test-zone-1", "test-zone-2"]).label(ZONE, "test-zone-1"))
                .pool(node_pool("second").label(ZONE, "test-zone-2")),
            spread_test(ZONE, 1, 4),
            ZONE,
            vec![2, 2],
        ),
        (
            "minDomains 3 met by three zones",
            Env::new(zones_pool(&["test-zone-1", "test-zone-2", "test-zone-3"])),
            min_domains(3),
            ZONE,
            vec![3, 4, 4],
        ),
        (
            "three zones exceed minDomains 2",
            Env::new(zones_pool(&["test-zone-1", "test-zone-2", "test-zone-3"])),
            min_domains(2),
            ZONE,
            vec![3, 4, 4],
        ),
        (
            "required zones limit the spread (10 pods)",
            Env::new(topology_pool()),
            pod()
                .labels(TEST)
                .spread_with(tsc(ZONE, 1, "DoNotSchedule"))
                .require(&[(ZONE, "In", &["test-zone-1", "test-zone-2"])])
                .times(10),
            ZONE,
            vec![5, 5],
        ),
        (
            "NodePool capacity types spot and on-demand",
            Env::new(node_pool("default").only(
                CAPACITY_TYPE,
                Operator::In,
                &["spot", "on-demand"],
            )),
            spread_test(CAPACITY_TYPE, 1, 4),
            CAPACITY_TYPE,
            vec![2, 2],
        ),
        (
            "matchLabelKeys naming a label the pods lack",
            Env::new(topology_pool()),
            pod()
                .labels(TEST)
                .spread_with(TopologySpreadConstraint {
                    match_label_keys: Some(vec!["test-label".into()]),
                    ..tsc(HOSTNAME, 1, "DoNotSchedule")
                })
                .times(4),
            HOSTNAME,
            vec![1, 1, 1, 1],
        ),
        (
            "tainted nodes' domains count (NodeTaintsPolicy=Ignore)",
            tainted_nodes(topology_pool().label(fake, "baz")),
            policy_pods(Some("Ignore"), None, false),
            fake,
            vec![1],
        ),
        (
            "tainted nodes' domains are skipped (NodeTaintsPolicy=Honor)",
            tainted_nodes(topology_pool().label(fake, "baz")),
            policy_pods(Some("Honor"), None, false),
            fake,
            vec![5],
        ),
        (
            "a tainted NodePool's domain counts (NodeTaintsPolicy=Ignore)",
            ignore_env,
            ignore_pods,
            fake,
            vec![1],
        ),
        (
            "a tainted NodePool's domain is skipped (NodeTaintsPolicy=Honor)",
            honor_env,
            honor_pods,
            fake,
            vec![2],
        ),
        (
            "NodePools tainted apart share a domain (NodeTaintsPolicy=Honor)",
            Env::new(tainted_pool("np-0", &["foo", "bar"], "nodepool-0")).pool(tainted_pool(
                "np-1",
                &["foo", "baz"],
                "nodepool-1",
            )),
            shared_domain_pods,
            fake,
            vec![1, 2, 3],
        ),
        (
            "unselected nodes' domains count (NodeAffinityPolicy=Ignore)",
            unselected_nodes(
                topology_pool()
                    .label(fake, "baz")
                    .label("selector", "value"),
            ),
            policy_pods(None, Some("Ignore"), true),
            fake,
            vec![1],
        ),
        (
            "unselected nodes' domains are skipped (NodeAffinityPolicy=Honor)",
            unselected_nodes(
                topology_pool()
                    .label(fake, "baz")
                    .label("selector", "value"),
            ),
            policy_pods(None, Some("Honor"), true),
            fake,
            vec![5],
        ),
    ];
    let mut failures = Vec::new();
    for (name, env, pods, key, expected) in cases {
        let mut r = Rounds::default();
        let o = r.run(env, &pods);
        let got = r.skew(key, TEST);
        if got != expected {
            failures.push(format!(
                "{name}: expected {expected:?}, got {got:?} ({:?})",
                o.results.pod_errors
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn spread_by_node_count() {
    let o = Env::new(topology_pool()).provision(
        &pod()
            .spread_with(tsc(HOSTNAME, 1, "DoNotSchedule"))
            .times(5),
    );
    all_scheduled("pods outside their own selector pack together", &o);
    assert_eq!(
        o.nodes.len(),
        1,
        "pods outside their own selector pack together"
    );

    let deployment = |app: &str, arch: Option<&str>| {
        let mut b = pod()
            .labels(&[("app", app)])
            .spread_with(TopologySpreadConstraint {
                label_selector: Some(selector(&[("app", app)])),
                ..tsc(HOSTNAME, 1, "DoNotSchedule")
            });
        if let Some(arch) = arch {
            b = b.require(&[(ARCH, "In", &[arch])]);
        }
        b.times(2)
    };
    for (name, arches, nodes) in [
        ("two spread deployments share two nodes", [None, None], 2),
        (
            "two spread deployments of different arch need four nodes",
            [Some("amd64"), Some("arm64")],
            4,
        ),
    ] {
        let mut pods = deployment("app1", arches[0]);
        pods.extend(deployment("app2", arches[1]));
        let o = Env::new(topology_pool()).provision(&pods);
        all_scheduled(name, &o);
        assert_eq!(o.nodes.len(), nodes, "{name}");
    }
}

fn big(b: support::PodBuilder) -> support::PodBuilder {
    b.labels(TEST).cpu("1.1")
}

#[test]
fn zonal_spread_over_rounds() {
    let spread = || tsc(ZONE, 1, "DoNotSchedule");

    let name = "an existing pod outside the NodePool's zones";
    let mut r = Rounds::default();
    let o = r.run(
        Env::new(topology_pool()),
        &[big(pod()).node_selector(&[(ZONE, "test-zone-3")]).build()],
    );
    all_scheduled(name, &o);
    r.run(
        Env::new(zones_pool(&["test-zone-1", "test-zone-2"])),
        &big(pod()).spread_with(spread()).times(6),
    );
    assert_eq!(r.skew(ZONE, TEST), [1, 2, 2], "{name}");

    let name = "only the minimum domains while the skew is violated";
    let mut r = Rounds::default();
    r.run(
        Env::new(topology_pool()),
        &big(pod()).spread_with(spread()).times(9),
    );
    assert_eq!(r.skew(ZONE, TEST), [3, 3, 3], "{name}");
    for node in &mut r.cluster {
        if node.labels.get(ZONE).map(String::as_str) != Some("test-zone-1") {
            node.pods.clear();
        }
    }
    assert_eq!(r.skew(ZONE, TEST), [3], "{name}");
    r.run(
        Env::new(topology_pool()),
        &big(pod()).spread_with(spread()).times(3),
    );
    assert_eq!(r.skew(ZONE, TEST), [1, 2, 3], "{name}");

    let name = "domains of an existing pod without constraints";
    let mut r = Rounds::default();
    r.run(
        Env::new(zones_pool(&["test-zone-1"])),
        &[big(pod()).build()],
    );
    r.run(
        Env::new(zones_pool(&["test-zone-2", "test-zone-3"])),
        &big(pod()).spread_with(spread()).times(10),
    );
    assert_eq!(r.skew(ZONE, TEST), [1, 2, 2], "{name}");
}

/// Upstream's "should only count running/scheduled pods with matching labels scheduled to
/// nodes with a corresponding domain", for zones and capacity types. Pending pods the
/// kube-scheduler has not marked unschedulable never reach the scheduler (the batcher's
/// filter), so they are left out here; a terminating pod is bound instead (it does not count).
#[test]
fn only_active_selected_pods_on_nodes_in_a_domain_count() {
    for (name, key, first, second, expected) in [
        (
            "zones: only active selected pods count",
            ZONE,
            "test-zone-1",
            "test-zone-2",
            [1, 2, 2].as_slice(),
        ),
        (
            "capacity types: only active selected pods count",
            CAPACITY_TYPE,
            "spot",
            "on-demand",
            [2, 3].as_slice(),
        ),
    ] {
        let room = [("cpu", "4"), ("memory", "8Gi"), ("pods", "20")];
        let mut n1 = existing_node("first", &[(key, first)], &room);
        let mut n2 = existing_node("second", &[(key, second)], &room);
        let mut n3 = existing_node("third", &[], &room);
        let mut terminating = pod().labels(TEST).build();
        terminating.metadata.deletion_timestamp = Some(
            serde_json::from_value(serde_json::json!("2024-01-01T00:00:00Z")).expect("a timestamp"),
        );
        n1.pods = BoundPod::all(&[
            pod().build(),
            pod().labels(TEST).namespace("other").build(),
            pod().labels(TEST).phase("Failed").build(),
            pod().labels(TEST).phase("Succeeded").build(),
            terminating,
            pod().labels(TEST).build(),
            pod().labels(TEST).build(),
        ]);
        n2.pods = BoundPod::all(&[pod().labels(TEST).build()]);
        n3.pods = BoundPod::all(&[pod().labels(TEST).build()]);
        let mut r = Rounds::default();
        let o = r.run(
            Env::new(topology_pool())
                .existing(n1)
                .existing(n2)
                .existing(n3),
            &pod()
                .labels(TEST)
                .spread_with(tsc(key, 1, "DoNotSchedule"))
                .times(2),
        );
        all_scheduled(name, &o);
        assert_eq!(r.skew(key, TEST), expected, "{name}: {:?}", o.placement);
    }
}

#[test]
fn capacity_type_spread_over_rounds() {
    let only = |cts: &[&str]| node_pool("default").only(CAPACITY_TYPE, Operator::In, cts);
    for (name, when, expected) in [
        (
            "DoNotSchedule holds the skew across capacity types",
            "DoNotSchedule",
            [1, 2],
        ),
        (
            "ScheduleAnyway gives way across capacity types",
            "ScheduleAnyway",
            [1, 5],
        ),
    ] {
        let pods = |n| big(pod()).spread_with(tsc(CAPACITY_TYPE, 1, when)).times(n);
        let mut r = Rounds::default();
        r.run(Env::new(only(&["spot"])), &pods(1));
        assert_eq!(r.skew(CAPACITY_TYPE, TEST), [1], "{name}");
        r.run(Env::new(only(&["on-demand"])), &pods(5));
        assert_eq!(r.skew(CAPACITY_TYPE, TEST), expected, "{name}");
    }

    let name = "required node affinity leaves the other capacity type out";
    let mut r = Rounds::default();
    let o = r.run(
        Env::new(topology_pool()),
        &[pod()
            .labels(TEST)
            .require(&[
                (ZONE, "In", &["test-zone-1"]),
                (CAPACITY_TYPE, "In", &["on-demand"]),
            ])
            .build()],
    );
    all_scheduled(name, &o);
    let o = r.run(
        Env::new(topology_pool()),
        &pod()
            .labels(TEST)
            .require(&[
                (ZONE, "In", &["test-zone-2"]),
                (CAPACITY_TYPE, "In", &["spot"]),
            ])
            .spread_with(tsc(CAPACITY_TYPE, 1, "DoNotSchedule"))
            .times(5),
    );
    all_scheduled(name, &o);
    assert_eq!(r.skew(CAPACITY_TYPE, TEST), [1, 5], "{name}");

    // A first pod on the single-pod instance type, then pods that may only launch the other
    // value but count the first node's.
    for (name, key, first, other) in [
        (
            "an existing on-demand node counts for unconstrained pods",
            CAPACITY_TYPE,
            "on-demand",
            "spot",
        ),
        (
            "an existing amd64 node counts for unconstrained pods",
            ARCH,
            "amd64",
            "arm64",
        ),
    ] {
        let mut r = Rounds::default();
        let o = r.run(
            Env::new(topology_pool()),
            &[pod()
                .labels(TEST)
                .node_selector(&[(INSTANCE_TYPE, "single-pod-instance-type")])
                .require(&[(key, "In", &[first])])
                .build()],
        );
        all_scheduled(name, &o);
        r.run(
            Env::new(node_pool("default").only(key, Operator::In, &[other])),
            &pod()
                .labels(TEST)
                .cpu("2")
                .spread_with(tsc(key, 1, "DoNotSchedule"))
                .times(5),
        );
        assert_eq!(r.skew(key, TEST), [1, 2], "{name}");
    }
}

#[test]
fn combined_spread_over_rounds() {
    // Case, constraints, pods per round, expected skew of the first key per round.
    type RoundsCase = (
        &'static str,
        Vec<TopologySpreadConstraint>,
        [usize; 4],
        [&'static [usize]; 4],
    );
    let cases: [RoundsCase; 2] = [
        (
            "zone and hostname (max skew 3) over rounds",
            vec![
                tsc(ZONE, 1, "DoNotSchedule"),
                tsc(HOSTNAME, 3, "DoNotSchedule"),
            ],
            [2, 3, 5, 11],
            [&[1, 1], &[1, 2, 2], &[3, 3, 4], &[7, 7, 7]],
        ),
        (
            "capacity type and hostname (max skew 3) over rounds",
            vec![
                tsc(CAPACITY_TYPE, 1, "DoNotSchedule"),
                tsc(HOSTNAME, 3, "DoNotSchedule"),
            ],
            [2, 3, 5, 11],
            [&[1, 1], &[2, 3], &[5, 5], &[10, 11]],
        ),
    ];
    for (name, constraints, rounds, expected) in cases {
        let mut r = Rounds::default();
        for (n, want) in rounds.into_iter().zip(expected) {
            let mut b = pod().labels(TEST);
            for c in &constraints {
                b = b.spread_with(c.clone());
            }
            let o = r.run(Env::new(topology_pool()), &b.times(n));
            all_scheduled(name, &o);
            assert_eq!(
                r.skew(&constraints[0].topology_key, TEST),
                want,
                "{name}: after {n} more"
            );
            assert!(
                r.skew(HOSTNAME, TEST).iter().all(|&c| c <= 3),
                "{name}: no node over 3 after {n} more"
            );
        }
    }

    let name = "capacity type and zone over rounds";
    let mut r = Rounds::default();
    for (n, ct_max, zone_max) in [(2, 1, 1), (3, 3, 2), (3, 5, 4), (11, 11, 7)] {
        r.run(
            Env::new(topology_pool()),
            &pod()
                .labels(TEST)
                .spread_with(tsc(CAPACITY_TYPE, 1, "DoNotSchedule"))
                .spread_with(tsc(ZONE, 1, "DoNotSchedule"))
                .times(n),
        );
        let (ct, zone) = (r.skew(CAPACITY_TYPE, TEST), r.skew(ZONE, TEST));
        assert!(
            ct.iter().all(|&c| c <= ct_max) && zone.iter().all(|&c| c <= zone_max),
            "{name}: after {n} more: capacity types {ct:?}, zones {zone:?}"
        );
    }

    let name = "capacity type, zone and hostname over rounds";
    let mut r = Rounds::default();
    for n in 1..15 {
        let o = r.run(
            Env::with_types(
                topology_pool(),
                karpenter_core::instancetype::fake::instance_types_assorted(),
            ),
            &pod()
                .labels(TEST)
                .spread_with(tsc(CAPACITY_TYPE, 1, "DoNotSchedule"))
                .spread_with(tsc(ZONE, 2, "DoNotSchedule"))
                .spread_with(tsc(HOSTNAME, 3, "DoNotSchedule"))
                .times(n),
        );
        all_scheduled(name, &o);
        for (key, max) in [(CAPACITY_TYPE, 1), (ZONE, 2), (HOSTNAME, 3)] {
            assert!(
                r.max_skew(key, TEST) <= max,
                "{name}: after {n} more, {key}: {:?}",
                r.skew(key, TEST)
            );
        }
    }

    let name = "zone spread and a NodePool that cannot launch";
    let mut r = Rounds::default();
    r.run(
        Env::new(zones_pool(&["test-zone-1", "test-zone-2"])).pool(
            node_pool("disabled")
                .only(ZONE, Operator::In, &["test-zone-3"])
                .limit("cpu", "0"),
        ),
        &pod()
            .labels(TEST)
            .spread_with(tsc(ZONE, 1, "DoNotSchedule"))
            .spread_with(tsc(HOSTNAME, 1, "ScheduleAnyway"))
            .times(10),
    );
    assert_eq!(r.skew(ZONE, TEST), [1, 1], "{name}: zones");
    assert_eq!(r.skew(HOSTNAME, TEST), [1, 1], "{name}: nodes");

    let name = "spread over NodePool requirements";
    let key = "capacity.spread.4-1";
    let mut r = Rounds::default();
    let o = r.run(
        Env::new(
            node_pool("spot")
                .only(CAPACITY_TYPE, Operator::In, &["spot"])
                .require(key, Operator::In, &["2", "3", "4", "5"]),
        )
        .pool(
            node_pool("on-demand")
                .only(CAPACITY_TYPE, Operator::In, &["on-demand"])
                .require(key, Operator::In, &["1"]),
        ),
        &pod()
            .labels(TEST)
            .spread_with(tsc(key, 1, "DoNotSchedule"))
            .times(20),
    );
    all_scheduled(name, &o);
    assert_eq!(r.skew(key, TEST), [4, 4, 4, 4, 4], "{name}");
    assert_eq!(
        r.skew(CAPACITY_TYPE, TEST),
        [4, 16],
        "{name}: 4:1 spot to on-demand"
    );
}

#[test]
fn spread_with_node_affinity_over_rounds() {
    let spread = |key| pod().labels(TEST).spread_with(tsc(key, 1, "DoNotSchedule"));
    let name = "required zones, then a pod reaching the empty zone";
    let mut r = Rounds::default();
    r.run(
        Env::new(topology_pool()),
        &spread(ZONE)
            .require(&[(ZONE, "In", &["test-zone-1", "test-zone-2"])])
            .times(6),
    );
    assert_eq!(r.skew(ZONE, TEST), [3, 3], "{name}");
    let all_zones = || zones_pool(&["test-zone-1", "test-zone-2", "test-zone-3"]);
    r.run(
        Env::new(all_zones()),
        &[spread(ZONE)
            .require(&[(ZONE, "In", &["test-zone-2", "test-zone-3"])])
            .build()],
    );
    assert_eq!(r.skew(ZONE, TEST), [1, 3, 3], "{name}");
    r.run(Env::new(all_zones()), &spread(ZONE).times(5));
    assert_eq!(r.skew(ZONE, TEST), [4, 4, 4], "{name}");

    let name = "required capacity type, then a pod reaching on-demand";
    let mut r = Rounds::default();
    r.run(
        Env::new(topology_pool()),
        &spread(CAPACITY_TYPE)
            .require(&[(CAPACITY_TYPE, "In", &["spot"])])
            .times(3),
    );
    assert_eq!(r.skew(CAPACITY_TYPE, TEST), [3], "{name}");
    r.run(
        Env::new(topology_pool()),
        &[spread(CAPACITY_TYPE)
            .require(&[(CAPACITY_TYPE, "In", &["on-demand", "spot"])])
            .build()],
    );
    assert_eq!(r.skew(CAPACITY_TYPE, TEST), [1, 3], "{name}");
    r.run(Env::new(topology_pool()), &spread(CAPACITY_TYPE).times(5));
    assert_eq!(r.skew(CAPACITY_TYPE, TEST), [4, 5], "{name}");
}

#[test]
fn pod_affinity_cases() {
    use k8s_openapi::api::core::v1::{Affinity, PodAffinity, PodAntiAffinity};
    let pool = topology_pool;

    let name = "empty pod affinity and anti-affinity";
    let mut p = pod().build();
    p.spec.as_mut().expect("a spec").affinity = Some(Affinity {
        pod_affinity: Some(PodAffinity {
            required_during_scheduling_ignored_during_execution: Some(Vec::new()),
            ..Default::default()
        }),
        pod_anti_affinity: Some(PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(Vec::new()),
            ..Default::default()
        }),
        ..Default::default()
    });
    all_scheduled(name, &Env::new(pool()).provision(&[p]));

    let name = "affinity to arch with a hostname spread";
    let hostname_s2 = TopologySpreadConstraint {
        label_selector: Some(selector(S2)),
        ..tsc(HOSTNAME, 1, "DoNotSchedule")
    };
    let pods = [
        pod()
            .labels(S2)
            .spread_with(hostname_s2.clone())
            .cpu("2")
            .node_selector(&[(ARCH, "arm64")])
            .build(),
        pod()
            .labels(S2)
            .spread_with(hostname_s2)
            .cpu("1")
            .affinity_to(ARCH, S2)
            .build(),
    ];
    let o = Env::new(pool()).provision(&pods);
    all_scheduled(name, &o);
    assert_eq!(o.label(0, ARCH), o.label(1, ARCH), "{name}: same arch");
    assert_ne!(o.node(0).name, o.node(1).name, "{name}: other nodes");

    let name = "self affinity fills one node, then nothing";
    let self_host = || pod().labels(S2).affinity_to(HOSTNAME, S2).times(10);
    let mut r = Rounds::default();
    let o = r.run(Env::new(pool()), &self_host());
    let placed: Vec<_> = o.placement.iter().flatten().collect();
    assert_eq!(placed.len(), 5, "{name}: a node holds five pods");
    assert!(
        placed.iter().all(|p| *p == placed[0]),
        "{name}: on one node"
    );
    none_scheduled(name, &r.run(Env::new(pool()), &self_host()));

    let name = "self affinity to a node in another zone";
    let mut r = Rounds::default();
    r.run(
        Env::new(pool()),
        &[pod()
            .labels(S2)
            .node_selector(&[(ZONE, "test-zone-1")])
            .affinity_to(HOSTNAME, S2)
            .build()],
    );
    let o = r.run(
        Env::new(pool()),
        &pod()
            .labels(S2)
            .require(&[(ZONE, "In", &["test-zone-2", "test-zone-3"])])
            .affinity_to(HOSTNAME, S2)
            .times(10),
    );
    none_scheduled(name, &o);

    for (name, zones) in [
        ("self zone affinity packs one node", None),
        ("self zone affinity within zone 3", Some("test-zone-3")),
    ] {
        let mut b = pod().labels(S2).affinity_to(ZONE, S2);
        if let Some(zone) = zones {
            b = b.require(&[(ZONE, "In", &[zone])]);
        }
        let o = Env::new(pool()).provision(&b.times(3));
        all_scheduled(name, &o);
        assert_eq!(o.nodes.len(), 1, "{name}");
        if zones.is_some() {
            assert_eq!(o.label(0, ZONE), zones, "{name}");
        }
    }

    let name = "self zone affinity with incompatible zones";
    let s1 = &[("security", "s1")];
    let in_zone = |zone: &str| {
        pod()
            .labels(s1)
            .affinity_to(ZONE, s1)
            .require(&[(ZONE, "In", &[zone])])
            .build()
    };
    let o = Env::new(pool()).provision(&[in_zone("test-zone-2"), in_zone("test-zone-3")]);
    all_scheduled(name, &o);
    assert_eq!(o.label(0, ZONE), Some("test-zone-2"), "{name}");
    assert_eq!(o.label(1, ZONE), Some("test-zone-3"), "{name}");
    assert_eq!(o.nodes.len(), 2, "{name}");

    let name = "zone affinity to a pod that does not exist";
    let o = Env::new(pool()).provision(&pod().affinity_to(ZONE, S2).times(10));
    none_scheduled(name, &o);

    let name = "zone affinity to a pod whose zone is not yet known";
    let mut pods = pod().affinity_to(ZONE, S2).times(10);
    pods.push(pod().labels(S2).build());
    let mut r = Rounds::default();
    let o = r.run(Env::new(pool()), &pods);
    assert!(o.scheduled(10), "{name}: the target schedules");
    assert!(
        (0..10).all(|i| !o.scheduled(i)),
        "{name}: the followers wait"
    );
    assert_eq!(r.skew(ZONE, &[]), [1], "{name}");
    let o = r.run(Env::new(pool()), &pods[..10]);
    all_scheduled(name, &o);
    assert_eq!(r.skew(ZONE, &[]), [11], "{name}: the followers join it");

    let name = "zone affinity to a pod pinned to zone 1";
    let mut pods = pod().affinity_to(ZONE, S2).times(10);
    pods.push(
        pod()
            .labels(S2)
            .require(&[(ZONE, "In", &["test-zone-1"])])
            .build(),
    );
    let mut r = Rounds::default();
    let o = r.run(Env::new(pool()), &pods);
    all_scheduled(name, &o);
    assert_eq!(r.skew(ZONE, &[]), [11], "{name}");

    let name = "preferred affinity against a hostname spread";
    let mut pods = pod()
        .labels(TEST)
        .spread_with(tsc(HOSTNAME, 1, "DoNotSchedule"))
        .prefer_affinity_to(50, HOSTNAME, S2)
        .times(3);
    pods.push(pod().labels(S2).build());
    let mut r = Rounds::default();
    let o = r.run(Env::new(pool()), &pods);
    all_scheduled(name, &o);
    assert_eq!(r.skew(HOSTNAME, TEST), [1, 1, 1], "{name}");
}

#[test]
fn pod_anti_affinity_cases() {
    let pool = topology_pool;
    let in_zones = |b: fn() -> support::PodBuilder| -> Vec<Pod> {
        ["test-zone-1", "test-zone-2", "test-zone-3"]
            .iter()
            .map(|z| b().cpu("2").node_selector(&[(ZONE, z)]).build())
            .collect()
    };

    let name = "preferred anti-affinity given up";
    let mut pods = pod()
        .labels(TEST)
        .spread_with(tsc(ZONE, 1, "DoNotSchedule"))
        .times(3);
    pods.extend(pod().prefer_anti_affinity_to(50, ZONE, TEST).times(10));
    let o = Env::new(pool()).provision(&pods);
    all_scheduled(name, &o);

    let name = "anti-affinity to a pod whose zone is not yet known";
    let o = Env::new(pool()).provision(&[
        pod().labels(S2).cpu("2").build(),
        pod().anti_affinity_to(ZONE, S2).build(),
    ]);
    assert!(o.scheduled(0), "{name}: the selected pod schedules");
    assert!(!o.scheduled(1), "{name}: the repelled pod waits");

    type Holder = fn() -> support::PodBuilder;
    let cases: [(&str, Holder, bool); 2] = [
        (
            "preferred anti-affinity of pods in every zone given up",
            || pod().prefer_anti_affinity_to(10, ZONE, S2),
            true,
        ),
        (
            "anti-affinity of pods in every zone",
            || pod().anti_affinity_to(ZONE, S2),
            false,
        ),
    ];
    for (name, holder, schedules) in cases {
        let mut pods = in_zones(holder);
        pods.push(pod().labels(S2).build());
        let o = Env::new(pool()).provision(&pods);
        assert!(
            (0..3).all(|i| o.scheduled(i)),
            "{name}: the holders schedule"
        );
        assert_eq!(o.scheduled(3), schedules, "{name}");
        // The same with the holders running on existing nodes (".. w/existing nodes").
        let mut r = Rounds::default();
        let o = r.run(Env::new(pool()), &in_zones(holder));
        all_scheduled(name, &o);
        let o = r.run(Env::new(pool()), &[pod().labels(S2).build()]);
        assert_eq!(o.scheduled(0), schedules, "{name}, running");
    }

    let name = "anti-affinity to a pod whose zone is settled next round";
    let mut r = Rounds::default();
    let pods = [
        pod().anti_affinity_to(ZONE, S2).cpu("2").build(),
        pod().labels(S2).build(),
    ];
    let o = r.run(Env::new(pool()), &pods);
    assert!(o.scheduled(0), "{name}: the holder schedules");
    assert!(!o.scheduled(1), "{name}: its zone is unknown");
    let holder_zone = o.label(0, ZONE).map(str::to_string);
    let o = r.run(Env::new(pool()), &pods[1..]);
    assert!(o.scheduled(0), "{name}: the zone is known now");
    assert_ne!(o.label(0, ZONE).map(str::to_string), holder_zone, "{name}");
}

/// Upstream's `Taints` block of the same suite.
#[test]
fn node_pool_taints() {
    let taint = |key: &str, value: &str| Taint {
        key: key.into(),
        value: Some(value.into()),
        effect: "NoSchedule".into(),
        time_added: None,
    };
    let name = "NodePool taints are on the NodeClaim";
    let o = Env::new(topology_pool().taint("test", "bar", "NoSchedule"))
        .provision(&[pod().tolerate("", "Exists", "", "NoSchedule").build()]);
    all_scheduled(name, &o);
    assert!(
        o.results.new_node_claims[0]
            .taints
            .contains(&taint("test", "bar")),
        "{name}: {:?}",
        o.results.new_node_claims[0].taints
    );

    let tainted = || Env::new(topology_pool().taint("test-key", "test-value", "NoSchedule"));
    for (name, p, schedules) in [
        (
            "tolerates the NodePool taint by Exists",
            pod().tolerate("test-key", "Exists", "", "NoSchedule"),
            true,
        ),
        (
            "tolerates the NodePool taint by Equal",
            pod().tolerate("test-key", "Equal", "test-value", "NoSchedule"),
            true,
        ),
        ("no toleration of the NodePool taint", pod(), false),
        (
            "a toleration of another key",
            pod().tolerate("invalid", "Exists", "", ""),
            false,
        ),
        (
            "a toleration of another value",
            pod().tolerate("test-key", "Equal", "", "NoSchedule"),
            false,
        ),
    ] {
        let o = tainted().provision(&[p.build()]);
        assert_eq!(
            o.scheduled(0),
            schedules,
            "{name}: {:?}",
            o.results.pod_errors
        );
    }

    let name = "a toleration adds no taint";
    let o = Env::new(topology_pool()).provision(&[pod()
        .tolerate("test-key", "Exists", "", "NoExecute")
        .build()]);
    all_scheduled(name, &o);
    let claim = &o.results.new_node_claims[0];
    assert!(
        claim.taints.is_empty() && claim.startup_taints.is_empty(),
        "{name}: {:?}",
        claim.taints
    );
}

/// Upstream's "should only count running/scheduled pods with matching labels scheduled to
/// nodes with a corresponding domain" once more, through a whole round over Kubernetes
/// objects, with the pods the batch leaves out: one pending but not marked unschedulable, one
/// terminating before it was bound.
#[test]
fn only_active_selected_pods_count_in_a_round() {
    use karpenter_core::instancetype::fake::FakeInstanceType;
    use support::cluster::{Cluster, managed, named, on, pending};
    let roomy = || {
        FakeInstanceType::new("roomy")
            .resources(&[("cpu", "8"), ("memory", "16Gi"), ("pods", "20")])
            .build()
    };
    let name = "only active selected pods count, through a round";
    let mut cluster = Cluster::new([topology_pool()])
        .node(managed("first", "default", "default-instance-type").instance_type(roomy()))
        .node(
            managed("second", "default", "default-instance-type")
                .instance_type(roomy())
                .zone("test-zone-2"),
        );
    // A node without a zone (not karpenter's).
    cluster.nodes.push(
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "third", "labels": {"kubernetes.io/hostname": "third"}},
            "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "20"},
                "capacity": {"cpu": "8", "memory": "16Gi", "pods": "20"},
                "conditions": [{"type": "Ready", "status": "True"}]},
        }))
        .expect("a Node"),
    );
    let test = || pod().labels(TEST).build();
    let mut terminating = test();
    terminating.metadata.deletion_timestamp = Some(
        serde_json::from_value(serde_json::json!("2024-06-03T11:59:50Z")).expect("a timestamp"),
    );
    let spread = || {
        pending(
            pod()
                .labels(TEST)
                .spread_with(tsc(ZONE, 1, "DoNotSchedule"))
                .build(),
        )
    };
    // Not seen by the kube-scheduler yet (no `PodScheduled` condition): not for karpenter.
    cluster.pods.push(named("not-unschedulable", test()));
    let cluster = cluster.pods([
        named("unlabelled", on("first", pod().build())),
        named("no-domain", on("third", test())),
        named(
            "other-namespace",
            on("first", pod().labels(TEST).namespace("other").build()),
        ),
        named("terminating", pending(terminating)),
        named(
            "failed",
            on("first", pod().labels(TEST).phase("Failed").build()),
        ),
        named(
            "succeeded",
            on("first", pod().labels(TEST).phase("Succeeded").build()),
        ),
        named("a", on("first", test())),
        named("b", on("first", test())),
        named("c", on("second", test())),
        named("spread-0", spread()),
        named("spread-1", spread()),
    ]);
    let p = cluster.provision();
    for ignored in ["not-unschedulable", "terminating"] {
        assert!(
            !p.scheduled(ignored) && !p.failed.contains_key(ignored),
            "{name}: {ignored} is not in the batch"
        );
    }
    let mut zones: BTreeMap<String, usize> = [
        ("test-zone-1".to_string(), 2),
        ("test-zone-2".to_string(), 1),
    ]
    .into();
    for spread in ["spread-0", "spread-1"] {
        let zone = if let Some(claim) = p.claims.iter().find(|c| c.pods.iter().any(|x| x == spread))
        {
            claim.labels.get(ZONE).cloned()
        } else {
            let node = p
                .existing
                .iter()
                .find(|(_, pods)| pods.iter().any(|x| x == spread))
                .map(|(n, _)| n.as_str());
            match node {
                Some("first") => Some("test-zone-1".to_string()),
                Some("second") => Some("test-zone-2".to_string()),
                other => panic!("{name}: {spread} placed on {other:?}: {:?}", p.failed),
            }
        };
        *zones
            .entry(zone.unwrap_or_else(|| panic!("{name}: {spread} has a zone")))
            .or_default() += 1;
    }
    let mut skew: Vec<usize> = zones.into_values().collect();
    skew.sort_unstable();
    assert_eq!(skew, [1, 2, 2], "{name}: {p:?}");
}
