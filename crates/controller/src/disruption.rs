//! The disruption controller: every pass builds the same snapshot the simulator does, asks
//! `karpenter_core::disruption::decide`, and carries the answer out as upstream's
//! orchestration queue does — consolidation is re-validated after 15 s, candidates are tainted
//! `karpenter.sh/disrupted:NoSchedule`, replacements are launched and must initialize before
//! the candidates' NodeClaims are deleted (termination then drains them through the Eviction
//! API), and a replacement that fails rolls the taint back. Events and metrics use upstream's
//! names.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Taint;
use karpenter_api::labels::{DISRUPTED_TAINT_KEY, NODE_POOL_LABEL};
use karpenter_api::nodeclaim::condition::{DISRUPTION_REASON, INITIALIZED};
use karpenter_api::{DisruptionReason, NodeClaim};
use karpenter_core::disruption::orchestration::{Due, Effect, Orchestrator, Replacement};
use karpenter_core::disruption::{Block, Blocked, Command, Invalid, InvalidKind, Method};
use karpenter_core::provisioning::node_claim_for;
use karpenter_core::provisioning::scheduling::NodePoolInput;
use karpenter_core::round::{Disrupt, Disruption, Parts};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::cloudprovider::CloudProvider;
use crate::events::{Note, catalog};
use crate::provisioning::pool_inputs;
use crate::{Context, Error, conditions};

pub use karpenter_core::disruption::orchestration::{REPLACEMENT_TIMEOUT, VALIDATION_DELAY};

/// Upstream's `ConsolidationRejected` event for each candidate of a command that failed
/// validation, by node (the caller gives each its Node's or NodeClaim's UID).
fn rejected_messages(
    command: &Command,
    kind: InvalidKind,
) -> Vec<(String, impl Fn(&str) -> Note<'static>)> {
    let decision = if command.replacements.is_empty() {
        "delete"
    } else {
        "replace"
    };
    command
        .candidates
        .iter()
        .map(|node| {
            let what = if command.candidates.len() == 1 {
                format!("{decision}: [{node}]")
            } else {
                format!(
                    "{decision}: [{node}] (part of {}-node consolidation)",
                    command.candidates.len()
                )
            };
            let savings = command.savings_per_hour;
            let note = move |uid: &str| {
                catalog::consolidation_rejected(uid, &what, kind.as_str(), savings)
            };
            (node.clone(), note)
        })
        .collect()
}

fn reason_label(reason: DisruptionReason) -> String {
    reason.as_str().to_lowercase()
}

/// A CamelCase name in snake_case (upstream's `pretty.ToSnakeCase`).
fn snake_case(s: &str) -> String {
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if ch.is_uppercase() && i > 0 {
            out.push('_');
        }
        out.extend(ch.to_lowercase());
    }
    out
}

impl<P: CloudProvider> Context<P> {
    fn claim_of(&self, node: &str) -> Option<Arc<NodeClaim>> {
        let node = self.cluster.nodes.get(node)?;
        self.cluster
            .node_claim_for_provider_id(node.spec.as_ref()?.provider_id.as_deref()?)
    }

    /// The `consolidation_policy` label of a disrupted claim: its NodePool's policy,
    /// snake_case, for consolidation; empty for drift, as upstream.
    fn consolidation_policy_of(&self, command: &Command, claim: &NodeClaim) -> String {
        if command.method.consolidation_type().is_empty() {
            return String::new();
        }
        claim
            .labels()
            .get(NODE_POOL_LABEL)
            .and_then(|p| self.cluster.node_pools.get(p))
            .and_then(|p| serde_json::to_value(p.spec.disruption.consolidation_policy).ok())
            .and_then(|v| v.as_str().map(snake_case))
            .unwrap_or_default()
    }

    async fn set_disrupted_taint(&self, node: &str, on: bool) -> Result<(), Error> {
        let Some(current) = self.cluster.nodes.get(node) else {
            return Ok(());
        };
        let mut taints: Vec<Taint> = current
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default()
            .into_iter()
            .filter(|t| t.key != DISRUPTED_TAINT_KEY)
            .collect();
        if on {
            taints.push(Taint {
                key: DISRUPTED_TAINT_KEY.into(),
                effect: "NoSchedule".into(),
                ..Default::default()
            });
        }
        let patch = json!({"metadata": {"resourceVersion": current.resource_version()}, "spec": {"taints": taints}});
        self.patch_node(node, patch).await
    }

    /// Publishes `note(kind, uid)` on the node named `node` and on its NodeClaim, as upstream
    /// publishes its candidate events on both.
    async fn publish_on_candidate(&self, node: &str, note: impl Fn(&str, &str) -> Note<'static>) {
        if let Some(n) = self.cluster.nodes.get(node) {
            let uid = n.uid().unwrap_or_default();
            self.recorder.publish(&*n, note("Node", &uid)).await;
        }
        if let Some(claim) = self.claim_of(node) {
            let uid = claim.uid().unwrap_or_default();
            self.recorder
                .publish(&*claim, note("NodeClaim", &uid))
                .await;
        }
    }

    /// Sets (upstream's `markDisrupted`) or clears the `DisruptionReason` condition of the
    /// NodeClaim of the node named `node`. Termination reads it for the eviction reason.
    async fn set_disruption_reason(
        &self,
        node: &str,
        reason: Option<DisruptionReason>,
    ) -> Result<(), Error> {
        let Some(claim) = self.claim_of(node) else {
            return Ok(());
        };
        let mut status = claim.status.clone().unwrap_or_default();
        let changed = match reason {
            Some(r) => conditions::set(
                &mut status.conditions,
                DISRUPTION_REASON,
                "True",
                r.as_str(),
                r.as_str(),
                self.clock.now(),
            ),
            None => conditions::clear(&mut status.conditions, DISRUPTION_REASON),
        };
        if !changed {
            return Ok(());
        }
        let patch = json!({"status": {"conditions": status.conditions}});
        crate::writes::allow_missing_write(self.patch_claim_status(&claim.name_any(), patch).await)
    }

    async fn terminate_candidates(&self, command: &Command) -> Result<(), Error> {
        let reason = command.reason.as_str();
        for node in &command.candidates {
            let Some(claim) = self.claim_of(node) else {
                continue;
            };
            self.delete_claim(&claim.name_any(), &DeleteParams::default())
                .await?;
            self.metrics.disrupted(
                &claim,
                &reason_label(command.reason),
                &self.consolidation_policy_of(command, &claim),
                Some(&self.cluster.pods_on(node)),
            );
            self.publish_on_candidate(node, |kind, uid| {
                catalog::disruption_terminating(kind, uid, reason)
            })
            .await;
            tracing::info!(node = %node, reason, method = %command.method, "disrupting node");
        }
        Ok(())
    }

    /// Creates the command's replacement NodeClaims; their names, in order.
    async fn launch(
        &self,
        command: &Command,
        pools: &[NodePoolInput],
    ) -> Result<Vec<String>, Error> {
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        let mut replacements = Vec::new();
        for r in &command.replacements {
            let Some(pool) = pools.iter().find(|p| p.node_pool.name() == r.node_pool) else {
                return Err(Error::NotSynced(format!(
                    "nodepool {} of a replacement is gone",
                    r.node_pool
                )));
            };
            let made = api
                .create(&PostParams::default(), &node_claim_for(r, &pool.node_pool))
                .await?;
            self.metrics
                .nodeclaims_created
                .with(&[
                    &reason_label(command.reason),
                    &r.node_pool,
                    &r.min_values_relaxed.to_string(),
                ])
                .inc();
            let uid = made.uid().unwrap_or_default();
            self.recorder
                .publish(
                    &made,
                    catalog::disruption_launching(&uid, command.reason.as_str()),
                )
                .await;
            replacements.push(made.name_any());
            self.cluster.node_claims.apply(made);
        }
        Ok(replacements)
    }

    /// How a replacement NodeClaim is doing, as state has it.
    fn replacement(&self, name: &str) -> Replacement {
        match self.cluster.node_claims.get(name) {
            None => Replacement::Failed,
            Some(c) if c.metadata.deletion_timestamp.is_some() => Replacement::Failed,
            Some(c)
                if c.status
                    .as_ref()
                    .is_some_and(|s| conditions::is_true(&s.conditions, INITIALIZED)) =>
            {
                Replacement::Initialized
            }
            Some(_) => Replacement::Launching,
        }
    }

    /// Carries out what the orchestrator asked, in order. A failure to start a command gives
    /// it back (untainted) before the error is returned. `launching`: the replacements found
    /// not initialized yet, which get upstream's `DisruptionWaitingReadiness`.
    async fn carry_out(
        &self,
        orchestrator: &mut Orchestrator,
        effects: Vec<Effect>,
        pools: &[NodePoolInput],
        launching: &[String],
    ) -> Result<(), Error> {
        let mut failed = None;
        for effect in effects {
            match effect {
                Effect::Validating(command) => {
                    tracing::debug!(candidates = ?command.candidates, method = %command.method, "consolidation decided; validating");
                }
                Effect::Abandoned { command, why } => {
                    tracing::debug!(candidates = ?command.candidates, method = %command.method, why = %why, "abandoning the command: no longer valid");
                    // Upstream counts the candidates that failed, by consolidation type.
                    self.metrics
                        .disruption_failed_validations
                        .with(&[command.method.consolidation_type()])
                        .inc_by(command.candidates.len() as u64);
                    if command.method != Method::Emptiness {
                        for (node, note) in rejected_messages(&command, why.kind) {
                            self.publish_on_candidate(&node, |_, uid| note(uid)).await;
                        }
                    }
                }
                Effect::Taint(command) => {
                    let decision = if command.replacements.is_empty() {
                        "delete"
                    } else {
                        "replace"
                    };
                    let reason = reason_label(command.reason);
                    let kind = command.method.consolidation_type();
                    self.metrics
                        .disruption_decisions
                        .with(&[decision, &reason, kind])
                        .inc();
                    let pools: BTreeSet<String> = command
                        .candidates
                        .iter()
                        .filter_map(|n| self.cluster.nodes.get(n))
                        .filter_map(|n| n.labels().get(NODE_POOL_LABEL).cloned())
                        .collect();
                    for pool in pools {
                        self.metrics
                            .disruption_decisions_by_nodepool
                            .with(&[&pool, decision, &reason, kind])
                            .inc();
                    }
                    for node in &command.candidates {
                        let marked = match self.set_disrupted_taint(node, true).await {
                            Ok(()) => self.set_disruption_reason(node, Some(command.reason)).await,
                            Err(e) => Err(e),
                        };
                        if let Err(e) = marked {
                            self.give_back(orchestrator, &command, &e).await;
                            return Err(e);
                        }
                    }
                }
                Effect::Launch(command) => match self.launch(&command, pools).await {
                    Ok(names) => orchestrator.launched(&command, names),
                    Err(e) => {
                        self.give_back(orchestrator, &command, &e).await;
                        return Err(e);
                    }
                },
                Effect::Waiting(command) => {
                    let theirs = launching.iter().filter(|name| {
                        self.cluster.node_claims.get(name).is_some_and(|c| {
                            c.labels().get(NODE_POOL_LABEL).is_some_and(|pool| {
                                command.replacements.iter().any(|r| &r.node_pool == pool)
                            })
                        })
                    });
                    for name in theirs {
                        if let Some(claim) = self.cluster.node_claims.get(name) {
                            let uid = claim.uid().unwrap_or_default();
                            self.recorder
                                .publish(&*claim, catalog::disruption_waiting_readiness(&uid))
                                .await;
                        }
                    }
                }
                // Each command finishes on its own: a failed write does not drop the
                // outcomes of the others (their candidates' taints would stay until a pass
                // finds them owned by nothing).
                Effect::Delete(command) => {
                    if let Err(e) = self.terminate_candidates(&command).await {
                        failed.get_or_insert(e);
                    }
                }
                Effect::RollBack { command, why } => {
                    tracing::warn!(candidates = ?command.candidates, reason = %why, "rolling back the disruption");
                    // Upstream counts the replacements that never initialized, labelled with
                    // the decision in the consolidation type's place as it does.
                    let launched = command.replacements.len();
                    let decision = if command.replacements.is_empty() {
                        "delete"
                    } else {
                        "replace"
                    };
                    self.metrics
                        .disruption_queue_failures
                        .with(&[decision, &snake_case(command.reason.as_str()), decision])
                        .inc_by(launched as u64);
                    for node in &command.candidates {
                        if let Err(e) = self.set_disrupted_taint(node, false).await {
                            failed.get_or_insert(e);
                        }
                        if let Err(e) = self.set_disruption_reason(node, None).await {
                            failed.get_or_insert(e);
                        }
                    }
                }
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// Gives a command that could not start back: the orchestrator forgets it and its
    /// candidates lose the taint (best effort: `release_stale_taints` finishes the job).
    async fn give_back(&self, orchestrator: &mut Orchestrator, command: &Command, error: &Error) {
        orchestrator.launch_failed(command, error.to_string());
        for node in &command.candidates {
            if let Err(e) = self.set_disrupted_taint(node, false).await {
                tracing::warn!(node = %node, error = %e, "removing the disruption taint");
            }
            if let Err(e) = self.set_disruption_reason(node, None).await {
                tracing::warn!(node = %node, error = %e, "clearing the DisruptionReason condition");
            }
        }
    }
}

/// Untaints nodes left tainted `karpenter.sh/disrupted` by no command in flight (`owned`) and
/// not being deleted: a previous leader's or a crash's, or a command whose deletion failed.
async fn release_stale_taints<P: CloudProvider>(
    ctx: &Context<P>,
    owned: &BTreeSet<String>,
) -> Result<(), Error> {
    let claims = ctx.cluster.node_claims_by_provider_id();
    for node in ctx.cluster.nodes.all() {
        let tainted = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|t| t.iter().any(|t| t.key == DISRUPTED_TAINT_KEY));
        let managed = node.labels().contains_key(NODE_POOL_LABEL);
        let deleting = node.metadata.deletion_timestamp.is_some()
            || node
                .spec
                .as_ref()
                .and_then(|s| s.provider_id.as_deref())
                .and_then(|id| claims.get(id))
                .is_none_or(|c| c.metadata.deletion_timestamp.is_some());
        if managed && !deleting && !owned.contains(&node.name_any()) {
            if tainted {
                tracing::info!(node = %node.name_any(), "removing a disruption taint no command owns");
                ctx.set_disrupted_taint(&node.name_any(), false).await?;
            }
            // Upstream clears the condition of candidates no command owns any more.
            ctx.set_disruption_reason(&node.name_any(), None).await?;
        }
    }
    Ok(())
}

/// One pass: the orchestrator moves every command in flight along and then, as it says, acts
/// on a fresh decision over the nodes they have not taken (holding a consolidation for the
/// validation delay) or validates the held command against the state now. `now` is the
/// orchestrator's clock.
pub async fn pass<P: CloudProvider>(
    ctx: &Context<P>,
    orchestrator: &mut Orchestrator,
    now: Duration,
) -> Result<(), Error> {
    let due = orchestrator.due(now);
    if !ctx.cluster.synced() {
        return Err(Error::NotSynced("cluster state".into()));
    }
    if matches!(due, Due::Decision) {
        release_stale_taints(ctx, &orchestrator.marked_for_deletion()).await?;
    }
    let pools = pool_inputs(ctx).await;
    let launching = std::cell::RefCell::new(Vec::new());
    let advanced = orchestrator.advance(now, |name| {
        let state = ctx.replacement(name);
        if state == Replacement::Launching {
            launching.borrow_mut().push(name.to_string());
        }
        state
    });
    let done = ctx
        .carry_out(orchestrator, advanced, &pools, &launching.into_inner())
        .await;
    // The nodes taken are exactly those of the commands in flight, whatever happened; the
    // decision below sees them taken (and the candidates just deleted as deleting).
    ctx.cluster
        .set_marked_for_deletion(orchestrator.marked_for_deletion());
    done?;
    let effects = match due {
        Due::Nothing => return Ok(()),
        Due::Decision => {
            let commands = decide_now(ctx, &pools).await?;
            orchestrator.decided_all(now, commands)
        }
        Due::Validation(held) => {
            let outcome = validated(ctx, &pools, &held).await?;
            orchestrator.validated(now, outcome)
        }
    };
    let done = ctx.carry_out(orchestrator, effects, &pools, &[]).await;
    ctx.cluster
        .set_marked_for_deletion(orchestrator.marked_for_deletion());
    done
}

/// Disruption's step of a round over the state now, launching from `pools`.
async fn disruption_round<P: CloudProvider>(
    ctx: &Context<P>,
    pools: &[NodePoolInput],
    step: Disrupt<'_>,
) -> Result<Disruption, Error> {
    let parts = Parts {
        disruption: step,
        ..Parts::NONE
    };
    crate::provisioning::round(ctx, pools, parts, |_, plan| plan.disruption)
        .await?
        .ok_or_else(|| Error::NotSynced("disruption was not decided".into()))
}

/// Whether the consolidation `held` since it was decided still holds.
async fn validated<P: CloudProvider>(
    ctx: &Context<P>,
    pools: &[NodePoolInput],
    held: &Command,
) -> Result<Result<Command, Invalid>, Error> {
    match disruption_round(ctx, pools, Disrupt::Validate(held)).await? {
        Disruption::Validated(outcome) => Ok(outcome),
        Disruption::Decided { .. } => Err(Error::NotSynced("validation was not run".into())),
    }
}

/// The decision now; its blocked nodes get upstream's events.
async fn decide_now<P: CloudProvider>(
    ctx: &Context<P>,
    pools: &[NodePoolInput],
) -> Result<Vec<Command>, Error> {
    let started = ctx.clock.instant();
    let Disruption::Decided { decision, eligible } =
        disruption_round(ctx, pools, Disrupt::Decide).await?
    else {
        return Err(Error::NotSynced("the decision was not made".into()));
    };
    for (reason, n) in eligible {
        ctx.metrics
            .disruption_eligible_nodes
            .set(&[reason], n as f64);
    }
    // One pass evaluates the methods in order until one acts; its time goes to the method
    // that acted, or to the last when none did.
    let (reason, consolidation_type) = decision.commands.first().map_or(
        (
            "underutilized".to_string(),
            Method::SingleNodeConsolidation.consolidation_type(),
        ),
        |c| (reason_label(c.reason), c.method.consolidation_type()),
    );
    ctx.metrics
        .disruption_evaluation_duration
        .with(&[&reason, consolidation_type])
        .observe(started.elapsed().as_secs_f64());
    for (node, block) in &decision.blocked {
        publish_blocked(ctx, node, block).await;
    }
    Ok(decision.commands)
}

/// The disruption reason a budget block names ("… for reason Drifted in NodePool …").
fn budget_reason(message: &str) -> Option<&str> {
    let (_, rest) = message.split_once("for reason ")?;
    rest.split_whitespace().next()
}

/// Upstream's event for a node the decision left alone: `Unconsolidatable` or
/// `DisruptionBlocked` on the Node and its NodeClaim, or, when a budget is what stops it,
/// `DisruptionBlocked` on its NodePool (deduplicated by the pool and the reason).
async fn publish_blocked<P: CloudProvider>(ctx: &Context<P>, node: &str, block: &Block) {
    match block.kind {
        Blocked::Budget => {
            let pool = ctx
                .cluster
                .nodes
                .get(node)
                .and_then(|n| n.labels().get(NODE_POOL_LABEL).cloned())
                .and_then(|p| ctx.cluster.node_pools.get(&p));
            if let (Some(pool), Some(reason)) = (pool, budget_reason(&block.reason)) {
                let uid = pool.uid().unwrap_or_default();
                ctx.recorder
                    .publish(&*pool, catalog::nodepool_blocked_for_reason(&uid, reason))
                    .await;
            }
        }
        kind => {
            let Some(reason) = kind.event_reason() else {
                return;
            };
            let message = catalog::sentence(&block.reason);
            ctx.publish_on_candidate(node, |_, uid| {
                if reason == catalog::reason::UNCONSOLIDATABLE {
                    catalog::unconsolidatable(uid, &message)
                } else {
                    catalog::disruption_blocked(uid, &message)
                }
            })
            .await;
        }
    }
}

/// Runs disruption until `shutdown`: commands in flight move along every `resync`, a fresh
/// decision is made every `disruption_poll` and when a held consolidation is due for
/// validation.
pub async fn run<P: CloudProvider>(
    ctx: Arc<Context<P>>,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let mut orchestrator = Orchestrator::new(
        ctx.options.consolidation_validation,
        REPLACEMENT_TIMEOUT,
        ctx.options.disruption_poll,
    );
    let origin = ctx.clock.instant();
    let lm = ctx.metrics.runtime.controller("disruption", 1);
    loop {
        let now = origin.elapsed();
        let soonest = now + ctx.options.resync;
        let wake = if orchestrator.in_flight() > 0 {
            soonest
        } else {
            orchestrator.next_decision().max(soonest)
        };
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(wake.saturating_sub(now)) => {}
        }
        if !ctx.is_leader() {
            orchestrator.reset();
            ctx.cluster.set_marked_for_deletion(BTreeSet::new());
            continue;
        }
        let started = ctx.clock.instant();
        let result = pass(&ctx, &mut orchestrator, origin.elapsed()).await;
        lm.singleton_pass(started.elapsed());
        ctx.metrics.reconciled_in(
            "disruption",
            result.is_ok(),
            started.elapsed().as_secs_f64(),
        );
        if let Err(e) = result
            && !e.is_conflict()
        {
            tracing::warn!(error = %e, "disruption pass");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::budget_reason;

    #[test]
    fn budget_blocks_name_their_reason() {
        assert_eq!(
            budget_reason("no allowed disruptions for reason Underutilized in NodePool \"a\""),
            Some("Underutilized")
        );
        assert_eq!(
            budget_reason(
                "drifted, but no allowed disruptions for reason Drifted in NodePool \"a\""
            ),
            Some("Drifted")
        );
        assert_eq!(budget_reason("Node is nominated"), None);
    }
}
