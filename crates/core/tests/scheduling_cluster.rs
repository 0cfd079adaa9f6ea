//! Upstream's scheduling suite (`pkg/controllers/provisioning/scheduling/suite_test.go`), the
//! cases that need a cluster: in-flight, existing and deleting nodes, pods not bound yet, and
//! volumes. Each runs one round (`round::decide`) over Kubernetes objects, as the controller,
//! the simulator and `plan` do. Where upstream launches a node in a first round and schedules
//! against it in a second, the cluster here starts with that node (a Node and its NodeClaim,
//! launched and registered, initialized or not) and the first round's pods bound to it.

mod support;

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{
    PersistentVolume, PersistentVolumeClaim, Pod, Taint, TopologySpreadConstraint,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use karpenter_api::NodeClaim;
use karpenter_core::instancetype::fake::{FakeInstanceType, GPU_VENDOR_A};
use karpenter_core::round::{BufferHolding, Parts, RoundInputs, decide};
use karpenter_core::state::{Observed, Snapshot};
use serde_json::{Value, json};
use support::cluster::*;
use support::*;

fn from<T: k8s_openapi::serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("a valid object")
}

fn pool() -> PoolBuilder {
    node_pool("default")
}

fn cluster() -> Cluster {
    Cluster::new([pool()])
}

/// A pod named `name`.
fn a(name: &str, builder: PodBuilder) -> Pod {
    named(name, builder.build())
}

/// `n` pods named `prefix-0` … from `builder`.
fn many(prefix: &str, n: usize, builder: PodBuilder) -> Vec<Pod> {
    (0..n)
        .map(|i| a(&format!("{prefix}-{i}"), builder.clone()))
        .collect()
}

fn taint(key: &str, value: Option<&str>, effect: &str) -> Taint {
    Taint {
        key: key.into(),
        value: value.map(str::to_string),
        effect: effect.into(),
        time_added: None,
    }
}

/// Adds `node` with its NodeClaim, the Node's taints replaced by `taints` and the NodeClaim
/// given `startup` taints.
fn with_node(
    mut c: Cluster,
    node: ManagedNode,
    taints: Vec<Taint>,
    startup: Vec<Taint>,
) -> Cluster {
    let (mut n, claim) = node.build();
    n.spec.get_or_insert_with(Default::default).taints = Some(taints);
    c.nodes.push(n);
    if let Some(mut claim) = claim {
        claim.spec.startup_taints = startup;
        c.claims.push(claim);
    }
    c
}

/// The pods placed on node `node`, sorted.
fn on_node(p: &Provisioned, node: &str) -> Vec<String> {
    let mut v = p.existing.get(node).cloned().unwrap_or_default();
    v.sort();
    v
}

fn expect_on(name: &str, p: &Provisioned, node: &str, pods: &[&str]) {
    assert_eq!(on_node(p, node), pods, "{name}: {p:?}");
    assert!(p.claims.is_empty(), "{name}: nothing launched: {p:?}");
}

fn expect_new(name: &str, p: &Provisioned, pod: &str) {
    assert!(
        p.claims.iter().any(|c| c.pods.iter().any(|x| x == pod)),
        "{name}: {pod} on a new node: {p:?}"
    );
}

#[test]
fn in_flight_nodes() {
    let tiny = || pod().cpu("10m");
    // A node launched for a 10m pod (the smallest type) takes a second one.
    let p = cluster()
        .node(managed("n1", "default", "small-instance-type").uninitialized())
        .pods([on("n1", a("first", tiny())), a("second", tiny())])
        .provision();
    expect_on("in-flight node with room", &p, "n1", &["second"]);

    // The node was launched in zone 2: a pod allowing zones 1 and 2 goes there, one allowing
    // zones 1 and 3 needs a new node.
    let zones = |z: &[&str]| tiny().require(&[(ZONE, "In", z)]);
    let c = cluster()
        .node(
            managed("n1", "default", "small-instance-type")
                .zone("test-zone-2")
                .uninitialized(),
        )
        .pods([on("n1", a("first", zones(&["test-zone-2"])))]);
    let p = c
        .pods([a("second", zones(&["test-zone-1", "test-zone-2"]))])
        .provision();
    expect_on("in-flight node in an allowed zone", &p, "n1", &["second"]);
    let p = cluster()
        .node(
            managed("n1", "default", "small-instance-type")
                .zone("test-zone-2")
                .uninitialized(),
        )
        .pods([
            on("n1", a("first", zones(&["test-zone-2"]))),
            on("n1", a("second", zones(&["test-zone-1", "test-zone-2"]))),
            a("third", zones(&["test-zone-1", "test-zone-3"])),
        ])
        .provision();
    expect_new("in-flight node in another zone", &p, "third");

    // 1001m took the 2 CPU type (1.9 allocatable): another 1 CPU does not fit.
    let p = cluster()
        .node(managed("n1", "default", "small-instance-type").uninitialized())
        .pods([
            on("n1", a("first", pod().cpu("1001m"))),
            a("second", pod().cpu("1")),
        ])
        .provision();
    expect_new("in-flight node without room", &p, "second");

    // An arm64 pod does not go to the amd64 node.
    let p = cluster()
        .node(managed("n1", "default", "small-instance-type").uninitialized())
        .pods([
            on("n1", a("first", tiny())),
            a("second", pod().node_selector(&[(ARCH, "arm64")])),
        ])
        .provision();
    expect_new("in-flight node of another arch", &p, "second");

    // A node being deleted takes nothing.
    let p = cluster()
        .node(
            managed("n1", "default", "small-instance-type")
                .uninitialized()
                .deleting(),
        )
        .pods([a("second", tiny())])
        .provision();
    expect_new("in-flight node terminating", &p, "second");

    // Upstream's #2011 and "should not bind pods to nodes": the pod that opened the node is
    // still pending when the next round runs; it and a second pod go to the node it opened.
    let p = cluster()
        .node(managed("n1", "default", "small-instance-type").uninitialized())
        .pods([a("first", tiny()), a("second", tiny())])
        .provision();
    expect_on("pods not bound yet", &p, "n1", &["first", "second"]);
}

#[test]
fn in_flight_nodes_and_topology() {
    let labels = [("foo", "bar")];
    let spread = |key: &str| {
        pod()
            .labels(&labels)
            .spread(key, 1, "DoNotSchedule", &labels)
    };
    // Zones: four pods went 2/1/1 to three nodes in three zones; five more fill them to 3/3/3
    // without a new node.
    let mut c = cluster();
    let mut bound = Vec::new();
    for (i, (zone, pods)) in [("test-zone-1", 2), ("test-zone-2", 1), ("test-zone-3", 1)]
        .into_iter()
        .enumerate()
    {
        let name = format!("n{i}");
        c = c.node(
            managed(&name, "default", "small-instance-type")
                .zone(zone)
                .uninitialized(),
        );
        for j in 0..pods {
            bound.push(on(&name, a(&format!("old-{i}-{j}"), spread(ZONE))));
        }
    }
    let p = c.pods(bound).pods(many("new", 5, spread(ZONE))).provision();
    assert!(p.claims.is_empty(), "{p:?}");
    let per_node: Vec<usize> = ["n0", "n1", "n2"]
        .iter()
        .map(|n| on_node(&p, n).len())
        .collect();
    assert_eq!(per_node, [1, 2, 2], "3/3/3 per zone: {p:?}");

    // Hostnames: four nodes with one pod each; five more get five new nodes, one each.
    let mut c = cluster();
    let mut bound = Vec::new();
    for i in 0..4 {
        let name = format!("n{i}");
        c = c.node(managed(&name, "default", "small-instance-type").uninitialized());
        bound.push(on(&name, a(&format!("old-{i}"), spread(HOSTNAME))));
    }
    let p = c
        .pods(bound)
        .pods(many("new", 5, spread(HOSTNAME)))
        .provision();
    assert!(p.existing.values().all(Vec::is_empty), "{p:?}");
    assert_eq!(
        p.claims.iter().map(|c| c.pods.len()).collect::<Vec<_>>(),
        [1, 1, 1, 1, 1]
    );
}

/// (case, node, its taints, the NodeClaim's startup taints, pod placed there?)
type TaintCase = (&'static str, ManagedNode, Vec<Taint>, Vec<Taint>, bool);

#[test]
fn in_flight_nodes_and_taints() {
    let node = || managed("n1", "default", "arm-instance-type");
    let not_ready = |effect: &str| taint("node.kubernetes.io/not-ready", None, effect);
    let custom = taint("foo.com/taint", Some("tainted"), "NoSchedule");
    let cases: Vec<TaintCase> = vec![
        (
            "in-flight node with no taints",
            node().uninitialized(),
            vec![],
            vec![],
            true,
        ),
        (
            "not-ready NoExecute while uninitialized",
            node().uninitialized(),
            vec![not_ready("NoExecute")],
            vec![],
            true,
        ),
        (
            "not-ready NoExecute once initialized",
            node(),
            vec![not_ready("NoExecute")],
            vec![],
            false,
        ),
        (
            "a taint on an initialized node",
            node(),
            vec![custom.clone()],
            vec![],
            false,
        ),
        (
            "a custom startup taint while uninitialized",
            node().uninitialized(),
            vec![custom.clone(), not_ready("NoSchedule")],
            vec![custom.clone()],
            true,
        ),
        (
            "a startup taint back after initialization",
            node(),
            vec![taint(
                "ignore-me",
                Some("nothing-to-see-here"),
                "NoSchedule",
            )],
            vec![taint(
                "ignore-me",
                Some("nothing-to-see-here"),
                "NoSchedule",
            )],
            false,
        ),
        // Upstream marks the node initialized without the state seeing it: as state sees it,
        // a node not initialized yet, its ephemeral taints ignored.
        (
            "not-ready, unreachable and cloud-provider taints while uninitialized",
            node().uninitialized().not_ready(),
            vec![
                not_ready("NoSchedule"),
                taint("node.kubernetes.io/unreachable", None, "NoSchedule"),
                taint(
                    "node.cloudprovider.kubernetes.io/uninitialized",
                    Some("true"),
                    "NoSchedule",
                ),
            ],
            vec![],
            true,
        ),
        (
            "a readiness.k8s.io taint while uninitialized",
            node().uninitialized(),
            vec![taint("readiness.k8s.io/network", None, "NoSchedule")],
            vec![],
            true,
        ),
    ];
    for (name, n, taints, startup, placed) in cases {
        let p = with_node(cluster(), n, taints, startup)
            .pods([a("second", pod())])
            .provision();
        if placed {
            expect_on(name, &p, "n1", &["second"]);
        } else {
            expect_new(name, &p, "second");
        }
    }
}

fn daemonset(name: &str, template: Pod) -> DaemonSet {
    let spec = template.spec.expect("a spec");
    from(json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("{name}-uid")},
        "spec": {"selector": {"matchLabels": {"ds": name}},
            "template": {"metadata": {"labels": {"ds": name}}, "spec": spec}},
    }))
}

/// A pod of DaemonSet `ds` from `builder`, bound to `node`, asking for `requests`.
fn daemon_pod(ds: &str, builder: PodBuilder, node: &str, requests: &[(&str, &str)]) -> Pod {
    let mut p = on(
        node,
        a(
            &format!("{ds}-{node}"),
            builder.labels(&[("ds", ds)]).requests(requests),
        ),
    );
    p.metadata.owner_references = Some(vec![from(json!({"apiVersion": "apps/v1",
        "kind": "DaemonSet", "name": ds, "uid": format!("{ds}-uid"), "controller": true}))]);
    p
}

#[test]
fn in_flight_nodes_and_daemonsets() {
    // The DaemonSet's pod is already bound: nothing more is held for it, so 14.9 of the
    // 15.9 CPUs left fit.
    let ds = daemonset(
        "ds",
        pod().requests(&[("cpu", "1"), ("memory", "1Gi")]).build(),
    );
    let p = cluster()
        .daemonset(ds.clone())
        .node(managed("n1", "default", "arm-instance-type").uninitialized())
        .pods([
            daemon_pod("ds", pod(), "n1", &[("cpu", "1"), ("memory", "2Gi")]),
            a("second", pod().cpu("14.9")),
        ])
        .provision();
    expect_on("daemonset usage tracked apart", &p, "n1", &["second"]);
    // Before it binds, its share is held: 15 CPUs do not fit beside it (nor on a new node).
    let p = cluster()
        .daemonset(ds)
        .node(managed("n1", "default", "arm-instance-type").uninitialized())
        .pods([a("second", pod().cpu("15"))])
        .provision();
    assert!(on_node(&p, "n1").is_empty(), "share held: {p:?}");

    // A DaemonSet that selects a label the node gained unexpectedly has its pod bound there;
    // the other DaemonSet's share stays held and nothing goes negative: 15.5 CPUs do not fit.
    let selective = daemonset(
        "ds1",
        pod()
            .node_selector(&[("my-node-label", "value")])
            .requests(&[("cpu", "1"), ("memory", "1Gi")])
            .build(),
    );
    let small = daemonset("ds2", pod().cpu("1m").build());
    let p = cluster()
        .daemonset(selective)
        .daemonset(small)
        .node(
            managed("n1", "default", "arm-instance-type")
                .uninitialized()
                .label("my-node-label", "value"),
        )
        .pods([
            daemon_pod(
                "ds1",
                pod().node_selector(&[("my-node-label", "value")]),
                "n1",
                &[("cpu", "1"), ("memory", "2Gi")],
            ),
            a("second", pod().cpu("15.5")),
        ])
        .provision();
    expect_new("unexpected daemonset pod on the node", &p, "second");
}

/// A NodeClaim launched but not registered (no Node yet).
fn launching_claim(name: &str) -> NodeClaim {
    from(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default",
            "node.kubernetes.io/instance-type": "default-instance-type"},
            "creationTimestamp": ago(1)},
        "spec": {"nodeClassRef": {"group": "karpenter.test.sh", "kind": "TestNodeClass", "name": "default"},
            "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["default-instance-type"]},
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test-zone-1"]}]},
        "status": {"providerID": format!("fake://{name}"),
            "allocatable": {"cpu": "3900m", "memory": "4086Mi", "pods": "5"},
            "capacity": {"cpu": "4", "memory": "4Gi", "pods": "5"},
            "conditions": [{"type": "Launched", "status": "True", "reason": "Launched",
                "message": "", "lastTransitionTime": ago(1)}]},
    }))
}

#[test]
fn initialized_nodes_are_tried_first() {
    // Among launching NodeClaims and one initialized node, the pod goes to the initialized one.
    let mut c = cluster();
    for i in 0..20 {
        c = c.claim(launching_claim(&format!("c{i:02}")));
    }
    let p = c
        .node(managed("ready", "default", "default-instance-type"))
        .pods([a("p", pod())])
        .provision();
    expect_on("all other nodes in flight", &p, "ready", &["p"]);
    // Among registered, uninitialized nodes and one initialized node, likewise.
    let mut c = cluster();
    for i in 0..20 {
        c = c
            .node(managed(&format!("a{i:02}"), "default", "default-instance-type").uninitialized());
    }
    let p = c
        .node(managed("z-ready", "default", "default-instance-type"))
        .pods([a("p", pod())])
        .provision();
    expect_on("uninitialized nodes", &p, "z-ready", &["p"]);
}

/// An instance type of `cpu` and `memory` allocatable (the fake overhead added back).
fn sized(
    name: &str,
    cpu: &str,
    memory: &str,
    pods: &str,
) -> karpenter_core::instancetype::InstanceType {
    let mut it = FakeInstanceType::new(name)
        .resources(&[("cpu", cpu), ("memory", memory), ("pods", pods)])
        .build();
    it.capacity.cpu += 100;
    it.capacity.memory += (10i64 << 20) * 1000;
    FakeInstanceType::new(name)
        .resources(&[
            ("cpu", &format!("{}m", it.capacity.cpu)),
            ("memory", &format!("{}", it.capacity.memory / 1000)),
            ("pods", pods),
        ])
        .build()
}

#[test]
fn existing_nodes() {
    // A node karpenter does not own takes one pod, and a hundred.
    let unowned = || {
        managed("theirs", "default", "default-instance-type")
            .instance_type(sized("theirs", "10", "100Gi", "110"))
            .unmanaged()
    };
    let requests = || {
        let mut p = pod().cpu("10m").build();
        let r = p.spec.as_mut().unwrap().containers[0]
            .resources
            .as_mut()
            .unwrap();
        r.limits = r.requests.clone();
        p
    };
    let p = cluster()
        .node(unowned())
        .pods([named("p", requests())])
        .provision();
    expect_on("unowned node", &p, "theirs", &["p"]);
    let pods: Vec<Pod> = (0..100)
        .map(|i| named(&format!("p{i:03}"), requests()))
        .collect();
    let p = cluster().node(unowned()).pods(pods).provision();
    assert_eq!(on_node(&p, "theirs").len(), 100, "{p:?}");
    assert!(p.claims.is_empty());

    // A pod the existing node cannot take (another zone) gets a node from the NodePool.
    let p = cluster()
        .node(managed("n1", "default", "default-instance-type").zone("test-zone-2"))
        .pods([a("p", pod().require(&[(ZONE, "In", &["test-zone-1"])]))])
        .provision();
    expect_new("pod incompatible with the existing node", &p, "p");
}

#[test]
fn existing_nodes_and_incompatible_daemonsets() {
    // A DaemonSet of 100 CPUs for zone 1 only: nothing is held for it on the node in zone 2,
    // which takes the 1 CPU pod; every new node would hold it, so the second pod fits nowhere.
    let ds = daemonset(
        "huge",
        pod()
            .requests(&[("cpu", "100"), ("memory", "100Gi")])
            .require(&[(ZONE, "In", &["test-zone-1"])])
            .build(),
    );
    let node = || {
        managed("n1", "default", "default-instance-type")
            .instance_type(sized("one", "1", "1Gi", "110"))
            .zone("test-zone-2")
    };
    let one = || pod().requests(&[("cpu", "1"), ("memory", "1Gi")]);
    let p = cluster()
        .daemonset(ds.clone())
        .node(node())
        .pods([a("first", one())])
        .provision();
    expect_on("daemonset not strictly compatible", &p, "n1", &["first"]);
    let p = cluster()
        .daemonset(ds)
        .node(node())
        .pods([on("n1", a("first", one())), a("second", one())])
        .provision();
    assert!(!p.scheduled("second"), "{p:?}");
}

#[test]
fn pods_not_bound_yet() {
    // The kubelet zeroes the extended resources it has not set up yet: the launched node's
    // NodeClaim says what it will have, so a second GPU pod goes there too.
    let gpu = || pod().requests(&[("cpu", "10m"), (GPU_VENDOR_A, "1")]);
    let (mut node, claim) = managed("n1", "default", "gpu-vendor-instance-type")
        .uninitialized()
        .build();
    let status = node.status.as_mut().unwrap();
    status
        .capacity
        .as_mut()
        .unwrap()
        .insert(GPU_VENDOR_A.into(), Quantity("0".into()));
    let allocatable = status.allocatable.as_mut().unwrap();
    allocatable.remove(GPU_VENDOR_A);
    allocatable.insert("fake.com/vendor-b".into(), Quantity("0".into()));
    let mut c = cluster();
    c.nodes.push(node);
    c.claims.extend(claim);
    let p = c.pods([a("first", gpu()), a("second", gpu())]).provision();
    expect_on(
        "extended resources zeroed by the kubelet",
        &p,
        "n1",
        &["first", "second"],
    );

    // Self-affinity by zone: the second pod of the group follows the first to the node opened
    // for it, rather than to any zone.
    let labels = [("security", "s2")];
    let affine = || pod().labels(&labels).affinity_to(ZONE, &labels);
    let p = cluster()
        .node(
            managed("n1", "default", "small-instance-type")
                .zone("test-zone-2")
                .uninitialized(),
        )
        .pods([a("first", affine()), a("second", affine())])
        .provision();
    expect_on("self pod affinity by zone", &p, "n1", &["first", "second"]);
}

fn owned(kind: &str, mut p: Pod) -> Pod {
    p.metadata.owner_references = Some(vec![from(json!({"apiVersion": "apps/v1",
        "kind": kind, "name": "owner", "uid": "owner-uid", "controller": true}))]);
    p
}

fn terminating(mut p: Pod) -> Pod {
    p.metadata.deletion_timestamp = Some(from(json!(ago(0))));
    p
}

fn budget(name: &str, rule: Value) -> PodDisruptionBudget {
    let mut spec = json!({"selector": {"matchLabels": {"app": "web"}}});
    merge(&mut spec, rule);
    from(json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
        "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1,
            "expectedPods": 1, "observedGeneration": 1},
    }))
}

#[test]
fn deleting_nodes() {
    let small = || {
        pod()
            .labels(&[("app", "web")])
            .requests(&[("memory", "100M")])
    };
    // (case, the pod on the deleting node, budgets, a new node for it?)
    let cases: Vec<(&str, Pod, Vec<PodDisruptionBudget>, bool)> = vec![
        ("active pod", a("p", small()), vec![], true),
        (
            "terminating pod",
            terminating(a("p", small())),
            vec![],
            false,
        ),
        (
            "terminating DaemonSet pod",
            terminating(owned("DaemonSet", a("p", small()))),
            vec![],
            false,
        ),
        (
            "terminating ReplicaSet pod",
            terminating(owned("ReplicaSet", a("p", small()))),
            vec![],
            false,
        ),
        (
            "terminating StatefulSet pod",
            terminating(owned("StatefulSet", a("p", small()))),
            vec![],
            true,
        ),
        (
            "maxUnavailable 0",
            a("p", small()),
            vec![budget("pdb", json!({"maxUnavailable": 0}))],
            false,
        ),
        (
            "maxUnavailable 0%",
            a("p", small()),
            vec![budget("pdb", json!({"maxUnavailable": "0%"}))],
            false,
        ),
        (
            "minAvailable 100%",
            a("p", small()),
            vec![budget("pdb", json!({"minAvailable": "100%"}))],
            false,
        ),
        (
            "two budgets of minAvailable 100%",
            a("p", small()),
            vec![
                budget("pdb-1", json!({"minAvailable": "100%"})),
                budget("pdb-2", json!({"minAvailable": "100%"})),
            ],
            false,
        ),
    ];
    for (name, p, pdbs, rescheduled) in cases {
        let mut c = cluster()
            .node(managed("going", "default", "small-instance-type").deleting())
            .pods([on("going", p)]);
        c.pdbs = pdbs;
        let got = c.provision();
        assert_eq!(got.scheduled("p"), rescheduled, "{name}: {got:?}");
        if rescheduled {
            assert_eq!(
                got.claims[0].instance_types.first().map(String::as_str),
                Some("small-instance-type"),
                "{name}: the same size again"
            );
        }
    }
}

/// The volumes of a round, which the shared harness leaves empty.
#[derive(Default)]
struct Storage {
    claims: Vec<PersistentVolumeClaim>,
    volumes: Vec<PersistentVolume>,
    classes: Vec<StorageClass>,
    csi_nodes: Vec<CSINode>,
}

/// What provisioning decides for `c` with `storage`.
fn provision_with(c: &Cluster, storage: &Storage) -> Provisioned {
    let snapshot = Snapshot::new(Observed {
        nodes: c.nodes.iter().collect(),
        node_claims: c.claims.iter().collect(),
        pods: c.pods.iter().collect(),
        daemonsets: c.daemonsets.iter().collect(),
        pdbs: c.pdbs.iter().collect(),
        namespaces: Vec::new(),
        volume_claims: storage.claims.iter().collect(),
        volumes: storage.volumes.iter().collect(),
        storage_classes: storage.classes.iter().collect(),
        csi_nodes: storage.csi_nodes.iter().collect(),
        services: Vec::new(),
        pod_controllers: Vec::new(),
        node_pools: &c.pools,
        provider_labels: &[],
        nominated: BTreeSet::new(),
        devices: Default::default(),
        marked_for_deletion: BTreeSet::new(),
    });
    let never = || false;
    let plan = decide(
        &snapshot,
        &RoundInputs {
            gates: c.gates,
            now: c.now,
            options: &c.options,
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
    provisioned(&plan.provisioning.expect("provisioning was due"))
}

const CSI: &str = "fake.csi.provider";
const DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";

/// A StorageClass of `provisioner`, WaitForFirstConsumer unless `mode` says, over `zones`.
fn class(name: &str, provisioner: &str, mode: &str, zones: &[&str], default: bool) -> StorageClass {
    let annotations = if default {
        json!({DEFAULT_CLASS: "true"})
    } else {
        json!({})
    };
    let mut v = json!({"metadata": {"name": name, "annotations": annotations},
        "provisioner": provisioner, "volumeBindingMode": mode});
    if !zones.is_empty() {
        v["allowedTopologies"] =
            json!([{"matchLabelExpressions": [{"key": ZONE, "values": zones}]}]);
    }
    from(v)
}

/// An unbound claim of `class` (`None`: the field unset).
fn unbound(name: &str, class: Option<&str>) -> PersistentVolumeClaim {
    let spec = match class {
        Some(c) => json!({"storageClassName": c}),
        None => json!({}),
    };
    from(json!({"metadata": {"name": name, "namespace": "default"}, "spec": spec}))
}

/// A claim bound to volume `pv`, with the bind-completed annotation when `completed`.
fn bound_to(name: &str, pv: &str, class: Option<&str>, completed: bool) -> PersistentVolumeClaim {
    let annotations = if completed {
        json!({"pv.kubernetes.io/bind-completed": "yes"})
    } else {
        json!({})
    };
    let mut spec = json!({"volumeName": pv});
    if let Some(c) = class {
        spec["storageClassName"] = json!(c);
    }
    from(
        json!({"metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": spec}),
    )
}

/// A CSI volume of `driver`, limited to `terms` (OR-ed node selector terms) when given.
fn volume(name: &str, driver: &str, terms: Value) -> PersistentVolume {
    let mut spec = json!({"csi": {"driver": driver, "volumeHandle": name}});
    if !terms.is_null() {
        spec["nodeAffinity"] = json!({"required": {"nodeSelectorTerms": terms}});
    }
    from(json!({"metadata": {"name": name}, "spec": spec}))
}

fn zone_terms(zones: &[&str]) -> Value {
    Value::Array(
        zones
            .iter()
            .map(|z| json!({"matchExpressions": [{"key": ZONE, "operator": "In", "values": [z]}]}))
            .collect(),
    )
}

fn csi_node(node: &str, limits: &[(&str, i32)]) -> CSINode {
    let drivers: Vec<Value> = limits
        .iter()
        .map(|(d, n)| json!({"name": d, "nodeID": "fake-node-id", "allocatable": {"count": n}}))
        .collect();
    from(json!({"metadata": {"name": node}, "spec": {"drivers": drivers}}))
}

/// `builder` as pod `name` with claims mounted by name.
fn with_claims(name: &str, builder: PodBuilder, claims: &[&str]) -> Pod {
    let mut p = a(name, builder);
    p.spec.as_mut().unwrap().volumes = Some(
        claims
            .iter()
            .enumerate()
            .map(|(i, c)| {
                from(json!({"name": format!("v{i}"), "persistentVolumeClaim": {"claimName": c}}))
            })
            .collect(),
    );
    p
}

/// `builder` as pod `name` with a generic ephemeral volume `tmp-ephemeral` of `class`
/// (`None`: the template names none); its claim is `<name>-tmp-ephemeral`.
fn with_ephemeral(name: &str, builder: PodBuilder, class: Option<&str>) -> Pod {
    let mut p = a(name, builder);
    let mut spec = json!({"accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}}});
    if let Some(c) = class {
        spec["storageClassName"] = json!(c);
    }
    p.spec.as_mut().unwrap().volumes = Some(vec![from(json!({"name": "tmp-ephemeral",
        "ephemeral": {"volumeClaimTemplate": {"spec": spec}}}))]);
    p
}

/// The suite's catalog for volumes: one type of 1024 CPUs and 1024 pods.
fn volume_cluster() -> Cluster {
    Cluster::with_types(
        [pool()],
        vec![
            FakeInstanceType::new("instance-type")
                .resources(&[("cpu", "1024"), ("pods", "1024")])
                .build(),
        ],
    )
}

fn big_node(name: &str) -> ManagedNode {
    managed(name, "default", "default-instance-type").instance_type(
        FakeInstanceType::new("instance-type")
            .resources(&[("cpu", "1024"), ("pods", "1024")])
            .build(),
    )
}

#[test]
fn volume_limits() {
    // The node can attach 10 volumes of the driver: six pods with two claims each need a
    // second node.
    let mut storage = Storage {
        classes: vec![class(
            "my-storage-class",
            CSI,
            "WaitForFirstConsumer",
            &["test-zone-1"],
            false,
        )],
        csi_nodes: vec![csi_node("n1", &[(CSI, 10)])],
        ..Default::default()
    };
    let mut pods = Vec::new();
    for i in 0..6 {
        let (x, y) = (format!("my-claim-a-{i}"), format!("my-claim-b-{i}"));
        storage.claims.push(unbound(&x, Some("my-storage-class")));
        storage.claims.push(unbound(&y, Some("my-storage-class")));
        pods.push(with_claims(&format!("p{i}"), pod(), &[&x, &y]));
    }
    let c = volume_cluster().node(big_node("n1")).pods(pods);
    let p = provision_with(&c, &storage);
    assert_eq!(on_node(&p, "n1").len(), 5, "{p:?}");
    assert_eq!(p.claims.len(), 1, "{p:?}");

    // A hundred pods of one claim attach it once: all on the node.
    let storage = Storage {
        classes: vec![class(
            "my-storage-class",
            CSI,
            "Immediate",
            &["test-zone-1"],
            false,
        )],
        claims: vec![bound_to(
            "my-claim",
            "my-volume",
            Some("my-storage-class"),
            true,
        )],
        volumes: vec![volume("my-volume", CSI, zone_terms(&["test-zone-1"]))],
        csi_nodes: vec![csi_node("n1", &[(CSI, 10)])],
    };
    let pods: Vec<Pod> = (0..100)
        .map(|i| with_claims(&format!("p{i:03}"), pod(), &["my-claim"]))
        .collect();
    let p = provision_with(&volume_cluster().node(big_node("n1")).pods(pods), &storage);
    assert_eq!(on_node(&p, "n1").len(), 100, "{p:?}");
    assert!(p.claims.is_empty());

    // NFS volumes have no driver and no limit: five pods mounting one twice share the node.
    let nfs: PersistentVolume = from(json!({"metadata": {"name": "my-volume"},
        "spec": {"storageClassName": "nfs", "nfs": {"server": "fake.server", "path": "/some/path"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": zone_terms(&["test-zone-1"])}}}}));
    let storage = Storage {
        claims: vec![bound_to("my-claim", "my-volume", Some(""), true)],
        volumes: vec![nfs],
        ..Default::default()
    };
    let pods: Vec<Pod> = (0..5)
        .map(|i| with_claims(&format!("p{i}"), pod(), &["my-claim", "my-claim"]))
        .collect();
    let p = provision_with(&volume_cluster().node(big_node("n1")).pods(pods), &storage);
    assert_eq!(on_node(&p, "n1").len(), 5, "{p:?}");
    assert!(p.claims.is_empty());
}

#[test]
fn volume_limits_by_class() {
    // The node attaches one volume of the CSI driver, ten of another: a second pod whose
    // ephemeral volume names the CSI driver's class needs a new node, whichever way the class
    // is found — named by the template, the default class, or the newest of two defaults.
    let limits = || vec![csi_node("n1", &[(CSI, 1), ("other-provider", 10)])];
    let named = Storage {
        classes: vec![
            class(
                "my-storage-class",
                CSI,
                "WaitForFirstConsumer",
                &["test-zone-1"],
                false,
            ),
            class(
                "default-storage-class",
                "other-provider",
                "WaitForFirstConsumer",
                &["test-zone-1"],
                true,
            ),
        ],
        claims: vec![
            unbound("first-tmp-ephemeral", Some("my-storage-class")),
            unbound("second-tmp-ephemeral", Some("my-storage-class")),
        ],
        csi_nodes: limits(),
        ..Default::default()
    };
    let defaulted = Storage {
        classes: vec![class(
            "default-storage-class",
            CSI,
            "WaitForFirstConsumer",
            &["test-zone-1"],
            true,
        )],
        claims: vec![
            unbound("first-tmp-ephemeral", None),
            unbound("second-tmp-ephemeral", None),
        ],
        csi_nodes: limits(),
        ..Default::default()
    };
    let mut older = class(
        "default-storage-class",
        "other-provider",
        "WaitForFirstConsumer",
        &["test-zone-1"],
        true,
    );
    older.metadata.creation_timestamp = Some(from(json!(ago(60))));
    let mut newer = class(
        "newer-default-storage-class",
        CSI,
        "WaitForFirstConsumer",
        &["test-zone-1"],
        true,
    );
    newer.metadata.creation_timestamp = Some(from(json!(ago(1))));
    let newest = Storage {
        classes: vec![older, newer],
        claims: vec![
            unbound("first-tmp-ephemeral", None),
            unbound("second-tmp-ephemeral", None),
        ],
        csi_nodes: limits(),
        ..Default::default()
    };
    for (name, storage, template) in [
        (
            "the class the template names",
            named,
            Some("my-storage-class"),
        ),
        ("the default class", defaulted, None),
        ("the newest default class", newest, None),
    ] {
        let c = volume_cluster().node(big_node("n1")).pods([
            on("n1", with_ephemeral("first", pod(), template)),
            with_ephemeral("second", pod(), template),
        ]);
        let p = provision_with(&c, &storage);
        expect_new(name, &p, "second");
    }

    // In-tree EBS (CSI migration): a claim of the in-tree class counts under EBS's CSI driver.
    const EBS: &str = "ebs.csi.aws.com";
    let in_tree = || {
        class(
            "in-tree-storage-class",
            "kubernetes.io/aws-ebs",
            "WaitForFirstConsumer",
            &["test-zone-1"],
            true,
        )
    };
    let pv: PersistentVolume = from(json!({"metadata": {"name": "my-volume"},
        "spec": {"awsElasticBlockStore": {"volumeID": "vol-1"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": zone_terms(&["test-zone-1"])}}}}));
    let storage = Storage {
        classes: vec![in_tree()],
        claims: vec![
            bound_to(
                "first-claim",
                "my-volume",
                Some("in-tree-storage-class"),
                true,
            ),
            unbound("second-claim", Some("in-tree-storage-class")),
        ],
        volumes: vec![pv],
        csi_nodes: vec![csi_node("n1", &[(EBS, 1)])],
    };
    let c = volume_cluster().node(big_node("n1")).pods([
        on("n1", with_claims("first", pod(), &["first-claim"])),
        with_claims("second", pod(), &["second-claim"]),
    ]);
    expect_new("a migrated PVC/PV", &provision_with(&c, &storage), "second");
    let storage = Storage {
        classes: vec![in_tree()],
        claims: vec![
            unbound("first-tmp-ephemeral", None),
            unbound("second-tmp-ephemeral", None),
        ],
        csi_nodes: vec![csi_node("n1", &[(EBS, 1)])],
        ..Default::default()
    };
    let c = volume_cluster().node(big_node("n1")).pods([
        on(
            "n1",
            with_ephemeral("first", pod(), Some("in-tree-storage-class")),
        ),
        with_ephemeral("second", pod(), Some("in-tree-storage-class")),
    ]);
    expect_new(
        "a migrated ephemeral volume",
        &provision_with(&c, &storage),
        "second",
    );
}

#[test]
fn volume_topology() {
    // A volume on a local disk or a host path, pinned to a host or an invalid zone: the host
    // term is dropped (the volume goes with a new node) and the pod is scheduled.
    for source in [
        json!({"local": {"path": "/mnt/local"}}),
        json!({"hostPath": {"path": "/mnt/host"}}),
    ] {
        let mut spec = source.clone();
        spec["nodeAffinity"] = json!({"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": ["existing-host"]}]},
            {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["invalid-zone"]}]}]}});
        let storage = Storage {
            volumes: vec![from(
                json!({"metadata": {"name": "hostname-or-zone-pv"}, "spec": spec}),
            )],
            claims: vec![bound_to(
                "hostname-or-zone-pvc",
                "hostname-or-zone-pv",
                None,
                true,
            )],
            ..Default::default()
        };
        let c = cluster().pods([with_claims(
            "hostname-or-zone-pod",
            pod(),
            &["hostname-or-zone-pvc"],
        )]);
        let p = provision_with(&c, &storage);
        assert!(p.scheduled("hostname-or-zone-pod"), "{source}: {p:?}");
    }
}

/// Claims and volumes that hold a pod back, or let it have a node.
#[test]
fn volumes_that_hold_a_pod_back() {
    let other = |mode: &str| {
        class(
            "default-storage-class",
            "other-provider",
            mode,
            &["test-zone-1"],
            false,
        )
    };
    let mut deleting_claim = unbound("tmp-ephemeral", Some("default-storage-class"));
    deleting_claim.metadata.deletion_timestamp = Some(from(json!(ago(0))));
    deleting_claim.metadata.finalizers = Some(vec!["kubernetes.io/pvc-protection".into()]);
    let mut lost = unbound("tmp-ephemeral", Some("default-storage-class"));
    lost.status = Some(from(json!({"phase": "Lost"})));
    let mut deleting_volume = volume("pv", "other-provider", Value::Null);
    deleting_volume.metadata.deletion_timestamp = Some(from(json!(ago(0))));
    deleting_volume.metadata.finalizers = Some(vec!["kubernetes.io/pv-protection".into()]);
    let plain_volume =
        || -> PersistentVolume { from(json!({"metadata": {"name": "test-pv"}, "spec": {}})) };
    let by_claim = || vec![with_claims("p", pod(), &["tmp-ephemeral"])];
    let by_ephemeral = |class: Option<&str>| vec![with_ephemeral("p", pod(), class)];
    // (case, storage, pods, a node for the pod?)
    let cases: Vec<(&str, Storage, Vec<Pod>, bool)> = vec![
        (
            "an unbound claim of an Immediate class",
            Storage {
                classes: vec![other("Immediate")],
                claims: vec![unbound("tmp-ephemeral", Some("default-storage-class"))],
                ..Default::default()
            },
            by_claim(),
            false,
        ),
        (
            "a claim being deleted",
            Storage {
                classes: vec![other("WaitForFirstConsumer")],
                claims: vec![deleting_claim],
                ..Default::default()
            },
            by_claim(),
            false,
        ),
        (
            "a bound volume being deleted",
            Storage {
                claims: vec![bound_to("p-tmp-ephemeral", "pv", None, true)],
                volumes: vec![deleting_volume],
                ..Default::default()
            },
            by_ephemeral(None),
            false,
        ),
        (
            "a Lost claim",
            Storage {
                classes: vec![other("WaitForFirstConsumer")],
                claims: vec![lost],
                ..Default::default()
            },
            by_claim(),
            false,
        ),
        (
            "a volumeName without bind-completed",
            Storage {
                classes: vec![other("WaitForFirstConsumer")],
                claims: vec![bound_to(
                    "tmp-ephemeral",
                    "pv",
                    Some("default-storage-class"),
                    false,
                )],
                volumes: vec![volume("pv", "other-provider", Value::Null)],
                ..Default::default()
            },
            by_claim(),
            false,
        ),
        (
            "a volumeName with bind-completed",
            Storage {
                classes: vec![other("WaitForFirstConsumer")],
                claims: vec![bound_to(
                    "tmp-ephemeral",
                    "pv",
                    Some("default-storage-class"),
                    true,
                )],
                volumes: vec![volume("pv", "other-provider", Value::Null)],
                ..Default::default()
            },
            by_claim(),
            true,
        ),
        (
            "a bound ephemeral claim of a class that does not exist",
            Storage {
                claims: vec![bound_to(
                    "p-tmp-ephemeral",
                    "test-pv",
                    Some("non-existent"),
                    true,
                )],
                volumes: vec![plain_volume()],
                ..Default::default()
            },
            by_ephemeral(Some("non-existent")),
            true,
        ),
        (
            "a bound ephemeral claim of the empty class",
            Storage {
                claims: vec![bound_to("p-tmp-ephemeral", "test-pv", Some(""), true)],
                volumes: vec![plain_volume()],
                ..Default::default()
            },
            by_ephemeral(Some("")),
            true,
        ),
        (
            "an unbound ephemeral volume of a class that does not exist",
            Storage::default(),
            by_ephemeral(Some("non-existent")),
            false,
        ),
        (
            "an unbound ephemeral volume of the empty class",
            Storage::default(),
            by_ephemeral(Some("")),
            false,
        ),
    ];
    for (name, storage, pods, launched) in cases {
        let p = provision_with(&cluster().pods(pods), &storage);
        assert_eq!(p.scheduled("p"), launched, "{name}: {p:?}");
    }
}

/// Two claims whose classes allow OR-ed topologies over the optional label and the zone:
/// only zone 1 with `special=optional` satisfies both.
#[test]
fn volume_alternatives_that_survive_pruning() {
    let mut a = class("pruned-overlap-a", CSI, "WaitForFirstConsumer", &[], false);
    a.allowed_topologies = Some(from(json!([
        {"matchLabelExpressions": [{"key": "special", "values": ["required"]}]},
        {"matchLabelExpressions": [{"key": "special", "values": ["optional"]}]}])));
    let mut b = class("pruned-overlap-b", CSI, "WaitForFirstConsumer", &[], false);
    b.allowed_topologies = Some(from(json!([
        {"matchLabelExpressions": [{"key": ZONE, "values": ["test-zone-1"]}, {"key": "special", "values": ["optional"]}]},
        {"matchLabelExpressions": [{"key": ZONE, "values": ["test-zone-2"]}, {"key": "special", "values": ["required"]}]}])));
    let storage = Storage {
        classes: vec![a, b],
        claims: vec![
            unbound("pvc-a", Some("pruned-overlap-a")),
            unbound("pvc-b", Some("pruned-overlap-b")),
        ],
        ..Default::default()
    };
    let mut c = Cluster::with_types(
        [pool()],
        karpenter_core::instancetype::fake::instance_types(5),
    );
    c.options.provider_labels = karpenter_core::instancetype::fake::provider_labels();
    let c = c.pods([with_claims("p", pod(), &["pvc-a", "pvc-b"])]);
    let p = provision_with(&c, &storage);
    assert!(p.scheduled("p"), "{p:?}");
    assert_eq!(
        p.claims[0].instance_types,
        ["fake-it-4"],
        "only the large type carries special=optional"
    );
}

// ---------------------------------------------------------------------------------------------
// Metrics › Pending Pods by Effective Zone Metric (suite_test.go)

/// Upstream's "should report metric correctly for volume constraints": a pending pod whose
/// claim's StorageClass allows `zones`.
#[test]
fn pending_pods_by_effective_zone_with_volumes() {
    let cases: [(&str, Option<&str>, &[&str], &str); 3] = [
        (
            "when PVC does not restrict pod to a single zone",
            None,
            &["test-zone-1", "test-zone-2"],
            "flexible",
        ),
        (
            "when PVC restricts pod to a single zone",
            None,
            &["test-zone-1"],
            "test-zone-1",
        ),
        (
            "when PVC restricts pod to no zone",
            Some("test-zone-1"),
            &["test-zone-2"],
            "none",
        ),
    ];
    for (name, selector, zones, expected) in cases {
        let mut builder = pod().phase("Pending");
        if let Some(z) = selector {
            builder = builder.node_selector(&[(ZONE, z)]);
        }
        let cluster = cluster().pods([with_claims("p", builder, &["pvc-name"])]);
        let storage = Storage {
            claims: vec![unbound("pvc-name", Some("zone-sc"))],
            classes: vec![class("zone-sc", CSI, "WaitForFirstConsumer", zones, false)],
            ..Default::default()
        };
        let p = provision_with(&cluster, &storage);
        assert_eq!(
            p.pending_by_zone,
            BTreeMap::from([(expected.to_string(), 1)]),
            "{name}"
        );
    }
}

/// Upstream's "should report zone of pods corectly": pods already bound (`existing`, by zone)
/// and the pending pods of the round.
#[test]
fn pending_pods_by_effective_zone() {
    const APP: &[(&str, &str)] = &[("app", "pod-label")];
    let spread = TopologySpreadConstraint {
        topology_key: ZONE.into(),
        when_unsatisfiable: "DoNotSchedule".into(),
        label_selector: Some(selector(APP)),
        max_skew: 1,
        ..Default::default()
    };
    let pending = || pod().phase("Pending");
    // The case, the zones of the pods already bound, the pending pods, the counts expected.
    type Case = (
        &'static str,
        &'static [&'static str],
        Vec<PodBuilder>,
        &'static [(&'static str, usize)],
    );
    let cases: Vec<Case> = vec![
        (
            "when pods are flexible to zones",
            &[],
            vec![pending(), pending()],
            &[("flexible", 2)],
        ),
        (
            "when pods are flexible to zones (2)",
            &[],
            vec![pending().node_selector(&[(ZONE, "test-zone-2")]); 3],
            &[("test-zone-2", 3)],
        ),
        (
            "when multiple pods have different zone constraints",
            &[],
            vec![
                pending().node_selector(&[(ZONE, "test-zone-1")]),
                pending().node_selector(&[(ZONE, "test-zone-2")]),
            ],
            &[("test-zone-1", 1), ("test-zone-2", 1)],
        ),
        (
            "when pod has preffered zone affinity",
            &[],
            vec![pending().prefer(1, &[(ZONE, "In", &["test-zone-1"])])],
            &[("flexible", 1)],
        ),
        (
            "when pods have required pod affinity",
            &["test-zone-1"],
            vec![pending().affinity_to(ZONE, APP)],
            &[("test-zone-1", 1)],
        ),
        (
            "when pods have required pod anti-affinity",
            &["test-zone-1", "test-zone-2"],
            vec![pending().anti_affinity_to(ZONE, APP)],
            &[("test-zone-3", 1)],
        ),
        (
            "when pods have restricting TSCs",
            &["test-zone-1", "test-zone-2"],
            vec![pending().labels(APP).spread_with(spread.clone())],
            &[("test-zone-3", 1)],
        ),
        (
            "when TSC is unsatisfiable",
            &[
                "test-zone-1",
                "test-zone-1",
                "test-zone-2",
                "test-zone-2",
                "test-zone-3",
                "test-zone-3",
            ],
            vec![pending().spread_with(TopologySpreadConstraint {
                min_domains: Some(4),
                ..spread.clone()
            })],
            &[("none", 1)],
        ),
        (
            "when pod affinity is unsatisfiable",
            &[],
            vec![pending().affinity_to(ZONE, &[("nonexistent", "label")])],
            &[("none", 1)],
        ),
        (
            "when pod anti-affinity is unsatisfiable",
            &["test-zone-1", "test-zone-2", "test-zone-3"],
            vec![pending().anti_affinity_to(ZONE, APP)],
            &[("none", 1)],
        ),
    ];
    for (name, existing, pending_pods, expected) in cases {
        let mut c = cluster();
        for zone in ["test-zone-1", "test-zone-2", "test-zone-3"] {
            c = c.node(
                managed(&format!("node-{zone}"), "default", "default-instance-type").zone(zone),
            );
        }
        let bound: Vec<Pod> = existing
            .iter()
            .enumerate()
            .map(|(i, zone)| {
                on(
                    &format!("node-{zone}"),
                    a(&format!("existing-{i}"), pod().labels(APP)),
                )
            })
            .collect();
        let pods: Vec<Pod> = pending_pods
            .into_iter()
            .enumerate()
            .map(|(i, b)| a(&format!("pending-{i}"), b))
            .collect();
        let c = c.pods(bound).pods(pods);
        let p = c.provision();
        let expected: BTreeMap<String, usize> =
            expected.iter().map(|(z, n)| (z.to_string(), *n)).collect();
        assert_eq!(p.pending_by_zone, expected, "{name}");
    }
}

/// Upstream's VolumeUsage › PVs and StorageClasses whose zones are OR-ed terms: two pods apart
/// by zone each get one of the allowed zones.
#[test]
fn or_ed_volume_zones_let_pods_apart_by_zone_take_one_each() {
    let apart = |name: &str, claim: &str| {
        with_claims(
            name,
            pod()
                .labels(&[("app", "multi-zone-app")])
                .anti_affinity_to(ZONE, &[("app", "multi-zone-app")]),
            &[claim],
        )
    };
    let by_volume = Storage {
        volumes: (0..2)
            .map(|i| {
                volume(
                    &format!("multi-zone-pv-{i}"),
                    CSI,
                    zone_terms(&["test-zone-1", "test-zone-2"]),
                )
            })
            .collect(),
        claims: (0..2)
            .map(|i| {
                bound_to(
                    &format!("multi-zone-pvc-{i}"),
                    &format!("multi-zone-pv-{i}"),
                    None,
                    true,
                )
            })
            .collect(),
        ..Default::default()
    };
    let mut allowed: StorageClass = class("multi-zone", CSI, "WaitForFirstConsumer", &[], false);
    allowed.allowed_topologies = Some(from(json!([
        {"matchLabelExpressions": [{"key": ZONE, "values": ["test-zone-1"]}]},
        {"matchLabelExpressions": [{"key": ZONE, "values": ["test-zone-2"]}]}])));
    let by_class = Storage {
        classes: vec![allowed],
        claims: (0..2)
            .map(|i| unbound(&format!("multi-zone-pvc-{i}"), Some("multi-zone")))
            .collect(),
        ..Default::default()
    };
    for (case, storage) in [
        ("a PV's terms", by_volume),
        ("a StorageClass's allowed topologies", by_class),
    ] {
        let c = cluster().pods([
            apart("pod-0", "multi-zone-pvc-0"),
            apart("pod-1", "multi-zone-pvc-1"),
        ]);
        let p = provision_with(&c, &storage);
        let zones: Vec<&str> = ["pod-0", "pod-1"]
            .iter()
            .map(|pod| {
                let claim = p.claims.iter().find(|c| c.pods.iter().any(|x| x == pod));
                claim
                    .and_then(|c| c.labels.get(ZONE))
                    .map(String::as_str)
                    .unwrap_or_else(|| panic!("{case}: {pod} has no zonal node: {p:?}"))
            })
            .collect();
        assert!(
            zones
                .iter()
                .all(|z| ["test-zone-1", "test-zone-2"].contains(z)),
            "{case}: {zones:?}"
        );
        assert_ne!(zones[0], zones[1], "{case}");
    }
}
