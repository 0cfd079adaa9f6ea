//! NodeClaim templates (one per NodePool) and the NodeClaims a simulation opens from them.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use k8s_openapi::api::core::v1::{Pod, Taint};
use karpenter_api::labels::{
    CAPACITY_TYPE_LABEL, NODE_INITIALIZED_LABEL, NODE_POOL_LABEL, NODE_REGISTERED_LABEL,
    ZONE_LABEL, node_class_label_key,
};
use karpenter_api::{NodePool, Operator};

use super::PodData;
use crate::instancetype::{InstanceType, Offering};
use crate::resources::Resources;
use crate::scheduling::hostports::{self, HostPort};
use crate::scheduling::requirements::agree;
use crate::scheduling::{AllowUndefined, Requirement, Requirements, taints};

/// A NodePool prepared for scheduling: its requirements, the instance types that can satisfy
/// them, and the DaemonSet overhead each instance type would carry.
#[derive(Debug)]
pub struct NodeClaimTemplate {
    /// The NodePool's name.
    pub node_pool: String,
    /// The NodePool's weight.
    pub weight: i32,
    /// Labels every node gets.
    pub labels: BTreeMap<String, String>,
    /// Taints every node gets.
    pub taints: Vec<Taint>,
    /// Taints removed after startup (pods need not tolerate them).
    pub startup_taints: Vec<Taint>,
    /// Template requirements ∩ labels ∩ the NodePool and NodeClass labels.
    pub requirements: Requirements,
    /// The instance types compatible with the template, in the provider's order.
    pub instance_types: Vec<Arc<InstanceType>>,
    /// DaemonSet requests per instance type (index-aligned with `instance_types`).
    pub daemon_overhead: Vec<Resources>,
    /// DaemonSet host ports per instance type.
    pub daemon_host_ports: Vec<Vec<HostPort>>,
    /// The provider's well-known labels: pods may require them although the NodePool does not
    /// set them, since the instance type decides them.
    pub provider_labels: Vec<String>,
    /// The zone × capacity-type pairs of the instance types' offerings, so offering checks
    /// are bit operations.
    pub offerings: OfferingSpace,
    /// Per instance type: which pairs it has an available offering in.
    pub offering_masks: Vec<u128>,
    /// Per instance type: the price of each available offering, by pair.
    offering_prices: Vec<Vec<(u32, f64)>>,
    /// Whether any instance type has a reserved offering (only then are reservations counted).
    pub has_reserved: bool,
    /// Which instance types agree with a requirement, by requirement (checked often, with
    /// few distinct requirements).
    agreement: RefCell<FxHashMap<Requirement, Rc<[u64]>>>,
}

/// The zones and capacity types a template's offerings span.
#[derive(Debug, Default)]
pub struct OfferingSpace {
    zones: Vec<String>,
    capacity_types: Vec<String>,
}

impl OfferingSpace {
    fn index(&mut self, offering: &Offering) -> Option<u32> {
        let find = |list: &mut Vec<String>, v: &str| match list.iter().position(|x| x == v) {
            Some(i) => i,
            None => {
                list.push(v.to_string());
                list.len() - 1
            }
        };
        let z = find(&mut self.zones, &offering.zone);
        let c = find(&mut self.capacity_types, &offering.capacity_type);
        let bit = z * 4 + c;
        (c < 4 && bit < 128).then_some(bit as u32)
    }

    /// The pairs `requirements` allow.
    pub fn allowed(&self, requirements: &Requirements) -> u128 {
        let zone = requirements.get(ZONE_LABEL);
        let capacity_type = requirements.get(CAPACITY_TYPE_LABEL);
        let mut mask = 0u128;
        for (z, zone_name) in self.zones.iter().enumerate() {
            if zone.is_some_and(|r| !r.has(zone_name)) {
                continue;
            }
            for (c, ct) in self.capacity_types.iter().enumerate() {
                if capacity_type.is_none_or(|r| r.has(ct)) && z * 4 + c < 128 {
                    mask |= 1 << (z * 4 + c);
                }
            }
        }
        mask
    }

    /// The capacity types among the pairs in `mask`.
    pub fn capacity_types(&self, mask: u128) -> Vec<&str> {
        let mut out: Vec<&str> = self
            .capacity_types
            .iter()
            .enumerate()
            .filter(|(c, _)| (0..self.zones.len()).any(|z| mask & (1 << (z * 4 + c)) != 0))
            .map(|(_, ct)| ct.as_str())
            .collect();
        out.sort_unstable();
        out
    }
}

/// A DaemonSet pod's strict requirements with each of its required node-affinity terms in
/// turn (the terms are alternatives), or just its own when it has at most one.
fn daemon_terms(pod: &Pod, data: &PodData) -> Vec<Requirements> {
    let terms = pod
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map_or(0, |r| r.node_selector_terms.len());
    if terms <= 1 {
        return vec![data.strict_requirements.clone()];
    }
    (0..terms)
        .map(|i| {
            let mut spec = pod.spec.clone();
            if let Some(required) = spec
                .as_mut()
                .and_then(|s| s.affinity.as_mut())
                .and_then(|a| a.node_affinity.as_mut())
                .and_then(|n| {
                    n.required_during_scheduling_ignored_during_execution
                        .as_mut()
                })
            {
                let term = required.node_selector_terms.swap_remove(i);
                required.node_selector_terms = vec![term];
            }
            Requirements::for_spec(spec.as_ref(), false)
        })
        .collect()
}

impl NodeClaimTemplate {
    /// Prepares a NodePool, keeping the instance types that could launch for it at all.
    pub fn new(
        node_pool: &NodePool,
        instance_types: &[Arc<InstanceType>],
        daemonsets: &[(Pod, PodData)],
        provider_labels: &[String],
    ) -> Self {
        let well_known = provider_labels;
        let spec = &node_pool.spec.template.spec;
        let labels = node_pool.spec.template.metadata.labels.clone();
        let mut requirements = Requirements::from_node_claim(&spec.requirements);
        requirements.add_all(&Requirements::from_labels(&labels));
        requirements.add(Requirement::new(
            NODE_POOL_LABEL,
            Operator::In,
            &[node_pool.name()],
        ));
        let class = &spec.node_class_ref;
        if !class.group.is_empty() {
            requirements.add(Requirement::new(
                &node_class_label_key(&class.group, &class.kind),
                Operator::In,
                &[class.name.as_str()],
            ));
        }
        let taints = spec.taints.clone();
        // A DaemonSet pod runs on the node if it tolerates the taints (PreferNoSchedule is
        // only a preference) and the strict requirements of one of its required node-affinity
        // terms fit the template (upstream tries the terms in order); each such term is kept
        // to match instance types against.
        let hard: Vec<Taint> = taints
            .iter()
            .filter(|t| t.effect != "PreferNoSchedule")
            .cloned()
            .collect();
        // Every node karpenter launches registers and initializes: DaemonSets that require
        // those labels run there (upstream's scheduling-simulation keys, which stay out of the
        // NodeClaim).
        let mut on_launched = requirements.clone();
        for key in [NODE_REGISTERED_LABEL, NODE_INITIALIZED_LABEL] {
            on_launched.add(Requirement::new(key, Operator::In, &["true"]));
        }
        let daemons: Vec<(&PodData, Vec<Requirements>)> = daemonsets
            .iter()
            .filter(|(_, d)| taints::first_untolerated(&hard, &d.tolerations).is_none())
            .filter_map(|(pod, d)| {
                let terms: Vec<Requirements> = daemon_terms(pod, d)
                    .into_iter()
                    .filter(|r| {
                        on_launched
                            .compatible(r, AllowUndefined::WellKnownLabels(well_known))
                            .is_ok()
                    })
                    .collect();
                (!terms.is_empty()).then_some((d, terms))
            })
            .collect();
        let mut kept = Vec::new();
        let mut daemon_overhead = Vec::new();
        let mut daemon_host_ports = Vec::new();
        let mut offerings = OfferingSpace::default();
        let mut offering_masks = Vec::new();
        let mut offering_prices = Vec::new();
        for it in instance_types {
            if it.requirements.intersects(&requirements).is_err()
                || it.compatible_offerings(&requirements).next().is_none()
            {
                continue;
            }
            let mut overhead = Resources::new();
            let mut ports = Vec::new();
            for (d, _) in daemons
                .iter()
                .filter(|(_, terms)| terms.iter().any(|r| it.requirements.intersects(r).is_ok()))
            {
                overhead.add(&d.requests);
                ports.extend(d.host_ports.iter().cloned());
            }
            if !overhead.fits(it.allocatable()) {
                continue;
            }
            // More than 32 zones does not fit the masks; such offerings are ignored.
            let prices: Vec<(u32, f64)> = it
                .offerings
                .iter()
                .filter(|o| o.available)
                .filter_map(|o| offerings.index(o).map(|b| (b, o.price)))
                .collect();
            offering_masks.push(prices.iter().fold(0u128, |m, (b, _)| m | 1 << b));
            offering_prices.push(prices);
            kept.push(it.clone());
            daemon_overhead.push(overhead);
            daemon_host_ports.push(ports);
        }
        let has_reserved = kept
            .iter()
            .any(|it| it.offerings.iter().any(|o| o.reserved().is_some()));
        Self {
            node_pool: node_pool.name().to_string(),
            weight: node_pool.weight(),
            labels,
            taints,
            startup_taints: spec.startup_taints.clone(),
            requirements,
            instance_types: kept,
            daemon_overhead,
            daemon_host_ports,
            provider_labels: provider_labels.to_vec(),
            offerings,
            offering_masks,
            offering_prices,
            has_reserved,
            agreement: RefCell::default(),
        }
    }
}

impl NodeClaimTemplate {
    /// The instance types (as a bitset over `instance_types`) whose own requirement on
    /// `requirement`'s key agrees with it.
    pub fn agreeing(&self, requirement: &Requirement) -> Rc<[u64]> {
        if let Some(bits) = self.agreement.borrow().get(requirement) {
            return bits.clone();
        }
        let mut bits = vec![0u64; self.instance_types.len().div_ceil(64)];
        for (i, it) in self.instance_types.iter().enumerate() {
            if it
                .requirements
                .get(requirement.key())
                .is_none_or(|own| agree(own, requirement))
            {
                bits[i / 64] |= 1 << (i % 64);
            }
        }
        let bits: Rc<[u64]> = bits.into();
        self.agreement
            .borrow_mut()
            .insert(requirement.clone(), bits.clone());
        bits
    }

    /// The cheapest offering of instance type `i` among the pairs in `allowed`.
    pub fn cheapest_price(&self, i: usize, allowed: u128) -> Option<f64> {
        self.offering_prices[i]
            .iter()
            .filter(|(b, _)| allowed & (1 << b) != 0)
            .map(|(_, p)| *p)
            .min_by(f64::total_cmp)
    }
}

/// A NodeClaim the simulation has opened and is packing pods onto.
#[derive(Clone, Debug)]
pub struct InflightClaim {
    /// Index of its template.
    pub template: usize,
    /// The placeholder hostname that stands for the node until it exists.
    pub hostname: String,
    /// What the node's labels must satisfy, narrowed by every pod added.
    pub requirements: Requirements,
    /// Indices into the template's instance types that can still hold every pod.
    pub options: Vec<u32>,
    /// The pods' requests (DaemonSet overhead is added per instance type when checking).
    pub requests: Resources,
    /// The pods, by index into the batch.
    pub pods: Vec<usize>,
    /// Host ports the pods bind.
    pub host_ports: Vec<HostPort>,
    /// The capacity reservations it holds (see [`super::reservation`]).
    pub reserved: Vec<String>,
}

/// The most a claim could still take, per resource, on its roomiest instance type option (each
/// resource judged on its own, so an over-estimate): a pod asking more of any of them fits no
/// option, and [`InflightClaim::can_add`] would refuse it. Checking this first lets the
/// scheduler pass over full claims without comparing requirements.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Headroom {
    cpu: i64,
    memory: i64,
    pods: i64,
}

impl Headroom {
    /// Whether a pod asking `requests` might fit.
    pub fn admits(&self, requests: &Resources) -> bool {
        requests.cpu <= self.cpu && requests.memory <= self.memory && requests.pods <= self.pods
    }
}

/// What a pod's device claims allow of a claim (from the device allocator): requirements its
/// devices' topology adds, and which instance types (by index into the template's) have them.
pub struct DeviceFit {
    /// What the devices require of the node.
    pub requirements: Requirements,
    /// Per instance type of the template: whether every claim can be allocated on it.
    pub instance_types: Vec<bool>,
}

/// The outcome of a successful check: the claim's state with the pod added.
pub struct Addition {
    /// The narrowed requirements.
    pub requirements: Option<Requirements>,
    /// The instance types that can still hold everything.
    pub options: Vec<u32>,
}

/// Why no instance type of a claim can take a pod.
pub fn instance_type_error(
    fits_requirements: bool,
    fits_resources: bool,
    requirements: &Requirements,
    requests: &Resources,
) -> String {
    let what = match (fits_requirements, fits_resources) {
        (false, _) => "no instance type met the scheduling requirements",
        (true, false) => "no instance type has enough resources",
        (true, true) => "no instance type met the requirements/resources/offering tuple",
    };
    let typo = if requests.cpu >= 1_000_000_000 {
        " (CPU request >= 1 Million, m vs M typo?)"
    } else {
        ""
    };
    // The hostname placeholder is internal; it would only confuse.
    let mut shown = requirements.clone();
    shown.remove(karpenter_api::labels::HOSTNAME_LABEL);
    format!("{what}{typo}, requirements={shown}, resources={requests}")
}

impl InflightClaim {
    /// What the claim could still take (see [`Headroom`]).
    pub fn headroom(&self, template: &NodeClaimTemplate) -> Headroom {
        let mut room = Headroom {
            cpu: i64::MIN,
            memory: i64::MIN,
            pods: i64::MIN,
        };
        for &i in &self.options {
            let i = i as usize;
            let allocatable = template.instance_types[i].allocatable();
            let overhead = &template.daemon_overhead[i];
            room.cpu = room
                .cpu
                .max(allocatable.cpu - overhead.cpu - self.requests.cpu);
            room.memory = room
                .memory
                .max(allocatable.memory - overhead.memory - self.requests.memory);
            room.pods = room
                .pods
                .max(allocatable.pods - overhead.pods - self.requests.pods);
        }
        room
    }

    /// Checks whether `pod` can join, returning the narrowed state (not yet applied). Reasons
    /// are only written out when `explain` is set: most checks fail for most claims, and
    /// nobody reads those.
    pub fn can_add(
        &self,
        template: &NodeClaimTemplate,
        pod: &PodData,
        topology_requirements: impl FnOnce(&Requirements) -> Result<Option<Requirements>, String>,
        devices: Option<&DeviceFit>,
        strict_min_values: bool,
        explain: bool,
    ) -> Result<Addition, String> {
        let reject = |why: &dyn Fn() -> String| if explain { why() } else { String::new() };
        if let Some(t) = taints::first_untolerated(&template.taints, &pod.tolerations) {
            return Err(reject(&|| {
                format!("did not tolerate taint {}", taints::describe(t))
            }));
        }
        if let Some(port) = hostports::first_conflict(&pod.host_ports, &self.host_ports) {
            return Err(reject(&|| {
                format!(
                    "checking host port usage, port {} {} conflicts",
                    port.port, port.protocol
                )
            }));
        }
        if let Err(e) = self.requirements.compatible(
            &pod.requirements,
            AllowUndefined::WellKnownLabels(&template.provider_labels),
        ) {
            return Err(reject(&|| format!("incompatible requirements, {e}")));
        }
        let mut merged: Option<Requirements> = None;
        if !pod.requirements.is_empty() {
            let mut r = self.requirements.clone();
            r.add_all(&pod.requirements);
            if r != self.requirements {
                merged = Some(r);
            }
        }
        if let Some(fit) = devices.filter(|f| !f.requirements.is_empty()) {
            let current = merged.as_ref().unwrap_or(&self.requirements);
            if let Err(e) = current.compatible(
                &fit.requirements,
                AllowUndefined::WellKnownLabels(&template.provider_labels),
            ) {
                return Err(reject(&|| {
                    format!("incompatible dynamic resource requirements, {e}")
                }));
            }
            let mut r = current.clone();
            r.add_all(&fit.requirements);
            if r != self.requirements {
                merged = Some(r);
            }
        }
        if let Some(narrowed) =
            topology_requirements(merged.as_ref().unwrap_or(&self.requirements))?
        {
            merged = Some(narrowed);
        }
        let total = self.requests.plus(&pod.requests);
        let requirements = merged.as_ref().unwrap_or(&self.requirements);
        // The options already agree with every key that did not change; check only the rest.
        let changed: Vec<&Requirement> = match &merged {
            Some(m) => m
                .iter()
                .filter(|r| self.requirements.get(r.key()) != Some(*r))
                .collect(),
            None => Vec::new(),
        };
        let offerings_changed = changed
            .iter()
            .any(|r| r.key() == ZONE_LABEL || r.key() == CAPACITY_TYPE_LABEL);
        let allowed = if offerings_changed {
            template.offerings.allowed(requirements)
        } else {
            u128::MAX
        };
        let agreeing: Vec<Rc<[u64]>> = changed.iter().map(|r| template.agreeing(r)).collect();
        let mut fits_requirements = changed.is_empty();
        let mut fits_resources = false;
        let mut without_devices = false;
        let options: Vec<u32> = self
            .options
            .iter()
            .copied()
            .filter(|&i| {
                let i = i as usize;
                let it = &template.instance_types[i];
                let agrees = agreeing
                    .iter()
                    .all(|bits| bits[i / 64] & (1 << (i % 64)) != 0);
                if !agrees || template.offering_masks[i] & allowed == 0 {
                    return false;
                }
                fits_requirements = true;
                if hostports::first_conflict(&pod.host_ports, &template.daemon_host_ports[i])
                    .is_some()
                {
                    return false;
                }
                let ok = total.fits_with(&template.daemon_overhead[i], it.allocatable());
                fits_resources |= ok;
                let has_devices = devices.is_none_or(|f| f.instance_types[i]);
                without_devices |= ok && !has_devices;
                ok && has_devices
            })
            .collect();
        if options.is_empty() && without_devices {
            return Err(reject(&|| {
                "no instance type satisfies both scheduling and dynamic resource requirements"
                    .to_string()
            }));
        }
        if options.is_empty() {
            return Err(reject(&|| {
                instance_type_error(fits_requirements, fits_resources, requirements, &total)
            }));
        }
        if strict_min_values
            && let Some(key) = unmet_min_values(
                requirements,
                options
                    .iter()
                    .map(|&i| &*template.instance_types[i as usize]),
            )
        {
            return Err(reject(&|| {
                format!("minValues requirement is not met for label(s) (label(s)=[{key}])")
            }));
        }
        Ok(Addition {
            requirements: merged,
            options,
        })
    }

    /// Applies a successful [`InflightClaim::can_add`].
    pub fn add(&mut self, pod_id: usize, pod: &PodData, addition: Addition) {
        if let Some(r) = addition.requirements {
            self.requirements = r;
        }
        self.options = addition.options;
        self.requests.add(&pod.requests);
        self.pods.push(pod_id);
        self.host_ports.extend(pod.host_ports.iter().cloned());
    }
}

/// How many distinct values of `r`'s key the instance types offer within `r`.
fn offered_values<'a>(r: &Requirement, types: impl Iterator<Item = &'a InstanceType>) -> usize {
    let mut values = BTreeSet::new();
    for it in types {
        if let Some(own) = it.requirements.get(r.key())
            && own.operator() == Operator::In
        {
            values.extend(own.values().filter(|v| r.has(v)));
        }
    }
    values.len()
}

/// `MIN_VALUES_POLICY=BestEffort`, as upstream: each `minValues` the instance types cannot
/// meet is lowered to what they offer, so the NodeClaim asks for what can be launched. Returns
/// whether any was.
pub fn relax_min_values<'a>(
    requirements: &mut Requirements,
    types: impl Iterator<Item = &'a InstanceType> + Clone,
) -> bool {
    let lowered: Vec<Requirement> = requirements
        .iter()
        .filter_map(|r| {
            let min = r.min_values()?;
            let offered = offered_values(r, types.clone());
            ((offered as i64) < i64::from(min)).then(|| {
                let values: Vec<&str> = r.values().collect();
                // minValues is at least 1; nothing offered drops it.
                let lowered = (offered > 0).then(|| i32::try_from(offered).unwrap_or(i32::MAX));
                Requirement::with_min_values(r.key(), r.operator(), &values, lowered)
            })
        })
        .collect();
    let relaxed = !lowered.is_empty();
    for r in lowered {
        requirements.remove(r.key());
        requirements.add(r);
    }
    relaxed
}

/// The first key whose `minValues` the instance types no longer satisfy.
pub fn unmet_min_values<'a>(
    requirements: &Requirements,
    types: impl Iterator<Item = &'a InstanceType> + Clone,
) -> Option<String> {
    requirements
        .iter()
        .find(|r| {
            r.min_values()
                .is_some_and(|min| (offered_values(r, types.clone()) as i64) < i64::from(min))
        })
        .map(|r| r.key().to_string())
}
