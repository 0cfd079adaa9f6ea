//! The controller with the Cluster API provider, end to end: a ClusterAPINodeClass goes Ready
//! on the MachineDeployments it selects; pending pods become a NodeClaim, the NodeClaim a
//! Machine of the cheapest MachineDeployment that fits (scaled up, claimed), registered as the
//! Node its providerID names; when the pods shrink, consolidation replaces it with a Machine of
//! a cheaper MachineDeployment and scales the old one down; an empty node is removed; a changed
//! template drifts the node and it is replaced. Against two fake API servers (the management
//! cluster with Cluster API's CRDs, the workload cluster), the test kit's scheduler, and
//! stand-ins for Cluster API's MachineSet controller and the kubelets.

mod support;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use karpenter_api::{NodeClaim, NodePool};
use karpenter_clusterapi::ClusterAPINodeClass;
use karpenter_clusterapi::capi;
use karpenter_clusterapi::provider::{ClusterApiCloudProvider, KubeState};
use karpenter_controller::{Context, Controller, Options};
use karpenter_testkit::{FakeApiServer, Verb, eventually};
use serde_json::{Value, json};
use support::{Clusters, Made, ProviderIds, machine_deployment};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(30);

type Provider = ClusterApiCloudProvider<KubeState>;

fn options() -> Options {
    Options {
        disable_leader_election: true,
        resync: Duration::from_millis(200),
        batch_idle_duration: Duration::from_millis(100),
        batch_max_duration: Duration::from_millis(500),
        garbage_collection_interval: Duration::from_millis(300),
        instance_launch_grace: Duration::ZERO,
        disruption_poll: Duration::from_millis(200),
        drift_poll: Duration::from_millis(200),
        provider_drift_check: Duration::from_millis(200),
        consolidation_validation: Duration::from_millis(400),
        min_drain_time: Duration::from_millis(100),
        ..Options::default()
    }
}

struct Running {
    ctx: Arc<Context<Provider>>,
    made: Arc<Mutex<Made>>,
    stop: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// The scheduler stand-in, which runs until aborted.
    scheduler: tokio::task::JoinHandle<()>,
}

impl Running {
    async fn stop(self) {
        self.stop.cancel();
        for task in self.tasks {
            let _ = task.await;
        }
        self.scheduler.abort();
    }
}

/// `small` (2 CPUs, 0.10/h) and `large` (8 CPUs, 0.40/h) in one zone, a NodeClass selecting
/// this cluster's MachineDeployments (no status yet), a NodePool with `disruption`.
async fn setup(disruption: Value) -> Clusters {
    let c = Clusters::new(&["v1beta1", "v1beta2"]);
    let v = c.version;
    c.create_machine_deployment(machine_deployment(
        v,
        "small",
        ("small", "zone-a"),
        ("2", "4Gi"),
        "0.10",
        json!({}),
    ))
    .await;
    c.create_machine_deployment(machine_deployment(
        v,
        "large",
        ("large", "zone-a"),
        ("8", "32Gi"),
        "0.40",
        json!({}),
    ))
    .await;
    let class: ClusterAPINodeClass = serde_json::from_value(json!({
        "apiVersion": "karpenter.cluster.x-k8s.io/v1alpha1", "kind": "ClusterAPINodeClass",
        "metadata": {"name": "default"},
        "spec": {"scalableResourceSelector": {"matchLabels": {"cluster.x-k8s.io/cluster-name": "workload"}}},
    }))
    .unwrap();
    c.workload.create(&class).unwrap();
    let pool: NodePool = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {
            "disruption": disruption,
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.cluster.x-k8s.io", "kind": "ClusterAPINodeClass", "name": "default"},
                "requirements": [
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                ],
            }},
        },
    }))
    .unwrap();
    c.workload.create(&pool).unwrap();
    c
}

fn start(c: &Clusters) -> Running {
    let controller = Controller::new(c.workload.client(), c.provider(), options());
    let ctx = controller.context();
    let stop = CancellationToken::new();
    let (made, sets) = support::spawn_machine_sets(c, ProviderIds::NextPass, stop.clone());
    let tasks = vec![
        tokio::spawn(controller.run(stop.clone())),
        tokio::spawn(karpenter_clusterapi::nodeclass_status::run(
            ctx.clone(),
            stop.clone(),
        )),
        sets,
        support::spawn_kubelets(c, stop.clone()),
    ];
    Running {
        ctx,
        made,
        stop,
        tasks,
        scheduler: c.workload.spawn_cluster(Duration::from_millis(50)),
    }
}

fn pod(name: &str, cpu: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "app", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]},
    }))
    .unwrap()
}

fn bound(c: &Clusters) -> usize {
    c.workload
        .list::<Pod>()
        .iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
        .count()
}

fn ready_claims(c: &Clusters) -> Vec<NodeClaim> {
    c.workload
        .list::<NodeClaim>()
        .into_iter()
        .filter(|c| {
            c.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            })
        })
        .collect()
}

fn instance_type(claim: &NodeClaim) -> String {
    claim.metadata.labels.as_ref().unwrap()["node.kubernetes.io/instance-type"].clone()
}

fn events(c: &Clusters, reason: &str) -> Vec<Event> {
    c.workload
        .list::<Event>()
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .collect()
}

/// (apiGroup, resource[/subresource], verb) the chart's clusterapi ClusterRole grants.
fn granted() -> BTreeSet<(String, String, String)> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../charts/karpenter-rs/templates/clusterrole-clusterapi.yaml"
    );
    let text = std::fs::read_to_string(path).unwrap();
    // Template expressions sit in metadata and around the management rules; the rules are YAML.
    let plain: String = text
        .lines()
        .filter(|l| !l.contains("{{"))
        .map(|l| format!("{l}\n"))
        .collect();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&plain).unwrap();
    let mut out = BTreeSet::new();
    for doc in docs.iter().filter(|d| d["kind"] == "ClusterRole") {
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
    out
}

/// Every request the provider made of Cluster API objects (management) and of its NodeClasses
/// (workload) is one the chart grants, so a least-privilege install works.
fn assert_chart_grants(c: &Clusters) {
    let granted = granted();
    let mut missing = BTreeSet::new();
    let mut used = BTreeSet::new();
    // The provider's requests to the management cluster (not the stand-ins'), and every request
    // for ClusterAPINodeClasses in the workload cluster (only the controller makes them).
    for (server, group, sender) in [
        (&c.management, "cluster.x-k8s.io", Some("provider")),
        (&c.workload, "karpenter.cluster.x-k8s.io", None),
    ] {
        let server: &FakeApiServer = server;
        for r in server.requests() {
            if r.group != group || sender.is_some_and(|s| r.client.as_deref() != Some(s)) {
                continue;
            }
            let resource = match &r.subresource {
                Some(sub) => format!("{}/{sub}", r.plural),
                None => r.plural.clone(),
            };
            let verb = match r.verb {
                Verb::Get => "get",
                Verb::List => "list",
                Verb::Watch => "watch",
                Verb::Create => "create",
                Verb::Update => "update",
                Verb::Patch => "patch",
                Verb::Delete => "delete",
                Verb::Evict => "create",
            };
            let key = (r.group.clone(), resource, verb.to_string());
            if !granted.contains(&key) {
                missing.insert(key.clone());
            }
            used.insert(key);
        }
    }
    assert!(missing.is_empty(), "the chart does not grant {missing:?}");
    let scaled = (
        "cluster.x-k8s.io".to_string(),
        "machinedeployments/scale".to_string(),
        "update".to_string(),
    );
    assert!(
        used.contains(&scaled),
        "the provider's requests were seen: {used:?}"
    );
}

async fn class_ready(c: &Clusters) {
    eventually(WAIT, || {
        let s = c
            .workload
            .get::<ClusterAPINodeClass>("", "default")?
            .status?;
        s.conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
            .then_some(())
    })
    .await
    .expect("the ClusterAPINodeClass goes Ready");
}

/// Waits until the MachineDeployments have these replicas.
async fn replicas(c: &Clusters, small: i32, large: i32) {
    let mut last = (0, 0);
    for _ in 0..(WAIT.as_millis() / 50) {
        last = (c.replicas("small").await, c.replicas("large").await);
        if last == (small, large) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("replicas (small, large) are {last:?}, want ({small}, {large})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_get_machines_that_consolidate_into_a_cheaper_machine_deployment_and_go() {
    let c =
        setup(json!({"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}))
            .await;
    let running = start(&c);
    class_ready(&c).await;

    // Three 1.5-CPU pods: only `large` holds them together.
    for i in 0..3 {
        c.workload.create(&pod(&format!("p{i}"), "1500m")).unwrap();
    }
    eventually(WAIT, || (bound(&c) == 3).then_some(()))
        .await
        .expect("the pods run");
    let claims = c.workload.list::<NodeClaim>();
    assert_eq!(claims.len(), 1);
    let big = claims[0].clone();
    assert_eq!(instance_type(&big), "large");
    replicas(&c, 0, 1).await;
    let machines = c.machines().await;
    assert_eq!(machines.len(), 1);
    let machine = &machines[0];
    assert_eq!(machine.node_claim(), big.metadata.name.as_deref());
    let provider_id = big.status.clone().unwrap().provider_id.unwrap();
    assert_eq!(machine.provider_id(), Some(provider_id.as_str()));
    assert_eq!(
        big.metadata.annotations.as_ref().unwrap()[capi::MACHINE_ANNOTATION],
        machine.key()
    );
    let node = c.workload.list::<Node>().remove(0);
    assert_eq!(
        node.spec.unwrap().provider_id.as_deref(),
        Some(provider_id.as_str())
    );
    eventually(WAIT, || (ready_claims(&c).len() == 1).then_some(()))
        .await
        .expect("initialized");

    // Two pods go: one 1.5-CPU pod fits `small`, at a quarter of the price.
    c.workload.delete::<Pod>("default", "p1").unwrap();
    c.workload.delete::<Pod>("default", "p2").unwrap();
    let big_name = big.metadata.name.clone().unwrap();
    eventually(WAIT, || {
        c.workload
            .get::<NodeClaim>("", &big_name)
            .is_none()
            .then_some(())
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "the large node was consolidated; events: {:?}",
            c.workload
                .list::<Event>()
                .iter()
                .map(|e| (e.reason.clone(), e.message.clone()))
                .collect::<Vec<_>>()
        )
    });
    assert_eq!(
        events(&c, "DisruptionLaunching")[0].message.as_deref(),
        Some("Launching NodeClaim: Underutilized")
    );
    let created = running.made.lock().unwrap().created.clone();
    assert!(
        created.iter().any(|m| m.starts_with("small-")),
        "the replacement is a Machine of the cheaper MachineDeployment: {created:?}"
    );
    eventually(WAIT, || {
        running
            .made
            .lock()
            .unwrap()
            .deleted
            .contains(&machine.name().to_string())
            .then_some(())
    })
    .await
    .expect("the large Machine is deleted");

    // The evicted pod was a bare pod: nothing replaces it, the small node is empty and goes.
    eventually(WAIT, || {
        c.workload.list::<NodeClaim>().is_empty().then_some(())
    })
    .await
    .expect("every node removed");
    replicas(&c, 0, 0).await;
    let mut left = c.machines().await;
    for _ in 0..(WAIT.as_millis() / 50) {
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        left = c.machines().await;
    }
    assert!(left.is_empty(), "no Machine is left: {left:?}");
    // Deletions ended in NotFound (the Machine gone), never in another error.
    let metrics = running.ctx.metrics.encode();
    assert!(
        !metrics.contains("method=\"delete\",provider=\"clusterapi\",error=\"\""),
        "{metrics}"
    );
    running.stop().await;
    assert_chart_grants(&c);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_template_drifts_the_node_and_replaces_it() {
    // Only drift may move the node.
    let c = setup(json!({"consolidateAfter": "Never"})).await;
    let running = start(&c);
    class_ready(&c).await;
    c.workload.create(&pod("web", "1")).unwrap();
    let claim = eventually(WAIT, || ready_claims(&c).into_iter().next())
        .await
        .expect("initialized");
    assert_eq!(instance_type(&claim), "small");
    let old = claim.metadata.name.clone().unwrap();

    // A new Kubernetes version for the MachineDeployment's Machines.
    c.patch_machine_deployment(
        "small",
        json!({"spec": {"template": {"spec": {"version": "v1.34.1"}}}}),
    )
    .await;
    let fresh = eventually(WAIT, || {
        let fresh = ready_claims(&c)
            .into_iter()
            .find(|c| c.metadata.name.as_deref() != Some(old.as_str()))?;
        c.workload
            .get::<NodeClaim>("", &old)
            .is_none()
            .then_some(fresh)
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "{old} replaced; claims: {:?}",
            c.workload
                .list::<NodeClaim>()
                .iter()
                .map(|c| (
                    c.metadata.name.clone(),
                    c.status.clone().map(|s| s.conditions)
                ))
                .collect::<Vec<_>>()
        )
    });
    let metrics = running.ctx.metrics.encode();
    assert!(
        metrics.contains("karpenter_nodeclaims_drifted_total{nodepool=\"default\",type=\"MachineDeploymentDrift\"} 1"),
        "{metrics}"
    );
    let md = c.machine_deployment("small").await;
    assert_eq!(
        fresh.metadata.annotations.as_ref().unwrap()[capi::TEMPLATE_HASH_ANNOTATION],
        md.template_hash(),
        "the replacement is a Machine of the new template"
    );
    replicas(&c, 1, 0).await;
    running.stop().await;
    assert_chart_grants(&c);
}
