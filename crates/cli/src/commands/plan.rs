//! `karpenter-rs plan`: what karpenter would do now — from a dump (`-f`) through the simulator's
//! planner, or from the live cluster through the controller's own provisioning and disruption
//! code, read-only.

use std::path::Path;
use std::sync::Arc;

use karpenter_controller::dry_run::dry_run;
use karpenter_controller::{CloudProvider, Controller, Options};
use karpenter_planner::Plan;

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
    Ok(karpenter_planner::plan(
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
        crate::registry::with_provider(provider, client, settings, Live(options)).await
    })
}

/// `plan`'s part once the provider is built.
struct Live(Options);

impl crate::registry::ProviderCommand for Live {
    type Output = Plan;

    async fn run<P: karpenter_controller::Provider>(
        self,
        client: kube::Client,
        provider: P,
    ) -> anyhow::Result<Plan> {
        live(client, provider, self.0).await
    }
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
    Ok(dry_run(&ctx, |snapshot, round, pools| {
        Plan::from_round(snapshot, &round, pools, ctx.cluster.node_pools.len(), 0)
    })
    .await?)
}

#[cfg(test)]
mod tests {
    use karpenter_kwok::KwokProvider;
    use karpenter_testkit::FakeApiServer;
    use serde_json::json;

    use super::*;

    fn create(server: &FakeApiServer, kind_json: serde_json::Value) {
        match kind_json["kind"].as_str().unwrap() {
            "KWOKNodeClass" => server
                .create(
                    &serde_json::from_value::<karpenter_kwok::KWOKNodeClass>(kind_json).unwrap(),
                )
                .unwrap(),
            "NodePool" => server
                .create(&serde_json::from_value::<karpenter_api::NodePool>(kind_json).unwrap())
                .unwrap(),
            "NodeClaim" => server
                .create(&serde_json::from_value::<karpenter_api::NodeClaim>(kind_json).unwrap())
                .unwrap(),
            "Node" => server
                .create(
                    &serde_json::from_value::<k8s_openapi::api::core::v1::Node>(kind_json).unwrap(),
                )
                .unwrap(),
            other => panic!("{other}"),
        };
    }

    /// The live plan reports what the static capacity and node repair loops would do, from
    /// the same decisions as `plan -f` and the controller.
    #[test]
    fn the_live_plan_reports_static_capacity_and_repairs() {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let _inside = runtime.enter();
        let server = FakeApiServer::new();
        server
            .install_crds(karpenter_kwok::CRDS.iter().map(|c| c.definition()))
            .unwrap();
        let class_ref =
            json!({"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"});
        create(
            &server,
            json!({"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": "default"}, "spec": {}}),
        );
        create(
            &server,
            json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "static"},
                "spec": {"replicas": 2, "template": {"spec": {"nodeClassRef": class_ref, "requirements": [
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c-4x-amd64-linux"]}]}}}}),
        );
        create(
            &server,
            json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
                "spec": {"template": {"spec": {"nodeClassRef": class_ref}}}}),
        );
        // A node whose kubelet has not been Ready for an hour (KWOK tolerates 10 minutes).
        let an_hour_ago = (k8s_openapi::jiff::Timestamp::now()
            - k8s_openapi::jiff::SignedDuration::from_hours(1))
        .to_string();
        create(
            &server,
            json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": "sick", "labels": {"karpenter.sh/nodepool": "default", "karpenter.sh/initialized": "true"}},
                "spec": {"providerID": "kwok://sick"},
                "status": {"conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": an_hour_ago}],
                    "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "64"}}}),
        );
        create(
            &server,
            json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                "metadata": {"name": "sick-claim", "labels": {"karpenter.sh/nodepool": "default"}},
                "spec": {"nodeClassRef": class_ref, "requirements": []},
                "status": {"providerID": "kwok://sick", "nodeName": "sick"}}),
        );
        let plan_with = |gates: &str| {
            let options = Options {
                feature_gates: gates.parse().unwrap(),
                disable_leader_election: true,
                ..Options::default()
            };
            runtime
                .block_on(live(
                    server.client(),
                    KwokProvider::new(server.client()),
                    options,
                ))
                .unwrap()
        };
        let plan = plan_with("StaticCapacity=true,NodeRepair=true");
        assert_eq!(plan.static_capacity.nodeclaims.len(), 2, "{plan:?}");
        assert!(
            plan.static_capacity
                .nodeclaims
                .iter()
                .all(|c| c.nodepool == "static")
        );
        assert_eq!(plan.repair.repaired.len(), 1, "{:?}", plan.repair);
        assert_eq!(plan.repair.repaired[0].nodeclaim, "sick-claim");
        assert_eq!(plan.repair.repaired[0].condition, "Ready=False");

        let off = plan_with("StaticCapacity=false,NodeRepair=false");
        assert!(off.static_capacity.nodeclaims.is_empty());
        assert!(off.repair.repaired.is_empty());
    }
}
