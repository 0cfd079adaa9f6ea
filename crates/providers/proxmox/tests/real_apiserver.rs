//! The controller with the Proxmox provider against a real Kubernetes control plane (API
//! server, scheduler, controller manager; no kubelets) and fakepve: the three CRDs with their
//! CEL rules judged by the real API server, a managed `ProxmoxTemplate` built and its finalizer
//! put on and honoured through real deletion, the status loops writing through the real status
//! subresource, a Deployment's pod becoming a cloned VM whose node the real scheduler binds it
//! to, and the node consolidated and its VM destroyed once the Deployment is gone.
//!
//! Skipped unless `KARPENTER_RS_REAL_KUBECONFIG` names such a cluster (CI has none):
//!
//! ```sh
//! KARPENTER_RS_REAL_KUBECONFIG=path/to/kubeconfig cargo test -p karpenter-proxmox --test real_apiserver
//! ```

#[allow(dead_code)]
mod fakepve_support;

use std::sync::Arc;
use std::time::Duration;

use fakepve_support::{FakePve, ROOT_PASSWORD, Seed, start};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use karpenter_api::{NodeClaim, NodePool};
use karpenter_controller::{Controller, Options};
use karpenter_proxmox::instance::TaskTiming;
use karpenter_proxmox::provider::{ProxmoxCloudProvider, ProxmoxOptions};
use karpenter_proxmox::pve::form::Params;
use karpenter_proxmox::pve::{ClustersConfig, PveClient, PvePool};
use karpenter_proxmox::{ProxmoxNodeClass, ProxmoxTemplate};
use karpenter_testkit::real;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const NAME: &str = "real-proxmox";
const WAIT: Duration = Duration::from_secs(90);

async fn eventually<T, F: Future<Output = Option<T>>>(check: impl FnMut() -> F) -> Option<T> {
    real::eventually_within(WAIT, check).await
}

fn pool(pve: &FakePve) -> PvePool {
    let config = ClustersConfig::parse(&format!(
        "clusters:\n  - url: {}\n    region: fake\n    username: root@pam\n    password: {ROOT_PASSWORD}\n    insecure: true\n",
        pve.url
    ))
    .unwrap();
    PvePool::from_config(&config, Duration::from_secs(10)).unwrap()
}

/// fakepve's VMs: (vmid, name, running).
async fn vms(client: &PveClient) -> Vec<(u32, String, bool)> {
    client
        .vm_resources()
        .await
        .unwrap_or_default()
        .into_iter()
        .filter_map(|r| Some((r.vmid?, r.name, r.status == "running")))
        .collect()
}

/// The kubelets' part: once the VM a NodeClaim names runs, its node registers (the unregistered
/// taint, Ready, the claim's labels and allocatable) and keeps its lease while the VM runs.
fn kubelets(
    client: Client,
    pve: PveClient,
    stop: CancellationToken,
) -> Vec<tokio::task::JoinHandle<()>> {
    let renew = real::renew_nodes(
        client.clone(),
        |node| {
            node.metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.get("karpenter.sh/nodepool").map(String::as_str) == Some(NAME))
        },
        stop.clone(),
    );
    let register = tokio::spawn(async move {
        let version = client
            .apiserver_version()
            .await
            .expect("/version")
            .git_version;
        let claims: Api<NodeClaim> = Api::all(client.clone());
        let nodes: Api<Node> = Api::all(client.clone());
        while !stop.is_cancelled() {
            let running = vms(&pve).await;
            for claim in claims
                .list(&ListParams::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default()
            {
                let Some(status) = claim.status.clone() else {
                    continue;
                };
                let Some(provider_id) = status.provider_id.clone() else {
                    continue;
                };
                let Some((_, vmid)) = karpenter_proxmox::provider_id::parse(&provider_id) else {
                    continue;
                };
                let name = claim.metadata.name.clone().unwrap();
                if !running.iter().any(|(id, _, on)| *id == vmid && *on)
                    || nodes.get_opt(&name).await.ok().flatten().is_some()
                {
                    continue;
                }
                let mut labels = claim.metadata.labels.clone().unwrap_or_default();
                labels.insert("kubernetes.io/hostname".into(), name.clone());
                let node: Node = serde_json::from_value(json!({
                    "apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": name, "labels": labels},
                    "spec": {"providerID": provider_id, "taints": [
                        {"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
                    ]},
                }))
                .unwrap();
                let now = k8s_openapi::jiff::Timestamp::now().to_string();
                if nodes.create(&PostParams::default(), &node).await.is_ok() {
                    let node_status = json!({"status": {
                        "capacity": status.capacity, "allocatable": status.allocatable,
                        "nodeInfo": {"kubeletVersion": version, "machineID": "", "systemUUID": "", "bootID": "",
                                     "kernelVersion": "", "osImage": "", "containerRuntimeVersion": "",
                                     "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"},
                        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                        "lastHeartbeatTime": now, "lastTransitionTime": now}],
                    }});
                    let _ = nodes
                        .patch_status(&name, &PatchParams::default(), &Patch::Merge(node_status))
                        .await;
                }
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
        }
    });
    vec![renew, register]
}

async fn apply(client: &Client) {
    let apply = PatchParams::apply("karpenter-rs-tests").force();
    let templates: Api<ProxmoxTemplate> = Api::all(client.clone());
    let template: Value = json!({
        "apiVersion": "karpenter.proxmox.sinextra.dev/v1alpha1", "kind": "ProxmoxTemplate",
        "metadata": {"name": NAME},
        "spec": {
            "sourceImage": {
                "url": "https://cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.img",
                "imageName": "noble-amd64.qcow2"
            },
            "storageIDs": ["local", "local-lvm"],
            "network": [{"bridge": "vmbr0"}],
        },
    });
    templates
        .patch(NAME, &apply, &Patch::Apply(&template))
        .await
        .expect("the ProxmoxTemplate applies");
    let classes: Api<ProxmoxNodeClass> = Api::all(client.clone());
    let class: Value = json!({
        "apiVersion": "karpenter.proxmox.sinextra.dev/v1alpha1", "kind": "ProxmoxNodeClass",
        "metadata": {"name": NAME},
        "spec": {"instanceTemplateRef": {"kind": "ProxmoxTemplate", "name": NAME}, "tags": ["k8s"]},
    });
    classes
        .patch(NAME, &apply, &Patch::Apply(&class))
        .await
        .expect("the ProxmoxNodeClass applies");
    let pools: Api<NodePool> = Api::all(client.clone());
    let pool: Value = json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": NAME},
        "spec": {
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"},
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.proxmox.sinextra.dev", "kind": "ProxmoxNodeClass", "name": NAME},
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                ],
            }},
        },
    });
    pools
        .patch(NAME, &apply, &Patch::Apply(&pool))
        .await
        .expect("the NodePool applies");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let deployment: Value = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": NAME},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": NAME}},
            "template": {
                "metadata": {"labels": {"app": NAME}},
                "spec": {
                    "nodeSelector": {"karpenter.sh/nodepool": NAME},
                    "containers": [{"name": "web", "image": "nginx", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
                },
            },
        },
    });
    deployments
        .patch(NAME, &apply, &Patch::Apply(&deployment))
        .await
        .expect("the Deployment applies");
}

async fn bound_node(pods: &Api<Pod>) -> Option<String> {
    let list = pods
        .list(&ListParams::default().labels(&format!("app={NAME}")))
        .await
        .ok()?;
    list.items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .find_map(|p| p.spec.as_ref()?.node_name.clone())
}

fn is_ready(conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition]) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_managed_template_serves_a_deployment_on_a_real_control_plane() {
    let Some(client) = real::client().await else {
        eprintln!("skipped: {} is not set", real::KUBECONFIG_VAR);
        return;
    };
    let Some(pve) = start(Seed::default()) else {
        return;
    };
    real::install_crds(
        &client,
        karpenter_api::crd::CORE
            .iter()
            .chain(karpenter_proxmox::CRDS)
            .map(|c| c.definition()),
    )
    .await;
    let pve_client = pool(&pve).get("fake").unwrap().clone();
    pve_client
        .put::<Value>(
            "/storage/local",
            Params::new().set("content", "iso,vztmpl,backup,import"),
        )
        .await
        .unwrap();

    // The real API server judges the CEL rules: a NodeClass naming no template is refused.
    let classes: Api<ProxmoxNodeClass> = Api::all(client.clone());
    let refused = classes
        .patch(
            &format!("{NAME}-invalid"),
            &PatchParams::apply("karpenter-rs-tests").force(),
            &Patch::Apply(json!({
                "apiVersion": "karpenter.proxmox.sinextra.dev/v1alpha1", "kind": "ProxmoxNodeClass",
                "metadata": {"name": format!("{NAME}-invalid")},
                "spec": {"instanceTemplateRef": {"kind": "ProxmoxTemplate", "name": ""}},
            })),
        )
        .await;
    assert!(refused.is_err(), "{refused:?}");

    apply(&client).await;
    let options = ProxmoxOptions {
        tasks: TaskTiming {
            wait: Duration::from_secs(20),
            poll: Duration::from_millis(50),
        },
        inventory_ttl: Duration::from_millis(500),
        ..ProxmoxOptions::default()
    };
    let provider = Arc::new(ProxmoxCloudProvider::new(
        pool(&pve),
        client.clone(),
        options,
    ));
    let controller = Controller::new(
        client.clone(),
        provider,
        Options {
            disable_leader_election: true,
            garbage_collection_interval: Duration::from_secs(2),
            ..Options::default()
        },
    );
    let ctx = controller.context();
    let stop = CancellationToken::new();
    let mut tasks = vec![tokio::spawn(controller.run(stop.clone()))];
    for l in
        <karpenter_proxmox::operator::ProxmoxProvider as karpenter_controller::Provider>::controllers(
            &ctx, &stop,
        )
    {
        tasks.push(tokio::spawn(l));
    }
    tasks.extend(kubelets(client.clone(), pve_client.clone(), stop.clone()));

    let templates: Api<ProxmoxTemplate> = Api::all(client.clone());
    let built = eventually(|| {
        let templates = templates.clone();
        async move {
            let t = templates.get(NAME).await.ok()?;
            let s = t.status.clone()?;
            is_ready(&s.conditions).then_some((t, s))
        }
    })
    .await;
    let (object, status) = built.expect("the template is built through the real status API");
    assert_eq!(status.zones.len(), 2, "{:?}", status.zones);
    assert!(
        object
            .metadata
            .finalizers
            .unwrap_or_default()
            .iter()
            .any(|f| f == "karpenter.proxmox.sinextra.dev/termination")
    );
    let ready = eventually(|| {
        let classes = classes.clone();
        async move { is_ready(&classes.get(NAME).await.ok()?.status?.conditions).then_some(()) }
    })
    .await;
    assert!(ready.is_some(), "the ProxmoxNodeClass goes Ready");

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let node = eventually(|| {
        let pods = pods.clone();
        async move { bound_node(&pods).await }
    })
    .await
    .expect("the real scheduler binds the pod to the new node");
    let nodes: Api<Node> = Api::all(client.clone());
    let provider_id = nodes
        .get(&node)
        .await
        .unwrap()
        .spec
        .unwrap()
        .provider_id
        .unwrap();
    let (_, vmid) = karpenter_proxmox::provider_id::parse(&provider_id).unwrap();
    assert!(
        vms(&pve_client)
            .await
            .iter()
            .any(|(id, name, on)| *id == vmid && *on && *name == node)
    );

    // The Deployment goes: the empty node is consolidated and its VM destroyed.
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    let _ = Api::<Deployment>::namespaced(client.clone(), "default")
        .delete(NAME, &now)
        .await;
    let _ = pods
        .delete_collection(&now, &ListParams::default().labels(&format!("app={NAME}")))
        .await;
    let gone = eventually(|| {
        let pve_client = pve_client.clone();
        async move { (!vms(&pve_client).await.iter().any(|(id, ..)| *id == vmid)).then_some(()) }
    })
    .await;
    assert!(
        gone.is_some(),
        "VM {vmid} is destroyed once its node is consolidated"
    );

    // Deleting the template object: its template VMs go first, then the object.
    templates
        .delete(NAME, &DeleteParams::default())
        .await
        .unwrap();
    let removed = eventually(|| {
        let templates = templates.clone();
        async move { templates.get_opt(NAME).await.ok()?.is_none().then_some(()) }
    })
    .await;
    assert!(removed.is_some(), "the finalizer is honoured");
    assert!(
        !vms(&pve_client)
            .await
            .iter()
            .any(|(_, name, _)| name == NAME)
    );

    let _ = Api::<NodePool>::all(client.clone())
        .delete(NAME, &DeleteParams::default())
        .await;
    let _ = classes.delete(NAME, &DeleteParams::default()).await;
    stop.cancel();
    for task in tasks {
        let _ = task.await;
    }
}
