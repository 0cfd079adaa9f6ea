//! The disruption controller: every pass builds the same snapshot the simulator does, asks
//! `karpenter_core::disruption::decide`, and carries the answer out as upstream's
//! orchestration queue does — consolidation is re-validated after 15 s, candidates are tainted
//! `karpenter.sh/disrupted:NoSchedule`, replacements are launched and must initialize before
//! the candidates' NodeClaims are deleted (termination then drains them through the Eviction
//! API), and a replacement that fails rolls the taint back. Events and metrics use upstream's
//! names.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::jiff::Timestamp;
use karpenter_api::labels::{CAPACITY_TYPE_LABEL, DISRUPTED_TAINT_KEY, NODE_POOL_LABEL};
use karpenter_api::nodeclaim::condition::INITIALIZED;
use karpenter_api::{DisruptionReason, NodeClaim};
use karpenter_core::disruption::{Command, decide};
use karpenter_core::provisioning::node_claim_for;
use karpenter_core::provisioning::scheduling::NodePoolInput;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::cloudprovider::CloudProvider;
use crate::events::{Note, normal};
use crate::metrics::labels;
use crate::provisioning::{pool_inputs, scheduler_options};
use crate::{Context, Error, conditions};

/// Upstream's wait before a consolidation decision is acted on.
pub const VALIDATION_DELAY: Duration = Duration::from_secs(15);
/// How long replacements may take to initialize before the command is rolled back.
pub const REPLACEMENT_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// A command whose replacements are launching.
#[derive(Debug)]
struct InFlight {
    command: Command,
    replacements: Vec<String>,
    started: Instant,
}

/// What the orchestration remembers between passes.
#[derive(Debug, Default)]
pub struct Orchestrator {
    /// A consolidation waiting out its validation delay.
    pending: Option<(Instant, Command)>,
    in_flight: Option<InFlight>,
}

fn same_command(a: &Command, b: &Command) -> bool {
    let set = |c: &Command| c.candidates.iter().cloned().collect::<BTreeSet<_>>();
    a.reason == b.reason && set(a) == set(b) && a.replacements.len() == b.replacements.len()
}

fn reason_label(reason: DisruptionReason) -> String {
    reason.as_str().to_lowercase()
}

impl<P: CloudProvider> Context<P> {
    fn claim_of(&self, node: &str) -> Option<Arc<NodeClaim>> {
        let node = self.cluster.nodes.get(node)?;
        self.cluster
            .node_claim_for_provider_id(node.spec.as_ref()?.provider_id.as_deref()?)
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

    async fn publish_on_node(&self, node: &str, note: Note<'_>) {
        if let Some(n) = self.cluster.nodes.get(node) {
            self.recorder.publish(&*n, note).await;
        }
    }

    async fn terminate_candidates(&self, command: &Command) -> Result<(), Error> {
        let reason = command.reason.as_str();
        for node in &command.candidates {
            let Some(claim) = self.claim_of(node) else {
                continue;
            };
            self.delete_claim(&claim.name_any(), &DeleteParams::default())
                .await?;
            self.metrics
                .nodeclaims_disrupted
                .get_or_create(&labels(&[
                    ("reason", &reason_label(command.reason)),
                    (
                        "nodepool",
                        claim.labels().get(NODE_POOL_LABEL).map_or("", |s| s),
                    ),
                    (
                        "capacity_type",
                        claim.labels().get(CAPACITY_TYPE_LABEL).map_or("", |s| s),
                    ),
                ]))
                .inc();
            self.publish_on_node(
                node,
                normal(
                    "DisruptionTerminating",
                    format!("Disrupting Node: {reason}"),
                ),
            )
            .await;
            tracing::info!(node = %node, reason, method = %command.method, "disrupting node");
        }
        Ok(())
    }

    /// Taints the candidates, launches the replacements, and deletes the candidates at once
    /// when there are none.
    async fn execute(
        &self,
        command: Command,
        pools: &[NodePoolInput],
    ) -> Result<Option<InFlight>, Error> {
        self.metrics
            .disruption_decisions
            .get_or_create(&labels(&[
                (
                    "decision",
                    if command.replacements.is_empty() {
                        "delete"
                    } else {
                        "replace"
                    },
                ),
                ("reason", &reason_label(command.reason)),
                ("consolidation_type", command.method.consolidation_type()),
            ]))
            .inc();
        for node in &command.candidates {
            self.set_disrupted_taint(node, true).await?;
        }
        self.cluster
            .set_marked_for_deletion(command.candidates.iter().cloned().collect());
        if command.replacements.is_empty() {
            self.terminate_candidates(&command).await?;
            return Ok(None);
        }
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        let mut replacements = Vec::new();
        for r in &command.replacements {
            let Some(pool) = pools.iter().find(|p| p.node_pool.name() == r.node_pool) else {
                continue;
            };
            let made = api
                .create(&PostParams::default(), &node_claim_for(r, &pool.node_pool))
                .await?;
            self.metrics
                .nodeclaims_created
                .get_or_create(&labels(&[
                    ("reason", &reason_label(command.reason)),
                    ("nodepool", &r.node_pool),
                    ("min_values_relaxed", "false"),
                ]))
                .inc();
            replacements.push(made.name_any());
            self.cluster.node_claims.apply(made);
        }
        for node in &command.candidates {
            let message = format!("Launching NodeClaim: {}", command.reason.as_str());
            self.publish_on_node(node, normal("DisruptionLaunching", message))
                .await;
        }
        Ok(Some(InFlight {
            command,
            replacements,
            started: Instant::now(),
        }))
    }

    /// Moves a command in flight along: candidates go once every replacement is initialized;
    /// a replacement that vanished or a timeout rolls the taint back.
    async fn advance(&self, flight: InFlight) -> Result<Option<InFlight>, Error> {
        let claims: Vec<Option<Arc<NodeClaim>>> = flight
            .replacements
            .iter()
            .map(|name| self.cluster.node_claims.get(name))
            .collect();
        let failed = claims.iter().any(|c| {
            c.as_ref()
                .is_none_or(|c| c.metadata.deletion_timestamp.is_some())
        });
        if failed || flight.started.elapsed() > REPLACEMENT_TIMEOUT {
            tracing::warn!(candidates = ?flight.command.candidates, "replacement failed, rolling back the disruption");
            for node in &flight.command.candidates {
                self.set_disrupted_taint(node, false).await?;
            }
            return Ok(None);
        }
        let ready = claims.iter().flatten().all(|c| {
            c.status
                .as_ref()
                .is_some_and(|s| conditions::is_true(&s.conditions, INITIALIZED))
        });
        if !ready {
            for node in &flight.command.candidates {
                self.publish_on_node(
                    node,
                    normal(
                        "DisruptionWaitingReadiness",
                        "Waiting on readiness to continue disruption",
                    ),
                )
                .await;
            }
            return Ok(Some(flight));
        }
        self.terminate_candidates(&flight.command).await?;
        Ok(None)
    }
}

/// Untaints nodes a previous leader (or a crash) left tainted `karpenter.sh/disrupted` without
/// deleting them: with nothing in flight, only a terminating node may carry the taint.
async fn release_stale_taints<P: CloudProvider>(ctx: &Context<P>) -> Result<(), Error> {
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
        if tainted && managed && !deleting {
            tracing::info!(node = %node.name_any(), "removing a disruption taint no command owns");
            ctx.set_disrupted_taint(&node.name_any(), false).await?;
        }
    }
    Ok(())
}

/// One pass: advance what is in flight, or decide anew (re-validating a consolidation that has
/// waited out its delay).
pub async fn pass<P: CloudProvider>(
    ctx: &Context<P>,
    orchestrator: &mut Orchestrator,
) -> Result<(), Error> {
    if !ctx.cluster.synced() {
        return Err(Error::NotSynced("cluster state".into()));
    }
    let advanced = match orchestrator.in_flight.take() {
        Some(flight) => {
            orchestrator.in_flight = ctx.advance(flight).await?;
            true
        }
        None => false,
    };
    // The nodes taken are exactly those of the command in flight, whatever happened since.
    ctx.cluster.set_marked_for_deletion(
        orchestrator
            .in_flight
            .iter()
            .flat_map(|f| f.command.candidates.iter().cloned())
            .collect(),
    );
    if advanced {
        return Ok(());
    }
    if orchestrator.pending.is_none() {
        release_stale_taints(ctx).await?;
    }
    let (pools, _) = pool_inputs(ctx).await;
    let provider_labels = ctx.provider.provider_labels();
    let objects = ctx.cluster.objects();
    let now = Timestamp::now().as_second();
    let inputs = objects.snapshot(&pools, &provider_labels).disruption(now);
    let input = inputs.input(
        now,
        &pools,
        scheduler_options(ctx),
        ctx.options.feature_gates.spot_to_spot_consolidation,
    );
    let decision = decide(&input);
    ctx.metrics
        .disruption_eligible_nodes
        .set(decision.eligible_nodes() as i64);
    for (node, block) in &decision.blocked {
        let Some(reason) = block.kind.event_reason() else {
            continue;
        };
        let mut note = normal(reason, block.reason.clone());
        if reason == "Unconsolidatable" {
            note.dedupe = Duration::from_secs(15 * 60);
        }
        ctx.publish_on_node(node, note).await;
    }
    let Some(command) = decision.commands.into_iter().next() else {
        orchestrator.pending = None;
        return Ok(());
    };
    let validated = match (command.reason, orchestrator.pending.take()) {
        (DisruptionReason::Drifted, _) => true,
        (_, Some((at, earlier))) if same_command(&earlier, &command) => {
            if at.elapsed() < ctx.options.consolidation_validation {
                orchestrator.pending = Some((at, earlier));
                return Ok(());
            }
            true
        }
        (_, earlier) => {
            if earlier.is_some() {
                ctx.metrics.disruption_failed_validations.inc();
            }
            false
        }
    };
    if !validated {
        tracing::debug!(candidates = ?command.candidates, method = %command.method, "consolidation decided; validating");
        orchestrator.pending = Some((Instant::now(), command));
        return Ok(());
    }
    orchestrator.in_flight = ctx.execute(command, &pools).await?;
    Ok(())
}

/// Runs disruption until `shutdown`: a pass every `disruption_poll`, faster while a command is
/// in flight or validating.
pub async fn run<P: CloudProvider>(
    ctx: Arc<Context<P>>,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let mut orchestrator = Orchestrator::default();
    loop {
        let busy = orchestrator.in_flight.is_some() || orchestrator.pending.is_some();
        let wait = if busy {
            ctx.options.resync
        } else {
            ctx.options.disruption_poll
        };
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
        if !ctx.is_leader() {
            orchestrator = Orchestrator::default();
            ctx.cluster.set_marked_for_deletion(BTreeSet::new());
            continue;
        }
        if let Err(e) = pass(&ctx, &mut orchestrator).await
            && !e.is_conflict()
        {
            tracing::warn!(error = %e, "disruption pass");
        }
    }
}
