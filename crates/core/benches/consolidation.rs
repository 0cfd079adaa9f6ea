//! One full disruption pass over generated clusters (`cargo bench -p karpenter-core --bench
//! consolidation`); `karpenter-rs bench consolidation` prints the same figure for one size.

use divan::Bencher;
use karpenter_core::benchmark::{consolidation_cluster, consolidation_pass};

fn main() {
    divan::main();
}

/// (nodes, pods): 20 pods a node, as in the 1,000-node bar.
#[divan::bench(args = [(100, 2_000), (500, 10_000), (1_000, 20_000)], sample_count = 5)]
fn full_pass(bencher: Bencher, (nodes, pods): (usize, usize)) {
    let (pool, states) = consolidation_cluster(nodes, pods, 42).expect("the pods fit");
    bencher.bench_local(|| consolidation_pass(&pool, &states));
}
