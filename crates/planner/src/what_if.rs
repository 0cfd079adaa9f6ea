//! What if the NodePools or NodeClasses changed: `plan -f DUMP --nodepools NEW.yaml`.
//!
//! The dump is planned twice by the same round ([`plan_dump`]): as it is, and with its
//! NodePools and NodeClasses replaced by the proposal's (by name; the proposal's objects
//! override, the others stay). Between the two, every launched NodeClaim is judged for drift
//! against its NodePool as proposed, by the checks the drift controller sets `Drifted` with
//! ([`template_drift`]: the `karpenter.sh/nodepool-hash` annotation, then the requirements),
//! after stamping the hashes as the NodePool hash controller would; the claims that drift get
//! their `Drifted` condition, so the round after replaces them as the controller's would.
//!
//! Drift replaces one node per pass (or every empty one the budgets allow), so each drifted
//! node the round after does not reach is also planned alone — the same round over the
//! proposed dump with only that node drifted — to show what would replace it in a later pass
//! and what the cluster would cost once every drifted node is replaced.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use karpenter_api::labels::{DO_NOT_DISRUPT_ANNOTATION, NODE_POOL_LABEL};
use karpenter_api::nodeclaim::condition::DRIFTED;
use karpenter_api::{NodeClaim, NodePool};
use karpenter_cloudprovider::Catalog;
use karpenter_cloudprovider::catalog::format_price;
use karpenter_core::disruption::drift::{
    DriftReason, is_launched, node_claim_hash_annotations, node_pool_hash_annotations,
    template_drift,
};
use karpenter_core::feature_gates::FeatureGates;
use karpenter_core::provisioning::scheduling::NodePoolInput;
use karpenter_core::state::price_of;
use serde::Serialize;
use serde_json::Value;

use crate::{Dump, Plan, PlanError, PlannedNodeClaim, plan_dump, pool_inputs};

/// At most this many drifted nodes the round after does not reach are planned alone (each is
/// a full round); the rest are counted at their own price.
pub const MAX_PLANNED_ALONE: usize = 20;

/// A proposed change: NodePools and NodeClasses that replace the dump's of the same name, or
/// are added beside them.
#[derive(Clone, Debug, Default)]
pub struct Proposal {
    /// NodePools.
    pub node_pools: Vec<NodePool>,
    /// Provider NodeClasses, as written.
    pub node_classes: Vec<Value>,
}

impl Proposal {
    /// Reads the NodePools and NodeClasses of the manifests `path` names (a file, `-`, or a
    /// directory), defaulted as a dump's are; objects of other kinds are left out.
    pub fn read_path(path: &Path) -> Result<Self, PlanError> {
        Ok(Self::from_dump(Dump::read_path(path)?))
    }

    /// The NodePools and NodeClasses of `dump`.
    pub fn from_dump(dump: Dump) -> Self {
        Self {
            node_pools: dump.node_pools,
            node_classes: dump.node_classes,
        }
    }

    /// Whether it proposes nothing.
    pub fn is_empty(&self) -> bool {
        self.node_pools.is_empty() && self.node_classes.is_empty()
    }
}

/// `dump` with its NodePools and NodeClasses replaced by `proposal`'s of the same name (and
/// those it does not have added); nothing else changes.
pub fn apply(dump: &Dump, proposal: &Proposal) -> Dump {
    let mut out = dump.clone();
    for pool in &proposal.node_pools {
        match out.node_pools.iter_mut().find(|p| p.name() == pool.name()) {
            Some(p) => *p = pool.clone(),
            None => out.node_pools.push(pool.clone()),
        }
    }
    for class in &proposal.node_classes {
        let key = crate::warnings::node_class_key(class);
        match out
            .node_classes
            .iter_mut()
            .find(|c| key.is_some() && crate::warnings::node_class_key(c) == key)
        {
            Some(c) => *c = class.clone(),
            None => out.node_classes.push(class.clone()),
        }
    }
    out
}

/// A node the proposal drifts.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DriftedNode {
    /// The node (its NodeClaim's name while it has none).
    pub node: String,
    /// Its NodeClaim.
    pub nodeclaim: String,
    /// Its NodePool.
    pub nodepool: String,
    /// Upstream's reason: `NodePoolDrifted`, `RequirementsDrifted`, or the provider's
    /// (`NodeClassDrift`).
    pub reason: String,
    /// What it costs per hour now.
    pub price_per_hour: f64,
    /// A drift command of the round after the change acts on it.
    pub replaced_in_first_pass: bool,
    /// A drift command removes it, in the round after or when it is planned alone.
    pub removed: bool,
    /// What would replace it (none for an empty node, or one that stays).
    pub replacements: Vec<PlannedNodeClaim>,
    /// Why it stays, when no drift command takes it (budgets, pods that fit nowhere, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept: Option<String>,
}

/// What the cluster costs per hour before the change.
#[derive(Clone, Debug, Serialize, PartialEq, Default)]
pub struct CostBefore {
    /// The dump's nodes (and launched NodeClaims), priced from the catalog.
    pub nodes: f64,
    /// What the round over the dump as it is would launch for pending pods (and static
    /// capacity).
    pub launches: f64,
    /// Their sum.
    pub total: f64,
}

/// What the cluster costs per hour once the change is rolled out.
#[derive(Clone, Debug, Serialize, PartialEq, Default)]
pub struct CostAfter {
    /// The nodes no drift command removes.
    pub surviving: f64,
    /// What the round after the change would launch for pending pods (and static capacity).
    pub launches: f64,
    /// What replaces the drifted nodes.
    pub replacements: f64,
    /// Their sum.
    pub total: f64,
}

/// What a proposed change of NodePools or NodeClasses would do.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct WhatIf {
    /// The NodePools the proposal replaces or adds.
    pub changed_nodepools: Vec<String>,
    /// The NodeClasses it replaces or adds, as `Kind/name`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changed_nodeclasses: Vec<String>,
    /// The nodes it drifts, in the order drift would take them.
    pub drifted: Vec<DriftedNode>,
    /// Nodes drifted now that the proposal undrifts (their NodePool's template is back).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub undrifted: Vec<String>,
    /// The plan over the dump as it is.
    pub before: Plan,
    /// The plan over the dump with the proposal applied and the drifted nodes marked.
    pub after: Plan,
    /// The cost per hour before.
    pub cost_before: CostBefore,
    /// The cost per hour once every drifted node is replaced.
    pub cost_after: CostAfter,
    /// The currency of every price (ISO 4217).
    pub currency: String,
}

/// A NodeClaim's drift verdict against its NodePool before and after the change.
struct Verdict {
    node: String,
    claim: String,
    pool: String,
    price: f64,
    drifted_now: bool,
    before: Option<DriftReason>,
    after: Option<DriftReason>,
}

/// `pool` with the hash annotations its hash controller would give it.
fn stamped(pool: &NodePool) -> NodePool {
    let mut pool = pool.clone();
    if let Some(annotations) = node_pool_hash_annotations(&pool) {
        pool.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .extend(annotations);
    }
    pool
}

/// `claim` with the hash annotations the hash controller would give it under `pool` (a claim
/// of another hash version, or of none, takes its NodePool's current hash).
fn restamped(pool: &NodePool, claim: &NodeClaim) -> NodeClaim {
    let mut claim = claim.clone();
    if let Some(annotations) = node_claim_hash_annotations(pool, &claim) {
        claim
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .extend(annotations);
    }
    claim
}

/// The price of a planned launch: its cheapest launch, else its cheapest type.
fn claim_price(c: &PlannedNodeClaim) -> f64 {
    c.launch
        .as_ref()
        .map(|l| l.price_per_hour)
        .or(c.price_per_hour)
        .unwrap_or(0.0)
}

fn launches(plan: &Plan) -> f64 {
    plan.provisioning
        .nodeclaims
        .iter()
        .chain(&plan.static_capacity.nodeclaims)
        .map(claim_price)
        .fold(0.0, |a, b| a + b)
}

/// Every launched NodeClaim of `dump`, judged against its NodePool in `dump` and in `proposed`.
fn verdicts(
    dump: &Dump,
    proposed: &Dump,
    pools: &[NodePoolInput],
    catalog: &Catalog,
    node_class_drift: &dyn Fn(&NodeClaim) -> Option<DriftReason>,
) -> (Vec<Verdict>, f64) {
    // Nodes of no NodePool karpenter launches from are priced from the catalog alone.
    let catalog_pool = [NodePoolInput {
        node_pool: NodePool::default(),
        instance_types: catalog.instance_types.clone(),
    }];
    let old: BTreeMap<&str, NodePool> = dump
        .node_pools
        .iter()
        .map(|p| (p.name(), stamped(p)))
        .collect();
    let new: BTreeMap<&str, NodePool> = proposed
        .node_pools
        .iter()
        .map(|p| (p.name(), stamped(p)))
        .collect();
    let snapshot = dump.cluster.snapshot(pools, &catalog.provider_labels);
    let mut cost = 0.0;
    let mut out = Vec::new();
    for n in &snapshot.nodes {
        let labels = n.labels(&catalog.provider_labels);
        let price = n
            .node_pool()
            .map(|p| price_of(pools, p, &labels))
            .filter(|p| *p > 0.0)
            .unwrap_or_else(|| price_of(&catalog_pool, "", &labels));
        cost += price;
        let Some(claim) = n.claim else { continue };
        if !is_launched(claim) || n.deleting() {
            continue;
        }
        let Some(pool) = claim
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(NODE_POOL_LABEL))
        else {
            continue;
        };
        let (Some(old_pool), Some(new_pool)) = (old.get(pool.as_str()), new.get(pool.as_str()))
        else {
            continue;
        };
        // As the hash controller would have stamped it under the NodePool as it is.
        let claim = restamped(old_pool, claim);
        out.push(Verdict {
            node: n.name().to_string(),
            claim: claim.metadata.name.clone().unwrap_or_default(),
            pool: pool.clone(),
            price,
            drifted_now: n.drifted(),
            before: template_drift(old_pool, &claim),
            after: template_drift(new_pool, &claim).or_else(|| node_class_drift(&claim)),
        });
    }
    (out, cost)
}

/// `dump` with the `Drifted` condition of the claims named in `drifted` set (with the reason
/// and `now` as its transition time), and that of those in `cleared` removed.
fn with_drift(
    dump: &Dump,
    drifted: &BTreeMap<String, String>,
    cleared: &BTreeSet<String>,
    now: i64,
) -> Dump {
    let mut out = dump.clone();
    let at = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::from_second(now)
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
    );
    for claim in &mut out.cluster.node_claims {
        let name = claim.metadata.name.as_deref().unwrap_or_default();
        let reason = drifted.get(name);
        if reason.is_none() && !cleared.contains(name) {
            continue;
        }
        let mut c = (**claim).clone();
        let status = c.status.get_or_insert_with(Default::default);
        status.conditions.retain(|c| c.type_ != DRIFTED);
        if let Some(reason) = reason {
            status
                .conditions
                .push(k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
                    type_: DRIFTED.into(),
                    status: "True".into(),
                    reason: reason.clone(),
                    message: String::new(),
                    last_transition_time: at.clone(),
                    observed_generation: None,
                });
        }
        *claim = Arc::new(c);
    }
    out
}

/// `dump` with every NodeClaim but `claim` annotated `karpenter.sh/do-not-disrupt`, so that a
/// round's disruption may act on that one node alone (the others stay, as destinations for
/// its pods).
fn alone(dump: &Dump, claim: &str) -> Dump {
    let mut out = dump.clone();
    for c in &mut out.cluster.node_claims {
        if c.metadata.name.as_deref() == Some(claim) {
            continue;
        }
        let mut held = (**c).clone();
        held.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(DO_NOT_DISRUPT_ANNOTATION.into(), "true".into());
        *c = Arc::new(held);
    }
    out
}

/// What `proposal` would do to the cluster of `dump`, as of `now` (Unix seconds), every
/// NodePool offering `catalog` (the NodeOverlays applied when their gate is on), as
/// [`plan_from`](crate::plan_from) plans.
pub fn what_if(
    dump: &Dump,
    proposal: &Proposal,
    catalog: &Catalog,
    now: i64,
    gates: FeatureGates,
) -> WhatIf {
    what_if_with(
        dump,
        proposal,
        catalog,
        now,
        gates,
        &|d| pool_inputs(d, catalog, gates),
        &|_, _| None,
    )
}

/// A provider's static NodeClass drift: the reason (`NodeClassDrift`) a NodeClaim launched
/// from an earlier version of the NodeClass (as written, the first argument) has drifted, by
/// the hash it recorded at launch.
pub type NodeClassDrift<'a> = &'a dyn Fn(&Value, &NodeClaim) -> Option<String>;

/// [`what_if`], each round launching from the pools `pools_of` gives for its dump (a live
/// cluster's: each NodePool with its provider's instance types), and the NodeClaims of a
/// NodeClass the proposal changes judged by `node_class_drift` where their NodePool has not
/// drifted (upstream asks the provider after the NodePool's checks). `catalog` gives the
/// provider labels, repair policies and currency, and prices the nodes of no such pool.
pub fn what_if_with(
    dump: &Dump,
    proposal: &Proposal,
    catalog: &Catalog,
    now: i64,
    gates: FeatureGates,
    pools_of: &dyn Fn(&Dump) -> Vec<NodePoolInput>,
    node_class_drift: NodeClassDrift<'_>,
) -> WhatIf {
    let plan_from = |d: &Dump, catalog: &Catalog, now: i64, gates: FeatureGates| {
        plan_dump(d, &pools_of(d), catalog, now, gates)
    };
    let proposed = apply(dump, proposal);
    let judge = |claim: &NodeClaim| {
        let r = &claim.spec.node_class_ref;
        let class = proposal.node_classes.iter().find(|c| {
            crate::warnings::node_class_key(c).is_some_and(|(group, kind, name)| {
                (group.as_str(), kind.as_str(), name.as_str())
                    == (r.group.as_str(), r.kind.as_str(), r.name.as_str())
            })
        })?;
        node_class_drift(class, claim).map(DriftReason::Provider)
    };
    let (verdicts, nodes_cost) = verdicts(dump, &proposed, &pools_of(dump), catalog, &judge);
    // The proposal drifts what is not drifted now; it undrifts what its template drifted.
    let mut drifting: BTreeMap<String, String> = BTreeMap::new();
    let mut cleared = BTreeSet::new();
    for v in &verdicts {
        match (&v.after, v.drifted_now) {
            (Some(reason), false) => {
                drifting.insert(v.claim.clone(), reason.as_str().to_string());
            }
            (None, true) if v.before.is_some() => {
                cleared.insert(v.claim.clone());
            }
            _ => {}
        }
    }
    let after_dump = with_drift(&proposed, &drifting, &cleared, now);
    let before = plan_from(dump, catalog, now, gates);
    let after = plan_from(&after_dump, catalog, now, gates);

    let drift_command = |plan: &Plan, node: &str| {
        plan.disruption
            .actions
            .iter()
            .find(|a| a.reason == "Drifted" && a.nodes.iter().any(|n| n == node))
            .cloned()
    };
    let kept_reason = |plan: &Plan, node: &str| {
        plan.disruption
            .blocked
            .iter()
            .find(|k| k.node == node)
            .map(|k| k.reason.clone())
    };
    let mut drifted: Vec<DriftedNode> = Vec::new();
    let mut planned_alone = 0;
    // By node name: every one drifts at the same time, and drift takes them by name.
    let mut order: Vec<&Verdict> = verdicts
        .iter()
        .filter(|v| drifting.contains_key(&v.claim))
        .collect();
    order.sort_by(|a, b| a.node.cmp(&b.node));
    for v in order {
        let reason = drifting[&v.claim].clone();
        let mut d = DriftedNode {
            node: v.node.clone(),
            nodeclaim: v.claim.clone(),
            nodepool: v.pool.clone(),
            reason,
            price_per_hour: v.price,
            replaced_in_first_pass: false,
            removed: false,
            replacements: Vec::new(),
            kept: None,
        };
        if let Some(a) = drift_command(&after, &v.node) {
            d.replaced_in_first_pass = true;
            d.removed = true;
            // A command over several empty nodes replaces none of them.
            d.replacements = a.replacements;
        } else if planned_alone < MAX_PLANNED_ALONE {
            planned_alone += 1;
            // The same round with only this node drifted, and only it disruptable: what a
            // later pass would do with it once the passes before it are done.
            let only: BTreeMap<String, String> =
                BTreeMap::from([(v.claim.clone(), d.reason.clone())]);
            let others: BTreeSet<String> = verdicts
                .iter()
                .filter(|o| o.claim != v.claim)
                .map(|o| o.claim.clone())
                .collect();
            let plan = plan_from(
                &with_drift(&alone(&proposed, &v.claim), &only, &others, now),
                catalog,
                now,
                gates,
            );
            // Drift, or emptiness first (it comes before drift) when the node has no pods.
            let command = drift_command(&plan, &v.node).or_else(|| {
                plan.disruption
                    .actions
                    .iter()
                    .find(|a| a.nodes.contains(&v.node))
                    .cloned()
            });
            match command {
                Some(a) => {
                    d.removed = true;
                    d.replacements = a.replacements;
                }
                None => d.kept = kept_reason(&plan, &v.node),
            }
        } else {
            d.kept = kept_reason(&after, &v.node)
                .or_else(|| Some("not planned: too many drifted nodes to plan each".into()));
        }
        drifted.push(d);
    }
    let removed: f64 = drifted
        .iter()
        .filter(|d| d.removed)
        .map(|d| d.price_per_hour)
        .fold(0.0, |a, b| a + b);
    let before_launches = launches(&before);
    let cost_before = CostBefore {
        nodes: nodes_cost,
        launches: before_launches,
        total: nodes_cost + before_launches,
    };
    let replacements: f64 = drifted
        .iter()
        .flat_map(|d| &d.replacements)
        .map(claim_price)
        .fold(0.0, |a, b| a + b);
    let after_launches = launches(&after);
    let surviving = (nodes_cost - removed).max(0.0);
    let cost_after = CostAfter {
        surviving,
        launches: after_launches,
        replacements,
        total: surviving + after_launches + replacements,
    };
    let mut changed_nodeclasses: Vec<String> = proposal
        .node_classes
        .iter()
        .filter_map(crate::warnings::node_class_key)
        .map(|(_, kind, name)| format!("{kind}/{name}"))
        .collect();
    changed_nodeclasses.sort();
    WhatIf {
        changed_nodepools: proposal
            .node_pools
            .iter()
            .map(|p| p.name().to_string())
            .collect(),
        changed_nodeclasses,
        drifted,
        undrifted: verdicts
            .iter()
            .filter(|v| cleared.contains(&v.claim))
            .map(|v| v.node.clone())
            .collect(),
        before,
        after,
        cost_before,
        cost_after,
        currency: catalog.currency.to_string(),
    }
}

impl WhatIf {
    /// The report for people: the nodes that drift and what replaces them, the launches
    /// before and after, and the cost per hour before and after.
    pub fn to_text(&self) -> String {
        use std::fmt::Write;
        let money = |amount: f64| format_price(&self.currency, amount);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "What if: {} NodePool(s) replaced or added ({}){}",
            self.changed_nodepools.len(),
            self.changed_nodepools.join(", "),
            if self.changed_nodeclasses.is_empty() {
                String::new()
            } else {
                format!(", NodeClasses {}", self.changed_nodeclasses.join(", "))
            }
        );
        if !self.changed_nodeclasses.is_empty() {
            let _ = writeln!(
                out,
                "  NodeClaims are judged against the new NodeClasses by their hash (NodeClassDrift); what a NodeClass resolves to (images, subnets) is judged at run time and not shown"
            );
        }
        if !self.after.warnings.is_empty() {
            let _ = writeln!(
                out,
                "\nWarnings after the change: {}",
                self.after.warnings.len()
            );
            for w in &self.after.warnings {
                let _ = writeln!(out, "  {w}");
            }
        }
        let _ = writeln!(out, "\nNodes that would drift: {}", self.drifted.len());
        for d in &self.drifted {
            let _ = writeln!(
                out,
                "  {} (nodepool {}, {}/h): {}",
                d.node,
                d.nodepool,
                money(d.price_per_hour),
                d.reason
            );
            let when = if d.replaced_in_first_pass {
                "now"
            } else {
                "in a later pass"
            };
            if !d.removed {
                let kept = d.kept.as_deref().unwrap_or("no drift command takes it");
                let _ = writeln!(out, "    stays: {kept}");
            } else if d.replacements.is_empty() {
                let _ = writeln!(out, "    deleted {when} (empty)");
            } else {
                for r in &d.replacements {
                    let what = r.launch.as_ref().map_or_else(
                        || r.instance_types.first().cloned().unwrap_or_default(),
                        |l| format!("{} {} in {}", l.instance_type, l.capacity_type, l.zone),
                    );
                    let _ = writeln!(
                        out,
                        "    replaced {when} by nodepool {}: {what} at {}/h",
                        r.nodepool,
                        money(claim_price(r))
                    );
                }
            }
        }
        if !self.undrifted.is_empty() {
            let _ = writeln!(
                out,
                "\nNodes drifted now that would no longer be: {}",
                self.undrifted.join(", ")
            );
        }
        let launch_lines = |plan: &Plan, out: &mut String| {
            for c in plan
                .provisioning
                .nodeclaims
                .iter()
                .chain(&plan.static_capacity.nodeclaims)
            {
                let what = c.launch.as_ref().map_or_else(
                    || c.instance_types.first().cloned().unwrap_or_default(),
                    |l| format!("{} {} in {}", l.instance_type, l.capacity_type, l.zone),
                );
                let _ = writeln!(
                    out,
                    "  nodepool {}: {what} at {}/h for {} pod(s)",
                    c.nodepool,
                    money(claim_price(c)),
                    c.pods.len()
                );
            }
        };
        let count = |p: &Plan| p.provisioning.nodeclaims.len() + p.static_capacity.nodeclaims.len();
        let _ = writeln!(out, "\nLaunches before: {}", count(&self.before));
        launch_lines(&self.before, &mut out);
        let _ = writeln!(out, "Launches after: {}", count(&self.after));
        launch_lines(&self.after, &mut out);
        let unschedulable = |p: &Plan| p.provisioning.unschedulable.len();
        if unschedulable(&self.before) != unschedulable(&self.after) {
            let _ = writeln!(
                out,
                "Pods that cannot be scheduled: {} before, {} after",
                unschedulable(&self.before),
                unschedulable(&self.after)
            );
            for u in &self.after.provisioning.unschedulable {
                let _ = writeln!(out, "  {}: {}", u.pod, u.reason);
            }
        }
        let b = &self.cost_before;
        let a = &self.cost_after;
        let _ = writeln!(out, "\nCost per hour");
        let _ = writeln!(
            out,
            "  before: {} = nodes {} + launches {}",
            money(b.total),
            money(b.nodes),
            money(b.launches)
        );
        let _ = writeln!(
            out,
            "  after:  {} = surviving nodes {} + launches {} + replacements {}",
            money(a.total),
            money(a.surviving),
            money(a.launches),
            money(a.replacements)
        );
        let delta = a.total - b.total;
        let _ = writeln!(
            out,
            "  change: {}{}/h",
            if delta < 0.0 { "-" } else { "+" },
            money(delta.abs())
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use std::fmt::Write;

    use karpenter_api::hash::NODE_POOL_HASH_VERSION;
    use karpenter_api::labels::{NODE_POOL_HASH_ANNOTATION, NODE_POOL_HASH_VERSION_ANNOTATION};
    use karpenter_core::instancetype::fake::FakeInstanceType;

    use super::*;

    const NOW: i64 = 1_750_000_000;

    fn catalog() -> Catalog {
        let offerings = |price: f64| {
            [
                ("on-demand", "zone-a", price),
                ("on-demand", "zone-b", price),
            ]
        };
        Catalog::new(
            "test",
            [
                FakeInstanceType::new("small")
                    .resources(&[("cpu", "2"), ("memory", "4Gi"), ("pods", "10")])
                    .offerings(&offerings(0.10))
                    .build(),
                FakeInstanceType::new("large")
                    .resources(&[("cpu", "8"), ("memory", "16Gi"), ("pods", "40")])
                    .offerings(&offerings(0.40))
                    .build(),
            ],
            &[],
        )
    }

    fn pool(labels: &str, zones: &str) -> String {
        format!(
            r#"---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: default}}
spec:
  template:
    metadata: {{labels: {{{labels}}}}}
    spec:
      nodeClassRef: {{group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}}
      requirements:
      - {{key: topology.kubernetes.io/zone, operator: In, values: [{zones}]}}
      - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
"#
        )
    }

    fn pod(name: &str, node: Option<&str>) -> String {
        let (node, status) = match node {
            Some(n) => (format!("nodeName: {n}, "), "{phase: Running}".to_string()),
            // Pending, for zone-b only.
            None => (
                "nodeSelector: {topology.kubernetes.io/zone: zone-b}, ".to_string(),
                r#"{phase: Pending, conditions: [{type: PodScheduled, status: "False", reason: Unschedulable}]}"#
                    .to_string(),
            ),
        };
        format!(
            r#"---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
  ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: web, uid: u1, controller: true}}]
spec: {{{node}containers: [{{name: c, image: i, resources: {{requests: {{cpu: 1500m, memory: 1Gi}}}}}}]}}
status: {status}
"#
        )
    }

    /// Three small nodes of NodePool `default` (`team: web`, zones a and b), n1 and n3 in
    /// zone a and n2 in zone b, each with a pod of 1 CPU, and one pending pod; NodePool and
    /// NodeClaims carry the NodePool's hash, as the hash controller left them.
    fn dump() -> Dump {
        let mut text = pool("team: web", "zone-a, zone-b");
        for (i, zone) in [(1, "zone-a"), (2, "zone-b"), (3, "zone-a")] {
            let labels = format!(
                "{{karpenter.sh/nodepool: default, karpenter.sh/initialized: \"true\", karpenter.sh/registered: \"true\", node.kubernetes.io/instance-type: small, topology.kubernetes.io/zone: {zone}, karpenter.sh/capacity-type: on-demand, kubernetes.io/arch: amd64, kubernetes.io/os: linux, team: web}}"
            );
            let _ = write!(
                text,
                r#"---
apiVersion: v1
kind: Node
metadata: {{name: n{i}, labels: {labels}, creationTimestamp: "2025-06-15T00:00:00Z"}}
spec: {{providerID: "kwok://n{i}"}}
status:
  allocatable: {{cpu: "2", memory: 4Gi, pods: "10"}}
  capacity: {{cpu: "2", memory: 4Gi, pods: "10"}}
  conditions: [{{type: Ready, status: "True", lastTransitionTime: "2025-06-15T00:00:00Z"}}]
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {{name: c{i}, labels: {labels}, creationTimestamp: "2025-06-15T00:00:00Z"}}
spec:
  nodeClassRef: {{group: karpenter.kwok.sh, kind: KWOKNodeClass, name: default}}
  requirements: []
status:
  providerID: "kwok://n{i}"
  nodeName: n{i}
  conditions:
  - {{type: Launched, status: "True", reason: Launched, message: "", lastTransitionTime: "2025-06-15T00:00:00Z"}}
  - {{type: Initialized, status: "True", reason: Initialized, message: "", lastTransitionTime: "2025-06-15T00:00:00Z"}}
"#
            );
            text.push_str(&pod(&format!("p{i}"), Some(&format!("n{i}"))));
        }
        text.push_str(&pod("pending", None));
        let mut dump = Dump::read(Path::new("dump.yaml"), &text).unwrap();
        let hash = dump.node_pools[0].hash();
        let annotations = BTreeMap::from([
            (NODE_POOL_HASH_ANNOTATION.to_string(), hash),
            (
                NODE_POOL_HASH_VERSION_ANNOTATION.to_string(),
                NODE_POOL_HASH_VERSION.to_string(),
            ),
        ]);
        dump.node_pools[0].metadata.annotations = Some(annotations.clone());
        for claim in &mut dump.cluster.node_claims {
            let mut c = (**claim).clone();
            c.metadata.annotations = Some(annotations.clone());
            *claim = Arc::new(c);
        }
        dump
    }

    fn proposal(text: &str) -> Proposal {
        Proposal::from_dump(Dump::read(Path::new("new.yaml"), text).unwrap())
    }

    fn what_if_of(text: &str) -> WhatIf {
        what_if(
            &dump(),
            &proposal(text),
            &catalog(),
            NOW,
            FeatureGates::default(),
        )
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn a_requirement_change_drifts_exactly_the_nodes_outside_it() {
        let w = what_if_of(&pool("team: web", "zone-a"));
        let drifted: Vec<(&str, &str)> = w
            .drifted
            .iter()
            .map(|d| (d.node.as_str(), d.reason.as_str()))
            .collect();
        assert_eq!(drifted, [("n2", "RequirementsDrifted")], "{}", w.to_text());
        let d = &w.drifted[0];
        assert!(d.replaced_in_first_pass && d.removed, "{d:?}");
        assert_eq!(d.replacements.len(), 1, "{d:?}");
        let launch = d.replacements[0].launch.as_ref().unwrap();
        assert_eq!(
            (launch.instance_type.as_str(), launch.zone.as_str()),
            ("small", "zone-a")
        );
        // The round before has nothing to replace; the round after replaces n2.
        assert!(
            w.before
                .disruption
                .actions
                .iter()
                .all(|a| a.reason != "Drifted")
        );
        assert!(
            w.after
                .disruption
                .actions
                .iter()
                .any(|a| a.reason == "Drifted" && a.nodes == ["n2"]),
            "{:?}",
            w.after.disruption
        );
        // The pending pod, for zone-b, launches before the change and cannot after it.
        assert_eq!(w.before.provisioning.nodeclaims.len(), 1);
        assert!(w.after.provisioning.nodeclaims.is_empty());
        assert_eq!(w.after.provisioning.unschedulable.len(), 1);
    }

    #[test]
    fn a_template_label_change_drifts_every_node_by_hash() {
        let w = what_if_of(&pool("team: api", "zone-a, zone-b"));
        let drifted: Vec<(&str, &str)> = w
            .drifted
            .iter()
            .map(|d| (d.node.as_str(), d.reason.as_str()))
            .collect();
        assert_eq!(
            drifted,
            [
                ("n1", "NodePoolDrifted"),
                ("n2", "NodePoolDrifted"),
                ("n3", "NodePoolDrifted")
            ],
            "{}",
            w.to_text()
        );
        // The default budget (10% of 3 nodes, rounded up) lets drift take one node a pass;
        // the others are replaced in later passes, each planned alone.
        assert_eq!(
            w.drifted
                .iter()
                .filter(|d| d.replaced_in_first_pass)
                .count(),
            1
        );
        assert!(
            w.drifted
                .iter()
                .all(|d| d.removed && d.replacements.len() == 1),
            "{:?}",
            w.drifted
        );
    }

    #[test]
    fn an_unchanged_nodepool_drifts_nothing() {
        // As a user would write it: no hash annotations, defaults left out.
        let w = what_if_of(&pool("team: web", "zone-a, zone-b"));
        assert!(w.drifted.is_empty(), "{:?}", w.drifted);
        assert_eq!(w.before, w.after);
        assert!(close(w.cost_before.total, w.cost_after.total));
        // Nor does a NodePool of another name, which is only added.
        let other = pool("team: web", "zone-a").replace("name: default", "name: other");
        let w = what_if_of(&other);
        assert!(w.drifted.is_empty(), "{:?}", w.drifted);
        assert_eq!(w.changed_nodepools, ["other"]);
    }

    #[test]
    fn costs_before_and_after_add_up() {
        let w = what_if_of(&pool("team: web", "zone-a"));
        let (b, a) = (&w.cost_before, &w.cost_after);
        // Three small nodes at 0.10, and one launch of 0.10 for the pending pod.
        assert!(close(b.nodes, 0.30) && close(b.launches, 0.10), "{b:?}");
        assert!(close(b.total, 0.40), "{b:?}");
        // n2 goes (0.10), its replacement comes (0.10), the pending pod (for zone-b) no
        // longer launches.
        assert!(close(a.surviving, 0.20), "{a:?}");
        assert!(
            close(a.launches, 0.0) && close(a.replacements, 0.10),
            "{a:?}"
        );
        assert!(close(a.total, 0.30), "{a:?}");
        let text = w.to_text();
        assert!(text.contains("before: $0.4000"), "{text}");
        assert!(text.contains("after:  $0.3000"), "{text}");
        assert!(text.contains("change: -$0.1000/h"), "{text}");
        assert!(
            text.contains("n2 (nodepool default, $0.1000/h): RequirementsDrifted"),
            "{text}"
        );
    }

    #[test]
    fn a_changed_nodeclass_drifts_the_claims_of_it_by_the_providers_check() {
        let class = |name: &str| {
            format!(
                "apiVersion: karpenter.kwok.sh/v1alpha1\nkind: KWOKNodeClass\nmetadata: {{name: {name}}}\nspec: {{}}\n"
            )
        };
        let catalog = catalog();
        let judged = |text: &str| {
            // The provider's check, as the CLI gives it: here, every claim of the class drifted.
            what_if_with(
                &dump(),
                &proposal(text),
                &catalog,
                NOW,
                FeatureGates::default(),
                &|d| pool_inputs(d, &catalog, FeatureGates::default()),
                &|class, claim| {
                    assert_eq!(claim.spec.node_class_ref.name, class["metadata"]["name"]);
                    Some("NodeClassDrift".into())
                },
            )
        };
        let w = judged(&class("default"));
        let reasons: Vec<&str> = w.drifted.iter().map(|d| d.reason.as_str()).collect();
        assert_eq!(reasons, ["NodeClassDrift"; 3], "{}", w.to_text());
        assert_eq!(w.changed_nodeclasses, ["KWOKNodeClass/default"]);
        // A NodeClass no claim was launched from drifts none; the NodePool's checks come first.
        assert!(judged(&class("other")).drifted.is_empty());
        let both = pool("team: web", "zone-a") + "---\n" + &class("default");
        let reasons: Vec<(String, String)> = judged(&both)
            .drifted
            .iter()
            .map(|d| (d.node.clone(), d.reason.clone()))
            .collect();
        assert_eq!(reasons[1], ("n2".into(), "RequirementsDrifted".into()));
        assert_eq!(reasons[0].1, "NodeClassDrift");
    }

    #[test]
    fn the_proposal_replaces_by_name_and_keeps_the_rest() {
        let mut d = dump();
        d.node_classes.push(serde_json::json!({
            "apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass",
            "metadata": {"name": "default"}, "spec": {}}));
        let p = proposal(
            &(pool("team: api", "zone-a")
                + "---\napiVersion: karpenter.kwok.sh/v1alpha1\nkind: KWOKNodeClass\nmetadata: {name: default}\nspec: {nodeRegistrationDelay: 1s}\n"),
        );
        let out = apply(&d, &p);
        assert_eq!(out.node_pools.len(), 1);
        assert_eq!(
            out.node_pools[0].spec.template.metadata.labels.get("team"),
            Some(&"api".to_string())
        );
        assert_eq!(out.node_classes.len(), 1);
        assert!(
            out.node_classes[0]
                .pointer("/spec/nodeRegistrationDelay")
                .is_some()
        );
        assert_eq!(out.cluster.nodes.len(), d.cluster.nodes.len());
    }
}
