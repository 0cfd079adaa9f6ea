//! The AKSNodeClass status, as upstream's status controllers write it: the cluster's
//! Kubernetes version (`KubernetesVersionReady`), the newest node images for it
//! (`ImagesReady`, updated only inside the node-OS maintenance window once ready), the
//! subnet (`SubnetsReady`), `ValidationSucceeded`, LocalDNS (`LocalDNSReady`,
//! `localDNSState`) and `Ready` over them all — each condition stamped with the generation it
//! was computed for, which is what launches and drift read it by.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use karpenter_controller::state::Index;
use karpenter_controller::{Context, Error, conditions, nodeclass_status};
use tokio_util::sync::CancellationToken;

use crate::aksnodeclass::{AKSNodeClass, AKSNodeClassStatus, NodeImage};
use crate::bootstrap::{SubnetId, semantic_version};
use crate::images::{
    CONDITION_IMAGES_READY, CONDITION_KUBERNETES_VERSION_READY, keep_existing_versions,
};
use crate::provider::{AzureCloudProvider, ClusterState};

/// How often every AKSNodeClass is resolved again (upstream's image refresh period).
pub const STATUS_INTERVAL: Duration = Duration::from_secs(5 * 60);
/// `SubnetsReady`.
pub const CONDITION_SUBNETS_READY: &str = "SubnetsReady";
/// `ValidationSucceeded`.
pub const CONDITION_VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";
/// `LocalDNSReady`.
pub const CONDITION_LOCAL_DNS_READY: &str = "LocalDNSReady";
/// The ConfigMap (in the controller's namespace) AKS announces maintenance windows in.
pub const MAINTENANCE_WINDOW_CONFIG_MAP: &str = "upcoming-maintenance-window";
/// The node-OS upgrade channel whose window image updates wait for.
const NODE_OS_CHANNEL: &str = "aksManagedNodeOSUpgradeSchedule";

/// Why the subnet cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubnetProblem {
    /// `SubnetIDInvalid`, `SubnetNotFound` or `SubnetUnknownError`.
    pub reason: &'static str,
    /// What is wrong, naming the subnet.
    pub message: String,
}

/// What one pass found out; an `Err` is the message of a failed read.
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    /// The API server's version (`1.33.2`).
    pub kubernetes_version: Result<String, String>,
    /// The newest images for the NodeClass, best first.
    pub images: Result<Vec<NodeImage>, String>,
    /// Whether images may change now (no maintenance window announced, or inside it).
    pub maintenance_window_open: bool,
    /// Whether the subnet is usable.
    pub subnet: Result<(), SubnetProblem>,
}

/// Whether a NodeClass may use `subnet_id` in a cluster whose nodes default to
/// `cluster_subnet_id`, before asking ARM whether it exists: a custom subnet must be in the
/// cluster's VNet, and that VNet must not be the one AKS manages.
pub fn check_subnet_id(
    subnet_id: &str,
    cluster_subnet_id: &str,
    node_resource_group: &str,
) -> Result<SubnetId, SubnetProblem> {
    let invalid = |message: String| SubnetProblem {
        reason: "SubnetIDInvalid",
        message,
    };
    let id = SubnetId::parse(subnet_id)
        .ok_or_else(|| invalid(format!("Failed to parse vnetSubnetID {subnet_id}")))?;
    if subnet_id == cluster_subnet_id {
        return Ok(id);
    }
    // A cluster subnet that does not parse leaves nothing to compare against.
    let Some(cluster) = SubnetId::parse(cluster_subnet_id) else {
        return Ok(id);
    };
    if cluster.is_aks_managed(node_resource_group) && cluster.same_vnet(&id) {
        return Err(invalid(format!(
            "custom subnet cannot be in the same VNet as cluster managed VNet: {subnet_id}"
        )));
    }
    if !cluster.same_vnet(&id) {
        return Err(invalid(format!(
            "vnetSubnetID does not match the cluster subscription, resource group, or virtual network: {subnet_id}"
        )));
    }
    Ok(id)
}

/// Whether the node-OS maintenance window is open at `now`, from the maintenance-window
/// ConfigMap's data (`None`: no ConfigMap). No window announced means always open.
pub fn maintenance_window_open(
    data: Option<&std::collections::BTreeMap<String, String>>,
    now: Timestamp,
) -> Result<bool, String> {
    let Some(data) = data.filter(|d| !d.is_empty()) else {
        return Ok(true);
    };
    let get = |suffix: &str| {
        data.get(&format!("{NODE_OS_CHANNEL}-{suffix}"))
            .filter(|v| !v.is_empty())
    };
    match (get("start"), get("end")) {
        (None, None) => Ok(true),
        (Some(start), Some(end)) => {
            let parse = |v: &str| {
                v.parse::<Timestamp>()
                    .map_err(|e| format!("maintenance window time {v:?} of {NODE_OS_CHANNEL}: {e}"))
            };
            let (start, end) = (parse(start)?, parse(end)?);
            Ok(now > start && now < end)
        }
        _ => Err(format!(
            "incomplete maintenance window data for channel {NODE_OS_CHANNEL}"
        )),
    }
}

struct Writer<'a> {
    conditions: &'a mut Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>,
    generation: Option<i64>,
    now: Timestamp,
}

impl Writer<'_> {
    fn set(&mut self, type_: &str, status: &str, reason: &str, message: &str) {
        conditions::set(self.conditions, type_, status, reason, message, self.now);
        if let Some(c) = self.conditions.iter_mut().find(|c| c.type_ == type_) {
            c.observed_generation = self.generation;
        }
    }

    fn ready(&mut self, type_: &str) {
        self.set(type_, "True", type_, "");
    }
}

/// The status after one pass over a NodeClass of `generation` whose status was `previous`.
pub fn status(class: &AKSNodeClass, observed: &Observed, now: Timestamp) -> AKSNodeClassStatus {
    let mut out = class.status.clone().unwrap_or_default();
    let images_were_ready = conditions::is_true(&out.conditions, CONDITION_IMAGES_READY);
    let version_was_ready =
        conditions::is_true(&out.conditions, CONDITION_KUBERNETES_VERSION_READY);
    let previous_version = out.kubernetes_version.clone();
    let mut w = Writer {
        conditions: &mut out.conditions,
        generation: class.metadata.generation,
        now,
    };

    // Kubernetes version: a newer one is an upgrade (images must follow); an older one is a
    // downgrade Kubernetes does not do, so the current one stays.
    let mut upgraded = false;
    let mut kubernetes_version = previous_version.clone();
    match &observed.kubernetes_version {
        Ok(discovered) => {
            let mut goal = discovered.clone();
            if version_was_ready
                && let Some(current) = previous_version.as_deref().filter(|v| !v.is_empty())
            {
                let version = |v: &str| semantic_version(v.trim_start_matches('v'));
                match (version(discovered), version(current)) {
                    (Some(new), Some(old)) if new > old => upgraded = true,
                    (Some(new), Some(old)) if new < old => goal = current.to_string(),
                    _ => {}
                }
            }
            kubernetes_version = Some(goal);
            w.ready(CONDITION_KUBERNETES_VERSION_READY);
        }
        Err(message) => w.set(
            CONDITION_KUBERNETES_VERSION_READY,
            "False",
            "KubernetesVersionNotReady",
            message,
        ),
    }

    // Images: replaced freely until ready, after an upgrade, or inside the maintenance
    // window; otherwise each image keeps its version.
    let mut images = out.images.clone();
    match &observed.images {
        Ok(discovered) => {
            let free = !images_were_ready || upgraded || observed.maintenance_window_open;
            let goal = if free {
                discovered.clone()
            } else {
                keep_existing_versions(&out.images, discovered.clone())
            };
            if goal.is_empty() {
                images = Vec::new();
                w.set(
                    CONDITION_IMAGES_READY,
                    "False",
                    "ImagesNotFound",
                    "ImageSelectors did not match any Images",
                );
            } else {
                images = goal;
                w.ready(CONDITION_IMAGES_READY);
            }
        }
        Err(message) => w.set(CONDITION_IMAGES_READY, "False", "ImagesNotReady", message),
    }

    match &observed.subnet {
        Ok(()) => w.ready(CONDITION_SUBNETS_READY),
        Err(p) => w.set(CONDITION_SUBNETS_READY, "False", p.reason, &p.message),
    }
    w.ready(CONDITION_VALIDATION_SUCCEEDED);

    // LocalDNS: Required is on, Disabled off; Preferred turns on only past upstream's version
    // threshold (none yet), and once on stays on.
    let mode = class.spec.local_dns.as_ref().map(|l| l.mode.as_str());
    let local_dns = match mode {
        Some("Required") => "Enabled",
        Some("Preferred") if out.local_dns_state.as_deref() == Some("Enabled") => "Enabled",
        _ => "Disabled",
    };
    w.ready(CONDITION_LOCAL_DNS_READY);

    let parts = [
        CONDITION_IMAGES_READY,
        CONDITION_KUBERNETES_VERSION_READY,
        CONDITION_SUBNETS_READY,
        CONDITION_VALIDATION_SUCCEEDED,
        CONDITION_LOCAL_DNS_READY,
    ];
    let failing = parts.iter().find_map(|p| {
        conditions::get(w.conditions, p)
            .filter(|c| c.status != "True")
            .map(|c| (c.reason.clone(), c.message.clone()))
    });
    match failing {
        None => w.ready("Ready"),
        Some((reason, message)) => w.set("Ready", "False", &reason, &message),
    }
    out.kubernetes_version = kubernetes_version;
    out.images = images;
    out.local_dns_state = Some(local_dns.into());
    out
}

karpenter_controller::impl_stored!(AKSNodeClass);

async fn observe<S: ClusterState>(
    ctx: &Context<AzureCloudProvider<S>>,
    class: &AKSNodeClass,
) -> Result<Observed, Error> {
    let provider = &ctx.provider;
    let kubernetes_version = ctx
        .client
        .apiserver_version()
        .await
        .map(|v| v.git_version.trim_start_matches('v').to_string())
        .map_err(|e| format!("reading the API server's version: {e}"));
    let images = match &kubernetes_version {
        Ok(v) => provider.node_images(class, v).await,
        Err(e) => Err(e.clone()),
    };
    let namespace = &ctx.options.system_namespace;
    let maintenance_window_open = match (!namespace.is_empty()).then_some(namespace) {
        Some(ns) => {
            let api: kube::Api<ConfigMap> = kube::Api::namespaced(ctx.client.clone(), ns);
            // A window that cannot be read holds images back; it never stops the rest of the
            // status (a missing permission would otherwise leave every NodeClass not Ready).
            match api.get_opt(MAINTENANCE_WINDOW_CONFIG_MAP).await {
                Ok(map) => maintenance_window_open(
                    map.as_ref().and_then(|m| m.data.as_ref()),
                    ctx.clock.now(),
                )
                .unwrap_or_else(|e| {
                    tracing::warn!(error = %e, "reading the maintenance window; treating it as closed");
                    false
                }),
                Err(e) => {
                    tracing::warn!(error = %e, "reading the maintenance window; treating it as closed");
                    false
                }
            }
        }
        None => true,
    };
    let subnet = provider.check_subnet(class).await;
    Ok(Observed {
        kubernetes_version,
        images,
        maintenance_window_open,
        subnet,
    })
}

async fn reconcile<S: ClusterState>(
    ctx: &Context<AzureCloudProvider<S>>,
    class: &AKSNodeClass,
) -> Result<Option<Duration>, Error> {
    let observed = observe(ctx, class).await?;
    let next = status(class, &observed, ctx.clock.now());
    nodeclass_status::write(&ctx.client, class, class.status.as_ref(), &next).await?;
    Ok(Some(STATUS_INTERVAL))
}

/// Keeps every AKSNodeClass's status current while this replica leads.
pub async fn run<S: ClusterState>(
    ctx: Arc<Context<AzureCloudProvider<S>>>,
    shutdown: CancellationToken,
) {
    nodeclass_status::run(
        ctx,
        shutdown,
        "aksnodeclass.status",
        Arc::new(Index::<AKSNodeClass>::default()),
        |ctx, class| async move { reconcile(&ctx, &class).await },
    )
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const GALLERY: &str =
        "/CommunityGalleries/AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2/images";

    fn image(definition: &str, version: &str) -> NodeImage {
        NodeImage {
            id: format!("{GALLERY}/{definition}/versions/{version}"),
            requirements: Vec::new(),
        }
    }

    fn class(
        generation: i64,
        status: Option<AKSNodeClassStatus>,
        local_dns: Option<&str>,
    ) -> AKSNodeClass {
        let mut c: AKSNodeClass = serde_json::from_value(json!({
            "apiVersion": "karpenter.azure.com/v1beta1", "kind": "AKSNodeClass",
            "metadata": {"name": "default", "generation": generation},
            "spec": local_dns.map(|m| json!({"localDNS": {"mode": m, "vnetDNSOverrides": [], "kubeDNSOverrides": []}})).unwrap_or(json!({})),
        }))
        .unwrap();
        c.status = status;
        c
    }

    fn observed(version: &str, images: Vec<NodeImage>, window: bool) -> Observed {
        Observed {
            kubernetes_version: Ok(version.into()),
            images: Ok(images),
            maintenance_window_open: window,
            subnet: Ok(()),
        }
    }

    fn condition<'a>(s: &'a AKSNodeClassStatus, t: &str) -> (&'a str, &'a str) {
        let c = conditions::get(&s.conditions, t).unwrap();
        (c.status.as_str(), c.reason.as_str())
    }

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    #[test]
    fn a_first_pass_resolves_everything_for_the_generation() {
        let c = class(3, None, None);
        let s = status(
            &c,
            &observed(
                "1.33.2",
                vec![image("2204gen2containerd", "202411.12.0")],
                false,
            ),
            t(100),
        );
        assert_eq!(condition(&s, "Ready"), ("True", "Ready"));
        assert_eq!(s.kubernetes_version.as_deref(), Some("1.33.2"));
        assert_eq!(s.images.len(), 1);
        assert_eq!(s.local_dns_state.as_deref(), Some("Disabled"));
        assert!(
            s.conditions
                .iter()
                .all(|c| c.observed_generation == Some(3))
        );
        assert_eq!(s.conditions.len(), 6);
    }

    #[test]
    fn images_keep_their_versions_outside_the_maintenance_window() {
        let old = vec![image("2204gen2containerd", "202410.09.0")];
        let new = vec![
            image("2204gen2containerd", "202411.12.0"),
            image("2204gen2arm64containerd", "202411.12.0"),
        ];
        let ready = status(
            &class(1, None, None),
            &observed("1.33.2", old.clone(), false),
            t(100),
        );
        let c = class(1, Some(ready), None);
        // Closed window: the known image keeps its version; a new definition comes in.
        let s = status(&c, &observed("1.33.2", new.clone(), false), t(200));
        assert_eq!(s.images[0], old[0]);
        assert_eq!(s.images[1], new[1]);
        // Open window: the newest.
        let s = status(&c, &observed("1.33.2", new.clone(), true), t(200));
        assert_eq!(s.images, new);
        // A Kubernetes upgrade takes the newest images at once.
        let s = status(&c, &observed("1.34.0", new.clone(), false), t(200));
        assert_eq!(s.images, new);
        assert_eq!(s.kubernetes_version.as_deref(), Some("1.34.0"));
        // A lower version is not a downgrade of nodes.
        let s = status(&c, &observed("1.32.9", new, false), t(200));
        assert_eq!(s.kubernetes_version.as_deref(), Some("1.33.2"));
    }

    #[test]
    fn a_failing_part_makes_the_class_not_ready_with_its_reason() {
        let mut o = observed("1.33.2", Vec::new(), true);
        let s = status(&class(1, None, None), &o, t(100));
        assert_eq!(
            condition(&s, CONDITION_IMAGES_READY),
            ("False", "ImagesNotFound")
        );
        assert_eq!(condition(&s, "Ready"), ("False", "ImagesNotFound"));
        o.images = Ok(vec![image("2204gen2containerd", "202411.12.0")]);
        o.subnet = Err(SubnetProblem {
            reason: "SubnetNotFound",
            message: "subnet s not found".into(),
        });
        let s = status(&class(1, Some(s), None), &o, t(200));
        assert_eq!(condition(&s, CONDITION_IMAGES_READY).0, "True");
        let ready = conditions::get(&s.conditions, "Ready").unwrap();
        assert_eq!(
            (ready.reason.as_str(), ready.message.as_str()),
            ("SubnetNotFound", "subnet s not found")
        );
    }

    #[test]
    fn local_dns_modes_resolve_as_upstream() {
        let o = observed("1.33.2", vec![image("2204gen2containerd", "1")], true);
        for (mode, want) in [
            (None, "Disabled"),
            (Some("Disabled"), "Disabled"),
            (Some("Required"), "Enabled"),
            (Some("Preferred"), "Disabled"),
        ] {
            let s = status(&class(1, None, mode), &o, t(1));
            assert_eq!(s.local_dns_state.as_deref(), Some(want), "{mode:?}");
        }
        let enabled = AKSNodeClassStatus {
            local_dns_state: Some("Enabled".into()),
            ..Default::default()
        };
        let s = status(&class(1, Some(enabled), Some("Preferred")), &o, t(1));
        assert_eq!(
            s.local_dns_state.as_deref(),
            Some("Enabled"),
            "Preferred stays on once on"
        );
    }

    #[test]
    fn subnet_ids_are_checked_against_the_clusters() {
        let cluster = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/nodes";
        let managed = "/subscriptions/s/resourceGroups/MC_rg/providers/Microsoft.Network/virtualNetworks/aks-vnet-12345678/subnets/aks-subnet";
        let cases = [
            (cluster, cluster, Ok(())),
            (
                "/subscriptions/s/resourceGroups/RG/providers/microsoft.network/virtualNetworks/v/subnets/other",
                cluster,
                Ok(()),
            ),
            ("not-an-id", cluster, Err("SubnetIDInvalid")),
            (
                "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/elsewhere/subnets/x",
                cluster,
                Err("SubnetIDInvalid"),
            ),
            (
                "/subscriptions/s/resourceGroups/MC_rg/providers/Microsoft.Network/virtualNetworks/aks-vnet-12345678/subnets/custom",
                managed,
                Err("SubnetIDInvalid"),
            ),
        ];
        for (id, cluster, want) in cases {
            let got = check_subnet_id(id, cluster, "MC_rg")
                .map(|_| ())
                .map_err(|p| p.reason);
            assert_eq!(got, want, "{id}");
        }
    }

    #[test]
    fn maintenance_windows() {
        let data = |start: &str, end: &str| {
            std::collections::BTreeMap::from([
                (format!("{NODE_OS_CHANNEL}-start"), start.to_string()),
                (format!("{NODE_OS_CHANNEL}-end"), end.to_string()),
            ])
        };
        let now: Timestamp = "2026-11-24T12:00:00Z".parse().unwrap();
        assert_eq!(maintenance_window_open(None, now), Ok(true));
        assert_eq!(
            maintenance_window_open(
                Some(&data("2026-11-24T10:00:00Z", "2026-11-24T14:00:00Z")),
                now
            ),
            Ok(true)
        );
        assert_eq!(
            maintenance_window_open(
                Some(&data("2026-11-25T10:00:00Z", "2026-11-25T14:00:00Z")),
                now
            ),
            Ok(false)
        );
        assert_eq!(maintenance_window_open(Some(&data("", "")), now), Ok(true));
        assert!(maintenance_window_open(Some(&data("2026-11-24T10:00:00Z", "")), now).is_err());
    }
}
