//! Upstream's provisioning suite (`pkg/controllers/provisioning/suite_test.go`), through one
//! provisioning round over a snapshot of Kubernetes objects — NodePools, pending pods,
//! DaemonSets, nodes and NodeClaims — as the controller, the simulator and `plan` take it. A
//! round's NodeClaims can be launched (as upstream's fake provider does: the cheapest instance
//! type, its cheapest offering) so that the next round sees them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::jiff::Timestamp;
use karpenter_api::{NodeClaim, NodePool};
use karpenter_core::feature_gates::FeatureGates;
use karpenter_core::instancetype::{InstanceType, fake};
use karpenter_core::provisioning::node_claim_for;
use karpenter_core::provisioning::scheduling::{NewNodeClaim, NodePoolInput, SchedulerOptions};
use karpenter_core::round::{BufferHolding, Parts, Provisioning, RoundInputs, RoundPod, decide};
use karpenter_core::state::{Observed, Snapshot};
use serde_json::{Value, json};

const NOW: &str = "2025-01-01T12:00:00Z";
const ZONE: &str = "topology.kubernetes.io/zone";
const HOSTNAME: &str = "kubernetes.io/hostname";
const ARCH: &str = "kubernetes.io/arch";
const OS: &str = "kubernetes.io/os";
const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
const NODE_POOL: &str = "karpenter.sh/nodepool";

fn from<T: k8s_openapi::serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("a valid object")
}

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

/// Upstream's `test.NodePool()`: every capacity type, the test NodeClass; `extra` merged in.
fn pool(name: &str, extra: Value) -> NodePool {
    let mut v = json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": name, "uid": format!("{name}-uid")},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.test.sh", "kind": "TestNodeClass", "name": "default"},
            "requirements": [{"key": CAPACITY_TYPE, "operator": "In",
                "values": ["spot", "on-demand", "reserved"]}]}}}
    });
    merge(&mut v, extra);
    from(v)
}

/// Extra requirements for a pool (appended to the capacity-type one).
fn requiring(name: &str, requirements: Value, extra: Value) -> NodePool {
    let mut p = pool(name, extra);
    let more: Vec<karpenter_api::NodeSelectorRequirementWithMinValues> = from(requirements);
    p.spec.template.spec.requirements.extend(more);
    p
}

/// A pending pod kube-scheduler marked unschedulable; `spec` merged into its spec.
fn pending(name: &str, spec: Value) -> Pod {
    let mut v = json!({
        "metadata": {"name": name, "namespace": "default", "uid": name,
            "creationTimestamp": "2025-01-01T11:00:00Z"},
        "spec": {"containers": [{"name": "app"}]},
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
    });
    merge(&mut v, json!({ "spec": spec }));
    from(v)
}

/// A container spec with these requests.
fn requests(pairs: Value) -> Value {
    json!({"containers": [{"name": "app", "resources": {"requests": pairs}}]})
}

fn labelled(mut pod: Pod, labels: &[(&str, &str)]) -> Pod {
    let map = pod.metadata.labels.get_or_insert_with(Default::default);
    for (k, v) in labels {
        map.insert(k.to_string(), v.to_string());
    }
    pod
}

/// A DaemonSet whose pod template has `spec`.
fn daemonset(name: &str, spec: Value) -> DaemonSet {
    let mut template = json!({"containers": [{"name": "ds"}]});
    merge(&mut template, spec);
    from(json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("{name}-uid")},
        "spec": {"selector": {"matchLabels": {"ds": name}},
            "template": {"metadata": {"labels": {"ds": name}}, "spec": template}},
    }))
}

/// A cluster: NodePools over the fake provider's instance types, and the objects a round reads.
struct Cluster {
    pools: Vec<NodePoolInput>,
    pods: Vec<Pod>,
    daemonsets: Vec<DaemonSet>,
    nodes: Vec<Node>,
    claims: Vec<NodeClaim>,
    volume_claims: Vec<PersistentVolumeClaim>,
    volumes: Vec<PersistentVolume>,
    storage_classes: Vec<StorageClass>,
    options: SchedulerOptions,
    launched: usize,
}

/// Where a round put a pod.
#[derive(Clone, Debug, PartialEq)]
enum Placed {
    /// On the round's new NodeClaim `i`.
    New(usize),
    /// On an existing or launching node.
    Existing(String),
}

/// One round's decision.
struct Outcome {
    claims: Vec<NewNodeClaim>,
    /// The NodeClaim objects the round creates, as `claims`.
    objects: Vec<NodeClaim>,
    placed: BTreeMap<String, Placed>,
    errors: BTreeMap<String, String>,
}

impl Outcome {
    fn scheduled(&self, pod: &str) -> bool {
        self.placed.contains_key(pod)
    }

    fn claim_of(&self, pod: &str) -> &NewNodeClaim {
        match self.placed.get(pod) {
            Some(Placed::New(i)) => &self.claims[*i],
            other => panic!(
                "{pod} is not on a new NodeClaim: {other:?}; {:?}",
                self.errors
            ),
        }
    }

    fn object_of(&self, pod: &str) -> &NodeClaim {
        match self.placed.get(pod) {
            Some(Placed::New(i)) => &self.objects[*i],
            other => panic!(
                "{pod} is not on a new NodeClaim: {other:?}; {:?}",
                self.errors
            ),
        }
    }

    /// The instance type the fake provider launches for the pod's NodeClaim: its cheapest.
    fn instance_type(&self, pod: &str) -> &InstanceType {
        &self.claim_of(pod).instance_types[0]
    }

    /// The NodeClaim's `key` requirement values.
    fn requirement(&self, pod: &str, key: &str) -> Option<(String, BTreeSet<String>)> {
        self.object_of(pod)
            .spec
            .requirements
            .iter()
            .find(|r| r.key == key)
            .map(|r| {
                (
                    format!("{:?}", r.operator),
                    r.values.iter().cloned().collect(),
                )
            })
    }
}

impl Cluster {
    fn new(pools: Vec<NodePool>) -> Self {
        Self::with_types(pools, fake::default_instance_types())
    }

    fn with_types(pools: Vec<NodePool>, types: Vec<InstanceType>) -> Self {
        let types: Vec<Arc<InstanceType>> = types.into_iter().map(Arc::new).collect();
        Self {
            pools: pools
                .into_iter()
                .map(|node_pool| NodePoolInput {
                    node_pool,
                    instance_types: types.clone(),
                })
                .collect(),
            pods: Vec::new(),
            daemonsets: Vec::new(),
            nodes: Vec::new(),
            claims: Vec::new(),
            volume_claims: Vec::new(),
            volumes: Vec::new(),
            storage_classes: Vec::new(),
            options: SchedulerOptions {
                provider_labels: fake::provider_labels(),
                ..Default::default()
            },
            launched: 0,
        }
    }

    fn daemonset(mut self, ds: DaemonSet) -> Self {
        self.daemonsets.push(ds);
        self
    }

    fn pods(mut self, pods: impl IntoIterator<Item = Pod>) -> Self {
        self.pods.extend(pods);
        self
    }

    /// One provisioning round.
    fn round(&self) -> Outcome {
        self.round_with(FeatureGates::default(), &[], |p| self.outcome(p))
    }

    /// One provisioning round with these gates and CapacityBuffer virtual pods.
    fn round_with<T>(
        &self,
        gates: FeatureGates,
        virtual_pods: &[Pod],
        f: impl FnOnce(&Provisioning<'_, Pod>) -> T,
    ) -> T {
        let provider_labels = self.options.provider_labels.clone();
        let snapshot = Snapshot::new(Observed {
            nodes: self.nodes.iter().collect(),
            node_claims: self.claims.iter().collect(),
            pods: self.pods.iter().collect(),
            daemonsets: self.daemonsets.iter().collect(),
            pdbs: Vec::new(),
            namespaces: Vec::new(),
            volume_claims: self.volume_claims.iter().collect(),
            volumes: self.volumes.iter().collect(),
            storage_classes: self.storage_classes.iter().collect(),
            csi_nodes: Vec::new(),
            services: Vec::new(),
            pod_controllers: Vec::new(),
            node_pools: &self.pools,
            provider_labels: &provider_labels,
            nominated: BTreeSet::new(),
            devices: Default::default(),
            marked_for_deletion: BTreeSet::new(),
        });
        let never = || false;
        let plan = decide(
            &snapshot,
            &RoundInputs {
                gates,
                now: NOW.parse::<Timestamp>().unwrap(),
                options: &self.options,
                virtual_pods,
                buffer_holding: BufferHolding::Unknown,
                repair_policies: &[],
                parts: Parts {
                    provisioning: true,
                    ..Parts::NONE
                },
                interrupt: &never,
            },
        );
        f(&plan.provisioning.expect("provisioning is due"))
    }

    fn outcome(&self, provisioning: &Provisioning<'_, Pod>) -> Outcome {
        let name = |i: usize| match &provisioning.batch[i] {
            RoundPod::Real(p) => p.metadata.name.clone().unwrap_or_default(),
            RoundPod::Virtual(p) => p.metadata.name.clone().unwrap_or_default(),
        };
        let results = &provisioning.results;
        let mut placed = BTreeMap::new();
        for (i, claim) in results.new_node_claims.iter().enumerate() {
            for &p in &claim.pods {
                placed.insert(name(p), Placed::New(i));
            }
        }
        for (node, pods) in &results.existing_nodes {
            for &p in pods {
                placed.insert(name(p), Placed::Existing(node.clone()));
            }
        }
        let objects = results
            .new_node_claims
            .iter()
            .map(|c| {
                let np = self
                    .pools
                    .iter()
                    .find(|p| p.node_pool.metadata.name.as_deref() == Some(&c.node_pool))
                    .expect("a claim of a known NodePool");
                node_claim_for(c, &np.node_pool)
            })
            .collect();
        Outcome {
            claims: results.new_node_claims.clone(),
            objects,
            placed,
            errors: results
                .pod_errors
                .iter()
                .map(|(&i, e)| (name(i), e.clone()))
                .collect(),
        }
    }

    /// Launches the round's NodeClaims as upstream's fake provider does and binds their pods,
    /// so the next round sees them.
    fn launch(&mut self, outcome: &Outcome) {
        for (i, claim) in outcome.claims.iter().enumerate() {
            let it = &claim.instance_types[0];
            let offering = it
                .compatible_offerings(&claim.requirements)
                .min_by(|a, b| a.price.total_cmp(&b.price))
                .expect("an offering the claim allows");
            let name = format!("launched-{}", self.launched);
            self.launched += 1;
            let mut labels = claim.labels.clone();
            labels.insert(NODE_POOL.into(), claim.node_pool.clone());
            labels.insert(INSTANCE_TYPE.into(), it.name.clone());
            labels.insert(ZONE.into(), offering.zone.clone());
            labels.insert(CAPACITY_TYPE.into(), offering.capacity_type.clone());
            labels.insert(HOSTNAME.into(), name.clone());
            labels.insert("karpenter.sh/registered".into(), "true".into());
            labels.insert("karpenter.sh/initialized".into(), "true".into());
            let resources = |r: &karpenter_core::resources::Resources| {
                serde_json::to_value(r.to_list()).unwrap()
            };
            let capacity = resources(&it.capacity);
            let allocatable = resources(it.allocatable());
            let mut object = serde_json::to_value(&outcome.objects[i]).unwrap();
            merge(
                &mut object,
                json!({
                    "metadata": {"name": name, "labels": labels, "creationTimestamp": NOW},
                    "status": {"providerID": format!("fake://{name}"), "nodeName": name,
                        "capacity": capacity, "allocatable": allocatable},
                }),
            );
            self.claims.push(from(object));
            self.nodes.push(from(json!({
                "metadata": {"name": name, "labels": labels, "creationTimestamp": NOW},
                "spec": {"providerID": format!("fake://{name}")},
                "status": {"capacity": capacity, "allocatable": allocatable,
                    "conditions": [{"type": "Ready", "status": "True"}]},
            })));
            for pod in &mut self.pods {
                if outcome
                    .placed
                    .get(pod.metadata.name.as_deref().unwrap_or_default())
                    == Some(&Placed::New(i))
                {
                    pod.spec.as_mut().unwrap().node_name = Some(name.clone());
                    pod.status = Some(from(json!({"phase": "Running"})));
                }
            }
        }
    }
}

fn cpu_mem(cpu: &str, memory: &str) -> Value {
    requests(json!({"cpu": cpu, "memory": memory}))
}

/// The capacity (cpu, memory) of the instance type the pod's NodeClaim launches as.
fn launched_size(o: &Outcome, pod: &str) -> (i64, i64) {
    let it = o.instance_type(pod);
    (
        it.capacity.cpu / 1000,
        it.capacity.memory / 1000 / (1 << 30),
    )
}

#[test]
fn provisions_nodes_for_pending_pods() {
    let o = Cluster::new(vec![pool("default", json!({}))])
        .pods([pending("p", json!({}))])
        .round();
    assert!(o.scheduled("p"), "one pod: {:?}", o.errors);
    assert_eq!(o.claims.len(), 1);
    let pods: Vec<Pod> = (0..100)
        .map(|i| pending(&format!("p{i}"), json!({})))
        .collect();
    let o = Cluster::new(vec![pool("default", json!({}))])
        .pods(pods)
        .round();
    assert_eq!(o.placed.len(), 100, "every pod of 100: {:?}", o.errors);
    assert!(!o.claims.is_empty());
}

#[test]
fn termination_grace_period_comes_from_the_node_pool() {
    let o = Cluster::new(vec![pool("default", json!({}))])
        .pods([pending("p", json!({}))])
        .round();
    assert_eq!(
        o.object_of("p").spec.termination_grace_period,
        None,
        "none set: none on the NodeClaim"
    );
    let o = Cluster::new(vec![pool(
        "default",
        json!({"spec": {"template": {"spec": {"terminationGracePeriod": "223h"}}}}),
    )])
    .pods([pending("p", json!({}))])
    .round();
    assert_eq!(
        o.object_of("p")
            .spec
            .termination_grace_period
            .map(|d| d.0.as_secs()),
        Some(223 * 3600),
        "the NodePool's value"
    );
}

#[test]
fn deleting_node_pools_launch_nothing() {
    let mut deleting = pool("default", json!({}));
    deleting.metadata.deletion_timestamp = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(NOW.parse().unwrap()),
    );
    // The controller, the simulator and `plan` take the NodePools `launchable` allows.
    let pools: Vec<NodePool> = [deleting]
        .into_iter()
        .filter(karpenter_core::provisioning::nodepools::launchable)
        .collect();
    let o = Cluster::new(pools).pods([pending("p", json!({}))]).round();
    assert!(!o.scheduled("p"));
    assert!(o.claims.is_empty());
    assert_eq!(
        o.errors.get("p").map(String::as_str),
        Some("no nodepools found")
    );
}

#[test]
fn supported_node_selectors_and_affinities() {
    // (case, key, value, schedulable)
    let cases = [
        ("the NodePool", NODE_POOL, "default", true),
        ("a zone", ZONE, "test-zone-1", true),
        (
            "an instance type",
            INSTANCE_TYPE,
            "default-instance-type",
            true,
        ),
        ("an architecture", ARCH, "arm64", true),
        ("an operating system", OS, "linux", true),
        ("another NodePool", NODE_POOL, "unknown", false),
        ("an unknown zone", ZONE, "unknown", false),
        ("an unknown instance type", INSTANCE_TYPE, "unknown", false),
        ("an unknown architecture", ARCH, "unknown", false),
        ("an unknown operating system", OS, "unknown", false),
        ("an unknown capacity type", CAPACITY_TYPE, "unknown", false),
        ("a label no NodePool sets", "foo", "bar", false),
    ];
    let mut failures = Vec::new();
    for (case, key, value, want) in cases {
        for (how, spec) in [
            ("node selector", json!({"nodeSelector": {key: value}})),
            (
                "node affinity",
                json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}]}}}}),
            ),
        ] {
            let o = Cluster::new(vec![pool("default", json!({}))])
                .pods([pending("p", spec)])
                .round();
            if o.scheduled("p") != want {
                failures.push(format!("{how} on {case}: {:?}", o.errors));
            } else if want {
                let claim = o.claim_of("p");
                if !claim.requirements.allows(key, value) {
                    failures.push(format!("{how} on {case}: the NodeClaim lost it"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn accelerators_get_their_instance_types() {
    let o = Cluster::new(vec![pool("default", json!({}))])
        .pods([
            // Limits only: the API server defaults a pod's requests to them, as stored.
            pending(
                "a",
                json!({"containers": [{"name": "app", "resources": {
                    "limits": {fake::GPU_VENDOR_A: "1"}, "requests": {fake::GPU_VENDOR_A: "1"}}}]}),
            ),
            pending(
                "b",
                json!({"containers": [{"name": "app", "resources": {
                    "limits": {fake::GPU_VENDOR_B: "1"}, "requests": {fake::GPU_VENDOR_B: "1"}}}]}),
            ),
        ])
        .round();
    assert_eq!(o.instance_type("a").name, "gpu-vendor-instance-type");
    assert_eq!(o.instance_type("b").name, "gpu-vendor-b-instance-type");
}

#[test]
fn max_pods_opens_a_node_per_pod() {
    let o = Cluster::new(vec![requiring(
        "default",
        json!([{"key": INSTANCE_TYPE, "operator": "In", "values": ["single-pod-instance-type"]}]),
        json!({}),
    )])
    .pods((0..3).map(|i| pending(&format!("p{i}"), json!({}))))
    .round();
    assert_eq!(o.placed.len(), 3, "{:?}", o.errors);
    assert_eq!(o.claims.len(), 3);
}

#[test]
fn the_node_claim_carries_the_hash_of_the_node_pool_it_was_decided_from() {
    let np = pool("default", json!({}));
    let hash = np.hash();
    let o = Cluster::new(vec![np.clone()])
        .pods([pending("p", json!({}))])
        .round();
    let annotations = o.object_of("p").metadata.annotations.clone().unwrap();
    assert_eq!(annotations.get("karpenter.sh/nodepool-hash"), Some(&hash));
    // A NodePool changed since hashes differently: the claim made from the one the round saw
    // keeps the hash it was decided under.
    let mut changed = np;
    changed
        .spec
        .template
        .metadata
        .labels
        .insert("new-label".into(), "new-value".into());
    assert_ne!(changed.hash(), hash);
}

#[test]
fn pods_go_to_a_new_node_not_to_a_deleting_one() {
    let mut cluster = Cluster::new(vec![pool("default", json!({}))]);
    cluster.nodes.push(from(json!({
        "metadata": {"name": "going", "finalizers": ["karpenter.sh/termination"],
            "deletionTimestamp": NOW,
            "labels": {NODE_POOL: "default", INSTANCE_TYPE: "default-instance-type",
                HOSTNAME: "going", "karpenter.sh/initialized": "true", "karpenter.sh/registered": "true"}},
        "spec": {"providerID": "fake://going"},
        "status": {"capacity": {"cpu": "4", "memory": "4Gi", "pods": "5"},
            "allocatable": {"cpu": "4", "memory": "4Gi", "pods": "5"},
            "conditions": [{"type": "Ready", "status": "True"}]},
    })));
    for i in 0..3 {
        let mut p = pending(&format!("bound-{i}"), json!({"nodeName": "going"}));
        p.status = Some(from(json!({"phase": "Running"})));
        cluster.pods.push(p);
    }
    cluster.pods.push(pending("new-0", json!({})));
    cluster.pods.push(pending("new-1", json!({})));
    let o = cluster.round();
    for p in ["new-0", "new-1"] {
        assert!(
            matches!(o.placed.get(p), Some(Placed::New(_))),
            "{p}: {:?}",
            o.placed.get(p)
        );
    }
    assert!(
        o.placed
            .values()
            .all(|p| *p != Placed::Existing("going".into())),
        "nothing goes to the deleting node"
    );
}

/// The default catalog plus upstream's three types of 10/4Gi, 11/5Gi and 12/6Gi.
fn sized_catalog() -> Vec<InstanceType> {
    let mut types = fake::default_instance_types();
    for (cpu, mem) in [("10", "4Gi"), ("11", "5Gi"), ("12", "6Gi")] {
        types.push(
            fake::FakeInstanceType::new(&format!("{cpu}-cpu-{mem}"))
                .resources(&[("cpu", cpu), ("memory", mem)])
                .build(),
        );
    }
    types
}

#[test]
fn sidecars_and_init_containers_size_the_node() {
    let c = |cpu: &str, mem: &str| json!({"name": "c", "resources": {"requests": {"cpu": cpu, "memory": mem}}});
    let sidecar = |cpu: &str, mem: &str| {
        let mut v = c(cpu, mem);
        v["restartPolicy"] = json!("Always");
        v
    };
    // (case, containers, init containers, pod-level requests, expected (cpu, GiB))
    let cases = [
        (
            "the init container comes first",
            vec![c("6", "2Gi")],
            vec![c("10", "4Gi"), sidecar("4.9", "2.9Gi")],
            None,
            (11, 5),
        ),
        (
            "the sidecar comes first, the init container is smaller than the containers",
            vec![c("6", "2Gi")],
            vec![sidecar("4.9", "2.9Gi"), c("5", "1Gi")],
            None,
            (11, 5),
        ),
        (
            "the sidecar comes first, the init container is bigger than the containers",
            vec![c("5", "1Gi")],
            vec![sidecar("4.9", "2.9Gi"), c("6", "2Gi")],
            None,
            (11, 5),
        ),
        (
            "pod-level requests",
            vec![c("5", "1Gi")],
            vec![c("6", "2Gi"), sidecar("4", "2Gi")],
            Some(json!({"requests": {"cpu": "9.9", "memory": "3.9Gi"},
                "limits": {"cpu": "10", "memory": "4Gi"}})),
            (10, 4),
        ),
    ];
    let mut failures = Vec::new();
    for (case, containers, init, pod_level, want) in cases {
        let mut spec = json!({"containers": containers, "initContainers": init});
        if let Some(r) = pod_level {
            spec["resources"] = r;
        }
        let mut pod = pending("p", json!({}));
        let mut v = serde_json::to_value(&pod).unwrap();
        v["spec"] = spec;
        pod = from(v);
        let o = Cluster::with_types(vec![pool("default", json!({}))], sized_catalog())
            .pods([pod])
            .round();
        if !o.scheduled("p") {
            failures.push(format!("{case}: not scheduled: {:?}", o.errors));
        } else if launched_size(&o, "p") != want {
            failures.push(format!("{case}: {:?}", launched_size(&o, "p")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A DaemonSet's pod as the DaemonSet controller makes it: owned by `ds`, pinned to a node by
/// name, with `spec` (its requests may differ from the template's, a LimitRange or VPA).
fn daemonset_pod(ds: &DaemonSet, spec: Value) -> Pod {
    let name = ds.metadata.name.clone().unwrap();
    let mut v = json!({
        "metadata": {"name": format!("{name}-pod"), "namespace": "default", "uid": format!("{name}-pod"),
            "creationTimestamp": "2025-01-01T11:00:00Z",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name,
                "uid": ds.metadata.uid.clone(), "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"containers": [{"name": "ds"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": ["node-name"]}]}]}}}},
        "status": {"phase": "Pending"},
    });
    merge(&mut v, json!({ "spec": spec }));
    from(v)
}

fn node_affinity(terms: Value) -> Value {
    json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": terms}}}})
}

fn with(mut a: Value, b: Value) -> Value {
    merge(&mut a, b);
    a
}

#[test]
fn daemonset_overhead() {
    let size = |cpu: &str, mem: &str| cpu_mem(cpu, mem);
    let default = || pool("default", json!({}));
    let pod_1 = || pending("p", size("1", "1Gi"));
    // (case, NodePool, DaemonSets (with their pods), the pod, the (cpu, GiB) it launches on,
    // or None if it must not schedule)
    type Case = (
        &'static str,
        NodePool,
        Vec<(DaemonSet, Option<Pod>)>,
        Pod,
        Option<(i64, i64)>,
    );
    let ds = |spec: Value| (daemonset("ds", spec), None);
    let small_ds = || ds(size("2", "2Gi"));
    let cases: Vec<Case> = vec![
        (
            "a DaemonSet's requests",
            default(),
            vec![small_ds()],
            pod_1(),
            Some((4, 4)),
        ),
        (
            "startup taints do not keep DaemonSets off",
            pool(
                "default",
                json!({"spec": {"template": {"spec": {
                "startupTaints": [{"key": "foo.com/taint", "effect": "NoSchedule"}]}}}}),
            ),
            vec![small_ds()],
            pod_1(),
            Some((4, 4)),
        ),
        (
            "overhead larger than any type",
            default(),
            vec![ds(size("10000", "10000Gi"))],
            pending("p", json!({})),
            None,
        ),
        (
            "the DaemonSet's pod, not its template",
            default(),
            vec![{
                let d = daemonset("ds", size("4", "4Gi"));
                let p = daemonset_pod(&d, size("2", "2Gi"));
                (d, Some(p))
            }],
            pending(
                "p",
                with(
                    size("1", "1Gi"),
                    json!({"nodeSelector": {NODE_POOL: "default"}}),
                ),
            ),
            Some((4, 4)),
        ),
        (
            "limits stand for requests a DaemonSet does not state",
            default(),
            vec![ds(json!({"containers": [{"name": "ds", "resources": {
                "limits": {"cpu": "10000", "memory": "10000Gi"}, "requests": {"cpu": "1"}}}]}))],
            pending("p", json!({})),
            None,
        ),
        (
            "the larger of containers and init containers",
            default(),
            vec![ds(json!({
                "containers": [{"name": "ds", "resources": {
                    "limits": {"cpu": "10000", "memory": "1Gi"}, "requests": {"cpu": "1"}}}],
                "initContainers": [{"name": "init", "resources": {
                    "limits": {"cpu": "10000", "memory": "3Gi"}, "requests": {"cpu": "3"}}}]}))],
            pending("p", json!({})),
            Some((4, 4)),
        ),
        (
            "combined maxima too large for any type",
            default(),
            vec![ds(json!({
                "containers": [{"name": "ds", "resources": {
                    "limits": {"cpu": "10000", "memory": "1Gi"}, "requests": {"cpu": "1"}}}],
                "initContainers": [{"name": "init", "resources": {
                    "limits": {"cpu": "10000", "memory": "10000Gi"}, "requests": {"cpu": "1"}}}]}))],
            pending("p", json!({})),
            None,
        ),
        (
            "an init container too large",
            default(),
            vec![ds(
                json!({"initContainers": [{"name": "init", "resources": {
                "requests": {"cpu": "10000", "memory": "10000Gi"}}}]}),
            )],
            pending("p", json!({})),
            None,
        ),
        (
            "no requests and no limits",
            default(),
            vec![ds(json!({}))],
            pending("p", json!({})),
            Some((2, 2)),
        ),
        (
            "a DaemonSet that does not tolerate the NodePool's taint",
            pool(
                "default",
                json!({"spec": {"template": {"spec": {
                "taints": [{"key": "foo", "value": "bar", "effect": "NoSchedule"}]}}}}),
            ),
            vec![small_ds()],
            pending(
                "p",
                with(
                    size("1", "1Gi"),
                    json!({"tolerations": [{"operator": "Exists"}]}),
                ),
            ),
            Some((2, 2)),
        ),
        (
            "a DaemonSet selecting nodes no NodePool makes",
            default(),
            vec![ds(with(
                size("2", "2Gi"),
                json!({"nodeSelector": {"node": "invalid"}}),
            ))],
            pod_1(),
            Some((2, 2)),
        ),
        (
            "a DaemonSet requiring an instance type that does not exist",
            default(),
            vec![ds(with(
                size("2", "2Gi"),
                node_affinity(json!([{"matchExpressions": [{"key": INSTANCE_TYPE,
                    "operator": "In", "values": ["non-existent-instance-type"]}]}])),
            ))],
            pod_1(),
            Some((2, 2)),
        ),
        (
            "a DaemonSet selecting the NodePool's custom label",
            pool(
                "default",
                json!({"spec": {"template": {"metadata": {"labels": {"purpose": "monitoring"}}}}}),
            ),
            vec![ds(with(
                size("2", "2Gi"),
                json!({"nodeSelector": {"purpose": "monitoring"}}),
            ))],
            pod_1(),
            Some((4, 4)),
        ),
        (
            "DaemonSets for other instance sizes are left out",
            default(),
            vec![
                (
                    daemonset(
                        "small",
                        with(
                            requests(json!({"cpu": "1"})),
                            node_affinity(json!([{"matchExpressions": [{"key": fake::SIZE_LABEL,
                            "operator": "In", "values": ["small"]}]}])),
                        ),
                    ),
                    None,
                ),
                (
                    daemonset(
                        "large",
                        with(
                            requests(json!({"cpu": "10"})),
                            node_affinity(json!([{"matchExpressions": [{"key": fake::SIZE_LABEL,
                            "operator": "In", "values": ["large"]}]}])),
                        ),
                    ),
                    None,
                ),
            ],
            pod_1(),
            Some((4, 4)),
        ),
        (
            "NotIn on a key the NodePool leaves open",
            default(),
            vec![ds(with(
                size("2", "2Gi"),
                node_affinity(json!([{"matchExpressions": [{"key": "foo",
                    "operator": "NotIn", "values": ["bar"]}]}])),
            ))],
            pending(
                "p",
                with(
                    size("1", "1Gi"),
                    node_affinity(json!([{"matchExpressions": [
                {"key": ZONE, "operator": "In", "values": ["test-zone-2"]}]}])),
                ),
            ),
            Some((4, 4)),
        ),
        (
            "the pod's hostname pin gives way to the template's affinity",
            pool(
                "default",
                json!({"spec": {"template": {"metadata": {"labels": {"foo": "bar"}}}}}),
            ),
            vec![{
                let d = daemonset(
                    "ds",
                    with(
                        size("4", "4Gi"),
                        node_affinity(json!([{"matchExpressions": [{"key": "foo",
                        "operator": "In", "values": ["bar"]}]}])),
                    ),
                );
                let p = daemonset_pod(&d, size("2", "2Gi"));
                (d, Some(p))
            }],
            pending(
                "p",
                with(size("1", "1Gi"), json!({"nodeSelector": {"foo": "bar"}})),
            ),
            Some((4, 4)),
        ),
        (
            "one of several node affinity terms matches",
            pool(
                "default",
                json!({"spec": {"template": {"metadata": {"labels": {"foo": "bar"}}}}}),
            ),
            vec![ds(with(
                size("2", "2Gi"),
                node_affinity(json!([
                    {"matchExpressions": [{"key": "foo", "operator": "In", "values": ["voo"]}]},
                    {"matchExpressions": [{"key": "foo", "operator": "In", "values": ["bar"]}]}])),
            ))],
            pod_1(),
            Some((4, 4)),
        ),
        (
            "an incompatible node affinity preference",
            default(),
            vec![ds(with(
                size("2", "2Gi"),
                json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "preference": {"matchExpressions": [
                        {"key": "node", "operator": "In", "values": ["invalid"]}]}}]}}}),
            ))],
            pod_1(),
            Some((4, 4)),
        ),
        (
            "a PreferNoSchedule taint",
            pool(
                "default",
                json!({"spec": {"template": {"spec": {
                "taints": [{"key": "test", "effect": "PreferNoSchedule"}]}}}}),
            ),
            vec![small_ds()],
            pod_1(),
            Some((4, 4)),
        ),
    ];
    let mut failures = Vec::new();
    for (case, np, daemonsets, pod, want) in cases {
        let mut cluster = Cluster::new(vec![np]).pods([pod]);
        for (d, p) in daemonsets {
            cluster = cluster.daemonset(d);
            cluster.pods.extend(p);
        }
        let o = cluster.round();
        let got = o.scheduled("p").then(|| launched_size(&o, "p"));
        if got != want {
            failures.push(format!("{case}: {got:?} ({:?})", o.errors.get("p")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn daemonset_host_ports() {
    // A DaemonSet binding the pod's host port takes it on every node.
    let o = Cluster::new(vec![pool("default", json!({}))])
        .daemonset(daemonset(
            "ds",
            json!({"containers": [{"name": "ds", "resources": {"requests": {"cpu": "2", "memory": "2Gi"}},
                "ports": [{"containerPort": 8080, "hostPort": 8080}]}]}),
        ))
        .pods([pending(
            "p",
            json!({"containers": [{"name": "app", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                "ports": [{"containerPort": 8080, "hostPort": 8080}]}]}),
        )])
        .round();
    assert!(!o.scheduled("p"), "the port is the DaemonSet's");
    assert!(o.claims.is_empty());
    // Only on the nodes it runs on: the large one's port does not bind a small node.
    let o = Cluster::new(vec![pool("default", json!({}))])
        .daemonset(daemonset(
            "large",
            with(
                json!({"containers": [{"name": "ds", "resources": {"requests": {"cpu": "4", "memory": "4Gi"}},
                    "ports": [{"containerPort": 8080, "hostPort": 8080}]}]}),
                node_affinity(json!([{"matchExpressions": [{"key": fake::SIZE_LABEL,
                    "operator": "In", "values": ["large"]}]}])),
            ),
        ))
        .daemonset(daemonset(
            "small",
            with(
                json!({"containers": [{"name": "ds", "resources": {"requests": {"cpu": "2", "memory": "2Gi"}},
                    "ports": [{"containerPort": 8081, "hostPort": 8081}]}]}),
                node_affinity(json!([{"matchExpressions": [{"key": fake::SIZE_LABEL,
                    "operator": "In", "values": ["small"]}]}])),
            ),
        ))
        .pods([pending(
            "p",
            with(
                json!({"containers": [{"name": "app", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                    "ports": [{"containerPort": 8080, "hostPort": 8080}]}]}),
                node_affinity(json!([{"matchExpressions": [{"key": fake::SIZE_LABEL,
                    "operator": "In", "values": ["small"]}]}])),
            ),
        )])
        .round();
    assert!(o.scheduled("p"), "{:?}", o.errors);
    assert_eq!(launched_size(&o, "p"), (4, 4));
    assert!(
        o.claim_of("p")
            .requirements
            .allows(fake::SIZE_LABEL, "small")
    );
}

fn anti_affine(name: &str, cpu: &str) -> Pod {
    labelled(
        pending(
            name,
            with(
                requests(json!({"cpu": cpu})),
                json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": HOSTNAME, "labelSelector": {"matchLabels": {"app": "foo"}}}]}}}),
            ),
        ),
        &[("app", "foo")],
    )
}

fn limited(limits: Value) -> NodePool {
    pool("default", json!({"spec": {"limits": limits}}))
}

#[test]
fn node_pool_limits() {
    // A launched NodeClaim of 100 CPUs already exceeds a limit of 20.
    let mut cluster = Cluster::new(vec![limited(json!({"cpu": "20"}))]);
    cluster.claims.push(from(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "big", "labels": {NODE_POOL: "default"}, "creationTimestamp": NOW},
        "spec": {"nodeClassRef": {"group": "karpenter.test.sh", "kind": "TestNodeClass", "name": "default"},
            "requirements": []},
        "status": {"providerID": "fake://big", "capacity": {"cpu": "100"}, "allocatable": {"cpu": "100"}},
    })));
    cluster.pods.push(pending("p", json!({})));
    let o = cluster.round();
    assert!(!o.scheduled("p"), "limits exceeded by what runs");

    // 1.75 CPUs need the 2 CPU type: within a limit of 2.
    let o = Cluster::new(vec![limited(json!({"cpu": "2"}))])
        .pods([pending("p", requests(json!({"cpu": "1.75"})))])
        .round();
    assert!(o.scheduled("p"), "within the limit: {:?}", o.errors);
    // 2.1 CPUs need a 4 CPU type: over it.
    let o = Cluster::new(vec![limited(json!({"cpu": "2"}))])
        .pods([pending("p", requests(json!({"cpu": "2.1"})))])
        .round();
    assert!(!o.scheduled("p"), "over the limit");
    // Two pods that need a node each, a limit of 3 CPUs: one node.
    let o = Cluster::new(vec![limited(json!({"cpu": "3"}))])
        .pods([anti_affine("a", "1.5"), anti_affine("b", "1.5")])
        .round();
    assert_eq!(o.placed.len(), 1, "partly scheduled: {:?}", o.placed);
    assert_eq!(o.errors.len(), 1);
    // A GPU pod: the only type with the GPU has 5 pods, over a pods limit of 1.
    let o = Cluster::new(vec![limited(json!({"pods": "1"}))])
        .pods([pending(
            "p",
            json!({"containers": [{"name": "app", "resources": {
                "limits": {fake::GPU_VENDOR_A: "1"}, "requests": {fake::GPU_VENDOR_A: "1"}}}]}),
        )])
        .round();
    assert!(!o.scheduled("p"), "GPU type over the pods limit");
}

#[test]
fn node_pool_limits_count_what_earlier_rounds_launched() {
    let mut cluster = Cluster::new(vec![limited(json!({"cpu": "2"}))]);
    cluster
        .pods
        .push(pending("first", requests(json!({"cpu": "1.75"}))));
    let o = cluster.round();
    assert!(o.scheduled("first"));
    cluster.launch(&o);
    cluster
        .pods
        .push(pending("second", requests(json!({"cpu": "1.75"}))));
    let o = cluster.round();
    assert!(!o.scheduled("second"), "2 of 2 CPUs launched already");

    // A limit of 2 nodes: a node per round, the third is refused.
    let mut cluster = Cluster::new(vec![limited(json!({"nodes": "2"}))]);
    for (i, name) in ["a", "b", "c"].into_iter().enumerate() {
        cluster.pods.push(anti_affine(name, "1.5"));
        let o = cluster.round();
        assert_eq!(o.scheduled(name), i < 2, "{name}: {:?}", o.errors);
        cluster.launch(&o);
    }
}

#[test]
fn node_claims_carry_the_templates_metadata() {
    let o = Cluster::new(vec![pool(
        "default",
        json!({"spec": {"template": {"metadata": {
            "annotations": {"karpenter.sh/do-not-disrupt": "true"},
            "labels": {"test-key-1": "test-value-1"}},
            "spec": {"requirements": [
                {"key": CAPACITY_TYPE, "operator": "In", "values": ["spot", "on-demand"]},
                {"key": "test-key-2", "operator": "In", "values": ["test-value-2"]},
                {"key": "test-key-3", "operator": "NotIn", "values": ["test-value-3"]},
                {"key": "test-key-4", "operator": "Lt", "values": ["4"]},
                {"key": "test-key-5", "operator": "Gt", "values": ["5"]},
                {"key": "test-key-6", "operator": "Exists"},
                {"key": "test-key-7", "operator": "DoesNotExist"}]}}}}),
    )])
    .pods([pending("p", json!({}))])
    .round();
    let claim = o.object_of("p");
    let annotations = claim.metadata.annotations.clone().unwrap();
    assert_eq!(
        annotations
            .get("karpenter.sh/do-not-disrupt")
            .map(String::as_str),
        Some("true")
    );
    let labels = claim.metadata.labels.clone().unwrap();
    for (k, v) in [
        (NODE_POOL, "default"),
        ("test-key-1", "test-value-1"),
        ("test-key-2", "test-value-2"),
    ] {
        assert_eq!(labels.get(k).map(String::as_str), Some(v), "label {k}");
    }
    assert!(!labels.contains_key("test-key-7"));
    // The other keys are the provider's to give a value satisfying the requirement: the
    // NodeClaim carries them (integer bounds written inclusively, as upstream writes them).
    for (key, op, v) in [
        ("test-key-3", "NotIn", vec!["test-value-3"]),
        ("test-key-4", "Lte", vec!["3"]),
        ("test-key-5", "Gte", vec!["6"]),
        ("test-key-6", "Exists", vec![]),
        ("test-key-7", "DoesNotExist", vec![]),
    ] {
        assert_eq!(
            o.requirement("p", key),
            Some((op.to_string(), values(&v))),
            "requirement {key}"
        );
    }
}

#[test]
fn labels_in_the_kubernetes_domains() {
    for key in [
        "kubernetes.io/test",
        "k8s.io/test",
        "subdomain.kubernetes.io/test",
        "subdomain.k8s.io/test",
    ] {
        let o = Cluster::new(vec![pool(
            "default",
            json!({"spec": {"template": {"metadata": {"labels": {key: "test-value"}}}}}),
        )])
        .pods([pending(
            "p",
            node_affinity(json!([{"matchExpressions": [
                {"key": key, "operator": "In", "values": ["test-value"]}]}])),
        )])
        .round();
        assert!(o.scheduled("p"), "{key}: {:?}", o.errors);
        let labels = o.object_of("p").metadata.labels.clone().unwrap();
        assert_eq!(
            labels.get(key).map(String::as_str),
            Some("test-value"),
            "{key}"
        );
    }
}

#[test]
fn well_known_requirements_are_no_labels() {
    let o = Cluster::new(vec![requiring(
        "default",
        json!([{"key": "foo", "operator": "In", "values": ["bar"]},
            {"key": "node.kubernetes.io/windows-build", "operator": "NotIn", "values": ["test-value"]}]),
        json!({}),
    )])
    .pods([pending("p", json!({}))])
    .round();
    let labels = o.object_of("p").metadata.labels.clone().unwrap();
    assert_eq!(labels.get("foo").map(String::as_str), Some("bar"));
    assert_ne!(
        labels
            .get("node.kubernetes.io/windows-build")
            .map(String::as_str),
        Some("test-value")
    );
}

#[test]
fn pods_that_tolerate_the_taints() {
    let tolerations = [
        json!({"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}),
        json!({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}),
        json!({"key": "nvidia.com/gpu", "operator": "Exists"}),
        json!({"operator": "Exists"}),
    ];
    let pods: Vec<Pod> = tolerations
        .iter()
        .enumerate()
        .map(|(i, t)| pending(&format!("p{i}"), json!({"tolerations": [t]})))
        .collect();
    let o = Cluster::new(vec![pool(
        "default",
        json!({"spec": {"template": {"spec": {
            "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]}}}}),
    )])
    .pods(
        pods.iter()
            .cloned()
            .chain([pending("intolerant", json!({}))]),
    )
    .round();
    for (i, t) in tolerations.iter().enumerate() {
        assert!(o.scheduled(&format!("p{i}")), "{t}: {:?}", o.errors);
    }
    assert!(!o.scheduled("intolerant"));
}

fn values(v: &[&str]) -> BTreeSet<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn node_claim_requirements() {
    let all: Vec<String> = fake::default_instance_types()
        .into_iter()
        .map(|it| it.name)
        .collect();
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    // (case, NodePool, pod, requirements the NodeClaim must have)
    type Case<'a> = (&'a str, NodePool, Pod, Vec<(&'a str, Vec<&'a str>)>);
    let cases: Vec<Case<'_>> = vec![
        (
            "the instance types and the NodePool",
            pool("default", json!({})),
            pending("p", json!({})),
            vec![(INSTANCE_TYPE, all.clone()), (NODE_POOL, vec!["default"])],
        ),
        (
            "the NodePool's own requirements",
            requiring(
                "default",
                json!([{"key": "custom-requirement-key", "operator": "In", "values": ["value"]},
                    {"key": "custom-requirement-key2", "operator": "In", "values": ["value"]}]),
                json!({}),
            ),
            pending("p", json!({})),
            vec![
                (INSTANCE_TYPE, all.clone()),
                (NODE_POOL, vec!["default"]),
                ("custom-requirement-key", vec!["value"]),
                ("custom-requirement-key2", vec!["value"]),
            ],
        ),
        (
            "an architecture restricts the types",
            requiring(
                "default",
                json!([{"key": ARCH, "operator": "In", "values": ["arm64"]}]),
                json!({}),
            ),
            pending("p", json!({})),
            vec![
                (ARCH, vec!["arm64"]),
                (INSTANCE_TYPE, vec!["arm-instance-type"]),
            ],
        ),
        (
            "an operating system restricts the types",
            requiring(
                "default",
                json!([{"key": OS, "operator": "In", "values": ["ios"]}]),
                json!({}),
            ),
            pending("p", json!({})),
            vec![
                (OS, vec!["ios"]),
                (INSTANCE_TYPE, vec!["arm-instance-type"]),
            ],
        ),
        (
            "the pod's requests restrict the types",
            pool("default", json!({})),
            pending(
                "p",
                json!({"containers": [{"name": "app", "resources": {
                    "limits": {fake::GPU_VENDOR_A: "1"}, "requests": {fake::GPU_VENDOR_A: "1"}}}]}),
            ),
            vec![(INSTANCE_TYPE, vec!["gpu-vendor-instance-type"])],
        ),
    ];
    let mut failures = Vec::new();
    for (case, np, pod, want) in cases {
        let o = Cluster::new(vec![np]).pods([pod]).round();
        if !o.scheduled("p") {
            failures.push(format!("{case}: not scheduled {:?}", o.errors));
            continue;
        }
        for (key, v) in want {
            let got = o.requirement("p", key);
            if got != Some(("In".to_string(), values(&v))) {
                failures.push(format!("{case}: {key} is {got:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn node_claim_owner_and_node_class() {
    let o = Cluster::new(vec![pool(
        "default",
        json!({"spec": {"template": {"spec": {"nodeClassRef":
            {"group": "karpenter.test.sh", "kind": "TestNodeClass", "name": "test"}}}}}),
    )])
    .pods([pending("p", json!({}))])
    .round();
    let claim = o.object_of("p");
    let owner = &claim.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (
            owner.api_version.as_str(),
            owner.kind.as_str(),
            owner.name.as_str(),
            owner.uid.as_str(),
            owner.block_owner_deletion
        ),
        (
            "karpenter.sh/v1",
            "NodePool",
            "default",
            "default-uid",
            Some(true)
        )
    );
    let class = &claim.spec.node_class_ref;
    assert_eq!(
        (
            class.group.as_str(),
            class.kind.as_str(),
            class.name.as_str()
        ),
        ("karpenter.test.sh", "TestNodeClass", "test")
    );
}

fn claim_requests(o: &Outcome, pod: &str) -> BTreeMap<String, f64> {
    o.object_of(pod)
        .spec
        .resources
        .requests
        .iter()
        .map(|(k, q)| {
            let r = karpenter_core::resources::Resources::parse(&[(k.as_str(), q.0.as_str())]);
            (k.clone(), r.get(k) as f64 / 1000.0)
        })
        .collect()
}

#[test]
fn node_claim_resource_requests() {
    let o = Cluster::new(vec![pool("default", json!({}))])
        .pods([pending(
            "p",
            json!({"containers": [{"name": "app", "resources": {
                "requests": {"cpu": "1", "memory": "1Mi", fake::GPU_VENDOR_A: "1"},
                "limits": {fake::GPU_VENDOR_A: "1"}}}]}),
        )])
        .round();
    let r = claim_requests(&o, "p");
    assert_eq!(r.len(), 4, "{r:?}");
    assert_eq!(r["cpu"], 1.0);
    assert_eq!(r["memory"], (1 << 20) as f64);
    assert_eq!(r[fake::GPU_VENDOR_A], 1.0);
    assert_eq!(r["pods"], 1.0);
    // With a DaemonSet: its requests are added once, however many pods share the claim.
    let ds = || daemonset("ds", cpu_mem("1", "1Mi"));
    let o = Cluster::new(vec![pool("default", json!({}))])
        .daemonset(ds())
        .pods([pending("p", cpu_mem("1", "1Mi"))])
        .round();
    let r = claim_requests(&o, "p");
    assert_eq!(
        (r["cpu"], r["memory"], r["pods"]),
        (2.0, 2.0 * (1 << 20) as f64, 2.0)
    );
    let o = Cluster::new(vec![pool("default", json!({}))])
        .daemonset(ds())
        .pods([
            pending("p", cpu_mem("1", "1Mi")),
            pending("q", cpu_mem("1", "1Mi")),
        ])
        .round();
    assert_eq!(o.claims.len(), 1);
    let r = claim_requests(&o, "p");
    assert_eq!(
        (r["cpu"], r["memory"], r["pods"]),
        (3.0, 3.0 * (1 << 20) as f64, 3.0)
    );
}

/// The suite's volume objects: claims by name, volumes, and the WaitForFirstConsumer class
/// over zones 2 and 3 (`zonal`) plus a no-provisioner class for local volumes (`local-path`).
fn volume_objects(cluster: &mut Cluster) {
    // A claim naming a volume is bound: the binder has said so (upstream's test claims).
    let claim = |name: &str, class: Option<&str>, volume: Option<&str>| -> PersistentVolumeClaim {
        let annotations = volume.map(|_| json!({"pv.kubernetes.io/bind-completed": "yes"}));
        from(
            json!({"metadata": {"name": name, "namespace": "default", "annotations": annotations},
            "spec": {"storageClassName": class, "volumeName": volume}}),
        )
    };
    cluster.volume_claims = vec![
        claim("zonal-unbound", Some("zonal"), None),
        claim("zonal-bound", Some("zonal"), Some("pv-zone-3")),
        claim("p-ephemeral", Some("zonal"), None),
        claim("p-bound-ephemeral", Some("zonal"), Some("pv-zone-3")),
        claim("empty-class-bound", Some(""), Some("pv-plain")),
        claim("empty-class-unbound", Some(""), None),
        claim(
            "missing-class-bound",
            Some("missing-storage-class"),
            Some("pv-missing"),
        ),
        claim("missing-class-unbound", Some("missing-storage-class"), None),
        claim("missing-volume", None, Some("invalid-volume-name")),
        claim("local-bound", Some("local-path"), Some("pv-local")),
        claim("p-local-ephemeral", Some("local-path"), Some("pv-local")),
        claim("hostpath-bound", Some("local-path"), Some("pv-hostpath")),
        claim(
            "p-hostpath-ephemeral",
            Some("local-path"),
            Some("pv-hostpath"),
        ),
        claim("pinned-bound", Some("zonal"), Some("pv-pinned")),
    ];
    let pinned = |expressions: Value| json!({"required": {"nodeSelectorTerms": [{"matchExpressions": expressions}]}});
    let on_host = || pinned(json!([{"key": HOSTNAME, "operator": "In", "values": ["some-node"]}]));
    cluster.volumes = vec![
        from(json!({"metadata": {"name": "pv-zone-3"},
            "spec": {"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "v"},
                "nodeAffinity": pinned(json!([{"key": ZONE, "operator": "In", "values": ["test-zone-3"]}]))}})),
        from(json!({"metadata": {"name": "pv-plain"}, "spec": {"storageClassName": ""}})),
        from(json!({"metadata": {"name": "pv-missing"},
            "spec": {"storageClassName": "missing-storage-class"}})),
        from(json!({"metadata": {"name": "pv-local"},
            "spec": {"local": {"path": "/mnt"}, "nodeAffinity": on_host()}})),
        from(json!({"metadata": {"name": "pv-hostpath"},
            "spec": {"hostPath": {"path": "/mnt"}, "nodeAffinity": on_host()}})),
        from(json!({"metadata": {"name": "pv-pinned"},
            "spec": {"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "v"},
                "nodeAffinity": on_host()}})),
    ];
    cluster.storage_classes = vec![
        from(
            json!({"metadata": {"name": "zonal"}, "provisioner": "ebs.csi.aws.com",
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": [{"matchLabelExpressions": [
                {"key": ZONE, "values": ["test-zone-2", "test-zone-3"]}]}]}),
        ),
        from(json!({"metadata": {"name": "local-path"},
            "provisioner": "kubernetes.io/no-provisioner"})),
    ];
}

/// Pod `p` using `volume`: a claim by name, or (`ephemeral:x`) a generic ephemeral volume `x`
/// whose claim is `p-x`.
fn with_volume(spec: Value, volume: &str) -> Pod {
    let v = match volume.strip_prefix("ephemeral:") {
        Some(name) => json!({"name": name, "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}),
        None => json!({"name": "data", "persistentVolumeClaim": {"claimName": volume}}),
    };
    pending("p", with(spec, json!({"volumes": [v]})))
}

#[test]
fn volume_topology() {
    let zones = |z: &[&str]| {
        node_affinity(json!([{"matchExpressions": [{"key": ZONE, "operator": "In", "values": z}]}]))
    };
    // (case, pod `p`, the zone it must land in: Some("any"), a zone, or None)
    let cases: Vec<(&str, Pod, Option<&str>)> = vec![
        (
            "a claim that does not exist",
            with_volume(json!({}), "invalid"),
            None,
        ),
        (
            "a bound claim of the empty class",
            with_volume(json!({}), "empty-class-bound"),
            Some("any"),
        ),
        (
            "an unbound claim of the empty class",
            with_volume(json!({}), "empty-class-unbound"),
            None,
        ),
        (
            "a bound claim of a missing class",
            with_volume(json!({}), "missing-class-bound"),
            Some("any"),
        ),
        (
            "an unbound claim of a missing class",
            with_volume(json!({}), "missing-class-unbound"),
            None,
        ),
        (
            "a claim bound to a missing volume",
            with_volume(json!({}), "missing-volume"),
            None,
        ),
        (
            "the class's zones, within the pod's",
            with_volume(zones(&["test-zone-1", "test-zone-3"]), "zonal-unbound"),
            Some("test-zone-3"),
        ),
        (
            "the class's zones, within the pod's (ephemeral)",
            with_volume(
                zones(&["test-zone-1", "test-zone-3"]),
                "ephemeral:ephemeral",
            ),
            Some("test-zone-3"),
        ),
        (
            "the class's zones exclude the pod's",
            with_volume(zones(&["test-zone-1"]), "zonal-unbound"),
            None,
        ),
        (
            "the class's zones exclude the pod's (ephemeral)",
            with_volume(zones(&["test-zone-1"]), "ephemeral:ephemeral"),
            None,
        ),
        (
            "a bound volume's zone",
            with_volume(json!({}), "zonal-bound"),
            Some("test-zone-3"),
        ),
        (
            "a bound volume's zone (ephemeral)",
            with_volume(json!({}), "ephemeral:bound-ephemeral"),
            Some("test-zone-3"),
        ),
        (
            "a local volume's hostname",
            with_volume(json!({}), "local-bound"),
            Some("any"),
        ),
        (
            "a hostPath volume's hostname",
            with_volume(json!({}), "hostpath-bound"),
            Some("any"),
        ),
        (
            "a local volume's hostname (ephemeral)",
            with_volume(json!({}), "ephemeral:local-ephemeral"),
            Some("any"),
        ),
        (
            "a hostPath volume's hostname (ephemeral)",
            with_volume(json!({}), "ephemeral:hostpath-ephemeral"),
            Some("any"),
        ),
        (
            "a CSI volume's hostname holds",
            with_volume(json!({}), "pinned-bound"),
            None,
        ),
        (
            "a volume zone outside the pod's",
            with_volume(zones(&["test-zone-1"]), "zonal-bound"),
            None,
        ),
        (
            "a volume zone outside the pod's (ephemeral)",
            with_volume(zones(&["test-zone-1"]), "ephemeral:bound-ephemeral"),
            None,
        ),
        (
            "the volume's zone holds in every alternative term",
            with_volume(
                node_affinity(json!([
                    {"matchExpressions": [{"key": "example.com/label", "operator": "In", "values": ["unsupported"]}]},
                    {"matchExpressions": [{"key": CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}]}])),
                "zonal-bound",
            ),
            Some("test-zone-3"),
        ),
    ];
    let mut failures = Vec::new();
    for (case, pod, want) in cases {
        let mut cluster = Cluster::new(vec![pool("default", json!({}))]);
        volume_objects(&mut cluster);
        // A pod without volumes beside it is never held up by one whose volumes are invalid.
        cluster.pods = vec![pod, pending("plain", json!({}))];
        let o = cluster.round();
        if !o.scheduled("plain") {
            failures.push(format!("{case}: the pod without volumes is held up"));
        }
        let zone = o.scheduled("p").then(|| {
            o.claim_of("p")
                .requirements
                .get(ZONE)
                .map(|r| r.values().map(str::to_string).collect::<Vec<_>>())
        });
        let ok = match (want, &zone) {
            (None, None) => true,
            (Some("any"), Some(_)) => true,
            (Some(z), Some(Some(values))) => values == &[z.to_string()],
            _ => false,
        };
        if !ok {
            failures.push(format!("{case}: {zone:?} ({:?})", o.errors.get("p")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn preferring(terms: Value) -> Value {
    json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": terms}}})
}

#[test]
fn preferential_fallback() {
    // (case, NodePool, pod, zone it lands in: Some("any"), a zone, or None)
    let expr = |key: &str, v: &str| json!({"matchExpressions": [{"key": key, "operator": "In", "values": [v]}]});
    let cases: Vec<(&str, NodePool, Pod, Option<&str>)> = vec![
        (
            "the last required term is not relaxed",
            requiring(
                "default",
                json!([{"key": ZONE, "operator": "In", "values": ["test-zone-1"]}]),
                json!({}),
            ),
            pending("p", node_affinity(json!([expr(ZONE, "invalid")]))),
            None,
        ),
        (
            "required terms are relaxed in order",
            pool("default", json!({})),
            pending(
                "p",
                node_affinity(json!([
                    expr(ZONE, "invalid"),
                    expr(ZONE, "invalid"),
                    expr(ZONE, "test-zone-1"),
                    expr(ZONE, "test-zone-2")
                ])),
            ),
            Some("test-zone-1"),
        ),
        (
            "every preference is relaxed",
            pool("default", json!({})),
            pending(
                "p",
                preferring(json!([{"weight": 1, "preference": expr(ZONE, "invalid")},
                    {"weight": 1, "preference": expr(INSTANCE_TYPE, "invalid")}])),
            ),
            Some("any"),
        ),
        (
            "lighter weights after heavier ones",
            requiring(
                "default",
                json!([{"key": ZONE, "operator": "In", "values": ["test-zone-1", "test-zone-2"]}]),
                json!({}),
            ),
            pending(
                "p",
                preferring(
                    json!([{"weight": 100, "preference": expr(INSTANCE_TYPE, "test-zone-3")},
                    {"weight": 50, "preference": expr(ZONE, "test-zone-2")},
                    {"weight": 1, "preference": expr(ZONE, "test-zone-1")}]),
                ),
            ),
            Some("test-zone-2"),
        ),
    ];
    let mut failures = Vec::new();
    for (case, np, pod, want) in cases {
        let o = Cluster::new(vec![np]).pods([pod]).round();
        let zone = o.scheduled("p").then(|| {
            o.claim_of("p")
                .requirements
                .get(ZONE)
                .map(|r| r.values().map(str::to_string).collect::<Vec<_>>())
                .unwrap_or_default()
        });
        let ok = match (want, &zone) {
            (None, None) | (Some("any"), Some(_)) => true,
            (Some(z), Some(values)) => values == &[z.to_string()],
            _ => false,
        };
        if !ok {
            failures.push(format!("{case}: {zone:?} ({:?})", o.errors.get("p")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn prefer_no_schedule_is_tolerated_after_the_affinity_preferences() {
    let expr = |key: &str| json!({"matchExpressions": [{"key": key, "operator": "In", "values": ["invalid"]}]});
    let o = Cluster::new(vec![pool(
        "default",
        json!({"spec": {"template": {"spec": {
            "taints": [{"key": "foo", "value": "bar", "effect": "PreferNoSchedule"}]}}}}),
    )])
    .pods([pending(
        "p",
        preferring(json!([{"weight": 1, "preference": expr(ZONE)},
            {"weight": 1, "preference": expr(INSTANCE_TYPE)}])),
    )])
    .round();
    assert!(o.scheduled("p"), "{:?}", o.errors);
    let taints = &o.object_of("p").spec.taints;
    assert!(
        taints.iter().any(|t| t.key == "foo"
            && t.value.as_deref() == Some("bar")
            && t.effect == "PreferNoSchedule"),
        "{taints:?}"
    );
}

#[test]
fn an_unsatisfiable_node_preference_is_relaxed_onto_an_open_node_claim() {
    for key in [ZONE, HOSTNAME] {
        let o = Cluster::new(vec![pool("default", json!({}))])
            .pods([
                labelled(
                    pending("first", requests(json!({"cpu": "2"}))),
                    &[("app", "foo")],
                ),
                labelled(
                    pending(
                        "preferring",
                        with(
                            requests(json!({"cpu": "1"})),
                            preferring(json!([{"weight": 1, "preference": {"matchExpressions": [
                                {"key": key, "operator": "In", "values": ["value-1"]}]}}])),
                        ),
                    ),
                    &[("app", "baz")],
                ),
            ])
            .round();
        assert!(
            o.scheduled("first") && o.scheduled("preferring"),
            "{key}: {:?}",
            o.errors
        );
        assert_eq!(o.placed["first"], o.placed["preferring"], "{key}: one node");
    }
}

/// `--preference-policy=Ignore`.
fn ignoring(cluster: Cluster) -> Cluster {
    let mut cluster = cluster;
    cluster.options.respect_preferences = false;
    cluster
}

#[test]
fn ignored_preferences() {
    // A zone-1 pod of 2 CPUs and two zone-2 pods of 3: a pod preferring zone 2 (or its pods)
    // would join them, ignoring preferences it joins the emptier zone-1 node.
    let zonal = || {
        vec![
            labelled(
                pending(
                    "zone1",
                    with(
                        requests(json!({"cpu": "2"})),
                        json!({"nodeSelector": {ZONE: "test-zone-1"}}),
                    ),
                ),
                &[("app", "foo")],
            ),
            labelled(
                pending(
                    "zone2-a",
                    with(
                        requests(json!({"cpu": "3"})),
                        json!({"nodeSelector": {ZONE: "test-zone-2"}}),
                    ),
                ),
                &[("app", "bar")],
            ),
            labelled(
                pending(
                    "zone2-b",
                    with(
                        requests(json!({"cpu": "3"})),
                        json!({"nodeSelector": {ZONE: "test-zone-2"}}),
                    ),
                ),
                &[("app", "bar")],
            ),
        ]
    };
    let node_preference = preferring(json!([{"weight": 1, "preference": {"matchExpressions": [
        {"key": ZONE, "operator": "In", "values": ["test-zone-2"]}]}}]));
    let mut cases = vec![("node affinity preference", node_preference)];
    for key in [ZONE, HOSTNAME] {
        cases.push((
            "pod affinity preference",
            json!({"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "podAffinityTerm": {"topologyKey": key,
                    "labelSelector": {"matchLabels": {"app": "bar"}}}}]}}}),
        ));
    }
    for (case, preference) in cases {
        let o = ignoring(Cluster::new(vec![pool("default", json!({}))]))
            .pods(zonal())
            .pods([labelled(
                pending(
                    "preferring",
                    with(requests(json!({"cpu": "1"})), preference),
                ),
                &[("app", "baz")],
            )])
            .round();
        assert_eq!(o.placed.len(), 4, "{case}: {:?}", o.errors);
        assert_eq!(o.placed["preferring"], o.placed["zone1"], "{case}");
        assert_ne!(o.placed["preferring"], o.placed["zone2-a"], "{case}");
    }
    // Five pods that would spread or repel each other share one node.
    for key in [ZONE, HOSTNAME] {
        for (case, spec) in [
            (
                "ScheduleAnyway spread",
                json!({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": key,
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "labelSelector": {"matchLabels": {"app": "foo"}}}]}),
            ),
            (
                "pod anti-affinity preference",
                json!({"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "podAffinityTerm": {"topologyKey": key,
                        "labelSelector": {"matchLabels": {"app": "foo"}}}}]}}}),
            ),
        ] {
            let pods: Vec<Pod> = (0..5)
                .map(|i| labelled(pending(&format!("p{i}"), spec.clone()), &[("app", "foo")]))
                .collect();
            let o = ignoring(Cluster::new(vec![pool("default", json!({}))]))
                .pods(pods)
                .round();
            assert_eq!(o.placed.len(), 5, "{case} on {key}");
            assert_eq!(
                o.claims.len(),
                1,
                "{case} on {key}: one node: {:?}",
                o.placed
            );
        }
    }
}

#[test]
fn multiple_node_pools() {
    let pick = |pools: Vec<NodePool>, spec: Value| -> String {
        let o = Cluster::new(pools).pods([pending("p", spec)]).round();
        o.claim_of("p").node_pool.clone()
    };
    // Upstream's NodePools have random names: which sorts first is not the point, so each
    // case is played with the names both ways round.
    for (a, b) in [("np-a", "np-b"), ("np-b", "np-a")] {
        assert_eq!(
            pick(
                vec![pool(a, json!({})), pool(b, json!({}))],
                json!({"nodeSelector": {NODE_POOL: a}})
            ),
            a,
            "explicitly selected"
        );
        assert_eq!(
            pick(
                vec![
                    pool(
                        a,
                        json!({"spec": {"template": {"metadata": {"labels": {"foo": "bar"}}}}})
                    ),
                    pool(b, json!({})),
                ],
                json!({"nodeSelector": {"foo": "bar"}})
            ),
            a,
            "selected by label"
        );
        assert_eq!(
            pick(
                vec![
                    pool(
                        a,
                        json!({"spec": {"template": {"spec": {"taints": [
                        {"key": "foo", "value": "bar", "effect": "PreferNoSchedule"}]}}}})
                    ),
                    pool(b, json!({})),
                ],
                json!({})
            ),
            b,
            "the one without a PreferNoSchedule taint"
        );
    }
    let weighted = || {
        vec![
            pool("unweighted", json!({})),
            pool("twenty", json!({"spec": {"weight": 20}})),
            pool("hundred", json!({"spec": {"weight": 100}})),
        ]
    };
    let o = Cluster::new(weighted())
        .pods((0..3).map(|i| pending(&format!("p{i}"), json!({}))))
        .round();
    for i in 0..3 {
        assert_eq!(o.claim_of(&format!("p{i}")).node_pool, "hundred");
    }
    assert_eq!(
        pick(
            weighted(),
            json!({"nodeSelector": {NODE_POOL: "unweighted"}})
        ),
        "unweighted",
        "explicitly selected over heavier ones"
    );
}

#[test]
fn static_node_pools_take_no_pending_pods() {
    let static_pool = |replicas: i64| {
        pool(
            "static",
            json!({"spec": {"replicas": replicas, "weight": 100}}),
        )
    };
    let o = Cluster::new(vec![static_pool(2)])
        .pods([pending("p", json!({}))])
        .round();
    assert!(!o.scheduled("p"));
    assert!(o.claims.is_empty());
    let o = Cluster::new(vec![static_pool(1), pool("dynamic", json!({}))])
        .pods([pending("p", json!({}))])
        .round();
    assert_eq!(o.claim_of("p").node_pool, "dynamic");
}

/// Upstream's two arm64 types of 4 CPUs, one spot offering each, in a zone of their own.
fn two_types() -> Vec<InstanceType> {
    ["instance-type-1", "instance-type-2"]
        .iter()
        .zip(["test-zone-1-spot", "test-zone-2-spot"])
        .map(|(name, zone)| {
            fake::FakeInstanceType::new(name)
                .arch("arm64")
                .operating_systems(&["linux"])
                .resources(&[("cpu", "4"), ("memory", "4Gi")])
                .offerings(&[("spot", zone, 0.52)])
                .build()
        })
        .collect()
}

/// Upstream's one type offered in two zones.
fn two_zones() -> Vec<InstanceType> {
    vec![
        fake::FakeInstanceType::new("instance-type-1")
            .arch("arm64")
            .operating_systems(&["linux"])
            .resources(&[("cpu", "4"), ("memory", "4Gi")])
            .offerings(&[("spot", "test-zone-1", 0.52), ("spot", "test-zone-2", 0.54)])
            .build(),
    ]
}

fn min_values_pool(name: &str, weight: i32, requirements: Value) -> NodePool {
    requiring(name, requirements, json!({"spec": {"weight": weight}}))
}

fn types_min(min: Option<i32>) -> Value {
    json!({"key": INSTANCE_TYPE, "operator": "In",
        "values": ["instance-type-1", "instance-type-2", "instance-type-3"], "minValues": min})
}

fn zones_min(min: i32) -> Value {
    json!({"key": ZONE, "operator": "In",
        "values": ["test-zone-1", "test-zone-2", "test-zone-3"], "minValues": min})
}

fn min_values_round(pools: Vec<NodePool>, types: Vec<InstanceType>, strict: bool) -> Outcome {
    let mut cluster = Cluster::with_types(pools, types);
    cluster.options.strict_min_values = strict;
    cluster
        .pods([pending("p", cpu_mem("0.9", "0.9Gi"))])
        .round()
}

/// The NodeClaim's requirement on `key`: its values and minValues.
fn with_min(o: &Outcome, key: &str) -> Option<(BTreeSet<String>, Option<i32>)> {
    o.object_of("p")
        .spec
        .requirements
        .iter()
        .find(|r| r.key == key)
        .map(|r| (r.values.iter().cloned().collect(), r.min_values))
}

fn relaxed_annotation(o: &Outcome) -> Option<String> {
    o.object_of("p")
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("karpenter.sh/nodeclaim-min-values-relaxed").cloned())
}

#[test]
fn min_values_policy_on_instance_types() {
    let default = || min_values_pool("default", 100, json!([types_min(Some(3))]));
    let o = min_values_round(vec![default()], two_types(), true);
    assert!(
        !o.scheduled("p"),
        "Strict: two types cannot keep minValues 3"
    );

    let o = min_values_round(vec![default()], two_types(), false);
    assert!(o.scheduled("p"), "BestEffort: {:?}", o.errors);
    assert_eq!(o.instance_type("p").name, "instance-type-1");
    assert_eq!(relaxed_annotation(&o).as_deref(), Some("true"));
    assert_eq!(
        with_min(&o, INSTANCE_TYPE),
        Some((values(&["instance-type-1", "instance-type-2"]), Some(2)))
    );

    // Relaxed in the heavier NodePool rather than falling back to a lighter one, with or
    // without minValues of its own.
    for lighter in [types_min(None), types_min(Some(3))] {
        let o = min_values_round(
            vec![default(), min_values_pool("lighter", 10, json!([lighter]))],
            two_types(),
            false,
        );
        assert_eq!(o.claim_of("p").node_pool, "default", "{lighter}");
        assert_eq!(relaxed_annotation(&o).as_deref(), Some("true"));
        assert_eq!(
            with_min(&o, INSTANCE_TYPE),
            Some((values(&["instance-type-1", "instance-type-2"]), Some(2)))
        );
    }
}

#[test]
fn min_values_policy_on_zones() {
    let zonal = || min_values_pool("default", 0, json!([zones_min(3)]));
    let o = min_values_round(vec![zonal()], two_zones(), true);
    assert!(
        !o.scheduled("p"),
        "Strict: two zones cannot keep minValues 3"
    );

    let o = min_values_round(vec![zonal()], two_zones(), false);
    assert!(o.scheduled("p"), "BestEffort: {:?}", o.errors);
    assert_eq!(o.instance_type("p").name, "instance-type-1");
    assert_eq!(relaxed_annotation(&o).as_deref(), Some("true"));
    assert_eq!(
        with_min(&o, ZONE),
        Some((
            values(&["test-zone-1", "test-zone-2", "test-zone-3"]),
            Some(2)
        ))
    );

    // Both keys: each lowered to what the one type offers.
    let o = min_values_round(
        vec![min_values_pool(
            "default",
            100,
            json!([types_min(Some(3)), zones_min(3)]),
        )],
        two_zones(),
        false,
    );
    assert!(o.scheduled("p"), "BestEffort: {:?}", o.errors);
    assert_eq!(relaxed_annotation(&o).as_deref(), Some("true"));
    assert_eq!(
        with_min(&o, INSTANCE_TYPE),
        Some((values(&["instance-type-1"]), Some(1)))
    );
    assert_eq!(
        with_min(&o, ZONE),
        Some((
            values(&["test-zone-1", "test-zone-2", "test-zone-3"]),
            Some(2)
        ))
    );
}

/// A CapacityBuffer's virtual pod (`namespace/buffer`) asking for `cpu`.
fn virtual_pod(name: &str, buffer: &str, cpu: &str) -> Pod {
    use karpenter_api::capacitybuffer::{
        BUFFER_NAME_ANNOTATION, BUFFER_NAMESPACE_ANNOTATION, FAKE_POD_ANNOTATION,
    };
    let (namespace, buffer) = buffer.split_once('/').unwrap();
    let mut p = pending(name, requests(json!({"cpu": cpu})));
    p.metadata.annotations = Some(
        [
            (FAKE_POD_ANNOTATION, "true"),
            (BUFFER_NAME_ANNOTATION, buffer),
            (BUFFER_NAMESPACE_ANNOTATION, namespace),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    );
    p
}

/// Upstream filters virtual pods out of the errors and node mappings it reports; the round
/// marks each batch entry real or virtual, and only real ones are reported or nominate.
#[test]
fn virtual_pods_are_never_reported() {
    let mut cluster = Cluster::new(vec![pool("default", json!({}))]);
    // An unmanaged node with room for a small pod; the real pod wants a karpenter node.
    cluster.nodes.push(from(json!({
        "metadata": {"name": "n1", "labels": {HOSTNAME: "n1", ZONE: "test-zone-1"},
            "creationTimestamp": NOW},
        "status": {"capacity": {"cpu": "4", "memory": "4Gi", "pods": "10"},
            "allocatable": {"cpu": "4", "memory": "4Gi", "pods": "10"},
            "conditions": [{"type": "Ready", "status": "True"}]},
    })));
    cluster.pods.push(pending(
        "real",
        with(
            requests(json!({"cpu": "1"})),
            json!({"nodeSelector": {NODE_POOL: "default"}}),
        ),
    ));
    let virtual_pods = [
        virtual_pod("v-fits", "ns-a/buffer", "1"),
        virtual_pod("v-too-big", "ns-b/buffer", "1000"),
    ];
    let gates = FeatureGates {
        capacity_buffer: true,
        ..FeatureGates::default()
    };
    cluster.round_with(gates, &virtual_pods, |p| {
        let index = |name: &str| {
            p.batch
                .iter()
                .position(|e| match e {
                    RoundPod::Real(q) | RoundPod::Virtual(q) => {
                        q.metadata.name.as_deref() == Some(name)
                    }
                })
                .unwrap()
        };
        let (real, fits, too_big) = (index("real"), index("v-fits"), index("v-too-big"));
        assert!(p.is_real(real));
        assert!(!p.is_real(fits) && !p.is_real(too_big));
        assert_eq!(
            p.results.existing_nodes.get("n1"),
            Some(&vec![fits]),
            "the virtual pod holds room on n1"
        );
        assert!(
            p.nominations().is_empty(),
            "a node only virtual pods use is not nominated"
        );
        let errors: Vec<usize> = p.results.pod_errors.keys().copied().collect();
        assert_eq!(errors, [too_big], "the failure is the virtual pod's");
        assert!(
            errors.iter().all(|&i| !p.is_real(i)),
            "no real pod to report"
        );
        let placements =
            karpenter_core::provisioning::capacity_buffer::placements(&p.results, &p.batch);
        assert_eq!(placements.len(), 2, "per buffer, namespaces apart");
    });
}
