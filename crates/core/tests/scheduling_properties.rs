//! Properties of every scheduling result, over random pods and NodePools: no pod lands where it
//! does not fit, tolerate or satisfy; no NodePool limit is exceeded; every pod is accounted for;
//! the same input gives the same output.

mod support;

use karpenter_api::Operator;
use karpenter_core::instancetype::fake;
use karpenter_core::resources::{Limits, Resources};
use karpenter_core::scheduling::{Requirements, taints};
use proptest::prelude::*;
use support::*;

const ZONES: [&str; 3] = ["test-zone-1", "test-zone-2", "test-zone-3"];

#[derive(Clone, Debug)]
struct PodSpec {
    cpu_milli: u32,
    memory_mi: u32,
    zone: Option<usize>,
    arch: Option<bool>,
    tolerates: bool,
    spread: bool,
}

fn pod_spec() -> impl Strategy<Value = PodSpec> {
    (
        50u32..6000,
        64u32..16_000,
        proptest::option::of(0usize..3),
        proptest::option::of(any::<bool>()),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(cpu_milli, memory_mi, zone, arch, tolerates, spread)| PodSpec {
                cpu_milli,
                memory_mi,
                zone,
                arch,
                tolerates,
                spread,
            },
        )
}

#[derive(Clone, Debug)]
struct PoolSpec {
    zones: Vec<usize>,
    tainted: bool,
    cpu_limit: Option<u32>,
}

fn pool_spec() -> impl Strategy<Value = PoolSpec> {
    (
        proptest::sample::subsequence(vec![0usize, 1, 2], 1..=3),
        any::<bool>(),
        proptest::option::of(4u32..64),
    )
        .prop_map(|(zones, tainted, cpu_limit)| PoolSpec {
            zones,
            tainted,
            cpu_limit,
        })
}

fn build_pod(spec: &PodSpec) -> k8s_openapi::api::core::v1::Pod {
    let mut p = pod().labels(&[("app", "prop")]).requests(&[
        ("cpu", &format!("{}m", spec.cpu_milli)),
        ("memory", &format!("{}Mi", spec.memory_mi)),
    ]);
    let mut selector = Vec::new();
    if let Some(z) = spec.zone {
        selector.push((ZONE, ZONES[z]));
    }
    if let Some(arm) = spec.arch {
        selector.push((ARCH, if arm { "arm64" } else { "amd64" }));
    }
    if !selector.is_empty() {
        p = p.node_selector(&selector);
    }
    if spec.tolerates {
        p = p.tolerate("dedicated", "Exists", "", "");
    }
    if spec.spread {
        p = p.spread(ZONE, 1, "ScheduleAnyway", &[("app", "prop")]);
    }
    p.build()
}

fn build_env(pools: &[PoolSpec]) -> Env {
    let mut env: Option<Env> = None;
    for (i, spec) in pools.iter().enumerate() {
        let zones: Vec<&str> = spec.zones.iter().map(|z| ZONES[*z]).collect();
        let mut p = node_pool(&format!("pool-{i}"))
            .require(ZONE, Operator::In, &zones)
            .weight(10 + i as i32);
        if spec.tainted {
            p = p.taint("dedicated", "", "NoSchedule");
        }
        if let Some(cpu) = spec.cpu_limit {
            p = p.limit("cpu", &cpu.to_string());
        }
        env = Some(match env {
            None => Env::with_types(p, fake::instance_types_assorted()),
            Some(e) => e.pool(p),
        });
    }
    env.expect("at least one pool")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn results_respect_every_constraint(pods in proptest::collection::vec(pod_spec(), 1..25), pools in proptest::collection::vec(pool_spec(), 1..3)) {
        let env = build_env(&pools);
        let k8s_pods: Vec<_> = pods.iter().map(build_pod).collect();
        let outcome = env.provision(&k8s_pods);
        let results = &outcome.results;

        // Every pod is either placed or has a reason, never both.
        for i in 0..pods.len() {
            prop_assert!(outcome.scheduled(i) != results.pod_errors.contains_key(&i), "pod {i}");
        }

        let mut launched_cpu: std::collections::BTreeMap<String, i64> = Default::default();
        for claim in &results.new_node_claims {
            prop_assert!(!claim.instance_types.is_empty());
            for it in &claim.instance_types {
                // Fits: the pods' requests fit every listed option.
                prop_assert!(claim.requests.fits(it.allocatable()), "{} does not hold {:?}", it.name, claim.requests);
                // Satisfies: every option agrees with the claim's requirements and has an offering.
                prop_assert!(it.requirements.intersects(&claim.requirements).is_ok());
                prop_assert!(it.compatible_offerings(&claim.requirements).next().is_some());
            }
            let pool_taints = &claim.taints;
            let mut sum = Resources::new();
            for &p in &claim.pods {
                let pod = &k8s_pods[p];
                sum.add(&karpenter_core::resources::pod_requests(pod).unwrap());
                // Tolerates.
                let tolerations = pod.spec.as_ref().unwrap().tolerations.clone().unwrap_or_default();
                prop_assert!(taints::first_untolerated(pool_taints, &tolerations).is_none());
                // Satisfies: the pod's node selector holds on the claim.
                let selector = Requirements::for_pod(pod, false);
                prop_assert!(claim.requirements.compatible(&selector, karpenter_core::scheduling::AllowUndefined::WellKnownLabels(&fake::provider_labels())).is_ok());
            }
            prop_assert!(sum.fits(&claim.requests) || sum == claim.requests);
            let largest = claim.instance_types.iter().map(|it| it.capacity.cpu).max().unwrap();
            *launched_cpu.entry(claim.node_pool.clone()).or_default() += largest;
        }
        // Limits: even charging each claim its largest option, no pool goes over.
        for (i, spec) in pools.iter().enumerate() {
            if let Some(limit) = spec.cpu_limit {
                let used = launched_cpu.get(&format!("pool-{i}")).copied().unwrap_or(0);
                let limits = Limits::from_list(&[("cpu".to_string(), k8s_openapi::apimachinery::pkg::api::resource::Quantity(limit.to_string()))].into()).unwrap();
                prop_assert!(used <= limits.get("cpu").unwrap(), "pool-{i} used {used} of {limit} CPU");
            }
        }

        // Deterministic: the same input gives the same decisions.
        let again = env.provision(&k8s_pods);
        let shape = |o: &Outcome| o.results.new_node_claims.iter().map(|c| (c.node_pool.clone(), c.pods.clone(), c.instance_types.iter().map(|it| it.name.clone()).collect::<Vec<_>>())).collect::<Vec<_>>();
        prop_assert_eq!(shape(&outcome), shape(&again));
        prop_assert_eq!(&outcome.results.pod_errors, &again.results.pod_errors);
    }
}
