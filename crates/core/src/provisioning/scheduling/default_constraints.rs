//! Cluster-wide default topology spread (upstream's `--scheduler-config`): kube-scheduler's
//! PodTopologySpread plugin may be configured with `defaultConstraints` that it applies to
//! every pod declaring no `topologySpreadConstraints` of its own. Karpenter must apply the
//! same ones, or it launches nodes where the scheduler will not put the pods.
//!
//! A default constraint carries no selector: kube-scheduler deduces one per pod (its
//! `DefaultSelector`) from the Services that select the pod and from the pod's controller when
//! that is a ReplicationController, ReplicaSet or StatefulSet. A pod for which nothing can be
//! deduced gets no default (an empty selector would count every pod of its namespace).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::TopologySpreadConstraint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use crate::scheduling::selector;
use crate::state::pods::ObservedPod;
use crate::state::selectors::{ControllerKind, PodController, ServiceSelector};

/// The parts of kube-scheduler's configuration karpenter mirrors (upstream's
/// `SchedulerConfiguration`): `podTopologySpread.defaultConstraints`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SchedulerConfiguration {
    /// Applied to every pod that declares no topology spread constraints of its own.
    pub default_constraints: Vec<TopologySpreadConstraint>,
}

/// Why a scheduler configuration was refused.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("scheduler config: {field}: {reason}")]
pub struct SchedulerConfigError {
    /// The offending field, as a path (`podTopologySpread.defaultConstraints[0].maxSkew`).
    pub field: String,
    /// What is wrong with it.
    pub reason: String,
}

fn invalid(field: impl Into<String>, reason: impl Into<String>) -> SchedulerConfigError {
    SchedulerConfigError {
        field: field.into(),
        reason: reason.into(),
    }
}

/// The fields a topology spread constraint has.
const CONSTRAINT_FIELDS: [&str; 8] = [
    "labelSelector",
    "matchLabelKeys",
    "maxSkew",
    "minDomains",
    "nodeAffinityPolicy",
    "nodeTaintsPolicy",
    "topologyKey",
    "whenUnsatisfiable",
];

impl SchedulerConfiguration {
    /// Reads and validates a configuration document (`{podTopologySpread: {defaultConstraints:
    /// [...]}}`), refusing unknown fields as upstream does, so a misspelt key is an error at
    /// start-up rather than a default silently not applied. `null` is no configuration.
    pub fn from_value(value: serde_json::Value) -> Result<Self, SchedulerConfigError> {
        let object = |value: serde_json::Value, field: &str, known: &[&str]| match value {
            serde_json::Value::Null => Ok(serde_json::Map::new()),
            serde_json::Value::Object(map) => {
                if let Some(unknown) = map.keys().find(|k| !known.contains(&k.as_str())) {
                    let path = if field.is_empty() {
                        unknown.clone()
                    } else {
                        format!("{field}.{unknown}")
                    };
                    return Err(invalid(path, "unknown field"));
                }
                Ok(map)
            }
            _ => Err(invalid(
                if field.is_empty() {
                    "(document)"
                } else {
                    field
                },
                "must be an object",
            )),
        };
        let mut root = object(value, "", &["podTopologySpread"])?;
        let mut spread = object(
            root.remove("podTopologySpread").unwrap_or_default(),
            "podTopologySpread",
            &["defaultConstraints"],
        )?;
        let constraints = match spread.remove("defaultConstraints") {
            None | Some(serde_json::Value::Null) => Vec::new(),
            Some(serde_json::Value::Array(items)) => items,
            Some(_) => {
                return Err(invalid(
                    "podTopologySpread.defaultConstraints",
                    "must be a list",
                ));
            }
        };
        let mut config = SchedulerConfiguration::default();
        for (i, item) in constraints.into_iter().enumerate() {
            let field = format!("podTopologySpread.defaultConstraints[{i}]");
            let item = object(item, &field, &CONSTRAINT_FIELDS)?;
            let constraint = serde_json::from_value(serde_json::Value::Object(item))
                .map_err(|e| invalid(&field, e.to_string()))?;
            config.default_constraints.push(constraint);
        }
        config.validate()?;
        Ok(config)
    }

    /// Upstream's checks, kube-scheduler's own (`ValidatePodTopologySpreadArgs`): a
    /// configuration accepted here is one kube-scheduler accepts too.
    pub fn validate(&self) -> Result<(), SchedulerConfigError> {
        for (i, c) in self.default_constraints.iter().enumerate() {
            let field = |name: &str| format!("podTopologySpread.defaultConstraints[{i}].{name}");
            if c.max_skew <= 0 {
                return Err(invalid(field("maxSkew"), "must be greater than 0"));
            }
            if c.topology_key.is_empty() {
                return Err(invalid(field("topologyKey"), "must be set"));
            }
            if let Err(e) = karpenter_api::labels::check_qualified_name(&c.topology_key) {
                return Err(invalid(
                    field("topologyKey"),
                    format!("{:?} is not a valid label name: {e}", c.topology_key),
                ));
            }
            if !matches!(
                c.when_unsatisfiable.as_str(),
                "DoNotSchedule" | "ScheduleAnyway"
            ) {
                return Err(invalid(
                    field("whenUnsatisfiable"),
                    format!(
                        "{:?} must be DoNotSchedule or ScheduleAnyway",
                        c.when_unsatisfiable
                    ),
                ));
            }
            if c.label_selector.is_some() {
                return Err(invalid(
                    field("labelSelector"),
                    "must not be set: the selector is deduced for each pod",
                ));
            }
            if c.match_label_keys.as_ref().is_some_and(|k| !k.is_empty()) {
                return Err(invalid(
                    field("matchLabelKeys"),
                    "must not be set: it has no effect on default constraints",
                ));
            }
            if let Some(j) = self.default_constraints[..i].iter().position(|o| {
                o.topology_key == c.topology_key && o.when_unsatisfiable == c.when_unsatisfiable
            }) {
                return Err(invalid(
                    format!("podTopologySpread.defaultConstraints[{i}]"),
                    format!(
                        "duplicates [{j}] ({}, {})",
                        c.topology_key, c.when_unsatisfiable
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The pod selectors a default spread deduces from, by namespace.
pub struct SelectorSources<'a> {
    services: HashMap<&'a str, Vec<&'a ServiceSelector>>,
    controllers: HashMap<(&'a str, ControllerKind, &'a str), &'a PodController>,
}

fn namespace(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> &str {
    meta.namespace.as_deref().unwrap_or("default")
}

impl<'a> SelectorSources<'a> {
    /// Indexes the cluster's Services and pod controllers.
    pub fn new(services: &[&'a ServiceSelector], controllers: &[&'a PodController]) -> Self {
        let mut by_namespace: HashMap<&str, Vec<&ServiceSelector>> = HashMap::new();
        for &s in services {
            by_namespace
                .entry(namespace(&s.metadata))
                .or_default()
                .push(s);
        }
        // Services in name order: where two set one key, the last one's value stands.
        for list in by_namespace.values_mut() {
            list.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        }
        let controllers = controllers
            .iter()
            .map(|&c| {
                (
                    (
                        namespace(&c.metadata),
                        c.kind,
                        c.metadata.name.as_deref().unwrap_or_default(),
                    ),
                    c,
                )
            })
            .collect();
        Self {
            services: by_namespace,
            controllers,
        }
    }

    /// The selector kube-scheduler deduces for `pod`'s default constraints: the selectors of
    /// every Service of its namespace that selects it, merged as label matches, then its
    /// controller's selector (a ReplicationController's overwrites those labels; a ReplicaSet's
    /// or StatefulSet's is added as expressions). `None` when nothing was deduced.
    pub fn default_selector(&self, pod: &(impl ObservedPod + ?Sized)) -> Option<LabelSelector> {
        let empty = BTreeMap::new();
        let labels = pod.labels().unwrap_or(&empty);
        let ns = namespace(pod.meta());
        let mut match_labels = BTreeMap::new();
        for service in self.services.get(ns).into_iter().flatten() {
            // A Service without a selector selects no pod.
            let Some(s) = &service.selector else { continue };
            if s.iter().all(|(k, v)| labels.get(k) == Some(v)) {
                match_labels.extend(s.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
        }
        let mut match_expressions = Vec::new();
        if let Some(controller) = self.controller_of(pod) {
            match controller.kind {
                ControllerKind::ReplicationController => {
                    let labels = controller
                        .selector
                        .as_ref()
                        .and_then(|s| s.match_labels.clone())
                        .unwrap_or_default();
                    match_labels.extend(labels);
                }
                ControllerKind::ReplicaSet | ControllerKind::StatefulSet => {
                    if let Some(s) = &controller.selector {
                        match_expressions.extend(as_requirements(s));
                    }
                }
            }
        }
        if match_labels.is_empty() && match_expressions.is_empty() {
            return None;
        }
        Some(LabelSelector {
            match_labels: (!match_labels.is_empty()).then_some(match_labels),
            match_expressions: (!match_expressions.is_empty()).then_some(match_expressions),
        })
    }

    /// The pod's controller, when it is one of the kinds a selector is deduced from and
    /// exists (a controller already deleted contributes nothing, as upstream).
    fn controller_of(&self, pod: &(impl ObservedPod + ?Sized)) -> Option<&'a PodController> {
        let owner = pod
            .meta()
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))?;
        let kind = ControllerKind::of_owner(&owner.api_version, &owner.kind)?;
        self.controllers
            .get(&(namespace(pod.meta()), kind, owner.name.as_str()))
            .copied()
    }
}

/// A selector as a list of requirements, each `matchLabels` entry an `In` of its one value.
fn as_requirements(s: &LabelSelector) -> Vec<LabelSelectorRequirement> {
    s.match_labels
        .iter()
        .flatten()
        .map(|(k, v)| LabelSelectorRequirement {
            key: k.clone(),
            operator: "In".into(),
            values: Some(vec![v.clone()]),
        })
        .chain(s.match_expressions.iter().flatten().cloned())
        .collect()
}

/// What the deduction reads of a pod: its namespace, its controller and its labels.
type Shape = (String, Option<String>, String);

/// The default constraints each pod gets, by `namespace/name`: every pod that declares none
/// of its own and for which a selector can be deduced. Pods of one workload share one value.
pub fn default_spread<'p, P: ObservedPod + ?Sized + 'p>(
    pods: impl IntoIterator<Item = &'p P>,
    constraints: &[TopologySpreadConstraint],
    sources: &SelectorSources<'_>,
) -> HashMap<String, Arc<[TopologySpreadConstraint]>> {
    let mut out = HashMap::new();
    if constraints.is_empty() {
        return out;
    }
    // The deduction reads the namespace, the controller and the labels alone.
    let mut by_shape: HashMap<Shape, Option<Arc<[TopologySpreadConstraint]>>> = HashMap::new();
    for pod in pods {
        let declared = pod
            .pod_spec()
            .and_then(|s| s.topology_spread_constraints.as_ref())
            .is_some_and(|c| !c.is_empty());
        if declared {
            continue;
        }
        let meta = pod.meta();
        let owner = meta
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .map(|o| format!("{}/{}/{}", o.api_version, o.kind, o.name));
        let shape = (
            namespace(meta).to_string(),
            owner,
            pod.labels()
                .map(|l| {
                    selector::canonical(&LabelSelector {
                        match_labels: Some(l.clone()),
                        match_expressions: None,
                    })
                })
                .unwrap_or_default(),
        );
        let stamped = by_shape
            .entry(shape)
            .or_insert_with(|| {
                let selector = sources.default_selector(pod)?;
                Some(
                    constraints
                        .iter()
                        .map(|c| TopologySpreadConstraint {
                            label_selector: Some(selector.clone()),
                            ..c.clone()
                        })
                        .collect(),
                )
            })
            .clone();
        if let Some(stamped) = stamped {
            out.insert(crate::state::pods::key(pod), stamped);
        }
    }
    out
}
