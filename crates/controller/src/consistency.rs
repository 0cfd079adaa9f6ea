//! Upstream's `nodeclaim/consistency`: every [`SCAN_PERIOD`] each launched NodeClaim's Node
//! is checked against what was launched (the node shape check: a resource the claim requested
//! must reach 90% of the capacity the provider promised). Each issue is a
//! `FailedConsistencyCheck` event on the NodeClaim; the `ConsistentStateFound` condition says
//! whether there were any.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use karpenter_api::NodeClaim;
use karpenter_api::nodeclaim::condition::{CONSISTENT_STATE_FOUND, INITIALIZED};
use karpenter_core::resources::parse_milli;
use kube::ResourceExt;
use serde_json::json;
use tokio::time::Instant;

use crate::cloudprovider::CloudProvider;
use crate::events::catalog;
use crate::{Context, Error, conditions, queue};

/// How often a NodeClaim is checked (upstream's `scanPeriod`).
pub const SCAN_PERIOD: Duration = Duration::from_secs(10 * 60);

/// The share of a promised resource a node must have (upstream's 90%).
const MIN_SHARE: f64 = 0.90;

/// Upstream's node shape check: for each resource the claim requests and the provider
/// promised (`status.capacity`), an issue when the Node's capacity is under 90% of it.
/// Deleting and uninitialized claims have none.
pub fn node_shape_issues(claim: &NodeClaim, node: &Node) -> Vec<String> {
    let status = claim.status.clone().unwrap_or_default();
    if claim.metadata.deletion_timestamp.is_some()
        || !conditions::is_true(&status.conditions, INITIALIZED)
    {
        return Vec::new();
    }
    let zero = Quantity("0".into());
    let milli = |q: &Quantity| parse_milli(&q.0).unwrap_or(0);
    let node_capacity = node.status.as_ref().and_then(|s| s.capacity.as_ref());
    let mut issues = Vec::new();
    for (name, requested) in &claim.spec.resources.requests {
        let expected = status.capacity.get(name).unwrap_or(&zero);
        if milli(requested) == 0 || milli(expected) == 0 {
            continue;
        }
        let found = node_capacity.and_then(|c| c.get(name)).unwrap_or(&zero);
        let share = milli(found) as f64 / milli(expected) as f64;
        if share < MIN_SHARE {
            issues.push(format!(
                "expected {} of resource {name}, but found {} ({:.1}% of expected)",
                expected.0,
                found.0,
                share * 100.0
            ));
        }
    }
    issues
}

/// When each NodeClaim (by UID) was last checked.
#[derive(Default)]
struct LastScanned(Mutex<HashMap<String, Instant>>);

impl LastScanned {
    /// The time left before `uid` is due, or `None` when it is due now.
    fn wait(&self, uid: &str, now: Instant) -> Option<Duration> {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let at = map.get(uid)?;
        let since = now.duration_since(*at);
        (since < SCAN_PERIOD).then(|| SCAN_PERIOD - since)
    }

    /// Counts `uid` as checked at `now`. Only a check that ran to the end counts: one that
    /// found no Node yet, or whose write failed, must run again when retried.
    fn checked(&self, uid: &str, now: Instant) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() > 10_000 {
            map.retain(|_, at| now.duration_since(*at) < SCAN_PERIOD);
        }
        map.insert(uid.to_string(), now);
    }
}

/// One check of one NodeClaim; when to look again.
async fn reconcile<P: CloudProvider>(
    ctx: &Context<P>,
    scanned: &LastScanned,
    claim: &NodeClaim,
) -> Result<Option<Duration>, Error> {
    let Some(provider_id) = claim.status.as_ref().and_then(|s| s.provider_id.clone()) else {
        return Ok(None);
    };
    let uid = claim.uid().unwrap_or_default();
    let started = ctx.clock.instant();
    if let Some(left) = scanned.wait(&uid, started) {
        return Ok(Some(left));
    }
    let Some(node) = ctx.cluster.node_for_provider_id(&provider_id) else {
        return Ok(None);
    };
    let issues = node_shape_issues(claim, &node);
    for issue in &issues {
        tracing::info!(nodeclaim = %claim.name_any(), node = %node.name_any(), issue = %issue, "failed consistency check");
        ctx.recorder
            .publish(claim, catalog::failed_consistency_check(&uid, issue))
            .await;
    }
    let mut status = claim.status.clone().unwrap_or_default();
    let now = ctx.clock.now();
    let changed = if issues.is_empty() {
        !conditions::is_true(&status.conditions, CONSISTENT_STATE_FOUND)
            && conditions::set(
                &mut status.conditions,
                CONSISTENT_STATE_FOUND,
                "True",
                CONSISTENT_STATE_FOUND,
                "",
                now,
            )
    } else {
        conditions::set(
            &mut status.conditions,
            CONSISTENT_STATE_FOUND,
            "False",
            "ConsistencyCheckFailed",
            "Consistency Check Failed",
            now,
        )
    };
    if changed {
        let patch = json!({"metadata": {"resourceVersion": claim.resource_version()}, "status": {"conditions": status.conditions}});
        crate::writes::allow_missing_write(ctx.patch_claim_status(&claim.name_any(), patch).await)?;
    }
    scanned.checked(&uid, started);
    Ok(Some(SCAN_PERIOD))
}

/// Runs the consistency checks until `shutdown`: a NodeClaim is looked at when it or its Node
/// changes, but checked at most once per [`SCAN_PERIOD`].
pub async fn run<P: CloudProvider>(
    ctx: Arc<Context<P>>,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let scanned = Arc::new(LastScanned::default());
    let nodes = queue::Related {
        changes: ctx.cluster.nodes.subscribe(),
        keys: crate::lifecycle::claims_of_node,
    };
    queue::run(
        ctx,
        shutdown,
        "nodeclaim.consistency",
        |c| &c.node_claims,
        vec![nodes],
        move |ctx, claim| {
            let scanned = scanned.clone();
            async move { reconcile(&ctx, &scanned, &claim).await }
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NodeStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use k8s_openapi::jiff::Timestamp;
    use std::collections::BTreeMap;

    fn list(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect()
    }

    fn claim(requests: &[(&str, &str)], capacity: &[(&str, &str)], initialized: bool) -> NodeClaim {
        let mut claim: NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "c"},
            "spec": {"nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}, "requirements": []},
        }))
        .unwrap();
        claim.spec.resources.requests = list(requests);
        let mut status = karpenter_api::NodeClaimStatus {
            capacity: list(capacity),
            ..Default::default()
        };
        status.conditions.push(Condition {
            type_: INITIALIZED.into(),
            status: if initialized { "True" } else { "Unknown" }.into(),
            reason: INITIALIZED.into(),
            message: String::new(),
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
            observed_generation: None,
        });
        claim.status = Some(status);
        claim
    }

    fn node(capacity: &[(&str, &str)]) -> Node {
        Node {
            status: Some(NodeStatus {
                capacity: Some(list(capacity)),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// Upstream's node shape cases: a node launched with under 90% of a requested resource
    /// is reported; one at 90% or more, an unrequested resource, or an uninitialized claim
    /// is not.
    #[test]
    fn node_shape_as_upstream() {
        let promised = [("cpu", "16"), ("memory", "128Gi"), ("pods", "110")];
        let requests = [("cpu", "8"), ("memory", "64Gi")];
        let cases: Vec<(&str, NodeClaim, Node, Vec<&str>)> = vec![
            (
                "as promised",
                claim(&requests, &promised, true),
                node(&promised),
                vec![],
            ),
            (
                "memory short",
                claim(&requests, &promised, true),
                node(&[("cpu", "16"), ("memory", "64Gi"), ("pods", "110")]),
                vec!["expected 128Gi of resource memory, but found 64Gi (50.0% of expected)"],
            ),
            (
                "within 10%",
                claim(&requests, &promised, true),
                node(&[("cpu", "15"), ("memory", "120Gi"), ("pods", "110")]),
                vec![],
            ),
            (
                "unrequested pods ignored",
                claim(&requests, &promised, true),
                node(&[("cpu", "16"), ("memory", "128Gi"), ("pods", "10")]),
                vec![],
            ),
            (
                "missing from the node",
                claim(&requests, &promised, true),
                node(&[("memory", "128Gi")]),
                vec!["expected 16 of resource cpu, but found 0 (0.0% of expected)"],
            ),
            (
                "not initialized",
                claim(&requests, &promised, false),
                node(&[("cpu", "1")]),
                vec![],
            ),
        ];
        for (name, claim, node, expected) in cases {
            assert_eq!(node_shape_issues(&claim, &node), expected, "{name}");
        }
    }

    #[test]
    fn a_claim_is_checked_once_per_scan_period() {
        let scanned = LastScanned::default();
        let t0 = Instant::now();
        assert_eq!(scanned.wait("a", t0), None);
        // A check that did not finish (no Node yet, a failed write) leaves the claim due.
        assert_eq!(scanned.wait("a", t0 + Duration::from_secs(1)), None);
        scanned.checked("a", t0);
        assert_eq!(
            scanned.wait("a", t0 + Duration::from_secs(60)),
            Some(SCAN_PERIOD - Duration::from_secs(60))
        );
        assert_eq!(scanned.wait("b", t0), None, "per claim");
        assert_eq!(scanned.wait("a", t0 + SCAN_PERIOD), None);
    }

    /// Upstream's consistency suite through the check itself: a node as promised gets
    /// `ConsistentStateFound=True` and no event; one launched with far less memory than
    /// promised gets `False` and a `FailedConsistencyCheck` event naming the shortfall.
    #[tokio::test(start_paused = true)]
    async fn the_condition_and_events_follow_the_node_shape() {
        use karpenter_testkit::FakeApiServer;
        let clock = crate::Clock::following_tokio();
        let server = FakeApiServer::new();
        let promised = [("cpu", "16"), ("memory", "128Gi"), ("pods", "110")];
        let cases = [
            ("as promised", promised, None),
            (
                "memory short",
                [("cpu", "16"), ("memory", "64Gi"), ("pods", "110")],
                Some("expected 128Gi of resource memory, but found 64Gi (50.0% of expected)"),
            ),
        ];
        for (i, (_, capacity, _)) in cases.iter().enumerate() {
            let name = format!("c{i}");
            let mut c = claim(&[("cpu", "8"), ("memory", "64Gi")], &promised, true);
            c.metadata.name = Some(name.clone());
            let status = c.status.take().unwrap();
            server.create(&c).unwrap();
            let mut status = serde_json::to_value(status).unwrap();
            status["providerID"] = json!(format!("fake://z/{i}"));
            server
                .merge::<NodeClaim>("", &name, json!({"status": status}))
                .unwrap();
            let mut n = node(capacity);
            n.metadata.name = Some(format!("node-{i}"));
            n.spec = Some(k8s_openapi::api::core::v1::NodeSpec {
                provider_id: Some(format!("fake://z/{i}")),
                ..Default::default()
            });
            server.create(&n).unwrap();
        }
        let cloud = Arc::new(karpenter_cloudprovider::fake::FakeCloudProvider::default());
        let ctx = crate::Controller::with_clock(server.client(), cloud, Default::default(), clock)
            .context();
        ctx.cluster.list(&ctx.client).await.unwrap();
        let scanned = LastScanned::default();
        for (i, (case, _, issue)) in cases.iter().enumerate() {
            let name = format!("c{i}");
            let c = ctx.cluster.node_claims.get(&name).unwrap();
            reconcile(&ctx, &scanned, &c).await.unwrap();
            let c = server.get::<NodeClaim>("", &name).unwrap();
            let found = c
                .status
                .unwrap()
                .conditions
                .into_iter()
                .find(|c| c.type_ == CONSISTENT_STATE_FOUND)
                .map(|c| c.status);
            let expected = if issue.is_some() { "False" } else { "True" };
            assert_eq!(found.as_deref(), Some(expected), "{case}");
            let events: Vec<String> = server
                .list::<k8s_openapi::api::core::v1::Event>()
                .into_iter()
                .filter(|e| e.involved_object.name.as_deref() == Some(name.as_str()))
                .filter_map(|e| e.message)
                .collect();
            match issue {
                Some(i) => assert!(events.iter().any(|m| m.contains(i)), "{case}: {events:?}"),
                None => assert!(events.is_empty(), "{case}: no event expected: {events:?}"),
            }
        }
    }
}
