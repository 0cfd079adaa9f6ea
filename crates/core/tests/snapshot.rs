//! The snapshot builder: which nodes pending pods may go to, which pods need a node, and how
//! disruption sees every node — the one path the controller, the simulator and `plan` share.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Node, Pod};
use karpenter_api::NodeClaim;
use karpenter_core::state::{Observed, Snapshot};
use serde_json::{Value, json};

fn node(name: &str, extra: Value) -> Node {
    let mut v = json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name},
            "creationTimestamp": "2025-01-01T00:00:00Z"},
        "spec": {"providerID": format!("kwok://{name}")},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}]},
    });
    merge(&mut v, extra);
    serde_json::from_value(v).unwrap()
}

fn managed(name: &str, extra: Value) -> Node {
    let mut labels = json!({"metadata": {"labels": {"karpenter.sh/nodepool": "default",
        "karpenter.sh/initialized": "true", "node.kubernetes.io/instance-type": "c-4x-amd64-linux",
        "topology.kubernetes.io/zone": "test-zone-a", "karpenter.sh/capacity-type": "on-demand"}}});
    merge(&mut labels, extra);
    node(name, labels)
}

fn claim(name: &str, provider_id: Option<&str>, extra: Value) -> NodeClaim {
    let mut v = json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default"},
            "creationTimestamp": "2025-01-01T00:00:00Z"},
        "spec": {"nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
            "requirements": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test-zone-b"]},
                {"key": "example.com/team", "operator": "In", "values": ["a", "b"]}],
            "startupTaints": [{"key": "example.com/booting", "effect": "NoSchedule"}]},
        "status": {"providerID": provider_id,
            "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"},
            "capacity": {"cpu": "2", "memory": "4Gi", "pods": "110"}},
    });
    merge(&mut v, extra);
    serde_json::from_value(v).unwrap()
}

fn pod(name: &str, node: Option<&str>, extra: Value) -> Pod {
    let mut v = json!({
        "metadata": {"name": name, "namespace": "ns", "uid": name,
            "creationTimestamp": "2025-01-01T00:10:00Z"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": if node.is_some() {
            json!({"phase": "Running"})
        } else {
            json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]})
        },
    });
    merge(&mut v, extra);
    serde_json::from_value(v).unwrap()
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

fn names<'a>(pods: impl IntoIterator<Item = &'a &'a Pod>) -> Vec<&'a str> {
    pods.into_iter()
        .map(|p| p.metadata.name.as_deref().unwrap())
        .collect()
}

fn observed<'a>(nodes: &'a [Node], claims: &'a [NodeClaim], pods: &'a [Pod]) -> Observed<'a, Pod> {
    Observed {
        nodes: nodes.iter().collect(),
        node_claims: claims.iter().collect(),
        pods: pods.iter().collect(),
        daemonsets: Vec::new(),
        pdbs: Vec::new(),
        namespaces: Vec::new(),
        volume_claims: Vec::new(),
        volumes: Vec::new(),
        storage_classes: Vec::new(),
        csi_nodes: Vec::new(),
        services: Vec::new(),
        pod_controllers: Vec::new(),
        node_pools: &[],
        provider_labels: &[],
        nominated: BTreeSet::new(),
        devices: Default::default(),
        marked_for_deletion: BTreeSet::new(),
    }
}

#[test]
fn pending_pods_oldest_first_and_the_pods_kube_scheduler_has_not_tried_are_ignored() {
    let pods = [
        pod(
            "new",
            None,
            json!({"metadata": {"creationTimestamp": "2025-01-01T00:20:00Z"}}),
        ),
        pod(
            "old",
            None,
            json!({"metadata": {"creationTimestamp": "2025-01-01T00:05:00Z"}}),
        ),
        pod("untried", None, json!({"status": {"conditions": []}})),
        pod(
            "preempting",
            None,
            json!({"status": {"nominatedNodeName": "n1"}}),
        ),
        pod(
            "done",
            Some("n1"),
            json!({"status": {"phase": "Succeeded"}}),
        ),
        pod("running", Some("n1"), json!({})),
    ];
    let nodes = [node("n1", json!({}))];
    let snapshot = Snapshot::new(observed(&nodes, &[], &pods));
    assert_eq!(names(&snapshot.provisionable), ["old", "new"]);
    assert_eq!(snapshot.ignored, 2, "untried and preempting");
    assert_eq!(
        names(&snapshot.nodes[0].pods),
        ["running"],
        "finished pods take no room"
    );
}

#[test]
fn nodes_being_deleted_are_no_place_for_pods_and_their_pods_need_one() {
    let nodes = [
        managed(
            "deleting",
            json!({"metadata": {"deletionTimestamp": "2025-01-01T01:00:00Z", "finalizers": ["karpenter.sh/termination"]}}),
        ),
        managed("marked", json!({})),
        managed("kept", json!({})),
        managed("claim-deleting", json!({})),
    ];
    let claims = [claim(
        "c1",
        Some("kwok://claim-deleting"),
        json!({"metadata": {"deletionTimestamp": "2025-01-01T01:00:00Z", "finalizers": ["karpenter.sh/termination"]}}),
    )];
    let ds = json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "d"}]}});
    let sts = |extra: Value| {
        let mut v = json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "s", "uid": "s"}]}});
        merge(&mut v, extra);
        v
    };
    let pods = [
        pod("a", Some("deleting"), json!({})),
        pod("a-ds", Some("deleting"), ds.clone()),
        pod("b", Some("marked"), json!({})),
        pod("c", Some("claim-deleting"), json!({})),
        pod(
            "c-terminating",
            Some("claim-deleting"),
            json!({"metadata": {"deletionTimestamp": "2025-01-01T01:00:00Z"}}),
        ),
        pod(
            "c-sts-terminating",
            Some("claim-deleting"),
            sts(json!({"metadata": {"deletionTimestamp": "2025-01-01T01:00:00Z"}})),
        ),
        pod("d", Some("kept"), json!({})),
    ];
    let mut o = observed(&nodes, &claims, &pods);
    o.marked_for_deletion = BTreeSet::from(["marked".to_string()]);
    let snapshot = Snapshot::new(o);
    let existing: Vec<String> = snapshot
        .existing_nodes()
        .into_iter()
        .map(|n| n.name)
        .collect();
    assert_eq!(existing, ["kept"]);
    let mut displaced = names(&snapshot.displaced);
    displaced.sort();
    assert_eq!(displaced, ["a", "b", "c", "c-sts-terminating"]);
    let states = snapshot.node_states(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    let deleting: Vec<&str> = states
        .iter()
        .filter(|n| n.deleting)
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(deleting, ["claim-deleting", "deleting", "marked"]);
    let disruption = snapshot.disruption(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    assert_eq!(
        disruption.pending_pods.len(),
        4,
        "displaced pods must still fit after a move"
    );
}

#[test]
fn launched_claims_without_a_node_are_places_for_pods_and_unlaunched_ones_hold_provisioning() {
    let claims = [
        claim("launching", Some("kwok://launching"), json!({})),
        claim("unlaunched", None, json!({})),
        claim(
            "registered",
            Some("kwok://n1"),
            json!({"status": {"nodeName": "n1",
            "conditions": [{"type": "Drifted", "status": "True", "reason": "NodePoolDrifted", "message": "", "lastTransitionTime": "2025-01-01T00:00:00Z"}]}}),
        ),
    ];
    let nodes = [managed("n1", json!({}))];
    let snapshot = Snapshot::new(observed(&nodes, &claims, &[]));
    assert_eq!(
        snapshot
            .not_launched
            .iter()
            .map(|c| c.metadata.name.as_deref().unwrap())
            .collect::<Vec<_>>(),
        ["unlaunched"]
    );
    let existing = snapshot.existing_nodes();
    let launching = existing.iter().find(|n| n.name == "launching").unwrap();
    assert!(!launching.initialized);
    assert_eq!(launching.allocatable.cpu, 2000);
    assert_eq!(launching.startup_taints.len(), 1);
    assert_eq!(
        launching.labels["topology.kubernetes.io/zone"],
        "test-zone-b"
    );
    assert_eq!(
        launching.labels["example.com/team"], "a",
        "a custom key gets a value it can choose"
    );
    assert_eq!(launching.labels["kubernetes.io/hostname"], "launching");
    let registered = existing.iter().find(|n| n.name == "n1").unwrap();
    assert!(registered.initialized);
    assert_eq!(
        registered.startup_taints.len(),
        1,
        "the claim's startup taints go with its node"
    );
    let states = snapshot.node_states(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    let n1 = states.iter().find(|n| n.name == "n1").unwrap();
    assert!(
        n1.drifted,
        "the claim's Drifted condition reaches disruption"
    );
    let launching = states.iter().find(|n| n.name == "launching").unwrap();
    assert!(!launching.initialized && !launching.ready);
}

#[test]
fn disruption_sees_prices_nominations_and_the_last_pod_event() {
    use karpenter_core::provisioning::scheduling::NodePoolInput;
    let pool: karpenter_api::NodePool = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}, "requirements": []}}}
    }))
    .unwrap();
    let pools = [NodePoolInput {
        node_pool: pool,
        instance_types: karpenter_core::instancetype::fake::instance_types(8)
            .into_iter()
            .map(std::sync::Arc::new)
            .collect(),
    }];
    let it = &pools[0].instance_types[0];
    let offering = &it.offerings[0];
    let nodes = [
        managed(
            "n1",
            json!({"metadata": {"labels": {"node.kubernetes.io/instance-type": it.name,
            "topology.kubernetes.io/zone": offering.zone, "karpenter.sh/capacity-type": offering.capacity_type}}}),
        ),
        node(
            "unmanaged",
            json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
        ),
    ];
    let claims = [claim(
        "c1",
        Some("kwok://n1"),
        json!({"status": {"lastPodEventTime": "2025-01-01T00:30:00Z"}}),
    )];
    let pods = [
        pod(
            "p",
            Some("n1"),
            json!({"status": {"startTime": "2025-01-01T00:40:00Z"}}),
        ),
        pod(
            "ds",
            Some("n1"),
            json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "d"}]}, "status": {"startTime": "2025-01-01T00:50:00Z"}}),
        ),
    ];
    let mut o = observed(&nodes, &claims, &pods);
    o.node_pools = &pools;
    o.nominated = BTreeSet::from(["n1".to_string()]);
    let states = Snapshot::new(o).node_states(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    let n1 = states.iter().find(|n| n.name == "n1").unwrap();
    assert_eq!(n1.price, offering.price);
    assert!(n1.nominated);
    // Provisioning nominated the claim while it launched; its node has another name.
    let mut o = observed(&nodes, &claims, &pods);
    o.node_pools = &pools;
    o.nominated = BTreeSet::from(["c1".to_string()]);
    let states = Snapshot::new(o).node_states(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
    assert!(
        states.iter().find(|n| n.name == "n1").unwrap().nominated,
        "the nomination of claim c1 holds for its node n1"
    );
    let t = |s: &str| s.parse::<k8s_openapi::jiff::Timestamp>().unwrap();
    assert_eq!(n1.created_at, t("2025-01-01T00:00:00Z"));
    assert_eq!(
        n1.last_pod_event,
        t("2025-01-01T00:40:00Z"),
        "the newest pod but not a DaemonSet's"
    );
    let unmanaged = states.iter().find(|n| n.name == "unmanaged").unwrap();
    assert!(
        unmanaged.initialized && !unmanaged.ready && unmanaged.node_pool.is_none(),
        "nodes karpenter does not manage count as initialized, as upstream"
    );
}

/// Upstream's CSI volume limits: the CSINode says how many volumes of a driver the node can
/// attach; a claim already attached there counts once, and a pod that would go past the limit
/// gets a new node instead.
#[test]
fn csi_volume_limits_count_per_node() {
    use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
    use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
    use karpenter_core::instancetype::fake;
    use karpenter_core::provisioning::scheduling::{NodePoolInput, Scheduler, SchedulerOptions};
    use std::sync::Arc;

    let with_claim = |claim: &str| {
        json!({"spec": {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}})
    };
    let claims: Vec<PersistentVolumeClaim> = ["data-0", "data-1", "data-2", "shared"]
        .iter()
        .map(|name| {
            let spec = if *name == "data-0" {
                json!({"volumeName": "pv-0"})
            } else {
                json!({"storageClassName": "gp3"})
            };
            serde_json::from_value(
                json!({"metadata": {"name": name, "namespace": "ns"}, "spec": spec}),
            )
            .unwrap()
        })
        .collect();
    let pv: PersistentVolume = serde_json::from_value(json!({"metadata": {"name": "pv-0"},
        "spec": {"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-0"}}}))
    .unwrap();
    let class: StorageClass = serde_json::from_value(json!({"metadata": {"name": "gp3"},
        "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer"}))
    .unwrap();
    let csi_node: CSINode = serde_json::from_value(json!({"metadata": {"name": "n1"},
        "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": "i-1", "allocatable": {"count": 2}}]}}))
    .unwrap();
    let nodes = [node("n1", json!({}))];
    let scheduled = |pending: &[(&str, &str)]| {
        let mut pods = vec![pod("db-0", Some("n1"), with_claim("data-0"))];
        pods.extend(
            pending
                .iter()
                .map(|(name, claim)| pod(name, None, with_claim(claim))),
        );
        let snapshot = Snapshot::new(Observed {
            volume_claims: claims.iter().collect(),
            volumes: vec![&pv],
            storage_classes: vec![&class],
            csi_nodes: vec![&csi_node],
            services: Vec::new(),
            pod_controllers: Vec::new(),
            ..observed(&nodes, &[], &pods)
        });
        let mut pool = karpenter_api::NodePool::default();
        pool.metadata.name = Some("default".into());
        let pools = [NodePoolInput {
            node_pool: pool,
            instance_types: fake::instance_types(4).into_iter().map(Arc::new).collect(),
        }];
        let options = snapshot.scheduler_options(&SchedulerOptions {
            provider_labels: fake::provider_labels(),
            ..Default::default()
        });
        let batch: Vec<Pod> = snapshot
            .pods_to_schedule(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
            .into_iter()
            .cloned()
            .collect();
        let results = Scheduler::new(&pools, &snapshot.existing_nodes(), &[], options)
            .solve(&batch, &|| false);
        let on_n1: Vec<&str> = results
            .existing_nodes
            .get("n1")
            .into_iter()
            .flatten()
            .map(|&i| batch[i].metadata.name.as_deref().unwrap())
            .collect();
        (on_n1.join(","), results.new_node_claims.len())
    };
    assert_eq!(
        scheduled(&[("db-1", "data-1"), ("db-2", "data-2")]),
        ("db-1".to_string(), 1),
        "n1 attaches data-0 and one more: the third volume goes to a new node"
    );
    assert_eq!(
        scheduled(&[("a", "shared"), ("b", "shared")]),
        ("a,b".to_string(), 0),
        "two pods of one claim attach it once"
    );
}

/// Upstream's `getDaemonSetPods`: a DaemonSet's overhead on a new node is what its newest pod
/// asks for (a webhook or a vertical autoscaler may have changed it), without the DaemonSet
/// controller's pin to that pod's node; with no pod yet, what its template asks for.
#[test]
fn daemonset_overhead_comes_from_its_newest_pod() {
    let ds: k8s_openapi::api::apps::v1::DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": "agent", "namespace": "ns", "uid": "agent-uid"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {
            "metadata": {"labels": {"app": "agent"}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}}},
    }))
    .unwrap();
    let ds_pod = |name: &str, node: &str, cpu: &str, created: &str| {
        pod(
            name,
            Some(node),
            json!({"metadata": {"creationTimestamp": created, "labels": {"app": "agent"},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "agent-uid"}]},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}}}),
        )
    };
    let nodes = [node("n1", json!({})), node("n2", json!({}))];
    let cpu_of = |pods: &[Pod]| -> (i64, bool) {
        let mut observed = observed(&nodes, &[], pods);
        observed.daemonsets = vec![&ds];
        let overhead = Snapshot::new(observed).daemonset_pods();
        assert_eq!(overhead.len(), 1);
        let p = &overhead[0];
        let pinned = p
            .spec
            .as_ref()
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.node_affinity.as_ref())
            .is_some();
        (
            karpenter_core::resources::pod_requests(p).unwrap().cpu,
            pinned,
        )
    };
    assert_eq!(cpu_of(&[]), (100, false), "the template");
    let pods = [
        ds_pod("agent-old", "n1", "300m", "2025-01-01T00:00:00Z"),
        ds_pod("agent-new", "n2", "500m", "2025-01-01T01:00:00Z"),
    ];
    assert_eq!(cpu_of(&pods), (500, false), "the newest pod, unpinned");
}
