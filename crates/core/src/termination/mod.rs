//! Termination decisions shared by the controller's drain and the simulator's: which pods a
//! drain may evict and when the NodeClaim's `terminationGracePeriod` forces the rest out.

use std::collections::BTreeMap;

use karpenter_api::labels::DO_NOT_DISRUPT_ANNOTATION;

/// Whether a drain may evict a pod with these annotations. A pod annotated
/// `karpenter.sh/do-not-disrupt: "true"` is never evicted: the drain waits for it, and only
/// the NodeClaim's `terminationGracePeriod` (when set) deletes it, at its deadline — upstream's
/// `IsEvictable`.
pub fn evictable(annotations: Option<&BTreeMap<String, String>>) -> bool {
    annotations
        .and_then(|a| a.get(DO_NOT_DISRUPT_ANNOTATION))
        .is_none_or(|v| v != "true")
}

/// Whether a pod still on a draining node must be deleted now: its node's termination
/// `deadline` (seconds) is so close that the pod's own grace period would run past it.
pub fn forced(deadline: Option<i64>, pod_grace_seconds: i64, now: i64) -> bool {
    deadline.is_some_and(|d| now >= d - pod_grace_seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_true_do_not_disrupt_protects_from_eviction() {
        let with = |v: &str| BTreeMap::from([(DO_NOT_DISRUPT_ANNOTATION.to_string(), v.into())]);
        assert!(evictable(None));
        assert!(evictable(Some(&BTreeMap::new())));
        assert!(!evictable(Some(&with("true"))));
        assert!(evictable(Some(&with("false"))));
        // A duration guards a candidate from disruption, not a pod from a drain underway.
        assert!(evictable(Some(&with("1h"))));
    }

    #[test]
    fn the_grace_period_deadline_forces_pods_out_in_time() {
        assert!(
            !forced(None, 30, 1_000_000),
            "no terminationGracePeriod: wait"
        );
        assert!(!forced(Some(1000), 30, 969));
        assert!(
            forced(Some(1000), 30, 970),
            "its own 30 s would end at the deadline"
        );
        assert!(forced(Some(1000), 0, 1000));
    }
}
