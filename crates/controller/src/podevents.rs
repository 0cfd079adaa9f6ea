//! Upstream's `nodeclaim/podevents`: when a pod binds to a node, leaves it or finishes there,
//! the node's NodeClaim gets `status.lastPodEventTime`, from which `consolidateAfter` counts —
//! so a node whose last pod just left is not consolidated until it has been empty that long.
//! DaemonSet pods do not count; stamps closer than [`DEDUPE`] are skipped, as upstream's are.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use karpenter_core::state::pods;
use kube::ResourceExt;
use serde_json::json;
use tokio::sync::Notify;

use crate::cloudprovider::CloudProvider;
use crate::state::StoredPod;
use crate::{Context, Error};

/// Upstream's dedupe: a NodeClaim stamped this recently is not stamped again.
pub const DEDUPE: Duration = Duration::from_secs(10);

/// Nodes that saw a pod event since the loop last looked.
#[derive(Debug, Default)]
pub struct PodEvents {
    nodes: Mutex<BTreeSet<String>>,
    notify: Notify,
}

impl PodEvents {
    /// Records a pod event on `node`.
    pub fn record(&self, node: &str) {
        self.lock().insert(node.to_string());
        self.notify.notify_one();
    }

    /// Records the event a pod's change is, if it is one (see [`pod_event_node`]).
    pub fn observe(&self, old: Option<&StoredPod>, new: Option<&StoredPod>) {
        if let Some(node) = pod_event_node(old, new) {
            self.record(node);
        }
    }

    fn take(&self) -> BTreeSet<String> {
        std::mem::take(&mut *self.lock())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        self.nodes.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn bound_node(pod: &StoredPod) -> Option<&str> {
    pod.node_name.as_deref().filter(|n| !n.is_empty())
}

/// The node a pod's change is a pod event of, as upstream's predicates say: a pod created
/// bound or deleted from a node, bound to another node, finished, or starting to terminate.
/// DaemonSet pods never.
pub fn pod_event_node<'a>(
    old: Option<&'a StoredPod>,
    new: Option<&'a StoredPod>,
) -> Option<&'a str> {
    if old.or(new).is_some_and(pods::is_daemonset_pod) {
        return None;
    }
    match (old, new) {
        (None, Some(new)) => bound_node(new),
        (Some(old), None) => bound_node(old),
        (Some(old), Some(new)) => {
            if bound_node(old) != bound_node(new) {
                bound_node(new).or(bound_node(old))
            } else if (!pods::is_terminal(old) && pods::is_terminal(new))
                || (old.metadata.deletion_timestamp.is_none()
                    && new.metadata.deletion_timestamp.is_some())
            {
                bound_node(new)
            } else {
                None
            }
        }
        (None, None) => None,
    }
}

/// Stamps the NodeClaim of `node` with the time now, unless it was stamped within [`DEDUPE`].
async fn stamp<P: CloudProvider>(ctx: &Context<P>, node: &str) -> Result<(), Error> {
    let Some(provider_id) = ctx
        .cluster
        .nodes
        .get(node)
        .and_then(|n| n.spec.as_ref()?.provider_id.clone())
    else {
        return Ok(());
    };
    let Some(claim) = ctx.cluster.node_claim_for_provider_id(&provider_id) else {
        return Ok(());
    };
    let now = ctx.clock.now();
    let recent = claim
        .status
        .as_ref()
        .and_then(|s| s.last_pod_event_time.as_ref())
        .is_some_and(|t| now.duration_since(t.0).unsigned_abs() < DEDUPE);
    if recent || claim.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let patch = json!({"status": {"lastPodEventTime": Time(now)}});
    match ctx.patch_claim_status(&claim.name_any(), patch).await {
        Err(Error::Kube(kube::Error::Api(e))) if e.code == 404 => Ok(()),
        other => other,
    }
}

/// Stamps NodeClaims as their nodes see pod events, until `shutdown`. Events seen while this
/// replica does not lead are dropped, as upstream's are (its handlers run only on the leader).
pub async fn run<P: CloudProvider>(
    ctx: Arc<Context<P>>,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let events = ctx.cluster.pod_events.clone();
    let mut retry = BTreeSet::new();
    let lm = ctx.metrics.runtime.controller("nodeclaim.podevents", 1);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = events.notify.notified() => {}
            _ = tokio::time::sleep(ctx.options.resync) => {}
        }
        let mut nodes = events.take();
        if !ctx.is_leader() || !ctx.cluster.synced() {
            retry.clear();
            continue;
        }
        nodes.append(&mut retry);
        let started = tokio::time::Instant::now();
        let mut ok = true;
        for node in nodes {
            if let Err(e) = stamp(&ctx, &node).await {
                tracing::warn!(node = %node, error = %e, "recording a pod event");
                retry.insert(node);
                ok = false;
            }
        }
        lm.singleton_pass(started.elapsed());
        ctx.metrics.reconciled("nodeclaim.podevents", ok);
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    use super::*;
    use crate::state::SpecInterner;

    fn pod(node: Option<&str>, phase: &str, owner: &str) -> StoredPod {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "default", "uid": "u",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner, "name": "o", "uid": "o", "controller": true}]},
            "spec": {"nodeName": node, "containers": [{"name": "c"}]},
            "status": {"phase": phase},
        }))
        .unwrap();
        StoredPod::new(pod, &SpecInterner::default())
    }

    #[test]
    fn pod_events_as_upstream_predicates_see_them() {
        let pending = pod(None, "Pending", "ReplicaSet");
        let on_a = pod(Some("a"), "Running", "ReplicaSet");
        let on_b = pod(Some("b"), "Running", "ReplicaSet");
        let done_on_a = pod(Some("a"), "Succeeded", "ReplicaSet");
        let mut leaving_a = pod(Some("a"), "Running", "ReplicaSet");
        leaving_a.metadata.deletion_timestamp =
            Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        let ds_on_a = pod(Some("a"), "Running", "DaemonSet");
        type Case<'a> = (
            &'a str,
            Option<&'a StoredPod>,
            Option<&'a StoredPod>,
            Option<&'a str>,
        );
        let cases: [Case; 10] = [
            ("created pending", None, Some(&pending), None),
            ("created bound", None, Some(&on_a), Some("a")),
            ("bound", Some(&pending), Some(&on_a), Some("a")),
            ("status change on its node", Some(&on_a), Some(&on_a), None),
            ("moved", Some(&on_a), Some(&on_b), Some("b")),
            ("finished", Some(&on_a), Some(&done_on_a), Some("a")),
            ("terminating", Some(&on_a), Some(&leaving_a), Some("a")),
            ("deleted from its node", Some(&on_a), None, Some("a")),
            ("deleted pending", Some(&pending), None, None),
            ("a DaemonSet pod", None, Some(&ds_on_a), None),
        ];
        for (case, old, new, expected) in cases {
            assert_eq!(pod_event_node(old, new), expected, "{case}");
        }
    }

    /// Upstream's pod events suite: a pod event on a node stamps its NodeClaim's
    /// `lastPodEventTime` with the time now, again once the last stamp is over 10 s old but
    /// not within them; a node that does not exist, or has no NodeClaim, is nothing to stamp.
    #[tokio::test(start_paused = true)]
    async fn pod_events_stamp_the_nodes_claim() {
        use karpenter_api::NodeClaim;
        use karpenter_testkit::FakeApiServer;
        let clock = crate::Clock::following_tokio();
        let server = FakeApiServer::new();
        let stamps = clock.clone();
        server.set_clock(move || stamps.now());
        let claim: NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "c"},
            "spec": {"nodeClassRef": {"group": "karpenter.test.sh", "kind": "TestNodeClass", "name": "default"}, "requirements": []},
        }))
        .unwrap();
        server.create(&claim).unwrap();
        server
            .merge::<NodeClaim>("", "c", json!({"status": {"providerID": "fake://z/1"}}))
            .unwrap();
        for (name, id) in [("node", "fake://z/1"), ("claimless", "fake://z/2")] {
            let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(
                json!({"metadata": {"name": name}, "spec": {"providerID": id}}),
            )
            .unwrap();
            server.create(&node).unwrap();
        }
        let cloud = Arc::new(karpenter_cloudprovider::fake::FakeCloudProvider::default());
        let ctx = crate::Controller::with_clock(
            server.client(),
            cloud,
            Default::default(),
            clock.clone(),
        )
        .context();
        let stamped = || {
            server
                .get::<NodeClaim>("", "c")
                .and_then(|c| c.status?.last_pod_event_time)
                .map(|t| t.0.as_second())
        };
        let sync = || async { ctx.cluster.list(&ctx.client).await.unwrap() };
        sync().await;
        stamp(&ctx, "missing").await.unwrap();
        stamp(&ctx, "claimless").await.unwrap();
        assert_eq!(stamped(), None, "no node, or no claim: nothing stamped");
        stamp(&ctx, "node").await.unwrap();
        // Kubernetes times are kept to the second.
        let first = clock.now().as_second();
        assert_eq!(stamped(), Some(first));
        for (after, expected, case) in [
            (Duration::from_secs(5), first, "within the dedupe window"),
            (
                Duration::from_secs(6),
                first + 11,
                "set before, stamped again",
            ),
        ] {
            tokio::time::advance(after).await;
            sync().await;
            stamp(&ctx, "node").await.unwrap();
            assert_eq!(stamped(), Some(expected), "{case}");
        }
    }
}
