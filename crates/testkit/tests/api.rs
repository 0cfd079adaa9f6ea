//! The fake API server through a real `kube::Client`: the semantics the controller relies on.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use http::StatusCode;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::{Eviction, PodDisruptionBudget};
use karpenter_testkit::{FakeApiServer, Fault, Verb};
use kube::Api;
use kube::api::{DeleteParams, EvictParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

fn pod(name: &str, labels: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]},
    }))
    .unwrap()
}

fn code(e: kube::Error) -> u16 {
    match e {
        kube::Error::Api(s) => s.code,
        other => panic!("not an API error: {other}"),
    }
}

#[tokio::test]
async fn create_get_update_conflict_and_generate_name() {
    let server = FakeApiServer::new();
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    let created = pods
        .create(&PostParams::default(), &pod("a", json!({})))
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some());
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(
        code(
            pods.create(&PostParams::default(), &pod("a", json!({})))
                .await
                .unwrap_err()
        ),
        409
    );

    let mut stale = created.clone();
    let mut fresh = pods.get("a").await.unwrap();
    fresh.metadata.labels = Some([("x".into(), "1".into())].into());
    pods.replace("a", &PostParams::default(), &fresh)
        .await
        .unwrap();
    stale.metadata.labels = Some([("x".into(), "2".into())].into());
    assert_eq!(
        code(
            pods.replace("a", &PostParams::default(), &stale)
                .await
                .unwrap_err()
        ),
        409,
        "stale resourceVersion"
    );

    let mut generated = pod("", json!({}));
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("web-".into());
    let g = pods
        .create(&PostParams::default(), &generated)
        .await
        .unwrap();
    assert!(g.metadata.name.unwrap().starts_with("web-"));
    assert_eq!(code(pods.get("missing").await.unwrap_err()), 404);
}

#[tokio::test]
async fn status_subresource_and_patches() {
    let server = FakeApiServer::new();
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    pods.create(&PostParams::default(), &pod("a", json!({})))
        .await
        .unwrap();
    // The main endpoint ignores status…
    let p = pods
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"phase": "Running"}, "metadata": {"labels": {"l": "v"}}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(p.status.and_then(|s| s.phase), None);
    assert_eq!(p.metadata.labels.unwrap()["l"], "v");
    // …and /status changes nothing else.
    let p = pods
        .patch_status(
            "a",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"phase": "Running"}, "metadata": {"labels": {"l": "w"}}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(p.status.unwrap().phase.as_deref(), Some("Running"));
    assert_eq!(p.metadata.labels.unwrap()["l"], "v");
    // JSON patch with a failing test op changes nothing.
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/labels/l", "value": "nope"},
        {"op": "replace", "path": "/metadata/labels/l", "value": "x"},
    ]))
    .unwrap();
    assert_eq!(
        code(
            pods.patch("a", &PatchParams::default(), &Patch::<()>::Json(patch))
                .await
                .unwrap_err()
        ),
        422
    );
    // Server-side apply creates when absent.
    let applied = pods
        .patch("b", &PatchParams::apply("test").force(), &Patch::Apply(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "b"}, "spec": {"containers": []}})))
        .await
        .unwrap();
    assert_eq!(applied.metadata.name.as_deref(), Some("b"));
}

#[tokio::test]
async fn finalizers_hold_deletion_and_owners_cascade() {
    let server = FakeApiServer::new();
    let nodes: Api<Node> = Api::all(server.client());
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    let node: Node = serde_json::from_value(
        json!({"metadata": {"name": "n", "finalizers": ["karpenter.sh/termination"]}}),
    )
    .unwrap();
    let node = nodes.create(&PostParams::default(), &node).await.unwrap();
    let mut owned = pod("owned", json!({}));
    owned.metadata.owner_references = Some(vec![serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node", "name": "n", "uid": node.metadata.uid.clone().unwrap()
    })).unwrap()]);
    pods.create(&PostParams::default(), &owned).await.unwrap();

    nodes.delete("n", &DeleteParams::default()).await.unwrap();
    let held = nodes.get("n").await.unwrap();
    assert!(
        held.metadata.deletion_timestamp.is_some(),
        "a finalizer holds the node"
    );
    assert!(
        pods.get("owned").await.is_ok(),
        "nothing cascades before the owner is gone"
    );

    nodes
        .patch(
            "n",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    assert_eq!(
        code(nodes.get("n").await.unwrap_err()),
        404,
        "gone with its last finalizer"
    );
    assert_eq!(
        code(pods.get("owned").await.unwrap_err()),
        404,
        "owned pod cascaded"
    );
}

#[tokio::test]
async fn list_selectors_and_paging() {
    let server = FakeApiServer::new();
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    for i in 0..7 {
        let app = if i % 2 == 0 { "even" } else { "odd" };
        pods.create(
            &PostParams::default(),
            &pod(&format!("p{i}"), json!({"app": app})),
        )
        .await
        .unwrap();
    }
    let even = pods
        .list(&ListParams::default().labels("app=even"))
        .await
        .unwrap();
    assert_eq!(even.items.len(), 4);
    let mut names = Vec::new();
    let mut params = ListParams::default().limit(3);
    loop {
        let page = pods.list(&params).await.unwrap();
        assert!(page.items.len() <= 3);
        names.extend(page.items.into_iter().map(|p| p.metadata.name.unwrap()));
        match page.metadata.continue_ {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    assert_eq!(names, ["p0", "p1", "p2", "p3", "p4", "p5", "p6"]);
    let unbound = pods
        .list(&ListParams::default().fields("spec.nodeName="))
        .await
        .unwrap();
    assert_eq!(unbound.items.len(), 7);
}

async fn next(
    s: &mut futures::stream::BoxStream<'static, Result<String, watcher::Error>>,
) -> String {
    tokio::time::timeout(Duration::from_secs(5), s.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
}

#[tokio::test]
async fn watch_streams_changes_and_recovers_from_compaction() {
    let server = FakeApiServer::new();
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    pods.create(&PostParams::default(), &pod("before", json!({})))
        .await
        .unwrap();
    let mut stream = watcher(pods.clone(), watcher::Config::default())
        .applied_objects()
        .map_ok(|p| p.metadata.name.unwrap())
        .boxed();
    assert_eq!(next(&mut stream).await, "before");
    pods.create(&PostParams::default(), &pod("after", json!({})))
        .await
        .unwrap();
    assert_eq!(next(&mut stream).await, "after");

    // A watch resuming from a compacted resourceVersion gets 410 and the watcher relists.
    let lp = kube::api::WatchParams::default();
    let rv = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    pods.create(&PostParams::default(), &pod("later", json!({})))
        .await
        .unwrap();
    server.compact();
    let mut raw = pods.watch(&lp, &rv).await.unwrap().boxed();
    match tokio::time::timeout(Duration::from_secs(5), raw.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
    {
        kube::api::WatchEvent::Error(e) => assert_eq!(e.code, 410),
        other => panic!("expected 410 Gone, got {other:?}"),
    }
}

#[tokio::test]
async fn eviction_honours_pod_disruption_budgets() {
    let server = FakeApiServer::new();
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    for name in ["a", "b"] {
        pods.create(&PostParams::default(), &pod(name, json!({"app": "web"})))
            .await
            .unwrap();
        pods.patch_status(name, &PatchParams::default(), &Patch::Merge(json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})))
            .await
            .unwrap();
    }
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
    }))
    .unwrap();
    server.create(&pdb).unwrap();

    pods.evict("a", &EvictParams::default()).await.unwrap();
    assert_eq!(code(pods.get("a").await.unwrap_err()), 404);
    assert_eq!(
        code(pods.evict("b", &EvictParams::default()).await.unwrap_err()),
        429,
        "the last healthy pod stays"
    );
    assert!(pods.get("b").await.is_ok());

    let second = PodDisruptionBudget {
        metadata: kube::api::ObjectMeta {
            name: Some("web2".into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        ..pdb
    };
    server.create(&second).unwrap();
    assert_eq!(
        code(pods.evict("b", &EvictParams::default()).await.unwrap_err()),
        500,
        "two budgets cover b"
    );
    let _ = Eviction::default();
}

#[tokio::test]
async fn faults_fail_requests_then_wear_off() {
    let server = FakeApiServer::new();
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    server.inject(
        Fault::error(
            Some(Verb::Create),
            Some("pods"),
            StatusCode::INTERNAL_SERVER_ERROR,
        )
        .times(2),
    );
    assert_eq!(
        code(
            pods.create(&PostParams::default(), &pod("a", json!({})))
                .await
                .unwrap_err()
        ),
        500
    );
    assert_eq!(
        code(
            pods.create(&PostParams::default(), &pod("a", json!({})))
                .await
                .unwrap_err()
        ),
        500
    );
    pods.create(&PostParams::default(), &pod("a", json!({})))
        .await
        .unwrap();
    assert_eq!(server.count(Verb::Create, "pods"), 3);
}

#[tokio::test]
async fn the_cluster_stand_in_binds_pods_that_fit() {
    let server = FakeApiServer::new();
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": "n", "labels": {"kubernetes.io/hostname": "n"}},
        "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"}, "conditions": [{"type": "Ready", "status": "True"}]},
    }))
    .unwrap();
    server.create(&node).unwrap();
    for name in ["a", "b", "c"] {
        server.create(&pod(name, json!({}))).unwrap();
    }
    assert_eq!(
        server.reconcile_cluster(),
        2,
        "two 1-cpu pods fit a 2-cpu node"
    );
    let pending: Vec<Pod> = server
        .list::<Pod>()
        .into_iter()
        .filter(|p| p.spec.as_ref().unwrap().node_name.is_none())
        .collect();
    assert_eq!(pending.len(), 1);
    let condition = &pending[0]
        .status
        .as_ref()
        .unwrap()
        .conditions
        .as_ref()
        .unwrap()[0];
    assert_eq!(
        (condition.type_.as_str(), condition.reason.as_deref()),
        ("PodScheduled", Some("Unschedulable"))
    );
    server.reconcile_cluster();
    let running = server
        .list::<Pod>()
        .into_iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .count();
    assert_eq!(running, 2);
}

#[tokio::test]
async fn custom_resources_scale_and_discovery() {
    use k8s_openapi::api::autoscaling::v1::Scale;
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};

    let server = FakeApiServer::new();
    server
        .install_crds([json!({"spec": {
            "group": "scale.karpenter.test",
            "scope": "Namespaced",
            "names": {"plural": "gadgetsets", "kind": "GadgetSet"},
            "versions": [
                {"name": "v1beta1", "served": true, "storage": false, "subresources": {"status": {}, "scale": {
                    "specReplicasPath": ".spec.replicas",
                    "statusReplicasPath": ".status.replicas",
                    "labelSelectorPath": ".status.selector",
                }}},
                {"name": "v1beta2", "served": true, "storage": true, "subresources": {"status": {}, "scale": {
                    "specReplicasPath": ".spec.replicas",
                    "statusReplicasPath": ".status.replicas",
                    "labelSelectorPath": ".status.selector",
                }}},
            ],
        }})])
        .unwrap();
    let client = server.client();

    // Discovery lists the group's served versions.
    let request = http::Request::get("/apis/scale.karpenter.test")
        .body(Vec::new())
        .unwrap();
    let group: serde_json::Value = client.request(request).await.unwrap();
    assert_eq!(group["versions"][0]["version"], "v1beta1");
    assert_eq!(group["versions"][1]["version"], "v1beta2");
    let request = http::Request::get("/apis/absent.karpenter.test")
        .body(Vec::new())
        .unwrap();
    assert_eq!(
        code(
            client
                .request::<serde_json::Value>(request)
                .await
                .unwrap_err()
        ),
        404
    );

    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("scale.karpenter.test", "v1beta2", "GadgetSet"),
        "gadgetsets",
    );
    let sets: Api<DynamicObject> = Api::namespaced_with(client, "default", &ar);
    let mut set = DynamicObject::new("workers", &ar).within("default");
    set.data = json!({"spec": {"replicas": 1, "template": {"spec": {"version": "v1.33.0"}}}});
    sets.create(&PostParams::default(), &set).await.unwrap();
    let scale = sets.get_scale("workers").await.unwrap();
    assert_eq!(scale.spec.as_ref().unwrap().replicas, Some(1));
    assert_eq!(scale.status.as_ref().unwrap().replicas, 0);

    // A read-modify-write with the Scale's resourceVersion; a stale one is refused.
    let mut up: Scale = scale.clone();
    up.spec.as_mut().unwrap().replicas = Some(3);
    let written = sets
        .replace_scale("workers", &PostParams::default(), &up)
        .await
        .unwrap();
    assert_eq!(written.spec.unwrap().replicas, Some(3));
    let mut stale = scale;
    stale.spec.as_mut().unwrap().replicas = Some(5);
    assert_eq!(
        code(
            sets.replace_scale("workers", &PostParams::default(), &stale)
                .await
                .unwrap_err()
        ),
        409
    );
    let object = sets.get("workers").await.unwrap();
    assert_eq!(object.data["spec"]["replicas"], 3);
    assert_eq!(
        object.data["spec"]["template"]["spec"]["version"], "v1.33.0",
        "the rest of the spec is kept"
    );
    assert_eq!(object.metadata.generation, Some(2));

    // A patch writes unconditionally; a negative count is invalid.
    let patched = sets
        .patch_scale(
            "workers",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 0}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.spec.unwrap().replicas, Some(0));
    assert_eq!(
        code(
            sets.patch_scale(
                "workers",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": -1}})),
            )
            .await
            .unwrap_err()
        ),
        422
    );
    // Types without a scale subresource have none.
    let pods: Api<Pod> = Api::namespaced(server.client(), "default");
    pods.create(&PostParams::default(), &pod("p", json!({})))
        .await
        .unwrap();
    assert_eq!(code(pods.get_scale("p").await.unwrap_err()), 404);
}

#[tokio::test]
async fn named_views_log_who_sent_a_request() {
    let server = FakeApiServer::new();
    let pods: Api<Pod> = Api::namespaced(server.named("controller").client(), "default");
    pods.create(&PostParams::default(), &pod("a", json!({})))
        .await
        .unwrap();
    let _ = Api::<Pod>::namespaced(server.client(), "default")
        .get("a")
        .await
        .unwrap();
    let log: Vec<(Verb, Option<String>)> = server
        .requests()
        .into_iter()
        .map(|r| (r.verb, r.client))
        .collect();
    assert_eq!(
        log,
        [(Verb::Create, Some("controller".into())), (Verb::Get, None)],
        "one store, one log, each request under its sender's name"
    );
}
