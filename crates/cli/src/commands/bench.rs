//! `karpenter-rs bench`: performance figures on fixed workloads.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use karpenter_core::benchmark::{self, PodSpecRow};
use karpenter_core::provisioning::scheduling::{Scheduler, SchedulerOptions};

/// Options of `bench scheduling`.
pub struct SchedulingBench {
    /// How many pods to generate.
    pub pods: usize,
    /// How many fake instance types.
    pub instance_types: usize,
    /// The generator's seed.
    pub seed: u64,
    /// Upstream's pod dump to use instead of the generator.
    pub pods_csv: Option<PathBuf>,
    /// Upstream's preference workload instead of the diverse mix.
    pub preferences: bool,
}

/// Runs upstream's scheduling benchmark shape once and returns the report lines; the last is
/// `scheduling pods=N scheduled=S nodes=M seconds=T pods_per_sec=R`.
pub fn scheduling(options: &SchedulingBench) -> anyhow::Result<Vec<String>> {
    Ok(solve_once(options)?.0)
}

/// The sizes `bench scheduling-growth` runs, up to its maximum.
const GROWTH_SIZES: [usize; 7] = [1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000];

/// Runs the scheduling benchmark at growing sizes up to `options.pods` and reports how the
/// time grows: each line gives the exponent `k` of time ∝ pods^k since the previous size
/// (1 is linear, 2 quadratic).
pub fn scheduling_growth(options: &SchedulingBench) -> anyhow::Result<Vec<String>> {
    let mut lines = Vec::new();
    let mut previous: Option<(usize, f64)> = None;
    for pods in GROWTH_SIZES.into_iter().filter(|&n| n <= options.pods) {
        let (mut report, seconds) = solve_once(&SchedulingBench {
            pods,
            pods_csv: None,
            ..*options
        })?;
        let last = report.pop().unwrap_or_default();
        lines.extend(report);
        let growth = previous.map_or(String::from("-"), |(n, t)| {
            format!("{:.2}", (seconds / t).ln() / (pods as f64 / n as f64).ln())
        });
        lines.push(format!("{last} growth_exponent={growth}"));
        previous = Some((pods, seconds));
    }
    Ok(lines)
}

/// One solve: the report lines and the seconds it took.
fn solve_once(options: &SchedulingBench) -> anyhow::Result<(Vec<String>, f64)> {
    let pods = if options.preferences {
        benchmark::preference_pods(options.pods, options.seed)
    } else {
        let rows: Vec<PodSpecRow> = match &options.pods_csv {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading {}", path.display()))?;
                benchmark::rows_from_csv(&text).map_err(anyhow::Error::msg)?
            }
            None => benchmark::diverse_rows(options.pods, options.seed),
        };
        rows.iter()
            .enumerate()
            .map(|(i, r)| benchmark::pod(i, r))
            .collect()
    };
    let pool = benchmark::node_pool(options.instance_types);
    // As upstream, only the solve is timed; building the scheduler is not.
    let mut scheduler = Scheduler::new(
        std::slice::from_ref(&pool),
        &[],
        &[],
        SchedulerOptions::default(),
    );
    let start = Instant::now();
    let results = scheduler.solve(&pods, &|| false);
    let seconds = start.elapsed().as_secs_f64();
    let mut lines = Vec::new();
    if let Some((pod, reason)) = results.pod_errors.iter().next() {
        lines.push(format!(
            "{} pods failed to schedule, e.g. pod {pod}: {reason}",
            results.pod_errors.len()
        ));
    }
    lines.push(format!(
        "scheduling pods={} scheduled={} nodes={} seconds={seconds:.3} pods_per_sec={:.0}",
        pods.len(),
        results.pods_scheduled(),
        results.new_node_claims.len(),
        pods.len() as f64 / seconds
    ));
    Ok((lines, seconds))
}

/// Runs one full disruption pass (emptiness, drift, multi- and single-node consolidation) over a
/// generated cluster and returns the report lines; the last is
/// `consolidation nodes=N pods=P seconds=T actions=A savings_per_hour=S`.
pub fn consolidation(nodes: usize, pods: usize, seed: u64) -> anyhow::Result<Vec<String>> {
    let (pool, states) = benchmark::consolidation_cluster(nodes, pods, seed)
        .with_context(|| format!("{pods} pods do not fit on {nodes} nodes"))?;
    let start = Instant::now();
    let decision = benchmark::consolidation_pass(&pool, &states);
    let seconds = start.elapsed().as_secs_f64();
    let mut lines: Vec<String> = decision
        .commands
        .iter()
        .map(|c| {
            format!(
                "{} ({}): {} node(s) out, {} replacement(s)",
                c.method,
                c.reason.as_str(),
                c.candidates.len(),
                c.replacements.len()
            )
        })
        .collect();
    lines.push(format!(
        "consolidation nodes={nodes} pods={pods} seconds={seconds:.3} actions={} savings_per_hour={:.4}",
        decision.commands.len(),
        decision.commands.iter().map(|c| c.savings_per_hour).sum::<f64>()
    ));
    Ok(lines)
}

/// Resolves the embedded AWS catalog `rounds` times (AL2023 defaults, three zones) and returns
/// `aws-instance-types types=N rounds=R ms_per_resolution=T`.
pub fn aws_instance_types(rounds: usize) -> String {
    use karpenter_aws::instancetype::{self, NodeClassSettings, ZoneInfo, catalog};
    let zones: Vec<ZoneInfo> = ["us-east-1a", "us-east-1b", "us-east-1c"]
        .iter()
        .map(|z| ZoneInfo {
            zone: z.to_string(),
            zone_id: None,
        })
        .collect();
    let pricing = karpenter_aws::pricing::Pricing::embedded();
    let settings = NodeClassSettings::default();
    let catalog = catalog();
    let rounds = rounds.max(1);
    let start = Instant::now();
    let mut types = 0;
    for _ in 0..rounds {
        types = catalog
            .types
            .iter()
            .filter_map(|info| {
                instancetype::resolve(
                    info,
                    instancetype::CATALOG_REGION,
                    &catalog.zones[&info.name],
                    &zones,
                    &settings,
                    &pricing,
                    &|_, _, _| false,
                )
            })
            .count();
    }
    let ms = start.elapsed().as_secs_f64() * 1000.0 / rounds as f64;
    format!("aws-instance-types types={types} rounds={rounds} ms_per_resolution={ms:.1}")
}

/// What `bench plan-dump` writes: a dump as `kubectl get -o yaml|json` would.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DumpFormat {
    /// `-o yaml`.
    Yaml,
    /// `-o json`.
    Json,
}

/// Writes a dump of `nodes` KWOK nodes (8 CPU, each with its NodeClaim) and `pods` pods
/// spread over them, a hundredth of them pending, every object with `managedFields` as the API
/// server writes them, to a file under the temporary directory; then times `plan -f` on it
/// (reading, then planning) and returns the report lines, the last
/// `plan-dump format=F pods=P nodes=N megabytes=M read_seconds=R plan_seconds=S peak_rss_mb=K`.
/// The writer streams, so the peak is the reader's and the planner's.
pub fn plan_dump(pods: usize, nodes: usize, format: DumpFormat) -> anyhow::Result<Vec<String>> {
    use std::io::Write;
    let nodes = nodes.max(1);
    let file = std::env::temp_dir().join(format!(
        "karpenter-plan-dump-{}.{}",
        std::process::id(),
        if format == DumpFormat::Yaml {
            "yaml"
        } else {
            "json"
        }
    ));
    let mut out = std::io::BufWriter::new(
        std::fs::File::create(&file).with_context(|| format!("{}", file.display()))?,
    );
    let write_start = Instant::now();
    let mut first = true;
    let mut item = |out: &mut std::io::BufWriter<std::fs::File>, object: serde_json::Value| {
        let written = match format {
            DumpFormat::Json => {
                let sep = if std::mem::take(&mut first) {
                    ""
                } else {
                    ",\n"
                };
                write!(out, "{sep}").and_then(|()| {
                    serde_json::to_writer_pretty(&mut *out, &object).map_err(std::io::Error::other)
                })
            }
            DumpFormat::Yaml => {
                let text = serde_saphyr::to_string(&object).expect("JSON values serialize");
                text.lines().enumerate().try_for_each(|(i, line)| {
                    writeln!(out, "{}{line}", if i == 0 { "- " } else { "  " })
                })
            }
        };
        written.context("writing the dump")
    };
    match format {
        DumpFormat::Json => writeln!(
            out,
            "{{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": ["
        )?,
        DumpFormat::Yaml => writeln!(out, "apiVersion: v1\nkind: List\nitems:")?,
    }
    for object in dump_objects(pods, nodes) {
        item(&mut out, object)?;
    }
    if format == DumpFormat::Json {
        writeln!(out, "\n]}}")?;
    }
    out.flush()?;
    drop(out);
    let write_seconds = write_start.elapsed().as_secs_f64();
    let bytes = std::fs::metadata(&file)?.len();
    let read_start = Instant::now();
    let dump = karpenter_planner::Dump::read_path(&file);
    let read_seconds = read_start.elapsed().as_secs_f64();
    std::fs::remove_file(&file).ok();
    let dump = dump?;
    let plan_start = Instant::now();
    let plan = karpenter_planner::plan_from(
        &dump,
        &karpenter_kwok::catalog::catalog(),
        DUMP_NOW,
        Default::default(),
    );
    let plan_seconds = plan_start.elapsed().as_secs_f64();
    Ok(vec![
        format!(
            "snapshot: {} nodes, {} bound pods, {} pending; {} NodeClaims planned, {} disruption actions (dump written in {write_seconds:.1} s)",
            plan.snapshot.nodes,
            plan.snapshot.bound_pods,
            plan.snapshot.pending_pods,
            plan.provisioning.nodeclaims.len(),
            plan.disruption.actions.len(),
        ),
        format!(
            "plan-dump format={} pods={pods} nodes={nodes} megabytes={:.0} read_seconds={read_seconds:.2} plan_seconds={plan_seconds:.2} peak_rss_mb={}",
            if format == DumpFormat::Yaml {
                "yaml"
            } else {
                "json"
            },
            bytes as f64 / 1e6,
            peak_rss_kib() / 1024
        ),
    ])
}

/// The dump's clock: its objects were created an hour before.
const DUMP_NOW: i64 = 1_717_416_000;

/// The API server's bookkeeping on an object: what a real dump carries and the planner drops.
fn managed_fields(manager: &str, fields: serde_json::Value) -> serde_json::Value {
    serde_json::json!([
        {"apiVersion": "v1", "fieldsType": "FieldsV1", "manager": manager, "operation": "Update",
         "time": "2024-06-03T11:00:00Z", "fieldsV1": fields},
        {"apiVersion": "v1", "fieldsType": "FieldsV1", "manager": "kube-controller-manager",
         "operation": "Update", "subresource": "status", "time": "2024-06-03T11:00:00Z",
         "fieldsV1": {"f:status": {"f:conditions": {
             "k:{\"type\":\"Ready\"}": {".": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}},
             "k:{\"type\":\"PodScheduled\"}": {".": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}}}}}},
    ])
}

/// The dump's objects: a NodePool, a DaemonSet, then per node its NodeClaim, Node and pods.
fn dump_objects(pods: usize, nodes: usize) -> impl Iterator<Item = serde_json::Value> {
    use serde_json::json;
    let created = "2024-06-03T11:00:00Z";
    let pending = pods / 100;
    let bound = pods - pending;
    let pool = json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "default", "creationTimestamp": created},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
            "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]}},
            "disruption": {"consolidateAfter": "30s"}}});
    let daemonset = json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "kube-system", "creationTimestamp": created},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
            "template": {"metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "agent", "image": "agent:1",
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}}}});
    let pod = move |i: usize, node: Option<String>| {
        let fields = json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}},
            "f:ownerReferences": {".": {}, "k:{\"uid\":\"rs\"}": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:image": {}, "f:name": {},
                "f:resources": {".": {}, "f:requests": {".": {}, "f:cpu": {}, "f:memory": {}}}}}}});
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("app-{i}"), "namespace": "default", "uid": format!("pod-{i}"),
                "creationTimestamp": created,
                "labels": {"app": format!("app-{}", i % 50), "pod-template-hash": "5d8f9c"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("app-{}", i % 50),
                    "uid": "rs", "controller": true, "blockOwnerDeletion": true}],
                "managedFields": managed_fields("kube-controller-manager", fields)},
            "spec": {"containers": [{"name": "app", "image": "registry.example/app:1.2.3",
                "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}],
                "schedulerName": "default-scheduler", "serviceAccountName": "default",
                "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]},
            "status": {"phase": "Running", "qosClass": "Burstable"}});
        match node {
            Some(node) => {
                pod["spec"]["nodeName"] = json!(node);
                pod["status"]["conditions"] = json!([{"type": "PodScheduled", "status": "True", "lastTransitionTime": created}]);
            }
            None => {
                pod["status"] = json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                    "reason": "Unschedulable", "lastTransitionTime": created}]});
            }
        }
        pod
    };
    let node_objects = move |n: usize| {
        let name = format!("node-{n}");
        let labels = json!({"karpenter.sh/nodepool": "default", "karpenter.sh/registered": "true",
            "karpenter.sh/initialized": "true", "karpenter.sh/capacity-type": "on-demand",
            "node.kubernetes.io/instance-type": "c-8x-amd64-linux", "kubernetes.io/hostname": name,
            "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
            "topology.kubernetes.io/zone": format!("test-zone-{}", n % 3 + 1)});
        let resources = json!({"cpu": "8", "memory": "32Gi", "pods": "110"});
        let fields = json!({"f:metadata": {"f:labels": {".": {}, "f:kubernetes.io/hostname": {}}},
            "f:spec": {"f:providerID": {}}, "f:status": {"f:allocatable": {"f:cpu": {}, "f:memory": {}}}});
        let conditions: Vec<_> = ["Launched", "Registered", "Initialized"]
            .map(|t| json!({"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": created}))
            .into();
        let claim = json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "labels": labels, "creationTimestamp": created,
                "managedFields": managed_fields("karpenter", fields.clone())},
            "spec": {"nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                "requirements": [], "expireAfter": "720h"},
            "status": {"providerID": format!("kwok://{name}"), "nodeName": name,
                "capacity": resources, "allocatable": resources, "lastPodEventTime": created,
                "conditions": conditions}});
        let node = json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels, "creationTimestamp": created,
                "managedFields": managed_fields("kubelet", fields)},
            "spec": {"providerID": format!("kwok://{name}")},
            "status": {"capacity": resources, "allocatable": resources,
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": created}]}});
        let per_node = bound / nodes + usize::from(n < bound % nodes);
        let first = n * (bound / nodes) + n.min(bound % nodes);
        [claim, node]
            .into_iter()
            .chain((first..first + per_node).map(move |i| pod(i, Some(format!("node-{n}")))))
    };
    [pool, daemonset]
        .into_iter()
        .chain((0..nodes).flat_map(node_objects))
        .chain((bound..pods).map(move |i| pod(i, None)))
}

/// The process's peak resident memory so far (`VmHWM`), in KiB; 0 where `/proc` has none.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}
