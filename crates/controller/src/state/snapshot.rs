//! The objects of one decision pass, held while the core's [`Snapshot`] borrows them: the
//! controller's state goes to provisioning and disruption through the same builder as the
//! simulator's cluster and `plan`'s dump.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use karpenter_api::NodeClaim;
use karpenter_core::provisioning::scheduling::NodePoolInput;
use karpenter_core::state::{Observed, Snapshot};

use super::{Cluster, StoredPod};

/// What the state held at one moment.
pub struct Objects {
    nodes: Vec<Arc<Node>>,
    node_claims: Vec<Arc<NodeClaim>>,
    pods: Vec<Arc<StoredPod>>,
    daemonsets: Vec<Arc<DaemonSet>>,
    pdbs: Vec<Arc<PodDisruptionBudget>>,
    namespaces: Vec<Arc<Namespace>>,
    volume_claims: Vec<Arc<PersistentVolumeClaim>>,
    volumes: Vec<Arc<PersistentVolume>>,
    storage_classes: Vec<Arc<StorageClass>>,
    csi_nodes: Vec<Arc<CSINode>>,
    nominated: BTreeSet<String>,
    marked_for_deletion: BTreeSet<String>,
}

impl Cluster {
    /// Every object decisions read, as of now.
    pub fn objects(&self) -> Objects {
        Objects {
            nodes: self.nodes.all(),
            node_claims: self.node_claims.all(),
            pods: self.pods.all(),
            daemonsets: self.daemonsets.all(),
            pdbs: self.pdbs.all(),
            namespaces: self.namespaces.all(),
            volume_claims: self.volume_claims.all(),
            volumes: self.volumes.all(),
            storage_classes: self.storage_classes.all(),
            csi_nodes: self.csi_nodes.all(),
            nominated: self.nominations.nominated(),
            marked_for_deletion: self.marked_for_deletion(),
        }
    }
}

impl Objects {
    /// The core's snapshot over these objects, with `node_pools` in use.
    pub fn snapshot<'a>(
        &'a self,
        node_pools: &'a [NodePoolInput],
        provider_labels: &'a [String],
    ) -> Snapshot<'a, Arc<StoredPod>> {
        Snapshot::new(Observed {
            nodes: self.nodes.iter().map(|n| &**n).collect(),
            node_claims: self.node_claims.iter().map(|c| &**c).collect(),
            // Shared, so that a provisioning batch can keep its pods without copying them.
            pods: self.pods.iter().collect(),
            daemonsets: self.daemonsets.iter().map(|d| &**d).collect(),
            pdbs: self.pdbs.iter().map(|p| &**p).collect(),
            namespaces: self.namespaces.iter().map(|n| &**n).collect(),
            volume_claims: self.volume_claims.iter().map(|c| &**c).collect(),
            volumes: self.volumes.iter().map(|v| &**v).collect(),
            storage_classes: self.storage_classes.iter().map(|c| &**c).collect(),
            csi_nodes: self.csi_nodes.iter().map(|c| &**c).collect(),
            node_pools,
            provider_labels,
            nominated: self.nominated.clone(),
            marked_for_deletion: self.marked_for_deletion.clone(),
        })
    }
}
