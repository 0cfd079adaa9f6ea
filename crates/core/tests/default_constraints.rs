//! Default topology spread (upstream's `--scheduler-config`): upstream's cases from
//! `defaultconstraints_test.go` (the selector kube-scheduler deduces for a pod, and which pods
//! get the defaults) through [`default_spread`], and those of `topology_test.go`'s
//! `DefaultConstraints` context through the round, with upstream's fake instance types.

mod support;

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController, Service, TopologySpreadConstraint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use karpenter_api::Operator;
use karpenter_core::provisioning::scheduling::default_constraints::{
    SchedulerConfigError, SchedulerConfiguration, SelectorSources, default_spread,
};
use karpenter_core::scheduling::selector::matches;
use karpenter_core::state::selectors::{PodController, ServiceSelector};
use serde_json::json;
use support::cluster::*;
use support::*;

const ZONE: &str = "topology.kubernetes.io/zone";
const HOSTNAME: &str = "kubernetes.io/hostname";

fn constraint(key: &str, when: &str, max_skew: i32) -> TopologySpreadConstraint {
    TopologySpreadConstraint {
        topology_key: key.into(),
        when_unsatisfiable: when.into(),
        max_skew,
        ..Default::default()
    }
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn replica_set(name: &str, selector: serde_json::Value) -> PodController {
    PodController::from(
        serde_json::from_value::<ReplicaSet>(json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": "default", "uid": format!("{name}-uid")},
            "spec": {"selector": selector, "template": {}},
        }))
        .unwrap(),
    )
}

fn rs(name: &str, match_labels: &[(&str, &str)]) -> PodController {
    replica_set(name, json!({"matchLabels": labels(match_labels)}))
}

fn stateful_set(name: &str, match_labels: &[(&str, &str)]) -> PodController {
    PodController::from(
        serde_json::from_value::<StatefulSet>(json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": labels(match_labels)}, "template": {}, "serviceName": name},
        }))
        .unwrap(),
    )
}

fn replication_controller(name: &str, selector: &[(&str, &str)]) -> PodController {
    PodController::from(
        serde_json::from_value::<ReplicationController>(json!({
            "apiVersion": "v1", "kind": "ReplicationController",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": labels(selector)},
        }))
        .unwrap(),
    )
}

fn service(name: &str, namespace: &str, selector: Option<&[(&str, &str)]>) -> ServiceSelector {
    let mut spec = json!({});
    if let Some(s) = selector {
        spec["selector"] = json!(labels(s));
    }
    ServiceSelector::from(
        serde_json::from_value::<Service>(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }))
        .unwrap(),
    )
}

/// `pod` controlled by `kind`/`name` (of `api_version`), or merely owned when `controller`
/// is false.
fn owned(mut pod: Pod, api_version: &str, kind: &str, name: &str, controller: bool) -> Pod {
    pod.metadata.owner_references = Some(vec![
        serde_json::from_value(
            json!({"apiVersion": api_version, "kind": kind, "name": name,
            "uid": format!("{name}-uid"), "controller": controller}),
        )
        .unwrap(),
    ]);
    pod
}

fn by_rs(pod: Pod, name: &str) -> Pod {
    owned(pod, "apps/v1", "ReplicaSet", name, true)
}

fn requirement(key: &str, operator: &str, values: &[&str]) -> LabelSelectorRequirement {
    LabelSelectorRequirement {
        key: key.into(),
        operator: operator.into(),
        values: Some(values.iter().map(|v| v.to_string()).collect()),
    }
}

/// The constraints each of `pods` gets under a zonal DoNotSchedule default, in order.
fn injected_with(
    defaults: &[TopologySpreadConstraint],
    pods: &[Pod],
    services: &[ServiceSelector],
    controllers: &[PodController],
) -> Vec<Option<Vec<TopologySpreadConstraint>>> {
    let services: Vec<&ServiceSelector> = services.iter().collect();
    let controllers: Vec<&PodController> = controllers.iter().collect();
    let sources = SelectorSources::new(&services, &controllers);
    let spread = default_spread(pods.iter(), defaults, &sources);
    pods.iter()
        .map(|p| {
            let key = format!(
                "{}/{}",
                p.metadata.namespace.as_deref().unwrap_or("default"),
                p.metadata.name.as_deref().unwrap_or_default()
            );
            spread.get(&key).map(|c| c.to_vec())
        })
        .collect()
}

/// The selector the zonal default gets for one pod, `None` when the pod is not defaulted.
fn deduced(
    pod: Pod,
    services: &[ServiceSelector],
    controllers: &[PodController],
) -> Option<LabelSelector> {
    let zonal = [constraint(ZONE, "DoNotSchedule", 1)];
    let mut got = injected_with(&zonal, &[pod], services, controllers);
    let constraints = got.pop().unwrap()?;
    assert_eq!(constraints.len(), 1);
    assert_eq!(constraints[0].topology_key, ZONE);
    constraints[0].label_selector.clone()
}

fn web(pairs: &[(&str, &str)]) -> Pod {
    pod().labels(pairs).build()
}

// --- owner selectors ---------------------------------------------------------------------

#[test]
fn a_replica_sets_selector_not_the_pods_labels() {
    let s = deduced(
        by_rs(
            web(&[
                ("app", "web"),
                ("pod-template-hash", "abc123"),
                ("extra", "ignored"),
            ]),
            "web",
        ),
        &[],
        &[rs(
            "web",
            &[("app", "web"), ("pod-template-hash", "abc123")],
        )],
    )
    .expect("deduced");
    assert_eq!(s.match_labels, None);
    assert_eq!(
        s.match_expressions.unwrap(),
        [
            requirement("app", "In", &["web"]),
            requirement("pod-template-hash", "In", &["abc123"])
        ]
    );
}

#[test]
fn a_stateful_sets_selector_without_the_pods_volatile_labels() {
    let pod = owned(
        web(&[
            ("app", "db"),
            ("controller-revision-hash", "db-6f8c"),
            ("statefulset.kubernetes.io/pod-name", "db-0"),
            ("apps.kubernetes.io/pod-index", "0"),
        ]),
        "apps/v1",
        "StatefulSet",
        "db",
        true,
    );
    let s = deduced(pod, &[], &[stateful_set("db", &[("app", "db")])]).expect("deduced");
    assert_eq!(
        s.match_expressions.unwrap(),
        [requirement("app", "In", &["db"])]
    );
}

#[test]
fn a_replica_sets_match_expressions_verbatim() {
    let s = deduced(
        by_rs(web(&[("app", "web")]), "web"),
        &[],
        &[replica_set(
            "web",
            json!({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["other"]}]}),
        )],
    )
    .expect("deduced");
    assert_eq!(
        s.match_expressions.unwrap(),
        [requirement("app", "NotIn", &["other"])]
    );
}

#[test]
fn a_replication_controllers_selector_as_labels() {
    let pod = owned(
        web(&[("app", "legacy")]),
        "v1",
        "ReplicationController",
        "legacy",
        true,
    );
    let s = deduced(
        pod,
        &[],
        &[replication_controller("legacy", &[("app", "legacy")])],
    )
    .expect("deduced");
    assert_eq!(s.match_labels, Some(labels(&[("app", "legacy")])));
    assert_eq!(s.match_expressions, None);
}

#[test]
fn owners_that_contribute_nothing() {
    let cases = [
        (
            "an unsupported owner kind (a Job)",
            owned(web(&[("app", "batch")]), "batch/v1", "Job", "job", true),
        ),
        (
            "a non-controller owner reference",
            owned(
                web(&[("app", "web")]),
                "apps/v1",
                "ReplicaSet",
                "web",
                false,
            ),
        ),
        (
            "an owner that no longer exists",
            by_rs(web(&[("app", "web")]), "does-not-exist"),
        ),
    ];
    for (name, pod) in cases {
        assert_eq!(
            deduced(pod, &[], &[rs("web", &[("app", "web")])]),
            None,
            "{name}"
        );
    }
}

// --- service selectors -------------------------------------------------------------------

#[test]
fn a_matching_services_selector_as_labels() {
    let s = deduced(
        web(&[("app", "web"), ("extra", "ignored")]),
        &[service("web", "default", Some(&[("app", "web")]))],
        &[],
    )
    .expect("deduced");
    assert_eq!(s.match_labels, Some(labels(&[("app", "web")])));
    assert_eq!(s.match_expressions, None);
}

#[test]
fn every_matching_services_selector_merged() {
    let s = deduced(
        web(&[("app", "web"), ("tier", "frontend")]),
        &[
            service("a", "default", Some(&[("app", "web")])),
            service("b", "default", Some(&[("tier", "frontend")])),
        ],
        &[],
    )
    .expect("deduced");
    assert_eq!(
        s.match_labels,
        Some(labels(&[("app", "web"), ("tier", "frontend")]))
    );
}

#[test]
fn services_that_contribute_nothing() {
    let cases = [
        (
            "a non-matching service",
            service("s", "default", Some(&[("app", "other")])),
        ),
        ("a service with no selector", service("s", "default", None)),
        (
            "a service with an empty selector",
            service("s", "default", Some(&[])),
        ),
        (
            "a matching service in another namespace",
            service("s", "other", Some(&[("app", "web")])),
        ),
    ];
    for (name, svc) in cases {
        assert_eq!(deduced(web(&[("app", "web")]), &[svc], &[]), None, "{name}");
    }
}

#[test]
fn a_service_selector_and_the_owners_combined() {
    let s = deduced(
        by_rs(
            web(&[
                ("app", "web"),
                ("pod-template-hash", "abc123"),
                ("tier", "frontend"),
            ]),
            "web",
        ),
        &[service("front", "default", Some(&[("tier", "frontend")]))],
        &[rs(
            "web",
            &[("app", "web"), ("pod-template-hash", "abc123")],
        )],
    )
    .expect("deduced");
    assert_eq!(s.match_labels, Some(labels(&[("tier", "frontend")])));
    assert_eq!(
        s.match_expressions.unwrap(),
        [
            requirement("app", "In", &["web"]),
            requirement("pod-template-hash", "In", &["abc123"])
        ]
    );
}

// --- conflicting service and owner selectors ---------------------------------------------

#[test]
fn a_replication_controller_overwrites_a_conflicting_service_label() {
    let pod = owned(
        web(&[("app", "web")]),
        "v1",
        "ReplicationController",
        "legacy",
        true,
    );
    let s = deduced(
        pod,
        &[service("web", "default", Some(&[("app", "web")]))],
        &[replication_controller("legacy", &[("app", "legacy")])],
    )
    .expect("deduced");
    assert_eq!(s.match_labels, Some(labels(&[("app", "legacy")])));
    assert_eq!(s.match_expressions, None);
}

#[test]
fn a_replica_sets_conflicting_selector_is_anded_and_selects_nothing() {
    let s = deduced(
        by_rs(web(&[("app", "web")]), "other"),
        &[service("web", "default", Some(&[("app", "web")]))],
        &[rs("other", &[("app", "other")])],
    )
    .expect("deduced");
    assert_eq!(s.match_labels, Some(labels(&[("app", "web")])));
    assert_eq!(
        s.match_expressions.clone().unwrap(),
        [requirement("app", "In", &["other"])]
    );
    assert!(!matches(&s, &labels(&[("app", "web")])));
    assert!(!matches(&s, &labels(&[("app", "other")])));
}

// --- selector caching ----------------------------------------------------------------------

#[test]
fn pods_of_one_owner_with_different_labels_get_their_own_selectors() {
    let frontend = named(
        "frontend",
        by_rs(web(&[("app", "web"), ("tier", "frontend")]), "web"),
    );
    let plain = named("plain", by_rs(web(&[("app", "web")]), "web"));
    let got = injected_with(
        &[constraint(ZONE, "DoNotSchedule", 1)],
        &[frontend, plain],
        &[service("front", "default", Some(&[("tier", "frontend")]))],
        &[rs("web", &[("app", "web")])],
    );
    let selector = |i: usize| got[i].as_ref().unwrap()[0].label_selector.clone().unwrap();
    assert_eq!(
        selector(0).match_labels,
        Some(labels(&[("tier", "frontend")]))
    );
    assert_eq!(selector(1).match_labels, None);
}

#[test]
fn identically_labelled_pods_in_other_namespaces_get_their_own_selectors() {
    let selected = named("a", web(&[("app", "web")]));
    let mut other = named("a", web(&[("app", "web")]));
    other.metadata.namespace = Some("other".into());
    let got = injected_with(
        &[constraint(ZONE, "DoNotSchedule", 1)],
        &[selected, other],
        &[service("web", "default", Some(&[("app", "web")]))],
        &[],
    );
    assert_eq!(got[0].as_ref().map(Vec::len), Some(1));
    assert_eq!(got[1], None);
}

// --- injection ---------------------------------------------------------------------------

#[test]
fn nothing_is_injected_without_defaults_or_into_a_pod_with_its_own() {
    let controllers = [rs("web", &[("app", "web")])];
    let own = web(&[("app", "web")]);
    let mut own = by_rs(own, "web");
    own.spec.as_mut().unwrap().topology_spread_constraints = Some(vec![TopologySpreadConstraint {
        label_selector: Some(selector(&[("app", "web")])),
        ..constraint(HOSTNAME, "ScheduleAnyway", 5)
    }]);
    assert_eq!(
        injected_with(
            &[constraint(ZONE, "DoNotSchedule", 1)],
            &[own],
            &[],
            &controllers
        ),
        [None],
        "a pod's own constraints stand"
    );
    assert_eq!(
        injected_with(
            &[],
            &[by_rs(web(&[("app", "web")]), "web")],
            &[],
            &controllers
        ),
        [None],
        "no defaults configured"
    );
}

#[test]
fn the_configured_fields_are_kept_on_the_injected_constraint() {
    let default = TopologySpreadConstraint {
        min_domains: Some(3),
        node_taints_policy: Some("Honor".into()),
        ..constraint(ZONE, "ScheduleAnyway", 4)
    };
    let got = injected_with(
        std::slice::from_ref(&default),
        &[by_rs(web(&[("app", "web")]), "web")],
        &[],
        &[rs("web", &[("app", "web")])],
    );
    let c = &got[0].as_ref().unwrap()[0];
    assert_eq!(c.max_skew, 4);
    assert_eq!(c.when_unsatisfiable, "ScheduleAnyway");
    assert_eq!(c.min_domains, Some(3));
    assert_eq!(c.node_taints_policy.as_deref(), Some("Honor"));
    assert!(c.label_selector.is_some());
}

#[test]
fn pods_of_different_workloads_get_independent_selectors() {
    let got = injected_with(
        &[constraint(ZONE, "DoNotSchedule", 1)],
        &[
            named("web", by_rs(web(&[("app", "web")]), "web")),
            named("api", by_rs(web(&[("app", "api")]), "api")),
            named("orphan", web(&[("app", "orphan")])),
        ],
        &[],
        &[rs("web", &[("app", "web")]), rs("api", &[("app", "api")])],
    );
    let expressions = |i: usize| {
        got[i].as_ref().unwrap()[0]
            .label_selector
            .clone()
            .unwrap()
            .match_expressions
            .unwrap()
    };
    assert_eq!(expressions(0), [requirement("app", "In", &["web"])]);
    assert_eq!(expressions(1), [requirement("app", "In", &["api"])]);
    assert_eq!(got[2], None);
}

// --- the configuration ---------------------------------------------------------------------

#[test]
fn a_configuration_is_read_and_checked_as_kube_scheduler_checks_it() {
    let ok = SchedulerConfiguration::from_value(json!({"podTopologySpread": {"defaultConstraints": [
        {"maxSkew": 3, "topologyKey": HOSTNAME, "whenUnsatisfiable": "ScheduleAnyway"},
        {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", "minDomains": 2},
    ]}}))
    .expect("valid");
    assert_eq!(ok.default_constraints.len(), 2);
    assert_eq!(ok.default_constraints[1].min_domains, Some(2));
    assert_eq!(
        SchedulerConfiguration::from_value(serde_json::Value::Null),
        Ok(SchedulerConfiguration::default())
    );
    let refused = |value: serde_json::Value| SchedulerConfiguration::from_value(value).unwrap_err();
    let one = |c: serde_json::Value| json!({"podTopologySpread": {"defaultConstraints": [c]}});
    let field = |f: &str| format!("podTopologySpread.defaultConstraints[0].{f}");
    let cases: Vec<(&str, serde_json::Value, String)> = vec![
        (
            "an unknown top-level field",
            json!({"podTopologySpreads": {}}),
            "podTopologySpreads".into(),
        ),
        (
            "an unknown constraint field",
            one(
                json!({"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", "maxskew": 2}),
            ),
            field("maxskew"),
        ),
        (
            "maxSkew 0",
            one(json!({"maxSkew": 0, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"})),
            field("maxSkew"),
        ),
        (
            "no topologyKey",
            one(json!({"maxSkew": 1, "topologyKey": "", "whenUnsatisfiable": "DoNotSchedule"})),
            field("topologyKey"),
        ),
        (
            "an invalid topologyKey",
            one(
                json!({"maxSkew": 1, "topologyKey": "not a key", "whenUnsatisfiable": "DoNotSchedule"}),
            ),
            field("topologyKey"),
        ),
        (
            "an unknown whenUnsatisfiable",
            one(json!({"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "Sometimes"})),
            field("whenUnsatisfiable"),
        ),
        (
            "a labelSelector",
            one(
                json!({"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}}}),
            ),
            field("labelSelector"),
        ),
        (
            "matchLabelKeys",
            one(
                json!({"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                "matchLabelKeys": ["pod-template-hash"]}),
            ),
            field("matchLabelKeys"),
        ),
        (
            "a duplicate",
            json!({"podTopologySpread": {"defaultConstraints": [
                {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"},
                {"maxSkew": 2, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"},
            ]}}),
            "podTopologySpread.defaultConstraints[1]".into(),
        ),
    ];
    for (name, value, expected) in cases {
        let SchedulerConfigError { field, reason } = refused(value);
        assert_eq!(field, expected, "{name}: {reason}");
    }
}

// --- through the round (`topology_test.go`, DefaultConstraints) -----------------------------

const TEST: &[(&str, &str)] = &[("test", "test")];

/// `n` pods labelled `test: test` of the ReplicaSet `rs`, named `prefix-i`.
fn rs_pods(prefix: &str, n: usize, pairs: &[(&str, &str)], rs_name: &str) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            named(
                &format!("{prefix}-{i}"),
                by_rs(pod().labels(pairs).build(), rs_name),
            )
        })
        .collect()
}

fn with_defaults(cluster: Cluster, defaults: &[TopologySpreadConstraint]) -> Cluster {
    let mut cluster = cluster.controller(rs("rs", TEST));
    cluster.options.default_constraints = defaults.to_vec();
    cluster
}

/// Pods carrying `pairs` per zone (existing nodes' and new NodeClaims'), sorted (upstream's
/// `ExpectSkew`).
fn zone_skew(cluster: &Cluster, provisioned: &Provisioned, pairs: &[(&str, &str)]) -> Vec<usize> {
    let selected = |name: &str| {
        cluster.pods.iter().any(|p| {
            p.metadata.name.as_deref() == Some(name)
                && pairs.iter().all(|(k, v)| {
                    p.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(*k))
                        .map(String::as_str)
                        == Some(*v)
                })
        })
    };
    let mut per: BTreeMap<String, usize> = BTreeMap::new();
    for claim in &provisioned.claims {
        let zone = claim
            .labels
            .get(ZONE)
            .cloned()
            .expect("a spread claim has one zone");
        *per.entry(zone).or_default() += claim.pods.iter().filter(|p| selected(p)).count();
    }
    for node in &cluster.nodes {
        let zone = node.metadata.labels.as_ref().unwrap()[ZONE].clone();
        let name = node.metadata.name.clone().unwrap();
        let bound = cluster
            .pods
            .iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(name.as_str()))
            .filter(|p| selected(p.metadata.name.as_deref().unwrap()))
            .count();
        let placed = provisioned
            .existing
            .get(&name)
            .map_or(0, |pods| pods.iter().filter(|p| selected(p)).count());
        *per.entry(zone).or_default() += bound + placed;
    }
    let mut v: Vec<usize> = per.into_values().filter(|&n| n > 0).collect();
    v.sort_unstable();
    v
}

fn nodes_used(provisioned: &Provisioned) -> usize {
    provisioned.claims.len() + provisioned.existing.len()
}

#[test]
fn a_zonal_default_spreads_a_pod_without_constraints() {
    let cluster = with_defaults(
        Cluster::new([node_pool("default")]),
        &[constraint(ZONE, "DoNotSchedule", 1)],
    )
    .pods(rs_pods("p", 4, TEST, "rs"));
    let provisioned = cluster.provision();
    assert_eq!(zone_skew(&cluster, &provisioned, TEST), [1, 1, 2]);
}

#[test]
fn a_hostname_default_puts_each_pod_on_its_own_node() {
    let cluster = with_defaults(
        Cluster::new([node_pool("default")]),
        &[constraint(HOSTNAME, "DoNotSchedule", 1)],
    )
    .pods(rs_pods("p", 3, TEST, "rs"));
    let provisioned = cluster.provision();
    assert_eq!(provisioned.claims.len(), 3, "{provisioned:?}");
    assert!(provisioned.claims.iter().all(|c| c.pods.len() == 1));
}

#[test]
fn a_pods_own_constraint_wins_over_the_default() {
    let own = TopologySpreadConstraint {
        label_selector: Some(selector(TEST)),
        ..constraint(HOSTNAME, "DoNotSchedule", 3)
    };
    let pods = (0..3).map(|i| {
        named(
            &format!("p-{i}"),
            by_rs(pod().labels(TEST).spread_with(own.clone()).build(), "rs"),
        )
    });
    let cluster = with_defaults(
        Cluster::new([node_pool("default")]),
        &[constraint(HOSTNAME, "DoNotSchedule", 1)],
    )
    .pods(pods);
    let provisioned = cluster.provision();
    assert_eq!(nodes_used(&provisioned), 1, "{provisioned:?}");
}

#[test]
fn min_domains_is_carried_through_a_default() {
    let default = TopologySpreadConstraint {
        min_domains: Some(3),
        ..constraint(ZONE, "DoNotSchedule", 1)
    };
    let cluster = with_defaults(
        Cluster::new([node_pool("default").only(
            ZONE,
            Operator::In,
            &["test-zone-1", "test-zone-2"],
        )]),
        &[default],
    )
    .pods(rs_pods("p", 3, TEST, "rs"));
    let provisioned = cluster.provision();
    assert_eq!(zone_skew(&cluster, &provisioned, TEST), [1, 1]);
}

/// A spread over one zone is satisfied trivially; minDomains 3 makes the global minimum 0, so a
/// second pod in that zone exceeds maxSkew: the hard form stops there, the soft one relaxes.
#[test]
fn an_unsatisfiable_default_blocks_when_hard_and_relaxes_when_soft() {
    for (when, scheduled) in [("DoNotSchedule", 1), ("ScheduleAnyway", 3)] {
        let default = TopologySpreadConstraint {
            min_domains: Some(3),
            ..constraint(ZONE, when, 1)
        };
        let cluster = with_defaults(
            Cluster::new([node_pool("default").only(ZONE, Operator::In, &["test-zone-1"])]),
            &[default],
        )
        .pods(rs_pods("p", 3, TEST, "rs"));
        let provisioned = cluster.provision();
        let placed = (0..3)
            .filter(|i| provisioned.scheduled(&format!("p-{i}")))
            .count();
        assert_eq!(placed, scheduled, "{when}: {provisioned:?}");
    }
}

#[test]
fn without_a_default_or_a_deduced_selector_pods_share_a_node() {
    let hostname = [constraint(HOSTNAME, "DoNotSchedule", 1)];
    let unconfigured =
        with_defaults(Cluster::new([node_pool("default")]), &[]).pods(rs_pods("p", 3, TEST, "rs"));
    assert_eq!(
        nodes_used(&unconfigured.provision()),
        1,
        "no defaults configured"
    );
    let ownerless = with_defaults(Cluster::new([node_pool("default")]), &hostname)
        .pods((0..3).map(|i| named(&format!("p-{i}"), pod().labels(TEST).build())));
    assert_eq!(
        nodes_used(&ownerless.provision()),
        1,
        "no owner and no Service: no selector, no default"
    );
}

#[test]
fn pods_already_in_the_cluster_count_through_the_deduced_selector() {
    let cluster = with_defaults(
        Cluster::new([node_pool("default").only(
            ZONE,
            Operator::In,
            &["test-zone-1", "test-zone-2"],
        )]),
        &[constraint(ZONE, "DoNotSchedule", 1)],
    )
    .node(managed("existing", "default", "default-instance-type").zone("test-zone-1"))
    .pods(
        rs_pods("old", 2, TEST, "rs")
            .into_iter()
            .map(|p| on("existing", p)),
    )
    .pods(rs_pods("new", 2, TEST, "rs"));
    let provisioned = cluster.provision();
    for claim in &provisioned.claims {
        assert_eq!(
            claim.labels.get(ZONE).map(String::as_str),
            Some("test-zone-2"),
            "{provisioned:?}"
        );
    }
    assert!(provisioned.existing.is_empty(), "{provisioned:?}");
    assert_eq!(zone_skew(&cluster, &provisioned, TEST), [2, 2]);
}

#[test]
fn each_workload_and_each_deployment_revision_spreads_on_its_own() {
    let other: &[(&str, &str)] = &[("test", "other")];
    let workloads = with_defaults(
        Cluster::new([node_pool("default")]),
        &[constraint(ZONE, "DoNotSchedule", 1)],
    )
    .controller(rs("other", other))
    .pods(rs_pods("a", 3, TEST, "rs"))
    .pods(rs_pods("b", 3, other, "other"));
    let provisioned = workloads.provision();
    assert_eq!(zone_skew(&workloads, &provisioned, TEST), [1, 1, 1]);
    assert_eq!(zone_skew(&workloads, &provisioned, other), [1, 1, 1]);

    let old: &[(&str, &str)] = &[("test", "test"), ("pod-template-hash", "old")];
    let new: &[(&str, &str)] = &[("test", "test"), ("pod-template-hash", "new")];
    let revisions = with_defaults(
        Cluster::new([node_pool("default")]),
        &[constraint(ZONE, "DoNotSchedule", 1)],
    )
    .controller(rs("old", old))
    .controller(rs("new", new))
    .pods(rs_pods("old", 3, old, "old"))
    .pods(rs_pods("new", 3, new, "new"));
    let provisioned = revisions.provision();
    assert_eq!(zone_skew(&revisions, &provisioned, old), [1, 1, 1]);
    assert_eq!(zone_skew(&revisions, &provisioned, new), [1, 1, 1]);
}

#[test]
fn a_service_gives_a_job_pod_its_default() {
    let cluster = with_defaults(
        Cluster::new([node_pool("default")]),
        &[constraint(ZONE, "DoNotSchedule", 1)],
    )
    .service(service("svc", "default", Some(TEST)))
    .pods((0..4).map(|i| {
        named(
            &format!("job-{i}"),
            owned(pod().labels(TEST).build(), "batch/v1", "Job", "job", true),
        )
    }));
    let provisioned = cluster.provision();
    assert_eq!(zone_skew(&cluster, &provisioned, TEST), [1, 1, 2]);
}
