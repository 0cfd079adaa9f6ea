//! `karpenter-rs simulate`: runs a scenario against an in-memory cluster and reports.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use karpenter_core::feature_gates::FeatureGates;
use karpenter_sim::engine::Simulation;
use karpenter_sim::report::Report;
use karpenter_sim::{catalog, scenario};

use crate::registry;

/// Report formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Tables and a timeline for people.
    Text,
    /// The full report as JSON.
    Json,
}

/// Autoscalers to compare against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Compare {
    /// Node groups of one instance type each, scale-up by the least-waste expander, scale-down
    /// under 50% utilization for 10 minutes.
    ClusterAutoscaler,
}

/// `file` (or the built-in scenario) and the catalog to run it on: `catalog_name`, else the
/// scenario's own, else `kwok`.
pub(crate) fn load(
    file: Option<&Path>,
    catalog_name: Option<&str>,
) -> anyhow::Result<(scenario::Scenario, catalog::Catalog)> {
    let scenario = match file {
        Some(path) => scenario::load(path, &registry::crds())?,
        None => scenario::built_in(),
    };
    let name = catalog_name
        .or(scenario.spec.catalog.as_deref())
        .unwrap_or("kwok");
    let catalog = registry::catalog(name).context("choosing the catalog")?;
    Ok((scenario, catalog))
}

/// Runs the scenario under karpenter-rs and under Cluster Autoscaler's policy.
pub fn compare(
    file: Option<&Path>,
    catalog_name: Option<&str>,
    gates: FeatureGates,
) -> anyhow::Result<(Report, Report)> {
    let (scenario, catalog) = load(file, catalog_name)?;
    let karpenter = Simulation::with_gates(&scenario, catalog.clone(), gates).run(&mut |_| {});
    let other = Simulation::cluster_autoscaler(&scenario, catalog, gates).run(&mut |_| {});
    Ok((karpenter, other))
}

/// Runs `file` (or the built-in scenario) with the gates it names over `gates`, and returns
/// the report.
pub fn run(
    file: Option<&Path>,
    catalog_name: Option<&str>,
    gates: FeatureGates,
    show_progress: bool,
) -> anyhow::Result<Report> {
    let (scenario, catalog) = load(file, catalog_name)?;
    let mut last = 0usize;
    let mut progress = |fraction: f64| {
        if !show_progress {
            return;
        }
        let bar = (fraction * 40.0) as usize;
        if bar != last || fraction >= 1.0 {
            last = bar;
            eprint!(
                "\r[{}{}] {:>3.0}%",
                "#".repeat(bar),
                " ".repeat(40 - bar.min(40)),
                fraction * 100.0
            );
            if fraction >= 1.0 {
                eprintln!();
            }
            let _ = std::io::stderr().flush();
        }
    };
    Ok(Simulation::with_gates(&scenario, catalog, gates).run(&mut progress))
}
