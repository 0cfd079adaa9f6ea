//! The gauges upstream's node and NodePool metrics controllers compute from cluster state:
//! per node and resource (allocatable, pod and DaemonSet requests and limits, system
//! overhead), node age, cluster utilization, and per NodePool usage, limits and disruption
//! budgets. Pure: state in, series out; [`super::observe`] sets them.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Node, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::jiff::Timestamp;
use karpenter_api::labels::{NODE_INITIALIZED_LABEL, NODE_POOL_LABEL};
use karpenter_api::nodeclaim::condition::INSTANCE_TERMINATING;
use karpenter_api::{DisruptionReason, NodeClaim, NodePool};
use karpenter_core::disruption::budgets::allowed_disruptions;
use karpenter_core::resources::{CPU, Resources};
use karpenter_core::state::pods;

use crate::conditions;
use crate::nodepool_status::{BASE_RESOURCES, Usage};
use crate::state::StoredPod;

/// A gauge family's series: label values in the family's order, and the value.
pub type Series = Vec<(Vec<String>, f64)>;

/// A resource name as upstream's metrics label it: lowercase, `-` as `_`.
pub fn resource_label(name: &str) -> String {
    name.to_lowercase().replace('-', "_")
}

/// A quantity in thousandths as upstream's gauges report it: CPU in cores, anything else as
/// Kubernetes' `Value()`, rounded up to a whole unit.
pub fn resource_value(name: &str, milli: i64) -> f64 {
    if name == CPU {
        milli as f64 / 1000.0
    } else {
        milli.div_euclid(1000) as f64 + f64::from(u8::from(milli.rem_euclid(1000) != 0))
    }
}

fn list(list: Option<&BTreeMap<String, Quantity>>) -> Resources {
    list.and_then(|l| Resources::from_list(l).ok())
        .unwrap_or_default()
}

/// A pod's limits, as Kubernetes sums them (`resourcehelper.PodLimits`): the containers' sum
/// or each init container's peak, whichever is larger (restartable init containers run
/// alongside and add up), plus the pod overhead on the resources that have a limit.
pub fn pod_limits(spec: &PodSpec) -> Resources {
    let limits_of = |c: &Container| list(c.resources.as_ref().and_then(|r| r.limits.as_ref()));
    let mut limits = Resources::new();
    for c in &spec.containers {
        limits.add(&limits_of(c));
    }
    let mut sidecars = Resources::new();
    let mut init_peak = Resources::new();
    for c in spec.init_containers.iter().flatten() {
        let own = limits_of(c);
        let during = if c.restart_policy.as_deref() == Some("Always") {
            limits.add(&own);
            sidecars.add(&own);
            sidecars.clone()
        } else {
            own.plus(&sidecars)
        };
        init_peak.max_with(&during);
    }
    limits.max_with(&init_peak);
    if let Some(overhead) = spec.overhead.as_ref() {
        for (name, q) in list(Some(overhead)).iter() {
            if limits.get(name) != 0 {
                limits.set(name, limits.get(name) + q);
            }
        }
    }
    limits
}

/// What a node's pods add up to, as upstream's state node counts them (bound, not finished;
/// each pod counts one `pods`, requests and limits alike).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodTotals {
    /// Every pod's requests.
    pub requests: Resources,
    /// Every pod's limits.
    pub limits: Resources,
    /// The DaemonSet pods' requests.
    pub daemon_requests: Resources,
    /// The DaemonSet pods' limits.
    pub daemon_limits: Resources,
    /// How many pods (none: upstream reports no requests or limits at all).
    pub pods: usize,
    /// How many DaemonSet pods.
    pub daemon_pods: usize,
}

/// Each node's [`PodTotals`], by node name.
pub fn pod_totals(pods_by_node: &HashMap<String, Vec<Arc<StoredPod>>>) -> HashMap<&str, PodTotals> {
    let mut limits_by_spec: HashMap<*const PodSpec, Resources> = HashMap::new();
    let mut out = HashMap::new();
    for (node, pods) in pods_by_node {
        let mut t = PodTotals::default();
        for pod in pods.iter().filter(|p| !pods::is_terminal(&**p)) {
            let spec = &pod.spec.spec;
            let limits = limits_by_spec
                .entry(spec as *const PodSpec)
                .or_insert_with(|| {
                    let mut l = pod_limits(spec);
                    l.pods = 1000;
                    l
                });
            t.requests.add(&pod.spec.requests);
            t.limits.add(limits);
            t.pods += 1;
            if pods::is_daemonset_pod(&**pod) {
                t.daemon_requests.add(&pod.spec.requests);
                t.daemon_limits.add(limits);
                t.daemon_pods += 1;
            }
        }
        out.insert(node.as_str(), t);
    }
    out
}

/// The series of the node gauges, one list per family.
#[derive(Debug, Default, PartialEq)]
pub struct NodeSeries {
    /// `karpenter_nodes_allocatable`
    pub allocatable: Series,
    /// `karpenter_nodes_total_pod_requests`
    pub total_pod_requests: Series,
    /// `karpenter_nodes_total_pod_limits`
    pub total_pod_limits: Series,
    /// `karpenter_nodes_total_daemon_requests`
    pub total_daemon_requests: Series,
    /// `karpenter_nodes_total_daemon_limits`
    pub total_daemon_limits: Series,
    /// `karpenter_nodes_system_overhead`
    pub system_overhead: Series,
    /// `karpenter_nodes_current_lifetime_seconds`
    pub current_lifetime: Series,
    /// `karpenter_cluster_utilization_percent`
    pub cluster_utilization: Series,
}

/// A node with what the gauges read beside it.
pub struct NodeView<'a> {
    /// The node.
    pub node: &'a Node,
    /// Its NodeClaim, paired by providerID (upstream's "managed").
    pub claim: Option<&'a NodeClaim>,
    /// Its pods' totals.
    pub pods: Option<&'a PodTotals>,
}

fn push(series: &mut Series, labels: &[String], resource: &str, milli: i64) {
    let mut l = labels.to_vec();
    l.push(resource_label(resource));
    series.push((l, resource_value(resource, milli)));
}

fn push_all(series: &mut Series, labels: &[String], r: &Resources, pods: usize) {
    if pods == 0 {
        return;
    }
    for (name, milli) in r.iter() {
        push(series, labels, name, milli);
    }
}

/// Every node gauge's series. `well_known` are the `(node label, metric label)` pairs the
/// families carry first, in their order.
pub fn node_series(
    nodes: &[NodeView<'_>],
    well_known: &[(String, String)],
    now: Timestamp,
) -> NodeSeries {
    let mut s = NodeSeries::default();
    let mut cluster_allocatable = Resources::new();
    let mut cluster_requests = Resources::new();
    for v in nodes {
        let node = v.node;
        let node_labels = node.metadata.labels.clone().unwrap_or_default();
        let mut labels: Vec<String> = well_known
            .iter()
            .map(|(k, _)| node_labels.get(k).cloned().unwrap_or_default())
            .collect();
        labels.push(node.metadata.name.clone().unwrap_or_default());
        labels.push(
            node.status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_default(),
        );
        labels.push(v.claim.is_some().to_string());
        let status = node.status.as_ref();
        let allocatable = list(status.and_then(|s| s.allocatable.as_ref()));
        let capacity = list(status.and_then(|s| s.capacity.as_ref()));
        for (name, milli) in allocatable.iter() {
            push(&mut s.allocatable, &labels, name, milli);
        }
        // Capacity less allocatable, over capacity's resources (upstream's `Subtract`).
        for (name, milli) in capacity.iter() {
            push(
                &mut s.system_overhead,
                &labels,
                name,
                milli - allocatable.get(name),
            );
        }
        let totals = v.pods.cloned().unwrap_or_default();
        push_all(
            &mut s.total_pod_requests,
            &labels,
            &totals.requests,
            totals.pods,
        );
        push_all(
            &mut s.total_pod_limits,
            &labels,
            &totals.limits,
            totals.pods,
        );
        push_all(
            &mut s.total_daemon_requests,
            &labels,
            &totals.daemon_requests,
            totals.daemon_pods,
        );
        push_all(
            &mut s.total_daemon_limits,
            &labels,
            &totals.daemon_limits,
            totals.daemon_pods,
        );
        if let Some(created) = &node.metadata.creation_timestamp {
            s.current_lifetime
                .push((labels.clone(), now.duration_since(created.0).as_secs_f64()));
        }
        cluster_allocatable.add(&state_allocatable(node, v.claim, &allocatable));
        if totals.pods > 0 {
            cluster_requests.add(&totals.requests);
        }
    }
    for (name, allocatable) in cluster_allocatable.iter() {
        if resource_value(name, allocatable) == 0.0 {
            continue;
        }
        let used = cluster_requests.get(name);
        let ratio = if name == CPU {
            used as f64 / allocatable as f64
        } else {
            resource_value(name, used) / resource_value(name, allocatable)
        };
        s.cluster_utilization
            .push((vec![resource_label(name)], 100.0 * ratio));
    }
    s
}

/// A node's allocatable as upstream's state node reports it: until it initializes, what its
/// NodeClaim expects stands in for what the node does not report yet.
fn state_allocatable(node: &Node, claim: Option<&NodeClaim>, reported: &Resources) -> Resources {
    let initialized = node
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(NODE_INITIALIZED_LABEL))
        .is_some_and(|v| v == "true");
    let Some(claim) = claim.filter(|_| !initialized) else {
        return reported.clone();
    };
    let mut out = reported.clone();
    let expected = list(claim.status.as_ref().map(|s| &s.allocatable));
    for (name, milli) in expected.iter() {
        if out.get(name) == 0 {
            out.set(name, milli);
        }
    }
    out
}

/// `karpenter_nodepools_usage` and `karpenter_nodepools_limit` of the NodePools the provider
/// manages: usage as the NodePool's status lists it (the base resources, its nodes'
/// capacities and `nodes`), limits as its spec sets them.
pub fn node_pool_series(pools: &[&NodePool], usage: &BTreeMap<String, Usage>) -> (Series, Series) {
    let (mut used, mut limits) = (Series::new(), Series::new());
    for pool in pools {
        let name = pool.metadata.name.clone().unwrap_or_default();
        let u = usage.get(&name).cloned().unwrap_or_default();
        let mut resources: BTreeMap<String, i64> =
            BASE_RESOURCES.iter().map(|r| (r.to_string(), 0)).collect();
        for (r, milli) in u.capacity.iter() {
            resources.insert(r.to_string(), milli);
        }
        resources.insert("nodes".into(), u.nodes * 1000);
        for (r, milli) in resources {
            used.push((
                vec![resource_label(&r), name.clone()],
                resource_value(&r, milli),
            ));
        }
        for (r, q) in pool.spec.limits.iter().flatten() {
            let Ok(milli) = karpenter_core::resources::parse_milli_saturating(&q.0) else {
                continue;
            };
            limits.push((
                vec![resource_label(r), name.clone()],
                resource_value(r, milli),
            ));
        }
    }
    (used, limits)
}

/// A node as the disruption budgets count it.
pub struct BudgetNode<'a> {
    /// Its NodePool.
    pub node_pool: &'a str,
    /// Initialized.
    pub initialized: bool,
    /// Its NodeClaim's instance is terminating (it no longer counts).
    pub instance_terminating: bool,
    /// Not `Ready`, or marked for deletion: already disrupting.
    pub disrupting: bool,
}

impl<'a> BudgetNode<'a> {
    /// A managed node's, `None` for nodes without a NodePool.
    pub fn of(
        node: &'a Node,
        claim: Option<&NodeClaim>,
        marked: &BTreeSet<String>,
    ) -> Option<Self> {
        let labels = node.metadata.labels.as_ref()?;
        let node_pool = labels.get(NODE_POOL_LABEL)?;
        claim?;
        let ready = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
            .is_some_and(|c| c.status == "True");
        let name = node.metadata.name.as_deref().unwrap_or_default();
        Some(Self {
            node_pool,
            initialized: labels
                .get(NODE_INITIALIZED_LABEL)
                .is_some_and(|v| v == "true"),
            instance_terminating: claim
                .and_then(|c| c.status.as_ref())
                .is_some_and(|s| conditions::is_true(&s.conditions, INSTANCE_TERMINATING)),
            disrupting: !ready || marked.contains(name),
        })
    }
}

/// `karpenter_nodepools_allowed_disruptions` and `karpenter_nodepools_nodes_consuming_budgets`
/// for every reason, as upstream's budget mapping sets them: over the NodePool's initialized
/// nodes whose instances are not terminating, the budgets' allowance (2147483647 when no
/// budget is active) and how many of those nodes are not ready or being disrupted.
pub fn budget_series(
    pools: &[&NodePool],
    nodes: &[BudgetNode<'_>],
    now: k8s_openapi::jiff::Timestamp,
) -> (Series, Series) {
    let mut counted: HashMap<&str, (usize, usize)> = HashMap::new();
    for n in nodes
        .iter()
        .filter(|n| n.initialized && !n.instance_terminating)
    {
        let entry = counted.entry(n.node_pool).or_default();
        entry.0 += 1;
        entry.1 += usize::from(n.disrupting);
    }
    let (mut allowed, mut consuming) = (Series::new(), Series::new());
    for pool in pools {
        let name = pool.metadata.name.clone().unwrap_or_default();
        let (total, disrupting) = counted.get(name.as_str()).copied().unwrap_or_default();
        for reason in [
            DisruptionReason::Underutilized,
            DisruptionReason::Empty,
            DisruptionReason::Drifted,
        ] {
            let n = allowed_disruptions(pool, total, reason, now).min(i32::MAX as usize);
            let labels = vec![name.clone(), reason.as_str().to_string()];
            allowed.push((labels.clone(), n as f64));
            consuming.push((labels, disrupting as f64));
        }
    }
    (allowed, consuming)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use serde_json::json;

    use super::*;

    fn q(list: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
        list.iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect()
    }

    #[test]
    fn values_as_upstream_reports_them() {
        for (name, milli, want) in [
            ("cpu", 1500, 1.5),
            ("memory", 1_073_741_824_000, 1_073_741_824.0),
            ("memory", 1, 1.0),
            ("pods", 110_000, 110.0),
            ("nvidia.com/gpu", 2000, 2.0),
        ] {
            assert_eq!(resource_value(name, milli), want, "{name} {milli}");
        }
        assert_eq!(resource_label("ephemeral-storage"), "ephemeral_storage");
        assert_eq!(resource_label("nvidia.com/gpu"), "nvidia.com/gpu");
    }

    fn container(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Container {
        Container {
            resources: Some(ResourceRequirements {
                requests: Some(q(requests)),
                limits: Some(q(limits)),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn limits_as_kubernetes_sums_them() {
        let spec = PodSpec {
            containers: vec![
                container(&[], &[("cpu", "1"), ("memory", "1Gi")]),
                container(&[], &[("cpu", "500m")]),
            ],
            init_containers: Some(vec![
                container(&[], &[("cpu", "4")]),
                Container {
                    restart_policy: Some("Always".into()),
                    ..container(&[], &[("memory", "1Gi")])
                },
            ]),
            overhead: Some(q(&[("cpu", "100m"), ("ephemeral-storage", "1Gi")])),
            ..Default::default()
        };
        let l = pod_limits(&spec);
        // max(1.5 + sidecar's nothing, init 4) + overhead 0.1; memory 1Gi + sidecar 1Gi;
        // overhead on ephemeral-storage is dropped: the pod sets no limit on it.
        assert_eq!(l.cpu, 4100);
        assert_eq!(l.memory, 2 * 1_073_741_824_000);
        assert_eq!(l.ephemeral_storage, 0);
    }

    fn node(name: &str, labels: serde_json::Value) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: serde_json::from_value(labels).unwrap(),
                creation_timestamp: Some(Time("2026-01-01T00:00:00Z".parse().unwrap())),
                ..Default::default()
            },
            spec: Some(NodeSpec::default()),
            status: Some(NodeStatus {
                allocatable: Some(q(&[("cpu", "3800m"), ("memory", "3Gi"), ("pods", "110")])),
                capacity: Some(q(&[("cpu", "4"), ("memory", "4Gi"), ("pods", "110")])),
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn node_gauges_per_resource() {
        let n = node(
            "n1",
            json!({"karpenter.sh/nodepool": "default", "topology.kubernetes.io/zone": "z1"}),
        );
        let totals = PodTotals {
            requests: Resources::parse(&[("cpu", "1900m"), ("pods", "2")]),
            limits: Resources::parse(&[("pods", "2")]),
            pods: 2,
            ..Default::default()
        };
        let claim = NodeClaim::default();
        let well_known = vec![
            ("karpenter.sh/nodepool".to_string(), "nodepool".to_string()),
            (
                "topology.kubernetes.io/zone".to_string(),
                "zone".to_string(),
            ),
        ];
        let s = node_series(
            &[NodeView {
                node: &n,
                claim: Some(&claim),
                pods: Some(&totals),
            }],
            &well_known,
            "2026-01-01T01:00:00Z".parse().unwrap(),
        );
        let labels = |r: &str| -> Vec<String> {
            ["default", "z1", "n1", "", "true", r]
                .iter()
                .map(|s| s.to_string())
                .collect()
        };
        let value = |series: &Series, r: &str| {
            series
                .iter()
                .find(|(l, _)| *l == labels(r))
                .map(|(_, v)| *v)
        };
        assert_eq!(value(&s.allocatable, "cpu"), Some(3.8));
        assert_eq!(value(&s.allocatable, "memory"), Some(3.0 * 1_073_741_824.0));
        assert_eq!(value(&s.system_overhead, "cpu"), Some(0.2));
        assert_eq!(value(&s.system_overhead, "pods"), Some(0.0));
        assert_eq!(value(&s.total_pod_requests, "cpu"), Some(1.9));
        assert_eq!(value(&s.total_pod_limits, "pods"), Some(2.0));
        assert!(s.total_daemon_requests.is_empty(), "no DaemonSet pods");
        assert_eq!(s.current_lifetime[0].1, 3600.0);
        let util: BTreeMap<String, f64> = s
            .cluster_utilization
            .iter()
            .map(|(l, v)| (l[0].clone(), *v))
            .collect();
        assert_eq!(util["cpu"], 50.0);
        assert_eq!(util["pods"], 100.0 * 2.0 / 110.0);
        assert_eq!(util["memory"], 0.0);
    }

    fn pool(name: &str, spec: serde_json::Value) -> NodePool {
        let mut p: NodePool = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": name},
            "spec": spec,
        }))
        .unwrap();
        p.metadata.name = Some(name.into());
        p
    }

    #[test]
    fn node_pool_usage_and_limits() {
        let p = pool(
            "default",
            json!({"template": {"spec": {"nodeClassRef": {"group": "g", "kind": "K", "name": "n"}, "requirements": []}},
                   "limits": {"cpu": "1000", "memory": "1000Gi"}}),
        );
        let usage = BTreeMap::from([(
            "default".to_string(),
            Usage {
                capacity: Resources::parse(&[("cpu", "4"), ("memory", "4Gi"), ("pods", "110")]),
                nodes: 1,
            },
        )]);
        let (used, limits) = node_pool_series(&[&p], &usage);
        let get = |s: &Series, r: &str| s.iter().find(|(l, _)| l[0] == r).map(|(_, v)| *v);
        assert_eq!(get(&used, "cpu"), Some(4.0));
        assert_eq!(get(&used, "nodes"), Some(1.0));
        assert_eq!(get(&used, "ephemeral_storage"), Some(0.0));
        assert_eq!(get(&limits, "cpu"), Some(1000.0));
        assert_eq!(get(&limits, "memory"), Some(1000.0 * 1_073_741_824.0));
        assert_eq!(limits.len(), 2);
    }

    #[test]
    fn budgets_per_reason() {
        let p = pool(
            "default",
            json!({"template": {"spec": {"nodeClassRef": {"group": "g", "kind": "K", "name": "n"}, "requirements": []}},
                   "disruption": {"budgets": [{"nodes": "50%"}, {"nodes": "0", "reasons": ["Drifted"]}]}}),
        );
        let nodes: Vec<BudgetNode> = (0..4)
            .map(|i| BudgetNode {
                node_pool: "default",
                initialized: i != 3,
                instance_terminating: false,
                disrupting: i == 0,
            })
            .collect();
        let (allowed, consuming) =
            budget_series(&[&p], &nodes, k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        let get =
            |s: &Series, reason: &str| s.iter().find(|(l, _)| l[1] == reason).map(|(_, v)| *v);
        // 50% of the 3 initialized nodes, rounded up.
        assert_eq!(get(&allowed, "Underutilized"), Some(2.0));
        assert_eq!(get(&allowed, "Drifted"), Some(0.0));
        assert_eq!(get(&consuming, "Empty"), Some(1.0));
        let unbudgeted = pool(
            "free",
            json!({"template": {"spec": {"nodeClassRef": {"group": "g", "kind": "K", "name": "n"}, "requirements": []}},
                   "disruption": {"budgets": []}}),
        );
        let (allowed, _) = budget_series(
            &[&unbudgeted],
            &[],
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        );
        assert_eq!(allowed[0].1, f64::from(i32::MAX));
    }
}
