//! NodePool status, as upstream's nodepool controllers keep it (counter, readiness, validation
//! and registration health): what the NodePool's nodes hold (`resources`, `nodes`), whether its
//! NodeClass is ready (`NodeClassReady`), whether it passes runtime validation
//! (`ValidationSucceeded`), and `Ready` over the two — which the provisioner reads before it
//! launches from a NodePool — and whether its nodes register (`NodeRegistrationHealthy`, from
//! the last launches the lifecycle reported to [`RegistrationHealth`]; back to `Unknown`
//! whenever the NodePool or its NodeClass changes, as upstream resets it).
//!
//! [`usage`], [`status`] and [`RegistrationHealth`] are pure; [`run`] is the loop writing the
//! status, its only writer.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::jiff::Timestamp;
use karpenter_api::labels::NODE_POOL_LABEL;
use karpenter_api::nodepool::NodePoolStatus;
use karpenter_api::nodepool::condition::{
    NODE_CLASS_READY, NODE_REGISTRATION_HEALTHY, VALIDATION_SUCCEEDED,
};
use karpenter_api::validation::runtime::validate_node_pool;
use karpenter_api::{NodeClaim, NodePool};
use karpenter_cloudprovider::NodeClassReadiness;
use karpenter_cloudprovider::conditions::ConditionSet;
use karpenter_core::resources::Resources;

/// The resources every NodePool's status lists, zero when it has no nodes (upstream's
/// `BaseResources`).
pub const BASE_RESOURCES: [&str; 5] = ["cpu", "ephemeral-storage", "memory", "nodes", "pods"];

/// The parts `Ready` summarises (upstream's: registration health is reported beside them).
const READY_DEPENDENTS: [&str; 2] = [VALIDATION_SUCCEEDED, NODE_CLASS_READY];

/// What a NodePool's nodes hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// The sum of their capacities.
    pub capacity: Resources,
    /// How many there are.
    pub nodes: i64,
}

/// Each NodePool's [`Usage`], from the cluster's Nodes and NodeClaims, counted as upstream's
/// cluster state counts them: one per instance (a Node and its NodeClaim, paired by
/// providerID, are one), with the Node's capacity once it reports one and the NodeClaim's
/// before; instances being deleted or `marked` for deletion by a disruption do not count.
pub fn usage<'a>(
    nodes: impl IntoIterator<Item = &'a Node>,
    claims: impl IntoIterator<Item = &'a NodeClaim>,
    marked: &BTreeSet<String>,
) -> BTreeMap<String, Usage> {
    let mut out: BTreeMap<String, Usage> = BTreeMap::new();
    let mut claims_by_id: HashMap<&str, &NodeClaim> = HashMap::new();
    let mut loose_claims = Vec::new();
    for claim in claims {
        match claim.status.as_ref().and_then(|s| s.provider_id.as_deref()) {
            Some(id) if !id.is_empty() => {
                claims_by_id.insert(id, claim);
            }
            _ => loose_claims.push(claim),
        }
    }
    let pool_of = |labels: Option<&BTreeMap<String, String>>| {
        labels.and_then(|l| l.get(NODE_POOL_LABEL)).cloned()
    };
    let mut add = |pool: Option<String>, capacity: Option<&BTreeMap<String, Quantity>>| {
        let Some(pool) = pool else { return };
        let entry = out.entry(pool).or_default();
        entry.nodes += 1;
        if let Some(list) = capacity {
            // A quantity the API server admitted always parses.
            if let Ok(r) = Resources::from_list(list) {
                entry.capacity.add(&r);
            }
        }
    };
    for node in nodes {
        let id = node.spec.as_ref().and_then(|s| s.provider_id.as_deref());
        let claim = id.and_then(|id| claims_by_id.remove(id));
        let deleting = node.metadata.deletion_timestamp.is_some()
            || claim.is_some_and(|c| c.metadata.deletion_timestamp.is_some())
            || node
                .metadata
                .name
                .as_ref()
                .is_some_and(|n| marked.contains(n));
        if deleting {
            continue;
        }
        let pool = pool_of(node.metadata.labels.as_ref())
            .or_else(|| claim.and_then(|c| pool_of(c.metadata.labels.as_ref())));
        let node_capacity = node
            .status
            .as_ref()
            .and_then(|s| s.capacity.as_ref())
            .filter(|c| !c.is_empty());
        let capacity =
            node_capacity.or_else(|| claim.and_then(|c| c.status.as_ref().map(|s| &s.capacity)));
        add(pool, capacity);
    }
    for claim in claims_by_id.into_values().chain(loose_claims) {
        if claim.metadata.deletion_timestamp.is_some() {
            continue;
        }
        add(
            pool_of(claim.metadata.labels.as_ref()),
            claim.status.as_ref().map(|s| &s.capacity),
        );
    }
    out
}

/// How many registrations of each NodePool are remembered (upstream's).
pub const REGISTRATION_WINDOW: usize = 4;

/// What a NodePool's recent registrations say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Health {
    /// Nothing recorded since the NodePool or its NodeClass last changed.
    Unknown,
    /// Fewer than half of the window failed.
    Healthy,
    /// Half of the window or more failed to register.
    Unhealthy,
}

/// The outcomes of each NodePool's last [`REGISTRATION_WINDOW`] registrations (upstream's
/// nodepoolhealth state), keyed by the NodePool's uid so a NodePool made again under the same
/// name starts afresh. Kept in memory: after a restart it is seeded from the condition.
#[derive(Debug, Default)]
pub struct RegistrationHealth(std::sync::Mutex<HashMap<String, std::collections::VecDeque<bool>>>);

impl RegistrationHealth {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, std::collections::VecDeque<bool>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records whether a node of the NodePool `uid` registered in time.
    pub fn record(&self, uid: &str, registered: bool) {
        let mut all = self.lock();
        let window = all.entry(uid.to_string()).or_default();
        if window.len() == REGISTRATION_WINDOW {
            window.pop_front();
        }
        window.push_back(registered);
    }

    /// What the window of NodePool `uid` says: unhealthy once failures make half of the whole
    /// window, as upstream counts them.
    pub fn health(&self, uid: &str) -> Health {
        let all = self.lock();
        let Some(window) = all.get(uid).filter(|w| !w.is_empty()) else {
            return Health::Unknown;
        };
        let failed = window.iter().filter(|ok| !**ok).count();
        if failed * 2 >= REGISTRATION_WINDOW {
            Health::Unhealthy
        } else {
            Health::Healthy
        }
    }

    /// Replaces the window of NodePool `uid` with one that says `health` (after a restart, from
    /// the condition; `Unknown` forgets it).
    pub fn set(&self, uid: &str, health: Health) {
        let mut all = self.lock();
        let window = all.entry(uid.to_string()).or_default();
        window.clear();
        match health {
            Health::Unknown => {}
            Health::Healthy => window.push_back(true),
            Health::Unhealthy => window.extend([false; REGISTRATION_WINDOW / 2]),
        }
    }
}

/// Whether `pool`'s `NodeRegistrationHealthy` is to start over: it has none, or it was decided
/// for another generation of the NodePool or of its NodeClass (`class_generation`).
pub fn registration_stale(pool: &NodePool, class_generation: Option<i64>) -> bool {
    let status = pool.status.as_ref();
    status
        .and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == NODE_REGISTRATION_HEALTHY)
        })
        .is_none_or(|c| c.observed_generation != pool.metadata.generation)
        || (class_generation.is_some()
            && status.and_then(|s| s.node_class_observed_generation) != class_generation)
}

/// What was observed of a NodePool's NodeClass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeClassObserved {
    /// What the provider says of it.
    pub readiness: NodeClassReadiness,
    /// It is being deleted.
    pub terminating: bool,
    /// Its generation, when it was read.
    pub generation: Option<i64>,
}

/// The status of `pool` given its nodes' `usage`, its NodeClass (`None`: the provider does
/// not serve the NodeClass's kind, so only resources are kept, as upstream leaves NodePools it
/// does not manage alone) and its recent `registrations`, at `now`.
pub fn status(
    pool: &NodePool,
    usage: Option<&Usage>,
    node_class: Option<&NodeClassObserved>,
    registrations: Health,
    now: Timestamp,
) -> NodePoolStatus {
    let mut out = pool.status.clone().unwrap_or_default();
    let mut resources: BTreeMap<String, Quantity> = BASE_RESOURCES
        .iter()
        .map(|r| (r.to_string(), Quantity("0".into())))
        .collect();
    let nodes = usage.map_or(0, |u| u.nodes);
    if let Some(u) = usage {
        resources.extend(u.capacity.to_list());
    }
    resources.insert("nodes".into(), Quantity(nodes.to_string()));
    out.resources = resources;
    out.nodes = Some(nodes);
    let Some(class) = node_class else {
        return out;
    };
    let created = pool
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(now, |t| t.0);
    let generation = pool.metadata.generation;
    let stale = registration_stale(pool, class.generation);
    if class.generation.is_some() {
        out.node_class_observed_generation = class.generation;
    }
    let mut c = ConditionSet::new(
        &mut out.conditions,
        &READY_DEPENDENTS,
        generation,
        created,
        now,
    );
    let mut problems = Vec::new();
    validate_node_pool(pool, &mut problems);
    if problems.is_empty() {
        c.set_true(VALIDATION_SUCCEEDED);
    } else {
        let message = problems
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        c.set(
            VALIDATION_SUCCEEDED,
            "False",
            "NodePoolValidationFailed",
            &message,
        );
    }
    match (&class.readiness, class.terminating) {
        (NodeClassReadiness::NotFound, _) => c.set(
            NODE_CLASS_READY,
            "False",
            "NodeClassNotFound",
            "NodeClass not found on cluster",
        ),
        (_, true) => c.set(
            NODE_CLASS_READY,
            "False",
            "NodeClassTerminating",
            "NodeClass is Terminating",
        ),
        (NodeClassReadiness::Ready, false) => c.set_true(NODE_CLASS_READY),
        (NodeClassReadiness::NotReady { reason, message }, false) => {
            c.set(NODE_CLASS_READY, "False", reason, message)
        }
    }
    match (stale, registrations) {
        (true, _) => c.set(
            NODE_REGISTRATION_HEALTHY,
            "Unknown",
            "AwaitingReconciliation",
            "object is awaiting reconciliation",
        ),
        (false, Health::Healthy) => c.set_true(NODE_REGISTRATION_HEALTHY),
        (false, Health::Unhealthy) => c.set(
            NODE_REGISTRATION_HEALTHY,
            "False",
            "RegistrationFailed",
            "Failed to register node",
        ),
        (false, Health::Unknown) => {}
    }
    c.finish();
    out
}

pub use run::{RESYNC, run};

/// The loop.
mod run {
    use super::*;
    use karpenter_api::NodeClassReference;
    use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
    use kube::{Api, ResourceExt};
    use tokio_util::sync::CancellationToken;

    use crate::cloudprovider::CloudProvider;
    use crate::state::Cluster;
    use crate::{Context, Error, queue};

    /// How often each NodePool is looked at regardless of events (upstream's counter: 5 s),
    /// so its resources follow nodes coming and going.
    pub const RESYNC: Duration = Duration::from_secs(5);

    async fn observe_node_class<P: CloudProvider>(
        ctx: &Context<P>,
        reference: &NodeClassReference,
    ) -> Result<Option<NodeClassObserved>, Error> {
        let Some(crd) = ctx
            .provider
            .node_classes()
            .iter()
            .find(|c| c.group() == reference.group && c.kind() == reference.kind)
        else {
            return Ok(None);
        };
        let readiness = ctx
            .provider
            .node_class_readiness(reference)
            .await
            .map_err(Error::Cloud)?;
        // The generation and deletion are the object's, whatever the provider's readiness.
        let resource = ApiResource {
            group: crd.group().into(),
            version: crd.version().into(),
            api_version: crd.api_version(),
            kind: crd.kind().into(),
            plural: crd.plural().into(),
        };
        let api: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &resource);
        let object = api.get_opt(&reference.name).await.map_err(Error::Kube)?;
        Ok(Some(NodeClassObserved {
            readiness,
            terminating: object
                .as_ref()
                .is_some_and(|o| o.metadata.deletion_timestamp.is_some()),
            generation: object.and_then(|o| o.metadata.generation),
        }))
    }

    fn pool_usage(cluster: &Cluster) -> BTreeMap<String, Usage> {
        let nodes = cluster.nodes.all();
        let claims = cluster.node_claims.all();
        usage(
            nodes.iter().map(|n| n.as_ref()),
            claims.iter().map(|c| c.as_ref()),
            &cluster.marked_for_deletion(),
        )
    }

    /// What the NodePool's registrations say: after a restart, what its condition said; after a
    /// change of the NodePool or its NodeClass, nothing yet.
    fn registrations<P>(
        ctx: &Context<P>,
        pool: &NodePool,
        class: Option<&NodeClassObserved>,
    ) -> Health {
        let uid = pool.uid().unwrap_or_default();
        let health = &ctx.registration_health;
        let condition = pool.status.as_ref().and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == NODE_REGISTRATION_HEALTHY)
        });
        if registration_stale(pool, class.and_then(|c| c.generation)) {
            // A NodePool without the condition yet has nothing to forget: what its first nodes
            // did is kept for the next pass.
            if condition.is_some() {
                health.set(&uid, Health::Unknown);
            }
            return Health::Unknown;
        }
        if health.health(&uid) == Health::Unknown {
            match condition.map(|c| c.status.as_str()) {
                Some("True") => health.set(&uid, Health::Healthy),
                Some("False") => health.set(&uid, Health::Unhealthy),
                _ => {}
            }
        }
        health.health(&uid)
    }

    async fn reconcile<P: CloudProvider>(ctx: &Context<P>, pool: &NodePool) -> Result<(), Error> {
        let usage = pool_usage(&ctx.cluster);
        let class = observe_node_class(ctx, &pool.spec.template.spec.node_class_ref).await?;
        let registrations = registrations(ctx, pool, class.as_ref());
        let next = status(
            pool,
            usage.get(pool.name()),
            class.as_ref(),
            registrations,
            ctx.clock.now(),
        );
        if pool.status.as_ref() == Some(&next) {
            return Ok(());
        }
        let api: Api<NodePool> = Api::all(ctx.client.clone());
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": pool.resource_version()},
            "status": next,
        });
        match api
            .patch_status(pool.name(), &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(Error::Kube(e)),
        }
    }

    /// Keeps every NodePool's status current while this replica leads: when it changes, and
    /// every [`RESYNC`].
    pub async fn run<P: CloudProvider>(ctx: Arc<Context<P>>, shutdown: CancellationToken) {
        queue::run(
            ctx,
            shutdown,
            "nodepool.status",
            |c| &c.node_pools,
            Vec::new(),
            |ctx, pool| async move {
                reconcile(&ctx, &pool).await?;
                Ok(Some(RESYNC))
            },
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;

    use super::*;

    fn node(name: &str, pool: Option<&str>, id: &str, capacity: serde_json::Value) -> Node {
        let labels = pool
            .map(|p| json!({NODE_POOL_LABEL: p}))
            .unwrap_or(json!({}));
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "spec": {"providerID": id},
            "status": {"capacity": capacity},
        }))
        .unwrap()
    }

    fn claim(name: &str, pool: &str, id: Option<&str>, cpu: &str) -> NodeClaim {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "labels": {NODE_POOL_LABEL: pool}},
            "spec": {"nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}},
            "status": {"providerID": id, "capacity": {"cpu": cpu, "memory": "4Gi", "pods": "110"}},
        }))
        .unwrap()
    }

    fn deleting<T: kube::Resource>(mut o: T) -> T {
        o.meta_mut().deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        o
    }

    #[test]
    fn usage_counts_each_instance_once() {
        let nodes = [
            // Registered, with its claim: the Node's capacity counts.
            node(
                "a",
                Some("web"),
                "kwok://a",
                json!({"cpu": "8", "memory": "32Gi", "pods": "110"}),
            ),
            // Registered without capacity yet: its claim's.
            node("b", Some("web"), "kwok://b", json!({})),
            // Not karpenter's.
            node("static", None, "kwok://static", json!({"cpu": "64"})),
            // Marked for deletion by a disruption command.
            node("c", Some("web"), "kwok://c", json!({"cpu": "2"})),
            // Being deleted.
            deleting(node("d", Some("batch"), "kwok://d", json!({"cpu": "2"}))),
        ];
        let claims = [
            claim("a", "web", Some("kwok://a"), "7"),
            claim("b", "web", Some("kwok://b"), "4"),
            claim("c", "web", Some("kwok://c"), "2"),
            claim("d", "batch", Some("kwok://d"), "2"),
            // Launched, its Node not registered yet.
            claim("e", "batch", Some("kwok://e"), "16"),
            // Not launched yet: counted without capacity until it has one.
            claim("f", "batch", None, "0"),
            deleting(claim("g", "batch", Some("kwok://g"), "16")),
        ];
        let marked = BTreeSet::from(["c".to_string()]);
        let got = usage(nodes.iter(), claims.iter(), &marked);
        let web = &got["web"];
        assert_eq!(web.nodes, 2);
        assert_eq!(web.capacity.cpu, 12_000);
        assert_eq!(web.capacity.memory, (36i64 << 30) * 1000, "{web:?}");
        let batch = &got["batch"];
        assert_eq!(batch.nodes, 2);
        assert_eq!(batch.capacity.cpu, 16_000);
        assert_eq!(got.len(), 2);
    }

    fn pool(spec: serde_json::Value, status: serde_json::Value) -> NodePool {
        let mut p: NodePool = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "web", "generation": 2},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                "requirements": [],
            }}},
            "status": status,
        }))
        .unwrap();
        if let serde_json::Value::Object(extra) = spec {
            let mut v = serde_json::to_value(&p.spec).unwrap();
            v.as_object_mut().unwrap().extend(extra);
            p.spec = serde_json::from_value(v).unwrap();
        }
        p.metadata.creation_timestamp = Some(Time(Timestamp::from_second(1_000).unwrap()));
        p
    }

    fn class(readiness: NodeClassReadiness, terminating: bool) -> NodeClassObserved {
        NodeClassObserved {
            readiness,
            terminating,
            generation: Some(3),
        }
    }

    fn condition<'a>(s: &'a NodePoolStatus, type_: &str) -> (&'a str, &'a str) {
        let c = s.conditions.iter().find(|c| c.type_ == type_).unwrap();
        (c.status.as_str(), c.reason.as_str())
    }

    #[test]
    fn conditions_follow_validation_and_the_node_class() {
        let now = Timestamp::from_second(2_000).unwrap();
        let not_ready = NodeClassReadiness::NotReady {
            reason: "SubnetsNotFound".into(),
            message: "no subnet matches".into(),
        };
        let restricted_label = json!({"template": {
            "metadata": {"labels": {"karpenter.sh/nodepool": "other"}},
            "spec": {
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                "requirements": [],
            },
        }});
        let cases = [
            (
                json!({}),
                class(NodeClassReadiness::Ready, false),
                ("True", "ValidationSucceeded"),
                ("True", "NodeClassReady"),
                ("True", "Ready"),
            ),
            (
                json!({}),
                class(not_ready, false),
                ("True", "ValidationSucceeded"),
                ("False", "SubnetsNotFound"),
                ("False", "UnhealthyDependents"),
            ),
            (
                json!({}),
                class(NodeClassReadiness::NotFound, false),
                ("True", "ValidationSucceeded"),
                ("False", "NodeClassNotFound"),
                ("False", "UnhealthyDependents"),
            ),
            (
                json!({}),
                class(NodeClassReadiness::Ready, true),
                ("True", "ValidationSucceeded"),
                ("False", "NodeClassTerminating"),
                ("False", "UnhealthyDependents"),
            ),
            (
                restricted_label,
                class(NodeClassReadiness::Ready, false),
                ("False", "NodePoolValidationFailed"),
                ("True", "NodeClassReady"),
                ("False", "UnhealthyDependents"),
            ),
        ];
        for (spec, observed, validation, node_class, ready) in cases {
            let p = pool(spec.clone(), json!(null));
            let s = status(&p, None, Some(&observed), Health::Unknown, now);
            assert_eq!(
                condition(&s, VALIDATION_SUCCEEDED),
                validation,
                "{spec} {observed:?}"
            );
            assert_eq!(
                condition(&s, NODE_CLASS_READY),
                node_class,
                "{spec} {observed:?}"
            );
            assert_eq!(condition(&s, "Ready"), ready, "{spec} {observed:?}");
            assert_eq!(condition(&s, NODE_REGISTRATION_HEALTHY).0, "Unknown");
            assert_eq!(s.node_class_observed_generation, Some(3));
        }
    }

    #[test]
    fn resources_start_at_zero_and_follow_usage() {
        let now = Timestamp::from_second(2_000).unwrap();
        let p = pool(json!({}), json!(null));
        let s = status(&p, None, None, Health::Unknown, now);
        assert_eq!(s.nodes, Some(0));
        let zero: BTreeMap<String, Quantity> = BASE_RESOURCES
            .iter()
            .map(|r| (r.to_string(), Quantity("0".into())))
            .collect();
        assert_eq!(s.resources, zero);
        assert!(
            s.conditions.is_empty(),
            "a kind the provider does not serve keeps no conditions"
        );
        let u = Usage {
            capacity: Resources::parse(&[
                ("cpu", "12"),
                ("memory", "36Gi"),
                ("nvidia.com/gpu", "1"),
            ]),
            nodes: 2,
        };
        let s = status(&p, Some(&u), None, Health::Unknown, now);
        assert_eq!(s.nodes, Some(2));
        assert_eq!(s.resources["cpu"], Quantity("12".into()));
        assert_eq!(s.resources["memory"], Quantity("36Gi".into()));
        assert_eq!(s.resources["nvidia.com/gpu"], Quantity("1".into()));
        assert_eq!(s.resources["nodes"], Quantity("2".into()));
        assert_eq!(s.resources["pods"], Quantity("0".into()));
    }

    #[test]
    fn registration_health_over_the_last_four_launches() {
        let h = RegistrationHealth::default();
        assert_eq!(h.health("np"), Health::Unknown);
        // (outcome recorded, health after it)
        let steps = [
            (true, Health::Healthy),
            (false, Health::Healthy),
            (false, Health::Unhealthy),
            (true, Health::Unhealthy),
            // The first success leaves the window; the two failures still make half of it.
            (true, Health::Unhealthy),
            (true, Health::Healthy),
            (true, Health::Healthy),
        ];
        for (i, (registered, want)) in steps.into_iter().enumerate() {
            h.record("np", registered);
            assert_eq!(h.health("np"), want, "after step {i}");
        }
        assert_eq!(h.health("other"), Health::Unknown);
        h.set("np", Health::Unhealthy);
        assert_eq!(h.health("np"), Health::Unhealthy);
        // One success after a restart seeded unhealthy is not enough (2 of 4 still failed).
        h.record("np", true);
        assert_eq!(h.health("np"), Health::Unhealthy);
        h.set("np", Health::Unknown);
        assert_eq!(h.health("np"), Health::Unknown);
        h.set("np", Health::Healthy);
        h.record("np", false);
        assert_eq!(h.health("np"), Health::Healthy);
    }

    #[test]
    fn registration_health_resets_when_the_pool_or_its_class_changes() {
        let now = Timestamp::from_second(2_000).unwrap();
        let healthy = |generation: i64| {
            json!({"nodeClassObservedGeneration": 3, "conditions": [{
                "type": NODE_REGISTRATION_HEALTHY, "status": "True", "reason": "Healthy", "message": "",
                "observedGeneration": generation, "lastTransitionTime": "2026-01-01T00:00:00Z",
            }]})
        };
        let ready = class(NodeClassReadiness::Ready, false);
        // Nothing changed: kept.
        let s = status(
            &pool(json!({}), healthy(2)),
            None,
            Some(&ready),
            Health::Unknown,
            now,
        );
        assert_eq!(
            condition(&s, NODE_REGISTRATION_HEALTHY),
            ("True", "Healthy")
        );
        // The NodePool changed.
        let s = status(
            &pool(json!({}), healthy(1)),
            None,
            Some(&ready),
            Health::Healthy,
            now,
        );
        assert_eq!(condition(&s, NODE_REGISTRATION_HEALTHY).0, "Unknown");
        // The NodeClass changed.
        let newer = NodeClassObserved {
            generation: Some(4),
            ..ready
        };
        let s = status(
            &pool(json!({}), healthy(2)),
            None,
            Some(&newer),
            Health::Unhealthy,
            now,
        );
        assert_eq!(condition(&s, NODE_REGISTRATION_HEALTHY).0, "Unknown");
        assert_eq!(s.node_class_observed_generation, Some(4));
    }
}
