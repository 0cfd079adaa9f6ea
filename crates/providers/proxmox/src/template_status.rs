//! The template kinds' loops, over the pure [`crate::template_build`]:
//!
//! * a `ProxmoxTemplate` is built into a template VM on every node that can hold it, rebuilt
//!   when its spec changes, and its status written from what the pass did; a finalizer keeps
//!   the object until its template VMs and downloaded images are deleted, so deleting it never
//!   leaves them behind;
//! * a `ProxmoxUnmanagedTemplate` lists the template VMs it means (by name, region and tags),
//!   as upstream's status controller does.

use std::sync::Arc;
use std::time::Duration;

use karpenter_cloudprovider::CloudProviderError;
use karpenter_controller::state::Index;
use karpenter_controller::{Context, Error, nodeclass_status};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::apis::{ProxmoxTemplate, ProxmoxUnmanagedTemplate, TERMINATION_FINALIZER};
use crate::provider::ProxmoxCloudProvider;
use crate::template_build::{self, ApplyOptions, Outcome, Pass};

/// When to look again at an unmanaged template (upstream: five minutes; sooner here, so a
/// template made by hand shows up while its NodeClass waits).
pub const REQUEUE: Duration = Duration::from_secs(60);

/// When to look again at a managed template whose pass went through: a template VM deleted by
/// hand is rebuilt within this.
pub const MANAGED_REQUEUE: Duration = Duration::from_secs(5 * 60);

karpenter_controller::impl_stored!(ProxmoxUnmanagedTemplate);
karpenter_controller::impl_stored!(ProxmoxTemplate);

fn cloud(message: String) -> Error {
    Error::Cloud(CloudProviderError::Other(message.into()))
}

async fn reconcile_unmanaged(
    ctx: &Context<ProxmoxCloudProvider>,
    template: &ProxmoxUnmanagedTemplate,
) -> Result<Option<Duration>, Error> {
    let read = ctx.provider.templates().await;
    let next = template_build::unmanaged_status(template, read.as_deref().ok(), ctx.clock.now());
    nodeclass_status::write(&ctx.client, template, template.status.as_ref(), &next).await?;
    read.map_err(cloud)?;
    Ok(Some(REQUEUE))
}

/// Keeps every ProxmoxUnmanagedTemplate's status current while this replica leads.
pub async fn run_unmanaged(ctx: Arc<Context<ProxmoxCloudProvider>>, shutdown: CancellationToken) {
    nodeclass_status::run(
        ctx,
        shutdown,
        "proxmoxunmanagedtemplate.status",
        Arc::new(Index::<ProxmoxUnmanagedTemplate>::default()),
        |ctx, template| async move { reconcile_unmanaged(&ctx, &template).await },
    )
    .await;
}

/// The finalizers of `template` with ours added or removed, as a merge patch valid only against
/// the version read (a JSON merge patch replaces the whole list).
fn finalizers_patch(template: &ProxmoxTemplate, keep: bool) -> serde_json::Value {
    let mut finalizers: Vec<String> = template
        .metadata
        .finalizers
        .iter()
        .flatten()
        .filter(|f| *f != TERMINATION_FINALIZER)
        .cloned()
        .collect();
    if keep {
        finalizers.push(TERMINATION_FINALIZER.to_string());
    }
    json!({"metadata": {
        "finalizers": finalizers,
        "resourceVersion": template.metadata.resource_version,
    }})
}

fn has_finalizer(template: &ProxmoxTemplate) -> bool {
    template
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == TERMINATION_FINALIZER)
}

async fn patch_finalizers(
    ctx: &Context<ProxmoxCloudProvider>,
    template: &ProxmoxTemplate,
    keep: bool,
) -> Result<(), Error> {
    let name = template.metadata.name.clone().unwrap_or_default();
    let api: Api<ProxmoxTemplate> = Api::all(ctx.client.clone());
    match api
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(finalizers_patch(template, keep)),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(Error::Kube(e)),
    }
}

/// Deletes the object's template VMs and images, then lets it go.
async fn finalize(
    ctx: &Context<ProxmoxCloudProvider>,
    template: &ProxmoxTemplate,
) -> Result<Option<Duration>, Error> {
    if !has_finalizer(template) {
        return Ok(None);
    }
    let provider = &ctx.provider;
    provider.refresh(true).await.map_err(cloud)?;
    let inventory = provider.templates().await.map_err(cloud)?;
    let regions = regions(provider);
    let removal =
        template_build::removal(template, &regions, &provider.storages().await, &inventory);
    let failed: Vec<String> =
        template_build::remove(provider.clusters(), &removal, &ApplyOptions::default())
            .await
            .into_iter()
            .filter_map(|r| r.result.err().map(|e| format!("{:?}: {e}", r.target)))
            .collect();
    if !removal.is_empty() {
        // What was deleted must not be offered to the next NodeClaim.
        let _ = provider.refresh(true).await;
    }
    if !failed.is_empty() {
        return Err(cloud(format!(
            "deleting the templates of ProxmoxTemplate {:?}: {}",
            template.metadata.name.as_deref().unwrap_or_default(),
            failed.join("; ")
        )));
    }
    patch_finalizers(ctx, template, false).await?;
    tracing::info!(
        template = template.metadata.name.as_deref().unwrap_or_default(),
        "deleted the Proxmox templates"
    );
    Ok(None)
}

fn regions(provider: &ProxmoxCloudProvider) -> Vec<String> {
    provider
        .clusters()
        .regions()
        .into_iter()
        .map(str::to_string)
        .collect()
}

async fn reconcile_managed(
    ctx: &Context<ProxmoxCloudProvider>,
    template: &ProxmoxTemplate,
) -> Result<Option<Duration>, Error> {
    if template.metadata.deletion_timestamp.is_some() {
        return finalize(ctx, template).await;
    }
    if !has_finalizer(template) {
        // Nothing is built before the finalizer is there to clean it up; the patch changes the
        // object, which brings it back here.
        return patch_finalizers(ctx, template, true).await.map(|()| None);
    }
    let provider = &ctx.provider;
    let inventory = match provider.templates().await {
        Ok(inventory) => inventory,
        Err(e) => return Err(cloud(e)),
    };
    let storages = provider.storages().await;
    let plan = match template_build::plan(template, &regions(provider), &storages, &inventory) {
        Ok(plan) => plan,
        Err(invalid) => {
            let next = template_build::status(template, Pass::Invalid(&invalid), ctx.clock.now());
            nodeclass_status::write(&ctx.client, template, template.status.as_ref(), &next).await?;
            return Ok(None);
        }
    };
    if plan.is_settled() {
        let outcome = Outcome::unapplied(&plan);
        let pass = Pass::Done {
            plan: &plan,
            outcome: &outcome,
        };
        let next = template_build::status(template, pass, ctx.clock.now());
        nodeclass_status::write(&ctx.client, template, template.status.as_ref(), &next).await?;
        return Ok(Some(MANAGED_REQUEUE));
    }
    // Builds take minutes: say so before starting them.
    let pending = Outcome::unapplied(&plan);
    let building = template_build::status(
        template,
        Pass::Done {
            plan: &plan,
            outcome: &pending,
        },
        ctx.clock.now(),
    );
    nodeclass_status::write(&ctx.client, template, template.status.as_ref(), &building).await?;
    let outcome = template_build::apply(provider.clusters(), &plan, &ApplyOptions::default()).await;
    let _ = provider.refresh(true).await;
    let next = template_build::status(
        template,
        Pass::Done {
            plan: &plan,
            outcome: &outcome,
        },
        ctx.clock.now(),
    );
    // The status written before the builds moved the resourceVersion on; write over it.
    let mut written = template.clone();
    written.status = Some(building.clone());
    written.metadata.resource_version = None;
    nodeclass_status::write(&ctx.client, &written, Some(&building), &next).await?;
    let failed: Vec<String> = outcome
        .failures()
        .map(|(z, f)| format!("{}/{}: {f}", z.region, z.zone))
        .chain(
            outcome
                .failed_removals()
                .map(|r| format!("{:?}: {}", r.target, r.result.as_ref().unwrap_err())),
        )
        .collect();
    if failed.is_empty() {
        Ok(Some(MANAGED_REQUEUE))
    } else {
        Err(cloud(failed.join("; ")))
    }
}

/// Builds every ProxmoxTemplate's template VMs, keeps its status current and deletes what it
/// built when it goes, while this replica leads.
pub async fn run_managed(ctx: Arc<Context<ProxmoxCloudProvider>>, shutdown: CancellationToken) {
    nodeclass_status::run(
        ctx,
        shutdown,
        "proxmoxtemplate.status",
        Arc::new(Index::<ProxmoxTemplate>::default()),
        |ctx, template| async move { reconcile_managed(&ctx, &template).await },
    )
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(finalizers: &[&str]) -> ProxmoxTemplate {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.proxmox.sinextra.dev/v1alpha1",
            "kind": "ProxmoxTemplate",
            "metadata": {"name": "k3s", "resourceVersion": "7", "finalizers": finalizers},
            "spec": {"sourceImage": {"url": "https://example.com/noble.img"}},
        }))
        .unwrap()
    }

    #[test]
    fn finalizer_patches_keep_the_others_and_the_version() {
        let other = "example.com/other";
        let cases = [
            (vec![other], true, json!([other, TERMINATION_FINALIZER])),
            (
                vec![TERMINATION_FINALIZER, other],
                true,
                json!([other, TERMINATION_FINALIZER]),
            ),
            (vec![TERMINATION_FINALIZER, other], false, json!([other])),
            (vec![], false, json!([])),
        ];
        for (have, keep, want) in cases {
            let t = template(&have);
            let patch = finalizers_patch(&t, keep);
            assert_eq!(
                patch["metadata"]["finalizers"], want,
                "{have:?} keep={keep}"
            );
            assert_eq!(patch["metadata"]["resourceVersion"], "7");
            assert_eq!(has_finalizer(&t), have.contains(&TERMINATION_FINALIZER));
        }
    }
}
