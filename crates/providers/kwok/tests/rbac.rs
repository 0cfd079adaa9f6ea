//! The Helm chart's RBAC grants exactly what the controller uses: a full run (leader election,
//! provisioning, registration, a drain held by a PDB and ended by terminationGracePeriod,
//! garbage collection) against the fake API server, whose request log is checked against the
//! chart's ClusterRole and Role.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use karpenter_api::{NodeClaim, NodePool};
use karpenter_controller::{Controller, Options};
use karpenter_kwok::KWOKNodeClass;
use karpenter_kwok::KwokProvider;
use karpenter_testkit::{FakeApiServer, Verb, eventually};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);

/// (apiGroup, resource[/subresource], verb) the chart grants.
fn granted() -> BTreeSet<(String, String, String)> {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../charts/karpenter-rs/templates"
    );
    let mut out = BTreeSet::new();
    for file in ["clusterrole.yaml", "role.yaml"] {
        let text = std::fs::read_to_string(format!("{dir}/{file}")).unwrap();
        // Template expressions sit in metadata only; the rules are plain YAML.
        let plain: String = text
            .lines()
            .filter(|l| !l.contains("{{"))
            .map(|l| format!("{l}\n"))
            .collect();
        let docs: Vec<Value> = serde_saphyr::from_multiple(&plain).unwrap();
        for doc in docs
            .iter()
            .filter(|d| d["kind"] == "ClusterRole" || d["kind"] == "Role")
        {
            for rule in doc["rules"].as_array().unwrap() {
                for group in rule["apiGroups"].as_array().unwrap() {
                    for resource in rule["resources"].as_array().unwrap() {
                        for verb in rule["verbs"].as_array().unwrap() {
                            out.insert((
                                group.as_str().unwrap().into(),
                                resource.as_str().unwrap().into(),
                                verb.as_str().unwrap().into(),
                            ));
                        }
                    }
                }
            }
        }
    }
    out
}

fn rbac_verb(v: Verb) -> &'static str {
    match v {
        Verb::Get => "get",
        Verb::List => "list",
        Verb::Watch => "watch",
        Verb::Create | Verb::Evict => "create",
        Verb::Update => "update",
        Verb::Patch => "patch",
        Verb::Delete => "delete",
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chart_grants_exactly_what_the_controller_uses() {
    let server = FakeApiServer::new();
    server
        .install_crds(karpenter_kwok::CRDS.iter().map(|c| c.definition()))
        .unwrap();
    let class: KWOKNodeClass =
        serde_json::from_value(json!({"metadata": {"name": "default"}, "spec": {}})).unwrap();
    server.create(&class).unwrap();
    let pool: NodePool = serde_json::from_value(json!({
        "metadata": {"name": "default"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
            "terminationGracePeriod": "2s",
        }}},
    }))
    .unwrap();
    server.create(&pool).unwrap();
    // A NodeOverlay, with its gate on, so its list and status writes are part of the run.
    server
        .install_crds([karpenter_api::crd::NODE_OVERLAY.definition()])
        .unwrap();
    let overlay: karpenter_api::nodeoverlay::NodeOverlay = serde_json::from_value(json!({
        "metadata": {"name": "discount"},
        "spec": {"requirements": [], "priceAdjustment": "-10%"},
    }))
    .unwrap();
    server.create(&overlay).unwrap();
    // CapacityBuffers naming each kind a buffer may reference (none exists: no headroom is
    // launched, but every list and the status writes are made).
    server
        .install_crds([karpenter_api::crd::CAPACITY_BUFFER.definition()])
        .unwrap();
    for (name, reference) in [
        (
            "template",
            json!({"podTemplateRef": {"name": "missing"}, "replicas": 1}),
        ),
        (
            "deployment",
            json!({"scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "missing"}}),
        ),
        (
            "statefulset",
            json!({"scalableRef": {"apiGroup": "apps", "kind": "StatefulSet", "name": "missing"}}),
        ),
        (
            "replicaset",
            json!({"scalableRef": {"apiGroup": "apps", "kind": "ReplicaSet", "name": "missing"}}),
        ),
    ] {
        let buffer: karpenter_api::capacitybuffer::CapacityBuffer = serde_json::from_value(json!({
            "apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
            "metadata": {"name": name, "namespace": "default"},
            "spec": reference,
        }))
        .unwrap();
        server.create(&buffer).unwrap();
    }
    server.spawn_cluster(Duration::from_millis(50));
    let options = Options {
        batch_idle_duration: Duration::from_millis(100),
        batch_max_duration: Duration::from_millis(1000),
        system_namespace: "karpenter".into(),
        identity: "only".into(),
        min_drain_time: Duration::from_millis(100),
        garbage_collection_interval: Duration::from_millis(300),
        instance_launch_grace: Duration::ZERO,
        resync: Duration::from_millis(200),
        drift_poll: Duration::from_millis(200),
        feature_gates: "NodeOverlay=true,CapacityBuffer=true".parse().unwrap(),
        // Pods' device claims simulated: ResourceClaims, DeviceClasses and ResourceSlices are
        // watched.
        ignore_dra_requests: false,
        // Default topology spread: Services, ReplicaSets, StatefulSets and
        // ReplicationControllers are watched for it.
        scheduler_config: karpenter_controller::options::scheduler_config(
            "podTopologySpread:\n  defaultConstraints:\n  - maxSkew: 1\n    topologyKey: topology.kubernetes.io/zone\n    whenUnsatisfiable: ScheduleAnyway\n",
        )
        .unwrap(),
        ..Options::default()
    };
    let client = server.client();
    let controller = Controller::new(client.clone(), Arc::new(KwokProvider::new(client)), options);
    let stop = CancellationToken::new();
    let task = tokio::spawn(controller.run(stop.clone()));

    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {"terminationGracePeriodSeconds": 1, "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
    }))
    .unwrap();
    server.create(&pod).unwrap();
    eventually(WAIT, || {
        server
            .get::<karpenter_api::nodeoverlay::NodeOverlay>("", "discount")?
            .status
            .filter(|s| !s.conditions.is_empty())
    })
    .await
    .expect("the overlay's conditions are written");
    eventually(WAIT, || {
        server
            .get::<karpenter_api::capacitybuffer::CapacityBuffer>("default", "replicaset")?
            .status
            .filter(|s| !s.conditions.is_empty())
    })
    .await
    .expect("the buffers' conditions are written");
    let claim = eventually(WAIT, || {
        server
            .list::<NodeClaim>()
            .into_iter()
            .find(|c| c.status.as_ref().is_some_and(|s| s.node_name.is_some()))
    })
    .await
    .expect("a registered nodeclaim");
    eventually(WAIT, || {
        server.get::<Pod>("default", "web")?.spec?.node_name
    })
    .await
    .expect("bound");
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "web"}}},
    }))
    .unwrap();
    server.create(&pdb).unwrap();
    let node = claim.status.unwrap().node_name.unwrap();
    server
        .delete::<NodeClaim>("", claim.metadata.name.as_deref().unwrap())
        .unwrap();
    // The PDB refuses the eviction; the grace period then deletes the pod regardless.
    let gone = eventually(WAIT, || {
        server.get::<Node>("", &node).is_none().then_some(())
    })
    .await;
    assert!(
        gone.is_some(),
        "terminationGracePeriod bounds a drain the PDB holds"
    );
    assert!(
        server.count(Verb::Evict, "pods") >= 1,
        "evictions were tried first"
    );
    assert!(
        server.count(Verb::Delete, "pods") >= 1,
        "then the pod was deleted"
    );
    stop.cancel();
    task.await.unwrap();

    let used: BTreeSet<(String, String, String)> = server
        .requests()
        .into_iter()
        .map(|r| {
            let resource = match &r.subresource {
                Some(sub) => format!("{}/{sub}", r.plural),
                None => r.plural.clone(),
            };
            (r.group, resource, rbac_verb(r.verb).to_string())
        })
        .collect();
    let granted = granted();
    let missing: Vec<_> = used.difference(&granted).collect();
    assert!(missing.is_empty(), "the chart does not grant {missing:?}");
    // Grants this run does not reach, each exercised by an end-to-end test in e2e.rs.
    let elsewhere: BTreeSet<(String, String, String)> = [
        ("karpenter.sh", "nodeclaims", "delete"), // expired_nodes_are_drained_and_removed
        ("", "nodes", "get"), // a_restart_in_the_middle_of_a_launch_… (the launch finds its node)
    ]
    .into_iter()
    .map(|(g, r, v)| (g.to_string(), r.to_string(), v.to_string()))
    .collect();
    let unused: Vec<_> = granted
        .difference(&used)
        .filter(|g| !elsewhere.contains(*g))
        .collect();
    assert!(
        unused.is_empty(),
        "the chart grants more than the controller uses: {unused:?}"
    );
}
