//! Every event upstream Karpenter publishes, as one constructor each: upstream's reason, type,
//! message, dedupe values and window, so runbooks and alerts keyed on them read the same.
//! The callers choose the involved object (upstream publishes several on both the Node and
//! its NodeClaim: call the constructor once per object with that object's UID).
//!
//! Values that identify an object are what upstream dedupes on: the UID for most, the name
//! for the termination events (upstream uses `pod.Name` and `node.Name` there).

use std::time::Duration;

use super::{Note, normal, warning};

/// Upstream's reasons (`pkg/events/reason.go` and the inline ones).
pub mod reason {
    /// A node, NodeClaim or NodePool cannot be disrupted now.
    pub const DISRUPTION_BLOCKED: &str = "DisruptionBlocked";
    /// A disruption command launched a replacement NodeClaim.
    pub const DISRUPTION_LAUNCHING: &str = "DisruptionLaunching";
    /// A disruption command deletes its candidates.
    pub const DISRUPTION_TERMINATING: &str = "DisruptionTerminating";
    /// A disruption command waits for its replacements to initialize.
    pub const DISRUPTION_WAITING_READINESS: &str = "DisruptionWaitingReadiness";
    /// A node cannot be consolidated.
    pub const UNCONSOLIDATABLE: &str = "Unconsolidatable";
    /// A consolidation candidate was found (upstream: Balanced policy).
    pub const CONSOLIDATION_CANDIDATE: &str = "ConsolidationCandidate";
    /// A consolidation failed its re-validation.
    pub const CONSOLIDATION_REJECTED: &str = "ConsolidationRejected";
    /// A Balanced consolidation's score passed the threshold.
    pub const CONSOLIDATION_APPROVED: &str = "ConsolidationApproved";
    /// A pod could not be scheduled by the simulation.
    pub const FAILED_SCHEDULING: &str = "FailedScheduling";
    /// No instance type is left for a NodePool after its requirements.
    pub const NO_COMPATIBLE_INSTANCE_TYPES: &str = "NoCompatibleInstanceTypes";
    /// A pod should schedule on a node or NodeClaim.
    pub const NOMINATED: &str = "Nominated";
    /// Node repair is blocked by its circuit breaker (feature gate `NodeRepair`).
    pub const NODE_REPAIR_BLOCKED: &str = "NodeRepairBlocked";
    /// A pod was deleted at the node's terminationGracePeriod.
    pub const DISRUPTED: &str = "Disrupted";
    /// A pod was evicted.
    pub const EVICTED: &str = "Evicted";
    /// A node's drain is held up.
    pub const FAILED_DRAINING: &str = "FailedDraining";
    /// A node's pods will be deleted at its terminationGracePeriod.
    pub const TERMINATION_GRACE_PERIOD_EXPIRING: &str = "TerminationGracePeriodExpiring";
    /// Upstream's `TerminationFailed` (declared, never published upstream).
    pub const FAILED_TERMINATION: &str = "FailedTermination";
    /// The node does not look like what was launched.
    pub const FAILED_CONSISTENCY_CHECK: &str = "FailedConsistencyCheck";
    /// The cloud had no capacity for a NodeClaim.
    pub const INSUFFICIENT_CAPACITY_ERROR: &str = "InsufficientCapacityError";
    /// A registering node lacked `karpenter.sh/unregistered`.
    pub const UNREGISTERED_TAINT_MISSING: &str = "UnregisteredTaintMissing";
    /// A NodeClaim's NodeClass is not Ready.
    pub const NODE_CLASS_NOT_READY: &str = "NodeClassNotReady";
    /// A node's deletion waits for volume attachments.
    pub const AWAITING_VOLUME_DETACHMENT: &str = "AwaitingVolumeDetachment";
    /// A pod's `karpenter.sh/do-not-disrupt` value is not a duration.
    pub const INVALID_DO_NOT_DISRUPT_ANNOTATION: &str = "InvalidDoNotDisruptAnnotation";
    /// A pod's do-not-disrupt duration will elapse.
    pub const DO_NOT_DISRUPT_UNTIL: &str = "DoNotDisruptUntil";
    /// A pod's do-not-disrupt duration elapsed.
    pub const DO_NOT_DISRUPT_GRACE_PERIOD_ELAPSED: &str = "DoNotDisruptGracePeriodElapsed";
}

use reason::*;

const MINUTE: Duration = Duration::from_secs(60);

/// Upstream title-cases a disruption reason (`cases.Title(language.Und, cases.NoLower)`):
/// the first letter of each word upper-cased, the rest left alone.
pub fn title(reason: &str) -> String {
    let mut out = String::with_capacity(reason.len());
    let mut start = true;
    for ch in reason.chars() {
        if start {
            out.extend(ch.to_uppercase());
        } else {
            out.push(ch);
        }
        start = ch.is_whitespace();
    }
    out
}

/// Upstream's `pretty.Sentence`: the first letter upper-cased.
pub fn sentence(s: &str) -> String {
    let mut chars = s.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_uppercase().chain(chars).collect()
    })
}

/// Upstream's `pretty.Slice`: at most `max` items, then "and N other(s)".
pub fn slice(items: &[String], max: usize) -> String {
    let mut out = String::new();
    for (i, item) in items.iter().enumerate() {
        if i >= max {
            out.push_str(&format!(" and {} other(s)", items.len() - i));
            break;
        }
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(item);
    }
    out
}

/// Upstream truncates a cloud error at 300 bytes with "...".
pub fn truncate(message: &str) -> String {
    if message.len() < 300 {
        return message.to_string();
    }
    let mut end = 300;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &message[..end])
}

/// `DisruptionLaunching` on a replacement NodeClaim.
pub fn disruption_launching(claim_uid: &str, reason: &str) -> Note<'static> {
    normal(
        DISRUPTION_LAUNCHING,
        format!("Launching NodeClaim: {}", title(reason)),
    )
    .deduped_by(&[claim_uid, reason])
}

/// `DisruptionWaitingReadiness` on a replacement NodeClaim not initialized yet.
pub fn disruption_waiting_readiness(claim_uid: &str) -> Note<'static> {
    normal(
        DISRUPTION_WAITING_READINESS,
        "Waiting on readiness to continue disruption",
    )
    .deduped_by(&[claim_uid])
}

/// `DisruptionTerminating` on a candidate's Node (`kind` "Node") or NodeClaim ("NodeClaim").
pub fn disruption_terminating(kind: &str, uid: &str, reason: &str) -> Note<'static> {
    normal(
        DISRUPTION_TERMINATING,
        format!("Disrupting {kind}: {}", title(reason)),
    )
    .deduped_by(&[uid, reason])
}

/// `Unconsolidatable` on a node or NodeClaim: once per 15 minutes whatever the message.
pub fn unconsolidatable(uid: &str, message: &str) -> Note<'static> {
    normal(UNCONSOLIDATABLE, message)
        .deduped_by(&[uid])
        .for_window(15 * MINUTE)
}

/// `DisruptionBlocked` on a node or NodeClaim.
pub fn disruption_blocked(uid: &str, message: &str) -> Note<'static> {
    normal(DISRUPTION_BLOCKED, message).deduped_by(&[uid])
}

/// `DisruptionBlocked` on a NodePool whose budget allows no disruption for `reason`.
pub fn nodepool_blocked_for_reason(pool_uid: &str, reason: &str) -> Note<'static> {
    normal(
        DISRUPTION_BLOCKED,
        format!("No allowed disruptions for disruption reason {reason} due to blocking budget"),
    )
    .deduped_by(&[pool_uid, reason])
    .for_window(MINUTE)
}

/// `DisruptionBlocked` on a NodePool whose budget allows no disruption at all.
pub fn nodepool_blocked(pool_uid: &str) -> Note<'static> {
    normal(
        DISRUPTION_BLOCKED,
        "No allowed disruptions due to blocking budget",
    )
    .deduped_by(&[pool_uid])
    .for_window(MINUTE)
}

/// `ConsolidationCandidate` on a node or NodeClaim (`command`: upstream's
/// `Command.StringForNode`).
pub fn consolidation_candidate(uid: &str, command: &str, savings: f64) -> Note<'static> {
    normal(
        CONSOLIDATION_CANDIDATE,
        format!("Consolidation candidate: {command} (savings: ${savings:.2})"),
    )
    .deduped_by(&[uid, command])
}

/// `ConsolidationRejected` on a node or NodeClaim whose command failed re-validation.
pub fn consolidation_rejected(uid: &str, command: &str, why: &str, savings: f64) -> Note<'static> {
    normal(
        CONSOLIDATION_REJECTED,
        format!("Consolidation rejected: {command}, reason: {why} (savings: ${savings:.2})"),
    )
    .deduped_by(&[uid, command, why])
}

/// `ConsolidationApproved` (Balanced policy) on a node, NodeClaim or, for a multi-node
/// command, the NodePool.
pub fn consolidation_approved(
    uid: &str,
    score: f64,
    threshold: f64,
    k: i32,
    savings_pct: f64,
    disruption_pct: f64,
) -> Note<'static> {
    normal(
        CONSOLIDATION_APPROVED,
        format!(
            "score {score:.2} >= threshold {threshold:.2} (k: {k}, savings {savings_pct:.1}%, disruption {disruption_pct:.1}%)"
        ),
    )
    .deduped_by(&[uid])
}

/// `Nominated` on a pod: where it should schedule (`nodeclaim/…` and/or `node/…`), rate
/// limited with every other nomination.
pub fn nominated(pod_uid: &str, node_claim: Option<&str>, node: Option<&str>) -> Note<'static> {
    let info: Vec<String> = [
        node_claim.map(|c| format!("nodeclaim/{c}")),
        node.map(|n| format!("node/{n}")),
    ]
    .into_iter()
    .flatten()
    .collect();
    Note {
        rate_limited: true,
        ..normal(
            NOMINATED,
            format!("Pod should schedule on: {}", info.join(", ")),
        )
        .deduped_by(&[pod_uid])
    }
}

/// `NoCompatibleInstanceTypes` on a NodePool whose requirements leave no instance type.
pub fn no_compatible_instance_types(pool_uid: &str, min_values: bool) -> Note<'static> {
    let message = if min_values {
        "NodePool requirements filtered out all compatible available instance types due to minValues incompatibility"
    } else {
        "NodePool requirements filtered out all compatible available instance types"
    };
    warning(NO_COMPATIBLE_INSTANCE_TYPES, message)
        .deduped_by(&[pool_uid])
        .for_window(MINUTE)
}

/// `FailedScheduling` on a pod: once per 5 minutes whatever the error.
pub fn failed_scheduling(pod_uid: &str, error: &str) -> Note<'static> {
    warning(
        FAILED_SCHEDULING,
        format!("Failed to schedule pod, {error}"),
    )
    .deduped_by(&[pod_uid])
    .for_window(5 * MINUTE)
}

/// `Evicted` on a pod, with the eviction's reason (its NodeClaim's `DisruptionReason`, or
/// "Forceful Termination").
pub fn evicted(pod_name: &str, why: &str) -> Note<'static> {
    normal(EVICTED, format!("Evicted pod: {why}")).deduped_by(&[pod_name])
}

/// `Disrupted` on a pod deleted to meet its node's terminationGracePeriod (`termination_time`
/// as upstream prints a `time.Time`).
pub fn disrupted_pod_delete(
    pod_name: &str,
    termination_time: &str,
    grace_seconds: i64,
    pod_grace_seconds: i64,
) -> Note<'static> {
    normal(
        DISRUPTED,
        format!(
            "Deleting the pod to accommodate the terminationTime {termination_time} of the node. The pod was granted {grace_seconds} seconds of grace-period of its {pod_grace_seconds} terminationGracePeriodSeconds. This bypasses the PDB of the pod and the do-not-disrupt annotation."
        ),
    )
    .deduped_by(&[pod_name])
}

/// `FailedDraining` on a node.
pub fn failed_draining(node_name: &str, error: &str) -> Note<'static> {
    warning(FAILED_DRAINING, format!("Failed to drain node, {error}")).deduped_by(&[node_name])
}

/// `AwaitingVolumeDetachment` on a node.
pub fn awaiting_volume_detachment(node_name: &str, attachments: &[String]) -> Note<'static> {
    normal(
        AWAITING_VOLUME_DETACHMENT,
        format!(
            "Awaiting deletion of bound volumeattachments ({})",
            slice(attachments, 5)
        ),
    )
    .deduped_by(&[node_name])
}

/// `TerminationGracePeriodExpiring` on a node or NodeClaim (`name`), `at` in RFC 3339.
pub fn termination_grace_period_expiring(name: &str, at: &str) -> Note<'static> {
    warning(
        TERMINATION_GRACE_PERIOD_EXPIRING,
        format!("All pods will be deleted by {at}"),
    )
    .deduped_by(&[name])
}

/// `NodeRepairBlocked` on a Node whose repair the circuit breaker holds back, once per node
/// per 15 minutes (`message`: `karpenter_core::disruption::repair::Scope::blocked_message`).
pub fn node_repair_blocked(node_uid: &str, message: &str) -> Note<'static> {
    warning(NODE_REPAIR_BLOCKED, message)
        .deduped_by(&[node_uid])
        .for_window(15 * MINUTE)
}

/// `FailedConsistencyCheck` on a NodeClaim, one per issue.
pub fn failed_consistency_check(claim_uid: &str, issue: &str) -> Note<'static> {
    warning(FAILED_CONSISTENCY_CHECK, issue).deduped_by(&[claim_uid, issue])
}

/// `InsufficientCapacityError` on a NodeClaim the cloud had no capacity for.
pub fn insufficient_capacity(claim_name: &str, claim_uid: &str, error: &str) -> Note<'static> {
    warning(
        INSUFFICIENT_CAPACITY_ERROR,
        format!("NodeClaim {claim_name} event: {}", truncate(error)),
    )
    .deduped_by(&[claim_uid])
}

/// `NodeClassNotReady` on a NodeClaim (declared upstream; upstream's launch no longer
/// publishes it, ours does when a provider says the NodeClass is not ready).
pub fn node_class_not_ready(claim_name: &str, claim_uid: &str, error: &str) -> Note<'static> {
    warning(
        NODE_CLASS_NOT_READY,
        format!("NodeClaim {claim_name} event: {}", truncate(error)),
    )
    .deduped_by(&[claim_uid])
}

/// `UnregisteredTaintMissing` on a NodeClaim whose node registered without the taint.
pub fn unregistered_taint_missing(claim_uid: &str) -> Note<'static> {
    warning(
        UNREGISTERED_TAINT_MISSING,
        format!(
            "Missing {} taint which prevents registration related race conditions on Karpenter-managed nodes",
            karpenter_api::labels::UNREGISTERED_TAINT_KEY
        ),
    )
    .deduped_by(&[claim_uid])
}

/// `InvalidDoNotDisruptAnnotation` on a pod.
pub fn invalid_do_not_disrupt(pod_uid: &str, message: &str) -> Note<'static> {
    warning(
        INVALID_DO_NOT_DISRUPT_ANNOTATION,
        format!("Invalid karpenter.sh/do-not-disrupt annotation: {message}, ignoring annotation"),
    )
    .deduped_by(&[pod_uid, message])
}

/// `DoNotDisruptUntil` on a pod, `at` in RFC 3339.
pub fn do_not_disrupt_until(pod_uid: &str, at: &str) -> Note<'static> {
    normal(
        DO_NOT_DISRUPT_UNTIL,
        format!("The karpenter.sh/do-not-disrupt grace period will elapse at {at}"),
    )
    .deduped_by(&[pod_uid, at])
}

/// `DoNotDisruptGracePeriodElapsed` on a pod.
pub fn do_not_disrupt_grace_period_elapsed(pod_uid: &str) -> Note<'static> {
    normal(
        DO_NOT_DISRUPT_GRACE_PERIOD_ELAPSED,
        "The karpenter.sh/do-not-disrupt grace period has elapsed, pod is now disruptable",
    )
    .deduped_by(&[pod_uid])
}

#[cfg(test)]
mod tests {
    use super::super::EventType::{self, Normal, Warning};
    use super::*;

    /// (reason, type, message, dedupe values, window in seconds) of each constructor, as
    /// derived from upstream's event constructors (the messages are upstream's formats filled
    /// with the arguments below).
    #[test]
    fn constructors_match_upstreams_events() {
        type Row = (
            Note<'static>,
            &'static str,
            EventType,
            &'static str,
            &'static [&'static str],
            u64,
        );
        let rows: Vec<Row> = vec![
            (
                disruption_launching("c1", "Underutilized"),
                DISRUPTION_LAUNCHING,
                Normal,
                "Launching NodeClaim: Underutilized",
                &["c1", "Underutilized"],
                120,
            ),
            (
                disruption_waiting_readiness("c1"),
                DISRUPTION_WAITING_READINESS,
                Normal,
                "Waiting on readiness to continue disruption",
                &["c1"],
                120,
            ),
            (
                disruption_terminating("Node", "n1", "Drifted"),
                DISRUPTION_TERMINATING,
                Normal,
                "Disrupting Node: Drifted",
                &["n1", "Drifted"],
                120,
            ),
            (
                disruption_terminating("NodeClaim", "c1", "Empty"),
                DISRUPTION_TERMINATING,
                Normal,
                "Disrupting NodeClaim: Empty",
                &["c1", "Empty"],
                120,
            ),
            (
                unconsolidatable("n1", "Can't replace with a cheaper node"),
                UNCONSOLIDATABLE,
                Normal,
                "Can't replace with a cheaper node",
                &["n1"],
                900,
            ),
            (
                disruption_blocked("n1", "Node is nominated for a pending pod"),
                DISRUPTION_BLOCKED,
                Normal,
                "Node is nominated for a pending pod",
                &["n1"],
                120,
            ),
            (
                nodepool_blocked_for_reason("p1", "Drifted"),
                DISRUPTION_BLOCKED,
                Normal,
                "No allowed disruptions for disruption reason Drifted due to blocking budget",
                &["p1", "Drifted"],
                60,
            ),
            (
                nodepool_blocked("p1"),
                DISRUPTION_BLOCKED,
                Normal,
                "No allowed disruptions due to blocking budget",
                &["p1"],
                60,
            ),
            (
                consolidation_candidate("n1", "delete: [n1]", 0.125),
                CONSOLIDATION_CANDIDATE,
                Normal,
                "Consolidation candidate: delete: [n1] (savings: $0.12)",
                &["n1", "delete: [n1]"],
                120,
            ),
            (
                consolidation_rejected("n1", "delete: [n1]", "churn", 1.0),
                CONSOLIDATION_REJECTED,
                Normal,
                "Consolidation rejected: delete: [n1], reason: churn (savings: $1.00)",
                &["n1", "delete: [n1]", "churn"],
                120,
            ),
            (
                consolidation_approved("n1", 1.5, 1.0, 2, 40.0, 12.5),
                CONSOLIDATION_APPROVED,
                Normal,
                "score 1.50 >= threshold 1.00 (k: 2, savings 40.0%, disruption 12.5%)",
                &["n1"],
                120,
            ),
            (
                nominated("u1", Some("default-abc"), None),
                NOMINATED,
                Normal,
                "Pod should schedule on: nodeclaim/default-abc",
                &["u1"],
                120,
            ),
            (
                nominated("u1", None, Some("node-1")),
                NOMINATED,
                Normal,
                "Pod should schedule on: node/node-1",
                &["u1"],
                120,
            ),
            (
                no_compatible_instance_types("p1", false),
                NO_COMPATIBLE_INSTANCE_TYPES,
                Warning,
                "NodePool requirements filtered out all compatible available instance types",
                &["p1"],
                60,
            ),
            (
                no_compatible_instance_types("p1", true),
                NO_COMPATIBLE_INSTANCE_TYPES,
                Warning,
                "NodePool requirements filtered out all compatible available instance types due to minValues incompatibility",
                &["p1"],
                60,
            ),
            (
                failed_scheduling("u1", "no nodepools found"),
                FAILED_SCHEDULING,
                Warning,
                "Failed to schedule pod, no nodepools found",
                &["u1"],
                300,
            ),
            (
                evicted("web-1", "Underutilized"),
                EVICTED,
                Normal,
                "Evicted pod: Underutilized",
                &["web-1"],
                120,
            ),
            (
                disrupted_pod_delete("web-1", "2026-01-01 00:10:00 +0000 UTC", 30, 60),
                DISRUPTED,
                Normal,
                "Deleting the pod to accommodate the terminationTime 2026-01-01 00:10:00 +0000 UTC of the node. The pod was granted 30 seconds of grace-period of its 60 terminationGracePeriodSeconds. This bypasses the PDB of the pod and the do-not-disrupt annotation.",
                &["web-1"],
                120,
            ),
            (
                node_repair_blocked("n1", "more than 20% nodes are unhealthy in the nodepool"),
                NODE_REPAIR_BLOCKED,
                Warning,
                "more than 20% nodes are unhealthy in the nodepool",
                &["n1"],
                900,
            ),
            (
                failed_draining("node-1", "evicting pod violates a PDB (Pod=default/web-1)"),
                FAILED_DRAINING,
                Warning,
                "Failed to drain node, evicting pod violates a PDB (Pod=default/web-1)",
                &["node-1"],
                120,
            ),
            (
                awaiting_volume_detachment("node-1", &["va-1".into(), "va-2".into()]),
                AWAITING_VOLUME_DETACHMENT,
                Normal,
                "Awaiting deletion of bound volumeattachments (va-1, va-2)",
                &["node-1"],
                120,
            ),
            (
                termination_grace_period_expiring("node-1", "2026-01-01T00:10:00Z"),
                TERMINATION_GRACE_PERIOD_EXPIRING,
                Warning,
                "All pods will be deleted by 2026-01-01T00:10:00Z",
                &["node-1"],
                120,
            ),
            (
                failed_consistency_check(
                    "c1",
                    "expected 4 of resource cpu, but found 2 (50.0% of expected)",
                ),
                FAILED_CONSISTENCY_CHECK,
                Warning,
                "expected 4 of resource cpu, but found 2 (50.0% of expected)",
                &[
                    "c1",
                    "expected 4 of resource cpu, but found 2 (50.0% of expected)",
                ],
                120,
            ),
            (
                insufficient_capacity("default-abc", "c1", "all offerings unavailable"),
                INSUFFICIENT_CAPACITY_ERROR,
                Warning,
                "NodeClaim default-abc event: all offerings unavailable",
                &["c1"],
                120,
            ),
            (
                node_class_not_ready("default-abc", "c1", "not ready"),
                NODE_CLASS_NOT_READY,
                Warning,
                "NodeClaim default-abc event: not ready",
                &["c1"],
                120,
            ),
            (
                unregistered_taint_missing("c1"),
                UNREGISTERED_TAINT_MISSING,
                Warning,
                "Missing karpenter.sh/unregistered taint which prevents registration related race conditions on Karpenter-managed nodes",
                &["c1"],
                120,
            ),
            (
                invalid_do_not_disrupt("u1", "time: invalid duration \"x\""),
                INVALID_DO_NOT_DISRUPT_ANNOTATION,
                Warning,
                "Invalid karpenter.sh/do-not-disrupt annotation: time: invalid duration \"x\", ignoring annotation",
                &["u1", "time: invalid duration \"x\""],
                120,
            ),
            (
                do_not_disrupt_until("u1", "2026-01-01T00:10:00Z"),
                DO_NOT_DISRUPT_UNTIL,
                Normal,
                "The karpenter.sh/do-not-disrupt grace period will elapse at 2026-01-01T00:10:00Z",
                &["u1", "2026-01-01T00:10:00Z"],
                120,
            ),
            (
                do_not_disrupt_grace_period_elapsed("u1"),
                DO_NOT_DISRUPT_GRACE_PERIOD_ELAPSED,
                Normal,
                "The karpenter.sh/do-not-disrupt grace period has elapsed, pod is now disruptable",
                &["u1"],
                120,
            ),
        ];
        for (note, reason, type_, message, values, window) in rows {
            assert_eq!(note.reason, reason);
            assert_eq!(note.type_, type_, "{reason}");
            assert_eq!(note.message, message, "{reason}");
            assert_eq!(note.dedupe_values, values, "{reason}");
            assert_eq!(note.dedupe, Duration::from_secs(window), "{reason}");
            assert_eq!(note.rate_limited, reason == NOMINATED, "{reason}");
        }
    }

    #[test]
    fn upstreams_string_helpers() {
        assert_eq!(title("underutilized"), "Underutilized");
        assert_eq!(title("Drifted"), "Drifted");
        assert_eq!(title("forceful termination"), "Forceful Termination");
        assert_eq!(sentence("can't replace"), "Can't replace");
        let names: Vec<String> = (1..=7).map(|i| format!("va-{i}")).collect();
        assert_eq!(
            slice(&names, 5),
            "va-1, va-2, va-3, va-4, va-5 and 2 other(s)"
        );
        assert_eq!(truncate("short"), "short");
        let long = "x".repeat(400);
        assert_eq!(truncate(&long), format!("{}...", "x".repeat(300)));
    }
}
