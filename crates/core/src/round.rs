//! One round of decisions over a snapshot: what provisioning launches and nominates, what
//! disruption starts (or whether a held consolidation still holds), which NodeClaims have
//! expired, what static capacity creates and deletes, and which nodes repair replaces.
//!
//! The controller's provisioning and disruption loops and its dry run, the simulator and `plan`
//! decide through [`decide`]: each builds a [`Snapshot`] of what it observed, says which
//! [`Parts`] are due, and carries the [`RoundPlan`] out (the controller through the API server,
//! the simulator on its model) or prints it. The controller's per-object expiration, its static
//! capacity and its repair loops call the same functions the round does ([`expired_at`],
//! `static_capacity::decide`, `repair::judge_all`). Feature gates for decisions are read here.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use karpenter_api::NodeClaim;

use crate::disruption::repair::{self, Judged};
use crate::disruption::{self, Command, Decision, Invalid};
use crate::feature_gates::FeatureGates;
use crate::instancetype::RepairPolicy;
use crate::provisioning::capacity_buffer::buffer_pods_by_node;
use crate::provisioning::scheduling::{
    BoundPod, NewNodeClaim, ReservedOfferingMode, Results, Scheduler, SchedulerOptions,
};
use crate::provisioning::static_capacity;
use crate::resources::{QuantityError, Resources};
use crate::state::Snapshot;
use crate::state::pdb;
use crate::state::pods::ObservedPod;

/// What disruption does this round.
#[derive(Clone, Copy, Debug)]
pub enum Disrupt<'a> {
    /// Nothing (its loop has nothing due).
    Skip,
    /// A fresh decision over every method.
    Decide,
    /// Re-validate a consolidation held since it was decided.
    Validate(&'a Command),
}

/// Which parts of a round are due. `plan` asks for all of them; each of the controller's
/// loops and the simulator's steps asks for its own when its timing says so.
#[derive(Clone, Copy, Debug)]
pub struct Parts<'a> {
    /// Schedule the pending pods (and the CapacityBuffers' virtual pods).
    pub provisioning: bool,
    /// Disruption's step.
    pub disruption: Disrupt<'a>,
    /// NodeClaims past their `expireAfter`.
    pub expiration: bool,
    /// Static NodePools brought to their replicas (the `StaticCapacity` gate).
    pub static_capacity: bool,
    /// Unhealthy nodes (the `NodeRepair` gate).
    pub repair: bool,
}

impl Parts<'static> {
    /// Every part, disruption deciding afresh: what `plan` shows.
    pub const ALL: Parts<'static> = Parts {
        provisioning: true,
        disruption: Disrupt::Decide,
        expiration: true,
        static_capacity: true,
        repair: true,
    };

    /// No part; set the ones due.
    pub const NONE: Parts<'static> = Parts {
        provisioning: false,
        disruption: Disrupt::Skip,
        expiration: false,
        static_capacity: false,
        repair: false,
    };
}

/// Which nodes hold CapacityBuffer headroom, when this round does not provision (and so
/// cannot say itself): emptiness keeps such nodes.
#[derive(Clone, Copy, Debug)]
pub enum BufferHolding<'a> {
    /// As the last provisioning round placed the virtual pods: their count by node.
    Placed(&'a BTreeMap<String, usize>),
    /// No provisioning round has placed them yet (after a restart): every node is taken to
    /// hold some, so that an empty node a buffer keeps does not go in that window.
    Unknown,
}

/// Everything a round reads besides the snapshot.
pub struct RoundInputs<'a> {
    /// Upstream's feature gates.
    pub gates: FeatureGates,
    /// Wall time now: budget schedules, `consolidateAfter`, `expireAfter`, `do-not-disrupt`
    /// durations and repair tolerations are measured against it.
    pub now: Timestamp,
    /// The operator's scheduling settings (preference and `minValues` policies, the provider's
    /// labels). The round sets what follows from the gates and the snapshot.
    pub options: &'a SchedulerOptions,
    /// The CapacityBuffers' virtual pods (used with the `CapacityBuffer` gate on).
    pub virtual_pods: &'a [Pod],
    /// Which nodes hold buffer headroom when provisioning is not part of this round.
    pub buffer_holding: BufferHolding<'a>,
    /// The provider's repair policies (used with the `NodeRepair` gate on).
    pub repair_policies: &'a [RepairPolicy],
    /// Which parts are due.
    pub parts: Parts<'a>,
    /// Whether the scheduling simulation must stop now (upstream's one-minute budget): what it
    /// decided by then is kept.
    pub interrupt: &'a dyn Fn() -> bool,
}

/// A pod a provisioning round schedules: one the cluster holds, or a CapacityBuffer's
/// virtual pod (which never exists: no events, nominations or metrics for it).
#[derive(Debug)]
pub enum RoundPod<'a, P> {
    /// A pending pod, or one of a node being deleted.
    Real(&'a P),
    /// A CapacityBuffer's virtual pod.
    Virtual(&'a Pod),
}

impl<P> Clone for RoundPod<'_, P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P> Copy for RoundPod<'_, P> {}

macro_rules! delegate {
    ($self:ident, $p:ident => $e:expr) => {
        match $self {
            RoundPod::Real($p) => $e,
            RoundPod::Virtual($p) => $e,
        }
    };
}

impl<P: ObservedPod> ObservedPod for RoundPod<'_, P> {
    fn meta(&self) -> &ObjectMeta {
        delegate!(self, p => p.meta())
    }
    fn node_name(&self) -> Option<&str> {
        delegate!(self, p => p.node_name())
    }
    fn phase(&self) -> Option<&str> {
        delegate!(self, p => p.phase())
    }
    fn unschedulable(&self) -> bool {
        delegate!(self, p => p.unschedulable())
    }
    fn nominated_node_name(&self) -> Option<&str> {
        delegate!(self, p => p.nominated_node_name())
    }
    fn labels(&self) -> Option<&BTreeMap<String, String>> {
        delegate!(self, p => p.labels())
    }
    fn pod_spec(&self) -> Option<&PodSpec> {
        delegate!(self, p => p.pod_spec())
    }
    fn requests(&self) -> Result<Resources, QuantityError> {
        delegate!(self, p => p.requests())
    }
    fn start_time(&self) -> Option<&Time> {
        delegate!(self, p => p.start_time())
    }
    fn bound(&self) -> Option<BoundPod> {
        delegate!(self, p => p.bound())
    }
    fn to_pod(&self) -> Pod {
        delegate!(self, p => p.to_pod())
    }
    fn claim_names(&self) -> Vec<String> {
        delegate!(self, p => p.claim_names())
    }
    fn resource_claim_statuses(&self) -> &[k8s_openapi::api::core::v1::PodResourceClaimStatus] {
        delegate!(self, p => p.resource_claim_statuses())
    }
}

/// What provisioning decided.
pub struct Provisioning<'a, P> {
    /// The pods scheduled, in order: the provisionable ones (oldest first), those of nodes
    /// being deleted, then the virtual pods. `results` index into it.
    pub batch: Vec<RoundPod<'a, P>>,
    /// Where they go: new NodeClaims, nominations to existing or launching nodes, and the pods
    /// that fit nowhere.
    pub results: Results,
}

impl<P> Provisioning<'_, P> {
    /// Whether batch entry `i` is a pod of the cluster (not a virtual one).
    pub fn is_real(&self, i: usize) -> bool {
        self.batch
            .get(i)
            .is_some_and(|p| matches!(p, RoundPod::Real(_)))
    }

    /// The existing or launching nodes this round counts on (upstream's nominations): those
    /// it placed a real pod on. A node only virtual pods would use is not nominated: they
    /// come back every round, so the nomination would never lapse.
    pub fn nominations(&self) -> Vec<&str> {
        self.results
            .existing_nodes
            .iter()
            .filter(|(_, pods)| pods.iter().any(|&i| self.is_real(i)))
            .map(|(node, _)| node.as_str())
            .collect()
    }
}

/// How long a nomination holds (upstream's window): twice the longest batch, at least 10 s.
pub fn nomination_window(batch_max: std::time::Duration) -> std::time::Duration {
    (batch_max * 2).max(std::time::Duration::from_secs(10))
}

/// What disruption decided.
#[derive(Debug)]
pub enum Disruption {
    /// A fresh decision, with upstream's eligible-node counts per reason.
    Decided {
        /// The commands, and why every other node stays.
        decision: Decision,
        /// `karpenter_voluntary_disruption_eligible_nodes` per reason.
        eligible: [(&'static str, usize); 3],
    },
    /// A held consolidation, validated: the command to carry out, or why not.
    Validated(Result<Command, Invalid>),
}

/// A NodeClaim past its `expireAfter`: deleted, budgets or not (upstream's expiration).
#[derive(Clone, Debug)]
pub struct Expired<'a> {
    /// The NodeClaim.
    pub claim: &'a NodeClaim,
    /// Its node's name (the claim's while it has no node).
    pub node: &'a str,
    /// When it expired.
    pub at: Timestamp,
}

/// What static capacity does with one static NodePool.
#[derive(Clone, Debug)]
pub struct StaticPlan {
    /// The NodePool.
    pub node_pool: String,
    /// Create, delete or nothing.
    pub action: static_capacity::Action,
    /// The NodeClaim each creation launches (`None` when no instance type can launch for it).
    pub node_claim: Option<NewNodeClaim>,
}

/// What one round decided, part by part; a part not due is empty (`None`).
pub struct RoundPlan<'a, P> {
    /// Provisioning's decision.
    pub provisioning: Option<Provisioning<'a, P>>,
    /// Disruption's decision or validation.
    pub disruption: Option<Disruption>,
    /// NodeClaims past their `expireAfter`.
    pub expired: Vec<Expired<'a>>,
    /// Static NodePools' actions (the `StaticCapacity` gate).
    pub static_capacity: Vec<StaticPlan>,
    /// Every node with a NodeClaim, judged against the repair policies (the `NodeRepair`
    /// gate).
    pub repairs: Vec<Judged<'a, 'a>>,
}

/// Whether `claim` is past its `expireAfter` at `now`, and since when: counted from its
/// creation, as upstream's expiration controller does.
pub fn expired_at(claim: &NodeClaim, now: Timestamp) -> Option<Timestamp> {
    let after = claim.spec.expire_after.0?;
    let created = claim.metadata.creation_timestamp.as_ref()?.0;
    let at = created.checked_add(after).ok()?;
    (now >= at).then_some(at)
}

/// One round over `snapshot`: the parts `inputs` asks for, each with its reasons.
pub fn decide<'a, P: ObservedPod>(
    snapshot: &Snapshot<'a, P>,
    inputs: &RoundInputs<'a>,
) -> RoundPlan<'a, P> {
    let gates = inputs.gates;
    let options = SchedulerOptions {
        reserved_capacity: gates.reserved_capacity,
        dynamic_resources: (!inputs.options.ignore_dra_requests)
            .then(|| snapshot.devices().clone()),
        ..inputs.options.clone()
    };
    let virtual_pods: &[Pod] = if gates.capacity_buffer {
        inputs.virtual_pods
    } else {
        &[]
    };
    let provisioning = inputs.parts.provisioning.then(|| {
        provision(
            snapshot,
            inputs.now,
            &options,
            virtual_pods,
            inputs.interrupt,
        )
    });
    let expired = if inputs.parts.expiration {
        expire(snapshot, inputs.now)
    } else {
        Vec::new()
    };
    let holding: Holding<'_> = match (&provisioning, inputs.buffer_holding) {
        (Some(p), _) => Some(Cow::Owned(buffer_pods_by_node(&p.results, &p.batch))),
        (None, BufferHolding::Placed(by_node)) => Some(Cow::Borrowed(by_node)),
        (None, BufferHolding::Unknown) => None,
    };
    let disruption = match inputs.parts.disruption {
        Disrupt::Skip => None,
        step => {
            let expiring: BTreeSet<&str> = expired.iter().map(|e| e.node).collect();
            Some(disrupt(
                snapshot,
                inputs,
                &options,
                step,
                virtual_pods,
                &holding,
                &expiring,
            ))
        }
    };
    let static_capacity = if inputs.parts.static_capacity && gates.static_capacity {
        // What expiration deletes this round counts as deleting, as disruption's marks do.
        let mut going = snapshot.marked_for_deletion().clone();
        going.extend(expired.iter().map(|e| e.node.to_string()));
        static_capacity(snapshot, &options, &going, inputs.now)
    } else {
        Vec::new()
    };
    let repairs = if inputs.parts.repair && gates.node_repair {
        repair::judge_all(
            &snapshot.observed_nodes(),
            &snapshot.observed_node_claims(),
            inputs.repair_policies,
            inputs.now,
        )
    } else {
        Vec::new()
    };
    RoundPlan {
        provisioning,
        disruption,
        expired,
        static_capacity,
        repairs,
    }
}

/// How many virtual pods each node holds (`None`: not known yet, every node holds some).
type Holding<'h> = Option<Cow<'h, BTreeMap<String, usize>>>;

fn provision<'a, P: ObservedPod>(
    snapshot: &Snapshot<'a, P>,
    now: Timestamp,
    options: &SchedulerOptions,
    virtual_pods: &'a [Pod],
    interrupt: &dyn Fn() -> bool,
) -> Provisioning<'a, P> {
    // Virtual pods after the real ones, as upstream appends them.
    let batch: Vec<RoundPod<'a, P>> = snapshot
        .pods_to_schedule(now)
        .into_iter()
        .map(RoundPod::Real)
        .chain(virtual_pods.iter().map(RoundPod::Virtual))
        .collect();
    if batch.is_empty() {
        return Provisioning {
            batch,
            results: Results::default(),
        };
    }
    let mut scheduler = Scheduler::new(
        snapshot.node_pools(),
        &snapshot.existing_nodes(),
        &snapshot.daemonset_pods(),
        snapshot.scheduler_options(&SchedulerOptions {
            // Provisioning waits for reserved capacity rather than fall back (upstream).
            reserved_offering_mode: ReservedOfferingMode::Strict,
            ..options.clone()
        }),
    );
    let results = scheduler.solve(&batch, interrupt);
    Provisioning { batch, results }
}

fn expire<'a, P: ObservedPod>(snapshot: &Snapshot<'a, P>, now: Timestamp) -> Vec<Expired<'a>> {
    snapshot
        .nodes
        .iter()
        .filter(|n| !n.deleting())
        .filter_map(|n| {
            let claim = n.claim?;
            Some(Expired {
                claim,
                node: n.name(),
                at: expired_at(claim, now)?,
            })
        })
        .collect()
}

fn disrupt<P: ObservedPod>(
    snapshot: &Snapshot<'_, P>,
    inputs: &RoundInputs<'_>,
    options: &SchedulerOptions,
    step: Disrupt<'_>,
    virtual_pods: &[Pod],
    holding: &Holding<'_>,
    expiring: &BTreeSet<&str>,
) -> Disruption {
    let now = inputs.now;
    let mut owned = snapshot.disruption(now);
    // Consolidation must still fit the virtual pods; emptiness keeps the nodes holding them.
    owned.pending_pods.extend(virtual_pods.iter().cloned());
    let mut leaving = Vec::new();
    for n in &mut owned.nodes {
        // Without virtual pods no node holds any, known or not.
        if !virtual_pods.is_empty() {
            n.buffer_pods = holding
                .as_ref()
                .map_or(1, |by_node| by_node.get(&n.name).copied().unwrap_or(0));
        }
        // Expiration deletes them this round: no method may count on them, and their pods
        // that can leave need room as those of any node being deleted.
        if expiring.contains(n.name.as_str()) {
            n.deleting = true;
            leaving.extend(
                n.pods
                    .iter()
                    .filter(|p| pdb::can_leave_now(p, &owned.pdbs, now))
                    .cloned(),
            );
        }
    }
    owned.pending_pods.extend(leaving);
    let input = owned.input(
        now,
        snapshot.node_pools(),
        SchedulerOptions {
            default_spread: snapshot.default_spread(&options.default_constraints),
            ..options.clone()
        },
        inputs.gates.spot_to_spot_consolidation,
    );
    match step {
        Disrupt::Skip | Disrupt::Decide => {
            let decision = disruption::decide(&input);
            let eligible = disruption::eligible_by_reason(&input, &decision);
            Disruption::Decided { decision, eligible }
        }
        Disrupt::Validate(held) => Disruption::Validated(disruption::validate(&input, held)),
    }
}

fn static_capacity<P: ObservedPod>(
    snapshot: &Snapshot<'_, P>,
    options: &SchedulerOptions,
    going: &BTreeSet<String>,
    now: Timestamp,
) -> Vec<StaticPlan> {
    let claims = snapshot.observed_node_claims();
    let pods_on = |node: &str| -> Vec<Pod> {
        snapshot
            .nodes
            .iter()
            .find(|n| n.name() == node)
            .map(|n| n.pods.iter().map(|p| p.to_pod()).collect())
            .unwrap_or_default()
    };
    snapshot
        .node_pools()
        .iter()
        .filter(|p| static_capacity::is_static(&p.node_pool))
        .map(|pool| {
            let action = static_capacity::decide(&pool.node_pool, &claims, going, &pods_on, now);
            let node_claim = match action {
                static_capacity::Action::Create(_) => {
                    static_capacity::node_claim(pool, &options.provider_labels)
                }
                _ => None,
            };
            StaticPlan {
                node_pool: pool.node_pool.name().to_string(),
                action,
                node_claim,
            }
        })
        .collect()
}
