//! A cluster of Kubernetes objects and one round over it, as the controller, the simulator and
//! `plan` run it: NodePools, managed nodes (a Node and its NodeClaim), pods, PodDisruptionBudgets
//! and DaemonSets go in; [`Provisioned`] and [`Disrupted`] come out, by name.
//!
//! Upstream's suites set up the same objects against its fake cloud provider; our nodes come
//! from [`fake`]'s catalogue, so a node of instance type `default-instance-type` costs what
//! upstream's does.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use karpenter_api::{NodeClaim, NodePool};
use karpenter_core::disruption::{Blocked, Method};
use karpenter_core::feature_gates::FeatureGates;
use karpenter_core::instancetype::{InstanceType, fake};
use karpenter_core::provisioning::scheduling::{NodePoolInput, SchedulerOptions};
use karpenter_core::round::{
    BufferHolding, Disrupt, Disruption, Parts, Provisioning, RoundInputs, RoundPlan, RoundPod,
    decide,
};
use karpenter_core::scheduling::dynamic_resources::{ClaimAllocation, DeviceInventory};
use karpenter_core::state::selectors::{PodController, ServiceSelector};
use karpenter_core::state::{Observed, Snapshot};
use serde_json::{Value, json};

use super::PoolBuilder;

/// The round's clock: a Monday, noon UTC.
pub const NOW: &str = "2024-06-03T12:00:00Z";

/// The round's `now`.
pub fn now() -> Timestamp {
    NOW.parse().unwrap()
}

/// `minutes` before [`now`], as an RFC 3339 string.
pub fn ago(minutes: i64) -> String {
    (now() - SignedDuration::from_mins(minutes)).to_string()
}

/// A Node of NodePool `pool` with its NodeClaim, under construction. By default it is
/// launched, registered, initialized and ready, on-demand in `test-zone-1`, an hour old, with
/// its last pod event an hour ago.
#[derive(Clone)]
pub struct ManagedNode {
    name: String,
    pool: Option<String>,
    instance_type: InstanceType,
    zone: String,
    capacity_type: String,
    age_minutes: i64,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    claim_annotations: BTreeMap<String, String>,
    taints: Vec<Taint>,
    initialized: bool,
    ready: bool,
    deleting: bool,
    drifted: bool,
    expire_after: String,
    termination_grace_period: Option<String>,
}

/// A managed node of `pool` on `instance_type` (a name in [`fake::default_instance_types`],
/// or see [`ManagedNode::instance_type`]).
pub fn managed(name: &str, pool: &str, instance_type: &str) -> ManagedNode {
    let it = fake::default_instance_types()
        .into_iter()
        .chain(fake::instance_types_assorted())
        .find(|it| it.name == instance_type)
        .unwrap_or_else(|| panic!("no fake instance type {instance_type}"));
    ManagedNode {
        name: name.into(),
        pool: Some(pool.into()),
        instance_type: it,
        zone: "test-zone-1".into(),
        capacity_type: "on-demand".into(),
        age_minutes: 60,
        labels: BTreeMap::new(),
        annotations: BTreeMap::new(),
        claim_annotations: BTreeMap::new(),
        taints: Vec::new(),
        initialized: true,
        ready: true,
        deleting: false,
        drifted: false,
        expire_after: "Never".into(),
        termination_grace_period: None,
    }
}

impl ManagedNode {
    /// On an instance type of one's own (it must be offered by the node's NodePool to be priced).
    pub fn instance_type(mut self, it: InstanceType) -> Self {
        self.instance_type = it;
        self
    }
    pub fn zone(mut self, zone: &str) -> Self {
        self.zone = zone.into();
        self
    }
    pub fn capacity_type(mut self, capacity_type: &str) -> Self {
        self.capacity_type = capacity_type.into();
        self
    }
    /// Created `minutes` before [`now`].
    pub fn age(mut self, minutes: i64) -> Self {
        self.age_minutes = minutes;
        self
    }
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }
    /// An annotation on the Node.
    pub fn annotate(mut self, key: &str, value: &str) -> Self {
        self.annotations.insert(key.into(), value.into());
        self
    }
    /// An annotation on the NodeClaim.
    pub fn annotate_claim(mut self, key: &str, value: &str) -> Self {
        self.claim_annotations.insert(key.into(), value.into());
        self
    }
    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        self.taints.push(Taint {
            key: key.into(),
            value: Some(value.into()),
            effect: effect.into(),
            time_added: None,
        });
        self
    }
    /// Launched and registered, not yet initialized.
    pub fn uninitialized(mut self) -> Self {
        self.initialized = false;
        self
    }
    /// Its Node reports `Ready=False`.
    pub fn not_ready(mut self) -> Self {
        self.ready = false;
        self
    }
    /// Its NodeClaim (and Node) carry a deletion timestamp.
    pub fn deleting(mut self) -> Self {
        self.deleting = true;
        self
    }
    /// Its NodeClaim has `Drifted=True`.
    pub fn drifted(mut self) -> Self {
        self.drifted = true;
        self
    }
    /// Its NodeClaim's `spec.expireAfter`.
    pub fn expire_after(mut self, duration: &str) -> Self {
        self.expire_after = duration.into();
        self
    }
    /// Its NodeClaim's `spec.terminationGracePeriod`.
    pub fn termination_grace_period(mut self, duration: &str) -> Self {
        self.termination_grace_period = Some(duration.into());
        self
    }
    /// A Node no NodePool owns (no `karpenter.sh/nodepool` label, no NodeClaim).
    pub fn unmanaged(mut self) -> Self {
        self.pool = None;
        self
    }

    /// The Node and, for a managed node, its NodeClaim.
    pub fn build(&self) -> (Node, Option<NodeClaim>) {
        let it = &self.instance_type;
        let created = ago(self.age_minutes);
        let mut labels: BTreeMap<String, String> = [
            ("kubernetes.io/hostname", self.name.as_str()),
            ("node.kubernetes.io/instance-type", it.name.as_str()),
            ("topology.kubernetes.io/zone", self.zone.as_str()),
            ("karpenter.sh/capacity-type", self.capacity_type.as_str()),
            ("kubernetes.io/arch", "amd64"),
            ("kubernetes.io/os", "linux"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        if let Some(pool) = &self.pool {
            labels.insert("karpenter.sh/nodepool".into(), pool.clone());
            labels.insert("karpenter.sh/registered".into(), "true".into());
            if self.initialized {
                labels.insert("karpenter.sh/initialized".into(), "true".into());
            }
        }
        labels.extend(self.labels.clone());
        let allocatable = it.allocatable().to_list();
        let capacity = it.capacity.to_list();
        let deletion = self.deleting.then(|| created.clone());
        let finalizers = self.deleting.then(|| vec!["karpenter.sh/termination"]);
        let provider_id = format!("fake://{}", self.name);
        let node = serde_json::from_value(json!({
            "metadata": {"name": self.name, "labels": labels, "annotations": self.annotations,
                "creationTimestamp": created, "deletionTimestamp": deletion, "finalizers": finalizers},
            "spec": {"providerID": provider_id, "taints": self.taints},
            "status": {"allocatable": allocatable, "capacity": capacity,
                "conditions": [{"type": "Ready", "status": if self.ready { "True" } else { "False" },
                    "lastTransitionTime": created}]},
        }))
        .expect("a valid Node");
        let Some(_) = &self.pool else {
            return (node, None);
        };
        let condition = |kind: &str, status: bool| {
            json!({"type": kind, "status": if status { "True" } else { "False" }, "reason": kind,
                "message": "", "lastTransitionTime": created})
        };
        let mut conditions = vec![
            condition("Launched", true),
            condition("Registered", true),
            condition("Initialized", self.initialized),
        ];
        if self.drifted {
            conditions.push(condition("Drifted", true));
        }
        let mut spec = json!({
            "nodeClassRef": {"group": "karpenter.test.sh", "kind": "TestNodeClass", "name": "default"},
            "requirements": [], "expireAfter": self.expire_after,
        });
        if let Some(grace) = &self.termination_grace_period {
            spec["terminationGracePeriod"] = json!(grace);
        }
        let claim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": self.name, "labels": labels, "annotations": self.claim_annotations,
                "creationTimestamp": created, "deletionTimestamp": deletion, "finalizers": finalizers},
            "spec": spec,
            "status": {"providerID": provider_id, "nodeName": self.name,
                "allocatable": allocatable, "capacity": capacity,
                "lastPodEventTime": created, "conditions": conditions},
        }))
        .expect("a valid NodeClaim");
        (node, Some(claim))
    }
}

/// Binds `pod` to `node`, running.
pub fn on(node: &str, mut pod: Pod) -> Pod {
    pod.spec.get_or_insert_with(Default::default).node_name = Some(node.into());
    let status = pod.status.get_or_insert_with(Default::default);
    status.phase.get_or_insert_with(|| "Running".into());
    pod
}

/// Marks an unbound pod as the kube-scheduler does when it fits no node.
pub fn pending(mut pod: Pod) -> Pod {
    if pod.spec.as_ref().is_some_and(|s| s.node_name.is_some()) {
        return pod;
    }
    let conditions = pod
        .status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new);
    if !conditions.iter().any(|c| c.type_ == "PodScheduled") {
        conditions.push(
            serde_json::from_value(json!({"type": "PodScheduled", "status": "False",
                "reason": "Unschedulable"}))
            .unwrap(),
        );
    }
    pod
}

/// Gives `pod` a ReplicaSet owner, so a drain can move it (upstream's suites' usual pods).
pub fn replicated(mut pod: Pod) -> Pod {
    pod.metadata.owner_references = Some(vec![
        serde_json::from_value(json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "name": "rs", "uid": "rs-uid", "controller": true}))
        .unwrap(),
    ]);
    pod
}

/// Names `pod`.
pub fn named(name: &str, mut pod: Pod) -> Pod {
    pod.metadata.name = Some(name.into());
    pod
}

/// A cluster: its objects, its NodePools with their instance types, and the round's settings.
pub struct Cluster {
    pub nodes: Vec<Node>,
    pub claims: Vec<NodeClaim>,
    pub pods: Vec<Pod>,
    pub pdbs: Vec<PodDisruptionBudget>,
    pub daemonsets: Vec<DaemonSet>,
    /// Services and pod controllers, for default topology spread.
    pub services: Vec<ServiceSelector>,
    pub controllers: Vec<PodController>,
    pub pools: Vec<NodePoolInput>,
    pub gates: FeatureGates,
    pub options: SchedulerOptions,
    pub now: Timestamp,
    /// ResourceClaims, DeviceClasses and ResourceSlices.
    pub devices: DeviceInventory,
}

impl Cluster {
    /// NodePools offering [`fake::default_instance_types`].
    pub fn new(pools: impl IntoIterator<Item = PoolBuilder>) -> Self {
        Self::with_types(pools, fake::default_instance_types())
    }

    /// NodePools offering `types`.
    pub fn with_types(
        pools: impl IntoIterator<Item = PoolBuilder>,
        types: Vec<InstanceType>,
    ) -> Self {
        let types: Vec<_> = types.into_iter().map(Arc::new).collect();
        Self {
            nodes: Vec::new(),
            claims: Vec::new(),
            pods: Vec::new(),
            pdbs: Vec::new(),
            daemonsets: Vec::new(),
            services: Vec::new(),
            controllers: Vec::new(),
            pools: pools
                .into_iter()
                .map(|p| NodePoolInput {
                    node_pool: p.0,
                    instance_types: types.clone(),
                })
                .collect(),
            gates: FeatureGates::default(),
            options: SchedulerOptions::default(),
            now: now(),
            devices: DeviceInventory::default(),
        }
    }

    /// Adds a node (and its NodeClaim).
    pub fn node(mut self, node: ManagedNode) -> Self {
        let (node, claim) = node.build();
        self.nodes.push(node);
        self.claims.extend(claim);
        self
    }

    /// Adds a NodeClaim without a Node (launched, not registered).
    pub fn claim(mut self, claim: NodeClaim) -> Self {
        self.claims.push(claim);
        self
    }

    /// Adds pods. One not bound with [`on`] is pending: marked unschedulable by the
    /// kube-scheduler (`PodScheduled=False`, `Unschedulable`) unless it has a `PodScheduled`
    /// condition already.
    pub fn pods(mut self, pods: impl IntoIterator<Item = Pod>) -> Self {
        self.pods.extend(pods.into_iter().map(pending));
        self
    }

    pub fn pdb(mut self, pdb: PodDisruptionBudget) -> Self {
        self.pdbs.push(pdb);
        self
    }

    pub fn daemonset(mut self, daemonset: DaemonSet) -> Self {
        self.daemonsets.push(daemonset);
        self
    }

    /// Adds a Service (its pod selector).
    pub fn service(mut self, service: ServiceSelector) -> Self {
        self.services.push(service);
        self
    }

    /// Adds a ReplicaSet, StatefulSet or ReplicationController (its pod selector).
    pub fn controller(mut self, controller: PodController) -> Self {
        self.controllers.push(controller);
        self
    }

    /// Changes a NodePool after it was added (by name).
    pub fn pool_mut(&mut self, name: &str) -> &mut NodePool {
        &mut self
            .pools
            .iter_mut()
            .find(|p| p.node_pool.metadata.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("no NodePool {name}"))
            .node_pool
    }

    /// The snapshot the round reads.
    pub fn snapshot(&self) -> Snapshot<'_, Pod> {
        Snapshot::new(Observed {
            nodes: self.nodes.iter().collect(),
            node_claims: self.claims.iter().collect(),
            pods: self.pods.iter().collect(),
            daemonsets: self.daemonsets.iter().collect(),
            pdbs: self.pdbs.iter().collect(),
            namespaces: Vec::new(),
            volume_claims: Vec::new(),
            volumes: Vec::new(),
            storage_classes: Vec::new(),
            csi_nodes: Vec::new(),
            services: self.services.iter().collect(),
            pod_controllers: self.controllers.iter().collect(),
            node_pools: &self.pools,
            provider_labels: &[],
            nominated: BTreeSet::new(),
            devices: Arc::new(self.devices.clone()),
            marked_for_deletion: BTreeSet::new(),
        })
    }

    /// One round of `parts`, handed to `f` with its snapshot.
    pub fn round<T>(
        &self,
        parts: Parts<'_>,
        f: impl FnOnce(&Snapshot<'_, Pod>, RoundPlan<'_, Pod>) -> T,
    ) -> T {
        let snapshot = self.snapshot();
        let never = || false;
        let plan = decide(
            &snapshot,
            &RoundInputs {
                gates: self.gates,
                now: self.now,
                options: &self.options,
                virtual_pods: &[],
                buffer_holding: BufferHolding::Unknown,
                repair_policies: &[],
                parts,
                interrupt: &never,
            },
        );
        f(&snapshot, plan)
    }

    /// What provisioning decides for the pending pods (and those of deleting nodes).
    pub fn provision(&self) -> Provisioned {
        self.round(
            Parts {
                provisioning: true,
                ..Parts::NONE
            },
            |_, plan| provisioned(&plan.provisioning.expect("provisioning was due")),
        )
    }

    /// What disruption decides (a fresh decision).
    pub fn disrupt(&self) -> Disrupted {
        self.round(
            Parts {
                disruption: Disrupt::Decide,
                ..Parts::NONE
            },
            |_, plan| match plan.disruption {
                Some(Disruption::Decided { decision, .. }) => Disrupted {
                    commands: decision
                        .commands
                        .iter()
                        .map(|c| Move {
                            method: c.method,
                            candidates: c.candidates.clone(),
                            replacements: c
                                .replacements
                                .iter()
                                .map(|r| r.instance_types.iter().map(|t| t.name.clone()).collect())
                                .collect(),
                        })
                        .collect(),
                    blocked: decision
                        .blocked
                        .iter()
                        .map(|(n, b)| (n.clone(), (b.kind, b.reason.clone())))
                        .collect(),
                },
                other => panic!("a fresh decision was asked for, got {other:?}"),
            },
        )
    }

    /// The NodeClaims the round finds expired, by node name.
    pub fn expired(&self) -> Vec<String> {
        self.round(
            Parts {
                expiration: true,
                ..Parts::NONE
            },
            |_, plan| plan.expired.iter().map(|e| e.node.to_string()).collect(),
        )
    }
}

/// Provisioning's decision, by name.
pub fn provisioned(p: &Provisioning<'_, Pod>) -> Provisioned {
    let name = |i: usize| match p.batch[i] {
        RoundPod::Real(pod) | RoundPod::Virtual(pod) => {
            pod.metadata.name.clone().unwrap_or_default()
        }
    };
    Provisioned {
        claims: p
            .results
            .new_node_claims
            .iter()
            .map(|c| NewClaim {
                node_pool: c.node_pool.clone(),
                instance_types: c.instance_types.iter().map(|t| t.name.clone()).collect(),
                pods: c.pods.iter().map(|&i| name(i)).collect(),
                labels: c.labels.clone(),
                dra_drivers: c.dra_drivers.clone(),
            })
            .collect(),
        existing: p
            .results
            .existing_nodes
            .iter()
            .map(|(node, pods)| (node.clone(), pods.iter().map(|&i| name(i)).collect()))
            .collect(),
        failed: p
            .results
            .pod_errors
            .iter()
            .map(|(&i, e)| (name(i), e.clone()))
            .collect(),
        pending_by_zone: p.results.pending_by_zone.clone(),
        claim_allocations: p.results.claim_allocations.clone(),
    }
}

/// A NodeClaim provisioning opens.
#[derive(Debug, Clone)]
pub struct NewClaim {
    pub node_pool: String,
    /// Cheapest first.
    pub instance_types: Vec<String>,
    /// The pods it was opened for, by name.
    pub pods: Vec<String>,
    pub labels: BTreeMap<String, String>,
    /// `karpenter.sh/requested-dra-drivers`, split.
    pub dra_drivers: Vec<String>,
}

/// Provisioning's decision, by name.
#[derive(Debug, Clone)]
pub struct Provisioned {
    pub claims: Vec<NewClaim>,
    /// Pods placed on existing or launching nodes, by node.
    pub existing: BTreeMap<String, Vec<String>>,
    /// Pods that fit nowhere, with the reason.
    pub failed: BTreeMap<String, String>,
    /// Pending pods by their effective zone (`flexible`, `none` or a zone).
    pub pending_by_zone: BTreeMap<String, usize>,
    /// Where the pods' ResourceClaims were allocated, by `namespace/name`.
    pub claim_allocations: BTreeMap<String, ClaimAllocation>,
}

impl Provisioned {
    /// Whether `pod` was placed anywhere.
    pub fn scheduled(&self, pod: &str) -> bool {
        self.claims.iter().any(|c| c.pods.iter().any(|p| p == pod))
            || self.existing.values().any(|ps| ps.iter().any(|p| p == pod))
    }
}

/// One disruption command, by name.
#[derive(Debug, Clone, PartialEq)]
pub struct Move {
    pub method: Method,
    pub candidates: Vec<String>,
    /// Each replacement's instance-type options, cheapest first.
    pub replacements: Vec<Vec<String>>,
}

/// Disruption's decision, by name.
#[derive(Debug, Clone)]
pub struct Disrupted {
    pub commands: Vec<Move>,
    /// Why each other managed node stays.
    pub blocked: BTreeMap<String, (Blocked, String)>,
}

impl Disrupted {
    /// The nodes the commands remove, sorted.
    pub fn removed(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .commands
            .iter()
            .flat_map(|c| c.candidates.clone())
            .collect();
        v.sort();
        v
    }
}

/// Merges `from` into `into` (objects key by key, anything else replaced): for patching a
/// JSON object before it is read.
pub fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (slot, v) => *slot = v,
    }
}
