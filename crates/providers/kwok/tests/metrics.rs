//! The controller's metrics end to end: a pod provisioned on a KWOK node, bound, started and
//! removed again, against the fake API server, with the values of upstream's metrics checked
//! along the way (and every series' labels checked against its family's).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use karpenter_api::{NodeClaim, NodePool};
use karpenter_controller::metrics::{Kind, observe};
use karpenter_controller::{Context, Controller, Options};
use karpenter_kwok::{KWOKNodeClass, KwokProvider};
use karpenter_testkit::{FakeApiServer, eventually};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);

/// A server with the KWOK NodeClass and a NodePool, and no scheduler stand-in: the test binds
/// and starts the pod itself, with the transition times a kubelet would write.
fn setup() -> FakeApiServer {
    let server = FakeApiServer::new();
    server
        .install_crds(karpenter_kwok::CRDS.iter().map(|c| c.definition()))
        .unwrap();
    let class: KWOKNodeClass = serde_json::from_value(json!({
        "apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass",
        "metadata": {"name": "default"}, "spec": {},
    }))
    .unwrap();
    server.create(&class).unwrap();
    let pool: NodePool = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                "requirements": [
                    {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                ],
            }},
            "limits": {"cpu": "100"},
        },
    }))
    .unwrap();
    server.create(&pool).unwrap();
    server
}

fn options() -> Options {
    Options {
        batch_idle_duration: Duration::from_millis(100),
        batch_max_duration: Duration::from_millis(1000),
        disable_leader_election: true,
        min_drain_time: Duration::from_millis(100),
        resync: Duration::from_millis(200),
        disruption_poll: Duration::from_millis(200),
        consolidation_validation: Duration::from_millis(400),
        ..Options::default()
    }
}

fn time(t: Timestamp) -> String {
    t.round(k8s_openapi::jiff::Unit::Second)
        .unwrap()
        .to_string()
}

/// The value of the first series of `name` whose labels include `labels`.
fn value(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .find(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// Every sample's label names are exactly its family's (plus `le` or `quantile`).
fn assert_well_formed(ctx: &Context<KwokProvider>, text: &str) {
    let families = ctx.metrics.descriptors();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (series, _) = line.rsplit_once(' ').unwrap();
        let (name, labels) = series.split_once('{').unwrap_or((series, "}"));
        let names: BTreeSet<&str> = labels
            .trim_end_matches('}')
            .split("\",")
            .filter(|p| !p.is_empty())
            .map(|p| p.split_once('=').unwrap().0)
            .collect();
        let family = families
            .iter()
            .find(|f| {
                f.name == name
                    || (matches!(f.kind, Kind::Histogram | Kind::Summary)
                        && ["_bucket", "_sum", "_count"]
                            .iter()
                            .any(|s| name == format!("{}{s}", f.name)))
            })
            .unwrap_or_else(|| panic!("{line}: no family"));
        let mut want: BTreeSet<&str> = family.labels.iter().map(String::as_str).collect();
        if name.ends_with("_bucket") {
            want.insert("le");
        } else if family.kind == Kind::Summary && name == family.name {
            want.insert("quantile");
        }
        assert_eq!(names, want, "{line}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pods_life_in_upstreams_metrics() {
    let server = setup();
    let controller = Controller::new(
        server.client(),
        Arc::new(KwokProvider::new(server.client())),
        options(),
    );
    let ctx = controller.context();
    let stop = CancellationToken::new();
    let task = tokio::spawn(controller.run(stop.clone()));

    // A pending pod the kube-scheduler gave up on.
    server
        .create::<Pod>(
            &serde_json::from_value(json!({
                "metadata": {"name": "web-1", "namespace": "default", "ownerReferences": [{
                    "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "u1"}]},
                "spec": {"containers": [{"name": "c", "image": "app", "resources": {
                    "requests": {"cpu": "1", "memory": "128Mi"}, "limits": {"cpu": "2"}}}]},
            }))
            .unwrap(),
        )
        .unwrap();
    server
        .merge::<Pod>(
            "default",
            "web-1",
            json!({"status": {"phase": "Pending", "conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}),
        )
        .unwrap();
    let initialized = || {
        let claims = server.list::<NodeClaim>();
        let claim = claims.first()?.clone();
        let ready = claim
            .status
            .as_ref()?
            .conditions
            .iter()
            .any(|c| c.type_ == "Initialized" && c.status == "True");
        ready.then_some(claim)
    };
    let claim = eventually(WAIT, initialized)
        .await
        .expect("a node for the pod");
    let node_name = claim.status.clone().unwrap().node_name.unwrap();
    let node = server.get::<Node>("", &node_name).unwrap();
    let zone = node.metadata.labels.as_ref().unwrap()["topology.kubernetes.io/zone"].clone();
    let node_cpu = node.status.as_ref().unwrap().allocatable.as_ref().unwrap()["cpu"]
        .0
        .clone();
    eventually(WAIT, || {
        ctx.cluster
            .node_claims
            .get(claim.metadata.name.as_deref().unwrap())
            .filter(|c| {
                c.status.as_ref().is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "Initialized" && c.status == "True")
                })
            })
            .map(|_| ())
    })
    .await
    .expect("state has the initialized claim");

    observe::pass(&ctx);
    let text = ctx.metrics.encode();
    assert_well_formed(&ctx, &text);
    let pod = [("name", "web-1"), ("namespace", "default")];
    assert!(
        value(&text, "karpenter_pods_unbound_time_seconds", &pod).is_some(),
        "{text}"
    );
    assert!(
        value(
            &text,
            "karpenter_pods_provisioning_unbound_time_seconds",
            &pod
        )
        .is_some()
    );
    assert_eq!(
        value(
            &text,
            "karpenter_pods_scheduling_decision_duration_seconds_count",
            &[]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &text,
            "karpenter_pods_provisioning_scheduling_undecided_time_seconds",
            &pod
        ),
        None,
        "decided"
    );

    // Bound and started, as a kubelet reports it.
    let created = server
        .get::<Pod>("default", "web-1")
        .unwrap()
        .metadata
        .creation_timestamp
        .unwrap()
        .0;
    let bound_at = created + SignedDuration::from_secs(3);
    let ready_at = created + SignedDuration::from_secs(7);
    server
        .merge::<Pod>(
            "default",
            "web-1",
            json!({"spec": {"nodeName": node_name}, "status": {"phase": "Running", "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": time(bound_at)},
                {"type": "Ready", "status": "True", "lastTransitionTime": time(ready_at)},
            ]}}),
        )
        .unwrap();
    eventually(WAIT, || {
        ctx.cluster
            .pods
            .get("default/web-1")
            .filter(|p| p.ready)
            .map(|_| ())
    })
    .await
    .expect("state has the running pod");
    observe::pass(&ctx);
    let text = ctx.metrics.encode();
    assert_well_formed(&ctx, &text);
    assert_eq!(
        value(&text, "karpenter_pods_unbound_time_seconds", &pod),
        None
    );
    assert_eq!(
        value(&text, "karpenter_pods_bound_duration_seconds_count", &[]),
        Some(1.0)
    );
    assert_eq!(
        value(&text, "karpenter_pods_bound_duration_seconds_sum", &[]),
        Some(3.0)
    );
    assert_eq!(
        value(&text, "karpenter_pods_startup_duration_seconds_sum", &[]),
        Some(7.0)
    );
    assert_eq!(
        value(
            &text,
            "karpenter_pods_startup_duration_seconds",
            &[("quantile", "0.5")]
        ),
        Some(7.0)
    );
    assert_eq!(
        value(
            &text,
            "karpenter_pods_state",
            &[
                ("name", "web-1"),
                ("owner", "/apis/apps/v1/namespaces/default/replicasets/web"),
                ("node", &node_name),
                ("nodepool", "default"),
                ("capacity_type", "on-demand"),
                ("zone", &zone),
                ("phase", "Running"),
                ("ready", "true"),
                ("scheduled", "true"),
                ("managed", "true"),
            ]
        ),
        Some(1.0),
        "{text}"
    );
    let on_node = |resource: &'static str| {
        [
            ("node_name", node_name.clone()),
            ("resource_type", resource.to_string()),
        ]
    };
    let get = |name: &str, labels: &[(&str, String)]| {
        let labels: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
        value(&text, name, &labels)
    };
    let cores = karpenter_core::resources::parse_milli(&node_cpu).unwrap() as f64 / 1000.0;
    assert_eq!(
        get("karpenter_nodes_allocatable", &on_node("cpu")),
        Some(cores)
    );
    assert_eq!(
        get("karpenter_nodes_total_pod_requests", &on_node("cpu")),
        Some(1.0)
    );
    assert_eq!(
        get("karpenter_nodes_total_pod_requests", &on_node("pods")),
        Some(1.0)
    );
    assert_eq!(
        get("karpenter_nodes_total_pod_limits", &on_node("cpu")),
        Some(2.0)
    );
    assert_eq!(
        get(
            "karpenter_nodes_allocatable",
            &[
                ("node_name", node_name.clone()),
                ("managed", "true".into()),
                ("nodepool", "default".into()),
                ("zone", zone.clone())
            ]
        ),
        Some(cores),
        "node labels"
    );
    let utilization = value(
        &text,
        "karpenter_cluster_utilization_percent",
        &[("resource_type", "cpu")],
    );
    assert!(
        utilization.is_some_and(|u| (u - 100.0 / cores).abs() < 1e-9),
        "{utilization:?}"
    );
    let pool = |resource| [("nodepool", "default"), ("resource_type", resource)];
    assert_eq!(
        value(&text, "karpenter_nodepools_usage", &pool("nodes")),
        Some(1.0)
    );
    assert_eq!(
        value(&text, "karpenter_nodepools_usage", &pool("cpu")),
        Some(cores.ceil())
    );
    assert_eq!(
        value(&text, "karpenter_nodepools_limit", &pool("cpu")),
        Some(100.0)
    );
    assert_eq!(
        value(
            &text,
            "karpenter_nodepools_allowed_disruptions",
            &[("nodepool", "default"), ("reason", "Underutilized")]
        ),
        Some(1.0),
        "the default budget, 10% of one node, rounds up"
    );
    assert_eq!(
        value(
            &text,
            "operator_nodeclaim_status_condition_count",
            &[
                ("type", "Initialized"),
                ("status", "True"),
                ("karpenter_sh_nodepool", "default"),
                ("karpenter_kwok_sh_kwoknodeclass", "default")
            ]
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        value(
            &text,
            "operator_status_condition_count",
            &[
                ("kind", "NodeClaim"),
                ("group", "karpenter.sh"),
                ("type", "Launched"),
                ("status", "True")
            ]
        ),
        Some(1.0)
    );
    // The NodePool's status loop writes its conditions on its own schedule.
    eventually(WAIT, || {
        observe::pass(&ctx);
        let text = ctx.metrics.encode();
        value(
            &text,
            "operator_nodepool_status_condition_count",
            &[("name", "default"), ("type", "Ready"), ("status", "True")],
        )
        .map(|_| ())
    })
    .await
    .expect("the NodePool's Ready condition in operator_nodepool_status_condition_count");
    assert_eq!(
        value(
            &text,
            "karpenter_nodes_created_total",
            &[("nodepool", "default"), ("zone", &zone)]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &text,
            "karpenter_nodeclaims_created_total",
            &[
                ("nodepool", "default"),
                ("reason", "provisioned"),
                ("min_values_relaxed", "false")
            ]
        ),
        Some(1.0)
    );
    assert!(
        value(
            &text,
            "karpenter_cloudprovider_duration_seconds_count",
            &[
                ("controller", "nodeclaim.lifecycle"),
                ("method", "Create"),
                ("provider", "kwok")
            ]
        )
        .is_some_and(|n| n >= 1.0),
        "{text}"
    );
    assert_eq!(
        value(
            &text,
            "karpenter_scheduler_queue_depth",
            &[("controller", "provisioner")]
        ),
        Some(0.0),
        "the last simulation's queue, emptied"
    );
    assert_eq!(
        value(
            &text,
            "karpenter_scheduler_pending_pods_by_effective_zone_count",
            &[("controller", "provisioner"), ("zone", "flexible")]
        ),
        Some(1.0),
        "the pending pod, free to go to any zone"
    );
    assert_eq!(
        value(&text, "karpenter_cluster_state_synced", &[]),
        Some(1.0)
    );
    assert_eq!(
        value(&text, "karpenter_cluster_state_node_count", &[]),
        Some(1.0)
    );

    // The pod goes; the empty node is consolidated away.
    server.delete::<Pod>("default", "web-1").unwrap();
    eventually(WAIT, || {
        (server.get::<Node>("", &node_name).is_none() && server.list::<NodeClaim>().is_empty())
            .then_some(())
    })
    .await
    .expect("the empty node goes");
    eventually(WAIT, || ctx.cluster.node_claims.is_empty().then_some(()))
        .await
        .expect("state sees it gone");
    observe::pass(&ctx);
    let text = ctx.metrics.encode();
    assert_well_formed(&ctx, &text);
    let in_zone = [("nodepool", "default"), ("zone", zone.as_str())];
    assert_eq!(
        value(&text, "karpenter_nodes_terminated_total", &in_zone),
        Some(1.0)
    );
    assert_eq!(
        value(
            &text,
            "karpenter_nodeclaims_terminated_total",
            &[
                ("nodepool", "default"),
                ("zone", &zone),
                ("capacity_type", "on-demand")
            ]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &text,
            "karpenter_nodeclaims_disrupted_total",
            &[
                ("reason", "empty"),
                ("nodepool", "default"),
                ("capacity_type", "on-demand"),
                ("consolidation_policy", "when_empty_or_underutilized"),
                ("termination_mode", "graceful")
            ]
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        value(
            &text,
            "karpenter_pods_disruption_initiated_total",
            &[("reason", "empty")]
        ),
        Some(0.0),
        "no pods left to move"
    );
    for histogram in [
        "karpenter_nodes_lifetime_duration_seconds_count",
        "karpenter_nodeclaims_termination_duration_seconds_count",
        "karpenter_nodes_termination_duration_seconds_count",
        "operator_nodeclaim_termination_duration_seconds_count",
        "operator_node_termination_duration_seconds_count",
    ] {
        assert_eq!(
            value(&text, histogram, &[("nodepool", "default")]).or_else(|| value(
                &text,
                histogram,
                &[]
            )),
            Some(1.0),
            "{histogram}\n{text}"
        );
    }
    assert_eq!(
        value(
            &text,
            "karpenter_voluntary_disruption_decisions_by_nodepool_total",
            &[
                ("nodepool", "default"),
                ("decision", "delete"),
                ("reason", "empty")
            ]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(&text, "karpenter_nodepools_usage", &pool("nodes")),
        Some(0.0)
    );
    assert!(
        !text.contains("karpenter_nodes_allocatable{"),
        "the node's gauges went with it"
    );
    assert!(!text.contains("karpenter_pods_state{"), "and the pod's");
    stop.cancel();
    let _ = task.await;
}

/// Upstream's provisioning suite › Metrics: after a scheduling loop the duration histogram
/// has its sample and the unschedulable pods gauge counts the pod that fits nowhere (past the
/// NodePool's 100 CPU limit), while the one that fits is not counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduling_loop_reports_its_duration_and_unschedulable_pods() {
    let server = setup();
    let controller = Controller::new(
        server.client(),
        Arc::new(KwokProvider::new(server.client())),
        options(),
    );
    let ctx = controller.context();
    let stop = CancellationToken::new();
    let task = tokio::spawn(controller.run(stop.clone()));
    for (name, cpu) in [("too-big", "1000"), ("fits", "1")] {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "app",
                "resources": {"requests": {"cpu": cpu}}}]},
        }))
        .unwrap();
        server.create(&pod).unwrap();
        server
            .merge::<Pod>(
                "default",
                name,
                json!({"status": {"phase": "Pending", "conditions": [{
                    "type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}),
            )
            .unwrap();
    }
    let text = eventually(WAIT, || {
        let text = ctx.metrics.encode();
        (value(
            &text,
            "karpenter_scheduler_unschedulable_pods_count",
            &[("controller", "provisioner")],
        ) == Some(1.0))
        .then_some(text)
    })
    .await
    .expect("the pod past the limit counted as unschedulable");
    assert!(
        value(
            &text,
            "karpenter_scheduler_scheduling_duration_seconds_count",
            &[("controller", "provisioner")],
        )
        .is_some_and(|n| n >= 1.0),
        "{text}"
    );
    stop.cancel();
    task.await.unwrap();
}
