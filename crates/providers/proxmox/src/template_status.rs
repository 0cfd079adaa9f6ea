//! The template kinds' statuses: a `ProxmoxUnmanagedTemplate` lists the template VMs it means
//! (by name, region and tags) as `region/zone/vmid` zones, as upstream's status controller
//! does every five minutes, and is Ready when it means at least one.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use karpenter_cloudprovider::conditions::ConditionSet;

use crate::apis::{
    CONDITION_TEMPLATE_READY, ProxmoxTemplateStatus, ProxmoxUnmanagedTemplate,
    TEMPLATE_READY_CONDITIONS,
};
use crate::templates::TemplateVm;

/// When to look again (upstream: five minutes; sooner here, so a template made by hand shows
/// up while its NodeClass waits).
pub const REQUEUE: Duration = Duration::from_secs(60);

/// The status of `template` given every region's template VMs, at `now`.
pub fn unmanaged_status(
    template: &ProxmoxUnmanagedTemplate,
    inventory: &[TemplateVm],
    now: Timestamp,
) -> ProxmoxTemplateStatus {
    let mut out = template.status.clone().unwrap_or_default();
    let created = template
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(now, |t| t.0);
    let invalid: Result<(), String> = template
        .spec
        .validate_for_create()
        .map_err(|e| e.to_string());
    let matched: Vec<&TemplateVm> = match &invalid {
        Ok(()) => inventory
            .iter()
            .filter(|t| t.matches_unmanaged(&template.spec))
            .collect(),
        Err(_) => Vec::new(),
    };
    out.zones = matched.iter().map(|t| t.zone_entry()).collect();
    let mut c = ConditionSet::new(
        &mut out.conditions,
        &TEMPLATE_READY_CONDITIONS,
        template.metadata.generation,
        created,
        now,
    );
    match (invalid, matched.is_empty()) {
        (Err(e), _) => c.set(CONDITION_TEMPLATE_READY, "False", "TemplateValidation", &e),
        (Ok(()), true) => c.set(
            CONDITION_TEMPLATE_READY,
            "False",
            "TemplatesNotFound",
            "Proxmox Template did not match the node class requirements",
        ),
        (Ok(()), false) => c.set_true(CONDITION_TEMPLATE_READY),
    }
    c.finish();
    out
}

#[cfg(feature = "cloud")]
pub use run::run_unmanaged;

#[cfg(feature = "cloud")]
mod run {
    use std::sync::Arc;

    use karpenter_cloudprovider::CloudProviderError;
    use karpenter_controller::state::Index;
    use karpenter_controller::{Context, Error, nodeclass_status};
    use tokio_util::sync::CancellationToken;

    use crate::apis::ProxmoxUnmanagedTemplate;
    use crate::provider::ProxmoxCloudProvider;

    karpenter_controller::impl_stored!(ProxmoxUnmanagedTemplate);

    async fn reconcile(
        ctx: &Context<ProxmoxCloudProvider>,
        template: &ProxmoxUnmanagedTemplate,
    ) -> Result<Option<std::time::Duration>, Error> {
        let inventory = ctx
            .provider
            .templates()
            .await
            .map_err(|e| Error::Cloud(CloudProviderError::Other(e.into())))?;
        let next = super::unmanaged_status(template, &inventory, ctx.clock.now());
        nodeclass_status::write(&ctx.client, template, template.status.as_ref(), &next).await?;
        Ok(Some(super::REQUEUE))
    }

    /// Keeps every ProxmoxUnmanagedTemplate's status current while this replica leads.
    pub async fn run_unmanaged(
        ctx: Arc<Context<ProxmoxCloudProvider>>,
        shutdown: CancellationToken,
    ) {
        nodeclass_status::run(
            ctx,
            shutdown,
            "proxmoxunmanagedtemplate.status",
            Arc::new(Index::<ProxmoxUnmanagedTemplate>::default()),
            |ctx, template| async move { reconcile(&ctx, &template).await },
        )
        .await;
    }
}

#[cfg(test)]
mod tests {
    use karpenter_cloudprovider::conditions::CONDITION_READY;
    use serde_json::json;

    use super::*;
    use crate::templates::TemplateConfig;

    #[test]
    fn zones_of_the_template_vms_it_means() {
        let inventory = [
            TemplateVm::new(
                "pve",
                "pve1",
                9000,
                "k3s",
                &TemplateConfig {
                    tags: "k8s",
                    ..Default::default()
                },
            ),
            TemplateVm::new("pve", "pve2", 9001, "k3s", &TemplateConfig::default()),
            TemplateVm::new(
                "lab",
                "n1",
                100,
                "talos",
                &TemplateConfig {
                    tags: "k8s",
                    ..Default::default()
                },
            ),
        ];
        let at = Timestamp::from_second(1_700_000_000).unwrap();
        let cases = [
            (
                json!({"templateName": "k3s"}),
                vec!["pve/pve1/9000", "pve/pve2/9001"],
                "True",
            ),
            (
                json!({"tags": ["k8s"]}),
                vec!["pve/pve1/9000", "lab/n1/100"],
                "True",
            ),
            (
                json!({"templateName": "k3s", "region": "lab"}),
                vec![],
                "False",
            ),
            (json!({}), vec![], "False"),
        ];
        for (spec, zones, ready) in cases {
            let t: ProxmoxUnmanagedTemplate = serde_json::from_value(json!({
                "apiVersion": "karpenter.proxmox.sinextra.dev/v1alpha1",
                "kind": "ProxmoxUnmanagedTemplate",
                "metadata": {"name": "k3s", "generation": 1},
                "spec": spec,
            }))
            .unwrap();
            let s = unmanaged_status(&t, &inventory, at);
            assert_eq!(s.zones, zones, "{spec}");
            let c = s
                .conditions
                .iter()
                .find(|c| c.type_ == CONDITION_READY)
                .unwrap();
            assert_eq!(c.status, ready, "{spec}");
        }
    }
}
