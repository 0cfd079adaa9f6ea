//! Why a pod is pending: for one pod, where the round puts it, or, per NodePool, every reason
//! it cannot go there — the most specific first (a taint it does not tolerate, a label the
//! NodePool cannot give, what no instance type offers, a resource none has, then limits) —
//! each with a hint of what would change it, limits as arithmetic.
//!
//! The round's verdict (the scheduler's pod error) stays the authority on *whether* the pod
//! schedules: this only orders and phrases the reasons, judging each NodePool with the
//! scheduler's own primitives (its NodeClaim templates, requirement algebra, taint matching and
//! instance-type fit) over the same snapshot. Where it finds nothing against a NodePool the
//! scheduler refused (topology spread, host ports, reservations, `minValues`), the scheduler's
//! reason for that NodePool is kept. The controller, the simulator and `plan` can all call it.

use std::collections::BTreeSet;
use std::fmt;

use k8s_openapi::api::core::v1::{Pod, Taint};
use karpenter_api::labels::{CAPACITY_TYPE_LABEL, ZONE_LABEL};

use super::nodeclaim::NodeClaimTemplate;
use super::{
    NewNodeClaim, PodData, SchedulerOptions, has_dra_requirements, limits_as_requests, pod_data,
    preferences, without_reserved_offerings,
};
use crate::instancetype::{InstanceType, NodePoolInput};
use crate::resources::{Limits, NODES, PODS, Resources, format_milli};
use crate::round::{Provisioning, RoundPod};
use crate::scheduling::hostports;
use crate::scheduling::requirements::agree;
use crate::scheduling::{AllowUndefined, Incompatible, Requirement, Requirements, taints};
use crate::state::Snapshot;
use crate::state::pods::{self, ObservedPod};

/// What kind of reason keeps a pod off a NodePool, most specific first (the order reasons
/// are listed in).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReasonKind {
    /// A taint of the NodePool the pod does not tolerate.
    Taint,
    /// A label the pod requires that the NodePool does not set or does not allow.
    Requirement,
    /// Something the pod requires that no instance type of the NodePool offers (a zone, an
    /// architecture, an instance type), or no instance type at all.
    InstanceTypes,
    /// A resource no instance type has, or not as much as the pod asks.
    Resources,
    /// What the scheduler said, where nothing above explains it (topology spread, host ports,
    /// reservations, `minValues`).
    Other,
    /// The NodePool's limits.
    Limits,
}

impl ReasonKind {
    /// Its name in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            ReasonKind::Taint => "taint",
            ReasonKind::Requirement => "requirement",
            ReasonKind::InstanceTypes => "instance-types",
            ReasonKind::Resources => "resources",
            ReasonKind::Other => "other",
            ReasonKind::Limits => "limits",
        }
    }
}

/// A NodePool limit a launch would break, in thousandths (nodes too).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitArithmetic {
    /// The resource (`cpu`, `memory`, `nodes`, …).
    pub resource: String,
    /// What the NodePool's nodes already have (their capacity, as the scheduler counts it).
    pub in_use: i64,
    /// What this round's other NodeClaims from the NodePool take.
    pub this_round: i64,
    /// What the launch would add: the capacity of the smallest instance type that fits the
    /// pod (a node counts whole), or one node.
    pub requested: i64,
    /// The limit.
    pub limit: i64,
}

impl LimitArithmetic {
    /// The smallest limit that would let the launch through.
    pub fn needed(&self) -> i64 {
        self.in_use + self.this_round + self.requested
    }
}

impl fmt::Display for LimitArithmetic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let q = |v: i64| format_milli(&self.resource, v);
        write!(f, "{}: {} in use", self.resource, q(self.in_use))?;
        if self.this_round > 0 {
            write!(
                f,
                " + {} for this round's other NodeClaims",
                q(self.this_round)
            )?;
        }
        write!(
            f,
            " + {} requested > limit {}",
            q(self.requested),
            q(self.limit)
        )
    }
}

/// One reason a pod cannot go to a NodePool.
#[derive(Clone, Debug, PartialEq)]
pub struct Reason {
    /// Its kind (the order reasons are listed in).
    pub kind: ReasonKind,
    /// What stands in the way.
    pub message: String,
    /// What would remove it.
    pub hint: Option<String>,
    /// For a limit: the arithmetic.
    pub limit: Option<LimitArithmetic>,
}

impl Reason {
    fn new(kind: ReasonKind, message: String, hint: Option<String>) -> Self {
        Self {
            kind,
            message,
            hint,
            limit: None,
        }
    }
}

/// Why a pod cannot go to one NodePool: its reasons, most specific first (none: it fits
/// there on its own).
#[derive(Clone, Debug, PartialEq)]
pub struct NodePoolReasons {
    /// The NodePool.
    pub node_pool: String,
    /// The reasons, most specific first.
    pub reasons: Vec<Reason>,
}

/// Where the round leaves the pod.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// On a NodeClaim the round launches.
    NewNodeClaim {
        /// Its NodePool.
        node_pool: String,
        /// Its index in the round's `new_node_claims`.
        claim: usize,
    },
    /// On a node that exists or is launching.
    ExistingNode {
        /// The node.
        node: String,
    },
    /// Nowhere: it stays pending. `reason` is the scheduler's own.
    Pending {
        /// The scheduler's error for the pod.
        reason: String,
        /// It waits for reserved capacity held by this round's other NodeClaims.
        deferred: bool,
    },
    /// Provisioning does not place it (upstream's "ignoring pod" `FailedScheduling`).
    Ignored {
        /// Why.
        reason: String,
    },
    /// It is bound to a node already.
    Bound {
        /// The node.
        node: String,
    },
    /// It is not the round's to place (not yet tried by kube-scheduler, a DaemonSet pod,
    /// finished, …).
    NotConsidered {
        /// Why.
        reason: String,
    },
}

/// Why one pod is where the round leaves it.
#[derive(Clone, Debug, PartialEq)]
pub struct Explanation {
    /// The pod, as `namespace/name`.
    pub pod: String,
    /// What it asks for (with `pods: 1`).
    pub requests: Resources,
    /// Where the round leaves it.
    pub outcome: Outcome,
    /// For a pending pod: per NodePool, why not — the NodePool closest to taking it (fewest
    /// reasons) first, ties in the order the scheduler tries them.
    pub node_pools: Vec<NodePoolReasons>,
    /// For a pending pod: what would make it schedulable, on the NodePool closest to taking it.
    pub hint: Option<String>,
}

impl Explanation {
    /// Whether the pod would stay pending: the round places it nowhere, or provisioning
    /// ignores it.
    pub fn pending(&self) -> bool {
        matches!(
            self.outcome,
            Outcome::Pending { .. } | Outcome::Ignored { .. }
        )
    }
}

/// Explains pod `key` (`namespace/name`) as the round `provisioning` decided over `snapshot`
/// (`options` as the round took them). `None` when the snapshot has no such pod.
pub fn explain_pod<'a, P: ObservedPod>(
    snapshot: &Snapshot<'a, P>,
    provisioning: Option<&Provisioning<'a, P>>,
    options: &SchedulerOptions,
    key: &str,
) -> Option<Explanation> {
    if let Some(p) = provisioning {
        let found = p
            .batch
            .iter()
            .position(|pod| matches!(pod, RoundPod::Real(_)) && pods::key(pod) == key);
        if let Some(i) = found {
            let pod = &p.batch[i];
            let outcome = verdict(p, i);
            return Some(explain(
                snapshot,
                pod,
                outcome,
                options,
                &p.results.new_node_claims,
            ));
        }
    }
    let requests = |pod: &dyn ObservedPod| pod.requests().unwrap_or_default();
    if let Some((pod, reason)) = snapshot.rejected.iter().find(|(p, _)| pods::key(*p) == key) {
        return Some(Explanation {
            pod: key.to_string(),
            requests: requests(*pod),
            outcome: Outcome::Ignored {
                reason: reason.clone(),
            },
            node_pools: Vec::new(),
            hint: None,
        });
    }
    let not_considered = |pod: &dyn ObservedPod, reason: String| Explanation {
        pod: key.to_string(),
        requests: requests(pod),
        outcome: Outcome::NotConsidered { reason },
        node_pools: Vec::new(),
        hint: None,
    };
    if let Some(pod) = snapshot.displaced.iter().find(|p| pods::key(**p) == key) {
        return Some(not_considered(
            *pod,
            "its node is being deleted; it stays until a PodDisruptionBudget or do-not-disrupt lets it leave".into(),
        ));
    }
    for node in &snapshot.nodes {
        if let Some(pod) = node.pods.iter().find(|p| pods::key(**p) == key) {
            return Some(Explanation {
                pod: key.to_string(),
                requests: requests(*pod),
                outcome: Outcome::Bound {
                    node: node.name().to_string(),
                },
                node_pools: Vec::new(),
                hint: None,
            });
        }
    }
    let pod = snapshot
        .observed
        .pods
        .iter()
        .find(|p| pods::key(**p) == key)?;
    Some(not_considered(*pod, why_not_considered(*pod)))
}

/// Where the round put batch entry `i`.
fn verdict<P: ObservedPod>(p: &Provisioning<'_, P>, i: usize) -> Outcome {
    if let Some(reason) = p.results.pod_errors.get(&i) {
        return Outcome::Pending {
            reason: reason.clone(),
            deferred: p.results.deferred.contains(&i),
        };
    }
    if let Some((c, claim)) = p
        .results
        .new_node_claims
        .iter()
        .enumerate()
        .find(|(_, c)| c.pods.contains(&i))
    {
        return Outcome::NewNodeClaim {
            node_pool: claim.node_pool.clone(),
            claim: c,
        };
    }
    if let Some((node, _)) = p
        .results
        .existing_nodes
        .iter()
        .find(|(_, pods)| pods.contains(&i))
    {
        return Outcome::ExistingNode { node: node.clone() };
    }
    Outcome::Pending {
        reason: "the round stopped before it was tried (its time budget ran out)".into(),
        deferred: false,
    }
}

/// Why a pod of the cluster is not among those provisioning places.
fn why_not_considered(pod: &dyn ObservedPod) -> String {
    let meta = pod.meta();
    if meta.deletion_timestamp.is_some() {
        return "it is being deleted".into();
    }
    if pods::is_terminal(pod) {
        return format!("it has finished ({})", pod.phase().unwrap_or_default());
    }
    if let Some(node) = pod.node_name() {
        return format!("it is bound to node {node}, which the snapshot does not hold");
    }
    if meta
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "DaemonSet")
    {
        return "it is a DaemonSet pod: the DaemonSet controller places it, on every node it fits"
            .into();
    }
    if let Some(node) = pod.nominated_node_name() {
        return format!("kube-scheduler nominated it for node {node} (preemption)");
    }
    if !pod.unschedulable() {
        return "kube-scheduler has not marked it Unschedulable (PodScheduled=False, reason Unschedulable) yet: karpenter only provisions for pods kube-scheduler could not place".into();
    }
    "it keeps off karpenter's nodes (karpenter.sh/nodepool DoesNotExist)".into()
}

/// Explains `pod` given where the round left it: for a pending pod, each NodePool's reasons
/// (see [`node_pool_reasons`]), completed with the scheduler's own where they find nothing.
/// `this_round` are the NodeClaims the round launches (they count against limits).
pub fn explain<P: ObservedPod>(
    snapshot: &Snapshot<'_, P>,
    pod: &dyn ObservedPod,
    outcome: Outcome,
    options: &SchedulerOptions,
    this_round: &[NewNodeClaim],
) -> Explanation {
    let mut explanation = Explanation {
        pod: pods::key(pod),
        requests: pod.requests().unwrap_or_default(),
        outcome,
        node_pools: Vec::new(),
        hint: None,
    };
    let Outcome::Pending { reason, .. } = &explanation.outcome else {
        return explanation;
    };
    let said = scheduler_reasons(reason);
    if said.is_empty() {
        // A reason about the pod itself (no NodePools, devices, a bad quantity, minValues).
        return explanation;
    }
    let mut judged = node_pool_reasons(snapshot, pod, options, this_round);
    for pool in &mut judged {
        if pool.reasons.is_empty()
            && let Some((_, r)) = said.iter().find(|(name, _)| *name == pool.node_pool)
        {
            pool.reasons.push(Reason::new(classify(r), r.clone(), None));
        }
    }
    // Closest to taking the pod first; the scheduler's order among equals (a stable sort).
    judged.sort_by_key(|p| p.reasons.len());
    explanation.hint = judged.first().and_then(|p| {
        let hints: Vec<&str> = p.reasons.iter().filter_map(|r| r.hint.as_deref()).collect();
        (!hints.is_empty()).then(|| format!("nodepool {}: {}", p.node_pool, hints.join("; ")))
    });
    explanation.node_pools = judged;
    explanation
}

/// The scheduler's reasons per NodePool in a pod error (`nodepool "a": …; nodepool "b": …`);
/// empty when the error is about the pod itself.
pub fn scheduler_reasons(error: &str) -> Vec<(String, String)> {
    const START: &str = "nodepool \"";
    let Some(rest) = error.strip_prefix(START) else {
        return Vec::new();
    };
    rest.split("; nodepool \"")
        .filter_map(|segment| {
            let (name, reason) = segment.split_once("\": ")?;
            Some((name.to_string(), reason.to_string()))
        })
        .collect()
}

/// The kind of a reason as the scheduler words it.
fn classify(reason: &str) -> ReasonKind {
    if reason.contains("exceed limits") || reason.contains("limits have been exhausted") {
        ReasonKind::Limits
    } else if reason.starts_with("did not tolerate taint") {
        ReasonKind::Taint
    } else if reason.starts_with("incompatible requirements") {
        ReasonKind::Requirement
    } else if reason.contains("no instance type has enough resources") {
        ReasonKind::Resources
    } else if reason.contains("no instance type met") || reason.contains("filtered out all") {
        ReasonKind::InstanceTypes
    } else {
        ReasonKind::Other
    }
}

/// The NodePools the scheduler launches from, prepared as it prepares them (the same
/// templates, DaemonSet overhead and order: heaviest first, ties by name in reverse), each
/// with its input.
fn templates<'p, P: ObservedPod>(
    snapshot: &Snapshot<'_, P>,
    options: &SchedulerOptions,
    inputs: &'p [NodePoolInput],
) -> Vec<(&'p NodePoolInput, NodeClaimTemplate)> {
    let daemons: Vec<(Pod, PodData)> = snapshot
        .daemonset_pods()
        .iter()
        .filter(|p| !has_dra_requirements(p.spec.as_ref()))
        .map(limits_as_requests)
        .filter_map(|p| PodData::new(&p, false).ok().map(|d| (p, d)))
        .collect();
    let mut pools: Vec<&NodePoolInput> = inputs
        .iter()
        .filter(|p| p.node_pool.spec.replicas.is_none())
        .collect();
    pools.sort_by(|a, b| {
        b.node_pool
            .weight()
            .cmp(&a.node_pool.weight())
            .then_with(|| b.node_pool.name().cmp(a.node_pool.name()))
    });
    pools
        .into_iter()
        .map(|p| {
            let t = NodeClaimTemplate::new(
                &p.node_pool,
                &p.instance_types,
                &daemons,
                &options.provider_labels,
            );
            (p, t)
        })
        .collect()
}

/// The pod's strict requirements (preferences relaxed away, its volumes' requirements added)
/// for each of its required node-affinity terms in turn (they are OR-ed), as the scheduler
/// relaxes them.
fn term_variants(pod: &dyn ObservedPod, options: &SchedulerOptions) -> Vec<PodData> {
    let strict = SchedulerOptions {
        respect_preferences: false,
        ..options.clone()
    };
    let mut variants = Vec::new();
    let Ok(first) = pod_data(pod, &strict) else {
        return variants;
    };
    variants.push(first);
    let mut relaxed = pod.to_pod();
    while preferences::relax(&mut relaxed, false) == Some("required node affinity term") {
        if let Ok(d) = pod_data(&relaxed, &strict) {
            variants.push(d);
        }
    }
    variants
}

/// For each NodePool the scheduler launches from, in the order it tries them: every reason
/// `pod` cannot go to a new NodeClaim of it on its own, most specific first (none: it would).
/// `this_round` are NodeClaims already decided, which count against limits.
pub fn node_pool_reasons<P: ObservedPod>(
    snapshot: &Snapshot<'_, P>,
    pod: &dyn ObservedPod,
    options: &SchedulerOptions,
    this_round: &[NewNodeClaim],
) -> Vec<NodePoolReasons> {
    let options = snapshot.scheduler_options(&SchedulerOptions {
        provider_labels: if options.provider_labels.is_empty() {
            snapshot.provider_labels().to_vec()
        } else {
            options.provider_labels.clone()
        },
        ..options.clone()
    });
    let variants = term_variants(pod, &options);
    // Without the `ReservedCapacity` gate the scheduler drops reserved offerings.
    let unreserved: Vec<NodePoolInput>;
    let inputs = if options.reserved_capacity {
        snapshot.node_pools()
    } else {
        unreserved = without_reserved_offerings(snapshot.node_pools());
        &unreserved
    };
    let prepared = templates(snapshot, &options, inputs);
    let existing = snapshot.existing_nodes();
    prepared
        .iter()
        .map(|(input, template)| {
            let usage = Usage::of(template, &existing, this_round);
            // The term that leaves the fewest reasons (the first among equals).
            let reasons = variants
                .iter()
                .map(|data| judge(input, template, data, &usage))
                .min_by_key(Vec::len)
                .unwrap_or_default();
            NodePoolReasons {
                node_pool: template.node_pool.clone(),
                reasons,
            }
        })
        .collect()
}

/// What a NodePool's nodes count against its limits, as the scheduler counts it.
struct Usage {
    in_use: Resources,
    nodes: i64,
    this_round: Resources,
    round_nodes: i64,
}

impl Usage {
    fn of(
        template: &NodeClaimTemplate,
        existing: &[super::ExistingNodeInput],
        this_round: &[NewNodeClaim],
    ) -> Self {
        let mut usage = Usage {
            in_use: Resources::new(),
            nodes: 0,
            this_round: Resources::new(),
            round_nodes: 0,
        };
        for n in existing
            .iter()
            .filter(|n| n.node_pool.as_deref() == Some(template.node_pool.as_str()))
        {
            usage.in_use.add(&n.capacity);
            usage.nodes += 1000;
        }
        for claim in this_round
            .iter()
            .filter(|c| c.node_pool == template.node_pool)
        {
            // The scheduler counts the largest type a claim might become.
            let mut largest = Resources::new();
            for it in &claim.instance_types {
                largest.max_with(&it.capacity);
            }
            usage.this_round.add(&largest);
            usage.round_nodes += 1000;
        }
        usage
    }
}

/// `name: quantity` for each resource the pod asks for (but `pods`).
fn show(resources: &Resources, names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("{n}: {}", format_milli(n, resources.get(n))))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A toleration as a pod spec would take it.
fn toleration_for(taint: &Taint) -> String {
    match taint.value.as_deref().filter(|v| !v.is_empty()) {
        Some(v) => format!(
            "{{key: {}, operator: Equal, value: \"{v}\", effect: {}}}",
            taint.key, taint.effect
        ),
        None => format!(
            "{{key: {}, operator: Exists, effect: {}}}",
            taint.key, taint.effect
        ),
    }
}

/// Up to `n` values, and how many more.
fn some_of<'v>(values: impl IntoIterator<Item = &'v str>, n: usize) -> String {
    let all: Vec<&str> = values.into_iter().collect();
    let shown = all.iter().take(n).copied().collect::<Vec<_>>().join(", ");
    if all.len() > n {
        format!("[{shown} and {} more]", all.len() - n)
    } else {
        format!("[{shown}]")
    }
}

/// The values of `key` the template's instance types offer within its requirements (zones and
/// capacity types from their available offerings).
fn offered(template: &NodeClaimTemplate, key: &str) -> BTreeSet<String> {
    let mut values = BTreeSet::new();
    for it in &template.instance_types {
        if key == ZONE_LABEL || key == CAPACITY_TYPE_LABEL {
            for o in it.compatible_offerings(&template.requirements) {
                values.insert(if key == ZONE_LABEL {
                    o.zone.clone()
                } else {
                    o.capacity_type.clone()
                });
            }
        } else if let Some(own) = it.requirements.get(key)
            && own.operator() == karpenter_api::Operator::In
        {
            values.extend(
                own.values()
                    .filter(|v| template.requirements.allows(key, v))
                    .map(str::to_string),
            );
        }
    }
    values
}

/// Whether instance type `i` of the template agrees with every one of `requirements` and has
/// an available offering they allow, as the scheduler judges a type for a claim.
fn type_agrees(
    template: &NodeClaimTemplate,
    i: usize,
    requirements: &[&Requirement],
    allowed: u128,
) -> bool {
    requirements.iter().all(|r| {
        let bits = template.agreeing(r);
        bits[i / 64] & (1 << (i % 64)) != 0
    }) && template.offering_masks[i] & allowed != 0
}

/// Every reason `data` cannot open a NodeClaim of `template` (from `input`), most specific
/// first.
fn judge(
    input: &NodePoolInput,
    template: &NodeClaimTemplate,
    data: &PodData,
    usage: &Usage,
) -> Vec<Reason> {
    let mut reasons = Vec::new();
    // 1. Taints (PreferNoSchedule is relaxed away).
    for taint in template
        .taints
        .iter()
        .filter(|t| t.effect != "PreferNoSchedule")
    {
        if taints::first_untolerated(std::slice::from_ref(taint), &data.tolerations).is_some() {
            reasons.push(Reason::new(
                ReasonKind::Taint,
                format!(
                    "the pod does not tolerate its taint {}",
                    taints::describe(taint)
                ),
                Some(format!(
                    "add the toleration {} to the pod",
                    toleration_for(taint)
                )),
            ));
        }
    }
    // 2. Labels: each of the pod's requirements against the NodePool's, one at a time.
    let allow = AllowUndefined::WellKnownLabels(&template.provider_labels);
    let mut met: Vec<&Requirement> = Vec::new();
    for r in data.requirements.iter() {
        let single = Requirements::from_iter([r.clone()]);
        match template.requirements.compatible(&single, allow) {
            Ok(()) => met.push(r),
            Err(Incompatible::Undefined(key)) => {
                let value = match r.operator() {
                    karpenter_api::Operator::In => r.any().unwrap_or_default(),
                    _ => "VALUE".into(),
                };
                reasons.push(Reason::new(
                    ReasonKind::Requirement,
                    format!("the pod requires {r}; the NodePool does not set label {key}"),
                    Some(format!(
                        "add the label `{key}: {value}` to the NodePool's spec.template.metadata.labels (or a requirement on {key} allowing it)"
                    )),
                ));
            }
            Err(Incompatible::NoIntersection { key, .. }) => {
                let allows = template
                    .requirements
                    .get(&key)
                    .map_or_else(String::new, ToString::to_string);
                let hint = if key == ZONE_LABEL {
                    let zones = offered(template, ZONE_LABEL);
                    format!(
                        "the NodePool allows zones {}: require one of them, or add the pod's to the NodePool's requirement",
                        some_of(zones.iter().map(String::as_str), 10)
                    )
                } else {
                    format!(
                        "require what the NodePool allows ({allows}), or widen the NodePool's requirement on {key}"
                    )
                };
                reasons.push(Reason::new(
                    ReasonKind::Requirement,
                    format!("the pod requires {r}; the NodePool allows {allows}"),
                    Some(hint),
                ));
            }
        }
    }
    let requested: Vec<&str> = data
        .requests
        .iter()
        .map(|(n, _)| n)
        .filter(|n| *n != PODS)
        .collect();
    // 3. Instance types: those the pod's (met) requirements leave.
    let mut merged = template.requirements.clone();
    for r in &met {
        merged.add((*r).clone());
    }
    let allowed = template.offerings.allowed(&merged);
    let compatible: Vec<usize> = (0..template.instance_types.len())
        .filter(|&i| type_agrees(template, i, &met, allowed))
        .filter(|&i| {
            hostports::first_conflict(&data.host_ports, &template.daemon_host_ports[i]).is_none()
        })
        .collect();
    let mut fitting: Vec<usize> = Vec::new();
    if template.instance_types.is_empty() {
        reasons.push(Reason::new(
            ReasonKind::InstanceTypes,
            format!(
                "the NodePool's requirements leave none of the provider's {} instance types (or DaemonSets fill them all)",
                input.instance_types.len()
            ),
            Some(format!(
                "widen the NodePool's requirements ({})",
                template.requirements
            )),
        ));
    } else if compatible.is_empty() {
        reasons.push(no_type_offers(template, &met));
    } else {
        fitting = compatible
            .iter()
            .copied()
            .filter(|&i| {
                data.requests.fits_with(
                    &template.daemon_overhead[i],
                    template.instance_types[i].allocatable(),
                )
            })
            .collect();
        if fitting.is_empty() {
            reasons.push(too_big(
                input,
                template,
                data,
                &met,
                &compatible,
                &requested,
            ));
        }
    }
    // 4. Limits, on the smallest type that would take the pod (any type, when none would).
    if let Some(reason) = limits(input, template, usage, &fitting, &compatible) {
        reasons.push(reason);
    }
    reasons.sort_by_key(|r| r.kind);
    reasons
}

/// Why no instance type of the template takes requirements `met` (each met by the NodePool).
fn no_type_offers(template: &NodeClaimTemplate, met: &[&Requirement]) -> Reason {
    for r in met {
        let mut with = template.requirements.clone();
        with.add((*r).clone());
        let allowed = template.offerings.allowed(&with);
        let any =
            (0..template.instance_types.len()).any(|i| type_agrees(template, i, &[r], allowed));
        if !any {
            let values = offered(template, r.key());
            let what = if r.key() == ZONE_LABEL {
                "the NodePool allows zones"
            } else if r.key() == CAPACITY_TYPE_LABEL {
                "the NodePool allows capacity types"
            } else {
                "its instance types offer"
            };
            return Reason::new(
                ReasonKind::InstanceTypes,
                format!("the pod requires {r}; no instance type of the NodePool offers it"),
                Some(format!(
                    "{what} {}: require one of them",
                    some_of(values.iter().map(String::as_str), 10)
                )),
            );
        }
    }
    let shown: Vec<String> = met.iter().map(ToString::to_string).collect();
    Reason::new(
        ReasonKind::InstanceTypes,
        format!(
            "no instance type of the NodePool offers all the pod requires together ({})",
            shown.join(", ")
        ),
        Some("relax one of these requirements".into()),
    )
}

/// Why no instance type the pod may have is big enough: the resources it asks more of than
/// any has, and the largest one's size against its requests.
fn too_big(
    input: &NodePoolInput,
    template: &NodeClaimTemplate,
    data: &PodData,
    met: &[&Requirement],
    compatible: &[usize],
    requested: &[&str],
) -> Reason {
    let room = |i: usize, n: &str| {
        template.instance_types[i].allocatable().get(n) - template.daemon_overhead[i].get(n)
    };
    // What the pod asks more of than any type has.
    let short: Vec<(&str, i64)> = requested
        .iter()
        .filter_map(|&n| {
            let most = compatible.iter().map(|&i| room(i, n)).max().unwrap_or(0);
            (data.requests.get(n) > most).then_some((n, most))
        })
        .collect();
    // A type of the provider that would hold it, kept out by the NodePool.
    let elsewhere = input
        .instance_types
        .iter()
        .filter(|it| data.requests.fits(it.allocatable()))
        .filter(|it| {
            met.iter()
                .all(|r| it.requirements.get(r.key()).is_none_or(|own| agree(own, r)))
        })
        .min_by(|a, b| {
            let price =
                |it: &InstanceType| it.cheapest_price(&Requirements::new()).unwrap_or(f64::MAX);
            price(a).total_cmp(&price(b))
        });
    let elsewhere_hint = elsewhere.map(|it| {
        let why = match template.requirements.intersects(&it.requirements) {
            Err(Incompatible::NoIntersection { key, .. }) => format!(
                "the NodePool's requirement {} excludes it",
                template
                    .requirements
                    .get(&key)
                    .map_or_else(|| key.clone(), ToString::to_string)
            ),
            _ => "the NodePool leaves it out (no available offering it allows, or DaemonSets fill it)".into(),
        };
        format!(
            "the provider's {} ({}) would hold it, but {why}",
            it.name,
            show(it.allocatable(), requested)
        )
    });
    if let Some(&(name, _)) = short.iter().find(|(_, most)| *most <= 0) {
        let hint = elsewhere_hint.unwrap_or_else(|| {
            format!("no instance type of the provider has {name}: use a NodePool of a provider (or instance types) that has it")
        });
        return Reason::new(
            ReasonKind::Resources,
            format!(
                "no instance type the NodePool allows has {name} (the pod asks {})",
                show(&data.requests, &[name])
            ),
            Some(hint),
        );
    }
    // The largest type: most of the first resource it lacks (cpu when it lacks none alone).
    let key = short.first().map_or("cpu", |(n, _)| *n);
    let largest = compatible
        .iter()
        .copied()
        .max_by_key(|&i| (room(i, key), room(i, "cpu"), room(i, "memory")))
        .unwrap_or(compatible[0]);
    let it = &template.instance_types[largest];
    let mut has = it.allocatable().clone();
    has.sub(&template.daemon_overhead[largest]);
    let message = if short.is_empty() {
        format!(
            "no instance type has all the pod asks at once ({}); the largest, {}, has {} after DaemonSets",
            show(&data.requests, requested),
            it.name,
            show(&has, requested)
        )
    } else {
        let names: Vec<&str> = short.iter().map(|(n, _)| *n).collect();
        format!(
            "no instance type the NodePool allows has enough {}: the pod asks {}; the largest, {}, has {} after DaemonSets",
            names.join(" and "),
            show(&data.requests, &names),
            it.name,
            show(&has, &names)
        )
    };
    let hint = match elsewhere_hint {
        Some(h) => h,
        None => format!(
            "lower the pod's requests to fit {} ({}), or give it a NodePool with larger instance types",
            it.name,
            show(&has, requested)
        ),
    };
    Reason::new(ReasonKind::Resources, message, Some(hint))
}

/// The limit a launch for the pod would break: `nodes`, or a resource on every type that would
/// take it (`fitting`; else those its requirements allow, else any), shown on the smallest.
fn limits(
    input: &NodePoolInput,
    template: &NodeClaimTemplate,
    usage: &Usage,
    fitting: &[usize],
    compatible: &[usize],
) -> Option<Reason> {
    let spec = input.node_pool.spec.limits.as_ref()?;
    let limits = Limits::from_list(spec).ok()?;
    let name = &template.node_pool;
    if let Some(limit) = limits.get(NODES)
        && usage.nodes + usage.round_nodes + 1000 > limit
    {
        let arithmetic = LimitArithmetic {
            resource: NODES.into(),
            in_use: usage.nodes,
            this_round: usage.round_nodes,
            requested: 1000,
            limit,
        };
        return Some(limit_reason(name, arithmetic));
    }
    let all: Vec<usize> = (0..template.instance_types.len()).collect();
    let candidates = [fitting, compatible, &all]
        .into_iter()
        .find(|c| !c.is_empty())?;
    let mut best: Option<LimitArithmetic> = None;
    for &i in candidates {
        let capacity = &template.instance_types[i].capacity;
        let exceeded = spec.keys().filter(|n| n.as_str() != NODES).find_map(|n| {
            let limit = limits.get(n)?;
            let a = LimitArithmetic {
                resource: n.clone(),
                in_use: usage.in_use.get(n),
                this_round: usage.this_round.get(n),
                requested: capacity.get(n),
                limit,
            };
            (a.needed() > limit).then_some(a)
        });
        match exceeded {
            // A type within every limit: the limits let the launch through.
            None => return None,
            Some(a) => {
                if best
                    .as_ref()
                    .is_none_or(|b| a.needed() - a.limit < b.needed() - b.limit)
                {
                    best = Some(a);
                }
            }
        }
    }
    best.map(|a| limit_reason(name, a))
}

fn limit_reason(node_pool: &str, arithmetic: LimitArithmetic) -> Reason {
    let hint = format!(
        "raise nodepool {node_pool}'s spec.limits.{} to at least {} (or free that much of its capacity)",
        arithmetic.resource,
        format_milli(&arithmetic.resource, arithmetic.needed())
    );
    Reason {
        kind: ReasonKind::Limits,
        message: arithmetic.to_string(),
        hint: Some(hint),
        limit: Some(arithmetic),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::{Node, Pod};
    use karpenter_api::NodePool;
    use serde_json::{Value, json};

    use super::*;
    use crate::feature_gates::FeatureGates;
    use crate::instancetype::fake::{FakeInstanceType, GPU_VENDOR_A};
    use crate::round::{BufferHolding, Parts, RoundInputs, decide};
    use crate::state::Observed;

    fn merge(into: &mut Value, from: Value) {
        match (into, from) {
            (Value::Object(a), Value::Object(b)) => {
                for (k, v) in b {
                    merge(a.entry(k).or_insert(Value::Null), v);
                }
            }
            (slot, v) => *slot = v,
        }
    }

    fn pool(name: &str, extra: Value) -> NodePool {
        let mut v = json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.test.sh", "kind": "TestNodeClass", "name": "default"},
                "requirements": []}}}
        });
        merge(&mut v, extra);
        serde_json::from_value(v).unwrap()
    }

    /// A pending pod kube-scheduler marked Unschedulable, asking for `cpu`.
    fn pending(name: &str, cpu: &str, extra: Value) -> Pod {
        let mut v = json!({
            "metadata": {"name": name, "namespace": "default", "creationTimestamp": "2025-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
        });
        merge(&mut v, extra);
        serde_json::from_value(v).unwrap()
    }

    /// A full node of NodePool `pool` with capacity `cpu` (it takes no pod; it counts against
    /// the NodePool's limits).
    fn full_node(name: &str, pool: &str, cpu: &str) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": pool,
                "karpenter.sh/initialized": "true", "kubernetes.io/hostname": name}},
            "spec": {"providerID": format!("fake://{name}")},
            "status": {"capacity": {"cpu": cpu, "memory": "8Gi", "pods": "10"},
                "allocatable": {"cpu": "0", "memory": "0", "pods": "10"},
                "conditions": [{"type": "Ready", "status": "True"}]}
        }))
        .unwrap()
    }

    /// `small` (4 cpu), `large` (16 cpu) and `gpu` (8 cpu, two vendor-a GPUs).
    fn types() -> Vec<Arc<InstanceType>> {
        [
            FakeInstanceType::new("small").resources(&[("cpu", "4"), ("memory", "8Gi")]),
            FakeInstanceType::new("large").resources(&[("cpu", "16"), ("memory", "32Gi")]),
            FakeInstanceType::new("gpu").resources(&[
                ("cpu", "8"),
                ("memory", "16Gi"),
                (GPU_VENDOR_A, "2"),
            ]),
        ]
        .into_iter()
        .map(|t| Arc::new(t.build()))
        .collect()
    }

    /// Explains `key` after one round over `pools`, `nodes` and `pods`.
    fn explained(pools: Vec<NodePool>, nodes: Vec<Node>, pods: Vec<Pod>, key: &str) -> Explanation {
        let inputs: Vec<NodePoolInput> = pools
            .into_iter()
            .map(|node_pool| NodePoolInput {
                node_pool,
                instance_types: types(),
            })
            .collect();
        let snapshot = Snapshot::new(Observed {
            nodes: nodes.iter().collect(),
            node_claims: Vec::new(),
            pods: pods.iter().collect(),
            daemonsets: Vec::new(),
            pdbs: Vec::new(),
            namespaces: Vec::new(),
            volume_claims: Vec::new(),
            volumes: Vec::new(),
            storage_classes: Vec::new(),
            csi_nodes: Vec::new(),
            services: Vec::new(),
            pod_controllers: Vec::new(),
            node_pools: &inputs,
            provider_labels: &[],
            nominated: BTreeSet::new(),
            devices: Default::default(),
            marked_for_deletion: BTreeSet::new(),
        });
        let options = SchedulerOptions::default();
        let never = || false;
        let round = decide(
            &snapshot,
            &RoundInputs {
                gates: FeatureGates::default(),
                now: "2025-01-01T12:00:00Z".parse().unwrap(),
                options: &options,
                virtual_pods: &[],
                buffer_holding: BufferHolding::Unknown,
                repair_policies: &[],
                parts: Parts {
                    provisioning: true,
                    ..Parts::NONE
                },
                interrupt: &never,
            },
        );
        explain_pod(&snapshot, round.provisioning.as_ref(), &options, key)
            .unwrap_or_else(|| panic!("{key} not found"))
    }

    fn tainted(name: &str, key: &str, value: &str) -> NodePool {
        pool(
            name,
            json!({"spec": {"template": {"spec": {"taints": [
                {"key": key, "value": value, "effect": "NoSchedule"}]}}}}),
        )
    }

    fn limited(name: &str, cpu: &str) -> NodePool {
        pool(name, json!({"spec": {"limits": {"cpu": cpu}}}))
    }

    /// One NodePool's reasons: (kind, a fragment of the message, a fragment of the hint).
    type Want = &'static [(ReasonKind, &'static str, &'static str)];

    /// A case: its name, the NodePools, the nodes, the pod and what its NodePool's reasons are.
    type Case = (&'static str, Vec<NodePool>, Vec<Node>, Pod, Want);

    /// Each single reason, with its message and hint.
    #[test]
    fn each_reason_with_its_hint() {
        use ReasonKind::*;
        let ml = || json!({"spec": {"nodeSelector": {"team": "ml"}}});
        let cases: Vec<Case> = vec![
            (
                "a taint it does not tolerate",
                vec![tainted("default", "dedicated", "gpu")],
                vec![],
                pending("p", "1", json!({})),
                &[(
                    Taint,
                    "does not tolerate its taint dedicated=gpu:NoSchedule",
                    "add the toleration {key: dedicated, operator: Equal, value: \"gpu\", effect: NoSchedule}",
                )],
            ),
            (
                "a label the NodePool does not set",
                vec![pool("default", json!({}))],
                vec![],
                pending("p", "1", ml()),
                &[(
                    Requirement,
                    "requires team In [ml]; the NodePool does not set label team",
                    "add the label `team: ml` to the NodePool's spec.template.metadata.labels",
                )],
            ),
            (
                "of OR-ed node-affinity terms, the one closest to fitting",
                vec![tainted("default", "dedicated", "gpu")],
                vec![],
                pending(
                    "p",
                    "1",
                    json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "team", "operator": "In", "values": ["ml"]}]},
                        {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test-zone-1"]}]},
                    ]}}}}}),
                ),
                &[(Taint, "dedicated=gpu:NoSchedule", "add the toleration")],
            ),
            (
                "a label value the NodePool does not allow",
                vec![pool(
                    "default",
                    json!({"spec": {"template": {"metadata": {"labels": {"team": "web"}}}}}),
                )],
                vec![],
                pending("p", "1", ml()),
                &[(
                    Requirement,
                    "requires team In [ml]; the NodePool allows team In [web]",
                    "widen the NodePool's requirement on team",
                )],
            ),
            (
                "a zone the NodePool does not allow names the zones it does",
                vec![pool(
                    "default",
                    json!({"spec": {"template": {"spec": {"requirements": [
                        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test-zone-1", "test-zone-2"]}]}}}}),
                )],
                vec![],
                pending(
                    "p",
                    "1",
                    json!({"spec": {"nodeSelector": {"topology.kubernetes.io/zone": "test-zone-3"}}}),
                ),
                &[(
                    Requirement,
                    "the NodePool allows topology.kubernetes.io/zone In [test-zone-1 test-zone-2]",
                    "the NodePool allows zones [test-zone-1, test-zone-2]",
                )],
            ),
            (
                "a zone no instance type offers",
                vec![pool("default", json!({}))],
                vec![],
                pending(
                    "p",
                    "1",
                    json!({"spec": {"nodeSelector": {"topology.kubernetes.io/zone": "test-zone-9"}}}),
                ),
                &[(
                    InstanceTypes,
                    "no instance type of the NodePool offers it",
                    "the NodePool allows zones [test-zone-1, test-zone-2, test-zone-3]",
                )],
            ),
            (
                "a pod bigger than the largest type",
                vec![pool("default", json!({}))],
                vec![],
                pending("p", "100", json!({})),
                &[(
                    Resources,
                    "has enough cpu: the pod asks cpu: 100; the largest, large, has cpu: 15900m",
                    "lower the pod's requests to fit large",
                )],
            ),
            (
                "a resource only types the NodePool excludes have",
                vec![pool(
                    "default",
                    json!({"spec": {"template": {"spec": {"requirements": [
                        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["small", "large"]}]}}}}),
                )],
                vec![],
                pending(
                    "p",
                    "1",
                    json!({"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", GPU_VENDOR_A: "1"}}}]}}),
                ),
                &[(
                    Resources,
                    "no instance type the NodePool allows has fake.com/vendor-a",
                    "the provider's gpu (cpu: 7900m, fake.com/vendor-a: 2) would hold it, but the NodePool's requirement node.kubernetes.io/instance-type In [large small] excludes it",
                )],
            ),
            (
                "a limit, as arithmetic",
                vec![limited("default", "10")],
                vec![full_node("n1", "default", "8")],
                pending("p", "1", json!({})),
                &[(
                    Limits,
                    "cpu: 8 in use + 4 requested > limit 10",
                    "raise nodepool default's spec.limits.cpu to at least 12",
                )],
            ),
            (
                "a node limit",
                vec![pool("default", json!({"spec": {"limits": {"nodes": "1"}}}))],
                vec![full_node("n1", "default", "8")],
                pending("p", "1", json!({})),
                &[(
                    Limits,
                    "nodes: 1 in use + 1 requested > limit 1",
                    "spec.limits.nodes to at least 2",
                )],
            ),
        ];
        for (case, pools, nodes, pod, want) in cases {
            let e = explained(pools, nodes, vec![pod], "default/p");
            assert!(e.pending(), "{case}: {e:#?}");
            assert_eq!(e.node_pools.len(), 1, "{case}: {e:#?}");
            let got = &e.node_pools[0].reasons;
            assert_eq!(got.len(), want.len(), "{case}: {got:#?}");
            for (r, (kind, message, hint)) in got.iter().zip(want.iter()) {
                assert_eq!(r.kind, *kind, "{case}: {r:#?}");
                assert!(
                    r.message.contains(message),
                    "{case}: message {:?}",
                    r.message
                );
                let h = r.hint.as_deref().unwrap_or_default();
                assert!(h.contains(hint), "{case}: hint {h:?}");
            }
            assert!(
                e.hint
                    .as_deref()
                    .is_some_and(|h| h.starts_with("nodepool default: ")),
                "{case}: {:?}",
                e.hint
            );
        }
    }

    /// Several reasons on one NodePool come most specific first; the NodePool closest to
    /// taking the pod leads, not the heavier one whose limit the scheduler names first.
    #[test]
    fn the_most_specific_reason_and_the_closest_node_pool_lead() {
        let big = pool(
            "big",
            json!({"spec": {"weight": 50, "limits": {"cpu": "8"}, "template": {"spec": {
                "taints": [{"key": "batch", "effect": "NoSchedule"}]}}}}),
        );
        let ml = pool(
            "ml",
            json!({"spec": {"template": {"metadata": {"labels": {"team": "ml"}}, "spec": {
                "taints": [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]}}}}),
        );
        let pod = pending("p", "1", json!({"spec": {"nodeSelector": {"team": "ml"}}}));
        let e = explained(
            vec![big, ml],
            vec![full_node("n1", "big", "8")],
            vec![pod],
            "default/p",
        );
        let Outcome::Pending { reason, .. } = &e.outcome else {
            panic!("not pending: {e:#?}");
        };
        assert!(
            reason.starts_with("nodepool \"big\": all available instance types exceed limits"),
            "the scheduler names the heavier NodePool's limit first: {reason}"
        );
        let order: Vec<&str> = e.node_pools.iter().map(|p| p.node_pool.as_str()).collect();
        assert_eq!(order, ["ml", "big"], "the closest NodePool leads");
        let kinds: Vec<ReasonKind> = e.node_pools[1].reasons.iter().map(|r| r.kind).collect();
        assert_eq!(
            kinds,
            [
                ReasonKind::Taint,
                ReasonKind::Requirement,
                ReasonKind::Limits
            ],
            "big's reasons, most specific first"
        );
        assert_eq!(
            e.hint.as_deref(),
            Some(
                "nodepool ml: add the toleration {key: dedicated, operator: Equal, value: \"ml\", effect: NoSchedule} to the pod"
            )
        );
    }

    /// A pod that fits goes where the round puts it, with no reasons; one kube-scheduler has
    /// not tried is not the round's.
    #[test]
    fn a_pod_that_fits_and_pods_the_round_does_not_place() {
        let e = explained(
            vec![pool("default", json!({}))],
            vec![],
            vec![pending("p", "1", json!({}))],
            "default/p",
        );
        assert_eq!(
            e.outcome,
            Outcome::NewNodeClaim {
                node_pool: "default".into(),
                claim: 0
            },
            "fits: {e:#?}"
        );
        assert!(!e.pending() && e.node_pools.is_empty() && e.hint.is_none());

        let untried = pending("q", "1", json!({"status": {"conditions": []}}));
        let e = explained(
            vec![pool("default", json!({}))],
            vec![],
            vec![untried],
            "default/q",
        );
        assert!(
            matches!(&e.outcome, Outcome::NotConsidered { reason } if reason.contains("has not marked it Unschedulable")),
            "untried: {e:#?}"
        );
        assert!(!e.pending());
    }

    /// The round's verdict decides: a pod that fits a NodePool on its own but not beside the
    /// round's other pods is pending, its limit counted with this round's NodeClaims.
    #[test]
    fn this_rounds_node_claims_count_against_limits() {
        let pods = vec![pending("p1", "3", json!({})), pending("p2", "3", json!({}))];
        let e = explained(vec![limited("default", "4")], vec![], pods, "default/p2");
        assert!(e.pending(), "{e:#?}");
        let r = &e.node_pools[0].reasons;
        assert_eq!(r.len(), 1, "{r:#?}");
        assert_eq!(
            r[0].message,
            "cpu: 0 in use + 4 for this round's other NodeClaims + 4 requested > limit 4"
        );
        assert_eq!(r[0].limit.as_ref().map(LimitArithmetic::needed), Some(8000));
    }

    #[test]
    fn scheduler_reasons_split_per_node_pool() {
        assert_eq!(
            scheduler_reasons("nodepool \"a\": x; y; nodepool \"b\": z"),
            [
                ("a".to_string(), "x; y".to_string()),
                ("b".into(), "z".into())
            ]
        );
        assert!(scheduler_reasons("no nodepools found").is_empty());
    }
}
