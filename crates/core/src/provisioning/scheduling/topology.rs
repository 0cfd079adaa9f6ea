//! Topology: pod topology spread, pod affinity and pod anti-affinity, as domain counts per
//! topology key. Pods that share a constraint share one group (a Deployment of 1,000 replicas
//! with self anti-affinity is one group with 1,000 owners).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use k8s_openapi::api::core::v1::{PodAffinityTerm, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use karpenter_api::Operator;
use karpenter_api::labels::HOSTNAME_LABEL;

use super::BoundPod;
use crate::scheduling::{AllowUndefined, Requirement, Requirements, selector, taints};
use crate::state::pods::ObservedPod;

/// What a group constrains.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupKind {
    /// A topology spread constraint.
    Spread,
    /// Pod affinity: go where the selected pods are.
    Affinity,
    /// Pod anti-affinity: stay away from where the selected pods are.
    AntiAffinity,
}

/// Which nodes a spread constraint counts (`nodeAffinityPolicy`/`nodeTaintsPolicy: Honor`).
#[derive(Clone, Debug, Default, PartialEq)]
struct NodeFilter {
    /// OR-ed requirement terms; empty matches every node.
    terms: Vec<Requirements>,
    /// Tolerations a node's taints must satisfy, when taints are honoured.
    tolerations: Option<Vec<k8s_openapi::api::core::v1::Toleration>>,
}

impl NodeFilter {
    fn matches(
        &self,
        node_taints: &[Taint],
        requirements: &Requirements,
        allow: AllowUndefined<'_>,
    ) -> bool {
        let taints_ok = self
            .tolerations
            .as_ref()
            .is_none_or(|t| taints::first_untolerated(node_taints, t).is_none());
        taints_ok
            && (self.terms.is_empty()
                || self
                    .terms
                    .iter()
                    .any(|term| requirements.compatible(term, allow).is_ok()))
    }
}

/// Pods that constrain each other in one topology key.
#[derive(Clone, Debug)]
pub struct TopologyGroup {
    kind: GroupKind,
    key: String,
    namespaces: BTreeSet<String>,
    selector: LabelSelector,
    max_skew: i32,
    min_domains: Option<i32>,
    filter: NodeFilter,
    /// Matching pods per domain.
    domains: FxHashMap<String, i32>,
    empty_domains: FxHashSet<String>,
}

impl TopologyGroup {
    fn identity(&self) -> String {
        format!(
            "{:?}|{}|{:?}|{}|{:?}|{:?}|{}",
            self.kind,
            self.key,
            self.namespaces,
            self.max_skew,
            self.min_domains,
            self.filter,
            selector::canonical(&self.selector)
        )
    }

    fn selects(&self, namespace: &str, labels: &BTreeMap<String, String>) -> bool {
        self.namespaces.contains(namespace) && selector::matches(&self.selector, labels)
    }

    fn register(&mut self, domain: &str) {
        if !self.domains.contains_key(domain) {
            self.domains.insert(domain.to_string(), 0);
            self.empty_domains.insert(domain.to_string());
        }
    }

    fn record(&mut self, domain: &str) {
        *self.domains.entry(domain.to_string()).or_insert(0) += 1;
        self.empty_domains.remove(domain);
    }

    /// The domains a pod may go to on a node whose requirement on the key is `node_domains`
    /// (`None` means unconstrained, as does a missing pod requirement).
    fn next_domains(
        &self,
        self_selecting: bool,
        pod_domains: Option<&Requirement>,
        node_domains: Option<&Requirement>,
    ) -> Choice {
        match self.kind {
            GroupKind::Spread => self.next_spread(self_selecting, pod_domains, node_domains),
            GroupKind::Affinity => self.next_affinity(self_selecting, pod_domains, node_domains),
            GroupKind::AntiAffinity => self.next_anti_affinity(pod_domains, node_domains),
        }
    }

    /// A new NodeClaim is one hostname domain of its own, known only by its placeholder.
    fn single_node_domain<'a>(&self, node_domains: Option<&'a Requirement>) -> Option<&'a str> {
        let r = node_domains?;
        if self.key != HOSTNAME_LABEL || r.operator() != Operator::In || r.values().len() != 1 {
            return None;
        }
        r.values().next()
    }

    fn count(&self, domain: &str) -> i32 {
        self.domains.get(domain).copied().unwrap_or(0)
    }

    fn one(&self, domain: &str, node_domains: Option<&Requirement>) -> Choice {
        if node_domains
            .is_some_and(|r| r.operator() == Operator::In && r.values().len() == 1 && r.has(domain))
        {
            Choice::Keep
        } else {
            Choice::Narrow(Requirement::new(&self.key, Operator::In, &[domain]))
        }
    }

    fn min_count(&self, pod_domains: Option<&Requirement>) -> i32 {
        // A new node is always an empty hostname domain.
        if self.key == HOSTNAME_LABEL {
            return 0;
        }
        let mut supported = 0;
        let mut min = i32::MAX;
        for (d, c) in &self.domains {
            if allows(pod_domains, d) {
                supported += 1;
                min = min.min(*c);
            }
        }
        if self.min_domains.is_some_and(|m| supported < m) {
            return 0;
        }
        min
    }

    fn next_spread(
        &self,
        self_selecting: bool,
        pod_domains: Option<&Requirement>,
        node_domains: Option<&Requirement>,
    ) -> Choice {
        let own = i32::from(self_selecting);
        if let Some(host) = self.single_node_domain(node_domains) {
            return if self.count(host) + own <= self.max_skew {
                Choice::Keep
            } else {
                Choice::Nothing
            };
        }
        let min = self.min_count(pod_domains);
        // The emptiest valid domain; ties go to the first name, so runs are reproducible.
        let consider = |domain: &'_ str, count: i32| -> Option<(i32, String)> {
            let count = count + own;
            (count.saturating_sub(min) <= self.max_skew).then(|| (count, domain.to_string()))
        };
        let mut chosen: Option<(i32, String)> = None;
        match node_domains.filter(|r| r.operator() == Operator::In) {
            Some(r) => {
                for d in r.values() {
                    if let Some(c) = self.domains.get(d)
                        && let Some(candidate) = consider(d, *c)
                        && chosen.as_ref().is_none_or(|b| candidate < *b)
                    {
                        chosen = Some(candidate);
                    }
                }
            }
            None => {
                for (d, c) in &self.domains {
                    if allows(node_domains, d)
                        && let Some(candidate) = consider(d, *c)
                        && chosen.as_ref().is_none_or(|b| candidate < *b)
                    {
                        chosen = Some(candidate);
                    }
                }
            }
        }
        chosen.map_or(Choice::Nothing, |(_, d)| self.one(&d, node_domains))
    }

    /// Every domain this group lets a pod go to before anything else is placed, wherever the
    /// node: what upstream's `TopologyGroup.Get` returns with the node unconstrained.
    fn valid_domains(
        &self,
        self_selecting: bool,
        pod_domains: Option<&Requirement>,
    ) -> BTreeSet<String> {
        let allowed = |d: &&String| allows(pod_domains, d);
        match self.kind {
            GroupKind::Spread => {
                let min = self.min_count(pod_domains);
                let own = i32::from(self_selecting);
                self.domains
                    .iter()
                    .filter(|(d, c)| allowed(d) && (**c + own).saturating_sub(min) <= self.max_skew)
                    .map(|(d, _)| d.clone())
                    .collect()
            }
            GroupKind::Affinity => {
                let populated: BTreeSet<String> = self
                    .domains
                    .iter()
                    .filter(|(d, c)| **c > 0 && allowed(d))
                    .map(|(d, _)| d.clone())
                    .collect();
                if populated.is_empty() && self_selecting {
                    // The first pod of a self-selecting affinity may open any domain.
                    return self.domains.keys().filter(allowed).cloned().collect();
                }
                populated
            }
            GroupKind::AntiAffinity => self.empty_domains.iter().filter(allowed).cloned().collect(),
        }
    }

    fn any_populated(&self, pod_domains: Option<&Requirement>) -> bool {
        self.domains
            .iter()
            .any(|(d, c)| *c > 0 && allows(pod_domains, d))
    }

    fn next_affinity(
        &self,
        self_selecting: bool,
        pod_domains: Option<&Requirement>,
        node_domains: Option<&Requirement>,
    ) -> Choice {
        let bootstrap = || {
            self_selecting
                && (self.domains.len() == self.empty_domains.len()
                    || !self.any_populated(pod_domains))
        };
        if let Some(host) = self.single_node_domain(node_domains) {
            if !allows(pod_domains, host) {
                return Choice::Nothing;
            }
            return if self.count(host) > 0 || bootstrap() {
                Choice::Keep
            } else {
                Choice::Nothing
            };
        }
        let populated: Vec<&str> = self
            .domains
            .iter()
            .filter(|(d, c)| **c > 0 && allows(pod_domains, d) && allows(node_domains, d))
            .map(|(d, _)| d.as_str())
            .collect();
        if !populated.is_empty() {
            let r = Requirement::new(&self.key, Operator::In, &populated);
            return if node_domains == Some(&r) {
                Choice::Keep
            } else {
                Choice::Narrow(r)
            };
        }
        if bootstrap() {
            // Prefer a domain the node already allows, so an in-flight node keeps its zone.
            let first = |pred: &dyn Fn(&str) -> bool| {
                self.domains.keys().filter(|d| pred(d)).min().cloned()
            };
            let chosen = first(&|d| allows(pod_domains, d) && allows(node_domains, d))
                .or_else(|| first(&|d| allows(pod_domains, d)));
            if let Some(domain) = chosen {
                return self.one(&domain, node_domains);
            }
        }
        Choice::Nothing
    }

    fn next_anti_affinity(
        &self,
        pod_domains: Option<&Requirement>,
        node_domains: Option<&Requirement>,
    ) -> Choice {
        if let Some(host) = self.single_node_domain(node_domains) {
            return if self.count(host) == 0 {
                Choice::Keep
            } else {
                Choice::Nothing
            };
        }
        let allowed: Vec<&str> = match node_domains.filter(|r| r.operator() == Operator::In) {
            Some(r) => r
                .values()
                .filter(|d| self.count(d) == 0 && allows(pod_domains, d))
                .collect(),
            None => self
                .empty_domains
                .iter()
                .filter(|d| allows(node_domains, d) && allows(pod_domains, d))
                .map(String::as_str)
                .collect(),
        };
        if allowed.is_empty() {
            return Choice::Nothing;
        }
        let r = Requirement::new(&self.key, Operator::In, &allowed);
        if node_domains == Some(&r) {
            Choice::Keep
        } else {
            Choice::Narrow(r)
        }
    }
}

/// Whether a requirement (`None`: unconstrained) allows a domain.
fn allows(requirement: Option<&Requirement>, domain: &str) -> bool {
    requirement.is_none_or(|r| r.has(domain))
}

/// What a group allows on a node.
enum Choice {
    /// No domain.
    Nothing,
    /// Whatever the node already allows.
    Keep,
    /// Only these domains.
    Narrow(Requirement),
}

/// A group, by where it is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupId {
    /// A group owned by pods being scheduled.
    Owned(usize),
    /// An anti-affinity group seen from the pods that hold the term.
    Inverse(usize),
}

/// The groups that constrain one pod, with whether each selects the pod itself.
#[derive(Clone, Debug, Default)]
pub struct Matching {
    owned: Vec<(usize, bool)>,
    inverse: Vec<usize>,
}

impl Matching {
    /// Whether no group constrains the pod (topology cannot change where it may go).
    pub fn is_empty(&self) -> bool {
        self.owned.is_empty() && self.inverse.is_empty()
    }
}

/// A pod the topology needs to know about: its namespace, labels and spec.
pub struct PodRef<'a> {
    /// The pod's index in the batch being scheduled.
    pub id: usize,
    /// The pod, in whatever form the caller keeps it.
    pub pod: &'a dyn ObservedPod,
}

impl PodRef<'_> {
    fn namespace(&self) -> &str {
        self.pod.meta().namespace.as_deref().unwrap_or("default")
    }

    fn labels(&self) -> &BTreeMap<String, String> {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        self.pod.labels().unwrap_or(&EMPTY)
    }
}

/// A node already in the cluster, for counting the pods on it.
pub struct CountedNode<'a> {
    /// The node's name (its hostname domain when it has no hostname label).
    pub name: &'a str,
    /// Its labels as requirements (with its name as hostname when it has no hostname label),
    /// shared with the scheduler's view of the node.
    pub requirements: Arc<Requirements>,
    /// The node's taints.
    pub taints: &'a [Taint],
    /// The pods bound to it.
    pub pods: &'a [Arc<BoundPod>],
}

/// An existing node as topology counts it.
struct KnownNode {
    requirements: Arc<Requirements>,
    taints: Vec<Taint>,
    /// The pods on it (their namespace and labels count).
    pods: Vec<Arc<BoundPod>>,
}

/// Why a pod's topology cannot be satisfied on a node.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unsatisfiable topology constraint for {kind}, key={key} (pod domains = {pod_domains}, node domains = {node_domains})"
)]
pub struct TopologyError {
    kind: &'static str,
    key: String,
    pod_domains: String,
    node_domains: String,
}

/// The topology state of one scheduling simulation.
pub struct Topology {
    groups: Vec<TopologyGroup>,
    group_index: HashMap<String, usize>,
    /// Anti-affinity of pods (placed or being placed) against others, tracked from the side of
    /// the pod holding the term: it records where its owners are.
    inverse: Vec<TopologyGroup>,
    inverse_index: HashMap<String, usize>,
    /// The groups each pod (by batch index) owns, and the inverse groups it holds terms in.
    owned: Vec<Vec<usize>>,
    inverse_owned: Vec<Vec<usize>>,
    /// Every value of each key that any NodePool could produce.
    universe: HashMap<String, BTreeSet<String>>,
    /// By key and domain: the taints of each NodePool producing it, for domains only tainted
    /// NodePools produce (spreads with `nodeTaintsPolicy: Honor` skip those the pod does not
    /// tolerate).
    domain_taints: DomainTaints,
    namespaces_by_label: Vec<(String, BTreeMap<String, String>)>,
    /// Existing nodes, for counting the pods on them.
    nodes: Vec<KnownNode>,
    respect_preferences: bool,
    /// Placeholder hostnames of the NodeClaims opened so far, so groups created later know
    /// those (empty) domains too.
    hosts: Vec<String>,
    /// Per pod: how many groups were checked, and those that select it.
    selected: Vec<(usize, Vec<usize>)>,
}

fn kind_name(kind: GroupKind) -> &'static str {
    match kind {
        GroupKind::Spread => "topology spread",
        GroupKind::Affinity => "pod affinity",
        GroupKind::AntiAffinity => "pod anti-affinity",
    }
}

impl Topology {
    /// A topology over the domains the NodePools can produce (`universe`, by key) and the
    /// existing nodes with their pods. `namespaces` lists namespaces with their labels, for
    /// terms with a namespace selector.
    pub fn new(
        universe: HashMap<String, BTreeSet<String>>,
        nodes: &[CountedNode<'_>],
        namespaces: Vec<(String, BTreeMap<String, String>)>,
        respect_preferences: bool,
    ) -> Self {
        let nodes = nodes
            .iter()
            .map(|n| KnownNode {
                requirements: n.requirements.clone(),
                taints: n.taints.to_vec(),
                pods: n.pods.to_vec(),
            })
            .collect();
        Self {
            groups: Vec::new(),
            group_index: HashMap::new(),
            inverse: Vec::new(),
            inverse_index: HashMap::new(),
            owned: Vec::new(),
            inverse_owned: Vec::new(),
            hosts: Vec::new(),
            selected: Vec::new(),
            universe,
            domain_taints: DomainTaints::default(),
            namespaces_by_label: namespaces,
            nodes,
            respect_preferences,
        }
    }

    /// Sets the taints of the NodePools producing each domain (see [`DomainTaints`]), before
    /// any pod is added.
    pub fn set_domain_taints(&mut self, domain_taints: DomainTaints) {
        self.domain_taints = domain_taints;
    }

    /// Registers (or re-registers after relaxation) the groups a pod owns.
    pub fn update(&mut self, pod: PodRef<'_>) {
        if self.owned.len() <= pod.id {
            self.owned.resize(pod.id + 1, Vec::new());
            self.inverse_owned.resize(pod.id + 1, Vec::new());
        }
        self.owned[pod.id].clear();
        let spec = pod.pod.pod_spec();
        let anti = spec
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.pod_anti_affinity.as_ref());
        if let Some(anti) = anti {
            for term in anti
                .required_during_scheduling_ignored_during_execution
                .iter()
                .flatten()
            {
                let group = self.group_for_term(pod.namespace(), GroupKind::AntiAffinity, term);
                let (hosts, universe, tainted) = (&self.hosts, &self.universe, &self.domain_taints);
                let i = Self::intern(&mut self.inverse, &mut self.inverse_index, group, |g| {
                    register_known_domains(g, universe, tainted, hosts)
                });
                if !self.inverse_owned[pod.id].contains(&i) {
                    self.inverse_owned[pod.id].push(i);
                }
            }
        }
        for group in self.groups_of(&pod) {
            let nodes = &self.nodes;
            let universe = &self.universe;
            let tainted = &self.domain_taints;
            let hosts = &self.hosts;
            let i = Self::intern(&mut self.groups, &mut self.group_index, group, |g| {
                register_known_domains(g, universe, tainted, hosts);
                count_domains(g, nodes);
            });
            if !self.owned[pod.id].contains(&i) {
                self.owned[pod.id].push(i);
            }
        }
    }

    fn intern(
        groups: &mut Vec<TopologyGroup>,
        index: &mut HashMap<String, usize>,
        group: TopologyGroup,
        init: impl FnOnce(&mut TopologyGroup),
    ) -> usize {
        let identity = group.identity();
        if let Some(i) = index.get(&identity) {
            return *i;
        }
        let mut group = group;
        init(&mut group);
        groups.push(group);
        index.insert(identity, groups.len() - 1);
        groups.len() - 1
    }

    fn namespaces_for(&self, own: &str, term: &PodAffinityTerm) -> BTreeSet<String> {
        let mut namespaces: BTreeSet<String> = term.namespaces.iter().flatten().cloned().collect();
        if let Some(selector) = &term.namespace_selector {
            namespaces.extend(
                self.namespaces_by_label
                    .iter()
                    .filter(|(_, labels)| selector::matches(selector, labels))
                    .map(|(n, _)| n.clone()),
            );
        }
        if namespaces.is_empty() && term.namespace_selector.is_none() {
            namespaces.insert(own.to_string());
        }
        namespaces
    }

    fn group_for_term(
        &self,
        namespace: &str,
        kind: GroupKind,
        term: &PodAffinityTerm,
    ) -> TopologyGroup {
        TopologyGroup {
            kind,
            key: term.topology_key.clone(),
            namespaces: self.namespaces_for(namespace, term),
            // A term without a selector selects nothing.
            selector: term.label_selector.clone().unwrap_or_else(selects_nothing),
            max_skew: i32::MAX,
            min_domains: None,
            filter: NodeFilter::default(),
            domains: FxHashMap::default(),
            empty_domains: FxHashSet::default(),
        }
    }

    fn groups_of(&self, pod: &PodRef<'_>) -> Vec<TopologyGroup> {
        let Some(spec) = pod.pod.pod_spec() else {
            return Vec::new();
        };
        let mut groups = Vec::new();
        for c in spec.topology_spread_constraints.iter().flatten() {
            // `--preference-policy=Ignore` ignores every constraint but `DoNotSchedule`.
            if !self.respect_preferences && c.when_unsatisfiable != "DoNotSchedule" {
                continue;
            }
            // A constraint without a selector selects nothing (as kube-scheduler), so it
            // spreads nothing.
            let mut selector = c.label_selector.clone().unwrap_or_else(selects_nothing);
            for key in c.match_label_keys.iter().flatten() {
                if let Some(value) = pod.labels().get(key) {
                    selector
                        .match_labels
                        .get_or_insert_with(Default::default)
                        .insert(key.clone(), value.clone());
                }
            }
            let honor_affinity = c.node_affinity_policy.as_deref() != Some("Ignore");
            let honor_taints = c.node_taints_policy.as_deref() == Some("Honor");
            let mut filter = NodeFilter::default();
            if honor_affinity {
                let node_selector = spec
                    .node_selector
                    .as_ref()
                    .map(Requirements::from_labels)
                    .unwrap_or_default();
                let terms = spec
                    .affinity
                    .as_ref()
                    .and_then(|a| a.node_affinity.as_ref())
                    .and_then(|n| {
                        n.required_during_scheduling_ignored_during_execution
                            .as_ref()
                    })
                    .map(|r| r.node_selector_terms.as_slice())
                    .unwrap_or_default();
                if terms.is_empty() {
                    if !node_selector.is_empty() {
                        filter.terms.push(node_selector);
                    }
                } else {
                    for term in terms {
                        let mut r = node_selector.clone();
                        r.add_all(&Requirements::from_node_selector(
                            term.match_expressions.as_deref().unwrap_or_default(),
                        ));
                        filter.terms.push(r);
                    }
                }
            }
            if honor_taints {
                filter.tolerations = Some(spec.tolerations.clone().unwrap_or_default());
            }
            groups.push(TopologyGroup {
                kind: GroupKind::Spread,
                key: c.topology_key.clone(),
                namespaces: [pod.namespace().to_string()].into(),
                selector,
                max_skew: c.max_skew,
                min_domains: c.min_domains,
                filter,
                domains: FxHashMap::default(),
                empty_domains: FxHashSet::default(),
            });
        }
        let affinity = spec.affinity.as_ref();
        let pod_affinity = affinity.and_then(|a| a.pod_affinity.as_ref());
        let anti = affinity.and_then(|a| a.pod_anti_affinity.as_ref());
        let mut terms: Vec<(GroupKind, &PodAffinityTerm)> = Vec::new();
        terms.extend(
            pod_affinity
                .iter()
                .flat_map(|a| {
                    a.required_during_scheduling_ignored_during_execution
                        .iter()
                        .flatten()
                })
                .map(|t| (GroupKind::Affinity, t)),
        );
        terms.extend(
            anti.iter()
                .flat_map(|a| {
                    a.required_during_scheduling_ignored_during_execution
                        .iter()
                        .flatten()
                })
                .map(|t| (GroupKind::AntiAffinity, t)),
        );
        if self.respect_preferences {
            terms.extend(
                pod_affinity
                    .iter()
                    .flat_map(|a| {
                        a.preferred_during_scheduling_ignored_during_execution
                            .iter()
                            .flatten()
                    })
                    .map(|t| (GroupKind::Affinity, &t.pod_affinity_term)),
            );
            terms.extend(
                anti.iter()
                    .flat_map(|a| {
                        a.preferred_during_scheduling_ignored_during_execution
                            .iter()
                            .flatten()
                    })
                    .map(|t| (GroupKind::AntiAffinity, &t.pod_affinity_term)),
            );
        }
        groups.extend(
            terms
                .into_iter()
                .map(|(kind, term)| self.group_for_term(pod.namespace(), kind, term)),
        );
        groups
    }

    /// Records the anti-affinity of a pod already running on an existing node, so new pods it
    /// repels avoid its domains.
    pub fn track_placed_pod(
        &mut self,
        pod: &BoundPod,
        node_labels: &BTreeMap<String, String>,
        node_name: &str,
    ) {
        let namespace = pod.namespace.clone();
        for term in &pod.anti_affinity {
            let group = self.group_for_term(&namespace, GroupKind::AntiAffinity, term);
            let (hosts, universe, tainted) = (&self.hosts, &self.universe, &self.domain_taints);
            let i = Self::intern(&mut self.inverse, &mut self.inverse_index, group, |g| {
                register_known_domains(g, universe, tainted, hosts)
            });
            let domain = node_labels
                .get(&term.topology_key)
                .cloned()
                .or_else(|| (term.topology_key == HOSTNAME_LABEL).then(|| node_name.to_string()));
            if let Some(domain) = domain {
                self.inverse[i].record(&domain);
            }
        }
    }

    /// Makes a new hostname (or other) domain known to every group on `key`.
    pub fn register(&mut self, key: &str, domain: &str) {
        if key == HOSTNAME_LABEL {
            self.hosts.push(domain.to_string());
        }
        for g in self
            .groups
            .iter_mut()
            .chain(self.inverse.iter_mut())
            .filter(|g| g.key == key)
        {
            g.register(domain);
        }
    }

    /// Forgets a domain registered for a node that was not created.
    pub fn unregister(&mut self, key: &str, domain: &str) {
        if key == HOSTNAME_LABEL && self.hosts.last().is_some_and(|h| h == domain) {
            self.hosts.pop();
        }
        for g in self
            .groups
            .iter_mut()
            .chain(self.inverse.iter_mut())
            .filter(|g| g.key == key)
        {
            if g.domains.get(domain) == Some(&0) {
                g.domains.remove(domain);
                g.empty_domains.remove(domain);
            }
        }
    }

    /// The groups that constrain a pod: those it owns, and inverse anti-affinity groups that
    /// select it. Computed once per attempt, then checked against each candidate node.
    pub fn matching(&self, pod: &PodRef<'_>) -> Matching {
        let (namespace, labels) = (pod.namespace(), pod.labels());
        let owned = self
            .owned
            .get(pod.id)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|&g| (g, self.groups[g].selects(namespace, labels)))
            .collect();
        let inverse = (0..self.inverse.len())
            .filter(|&g| self.inverse[g].selects(namespace, labels))
            .collect();
        Matching { owned, inverse }
    }

    /// For each group the pod owns whose valid domains do not depend on the node (any key but
    /// hostname), the key and those domains. A node whose requirement on the key allows none
    /// of them is certain to refuse the pod, so callers skip it without a full check.
    pub fn node_independent_domains(
        &self,
        matching: &Matching,
        pod_requirements: &Requirements,
    ) -> Vec<(String, Vec<String>)> {
        let mut out = Vec::new();
        for &(g, self_selecting) in &matching.owned {
            let group = &self.groups[g];
            if group.key == HOSTNAME_LABEL {
                continue;
            }
            let pod_domains = pod_requirements.get(&group.key);
            let domains: Vec<String> = match group.kind {
                GroupKind::Spread => {
                    let min = group.min_count(pod_domains);
                    let own = i32::from(self_selecting);
                    group
                        .domains
                        .iter()
                        .filter(|(_, c)| (**c + own).saturating_sub(min) <= group.max_skew)
                        .map(|(d, _)| d.clone())
                        .collect()
                }
                GroupKind::Affinity => {
                    let populated: Vec<String> = group
                        .domains
                        .iter()
                        .filter(|(d, c)| **c > 0 && allows(pod_domains, d))
                        .map(|(d, _)| d.clone())
                        .collect();
                    if populated.is_empty() {
                        // A first pod may bootstrap any domain.
                        continue;
                    }
                    populated
                }
                GroupKind::AntiAffinity => group
                    .empty_domains
                    .iter()
                    .filter(|d| allows(pod_domains, d))
                    .cloned()
                    .collect(),
            };
            out.push((group.key.clone(), domains));
        }
        out
    }

    /// The zones the pod's own zonal groups (spread, affinity, anti-affinity) leave it, all of
    /// them at once: `None` when it owns none, an empty set when they leave it none (upstream's
    /// `GetTopologyZoneConstraints`).
    pub fn zone_domains(
        &self,
        matching: &Matching,
        pod_requirements: &Requirements,
    ) -> Option<BTreeSet<String>> {
        let mut result: Option<BTreeSet<String>> = None;
        for &(g, self_selecting) in &matching.owned {
            let group = &self.groups[g];
            if group.key != karpenter_api::labels::ZONE_LABEL {
                continue;
            }
            let valid = group.valid_domains(self_selecting, pod_requirements.get(&group.key));
            if valid.is_empty() {
                return Some(valid);
            }
            result = Some(match result {
                None => valid,
                Some(r) => r.intersection(&valid).cloned().collect(),
            });
        }
        result
    }

    /// When a hostname anti-affinity group constrains the pod, the hostnames it may still go
    /// to (its empty domains, fewest first); every other node is certain to refuse it.
    pub fn free_hosts(&self, matching: &Matching) -> Option<&FxHashSet<String>> {
        let owned = matching
            .owned
            .iter()
            .map(|(g, _)| &self.groups[*g])
            .filter(|g| g.kind == GroupKind::AntiAffinity);
        let inverse = matching
            .inverse
            .iter()
            .map(|g| &self.inverse[*g])
            .filter(|g| g.filter.terms.is_empty() && g.filter.tolerations.is_none());
        owned
            .chain(inverse)
            .filter(|g| g.key == HOSTNAME_LABEL)
            .map(|g| &g.empty_domains)
            .min_by_key(|d| d.len())
    }

    /// Narrows `node_requirements` to the domains the pod's topology allows on this node; the
    /// error names the group that allows none (see [`Topology::explain`]).
    pub fn add_requirements(
        &self,
        matching: &Matching,
        taints: &[Taint],
        pod_requirements: &Requirements,
        node_requirements: &Requirements,
        allow: AllowUndefined<'_>,
    ) -> Result<Option<Requirements>, GroupId> {
        let mut narrowed: Option<Requirements> = None;
        let owned = matching
            .owned
            .iter()
            .map(|&(g, self_selecting)| (GroupId::Owned(g), &self.groups[g], self_selecting));
        let inverse = matching
            .inverse
            .iter()
            .map(|&g| (GroupId::Inverse(g), &self.inverse[g], true))
            .filter(|(_, g, _)| g.filter.matches(taints, node_requirements, allow));
        for (id, group, self_selecting) in owned.chain(inverse) {
            let current = narrowed.as_ref().unwrap_or(node_requirements);
            match group.next_domains(
                self_selecting,
                pod_requirements.get(&group.key),
                current.get(&group.key),
            ) {
                Choice::Nothing => return Err(id),
                Choice::Keep => {}
                Choice::Narrow(domains) => narrowed
                    .get_or_insert_with(|| node_requirements.clone())
                    .add(domains),
            }
        }
        Ok(narrowed)
    }

    /// Why group `id` allows the pod no domain on a node with `node_requirements`.
    pub fn explain(
        &self,
        id: GroupId,
        pod_requirements: &Requirements,
        node_requirements: &Requirements,
    ) -> TopologyError {
        let group = match id {
            GroupId::Owned(g) => &self.groups[g],
            GroupId::Inverse(g) => &self.inverse[g],
        };
        let describe = |r: &Requirements| {
            r.get(&group.key)
                .map_or_else(|| format!("{} Exists", group.key), ToString::to_string)
        };
        TopologyError {
            kind: kind_name(group.kind),
            key: group.key.clone(),
            pod_domains: describe(pod_requirements),
            node_domains: describe(node_requirements),
        }
    }

    /// Records a pod's placement on a node with `requirements` in every group that counts it.
    pub fn record(
        &mut self,
        pod: &PodRef<'_>,
        taints: &[Taint],
        requirements: &Requirements,
        allow: AllowUndefined<'_>,
    ) {
        if self.selected.len() <= pod.id {
            self.selected.resize(pod.id + 1, (0, Vec::new()));
        }
        // Labels never change, so which groups select a pod is worked out once per group.
        let (checked, mut selected) = std::mem::take(&mut self.selected[pod.id]);
        let (namespace, labels) = (pod.namespace(), pod.labels());
        selected.extend(
            (checked..self.groups.len()).filter(|&g| self.groups[g].selects(namespace, labels)),
        );
        for &g in &selected {
            let group = &mut self.groups[g];
            if !group.filter.matches(taints, requirements, allow) {
                continue;
            }
            let Some(domains) = requirements.get(&group.key) else {
                continue;
            };
            if group.kind == GroupKind::AntiAffinity {
                // The pod could still land in any of these: block them all.
                let values: Vec<String> = domains.values().map(str::to_string).collect();
                values.iter().for_each(|d| group.record(d));
            } else if domains.operator() == Operator::In && domains.values().len() == 1 {
                let domain = domains.values().next().unwrap_or_default().to_string();
                group.record(&domain);
            }
        }
        self.selected[pod.id] = (self.groups.len(), selected);
        for &g in self
            .inverse_owned
            .get(pod.id)
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            let group = &mut self.inverse[g];
            if let Some(domains) = requirements.get(&group.key) {
                let values: Vec<String> = domains.values().map(str::to_string).collect();
                values.iter().for_each(|d| group.record(d));
            }
        }
    }
}

/// By topology key and domain: the taints of each NodePool that produces the domain, kept only
/// for domains no untainted NodePool produces.
pub type DomainTaints = HashMap<String, HashMap<String, Vec<Vec<Taint>>>>;

/// A selector no pod matches (a term or constraint without a selector).
fn selects_nothing() -> LabelSelector {
    LabelSelector {
        match_expressions: Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                key: "karpenter-rs.internal/selects-nothing".into(),
                operator: "Exists".into(),
                values: None,
            },
        ]),
        ..Default::default()
    }
}

/// Makes a new group aware of every domain a NodePool can produce and of the NodeClaims
/// opened so far (their hostnames).
fn register_known_domains(
    group: &mut TopologyGroup,
    universe: &HashMap<String, BTreeSet<String>>,
    domain_taints: &DomainTaints,
    hosts: &[String],
) {
    // A spread honouring taints skips the domains only NodePools it does not tolerate produce.
    let tolerations = group.filter.tolerations.clone();
    let tainted = tolerations.as_ref().zip(domain_taints.get(&group.key));
    for domain in universe.get(&group.key).into_iter().flatten() {
        if let Some((tolerations, tainted)) = tainted
            && let Some(pools) = tainted.get(domain)
            && pools
                .iter()
                .all(|t| taints::first_untolerated(t, tolerations).is_some())
        {
            continue;
        }
        group.register(domain);
    }
    if group.key == HOSTNAME_LABEL {
        hosts.iter().for_each(|h| group.register(h));
    }
}

/// Counts the pods a new group selects on existing nodes, by the nodes' domains.
fn count_domains(group: &mut TopologyGroup, nodes: &[KnownNode]) {
    for KnownNode {
        requirements,
        taints,
        pods,
    } in nodes
    {
        // A node's labels are single-valued requirements (its hostname among them).
        let Some(domain) = requirements
            .get(&group.key)
            .filter(|r| r.operator() == Operator::In && r.values().len() == 1)
            .and_then(|r| r.values().next())
            .map(str::to_string)
        else {
            continue;
        };
        if !group
            .filter
            .matches(taints, requirements, AllowUndefined::Nothing)
        {
            continue;
        }
        group.register(&domain);
        for pod in pods {
            if !pod.terminating && group.selects(&pod.namespace, &pod.labels) {
                group.record(&domain);
            }
        }
    }
}
