//! Scenarios: ordinary Kubernetes manifests plus one `Scenario` document of timed steps and
//! expectations. See `docs/simulator.md` for the format.

use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::StorageClass;
use karpenter_api::NodePool;
use karpenter_api::crd::Crd;
use karpenter_api::duration::parse_go_duration;
use karpenter_api::validation::{ProblemKind, validate_object};
use serde::Deserialize;
use serde_json::Value;

use karpenter_planner::manifest::{ManifestError, parse_documents};

/// The `apiVersion` of the Scenario document.
pub const API_VERSION: &str = "simulation.karpenter-rs.dev/v1alpha1";

/// Why a scenario cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file is unreadable or not YAML.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// A document is wrong.
    #[error("{file}: document {document}: {path}: {message}")]
    Invalid {
        /// The file.
        file: PathBuf,
        /// The document's position in the file, from 1.
        document: usize,
        /// The field.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The file has no Scenario document, or more than one.
    #[error("{file}: {message}")]
    Structure {
        /// The file.
        file: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// A duration in a scenario: a Go duration such as `90s` or `10m`, in whole seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Seconds(pub u64);

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        let d = parse_go_duration(&text).map_err(serde::de::Error::custom)?;
        Ok(Seconds(d.as_secs()))
    }
}

/// A workload to resize.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Scale {
    /// `Deployment`, `ReplicaSet` or `StatefulSet`.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Its namespace (`default` when unset).
    #[serde(default)]
    pub namespace: Option<String>,
    /// The new replica count.
    pub replicas: i32,
}

/// An object to delete.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ObjectRef {
    /// Its kind.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Its namespace (`default` when unset, ignored for cluster-scoped kinds).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// Nodes the cloud takes back (a spot reclaim).
#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Interrupt {
    /// A node by name.
    #[serde(default)]
    pub node: Option<String>,
    /// Otherwise the oldest nodes of this capacity type (`spot` by default).
    #[serde(default)]
    pub capacity_type: Option<String>,
    /// How many (1 by default).
    #[serde(default)]
    pub count: Option<usize>,
}

/// A node condition that goes bad (or recovers), as a node problem detector or the kubelet
/// would report it: what node repair (gate `NodeRepair`) acts on.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeConditionStep {
    /// A node by name.
    #[serde(default)]
    pub node: Option<String>,
    /// Otherwise the oldest nodes of this NodePool (any NodePool when unset).
    #[serde(default)]
    pub node_pool: Option<String>,
    /// How many (1 by default).
    #[serde(default)]
    pub count: Option<usize>,
    /// The condition type (`Ready` by default).
    #[serde(default = "ready", rename = "type")]
    pub type_: String,
    /// Its new status (`False` by default).
    #[serde(default = "false_")]
    pub status: String,
}

fn ready() -> String {
    "Ready".into()
}

fn false_() -> String {
    "False".into()
}

/// One timed step; exactly one action is set.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StepSpec {
    /// When, from the start.
    pub at: Seconds,
    /// Resize a workload.
    #[serde(default)]
    pub scale: Option<Scale>,
    /// Create or replace objects.
    #[serde(default)]
    pub apply: Option<Vec<Value>>,
    /// Delete an object.
    #[serde(default)]
    pub delete: Option<ObjectRef>,
    /// Take nodes away.
    #[serde(default)]
    pub interrupt: Option<Interrupt>,
    /// Set a condition on nodes.
    #[serde(default)]
    pub node_condition: Option<NodeConditionStep>,
}

/// A bound on a count.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct Range {
    /// At least.
    #[serde(default)]
    pub min: Option<f64>,
    /// At most.
    #[serde(default)]
    pub max: Option<f64>,
}

impl Range {
    /// Whether `value` is within.
    pub fn contains(&self, value: f64) -> bool {
        self.min.is_none_or(|m| value >= m - 1e-9) && self.max.is_none_or(|m| value <= m + 1e-9)
    }
}

/// What must hold at a time (or at the end); a failed expectation fails the run.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Expectation {
    /// When; unset means at the end.
    #[serde(default)]
    pub at: Option<Seconds>,
    /// Pods waiting for a node.
    #[serde(default)]
    pub pending_pods: Option<Range>,
    /// Nodes (launched or registered, not terminated).
    #[serde(default)]
    pub nodes: Option<Range>,
    /// Cost per hour of the nodes.
    #[serde(default)]
    pub cost_per_hour: Option<Range>,
    /// Total cost so far.
    #[serde(default)]
    pub cost_total: Option<Range>,
}

/// The Scenario document's spec.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScenarioSpec {
    /// The instance-type catalog (`kwok` by default).
    #[serde(default)]
    pub catalog: Option<String>,
    /// How long to simulate.
    pub duration: Seconds,
    /// From a NodeClaim's creation to the instance running (20s by default).
    #[serde(default)]
    pub launch_delay: Option<Seconds>,
    /// From the instance running to the node Ready (30s by default).
    #[serde(default)]
    pub registration_delay: Option<Seconds>,
    /// The spot price as a share of the on-demand price, for catalogs whose data has none
    /// (`aws`, `azure`, `alibaba`): every on-demand offering gets a spot offering at this
    /// share. Unset, those catalogs offer on-demand only.
    #[serde(default, deserialize_with = "spot_price_ratio")]
    pub spot_price_ratio: Option<f64>,
    /// Upstream's feature gates, as its `FEATURE_GATES` string
    /// (`SpotToSpotConsolidation=true`): the gates it names, over the command line's (or
    /// upstream's defaults).
    #[serde(default, deserialize_with = "feature_gates")]
    pub feature_gates: karpenter_core::feature_gates::GateSettings,
    /// The cluster's kube-scheduler default topology spread, as the controller's
    /// `--scheduler-config` takes it (`{podTopologySpread: {defaultConstraints: [...]}}`):
    /// pods that declare no spread get it, with the selector deduced from their Services and
    /// workload, in karpenter's decisions and in the kube-scheduler stand-in alike.
    #[serde(default, deserialize_with = "scheduler_config")]
    pub scheduler_config:
        karpenter_core::provisioning::scheduling::default_constraints::SchedulerConfiguration,
    /// Capacity reservations in the catalog (an EC2 On-Demand Capacity Reservation and the
    /// like): instances of one type in one zone, already paid for. Launches take them first
    /// and deletions give them back (see `docs/reserved-capacity.md`).
    #[serde(default)]
    pub capacity_reservations: Vec<CapacityReservation>,
    /// Timed steps.
    #[serde(default)]
    pub steps: Vec<StepSpec>,
    /// Expectations.
    #[serde(default)]
    pub expect: Vec<Expectation>,
}

/// A capacity reservation a scenario declares.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CapacityReservation {
    /// The reservation's id (`cr-0123…` on AWS); unique in the scenario.
    pub id: String,
    /// The instance type it holds.
    pub instance_type: String,
    /// The zone it is in.
    pub zone: String,
    /// How many instances it holds.
    pub count: u32,
    /// The node label a node launched into it carries the id in. By default the catalog's
    /// provider label for it (`karpenter.k8s.aws/capacity-reservation-id` on `aws`), else
    /// `simulation.karpenter-rs.dev/reservation-id`.
    #[serde(default)]
    pub label: Option<String>,
}

fn spot_price_ratio<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    let ratio = f64::deserialize(d)?;
    if ratio > 0.0 && ratio <= 1.0 {
        Ok(Some(ratio))
    } else {
        Err(serde::de::Error::custom(format!(
            "{ratio} is not a share of the on-demand price: it must be above 0 and at most 1"
        )))
    }
}

fn scheduler_config<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<
    karpenter_core::provisioning::scheduling::default_constraints::SchedulerConfiguration,
    D::Error,
> {
    let value = Value::deserialize(d)?;
    karpenter_core::provisioning::scheduling::default_constraints::SchedulerConfiguration::from_value(value)
        .map_err(serde::de::Error::custom)
}

fn feature_gates<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<karpenter_core::feature_gates::GateSettings, D::Error> {
    let s = String::deserialize(d)?;
    s.parse().map_err(serde::de::Error::custom)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ScenarioDocument {
    #[allow(dead_code)]
    api_version: String,
    #[allow(dead_code)]
    kind: String,
    metadata: ScenarioMetadata,
    spec: ScenarioSpec,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioMetadata {
    name: String,
}

/// An object a scenario creates.
#[derive(Clone, Debug)]
pub enum Object {
    /// A NodePool.
    NodePool(Box<NodePool>),
    /// A NodeOverlay (applied when the scenario turns the `NodeOverlay` gate on).
    NodeOverlay(Box<karpenter_api::nodeoverlay::NodeOverlay>),
    /// A provider NodeClass, kept as written.
    NodeClass(Value),
    /// A Deployment.
    Deployment(Box<Deployment>),
    /// A ReplicaSet.
    ReplicaSet(Box<ReplicaSet>),
    /// A StatefulSet.
    StatefulSet(Box<StatefulSet>),
    /// A Job; it runs for the duration in its `simulation.karpenter-rs.dev/run-for` annotation.
    Job(Box<Job>),
    /// A bare Pod.
    Pod(Box<Pod>),
    /// A DaemonSet.
    DaemonSet(Box<DaemonSet>),
    /// A PodDisruptionBudget.
    PodDisruptionBudget(Box<PodDisruptionBudget>),
    /// A node that exists from the start (not managed by karpenter).
    Node(Box<Node>),
    /// A Namespace (its labels answer affinity terms' `namespaceSelector`).
    Namespace(Box<Namespace>),
    /// A Service (its pod selector: default topology spread deduces pods' selectors from it).
    Service(Box<k8s_openapi::api::core::v1::Service>),
    /// A PersistentVolumeClaim, PersistentVolume or StorageClass: what pods' volumes require
    /// of their node.
    Storage(Storage),
    /// A CapacityBuffer (acted on when the scenario turns the `CapacityBuffer` gate on).
    CapacityBuffer(Box<karpenter_api::capacitybuffer::CapacityBuffer>),
    /// A PodTemplate (the shape a CapacityBuffer's `podTemplateRef` names).
    PodTemplate(Box<k8s_openapi::api::core::v1::PodTemplate>),
}

/// The storage objects a scenario may hold.
#[derive(Clone, Debug)]
pub enum Storage {
    /// A PersistentVolumeClaim.
    Claim(Box<PersistentVolumeClaim>),
    /// A PersistentVolume.
    Volume(Box<PersistentVolume>),
    /// A StorageClass.
    Class(Box<StorageClass>),
}

/// The annotation giving a Job's run time.
pub const RUN_FOR_ANNOTATION: &str = "simulation.karpenter-rs.dev/run-for";

/// A timed action, with its objects parsed.
#[derive(Clone, Debug)]
pub enum Action {
    /// Resize a workload.
    Scale(Scale),
    /// Create or replace objects.
    Apply(Vec<Object>),
    /// Delete an object.
    Delete(ObjectRef),
    /// Take nodes away.
    Interrupt(Interrupt),
    /// Set a condition on nodes.
    NodeCondition(NodeConditionStep),
}

/// A loaded scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Its name.
    pub name: String,
    /// Its settings.
    pub spec: ScenarioSpec,
    /// The objects that exist at the start.
    pub objects: Vec<Object>,
    /// The steps, in time order.
    pub steps: Vec<(u64, Action)>,
}

fn invalid(
    file: &Path,
    document: usize,
    path: impl Into<String>,
    message: impl Into<String>,
) -> ScenarioError {
    ScenarioError::Invalid {
        file: file.to_path_buf(),
        document,
        path: path.into(),
        message: message.into(),
    }
}

fn typed<T: serde::de::DeserializeOwned>(
    file: &Path,
    document: usize,
    prefix: &str,
    value: Value,
) -> Result<T, ScenarioError> {
    let join = |path: String| match (prefix.is_empty(), path.as_str()) {
        (_, "." | "") => prefix.to_string(),
        (true, p) => p.to_string(),
        (false, p) => format!("{prefix}.{p}"),
    };
    // Kubernetes' types skip fields they do not know; a scenario should not (a typo such as
    // `replicaz` would silently change the run).
    let mut unknown = Vec::new();
    // serde_ignored writes `?` for each Option it passes through; the field path has none.
    let mut record = |path: serde_ignored::Path<'_>| {
        unknown.push(
            path.to_string()
                .split('.')
                .filter(|s| *s != "?")
                .collect::<Vec<_>>()
                .join("."),
        )
    };
    let parsed =
        serde_path_to_error::deserialize(serde_ignored::Deserializer::new(value, &mut record));
    let parsed: T = parsed.map_err(|e| {
        let path = join(e.path().to_string());
        invalid(file, document, path, e.into_inner().to_string())
    })?;
    if let Some(field) = unknown.first() {
        return Err(invalid(
            file,
            document,
            join(field.clone()),
            "unknown field",
        ));
    }
    Ok(parsed)
}

/// Parses one manifest into an object, checking the kinds of `crds` (karpenter's and the
/// providers' NodeClasses) as the API server would.
pub fn parse_object(
    file: &Path,
    document: usize,
    prefix: &str,
    value: Value,
    crds: &[Crd],
) -> Result<Object, ScenarioError> {
    let api_version = value
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let kind = value
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let at = |field: &str| {
        if prefix.is_empty() {
            field.to_string()
        } else {
            format!("{prefix}.{field}")
        }
    };
    if let Some(report) = validate_object(crds, &value)
        && let Some(problem) = report
            .problems
            .iter()
            .find(|p| p.kind == ProblemKind::Rejected)
    {
        return Err(invalid(
            file,
            document,
            at(&problem.path),
            problem.message.clone(),
        ));
    }
    let mut value = value;
    karpenter_planner::defaulting::object(&mut value);
    Ok(match (api_version.as_str(), kind.as_str()) {
        ("karpenter.sh/v1", "NodePool") => {
            Object::NodePool(Box::new(typed(file, document, prefix, value)?))
        }
        ("karpenter.sh/v1alpha1", "NodeOverlay") => {
            Object::NodeOverlay(Box::new(typed(file, document, prefix, value)?))
        }
        _ if karpenter_planner::warnings::is_node_class(&value) => Object::NodeClass(value),
        ("apps/v1", "Deployment") => {
            Object::Deployment(Box::new(typed(file, document, prefix, value)?))
        }
        ("apps/v1", "ReplicaSet") => {
            Object::ReplicaSet(Box::new(typed(file, document, prefix, value)?))
        }
        ("apps/v1", "StatefulSet") => {
            Object::StatefulSet(Box::new(typed(file, document, prefix, value)?))
        }
        ("apps/v1", "DaemonSet") => {
            Object::DaemonSet(Box::new(typed(file, document, prefix, value)?))
        }
        ("batch/v1", "Job") => Object::Job(Box::new(typed(file, document, prefix, value)?)),
        ("v1", "Pod") => Object::Pod(Box::new(typed(file, document, prefix, value)?)),
        ("v1", "Node") => Object::Node(Box::new(typed(file, document, prefix, value)?)),
        ("v1", "Namespace") => Object::Namespace(Box::new(typed(file, document, prefix, value)?)),
        ("v1", "Service") => Object::Service(Box::new(typed(file, document, prefix, value)?)),
        ("v1", "PodTemplate") => {
            Object::PodTemplate(Box::new(typed(file, document, prefix, value)?))
        }
        ("autoscaling.x-k8s.io/v1beta1", "CapacityBuffer") => {
            Object::CapacityBuffer(Box::new(typed(file, document, prefix, value)?))
        }
        ("v1", "PersistentVolumeClaim") => Object::Storage(Storage::Claim(Box::new(typed(
            file, document, prefix, value,
        )?))),
        ("v1", "PersistentVolume") => Object::Storage(Storage::Volume(Box::new(typed(
            file, document, prefix, value,
        )?))),
        ("storage.k8s.io/v1", "StorageClass") => Object::Storage(Storage::Class(Box::new(typed(
            file, document, prefix, value,
        )?))),
        ("policy/v1", "PodDisruptionBudget") => {
            Object::PodDisruptionBudget(Box::new(typed(file, document, prefix, value)?))
        }
        _ => {
            return Err(invalid(
                file,
                document,
                at("kind"),
                format!(
                    "{api_version} {kind} is not supported in scenarios (NodePool, NodeOverlay, NodeClasses, Deployment, ReplicaSet, StatefulSet, Job, Pod, DaemonSet, PodDisruptionBudget, Node, Namespace, Service, PersistentVolumeClaim, PersistentVolume, StorageClass, Scenario)"
                ),
            ));
        }
    })
}

/// Parses scenario text; objects of the kinds of `crds` are validated as the API server would.
pub fn parse(file: &Path, text: &str, crds: &[Crd]) -> Result<Scenario, ScenarioError> {
    let documents = parse_documents(file, text)?;
    let mut scenario: Option<(String, ScenarioSpec, usize)> = None;
    let mut objects = Vec::new();
    for doc in documents {
        let is_scenario = doc.object.get("kind").and_then(Value::as_str) == Some("Scenario");
        if is_scenario {
            let api_version = doc
                .object
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if api_version != API_VERSION {
                return Err(invalid(
                    file,
                    doc.index,
                    "apiVersion",
                    format!("expected {API_VERSION}, not {api_version:?}"),
                ));
            }
            if scenario.is_some() {
                return Err(ScenarioError::Structure {
                    file: file.to_path_buf(),
                    message: format!("document {}: a file holds one Scenario document", doc.index),
                });
            }
            let parsed: ScenarioDocument = typed(file, doc.index, "", doc.object)?;
            scenario = Some((parsed.metadata.name, parsed.spec, doc.index));
        } else {
            objects.push(parse_object(file, doc.index, "", doc.object, crds)?);
        }
    }
    let Some((name, spec, document)) = scenario else {
        return Err(ScenarioError::Structure {
            file: file.to_path_buf(),
            message: format!("no Scenario document (kind: Scenario, apiVersion: {API_VERSION})"),
        });
    };
    for (i, r) in spec.capacity_reservations.iter().enumerate() {
        let path = format!("spec.capacityReservations[{i}]");
        let empty = [
            ("id", &r.id),
            ("instanceType", &r.instance_type),
            ("zone", &r.zone),
        ]
        .into_iter()
        .find(|(_, v)| v.is_empty());
        if let Some((field, _)) = empty {
            return Err(invalid(
                file,
                document,
                format!("{path}.{field}"),
                "must not be empty",
            ));
        }
        if spec.capacity_reservations[..i].iter().any(|o| o.id == r.id) {
            return Err(invalid(
                file,
                document,
                format!("{path}.id"),
                format!("{:?} is declared twice", r.id),
            ));
        }
    }
    let mut steps = Vec::new();
    for (i, step) in spec.steps.iter().enumerate() {
        let path = format!("spec.steps[{i}]");
        let set = [
            step.scale.is_some(),
            step.apply.is_some(),
            step.delete.is_some(),
            step.interrupt.is_some(),
            step.node_condition.is_some(),
        ]
        .iter()
        .filter(|b| **b)
        .count();
        if set != 1 {
            return Err(invalid(
                file,
                document,
                path,
                "a step takes exactly one of scale, apply, delete, interrupt, nodeCondition",
            ));
        }
        let action = if let Some(s) = &step.scale {
            if !matches!(s.kind.as_str(), "Deployment" | "ReplicaSet" | "StatefulSet") {
                return Err(invalid(
                    file,
                    document,
                    format!("{path}.scale.kind"),
                    "only Deployment, ReplicaSet and StatefulSet can be scaled",
                ));
            }
            if s.replicas < 0 {
                return Err(invalid(
                    file,
                    document,
                    format!("{path}.scale.replicas"),
                    "must not be negative",
                ));
            }
            Action::Scale(s.clone())
        } else if let Some(items) = &step.apply {
            let parsed = items
                .iter()
                .enumerate()
                .map(|(j, v)| {
                    parse_object(
                        file,
                        document,
                        &format!("{path}.apply[{j}]"),
                        v.clone(),
                        crds,
                    )
                })
                .collect::<Result<_, _>>()?;
            Action::Apply(parsed)
        } else if let Some(d) = &step.delete {
            Action::Delete(d.clone())
        } else if let Some(c) = &step.node_condition {
            if !matches!(c.status.as_str(), "True" | "False" | "Unknown") {
                return Err(invalid(
                    file,
                    document,
                    format!("{path}.nodeCondition.status"),
                    "must be True, False or Unknown",
                ));
            }
            Action::NodeCondition(c.clone())
        } else {
            Action::Interrupt(step.interrupt.clone().unwrap_or_default())
        };
        if step.at > spec.duration {
            return Err(invalid(
                file,
                document,
                format!("{path}.at"),
                "is after the end of the scenario (spec.duration)",
            ));
        }
        steps.push((step.at.0, action));
    }
    steps.sort_by_key(|(t, _)| *t);
    Ok(Scenario {
        name,
        spec,
        objects,
        steps,
    })
}

/// Reads and parses a scenario file (see [`parse`]).
pub fn load(file: &Path, crds: &[Crd]) -> Result<Scenario, ScenarioError> {
    let text = std::fs::read_to_string(file).map_err(|source| ManifestError::Read {
        path: file.to_path_buf(),
        source,
    })?;
    parse(file, &text, crds)
}

/// The scenario `karpenter-rs simulate` runs when given none.
pub const BUILT_IN: &str = include_str!("../scenarios/cpu-burst.yaml");

/// Parses the built-in scenario (its NodeClass is not checked: no provider's CRDs are here).
pub fn built_in() -> Scenario {
    parse(
        Path::new("built-in:cpu-burst.yaml"),
        BUILT_IN,
        &karpenter_api::crd::CORE,
    )
    .expect("the built-in scenario is valid")
}

impl Object {
    /// Its kind, namespace (empty for cluster-scoped kinds) and name, for the kinds a step can
    /// aim at.
    fn key(&self) -> Option<(&'static str, String, String)> {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
        let namespaced = |kind, m: &ObjectMeta| {
            Some((
                kind,
                m.namespace.clone().unwrap_or_else(|| "default".into()),
                m.name.clone().unwrap_or_default(),
            ))
        };
        let cluster =
            |kind, m: &ObjectMeta| Some((kind, String::new(), m.name.clone().unwrap_or_default()));
        match self {
            Object::NodePool(o) => cluster("NodePool", &o.metadata),
            Object::Deployment(o) => namespaced("Deployment", &o.metadata),
            Object::ReplicaSet(o) => namespaced("ReplicaSet", &o.metadata),
            Object::StatefulSet(o) => namespaced("StatefulSet", &o.metadata),
            Object::Job(o) => namespaced("Job", &o.metadata),
            Object::Pod(o) => namespaced("Pod", &o.metadata),
            Object::DaemonSet(o) => namespaced("DaemonSet", &o.metadata),
            Object::PodDisruptionBudget(o) => namespaced("PodDisruptionBudget", &o.metadata),
            Object::NodeOverlay(o) => cluster("NodeOverlay", &o.metadata),
            Object::CapacityBuffer(o) => namespaced("CapacityBuffer", &o.metadata),
            Object::Node(o) => cluster("Node", &o.metadata),
            Object::Service(o) => namespaced("Service", &o.metadata),
            _ => None,
        }
    }
}

impl Scenario {
    /// Every object the scenario creates, at the start or in a step.
    pub fn all_objects(&self) -> impl Iterator<Item = &Object> {
        self.objects
            .iter()
            .chain(self.steps.iter().flat_map(|(_, a)| match a {
                Action::Apply(objects) => objects.as_slice(),
                _ => &[],
            }))
    }

    /// What the simulation decides that a controller would not: steps aimed at missing
    /// objects, NodePools whose NodeClass is missing or of another provider than `catalog`,
    /// spot on a catalog without spot prices.
    pub fn warnings(&self, catalog: &crate::catalog::Catalog) -> Vec<String> {
        let pools: Vec<NodePool> = self
            .all_objects()
            .filter_map(|o| match o {
                Object::NodePool(np) => Some((**np).clone()),
                _ => None,
            })
            .collect();
        let classes = karpenter_planner::warnings::node_class_keys(self.all_objects().filter_map(
            |o| match o {
                Object::NodeClass(v) => Some(v),
                _ => None,
            },
        ));
        let mut warnings = self.step_warnings();
        warnings.extend(karpenter_planner::warnings::node_pools(
            &pools,
            Some(&classes),
            catalog,
        ));
        warnings
    }

    /// The steps aimed at an object that does not exist when they run (a mistyped name, an
    /// object deleted by an earlier step): the simulation carries on, as a cluster would
    /// answer `NotFound`, and the report says so.
    pub fn step_warnings(&self) -> Vec<String> {
        let mut present: std::collections::BTreeSet<(&'static str, String, String)> =
            self.objects.iter().filter_map(Object::key).collect();
        let mut warnings = Vec::new();
        let ns = |n: &Option<String>| n.clone().unwrap_or_else(|| "default".into());
        let mut missing = |at: u64, what: String| {
            warnings.push(format!(
                "step at {at}s: {what} does not exist then; the step does nothing"
            ))
        };
        for (at, action) in &self.steps {
            match action {
                Action::Apply(objects) => present.extend(objects.iter().filter_map(Object::key)),
                Action::Scale(s) => {
                    let key = (s.kind.as_str(), ns(&s.namespace), s.name.clone());
                    if !present
                        .iter()
                        .any(|(k, n, m)| (*k, n, m) == (key.0, &key.1, &key.2))
                    {
                        missing(*at, format!("{} {}/{}", s.kind, key.1, s.name));
                    }
                }
                Action::Delete(r) => {
                    let found = present
                        .iter()
                        .find(|(k, n, m)| {
                            *k == r.kind && *m == r.name && (n.is_empty() || *n == ns(&r.namespace))
                        })
                        .cloned();
                    match found {
                        Some(key) => {
                            present.remove(&key);
                        }
                        None => missing(*at, format!("{} {}", r.kind, r.name)),
                    }
                }
                Action::NodeCondition(c) => {
                    if let Some(pool) = &c.node_pool
                        && !present
                            .iter()
                            .any(|(k, _, m)| *k == "NodePool" && m == pool)
                    {
                        missing(*at, format!("NodePool {pool}"));
                    }
                }
                Action::Interrupt(_) => {}
            }
        }
        warnings
    }
}
