//! The NodeClaim object a decided claim is created as: the template's labels and annotations,
//! the hash drift compares against later, the requirements with the instance types listed
//! cheapest first, and the NodePool as owner.

use k8s_openapi::Resource;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use karpenter_api::labels::{
    NODE_POOL_HASH_ANNOTATION, NODE_POOL_HASH_VERSION_ANNOTATION, NODE_POOL_LABEL,
};
use karpenter_api::nodeclaim::ResourceRequirements;
use karpenter_api::{NodeClaim, NodeClaimSpec, NodePool};

use super::scheduling::NewNodeClaim;

/// The NodeClaim to create for `claim` of `pool` (named by the API server from
/// `generateName`).
pub fn node_claim_for(claim: &NewNodeClaim, pool: &NodePool) -> NodeClaim {
    let template = &pool.spec.template;
    let mut labels = template.metadata.labels.clone();
    labels.extend(claim.labels.clone());
    labels.insert(NODE_POOL_LABEL.into(), pool.name().to_string());
    // The hash the claim is made under: static drift compares it with the NodePool's.
    let mut annotations = template.metadata.annotations.clone();
    annotations.insert(NODE_POOL_HASH_ANNOTATION.into(), pool.hash());
    annotations.insert(
        NODE_POOL_HASH_VERSION_ANNOTATION.into(),
        karpenter_api::hash::NODE_POOL_HASH_VERSION.into(),
    );
    // Upstream writes it on every claim it makes: "true" or "false".
    annotations.insert(
        karpenter_api::labels::NODE_CLAIM_MIN_VALUES_RELAXED_ANNOTATION.into(),
        claim.min_values_relaxed.to_string(),
    );
    // Its node initializes once these drivers published their devices.
    if !claim.dra_drivers.is_empty() {
        annotations.insert(
            crate::scheduling::dynamic_resources::REQUESTED_DRA_DRIVERS_ANNOTATION.into(),
            claim.dra_drivers.join(","),
        );
    }
    // As upstream: marks claims launched with an overlaid price or capacity among their types.
    use karpenter_api::nodeoverlay::{
        CAPACITY_OVERLAY_APPLIED_ANNOTATION, PRICE_OVERLAY_APPLIED_ANNOTATION,
    };
    if claim.instance_types.iter().any(|it| it.price_overlaid()) {
        annotations.insert(PRICE_OVERLAY_APPLIED_ANNOTATION.into(), "true".into());
    }
    if claim.instance_types.iter().any(|it| it.capacity_overlaid()) {
        annotations.insert(CAPACITY_OVERLAY_APPLIED_ANNOTATION.into(), "true".into());
    }
    NodeClaim {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-", pool.name())),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: Some(vec![OwnerReference {
                api_version: NodePool::API_VERSION.into(),
                kind: NodePool::KIND.into(),
                name: pool.name().to_string(),
                uid: pool.metadata.uid.clone().unwrap_or_default(),
                block_owner_deletion: Some(true),
                controller: None,
            }]),
            ..Default::default()
        },
        spec: NodeClaimSpec {
            taints: claim.taints.clone(),
            startup_taints: claim.startup_taints.clone(),
            requirements: claim
                .node_claim_requirements()
                .iter()
                .flat_map(|r| r.to_node_selector_requirements())
                .collect(),
            resources: ResourceRequirements {
                requests: claim.requests.to_list(),
            },
            node_class_ref: template.spec.node_class_ref.clone(),
            termination_grace_period: template.spec.termination_grace_period,
            expire_after: template.spec.expire_after,
        },
        status: None,
    }
}
