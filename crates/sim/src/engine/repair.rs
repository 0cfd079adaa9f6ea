//! Node repair in the simulator (the `NodeRepair` gate): every second, as the controller's
//! `node.health` loop, each karpenter node whose conditions a scenario step turned bad is
//! judged against the catalog's repair policies through `plan`'s [`repair_plan`](crate::plan::repair_plan)
//! (the core's `repair::judge_all`, as the controller's loop). A node past its
//! toleration is terminated at once (repair is forceful: no budgets, no PodDisruptionBudgets,
//! no `do-not-disrupt`); its pods go back to pending and are provisioned for like any others.

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
        // What the controller sees now, judged as `plan` judges it.
        let objects = self.objects();
        let now = k8s_openapi::jiff::Timestamp::from_second(EPOCH + self.now as i64)
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        let decided = crate::plan::repair_plan(
            &objects.nodes.iter().collect::<Vec<_>>(),
            &objects.node_claims.iter().collect::<Vec<_>>(),
            &self.catalog.repair_policies,
            now,
        );
        let index = |name: &str| self.nodes.iter().position(|n| n.alive() && n.name == name);
        let repaired: Vec<(usize, String)> = decided
            .repaired
            .iter()
            .filter_map(|r| {
                let n = index(&r.node)?;
                Some((
                    n,
                    format!(
                        "repair node/{}: {} past its toleration",
                        r.node, r.condition
                    ),
                ))
            })
            .collect();
        let blocked: Vec<(usize, String)> = decided
            .blocked
            .iter()
            .filter_map(|k| Some((index(&k.node)?, k.reason.clone())))
            .collect();
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
