//! `karpenter-rs plan`: what karpenter would do now — from a dump (`-f`) through the simulator's
//! planner, or from the live cluster through the controller's own provisioning and disruption
//! code, read-only.

use std::path::Path;
use std::sync::Arc;

use karpenter_controller::dry_run::dry_run;
use karpenter_controller::{CloudProvider, Controller, Options};
use karpenter_sim::plan::{Plan, SnapshotSummary};

/// Plans from a dump in `file` (`-`: standard input), launching from the catalog named
/// `catalog`.
pub fn from_file(file: &Path, catalog: &str, options: &Options) -> anyhow::Result<Plan> {
    let text = if file == Path::new("-") {
        std::io::read_to_string(std::io::stdin())?
    } else {
        std::fs::read_to_string(file).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?
    };
    let catalog = crate::registry::catalog(catalog)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    Ok(karpenter_sim::plan::plan(
        file,
        &text,
        &catalog,
        now,
        options.feature_gates,
    )?)
}

/// Plans from the cluster of the kubeconfig (or in-cluster) with the provider named
/// `provider`.
pub fn from_cluster(
    provider: &str,
    settings: crate::registry::ProviderSettings,
    options: Options,
) -> anyhow::Result<Plan> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let client = karpenter_controller::kube_client::client(&options)
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "no cluster to plan from (kubeconfig or in-cluster; -f plans from a dump): {e}"
                )
            })?;
        crate::registry::plan_live(provider, client, settings, options).await
    })
}

/// Plans from the cluster `client` talks to: its objects are listed once (nothing is written)
/// and the controller's code decides with `provider`'s instance types.
pub async fn live<P: CloudProvider>(
    client: kube::Client,
    provider: P,
    options: Options,
) -> anyhow::Result<Plan> {
    let controller = Controller::new(client, Arc::new(provider), options);
    let ctx = controller.context();
    let run = dry_run(&ctx).await?;
    let p = &run.provisioning;
    Ok(Plan::from_decisions(
        SnapshotSummary::new(p.counts, ctx.cluster.node_pools.len(), 0),
        &p.batch,
        &p.results,
        &p.launching,
        &p.pools,
        run.disruption,
    )
    .ignoring(
        p.rejected
            .iter()
            .map(|(pod, reason)| karpenter_sim::plan::Unschedulable {
                pod: format!(
                    "{}/{}",
                    pod.namespace.as_deref().unwrap_or_default(),
                    pod.name.as_deref().unwrap_or_default()
                ),
                reason: reason.clone(),
            })
            .collect(),
    ))
}
