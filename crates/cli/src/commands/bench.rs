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
