//! Upstream's scheduling suite (`pkg/controllers/provisioning/scheduling/suite_test.go`), the
//! cases `scheduling.rs` does not already hold in the same form: each case is one upstream
//! `It`, its NodePool, catalog and pods, and what must come of them, run through the public
//! `Scheduler` (as the round runs it).

mod support;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use karpenter_api::Operator;
use karpenter_api::labels::{RESTRICTED_LABEL_DOMAINS, RESTRICTED_LABELS};
use karpenter_core::instancetype::fake::{self, FakeInstanceType, SIZE_LABEL};
use karpenter_core::provisioning::nodepools::launchable;
use karpenter_core::provisioning::scheduling::DRA_NOT_SUPPORTED;
use support::*;

type Check = Box<dyn Fn(&Outcome) -> Result<(), String>>;

/// One upstream case: the cluster, the pods of one provisioning round, and the check.
struct Case {
    name: &'static str,
    env: Env,
    pods: Vec<Pod>,
    check: Check,
}

fn case(
    name: &'static str,
    env: Env,
    pods: Vec<Pod>,
    check: impl Fn(&Outcome) -> Result<(), String> + 'static,
) -> Case {
    Case {
        name,
        env,
        pods,
        check: Box::new(check),
    }
}

fn run(cases: Vec<Case>) {
    let failures: Vec<String> = cases
        .into_iter()
        .filter_map(|c| {
            let outcome = c.env.provision(&c.pods);
            (c.check)(&outcome).err().map(|e| {
                format!(
                    "{}: {e}; nodes {:?}; errors {:?}",
                    c.name,
                    outcome
                        .nodes
                        .iter()
                        .map(|n| (&n.instance_type, n.pods.len()))
                        .collect::<Vec<_>>(),
                    outcome.results.pod_errors
                )
            })
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Every pod scheduled, on a new node carrying these labels.
fn labelled(labels: &'static [(&'static str, &'static str)]) -> Check {
    Box::new(move |o| {
        for pod in 0..o.placement.len() {
            if !o.scheduled(pod) {
                return Err(format!("pod {pod} not scheduled"));
            }
            for (k, v) in labels {
                if o.label(pod, k) != Some(v) {
                    return Err(format!("pod {pod}: {k}={:?}", o.label(pod, k)));
                }
            }
        }
        Ok(())
    })
}

fn none_scheduled(o: &Outcome) -> Result<(), String> {
    match (0..o.placement.len()).find(|&p| o.scheduled(p)) {
        Some(p) => Err(format!("pod {p} was scheduled")),
        None => Ok(()),
    }
}

fn all_scheduled(o: &Outcome) -> Result<(), String> {
    match (0..o.placement.len()).find(|&p| !o.scheduled(p)) {
        Some(p) => Err(format!("pod {p} was not scheduled")),
        None => Ok(()),
    }
}

/// Every pod scheduled, on `nodes` new nodes, all of instance type `it`.
fn nodes_of(nodes: usize, it: &'static str) -> Check {
    Box::new(move |o| {
        all_scheduled(o)?;
        if o.nodes.len() != nodes {
            return Err(format!("{} nodes, want {nodes}", o.nodes.len()));
        }
        match o.nodes.iter().find(|n| n.instance_type != it) {
            Some(n) => Err(format!("a node of {}, want {it}", n.instance_type)),
            None => Ok(()),
        }
    })
}

/// Every pod scheduled, each on a node of its own.
fn apart(o: &Outcome) -> Result<(), String> {
    all_scheduled(o)?;
    if o.nodes.len() == o.placement.len() {
        Ok(())
    } else {
        Err(format!("{} nodes", o.nodes.len()))
    }
}

fn default_pool() -> PoolBuilder {
    node_pool("default")
}

fn env() -> Env {
    Env::new(default_pool())
}

fn pool_env(pool: PoolBuilder) -> Env {
    Env::new(pool)
}

/// A pod whose container states only limits, with requests equal to them: the API server
/// defaults a missing request to its limit, which upstream's suite (on a real API server)
/// relies on.
fn limited(pod: PodBuilder, limits: &[(&str, &str)]) -> Pod {
    let mut pod = pod.requests(limits).build();
    let resources = pod.spec.as_mut().unwrap().containers[0]
        .resources
        .as_mut()
        .unwrap();
    resources.limits = resources.requests.clone();
    pod
}

/// A NodePool whose requirements are only `arch In values` (upstream replaces the defaults).
fn arch_pool(values: &[&str]) -> Env {
    pool_env(default_pool().only(ARCH, Operator::In, values))
}

#[test]
fn custom_constraints_upstream() {
    use Operator::*;
    let mut cases = vec![
        case(
            "kubernetes.io and k8s.io labels from NodePool requirements",
            pool_env(
                default_pool()
                    .only("kubernetes.io/test", In, &["test-value"])
                    .require("k8s.io/test", In, &["test-value"]),
            ),
            vec![pod().build()],
            labelled(&[
                ("kubernetes.io/test", "test-value"),
                ("k8s.io/test", "test-value"),
            ]),
        ),
        case(
            "labels in kubernetes.io and k8s.io subdomains from NodePool requirements",
            pool_env(
                default_pool()
                    .only("subdomain.kubernetes.io/test", In, &["test-value"])
                    .require("subdomain.k8s.io/test", In, &["test-value"]),
            ),
            vec![pod().build()],
            labelled(&[
                ("subdomain.kubernetes.io/test", "test-value"),
                ("subdomain.k8s.io/test", "test-value"),
            ]),
        ),
        case(
            "compatible custom requirements share a node",
            pool_env(default_pool().only("test-key", In, &["test-value", "another-value"])),
            vec![
                pod()
                    .require(&[("test-key", "In", &["test-value"])])
                    .build(),
                pod()
                    .require(&[("test-key", "NotIn", &["another-value"])])
                    .build(),
            ],
            |o| {
                labelled(&[("test-key", "test-value")])(o)?;
                (o.nodes.len() == 1)
                    .then_some(())
                    .ok_or_else(|| format!("{} nodes", o.nodes.len()))
            },
        ),
        case(
            "incompatible custom requirements get different nodes",
            pool_env(default_pool().only("test-key", In, &["test-value", "another-value"])),
            vec![
                pod()
                    .require(&[("test-key", "In", &["test-value"])])
                    .build(),
                pod()
                    .require(&[("test-key", "In", &["another-value"])])
                    .build(),
            ],
            |o| {
                apart(o)?;
                let got = (o.label(0, "test-key"), o.label(1, "test-key"));
                (got == (Some("test-value"), Some("another-value")))
                    .then_some(())
                    .ok_or_else(|| format!("labels {got:?}"))
            },
        ),
        case(
            "Exists does not widen an unsatisfiable In on the same key",
            env(),
            vec![
                pod()
                    .require(&[(ZONE, "In", &["non-existent-zone"]), (ZONE, "Exists", &[])])
                    .build(),
            ],
            none_scheduled,
        ),
        case(
            "NotIn on an undefined key leaves the label off",
            env(),
            vec![
                pod()
                    .require(&[("test-key", "NotIn", &["test-value"])])
                    .build(),
            ],
            |o| {
                all_scheduled(o)?;
                match o.label(0, "test-key") {
                    Some("test-value") => Err("labelled test-value".into()),
                    _ => Ok(()),
                }
            },
        ),
        case(
            "DoesNotExist on an undefined key leaves the label off",
            env(),
            vec![pod().require(&[("test-key", "DoesNotExist", &[])]).build()],
            |o| {
                all_scheduled(o)?;
                match o.label(0, "test-key") {
                    Some(v) => Err(format!("labelled {v}")),
                    None => Ok(()),
                }
            },
        ),
    ];
    // Each well-known label, alone in a node selector, is schedulable.
    for (name, key, value) in [
        ("well-known label zone", ZONE, "test-zone-1"),
        (
            "well-known label instance type",
            INSTANCE_TYPE,
            "default-instance-type",
        ),
        ("well-known label arch", ARCH, "arm64"),
        ("well-known label os", OS, "linux"),
        ("well-known label capacity type", CAPACITY_TYPE, "spot"),
    ] {
        cases.push(case(
            name,
            env(),
            vec![pod().node_selector(&[(key, value)]).build()],
            all_scheduled,
        ));
    }
    // A requirement on a restricted label or domain is never satisfied.
    for label in RESTRICTED_LABELS {
        cases.push(case(
            "a restricted label in a requirement",
            env(),
            vec![pod().require(&[(label, "In", &["test"])]).build()],
            none_scheduled,
        ));
    }
    for domain in RESTRICTED_LABEL_DOMAINS {
        let key: &'static str = Box::leak(format!("{domain}/test").into_boxed_str());
        cases.push(case(
            "a label in a restricted domain in a requirement",
            env(),
            vec![pod().require(&[(key, "In", &["test"])]).build()],
            none_scheduled,
        ));
    }
    run(cases);
}

/// Upstream marks the NodePool `Ready=False`: the controller, the simulator and `plan` all
/// leave such a NodePool out of the round (`launchable`), so the pod gets no node.
#[test]
fn a_node_pool_that_is_not_ready_launches_nothing() {
    let mut not_ready = default_pool();
    not_ready.0.status = Some(
        serde_json::from_value(serde_json::json!({"conditions": [{"type": "Ready",
            "status": "False", "reason": "NodePoolNotReady", "message": "Node Pool Not Ready",
            "lastTransitionTime": "2024-01-01T00:00:00Z"}]}))
        .unwrap(),
    );
    for (pool, scheduled) in [(default_pool(), true), (not_ready, false)] {
        let mut e = env();
        e.pools.retain(|_| false);
        if launchable(&pool.0) {
            e.pools
                .push((pool.clone(), arc(fake::default_instance_types())));
        }
        let o = e.provision(&[pod().build()]);
        assert_eq!(o.scheduled(0), scheduled, "{:?}", pool.0.status);
    }
}

#[test]
fn instance_type_compatibility_upstream() {
    let fake5 = || Env::with_types(default_pool(), fake::instance_types(5));
    run(vec![
        case(
            "instance-type requirement outside the NodePool's arch",
            arch_pool(&["amd64"]),
            vec![
                pod()
                    .require(&[(INSTANCE_TYPE, "In", &["arm-instance-type"])])
                    .build(),
            ],
            none_scheduled,
        ),
        case(
            "operating system only an excluded arch offers",
            arch_pool(&["amd64"]),
            vec![pod().require(&[(OS, "In", &["ios"])]).build()],
            none_scheduled,
        ),
        case(
            "CPU only an excluded arch holds",
            arch_pool(&["amd64"]),
            vec![limited(pod(), &[("cpu", "14")])],
            none_scheduled,
        ),
        case(
            "archs on different instances",
            arch_pool(&["arm64", "amd64"]),
            vec![
                pod().node_selector(&[(ARCH, "amd64")]).build(),
                pod().node_selector(&[(ARCH, "arm64")]).build(),
            ],
            apart,
        ),
        case(
            "operating systems on different instances",
            arch_pool(&["arm64", "amd64"]),
            vec![
                pod().node_selector(&[(OS, "linux")]).build(),
                pod().node_selector(&[(OS, "windows")]).build(),
            ],
            apart,
        ),
        case(
            "instance types by deprecated and stable label on different instances",
            arch_pool(&["arm64", "amd64"]),
            vec![
                pod()
                    .node_selector(&[("beta.kubernetes.io/instance-type", "small-instance-type")])
                    .build(),
                pod()
                    .node_selector(&[(INSTANCE_TYPE, "default-instance-type")])
                    .build(),
            ],
            |o| {
                apart(o)?;
                let got = (
                    o.node(0).instance_type.as_str(),
                    o.node(1).instance_type.as_str(),
                );
                (got == ("small-instance-type", "default-instance-type"))
                    .then_some(())
                    .ok_or_else(|| format!("{got:?}"))
            },
        ),
        case(
            "zones on different instances",
            arch_pool(&["arm64", "amd64"]),
            vec![
                pod().node_selector(&[(ZONE, "test-zone-1")]).build(),
                pod().node_selector(&[(ZONE, "test-zone-2")]).build(),
            ],
            apart,
        ),
        case(
            "provider label size selects the type",
            fake5(),
            vec![pod().node_selector(&[(SIZE_LABEL, "large")]).build()],
            labelled(&[(INSTANCE_TYPE, "fake-it-4")]),
        ),
        case(
            "provider label size small selects the smallest type",
            fake5(),
            vec![pod().node_selector(&[(SIZE_LABEL, "small")]).build()],
            labelled(&[(INSTANCE_TYPE, "fake-it-0")]),
        ),
        case(
            "size large with a small instance type",
            fake5(),
            vec![
                pod()
                    .node_selector(&[(SIZE_LABEL, "large"), (INSTANCE_TYPE, "fake-it-0")])
                    .build(),
            ],
            none_scheduled,
        ),
        case(
            "size small with a large instance type",
            fake5(),
            vec![
                pod()
                    .node_selector(&[(SIZE_LABEL, "small"), (INSTANCE_TYPE, "fake-it-4")])
                    .build(),
            ],
            none_scheduled,
        ),
        case(
            "optional label required to exist",
            fake5(),
            vec![
                pod()
                    .require(&[(fake::SPECIAL_LABEL, "Exists", &[])])
                    .build(),
            ],
            |o| {
                labelled(&[(INSTANCE_TYPE, "fake-it-4")])(o)?;
                o.label(0, fake::SPECIAL_LABEL)
                    .map(|_| ())
                    .ok_or_else(|| "no special label".to_string())
            },
        ),
        case(
            "optional label required not to exist",
            fake5(),
            vec![
                pod()
                    .require(&[(fake::SPECIAL_LABEL, "DoesNotExist", &[])])
                    .build(),
            ],
            |o| {
                all_scheduled(o)?;
                match o.label(0, fake::SPECIAL_LABEL) {
                    Some(v) => Err(format!("special={v}")),
                    None => Ok(()),
                }
            },
        ),
    ]);
}

/// Upstream's catalog for "valid instance types regardless of price": sizes and prices run
/// opposite, one on-demand offering each.
fn price_inverted_types() -> Vec<karpenter_core::instancetype::InstanceType> {
    [
        ("medium", "2", "2Gi", 3.0),
        ("small", "1", "1Gi", 2.0),
        ("large", "4", "4Gi", 1.0),
    ]
    .into_iter()
    .map(|(name, cpu, memory, price)| {
        FakeInstanceType::new(name)
            .resources(&[("cpu", cpu), ("memory", memory)])
            .offerings(&[("on-demand", "test-zone-1a", price)])
            .build()
    })
    .collect()
}

#[test]
fn binpacking_upstream() {
    let amd64 = || pod().node_selector(&[(ARCH, "amd64")]);
    let fake5 = || Env::with_types(default_pool(), fake::instance_types(5));
    let mut runtime_class = pod().cpu("1").build();
    // The RuntimeClass admission plugin copies the class's 2 CPU overhead into the pod.
    let spec = runtime_class.spec.as_mut().unwrap();
    spec.runtime_class_name = Some("my-runtime-class".into());
    spec.overhead = Some([("cpu".to_string(), Quantity("2".into()))].into());
    let mut large_and_small = amd64().requests(&[("memory", "1.8G")]).times(40);
    large_and_small.extend(amd64().requests(&[("memory", "400M")]).times(20));
    run(vec![
        case(
            "100M of memory on the smallest type",
            env(),
            vec![pod().requests(&[("memory", "100M")]).build()],
            nodes_of(1, "small-instance-type"),
        ),
        case(
            "2000M of memory on the smallest type that holds it",
            env(),
            vec![pod().requests(&[("memory", "2000M")]).build()],
            nodes_of(1, "small-instance-type"),
        ),
        case(
            "runtime class overhead counts",
            env(),
            vec![runtime_class],
            nodes_of(1, "default-instance-type"),
        ),
        case(
            "five 10M pods share one smallest node",
            env(),
            pod().requests(&[("memory", "10M")]).times(5),
            nodes_of(1, "small-instance-type"),
        ),
        case(
            "forty 1.8G pods fill twenty nodes",
            env(),
            amd64().requests(&[("memory", "1.8G")]).times(40),
            nodes_of(20, "default-instance-type"),
        ),
        case(
            "small pods fill the gaps large pods leave",
            env(),
            large_and_small,
            nodes_of(20, "default-instance-type"),
        ),
        case(
            "4.5 and 1 CPU on five fake types take two different types",
            fake5(),
            vec![pod().cpu("4.5").build(), pod().cpu("1").build()],
            |o| {
                apart(o)?;
                (o.node(0).instance_type != o.node(1).instance_type)
                    .then_some(())
                    .ok_or_else(|| "the same instance type".to_string())
            },
        ),
        case(
            "zero of a resource no type has",
            env(),
            vec![limited(pod(), &[("foo.com/weird-resources", "0")])],
            all_scheduled,
        ),
        case(
            "2Ti of memory fits no type",
            env(),
            vec![pod().requests(&[("memory", "2Ti")]).build()],
            none_scheduled,
        ),
        case(
            "five pods per node: 25 pods on five smallest nodes",
            env(),
            amd64()
                .requests(&[("memory", "1m"), ("cpu", "1m")])
                .times(25),
            nodes_of(5, "small-instance-type"),
        ),
        case(
            "init container requests count",
            env(),
            vec![
                pod()
                    .requests(&[("memory", "1Gi"), ("cpu", "1")])
                    .init_requests(&[("memory", "1Gi"), ("cpu", "2")])
                    .build(),
            ],
            nodes_of(1, "default-instance-type"),
        ),
        case(
            "init container larger than every type",
            env(),
            vec![
                pod()
                    .requests(&[("memory", "1Gi"), ("cpu", "1")])
                    .init_requests(&[("memory", "1Ti"), ("cpu", "2")])
                    .build(),
            ],
            none_scheduled,
        ),
        case(
            "every valid type is offered, the cheapest launched",
            Env::with_types(default_pool(), price_inverted_types()),
            vec![limited(pod(), &[("cpu", "1m"), ("memory", "1Mi")])],
            |o| {
                labelled(&[(INSTANCE_TYPE, "large")])(o)?;
                let mut options: Vec<&str> = o.results.new_node_claims[0]
                    .instance_types
                    .iter()
                    .map(|t| t.name.as_str())
                    .collect();
                options.sort_unstable();
                (options == ["large", "medium", "small"])
                    .then_some(())
                    .ok_or_else(|| format!("options {options:?}"))
            },
        ),
    ]);
}

/// Upstream's "should schedule pods with the same host port to different nodes".
#[test]
fn the_same_host_port_needs_different_nodes() {
    let o = env().provision(&[pod().host_port(8080).build(), pod().host_port(8080).build()]);
    apart(&o).unwrap();
}

/// Upstream's NodePool-requirements filtering: when a NodePool's requirements leave none of
/// the provider's instance types, every pod says so.
#[test]
fn node_pool_requirements_that_filter_out_every_instance_type() {
    use Operator::*;
    const WHY: &str = "nodepool requirements filtered out all available instance types";
    let cases: Vec<(&str, PoolBuilder, Vec<Pod>)> = vec![
        (
            "a non-existent instance type",
            default_pool().only(INSTANCE_TYPE, In, &["non-existent-instance-type"]),
            vec![
                pod()
                    .requests(&[("cpu", "32"), ("memory", "256Gi")])
                    .build(),
            ],
        ),
        (
            "a non-existent arch, three pods",
            default_pool().only(ARCH, In, &["non-existent-arch"]),
            pod().times(3),
        ),
        (
            "conflicting arch requirements",
            default_pool()
                .only(ARCH, In, &["amd64"])
                .require(ARCH, In, &["arm64"]),
            vec![pod().build()],
        ),
        (
            "non-existent zones",
            default_pool().only(ZONE, In, &["non-existent-zone-1", "non-existent-zone-2"]),
            vec![pod().build()],
        ),
    ];
    for (name, pool, pods) in cases {
        let o = Env::new(pool).provision(&pods);
        assert_eq!(o.results.pod_errors.len(), pods.len(), "{name}");
        for (i, e) in &o.results.pod_errors {
            assert!(e.contains(WHY), "{name}: pod {i}: {e}");
        }
    }
    // The same NodePool without the requirement schedules the pod.
    assert!(env().provision(&[pod().build()]).scheduled(0));
}

/// Upstream's DRA table: a pod whose container, init container, or both, claim devices gets
/// no NodeClaim and the DRA error; a pod without claims gets one NodeClaim.
#[test]
fn pods_claiming_devices_get_the_dra_error() {
    let claim =
        || serde_json::from_value(serde_json::json!({"name": "gpu-claim"})).expect("a claim");
    let base = || {
        pod()
            .requests(&[("cpu", "1"), ("memory", "1Gi")])
            .init_requests(&[("cpu", "500m"), ("memory", "512Mi")])
            .build()
    };
    let container = |mut p: Pod| {
        let c = &mut p.spec.as_mut().unwrap().containers[0];
        c.resources.get_or_insert_with(Default::default).claims = Some(vec![claim()]);
        p
    };
    let init = |mut p: Pod| {
        let c = &mut p.spec.as_mut().unwrap().init_containers.as_mut().unwrap()[0];
        c.resources.get_or_insert_with(Default::default).claims = Some(vec![claim()]);
        p
    };
    for (name, p, dra) in [
        ("container with resource claims", container(base()), true),
        ("init container with resource claims", init(base()), true),
        ("both with resource claims", container(init(base())), true),
        ("no resource claims", base(), false),
    ] {
        let o = env().provision(&[p]);
        assert_eq!(o.nodes.len(), usize::from(!dra), "{name}");
        assert_eq!(
            o.results.pod_errors.get(&0).map(String::as_str),
            dra.then_some(DRA_NOT_SUPPORTED),
            "{name}"
        );
    }
}

/// Upstream's #2116: DaemonSets that require `karpenter.sh/initialized` or
/// `karpenter.sh/registered` run on every node karpenter launches, so their overhead counts:
/// 2 CPUs and two 1 CPU DaemonSets need more than the 4 CPU types hold. The NodeClaim does not
/// carry those simulation-only keys.
#[test]
fn daemonsets_requiring_initialized_or_registered_count() {
    let ds = |key: &str| {
        pod()
            .cpu("1")
            .require(&[(key, "In", &["true"])])
            .owned_by_daemonset()
            .build()
    };
    let e = env()
        .daemonset(ds("karpenter.sh/initialized"))
        .daemonset(ds("karpenter.sh/registered"));
    let o = e.provision(&[limited(pod(), &[("cpu", "2")])]);
    assert_eq!(o.node(0).instance_type, "arm-instance-type");
    let claim = &o.results.new_node_claims[0];
    let requirements = claim.node_claim_requirements();
    for key in ["karpenter.sh/initialized", "karpenter.sh/registered"] {
        assert!(requirements.get(key).is_none(), "{key} in the NodeClaim");
        assert!(!claim.labels.contains_key(key), "{key} in its labels");
    }
}

/// Upstream's "should pack in-flight nodes before launching new nodes": batches of 1 CPU
/// pods, each round seeing the nodes the earlier ones launched, leave at most one node with a
/// CPU to spare. (Upstream draws the batch sizes at random; these are fixed.)
#[test]
fn in_flight_nodes_are_packed_before_launching() {
    let medium = FakeInstanceType::new("medium")
        .resources(&[("cpu", "4.25"), ("pods", "4")])
        .build();
    let mut existing = Vec::new();
    for batch in [3, 7, 1, 9, 0, 2, 5, 8, 4, 6] {
        let pods = limited(pod(), &[("cpu", "1")]);
        let pods: Vec<Pod> = (0..batch)
            .map(|i| {
                let mut p = pods.clone();
                p.metadata.name = Some(format!("pod-{}-{i}", existing.len()));
                p
            })
            .collect();
        let mut e = Env::with_types(default_pool(), vec![medium.clone()]);
        e.existing = existing.clone();
        let o = e.provision(&pods);
        all_scheduled(&o).unwrap();
        existing = o.cluster(&pods, existing);
    }
    let spare = existing
        .iter()
        .filter(|n| {
            let used: i64 = n.pods.iter().map(|p| p.requests.cpu).sum();
            n.allocatable.cpu - used >= 1000
        })
        .count();
    assert!(spare <= 1, "{spare} nodes with a CPU to spare");
}

#[test]
fn preferential_fallback_upstream() {
    run(vec![
        case(
            "a required term outside a NodePool of zone 1 and one type is not relaxed",
            pool_env(
                default_pool()
                    .only(ZONE, Operator::In, &["test-zone-1"])
                    .require(INSTANCE_TYPE, Operator::In, &["default-instance-type"]),
            ),
            vec![pod().require(&[(ZONE, "In", &["invalid"])]).build()],
            none_scheduled,
        ),
        case(
            "a preference term conflicting with itself is relaxed",
            env(),
            vec![
                pod()
                    .prefer(
                        1,
                        &[(ZONE, "In", &["invalid"]), (ZONE, "NotIn", &["invalid"])],
                    )
                    .build(),
            ],
            all_scheduled,
        ),
        case(
            "preferences on zone and instance type both relaxed",
            env(),
            vec![
                pod()
                    .prefer(1, &[(ZONE, "In", &["invalid"])])
                    .prefer(1, &[(INSTANCE_TYPE, "In", &["invalid"])])
                    .build(),
            ],
            all_scheduled,
        ),
        case(
            "an unsatisfiable heavy preference gives way to the next weight",
            pool_env(default_pool().only(ZONE, Operator::In, &["test-zone-1", "test-zone-2"])),
            vec![
                pod()
                    .prefer(100, &[(INSTANCE_TYPE, "In", &["test-zone-3"])])
                    .prefer(50, &[(ZONE, "In", &["test-zone-2"])])
                    .prefer(1, &[(ZONE, "In", &["test-zone-1"])])
                    .build(),
            ],
            labelled(&[(ZONE, "test-zone-2")]),
        ),
    ]);
}
