//! Disruption budgets: how many of a NodePool's nodes may be disrupted at once, now, for a
//! reason.

use karpenter_api::cron::Schedule;
use karpenter_api::{Budget, DisruptionReason, NodePool};

/// How many nodes `budget` allows out of `nodes`, or `None` when it is not active now.
/// An invalid budget allows nothing (fail closed), as upstream.
pub fn budget_allows(budget: &Budget, nodes: usize, now: i64) -> Option<usize> {
    if let (Some(schedule), Some(duration)) = (&budget.schedule, &budget.duration) {
        let Ok(schedule) = Schedule::parse(schedule) else {
            return Some(0);
        };
        let window = duration.0.as_secs() as i64;
        // Active when the schedule fired within the last `duration` (upstream: Next(now − d) ≤ now).
        let active = schedule
            .next_after(now - window)
            .is_some_and(|fired| fired <= now);
        if !active {
            return None;
        }
    }
    let nodes_field = budget.nodes.trim();
    let allowed = match nodes_field.strip_suffix('%') {
        Some(percent) => match percent.parse::<u64>() {
            // Percentages round up: 10% of 5 nodes is 1.
            Ok(p) => ((nodes as u64 * p).div_ceil(100)) as usize,
            Err(_) => 0,
        },
        None => nodes_field.parse::<usize>().unwrap_or(0),
    };
    Some(allowed)
}

/// The most nodes of `node_pool` that may be disrupted for `reason` now: the smallest allowance
/// of the active budgets that cover the reason (unlimited when none is active).
pub fn allowed_disruptions(
    node_pool: &NodePool,
    nodes: usize,
    reason: DisruptionReason,
    now: i64,
) -> usize {
    node_pool
        .spec
        .disruption
        .budgets
        .iter()
        .filter(|b| b.reasons.as_ref().is_none_or(|r| r.contains(&reason)))
        .filter_map(|b| budget_allows(b, nodes, now))
        .min()
        .unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_api::Duration;

    fn budget(
        nodes: &str,
        schedule: Option<&str>,
        duration_s: Option<u64>,
        reasons: Option<Vec<DisruptionReason>>,
    ) -> Budget {
        Budget {
            nodes: nodes.into(),
            schedule: schedule.map(str::to_string),
            duration: duration_s.map(Duration::from_secs),
            reasons,
        }
    }

    /// 2024-06-03 (a Monday) at `hour:minute` UTC, in seconds since the epoch.
    fn monday(hour: i64, minute: i64) -> i64 {
        1_717_372_800 + hour * 3600 + minute * 60
    }

    #[test]
    fn counts_and_percentages() {
        // (nodes field, node count, allowed)
        let cases = [
            ("10%", 10, 1),
            ("10%", 5, 1),
            ("10%", 0, 0),
            ("50%", 3, 2),
            ("100%", 7, 7),
            ("0%", 7, 0),
            ("5", 3, 5),
            ("0", 10, 0),
            ("bogus", 10, 0),
            ("x%", 10, 0),
        ];
        for (nodes, count, want) in cases {
            assert_eq!(
                budget_allows(&budget(nodes, None, None, None), count, 0),
                Some(want),
                "{nodes} of {count}"
            );
        }
    }

    #[test]
    fn schedules_activate_for_their_duration() {
        let weekdays = budget("0", Some("0 9 * * mon-fri"), Some(8 * 3600), None);
        assert_eq!(
            budget_allows(&weekdays, 10, monday(8, 59)),
            None,
            "before the window"
        );
        assert_eq!(
            budget_allows(&weekdays, 10, monday(9, 0)),
            Some(0),
            "at the start"
        );
        assert_eq!(
            budget_allows(&weekdays, 10, monday(16, 59)),
            Some(0),
            "inside"
        );
        assert_eq!(budget_allows(&weekdays, 10, monday(17, 1)), None, "after");
        assert_eq!(
            budget_allows(
                &budget("0", Some("61 * * * *"), Some(3600), None),
                10,
                monday(9, 0)
            ),
            Some(0),
            "invalid cron fails closed"
        );
    }

    #[test]
    fn the_smallest_active_budget_for_the_reason_wins() {
        let mut np = NodePool::default();
        np.spec.disruption.budgets = vec![
            budget("10%", None, None, None),
            budget(
                "0",
                Some("0 9 * * mon-fri"),
                Some(8 * 3600),
                Some(vec![DisruptionReason::Underutilized]),
            ),
            budget("3", None, None, Some(vec![DisruptionReason::Drifted])),
        ];
        assert_eq!(
            allowed_disruptions(&np, 50, DisruptionReason::Underutilized, monday(10, 0)),
            0
        );
        assert_eq!(
            allowed_disruptions(&np, 50, DisruptionReason::Underutilized, monday(20, 0)),
            5
        );
        assert_eq!(
            allowed_disruptions(&np, 50, DisruptionReason::Empty, monday(10, 0)),
            5
        );
        assert_eq!(
            allowed_disruptions(&np, 50, DisruptionReason::Drifted, monday(10, 0)),
            3
        );
        np.spec.disruption.budgets.clear();
        assert_eq!(
            allowed_disruptions(&np, 50, DisruptionReason::Empty, 0),
            usize::MAX
        );
    }
}
