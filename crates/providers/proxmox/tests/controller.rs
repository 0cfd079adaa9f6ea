//! The controller with the Proxmox provider, end to end, against fakepve (a fake Proxmox VE API
//! on loopback) and the test kit's API server (its scheduler stand-in, and a kubelet stand-in
//! here that registers a Node for each running VM the way a K3s agent started with
//! `--kubelet-arg=provider-id=proxmox://<region>/<vmid>` would):
//!
//! * a managed `ProxmoxTemplate` is built from its cloud image on both Proxmox nodes; the
//!   NodeClass that names it goes Ready; a pending pod becomes a NodeClaim, the NodeClaim a VM
//!   cloned from that template; when the pod goes away the empty node is consolidated and its
//!   VM destroyed; deleting the template object deletes its template VMs and image first;
//! * an unmanaged template made by hand serves a NodeClass the same way; changing the class's
//!   tags, security groups and resource pool updates the running VM in place, replacing no
//!   node.

#[allow(dead_code)]
mod fakepve_support;

use std::sync::Arc;
use std::time::Duration;

use fakepve_support::{FakePve, ROOT_PASSWORD, Seed, start};
use k8s_openapi::api::core::v1::{Node, Pod};
use karpenter_api::{NodeClaim, NodePool};
use karpenter_controller::{Context, Controller, Options};
use karpenter_proxmox::instance::TaskTiming;
use karpenter_proxmox::provider::{ProxmoxCloudProvider, ProxmoxOptions};
use karpenter_proxmox::pve::form::Params;
use karpenter_proxmox::pve::{ClustersConfig, PveClient, PvePool};
use karpenter_proxmox::{ProxmoxNodeClass, ProxmoxTemplate, ProxmoxUnmanagedTemplate};
use karpenter_testkit::{FakeApiServer, eventually};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(40);

fn pool(pve: &FakePve) -> PvePool {
    let config = ClustersConfig::parse(&format!(
        "clusters:\n  - url: {}\n    region: fake\n    username: root@pam\n    password: {ROOT_PASSWORD}\n    insecure: true\n",
        pve.url
    ))
    .unwrap();
    PvePool::from_config(&config, Duration::from_secs(10)).unwrap()
}

fn setup(server: &FakeApiServer, template_kind: &str, template_name: &str, extra: Value) {
    server
        .install_crds(karpenter_proxmox::CRDS.iter().map(|c| c.definition()))
        .unwrap();
    let mut class = json!({
        "apiVersion": "karpenter.proxmox.sinextra.dev/v1alpha1",
        "kind": "ProxmoxNodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "instanceTemplateRef": {"kind": template_kind, "name": template_name},
            "tags": ["k8s"],
        },
    });
    if let (Some(spec), Value::Object(extra)) = (class["spec"].as_object_mut(), extra) {
        spec.extend(extra);
    }
    let class: ProxmoxNodeClass = serde_json::from_value(class).unwrap();
    server.create(&class).unwrap();
    let pool: NodePool = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"},
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.proxmox.sinextra.dev", "kind": "ProxmoxNodeClass", "name": "default"},
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                ],
            }},
        },
    }))
    .unwrap();
    server.create(&pool).unwrap();
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"containers": [{"name": "web", "image": "nginx", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
    }))
    .unwrap();
    server.create(&pod).unwrap();
}

type Provider = ProxmoxCloudProvider;

struct Running {
    ctx: Arc<Context<Provider>>,
    stop: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Running {
    fn start(server: &FakeApiServer, pve: &FakePve) -> Self {
        let options = ProxmoxOptions {
            tasks: TaskTiming {
                wait: Duration::from_secs(20),
                poll: Duration::from_millis(50),
            },
            inventory_ttl: Duration::from_millis(200),
            ..ProxmoxOptions::default()
        };
        let provider = Arc::new(ProxmoxCloudProvider::new(
            pool(pve),
            server.client(),
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
        let mut tasks = vec![tokio::spawn(controller.run(stop.clone()))];
        // The provider's own loops, as the binary runs them beside the controller's.
        for l in <karpenter_proxmox::operator::ProxmoxProvider as karpenter_controller::Provider>::controllers(&ctx, &stop) {
            tasks.push(tokio::spawn(l));
        }
        Self { ctx, stop, tasks }
    }

    async fn stop(self) {
        self.stop.cancel();
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// The VMs fakepve has: (node, vmid, name, status, template).
async fn vms(client: &PveClient) -> Vec<(String, u32, String, String, bool)> {
    client
        .vm_resources()
        .await
        .unwrap()
        .into_iter()
        .filter_map(|r| Some((r.node, r.vmid?, r.name, r.status, r.template)))
        .collect()
}

/// What the kubelet on a cloned VM would do, reduced: once the VM a NodeClaim names runs, a
/// Node registers with its providerID, the claim's labels and the unregistered taint.
fn spawn_kubelets(
    server: FakeApiServer,
    client: PveClient,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while !stop.is_cancelled() {
            let running = vms(&client).await;
            for claim in server.list::<NodeClaim>() {
                let Some(status) = claim.status.clone() else {
                    continue;
                };
                let Some(provider_id) = status.provider_id.clone() else {
                    continue;
                };
                let Some((_, vmid)) = karpenter_proxmox::provider_id::parse(&provider_id) else {
                    continue;
                };
                if !running
                    .iter()
                    .any(|(_, id, _, state, _)| *id == vmid && state == "running")
                {
                    continue;
                }
                let name = claim.metadata.name.clone().unwrap();
                if server.get::<Node>("", &name).is_some() {
                    continue;
                }
                let mut labels = claim.metadata.labels.clone().unwrap_or_default();
                labels.insert("kubernetes.io/hostname".into(), name.clone());
                let now = k8s_openapi::jiff::Timestamp::now().to_string();
                let node: Node = serde_json::from_value(json!({
                    "apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": name, "labels": labels},
                    "spec": {"providerID": provider_id, "taints": [
                        {"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
                    ]},
                    "status": {
                        "capacity": status.capacity, "allocatable": status.allocatable,
                        "nodeInfo": {"kubeletVersion": "v1.33.5+k3s1", "machineID": "", "systemUUID": "", "bootID": "",
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

fn ready(conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition]) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// Provisions for the pending pod; returns the VM the pod runs on: (node, vmid).
async fn provision(server: &FakeApiServer, client: &PveClient) -> (String, u32) {
    let node_name = eventually(WAIT, || bound_to(server))
        .await
        .expect("the pod runs on a new node");
    let node = server.get::<Node>("", &node_name).unwrap();
    let provider_id = node.spec.unwrap().provider_id.unwrap();
    let (region, vmid) = karpenter_proxmox::provider_id::parse(&provider_id).unwrap();
    assert_eq!(region, "fake");
    let claims = server.list::<NodeClaim>();
    assert_eq!(claims.len(), 1);
    let claim_name = claims[0].metadata.name.clone().unwrap();
    let found = vms(client).await;
    let vm = found.iter().find(|v| v.1 == vmid).expect("the VM exists");
    assert_eq!(vm.2, claim_name, "the VM is named after its NodeClaim");
    assert_eq!(vm.3, "running");
    assert!(!vm.4);
    let tags = client
        .vm_config(&vm.0, vmid)
        .await
        .unwrap()
        .get("tags")
        .unwrap_or_default();
    assert!(
        tags.split([';', ',']).any(|t| t == "karpenter") && tags.contains("k8s"),
        "{tags}"
    );
    (vm.0.clone(), vmid)
}

/// Deletes the pod; the empty node is consolidated and VM `vmid` destroyed.
async fn consolidate(server: &FakeApiServer, client: &PveClient, vmid: u32) {
    // The workload goes away: the empty node is consolidated and its VM destroyed.
    server.delete::<Pod>("default", "web").unwrap();
    eventually(WAIT, || server.list::<NodeClaim>().is_empty().then_some(()))
        .await
        .expect("the empty node's claim is removed");
    let mut gone = false;
    for _ in 0..200 {
        if !vms(client).await.iter().any(|v| v.1 == vmid) {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "VM {vmid} is destroyed with its node");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_managed_template_serves_nodes_and_goes_with_its_object() {
    let Some(pve) = start(Seed::default()) else {
        return;
    };
    let client = pool(&pve).get("fake").unwrap().clone();
    // PVE's `local` takes no imports until it is told to.
    client
        .put::<Value>(
            "/storage/local",
            Params::new().set("content", "iso,vztmpl,backup,import"),
        )
        .await
        .unwrap();
    let server = FakeApiServer::new();
    setup(&server, "ProxmoxTemplate", "noble", json!({}));
    let template: ProxmoxTemplate = serde_json::from_value(json!({
        "apiVersion": "karpenter.proxmox.sinextra.dev/v1alpha1",
        "kind": "ProxmoxTemplate",
        "metadata": {"name": "noble"},
        "spec": {
            "sourceImage": {
                "url": "https://cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.img",
                "imageName": "noble-amd64.qcow2"
            },
            "storageIDs": ["local", "local-lvm"],
            "network": [{"bridge": "vmbr0"}],
        },
    }))
    .unwrap();
    server.create(&template).unwrap();
    let running = Running::start(&server, &pve);
    let scheduler = server.spawn_cluster(Duration::from_millis(100));
    let kubelets = spawn_kubelets(server.clone(), client.clone(), running.stop.clone());

    let status = eventually(WAIT, || {
        let s = server.get::<ProxmoxTemplate>("", "noble")?.status?;
        ready(&s.conditions).then_some(s)
    })
    .await
    .expect("the ProxmoxTemplate is built and goes Ready");
    assert_eq!(status.zones, ["fake/pve1/1000", "fake/pve2/1001"]);
    assert_eq!(status.image_id, Some(template.spec.image_id().unwrap()));
    let object = server.get::<ProxmoxTemplate>("", "noble").unwrap();
    assert!(
        object
            .metadata
            .finalizers
            .unwrap_or_default()
            .iter()
            .any(|f| f == "karpenter.proxmox.sinextra.dev/termination")
    );
    let class = eventually(WAIT, || {
        let s = server.get::<ProxmoxNodeClass>("", "default")?.status?;
        ready(&s.conditions).then_some(s)
    })
    .await
    .expect("the ProxmoxNodeClass goes Ready");
    assert_eq!(class.selected_zones, ["fake/pve1/1000", "fake/pve2/1001"]);

    let (_, vmid) = provision(&server, &client).await;
    assert!(vmid >= 20_000, "{vmid}: node VM ids start at PROXMOX_VMID");
    consolidate(&server, &client, vmid).await;

    // Deleting the object deletes its template VMs first, then lets it go.
    server.delete::<ProxmoxTemplate>("", "noble").unwrap();
    eventually(WAIT, || {
        server
            .get::<ProxmoxTemplate>("", "noble")
            .is_none()
            .then_some(())
    })
    .await
    .expect("the finalizer goes once the templates are deleted");
    let left: Vec<u32> = vms(&client)
        .await
        .into_iter()
        .filter(|v| v.2 == "noble")
        .map(|v| v.1)
        .collect();
    assert!(left.is_empty(), "template VMs left behind: {left:?}");
    assert!(running.ctx.provider.templates().await.is_ok());

    running.stop().await;
    scheduler.abort();
    let _ = kubelets.await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unmanaged_template_serves_nodes() {
    let Some(pve) = start(Seed::default()) else {
        return;
    };
    let client = pool(&pve).get("fake").unwrap().clone();
    client
        .post::<()>("/pools", Params::new().set("poolid", "kube"))
        .await
        .unwrap();
    for group in ["k8s-nodes", "k8s-ingress"] {
        client
            .post::<()>(
                "/cluster/firewall/groups",
                Params::new().set("group", group),
            )
            .await
            .unwrap();
    }
    let server = FakeApiServer::new();
    setup(
        &server,
        "ProxmoxUnmanagedTemplate",
        "ubuntu",
        json!({"securityGroups": [{"name": "k8s-nodes"}]}),
    );
    let template: ProxmoxUnmanagedTemplate = serde_json::from_value(json!({
        "apiVersion": "karpenter.proxmox.sinextra.dev/v1alpha1",
        "kind": "ProxmoxUnmanagedTemplate",
        "metadata": {"name": "ubuntu"},
        "spec": {"templateName": "ubuntu-template"},
    }))
    .unwrap();
    server.create(&template).unwrap();
    let running = Running::start(&server, &pve);
    let scheduler = server.spawn_cluster(Duration::from_millis(100));
    let kubelets = spawn_kubelets(server.clone(), client.clone(), running.stop.clone());

    let status = eventually(WAIT, || {
        let s = server
            .get::<ProxmoxUnmanagedTemplate>("", "ubuntu")?
            .status?;
        ready(&s.conditions).then_some(s)
    })
    .await
    .expect("the unmanaged template finds its VM");
    assert_eq!(status.zones, ["fake/pve1/9000"]);
    eventually(WAIT, || {
        let s = server.get::<ProxmoxNodeClass>("", "default")?.status?;
        ready(&s.conditions).then_some(())
    })
    .await
    .expect("the ProxmoxNodeClass goes Ready");

    let (node, vmid) = provision(&server, &client).await;
    let groups = |rules: Vec<karpenter_proxmox::pve::types::FirewallRule>| -> Vec<String> {
        rules.into_iter().map(|r| r.action).collect()
    };
    assert_eq!(
        groups(client.vm_firewall_rules(&node, vmid).await.unwrap()),
        ["k8s-nodes"]
    );
    let claim = server.list::<NodeClaim>()[0].metadata.name.clone().unwrap();

    // Tags, security groups and pool change: the VM follows in place.
    server
        .merge::<ProxmoxNodeClass>(
            "",
            "default",
            json!({"spec": {
                "tags": ["k8s", "web"],
                "securityGroups": [{"name": "k8s-ingress"}],
                "resourcePool": "kube",
            }}),
        )
        .unwrap();
    let class = server.get::<ProxmoxNodeClass>("", "default").unwrap();
    eventually(WAIT, || {
        let c = server.get::<NodeClaim>("", &claim)?;
        (c.metadata
            .annotations?
            .get("karpenter.proxmox.sinextra.dev/proxmoxnodeinplaceupdate-hash")
            == Some(&class.in_place_hash()))
        .then_some(())
    })
    .await
    .expect("the claim records the class's in-place hash");
    let tags = client
        .vm_config(&node, vmid)
        .await
        .unwrap()
        .get("tags")
        .unwrap_or_default();
    assert_eq!(tags, "k8s;karpenter;web");
    assert_eq!(
        groups(client.vm_firewall_rules(&node, vmid).await.unwrap()),
        ["k8s-ingress"]
    );
    assert!(
        client
            .pool("kube", Some("qemu"))
            .await
            .unwrap()
            .has_vm(vmid)
    );
    let claims: Vec<String> = server
        .list::<NodeClaim>()
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert_eq!(
        claims,
        [claim],
        "no node is replaced for an in-place change"
    );

    consolidate(&server, &client, vmid).await;
    // The hand-made template is never touched.
    assert!(vms(&client).await.iter().any(|v| v.1 == 9000 && v.4));

    running.stop().await;
    scheduler.abort();
    let _ = kubelets.await;
}
