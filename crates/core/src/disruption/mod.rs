//! Disruption decisions: which nodes to remove or replace, and why the others stay — upstream's
//! methods in upstream's order (emptiness, drift, multi-node consolidation, single-node
//! consolidation), within each NodePool's budgets, never past a PodDisruptionBudget or a
//! `karpenter.sh/do-not-disrupt`. Pure: the caller passes the cluster and the time, and carries
//! out the commands (taint, launch replacements, wait for them, then delete).

pub mod budgets;
mod candidates;
pub mod consolidatable;
mod consolidation;
pub mod drift;
mod eligible;
mod inputs;
mod methods;
pub mod orchestration;
pub mod repair;
mod validation;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, Taint};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use karpenter_api::DisruptionReason;

use crate::provisioning::scheduling::{NewNodeClaim, NodePoolInput, SchedulerOptions};
use crate::resources::Resources;

pub use crate::state::pdb;
pub use crate::state::pods::eviction_cost;
use candidates::Candidate;
pub use eligible::eligible_by_reason;
pub use inputs::DisruptionInputs;
pub use validation::{Invalid, InvalidKind, validate};

/// A node as disruption sees it.
#[derive(Clone, Debug, Default)]
pub struct NodeState {
    /// The node's name.
    pub name: String,
    /// Its NodePool (`None`: not managed by karpenter).
    pub node_pool: Option<String>,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its annotations.
    pub annotations: BTreeMap<String, String>,
    /// Its taints.
    pub taints: Vec<Taint>,
    /// What pods can use.
    pub allocatable: Resources,
    /// Its capacity.
    pub capacity: Resources,
    /// The pods bound to it.
    pub pods: Vec<Pod>,
    /// Ready, startup taints gone.
    pub initialized: bool,
    /// Ready now (a NotReady node counts as already disrupting).
    pub ready: bool,
    /// Marked for deletion or terminating.
    pub deleting: bool,
    /// A recent provisioning decision counts on it.
    pub nominated: bool,
    /// What it costs per hour.
    pub price: f64,
    /// When it was created.
    pub created_at: Timestamp,
    /// When a pod last bound to or left it (or when it initialized).
    pub last_pod_event: Timestamp,
    /// Its NodeClaim no longer matches its NodePool or NodeClass.
    pub drifted: bool,
    /// When its `Drifted` condition turned true (`None`: unknown): drift acts on the nodes
    /// in the order it found them drifted.
    pub drifted_at: Option<Timestamp>,
    /// Its instance is being terminated (the NodeClaim's `InstanceTerminating`): it no longer
    /// counts toward its NodePool's size for budgets, as upstream.
    pub instance_terminating: bool,
    /// Its CSI volume limits with the volumes its pods attach.
    pub volume_usage: crate::scheduling::volumeusage::VolumeUsage,
    /// CapacityBuffer virtual pods the last provisioning round placed on it: emptiness keeps
    /// a node holding buffer capacity (see `provisioning::capacity_buffer`).
    pub buffer_pods: usize,
    /// Its NodeClaim's `terminationGracePeriod`: a drifted node with one is disrupted
    /// eventually (upstream's eventual class reads the NodeClaim's, not the NodePool's).
    pub termination_grace_period: Option<karpenter_api::Duration>,
    /// A Node no NodeClaim backs while the cluster has NodeClaims (upstream: "node isn't
    /// managed by karpenter"): never a candidate, and not part of its NodePool for budgets,
    /// whatever its labels say.
    pub unclaimed: bool,
}

/// A decision to disrupt nodes.
#[derive(Clone, Debug)]
pub struct Command {
    /// Why.
    pub reason: DisruptionReason,
    /// Which method decided it.
    pub method: Method,
    /// The nodes to remove.
    pub candidates: Vec<String>,
    /// Nodes to launch first (consolidation replaces with at most one; drift with any number).
    pub replacements: Vec<NewNodeClaim>,
    /// What the move saves per hour.
    pub savings_per_hour: f64,
}

/// Upstream's disruption methods, in the order a pass tries them. Static NodePools' nodes are
/// only ever taken by [`Method::StaticDrift`]: never by emptiness, consolidation or the
/// rescheduling drift, as upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Method {
    /// Empty nodes go, every one the budgets allow, in one command.
    Emptiness,
    /// A drifted node of a static NodePool (`spec.replicas`) is replaced one for one.
    StaticDrift,
    /// A drifted node is replaced.
    Drift,
    /// Several nodes go at once, with at most one cheaper replacement.
    MultiNodeConsolidation,
    /// One node goes, or is replaced by a cheaper one.
    SingleNodeConsolidation,
}

impl Method {
    /// Every method, in the order a pass tries them.
    pub const ALL: [Method; 5] = [
        Method::Emptiness,
        Method::StaticDrift,
        Method::Drift,
        Method::MultiNodeConsolidation,
        Method::SingleNodeConsolidation,
    ];

    /// Upstream's name for it, as logs and reports print it.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Emptiness => "emptiness",
            Method::StaticDrift => "static drift",
            Method::Drift => "drift",
            Method::MultiNodeConsolidation => "multi-node consolidation",
            Method::SingleNodeConsolidation => "single-node consolidation",
        }
    }

    /// The `consolidation_type` label of upstream's disruption metrics.
    pub fn consolidation_type(self) -> &'static str {
        match self {
            Method::Emptiness => "empty",
            Method::StaticDrift | Method::Drift => "",
            Method::MultiNodeConsolidation => "multi",
            Method::SingleNodeConsolidation => "single",
        }
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a node stays, in the terms of the event upstream publishes about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Blocked {
    /// Not a candidate at all (do-not-disrupt, a PDB, not initialized, …): `DisruptionBlocked`.
    NotCandidate,
    /// Its NodePool's budget allows no more disruptions now: `DisruptionBlocked`.
    Budget,
    /// Its NodePool disables consolidation (`consolidateAfter: Never`), or consolidates only
    /// empty nodes (`WhenEmpty`) and the node has pods: `Unconsolidatable`.
    Disabled,
    /// A candidate no method could remove or replace profitably: `Unconsolidatable`.
    Unconsolidatable,
    /// Not eligible now: a static NodePool's, empty (emptiness's), or its pods changed within
    /// `consolidateAfter` (no event, as upstream).
    Ineligible,
    /// A Node without a NodeClaim: not karpenter's to disrupt (no event, as upstream).
    Unmanaged,
    /// A candidate left for a later pass because another method acts first (no event).
    Waiting,
}

impl Blocked {
    /// The reason of the event upstream publishes on the node, if any.
    pub fn event_reason(self) -> Option<&'static str> {
        match self {
            Blocked::NotCandidate | Blocked::Budget => Some("DisruptionBlocked"),
            Blocked::Disabled | Blocked::Unconsolidatable => Some("Unconsolidatable"),
            Blocked::Ineligible | Blocked::Unmanaged | Blocked::Waiting => None,
        }
    }

    /// Whether the node counts in `karpenter_voluntary_disruption_eligible_nodes`: a method
    /// would consider it (budgets are applied after, as upstream counts).
    pub fn eligible(self) -> bool {
        matches!(
            self,
            Blocked::Budget | Blocked::Unconsolidatable | Blocked::Waiting
        )
    }
}

/// Why one node stays.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// What kind of reason it is.
    pub kind: Blocked,
    /// The reason, in words (the event's message).
    pub reason: String,
}

/// The outcome of one disruption pass.
#[derive(Clone, Debug, Default)]
pub struct Decision {
    /// Commands to carry out (from the first method that found any).
    pub commands: Vec<Command>,
    /// Every managed node not chosen, and why it stays.
    pub blocked: BTreeMap<String, Block>,
}

impl Decision {
    /// Records why `node` stays; a later reason replaces an earlier one.
    fn block(&mut self, node: &str, kind: Blocked, reason: String) {
        self.blocked
            .insert(node.to_string(), Block { kind, reason });
    }

    /// Records why `node` stays unless a reason is known already.
    fn block_if_unexplained(&mut self, node: &str, kind: Blocked, reason: &str) {
        self.blocked
            .entry(node.to_string())
            .or_insert_with(|| Block {
                kind,
                reason: reason.to_string(),
            });
    }

    /// How many nodes a method would consider: chosen, or blocked by a budget or by no
    /// profitable move.
    pub fn eligible_nodes(&self) -> usize {
        self.blocked.values().filter(|b| b.kind.eligible()).count()
            + self
                .commands
                .iter()
                .map(|c| c.candidates.len())
                .sum::<usize>()
    }
}

/// Everything a disruption pass looks at.
pub struct Input<'a> {
    /// Now (budget schedules are cron in UTC).
    pub now: Timestamp,
    /// Every node.
    pub nodes: &'a [NodeState],
    /// The NodePools with their instance types.
    pub node_pools: &'a [NodePoolInput],
    /// PodDisruptionBudgets, with `status.disruptionsAllowed` filled in.
    pub pdbs: &'a [PodDisruptionBudget],
    /// Pods waiting for a node (they must still fit after a move).
    pub pending_pods: &'a [Pod],
    /// DaemonSet pods, for replacement overhead.
    pub daemonset_pods: &'a [Pod],
    /// Scheduling options (provider labels).
    pub options: SchedulerOptions,
    /// Upstream's `SpotToSpotConsolidation` feature gate (off by default): replace spot nodes
    /// with cheaper spot nodes.
    pub spot_to_spot: bool,
}

/// Upstream's `MinInstanceTypesForSpotToSpotConsolidation`: a single spot node is replaced
/// only when at least this many cheaper types could take its place, and the replacement lists
/// this many (more where `minValues` needs more), so the launch lands among them and is not
/// consolidated again at once.
pub const MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT: usize = 15;

/// One disruption pass: the first method, in upstream's order, that finds something to do.
pub fn decide(input: &Input<'_>) -> Decision {
    let mut decision = Decision::default();
    let candidates = candidates::candidates(input, &mut decision);
    for m in Method::ALL {
        let commands = methods::method(m).compute_all(input, &candidates, &mut decision);
        if !commands.is_empty() {
            decision.commands = commands;
            break;
        }
    }
    finish(decision, &candidates)
}

/// Every candidate neither acted on nor blocked waits for a later pass; say so, so that no node
/// goes unexplained.
fn finish(mut decision: Decision, candidates: &[Candidate<'_>]) -> Decision {
    let acting = decision.commands.first().map(|c| c.method);
    for c in candidates {
        let chosen = decision
            .commands
            .iter()
            .any(|cmd| cmd.candidates.contains(&c.node.name));
        if !chosen && !decision.blocked.contains_key(&c.node.name) {
            let (kind, why) = match acting {
                Some(method) => (
                    Blocked::Waiting,
                    format!("waits for a later pass: {method} acts first"),
                ),
                None => (
                    Blocked::Unconsolidatable,
                    "no cheaper way to run its pods was found".into(),
                ),
            };
            decision.block(&c.node.name, kind, why);
        }
    }
    decision
}
