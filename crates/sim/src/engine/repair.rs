//! Node repair in the simulator (the `NodeRepair` gate): every second, as the controller's
//! `node.health` loop, each karpenter node whose conditions a scenario step turned bad is
//! judged against the catalog's repair policies by the round (the core's `repair::judge_all`,
//! as the controller's loop). A node past its
//! toleration is terminated at once (repair is forceful: no budgets, no PodDisruptionBudgets,
//! no `do-not-disrupt`); its pods go back to pending and are provisioned for like any others.

use karpenter_core::disruption::repair::Repair;
use karpenter_core::round::Parts;

use super::Simulation;
use crate::report::Event;
use crate::scenario::NodeConditionStep;

impl Simulation {
    pub(super) fn repair(&mut self) {
        // Nothing for the round to judge: skip building the snapshot.
        if !self.feature_gates.node_repair || self.catalog.repair_policies.is_empty() {
            return;
        }
        // Only nodes a step touched can fail a policy: skip building objects otherwise.
        if !self
            .nodes
            .iter()
            .any(|n| n.alive() && !n.conditions.is_empty())
        {
            return;
        }
        // What the controller sees now, judged by the round.
        let parts = Parts {
            repair: true,
            ..Parts::NONE
        };
        let judged: Vec<(String, Result<String, &'static str>)> = self.round(parts, |_, plan| {
            plan.repairs
                .iter()
                .filter_map(|j| {
                    let name = j.node.metadata.name.clone().unwrap_or_default();
                    match j.repair {
                        Repair::Healthy | Repair::Tolerated { .. } => None,
                        Repair::Blocked { scope } => Some((name, Err(scope.blocked_message()))),
                        Repair::Repair { policy } => Some((
                            name,
                            Ok(format!(
                                "{}={}",
                                policy.condition_type, policy.condition_status
                            )),
                        )),
                    }
                })
                .collect()
        });
        let index = |name: &str| self.nodes.iter().position(|n| n.alive() && n.name == name);
        let mut repaired = Vec::new();
        let mut blocked = Vec::new();
        for (node, outcome) in judged {
            let Some(n) = index(&node) else {
                continue;
            };
            match outcome {
                Ok(condition) => repaired.push((
                    n,
                    format!("repair node/{node}: {condition} past its toleration"),
                )),
                Err(message) => blocked.push((n, message.to_string())),
            }
        }
        for (n, message) in repaired {
            self.disruptions.push(Event {
                t_s: self.now,
                kind: "Unhealthy".into(),
                message: message.clone(),
            });
            self.event("NodeRepaired", message);
            self.terminate(n, "Repaired");
        }
        for (n, message) in blocked {
            let node = format!("node/{}", self.nodes[n].name);
            // Once per node and message, as the controller's event dedupe.
            let already = self
                .events
                .iter()
                .any(|e| e.kind == "NodeRepairBlocked" && e.message.starts_with(&node));
            if !already {
                self.event("NodeRepairBlocked", format!("{node}: {message}"));
            }
        }
    }

    /// A scenario step: sets a condition on the named node, or on the oldest karpenter nodes
    /// (of a NodePool when one is named).
    pub(super) fn set_node_condition(&mut self, step: NodeConditionStep) {
        let mut targets: Vec<usize> = (0..self.nodes.len())
            .filter(|&n| self.nodes[n].alive() && self.nodes[n].reason != "existing")
            .filter(|&n| match (&step.node, &step.node_pool) {
                (Some(name), _) => &self.nodes[n].name == name,
                (None, Some(pool)) => self.nodes[n].node_pool.as_ref() == Some(pool),
                (None, None) => true,
            })
            .collect();
        targets.truncate(step.count.unwrap_or(1));
        if targets.is_empty() {
            self.failures
                .push(format!("t={}s: nodeCondition: no matching node", self.now));
        }
        for n in targets {
            let name = self.nodes[n].name.clone();
            self.nodes[n]
                .conditions
                .insert(step.type_.clone(), (step.status.clone(), self.now));
            self.event(
                "NodeCondition",
                format!("node/{name}: {}={}", step.type_, step.status),
            );
        }
    }
}
