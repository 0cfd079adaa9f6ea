//! Node repair in the simulator (the `NodeRepair` gate): every second, as the controller's
//! `node.health` loop, each karpenter node whose conditions a scenario step turned bad is
//! judged by the core's decision against the catalog's repair policies. A node past its
//! toleration is terminated at once (repair is forceful: no budgets, no PodDisruptionBudgets,
//! no `do-not-disrupt`); its pods go back to pending and are provisioned for like any others.

use karpenter_core::disruption::repair::{self, Repair};

use super::Simulation;
use super::disruption::EPOCH;
use crate::report::Event;
use crate::scenario::NodeConditionStep;

impl Simulation {
    pub(super) fn repair(&mut self) {
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
        let ready: Vec<usize> = (0..self.nodes.len())
            .filter(|&n| self.nodes[n].ready(self.now))
            .collect();
        let objects: Vec<_> = ready
            .iter()
            .map(|&n| self.node_object(&self.nodes[n]))
            .collect();
        let now = k8s_openapi::jiff::Timestamp::from_second(EPOCH + self.now as i64)
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        let policies = self.catalog.repair_policies.clone();
        let mut repaired = Vec::new();
        let mut blocked = Vec::new();
        for (i, &n) in ready.iter().enumerate() {
            let node = &self.nodes[n];
            if node.claim.is_none() || node.conditions.is_empty() {
                continue;
            }
            let pool = node.node_pool.as_deref();
            match repair::decide(&objects[i], pool, &objects, &policies, now) {
                Repair::Healthy | Repair::Tolerated { .. } => {}
                Repair::Blocked { scope } => {
                    blocked.push((n, scope.blocked_message()));
                }
                Repair::Repair { policy } => {
                    let message = format!(
                        "repair node/{}: {}={} past its {}s toleration",
                        node.name,
                        policy.condition_type,
                        policy.condition_status,
                        policy.toleration.as_secs()
                    );
                    repaired.push((n, message));
                }
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
