//! The dry-run planner: what karpenter would do now — provisioning, disruption, expiration,
//! static capacity and node repair — as one round of the core's decisions (the round the
//! controller and the simulator decide through), and the report of it.
//!
//! A dump of a cluster (`kubectl get nodes,pods,nodepools,nodeclaims,pdb,daemonsets -A -o
//! yaml`) is read into the core's [`ClusterObjects`] by [`Dump::read`] and planned by
//! [`plan`]; a live cluster is planned by the controller's dry run, which hands its snapshot
//! and round to [`Plan::from_round`].

pub mod defaulting;
pub mod manifest;
pub mod warnings;
pub mod what_if;
pub mod why;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use karpenter_api::NodePool;
use karpenter_core::disruption::repair::Repair;
use karpenter_core::feature_gates::FeatureGates;
use karpenter_core::instancetype::cheapest_launch;
use karpenter_core::provisioning::capacity_buffer;
use karpenter_core::provisioning::node_claim_for;
use karpenter_core::provisioning::nodepools::launchable;
use karpenter_core::provisioning::scheduling::default_constraints::SchedulerConfiguration;
use karpenter_core::provisioning::scheduling::{NewNodeClaim, NodePoolInput, SchedulerOptions};
use karpenter_core::provisioning::static_capacity;
use karpenter_core::round::{self, BufferHolding, Parts, RoundInputs, RoundPlan, decide};
use karpenter_core::state::pods::{self, ObservedPod};
use karpenter_core::state::selectors::{PodController, ServiceSelector};
use karpenter_core::state::{ClusterObjects, Counts, Snapshot};
use serde::Serialize;
use serde_json::Value;

use karpenter_cloudprovider::Catalog;

use crate::manifest::{FromObject, ManifestError, parse_objects};

/// Why a dump could not be planned from.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The file is unreadable or not YAML.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// An object of the dump is not what its kind says.
    #[error("{file}: document {document}: {path}: {message}")]
    Invalid {
        /// The file.
        file: std::path::PathBuf,
        /// The object's position in the file, from 1.
        document: usize,
        /// The field.
        path: String,
        /// What is wrong.
        message: String,
    },
}

/// A NodeClaim provisioning would create.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PlannedNodeClaim {
    /// Its NodePool.
    pub nodepool: String,
    /// The instance types it would list, cheapest first.
    pub instance_types: Vec<String>,
    /// The cheapest price among them.
    pub price_per_hour: Option<f64>,
    /// The pods it is for, as `namespace/name`.
    pub pods: Vec<String>,
    /// Its requirements, as `key op [values]`.
    pub requirements: Vec<String>,
    /// What a launch would pick where the provider takes the lowest price (KWOK; AWS for
    /// on-demand): the cheapest offering of the types that fit.
    pub launch: Option<PlannedLaunch>,
}

/// The instance type and offering a launch would pick.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PlannedLaunch {
    /// The instance type.
    pub instance_type: String,
    /// The zone.
    pub zone: String,
    /// `spot`, `on-demand` or `reserved`.
    pub capacity_type: String,
    /// Its price per hour.
    pub price_per_hour: f64,
}

/// A pod that fits on a node already there (or launching).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Placement {
    /// The pod, as `namespace/name`.
    pub pod: String,
    /// The node.
    pub node: String,
}

/// A pod that fits nowhere, and why.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Unschedulable {
    /// The pod, as `namespace/name`.
    pub pod: String,
    /// Why, per NodePool.
    pub reason: String,
}

/// What provisioning would do.
#[derive(Clone, Debug, Serialize, PartialEq, Default)]
pub struct Provisioning {
    /// NodeClaims to create.
    pub nodeclaims: Vec<PlannedNodeClaim>,
    /// Pending pods that fit on existing or launching nodes.
    pub existing_node_placements: Vec<Placement>,
    /// Pending pods that fit nowhere.
    pub unschedulable: Vec<Unschedulable>,
    /// Pending pods provisioning ignores, and why (node selection karpenter cannot meet,
    /// volumes that cannot be placed yet): each gets a `FailedScheduling` event.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ignored: Vec<Unschedulable>,
}

/// A disruption command: nodes to remove, and what replaces them.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DisruptionAction {
    /// `Empty`, `Drifted` or `Underutilized`.
    pub reason: String,
    /// Upstream's method name, such as `single-node consolidation`.
    pub method: String,
    /// The nodes removed.
    pub nodes: Vec<String>,
    /// For each replacement NodeClaim: its NodePool and instance types, cheapest first.
    pub replacements: Vec<PlannedNodeClaim>,
    /// What the cluster would cost less per hour.
    pub savings_per_hour: f64,
}

/// A node disruption would leave, and why.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Kept {
    /// The node.
    pub node: String,
    /// Why it stays.
    pub reason: String,
}

/// What disruption would do.
#[derive(Clone, Debug, Serialize, PartialEq, Default)]
pub struct Disruption {
    /// Nodes it would remove or replace.
    pub actions: Vec<DisruptionAction>,
    /// Nodes it would leave, and why.
    pub blocked: Vec<Kept>,
}

/// What static capacity would do (the `StaticCapacity` gate): NodeClaims to create for static
/// NodePools short of their replicas, and surplus ones to delete.
#[derive(Clone, Debug, Serialize, PartialEq, Default)]
pub struct StaticCapacity {
    /// NodeClaims to create.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodeclaims: Vec<PlannedNodeClaim>,
    /// NodeClaims to delete, by name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deleted: Vec<String>,
    /// Static NodePools short of replicas that `limits.nodes` holds back.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub node_limit_reached: Vec<String>,
}

impl StaticCapacity {
    fn is_empty(&self) -> bool {
        self.nodeclaims.is_empty() && self.deleted.is_empty() && self.node_limit_reached.is_empty()
    }
}

/// What node repair would do (the `NodeRepair` gate): nodes past their repair policy's
/// toleration, and those the circuit breaker holds back.
#[derive(Clone, Debug, Serialize, PartialEq, Default)]
pub struct Repairs {
    /// Nodes whose NodeClaim would be deleted forcefully now.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub repaired: Vec<PlannedRepair>,
    /// Nodes due for repair that the 20% circuit breaker holds back, with upstream's message.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub blocked: Vec<Kept>,
}

impl Repairs {
    fn is_empty(&self) -> bool {
        self.repaired.is_empty() && self.blocked.is_empty()
    }
}

/// One node repair would replace.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PlannedRepair {
    /// The node.
    pub node: String,
    /// Its NodeClaim.
    pub nodeclaim: String,
    /// The condition it fails, as `Type=Status`.
    pub condition: String,
}

/// The plan.
#[derive(Clone, Debug, Serialize, PartialEq, Default)]
pub struct Plan {
    /// Provisioning decisions.
    pub provisioning: Provisioning,
    /// Static capacity decisions (only with the `StaticCapacity` gate on).
    #[serde(skip_serializing_if = "StaticCapacity::is_empty")]
    pub static_capacity: StaticCapacity,
    /// Node repair decisions (only with the `NodeRepair` gate on).
    #[serde(skip_serializing_if = "Repairs::is_empty")]
    pub repair: Repairs,
    /// Disruption decisions.
    pub disruption: Disruption,
    /// What the snapshot held.
    pub snapshot: SnapshotSummary,
    /// Where the plan decides what the controller would not (a NodeClass of another provider,
    /// one that does not exist, spot without spot prices).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The currency of every price (ISO 4217), where the catalog says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
}

/// Counts of what the snapshot held.
#[derive(Clone, Debug, Serialize, PartialEq, Default)]
pub struct SnapshotSummary {
    /// Nodes.
    pub nodes: usize,
    /// NodeClaims that have no Node yet.
    pub launching: usize,
    /// Pods bound to nodes.
    pub bound_pods: usize,
    /// Pods kube-scheduler could not place.
    pub pending_pods: usize,
    /// Pods of nodes being deleted, which need a new node.
    pub displaced_pods: usize,
    /// Pods neither bound nor provisionable: not yet tried by kube-scheduler, nominated for
    /// preemption, DaemonSet or static pods, finished or deleting.
    pub ignored_pods: usize,
    /// NodePools.
    pub nodepools: usize,
    /// Objects of kinds the planner does not use.
    pub ignored: usize,
}

/// What a dump of a cluster holds: the objects a round reads, and what the planner derives
/// its other inputs from (NodePools and their overlays, CapacityBuffers and the workloads they
/// reference).
#[derive(Clone, Debug)]
pub struct Dump {
    /// The objects the round's snapshot is built from.
    pub cluster: ClusterObjects<Pod>,
    /// NodePools.
    pub node_pools: Vec<NodePool>,
    /// NodeOverlays (applied to the instance types when the `NodeOverlay` gate is on).
    pub node_overlays: Vec<karpenter_api::nodeoverlay::NodeOverlay>,
    /// CapacityBuffers (their virtual pods are planned when the `CapacityBuffer` gate is on).
    pub capacity_buffers: Vec<karpenter_api::capacitybuffer::CapacityBuffer>,
    /// PodTemplates (a buffer's `podTemplateRef`).
    pub pod_templates: Vec<k8s_openapi::api::core::v1::PodTemplate>,
    /// Deployments (a buffer's `scalableRef`).
    pub deployments: Vec<k8s_openapi::api::apps::v1::Deployment>,
    /// StatefulSets (a buffer's `scalableRef`).
    pub stateful_sets: Vec<k8s_openapi::api::apps::v1::StatefulSet>,
    /// ReplicaSets (a buffer's `scalableRef`).
    pub replica_sets: Vec<k8s_openapi::api::apps::v1::ReplicaSet>,
    /// Provider NodeClasses, as written.
    pub node_classes: Vec<Value>,
    /// Objects of kinds the planner does not use.
    pub ignored: usize,
    /// How the cluster's kube-scheduler is configured, as far as karpenter mirrors it
    /// (`--scheduler-config`): not in a dump's objects, so the caller sets it.
    pub scheduler_config: SchedulerConfiguration,
    /// Leave pods' device claims to kube-scheduler (`IGNORE_DRA_REQUESTS`, true by default);
    /// false allocates them against the dump's ResourceClaims, DeviceClasses and ResourceSlices.
    pub ignore_dra_requests: bool,
}

impl Dump {
    /// A dump holding nothing.
    pub fn empty() -> Self {
        Self {
            cluster: ClusterObjects {
                nodes: Vec::new(),
                node_claims: Vec::new(),
                pods: Vec::new(),
                daemonsets: Vec::new(),
                pdbs: Vec::new(),
                namespaces: Vec::new(),
                volume_claims: Vec::new(),
                volumes: Vec::new(),
                storage_classes: Vec::new(),
                csi_nodes: Vec::new(),
                services: Vec::new(),
                pod_controllers: Vec::new(),
                // A dump holds no controller's memory of nominations or commands in flight.
                nominated: BTreeSet::new(),
                devices: Default::default(),
                marked_for_deletion: BTreeSet::new(),
            },
            node_pools: Vec::new(),
            node_overlays: Vec::new(),
            capacity_buffers: Vec::new(),
            pod_templates: Vec::new(),
            deployments: Vec::new(),
            stateful_sets: Vec::new(),
            replica_sets: Vec::new(),
            node_classes: Vec::new(),
            ignored: 0,
            scheduler_config: SchedulerConfiguration::default(),
            ignore_dra_requests: true,
        }
    }

    /// Reads a dump (`kubectl get ... -o yaml|json`, a `List` or documents) from `text`, read
    /// from `file`.
    pub fn read(file: &Path, text: &str) -> Result<Self, PlanError> {
        let mut dump = Self::empty();
        dump.add(file, text)?;
        Ok(dump)
    }

    /// Reads the dump in the manifests `path` names: a file, `-` for standard input, or a
    /// directory of them (recursively).
    pub fn read_path(path: &Path) -> Result<Self, PlanError> {
        let mut dump = Self::empty();
        for file in manifest::manifest_files(path)? {
            let text = manifest::read_text(&file, manifest::MAX_MANIFEST_BYTES)?;
            dump.add(&file, &text)?;
        }
        Ok(dump)
    }

    /// Adds the objects of `text`, read from `file`. Each is converted to its type as it is
    /// parsed, so a dump of 100,000 pods is never held as JSON values all at once.
    pub fn add(&mut self, file: &Path, text: &str) -> Result<(), PlanError> {
        let c = &mut self.cluster;
        for (i, object) in parse_objects::<DumpObject>(file, text)?
            .into_iter()
            .enumerate()
        {
            match object {
                DumpObject::Node(o) => c.nodes.push(Arc::new(*o)),
                DumpObject::Pod(o) => c.pods.push(*o),
                DumpObject::NodeClaim(o) => c.node_claims.push(Arc::new(*o)),
                DumpObject::DaemonSet(o) => c.daemonsets.push(Arc::new(*o)),
                DumpObject::PodDisruptionBudget(o) => c.pdbs.push(Arc::new(*o)),
                DumpObject::Namespace(o) => c.namespaces.push(Arc::new(*o)),
                DumpObject::PersistentVolumeClaim(o) => c.volume_claims.push(Arc::new(*o)),
                DumpObject::PersistentVolume(o) => c.volumes.push(Arc::new(*o)),
                DumpObject::StorageClass(o) => c.storage_classes.push(Arc::new(*o)),
                DumpObject::CSINode(o) => c.csi_nodes.push(Arc::new(*o)),
                DumpObject::NodePool(o) => self.node_pools.push(*o),
                DumpObject::NodeOverlay(o) => self.node_overlays.push(*o),
                DumpObject::CapacityBuffer(o) => self.capacity_buffers.push(*o),
                DumpObject::PodTemplate(o) => self.pod_templates.push(*o),
                DumpObject::Deployment(o) => self.deployments.push(*o),
                DumpObject::StatefulSet(o) => {
                    c.pod_controllers
                        .push(Arc::new(PodController::from((*o).clone())));
                    self.stateful_sets.push(*o);
                }
                DumpObject::ReplicaSet(o) => {
                    c.pod_controllers
                        .push(Arc::new(PodController::from((*o).clone())));
                    self.replica_sets.push(*o);
                }
                DumpObject::ReplicationController(o) => {
                    c.pod_controllers.push(Arc::new(PodController::from(*o)));
                }
                DumpObject::Service(o) => c.services.push(Arc::new(ServiceSelector::from(*o))),
                DumpObject::NodeClass(o) => self.node_classes.push(*o),
                DumpObject::ResourceClaim(o) => {
                    Arc::make_mut(&mut c.devices).add_claim(Arc::new(*o))
                }
                DumpObject::DeviceClass(o) => Arc::make_mut(&mut c.devices).add_class(Arc::new(*o)),
                DumpObject::ResourceSlice(o) => {
                    Arc::make_mut(&mut c.devices).slices.push(Arc::new(*o));
                }
                DumpObject::Ignored => self.ignored += 1,
                DumpObject::Invalid { path, message } => {
                    return Err(PlanError::Invalid {
                        file: file.to_path_buf(),
                        document: i + 1,
                        path,
                        message,
                    });
                }
            }
        }
        Ok(())
    }
}

/// One object of a dump, converted to its type while the dump is parsed.
enum DumpObject {
    Node(Box<k8s_openapi::api::core::v1::Node>),
    Pod(Box<Pod>),
    NodeClaim(Box<karpenter_api::NodeClaim>),
    DaemonSet(Box<k8s_openapi::api::apps::v1::DaemonSet>),
    PodDisruptionBudget(Box<k8s_openapi::api::policy::v1::PodDisruptionBudget>),
    Namespace(Box<k8s_openapi::api::core::v1::Namespace>),
    PersistentVolumeClaim(Box<k8s_openapi::api::core::v1::PersistentVolumeClaim>),
    PersistentVolume(Box<k8s_openapi::api::core::v1::PersistentVolume>),
    StorageClass(Box<k8s_openapi::api::storage::v1::StorageClass>),
    CSINode(Box<k8s_openapi::api::storage::v1::CSINode>),
    NodePool(Box<NodePool>),
    NodeOverlay(Box<karpenter_api::nodeoverlay::NodeOverlay>),
    CapacityBuffer(Box<karpenter_api::capacitybuffer::CapacityBuffer>),
    PodTemplate(Box<k8s_openapi::api::core::v1::PodTemplate>),
    Deployment(Box<k8s_openapi::api::apps::v1::Deployment>),
    StatefulSet(Box<k8s_openapi::api::apps::v1::StatefulSet>),
    ReplicaSet(Box<k8s_openapi::api::apps::v1::ReplicaSet>),
    ReplicationController(Box<k8s_openapi::api::core::v1::ReplicationController>),
    Service(Box<k8s_openapi::api::core::v1::Service>),
    NodeClass(Box<Value>),
    ResourceClaim(Box<karpenter_api::dra::ResourceClaim>),
    DeviceClass(Box<karpenter_api::dra::DeviceClass>),
    ResourceSlice(Box<karpenter_api::dra::ResourceSlice>),
    /// A kind the planner does not use.
    Ignored,
    /// Not what its kind says: the field and why.
    Invalid {
        path: String,
        message: String,
    },
}

impl FromObject for DumpObject {
    fn from_object(mut object: Value) -> Self {
        defaulting::object(&mut object);
        fn typed<T: serde::de::DeserializeOwned>(
            object: Value,
            variant: fn(Box<T>) -> DumpObject,
        ) -> DumpObject {
            match serde_path_to_error::deserialize(object) {
                Ok(o) => variant(Box::new(o)),
                Err(e) => DumpObject::Invalid {
                    path: e.path().to_string(),
                    message: e.into_inner().to_string(),
                },
            }
        }
        if warnings::is_node_class(&object) {
            return DumpObject::NodeClass(Box::new(object));
        }
        let kind = object
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let core_v1 = object.get("apiVersion").and_then(Value::as_str) == Some("v1");
        match kind {
            "Node" => typed(object, DumpObject::Node),
            "Pod" => typed(object, DumpObject::Pod),
            "NodeClaim" => typed(object, DumpObject::NodeClaim),
            "DaemonSet" => typed(object, DumpObject::DaemonSet),
            "PodDisruptionBudget" => typed(object, DumpObject::PodDisruptionBudget),
            "Namespace" => typed(object, DumpObject::Namespace),
            "PersistentVolumeClaim" => typed(object, DumpObject::PersistentVolumeClaim),
            "PersistentVolume" => typed(object, DumpObject::PersistentVolume),
            "StorageClass" => typed(object, DumpObject::StorageClass),
            "CSINode" => typed(object, DumpObject::CSINode),
            "NodePool" => typed(object, DumpObject::NodePool),
            "NodeOverlay" => typed(object, DumpObject::NodeOverlay),
            "CapacityBuffer" => typed(object, DumpObject::CapacityBuffer),
            "PodTemplate" => typed(object, DumpObject::PodTemplate),
            "Deployment" => typed(object, DumpObject::Deployment),
            "StatefulSet" => typed(object, DumpObject::StatefulSet),
            "ReplicaSet" => typed(object, DumpObject::ReplicaSet),
            // Only the core kinds: a Knative `Service` and the like are other objects.
            "ReplicationController" if core_v1 => typed(object, DumpObject::ReplicationController),
            "Service" if core_v1 => typed(object, DumpObject::Service),
            // Only `resource.k8s.io/v1`: the beta versions' shapes differ.
            "ResourceClaim" | "DeviceClass" | "ResourceSlice"
                if object.get("apiVersion").and_then(Value::as_str)
                    != Some("resource.k8s.io/v1") =>
            {
                DumpObject::Ignored
            }
            "ResourceClaim" => typed(object, DumpObject::ResourceClaim),
            "DeviceClass" => typed(object, DumpObject::DeviceClass),
            "ResourceSlice" => typed(object, DumpObject::ResourceSlice),
            _ => DumpObject::Ignored,
        }
    }

    /// Only a non-List object with a top-level `items` array asks for its items back; no kind
    /// the planner reads has one, so the object is ignored whatever its items were.
    fn into_object(self) -> Value {
        Value::Null
    }
}

/// Plans from the snapshot in `text` (read from `file`), as of `now` (Unix seconds; budget
/// schedules, `consolidateAfter` and `do-not-disrupt` durations are measured against it),
/// every NodePool offering `catalog`.
pub fn plan(
    file: &Path,
    text: &str,
    catalog: &Catalog,
    now: i64,
    feature_gates: FeatureGates,
) -> Result<Plan, PlanError> {
    Ok(plan_from(
        &Dump::read(file, text)?,
        catalog,
        now,
        feature_gates,
    ))
}

/// Plans from `dump`, as of `now` (Unix seconds), every NodePool offering `catalog`, the
/// NodeOverlays applied when their gate is on.
pub fn plan_from(dump: &Dump, catalog: &Catalog, now: i64, feature_gates: FeatureGates) -> Plan {
    plan_dump(
        dump,
        &pool_inputs(dump, catalog, feature_gates),
        catalog,
        now,
        feature_gates,
    )
}

/// The NodePools a round over `dump` launches from: every launchable one (static ones too:
/// disruption replaces their drifted nodes, static capacity keeps their size) offering the
/// catalog, the NodeOverlays applied when their gate is on.
pub fn pool_inputs(dump: &Dump, catalog: &Catalog, gates: FeatureGates) -> Vec<NodePoolInput> {
    let mut pools: Vec<NodePoolInput> = dump
        .node_pools
        .iter()
        .filter(|np| launchable(np))
        .map(|np| NodePoolInput {
            node_pool: np.clone(),
            instance_types: catalog.instance_types.clone(),
        })
        .collect();
    if gates.node_overlay {
        karpenter_core::instancetype::overlay::apply_to_pools(&dump.node_overlays, &mut pools);
    }
    pools
}

/// One round of `parts` over `dump` as of `now` (Unix seconds), launching from `pools`, handed
/// to `f` with its snapshot: the round `plan`, its explanations and the what-if share.
pub fn with_round<T>(
    dump: &Dump,
    pools: &[NodePoolInput],
    catalog: &Catalog,
    now: i64,
    gates: FeatureGates,
    parts: Parts<'_>,
    f: impl FnOnce(&Snapshot<'_, Pod>, &RoundPlan<'_, Pod>) -> T,
) -> T {
    let snapshot = dump.cluster.snapshot(pools, &catalog.provider_labels);
    let virtual_pods = if gates.capacity_buffer {
        buffer_virtual_pods(dump, now)
    } else {
        Vec::new()
    };
    let options = SchedulerOptions {
        provider_labels: catalog.provider_labels.clone(),
        default_constraints: dump.scheduler_config.default_constraints.clone(),
        ignore_dra_requests: dump.ignore_dra_requests,
        ..Default::default()
    };
    let never = || false;
    let round = decide(
        &snapshot,
        &RoundInputs {
            gates,
            now: Timestamp::from_second(now).unwrap_or(Timestamp::UNIX_EPOCH),
            options: &options,
            virtual_pods: &virtual_pods,
            // Provisioning is part of the round: it says which nodes hold buffer headroom.
            buffer_holding: BufferHolding::Unknown,
            repair_policies: &catalog.repair_policies,
            parts,
            interrupt: &never,
        },
    );
    f(&snapshot, &round)
}

/// What a round would decide now over `dump`, with `pools` (each with the instance types it
/// may launch) — the round the controller and the simulator decide through.
pub fn plan_dump(
    dump: &Dump,
    pools: &[NodePoolInput],
    catalog: &Catalog,
    now: i64,
    gates: FeatureGates,
) -> Plan {
    let mut plan = with_round(
        dump,
        pools,
        catalog,
        now,
        gates,
        Parts::ALL,
        |snapshot, round| {
            Plan::from_round(snapshot, round, pools, dump.node_pools.len(), dump.ignored)
        },
    );
    // A dump without NodeClasses (the usual `kubectl get nodes,pods,nodepools,…`) says
    // nothing of them; one with some is taken to hold them all.
    let classes = warnings::node_class_keys(&dump.node_classes);
    let known = (!dump.node_classes.is_empty()).then_some(&classes);
    plan.warnings = warnings::node_pools(&dump.node_pools, known, catalog);
    let pooled = |n: &&Arc<k8s_openapi::api::core::v1::Node>| {
        n.metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(karpenter_api::labels::NODE_POOL_LABEL))
    };
    if dump.cluster.node_claims.is_empty() && dump.cluster.nodes.iter().any(|n| pooled(&n)) {
        plan.warnings.push(
            "the dump holds no NodeClaims: karpenter manages only nodes that have one, so none of its nodes is disrupted (add nodeclaims to the kubectl get)".into(),
        );
    }
    plan.currency = Some(catalog.currency.to_string());
    plan
}

/// The virtual pods of the snapshot's CapacityBuffers, with the status the buffer controller
/// would write now (the status in the dump may be stale or absent).
fn buffer_virtual_pods(dump: &Dump, now: i64) -> Vec<Pod> {
    let workloads = capacity_buffer::Workloads {
        pod_templates: &dump.pod_templates,
        deployments: &dump.deployments,
        stateful_sets: &dump.stateful_sets,
        replica_sets: &dump.replica_sets,
    };
    let at = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::from_second(now)
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
    );
    let buffers: Vec<_> = dump
        .capacity_buffers
        .iter()
        .map(|b| {
            let mut b = b.clone();
            b.status = Some(capacity_buffer::resolved_status(
                &b,
                &capacity_buffer::resolve(&b, &workloads),
                &at,
            ));
            b
        })
        .collect();
    capacity_buffer::all_virtual_pods(&buffers, &workloads, &at)
}

impl SnapshotSummary {
    /// The summary of a snapshot's counts, with the NodePools and the objects not used.
    pub fn new(counts: Counts, nodepools: usize, ignored: usize) -> Self {
        Self {
            nodes: counts.nodes,
            launching: counts.launching,
            bound_pods: counts.bound_pods,
            pending_pods: counts.pending_pods,
            displaced_pods: counts.displaced_pods,
            ignored_pods: counts.ignored_pods,
            nodepools,
            ignored,
        }
    }
}

/// A decided NodeClaim as the plan shows it, with the launch it would get.
fn planned(claim: &NewNodeClaim, pools: &[NodePoolInput], pods: Vec<String>) -> PlannedNodeClaim {
    let launch = pools
        .iter()
        .find(|p| p.node_pool.name() == claim.node_pool)
        .and_then(|p| {
            let object = node_claim_for(claim, &p.node_pool);
            cheapest_launch(&claim.instance_types, &object).map(|(it, o)| PlannedLaunch {
                instance_type: it.name.clone(),
                zone: o.zone.clone(),
                capacity_type: o.capacity_type.clone(),
                price_per_hour: o.price,
            })
        });
    PlannedNodeClaim {
        nodepool: claim.node_pool.clone(),
        instance_types: claim
            .instance_types
            .iter()
            .map(|it| it.name.clone())
            .collect(),
        price_per_hour: claim.cheapest_price(),
        pods,
        requirements: claim.requirements.iter().map(ToString::to_string).collect(),
        launch,
    }
}

impl Plan {
    /// The report of a round over `snapshot` (whoever built it: `plan` over a dump, or the
    /// controller over its state), launching from `pools`; `nodepools` and `ignored` count the
    /// NodePools and the objects of kinds the planner does not use.
    pub fn from_round<P: ObservedPod>(
        snapshot: &Snapshot<'_, P>,
        round: &RoundPlan<'_, P>,
        pools: &[NodePoolInput],
        nodepools: usize,
        ignored: usize,
    ) -> Self {
        let launching: BTreeSet<&str> = snapshot
            .nodes
            .iter()
            .filter(|n| n.launching())
            .map(|n| n.name())
            .collect();
        let mut provisioning = Provisioning::default();
        if let Some(p) = &round.provisioning {
            for claim in &p.results.new_node_claims {
                let pods = claim.pods.iter().map(|&i| pods::key(&p.batch[i])).collect();
                provisioning.nodeclaims.push(planned(claim, pools, pods));
            }
            for (node, placed) in &p.results.existing_nodes {
                let node = if launching.contains(node.as_str()) {
                    format!("nodeclaim/{node}")
                } else {
                    node.clone()
                };
                for &i in placed {
                    provisioning.existing_node_placements.push(Placement {
                        pod: pods::key(&p.batch[i]),
                        node: node.clone(),
                    });
                }
            }
            for (i, reason) in &p.results.pod_errors {
                provisioning.unschedulable.push(Unschedulable {
                    pod: pods::key(&p.batch[*i]),
                    reason: reason.clone(),
                });
            }
        }
        provisioning.ignored = snapshot
            .rejected
            .iter()
            .map(|(pod, reason)| Unschedulable {
                pod: pods::key(*pod),
                reason: reason.clone(),
            })
            .collect();
        let mut disruption = Disruption::default();
        // Expiration deletes, budgets or not, whatever disruption decides.
        for e in &round.expired {
            disruption.actions.push(DisruptionAction {
                reason: "Expired".into(),
                method: "expiration".into(),
                nodes: vec![e.node.to_string()],
                replacements: Vec::new(),
                // Its pods need room elsewhere: nothing is saved for sure.
                savings_per_hour: 0.0,
            });
        }
        if let Some(round::Disruption::Decided { decision, .. }) = &round.disruption {
            let expired = |node: &str| round.expired.iter().any(|e| e.node == node);
            disruption.actions.extend(decision.commands.iter().map(|c| {
                DisruptionAction {
                    reason: c.reason.as_str().into(),
                    method: c.method.as_str().into(),
                    nodes: c.candidates.clone(),
                    replacements: c
                        .replacements
                        .iter()
                        .map(|r| planned(r, pools, Vec::new()))
                        .collect(),
                    savings_per_hour: c.savings_per_hour,
                }
            }));
            disruption.blocked = decision
                .blocked
                .iter()
                .filter(|(node, _)| !expired(node))
                .map(|(node, block)| Kept {
                    node: node.clone(),
                    reason: block.reason.clone(),
                })
                .collect();
        }
        let mut static_capacity = StaticCapacity::default();
        for s in &round.static_capacity {
            match &s.action {
                static_capacity::Action::Create(n) => {
                    if let Some(claim) = &s.node_claim {
                        let planned = planned(claim, pools, Vec::new());
                        static_capacity
                            .nodeclaims
                            .extend(std::iter::repeat_n(planned, *n));
                    }
                }
                static_capacity::Action::Delete(names) => {
                    static_capacity.deleted.extend(names.iter().cloned())
                }
                static_capacity::Action::NodeLimitReached => {
                    static_capacity.node_limit_reached.push(s.node_pool.clone())
                }
                static_capacity::Action::None => {}
            }
        }
        let mut repair = Repairs::default();
        for judged in &round.repairs {
            let name = judged.node.metadata.name.clone().unwrap_or_default();
            match judged.repair {
                Repair::Healthy | Repair::Tolerated { .. } => {}
                Repair::Blocked { scope } => repair.blocked.push(Kept {
                    node: name,
                    reason: scope.blocked_message().to_string(),
                }),
                Repair::Repair { policy } => repair.repaired.push(PlannedRepair {
                    node: name,
                    nodeclaim: judged.claim.metadata.name.clone().unwrap_or_default(),
                    condition: format!("{}={}", policy.condition_type, policy.condition_status),
                }),
            }
        }
        Plan {
            provisioning,
            static_capacity,
            repair,
            disruption,
            snapshot: SnapshotSummary::new(snapshot.counts(), nodepools, ignored),
            warnings: Vec::new(),
            currency: None,
        }
    }

    /// The plan for people.
    pub fn to_text(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let money = |amount: f64| match &self.currency {
            Some(currency) => karpenter_cloudprovider::catalog::format_price(currency, amount),
            None => format!("{amount:.4}"),
        };
        let per_hour =
            |amount: Option<f64>| amount.map_or("?".into(), |p| format!("{}/h", money(p)));
        if !self.warnings.is_empty() {
            let _ = writeln!(out, "Warnings: {}", self.warnings.len());
            for w in &self.warnings {
                let _ = writeln!(out, "  {w}");
            }
            out.push('\n');
        }
        let s = &self.snapshot;
        let _ = writeln!(
            out,
            "Snapshot: {} nodes ({} more launching), {} NodePools, {} bound pods, {} pending pods",
            s.nodes, s.launching, s.nodepools, s.bound_pods, s.pending_pods
        );
        if s.displaced_pods > 0 {
            let _ = writeln!(
                out,
                "  {} pods of nodes being deleted need a new node",
                s.displaced_pods
            );
        }
        if s.ignored_pods > 0 {
            let _ = writeln!(
                out,
                "  {} unbound pods ignored (not yet marked unschedulable by kube-scheduler, nominated, DaemonSet, static, finished or deleting, or listed under \"Pods ignored\")",
                s.ignored_pods
            );
        }
        let p = &self.provisioning;
        let _ = writeln!(out, "\nWould launch {} NodeClaim(s)", p.nodeclaims.len());
        for c in &p.nodeclaims {
            let shown: Vec<&str> = c
                .instance_types
                .iter()
                .take(5)
                .map(String::as_str)
                .collect();
            let more = c.instance_types.len().saturating_sub(5);
            let price = per_hour(c.price_per_hour);
            let _ = writeln!(
                out,
                "  nodepool {}: from {price}, {}{} for {} pod(s): {}",
                c.nodepool,
                shown.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                },
                c.pods.len(),
                c.pods.join(", ")
            );
            if let Some(l) = &c.launch {
                let _ = writeln!(
                    out,
                    "    launching {} {} in {} at {}",
                    l.instance_type,
                    l.capacity_type,
                    l.zone,
                    per_hour(Some(l.price_per_hour))
                );
            }
        }
        let _ = writeln!(
            out,
            "\nPending pods that fit on existing or launching nodes: {}",
            p.existing_node_placements.len()
        );
        for placement in &p.existing_node_placements {
            let _ = writeln!(out, "  {} → {}", placement.pod, placement.node);
        }
        let _ = writeln!(
            out,
            "\nPods that cannot be scheduled: {}",
            p.unschedulable.len()
        );
        for u in &p.unschedulable {
            let _ = writeln!(out, "  {}: {}", u.pod, u.reason);
        }
        if !p.ignored.is_empty() {
            let _ = writeln!(out, "\nPods ignored: {}", p.ignored.len());
            for u in &p.ignored {
                let _ = writeln!(out, "  {}: {}", u.pod, u.reason);
            }
        }
        let st = &self.static_capacity;
        if !st.is_empty() {
            let _ = writeln!(
                out,
                "\nStatic capacity: launch {} NodeClaim(s), delete {}",
                st.nodeclaims.len(),
                st.deleted.len()
            );
            for c in &st.nodeclaims {
                let price = per_hour(c.price_per_hour);
                let first = c.instance_types.first().map_or("?", String::as_str);
                let _ = writeln!(out, "  nodepool {}: from {price} ({first})", c.nodepool);
            }
            if !st.deleted.is_empty() {
                let _ = writeln!(out, "  deleting {}", st.deleted.join(", "));
            }
            for p in &st.node_limit_reached {
                let _ = writeln!(out, "  nodepool {p}: node limit reached");
            }
        }
        let r = &self.repair;
        if !r.is_empty() {
            let _ = writeln!(out, "\nNode repair: replace {}", r.repaired.len());
            for p in &r.repaired {
                let _ = writeln!(
                    out,
                    "  {} (nodeclaim {}): {} past its toleration",
                    p.node, p.nodeclaim, p.condition
                );
            }
            for k in &r.blocked {
                let _ = writeln!(out, "  {} held back: {}", k.node, k.reason);
            }
        }
        let d = &self.disruption;
        let _ = writeln!(out, "\nDisruption actions: {}", d.actions.len());
        for a in &d.actions {
            let replacements: Vec<String> = a
                .replacements
                .iter()
                .map(|r| {
                    let price = per_hour(r.price_per_hour);
                    format!(
                        "nodepool {} from {price} ({})",
                        r.nodepool,
                        r.instance_types.first().map_or("?", String::as_str)
                    )
                })
                .collect();
            let _ = writeln!(
                out,
                "  {} ({}): {} {}, saving {}",
                a.method,
                a.reason,
                if replacements.is_empty() {
                    "delete"
                } else {
                    "replace"
                },
                a.nodes.join(", "),
                per_hour(Some(a.savings_per_hour))
            );
            if !replacements.is_empty() {
                let _ = writeln!(out, "    with {}", replacements.join("; "));
            }
        }
        let _ = writeln!(out, "\nNodes left as they are: {}", d.blocked.len());
        for k in &d.blocked {
            let _ = writeln!(out, "  {}: {}", k.node, k.reason);
        }
        out
    }
}
