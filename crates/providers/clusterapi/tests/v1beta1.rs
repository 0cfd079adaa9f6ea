//! A management cluster with Cluster API before v1.11, serving only `cluster.x-k8s.io/v1beta1`
//! (its own test binary: the fake server learns CRDs process-wide).

mod support;

use karpenter_api::NodeClaim;
use karpenter_cloudprovider::CloudProvider;
use karpenter_clusterapi::capi::{self, Version};
use karpenter_clusterapi::management::Management;
use karpenter_clusterapi::provider::ClusterApiCloudProvider;
use serde_json::json;
use support::{Clusters, ProviderIds, machine_deployment};
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn v1beta1_is_spoken_where_v1beta2_is_not_served() {
    let c = Clusters::new(&["v1beta1"]);
    assert_eq!(c.version, Version::V1beta1);
    let management = Management::discover(c.management.client()).await.unwrap();
    assert_eq!(management.version(), Version::V1beta1);
    c.create_machine_deployment(machine_deployment(
        c.version,
        "workers",
        ("m5.large", "us-east-1a"),
        ("2", "8Gi"),
        "0.096",
        json!({}),
    ))
    .await;
    c.node_class("default", json!({}));
    let stop = CancellationToken::new();
    let (made, sets) = support::spawn_machine_sets(&c, ProviderIds::NextPass, stop.clone());
    let p = ClusterApiCloudProvider::new(
        management,
        kube::Api::all(c.workload.client()),
        support::fast(),
    );
    let mut claim: NodeClaim = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "default-x", "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {"nodeClassRef": {"group": "karpenter.cluster.x-k8s.io", "kind": "ClusterAPINodeClass", "name": "default"},
                 "requirements": [], "resources": {"requests": {"cpu": "1"}}},
    }))
    .unwrap();
    let launched = p.create(&claim).await.unwrap();
    assert_eq!(
        launched.metadata.labels.as_ref().unwrap()["node.kubernetes.io/instance-type"],
        "m5.large"
    );
    let md = c.machine_deployment("workers").await;
    assert_eq!(md.replicas(), 1);
    let hash =
        launched.metadata.annotations.as_ref().unwrap()[capi::TEMPLATE_HASH_ANNOTATION].clone();
    assert_eq!(hash, md.template_hash(), "v1beta1 references hash the same");

    claim.metadata.annotations = launched.metadata.annotations.clone();
    claim.status = launched.status.clone();
    assert_eq!(p.is_drifted(&claim).await.unwrap(), None);
    assert_eq!(p.list().await.unwrap().len(), 1);
    p.delete(&claim).await.unwrap();
    assert_eq!(c.replicas("workers").await, 0);
    support_wait_deleted(&made).await;
    let e = p.delete(&claim).await.unwrap_err();
    assert!(
        matches!(e, karpenter_cloudprovider::CloudProviderError::NotFound(_)),
        "{e}"
    );
    stop.cancel();
    sets.await.unwrap();
}

async fn support_wait_deleted(made: &std::sync::Mutex<support::Made>) {
    karpenter_testkit::eventually(std::time::Duration::from_secs(10), || {
        (made.lock().unwrap().deleted.len() == 1).then_some(())
    })
    .await
    .expect("the MachineSet deletes the marked Machine");
}
