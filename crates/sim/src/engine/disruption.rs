//! The disruption controller's stand-in: every pass it builds the same snapshot the controller
//! would, asks the core's [`decide`] what to do, and lets the core's orchestrator carry the
//! answer through as the controller does — consolidation waits 15 s and is re-validated,
//! candidates are tainted, replacements launch, and only once they are Ready are the candidates
//! drained (evictions respect PodDisruptionBudgets) and terminated; a replacement that fails
//! or takes over 10 minutes rolls the command back. Expired nodes are drained without
//! replacement.

use k8s_openapi::api::core::v1::{Pod, Taint};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use karpenter_api::labels::DISRUPTED_TAINT_KEY;
use karpenter_core::disruption::Command;
use karpenter_core::disruption::orchestration::{
    Due, Effect, Orchestrator, Replacement, VALIDATION_DELAY,
};
use karpenter_core::disruption::pdb::{disruptions_allowed, selects};
use karpenter_core::round::{Disrupt, Disruption, Parts};
use karpenter_core::termination;

use super::{SimPod, Simulation};
use crate::report::Event;

/// Virtual time 0 is this Unix time (Monday 2024-06-03 00:00 UTC), so budget schedules read
/// naturally: `@daily` fires at t=0, `0 9 * * 1-5` nine hours in.
pub const EPOCH: i64 = 1_717_372_800;

/// Disruption bookkeeping between passes.
#[derive(Clone, Debug, Default)]
pub(super) struct State {
    /// The controller's orchestration: a consolidation held for re-validation, and the
    /// commands whose replacements are launching.
    orchestrator: Orchestrator,
}

impl Simulation {
    /// Runs every second, as the controller's loop: drains, moves the commands in flight
    /// along, and when the orchestrator says a decision is due (every 10 s, or when a held
    /// consolidation may be validated) decides anew over the nodes they have not taken.
    pub(super) fn disrupt(&mut self) {
        self.expire();
        let now = std::time::Duration::from_secs(self.now);
        let mut orchestrator = std::mem::take(&mut self.disruption.orchestrator);
        let effects = orchestrator.advance(now, |name| self.replacement(name));
        self.carry_out(&mut orchestrator, effects);
        let effects = match orchestrator.due(now) {
            Due::Nothing => Vec::new(),
            Due::Decision => {
                let commands = match self.disruption_round(Disrupt::Decide) {
                    Some(Disruption::Decided { decision, .. }) => decision.commands,
                    _ => Vec::new(),
                };
                orchestrator.decided_all(now, commands)
            }
            Due::Validation(held) => match self.disruption_round(Disrupt::Validate(&held)) {
                Some(Disruption::Validated(outcome)) => orchestrator.validated(now, outcome),
                _ => Vec::new(),
            },
        };
        self.carry_out(&mut orchestrator, effects);
        self.disruption.orchestrator = orchestrator;
        self.drain();
    }

    /// How a replacement node is doing.
    fn replacement(&self, name: &str) -> Replacement {
        match self.nodes.iter().find(|n| n.name == name) {
            Some(n) if n.ready(self.now) => Replacement::Initialized,
            Some(n) if n.alive() => Replacement::Launching,
            _ => Replacement::Failed,
        }
    }

    /// Applies what the orchestrator asked to the model, as the controller does through the
    /// API server.
    fn carry_out(&mut self, orchestrator: &mut Orchestrator, effects: Vec<Effect>) {
        let mut queue: std::collections::VecDeque<Effect> = effects.into();
        while let Some(effect) = queue.pop_front() {
            match effect {
                Effect::Validating(_) | Effect::Waiting(_) => {}
                Effect::Abandoned { command, why } => self.event(
                    "DisruptionBlocked",
                    format!(
                        "{} of {} abandoned: no longer valid after {}s: {why}",
                        command.method,
                        command.candidates.join(", "),
                        VALIDATION_DELAY.as_secs()
                    ),
                ),
                Effect::Taint(command) => {
                    for name in &command.candidates {
                        let Some(n) = self.node_index(name) else {
                            continue;
                        };
                        self.nodes[n].disrupted = true;
                        self.nodes[n].taints.push(Taint {
                            key: DISRUPTED_TAINT_KEY.into(),
                            effect: "NoSchedule".into(),
                            ..Default::default()
                        });
                    }
                    if command.replacements.is_empty() {
                        self.record(&command, &[]);
                    }
                }
                Effect::Launch(command) => {
                    let launched: Vec<usize> = command
                        .replacements
                        .iter()
                        .filter_map(|claim| self.launch(claim, "replacement"))
                        .collect();
                    let names: Vec<String> = launched
                        .iter()
                        .map(|&r| self.nodes[r].name.clone())
                        .collect();
                    self.record(&command, &names);
                    if launched.len() < command.replacements.len() {
                        queue.extend(
                            orchestrator.launch_failed(&command, "a replacement failed to launch"),
                        );
                    } else {
                        orchestrator.launched(&command, names);
                    }
                }
                Effect::Delete(command) => {
                    if !command.replacements.is_empty() {
                        self.event(
                            "DisruptionTerminating",
                            format!("{}: replacements Ready", command.candidates.join(", ")),
                        );
                    }
                    for name in &command.candidates {
                        if let Some(n) = self.node_index(name) {
                            self.start_drain(n);
                        }
                    }
                }
                Effect::RollBack { command, why } => {
                    self.event(
                        "DisruptionBlocked",
                        format!(
                            "{} of {}: {why}",
                            command.method,
                            command.candidates.join(", ")
                        ),
                    );
                    for name in &command.candidates {
                        if let Some(n) = self.node_index(name) {
                            self.nodes[n].disrupted = false;
                            self.nodes[n]
                                .taints
                                .retain(|t| t.key != DISRUPTED_TAINT_KEY);
                        }
                    }
                }
            }
        }
    }

    /// Reports a command as it starts.
    fn record(&mut self, command: &Command, replacements: &[String]) {
        let action = if replacements.is_empty() {
            format!("delete {}", command.candidates.join(", "))
        } else {
            format!(
                "replace {} with {}",
                command.candidates.join(", "),
                replacements.join(", ")
            )
        };
        let message = format!(
            "{}: {action}, saving {}/h",
            command.method,
            self.catalog.price(command.savings_per_hour)
        );
        self.disruptions.push(Event {
            t_s: self.now,
            kind: command.reason.as_str().into(),
            message: message.clone(),
        });
        let kind = if replacements.is_empty() {
            "DisruptionTerminating"
        } else {
            "DisruptionLaunching"
        };
        self.event(kind, message);
    }

    /// Disruption's step of a round over the cluster now.
    fn disruption_round(&self, step: Disrupt<'_>) -> Option<Disruption> {
        let parts = Parts {
            disruption: step,
            ..Parts::NONE
        };
        self.round(parts, |_, plan| plan.disruption)
    }

    /// PodDisruptionBudgets with the status kube-controller-manager would give them now.
    pub(super) fn pdbs_with_status(&self) -> Vec<PodDisruptionBudget> {
        self.pdbs
            .iter()
            .map(|pdb| {
                let matching: Vec<&SimPod> = self
                    .pods
                    .iter()
                    .filter(|p| !p.done && selects(pdb, &p.pod))
                    .collect();
                let healthy = matching
                    .iter()
                    .filter(|p| p.node.is_some_and(|n| self.nodes[n].ready(self.now)))
                    .count();
                let mut pdb = pdb.clone();
                pdb.status = Some(PodDisruptionBudgetStatus {
                    disruptions_allowed: disruptions_allowed(&pdb, matching.len(), healthy),
                    current_healthy: healthy as i32,
                    expected_pods: matching.len() as i32,
                    ..Default::default()
                });
                pdb
            })
            .collect()
    }

    pub(super) fn node_index(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.alive() && n.name == name)
    }

    /// Starts draining node `n`; its NodePool's `terminationGracePeriod` sets when the pods
    /// left are forced out.
    pub(super) fn start_drain(&mut self, n: usize) {
        let grace = self.nodes[n]
            .node_pool
            .as_ref()
            .and_then(|p| self.pools.get(p))
            .and_then(|p| p.spec.template.spec.termination_grace_period)
            .map(|d| d.0);
        let node = &mut self.nodes[n];
        if !node.draining {
            node.draining = true;
            node.drain_deadline = grace.map(|g| self.now + g.as_secs());
        }
    }

    /// Drains as the controller's termination does (the core's drain step: upstream's order,
    /// never a do-not-disrupt pod, everything left at the deadline), evicting as
    /// PodDisruptionBudgets allow. A drained node terminates.
    fn drain(&mut self) {
        let draining: Vec<usize> = (0..self.nodes.len())
            .filter(|&n| self.nodes[n].alive() && self.nodes[n].draining)
            .collect();
        if draining.is_empty() {
            return;
        }
        let mut allowed: Vec<i32> = self
            .pdbs_with_status()
            .iter()
            .map(|p| p.status.as_ref().map_or(0, |s| s.disruptions_allowed))
            .collect();
        for n in draining {
            let deadline = self.nodes[n].drain_deadline.map(|d| self.wall_at(d));
            let on_node: Vec<usize> = (0..self.pods.len())
                .filter(|&p| !self.pods[p].done && self.pods[p].node == Some(n))
                .collect();
            // The controller's drain step, over the pods as the API server would hold them.
            let (delete, evict, mut waiting) = {
                let refs: Vec<&Pod> = on_node.iter().map(|&p| &self.pods[p].pod).collect();
                let index = |pod: &Pod| {
                    let at = refs.iter().position(|r| std::ptr::eq(*r, pod));
                    on_node[at.expect("the step returns the pods it was given")]
                };
                let step = termination::drain_step(&refs, deadline, self.wall_now());
                let delete: Vec<usize> = step.delete.iter().map(|p| index(p)).collect();
                let evict: Vec<usize> = step.evict.iter().map(|p| index(p)).collect();
                (delete, evict, step.waiting)
            };
            for p in delete {
                self.pods[p].end(self.now);
                waiting -= 1;
            }
            for p in evict {
                let guards: Vec<usize> = (0..self.pdbs.len())
                    .filter(|&b| selects(&self.pdbs[b], &self.pods[p].pod))
                    .collect();
                if guards.iter().all(|&b| allowed[b] > 0) {
                    for &b in &guards {
                        allowed[b] -= 1;
                    }
                    self.pods[p].end(self.now);
                    waiting -= 1;
                }
            }
            if waiting == 0 {
                self.terminate(n, "Disrupted");
            }
        }
    }

    /// NodeClaims past their `expireAfter` have their nodes drained and terminated, budgets
    /// or not (the controller deletes the NodeClaim; termination drains it).
    fn expire(&mut self) {
        let any_due = self.nodes.iter().any(|n| {
            n.alive()
                && !n.draining
                && n.claim
                    .as_ref()
                    .and_then(|c| c.spec.expire_after.0)
                    .is_some_and(|after| self.now >= n.launched_at + after.as_secs())
        });
        if !any_due {
            return;
        }
        let parts = Parts {
            expiration: true,
            ..Parts::NONE
        };
        let names: Vec<String> = self.round(parts, |_, plan| {
            plan.expired.iter().map(|e| e.node.to_string()).collect()
        });
        for name in names {
            let Some(n) = self.node_index(&name) else {
                continue;
            };
            self.nodes[n].disrupted = true;
            self.start_drain(n);
            self.nodes[n].taints.push(Taint {
                key: DISRUPTED_TAINT_KEY.into(),
                effect: "NoSchedule".into(),
                ..Default::default()
            });
            self.disruptions.push(Event {
                t_s: self.now,
                kind: "Expired".into(),
                message: format!("node/{name}"),
            });
            self.event("Expired", format!("node/{name}"));
        }
    }
}
