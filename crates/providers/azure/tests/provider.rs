//! The Azure CloudProvider's launches against the in-process ARM, without a controller: what
//! the NIC joins (load balancer backend pools, the managed NSG on a user's VNet only), and a
//! backend pool that went away since it was listed.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use karpenter_api::NodeClaim;
use karpenter_azure::AKSNodeClass;
use karpenter_azure::provider::{AzureCloudProvider, StaticState};
use karpenter_cloudprovider::CloudProvider;
use karpenter_cloudprovider::http::HttpClient;
use serde_json::{Value, json};
use support::{NODE_RG, SUBNET, nics, options, pool_id, seed, seed_cloud, seed_load_balancer};

const AKS_SUBNET: &str = "/subscriptions/sub/resourceGroups/MC_rg_c_eastus/providers/Microsoft.Network/virtualNetworks/aks-vnet-12345678/subnets/aks-subnet";

/// An AKSNodeClass whose status the status loop has resolved.
fn ready_class(name: &str, subnet: &str) -> AKSNodeClass {
    let condition = |type_: &str| {
        json!({"type": type_, "status": "True", "reason": type_, "message": "",
               "lastTransitionTime": "2024-11-20T00:00:00Z", "observedGeneration": 1})
    };
    serde_json::from_value(json!({
        "apiVersion": "karpenter.azure.com/v1beta1", "kind": "AKSNodeClass",
        "metadata": {"name": name, "generation": 1},
        "spec": {"imageFamily": "Ubuntu2204", "vnetSubnetID": subnet},
        "status": {
            "kubernetesVersion": "1.33.2",
            "images": [{
                "id": "/CommunityGalleries/AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2/images/2204gen2containerd/versions/202411.12.0",
                "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
            }],
            "conditions": [condition("ImagesReady"), condition("KubernetesVersionReady"), condition("Ready")],
        },
    }))
    .unwrap()
}

fn claim(name: &str, class: &str) -> NodeClaim {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.azure.com", "kind": "AKSNodeClass", "name": class},
            "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["Standard_D2s_v3"]},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            ],
            "resources": {"requests": {"cpu": "1"}},
        },
    }))
    .unwrap()
}

async fn provider(cloud_url: &str) -> AzureCloudProvider<StaticState> {
    let classes: BTreeMap<String, AKSNodeClass> = [
        ("custom".to_string(), ready_class("custom", SUBNET)),
        ("managed".to_string(), ready_class("managed", AKS_SUBNET)),
    ]
    .into();
    AzureCloudProvider::new(
        support::arm(cloud_url, "secret"),
        HttpClient::new(Duration::from_secs(5)).unwrap(),
        StaticState {
            node_classes: classes,
            ..Default::default()
        },
        options(),
    )
}

fn pools(nic: &Value) -> Vec<String> {
    nic["properties"]["ipConfigurations"][0]["properties"]["loadBalancerBackendAddressPools"]
        .as_array()
        .map(|ps| {
            ps.iter()
                .map(|p| p["id"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn the_nic_joins_the_nsg_only_on_a_users_vnet() {
    let (url, cloud) = support::start().await;
    seed_cloud(&cloud);
    seed(
        &cloud,
        AKS_SUBNET,
        json!({"properties": {"addressPrefix": "10.224.0.0/16"}}),
    );
    let provider = provider(&url).await;

    provider
        .create(&claim("on-custom", "custom"))
        .await
        .unwrap();
    provider
        .create(&claim("on-managed", "managed"))
        .await
        .unwrap();

    let nics = nics(&cloud);
    let custom = &nics["aks-on-custom"];
    assert_eq!(
        custom["properties"]["networkSecurityGroup"]["id"],
        format!(
            "/subscriptions/sub/resourceGroups/{NODE_RG}/providers/Microsoft.Network/networkSecurityGroups/aks-agentpool-12345678-nsg"
        )
    );
    let managed = &nics["aks-on-managed"];
    assert!(
        managed["properties"].get("networkSecurityGroup").is_none(),
        "AKS's own subnet carries the NSG already: {managed}"
    );
    for nic in [custom, managed] {
        assert_eq!(
            pools(nic),
            [pool_id("aksOutboundBackendPool"), pool_id("kubernetes")]
        );
        assert_eq!(
            nic["properties"]["enableAcceleratedNetworking"], true,
            "D2s_v3 has it"
        );
        // Upstream's default network is Azure CNI overlay: pods take no NIC IPs.
        assert_eq!(
            nic["properties"]["ipConfigurations"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }
}

#[tokio::test]
async fn a_backend_pool_that_went_away_is_listed_again_once() {
    let (url, cloud) = support::start().await;
    seed_cloud(&cloud);
    let provider = provider(&url).await;
    provider.create(&claim("first", "custom")).await.unwrap();

    // The outbound pool is replaced behind the provider's cached list.
    seed_load_balancer(&cloud, &["aksOutboundBackendPool-v2", "kubernetes"]);
    let puts_before = cloud.lock().unwrap().puts;
    provider.create(&claim("second", "custom")).await.unwrap();

    let nics = nics(&cloud);
    assert_eq!(
        pools(&nics["aks-second"]),
        [pool_id("aksOutboundBackendPool-v2"), pool_id("kubernetes")]
    );
    assert_eq!(
        cloud.lock().unwrap().puts - puts_before,
        3,
        "a refused NIC, the NIC again, the VM"
    );
    // The first node keeps what it joined; only new NICs see the new pool.
    assert_eq!(
        pools(&nics["aks-first"])[0],
        pool_id("aksOutboundBackendPool")
    );
}

#[tokio::test]
async fn several_managed_nsgs_refuse_the_launch_by_name() {
    let (url, cloud) = support::start().await;
    seed_cloud(&cloud);
    seed(
        &cloud,
        &format!(
            "/subscriptions/sub/resourceGroups/{NODE_RG}/providers/Microsoft.Network/networkSecurityGroups/aks-agentpool-87654321-nsg"
        ),
        json!({"location": "eastus", "properties": {}}),
    );
    let provider = provider(&url).await;
    let err = provider.create(&claim("x", "custom")).await.unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("aks-agentpool-12345678-nsg")
            && message.contains("aks-agentpool-87654321-nsg"),
        "{message}"
    );
    assert!(nics(&cloud).is_empty(), "nothing is made");
}
