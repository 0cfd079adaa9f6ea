//! The controller with the Huawei Cloud provider, end to end: a CCENodeClass is resolved
//! (subnets) and goes Ready; a pending pod becomes a NodeClaim, the NodeClaim a CCE node —
//! past a flavor whose creation fails for stock — registered under the providerID CCE gives
//! it; when the pod goes away the empty node is consolidated and its CCE node deleted. Against
//! the fake API server (its scheduler stand-in and a kubelet stand-in here) and the in-process,
//! signature-checking CCE, ECS, VPC and BSS.

mod support;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use karpenter_api::{NodeClaim, NodePool};
use karpenter_controller::{Context, Controller, Options};
use karpenter_huawei::CCENodeClass;
use karpenter_huawei::provider::{HuaweiCloudProvider, HuaweiOptions, KubeState};
use karpenter_testkit::{FakeApiServer, eventually};
use kube::Api;
use serde_json::json;
use support::{CLUSTER, Mock, REGION, Shared};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(30);

type Provider = HuaweiCloudProvider<KubeState>;

fn setup(server: &FakeApiServer) {
    server
        .install_crds(karpenter_huawei::CRDS.iter().map(|c| c.definition()))
        .unwrap();
    let class: CCENodeClass = serde_json::from_value(support::node_class()).unwrap();
    server.create(&class).unwrap();
    let pool: NodePool = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"},
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.huawei", "kind": "CCENodeClass", "name": "default"},
                "requirements": [
                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                ],
            }},
        },
    }))
    .unwrap();
    server.create(&pool).unwrap();
    server.create(&pending_pod()).unwrap();
}

fn pending_pod() -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"containers": [{"name": "web", "image": "nginx", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
    }))
    .unwrap()
}

struct Running {
    ctx: Arc<Context<Provider>>,
    stop: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Running {
    fn start(server: &FakeApiServer, mock: &Mock) -> Self {
        let mut options = HuaweiOptions::new(CLUSTER, REGION);
        options.job_poll = Duration::from_millis(20);
        let state: KubeState = Api::all(server.client());
        let provider = Arc::new(HuaweiCloudProvider::new(
            support::client(mock),
            state,
            options,
        ));
        let controller = Controller::new(
            server.client(),
            provider,
            Options {
                disable_leader_election: true,
                resync: Duration::from_millis(200),
                batch_idle_duration: Duration::from_millis(100),
                batch_max_duration: Duration::from_millis(500),
                garbage_collection_interval: Duration::from_millis(300),
                disruption_poll: Duration::from_millis(200),
                consolidation_validation: Duration::from_millis(400),
                min_drain_time: Duration::from_millis(100),
                ..Options::default()
            },
        );
        let ctx = controller.context();
        let stop = CancellationToken::new();
        let tasks = vec![
            tokio::spawn(controller.run(stop.clone())),
            tokio::spawn(karpenter_huawei::nodeclass_status::run(
                ctx.clone(),
                stop.clone(),
            )),
            tokio::spawn(karpenter_huawei::unregistered_taint::run(
                ctx.clone(),
                stop.clone(),
            )),
        ];
        Self { ctx, stop, tasks }
    }

    async fn stop(self) {
        self.stop.cancel();
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// What CCE's node install and the kubelet would do, reduced: a CCE node that exists registers
/// a Kubernetes node named after its private address, with the CCE node id as providerID, the
/// labels and taints CCE was asked for.
fn spawn_kubelets(
    server: FakeApiServer,
    cloud: Shared,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut n = 10;
        while !stop.is_cancelled() {
            let nodes: Vec<serde_json::Value> = cloud.lock().unwrap().nodes.clone();
            for claim in server.list::<NodeClaim>() {
                let Some(status) = claim.status.clone() else {
                    continue;
                };
                let Some(provider_id) = status.provider_id.clone() else {
                    continue;
                };
                let Some(cce) = nodes
                    .iter()
                    .find(|v| v["metadata"]["uid"] == provider_id.as_str())
                else {
                    continue;
                };
                if server.list::<Node>().iter().any(|n| {
                    n.spec.as_ref().and_then(|s| s.provider_id.as_deref())
                        == Some(provider_id.as_str())
                }) {
                    continue;
                }
                n += 1;
                let name = format!("192.168.0.{n}");
                let mut labels: serde_json::Map<String, serde_json::Value> = cce["spec"]["k8sTags"]
                    .as_object()
                    .cloned()
                    .unwrap_or_default();
                labels.insert("kubernetes.io/hostname".into(), json!(name));
                labels.insert(
                    "node.kubernetes.io/instance-type".into(),
                    cce["spec"]["flavor"].clone(),
                );
                labels.insert(
                    "topology.kubernetes.io/zone".into(),
                    cce["spec"]["az"].clone(),
                );
                let now = k8s_openapi::jiff::Timestamp::now().to_string();
                let node: Node = serde_json::from_value(json!({
                    "apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": name, "labels": labels},
                    "spec": {"providerID": provider_id, "taints": cce["spec"]["taints"]},
                    "status": {
                        "capacity": status.capacity, "allocatable": status.allocatable,
                        "nodeInfo": {"kubeletVersion": "v1.33.5", "machineID": "", "systemUUID": "", "bootID": "",
                                     "kernelVersion": "", "osImage": "", "containerRuntimeVersion": "",
                                     "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"},
                        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                        "lastHeartbeatTime": now, "lastTransitionTime": now}],
                    },
                }))
                .unwrap();
                let _ = server.create(&node);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
}

fn bound_to(server: &FakeApiServer) -> Option<String> {
    server.get::<Pod>("default", "web")?.spec?.node_name
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_pod_gets_a_cce_node_that_is_removed_when_empty() {
    let mock = Mock::start().await;
    // The cheapest flavor's server cannot be made in its zone: CCE's job fails.
    mock.cloud.lock().unwrap().fail_job.insert(
        ("c7.large.2".into(), "ap-southeast-3a".into()),
        "create ECS failed: the flavor c7.large.2 is sold out in ap-southeast-3a".into(),
    );
    let server = FakeApiServer::new();
    setup(&server);
    let running = Running::start(&server, &mock);
    let scheduler = server.spawn_cluster(Duration::from_millis(100));
    let kubelets = spawn_kubelets(server.clone(), mock.cloud.clone(), running.stop.clone());

    let status = eventually(WAIT, || {
        let s = server.get::<CCENodeClass>("", "default")?.status?;
        s.conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
            .then_some(s)
    })
    .await
    .expect("the CCENodeClass goes Ready");
    let subnets: Vec<&str> = status.subnets.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(
        subnets,
        [support::SUBNET_A, support::SUBNET_B],
        "roomiest first"
    );

    let node_name = eventually(WAIT, || bound_to(&server))
        .await
        .expect("the pod runs on a new node");
    let (created, deleted, nodes) = {
        let c = mock.cloud.lock().unwrap();
        (c.created.clone(), c.deleted.clone(), c.nodes.clone())
    };
    assert_eq!(
        created.len(),
        2,
        "the failed creation, then the next candidate"
    );
    assert_eq!(created[0]["spec"]["flavor"], "c7.large.2");
    assert_eq!(deleted.len(), 1, "the node whose job failed is deleted");
    assert_eq!(nodes.len(), 1);
    let cce = &nodes[0];
    assert_eq!(cce["spec"]["flavor"], "c7.xlarge.2");
    let node = server.get::<Node>("", &node_name).unwrap();
    assert_eq!(
        node.spec.unwrap().provider_id.as_deref(),
        cce["metadata"]["uid"].as_str()
    );
    let claims = server.list::<NodeClaim>();
    assert_eq!(claims.len(), 1);
    let claim = &claims[0];
    assert_eq!(
        cce["spec"]["k8sTags"]["karpenter.k8s.huawei/nodeclaim-uid"],
        claim.metadata.uid.clone().unwrap()
    );
    assert_eq!(
        claim.metadata.annotations.as_ref().unwrap()["karpenter.k8s.huawei/ecs-server-id"],
        cce["status"]["serverId"].as_str().unwrap()
    );
    assert!(running.ctx.provider.unavailable().is_unavailable(
        "c7.large.2",
        "ap-southeast-3a",
        "on-demand",
        std::time::Instant::now()
    ));

    // The workload goes away: the empty node is consolidated and its CCE node deleted.
    server.delete::<Pod>("default", "web").unwrap();
    eventually(WAIT, || server.list::<NodeClaim>().is_empty().then_some(()))
        .await
        .expect("the empty node's claim is removed");
    let cce_uid = cce["metadata"]["uid"].as_str().unwrap().to_string();
    eventually(WAIT, || {
        mock.cloud
            .lock()
            .unwrap()
            .deleted
            .contains(&cce_uid)
            .then_some(())
    })
    .await
    .expect("its CCE node is deleted");
    assert!(mock.cloud.lock().unwrap().nodes.is_empty());

    running.stop().await;
    scheduler.abort();
    let _ = kubelets.await;
}
