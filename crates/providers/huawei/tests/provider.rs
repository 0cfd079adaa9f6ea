//! The CloudProvider against the in-process, signature-checking CCE/ECS/VPC/BSS: what a
//! create asks CCE for, how it moves on past refusals and failed jobs (and cleans up), that a
//! retried create never makes a second node, get/list/delete (CCE's own node pools left alone),
//! drift, and BSS prices.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use karpenter_api::NodeClaim;
use karpenter_cloudprovider::{CloudProvider, CloudProviderError};
use karpenter_huawei::CCENodeClass;
use karpenter_huawei::ccenodeclass::{CCENodeClassStatus, Subnet};
use karpenter_huawei::provider::{HuaweiCloudProvider, HuaweiOptions, StaticState};
use serde_json::{Value, json};
use support::{CLUSTER, Mock, PROJECT, REGION, SUBNET_A, SUBNET_B};

type Provider = HuaweiCloudProvider<StaticState>;

fn ready_class(subnets: &[&str]) -> CCENodeClass {
    let mut class: CCENodeClass = serde_json::from_value(support::node_class()).unwrap();
    class.metadata.generation = Some(1);
    let now = k8s_openapi::jiff::Timestamp::now();
    class.status = Some(CCENodeClassStatus {
        subnets: subnets
            .iter()
            .map(|id| Subnet { id: id.to_string() })
            .collect(),
        conditions: serde_json::from_value(json!([
            {"type": "SubnetsReady", "status": "True", "reason": "SubnetsReady", "message": "",
             "lastTransitionTime": now, "observedGeneration": 1},
            {"type": "Ready", "status": "True", "reason": "Ready", "message": "",
             "lastTransitionTime": now, "observedGeneration": 1},
        ]))
        .unwrap(),
    });
    class
}

fn provider(mock: &Mock, class: CCENodeClass) -> Provider {
    let mut options = HuaweiOptions::new(CLUSTER, REGION);
    options.job_poll = Duration::from_millis(5);
    options.job_wait = Duration::from_secs(5);
    let state: StaticState = BTreeMap::from([("default".to_string(), class)]);
    HuaweiCloudProvider::new(support::client(mock), state, options)
}

fn claim(uid: &str, requirements: Value) -> NodeClaim {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": format!("default-{}", &uid[..5]), "uid": uid,
                     "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.huawei", "kind": "CCENodeClass", "name": "default"},
            "requirements": requirements,
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
        },
    }))
    .unwrap()
}

fn amd64() -> Value {
    json!([
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    ])
}

fn annotation<'a>(c: &'a NodeClaim, key: &str) -> &'a str {
    c.metadata.annotations.as_ref().unwrap()[key].as_str()
}

fn label<'a>(c: &'a NodeClaim, key: &str) -> &'a str {
    c.metadata.labels.as_ref().unwrap()[key].as_str()
}

#[tokio::test]
async fn a_create_asks_cce_for_the_cheapest_fitting_node() {
    let mock = Mock::start().await;
    let p = provider(&mock, ready_class(&[SUBNET_A, SUBNET_B]));
    let out = p
        .create(&claim("a1b2c3d4-0000-4000-8000-000000000001", amd64()))
        .await
        .unwrap();

    let created = mock.cloud.lock().unwrap().created.clone();
    assert_eq!(created.len(), 1);
    let spec = &created[0]["spec"];
    // c7.large.2 is the cheapest amd64 flavor; it sells only in zone a.
    assert_eq!(spec["flavor"], "c7.large.2");
    assert_eq!(spec["az"], "ap-southeast-3a");
    assert_eq!(spec["os"], "Huawei Cloud EulerOS 2.0");
    assert_eq!(spec["login"], json!({"sshKey": "ops-key"}));
    assert_eq!(spec["runtime"], json!({"name": "containerd"}));
    assert_eq!(
        spec["nodeNicSpec"]["primaryNic"]["subnetId"], SUBNET_A,
        "the subnet with the most free addresses"
    );
    assert_eq!(
        spec["k8sTags"]["karpenter.k8s.huawei/nodeclaim-uid"],
        "a1b2c3d4-0000-4000-8000-000000000001"
    );
    assert_eq!(spec["k8sTags"]["karpenter.sh/nodepool"], "default");
    assert_eq!(
        spec["taints"],
        json!([{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}])
    );
    assert_eq!(created[0]["metadata"]["name"], "default-a1b2c");

    // The create followed CCE's job until the ECS server existed.
    assert!(!mock.calls("GET", "/jobs/").is_empty());
    let node = mock.cloud.lock().unwrap().nodes[0].clone();
    let uid = node["metadata"]["uid"].as_str().unwrap();
    let status = out.status.as_ref().unwrap();
    assert_eq!(
        status.provider_id.as_deref(),
        Some(uid),
        "the bare CCE node id"
    );
    assert_eq!(annotation(&out, "karpenter.k8s.huawei/cce-node-id"), uid);
    assert_eq!(
        annotation(&out, "karpenter.k8s.huawei/ecs-server-id"),
        format!("srv-{uid}")
    );
    assert_eq!(
        annotation(&out, "karpenter.k8s.huawei/ccenodeclass-hash-version"),
        "rs-v1"
    );
    assert_eq!(
        annotation(&out, "karpenter.k8s.huawei/ccenodeclass-hash"),
        ready_class(&[SUBNET_A]).hash()
    );
    assert_eq!(
        label(&out, "node.kubernetes.io/instance-type"),
        "c7.large.2"
    );
    assert_eq!(
        label(&out, "topology.kubernetes.io/zone"),
        "ap-southeast-3a"
    );
    assert_eq!(label(&out, "karpenter.sh/capacity-type"), "on-demand");
    assert_eq!(label(&out, "kubernetes.io/arch"), "amd64");
    assert!(!status.allocatable.is_empty() && !status.capacity.is_empty());

    // Every call was signed for the project.
    for call in mock.cloud.lock().unwrap().calls.iter() {
        if call.path.starts_with("/api/v3/") {
            assert_eq!(
                call.headers.get("x-project-id").map(String::as_str),
                Some(PROJECT)
            );
        }
    }
}

#[tokio::test]
async fn a_retried_create_finds_its_node_instead_of_making_a_second() {
    let mock = Mock::start().await;
    let p = provider(&mock, ready_class(&[SUBNET_A]));
    let c = claim("b1b2c3d4-0000-4000-8000-000000000002", amd64());
    let first = p.create(&c).await.unwrap();
    let again = p.create(&c).await.unwrap();
    assert_eq!(mock.cloud.lock().unwrap().created.len(), 1);
    assert_eq!(
        first.status.as_ref().unwrap().provider_id,
        again.status.as_ref().unwrap().provider_id
    );
    assert_eq!(
        label(&again, "node.kubernetes.io/instance-type"),
        "c7.large.2"
    );
}

#[tokio::test]
async fn refusals_and_failed_jobs_move_on_to_the_next_candidate() {
    let mock = Mock::start().await;
    {
        let mut cloud = mock.cloud.lock().unwrap();
        cloud.refuse.insert(
            ("c7.large.2".into(), "ap-southeast-3a".into()),
            (
                "CCE_CM.0021".into(),
                "flavor c7.large.2 insufficient in specified az".into(),
            ),
        );
        cloud.refuse.insert(
            ("c7.xlarge.2".into(), "ap-southeast-3a".into()),
            ("CCE.01400025".into(), "Eni network is not supported".into()),
        );
        cloud.fail_job.insert(
            ("c7.xlarge.2".into(), "ap-southeast-3b".into()),
            "create server failed: flavor c7.xlarge.2 is sold out".into(),
        );
    }
    let p = provider(&mock, ready_class(&[SUBNET_A]));
    let out = p
        .create(&claim("c1b2c3d4-0000-4000-8000-000000000003", amd64()))
        .await
        .unwrap();
    assert_eq!(
        label(&out, "node.kubernetes.io/instance-type"),
        "c7.2xlarge.2"
    );

    let cloud = mock.cloud.lock().unwrap();
    let tried: Vec<(String, String)> = cloud
        .calls
        .iter()
        .filter(|c| c.method == "POST" && c.path.ends_with("/nodes"))
        .map(|c| {
            (
                c.body["spec"]["flavor"].as_str().unwrap().to_string(),
                c.body["spec"]["az"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        tried,
        [
            ("c7.large.2".to_string(), "ap-southeast-3a".to_string()),
            ("c7.xlarge.2".into(), "ap-southeast-3a".into()),
            ("c7.xlarge.2".into(), "ap-southeast-3b".into()),
            ("c7.2xlarge.2".into(), "ap-southeast-3a".into()),
        ]
    );
    // The node whose job failed was deleted, so nothing is left behind.
    assert_eq!(cloud.deleted.len(), 1);
    assert_eq!(cloud.nodes.len(), 1);
    drop(cloud);
    let now = Instant::now();
    for (flavor, zone) in [
        ("c7.large.2", "ap-southeast-3a"),
        ("c7.xlarge.2", "ap-southeast-3a"),
        ("c7.xlarge.2", "ap-southeast-3b"),
    ] {
        assert!(
            p.unavailable()
                .is_unavailable(flavor, zone, "on-demand", now),
            "{flavor} in {zone} is marked"
        );
    }
    assert!(
        !p.unavailable()
            .is_unavailable("c7.2xlarge.2", "ap-southeast-3a", "on-demand", now)
    );
}

#[tokio::test]
async fn when_every_candidate_is_refused_the_claim_gets_insufficient_capacity() {
    let mock = Mock::start().await;
    {
        let mut cloud = mock.cloud.lock().unwrap();
        for flavor in ["c7.large.2", "c7.xlarge.2", "c7.2xlarge.2"] {
            for zone in ["ap-southeast-3a", "ap-southeast-3b"] {
                cloud.refuse.insert(
                    (flavor.into(), zone.into()),
                    ("CCE_CM.0021".into(), "sold out".into()),
                );
            }
        }
    }
    let p = provider(&mock, ready_class(&[SUBNET_A]));
    let c = claim("d1b2c3d4-0000-4000-8000-000000000004", amd64());
    match p.create(&c).await {
        Err(CloudProviderError::InsufficientCapacity(_)) => {}
        other => panic!("expected insufficient capacity, got {other:?}"),
    }
    // Marked: the next create does not ask again.
    let before = mock.cloud.lock().unwrap().calls.len();
    assert!(matches!(
        p.create(&c).await,
        Err(CloudProviderError::InsufficientCapacity(_))
    ));
    let asked: usize = mock.cloud.lock().unwrap().calls[before..]
        .iter()
        .filter(|c| c.method == "POST" && c.path.ends_with("/nodes"))
        .count();
    assert_eq!(asked, 0);
}

#[tokio::test]
async fn a_class_that_is_not_ready_creates_nothing() {
    let mock = Mock::start().await;
    let mut class = ready_class(&[]);
    class.status = None;
    let p = provider(&mock, class);
    assert!(matches!(
        p.create(&claim("e1b2c3d4-0000-4000-8000-000000000005", amd64()))
            .await,
        Err(CloudProviderError::NodeClassNotReady(_))
    ));
    assert!(mock.cloud.lock().unwrap().created.is_empty());
}

#[tokio::test]
async fn get_list_and_delete_leave_cces_own_node_pools_alone() {
    let mock = Mock::start().await;
    mock.cloud
        .lock()
        .unwrap()
        .nodes
        .push(support::foreign_node());
    let p = provider(&mock, ready_class(&[SUBNET_A]));
    let c = claim("f1b2c3d4-0000-4000-8000-000000000006", amd64());
    let created = p.create(&c).await.unwrap();
    let id = created.status.unwrap().provider_id.unwrap();

    let listed = p.list().await.unwrap();
    assert_eq!(listed.len(), 1, "only the node Karpenter created");
    let listed = &listed[0];
    assert_eq!(
        listed.status.as_ref().unwrap().provider_id.as_deref(),
        Some(id.as_str())
    );
    assert_eq!(listed.metadata.name.as_deref(), Some("default-f1b2c"));
    assert_eq!(label(listed, "karpenter.sh/nodepool"), "default");
    assert!(listed.metadata.creation_timestamp.is_some());

    let got = p.get(&id).await.unwrap();
    assert_eq!(
        label(&got, "node.kubernetes.io/instance-type"),
        "c7.large.2"
    );
    assert!(matches!(
        p.get("aws:///us-east-1a/i-0123").await,
        Err(CloudProviderError::NotFound(_))
    ));

    // A claim that never recorded its providerID is resolved through its uid.
    p.delete(&c).await.unwrap();
    assert_eq!(mock.cloud.lock().unwrap().deleted, vec![id.clone()]);
    assert!(matches!(
        p.delete(&c).await,
        Err(CloudProviderError::NotFound(_))
    ));
    assert!(matches!(
        p.get(&id).await,
        Err(CloudProviderError::NotFound(_))
    ));
    assert_eq!(
        mock.cloud.lock().unwrap().nodes.len(),
        1,
        "the pool's node stays"
    );
}

#[tokio::test]
async fn drift_follows_the_class_hash_and_its_subnets() {
    let mock = Mock::start().await;
    let p = provider(&mock, ready_class(&[SUBNET_A, SUBNET_B]));
    let c = claim("a2b2c3d4-0000-4000-8000-000000000007", amd64());
    let mut launched = p.create(&c).await.unwrap();
    launched.metadata.name = c.metadata.name.clone();
    launched.spec = c.spec.clone();
    assert_eq!(p.is_drifted(&launched).await.unwrap(), None);

    // The class moves to subnet B only: the node (in A) has drifted.
    let p2 = provider(&mock, ready_class(&[SUBNET_B]));
    assert_eq!(
        p2.is_drifted(&launched).await.unwrap().as_deref(),
        Some("SubnetDrift")
    );

    // A static field changes: the hash differs.
    let mut class = ready_class(&[SUBNET_A]);
    class.spec.ecs_group_id = Some("46ebaf04-ca42-48ca-8057-0b96e6126e1b".into());
    let p3 = provider(&mock, class);
    assert_eq!(
        p3.is_drifted(&launched).await.unwrap().as_deref(),
        Some("NodeClassDrift")
    );
}

#[tokio::test]
async fn prices_come_from_bss_and_unknown_specs_are_dropped() {
    let mock = Mock::start().await;
    mock.cloud
        .lock()
        .unwrap()
        .unpriced_specs
        .insert("kc1.large.2.linux".into());
    let p = provider(&mock, ready_class(&[SUBNET_A]));
    let pool: karpenter_api::NodePool = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.huawei",
            "kind": "CCENodeClass", "name": "default"}, "requirements": []}}},
    }))
    .unwrap();
    let types = p.instance_types(&pool).await.unwrap();
    let price = |name: &str| {
        types
            .iter()
            .find(|t| t.name == name)
            .map(|t| t.offerings[0].price)
    };
    assert_eq!(price("c7.xlarge.2"), Some(0.92));
    assert_eq!(price("c7.large.2"), Some(0.46));
    let bss = mock.calls("POST", "/v2/bills/ratings/on-demand-resources");
    assert_eq!(
        bss.len(),
        2,
        "asked again without the spec BSS does not know"
    );
    assert_eq!(
        bss[0].headers.get("x-domain-id").map(String::as_str),
        Some(support::DOMAIN),
        "BSS is scoped to the account"
    );
    let zones_of = |name: &str| -> Vec<String> {
        types
            .iter()
            .find(|t| t.name == name)
            .map(|t| t.offerings.iter().map(|o| o.zone.clone()).collect())
            .unwrap_or_default()
    };
    assert_eq!(zones_of("c7.large.2"), ["ap-southeast-3a"], "sold out in b");
    assert_eq!(
        zones_of("c7.xlarge.2"),
        ["ap-southeast-3a", "ap-southeast-3b"]
    );
}
