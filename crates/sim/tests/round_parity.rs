//! The simulator and `plan` decide through one round: every provisioning round and every
//! disruption decision the simulator makes over a scenario is replayed through `plan -f` on a
//! dump of the cluster it was made on, and must come out the same.

use std::path::Path;

use karpenter_sim::engine::Simulation;
use karpenter_sim::scenario::{self, Object, Scenario};

fn crds() -> Vec<karpenter_api::crd::Crd> {
    karpenter_api::crd::CORE
        .into_iter()
        .chain(karpenter_kwok::CRDS.iter().copied())
        .collect()
}

/// Why `plan` cannot see what the simulator sees in `s`, if it cannot: inputs a dump of
/// Nodes, NodeClaims, pods and the rest does not hold.
fn not_in_a_dump(s: &Scenario) -> Option<&'static str> {
    let spec = &s.spec;
    if spec.catalog.as_deref().is_some_and(|c| c != "kwok") {
        return Some("another catalog");
    }
    if spec.spot_price_ratio.is_some() {
        return Some("assumed spot prices");
    }
    if !spec.capacity_reservations.is_empty() {
        return Some("the scenario's capacity reservations");
    }
    if !spec.scheduler_config.default_constraints.is_empty() {
        return Some("the scheduler configuration (with the Services and ReplicaSets it reads)");
    }
    let objects = s
        .objects
        .iter()
        .chain(s.steps.iter().flat_map(|(_, a)| match a {
            scenario::Action::Apply(objects) => objects.as_slice(),
            _ => &[],
        }));
    for o in objects {
        if matches!(o, Object::CapacityBuffer(_) | Object::PodTemplate(_)) {
            return Some("CapacityBuffers and their workloads");
        }
        if matches!(o, Object::NodeOverlay(_)) {
            return Some("NodeOverlays");
        }
    }
    None
}

/// Replays `s`'s decisions through `plan`; how many it compared.
fn replay(name: &str, s: &Scenario) -> usize {
    let catalog = karpenter_kwok::catalog::catalog();
    let (report, decided) = Simulation::new(s, catalog.clone()).run_recorded(&mut |_| {});
    assert!(report.failures.is_empty(), "{name}: {:?}", report.failures);
    let mut compared = 0;
    // Every decision that does something, and one in ten of the rest (CI's time).
    let acts = |d: &karpenter_sim::engine::Decided| {
        let p = &d.plan.provisioning;
        !p.nodeclaims.is_empty()
            || !p.existing_node_placements.is_empty()
            || !d.plan.disruption.actions.is_empty()
    };
    let quiet = std::cell::Cell::new(0);
    let sampled = |d: &&karpenter_sim::engine::Decided| {
        acts(d) || {
            quiet.set(quiet.get() + 1);
            quiet.get() % 10 == 1
        }
    };
    for d in decided
        .iter()
        .filter(|d| !d.controller_memory)
        .filter(sampled)
    {
        let planned = karpenter_planner::plan(
            Path::new("simulated"),
            &d.dump,
            &catalog,
            d.now,
            s.spec.feature_gates.over(Default::default()),
        )
        .unwrap_or_else(|e| panic!("{name} t={}s: the dump reads: {e}", d.t_s));
        if d.provisioning {
            assert_eq!(
                planned.provisioning, d.plan.provisioning,
                "{name} t={}s: provisioning",
                d.t_s
            );
        }
        if d.disruption {
            // The simulator's disruption round does not expire (its expiration ran before);
            // nothing in the dump is past its expireAfter but what it already drains.
            let actions: Vec<_> = planned
                .disruption
                .actions
                .iter()
                .filter(|a| a.method != "expiration")
                .collect();
            let expected: Vec<_> = d.plan.disruption.actions.iter().collect();
            assert_eq!(actions, expected, "{name} t={}s: disruption", d.t_s);
            assert_eq!(
                planned.disruption.blocked, d.plan.disruption.blocked,
                "{name} t={}s: nodes kept",
                d.t_s
            );
        }
        compared += 1;
    }
    compared
}

#[test]
fn plan_decides_as_the_simulator_on_every_scenario() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/scenarios");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut scenarios = vec![("built-in".to_string(), scenario::built_in())];
    for f in files {
        let s = scenario::load(&f, &crds()).unwrap_or_else(|e| panic!("{e}"));
        scenarios.push((f.file_name().unwrap().to_string_lossy().into_owned(), s));
    }
    let mut replayed = Vec::new();
    let mut skipped = Vec::new();
    for (name, s) in &scenarios {
        match not_in_a_dump(s) {
            Some(why) => skipped.push(format!("{name}: {why}")),
            None => replayed.push((name.clone(), replay(name, s))),
        }
    }
    // Most scenarios are replayed, each with many decisions.
    assert!(replayed.len() >= 8, "{replayed:?}; skipped {skipped:?}");
    assert!(
        replayed.iter().all(|(_, n)| *n > 0),
        "{replayed:?}; skipped {skipped:?}"
    );
}
