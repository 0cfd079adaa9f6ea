//! The round harness (`support::cluster`) on the two simplest clusters upstream's suites start
//! from: a pending pod gets a NodeClaim, an empty node goes.

mod support;

use karpenter_core::disruption::Method;
use support::cluster::*;
use support::*;

#[test]
fn a_pending_pod_gets_a_nodeclaim() {
    let cluster = Cluster::new([node_pool("default")]).pods([pod().cpu("1").build()]);
    let provisioned = cluster.provision();
    assert_eq!(provisioned.claims.len(), 1, "{provisioned:?}");
    assert_eq!(provisioned.claims[0].node_pool, "default");
    assert!(provisioned.scheduled("pod"));
}

#[test]
fn an_empty_node_goes_and_a_busy_one_stays() {
    let cluster = Cluster::new([node_pool("default")])
        .node(managed("empty", "default", "default-instance-type"))
        .node(managed("busy", "default", "default-instance-type"))
        .pods([on("busy", replicated(pod().cpu("1").build()))]);
    let disrupted = cluster.disrupt();
    assert_eq!(disrupted.commands.len(), 1, "{disrupted:?}");
    assert_eq!(disrupted.commands[0].method, Method::Emptiness);
    assert_eq!(disrupted.removed(), ["empty"]);
}
