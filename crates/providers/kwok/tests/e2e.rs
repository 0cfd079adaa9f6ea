//! End to end over HTTP against the fake API server: the controller with the KWOK provider,
//! the test kit's scheduler stand-in binding pods to the nodes it launches.

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use karpenter_api::{NodeClaim, NodePool};
use karpenter_controller::cloudprovider::{
    CloudProvider, CloudProviderError, Provider, ProviderLoop, Result as CloudResult,
};
use karpenter_controller::{Context, Controller, Options, provisioning};
use karpenter_core::instancetype::cheapest_launch;
use karpenter_core::provisioning::node_claim_for;
use karpenter_kwok::KWOKNodeClass;
use karpenter_kwok::KwokProvider;
use karpenter_testkit::{FakeApiServer, Fault, Verb, eventually};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);

fn options() -> Options {
    Options {
        batch_idle_duration: Duration::from_millis(100),
        batch_max_duration: Duration::from_millis(1000),
        disable_leader_election: true,
        min_drain_time: Duration::from_millis(100),
        garbage_collection_interval: Duration::from_millis(300),
        instance_launch_grace: Duration::ZERO,
        resync: Duration::from_millis(200),
        ..Options::default()
    }
}

struct Running<P = KwokProvider> {
    ctx: Arc<Context<P>>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl<P> Running<P> {
    async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

fn start(server: &FakeApiServer, options: Options) -> Running {
    start_with(
        server,
        Arc::new(KwokProvider::new(server.client())),
        options,
    )
}

fn start_with<P: CloudProvider>(
    server: &FakeApiServer,
    provider: Arc<P>,
    options: Options,
) -> Running<P> {
    let controller = Controller::new(server.client(), provider, options);
    let ctx = controller.context();
    let stop = CancellationToken::new();
    let task = tokio::spawn(controller.run(stop.clone()));
    Running { ctx, stop, task }
}

fn setup(node_pool: serde_json::Value) -> FakeApiServer {
    let server = FakeApiServer::new();
    server
        .install_crds(karpenter_kwok::CRDS.iter().map(|c| c.definition()))
        .unwrap();
    let class: KWOKNodeClass = serde_json::from_value(json!({
        "apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": "default"}, "spec": {},
    }))
    .unwrap();
    server.create(&class).unwrap();
    let mut pool = json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
            "requirements": [
                {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
            ],
        }}},
    });
    json_patch::merge(&mut pool, &node_pool);
    let pool: NodePool = serde_json::from_value(pool).unwrap();
    server.create(&pool).unwrap();
    server.spawn_cluster(Duration::from_millis(50));
    server
}

fn pod(name: &str, cpu: &str, labels: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "app", "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}}}]},
    }))
    .unwrap()
}

fn bound(server: &FakeApiServer) -> usize {
    server
        .list::<Pod>()
        .iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
        .count()
}

fn ready_claims(server: &FakeApiServer) -> Vec<NodeClaim> {
    server
        .list::<NodeClaim>()
        .into_iter()
        .filter(|c| {
            c.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            })
        })
        .collect()
}

/// Waits until `controller` has finished `n` more reconciles than it had: proof that it looked
/// again, so what a test then finds unchanged, it left unchanged.
async fn more_passes<P>(running: &Running<P>, controller: &str, n: u64) {
    let metrics = &running.ctx.metrics;
    let start = metrics.reconciles(controller);
    eventually(WAIT, || {
        (metrics.reconciles(controller) >= start + n).then_some(())
    })
    .await
    .unwrap_or_else(|| panic!("{controller} ran {n} more times"));
}

async fn provision(server: &FakeApiServer, pods: usize) {
    for i in 0..pods {
        server
            .create(&pod(&format!("p{i}"), "1", json!({"app": "web"})))
            .unwrap();
    }
    let all_bound = eventually(WAIT, || (bound(server) == pods).then_some(())).await;
    assert!(
        all_bound.is_some(),
        "{} of {pods} pods bound",
        bound(server)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_pods_get_nodes_and_run() {
    let server = setup(json!({}));
    let running = start(&server, options());
    provision(&server, 10).await;

    let claims = server.list::<NodeClaim>();
    let nodes = server.list::<Node>();
    assert_eq!(claims.len(), nodes.len(), "one node per claim");
    assert!(!claims.is_empty());
    eventually(WAIT, || {
        (ready_claims(&server).len() == claims.len()).then_some(())
    })
    .await
    .expect("every claim Ready");
    for node in server.list::<Node>() {
        let labels = node.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels.get("karpenter.sh/initialized").map(String::as_str),
            Some("true")
        );
        assert_eq!(
            labels.get("karpenter.sh/registered").map(String::as_str),
            Some("true")
        );
        assert_eq!(
            labels.get("karpenter.sh/nodepool").map(String::as_str),
            Some("default")
        );
        assert!(
            node.metadata
                .finalizers
                .clone()
                .unwrap_or_default()
                .contains(&"karpenter.sh/termination".to_string())
        );
        let taints = node
            .spec
            .as_ref()
            .unwrap()
            .taints
            .clone()
            .unwrap_or_default();
        assert!(
            taints.iter().all(|t| t.key != "karpenter.sh/unregistered"),
            "{taints:?}"
        );
        assert_eq!(
            node.metadata.owner_references.as_ref().unwrap()[0].kind,
            "NodeClaim"
        );
    }
    // Ten 1-cpu pods: the simulation packs them, it does not launch one node each.
    assert!(claims.len() <= 3, "{} claims for 10 pods", claims.len());
    let events = server.list::<Event>();
    assert!(
        events
            .iter()
            .any(|e| e.reason.as_deref() == Some("Nominated"))
    );
    let metrics = running.ctx.metrics.encode();
    assert!(
        metrics.contains(
            "karpenter_nodeclaims_created_total{min_values_relaxed=\"false\",nodepool=\"default\",reason=\"provisioned\"} 1"
        ),
        "{metrics}"
    );
    assert!(metrics.contains("karpenter_nodes_created_total{nodepool=\"default\",zone="));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_nodeclaim_drains_and_removes_its_node() {
    let server = setup(json!({}));
    let running = start(&server, options());
    provision(&server, 3).await;
    let claims = server.list::<NodeClaim>();
    let victim = claims[0].metadata.name.clone().unwrap();
    let node_name = claims[0]
        .status
        .as_ref()
        .unwrap()
        .node_name
        .clone()
        .expect("registered");
    let pods_before: Vec<String> = server
        .list::<Pod>()
        .into_iter()
        .filter(|p| p.spec.as_ref().unwrap().node_name.as_deref() == Some(node_name.as_str()))
        .map(|p| p.metadata.name.unwrap())
        .collect();
    assert!(!pods_before.is_empty());

    server.delete::<NodeClaim>("", &victim).unwrap();
    let gone = eventually(WAIT, || {
        (server.get::<Node>("", &node_name).is_none()
            && server.get::<NodeClaim>("", &victim).is_none())
        .then_some(())
    })
    .await;
    assert!(gone.is_some(), "node and claim removed");
    for name in pods_before {
        assert!(
            server.get::<Pod>("default", &name).is_none(),
            "{name} was evicted"
        );
    }
    assert!(
        server.count(Verb::Evict, "pods") >= 1,
        "drained through the Eviction API"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_disruption_budget_holds_the_drain() {
    let server = setup(json!({}));
    let running = start(&server, options());
    provision(&server, 2).await;
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "web"}}},
    }))
    .unwrap();
    server.create(&pdb).unwrap();
    let claim = server.list::<NodeClaim>()[0].clone();
    let node_name = claim.status.unwrap().node_name.unwrap();
    server
        .delete::<NodeClaim>("", claim.metadata.name.as_deref().unwrap())
        .unwrap();

    let refused = eventually(WAIT, || {
        server
            .list::<Event>()
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("FailedDraining"))
    })
    .await
    .expect("a FailedDraining event");
    assert!(refused.message.unwrap().contains("violates a PDB"));
    let evictions = |running: &Running| {
        running
            .ctx
            .metrics
            .pods_eviction_requests
            .get_or_create(&karpenter_controller::metrics::labels(&[("code", "429")]))
            .get()
    };
    let refused_so_far = evictions(&running);
    eventually(WAIT, || {
        (evictions(&running) >= refused_so_far + 2).then_some(())
    })
    .await
    .expect("the drain tries again and the PDB refuses again");
    let node = server
        .get::<Node>("", &node_name)
        .expect("the node stays while the PDB holds");
    assert!(
        node.spec
            .unwrap()
            .taints
            .unwrap()
            .iter()
            .any(|t| t.key == "karpenter.sh/disrupted")
    );
    assert!(
        server
            .list::<Pod>()
            .iter()
            .any(|p| p.spec.as_ref().unwrap().node_name.as_deref() == Some(node_name.as_str()))
    );

    server
        .delete::<PodDisruptionBudget>("default", "web")
        .unwrap();
    let gone = eventually(WAIT, || {
        server.get::<Node>("", &node_name).is_none().then_some(())
    })
    .await;
    assert!(gone.is_some(), "drains once the budget allows");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_in_the_middle_of_a_launch_leaks_nothing_and_duplicates_nothing() {
    let server = setup(json!({}));
    // The instance launches but its providerID is never recorded.
    server.inject(
        Fault::error(
            Some(Verb::Patch),
            Some("nodeclaims"),
            StatusCode::SERVICE_UNAVAILABLE,
        )
        .subresource("status"),
    );
    let first = start(&server, options());
    for i in 0..4 {
        server
            .create(&pod(&format!("p{i}"), "1", json!({})))
            .unwrap();
    }
    eventually(WAIT, || (!server.list::<Node>().is_empty()).then_some(()))
        .await
        .expect("an instance launched");
    let claims_before: Vec<String> = server
        .list::<NodeClaim>()
        .into_iter()
        .map(|c| c.metadata.name.unwrap())
        .collect();
    first.stop().await;

    server.clear_faults();
    let second = start(&server, options());
    eventually(WAIT, || (bound(&server) == 4).then_some(()))
        .await
        .expect("pods bound after the restart");
    let claims_after: Vec<String> = server
        .list::<NodeClaim>()
        .into_iter()
        .map(|c| c.metadata.name.unwrap())
        .collect();
    assert_eq!(claims_after, claims_before, "no duplicate nodeclaims");
    let nodes = server.list::<Node>();
    assert_eq!(
        nodes.len(),
        claims_after.len(),
        "one instance per claim, none leaked"
    );
    second.stop().await;
}

/// One NodeClaim the API server refuses does not hold back the others of the same round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_failed_nodeclaim_create_does_not_abort_the_round() {
    let server = setup(json!({}));
    // Three pods that each need a node of their own, already marked unschedulable.
    for i in 0..3 {
        let mut p = pod(&format!("solo{i}"), "1", json!({"app": "solo"}));
        p.spec.as_mut().unwrap().affinity = Some(
            serde_json::from_value(json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "solo"}}, "topologyKey": "kubernetes.io/hostname"},
            ]}}))
            .unwrap(),
        );
        p.status = Some(
            serde_json::from_value(json!({"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"},
            ]}))
            .unwrap(),
        );
        server.create(&p).unwrap();
    }
    server.inject(
        Fault::error(
            Some(Verb::Create),
            Some("nodeclaims"),
            StatusCode::INTERNAL_SERVER_ERROR,
        )
        .times(1),
    );
    // The loops are not running: one provisioning round, called directly.
    let controller = Controller::new(
        server.client(),
        Arc::new(KwokProvider::new(server.client())),
        options(),
    );
    let ctx = controller.context();
    let watches = ctx.cluster.watch(&server.client());
    eventually(WAIT, || ctx.cluster.synced().then_some(()))
        .await
        .expect("state lists everything");
    let round = provisioning::provision(&ctx).await;
    assert!(round.is_err(), "the refused create is reported");
    assert_eq!(
        server.list::<NodeClaim>().len(),
        2,
        "the other two NodeClaims were created in the same round"
    );
    for w in watches {
        w.abort();
    }
}

/// What a NodeClaim asks for and what it launched as: its NodePool, the instance types it
/// lists, and the type, zone and capacity type of its node.
type Launch = (String, Vec<String>, String);

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn unschedulable(mut p: Pod) -> Pod {
    p.status = Some(
        serde_json::from_value(json!({"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"},
        ]}))
        .unwrap(),
    );
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_predicts_the_nodeclaims_the_controller_then_creates() {
    // Pods whose places cannot differ between karpenter's simulation and the scheduler
    // stand-in that binds them (a pod it put elsewhere would start a second round), yet which
    // exercise packing, anti-affinity and a zone: two pods that must not share a node, and one
    // that must run in zone c beside either.
    let server = setup(json!({}));
    for i in 0..2 {
        let mut p = pod(&format!("solo{i}"), "3", json!({"app": "solo"}));
        p.spec.as_mut().unwrap().affinity = Some(
            serde_json::from_value(json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "solo"}}, "topologyKey": "kubernetes.io/hostname"},
            ]}}))
            .unwrap(),
        );
        server.create(&unschedulable(p)).unwrap();
    }
    let mut zoned = pod("zoned", "2", json!({"app": "zoned"}));
    zoned.spec.as_mut().unwrap().node_selector = Some(
        [(
            "topology.kubernetes.io/zone".to_string(),
            "test-zone-c".to_string(),
        )]
        .into(),
    );
    server.create(&unschedulable(zoned)).unwrap();

    // The plan: the controller's own code over one list of the cluster, with nothing running.
    let planner = Controller::new(
        server.client(),
        Arc::new(KwokProvider::new(server.client())),
        options(),
    );
    let mut predicted: Vec<Launch> =
        karpenter_controller::dry_run::dry_run(&planner.context(), |_, round, pools| {
            let provisioning = round
                .provisioning
                .expect("provisioning is part of the round");
            provisioning
                .results
                .new_node_claims
                .iter()
                .map(|c| {
                    let pool = pools
                        .iter()
                        .find(|p| p.node_pool.name() == c.node_pool)
                        .unwrap();
                    let object = node_claim_for(c, &pool.node_pool);
                    let (it, o) = cheapest_launch(&c.instance_types, &object).expect("a launch");
                    (
                        c.node_pool.clone(),
                        sorted(c.instance_types.iter().map(|it| it.name.clone()).collect()),
                        format!("{} {} {}", it.name, o.zone, o.capacity_type),
                    )
                })
                .collect()
        })
        .await
        .expect("the plan");
    predicted.sort();
    assert_eq!(
        predicted.len(),
        2,
        "two solo nodes, one in zone c: {predicted:?}"
    );
    assert!(
        predicted
            .iter()
            .any(|(_, _, launch)| launch.contains("test-zone-c")),
        "{predicted:?}"
    );
    assert!(
        server.list::<NodeClaim>().is_empty(),
        "planning writes nothing"
    );

    // The controller, on the same cluster.
    let running = start(&server, options());
    // Its first round; a later one (10 s on, for a pod the scheduler stand-in, which ignores
    // anti-affinity, put elsewhere) is not what was planned.
    let launched = eventually(WAIT, || {
        let claims = server.list::<NodeClaim>();
        let registered = claims
            .iter()
            .filter(|c| c.status.as_ref().is_some_and(|s| s.node_name.is_some()))
            .count();
        (registered == predicted.len()).then_some(claims)
    })
    .await
    .expect("the claims launch and register");
    let nodes = server.list::<Node>();
    let mut created: Vec<Launch> = launched
        .iter()
        .map(|c| {
            let node = nodes
                .iter()
                .find(|n| n.metadata.name == c.status.as_ref().unwrap().node_name)
                .expect("the claim's node");
            let label = |k: &str| node.metadata.labels.as_ref().unwrap()[k].clone();
            let types = c
                .spec
                .requirements
                .iter()
                .find(|r| r.key == "node.kubernetes.io/instance-type")
                .map(|r| r.values.clone())
                .unwrap_or_default();
            (
                label("karpenter.sh/nodepool"),
                sorted(types),
                format!(
                    "{} {} {}",
                    label("node.kubernetes.io/instance-type"),
                    label("topology.kubernetes.io/zone"),
                    label("karpenter.sh/capacity-type")
                ),
            )
        })
        .collect();
    created.sort();
    assert_eq!(predicted, created);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_errors_and_conflicts_are_retried_without_losing_work() {
    let server = setup(json!({}));
    server.inject(
        Fault::error(
            Some(Verb::Create),
            Some("nodeclaims"),
            StatusCode::INTERNAL_SERVER_ERROR,
        )
        .times(2),
    );
    server.inject(Fault::error(Some(Verb::Patch), Some("nodes"), StatusCode::CONFLICT).times(3));
    server.inject(
        Fault::error(
            Some(Verb::Patch),
            Some("nodeclaims"),
            StatusCode::INTERNAL_SERVER_ERROR,
        )
        .times(3),
    );
    server.inject(Fault::latency(
        None,
        Some("nodes"),
        Duration::from_millis(20),
    ));
    let running = start(&server, options());
    provision(&server, 6).await;
    eventually(WAIT, || {
        (ready_claims(&server).len() == server.list::<NodeClaim>().len()).then_some(())
    })
    .await
    .expect("all claims Ready");
    assert_eq!(
        server.list::<Node>().len(),
        server.list::<NodeClaim>().len()
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_without_a_nodeclaim_is_collected() {
    let server = setup(json!({}));
    let running = start(&server, options());
    let leaked: Node = serde_json::from_value(json!({
        "metadata": {"name": "leaked", "labels": {"kwok.x-k8s.io/node": "fake"}},
        "spec": {"providerID": "kwok://leaked"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }))
    .unwrap();
    server.create(&leaked).unwrap();
    let gone = eventually(WAIT, || {
        server.get::<Node>("", "leaked").is_none().then_some(())
    })
    .await;
    assert!(gone.is_some(), "the leaked instance was terminated");
    running.stop().await;
}

/// A do-not-disrupt pod is never evicted: the drain waits for it, and the NodePool's
/// terminationGracePeriod deletes it at the deadline (the other pod goes through eviction).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_do_not_disrupt_pod_is_deleted_at_the_grace_period_not_evicted() {
    let server = setup(json!({"spec": {"template": {"spec": {"terminationGracePeriod": "3s"}}}}));
    let running = start(&server, options());
    let mut guarded = pod("guarded", "1", json!({"app": "train"}));
    guarded.metadata.annotations = Some(
        [(
            "karpenter.sh/do-not-disrupt".to_string(),
            "true".to_string(),
        )]
        .into(),
    );
    guarded
        .spec
        .as_mut()
        .unwrap()
        .termination_grace_period_seconds = Some(0);
    server.create(&guarded).unwrap();
    server
        .create(&pod("plain", "1", json!({"app": "web"})))
        .unwrap();
    eventually(WAIT, || (bound(&server) == 2).then_some(()))
        .await
        .expect("both pods bound");
    let claim = server.list::<NodeClaim>()[0].clone();
    let node_name = claim.status.clone().unwrap().node_name.unwrap();
    let on_node = |name: &str| {
        server
            .get::<Pod>("default", name)
            .is_some_and(|p| p.spec.unwrap().node_name.as_deref() == Some(node_name.as_str()))
    };
    assert!(
        on_node("guarded") && on_node("plain"),
        "one node holds both"
    );
    server
        .delete::<NodeClaim>("", claim.metadata.name.as_deref().unwrap())
        .unwrap();
    let gone = eventually(WAIT, || {
        server.get::<Node>("", &node_name).is_none().then_some(())
    })
    .await;
    assert!(gone.is_some(), "the grace period ends the drain");
    let evicted: Vec<Option<String>> = events_named(&server, "Evicted")
        .into_iter()
        .map(|e| e.involved_object.name)
        .collect();
    assert!(
        !evicted.contains(&Some("guarded".into())),
        "the guarded pod was evicted: {evicted:?}"
    );
    let disrupted = events_named(&server, "Disrupted");
    assert!(
        disrupted.iter().any(|e| {
            e.involved_object.name.as_deref() == Some("guarded")
                && e.message.as_deref().is_some_and(|m| {
                    m.starts_with("Deleting the pod to accommodate the terminationTime ")
                        && m.ends_with(" of its 0 terminationGracePeriodSeconds. This bypasses the PDB of the pod and the do-not-disrupt annotation.")
                })
        }),
        "the guarded pod was deleted at the deadline: {disrupted:?}"
    );
    // Upstream warns on the NodeClaim when it stamps the deadline and on the Node as it drains,
    // deduplicated by name alone: KWOK names the Node as its NodeClaim, so one event stands.
    let expiring = events_named(&server, "TerminationGracePeriodExpiring");
    assert_eq!(expiring.len(), 1, "{expiring:?}");
    let e = &expiring[0];
    assert_eq!(e.involved_object.kind.as_deref(), Some("NodeClaim"));
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    assert!(
        e.message
            .as_deref()
            .is_some_and(|m| m.starts_with("All pods will be deleted by ")),
        "{expiring:?}"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_nodes_are_drained_and_removed() {
    let server = setup(json!({"spec": {"template": {"spec": {"expireAfter": "2s"}}}}));
    let running = start(&server, options());
    provision(&server, 1).await;
    let first = server.list::<NodeClaim>()[0].clone();
    let node = first.status.clone().unwrap().node_name.unwrap();
    let gone = eventually(WAIT, || {
        (server
            .get::<NodeClaim>("", first.metadata.name.as_deref().unwrap())
            .is_none()
            && server.get::<Node>("", &node).is_none())
        .then_some(())
    })
    .await;
    assert!(gone.is_some(), "the expired claim and its node went");
    let metrics = running.ctx.metrics.encode();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("karpenter_nodeclaims_disrupted_total{")
                && l.contains("reason=\"expired\"")),
        "{metrics}"
    );
    // The evicted pod's replacement gets a new node.
    server.create(&pod("again", "1", json!({}))).unwrap();
    eventually(WAIT, || (bound(&server) == 1).then_some(()))
        .await
        .expect("a new node for the new pod");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_acts_and_a_standby_takes_over() {
    let server = setup(json!({}));
    let elected = Options {
        disable_leader_election: false,
        ..options()
    };
    let a = start(
        &server,
        Options {
            identity: "a".into(),
            ..elected.clone()
        },
    );
    eventually(WAIT, || {
        server.get::<Lease>("kube-system", "karpenter-leader-election")
    })
    .await
    .expect("a lease");
    let b = start(
        &server,
        Options {
            identity: "b".into(),
            ..elected
        },
    );
    provision(&server, 2).await;
    let holder = |s: &FakeApiServer| {
        s.get::<Lease>("kube-system", "karpenter-leader-election")
            .and_then(|l| l.spec?.holder_identity)
    };
    assert_eq!(holder(&server).as_deref(), Some("a"));
    assert!(a.ctx.is_leader() && !b.ctx.is_leader());
    assert!(b.ctx.cluster.synced(), "the standby keeps its state warm");
    let claims = server.list::<NodeClaim>().len();

    a.stop().await;
    eventually(WAIT, || {
        (holder(&server).as_deref() == Some("b")).then_some(())
    })
    .await
    .expect("b takes over");
    server.create(&pod("late", "1", json!({}))).unwrap();
    eventually(WAIT, || (bound(&server) == 3).then_some(()))
        .await
        .expect("b provisions");
    assert!(server.list::<NodeClaim>().len() >= claims);
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_no_instance_type_fits_gets_failed_scheduling() {
    let server = setup(json!({}));
    let running = start(&server, options());
    server.create(&pod("huge", "1000", json!({}))).unwrap();
    let event = eventually(WAIT, || {
        server
            .list::<Event>()
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("FailedScheduling"))
    })
    .await
    .expect("a FailedScheduling event");
    assert_eq!(event.involved_object.name.as_deref(), Some("huge"));
    assert!(
        event
            .message
            .unwrap()
            .starts_with("Failed to schedule pod, ")
    );
    assert!(
        server.list::<NodeClaim>().is_empty(),
        "nothing launched for it"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_metrics_endpoints() {
    use tower::ServiceExt;
    let server = setup(json!({}));
    let running = start(&server, options());
    let get = |path: &str| {
        axum::http::Request::get(path)
            .body(axum::body::Body::empty())
            .unwrap()
    };
    let health = karpenter_controller::admin::health_router(running.ctx.clone());
    let live = health.clone().oneshot(get("/healthz")).await.unwrap();
    assert_eq!(live.status(), 200);
    eventually(WAIT, || running.ctx.cluster.synced().then_some(()))
        .await
        .expect("synced");
    let ready = health.oneshot(get("/readyz")).await.unwrap();
    assert_eq!(ready.status(), 200);
    let metrics = karpenter_controller::admin::metrics_router(running.ctx.clone())
        .oneshot(get("/metrics"))
        .await
        .unwrap();
    assert_eq!(metrics.status(), 200);
    let body = axum::body::to_bytes(metrics.into_body(), usize::MAX)
        .await
        .unwrap();
    let text = String::from_utf8(body.to_vec()).unwrap();
    assert!(text.contains("karpenter_cluster_state_synced 1"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("karpenter_build_info{") && l.contains("version=")),
        "{text}"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_waits_for_cluster_state() {
    use tower::ServiceExt;
    let server = setup(json!({}));
    // Lists of pods fail, so state never completes.
    server.inject(Fault::error(
        Some(Verb::List),
        Some("pods"),
        StatusCode::INTERNAL_SERVER_ERROR,
    ));
    let running = start(&server, options());
    eventually(WAIT, || {
        (server.count(Verb::List, "pods") >= 2).then_some(())
    })
    .await
    .expect("the pod watch lists, fails and lists again");
    let ready = karpenter_controller::admin::health_router(running.ctx.clone())
        .oneshot(
            axum::http::Request::get("/readyz")
                .body(axum::body::Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(ready.status(), 503);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_that_do_not_launch_or_register_in_time_are_deleted() {
    // Registration: the node comes after 30s, the timeout is 1s.
    let server = setup(json!({}));
    server
        .merge::<KWOKNodeClass>(
            "",
            "default",
            json!({"spec": {"nodeRegistrationDelay": "30s"}}),
        )
        .unwrap();
    let running = start(
        &server,
        Options {
            registration_timeout: Duration::from_secs(1),
            ..options()
        },
    );
    server.create(&pod("a", "1", json!({}))).unwrap();
    let first = eventually(WAIT, || {
        server
            .list::<NodeClaim>()
            .first()
            .and_then(|c| c.metadata.name.clone())
    })
    .await
    .expect("a nodeclaim");
    eventually(WAIT, || {
        server.get::<NodeClaim>("", &first).is_none().then_some(())
    })
    .await
    .expect("deleted after the registration timeout");
    assert!(
        running
            .ctx
            .metrics
            .encode()
            .contains("reason=\"registration_timeout\"")
    );
    // The pod's next claims time out too: half of the last four failed.
    eventually(WAIT, || {
        (pool_condition(&server, "NodeRegistrationHealthy")
            == Some(("False".into(), "RegistrationFailed".into())))
        .then_some(())
    })
    .await
    .expect("NodeRegistrationHealthy=False once registrations keep failing");
    running.stop().await;

    // Launch: the provider keeps failing (its NodeClass cannot be read), the timeout is 1s.
    let server = setup(json!({}));
    server.inject(Fault::error(
        Some(Verb::Get),
        Some("kwoknodeclasses"),
        StatusCode::INTERNAL_SERVER_ERROR,
    ));
    let running = start(
        &server,
        Options {
            launch_timeout: Duration::from_secs(1),
            ..options()
        },
    );
    server.create(&pod("a", "1", json!({}))).unwrap();
    let first = eventually(WAIT, || {
        server
            .list::<NodeClaim>()
            .first()
            .and_then(|c| c.metadata.name.clone())
    })
    .await
    .expect("a nodeclaim");
    let unknown = eventually(WAIT, || {
        let c = server.get::<NodeClaim>("", &first)?;
        c.status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == "Launched" && c.status == "Unknown")
    })
    .await
    .expect("Launched=Unknown while the provider fails");
    assert_eq!(unknown.reason, "LaunchFailed");
    eventually(WAIT, || {
        server.get::<NodeClaim>("", &first).is_none().then_some(())
    })
    .await
    .expect("deleted after the launch timeout");
    assert!(
        running
            .ctx
            .metrics
            .encode()
            .contains("reason=\"launch_timeout\"")
    );
    assert!(server.list::<Node>().is_empty(), "nothing was launched");
    running.stop().await;
}

fn disrupting() -> Options {
    Options {
        disruption_poll: Duration::from_millis(200),
        consolidation_validation: Duration::from_millis(400),
        ..options()
    }
}

fn events_named(server: &FakeApiServer, reason: &str) -> Vec<Event> {
    server
        .list::<Event>()
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_node_is_removed_after_validation() {
    let server = setup(json!({}));
    let running = start(&server, disrupting());
    provision(&server, 1).await;
    let claim = server.list::<NodeClaim>()[0].clone();
    let node = claim.status.clone().unwrap().node_name.unwrap();
    eventually(WAIT, || (ready_claims(&server).len() == 1).then_some(()))
        .await
        .expect("initialized");
    server.delete::<Pod>("default", "p0").unwrap();
    eventually(WAIT, || {
        (server.get::<Node>("", &node).is_none()
            && server
                .get::<NodeClaim>("", claim.metadata.name.as_deref().unwrap())
                .is_none())
        .then_some(())
    })
    .await
    .expect("the empty node and its claim go");
    let mut terminating: Vec<(Option<String>, Option<String>)> =
        events_named(&server, "DisruptionTerminating")
            .into_iter()
            .map(|e| (e.involved_object.kind, e.message))
            .collect();
    terminating.sort();
    assert_eq!(
        terminating,
        [
            (Some("Node".into()), Some("Disrupting Node: Empty".into())),
            (
                Some("NodeClaim".into()),
                Some("Disrupting NodeClaim: Empty".into())
            ),
        ],
        "upstream's event on the candidate's Node and NodeClaim"
    );
    let metrics = running.ctx.metrics.encode();
    assert!(
        metrics.contains(
            "karpenter_voluntary_disruption_decisions_total{consolidation_type=\"empty\",decision=\"delete\",reason=\"empty\"}"
        ),
        "{metrics}"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_underutilized_node_is_replaced_by_a_cheaper_one_before_it_goes() {
    // On-demand: replacing spot with spot is off by default, as upstream.
    let server = setup(json!({"spec": {"template": {"spec": {"requirements": [
        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    ]}}}}));
    let running = start(&server, disrupting());
    // Three 3-CPU pods want a 16-CPU node; two leave and a 4-CPU node would do.
    for i in 0..3 {
        server
            .create(&pod(&format!("p{i}"), "3", json!({})))
            .unwrap();
    }
    eventually(WAIT, || (bound(&server) == 3).then_some(()))
        .await
        .expect("bound");
    let big = server.list::<NodeClaim>()[0].clone();
    let big_type =
        big.metadata.labels.as_ref().unwrap()["node.kubernetes.io/instance-type"].clone();
    eventually(WAIT, || (ready_claims(&server).len() == 1).then_some(()))
        .await
        .expect("initialized");
    server.delete::<Pod>("default", "p1").unwrap();
    server.delete::<Pod>("default", "p2").unwrap();

    let gone = eventually(WAIT, || {
        server
            .get::<NodeClaim>("", big.metadata.name.as_deref().unwrap())
            .is_none()
            .then_some(())
    })
    .await;
    let story: Vec<String> = server
        .list::<Event>()
        .into_iter()
        .map(|e| {
            format!(
                "{:?} {:?}: {:?}",
                e.involved_object.name, e.reason, e.message
            )
        })
        .collect();
    assert!(
        gone.is_some(),
        "the {big_type} node was consolidated; events: {story:#?}; metrics: {}",
        running.ctx.metrics.encode()
    );
    let launching = events_named(&server, "DisruptionLaunching");
    assert_eq!(
        launching[0].message.as_deref(),
        Some("Launching NodeClaim: Underutilized")
    );
    let replacement = server
        .list::<NodeClaim>()
        .into_iter()
        .find(|c| c.metadata.name != big.metadata.name)
        .expect("a replacement");
    assert_eq!(
        (
            launching[0].involved_object.kind.as_deref(),
            &launching[0].involved_object.name
        ),
        (Some("NodeClaim"), &replacement.metadata.name),
        "upstream publishes DisruptionLaunching on the replacement"
    );
    // The candidate's DisruptionReason condition is what its pods' evictions are named by.
    let evicted = events_named(&server, "Evicted");
    assert!(
        evicted.iter().any(|e| {
            e.involved_object.name.as_deref() == Some("p0")
                && e.message.as_deref() == Some("Evicted pod: Underutilized")
        }),
        "p0 evicted for the command's reason: {evicted:?}"
    );
    assert!(
        running
            .ctx
            .metrics
            .encode()
            .contains("karpenter_pods_drained_total{reason=\"Underutilized\"} 1"),
        "pods_drained by the DisruptionReason"
    );
    let small_type =
        replacement.metadata.labels.as_ref().unwrap()["node.kubernetes.io/instance-type"].clone();
    assert_ne!(small_type, big_type);
    assert!(
        !events_named(&server, "DisruptionTerminating").is_empty(),
        "the candidate went only after its replacement initialized"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn do_not_disrupt_blocks_disruption_with_an_event() {
    let server = setup(json!({}));
    let running = start(&server, disrupting());
    let mut keep = pod("keep", "1", json!({}));
    keep.metadata.annotations = Some(
        [(
            "karpenter.sh/do-not-disrupt".to_string(),
            "true".to_string(),
        )]
        .into(),
    );
    server.create(&keep).unwrap();
    eventually(WAIT, || (ready_claims(&server).len() == 1).then_some(()))
        .await
        .expect("a node");
    // Upstream dedupes DisruptionBlocked by the object alone for 2 minutes: the first reason
    // stands, which is "not initialized" when a pass sees the node before it initializes.
    let blocked = |kind: &str| {
        events_named(&server, "DisruptionBlocked")
            .into_iter()
            .filter(|e| e.involved_object.kind.as_deref() == Some(kind))
            .collect::<Vec<_>>()
    };
    for kind in ["Node", "NodeClaim"] {
        let first = eventually(WAIT, || blocked(kind).into_iter().next())
            .await
            .unwrap_or_else(|| panic!("a DisruptionBlocked event on the {kind}"));
        let message = first.message.unwrap_or_default();
        assert!(
            message.contains("do-not-disrupt") || message.contains("initialized"),
            "{message}"
        );
    }
    more_passes(&running, "disruption", 2).await;
    assert_eq!(server.list::<NodeClaim>().len(), 1, "the node stays");
    for kind in ["Node", "NodeClaim"] {
        assert_eq!(blocked(kind).len(), 1, "one event per {kind} per window");
    }
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_that_never_launches_rolls_the_disruption_back() {
    let server = setup(json!({"spec": {"template": {"spec": {"requirements": [
        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    ]}}}}));
    let running = start(
        &server,
        Options {
            launch_timeout: Duration::from_secs(1),
            ..disrupting()
        },
    );
    for i in 0..3 {
        server
            .create(&pod(&format!("p{i}"), "3", json!({})))
            .unwrap();
    }
    eventually(WAIT, || (ready_claims(&server).len() == 1).then_some(()))
        .await
        .expect("a node");
    let big = server.list::<NodeClaim>()[0].clone();
    let node = big.status.clone().unwrap().node_name.unwrap();
    // From now on no launch succeeds: the replacement's NodeClass cannot be read.
    server.inject(Fault::error(
        Some(Verb::Get),
        Some("kwoknodeclasses"),
        StatusCode::INTERNAL_SERVER_ERROR,
    ));
    server.delete::<Pod>("default", "p1").unwrap();
    server.delete::<Pod>("default", "p2").unwrap();
    let tainted = |s: &FakeApiServer| {
        s.get::<Node>("", &node)
            .and_then(|n| n.spec?.taints)
            .is_some_and(|t| t.iter().any(|t| t.key == "karpenter.sh/disrupted"))
    };
    eventually(WAIT, || tainted(&server).then_some(()))
        .await
        .expect("the candidate is tainted");
    eventually(WAIT, || (!tainted(&server)).then_some(()))
        .await
        .expect("and untainted after the replacement failed");
    assert!(
        server
            .get::<NodeClaim>("", big.metadata.name.as_deref().unwrap())
            .is_some(),
        "the candidate stays"
    );
    assert!(events_named(&server, "DisruptionTerminating").is_empty());
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disruption_taint_left_by_a_previous_leader_is_removed() {
    let server = setup(json!({}));
    let first = start(&server, options());
    let mut keep = pod("keep", "1", json!({}));
    keep.metadata.annotations = Some(
        [(
            "karpenter.sh/do-not-disrupt".to_string(),
            "true".to_string(),
        )]
        .into(),
    );
    server.create(&keep).unwrap();
    eventually(WAIT, || (ready_claims(&server).len() == 1).then_some(()))
        .await
        .expect("a node");
    first.stop().await;
    // As if a leader had tainted its candidate and then died.
    let node = server.list::<Node>()[0].metadata.name.clone().unwrap();
    let mut taints = server
        .get::<Node>("", &node)
        .unwrap()
        .spec
        .unwrap()
        .taints
        .unwrap_or_default();
    taints.push(
        serde_json::from_value(json!({"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}))
            .unwrap(),
    );
    server
        .merge::<Node>("", &node, json!({"spec": {"taints": taints}}))
        .unwrap();

    let second = start(&server, disrupting());
    let released = eventually(WAIT, || {
        let taints = server
            .get::<Node>("", &node)?
            .spec?
            .taints
            .unwrap_or_default();
        taints
            .iter()
            .all(|t| t.key != "karpenter.sh/disrupted")
            .then_some(())
    })
    .await;
    assert!(released.is_some(), "the new leader removed the stale taint");
    assert!(
        server
            .get::<Node>("", &node)
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none()
    );
    second.stop().await;
}

fn drifting() -> Options {
    Options {
        drift_poll: Duration::from_millis(200),
        ..disrupting()
    }
}

fn condition<'a>(claim: &'a NodeClaim, type_: &str) -> Option<&'a Condition> {
    claim
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
}

fn annotation(claim: &NodeClaim, key: &str) -> Option<String> {
    claim.metadata.annotations.as_ref()?.get(key).cloned()
}

/// Provisions one pod and waits for its node to initialize; the claim as it is then.
async fn one_ready_node(server: &FakeApiServer) -> NodeClaim {
    provision(server, 1).await;
    eventually(WAIT, || ready_claims(server).into_iter().next())
        .await
        .expect("initialized")
}

/// Waits for `claim` to be gone and a Ready replacement in its place (launched first: drift
/// replaces before it drains); the replacement.
async fn replaced(server: &FakeApiServer, claim: &NodeClaim) -> NodeClaim {
    let old = claim.metadata.name.clone().unwrap();
    eventually(WAIT, || {
        let fresh = ready_claims(server)
            .into_iter()
            .find(|c| c.metadata.name.as_deref() != Some(old.as_str()))?;
        server.get::<NodeClaim>("", &old).is_none().then_some(fresh)
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "{old} replaced; claims: {:?}",
            server
                .list::<NodeClaim>()
                .iter()
                .map(|c| (c.metadata.name.clone(), c.status.clone()))
                .collect::<Vec<_>>()
        )
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_nodepool_template_drifts_and_replaces_its_nodes() {
    // consolidateAfter Never: only drift may move the node.
    let server = setup(json!({"spec": {"disruption": {"consolidateAfter": "Never"}}}));
    let running = start(&server, drifting());
    let claim = one_ready_node(&server).await;
    let hash = annotation(&claim, "karpenter.sh/nodepool-hash").expect("claims carry the hash");
    assert_eq!(
        annotation(&claim, "karpenter.sh/nodepool-hash-version").as_deref(),
        Some(karpenter_api::hash::NODE_POOL_HASH_VERSION)
    );
    eventually(WAIT, || {
        let pool = server.get::<NodePool>("", "default")?;
        (pool.metadata.annotations?.get("karpenter.sh/nodepool-hash") == Some(&hash)).then_some(())
    })
    .await
    .expect("the NodePool is stamped with the same hash");
    // Requirements and disruption settings are not static fields: nothing drifts.
    server
        .merge::<NodePool>(
            "",
            "default",
            json!({"spec": {"weight": 10, "template": {"spec": {"requirements": [
                {"key": "kubernetes.io/os", "operator": "In", "values": ["linux", "windows"]},
                {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
            ]}}}}),
        )
        .unwrap();
    eventually(WAIT, || {
        let pool = running.ctx.cluster.node_pools.get("default")?;
        (pool.spec.weight == Some(10)).then_some(())
    })
    .await
    .expect("state has the widened NodePool");
    more_passes(&running, "nodeclaim.disruption", 2).await;
    let name = claim.metadata.name.clone().unwrap();
    let now = server.get::<NodeClaim>("", &name).expect("still there");
    assert!(
        condition(&now, "Drifted").is_none(),
        "widening drifts nothing"
    );

    server
        .merge::<NodePool>(
            "",
            "default",
            json!({"spec": {"template": {"metadata": {"labels": {"team": "a"}}}}}),
        )
        .unwrap();
    let fresh = replaced(&server, &claim).await;
    assert_eq!(
        fresh
            .metadata
            .labels
            .as_ref()
            .unwrap()
            .get("team")
            .map(String::as_str),
        Some("a"),
        "the replacement has the new template"
    );
    assert!(condition(&fresh, "Drifted").is_none());
    let metrics = running.ctx.metrics.encode();
    assert!(
        metrics.contains(
            "karpenter_nodeclaims_drifted_total{nodepool=\"default\",type=\"NodePoolDrifted\"} 1"
        ),
        "{metrics}"
    );
    assert_eq!(
        events_named(&server, "DisruptionTerminating")
            .into_iter()
            .find(|e| e.involved_object.kind.as_deref() == Some("Node"))
            .unwrap()
            .message
            .as_deref(),
        Some("Disrupting Node: Drifted")
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_stamped_by_another_hash_version_are_adopted_not_replaced() {
    let server = setup(json!({}));
    let running = start(&server, drifting());
    let claim = one_ready_node(&server).await;
    let name = claim.metadata.name.clone().unwrap();
    let current = annotation(&claim, "karpenter.sh/nodepool-hash").unwrap();
    // As upstream Karpenter left them: its own algorithm, version v3.
    let upstream = json!({"metadata": {"annotations": {
        "karpenter.sh/nodepool-hash": "6553925483735410345",
        "karpenter.sh/nodepool-hash-version": "v3",
    }}});
    server
        .merge::<NodePool>("", "default", upstream.clone())
        .unwrap();
    server.merge::<NodeClaim>("", &name, upstream).unwrap();
    let adopted = eventually(WAIT, || {
        let c = server.get::<NodeClaim>("", &name)?;
        (annotation(&c, "karpenter.sh/nodepool-hash-version").as_deref()
            == Some(karpenter_api::hash::NODE_POOL_HASH_VERSION))
        .then_some(c)
    })
    .await
    .expect("re-stamped");
    assert_eq!(
        annotation(&adopted, "karpenter.sh/nodepool-hash"),
        Some(current)
    );
    more_passes(&running, "nodeclaim.disruption", 2).await;
    let c = server.get::<NodeClaim>("", &name).expect("kept");
    assert!(condition(&c, "Drifted").is_none(), "{:?}", c.status);
    assert!(
        !running
            .ctx
            .metrics
            .encode()
            .contains("nodeclaims_drifted_total{")
    );
    running.stop().await;
}

/// KWOK scripted as a cloud: instances whose image moves on (NodeClass drift), launches that
/// fail with a named reason, and a loop of its own beside the controller's.
struct Scripted {
    kwok: KwokProvider,
    /// The NodeClaims whose image is outdated.
    outdated: std::sync::Mutex<Vec<String>>,
    /// Launches fail with this while it is set.
    create_error: std::sync::Mutex<Option<CloudProviderError>>,
    /// Launched nodes lose the `karpenter.sh/unregistered` taint before they register.
    strip_unregistered_taint: std::sync::atomic::AtomicBool,
    client: kube::Client,
    /// The provider's own loop: started, then stopped on shutdown.
    loop_started: Arc<std::sync::atomic::AtomicBool>,
    loop_stopped: Arc<std::sync::atomic::AtomicBool>,
}

impl Scripted {
    fn new(server: &FakeApiServer) -> Self {
        Self {
            kwok: KwokProvider::new(server.client()),
            outdated: Default::default(),
            create_error: Default::default(),
            strip_unregistered_taint: Default::default(),
            client: server.client(),
            loop_started: Default::default(),
            loop_stopped: Default::default(),
        }
    }
}

impl Provider for Scripted {
    type Settings = karpenter_kwok::provider::KwokSettings;

    async fn build(
        _client: kube::Client,
        _settings: Self::Settings,
    ) -> Result<Self, karpenter_controller::cloudprovider::BoxError> {
        Err("built by the test".into())
    }

    fn controllers(ctx: &Arc<Context<Self>>, shutdown: &CancellationToken) -> Vec<ProviderLoop> {
        let (started, stopped) = (
            ctx.provider.loop_started.clone(),
            ctx.provider.loop_stopped.clone(),
        );
        let shutdown = shutdown.clone();
        vec![Box::pin(async move {
            started.store(true, std::sync::atomic::Ordering::SeqCst);
            shutdown.cancelled().await;
            stopped.store(true, std::sync::atomic::Ordering::SeqCst);
        })]
    }
}

impl CloudProvider for Scripted {
    fn name(&self) -> &'static str {
        "kwok"
    }
    fn node_classes(&self) -> &'static [karpenter_api::crd::Crd] {
        self.kwok.node_classes()
    }
    async fn node_class_readiness(
        &self,
        reference: &karpenter_api::NodeClassReference,
    ) -> CloudResult<karpenter_controller::cloudprovider::NodeClassReadiness> {
        self.kwok.node_class_readiness(reference).await
    }
    async fn create(&self, claim: &NodeClaim) -> CloudResult<NodeClaim> {
        if let Some(e) = self.create_error.lock().unwrap().clone() {
            return Err(e);
        }
        let launched = self.kwok.create(claim).await?;
        if self
            .strip_unregistered_taint
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            let nodes: kube::Api<Node> = kube::Api::all(self.client.clone());
            let provider_id = launched.status.as_ref().and_then(|s| s.provider_id.clone());
            for node in nodes.list(&Default::default()).await.unwrap() {
                if node.spec.as_ref().and_then(|s| s.provider_id.clone()) == provider_id {
                    let patch = kube::api::Patch::Merge(json!({"spec": {"taints": []}}));
                    nodes
                        .patch(&node.metadata.name.unwrap(), &Default::default(), &patch)
                        .await
                        .unwrap();
                }
            }
        }
        Ok(launched)
    }
    async fn delete(&self, claim: &NodeClaim) -> CloudResult<()> {
        self.kwok.delete(claim).await
    }
    async fn get(&self, provider_id: &str) -> CloudResult<NodeClaim> {
        self.kwok.get(provider_id).await
    }
    async fn list(&self) -> CloudResult<Vec<NodeClaim>> {
        self.kwok.list().await
    }
    async fn is_drifted(&self, claim: &NodeClaim) -> CloudResult<Option<String>> {
        let outdated = self.outdated.lock().unwrap();
        Ok(claim
            .metadata
            .name
            .as_ref()
            .filter(|n| outdated.contains(n))
            .map(|_| "AMIDrift".to_string()))
    }
    async fn instance_types(
        &self,
        pool: &NodePool,
    ) -> CloudResult<Vec<Arc<karpenter_core::instancetype::InstanceType>>> {
        self.kwok.instance_types(pool).await
    }
    fn provider_labels(&self) -> Vec<String> {
        self.kwok.provider_labels()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_drift_marks_and_replaces_the_node() {
    let server = setup(json!({"spec": {"disruption": {"consolidateAfter": "Never"}}}));
    let provider = Arc::new(Scripted::new(&server));
    let options = Options {
        provider_drift_check: Duration::from_millis(200),
        ..drifting()
    };
    let running = start_with(&server, provider.clone(), options);
    let claim = one_ready_node(&server).await;
    let name = claim.metadata.name.clone().unwrap();
    more_passes(&running, "nodeclaim.disruption", 2).await;
    let c = server.get::<NodeClaim>("", &name).unwrap();
    assert!(condition(&c, "Drifted").is_none(), "not drifted yet");
    provider.outdated.lock().unwrap().push(name.clone());
    replaced(&server, &claim).await;
    let metrics = running.ctx.metrics.encode();
    assert!(
        metrics.contains(
            "karpenter_nodeclaims_drifted_total{nodepool=\"default\",type=\"AMIDrift\"} 1"
        ),
        "{metrics}"
    );
    running.stop().await;
}

#[tokio::test]
async fn node_class_readiness_reads_the_kwok_node_class() {
    use karpenter_api::NodeClassReference;
    use karpenter_controller::cloudprovider::NodeClassReadiness;
    let server = setup(json!({}));
    let provider = KwokProvider::new(server.client());
    let reference = |kind: &str, name: &str| NodeClassReference {
        group: "karpenter.kwok.sh".into(),
        kind: kind.into(),
        name: name.into(),
    };
    let cases = [
        (
            reference("KWOKNodeClass", "default"),
            NodeClassReadiness::Ready,
        ),
        (
            reference("KWOKNodeClass", "missing"),
            NodeClassReadiness::NotFound,
        ),
        (
            reference("EC2NodeClass", "default"),
            NodeClassReadiness::NotFound,
        ),
    ];
    for (r, expected) in cases {
        assert_eq!(
            provider.node_class_readiness(&r).await.unwrap(),
            expected,
            "{r:?}"
        );
    }
    // A status a controller wrote wins over the default.
    let not_ready: KWOKNodeClass = serde_json::from_value(json!({
        "apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": "paused"}, "spec": {},
        "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Paused", "message": "paused by a test", "lastTransitionTime": "2024-01-01T00:00:00Z"}]},
    }))
    .unwrap();
    server.create(&not_ready).unwrap();
    assert_eq!(
        provider
            .node_class_readiness(&reference("KWOKNodeClass", "paused"))
            .await
            .unwrap(),
        NodeClassReadiness::NotReady {
            reason: "Paused".into(),
            message: "paused by a test".into()
        }
    );
    assert_eq!(
        provider
            .repair_policies()
            .iter()
            .map(|p| (p.condition_type, p.condition_status, p.toleration.as_secs()))
            .collect::<Vec<_>>(),
        [("Ready", "False", 600), ("Ready", "Unknown", 600)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_controllers_run_and_named_launch_failures_reach_the_condition() {
    let server = setup(json!({}));
    let provider = Arc::new(Scripted::new(&server));
    *provider.create_error.lock().unwrap() = Some(CloudProviderError::create(
        "LaunchTemplateNotFound",
        "launch template lt-1 was deleted",
    ));
    let controller = Controller::new(server.client(), provider.clone(), Options::default());
    let stop = CancellationToken::new();
    let task = tokio::spawn(controller.run_with_provider_controllers(stop.clone()));
    let started = eventually(WAIT, || {
        provider
            .loop_started
            .load(std::sync::atomic::Ordering::SeqCst)
            .then_some(())
    })
    .await;
    assert!(started.is_some(), "the provider's own loop runs");

    server
        .create(&pod("p0", "1", json!({"app": "web"})))
        .unwrap();
    let launched = eventually(WAIT, || {
        server.list::<NodeClaim>().into_iter().find_map(|c| {
            let launched = condition(&c, "Launched")?;
            (launched.reason == "LaunchTemplateNotFound").then(|| launched.clone())
        })
    })
    .await
    .expect("the Launched condition carries the provider's reason");
    assert_eq!(launched.status, "Unknown");
    assert_eq!(launched.message, "launch template lt-1 was deleted");

    // Retried until the provider can launch.
    *provider.create_error.lock().unwrap() = None;
    assert_eq!(
        eventually(WAIT, || (bound(&server) == 1).then_some(())).await,
        Some(())
    );

    stop.cancel();
    task.await.unwrap();
    assert!(
        provider
            .loop_stopped
            .load(std::sync::atomic::Ordering::SeqCst),
        "the provider's loop ends with the controller"
    );
}

fn pool_condition(server: &FakeApiServer, type_: &str) -> Option<(String, String)> {
    let status = server.get::<NodePool>("", "default")?.status?;
    let c = status.conditions.into_iter().find(|c| c.type_ == type_)?;
    Some((c.status, c.reason))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodepool_status_counts_its_nodes_and_a_pool_not_ready_launches_nothing() {
    let server = setup(json!({}));
    let running = start(&server, options());
    provision(&server, 3).await;

    // NODES and the resources: what the claims' instances hold.
    let claims = server.list::<NodeClaim>();
    let cpu: i64 = claims
        .iter()
        .map(|c| {
            karpenter_core::resources::parse_milli(&c.status.as_ref().unwrap().capacity["cpu"].0)
                .unwrap()
        })
        .sum();
    let counted = eventually(WAIT, || {
        let status = server.get::<NodePool>("", "default")?.status?;
        let nodes = status.nodes?;
        let counted_cpu =
            karpenter_core::resources::parse_milli(&status.resources.get("cpu")?.0).ok()?;
        (nodes == claims.len() as i64 && counted_cpu == cpu).then_some(status)
    })
    .await
    .expect("the NodePool's status counts its nodes");
    assert_eq!(counted.resources["nodes"].0, claims.len().to_string());
    for (type_, reason) in [
        ("ValidationSucceeded", "ValidationSucceeded"),
        ("NodeClassReady", "NodeClassReady"),
        ("Ready", "Ready"),
    ] {
        assert_eq!(
            pool_condition(&server, type_),
            Some(("True".into(), reason.into())),
            "{type_}"
        );
    }
    // Its nodes registered.
    eventually(WAIT, || {
        (pool_condition(&server, "NodeRegistrationHealthy")
            == Some(("True".into(), "NodeRegistrationHealthy".into())))
        .then_some(())
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "the NodePool's nodes register: NodeRegistrationHealthy: {:?}",
            server.get::<NodePool>("", "default").unwrap()
        )
    });

    // Its NodeClass goes: the NodePool is not Ready, and a new pod gets no node from it.
    server.delete::<KWOKNodeClass>("", "default").unwrap();
    eventually(WAIT, || {
        (pool_condition(&server, "NodeClassReady")
            == Some(("False".into(), "NodeClassNotFound".into()))
            && pool_condition(&server, "Ready").is_some_and(|(s, _)| s == "False"))
        .then_some(())
    })
    .await
    .expect("the NodePool is not Ready without its NodeClass");
    // The provisioner reads the controller's cache: wait until it has the status too.
    eventually(WAIT, || {
        running
            .ctx
            .cluster
            .node_pools
            .all()
            .iter()
            .all(|p| {
                p.status.as_ref().is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.status == "False")
                })
            })
            .then_some(())
    })
    .await
    .expect("the controller sees the NodePool not Ready");
    server
        .create(&pod("late", "1", json!({"app": "web"})))
        .unwrap();
    more_passes(&running, "provisioner", 1).await;
    assert_eq!(server.list::<NodeClaim>().len(), claims.len());
    assert!(
        server
            .get::<Pod>("default", "late")
            .and_then(|p| p.spec?.node_name)
            .is_none()
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_syncs_the_template_and_warns_of_a_missing_unregistered_taint() {
    let server = setup(json!({"spec": {"template": {"metadata": {
        "labels": {"team": "a"},
        "annotations": {"example.com/owner": "team-a"},
    }}}}));
    let provider = Arc::new(Scripted::new(&server));
    provider
        .strip_unregistered_taint
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let running = start_with(&server, provider, options());
    server
        .create(&pod("p0", "1", json!({"app": "web"})))
        .unwrap();
    let claim = eventually(WAIT, || ready_claims(&server).into_iter().next())
        .await
        .expect("a ready claim");
    let node = server
        .get::<Node>(
            "",
            claim.status.as_ref().unwrap().node_name.as_deref().unwrap(),
        )
        .unwrap();
    let annotations = node.metadata.annotations.clone().unwrap_or_default();
    let labels = node.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        annotations.get("example.com/owner").map(String::as_str),
        Some("team-a"),
        "the template's annotations reach the Node: {annotations:?}"
    );
    assert_eq!(labels.get("team").map(String::as_str), Some("a"));
    assert_eq!(
        labels.get("karpenter.sh/registered").map(String::as_str),
        Some("true")
    );
    let missing = events_named(&server, "UnregisteredTaintMissing");
    assert_eq!(missing.len(), 1, "{missing:?}");
    assert_eq!(
        missing[0].involved_object.kind.as_deref(),
        Some("NodeClaim")
    );
    assert_eq!(missing[0].type_.as_deref(), Some("Warning"));
    assert_eq!(
        missing[0].message.as_deref(),
        Some(
            "Missing karpenter.sh/unregistered taint which prevents registration related race conditions on Karpenter-managed nodes"
        )
    );
    // Upstream's conditions on a NodeClaim that made it: the root Ready as operatorpkg
    // computes it, and the consistency check's verdict.
    let ready = condition(&claim, "Ready").unwrap();
    assert_eq!(
        (ready.reason.as_str(), ready.message.as_str()),
        ("Ready", "")
    );
    let consistent = eventually(WAIT, || {
        let claim = server.get::<NodeClaim>("", claim.metadata.name.as_deref().unwrap())?;
        condition(&claim, "ConsistentStateFound").cloned()
    })
    .await
    .expect("the consistency check ran");
    assert_eq!(consistent.status, "True");
    assert!(events_named(&server, "FailedConsistencyCheck").is_empty());
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launching_claim_reads_as_upstreams_until_its_node_registers() {
    let server = setup(json!({}));
    let provider = Arc::new(Scripted::new(&server));
    *provider.create_error.lock().unwrap() = Some(CloudProviderError::create(
        "LaunchTemplateNotFound",
        "launch template lt-1 was deleted",
    ));
    let running = start_with(&server, provider, options());
    server
        .create(&pod("p0", "1", json!({"app": "web"})))
        .unwrap();
    let claim = eventually(WAIT, || {
        server
            .list::<NodeClaim>()
            .into_iter()
            .find(|c| condition(c, "Ready").is_some())
    })
    .await
    .expect("a claim with conditions");
    let read = |t: &str| {
        let c = condition(&claim, t).unwrap();
        (c.status.clone(), c.reason.clone(), c.message.clone())
    };
    let unknown = |r: &str, m: &str| ("Unknown".to_string(), r.to_string(), m.to_string());
    assert_eq!(
        read("Launched"),
        unknown("LaunchTemplateNotFound", "launch template lt-1 was deleted")
    );
    for t in ["Registered", "Initialized"] {
        assert_eq!(
            read(t),
            unknown(
                "AwaitingReconciliation",
                "object is awaiting reconciliation"
            ),
            "{t}"
        );
    }
    let (status, reason, message) = read("Ready");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("Unknown", "ReconcilingDependents")
    );
    let mut listed: Vec<&str> = message.split(", ").collect();
    listed.sort();
    assert_eq!(
        listed,
        [
            "Initialized=Unknown",
            "Launched=Unknown",
            "Registered=Unknown"
        ]
    );
    running.stop().await;
}

fn repairing() -> Options {
    let mut o = Options {
        repair_poll: Duration::from_millis(200),
        ..options()
    };
    o.feature_gates.node_repair = true;
    o
}

/// Sets `node`'s `Ready` condition to `status`, transitioned `minutes_ago`.
fn set_ready(server: &FakeApiServer, node: &str, status: &str, minutes_ago: i64) {
    let at = k8s_openapi::jiff::Timestamp::now()
        - k8s_openapi::jiff::SignedDuration::from_secs(minutes_ago * 60);
    let at = k8s_openapi::jiff::Timestamp::from_second(at.as_second()).unwrap();
    server
        .merge::<Node>(
            "",
            node,
            json!({"status": {"conditions": [{"type": "Ready", "status": status, "reason": "KubeletNotReady", "lastTransitionTime": at.to_string()}]}}),
        )
        .unwrap();
}

fn node_of(claim: &NodeClaim) -> String {
    claim.status.clone().unwrap().node_name.unwrap()
}

/// Upstream's node health suite end to end: a node NotReady within KWOK's 10-minute toleration
/// stays; past it, its NodeClaim goes at once — though its NodePool's budget allows no
/// disruption and the node is `do-not-disrupt` — its pod deleted at the termination time
/// rather than evicted, and the disruption is counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unhealthy_node_is_repaired_forcefully_after_its_toleration() {
    let server = setup(json!({"spec": {"disruption": {"budgets": [{"nodes": "0"}]}}}));
    let running = start(&server, repairing());
    let claim = one_ready_node(&server).await;
    let name = claim.metadata.name.clone().unwrap();
    let node = node_of(&claim);
    server
        .merge::<Node>(
            "",
            &node,
            json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}}),
        )
        .unwrap();

    set_ready(&server, &node, "False", 5);
    more_passes(&running, "node.health", 3).await;
    let kept = server.get::<NodeClaim>("", &name).expect("still there");
    assert!(
        kept.metadata.deletion_timestamp.is_none(),
        "within the toleration"
    );
    assert!(annotation(&kept, "karpenter.sh/nodeclaim-termination-timestamp").is_none());

    let before = server.requests().len();
    set_ready(&server, &node, "False", 11);
    let gone = eventually(WAIT, || {
        (server.get::<NodeClaim>("", &name).is_none() && server.get::<Node>("", &node).is_none())
            .then_some(())
    })
    .await;
    assert!(gone.is_some(), "the unhealthy node and its claim went");
    // The claim was annotated with its termination deadline (now) before it was deleted.
    // (A KWOK node is its own instance: once it is NotReady and deleting, termination finds
    // the instance gone and skips the drain, so the forced pod deletion is not seen here.)
    let calls: Vec<Verb> = server.requests()[before..]
        .iter()
        .filter(|r| {
            r.plural == "nodeclaims" && r.name.as_deref() == Some(&*name) && r.subresource.is_none()
        })
        .map(|r| r.verb)
        .filter(|v| matches!(v, Verb::Patch | Verb::Delete))
        .collect();
    assert_eq!(
        calls.get(..2),
        Some(&[Verb::Patch, Verb::Delete][..]),
        "{calls:?}"
    );
    let metrics = running.ctx.metrics.encode();
    for (metric, label) in [
        (
            "karpenter_nodeclaims_unhealthy_disrupted_total",
            "condition=\"ready\"",
        ),
        (
            "karpenter_nodeclaims_disrupted_total",
            "reason=\"unhealthy\"",
        ),
        (
            "karpenter_pods_disruption_initiated_total",
            "reason=\"unhealthy\"",
        ),
    ] {
        assert!(
            metrics
                .lines()
                .any(|l| l.starts_with(&format!("{metric}{{"))
                    && l.contains(label)
                    && l.contains("nodepool=\"default\"")
                    && l.ends_with(" 1")),
            "{metric}{{{label}}}: {metrics}"
        );
    }
    assert!(events_named(&server, "NodeRepairBlocked").is_empty());
    running.stop().await;
}

/// Upstream's circuit breaker end to end: with both nodes of a NodePool unhealthy (over
/// 20%, rounded up: 1 of 2) neither is repaired and each gets `NodeRepairBlocked`; once one
/// recovers, the other is repaired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_circuit_breaker_holds_repair_back_until_the_nodepool_recovers() {
    let server = setup(json!({}));
    let running = start(&server, repairing());
    for i in 0..2 {
        let mut p = pod(&format!("solo{i}"), "1", json!({"app": "solo"}));
        p.spec.as_mut().unwrap().affinity = Some(
            serde_json::from_value(json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "solo"}}, "topologyKey": "kubernetes.io/hostname"},
            ]}}))
            .unwrap(),
        );
        server.create(&p).unwrap();
    }
    let claims = eventually(WAIT, || {
        let ready = ready_claims(&server);
        (ready.len() == 2).then_some(ready)
    })
    .await
    .expect("two nodes");
    for c in &claims {
        set_ready(&server, &node_of(c), "Unknown", 30);
    }
    let blocked = eventually(WAIT, || {
        let events = events_named(&server, "NodeRepairBlocked");
        (events.len() == 2).then_some(events)
    })
    .await
    .expect("both nodes blocked");
    for e in &blocked {
        assert_eq!(e.involved_object.kind.as_deref(), Some("Node"));
        assert_eq!(e.type_.as_deref(), Some("Warning"));
        assert_eq!(
            e.message.as_deref(),
            Some("more than 20% nodes are unhealthy in the nodepool")
        );
    }
    more_passes(&running, "node.health", 3).await;
    for c in &claims {
        let c = server
            .get::<NodeClaim>("", c.metadata.name.as_deref().unwrap())
            .expect("kept");
        assert!(c.metadata.deletion_timestamp.is_none(), "blocked");
    }
    assert_eq!(
        events_named(&server, "NodeRepairBlocked").len(),
        2,
        "once per node per 15 minutes"
    );

    set_ready(&server, &node_of(&claims[0]), "True", 0);
    let sick = claims[1].metadata.name.clone().unwrap();
    eventually(WAIT, || {
        server.get::<NodeClaim>("", &sick).is_none().then_some(())
    })
    .await
    .expect("the one still unhealthy is repaired");
    assert!(
        server
            .get::<NodeClaim>("", claims[0].metadata.name.as_deref().unwrap())
            .is_some(),
        "the recovered one stays"
    );
    running.stop().await;
}

/// Without the gate (upstream's default) nothing is repaired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_gate_unhealthy_nodes_stay() {
    let server = setup(json!({}));
    let running = start(&server, drifting());
    let claim = one_ready_node(&server).await;
    set_ready(&server, &node_of(&claim), "False", 60);
    more_passes(&running, "nodeclaim.disruption", 3).await;
    assert!(running.ctx.metrics.reconciles("node.health") == 0);
    let kept = server
        .get::<NodeClaim>("", claim.metadata.name.as_deref().unwrap())
        .expect("kept");
    assert!(kept.metadata.deletion_timestamp.is_none());
    running.stop().await;
}

fn overlaying() -> Options {
    let mut o = drifting();
    o.feature_gates.node_overlay = true;
    o.overlay_poll = Duration::from_millis(200);
    o
}

fn capacity_overlay(fuse: &str) -> karpenter_api::nodeoverlay::NodeOverlay {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "fuse"},
        "spec": {"requirements": [], "capacity": {"smarter-devices/fuse": fuse}},
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_capacity_overlay_drifts_the_nodes_it_launched() {
    const HASH: &str = karpenter_api::nodeoverlay::CAPACITY_OVERLAY_HASH_ANNOTATION;
    let server = setup(json!({"spec": {"disruption": {"consolidateAfter": "Never"}}}));
    server
        .install_crds([karpenter_api::crd::NODE_OVERLAY.definition()])
        .unwrap();
    server.create(&capacity_overlay("1")).unwrap();
    let running = start(&server, overlaying());
    let claim = one_ready_node(&server).await;
    let recorded = annotation(&claim, HASH).expect("a launch under the gate records the overlay");
    assert_eq!(
        annotation(&claim, "karpenter.sh/capacity-overlay-applied").as_deref(),
        Some("true")
    );
    // Polls of an unchanged overlay drift nothing.
    more_passes(&running, "nodeoverlay", 2).await;
    more_passes(&running, "nodeclaim.disruption", 2).await;
    let name = claim.metadata.name.clone().unwrap();
    let now = server.get::<NodeClaim>("", &name).expect("still there");
    assert!(condition(&now, "Drifted").is_none(), "{:?}", now.status);

    server
        .merge::<karpenter_api::nodeoverlay::NodeOverlay>(
            "",
            "fuse",
            json!({"spec": {"capacity": {"smarter-devices/fuse": "2"}}}),
        )
        .unwrap();
    let drifted = eventually(WAIT, || {
        let c = server.get::<NodeClaim>("", &name)?;
        let d = condition(&c, "Drifted")?;
        (d.status == "True").then(|| d.reason.clone())
    })
    .await;
    assert_eq!(drifted.as_deref(), Some("NodeOverlayDrifted"));
    let fresh = replaced(&server, &claim).await;
    let fresh_hash = annotation(&fresh, HASH).expect("the replacement records the overlay");
    assert_ne!(
        fresh_hash, recorded,
        "the replacement was launched under the new overlay"
    );
    assert!(condition(&fresh, "Drifted").is_none());
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_overlay_gate_nothing_is_recorded_or_drifted() {
    let server = setup(json!({"spec": {"disruption": {"consolidateAfter": "Never"}}}));
    server
        .install_crds([karpenter_api::crd::NODE_OVERLAY.definition()])
        .unwrap();
    server.create(&capacity_overlay("1")).unwrap();
    let running = start(&server, drifting());
    let claim = one_ready_node(&server).await;
    assert_eq!(
        annotation(
            &claim,
            karpenter_api::nodeoverlay::CAPACITY_OVERLAY_HASH_ANNOTATION
        ),
        None
    );
    server
        .merge::<karpenter_api::nodeoverlay::NodeOverlay>(
            "",
            "fuse",
            json!({"spec": {"capacity": {"smarter-devices/fuse": "2"}}}),
        )
        .unwrap();
    more_passes(&running, "nodeclaim.disruption", 3).await;
    let now = server
        .get::<NodeClaim>("", claim.metadata.name.as_deref().unwrap())
        .expect("still there");
    assert!(condition(&now, "Drifted").is_none());
    running.stop().await;
}
