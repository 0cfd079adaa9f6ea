//! Applying a plan and removing an object's templates: the Proxmox calls, in upstream's order,
//! each task waited for.

use std::time::Duration;

use crate::apis::SourceImage;
use crate::pve::client::DEFAULT_TASK_POLL;
use crate::pve::types::{DeleteOptions, DownloadUrlOptions};
use crate::pve::{PveClient, PveError, PvePool};
use crate::templates::TemplateVm;

use super::options::{VmOptions, template_tags};
use super::outcome::{
    BuildFailure, Outcome, Ready, RemovalResult, Step, Target, ZoneOutcome, ZoneState,
};
use super::plan::{CONTENT_IMPORT, ImageVolume, Plan, Removal, ZoneAction, ZonePlan};

/// The lowest VM id a template gets (upstream's).
pub const FIRST_TEMPLATE_VMID: u32 = 1000;

/// How long the calls may take, and where VM ids start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApplyOptions {
    /// Template VM ids are the first free ones from here.
    pub first_vmid: u32,
    /// How long an image download may take. Longer than upstream's five minutes: cloud images
    /// are hundreds of MiB, and a download given up on still runs in PVE while the next pass,
    /// not finding the file yet, would start another.
    pub download_timeout: Duration,
    /// How long creating the VM (importing the image) may take (upstream's).
    pub create_timeout: Duration,
    /// How long making it a template may take (upstream's).
    pub convert_timeout: Duration,
    /// How long deleting a VM or an image may take.
    pub delete_timeout: Duration,
    /// How often a task's status is asked.
    pub poll: Duration,
}

impl Default for ApplyOptions {
    fn default() -> Self {
        Self {
            first_vmid: FIRST_TEMPLATE_VMID,
            download_timeout: Duration::from_secs(15 * 60),
            create_timeout: Duration::from_secs(5 * 60),
            convert_timeout: Duration::from_secs(60),
            delete_timeout: Duration::from_secs(5 * 60),
            poll: DEFAULT_TASK_POLL,
        }
    }
}

/// Applies `plan` with the regions' clients of `pool`: zone by zone (so an image on a shared
/// storage is downloaded once), keeps what is current and builds the rest — the image
/// downloaded when the storage lacks it (`download-url`, content `import`), a free id from
/// [`ApplyOptions::first_vmid`], the VM created with [`VmOptions`] and made a template, each
/// task waited for. A VM whose create task started but that could not be made a template is
/// deleted again. Once a zone's template is made, the ones it replaces are deleted; then the
/// plan's retired templates and stale images. A failure stops only its zone (or deletion); every
/// result is in the [`Outcome`].
pub async fn apply(pool: &PvePool, plan: &Plan, options: &ApplyOptions) -> Outcome {
    let mut outcome = Outcome::default();
    for zone in &plan.zones {
        let state = match &zone.action {
            ZoneAction::Keep(t) => ZoneState::Ready(Ready {
                template: t.clone(),
                built: false,
                downloaded: false,
            }),
            ZoneAction::Build { replaces } => match pool.get(&zone.region) {
                Err(error) => ZoneState::Failed(BuildFailure {
                    step: Step::Cluster,
                    vmid: None,
                    error,
                    cleanup: None,
                }),
                Ok(client) => {
                    let state = build(client, plan, zone, options).await;
                    if matches!(state, ZoneState::Ready(_)) {
                        for old in replaces {
                            outcome
                                .removals
                                .push(remove_template(client, old, options).await);
                        }
                    }
                    state
                }
            },
        };
        outcome.zones.push(ZoneOutcome {
            region: zone.region.clone(),
            zone: zone.zone.clone(),
            state,
        });
    }
    let removal = Removal {
        templates: plan.retire.clone(),
        images: plan.stale_images.clone(),
    };
    outcome
        .removals
        .extend(remove(pool, &removal, options).await);
    outcome
}

/// Builds the template of one zone.
async fn build(
    client: &PveClient,
    plan: &Plan,
    zone: &ZonePlan,
    options: &ApplyOptions,
) -> ZoneState {
    let failed = |step, vmid, error| {
        ZoneState::Failed(BuildFailure {
            step,
            vmid,
            error,
            cleanup: None,
        })
    };
    let image = ImageVolume::new(
        &zone.region,
        &zone.zone,
        &zone.image_storage,
        &plan.image_id,
    );
    let downloaded = match ensure_image(
        client,
        &image,
        &plan.image_id,
        &plan.spec.source_image,
        options,
    )
    .await
    {
        Ok(d) => d,
        Err(e) => return failed(Step::Download, None, e),
    };
    let vmid = match client.next_id_from(options.first_vmid).await {
        Ok(id) => id,
        Err(e) => return failed(Step::AllocateId, None, e),
    };
    let params = VmOptions {
        name: &plan.name,
        spec: &plan.spec,
        hash: &plan.hash,
        image_id: &plan.image_id,
        vmid,
        image_storage: &zone.image_storage,
        template_storage: &zone.template_storage,
    }
    .params();
    // Refused before its task started (the id taken meanwhile, a bad parameter): no VM was made,
    // and the id may be someone else's, so there is nothing to delete.
    let upid = match client.create_vm(&zone.zone, params).await {
        Ok(upid) => upid,
        Err(e) => return failed(Step::Create, Some(vmid), e),
    };
    let made = async {
        client
            .wait_task(&upid, options.create_timeout, options.poll)
            .await
            .map_err(|e| (Step::Create, e))?;
        let task = client
            .convert_to_template(&zone.zone, vmid)
            .await
            .map_err(|e| (Step::Convert, e))?;
        client
            .wait_optional_task(task.as_ref(), options.convert_timeout, options.poll)
            .await
            .map_err(|e| (Step::Convert, e))?;
        Ok::<(), (Step, PveError)>(())
    }
    .await;
    if let Err((step, error)) = made {
        let cleanup = delete_vm(client, &zone.zone, vmid, options).await.err();
        return ZoneState::Failed(BuildFailure {
            step,
            vmid: Some(vmid),
            error,
            cleanup,
        });
    }
    ZoneState::Ready(Ready {
        template: TemplateVm {
            region: zone.region.clone(),
            zone: zone.zone.clone(),
            vmid,
            name: plan.name.clone(),
            tags: template_tags(&plan.spec),
            hash: plan.hash.clone(),
            storage: Some(zone.template_storage.clone()),
        },
        built: true,
        downloaded,
    })
}

/// Whether the image's volume is on its storage, as seen from its zone.
async fn has_image(client: &PveClient, image: &ImageVolume) -> Result<bool, PveError> {
    Ok(client
        .storage_content(&image.zone, &image.storage, Some(CONTENT_IMPORT))
        .await?
        .iter()
        .any(|v| v.volid == image.volid))
}

/// Downloads the image unless it is there; whether it was downloaded.
async fn ensure_image(
    client: &PveClient,
    image: &ImageVolume,
    image_id: &str,
    source: &SourceImage,
    options: &ApplyOptions,
) -> Result<bool, PveError> {
    if has_image(client, image).await? {
        return Ok(false);
    }
    let upid = client
        .download_url(
            &image.zone,
            &image.storage,
            &DownloadUrlOptions {
                content: CONTENT_IMPORT.into(),
                filename: image_id.into(),
                url: source.url.clone(),
                checksum: source.checksum.clone().unwrap_or_default(),
                checksum_algorithm: source.checksum_type.clone().unwrap_or_default(),
                ..DownloadUrlOptions::default()
            },
        )
        .await?;
    client
        .wait_task(&upid, options.download_timeout, options.poll)
        .await?;
    Ok(true)
}

/// Deletes a VM with what refers to it (pool, backup jobs) and its disks; one already gone is
/// deleted. Its id is not handed out again for a while (as upstream), as PVE may still be
/// cleaning up.
async fn delete_vm(
    client: &PveClient,
    zone: &str,
    vmid: u32,
    options: &ApplyOptions,
) -> Result<(), PveError> {
    let delete = DeleteOptions {
        purge: true,
        destroy_unreferenced_disks: true,
        skiplock: false,
    };
    let result = match client.delete_vm(zone, vmid, delete).await {
        Ok(upid) => client
            .wait_task(&upid, options.delete_timeout, options.poll)
            .await
            .map(|_| ()),
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => Err(e),
    };
    client.mark_id_used(vmid);
    result
}

async fn remove_template(
    client: &PveClient,
    t: &TemplateVm,
    options: &ApplyOptions,
) -> RemovalResult {
    RemovalResult {
        target: Target::Template(t.clone()),
        result: delete_vm(client, &t.zone, t.vmid, options).await,
    }
}

/// Deletes the image when it is there (a storage gone is as good).
async fn delete_image(
    client: &PveClient,
    image: &ImageVolume,
    options: &ApplyOptions,
) -> Result<(), PveError> {
    match has_image(client, image).await {
        Ok(true) => {}
        Ok(false) => return Ok(()),
        Err(e) if e.is_not_found() => return Ok(()),
        Err(e) => return Err(e),
    }
    match client
        .delete_volume(&image.zone, &image.storage, &image.volid)
        .await
    {
        Ok(task) => client
            .wait_optional_task(task.as_ref(), options.delete_timeout, options.poll)
            .await
            .map(|_| ()),
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => Err(e),
    }
}

/// Deletes what `removal` lists with the regions' clients of `pool`: the template VMs first,
/// then the images, as upstream's finalizer. Every target is tried; the finalizer may go when
/// all results are `Ok`.
pub async fn remove(
    pool: &PvePool,
    removal: &Removal,
    options: &ApplyOptions,
) -> Vec<RemovalResult> {
    let mut results = Vec::new();
    for t in &removal.templates {
        let result = match pool.get(&t.region) {
            Ok(client) => delete_vm(client, &t.zone, t.vmid, options).await,
            Err(e) => Err(e),
        };
        results.push(RemovalResult {
            target: Target::Template(t.clone()),
            result,
        });
    }
    for image in &removal.images {
        let result = match pool.get(&image.region) {
            Ok(client) => delete_image(client, image, options).await,
            Err(e) => Err(e),
        };
        results.push(RemovalResult {
            target: Target::Image(image.clone()),
            result,
        });
    }
    results
}
