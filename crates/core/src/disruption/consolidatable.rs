//! Upstream's NodeClaim `Consolidatable` condition: true once `consolidateAfter` has passed
//! since a pod last bound to or left the node (or since it initialized, if none has), absent
//! while it has not, while the NodeClaim is not initialized, when its NodePool disables
//! consolidation, and on a static NodePool's NodeClaims (`spec.replicas`: never consolidated).

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use karpenter_api::nodeclaim::condition::INITIALIZED;
use karpenter_api::{NodeClaim, NodePool};

/// What the condition should be now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Consolidatable {
    /// No condition: consolidation is disabled, the NodePool is static, or the NodeClaim is
    /// not initialized.
    Absent,
    /// No condition yet; it becomes true at this time.
    At(Timestamp),
    /// True.
    Yes,
}

/// The `Consolidatable` condition `claim` of `pool` should carry at `now`.
pub fn consolidatable(pool: &NodePool, claim: &NodeClaim, now: Timestamp) -> Consolidatable {
    if pool.spec.replicas.is_some() {
        return Consolidatable::Absent;
    }
    let Some(after) = pool.spec.disruption.consolidate_after.0 else {
        return Consolidatable::Absent;
    };
    let status = claim.status.as_ref();
    let Some(initialized) = status
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == INITIALIZED))
        .filter(|c| c.status == "True")
    else {
        return Consolidatable::Absent;
    };
    let since = status
        .and_then(|s| s.last_pod_event_time.as_ref())
        .map_or(initialized.last_transition_time.0, |t| t.0);
    let at = since
        .checked_add(SignedDuration::try_from(after).unwrap_or(SignedDuration::MAX))
        .unwrap_or(Timestamp::MAX);
    if now < at {
        Consolidatable::At(at)
    } else {
        Consolidatable::Yes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_api::NillableDuration;
    use serde_json::json;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).unwrap()
    }

    fn claim(initialized: Option<i64>, last_pod_event: Option<i64>) -> NodeClaim {
        let conditions: Vec<_> = initialized
            .map(|at| json!({"type": "Initialized", "status": "True", "reason": "Initialized", "message": "", "lastTransitionTime": t(at).to_string()}))
            .into_iter()
            .collect();
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "c"},
            "spec": {"nodeClassRef": {"group": "g", "kind": "K", "name": "n"}, "requirements": []},
            "status": {"conditions": conditions, "lastPodEventTime": last_pod_event.map(|s| t(s).to_string())},
        }))
        .unwrap()
    }

    /// Upstream's NodeClaim disruption suite for the condition, as a table.
    #[test]
    fn the_condition_follows_consolidate_after() {
        let pool = |after: NillableDuration| {
            let mut p = NodePool::default();
            p.spec.disruption.consolidate_after = after;
            p
        };
        let thirty = pool(NillableDuration::from_secs(30));
        let cases = [
            (
                "consolidation disabled",
                pool(NillableDuration::NEVER),
                claim(Some(0), None),
                100,
                Consolidatable::Absent,
            ),
            (
                "not initialized",
                thirty.clone(),
                claim(None, None),
                100,
                Consolidatable::Absent,
            ),
            (
                "initialized long ago, no pod event",
                thirty.clone(),
                claim(Some(0), None),
                100,
                Consolidatable::Yes,
            ),
            (
                "initialized just now",
                thirty.clone(),
                claim(Some(90), None),
                100,
                Consolidatable::At(t(120)),
            ),
            (
                "a pod event within consolidateAfter",
                thirty.clone(),
                claim(Some(0), Some(80)),
                100,
                Consolidatable::At(t(110)),
            ),
            (
                "a pod event exactly consolidateAfter ago",
                thirty.clone(),
                claim(Some(0), Some(70)),
                100,
                Consolidatable::Yes,
            ),
            (
                "consolidateAfter 0",
                pool(NillableDuration::from_secs(0)),
                claim(Some(0), Some(100)),
                100,
                Consolidatable::Yes,
            ),
            (
                "should not set consolidatable condition for Static Nodepool",
                {
                    let mut p = thirty.clone();
                    p.spec.replicas = Some(1);
                    p
                },
                claim(Some(0), Some(40)),
                100,
                Consolidatable::Absent,
            ),
        ];
        for (case, pool, claim, now, expected) in cases {
            assert_eq!(consolidatable(&pool, &claim, t(now)), expected, "{case}");
        }
    }
}
