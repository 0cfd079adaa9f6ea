//! The ECS calls behind Create, Get, List and Delete: `CreateAutoProvisioningGroup`,
//! `DescribeInstances` (by cluster tag, NodeClaim tag or id) and `DeleteInstance`.

use crate::client::{AlibabaError, Client, Params, parse};
use crate::endpoint::Product;
use crate::instance::{GroupAnswer, Instance};

/// `DescribeInstances`' largest page.
const INSTANCES_PAGE_SIZE: u32 = 100;

/// Creates an instant auto-provisioning group. Its `ClientToken` makes a repeat return the
/// first call's answer, so the call is retried like any idempotent one.
pub async fn create_auto_provisioning_group(
    client: &Client,
    params: &Params,
) -> Result<GroupAnswer, AlibabaError> {
    const ACTION: &str = "CreateAutoProvisioningGroup";
    let answer = client.call(Product::Ecs, ACTION, params).await?;
    parse(ACTION, answer)
}

/// The instances carrying every one of `tags`, and when `ids` is given only those ids (at
/// most 100 at a time, as ECS takes them), every page.
pub async fn describe_instances(
    client: &Client,
    tags: &[(&str, &str)],
    ids: Option<&[&str]>,
) -> Result<Vec<Instance>, AlibabaError> {
    const ACTION: &str = "DescribeInstances";
    let mut params = Params::new().with("RegionId", client.endpoints().region.clone());
    for (i, (k, v)) in tags.iter().enumerate() {
        params.set(format!("Tag.{}.Key", i + 1), *k);
        params.set(format!("Tag.{}.Value", i + 1), *v);
    }
    if let Some(ids) = ids {
        params.set(
            "InstanceIds",
            serde_json::to_string(ids).unwrap_or_else(|_| "[]".into()),
        );
    }
    client
        .pages_by_token(
            Product::Ecs,
            ACTION,
            &params,
            "Instances.Instance",
            Some(INSTANCES_PAGE_SIZE),
        )
        .await?
        .into_iter()
        .map(|item| parse(ACTION, item))
        .collect()
}

/// Releases an instance at once, pay-as-you-go or not (`Force`, `TerminateSubscription`, as
/// upstream). An instance already gone is `InvalidInstanceId.NotFound`.
pub async fn delete_instance(client: &Client, instance_id: &str) -> Result<(), AlibabaError> {
    let params = Params::new()
        .with("InstanceId", instance_id)
        .with("Force", "true")
        .with("TerminateSubscription", "true");
    client
        .call(Product::Ecs, "DeleteInstance", &params)
        .await
        .map(|_| ())
}
