//! What if the NodePools changed: `plan --nodepools NEW.yaml` (from a dump with `-f`, or from
//! the live cluster) and `simulate --compare-nodepools A.yaml B.yaml`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use karpenter_api::NodeClaim;
use karpenter_cloudprovider::Catalog;
use karpenter_controller::dry_run::dry_run;
use karpenter_controller::{CloudProvider, Controller, Options};
use karpenter_core::feature_gates::FeatureGates;
use karpenter_core::provisioning::nodepools::launchable;
use karpenter_core::provisioning::scheduling::NodePoolInput;
use karpenter_planner::Dump;
use karpenter_planner::pool_inputs;
use karpenter_planner::what_if::{Proposal, WhatIf, what_if_with};
use karpenter_sim::compare;
use karpenter_sim::report::Report;
use serde_json::Value;

use crate::registry;

/// The providers' static NodeClass drift (`NodeClassDrift`: the hash a NodeClaim recorded at
/// launch against the proposed NodeClass's), asked of the provider whose NodeClass it is.
/// What a NodeClass resolves to (images, subnets) is judged against live instances at run
/// time and is not asked here.
pub fn node_class_drift(class: &Value, claim: &NodeClaim) -> Option<String> {
    registry::node_class_drift(class, claim).map(Into::into)
}

/// The proposal in `path`: at least one NodePool or NodeClass.
fn proposal(path: &Path) -> anyhow::Result<Proposal> {
    let proposal = Proposal::read_path(path)?;
    if proposal.is_empty() {
        anyhow::bail!("{}: holds no NodePool or NodeClass", path.display());
    }
    Ok(proposal)
}

/// What the NodePools and NodeClasses of `nodepools` would do to the cluster dumped in `file`,
/// launching from the catalog named `catalog`.
pub fn from_file(
    file: &Path,
    nodepools: &Path,
    catalog: &str,
    options: &Options,
) -> anyhow::Result<WhatIf> {
    let mut dump = Dump::read_path(file)?;
    dump.scheduler_config = options.scheduler_config.clone();
    dump.ignore_dra_requests = options.ignore_dra_requests;
    let proposal = proposal(nodepools)?;
    let catalog = registry::catalog(catalog)?;
    let gates = options.feature_gates;
    Ok(what_if_with(
        &dump,
        &proposal,
        &catalog,
        super::plan::now(),
        gates,
        &|d| pool_inputs(d, &catalog, gates),
        &node_class_drift,
    ))
}

/// What the NodePools and NodeClasses of `nodepools` would do to the cluster of the
/// kubeconfig (or in-cluster), with the provider named `provider` giving every NodePool's
/// instance types (the proposed ones' too). Nothing is written.
pub fn from_cluster(
    provider: &str,
    settings: registry::ProviderSettings,
    options: Options,
    nodepools: &Path,
) -> anyhow::Result<WhatIf> {
    let proposal = proposal(nodepools)?;
    let currency = registry::catalog(provider).map_or("USD", |c| c.currency);
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let client = karpenter_controller::kube_client::client(&options)
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "no cluster to plan from (kubeconfig or in-cluster; -f plans from a dump): {e}"
                )
            })?;
        registry::with_provider(
            provider,
            client,
            settings,
            Live {
                options,
                proposal,
                currency,
            },
        )
        .await
    })
}

/// `plan --nodepools`'s live part once the provider is built.
struct Live {
    options: Options,
    proposal: Proposal,
    currency: &'static str,
}

impl registry::ProviderCommand for Live {
    type Output = WhatIf;

    async fn run<P: karpenter_controller::Provider>(
        self,
        client: kube::Client,
        provider: P,
    ) -> anyhow::Result<WhatIf> {
        live(
            client,
            provider,
            self.options,
            &self.proposal,
            self.currency,
        )
        .await
    }
}

/// The live what-if: the controller's dry run lists the cluster (nothing is written) and gives
/// each NodePool's instance types; the provider is asked for those of the proposed NodePools;
/// then the objects listed are planned as a dump, before and after the change.
pub async fn live<P: CloudProvider>(
    client: kube::Client,
    provider: P,
    options: Options,
    proposal: &Proposal,
    currency: &'static str,
) -> anyhow::Result<WhatIf> {
    let gates = options.feature_gates;
    let controller = Controller::new(client, Arc::new(provider), options);
    let ctx = controller.context();
    let pools: Vec<NodePoolInput> = dry_run(&ctx, |_, _, pools| pools.to_vec()).await?;
    let mut types: BTreeMap<String, _> = pools
        .iter()
        .map(|p| (p.node_pool.name().to_string(), p.instance_types.clone()))
        .collect();
    for pool in &proposal.node_pools {
        let listed =
            ctx.provider.instance_types(pool).await.with_context(|| {
                format!("instance types of the proposed NodePool {}", pool.name())
            })?;
        types.insert(pool.name().to_string(), listed);
    }
    let objects = ctx.cluster.objects();
    let mut dump = Dump::empty();
    dump.cluster = karpenter_core::state::ClusterObjects {
        nodes: objects.nodes,
        node_claims: objects.node_claims,
        pods: objects.pods.iter().map(|p| p.to_pod()).collect(),
        daemonsets: objects.daemonsets,
        pdbs: objects.pdbs,
        namespaces: objects.namespaces,
        volume_claims: objects.volume_claims,
        volumes: objects.volumes,
        storage_classes: objects.storage_classes,
        csi_nodes: objects.csi_nodes,
        services: objects.services,
        pod_controllers: objects.pod_controllers,
        nominated: objects.nominated,
        devices: Default::default(),
        marked_for_deletion: objects.marked_for_deletion,
    };
    dump.node_pools = ctx
        .cluster
        .node_pools
        .all()
        .iter()
        .map(|p| (**p).clone())
        .collect();
    // What the provider offers, for pricing nodes of no NodePool, and the rest of what a
    // catalog tells the planner.
    let mut catalog = Catalog::new("live", [], &[]);
    let mut seen = std::collections::BTreeSet::new();
    catalog.instance_types = types
        .values()
        .flatten()
        .filter(|it| seen.insert(it.name.clone()))
        .cloned()
        .collect();
    catalog.provider_labels = ctx.provider.provider_labels();
    catalog.repair_policies = ctx.provider.repair_policies();
    catalog.currency = currency;
    let pools_of = |d: &Dump| -> Vec<NodePoolInput> {
        d.node_pools
            .iter()
            .filter(|np| launchable(np))
            .filter_map(|np| {
                Some(NodePoolInput {
                    node_pool: np.clone(),
                    instance_types: types.get(np.name())?.clone(),
                })
            })
            .collect()
    };
    Ok(what_if_with(
        &dump,
        proposal,
        &catalog,
        super::plan::now(),
        gates,
        &pools_of,
        &node_class_drift,
    ))
}

/// Runs the scenario with its NodePools replaced by `a`'s, then by `b`'s.
pub fn compare_node_pools(
    file: Option<&Path>,
    catalog_name: Option<&str>,
    gates: FeatureGates,
    a: &Path,
    b: &Path,
) -> anyhow::Result<(Report, Report)> {
    let (scenario, catalog) = super::simulate::load(file, catalog_name)?;
    let crds = registry::crds();
    let a = compare::read_node_pools(a, &crds)?;
    let b = compare::read_node_pools(b, &crds)?;
    Ok(compare::compare_node_pools(
        &scenario, &catalog, gates, &a, &b,
    ))
}

/// The name a file is shown by in a comparison: its file name.
pub fn label(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into(),
    )
}

#[cfg(test)]
mod tests {
    use karpenter_kwok::KwokProvider;
    use karpenter_testkit::FakeApiServer;
    use serde_json::json;

    use super::*;

    fn node_pool(zones: &[&str]) -> serde_json::Value {
        json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                "requirements": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": zones}]}}}})
    }

    /// An EC2NodeClass whose launch fields change drifts the NodeClaims launched from it, by
    /// the hash they recorded; one whose selector terms change does not (judged against the
    /// live instances instead).
    #[test]
    fn an_ec2nodeclass_change_drifts_its_claims_by_hash() {
        use karpenter_aws::ec2nodeclass::{
            EC2_NODE_CLASS_HASH_ANNOTATION, EC2_NODE_CLASS_HASH_VERSION,
            EC2_NODE_CLASS_HASH_VERSION_ANNOTATION,
        };
        let class = |tag: &str, discovery: &str| {
            json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
                "metadata": {"name": "default"},
                "spec": {"role": "KarpenterNodeRole", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                    "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": discovery}}],
                    "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": discovery}}],
                    "tags": {"team": tag}}})
        };
        let launched = class("platform", "my-cluster");
        let hash = serde_json::from_value::<karpenter_aws::EC2NodeClass>(launched.clone())
            .unwrap()
            .hash();
        let claim: NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "c", "annotations": {
                EC2_NODE_CLASS_HASH_ANNOTATION: hash,
                EC2_NODE_CLASS_HASH_VERSION_ANNOTATION: EC2_NODE_CLASS_HASH_VERSION}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []}}))
        .unwrap();
        assert_eq!(node_class_drift(&launched, &claim), None);
        assert_eq!(
            node_class_drift(&class("web", "my-cluster"), &claim).as_deref(),
            Some("NodeClassDrift")
        );
        assert_eq!(node_class_drift(&class("platform", "other"), &claim), None);
    }

    /// Live, the cluster is listed through the controller's dry run and the proposal judged
    /// against it: the node outside the narrowed zones drifts, and nothing is written.
    #[test]
    fn the_live_what_if_drifts_the_nodes_outside_the_new_requirements() {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let _inside = runtime.enter();
        let server = FakeApiServer::new();
        server
            .install_crds(karpenter_kwok::CRDS.iter().map(|c| c.definition()))
            .unwrap();
        server
            .create(
                &serde_json::from_value::<karpenter_kwok::KWOKNodeClass>(json!({
                    "apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass",
                    "metadata": {"name": "default"}, "spec": {}}))
                .unwrap(),
            )
            .unwrap();
        server
            .create(
                &serde_json::from_value::<karpenter_api::NodePool>(node_pool(&[
                    "test-zone-a",
                    "test-zone-b",
                ]))
                .unwrap(),
            )
            .unwrap();
        let created = (k8s_openapi::jiff::Timestamp::now()
            - k8s_openapi::jiff::SignedDuration::from_hours(1))
        .to_string();
        for (name, zone) in [("node-a", "test-zone-a"), ("node-b", "test-zone-b")] {
            let labels = json!({"karpenter.sh/nodepool": "default", "karpenter.sh/initialized": "true",
                "karpenter.sh/registered": "true", "node.kubernetes.io/instance-type": "c-4x-amd64-linux",
                "topology.kubernetes.io/zone": zone, "karpenter.sh/capacity-type": "on-demand",
                "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux"});
            server
                .create(
                    &serde_json::from_value::<k8s_openapi::api::core::v1::Node>(json!({
                        "apiVersion": "v1", "kind": "Node",
                        "metadata": {"name": name, "labels": labels},
                        "spec": {"providerID": format!("kwok://{name}")},
                        "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": created}],
                            "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}}}))
                    .unwrap(),
                )
                .unwrap();
            server
                .create(
                    &serde_json::from_value::<karpenter_api::NodeClaim>(json!({
                        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                        "metadata": {"name": name, "labels": labels},
                        "spec": {"nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}, "requirements": []},
                        "status": {"providerID": format!("kwok://{name}"), "nodeName": name,
                            "conditions": [{"type": "Launched", "status": "True", "reason": "Launched", "message": "", "lastTransitionTime": created}]}}))
                    .unwrap(),
                )
                .unwrap();
        }
        let proposal = Proposal {
            node_pools: vec![serde_json::from_value(node_pool(&["test-zone-a"])).unwrap()],
            node_classes: Vec::new(),
        };
        let options = Options {
            disable_leader_election: true,
            ..Options::default()
        };
        let w = runtime
            .block_on(live(
                server.client(),
                KwokProvider::new(server.client()),
                options,
                &proposal,
                "USD",
            ))
            .unwrap();
        let drifted: Vec<(&str, &str)> = w
            .drifted
            .iter()
            .map(|d| (d.node.as_str(), d.reason.as_str()))
            .collect();
        assert_eq!(
            drifted,
            [("node-b", "RequirementsDrifted")],
            "{}",
            w.to_text()
        );
        assert!(w.cost_before.nodes > 0.0, "{:?}", w.cost_before);
        // Empty, it is deleted, not replaced (emptiness takes node-a first, the budget's one
        // node; node-b goes in a later pass).
        assert!(
            w.drifted[0].removed && w.drifted[0].replacements.is_empty(),
            "{}\n{}",
            w.to_text(),
            w.after.to_text()
        );
        assert!(
            w.to_text().contains("deleted in a later pass (empty)"),
            "{}",
            w.to_text()
        );
        assert!(
            w.cost_after.total < w.cost_before.total,
            "{:?}",
            w.cost_after
        );
        // Nothing was written: the NodePool in the cluster still allows both zones.
        let pools = runtime
            .block_on(kube::Api::<karpenter_api::NodePool>::all(server.client()).get("default"))
            .unwrap();
        let zones = &pools.spec.template.spec.requirements[0].values;
        assert_eq!(zones.len(), 2, "{zones:?}");
    }
}
