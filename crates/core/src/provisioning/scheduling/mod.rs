//! The scheduling simulation: given pending pods, existing nodes and NodePools, decide which
//! pods fit on existing nodes and which new NodeClaims to launch for the rest — upstream's
//! algorithm, deterministic and without I/O.
//!
//! Pods are taken largest first (CPU, then memory). Each goes to the first existing node that
//! takes it, else to the in-flight NodeClaim with the fewest pods that takes it, else to a new
//! NodeClaim from the heaviest NodePool that can hold it. A pod that fits nowhere has its
//! preferences relaxed one at a time and is tried again; one that still fits nowhere is
//! reported with the reason.

pub mod default_constraints;
mod domains;
mod existing;
pub mod explain;
mod from_snapshot;
pub mod nodeclaim;
pub mod preferences;
pub mod reservation;
pub mod topology;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Taint, Toleration, TopologySpreadConstraint};
use karpenter_api::Operator;
use karpenter_api::labels::{CAPACITY_TYPE_LABEL, HOSTNAME_LABEL, INSTANCE_TYPE_LABEL, ZONE_LABEL};

use domains::DomainMasks;
use existing::ExistingNode;
pub use existing::{BoundPod, ExistingNodeInput};
use nodeclaim::{
    DeviceFit, Headroom, InflightClaim, NodeClaimTemplate, relax_min_values, unmet_min_values,
};
pub use reservation::{ReservationError, ReservationManager, ReservedOfferingMode};
use topology::{CountedNode, Matching, PodRef, Topology};

use crate::instancetype::{InstanceType, RESERVED};
use crate::resources::{Limits, NODES, QuantityError, Resources};
use crate::scheduling::dynamic_resources::{
    self, Allocation, Allocator, ClaimAllocation, DeviceInventory, Target,
};
use crate::scheduling::hostports::{HostPort, spec_host_ports};
use crate::scheduling::volumeusage::Attachment;
use crate::scheduling::{AllowUndefined, Requirement, Requirements};
use crate::state::pods::ObservedPod;
use crate::state::volumes::PodVolumes;
use karpenter_api::dra::ResourceClaim;

/// The most instance types a NodeClaim lists (upstream's `MaxInstanceTypes`).
pub const MAX_INSTANCE_TYPES: usize = 600;

pub use crate::instancetype::NodePoolInput;

/// How the simulation treats soft constraints and `minValues`.
#[derive(Clone, Debug)]
pub struct SchedulerOptions {
    /// Honour preferred affinities and `ScheduleAnyway` spread until they must be relaxed
    /// (upstream's `--preference-policy=Respect`); false ignores them.
    pub respect_preferences: bool,
    /// Fail a NodeClaim that cannot keep `minValues` (upstream's default, `Strict`).
    pub strict_min_values: bool,
    /// How many instance types a new NodeClaim lists at most, cheapest first.
    pub max_instance_types: usize,
    /// Labels the provider defines on its instance types (AWS's `karpenter.k8s.aws/*`, KWOK's
    /// `karpenter.kwok.sh/*`): like the well-known labels, pods may require them without the
    /// NodePool setting them.
    pub provider_labels: Vec<String>,
    /// The cluster's namespaces with their labels, for pod (anti-)affinity terms with a
    /// `namespaceSelector`.
    pub namespaces: Vec<(String, BTreeMap<String, String>)>,
    /// What pods' persistent volumes bring, by `namespace/name` (see
    /// [`crate::state::volumes`]): requirements that constrain the node, not the pod's
    /// topology, and attachments that count against nodes' CSI volume limits.
    pub pod_volumes: Arc<HashMap<String, PodVolumes>>,
    /// Launch into capacity reservations (upstream's `ReservedCapacity` gate, on by default);
    /// off, reserved offerings are dropped as if the provider had none.
    pub reserved_capacity: bool,
    /// What a pod that would cost a NodeClaim its reservations does: provisioning is
    /// [`ReservedOfferingMode::Strict`], disruption's simulations fall back.
    pub reserved_offering_mode: ReservedOfferingMode,
    /// Cluster-wide default topology spread constraints (upstream's `--scheduler-config`),
    /// for pods that declare none.
    pub default_constraints: Vec<TopologySpreadConstraint>,
    /// Those constraints with each pod's deduced selector, by `namespace/name` (see
    /// [`default_constraints::default_spread`]): what a pod listed here schedules with.
    pub default_spread: Arc<HashMap<String, Arc<[TopologySpreadConstraint]>>>,
    /// Leave pods' device claims (Dynamic Resource Allocation) to kube-scheduler: a pod with
    /// claims is reported as not supported (upstream's `IGNORE_DRA_REQUESTS`, true by
    /// default). False simulates them; the round then fills in `dynamic_resources`.
    pub ignore_dra_requests: bool,
    /// The cluster's ResourceClaims, DeviceClasses and ResourceSlices: pods' claims are
    /// allocated against them when set, and reported as not supported when not.
    pub dynamic_resources: Option<Arc<DeviceInventory>>,
}

impl Default for SchedulerOptions {
    fn default() -> Self {
        Self {
            respect_preferences: true,
            strict_min_values: true,
            max_instance_types: MAX_INSTANCE_TYPES,
            provider_labels: Vec::new(),
            namespaces: Vec::new(),
            pod_volumes: Arc::default(),
            reserved_capacity: true,
            reserved_offering_mode: ReservedOfferingMode::Fallback,
            default_constraints: Vec::new(),
            default_spread: Arc::default(),
            ignore_dra_requests: true,
            dynamic_resources: None,
        }
    }
}

/// What the scheduler needs of a pod, computed once per pod (and again after relaxation).
#[derive(Clone, Debug)]
pub struct PodData {
    /// The pod's requests, with `pods: 1`.
    pub requests: Resources,
    /// What the pod requires of its node, the heaviest preference included while respected.
    pub requirements: Requirements,
    /// Without preferences.
    pub strict_requirements: Requirements,
    /// The pod's tolerations.
    pub tolerations: Vec<Toleration>,
    /// Host ports the pod binds.
    pub host_ports: Vec<HostPort>,
    /// The volumes its claims attach (against existing nodes' CSI limits).
    pub attachments: Vec<Attachment>,
    /// The ResourceClaims it needs devices for, in the order it lists them.
    pub resource_claims: Vec<Arc<ResourceClaim>>,
    /// When its volumes allow OR-ed terms: what each combination requires of the node (see
    /// [`PodData::volume_variants`]); empty otherwise.
    pub volume_alternatives: Vec<Requirements>,
    /// `requirements` without what the volumes add, when there are alternatives.
    pub own_requirements: Requirements,
}

impl PodData {
    /// Computes a pod's scheduling data.
    pub fn new(pod: &Pod, respect_preferences: bool) -> Result<Self, QuantityError> {
        Self::of(pod, respect_preferences)
    }

    /// Computes the scheduling data of a pod in any observed form.
    pub fn of(
        pod: &(impl ObservedPod + ?Sized),
        respect_preferences: bool,
    ) -> Result<Self, QuantityError> {
        let spec = pod.pod_spec();
        let strict_requirements = Requirements::for_spec(spec, false);
        let requirements = if respect_preferences {
            Requirements::for_spec(spec, true)
        } else {
            strict_requirements.clone()
        };
        Ok(Self {
            requests: pod.requests()?,
            requirements,
            strict_requirements,
            tolerations: spec.and_then(|s| s.tolerations.clone()).unwrap_or_default(),
            host_ports: spec_host_ports(spec),
            attachments: Vec::new(),
            resource_claims: Vec::new(),
            volume_alternatives: Vec::new(),
            own_requirements: Requirements::new(),
        })
    }

    /// The forms the pod is tried in: itself, or one per combination of its volumes' OR-ed
    /// terms, in order (upstream's volume requirement alternatives).
    pub fn volume_variants(&self) -> Vec<std::borrow::Cow<'_, PodData>> {
        if self.volume_alternatives.is_empty() {
            return vec![std::borrow::Cow::Borrowed(self)];
        }
        self.volume_alternatives
            .iter()
            .map(|alternative| {
                let mut variant = self.clone();
                variant.volume_alternatives = Vec::new();
                variant.requirements = self.own_requirements.clone();
                variant.requirements.add_all(alternative);
                std::borrow::Cow::Owned(variant)
            })
            .collect()
    }
}

/// A DaemonSet pod with each container's limits standing for the requests it does not state,
/// as the API server defaults a pod's: a pod made from a DaemonSet's template has not been
/// through it (upstream's `PodForDaemonSet`). Real pods are unchanged.
fn limits_as_requests(pod: &Pod) -> Pod {
    let mut pod = pod.clone();
    if let Some(spec) = pod.spec.as_mut() {
        let init = spec.init_containers.iter_mut().flatten();
        for c in spec.containers.iter_mut().chain(init) {
            let Some(resources) = c.resources.as_mut() else {
                continue;
            };
            let Some(limits) = resources.limits.clone() else {
                continue;
            };
            let requests = resources.requests.get_or_insert_with(Default::default);
            for (name, quantity) in limits {
                requests.entry(name).or_insert(quantity);
            }
        }
    }
    pod
}

/// A NodeClaim the simulation decided to launch.
#[derive(Clone, Debug)]
pub struct NewNodeClaim {
    /// The NodePool it comes from.
    pub node_pool: String,
    /// What the node's labels must satisfy, with `karpenter.sh/capacity-type` narrowed to
    /// what the options offer; [`NewNodeClaim::node_claim_requirements`] adds the
    /// instance-type list.
    pub requirements: Requirements,
    /// The instance types that fit, cheapest first.
    pub instance_types: Vec<Arc<InstanceType>>,
    /// The pods it was opened for (indices into the batch).
    pub pods: Vec<usize>,
    /// The pods' requests plus the smallest DaemonSet overhead among the options.
    pub requests: Resources,
    /// Labels the node gets (the template's and the single-valued requirements).
    pub labels: BTreeMap<String, String>,
    /// Taints the node gets.
    pub taints: Vec<Taint>,
    /// Startup taints.
    pub startup_taints: Vec<Taint>,
    /// Some `minValues` were lowered to what the instance types offer
    /// (`MIN_VALUES_POLICY=BestEffort`): the NodeClaim says so in an annotation.
    pub min_values_relaxed: bool,
    /// The drivers whose devices its pods' claims were given, sorted: the NodeClaim lists them
    /// in `karpenter.sh/requested-dra-drivers` and initializes once they published.
    pub dra_drivers: Vec<String>,
}

impl NewNodeClaim {
    /// The requirements as the NodeClaim is created with them: `node.kubernetes.io/instance-type
    /// In [...]` lists the options, cheapest first, keeping any `minValues`.
    pub fn node_claim_requirements(&self) -> Requirements {
        let mut requirements = self.requirements.clone();
        let min_values = requirements
            .remove(INSTANCE_TYPE_LABEL)
            .and_then(|r| r.min_values());
        let names: Vec<&str> = self
            .instance_types
            .iter()
            .map(|it| it.name.as_str())
            .collect();
        requirements.add(Requirement::with_min_values(
            INSTANCE_TYPE_LABEL,
            Operator::In,
            &names,
            min_values,
        ));
        requirements
    }

    /// The price of the cheapest option, the most the launch should cost.
    pub fn cheapest_price(&self) -> Option<f64> {
        self.instance_types
            .first()
            .and_then(|it| it.cheapest_price(&self.requirements))
    }
}

/// The decisions of one simulation.
#[derive(Clone, Debug, Default)]
pub struct Results {
    /// NodeClaims to create.
    pub new_node_claims: Vec<NewNodeClaim>,
    /// Pods that fit on existing (or in-flight) nodes, by node name.
    pub existing_nodes: BTreeMap<String, Vec<usize>>,
    /// Pods that fit nowhere, with the reason (indices into the batch).
    pub pod_errors: BTreeMap<usize, String>,
    /// The simulation stopped before every pod was tried (its time budget ran out).
    pub interrupted: bool,
    /// Pods among `pod_errors` that wait for reserved capacity held by this round's other
    /// NodeClaims (upstream's `ReservedOfferingError`): deferred to a later round rather than
    /// unschedulable, so no `FailedScheduling` for them.
    pub deferred: BTreeSet<usize>,
    /// Pending pods (phase `Pending`) by the zone they are confined to before anything is
    /// placed: a zone's name, `flexible` (more than one) or `none` (none at all) — upstream's
    /// `karpenter_scheduler_pending_pods_by_effective_zone_count`.
    pub pending_by_zone: BTreeMap<String, usize>,
    /// Where the pods' ResourceClaims were allocated, by `namespace/name` (upstream's
    /// `DRAClaimAllocationMetadata`), when device claims are simulated.
    pub claim_allocations: BTreeMap<String, ClaimAllocation>,
}

impl Results {
    /// How many pods were placed.
    pub fn pods_scheduled(&self) -> usize {
        self.new_node_claims
            .iter()
            .map(|c| c.pods.len())
            .sum::<usize>()
            + self.existing_nodes.values().map(Vec::len).sum::<usize>()
    }
}

/// Where kube-scheduler would bind `pods` now: on the existing nodes they fit, judged as the
/// scheduling simulation judges fit, with no NodeClaim launched — by node name, indices into
/// `pods`. The simulator's kube-scheduler stand-in.
pub fn fit_existing<P: ObservedPod>(
    existing: &[ExistingNodeInput],
    pods: &[P],
    options: SchedulerOptions,
) -> BTreeMap<String, Vec<usize>> {
    Scheduler::new(&[], existing, &[], options)
        .solve(pods, &|| false)
        .existing_nodes
}

/// One scheduling simulation over a fixed set of NodePools and nodes.
pub struct Scheduler {
    templates: Vec<NodeClaimTemplate>,
    /// Remaining NodePool limits per template.
    remaining: Vec<Limits>,
    existing: Vec<ExistingNode>,
    topology: Topology,
    claims: Vec<InflightClaim>,
    /// Claim indices, fewest pods first (ties in the order a stable sort would keep).
    claim_order: Vec<usize>,
    /// Each claim's index in `claim_order`.
    claim_position: Vec<usize>,
    /// What each claim could still take, to pass over full ones cheaply.
    claim_headroom: Vec<Headroom>,
    /// Each claim's allowed domains as bit masks, to judge topology domains without strings.
    domain_masks: DomainMasks,
    /// Claims by placeholder hostname.
    claim_by_host: rustc_hash::FxHashMap<String, usize>,
    options: SchedulerOptions,
    prefer_no_schedule_taints: bool,
    next_hostname: usize,
    /// Capacity reservations and which claims hold them.
    reservations: ReservationManager,
    /// The nodes whose published devices pods may use (initialized ones), until `solve`
    /// builds the allocator.
    usable_nodes: Vec<String>,
    /// Allocates pods' device claims, when they are simulated; made for the first pod with
    /// claims, from `devices`.
    allocator: Option<Allocator>,
    /// The cluster's devices and the UIDs of the pods leaving their nodes, until the
    /// allocator is made.
    devices: Option<(Arc<DeviceInventory>, std::collections::HashSet<String>)>,
}

/// Why a pod was not placed.
#[derive(Debug)]
enum Failure {
    /// It fits nowhere (the reason upstream gives).
    Unschedulable(String),
    /// It could use reserved capacity that this round's other NodeClaims hold: it waits for the
    /// next round, its preferences not relaxed (upstream's `ReservedOfferingError`).
    Deferred(String),
}

impl From<String> for Failure {
    fn from(reason: String) -> Self {
        Failure::Unschedulable(reason)
    }
}

impl From<&str> for Failure {
    fn from(reason: &str) -> Self {
        Failure::Unschedulable(reason.to_string())
    }
}

/// Why a claim holding reservations or able to take one refuses a pod (upstream's messages).
const RESERVATIONS_HELD: &str = "one or more instance types with compatible reserved offerings are available, but could not be reserved";
const RESERVATIONS_LOST: &str = "satisfying updated nodeclaim constraints would remove all compatible reserved offering options";

/// A rejection whose reason nobody will read: a pod tried against many nodes keeps only the
/// reasons of the NodePools it could not open a NodeClaim from.
#[derive(Debug)]
struct Rejected;

/// A pod's scheduling data with what its volumes require of the node.
fn pod_data(pod: &dyn ObservedPod, options: &SchedulerOptions) -> Result<PodData, QuantityError> {
    let mut data = PodData::of(pod, options.respect_preferences)?;
    if !options.pod_volumes.is_empty()
        && let Some(volumes) = options.pod_volumes.get(&crate::state::pods::key(pod))
    {
        // The node must meet them, but they are not the pod's own affinity: topology spread
        // counts domains by the pod's requirements alone (upstream keeps them apart too).
        if !volumes.alternatives.is_empty() {
            data.own_requirements = data.requirements.clone();
            data.volume_alternatives = volumes.alternatives.clone();
        }
        if let Some(r) = &volumes.requirements {
            data.requirements.add_all(r);
        }
        data.attachments = volumes.attachments.clone();
    }
    Ok(data)
}

/// The devices `data`'s claims would get on existing node `node`; `None` when it has none.
fn allocate_on_node(
    allocator: Option<&Allocator>,
    templates: &[NodeClaimTemplate],
    node: &ExistingNode,
    data: &PodData,
) -> Result<Option<Allocation>, String> {
    let Some(allocator) = allocator.filter(|_| !data.resource_claims.is_empty()) else {
        return Ok(None);
    };
    let instance_type = node.instance_type.as_deref().unwrap_or_default();
    // A node not initialized yet has published nothing pods may use: it stands for the devices
    // its instance type will have.
    let resources = node
        .node_pool
        .as_deref()
        .filter(|_| !node.initialized)
        .and_then(|pool| templates.iter().find(|t| t.node_pool == pool))
        .and_then(|t| t.instance_types.iter().find(|it| it.name == instance_type))
        .map(|it| &*it.dynamic_resources);
    let target = Target {
        id: &node.name,
        node_pool: node.node_pool.as_deref().unwrap_or_default(),
        node_name: &node.name,
        requirements: &node.requirements,
        instance_types: vec![(instance_type, resources)],
    };
    allocator.allocate(&target, &data.resource_claims).map(Some)
}

/// The devices `data`'s claims would get on NodeClaim `claim`, on each of its instance types;
/// `None` when it has none.
fn allocate_on_claim(
    allocator: Option<&Allocator>,
    template: &NodeClaimTemplate,
    claim: &InflightClaim,
    data: &PodData,
) -> Result<Option<(Allocation, DeviceFit)>, String> {
    let Some(allocator) = allocator.filter(|_| !data.resource_claims.is_empty()) else {
        return Ok(None);
    };
    let target = Target {
        id: &claim.hostname,
        node_pool: &template.node_pool,
        node_name: "",
        requirements: &claim.requirements,
        instance_types: claim
            .options
            .iter()
            .map(|&i| {
                let it = &template.instance_types[i as usize];
                (it.name.as_str(), Some(&*it.dynamic_resources))
            })
            .collect(),
    };
    let allocation = allocator.allocate(&target, &data.resource_claims)?;
    let allowed: BTreeSet<&str> = allocation
        .instance_types
        .iter()
        .map(String::as_str)
        .collect();
    let fit = DeviceFit {
        requirements: allocation.requirements.clone(),
        instance_types: template
            .instance_types
            .iter()
            .map(|it| allowed.contains(it.name.as_str()))
            .collect(),
    };
    Ok(Some((allocation, fit)))
}

/// Records the devices a pod's claims got on NodeClaim `hostname` of `template`, giving back
/// those of the instance types it no longer considers (`kept` are the ones it does).
fn commit_devices(
    allocator: Option<&mut Allocator>,
    template: &NodeClaimTemplate,
    hostname: &str,
    allocation: Option<Allocation>,
    kept: &[u32],
) {
    let (Some(allocator), Some(allocation)) = (allocator, allocation) else {
        return;
    };
    let kept: BTreeSet<&str> = kept
        .iter()
        .map(|&i| template.instance_types[i as usize].name.as_str())
        .collect();
    let dropped: Vec<String> = allocation
        .instance_types
        .iter()
        .filter(|n| !kept.contains(n.as_str()))
        .cloned()
        .collect();
    allocator.commit(allocation);
    allocator.release(hostname, dropped.iter().map(String::as_str));
}

/// Why a pod with resource claims is not scheduled (upstream's message).
pub const DRA_NOT_SUPPORTED: &str =
    "pod has Dynamic Resource Allocation requirements that are not yet supported by Karpenter";

/// Whether a pod asks for devices through Dynamic Resource Allocation: resource claims of its
/// own or of a container. The simulation does not allocate devices, so, as upstream with
/// `IGNORE_DRA_REQUESTS` (its default), such a pod gets no node and a DaemonSet pod with claims
/// adds no overhead; kube-scheduler may still place it on a node that has the devices.
pub fn has_dra_requirements(spec: Option<&k8s_openapi::api::core::v1::PodSpec>) -> bool {
    let Some(spec) = spec else { return false };
    let claims = |c: &k8s_openapi::api::core::v1::Container| {
        c.resources
            .as_ref()
            .and_then(|r| r.claims.as_ref())
            .is_some_and(|c| !c.is_empty())
    };
    spec.resource_claims.as_ref().is_some_and(|c| !c.is_empty())
        || spec.containers.iter().any(claims)
        || spec.init_containers.iter().flatten().any(claims)
}

/// Pods that could not be read (a malformed quantity) or that need devices through DRA are
/// reported, not scheduled.
fn pod_data_or_error(pod: &dyn ObservedPod, options: &SchedulerOptions) -> Result<PodData, String> {
    let claims = if has_dra_requirements(pod.pod_spec()) {
        let Some(inventory) = &options.dynamic_resources else {
            return Err(DRA_NOT_SUPPORTED.to_string());
        };
        resource_claims(pod, inventory)?
    } else {
        Vec::new()
    };
    let mut data = pod_data(pod, options).map_err(|e| format!("ignoring pod, {e}"))?;
    data.resource_claims = claims;
    Ok(data)
}

/// The ResourceClaims a pod uses, or why one cannot be read (the pod waits for it).
fn resource_claims(
    pod: &dyn ObservedPod,
    inventory: &DeviceInventory,
) -> Result<Vec<Arc<ResourceClaim>>, String> {
    let namespace = pod.meta().namespace.as_deref().unwrap_or("default");
    let references = dynamic_resources::claim_references(
        namespace,
        pod.pod_spec(),
        pod.resource_claim_statuses(),
    );
    dynamic_resources::resolve_claims(inventory, &references)
}

impl Scheduler {
    /// Prepares a simulation. NodePools are tried by weight (highest first), ties by name in
    /// reverse order, as upstream does; DaemonSet pods add their overhead to every node they
    /// would run on.
    pub fn new(
        node_pools: &[NodePoolInput],
        existing_nodes: &[ExistingNodeInput],
        daemonset_pods: &[Pod],
        options: SchedulerOptions,
    ) -> Self {
        // With device claims simulated a DaemonSet pod's claims are not (upstream neither),
        // but its requests count.
        let simulate_dra = options.dynamic_resources.is_some();
        let daemons: Vec<(Pod, PodData)> = daemonset_pods
            .iter()
            .filter(|p| simulate_dra || !has_dra_requirements(p.spec.as_ref()))
            .map(limits_as_requests)
            .filter_map(|p| PodData::new(&p, false).ok().map(|d| (p, d)))
            .collect();
        let unreserved: Vec<NodePoolInput>;
        let node_pools = if options.reserved_capacity {
            node_pools
        } else {
            unreserved = without_reserved_offerings(node_pools);
            &unreserved
        };
        let mut pools: Vec<&NodePoolInput> = node_pools
            .iter()
            .filter(|p| p.node_pool.spec.replicas.is_none())
            .collect();
        pools.sort_by(|a, b| {
            b.node_pool
                .weight()
                .cmp(&a.node_pool.weight())
                .then_with(|| b.node_pool.name().cmp(a.node_pool.name()))
        });
        let templates: Vec<NodeClaimTemplate> = pools
            .iter()
            .map(|p| {
                NodeClaimTemplate::new(
                    &p.node_pool,
                    &p.instance_types,
                    &daemons,
                    &options.provider_labels,
                )
            })
            .collect();
        let mut remaining = Vec::new();
        for pool in &pools {
            // Limits the API server admitted always parse; a bad one limits nothing.
            let mut limits = pool
                .node_pool
                .spec
                .limits
                .as_ref()
                .and_then(|l| Limits::from_list(l).ok())
                .unwrap_or_default();
            for node in existing_nodes
                .iter()
                .filter(|n| n.node_pool.as_deref() == Some(pool.node_pool.name()))
            {
                limits.subtract(&node.capacity);
                if let Some(n) = limits.get(NODES) {
                    limits.set(NODES, n - 1000);
                }
            }
            remaining.push(limits);
        }
        let universe = domain_universe(&templates);
        let domain_masks = DomainMasks::new(&universe);
        let mut existing: Vec<ExistingNode> = existing_nodes
            .iter()
            .map(|n| ExistingNode::new(n, &daemons))
            .collect();
        let counted: Vec<CountedNode<'_>> = existing_nodes
            .iter()
            .zip(&existing)
            .map(|(n, e)| CountedNode {
                name: &n.name,
                requirements: e.requirements.clone(),
                taints: &n.taints,
                pods: &n.pods,
            })
            .collect();
        let mut topology = Topology::new(
            universe,
            &counted,
            options.namespaces.clone(),
            options.respect_preferences,
        );
        topology.set_domain_taints(domain_taints(&templates));
        drop(counted);
        for node in existing_nodes {
            for pod in &node.pods {
                topology.track_placed_pod(pod, &node.labels, &node.name);
            }
        }
        existing.sort_by(|a, b| {
            b.initialized
                .cmp(&a.initialized)
                .then_with(|| a.name.cmp(&b.name))
        });
        let prefer_no_schedule_taints = templates
            .iter()
            .any(|t| t.taints.iter().any(|t| t.effect == "PreferNoSchedule"));
        let reservations = ReservationManager::new(
            templates
                .iter()
                .filter(|t| t.has_reserved)
                .flat_map(|t| t.instance_types.iter().map(|it| &**it)),
        );
        Self {
            templates,
            remaining,
            existing,
            topology,
            claims: Vec::new(),
            claim_order: Vec::new(),
            claim_position: Vec::new(),
            claim_headroom: Vec::new(),
            domain_masks,
            claim_by_host: Default::default(),
            options,
            prefer_no_schedule_taints,
            next_hostname: 0,
            reservations,
            usable_nodes: if simulate_dra {
                existing_nodes
                    .iter()
                    .filter(|n| n.initialized)
                    .map(|n| n.name.clone())
                    .collect()
            } else {
                Vec::new()
            },
            allocator: None,
            devices: None,
        }
    }

    /// Schedules `pods`. `interrupt` is polled between pods; when it returns true the results so
    /// far are returned (upstream's one-minute budget, kept out of this pure code).
    ///
    /// Pods are read in whatever form the caller keeps them (a whole `Pod`, or a trimmed copy
    /// that shares its spec), so a large batch is not copied into whole `Pod`s first.
    pub fn solve<P: ObservedPod>(&mut self, pods: &[P], interrupt: &dyn Fn() -> bool) -> Results {
        let mut results = Results::default();
        self.devices = self.options.dynamic_resources.clone().map(|inventory| {
            // The batch's bound pods are leaving their nodes: their devices come free.
            let deleting = pods
                .iter()
                .filter(|p| p.node_name().is_some())
                .filter_map(|p| p.meta().uid.clone())
                .collect();
            (inventory, deleting)
        });
        // Pods are copied only when a preference is relaxed; the rest are read in place.
        let mut relaxed: HashMap<usize, Pod> = HashMap::new();
        let defaulted = self.with_default_spread(pods);
        let original = |i: usize| -> &dyn ObservedPod {
            match defaulted.get(&i) {
                Some(pod) => pod,
                None => &pods[i],
            }
        };
        let mut data: Vec<Option<PodData>> = Vec::with_capacity(pods.len());
        for i in 0..pods.len() {
            match pod_data_or_error(original(i), &self.options) {
                Ok(d) => data.push(Some(d)),
                Err(e) => {
                    results.pod_errors.insert(i, e);
                    data.push(None);
                }
            }
        }
        // Largest first; ties keep the batch order (creation order).
        let mut queue: std::collections::VecDeque<usize> = {
            let mut order: Vec<usize> = (0..pods.len()).filter(|i| data[*i].is_some()).collect();
            order.sort_by(|a, b| {
                let (ra, rb) = (
                    &data[*a].as_ref().map(|d| &d.requests),
                    &data[*b].as_ref().map(|d| &d.requests),
                );
                let (ra, rb) = (
                    ra.expect("queued pods have data"),
                    rb.expect("queued pods have data"),
                );
                rb.cpu.cmp(&ra.cpu).then(rb.memory.cmp(&ra.memory))
            });
            order.into()
        };
        for &i in &queue {
            self.topology.update(PodRef {
                id: i,
                pod: original(i),
            });
        }
        for &i in &queue {
            let pod = original(i);
            if pod.phase() == Some("Pending")
                && let Some(d) = &data[i]
            {
                let zone = self.effective_zone(PodRef { id: i, pod }, d);
                *results.pending_by_zone.entry(zone).or_default() += 1;
            }
        }
        let mut pushed_at: HashMap<usize, usize> = HashMap::new();
        while let Some(&i) = queue.front() {
            if pushed_at.get(&i) == Some(&queue.len()) {
                break; // a whole pass without progress
            }
            if interrupt() {
                results.interrupted = true;
                break;
            }
            queue.pop_front();
            match self.try_schedule(
                i,
                original(i),
                &mut relaxed,
                data[i].as_mut().expect("queued pods have data"),
                &mut results,
            ) {
                Ok(()) => {
                    results.pod_errors.remove(&i);
                    results.deferred.remove(&i);
                }
                Err(failure) => {
                    let e = match failure {
                        Failure::Unschedulable(e) => {
                            results.deferred.remove(&i);
                            e
                        }
                        Failure::Deferred(e) => {
                            results.deferred.insert(i);
                            e
                        }
                    };
                    results.pod_errors.insert(i, e);
                    // Retry later from the original pod: another placement may make room.
                    if relaxed.remove(&i).is_some() {
                        if let Ok(mut d) = pod_data(original(i), &self.options) {
                            if let Some(old) = data[i].as_mut() {
                                d.resource_claims = std::mem::take(&mut old.resource_claims);
                            }
                            data[i] = Some(d);
                        }
                        self.topology.update(PodRef {
                            id: i,
                            pod: original(i),
                        });
                    }
                    queue.push_back(i);
                    pushed_at.insert(i, queue.len());
                }
            }
        }
        self.finish(&mut results);
        results
    }

    /// The zone a pod is confined to before anything is placed: its own zone requirement (not
    /// its preferences), its volumes' zones and its zonal topology, intersected — the zone's
    /// name when one remains, `flexible` for several (or no zonal constraint), `none` for none
    /// (upstream's `computeEffectiveZoneFromPod`).
    fn effective_zone(&self, pod: PodRef<'_>, data: &PodData) -> String {
        const FLEXIBLE: &str = "flexible";
        const NONE: &str = "none";
        let matching = self.topology.matching(&pod);
        let topology = self.topology.zone_domains(&matching, &data.requirements);
        if topology.as_ref().is_some_and(BTreeSet::is_empty) {
            return NONE.into();
        }
        let own = data.strict_requirements.get(ZONE_LABEL);
        let volumes = (!self.options.pod_volumes.is_empty())
            .then(|| {
                self.options
                    .pod_volumes
                    .get(&crate::state::pods::key(pod.pod))
            })
            .flatten()
            .and_then(|v| v.requirements.as_ref())
            .and_then(|r| r.get(ZONE_LABEL))
            .filter(|r| r.operator() == Operator::In);
        let candidates: Vec<String> = match (own.filter(|r| r.operator() == Operator::In), volumes)
        {
            (Some(r), _) | (None, Some(r)) => r.values().map(str::to_string).collect(),
            (None, None) => match &topology {
                Some(t) => t.iter().cloned().collect(),
                None => return FLEXIBLE.into(),
            },
        };
        let mut matched = candidates.into_iter().filter(|z| {
            own.is_none_or(|r| r.has(z))
                && volumes.is_none_or(|r| r.has(z))
                && topology.as_ref().is_none_or(|t| t.contains(z))
        });
        match (matched.next(), matched.next()) {
            (Some(zone), None) => zone,
            (Some(_), Some(_)) => FLEXIBLE.into(),
            (None, _) => NONE.into(),
        }
    }

    /// The pods of `pods` that schedule with the cluster's default topology spread, as copies
    /// carrying it (upstream stamps it on its scheduling-time copies), by position.
    fn with_default_spread<P: ObservedPod>(&self, pods: &[P]) -> HashMap<usize, Pod> {
        if self.options.default_spread.is_empty() {
            return HashMap::new();
        }
        pods.iter()
            .enumerate()
            .filter_map(|(i, pod)| {
                let constraints = self
                    .options
                    .default_spread
                    .get(&crate::state::pods::key(pod))?;
                let declared = pod
                    .pod_spec()
                    .and_then(|s| s.topology_spread_constraints.as_ref())
                    .is_some_and(|c| !c.is_empty());
                if declared {
                    return None;
                }
                let mut copy = pod.to_pod();
                copy.spec
                    .get_or_insert_with(Default::default)
                    .topology_spread_constraints = Some(constraints.to_vec());
                Some((i, copy))
            })
            .collect()
    }

    fn try_schedule(
        &mut self,
        id: usize,
        original: &dyn ObservedPod,
        relaxed: &mut HashMap<usize, Pod>,
        data: &mut PodData,
        results: &mut Results,
    ) -> Result<(), Failure> {
        loop {
            let pod: &dyn ObservedPod = match relaxed.get(&id) {
                Some(relaxed) => relaxed,
                None => original,
            };
            let err = match self.add(id, pod, data, results) {
                Ok(()) => return Ok(()),
                // Reserved capacity may come free later in this round or the next: the pod
                // keeps its preferences.
                Err(deferred @ Failure::Deferred(_)) => return Err(deferred),
                Err(Failure::Unschedulable(e)) => e,
            };
            let pod = relaxed.entry(id).or_insert_with(|| original.to_pod());
            if preferences::relax(pod, self.prefer_no_schedule_taints).is_none() {
                return Err(err.into());
            }
            let claims = std::mem::take(&mut data.resource_claims);
            *data =
                pod_data(pod, &self.options).map_err(|e| Failure::Unschedulable(e.to_string()))?;
            data.resource_claims = claims;
            self.topology.update(PodRef { id, pod });
        }
    }

    fn add(
        &mut self,
        id: usize,
        pod: &dyn ObservedPod,
        data: &PodData,
        results: &mut Results,
    ) -> Result<(), Failure> {
        let pod_ref = PodRef { id, pod };
        if !data.resource_claims.is_empty()
            && self.allocator.is_none()
            && let Some((inventory, deleting)) = self.devices.take()
        {
            let usable = self.usable_nodes.iter().map(String::as_str).collect();
            self.allocator = Some(Allocator::new(
                inventory,
                &usable,
                deleting,
                self.options.provider_labels.clone(),
            ));
        }
        let matching = self.topology.matching(&pod_ref);
        // A pod whose volumes allow OR-ed terms tries each combination on each candidate.
        let variants = data.volume_variants();
        let outer = data;
        // 1. Existing nodes.
        for node in &mut self.existing {
            for data in variants.iter().map(|v| &**v) {
                let topology = &self.topology;
                let narrowed = node.can_add(data, |reqs| {
                    if matching.is_empty() {
                        return Ok(None);
                    }
                    let narrowed = topology
                        .add_requirements(
                            &matching,
                            &node.taints,
                            &data.strict_requirements,
                            reqs,
                            AllowUndefined::Nothing,
                        )
                        .map_err(|_| Rejected)?;
                    // A node without the topology key has no domain to offer (kube-scheduler
                    // filters it out for a spread or an affinity on that key).
                    match narrowed {
                        Some(r) if reqs.compatible(&r, AllowUndefined::Nothing).is_err() => {
                            Err(Rejected)
                        }
                        narrowed => Ok(narrowed),
                    }
                });
                if let Ok(requirements) = narrowed {
                    let Ok(allocation) =
                        allocate_on_node(self.allocator.as_ref(), &self.templates, node, data)
                    else {
                        continue;
                    };
                    if let (Some(allocator), Some(a)) = (self.allocator.as_mut(), allocation) {
                        allocator.commit(a);
                    }
                    node.add(data);
                    let reqs = requirements.as_ref().unwrap_or(&node.requirements).clone();
                    self.topology
                        .record(&pod_ref, &node.taints, &reqs, AllowUndefined::Nothing);
                    results
                        .existing_nodes
                        .entry(node.name.clone())
                        .or_default()
                        .push(id);
                    return Ok(());
                }
            }
        }
        // 2. NodeClaims opened in this simulation, fewest pods first. With hostname
        // anti-affinity only the claims on still-empty hostnames can take the pod, and with
        // many claims it is cheaper to try just those, in the same order.
        let candidates: Option<Vec<usize>> = self
            .topology
            .free_hosts(&matching)
            .filter(|free| free.len() * 4 < self.claims.len())
            .map(|free| {
                let mut positions: Vec<usize> = free
                    .iter()
                    .filter_map(|h| self.claim_by_host.get(h))
                    .map(|&c| self.claim_position[c])
                    .collect();
                positions.sort_unstable();
                positions
            });
        let positions: Box<dyn Iterator<Item = usize>> = match candidates {
            Some(list) => Box::new(list.into_iter()),
            None => Box::new(0..self.claim_order.len()),
        };
        let required_domains = self
            .topology
            .node_independent_domains(&matching, &data.strict_requirements);
        let wanted = self.domain_masks.wanted(&required_domains);
        for pos in positions {
            let c = self.claim_order[pos];
            if !self.claim_headroom[c].admits(&outer.requests) {
                continue;
            }
            let allowed = match &wanted {
                Some(wanted) => self.domain_masks.admits(c, wanted),
                None => {
                    let claim_requirements = &self.claims[c].requirements;
                    required_domains.iter().all(|(key, domains)| {
                        claim_requirements
                            .get(key)
                            .is_none_or(|r| domains.iter().any(|d| r.has(d)))
                    })
                }
            };
            if !allowed {
                continue;
            }
            for data in variants.iter().map(|v| &**v) {
                let claim = &self.claims[c];
                let template = &self.templates[claim.template];
                let topology = &self.topology;
                // The device search is the costly part: only a claim that could take the pod
                // without its devices is searched.
                if !data.resource_claims.is_empty()
                    && claim
                        .can_add(template, data, |_| Ok(None), None, false, false)
                        .is_err()
                {
                    continue;
                }
                let Ok(devices) = allocate_on_claim(self.allocator.as_ref(), template, claim, data)
                else {
                    continue;
                };
                let addition = claim.can_add(
                    template,
                    data,
                    |reqs| {
                        if matching.is_empty() {
                            return Ok(None);
                        }
                        topology
                            .add_requirements(
                                &matching,
                                &template.taints,
                                &data.strict_requirements,
                                reqs,
                                AllowUndefined::WellKnownLabels(&self.options.provider_labels),
                            )
                            .map_err(|_| String::new())
                    },
                    devices.as_ref().map(|(_, fit)| fit),
                    self.options.strict_min_values,
                    false,
                );
                if let Ok(addition) = addition {
                    let claim = &self.claims[c];
                    let Ok(reserved) = self.offerings_to_reserve(
                        &self.templates[claim.template],
                        claim,
                        addition
                            .requirements
                            .as_ref()
                            .unwrap_or(&claim.requirements),
                        &addition.options,
                    ) else {
                        continue;
                    };
                    let claim = &self.claims[c];
                    commit_devices(
                        self.allocator.as_mut(),
                        &self.templates[claim.template],
                        &claim.hostname,
                        devices.map(|(a, _)| a),
                        &addition.options,
                    );
                    self.claims[c].add(id, data, addition);
                    self.hold(c, reserved);
                    let claim = &self.claims[c];
                    self.claim_headroom[c] = claim.headroom(&self.templates[claim.template]);
                    self.domain_masks.update(c, &claim.requirements);
                    self.topology.record(
                        &pod_ref,
                        &self.templates[claim.template].taints,
                        &claim.requirements,
                        AllowUndefined::WellKnownLabels(&self.options.provider_labels),
                    );
                    self.reorder_after_add(pos);
                    return Ok(());
                }
            }
        }
        // 3. A new NodeClaim from each NodePool, by weight.
        let mut errors = Vec::new();
        if self.templates.is_empty() {
            return Err("no nodepools found".into());
        }
        for t in 0..self.templates.len() {
            let mut last = None;
            for data in variants.iter().map(|v| &**v) {
                match self.open_claim(t, id, &pod_ref, data, &matching) {
                    Ok(()) => return Ok(()),
                    // Reserved capacity in a heavier NodePool is not given up for a lighter one.
                    Err(Failure::Deferred(e)) => {
                        return Err(Failure::Deferred(format!(
                            "nodepool {:?}: {e}",
                            self.templates[t].node_pool
                        )));
                    }
                    Err(Failure::Unschedulable(e)) => last = Some(e),
                }
            }
            if let Some(e) = last {
                errors.push(format!("nodepool {:?}: {e}", self.templates[t].node_pool));
            }
        }
        Err(errors.join("; ").into())
    }

    /// The reservations claim `claim` would hold with `requirements` and instance types
    /// `options` (upstream's `offeringsToReserve`): every compatible reserved offering whose
    /// reservation it holds or can take. In [`ReservedOfferingMode::Strict`] it refuses when
    /// compatible reservations exist but all are taken, or when the claim would lose all it held.
    fn offerings_to_reserve(
        &self,
        template: &NodeClaimTemplate,
        claim: &InflightClaim,
        requirements: &Requirements,
        options: &[u32],
    ) -> Result<Vec<String>, &'static str> {
        if !template.has_reserved {
            return Ok(Vec::new());
        }
        let mut compatible = false;
        let mut ids: Vec<String> = Vec::new();
        for &i in options {
            for o in &template.instance_types[i as usize].offerings {
                let Some(r) = o.reserved() else { continue };
                if !o.available || !o.is_compatible(requirements) {
                    continue;
                }
                compatible = true;
                if !ids.contains(&r.id) && self.reservations.can_reserve(&claim.hostname, &r.id) {
                    ids.push(r.id.clone());
                }
            }
        }
        if self.options.reserved_offering_mode == ReservedOfferingMode::Strict && ids.is_empty() {
            if compatible {
                return Err(RESERVATIONS_HELD);
            }
            if !claim.reserved.is_empty() {
                return Err(RESERVATIONS_LOST);
            }
        }
        Ok(ids)
    }

    /// Makes claim `c` hold exactly the reservations `ids`: takes the new ones, gives back the
    /// ones it no longer can use.
    fn hold(&mut self, c: usize, ids: Vec<String>) {
        let claim = &mut self.claims[c];
        if ids.is_empty() && claim.reserved.is_empty() {
            return; // the common case: no reservations anywhere near
        }
        let taken = self
            .reservations
            .reserve(&claim.hostname, ids.iter().map(String::as_str));
        // `offerings_to_reserve` only returns reservations the claim can take.
        debug_assert!(taken.is_ok(), "{taken:?}");
        let released: Vec<&str> = claim
            .reserved
            .iter()
            .filter(|id| !ids.contains(id))
            .map(String::as_str)
            .collect();
        self.reservations.release(&claim.hostname, released);
        claim.reserved = ids;
    }

    fn open_claim(
        &mut self,
        t: usize,
        id: usize,
        pod_ref: &PodRef<'_>,
        data: &PodData,
        matching: &Matching,
    ) -> Result<(), Failure> {
        if self.remaining[t].get(NODES).is_some_and(|n| n < 1000) {
            return Err("node limits have been exhausted for nodepool".into());
        }
        let template = &self.templates[t];
        if template.instance_types.is_empty() {
            return Err("nodepool requirements filtered out all available instance types".into());
        }
        let options: Vec<u32> = (0..template.instance_types.len() as u32)
            .filter(|&i| {
                self.remaining[t]
                    .exceeded_by(&template.instance_types[i as usize].capacity)
                    .is_none()
            })
            .collect();
        if options.is_empty() {
            return Err("all available instance types exceed limits for nodepool".into());
        }
        let hostname = format!("hostname-placeholder-{:04}", self.next_hostname);
        let mut requirements = template.requirements.clone();
        requirements.add(Requirement::new(
            HOSTNAME_LABEL,
            Operator::In,
            &[hostname.as_str()],
        ));
        let claim = InflightClaim {
            template: t,
            hostname: hostname.clone(),
            requirements,
            options,
            requests: Resources::new(),
            pods: Vec::new(),
            host_ports: Vec::new(),
            reserved: Vec::new(),
        };
        let devices = allocate_on_claim(self.allocator.as_ref(), template, &claim, data)
            .map_err(|e| format!("allocating dynamic resources, {e}"))?;
        self.topology.register(HOSTNAME_LABEL, &hostname);
        let topology = &self.topology;
        let addition = claim.can_add(
            template,
            data,
            |reqs| {
                if matching.is_empty() {
                    return Ok(None);
                }
                topology
                    .add_requirements(
                        matching,
                        &template.taints,
                        &data.strict_requirements,
                        reqs,
                        AllowUndefined::WellKnownLabels(&self.options.provider_labels),
                    )
                    .map_err(|g| {
                        topology
                            .explain(g, &data.strict_requirements, reqs)
                            .to_string()
                    })
            },
            devices.as_ref().map(|(_, fit)| fit),
            self.options.strict_min_values,
            true,
        );
        let addition = match addition {
            Ok(a) => a,
            Err(e) => {
                self.topology.unregister(HOSTNAME_LABEL, &hostname);
                return Err(e.into());
            }
        };
        let reserved = match self.offerings_to_reserve(
            template,
            &claim,
            addition
                .requirements
                .as_ref()
                .unwrap_or(&claim.requirements),
            &addition.options,
        ) {
            Ok(ids) => ids,
            Err(e) => {
                self.topology.unregister(HOSTNAME_LABEL, &hostname);
                return Err(Failure::Deferred(e.to_string()));
            }
        };
        self.next_hostname += 1;
        let mut claim = claim;
        commit_devices(
            self.allocator.as_mut(),
            template,
            &claim.hostname,
            devices.map(|(a, _)| a),
            &addition.options,
        );
        claim.add(id, data, addition);
        // Pessimistic: the NodePool pays for the largest instance type the claim might become.
        let mut largest = Resources::new();
        for &i in &claim.options {
            largest.max_with(&template.instance_types[i as usize].capacity);
        }
        let limits = &mut self.remaining[t];
        limits.subtract(&largest);
        if let Some(n) = limits.get(NODES) {
            limits.set(NODES, n - 1000);
        }
        self.topology.record(
            pod_ref,
            &template.taints,
            &claim.requirements,
            AllowUndefined::WellKnownLabels(&self.options.provider_labels),
        );
        self.claim_by_host
            .insert(claim.hostname.clone(), self.claims.len());
        self.claim_headroom
            .push(claim.headroom(&self.templates[claim.template]));
        self.domain_masks
            .update(self.claims.len(), &claim.requirements);
        self.claims.push(claim);
        let c = self.claims.len() - 1;
        self.hold(c, reserved);
        // A new claim has one pod: it goes after the other one-pod claims.
        let at = self
            .claim_order
            .partition_point(|&o| self.claims[o].pods.len() <= 1);
        self.claim_order.insert(at, c);
        self.claim_position.push(0);
        for (pos, &claim) in self.claim_order.iter().enumerate().skip(at) {
            self.claim_position[claim] = pos;
        }
        Ok(())
    }

    /// Keeps `claim_order` as a stable sort by pod count would leave it after the claim at
    /// `pos` gained a pod: first among the claims with its new count.
    fn reorder_after_add(&mut self, pos: usize) {
        let count = self.claims[self.claim_order[pos]].pods.len();
        let mut end = pos + 1;
        while end < self.claim_order.len() && self.claims[self.claim_order[end]].pods.len() < count
        {
            end += 1;
        }
        self.claim_order[pos..end].rotate_left(1);
        for p in pos..end {
            self.claim_position[self.claim_order[p]] = p;
        }
    }

    fn finish(&mut self, results: &mut Results) {
        if let Some(allocator) = &self.allocator {
            results.claim_allocations = allocator
                .claim_allocations()
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
        }
        for claim in &self.claims {
            let template = &self.templates[claim.template];
            let mut requirements = claim.requirements.clone();
            requirements.remove(HOSTNAME_LABEL);
            if template.has_reserved {
                self.pin_reservations(claim, &mut requirements);
            }
            let allowed = template.offerings.allowed(&requirements);
            let mut types: Vec<(usize, f64)> = claim
                .options
                .iter()
                .filter(|&&i| {
                    // Only what can still launch: narrowing to (or away from) reservations
                    // may leave a type without an offering.
                    !template.has_reserved
                        || template.instance_types[i as usize]
                            .offerings
                            .iter()
                            .any(|o| o.available && o.is_compatible(&requirements))
                })
                .map(|&i| {
                    (
                        i as usize,
                        template
                            .cheapest_price(i as usize, allowed)
                            .unwrap_or(f64::MAX),
                    )
                })
                .collect();
            if types.is_empty() {
                // Only reserved capacity fit it, and this round's other claims hold all of it.
                for &p in &claim.pods {
                    results.pod_errors.insert(p, RESERVATIONS_HELD.into());
                    results.deferred.insert(p);
                }
                continue;
            }
            // Cheapest first; equal prices keep the provider's order.
            types.sort_by(|a, b| a.1.total_cmp(&b.1));
            types.truncate(self.options.max_instance_types);
            if self.options.strict_min_values
                && unmet_min_values(
                    &requirements,
                    types.iter().map(|(i, _)| &*template.instance_types[*i]),
                )
                .is_some()
            {
                for &p in &claim.pods {
                    results.pod_errors.insert(
                        p,
                        "pod didn't schedule because NodePool couldn't meet minValues requirements"
                            .into(),
                    );
                }
                continue;
            }
            let min_values_relaxed = !self.options.strict_min_values
                && relax_min_values(
                    &mut requirements,
                    types.iter().map(|(i, _)| &*template.instance_types[*i]),
                );
            // The smallest DaemonSet overhead any remaining option carries.
            let mut overhead: Option<Resources> = None;
            for (i, _) in &types {
                let o = &template.daemon_overhead[*i];
                overhead = Some(match overhead {
                    None => o.clone(),
                    Some(mut m) => {
                        m.cpu = m.cpu.min(o.cpu);
                        m.memory = m.memory.min(o.memory);
                        m.pods = m.pods.min(o.pods);
                        m.ephemeral_storage = m.ephemeral_storage.min(o.ephemeral_storage);
                        m
                    }
                });
            }
            let offered = types
                .iter()
                .fold(0u128, |m, (i, _)| m | template.offering_masks[*i])
                & allowed;
            requirements.add(Requirement::new(
                CAPACITY_TYPE_LABEL,
                Operator::In,
                &template.offerings.capacity_types(offered),
            ));
            let mut labels = template.labels.clone();
            labels.extend(requirements.labels(&template.provider_labels));
            results.new_node_claims.push(NewNodeClaim {
                node_pool: template.node_pool.clone(),
                requirements,
                instance_types: types
                    .into_iter()
                    .map(|(i, _)| template.instance_types[i].clone())
                    .collect(),
                pods: claim.pods.clone(),
                requests: claim.requests.plus(&overhead.unwrap_or_default()),
                labels,
                taints: template.taints.clone(),
                startup_taints: template.startup_taints.clone(),
                min_values_relaxed,
                dra_drivers: self
                    .allocator
                    .as_ref()
                    .map(|a| a.drivers_of(&claim.hostname))
                    .unwrap_or_default(),
            });
        }
    }
}

impl Scheduler {
    /// Upstream's `FinalizeScheduling` for reservations: a claim holding reservations launches
    /// into one of them (`karpenter.sh/capacity-type In [reserved]` and the provider's
    /// reservation-id label `In [ids…]`), so no two claims count on the same instance; one
    /// holding none falls back to spot or on-demand.
    fn pin_reservations(&self, claim: &InflightClaim, requirements: &mut Requirements) {
        if claim.reserved.is_empty() {
            if requirements.allows(CAPACITY_TYPE_LABEL, RESERVED) {
                requirements.add(Requirement::new(
                    CAPACITY_TYPE_LABEL,
                    Operator::NotIn,
                    &[RESERVED],
                ));
            }
            return;
        }
        requirements.add(Requirement::new(
            CAPACITY_TYPE_LABEL,
            Operator::In,
            &[RESERVED],
        ));
        let mut by_label: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for id in &claim.reserved {
            if let Some(label) = self.reservations.label(id) {
                by_label.entry(label).or_default().push(id);
            }
        }
        for (label, ids) in by_label {
            requirements.add(Requirement::new(label, Operator::In, &ids));
        }
    }
}

/// The NodePools with their instance types' reserved offerings dropped (the `ReservedCapacity`
/// gate off).
fn without_reserved_offerings(node_pools: &[NodePoolInput]) -> Vec<NodePoolInput> {
    node_pools
        .iter()
        .map(|p| NodePoolInput {
            node_pool: p.node_pool.clone(),
            instance_types: p
                .instance_types
                .iter()
                .map(|it| {
                    it.without_reserved_offerings()
                        .map_or_else(|| it.clone(), Arc::new)
                })
                .collect(),
        })
        .collect()
}

/// The taints of the NodePools producing each domain, for the domains that only tainted
/// NodePools produce (upstream's topology domain groups).
fn domain_taints(templates: &[NodeClaimTemplate]) -> topology::DomainTaints {
    if templates.iter().all(|t| t.taints.is_empty()) {
        return topology::DomainTaints::default();
    }
    // By key and domain: the templates producing it, or `None` once an untainted one does.
    let mut producers: HashMap<String, HashMap<String, Option<Vec<usize>>>> = HashMap::new();
    for (i, t) in templates.iter().enumerate() {
        let mut add = |r: &Requirements| {
            for req in r.iter().filter(|r| r.operator() == Operator::In) {
                if !producers.contains_key(req.key()) {
                    producers.insert(req.key().to_string(), HashMap::new());
                }
                let domains = producers.get_mut(req.key()).expect("inserted above");
                for v in req.values() {
                    if !domains.contains_key(v) {
                        domains.insert(v.to_string(), Some(Vec::new()));
                    }
                    let entry = domains.get_mut(v).expect("inserted above");
                    match entry {
                        Some(_) if t.taints.is_empty() => *entry = None,
                        Some(pools) if pools.last() != Some(&i) => pools.push(i),
                        _ => {}
                    }
                }
            }
        };
        for it in &t.instance_types {
            let mut r = t.requirements.clone();
            r.add_all(&it.requirements);
            add(&r);
        }
        add(&t.requirements);
    }
    let mut out = topology::DomainTaints::default();
    for (key, domains) in producers {
        for (domain, pools) in domains {
            if let Some(pools) = pools {
                out.entry(key.clone()).or_default().insert(
                    domain,
                    pools.iter().map(|&i| templates[i].taints.clone()).collect(),
                );
            }
        }
    }
    out
}

/// Every value each label key can take on a node of any NodePool: the topology domains.
fn domain_universe(templates: &[NodeClaimTemplate]) -> HashMap<String, BTreeSet<String>> {
    let mut universe: HashMap<String, BTreeSet<String>> = HashMap::new();
    for t in templates {
        for it in &t.instance_types {
            let mut r = t.requirements.clone();
            r.add_all(&it.requirements);
            for req in r.iter().filter(|r| r.operator() == Operator::In) {
                universe
                    .entry(req.key().to_string())
                    .or_default()
                    .extend(req.values().map(str::to_string));
            }
        }
        for req in t
            .requirements
            .iter()
            .filter(|r| r.operator() == Operator::In)
        {
            universe
                .entry(req.key().to_string())
                .or_default()
                .extend(req.values().map(str::to_string));
        }
    }
    universe
}
