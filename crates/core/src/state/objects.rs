//! The objects of a cluster that a round reads: one type for the controller's watch-fed
//! state, the simulator's model at each second and `plan`'s dump. Every field must be
//! supplied (there is no `Default`), so a new input is a compile error wherever a cluster is
//! described without it.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use karpenter_api::NodeClaim;

use super::pods::ObservedPod;
use super::selectors::{PodController, ServiceSelector};
use super::snapshot::{Observed, Snapshot};
use crate::instancetype::NodePoolInput;
use crate::scheduling::dynamic_resources::DeviceInventory;

/// What the cluster held at one moment. Objects are shared (`Arc`), so the controller hands
/// its index's objects to a round without copying them; `P` is the pod form its holder keeps.
#[derive(Clone, Debug)]
pub struct ClusterObjects<P> {
    /// Every Node.
    pub nodes: Vec<Arc<Node>>,
    /// Every NodeClaim.
    pub node_claims: Vec<Arc<NodeClaim>>,
    /// Every pod.
    pub pods: Vec<P>,
    /// Every DaemonSet.
    pub daemonsets: Vec<Arc<DaemonSet>>,
    /// Every PodDisruptionBudget, with the status kube-controller-manager gave it.
    pub pdbs: Vec<Arc<PodDisruptionBudget>>,
    /// Every Namespace.
    pub namespaces: Vec<Arc<Namespace>>,
    /// Every PersistentVolumeClaim.
    pub volume_claims: Vec<Arc<PersistentVolumeClaim>>,
    /// Every PersistentVolume.
    pub volumes: Vec<Arc<PersistentVolume>>,
    /// Every StorageClass.
    pub storage_classes: Vec<Arc<StorageClass>>,
    /// Every CSINode (nodes' CSI volume limits).
    pub csi_nodes: Vec<Arc<CSINode>>,
    /// Services' pod selectors, for default topology spread (none when it is not configured).
    pub services: Vec<Arc<ServiceSelector>>,
    /// ReplicationControllers, ReplicaSets and StatefulSets, for default topology spread (none
    /// when it is not configured).
    pub pod_controllers: Vec<Arc<PodController>>,
    /// Nodes a recent provisioning decision counts on (upstream's nominations): the
    /// controller's memory, none in a dump.
    pub nominated: BTreeSet<String>,
    /// Nodes a disruption command in flight has taken (upstream's `MarkedForDeletion`).
    pub marked_for_deletion: BTreeSet<String>,
    /// ResourceClaims, DeviceClasses and ResourceSlices (read only when pods' device claims
    /// are simulated).
    pub devices: Arc<DeviceInventory>,
}

impl<P: ObservedPod> ClusterObjects<P> {
    /// The snapshot of these objects, launching from `node_pools`, with the provider's
    /// well-known `provider_labels`.
    pub fn snapshot<'a>(
        &'a self,
        node_pools: &'a [NodePoolInput],
        provider_labels: &'a [String],
    ) -> Snapshot<'a, P> {
        fn refs<T>(v: &[Arc<T>]) -> Vec<&T> {
            v.iter().map(|o| &**o).collect()
        }
        Snapshot::new(Observed {
            nodes: refs(&self.nodes),
            node_claims: refs(&self.node_claims),
            pods: self.pods.iter().collect(),
            daemonsets: refs(&self.daemonsets),
            pdbs: refs(&self.pdbs),
            namespaces: refs(&self.namespaces),
            volume_claims: refs(&self.volume_claims),
            volumes: refs(&self.volumes),
            storage_classes: refs(&self.storage_classes),
            csi_nodes: refs(&self.csi_nodes),
            services: refs(&self.services),
            pod_controllers: refs(&self.pod_controllers),
            node_pools,
            provider_labels,
            nominated: self.nominated.clone(),
            devices: self.devices.clone(),
            marked_for_deletion: self.marked_for_deletion.clone(),
        })
    }
}
