//! The controller with the Azure provider, end to end: an AKSNodeClass is resolved (Kubernetes
//! version, community-gallery images, subnet) and goes Ready; a pending pod becomes a
//! NodeClaim, the NodeClaim a NIC and a spot VM (the cheapest offering) with AKS's bootstrap
//! in its custom data and the providerID AKS registers; a capacity error marks the offering
//! unavailable; deleting the NodeClaim deletes the VM and its NIC; a spot VM Azure evicts
//! (deletes) has its NodeClaim and node replaced. Against the fake API server (with its
//! scheduler stand-in and a kubelet stand-in here) and the in-process ARM.

mod support;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use karpenter_api::{NodeClaim, NodePool};
use karpenter_azure::AKSNodeClass;
use karpenter_azure::provider::{AzureCloudProvider, KubeState};
use karpenter_cloudprovider::http::HttpClient;
use karpenter_controller::{Context, Controller, Options};
use karpenter_testkit::{FakeApiServer, eventually};
use kube::Api;
use serde_json::{Value, json};
use support::{Shared, seed_cloud, start};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(30);
fn setup(server: &FakeApiServer) {
    server
        .install_crds(karpenter_azure::CRDS.iter().map(|c| c.definition()))
        .unwrap();
    let class: AKSNodeClass = serde_json::from_value(json!({
        "apiVersion": "karpenter.azure.com/v1beta1", "kind": "AKSNodeClass",
        "metadata": {"name": "default"},
        "spec": {"imageFamily": "Ubuntu2204"},
    }))
    .unwrap();
    server.create(&class).unwrap();
    let pool: NodePool = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.azure.com", "kind": "AKSNodeClass", "name": "default"},
            "requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["Standard_D2s_v3", "Standard_D2_v2"]},
            ],
        }}},
    }))
    .unwrap();
    server.create(&pool).unwrap();
    server.create(&pending_pod()).unwrap();
}

fn pending_pod() -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"containers": [{"name": "web", "image": "nginx", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
    }))
    .unwrap()
}

type Provider = AzureCloudProvider<KubeState>;

/// The controller and the AKSNodeClass status loop, running.
struct Running {
    ctx: Arc<Context<Provider>>,
    stop: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Running {
    /// Starts them against `server` and the ARM at `arm_url`, with quick loops over `options`.
    fn start(server: &FakeApiServer, arm_url: &str, options: Options) -> Self {
        let arm = support::arm(arm_url, "secret");
        let http = HttpClient::new(Duration::from_secs(5)).unwrap();
        let state = KubeState {
            node_classes: Api::all(server.client()),
            nodes: Api::all(server.client()),
        };
        let provider = Arc::new(AzureCloudProvider::new(
            arm,
            http,
            state,
            support::options(),
        ));
        let controller = Controller::new(
            server.client(),
            provider,
            Options {
                disable_leader_election: true,
                resync: Duration::from_millis(200),
                batch_idle_duration: Duration::from_millis(100),
                batch_max_duration: Duration::from_millis(500),
                ..options
            },
        );
        let ctx = controller.context();
        let stop = CancellationToken::new();
        let tasks = vec![
            tokio::spawn(controller.run(stop.clone())),
            tokio::spawn(karpenter_azure::nodeclass_status::run(
                ctx.clone(),
                stop.clone(),
            )),
        ];
        Self { ctx, stop, tasks }
    }

    async fn stop(self) {
        self.stop.cancel();
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

fn vms(cloud: &Shared) -> Vec<Value> {
    cloud
        .lock()
        .unwrap()
        .resources
        .iter()
        .filter(|(id, _)| id.contains("/virtualMachines/"))
        .map(|(_, v)| v.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_pod_becomes_a_spot_vm_that_goes_with_its_nodeclaim() {
    let (url, cloud) = start().await;
    seed_cloud(&cloud);
    // The cheapest size cannot be allocated anywhere: it is marked, and the next is launched.
    cloud
        .lock()
        .unwrap()
        .refuse
        .insert("Standard_D2s_v3".into(), "AllocationFailed".into());
    let server = FakeApiServer::new();
    setup(&server);
    let running = Running::start(&server, &url, Options::default());
    let ctx = running.ctx.clone();

    // The status loop resolves the class.
    let resolved = eventually(WAIT, || {
        let c = server.get::<AKSNodeClass>("", "default")?;
        let s = c.status?;
        s.conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
            .then_some(s)
    })
    .await
    .expect("the AKSNodeClass goes Ready");
    assert_eq!(resolved.kubernetes_version.as_deref(), Some("1.33.2"));
    assert!(
        resolved.images[0]
            .id
            .ends_with("/2204gen2containerd/versions/202411.12.0"),
        "{:?}",
        resolved.images
    );

    // The pod gets a NodeClaim, the NodeClaim a VM.
    let claim = eventually(WAIT, || {
        server
            .list::<NodeClaim>()
            .into_iter()
            .find(|c| c.status.as_ref().is_some_and(|s| s.provider_id.is_some()))
    })
    .await
    .expect("a NodeClaim is launched");
    let name = claim.metadata.name.clone().unwrap();
    let status = claim.status.clone().unwrap();
    assert_eq!(
        status.provider_id.as_deref(),
        Some(format!("azure:///subscriptions/sub/resourceGroups/mc_rg_c_eastus/providers/Microsoft.Compute/virtualMachines/aks-{name}").as_str())
    );
    assert!(status.image_id.unwrap().ends_with("/versions/202411.12.0"));
    let vms = vms(&cloud);
    assert_eq!(vms.len(), 1, "one VM for one claim");
    let vm = &vms[0];
    assert_eq!(vm["properties"]["priority"], "Spot", "spot is cheaper");
    assert_eq!(
        vm["properties"]["hardwareProfile"]["vmSize"], "Standard_D2_v2",
        "the size that failed to allocate is not asked for again"
    );
    assert!(ctx.provider.unavailable().is_unavailable(
        "Standard_D2s_v3",
        "eastus-1",
        "spot",
        std::time::Instant::now()
    ));
    assert_eq!(vm["properties"]["evictionPolicy"], "Delete");
    assert_eq!(vm["tags"]["karpenter.sh_nodepool"], "default");
    let custom_data = vm["properties"]["osProfile"]["customData"]
        .as_str()
        .unwrap();
    assert!(!custom_data.is_empty());
    // The NIC joins the load balancer (the node's way out) and, on this user-made VNet, the
    // cluster's NSG.
    let nic = &support::nics(&cloud)[&format!("aks-{name}")];
    assert_eq!(
        nic["properties"]["ipConfigurations"][0]["properties"]["loadBalancerBackendAddressPools"],
        json!([{"id": support::pool_id("aksOutboundBackendPool")}, {"id": support::pool_id("kubernetes")}])
    );
    assert!(
        nic["properties"]["networkSecurityGroup"]["id"]
            .as_str()
            .unwrap()
            .ends_with("/networkSecurityGroups/aks-agentpool-12345678-nsg")
    );
    let labels = claim.metadata.labels.clone().unwrap();
    assert_eq!(labels["karpenter.sh/capacity-type"], "spot");
    assert_eq!(labels["kubernetes.azure.com/scalesetpriority"], "spot");

    // Deleting the claim deletes its VM and NIC.
    let claims: Api<NodeClaim> = Api::all(server.client());
    claims
        .delete(&name, &Default::default())
        .await
        .expect("delete");
    eventually(WAIT, || {
        let cloud = cloud.lock().unwrap();
        let left = cloud
            .resources
            .keys()
            .any(|id| id.ends_with(&format!("/aks-{name}")));
        (!left).then_some(())
    })
    .await
    .expect("the VM and NIC are deleted");
    eventually(WAIT, || {
        server.get::<NodeClaim>("", &name).is_none().then_some(())
    })
    .await
    .expect("the claim goes once its VM is gone");

    running.stop().await;
}

/// What the kubelets, the node lifecycle controller and a ReplicaSet would do, reduced: a VM
/// that exists registers its node (Ready), a node whose VM is gone turns `Ready=Unknown`, and
/// the `web` pod is recreated, pending, whenever it is gone.
fn spawn_kubelets(
    server: FakeApiServer,
    cloud: Shared,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while !stop.is_cancelled() {
            let vm_names: Vec<String> = vms(&cloud)
                .iter()
                .map(|v| v["name"].as_str().unwrap().to_string())
                .collect();
            for claim in server.list::<NodeClaim>() {
                // Launched: the VM exists and the claim knows its providerID.
                if claim
                    .status
                    .as_ref()
                    .is_none_or(|s| s.provider_id.is_none())
                {
                    continue;
                }
                let node_name = format!("aks-{}", claim.metadata.name.as_deref().unwrap());
                if !vm_names.contains(&node_name) || server.get::<Node>("", &node_name).is_some() {
                    continue;
                }
                let (mut node, status) = support::registered_node(&claim, "v1.33.2");
                node.status = serde_json::from_value(status).ok();
                let _ = server.create(&node);
            }
            for node in server.list::<Node>() {
                let name = node.metadata.name.clone().unwrap();
                let ready = node
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
                if ready && !vm_names.contains(&name) {
                    let _ = server.merge::<Node>(
                        "",
                        &name,
                        json!({"status": {"conditions": [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}]}}),
                    );
                }
            }
            if server.get::<Pod>("default", "web").is_none() {
                let _ = server.create(&pending_pod());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
}

fn bound_to(server: &FakeApiServer) -> Option<String> {
    server.get::<Pod>("default", "web")?.spec?.node_name
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicted_spot_vm_has_its_nodeclaim_and_node_replaced() {
    let (url, cloud) = start().await;
    seed_cloud(&cloud);
    let server = FakeApiServer::new();
    setup(&server);
    let running = Running::start(
        &server,
        &url,
        Options {
            garbage_collection_interval: Duration::from_millis(300),
            ..Options::default()
        },
    );
    let scheduler = server.spawn_cluster(Duration::from_millis(100));
    let kubelets = spawn_kubelets(server.clone(), cloud.clone(), running.stop.clone());

    let first = eventually(WAIT, || bound_to(&server))
        .await
        .expect("the pod runs on a new spot node");
    assert_eq!(vms(&cloud)[0]["properties"]["priority"], "Spot");

    // Azure evicts the spot VM: with evictionPolicy Delete the VM and its NIC go.
    cloud
        .lock()
        .unwrap()
        .resources
        .retain(|id, _| !id.ends_with(&format!("/{first}")));

    let second = eventually(WAIT, || bound_to(&server).filter(|n| *n != first))
        .await
        .expect("the pod runs again, on a replacement");
    let claim_names: Vec<String> = server
        .list::<NodeClaim>()
        .iter()
        .map(|c| format!("aks-{}", c.metadata.name.as_deref().unwrap()))
        .collect();
    assert_eq!(claim_names, [second], "the evicted node's claim is gone");
    eventually(WAIT, || {
        server.get::<Node>("", &first).is_none().then_some(())
    })
    .await
    .expect("the evicted node is deleted");
    assert_eq!(vms(&cloud).len(), 1);

    running.stop().await;
    scheduler.abort();
    let _ = kubelets.await;
}
