//! Which NodePools provisioning launches from: the same answer for the controller, the
//! simulator and `plan`.

use karpenter_api::NodePool;
use karpenter_api::nodepool::condition::READY;

/// Whether provisioning may launch from `pool`: not being deleted, not a static-capacity pool
/// (`spec.replicas`, which keeps its own count), and not reported not `Ready` by its status
/// (runtime validation failed or its NodeClass is not ready). A status not written yet — a
/// NodePool just created, or one in a scenario file — does not block launches.
pub fn provisionable(pool: &NodePool) -> bool {
    pool.spec.replicas.is_none() && launchable(pool)
}

/// Whether anything may launch from `pool` at all, dynamic or static (`spec.replicas`): not
/// being deleted, and not reported not `Ready`.
pub fn launchable(pool: &NodePool) -> bool {
    pool.metadata.deletion_timestamp.is_none()
        && pool
            .status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == READY))
            .is_none_or(|c| c.status == "True")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn which_pools_launch() {
        let cases = [
            (json!({}), json!(null), true),
            (
                json!({}),
                json!({"conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}),
                true,
            ),
            (
                json!({}),
                json!({"conditions": [{"type": "Ready", "status": "False", "reason": "UnhealthyDependents", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}),
                false,
            ),
            (
                json!({}),
                json!({"conditions": [{"type": "Ready", "status": "Unknown", "reason": "ReconcilingDependents", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}),
                false,
            ),
            (json!({}), json!({"conditions": []}), true),
            (json!({"replicas": 3}), json!(null), false),
        ];
        for (extra, status, want) in cases {
            let mut spec = json!({"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                "requirements": [],
            }}});
            spec.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            let pool: NodePool = serde_json::from_value(json!({
                "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                "metadata": {"name": "p"}, "spec": spec, "status": status,
            }))
            .unwrap();
            assert_eq!(provisionable(&pool), want, "{extra} {status}");
        }
        let mut going: NodePool = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "p"},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": "g", "kind": "K", "name": "n"}, "requirements": []}}},
        }))
        .unwrap();
        going.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        assert!(!provisionable(&going));
    }
}
