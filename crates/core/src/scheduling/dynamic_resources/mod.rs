//! Dynamic Resource Allocation in the scheduling simulation (upstream's
//! `pkg/scheduling/dynamicresources`): which devices a pod's ResourceClaims would get on a node
//! or on a NodeClaim not launched yet, so that provisioning launches instance types whose
//! devices fit and consolidation only moves pods whose devices can follow.
//!
//! Devices come from two places: the ResourceSlices drivers published in the cluster, and the
//! slices an instance type's drivers will publish once its node runs
//! ([`DynamicResources::resource_slice_templates`], from the cloud provider). Off by default,
//! as upstream (`IGNORE_DRA_REQUESTS=true`): pods with claims are then reported, not placed.

mod allocator;
mod capacity;
mod claims;
mod pools;
pub mod selector;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use karpenter_api::dra::{CounterSet, Device, DeviceClass, ResourceClaim, ResourceSlice};

pub use allocator::{AllocatedDevice, Allocation, Allocator, ClaimAllocation, Target};
pub use claims::{ClaimReference, claim_references, resolve_claims};

/// The annotation that lists, sorted and comma-separated, the drivers whose devices a new
/// NodeClaim was given; its node initializes once they all published their pools.
pub const REQUESTED_DRA_DRIVERS_ANNOTATION: &str = "karpenter.sh/requested-dra-drivers";

/// The most devices one claim is allocated (Kubernetes' `AllocationResultsMaxSize`).
pub const MAX_DEVICES_PER_CLAIM: usize = 32;

/// What an instance type's drivers will publish once its node runs, declared by the cloud
/// provider (upstream's `InstanceType.DynamicResources`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DynamicResources {
    /// The node-local slices, one per driver pool (a partitionable pool pairs a counters-only
    /// template with a devices template of the same pool name).
    pub resource_slice_templates: Vec<ResourceSliceTemplate>,
    /// Devices that will share an attribute value known only at run time (a PCIe root, say),
    /// for `matchAttribute` constraints on devices that do not publish it yet.
    pub attribute_bindings: Vec<AttributeBinding>,
}

/// A slice a driver will publish on every node of an instance type.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResourceSliceTemplate {
    /// The driver.
    pub driver: String,
    /// The pool's name.
    pub pool: String,
    /// The devices.
    pub devices: Vec<Device>,
    /// Counters the pool's devices draw on.
    pub shared_counters: Vec<CounterSet>,
}

/// Devices of an instance type that will share a value of `attribute`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AttributeBinding {
    /// The devices; fewer than two binds nothing.
    pub devices: Vec<DeviceKey>,
    /// The attribute's qualified name.
    pub attribute: String,
}

/// A device by driver, pool and name (`driver/pool/device`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceKey {
    /// The driver.
    pub driver: String,
    /// The pool.
    pub pool: String,
    /// The device's name in the pool.
    pub device: String,
}

impl DeviceKey {
    /// A device's key.
    pub fn new(driver: &str, pool: &str, device: &str) -> Self {
        Self {
            driver: driver.to_string(),
            pool: pool.to_string(),
            device: device.to_string(),
        }
    }
}

impl fmt::Display for DeviceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.driver, self.pool, self.device)
    }
}

/// The cluster's DRA objects one round reads.
#[derive(Clone, Debug, Default)]
pub struct DeviceInventory {
    /// ResourceClaims by `namespace/name`.
    pub claims: HashMap<String, Arc<ResourceClaim>>,
    /// DeviceClasses by name.
    pub classes: HashMap<String, Arc<DeviceClass>>,
    /// Every ResourceSlice; those of nodes pods cannot use yet are left out per simulation.
    pub slices: Vec<Arc<ResourceSlice>>,
}

impl DeviceInventory {
    /// An inventory of these objects.
    pub fn new(
        claims: impl IntoIterator<Item = ResourceClaim>,
        classes: impl IntoIterator<Item = DeviceClass>,
        slices: impl IntoIterator<Item = ResourceSlice>,
    ) -> Self {
        Self::from_shared(
            claims.into_iter().map(Arc::new),
            classes.into_iter().map(Arc::new),
            slices.into_iter().map(Arc::new),
        )
    }

    /// An inventory of these shared objects (a watch index's).
    pub fn from_shared(
        claims: impl IntoIterator<Item = Arc<ResourceClaim>>,
        classes: impl IntoIterator<Item = Arc<DeviceClass>>,
        slices: impl IntoIterator<Item = Arc<ResourceSlice>>,
    ) -> Self {
        let mut inventory = Self {
            slices: slices.into_iter().collect(),
            ..Self::default()
        };
        for claim in claims {
            inventory.add_claim(claim);
        }
        for class in classes {
            inventory.add_class(class);
        }
        inventory
    }

    /// Adds a ResourceClaim (replacing one of its namespace and name).
    pub fn add_claim(&mut self, claim: Arc<ResourceClaim>) {
        self.claims.insert(claim_key(&claim), claim);
    }

    /// Adds a DeviceClass (replacing one of its name).
    pub fn add_class(&mut self, class: Arc<DeviceClass>) {
        let name = class.metadata.name.clone().unwrap_or_default();
        self.classes.insert(name, class);
    }
}

/// A claim's `namespace/name`.
pub fn claim_key(claim: &ResourceClaim) -> String {
    format!(
        "{}/{}",
        claim.metadata.namespace.as_deref().unwrap_or("default"),
        claim.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The name of the Node that owns a slice (its first `Node` owner reference): node-local
/// devices, usable only once that node is.
pub fn node_owner(slice: &ResourceSlice) -> Option<&str> {
    slice
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.kind == "Node")
        .map(|o| o.name.as_str())
}

/// Amounts by capacity or counter name, in thousandths of the unit.
pub type Amounts = BTreeMap<String, i64>;

/// The drivers of `requested` (a `karpenter.sh/requested-dra-drivers` value) that have not
/// yet published a complete pool on node `node`: its NodeClaim is not initialized until none
/// is left (upstream's `DRADriverPoolsNotPublished`).
pub fn unpublished_drivers<'r>(
    requested: &'r str,
    node: &str,
    slices: &[Arc<ResourceSlice>],
) -> Vec<&'r str> {
    let on_node: Vec<Arc<ResourceSlice>> = slices
        .iter()
        .filter(|s| s.spec.node_name.as_deref() == Some(node) || node_owner(s) == Some(node))
        .cloned()
        .collect();
    let pools = pools::gather(&on_node);
    requested
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .filter(|d| !pools.iter().any(|p| p.key.0 == *d && !p.incomplete))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(node: &str, driver: &str, pool: &str, count: i64) -> Arc<ResourceSlice> {
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": format!("{node}-{driver}-{count}")},
                "spec": {"driver": driver, "nodeName": node,
                    "pool": {"name": pool, "generation": 1, "resourceSliceCount": count}}
            }))
            .unwrap(),
        )
    }

    // Upstream's initialization gate: a node initializes once every requested driver has a
    // complete pool on it.
    #[test]
    fn a_driver_counts_once_its_pool_on_the_node_is_complete() {
        let requested = "gpu.example.com,nic.example.com";
        let mut stale = (*slice("n", "gpu.example.com", "p", 1)).clone();
        stale.metadata.name = Some("stale".into());
        let mut newer = (*slice("n", "gpu.example.com", "p", 2)).clone();
        newer.spec.pool.generation = 2;
        type Case<'a> = (&'a str, Vec<Arc<ResourceSlice>>, Vec<&'a str>);
        let cases: [Case; 5] = [
            (
                "a complete older generation does not stand for an incomplete newer one",
                vec![
                    Arc::new(stale),
                    Arc::new(newer),
                    slice("n", "nic.example.com", "q", 1),
                ],
                vec!["gpu.example.com"],
            ),
            (
                "nothing published",
                vec![],
                vec!["gpu.example.com", "nic.example.com"],
            ),
            (
                "one driver published",
                vec![slice("n", "gpu.example.com", "p", 1)],
                vec!["nic.example.com"],
            ),
            (
                "a pool missing a slice",
                vec![
                    slice("n", "gpu.example.com", "p", 2),
                    slice("n", "nic.example.com", "q", 1),
                ],
                vec!["gpu.example.com"],
            ),
            (
                "another node's slices",
                vec![
                    slice("m", "gpu.example.com", "p", 1),
                    slice("m", "nic.example.com", "q", 1),
                ],
                vec!["gpu.example.com", "nic.example.com"],
            ),
        ];
        for (case, slices, missing) in cases {
            assert_eq!(
                unpublished_drivers(requested, "n", &slices),
                missing,
                "{case}"
            );
        }
    }
}
