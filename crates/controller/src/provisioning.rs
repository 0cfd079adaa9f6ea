//! The provisioner: pods the kube-scheduler could not place are batched (1 s idle, 10 s at
//! most), the scheduling simulation decides which fit on nodes that exist or are launching and
//! which need new NodeClaims, and those NodeClaims are created.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use karpenter_api::labels::{
    HOSTNAME_LABEL, NODE_INITIALIZED_LABEL, NODE_POOL_HASH_ANNOTATION,
    NODE_POOL_HASH_VERSION_ANNOTATION, NODE_POOL_LABEL,
};
use karpenter_api::nodeclaim::ResourceRequirements;
use karpenter_api::{NodeClaim, NodeClaimSpec, NodePool};
use karpenter_core::provisioning::scheduling::{
    ExistingNodeInput, NewNodeClaim, NodePoolInput, Scheduler, SchedulerOptions,
};
use karpenter_core::resources::Resources;
use karpenter_core::scheduling::requirements::node_claim_labels;
use kube::api::PostParams;
use kube::{Api, Resource};

use crate::cloudprovider::CloudProvider;
use crate::events::{Note, normal, warning};
use crate::metrics::labels;
use crate::state::StoredPod;
use crate::{Context, Error, pods};

/// Upstream's budget for one simulation; what is decided by then is kept.
const SOLVE_TIMEOUT: Duration = Duration::from_secs(60);
/// A pod still pending this long after it was batched triggers again.
const RETRIGGER: Duration = Duration::from_secs(10);

/// Upstream's batcher: a window opens with the first new pod, stays open while pods keep
/// arriving within `idle` of each other, and closes after `max` regardless.
#[derive(Debug)]
pub struct Batcher {
    idle: Duration,
    max: Duration,
    window: Option<(Instant, Instant)>,
    triggered: HashMap<String, Instant>,
}

impl Batcher {
    /// A batcher with the given idle and maximum durations.
    pub fn new(idle: Duration, max: Duration) -> Self {
        Self {
            idle,
            max,
            window: None,
            triggered: HashMap::new(),
        }
    }

    /// Takes the provisionable pods seen `now` (by UID); returns true when a batch is due.
    pub fn observe<'a>(&mut self, now: Instant, pods: impl IntoIterator<Item = &'a str>) -> bool {
        let mut current = HashSet::new();
        for uid in pods {
            current.insert(uid);
            let due = self
                .triggered
                .get(uid)
                .is_none_or(|at| now.duration_since(*at) >= RETRIGGER);
            if due {
                self.triggered.insert(uid.to_string(), now);
                let (start, _) = self.window.unwrap_or((now, now));
                self.window = Some((start, now));
            }
        }
        self.triggered
            .retain(|uid, _| current.contains(uid.as_str()));
        match self.window {
            Some((start, last))
                if now.duration_since(last) >= self.idle
                    || now.duration_since(start) >= self.max =>
            {
                self.window = None;
                true
            }
            _ => false,
        }
    }

    /// Runs the next batch as soon as possible (state was not ready for this one).
    pub fn retry(&mut self, now: Instant) {
        self.window = Some((now - self.max, now - self.idle));
    }
}

/// What one provisioning round did.
#[derive(Debug, Default, PartialEq)]
pub struct Provisioned {
    /// Names of the NodeClaims created.
    pub node_claims: Vec<String>,
    /// Pods the simulation placed on nodes that exist or are launching.
    pub nominated: usize,
    /// Pods that fit nowhere.
    pub unschedulable: usize,
}

fn is_managed_node(node: &Node) -> bool {
    node.metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(NODE_POOL_LABEL))
}

pub(crate) fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The nodes pods may go to (including NodeClaims still launching), and the pods of nodes
/// being deleted, which need a place too. `provider_labels` are the labels a launching
/// claim's instance will decide.
fn existing_nodes(
    cluster: &crate::state::Cluster,
    provider_labels: &[String],
) -> (Vec<ExistingNodeInput>, Vec<Arc<StoredPod>>) {
    let mut inputs = Vec::new();
    let mut displaced = Vec::new();
    let mut with_node = HashSet::new();
    let claims_by_provider_id = cluster.node_claims_by_provider_id();
    let mut pods_by_node = cluster.pods_by_node();
    for node in cluster.nodes.all() {
        let name = node.metadata.name.clone().unwrap_or_default();
        let claim = node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .and_then(|id| claims_by_provider_id.get(id));
        if let Some(c) = claim {
            with_node.insert(c.metadata.name.clone().unwrap_or_default());
        }
        let mut pods = pods_by_node.remove(&name).unwrap_or_default();
        pods.retain(|p| !pods::is_terminal(p));
        let deleting = node.metadata.deletion_timestamp.is_some()
            || claim.is_some_and(|c| c.metadata.deletion_timestamp.is_some());
        if deleting {
            displaced.extend(pods.into_iter().filter(|p| pods::is_reschedulable(p)));
            continue;
        }
        let labels = node.metadata.labels.clone().unwrap_or_default();
        let initialized = if is_managed_node(&node) {
            labels
                .get(NODE_INITIALIZED_LABEL)
                .is_some_and(|v| v == "true")
        } else {
            node_ready(&node)
        };
        let status = node.status.clone().unwrap_or_default();
        inputs.push(ExistingNodeInput {
            name,
            node_pool: labels.get(NODE_POOL_LABEL).cloned(),
            labels,
            taints: node
                .spec
                .as_ref()
                .and_then(|s| s.taints.clone())
                .unwrap_or_default(),
            startup_taints: claim
                .map(|c| c.spec.startup_taints.clone())
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
            pods: pods
                .iter()
                .filter_map(|p| p.bound())
                .map(Arc::new)
                .collect(),
            initialized,
        });
    }
    for claim in cluster.node_claims.all() {
        let name = claim.metadata.name.clone().unwrap_or_default();
        if with_node.contains(&name) || claim.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let Some(status) = claim.status.as_ref().filter(|s| s.provider_id.is_some()) else {
            continue;
        };
        let mut labels = node_claim_labels(&claim, provider_labels);
        labels
            .entry(HOSTNAME_LABEL.into())
            .or_insert_with(|| name.clone());
        inputs.push(ExistingNodeInput {
            name,
            node_pool: labels.get(NODE_POOL_LABEL).cloned(),
            labels,
            taints: claim.spec.taints.clone(),
            startup_taints: claim.spec.startup_taints.clone(),
            allocatable: Resources::from_list(&status.allocatable).unwrap_or_default(),
            capacity: Resources::from_list(&status.capacity).unwrap_or_default(),
            pods: Vec::new(),
            initialized: false,
        });
    }
    (inputs, displaced)
}

/// DaemonSet pods as they would start on a new node.
pub(crate) fn daemonset_pods(cluster: &crate::state::Cluster) -> Vec<Pod> {
    cluster
        .daemonsets
        .all()
        .iter()
        .filter_map(|ds| {
            let template = ds.spec.as_ref()?.template.clone();
            let mut pod = Pod {
                metadata: template.metadata.unwrap_or_default(),
                spec: template.spec,
                status: None,
            };
            pod.metadata.namespace = ds.metadata.namespace.clone();
            pod.metadata.owner_references = Some(vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "DaemonSet".into(),
                name: ds.metadata.name.clone().unwrap_or_default(),
                uid: ds.metadata.uid.clone().unwrap_or_default(),
                ..Default::default()
            }]);
            Some(pod)
        })
        .collect()
}

/// The NodeClaim object for a simulated claim.
pub fn node_claim_for(claim: &NewNodeClaim, pool: &NodePool) -> NodeClaim {
    let template = &pool.spec.template;
    let mut labels = template.metadata.labels.clone();
    labels.extend(claim.labels.clone());
    labels.insert(NODE_POOL_LABEL.into(), pool.name().to_string());
    // The hash the claim is made under: static drift compares it with the NodePool's.
    let mut annotations = template.metadata.annotations.clone();
    annotations.insert(NODE_POOL_HASH_ANNOTATION.into(), pool.hash());
    annotations.insert(
        NODE_POOL_HASH_VERSION_ANNOTATION.into(),
        karpenter_api::hash::NODE_POOL_HASH_VERSION.into(),
    );
    NodeClaim {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-", pool.name())),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: Some(vec![OwnerReference {
                api_version: NodePool::api_version(&()).into_owned(),
                kind: NodePool::kind(&()).into_owned(),
                name: pool.name().to_string(),
                uid: pool.metadata.uid.clone().unwrap_or_default(),
                block_owner_deletion: Some(true),
                controller: None,
            }]),
            ..Default::default()
        },
        spec: NodeClaimSpec {
            taints: claim.taints.clone(),
            startup_taints: claim.startup_taints.clone(),
            requirements: claim
                .node_claim_requirements()
                .iter()
                .flat_map(|r| r.to_node_selector_requirements())
                .collect(),
            resources: ResourceRequirements {
                requests: claim.requests.to_list(),
            },
            node_class_ref: template.spec.node_class_ref.clone(),
            termination_grace_period: template.spec.termination_grace_period,
            expire_after: template.spec.expire_after,
        },
        status: None,
    }
}

/// The NodePools the provisioner may use, each with its instance types, and the same by name.
pub(crate) async fn pool_inputs<P: CloudProvider>(
    ctx: &Context<P>,
) -> (Vec<NodePoolInput>, HashMap<String, Arc<NodePool>>) {
    let cluster = &ctx.cluster;
    let mut pools = Vec::new();
    let mut by_name = HashMap::new();
    for pool in cluster.node_pools.all() {
        if pool.metadata.deletion_timestamp.is_some() || !pools::usable(&pool) {
            continue;
        }
        match ctx.provider.instance_types(&pool).await {
            Ok(types) if !types.is_empty() => {
                by_name.insert(pool.name().to_string(), pool.clone());
                pools.push(NodePoolInput {
                    node_pool: (*pool).clone(),
                    instance_types: types,
                });
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(nodepool = pool.name(), error = %e, "skipping nodepool, no instance types")
            }
        }
    }
    (pools, by_name)
}

/// One provisioning round over the current state.
pub async fn provision<P: CloudProvider>(ctx: &Context<P>) -> Result<Provisioned, Error> {
    let cluster = &ctx.cluster;
    if !cluster.synced() {
        return Err(Error::NotSynced(
            "cluster state has not listed every kind yet".into(),
        ));
    }
    if let Some(c) = cluster.node_claims.all().iter().find(|c| {
        c.metadata.deletion_timestamp.is_none()
            && c.status
                .as_ref()
                .and_then(|s| s.provider_id.as_ref())
                .is_none()
    }) {
        return Err(Error::NotSynced(format!(
            "nodeclaim {} is not launched yet",
            c.metadata.name.as_deref().unwrap_or_default()
        )));
    }
    let (pools, by_name) = pool_inputs(ctx).await;
    let (existing, displaced) = existing_nodes(cluster, &ctx.provider.provider_labels());
    let mut stored: Vec<Arc<StoredPod>> = cluster
        .pods
        .all()
        .into_iter()
        .filter(|p| pods::is_provisionable(p))
        .collect();
    stored.sort_by(|a, b| {
        a.metadata
            .creation_timestamp
            .cmp(&b.metadata.creation_timestamp)
    });
    stored.extend(displaced);
    // Whole pods only for the batch: the scheduler reads their affinities and spread.
    let batch: Vec<Pod> = stored.iter().map(|p| p.to_pod()).collect();
    if batch.is_empty() {
        return Ok(Provisioned::default());
    }
    let options = SchedulerOptions {
        respect_preferences: ctx.options.preference_policy == "Respect",
        strict_min_values: ctx.options.min_values_policy == "Strict",
        provider_labels: ctx.provider.provider_labels(),
        ..Default::default()
    };
    let started = Instant::now();
    let results = Scheduler::new(&pools, &existing, &daemonset_pods(cluster), options)
        .solve(&batch, &|| started.elapsed() > SOLVE_TIMEOUT);
    ctx.metrics
        .scheduling_duration
        .get_or_create(&labels(&[("controller", "provisioner")]))
        .observe(started.elapsed().as_secs_f64());
    ctx.metrics
        .unschedulable_pods
        .get_or_create(&labels(&[("controller", "provisioner")]))
        .set(results.pod_errors.len() as i64);
    tracing::info!(
        pods = batch.len(),
        nodeclaims = results.new_node_claims.len(),
        nominated = results.existing_nodes.values().map(Vec::len).sum::<usize>(),
        unschedulable = results.pod_errors.len(),
        duration = ?started.elapsed(),
        "computed new nodeclaim(s) to fit pod(s)"
    );
    for (i, reason) in &results.pod_errors {
        let note = Note {
            dedupe: Duration::from_secs(300),
            ..warning(
                "FailedScheduling",
                format!("Failed to schedule pod, {reason}"),
            )
        };
        ctx.recorder.publish_to(stored[*i].reference(), note).await;
    }
    // Upstream's window: twice the longest batch, at least 10 s.
    let window = (ctx.options.batch_max_duration * 2).max(Duration::from_secs(10));
    for (node, pods) in &results.existing_nodes {
        if !pods.is_empty() {
            ctx.cluster.nominations.nominate(node, window);
        }
        for &i in pods {
            let note = Note {
                rate_limited: true,
                ..normal("Nominated", format!("Pod should schedule on: node/{node}"))
            };
            ctx.recorder.publish_to(stored[i].reference(), note).await;
        }
    }
    let api: Api<NodeClaim> = Api::all(ctx.client.clone());
    let mut created = Vec::new();
    // One failed create does not hold back the others (upstream creates them all and reports
    // the errors together); the pods of a failed one are provisioned again next round.
    let mut failed: Option<kube::Error> = None;
    for claim in &results.new_node_claims {
        let Some(pool) = by_name.get(&claim.node_pool) else {
            continue;
        };
        let object = node_claim_for(claim, pool);
        let made = match api.create(&PostParams::default(), &object).await {
            Ok(made) => made,
            Err(e) => {
                tracing::error!(nodepool = %claim.node_pool, error = %e, "creating nodeclaim");
                failed.get_or_insert(e);
                continue;
            }
        };
        let name = made.metadata.name.clone().unwrap_or_default();
        ctx.cluster.node_claims.apply(made);
        ctx.metrics
            .nodeclaims_created
            .get_or_create(&labels(&[
                ("reason", "provisioned"),
                ("nodepool", &claim.node_pool),
                ("min_values_relaxed", "false"),
            ]))
            .inc();
        for &i in &claim.pods {
            let note = Note {
                rate_limited: true,
                ..normal(
                    "Nominated",
                    format!("Pod should schedule on: nodeclaim/{name}"),
                )
            };
            ctx.recorder.publish_to(stored[i].reference(), note).await;
        }
        tracing::info!(nodeclaim = %name, nodepool = %claim.node_pool, pods = claim.pods.len(), "created nodeclaim");
        created.push(name);
    }
    if let Some(e) = failed {
        return Err(Error::Kube(e));
    }
    Ok(Provisioned {
        node_claims: created,
        nominated: results.existing_nodes.values().map(Vec::len).sum(),
        unschedulable: results.pod_errors.len(),
    })
}

/// Runs the provisioner until `shutdown`.
pub async fn run<P: CloudProvider>(
    ctx: Arc<Context<P>>,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let mut batcher = Batcher::new(
        ctx.options.batch_idle_duration,
        ctx.options.batch_max_duration,
    );
    let mut changes = ctx.cluster.subscribe();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = changes.changed() => {}
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
        if !ctx.is_leader() {
            continue;
        }
        let pending: Vec<String> = ctx
            .cluster
            .pods
            .all()
            .iter()
            .filter(|p| pods::is_provisionable(p))
            .filter_map(|p| p.metadata.uid.clone())
            .collect();
        if !batcher.observe(Instant::now(), pending.iter().map(String::as_str)) {
            continue;
        }
        match provision(&ctx).await {
            Ok(_) => {}
            Err(Error::NotSynced(why)) => {
                tracing::debug!(reason = %why, "waiting for cluster state before provisioning");
                batcher.retry(Instant::now());
            }
            Err(e) => {
                tracing::error!(error = %e, "provisioning failed, retrying");
                batcher.retry(Instant::now());
            }
        }
    }
}

/// Which NodePools the provisioner uses.
mod pools {
    use karpenter_api::NodePool;
    use karpenter_api::nodepool::condition::READY;

    /// A NodePool is used unless its status says it is not Ready (the status is set by the
    /// NodePool readiness controller; one that has not run yet does not block launches).
    pub fn usable(pool: &NodePool) -> bool {
        pool.spec.replicas.is_none()
            && pool
                .status
                .as_ref()
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == READY))
                .is_none_or(|c| c.status == "True")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_batch_closes_after_idle_or_max() {
        let t0 = Instant::now();
        let mut b = Batcher::new(ms(1000), ms(10_000));
        assert!(!b.observe(t0, ["a"]), "the window opens");
        assert!(
            !b.observe(t0 + ms(900), ["a", "b"]),
            "b arrives within idle"
        );
        assert!(!b.observe(t0 + ms(1500), ["a", "b"]), "idle counts from b");
        assert!(b.observe(t0 + ms(1900), ["a", "b"]), "1s after b");
        assert!(
            !b.observe(t0 + ms(2000), ["a", "b"]),
            "already batched pods do not reopen it"
        );
        // A steady stream closes at max.
        let mut b = Batcher::new(ms(1000), ms(10_000));
        let mut closed_at = None;
        for i in 0..200u64 {
            let uids: Vec<String> = (0..=i).map(|n| format!("p{n}")).collect();
            if b.observe(t0 + ms(i * 100), uids.iter().map(String::as_str)) {
                closed_at = Some(i * 100);
                break;
            }
        }
        assert_eq!(closed_at, Some(10_000));
    }

    #[test]
    fn pending_pods_trigger_again_after_ten_seconds() {
        let t0 = Instant::now();
        let mut b = Batcher::new(ms(1000), ms(10_000));
        b.observe(t0, ["a"]);
        assert!(b.observe(t0 + ms(1000), ["a"]));
        assert!(!b.observe(t0 + ms(5000), ["a"]));
        assert!(
            !b.observe(t0 + ms(11_000), ["a"]),
            "re-triggered, window open"
        );
        assert!(b.observe(t0 + ms(12_000), ["a"]));
    }

    #[test]
    fn a_retry_runs_on_the_next_observation() {
        let t0 = Instant::now() + ms(20_000);
        let mut b = Batcher::new(ms(1000), ms(10_000));
        b.retry(t0);
        assert!(b.observe(t0 + ms(100), std::iter::empty()));
    }
}
