//! The `karpenter.sh/unregistered:NoExecute` taint on a node Karpenter already registered.
//!
//! CCE turns `CreateNode`'s taints into the kubelet's `--register-with-taints` and re-applies
//! them while it syncs a new node, which can land after Karpenter's registration removed the
//! taint; the node then stays tainted and takes no pods. As upstream's Huawei provider does, a
//! second pass removes the taint from every node labelled `karpenter.sh/registered=true`.

use k8s_openapi::api::core::v1::{Node, Taint};
use karpenter_api::labels::{NODE_REGISTERED_LABEL, UNREGISTERED_TAINT_KEY};

fn is_unregistered(t: &Taint) -> bool {
    t.key == UNREGISTERED_TAINT_KEY && t.effect == "NoExecute"
}

/// The node's taints without the unregistered taint, when it is registered and still carries
/// it; `None` when there is nothing to do.
pub fn cleaned_taints(node: &Node) -> Option<Vec<Taint>> {
    let registered = node
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(NODE_REGISTERED_LABEL))
        .is_some_and(|v| v == "true");
    let taints = node.spec.as_ref()?.taints.as_ref()?;
    (registered && taints.iter().any(is_unregistered)).then(|| {
        taints
            .iter()
            .filter(|t| !is_unregistered(t))
            .cloned()
            .collect()
    })
}

#[cfg(feature = "cloud")]
pub use run::run;

#[cfg(feature = "cloud")]
mod run {
    use std::sync::Arc;
    use std::time::Duration;

    use k8s_openapi::api::core::v1::Node;
    use karpenter_controller::Context;
    use kube::Api;
    use kube::api::{Patch, PatchParams};
    use tokio_util::sync::CancellationToken;

    use crate::provider::{ClusterState, HuaweiCloudProvider};

    /// How often the nodes are looked over.
    const PERIOD: Duration = Duration::from_secs(5);

    /// Removes stale unregistered taints while this replica leads, until `shutdown`.
    /// Level-triggered: every pass reads the whole node index, so a refused patch (the node
    /// changed meanwhile) is tried again next pass.
    pub async fn run<S: ClusterState>(
        ctx: Arc<Context<HuaweiCloudProvider<S>>>,
        shutdown: CancellationToken,
    ) {
        let api: Api<Node> = Api::all(ctx.client.clone());
        loop {
            tokio::select! {
                _ = tokio::time::sleep(PERIOD) => {}
                _ = shutdown.cancelled() => return,
            }
            if !ctx.is_leader() {
                continue;
            }
            for node in ctx.cluster.nodes.all() {
                let Some(taints) = super::cleaned_taints(&node) else {
                    continue;
                };
                let name = node.metadata.name.clone().unwrap_or_default();
                // Guarded by the version the taints were read at: a taint added meanwhile is
                // not dropped by this write.
                let patch = serde_json::json!({
                    "metadata": {"resourceVersion": node.metadata.resource_version},
                    "spec": {"taints": taints},
                });
                match api
                    .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                {
                    Ok(_) => {
                        tracing::info!(node = %name, "removed a stale karpenter.sh/unregistered taint")
                    }
                    Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
                    Err(e) => {
                        tracing::warn!(node = %name, error = %e, "removing a stale unregistered taint")
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn node(registered: Option<&str>, taints: serde_json::Value) -> Node {
        let mut labels = serde_json::Map::new();
        if let Some(r) = registered {
            labels.insert(NODE_REGISTERED_LABEL.into(), json!(r));
        }
        serde_json::from_value(json!({
            "metadata": {"name": "192.168.0.11", "labels": labels},
            "spec": {"taints": taints},
        }))
        .unwrap()
    }

    #[test]
    fn only_registered_nodes_lose_only_the_unregistered_taint() {
        let unregistered = json!({"key": "karpenter.sh/unregistered", "effect": "NoExecute"});
        let dedicated = json!({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"});
        let cleaned = cleaned_taints(&node(Some("true"), json!([unregistered, dedicated])))
            .expect("a registered node keeps no unregistered taint");
        assert_eq!(serde_json::to_value(&cleaned).unwrap(), json!([dedicated]));
        for (registered, taints) in [
            (None, json!([unregistered])),
            (Some("false"), json!([unregistered])),
            (Some("true"), json!([dedicated])),
            (
                Some("true"),
                json!([{"key": "karpenter.sh/unregistered", "effect": "NoSchedule"}]),
            ),
            (Some("true"), json!(null)),
        ] {
            assert_eq!(
                cleaned_taints(&node(registered, taints.clone())),
                None,
                "{registered:?} {taints}"
            );
        }
    }
}
