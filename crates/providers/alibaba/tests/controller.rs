//! The controller with the Alibaba Cloud provider, end to end: an ECSNodeClass is resolved
//! (vSwitches, security groups, ACK's images) and goes Ready; a pending pod becomes a
//! NodeClaim, the NodeClaim an ECS instance launched through an auto-provisioning group with
//! ACK's bootstrap and the providerID ACK registers; a spot node ACK marks `InstanceExpired` is
//! replaced and its instance released. Against the fake API server (its scheduler stand-in and
//! a kubelet stand-in here) and the in-process, signature-checking ECS, VPC and ACK.

mod support;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use karpenter_alibaba::ECSNodeClass;
use karpenter_alibaba::cluster::{Cluster, ClusterType};
use karpenter_alibaba::provider::{AlibabaCloudProvider, KubeState};
use karpenter_api::{NodeClaim, NodePool};
use karpenter_controller::{Context, Controller, Options};
use karpenter_testkit::{FakeApiServer, eventually};
use kube::Api;
use serde_json::json;
use support::Mock;
use support::ecs::{self, AK, CLUSTER, REGION, SECRET, Shared};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(30);

type Provider = AlibabaCloudProvider<KubeState>;

fn setup(server: &FakeApiServer) {
    server
        .install_crds(karpenter_alibaba::CRDS.iter().map(|c| c.definition()))
        .unwrap();
    let class: ECSNodeClass = serde_json::from_value(ecs::node_class()).unwrap();
    server.create(&class).unwrap();
    let pool: NodePool = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.alibabacloud", "kind": "ECSNodeClass", "name": "default"},
            "requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["ecs.g7.large"]},
            ],
        }}},
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
        let client = mock.client(AK, SECRET);
        let cluster = Cluster::new(ClusterType::AckManaged, client.clone(), CLUSTER, REGION);
        let state: KubeState = Api::all(server.client());
        let provider = Arc::new(AlibabaCloudProvider::new(
            client,
            support::http(),
            cluster,
            state,
            ecs::options(),
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
                ..Options::default()
            },
        );
        let ctx = controller.context();
        let stop = CancellationToken::new();
        let tasks = vec![
            tokio::spawn(controller.run(stop.clone())),
            tokio::spawn(karpenter_alibaba::nodeclass_status::run(
                ctx.clone(),
                stop.clone(),
            )),
            tokio::spawn(karpenter_alibaba::interruption::run(
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

/// What ACK's node agent, the kubelets and a ReplicaSet would do, reduced: an instance that
/// exists registers its node (Ready, named `<region>.<instance-id>` as ACK names nodes), and
/// the `web` pod is recreated, pending, whenever it is gone.
fn spawn_kubelets(
    server: FakeApiServer,
    cloud: Shared,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while !stop.is_cancelled() {
            let ids: Vec<String> = cloud
                .lock()
                .unwrap()
                .instances
                .iter()
                .map(|i| format!("{REGION}.{}", i.id))
                .collect();
            for claim in server.list::<NodeClaim>() {
                let Some(status) = claim.status.clone() else {
                    continue;
                };
                let Some(provider_id) = status.provider_id.clone() else {
                    continue;
                };
                if !ids.contains(&provider_id) || server.get::<Node>("", &provider_id).is_some() {
                    continue;
                }
                let mut labels = claim.metadata.labels.clone().unwrap_or_default();
                labels.insert("kubernetes.io/hostname".into(), provider_id.clone());
                let now = k8s_openapi::jiff::Timestamp::now().to_string();
                let node: Node = serde_json::from_value(json!({
                    "apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": provider_id, "labels": labels},
                    "spec": {"providerID": provider_id,
                             "taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]},
                    "status": {
                        "capacity": status.capacity, "allocatable": status.allocatable,
                        "nodeInfo": {"kubeletVersion": "v1.33.2", "machineID": "", "systemUUID": "", "bootID": "",
                                     "kernelVersion": "", "osImage": "", "containerRuntimeVersion": "",
                                     "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"},
                        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                        "lastHeartbeatTime": now, "lastTransitionTime": now}],
                    },
                }))
                .unwrap();
                let _ = server.create(&node);
            }
            if server.get::<Pod>("default", "web").is_none() {
                let _ = server.create(&pending_pod());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
}

fn bound_to(server: &FakeApiServer) -> Option<String> {
    server.get::<Pod>("default", "web")?.spec?.node_name
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_pod_gets_a_spot_instance_that_is_replaced_when_reclaimed() {
    let mock = Mock::start().await;
    let cloud = ecs::install(&mock);
    let server = FakeApiServer::new();
    setup(&server);
    let running = Running::start(&server, &mock);
    let scheduler = server.spawn_cluster(Duration::from_millis(100));
    let kubelets = spawn_kubelets(server.clone(), cloud.clone(), running.stop.clone());

    // The status loop resolves the class.
    let status = eventually(WAIT, || {
        let s = server.get::<ECSNodeClass>("", "default")?.status?;
        s.conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
            .then_some(s)
    })
    .await
    .expect("the ECSNodeClass goes Ready");
    assert_eq!(status.v_switches.len(), 2);
    assert_eq!(status.security_groups[0].id, "sg-1");
    assert!(!status.images.is_empty());

    let first = eventually(WAIT, || bound_to(&server))
        .await
        .expect("the pod runs on a new node");
    let instance = cloud.lock().unwrap().instances[0].clone();
    assert_eq!(first, format!("{REGION}.{}", instance.id));
    assert!(instance.spot, "spot costs no more than on-demand here");
    assert_eq!(instance.instance_type, "ecs.g7.large");
    let claims = server.list::<NodeClaim>();
    assert_eq!(claims.len(), 1);
    assert_eq!(
        instance.tags["karpenter.sh/nodeclaim"],
        claims[0].metadata.name.clone().unwrap()
    );

    // ACK's node problem detector: the spot instance is about to be reclaimed.
    server
        .merge::<Node>(
            "",
            &first,
            json!({"status": {"conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady"},
                {"type": "InstanceExpired", "status": "True", "reason": "SpotInstanceReclaimed"},
            ]}}),
        )
        .unwrap();

    let second = eventually(WAIT, || bound_to(&server).filter(|n| *n != first))
        .await
        .expect("the pod runs again, on a replacement");
    eventually(WAIT, || {
        server.get::<Node>("", &first).is_none().then_some(())
    })
    .await
    .expect("the reclaimed node is deleted");
    let (deleted, instances) = {
        let cloud = cloud.lock().unwrap();
        (cloud.deleted.clone(), cloud.instances.clone())
    };
    assert_eq!(deleted, vec![instance.id.clone()], "its instance released");
    assert_eq!(instances.len(), 1);
    assert_eq!(second, format!("{REGION}.{}", instances[0].id));
    // The reclaimed offering was marked, so the replacement went on-demand.
    assert!(!instances[0].spot);
    assert!(running.ctx.provider.unavailable().is_unavailable(
        "ecs.g7.large",
        "cn-hangzhou-i",
        "spot",
        std::time::Instant::now()
    ));

    running.stop().await;
    scheduler.abort();
    let _ = kubelets.await;
}
