//! Whether a NodeClaim has drifted from its NodePool, as upstream's NodeClaim disruption
//! controller judges it, and the hash annotations its NodePool hash controller keeps.
//!
//! The checks run cheapest first: the template hash, then requirement compatibility, then
//! whether the claim's instance type is still offered. The provider's own reasons (an image
//! or subnet that moved on) are asked by the caller after these, so a claim that drifted here
//! costs no cloud call.

use std::collections::BTreeMap;
use std::sync::Arc;

use karpenter_api::hash::NODE_POOL_HASH_VERSION;
use karpenter_api::labels::{
    CAPACITY_TYPE_LABEL, INSTANCE_TYPE_LABEL, NODE_POOL_HASH_ANNOTATION,
    NODE_POOL_HASH_VERSION_ANNOTATION, ZONE_LABEL,
};
use karpenter_api::nodeclaim::condition::{DRIFTED, LAUNCHED};
use karpenter_api::nodeoverlay::CAPACITY_OVERLAY_HASH_ANNOTATION;
use karpenter_api::{NodeClaim, NodePool};

use crate::instancetype::InstanceType;
use crate::instancetype::overlay::Evaluation;
use crate::scheduling::{AllowUndefined, Requirements};

/// Why a NodeClaim drifted (the `Drifted` condition's reason).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriftReason {
    /// A static template field changed (the NodePool hash moved on).
    NodePoolDrifted,
    /// The claim's labels no longer satisfy the NodePool's requirements.
    RequirementsDrifted,
    /// The claim's instance type, or every offering of it its labels allow, is gone.
    InstanceTypeNotFound,
    /// The NodeOverlays now give the claim's instance type other extended resources than it
    /// was launched with (see [`overlay_drift`]).
    NodeOverlayDrifted,
    /// The provider's reason (`AMIDrift`, `SubnetDrift`, …).
    Provider(String),
}

impl DriftReason {
    /// Upstream's reason string.
    pub fn as_str(&self) -> &str {
        match self {
            Self::NodePoolDrifted => "NodePoolDrifted",
            Self::RequirementsDrifted => "RequirementsDrifted",
            Self::InstanceTypeNotFound => "InstanceTypeNotFound",
            Self::NodeOverlayDrifted => "NodeOverlayDrifted",
            Self::Provider(reason) => reason,
        }
    }
}

/// Instance-type drift is only judged once a claim is this old (seconds): the provider's
/// catalog may lag a launch it just made.
pub const INSTANCE_TYPE_CHECK_AFTER_SECONDS: i64 = 3600;
/// A claim whose instance type was found is not looked up again for this long (seconds).
pub const INSTANCE_TYPE_CHECK_EVERY_SECONDS: i64 = 1800;

fn condition_status<'a>(claim: &'a NodeClaim, type_: &str) -> Option<&'a str> {
    claim
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.as_str())
}

/// Drift is only judged for launched claims; anything else has its `Drifted` condition cleared.
pub fn is_launched(claim: &NodeClaim) -> bool {
    condition_status(claim, LAUNCHED) == Some("True")
}

/// Whether the claim carries a `Drifted` condition at all (any status).
pub fn has_drifted_condition(claim: &NodeClaim) -> bool {
    condition_status(claim, DRIFTED).is_some()
}

fn annotation<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

/// Static drift: both the NodePool and the claim carry a hash of the same version, and the
/// hashes differ. Anything missing, or versions that differ, is not drift: the hash controller
/// re-stamps such claims instead.
pub fn static_drift(pool: &NodePool, claim: &NodeClaim) -> Option<DriftReason> {
    let pool_hash = annotation(&pool.metadata, NODE_POOL_HASH_ANNOTATION)?;
    let pool_version = annotation(&pool.metadata, NODE_POOL_HASH_VERSION_ANNOTATION)?;
    let claim_hash = annotation(&claim.metadata, NODE_POOL_HASH_ANNOTATION)?;
    let claim_version = annotation(&claim.metadata, NODE_POOL_HASH_VERSION_ANNOTATION)?;
    (pool_version == claim_version && pool_hash != claim_hash)
        .then_some(DriftReason::NodePoolDrifted)
}

/// Requirement drift: a node's labels, taken as requirements, are not compatible with the
/// NodePool's requirements. Widening a requirement never drifts a node; narrowing it away
/// from the node's value does, and so does requiring a label the node lacks (even a
/// well-known one: the node exists, nothing will set it later).
pub fn requirements_drift(
    pool: &NodePool,
    labels: &BTreeMap<String, String>,
) -> Option<DriftReason> {
    let pool_requirements = Requirements::from_node_claim(&pool.spec.template.spec.requirements);
    let claim_requirements = Requirements::from_labels(labels);
    claim_requirements
        .compatible(&pool_requirements, AllowUndefined::Nothing)
        .is_err()
        .then_some(DriftReason::RequirementsDrifted)
}

/// Instance-type drift: the claim has no instance-type label, its type is not in the
/// provider's list for the NodePool, or no offering of it matches the claim's zone and
/// capacity type. A `reserved` claim also accepts on-demand offerings: a reservation that
/// ends demotes the node to on-demand before its label catches up.
pub fn instance_type_not_found(
    instance_types: &[Arc<InstanceType>],
    claim: &NodeClaim,
) -> Option<DriftReason> {
    let labels = claim.metadata.labels.clone().unwrap_or_default();
    let Some(name) = labels.get(INSTANCE_TYPE_LABEL) else {
        return Some(DriftReason::InstanceTypeNotFound);
    };
    let Some(it) = instance_types.iter().find(|it| &it.name == name) else {
        return Some(DriftReason::InstanceTypeNotFound);
    };
    let zone = labels.get(ZONE_LABEL);
    let capacity_type = labels.get(CAPACITY_TYPE_LABEL);
    let offered = it.offerings.iter().any(|o| {
        zone.is_none_or(|z| *z == o.zone)
            && capacity_type.is_none_or(|ct| {
                *ct == o.capacity_type || (ct == "reserved" && o.capacity_type == "on-demand")
            })
    });
    (!offered).then_some(DriftReason::InstanceTypeNotFound)
}

/// Overlay drift (gate `NodeOverlay`): the claim was launched with capacity overlays on its
/// instance type, recorded ([`CAPACITY_OVERLAY_HASH_ANNOTATION`]), and what `overlays` give
/// that type in `pool` now differs — a capacity changed, added beside or removed — so a node
/// launched now would advertise other extended resources. Claims without the record
/// (launched without capacity overlays, with the gate off, before it, or by upstream) are
/// never judged, so neither turning the gate on nor adding a first overlay drifts anything;
/// nor is a type `overlays` were not evaluated with. Price overlays never drift a node:
/// consolidation weighs prices.
pub fn overlay_drift(overlays: &Evaluation, pool: &str, claim: &NodeClaim) -> Option<DriftReason> {
    let recorded = annotation(&claim.metadata, CAPACITY_OVERLAY_HASH_ANNOTATION)?;
    let instance_type = claim.metadata.labels.as_ref()?.get(INSTANCE_TYPE_LABEL)?;
    (overlays.covers(pool, instance_type)
        && overlays.capacity_hash(pool, instance_type) != recorded)
        .then_some(DriftReason::NodeOverlayDrifted)
}

/// Static and requirement drift, in upstream's order.
pub fn template_drift(pool: &NodePool, claim: &NodeClaim) -> Option<DriftReason> {
    static_drift(pool, claim).or_else(|| {
        requirements_drift(
            pool,
            claim.metadata.labels.as_ref().unwrap_or(&BTreeMap::new()),
        )
    })
}

/// The annotations a NodePool should gain for its hash to be current, if any.
pub fn node_pool_hash_annotations(pool: &NodePool) -> Option<BTreeMap<String, String>> {
    let hash = pool.hash();
    let current = annotation(&pool.metadata, NODE_POOL_HASH_ANNOTATION) == Some(hash.as_str())
        && annotation(&pool.metadata, NODE_POOL_HASH_VERSION_ANNOTATION)
            == Some(NODE_POOL_HASH_VERSION);
    (!current).then(|| {
        BTreeMap::from([
            (NODE_POOL_HASH_ANNOTATION.to_string(), hash),
            (
                NODE_POOL_HASH_VERSION_ANNOTATION.to_string(),
                NODE_POOL_HASH_VERSION.to_string(),
            ),
        ])
    })
}

/// The annotations a claim made under another hash version should gain: the current version,
/// and the NodePool's current hash unless the claim already carries a `Drifted` condition
/// (a hash of another algorithm cannot say whether that drift has since been undone, so the
/// claim stays drifted). `None` when the claim's version is current.
pub fn node_claim_hash_annotations(
    pool: &NodePool,
    claim: &NodeClaim,
) -> Option<BTreeMap<String, String>> {
    if annotation(&claim.metadata, NODE_POOL_HASH_VERSION_ANNOTATION)
        == Some(NODE_POOL_HASH_VERSION)
    {
        return None;
    }
    let mut update = BTreeMap::from([(
        NODE_POOL_HASH_VERSION_ANNOTATION.to_string(),
        NODE_POOL_HASH_VERSION.to_string(),
    )]);
    if !has_drifted_condition(claim) {
        update.insert(NODE_POOL_HASH_ANNOTATION.to_string(), pool.hash());
    }
    Some(update)
}
