//! Node VMs against an in-process ARM: Entra ID's token endpoint (which checks the service
//! principal's secret), NICs and VMs created by PUT with ARM's long-running operations,
//! Resource Graph, and deletes answered 202 with a `Location` to poll — in the shapes of the
//! Azure REST API specs. Every ARM request must carry the token.

mod support;

use karpenter_azure::compute::{provider_id, resource_name};
use support::{compute, request, start};

#[tokio::test]
async fn a_node_vm_is_created_found_listed_and_deleted_once() {
    let (url, cloud) = start().await;
    let compute = compute(&url, "secret");
    let vm = compute
        .create(&request("default-abc", "Standard_D2s_v5"))
        .await
        .unwrap();
    assert_eq!(vm.name, "aks-default-abc");
    assert_eq!(
        vm.provisioning_state, "Succeeded",
        "the operation was awaited"
    );
    assert_eq!(vm.zone.as_deref(), Some("1"));
    // A retried create of the same claim finds the same VM: nothing is PUT again.
    let puts = cloud.lock().unwrap().puts;
    compute
        .create(&request("default-abc", "Standard_D2s_v5"))
        .await
        .unwrap();
    assert_eq!(cloud.lock().unwrap().puts, puts);
    let listed = compute.list().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        provider_id(&compute.placement, &listed[0].name),
        "azure:///subscriptions/sub/resourceGroups/mc_rg_c_eastus/providers/Microsoft.Compute/virtualMachines/aks-default-abc"
    );
    assert_eq!(
        compute.get("aks-default-abc").await.unwrap().vm_size,
        "Standard_D2s_v5"
    );
    compute.delete(&resource_name("default-abc")).await.unwrap();
    assert!(
        compute
            .get("aks-default-abc")
            .await
            .unwrap_err()
            .is_not_found()
    );
    assert!(
        compute
            .delete("aks-default-abc")
            .await
            .unwrap_err()
            .is_not_found(),
        "deleting what is gone says so"
    );
    let cloud = cloud.lock().unwrap();
    assert!(
        cloud.resources.is_empty(),
        "VM and NIC are gone: {:?}",
        cloud.resources.keys()
    );
    assert_eq!(cloud.tokens_issued, 1, "the token is cached");
    assert_eq!(cloud.unauthorized, 0);
}

#[tokio::test]
async fn a_vm_that_cannot_be_allocated_says_why_and_leaves_nothing() {
    let (url, cloud) = start().await;
    cloud
        .lock()
        .unwrap()
        .refuse
        .insert("Standard_NC6".into(), "SkuNotAvailable".into());
    let compute = compute(&url, "secret");
    let err = compute
        .create(&request("gpu-1", "Standard_NC6"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("SkuNotAvailable"), "{err}");
    assert!(
        cloud.lock().unwrap().resources.is_empty(),
        "the NIC made for it is deleted"
    );
}

#[tokio::test]
async fn a_wrong_secret_is_reported_with_entra_ids_reason() {
    let (url, _) = start().await;
    let err = compute(&url, "wrong").get("aks-x").await.unwrap_err();
    assert!(err.to_string().contains("AADSTS7000215"), "{err}");
}
