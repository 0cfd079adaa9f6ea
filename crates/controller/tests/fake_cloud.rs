//! The controller's loops over an in-memory cloud (`FakeCloudProvider`) and the test kit's API
//! server, on tokio's paused clock: upstream's own durations (a 15-minute registration
//! timeout, an hour of grace period) pass in virtual time, and each test asserts *when*
//! things happened, read off the same clock the controller uses.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use karpenter_api::labels::{HOSTNAME_LABEL, UNREGISTERED_TAINT_KEY};
use karpenter_api::{NodeClaim, NodePool};
use karpenter_cloudprovider::fake::FakeCloudProvider;
use karpenter_controller::{Clock, Controller, Options};
use karpenter_testkit::FakeApiServer;
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// A cluster: the API server, the cloud, the controller, and a kubelet stand-in.
struct Harness {
    server: FakeApiServer,
    cloud: Arc<FakeCloudProvider>,
    clock: Clock,
    /// Whether instances register Nodes (off: they never do).
    kubelets: Arc<AtomicBool>,
    stop: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Upstream's settings, but one replica and no leader election.
fn options() -> Options {
    Options {
        disable_leader_election: true,
        ..Options::default()
    }
}

impl Harness {
    /// A cluster with one NodePool (`default`, on-demand amd64 Linux, patched by `pool`).
    fn start(pool: serde_json::Value) -> Self {
        Self::start_with(pool, options())
    }

    /// [`Harness::start`] with the controller's `options`.
    fn start_with(pool: serde_json::Value, options: Options) -> Self {
        Self::start_on(pool, options, FakeCloudProvider::default())
    }

    /// [`Harness::start_with`] on `cloud`.
    fn start_on(pool: serde_json::Value, options: Options, cloud: FakeCloudProvider) -> Self {
        let clock = Clock::following_tokio();
        let server = FakeApiServer::new();
        let stamps = clock.clone();
        server.set_clock(move || stamps.now());
        let mut object = json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.test.sh", "kind": "TestNodeClass", "name": "default"},
                "requirements": [
                    {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                ],
            }}},
        });
        json_patch::merge(&mut object, &pool);
        let pool: NodePool = serde_json::from_value(object).expect("a NodePool");
        server.create(&pool).expect("created");
        let cloud = Arc::new(cloud);
        let controller =
            Controller::with_clock(server.client(), cloud.clone(), options, clock.clone());
        let stop = CancellationToken::new();
        let kubelets = Arc::new(AtomicBool::new(true));
        let tasks = vec![
            server.spawn_cluster(Duration::from_secs(1)),
            tokio::spawn(kubelet(server.clone(), cloud.clone(), kubelets.clone())),
            tokio::spawn(controller.run(stop.clone())),
        ];
        Self {
            server,
            cloud,
            clock,
            kubelets,
            stop,
            tasks,
        }
    }

    async fn stop(self) {
        self.stop.cancel();
        for task in self.tasks {
            task.abort();
            let _ = task.await;
        }
    }

    /// Waits (in virtual time, at most `limit`) until `f` answers; returns the answer and the
    /// time it first did.
    async fn until<T>(&self, limit: Duration, mut f: impl FnMut() -> Option<T>) -> (T, Timestamp) {
        let deadline = self.clock.instant() + limit;
        loop {
            if let Some(v) = f() {
                return (v, self.clock.now());
            }
            assert!(
                self.clock.instant() < deadline,
                "not within {limit:?} of virtual time"
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    fn pod(&self, name: &str, annotations: serde_json::Value) {
        self.pod_of(name, "1", annotations);
    }

    fn pod_of(&self, name: &str, cpu: &str, annotations: serde_json::Value) {
        self.pod_in(name, cpu, annotations, json!({}));
    }

    fn pod_in(
        &self,
        name: &str,
        cpu: &str,
        annotations: serde_json::Value,
        selector: serde_json::Value,
    ) {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "annotations": annotations},
            "spec": {
                "nodeSelector": selector,
                "containers": [{"name": "c", "image": "app", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
            },
        }))
        .expect("a pod");
        self.server.create(&pod).expect("created");
    }

    fn pod_node(&self, name: &str) -> Option<String> {
        self.server
            .get::<Pod>("default", name)?
            .spec?
            .node_name
            .filter(|n| !n.is_empty())
    }

    fn claim(&self, name: &str) -> Option<NodeClaim> {
        self.server.get::<NodeClaim>("", name)
    }
}

fn condition(claim: &NodeClaim, type_: &str) -> Option<(String, String)> {
    claim
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

fn minutes(m: u64) -> Duration {
    Duration::from_secs(60 * m)
}

fn elapsed(from: Timestamp, to: Timestamp) -> SignedDuration {
    to.duration_since(from)
}

/// Stands in for the kubelets: every second, an instance without a Node registers one (Ready,
/// with the instance's labels and the `karpenter.sh/unregistered` taint, as a kubelet started
/// by karpenter does), and the Node of an instance that is gone stops being Ready.
async fn kubelet(server: FakeApiServer, cloud: Arc<FakeCloudProvider>, on: Arc<AtomicBool>) {
    loop {
        let instances: BTreeMap<String, NodeClaim> = cloud
            .instances()
            .into_iter()
            .filter_map(|i| Some((i.status.as_ref()?.provider_id.clone()?, i)))
            .collect();
        let nodes = server.list::<Node>();
        if on.load(Ordering::Relaxed) {
            for (provider_id, instance) in &instances {
                let registered = nodes.iter().any(|n| {
                    n.spec.as_ref().and_then(|s| s.provider_id.as_ref()) == Some(provider_id)
                });
                if registered {
                    continue;
                }
                let name = instance.metadata.name.clone().unwrap_or_default();
                let mut labels = instance.metadata.labels.clone().unwrap_or_default();
                labels.insert(HOSTNAME_LABEL.into(), name.clone());
                let status = instance.status.clone().unwrap_or_default();
                let node: Node = serde_json::from_value(json!({
                    "metadata": {"name": name, "labels": labels},
                    "spec": {"providerID": provider_id, "taints": [{"key": UNREGISTERED_TAINT_KEY, "effect": "NoExecute"}]},
                    "status": {
                        "capacity": status.capacity, "allocatable": status.allocatable,
                        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                    },
                }))
                .expect("a node");
                let _ = server.create(&node);
            }
        }
        for node in nodes {
            let provider_id = node.spec.as_ref().and_then(|s| s.provider_id.clone());
            let ready = node
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            if ready && provider_id.is_some_and(|id| !instances.contains_key(&id)) {
                let _ = server.merge::<Node>(
                    "",
                    node.metadata.name.as_deref().unwrap_or_default(),
                    json!({"status": {"conditions": [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}]}}),
                );
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Upstream's registration timeout: a launched instance whose Node never registers is given
/// 15 minutes, then its NodeClaim is deleted, the instance terminated, and the pod gets
/// another NodeClaim.
#[tokio::test(start_paused = true)]
async fn a_claim_whose_node_never_registers_is_replaced_after_fifteen_minutes() {
    let h = Harness::start(json!({}));
    h.kubelets.store(false, Ordering::Relaxed);
    h.pod("web", json!({}));
    let (first, launched) = h
        .until(minutes(1), || h.cloud.created().first().cloned())
        .await;
    let (_, terminated) = h
        .until(minutes(30), || {
            h.cloud.deleted().contains(&first).then_some(())
        })
        .await;
    let waited = elapsed(launched, terminated);
    assert!(
        waited >= SignedDuration::from_mins(15) && waited < SignedDuration::from_mins(16),
        "terminated {waited:?} after launch"
    );
    let (second, _) = h
        .until(minutes(2), || h.cloud.created().get(1).cloned())
        .await;
    assert_ne!(second, first, "the pod got another instance");
    h.kubelets.store(true, Ordering::Relaxed);
    h.until(minutes(2), || h.pod_node("web")).await;
    h.stop().await;
}

/// Registration and initialization, then expiration: a node registers, is initialized
/// (`karpenter.sh/unregistered` taint gone, finalizer and labels on), and expires at
/// `expireAfter`; its do-not-disrupt pod is not evicted but deleted when the NodePool's
/// `terminationGracePeriod` runs out (less the pod's own grace period), and only then does the
/// instance go.
#[tokio::test(start_paused = true)]
async fn an_expired_node_keeps_its_do_not_disrupt_pod_until_the_grace_period_ends() {
    let h = Harness::start(json!({"spec": {"template": {"spec": {
        "expireAfter": "30m", "terminationGracePeriod": "1h",
    }}}}));
    h.pod("batch", json!({"karpenter.sh/do-not-disrupt": "true"}));
    let (node, _) = h.until(minutes(2), || h.pod_node("batch")).await;
    let (claim, _) = h
        .until(minutes(1), || {
            h.server
                .list::<NodeClaim>()
                .into_iter()
                .find(|c| condition(c, "Initialized").is_some_and(|(s, _)| s == "True"))
        })
        .await;
    let registered: Node = h.server.get("", &node).expect("the node");
    assert!(
        registered
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_none_or(|t| t.iter().all(|t| t.key != UNREGISTERED_TAINT_KEY)),
        "the unregistered taint is removed at registration"
    );
    assert!(
        registered
            .metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| f.iter().any(|f| f == "karpenter.sh/termination")),
        "the node carries the termination finalizer"
    );
    let created = claim
        .metadata
        .creation_timestamp
        .clone()
        .expect("stamped")
        .0;
    let name = claim.metadata.name.clone().expect("named");
    let (_, expired) = h
        .until(minutes(40), || {
            h.claim(&name)
                .is_none_or(|c| c.metadata.deletion_timestamp.is_some())
                .then_some(())
        })
        .await;
    let age = elapsed(created, expired);
    assert!(
        age >= SignedDuration::from_mins(30) && age < SignedDuration::from_mins(31),
        "expired at {age:?}"
    );
    let (_, pod_gone) = h
        .until(minutes(120), || {
            h.server
                .get::<Pod>("default", "batch")
                .is_none()
                .then_some(())
        })
        .await;
    // Upstream deletes a pod its own grace period (30 s by default) before the node's
    // deadline, so that it has stopped by then.
    let held = elapsed(expired, pod_gone);
    assert!(
        held >= SignedDuration::from_secs(3600 - 30) && held < SignedDuration::from_mins(61),
        "the pod was held {held:?} (terminationGracePeriod 1h)"
    );
    let provider_id = claim.status.and_then(|s| s.provider_id).expect("launched");
    let (_, terminated) = h
        .until(minutes(5), || {
            h.cloud.deleted().contains(&provider_id).then_some(())
        })
        .await;
    assert!(terminated >= pod_gone, "the instance went after its pod");
    h.until(minutes(5), || {
        (h.server.get::<Node>("", &node).is_none() && h.claim(&name).is_none()).then_some(())
    })
    .await;
    h.stop().await;
}

/// Provider drift: the cloud reports the instance drifted, the claim gets `Drifted` with the
/// provider's reason, a replacement is launched and initialized, and only then is the drifted
/// instance terminated.
#[tokio::test(start_paused = true)]
async fn a_drifted_instance_is_replaced_before_it_is_terminated() {
    let h = Harness::start(json!({}));
    h.pod("web", json!({}));
    h.until(minutes(2), || h.pod_node("web")).await;
    let first = h.cloud.created()[0].clone();
    h.cloud.set_drifted(&first, "ImageDrifted");
    let (claim, _) = h
        .until(minutes(5), || {
            h.server.list::<NodeClaim>().into_iter().find(|c| {
                condition(c, "Drifted").is_some_and(|(s, r)| s == "True" && r == "ImageDrifted")
            })
        })
        .await;
    let (replacement, _) = h
        .until(minutes(5), || h.cloud.created().get(1).cloned())
        .await;
    let (_, terminated) = h
        .until(minutes(10), || {
            h.cloud.deleted().contains(&first).then_some(())
        })
        .await;
    let initialized = h
        .server
        .list::<NodeClaim>()
        .into_iter()
        .find(|c| c.status.as_ref().and_then(|s| s.provider_id.as_ref()) == Some(&replacement))
        .and_then(|c| {
            let s = c.status?;
            s.conditions
                .into_iter()
                .find(|c| c.type_ == "Initialized" && c.status == "True")
        })
        .expect("the replacement is initialized");
    assert!(
        initialized.last_transition_time.0 <= terminated,
        "the replacement was initialized before the drifted instance went"
    );
    h.until(minutes(5), || {
        h.claim(claim.metadata.name.as_deref().unwrap_or_default())
            .is_none()
            .then_some(())
    })
    .await;
    assert_eq!(h.cloud.instances().len(), 1, "one instance is left");
    h.stop().await;
}

/// Garbage collection: an instance no NodeClaim claims is terminated at the next collection
/// (every 2 minutes, once it is 30 s old), and a registered claim whose instance vanished is
/// deleted once its Node stops being Ready.
#[tokio::test(start_paused = true)]
async fn leaked_instances_are_terminated_and_claims_of_vanished_instances_deleted() {
    let h = Harness::start(json!({}));
    h.pod("web", json!({}));
    h.until(minutes(2), || h.pod_node("web")).await;
    let leaked = h.cloud.leak_instance("leaked");
    h.until(minutes(3), || {
        h.cloud.deleted().contains(&leaked).then_some(())
    })
    .await;
    let vanished = h.cloud.created()[0].clone();
    let claim = h
        .server
        .list::<NodeClaim>()
        .into_iter()
        .find(|c| c.status.as_ref().and_then(|s| s.provider_id.as_ref()) == Some(&vanished))
        .expect("the claim of the first instance");
    h.cloud.vanish(&vanished);
    h.until(minutes(5), || {
        h.claim(claim.metadata.name.as_deref().unwrap_or_default())
            .is_none()
            .then_some(())
    })
    .await;
    h.stop().await;
}

/// `consolidateAfter` counts from the last pod event on the node (upstream's
/// `lastPodEventTime`): a node that has run its pod for half an hour is not removed the moment
/// the pod leaves, but `consolidateAfter` later.
#[tokio::test(start_paused = true)]
async fn an_emptied_node_waits_consolidate_after_from_when_its_last_pod_left() {
    let h = Harness::start(json!({"spec": {"disruption": {
        "consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "10m",
    }}}));
    h.pod("web", json!({}));
    h.until(minutes(2), || h.pod_node("web")).await;
    let instance = h.cloud.created()[0].clone();
    tokio::time::sleep(minutes(30)).await;
    assert!(
        h.cloud.deleted().is_empty(),
        "a node running a pod that fits no cheaper type stays"
    );
    let consolidatable = || {
        h.server.list::<NodeClaim>().first().is_some_and(|c| {
            c.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Consolidatable" && c.status == "True")
            })
        })
    };
    assert!(consolidatable(), "its pod bound over consolidateAfter ago");
    h.server.delete::<Pod>("default", "web").expect("deleted");
    let left = h.clock.now();
    h.until(minutes(1), || (!consolidatable()).then_some(()))
        .await;
    let (_, removed) = h
        .until(minutes(20), || {
            h.cloud.deleted().contains(&instance).then_some(())
        })
        .await;
    let empty_for = elapsed(left, removed);
    assert!(
        empty_for >= SignedDuration::from_mins(10) && empty_for < SignedDuration::from_mins(11),
        "removed {empty_for:?} after its last pod left"
    );
    let claim = h.server.list::<NodeClaim>();
    assert!(
        claim.is_empty()
            || claim
                .iter()
                .all(|c| c.metadata.deletion_timestamp.is_some())
    );
    h.stop().await;
}

/// A terminating node's instance is not deleted while a volume is still attached to it
/// (upstream's `AwaitingVolumeDetachment`): it goes once the attachment does.
#[tokio::test(start_paused = true)]
async fn the_instance_waits_for_its_volumes_to_detach() {
    use k8s_openapi::api::storage::v1::VolumeAttachment;
    let h = Harness::start(json!({}));
    h.pod("web", json!({}));
    let (node, _) = h.until(minutes(2), || h.pod_node("web")).await;
    let attachment: VolumeAttachment = serde_json::from_value(json!({
        "metadata": {"name": "csi-1"},
        "spec": {"attacher": "ebs.csi.aws.com", "nodeName": node, "source": {"persistentVolumeName": "pv-1"}},
    }))
    .expect("a VolumeAttachment");
    h.server.create(&attachment).expect("created");
    let instance = h.cloud.created()[0].clone();
    h.server.delete::<Node>("", &node).expect("deleting");
    h.until(minutes(2), || {
        h.server
            .get::<Pod>("default", "web")
            .is_none()
            .then_some(())
    })
    .await;
    tokio::time::sleep(minutes(5)).await;
    assert!(
        h.server
            .list::<k8s_openapi::api::core::v1::Event>()
            .iter()
            .any(|e| e.reason.as_deref() == Some("AwaitingVolumeDetachment")
                && e.message.as_deref().is_some_and(|m| m.contains("csi-1"))),
        "the node says what it waits for"
    );
    let detached = h.clock.now();
    h.server
        .delete::<VolumeAttachment>("", "csi-1")
        .expect("detached");
    let (_, terminated) = h
        .until(minutes(2), || {
            h.cloud.deleted().contains(&instance).then_some(())
        })
        .await;
    assert!(
        terminated >= detached,
        "the instance went {:?} before its volume detached",
        elapsed(terminated, detached)
    );
    h.until(minutes(1), || {
        h.server.get::<Node>("", &node).is_none().then_some(())
    })
    .await;
    h.stop().await;
}

/// A node whose instance vanished and that stopped being Ready is let go without a drain: its
/// do-not-disrupt pod, which would otherwise hold it forever (no terminationGracePeriod), runs
/// nowhere anyway.
#[tokio::test(start_paused = true)]
async fn a_not_ready_node_whose_instance_is_gone_is_not_drained() {
    let h = Harness::start(json!({}));
    h.pod("batch", json!({"karpenter.sh/do-not-disrupt": "true"}));
    let (node, _) = h.until(minutes(2), || h.pod_node("batch")).await;
    h.cloud.vanish(&h.cloud.created()[0]);
    h.until(minutes(10), || {
        (h.server.get::<Node>("", &node).is_none()
            && h.server.list::<NodeClaim>().iter().all(|c| {
                c.status.as_ref().and_then(|s| s.provider_id.as_ref())
                    != Some(&h.cloud.created()[0])
            }))
        .then_some(())
    })
    .await;
    h.stop().await;
}

/// Upstream's orchestration queue: a drift command waiting on its replacement does not hold
/// up the next one. Two drifted nodes (a budget of 100%) in two zones get their replacements
/// launched together, though neither replacement registers for a while.
#[tokio::test(start_paused = true)]
async fn two_drifted_nodes_are_replaced_at_once_not_one_after_the_other() {
    let h = Harness::start(json!({"spec": {"disruption": {"budgets": [{"nodes": "100%"}]}}}));
    let zone = |z: &str| json!({"topology.kubernetes.io/zone": z});
    h.pod_in("a", "1", json!({}), zone("test-zone-1"));
    h.pod_in("b", "1", json!({}), zone("test-zone-2"));
    h.until(minutes(2), || h.pod_node("a").zip(h.pod_node("b")))
        .await;
    let first = h.cloud.created();
    assert_eq!(first.len(), 2);
    h.kubelets.store(false, Ordering::Relaxed);
    for id in &first {
        h.cloud.set_drifted(id, "ImageDrifted");
    }
    let drifted_at = h.clock.now();
    let (_, both_launched) = h
        .until(minutes(15), || (h.cloud.created().len() >= 4).then_some(()))
        .await;
    let waited = elapsed(drifted_at, both_launched);
    assert!(
        waited < SignedDuration::from_mins(2),
        "both replacements launched within {waited:?} of the drift, not one after the other"
    );
    h.kubelets.store(true, Ordering::Relaxed);
    h.until(minutes(10), || {
        first
            .iter()
            .all(|id| h.cloud.deleted().contains(id))
            .then_some(())
    })
    .await;
    h.stop().await;
}

/// Pods provisioning ignores, as upstream: one pinned to a hostname and one whose claim does
/// not exist yet get `FailedScheduling` "ignoring pod" with the reason and no NodeClaim; once
/// the claim (and its WaitForFirstConsumer class) exist, that pod gets a node.
#[tokio::test(start_paused = true)]
async fn ignored_pods_say_why_and_a_pod_gets_a_node_once_its_claim_exists() {
    use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim};
    use k8s_openapi::api::storage::v1::StorageClass;
    let h = Harness::start(json!({}));
    h.pod_in(
        "pinned",
        "1",
        json!({}),
        json!({"kubernetes.io/hostname": "node-1"}),
    );
    let with_claim: Pod = serde_json::from_value(json!({
        "metadata": {"name": "db", "namespace": "default"},
        "spec": {
            "containers": [{"name": "c", "image": "db", "resources": {"requests": {"cpu": "1"}}}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
        },
    }))
    .expect("a pod");
    h.server.create(&with_claim).expect("created");
    let reason = |pod: &str| {
        h.server
            .list::<Event>()
            .into_iter()
            .filter(|e| {
                e.involved_object.name.as_deref() == Some(pod)
                    && e.reason.as_deref() == Some("FailedScheduling")
            })
            .find_map(|e| e.message)
    };
    let (pinned, _) = h.until(minutes(1), || reason("pinned")).await;
    assert!(
        pinned.starts_with(
            "Failed to schedule pod, ignoring pod, label \"kubernetes.io/hostname\" is restricted"
        ),
        "{pinned}"
    );
    let (waiting, _) = h.until(minutes(1), || reason("db")).await;
    assert_eq!(
        waiting,
        "Failed to schedule pod, ignoring pod, persistentvolumeclaim \"default/data\" not found"
    );
    assert!(h.cloud.created().is_empty(), "no NodeClaim for either");
    let class: StorageClass = serde_json::from_value(json!({
        "metadata": {"name": "zonal"}, "provisioner": "ebs.csi.aws.com",
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowedTopologies": [{"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": ["test-zone-2"]}]}],
    }))
    .expect("a class");
    h.server.create(&class).expect("created");
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "data", "namespace": "default"},
        "spec": {"storageClassName": "zonal", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }))
    .expect("a claim");
    h.server.create(&claim).expect("created");
    let (node, _) = h.until(minutes(2), || h.pod_node("db")).await;
    let node: Node = h.server.get("", &node).expect("the node");
    assert_eq!(
        node.metadata
            .labels
            .unwrap_or_default()
            .get("topology.kubernetes.io/zone")
            .map(String::as_str),
        Some("test-zone-2"),
        "where its volume will be"
    );
    assert_eq!(h.cloud.created().len(), 1, "still none for the pinned pod");
    h.stop().await;
}

/// Static capacity (upstream's static provisioning and deprovisioning suites, end to end): a
/// NodePool with `replicas` gets that many NodeClaims with no pod at all, more when the
/// replicas go up (within `limits.nodes`), and loses the surplus when they go down.
#[tokio::test(start_paused = true)]
async fn a_static_node_pool_keeps_its_replicas() {
    let mut options = options();
    options.feature_gates = "StaticCapacity=true".parse().unwrap();
    let h = Harness::start_with(
        json!({"spec": {"replicas": 2, "limits": {"nodes": "3"}}}),
        options,
    );
    let live = |h: &Harness| {
        h.server
            .list::<NodeClaim>()
            .into_iter()
            .filter(|c| c.metadata.deletion_timestamp.is_none())
            .count()
    };
    h.until(minutes(1), || (live(&h) == 2).then_some(())).await;
    // Up to 5, but `limits.nodes` holds it at 3.
    h.server
        .merge::<NodePool>("", "default", json!({"spec": {"replicas": 5}}))
        .unwrap();
    h.until(minutes(1), || (live(&h) == 3).then_some(())).await;
    tokio::time::sleep(minutes(2)).await;
    assert_eq!(live(&h), 3, "never past limits.nodes");
    // Down to 1: two go, and their instances with them.
    h.server
        .merge::<NodePool>("", "default", json!({"spec": {"replicas": 1}}))
        .unwrap();
    h.until(minutes(5), || {
        (h.server.list::<NodeClaim>().len() == 1).then_some(())
    })
    .await;
    h.until(minutes(5), || (h.cloud.deleted().len() == 2).then_some(()))
        .await;
    h.stop().await;
}

/// With the gate off a static NodePool is ignored, as before.
#[tokio::test(start_paused = true)]
async fn without_the_gate_a_static_node_pool_gets_nothing() {
    let h = Harness::start(json!({"spec": {"replicas": 2}}));
    tokio::time::sleep(minutes(2)).await;
    assert!(h.server.list::<NodeClaim>().is_empty());
    h.stop().await;
}

/// A CapacityBuffer of `replicas` chunks of the `headroom` PodTemplate (500m each), with the
/// CRD installed so its status is a subresource.
fn buffer_and_template(h: &Harness, replicas: i32) {
    use k8s_openapi::api::core::v1::PodTemplate;
    use karpenter_api::capacitybuffer::CapacityBuffer;
    h.server
        .install_crds([karpenter_api::crd::CAPACITY_BUFFER.definition()])
        .expect("the CapacityBuffer CRD");
    let template: PodTemplate = serde_json::from_value(json!({
        "metadata": {"name": "headroom", "namespace": "default"},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "app", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}]},
        },
    }))
    .expect("a PodTemplate");
    h.server.create(&template).expect("created");
    let buffer: CapacityBuffer = serde_json::from_value(json!({
        "apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
        "metadata": {"name": "headroom", "namespace": "default"},
        "spec": {"podTemplateRef": {"name": "headroom"}, "replicas": replicas},
    }))
    .expect("a CapacityBuffer");
    h.server.create(&buffer).expect("created");
}

fn buffer_condition(h: &Harness, type_: &str) -> Option<(String, String)> {
    let buffer = h
        .server
        .get::<karpenter_api::capacitybuffer::CapacityBuffer>("default", "headroom")?;
    buffer
        .conditions()
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

/// Capacity buffers end to end (upstream's buffer controller and provisioning suites): the
/// buffer is resolved (`ReadyForProvisioning`), a NodeClaim is launched for its virtual pods
/// with no pod pending, the buffer then fits existing capacity (`Provisioning=True`), no
/// virtual pod is ever created, nominated or given an event, and the buffer's node is not
/// emptied.
#[tokio::test(start_paused = true)]
async fn a_capacity_buffer_launches_headroom_ahead_of_pods() {
    let mut options = options();
    options.feature_gates = "CapacityBuffer=true".parse().unwrap();
    let h = Harness::start_with(
        json!({"spec": {"disruption": {"consolidateAfter": "0s"}}}),
        options,
    );
    buffer_and_template(&h, 2);
    h.until(minutes(1), || {
        (buffer_condition(&h, "ReadyForProvisioning") == Some(("True".into(), "Resolved".into())))
            .then_some(())
    })
    .await;
    let stored = h
        .server
        .get::<karpenter_api::capacitybuffer::CapacityBuffer>("default", "headroom")
        .unwrap();
    let status = stored.status.unwrap();
    assert_eq!(status.replicas, Some(2));
    assert_eq!(
        status.pod_template_ref.map(|r| r.name).as_deref(),
        Some("headroom")
    );
    // A NodeClaim for the buffer, with no pod at all.
    h.until(minutes(2), || {
        (h.server.list::<NodeClaim>().len() == 1).then_some(())
    })
    .await;
    assert!(
        h.server.list::<Pod>().is_empty(),
        "virtual pods are never created"
    );
    h.until(minutes(3), || {
        (buffer_condition(&h, "Provisioning")
            == Some(("True".into(), "FitsExistingCapacity".into())))
        .then_some(())
    })
    .await;
    // Minutes on, the empty-looking node is kept, and no second one launched.
    tokio::time::sleep(minutes(5)).await;
    assert_eq!(h.server.list::<NodeClaim>().len(), 1);
    assert_eq!(h.cloud.deleted().len(), 0, "the buffer's node stays");
    // No event names a virtual pod.
    let events = h.server.list::<k8s_openapi::api::core::v1::Event>();
    assert!(
        events.iter().all(|e| !e
            .involved_object
            .name
            .as_deref()
            .unwrap_or_default()
            .starts_with("capacity-buffer-")),
        "{events:?}"
    );
    // A real pod takes the buffer's room at once (no launch), and the buffer gets a new node.
    h.pod_of("web", "500m", json!({}));
    let (node, _) = h.until(minutes(1), || h.pod_node("web")).await;
    assert!(!node.is_empty());
    assert_eq!(
        h.server.list::<NodeClaim>().len(),
        1,
        "bound to the buffer's node"
    );
    h.until(minutes(2), || {
        (h.server.list::<NodeClaim>().len() == 2).then_some(())
    })
    .await;
    h.stop().await;
}

/// With the gate off a CapacityBuffer is ignored: no status, no NodeClaim.
#[tokio::test(start_paused = true)]
async fn without_the_gate_a_capacity_buffer_gets_nothing() {
    let h = Harness::start(json!({}));
    buffer_and_template(&h, 2);
    tokio::time::sleep(minutes(2)).await;
    assert!(h.server.list::<NodeClaim>().is_empty());
    assert_eq!(buffer_condition(&h, "ReadyForProvisioning"), None);
    h.stop().await;
}

/// Reserved capacity end to end (upstream's "shouldn't fallback to on-demand or spot when
/// compatible reserved offerings are available"): the first pod's NodeClaim takes the one
/// reserved instance and is pinned to it; the second pod, which could have used it, waits for
/// the next round without a `FailedScheduling`, then falls back to on-demand.
#[tokio::test(start_paused = true)]
async fn reserved_capacity_is_used_first_and_the_next_pod_falls_back_a_round_later() {
    use k8s_openapi::api::core::v1::Event;
    use karpenter_core::instancetype::fake::FakeInstanceType;
    use karpenter_core::instancetype::{Offering, Reservation};
    const LABEL: &str = "karpenter.test.sh/reservation-id";
    let mut small = FakeInstanceType::new("small")
        .resources(&[("cpu", "2"), ("memory", "8Gi")])
        .offerings(&[("on-demand", "test-zone-1", 0.2)])
        .build();
    small.offerings.push(Offering {
        zone: "test-zone-1".into(),
        capacity_type: "reserved".into(),
        price: 0.000002,
        available: true,
        reservation: Some(Reservation {
            id: "r-small".into(),
            capacity: 1,
            label: LABEL.into(),
        }),
    });
    small.requirements.remove("karpenter.sh/capacity-type");
    small
        .requirements
        .add(karpenter_core::scheduling::Requirement::new(
            "karpenter.sh/capacity-type",
            karpenter_api::Operator::In,
            &["on-demand", "reserved"],
        ));
    let large = FakeInstanceType::new("large")
        .resources(&[("cpu", "8"), ("memory", "32Gi")])
        .offerings(&[("on-demand", "test-zone-1", 0.8)])
        .build();
    let h = Harness::start_on(
        json!({"spec": {"template": {"spec": {"requirements": [
            {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved", "on-demand"]},
        ]}}}}),
        options(),
        FakeCloudProvider::new(vec![Arc::new(small), Arc::new(large)]),
    );
    // Each fits a small node alone; together only a large one.
    h.pod_of("a", "1500m", json!({}));
    h.pod_of("b", "1500m", json!({}));
    let labels_of = |pod: &str| -> Option<BTreeMap<String, String>> {
        let node: Node = h.server.get("", &h.pod_node(pod)?)?;
        node.metadata.labels
    };
    let (first, _) = h
        .until(minutes(2), || {
            ["a", "b"]
                .into_iter()
                .find_map(|p| labels_of(p).map(|l| (p, l)))
        })
        .await;
    let (placed, labels) = first;
    assert_eq!(labels["karpenter.sh/capacity-type"], "reserved");
    assert_eq!(labels[LABEL], "r-small");
    assert_eq!(labels["node.kubernetes.io/instance-type"], "small");
    let claim = h
        .server
        .list::<NodeClaim>()
        .into_iter()
        .next()
        .expect("the claim");
    let pinned: Vec<_> = claim
        .spec
        .requirements
        .iter()
        .filter(|r| r.key == LABEL || r.key == "karpenter.sh/capacity-type")
        .map(|r| (r.key.as_str(), r.values.clone()))
        .collect();
    assert!(
        pinned.contains(&(LABEL, vec!["r-small".to_string()]))
            && pinned.contains(&("karpenter.sh/capacity-type", vec!["reserved".to_string()])),
        "{pinned:?}"
    );
    let other = if placed == "a" { "b" } else { "a" };
    let (labels, _) = h.until(minutes(2), || labels_of(other)).await;
    assert_eq!(labels["karpenter.sh/capacity-type"], "on-demand");
    assert!(!labels.contains_key(LABEL));
    // Deferred, not unschedulable: no FailedScheduling for the pod that waited.
    assert!(
        !h.server.list::<Event>().into_iter().any(|e| {
            e.involved_object.name.as_deref() == Some(other)
                && e.reason.as_deref() == Some("FailedScheduling")
        }),
        "the waiting pod was reported unschedulable"
    );
    assert_eq!(h.cloud.created().len(), 2);
    // The fallback came in a later round, not beside the reserved one.
    let mut created: Vec<Timestamp> = h
        .server
        .list::<NodeClaim>()
        .iter()
        .filter_map(|c| Some(c.metadata.creation_timestamp.clone()?.0))
        .collect();
    created.sort();
    assert!(created[1] > created[0], "{created:?}");
    h.stop().await;
}
