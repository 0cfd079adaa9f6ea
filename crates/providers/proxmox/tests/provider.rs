//! The CloudProvider against fakepve (a fake Proxmox VE API on loopback) and the test kit's API
//! server: a NodeClaim becomes a VM cloned from the NodeClass's template on the node with room,
//! sized for its type and started; a retried create finds it instead of making a second; list,
//! get and drift see it; delete stops and destroys it, and says NotFound once it is gone.

#[allow(dead_code)]
mod fakepve_support;

use std::time::Duration;

use fakepve_support::{FakePve, ROOT_PASSWORD, Seed, start};
use karpenter_api::NodeClaim;
use karpenter_cloudprovider::{CloudProvider, CloudProviderError};
use karpenter_proxmox::instance::{MARKER_TAG, TaskTiming};
use karpenter_proxmox::provider::{ProxmoxCloudProvider, ProxmoxOptions};
use karpenter_proxmox::pve::{ClustersConfig, PvePool};
use karpenter_proxmox::{ProxmoxNodeClass, ProxmoxUnmanagedTemplate};
use karpenter_testkit::FakeApiServer;
use serde_json::json;

fn pool(pve: &FakePve) -> PvePool {
    let config = ClustersConfig::parse(&format!(
        "clusters:\n  - url: {}\n    region: fake\n    username: root@pam\n    password: {ROOT_PASSWORD}\n    insecure: true\n",
        pve.url
    ))
    .unwrap();
    PvePool::from_config(&config, Duration::from_secs(10)).unwrap()
}

fn node_class(ready: bool) -> ProxmoxNodeClass {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.proxmox.sinextra.dev/v1alpha1",
        "kind": "ProxmoxNodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "instanceTemplateRef": {"kind": "ProxmoxUnmanagedTemplate", "name": "ubuntu"},
            "tags": ["k8s"],
        },
        "status": {
            "selectedZones": ["fake/pve1/9000"],
            "conditions": [{
                "type": "Ready", "status": if ready { "True" } else { "False" },
                "reason": if ready { "Ready" } else { "TemplatesNotFound" }, "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }],
        },
    }))
    .unwrap()
}

fn setup(ready: bool) -> FakeApiServer {
    let server = FakeApiServer::new();
    server
        .install_crds(karpenter_proxmox::CRDS.iter().map(|c| c.definition()))
        .unwrap();
    server.create(&node_class(ready)).unwrap();
    let template: ProxmoxUnmanagedTemplate = serde_json::from_value(json!({
        "apiVersion": "karpenter.proxmox.sinextra.dev/v1alpha1",
        "kind": "ProxmoxUnmanagedTemplate",
        "metadata": {"name": "ubuntu"},
        "spec": {"templateName": "ubuntu-template"},
    }))
    .unwrap();
    server.create(&template).unwrap();
    server
}

fn provider(pve: &FakePve, server: &FakeApiServer) -> ProxmoxCloudProvider {
    let options = ProxmoxOptions {
        tasks: TaskTiming {
            wait: Duration::from_secs(20),
            poll: Duration::from_millis(50),
        },
        ..ProxmoxOptions::default()
    };
    ProxmoxCloudProvider::new(pool(pve), server.client(), options)
}

fn claim() -> NodeClaim {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "default-abcde", "uid": "6f1c2b8e-0000-4000-8000-000000000001",
                     "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.proxmox.sinextra.dev", "kind": "ProxmoxNodeClass", "name": "default"},
            "requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            ],
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
        },
    }))
    .unwrap()
}

fn provider_id(claim: &NodeClaim) -> String {
    claim
        .status
        .as_ref()
        .and_then(|s| s.provider_id.clone())
        .unwrap()
}

#[tokio::test]
async fn a_nodeclaim_becomes_a_cloned_vm_and_goes_away_with_it() {
    let Some(pve) = start(Seed::default()) else {
        return;
    };
    let server = setup(true);
    let provider = provider(&pve, &server);
    let claim = claim();

    let created = provider.create(&claim).await.unwrap();
    let id = provider_id(&created);
    let (region, vmid) = karpenter_proxmox::provider_id::parse(&id).unwrap();
    assert_eq!(region, "fake");
    assert!(vmid >= 20_000, "{vmid} is from PROXMOX_VMID up");
    let labels = created.metadata.labels.clone().unwrap();
    assert_eq!(
        labels["topology.kubernetes.io/zone"], "pve1",
        "the template's node"
    );
    assert_eq!(labels["topology.kubernetes.io/region"], "fake");
    assert_eq!(labels["karpenter.sh/capacity-type"], "on-demand");
    let type_name = labels["node.kubernetes.io/instance-type"].clone();
    assert!(
        labels.contains_key("karpenter.proxmox.sinextra.dev/instance-image-id"),
        "{labels:?}"
    );
    let annotations = created.metadata.annotations.clone().unwrap();
    assert_eq!(
        annotations["karpenter.proxmox.sinextra.dev/proxmoxnodeclass-hash"],
        node_class(true).hash()
    );

    // The VM: named after the claim, sized for its type, tagged, running.
    let client = provider.clusters().get("fake").unwrap();
    let config = client.vm_config("pve1", vmid).await.unwrap();
    assert_eq!(config.get("name").as_deref(), Some("default-abcde"));
    let types = karpenter_proxmox::instancetype::default_specs();
    let spec = types.iter().find(|t| t.name == type_name).unwrap();
    assert_eq!(
        config.get("cores"),
        Some((spec.capacity.cpu / 1000).to_string())
    );
    assert_eq!(
        config.get("memory"),
        Some((spec.capacity.memory / (1024 * 1024)).to_string())
    );
    let tags = config.tags();
    assert!(
        tags.contains(&MARKER_TAG.to_string()) && tags.contains(&"k8s".to_string()),
        "{tags:?}"
    );
    assert!(client.vm_status("pve1", vmid).await.unwrap().is_running());

    // A retried create (a lost answer, a restart) finds the VM rather than making another.
    let again = provider.create(&claim).await.unwrap();
    assert_eq!(provider_id(&again), id);
    let named = client
        .vm_resources()
        .await
        .unwrap()
        .into_iter()
        .filter(|vm| vm.name == "default-abcde" && !vm.template)
        .count();
    assert_eq!(named, 1);

    // Listed (by the marker tag: the hand-made VMs are not), got, not drifted.
    let listed = provider.list().await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].metadata.name.as_deref(), Some("default-abcde"));
    assert_eq!(provider_id(&listed[0]), id);
    assert_eq!(provider_id(&provider.get(&id).await.unwrap()), id);
    let mut launched = claim.clone();
    launched.metadata.labels = created.metadata.labels.clone();
    launched.metadata.annotations = created.metadata.annotations.clone();
    launched.status = created.status.clone();
    assert_eq!(provider.is_drifted(&launched).await.unwrap(), None);

    // Deleted: stopped and destroyed; then NotFound, for the termination finalizer.
    provider.delete(&launched).await.unwrap();
    assert!(client.vm_by_id(vmid).await.unwrap().is_none());
    assert!(matches!(
        provider.delete(&launched).await,
        Err(CloudProviderError::NotFound(_))
    ));
    assert!(matches!(
        provider.get(&id).await,
        Err(CloudProviderError::NotFound(_))
    ));
    assert!(provider.list().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_node_class_that_is_not_ready_launches_nothing() {
    let Some(pve) = start(Seed::default()) else {
        return;
    };
    let server = setup(false);
    let provider = provider(&pve, &server);
    assert!(matches!(
        provider.create(&claim()).await,
        Err(CloudProviderError::NodeClassNotReady(_))
    ));
    assert!(provider.list().await.unwrap().is_empty());
}

#[tokio::test]
async fn instance_types_are_offered_where_the_nodes_have_room() {
    let Some(pve) = start(Seed::default()) else {
        return;
    };
    let server = setup(true);
    let provider = provider(&pve, &server);
    let pool: karpenter_api::NodePool = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.proxmox.sinextra.dev", "kind": "ProxmoxNodeClass", "name": "default"},
            "requirements": [],
        }}},
    }))
    .unwrap();
    let types = provider.instance_types(&pool).await.unwrap();
    assert_eq!(
        types.len(),
        karpenter_proxmox::instancetype::default_specs().len()
    );
    // fakepve's nodes have 4 CPUs and 8 GiB; a running VM takes 2 CPUs and 2 GiB of pve1.
    let available = |name: &str| {
        types
            .iter()
            .find(|t| t.name == name)
            .unwrap()
            .offerings
            .iter()
            .filter(|o| o.available)
            .map(|o| o.zone.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        available("c1.1VCPU-2GB"),
        ["pve1"],
        "only the template's node is selected"
    );
    assert!(available("c1.16VCPU-32GB").is_empty());
}

#[tokio::test]
async fn a_cdrom_node_class_boots_its_vm_with_the_rendered_cloud_init() {
    let Some(pve) = start(Seed::default()) else {
        return;
    };
    let server = setup(true);
    let mut class = node_class(true);
    class.spec.metadata_options = serde_json::from_value(json!({
        "type": "cdrom", "templatesRef": {"name": "k3s", "namespace": "kube-system"},
    }))
    .unwrap();
    server.delete::<ProxmoxNodeClass>("", "default").unwrap();
    server.create(&class).unwrap();
    let templates: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "k3s", "namespace": "kube-system"},
        "stringData": {"user-data": "#cloud-config\nhostname: {{ .Metadata.Hostname }}\nruncmd:\n  - k3s agent --kubelet-arg provider-id={{ .Metadata.ProviderID }}\n"},
    }))
    .unwrap();
    server.create(&templates).unwrap();
    let ca: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kube-root-ca.crt", "namespace": "kube-system"},
        "data": {"ca.crt": "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"},
    }))
    .unwrap();
    server.create(&ca).unwrap();
    let provider = provider(&pve, &server);

    let created = provider.create(&claim()).await.unwrap();
    let (_, vmid) = karpenter_proxmox::provider_id::parse(&provider_id(&created)).unwrap();
    let client = provider.clusters().get("fake").unwrap();
    let config = client.vm_config("pve1", vmid).await.unwrap();
    let ide2 = config.get("ide2").unwrap_or_default();
    assert!(
        ide2.contains(&format!("iso/karpenter-{vmid}-cloud-init.iso"))
            && ide2.contains("media=cdrom"),
        "{ide2}"
    );
    // The node's bootstrap token, named on the NodeClaim so deleting the node removes it.
    let token = created.metadata.annotations.clone().unwrap()
        ["karpenter.proxmox.sinextra.dev/proxmoxcloudinit-token"]
        .clone();
    let secrets = server.list::<k8s_openapi::api::core::v1::Secret>();
    assert!(
        secrets
            .iter()
            .any(|s| s.metadata.name.as_deref() == Some(&format!("bootstrap-token-{token}"))),
        "{secrets:?}"
    );
    provider.delete(&created_claim(&created)).await.unwrap();
    assert!(
        !server
            .list::<k8s_openapi::api::core::v1::Secret>()
            .iter()
            .any(|s| s.metadata.name.as_deref() == Some(&format!("bootstrap-token-{token}"))),
        "the token goes with the node"
    );
}

fn created_claim(created: &NodeClaim) -> NodeClaim {
    let mut c = claim();
    c.metadata.labels = created.metadata.labels.clone();
    c.metadata.annotations = created.metadata.annotations.clone();
    c.status = created.status.clone();
    c
}
