//! Upstream's topology suite (`topology_test.go`): zonal, hostname and capacity-type spread,
//! pod affinity and anti-affinity (including the inverse direction), namespaces, minDomains and
//! matchLabelKeys.

mod support;

use k8s_openapi::api::core::v1::{PodAffinityTerm, TopologySpreadConstraint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use karpenter_api::Operator;
use karpenter_core::provisioning::scheduling::BoundPod;
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
