//! The dry-run planner: what provisioning and disruption would do now, from a dump of a live
//! cluster (`kubectl get nodes,pods,nodepools,nodeclaims,pdb,daemonsets -A -o yaml`).

use karpenter_core::feature_gates::FeatureGates;
use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use karpenter_api::labels::{
    CAPACITY_TYPE_LABEL, INSTANCE_TYPE_LABEL, NODE_INITIALIZED_LABEL, NODE_POOL_LABEL, ZONE_LABEL,
};
use karpenter_api::{NodeClaim, NodePool};
use karpenter_core::disruption::{self, NodeState};
use karpenter_core::provisioning::scheduling::{
    BoundPod, ExistingNodeInput, NodePoolInput, Scheduler, SchedulerOptions,
};
use karpenter_core::resources::Resources;
use serde::Serialize;
use serde_json::Value;

use crate::catalog::Catalog;
use crate::manifest::parse_documents;
use crate::scenario::ScenarioError;

/// A NodeClaim provisioning would create.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PlannedNodeClaim {
    /// Its NodePool.
    pub nodepool: String,
    /// The instance types it would list, cheapest first.
    pub instance_types: Vec<String>,
    /// The cheapest price among them.
    pub price_per_hour: Option<f64>,
    /// The pods it is for, as `namespace/name`.
    pub pods: Vec<String>,
    /// Its requirements, as `key op [values]`.
    pub requirements: Vec<String>,
}

/// A pod that fits on a node already there (or launching).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Placement {
    /// The pod, as `namespace/name`.
    pub pod: String,
    /// The node.
    pub node: String,
}

/// A pod that fits nowhere, and why.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Unschedulable {
    /// The pod, as `namespace/name`.
    pub pod: String,
    /// Why, per NodePool.
    pub reason: String,
}

/// What provisioning would do.
#[derive(Clone, Debug, Serialize, PartialEq, Default)]
pub struct Provisioning {
    /// NodeClaims to create.
    pub nodeclaims: Vec<PlannedNodeClaim>,
    /// Pending pods that fit on existing or launching nodes.
    pub existing_node_placements: Vec<Placement>,
    /// Pending pods that fit nowhere.
    pub unschedulable: Vec<Unschedulable>,
}

/// A disruption command: nodes to remove, and what replaces them.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DisruptionAction {
    /// `Empty`, `Drifted` or `Underutilized`.
    pub reason: String,
    /// Upstream's method name, such as `single-node consolidation`.
    pub method: String,
    /// The nodes removed.
    pub nodes: Vec<String>,
    /// For each replacement NodeClaim: its NodePool and instance types, cheapest first.
    pub replacements: Vec<PlannedNodeClaim>,
    /// What the cluster would cost less per hour.
    pub savings_per_hour: f64,
}

/// A node disruption would leave, and why.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Kept {
    /// The node.
    pub node: String,
    /// Why it stays.
    pub reason: String,
}

/// What disruption would do.
#[derive(Clone, Debug, Serialize, PartialEq, Default)]
pub struct Disruption {
    /// Nodes it would remove or replace.
    pub actions: Vec<DisruptionAction>,
    /// Nodes it would leave, and why.
    pub blocked: Vec<Kept>,
}

/// The plan.
#[derive(Clone, Debug, Serialize, PartialEq, Default)]
pub struct Plan {
    /// Provisioning decisions.
    pub provisioning: Provisioning,
    /// Disruption decisions.
    pub disruption: Disruption,
    /// What the snapshot held.
    pub snapshot: SnapshotSummary,
}

/// Counts of what the snapshot held.
#[derive(Clone, Debug, Serialize, PartialEq, Default)]
pub struct SnapshotSummary {
    /// Nodes.
    pub nodes: usize,
    /// NodeClaims that have no Node yet.
    pub launching: usize,
    /// Pods bound to nodes.
    pub bound_pods: usize,
    /// Pods not bound to a node.
    pub pending_pods: usize,
    /// NodePools.
    pub nodepools: usize,
    /// Objects of kinds the planner does not use.
    pub ignored: usize,
}

fn pod_name(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or("?")
    )
}

fn owned_by_daemonset(pod: &Pod) -> bool {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "DaemonSet")
}

fn finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

fn read<T: serde::de::DeserializeOwned>(
    file: &Path,
    document: usize,
    value: Value,
) -> Result<T, ScenarioError> {
    serde_path_to_error::deserialize(value).map_err(|e| ScenarioError::Invalid {
        file: file.to_path_buf(),
        document,
        path: e.path().to_string(),
        message: e.into_inner().to_string(),
    })
}

/// Plans from snapshot text, launching from `catalog`.
/// Plans from the snapshot in `text` (read from `file`), as of `now` (Unix seconds; budget
/// schedules, `consolidateAfter` and `do-not-disrupt` durations are measured against it).
pub fn plan(
    file: &Path,
    text: &str,
    catalog: &Catalog,
    now: i64,
    feature_gates: FeatureGates,
) -> Result<Plan, ScenarioError> {
    let mut nodes: Vec<Node> = Vec::new();
    let mut pods: Vec<Pod> = Vec::new();
    let mut pools: Vec<NodePool> = Vec::new();
    let mut claims: Vec<NodeClaim> = Vec::new();
    let mut daemonsets: Vec<DaemonSet> = Vec::new();
    let mut pdbs: Vec<PodDisruptionBudget> = Vec::new();
    let mut summary = SnapshotSummary::default();
    for doc in parse_documents(file, text)? {
        let kind = doc
            .object
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        match kind.as_str() {
            "Node" => nodes.push(read(file, doc.index, doc.object)?),
            "Pod" => pods.push(read(file, doc.index, doc.object)?),
            "NodePool" => pools.push(read(file, doc.index, doc.object)?),
            "NodeClaim" => claims.push(read(file, doc.index, doc.object)?),
            "DaemonSet" => daemonsets.push(read(file, doc.index, doc.object)?),
            "PodDisruptionBudget" => pdbs.push(read(file, doc.index, doc.object)?),
            _ => summary.ignored += 1,
        }
    }
    let mut bound: BTreeMap<String, Vec<Pod>> = BTreeMap::new();
    let mut pending = Vec::new();
    for pod in pods.into_iter().filter(|p| !finished(p)) {
        match pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
            Some(node) => bound.entry(node).or_default().push(pod),
            None if !owned_by_daemonset(&pod) && pod.metadata.deletion_timestamp.is_none() => {
                pending.push(pod)
            }
            None => {}
        }
    }
    let mut existing = Vec::new();
    for node in &nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        let labels = node.metadata.labels.clone().unwrap_or_default();
        let status = node.status.clone().unwrap_or_default();
        let resources = |list: Option<
            &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
        >| {
            list.and_then(|l| Resources::from_list(l).ok())
                .unwrap_or_default()
        };
        let ready = status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        let managed = labels.contains_key(NODE_POOL_LABEL);
        summary.bound_pods += bound.get(&name).map_or(0, Vec::len);
        existing.push(ExistingNodeInput {
            name: name.clone(),
            taints: node
                .spec
                .as_ref()
                .and_then(|s| s.taints.clone())
                .unwrap_or_default(),
            allocatable: resources(status.allocatable.as_ref()),
            capacity: resources(status.capacity.as_ref()),
            pods: BoundPod::all(bound.get(&name).into_iter().flatten()),
            initialized: ready
                && (!managed
                    || labels
                        .get(NODE_INITIALIZED_LABEL)
                        .is_some_and(|v| v == "true")),
            node_pool: labels.get(NODE_POOL_LABEL).cloned(),
            labels,
            ..Default::default()
        });
    }
    // NodeClaims still launching count as nodes that will come.
    for claim in &claims {
        let status = claim.status.clone().unwrap_or_default();
        let registered = status.node_name.as_ref().is_some_and(|n| {
            nodes
                .iter()
                .any(|node| node.metadata.name.as_ref() == Some(n))
        });
        if registered || claim.metadata.deletion_timestamp.is_some() {
            continue;
        }
        summary.launching += 1;
        let labels = claim.metadata.labels.clone().unwrap_or_default();
        existing.push(ExistingNodeInput {
            name: format!(
                "nodeclaim/{}",
                claim.metadata.name.as_deref().unwrap_or("?")
            ),
            taints: claim.spec.taints.clone(),
            startup_taints: claim.spec.startup_taints.clone(),
            allocatable: Resources::from_list(&status.allocatable).unwrap_or_default(),
            capacity: Resources::from_list(&status.capacity).unwrap_or_default(),
            initialized: false,
            node_pool: labels.get(NODE_POOL_LABEL).cloned(),
            labels,
            ..Default::default()
        });
    }
    summary.nodes = nodes.len();
    summary.pending_pods = pending.len();
    summary.nodepools = pools.len();
    let inputs: Vec<NodePoolInput> = pools
        .iter()
        .map(|np| NodePoolInput {
            node_pool: np.clone(),
            instance_types: catalog.instance_types.clone(),
        })
        .collect();
    let ds_pods: Vec<Pod> = daemonsets
        .iter()
        .map(|d| {
            let template = d
                .spec
                .as_ref()
                .map(|s| s.template.clone())
                .unwrap_or_default();
            Pod {
                metadata: template.metadata.unwrap_or_default(),
                spec: template.spec,
                status: None,
            }
        })
        .collect();
    let options = SchedulerOptions {
        provider_labels: catalog.provider_labels.clone(),
        ..Default::default()
    };
    let results = Scheduler::new(&inputs, &existing, &ds_pods, options).solve(&pending, &|| false);
    let mut provisioning = Provisioning::default();
    for claim in &results.new_node_claims {
        provisioning.nodeclaims.push(PlannedNodeClaim {
            nodepool: claim.node_pool.clone(),
            instance_types: claim
                .instance_types
                .iter()
                .map(|it| it.name.clone())
                .collect(),
            price_per_hour: claim.cheapest_price(),
            pods: claim.pods.iter().map(|&p| pod_name(&pending[p])).collect(),
            requirements: claim.requirements.iter().map(ToString::to_string).collect(),
        });
    }
    for (node, placed) in &results.existing_nodes {
        for &p in placed {
            provisioning.existing_node_placements.push(Placement {
                pod: pod_name(&pending[p]),
                node: node.clone(),
            });
        }
    }
    for (p, reason) in &results.pod_errors {
        provisioning.unschedulable.push(Unschedulable {
            pod: pod_name(&pending[*p]),
            reason: reason.clone(),
        });
    }
    let states = node_states(&nodes, &claims, &existing, &bound, catalog, now);
    let decision = disruption::decide(&disruption::Input {
        now,
        nodes: &states,
        node_pools: &inputs,
        pdbs: &pdbs,
        pending_pods: &pending,
        daemonset_pods: &ds_pods,
        options: SchedulerOptions {
            provider_labels: catalog.provider_labels.clone(),
            ..Default::default()
        },
        spot_to_spot: feature_gates.spot_to_spot_consolidation,
    });
    let disruption = Disruption {
        actions: decision
            .commands
            .iter()
            .map(|c| DisruptionAction {
                reason: c.reason.as_str().into(),
                method: c.method.as_str().into(),
                nodes: c.candidates.clone(),
                replacements: c
                    .replacements
                    .iter()
                    .map(|r| PlannedNodeClaim {
                        nodepool: r.node_pool.clone(),
                        instance_types: r.instance_types.iter().map(|it| it.name.clone()).collect(),
                        price_per_hour: r.cheapest_price(),
                        pods: Vec::new(),
                        requirements: r.requirements.iter().map(ToString::to_string).collect(),
                    })
                    .collect(),
                savings_per_hour: c.savings_per_hour,
            })
            .collect(),
        blocked: decision
            .blocked
            .into_iter()
            .map(|(node, block)| Kept {
                node,
                reason: block.reason,
            })
            .collect(),
    };
    Ok(Plan {
        provisioning,
        disruption,
        snapshot: summary,
    })
}

fn seconds(t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>) -> Option<i64> {
    t.map(|t| t.0.as_second())
}

/// What disruption sees of each registered node: its pods, price, age, last pod event and
/// whether its NodeClaim has drifted.
fn node_states(
    nodes: &[Node],
    claims: &[NodeClaim],
    existing: &[ExistingNodeInput],
    bound: &BTreeMap<String, Vec<Pod>>,
    catalog: &Catalog,
    now: i64,
) -> Vec<NodeState> {
    nodes
        .iter()
        .zip(existing)
        .map(|(node, input)| {
            let name = input.name.clone();
            let claim = claims
                .iter()
                .find(|c| c.status.as_ref().and_then(|s| s.node_name.as_ref()) == Some(&name));
            let status = claim.and_then(|c| c.status.as_ref());
            let label = |key: &str| {
                input
                    .labels
                    .get(key)
                    .map(String::as_str)
                    .unwrap_or_default()
            };
            let price = catalog
                .instance_types
                .iter()
                .find(|it| it.name == label(INSTANCE_TYPE_LABEL))
                .and_then(|it| {
                    it.offerings
                        .iter()
                        .find(|o| {
                            o.zone == label(ZONE_LABEL)
                                && o.capacity_type == label(CAPACITY_TYPE_LABEL)
                        })
                        .map(|o| o.price)
                })
                .unwrap_or(0.0);
            let created_at = seconds(node.metadata.creation_timestamp.as_ref()).unwrap_or(now);
            let ready = node
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            NodeState {
                name,
                node_pool: input.node_pool.clone(),
                labels: input.labels.clone(),
                annotations: node.metadata.annotations.clone().unwrap_or_default(),
                taints: input.taints.clone(),
                allocatable: input.allocatable.clone(),
                capacity: input.capacity.clone(),
                pods: bound.get(&input.name).cloned().unwrap_or_default(),
                initialized: input.initialized,
                ready,
                deleting: node.metadata.deletion_timestamp.is_some()
                    || claim.is_some_and(|c| c.metadata.deletion_timestamp.is_some()),
                nominated: false,
                price,
                created_at,
                last_pod_event: status
                    .and_then(|s| seconds(s.last_pod_event_time.as_ref()))
                    .unwrap_or(created_at),
                drifted: status.is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "Drifted" && c.status == "True")
                }),
            }
        })
        .collect()
}

impl Plan {
    /// The plan for people.
    pub fn to_text(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let s = &self.snapshot;
        let _ = writeln!(
            out,
            "Snapshot: {} nodes ({} more launching), {} NodePools, {} bound pods, {} pending pods",
            s.nodes, s.launching, s.nodepools, s.bound_pods, s.pending_pods
        );
        let p = &self.provisioning;
        let _ = writeln!(out, "\nWould launch {} NodeClaim(s)", p.nodeclaims.len());
        for c in &p.nodeclaims {
            let shown: Vec<&str> = c
                .instance_types
                .iter()
                .take(5)
                .map(String::as_str)
                .collect();
            let more = c.instance_types.len().saturating_sub(5);
            let price = c.price_per_hour.map_or("?".into(), |p| format!("{p:.4}/h"));
            let _ = writeln!(
                out,
                "  nodepool {}: from {price}, {}{} for {} pod(s): {}",
                c.nodepool,
                shown.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                },
                c.pods.len(),
                c.pods.join(", ")
            );
        }
        let _ = writeln!(
            out,
            "\nPending pods that fit on existing or launching nodes: {}",
            p.existing_node_placements.len()
        );
        for placement in &p.existing_node_placements {
            let _ = writeln!(out, "  {} → {}", placement.pod, placement.node);
        }
        let _ = writeln!(
            out,
            "\nPods that cannot be scheduled: {}",
            p.unschedulable.len()
        );
        for u in &p.unschedulable {
            let _ = writeln!(out, "  {}: {}", u.pod, u.reason);
        }
        let d = &self.disruption;
        let _ = writeln!(out, "\nDisruption actions: {}", d.actions.len());
        for a in &d.actions {
            let replacements: Vec<String> = a
                .replacements
                .iter()
                .map(|r| {
                    let price = r.price_per_hour.map_or("?".into(), |p| format!("{p:.4}/h"));
                    format!(
                        "nodepool {} from {price} ({})",
                        r.nodepool,
                        r.instance_types.first().map_or("?", String::as_str)
                    )
                })
                .collect();
            let _ = writeln!(
                out,
                "  {} ({}): {} {}, saving {:.4}/h",
                a.method,
                a.reason,
                if replacements.is_empty() {
                    "delete"
                } else {
                    "replace"
                },
                a.nodes.join(", "),
                a.savings_per_hour
            );
            if !replacements.is_empty() {
                let _ = writeln!(out, "    with {}", replacements.join("; "));
            }
        }
        let _ = writeln!(out, "\nNodes left as they are: {}", d.blocked.len());
        for k in &d.blocked {
            let _ = writeln!(out, "  {}: {}", k.node, k.reason);
        }
        out
    }
}
