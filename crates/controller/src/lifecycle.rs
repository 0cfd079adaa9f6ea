//! The NodeClaim lifecycle, as upstream's `nodeclaim/lifecycle`: finalizer first, then launch
//! through the cloud provider, registration when the Node appears (labels, taints, finalizer,
//! owner, the `karpenter.sh/unregistered` taint removed), initialization once the Node is
//! Ready without startup or ephemeral taints, the launch and registration timeouts,
//! expiration, and on deletion: the Node first, then the instance, then the finalizer.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use karpenter_api::NodeClaim;
use karpenter_api::labels::{
    INSTANCE_TYPE_LABEL, NODE_CLAIM_TERMINATION_TIMESTAMP_ANNOTATION,
    NODE_DO_NOT_SYNC_TAINTS_LABEL, NODE_INITIALIZED_LABEL, NODE_POOL_LABEL, NODE_REGISTERED_LABEL,
    TERMINATION_FINALIZER, UNREGISTERED_TAINT_KEY, node_class_label_key,
};
use karpenter_api::nodeclaim::condition::{
    INITIALIZED, INSTANCE_TERMINATING, LAUNCHED, READY, REGISTERED,
};
use karpenter_api::nodeoverlay::CAPACITY_OVERLAY_HASH_ANNOTATION;
use karpenter_core::resources::Resources;
use kube::api::DeleteParams;
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::cloudprovider::{CloudProvider, CloudProviderError};
use crate::conditions;
use crate::events::catalog;
use crate::state::Cluster;
use crate::writes::{allow_missing_write, without_finalizer};
use crate::{Context, Error, queue};

/// Upstream's `LaunchTimeout`.
pub const LAUNCH_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// Upstream's `registrationTimeout`.
pub const REGISTRATION_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// The `Registered` condition's reason while registration hooks wait (upstream's).
const REGISTRATION_HOOK_PENDING: &str = "RegistrationHookPending";

/// Launch results by NodeClaim UID, so a claim whose status write was lost (a conflict, a
/// restart of the watch) is not launched twice.
#[derive(Default)]
pub struct LaunchCache(Mutex<HashMap<String, NodeClaim>>);

impl LaunchCache {
    fn get(&self, uid: &str) -> Option<NodeClaim> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(uid)
            .cloned()
    }

    fn put(&self, uid: &str, claim: NodeClaim) {
        let mut cache = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() > 10_000 {
            cache.clear();
        }
        cache.insert(uid.to_string(), claim);
    }
}

fn since(t: Option<&Time>, now: Timestamp) -> Duration {
    t.map(|t| now.duration_since(t.0))
        .and_then(|d| Duration::try_from(d).ok())
        .unwrap_or_default()
}

fn has_finalizer<K: Resource>(obj: &K) -> bool {
    obj.meta()
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == TERMINATION_FINALIZER))
}

fn nodepool_of(claim: &NodeClaim) -> String {
    claim
        .labels()
        .get(NODE_POOL_LABEL)
        .cloned()
        .unwrap_or_default()
}

/// Known taints a node carries while it starts (upstream's ephemeral taints).
pub fn is_ephemeral_taint(t: &Taint) -> bool {
    matches!(
        (t.key.as_str(), t.effect.as_str()),
        ("node.kubernetes.io/not-ready", "NoSchedule" | "NoExecute")
            | ("node.kubernetes.io/unreachable", "NoSchedule")
            | (
                "node.cloudprovider.kubernetes.io/uninitialized",
                "NoSchedule"
            )
            | (UNREGISTERED_TAINT_KEY, "NoExecute")
    ) || t.key.starts_with("readiness.k8s.io/")
}

fn same_taint(a: &Taint, b: &Taint) -> bool {
    a.key == b.key && a.effect == b.effect
}

/// The dependents of a NodeClaim's `Ready` condition (upstream's `NewReadyConditions`).
pub const READY_DEPENDENTS: [&str; 3] = [LAUNCHED, REGISTERED, INITIALIZED];

/// What an unset condition reads until its controller looks (operatorpkg's `SetUnknown`).
const AWAITING: (&str, &str) = (
    "AwaitingReconciliation",
    "object is awaiting reconciliation",
);

/// The conditions the lifecycle decides.
fn is_lifecycle_condition(type_: &str) -> bool {
    type_ == READY || type_ == INSTANCE_TERMINATING || READY_DEPENDENTS.contains(&type_)
}

/// Whether a lifecycle condition was decided for an older generation of the claim.
fn stale_generation(claim: &NodeClaim) -> bool {
    claim.status.as_ref().is_some_and(|s| {
        s.conditions.iter().any(|c| {
            is_lifecycle_condition(&c.type_) && c.observed_generation != claim.metadata.generation
        })
    })
}

/// Writes `status`, its `Ready` condition recomputed from its dependents first.
async fn patch_status<P: CloudProvider>(
    ctx: &Context<P>,
    claim: &NodeClaim,
    status: &karpenter_api::NodeClaimStatus,
) -> Result<(), Error> {
    let mut status = status.clone();
    for dependent in READY_DEPENDENTS {
        if conditions::get(&status.conditions, dependent).is_none() {
            conditions::set(
                &mut status.conditions,
                dependent,
                "Unknown",
                AWAITING.0,
                AWAITING.1,
                ctx.clock.now(),
            );
        }
    }
    conditions::set_root(
        &mut status.conditions,
        READY,
        &READY_DEPENDENTS,
        ctx.clock.now(),
    );
    // Upstream's conditions record the generation of the NodeClaim they were decided for.
    for c in status
        .conditions
        .iter_mut()
        .filter(|c| is_lifecycle_condition(&c.type_))
    {
        c.observed_generation = claim.metadata.generation;
    }
    let patch =
        json!({"metadata": {"resourceVersion": claim.resource_version()}, "status": status});
    ctx.patch_claim_status(&claim.name_any(), patch).await
}

async fn delete_claim<P: CloudProvider>(
    ctx: &Context<P>,
    claim: &NodeClaim,
    reason: &str,
) -> Result<(), Error> {
    let params = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: claim.uid(),
            resource_version: None,
        }),
        ..Default::default()
    };
    ctx.delete_claim(&claim.name_any(), &params).await?;
    // Upstream counts the pods a disruption moves for expiration, not for launch failures.
    let pods = (reason == "expired").then(|| {
        let node = claim.status.as_ref().and_then(|s| s.node_name.clone());
        node.map(|n| ctx.cluster.pods_on(&n)).unwrap_or_default()
    });
    ctx.metrics.disrupted(claim, reason, "", pods.as_deref());
    tracing::info!(nodeclaim = %claim.name_any(), reason, "deleting nodeclaim");
    Ok(())
}

/// One pass over one NodeClaim. `Some(after)`: look at it again within `after` (a
/// registration hook asked to), whatever else happens.
pub async fn reconcile<P: CloudProvider>(
    ctx: &Context<P>,
    claim: &NodeClaim,
) -> Result<Option<Duration>, Error> {
    let now = ctx.clock.now();
    if claim.metadata.deletion_timestamp.is_some() {
        return finalize(ctx, claim, now).await.map(|()| None);
    }
    if !has_finalizer(claim) {
        // Never launch an instance the controller could not clean up.
        let mut finalizers = claim.finalizers().to_vec();
        finalizers.push(TERMINATION_FINALIZER.into());
        let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": claim.resource_version()}});
        return ctx
            .patch_claim(&claim.name_any(), patch)
            .await
            .map(|()| None);
    }
    // Upstream's hydration: a NodeClaim made before it carried its NodeClass's label gets it.
    let class = &claim.spec.node_class_ref;
    let class_label = node_class_label_key(&class.group, &class.kind);
    if !class.group.is_empty() && claim.labels().get(&class_label) != Some(&class.name) {
        let patch = json!({"metadata": {"labels": {class_label: class.name}}});
        return ctx
            .patch_claim(&claim.name_any(), patch)
            .await
            .map(|()| None);
    }
    let status = claim.status.clone().unwrap_or_default();
    if status.provider_id.is_none() {
        return launch(ctx, claim, now).await.map(|()| None);
    }
    if karpenter_core::round::expired_at(claim, now).is_some() {
        return delete_claim(ctx, claim, "expired").await.map(|()| None);
    }
    if !conditions::is_true(&status.conditions, REGISTERED) {
        return register(ctx, claim, now).await;
    }
    if !conditions::is_true(&status.conditions, INITIALIZED) {
        return initialize(ctx, claim, now).await.map(|()| None);
    }
    if stale_generation(claim) {
        return patch_status(ctx, claim, &status).await.map(|()| None);
    }
    Ok(None)
}

async fn launch<P: CloudProvider>(
    ctx: &Context<P>,
    claim: &NodeClaim,
    now: Timestamp,
) -> Result<(), Error> {
    // Upstream times the launch from the `Launched` condition's transition (the first failed
    // attempt), not from the claim's creation.
    let launching_since = claim
        .status
        .as_ref()
        .and_then(|s| conditions::get(&s.conditions, LAUNCHED))
        .map(|c| &c.last_transition_time)
        .or(claim.metadata.creation_timestamp.as_ref());
    if since(launching_since, now) >= ctx.options.launch_timeout {
        return delete_claim(ctx, claim, "launch_timeout").await;
    }
    let uid = claim.uid().unwrap_or_default();
    let launched = match ctx.launches.get(&uid) {
        Some(l) => l,
        None => {
            let result = ctx.call("create", ctx.provider.create(claim)).await;
            match result {
                Ok(l) => {
                    ctx.launches.put(&uid, l.clone());
                    l
                }
                Err(
                    e @ (CloudProviderError::InsufficientCapacity(_)
                    | CloudProviderError::NodeClassNotReady(_)),
                ) => {
                    let (name, uid) = (claim.name_any(), uid.clone());
                    let (note, metric_reason) =
                        if matches!(e, CloudProviderError::InsufficientCapacity(_)) {
                            let note = catalog::insufficient_capacity(&name, &uid, &e.to_string());
                            (note, "insufficient_capacity")
                        } else {
                            let note = catalog::node_class_not_ready(&name, &uid, &e.to_string());
                            (note, "nodeclass_not_ready")
                        };
                    ctx.recorder.publish(claim, note).await;
                    return delete_claim(ctx, claim, metric_reason).await;
                }
                Err(e) => {
                    let mut status = claim.status.clone().unwrap_or_default();
                    // A provider that names the failure (upstream's CreateError) gets its
                    // reason and message on the condition as it gave them.
                    let (reason, message) = match &e {
                        CloudProviderError::Create { reason, cause } => {
                            (reason.as_str(), cause.message().to_string())
                        }
                        other => ("LaunchFailed", other.to_string()),
                    };
                    let message = match &e {
                        CloudProviderError::Create { .. } => message,
                        _ => catalog::truncate(&message),
                    };
                    if conditions::set(
                        &mut status.conditions,
                        LAUNCHED,
                        "Unknown",
                        reason,
                        &message,
                        now,
                    ) {
                        patch_status(ctx, claim, &status).await?;
                    }
                    return Err(Error::Cloud(e));
                }
            }
        }
    };
    // Labels the instance has (zone, instance type, capacity type, …) join the claim's.
    // So do the provider's annotations (the NodeClass hash its drift check compares).
    let mut claim_labels: BTreeMap<String, String> = launched.labels().clone();
    claim_labels.extend(claim.labels().clone());
    let mut claim_annotations: BTreeMap<String, String> = claim.annotations().clone();
    claim_annotations.extend(launched.annotations().clone());
    if let Some(hash) = overlay_capacity_hash(ctx, claim, &claim_labels) {
        claim_annotations.insert(CAPACITY_OVERLAY_HASH_ANNOTATION.into(), hash);
    }
    if claim_labels != *claim.labels() || claim_annotations != *claim.annotations() {
        let patch = json!({"metadata": {"labels": claim_labels, "annotations": claim_annotations}});
        ctx.patch_claim(&claim.name_any(), patch).await?;
    }
    let claim = ctx
        .cluster
        .node_claims
        .get(&claim.name_any())
        .unwrap_or_else(|| Arc::new(claim.clone()));
    let from = launched.status.clone().unwrap_or_default();
    let mut status = claim.status.clone().unwrap_or_default();
    status.provider_id = from.provider_id;
    status.image_id = from.image_id;
    status.capacity = from.capacity;
    status.allocatable = from.allocatable;
    conditions::set(&mut status.conditions, LAUNCHED, "True", LAUNCHED, "", now);
    conditions::set(
        &mut status.conditions,
        REGISTERED,
        "Unknown",
        "NodeNotFound",
        "Node not registered with cluster",
        now,
    );
    patch_status(ctx, &claim, &status).await?;
    tracing::info!(nodeclaim = %claim.name_any(), provider_id = ?status.provider_id, "launched nodeclaim");
    Ok(())
}

/// What capacity overlays gave the launched instance type, recorded so overlay drift can tell
/// when they change it (gate `NodeOverlay`; nothing for a type no capacity overlay touches,
/// nor while the claim's NodePool has not been evaluated, as after a restart before the first
/// provisioning round).
fn overlay_capacity_hash<P: CloudProvider>(
    ctx: &Context<P>,
    claim: &NodeClaim,
    labels: &BTreeMap<String, String>,
) -> Option<String> {
    if !ctx.options.feature_gates.node_overlay {
        return None;
    }
    let pool = claim.labels().get(NODE_POOL_LABEL)?;
    let instance_type = labels.get(INSTANCE_TYPE_LABEL)?;
    ctx.overlays
        .evaluation(pool)?
        .capacity_record(pool, instance_type)
}

async fn register<P: CloudProvider>(
    ctx: &Context<P>,
    claim: &NodeClaim,
    now: Timestamp,
) -> Result<Option<Duration>, Error> {
    let status = claim.status.clone().unwrap_or_default();
    let provider_id = status.provider_id.clone().unwrap_or_default();
    let Some(node) = ctx.cluster.node_for_provider_id(&provider_id) else {
        let launched_at =
            conditions::get(&status.conditions, LAUNCHED).map(|c| &c.last_transition_time);
        if since(launched_at, now) >= ctx.options.registration_timeout {
            record_registration(ctx, claim, false);
            return delete_claim(ctx, claim, "registration_timeout")
                .await
                .map(|()| None);
        }
        return Ok(None);
    };
    let node_name = node.name_any();
    let hooks = registration_hooks(ctx, claim).await;
    if !hooks.waiting.is_empty() {
        // Liveness counts from the launch whatever registration waits for, a hook that
        // keeps failing included.
        let launched_at =
            conditions::get(&status.conditions, LAUNCHED).map(|c| &c.last_transition_time);
        if since(launched_at, now) >= ctx.options.registration_timeout {
            record_registration(ctx, claim, false);
            return delete_claim(ctx, claim, "registration_timeout")
                .await
                .map(|()| None);
        }
    }
    // Labels a hook resolved go onto the claim first; the next pass syncs them to the Node.
    if hooks
        .labels
        .iter()
        .any(|(k, v)| claim.labels().get(k) != Some(v))
    {
        let patch = json!({"metadata": {"labels": hooks.labels, "resourceVersion": claim.resource_version()}});
        return ctx
            .patch_claim(&claim.name_any(), patch)
            .await
            .map(|()| None);
    }
    // Told once per registration: while hooks wait, the passes after the first see the
    // condition they left.
    let first_attempt = conditions::get(&status.conditions, REGISTERED)
        .is_none_or(|c| c.reason != REGISTRATION_HOOK_PENDING);
    if first_attempt
        && !node.labels().contains_key(NODE_REGISTERED_LABEL)
        && !node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|t| {
                t.iter()
                    .any(|t| t.key == UNREGISTERED_TAINT_KEY && t.effect == "NoExecute")
            })
    {
        tracing::error!(nodeclaim = %claim.name_any(), node = %node_name, taint = UNREGISTERED_TAINT_KEY, "node claim registration error: missing taint prevents registration-related race conditions on Karpenter-managed nodes");
        let uid = claim.uid().unwrap_or_default();
        ctx.recorder
            .publish(claim, catalog::unregistered_taint_missing(&uid))
            .await;
    }
    // The NodeClaim's annotations (its NodePool template's, and the provider's) join the
    // Node's, the claim's winning, as upstream's registration syncs them.
    let mut annotations = node.annotations().clone();
    annotations.extend(claim.annotations().clone());
    let mut labels = node.labels().clone();
    labels.extend(claim.labels().clone());
    let registering = hooks.waiting.is_empty();
    if registering {
        labels.insert(NODE_REGISTERED_LABEL.into(), "true".into());
    }
    let mut taints: Vec<Taint> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let sync_taints = node
        .labels()
        .get(NODE_DO_NOT_SYNC_TAINTS_LABEL)
        .is_none_or(|v| v != "true");
    if sync_taints {
        for t in claim.spec.taints.iter().chain(&claim.spec.startup_taints) {
            if !taints.iter().any(|have| same_taint(have, t)) {
                taints.push(t.clone());
            }
        }
    }
    // Until every hook is ready the Node keeps the taint that holds pods off it.
    if registering {
        taints.retain(|t| t.key != UNREGISTERED_TAINT_KEY);
    }
    let mut finalizers = node.finalizers().to_vec();
    if !finalizers.iter().any(|f| f == TERMINATION_FINALIZER) {
        finalizers.push(TERMINATION_FINALIZER.into());
    }
    let mut owners = node.owner_references().to_vec();
    if !owners.iter().any(|o| Some(&o.uid) == claim.uid().as_ref()) {
        owners.push(OwnerReference {
            api_version: NodeClaim::api_version(&()).into_owned(),
            kind: NodeClaim::kind(&()).into_owned(),
            name: claim.name_any(),
            uid: claim.uid().unwrap_or_default(),
            block_owner_deletion: Some(true),
            controller: None,
        });
    }
    let patch = json!({
        "metadata": {"labels": labels, "annotations": annotations, "finalizers": finalizers, "ownerReferences": owners, "resourceVersion": node.resource_version()},
        "spec": {"taints": taints},
    });
    ctx.patch_node(&node_name, patch).await?;
    if !registering {
        let mut status = status;
        conditions::set(
            &mut status.conditions,
            REGISTERED,
            "Unknown",
            REGISTRATION_HOOK_PENDING,
            &hooks.waiting.join(", "),
            now,
        );
        patch_status(ctx, claim, &status).await?;
        tracing::debug!(nodeclaim = %claim.name_any(), hooks = %hooks.waiting.join(", "), "awaiting registration hooks");
        return hooks
            .failure
            .map_or(Ok(hooks.look_again), |e| Err(Error::Cloud(e)));
    }
    let mut status = status;
    status.node_name = Some(node_name.clone());
    conditions::set(
        &mut status.conditions,
        REGISTERED,
        "True",
        REGISTERED,
        "",
        now,
    );
    patch_status(ctx, claim, &status).await?;
    record_registration(ctx, claim, true);
    ctx.metrics.node_created(claim);
    tracing::info!(nodeclaim = %claim.name_any(), node = %node_name, "registered nodeclaim");
    Ok(None)
}

/// What the provider's registration hooks said of a claim.
struct Hooks {
    /// The hooks not ready (or failing), by name.
    waiting: Vec<String>,
    /// The labels they resolved.
    labels: std::collections::BTreeMap<String, String>,
    /// The first failure.
    failure: Option<CloudProviderError>,
    /// The soonest a waiting hook asked to be asked again.
    look_again: Option<Duration>,
}

/// Asks every registration hook of the provider about `claim`, all at once.
async fn registration_hooks<P: CloudProvider>(ctx: &Context<P>, claim: &NodeClaim) -> Hooks {
    let hooks = ctx.provider.registration_hooks();
    let answers = futures::future::join_all(hooks.iter().map(|h| h.registered(claim))).await;
    let mut out = Hooks {
        waiting: Vec::new(),
        labels: Default::default(),
        failure: None,
        look_again: None,
    };
    for (hook, answer) in hooks.iter().zip(answers) {
        match answer {
            Ok(result) => {
                out.labels.extend(result.labels);
                if let Some(after) = result.pending {
                    out.waiting.push(hook.name().to_string());
                    if let Some(after) = after {
                        out.look_again = Some(out.look_again.map_or(after, |t| t.min(after)));
                    }
                }
            }
            Err(e) => {
                tracing::warn!(nodeclaim = %claim.name_any(), hook = hook.name(), error = %e, "registration hook failed");
                out.waiting.push(hook.name().to_string());
                out.failure.get_or_insert(e);
            }
        }
    }
    out
}

/// Seconds from `t` to `now`.
fn since_secs(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time, now: Timestamp) -> f64 {
    now.duration_since(t.0).as_secs_f64()
}

/// Tells the NodePool's registration health whether the claim's node registered in time.
fn record_registration<P>(ctx: &Context<P>, claim: &NodeClaim, registered: bool) {
    if let Some(uid) = ctx
        .cluster
        .node_pools
        .get(&nodepool_of(claim))
        .and_then(|pool| pool.metadata.uid.clone())
    {
        ctx.registration_health.record(&uid, registered);
    }
}

/// A taint as upstream's messages print it: `key=value:effect`, or `key:effect`.
pub fn format_taint(t: &Taint) -> String {
    match t.value.as_deref() {
        Some(v) if !v.is_empty() => format!("{}={v}:{}", t.key, t.effect),
        _ => format!("{}:{}", t.key, t.effect),
    }
}

/// Why a registered node is not initialized yet, in upstream's reasons.
pub fn not_initialized(claim: &NodeClaim, node: &Node) -> Option<(&'static str, String)> {
    if !karpenter_core::state::node_ready(node) {
        return Some(("NodeNotReady", "Node status is NotReady".into()));
    }
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    if let Some(t) = taints
        .iter()
        .find(|t| claim.spec.startup_taints.iter().any(|s| same_taint(s, t)))
    {
        return Some((
            "StartupTaintsExist",
            format!("StartupTaint \"{}\" still exists", format_taint(t)),
        ));
    }
    if let Some(t) = taints.iter().find(|t| is_ephemeral_taint(t)) {
        return Some((
            "KnownEphemeralTaintsExist",
            format!("KnownEphemeralTaint \"{}\" still exists", format_taint(t)),
        ));
    }
    let requested = Resources::from_list(&claim.spec.resources.requests).unwrap_or_default();
    let allocatable = node
        .status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .and_then(|a| Resources::from_list(a).ok())
        .unwrap_or_default();
    for (name, quantity) in requested.iter() {
        let extended = !matches!(name, "cpu" | "memory" | "pods" | "ephemeral-storage");
        if extended && quantity > 0 && allocatable.get(name) == 0 {
            return Some((
                "ResourceNotRegistered",
                format!("Resource \"{name}\" was requested but not registered"),
            ));
        }
    }
    None
}

/// Why a node whose NodeClaim was given devices is not initialized: a requested driver has
/// not published its devices on it yet (upstream's `DRADriverPoolsNotPublished`).
pub fn drivers_not_published(
    claim: &NodeClaim,
    node: &Node,
    slices: &[Arc<karpenter_api::dra::ResourceSlice>],
) -> Option<(&'static str, String)> {
    use karpenter_core::scheduling::dynamic_resources::{
        REQUESTED_DRA_DRIVERS_ANNOTATION, unpublished_drivers,
    };
    let requested = claim
        .metadata
        .annotations
        .as_ref()?
        .get(REQUESTED_DRA_DRIVERS_ANNOTATION)?;
    let missing = unpublished_drivers(requested, &node.name_any(), slices);
    (!missing.is_empty()).then(|| {
        (
            "DRADriverPoolsNotPublished",
            format!(
                "DRA driver(s) {} have not published complete resource pools on the node",
                missing.join(", ")
            ),
        )
    })
}

async fn initialize<P: CloudProvider>(
    ctx: &Context<P>,
    claim: &NodeClaim,
    now: Timestamp,
) -> Result<(), Error> {
    let mut status = claim.status.clone().unwrap_or_default();
    let Some(node) = status
        .provider_id
        .as_deref()
        .and_then(|id| ctx.cluster.node_for_provider_id(id))
    else {
        if conditions::set(
            &mut status.conditions,
            INITIALIZED,
            "Unknown",
            "NodeNotFound",
            "Node not registered with cluster",
            now,
        ) {
            patch_status(ctx, claim, &status).await?;
        }
        return Ok(());
    };
    let waiting = not_initialized(claim, &node).or_else(|| {
        (!ctx.options.ignore_dra_requests)
            .then(|| drivers_not_published(claim, &node, &ctx.cluster.resource_slices.all()))
            .flatten()
    });
    if let Some((reason, message)) = waiting {
        if conditions::set(
            &mut status.conditions,
            INITIALIZED,
            "Unknown",
            reason,
            &message,
            now,
        ) {
            patch_status(ctx, claim, &status).await?;
        }
        return Ok(());
    }
    let patch = json!({"metadata": {"labels": {NODE_INITIALIZED_LABEL: "true"}}});
    ctx.patch_node(&node.name_any(), patch).await?;
    conditions::set(
        &mut status.conditions,
        INITIALIZED,
        "True",
        INITIALIZED,
        "",
        now,
    );
    patch_status(ctx, claim, &status).await?;
    tracing::info!(nodeclaim = %claim.name_any(), node = %node.name_any(), "initialized nodeclaim");
    Ok(())
}

async fn finalize<P: CloudProvider>(
    ctx: &Context<P>,
    claim: &NodeClaim,
    now: Timestamp,
) -> Result<(), Error> {
    if !has_finalizer(claim) {
        return Ok(());
    }
    if let (Some(tgp), Some(deleted)) = (
        claim.spec.termination_grace_period,
        claim.metadata.deletion_timestamp.as_ref(),
    ) && !claim
        .annotations()
        .contains_key(NODE_CLAIM_TERMINATION_TIMESTAMP_ANNOTATION)
    {
        let deadline = deleted
            .0
            .saturating_add(SignedDuration::try_from(tgp.0).unwrap_or(SignedDuration::MAX))
            .unwrap_or(deleted.0);
        let at = deadline.to_string();
        let patch =
            json!({"metadata": {"annotations": {NODE_CLAIM_TERMINATION_TIMESTAMP_ANNOTATION: at}}});
        ctx.patch_claim(&claim.name_any(), patch).await?;
        tracing::info!(nodeclaim = %claim.name_any(), termination_timestamp = %at, "annotated nodeclaim");
        ctx.recorder
            .publish(
                claim,
                catalog::termination_grace_period_expiring(&claim.name_any(), &at),
            )
            .await;
        return Ok(());
    }
    let status = claim.status.clone().unwrap_or_default();
    if let Some(provider_id) = status.provider_id.as_deref() {
        if let Some(node) = ctx.cluster.node_for_provider_id(provider_id) {
            // The Node's own finalizer drains it; the instance goes once the Node is gone.
            if node.metadata.deletion_timestamp.is_none() {
                ctx.delete_node(&node.name_any()).await?;
            }
            return Ok(());
        }
        match ctx.call("delete", ctx.provider.delete(claim)).await {
            Err(CloudProviderError::NotFound(_)) => {
                // The instance is gone: time it from the first deletion that took.
                if let Some(c) = status
                    .conditions
                    .iter()
                    .find(|c| c.type_ == INSTANCE_TERMINATING)
                {
                    ctx.metrics
                        .nodeclaims_instance_termination_duration
                        .with(&[&nodepool_of(claim)])
                        .observe(since_secs(&c.last_transition_time, now));
                }
            }
            Ok(()) => {
                let mut status = status.clone();
                if conditions::set(
                    &mut status.conditions,
                    INSTANCE_TERMINATING,
                    "True",
                    INSTANCE_TERMINATING,
                    "",
                    now,
                ) {
                    patch_status(ctx, claim, &status).await?;
                }
                return Ok(());
            }
            Err(e) => return Err(Error::Cloud(e)),
        }
    }
    allow_missing_write(
        ctx.patch_claim(&claim.name_any(), without_finalizer(claim))
            .await,
    )?;
    ctx.metrics.nodeclaim_terminated(claim);
    let status = &ctx.metrics.status;
    status.terminated(
        &status.node_claims,
        &crate::metrics::status::StatusObject::of_node_claim(claim),
        now,
    );
    if let Some(deleted) = &claim.metadata.deletion_timestamp {
        ctx.metrics
            .nodeclaims_termination_duration
            .with(&[&nodepool_of(claim)])
            .observe(since_secs(deleted, now));
    }
    tracing::info!(nodeclaim = %claim.name_any(), "deleted nodeclaim");
    Ok(())
}

/// Runs the lifecycle, one NodeClaim at a time, until `shutdown`: a claim is looked at when it
/// or its Node changes, every `resync` until it is initialized (or while it is being deleted),
/// and then at its expiration or every [`IDLE_RESYNC`], whichever comes first.
pub async fn run<P: CloudProvider>(
    ctx: Arc<Context<P>>,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let nodes = queue::Related {
        changes: ctx.cluster.nodes.subscribe(),
        keys: claims_of_node,
    };
    queue::run(
        ctx,
        shutdown,
        "nodeclaim.lifecycle",
        |c| &c.node_claims,
        vec![nodes],
        |ctx, claim| async move {
            let hint = reconcile(&ctx, &claim).await?;
            let next = next_look(&ctx.options, &claim, ctx.clock.now());
            Ok(Some(hint.map_or(next, |h| h.min(next))))
        },
    )
    .await
}

/// How often a settled NodeClaim is looked at regardless of events.
pub const IDLE_RESYNC: Duration = Duration::from_secs(5 * 60);

/// The NodeClaims a change of the Node named `node` concerns: its claim by providerID, or, once
/// the Node is gone, the claims that registered it.
pub(crate) fn claims_of_node(cluster: &Cluster, node: &str) -> Vec<String> {
    let by_provider_id = cluster
        .nodes
        .get(node)
        .and_then(|n| n.spec.as_ref()?.provider_id.clone())
        .and_then(|id| cluster.node_claim_for_provider_id(&id));
    match by_provider_id {
        Some(claim) => vec![claim.name_any()],
        None => cluster
            .node_claims
            .all()
            .iter()
            .filter(|c| c.status.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
            .map(|c| c.name_any())
            .collect(),
    }
}

/// When a claim reconciled successfully at `now` needs looking at again.
fn next_look(options: &crate::Options, claim: &NodeClaim, now: Timestamp) -> Duration {
    let settled = claim.metadata.deletion_timestamp.is_none()
        && claim
            .status
            .as_ref()
            .is_some_and(|s| conditions::is_true(&s.conditions, INITIALIZED));
    if !settled {
        return options.resync;
    }
    let expires_in =
        claim.spec.expire_after.0.map(|after| {
            after.saturating_sub(since(claim.metadata.creation_timestamp.as_ref(), now))
        });
    expires_in.map_or(IDLE_RESYNC, |left| left.min(IDLE_RESYNC))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Upstream's expiration suite, "should return the requeue interval for the time between
    /// now and when the nodeClaim expires": an initialized claim is looked at again when it
    /// expires (at most every 5 minutes); one still starting, every resync.
    #[test]
    fn a_settled_claim_is_looked_at_again_when_it_expires() {
        let options = crate::Options::default();
        let created = Timestamp::from_second(1_000_000).unwrap();
        let claim = |expire_after: &str, initialized: bool| -> NodeClaim {
            serde_json::from_value(json!({
                "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                "metadata": {"name": "c", "creationTimestamp": created.to_string()},
                "spec": {"nodeClassRef": {"group": "g", "kind": "K", "name": "n"}, "requirements": [],
                    "expireAfter": expire_after},
                "status": {"conditions": [{"type": "Initialized", "status": if initialized { "True" } else { "Unknown" },
                    "reason": "Initialized", "message": "", "lastTransitionTime": created.to_string()}]},
            }))
            .unwrap()
        };
        let now = created + Duration::from_secs(50);
        let cases = [
            (
                "expires in 150 s",
                claim("200s", true),
                Duration::from_secs(150),
            ),
            (
                "expires in an hour: the idle resync",
                claim("1h", true),
                IDLE_RESYNC,
            ),
            ("never expires", claim("Never", true), IDLE_RESYNC),
            ("not initialized", claim("200s", false), options.resync),
        ];
        for (case, claim, expected) in cases {
            assert_eq!(next_look(&options, &claim, now), expected, "{case}");
        }
    }

    #[test]
    fn taints_print_as_upstreams_messages() {
        let taint = |key: &str, value: Option<&str>, effect: &str| Taint {
            key: key.into(),
            value: value.map(str::to_string),
            effect: effect.into(),
            time_added: None,
        };
        assert_eq!(
            format_taint(&taint("example.com/boot", Some("pending"), "NoSchedule")),
            "example.com/boot=pending:NoSchedule"
        );
        assert_eq!(
            format_taint(&taint("node.kubernetes.io/not-ready", None, "NoExecute")),
            "node.kubernetes.io/not-ready:NoExecute"
        );
    }
}
