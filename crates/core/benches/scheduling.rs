//! Upstream's scheduling benchmark (`BenchmarkScheduling*`, `BenchmarkRespectPreferences`): one
//! `solve` over the diverse pod mix or the preference pods, 400 fake instance types, one
//! NodePool. Only the solve is timed, as upstream does. `cargo bench -p karpenter-core`.

use divan::Bencher;
use karpenter_core::benchmark;
use karpenter_core::provisioning::scheduling::{Scheduler, SchedulerOptions};

fn main() {
    divan::main();
}

#[divan::bench(args = [100, 1000, 5000, 10_000], sample_count = 5)]
fn diverse(bencher: Bencher, pods: usize) {
    let pool = benchmark::node_pool(400);
    let pods: Vec<_> = benchmark::diverse_rows(pods, 42)
        .iter()
        .enumerate()
        .map(|(i, r)| benchmark::pod(i, r))
        .collect();
    bencher
        .with_inputs(|| {
            Scheduler::new(
                std::slice::from_ref(&pool),
                &[],
                &[],
                SchedulerOptions::default(),
            )
        })
        .bench_local_values(|mut scheduler| {
            scheduler.solve(&pods, &|| false).new_node_claims.len()
        });
}

#[divan::bench(sample_count = 5)]
fn respect_preferences(bencher: Bencher) {
    let pool = benchmark::node_pool(400);
    let pods = benchmark::preference_pods(4000, 42);
    bencher
        .with_inputs(|| {
            Scheduler::new(
                std::slice::from_ref(&pool),
                &[],
                &[],
                SchedulerOptions::default(),
            )
        })
        .bench_local_values(|mut scheduler| {
            scheduler.solve(&pods, &|| false).new_node_claims.len()
        });
}
