//! The AWS provider's own loops in the controller, end to end: interruption messages on a
//! queue and EC2NodeClass status, against the fake API server, over a fake EC2.

mod support;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Event;
use karpenter_api::{NodeClaim, NodePool};
use karpenter_aws::ec2::Instance;
use karpenter_aws::http::Result;
use karpenter_aws::sqs::{Queue, QueueMessage};
use karpenter_controller::{Controller, Options};
use karpenter_testkit::{FakeApiServer, eventually};
use serde_json::json;
use support::{FakeEc2, Store, node_class, provider_with};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(20);

/// A queue in memory: what the test sends, and what the loop deleted.
#[derive(Clone, Default)]
struct MemoryQueue {
    pending: Arc<Mutex<VecDeque<QueueMessage>>>,
    deleted: Arc<Mutex<Vec<String>>>,
}

impl MemoryQueue {
    fn send(&self, id: &str, body: String) {
        self.pending.lock().unwrap().push_back(QueueMessage {
            receipt_handle: id.into(),
            body,
            sent_timestamp_ms: None,
        });
    }
}

impl Queue for MemoryQueue {
    async fn receive(&self) -> Result<Vec<QueueMessage>> {
        let batch: Vec<_> = self.pending.lock().unwrap().drain(..).collect();
        if batch.is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(batch)
    }
    async fn delete(&self, receipt_handle: String) -> Result<()> {
        self.deleted.lock().unwrap().push(receipt_handle);
        Ok(())
    }
}

fn event(detail_type: &str, detail: serde_json::Value) -> String {
    json!({
        "version": "0", "id": "1", "detail-type": detail_type, "source": "aws.ec2",
        "account": "123456789012", "time": "2026-11-22T13:52:02Z", "region": "us-east-1",
        "resources": [], "detail": detail,
    })
    .to_string()
}

fn setup() -> FakeApiServer {
    let server = FakeApiServer::new();
    server
        .install_crds(karpenter_aws::CRDS.iter().map(|c| c.definition()))
        .unwrap();
    for (pool, annotations) in [
        ("default", json!({})),
        (
            "batch",
            json!({"karpenter.k8s.aws/replace-on-rebalance": "true"}),
        ),
    ] {
        let pool: NodePool = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": pool, "annotations": annotations},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [],
            }}},
        }))
        .unwrap();
        server.create(&pool).unwrap();
    }
    // Launched just now, so registration is not overdue.
    let launched_at = k8s_openapi::jiff::Timestamp::now().to_string();
    for (name, pool, instance) in [
        ("a", "default", "i-1"),
        ("b", "default", "i-2"),
        ("c", "batch", "i-3"),
    ] {
        let claim: NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "labels": {
                "karpenter.sh/nodepool": pool,
                "node.kubernetes.io/instance-type": "m5.large",
                "topology.kubernetes.io/zone": "us-east-1a",
                "karpenter.sh/capacity-type": "spot",
            }},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
            "status": {"providerID": format!("aws:///us-east-1a/{instance}"), "conditions": [
                {"type": "Launched", "status": "True", "reason": "Launched", "message": "", "lastTransitionTime": launched_at},
            ]},
        }))
        .unwrap();
        server.create(&claim).unwrap();
    }
    server
}

fn gone_or_deleting(server: &FakeApiServer, name: &str) -> bool {
    server
        .get::<NodeClaim>("", name)
        .is_none_or(|c| c.metadata.deletion_timestamp.is_some())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupted_instances_are_replaced_and_rebalances_follow_the_node_pool() {
    let server = setup();
    let store = Store::default();
    store
        .0
        .lock()
        .unwrap()
        .insert("default".into(), node_class(json!({})));
    // The instances exist, so the lifecycle keeps their claims.
    let ec2 = FakeEc2::default();
    for id in ["i-1", "i-2", "i-3"] {
        ec2.instances.lock().unwrap().push(Instance {
            id: id.into(),
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            state: "running".into(),
            capacity_type: "spot".into(),
            ..Default::default()
        });
    }
    let provider = Arc::new(provider_with(ec2, store));
    let options = Options {
        disable_leader_election: true,
        resync: Duration::from_millis(200),
        ..Options::default()
    };
    let controller = Controller::new(server.client(), provider, options);
    let ctx = controller.context();
    let stop = CancellationToken::new();
    let queue = MemoryQueue::default();
    let running = tokio::spawn(controller.run(stop.clone()));
    let interruption = tokio::spawn(karpenter_aws::interruption_controller::run(
        ctx.clone(),
        queue.clone(),
        stop.clone(),
    ));
    eventually(WAIT, || {
        (ctx.cluster.node_claims.all().len() == 3).then_some(())
    })
    .await
    .expect("claims watched");

    // A spot interruption warning: the claim goes, the offering is unavailable.
    queue.send(
        "m1",
        event(
            "EC2 Spot Instance Interruption Warning",
            json!({"instance-id": "i-1", "instance-action": "terminate"}),
        ),
    );
    eventually(WAIT, || {
        queue
            .deleted
            .lock()
            .unwrap()
            .contains(&"m1".to_string())
            .then_some(())
    })
    .await
    .expect("message deleted");
    assert!(gone_or_deleting(&server, "a"), "claim a deleted");
    assert!(ctx.provider.unavailable().is_unavailable(
        "m5.large",
        "us-east-1a",
        "spot",
        Instant::now()
    ));
    let events: Vec<Event> = server.list();
    assert!(
        events
            .iter()
            .any(|e| e.reason.as_deref() == Some("SpotInterrupted")
                && e.involved_object.name.as_deref() == Some("a"))
    );

    // Rebalance recommendations: an event for the default pool's node, a replacement for the
    // pool that opted in.
    queue.send(
        "m2",
        event(
            "EC2 Instance Rebalance Recommendation",
            json!({"instance-id": "i-2"}),
        ),
    );
    queue.send(
        "m3",
        event(
            "EC2 Instance Rebalance Recommendation",
            json!({"instance-id": "i-3"}),
        ),
    );
    eventually(WAIT, || gone_or_deleting(&server, "c").then_some(()))
        .await
        .expect("claim c deleted");
    eventually(WAIT, || {
        (queue.deleted.lock().unwrap().len() == 3).then_some(())
    })
    .await
    .expect("messages deleted");
    assert!(
        !gone_or_deleting(&server, "b"),
        "a rebalance recommendation alone keeps the node"
    );
    let events: Vec<Event> = server.list();
    assert!(events.iter().any(
        |e| e.reason.as_deref() == Some("SpotRebalanceRecommendation")
            && e.involved_object.name.as_deref() == Some("b")
    ));

    // Unreadable messages are dropped, not retried forever.
    queue.send("m4", "garbage".into());
    eventually(WAIT, || {
        queue
            .deleted
            .lock()
            .unwrap()
            .contains(&"m4".to_string())
            .then_some(())
    })
    .await
    .expect("garbage dropped");
    let text = ctx.metrics.encode();
    assert!(
        text.contains(
            "karpenter_interruption_received_messages_total{message_type=\"spot_interrupted\"} 1"
        ),
        "{text}"
    );
    assert!(
        text.contains("karpenter_interruption_deleted_messages_total 4"),
        "{text}"
    );

    stop.cancel();
    let _ = running.await;
    let _ = interruption.await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_class_status_is_written() {
    use karpenter_aws::ec2nodeclass::EC2NodeClass;
    let server = FakeApiServer::new();
    server
        .install_crds(karpenter_aws::CRDS.iter().map(|c| c.definition()))
        .unwrap();
    let good = node_class(json!({}));
    // Neither role nor instance profile: resolvable selectors, no instance profile.
    let mut bad = node_class(json!({}));
    bad.metadata.name = Some("bad".into());
    bad.spec.role = None;
    server.create(&good).unwrap();
    server.create(&bad).unwrap();
    let store = Store::default();
    store.0.lock().unwrap().insert("default".into(), good);
    // Launch templates: one of a live NodeClass, one of a deleted one, one of another cluster.
    let ec2 = FakeEc2::default();
    for (name, class, cluster) in [
        ("karpenter.k8s.aws/live", "default", "test"),
        ("karpenter.k8s.aws/orphan", "removed", "test"),
        ("karpenter.k8s.aws/elsewhere", "removed", "other"),
    ] {
        let data = karpenter_aws::ec2::LaunchTemplateData {
            tags: [
                (
                    "karpenter.k8s.aws/ec2nodeclass".to_string(),
                    class.to_string(),
                ),
                ("eks:eks-cluster-name".to_string(), cluster.to_string()),
            ]
            .into(),
            ..Default::default()
        };
        ec2.templates.lock().unwrap().insert(name.into(), data);
    }
    let provider = Arc::new(provider_with(ec2.clone(), store));
    let options = Options {
        disable_leader_election: true,
        ..Options::default()
    };
    let controller = Controller::new(server.client(), provider, options);
    let ctx = controller.context();
    let stop = CancellationToken::new();
    let running = tokio::spawn(controller.run(stop.clone()));
    let status = tokio::spawn(karpenter_aws::nodeclass_status::run(ctx, stop.clone()));
    let written = eventually(WAIT, || {
        let c = server.get::<EC2NodeClass>("", "default")?;
        c.status.filter(|s| !s.conditions.is_empty())
    })
    .await
    .expect("status written");
    let ready = written
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(ready.status, "True");
    let validated = written
        .conditions
        .iter()
        .find(|c| c.type_ == "ValidationSucceeded")
        .expect("validated");
    assert_eq!(validated.status, "True");
    let calls: Vec<String> = ec2.checks().dry_runs.iter().map(|d| d.0.clone()).collect();
    assert!(
        calls.contains(&"CreateFleet".to_string()) && calls.contains(&"RunInstances".to_string()),
        "{calls:?}"
    );
    assert_eq!(written.subnets[0].id, "subnet-a");
    assert_eq!(written.security_groups[0].id, "sg-1");
    assert_eq!(written.amis[0].id, "ami-1");
    assert!(
        written
            .instance_profile
            .as_deref()
            .is_some_and(|p| p.starts_with("test_"))
    );
    let bad = eventually(WAIT, || {
        let c = server.get::<EC2NodeClass>("", "bad")?;
        c.status.filter(|s| !s.conditions.is_empty())
    })
    .await
    .expect("status written");
    let condition = |t: &str| {
        bad.conditions
            .iter()
            .find(|c| c.type_ == t)
            .map(|c| c.status.clone())
    };
    assert_eq!(condition("Ready").as_deref(), Some("False"));
    assert_eq!(condition("SubnetsReady").as_deref(), Some("True"));
    assert_eq!(condition("InstanceProfileReady").as_deref(), Some("False"));
    // A fix is picked up when the NodeClass changes, not at the next periodic resolution
    // (a minute away).
    server
        .merge::<EC2NodeClass>("", "bad", json!({"spec": {"role": "KarpenterNodeRole"}}))
        .unwrap();
    eventually(WAIT, || {
        let c = server.get::<EC2NodeClass>("", "bad")?;
        let ready = c
            .status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == "Ready")?;
        (ready.status == "True").then_some(())
    })
    .await
    .expect("the fixed NodeClass becomes Ready");
    // Validation made a template per NodeClass too; those of live NodeClasses stay.
    let collected = eventually(WAIT, || {
        let left: Vec<String> = ec2.templates.lock().unwrap().keys().cloned().collect();
        (!left.iter().any(|n| n.ends_with("/orphan"))).then_some(left)
    })
    .await
    .expect("launch templates collected");
    for kept in ["karpenter.k8s.aws/elsewhere", "karpenter.k8s.aws/live"] {
        assert!(
            collected.iter().any(|n| n == kept),
            "only the orphan of this cluster goes: {collected:?}"
        );
    }
    stop.cancel();
    let _ = running.await;
    let _ = status.await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capacity_reservation_interruption_replaces_the_node_and_frees_no_more_launches() {
    use karpenter_aws::ec2::CapacityReservationInfo;
    let server = setup();
    // Claim b runs in reservation cr-0123.
    server
        .merge::<NodeClaim>(
            "",
            "b",
            json!({"metadata": {"labels": {
                "karpenter.sh/capacity-type": "reserved",
                "karpenter.k8s.aws/capacity-reservation-id": "cr-0123",
            }}}),
        )
        .unwrap();
    let store = Store::default();
    store.0.lock().unwrap().insert(
        "default".into(),
        node_class(json!({"capacityReservationSelectorTerms": [{"id": "cr-0123"}]})),
    );
    let ec2 = FakeEc2::default();
    ec2.reservations
        .lock()
        .unwrap()
        .push(CapacityReservationInfo {
            id: "cr-0123".into(),
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            available: 2,
            reservation_type: "default".into(),
            state: "active".into(),
            ..Default::default()
        });
    for id in ["i-1", "i-2", "i-3"] {
        ec2.instances.lock().unwrap().push(Instance {
            id: id.into(),
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            state: "running".into(),
            capacity_type: "on-demand".into(),
            ..Default::default()
        });
    }
    let provider = Arc::new(provider_with(ec2, store));
    let options = Options {
        disable_leader_election: true,
        resync: Duration::from_millis(200),
        ..Options::default()
    };
    let controller = Controller::new(server.client(), provider, options);
    let ctx = controller.context();
    let stop = CancellationToken::new();
    let queue = MemoryQueue::default();
    let running = tokio::spawn(controller.run(stop.clone()));
    let interruption = tokio::spawn(karpenter_aws::interruption_controller::run(
        ctx.clone(),
        queue.clone(),
        stop.clone(),
    ));
    eventually(WAIT, || {
        (ctx.cluster.node_claims.all().len() == 3).then_some(())
    })
    .await
    .expect("claims watched");
    let mut pool = NodePool::default();
    pool.spec.template.spec.node_class_ref.name = "default".into();
    // Offerings a launch could go into: a full reservation stays listed, unavailable.
    let reserved_offerings = |types: Vec<Arc<karpenter_core::instancetype::InstanceType>>| {
        types
            .iter()
            .flat_map(|t| t.offerings.iter())
            .filter(|o| o.capacity_type == "reserved" && o.available)
            .count()
    };
    use karpenter_controller::cloudprovider::CloudProvider;
    let before = ctx.provider.instance_types(&pool).await.unwrap();
    assert_eq!(reserved_offerings(before), 1);

    queue.send(
        "m1",
        event(
            "EC2 Capacity Reservation Instance Interruption Warning",
            json!({"instance-id": "i-2", "instance-action": "terminate"}),
        ),
    );
    eventually(WAIT, || {
        queue
            .deleted
            .lock()
            .unwrap()
            .contains(&"m1".to_string())
            .then_some(())
    })
    .await
    .expect("message deleted");
    assert!(gone_or_deleting(&server, "b"), "claim b deleted");
    assert!(!gone_or_deleting(&server, "a"), "other claims stay");
    let events: Vec<Event> = server.list();
    assert!(events.iter().any(|e| e.reason.as_deref()
        == Some("CapacityReservationInstanceInterrupted")
        && e.involved_object.name.as_deref() == Some("b")));
    // The replacement is not planned into the reservation being reclaimed.
    let after = ctx.provider.instance_types(&pool).await.unwrap();
    assert_eq!(reserved_offerings(after), 0);
    let text = ctx.metrics.encode();
    assert!(
        text.contains(
            "karpenter_interruption_received_messages_total{message_type=\"capacity_reservation_interrupted\"} 1"
        ),
        "{text}"
    );
    stop.cancel();
    let _ = running.await;
    let _ = interruption.await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_in_an_expiring_capacity_block_are_replaced_ahead_of_ec2() {
    use karpenter_aws::ec2::CapacityReservationInfo;
    let server = setup();
    // Claim c's reservation is one EC2 no longer knows: asking for it must not hide the others.
    for (claim, reservation) in [("a", "cr-ending"), ("b", "cr-later"), ("c", "cr-gone")] {
        server
            .merge::<NodeClaim>(
                "",
                claim,
                json!({"metadata": {"labels": {
                    "karpenter.sh/capacity-type": "reserved",
                    "karpenter.k8s.aws/capacity-reservation-id": reservation,
                }}}),
            )
            .unwrap();
    }
    let store = Store::default();
    store
        .0
        .lock()
        .unwrap()
        .insert("default".into(), node_class(json!({})));
    let ec2 = FakeEc2::default();
    let now = k8s_openapi::jiff::Timestamp::now();
    let block = |id: &str, ends_in_minutes: i64| CapacityReservationInfo {
        id: id.into(),
        instance_type: "m5.large".into(),
        zone: "us-east-1a".into(),
        reservation_type: "capacity-block".into(),
        state: "active".into(),
        end_date: Some(
            (now + k8s_openapi::jiff::SignedDuration::from_mins(ends_in_minutes)).to_string(),
        ),
        ..Default::default()
    };
    // One block ends in 30 minutes (inside the 40-minute window), the other in two hours.
    *ec2.reservations.lock().unwrap() = vec![block("cr-ending", 30), block("cr-later", 120)];
    for id in ["i-1", "i-2", "i-3"] {
        ec2.instances.lock().unwrap().push(Instance {
            id: id.into(),
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            state: "running".into(),
            capacity_type: "reserved".into(),
            ..Default::default()
        });
    }
    let provider = Arc::new(provider_with(ec2, store));
    let options = Options {
        disable_leader_election: true,
        resync: Duration::from_millis(200),
        ..Options::default()
    };
    let controller = Controller::new(server.client(), provider, options);
    let ctx = controller.context();
    let stop = CancellationToken::new();
    let running = tokio::spawn(controller.run(stop.clone()));
    let expiration = tokio::spawn(karpenter_aws::reservation_expiration::run(
        ctx.clone(),
        stop.clone(),
    ));
    eventually(WAIT, || gone_or_deleting(&server, "a").then_some(()))
        .await
        .expect("the claim in the expiring block is deleted");
    assert!(
        !gone_or_deleting(&server, "b"),
        "a later block keeps its node"
    );
    assert!(
        !gone_or_deleting(&server, "c"),
        "a node of a reservation EC2 no longer knows stays"
    );
    stop.cancel();
    let _ = running.await;
    let _ = expiration.await;
}
