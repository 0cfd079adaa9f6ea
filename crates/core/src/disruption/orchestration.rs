//! Upstream's orchestration of a disruption command, as a state machine the caller drives with
//! its own clock: a consolidation is held for [`VALIDATION_DELAY`] — no fresh decision is made
//! meanwhile, as upstream's disruption loop waits — and acted on only if it is still valid
//! then ([`super::validate`]); acting taints the candidates, launches the replacements, and
//! deletes the candidates only once every replacement has initialized; a replacement that
//! fails or does not initialize within [`REPLACEMENT_TIMEOUT`] rolls the taint back. The
//! controller carries the [`Effect`]s out through the API server, the simulator on its model.

use std::collections::BTreeSet;
use std::time::Duration;

use karpenter_api::DisruptionReason;

use super::{Command, Invalid};

/// Upstream's wait before a consolidation decision is acted on.
pub const VALIDATION_DELAY: Duration = Duration::from_secs(15);
/// How long replacements may take to initialize before the command is rolled back, at least:
/// with many nodes in flight the wait grows by [`RETRY_SCALE`] per node, up to
/// [`MAX_REPLACEMENT_TIMEOUT`] (upstream's `GetMaxRetryDuration`).
pub const REPLACEMENT_TIMEOUT: Duration = Duration::from_secs(10 * 60);
/// The longest replacements may take, however many nodes are in flight.
pub const MAX_REPLACEMENT_TIMEOUT: Duration = Duration::from_secs(60 * 60);
/// How much longer replacements may take per node in flight.
pub const RETRY_SCALE: Duration = Duration::from_millis(80);
/// Upstream's polling period: how often a fresh decision is made.
pub const DECISION_EVERY: Duration = Duration::from_secs(10);

/// How a replacement NodeClaim is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replacement {
    /// Launching or registering.
    Launching,
    /// Initialized: its node takes pods.
    Initialized,
    /// Gone or being deleted.
    Failed,
}

/// What the caller must do, in order.
#[derive(Clone, Debug)]
pub enum Effect {
    /// A consolidation is held until it is re-validated.
    Validating(Command),
    /// A held consolidation failed validation: nothing is done.
    Abandoned {
        /// The command held.
        command: Command,
        /// Why it is no longer valid.
        why: Invalid,
    },
    /// Taint the candidates `karpenter.sh/disrupted:NoSchedule`: the command starts.
    Taint(Command),
    /// Create the replacement NodeClaims, then report their names with
    /// [`Orchestrator::launched`] (or [`Orchestrator::launch_failed`]).
    Launch(Command),
    /// The replacements are not initialized yet.
    Waiting(Command),
    /// Delete the candidates' NodeClaims; termination drains and removes them.
    Delete(Command),
    /// Remove the taint again: the command is given up.
    RollBack {
        /// The command given up.
        command: Command,
        /// Why.
        why: String,
    },
}

#[derive(Clone, Debug)]
struct InFlight {
    command: Command,
    replacements: Vec<String>,
    started: Duration,
}

/// The orchestration queue: at most one consolidation held for validation (upstream validates
/// one decision at a time), and any number of commands in flight, each waiting on its own
/// replacements — a slow replacement does not hold the rest of the cluster's disruption up.
#[derive(Clone, Debug)]
pub struct Orchestrator {
    validation_delay: Duration,
    replacement_timeout: Duration,
    decision_every: Duration,
    next_decision: Duration,
    held: Option<(Duration, Command)>,
    in_flight: Vec<InFlight>,
}

impl Default for Orchestrator {
    fn default() -> Self {
        Self::new(VALIDATION_DELAY, REPLACEMENT_TIMEOUT, DECISION_EVERY)
    }
}

/// What a pass must do after moving the commands in flight along.
#[derive(Clone, Debug)]
pub enum Due {
    /// Nothing yet.
    Nothing,
    /// Decide afresh and hand the decision to [`Orchestrator::decided`].
    Decision,
    /// Validate the held command against the cluster now ([`super::validate`]) and hand the
    /// outcome to [`Orchestrator::validated`].
    Validation(Command),
}

fn candidate_set(c: &Command) -> BTreeSet<&str> {
    c.candidates.iter().map(String::as_str).collect()
}

impl Orchestrator {
    /// An orchestrator with the given validation delay, replacement timeout, and time between
    /// fresh decisions.
    pub fn new(
        validation_delay: Duration,
        replacement_timeout: Duration,
        decision_every: Duration,
    ) -> Self {
        Self {
            validation_delay,
            replacement_timeout,
            decision_every,
            next_decision: Duration::ZERO,
            held: None,
            in_flight: Vec::new(),
        }
    }

    /// When the next decision or validation is due: a held consolidation's validation, else
    /// the next poll. Commands in flight are advanced more often.
    pub fn next_decision(&self) -> Duration {
        self.validation_due().unwrap_or(self.next_decision)
    }

    /// What is due at `now`: the held command's validation once its delay has passed, else a
    /// fresh decision every `decision_every` — none while a command is held.
    pub fn due(&self, now: Duration) -> Due {
        match (&self.held, self.validation_due()) {
            (Some((_, held)), Some(at)) if now >= at => Due::Validation(held.clone()),
            (Some(_), _) => Due::Nothing,
            (None, _) if now >= self.next_decision => Due::Decision,
            (None, _) => Due::Nothing,
        }
    }

    /// A command is held or in flight: step again soon.
    pub fn busy(&self) -> bool {
        self.held.is_some() || !self.in_flight.is_empty()
    }

    /// How many commands are in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// When the held consolidation may be acted on, if one is held.
    fn validation_due(&self) -> Option<Duration> {
        self.held
            .as_ref()
            .map(|(at, _)| at.saturating_add(self.validation_delay))
    }

    /// How long the commands in flight may wait for their replacements: longer with more
    /// nodes in flight (launching thousands of replacements takes a while), within bounds.
    pub fn retry_duration(&self) -> Duration {
        let nodes: usize = self
            .in_flight
            .iter()
            .map(|f| f.command.candidates.len())
            .sum();
        RETRY_SCALE
            .saturating_mul(u32::try_from(nodes).unwrap_or(u32::MAX))
            .clamp(
                self.replacement_timeout,
                MAX_REPLACEMENT_TIMEOUT.max(self.replacement_timeout),
            )
    }

    /// The nodes the commands in flight have taken (upstream's `MarkedForDeletion`): a fresh
    /// decision must leave them out.
    pub fn marked_for_deletion(&self) -> BTreeSet<String> {
        self.in_flight
            .iter()
            .flat_map(|f| f.command.candidates.iter().cloned())
            .collect()
    }

    /// Forgets everything (leadership lost).
    pub fn reset(&mut self) {
        self.held = None;
        self.in_flight.clear();
        self.next_decision = Duration::ZERO;
    }

    /// Moves every command in flight along by how its replacements are doing. The caller
    /// carries the effects out, then does what [`Orchestrator::due`] says.
    pub fn advance(
        &mut self,
        now: Duration,
        replacement: impl Fn(&str) -> Replacement,
    ) -> Vec<Effect> {
        let mut effects = Vec::new();
        for flight in std::mem::take(&mut self.in_flight) {
            effects.extend(self.advance_one(now, flight, &replacement));
        }
        effects
    }

    /// Acts on a fresh decision's first command (`None`: nothing to do): drift starts at
    /// once; emptiness and consolidation are held for validation.
    pub fn decided(&mut self, now: Duration, command: Option<Command>) -> Vec<Effect> {
        self.next_decision = now + self.decision_every;
        let Some(command) = command else {
            return Vec::new();
        };
        if self.takes_a_marked_node(&command) {
            // A decision over state that has not caught up with a command in flight.
            return Vec::new();
        }
        if command.reason == DisruptionReason::Drifted {
            return self.start(now, command);
        }
        if self.held.is_some() {
            // Callers decide only when nothing is held; a held command is not dropped unseen.
            return Vec::new();
        }
        self.held = Some((now, command.clone()));
        vec![Effect::Validating(command)]
    }

    /// Acts on every command of a fresh decision: the first as [`Orchestrator::decided`] does,
    /// and every further drift command at once too (static drift replaces every node its
    /// budget and limit allow in one pass, one command each, as upstream). A decision holds
    /// at most one consolidation, so nothing else follows the first.
    pub fn decided_all(&mut self, now: Duration, commands: Vec<Command>) -> Vec<Effect> {
        let mut commands = commands.into_iter();
        let mut effects = self.decided(now, commands.next());
        for command in commands {
            if command.reason == DisruptionReason::Drifted && !self.takes_a_marked_node(&command) {
                effects.extend(self.start(now, command));
            }
        }
        effects
    }

    /// Acts on the held command's validation: the command to carry out, or why it is no longer
    /// valid (the next pass decides afresh).
    pub fn validated(&mut self, now: Duration, outcome: Result<Command, Invalid>) -> Vec<Effect> {
        let Some((_, held)) = self.held.take() else {
            return Vec::new();
        };
        match outcome {
            Ok(command) if !self.takes_a_marked_node(&command) => self.start(now, command),
            Ok(command) => {
                self.next_decision = now;
                vec![Effect::Abandoned {
                    command,
                    why: Invalid {
                        kind: super::InvalidKind::Churn,
                        why: "a candidate was taken by another command".into(),
                    },
                }]
            }
            Err(why) => {
                self.next_decision = now;
                vec![Effect::Abandoned { command: held, why }]
            }
        }
    }

    fn takes_a_marked_node(&self, command: &Command) -> bool {
        let taken = self.marked_for_deletion();
        command.candidates.iter().any(|c| taken.contains(c))
    }

    fn start(&mut self, now: Duration, command: Command) -> Vec<Effect> {
        if command.replacements.is_empty() {
            return vec![Effect::Taint(command.clone()), Effect::Delete(command)];
        }
        self.in_flight.push(InFlight {
            command: command.clone(),
            replacements: Vec::new(),
            started: now,
        });
        vec![Effect::Taint(command.clone()), Effect::Launch(command)]
    }

    fn position(&self, command: &Command) -> Option<usize> {
        let candidates = candidate_set(command);
        self.in_flight
            .iter()
            .position(|f| candidate_set(&f.command) == candidates)
    }

    /// The replacements of `command` (in flight) were created with these names.
    pub fn launched(&mut self, command: &Command, names: Vec<String>) {
        if let Some(i) = self.position(command) {
            self.in_flight[i].replacements = names;
        }
    }

    /// The replacements of `command` could not all be created: it is given up.
    pub fn launch_failed(&mut self, command: &Command, why: impl Into<String>) -> Vec<Effect> {
        self.position(command)
            .map(|i| {
                let f = self.in_flight.remove(i);
                vec![Effect::RollBack {
                    command: f.command,
                    why: why.into(),
                }]
            })
            .unwrap_or_default()
    }

    fn advance_one(
        &mut self,
        now: Duration,
        flight: InFlight,
        replacement: impl Fn(&str) -> Replacement,
    ) -> Vec<Effect> {
        let states: Vec<Replacement> = flight.replacements.iter().map(|r| replacement(r)).collect();
        let roll_back = |why: String| {
            vec![Effect::RollBack {
                command: flight.command.clone(),
                why,
            }]
        };
        if flight.replacements.len() != flight.command.replacements.len() {
            return roll_back("its replacements were not all launched".into());
        }
        if let Some(i) = states.iter().position(|s| *s == Replacement::Failed) {
            return roll_back(format!("replacement {} failed", flight.replacements[i]));
        }
        let timeout = self.retry_duration();
        if now.saturating_sub(flight.started) > timeout {
            return roll_back(format!(
                "replacements did not initialize within {}s",
                timeout.as_secs()
            ));
        }
        if states.iter().all(|s| *s == Replacement::Initialized) {
            return vec![Effect::Delete(flight.command)];
        }
        let waiting = Effect::Waiting(flight.command.clone());
        self.in_flight.push(flight);
        vec![waiting]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disruption::Method;
    use crate::provisioning::scheduling::NewNodeClaim;

    fn command(reason: DisruptionReason, candidates: &[&str], replacements: usize) -> Command {
        Command {
            reason,
            method: Method::SingleNodeConsolidation,
            candidates: candidates.iter().map(|c| c.to_string()).collect(),
            replacements: (0..replacements)
                .map(|_| NewNodeClaim {
                    node_pool: "default".into(),
                    requirements: Default::default(),
                    instance_types: Vec::new(),
                    pods: Vec::new(),
                    requests: Default::default(),
                    labels: Default::default(),
                    taints: Vec::new(),
                    startup_taints: Vec::new(),
                    min_values_relaxed: false,
                    dra_drivers: Vec::new(),
                })
                .collect(),
            savings_per_hour: 1.0,
        }
    }

    fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    /// One pass as the controller and the simulator make it: advance, then decide or validate
    /// if due. `decide` stands for the cluster's decision now; the held command is validated
    /// by `still` (whether the cluster still allows it).
    trait Step {
        fn step(
            &mut self,
            now: Duration,
            replacement: impl Fn(&str) -> Replacement,
            decide: impl FnOnce() -> Option<Command>,
        ) -> Vec<Effect> {
            self.step_validating(now, replacement, decide, true)
        }

        fn step_validating(
            &mut self,
            now: Duration,
            replacement: impl Fn(&str) -> Replacement,
            decide: impl FnOnce() -> Option<Command>,
            still: bool,
        ) -> Vec<Effect>;
    }

    impl Step for Orchestrator {
        fn step_validating(
            &mut self,
            now: Duration,
            replacement: impl Fn(&str) -> Replacement,
            decide: impl FnOnce() -> Option<Command>,
            still: bool,
        ) -> Vec<Effect> {
            let mut effects = self.advance(now, replacement);
            match self.due(now) {
                Due::Nothing => {}
                Due::Decision => effects.extend(self.decided(now, decide())),
                Due::Validation(held) => {
                    let outcome = if still {
                        Ok(held)
                    } else {
                        Err(Invalid {
                            kind: crate::disruption::InvalidKind::Churn,
                            why: "1 candidates are no longer valid".into(),
                        })
                    };
                    effects.extend(self.validated(now, outcome));
                }
            }
            effects
        }
    }

    fn kinds(effects: &[Effect]) -> Vec<&'static str> {
        effects
            .iter()
            .map(|e| match e {
                Effect::Validating(_) => "validating",
                Effect::Abandoned { .. } => "abandoned",
                Effect::Taint(_) => "taint",
                Effect::Launch(_) => "launch",
                Effect::Waiting(_) => "waiting",
                Effect::Delete(_) => "delete",
                Effect::RollBack { .. } => "roll back",
            })
            .collect()
    }

    const UNDERUTILIZED: DisruptionReason = DisruptionReason::Underutilized;

    #[test]
    fn a_consolidation_is_held_and_acts_once_validated_after_the_delay() {
        let mut o = Orchestrator::default();
        let delete = || Some(command(UNDERUTILIZED, &["a"], 0));
        let never = |_: &str| Replacement::Launching;
        let other = || panic!("no fresh decision while a command is held");
        assert_eq!(kinds(&o.step(s(0), never, delete)), ["validating"]);
        assert_eq!(kinds(&o.step(s(10), never, other)), [] as [&str; 0]);
        assert_eq!(kinds(&o.step(s(14), never, other)), [] as [&str; 0]);
        assert_eq!(kinds(&o.step(s(15), never, other)), ["taint", "delete"]);
        assert!(!o.busy());
    }

    #[test]
    fn a_held_command_that_fails_validation_is_abandoned_and_the_next_pass_decides() {
        let mut o = Orchestrator::default();
        let never = |_: &str| Replacement::Launching;
        o.step(s(0), never, || Some(command(UNDERUTILIZED, &["a"], 0)));
        let effects = o.step_validating(s(15), never, || None, false);
        assert_eq!(kinds(&effects), ["abandoned"]);
        assert!(!o.busy());
        assert!(
            matches!(o.due(s(15)), Due::Decision),
            "a failed validation is followed by a fresh decision at once"
        );
        assert_eq!(
            kinds(&o.step(s(16), never, || Some(command(UNDERUTILIZED, &["b"], 0)))),
            ["validating"]
        );
    }

    /// A fresh decision every 10 s when nothing is held; a held consolidation is validated at
    /// the end of its delay instead.
    #[test]
    fn decisions_come_every_poll_and_validation_when_due() {
        let mut o = Orchestrator::default();
        assert!(
            matches!(o.due(s(0)), Due::Decision),
            "the first pass decides"
        );
        o.decided(s(0), None);
        assert_eq!(o.next_decision(), s(10));
        assert!(matches!(o.due(s(9)), Due::Nothing));
        o.decided(s(10), Some(command(UNDERUTILIZED, &["a"], 0)));
        assert_eq!(o.next_decision(), s(25), "the validation, not the poll");
        assert!(matches!(o.due(s(20)), Due::Nothing), "no poll while held");
        assert_eq!(o.next_decision(), s(25));
        assert!(matches!(o.due(s(25)), Due::Validation(_)));
        o.validated(s(25), Ok(command(UNDERUTILIZED, &["a"], 0)));
        assert!(
            matches!(o.due(s(25)), Due::Decision),
            "the poll that came due meanwhile"
        );
    }

    #[test]
    fn drift_starts_at_once_and_candidates_go_when_replacements_initialize() {
        let mut o = Orchestrator::default();
        let effects = o.step(
            s(0),
            |_| Replacement::Launching,
            || Some(command(DisruptionReason::Drifted, &["a"], 1)),
        );
        assert_eq!(kinds(&effects), ["taint", "launch"]);
        o.launched(
            &command(DisruptionReason::Drifted, &["a"], 1),
            vec!["r1".into()],
        );
        assert_eq!(o.marked_for_deletion(), BTreeSet::from(["a".to_string()]));
        assert_eq!(
            kinds(&o.step(s(30), |_| Replacement::Launching, || None)),
            ["waiting"]
        );
        assert_eq!(
            kinds(&o.step(s(60), |_| Replacement::Initialized, || None)),
            ["delete"]
        );
        assert!(!o.busy() && o.marked_for_deletion().is_empty());
    }

    /// Upstream's orchestration queue: a command waiting on its replacements does not stop the
    /// next decision; each command finishes (or rolls back) on its own replacements.
    #[test]
    fn several_commands_are_in_flight_at_once_and_finish_on_their_own() {
        let mut o = Orchestrator::default();
        let drift_a = command(DisruptionReason::Drifted, &["a"], 1);
        let drift_b = command(DisruptionReason::Drifted, &["b"], 1);
        o.step(s(0), |_| Replacement::Launching, || Some(drift_a.clone()));
        o.launched(&drift_a, vec!["ra".into()]);
        let effects = o.step(s(10), |_| Replacement::Launching, || Some(drift_b.clone()));
        assert_eq!(kinds(&effects), ["waiting", "taint", "launch"]);
        o.launched(&drift_b, vec!["rb".into()]);
        assert_eq!(o.in_flight(), 2);
        assert_eq!(
            o.marked_for_deletion(),
            BTreeSet::from(["a".to_string(), "b".to_string()])
        );
        assert!(
            o.step(
                s(20),
                |_| Replacement::Launching,
                || Some(command(UNDERUTILIZED, &["b"], 0))
            )
            .iter()
            .all(|e| matches!(e, Effect::Waiting(_))),
            "a decision over a node in flight is ignored"
        );
        // b's replacement is ready first; a's fails.
        let state = |name: &str| match name {
            "rb" => Replacement::Initialized,
            _ => Replacement::Failed,
        };
        let effects = o.step(s(21), state, || None);
        let mut done: Vec<(&str, &str)> = effects
            .iter()
            .map(|e| match e {
                Effect::Delete(c) => ("delete", c.candidates[0].as_str()),
                Effect::RollBack { command, .. } => ("roll back", command.candidates[0].as_str()),
                _ => ("other", ""),
            })
            .collect();
        done.sort();
        assert_eq!(done, [("delete", "b"), ("roll back", "a")]);
        assert!(!o.busy());
    }

    /// Upstream's queue: a command with several replacements finishes only when every one has
    /// initialized.
    #[test]
    fn candidates_go_only_once_every_replacement_initialized() {
        let drift = command(DisruptionReason::Drifted, &["a"], 2);
        let mut o = Orchestrator::default();
        o.step(s(0), |_| Replacement::Launching, || Some(drift.clone()));
        o.launched(&drift, vec!["r1".into(), "r2".into()]);
        let one_ready = |name: &str| match name {
            "r1" => Replacement::Initialized,
            _ => Replacement::Launching,
        };
        assert_eq!(kinds(&o.step(s(30), one_ready, || None)), ["waiting"]);
        assert_eq!(
            kinds(&o.step(s(60), |_| Replacement::Initialized, || None)),
            ["delete"]
        );
    }

    /// Upstream's `CalculateRetryDuration` table: 80 ms per node in flight, within 10 minutes
    /// and an hour.
    #[test]
    fn the_replacement_timeout_grows_with_the_nodes_in_flight() {
        let cases = [
            (100, s(600)),
            (4_000, s(600)),
            (10_000, s(800)),
            (40_000, s(3200)),
            (80_000, s(3600)),
            (100_000, s(3600)),
        ];
        for (nodes, expected) in cases {
            let mut o = Orchestrator::default();
            let names: Vec<String> = (0..nodes).map(|i| format!("n{i}")).collect();
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            o.decided(s(0), Some(command(DisruptionReason::Drifted, &refs, 1)));
            assert_eq!(o.retry_duration(), expected, "{nodes} nodes");
        }
    }

    /// Upstream's static drift starts every replacement of a pass at once: each command is in
    /// flight on its own.
    #[test]
    fn every_drift_command_of_a_decision_starts_at_once() {
        let mut o = Orchestrator::default();
        let (a, b) = (
            command(DisruptionReason::Drifted, &["a"], 1),
            command(DisruptionReason::Drifted, &["b"], 1),
        );
        let effects = o.decided_all(s(0), vec![a.clone(), b.clone(), a.clone()]);
        assert_eq!(kinds(&effects), ["taint", "launch", "taint", "launch"]);
        assert_eq!(o.in_flight(), 2);
        o.launched(&a, vec!["ra".into()]);
        o.launched(&b, vec!["rb".into()]);
        assert_eq!(
            kinds(&o.advance(s(10), |_| Replacement::Initialized)),
            ["delete", "delete"]
        );
        // A consolidation is held alone, as by `decided`.
        let mut o = Orchestrator::default();
        let effects = o.decided_all(
            s(0),
            vec![
                command(UNDERUTILIZED, &["c"], 0),
                command(UNDERUTILIZED, &["d"], 0),
            ],
        );
        assert_eq!(kinds(&effects), ["validating"]);
        assert_eq!(kinds(&o.decided_all(s(20), Vec::new())), [] as [&str; 0]);
    }

    /// Upstream's emptiness waits out the validation delay before anything is tainted or
    /// deleted ("should wait for the node TTL for empty nodes before consolidating").
    #[test]
    fn an_empty_node_goes_only_after_the_validation_delay() {
        let mut o = Orchestrator::default();
        let empty = || Some(command(DisruptionReason::Empty, &["a"], 0));
        let never = |_: &str| Replacement::Launching;
        assert_eq!(kinds(&o.step(s(0), never, empty)), ["validating"]);
        assert!(
            o.marked_for_deletion().is_empty(),
            "nothing taken while held"
        );
        assert!(kinds(&o.step(s(14), never, || None)).is_empty());
        assert_eq!(kinds(&o.step(s(15), never, || None)), ["taint", "delete"]);
    }

    /// Upstream's queue: a command with no replacements does not wait ("should not wait for
    /// replacements when none are needed").
    #[test]
    fn a_command_without_replacements_deletes_at_once() {
        let mut o = Orchestrator::default();
        let effects = o.step(
            s(0),
            |_| Replacement::Launching,
            || Some(command(DisruptionReason::Drifted, &["a"], 0)),
        );
        assert_eq!(kinds(&effects), ["taint", "delete"]);
        assert!(!o.busy());
    }

    /// Upstream's queue: two commands in flight finish as their own replacements initialize,
    /// the second first if its replacement is ready first ("should finish two commands in
    /// order as replacements are initialized").
    #[test]
    fn two_commands_finish_as_their_replacements_initialize() {
        let mut o = Orchestrator::default();
        let first = command(DisruptionReason::Drifted, &["a"], 1);
        let second = command(DisruptionReason::Drifted, &["b"], 1);
        o.step(s(0), |_| Replacement::Launching, || Some(first.clone()));
        o.launched(&first, vec!["ra".into()]);
        o.step(s(10), |_| Replacement::Launching, || Some(second.clone()));
        o.launched(&second, vec!["rb".into()]);
        let deleted = |effects: &[Effect]| -> Vec<String> {
            effects
                .iter()
                .filter_map(|e| match e {
                    Effect::Delete(c) => Some(c.candidates[0].clone()),
                    _ => None,
                })
                .collect()
        };
        let rb_ready = |name: &str| match name {
            "rb" => Replacement::Initialized,
            _ => Replacement::Launching,
        };
        let effects = o.step(s(20), rb_ready, || None);
        assert_eq!(deleted(&effects), ["b"]);
        assert_eq!(o.marked_for_deletion(), BTreeSet::from(["a".to_string()]));
        let effects = o.step(s(30), |_| Replacement::Initialized, || None);
        assert_eq!(deleted(&effects), ["a"]);
        assert!(!o.busy());
    }

    #[test]
    fn a_failed_or_late_replacement_rolls_the_command_back() {
        let drift = || Some(command(DisruptionReason::Drifted, &["a"], 1));
        let mut o = Orchestrator::default();
        o.step(s(0), |_| Replacement::Launching, drift);
        o.launched(
            &command(DisruptionReason::Drifted, &["a"], 1),
            vec!["r1".into()],
        );
        let effects = o.step(s(5), |_| Replacement::Failed, || None);
        assert_eq!(kinds(&effects), ["roll back"]);
        assert!(!o.busy());

        let mut o = Orchestrator::default();
        o.step(s(0), |_| Replacement::Launching, drift);
        o.launched(
            &command(DisruptionReason::Drifted, &["a"], 1),
            vec!["r1".into()],
        );
        assert_eq!(
            kinds(&o.step(s(600), |_| Replacement::Launching, || None)),
            ["waiting"]
        );
        assert_eq!(
            kinds(&o.step(s(601), |_| Replacement::Launching, || None)),
            ["roll back"],
            "ten minutes is the limit"
        );

        let mut o = Orchestrator::default();
        o.step(s(0), |_| Replacement::Launching, drift);
        assert_eq!(
            kinds(&o.launch_failed(&command(DisruptionReason::Drifted, &["a"], 1), "quota")),
            ["roll back"]
        );
        assert!(!o.busy());

        // A caller that never reported the launch gets the command back, not its candidates
        // deleted for want of replacements to wait on.
        let mut o = Orchestrator::default();
        o.step(s(0), |_| Replacement::Launching, drift);
        assert_eq!(
            kinds(&o.step(s(1), |_| Replacement::Initialized, || None)),
            ["roll back"]
        );
    }
}
