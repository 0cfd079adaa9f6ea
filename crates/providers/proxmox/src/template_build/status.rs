//! The statuses of both kinds of template: the zones their template VMs are ready in, how many,
//! the image, and the conditions with `Ready` over them, stamped with the generation.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::jiff::Timestamp;
use karpenter_cloudprovider::conditions::ConditionSet;

use crate::apis::{
    CONDITION_TEMPLATE_IMAGE_READY, CONDITION_TEMPLATE_READY, FieldError, ProxmoxTemplate,
    ProxmoxTemplateStatus, ProxmoxUnmanagedTemplate, RESOURCE_ZONES, TEMPLATE_READY_CONDITIONS,
};
use crate::templates::TemplateVm;

use super::outcome::{Outcome, Step, Target, ZoneState};
use super::plan::Plan;

/// Both conditions' reason when the spec cannot be built from (no usable image name).
pub const REASON_INVALID_SPEC: &str = "InvalidSpec";
/// The reason when no region has the storages the template needs.
pub const REASON_STORAGE_NOT_FOUND: &str = "StorageNotFound";
/// `ProxmoxVirtualMachineTemplateImageReady`'s reason when a download failed.
pub const REASON_IMAGE_DOWNLOAD_FAILED: &str = "ImageDownloadFailed";
/// `ProxmoxVirtualMachineTemplateImageReady`'s reason before anything was downloaded.
pub const REASON_IMAGE_NOT_DOWNLOADED: &str = "ImageNotDownloaded";
/// `ProxmoxVirtualMachineTemplateReady`'s reason when no template could be built.
pub const REASON_TEMPLATE_BUILD_FAILED: &str = "TemplateBuildFailed";
/// `ProxmoxVirtualMachineTemplateReady`'s reason while templates are still to be built.
pub const REASON_TEMPLATE_NOT_BUILT: &str = "TemplateNotBuilt";
/// An unmanaged template's reason when its spec is invalid (upstream's).
pub const REASON_TEMPLATE_VALIDATION: &str = "TemplateValidation";
/// An unmanaged template's reason when no template VM matches (upstream's).
pub const REASON_TEMPLATES_NOT_FOUND: &str = "TemplatesNotFound";
/// An unmanaged template's message when no template VM matches.
pub const MESSAGE_TEMPLATES_NOT_FOUND: &str =
    "no template VM in the clusters has the name, region and tags the spec asks for";

/// What a pass over a `ProxmoxTemplate` got to.
#[derive(Clone, Copy, Debug)]
pub enum Pass<'a> {
    /// The clusters could not be read: the status stays as it was.
    Unread,
    /// The object cannot be planned ([`super::plan`]'s error).
    Invalid(&'a FieldError),
    /// Planned, and applied (or [`Outcome::unapplied`]).
    Done {
        /// The plan.
        plan: &'a Plan,
        /// What applying it did.
        outcome: &'a Outcome,
    },
}

fn created(
    metadata: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    now: Timestamp,
) -> Timestamp {
    metadata.creation_timestamp.as_ref().map_or(now, |t| t.0)
}

fn zones_resource(count: usize) -> BTreeMap<String, Quantity> {
    BTreeMap::from([(RESOURCE_ZONES.to_string(), Quantity(count.to_string()))])
}

/// `region: reason; …` of the regions that cannot be served, or that there is no region.
fn unserved_message(plan: &Plan) -> String {
    if plan.unserved.is_empty() {
        return "no Proxmox cluster to build the template in".to_string();
    }
    plan.unserved
        .iter()
        .map(|u| format!("region {} {}", u.region, u.reason))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The status of `template` after `pass`, at `now`.
///
/// * `zones`: the `region/zone/vmid` of every current template VM, in the plan's order, and
///   `resources.zones` their count;
/// * `imageID`: the spec's image once a template is ready, unless deleting the previous image
///   failed (it is kept so the next pass deletes it again);
/// * `ProxmoxVirtualMachineTemplateImageReady`: `False` when a download failed or no region
///   has the storages, `Unknown` for a plan not applied yet, else `True`;
/// * `ProxmoxVirtualMachineTemplateReady` (what `Ready` summarises): `True` when a template is
///   ready somewhere (its message names the zones that failed and the regions not served),
///   else `False` naming the failed builds or the missing storages, or `Unknown` while builds
///   are pending.
pub fn status(template: &ProxmoxTemplate, pass: Pass<'_>, now: Timestamp) -> ProxmoxTemplateStatus {
    let mut out = template.status.clone().unwrap_or_default();
    let created = created(&template.metadata, now);
    let generation = template.metadata.generation;
    let (plan, outcome) = match pass {
        Pass::Unread => return out,
        Pass::Invalid(e) => {
            let mut c = ConditionSet::new(
                &mut out.conditions,
                &TEMPLATE_READY_CONDITIONS,
                generation,
                created,
                now,
            );
            let message = e.to_string();
            c.set(
                CONDITION_TEMPLATE_IMAGE_READY,
                "False",
                REASON_INVALID_SPEC,
                &message,
            );
            c.set(
                CONDITION_TEMPLATE_READY,
                "False",
                REASON_INVALID_SPEC,
                &message,
            );
            c.finish();
            return out;
        }
        Pass::Done { plan, outcome } => (plan, outcome),
    };

    let zones = outcome.zone_entries();
    out.resources = zones_resource(zones.len());
    out.zones = zones;
    let stale_kept = outcome
        .failed_removals()
        .any(|r| matches!(r.target, Target::Image(_)));
    if !out.zones.is_empty() && !stale_kept {
        out.image_id = Some(plan.image_id.clone());
    }

    let failures: Vec<String> = outcome
        .failures()
        .map(|(z, f)| format!("{}/{}: {f}", z.region, z.zone))
        .collect();
    let download_failures: Vec<String> = outcome
        .failures()
        .filter(|(_, f)| matches!(f.step, Step::Download | Step::Cluster))
        .map(|(z, f)| format!("{}/{}: {f}", z.region, z.zone))
        .collect();
    let pending: Vec<String> = outcome
        .zones
        .iter()
        .filter(|z| matches!(z.state, ZoneState::Pending))
        .map(|z| format!("{}/{}", z.region, z.zone))
        .collect();

    let mut c = ConditionSet::new(
        &mut out.conditions,
        &TEMPLATE_READY_CONDITIONS,
        generation,
        created,
        now,
    );
    if !download_failures.is_empty() {
        c.set(
            CONDITION_TEMPLATE_IMAGE_READY,
            "False",
            REASON_IMAGE_DOWNLOAD_FAILED,
            &download_failures.join("; "),
        );
    } else if plan.zones.is_empty() {
        c.set(
            CONDITION_TEMPLATE_IMAGE_READY,
            "False",
            REASON_STORAGE_NOT_FOUND,
            &unserved_message(plan),
        );
    } else if !pending.is_empty() {
        c.set(
            CONDITION_TEMPLATE_IMAGE_READY,
            "Unknown",
            REASON_IMAGE_NOT_DOWNLOADED,
            &format!(
                "{} not looked for yet on {}",
                plan.image_id,
                pending.join(", ")
            ),
        );
    } else {
        c.set_true(CONDITION_TEMPLATE_IMAGE_READY);
    }

    if !out.zones.is_empty() {
        let mut problems = failures;
        if !plan.unserved.is_empty() {
            problems.push(unserved_message(plan));
        }
        c.set(
            CONDITION_TEMPLATE_READY,
            "True",
            CONDITION_TEMPLATE_READY,
            &problems.join("; "),
        );
    } else if !failures.is_empty() {
        c.set(
            CONDITION_TEMPLATE_READY,
            "False",
            REASON_TEMPLATE_BUILD_FAILED,
            &failures.join("; "),
        );
    } else if !pending.is_empty() {
        c.set(
            CONDITION_TEMPLATE_READY,
            "Unknown",
            REASON_TEMPLATE_NOT_BUILT,
            &format!("to be built in {}", pending.join(", ")),
        );
    } else {
        c.set(
            CONDITION_TEMPLATE_READY,
            "False",
            REASON_STORAGE_NOT_FOUND,
            &unserved_message(plan),
        );
    }
    c.finish();
    out
}

/// The status of an unmanaged template from the clusters' template VMs (`None` when they could
/// not be listed: the status stays as it was), at `now`, as upstream's: an invalid spec and no
/// match empty the zones and make it not ready; else its zones are every matching template VM
/// (`region/zone/vmid`, in the inventory's order).
pub fn unmanaged_status(
    template: &ProxmoxUnmanagedTemplate,
    inventory: Option<&[TemplateVm]>,
    now: Timestamp,
) -> ProxmoxTemplateStatus {
    let mut out = template.status.clone().unwrap_or_default();
    let Some(inventory) = inventory else {
        return out;
    };
    let mut c = ConditionSet::new(
        &mut out.conditions,
        &TEMPLATE_READY_CONDITIONS,
        template.metadata.generation,
        created(&template.metadata, now),
        now,
    );
    let zones: Vec<String> = match template.spec.validate_for_create() {
        Err(invalid) => {
            c.set(
                CONDITION_TEMPLATE_READY,
                "False",
                REASON_TEMPLATE_VALIDATION,
                &invalid.to_string(),
            );
            Vec::new()
        }
        Ok(()) => {
            let found: Vec<String> = inventory
                .iter()
                .filter(|t| t.matches_unmanaged(&template.spec))
                .map(TemplateVm::zone_entry)
                .collect();
            if found.is_empty() {
                c.set(
                    CONDITION_TEMPLATE_READY,
                    "False",
                    REASON_TEMPLATES_NOT_FOUND,
                    MESSAGE_TEMPLATES_NOT_FOUND,
                );
            } else {
                c.set_true(CONDITION_TEMPLATE_READY);
            }
            found
        }
    };
    c.finish();
    out.resources = zones_resource(zones.len());
    out.zones = zones;
    out
}
