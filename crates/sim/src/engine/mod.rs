//! The simulation: an in-memory cluster on a virtual clock, driven by the same provisioning
//! decisions the controller makes.
//!
//! Every second of virtual time: due steps apply; workload controllers create and delete pods;
//! a kube-scheduler stand-in binds pending pods to Ready nodes (with the core's predicates) and
//! marks the rest unschedulable; the provisioner, batching like upstream (1 s idle, 10 s at
//! most), runs the scheduling simulation and launches NodeClaims; launched nodes become Ready
//! after the launch and registration delays; cost accrues per second.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Namespace, Pod, PodTemplateSpec, Taint};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use karpenter_api::NodeClaim;
use karpenter_api::NodePool;
use karpenter_api::duration::parse_go_duration;
use karpenter_api::labels::{CAPACITY_TYPE_LABEL, HOSTNAME_LABEL, ZONE_LABEL};
use karpenter_api::nodeoverlay::CAPACITY_OVERLAY_HASH_ANNOTATION;
use karpenter_core::disruption::drift::node_pool_hash_annotations;
use karpenter_core::feature_gates::FeatureGates;
use karpenter_core::instancetype::cheapest_launch;
use karpenter_core::instancetype::overlay::Evaluation;
use karpenter_core::provisioning::nodepools::launchable;
use karpenter_core::provisioning::scheduling::default_constraints::SchedulerConfiguration;
use karpenter_core::provisioning::scheduling::{
    BoundPod, ExistingNodeInput, NewNodeClaim, NodePoolInput, SchedulerOptions, fit_existing,
};
use karpenter_core::provisioning::{Batcher, node_claim_for};
use karpenter_core::resources::{Resources, pod_requests};
use karpenter_core::round::{Parts, nomination_window};
use karpenter_core::scheduling::Requirements;
use karpenter_core::scheduling::requirements::node_claim_labels;
use karpenter_core::state::pods::ObservedPod;
use karpenter_core::state::selectors::ServiceSelector;

mod capacity_buffer;
pub mod cluster_autoscaler;
mod disruption;
mod objects;
mod repair;
mod reservations;
mod round;
pub use round::Decided;
mod static_capacity;

use crate::catalog::Catalog;
use crate::report::{Event, LaunchedNodeClaim, Report, Sample, Summary};
use crate::scenario::{
    Action, Expectation, Interrupt, Object, RUN_FOR_ANNOTATION, Scale, Scenario, Storage,
};

/// Upstream's batching: wait this long after the last new pending pod…
const BATCH_IDLE_SECONDS: u64 = 1;
/// …but no longer than this after the first.
const BATCH_MAX_SECONDS: u64 = 10;

/// A pod's owner.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct OwnerKey {
    kind: String,
    namespace: String,
    name: String,
}

#[derive(Clone, Debug)]
struct SimPod {
    pod: Pod,
    owner: Option<OwnerKey>,
    created_at: u64,
    bound_at: Option<u64>,
    node: Option<usize>,
    /// When a Job's pod completes.
    run_for: Option<u64>,
    done: bool,
    /// When it finished or was deleted.
    ended_at: Option<u64>,
}

impl SimPod {
    fn is_daemonset_pod(&self) -> bool {
        self.owner.as_ref().is_some_and(|o| o.kind == "DaemonSet")
    }

    fn end(&mut self, now: u64) {
        self.done = true;
        self.ended_at = Some(now);
    }
}

#[derive(Clone, Debug)]
struct SimNode {
    name: String,
    labels: BTreeMap<String, String>,
    taints: Vec<Taint>,
    allocatable: Resources,
    capacity: Resources,
    instance_type: String,
    capacity_type: String,
    zone: String,
    price: f64,
    /// What the same instance type costs on demand in its zone: what a spot node saves is
    /// measured against it.
    on_demand_price: f64,
    node_pool: Option<String>,
    launched_at: u64,
    ready_at: u64,
    terminated_at: Option<u64>,
    reason: &'static str,
    /// The NodeClaim karpenter created for it (`None` for nodes the scenario brought).
    claim: Option<NodeClaim>,
    /// Tainted `karpenter.sh/disrupted`: no new pods, on its way out.
    disrupted: bool,
    /// Being drained: pods are evicted as PodDisruptionBudgets allow, then it terminates.
    draining: bool,
    /// When its NodePool's `terminationGracePeriod` forces the remaining pods out (set when
    /// the drain starts).
    drain_deadline: Option<u64>,
    /// Conditions a scenario step set (type → status, since when); `Ready` is `True` unless
    /// one says otherwise.
    conditions: BTreeMap<String, (String, u64)>,
}

impl SimNode {
    fn alive(&self) -> bool {
        self.terminated_at.is_none()
    }

    fn ready(&self, now: u64) -> bool {
        self.alive() && self.ready_at <= now
    }
}

#[derive(Clone, Debug)]
struct Workload {
    replicas: i32,
    template: PodTemplateSpec,
    /// Its pod selector (a Job's: none kept).
    selector: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    /// Jobs: how many completions are wanted and how long each pod runs.
    completions: Option<i32>,
    run_for: Option<u64>,
    succeeded: i32,
    created: u64,
}

/// The controller reference a workload's pod carries, as the API server holds it: a
/// Deployment's pods are its ReplicaSet's (one per Deployment here, of the same name).
fn workload_owner(key: &OwnerKey) -> OwnerReference {
    let (api_version, kind) = match key.kind.as_str() {
        "Deployment" => ("apps/v1", "ReplicaSet"),
        "Job" => ("batch/v1", "Job"),
        kind => ("apps/v1", kind),
    };
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: key.name.clone(),
        uid: key.name.clone(),
        controller: Some(true),
        ..Default::default()
    }
}

/// Timing of the simulated cloud.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// From NodeClaim creation to a running instance.
    pub launch_delay: u64,
    /// From a running instance to a Ready node.
    pub registration_delay: u64,
}

/// Which autoscaler makes the decisions.
#[derive(Clone, Debug)]
pub enum Autoscaler {
    /// karpenter-rs's provisioning.
    Karpenter,
    /// A Cluster-Autoscaler-style policy (node groups of one instance type), for comparison.
    ClusterAutoscaler(cluster_autoscaler::State),
}

/// A running simulation.
pub struct Simulation {
    autoscaler: Autoscaler,
    disruptions: Vec<Event>,
    name: String,
    now: u64,
    /// Upstream's feature gates the scenario turns on.
    feature_gates: FeatureGates,
    /// The kube-scheduler default topology spread the scenario configures.
    scheduler_config: SchedulerConfiguration,
    /// Services' pod selectors, by key.
    services: BTreeMap<OwnerKey, ServiceSelector>,
    end: u64,
    timing: Timing,
    catalog: Catalog,
    /// The scenario's capacity reservations.
    reservations: reservations::Reservations,
    pools: BTreeMap<String, NodePool>,
    /// NodeOverlays, by name; applied to the instance types when the gate is on.
    overlays: BTreeMap<String, karpenter_api::nodeoverlay::NodeOverlay>,
    /// CapacityBuffers and PodTemplates, with what provisioning made of them.
    buffers: capacity_buffer::Buffers,
    workloads: BTreeMap<OwnerKey, Workload>,
    daemonsets: BTreeMap<OwnerKey, PodTemplateSpec>,
    pdbs: Vec<PodDisruptionBudget>,
    namespaces: BTreeMap<String, Namespace>,
    /// PersistentVolumeClaims, PersistentVolumes and StorageClasses, by kind and key.
    storage: BTreeMap<(&'static str, String), Storage>,
    disruption: disruption::State,
    pods: Vec<SimPod>,
    nodes: Vec<SimNode>,
    steps: Vec<(u64, Action)>,
    next_step: usize,
    expectations: Vec<Expectation>,
    batcher: Batcher,
    /// Nodes the provisioner counts on, until when (upstream's nominations).
    nominations: BTreeMap<String, u64>,
    cost_total: f64,
    /// What spot nodes saved against the on-demand price of the same instance types.
    spot_saving_total: f64,
    lower_bound_total: f64,
    samples: Vec<Sample>,
    events: Vec<Event>,
    failures: Vec<String>,
    /// What the scenario asks that a controller would refuse, said once in the report.
    warnings: Vec<String>,
    sample_every: u64,
    /// The last demand the lower bound was computed for, and the bound.
    bound_cache: std::cell::Cell<Option<((f64, f64), f64)>>,
    /// The decisions made, with their clusters, when asked to record them.
    recorded: Option<std::cell::RefCell<Vec<Decided>>>,
}

fn key_of(kind: &str, meta: &ObjectMeta) -> OwnerKey {
    OwnerKey {
        kind: kind.into(),
        namespace: meta.namespace.clone().unwrap_or_else(|| "default".into()),
        name: meta.name.clone().unwrap_or_default(),
    }
}

fn is_ready(pod: &SimPod) -> bool {
    pod.bound_at.is_some() && !pod.done
}

impl Simulation {
    /// Prepares a scenario to run on `catalog`, with the gates it names over upstream's
    /// defaults.
    pub fn new(scenario: &Scenario, catalog: Catalog) -> Self {
        Self::with_gates(scenario, catalog, FeatureGates::default())
    }

    /// Prepares a scenario to run on `catalog`, with the gates it names over `gates` (the
    /// command line's `FEATURE_GATES`).
    pub fn with_gates(scenario: &Scenario, catalog: Catalog, gates: FeatureGates) -> Self {
        Self::with_autoscaler(scenario, catalog, false, gates)
    }

    /// Prepares a scenario to run under Cluster Autoscaler's policy instead of karpenter's, with
    /// node groups derived from the scenario's NodePools (see [`cluster_autoscaler`]).
    pub fn cluster_autoscaler(scenario: &Scenario, catalog: Catalog, gates: FeatureGates) -> Self {
        Self::with_autoscaler(scenario, catalog, true, gates)
    }

    fn with_autoscaler(
        scenario: &Scenario,
        catalog: Catalog,
        cluster_autoscaler: bool,
        gates: FeatureGates,
    ) -> Self {
        let spec = &scenario.spec;
        let catalog = match spec.spot_price_ratio {
            Some(ratio) => catalog.with_assumed_spot_prices(ratio),
            None => catalog,
        };
        let warnings = scenario.warnings(&catalog);
        let timing = Timing {
            launch_delay: spec.launch_delay.map_or(20, |s| s.0),
            registration_delay: spec.registration_delay.map_or(30, |s| s.0),
        };
        let reservations = reservations::Reservations::new(&spec.capacity_reservations, &catalog);
        let mut sim = Self {
            reservations,
            autoscaler: Autoscaler::Karpenter,
            disruptions: Vec::new(),
            name: scenario.name.clone(),
            now: 0,
            end: spec.duration.0,
            timing,
            catalog,
            pools: BTreeMap::new(),
            overlays: BTreeMap::new(),
            buffers: capacity_buffer::Buffers::default(),
            workloads: BTreeMap::new(),
            daemonsets: BTreeMap::new(),
            pdbs: Vec::new(),
            namespaces: BTreeMap::new(),
            storage: BTreeMap::new(),
            disruption: disruption::State::default(),
            pods: Vec::new(),
            nodes: Vec::new(),
            steps: scenario.steps.clone(),
            next_step: 0,
            expectations: spec.expect.clone(),
            feature_gates: spec.feature_gates.over(gates),
            scheduler_config: spec.scheduler_config.clone(),
            services: BTreeMap::new(),
            batcher: Batcher::new(
                std::time::Duration::from_secs(BATCH_IDLE_SECONDS),
                std::time::Duration::from_secs(BATCH_MAX_SECONDS),
            ),
            nominations: BTreeMap::new(),
            cost_total: 0.0,
            spot_saving_total: 0.0,
            lower_bound_total: 0.0,
            samples: Vec::new(),
            events: Vec::new(),
            failures: Vec::new(),
            warnings,
            sample_every: (spec.duration.0 / 360).max(10),
            bound_cache: std::cell::Cell::new(None),
            recorded: None,
        };
        for object in &scenario.objects {
            sim.apply(object.clone());
        }
        if cluster_autoscaler {
            // Node groups are configured once, from the NodePools at the start, as an operator
            // would have set them up.
            let groups = cluster_autoscaler::node_groups(&sim.pools, &sim.catalog);
            let described: Vec<String> = groups
                .iter()
                .map(|g| format!("{}:{}", g.node_pool, g.instance_type.name))
                .collect();
            sim.event("NodeGroups", described.join(", "));
            sim.autoscaler = Autoscaler::ClusterAutoscaler(cluster_autoscaler::State::new(groups));
            sim.name = format!("{} (cluster-autoscaler)", sim.name);
        }
        sim
    }

    fn event(&mut self, kind: &'static str, message: String) {
        self.events.push(Event {
            t_s: self.now,
            kind: kind.into(),
            message,
        });
    }

    fn apply(&mut self, object: Object) {
        match object {
            Object::NodePool(mut np) => {
                self.bound_cache.set(None);
                // As the controller's hash controller stamps it: static drift compares claims
                // with it.
                if let Some(hash) = node_pool_hash_annotations(&np) {
                    np.metadata.annotations.get_or_insert_default().extend(hash);
                }
                let name = np.name().to_string();
                self.event("Applied", format!("nodepool/{name}"));
                self.pools.insert(name, *np);
            }
            Object::NodeOverlay(overlay) => {
                self.bound_cache.set(None);
                let name = overlay.name().to_string();
                self.event("Applied", format!("nodeoverlay/{name}"));
                self.overlays.insert(name, *overlay);
            }
            Object::NodeClass(_) => {}
            Object::CapacityBuffer(buffer) => self.apply_buffer(*buffer),
            Object::PodTemplate(template) => self.buffers.apply_pod_template(*template),
            Object::Namespace(ns) => {
                let name = ns.metadata.name.clone().unwrap_or_default();
                self.namespaces.insert(name, *ns);
            }
            Object::Service(service) => {
                let key = key_of("Service", &service.metadata);
                self.services.insert(key, ServiceSelector::from(*service));
            }
            Object::Storage(object) => {
                let key = |kind, meta: &ObjectMeta| {
                    let ns = meta.namespace.clone().unwrap_or_else(|| "default".into());
                    (
                        kind,
                        format!("{ns}/{}", meta.name.as_deref().unwrap_or_default()),
                    )
                };
                let k = match &object {
                    Storage::Claim(c) => key("PersistentVolumeClaim", &c.metadata),
                    Storage::Volume(v) => key("PersistentVolume", &v.metadata),
                    Storage::Class(c) => key("StorageClass", &c.metadata),
                };
                self.storage.insert(k, object);
            }
            Object::PodDisruptionBudget(pdb) => {
                let key = (pdb.metadata.namespace.clone(), pdb.metadata.name.clone());
                self.pdbs
                    .retain(|p| (p.metadata.namespace.clone(), p.metadata.name.clone()) != key);
                self.pdbs.push(*pdb);
            }
            Object::Deployment(d) => {
                let spec = d.spec.unwrap_or_default();
                self.add_workload(
                    key_of("Deployment", &d.metadata),
                    spec.replicas.unwrap_or(1),
                    spec.template,
                    Some(spec.selector),
                    None,
                    None,
                );
            }
            Object::ReplicaSet(r) => {
                let spec = r.spec.unwrap_or_default();
                self.add_workload(
                    key_of("ReplicaSet", &r.metadata),
                    spec.replicas.unwrap_or(1),
                    spec.template.unwrap_or_default(),
                    Some(spec.selector),
                    None,
                    None,
                );
            }
            Object::StatefulSet(s) => {
                let spec = s.spec.unwrap_or_default();
                self.add_workload(
                    key_of("StatefulSet", &s.metadata),
                    spec.replicas.unwrap_or(1),
                    spec.template,
                    Some(spec.selector),
                    None,
                    None,
                );
            }
            Object::Job(j) => {
                let run_for = j
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(RUN_FOR_ANNOTATION))
                    .and_then(|d| parse_go_duration(d).ok())
                    .map_or(60, |d| d.as_secs());
                let spec = j.spec.unwrap_or_default();
                let completions = spec.completions.unwrap_or(1);
                self.add_workload(
                    key_of("Job", &j.metadata),
                    spec.parallelism.unwrap_or(1).min(completions),
                    spec.template,
                    None,
                    Some(completions),
                    Some(run_for),
                );
            }
            Object::DaemonSet(d) => {
                let key = key_of("DaemonSet", &d.metadata);
                self.event(
                    "Applied",
                    format!("daemonset/{}/{}", key.namespace, key.name),
                );
                self.daemonsets
                    .insert(key, d.spec.map(|s| s.template).unwrap_or_default());
            }
            Object::Pod(p) => {
                let pod = *p;
                self.pods.push(SimPod {
                    pod,
                    owner: None,
                    created_at: self.now,
                    bound_at: None,
                    node: None,
                    run_for: None,
                    done: false,
                    ended_at: None,
                });
            }
            Object::Node(n) => {
                let status = n.status.clone().unwrap_or_default();
                let read = |list: Option<
                    &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
                >| {
                    list.and_then(|l| Resources::from_list(l).ok())
                        .unwrap_or_default()
                };
                let allocatable = read(status.allocatable.as_ref().or(status.capacity.as_ref()));
                let labels = n.metadata.labels.clone().unwrap_or_default();
                let (price, on_demand_price) = self.catalog_price(&labels);
                self.nodes.push(SimNode {
                    name: n.metadata.name.clone().unwrap_or_default(),
                    zone: labels.get(ZONE_LABEL).cloned().unwrap_or_default(),
                    capacity_type: labels.get(CAPACITY_TYPE_LABEL).cloned().unwrap_or_default(),
                    instance_type: labels
                        .get("node.kubernetes.io/instance-type")
                        .cloned()
                        .unwrap_or_default(),
                    labels,
                    taints: n.spec.and_then(|s| s.taints).unwrap_or_default(),
                    capacity: read(status.capacity.as_ref()),
                    allocatable,
                    price,
                    on_demand_price,
                    node_pool: None,
                    launched_at: self.now,
                    ready_at: self.now,
                    terminated_at: None,
                    reason: "existing",
                    claim: None,
                    disrupted: false,
                    draining: false,
                    drain_deadline: None,
                    conditions: BTreeMap::new(),
                });
            }
        }
    }

    fn add_workload(
        &mut self,
        key: OwnerKey,
        replicas: i32,
        template: PodTemplateSpec,
        selector: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
        completions: Option<i32>,
        run_for: Option<u64>,
    ) {
        self.event(
            "Applied",
            format!("{}/{}/{}", key.kind.to_lowercase(), key.namespace, key.name),
        );
        let created = self.workloads.get(&key).map_or(0, |w| w.created);
        self.workloads.insert(
            key,
            Workload {
                replicas,
                template,
                selector,
                completions,
                run_for,
                succeeded: 0,
                created,
            },
        );
    }

    fn run_step(&mut self, action: Action) {
        match action {
            Action::Scale(Scale {
                kind,
                name,
                namespace,
                replicas,
            }) => {
                let key = OwnerKey {
                    kind,
                    namespace: namespace.unwrap_or_else(|| "default".into()),
                    name,
                };
                match self.workloads.get_mut(&key) {
                    Some(w) => {
                        self.events.push(Event {
                            t_s: self.now,
                            kind: "Scaled".into(),
                            message: format!(
                                "{}/{}/{} {} → {replicas}",
                                key.kind.to_lowercase(),
                                key.namespace,
                                key.name,
                                w.replicas
                            ),
                        });
                        w.replicas = replicas;
                    }
                    None => self.failures.push(format!(
                        "t={}s: scale: no {} {}/{}",
                        self.now, key.kind, key.namespace, key.name
                    )),
                }
            }
            Action::Apply(objects) => objects.into_iter().for_each(|o| self.apply(o)),
            Action::Delete(r) => {
                let namespace = r.namespace.unwrap_or_else(|| "default".into());
                match r.kind.as_str() {
                    "NodePool" => {
                        self.pools.remove(&r.name);
                    }
                    "CapacityBuffer" => self.buffers.delete_buffer(&namespace, &r.name),
                    "Pod" => {
                        for p in self.pods.iter_mut().filter(|p| {
                            !p.done
                                && p.pod.metadata.name.as_deref() == Some(&r.name)
                                && p.pod.metadata.namespace.as_deref().unwrap_or("default")
                                    == namespace
                        }) {
                            p.end(self.now);
                        }
                    }
                    "DaemonSet" => {
                        self.daemonsets.remove(&OwnerKey {
                            kind: r.kind.clone(),
                            namespace: namespace.clone(),
                            name: r.name.clone(),
                        });
                    }
                    kind => {
                        let key = OwnerKey {
                            kind: kind.into(),
                            namespace,
                            name: r.name.clone(),
                        };
                        self.workloads.remove(&key);
                        for p in self
                            .pods
                            .iter_mut()
                            .filter(|p| p.owner.as_ref() == Some(&key))
                        {
                            p.end(self.now);
                        }
                    }
                }
                self.event("Deleted", format!("{}/{}", r.kind.to_lowercase(), r.name));
            }
            Action::Interrupt(i) => self.interrupt(i),
            Action::NodeCondition(c) => self.set_node_condition(c),
        }
    }

    fn interrupt(&mut self, i: Interrupt) {
        let capacity_type = i.capacity_type.unwrap_or_else(|| "spot".into());
        let mut victims: Vec<usize> = (0..self.nodes.len())
            .filter(|&n| self.nodes[n].alive() && self.nodes[n].reason != "existing")
            .filter(|&n| match &i.node {
                Some(name) => &self.nodes[n].name == name,
                None => self.nodes[n].capacity_type == capacity_type,
            })
            .collect();
        victims.truncate(i.count.unwrap_or(1));
        if victims.is_empty() {
            self.failures
                .push(format!("t={}s: interrupt: no matching node", self.now));
        }
        for n in victims {
            self.terminate(n, "Interrupted");
        }
    }

    fn terminate(&mut self, n: usize, why: &'static str) {
        self.nodes[n].terminated_at = Some(self.now);
        let name = self.nodes[n].name.clone();
        // Pods on it are gone; their controllers make new ones.
        for p in self
            .pods
            .iter_mut()
            .filter(|p| p.node == Some(n) && !p.done)
        {
            p.end(self.now);
        }
        self.event(why, format!("node/{name}"));
    }

    fn reconcile_workloads(&mut self) {
        let keys: Vec<OwnerKey> = self.workloads.keys().cloned().collect();
        for key in keys {
            let active: Vec<usize> = (0..self.pods.len())
                .filter(|&p| !self.pods[p].done && self.pods[p].owner.as_ref() == Some(&key))
                .collect();
            let w = &self.workloads[&key];
            let want = match w.completions {
                Some(total) => w.replicas.min(total - w.succeeded).max(0),
                None => w.replicas,
            } as usize;
            if active.len() < want {
                for _ in active.len()..want {
                    let w = self.workloads.get_mut(&key).expect("the workload exists");
                    w.created += 1;
                    let serial = w.created;
                    let mut pod = Pod {
                        metadata: w.template.metadata.clone().unwrap_or_default(),
                        spec: w.template.spec.clone(),
                        status: None,
                    };
                    pod.metadata.name = Some(format!("{}-{serial}", key.name));
                    pod.metadata.namespace = Some(key.namespace.clone());
                    pod.metadata.owner_references = Some(vec![workload_owner(&key)]);
                    let run_for = w.run_for;
                    self.pods.push(SimPod {
                        pod,
                        owner: Some(key.clone()),
                        created_at: self.now,
                        bound_at: None,
                        node: None,
                        run_for,
                        done: false,
                        ended_at: None,
                    });
                }
            } else if active.len() > want {
                // Scale down as a ReplicaSet does: unscheduled pods first, then pods on the
                // nodes holding the most replicas (spreading what is left), then the newest.
                let mut victims = active.clone();
                let mut per_node: BTreeMap<usize, usize> = BTreeMap::new();
                for &p in &active {
                    if let Some(n) = self.pods[p].node {
                        *per_node.entry(n).or_default() += 1;
                    }
                }
                victims.sort_by_key(|&p| {
                    let pod = &self.pods[p];
                    (
                        pod.bound_at.is_some(),
                        std::cmp::Reverse(pod.node.map_or(0, |n| per_node[&n])),
                        std::cmp::Reverse(pod.created_at),
                        std::cmp::Reverse(p),
                    )
                });
                for &p in victims.iter().take(active.len() - want) {
                    self.pods[p].end(self.now);
                }
            }
        }
        // Jobs: pods that ran their time succeed.
        for p in 0..self.pods.len() {
            let pod = &self.pods[p];
            if let (Some(bound), Some(run_for), false) = (pod.bound_at, pod.run_for, pod.done)
                && self.now >= bound + run_for
            {
                self.pods[p].end(self.now);
                if let Some(w) = self.pods[p]
                    .owner
                    .clone()
                    .and_then(|k| self.workloads.get_mut(&k))
                {
                    w.succeeded += 1;
                }
            }
        }
    }

    /// DaemonSet pods go straight to every Ready node they tolerate and match.
    fn reconcile_daemonsets(&mut self) {
        for (key, template) in self.daemonsets.clone() {
            let pod = Pod {
                metadata: template.metadata.clone().unwrap_or_default(),
                spec: template.spec.clone(),
                status: None,
            };
            let tolerations = pod
                .spec
                .as_ref()
                .and_then(|s| s.tolerations.clone())
                .unwrap_or_default();
            let selector = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_selector.clone())
                .unwrap_or_default();
            for n in 0..self.nodes.len() {
                let node = &self.nodes[n];
                if !node.ready(self.now)
                    || karpenter_core::scheduling::taints::first_untolerated(
                        &node.taints,
                        &tolerations,
                    )
                    .is_some()
                    || selector.iter().any(|(k, v)| node.labels.get(k) != Some(v))
                {
                    continue;
                }
                let has = self
                    .pods
                    .iter()
                    .any(|p| !p.done && p.node == Some(n) && p.owner.as_ref() == Some(&key));
                if !has {
                    let mut pod = pod.clone();
                    pod.metadata.name = Some(format!("{}-{}", key.name, node.name));
                    pod.metadata.namespace = Some(key.namespace.clone());
                    pod.metadata.owner_references = Some(vec![OwnerReference {
                        api_version: "apps/v1".into(),
                        kind: "DaemonSet".into(),
                        name: key.name.clone(),
                        uid: key.name.clone(),
                        ..Default::default()
                    }]);
                    self.pods.push(SimPod {
                        pod,
                        owner: Some(key.clone()),
                        created_at: self.now,
                        bound_at: Some(self.now),
                        node: Some(n),
                        run_for: None,
                        done: false,
                        ended_at: None,
                    });
                }
            }
        }
    }

    fn existing_inputs(&self, include_in_flight: bool) -> (Vec<ExistingNodeInput>, Vec<usize>) {
        let mut inputs = Vec::new();
        let mut index = Vec::new();
        for (n, node) in self.nodes.iter().enumerate() {
            if !node.alive() || (!include_in_flight && !node.ready(self.now)) {
                continue;
            }
            let pods = BoundPod::all(
                self.pods
                    .iter()
                    .filter(|p| !p.done && p.node == Some(n))
                    .map(|p| &p.pod),
            );
            inputs.push(ExistingNodeInput {
                name: node.name.clone(),
                labels: node.labels.clone(),
                taints: node.taints.clone(),
                allocatable: node.allocatable.clone(),
                capacity: node.capacity.clone(),
                pods,
                initialized: node.ready(self.now),
                node_pool: node.node_pool.clone(),
                ..Default::default()
            });
            index.push(n);
        }
        (inputs, index)
    }

    /// The NodePools (static ones included), each offering the whole catalog, with the NodeOverlays applied when the
    /// `NodeOverlay` gate is on.
    fn pool_inputs(&self) -> Vec<NodePoolInput> {
        self.evaluated_pool_inputs().0
    }

    /// The NodeOverlays' evaluation over the NodePools decisions see, when the `NodeOverlay`
    /// gate is on: what launches record and overlay drift compares with, as the controller
    /// keeps the one its last decision made.
    fn overlay_evaluation(&self) -> Option<Evaluation> {
        self.evaluated_pool_inputs().1
    }

    /// [`pool_inputs`](Self::pool_inputs), with the overlays' evaluation that made them.
    fn evaluated_pool_inputs(&self) -> (Vec<NodePoolInput>, Option<Evaluation>) {
        // The catalog with what is left of each capacity reservation.
        self.pools_offering(|label, id| {
            self.nodes_alive()
                .filter(|n| n.labels.get(label).is_some_and(|v| v == id))
                .count() as u32
        })
    }

    /// The launchable NodePools with the catalog's instance types, each capacity reservation
    /// offered less what `in_use` says it holds, and the overlays applied when their gate is on.
    fn pools_offering(
        &self,
        in_use: impl Fn(&str, &str) -> u32,
    ) -> (Vec<NodePoolInput>, Option<Evaluation>) {
        let types = self
            .reservations
            .offer(&self.catalog.instance_types, in_use);
        let mut pools: Vec<NodePoolInput> = self
            .pools
            .values()
            // Static NodePools too: disruption replaces their drifted nodes, static capacity
            // keeps their size (the scheduler never launches from them).
            .filter(|np| launchable(np))
            .map(|np| NodePoolInput {
                node_pool: np.clone(),
                instance_types: types.clone(),
            })
            .collect();
        let evaluation = self.feature_gates.node_overlay.then(|| {
            let overlays: Vec<_> = self.overlays.values().cloned().collect();
            karpenter_core::instancetype::overlay::apply_to_pools(&overlays, &mut pools)
        });
        (pools, evaluation)
    }

    fn options(&self) -> SchedulerOptions {
        let mut provider_labels = self.catalog.provider_labels.clone();
        // A NodeClaim pinned to one reservation is labelled with it, as the provider's own
        // label would be.
        provider_labels.extend(self.reservations.labels());
        SchedulerOptions {
            provider_labels,
            reserved_capacity: self.feature_gates.reserved_capacity,
            default_constraints: self.scheduler_config.default_constraints.clone(),
            ..Default::default()
        }
    }

    fn daemonset_pods(&self) -> Vec<Pod> {
        self.daemonsets
            .iter()
            .map(|(key, t)| {
                let mut pod = Pod {
                    metadata: t.metadata.clone().unwrap_or_default(),
                    spec: t.spec.clone(),
                    status: None,
                };
                pod.metadata.owner_references = Some(vec![OwnerReference {
                    kind: "DaemonSet".into(),
                    name: key.name.clone(),
                    ..Default::default()
                }]);
                pod
            })
            .collect()
    }

    /// The kube-scheduler stand-in: binds pending pods to Ready nodes where they fit.
    fn bind_pending(&mut self) {
        let pending: Vec<usize> = (0..self.pods.len())
            .filter(|&p| !self.pods[p].done && self.pods[p].bound_at.is_none())
            .collect();
        if pending.is_empty() {
            return;
        }
        let (existing, index) = self.existing_inputs(false);
        if existing.is_empty() {
            return;
        }
        let batch: Vec<Pod> = pending.iter().map(|&p| self.pods[p].pod.clone()).collect();
        // kube-scheduler knows the namespaces' labels too.
        let options = SchedulerOptions {
            namespaces: self
                .namespaces()
                .into_iter()
                .map(|n| {
                    let labels = n.metadata.labels.unwrap_or_default();
                    (n.metadata.name.unwrap_or_default(), labels)
                })
                .collect(),
            // And what the pods' volumes require of their node.
            pod_volumes: std::sync::Arc::new(self.pod_volumes(&batch)),
            // And the cluster's default topology spread, as it applies it.
            default_spread: std::sync::Arc::new(self.default_spread(&batch)),
            ..self.options()
        };
        for (name, placed) in fit_existing(&existing, &batch, options) {
            let n = index[existing
                .iter()
                .position(|e| e.name == name)
                .expect("placements name known nodes")];
            for i in placed {
                let p = pending[i];
                self.pods[p].bound_at = Some(self.now);
                self.pods[p].node = Some(n);
            }
        }
    }

    /// The provisioner: after a batch window, launches NodeClaims for the pods that need a
    /// node, reading the cluster through the same snapshot as the controller.
    fn provision(&mut self) {
        let mut pending: Vec<String> = (0..self.pods.len())
            .filter(|&p| !self.pods[p].done && self.pods[p].bound_at.is_none())
            .map(|p| format!("pod-{p}"))
            .collect();
        // Virtual pods trigger rounds too, as the buffer controller triggers the provisioner.
        let virtual_pods = self.buffers.virtual_pods();
        pending.extend(virtual_pods.iter().filter_map(|p| p.metadata.uid.clone()));
        let now = std::time::Duration::from_secs(self.now);
        if !self
            .batcher
            .observe(now, pending.iter().map(String::as_str))
        {
            return;
        }
        let parts = Parts {
            provisioning: true,
            ..Parts::NONE
        };
        let (results, batch, real, nominations) = self.round(parts, |_, plan| {
            let provisioning = plan
                .provisioning
                .unwrap_or_else(|| unreachable!("asked for"));
            let batch: Vec<Pod> = provisioning.batch.iter().map(|p| p.to_pod()).collect();
            let real: Vec<bool> = (0..batch.len()).map(|i| provisioning.is_real(i)).collect();
            let nominations: Vec<String> = provisioning
                .nominations()
                .into_iter()
                .map(str::to_string)
                .collect();
            (provisioning.results, batch, real, nominations)
        });
        if batch.is_empty() {
            return;
        }
        let until = self.now
            + nomination_window(std::time::Duration::from_secs(BATCH_MAX_SECONDS)).as_secs();
        self.nominations.retain(|_, at| *at > self.now);
        for node in nominations {
            self.nominations.insert(node, until);
        }
        let real = |i: &usize| real[*i];
        self.record_buffer_round(&results, &batch);
        for claim in &results.new_node_claims {
            self.launch(claim, "provisioned");
        }
        // Virtual pods get no FailedScheduling.
        let real_errors: Vec<&String> = results
            .pod_errors
            .iter()
            .filter(|(i, _)| real(i))
            .map(|(_, why)| why)
            .collect();
        let unschedulable = real_errors.len();
        if unschedulable > 0 && results.new_node_claims.is_empty() {
            let reason = real_errors
                .first()
                .map(|r| r.to_string())
                .unwrap_or_default();
            let already = self
                .events
                .iter()
                .rev()
                .take(20)
                .any(|e| e.kind == "FailedScheduling" && e.message.ends_with(&reason));
            if !already {
                self.event(
                    "FailedScheduling",
                    format!("{unschedulable} pods: {reason}"),
                );
            }
        }
    }

    /// Launches a node for a NodeClaim: its cheapest instance type in its cheapest allowed
    /// offering, Ready after the launch and registration delays.
    fn launch(&mut self, claim: &NewNodeClaim, reason: &'static str) -> Option<usize> {
        let mut object = node_claim_for(claim, self.pools.get(&claim.node_pool)?);
        let (it, offering) = cheapest_launch(&claim.instance_types, &object)?;
        // As the controller's launch: what the overlays gave the type, for overlay drift.
        if let Some(hash) = self
            .overlay_evaluation()
            .and_then(|eval| eval.capacity_record(&claim.node_pool, &it.name))
        {
            object
                .metadata
                .annotations
                .get_or_insert_default()
                .insert(CAPACITY_OVERLAY_HASH_ANNOTATION.into(), hash);
        }
        let name = format!("{}-{}", claim.node_pool, self.nodes.len());
        // The node's labels as the provider sets them: the instance type's, then the claim's.
        let mut labels = it.requirements.single_valued_labels();
        labels.extend(node_claim_labels(&object, &self.catalog.provider_labels));
        labels.insert(ZONE_LABEL.into(), offering.zone.clone());
        labels.insert(CAPACITY_TYPE_LABEL.into(), offering.capacity_type.clone());
        if let Some(r) = offering.reserved() {
            labels.insert(r.label.clone(), r.id.clone());
        }
        labels.insert(HOSTNAME_LABEL.into(), name.clone());
        let message = format!(
            "nodeclaim/{name} {} {} {} {}/h for {} pods",
            it.name,
            offering.capacity_type,
            offering.zone,
            self.catalog.price(offering.price),
            claim.pods.len()
        );
        self.nodes.push(SimNode {
            name,
            labels,
            taints: claim.taints.clone(),
            allocatable: it.allocatable().clone(),
            capacity: it.capacity.clone(),
            instance_type: it.name.clone(),
            capacity_type: offering.capacity_type.clone(),
            zone: offering.zone.clone(),
            price: offering.price,
            on_demand_price: it
                .offerings
                .iter()
                .find(|o| o.capacity_type == "on-demand" && o.zone == offering.zone)
                .map_or(offering.price, |o| o.price),
            node_pool: Some(claim.node_pool.clone()),
            launched_at: self.now,
            ready_at: self.now + self.timing.launch_delay + self.timing.registration_delay,
            terminated_at: None,
            reason,
            claim: Some(object),
            disrupted: false,
            draining: false,
            drain_deadline: None,
            conditions: BTreeMap::new(),
        });
        self.event("Launched", message);
        Some(self.nodes.len() - 1)
    }

    fn nodes_alive(&self) -> impl Iterator<Item = &SimNode> {
        self.nodes.iter().filter(|n| n.alive())
    }

    /// What a node present from the start costs, by its labels: the catalog's offering of its
    /// instance type in its zone and capacity type (on-demand when unlabelled), and the
    /// on-demand price there; 0 for a type the catalog does not have.
    fn catalog_price(&self, labels: &BTreeMap<String, String>) -> (f64, f64) {
        let label = |k: &str| labels.get(k).map(String::as_str).unwrap_or_default();
        let Some(it) = self
            .catalog
            .instance_types
            .iter()
            .find(|it| it.name == label("node.kubernetes.io/instance-type"))
        else {
            return (0.0, 0.0);
        };
        let offered = |capacity_type: &str| {
            let zone = label(ZONE_LABEL);
            let of_type = || {
                it.offerings
                    .iter()
                    .filter(|o| o.capacity_type == capacity_type)
            };
            of_type()
                .find(|o| o.zone == zone)
                .or_else(|| of_type().min_by(|a, b| a.price.total_cmp(&b.price)))
                .map(|o| o.price)
        };
        let capacity_type = match label(CAPACITY_TYPE_LABEL) {
            "" => "on-demand",
            other => other,
        };
        let on_demand = offered("on-demand").unwrap_or(0.0);
        (offered(capacity_type).unwrap_or(on_demand), on_demand)
    }

    fn cost_per_hour(&self) -> f64 {
        // Adding 0.0 turns the empty sum's -0.0 into 0.0.
        self.nodes_alive().map(|n| n.price).sum::<f64>() + 0.0
    }

    fn pending_count(&self) -> usize {
        self.pods
            .iter()
            .filter(|p| !p.done && p.bound_at.is_none())
            .count()
    }

    /// The cheapest cost per hour that could serve the active pods' CPU and memory if capacity
    /// were divisible: a linear-programming lower bound over the catalog.
    fn lower_bound_per_hour(&self) -> f64 {
        let mut demand = Resources::new();
        // The smallest request in each dimension: an instance type below it holds no pod at
        // all, and no real packing would buy it.
        let mut smallest: Option<(i64, i64)> = None;
        for p in self.pods.iter().filter(|p| !p.done) {
            let r = pod_requests(&p.pod).unwrap_or_default();
            smallest =
                Some(smallest.map_or((r.cpu, r.memory), |(c, m)| (c.min(r.cpu), m.min(r.memory))));
            demand.add(&r);
        }
        let demand = (demand.cpu as f64 / 1000.0, demand.memory as f64 / 1000.0);
        if let Some((cached, bound)) = self.bound_cache.get()
            && cached == demand
        {
            return bound;
        }
        let (min_cpu, min_memory) = smallest.unwrap_or_default();
        let holds_a_pod = |&(c, m, _): &crate::report::Shape| {
            c * 1000.0 >= min_cpu as f64 && m * 1000.0 >= min_memory as f64
        };
        let (mut shapes, mut reserved) = self.allowed_shapes();
        shapes.retain(holds_a_pod);
        reserved.retain(|(s, _)| holds_a_pod(s));
        let bound =
            crate::report::lp_lower_bound_with_reservations(demand.0, demand.1, &shapes, &reserved);
        self.bound_cache.set(Some((demand, bound)));
        bound
    }

    /// What the NodePools could launch, at the prices launches pay (NodeOverlays applied):
    /// each instance type at its cheapest allowed offering outside reservations, and each
    /// capacity reservation the NodePools may use with its size.
    fn allowed_shapes(&self) -> (Vec<crate::report::Shape>, Vec<(crate::report::Shape, f64)>) {
        // Every reservation whole: the bound is over all capacity, whoever holds it now.
        let (pools, _) = self.pools_offering(|_, _| 0);
        let mut shapes = Vec::new();
        let mut reserved: BTreeMap<String, (crate::report::Shape, f64)> = BTreeMap::new();
        for pool in &pools {
            let np = &pool.node_pool;
            let mut template = Requirements::from_node_claim(&np.spec.template.spec.requirements);
            template.add_all(&Requirements::from_labels(
                &np.spec.template.metadata.labels,
            ));
            let fitting: Vec<_> = pool
                .instance_types
                .iter()
                .filter(|it| it.requirements.intersects(&template).is_ok())
                .cloned()
                .collect();
            shapes.extend(crate::report::shapes(&fitting, |it| {
                it.compatible_offerings(&template)
                    .filter(|o| o.reservation.is_none())
                    .map(|o| o.price)
                    .min_by(f64::total_cmp)
            }));
            for it in &fitting {
                for o in it.compatible_offerings(&template) {
                    let Some(r) = &o.reservation else { continue };
                    if let [shape] =
                        crate::report::shapes(std::slice::from_ref(it), |_| Some(o.price))[..]
                    {
                        reserved.insert(r.id.clone(), (shape, f64::from(r.capacity)));
                    }
                }
            }
        }
        (shapes, reserved.into_values().collect())
    }

    fn check(&mut self, e: &Expectation) {
        let fail = |what: &str, value: f64, range: &crate::scenario::Range| {
            if !range.contains(value) {
                let bound = match (range.min, range.max) {
                    (Some(a), Some(b)) => format!("between {a} and {b}"),
                    (Some(a), None) => format!("at least {a}"),
                    (None, Some(b)) => format!("at most {b}"),
                    (None, None) => "anything".into(),
                };
                Some(format!(
                    "t={}s: expected {what} {bound}, got {value}",
                    self.now
                ))
            } else {
                None
            }
        };
        let checks = [
            (
                e.pending_pods.as_ref(),
                "pending pods",
                self.pending_count() as f64,
            ),
            (e.nodes.as_ref(), "nodes", self.nodes_alive().count() as f64),
            (
                e.cost_per_hour.as_ref(),
                "cost per hour",
                self.cost_per_hour(),
            ),
            (e.cost_total.as_ref(), "total cost", self.cost_total),
        ];
        let failures: Vec<String> = checks
            .iter()
            .filter_map(|(range, what, value)| range.and_then(|r| fail(what, *value, r)))
            .collect();
        for f in failures {
            self.event("ExpectationFailed", f.clone());
            self.failures.push(f);
        }
    }

    fn sample(&mut self) {
        self.samples.push(Sample {
            t_s: self.now,
            nodes: self.nodes_alive().count(),
            pods_pending: self.pending_count(),
            pods_running: self.pods.iter().filter(|p| is_ready(p)).count(),
            cost_per_hour: self.cost_per_hour(),
            lower_bound_per_hour: self.lower_bound_per_hour(),
        });
    }

    /// Runs to the end and reports. `progress` is called with the fraction done.
    pub fn run(mut self, progress: &mut dyn FnMut(f64)) -> Report {
        self.run_to_end(progress);
        self.report()
    }

    /// Runs to the end and reports, with every provisioning round and every disruption decision
    /// it made, each with the cluster it was made on (see [`Decided`]).
    pub fn run_recorded(mut self, progress: &mut dyn FnMut(f64)) -> (Report, Vec<Decided>) {
        self.recorded = Some(std::cell::RefCell::new(Vec::new()));
        self.run_to_end(progress);
        let recorded = self.recorded.take().map(|r| r.into_inner());
        (self.report(), recorded.unwrap_or_default())
    }

    fn run_to_end(&mut self, progress: &mut dyn FnMut(f64)) {
        let mut ready_reported = BTreeSet::new();
        while self.now <= self.end {
            while self.next_step < self.steps.len() && self.steps[self.next_step].0 <= self.now {
                let action = self.steps[self.next_step].1.clone();
                self.next_step += 1;
                self.run_step(action);
            }
            for n in 0..self.nodes.len() {
                if self.nodes[n].reason != "existing"
                    && self.nodes[n].ready(self.now)
                    && ready_reported.insert(n)
                {
                    let name = self.nodes[n].name.clone();
                    self.event("Ready", format!("node/{name}"));
                }
            }
            self.reconcile_workloads();
            self.reconcile_daemonsets();
            self.bind_pending();
            match self.autoscaler {
                Autoscaler::Karpenter => {
                    self.reconcile_buffers();
                    self.provision();
                    self.static_capacity();
                    self.repair();
                    self.disrupt();
                }
                Autoscaler::ClusterAutoscaler(_) => self.cluster_autoscaler_scan(),
            }
            let expectations: Vec<Expectation> = self
                .expectations
                .iter()
                .filter(|e| e.at.is_some_and(|a| a.0 == self.now))
                .cloned()
                .collect();
            for e in &expectations {
                self.check(e);
            }
            if self.now.is_multiple_of(self.sample_every) || self.now == self.end {
                self.sample();
                progress(self.now as f64 / self.end.max(1) as f64);
            }
            if let Some(last) = self.samples.last() {
                self.lower_bound_total += last.lower_bound_per_hour / 3600.0;
            }
            if self.now == self.end {
                break;
            }
            self.cost_total += self.cost_per_hour() / 3600.0;
            self.spot_saving_total += self
                .nodes_alive()
                .filter(|n| n.capacity_type == "spot")
                .map(|n| n.on_demand_price - n.price)
                .sum::<f64>()
                / 3600.0;
            self.now += 1;
        }
        let at_end: Vec<Expectation> = self
            .expectations
            .iter()
            .filter(|e| e.at.is_none())
            .cloned()
            .collect();
        for e in &at_end {
            self.check(e);
        }
    }

    fn report(self) -> Report {
        let mut waits: Vec<u64> = self
            .pods
            .iter()
            .filter(|p| p.owner.as_ref().is_none_or(|o| o.kind != "DaemonSet"))
            .filter_map(|p| p.bound_at.map(|b| b - p.created_at))
            .collect();
        waits.sort_unstable();
        let percentile = |q: f64| -> f64 {
            if waits.is_empty() {
                return 0.0;
            }
            let i = ((waits.len() as f64 - 1.0) * q).round() as usize;
            waits[i] as f64
        };
        let workload_pods: Vec<&SimPod> = self
            .pods
            .iter()
            .filter(|p| p.owner.as_ref().is_none_or(|o| o.kind != "DaemonSet"))
            .collect();
        let summary = Summary {
            pods_total: workload_pods.len(),
            pods_scheduled: workload_pods
                .iter()
                .filter(|p| p.bound_at.is_some())
                .count(),
            pods_pending: workload_pods
                .iter()
                .filter(|p| !p.done && p.bound_at.is_none())
                .count(),
            nodes_launched: self.nodes.iter().filter(|n| n.reason != "existing").count(),
            nodes_terminated: self
                .nodes
                .iter()
                .filter(|n| n.terminated_at.is_some())
                .count(),
            cost_total: self.cost_total,
            cost_lower_bound: self.lower_bound_total,
            spot_saving: self.spot_saving_total,
            time_to_schedule_p50_s: percentile(0.5),
            time_to_schedule_p95_s: percentile(0.95),
            time_to_schedule_max_s: waits.last().copied().unwrap_or(0) as f64,
        };
        let nodeclaims = self
            .nodes
            .iter()
            .filter(|n| n.reason != "existing")
            .map(|n| LaunchedNodeClaim {
                name: n.name.clone(),
                nodepool: n.node_pool.clone().unwrap_or_default(),
                instance_type: n.instance_type.clone(),
                capacity_type: n.capacity_type.clone(),
                zone: n.zone.clone(),
                price_per_hour: n.price,
                launched_at_s: n.launched_at,
                terminated_at_s: n.terminated_at,
                reason: n.reason.to_string(),
                reservation: self.reservations.id_of(&n.labels),
            })
            .collect();
        Report {
            scenario: self.name.clone(),
            catalog: self.catalog.name.clone(),
            currency: self.catalog.currency.into(),
            duration_s: self.end,
            summary,
            nodeclaims,
            timeline: self.samples,
            disruptions: self.disruptions,
            events: self.events,
            failures: self.failures,
            warnings: self.warnings,
        }
    }
}
