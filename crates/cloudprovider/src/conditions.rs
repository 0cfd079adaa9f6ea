//! A NodeClass's status conditions as upstream's operatorpkg condition set keeps them: each
//! part (`SubnetsReady`, `ImagesReady`, …) stamped with the generation it was decided for, its
//! transition time kept while its status stays, and `Ready` over the parts. Pure, so a
//! provider's status function stays testable without a client.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

/// The condition summarising the others.
pub const CONDITION_READY: &str = "Ready";
/// A condition no pass has decided yet.
pub const REASON_AWAITING_RECONCILIATION: &str = "AwaitingReconciliation";
/// Its message.
pub const MESSAGE_AWAITING_RECONCILIATION: &str = "object is awaiting reconciliation";
/// `Ready`'s reason when a part is `False` for the current generation.
pub const REASON_UNHEALTHY_DEPENDENTS: &str = "UnhealthyDependents";
/// `Ready`'s reason when no part is `False` but some are not yet decided for this generation.
pub const REASON_RECONCILING_DEPENDENTS: &str = "ReconcilingDependents";

/// The conditions of one status being computed.
pub struct ConditionSet<'a> {
    list: &'a mut Vec<Condition>,
    dependents: &'a [&'a str],
    generation: Option<i64>,
    created: Timestamp,
    now: Timestamp,
    touched: bool,
}

impl<'a> ConditionSet<'a> {
    /// The set over `list` whose `Ready` summarises `dependents`, for an object of this
    /// `generation` created at `created`, at `now`. Every part (and `Ready`) not yet there
    /// starts `Unknown`.
    pub fn new(
        list: &'a mut Vec<Condition>,
        dependents: &'a [&'a str],
        generation: Option<i64>,
        created: Timestamp,
        now: Timestamp,
    ) -> Self {
        let mut set = Self {
            list,
            dependents,
            generation,
            created,
            now,
            touched: false,
        };
        for type_ in std::iter::once(CONDITION_READY).chain(dependents.iter().copied()) {
            if !set.list.iter().any(|c| c.type_ == type_) {
                set.set(
                    type_,
                    "Unknown",
                    REASON_AWAITING_RECONCILIATION,
                    MESSAGE_AWAITING_RECONCILIATION,
                );
            }
        }
        set.touched = false;
        set
    }

    /// Sets a condition for the current generation.
    pub fn set(&mut self, type_: &str, status: &str, reason: &str, message: &str) {
        self.touched = true;
        let mut next = Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
            last_transition_time: Time(self.now),
            observed_generation: self.generation,
        };
        match self.list.iter_mut().find(|c| c.type_ == type_) {
            Some(current) => {
                if current.status == status {
                    next.last_transition_time = current.last_transition_time.clone();
                }
                *current = next;
            }
            None => {
                // A part's first condition dates from the object's creation, as upstream's.
                next.last_transition_time = Time(self.created);
                self.list.push(next);
            }
        }
    }

    /// Sets a condition `True`, its reason its type.
    pub fn set_true(&mut self, type_: &str) {
        self.set(type_, "True", type_, "");
    }

    /// Recomputes `Ready` and orders the list, when a part was set in this pass (upstream
    /// leaves the conditions as they were after a pass that decided nothing).
    ///
    /// `Ready` is `True` when all parts are `True` for this generation; else `False` when one
    /// is `False` for this generation, `Unknown` otherwise, naming the parts that are not
    /// ready, most recently changed first. The list ends oldest transition first and `Ready`
    /// last, as `kubectl` shows upstream's.
    pub fn finish(mut self) {
        if !self.touched {
            return;
        }
        let mut unhealthy: Vec<&Condition> = self
            .dependents
            .iter()
            .filter_map(|t| self.list.iter().find(|c| c.type_ == *t))
            .filter(|c| c.status != "True" || c.observed_generation != self.generation)
            .collect();
        if unhealthy.is_empty() {
            self.set_true(CONDITION_READY);
        } else {
            unhealthy.sort_by_key(|c| std::cmp::Reverse(c.last_transition_time.0));
            let failed = unhealthy
                .iter()
                .any(|c| c.status == "False" && c.observed_generation == self.generation);
            let message = unhealthy
                .iter()
                .map(|c| format!("{}={}", c.type_, c.status))
                .collect::<Vec<_>>()
                .join(", ");
            let (status, reason) = if failed {
                ("False", REASON_UNHEALTHY_DEPENDENTS)
            } else {
                ("Unknown", REASON_RECONCILING_DEPENDENTS)
            };
            self.set(CONDITION_READY, status, reason, &message);
        }
        self.list.sort_by(|a, b| {
            let key = |c: &Condition| (c.type_ == CONDITION_READY, c.last_transition_time.0);
            key(a).cmp(&key(b))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + second).unwrap()
    }

    fn ready(list: &[Condition]) -> (&str, &str, &str) {
        let c = list.iter().find(|c| c.type_ == CONDITION_READY).unwrap();
        (c.status.as_str(), c.reason.as_str(), c.message.as_str())
    }

    #[test]
    fn ready_summarises_the_parts_of_this_generation() {
        let parts = ["AReady", "BReady"];
        let mut list = Vec::new();
        let mut set = ConditionSet::new(&mut list, &parts, Some(1), at(0), at(10));
        set.set_true("AReady");
        set.finish();
        assert_eq!(
            ready(&list),
            ("Unknown", REASON_RECONCILING_DEPENDENTS, "BReady=Unknown")
        );
        assert_eq!(
            list.last().unwrap().type_,
            CONDITION_READY,
            "Ready sorts last"
        );

        let mut set = ConditionSet::new(&mut list, &parts, Some(1), at(0), at(20));
        set.set("BReady", "False", "BNotFound", "no B");
        set.finish();
        assert_eq!(
            ready(&list),
            ("False", REASON_UNHEALTHY_DEPENDENTS, "BReady=False")
        );

        let mut set = ConditionSet::new(&mut list, &parts, Some(1), at(0), at(30));
        set.set_true("BReady");
        set.finish();
        assert_eq!(ready(&list), ("True", CONDITION_READY, ""));
        let a = list.iter().find(|c| c.type_ == "AReady").unwrap();
        assert_eq!(
            a.last_transition_time.0,
            at(10),
            "it moved when AReady became True, and stayed"
        );

        // A new generation: parts decided for the old one no longer count.
        let mut set = ConditionSet::new(&mut list, &parts, Some(2), at(0), at(40));
        set.set_true("AReady");
        set.finish();
        assert_eq!(
            ready(&list),
            ("Unknown", REASON_RECONCILING_DEPENDENTS, "BReady=True")
        );
    }

    #[test]
    fn a_pass_that_decides_nothing_changes_nothing() {
        let parts = ["AReady"];
        let mut list = Vec::new();
        ConditionSet::new(&mut list, &parts, Some(1), at(0), at(10)).finish();
        assert_eq!(list.len(), 2, "the parts start Unknown");
        assert!(
            list.iter().all(|c| c.last_transition_time.0 == at(0)),
            "dated from the object's creation"
        );
        assert_eq!(
            ready(&list),
            (
                "Unknown",
                REASON_AWAITING_RECONCILIATION,
                MESSAGE_AWAITING_RECONCILIATION
            )
        );
    }
}
