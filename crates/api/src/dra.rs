//! The parts of Kubernetes' `resource.k8s.io/v1` API (Dynamic Resource Allocation) that
//! scheduling reads: ResourceClaims, DeviceClasses and ResourceSlices. Fields karpenter does
//! not act on (device configuration, admin access, device taints) are left out, so they are
//! neither read nor written back.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NodeSelector;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// A request for devices (`resource.k8s.io/v1` `ResourceClaim`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResourceClaim {
    /// Its name and namespace.
    pub metadata: ObjectMeta,
    /// What it asks for.
    pub spec: ResourceClaimSpec,
    /// Where it was allocated, and for whom.
    pub status: Option<ResourceClaimStatus>,
}

crate::cluster_resource!(
    ResourceClaim, ResourceClaimSpec, ResourceClaimStatus,
    group: "resource.k8s.io", version: "v1", plural: "resourceclaims", namespaced
);

/// A ResourceClaim's spec.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceClaimSpec {
    /// The devices asked for.
    #[serde(default)]
    pub devices: DeviceClaim,
}

/// The requests of a claim and the constraints across them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceClaim {
    /// Each request names the devices it wants.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<DeviceRequest>,
    /// Constraints over the devices of several requests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub constraints: Vec<DeviceConstraint>,
}

/// One request of a claim: exactly one of `exactly` and `firstAvailable`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceRequest {
    /// The request's name, unique in the claim.
    pub name: String,
    /// Devices of one class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exactly: Option<ExactDeviceRequest>,
    /// Alternatives, the first that can be allocated wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_available: Option<Vec<DeviceSubRequest>>,
}

/// `ExactCount` (the default) or `All`.
pub const ALLOCATION_MODE_ALL: &str = "All";

/// A request for devices of one class.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExactDeviceRequest {
    /// The DeviceClass the devices must belong to.
    pub device_class_name: String,
    /// Further CEL selectors, all of which must hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub selectors: Vec<DeviceSelector>,
    /// `ExactCount` (the default) or `All`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation_mode: Option<String>,
    /// How many devices, for `ExactCount` (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i64>,
    /// What the request consumes of a device shared between claims.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityRequirements>,
}

/// One alternative of a `firstAvailable` request: a name and what an `exactly` request asks.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceSubRequest {
    /// Its name, unique in the request.
    pub name: String,
    /// The devices it asks for.
    #[serde(flatten)]
    pub request: ExactDeviceRequest,
}

/// What a request consumes of a multi-allocatable device, by capacity name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CapacityRequirements {
    /// Amounts by capacity name.
    #[serde(default)]
    pub requests: BTreeMap<String, Quantity>,
}

/// A device selector; only CEL exists.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceSelector {
    /// A CEL expression over `device`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel: Option<CelDeviceSelector>,
}

/// A CEL device selector.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CelDeviceSelector {
    /// The expression; true selects the device.
    pub expression: String,
}

/// A constraint across requests of one claim.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceConstraint {
    /// The requests it covers; empty covers all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<String>,
    /// Every device must have this attribute, with one value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_attribute: Option<String>,
    /// Every device must have a different value of this attribute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distinct_attribute: Option<String>,
}

/// A claim's status.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceClaimStatus {
    /// Set once the claim is allocated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation: Option<AllocationResult>,
    /// Who uses the claim (pods, usually).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reserved_for: Vec<ResourceClaimConsumerReference>,
}

/// Where a claim was allocated.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AllocationResult {
    /// The devices allocated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices: Option<DeviceAllocationResult>,
    /// The nodes the devices can be reached from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<NodeSelector>,
}

/// The devices of an allocation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceAllocationResult {
    /// One entry per allocated device.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<DeviceRequestAllocationResult>,
}

/// One allocated device.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceRequestAllocationResult {
    /// The request (`request` or `request/subrequest`) it serves.
    pub request: String,
    /// The device's driver.
    pub driver: String,
    /// Its pool.
    pub pool: String,
    /// Its name in the pool.
    pub device: String,
    /// What the claim consumes of a shared device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumed_capacity: Option<BTreeMap<String, Quantity>>,
}

/// A user of a claim.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceClaimConsumerReference {
    /// Empty for the core group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_group: Option<String>,
    /// `pods` for a pod.
    pub resource: String,
    /// The consumer's name.
    pub name: String,
    /// The consumer's UID.
    pub uid: String,
}

impl ResourceClaimConsumerReference {
    /// Whether the consumer is a pod.
    pub fn is_pod(&self) -> bool {
        self.resource == "pods" && self.api_group.as_deref().unwrap_or("").is_empty()
    }
}

/// What no DeviceClass or ResourceSlice has.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NoStatus {}

/// A class of devices (`resource.k8s.io/v1` `DeviceClass`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeviceClass {
    /// Its name.
    pub metadata: ObjectMeta,
    /// Its selectors.
    pub spec: DeviceClassSpec,
    /// Unused.
    pub status: Option<NoStatus>,
}

crate::cluster_resource!(
    DeviceClass, DeviceClassSpec, NoStatus,
    group: "resource.k8s.io", version: "v1", plural: "deviceclasses"
);

/// A DeviceClass's spec.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceClassSpec {
    /// CEL selectors every device of the class meets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub selectors: Vec<DeviceSelector>,
}

/// Devices a driver publishes (`resource.k8s.io/v1` `ResourceSlice`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResourceSlice {
    /// Its name and owner (the Node, for node-local devices).
    pub metadata: ObjectMeta,
    /// The devices.
    pub spec: ResourceSliceSpec,
    /// Unused.
    pub status: Option<NoStatus>,
}

crate::cluster_resource!(
    ResourceSlice, ResourceSliceSpec, NoStatus,
    group: "resource.k8s.io", version: "v1", plural: "resourceslices"
);

/// A ResourceSlice's spec.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSliceSpec {
    /// The driver that publishes it.
    pub driver: String,
    /// The pool it is part of.
    #[serde(default)]
    pub pool: ResourcePool,
    /// The one node whose devices these are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// The nodes that can reach the devices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<NodeSelector>,
    /// Every node can reach the devices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all_nodes: Option<bool>,
    /// The devices.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<Device>,
    /// Counters that the pool's devices draw on (partitionable devices).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_counters: Option<Vec<CounterSet>>,
}

/// A pool of a driver: its slices share a generation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourcePool {
    /// The pool's name.
    pub name: String,
    /// Slices of an older generation are stale.
    #[serde(default)]
    pub generation: i64,
    /// How many slices the pool has at this generation.
    #[serde(default)]
    pub resource_slice_count: i64,
}

/// One device.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Device {
    /// Its name, unique in the pool.
    pub name: String,
    /// Its attributes, by qualified name (`domain/id`, or `id` in the driver's domain).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, DeviceAttribute>,
    /// Its capacities, by qualified name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity: BTreeMap<String, DeviceCapacity>,
    /// Several claims may share it, each consuming some of its capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_multiple_allocations: Option<bool>,
    /// What it draws from the pool's counter sets when allocated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub consumes_counters: Vec<DeviceCounterConsumption>,
}

/// An attribute's value: exactly one field is set.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceAttribute {
    /// An integer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub int: Option<i64>,
    /// A boolean.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bool: Option<bool>,
    /// A string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub string: Option<String>,
    /// A semantic version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// A capacity of a device.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceCapacity {
    /// How much there is.
    pub value: Quantity,
    /// How claims may consume it, when the device is shared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_policy: Option<CapacityRequestPolicy>,
}

/// How a shared device's capacity is handed out.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CapacityRequestPolicy {
    /// What a request that names no amount consumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Quantity>,
    /// The amounts that may be consumed, ascending.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub valid_values: Vec<Quantity>,
    /// A range of amounts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_range: Option<CapacityRequestPolicyRange>,
}

/// `min`, `min + step`, … up to `max`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CapacityRequestPolicyRange {
    /// The least amount.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<Quantity>,
    /// The most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<Quantity>,
    /// The increment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<Quantity>,
}

/// Named counters a pool's devices draw on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CounterSet {
    /// The set's name.
    pub name: String,
    /// The counters, by name.
    #[serde(default)]
    pub counters: BTreeMap<String, Counter>,
}

/// A counter's amount.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Counter {
    /// How much.
    pub value: Quantity,
}

/// What a device draws from one counter set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceCounterConsumption {
    /// The counter set.
    pub counter_set: String,
    /// The amounts, by counter.
    #[serde(default)]
    pub counters: BTreeMap<String, Counter>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_claim_as_the_api_server_writes_it() {
        let claim: ResourceClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "gpu", "namespace": "default"},
            "spec": {"devices": {
                "requests": [{"name": "req", "firstAvailable": [
                    {"name": "big", "deviceClassName": "gpu", "count": 4},
                    {"name": "small", "deviceClassName": "gpu", "allocationMode": "All"}
                ]}],
                "constraints": [{"matchAttribute": "gpu.example.com/pcieRoot"}],
                "config": [{"opaque": {"driver": "gpu.example.com", "parameters": {}}}]
            }},
            "status": {"allocation": {"devices": {"results": [
                {"request": "req/big", "driver": "gpu.example.com", "pool": "p", "device": "d0"}
            ]}}, "reservedFor": [{"resource": "pods", "name": "a", "uid": "u"}]}
        }))
        .unwrap();
        let subs = claim.spec.devices.requests[0]
            .first_available
            .as_ref()
            .unwrap();
        assert_eq!(
            subs[1].request.allocation_mode.as_deref(),
            Some(ALLOCATION_MODE_ALL)
        );
        assert_eq!(subs[0].request.count, Some(4));
        let status = claim.status.as_ref().unwrap();
        assert!(status.reserved_for[0].is_pod());
        assert_eq!(
            status
                .allocation
                .as_ref()
                .unwrap()
                .devices
                .as_ref()
                .unwrap()
                .results[0]
                .request,
            "req/big"
        );
        let wrong: Result<ResourceClaim, _> = serde_json::from_value(serde_json::json!({
            "apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaim"
        }));
        assert!(wrong.unwrap_err().to_string().contains("v1beta1"));
    }
}
