//! For end-to-end tests against a real Kubernetes control plane (API server, scheduler and
//! controller manager without kubelets; CI has none): the client of the cluster
//! `KARPENTER_RS_REAL_KUBECONFIG` names (none: the test skips), polling, CRD installation, and
//! a stand-in for the kubelets that keeps chosen nodes alive.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ListParams, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// The variable naming the real cluster's kubeconfig.
pub const KUBECONFIG_VAR: &str = "KARPENTER_RS_REAL_KUBECONFIG";

/// A client of the real cluster, or `None` when [`KUBECONFIG_VAR`] is unset.
pub async fn client() -> Option<Client> {
    let path = std::env::var(KUBECONFIG_VAR).ok()?;
    let kubeconfig = Kubeconfig::read_from(&path).expect("the kubeconfig reads");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("the kubeconfig is usable");
    Some(Client::try_from(config).expect("a client"))
}

/// Polls `check` every 250 ms until it answers or `wait` passes.
pub async fn eventually_within<T, F: Future<Output = Option<T>>>(
    wait: Duration,
    mut check: impl FnMut() -> F,
) -> Option<T> {
    let deadline = tokio::time::Instant::now() + wait;
    while tokio::time::Instant::now() < deadline {
        if let Some(v) = check().await {
            return Some(v);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    None
}

/// Applies CRD `definitions` as the chart does and waits until the API server serves each.
pub async fn install_crds(
    client: &Client,
    definitions: impl IntoIterator<Item = serde_json::Value>,
) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for definition in definitions {
        let name = definition["metadata"]["name"].as_str().unwrap().to_string();
        api.patch(
            &name,
            &PatchParams::apply("karpenter-rs-tests").force(),
            &Patch::Apply(definition),
        )
        .await
        .unwrap_or_else(|e| panic!("the API server accepts {name}: {e}"));
        let established = eventually_within(Duration::from_secs(60), || {
            let api = api.clone();
            let name = name.clone();
            async move {
                let crd = api.get(&name).await.ok()?;
                crd.status?
                    .conditions?
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
                    .then_some(())
            }
        })
        .await;
        assert!(established.is_some(), "{name} established");
    }
}

/// Stands in for the kubelets the control plane lacks: every 5 s renews the Lease and the
/// Ready condition of each node `alive` accepts, so the node lifecycle controller leaves them
/// Ready; a node `alive` stops accepting is left to go `Unknown` as a dead kubelet's would.
pub fn renew_nodes(
    client: Client,
    alive: impl Fn(&Node) -> bool + Send + 'static,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let nodes: Api<Node> = Api::all(client.clone());
        let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
        let apply = PatchParams::apply("fake-kubelet").force();
        while !stop.is_cancelled() {
            // Whole seconds: a Lease's renewTime wants exactly six fractional digits.
            let seconds = k8s_openapi::jiff::Timestamp::now().as_second();
            let now = k8s_openapi::jiff::Timestamp::from_second(seconds)
                .unwrap()
                .to_string();
            for node in nodes
                .list(&ListParams::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default()
            {
                let Some(name) = node.metadata.name.clone() else {
                    continue;
                };
                if node.metadata.deletion_timestamp.is_some() || !alive(&node) {
                    continue;
                }
                let lease = json!({
                    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": name, "namespace": "kube-node-lease"},
                    "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": now.replace('Z', ".000000Z")},
                });
                let _ = leases.patch(&name, &apply, &Patch::Apply(lease)).await;
                let ready = json!({"status": {"conditions": [{
                    "type": "Ready", "status": "True", "reason": "KubeletReady",
                    "lastHeartbeatTime": now, "lastTransitionTime": now,
                }]}});
                let _ = nodes
                    .patch_status(&name, &PatchParams::default(), &Patch::Strategic(ready))
                    .await;
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(5)) => {}
            }
        }
    })
}
