//! Disruption budgets: how many of a NodePool's nodes may be disrupted at once, now, for a
//! reason.

use k8s_openapi::jiff::Timestamp;
use karpenter_api::cron::Schedule;
use karpenter_api::{Budget, DisruptionReason, NodePool};

/// How many nodes `budget` allows out of `nodes`, or `None` when it is not active now.
/// An invalid budget allows nothing (fail closed), as upstream.
pub fn budget_allows(budget: &Budget, nodes: usize, now: Timestamp) -> Option<usize> {
    let now = now.as_second();
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
    now: Timestamp,
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
    fn monday(hour: i64, minute: i64) -> Timestamp {
        Timestamp::from_second(1_717_372_800 + hour * 3600 + minute * 60).unwrap()
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
                budget_allows(
                    &budget(nodes, None, None, None),
                    count,
                    Timestamp::UNIX_EPOCH
                ),
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
            allowed_disruptions(&np, 50, DisruptionReason::Empty, Timestamp::UNIX_EPOCH),
            usize::MAX
        );
    }

    /// Upstream's budget suite: six budgets, the clock at 2000-06-15 12:30:30 UTC.
    const JUNE_15_2000: i64 = 961_072_230;

    fn upstream_budgets() -> Vec<Budget> {
        use DisruptionReason::{Drifted, Empty, Underutilized};
        let every_minute =
            |nodes: &str, reasons| budget(nodes, Some("* * * * *"), Some(3600), reasons);
        vec![
            every_minute("10", None),
            every_minute("100", None),
            every_minute("100%", None),
            every_minute("15", Some(vec![Drifted, Underutilized])),
            every_minute("5", Some(vec![Drifted])),
            budget(
                "0",
                Some("@weekly"),
                Some(3600),
                Some(vec![Underutilized, Drifted, Empty]),
            ),
        ]
    }

    fn pool_with(budgets: Vec<Budget>) -> NodePool {
        let mut np = NodePool::default();
        np.spec.disruption.budgets = budgets;
        np
    }

    #[test]
    fn upstream_allowed_disruptions_by_reason() {
        use DisruptionReason::{Drifted, Empty, Underutilized};
        let all = [Empty, Underutilized, Drifted];
        type Edit = fn(&mut Vec<Budget>);
        // (case, edit of the six budgets, allowed for Empty, Underutilized, Drifted)
        let cases: [(&str, Edit, [usize; 3]); 5] = [
            (
                "a budget for all reasons active blocks all",
                |b| b[5].schedule = Some("* * * * *".into()),
                [0, 0, 0],
            ),
            (
                "no active budget: unbounded",
                |b| {
                    b.iter_mut()
                        .for_each(|b| b.schedule = Some("@yearly".into()))
                },
                [usize::MAX; 3],
            ),
            (
                "inactive reason budgets are ignored",
                |b| {
                    b[3].schedule = Some("@yearly".into());
                    b[4].schedule = Some("@yearly".into());
                },
                [10, 10, 10],
            ),
            (
                "one budget without reasons covers every reason",
                |b| b.truncate(1),
                [10, 10, 10],
            ),
            (
                "the smallest budget per reason",
                |b| {
                    b.push(budget(
                        "4",
                        Some("* * * * *"),
                        Some(3600),
                        Some(vec![Empty]),
                    ))
                },
                [4, 10, 5],
            ),
        ];
        for (case, edit, want) in cases {
            let mut budgets = upstream_budgets();
            edit(&mut budgets);
            let np = pool_with(budgets);
            for (reason, want) in all.iter().zip(want) {
                assert_eq!(
                    allowed_disruptions(
                        &np,
                        100,
                        *reason,
                        Timestamp::from_second(JUNE_15_2000).unwrap()
                    ),
                    want,
                    "{case}: {reason:?}"
                );
            }
        }
    }

    #[test]
    fn upstream_budget_allowances_and_activity() {
        let b = upstream_budgets();
        let with = |i: usize, edit: fn(&mut Budget)| {
            let mut b = b[i].clone();
            edit(&mut b);
            b
        };
        // (case, budget, now, allowed of 100 nodes; None when inactive)
        let cases: Vec<(&str, Budget, i64, Option<usize>)> = vec![
            (
                "invalid schedule allows none",
                with(0, |b| b.schedule = Some("@wrongly".into())),
                JUNE_15_2000,
                Some(0),
            ),
            (
                "invalid nodes allows none",
                with(0, |b| b.nodes = "1000a%".into()),
                JUNE_15_2000,
                Some(0),
            ),
            (
                "inactive",
                with(0, |b| b.schedule = Some("@yearly".into())),
                JUNE_15_2000,
                None,
            ),
            ("active count", b[0].clone(), JUNE_15_2000, Some(10)),
            ("active percentage", b[2].clone(), JUNE_15_2000, Some(100)),
            // 2000-05-31 00:00 at UTC+1 is 05-30 23:00 UTC: @daily fired 23 h ago.
            (
                "schedules are UTC",
                with(0, |b| {
                    b.schedule = Some("@daily".into());
                    b.duration = Some(Duration::from_secs(1800));
                }),
                959_727_600,
                None,
            ),
            (
                "no schedule is always active",
                with(0, |b| {
                    b.schedule = None;
                    b.duration = None;
                }),
                JUNE_15_2000,
                Some(10),
            ),
            (
                "hit in the middle of the duration",
                with(0, |b| {
                    b.schedule = Some("@yearly".into());
                    b.duration = Some(Duration::from_secs(24 * 3600));
                }),
                -30_610_180_800, // year 1000, January 1st, noon
                Some(10),
            ),
            (
                "duration longer than the recurrence",
                with(0, |b| {
                    b.schedule = Some("@daily".into());
                    b.duration = Some(Duration::from_secs(48 * 3600));
                }),
                1_704_585_600, // 2024-01-07 00:00, a Sunday
                Some(10),
            ),
            (
                "hit after the duration",
                with(0, |b| {
                    b.schedule = Some("30 6 * * SUN".into());
                    b.duration = Some(Duration::from_secs(6 * 3600));
                }),
                1_704_585_600,
                None,
            ),
            (
                "backwards day range fails closed",
                with(0, |b| {
                    b.schedule = Some("0 0 * * tue-mon".into());
                    b.duration = Some(Duration::from_secs(6 * 3600));
                }),
                1_704_585_600,
                Some(0),
            ),
        ];
        for (case, budget, now, want) in cases {
            let now = Timestamp::from_second(now).unwrap();
            assert_eq!(budget_allows(&budget, 100, now), want, "{case}");
        }
        let err = Schedule::parse("0 0 * * tue-mon").unwrap_err().to_string();
        assert!(err.contains("beyond"), "{err}");
    }
}
