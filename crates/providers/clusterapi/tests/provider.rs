//! The Cluster API provider against a management cluster (the fake API server with Cluster
//! API's CRDs, `v1beta1` and `v1beta2` served) and a workload cluster, with a stand-in for
//! Cluster API's MachineSet controller: upstream's cases for Create, Delete, Get, List and
//! GetInstanceTypes, and what upstream leaves open (concurrent launches, max size, a launch
//! resumed, rollback, drift).

mod support;

use std::time::Duration;

use http::StatusCode;
use karpenter_api::{NodeClaim, NodePool};
use karpenter_cloudprovider::{CloudProvider, CloudProviderError};
use karpenter_clusterapi::capi::{self, Version};
use karpenter_clusterapi::management::Management;
use karpenter_clusterapi::shape;
use karpenter_testkit::{Fault, Verb, eventually};
use serde_json::{Value, json};
use support::{Clusters, NS, ProviderIds, machine_deployment};
use tokio_util::sync::CancellationToken;

const BOTH: &[&str] = &["v1beta1", "v1beta2"];
const WAIT: Duration = Duration::from_secs(10);

fn node_pool(class: &str, taints: Value) -> NodePool {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.cluster.x-k8s.io", "kind": "ClusterAPINodeClass", "name": class},
            "requirements": [], "taints": taints}}},
    }))
    .unwrap()
}

fn node_claim(name: &str, requirements: Value, cpu: &str) -> NodeClaim {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "uid": format!("uid-{name}"), "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.cluster.x-k8s.io", "kind": "ClusterAPINodeClass", "name": "default"},
            "requirements": requirements,
            "resources": {"requests": {"cpu": cpu}},
        },
    }))
    .unwrap()
}

fn with_provider_id(mut claim: NodeClaim, provider_id: &str) -> NodeClaim {
    claim.status = Some(karpenter_api::NodeClaimStatus {
        provider_id: Some(provider_id.into()),
        ..Default::default()
    });
    claim
}

fn annotation<'a>(claim: &'a NodeClaim, key: &str) -> Option<&'a str> {
    claim
        .metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// Two MachineDeployments: `small` (2 CPUs, 0.10/h, zone a) and `large` (8 CPUs, 0.40/h,
/// zone b), plus one that is not a member.
async fn two_sizes(c: &Clusters) {
    let v = c.version;
    c.create_machine_deployment(machine_deployment(
        v,
        "small",
        ("small", "zone-a"),
        ("2", "4Gi"),
        "0.10",
        json!({}),
    ))
    .await;
    c.create_machine_deployment(machine_deployment(
        v,
        "large",
        ("large", "zone-b"),
        ("8", "32Gi"),
        "0.40",
        json!({}),
    ))
    .await;
    let mut other = machine_deployment(
        v,
        "other",
        ("other", "zone-a"),
        ("2", "4Gi"),
        "0.01",
        json!({}),
    );
    other["metadata"]["labels"] = json!({});
    c.create_machine_deployment(other).await;
    c.node_class("default", json!({}));
}

#[tokio::test]
async fn the_newest_served_version_is_spoken() {
    let c = Clusters::new(BOTH);
    let m = Management::discover(c.management.client()).await.unwrap();
    assert_eq!(m.version(), Version::V1beta2);
}

/// Upstream: GetInstanceTypes "returns an error when the NodeClass reference is not found" and
/// "returns the expected number of instance types when mixed MachineDeployments are available".
#[tokio::test]
async fn instance_types_of_the_selected_members() {
    let c = Clusters::new(BOTH);
    two_sizes(&c).await;
    let p = c.provider();
    let e = p
        .instance_types(&node_pool("missing", json!([])))
        .await
        .unwrap_err();
    assert!(matches!(e, CloudProviderError::NodeClassNotReady(_)), "{e}");
    let types = p
        .instance_types(&node_pool("default", json!([])))
        .await
        .unwrap();
    let mut names: Vec<&str> = types.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["large", "small"]);
    let large = types.iter().find(|t| t.name == "large").unwrap();
    assert_eq!(large.capacity.cpu, 8000);
    assert_eq!(large.offerings[0].zone, "zone-b");
    assert_eq!(large.offerings[0].price, 0.40);

    c.node_class(
        "only-small",
        json!({"scalableResourceSelector": {"matchExpressions": [
            {"key": "cluster.x-k8s.io/cluster-name", "operator": "In", "values": ["workload"]}]}}),
    );
    c.patch_machine_deployment(
        "large",
        json!({"metadata": {"labels": {"cluster.x-k8s.io/cluster-name": "elsewhere"}}}),
    )
    .await;
    tokio::time::sleep(support::fast().machine_deployments_ttl).await;
    let types = p
        .instance_types(&node_pool("only-small", json!([])))
        .await
        .unwrap();
    let names: Vec<&str> = types.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["small"]);
}

#[tokio::test]
async fn a_launch_scales_up_claims_a_machine_and_reports_its_provider_id() {
    let c = Clusters::new(BOTH);
    two_sizes(&c).await;
    let stop = CancellationToken::new();
    let (made, sets) = support::spawn_machine_sets(&c, ProviderIds::NextPass, stop.clone());
    let p = c.provider();

    let claim = node_claim("default-a", json!([]), "3");
    let launched = p.create(&claim).await.unwrap();
    assert_eq!(c.replicas("large").await, 1, "the cheapest that fits");
    assert_eq!(c.replicas("small").await, 0);
    let machines = c.machines().await;
    assert_eq!(machines.len(), 1);
    let m = &machines[0];
    assert_eq!(m.node_claim(), Some("default-a"));
    assert!(
        m.metadata
            .labels
            .as_ref()
            .unwrap()
            .contains_key(capi::MEMBER_LABEL)
    );
    let status = launched.status.clone().unwrap();
    assert_eq!(
        status.provider_id.as_deref(),
        Some(format!("test:///{}", m.name()).as_str())
    );
    assert_eq!(status.capacity["cpu"].0, "8");
    let labels = launched.metadata.labels.clone().unwrap();
    assert_eq!(labels["node.kubernetes.io/instance-type"], "large");
    assert_eq!(labels["topology.kubernetes.io/zone"], "zone-b");
    assert_eq!(labels["karpenter.sh/capacity-type"], "on-demand");
    assert_eq!(labels["karpenter.cluster.x-k8s.io/instance-cpu"], "8");
    assert_eq!(
        annotation(&launched, capi::MACHINE_ANNOTATION),
        Some(format!("{NS}/{}", m.name()).as_str())
    );
    let md = c.machine_deployment("large").await;
    assert_eq!(
        annotation(&launched, capi::TEMPLATE_HASH_ANNOTATION),
        Some(md.template_hash().as_str())
    );
    assert_eq!(
        annotation(&launched, capi::TEMPLATE_HASH_VERSION_ANNOTATION),
        Some(capi::TEMPLATE_HASH_VERSION)
    );

    // Asked again (a lost answer): the same Machine, no second scale-up.
    let again = p.create(&claim).await.unwrap();
    assert_eq!(again.status.unwrap().provider_id, status.provider_id);
    assert_eq!(c.replicas("large").await, 1);
    assert_eq!(made.lock().unwrap().created.len(), 1);
    stop.cancel();
    sets.await.unwrap();
}

#[tokio::test]
async fn concurrent_launches_on_one_machine_deployment_claim_different_machines() {
    let c = Clusters::new(BOTH);
    two_sizes(&c).await;
    let stop = CancellationToken::new();
    let (_, sets) = support::spawn_machine_sets(&c, ProviderIds::AtOnce, stop.clone());
    let p = c.provider();
    let small =
        json!([{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["small"]}]);
    let claims: Vec<NodeClaim> = (0..4)
        .map(|i| node_claim(&format!("default-{i}"), small.clone(), "1"))
        .collect();
    let launches = claims.iter().map(|claim| {
        let p = p.clone();
        async move { p.create(claim).await }
    });
    let results = futures::future::join_all(launches).await;
    let mut ids: Vec<String> = results
        .into_iter()
        .map(|r| r.unwrap().status.unwrap().provider_id.unwrap())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 4, "four launches, four Machines");
    assert_eq!(c.replicas("small").await, 4, "scaled by exactly four");
    let claimed: Vec<Option<String>> = c
        .machines()
        .await
        .iter()
        .map(|m| m.node_claim().map(str::to_string))
        .collect();
    assert_eq!(claimed.iter().flatten().count(), 4);
    stop.cancel();
    sets.await.unwrap();
}

#[tokio::test]
async fn two_providers_racing_for_one_machine_each_get_their_own() {
    // Two controllers (a failover, or two binaries) see the same free Machine: the
    // resourceVersion-checked claim lets one win, the other takes the next.
    let c = Clusters::new(BOTH);
    two_sizes(&c).await;
    c.patch_machine_deployment("small", json!({"spec": {"replicas": 2}}))
        .await;
    c.create_machine("free-1", "small", Some("test:///free-1"), json!({}))
        .await;
    c.create_machine("free-2", "small", Some("test:///free-2"), json!({}))
        .await;
    let (p1, p2) = (c.provider(), c.provider());
    let small =
        json!([{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["small"]}]);
    let (a, b) = (
        node_claim("default-a", small.clone(), "1"),
        node_claim("default-b", small, "1"),
    );
    let (ra, rb) = tokio::join!(p1.create(&a), p2.create(&b));
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    assert_ne!(
        ra.status.unwrap().provider_id,
        rb.status.unwrap().provider_id
    );
    assert_eq!(
        c.replicas("small").await,
        2,
        "both free Machines taken, nothing scaled"
    );
}

#[tokio::test]
async fn a_full_machine_deployment_passes_to_the_next_and_none_left_is_no_capacity() {
    let c = Clusters::new(BOTH);
    let v = c.version;
    c.create_machine_deployment(machine_deployment(
        v,
        "cheap",
        ("cheap", "zone-a"),
        ("4", "8Gi"),
        "0.10",
        json!({capi::MAX_SIZE_ANNOTATION: "1"}),
    ))
    .await;
    c.create_machine_deployment(machine_deployment(
        v,
        "dear",
        ("dear", "zone-a"),
        ("4", "8Gi"),
        "0.20",
        json!({capi::MAX_SIZE_ANNOTATION: "1"}),
    ))
    .await;
    c.node_class("default", json!({}));
    let stop = CancellationToken::new();
    let (_, sets) = support::spawn_machine_sets(&c, ProviderIds::AtOnce, stop.clone());
    let p = c.provider();
    p.create(&node_claim("default-1", json!([]), "1"))
        .await
        .unwrap();
    assert_eq!(
        (c.replicas("cheap").await, c.replicas("dear").await),
        (1, 0)
    );
    p.create(&node_claim("default-2", json!([]), "1"))
        .await
        .unwrap();
    assert_eq!(
        (c.replicas("cheap").await, c.replicas("dear").await),
        (1, 1)
    );
    let e = p
        .create(&node_claim("default-3", json!([]), "1"))
        .await
        .unwrap_err();
    assert!(
        matches!(e, CloudProviderError::InsufficientCapacity(_)),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("no available MachineDeployment fits"),
        "{e}"
    );
    stop.cancel();
    sets.await.unwrap();
}

#[tokio::test]
async fn a_machine_deployment_filled_since_it_was_listed_is_passed_over() {
    let c = Clusters::new(BOTH);
    let v = c.version;
    c.create_machine_deployment(machine_deployment(
        v,
        "cheap",
        ("cheap", "zone-a"),
        ("4", "8Gi"),
        "0.10",
        json!({capi::MAX_SIZE_ANNOTATION: "1"}),
    ))
    .await;
    c.create_machine_deployment(machine_deployment(
        v,
        "dear",
        ("dear", "zone-a"),
        ("4", "8Gi"),
        "0.20",
        json!({}),
    ))
    .await;
    c.node_class("default", json!({}));
    let mut options = support::fast();
    options.machine_deployments_ttl = Duration::from_secs(600);
    let p = std::sync::Arc::new(
        karpenter_clusterapi::provider::ClusterApiCloudProvider::new(
            Management::new(c.management.client(), c.version),
            kube::Api::all(c.workload.client()),
            options,
        ),
    );
    p.instance_types(&node_pool("default", json!([])))
        .await
        .unwrap();
    // Someone else (the Cluster Autoscaler, a person) takes the last replica meanwhile.
    c.patch_machine_deployment("cheap", json!({"spec": {"replicas": 1}}))
        .await;
    c.create_machine(
        "taken",
        "cheap",
        Some("test:///taken"),
        json!({capi::MEMBER_LABEL: ""}),
    )
    .await;
    let stop = CancellationToken::new();
    let (_, sets) = support::spawn_machine_sets(&c, ProviderIds::AtOnce, stop.clone());
    p.create(&node_claim("default-1", json!([]), "1"))
        .await
        .unwrap();
    assert_eq!(
        (c.replicas("cheap").await, c.replicas("dear").await),
        (1, 1)
    );
    stop.cancel();
    sets.await.unwrap();
}

#[tokio::test]
async fn a_launch_waits_for_the_provider_id_then_resumes_on_the_same_machine() {
    let c = Clusters::new(BOTH);
    two_sizes(&c).await;
    let stop = CancellationToken::new();
    let (made, sets) = support::spawn_machine_sets(&c, ProviderIds::Never, stop.clone());
    let p = c.provider();
    let claim = node_claim("default-a", json!([]), "1");
    let e = p.create(&claim).await.unwrap_err();
    match &e {
        CloudProviderError::Create { reason, cause } => {
            assert_eq!(reason, "MachineProviderIDPending");
            assert!(cause.message().contains("waiting for Machine"), "{e}");
        }
        other => panic!("{other}"),
    }
    let m = c.machines().await.remove(0);
    assert_eq!(m.node_claim(), Some("default-a"));
    // The infrastructure is up; the retry finds the claimed Machine.
    c.patch_machine(m.name(), json!({"spec": {"providerID": "test:///late"}}))
        .await;
    let launched = p.create(&claim).await.unwrap();
    assert_eq!(
        launched.status.unwrap().provider_id.as_deref(),
        Some("test:///late")
    );
    assert_eq!(c.replicas("small").await, 1);
    assert_eq!(made.lock().unwrap().created.len(), 1, "no second Machine");
    stop.cancel();
    sets.await.unwrap();
}

#[tokio::test]
async fn a_launch_that_finds_no_machine_leaves_its_replica_to_the_next() {
    let c = Clusters::new(BOTH);
    two_sizes(&c).await;
    let mut options = support::fast();
    options.claim_wait = Duration::from_millis(200);
    let p = std::sync::Arc::new(
        karpenter_clusterapi::provider::ClusterApiCloudProvider::new(
            Management::new(c.management.client(), c.version),
            kube::Api::all(c.workload.client()),
            options,
        ),
    );
    // No MachineSet controller yet: the replica is never made.
    let e = p
        .create(&node_claim("default-a", json!([]), "1"))
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("its replica stays for the next launch"),
        "{e}"
    );
    assert_eq!(c.replicas("small").await, 1);
    // The controller catches up; the next launch takes that replica's Machine.
    let stop = CancellationToken::new();
    let (made, sets) = support::spawn_machine_sets(&c, ProviderIds::AtOnce, stop.clone());
    eventually(WAIT, || {
        (made.lock().unwrap().created.len() == 1).then_some(())
    })
    .await
    .unwrap();
    p.create(&node_claim("default-b", json!([]), "1"))
        .await
        .unwrap();
    assert_eq!(c.replicas("small").await, 1, "not scaled again");
    assert_eq!(c.machines().await[0].node_claim(), Some("default-b"));
    stop.cancel();
    sets.await.unwrap();
}

#[tokio::test]
async fn a_launch_without_its_node_class_is_not_ready() {
    let c = Clusters::new(BOTH);
    let p = c.provider();
    let e = p
        .create(&node_claim("default-a", json!([]), "1"))
        .await
        .unwrap_err();
    assert!(matches!(e, CloudProviderError::NodeClassNotReady(_)), "{e}");
}

/// Upstream's Delete cases.
#[tokio::test]
async fn deletions_as_upstream() {
    let c = Clusters::new(BOTH);
    two_sizes(&c).await;
    let p = c.provider();
    // No providerID and no Machine: nothing to delete.
    let e = p
        .delete(&node_claim("some-node-claim", json!([]), "1"))
        .await
        .unwrap_err();
    assert!(matches!(e, CloudProviderError::NotFound(_)), "{e}");
    let e = p
        .delete(&with_provider_id(
            node_claim("c", json!([]), "1"),
            "clusterapi://some-provider-id",
        ))
        .await
        .unwrap_err();
    assert!(matches!(e, CloudProviderError::NotFound(_)), "{e}");
    assert!(
        e.to_string()
            .contains("unable to find Machine with provider ID"),
        "{e}"
    );

    // The owner MachineDeployment is missing.
    c.create_machine(
        "m-orphan",
        "non-existent-md",
        Some("test:///orphan"),
        json!({capi::MEMBER_LABEL: ""}),
    )
    .await;
    let e = p
        .delete(&with_provider_id(
            node_claim("c", json!([]), "1"),
            "test:///orphan",
        ))
        .await
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("cannot find an owner MachineDeployment for Machine \"m-orphan\""),
        "{e}"
    );

    // At zero replicas.
    c.create_machine(
        "m-zero",
        "small",
        Some("test:///zero"),
        json!({capi::MEMBER_LABEL: ""}),
    )
    .await;
    let e = p
        .delete(&with_provider_id(
            node_claim("c", json!([]), "1"),
            "test:///zero",
        ))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("is already at zero replicas"), "{e}");

    // "annotates the correct Machine and reduces replicas".
    c.patch_machine_deployment("large", json!({"spec": {"replicas": 2}}))
        .await;
    c.create_machine(
        "m-1",
        "large",
        Some("test:///m-1"),
        json!({capi::MEMBER_LABEL: ""}),
    )
    .await;
    c.create_machine(
        "m-2",
        "large",
        Some("test:///m-2"),
        json!({capi::MEMBER_LABEL: ""}),
    )
    .await;
    let claim = with_provider_id(node_claim("c", json!([]), "1"), "test:///m-1");
    p.delete(&claim).await.unwrap();
    let marked = |name: &str, machines: &[capi::Machine]| {
        machines
            .iter()
            .find(|m| m.name() == name)
            .unwrap()
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(capi::DELETE_MACHINE_ANNOTATION))
    };
    let machines = c.machines().await;
    assert!(marked("m-1", &machines) && !marked("m-2", &machines));
    assert_eq!(c.replicas("large").await, 1);
    // Asked again while the MachineSet catches up: nothing counted twice.
    p.delete(&claim).await.unwrap();
    assert_eq!(c.replicas("large").await, 1);
}

#[tokio::test]
async fn a_deletion_whose_scale_down_fails_takes_its_mark_back() {
    let c = Clusters::new(BOTH);
    two_sizes(&c).await;
    c.patch_machine_deployment("small", json!({"spec": {"replicas": 1}}))
        .await;
    c.create_machine(
        "m-1",
        "small",
        Some("test:///m-1"),
        json!({capi::MEMBER_LABEL: ""}),
    )
    .await;
    let p = c.provider();
    c.management.inject(
        Fault::error(
            Some(Verb::Update),
            Some("machinedeployments"),
            StatusCode::INTERNAL_SERVER_ERROR,
        )
        .subresource("scale")
        .times(1),
    );
    let claim = with_provider_id(node_claim("c", json!([]), "1"), "test:///m-1");
    let e = p.delete(&claim).await.unwrap_err();
    assert!(
        e.to_string().contains("unable to scale MachineDeployment"),
        "{e}"
    );
    let m = c.machines().await.remove(0);
    assert!(!m.is_leaving(), "the delete-machine mark is taken back");
    assert_eq!(c.replicas("small").await, 1);
    // The fault wore off: the retry goes through.
    p.delete(&claim).await.unwrap();
    assert_eq!(c.replicas("small").await, 0);
}

/// Upstream's Get cases.
#[tokio::test]
async fn get_by_provider_id() {
    let c = Clusters::new(BOTH);
    two_sizes(&c).await;
    let p = c.provider();
    let e = p.get("").await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "no providerID supplied to Get, cannot continue"
    );
    let e = p
        .get("clusterapi://the-wrong-provider-id")
        .await
        .unwrap_err();
    assert!(matches!(e, CloudProviderError::NotFound(_)), "{e}");
    c.create_machine(
        "m-1",
        "small",
        Some("test:///m-1"),
        json!({capi::MEMBER_LABEL: ""}),
    )
    .await;
    c.create_machine(
        "m-2",
        "small",
        Some("test:///m-2"),
        json!({capi::MEMBER_LABEL: ""}),
    )
    .await;
    let got = p.get("test:///m-1").await.unwrap();
    let status = got.status.unwrap();
    assert_eq!(status.provider_id.as_deref(), Some("test:///m-1"));
    assert_eq!(
        status.capacity["cpu"].0, "2",
        "from the MachineDeployment's annotations"
    );
    assert_eq!(
        got.metadata.labels.unwrap()["node.kubernetes.io/instance-type"],
        "small"
    );
}

/// Upstream's List cases: only claimed Machines.
#[tokio::test]
async fn list_returns_claimed_machines() {
    let c = Clusters::new(BOTH);
    two_sizes(&c).await;
    let p = c.provider();
    assert!(p.list().await.unwrap().is_empty());
    c.create_machine(
        "m-1",
        "small",
        Some("test:///m-1"),
        json!({capi::MEMBER_LABEL: ""}),
    )
    .await;
    c.create_machine("m-2", "small", Some("test:///m-2"), json!({}))
        .await;
    let listed = p.list().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        listed[0].status.as_ref().unwrap().provider_id.as_deref(),
        Some("test:///m-1")
    );
    // A Machine whose MachineDeployment's template labels every Machine a member counts only
    // when a NodeClaim claimed it.
    c.patch_machine_deployment(
        "large",
        json!({"spec": {"template": {"metadata": {"labels": {capi::MEMBER_LABEL: ""}}}}}),
    )
    .await;
    c.create_machine(
        "m-3",
        "large",
        Some("test:///m-3"),
        json!({capi::MEMBER_LABEL: ""}),
    )
    .await;
    tokio::time::sleep(support::fast().machine_deployments_ttl).await;
    assert_eq!(p.list().await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_changed_template_drifts_the_machines_made_from_the_old_one() {
    let c = Clusters::new(BOTH);
    two_sizes(&c).await;
    let stop = CancellationToken::new();
    let (_, sets) = support::spawn_machine_sets(&c, ProviderIds::AtOnce, stop.clone());
    let p = c.provider();
    let mut claim = node_claim("default-a", json!([]), "1");
    let launched = p.create(&claim).await.unwrap();
    claim.metadata.annotations = launched.metadata.annotations.clone();
    claim.status = launched.status.clone();
    assert_eq!(p.is_drifted(&claim).await.unwrap(), None);
    // Labels and annotations are not the template: no drift.
    c.patch_machine_deployment(
        "small",
        json!({"metadata": {"annotations": {shape::PRICE_ANNOTATION: "0.12"}}}),
    )
    .await;
    tokio::time::sleep(support::fast().machine_deployments_ttl).await;
    assert_eq!(p.is_drifted(&claim).await.unwrap(), None);
    c.patch_machine_deployment(
        "small",
        json!({"spec": {"template": {"spec": {"version": "v1.34.0"}}}}),
    )
    .await;
    tokio::time::sleep(support::fast().machine_deployments_ttl).await;
    assert_eq!(
        p.is_drifted(&claim).await.unwrap().as_deref(),
        Some(capi::DRIFT_REASON)
    );
    // A hash of another version is never compared.
    let mut other = claim.clone();
    other
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(capi::TEMPLATE_HASH_VERSION_ANNOTATION.into(), "v0".into());
    assert_eq!(p.is_drifted(&other).await.unwrap(), None);
    stop.cancel();
    sets.await.unwrap();
}
