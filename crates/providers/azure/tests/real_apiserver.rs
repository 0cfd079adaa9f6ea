//! The controller with the Azure provider against a real Kubernetes control plane (API server,
//! scheduler, controller manager; no kubelets) and the in-process ARM: the AKSNodeClass CRD
//! with its two served versions judged by the real API server, the status loop writing through
//! the real status subresource, a Deployment's pod becoming a spot VM whose node the real
//! scheduler binds it to, and then Azure evicting that VM — the real node lifecycle controller
//! finds the node gone silent, garbage collection deletes its NodeClaim, termination lets the
//! node go, the real pod GC and ReplicaSet controller bring the pod back, and it lands on a
//! replacement.
//!
//! Skipped unless `KARPENTER_RS_REAL_KUBECONFIG` names such a cluster (CI has none):
//!
//! ```sh
//! KARPENTER_RS_REAL_KUBECONFIG=path/to/kubeconfig cargo test -p karpenter-azure --test real_apiserver
//! ```

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use karpenter_api::{NodeClaim, NodePool};
use karpenter_azure::AKSNodeClass;
use karpenter_azure::provider::{AzureCloudProvider, KubeState};
use karpenter_cloudprovider::http::HttpClient;
use karpenter_controller::{Controller, Options};
use karpenter_testkit::real;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use support::{Shared, seed_cloud, start};
use tokio_util::sync::CancellationToken;

const NAME: &str = "real-azure";
const WAIT: Duration = Duration::from_secs(60);
/// The node lifecycle controller's grace period (40 s), garbage collection and the pod GC.
const EVICTION_WAIT: Duration = Duration::from_secs(300);

async fn eventually<T, F: Future<Output = Option<T>>>(check: impl FnMut() -> F) -> Option<T> {
    real::eventually_within(WAIT, check).await
}

fn vm_names(cloud: &Shared) -> BTreeSet<String> {
    cloud
        .lock()
        .unwrap()
        .resources
        .keys()
        .filter(|id| id.contains("/virtualMachines/"))
        .map(|id| id.rsplit('/').next().unwrap().to_string())
        .collect()
}

/// The kubelets' part: a VM that exists registers its node (with the taint a Karpenter node
/// registers with, Ready, the claim's labels and allocatable) and keeps its lease; a node whose
/// VM is gone falls silent.
fn kubelets(
    client: Client,
    cloud: Shared,
    stop: CancellationToken,
) -> Vec<tokio::task::JoinHandle<()>> {
    let alive_cloud = cloud.clone();
    let renew = real::renew_nodes(
        client.clone(),
        move |node| {
            node.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("aks-"))
                && vm_names(&alive_cloud).contains(node.metadata.name.as_deref().unwrap())
        },
        stop.clone(),
    );
    let register = tokio::spawn(async move {
        // A kubelet of the control plane's version: another would be K8sVersionDrift.
        let version = client
            .apiserver_version()
            .await
            .expect("/version")
            .git_version;
        let claims: Api<NodeClaim> = Api::all(client.clone());
        let nodes: Api<Node> = Api::all(client.clone());
        while !stop.is_cancelled() {
            let vms = vm_names(&cloud);
            for claim in claims
                .list(&ListParams::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default()
            {
                // Launched: the VM exists and the claim knows its providerID.
                if claim
                    .status
                    .as_ref()
                    .is_none_or(|s| s.provider_id.is_none())
                {
                    continue;
                }
                let node_name = format!("aks-{}", claim.metadata.name.as_deref().unwrap());
                if !vms.contains(&node_name)
                    || nodes.get_opt(&node_name).await.ok().flatten().is_some()
                {
                    continue;
                }
                let (node, status) = support::registered_node(&claim, &version);
                if nodes.create(&PostParams::default(), &node).await.is_ok() {
                    let _ = nodes
                        .patch_status(
                            &node_name,
                            &PatchParams::default(),
                            &Patch::Merge(json!({"status": status})),
                        )
                        .await;
                }
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
        }
    });
    vec![renew, register]
}

async fn apply(client: &Client) {
    let apply = PatchParams::apply("karpenter-rs-tests").force();
    let classes: Api<AKSNodeClass> = Api::all(client.clone());
    let class: AKSNodeClass = serde_json::from_value(json!({
        "apiVersion": "karpenter.azure.com/v1beta1", "kind": "AKSNodeClass",
        "metadata": {"name": NAME}, "spec": {"imageFamily": "Ubuntu2204"},
    }))
    .unwrap();
    classes
        .patch(NAME, &apply, &Patch::Apply(&class))
        .await
        .expect("the AKSNodeClass applies");
    let pools: Api<NodePool> = Api::all(client.clone());
    let pool: NodePool = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": NAME},
        "spec": {
            "disruption": {"consolidateAfter": "Never"},
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.azure.com", "kind": "AKSNodeClass", "name": NAME},
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["Standard_D2s_v3"]},
                ],
            }},
        },
    }))
    .unwrap();
    pools
        .patch(NAME, &apply, &Patch::Apply(&pool))
        .await
        .expect("the NodePool applies");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": NAME},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": NAME}},
            "template": {
                "metadata": {"labels": {"app": NAME}},
                "spec": {
                    "nodeSelector": {"karpenter.sh/nodepool": NAME},
                    "tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 600}],
                    "containers": [{"name": "web", "image": "nginx", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
                },
            },
        },
    }))
    .unwrap();
    deployments
        .patch(NAME, &apply, &Patch::Apply(&deployment))
        .await
        .expect("the Deployment applies");
}

async fn bound_node(pods: &Api<Pod>) -> Option<String> {
    let list = pods
        .list(&ListParams::default().labels(&format!("app={NAME}")))
        .await
        .ok()?;
    list.items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .find_map(|p| p.spec.as_ref()?.node_name.clone())
}

/// Removes what the test made while the controller still runs, so its finalizers are honoured:
/// the workload, then the NodePool, whose NodeClaims and nodes go with it.
async fn clean_up(client: &Client) {
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    let _ = Api::<Deployment>::namespaced(client.clone(), "default")
        .delete(NAME, &now)
        .await;
    let _ = Api::<Pod>::namespaced(client.clone(), "default")
        .delete_collection(&now, &ListParams::default().labels(&format!("app={NAME}")))
        .await;
    let _ = Api::<NodePool>::all(client.clone())
        .delete(NAME, &DeleteParams::default())
        .await;
    let claims: Api<NodeClaim> = Api::all(client.clone());
    let gone = eventually(|| {
        let claims = claims.clone();
        async move {
            let left = claims
                .list(&ListParams::default().labels(&format!("karpenter.sh/nodepool={NAME}")))
                .await
                .ok()?;
            left.items.is_empty().then_some(())
        }
    })
    .await;
    assert!(gone.is_some(), "the NodePool's NodeClaims go with it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicted_spot_vm_is_replaced_on_a_real_control_plane() {
    let Some(client) = real::client().await else {
        eprintln!("skipped: {} is not set", real::KUBECONFIG_VAR);
        return;
    };
    real::install_crds(
        &client,
        karpenter_api::crd::CORE
            .iter()
            .chain(karpenter_azure::CRDS)
            .map(|c| c.definition()),
    )
    .await;
    let (url, cloud) = start().await;
    seed_cloud(&cloud);

    // A class written at the older served version is stored and read back as v1beta1.
    let old: Api<kube::api::DynamicObject> = Api::all_with(
        client.clone(),
        &kube::api::ApiResource {
            group: "karpenter.azure.com".into(),
            version: "v1alpha2".into(),
            api_version: "karpenter.azure.com/v1alpha2".into(),
            kind: "AKSNodeClass".into(),
            plural: "aksnodeclasses".into(),
        },
    );
    let old_class: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "karpenter.azure.com/v1alpha2", "kind": "AKSNodeClass",
        "metadata": {"name": format!("{NAME}-v1alpha2")}, "spec": {"imageFamily": "AzureLinux"},
    }))
    .unwrap();
    old.patch(
        &format!("{NAME}-v1alpha2"),
        &PatchParams::apply("karpenter-rs-tests").force(),
        &Patch::Apply(&old_class),
    )
    .await
    .expect("the API server serves v1alpha2");
    let classes: Api<AKSNodeClass> = Api::all(client.clone());
    let read = classes
        .get(&format!("{NAME}-v1alpha2"))
        .await
        .expect("readable as v1beta1");
    assert_eq!(read.spec.image_family, "AzureLinux");
    let _ = classes
        .delete(&format!("{NAME}-v1alpha2"), &DeleteParams::default())
        .await;

    apply(&client).await;
    let arm = support::arm(&url, "secret");
    let http = HttpClient::new(Duration::from_secs(5)).unwrap();
    let state = KubeState {
        node_classes: Api::all(client.clone()),
        nodes: Api::all(client.clone()),
    };
    let provider = Arc::new(AzureCloudProvider::new(
        arm,
        http,
        state,
        support::options(),
    ));
    let controller = Controller::new(
        client.clone(),
        provider,
        Options {
            disable_leader_election: true,
            garbage_collection_interval: Duration::from_secs(2),
            ..Options::default()
        },
    );
    let ctx = controller.context();
    let stop = CancellationToken::new();
    let mut tasks = vec![
        tokio::spawn(controller.run(stop.clone())),
        tokio::spawn(karpenter_azure::nodeclass_status::run(
            ctx.clone(),
            stop.clone(),
        )),
    ];
    tasks.extend(kubelets(client.clone(), cloud.clone(), stop.clone()));

    let ready = eventually(|| {
        let classes = classes.clone();
        async move {
            let c = classes.get(NAME).await.ok()?;
            c.status?
                .conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
                .then_some(())
        }
    })
    .await;
    assert!(
        ready.is_some(),
        "the status loop makes the AKSNodeClass Ready through the real API"
    );

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let first = eventually(|| {
        let pods = pods.clone();
        async move { bound_node(&pods).await }
    })
    .await
    .expect("the real scheduler binds the pod to the new spot node");
    assert!(first.starts_with("aks-"), "{first}");
    assert!(vm_names(&cloud).contains(&first));

    // Azure evicts the spot VM (evictionPolicy Delete): the VM and its NIC go.
    cloud
        .lock()
        .unwrap()
        .resources
        .retain(|id, _| !id.ends_with(&format!("/{first}")));

    let second = real::eventually_within(EVICTION_WAIT, || {
        let pods = pods.clone();
        let first = first.clone();
        async move { bound_node(&pods).await.filter(|n| *n != first) }
    })
    .await;
    let nodes: Api<Node> = Api::all(client.clone());
    let claims: Api<NodeClaim> = Api::all(client.clone());
    let second_is_a_vm = second
        .as_ref()
        .is_some_and(|n| vm_names(&cloud).contains(n));
    let outcome = (
        second.clone(),
        nodes.get_opt(&first).await.ok().flatten().is_none(),
        claims
            .get_opt(first.trim_start_matches("aks-"))
            .await
            .ok()
            .flatten()
            .is_none(),
    );

    clean_up(&client).await;
    stop.cancel();
    for task in tasks {
        let _ = task.await;
    }
    let second = outcome.0.expect("the pod runs again on a replacement node");
    assert!(second_is_a_vm, "{second} is a new VM");
    assert!(
        vm_names(&cloud).is_empty(),
        "the NodePool's VMs went with it"
    );
    assert!(outcome.1, "the evicted node is gone");
    assert!(outcome.2, "the evicted node's NodeClaim is gone");
}
