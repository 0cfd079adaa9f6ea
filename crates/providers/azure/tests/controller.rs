//! The controller with the Azure provider, end to end: an AKSNodeClass is resolved (Kubernetes
//! version, community-gallery images, subnet) and goes Ready; a pending pod becomes a
//! NodeClaim, the NodeClaim a NIC and a spot VM (the cheapest offering) with AKS's bootstrap
//! in its custom data and the providerID AKS registers; a capacity error marks the offering
//! unavailable; deleting the NodeClaim deletes the VM and its NIC. Against the fake API
//! server and the in-process ARM.

mod support;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use karpenter_api::{NodeClaim, NodePool};
use karpenter_azure::AKSNodeClass;
use karpenter_azure::provider::{AzureCloudProvider, KubeState};
use karpenter_cloudprovider::http::HttpClient;
use karpenter_controller::{Controller, Options};
use karpenter_testkit::{FakeApiServer, eventually};
use kube::Api;
use serde_json::{Value, json};
use support::{Shared, options, seed_cloud, start};
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
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"containers": [{"name": "web", "image": "nginx", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
    }))
    .unwrap();
    server.create(&pod).unwrap();
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
    let arm = support::arm(&url, "secret");
    let http = HttpClient::new(Duration::from_secs(5)).unwrap();
    let state = KubeState {
        node_classes: Api::all(server.client()),
        nodes: Api::all(server.client()),
    };
    let provider = Arc::new(AzureCloudProvider::new(arm, http, state, options()));
    let controller = Controller::new(
        server.client(),
        provider,
        Options {
            disable_leader_election: true,
            resync: Duration::from_millis(200),
            batch_idle_duration: Duration::from_millis(100),
            batch_max_duration: Duration::from_millis(500),
            ..Options::default()
        },
    );
    let ctx = controller.context();
    let stop = CancellationToken::new();
    let running = tokio::spawn(controller.run(stop.clone()));
    let status_loop = tokio::spawn(karpenter_azure::nodeclass_status::run(
        ctx.clone(),
        stop.clone(),
    ));

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

    stop.cancel();
    let _ = running.await;
    let _ = status_loop.await;
}
