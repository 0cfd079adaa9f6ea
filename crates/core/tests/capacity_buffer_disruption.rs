//! Upstream's "Buffer Pods" disruption cases: a node holding a CapacityBuffer's capacity is
//! not emptied, and consolidation must still fit the buffer's virtual pods (they are pending).

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use karpenter_api::NillableDuration;
use karpenter_api::capacitybuffer::{
    CapacityBuffer, CapacityBufferSpec, CapacityBufferStatus, LocalObjectRef, condition,
};
use karpenter_core::disruption::{Blocked, Decision, Input, NodeState, decide};
use karpenter_core::instancetype::{InstanceType, fake};
use karpenter_core::provisioning::capacity_buffer::virtual_pods;
use karpenter_core::provisioning::scheduling::{NodePoolInput, SchedulerOptions};
use support::*;

const NOW: i64 = 1_717_372_800 + 12 * 3600;

fn at(second: i64) -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::from_second(second).unwrap()
}

fn pools() -> Vec<NodePoolInput> {
    let mut np = node_pool("default").0;
    np.spec.disruption.consolidate_after = NillableDuration::from_secs(0);
    let types: Vec<Arc<InstanceType>> = arc(fake::instance_types(16));
    vec![NodePoolInput {
        node_pool: np,
        instance_types: types,
    }]
}

/// A managed, initialized node of `fake-it-{cpu-1}` with `pods`, holding `buffer_pods`.
fn node(name: &str, cpu: usize, pods: Vec<Pod>, buffer_pods: usize) -> NodeState {
    let it = fake::instance_types(16).into_iter().nth(cpu - 1).unwrap();
    NodeState {
        name: name.into(),
        node_pool: Some("default".into()),
        labels: managed_node_labels(name, "default", &it, "on-demand"),
        allocatable: it.allocatable().clone(),
        capacity: it.capacity.clone(),
        pods,
        initialized: true,
        ready: true,
        price: it.offerings[0].price,
        created_at: at(NOW - 3600),
        last_pod_event: at(NOW - 3600),
        buffer_pods,
        ..Default::default()
    }
}

fn decide_with(nodes: &[NodeState], pending: &[Pod]) -> Decision {
    let pools = pools();
    decide(&Input {
        now: at(NOW),
        nodes,
        node_pools: &pools,
        pdbs: &[],
        pending_pods: pending,
        daemonset_pods: &[],
        options: SchedulerOptions {
            provider_labels: fake::provider_labels(),
            ..Default::default()
        },
        spot_to_spot: false,
    })
}

fn removed(d: &Decision) -> Vec<String> {
    d.commands
        .iter()
        .flat_map(|c| c.candidates.clone())
        .collect()
}

/// The virtual pods of a ready buffer of `replicas` chunks of `cpu`.
fn buffer_pods(replicas: i32, cpu: &str) -> Vec<Pod> {
    let buffer = CapacityBuffer {
        metadata: ObjectMeta {
            name: Some("headroom".into()),
            namespace: Some("default".into()),
            uid: Some("u".into()),
            ..Default::default()
        },
        spec: CapacityBufferSpec {
            pod_template_ref: Some(LocalObjectRef { name: "t".into() }),
            replicas: Some(replicas),
            ..Default::default()
        },
        status: Some(CapacityBufferStatus {
            replicas: Some(replicas),
            conditions: vec![Condition {
                type_: condition::READY_FOR_PROVISIONING.into(),
                status: "True".into(),
                reason: condition::REASON_RESOLVED.into(),
                message: String::new(),
                observed_generation: None,
                last_transition_time: Time("2024-06-03T00:00:00Z".parse().unwrap()),
            }],
            ..Default::default()
        }),
    };
    let shape = pod().labels(&[("app", "headroom")]).cpu(cpu).build();
    let template = PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(BTreeMap::from([("app".into(), "headroom".into())])),
            ..Default::default()
        }),
        spec: shape.spec,
    };
    virtual_pods(
        &buffer,
        &template,
        &Time("2024-06-03T00:00:00Z".parse().unwrap()),
    )
}

#[test]
fn a_node_with_only_buffer_pods_is_not_emptied() {
    let d = decide_with(
        &[node("buffer-node", 4, vec![], 5)],
        &buffer_pods(5, "500m"),
    );
    assert!(removed(&d).is_empty(), "{:?}", d.commands);
    let block = &d.blocked["buffer-node"];
    assert_eq!(block.kind, Blocked::Unconsolidatable);
    assert_eq!(block.reason, "Node \"buffer-node\" has buffer pods");
}

#[test]
fn a_buffer_node_is_emptied_once_its_buffer_is_gone() {
    let d = decide_with(
        &[node("buffer-node", 4, vec![], 3)],
        &buffer_pods(3, "500m"),
    );
    assert!(removed(&d).is_empty());
    // The buffer was deleted: the next provisioning round placed no virtual pods anywhere.
    let d = decide_with(&[node("buffer-node", 4, vec![], 0)], &[]);
    assert_eq!(removed(&d), ["buffer-node"]);
}

#[test]
fn buffer_only_nodes_are_never_consolidation_candidates() {
    let real = pod().labels(&[("app", "web")]).cpu("1").build();
    let d = decide_with(
        &[
            node("buffer-only", 16, vec![], 4),
            node("busy", 16, vec![real], 2),
        ],
        &buffer_pods(6, "1"),
    );
    assert!(
        !removed(&d).contains(&"buffer-only".to_string()),
        "{:?}",
        d.commands
    );
}

#[test]
fn consolidation_to_a_cheaper_node_keeps_room_for_the_buffer() {
    // The most expensive node runs one 1-CPU pod; the buffer's two 2-CPU virtual pods are
    // pending. A cheaper replacement is legitimate, but it must hold all three.
    let real = pod().labels(&[("app", "web")]).cpu("1").build();
    let d = decide_with(
        &[node("pricey", 16, vec![real.clone()], 2)],
        &buffer_pods(2, "2"),
    );
    assert_eq!(removed(&d), ["pricey"], "{:?}", d.blocked);
    let replacement = &d.commands[0].replacements[0];
    assert!(
        replacement.requests.get("cpu") >= 5000,
        "the replacement holds the real pod and the buffer: {:?}",
        replacement.requests
    );
    // Without the buffer the replacement is smaller.
    let d = decide_with(&[node("pricey", 16, vec![real], 0)], &[]);
    assert!(d.commands[0].replacements[0].requests.get("cpu") < 5000);
}

#[test]
fn consolidation_does_not_move_pods_into_a_buffers_room() {
    // `busy` runs a 2-CPU pod; `room` holds the buffer's two 1500m virtual pods. Moving the
    // pod onto `room` would save a node but drop the buffer (upstream ignores pending pods
    // there and relaunches for the buffer next round): refused.
    let real = pod().labels(&[("app", "web")]).cpu("2").build();
    let nodes = [
        node("busy", 4, vec![real.clone()], 0),
        node("room", 4, vec![], 2),
    ];
    let d = decide_with(&nodes, &buffer_pods(2, "1500m"));
    assert!(removed(&d).is_empty(), "{:?}", d.commands);
    // Without the buffer, the move is made.
    let nodes = [node("busy", 4, vec![real], 0), node("room", 4, vec![], 0)];
    let d = decide_with(&nodes, &[]);
    assert_eq!(removed(&d).len(), 1, "{:?}", d.blocked);
}
