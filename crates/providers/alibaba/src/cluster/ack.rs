//! ACK's calls: the attach script, the node pools' runtime, the cluster's CNI and the images of
//! a Kubernetes version, with upstream's caches.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::Method;
use serde_json::{Value, json};

use super::cloudinit::MimeError;
use super::{
    ATTACH_SCRIPT_TTL, AnswerError, ClusterType, Cni, MANAGED_KUBERNETES, NodeBootstrap, Runtime,
    ack_user_data, clean_attach_script, cluster_network, custom_user_data, metadata_version,
    parse_images, pick_runtime, set_runtime,
};
use crate::client::{AlibabaError, Client, Params};
use crate::endpoint::Product;
use crate::imagefamily::ClusterImage;

/// Why the cluster's side of a launch failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    /// An ACK call failed.
    #[error("{action} of cluster {cluster_id}: {source}")]
    Call {
        /// The call (`DescribeClusterAttachScripts`, …).
        action: &'static str,
        /// The cluster.
        cluster_id: String,
        /// What Alibaba answered.
        source: AlibabaError,
    },
    /// ACK answered with an empty attach script.
    #[error("DescribeClusterAttachScripts of cluster {0}: empty node registration script")]
    EmptyAttachScript(String),
    /// An ACK answer lacked what is needed.
    #[error("cluster {cluster_id}: {source}")]
    Answer {
        /// The cluster.
        cluster_id: String,
        /// What was missing.
        source: AnswerError,
    },
    /// The `ECSNodeClass`'s `userData` is a MIME document that could not be read.
    #[error(transparent)]
    UserData(#[from] MimeError),
}

#[derive(Debug, Default)]
struct Caches {
    /// Attach scripts by `formatDataDisk` (the script differs with it) and when fetched.
    attach_scripts: HashMap<bool, (Instant, String)>,
    /// The CNI, once ACK has named one.
    cni: Option<Cni>,
}

/// An ACK managed cluster. Cheap to clone; clones share the caches.
#[derive(Clone, Debug)]
pub struct AckCluster {
    client: Client,
    cluster_id: String,
    region: String,
    attach_script_ttl: Duration,
    caches: Arc<Mutex<Caches>>,
}

impl AckCluster {
    /// The cluster `cluster_id` in `region`, called through `client`.
    pub fn new(client: Client, cluster_id: impl Into<String>, region: impl Into<String>) -> Self {
        Self {
            client,
            cluster_id: cluster_id.into(),
            region: region.into(),
            attach_script_ttl: ATTACH_SCRIPT_TTL,
            caches: Arc::default(),
        }
    }

    /// The same cluster with attach scripts reused for `ttl` instead of
    /// [`ATTACH_SCRIPT_TTL`].
    pub fn with_attach_script_ttl(mut self, ttl: Duration) -> Self {
        self.attach_script_ttl = ttl;
        self
    }

    /// The cluster's id.
    pub fn cluster_id(&self) -> &str {
        &self.cluster_id
    }

    /// The cluster's region.
    pub fn region(&self) -> &str {
        &self.region
    }

    fn call_error(&self, action: &'static str) -> impl FnOnce(AlibabaError) -> ClusterError {
        let cluster_id = self.cluster_id.clone();
        move |source| ClusterError::Call {
            action,
            cluster_id,
            source,
        }
    }

    fn answer_error(&self, source: AnswerError) -> ClusterError {
        ClusterError::Answer {
            cluster_id: self.cluster_id.clone(),
            source,
        }
    }

    /// A node's `UserData` (base64): the attach script for `node.format_data_disk`, finished
    /// with the node's labels, taints and kubelet configuration, merged with its user data.
    pub async fn user_data(&self, node: &NodeBootstrap<'_>) -> Result<String, ClusterError> {
        let script = self.attach_script(node.format_data_disk).await?;
        Ok(ack_user_data(&script, &self.cluster_id, node)?)
    }

    /// ACK's attach script (`POST /clusters/{id}/attachscript`, keeping the instance's name,
    /// formatting the data disk or not), cleaned and with the node pools' runtime, reused for
    /// the TTL. When the node pools cannot be read, the script's own runtime stays.
    pub async fn attach_script(&self, format_data_disk: bool) -> Result<String, ClusterError> {
        if let Some((fetched, script)) = self
            .caches
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .attach_scripts
            .get(&format_data_disk)
            && fetched.elapsed() < self.attach_script_ttl
        {
            return Ok(script.clone());
        }
        let body = json!({"format_disk": format_data_disk, "keep_instance_name": true});
        let raw = self
            .client
            .roa_text(
                Product::Cs,
                "DescribeClusterAttachScripts",
                Method::POST,
                &format!("/clusters/{}/attachscript", self.cluster_id),
                &Params::new(),
                Some(&body),
            )
            .await
            .map_err(self.call_error("DescribeClusterAttachScripts"))?;
        if raw.is_empty() {
            return Err(ClusterError::EmptyAttachScript(self.cluster_id.clone()));
        }
        let mut script = clean_attach_script(&raw);
        match self.runtime().await {
            Ok(runtime) => script = set_runtime(&script, &runtime),
            Err(error) => {
                tracing::warn!(
                    cluster_id = %self.cluster_id,
                    %error,
                    "keeping the attach script's runtime: the node pools' is unknown"
                );
            }
        }
        self.caches
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .attach_scripts
            .insert(format_data_disk, (Instant::now(), script.clone()));
        Ok(script)
    }

    /// The runtime of the cluster's default node pool, or of the one with the most healthy
    /// nodes (`GET /clusters/{id}/nodepools`).
    pub async fn runtime(&self) -> Result<Runtime, ClusterError> {
        let answer = self
            .client
            .roa(
                Product::Cs,
                "DescribeClusterNodePools",
                Method::GET,
                &format!("/clusters/{}/nodepools", self.cluster_id),
                &Params::new(),
                None,
            )
            .await
            .map_err(self.call_error("DescribeClusterNodePools"))?;
        pick_runtime(&answer).map_err(|e| self.answer_error(e))
    }

    /// The cluster's CNI (`GET /clusters/{id}`, `meta_data`'s `Capabilities.Network`), kept
    /// once ACK names one.
    pub async fn cni(&self) -> Result<Cni, ClusterError> {
        if let Some(cni) = self.caches.lock().unwrap_or_else(|e| e.into_inner()).cni {
            return Ok(cni);
        }
        let answer = self
            .client
            .roa(
                Product::Cs,
                "DescribeClusterDetail",
                Method::GET,
                &format!("/clusters/{}", self.cluster_id),
                &Params::new(),
                None,
            )
            .await
            .map_err(self.call_error("DescribeClusterDetail"))?;
        let network = cluster_network(&answer).map_err(|e| self.answer_error(e))?;
        let cni = Cni::from_ack(&network);
        // An empty answer is asked again next time, as upstream does: the cluster may not be
        // fully described yet.
        if !network.is_empty() {
            self.caches.lock().unwrap_or_else(|e| e.into_inner()).cni = Some(cni);
        }
        Ok(cni)
    }

    /// The images ACK offers for `kubernetes_version` (`v1.30.1` or `1.30.1-aliyun.1`) in
    /// managed clusters of the region (`GET /api/v1/metadata/versions`).
    pub async fn supported_images(
        &self,
        kubernetes_version: &str,
    ) -> Result<Vec<ClusterImage>, ClusterError> {
        let query = Params::new()
            .with("ClusterType", MANAGED_KUBERNETES)
            .with("KubernetesVersion", metadata_version(kubernetes_version))
            .with("Region", self.region.as_str());
        let answer: Value = self
            .client
            .roa(
                Product::Cs,
                "DescribeKubernetesVersionMetadata",
                Method::GET,
                "/api/v1/metadata/versions",
                &query,
                None,
            )
            .await
            .map_err(self.call_error("DescribeKubernetesVersionMetadata"))?;
        parse_images(&answer).map_err(|e| self.answer_error(e))
    }
}

/// The cluster nodes join, by [`ClusterType`]: what the `CloudProvider` asks for a launch.
#[derive(Clone, Debug)]
pub enum Cluster {
    /// An ACK managed cluster (boxed: it carries the client and the caches).
    AckManaged(Box<AckCluster>),
    /// A cluster the user's data joins.
    Custom,
}

impl Cluster {
    /// The cluster of `cluster_type`: for ACK, `cluster_id` in `region` through `client`.
    pub fn new(
        cluster_type: ClusterType,
        client: Client,
        cluster_id: impl Into<String>,
        region: impl Into<String>,
    ) -> Self {
        match cluster_type {
            ClusterType::AckManaged => {
                Cluster::AckManaged(Box::new(AckCluster::new(client, cluster_id, region)))
            }
            ClusterType::Custom => Cluster::Custom,
        }
    }

    /// Its type.
    pub fn cluster_type(&self) -> ClusterType {
        match self {
            Cluster::AckManaged(_) => ClusterType::AckManaged,
            Cluster::Custom => ClusterType::Custom,
        }
    }

    /// A node's `UserData` (base64).
    pub async fn user_data(&self, node: &NodeBootstrap<'_>) -> Result<String, ClusterError> {
        match self {
            Cluster::AckManaged(ack) => ack.user_data(node).await,
            Cluster::Custom => Ok(custom_user_data(node.user_data)),
        }
    }

    /// The cluster's CNI; [`Cni::Other`] for a custom cluster (upstream's `Custom`).
    pub async fn cni(&self) -> Result<Cni, ClusterError> {
        match self {
            Cluster::AckManaged(ack) => ack.cni().await,
            Cluster::Custom => Ok(Cni::Other),
        }
    }

    /// The images for `kubernetes_version`; none for a custom cluster.
    pub async fn supported_images(
        &self,
        kubernetes_version: &str,
    ) -> Result<Vec<ClusterImage>, ClusterError> {
        match self {
            Cluster::AckManaged(ack) => ack.supported_images(kubernetes_version).await,
            Cluster::Custom => Ok(Vec::new()),
        }
    }
}
