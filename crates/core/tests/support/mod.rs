//! Builders for pods and NodePools, and a fake launch that turns the scheduler's NodeClaims into
//! nodes the way upstream's fake provider does (cheapest instance type, cheapest offering).
#![allow(dead_code)]

pub mod cluster;

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerPort, NodeAffinity, NodeSelector, NodeSelectorRequirement,
    NodeSelectorTerm, Pod, PodAffinity, PodAffinityTerm, PodAntiAffinity, PodSpec,
    PreferredSchedulingTerm, ResourceRequirements, Taint, Toleration, TopologySpreadConstraint,
    WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use karpenter_api::labels::{CAPACITY_TYPE_LABEL, HOSTNAME_LABEL, ZONE_LABEL};
use karpenter_api::{NodeClassReference, NodePool, NodeSelectorRequirementWithMinValues, Operator};
use karpenter_core::instancetype::{InstanceType, fake};
use karpenter_core::provisioning::scheduling::{
    BoundPod, ExistingNodeInput, NodePoolInput, Results, Scheduler, SchedulerOptions,
};
use karpenter_core::resources::Resources;

pub const ZONE: &str = ZONE_LABEL;
pub const HOSTNAME: &str = HOSTNAME_LABEL;
pub const CAPACITY_TYPE: &str = CAPACITY_TYPE_LABEL;
pub const ARCH: &str = "kubernetes.io/arch";
pub const OS: &str = "kubernetes.io/os";
pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";

fn expressions(reqs: &[(&str, &str, &[&str])]) -> Vec<NodeSelectorRequirement> {
    reqs.iter()
        .map(|(k, op, v)| NodeSelectorRequirement {
            key: k.to_string(),
            operator: op.to_string(),
            values: Some(v.iter().map(|s| s.to_string()).collect()),
        })
        .collect()
}

pub fn selector(labels: &[(&str, &str)]) -> LabelSelector {
    LabelSelector {
        match_labels: Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..Default::default()
    }
}

/// A pending pod under construction.
#[derive(Clone, Default)]
pub struct PodBuilder {
    pod: Pod,
}

pub fn pod() -> PodBuilder {
    let mut b = PodBuilder::default();
    b.pod.metadata = ObjectMeta {
        name: Some("pod".into()),
        namespace: Some("default".into()),
        ..Default::default()
    };
    b.pod.spec = Some(PodSpec {
        containers: vec![Container {
            name: "app".into(),
            ..Default::default()
        }],
        ..Default::default()
    });
    b
}

impl PodBuilder {
    fn spec(&mut self) -> &mut PodSpec {
        self.pod.spec.as_mut().expect("builders always have a spec")
    }

    fn affinity(&mut self) -> &mut Affinity {
        self.spec().affinity.get_or_insert_with(Default::default)
    }

    pub fn namespace(mut self, ns: &str) -> Self {
        self.pod.metadata.namespace = Some(ns.into());
        self
    }

    pub fn labels(mut self, labels: &[(&str, &str)]) -> Self {
        let map = self
            .pod
            .metadata
            .labels
            .get_or_insert_with(Default::default);
        for (k, v) in labels {
            map.insert(k.to_string(), v.to_string());
        }
        self
    }

    pub fn requests(mut self, requests: &[(&str, &str)]) -> Self {
        let list: BTreeMap<String, Quantity> = requests
            .iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect();
        self.spec().containers[0].resources = Some(ResourceRequirements {
            requests: Some(list),
            ..Default::default()
        });
        self
    }

    pub fn cpu(self, cpu: &str) -> Self {
        self.requests(&[("cpu", cpu)])
    }

    pub fn init_requests(mut self, requests: &[(&str, &str)]) -> Self {
        let list: BTreeMap<String, Quantity> = requests
            .iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect();
        self.spec().init_containers = Some(vec![Container {
            name: "init".into(),
            resources: Some(ResourceRequirements {
                requests: Some(list),
                ..Default::default()
            }),
            ..Default::default()
        }]);
        self
    }

    pub fn node_selector(mut self, labels: &[(&str, &str)]) -> Self {
        self.spec().node_selector = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        self
    }

    /// Adds a required node-affinity term (terms are OR-ed).
    pub fn require(mut self, reqs: &[(&str, &str, &[&str])]) -> Self {
        let node = self
            .affinity()
            .node_affinity
            .get_or_insert_with(Default::default);
        let required = node
            .required_during_scheduling_ignored_during_execution
            .get_or_insert_with(|| NodeSelector {
                node_selector_terms: Vec::new(),
            });
        required.node_selector_terms.push(NodeSelectorTerm {
            match_expressions: Some(expressions(reqs)),
            ..Default::default()
        });
        self
    }

    pub fn prefer(mut self, weight: i32, reqs: &[(&str, &str, &[&str])]) -> Self {
        let node: &mut NodeAffinity = self
            .affinity()
            .node_affinity
            .get_or_insert_with(Default::default);
        node.preferred_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .push(PreferredSchedulingTerm {
                weight,
                preference: NodeSelectorTerm {
                    match_expressions: Some(expressions(reqs)),
                    ..Default::default()
                },
            });
        self
    }

    pub fn tolerate(mut self, key: &str, operator: &str, value: &str, effect: &str) -> Self {
        let opt = |s: &str| (!s.is_empty()).then(|| s.to_string());
        self.spec()
            .tolerations
            .get_or_insert_with(Vec::new)
            .push(Toleration {
                key: opt(key),
                operator: opt(operator),
                value: opt(value),
                effect: opt(effect),
                toleration_seconds: None,
            });
        self
    }

    pub fn spread(mut self, key: &str, max_skew: i32, when: &str, labels: &[(&str, &str)]) -> Self {
        self.spec()
            .topology_spread_constraints
            .get_or_insert_with(Vec::new)
            .push(TopologySpreadConstraint {
                max_skew,
                topology_key: key.into(),
                when_unsatisfiable: when.into(),
                label_selector: Some(selector(labels)),
                ..Default::default()
            });
        self
    }

    pub fn spread_with(mut self, constraint: TopologySpreadConstraint) -> Self {
        self.spec()
            .topology_spread_constraints
            .get_or_insert_with(Vec::new)
            .push(constraint);
        self
    }

    pub fn affinity_to(mut self, key: &str, labels: &[(&str, &str)]) -> Self {
        let term = PodAffinityTerm {
            label_selector: Some(selector(labels)),
            topology_key: key.into(),
            ..Default::default()
        };
        let a: &mut PodAffinity = self
            .affinity()
            .pod_affinity
            .get_or_insert_with(Default::default);
        a.required_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .push(term);
        self
    }

    pub fn affinity_to_term(mut self, term: PodAffinityTerm) -> Self {
        let a: &mut PodAffinity = self
            .affinity()
            .pod_affinity
            .get_or_insert_with(Default::default);
        a.required_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .push(term);
        self
    }

    pub fn prefer_affinity_to(mut self, weight: i32, key: &str, labels: &[(&str, &str)]) -> Self {
        let term = WeightedPodAffinityTerm {
            weight,
            pod_affinity_term: PodAffinityTerm {
                label_selector: Some(selector(labels)),
                topology_key: key.into(),
                ..Default::default()
            },
        };
        let a: &mut PodAffinity = self
            .affinity()
            .pod_affinity
            .get_or_insert_with(Default::default);
        a.preferred_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .push(term);
        self
    }

    pub fn anti_affinity_to(mut self, key: &str, labels: &[(&str, &str)]) -> Self {
        let term = PodAffinityTerm {
            label_selector: Some(selector(labels)),
            topology_key: key.into(),
            ..Default::default()
        };
        let a: &mut PodAntiAffinity = self
            .affinity()
            .pod_anti_affinity
            .get_or_insert_with(Default::default);
        a.required_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .push(term);
        self
    }

    pub fn prefer_anti_affinity_to(
        mut self,
        weight: i32,
        key: &str,
        labels: &[(&str, &str)],
    ) -> Self {
        let term = WeightedPodAffinityTerm {
            weight,
            pod_affinity_term: PodAffinityTerm {
                label_selector: Some(selector(labels)),
                topology_key: key.into(),
                ..Default::default()
            },
        };
        let a: &mut PodAntiAffinity = self
            .affinity()
            .pod_anti_affinity
            .get_or_insert_with(Default::default);
        a.preferred_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .push(term);
        self
    }

    pub fn host_port(mut self, port: i32) -> Self {
        self.spec().containers[0]
            .ports
            .get_or_insert_with(Vec::new)
            .push(ContainerPort {
                container_port: port,
                host_port: Some(port),
                ..Default::default()
            });
        self
    }

    pub fn phase(mut self, phase: &str) -> Self {
        self.pod.status.get_or_insert_with(Default::default).phase = Some(phase.into());
        self
    }

    pub fn owned_by_daemonset(mut self) -> Self {
        self.pod.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "apps/v1".into(),
            kind: "DaemonSet".into(),
            name: "ds".into(),
            uid: "ds-uid".into(),
            ..Default::default()
        }]);
        self
    }

    pub fn build(self) -> Pod {
        self.pod
    }

    /// `n` copies, named apart.
    pub fn times(self, n: usize) -> Vec<Pod> {
        (0..n)
            .map(|i| {
                let mut p = self.pod.clone();
                p.metadata.name = Some(format!("pod-{i}"));
                p
            })
            .collect()
    }
}

/// A NodePool under construction, allowing every capacity type by default (as upstream's suite).
#[derive(Clone)]
pub struct PoolBuilder(pub NodePool);

pub fn node_pool(name: &str) -> PoolBuilder {
    let mut np = NodePool::default();
    np.metadata.name = Some(name.into());
    np.spec.template.spec.node_class_ref = NodeClassReference {
        group: "karpenter.test.sh".into(),
        kind: "TestNodeClass".into(),
        name: "default".into(),
    };
    PoolBuilder(np).require(
        CAPACITY_TYPE,
        Operator::In,
        &["spot", "on-demand", "reserved"],
    )
}

impl PoolBuilder {
    pub fn require(mut self, key: &str, operator: Operator, values: &[&str]) -> Self {
        self.0
            .spec
            .template
            .spec
            .requirements
            .push(NodeSelectorRequirementWithMinValues {
                key: key.into(),
                operator,
                values: values.iter().map(|s| s.to_string()).collect(),
                min_values: None,
            });
        self
    }

    pub fn require_min(
        mut self,
        key: &str,
        operator: Operator,
        values: &[&str],
        min_values: i32,
    ) -> Self {
        self.0
            .spec
            .template
            .spec
            .requirements
            .push(NodeSelectorRequirementWithMinValues {
                key: key.into(),
                operator,
                values: values.iter().map(|s| s.to_string()).collect(),
                min_values: Some(min_values),
            });
        self
    }

    /// Replaces the requirements.
    pub fn only(mut self, key: &str, operator: Operator, values: &[&str]) -> Self {
        self.0.spec.template.spec.requirements.clear();
        self.require(key, operator, values)
    }

    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.0
            .spec
            .template
            .metadata
            .labels
            .insert(key.into(), value.into());
        self
    }

    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        self.0.spec.template.spec.taints.push(Taint {
            key: key.into(),
            value: (!value.is_empty()).then(|| value.into()),
            effect: effect.into(),
            time_added: None,
        });
        self
    }

    pub fn startup_taint(mut self, key: &str, effect: &str) -> Self {
        self.0.spec.template.spec.startup_taints.push(Taint {
            key: key.into(),
            value: None,
            effect: effect.into(),
            time_added: None,
        });
        self
    }

    pub fn limit(mut self, resource: &str, quantity: &str) -> Self {
        self.0
            .spec
            .limits
            .get_or_insert_with(Default::default)
            .insert(resource.into(), Quantity(quantity.into()));
        self
    }

    pub fn weight(mut self, weight: i32) -> Self {
        self.0.spec.weight = Some(weight);
        self
    }
}

/// A simulated cluster: NodePools, the provider's instance types, existing nodes, DaemonSets.
pub struct Env {
    pub pools: Vec<(PoolBuilder, Vec<Arc<InstanceType>>)>,
    pub existing: Vec<ExistingNodeInput>,
    pub daemonsets: Vec<Pod>,
    pub options: SchedulerOptions,
}

pub fn arc(types: Vec<InstanceType>) -> Vec<Arc<InstanceType>> {
    types.into_iter().map(Arc::new).collect()
}

impl Env {
    /// One NodePool over the fake provider's default catalog.
    pub fn new(pool: PoolBuilder) -> Self {
        Self::with_types(pool, fake::default_instance_types())
    }

    pub fn with_types(pool: PoolBuilder, types: Vec<InstanceType>) -> Self {
        Self {
            pools: vec![(pool, arc(types))],
            existing: Vec::new(),
            daemonsets: Vec::new(),
            options: SchedulerOptions {
                provider_labels: fake::provider_labels(),
                ..Default::default()
            },
        }
    }

    pub fn pool(mut self, pool: PoolBuilder) -> Self {
        let types = self.pools[0].1.clone();
        self.pools.push((pool, types));
        self
    }

    pub fn existing(mut self, node: ExistingNodeInput) -> Self {
        self.existing.push(node);
        self
    }

    pub fn daemonset(mut self, pod: Pod) -> Self {
        self.daemonsets.push(pod);
        self
    }

    pub fn provision(&self, pods: &[Pod]) -> Outcome {
        let pools: Vec<NodePoolInput> = self
            .pools
            .iter()
            .map(|(p, t)| NodePoolInput {
                node_pool: p.0.clone(),
                instance_types: t.clone(),
            })
            .collect();
        let mut scheduler = Scheduler::new(
            &pools,
            &self.existing,
            &self.daemonsets,
            self.options.clone(),
        );
        let results = scheduler.solve(pods, &|| false);
        Outcome::launch(results, pods.len())
    }
}

/// A node launched for a NodeClaim (the cheapest instance type and offering it allows).
#[derive(Clone, Debug)]
pub struct Node {
    pub name: String,
    pub instance_type: String,
    pub labels: BTreeMap<String, String>,
    pub pods: Vec<usize>,
    pub node_pool: String,
    pub price: f64,
    pub requests: Resources,
}

pub struct Outcome {
    pub results: Results,
    pub nodes: Vec<Node>,
    /// Where each pod went: a launched node (by index) or an existing node (by name).
    pub placement: Vec<Option<Placement>>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Placement {
    New(usize),
    Existing(String),
}

impl Outcome {
    fn launch(results: Results, pods: usize) -> Self {
        let mut nodes = Vec::new();
        let mut placement = vec![None; pods];
        for (i, claim) in results.new_node_claims.iter().enumerate() {
            let it = claim
                .instance_types
                .first()
                .expect("a NodeClaim lists an instance type");
            let offering = it
                .compatible_offerings(&claim.requirements)
                .min_by(|a, b| a.price.total_cmp(&b.price))
                .expect("the cheapest type has a compatible offering");
            let mut labels = claim.labels.clone();
            for r in it.requirements.iter() {
                if r.operator() == Operator::In && r.values().len() == 1 {
                    labels.insert(r.key().to_string(), r.values().next().unwrap().to_string());
                }
            }
            labels.insert(ZONE.into(), offering.zone.clone());
            labels.insert(CAPACITY_TYPE.into(), offering.capacity_type.clone());
            labels.insert(HOSTNAME.into(), format!("node-{i}"));
            for &p in &claim.pods {
                placement[p] = Some(Placement::New(i));
            }
            nodes.push(Node {
                name: format!("node-{i}"),
                instance_type: it.name.clone(),
                labels,
                pods: claim.pods.clone(),
                node_pool: claim.node_pool.clone(),
                price: offering.price,
                requests: claim.requests.clone(),
            });
        }
        for (name, pods) in &results.existing_nodes {
            for &p in pods {
                placement[p] = Some(Placement::Existing(name.clone()));
            }
        }
        Self {
            results,
            nodes,
            placement,
        }
    }

    pub fn scheduled(&self, pod: usize) -> bool {
        self.placement[pod].is_some()
    }

    /// The launched node a pod went to.
    pub fn node(&self, pod: usize) -> &Node {
        match &self.placement[pod] {
            Some(Placement::New(i)) => &self.nodes[*i],
            other => panic!(
                "pod {pod} is not on a new node: {other:?}; errors: {:?}",
                self.results.pod_errors
            ),
        }
    }

    pub fn label(&self, pod: usize, key: &str) -> Option<&str> {
        self.node(pod).labels.get(key).map(String::as_str)
    }

    /// How many pods each launched node got, per value of a node label.
    pub fn pods_per(&self, key: &str) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for n in &self.nodes {
            *out.entry(n.labels.get(key).cloned().unwrap_or_default())
                .or_default() += n.pods.len();
        }
        out
    }

    /// Counts per domain, sorted ascending (to compare skews without naming domains).
    pub fn skew(&self, key: &str) -> Vec<usize> {
        let mut v: Vec<usize> = self.pods_per(key).into_values().collect();
        v.sort_unstable();
        v
    }
}

/// An existing, initialized node with the given labels and allocatable.
pub fn existing_node(
    name: &str,
    labels: &[(&str, &str)],
    allocatable: &[(&str, &str)],
) -> ExistingNodeInput {
    let mut labels: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    labels
        .entry(HOSTNAME.into())
        .or_insert_with(|| name.to_string());
    ExistingNodeInput {
        name: name.into(),
        labels,
        allocatable: Resources::parse(allocatable),
        capacity: Resources::parse(allocatable),
        initialized: true,
        ..Default::default()
    }
}

impl Outcome {
    /// Pods per domain of `key`, counting only those whose labels include `labels`, sorted
    /// ascending (upstream's `ExpectSkew`). `pods` is the batch, `existing` what ran before.
    pub fn skew_of(
        &self,
        pods: &[Pod],
        key: &str,
        labels: &[(&str, &str)],
        existing: &[ExistingNodeInput],
    ) -> Vec<usize> {
        let matches = |p: &Pod| {
            labels.iter().all(|(k, v)| {
                p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(*k))
                    .map(String::as_str)
                    == Some(*v)
            })
        };
        let mut per: BTreeMap<String, usize> = BTreeMap::new();
        for node in existing {
            let n = node
                .pods
                .iter()
                .filter(|p| {
                    labels
                        .iter()
                        .all(|(k, v)| p.labels.get(*k).map(String::as_str) == Some(*v))
                })
                .count();
            if n > 0 {
                *per.entry(
                    node.labels
                        .get(key)
                        .cloned()
                        .unwrap_or_else(|| node.name.clone()),
                )
                .or_default() += n;
            }
        }
        for (i, p) in pods.iter().enumerate() {
            if !matches(p) {
                continue;
            }
            let domain = match &self.placement[i] {
                Some(Placement::New(n)) => self.nodes[*n].labels.get(key).cloned(),
                Some(Placement::Existing(name)) => existing
                    .iter()
                    .find(|e| &e.name == name)
                    .and_then(|e| e.labels.get(key).cloned().or_else(|| Some(name.clone()))),
                None => None,
            };
            if let Some(d) = domain {
                *per.entry(d).or_default() += 1;
            }
        }
        let mut v: Vec<usize> = per.into_values().collect();
        v.sort_unstable();
        v
    }

    /// The cluster after this round: previous nodes plus the launched ones, with the pods bound.
    pub fn cluster(
        &self,
        pods: &[Pod],
        mut existing: Vec<ExistingNodeInput>,
    ) -> Vec<ExistingNodeInput> {
        for (i, p) in pods.iter().enumerate() {
            if let Some(Placement::Existing(name)) = &self.placement[i]
                && let Some(node) = existing.iter_mut().find(|e| &e.name == name)
            {
                node.pods.extend(BoundPod::all([p]));
            }
        }
        for (n, node) in self.nodes.iter().enumerate() {
            let it = self.results.new_node_claims[n].instance_types[0].clone();
            existing.push(ExistingNodeInput {
                name: format!("round{}-{}", existing.len(), node.name),
                labels: node
                    .labels
                    .iter()
                    .filter(|(k, _)| k.as_str() != HOSTNAME)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                allocatable: it.allocatable().clone(),
                capacity: it.capacity.clone(),
                pods: BoundPod::all(node.pods.iter().map(|&p| &pods[p])),
                initialized: true,
                node_pool: Some(node.node_pool.clone()),
                ..Default::default()
            });
        }
        existing
    }
}

/// The labels of a node of instance type `it` in `pool`, zone `test-zone-1`, as the fake
/// provider would set them.
pub fn managed_node_labels(
    name: &str,
    pool: &str,
    it: &InstanceType,
    capacity_type: &str,
) -> BTreeMap<String, String> {
    [
        (CAPACITY_TYPE, capacity_type),
        (ZONE, "test-zone-1"),
        (INSTANCE_TYPE, it.name.as_str()),
        (HOSTNAME, name),
        ("karpenter.sh/nodepool", pool),
        ("testing/cluster", "unspecified"),
        (ARCH, "amd64"),
        (OS, "linux"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// A PodDisruptionBudget in `default` over pods with `labels`, whose status allows `allowed`
/// disruptions now.
pub fn pdb(
    name: &str,
    allowed: i32,
    labels: &[(&str, &str)],
) -> k8s_openapi::api::policy::v1::PodDisruptionBudget {
    use k8s_openapi::api::policy::v1::{
        PodDisruptionBudget, PodDisruptionBudgetSpec, PodDisruptionBudgetStatus,
    };
    PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            selector: Some(selector(labels)),
            ..Default::default()
        }),
        status: Some(PodDisruptionBudgetStatus {
            disruptions_allowed: allowed,
            ..Default::default()
        }),
    }
}
