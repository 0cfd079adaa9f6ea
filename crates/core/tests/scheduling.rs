//! Upstream's scheduling suite (`pkg/controllers/provisioning/scheduling/suite_test.go`): custom
//! constraints, well-known labels, preferential fallback, instance-type compatibility,
//! binpacking, in-flight and existing nodes, taints, DaemonSets, limits and weights.

mod support;

use karpenter_api::Operator;
use karpenter_core::instancetype::fake::{
    self, FakeInstanceType, GPU_VENDOR_A, GPU_VENDOR_B, INTEGER_LABEL, SIZE_LABEL, SPECIAL_LABEL,
};
use karpenter_core::provisioning::scheduling::BoundPod;
use support::*;

/// What must happen to the pod.
enum Expect {
    /// Scheduled on a new node with these labels.
    Labels(&'static [(&'static str, &'static str)]),
    /// Scheduled on a new node.
    Scheduled,
    /// Not scheduled.
    Unschedulable,
}
use Expect::*;

fn check(name: &str, env: &Env, pod: support::PodBuilder, expect: Expect) -> Result<(), String> {
    let outcome = env.provision(&[pod.build()]);
    let ok = match expect {
        Unschedulable => !outcome.scheduled(0),
        Scheduled => outcome.scheduled(0),
        Labels(labels) => {
            outcome.scheduled(0) && labels.iter().all(|(k, v)| outcome.label(0, k) == Some(v))
        }
    };
    if ok {
        Ok(())
    } else {
        let got = if outcome.scheduled(0) {
            format!("scheduled with {:?}", outcome.node(0).labels)
        } else {
            format!("unschedulable: {:?}", outcome.results.pod_errors.get(&0))
        };
        Err(format!("{name}: {got}"))
    }
}

fn run(cases: Vec<(&str, Env, support::PodBuilder, Expect)>) {
    let failures: Vec<String> = cases
        .into_iter()
        .filter_map(|(name, env, pod, expect)| check(name, &env, pod, expect).err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn default_pool() -> PoolBuilder {
    node_pool("default")
}

fn env() -> Env {
    Env::new(default_pool())
}

fn labelled(key: &str, value: &str) -> Env {
    Env::new(default_pool().label(key, value))
}

fn zones(values: &[&str]) -> Env {
    Env::new(default_pool().only(ZONE, Operator::In, values))
}

#[test]
fn custom_constraints() {
    use Operator::*;
    let custom = || Env::new(default_pool().require("test-key", In, &["test-value"]));
    run(vec![
        // NodePool with labels.
        (
            "unconstrained pod gets the NodePool's labels",
            labelled("test-key", "test-value"),
            pod(),
            Labels(&[("test-key", "test-value")]),
        ),
        (
            "conflicting node selector",
            labelled("test-key", "test-value"),
            pod().node_selector(&[("test-key", "different-value")]),
            Unschedulable,
        ),
        (
            "node selector with an undefined key",
            env(),
            pod().node_selector(&[("test-key", "test-value")]),
            Unschedulable,
        ),
        (
            "matching requirement",
            labelled("test-key", "test-value"),
            pod().require(&[("test-key", "In", &["test-value", "another-value"])]),
            Labels(&[("test-key", "test-value")]),
        ),
        (
            "conflicting requirement",
            labelled("test-key", "test-value"),
            pod().require(&[("test-key", "In", &["another-value"])]),
            Unschedulable,
        ),
        // NodePool with requirements on a custom key.
        (
            "In with an undefined key",
            env(),
            pod().require(&[("test-key", "In", &["test-value"])]),
            Unschedulable,
        ),
        (
            "NotIn with an undefined key",
            env(),
            pod().require(&[("test-key", "NotIn", &["test-value"])]),
            Scheduled,
        ),
        (
            "Exists with an undefined key",
            env(),
            pod().require(&[("test-key", "Exists", &[])]),
            Unschedulable,
        ),
        (
            "DoesNotExist with an undefined key",
            env(),
            pod().require(&[("test-key", "DoesNotExist", &[])]),
            Scheduled,
        ),
        (
            "unconstrained pod on a custom requirement",
            custom(),
            pod(),
            Labels(&[("test-key", "test-value")]),
        ),
        (
            "matching value with In",
            custom(),
            pod().require(&[("test-key", "In", &["test-value"])]),
            Labels(&[("test-key", "test-value")]),
        ),
        (
            "matching value with NotIn",
            custom(),
            pod().require(&[("test-key", "NotIn", &["test-value"])]),
            Unschedulable,
        ),
        (
            "Exists on a defined key",
            custom(),
            pod().require(&[("test-key", "Exists", &[])]),
            Labels(&[("test-key", "test-value")]),
        ),
        (
            "DoesNotExist on a defined key",
            custom(),
            pod().require(&[("test-key", "DoesNotExist", &[])]),
            Unschedulable,
        ),
        (
            "different value with In",
            custom(),
            pod().require(&[("test-key", "In", &["another-value"])]),
            Unschedulable,
        ),
        (
            "different value with NotIn",
            custom(),
            pod().require(&[("test-key", "NotIn", &["another-value"])]),
            Labels(&[("test-key", "test-value")]),
        ),
        (
            "Exists does not overwrite the value",
            Env::new(default_pool().require("test-key", In, &["test-value", "other"])),
            pod().require(&[("test-key", "Exists", &[])]),
            Scheduled,
        ),
        // Restricted and kubernetes domains.
        (
            "node selector on a restricted label",
            env(),
            pod().node_selector(&[(HOSTNAME, "red-node")]),
            Unschedulable,
        ),
        (
            "node selector in the kubernetes.io domain",
            labelled("kubernetes.io/team", "a"),
            pod().node_selector(&[("kubernetes.io/team", "a")]),
            Labels(&[("kubernetes.io/team", "a")]),
        ),
        (
            "node selector in a kubernetes.io subdomain",
            labelled("sub.kubernetes.io/team", "a"),
            pod().node_selector(&[("sub.kubernetes.io/team", "a")]),
            Labels(&[("sub.kubernetes.io/team", "a")]),
        ),
    ]);
}

#[test]
fn well_known_labels() {
    use Operator::*;
    let integer = |op: Operator, v: &str| Env::new(default_pool().require(INTEGER_LABEL, op, &[v]));
    run(vec![
        (
            "NodePool zone",
            zones(&["test-zone-2"]),
            pod(),
            Labels(&[(ZONE, "test-zone-2")]),
        ),
        (
            "node selector zone",
            zones(&["test-zone-1", "test-zone-2"]),
            pod().node_selector(&[(ZONE, "test-zone-2")]),
            Labels(&[(ZONE, "test-zone-2")]),
        ),
        (
            "unknown zone",
            zones(&["test-zone-1"]),
            pod().node_selector(&[(ZONE, "unknown")]),
            Unschedulable,
        ),
        (
            "zone outside the NodePool",
            zones(&["test-zone-1"]),
            pod().node_selector(&[(ZONE, "test-zone-2")]),
            Unschedulable,
        ),
        (
            "Operator=In",
            env(),
            pod().require(&[(ZONE, "In", &["test-zone-3"])]),
            Labels(&[(ZONE, "test-zone-3")]),
        ),
        (
            "Operator=Gt",
            integer(Gt, "8"),
            pod(),
            Labels(&[(INTEGER_LABEL, "16")]),
        ),
        (
            "Operator=Lt",
            integer(Lt, "8"),
            pod(),
            Labels(&[(INTEGER_LABEL, "2")]),
        ),
        (
            "Operator=Gte",
            integer(Gte, "16"),
            pod(),
            Labels(&[(INTEGER_LABEL, "16")]),
        ),
        (
            "Operator=Lte",
            integer(Lte, "2"),
            pod(),
            Labels(&[(INTEGER_LABEL, "2")]),
        ),
        (
            "incompatible In",
            env(),
            pod().require(&[(ZONE, "In", &["unknown"])]),
            Unschedulable,
        ),
        (
            "Operator=NotIn",
            env(),
            pod().require(&[(ZONE, "NotIn", &["test-zone-1", "test-zone-2", "unknown"])]),
            Labels(&[(ZONE, "test-zone-3")]),
        ),
        (
            "incompatible NotIn",
            env(),
            pod().require(&[(
                ZONE,
                "NotIn",
                &["test-zone-1", "test-zone-2", "test-zone-3", "unknown"],
            )]),
            Unschedulable,
        ),
        (
            "compatible preference and requirement",
            env(),
            pod()
                .require(&[(
                    ZONE,
                    "In",
                    &["test-zone-1", "test-zone-2", "test-zone-3", "unknown"],
                )])
                .prefer(1, &[(ZONE, "In", &["test-zone-2", "unknown"])]),
            Labels(&[(ZONE, "test-zone-2")]),
        ),
        (
            "incompatible preference is relaxed",
            env(),
            pod()
                .require(&[(
                    ZONE,
                    "In",
                    &["test-zone-1", "test-zone-2", "test-zone-3", "unknown"],
                )])
                .prefer(1, &[(ZONE, "In", &["unknown"])]),
            Scheduled,
        ),
        (
            "compatible NotIn preference",
            env(),
            pod()
                .require(&[(
                    ZONE,
                    "In",
                    &["test-zone-1", "test-zone-2", "test-zone-3", "unknown"],
                )])
                .prefer(1, &[(ZONE, "NotIn", &["test-zone-1", "test-zone-3"])]),
            Labels(&[(ZONE, "test-zone-2")]),
        ),
        (
            "incompatible NotIn preference is relaxed",
            env(),
            pod()
                .require(&[(
                    ZONE,
                    "In",
                    &["test-zone-1", "test-zone-2", "test-zone-3", "unknown"],
                )])
                .prefer(
                    1,
                    &[(
                        ZONE,
                        "NotIn",
                        &["test-zone-1", "test-zone-2", "test-zone-3"],
                    )],
                ),
            Scheduled,
        ),
        (
            "node selector, preference and requirement combined",
            env(),
            pod()
                .node_selector(&[(ZONE, "test-zone-3")])
                .require(&[(ZONE, "In", &["test-zone-2", "test-zone-3"])])
                .prefer(1, &[(ZONE, "In", &["test-zone-1", "test-zone-3"])]),
            Labels(&[(ZONE, "test-zone-3")]),
        ),
        (
            "multidimensional constraints",
            env(),
            pod()
                .node_selector(&[(ZONE, "test-zone-3")])
                .require(&[
                    (ZONE, "In", &["test-zone-1", "test-zone-3"]),
                    (
                        INSTANCE_TYPE,
                        "In",
                        &["default-instance-type", "arm-instance-type"],
                    ),
                ])
                .prefer(1, &[(INSTANCE_TYPE, "In", &["arm-instance-type"])]),
            Labels(&[(ZONE, "test-zone-3"), (INSTANCE_TYPE, "arm-instance-type")]),
        ),
        (
            "deprecated zone label is normalized",
            env(),
            pod().node_selector(&[("failure-domain.beta.kubernetes.io/zone", "test-zone-2")]),
            Labels(&[(ZONE, "test-zone-2")]),
        ),
        (
            "deprecated arch label is normalized",
            env(),
            pod().node_selector(&[("beta.kubernetes.io/arch", "arm64")]),
            Labels(&[(ARCH, "arm64")]),
        ),
        (
            "capacity type spot",
            env(),
            pod().node_selector(&[(CAPACITY_TYPE, "spot")]),
            Labels(&[(CAPACITY_TYPE, "spot")]),
        ),
        (
            "capacity type on-demand",
            env(),
            pod().node_selector(&[(CAPACITY_TYPE, "on-demand")]),
            Labels(&[(CAPACITY_TYPE, "on-demand")]),
        ),
        (
            "spot is not offered in zone 3",
            env(),
            pod().node_selector(&[(CAPACITY_TYPE, "spot"), (ZONE, "test-zone-3")]),
            Unschedulable,
        ),
        (
            "provider label not set by the NodePool",
            env(),
            pod().node_selector(&[(SIZE_LABEL, "large")]),
            Labels(&[(INSTANCE_TYPE, "arm-instance-type")]),
        ),
        (
            "optional exotic label",
            env(),
            pod().node_selector(&[(SPECIAL_LABEL, "optional")]),
            Labels(&[(SIZE_LABEL, "large")]),
        ),
        (
            "exotic label disallowed",
            env(),
            pod().require(&[(SPECIAL_LABEL, "DoesNotExist", &[])]),
            Labels(&[(SIZE_LABEL, "small")]),
        ),
    ]);
}

#[test]
fn preferential_fallback() {
    run(vec![
        (
            "the final required term is not relaxed",
            env(),
            pod().require(&[(ZONE, "In", &["invalid"])]),
            Unschedulable,
        ),
        (
            "multiple required terms are relaxed in order",
            env(),
            pod()
                .require(&[(ZONE, "In", &["invalid"])])
                .require(&[(ZONE, "In", &["also-invalid"])])
                .require(&[(ZONE, "In", &["test-zone-2"])]),
            Labels(&[(ZONE, "test-zone-2")]),
        ),
        (
            "the first satisfiable term wins",
            env(),
            pod()
                .require(&[(ZONE, "In", &["invalid"])])
                .require(&[(ZONE, "In", &["test-zone-1"])])
                .require(&[(ZONE, "In", &["test-zone-3"])]),
            Labels(&[(ZONE, "test-zone-1")]),
        ),
        (
            "all preferences relaxed",
            env(),
            pod()
                .prefer(1, &[(ZONE, "In", &["invalid"])])
                .prefer(1, &[(ZONE, "In", &["also-invalid"])]),
            Scheduled,
        ),
        (
            "lighter weights are used when heavier ones fail",
            env(),
            pod()
                .prefer(100, &[(ZONE, "In", &["invalid"])])
                .prefer(50, &[(ZONE, "In", &["test-zone-2"])])
                .prefer(1, &[(ZONE, "In", &["test-zone-3"])]),
            Labels(&[(ZONE, "test-zone-2")]),
        ),
        (
            "preference conflicting with a requirement",
            env(),
            pod()
                .require(&[(ZONE, "In", &["test-zone-3"])])
                .prefer(1, &[(ZONE, "NotIn", &["test-zone-3"])]),
            Labels(&[(ZONE, "test-zone-3")]),
        ),
        (
            "conflicting preferences",
            env(),
            pod()
                .prefer(1, &[(ZONE, "In", &["test-zone-1"])])
                .prefer(1, &[(ZONE, "NotIn", &["test-zone-1"])]),
            Scheduled,
        ),
        (
            "PreferNoSchedule taint is tolerated after relaxing",
            Env::new(default_pool().taint("soft", "", "PreferNoSchedule")),
            pod(),
            Scheduled,
        ),
        (
            "NoSchedule taint is never relaxed",
            Env::new(default_pool().taint("hard", "", "NoSchedule")),
            pod(),
            Unschedulable,
        ),
        (
            "tolerated NoSchedule taint",
            Env::new(default_pool().taint("hard", "yes", "NoSchedule")),
            pod().tolerate("hard", "Equal", "yes", "NoSchedule"),
            Scheduled,
        ),
        (
            "toleration with Exists",
            Env::new(default_pool().taint("hard", "yes", "NoExecute")),
            pod().tolerate("hard", "Exists", "", ""),
            Scheduled,
        ),
        (
            "startup taints need no toleration",
            Env::new(default_pool().startup_taint("booting", "NoSchedule")),
            pod(),
            Scheduled,
        ),
    ]);
}

#[test]
fn instance_type_compatibility() {
    run(vec![
        (
            "more resources than any instance type has",
            env(),
            pod().requests(&[("cpu", "512")]),
            Unschedulable,
        ),
        (
            "arm64 pod",
            env(),
            pod().node_selector(&[(ARCH, "arm64")]),
            Labels(&[(INSTANCE_TYPE, "arm-instance-type")]),
        ),
        (
            "amd64 pod goes to the cheapest amd64 type",
            env(),
            pod().node_selector(&[(ARCH, "amd64")]),
            Labels(&[(INSTANCE_TYPE, "small-instance-type")]),
        ),
        (
            "instance-type affinity",
            env(),
            pod().require(&[(INSTANCE_TYPE, "In", &["default-instance-type"])]),
            Labels(&[(INSTANCE_TYPE, "default-instance-type")]),
        ),
        (
            "operating system ios",
            env(),
            pod().node_selector(&[(OS, "ios")]),
            Labels(&[(INSTANCE_TYPE, "arm-instance-type")]),
        ),
        (
            "NodePool arch constraint",
            Env::new(default_pool().require(ARCH, Operator::In, &["arm64"])),
            pod(),
            Labels(&[(INSTANCE_TYPE, "arm-instance-type")]),
        ),
        (
            "GPU vendor A",
            env(),
            pod().requests(&[(GPU_VENDOR_A, "1")]),
            Labels(&[(INSTANCE_TYPE, "gpu-vendor-instance-type")]),
        ),
        (
            "GPU vendor B",
            env(),
            pod().requests(&[(GPU_VENDOR_B, "1")]),
            Labels(&[(INSTANCE_TYPE, "gpu-vendor-b-instance-type")]),
        ),
        (
            "GPUs of two vendors fit no single type",
            env(),
            pod().requests(&[(GPU_VENDOR_A, "1"), (GPU_VENDOR_B, "1")]),
            Unschedulable,
        ),
        (
            "init container larger than any type",
            env(),
            pod().cpu("1").init_requests(&[("cpu", "64")]),
            Unschedulable,
        ),
        (
            "init container raises the size",
            env(),
            pod().cpu("1").init_requests(&[("cpu", "3")]),
            Labels(&[(INSTANCE_TYPE, "default-instance-type")]),
        ),
        (
            "zero-quantity requests",
            env(),
            pod().requests(&[("cpu", "0"), ("memory", "0")]),
            Scheduled,
        ),
    ]);
}

#[test]
fn pods_with_incompatible_constraints_get_different_nodes() {
    let e = env();
    for (a, b) in [
        (
            pod().node_selector(&[(ARCH, "amd64")]),
            pod().node_selector(&[(ARCH, "arm64")]),
        ),
        (
            pod().node_selector(&[(OS, "linux")]),
            pod().node_selector(&[(OS, "ios")]),
        ),
        (
            pod().node_selector(&[(INSTANCE_TYPE, "small-instance-type")]),
            pod().node_selector(&[(INSTANCE_TYPE, "default-instance-type")]),
        ),
        (
            pod().node_selector(&[(ZONE, "test-zone-1")]),
            pod().node_selector(&[(ZONE, "test-zone-2")]),
        ),
        (
            pod().requests(&[(GPU_VENDOR_A, "1")]),
            pod().requests(&[(GPU_VENDOR_B, "1")]),
        ),
    ] {
        let outcome = e.provision(&[a.build(), b.build()]);
        assert!(outcome.scheduled(0) && outcome.scheduled(1));
        assert_eq!(
            outcome.nodes.len(),
            2,
            "{:?}",
            outcome.nodes.iter().map(|n| &n.labels).collect::<Vec<_>>()
        );
    }
    // Compatible constraints share one node.
    let outcome = e.provision(&[
        pod().node_selector(&[(ZONE, "test-zone-1")]).build(),
        pod()
            .require(&[(ZONE, "In", &["test-zone-1", "test-zone-2"])])
            .build(),
    ]);
    assert_eq!(outcome.nodes.len(), 1);
}

#[test]
fn binpacking() {
    let small_and_default = Env::new(default_pool());
    // A small pod goes to the smallest (cheapest) instance type.
    let o = small_and_default.provision(&[pod().cpu("100m").build()]);
    assert_eq!(o.node(0).instance_type, "small-instance-type");
    // Several small pods share the smallest type that holds them all.
    let o = small_and_default.provision(
        &pod()
            .requests(&[("cpu", "10m"), ("memory", "10Mi")])
            .times(5),
    );
    assert_eq!(o.nodes.len(), 1);
    assert_eq!(o.nodes[0].pods.len(), 5);
    // A pod count above any type's pod capacity (5) opens a second node.
    let o = small_and_default.provision(&pod().requests(&[("cpu", "1m")]).times(6));
    assert_eq!(o.nodes.len(), 2);
    // A full node opens another: 1.8 CPU each, the largest type holds 8 of them (16 CPU less 100m).
    let types = vec![
        FakeInstanceType::new("big")
            .resources(&[("cpu", "16"), ("memory", "64Gi"), ("pods", "100")])
            .build(),
    ];
    let o = Env::with_types(default_pool(), types).provision(&pod().cpu("1800m").times(9));
    assert_eq!(
        o.nodes.iter().map(|n| n.pods.len()).collect::<Vec<_>>(),
        vec![8, 1]
    );
    // Large and small pods pack together: the big one first, small ones fill the gap.
    let types = fake::instance_types(16);
    let mut pods = vec![pod().cpu("10").build()];
    pods.extend(pod().cpu("500m").times(8));
    let o = Env::with_types(default_pool(), types).provision(&pods);
    assert_eq!(
        o.nodes.len(),
        1,
        "{:?}",
        o.nodes
            .iter()
            .map(|n| (&n.instance_type, n.pods.len()))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        o.nodes[0].instance_type, "fake-it-14",
        "10 + 4 CPU plus overhead needs 15 vCPU"
    );
}

#[test]
fn packs_nodes_tightly_cheapest_first() {
    // Upstream's "should pack nodes tightly": a 4.5 CPU pod and a 1 CPU pod on the
    // incrementing catalog take the 6 vCPU type, not two nodes.
    let o = Env::with_types(default_pool(), fake::instance_types(10))
        .provision(&[pod().cpu("4.5").build(), pod().cpu("1").build()]);
    assert_eq!(o.nodes.len(), 1);
    assert_eq!(o.nodes[0].instance_type, "fake-it-5");
}

#[test]
fn in_flight_claims_are_reused_before_launching() {
    let e = env();
    // Pods that fit together share the claim the first one opened.
    let o = e.provision(&pod().cpu("1").times(3));
    assert_eq!(o.nodes.len(), 1);
    // One that does not fit gets a second node.
    let o = e.provision(&[pod().cpu("10").build(), pod().cpu("10").build()]);
    assert_eq!(o.nodes.len(), 2);
    // Pods with the same host port cannot share a node.
    let o = e.provision(&[
        pod().host_port(80).build(),
        pod().host_port(80).build(),
        pod().host_port(81).build(),
    ]);
    assert_eq!(o.nodes.len(), 2);
}

#[test]
fn existing_nodes_come_first() {
    let node = existing_node(
        "existing",
        &[(ZONE, "test-zone-1"), ("team", "a")],
        &[("cpu", "4"), ("memory", "8Gi"), ("pods", "10")],
    );
    let e = env().existing(node.clone());
    // A pod that fits goes to the existing node, nothing is launched.
    let o = e.provision(&[pod().cpu("1").build()]);
    assert_eq!(o.placement[0], Some(Placement::Existing("existing".into())));
    assert!(o.nodes.is_empty());
    // Existing nodes' labels are strict: an unknown custom label is not there.
    let o = e.provision(&[pod().node_selector(&[("team", "b")]).build()]);
    assert!(!o.scheduled(0), "no NodePool offers team=b either");
    // A pod that does not fit on it gets a new node.
    let o = e.provision(&[pod().cpu("3").build(), pod().cpu("3").build()]);
    assert_eq!(
        o.results.existing_nodes.get("existing").map(Vec::len),
        Some(1)
    );
    assert_eq!(o.nodes.len(), 1);
    // Pods already running use its capacity.
    let mut busy = node.clone();
    busy.pods = BoundPod::all(&[pod().cpu("3500m").build()]);
    let o = env().existing(busy).provision(&[pod().cpu("1").build()]);
    assert_eq!(o.nodes.len(), 1, "3.5 of 4 CPUs are taken");
    // A tainted existing node is skipped without a toleration.
    let mut tainted = node.clone();
    tainted.taints = vec![k8s_openapi::api::core::v1::Taint {
        key: "dedicated".into(),
        value: None,
        effect: "NoSchedule".into(),
        time_added: None,
    }];
    let o = env().existing(tainted.clone()).provision(&[
        pod().build(),
        pod().tolerate("dedicated", "Exists", "", "").build(),
    ]);
    assert!(matches!(o.placement[0], Some(Placement::New(_))));
    assert_eq!(o.placement[1], Some(Placement::Existing("existing".into())));
    // An uninitialized node's startup taint does not keep pods away.
    let mut starting = node.clone();
    starting.initialized = false;
    starting.startup_taints = tainted.taints.clone();
    starting.taints = tainted.taints.clone();
    let o = env().existing(starting).provision(&[pod().build()]);
    assert_eq!(o.placement[0], Some(Placement::Existing("existing".into())));
    // Initialized nodes are tried before uninitialized ones.
    let mut fresh = existing_node(
        "a-fresh",
        &[],
        &[("cpu", "4"), ("memory", "8Gi"), ("pods", "10")],
    );
    fresh.initialized = false;
    let o = env()
        .existing(fresh)
        .existing(existing_node(
            "z-ready",
            &[],
            &[("cpu", "4"), ("memory", "8Gi"), ("pods", "10")],
        ))
        .provision(&[pod().build()]);
    assert_eq!(o.placement[0], Some(Placement::Existing("z-ready".into())));
}

#[test]
fn daemonset_overhead() {
    // A DaemonSet pod of 1 CPU runs on every node: a 3.5 CPU pod no longer fits the 4 CPU type.
    let ds = pod().cpu("1").owned_by_daemonset().build();
    let o = env()
        .daemonset(ds.clone())
        .provision(&[pod().cpu("3500m").build()]);
    assert_eq!(o.node(0).instance_type, "arm-instance-type");
    assert_eq!(
        o.nodes[0].requests.cpu, 4500,
        "requests include the DaemonSet"
    );
    // A DaemonSet that does not tolerate the NodePool's taint adds nothing.
    let tainted =
        Env::new(default_pool().taint("dedicated", "", "NoSchedule")).daemonset(ds.clone());
    let o = tainted.provision(&[pod()
        .cpu("3")
        .tolerate("dedicated", "Exists", "", "")
        .build()]);
    assert_eq!(o.node(0).instance_type, "default-instance-type");
    // A DaemonSet for another architecture adds nothing to amd64 types.
    let arm_ds = pod()
        .cpu("1")
        .node_selector(&[(ARCH, "arm64")])
        .owned_by_daemonset()
        .build();
    let o = env()
        .daemonset(arm_ds)
        .provision(&[pod().cpu("3500m").build()]);
    assert_eq!(o.node(0).instance_type, "default-instance-type");
    // DaemonSet host ports block pods that bind the same port.
    let port_ds = pod().host_port(9100).owned_by_daemonset().build();
    let o = env()
        .daemonset(port_ds)
        .provision(&[pod().host_port(9100).build()]);
    assert!(!o.scheduled(0));
}

#[test]
fn node_pool_limits() {
    // cpu limit 10: the default types are 2–16 vCPU; 16 exceeds it.
    let e = Env::new(default_pool().limit("cpu", "10"));
    let o = e.provision(&[pod().node_selector(&[(ARCH, "arm64")]).build()]);
    assert!(!o.scheduled(0));
    // With a limit below every type, the reason says so.
    let o = Env::new(default_pool().limit("cpu", "1")).provision(&[pod().build()]);
    assert!(
        o.results.pod_errors[&0].contains("all available instance types exceed limits"),
        "{:?}",
        o.results.pod_errors
    );
    // Limits are charged pessimistically: each claim counts its largest option.
    let o = Env::with_types(default_pool().limit("cpu", "20"), fake::instance_types(10))
        .provision(&pod().cpu("9").times(3));
    assert_eq!(o.nodes.len(), 2);
    assert!(!o.results.pod_errors.is_empty());
    // A nodes limit caps the NodeClaims.
    let o = Env::new(default_pool().limit("nodes", "2"))
        .provision(&pod().node_selector(&[(ARCH, "arm64")]).cpu("10").times(3));
    assert_eq!(o.nodes.len(), 2);
    assert!(
        o.results
            .pod_errors
            .values()
            .any(|e| e.contains("node limits")),
        "{:?}",
        o.results.pod_errors
    );
    // Existing nodes of the pool count against its limits.
    let mut node = existing_node(
        "old",
        &[],
        &[("cpu", "8"), ("memory", "8Gi"), ("pods", "10")],
    );
    node.node_pool = Some("default".into());
    node.pods = BoundPod::all(&[pod().cpu("8").build()]);
    let o = Env::new(default_pool().limit("cpu", "10"))
        .existing(node)
        .provision(&[pod().cpu("3").build()]);
    assert!(
        !o.scheduled(0),
        "8 of 10 CPUs are used; the 4 CPU type would exceed"
    );
}

#[test]
fn node_pool_weights() {
    let heavy = node_pool("heavy").weight(50).label("pool", "heavy");
    let light = node_pool("light").weight(10).label("pool", "light");
    let o = Env::new(light.clone())
        .pool(heavy.clone())
        .provision(&[pod().build()]);
    assert_eq!(o.label(0, "pool"), Some("heavy"));
    // The heavier pool is skipped when it cannot take the pod.
    let o = Env::new(light.clone())
        .pool(heavy.clone().only(ARCH, Operator::In, &["arm64"]))
        .provision(&[pod().node_selector(&[(ARCH, "amd64")]).build()]);
    assert_eq!(o.label(0, "pool"), Some("light"));
    // Equal weights: the name that sorts last wins, as upstream orders them.
    let o = Env::new(node_pool("a").label("pool", "a"))
        .pool(node_pool("b").label("pool", "b"))
        .provision(&[pod().build()]);
    assert_eq!(o.label(0, "pool"), Some("b"));
    // Static NodePools (replicas) never provision for pods.
    let mut static_pool = node_pool("static").weight(100).label("pool", "static");
    static_pool.0.spec.replicas = Some(3);
    let o = Env::new(light)
        .pool(static_pool)
        .provision(&[pod().build()]);
    assert_eq!(o.label(0, "pool"), Some("light"));
}

#[test]
fn min_values() {
    use Operator::*;
    let types = fake::instance_types(10);
    // Three instance types must stay possible.
    let e = Env::with_types(
        default_pool().require_min(INSTANCE_TYPE, Exists, &[], 3),
        types.clone(),
    );
    let o = e.provision(&[pod().cpu("1").build()]);
    assert!(o.scheduled(0));
    assert!(o.results.new_node_claims[0].instance_types.len() >= 3);
    // A pod so large that only two types fit cannot keep minValues 3.
    let o = e.provision(&[pod().cpu("8500m").build()]);
    assert!(!o.scheduled(0));
    assert!(
        o.results.pod_errors[&0].contains("minValues"),
        "{:?}",
        o.results.pod_errors
    );
    // minValues on In needs that many values among the listed types.
    let e = Env::with_types(
        default_pool().require_min(
            INSTANCE_TYPE,
            In,
            &["fake-it-0", "fake-it-1", "fake-it-2"],
            2,
        ),
        types,
    );
    assert!(e.provision(&[pod().cpu("500m").build()]).scheduled(0));
    assert!(
        !e.provision(&[pod().cpu("2500m").build()]).scheduled(0),
        "only fake-it-2 holds 2.5 CPU"
    );
    let relaxed = |o: &Outcome| o.results.new_node_claims[0].min_values_relaxed;
    assert!(!relaxed(&e.provision(&[pod().cpu("500m").build()])));
}

/// `MIN_VALUES_POLICY=BestEffort`, as upstream: a NodeClaim that cannot keep `minValues` is
/// launched anyway, its `minValues` lowered to what its instance types offer and the claim
/// marked relaxed; one that can keep them is left as it is.
#[test]
fn min_values_best_effort_relaxes_instead_of_failing() {
    use Operator::*;
    let mut e = Env::with_types(
        default_pool().require_min(INSTANCE_TYPE, Exists, &[], 3),
        fake::instance_types(10),
    );
    e.options.strict_min_values = false;
    let o = e.provision(&[pod().cpu("8500m").build()]);
    assert!(o.scheduled(0), "{:?}", o.results.pod_errors);
    let claim = &o.results.new_node_claims[0];
    assert!(claim.min_values_relaxed);
    assert_eq!(claim.instance_types.len(), 2);
    let min = claim
        .node_claim_requirements()
        .get(INSTANCE_TYPE)
        .and_then(|r| r.min_values());
    assert_eq!(min, Some(2), "lowered to the two types that fit");
    let made = karpenter_core::provisioning::node_claim_for(claim, &e.pools[0].0.0);
    assert_eq!(
        made.metadata
            .annotations
            .unwrap_or_default()
            .get("karpenter.sh/nodeclaim-min-values-relaxed")
            .map(String::as_str),
        Some("true"),
        "the NodeClaim says so"
    );
    let o = e.provision(&[pod().cpu("1").build()]);
    let claim = &o.results.new_node_claims[0];
    assert!(!claim.min_values_relaxed);
    assert_eq!(
        claim
            .node_claim_requirements()
            .get(INSTANCE_TYPE)
            .and_then(|r| r.min_values()),
        Some(3)
    );
}

#[test]
fn unschedulable_pods_say_why() {
    let o = env().provision(&[
        pod().requests(&[("cpu", "512")]).build(),
        pod().node_selector(&[("team", "x")]).build(),
    ]);
    assert!(
        o.results.pod_errors[&0].contains("no instance type has enough resources"),
        "{}",
        o.results.pod_errors[&0]
    );
    assert!(
        o.results.pod_errors[&1].contains("label \"team\" does not have known values"),
        "{}",
        o.results.pod_errors[&1]
    );
    let o = Env::new(default_pool().taint("dedicated", "gpu", "NoSchedule"))
        .provision(&[pod().build()]);
    assert!(
        o.results.pod_errors[&0].contains("did not tolerate taint dedicated=gpu:NoSchedule"),
        "{}",
        o.results.pod_errors[&0]
    );
    let o = Env {
        pools: Vec::new(),
        ..env()
    }
    .provision(&[pod().build()]);
    assert_eq!(o.results.pod_errors[&0], "no nodepools found");
}

#[test]
fn an_interrupted_solve_returns_partial_results() {
    use std::cell::Cell;
    let pods = pod().cpu("1").times(20);
    let polls = Cell::new(0);
    let pools = vec![karpenter_core::provisioning::scheduling::NodePoolInput {
        node_pool: node_pool("default").0,
        instance_types: arc(fake::instance_types(8)),
    }];
    let mut scheduler = karpenter_core::provisioning::scheduling::Scheduler::new(
        &pools,
        &[],
        &[],
        Default::default(),
    );
    // The budget runs out after five pods.
    let results = scheduler.solve(&pods, &|| {
        polls.set(polls.get() + 1);
        polls.get() > 5
    });
    assert!(results.interrupted);
    assert_eq!(results.pods_scheduled(), 5);
    assert!(
        !results.new_node_claims.is_empty(),
        "what was decided is kept"
    );
}

/// Upstream, with `IGNORE_DRA_REQUESTS` at its default: a pod asking for devices through
/// Dynamic Resource Allocation gets no node, a DaemonSet pod with claims adds no overhead.
#[test]
fn dynamic_resource_allocation_is_not_simulated() {
    use karpenter_core::provisioning::scheduling::DRA_NOT_SUPPORTED;
    let with_pod_claim = |mut p: k8s_openapi::api::core::v1::Pod| {
        p.spec.as_mut().unwrap().resource_claims = Some(vec![
            serde_json::from_value(
                serde_json::json!({"name": "gpu", "resourceClaimTemplateName": "gpu"}),
            )
            .unwrap(),
        ]);
        p
    };
    let with_container_claim = |mut p: k8s_openapi::api::core::v1::Pod| {
        let c = &mut p.spec.as_mut().unwrap().containers[0];
        c.resources.get_or_insert_with(Default::default).claims = Some(vec![
            serde_json::from_value(serde_json::json!({"name": "gpu"})).unwrap(),
        ]);
        p
    };
    for pod_with_claims in [
        with_pod_claim(pod().cpu("1").build()),
        with_container_claim(pod().cpu("1").build()),
    ] {
        let o = env().provision(&[pod_with_claims, pod().cpu("1").build()]);
        assert!(!o.scheduled(0));
        assert_eq!(
            o.results.pod_errors.get(&0).map(String::as_str),
            Some(DRA_NOT_SUPPORTED)
        );
        assert!(o.scheduled(1), "other pods are not held up");
    }
    // A 1 CPU DaemonSet pod with claims: the 3.5 CPU pod still fits the 4 CPU type.
    let ds = with_pod_claim(pod().cpu("1").owned_by_daemonset().build());
    let o = env().daemonset(ds).provision(&[pod().cpu("3500m").build()]);
    assert_eq!(o.node(0).instance_type, "default-instance-type");
}
