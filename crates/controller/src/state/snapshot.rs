//! The objects of one decision pass: the state's objects as the core's [`ClusterObjects`],
//! held while the snapshot borrows them — the same type the simulator's cluster and `plan`'s
//! dump give the round.

use std::sync::Arc;

use karpenter_core::scheduling::dynamic_resources::DeviceInventory;
use karpenter_core::state::ClusterObjects;

use super::{Cluster, StoredPod};

impl Cluster {
    /// Every object decisions read, as of now. Pods are shared, so that a provisioning batch
    /// can keep them without copying.
    pub fn objects(&self) -> ClusterObjects<Arc<StoredPod>> {
        ClusterObjects {
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
            services: self.services.all(),
            pod_controllers: self.pod_controllers(),
            nominated: self.nominations.nominated(),
            devices: Arc::new(DeviceInventory::from_shared(
                self.resource_claims.all(),
                self.device_classes.all(),
                self.resource_slices.all(),
            )),
            marked_for_deletion: self.marked_for_deletion(),
        }
    }
}
