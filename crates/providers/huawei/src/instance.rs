//! CCE's node calls: create, show, list and delete a node of the cluster, and show a job.
//! What goes into a create and what the answers mean is [`crate::cce`].

use serde_json::Value;

use crate::cce::{Job, Node, NodeList};
use crate::client::{Client, ClientError};
use crate::endpoint::Service;

fn nodes_path(project: &str, cluster_id: &str) -> String {
    format!("/api/v3/projects/{project}/clusters/{cluster_id}/nodes")
}

/// `CreateNode`: the node CCE starts creating (its `status.jobID` follows the creation).
pub async fn create_node(
    client: &Client,
    cluster_id: &str,
    body: &Value,
) -> Result<Node, ClientError> {
    let project = client.project_id().await?;
    client
        .post(Service::Cce, &nodes_path(&project, cluster_id), body)
        .await
}

/// `ShowNode`.
pub async fn show_node(
    client: &Client,
    cluster_id: &str,
    node_id: &str,
) -> Result<Node, ClientError> {
    let project = client.project_id().await?;
    let path = format!("{}/{node_id}", nodes_path(&project, cluster_id));
    client.get(Service::Cce, &path, &[]).await
}

/// `ListNodes`: every node of the cluster, CCE's own node pools' included.
pub async fn list_nodes(client: &Client, cluster_id: &str) -> Result<Vec<Node>, ClientError> {
    let project = client.project_id().await?;
    let list: NodeList = client
        .get(Service::Cce, &nodes_path(&project, cluster_id), &[])
        .await?;
    Ok(list.items)
}

/// `DeleteNode`: CCE drains nothing (Karpenter already has), deletes the ECS server and its
/// disks with the node.
pub async fn delete_node(
    client: &Client,
    cluster_id: &str,
    node_id: &str,
) -> Result<(), ClientError> {
    let project = client.project_id().await?;
    let path = format!("{}/{node_id}", nodes_path(&project, cluster_id));
    client
        .delete::<serde_json::Value>(Service::Cce, &path, &[])
        .await
        .map(|_| ())
}

/// `ShowJob`.
pub async fn show_job(client: &Client, job_id: &str) -> Result<Job, ClientError> {
    let project = client.project_id().await?;
    client
        .get(
            Service::Cce,
            &format!("/api/v3/projects/{project}/jobs/{job_id}"),
            &[],
        )
        .await
}
