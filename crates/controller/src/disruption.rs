//! The disruption controller: every pass builds the same snapshot the simulator does, asks
//! `karpenter_core::disruption::decide`, and carries the answer out as upstream's
//! orchestration queue does — consolidation is re-validated after 15 s, candidates are tainted
//! `karpenter.sh/disrupted:NoSchedule`, replacements are launched and must initialize before
//! the candidates' NodeClaims are deleted (termination then drains them through the Eviction
//! API), and a replacement that fails rolls the taint back. Events and metrics use upstream's
//! names.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::jiff::Timestamp;
use karpenter_api::labels::{
    CAPACITY_TYPE_LABEL, DISRUPTED_TAINT_KEY, INSTANCE_TYPE_LABEL, NODE_INITIALIZED_LABEL,
    NODE_POOL_LABEL, ZONE_LABEL,
};
use karpenter_api::nodeclaim::condition::{DRIFTED, INITIALIZED};
use karpenter_api::{DisruptionReason, NodeClaim};
use karpenter_core::disruption::{Command, Input, NodeState, decide};
use karpenter_core::provisioning::scheduling::{NodePoolInput, SchedulerOptions};
use karpenter_core::resources::Resources;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::cloudprovider::CloudProvider;
use crate::events::{Note, normal};
use crate::metrics::labels;
use crate::provisioning::{daemonset_pods, node_claim_for, node_ready, pool_inputs};
use crate::{Context, Error, conditions, pods};

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

fn seconds(t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>) -> Option<i64> {
    t.map(|t| t.0.as_second())
}

fn price_of(pools: &[NodePoolInput], pool: &str, labels: &BTreeMap<String, String>) -> f64 {
    let label = |k: &str| labels.get(k).map(String::as_str).unwrap_or_default();
    pools
        .iter()
        .filter(|p| p.node_pool.name() == pool)
        .flat_map(|p| &p.instance_types)
        .find(|it| it.name == label(INSTANCE_TYPE_LABEL))
        .and_then(|it| {
            it.offerings
                .iter()
                .find(|o| {
                    o.zone == label(ZONE_LABEL) && o.capacity_type == label(CAPACITY_TYPE_LABEL)
                })
                .map(|o| o.price)
        })
        .unwrap_or(0.0)
}

/// Every managed node as disruption sees it. `marked` nodes (candidates of a command in flight)
/// count as deleting.
fn node_states<P: CloudProvider>(
    ctx: &Context<P>,
    pools: &[NodePoolInput],
    marked: &BTreeSet<String>,
) -> Vec<NodeState> {
    let cluster = &ctx.cluster;
    let claims = cluster.node_claims_by_provider_id();
    let mut pods_by_node = cluster.pods_by_node();
    let mut states = Vec::new();
    for node in cluster.nodes.all() {
        let labels = node.labels().clone();
        let Some(pool) = labels.get(NODE_POOL_LABEL).cloned() else {
            continue;
        };
        let name = node.name_any();
        let claim = node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .and_then(|id| claims.get(id));
        let on_node = pods_by_node.remove(&name).unwrap_or_default();
        let created_at = seconds(
            claim
                .as_ref()
                .and_then(|c| c.metadata.creation_timestamp.as_ref()),
        )
        .or_else(|| seconds(node.metadata.creation_timestamp.as_ref()))
        .unwrap_or(0);
        // Without upstream's pod-event controller, the newest pod on the node (or the claim's
        // recorded lastPodEventTime) stands for the last pod event.
        let last_pod_event = on_node
            .iter()
            .filter(|p| !pods::is_daemonset_pod(p))
            .filter_map(|p| seconds(p.metadata.creation_timestamp.as_ref()))
            .chain(seconds(
                claim
                    .as_ref()
                    .and_then(|c| c.status.as_ref()?.last_pod_event_time.as_ref()),
            ))
            .max()
            .unwrap_or(created_at)
            .max(created_at);
        let status = node.status.clone().unwrap_or_default();
        let mut annotations = node.annotations().clone();
        if let Some(c) = &claim {
            annotations.extend(c.annotations().clone());
        }
        states.push(NodeState {
            name: name.clone(),
            node_pool: Some(pool.clone()),
            price: price_of(pools, &pool, &labels),
            initialized: labels
                .get(NODE_INITIALIZED_LABEL)
                .is_some_and(|v| v == "true"),
            labels,
            annotations,
            taints: node
                .spec
                .as_ref()
                .and_then(|s| s.taints.clone())
                .unwrap_or_default(),
            allocatable: status
                .allocatable
                .as_ref()
                .and_then(|a| Resources::from_list(a).ok())
                .unwrap_or_default(),
            capacity: status
                .capacity
                .as_ref()
                .and_then(|a| Resources::from_list(a).ok())
                .unwrap_or_default(),
            pods: on_node
                .iter()
                .filter(|p| !p.is_terminal())
                .map(|p| p.to_pod())
                .collect(),
            ready: node_ready(&node),
            deleting: node.metadata.deletion_timestamp.is_some()
                || claim
                    .as_ref()
                    .is_some_and(|c| c.metadata.deletion_timestamp.is_some())
                || marked.contains(&name),
            nominated: ctx.cluster.nominations.is_nominated(&name),
            created_at,
            last_pod_event,
            drifted: claim
                .as_ref()
                .and_then(|c| c.status.as_ref())
                .is_some_and(|s| conditions::is_true(&s.conditions, DRIFTED)),
        });
    }
    states.sort_by(|a, b| a.name.cmp(&b.name));
    states
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
    if let Some(flight) = orchestrator.in_flight.take() {
        orchestrator.in_flight = ctx.advance(flight).await?;
        return Ok(());
    }
    if orchestrator.pending.is_none() {
        release_stale_taints(ctx).await?;
    }
    let (pools, _) = pool_inputs(ctx).await;
    let nodes = node_states(ctx, &pools, &BTreeSet::new());
    let pdbs: Vec<_> = ctx
        .cluster
        .pdbs
        .all()
        .iter()
        .map(|p| (**p).clone())
        .collect();
    let pending: Vec<_> = ctx
        .cluster
        .pods
        .all()
        .iter()
        .filter(|p| pods::is_provisionable(p))
        .map(|p| p.to_pod())
        .collect();
    let daemonsets = daemonset_pods(&ctx.cluster);
    let input = Input {
        now: Timestamp::now().as_second(),
        nodes: &nodes,
        node_pools: &pools,
        pdbs: &pdbs,
        pending_pods: &pending,
        daemonset_pods: &daemonsets,
        options: SchedulerOptions {
            provider_labels: ctx.provider.provider_labels(),
            ..Default::default()
        },
        spot_to_spot: ctx.options.feature_gates.spot_to_spot_consolidation,
    };
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
            continue;
        }
        if let Err(e) = pass(&ctx, &mut orchestrator).await
            && !e.is_conflict()
        {
            tracing::warn!(error = %e, "disruption pass");
        }
    }
}
