//! What a pass does for a `ProxmoxTemplate`, decided from what the clusters have (their
//! storages and template VMs) without calling them.

use std::collections::{BTreeMap, BTreeSet};

use crate::apis::{CommonTemplate, FieldError, ProxmoxTemplate, ProxmoxTemplateSpec, SelectedZone};
use crate::pve::types::{ClusterResource, Storage};
use crate::templates::TemplateVm;

/// The storage content a template's image is downloaded as.
pub const CONTENT_IMPORT: &str = "import";
/// The storage content VM disks (the template's) are.
pub const CONTENT_IMAGES: &str = "images";

/// The kinds of content upstream's storage inventory keeps a storage for.
const INVENTORIED_CONTENT: [&str; 3] = [CONTENT_IMAGES, "iso", CONTENT_IMPORT];

/// A storage of a Proxmox cluster, as planning needs it. Several entries for the same region and
/// storage (one per node, as `/nodes/{node}/storage` gives them) are merged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StorageInfo {
    /// The Proxmox cluster.
    pub region: String,
    /// The storage's id (`local`, `ceph-vm`).
    pub storage: String,
    /// The nodes it is usable on.
    pub nodes: Vec<String>,
    /// Every node sees the same storage (NFS, Ceph, …).
    pub shared: bool,
    /// What it holds: `images`, `import`, `iso`, …
    pub content: Vec<String>,
    /// Usable at all; an inactive entry is ignored.
    pub active: bool,
}

impl StorageInfo {
    /// Whether it holds `content`.
    pub fn holds(&self, content: &str) -> bool {
        self.content.iter().any(|c| c == content)
    }

    /// The storages of `region` from its `/cluster/resources?type=storage` entries, one per
    /// storage with the nodes it is available on, sorted by id. As upstream's inventory, only
    /// entries whose status is `available` and that hold images, ISOs or imports count.
    pub fn from_resources(region: &str, resources: &[ClusterResource]) -> Vec<StorageInfo> {
        let mut by_id: BTreeMap<&str, StorageInfo> = BTreeMap::new();
        for r in resources {
            let content = r.content_list();
            if r.kind != "storage"
                || r.status != "available"
                || r.node.is_empty()
                || !content.iter().any(|c| INVENTORIED_CONTENT.contains(c))
            {
                continue;
            }
            let entry = by_id.entry(&r.storage).or_insert_with(|| StorageInfo {
                region: region.to_string(),
                storage: r.storage.clone(),
                nodes: Vec::new(),
                shared: false,
                content: Vec::new(),
                active: true,
            });
            entry.shared |= r.shared;
            if !entry.nodes.contains(&r.node) {
                entry.nodes.push(r.node.clone());
            }
            for c in content {
                if !entry.holds(c) {
                    entry.content.push(c.to_string());
                }
            }
        }
        by_id
            .into_values()
            .map(|mut s| {
                s.nodes.sort();
                s
            })
            .collect()
    }

    /// One node's storage, from `/nodes/{node}/storage`: active when it is both enabled and
    /// active there.
    pub fn from_node_storage(region: &str, node: &str, storage: &Storage) -> StorageInfo {
        StorageInfo {
            region: region.to_string(),
            storage: storage.storage.clone(),
            nodes: vec![node.to_string()],
            shared: storage.shared,
            content: storage
                .content_list()
                .into_iter()
                .map(str::to_string)
                .collect(),
            active: storage.active && storage.enabled,
        }
    }
}

/// A storage of a region with its entries merged.
struct Merged<'a> {
    id: &'a str,
    nodes: BTreeSet<&'a str>,
    shared: bool,
    content: BTreeSet<&'a str>,
}

impl Merged<'_> {
    fn usable_for(&self, content: &str) -> bool {
        self.content.contains(content) && !self.nodes.is_empty()
    }

    /// The nodes to act on: all of them, or the first for a shared storage (its content is the
    /// same from every node).
    fn distinct_nodes(&self) -> Vec<&str> {
        let all = self.nodes.iter().copied();
        if self.shared {
            all.take(1).collect()
        } else {
            all.collect()
        }
    }
}

fn merged<'a>(storages: &'a [StorageInfo], region: &str, id: &'a str) -> Option<Merged<'a>> {
    let mut found: Option<Merged<'a>> = None;
    for s in storages
        .iter()
        .filter(|s| s.active && s.region == region && s.storage == id)
    {
        let m = found.get_or_insert_with(|| Merged {
            id,
            nodes: BTreeSet::new(),
            shared: false,
            content: BTreeSet::new(),
        });
        m.nodes.extend(s.nodes.iter().map(String::as_str));
        m.shared |= s.shared;
        m.content.extend(s.content.iter().map(String::as_str));
    }
    found
}

/// A downloaded image on a storage: the volume `<storage>:import/<image id>`, seen from `zone`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ImageVolume {
    /// The Proxmox cluster.
    pub region: String,
    /// The node it is reached through.
    pub zone: String,
    /// The storage holding it.
    pub storage: String,
    /// `<storage>:import/<image id>`.
    pub volid: String,
}

impl ImageVolume {
    /// The image `image_id` on `storage`, reached through `zone` of `region`.
    pub fn new(region: &str, zone: &str, storage: &str, image_id: &str) -> Self {
        Self {
            region: region.to_string(),
            zone: zone.to_string(),
            storage: storage.to_string(),
            volid: format!("{storage}:{CONTENT_IMPORT}/{image_id}"),
        }
    }
}

/// What to do in one zone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ZoneAction {
    /// A current template VM is there: nothing to do.
    Keep(TemplateVm),
    /// Download the image if it is not there yet, create the VM, make it a template; then
    /// delete these older templates of the same object in the zone.
    Build {
        /// The templates the new one replaces.
        replaces: Vec<TemplateVm>,
    },
}

/// One zone (Proxmox node) the template is to be on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZonePlan {
    /// The Proxmox cluster.
    pub region: String,
    /// The Proxmox node.
    pub zone: String,
    /// The storage the image is downloaded to (content `import`).
    pub image_storage: String,
    /// The storage the template's disks go to (content `images`).
    pub template_storage: String,
    /// What to do there.
    pub action: ZoneAction,
}

/// A region the template cannot be built in, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unserved {
    /// The Proxmox cluster.
    pub region: String,
    /// Why, to follow the region's name.
    pub reason: String,
}

/// What a pass does for one `ProxmoxTemplate`.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The template VMs' name: the object's.
    pub name: String,
    /// The spec the VMs are made from.
    pub spec: ProxmoxTemplateSpec,
    /// The image's file name ([`ProxmoxTemplateSpec::image_id`]).
    pub image_id: String,
    /// The spec's hash, written into the VMs' descriptions.
    pub hash: String,
    /// The image the status recorded, when it was another one.
    pub previous_image_id: Option<String>,
    /// The zones to keep or build, by region then zone.
    pub zones: Vec<ZonePlan>,
    /// The regions that cannot be served.
    pub unserved: Vec<Unserved>,
    /// Outdated templates of the object outside the zones being built, to delete.
    pub retire: Vec<TemplateVm>,
    /// The previous image's volumes, to delete once the new image is used.
    pub stale_images: Vec<ImageVolume>,
}

impl Plan {
    /// Nothing to build or delete: every zone keeps its current template.
    pub fn is_settled(&self) -> bool {
        self.zones
            .iter()
            .all(|z| matches!(z.action, ZoneAction::Keep(_)))
            && self.retire.is_empty()
            && self.stale_images.is_empty()
    }
}

/// Whether `vm` is a template VM the provider made for the `ProxmoxTemplate` named `name`: its
/// name, and a hash its description records (upstream's `Hash: N`). A template of that name the
/// user made by hand has no such hash and is never touched.
pub fn is_managed_by(vm: &TemplateVm, name: &str) -> bool {
    vm.name == name && !vm.hash.is_empty() && vm.hash.bytes().all(|b| b.is_ascii_digit())
}

fn object_name(template: &ProxmoxTemplate) -> Result<&str, FieldError> {
    template
        .metadata
        .name
        .as_deref()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| FieldError {
            field: "metadata.name".into(),
            reason: "is required: it names the template VMs".into(),
        })
}

/// The regions the spec wants among `configured`, and an [`Unserved`] for a region it names
/// that is not configured.
fn wanted_regions(
    spec: &ProxmoxTemplateSpec,
    configured: &[String],
) -> (Vec<String>, Vec<Unserved>) {
    match spec.region.as_deref().filter(|r| !r.is_empty()) {
        Some(r) if configured.iter().any(|c| c == r) => (vec![r.to_string()], Vec::new()),
        Some(r) => (
            Vec::new(),
            vec![Unserved {
                region: r.to_string(),
                reason: "is not in the clusters config".into(),
            }],
        ),
        None => {
            let all: BTreeSet<&String> = configured.iter().collect();
            (all.into_iter().cloned().collect(), Vec::new())
        }
    }
}

/// The first of the spec's storages that holds `content` on some node of `region`, in the
/// spec's order (upstream's "best first").
fn first_storage<'a>(
    spec: &'a ProxmoxTemplateSpec,
    storages: &'a [StorageInfo],
    region: &str,
    content: &str,
) -> Option<Merged<'a>> {
    spec.storage_ids
        .iter()
        .filter_map(|id| merged(storages, region, id))
        .find(|m| m.usable_for(content))
}

/// The zone a shared template storage's single template goes to: where a current template
/// already is, else where one of the object's is, else the first; so a template is not built
/// again elsewhere because the list of nodes changed.
fn shared_zone<'a>(zones: &[&'a str], ours: &[&TemplateVm], hash: &str) -> &'a str {
    let has = |z: &&str, current: bool| {
        ours.iter()
            .any(|t| t.zone == *z && (!current || t.hash == hash))
    };
    zones
        .iter()
        .find(|z| has(z, true))
        .or_else(|| zones.iter().find(|z| has(z, false)))
        .copied()
        .unwrap_or(zones[0])
}

/// Decides a pass for `template` in the `regions` of the clusters config, from their
/// `storages` and template VMs (`inventory`, every region's).
///
/// In each region the spec wants (its `region`, else every configured one), the image goes to
/// the first storage of `storageIDs` holding `import` content and the template to the first
/// holding `images`, as upstream picks them; the template is built on every node having both,
/// or on one node when the `images` storage is shared. A node with a current template of this
/// object keeps it; any other gets one built, replacing the object's older templates there once
/// made. The object's outdated templates on other nodes of the region are retired. When the
/// status records another image than the spec's, its volumes on the spec's `import` storages
/// are deleted.
///
/// Only an object without a name or a spec without a usable image name cannot be planned.
pub fn plan(
    template: &ProxmoxTemplate,
    regions: &[String],
    storages: &[StorageInfo],
    inventory: &[TemplateVm],
) -> Result<Plan, FieldError> {
    let name = object_name(template)?;
    let spec = &template.spec;
    let image_id = spec.image_id()?;
    let hash = spec.hash();
    let previous_image_id = template
        .status
        .as_ref()
        .and_then(|s| s.image_id.clone())
        .filter(|id| !id.is_empty() && *id != image_id);
    let (regions, mut unserved) = wanted_regions(spec, regions);
    let mut out = Plan {
        name: name.to_string(),
        spec: spec.clone(),
        image_id,
        hash,
        previous_image_id,
        zones: Vec::new(),
        unserved: Vec::new(),
        retire: Vec::new(),
        stale_images: Vec::new(),
    };
    for region in &regions {
        if let Some(previous) = &out.previous_image_id {
            out.stale_images
                .extend(image_volumes(spec, storages, region, previous));
        }
        let image = first_storage(spec, storages, region, CONTENT_IMPORT);
        let disks = first_storage(spec, storages, region, CONTENT_IMAGES);
        let (image, disks) = match (image, disks) {
            (Some(i), Some(d)) => (i, d),
            (i, d) => {
                let missing: Vec<&str> =
                    [(i.is_none(), CONTENT_IMPORT), (d.is_none(), CONTENT_IMAGES)]
                        .into_iter()
                        .filter_map(|(m, c)| m.then_some(c))
                        .collect();
                unserved.push(Unserved {
                    region: region.clone(),
                    reason: format!(
                        "none of the storages [{}] holds {} content on an active node",
                        spec.storage_ids.join(", "),
                        missing.join(" or ")
                    ),
                });
                continue;
            }
        };
        let mut zones: Vec<&str> = image.nodes.intersection(&disks.nodes).copied().collect();
        if zones.is_empty() {
            unserved.push(Unserved {
                region: region.clone(),
                reason: format!(
                    "no node has both storage {} (import) and storage {} (images)",
                    image.id, disks.id
                ),
            });
            continue;
        }
        let ours: Vec<&TemplateVm> = inventory
            .iter()
            .filter(|t| t.region == *region && is_managed_by(t, name))
            .collect();
        if disks.shared {
            zones = vec![shared_zone(&zones, &ours, &out.hash)];
        }
        for zone in &zones {
            let here = || ours.iter().filter(|t| t.zone == *zone).copied();
            let current = here().filter(|t| t.hash == out.hash).min_by_key(|t| t.vmid);
            let outdated: Vec<TemplateVm> =
                here().filter(|t| t.hash != out.hash).cloned().collect();
            let action = match current {
                Some(t) => {
                    out.retire.extend(outdated);
                    ZoneAction::Keep(t.clone())
                }
                None => ZoneAction::Build { replaces: outdated },
            };
            out.zones.push(ZonePlan {
                region: region.clone(),
                zone: zone.to_string(),
                image_storage: image.id.to_string(),
                template_storage: disks.id.to_string(),
                action,
            });
        }
        out.retire.extend(
            ours.iter()
                .filter(|t| t.hash != out.hash && !zones.contains(&t.zone.as_str()))
                .map(|t| (*t).clone()),
        );
    }
    out.unserved = unserved;
    Ok(out)
}

/// `image_id`'s volumes on every `import` storage of the spec in `region`: one per node, or one
/// for a shared storage.
fn image_volumes(
    spec: &ProxmoxTemplateSpec,
    storages: &[StorageInfo],
    region: &str,
    image_id: &str,
) -> Vec<ImageVolume> {
    let mut seen = BTreeSet::new();
    spec.storage_ids
        .iter()
        .filter(|id| seen.insert(id.as_str()))
        .filter_map(|id| merged(storages, region, id))
        .filter(|m| m.usable_for(CONTENT_IMPORT))
        .flat_map(|m| {
            m.distinct_nodes()
                .into_iter()
                .map(|node| ImageVolume::new(region, node, m.id, image_id))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Everything of a `ProxmoxTemplate` to delete before its finalizer goes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Removal {
    /// Its template VMs.
    pub templates: Vec<TemplateVm>,
    /// Its downloaded images.
    pub images: Vec<ImageVolume>,
}

impl Removal {
    /// Nothing to delete.
    pub fn is_empty(&self) -> bool {
        self.templates.is_empty() && self.images.is_empty()
    }
}

/// What deleting `template` removes, from the clusters' `storages` and template VMs: every
/// template VM of the object in the regions it is built in (by name and described hash, or
/// listed in its status under its name, as upstream deletes its status's zones), then the
/// images it downloaded — the status's and the spec's — from the spec's `import` storages.
pub fn removal(
    template: &ProxmoxTemplate,
    regions: &[String],
    storages: &[StorageInfo],
    inventory: &[TemplateVm],
) -> Removal {
    let Some(name) = template.metadata.name.as_deref().filter(|n| !n.is_empty()) else {
        return Removal::default();
    };
    let listed: BTreeSet<SelectedZone> = template.selected_zones().into_iter().collect();
    let (mut wanted, _) = wanted_regions(&template.spec, regions);
    wanted.extend(listed.iter().map(|z| z.region.clone()));
    let wanted: BTreeSet<String> = wanted.into_iter().collect();
    let templates = inventory
        .iter()
        .filter(|t| wanted.contains(&t.region) && t.name == name)
        .filter(|t| {
            is_managed_by(t, name)
                || listed.contains(&SelectedZone {
                    region: t.region.clone(),
                    zone: t.zone.clone(),
                    template_id: u64::from(t.vmid),
                })
        })
        .cloned()
        .collect();
    let mut image_ids: Vec<String> = template
        .status
        .as_ref()
        .and_then(|s| s.image_id.clone())
        .into_iter()
        .chain(template.spec.image_id().ok())
        .filter(|id| !id.is_empty())
        .collect();
    image_ids.dedup();
    let images = wanted
        .iter()
        .flat_map(|region| {
            image_ids
                .iter()
                .flat_map(|id| image_volumes(&template.spec, storages, region, id))
        })
        .collect();
    Removal { templates, images }
}
