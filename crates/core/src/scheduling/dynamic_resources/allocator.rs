//! The device allocator: for a node or a NodeClaim and a pod's claims, which devices each claim
//! gets on each of the candidate instance types — a depth-first search over the cluster's
//! published devices first, then the instance type's own — and, once the pod is placed, the
//! bookkeeping that keeps the next pod off those devices.
//!
//! Allocating is read-only ([`Allocator::allocate`]); only placing a pod changes anything
//! ([`Allocator::commit`], [`Allocator::release`]), so a pod tried against many NodeClaims
//! leaves no trace on those it does not join.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use karpenter_api::dra::{
    ALLOCATION_MODE_ALL, Device, DeviceAttribute, DeviceSelector as Selector, ExactDeviceRequest,
    ResourceClaim,
};

use super::capacity::{self, milli};
use super::pools::{self, Counters, Pool, PoolKey};
use super::selector::DeviceSelector;
use super::{
    Amounts, DeviceInventory, DeviceKey, DynamicResources, MAX_DEVICES_PER_CLAIM,
    ResourceSliceTemplate, claim_key, node_owner,
};
use crate::scheduling::{AllowUndefined, Requirements};

/// What the allocator is asked to allocate on: a NodeClaim being packed or an existing node.
pub struct Target<'a> {
    /// The NodeClaim's placeholder hostname, or the node's name.
    pub id: &'a str,
    /// The NodePool it belongs to.
    pub node_pool: &'a str,
    /// The node's name; empty for a NodeClaim not launched yet.
    pub node_name: &'a str,
    /// What its labels must satisfy as things stand.
    pub requirements: &'a Requirements,
    /// Its candidate instance types by name, each with the devices its drivers will publish
    /// (none for an initialized node: those are in the cluster already).
    pub instance_types: Vec<(&'a str, Option<&'a DynamicResources>)>,
}

/// One device given to a claim.
#[derive(Clone, Debug, PartialEq)]
pub struct AllocatedDevice {
    /// The device.
    pub device: DeviceKey,
    /// One the instance type will publish, not one in the cluster.
    pub template: bool,
    /// The request it serves (`request`, or `request/subrequest`).
    pub request: String,
    /// What the claim consumes of a shared device.
    pub consumed: Option<Amounts>,
}

/// Where a claim was allocated in this simulation (upstream's
/// `ResourceClaimAllocationMetadata`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClaimAllocation {
    /// The NodeClaim (placeholder hostname) or node it was allocated on.
    pub node_claim: String,
    /// What its devices require of the node, per instance type.
    pub contributed: BTreeMap<String, Requirements>,
    /// Those together.
    pub requirements: Requirements,
    /// Some of its devices are ones a NodeClaim's instance type will publish: later pods using
    /// the claim must go to that NodeClaim.
    pub used_templates: bool,
    /// Its devices, per instance type.
    pub devices: BTreeMap<String, Vec<AllocatedDevice>>,
}

impl ClaimAllocation {
    /// The drivers of its devices.
    pub fn drivers(&self) -> impl Iterator<Item = &str> {
        self.devices
            .values()
            .flatten()
            .map(|d| d.device.driver.as_str())
    }
}

/// The outcome of [`Allocator::allocate`].
#[derive(Debug)]
pub struct Allocation {
    /// The candidate instance types every claim can be allocated on, in the target's order.
    pub instance_types: Vec<String>,
    /// What the devices require of the node.
    pub requirements: Requirements,
    pending: Option<Pending>,
}

/// What committing an allocation records.
#[derive(Debug)]
struct Pending {
    node_claim: String,
    per_type: Vec<TypeResult>,
    claims: Vec<(String, ClaimAllocation)>,
}

/// One instance type's share of an allocation.
#[derive(Debug)]
struct TypeResult {
    instance_type: String,
    steps: Vec<Step>,
    /// The counters this instance type's own pools start with.
    template_totals: HashMap<PoolKey, Counters>,
}

/// One device on the search's path.
#[derive(Clone, Debug)]
struct Step {
    claim: usize,
    request: String,
    key: DeviceKey,
    template: bool,
    shared: bool,
    consumed: Option<Amounts>,
    counters: Option<(PoolKey, Counters)>,
    topology: Option<Requirements>,
    previous: Option<Requirements>,
    constraints: Vec<usize>,
}

/// The allocator of one simulation.
pub struct Allocator {
    pools: Vec<Pool>,
    classes: Arc<DeviceInventory>,
    provider_labels: Vec<String>,
    deleting: HashSet<String>,
    /// Devices allocated in the cluster to pods that stay.
    exclusive: HashSet<DeviceKey>,
    /// What claims of pods that stay consume of shared devices.
    shared_used: HashMap<DeviceKey, Amounts>,
    /// Each pool's counters after the cluster's allocations.
    counters_left: HashMap<PoolKey, Counters>,
    /// Cluster devices this simulation gave a NodeClaim, with the instance types it holds
    /// them on (it gives them back for those it drops).
    inflight: HashMap<DeviceKey, (String, BTreeSet<String>)>,
    inflight_capacity: HashMap<String, HashMap<String, HashMap<DeviceKey, Amounts>>>,
    inflight_counters: HashMap<String, HashMap<String, HashMap<PoolKey, Counters>>>,
    /// Devices of a NodeClaim's instance type it gave out, by NodeClaim and instance type.
    template_devices: HashMap<(String, String), HashSet<DeviceKey>>,
    template_capacity: HashMap<(String, String), HashMap<DeviceKey, Amounts>>,
    template_counters: HashMap<(String, String), HashMap<PoolKey, Counters>>,
    claims: HashMap<String, ClaimAllocation>,
    selectors: RefCell<HashMap<String, Result<DeviceSelector, String>>>,
}

/// How many devices one allocation may try before it gives up: the search is exhaustive (every
/// order of devices), so a claim that cannot be met beside a large one would otherwise hold
/// the simulation up. Upstream bounds the same search by five seconds; a count keeps the
/// outcome the same on every machine.
pub const SEARCH_BUDGET: u64 = 200_000;

/// Whether every consumer of a claim is a pod being deleted (its devices come free).
pub(crate) fn all_consumers_deleting(uids: &[&str], deleting: &HashSet<String>) -> bool {
    uids.iter().all(|u| deleting.contains(*u))
}

/// What a shared device's claims consume, leaving out the claims every pod of which is being
/// deleted; a capacity no longer consumed is dropped.
pub(crate) fn effective_consumed(
    contributions: &[(Vec<&str>, Amounts)],
    deleting: &HashSet<String>,
) -> Amounts {
    let mut out = Amounts::new();
    for (pods, amounts) in contributions {
        if !pods.is_empty() && all_consumers_deleting(pods, deleting) {
            continue;
        }
        capacity::add(&mut out, amounts);
    }
    out.retain(|_, v| *v > 0);
    out
}

fn quantities(map: &BTreeMap<String, Quantity>) -> Amounts {
    map.iter().map(|(k, v)| (k.clone(), milli(v))).collect()
}

/// A claim's pod consumers' UIDs, when every consumer is a pod.
fn pod_consumers(claim: &ResourceClaim) -> Vec<&str> {
    claim
        .status
        .iter()
        .flat_map(|s| &s.reserved_for)
        .filter(|r| r.is_pod())
        .map(|r| r.uid.as_str())
        .collect()
}

/// Whether a claim allocated in the cluster is used only by pods being deleted: it is
/// allocated anew.
fn reallocatable(claim: &ResourceClaim, deleting: &HashSet<String>) -> bool {
    let reserved = claim.status.iter().flat_map(|s| &s.reserved_for);
    let mut any = false;
    for r in reserved {
        any = true;
        if !r.is_pod() || !deleting.contains(&r.uid) {
            return false;
        }
    }
    any
}

impl Allocator {
    /// An allocator over `inventory`'s slices that nodes in `usable_nodes` own (or no node
    /// owns), with the devices of claims of pods other than `deleting` (UIDs) taken.
    pub fn new(
        inventory: Arc<DeviceInventory>,
        usable_nodes: &HashSet<&str>,
        deleting: HashSet<String>,
        provider_labels: Vec<String>,
    ) -> Self {
        let slices: Vec<_> = inventory
            .slices
            .iter()
            .filter(|s| node_owner(s).is_none_or(|n| usable_nodes.contains(n)))
            .cloned()
            .collect();
        let pools = pools::gather(&slices);
        let mut exclusive = HashSet::new();
        let mut contributions: HashMap<DeviceKey, Vec<(Vec<&str>, Amounts)>> = HashMap::new();
        for claim in inventory.claims.values() {
            let Some(results) = claim
                .status
                .as_ref()
                .and_then(|s| s.allocation.as_ref())
                .and_then(|a| a.devices.as_ref())
            else {
                continue;
            };
            let pods = pod_consumers(claim);
            for r in &results.results {
                let key = DeviceKey::new(&r.driver, &r.pool, &r.device);
                match &r.consumed_capacity {
                    Some(c) => contributions
                        .entry(key)
                        .or_default()
                        .push((pods.clone(), quantities(c))),
                    None if !pods.is_empty() && all_consumers_deleting(&pods, &deleting) => {}
                    None => {
                        exclusive.insert(key);
                    }
                }
            }
        }
        let shared_used: HashMap<DeviceKey, Amounts> = contributions
            .into_iter()
            .map(|(k, c)| (k, effective_consumed(&c, &deleting)))
            .filter(|(_, c)| !c.is_empty())
            .collect();
        let counters_left = pools::remaining_counters(&pools, |(driver, pool), device| {
            let key = DeviceKey::new(driver, pool, &device.name);
            exclusive.contains(&key) || shared_used.contains_key(&key)
        });
        Self {
            pools,
            classes: inventory,
            provider_labels,
            deleting,
            exclusive,
            shared_used,
            counters_left,
            inflight: HashMap::new(),
            inflight_capacity: HashMap::new(),
            inflight_counters: HashMap::new(),
            template_devices: HashMap::new(),
            template_capacity: HashMap::new(),
            template_counters: HashMap::new(),
            claims: HashMap::new(),
            selectors: RefCell::default(),
        }
    }

    /// Where the claims of this simulation were allocated, by `namespace/name`.
    pub fn claim_allocations(&self) -> &HashMap<String, ClaimAllocation> {
        &self.claims
    }

    /// The drivers whose devices claims were allocated on NodeClaim `node_claim`, sorted.
    pub fn drivers_of(&self, node_claim: &str) -> Vec<String> {
        let drivers: BTreeSet<&str> = self
            .claims
            .values()
            .filter(|c| c.node_claim == node_claim)
            .flat_map(ClaimAllocation::drivers)
            .collect();
        drivers.into_iter().map(str::to_string).collect()
    }

    fn allow(&self) -> AllowUndefined<'_> {
        AllowUndefined::WellKnownLabels(&self.provider_labels)
    }

    /// Which devices `claims` would get on `target`, on each of its instance types.
    pub fn allocate(
        &self,
        target: &Target<'_>,
        claims: &[Arc<ResourceClaim>],
    ) -> Result<Allocation, String> {
        let all_types = || {
            target
                .instance_types
                .iter()
                .map(|(n, _)| n.to_string())
                .collect()
        };
        if claims.is_empty() {
            return Ok(Allocation {
                instance_types: all_types(),
                requirements: Requirements::new(),
                pending: None,
            });
        }
        let mut requirements = target.requirements.clone();
        let mut unallocated = Vec::new();
        for claim in claims {
            let key = claim_key(claim);
            let in_cluster = claim.status.as_ref().and_then(|s| s.allocation.as_ref());
            if let Some(allocation) = in_cluster.filter(|_| !reallocatable(claim, &self.deleting)) {
                if let Some(topology) = allocation
                    .node_selector
                    .as_ref()
                    .and_then(pools::selector_requirements)
                {
                    requirements.compatible(&topology, self.allow()).map_err(|_| {
                        format!("claim {key:?}: in-cluster allocation topology is incompatible with NodeClaim requirements")
                    })?;
                    requirements.add_all(&topology);
                }
            } else if let Some(meta) = self.claims.get(&key) {
                if meta.used_templates {
                    if meta.node_claim != target.id {
                        return Err(format!(
                            "claim {key:?}: claim is bound to a different in-flight NodeClaim"
                        ));
                    }
                } else if !meta.requirements.is_empty() {
                    requirements
                        .compatible(&meta.requirements, self.allow())
                        .map_err(|_| {
                            format!("claim {key:?}: in-memory allocation topology is incompatible with NodeClaim requirements")
                        })?;
                    requirements.add_all(&meta.requirements);
                }
            } else {
                unallocated.push(claim.clone());
            }
        }
        if unallocated.is_empty() {
            return Ok(Allocation {
                instance_types: all_types(),
                requirements,
                pending: None,
            });
        }
        let data: Vec<ClaimData> = unallocated
            .iter()
            .map(|c| {
                self.validate(c, target, &requirements).map_err(|e| {
                    format!(
                        "validating claim {:?}: {e}",
                        c.metadata.name.as_deref().unwrap_or_default()
                    )
                })
            })
            .collect::<Result<_, _>>()?;
        let mut accumulated = requirements;
        let mut per_type = Vec::new();
        let mut contributed_by_claim: Vec<BTreeMap<String, Requirements>> =
            vec![BTreeMap::new(); data.len()];
        let mut devices_by_claim: Vec<BTreeMap<String, Vec<AllocatedDevice>>> =
            vec![BTreeMap::new(); data.len()];
        let mut used_templates = vec![false; data.len()];
        let empty = DynamicResources::default();
        // One budget for the whole call, as upstream bounds it by time (five seconds).
        let mut budget = SEARCH_BUDGET;
        for (t, (name, resources)) in target.instance_types.iter().enumerate() {
            let templates = &resources.unwrap_or(&empty).resource_slice_templates;
            let mut search =
                Search::new(self, target, &data, t, name, templates, accumulated.clone());
            search.budget = budget;
            let found = search.counters_feasible() && search.dfs(0, 0, None, 0);
            budget = search.budget;
            if budget == 0 {
                return Err(format!(
                    "gave up searching for devices after {SEARCH_BUDGET} tries"
                ));
            }
            if !found {
                continue;
            }
            let mut type_topology = Requirements::new();
            for (c, _) in data.iter().enumerate() {
                let mut topology = Requirements::new();
                let mut devices = Vec::new();
                for step in search.path.iter().filter(|s| s.claim == c) {
                    if let Some(t) = &step.topology {
                        topology.add_all(t);
                    }
                    used_templates[c] |= step.template;
                    devices.push(AllocatedDevice {
                        device: step.key.clone(),
                        template: step.template,
                        request: step.request.clone(),
                        consumed: step.consumed.clone(),
                    });
                }
                type_topology.add_all(&topology);
                contributed_by_claim[c].insert(name.to_string(), topology);
                devices_by_claim[c].insert(name.to_string(), devices);
            }
            accumulated.add_all(&type_topology);
            per_type.push(TypeResult {
                instance_type: name.to_string(),
                steps: search.path,
                template_totals: search.template_totals,
            });
        }
        if per_type.is_empty() {
            return Err("no instance type can satisfy the allocation".into());
        }
        let mut requirements = Requirements::new();
        let pending_claims = data
            .iter()
            .enumerate()
            .map(|(c, d)| {
                let mut total = Requirements::new();
                for r in contributed_by_claim[c].values() {
                    total.add_all(r);
                }
                requirements.add_all(&total);
                (
                    d.key.clone(),
                    ClaimAllocation {
                        node_claim: target.id.to_string(),
                        contributed: std::mem::take(&mut contributed_by_claim[c]),
                        requirements: total,
                        used_templates: used_templates[c],
                        devices: std::mem::take(&mut devices_by_claim[c]),
                    },
                )
            })
            .collect();
        Ok(Allocation {
            instance_types: per_type.iter().map(|t| t.instance_type.clone()).collect(),
            requirements,
            pending: Some(Pending {
                node_claim: target.id.to_string(),
                per_type,
                claims: pending_claims,
            }),
        })
    }

    /// Records an allocation: the pod was placed.
    pub fn commit(&mut self, allocation: Allocation) {
        let Some(pending) = allocation.pending else {
            return;
        };
        let nc = pending.node_claim;
        for t in pending.per_type {
            let it = t.instance_type;
            let pair = (nc.clone(), it.clone());
            for step in t.steps {
                match (step.template, step.shared) {
                    (true, true) => {
                        if let Some(c) = &step.consumed {
                            let used = self
                                .template_capacity
                                .entry(pair.clone())
                                .or_default()
                                .entry(step.key.clone())
                                .or_default();
                            capacity::add(used, c);
                        }
                    }
                    (true, false) => {
                        self.template_devices
                            .entry(pair.clone())
                            .or_default()
                            .insert(step.key.clone());
                    }
                    (false, true) => {
                        if let Some(c) = &step.consumed {
                            let used = self
                                .inflight_capacity
                                .entry(nc.clone())
                                .or_default()
                                .entry(it.clone())
                                .or_default()
                                .entry(step.key.clone())
                                .or_default();
                            capacity::add(used, c);
                        }
                    }
                    (false, false) => {
                        let entry = self
                            .inflight
                            .entry(step.key.clone())
                            .or_insert_with(|| (nc.clone(), BTreeSet::new()));
                        entry.1.insert(it.clone());
                    }
                }
                if let Some((pool, used)) = step.counters {
                    if step.template {
                        let budgets = self.template_counters.entry(pair.clone()).or_default();
                        let left = budgets.entry(pool.clone()).or_insert_with(|| {
                            t.template_totals.get(&pool).cloned().unwrap_or_default()
                        });
                        for (k, v) in used {
                            *left.entry(k).or_default() -= v;
                        }
                    } else {
                        let consumed = self
                            .inflight_counters
                            .entry(nc.clone())
                            .or_default()
                            .entry(it.clone())
                            .or_default()
                            .entry(pool)
                            .or_default();
                        for (k, v) in used {
                            *consumed.entry(k).or_default() += v;
                        }
                    }
                }
            }
        }
        for (key, meta) in pending.claims {
            let before = self.claims.insert(key, meta);
            // A claim is allocated once in a simulation: its later pods reuse the allocation
            // (upstream panics otherwise).
            debug_assert!(before.is_none(), "a claim was allocated twice");
        }
    }

    /// Gives back what NodeClaim `node_claim` held on instance types it no longer considers.
    pub fn release<'a>(
        &mut self,
        node_claim: &str,
        instance_types: impl IntoIterator<Item = &'a str>,
    ) {
        for it in instance_types {
            self.inflight.retain(|_, (owner, types)| {
                if owner == node_claim {
                    types.remove(it);
                }
                !types.is_empty()
            });
            let pair = (node_claim.to_string(), it.to_string());
            self.template_devices.remove(&pair);
            self.template_capacity.remove(&pair);
            self.template_counters.remove(&pair);
            if let Some(m) = self.inflight_capacity.get_mut(node_claim) {
                m.remove(it);
            }
            if let Some(m) = self.inflight_counters.get_mut(node_claim) {
                m.remove(it);
            }
            for meta in self
                .claims
                .values_mut()
                .filter(|m| m.node_claim == node_claim)
            {
                meta.devices.remove(it);
                if meta.contributed.remove(it).is_some_and(|r| !r.is_empty()) {
                    let mut total = Requirements::new();
                    for r in meta.contributed.values() {
                        total.add_all(r);
                    }
                    meta.requirements = total;
                }
            }
        }
    }

    fn selector(&self, expression: &str) -> Result<DeviceSelector, String> {
        if let Some(s) = self.selectors.borrow().get(expression) {
            return s.clone();
        }
        let compiled = DeviceSelector::compile(expression);
        self.selectors
            .borrow_mut()
            .insert(expression.to_string(), compiled.clone());
        compiled
    }

    /// Whether a cluster device is taken for NodeClaim `nc` on instance type `it`.
    fn taken(&self, key: &DeviceKey, nc: &str, it: &str) -> bool {
        self.exclusive.contains(key)
            || self
                .inflight
                .get(key)
                .is_some_and(|(owner, types)| owner != nc || types.contains(it))
    }

    /// What the cluster and this simulation's NodeClaims consume of a shared cluster device
    /// (each NodeClaim its most over its instance types: it will be one of them).
    fn shared_in_use(&self, key: &DeviceKey) -> Amounts {
        let mut used = self.shared_used.get(key).cloned().unwrap_or_default();
        for types in self.inflight_capacity.values() {
            let mut most = Amounts::new();
            for devices in types.values() {
                if let Some(c) = devices.get(key) {
                    capacity::max_into(&mut most, c);
                }
            }
            capacity::add(&mut used, &most);
        }
        used
    }

    /// A cluster pool's counters left for this simulation's next NodeClaim.
    fn counters_left(&self, pool: &PoolKey) -> Option<Counters> {
        let mut left = self.counters_left.get(pool)?.clone();
        for types in self.inflight_counters.values() {
            let mut most = Counters::new();
            for pools in types.values() {
                for (k, v) in pools.get(pool).into_iter().flatten() {
                    let e = most.entry(k.clone()).or_default();
                    *e = (*e).max(*v);
                }
            }
            for (k, v) in most {
                *left.entry(k).or_default() -= v;
            }
        }
        Some(left)
    }

    fn validate(
        &self,
        claim: &ResourceClaim,
        target: &Target<'_>,
        requirements: &Requirements,
    ) -> Result<ClaimData, String> {
        let name = claim.metadata.name.as_deref().unwrap_or_default();
        let mut constraints = Vec::new();
        for c in &claim.spec.devices.constraints {
            match (&c.match_attribute, &c.distinct_attribute) {
                (Some(attribute), _) => constraints.push(MatchAttribute {
                    requests: c.requests.clone(),
                    attribute: attribute.clone(),
                }),
                (None, Some(_)) => {
                    return Err(format!(
                        "claim {name:?}: DistinctAttribute constraints not done yet"
                    ));
                }
                (None, None) => return Err(format!("claim {name:?}: unsupported constraint type")),
            }
        }
        let mut requests = Vec::new();
        for r in &claim.spec.devices.requests {
            let prefix = format!("claim {name:?} request {:?}", r.name);
            let request = match (&r.exactly, &r.first_available) {
                (Some(e), _) => self.request(&prefix, &r.name, None, e, target, requirements)?,
                (None, Some(subs)) if !subs.is_empty() => {
                    let mut request = Request::parent(&r.name);
                    for s in subs {
                        request.subs.push(self.request(
                            &format!(
                                "claim {name:?} request {:?}",
                                format!("{}/{}", r.name, s.name)
                            ),
                            &r.name,
                            Some(&s.name),
                            &s.request,
                            target,
                            requirements,
                        )?);
                    }
                    request
                }
                _ => {
                    return Err(format!(
                        "{prefix}: only Exactly and FirstAvailable requests are supported"
                    ));
                }
            };
            requests.push(request);
        }
        let least = |r: &Request, templates: Option<usize>| -> usize {
            let size = |r: &Request| {
                if r.all {
                    r.all_devices.len()
                        + templates.map_or(0, |t| r.all_templates.get(t).map_or(0, Vec::len))
                } else {
                    r.count
                }
            };
            if r.subs.is_empty() {
                size(r)
            } else {
                r.subs.iter().map(size).min().unwrap_or(0)
            }
        };
        let base: usize = requests.iter().map(|r| least(r, None)).sum();
        if base > MAX_DEVICES_PER_CLAIM {
            return Err(format!(
                "claim {name:?} requests {base} total devices, exceeding maximum of {MAX_DEVICES_PER_CLAIM}"
            ));
        }
        let mut excluded = HashSet::new();
        let with_templates = requests
            .iter()
            .any(|r| r.all || r.subs.iter().any(|s| s.all));
        if with_templates {
            for t in 0..target.instance_types.len() {
                let total: usize = requests.iter().map(|r| least(r, Some(t))).sum();
                if total > MAX_DEVICES_PER_CLAIM {
                    excluded.insert(t);
                }
            }
            if !target.instance_types.is_empty() && excluded.len() == target.instance_types.len() {
                return Err(format!(
                    "claim {name:?}: all instance types pruned, no instance type can satisfy this claim without exceeding the maximum of {MAX_DEVICES_PER_CLAIM} devices"
                ));
            }
        }
        Ok(ClaimData {
            key: claim_key(claim),
            requests,
            constraints,
            excluded,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn request(
        &self,
        prefix: &str,
        parent: &str,
        sub: Option<&str>,
        shape: &ExactDeviceRequest,
        target: &Target<'_>,
        requirements: &Requirements,
    ) -> Result<Request, String> {
        let class = self
            .classes
            .classes
            .get(&shape.device_class_name)
            .ok_or_else(|| {
                format!(
                    "{prefix}: DeviceClass {:?} not found",
                    shape.device_class_name
                )
            })?;
        let mut selectors = Vec::new();
        for s in &class.spec.selectors {
            let Some(cel) = &s.cel else {
                return Err(format!(
                    "{prefix}: DeviceClass {:?} has unsupported selector type (only CEL is supported)",
                    shape.device_class_name
                ));
            };
            selectors.push(self.compile(prefix, &cel.expression)?);
        }
        for s in &shape.selectors {
            let Selector { cel: Some(cel) } = s else {
                return Err(format!(
                    "{prefix}: unsupported selector type (only CEL is supported)"
                ));
            };
            selectors.push(self.compile(prefix, &cel.expression)?);
        }
        let all = shape.allocation_mode.as_deref() == Some(ALLOCATION_MODE_ALL);
        let name = match sub {
            Some(s) => format!("{parent}/{s}"),
            None => parent.to_string(),
        };
        let mut request = Request {
            name,
            parent: parent.to_string(),
            selectors,
            all,
            count: usize::try_from(shape.count.unwrap_or(1)).unwrap_or(0),
            capacity: shape
                .capacity
                .as_ref()
                .map(|c| c.requests.clone())
                .unwrap_or_default(),
            all_devices: Vec::new(),
            all_templates: Vec::new(),
            subs: Vec::new(),
        };
        if all {
            for (p, pool) in self.pools.iter().enumerate() {
                let reachable: Vec<usize> = (0..pool.slices.len())
                    .filter(|&s| {
                        pools::slice_reaches(
                            &pool.slices[s],
                            requirements,
                            target.node_name,
                            self.allow(),
                        )
                    })
                    .collect();
                if reachable.is_empty() {
                    continue;
                }
                let (driver, pool_name) = &pool.key;
                if pool.invalid {
                    return Err(format!(
                        "{prefix}: pool {driver}/{pool_name} is invalid (duplicate device names)"
                    ));
                }
                if pool.incomplete {
                    return Err(format!(
                        "{prefix}: pool {driver}/{pool_name} is incomplete (missing slices)"
                    ));
                }
                for s in reachable {
                    for (d, device) in pool.slices[s].spec.devices.iter().enumerate() {
                        if request.selects(driver, device)? {
                            request.all_devices.push(Source::Cluster {
                                pool: p,
                                slice: s,
                                device: d,
                            });
                        }
                    }
                }
            }
            let empty = DynamicResources::default();
            for (_, resources) in &target.instance_types {
                let mut found = Vec::new();
                for (s, slice) in resources
                    .unwrap_or(&empty)
                    .resource_slice_templates
                    .iter()
                    .enumerate()
                {
                    for (d, device) in slice.devices.iter().enumerate() {
                        if request.selects(&slice.driver, device)? {
                            found.push(Source::Template {
                                slice: s,
                                device: d,
                            });
                        }
                    }
                }
                request.all_templates.push(found);
            }
        }
        Ok(request)
    }

    fn compile(&self, prefix: &str, expression: &str) -> Result<DeviceSelector, String> {
        self.selector(expression)
            .map_err(|e| format!("{prefix}: CEL expression {expression:?} failed to compile: {e}"))
    }
}

/// A device the search may try.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Source {
    Cluster {
        pool: usize,
        slice: usize,
        device: usize,
    },
    Template {
        slice: usize,
        device: usize,
    },
}

/// A request, validated.
#[derive(Debug)]
struct Request {
    name: String,
    parent: String,
    selectors: Vec<DeviceSelector>,
    all: bool,
    count: usize,
    capacity: BTreeMap<String, Quantity>,
    /// For `All`: the cluster's matching devices, then each instance type's.
    all_devices: Vec<Source>,
    all_templates: Vec<Vec<Source>>,
    /// `firstAvailable`'s alternatives, in order.
    subs: Vec<Request>,
}

impl Request {
    fn parent(name: &str) -> Self {
        Self {
            name: name.to_string(),
            parent: name.to_string(),
            selectors: Vec::new(),
            all: false,
            count: 0,
            capacity: BTreeMap::new(),
            all_devices: Vec::new(),
            all_templates: Vec::new(),
            subs: Vec::new(),
        }
    }

    fn selects(&self, driver: &str, device: &Device) -> Result<bool, String> {
        for s in &self.selectors {
            if !s.matches(driver, device)? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// A `matchAttribute` constraint.
#[derive(Debug)]
struct MatchAttribute {
    requests: Vec<String>,
    attribute: String,
}

impl MatchAttribute {
    fn covers(&self, request: &Request) -> bool {
        self.requests.is_empty()
            || self
                .requests
                .iter()
                .any(|r| *r == request.parent || *r == request.name)
    }
}

#[derive(Debug)]
struct ClaimData {
    key: String,
    requests: Vec<Request>,
    constraints: Vec<MatchAttribute>,
    /// Instance types on which the claim would exceed the device limit.
    excluded: HashSet<usize>,
}

/// How a `matchAttribute` constraint was pinned by the first device of the path.
#[derive(Clone, Debug)]
enum Pinned {
    Value(DeviceAttribute),
    /// The device does not publish the attribute yet; the instance type binds it to others.
    Bound(DeviceKey),
}

/// A device's attribute by qualified name, or by its short name in the driver's domain.
fn attribute<'d>(device: &'d Device, driver: &str, name: &str) -> Option<&'d DeviceAttribute> {
    device.attributes.get(name).or_else(|| {
        let (domain, id) = name.split_once('/')?;
        (domain == driver)
            .then(|| device.attributes.get(id))
            .flatten()
    })
}

/// Devices of an instance type that share an attribute's value: connected groups, by attribute.
#[derive(Default)]
struct Bindings {
    group: HashMap<(String, DeviceKey), usize>,
}

impl Bindings {
    fn new(resources: Option<&DynamicResources>) -> Self {
        let mut out = Self::default();
        let mut next = 0;
        for b in resources.iter().flat_map(|r| &r.attribute_bindings) {
            if b.devices.len() < 2 {
                continue;
            }
            let existing: BTreeSet<usize> = b
                .devices
                .iter()
                .filter_map(|d| out.group.get(&(b.attribute.clone(), d.clone())).copied())
                .collect();
            let id = existing.first().copied().unwrap_or_else(|| {
                next += 1;
                next
            });
            for g in out.group.values_mut() {
                if existing.contains(g) {
                    *g = id;
                }
            }
            for d in &b.devices {
                out.group.insert((b.attribute.clone(), d.clone()), id);
            }
        }
        out
    }

    fn of(&self, attribute: &str, device: &DeviceKey) -> Option<usize> {
        self.group
            .get(&(attribute.to_string(), device.clone()))
            .copied()
    }
}

/// One instance type's search.
struct Search<'s> {
    alloc: &'s Allocator,
    target: &'s Target<'s>,
    claims: &'s [ClaimData],
    type_index: usize,
    type_name: &'s str,
    templates: &'s [ResourceSliceTemplate],
    requirements: Requirements,
    path: Vec<Step>,
    taken: HashSet<(DeviceKey, bool)>,
    path_capacity: HashMap<(DeviceKey, bool), Amounts>,
    path_counters: HashMap<(PoolKey, bool), Counters>,
    pinned: Vec<Vec<Vec<Pinned>>>,
    template_totals: HashMap<PoolKey, Counters>,
    template_left: HashMap<PoolKey, Counters>,
    bindings: Bindings,
    selected: HashMap<(Source, usize, usize), bool>,
    /// Devices the search may still try.
    budget: u64,
}

impl<'s> Search<'s> {
    fn new(
        alloc: &'s Allocator,
        target: &'s Target<'s>,
        claims: &'s [ClaimData],
        type_index: usize,
        type_name: &'s str,
        templates: &'s [ResourceSliceTemplate],
        requirements: Requirements,
    ) -> Self {
        let mut template_totals: HashMap<PoolKey, Counters> = HashMap::new();
        for t in templates {
            let (counters, _) = pools::counter_sets(t.shared_counters.iter());
            if !counters.is_empty() {
                template_totals
                    .entry((t.driver.clone(), t.pool.clone()))
                    .or_default()
                    .extend(counters);
            }
        }
        let pair = (target.id.to_string(), type_name.to_string());
        let mut template_left = template_totals.clone();
        if let Some(committed) = alloc.template_counters.get(&pair) {
            for (pool, left) in committed {
                template_left.insert(pool.clone(), left.clone());
            }
        }
        Self {
            alloc,
            target,
            claims,
            type_index,
            type_name,
            templates,
            requirements,
            path: Vec::new(),
            taken: HashSet::new(),
            path_capacity: HashMap::new(),
            path_counters: HashMap::new(),
            pinned: claims
                .iter()
                .map(|c| vec![Vec::new(); c.constraints.len()])
                .collect(),
            template_totals,
            template_left,
            bindings: Bindings::new(target.instance_types[type_index].1),
            selected: HashMap::new(),
            budget: SEARCH_BUDGET,
        }
    }

    fn device(&self, source: Source) -> (&'s str, &'s str, &'s Device) {
        match source {
            Source::Cluster {
                pool,
                slice,
                device,
            } => {
                let p = &self.alloc.pools[pool];
                (&p.key.0, &p.key.1, &p.slices[slice].spec.devices[device])
            }
            Source::Template { slice, device } => {
                let t = &self.templates[slice];
                (&t.driver, &t.pool, &t.devices[device])
            }
        }
    }

    /// The devices `All` requests take, judged against the counters before the search: an
    /// instance type whose counters cannot hold them all is skipped.
    fn counters_feasible(&self) -> bool {
        let mut left: HashMap<(PoolKey, bool), Counters> = HashMap::new();
        for claim in self.claims {
            for r in &claim.requests {
                let alternatives: Vec<&Request> = if r.subs.is_empty() {
                    vec![r]
                } else {
                    r.subs.iter().collect()
                };
                let feasible = alternatives.iter().any(|r| {
                    if !r.all {
                        return true;
                    }
                    let mut trial = left.clone();
                    for &source in self.all_sources(r) {
                        let (driver, pool, device) = self.device(source);
                        let need = pools::consumption(device);
                        if need.is_empty() {
                            continue;
                        }
                        let template = matches!(source, Source::Template { .. });
                        let key = ((driver.to_string(), pool.to_string()), template);
                        let budget = match trial.get_mut(&key) {
                            Some(b) => b,
                            None => {
                                let known = if template {
                                    self.template_left.get(&key.0).cloned()
                                } else {
                                    self.alloc.counters_left(&key.0)
                                };
                                let Some(known) = known else { continue };
                                trial.entry(key).or_insert(known)
                            }
                        };
                        for (k, v) in need {
                            let e = budget.entry(k).or_default();
                            *e -= v;
                            if *e < 0 {
                                return false;
                            }
                        }
                    }
                    if alternatives.len() == 1 {
                        left = trial;
                    }
                    true
                });
                if !feasible {
                    return false;
                }
            }
        }
        true
    }

    fn all_sources(&self, r: &'s Request) -> impl Iterator<Item = &'s Source> {
        r.all_devices
            .iter()
            .chain(r.all_templates.get(self.type_index).into_iter().flatten())
    }

    fn on_path(&self, claim: usize) -> usize {
        self.path.iter().filter(|s| s.claim == claim).count()
    }

    fn dfs(&mut self, c: usize, r: usize, sub: Option<usize>, slot: usize) -> bool {
        let claims = self.claims;
        let Some(claim) = claims.get(c) else {
            return true;
        };
        if slot == 0 && r == 0 && sub.is_none() && claim.excluded.contains(&self.type_index) {
            return false;
        }
        let Some(parent) = claim.requests.get(r) else {
            return self.dfs(c + 1, 0, None, 0);
        };
        if !parent.subs.is_empty() && sub.is_none() {
            return (0..parent.subs.len()).any(|s| self.dfs(c, r, Some(s), 0));
        }
        let request = match sub {
            Some(s) => &parent.subs[s],
            None => parent,
        };
        let slots = if request.all {
            request.all_devices.len()
                + request
                    .all_templates
                    .get(self.type_index)
                    .map_or(0, Vec::len)
        } else {
            request.count
        };
        if request.all && slots == 0 {
            return false;
        }
        if slot == 0 && self.on_path(c) + slots > MAX_DEVICES_PER_CLAIM {
            return false;
        }
        if slot >= slots {
            return self.dfs(c, r + 1, None, 0);
        }
        let (ri, si) = (r, sub.map_or(0, |s| s + 1));
        let candidates: Vec<Source> = if request.all {
            self.all_sources(request)
                .nth(slot)
                .copied()
                .into_iter()
                .collect()
        } else {
            let mut out = Vec::new();
            for (p, pool) in self.alloc.pools.iter().enumerate() {
                if pool.incomplete || pool.invalid {
                    continue;
                }
                for (s, slice) in pool.slices.iter().enumerate() {
                    for d in 0..slice.spec.devices.len() {
                        out.push(Source::Cluster {
                            pool: p,
                            slice: s,
                            device: d,
                        });
                    }
                }
            }
            for (s, t) in self.templates.iter().enumerate() {
                for d in 0..t.devices.len() {
                    out.push(Source::Template {
                        slice: s,
                        device: d,
                    });
                }
            }
            out
        };
        for source in candidates {
            if self.budget == 0 {
                return false;
            }
            self.budget -= 1;
            if let Some(step) = self.try_device(c, request, source, (ri, si)) {
                self.push(step);
                if self.dfs(c, r, sub, slot + 1) {
                    return true;
                }
                self.pop();
            }
        }
        false
    }

    fn try_device(
        &mut self,
        c: usize,
        request: &Request,
        source: Source,
        at: (usize, usize),
    ) -> Option<Step> {
        let (driver, pool, device) = self.device(source);
        let template = matches!(source, Source::Template { .. });
        if let Source::Cluster { pool: p, slice, .. } = source
            && !pools::slice_reaches(
                &self.alloc.pools[p].slices[slice],
                &self.requirements,
                self.target.node_name,
                self.alloc.allow(),
            )
        {
            return None;
        }
        let key = DeviceKey::new(driver, pool, &device.name);
        let shared = device.allow_multiple_allocations == Some(true);
        let nc = self.target.id;
        let pair = (nc.to_string(), self.type_name.to_string());
        let mut consumed = None;
        if shared {
            consumed = capacity::consumed(device, &request.capacity).ok()?;
            if let Some(more) = &consumed {
                let mut used = if template {
                    self.alloc
                        .template_capacity
                        .get(&pair)
                        .and_then(|m| m.get(&key))
                        .cloned()
                        .unwrap_or_default()
                } else {
                    self.alloc.shared_in_use(&key)
                };
                if let Some(on_path) = self.path_capacity.get(&(key.clone(), template)) {
                    capacity::add(&mut used, on_path);
                }
                if !capacity::fits(device, &used, more) {
                    return None;
                }
            }
        } else {
            let allocated = if template {
                self.alloc
                    .template_devices
                    .get(&pair)
                    .is_some_and(|s| s.contains(&key))
            } else {
                self.alloc.taken(&key, nc, self.type_name)
            };
            if allocated || self.taken.contains(&(key.clone(), template)) {
                return None;
            }
        }
        let need = pools::consumption(device);
        let mut counters = None;
        if !need.is_empty() {
            let pool_key = (driver.to_string(), pool.to_string());
            let mut budget = if template {
                self.template_left.get(&pool_key).cloned()?
            } else {
                self.alloc.counters_left(&pool_key)?
            };
            if let Some(on_path) = self.path_counters.get(&(pool_key.clone(), template)) {
                for (k, v) in on_path {
                    *budget.entry(k.clone()).or_default() -= v;
                }
            }
            for (k, v) in &need {
                if budget.get(k).is_none_or(|left| left < v) {
                    return None;
                }
            }
            counters = Some((pool_key, need));
        }
        let cache = (source, c, at.0 * 1024 + at.1);
        let selected = match self.selected.get(&cache) {
            Some(s) => *s,
            None => match request.selects(driver, device) {
                Ok(s) => {
                    self.selected.insert(cache, s);
                    s
                }
                Err(_) => false,
            },
        };
        if !selected {
            return None;
        }
        let mut constraints = Vec::new();
        for (i, constraint) in self.claims[c].constraints.iter().enumerate() {
            if !constraint.covers(request) {
                continue;
            }
            let value = attribute(device, driver, &constraint.attribute);
            let pinned = &self.pinned[c][i];
            let ok = match (pinned.first(), value) {
                (None, Some(v)) => Some(Pinned::Value(v.clone())),
                (None, None) => self
                    .bindings
                    .of(&constraint.attribute, &key)
                    .map(|_| Pinned::Bound(key.clone())),
                (Some(Pinned::Value(first)), Some(v)) => {
                    (first == v).then(|| Pinned::Value(v.clone()))
                }
                (Some(Pinned::Bound(first)), None) => {
                    let g = self.bindings.of(&constraint.attribute, first);
                    (g.is_some() && g == self.bindings.of(&constraint.attribute, &key))
                        .then(|| Pinned::Bound(key.clone()))
                }
                _ => None,
            };
            match ok {
                Some(p) => {
                    self.pinned[c][i].push(p);
                    constraints.push(i);
                }
                None => {
                    for &j in &constraints {
                        self.pinned[c][j].pop();
                    }
                    return None;
                }
            }
        }
        let topology = match source {
            Source::Cluster { pool: p, slice, .. } => {
                pools::slice_topology(&self.alloc.pools[p].slices[slice])
            }
            Source::Template { .. } => None,
        };
        let mut previous = None;
        if let Some(t) = &topology {
            if self.requirements.compatible(t, self.alloc.allow()).is_err() {
                for &j in &constraints {
                    self.pinned[c][j].pop();
                }
                return None;
            }
            previous = Some(self.requirements.clone());
            self.requirements.add_all(t);
        }
        Some(Step {
            claim: c,
            request: request.name.clone(),
            key,
            template,
            shared,
            consumed,
            counters,
            topology,
            previous,
            constraints,
        })
    }

    fn push(&mut self, step: Step) {
        let k = (step.key.clone(), step.template);
        if step.shared {
            let used = self.path_capacity.entry(k).or_default();
            if let Some(c) = &step.consumed {
                capacity::add(used, c);
            }
        } else {
            self.taken.insert(k);
        }
        if let Some((pool, need)) = &step.counters {
            let used = self
                .path_counters
                .entry((pool.clone(), step.template))
                .or_default();
            for (k, v) in need {
                *used.entry(k.clone()).or_default() += v;
            }
        }
        self.path.push(step);
    }

    fn pop(&mut self) {
        let Some(step) = self.path.pop() else { return };
        let k = (step.key.clone(), step.template);
        if step.shared {
            if let (Some(used), Some(c)) = (self.path_capacity.get_mut(&k), &step.consumed) {
                for (name, v) in c {
                    *used.entry(name.clone()).or_default() -= v;
                }
            }
        } else {
            self.taken.remove(&k);
        }
        if let Some((pool, need)) = &step.counters
            && let Some(used) = self.path_counters.get_mut(&(pool.clone(), step.template))
        {
            for (k, v) in need {
                *used.entry(k.clone()).or_default() -= v;
            }
        }
        if let Some(previous) = step.previous {
            self.requirements = previous;
        }
        for &j in step.constraints.iter().rev() {
            self.pinned[step.claim][j].pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(uids: &[&str]) -> HashSet<String> {
        uids.iter().map(|s| s.to_string()).collect()
    }

    fn amounts(pairs: &[(&str, i64)]) -> Amounts {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    // Upstream's provisioning/dra_internal_test.go › allConsumersDeleting.
    #[test]
    fn consumers_are_all_deleting_only_when_none_stays() {
        let deleting = set(&["a", "b"]);
        let cases: [(&[&str], bool); 4] = [
            (&["a", "b"], true),
            (&["a"], true),
            (&["a", "c"], false),
            (&["c"], false),
        ];
        for (consumers, expected) in cases {
            assert_eq!(
                all_consumers_deleting(consumers, &deleting),
                expected,
                "{consumers:?}"
            );
        }
    }

    // Upstream's provisioning/dra_internal_test.go › effectiveConsumedCapacity.
    #[test]
    fn a_shared_device_keeps_the_share_of_claims_that_stay() {
        let mi = |n: i64| n * 1024 * 1024 * 1000;
        let deleting = set(&["deleting-a", "deleting-b"]);
        type Case<'a> = (&'a str, Vec<(Vec<&'a str>, Amounts)>, Amounts);
        let cases: Vec<Case> = vec![
            (
                "no consumer is deleting",
                vec![
                    (
                        vec!["live-a"],
                        amounts(&[("memory", mi(256)), ("connections", 1000)]),
                    ),
                    (
                        vec!["live-b"],
                        amounts(&[("memory", mi(128)), ("connections", 3000)]),
                    ),
                ],
                amounts(&[("memory", mi(384)), ("connections", 4000)]),
            ),
            (
                "only the deleting claim's share goes",
                vec![
                    (
                        vec!["live-a"],
                        amounts(&[("memory", mi(256)), ("connections", 1000)]),
                    ),
                    (
                        vec!["deleting-b"],
                        amounts(&[("memory", mi(128)), ("connections", 3000)]),
                    ),
                ],
                amounts(&[("memory", mi(256)), ("connections", 1000)]),
            ),
            (
                "a capacity only the deleting claim consumed is dropped",
                vec![
                    (vec!["live-a"], amounts(&[("memory", mi(256))])),
                    (
                        vec!["deleting-b"],
                        amounts(&[("memory", mi(128)), ("connections", 3000)]),
                    ),
                ],
                amounts(&[("memory", mi(256))]),
            ),
            (
                "every contribution is deleting",
                vec![
                    (vec!["deleting-a"], amounts(&[("memory", mi(256))])),
                    (vec!["deleting-b"], amounts(&[("memory", mi(128))])),
                ],
                Amounts::new(),
            ),
            (
                "a claim of a deleting and a live pod stays",
                vec![(
                    vec!["deleting-a", "live-b"],
                    amounts(&[("memory", mi(256))]),
                )],
                amounts(&[("memory", mi(256))]),
            ),
        ];
        for (case, contributions, expected) in cases {
            assert_eq!(
                effective_consumed(&contributions, &deleting),
                expected,
                "{case}"
            );
        }
    }

    fn slice(owners: serde_json::Value) -> karpenter_api::dra::ResourceSlice {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "s", "ownerReferences": owners},
            "spec": {"driver": "d", "pool": {"name": "p"}}
        }))
        .unwrap()
    }

    // Upstream's provisioning/dra_internal_test.go › nodeOwnerName.
    #[test]
    fn a_slice_belongs_to_its_node_owner() {
        let owner = |kind: &str, name: &str| serde_json::json!({"apiVersion": "v1", "kind": kind, "name": name, "uid": name});
        let cases = [
            (serde_json::json!([owner("Node", "node-a")]), Some("node-a")),
            (serde_json::json!([]), None),
            (serde_json::json!([owner("Pod", "pod-a")]), None),
            (
                serde_json::json!([owner("Pod", "pod-a"), owner("Node", "node-b")]),
                Some("node-b"),
            ),
        ];
        for (owners, expected) in cases {
            assert_eq!(node_owner(&slice(owners.clone())), expected, "{owners}");
        }
    }

    fn gpu_types() -> (DynamicResources, DynamicResources) {
        let gpu = DynamicResources {
            resource_slice_templates: vec![ResourceSliceTemplate {
                driver: "driver-a".into(),
                pool: "pool".into(),
                devices: vec![Device {
                    name: "gpu-0".into(),
                    ..Default::default()
                }],
                shared_counters: Vec::new(),
            }],
            attribute_bindings: Vec::new(),
        };
        (gpu, DynamicResources::default())
    }

    fn claim() -> Arc<ResourceClaim> {
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "c", "namespace": "default"},
                "spec": {"devices": {"requests": [{"name": "req", "exactly": {"deviceClassName": "any"}}]}}
            }))
            .unwrap(),
        )
    }

    fn allocator() -> Allocator {
        let inventory = DeviceInventory::new(
            [],
            [serde_json::from_value(serde_json::json!({"metadata": {"name": "any"}})).unwrap()],
            [],
        );
        Allocator::new(
            Arc::new(inventory),
            &HashSet::new(),
            HashSet::new(),
            Vec::new(),
        )
    }

    // Upstream's scheduling/dra_internal_test.go › draNodeClaim adapter: the instance types
    // with their templates (it-2 has none) are what the claim can be allocated on.
    #[test]
    fn only_instance_types_with_the_device_remain() {
        let (gpu, none) = gpu_types();
        let requirements = Requirements::new();
        let target = Target {
            id: "hostname-1",
            node_pool: "np-a",
            node_name: "",
            requirements: &requirements,
            instance_types: vec![("it-1", Some(&gpu)), ("it-2", Some(&none))],
        };
        let mut alloc = allocator();
        let a = alloc.allocate(&target, &[claim()]).unwrap();
        assert_eq!(a.instance_types, ["it-1"]);
        alloc.commit(a);
        let meta = &alloc.claim_allocations()["default/c"];
        assert_eq!(meta.node_claim, "hostname-1");
        assert!(meta.used_templates);
        assert_eq!(alloc.drivers_of("hostname-1"), ["driver-a"]);
        // A later pod of the same claim must join that NodeClaim.
        let other = Target {
            id: "hostname-2",
            ..target
        };
        let err = alloc.allocate(&other, &[claim()]).unwrap_err();
        assert!(
            err.contains("bound to a different in-flight NodeClaim"),
            "{err}"
        );
    }

    // Upstream's scheduling/dra_internal_test.go › draExistingNode adapter: an initialized
    // node offers no templates, one not initialized offers its instance type's, and one whose
    // instance type is unknown offers none.
    #[test]
    fn an_existing_node_offers_templates_only_before_it_initializes() {
        let (gpu, _) = gpu_types();
        let requirements = Requirements::new();
        let cases = [
            ("initialized", None, false),
            ("not initialized", Some(&gpu), true),
            ("instance type unknown", None, false),
        ];
        for (case, resources, fits) in cases {
            let target = Target {
                id: "node-a",
                node_pool: "np-a",
                node_name: "node-a",
                requirements: &requirements,
                instance_types: vec![("it-1", resources)],
            };
            assert_eq!(
                allocator().allocate(&target, &[claim()]).is_ok(),
                fits,
                "{case}"
            );
        }
    }

    // A NodeClaim that drops the instance types it held a cluster device on gives it back
    // (upstream's ReleaseInstanceType); while it holds it, no other NodeClaim gets it.
    #[test]
    fn a_released_instance_type_gives_its_devices_back() {
        let slice: karpenter_api::dra::ResourceSlice = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "s"},
            "spec": {"driver": "d", "allNodes": true,
                "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "only"}]}
        }))
        .unwrap();
        let inventory = DeviceInventory::new(
            [],
            [serde_json::from_value(serde_json::json!({"metadata": {"name": "any"}})).unwrap()],
            [slice],
        );
        let mut alloc = Allocator::new(
            Arc::new(inventory),
            &HashSet::new(),
            HashSet::new(),
            Vec::new(),
        );
        let requirements = Requirements::new();
        let on = |id: &'static str| Target {
            id,
            node_pool: "np",
            node_name: "",
            requirements: &requirements,
            instance_types: vec![("it-1", None), ("it-2", None)],
        };
        let first = alloc.allocate(&on("nc-1"), &[claim()]).unwrap();
        assert_eq!(first.instance_types, ["it-1", "it-2"]);
        alloc.commit(first);
        let other = serde_json::json!({
            "metadata": {"name": "other", "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "req", "exactly": {"deviceClassName": "any"}}]}}
        });
        let other: Arc<ResourceClaim> = Arc::new(serde_json::from_value(other).unwrap());
        assert!(
            alloc
                .allocate(&on("nc-2"), std::slice::from_ref(&other))
                .is_err(),
            "held on both types"
        );
        alloc.release("nc-1", ["it-1"]);
        assert!(
            alloc
                .allocate(&on("nc-2"), std::slice::from_ref(&other))
                .is_err(),
            "still held on it-2"
        );
        assert_eq!(
            alloc.claim_allocations()["default/c"]
                .devices
                .keys()
                .collect::<Vec<_>>(),
            ["it-2"]
        );
        alloc.release("nc-1", ["it-2"]);
        assert!(alloc.allocate(&on("nc-2"), &[other]).is_ok(), "given back");
    }

    // Kubernetes' claim validation, as upstream's allocator reports it.
    #[test]
    fn a_claim_the_allocator_cannot_read_is_refused_with_why() {
        let (gpu, _) = gpu_types();
        let requirements = Requirements::new();
        let target = Target {
            id: "h",
            node_pool: "np",
            node_name: "",
            requirements: &requirements,
            instance_types: vec![("it-1", Some(&gpu))],
        };
        let cases = [
            (
                serde_json::json!({"requests": [{"name": "r"}]}),
                "only Exactly and FirstAvailable requests are supported",
            ),
            (
                serde_json::json!({"requests": [{"name": "r", "exactly": {"deviceClassName": "any"}}],
                "constraints": [{"distinctAttribute": "x"}]}),
                "DistinctAttribute constraints not done yet",
            ),
            (
                serde_json::json!({"requests": [{"name": "r", "exactly": {"deviceClassName": "any"}}],
                "constraints": [{}]}),
                "unsupported constraint",
            ),
            (
                serde_json::json!({"requests": [{"name": "r", "exactly": {"deviceClassName": "any", "selectors": [{}]}}]}),
                "unsupported selector type",
            ),
            (
                serde_json::json!({"requests": [{"name": "r", "exactly": {"deviceClassName": "any", "count": 33}}]}),
                "exceeding maximum of 32",
            ),
            (
                serde_json::json!({"requests": [{"name": "r", "exactly": {"deviceClassName": "missing"}}]}),
                "DeviceClass \"missing\" not found",
            ),
            (
                serde_json::json!({"requests": [{"name": "r", "exactly": {"deviceClassName": "any",
                "selectors": [{"cel": {"expression": "device.driver =="}}]}}]}),
                "failed to compile",
            ),
        ];
        for (devices, why) in cases {
            let claim: ResourceClaim = serde_json::from_value(serde_json::json!({
                "metadata": {"name": "c", "namespace": "default"}, "spec": {"devices": devices}
            }))
            .unwrap();
            let err = allocator()
                .allocate(&target, &[Arc::new(claim)])
                .unwrap_err();
            assert!(err.contains(why), "{why}: {err}");
        }
    }
}
