//! Upstream's static provisioning and deprovisioning cases (pkg/controllers/static/*), as
//! tables over the pure decisions.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::*;
use crate::instancetype::fake;

fn pool(replicas: Option<i64>, nodes_limit: Option<&str>) -> NodePool {
    let mut spec = json!({"template": {"spec": {
        "nodeClassRef": {"group": "karpenter.test.sh", "kind": "TestNodeClass", "name": "default"},
        "requirements": [],
    }}});
    if let Some(r) = replicas {
        spec["replicas"] = json!(r);
    }
    if let Some(l) = nodes_limit {
        spec["limits"] = json!({"nodes": l});
    }
    serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "static"}, "spec": spec,
    }))
    .unwrap()
}

fn counts(active: usize, pending_disruption: usize, deleting: usize) -> Counts {
    Counts {
        active,
        pending_disruption,
        deleting,
    }
}

#[test]
fn scale_up_as_upstream() {
    use ScaleUp::*;
    // (replicas, nodes limit, active/pending/deleting, want)
    let cases = [
        // "should return early if nodepool replicas is nil"
        (None, None, counts(0, 0, 0), Satisfied),
        // "should return early if current node count exceeds desired replicas"
        (Some(1), None, counts(2, 0, 0), Satisfied),
        // "should create nodeclaims when current node count is less than desired replicas"
        (Some(2), None, counts(0, 0, 0), Create(2)),
        // "should create additional nodeclaims to reach desired replicas"
        (Some(3), None, counts(1, 0, 0), Create(2)),
        // "should not create additional nodeclaims" (launched, unregistered, no node: all count)
        (Some(3), None, counts(3, 0, 0), Satisfied),
        // "should not create additional nodeclaims when node limits are reached"
        (Some(3), Some("1"), counts(1, 0, 0), NodeLimitReached),
        // "should reserve nodepool nodecount …": 3 of 15 with a limit of 10 adds 7
        (Some(3), Some("10"), counts(0, 0, 0), Create(3)),
        (Some(15), Some("10"), counts(3, 0, 0), Create(7)),
        (Some(15), Some("10"), counts(10, 0, 0), NodeLimitReached),
        // "should handle zero replicas"
        (Some(0), None, counts(0, 0, 0), Satisfied),
        // "should handle large replica counts"
        (Some(1000), None, counts(0, 0, 0), Create(1000)),
        // A drift replacement is on its way: the pending one still counts.
        (Some(2), None, counts(1, 1, 0), Satisfied),
        // A deleted one is replaced, and holds its place under the limit until it is gone.
        (Some(2), None, counts(1, 0, 1), Create(1)),
        (Some(2), Some("2"), counts(1, 0, 1), NodeLimitReached),
        (Some(3), Some("3"), counts(1, 0, 1), Create(1)),
        // Pending disruption short of replicas: upstream creates all that are not active.
        (Some(3), None, counts(1, 1, 0), Create(2)),
    ];
    for (replicas, limit, c, want) in cases {
        assert_eq!(
            scale_up(&pool(replicas, limit), c),
            want,
            "{replicas:?} {limit:?} {c:?}"
        );
    }
}

#[test]
fn node_limit_reads_limits_nodes() {
    assert_eq!(node_limit(&pool(Some(1), None)), None);
    assert_eq!(node_limit(&pool(Some(1), Some("7"))), Some(7));
    assert_eq!(
        within_node_limit(&pool(Some(1), Some("7")), counts(2, 1, 1), 9),
        3
    );
    assert_eq!(
        within_node_limit(&pool(Some(1), Some("3")), counts(2, 1, 1), 9),
        0
    );
    assert_eq!(
        within_node_limit(&pool(Some(1), None), counts(2, 1, 1), 9),
        9
    );
}

fn pod(name: &str, extra: Value) -> Pod {
    let mut p =
        json!({"metadata": {"name": name, "namespace": "default"}, "spec": {"containers": []}});
    json_patch(&mut p, extra);
    serde_json::from_value(p).unwrap()
}

fn json_patch(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                json_patch(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (a, b) => *a = b,
    }
}

fn daemon(name: &str) -> Pod {
    pod(
        name,
        json!({"metadata": {"namespace": "kube-system", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u"}]}}),
    )
}

fn t(second: i64) -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::from_second(second).unwrap()
}

fn claim<'a>(name: &'a str, state: ClaimState, launched: bool, pods: &'a [Pod]) -> StaticClaim<'a> {
    StaticClaim {
        name,
        state,
        launched,
        pods: pods.iter().collect(),
        created_at: t(0),
        expire_after: None,
    }
}

#[test]
fn scale_down_counts_only_active_claims() {
    use ClaimState::*;
    let none: [Pod; 0] = [];
    // (replicas, claims, how many go)
    let cases: [(i64, Vec<StaticClaim<'_>>, usize); 6] = [
        // "should return early if current node count is less than or equal to desired replicas"
        (
            2,
            vec![
                claim("a", Active, true, &none),
                claim("b", Active, true, &none),
            ],
            0,
        ),
        // "should only consider running nodeclaims and not deleting nodeclaims"
        (
            1,
            vec![
                claim("a", Deleting, true, &none),
                claim("b", Deleting, true, &none),
                claim("c", Deleting, true, &none),
                claim("d", Active, true, &none),
            ],
            0,
        ),
        // "should terminate excess nodeclaims when current count exceeds desired replicas"
        (
            2,
            vec![
                claim("a", Active, true, &none),
                claim("b", Active, true, &none),
                claim("c", Active, true, &none),
                claim("d", Active, true, &none),
            ],
            2,
        ),
        // "should handle zero replicas by terminating all nodeclaims"
        (
            0,
            vec![
                claim("a", Active, true, &none),
                claim("b", Active, true, &none),
                claim("c", Active, true, &none),
            ],
            3,
        ),
        // "should handle no active nodeclaims gracefully"
        (0, vec![], 0),
        // A drift in progress (the candidate pending, its replacement active) is not a surplus.
        (
            2,
            vec![
                claim("a", Active, true, &none),
                claim("b", PendingDisruption, true, &none),
                claim("c", Active, false, &none),
            ],
            0,
        ),
    ];
    for (replicas, claims, want) in cases {
        let going = scale_down(&pool(Some(replicas), None), &claims, t(0));
        assert_eq!(going.len(), want, "replicas {replicas}: {going:?}");
        assert!(
            going
                .iter()
                .all(|n| claims.iter().any(|c| c.name == *n && c.state != Deleting))
        );
    }
    // Not a static NodePool: nothing.
    let claims = [claim("a", Active, true, &none)];
    assert!(scale_down(&pool(None, None), &claims, t(0)).is_empty());
}

#[test]
fn scale_down_takes_unlaunched_then_empty_nodes_first() {
    use ClaimState::*;
    let none: [Pod; 0] = [];
    let app = [pod("app", json!({}))];
    let ds = [daemon("ds")];
    // "should prioritize nodeclaims that have unresolved providerID"
    let claims = [
        claim("a", Active, true, &none),
        claim("b", Active, true, &none),
        claim("u1", Active, false, &none),
        claim("u2", Active, false, &none),
    ];
    assert_eq!(
        scale_down(&pool(Some(2), None), &claims, t(0)),
        ["u1", "u2"]
    );
    // "should prioritize empty nodes (with only daemonset pods) for termination"
    let claims = [
        claim("n0", Active, true, &ds),
        claim("n1", Active, true, &app),
        claim("n2", Active, true, &ds),
        claim("n3", Active, true, &app),
    ];
    assert_eq!(
        scale_down(&pool(Some(2), None), &claims, t(0)),
        ["n0", "n2"]
    );
    // "should terminate non-empty nodes when empty nodes are insufficient"
    let claims = [
        claim("n0", Active, true, &app),
        claim("n1", Active, true, &none),
        claim("n2", Active, true, &app),
        claim("n3", Active, true, &none),
    ];
    let going = scale_down(&pool(Some(1), None), &claims, t(0));
    assert_eq!(going.len(), 3);
    assert_eq!(&going[..2], ["n1", "n3"]);
}

/// Upstream's "scales down in disruption cost order": two nodes each of one low-cost pod,
/// two pods, a `do-not-disrupt` pod, and a DaemonSet pod only.
#[test]
fn scale_down_in_disruption_cost_order() {
    use ClaimState::*;
    let low = [pod(
        "system-pod-low",
        json!({"metadata": {"namespace": "kube-system"}}),
    )];
    let high = [
        pod(
            "system-pod-high",
            json!({"metadata": {"namespace": "kube-system"}}),
        ),
        pod("app-pod-high", json!({})),
    ];
    let dnd = [pod(
        "app-pod-dnd",
        json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}}),
    )];
    let ds = [daemon("dmn-pod")];
    let names = ["n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7"];
    let kinds: [&[Pod]; 4] = [&low, &high, &dnd, &ds];
    let claims: Vec<StaticClaim<'_>> = names
        .iter()
        .enumerate()
        .map(|(i, n)| claim(n, Active, true, kinds[i % 4]))
        .collect();
    let cases: [(i64, &[&str]); 4] = [
        (6, &["n0", "n1", "n2", "n4", "n5", "n6"]),
        (4, &["n1", "n2", "n5", "n6"]),
        (2, &["n2", "n6"]),
        (0, &[]),
    ];
    for (replicas, remaining) in cases {
        let going = scale_down(&pool(Some(replicas), None), &claims, t(0));
        let left: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| !going.contains(n))
            .collect();
        assert_eq!(left, remaining, "to {replicas}");
    }
}

#[test]
fn scale_down_prefers_nodes_near_expiry_and_lapsed_do_not_disrupt() {
    use ClaimState::*;
    let app = [pod("app", json!({}))];
    let mut young = claim("young", Active, true, &app);
    young.expire_after = Some(1000);
    young.created_at = t(900);
    let mut old = claim("old", Active, true, &app);
    old.expire_after = Some(1000);
    old.created_at = t(100);
    let claims = [young, old];
    assert_eq!(scale_down(&pool(Some(1), None), &claims, t(1000)), ["old"]);
    // A do-not-disrupt duration that has passed no longer holds the node back.
    let lapsed = [pod(
        "app",
        json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "10s"}},
               "status": {"startTime": "1970-01-01T00:00:00Z"}}),
    )];
    let held = [pod(
        "app",
        json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}}),
    )];
    let claims = [
        claim("a", Active, true, &held),
        claim("b", Active, true, &lapsed),
    ];
    assert_eq!(scale_down(&pool(Some(1), None), &claims, t(100)), ["b"]);
}

#[test]
fn the_node_claim_lists_compatible_types_cheapest_first() {
    let mut p = pool(Some(4), None);
    p.spec.template.metadata.labels =
        [("custom-label".to_string(), "custom-value".to_string())].into();
    // "should respect nodepool template specifications": the template's requirements and
    // labels go on the NodeClaim.
    p.spec.template.spec.requirements = serde_json::from_value(json!([
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "spot"]},
    ]))
    .unwrap();
    let types: Vec<_> = fake::instance_types(5)
        .into_iter()
        .rev()
        .chain([fake::FakeInstanceType::new("arm").arch("arm64").build()])
        .map(Arc::new)
        .collect();
    let input = NodePoolInput {
        node_pool: p.clone(),
        instance_types: types,
    };
    let claim = node_claim(&input, &[]).expect("a claim");
    let names: Vec<&str> = claim
        .instance_types
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "fake-it-0",
            "fake-it-1",
            "fake-it-2",
            "fake-it-3",
            "fake-it-4"
        ]
    );
    assert!(claim.pods.is_empty());
    assert_eq!(claim.requests, Resources::new());
    assert_eq!(
        claim.labels.get("custom-label").map(String::as_str),
        Some("custom-value")
    );
    let object = crate::provisioning::node_claim_for(&claim, &p);
    let reqs = serde_json::to_value(&object.spec.requirements).unwrap();
    let text = reqs.to_string();
    assert!(text.contains("\"kubernetes.io/arch\""), "{text}");
    assert!(text.contains("\"karpenter.sh/nodepool\""), "{text}");
    assert!(
        text.contains("\"fake-it-0\""),
        "the instance types are listed: {text}"
    );
    // No instance type can launch for it: no claim.
    let none = NodePoolInput {
        node_pool: p,
        instance_types: vec![Arc::new(
            fake::FakeInstanceType::new("arm").arch("arm64").build(),
        )],
    };
    assert!(node_claim(&none, &[]).is_none());
}

#[test]
fn decide_over_cluster_objects() {
    use karpenter_api::NodeClaim;
    let nc = |name: &str, pool: &str, node: Option<&str>, deleting: bool| -> NodeClaim {
        let mut c: NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": pool}},
            "spec": {"nodeClassRef": {"group": "g", "kind": "K", "name": "n"}, "requirements": []},
        }))
        .unwrap();
        if let Some(n) = node {
            c.status = Some(
                serde_json::from_value(json!({"nodeName": n, "providerID": format!("fake://{n}")}))
                    .unwrap(),
            );
        }
        if deleting {
            c.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ));
        }
        c
    };
    let claims = [
        nc("a", "static", Some("na"), false),
        nc("b", "static", Some("nb"), false),
        nc("c", "static", None, true),
        nc("x", "other", Some("nx"), false),
    ];
    let refs: Vec<&NodeClaim> = claims.iter().collect();
    let busy = pod("app", json!({}));
    let pods_on = |n: &str| {
        if n == "na" {
            vec![busy.clone()]
        } else {
            vec![]
        }
    };
    let none = std::collections::BTreeSet::new();
    let d = |replicas, marked: &std::collections::BTreeSet<String>| {
        decide(&pool(Some(replicas), None), &refs, marked, &pods_on, t(0))
    };
    assert_eq!(d(2, &none), Action::None);
    assert_eq!(d(4, &none), Action::Create(2));
    // The empty node goes first.
    assert_eq!(d(1, &none), Action::Delete(vec!["b".into()]));
    // A node disruption took counts as deleting: its replacement is created.
    let marked = ["nb".to_string()].into();
    assert_eq!(d(2, &marked), Action::Create(1));
    assert_eq!(
        decide(&pool(None, None), &refs, &none, &pods_on, t(0)),
        Action::None
    );
}
