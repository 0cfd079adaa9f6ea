//! The `pods/eviction` subresource: a pod goes only if every PodDisruptionBudget covering it
//! still allows a disruption, computed as kube-controller-manager would at this moment.

use http::StatusCode;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use karpenter_core::disruption::pdb::{disruptions_allowed, selects};
use serde_json::Value;

use crate::store::ApiError;

/// The API server's words when a pod is under more than one budget.
pub const MULTIPLE_PDBS: &str = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.";

/// Whether a pod counts as healthy for a budget: running, Ready and not being deleted.
pub fn healthy(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod.status.as_ref().is_some_and(|s| {
            s.phase.as_deref() == Some("Running")
                && s.conditions
                    .iter()
                    .flatten()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
        })
}

fn terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// A budget's status as kube-controller-manager would write it now.
pub fn budget_status(pdb: &PodDisruptionBudget, pods: &[Pod]) -> (usize, usize, i32) {
    let matching: Vec<&Pod> = pods
        .iter()
        .filter(|p| !terminal(p) && p.metadata.deletion_timestamp.is_none() && selects(pdb, p))
        .collect();
    let healthy = matching.iter().filter(|p| healthy(p)).count();
    (
        matching.len(),
        healthy,
        disruptions_allowed(pdb, matching.len(), healthy),
    )
}

/// Decides an eviction. Unhealthy pods may always go (the `AlwaysAllow` unhealthy-pod policy);
/// a healthy one needs one allowed disruption from its only budget.
pub fn check(pod: &Pod, pdbs: &[PodDisruptionBudget], pods: &[Pod]) -> Result<(), ApiError> {
    if terminal(pod) || pod.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let covering: Vec<&PodDisruptionBudget> = pdbs.iter().filter(|b| selects(b, pod)).collect();
    if covering.len() > 1 {
        return Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalError",
            MULTIPLE_PDBS,
        ));
    }
    let Some(pdb) = covering.first() else {
        return Ok(());
    };
    if !healthy(pod) {
        return Ok(());
    }
    let (expected, healthy, allowed) = budget_status(pdb, pods);
    if allowed > 0 {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "TooManyRequests",
        format!(
            "Cannot evict pod as it would violate the pod's disruption budget. The disruption budget {} has {healthy} healthy of {expected} pods and allows no disruption",
            pdb.metadata.name.as_deref().unwrap_or_default()
        ),
    ))
}

/// Reads typed objects out of the store's JSON, skipping any that do not parse.
pub fn typed<T: serde::de::DeserializeOwned>(values: &[std::sync::Arc<Value>]) -> Vec<T> {
    values
        .iter()
        .filter_map(|v| serde_json::from_value((**v).clone()).ok())
        .collect()
}
