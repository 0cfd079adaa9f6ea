//! `karpenter-rs plan`: what karpenter would do now — from a dump (`-f`) through the simulator's
//! planner, or from the live cluster through the controller's own provisioning and disruption
//! code, read-only.

use std::path::Path;
use std::sync::Arc;

use karpenter_controller::dry_run::dry_run;
use karpenter_controller::{CloudProvider, Controller, Options};
use karpenter_planner::Plan;
use karpenter_planner::why::Why;

/// Now, in Unix seconds: what `-f` plans are decided as of.
pub(crate) fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Plans from a dump in `file` (`-`: standard input; a directory: every manifest under it),
/// launching from the catalog named `catalog`.
pub fn from_file(file: &Path, catalog: &str, options: &Options) -> anyhow::Result<Plan> {
    let mut dump = karpenter_planner::Dump::read_path(file)?;
    dump.scheduler_config = options.scheduler_config.clone();
    dump.ignore_dra_requests = options.ignore_dra_requests;
    let catalog = crate::registry::catalog(catalog)?;
    let now = now();
    Ok(karpenter_planner::plan_from(
        &dump,
        &catalog,
        now,
        options.feature_gates,
    ))
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

/// The pod `--pod` names, as `namespace/name`: `NS/NAME`, or `NAME` in `namespace` (kubectl's
/// `-n`, `default` without it).
pub fn pod_key(pod: &str, namespace: Option<&str>) -> anyhow::Result<String> {
    match pod.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            if let Some(n) = namespace.filter(|n| *n != ns) {
                anyhow::bail!("--pod {pod} names namespace {ns}, but -n says {n}");
            }
            Ok(pod.to_string())
        }
        None if !pod.is_empty() => Ok(format!("{}/{pod}", namespace.unwrap_or("default"))),
        _ => anyhow::bail!("--pod takes NAME or NAMESPACE/NAME, not {pod:?}"),
    }
}

/// Whether pods would stay pending after the plan: some fit nowhere, or provisioning ignores
/// them (`--exit-code`).
pub fn stays_pending(plan: &Plan) -> bool {
    !plan.provisioning.unschedulable.is_empty() || !plan.provisioning.ignored.is_empty()
}

/// Why pod `key` (`namespace/name`) is where the round over the dump in `file` leaves it (see
/// [`from_file`]).
pub fn why_from_file(
    file: &Path,
    catalog: &str,
    options: &Options,
    key: &str,
) -> anyhow::Result<Why> {
    let mut dump = karpenter_planner::Dump::read_path(file)?;
    dump.scheduler_config = options.scheduler_config.clone();
    dump.ignore_dra_requests = options.ignore_dra_requests;
    let catalog = crate::registry::catalog(catalog)?;
    let now = now();
    karpenter_planner::why::why_from_dump(&dump, &catalog, now, options.feature_gates, key)
        .ok_or_else(|| anyhow::anyhow!("no pod {key} in {}", file.display()))
}

/// Why pod `key` (`namespace/name`) is where the controller's round over the live cluster
/// leaves it (see [`from_cluster`]).
pub fn why_from_cluster(
    provider: &str,
    settings: crate::registry::ProviderSettings,
    options: Options,
    key: &str,
) -> anyhow::Result<Why> {
    let runtime = tokio::runtime::Runtime::new()?;
    let key = key.to_string();
    runtime.block_on(async move {
        let client = karpenter_controller::kube_client::client(&options)
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "no cluster to plan from (kubeconfig or in-cluster; -f plans from a dump): {e}"
                )
            })?;
        crate::registry::with_provider(provider, client, settings, LiveWhy(options, key)).await
    })
}

/// `plan --pod`'s part once the provider is built.
struct LiveWhy(Options, String);

impl crate::registry::ProviderCommand for LiveWhy {
    type Output = Why;

    async fn run<P: karpenter_controller::Provider>(
        self,
        client: kube::Client,
        provider: P,
    ) -> anyhow::Result<Why> {
        live_why(client, provider, self.0, &self.1).await
    }
}

/// Why pod `key` is where the controller's round over the cluster `client` talks to leaves
/// it: the live plan's round, explained.
pub async fn live_why<P: CloudProvider>(
    client: kube::Client,
    provider: P,
    options: Options,
    key: &str,
) -> anyhow::Result<Why> {
    let gates = options.feature_gates;
    let defaults = options.scheduler_config.default_constraints.clone();
    let controller = Controller::new(client, Arc::new(provider), options);
    let ctx = controller.context();
    dry_run(&ctx, |snapshot, round, pools| {
        karpenter_planner::why::why_from_round(snapshot, &round, pools, gates, &defaults, key)
    })
    .await?
    .ok_or_else(|| anyhow::anyhow!("no pod {key} in the cluster"))
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
            "Pod" => server
                .create(
                    &serde_json::from_value::<k8s_openapi::api::core::v1::Pod>(kind_json).unwrap(),
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

    /// `plan --pod` against a live cluster explains the pod from the controller's own round.
    #[test]
    fn the_live_plan_explains_a_pending_pod() {
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
            json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "gpu"},
                "spec": {"template": {"spec": {"nodeClassRef": class_ref,
                    "taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}}}}),
        );
        let pod = |name: &str, tolerations: serde_json::Value| {
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "ml"},
                "spec": {"tolerations": tolerations,
                    "containers": [{"name": "c", "image": "c", "resources": {"requests": {"cpu": "1"}}}]},
                "status": {"phase": "Pending", "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}})
        };
        create(&server, pod("stuck", json!([])));
        create(
            &server,
            pod(
                "tolerant",
                json!([{"key": "dedicated", "operator": "Exists"}]),
            ),
        );
        let why = |key: &str| {
            let options = Options {
                disable_leader_election: true,
                ..Options::default()
            };
            runtime.block_on(live_why(
                server.client(),
                KwokProvider::new(server.client()),
                options,
                key,
            ))
        };
        let stuck = why("ml/stuck").unwrap();
        assert!(stuck.pending, "{stuck:#?}");
        assert_eq!(stuck.nodepools.len(), 1, "{stuck:#?}");
        assert_eq!(stuck.nodepools[0].reasons[0].kind, "taint", "{stuck:#?}");
        let tolerant = why("ml/tolerant").unwrap();
        assert!(
            matches!(&tolerant.outcome, karpenter_planner::why::WhyOutcome::Launch { nodeclaim } if nodeclaim.nodepool == "gpu"),
            "{tolerant:#?}"
        );
        let missing = why("ml/nope").unwrap_err().to_string();
        assert!(
            missing.contains("no pod ml/nope in the cluster"),
            "{missing}"
        );
    }
}
