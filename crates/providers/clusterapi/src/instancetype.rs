//! The instance types of a ClusterAPINodeClass: one per selected MachineDeployment, as
//! upstream makes them, from its scale-from-zero annotations ([`crate::shape`]) and the labels
//! Cluster API propagates to its nodes.
//!
//! - The name is the node's `node.kubernetes.io/instance-type` label (from the labels
//!   annotation or the template's labels), so consolidation finds a node's type by the label
//!   the cloud controller manager gives it. Without one the MachineDeployment's name stands in
//!   (upstream leaves the name empty, so two such MachineDeployments collide).
//! - MachineDeployments that make the same node (same name, capacity, labels and taints) in
//!   several zones or capacity types are one instance type with one offering each: Cluster
//!   API's usual MachineDeployment per zone becomes a type Karpenter can spread across zones.
//!   One that shares the name but not the node is skipped and named.
//! - An offering is the MachineDeployment: its zone label (empty when unknown, as upstream),
//!   its capacity type (`on-demand`, or `spot` when its labels say so), its price annotation
//!   (0 by default, so NodePool weights decide) and `available` while its replicas are below
//!   its max size.
//! - Requirements are the node's labels, plus `kubernetes.io/arch` (the default architecture
//!   unless the labels say, as the Cluster Autoscaler assumes `amd64`), `kubernetes.io/os`
//!   (`linux` unless the labels say) and `karpenter.cluster.x-k8s.io/instance-cpu` and
//!   `-memory` (whole cores, MiB) from the capacity.
//! - Capacity is the annotations' and allocatable the same (no overhead: neither upstream nor
//!   the Cluster Autoscaler knows the kubelet's reservations).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use karpenter_api::labels::{
    ARCH_AMD64, ARCH_LABEL, CAPACITY_TYPE_LABEL, CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT,
    INSTANCE_TYPE_LABEL, OS_LABEL, ZONE_LABEL, check_label_value,
};
use karpenter_api::{NodeClaim, NodePool, Operator};
use karpenter_core::instancetype::{InstanceType, Offering, launchable};
use karpenter_core::resources::Resources;
use karpenter_core::scheduling::selector;
use karpenter_core::scheduling::{Requirement, Requirements};

use crate::capi::{MEMBER_LABEL, MachineDeployment};
use crate::shape::{self, LABELS_ANNOTATION, Problem, Shape, Skipped};

/// Labels the provider defines on its instance types (upstream's well-known ones).
pub const LABELS: [&str; 4] = [
    INSTANCE_SIZE_LABEL,
    INSTANCE_FAMILY_LABEL,
    INSTANCE_CPU_LABEL,
    INSTANCE_MEMORY_LABEL,
];
/// Upstream's; set from the labels annotation when a MachineDeployment gives it.
pub const INSTANCE_SIZE_LABEL: &str = "karpenter.cluster.x-k8s.io/instance-size";
/// Upstream's; set from the labels annotation when a MachineDeployment gives it.
pub const INSTANCE_FAMILY_LABEL: &str = "karpenter.cluster.x-k8s.io/instance-family";
/// Whole cores of the node's CPU capacity.
pub const INSTANCE_CPU_LABEL: &str = "karpenter.cluster.x-k8s.io/instance-cpu";
/// The node's memory capacity in MiB.
pub const INSTANCE_MEMORY_LABEL: &str = "karpenter.cluster.x-k8s.io/instance-memory";

/// The label domains Cluster API copies from a Machine to its Node (its metadata
/// propagation): `node-role.kubernetes.io` exactly, `node-restriction.kubernetes.io` and
/// `node.cluster.x-k8s.io` with their subdomains.
fn propagates(key: &str) -> bool {
    let domain = key.split('/').next().unwrap_or_default();
    let within = |d: &str| domain == d || domain.ends_with(&format!(".{d}"));
    domain == "node-role.kubernetes.io"
        || within("node-restriction.kubernetes.io")
        || within("node.cluster.x-k8s.io")
}

/// The labels a MachineDeployment's nodes carry: the template's labels Cluster API
/// propagates, then the labels annotation's, which win (upstream's order).
pub fn node_labels(md: &MachineDeployment, shape: &Shape) -> BTreeMap<String, String> {
    let mut labels: BTreeMap<String, String> = md
        .spec
        .template
        .metadata
        .labels
        .iter()
        .filter(|(k, _)| propagates(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    labels.extend(shape.labels.clone());
    labels
}

/// How instance types are made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// `kubernetes.io/arch` when a MachineDeployment's labels do not say.
    pub default_arch: String,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            default_arch: ARCH_AMD64.into(),
        }
    }
}

/// One MachineDeployment as an offering of an instance type.
#[derive(Clone, Debug, PartialEq)]
pub struct Offer {
    /// The MachineDeployment's namespace.
    pub namespace: String,
    /// The MachineDeployment's name.
    pub name: String,
    /// The instance type it offers.
    pub instance_type: String,
    /// Its zone (empty when its labels do not say).
    pub zone: String,
    /// `on-demand` or `spot`.
    pub capacity_type: String,
    /// Price per hour.
    pub price: f64,
    /// Desired replicas now.
    pub replicas: i32,
    /// Its max size, when it has one.
    pub max_size: Option<i32>,
    /// Whether its template gives every Machine the member label (then only the NodeClaim
    /// annotation tells claimed Machines apart).
    pub template_marks_members: bool,
    /// The hash of its Machine template.
    pub template_hash: String,
}

impl Offer {
    /// `namespace/name` of the MachineDeployment.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Whether it may grow by one.
    pub fn available(&self) -> bool {
        shape::below_max_size(self.replicas, self.max_size)
    }
}

/// A NodeClass's MachineDeployments made into instance types.
#[derive(Clone, Debug, Default)]
pub struct Resolved {
    /// How many member MachineDeployments the selector selected.
    pub selected: usize,
    /// The instance types, by name.
    pub instance_types: Vec<Arc<InstanceType>>,
    /// Each type's taints (the nodes' taints from the taints annotation).
    pub taints: BTreeMap<String, Vec<Taint>>,
    /// One per usable MachineDeployment, in namespace/name order.
    pub offers: Vec<Offer>,
    /// The selected MachineDeployments left out, and why.
    pub skipped: Vec<Skipped>,
}

/// What a MachineDeployment's node is, as far as merging into one type goes.
#[derive(Clone, Debug, PartialEq)]
struct Node {
    name: String,
    /// Every label but zone and capacity type (the offerings').
    labels: BTreeMap<String, String>,
    capacity: Resources,
    taints: Vec<Taint>,
}

fn skipped(md: &MachineDeployment, annotation: &'static str, reason: String) -> Skipped {
    Skipped {
        machine_deployment: md.key(),
        problems: vec![Problem { annotation, reason }],
    }
}

/// The node and offer of one MachineDeployment, or why it is left out.
fn node_and_offer(md: &MachineDeployment, options: &Options) -> Result<(Node, Offer), Skipped> {
    let shape = shape::shape(md)?;
    let mut labels = node_labels(md, &shape);
    let zone = labels.remove(ZONE_LABEL).unwrap_or_default();
    let capacity_type = match labels.remove(CAPACITY_TYPE_LABEL) {
        None => CAPACITY_TYPE_ON_DEMAND.to_string(),
        Some(ct) if ct == CAPACITY_TYPE_ON_DEMAND || ct == CAPACITY_TYPE_SPOT => ct,
        Some(ct) => {
            return Err(skipped(
                md,
                LABELS_ANNOTATION,
                format!("{CAPACITY_TYPE_LABEL} {ct:?} is not on-demand or spot"),
            ));
        }
    };
    let name = match labels.get(INSTANCE_TYPE_LABEL) {
        Some(n) if !n.is_empty() => n.clone(),
        _ => {
            let n = md.name().to_string();
            if let Err(e) = check_label_value(&n).and_then(|()| {
                (n.len() <= 63)
                    .then_some(())
                    .ok_or_else(|| "longer than 63 characters".to_string())
            }) {
                return Err(skipped(
                    md,
                    LABELS_ANNOTATION,
                    format!(
                        "no {INSTANCE_TYPE_LABEL} label, and the MachineDeployment's name cannot stand in for one ({e})"
                    ),
                ));
            }
            n
        }
    };
    labels.insert(INSTANCE_TYPE_LABEL.into(), name.clone());
    labels
        .entry(ARCH_LABEL.into())
        .or_insert_with(|| options.default_arch.clone());
    labels
        .entry(OS_LABEL.into())
        .or_insert_with(|| "linux".into());
    if shape.capacity.cpu % 1000 == 0 {
        labels
            .entry(INSTANCE_CPU_LABEL.into())
            .or_insert_with(|| (shape.capacity.cpu / 1000).to_string());
    }
    labels
        .entry(INSTANCE_MEMORY_LABEL.into())
        .or_insert_with(|| (shape.capacity.memory / 1000 / (1 << 20)).to_string());
    let offer = Offer {
        namespace: md.namespace().to_string(),
        name: md.name().to_string(),
        instance_type: name.clone(),
        zone,
        capacity_type,
        price: shape.price,
        replicas: md.replicas(),
        max_size: shape.max_size,
        template_marks_members: md.spec.template.metadata.labels.contains_key(MEMBER_LABEL),
        template_hash: md.template_hash(),
    };
    let node = Node {
        name,
        labels,
        capacity: shape.capacity,
        taints: shape.taints,
    };
    Ok((node, offer))
}

fn instance_type(node: &Node, offers: &[Offer]) -> InstanceType {
    let mut requirements = Requirements::from_labels(&node.labels);
    let mut zones: Vec<&str> = offers.iter().map(|o| o.zone.as_str()).collect();
    zones.sort_unstable();
    zones.dedup();
    requirements.add(Requirement::new(ZONE_LABEL, Operator::In, &zones));
    let mut capacity_types: Vec<&str> = offers.iter().map(|o| o.capacity_type.as_str()).collect();
    capacity_types.sort_unstable();
    capacity_types.dedup();
    requirements.add(Requirement::new(
        CAPACITY_TYPE_LABEL,
        Operator::In,
        &capacity_types,
    ));
    let offerings = offers
        .iter()
        .map(|o| Offering {
            zone: o.zone.clone(),
            capacity_type: o.capacity_type.clone(),
            price: o.price,
            available: o.available(),
            reservation: None,
        })
        .collect();
    InstanceType::new(
        node.name.clone(),
        requirements,
        offerings,
        node.capacity.clone(),
        Default::default(),
    )
}

/// The member MachineDeployments `selector` selects (all members when unset), in
/// namespace/name order.
pub fn select<'a>(
    mds: &'a [MachineDeployment],
    selector: Option<&LabelSelector>,
) -> Vec<&'a MachineDeployment> {
    let mut out: Vec<&MachineDeployment> = mds
        .iter()
        .filter(|md| md.is_member())
        .filter(|md| {
            selector.is_none_or(|s| {
                selector::matches(s, md.metadata.labels.as_ref().unwrap_or(&BTreeMap::new()))
            })
        })
        .collect();
    out.sort_by_key(|md| md.key());
    out
}

/// The instance types of the MachineDeployments `selector` selects among `mds`.
pub fn resolve(
    mds: &[MachineDeployment],
    selector: Option<&LabelSelector>,
    options: &Options,
) -> Resolved {
    let selected = select(mds, selector);
    let mut resolved = Resolved {
        selected: selected.len(),
        ..Default::default()
    };
    // By type name: the node, and its offers.
    let mut types: BTreeMap<String, (Node, Vec<Offer>)> = BTreeMap::new();
    for md in selected {
        let (node, offer) = match node_and_offer(md, options) {
            Ok(x) => x,
            Err(s) => {
                resolved.skipped.push(s);
                continue;
            }
        };
        match types.get_mut(&node.name) {
            None => {
                types.insert(node.name.clone(), (node, vec![offer]));
            }
            Some((first, offers)) if *first == node => offers.push(offer),
            Some((_, offers)) => resolved.skipped.push(skipped(
                md,
                LABELS_ANNOTATION,
                format!(
                    "instance type {:?} already comes from MachineDeployment {} with other capacity, labels or taints; give this one its own {INSTANCE_TYPE_LABEL}",
                    node.name,
                    offers[0].key()
                ),
            )),
        }
    }
    for (name, (node, offers)) in types {
        resolved
            .instance_types
            .push(Arc::new(instance_type(&node, &offers)));
        resolved.taints.insert(name, node.taints);
        resolved.offers.extend(offers);
    }
    resolved.offers.sort_by_key(Offer::key);
    resolved
}

/// Whether a node with `taints` suits a NodePool (or NodeClaim) that puts `declared` taints
/// (its taints and startup taints) on its nodes: every one of the node's taints is declared
/// (key, value and effect), so the scheduling simulation knows which pods the node takes.
pub fn taints_declared(taints: &[Taint], declared: &[Taint]) -> bool {
    taints.iter().all(|t| {
        declared
            .iter()
            .any(|d| d.key == t.key && d.effect == t.effect && d.value == t.value)
    })
}

impl Resolved {
    /// The instance types a NodePool may launch: those whose nodes' taints it declares.
    pub fn for_node_pool(&self, pool: &NodePool) -> Vec<Arc<InstanceType>> {
        let spec = &pool.spec.template.spec;
        let declared: Vec<Taint> = spec
            .taints
            .iter()
            .chain(&spec.startup_taints)
            .cloned()
            .collect();
        self.instance_types
            .iter()
            .filter(|it| taints_declared(self.taints_of(&it.name), &declared))
            .cloned()
            .collect()
    }

    fn taints_of(&self, name: &str) -> &[Taint] {
        self.taints.get(name).map_or(&[], Vec::as_slice)
    }

    /// The instance type named `name`.
    pub fn instance_type(&self, name: &str) -> Option<&Arc<InstanceType>> {
        self.instance_types.iter().find(|it| it.name == name)
    }

    /// The offer of the MachineDeployment `namespace/name`.
    pub fn offer(&self, key: &str) -> Option<&Offer> {
        self.offers.iter().find(|o| o.key() == key)
    }

    /// Where a NodeClaim may launch, best first: the available offers of the instance types
    /// its requirements allow, whose allocatable holds its requests and whose taints it
    /// declares, in the zone and capacity type it allows; cheapest first, then by type name
    /// (upstream picks the first name of the compatible types) and MachineDeployment.
    pub fn candidates(&self, claim: &NodeClaim) -> Vec<(&Offer, &Arc<InstanceType>)> {
        let declared: Vec<Taint> = claim
            .spec
            .taints
            .iter()
            .chain(&claim.spec.startup_taints)
            .cloned()
            .collect();
        let (requirements, types) = launchable(&self.instance_types, claim);
        let mut out: Vec<(&Offer, &Arc<InstanceType>)> = types
            .into_iter()
            .filter(|it| taints_declared(self.taints_of(&it.name), &declared))
            .flat_map(|it| {
                self.offers
                    .iter()
                    .filter(|o| o.instance_type == it.name && o.available())
                    .filter(|o| {
                        requirements.allows(ZONE_LABEL, &o.zone)
                            && requirements.allows(CAPACITY_TYPE_LABEL, &o.capacity_type)
                    })
                    .map(move |o| (o, it))
            })
            .collect();
        out.sort_by(|(a, _), (b, _)| {
            a.price
                .total_cmp(&b.price)
                .then_with(|| {
                    a.instance_type
                        .to_lowercase()
                        .cmp(&b.instance_type.to_lowercase())
                })
                .then_with(|| a.key().cmp(&b.key()))
        });
        out
    }
}

#[cfg(test)]
#[path = "instancetype_tests.rs"]
mod tests;
