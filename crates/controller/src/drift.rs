//! Drift, as upstream's NodePool hash controller and NodeClaim disruption controller: NodePools
//! carry the hash of their template, NodeClaims made under another hash version are re-stamped
//! (a change of hash algorithm, such as moving from upstream Karpenter, drifts nothing), and
//! every launched NodeClaim's `Drifted` condition is true exactly while the core's checks or
//! the provider say it has drifted. The disruption controller then replaces drifted nodes
//! within their budgets. The same pass keeps each NodeClaim's `Consolidatable` condition as
//! upstream's (true once `consolidateAfter` has passed since its last pod event).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use karpenter_api::labels::NODE_POOL_LABEL;
use karpenter_api::nodeclaim::condition::{CONSOLIDATABLE, DRIFTED};
use karpenter_api::{NodeClaim, NodePool};
use karpenter_core::disruption::consolidatable::{Consolidatable, consolidatable};
use karpenter_core::disruption::drift::{
    DriftReason, INSTANCE_TYPE_CHECK_AFTER_SECONDS, INSTANCE_TYPE_CHECK_EVERY_SECONDS,
    has_drifted_condition, instance_type_not_found, is_launched, node_claim_hash_annotations,
    node_pool_hash_annotations, overlay_drift, template_drift,
};
use karpenter_core::instancetype::InstanceType;
use kube::ResourceExt;
use serde_json::json;

use crate::cloudprovider::CloudProvider;
use crate::{Context, Error, conditions};

/// How long the provider's answer for a claim stands before it is asked again (upstream
/// re-checks every NodeClaim every 5 minutes).
pub const PROVIDER_CHECK_EVERY: Duration = Duration::from_secs(5 * 60);

/// What the drift controller remembers between passes, by NodeClaim UID.
#[derive(Debug, Default)]
pub struct Checks {
    /// When the claim's instance type was last found offered. Only successes are kept, so a
    /// transient gap in the provider's list is noticed as soon as it is over.
    instance_type_found: HashMap<String, Instant>,
    /// The provider's last answer, and when it was given.
    provider: HashMap<String, (Instant, Option<String>)>,
}

/// What one pass changed.
#[derive(Debug, Default, PartialEq)]
pub struct Reconciled {
    /// NodePools given a current hash.
    pub stamped_node_pools: Vec<String>,
    /// NodeClaims re-stamped from another hash version.
    pub restamped_node_claims: Vec<String>,
    /// NodeClaims newly marked drifted, with the reason.
    pub drifted: Vec<(String, String)>,
    /// NodeClaims whose `Drifted` condition was removed.
    pub cleared: Vec<String>,
    /// NodeClaims whose `Consolidatable` condition was set or removed, with whether it is set.
    pub consolidatable: Vec<(String, bool)>,
}

enum Verdict {
    Drifted(DriftReason),
    NotDrifted,
    /// The provider could not answer: leave the condition as it is.
    Unknown,
}

/// One pass over every NodePool and NodeClaim.
pub async fn reconcile<P: CloudProvider>(
    ctx: &Context<P>,
    checks: &mut Checks,
) -> Result<Reconciled, Error> {
    if !ctx.cluster.synced() {
        return Err(Error::NotSynced("cluster state".into()));
    }
    let mut done = Reconciled::default();
    for pool in ctx.cluster.node_pools.all() {
        if pool.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if let Some(annotations) = node_pool_hash_annotations(&pool) {
            let name = pool.name_any();
            ctx.patch_node_pool(&name, json!({"metadata": {"annotations": annotations}}))
                .await?;
            done.stamped_node_pools.push(name);
        }
    }
    let pools: HashMap<String, Arc<NodePool>> = ctx
        .cluster
        .node_pools
        .all()
        .into_iter()
        .map(|p| (p.name_any(), p))
        .collect();
    let claims = ctx.cluster.node_claims.all();
    let live: std::collections::HashSet<String> = claims.iter().filter_map(|c| c.uid()).collect();
    checks
        .instance_type_found
        .retain(|uid, _| live.contains(uid));
    checks.provider.retain(|uid, _| live.contains(uid));
    let mut instance_types: HashMap<String, Vec<Arc<InstanceType>>> = HashMap::new();
    for claim in claims {
        if claim.metadata.deletion_timestamp.is_some() {
            continue;
        }
        // Claims of NodePools that are gone keep whatever they have: nothing to compare with.
        let Some(pool) = claim
            .labels()
            .get(NODE_POOL_LABEL)
            .and_then(|p| pools.get(p))
        else {
            continue;
        };
        let mut claim = claim;
        let name = claim.name_any();
        if let Some(annotations) = node_claim_hash_annotations(pool, &claim) {
            ctx.patch_claim(
                &name,
                json!({"metadata": {"annotations": annotations, "resourceVersion": claim.resource_version()}}),
            )
            .await?;
            done.restamped_node_claims.push(name.clone());
            match ctx.cluster.node_claims.get(&name) {
                Some(updated) => claim = updated,
                None => continue,
            }
        }
        let verdict = verdict(ctx, checks, &mut instance_types, pool, &claim).await;
        let consolidatable = consolidatable(pool, &claim, ctx.clock.now());
        apply(ctx, &claim, verdict, consolidatable, &mut done).await?;
    }
    Ok(done)
}

async fn verdict<P: CloudProvider>(
    ctx: &Context<P>,
    checks: &mut Checks,
    instance_types: &mut HashMap<String, Vec<Arc<InstanceType>>>,
    pool: &NodePool,
    claim: &NodeClaim,
) -> Verdict {
    if !is_launched(claim) {
        return Verdict::NotDrifted;
    }
    if let Some(reason) = template_drift(pool, claim) {
        return Verdict::Drifted(reason);
    }
    if ctx.options.feature_gates.node_overlay
        && let Some(eval) = ctx.overlays.evaluation(pool.name())
        && let Some(reason) = overlay_drift(&eval, pool.name(), claim)
    {
        return Verdict::Drifted(reason);
    }
    let uid = claim.uid().unwrap_or_default();
    let now = ctx.clock.instant();
    let age = claim
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(0, |t| ctx.clock.now().duration_since(t.0).as_secs());
    let recently_found = checks.instance_type_found.get(&uid).is_some_and(|t| {
        now.duration_since(*t).as_secs() < INSTANCE_TYPE_CHECK_EVERY_SECONDS as u64
    });
    if age >= INSTANCE_TYPE_CHECK_AFTER_SECONDS && !recently_found {
        let pool_name = pool.name_any();
        if !instance_types.contains_key(&pool_name) {
            match ctx
                .call("get_instance_types", ctx.provider.instance_types(pool))
                .await
            {
                Ok(types) => {
                    instance_types.insert(pool_name.clone(), types);
                }
                Err(e) => {
                    tracing::warn!(nodepool = %pool_name, error = %e, "listing instance types for drift");
                    return Verdict::Unknown;
                }
            }
        }
        match instance_type_not_found(&instance_types[&pool_name], claim) {
            Some(reason) => return Verdict::Drifted(reason),
            None => {
                checks.instance_type_found.insert(uid.clone(), now);
            }
        }
    }
    let answer = match checks.provider.get(&uid) {
        Some((at, answer)) if now.duration_since(*at) < ctx.options.provider_drift_check => {
            answer.clone()
        }
        _ => match ctx.call("is_drifted", ctx.provider.is_drifted(claim)).await {
            Ok(answer) => {
                checks.provider.insert(uid, (now, answer.clone()));
                answer
            }
            Err(e) => {
                tracing::warn!(nodeclaim = %claim.name_any(), error = %e, "asking the provider about drift");
                return Verdict::Unknown;
            }
        },
    };
    match answer.filter(|r| !r.is_empty()) {
        Some(reason) => Verdict::Drifted(DriftReason::Provider(reason)),
        None => Verdict::NotDrifted,
    }
}

async fn apply<P: CloudProvider>(
    ctx: &Context<P>,
    claim: &NodeClaim,
    verdict: Verdict,
    consolidatable: Consolidatable,
    done: &mut Reconciled,
) -> Result<(), Error> {
    let mut status = claim.status.clone().unwrap_or_default();
    let name = claim.name_any();
    let mut changed = false;
    match verdict {
        Verdict::Unknown => {}
        Verdict::NotDrifted => {
            if has_drifted_condition(claim) {
                status.conditions.retain(|c| c.type_ != DRIFTED);
                changed = true;
                done.cleared.push(name.clone());
                tracing::debug!(nodeclaim = %name, "no longer drifted");
            }
        }
        Verdict::Drifted(reason) => {
            let reason = reason.as_str();
            let was = conditions::is_true(&status.conditions, DRIFTED);
            if conditions::set(
                &mut status.conditions,
                DRIFTED,
                "True",
                reason,
                reason,
                ctx.clock.now(),
            ) {
                changed = true;
                if !was {
                    let pool = claim
                        .labels()
                        .get(NODE_POOL_LABEL)
                        .cloned()
                        .unwrap_or_default();
                    ctx.metrics.nodeclaims_drifted.with(&[reason, &pool]).inc();
                    tracing::info!(nodeclaim = %name, reason = %reason, "marked drifted");
                }
                done.drifted.push((name.clone(), reason.to_string()));
            }
        }
    }
    let had = conditions::get(&status.conditions, CONSOLIDATABLE).is_some();
    match consolidatable {
        Consolidatable::Yes => {
            if conditions::set(
                &mut status.conditions,
                CONSOLIDATABLE,
                "True",
                CONSOLIDATABLE,
                "",
                ctx.clock.now(),
            ) {
                changed = true;
                done.consolidatable.push((name.clone(), true));
                tracing::debug!(nodeclaim = %name, "marked consolidatable");
            }
        }
        Consolidatable::Absent | Consolidatable::At(_) if had => {
            status.conditions.retain(|c| c.type_ != CONSOLIDATABLE);
            changed = true;
            done.consolidatable.push((name.clone(), false));
        }
        Consolidatable::Absent | Consolidatable::At(_) => {}
    }
    if !changed {
        return Ok(());
    }
    let patch = json!({
        "metadata": {"resourceVersion": claim.resource_version()},
        "status": {"conditions": status.conditions},
    });
    ctx.patch_claim_status(&name, patch).await
}

/// Runs [`reconcile`] every `drift_poll` while leading.
pub async fn run<P: CloudProvider>(
    ctx: Arc<Context<P>>,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let mut checks = Checks::default();
    let lm = ctx.metrics.runtime.controller("nodeclaim.disruption", 1);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(ctx.options.drift_poll) => {}
        }
        if !ctx.is_leader() {
            continue;
        }
        let started = tokio::time::Instant::now();
        let result = reconcile(&ctx, &mut checks).await;
        lm.singleton_pass(started.elapsed());
        ctx.metrics
            .reconciled("nodeclaim.disruption", result.is_ok());
        match result {
            Ok(_) | Err(Error::NotSynced(_)) => {}
            Err(e) => tracing::warn!(error = %e, "drift"),
        }
    }
}
