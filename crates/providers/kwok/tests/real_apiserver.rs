//! The controller with the KWOK provider against a real Kubernetes API server, scheduler and
//! controller manager (no kubelets): what the test kit's fake cannot show — CRDs installed
//! from the registry's definitions and judged by the real apiserver, real watches, the real
//! scheduler binding the pod, the real garbage collector and Eviction API on the way out.
//!
//! Skipped unless `KARPENTER_RS_REAL_KUBECONFIG` names the kubeconfig of such a cluster (a
//! local control plane built from source; CI has none). Run with:
//!
//! ```sh
//! KARPENTER_RS_REAL_KUBECONFIG=path/to/kubeconfig cargo test -p karpenter-kwok --test real_apiserver
//! ```

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use karpenter_api::labels::{NODE_POOL_LABEL, ZONE_LABEL};
use karpenter_api::{NodeClaim, NodePool};
use karpenter_controller::{Controller, Options};
use karpenter_kwok::{KWOKNodeClass, KwokProvider};
use karpenter_testkit::real;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const NAME: &str = "real-e2e";
const WAIT: Duration = Duration::from_secs(60);

/// Polls `check` every 250 ms until it answers or `WAIT` passes.
async fn eventually<T, F: Future<Output = Option<T>>>(check: impl FnMut() -> F) -> Option<T> {
    real::eventually_within(WAIT, check).await
}

/// Applies karpenter's CRDs and the KWOK provider's, as the chart does, and waits until the
/// API server serves them.
async fn install_crds(client: &Client) {
    real::install_crds(
        client,
        karpenter_api::crd::CORE
            .iter()
            .chain(karpenter_kwok::CRDS)
            .map(|c| c.definition()),
    )
    .await;
}

/// Creates `pod`, retrying while a pod of that name from an earlier run is still going.
async fn create_once_gone(pods: &Api<Pod>, pod: &Pod) {
    eventually(|| {
        let pods = pods.clone();
        let pod = pod.clone();
        async move { pods.create(&PostParams::default(), &pod).await.ok() }
    })
    .await
    .expect("the pod is created once an old one of its name is gone");
}

/// Applies a KWOKNodeClass and a NodePool of that name (linux, amd64) with `disruption`.
async fn apply_class_and_pool(
    client: &Client,
    name: &str,
    disruption: serde_json::Value,
) -> (Api<KWOKNodeClass>, Api<NodePool>) {
    let apply = PatchParams::apply("karpenter-rs-tests").force();
    let classes: Api<KWOKNodeClass> = Api::all(client.clone());
    let class: KWOKNodeClass = serde_json::from_value(json!({
        "apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass",
        "metadata": {"name": name}, "spec": {},
    }))
    .unwrap();
    classes
        .patch(name, &apply, &Patch::Apply(&class))
        .await
        .expect("the KWOKNodeClass applies");
    let pools: Api<NodePool> = Api::all(client.clone());
    let pool: NodePool = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
        "spec": {
            "disruption": disruption,
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": name},
                "requirements": [
                    {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                ],
            }},
        },
    }))
    .unwrap();
    pools
        .patch(name, &apply, &Patch::Apply(&pool))
        .await
        .expect("the NodePool applies");
    (classes, pools)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_pod_gets_a_kwok_node_and_the_node_goes_with_its_pool() {
    let Some(client) = real::client().await else {
        eprintln!("skipped: KARPENTER_RS_REAL_KUBECONFIG is not set");
        return;
    };
    install_crds(&client).await;
    let (classes, pools) = apply_class_and_pool(&client, NAME, json!({})).await;

    let controller = Controller::new(
        client.clone(),
        Arc::new(KwokProvider::new(client.clone())),
        Options {
            disable_leader_election: true,
            ..Options::default()
        },
    );
    let stop = CancellationToken::new();
    let running = tokio::spawn(controller.run_with_provider_controllers(stop.clone()));

    // Only a node of this pool can take the pod, so the real scheduler marks it Unschedulable
    // until karpenter launches one.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    // No kubelet confirms a pod's end here, so pods go at once (grace period 0).
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    let _ = pods.delete(NAME, &now).await;
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": NAME},
        "spec": {
            "nodeSelector": {NODE_POOL_LABEL: NAME},
            "containers": [{"name": "c", "image": "app", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
        },
    }))
    .unwrap();
    create_once_gone(&pods, &pod).await;

    let node_name = eventually(|| {
        let pods = pods.clone();
        async move { pods.get(NAME).await.ok()?.spec?.node_name }
    })
    .await
    .expect("the scheduler binds the pod to a launched node");
    let claims: Api<NodeClaim> = Api::all(client.clone());
    let claim = claims
        .list(&ListParams::default().labels(&format!("{NODE_POOL_LABEL}={NAME}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|c| c.status.as_ref().and_then(|s| s.node_name.as_deref()) == Some(&node_name))
        .expect("the node's NodeClaim");
    assert_eq!(
        claim.spec.node_class_ref.kind, "KWOKNodeClass",
        "the claim names the pool's NodeClass"
    );
    // `kubectl get nodepools` shows it: NODES 1 and READY True, through the real status
    // subresource.
    let counted = eventually(|| {
        let pools = pools.clone();
        async move {
            let status = pools.get(NAME).await.ok()?.status?;
            let ready = status
                .conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            (status.nodes == Some(1) && ready).then_some(status)
        }
    })
    .await
    .expect("the NodePool's status counts its node and says Ready");
    assert_eq!(counted.resources["nodes"].0, "1");

    // Deleting the pool: the garbage collector deletes its claims, termination drains the pod
    // through the Eviction API and the instance (the Node) goes.
    pods.delete(NAME, &now).await.unwrap();
    pools
        .delete(NAME, &DeleteParams::background())
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let gone = eventually(|| {
        let nodes = nodes.clone();
        let node_name = node_name.clone();
        async move {
            nodes
                .get_opt(&node_name)
                .await
                .ok()?
                .is_none()
                .then_some(())
        }
    })
    .await;
    assert!(gone.is_some(), "the node {node_name} is deleted");
    let claims_gone = eventually(|| {
        let claims = claims.clone();
        async move {
            claims
                .list(&ListParams::default().labels(&format!("{NODE_POOL_LABEL}={NAME}")))
                .await
                .ok()?
                .items
                .is_empty()
                .then_some(())
        }
    })
    .await;
    assert!(claims_gone.is_some(), "the NodeClaims are gone");

    stop.cancel();
    running.await.unwrap();
    if let Err(e) = classes.delete(NAME, &DeleteParams::default()).await {
        panic!("deleting the KWOKNodeClass: {e}");
    }
}

/// Stands in for the kubelets this control plane lacks (the kwok controller's job in a real
/// KWOK cluster): renews each KWOK node's Lease and Ready condition, so the node lifecycle
/// controller does not mark the nodes unreachable after 40 s — a NotReady node counts as
/// disrupting against its NodePool's budget, and the scale-down would stall for that reason.
fn fake_kubelets(client: Client, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
    real::renew_nodes(
        client,
        |node| {
            node.metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(karpenter_kwok::provider::KWOK_NODE_KEY))
        },
        stop,
    )
}

/// Node names the API server has for `pool`.
async fn pool_nodes(nodes: &Api<Node>, pool: &str) -> Option<std::collections::BTreeSet<String>> {
    Some(
        nodes
            .list(&ListParams::default().labels(&format!("{NODE_POOL_LABEL}={pool}")))
            .await
            .ok()?
            .items
            .into_iter()
            .filter_map(|n| n.metadata.name)
            .collect(),
    )
}

/// Deletes `pool` and waits until the API server has none of its nodes left.
async fn delete_pool_and_wait(client: &Client, pools: &Api<NodePool>, pool: &str) {
    pools
        .delete(pool, &DeleteParams::background())
        .await
        .unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    let gone = eventually(|| {
        let nodes = nodes.clone();
        async move { pool_nodes(&nodes, pool).await?.is_empty().then_some(()) }
    })
    .await;
    assert!(gone.is_some(), "the pool's nodes go with it");
}

/// Upstream's scale-down on a real control plane: pods that each need their own node, most of
/// them deleted. The nodes they leave empty go, budget by budget, and the controller's state
/// ends equal to the API server's — a node deleted while a write of ours was in flight must
/// not linger in state, or it counts against the budget as "being deleted" for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaled_down_pods_leave_nodes_that_go_and_state_follows_the_api_server() {
    const POOL: &str = "real-scale";
    const PODS: usize = 12;
    const KEEP: usize = 3;
    let Some(client) = real::client().await else {
        eprintln!("skipped: KARPENTER_RS_REAL_KUBECONFIG is not set");
        return;
    };
    install_crds(&client).await;
    // consolidateAfter leaves the real scheduler time to bind a pod to its new node: it may
    // hold an unschedulable pod back for a while, and an empty node would go first.
    let (classes, pools) = apply_class_and_pool(
        &client,
        POOL,
        json!({"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "20s"}),
    )
    .await;

    let controller = Controller::new(
        client.clone(),
        Arc::new(KwokProvider::new(client.clone())),
        Options {
            disable_leader_election: true,
            disruption_poll: Duration::from_secs(1),
            consolidation_validation: Duration::from_secs(1),
            min_drain_time: Duration::ZERO,
            ..Options::default()
        },
    );
    let state = controller.context().cluster.clone();
    let stop = CancellationToken::new();
    let running = tokio::spawn(controller.run_with_provider_controllers(stop.clone()));
    let kubelets = fake_kubelets(client.clone(), stop.clone());

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    let name = |i: usize| format!("{POOL}-{i}");
    for i in 0..PODS {
        let _ = pods.delete(&name(i), &now).await;
    }
    for i in 0..PODS {
        // One pod per node: required anti-affinity to each other on the hostname.
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name(i), "labels": {"app": POOL}},
            "spec": {
                "nodeSelector": {NODE_POOL_LABEL: POOL},
                "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": POOL}}, "topologyKey": "kubernetes.io/hostname"},
                ]}},
                "containers": [{"name": "c", "image": "app", "resources": {"requests": {"cpu": "100m"}}}],
            },
        }))
        .unwrap();
        create_once_gone(&pods, &pod).await;
    }
    let bound = eventually(|| {
        let pods = pods.clone();
        async move {
            let list = pods
                .list(&ListParams::default().labels(&format!("app={POOL}")))
                .await
                .ok()?;
            let nodes: std::collections::BTreeSet<_> = list
                .items
                .iter()
                .filter_map(|p| p.spec.as_ref()?.node_name.clone())
                .collect();
            (nodes.len() == PODS).then_some(())
        }
    })
    .await;
    assert!(bound.is_some(), "each pod is bound to a node of its own");

    for i in KEEP..PODS {
        pods.delete(&name(i), &now).await.unwrap();
    }
    let nodes: Api<Node> = Api::all(client.clone());
    let shrunk = real::eventually_within(Duration::from_secs(240), || {
        let nodes = nodes.clone();
        async move { (pool_nodes(&nodes, POOL).await?.len() == KEEP).then_some(()) }
    })
    .await;
    let in_state =
        |state: &karpenter_controller::state::Cluster| -> std::collections::BTreeSet<String> {
            state
                .nodes
                .all()
                .iter()
                .filter(|n| {
                    n.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(NODE_POOL_LABEL))
                        .map(String::as_str)
                        == Some(POOL)
                })
                .filter_map(|n| n.metadata.name.clone())
                .collect()
        };
    assert!(
        shrunk.is_some(),
        "the empty nodes go: {:?} left, {:?} in state",
        pool_nodes(&nodes, POOL).await,
        in_state(&state),
    );
    let agrees = eventually(|| {
        let nodes = nodes.clone();
        let state = state.clone();
        async move { (pool_nodes(&nodes, POOL).await? == in_state(&state)).then_some(()) }
    })
    .await;
    assert!(
        agrees.is_some(),
        "state holds the API server's nodes: {:?} there, {:?} in state",
        pool_nodes(&nodes, POOL).await,
        in_state(&state),
    );
    let claims: Api<NodeClaim> = Api::all(client.clone());
    let claims_in_api = claims
        .list(&ListParams::default().labels(&format!("{NODE_POOL_LABEL}={POOL}")))
        .await
        .unwrap()
        .items
        .len();
    let claims_in_state = state
        .node_claims
        .all()
        .iter()
        .filter(|c| {
            c.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(NODE_POOL_LABEL))
                .map(String::as_str)
                == Some(POOL)
        })
        .count();
    assert_eq!(
        claims_in_state, claims_in_api,
        "state holds the API server's NodeClaims"
    );

    // Clean up: the pool's deletion takes its nodes.
    for i in 0..KEEP {
        pods.delete(&name(i), &now).await.unwrap();
    }
    delete_pool_and_wait(&client, &pools, POOL).await;
    stop.cancel();
    running.await.unwrap();
    kubelets.await.unwrap();
    classes
        .delete(POOL, &DeleteParams::default())
        .await
        .unwrap();
}

/// NodeOverlay drift on a real API server: the NodeOverlay CRD's rules, its status written
/// through the real status subresource, the overlay's hash recorded at launch, and a capacity
/// change (a merge patch, watched) drifting the node it launched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capacity_overlay_change_drifts_the_node_it_launched() {
    const POOL: &str = "real-overlay";
    let Some(client) = real::client().await else {
        eprintln!("skipped: KARPENTER_RS_REAL_KUBECONFIG is not set");
        return;
    };
    install_crds(&client).await;
    let (classes, pools) =
        apply_class_and_pool(&client, POOL, json!({"consolidateAfter": "Never"})).await;
    let overlays: Api<karpenter_api::nodeoverlay::NodeOverlay> = Api::all(client.clone());
    let overlay = |fuse: &str| -> karpenter_api::nodeoverlay::NodeOverlay {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": POOL},
            "spec": {
                "requirements": [{"key": NODE_POOL_LABEL, "operator": "In", "values": [POOL]}],
                "capacity": {"smarter-devices/fuse": fuse},
            },
        }))
        .unwrap()
    };
    let apply = PatchParams::apply("karpenter-rs-tests").force();
    overlays
        .patch(POOL, &apply, &Patch::Apply(&overlay("1")))
        .await
        .expect("the NodeOverlay applies");

    let mut options = Options {
        disable_leader_election: true,
        drift_poll: Duration::from_secs(1),
        overlay_poll: Duration::from_millis(500),
        ..Options::default()
    };
    options.feature_gates.node_overlay = true;
    let controller = Controller::new(
        client.clone(),
        Arc::new(KwokProvider::new(client.clone())),
        options,
    );
    let stop = CancellationToken::new();
    let running = tokio::spawn(controller.run_with_provider_controllers(stop.clone()));
    let kubelets = fake_kubelets(client.clone(), stop.clone());

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    let _ = pods.delete(POOL, &now).await;
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": POOL},
        "spec": {
            "nodeSelector": {NODE_POOL_LABEL: POOL},
            "containers": [{"name": "c", "image": "app", "resources": {"requests": {"cpu": "1"}}}],
        },
    }))
    .unwrap();
    create_once_gone(&pods, &pod).await;
    let node_name = eventually(|| {
        let pods = pods.clone();
        async move { pods.get(POOL).await.ok()?.spec?.node_name }
    })
    .await
    .expect("the scheduler binds the pod to a launched node");
    let claims: Api<NodeClaim> = Api::all(client.clone());
    let by_pool = ListParams::default().labels(&format!("{NODE_POOL_LABEL}={POOL}"));
    let claim = claims
        .list(&by_pool)
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|c| c.status.as_ref().and_then(|s| s.node_name.as_deref()) == Some(&node_name))
        .expect("the node's NodeClaim");
    let recorded = claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(karpenter_api::nodeoverlay::CAPACITY_OVERLAY_HASH_ANNOTATION))
        .cloned()
        .expect("the launch records the overlay");
    // The overlay's status, through the real status subresource.
    let ready = eventually(|| {
        let overlays = overlays.clone();
        async move {
            let status = overlays.get(POOL).await.ok()?.status?;
            status
                .conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
                .then_some(())
        }
    })
    .await;
    assert!(ready.is_some(), "the NodeOverlay is Ready");

    overlays
        .patch(
            POOL,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"capacity": {"smarter-devices/fuse": "2"}}})),
        )
        .await
        .unwrap();
    let name = claim.metadata.name.clone().unwrap();
    let reason = eventually(|| {
        let claims = claims.clone();
        let name = name.clone();
        async move {
            let claim = claims.get_opt(&name).await.ok()??;
            let drifted = claim
                .status?
                .conditions
                .into_iter()
                .find(|c| c.type_ == "Drifted" && c.status == "True")?;
            Some(drifted.reason)
        }
    })
    .await;
    assert_eq!(reason.as_deref(), Some("NodeOverlayDrifted"));
    // Drift replaces it: a new claim of the pool, recorded under the new overlay.
    let fresh = eventually(|| {
        let claims = claims.clone();
        let by_pool = by_pool.clone();
        let recorded = recorded.clone();
        async move {
            claims
                .list(&by_pool)
                .await
                .ok()?
                .items
                .into_iter()
                .find_map(|c| {
                    let hash = c
                        .metadata
                        .annotations?
                        .get(karpenter_api::nodeoverlay::CAPACITY_OVERLAY_HASH_ANNOTATION)?
                        .clone();
                    (hash != recorded).then_some(hash)
                })
        }
    })
    .await;
    assert!(
        fresh.is_some(),
        "a replacement launched under the new overlay"
    );

    pods.delete(POOL, &now).await.unwrap();
    delete_pool_and_wait(&client, &pools, POOL).await;
    stop.cancel();
    running.await.unwrap();
    kubelets.await.unwrap();
    overlays
        .delete(POOL, &DeleteParams::default())
        .await
        .unwrap();
    classes
        .delete(POOL, &DeleteParams::default())
        .await
        .unwrap();
}

/// A CapacityBuffer on a real API server: the CRD (`autoscaling.x-k8s.io/v1beta1`) and its
/// rules as the real server judges them, a PodTemplate read, the buffer's status written
/// through the status subresource, and headroom launched with no pod pending at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capacity_buffer_launches_headroom_with_no_pod_pending() {
    const POOL: &str = "real-buffer";
    let Some(client) = real::client().await else {
        eprintln!("skipped: KARPENTER_RS_REAL_KUBECONFIG is not set");
        return;
    };
    install_crds(&client).await;
    let (classes, pools) = apply_class_and_pool(&client, POOL, json!({})).await;
    let apply = PatchParams::apply("karpenter-rs-tests").force();
    let templates: Api<k8s_openapi::api::core::v1::PodTemplate> =
        Api::namespaced(client.clone(), "default");
    let template: k8s_openapi::api::core::v1::PodTemplate = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": POOL},
        "template": {"spec": {
            "nodeSelector": {NODE_POOL_LABEL: POOL},
            "containers": [{"name": "c", "image": "app", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}],
        }},
    }))
    .unwrap();
    templates
        .patch(POOL, &apply, &Patch::Apply(&template))
        .await
        .expect("the PodTemplate applies");
    let buffers: Api<karpenter_api::capacitybuffer::CapacityBuffer> =
        Api::namespaced(client.clone(), "default");
    let buffer: karpenter_api::capacitybuffer::CapacityBuffer = serde_json::from_value(json!({
        "apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
        "metadata": {"name": POOL, "namespace": "default"},
        "spec": {"podTemplateRef": {"name": POOL}, "replicas": 2},
    }))
    .unwrap();
    buffers
        .patch(POOL, &apply, &Patch::Apply(&buffer))
        .await
        .expect("the CapacityBuffer applies");

    let mut options = Options {
        disable_leader_election: true,
        ..Options::default()
    };
    options.feature_gates.capacity_buffer = true;
    let controller = Controller::new(
        client.clone(),
        Arc::new(KwokProvider::new(client.clone())),
        options,
    );
    let stop = CancellationToken::new();
    let running = tokio::spawn(controller.run_with_provider_controllers(stop.clone()));
    let kubelets = fake_kubelets(client.clone(), stop.clone());

    let claims: Api<NodeClaim> = Api::all(client.clone());
    let by_pool = ListParams::default().labels(&format!("{NODE_POOL_LABEL}={POOL}"));
    let launched = eventually(|| {
        let claims = claims.clone();
        let by_pool = by_pool.clone();
        async move {
            let items = claims.list(&by_pool).await.ok()?.items;
            (!items.is_empty()).then_some(items.len())
        }
    })
    .await;
    assert!(launched.is_some(), "the buffer's headroom is launched");
    let status = eventually(|| {
        let buffers = buffers.clone();
        async move {
            let status = buffers.get(POOL).await.ok()?.status?;
            let holds = |t: &str| {
                status
                    .conditions
                    .iter()
                    .any(|c| c.type_ == t && c.status == "True")
            };
            (holds("ReadyForProvisioning") && holds("Provisioning")).then_some(status)
        }
    })
    .await
    .expect("the buffer's status says it is provisioned for");
    assert_eq!(status.replicas, Some(2));
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let virtual_pods = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| {
            p.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("capacity-buffer-"))
        })
        .count();
    assert_eq!(virtual_pods, 0, "virtual pods are never created");

    buffers
        .delete(POOL, &DeleteParams::default())
        .await
        .unwrap();
    delete_pool_and_wait(&client, &pools, POOL).await;
    stop.cancel();
    running.await.unwrap();
    kubelets.await.unwrap();
    templates
        .delete(POOL, &DeleteParams::default())
        .await
        .unwrap();
    classes
        .delete(POOL, &DeleteParams::default())
        .await
        .unwrap();
}

/// Default topology spread (`--scheduler-config`) on a real control plane: a ReplicaSet whose
/// pods the real controller manager creates (real owner references, real labels) and that
/// declare no spread get the cluster's zonal default, their selector deduced from the
/// ReplicaSet the controller watches, so karpenter launches one node per zone where it would
/// otherwise launch one for all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_sets_pods_get_the_clusters_default_zonal_spread() {
    const POOL: &str = "real-spread";
    let Some(client) = real::client().await else {
        eprintln!("skipped: KARPENTER_RS_REAL_KUBECONFIG is not set");
        return;
    };
    install_crds(&client).await;
    let options = Options {
        disable_leader_election: true,
        scheduler_config: karpenter_controller::options::scheduler_config(
            "podTopologySpread:\n  defaultConstraints:\n  - maxSkew: 1\n    topologyKey: topology.kubernetes.io/zone\n    whenUnsatisfiable: DoNotSchedule\n",
        )
        .unwrap(),
        ..Options::default()
    };
    let controller = Controller::new(
        client.clone(),
        Arc::new(KwokProvider::new(client.clone())),
        options,
    );
    let stop = CancellationToken::new();
    let running = tokio::spawn(controller.run_with_provider_controllers(stop.clone()));
    let kubelets = fake_kubelets(client.clone(), stop.clone());
    // What a run cut short left (its pods would already have their node) goes first, while
    // the controller runs to terminate its nodes.
    let replica_sets: Api<k8s_openapi::api::apps::v1::ReplicaSet> =
        Api::namespaced(client.clone(), "default");
    let _ = replica_sets.delete(POOL, &DeleteParams::foreground()).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let by_app = ListParams::default().labels(&format!("app={POOL}"));
    let no_pods = eventually(|| {
        let pods = pods.clone();
        let by_app = by_app.clone();
        async move {
            pods.list(&by_app)
                .await
                .ok()?
                .items
                .is_empty()
                .then_some(())
        }
    })
    .await;
    assert!(no_pods.is_some(), "an earlier run's pods are gone");
    let pools: Api<NodePool> = Api::all(client.clone());
    if pools.get_opt(POOL).await.ok().flatten().is_some() {
        delete_pool_and_wait(&client, &pools, POOL).await;
    }
    let (classes, pools) = apply_class_and_pool(&client, POOL, json!({})).await;

    let rs: k8s_openapi::api::apps::v1::ReplicaSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": POOL},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": POOL}},
            "template": {
                "metadata": {"labels": {"app": POOL}},
                "spec": {
                    "nodeSelector": {NODE_POOL_LABEL: POOL},
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "c", "image": "app", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}],
                },
            },
        },
    }))
    .unwrap();
    replica_sets
        .patch(
            POOL,
            &PatchParams::apply("karpenter-rs-tests").force(),
            &Patch::Apply(&rs),
        )
        .await
        .expect("the ReplicaSet applies");

    let claims: Api<NodeClaim> = Api::all(client.clone());
    let by_pool = ListParams::default().labels(&format!("{NODE_POOL_LABEL}={POOL}"));
    let zones = eventually(|| {
        let claims = claims.clone();
        let by_pool = by_pool.clone();
        async move {
            let zones: std::collections::BTreeSet<String> = claims
                .list(&by_pool)
                .await
                .ok()?
                .items
                .iter()
                .filter_map(|c| c.metadata.labels.as_ref()?.get(ZONE_LABEL).cloned())
                .collect();
            (zones.len() >= 3).then_some(zones)
        }
    })
    .await
    .expect("three small replicas get a node in each of three zones");
    assert_eq!(zones.len(), 3, "{zones:?}");

    replica_sets
        .delete(POOL, &DeleteParams::background())
        .await
        .unwrap();
    delete_pool_and_wait(&client, &pools, POOL).await;
    stop.cancel();
    running.await.unwrap();
    kubelets.await.unwrap();
    classes
        .delete(POOL, &DeleteParams::default())
        .await
        .unwrap();
}
