//! Upstream's scheduling benchmark workload (`scheduling_benchmark_test.go`): one NodePool, 400
//! fake instance types, and a five-way mix of pods — generic, zonal spread, hostname spread,
//! zonal self-affinity and hostname self-anti-affinity. Pods come from a seeded generator, or
//! from upstream's own dumps (CSV) so results can be compared pod for pod.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Affinity, Container, NodeAffinity, NodeSelectorRequirement, NodeSelectorTerm, Pod, PodAffinity,
    PodAffinityTerm, PodAntiAffinity, PodSpec, PreferredSchedulingTerm, ResourceRequirements,
    TopologySpreadConstraint, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use karpenter_api::labels::{HOSTNAME_LABEL, ZONE_LABEL};
use karpenter_api::{NodeClassReference, NodePool};

use crate::instancetype::{InstanceType, fake};
use crate::provisioning::scheduling::NodePoolInput;

/// The kinds of pods in the mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodKind {
    /// Requests only.
    Generic,
    /// Spread across zones (maxSkew 1) over pods with `my-label`.
    ZonalSpread,
    /// Spread across nodes (maxSkew 1) over pods with `my-label`.
    HostnameSpread,
    /// Required affinity to its own `my-affininity` group, by zone.
    ZonalAffinity,
    /// Required anti-affinity to every `app: nginx` pod, by node.
    HostnameAntiAffinity,
}

/// A small deterministic generator (SplitMix64), so a seed always gives the same workload.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[(self.next() % items.len() as u64) as usize]
    }
}

const LABEL_VALUES: [&str; 7] = ["a", "b", "c", "d", "e", "f", "g"];
const CPU_MILLI: [i64; 5] = [100, 250, 500, 1000, 1500];
const MEMORY_MI: [i64; 6] = [100, 256, 512, 1024, 2048, 4096];

/// One pod of the mix, in the terms of upstream's dump files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodSpecRow {
    /// What constrains it.
    pub kind: PodKind,
    /// Its own label value (`my-label`, or `my-affininity` for affinity pods).
    pub label: String,
    /// The value its spread constraint selects.
    pub selector: String,
    /// CPU request in millicores.
    pub cpu_milli: i64,
    /// Memory request in MiB.
    pub memory_mi: i64,
}

/// `count` pods in upstream's proportions (a fifth of each kind, the remainder generic), with
/// labels and sizes drawn from `seed`.
pub fn diverse_rows(count: usize, seed: u64) -> Vec<PodSpecRow> {
    let mut rng = Rng(seed);
    let n = count / 5;
    let kinds = [
        PodKind::Generic,
        PodKind::ZonalSpread,
        PodKind::HostnameSpread,
        PodKind::ZonalAffinity,
        PodKind::HostnameAntiAffinity,
    ];
    let mut rows = Vec::with_capacity(count);
    for kind in kinds
        .iter()
        .flat_map(|k| std::iter::repeat_n(*k, n))
        .chain(std::iter::repeat_n(PodKind::Generic, count - 5 * n))
    {
        let label = rng.pick(&LABEL_VALUES).to_string();
        let selector = rng.pick(&LABEL_VALUES).to_string();
        rows.push(PodSpecRow {
            kind,
            label,
            selector,
            cpu_milli: rng.pick(&CPU_MILLI),
            memory_mi: rng.pick(&MEMORY_MI),
        });
    }
    rows
}

/// Reads upstream's dump (`index,kind,label_key,label_value,selector_key,selector_value,cpu_milli,memory_mi`).
pub fn rows_from_csv(text: &str) -> Result<Vec<PodSpecRow>, String> {
    text.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let f: Vec<&str> = line.split(',').collect();
            if f.len() != 8 {
                return Err(format!("expected 8 fields: {line}"));
            }
            let kind = match f[1] {
                "generic" => PodKind::Generic,
                "topology-spread/topology.kubernetes.io/zone" => PodKind::ZonalSpread,
                "topology-spread/kubernetes.io/hostname" => PodKind::HostnameSpread,
                "pod-affinity/topology.kubernetes.io/zone" => PodKind::ZonalAffinity,
                "pod-anti-affinity/kubernetes.io/hostname" => PodKind::HostnameAntiAffinity,
                other => return Err(format!("unknown pod kind {other}")),
            };
            let number = |s: &str| s.parse::<i64>().map_err(|e| format!("{s}: {e}"));
            Ok(PodSpecRow {
                kind,
                label: f[3].to_string(),
                selector: f[5].to_string(),
                cpu_milli: number(f[6])?,
                memory_mi: number(f[7])?,
            })
        })
        .collect()
}

fn selector(key: &str, value: &str) -> LabelSelector {
    LabelSelector {
        match_labels: Some([(key.to_string(), value.to_string())].into()),
        ..Default::default()
    }
}

/// The Kubernetes pod for a row; `index` names it and keeps creation order.
pub fn pod(index: usize, row: &PodSpecRow) -> Pod {
    let mut labels: BTreeMap<String, String> =
        [("testing/cluster".to_string(), "unspecified".to_string())].into();
    let mut spec = PodSpec {
        containers: vec![Container {
            name: "pause".into(),
            resources: Some(ResourceRequirements {
                requests: Some(
                    [
                        ("cpu".to_string(), Quantity(format!("{}m", row.cpu_milli))),
                        (
                            "memory".to_string(),
                            Quantity(format!("{}Mi", row.memory_mi)),
                        ),
                    ]
                    .into(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }],
        ..Default::default()
    };
    let spread = |key: &str| TopologySpreadConstraint {
        max_skew: 1,
        topology_key: key.into(),
        when_unsatisfiable: "DoNotSchedule".into(),
        label_selector: Some(selector("my-label", &row.selector)),
        ..Default::default()
    };
    match row.kind {
        PodKind::Generic => {
            labels.insert("my-label".into(), row.label.clone());
        }
        PodKind::ZonalSpread | PodKind::HostnameSpread => {
            labels.insert("my-label".into(), row.label.clone());
            let key = if row.kind == PodKind::ZonalSpread {
                ZONE_LABEL
            } else {
                HOSTNAME_LABEL
            };
            spec.topology_spread_constraints = Some(vec![spread(key)]);
        }
        PodKind::ZonalAffinity => {
            labels.insert("my-affininity".into(), row.label.clone());
            let term = PodAffinityTerm {
                label_selector: Some(selector("my-affininity", &row.label)),
                topology_key: ZONE_LABEL.into(),
                ..Default::default()
            };
            spec.affinity = Some(Affinity {
                pod_affinity: Some(PodAffinity {
                    required_during_scheduling_ignored_during_execution: Some(vec![term]),
                    ..Default::default()
                }),
                ..Default::default()
            });
        }
        PodKind::HostnameAntiAffinity => {
            labels.insert("app".into(), "nginx".into());
            let term = PodAffinityTerm {
                label_selector: Some(selector("app", "nginx")),
                topology_key: HOSTNAME_LABEL.into(),
                ..Default::default()
            };
            spec.affinity = Some(Affinity {
                pod_anti_affinity: Some(PodAntiAffinity {
                    required_during_scheduling_ignored_during_execution: Some(vec![term]),
                    ..Default::default()
                }),
                ..Default::default()
            });
        }
    }
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("pod-{index}")),
            namespace: Some("default".into()),
            uid: Some(format!("uid-{index:08}")),
            labels: Some(labels),
            ..Default::default()
        },
        spec: Some(spec),
        ..Default::default()
    }
}

/// Upstream's preference workload (`makePreferencePods`): every pod `app: nginx`, one size for
/// the whole batch, preferring zone 1 (weight 1), and preferring to avoid each other by zone
/// (weight 10, unsatisfiable after three pods) and by node (weight 1).
pub fn preference_pods(count: usize, seed: u64) -> Vec<Pod> {
    let mut rng = Rng(seed);
    let (cpu, memory) = (rng.pick(&CPU_MILLI), rng.pick(&MEMORY_MI));
    let nginx = || selector("app", "nginx");
    (0..count)
        .map(|i| {
            let mut pod = pod(
                i,
                &PodSpecRow {
                    kind: PodKind::Generic,
                    label: String::new(),
                    selector: String::new(),
                    cpu_milli: cpu,
                    memory_mi: memory,
                },
            );
            let labels = pod.metadata.labels.get_or_insert_with(Default::default);
            labels.remove("my-label");
            labels.insert("app".into(), "nginx".into());
            let anti = |weight, key: &str| WeightedPodAffinityTerm {
                weight,
                pod_affinity_term: PodAffinityTerm {
                    label_selector: Some(nginx()),
                    topology_key: key.into(),
                    ..Default::default()
                },
            };
            let zone_1 = NodeSelectorTerm {
                match_expressions: Some(vec![NodeSelectorRequirement {
                    key: ZONE_LABEL.into(),
                    operator: "In".into(),
                    values: Some(vec!["test-zone-1".into()]),
                }]),
                ..Default::default()
            };
            pod.spec
                .as_mut()
                .expect("benchmark pods have a spec")
                .affinity = Some(Affinity {
                node_affinity: Some(NodeAffinity {
                    preferred_during_scheduling_ignored_during_execution: Some(vec![
                        PreferredSchedulingTerm {
                            weight: 1,
                            preference: zone_1,
                        },
                    ]),
                    ..Default::default()
                }),
                pod_anti_affinity: Some(PodAntiAffinity {
                    preferred_during_scheduling_ignored_during_execution: Some(vec![
                        anti(10, ZONE_LABEL),
                        anti(1, HOSTNAME_LABEL),
                    ]),
                    ..Default::default()
                }),
                ..Default::default()
            });
            pod
        })
        .collect()
}

/// The benchmark's NodePool: no requirements, a cpu limit far above anything used.
pub fn node_pool(instance_types: usize) -> NodePoolInput {
    let mut np = NodePool::default();
    np.metadata.name = Some("default".into());
    np.spec
        .template
        .metadata
        .labels
        .insert("testing/cluster".into(), "unspecified".into());
    np.spec.template.spec.node_class_ref = NodeClassReference {
        group: "karpenter.test.sh".into(),
        kind: "TestNodeClass".into(),
        name: "default".into(),
    };
    // Upstream sets cpu 10000000 and memory 10000000Gi, far above its 20k-pod runs. Limits
    // pay for the largest type a claim could become (800 GiB here), so 100k pods would need
    // 16M Gi: the cpu limit alone stays, as high as upstream's, and still binds nothing.
    np.spec.limits = Some([("cpu".to_string(), Quantity("10000000".into()))].into());
    let types: Vec<Arc<InstanceType>> = fake::instance_types(instance_types)
        .into_iter()
        .map(Arc::new)
        .collect();
    NodePoolInput {
        node_pool: np,
        instance_types: types,
    }
}

/// A running cluster for the consolidation benchmark: `nodes` on-demand nodes of 8, 16 and 32
/// CPUs from the benchmark NodePool, holding `pods` generic pods placed round-robin where they
/// fit, so some nodes are full and others could go or shrink. `None` when the pods do not fit.
pub fn consolidation_cluster(
    nodes: usize,
    pods: usize,
    seed: u64,
) -> Option<(NodePoolInput, Vec<crate::disruption::NodeState>)> {
    use karpenter_api::labels::{CAPACITY_TYPE_LABEL, NODE_POOL_LABEL};
    let mut pool = node_pool(64);
    pool.node_pool.spec.disruption.consolidate_after =
        karpenter_api::NillableDuration::from_secs(0);
    let mut rng = Rng(seed);
    let mut states: Vec<crate::disruption::NodeState> = (0..nodes)
        .map(|i| {
            let cpus = rng.pick(&[8usize, 16, 32]);
            let it = &pool.instance_types[cpus - 1];
            let offering = &it.offerings[0];
            let name = format!("node-{i}");
            let mut labels: BTreeMap<String, String> = it
                .requirements
                .iter()
                .filter(|r| r.operator() == karpenter_api::Operator::In && r.values().len() == 1)
                .filter_map(|r| Some((r.key().to_string(), r.values().next()?.to_string())))
                .collect();
            labels.extend(pool.node_pool.spec.template.metadata.labels.clone());
            labels.insert(ZONE_LABEL.into(), offering.zone.clone());
            labels.insert(CAPACITY_TYPE_LABEL.into(), offering.capacity_type.clone());
            labels.insert(HOSTNAME_LABEL.into(), name.clone());
            labels.insert(NODE_POOL_LABEL.into(), "default".into());
            crate::disruption::NodeState {
                buffer_pods: 0,
                name,
                node_pool: Some("default".into()),
                labels,
                allocatable: it.allocatable().clone(),
                capacity: it.capacity.clone(),
                initialized: true,
                ready: true,
                price: offering.price,
                ..Default::default()
            }
        })
        .collect();
    let mut used: Vec<crate::resources::Resources> = vec![Default::default(); nodes];
    for i in 0..pods {
        let row = PodSpecRow {
            kind: PodKind::Generic,
            label: rng.pick(&LABEL_VALUES).into(),
            selector: String::new(),
            cpu_milli: rng.pick(&CPU_MILLI),
            memory_mi: rng.pick(&MEMORY_MI),
        };
        let pod = pod(i, &row);
        let requests = crate::resources::pod_requests(&pod).ok()?;
        let start = i % nodes.max(1);
        let target = (0..nodes)
            .map(|k| (start + k) % nodes)
            .find(|&n| used[n].fits_with(&requests, &states[n].allocatable))?;
        used[target].add(&requests);
        states[target].pods.push(pod);
    }
    Some((pool, states))
}

/// One full disruption pass over a [`consolidation_cluster`], as both benchmark front-ends time
/// it.
pub fn consolidation_pass(
    pool: &NodePoolInput,
    nodes: &[crate::disruption::NodeState],
) -> crate::disruption::Decision {
    crate::disruption::decide(&crate::disruption::Input {
        now: k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        nodes,
        node_pools: std::slice::from_ref(pool),
        pdbs: &[],
        pending_pods: &[],
        daemonset_pods: &[],
        options: crate::provisioning::scheduling::SchedulerOptions {
            provider_labels: fake::provider_labels(),
            ..Default::default()
        },
        spot_to_spot: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provisioning::scheduling::{Scheduler, SchedulerOptions};

    fn solve(pods: &[Pod]) -> crate::provisioning::scheduling::Results {
        Scheduler::new(&[node_pool(400)], &[], &[], SchedulerOptions::default())
            .solve(pods, &|| false)
    }

    /// Whatever the draw, the anti-affinity fifth forces one node per pod and everything else
    /// packs around them: upstream's NodeClaim count is `pods / 5`.
    #[test]
    fn diverse_workload_needs_a_node_per_anti_affinity_pod() {
        for (count, seed) in [(50, 1), (250, 42), (500, 7)] {
            let pods: Vec<Pod> = diverse_rows(count, seed)
                .iter()
                .enumerate()
                .map(|(i, r)| pod(i, r))
                .collect();
            let results = solve(&pods);
            assert!(
                results.pod_errors.is_empty(),
                "{:?}",
                results.pod_errors.values().next()
            );
            assert_eq!(
                results.new_node_claims.len(),
                count / 5,
                "count {count} seed {seed}"
            );
            assert_eq!(results.pods_scheduled(), count);
        }
    }

    /// Upstream's preference benchmark result: one node per pod, all in zone 1.
    #[test]
    fn preference_workload_gives_a_node_per_pod_in_zone_1() {
        let results = solve(&preference_pods(60, 42));
        assert_eq!(results.new_node_claims.len(), 60);
        assert!(results.new_node_claims.iter().all(|c| {
            c.requirements
                .get(ZONE_LABEL)
                .is_some_and(|z| z.values().eq(["test-zone-1"]))
        }));
    }

    #[test]
    fn reads_upstreams_dump_format() {
        let csv = "index,kind,label_key,label_value,selector_key,selector_value,cpu_milli,memory_mi\n0,generic,my-label,f,,,500,512\n1,topology-spread/topology.kubernetes.io/zone,my-label,d,my-label,e,1500,4096\n";
        let rows = rows_from_csv(csv).unwrap();
        assert_eq!(
            rows[1],
            PodSpecRow {
                kind: PodKind::ZonalSpread,
                label: "d".into(),
                selector: "e".into(),
                cpu_milli: 1500,
                memory_mi: 4096
            }
        );
        assert!(rows_from_csv("header\n0,unknown,a,b,c,d,1,2\n").is_err());
    }

    #[test]
    fn consolidation_cluster_places_every_pod_within_allocatable() {
        let (_, nodes) = consolidation_cluster(50, 600, 7).expect("600 pods fit on 50 nodes");
        assert_eq!(nodes.len(), 50);
        assert_eq!(nodes.iter().map(|n| n.pods.len()).sum::<usize>(), 600);
        for n in &nodes {
            let mut used = crate::resources::Resources::new();
            for p in &n.pods {
                used.add(&crate::resources::pod_requests(p).unwrap());
            }
            assert!(used.fits(&n.allocatable), "{}: {used:?}", n.name);
        }
        // Same seed, same cluster.
        let (_, again) = consolidation_cluster(50, 600, 7).unwrap();
        assert_eq!(
            nodes
                .iter()
                .map(|n| (n.price, n.pods.len()))
                .collect::<Vec<_>>(),
            again
                .iter()
                .map(|n| (n.price, n.pods.len()))
                .collect::<Vec<_>>()
        );
        assert!(consolidation_cluster(2, 1000, 7).is_none());
    }
}
