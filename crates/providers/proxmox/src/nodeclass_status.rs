//! The ProxmoxNodeClass status, as upstream's status controller writes it: the zones the
//! NodeClass can launch in (`selectedZones`, `region/zone/vmid` of its template's VMs, in its
//! region, on nodes that have its boot storage) and their count (`resources.zones`); the
//! conditions `InstanceTemplateReady`, `InstanceMetadataOptionsReady` and `Ready` over them.
//! Upstream looks again every 15 seconds: templates come and go on the Proxmox side.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::jiff::Timestamp;
use karpenter_cloudprovider::conditions::ConditionSet;

use crate::apis::{
    CONDITION_INSTANCE_METADATA_OPTIONS_READY, CONDITION_INSTANCE_TEMPLATE_READY, MetadataType,
    NODE_CLASS_READY_CONDITIONS, ProxmoxNodeClass, ProxmoxNodeClassStatus, RESOURCE_ZONES,
    SelectedZone,
};

/// When to look again.
pub const REQUEUE: Duration = Duration::from_secs(15);

/// What a pass read about the NodeClass's references.
#[derive(Clone, Debug)]
pub struct Observed {
    /// The template's zones (`region/zone/vmid`), or why there are none: the template object
    /// is missing or not ready.
    pub template_zones: Result<Vec<String>, String>,
    /// Whether the boot storage is on `(region, zone)`; every zone when the NodeClass names
    /// no storage.
    pub storage_zones: Option<Vec<(String, String)>>,
    /// Whether the templates Secret exists (`None`: not asked, the NodeClass wants no
    /// CD-ROM).
    pub templates_secret: Option<bool>,
}

/// The status after a pass that observed `observed`, at `now`.
pub fn status(
    class: &ProxmoxNodeClass,
    observed: &Observed,
    now: Timestamp,
) -> ProxmoxNodeClassStatus {
    let mut out = class.status.clone().unwrap_or_default();
    let created = class
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(now, |t| t.0);
    let region = class.spec.region.as_deref().filter(|r| !r.is_empty());
    let (zones, template_problem) = match &observed.template_zones {
        Ok(zones) => {
            let selected: Vec<String> = zones
                .iter()
                .filter(|z| {
                    let Some(z) = SelectedZone::parse(z) else {
                        return false;
                    };
                    region.is_none_or(|r| r == z.region)
                        && observed
                            .storage_zones
                            .as_ref()
                            .is_none_or(|s| s.iter().any(|(r, n)| *r == z.region && *n == z.zone))
                })
                .cloned()
                .collect();
            let problem = selected
                .is_empty()
                .then(|| "Proxmox Template did not match the node class requirements".to_string());
            (selected, problem)
        }
        Err(e) => (Vec::new(), Some(e.clone())),
    };
    out.resources = BTreeMap::from([(
        RESOURCE_ZONES.to_string(),
        Quantity(zones.len().to_string()),
    )]);
    out.selected_zones = zones;
    let mut c = ConditionSet::new(
        &mut out.conditions,
        &NODE_CLASS_READY_CONDITIONS,
        class.metadata.generation,
        created,
        now,
    );
    match template_problem {
        Some(message) => c.set(
            CONDITION_INSTANCE_TEMPLATE_READY,
            "False",
            "TemplatesNotFound",
            &message,
        ),
        None => c.set_true(CONDITION_INSTANCE_TEMPLATE_READY),
    }
    let wants_cdrom = class.spec.metadata_options.type_ == MetadataType::Cdrom;
    match (
        wants_cdrom,
        class.spec.metadata_options.templates_secret(),
        observed.templates_secret,
    ) {
        (false, _, _) | (true, Some(_), Some(true)) => {
            c.set_true(CONDITION_INSTANCE_METADATA_OPTIONS_READY)
        }
        (true, None, _) => c.set(
            CONDITION_INSTANCE_METADATA_OPTIONS_READY,
            "False",
            "MetadataOptionsNotFound",
            "metadataOptions.templatesRef is required when metadataOptions.type is 'cdrom'",
        ),
        (true, Some(_), _) => c.set(
            CONDITION_INSTANCE_METADATA_OPTIONS_READY,
            "False",
            "MetadataOptionsNotFound",
            "Metadata TemplatesRef secret resource not found",
        ),
    }
    c.finish();
    out
}

#[cfg(feature = "cloud")]
pub use run::run;

#[cfg(feature = "cloud")]
mod run {
    use std::sync::Arc;

    use karpenter_cloudprovider::CloudProviderError;
    use karpenter_controller::state::Index;
    use karpenter_controller::{Context, Error, nodeclass_status};
    use kube::Api;
    use tokio_util::sync::CancellationToken;

    use super::Observed;
    use crate::apis::{
        CommonTemplate, InstanceTemplateKind, ProxmoxNodeClass, ProxmoxTemplate,
        ProxmoxUnmanagedTemplate,
    };
    use crate::provider::{ProxmoxCloudProvider, secret_data};

    karpenter_controller::impl_stored!(ProxmoxNodeClass);

    async fn template_zones(
        kube: &kube::Client,
        class: &ProxmoxNodeClass,
    ) -> Result<Result<Vec<String>, String>, kube::Error> {
        let Some(reference) = class.template_ref() else {
            return Ok(Err("spec.instanceTemplateRef is required".into()));
        };
        let found: Option<Box<dyn CommonTemplate + Send>> = match reference.kind {
            InstanceTemplateKind::ProxmoxTemplate => Api::<ProxmoxTemplate>::all(kube.clone())
                .get_opt(&reference.name)
                .await?
                .map(|t| Box::new(t) as Box<dyn CommonTemplate + Send>),
            InstanceTemplateKind::ProxmoxUnmanagedTemplate => {
                Api::<ProxmoxUnmanagedTemplate>::all(kube.clone())
                    .get_opt(&reference.name)
                    .await?
                    .map(|t| Box::new(t) as Box<dyn CommonTemplate + Send>)
            }
        };
        Ok(match found {
            None => Err("Proxmox Template resource reference did not find".into()),
            Some(t) => Ok(t.zones().to_vec()),
        })
    }

    async fn reconcile(
        ctx: &Context<ProxmoxCloudProvider>,
        class: &ProxmoxNodeClass,
    ) -> Result<Option<std::time::Duration>, Error> {
        let kube = ctx.provider.kube();
        let cloud = |e: String| Error::Cloud(CloudProviderError::Other(e.into()));
        let template_zones = template_zones(kube, class)
            .await
            .map_err(|e| cloud(format!("reading the template: {e}")))?;
        ctx.provider.refresh(false).await.map_err(cloud)?;
        let storage_zones = match class
            .spec
            .boot_device
            .storage
            .as_deref()
            .filter(|s| !s.is_empty())
        {
            None => None,
            Some(storage) => Some(ctx.provider.zones_with_storage(storage).await),
        };
        let templates_secret = match class.spec.metadata_options.templates_secret() {
            Some((name, namespace)) => Some(
                secret_data(kube, namespace, name)
                    .await
                    .map_err(cloud)?
                    .is_some(),
            ),
            None => None,
        };
        let observed = Observed {
            template_zones,
            storage_zones,
            templates_secret,
        };
        let next = super::status(class, &observed, ctx.clock.now());
        nodeclass_status::write(&ctx.client, class, class.status.as_ref(), &next).await?;
        Ok(Some(super::REQUEUE))
    }

    /// Keeps every ProxmoxNodeClass's status current while this replica leads.
    pub async fn run(ctx: Arc<Context<ProxmoxCloudProvider>>, shutdown: CancellationToken) {
        nodeclass_status::run(
            ctx,
            shutdown,
            "proxmoxnodeclass.status",
            Arc::new(Index::<ProxmoxNodeClass>::default()),
            |ctx, class| async move { reconcile(&ctx, &class).await },
        )
        .await;
    }
}

#[cfg(test)]
mod tests {
    use karpenter_cloudprovider::conditions::CONDITION_READY;
    use serde_json::json;

    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + second).unwrap()
    }

    fn class(spec: serde_json::Value) -> ProxmoxNodeClass {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.proxmox.sinextra.dev/v1alpha1",
            "kind": "ProxmoxNodeClass",
            "metadata": {"name": "default", "generation": 2},
            "spec": spec,
        }))
        .unwrap()
    }

    fn condition<'a>(s: &'a ProxmoxNodeClassStatus, t: &str) -> (&'a str, &'a str) {
        let c = s.conditions.iter().find(|c| c.type_ == t).unwrap();
        (c.status.as_str(), c.reason.as_str())
    }

    fn observed(zones: Result<Vec<&str>, &str>) -> Observed {
        Observed {
            template_zones: zones
                .map(|z| z.into_iter().map(str::to_string).collect())
                .map_err(str::to_string),
            storage_zones: None,
            templates_secret: None,
        }
    }

    #[test]
    fn zones_are_the_templates_in_the_region_with_the_boot_storage() {
        let template = json!({"kind": "ProxmoxUnmanagedTemplate", "name": "k3s"});
        let zones = vec!["pve/pve1/9000", "pve/pve2/9001", "lab/n1/100", "bad"];
        type Case = (
            serde_json::Value,
            Option<Vec<(&'static str, &'static str)>>,
            Vec<&'static str>,
        );
        let cases: Vec<Case> = vec![
            (
                json!({"instanceTemplateRef": template}),
                None,
                vec!["pve/pve1/9000", "pve/pve2/9001", "lab/n1/100"],
            ),
            (
                json!({"instanceTemplateRef": template, "region": "pve"}),
                None,
                vec!["pve/pve1/9000", "pve/pve2/9001"],
            ),
            (
                json!({"instanceTemplateRef": template, "region": "pve"}),
                Some(vec![("pve", "pve2"), ("lab", "n1")]),
                vec!["pve/pve2/9001"],
            ),
        ];
        for (spec, storage, want) in cases {
            let mut o = observed(Ok(zones.clone()));
            o.storage_zones = storage.map(|s| {
                s.into_iter()
                    .map(|(r, z)| (r.to_string(), z.to_string()))
                    .collect()
            });
            let s = status(&class(spec.clone()), &o, at(0));
            assert_eq!(s.selected_zones, want, "{spec}");
            assert_eq!(s.resources[RESOURCE_ZONES].0, want.len().to_string());
            assert_eq!(condition(&s, CONDITION_READY).0, "True", "{spec}");
        }
    }

    #[test]
    fn not_ready_without_template_zones_or_the_templates_secret() {
        let template = json!({"kind": "ProxmoxUnmanagedTemplate", "name": "k3s"});
        let s = status(
            &class(json!({"instanceTemplateRef": template})),
            &observed(Err("Proxmox Template resource reference did not find")),
            at(0),
        );
        assert_eq!(
            condition(&s, CONDITION_INSTANCE_TEMPLATE_READY),
            ("False", "TemplatesNotFound")
        );
        assert_eq!(condition(&s, CONDITION_READY).0, "False");
        assert!(s.selected_zones.is_empty());

        let s = status(
            &class(json!({"instanceTemplateRef": template, "region": "other"})),
            &observed(Ok(vec!["pve/pve1/9000"])),
            at(0),
        );
        assert_eq!(condition(&s, CONDITION_INSTANCE_TEMPLATE_READY).0, "False");

        let cdrom = json!({"instanceTemplateRef": template, "metadataOptions": {"type": "cdrom", "templatesRef": {"name": "k3s", "namespace": "kube-system"}}});
        for (found, want) in [(Some(true), "True"), (Some(false), "False")] {
            let mut o = observed(Ok(vec!["pve/pve1/9000"]));
            o.templates_secret = found;
            let s = status(&class(cdrom.clone()), &o, at(0));
            assert_eq!(
                condition(&s, CONDITION_INSTANCE_METADATA_OPTIONS_READY).0,
                want,
                "{found:?}"
            );
            assert_eq!(condition(&s, CONDITION_READY).0, want);
        }
    }
}
