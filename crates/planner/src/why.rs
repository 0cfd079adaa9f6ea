//! "Why is my pod pending?": one pod, explained from the round `plan` decides — where it would
//! go, or, per NodePool, why not (the most specific reason first, a hint of what would change
//! it, limits as arithmetic), by the core's [`explain`](karpenter_core::provisioning::scheduling::explain).
//!
//! From a dump ([`why_from_dump`]) the round is the one [`crate::plan_from`] decides; from a
//! live cluster the controller's dry run hands its snapshot and round to [`why_from_round`].

use k8s_openapi::api::core::v1::TopologySpreadConstraint;
use std::collections::BTreeMap;

use karpenter_cloudprovider::Catalog;
use karpenter_core::feature_gates::FeatureGates;
use karpenter_core::provisioning::scheduling::explain::{self, Explanation, Outcome};
use karpenter_core::provisioning::scheduling::{NodePoolInput, SchedulerOptions};
use karpenter_core::resources::{PODS, format_milli};
use karpenter_core::round::{Parts, RoundPlan};
use karpenter_core::state::Snapshot;
use karpenter_core::state::pods::ObservedPod;
use serde::Serialize;

use crate::{Dump, PlannedNodeClaim, planned};

/// One pod, explained.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Why {
    /// The pod, as `namespace/name`.
    pub pod: String,
    /// What it asks for.
    pub requests: BTreeMap<String, String>,
    /// Whether it would stay pending (nowhere to go, or ignored by provisioning).
    pub pending: bool,
    /// Where the round leaves it.
    pub outcome: WhyOutcome,
    /// For a pending pod, per NodePool: why not, the NodePool closest to taking it first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodepools: Vec<WhyNodePool>,
    /// What would make it schedulable, on the NodePool closest to taking it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// The currency of prices (ISO 4217), where the catalog says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
}

/// Where the round leaves the pod.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum WhyOutcome {
    /// On a NodeClaim the round would launch.
    Launch {
        /// The NodeClaim.
        nodeclaim: PlannedNodeClaim,
    },
    /// On a node that exists (or a NodeClaim launching, as `nodeclaim/NAME`).
    ExistingNode {
        /// The node.
        node: String,
    },
    /// Nowhere; the scheduler's own reason.
    Pending {
        /// The scheduler's error for the pod.
        reason: String,
        /// It waits for reserved capacity this round's other NodeClaims hold.
        deferred: bool,
    },
    /// Provisioning ignores it (a `FailedScheduling` event says why).
    Ignored {
        /// Why.
        reason: String,
    },
    /// It runs on a node already.
    Bound {
        /// The node.
        node: String,
    },
    /// It is not provisioning's to place.
    NotConsidered {
        /// Why.
        reason: String,
    },
}

/// Why a pending pod cannot go to one NodePool.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct WhyNodePool {
    /// The NodePool.
    pub nodepool: String,
    /// The reasons, most specific first.
    pub reasons: Vec<WhyReason>,
}

/// One reason.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct WhyReason {
    /// `taint`, `requirement`, `instance-types`, `resources`, `other` or `limits`.
    pub kind: String,
    /// What stands in the way.
    pub message: String,
    /// What would remove it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// For a limit: the arithmetic, as quantities.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<WhyLimit>,
}

/// A limit a launch would break: `in_use + this_round + requested > limit`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct WhyLimit {
    /// The resource.
    pub resource: String,
    /// What the NodePool's nodes have.
    pub in_use: String,
    /// What this round's other NodeClaims from it take.
    pub this_round: String,
    /// What the launch would add (the smallest instance type that fits, or one node).
    pub requested: String,
    /// The limit.
    pub limit: String,
    /// The smallest limit that would let the launch through.
    pub needed: String,
}

/// Why `pod` (`namespace/name`) is where the round over `dump` leaves it, every NodePool
/// offering `catalog` (the NodeOverlays applied when their gate is on), as of `now` (Unix
/// seconds): the round [`crate::plan_from`] decides. `None` when the dump has no such pod.
pub fn why_from_dump(
    dump: &Dump,
    catalog: &Catalog,
    now: i64,
    gates: FeatureGates,
    pod: &str,
) -> Option<Why> {
    let pools = crate::pool_inputs(dump, catalog, gates);
    // Only provisioning places pods.
    let parts = Parts {
        provisioning: true,
        ..Parts::NONE
    };
    let mut why = crate::with_round(
        dump,
        &pools,
        catalog,
        now,
        gates,
        parts,
        |snapshot, round| {
            let defaults = &dump.scheduler_config.default_constraints;
            why_from_round(snapshot, round, &pools, gates, defaults, pod)
        },
    )?;
    why.currency = Some(catalog.currency.to_string());
    Some(why)
}

/// Why `pod` (`namespace/name`) is where `round` over `snapshot` leaves it (whoever built
/// them: `plan` over a dump, or the controller's dry run over its state), launching from
/// `pools`, under the cluster's `default_constraints` (`--scheduler-config`). `None` when
/// the snapshot has no such pod.
pub fn why_from_round<P: ObservedPod>(
    snapshot: &Snapshot<'_, P>,
    round: &RoundPlan<'_, P>,
    pools: &[NodePoolInput],
    gates: FeatureGates,
    default_constraints: &[TopologySpreadConstraint],
    pod: &str,
) -> Option<Why> {
    // As the round decided: `explain` takes the snapshot's provider labels itself.
    let options = SchedulerOptions {
        reserved_capacity: gates.reserved_capacity,
        default_constraints: default_constraints.to_vec(),
        ..Default::default()
    };
    let provisioning = round.provisioning.as_ref();
    let e = explain::explain_pod(snapshot, provisioning, &options, pod)?;
    let launching = |node: &str| {
        snapshot
            .nodes
            .iter()
            .any(|n| n.launching() && n.name() == node)
    };
    let outcome = match &e.outcome {
        Outcome::NewNodeClaim { claim, .. } => {
            let p = provisioning.expect("a NodeClaim comes from provisioning");
            let claim = &p.results.new_node_claims[*claim];
            let pods = claim
                .pods
                .iter()
                .map(|&i| karpenter_core::state::pods::key(&p.batch[i]))
                .collect();
            WhyOutcome::Launch {
                nodeclaim: planned(claim, pools, pods),
            }
        }
        Outcome::ExistingNode { node } => WhyOutcome::ExistingNode {
            node: if launching(node) {
                format!("nodeclaim/{node}")
            } else {
                node.clone()
            },
        },
        Outcome::Pending { reason, deferred } => WhyOutcome::Pending {
            reason: reason.clone(),
            deferred: *deferred,
        },
        Outcome::Ignored { reason } => WhyOutcome::Ignored {
            reason: reason.clone(),
        },
        Outcome::Bound { node } => WhyOutcome::Bound { node: node.clone() },
        Outcome::NotConsidered { reason } => WhyOutcome::NotConsidered {
            reason: reason.clone(),
        },
    };
    Some(Why::new(&e, outcome))
}

impl Why {
    fn new(e: &Explanation, outcome: WhyOutcome) -> Self {
        let requests = e
            .requests
            .iter()
            .filter(|(n, _)| *n != PODS)
            .map(|(n, v)| (n.to_string(), format_milli(n, v)))
            .collect();
        let nodepools = e
            .node_pools
            .iter()
            .map(|p| WhyNodePool {
                nodepool: p.node_pool.clone(),
                reasons: p
                    .reasons
                    .iter()
                    .map(|r| WhyReason {
                        kind: r.kind.as_str().to_string(),
                        message: r.message.clone(),
                        hint: r.hint.clone(),
                        limit: r.limit.as_ref().map(|a| {
                            let q = |v: i64| format_milli(&a.resource, v);
                            WhyLimit {
                                resource: a.resource.clone(),
                                in_use: q(a.in_use),
                                this_round: q(a.this_round),
                                requested: q(a.requested),
                                limit: q(a.limit),
                                needed: q(a.needed()),
                            }
                        }),
                    })
                    .collect(),
            })
            .collect();
        Why {
            pod: e.pod.clone(),
            requests,
            pending: e.pending(),
            outcome,
            nodepools,
            hint: e.hint.clone(),
            currency: None,
        }
    }

    /// The explanation for people.
    pub fn to_text(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let asks: Vec<String> = self
            .requests
            .iter()
            .map(|(n, v)| format!("{n}: {v}"))
            .collect();
        let pod = format!("Pod {} ({})", self.pod, asks.join(", "));
        let money = |amount: f64| match &self.currency {
            Some(c) => karpenter_cloudprovider::catalog::format_price(c, amount),
            None => format!("{amount:.4}"),
        };
        match &self.outcome {
            WhyOutcome::Launch { nodeclaim } => {
                let _ = writeln!(
                    out,
                    "{pod} would go to a new NodeClaim of nodepool {}",
                    nodeclaim.nodepool
                );
                if let Some(l) = &nodeclaim.launch {
                    let _ = writeln!(
                        out,
                        "  launching {} {} in {} at {}/h",
                        l.instance_type,
                        l.capacity_type,
                        l.zone,
                        money(l.price_per_hour)
                    );
                }
                let others = nodeclaim.pods.len().saturating_sub(1);
                if others > 0 {
                    let _ = writeln!(out, "  with {others} other pod(s) of this round");
                }
            }
            WhyOutcome::ExistingNode { node } => {
                let _ = writeln!(out, "{pod} would go to {node}, which has room for it");
            }
            WhyOutcome::Bound { node } => {
                let _ = writeln!(out, "{pod} is bound to node {node}: it is not pending");
            }
            WhyOutcome::NotConsidered { reason } => {
                let _ = writeln!(out, "{pod} is not provisioning's to place: {reason}");
            }
            WhyOutcome::Ignored { reason } => {
                let _ = writeln!(
                    out,
                    "{pod} would stay pending: provisioning ignores it: {reason}"
                );
            }
            WhyOutcome::Pending { reason, deferred } => {
                if *deferred {
                    let _ = writeln!(
                        out,
                        "{pod} waits for reserved capacity this round's other NodeClaims hold: {reason}"
                    );
                } else {
                    let _ = writeln!(out, "{pod} would stay pending");
                }
                if self.nodepools.is_empty() {
                    let _ = writeln!(out, "  {reason}");
                }
            }
        }
        if !self.nodepools.is_empty() {
            let _ = writeln!(out, "\nWhy not, per NodePool (the closest first):");
            for p in &self.nodepools {
                let _ = writeln!(out, "  nodepool {}", p.nodepool);
                for r in &p.reasons {
                    let _ = writeln!(out, "    {}: {}", r.kind, r.message);
                    if let Some(h) = &r.hint {
                        let _ = writeln!(out, "      hint: {h}");
                    }
                }
            }
        }
        if let Some(h) = &self.hint {
            let _ = writeln!(out, "\nTo schedule it: {h}");
        }
        if let WhyOutcome::Pending { reason, .. } = &self.outcome
            && !self.nodepools.is_empty()
        {
            let _ = writeln!(out, "\nThe scheduler's own message: {reason}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// A dump with a tainted GPU NodePool at its CPU limit, a CPU NodePool, and pending pods.
    const DUMP: &str = r#"
apiVersion: v1
kind: List
items:
  - apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {name: default}
    spec:
      template:
        spec:
          nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
          requirements:
            - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  - apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {name: batch}
    spec:
      weight: 10
      limits: {cpu: "4"}
      template:
        metadata: {labels: {team: batch}}
        spec:
          nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}
          taints: [{key: batch, value: "true", effect: NoSchedule}]
  - apiVersion: v1
    kind: Node
    metadata:
      name: batch-1
      labels: {karpenter.sh/nodepool: batch, karpenter.sh/initialized: "true", team: batch, kubernetes.io/hostname: batch-1}
    spec:
      taints: [{key: batch, value: "true", effect: NoSchedule}]
    status:
      capacity: {cpu: "4", memory: 8Gi, pods: "64"}
      allocatable: {cpu: "0", memory: "0", pods: "64"}
      conditions: [{type: Ready, status: "True"}]
  - apiVersion: v1
    kind: Pod
    metadata: {name: job, namespace: team}
    spec:
      nodeSelector: {team: batch}
      containers: [{name: c, image: c, resources: {requests: {cpu: "2"}}}]
    status: {phase: Pending, conditions: [{type: PodScheduled, status: "False", reason: Unschedulable}]}
  - apiVersion: v1
    kind: Pod
    metadata: {name: web, namespace: team}
    spec:
      containers: [{name: c, image: c, resources: {requests: {cpu: "1"}}}]
    status: {phase: Pending, conditions: [{type: PodScheduled, status: "False", reason: Unschedulable}]}
"#;

    fn catalog() -> Catalog {
        Catalog::new(
            "fake",
            karpenter_core::instancetype::fake::default_instance_types(),
            &[],
        )
    }

    fn why(pod: &str) -> Why {
        let dump = Dump::read(Path::new("dump.yaml"), DUMP).unwrap();
        let catalog = catalog();
        why_from_dump(&dump, &catalog, 0, FeatureGates::default(), pod)
            .unwrap_or_else(|| panic!("{pod} not in the dump"))
    }

    #[test]
    fn a_pending_pod_is_explained_per_node_pool_closest_first() {
        let w = why("team/job");
        assert!(w.pending, "{w:#?}");
        let pools: Vec<&str> = w.nodepools.iter().map(|p| p.nodepool.as_str()).collect();
        // default: a label it does not set (one reason); batch: a taint and its limit (two).
        assert_eq!(pools, ["default", "batch"], "{w:#?}");
        let batch: Vec<&str> = w.nodepools[1]
            .reasons
            .iter()
            .map(|r| r.kind.as_str())
            .collect();
        assert_eq!(batch, ["taint", "limits"], "{w:#?}");
        let limit = w.nodepools[1].reasons[1]
            .limit
            .as_ref()
            .expect("arithmetic");
        assert_eq!(
            (limit.in_use.as_str(), limit.limit.as_str()),
            ("4", "4"),
            "{limit:?}"
        );
        assert!(
            w.nodepools[1].reasons[1]
                .message
                .starts_with("cpu: 4 in use + "),
            "{:?}",
            w.nodepools[1].reasons[1].message
        );
        assert_eq!(
            w.hint.as_deref(),
            Some(
                "nodepool default: add the label `team: batch` to the NodePool's spec.template.metadata.labels (or a requirement on team allowing it)"
            )
        );
        let text = w.to_text();
        assert!(
            text.starts_with("Pod team/job (cpu: 2) would stay pending\n"),
            "{text}"
        );
        assert!(
            text.contains("    taint: the pod does not tolerate its taint batch=true:NoSchedule\n"),
            "{text}"
        );
        assert!(
            text.contains("The scheduler's own message: nodepool \"batch\": "),
            "{text}"
        );
        let json = serde_json::to_value(&w).unwrap();
        assert_eq!(json["outcome"]["kind"], "pending", "{json}");
        assert_eq!(
            json["nodepools"][1]["reasons"][1]["limit"]["limit"], "4",
            "{json}"
        );
    }

    #[test]
    fn a_pod_that_fits_names_its_launch_and_an_unknown_pod_is_none() {
        let w = why("team/web");
        assert!(!w.pending, "{w:#?}");
        match &w.outcome {
            WhyOutcome::Launch { nodeclaim } => {
                assert_eq!(nodeclaim.nodepool, "default");
                assert!(nodeclaim.launch.is_some(), "{nodeclaim:?}");
            }
            other => panic!("not a launch: {other:?}"),
        }
        assert!(
            w.to_text()
                .contains("would go to a new NodeClaim of nodepool default")
        );
        let dump = Dump::read(Path::new("dump.yaml"), DUMP).unwrap();
        let catalog = catalog();
        assert!(why_from_dump(&dump, &catalog, 0, FeatureGates::default(), "team/nope").is_none());
    }
}
