//! What applying a plan did, zone by zone: pure data, so a status can be computed from it (or
//! from a plan not applied yet) without the `cloud` feature.

use std::fmt;

use crate::pve::PveError;
use crate::templates::TemplateVm;

use super::plan::{ImageVolume, Plan, ZoneAction};

/// The step of a build that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Getting the region's client.
    Cluster,
    /// Downloading the image (or looking whether it is there).
    Download,
    /// Picking a free VM id.
    AllocateId,
    /// Creating the VM.
    Create,
    /// Making it a template.
    Convert,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Step::Cluster => "reaching the cluster",
            Step::Download => "downloading the image",
            Step::AllocateId => "picking a VM id",
            Step::Create => "creating the VM",
            Step::Convert => "making the VM a template",
        })
    }
}

/// Why a zone's template was not built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildFailure {
    /// Where it stopped.
    pub step: Step,
    /// The VM id it had, once it had one.
    pub vmid: Option<u32>,
    /// What went wrong.
    pub error: PveError,
    /// Deleting the half-made VM failed too: it may still be there.
    pub cleanup: Option<PveError>,
}

impl fmt::Display for BuildFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.vmid {
            Some(vmid) => write!(f, "{} {vmid}: {}", self.step, self.error)?,
            None => write!(f, "{}: {}", self.step, self.error)?,
        }
        if let Some(cleanup) = &self.cleanup {
            write!(f, " (and deleting the VM again failed: {cleanup})")?;
        }
        Ok(())
    }
}

/// A zone's current template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ready {
    /// The template VM.
    pub template: TemplateVm,
    /// Made in this pass.
    pub built: bool,
    /// The image was downloaded in this pass.
    pub downloaded: bool,
}

/// Where a zone stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ZoneState {
    /// A current template is there.
    Ready(Ready),
    /// To be built; nothing was tried yet.
    Pending,
    /// Building failed.
    Failed(BuildFailure),
}

/// One zone's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZoneOutcome {
    /// The Proxmox cluster.
    pub region: String,
    /// The Proxmox node.
    pub zone: String,
    /// Where it stands.
    pub state: ZoneState,
}

/// Something a pass deletes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A template VM.
    Template(TemplateVm),
    /// A downloaded image.
    Image(ImageVolume),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Template(t) => write!(f, "template VM {}", t.zone_entry()),
            Target::Image(i) => write!(f, "image {} on {}/{}", i.volid, i.region, i.zone),
        }
    }
}

/// Whether deleting a target worked (one already gone counts as deleted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemovalResult {
    /// What was deleted.
    pub target: Target,
    /// How it went.
    pub result: Result<(), PveError>,
}

/// What applying a plan did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Each planned zone, in the plan's order.
    pub zones: Vec<ZoneOutcome>,
    /// The replaced and retired templates and the stale images, as deleted.
    pub removals: Vec<RemovalResult>,
}

impl Outcome {
    /// The plan as it stands before it is applied: kept zones ready, the others pending.
    pub fn unapplied(plan: &Plan) -> Outcome {
        Outcome {
            zones: plan
                .zones
                .iter()
                .map(|z| ZoneOutcome {
                    region: z.region.clone(),
                    zone: z.zone.clone(),
                    state: match &z.action {
                        ZoneAction::Keep(t) => ZoneState::Ready(Ready {
                            template: t.clone(),
                            built: false,
                            downloaded: false,
                        }),
                        ZoneAction::Build { .. } => ZoneState::Pending,
                    },
                })
                .collect(),
            removals: Vec::new(),
        }
    }

    /// The current template VMs, by zone.
    pub fn ready(&self) -> impl Iterator<Item = &TemplateVm> {
        self.zones.iter().filter_map(|z| match &z.state {
            ZoneState::Ready(r) => Some(&r.template),
            _ => None,
        })
    }

    /// The status's `region/zone/vmid` entries.
    pub fn zone_entries(&self) -> Vec<String> {
        self.ready().map(TemplateVm::zone_entry).collect()
    }

    /// The zones whose build failed.
    pub fn failures(&self) -> impl Iterator<Item = (&ZoneOutcome, &BuildFailure)> {
        self.zones.iter().filter_map(|z| match &z.state {
            ZoneState::Failed(f) => Some((z, f)),
            _ => None,
        })
    }

    /// The deletions that failed.
    pub fn failed_removals(&self) -> impl Iterator<Item = &RemovalResult> {
        self.removals.iter().filter(|r| r.result.is_err())
    }
}
