//! Upstream Karpenter's NodeClaim lifecycle and node termination suites, ported case by case
//! against the test kit's API server and an in-memory cloud: each case drives the
//! controller's own reconcilers (`lifecycle`, `termination`, `garbage`, `drift`) one pass at a
//! time on tokio's paused clock, reading cluster state afresh before every pass, and asserts
//! what the API server then holds (finalizers, conditions, taints, events) and what the cloud
//! was asked to do.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use karpenter_api::crd::Crd;
use karpenter_api::labels::{
    DISRUPTED_TAINT_KEY, EXCLUDE_FROM_LOAD_BALANCERS_LABEL, HOSTNAME_LABEL,
    NODE_CLAIM_TERMINATION_TIMESTAMP_ANNOTATION, NODE_DO_NOT_SYNC_TAINTS_LABEL,
    NODE_INITIALIZED_LABEL, NODE_POOL_LABEL, NODE_REGISTERED_LABEL, TERMINATION_FINALIZER,
    UNREGISTERED_TAINT_KEY,
};
use karpenter_api::{NodeClaim, NodeClassReference, NodePool};
use karpenter_cloudprovider::fake::FakeCloudProvider;
use karpenter_cloudprovider::{
    HookResult, InstanceType, NodeClassReadiness, RegistrationHook, RepairPolicy,
};
use karpenter_controller::cloudprovider::{CloudProvider, CloudProviderError};
use karpenter_controller::{Clock, Context, Controller, Options, drift, garbage, lifecycle};
use karpenter_controller::{Error, termination};
use karpenter_testkit::FakeApiServer;
use kube::ResourceExt;
use serde_json::json;

/// A NodeClass kind this controller's provider does not support.
const FOREIGN_KIND: &str = "ForeignNodeClass";

fn foreign_class_label() -> String {
    karpenter_api::labels::node_class_label_key("karpenter.test.sh", FOREIGN_KIND)
}

/// The in-memory cloud, plus what upstream's fake cloud provider can be told to do and ours
/// cannot: fail deletions.
#[derive(Default)]
struct Cloud {
    fake: FakeCloudProvider,
    delete_errors: Mutex<VecDeque<CloudProviderError>>,
    deletes: Mutex<u32>,
    hooks: Mutex<Vec<Arc<dyn RegistrationHook>>>,
}

impl CloudProvider for Cloud {
    fn name(&self) -> &'static str {
        "fake"
    }
    fn node_classes(&self) -> &'static [Crd] {
        &[]
    }
    // Upstream's fake supports its TestNodeClass only; another kind is another controller's.
    fn supports(&self, r: &NodeClassReference) -> bool {
        r.kind != FOREIGN_KIND && self.fake.supports(r)
    }
    fn manages_node(&self, node: &Node) -> bool {
        !node.labels().contains_key(&foreign_class_label())
    }
    async fn node_class_readiness(
        &self,
        r: &NodeClassReference,
    ) -> karpenter_cloudprovider::Result<NodeClassReadiness> {
        self.fake.node_class_readiness(r).await
    }
    async fn create(&self, claim: &NodeClaim) -> karpenter_cloudprovider::Result<NodeClaim> {
        self.fake.create(claim).await
    }
    async fn delete(&self, claim: &NodeClaim) -> karpenter_cloudprovider::Result<()> {
        *self.deletes.lock().unwrap() += 1;
        if let Some(e) = self.delete_errors.lock().unwrap().pop_front() {
            return Err(e);
        }
        self.fake.delete(claim).await
    }
    async fn get(&self, provider_id: &str) -> karpenter_cloudprovider::Result<NodeClaim> {
        self.fake.get(provider_id).await
    }
    async fn list(&self) -> karpenter_cloudprovider::Result<Vec<NodeClaim>> {
        self.fake.list().await
    }
    async fn is_drifted(&self, c: &NodeClaim) -> karpenter_cloudprovider::Result<Option<String>> {
        self.fake.is_drifted(c).await
    }
    async fn instance_types(
        &self,
        p: &NodePool,
    ) -> karpenter_cloudprovider::Result<Vec<Arc<InstanceType>>> {
        self.fake.instance_types(p).await
    }
    fn provider_labels(&self) -> Vec<String> {
        self.fake.provider_labels()
    }
    fn registration_hooks(&self) -> Vec<Arc<dyn RegistrationHook>> {
        self.hooks.lock().unwrap().clone()
    }
    fn repair_policies(&self) -> Vec<RepairPolicy> {
        self.fake.repair_policies()
    }
}

/// The API server, the cloud and a controller context over them, on tokio's paused clock.
struct Env {
    server: FakeApiServer,
    cloud: Arc<Cloud>,
    ctx: Arc<Context<Cloud>>,
}

/// The label of the claims' NodeClass, as provisioning puts it on them.
const CLASS_LABEL: &str = "karpenter.test.sh/testnodeclass";

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

async fn advance(d: Duration) {
    tokio::time::advance(d).await;
}

impl Env {
    fn new() -> Self {
        Self::with_pool(json!({}))
    }

    /// With the NodePool `default` (patched by `pool`).
    fn with_pool(pool: serde_json::Value) -> Self {
        Self::with_options(pool, Options::default())
    }

    /// With the NodePool `default` (patched by `pool`) and the controller's `options`.
    fn with_options(pool: serde_json::Value, options: Options) -> Self {
        let clock = Clock::following_tokio();
        let server = FakeApiServer::new();
        let stamps = clock.clone();
        server.set_clock(move || stamps.now());
        let mut object = json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.test.sh", "kind": "TestNodeClass", "name": "default"},
                "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}],
            }}},
        });
        merge(&mut object, &pool);
        let pool: NodePool = serde_json::from_value(object).expect("a NodePool");
        server.create(&pool).expect("created");
        let cloud = Arc::new(Cloud::default());
        let options = Options {
            disable_leader_election: true,
            ..options
        };
        let ctx = Controller::with_clock(server.client(), cloud.clone(), options, clock).context();
        Self { server, cloud, ctx }
    }

    /// Reads the whole cluster into state, as the watches would have by now.
    async fn sync(&self) {
        self.ctx
            .cluster
            .list(&self.ctx.client)
            .await
            .expect("listed");
    }

    fn claim(&self, name: &str) -> Option<NodeClaim> {
        self.server.get::<NodeClaim>("", name)
    }

    fn node(&self, name: &str) -> Option<Node> {
        self.server.get::<Node>("", name)
    }

    fn pod(&self, name: &str) -> Option<Pod> {
        self.server.get::<Pod>("default", name)
    }

    /// One lifecycle pass over the claim `name` (nothing when it is gone).
    async fn lifecycle(&self, name: &str) -> Result<(), Error> {
        self.sync().await;
        match self.ctx.cluster.node_claims.get(name) {
            Some(c) => lifecycle::reconcile(&self.ctx, &c).await.map(|_| ()),
            None => Ok(()),
        }
    }

    /// One termination pass over the node `name` (nothing when it is gone).
    async fn terminate(&self, name: &str) -> Result<(), Error> {
        self.sync().await;
        match self.ctx.cluster.nodes.get(name) {
            Some(n) => termination::reconcile(&self.ctx, &n).await,
            None => Ok(()),
        }
    }

    /// Termination passes 10 s apart until the node is gone; how many it took.
    async fn terminate_until_gone(&self, name: &str) -> usize {
        for pass in 1..=20 {
            self.terminate(name).await.expect("termination pass");
            if self.node(name).is_none() {
                return pass;
            }
            advance(secs(10)).await;
        }
        panic!("node {name} was not let go");
    }

    /// Creates the NodeClaim `name` of the `default` NodePool (`extra` merged in).
    fn create_claim(&self, name: &str, extra: serde_json::Value) {
        let mut object = json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "labels": {NODE_POOL_LABEL: "default", CLASS_LABEL: "default"}},
            "spec": {
                "nodeClassRef": {"group": "karpenter.test.sh", "kind": "TestNodeClass", "name": "default"},
                "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}],
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
            },
        });
        merge(&mut object, &extra);
        let claim: NodeClaim = serde_json::from_value(object).expect("a NodeClaim");
        self.server.create(&claim).expect("created");
    }

    /// A launched claim: finalizer and launch passes.
    async fn launched(&self, name: &str, extra: serde_json::Value) -> NodeClaim {
        self.create_claim(name, extra);
        // The finalizer, the NodeClass label, the launch.
        for _ in 0..3 {
            self.lifecycle(name).await.expect("a lifecycle pass");
        }
        let claim = self.claim(name).expect("the claim");
        assert!(provider_id(&claim).is_some(), "{name} launched");
        claim
    }

    /// Registers the Node of a launched claim as its kubelet would: Ready, with the
    /// instance's labels and capacity and the `karpenter.sh/unregistered` taint (`extra`
    /// merged in). Returns the node's name.
    fn kubelet(&self, claim: &NodeClaim, extra: serde_json::Value) -> String {
        let name = format!("node-{}", claim.name_any());
        let status = claim.status.clone().unwrap_or_default();
        let mut labels = claim.labels().clone();
        labels.insert(HOSTNAME_LABEL.into(), name.clone());
        let mut object = json!({
            "metadata": {"name": name, "labels": labels},
            "spec": {"providerID": status.provider_id, "taints": [{"key": UNREGISTERED_TAINT_KEY, "effect": "NoExecute"}]},
            "status": {
                "capacity": status.capacity, "allocatable": status.allocatable,
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            },
        });
        merge(&mut object, &extra);
        let node: Node = serde_json::from_value(object).expect("a node");
        self.server.create(&node).expect("created");
        name
    }

    /// A claim launched, registered and initialized, and its Node's name.
    async fn running(&self, name: &str, extra: serde_json::Value) -> (NodeClaim, String) {
        let claim = self.launched(name, extra).await;
        let node = self.kubelet(&claim, json!({}));
        self.lifecycle(name).await.expect("registration pass");
        self.lifecycle(name).await.expect("initialization pass");
        let claim = self.claim(name).expect("the claim");
        assert_eq!(status_of(&claim, "Initialized"), Some("True".into()));
        (claim, node)
    }

    /// A running pod bound to `node` (owned by a ReplicaSet unless `extra` says otherwise).
    fn bound_pod(&self, name: &str, node: &str, extra: serde_json::Value) {
        let mut object = json!({
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
                "labels": {"app": name},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid"}]},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "app"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        });
        merge(&mut object, &extra);
        let pod: Pod = serde_json::from_value(object).expect("a pod");
        self.server.create(&pod).expect("created");
    }

    /// Deletes the pod `name` for good (its finalizers removed first), as its kubelet would.
    fn pod_gone(&self, name: &str) {
        let _ =
            self.server
                .merge::<Pod>("default", name, json!({"metadata": {"finalizers": null}}));
        let _ = self.server.delete::<Pod>("default", name);
    }

    fn delete_node(&self, name: &str) {
        self.server.delete::<Node>("", name).expect("deleted");
    }

    fn events(&self, reason: &str) -> Vec<Event> {
        self.server
            .list::<Event>()
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .collect()
    }

    /// A sample of a metric: the first line of `name` whose labels contain all of `labels`.
    fn sample(&self, name: &str, labels: &[&str]) -> Option<f64> {
        self.ctx.metrics.encode().lines().find_map(|line| {
            let rest = line.strip_prefix(name)?;
            if !(rest.starts_with('{') || rest.starts_with(' ')) {
                return None;
            }
            let (series, value) = rest.rsplit_once(' ')?;
            labels
                .iter()
                .all(|l| series.contains(l))
                .then(|| value.parse().ok())?
        })
    }
}

fn merge(object: &mut serde_json::Value, patch: &serde_json::Value) {
    json_patch::merge(object, patch);
}

fn provider_id(claim: &NodeClaim) -> Option<String> {
    claim.status.as_ref()?.provider_id.clone()
}

fn condition(claim: &NodeClaim, type_: &str) -> Option<(String, String, String)> {
    claim
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

fn status_of(claim: &NodeClaim, type_: &str) -> Option<String> {
    condition(claim, type_).map(|c| c.0)
}

fn taints(node: &Node) -> Vec<(String, String)> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|t| (t.key, t.effect))
        .collect()
}

fn has_finalizer(node: &Node) -> bool {
    node.finalizers().iter().any(|f| f == TERMINATION_FINALIZER)
}

fn terminating(pod: &Option<Pod>) -> bool {
    pod.as_ref()
        .is_none_or(|p| p.metadata.deletion_timestamp.is_some())
}

/// Upstream's `ExpectNodeWithNodeClaimDraining`: tainted, still finalized, being deleted.
fn assert_draining(env: &Env, node: &str, case: &str) {
    let n = env
        .node(node)
        .unwrap_or_else(|| panic!("{case}: node gone"));
    assert!(
        taints(&n).contains(&(DISRUPTED_TAINT_KEY.into(), "NoSchedule".into())),
        "{case}: tainted"
    );
    assert!(has_finalizer(&n), "{case}: finalizer kept");
    assert!(n.metadata.deletion_timestamp.is_some(), "{case}: deleting");
}

// ---------------------------------------------------------------------------------------
// node/termination
// ---------------------------------------------------------------------------------------

/// "should delete nodes", "should delete nodeclaims associated with nodes", and the
/// terminated/drained/duration metrics: a deleted Node is tainted and excluded from load
/// balancers, its NodeClaim deleted, the instance terminated, and only then does the Node go;
/// the NodeClaim goes after it.
#[tokio::test(start_paused = true)]
async fn a_deleted_node_is_tainted_drained_and_let_go_with_its_claim() {
    let env = Env::new();
    let (claim, node) = env.running("a", json!({})).await;
    let id = provider_id(&claim).unwrap();
    advance(secs(3600)).await;
    env.delete_node(&node);
    env.terminate(&node).await.unwrap();
    let n = env.node(&node).expect("still there");
    assert!(taints(&n).contains(&(DISRUPTED_TAINT_KEY.into(), "NoSchedule".into())));
    assert_eq!(
        n.labels()
            .get(EXCLUDE_FROM_LOAD_BALANCERS_LABEL)
            .map(String::as_str),
        Some("karpenter"),
        "excluded from load balancers before the drain"
    );
    let c = env.claim("a").expect("the claim waits for its node");
    assert!(
        c.metadata.deletion_timestamp.is_some(),
        "the node's claim is deleted"
    );
    env.terminate(&node).await.unwrap();
    assert_eq!(
        condition(&env.claim("a").unwrap(), "Drained").map(|c| (c.0, c.1)),
        Some(("Unknown".into(), "Draining".into())),
        "the claim says its node is draining"
    );
    env.terminate_until_gone(&node).await;
    assert!(
        env.cloud.fake.deleted().contains(&id),
        "instance terminated"
    );
    let c = env.claim("a").expect("the claim outlives its node");
    for type_ in ["Drained", "VolumesDetached", "InstanceTerminating"] {
        assert_eq!(status_of(&c, type_), Some("True".into()), "{type_}");
    }
    assert_eq!(
        env.sample(
            "karpenter_nodes_terminated_total",
            &["nodepool=\"default\""]
        ),
        Some(1.0)
    );
    assert_eq!(
        env.sample("karpenter_nodes_drained_total", &["nodepool=\"default\""]),
        Some(1.0)
    );
    assert_eq!(
        env.sample(
            "karpenter_nodes_termination_duration_seconds_count",
            &["nodepool=\"default\""]
        ),
        Some(1.0)
    );
    assert_eq!(
        env.sample(
            "karpenter_nodes_lifetime_duration_seconds_count",
            &["nodepool=\"default\""]
        ),
        Some(1.0)
    );
    env.lifecycle("a").await.unwrap();
    assert!(env.claim("a").is_none(), "the claim goes once its node has");
}

/// "should delete nodes without nodeclaims" and "with duplicate nodeclaims".
#[tokio::test(start_paused = true)]
async fn a_node_without_a_claim_or_with_two_is_let_go() {
    // Without: a node no claim launched (its providerID unknown to the cloud).
    let env = Env::new();
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "orphan", "finalizers": [TERMINATION_FINALIZER], "labels": {NODE_POOL_LABEL: "default"}},
        "spec": {"providerID": "fake://nowhere/1"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }))
    .unwrap();
    env.server.create(&node).unwrap();
    env.delete_node("orphan");
    env.terminate_until_gone("orphan").await;
    assert_eq!(
        env.sample("karpenter_nodes_drained_total", &[]),
        None,
        "without a NodeClaim to say so, a node is not counted drained"
    );
    assert_eq!(
        env.sample("karpenter_nodes_terminated_total", &[]),
        Some(1.0)
    );
    // With two claims naming the node's instance.
    let (claim, node) = env.running("a", json!({})).await;
    let mut twin = json!({"metadata": {"finalizers": [TERMINATION_FINALIZER]}});
    twin["status"] = serde_json::to_value(claim.status.clone()).unwrap();
    env.create_claim("a-2", twin.clone());
    env.server
        .merge::<NodeClaim>("", "a-2", json!({"status": twin["status"]}))
        .unwrap();
    env.delete_node(&node);
    env.terminate_until_gone(&node).await;
}

/// "should not race if deleting nodes in parallel": ten nodes deleted at once all go.
#[tokio::test(start_paused = true)]
async fn nodes_deleted_together_all_go() {
    let env = Env::new();
    let mut nodes = Vec::new();
    for i in 0..10 {
        nodes.push(env.running(&format!("c{i}"), json!({})).await.1);
    }
    for n in &nodes {
        env.delete_node(n);
    }
    for _ in 0..6 {
        let passes = nodes.iter().map(|n| env.terminate(n));
        for r in futures::future::join_all(passes).await {
            r.unwrap();
        }
        advance(secs(10)).await;
    }
    for n in &nodes {
        assert!(env.node(n).is_none(), "{n} let go");
    }
}

/// Upstream's termination cases on which pods a drain evicts and waits for, each on a node of
/// its own: a pod tolerating the disrupted taint (Equal, Exists) is not evicted and does not
/// hold the node; one tolerating only `node.kubernetes.io/unschedulable`, one with no owner,
/// and a PDB-guarded one are evicted (the last only once its budget allows); terminal and
/// static pods are not waited for.
#[tokio::test(start_paused = true)]
async fn which_pods_a_drain_evicts_and_waits_for() {
    struct Case {
        name: &'static str,
        pod: serde_json::Value,
        evicted: bool,
    }
    let toleration = |t: serde_json::Value| json!({"spec": {"tolerations": [t]}});
    let cases = [
        Case {
            name: "tolerates the disrupted taint with Equal",
            pod: toleration(
                json!({"key": DISRUPTED_TAINT_KEY, "operator": "Equal", "effect": "NoSchedule"}),
            ),
            evicted: false,
        },
        Case {
            name: "tolerates the disrupted taint with Exists",
            pod: toleration(
                json!({"key": DISRUPTED_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}),
            ),
            evicted: false,
        },
        Case {
            name: "tolerates node.kubernetes.io/unschedulable",
            pod: toleration(
                json!({"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}),
            ),
            evicted: true,
        },
        Case {
            name: "no ownerRef",
            pod: json!({"metadata": {"ownerReferences": null}}),
            evicted: true,
        },
        Case {
            name: "succeeded",
            pod: json!({"status": {"phase": "Succeeded"}}),
            evicted: false,
        },
        Case {
            name: "failed",
            pod: json!({"status": {"phase": "Failed"}}),
            evicted: false,
        },
        Case {
            name: "static (owned by its Node)",
            pod: json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "n"}]}}),
            evicted: false,
        },
    ];
    for (i, case) in cases.iter().enumerate() {
        let env = Env::new();
        let (_, node) = env.running(&format!("c{i}"), json!({})).await;
        env.bound_pod("app", &node, json!({}));
        env.bound_pod("subject", &node, case.pod.clone());
        env.delete_node(&node);
        env.terminate(&node).await.unwrap(); // taint
        env.terminate(&node).await.unwrap(); // evict
        assert_draining(&env, &node, case.name);
        assert!(
            env.pod("app").is_none(),
            "{}: the plain pod is evicted",
            case.name
        );
        assert_eq!(
            env.pod("subject").is_none(),
            case.evicted,
            "{}: evicted",
            case.name
        );
        env.terminate_until_gone(&node).await;
    }
}

/// "should fail to evict pods that violate a PDB", and the terminator's "NodeDrainError event
/// when a PDB is blocking" / "when two PDBs refer to the same pod": refused evictions are
/// answered 429 (500 for two budgets), reported as `FailedDraining` and counted by code; the
/// node waits until the pod goes.
#[tokio::test(start_paused = true)]
async fn a_pod_disruption_budget_holds_the_drain() {
    for (case, budgets, code, said) in [
        ("one blocking PDB", 1, "429", "evicting pod violates a PDB"),
        (
            "two PDBs over the pod",
            2,
            "500",
            "eviction does not support multiple PDBs",
        ),
    ] {
        let env = Env::new();
        let (_, node) = env.running("a", json!({})).await;
        env.bound_pod("guarded", &node, json!({}));
        for b in 0..budgets {
            let pdb: PodDisruptionBudget = serde_json::from_value(json!({
                "metadata": {"name": format!("pdb-{b}"), "namespace": "default"},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
            }))
            .unwrap();
            env.server.create(&pdb).unwrap();
        }
        env.delete_node(&node);
        env.terminate(&node).await.unwrap();
        for _ in 0..3 {
            env.terminate(&node).await.unwrap();
            advance(secs(11)).await;
        }
        assert!(env.pod("guarded").is_some(), "{case}: not evicted");
        assert_draining(&env, &node, case);
        let failed = env.events("FailedDraining");
        assert!(
            failed
                .iter()
                .any(|e| e.message.as_deref().is_some_and(|m| m.contains(said))),
            "{case}: {:?}",
            failed.iter().map(|e| e.message.clone()).collect::<Vec<_>>()
        );
        assert!(env.events("Evicted").is_empty(), "{case}");
        let refused = env
            .sample(
                "karpenter_pods_eviction_requests_total",
                &[&format!("code=\"{code}\"")],
            )
            .unwrap_or(0.0);
        assert!(refused >= 2.0, "{case}: retried, {refused}");
        env.pod_gone("guarded");
        env.terminate_until_gone(&node).await;
    }
}

/// The terminator's "evicted event when there are no PDBs" / "PDBs that allow an eviction" and
/// the `PodsDrainedTotal` cases: an eviction answered 200 gives the pod an `Evicted` event and
/// counts it drained, by its claim's disruption reason ("" for a plain deletion).
#[tokio::test(start_paused = true)]
async fn an_eviction_is_evented_and_counted() {
    let env = Env::new();
    let (_, node) = env.running("a", json!({})).await;
    env.bound_pod("free", &node, json!({}));
    env.bound_pod(
        "budgeted",
        &node,
        json!({"metadata": {"labels": {"app": "b"}}}),
    );
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "allows-one", "namespace": "default"},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "b"}}},
    }))
    .unwrap();
    env.server.create(&pdb).unwrap();
    env.delete_node(&node);
    env.terminate(&node).await.unwrap();
    env.terminate(&node).await.unwrap();
    assert!(env.pod("free").is_none());
    assert!(env.pod("budgeted").is_none(), "the budget allows it");
    assert_eq!(env.events("Evicted").len(), 2);
    assert_eq!(
        env.sample("karpenter_pods_eviction_requests_total", &["code=\"200\""]),
        Some(2.0)
    );
    assert_eq!(
        env.sample("karpenter_pods_drained_total", &["reason=\"\""]),
        None,
        "a claim with no DisruptionReason drains as Forceful Termination"
    );
    assert_eq!(
        env.sample(
            "karpenter_pods_drained_total",
            &["reason=\"Forceful Termination\""]
        ),
        Some(2.0)
    );
}

/// The terminator's "PodsDrainedTotal metric with specific reason": a claim disrupted for a
/// reason labels its pods' drains with it.
#[tokio::test(start_paused = true)]
async fn drained_pods_are_counted_by_the_disruption_reason() {
    let env = Env::new();
    let (_, node) = env.running("a", json!({})).await;
    let mut claim = env.claim("a").unwrap();
    let mut conditions = claim.status.take().unwrap().conditions;
    conditions.push(
        serde_json::from_value(
            json!({"type": "DisruptionReason", "status": "True", "reason": "SpotInterruption",
            "message": "Node is being interrupted", "lastTransitionTime": "2026-01-01T00:00:00Z"}),
        )
        .unwrap(),
    );
    env.server
        .merge::<NodeClaim>("", "a", json!({"status": {"conditions": conditions}}))
        .unwrap();
    env.bound_pod("p", &node, json!({}));
    env.delete_node(&node);
    env.terminate(&node).await.unwrap();
    env.terminate(&node).await.unwrap();
    assert!(env.pod("p").is_none());
    assert_eq!(
        env.sample(
            "karpenter_pods_drained_total",
            &["reason=\"SpotInterruption\""]
        ),
        Some(1.0)
    );
}

/// "should evict pods in order and wait until pods are fully deleted" and "should evict
/// non-critical pods first": non-critical pods, then DaemonSet pods, then critical ones,
/// then critical DaemonSet pods; a group is evicted only once the one before is gone, not
/// merely terminating.
#[tokio::test(start_paused = true)]
async fn a_drain_evicts_tier_by_tier_once_the_last_is_gone() {
    let env = Env::new();
    let (_, node) = env.running("a", json!({})).await;
    let ds = |critical: Option<&str>| {
        json!({
            "metadata": {"finalizers": ["test/hold"],
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "ds-uid", "controller": true}]},
            "spec": {"priorityClassName": critical},
        })
    };
    let plain = |critical: Option<&str>| json!({"metadata": {"finalizers": ["test/hold"]}, "spec": {"priorityClassName": critical}});
    let groups: [&[(&str, serde_json::Value)]; 4] = [
        &[("app", plain(None))],
        &[("daemon", ds(None))],
        &[
            ("node-critical", plain(Some("system-node-critical"))),
            ("cluster-critical", plain(Some("system-cluster-critical"))),
        ],
        &[
            ("ds-node-critical", ds(Some("system-node-critical"))),
            ("ds-cluster-critical", ds(Some("system-cluster-critical"))),
        ],
    ];
    for group in &groups {
        for (name, extra) in group.iter() {
            env.bound_pod(name, &node, extra.clone());
        }
    }
    env.delete_node(&node);
    env.terminate(&node).await.unwrap();
    for (i, group) in groups.iter().enumerate() {
        env.terminate(&node).await.unwrap();
        env.terminate(&node).await.unwrap();
        assert_draining(&env, &node, "in order");
        for (name, _) in group.iter() {
            assert!(terminating(&env.pod(name)), "group {i}: {name} evicted");
        }
        for later in groups.iter().skip(i + 1) {
            for (name, _) in later.iter() {
                assert!(
                    !terminating(&env.pod(name)),
                    "group {i}: {name} waits while the group is still terminating"
                );
            }
        }
        for (name, _) in group.iter() {
            env.pod_gone(name);
        }
    }
    env.terminate_until_gone(&node).await;
}

/// "should not delete nodes until all pods are deleted" and "should bypass pods which are
/// stuck terminating past their grace period": evicted pods still terminating hold the node;
/// one stuck terminating (its kubelet gone) for over a minute does not.
#[tokio::test(start_paused = true)]
async fn terminating_pods_hold_the_node_until_gone_or_stuck() {
    let env = Env::new();
    let (_, node) = env.running("a", json!({})).await;
    let hold = json!({"metadata": {"finalizers": ["test/hold"]}});
    env.bound_pod("p0", &node, hold.clone());
    env.bound_pod("p1", &node, hold);
    env.delete_node(&node);
    env.terminate(&node).await.unwrap();
    env.terminate(&node).await.unwrap();
    assert!(terminating(&env.pod("p0")) && terminating(&env.pod("p1")));
    advance(secs(20)).await;
    env.terminate(&node).await.unwrap();
    assert_draining(&env, &node, "two terminating");
    assert_eq!(
        condition(&env.claim("a").unwrap(), "Drained").map(|c| (c.0, c.1)),
        Some(("Unknown".into(), "Draining".into()))
    );
    env.pod_gone("p1");
    advance(secs(20)).await;
    env.terminate(&node).await.unwrap();
    assert_draining(&env, &node, "one terminating");
    // p0 has been terminating for 40 s; past a minute it no longer counts.
    advance(secs(30)).await;
    env.terminate_until_gone(&node).await;
    assert!(env.pod("p0").is_some(), "the stuck pod is left to its fate");
}

/// "should delete nodes with no underlying instance even if not fully drained" and "should
/// not delete nodes with no underlying instance if the node is still Ready".
#[tokio::test(start_paused = true)]
async fn a_node_whose_instance_is_gone_is_let_go_only_once_not_ready() {
    let env = Env::new();
    let (claim, node) = env.running("a", json!({})).await;
    env.bound_pod(
        "p0",
        &node,
        json!({"metadata": {"finalizers": ["test/hold"]}}),
    );
    env.delete_node(&node);
    env.terminate(&node).await.unwrap();
    env.terminate(&node).await.unwrap();
    env.cloud.fake.vanish(&provider_id(&claim).unwrap());
    for _ in 0..3 {
        env.terminate(&node).await.unwrap();
        advance(secs(10)).await;
    }
    assert_draining(&env, &node, "Ready, instance gone");
    env.server
        .merge::<Node>(
            "",
            &node,
            json!({"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletDown"}]}}),
        )
        .unwrap();
    env.terminate(&node).await.unwrap();
    assert!(
        env.node(&node).is_none(),
        "NotReady and gone: let go at once"
    );
    assert!(env.pod("p0").is_some(), "without waiting for its pod");
}

/// "should not evict a new pod with the same name using the old pod's eviction queue key":
/// a pod re-created under an evicted pod's name (new UID) on a new node is not touched.
#[tokio::test(start_paused = true)]
async fn a_pod_recreated_under_the_same_name_is_not_evicted() {
    let env = Env::new();
    let (_, node) = env.running("a", json!({})).await;
    env.bound_pod("test-pod", &node, json!({}));
    env.delete_node(&node);
    env.terminate(&node).await.unwrap();
    env.pod_gone("test-pod");
    env.terminate_until_gone(&node).await;
    let (_, other) = env.running("b", json!({})).await;
    env.bound_pod(
        "test-pod",
        &other,
        json!({"metadata": {"uid": "uid-test-pod-2"}}),
    );
    for _ in 0..3 {
        env.terminate(&node).await.unwrap();
        advance(secs(1)).await;
    }
    let pod = env.pod("test-pod").expect("the new pod");
    assert!(pod.metadata.deletion_timestamp.is_none());
}

/// "should preemptively delete pods to satisfy their terminationGracePeriodSeconds", "should
/// only delete pods when their terminationGracePeriodSeconds is less than the node's remaining
/// terminationGracePeriod", "should not gate past-deadline pods behind graceful eviction of
/// earlier tiers" and "should update deletion timestamp for terminating pods": with a
/// 300 s terminationGracePeriod, a pod is deleted (not evicted: do-not-disrupt and PDBs do not
/// hold it) once its own grace period no longer fits before the node's deadline, granted what
/// is left, whatever its tier.
#[tokio::test(start_paused = true)]
async fn pods_are_deleted_in_time_for_the_termination_deadline() {
    struct Case {
        name: &'static str,
        pod_grace: i64,
        critical: bool,
        after: u64,
        deleted: bool,
    }
    let cases = [
        Case {
            name: "grace 300 s of 300 s left: deleted now",
            pod_grace: 300,
            critical: false,
            after: 0,
            deleted: true,
        },
        Case {
            name: "grace 60 s, 210 s left: waits",
            pod_grace: 60,
            critical: false,
            after: 90,
            deleted: false,
        },
        Case {
            name: "grace 60 s, 35 s left: deleted",
            pod_grace: 60,
            critical: false,
            after: 265,
            deleted: true,
        },
        Case {
            name: "critical with grace 600 s, behind an evictable tier",
            pod_grace: 600,
            critical: true,
            after: 10,
            deleted: true,
        },
    ];
    for case in cases {
        let env = Env::new();
        let (_, node) = env
            .running("a", json!({"spec": {"terminationGracePeriod": "300s"}}))
            .await;
        // A plain pod of the first tier the node's budget keeps.
        env.bound_pod(
            "plain",
            &node,
            json!({"metadata": {"labels": {"app": "guarded"}}}),
        );
        let pdb: PodDisruptionBudget = serde_json::from_value(json!({
            "metadata": {"name": "blocks", "namespace": "default"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "guarded"}}},
        }))
        .unwrap();
        env.server.create(&pdb).unwrap();
        env.bound_pod(
            "subject",
            &node,
            json!({
                "metadata": {"annotations": {"karpenter.sh/do-not-disrupt": if case.critical { "false" } else { "true" }},
                    "finalizers": ["test/hold"]},
                "spec": {"terminationGracePeriodSeconds": case.pod_grace,
                    "priorityClassName": if case.critical { Some("system-node-critical") } else { None }},
            }),
        );
        env.lifecycle("a").await.unwrap();
        env.server.delete::<NodeClaim>("", "a").unwrap();
        env.lifecycle("a").await.unwrap(); // the deadline annotated
        env.lifecycle("a").await.unwrap(); // the node deleted
        env.terminate(&node).await.unwrap(); // taint
        advance(secs(case.after)).await;
        env.terminate(&node).await.unwrap();
        assert!(
            env.pod("plain").is_some(),
            "{}: the budget holds",
            case.name
        );
        assert_eq!(
            terminating(&env.pod("subject")),
            case.deleted,
            "{}",
            case.name
        );
        let disrupted = env.events("Disrupted");
        if case.deleted {
            let left = 300 - case.after;
            let granted = format!(
                "granted {left} seconds of grace-period of its {}",
                case.pod_grace
            );
            assert!(
                disrupted
                    .iter()
                    .any(|e| e.message.as_deref().is_some_and(|m| m.contains(&granted))),
                "{}: {:?}",
                case.name,
                disrupted
                    .iter()
                    .map(|e| e.message.clone())
                    .collect::<Vec<_>>()
            );
        } else {
            assert!(disrupted.is_empty(), "{}", case.name);
        }
    }
}

/// "should update deletion timestamp for terminating pods when it is after node deletion
/// timestamp": a pod already terminating with 6000 s of grace is deleted again with what is
/// left of the node's 300 s (210 s after 90 s).
#[tokio::test(start_paused = true)]
async fn a_terminating_pod_is_hurried_to_the_deadline() {
    let env = Env::new();
    let (_, node) = env
        .running("a", json!({"spec": {"terminationGracePeriod": "300s"}}))
        .await;
    env.bound_pod(
        "slow",
        &node,
        json!({"metadata": {"finalizers": ["test/hold"], "annotations": {"karpenter.sh/do-not-disrupt": "true"}},
            "spec": {"terminationGracePeriodSeconds": 6000}}),
    );
    env.server.delete::<NodeClaim>("", "a").unwrap();
    env.lifecycle("a").await.unwrap();
    env.lifecycle("a").await.unwrap();
    env.terminate(&node).await.unwrap();
    // Deleted by someone else with its own 6000 s (the test kit's API server stamps the
    // deletion as it happens, not at its end, so it is deleted late to stay fresh).
    advance(secs(80)).await;
    env.server.delete::<Pod>("default", "slow").unwrap();
    advance(secs(10)).await;
    env.terminate(&node).await.unwrap();
    let disrupted = env.events("Disrupted");
    assert!(
        disrupted.iter().any(|e| e
            .message
            .as_deref()
            .is_some_and(|m| m.contains("granted 210 seconds of grace-period of its 6000"))),
        "{:?}",
        disrupted
            .iter()
            .map(|e| e.message.clone())
            .collect::<Vec<_>>()
    );
}

/// The terminator's "should clamp gracePeriodSeconds to >= 1 when nodeTerminationTime is in
/// the past": past the deadline, a pod is deleted with one second of grace, not force-deleted.
#[tokio::test(start_paused = true)]
async fn past_the_deadline_pods_get_one_second() {
    let env = Env::new();
    let (_, node) = env
        .running("a", json!({"spec": {"terminationGracePeriod": "60s"}}))
        .await;
    env.bound_pod(
        "p",
        &node,
        json!({"metadata": {"finalizers": ["test/hold"], "annotations": {"karpenter.sh/do-not-disrupt": "true"}},
            "spec": {"terminationGracePeriodSeconds": 120}}),
    );
    env.server.delete::<NodeClaim>("", "a").unwrap();
    env.lifecycle("a").await.unwrap();
    env.lifecycle("a").await.unwrap();
    env.terminate(&node).await.unwrap();
    advance(secs(3600)).await;
    env.terminate(&node).await.unwrap();
    assert!(terminating(&env.pod("p")));
    let disrupted = env.events("Disrupted");
    assert!(
        disrupted.iter().any(|e| e
            .message
            .as_deref()
            .is_some_and(|m| m.contains("granted 1 seconds of grace-period"))),
        "{:?}",
        disrupted
            .iter()
            .map(|e| e.message.clone())
            .collect::<Vec<_>>()
    );
}

/// "should not finish draining until minDrainTime has passed" (upstream's 5 s... ours too).
#[tokio::test(start_paused = true)]
async fn an_empty_node_is_held_for_the_minimum_drain_time() {
    let env = Env::new();
    let (claim, node) = env.running("a", json!({})).await;
    env.delete_node(&node);
    env.terminate(&node).await.unwrap();
    env.terminate(&node).await.unwrap();
    advance(secs(3)).await;
    env.terminate(&node).await.unwrap();
    assert!(
        env.cloud.fake.deleted().is_empty(),
        "3 s empty: not yet terminated"
    );
    assert_draining(&env, &node, "min drain time");
    assert_eq!(
        status_of(&env.claim("a").unwrap(), "Drained"),
        Some("Unknown".into())
    );
    advance(secs(5)).await;
    env.terminate(&node).await.unwrap();
    assert_eq!(env.cloud.fake.deleted(), [provider_id(&claim).unwrap()]);
    let c = env.claim("a").unwrap();
    assert_eq!(status_of(&c, "Drained"), Some("True".into()));
    assert_eq!(status_of(&c, "InstanceTerminating"), Some("True".into()));
    env.terminate(&node).await.unwrap();
    assert!(env.node(&node).is_none());
}

fn attachment(name: &str, node: &str, pv: &str) -> VolumeAttachment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"attacher": "csi.example.com", "nodeName": node, "source": {"persistentVolumeName": pv}},
    }))
    .unwrap()
}

/// The VolumeAttachments cases: the instance is not terminated while a volume is attached
/// (`AwaitingVolumeDetachment`), except one of a pod that stays (it tolerates the disrupted
/// taint), and not past the terminationGracePeriod.
#[tokio::test(start_paused = true)]
async fn termination_waits_for_volumes_to_detach() {
    // Waits, then goes once the attachment does.
    let env = Env::new();
    let (_, node) = env.running("a", json!({})).await;
    env.server.create(&attachment("va", &node, "foo")).unwrap();
    env.delete_node(&node);
    for _ in 0..4 {
        env.terminate(&node).await.unwrap();
        advance(secs(10)).await;
    }
    assert!(env.cloud.fake.deleted().is_empty(), "waits for the volume");
    assert!(!env.events("AwaitingVolumeDetachment").is_empty());
    assert_eq!(
        condition(&env.claim("a").unwrap(), "VolumesDetached").map(|c| (c.0, c.1)),
        Some(("Unknown".into(), "AwaitingVolumeDetachment".into()))
    );
    env.server.delete::<VolumeAttachment>("", "va").unwrap();
    env.terminate_until_gone(&node).await;
    assert_eq!(
        status_of(&env.claim("a").unwrap(), "VolumesDetached"),
        Some("True".into())
    );

    // Only the volumes of pods the drain waits for.
    let env = Env::new();
    let (_, node) = env.running("b", json!({})).await;
    env.server
        .create(&attachment("va-drainable", &node, "foo"))
        .unwrap();
    env.server
        .create(&attachment("va-staying", &node, "bar"))
        .unwrap();
    let pvc: k8s_openapi::api::core::v1::PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "data", "namespace": "default"},
        "spec": {"volumeName": "bar", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }))
    .unwrap();
    env.server.create(&pvc).unwrap();
    env.bound_pod(
        "agent",
        &node,
        json!({"spec": {"tolerations": [{"key": DISRUPTED_TAINT_KEY, "operator": "Exists"}],
            "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]}}),
    );
    env.delete_node(&node);
    for _ in 0..4 {
        env.terminate(&node).await.unwrap();
        advance(secs(10)).await;
    }
    assert!(
        env.cloud.fake.deleted().is_empty(),
        "waits for va-drainable"
    );
    assert_eq!(
        status_of(&env.claim("b").unwrap(), "VolumesDetached"),
        Some("Unknown".into())
    );
    env.server
        .delete::<VolumeAttachment>("", "va-drainable")
        .unwrap();
    env.terminate_until_gone(&node).await;

    // Not past the terminationGracePeriod.
    let env = Env::new();
    let (_, node) = env
        .running("c", json!({"spec": {"terminationGracePeriod": "60s"}}))
        .await;
    env.server.create(&attachment("va", &node, "foo")).unwrap();
    env.server.delete::<NodeClaim>("", "c").unwrap();
    env.lifecycle("c").await.unwrap();
    env.lifecycle("c").await.unwrap();
    for _ in 0..3 {
        env.terminate(&node).await.unwrap();
        advance(secs(10)).await;
    }
    assert!(
        env.cloud.fake.deleted().is_empty(),
        "within the grace period"
    );
    advance(secs(300)).await;
    env.terminate_until_gone(&node).await;
    assert!(
        env.server.get::<VolumeAttachment>("", "va").is_some(),
        "let go with the volume still attached"
    );
    assert_eq!(
        condition(&env.claim("c").unwrap(), "VolumesDetached").map(|c| (c.0, c.1)),
        Some(("False".into(), "TerminationGracePeriodElapsed".into()))
    );
}

// ---------------------------------------------------------------------------------------
// nodeclaim/lifecycle
// ---------------------------------------------------------------------------------------

/// "should add the finalizer if it doesn't exist", "should launch an instance when a new
/// NodeClaim is created", "should add the Launched status condition after creating the
/// NodeClaim": the finalizer comes first, then one launch, whose instance's labels and
/// capacity join the claim, `Launched=True` and `Registered=Unknown`.
#[tokio::test(start_paused = true)]
async fn a_new_claim_gets_its_finalizer_then_its_instance() {
    let env = Env::new();
    env.create_claim("a", json!({}));
    env.lifecycle("a").await.unwrap();
    let claim = env.claim("a").unwrap();
    assert!(
        claim
            .finalizers()
            .iter()
            .any(|f| f == TERMINATION_FINALIZER)
    );
    assert!(
        env.cloud.fake.created().is_empty(),
        "no launch before the finalizer"
    );
    env.lifecycle("a").await.unwrap();
    let claim = env.claim("a").unwrap();
    assert_eq!(env.cloud.fake.created().len(), 1);
    assert_eq!(
        provider_id(&claim),
        env.cloud.fake.created().first().cloned()
    );
    assert_eq!(status_of(&claim, "Launched"), Some("True".into()));
    assert_eq!(
        condition(&claim, "Registered").map(|c| (c.0, c.1)),
        Some(("Unknown".into(), "NodeNotFound".into()))
    );
    assert!(
        claim
            .labels()
            .contains_key("node.kubernetes.io/instance-type")
    );
    assert!(!claim.status.as_ref().unwrap().capacity.is_empty());
    env.lifecycle("a").await.unwrap();
    assert_eq!(env.cloud.fake.created().len(), 1, "launched once");
}

/// "should delete the nodeclaim if InsufficientCapacity is returned from the cloudprovider",
/// "... if NodeClassNotReady is returned", and "should set nodeClaim status condition from the
/// condition message received if error returned is CreateError".
#[tokio::test(start_paused = true)]
async fn launch_failures_delete_the_claim_or_name_their_reason() {
    for (case, error, deleted) in [
        (
            "insufficient capacity",
            CloudProviderError::insufficient_capacity("no room"),
            true,
        ),
        (
            "node class not ready",
            CloudProviderError::node_class_not_ready("not ready"),
            true,
        ),
        (
            "a create error",
            CloudProviderError::create("LaunchTemplateMissing", "create error message"),
            false,
        ),
    ] {
        let env = Env::new();
        env.create_claim("a", json!({}));
        env.lifecycle("a").await.unwrap();
        env.cloud.fake.fail_next_create(error);
        let result = env.lifecycle("a").await;
        let claim = env.claim("a").expect("held by its finalizer");
        assert_eq!(
            claim.metadata.deletion_timestamp.is_some(),
            deleted,
            "{case}"
        );
        if !deleted {
            assert!(result.is_err(), "{case}: retried");
            assert_eq!(
                condition(&claim, "Launched"),
                Some((
                    "Unknown".into(),
                    "LaunchTemplateMissing".into(),
                    "create error message".into()
                )),
                "{case}"
            );
        } else {
            env.lifecycle("a").await.unwrap();
            assert!(env.claim("a").is_none(), "{case}: gone");
        }
    }
}

/// "should match the nodeClaim to the Node when the Node comes online", the owner reference,
/// label, annotation and `karpenter.sh/registered` label sync, and the
/// `karpenter.sh/unregistered` taint removal.
#[tokio::test(start_paused = true)]
async fn registration_takes_the_node_in() {
    let env = Env::new();
    let claim = env
        .launched(
            "a",
            json!({"metadata": {"labels": {"team": "a"}, "annotations": {"example.com/note": "x"}}}),
        )
        .await;
    let node = env.kubelet(&claim, json!({}));
    env.lifecycle("a").await.unwrap();
    let claim = env.claim("a").unwrap();
    assert_eq!(status_of(&claim, "Registered"), Some("True".into()));
    assert_eq!(
        claim.status.as_ref().unwrap().node_name.as_deref(),
        Some(node.as_str())
    );
    let n = env.node(&node).unwrap();
    assert_eq!(n.labels().get("team").map(String::as_str), Some("a"));
    assert_eq!(
        n.labels().get(NODE_REGISTERED_LABEL).map(String::as_str),
        Some("true")
    );
    assert_eq!(
        n.annotations().get("example.com/note").map(String::as_str),
        Some("x")
    );
    assert!(has_finalizer(&n));
    assert!(!taints(&n).iter().any(|t| t.0 == UNREGISTERED_TAINT_KEY));
    let owners = n.owner_references();
    assert_eq!(owners.len(), 1);
    assert_eq!(
        (owners[0].kind.as_str(), owners[0].name.as_str()),
        ("NodeClaim", "a")
    );
    assert!(env.events("UnregisteredTaintMissing").is_empty());
    // A second pass adds no second owner.
    env.lifecycle("a").await.unwrap();
    assert_eq!(env.node(&node).unwrap().owner_references().len(), 1);
}

/// "should succeed registration if the karpenter.sh/unregistered taint is not present and
/// emit an event".
#[tokio::test(start_paused = true)]
async fn a_node_without_the_unregistered_taint_registers_with_an_event() {
    let env = Env::new();
    let claim = env.launched("a", json!({})).await;
    env.kubelet(&claim, json!({"spec": {"taints": null}}));
    env.lifecycle("a").await.unwrap();
    let claim = env.claim("a").unwrap();
    assert_eq!(status_of(&claim, "Registered"), Some("True".into()));
    assert_eq!(env.events("UnregisteredTaintMissing").len(), 1);
}

/// The taint and startup-taint sync cases, with and without the node's
/// `karpenter.sh/do-not-sync-taints` label, and "should not re-sync the startupTaints to the
/// Node when the startupTaints are removed".
#[tokio::test(start_paused = true)]
async fn registration_syncs_taints_unless_the_node_says_not_to() {
    for (case, label, synced) in [
        ("no do-not-sync-taints label", None, true),
        ("do-not-sync-taints is not true", Some("false"), true),
        ("do-not-sync-taints is true", Some("true"), false),
    ] {
        let env = Env::new();
        let claim = env
            .launched(
                "a",
                json!({"spec": {
                    "taints": [{"key": "example.com/taint", "value": "v", "effect": "NoSchedule"}],
                    "startupTaints": [{"key": "example.com/startup", "effect": "NoSchedule"}],
                }}),
            )
            .await;
        let labels = match label {
            Some(v) => json!({NODE_DO_NOT_SYNC_TAINTS_LABEL: v}),
            None => json!({}),
        };
        let node = env.kubelet(&claim, json!({"metadata": {"labels": labels}}));
        env.lifecycle("a").await.unwrap();
        let t = taints(&env.node(&node).unwrap());
        for key in ["example.com/taint", "example.com/startup"] {
            assert_eq!(
                t.contains(&(key.into(), "NoSchedule".into())),
                synced,
                "{case}: {key}"
            );
        }
        if synced {
            // The startup taint's owner removes it; registration does not put it back.
            env.server
                .merge::<Node>(
                    "",
                    &node,
                    json!({"spec": {"taints": [{"key": "example.com/taint", "value": "v", "effect": "NoSchedule"}]}}),
                )
                .unwrap();
            for _ in 0..2 {
                env.lifecycle("a").await.unwrap();
            }
            let t = taints(&env.node(&node).unwrap());
            assert!(
                !t.iter().any(|t| t.0 == "example.com/startup"),
                "{case}: not re-synced"
            );
            assert_eq!(
                status_of(&env.claim("a").unwrap(), "Initialized"),
                Some("True".into()),
                "{case}"
            );
        }
    }
}

/// Upstream's lifecycle suite, DRA initialization gate (a), (b), (b2), (c): a NodeClaim given
/// devices initializes once every requested driver published a complete pool on its node.
#[tokio::test]
async fn initialization_waits_for_requested_drivers_to_publish() {
    let slice = |node: &str,
                 name: &str,
                 driver: &str,
                 generation: i64,
                 count: i64|
     -> karpenter_api::dra::ResourceSlice {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"driver": driver, "nodeName": node,
                "pool": {"name": format!("{driver}/{node}"), "generation": generation, "resourceSliceCount": count}}
        }))
        .unwrap()
    };
    let env = Env::with_options(
        json!({}),
        Options {
            ignore_dra_requests: false,
            ..Options::default()
        },
    );
    let requested = json!({"metadata": {"annotations": {
        "karpenter.sh/requested-dra-drivers": "gpu.example.com,nic.example.com"}}});
    let claim = env.launched("a", requested).await;
    let node = env.kubelet(&claim, json!({}));
    env.lifecycle("a").await.unwrap(); // registers
    let waiting = |why: &str| {
        let c = env.claim("a").unwrap();
        assert_eq!(
            condition(&c, "Initialized").map(|c| (c.0, c.1)),
            Some(("Unknown".into(), "DRADriverPoolsNotPublished".into())),
            "{why}"
        );
    };
    env.lifecycle("a").await.unwrap();
    waiting("(a) nothing published");
    // (b2) a complete older generation does not stand for a newer one missing a slice.
    env.server
        .create(&slice(&node, "gpu-old", "gpu.example.com", 1, 1))
        .unwrap();
    env.server
        .create(&slice(&node, "gpu-new", "gpu.example.com", 2, 2))
        .unwrap();
    env.server
        .create(&slice(&node, "nic", "nic.example.com", 1, 1))
        .unwrap();
    env.lifecycle("a").await.unwrap();
    waiting("(b) (b2) the GPU pool is incomplete");
    env.server
        .create(&slice(&node, "gpu-new-2", "gpu.example.com", 2, 2))
        .unwrap();
    env.lifecycle("a").await.unwrap();
    let c = env.claim("a").unwrap();
    assert_eq!(
        status_of(&c, "Initialized"),
        Some("True".into()),
        "(c) every driver published: {:?}",
        condition(&c, "Initialized")
    );
    assert!(
        env.node(&node)
            .unwrap()
            .labels()
            .contains_key(NODE_INITIALIZED_LABEL)
    );
}

/// The initialization suite: a registered node is initialized (`Initialized=True`, the
/// `karpenter.sh/initialized` label) only once it is Ready, its requested extended resources
/// are registered, and its startup and known ephemeral taints (`readiness.k8s.io/` ones
/// included) are gone.
#[tokio::test(start_paused = true)]
async fn initialization_waits_for_ready_resources_and_taints() {
    struct Case {
        name: &'static str,
        claim: serde_json::Value,
        blocking: serde_json::Value,
        reason: &'static str,
        cleared: serde_json::Value,
    }
    let ready = json!([{"type": "Ready", "status": "True"}]);
    let cases = [
        Case {
            name: "NotReady",
            claim: json!({}),
            blocking: json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
            reason: "NodeNotReady",
            cleared: json!({"status": {"conditions": ready}}),
        },
        Case {
            name: "a requested resource not registered",
            claim: json!({"spec": {"resources": {"requests": {"cpu": "1", "fake.com/vendor-a": "1"}}}}),
            blocking: json!({"status": {"allocatable": {"fake.com/vendor-a": null}}}),
            reason: "ResourceNotRegistered",
            cleared: json!({"status": {"allocatable": {"fake.com/vendor-a": "2"}}}),
        },
        Case {
            name: "a startup taint",
            claim: json!({"spec": {"startupTaints": [{"key": "example.com/startup", "effect": "NoSchedule"}]}}),
            blocking: json!({}),
            reason: "StartupTaintsExist",
            cleared: json!({"spec": {"taints": []}}),
        },
        Case {
            name: "a known ephemeral taint",
            claim: json!({}),
            blocking: json!({"spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]}}),
            reason: "KnownEphemeralTaintsExist",
            cleared: json!({"spec": {"taints": []}}),
        },
        Case {
            name: "a readiness.k8s.io taint",
            claim: json!({}),
            blocking: json!({"spec": {"taints": [{"key": "readiness.k8s.io/network", "effect": "NoSchedule"}]}}),
            reason: "KnownEphemeralTaintsExist",
            cleared: json!({"spec": {"taints": []}}),
        },
    ];
    for case in cases {
        let env = Env::new();
        let claim = env.launched("a", case.claim.clone()).await;
        // Before registration there is nothing to initialize.
        env.lifecycle("a").await.unwrap();
        assert_ne!(
            status_of(&env.claim("a").unwrap(), "Initialized"),
            Some("True".into()),
            "{}: not registered",
            case.name
        );
        let node = env.kubelet(&claim, json!({}));
        env.lifecycle("a").await.unwrap(); // registers
        env.server
            .merge::<Node>("", &node, case.blocking.clone())
            .unwrap();
        env.lifecycle("a").await.unwrap();
        let c = env.claim("a").unwrap();
        assert_eq!(
            condition(&c, "Initialized").map(|c| (c.0, c.1)),
            Some(("Unknown".into(), case.reason.into())),
            "{}",
            case.name
        );
        assert!(
            !env.node(&node)
                .unwrap()
                .labels()
                .contains_key(NODE_INITIALIZED_LABEL),
            "{}",
            case.name
        );
        env.server
            .merge::<Node>("", &node, case.cleared.clone())
            .unwrap();
        env.lifecycle("a").await.unwrap();
        let c = env.claim("a").unwrap();
        assert_eq!(
            status_of(&c, "Initialized"),
            Some("True".into()),
            "{}: initialized once cleared",
            case.name
        );
        assert_eq!(status_of(&c, "Ready"), Some("True".into()), "{}", case.name);
        assert_eq!(
            env.node(&node)
                .unwrap()
                .labels()
                .get(NODE_INITIALIZED_LABEL)
                .map(String::as_str),
            Some("true"),
            "{}",
            case.name
        );
    }
}

/// The liveness suite: a claim that has not launched 5 minutes after it first tried, or whose
/// Node has not registered 15 minutes after launch, is deleted; not before, and not once
/// registered; timed from its conditions, not its creation.
#[tokio::test(start_paused = true)]
async fn claims_that_do_not_launch_or_register_in_time_are_deleted() {
    // Launch: failing launches for 4 minutes are retried, at 6 the claim goes.
    let env = Env::new();
    env.create_claim("a", json!({}));
    env.lifecycle("a").await.unwrap();
    env.cloud
        .fake
        .fail_next_create(CloudProviderError::create("Failed", "boom"));
    assert!(env.lifecycle("a").await.is_err());
    advance(secs(60)).await;
    env.cloud
        .fake
        .fail_next_create(CloudProviderError::create("Failed", "boom"));
    assert!(env.lifecycle("a").await.is_err());
    assert!(
        env.claim("a")
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none()
    );
    advance(secs(5 * 60)).await;
    let _ = env.lifecycle("a").await;
    assert!(
        env.claim("a")
            .is_none_or(|c| c.metadata.deletion_timestamp.is_some()),
        "deleted past the launch timeout"
    );

    // Registration: 14 minutes stay, 16 go; a registered one stays.
    let env = Env::new();
    env.launched("late", json!({})).await;
    let on_time = env.launched("on-time", json!({})).await;
    env.kubelet(&on_time, json!({}));
    env.lifecycle("on-time").await.unwrap();
    advance(secs(14 * 60)).await;
    env.lifecycle("late").await.unwrap();
    assert!(
        env.claim("late")
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none()
    );
    advance(secs(2 * 60)).await;
    env.lifecycle("late").await.unwrap();
    env.lifecycle("on-time").await.unwrap();
    assert!(
        env.claim("late")
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    assert!(
        env.claim("on-time")
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none()
    );
    assert_eq!(
        env.sample(
            "karpenter_nodeclaims_disrupted_total",
            &["reason=\"registration_timeout\""]
        ),
        Some(1.0)
    );
}

/// "should use the status condition transition time for launch timeout, not the creation
/// timestamp" and the same for the registration timeout: conditions that transitioned 10
/// minutes after creation hold the claim 12 (and 16) minutes after creation.
#[tokio::test(start_paused = true)]
async fn timeouts_count_from_the_conditions_not_the_creation() {
    let later = |claim: &NodeClaim| {
        let mut conditions = claim.status.clone().unwrap_or_default().conditions;
        for c in &mut conditions {
            c.last_transition_time.0 += Duration::from_secs(600);
        }
        json!({"status": {"conditions": conditions}})
    };
    // Launch.
    let env = Env::new();
    env.create_claim("a", json!({}));
    env.lifecycle("a").await.unwrap();
    env.cloud
        .fake
        .fail_next_create(CloudProviderError::create("Failed", "boom"));
    assert!(env.lifecycle("a").await.is_err());
    let patch = later(&env.claim("a").unwrap());
    env.server.merge::<NodeClaim>("", "a", patch).unwrap();
    advance(secs(12 * 60)).await;
    env.cloud
        .fake
        .fail_next_create(CloudProviderError::create("Failed", "boom"));
    let _ = env.lifecycle("a").await;
    assert!(
        env.claim("a")
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none(),
        "launch timeout from the Launched condition"
    );
    // Registration.
    let env = Env::new();
    let claim = env.launched("b", json!({})).await;
    env.server
        .merge::<NodeClaim>("", "b", later(&claim))
        .unwrap();
    advance(secs(16 * 60)).await;
    env.lifecycle("b").await.unwrap();
    assert!(
        env.claim("b")
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none(),
        "registration timeout from the conditions"
    );
}

/// The lifecycle termination suite: a deleted claim deletes its Node first (every Node of its
/// instance), waits for them to go, then terminates the instance (`InstanceTerminating=True`,
/// the root condition left as it was), waits for it to be gone, and only then lets go; a
/// failed termination is retried.
#[tokio::test(start_paused = true)]
async fn a_deleted_claim_goes_after_its_nodes_and_its_instance() {
    let env = Env::new();
    let (claim, node) = env.running("a", json!({})).await;
    let id = provider_id(&claim).unwrap();
    let twin: Node = {
        let mut n = env.node(&node).unwrap();
        n.metadata = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some("twin".into()),
            labels: n.metadata.labels.clone(),
            finalizers: Some(vec![TERMINATION_FINALIZER.into()]),
            ..Default::default()
        };
        n
    };
    env.server.create(&twin).unwrap();
    env.server.delete::<NodeClaim>("", "a").unwrap();
    env.lifecycle("a").await.unwrap();
    assert!(
        env.node(&node)
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    assert!(env.cloud.fake.deleted().is_empty(), "nodes first");
    // The termination controller lets both nodes go.
    env.terminate_until_gone(&node).await;
    env.lifecycle("a").await.unwrap();
    assert!(
        env.node("twin")
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some(),
        "every node of the instance"
    );
    assert!(env.claim("a").is_some(), "not before all nodes are gone");
    env.terminate_until_gone("twin").await;
    // The instance is already terminated by the node's termination; its claim follows.
    assert!(env.cloud.fake.deleted().contains(&id));
    env.lifecycle("a").await.unwrap();
    assert!(env.claim("a").is_none());
    assert_eq!(
        env.sample(
            "karpenter_nodeclaims_termination_duration_seconds_count",
            &["nodepool=\"default\""]
        ),
        Some(1.0)
    );
}

/// "should requeue reconciliation if cloudProvider Delete returns an error other than
/// NodeClaimNotFoundError", "should not remove the finalizer and terminate the NodeClaim if
/// the cloudProvider instance is still around", and "shouldn't mark the root condition of the
/// NodeClaim as unknown when setting the Termination condition".
#[tokio::test(start_paused = true)]
async fn a_claim_keeps_its_finalizer_while_its_instance_is_around() {
    let env = Env::new();
    let (claim, node) = env.running("a", json!({})).await;
    let id = provider_id(&claim).unwrap();
    env.server.delete::<NodeClaim>("", "a").unwrap();
    env.lifecycle("a").await.unwrap();
    // The node's finalizer removed by hand, as upstream's case does: the instance is still
    // around when the claim goes on to terminate it.
    env.server
        .merge::<Node>("", &node, json!({"metadata": {"finalizers": null}}))
        .unwrap();
    env.cloud
        .delete_errors
        .lock()
        .unwrap()
        .push_back(CloudProviderError::other(std::io::Error::other("api down")));
    assert!(env.lifecycle("a").await.is_err(), "retried");
    assert!(env.claim("a").is_some());
    env.lifecycle("a").await.unwrap();
    let c = env.claim("a").expect("waits for the instance to be gone");
    assert_eq!(status_of(&c, "InstanceTerminating"), Some("True".into()));
    assert_ne!(
        status_of(&c, "Ready"),
        Some("Unknown".into()),
        "the root condition is not made Unknown by termination"
    );
    assert!(env.cloud.fake.deleted().contains(&id));
    env.lifecycle("a").await.unwrap();
    assert!(env.claim("a").is_none(), "gone once the instance is");
    assert_eq!(
        env.sample(
            "karpenter_nodeclaims_instance_termination_duration_seconds_count",
            &["nodepool=\"default\""]
        ),
        Some(1.0)
    );
}

/// "should not call Delete() on the CloudProvider if the NodeClaim hasn't been launched yet"
/// and "should not delete nodes without provider ids if the NodeClaim hasn't been launched".
#[tokio::test(start_paused = true)]
async fn an_unlaunched_claim_goes_without_asking_the_cloud() {
    let env = Env::new();
    env.create_claim("a", json!({}));
    env.lifecycle("a").await.unwrap();
    let stray: Node =
        serde_json::from_value(json!({"metadata": {"name": "no-provider-id"}})).unwrap();
    env.server.create(&stray).unwrap();
    env.server.delete::<NodeClaim>("", "a").unwrap();
    env.lifecycle("a").await.unwrap();
    assert!(env.claim("a").is_none());
    assert_eq!(*env.cloud.deletes.lock().unwrap(), 0);
    assert!(
        env.node("no-provider-id")
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none()
    );
}

/// "should not annotate the node if the NodeClaim has no terminationGracePeriod", "should
/// annotate ... if the NodeClaim has a terminationGracePeriod", and "should not change the
/// annotation if ... the annotation already exists".
#[tokio::test(start_paused = true)]
async fn a_deleted_claim_is_stamped_with_its_termination_deadline() {
    for (case, tgp, existing) in [
        ("no terminationGracePeriod", None, None),
        ("a terminationGracePeriod", Some("300s"), None),
        (
            "already stamped",
            Some("300s"),
            Some("2030-01-01T00:00:00Z"),
        ),
    ] {
        let env = Env::new();
        let mut extra = json!({});
        if let Some(t) = tgp {
            extra["spec"] = json!({"terminationGracePeriod": t});
        }
        if let Some(at) = existing {
            extra["metadata"] =
                json!({"annotations": {NODE_CLAIM_TERMINATION_TIMESTAMP_ANNOTATION: at}});
        }
        env.running("a", extra).await;
        advance(secs(100)).await;
        env.server.delete::<NodeClaim>("", "a").unwrap();
        env.lifecycle("a").await.unwrap();
        let c = env.claim("a").unwrap();
        let stamp = c
            .annotations()
            .get(NODE_CLAIM_TERMINATION_TIMESTAMP_ANNOTATION)
            .cloned();
        let deleted = c.metadata.deletion_timestamp.clone().unwrap().0;
        let expected = match (tgp, existing) {
            (None, _) => None,
            (Some(_), Some(at)) => Some(at.to_string()),
            (Some(_), None) => Some((deleted + Duration::from_secs(300)).to_string()),
        };
        assert_eq!(stamp, expected, "{case}");
    }
}

/// "should not delete Nodes if the NodeClaim is not registered", where we differ: a claim
/// deleted before registering takes the Node that appeared for it (no finalizer yet, so it
/// goes at once) before its instance is terminated, rather than leaving it behind.
#[tokio::test(start_paused = true)]
async fn an_unregistered_claim_deletes_its_node_and_instance() {
    let env = Env::new();
    let claim = env.launched("a", json!({})).await;
    let node = env.kubelet(&claim, json!({}));
    env.server.delete::<NodeClaim>("", "a").unwrap();
    for _ in 0..3 {
        env.lifecycle("a").await.unwrap();
    }
    assert!(
        env.node(&node).is_none(),
        "the unregistered node went with it"
    );
    assert!(env.claim("a").is_none());
    assert_eq!(env.cloud.fake.deleted(), [provider_id(&claim).unwrap()]);
}

// ---------------------------------------------------------------------------------------
// nodeclaim/expiration
// ---------------------------------------------------------------------------------------

/// The expiration suite: a claim past `expireAfter` is deleted (its Node need not be expired
/// or even exist), counted once in `karpenter_nodeclaims_disrupted_total` with its pods in
/// `karpenter_pods_disruption_initiated_total`; one not yet expired, or with expiration
/// disabled, stays.
#[tokio::test(start_paused = true)]
async fn expired_claims_are_deleted_once() {
    let env = Env::new();
    let (_, node) = env
        .running("expiring", json!({"spec": {"expireAfter": "30s"}}))
        .await;
    env.running("never", json!({"spec": {"expireAfter": "Never"}}))
        .await;
    env.running("later", json!({"spec": {"expireAfter": "200s"}}))
        .await;
    env.bound_pod("p0", &node, json!({}));
    env.bound_pod("p1", &node, json!({}));
    advance(secs(60)).await;
    for c in ["expiring", "never", "later"] {
        env.lifecycle(c).await.unwrap();
    }
    let expired = env.claim("expiring").unwrap();
    assert!(expired.metadata.deletion_timestamp.is_some(), "expired");
    assert!(
        env.claim("never")
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none()
    );
    assert!(
        env.claim("later")
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none()
    );
    env.lifecycle("expiring").await.unwrap();
    env.lifecycle("expiring").await.unwrap();
    assert_eq!(
        env.sample(
            "karpenter_nodeclaims_disrupted_total",
            &["reason=\"expired\"", "nodepool=\"default\""]
        ),
        Some(1.0),
        "counted once"
    );
    assert_eq!(
        env.sample(
            "karpenter_pods_disruption_initiated_total",
            &["reason=\"expired\""]
        ),
        Some(2.0)
    );
    // A claim whose Node is gone expires all the same.
    let claim = env
        .launched("nodeless", json!({"spec": {"expireAfter": "30s"}}))
        .await;
    let _ = claim;
    advance(secs(60)).await;
    env.lifecycle("nodeless").await.unwrap();
    assert!(
        env.claim("nodeless")
            .is_none_or(|c| c.metadata.deletion_timestamp.is_some())
    );
}

// ---------------------------------------------------------------------------------------
// nodeclaim/garbagecollection
// ---------------------------------------------------------------------------------------

/// The garbage collection suite: a registered claim whose instance is gone is deleted once its
/// Node is NotReady, not while it is Ready, and not while it is there with no Node.
#[tokio::test(start_paused = true)]
async fn claims_of_vanished_instances_are_collected_once_their_nodes_are_not_ready() {
    let env = Env::new();
    let mut not_ready = Vec::new();
    for i in 0..3 {
        let (c, node) = env.running(&format!("nr{i}"), json!({})).await;
        env.server
            .merge::<Node>(
                "",
                &node,
                json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
            )
            .unwrap();
        env.cloud.fake.vanish(&provider_id(&c).unwrap());
        not_ready.push(c.name_any());
    }
    let (ready, _) = env.running("ready", json!({})).await;
    env.cloud.fake.vanish(&provider_id(&ready).unwrap());
    let nodeless = env.launched("nodeless", json!({})).await;
    env.cloud.fake.vanish(&provider_id(&nodeless).unwrap());
    let alive = env.launched("alive", json!({})).await;
    let _ = alive;
    advance(secs(60)).await;
    env.sync().await;
    let collected = garbage::collect(&env.ctx).await.unwrap();
    let mut names = collected.node_claims.clone();
    names.sort();
    assert_eq!(names, not_ready);
    for name in &not_ready {
        assert!(
            env.claim(name)
                .unwrap()
                .metadata
                .deletion_timestamp
                .is_some()
        );
    }
    for name in ["ready", "nodeless", "alive"] {
        assert!(
            env.claim(name)
                .unwrap()
                .metadata
                .deletion_timestamp
                .is_none(),
            "{name} stays"
        );
    }
}

// ---------------------------------------------------------------------------------------
// nodeclaim/disruption (drift and consolidatable conditions, the controller's part)
// ---------------------------------------------------------------------------------------

/// "should detect drift" (the provider's), "should remove the status condition from the
/// nodeClaim if the nodeClaim is no longer drifted", the launch-condition cases, and "should
/// not detect drift if the nodePool does not exist".
#[tokio::test(start_paused = true)]
async fn the_drifted_condition_follows_the_provider_and_the_launch() {
    let env = Env::new();
    let (claim, _) = env.running("a", json!({})).await;
    let id = provider_id(&claim).unwrap();
    let mut checks = drift::Checks::default();
    env.cloud.fake.set_drifted(&id, "CloudProviderDrifted");
    env.sync().await;
    drift::reconcile(&env.ctx, &mut checks).await.unwrap();
    assert_eq!(
        condition(&env.claim("a").unwrap(), "Drifted").map(|c| (c.0, c.1)),
        Some(("True".into(), "CloudProviderDrifted".into()))
    );
    // No longer drifted (the provider's answer is cached for its check interval).
    env.cloud.fake.set_drifted(&id, "");
    advance(secs(6 * 60)).await;
    env.sync().await;
    drift::reconcile(&env.ctx, &mut checks).await.unwrap();
    assert_eq!(status_of(&env.claim("a").unwrap(), "Drifted"), None);
    // Drifted again, then its launch reads Unknown / False: the condition goes.
    for launched in ["Unknown", "False"] {
        env.cloud.fake.set_drifted(&id, "CloudProviderDrifted");
        advance(secs(6 * 60)).await;
        env.sync().await;
        drift::reconcile(&env.ctx, &mut checks).await.unwrap();
        let c = env.claim("a").unwrap();
        assert_eq!(status_of(&c, "Drifted"), Some("True".into()));
        let mut conditions = c.status.clone().unwrap().conditions;
        let original = conditions.clone();
        for cond in &mut conditions {
            if cond.type_ == "Launched" {
                cond.status = launched.into();
            }
        }
        env.server
            .merge::<NodeClaim>("", "a", json!({"status": {"conditions": conditions}}))
            .unwrap();
        env.sync().await;
        drift::reconcile(&env.ctx, &mut checks).await.unwrap();
        assert_eq!(
            status_of(&env.claim("a").unwrap(), "Drifted"),
            None,
            "Launched={launched}"
        );
        let restored: Vec<_> = original
            .into_iter()
            .filter(|c| c.type_ != "Drifted")
            .collect();
        env.server
            .merge::<NodeClaim>("", "a", json!({"status": {"conditions": restored}}))
            .unwrap();
    }
    // Its NodePool gone: nothing is judged.
    env.server.delete::<NodePool>("", "default").unwrap();
    advance(secs(6 * 60)).await;
    env.sync().await;
    drift::reconcile(&env.ctx, &mut checks).await.unwrap();
    assert_eq!(status_of(&env.claim("a").unwrap(), "Drifted"), None);
}

/// "should set multiple disruption conditions simultaneously" and "should remove multiple
/// disruption conditions simultaneously": one pass sets `Drifted` and `Consolidatable`
/// together, and a later one removes both.
#[tokio::test(start_paused = true)]
async fn drifted_and_consolidatable_are_set_and_removed_together() {
    let env = Env::with_pool(json!({"spec": {"disruption": {"consolidateAfter": "30s"}}}));
    let (claim, _) = env.running("a", json!({})).await;
    let id = provider_id(&claim).unwrap();
    env.cloud.fake.set_drifted(&id, "CloudProviderDrifted");
    advance(secs(60)).await;
    let mut checks = drift::Checks::default();
    env.sync().await;
    drift::reconcile(&env.ctx, &mut checks).await.unwrap();
    let c = env.claim("a").unwrap();
    assert_eq!(status_of(&c, "Drifted"), Some("True".into()));
    assert_eq!(status_of(&c, "Consolidatable"), Some("True".into()));
    env.cloud.fake.set_drifted(&id, "");
    env.server
        .merge::<NodePool>(
            "",
            "default",
            json!({"spec": {"disruption": {"consolidateAfter": "Never"}}}),
        )
        .unwrap();
    advance(secs(6 * 60)).await;
    env.sync().await;
    drift::reconcile(&env.ctx, &mut checks).await.unwrap();
    let c = env.claim("a").unwrap();
    assert_eq!(status_of(&c, "Drifted"), None);
    assert_eq!(status_of(&c, "Consolidatable"), None);
}

// ---------------------------------------------------------------------------------------
// More of the suites above
// ---------------------------------------------------------------------------------------

/// The hydration suite's "should hydrate missing metadata onto the NodeClaim": a claim made
/// without its NodeClass's label (by an older Karpenter) gets it, and its Node with it.
#[tokio::test(start_paused = true)]
async fn a_claim_without_its_node_class_label_gets_it() {
    let env = Env::new();
    let claim = env
        .launched("a", json!({"metadata": {"labels": {CLASS_LABEL: null}}}))
        .await;
    assert_eq!(
        claim.labels().get(CLASS_LABEL).map(String::as_str),
        Some("default")
    );
    let node = env.kubelet(&claim, json!({}));
    env.lifecycle("a").await.unwrap();
    assert_eq!(
        env.node(&node)
            .unwrap()
            .labels()
            .get(CLASS_LABEL)
            .map(String::as_str),
        Some("default")
    );
}

fn generations(claim: &NodeClaim) -> Vec<(String, Option<i64>)> {
    claim
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .filter(|c| {
            [
                "Launched",
                "Registered",
                "Initialized",
                "Ready",
                "InstanceTerminating",
            ]
            .contains(&c.type_.as_str())
        })
        .map(|c| (c.type_.clone(), c.observed_generation))
        .collect()
}

/// "should update observedGeneration if generation increases after all conditions are marked
/// True" and "should update status conditions to the latest generation when finalizing".
#[tokio::test(start_paused = true)]
async fn lifecycle_conditions_follow_the_claims_generation() {
    let env = Env::new();
    let (claim, node) = env.running("a", json!({})).await;
    let first = claim.metadata.generation;
    assert!(first.is_some());
    assert!(
        generations(&claim).iter().all(|(_, g)| *g == first),
        "{:?}",
        generations(&claim)
    );
    env.server
        .merge::<NodeClaim>(
            "",
            "a",
            json!({"spec": {"taints": [{"key": "test", "value": "value", "effect": "NoSchedule"}]}}),
        )
        .unwrap();
    env.lifecycle("a").await.unwrap();
    let claim = env.claim("a").unwrap();
    let now = claim.metadata.generation;
    assert_ne!(now, first, "the spec change moved the generation");
    let seen = generations(&claim);
    assert_eq!(seen.len(), 4, "{seen:?}");
    assert!(seen.iter().all(|(_, g)| *g == now), "{seen:?}");
    // Finalizing: the instance's termination is recorded at the generation of then.
    env.server
        .merge::<NodeClaim>(
            "",
            "a",
            json!({"spec": {"taints": [{"key": "test", "value": "other", "effect": "NoSchedule"}]}}),
        )
        .unwrap();
    env.server.delete::<NodeClaim>("", "a").unwrap();
    env.lifecycle("a").await.unwrap();
    env.server
        .merge::<Node>("", &node, json!({"metadata": {"finalizers": null}}))
        .unwrap();
    env.lifecycle("a").await.unwrap();
    let claim = env.claim("a").unwrap();
    let seen = generations(&claim);
    assert_eq!(seen.len(), 5, "{seen:?}");
    assert!(
        seen.iter().all(|(_, g)| *g == claim.metadata.generation),
        "{seen:?}"
    );
}

/// "should respect a custom launch timeout": with a 45 s launch timeout, a claim still
/// failing to launch after 30 s stays and after 60 s goes.
#[tokio::test(start_paused = true)]
async fn a_shorter_launch_timeout_is_respected() {
    let env = Env::with_options(
        json!({}),
        Options {
            launch_timeout: secs(45),
            ..Options::default()
        },
    );
    env.create_claim("a", json!({}));
    env.lifecycle("a").await.unwrap();
    for (after, deleted) in [(0, false), (30, false), (30, true)] {
        advance(secs(after)).await;
        env.cloud
            .fake
            .fail_next_create(CloudProviderError::create("Failed", "boom"));
        let _ = env.lifecycle("a").await;
        let gone = env
            .claim("a")
            .is_none_or(|c| c.metadata.deletion_timestamp.is_some());
        assert_eq!(gone, deleted, "after another {after} s");
    }
}

/// The NodeRegistrationHealthy cases of the registration and liveness suites, as the lifecycle
/// records them for the NodePool status (which turns the health into the condition:
/// `nodepool_status`'s own tests): a registration with nothing before is healthy; two
/// registration timeouts make the pool unhealthy whether it was healthy or unknown before, and
/// one success after them does not make it healthy again; nothing is recorded for a NodePool
/// that is gone.
#[tokio::test(start_paused = true)]
async fn registrations_and_timeouts_make_the_pools_registration_health() {
    use karpenter_controller::nodepool_status::Health;
    let uid = |env: &Env| {
        env.server
            .get::<NodePool>("", "default")
            .unwrap()
            .metadata
            .uid
            .unwrap()
    };
    async fn timeout(env: &Env, name: &str) {
        env.launched(name, json!({})).await;
        advance(secs(16 * 60)).await;
        env.lifecycle(name).await.unwrap();
        assert!(
            env.claim(name)
                .unwrap()
                .metadata
                .deletion_timestamp
                .is_some()
        );
    }
    // Nothing before: one registration makes it healthy.
    let env = Env::new();
    env.running("ok", json!({})).await;
    assert_eq!(
        env.ctx.registration_health.health(&uid(&env)),
        Health::Healthy
    );
    // Unknown before, two timeouts: unhealthy; one success after: still unhealthy.
    let env = Env::new();
    timeout(&env, "t1").await;
    assert_eq!(
        env.ctx.registration_health.health(&uid(&env)),
        Health::Healthy
    );
    timeout(&env, "t2").await;
    assert_eq!(
        env.ctx.registration_health.health(&uid(&env)),
        Health::Unhealthy
    );
    env.running("ok", json!({})).await;
    assert_eq!(
        env.ctx.registration_health.health(&uid(&env)),
        Health::Unhealthy
    );
    // Healthy before, two timeouts: unhealthy.
    let env = Env::new();
    env.ctx.registration_health.set(&uid(&env), Health::Healthy);
    timeout(&env, "t1").await;
    timeout(&env, "t2").await;
    assert_eq!(
        env.ctx.registration_health.health(&uid(&env)),
        Health::Unhealthy
    );
    // The NodePool gone: nothing recorded.
    let env = Env::new();
    let gone = uid(&env);
    env.launched("orphan", json!({})).await;
    env.server.delete::<NodePool>("", "default").unwrap();
    advance(secs(16 * 60)).await;
    env.lifecycle("orphan").await.unwrap();
    assert!(
        env.claim("orphan")
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    assert_eq!(env.ctx.registration_health.health(&gone), Health::Unknown);
}

/// The terminator's "should succeed with no event when the pod is not found" and "... when the
/// pod UID conflicts": a drain working from state that still has a pod the API server no
/// longer has (404), or has under a new UID (409), publishes nothing and leaves the new pod be.
#[tokio::test(start_paused = true)]
async fn evicting_a_pod_that_is_gone_or_replaced_says_nothing() {
    let env = Env::new();
    let (_, node) = env.running("a", json!({})).await;
    env.bound_pod("gone", &node, json!({}));
    env.bound_pod("replaced", &node, json!({}));
    env.delete_node(&node);
    env.terminate(&node).await.unwrap(); // taint
    env.sync().await;
    env.pod_gone("gone");
    env.pod_gone("replaced");
    env.bound_pod(
        "replaced",
        &node,
        json!({"metadata": {"uid": "uid-replaced-2"}}),
    );
    // State still holds the old pods.
    let n = env.ctx.cluster.nodes.get(&node).unwrap();
    termination::reconcile(&env.ctx, &n).await.unwrap();
    assert!(
        env.events("Evicted").is_empty(),
        "{:?}",
        env.events("Evicted")
            .iter()
            .map(|e| (&e.involved_object.name, &e.involved_object.uid))
            .collect::<Vec<_>>()
    );
    let failed = env.events("FailedDraining");
    assert!(
        failed
            .iter()
            .all(|e| e.message.as_deref().is_some_and(|m| !m.contains("PDB"))),
        "{failed:?}"
    );
    let replaced = env.pod("replaced").unwrap();
    assert!(
        replaced.metadata.deletion_timestamp.is_none(),
        "the new pod stays"
    );
    assert_eq!(
        env.sample("karpenter_pods_eviction_requests_total", &["code=\"404\""]),
        Some(1.0)
    );
    assert_eq!(
        env.sample("karpenter_pods_eviction_requests_total", &["code=\"409\""]),
        Some(1.0)
    );
}

/// The terminator's "should force-delete a pod via the queue, bypassing PDBs" and "should
/// upgrade a pod already enqueued for eviction to force-delete": a pod whose eviction its PDB
/// refuses is deleted once its 120 s of grace no longer fit before the node's 300 s deadline,
/// with a `Disrupted` event, counted drained.
#[tokio::test(start_paused = true)]
async fn a_refused_eviction_becomes_a_deletion_at_the_deadline() {
    let env = Env::new();
    let (_, node) = env
        .running("a", json!({"spec": {"terminationGracePeriod": "300s"}}))
        .await;
    env.bound_pod(
        "guarded",
        &node,
        json!({"metadata": {"finalizers": ["test/hold"]}, "spec": {"terminationGracePeriodSeconds": 120}}),
    );
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "blocks", "namespace": "default"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "guarded"}}},
    }))
    .unwrap();
    env.server.create(&pdb).unwrap();
    env.server.delete::<NodeClaim>("", "a").unwrap();
    env.lifecycle("a").await.unwrap();
    env.lifecycle("a").await.unwrap();
    env.terminate(&node).await.unwrap(); // taint
    env.terminate(&node).await.unwrap();
    assert!(!terminating(&env.pod("guarded")), "the budget refuses");
    assert_eq!(
        env.sample("karpenter_pods_eviction_requests_total", &["code=\"429\""]),
        Some(1.0)
    );
    advance(secs(170)).await;
    env.terminate(&node).await.unwrap();
    assert!(
        !terminating(&env.pod("guarded")),
        "120 s still fit in 130 s"
    );
    advance(secs(15)).await;
    env.terminate(&node).await.unwrap();
    assert!(terminating(&env.pod("guarded")), "deleted past the budget");
    let disrupted = env.events("Disrupted");
    assert_eq!(disrupted.len(), 1);
    assert!(
        disrupted[0]
            .message
            .as_deref()
            .is_some_and(|m| m.contains("granted 115 seconds of grace-period of its 120")),
        "{disrupted:?}"
    );
    assert_eq!(
        env.sample(
            "karpenter_pods_drained_total",
            &["reason=\"Forceful Termination\""]
        ),
        Some(1.0)
    );
}

/// The drift suite's "should detect static drift before cloud provider drift" and "should
/// detect node requirement drift before cloud provider drift": a claim the provider also
/// reports drifted is marked for its NodePool first.
#[tokio::test(start_paused = true)]
async fn template_drift_is_named_before_the_providers() {
    for (case, pool_change, reason) in [
        (
            "a static field changed",
            json!({"spec": {"template": {"metadata": {"labels": {"team": "b"}}}}}),
            "NodePoolDrifted",
        ),
        (
            "a requirement excludes the node",
            json!({"spec": {"template": {"spec": {"requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
            ]}}}}),
            "RequirementsDrifted",
        ),
    ] {
        let env = Env::new();
        let (claim, _) = env.running("a", json!({})).await;
        let mut checks = drift::Checks::default();
        env.sync().await;
        drift::reconcile(&env.ctx, &mut checks).await.unwrap(); // hashes stamped
        assert_eq!(
            status_of(&env.claim("a").unwrap(), "Drifted"),
            None,
            "{case}"
        );
        env.cloud
            .fake
            .set_drifted(&provider_id(&claim).unwrap(), "CloudProviderDrifted");
        env.server
            .merge::<NodePool>("", "default", pool_change)
            .unwrap();
        advance(secs(6 * 60)).await;
        env.sync().await;
        drift::reconcile(&env.ctx, &mut checks).await.unwrap();
        assert_eq!(
            condition(&env.claim("a").unwrap(), "Drifted").map(|c| (c.0, c.1)),
            Some(("True".into(), reason.into())),
            "{case}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Objects of another Karpenter (another provider's NodeClass)
// ---------------------------------------------------------------------------------------

/// Upstream's "should ignore NodeClaims which aren't managed by this Karpenter instance"
/// (launch, registration, initialization, liveness, termination, expiration, drift, node
/// shape, consistency, the termination finalizer) and "should ignore nodes not managed by this
/// Karpenter instance": a NodePool and a NodeClaim of a NodeClass the provider does not support
/// never enter state, so no loop (and no round) acts on them, while the same passes launch the
/// controller's own claim; another Karpenter's deleting node is not drained.
#[tokio::test(start_paused = true)]
async fn another_providers_claims_pools_and_nodes_are_left_alone() {
    let env = Env::new();
    let foreign = json!({"group": "karpenter.test.sh", "kind": FOREIGN_KIND, "name": "default"});
    let pool: NodePool = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "theirs"},
        "spec": {"template": {"spec": {"nodeClassRef": foreign, "requirements": []}}},
    }))
    .unwrap();
    env.server.create(&pool).unwrap();
    // Expired and drifted by the time the passes run.
    env.create_claim(
        "theirs",
        json!({
            "metadata": {"labels": {NODE_POOL_LABEL: "theirs", foreign_class_label(): "default"}},
            "spec": {"nodeClassRef": foreign, "expireAfter": "1s"},
        }),
    );
    env.create_claim("ours", json!({}));
    advance(secs(5)).await;
    env.sync().await;
    assert!(env.ctx.cluster.node_claims.get("theirs").is_none());
    assert!(env.ctx.cluster.node_pools.get("theirs").is_none());
    assert!(env.ctx.cluster.node_pools.get("default").is_some());
    assert!(
        env.ctx
            .cluster
            .objects()
            .node_claims
            .iter()
            .all(|c| c.name_any() != "theirs"),
        "the round never sees it"
    );
    let mut checks = drift::Checks::default();
    for _ in 0..3 {
        env.sync().await;
        for claim in env.ctx.cluster.node_claims.all() {
            lifecycle::reconcile(&env.ctx, &claim).await.unwrap();
        }
        drift::reconcile(&env.ctx, &mut checks).await.unwrap();
    }
    let ours = env.claim("ours").unwrap();
    assert!(ours.finalizers().iter().any(|f| f == TERMINATION_FINALIZER));
    assert!(provider_id(&ours).is_some(), "ours launched");
    assert_eq!(env.cloud.fake.created().len(), 1, "only ours");
    let theirs = env.claim("theirs").expect("theirs is not expired away");
    assert!(theirs.finalizers().is_empty(), "no finalizer on theirs");
    assert!(theirs.status.is_none(), "no condition on theirs");
    assert!(theirs.metadata.deletion_timestamp.is_none());

    // Their node, deleting, held by the termination finalizer theirs put on it.
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "their-node", "finalizers": [TERMINATION_FINALIZER],
            "labels": {foreign_class_label(): "default", NODE_POOL_LABEL: "theirs"}},
        "spec": {"providerID": "their-cloud://1"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }))
    .unwrap();
    env.server.create(&node).unwrap();
    env.bound_pod("web", "their-node", json!({}));
    env.delete_node("their-node");
    env.terminate("their-node").await.unwrap();
    let node = env.node("their-node").expect("still there");
    assert!(has_finalizer(&node), "their finalizer is theirs to remove");
    assert!(
        !taints(&node).iter().any(|(k, _)| k == DISRUPTED_TAINT_KEY),
        "not tainted for a drain"
    );
    assert!(!terminating(&env.pod("web")), "its pod is not evicted");
}

/// A deleting Node whose NodeClaim state holds is drained whatever its labels say: one
/// registered before its NodeClass label was hydrated lacks it (here it even carries
/// another's).
#[tokio::test(start_paused = true)]
async fn a_node_whose_claim_is_ours_is_drained_whatever_its_labels() {
    let env = Env::new();
    let (_, node) = env.running("a", json!({})).await;
    env.server
        .merge::<Node>(
            "",
            &node,
            json!({"metadata": {"labels": {foreign_class_label(): "default"}}}),
        )
        .unwrap();
    env.delete_node(&node);
    env.terminate(&node).await.unwrap();
    let node = env.node(&node).expect("held by the finalizer");
    assert!(
        taints(&node).iter().any(|(k, _)| k == DISRUPTED_TAINT_KEY),
        "tainted for the drain"
    );
}

// ---------------------------------------------------------------------------------------
// nodeclaim/lifecycle registration hooks
// ---------------------------------------------------------------------------------------

type HookFn = Box<dyn Fn(&NodeClaim) -> karpenter_cloudprovider::Result<HookResult> + Send + Sync>;

/// A hook answering with `answer`, counting its calls.
struct TestHook {
    name: &'static str,
    answer: HookFn,
    calls: std::sync::atomic::AtomicU32,
}

impl RegistrationHook for TestHook {
    fn name(&self) -> &str {
        self.name
    }
    fn registered<'a>(
        &'a self,
        claim: &'a NodeClaim,
    ) -> karpenter_cloudprovider::hooks::HookFuture<'a> {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let answer = (self.answer)(claim);
        Box::pin(async move { answer })
    }
}

fn hook(
    name: &'static str,
    answer: impl Fn(&NodeClaim) -> karpenter_cloudprovider::Result<HookResult> + Send + Sync + 'static,
) -> Arc<TestHook> {
    Arc::new(TestHook {
        name,
        answer: Box::new(answer),
        calls: Default::default(),
    })
}

fn ready(_: &NodeClaim) -> karpenter_cloudprovider::Result<HookResult> {
    Ok(HookResult::ready())
}

fn pending(_: &NodeClaim) -> karpenter_cloudprovider::Result<HookResult> {
    Ok(HookResult::pending_for(secs(5)))
}

/// A hook that waits until the flag it comes with is set.
fn eventually_ready() -> (Arc<TestHook>, Arc<std::sync::atomic::AtomicBool>) {
    let ready_now = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = ready_now.clone();
    let hook = hook("eventually-ready", move |c| {
        if flag.load(std::sync::atomic::Ordering::SeqCst) {
            ready(c)
        } else {
            pending(c)
        }
    });
    (hook, ready_now)
}

impl Env {
    /// With `hooks`, a launched claim `a` whose Node (tainted unregistered) has appeared, and
    /// one registration pass; the pass's outcome.
    async fn registering(&self, hooks: &[Arc<TestHook>]) -> (Result<(), Error>, String) {
        *self.cloud.hooks.lock().unwrap() = hooks
            .iter()
            .map(|h| h.clone() as Arc<dyn RegistrationHook>)
            .collect();
        let claim = self.launched("a", json!({})).await;
        let node = self.kubelet(&claim, json!({}));
        (self.lifecycle("a").await, node)
    }
}

fn registered(env: &Env) -> (Option<(String, String, String)>, Option<String>) {
    let claim = env.claim("a").unwrap();
    let node = claim.status.as_ref().and_then(|s| s.node_name.clone());
    (condition(&claim, "Registered"), node)
}

/// Upstream's "should complete registration when a single hook passes", "... when multiple
/// hooks all pass", "... with empty hooks slice" and "... with nil hooks slice" (one case: a
/// provider without hooks gives none).
#[tokio::test(start_paused = true)]
async fn registration_completes_when_every_hook_is_ready() {
    for hooks in [
        vec![hook("always-pass", ready)],
        vec![hook("hook-one", ready), hook("hook-two", ready)],
        vec![],
    ] {
        let env = Env::new();
        let (pass, node) = env.registering(&hooks).await;
        pass.unwrap();
        let (cond, node_name) = registered(&env);
        assert_eq!(
            cond.map(|c| c.0),
            Some("True".into()),
            "{} hooks",
            hooks.len()
        );
        assert_eq!(node_name.as_deref(), Some(node.as_str()));
        assert!(
            hooks
                .iter()
                .all(|h| h.calls.load(std::sync::atomic::Ordering::SeqCst) == 1)
        );
    }
}

/// Upstream's "should defer registration when a hook returns false", "... when the second
/// hook returns false with multiple hooks" and "should call all hooks in parallel and list all
/// pending hooks in status".
#[tokio::test(start_paused = true)]
async fn registration_waits_for_every_pending_hook_and_names_them() {
    // The hooks, the names the condition gives, and those it must not.
    type Case = (
        Vec<Arc<TestHook>>,
        &'static [&'static str],
        &'static [&'static str],
    );
    let cases: Vec<Case> = vec![
        (
            vec![hook("capacity-reservation", pending)],
            &["capacity-reservation"],
            &[],
        ),
        (
            vec![hook("pass-hook", ready), hook("fail-hook", pending)],
            &["fail-hook"],
            &["pass-hook"],
        ),
        (
            vec![
                hook("blocking-hook", pending),
                hook("also-blocking", pending),
            ],
            &["blocking-hook", "also-blocking"],
            &[],
        ),
    ];
    for (hooks, named, not_named) in cases {
        let env = Env::new();
        let (pass, node) = env.registering(&hooks).await;
        pass.unwrap();
        let (cond, node_name) = registered(&env);
        let (status, reason, message) = cond.expect("a Registered condition");
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("Unknown", "RegistrationHookPending")
        );
        for n in named {
            assert!(message.contains(n), "{message:?} names {n}");
        }
        for n in not_named {
            assert!(!message.contains(n), "{message:?} does not name {n}");
        }
        assert_eq!(node_name, None);
        assert!(
            hooks
                .iter()
                .all(|h| h.calls.load(std::sync::atomic::Ordering::SeqCst) == 1),
            "every hook asked once"
        );
        let node = env.node(&node).unwrap();
        assert!(
            taints(&node)
                .iter()
                .any(|(k, _)| k == UNREGISTERED_TAINT_KEY),
            "the node keeps the unregistered taint"
        );
        assert!(!node.labels().contains_key(NODE_REGISTERED_LABEL));
    }
}

/// Upstream's "should return error when a hook returns an error".
#[tokio::test(start_paused = true)]
async fn a_failing_hook_fails_the_pass_and_registration_waits() {
    let env = Env::new();
    let failing = hook("failing-hook", |_| {
        Err(CloudProviderError::Other("cloud provider API error".into()))
    });
    let (pass, _) = env.registering(&[failing]).await;
    assert!(pass.is_err(), "the pass fails, to be retried with backoff");
    let (cond, node_name) = registered(&env);
    assert_eq!(cond.map(|c| c.0), Some("Unknown".into()));
    assert_eq!(node_name, None);
}

/// Upstream's "should complete registration after a hook transitions from not ready to ready".
#[tokio::test(start_paused = true)]
async fn registration_completes_once_a_pending_hook_turns_ready() {
    let env = Env::new();
    let (eventually, ready_now) = eventually_ready();
    let (pass, node) = env.registering(&[eventually]).await;
    pass.unwrap();
    assert_eq!(registered(&env).0.map(|c| c.0), Some("Unknown".into()));
    ready_now.store(true, std::sync::atomic::Ordering::SeqCst);
    env.lifecycle("a").await.unwrap();
    let (cond, node_name) = registered(&env);
    assert_eq!(cond.map(|c| c.0), Some("True".into()));
    assert_eq!(node_name.as_deref(), Some(node.as_str()));
    assert!(
        !taints(&env.node(&node).unwrap())
            .iter()
            .any(|(k, _)| k == UNREGISTERED_TAINT_KEY)
    );
}

/// Upstream's "should propagate labels added by a registration hook to both the node and the
/// nodeclaim" (the label reaches the claim on one pass and the Node on the next).
#[tokio::test(start_paused = true)]
async fn labels_a_hook_resolves_reach_the_claim_and_the_node() {
    let env = Env::new();
    let labelling = hook("label-mutating-hook", |_| {
        Ok(HookResult {
            labels: [(
                "test.karpenter.sh/hook-label".to_string(),
                "resolved-value".to_string(),
            )]
            .into(),
            ..HookResult::ready()
        })
    });
    let (pass, node) = env.registering(&[labelling]).await;
    pass.unwrap();
    env.lifecycle("a").await.unwrap();
    let claim = env.claim("a").unwrap();
    assert_eq!(status_of(&claim, "Registered"), Some("True".into()));
    assert_eq!(
        claim
            .labels()
            .get("test.karpenter.sh/hook-label")
            .map(String::as_str),
        Some("resolved-value")
    );
    assert_eq!(
        env.node(&node)
            .unwrap()
            .labels()
            .get("test.karpenter.sh/hook-label")
            .map(String::as_str),
        Some("resolved-value")
    );
}

/// A waiting hook's `after` is when the claim is looked at again, not the next resync.
#[tokio::test(start_paused = true)]
async fn a_waiting_hook_is_asked_again_when_it_said() {
    let env = Env::new();
    let soon = hook("soon", |_| Ok(HookResult::pending_for(secs(3))));
    let later = hook("later", |_| Ok(HookResult::pending_for(secs(40))));
    let (pass, _) = env.registering(&[later, soon]).await;
    pass.unwrap();
    env.sync().await;
    let claim = env.claim("a").unwrap();
    let again = lifecycle::reconcile(&env.ctx, &claim).await.unwrap();
    assert_eq!(again, Some(secs(3)), "the soonest of the waiting hooks");
}

/// Registration's liveness holds while hooks wait, even a hook that keeps resolving labels:
/// once the registration timeout has passed since launch, the claim goes on the next pass.
#[tokio::test(start_paused = true)]
async fn a_claim_whose_hooks_wait_past_the_registration_timeout_is_deleted() {
    let env = Env::new();
    let labelling_and_waiting = hook("reservation", |_| {
        Ok(HookResult {
            labels: [("example.com/reservation".to_string(), "r-1".to_string())].into(),
            ..HookResult::pending_for(secs(5))
        })
    });
    *env.cloud.hooks.lock().unwrap() = vec![labelling_and_waiting as Arc<dyn RegistrationHook>];
    let claim = env.launched("a", json!({})).await;
    env.kubelet(&claim, json!({}));
    advance(lifecycle::REGISTRATION_TIMEOUT + secs(1)).await;
    env.lifecycle("a").await.unwrap();
    env.sync().await;
    let claim = env.claim("a");
    assert!(
        claim.is_none_or(|c| c.metadata.deletion_timestamp.is_some()),
        "deleted on the first pass after the timeout"
    );
}

/// A Node that lacks the unregistered taint is told of once per registration, however long
/// its hooks keep it waiting.
#[tokio::test(start_paused = true)]
async fn a_missing_unregistered_taint_is_told_once_while_hooks_wait() {
    let env = Env::new();
    let (eventually, ready_now) = eventually_ready();
    *env.cloud.hooks.lock().unwrap() = vec![eventually as Arc<dyn RegistrationHook>];
    let claim = env.launched("a", json!({})).await;
    env.kubelet(&claim, json!({"spec": {"taints": null}}));
    for _ in 0..3 {
        env.lifecycle("a").await.unwrap();
        // Past the recorder's dedupe window: only the controller can keep it to one.
        advance(secs(180)).await;
    }
    ready_now.store(true, std::sync::atomic::Ordering::SeqCst);
    env.lifecycle("a").await.unwrap();
    assert_eq!(
        status_of(&env.claim("a").unwrap(), "Registered"),
        Some("True".into())
    );
    assert_eq!(env.events("UnregisteredTaintMissing").len(), 1);
}
