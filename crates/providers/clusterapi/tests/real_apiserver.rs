//! The controller with the Cluster API provider against a real Kubernetes control plane (API
//! server, scheduler, controller manager; no kubelets) acting as its own management cluster:
//! karpenter's CRDs, the ClusterAPINodeClass CRD and the test data's Cluster API CRDs judged
//! structural by the real API server; the MachineDeployment `scale` subresource and its
//! resourceVersion check as the real server serves them; the NodeClass status written through
//! the real status subresource; a Deployment's pod becoming a Machine of the cheaper
//! MachineDeployment (scaled up, claimed, registered as a Node) that the real scheduler binds
//! it to; and, once the Deployment is scaled to 0, the node consolidated, its Machine marked
//! and deleted and its MachineDeployment back at 0 replicas. The MachineSet controller and the
//! kubelets are stand-ins.
//!
//! Skipped unless `KARPENTER_RS_REAL_KUBECONFIG` names such a cluster (CI has none):
//!
//! ```sh
//! KARPENTER_RS_REAL_KUBECONFIG=path/to/kubeconfig cargo test -p karpenter-clusterapi --test real_apiserver
//! ```

mod support;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use karpenter_api::labels::NODE_POOL_LABEL;
use karpenter_api::{NodeClaim, NodePool};
use karpenter_clusterapi::ClusterAPINodeClass;
use karpenter_clusterapi::capi::{self, Version};
use karpenter_clusterapi::management::Management;
use karpenter_clusterapi::provider::{ClusterApiCloudProvider, ProviderOptions};
use karpenter_clusterapi::shape;
use karpenter_controller::{Controller, Options};
use karpenter_testkit::real;
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use support::{Made, NS, ProviderIds};
use tokio_util::sync::CancellationToken;

/// The NodePool, the NodeClass, the Deployment, and the prefix of the MachineDeployments (so
/// of the Machines and Nodes) of this test.
const NAME: &str = "capi-real";
const CHEAP: &str = "capi-real-small";
const DEAR: &str = "capi-real-large";
/// The stand-in infrastructure provider's providerIDs (`test:///<machine>`).
const PROVIDER_ID_PREFIX: &str = "test:///";
const WAIT: Duration = Duration::from_secs(120);

async fn eventually<T, F: Future<Output = Option<T>>>(check: impl FnMut() -> F) -> Option<T> {
    real::eventually_within(WAIT, check).await
}

fn capi_api(client: &Client, version: Version, kind: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), NS, &support::resource(version, kind))
}

fn parse<T: serde::de::DeserializeOwned>(o: DynamicObject) -> T {
    serde_json::from_value(serde_json::to_value(o).unwrap()).unwrap()
}

/// A node of this test: registered by the kubelet stand-in for one of its Machines.
fn ours(node: &Node) -> bool {
    node.metadata
        .name
        .as_deref()
        .is_some_and(|n| n.starts_with(NAME))
        && node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .is_some_and(|p| p.starts_with(PROVIDER_ID_PREFIX))
}

/// A member MachineDeployment of this test's workload cluster, in the test namespace.
fn machine_deployment(
    version: Version,
    name: &str,
    (cpu, memory): (&str, &str),
    price: &str,
) -> Value {
    let mut md = support::machine_deployment(
        version,
        name,
        (name, "zone-a"),
        (cpu, memory),
        price,
        json!({}),
    );
    md["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"] = json!(NAME);
    md["apiVersion"] = json!(format!("{}/{}", capi::CAPI_GROUP, version.as_str()));
    md["kind"] = json!("MachineDeployment");
    md
}

/// Removes what an earlier run may have left (it was cut off) and waits until it is gone, so
/// the test starts clean; run again at the end, it checks the test leaves nothing behind.
async fn clean(client: &Client) {
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    let _ = Api::<NodePool>::all(client.clone())
        .delete(NAME, &DeleteParams::default())
        .await;
    let _ = Api::<ClusterAPINodeClass>::all(client.clone())
        .delete(NAME, &DeleteParams::default())
        .await;
    // NodeClaims and Nodes of a run cut off before its controller released them keep their
    // finalizers, which no controller would release now.
    let claims: Api<NodeClaim> = Api::all(client.clone());
    let selector = ListParams::default().labels(&format!("{NODE_POOL_LABEL}={NAME}"));
    let no_finalizers = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    for claim in claims
        .list(&selector)
        .await
        .map(|l| l.items)
        .unwrap_or_default()
    {
        let name = claim.metadata.name.unwrap();
        let _ = claims
            .patch(&name, &PatchParams::default(), &no_finalizers)
            .await;
        let _ = claims.delete(&name, &now).await;
    }
    let nodes: Api<Node> = Api::all(client.clone());
    for node in nodes
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(ours)
    {
        let name = node.metadata.name.unwrap();
        let _ = nodes
            .patch(&name, &PatchParams::default(), &no_finalizers)
            .await;
        let _ = nodes.delete(&name, &now).await;
    }
    // The namespace takes the Deployment, the Cluster API objects and the pods with it (pods
    // of a deleted namespace go without a kubelet once they have no node or are forced).
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let _ = pods.delete_collection(&now, &ListParams::default()).await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let _ = namespaces.delete(NS, &DeleteParams::default()).await;
    let classes: Api<ClusterAPINodeClass> = Api::all(client.clone());
    let pools: Api<NodePool> = Api::all(client.clone());
    let gone = eventually(|| {
        let (namespaces, claims, nodes, pods, classes, pools) = (
            namespaces.clone(),
            claims.clone(),
            nodes.clone(),
            pods.clone(),
            classes.clone(),
            pools.clone(),
        );
        let selector = selector.clone();
        let now = now.clone();
        async move {
            // Pods of the namespace hang in Terminating without a kubelet: forced.
            let _ = pods.delete_collection(&now, &ListParams::default()).await;
            let namespace_gone = namespaces.get_opt(NS).await.ok()?.is_none();
            let claims_gone = claims.list(&selector).await.ok()?.items.is_empty();
            let nodes_gone = !nodes
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .iter()
                .any(ours);
            let class_gone = classes.get_opt(NAME).await.ok()?.is_none();
            let pool_gone = pools.get_opt(NAME).await.ok()?.is_none();
            (namespace_gone && claims_gone && nodes_gone && class_gone && pool_gone).then_some(())
        }
    })
    .await;
    assert!(
        gone.is_some(),
        "namespace {NS}, the NodePool, the NodeClass and this test's NodeClaims and Nodes are gone"
    );
}

/// The kubelets' part: a Machine with a providerID registers a Node named after it (as
/// kubeadm's join would), with the `karpenter.sh/unregistered` taint, the labels and capacity
/// its MachineDeployment's scale-from-zero annotations give, Ready; its lease and Ready
/// condition are renewed while it lives.
fn kubelets(
    client: Client,
    version: Version,
    stop: CancellationToken,
) -> Vec<tokio::task::JoinHandle<()>> {
    let renew = real::renew_nodes(client.clone(), ours, stop.clone());
    let register = tokio::spawn(async move {
        let kubelet_version = client
            .apiserver_version()
            .await
            .expect("/version")
            .git_version;
        let machines = capi_api(&client, version, "Machine");
        let mds = capi_api(&client, version, "MachineDeployment");
        let nodes: Api<Node> = Api::all(client.clone());
        // Each Machine registers once: a Node karpenter deleted stays deleted.
        let mut registered: HashSet<String> = HashSet::new();
        while !stop.is_cancelled() {
            if let (Ok(machines), Ok(mds)) = (
                machines.list(&ListParams::default()).await,
                mds.list(&ListParams::default()).await,
            ) {
                for m in machines.items.into_iter().map(parse::<capi::Machine>) {
                    let Some(provider_id) = m.provider_id() else {
                        continue;
                    };
                    if m.metadata.deletion_timestamp.is_some() || registered.contains(provider_id) {
                        continue;
                    }
                    let Some(md) = mds
                        .items
                        .iter()
                        .find(|d| d.metadata.name.as_deref() == m.machine_deployment())
                    else {
                        continue;
                    };
                    let annotations = md.metadata.annotations.clone().unwrap_or_default();
                    let mut labels = annotations
                        .get(shape::LABELS_ANNOTATION)
                        .map(|l| shape::parse_labels(l).unwrap())
                        .unwrap_or_default();
                    labels.insert("kubernetes.io/hostname".into(), m.name().into());
                    labels.insert("kubernetes.io/os".into(), "linux".into());
                    labels.insert("kubernetes.io/arch".into(), "amd64".into());
                    let capacity = json!({
                        "cpu": annotations[shape::CPU_ANNOTATION],
                        "memory": annotations[shape::MEMORY_ANNOTATION],
                        "pods": annotations.get(shape::MAX_PODS_ANNOTATION).cloned().unwrap_or("110".into()),
                    });
                    let node: Node = serde_json::from_value(json!({
                        "apiVersion": "v1", "kind": "Node",
                        "metadata": {"name": m.name(), "labels": labels},
                        "spec": {"providerID": provider_id,
                                 "taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]},
                    }))
                    .unwrap();
                    match nodes.create(&PostParams::default(), &node).await {
                        Ok(_) => {}
                        Err(kube::Error::Api(e)) if e.code == 409 => {}
                        Err(e) => {
                            eprintln!("kubelet stand-in: node {}: {e}", m.name());
                            continue;
                        }
                    }
                    registered.insert(provider_id.to_string());
                    // A Node's status is not taken on create: the kubelet reports it after.
                    let now = k8s_openapi::jiff::Timestamp::now().to_string();
                    let status = json!({"status": {
                        "capacity": capacity, "allocatable": capacity,
                        "nodeInfo": {"kubeletVersion": kubelet_version, "machineID": "", "systemUUID": "", "bootID": "",
                                     "kernelVersion": "", "osImage": "", "containerRuntimeVersion": "",
                                     "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"},
                        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                        "lastHeartbeatTime": now, "lastTransitionTime": now}],
                    }});
                    let _ = nodes
                        .patch_status(m.name(), &PatchParams::default(), &Patch::Merge(status))
                        .await;
                }
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_millis(300)) => {}
            }
        }
    });
    vec![renew, register]
}

/// Without kubelets, a deleted or evicted pod stays Terminating: this confirms its end as the
/// kubelet would, so the Deployment's scale-down and the node's drain finish.
fn pod_reaper(client: Client, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let pods: Api<Pod> = Api::namespaced(client, NS);
        let now = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        while !stop.is_cancelled() {
            for pod in pods
                .list(&ListParams::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default()
            {
                if pod.metadata.deletion_timestamp.is_some() {
                    let _ = pods
                        .delete(pod.metadata.name.as_deref().unwrap(), &now)
                        .await;
                }
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
        }
    })
}

/// The scale subresource as the provider uses it: replicas read with a resourceVersion, a
/// write at that resourceVersion taken, a write at a stale one refused with 409.
async fn check_scale_subresource(management: &Management) {
    let (replicas, first) = management.scale(NS, CHEAP).await.expect("scale reads");
    assert_eq!(replicas, 0);
    management
        .set_scale(NS, CHEAP, 1, &first)
        .await
        .expect("a scale at the resourceVersion read is taken");
    let stale = management
        .set_scale(NS, CHEAP, 0, &first)
        .await
        .expect_err("a scale at a stale resourceVersion is refused");
    assert!(stale.is_conflict(), "{stale}");
    let (replicas, second) = management.scale(NS, CHEAP).await.unwrap();
    assert_eq!(replicas, 1, "the scale wrote spec.replicas");
    assert_eq!(
        management
            .machine_deployment(NS, CHEAP)
            .await
            .unwrap()
            .unwrap()
            .replicas(),
        1
    );
    management.set_scale(NS, CHEAP, 0, &second).await.unwrap();
}

async fn apply(client: &Client, version: Version) {
    let apply = PatchParams::apply("karpenter-rs-tests").force();
    Api::<Namespace>::all(client.clone())
        .patch(
            NS,
            &apply,
            &Patch::Apply(
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
            ),
        )
        .await
        .expect("the namespace applies");
    let mds = capi_api(client, version, "MachineDeployment");
    for (name, shape, price) in [(CHEAP, ("2", "4Gi"), "0.10"), (DEAR, ("8", "32Gi"), "0.40")] {
        mds.patch(
            name,
            &apply,
            &Patch::Apply(machine_deployment(version, name, shape, price)),
        )
        .await
        .unwrap_or_else(|e| panic!("MachineDeployment {name} applies: {e}"));
    }
    Api::<ClusterAPINodeClass>::all(client.clone())
        .patch(
            NAME,
            &apply,
            &Patch::Apply(json!({
                "apiVersion": "karpenter.cluster.x-k8s.io/v1alpha1", "kind": "ClusterAPINodeClass",
                "metadata": {"name": NAME},
                "spec": {"scalableResourceSelector": {"matchLabels": {"cluster.x-k8s.io/cluster-name": NAME}}},
            })),
        )
        .await
        .expect("the ClusterAPINodeClass applies");
    Api::<NodePool>::all(client.clone())
        .patch(
            NAME,
            &apply,
            &Patch::Apply(json!({
                "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": NAME},
                "spec": {
                    "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"},
                    "template": {"spec": {
                        "nodeClassRef": {"group": "karpenter.cluster.x-k8s.io", "kind": "ClusterAPINodeClass", "name": NAME},
                        "requirements": [
                            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                        ],
                    }},
                },
            })),
        )
        .await
        .expect("the NodePool applies");
    // Only a node of this NodePool can take the pod, so the real scheduler marks it
    // Unschedulable until karpenter launches one.
    Api::<Deployment>::namespaced(client.clone(), NS)
        .patch(
            NAME,
            &apply,
            &Patch::Apply(json!({
                "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": NAME},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": NAME}},
                    "template": {
                        "metadata": {"labels": {"app": NAME}},
                        "spec": {
                            "nodeSelector": {NODE_POOL_LABEL: NAME},
                            "containers": [{"name": "web", "image": "nginx", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
                        },
                    },
                },
            })),
        )
        .await
        .expect("the Deployment applies");
}

/// Short loops, but upstream's 15 s consolidation validation: the real scheduler retries an
/// unschedulable pod with a backoff of up to 10 s, so a new node stays empty for seconds after
/// it registers, and only the validation (which finds the pod bound by then) keeps emptiness
/// from taking it back first, as in upstream.
fn options() -> Options {
    Options {
        disable_leader_election: true,
        batch_idle_duration: Duration::from_millis(500),
        batch_max_duration: Duration::from_secs(2),
        garbage_collection_interval: Duration::from_secs(2),
        instance_launch_grace: Duration::from_secs(5),
        disruption_poll: Duration::from_secs(1),
        drift_poll: Duration::from_secs(1),
        min_drain_time: Duration::from_millis(500),
        ..Options::default()
    }
}

fn is_ready(
    conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    type_: &str,
) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == type_ && c.status == "True")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_scales_a_machine_deployment_up_and_back_on_a_real_control_plane() {
    let Some(client) = real::client().await else {
        eprintln!("skipped: {} is not set", real::KUBECONFIG_VAR);
        return;
    };
    let started = Instant::now();
    let mut crds: Vec<Value> = karpenter_api::crd::CORE
        .iter()
        .chain(karpenter_clusterapi::CRDS)
        .map(|c| c.definition())
        .collect();
    crds.extend(support::capi_crds(&["v1beta1", "v1beta2"]));
    real::install_crds(&client, crds).await;
    clean(&client).await;

    // The provider finds the newest version through the real discovery.
    let management = Management::discover(client.clone())
        .await
        .expect("the real server serves Cluster API");
    let version = management.version();
    assert_eq!(version, Version::V1beta2);
    apply(&client, version).await;
    check_scale_subresource(&management).await;
    eprintln!(
        "[{:>5.1}s] CRDs, objects, scale subresource",
        started.elapsed().as_secs_f64()
    );

    let stop = CancellationToken::new();
    let (made, machine_sets): (Arc<Mutex<Made>>, _) = support::spawn_machine_sets_on(
        client.clone(),
        version,
        Some(NS),
        ProviderIds::NextPass,
        Duration::from_millis(250),
        stop.clone(),
    );
    let provider = ClusterApiCloudProvider::new(
        management.clone(),
        Api::all(client.clone()),
        ProviderOptions {
            poll: Duration::from_millis(200),
            machine_deployments_ttl: Duration::from_secs(1),
            ..ProviderOptions::default()
        },
    );
    let controller = Controller::new(client.clone(), Arc::new(provider), options());
    let mut tasks = vec![
        tokio::spawn(controller.run_with_provider_controllers(stop.clone())),
        machine_sets,
        pod_reaper(client.clone(), stop.clone()),
    ];
    tasks.extend(kubelets(client.clone(), version, stop.clone()));

    let classes: Api<ClusterAPINodeClass> = Api::all(client.clone());
    let ready = eventually(|| {
        let classes = classes.clone();
        async move {
            let status = classes.get(NAME).await.ok()?.status?;
            (is_ready(&status.conditions, "Ready")
                && is_ready(&status.conditions, "MachineDeploymentsReady"))
            .then_some(())
        }
    })
    .await;
    assert!(
        ready.is_some(),
        "the ClusterAPINodeClass goes Ready through the real status subresource: {:?}",
        classes.get(NAME).await.map(|c| c.status)
    );
    eprintln!(
        "[{:>5.1}s] NodeClass Ready",
        started.elapsed().as_secs_f64()
    );

    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let node_name = eventually(|| {
        let pods = pods.clone();
        async move {
            pods.list(&ListParams::default().labels(&format!("app={NAME}")))
                .await
                .ok()?
                .items
                .into_iter()
                .find_map(|p| p.spec?.node_name)
        }
    })
    .await
    .expect("the real scheduler binds the pod to a new node");
    eprintln!(
        "[{:>5.1}s] pod bound to {node_name}",
        started.elapsed().as_secs_f64()
    );

    // The node is a Machine of the cheaper MachineDeployment that the provider claimed for
    // the NodeClaim naming it.
    let nodes: Api<Node> = Api::all(client.clone());
    let node = nodes.get(&node_name).await.unwrap();
    let provider_id = node.spec.unwrap().provider_id.unwrap();
    let machines = capi_api(&client, version, "Machine");
    let machine: capi::Machine = machines
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(parse::<capi::Machine>)
        .find(|m| m.provider_id() == Some(provider_id.as_str()))
        .expect("the node's Machine");
    assert_eq!(machine.machine_deployment(), Some(CHEAP));
    assert!(
        machine
            .metadata
            .labels
            .as_ref()
            .unwrap()
            .contains_key(capi::MEMBER_LABEL),
        "claimed with the member label"
    );
    let claim_name = machine
        .node_claim()
        .expect("claimed for a NodeClaim")
        .to_string();
    let claim = Api::<NodeClaim>::all(client.clone())
        .get(&claim_name)
        .await
        .unwrap();
    assert_eq!(
        claim.metadata.annotations.as_ref().unwrap()[capi::MACHINE_ANNOTATION],
        format!("{NS}/{}", machine.name())
    );
    assert_eq!(
        claim.status.as_ref().unwrap().provider_id.as_deref(),
        Some(provider_id.as_str())
    );
    assert_eq!(management.scale(NS, CHEAP).await.unwrap().0, 1);
    assert_eq!(management.scale(NS, DEAR).await.unwrap().0, 0);

    // No pod left: the empty node is consolidated, its Machine marked and deleted, and the
    // MachineDeployment back at 0.
    Api::<Deployment>::namespaced(client.clone(), NS)
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 0}})),
        )
        .await
        .unwrap();
    let claims: Api<NodeClaim> = Api::all(client.clone());
    let consolidated = eventually(|| {
        let (machines, nodes, claims, management, made) = (
            machines.clone(),
            nodes.clone(),
            claims.clone(),
            management.clone(),
            made.clone(),
        );
        let (machine_name, node_name, claim_name) = (
            machine.name().to_string(),
            node_name.clone(),
            claim_name.clone(),
        );
        async move {
            let machine_gone = machines.get_opt(&machine_name).await.ok()?.is_none();
            let node_gone = nodes.get_opt(&node_name).await.ok()?.is_none();
            let claim_gone = claims.get_opt(&claim_name).await.ok()?.is_none();
            let scaled_in = management.scale(NS, CHEAP).await.ok()?.0 == 0;
            let marked = made.lock().unwrap().marked.contains(&machine_name);
            (machine_gone && node_gone && claim_gone && scaled_in && marked).then_some(())
        }
    })
    .await;
    assert!(
        consolidated.is_some(),
        "the node is consolidated: its Machine marked and deleted, {CHEAP} back at 0 (Machines {:?}, replicas {:?}, made {:?} deleted {:?} marked {:?})",
        machines.list(&ListParams::default()).await.map(|l| l
            .items
            .into_iter()
            .map(|m| m.metadata.name)
            .collect::<Vec<_>>()),
        management.scale(NS, CHEAP).await.map(|s| s.0).ok(),
        made.lock().unwrap().created,
        made.lock().unwrap().deleted,
        made.lock().unwrap().marked,
    );
    eprintln!("[{:>5.1}s] consolidated", started.elapsed().as_secs_f64());
    assert!(
        machines
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty(),
        "no Machine is left"
    );
    assert_eq!(
        made.lock().unwrap().created,
        vec![machine.name().to_string()],
        "one Machine was made"
    );
    // Nothing of the run is left for the clean-up to take: no NodeClaim, no Node, no replica.
    let selector = ListParams::default().labels(&format!("{NODE_POOL_LABEL}={NAME}"));
    assert!(claims.list(&selector).await.unwrap().items.is_empty());
    assert!(
        !nodes
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .any(ours)
    );
    assert_eq!(management.scale(NS, DEAR).await.unwrap().0, 0);

    stop.cancel();
    for task in tasks {
        let _ = task.await;
    }
    clean(&client).await;
    eprintln!("[{:>5.1}s] cleaned up", started.elapsed().as_secs_f64());
}
