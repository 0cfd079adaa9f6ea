//! Node termination, as upstream's `node/termination`: a deleted Node keeps the
//! `karpenter.sh/termination` finalizer until it is tainted `karpenter.sh/disrupted`, drained
//! through the Eviction API (non-critical pods first, DaemonSet pods after the others,
//! critical ones last; PodDisruptionBudgets answered with 429 are retried), empty for the
//! minimum drain time, its volumes have detached, and its instance is gone. Past the
//! NodeClaim's terminationGracePeriod, pods are deleted regardless and volumes not waited for.
//! A NotReady node whose instance is already gone is let go at once. Evictions and deletions
//! carry the pod's UID (a pod re-created under the same name is not touched), and a pod whose
//! eviction is refused is retried with its own backoff (upstream's eviction queue: 100 ms
//! doubling to 10 s), not on every pass. Its NodeClaim's `Drained`, `VolumesDetached` and
//! `InstanceTerminating` conditions say how far it got, as upstream's do.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use k8s_openapi::jiff::Timestamp;
use karpenter_api::NodeClaim;
use karpenter_api::labels::{
    DISRUPTED_TAINT_KEY, EXCLUDE_FROM_LOAD_BALANCERS_LABEL,
    NODE_CLAIM_TERMINATION_TIMESTAMP_ANNOTATION, NODE_POOL_LABEL, TERMINATION_FINALIZER,
    ZONE_LABEL,
};
use karpenter_api::nodeclaim::condition::{
    DISRUPTION_REASON, DRAINED, INSTANCE_TERMINATING, VOLUMES_DETACHED,
};
use karpenter_core::termination::{self, DrainStep, disrupted_taint};
use kube::api::{DeleteParams, PostParams, Preconditions};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::cloudprovider::{CloudProvider, CloudProviderError};
use crate::events::catalog;
use crate::state::StoredPod;
use crate::writes::{allow_missing_write, without_finalizer};
use crate::{Context, Error, conditions, queue};

/// The first retry of a refused eviction; each further refusal doubles it (upstream's).
const EVICTION_BACKOFF_BASE: Duration = Duration::from_millis(100);
/// The longest wait between evictions of one pod.
const EVICTION_BACKOFF_MAX: Duration = Duration::from_secs(10);

/// Refused evictions by pod UID: when the pod may be tried again, and how many times in a row
/// it was refused.
#[derive(Default)]
pub struct EvictionBackoff(Mutex<HashMap<String, (Instant, u32)>>);

impl EvictionBackoff {
    fn due(&self, uid: &str, now: Instant) -> bool {
        self.lock().get(uid).is_none_or(|(at, _)| *at <= now)
    }

    /// Records a refusal; returns the wait before the next try.
    fn refused(&self, uid: &str, now: Instant) -> Duration {
        let mut map = self.lock();
        // Pods that went another way (deleted at the grace period, their node gone) are not
        // forgotten one by one: drop what has not been retried for a minute.
        if map.len() > 4096 {
            map.retain(|_, (at, _)| *at + Duration::from_secs(60) > now);
        }
        let (at, n) = map.entry(uid.to_string()).or_insert((now, 0));
        let delay = queue::backoff(EVICTION_BACKOFF_BASE, EVICTION_BACKOFF_MAX, *n);
        *n = n.saturating_add(1);
        *at = now + delay;
        delay
    }

    fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, u32)>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn uid_precondition(pod: &StoredPod) -> Option<Preconditions> {
    Some(Preconditions {
        uid: pod.metadata.uid.clone(),
        resource_version: None,
    })
}

/// When each node's drain came up empty, to hold it for the minimum drain time.
#[derive(Default)]
pub struct DrainClock(Mutex<HashMap<String, Instant>>);

impl DrainClock {
    /// When the node's drain first came up empty; `now` if this is the first time.
    fn empty_since(&self, node: &str, now: Instant) -> Instant {
        *self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(node.to_string())
            .or_insert(now)
    }

    fn reset(&self, node: &str) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(node);
    }
}

fn termination_deadline(claim: Option<&NodeClaim>) -> Option<Timestamp> {
    claim?
        .annotations()
        .get(NODE_CLAIM_TERMINATION_TIMESTAMP_ANNOTATION)?
        .parse()
        .ok()
}

/// Sets a condition of the NodeClaim `claim` (as state has it now) the way upstream's
/// termination reports its progress on it: `Drained`, `VolumesDetached`,
/// `InstanceTerminating`. A lost race is retried on the next pass. Returns whether the
/// condition changed.
async fn report<P: CloudProvider>(
    ctx: &Context<P>,
    claim: Option<&str>,
    type_: &str,
    status: &str,
    reason: &str,
) -> Result<bool, Error> {
    let Some(claim) = claim.and_then(|name| ctx.cluster.node_claims.get(name)) else {
        return Ok(false);
    };
    let mut list = claim.status.clone().unwrap_or_default().conditions;
    let message = if status == "True" { "" } else { reason };
    if !conditions::set(&mut list, type_, status, reason, message, ctx.clock.now()) {
        return Ok(false);
    }
    for c in list.iter_mut().filter(|c| c.type_ == type_) {
        c.observed_generation = claim.metadata.generation;
    }
    let patch = json!({"metadata": {"resourceVersion": claim.resource_version()}, "status": {"conditions": list}});
    allow_missing_write(ctx.patch_claim_status(&claim.name_any(), patch).await)?;
    Ok(true)
}

/// One pass over a deleting Node.
pub async fn reconcile<P: CloudProvider>(ctx: &Context<P>, node: &Node) -> Result<(), Error> {
    let provider_id = node
        .spec
        .as_ref()
        .and_then(|s| s.provider_id.clone())
        .unwrap_or_default();
    // State keeps only this provider's NodeClaims, so a claim found is ours even where the
    // Node lacks its NodeClass label (registered before the label was hydrated).
    let claim = ctx.cluster.node_claim_for_provider_id(&provider_id);
    // Another Karpenter's node (another provider's NodeClass) is its to drain.
    if claim.is_none() && !ctx.provider.manages_node(node) {
        return Ok(());
    }
    let now = ctx.clock.now();
    let name = node.name_any();
    if let Some(c) = claim
        .as_ref()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
    {
        ctx.delete_claim(&c.name_any(), &DeleteParams::default())
            .await?;
    }
    // Nothing runs on a NotReady node whose instance is gone: nothing to drain or wait for.
    if !karpenter_core::state::node_ready(node)
        && !provider_id.is_empty()
        && matches!(
            ctx.call("get", ctx.provider.get(&provider_id)).await,
            Err(CloudProviderError::NotFound(_))
        )
    {
        tracing::info!(node = %name, "instance already gone, removing the finalizer");
        return finish(ctx, node).await;
    }
    let taints: Vec<Taint> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    if !taints
        .iter()
        .any(|t| t.key == DISRUPTED_TAINT_KEY && t.effect == "NoSchedule")
    {
        let mut taints: Vec<Taint> = taints
            .into_iter()
            .filter(|t| t.key != DISRUPTED_TAINT_KEY)
            .collect();
        taints.push(disrupted_taint());
        let patch = json!({
            "metadata": {"labels": {EXCLUDE_FROM_LOAD_BALANCERS_LABEL: "karpenter"}, "resourceVersion": node.resource_version()},
            "spec": {"taints": taints},
        });
        return ctx.patch_node(&name, patch).await;
    }
    let deadline = termination_deadline(claim.as_deref());
    let claim_name = claim.as_deref().map(|c| c.name_any());
    let claim_name = claim_name.as_deref();
    let drained = claim
        .as_deref()
        .and_then(|c| c.status.as_ref())
        .and_then(|s| conditions::get(&s.conditions, DRAINED))
        .is_some();
    if !drained {
        report(ctx, claim_name, DRAINED, "Unknown", "Draining").await?;
    }
    if let Some(at) = claim.as_deref().and_then(|c| {
        c.annotations()
            .get(NODE_CLAIM_TERMINATION_TIMESTAMP_ANNOTATION)
    }) {
        ctx.recorder
            .publish(node, catalog::termination_grace_period_expiring(&name, at))
            .await;
    }
    let on_node = ctx.cluster.pods_on(&name);
    let on_node: Vec<&StoredPod> = on_node.iter().map(|p| &**p).collect();
    let step = termination::drain_step(&on_node, deadline, now);
    if step.waiting > 0 {
        ctx.drains.reset(&name);
        let waiting = step.waiting;
        drain(ctx, node, step, deadline, now).await;
        let why = format!("{waiting} pods are waiting to be evicted");
        ctx.recorder
            .publish(node, catalog::failed_draining(&name, &why))
            .await;
        return Ok(());
    }
    let now_instant = ctx.clock.instant();
    if now_instant.duration_since(ctx.drains.empty_since(&name, now_instant))
        < ctx.options.min_drain_time
    {
        return Ok(());
    }
    // Upstream counts a node drained once, when its NodeClaim says so.
    if report(ctx, claim_name, DRAINED, "True", DRAINED).await? {
        let pool = node
            .labels()
            .get(NODE_POOL_LABEL)
            .cloned()
            .unwrap_or_default();
        ctx.metrics.nodes_drained.with(&[&pool]).inc();
    }
    {
        let attachments = ctx.cluster.volume_attachments.by_secondary_key(&name);
        let volume_of = |namespace: &str, claim: &str| {
            ctx.cluster
                .volume_claims
                .get(&format!("{namespace}/{claim}"))
                .and_then(|c| c.spec.as_ref()?.volume_name.clone())
        };
        let blocking = termination::blocking_attachments(
            attachments.iter().map(|a| &**a),
            &on_node,
            volume_of,
            now,
        );
        if blocking.is_empty() {
            report(ctx, claim_name, VOLUMES_DETACHED, "True", VOLUMES_DETACHED).await?;
        } else if deadline.is_some_and(|d| now >= d) {
            // Past the terminationGracePeriod the instance goes with its volumes attached.
            let why = "TerminationGracePeriodElapsed";
            report(ctx, claim_name, VOLUMES_DETACHED, "False", why).await?;
        } else {
            report(
                ctx,
                claim_name,
                VOLUMES_DETACHED,
                "Unknown",
                "AwaitingVolumeDetachment",
            )
            .await?;
            let names: Vec<String> = blocking
                .iter()
                .map(|a| a.metadata.name.clone().unwrap_or_default())
                .collect();
            ctx.recorder
                .publish(node, catalog::awaiting_volume_detachment(&name, &names))
                .await;
            return Ok(());
        }
    }
    if let Some(claim) = claim.as_deref() {
        let deleted = match ctx.call("delete", ctx.provider.delete(claim)).await {
            Err(CloudProviderError::NotFound(_)) => true,
            Ok(()) => false,
            Err(e) => return Err(Error::Cloud(e)),
        };
        let terminating = INSTANCE_TERMINATING;
        report(ctx, claim_name, terminating, "True", terminating).await?;
        if !deleted {
            return Ok(());
        }
    }
    finish(ctx, node).await
}

/// Lets the node go: its finalizer removed, counted as terminated.
async fn finish<P: CloudProvider>(ctx: &Context<P>, node: &Node) -> Result<(), Error> {
    let name = node.name_any();
    allow_missing_write(ctx.patch_node(&name, without_finalizer(node)).await)?;
    ctx.drains.reset(&name);
    let label = |k: &str| node.labels().get(k).cloned().unwrap_or_default();
    let (pool, zone) = (label(NODE_POOL_LABEL), label(ZONE_LABEL));
    let m = &ctx.metrics;
    m.nodes_terminated.with(&[&pool, &zone]).inc();
    let now = ctx.clock.now();
    let since = |t: &Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
        t.as_ref().map(|t| now.duration_since(t.0).as_secs_f64())
    };
    if let Some(s) = since(&node.metadata.deletion_timestamp) {
        m.nodes_termination_duration.with(&[&pool]).observe(s);
    }
    if let Some(s) = since(&node.metadata.creation_timestamp) {
        m.nodes_lifetime_duration.with(&[&pool]).observe(s);
    }
    m.status.terminated(
        &m.status.nodes,
        &crate::metrics::status::StatusObject::of_node(node),
        now,
    );
    tracing::info!(node = %name, "deleted node");
    Ok(())
}

/// `karpenter_pods_drained_total`'s reason, as upstream labels a drained pod: the reason
/// of its node's NodeClaim's `DisruptionReason` condition, or "Forceful Termination".
fn eviction_reason<P: CloudProvider>(ctx: &Context<P>, node: &Node) -> String {
    let Some(claim) = node
        .spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .and_then(|id| ctx.cluster.node_claim_for_provider_id(id))
    else {
        return String::new();
    };
    claim
        .status
        .as_ref()
        .and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == DISRUPTION_REASON && c.status == "True")
        })
        .map_or("Forceful Termination".into(), |c| c.reason.clone())
}

/// A time as Go prints a UTC `time.Time` with `%v` (upstream's `Disrupted` message).
fn go_time(at: Timestamp) -> String {
    at.strftime("%Y-%m-%d %H:%M:%S +0000 UTC").to_string()
}

fn pod_name(pod: &StoredPod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

async fn drain<P: CloudProvider>(
    ctx: &Context<P>,
    node: &Node,
    step: DrainStep<'_, StoredPod>,
    deadline: Option<Timestamp>,
    now: Timestamp,
) {
    for pod in &step.delete {
        let api: Api<Pod> = Api::namespaced(
            ctx.client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or("default"),
        );
        let grace = deadline.map_or(1, |d| (d.as_second() - now.as_second()).max(1)) as u32;
        let params = DeleteParams {
            grace_period_seconds: Some(grace),
            preconditions: uid_precondition(pod),
            ..Default::default()
        };
        if api.delete(&pod_name(pod), &params).await.is_ok() {
            let note = catalog::disrupted_pod_delete(
                &pod_name(pod),
                &deadline.map(go_time).unwrap_or_default(),
                i64::from(grace),
                pod.spec.spec.termination_grace_period_seconds.unwrap_or(0),
            );
            ctx.recorder.publish_to(pod.reference(), note).await;
            ctx.metrics
                .pods_drained
                .with(&[&eviction_reason(ctx, node)])
                .inc();
        }
    }
    let now_instant = ctx.clock.instant();
    for pod in step.evict {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if !ctx.evictions.due(&uid, now_instant) {
            continue;
        }
        let api: Api<Pod> = Api::namespaced(
            ctx.client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or("default"),
        );
        // The Eviction is written out here: kube's `Api::evict` sends its delete options as
        // `delete_options`, a field the API server ignores, which would drop the UID
        // precondition that keeps a pod re-created under the same name from being evicted.
        let eviction = json!({
            "apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": pod_name(pod), "namespace": pod.metadata.namespace},
            "deleteOptions": {"preconditions": uid_precondition(pod)},
        });
        let result = api
            .create_subresource::<_, serde_json::Value>(
                "eviction",
                &pod_name(pod),
                &PostParams::default(),
                &eviction,
            )
            .await;
        // Evicted, or gone (404) or replaced (409): done with it; anything else is retried.
        let refused = match &result {
            Ok(_) => false,
            Err(kube::Error::Api(e)) => e.code != 404 && e.code != 409,
            Err(_) => true,
        };
        if refused {
            ctx.evictions.refused(&uid, now_instant);
        } else {
            ctx.evictions.forget(&uid);
        }
        // Upstream counts the answers the API server gave, not failures to reach it.
        let code = match &result {
            Ok(_) => Some(200),
            Err(kube::Error::Api(e)) => Some(e.code),
            Err(_) => None,
        };
        if let Some(code) = code {
            ctx.metrics
                .pods_eviction_requests
                .with(&[&code.to_string()])
                .inc();
        }
        match result {
            Ok(_) => {
                let reason = eviction_reason(ctx, node);
                ctx.recorder
                    .publish_to(pod.reference(), catalog::evicted(&pod_name(pod), &reason))
                    .await;
                ctx.metrics.pods_drained.with(&[&reason]).inc();
            }
            Err(kube::Error::Api(e)) if e.code == 429 => {
                let why = format!("evicting pod violates a PDB (Pod={})", pod.key());
                ctx.recorder
                    .publish(node, catalog::failed_draining(&node.name_any(), &why))
                    .await;
            }
            Err(kube::Error::Api(e)) if e.message.contains("more than one PodDisruptionBudget") => {
                let why = format!(
                    "eviction does not support multiple PDBs (Pod={})",
                    pod.key()
                );
                ctx.recorder
                    .publish(node, catalog::failed_draining(&node.name_any(), &why))
                    .await;
            }
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            Err(e) => {
                tracing::warn!(pod = %pod.key(), error = %e, "eviction failed, retrying")
            }
        }
    }
}

/// Runs termination, one Node at a time, until `shutdown`: a deleting Node with the
/// termination finalizer is looked at again every `resync` while its drain goes on.
pub async fn run<P: CloudProvider>(
    ctx: Arc<Context<P>>,
    shutdown: tokio_util::sync::CancellationToken,
) {
    queue::run(
        ctx,
        shutdown,
        "node.termination",
        |c| &c.nodes,
        Vec::new(),
        |ctx, node| async move {
            let terminating = node.metadata.deletion_timestamp.is_some()
                && node.finalizers().iter().any(|f| f == TERMINATION_FINALIZER);
            if !terminating {
                return Ok(None);
            }
            reconcile(&ctx, &node).await?;
            Ok(Some(ctx.options.resync))
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn times_print_as_gos_time_does() {
        // 2026-01-01T00:10:00Z, as upstream's `Disrupted` message prints the node's deadline.
        assert_eq!(
            go_time(Timestamp::from_second(1_767_226_200).unwrap()),
            "2026-01-01 00:10:00 +0000 UTC"
        );
    }

    fn pod(name: &str, critical: bool, daemonset: bool) -> StoredPod {
        stored(raw(name, critical, daemonset))
    }

    fn stored(p: Pod) -> StoredPod {
        StoredPod::new(p, &crate::state::SpecInterner::default())
    }

    fn raw(name: &str, critical: bool, daemonset: bool) -> Pod {
        let mut p: Pod =
            serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"containers": []}}))
                .unwrap();
        if critical {
            p.spec.as_mut().unwrap().priority_class_name = Some("system-node-critical".into());
        }
        if daemonset {
            p.metadata.owner_references = Some(vec![
                serde_json::from_value(
                    json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "u"}),
                )
                .unwrap(),
            ]);
        }
        p
    }

    #[test]
    fn refused_evictions_back_off_per_pod_up_to_ten_seconds() {
        let backoff = EvictionBackoff::default();
        let t0 = Instant::now();
        let delays: Vec<u128> = (0..9)
            .map(|_| backoff.refused("a", t0).as_millis())
            .collect();
        assert_eq!(
            delays,
            [100, 200, 400, 800, 1600, 3200, 6400, 10_000, 10_000]
        );
        assert!(!backoff.due("a", t0 + Duration::from_secs(9)));
        assert!(backoff.due("a", t0 + Duration::from_secs(10)));
        assert!(backoff.due("b", t0), "each pod has its own");
        backoff.forget("a");
        assert_eq!(backoff.refused("a", t0), EVICTION_BACKOFF_BASE);
    }

    /// The drain reads what state keeps of a pod (its trimmed spec): priority class, owner,
    /// tolerations and grace period survive the trim.
    #[test]
    fn the_drain_order_holds_for_pods_as_state_keeps_them() {
        let all = [
            pod("crit-ds", true, true),
            pod("crit", true, false),
            pod("ds", false, true),
            pod("app", false, false),
        ];
        let mut remaining: Vec<&StoredPod> = all.iter().collect();
        let mut order = Vec::new();
        while !remaining.is_empty() {
            let group: Vec<String> =
                termination::drain_step(&remaining, None, Timestamp::UNIX_EPOCH)
                    .evict
                    .iter()
                    .map(|p| pod_name(p))
                    .collect();
            remaining.retain(|p| !group.contains(&pod_name(p)));
            order.push(group);
        }
        assert_eq!(order, [["app"], ["ds"], ["crit"], ["crit-ds"]]);
        let mut tolerant = raw("t", false, false);
        tolerant.spec.as_mut().unwrap().tolerations = Some(vec![
            serde_json::from_value(json!({"operator": "Exists"})).unwrap(),
        ]);
        let mut short = raw("s", false, false);
        short
            .spec
            .as_mut()
            .unwrap()
            .termination_grace_period_seconds = Some(5);
        let (tolerant, short) = (stored(tolerant), stored(short));
        let step = termination::drain_step(
            &[&tolerant, &short],
            Some(Timestamp::from_second(100).unwrap()),
            Timestamp::from_second(90).unwrap(),
        );
        assert_eq!(
            step.waiting, 1,
            "a pod tolerating everything is not waited for"
        );
        assert!(
            step.delete.is_empty(),
            "5 s of grace still fit before the deadline"
        );
    }
}
