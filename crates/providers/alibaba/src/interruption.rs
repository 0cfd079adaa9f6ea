//! Spot reclaims. Alibaba gives no interruption queue: ACK's node problem detector sets the
//! node condition `InstanceExpired=True` on a spot node whose instance is about to be
//! reclaimed. As upstream, such a node's NodeClaim is deleted (the core's termination then
//! taints, drains and replaces it) and its (type, zone, spot) offering marked unavailable so
//! the replacement goes elsewhere.

use k8s_openapi::api::core::v1::Node;
use karpenter_api::NodeClaim;
use karpenter_api::labels::{
    CAPACITY_TYPE_LABEL, CAPACITY_TYPE_SPOT, INSTANCE_TYPE_LABEL, ZONE_LABEL,
};

/// The node condition ACK sets on a spot node about to be reclaimed.
pub const CONDITION_INSTANCE_EXPIRED: &str = "InstanceExpired";

/// A spot node to replace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reclaim {
    /// Its NodeClaim.
    pub node_claim: String,
    /// Its node.
    pub node: String,
    /// `(instance type, zone)` to mark unavailable as spot, when the claim's labels say.
    pub offering: Option<(String, String)>,
    /// The condition's reason (ACK's), for the event.
    pub reason: String,
}

/// The reclaims among `nodes`: spot nodes with `InstanceExpired=True` whose NodeClaim is not
/// already being deleted.
pub fn reclaims<'a>(
    nodes: impl IntoIterator<Item = &'a Node>,
    claims: &[&NodeClaim],
) -> Vec<Reclaim> {
    let mut out = Vec::new();
    for node in nodes {
        let labels = node.metadata.labels.as_ref();
        let spot = labels
            .and_then(|l| l.get(CAPACITY_TYPE_LABEL))
            .is_some_and(|ct| ct == CAPACITY_TYPE_SPOT);
        if !spot {
            continue;
        }
        let Some(condition) = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| {
                cs.iter()
                    .find(|c| c.type_ == CONDITION_INSTANCE_EXPIRED && c.status == "True")
            })
        else {
            continue;
        };
        let node_name = node.metadata.name.as_deref().unwrap_or_default();
        let provider_id = node.spec.as_ref().and_then(|s| s.provider_id.as_deref());
        let claim = claims.iter().find(|c| {
            let status = c.status.as_ref();
            status.and_then(|s| s.node_name.as_deref()) == Some(node_name)
                || (provider_id.is_some()
                    && status.and_then(|s| s.provider_id.as_deref()) == provider_id)
        });
        let Some(claim) = claim.filter(|c| c.metadata.deletion_timestamp.is_none()) else {
            continue;
        };
        let claim_labels = claim.metadata.labels.as_ref();
        let label = |key: &str| claim_labels.and_then(|l| l.get(key)).cloned();
        out.push(Reclaim {
            node_claim: claim.metadata.name.clone().unwrap_or_default(),
            node: node_name.to_string(),
            offering: label(INSTANCE_TYPE_LABEL).zip(label(ZONE_LABEL)),
            reason: condition.reason.clone().unwrap_or_default(),
        });
    }
    out
}

#[cfg(feature = "cloud")]
pub use run::run;

#[cfg(feature = "cloud")]
mod run {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use karpenter_api::NodeClaim;
    use karpenter_controller::{Context, events};
    use kube::Api;
    use kube::api::DeleteParams;
    use tokio_util::sync::CancellationToken;

    use crate::provider::{AlibabaCloudProvider, ClusterState};

    /// How often the nodes are looked over. ACK marks a node about five minutes before the
    /// reclaim, so seconds are plenty.
    const PERIOD: Duration = Duration::from_secs(5);

    /// Replaces reclaimed spot nodes while this replica leads, until `shutdown`. Level-triggered:
    /// every pass reads the whole node index, so a failed delete is tried again next pass.
    pub async fn run<S: ClusterState>(
        ctx: Arc<Context<AlibabaCloudProvider<S>>>,
        shutdown: CancellationToken,
    ) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(PERIOD) => {}
                _ = shutdown.cancelled() => return,
            }
            if !ctx.is_leader() {
                continue;
            }
            let nodes = ctx.cluster.nodes.all();
            let claims = ctx.cluster.node_claims.all();
            let claim_refs: Vec<&NodeClaim> = claims.iter().map(|c| &**c).collect();
            for reclaim in super::reclaims(nodes.iter().map(|n| &**n), &claim_refs) {
                if let Some((instance_type, zone)) = &reclaim.offering {
                    ctx.provider.unavailable().mark(
                        instance_type,
                        zone,
                        karpenter_api::labels::CAPACITY_TYPE_SPOT,
                        Instant::now(),
                    );
                }
                let api: Api<NodeClaim> = Api::all(ctx.client.clone());
                match api
                    .delete(&reclaim.node_claim, &DeleteParams::default())
                    .await
                {
                    Ok(_) => {
                        tracing::info!(nodeclaim = %reclaim.node_claim, node = %reclaim.node, "replacing a reclaimed spot node");
                        if let Some(claim) = claim_refs
                            .iter()
                            .find(|c| c.metadata.name.as_deref() == Some(&reclaim.node_claim))
                        {
                            ctx.recorder
                                .publish(
                                    *claim,
                                    events::warning(
                                        "SpotInterrupted",
                                        format!(
                                            "Spot instance of node {} is being reclaimed ({})",
                                            reclaim.node, reclaim.reason
                                        ),
                                    ),
                                )
                                .await;
                        }
                    }
                    Err(kube::Error::Api(e)) if e.code == 404 => {}
                    Err(e) => {
                        tracing::warn!(nodeclaim = %reclaim.node_claim, error = %e, "deleting a reclaimed spot node's nodeclaim")
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

    fn node(name: &str, capacity_type: &str, expired: Option<&str>) -> Node {
        let conditions = match expired {
            Some(status) => json!([
                {"type": "Ready", "status": "True"},
                {"type": CONDITION_INSTANCE_EXPIRED, "status": status, "reason": "SpotInstanceReclaimed"},
            ]),
            None => json!([{"type": "Ready", "status": "True"}]),
        };
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {CAPACITY_TYPE_LABEL: capacity_type}},
            "spec": {"providerID": format!("cn-hangzhou.i-{name}")},
            "status": {"conditions": conditions},
        }))
        .unwrap()
    }

    fn claim(name: &str, node: &str, deleting: bool) -> NodeClaim {
        let mut c: NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {"name": name, "labels": {
                INSTANCE_TYPE_LABEL: "ecs.g7.large", ZONE_LABEL: "cn-hangzhou-i"}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.alibabacloud", "kind": "ECSNodeClass", "name": "default"}},
            "status": {"nodeName": node},
        }))
        .unwrap();
        if deleting {
            c.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    "2026-11-24T10:00:00Z".parse().unwrap(),
                ));
        }
        c
    }

    #[test]
    fn only_expired_spot_nodes_with_a_live_claim_are_reclaimed() {
        let nodes = [
            node("a", "spot", Some("True")),
            node("b", "spot", Some("False")),
            node("c", "on-demand", Some("True")),
            node("d", "spot", None),
            node("e", "spot", Some("True")),
            node("f", "spot", Some("True")),
        ];
        let claims = [
            claim("ca", "a", false),
            claim("cb", "b", false),
            claim("cc", "c", false),
            claim("cd", "d", false),
            claim("ce", "e", true),
        ];
        let refs: Vec<&NodeClaim> = claims.iter().collect();
        let got = reclaims(&nodes, &refs);
        assert_eq!(
            got,
            [Reclaim {
                node_claim: "ca".into(),
                node: "a".into(),
                offering: Some(("ecs.g7.large".into(), "cn-hangzhou-i".into())),
                reason: "SpotInstanceReclaimed".into(),
            }]
        );
    }

    #[test]
    fn a_claim_is_found_by_provider_id_before_its_node_name_is_written() {
        let nodes = [node("a", "spot", Some("True"))];
        let mut c = claim("ca", "", false);
        c.status.as_mut().unwrap().node_name = None;
        c.status.as_mut().unwrap().provider_id = Some("cn-hangzhou.i-a".into());
        let got = reclaims(&nodes, &[&c]);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].node_claim, "ca");
    }
}
