//! The template VMs of each Proxmox cluster, as upstream's instance-template inventory sees them:
//! which node holds which template, what it is (its hash: a node cloned from it drifts when it
//! changes), its tags and the storage of its disks (a clone's default storage).
//!
//! Pure: the provider lists `/cluster/resources` and reads each template's config; this turns
//! what it read into [`TemplateVm`]s and answers which ones a template object or a NodeClass
//! means.

use std::sync::LazyLock;

use regex::Regex;

use crate::apis::{ProxmoxUnmanagedTemplateSpec, go_string_hash};

/// One template VM on one Proxmox node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateVm {
    /// The Proxmox cluster (the config file's region).
    pub region: String,
    /// The Proxmox node holding it.
    pub zone: String,
    /// Its VM id.
    pub vmid: u32,
    /// Its name.
    pub name: String,
    /// Its tags.
    pub tags: Vec<String>,
    /// What it is: the `Hash: N` its description records (a managed template's), else
    /// `<vmid>-<hash of its meta>`, as upstream computes it. A node's image id.
    pub hash: String,
    /// The one storage all its disks are on; `None` when they are on several (upstream then
    /// needs the NodeClass to name the boot storage).
    pub storage: Option<String>,
}

/// What the provider read about a template VM.
#[derive(Clone, Debug, Default)]
pub struct TemplateConfig<'a> {
    /// `tags`, `;`-separated.
    pub tags: &'a str,
    /// `description`.
    pub description: &'a str,
    /// `meta` (PVE's creation record: `creation-qemu=…,ctime=…`).
    pub meta: &'a str,
    /// The values of its disk keys (`scsi0`, `virtio0`, `efidisk0`, `tpmstate0`, …), e.g.
    /// `local-lvm:base-9000-disk-0,size=4G`; CD-ROMs are skipped.
    pub disks: Vec<&'a str>,
}

static DESCRIBED_HASH: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"Hash:\s*(\d+)").expect("a valid pattern"));

/// The keys of a VM config that are disks, as upstream merges them.
pub fn is_disk_key(key: &str) -> bool {
    [
        "ide", "sata", "scsi", "virtio", "efidisk", "tpmstate", "unused",
    ]
    .iter()
    .any(|p| {
        key.strip_prefix(p)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

impl TemplateVm {
    /// The template VM `vmid` named `name` on node `zone` of `region`, from its config.
    pub fn new(region: &str, zone: &str, vmid: u32, name: &str, config: &TemplateConfig) -> Self {
        let hash = DESCRIBED_HASH
            .captures(config.description)
            .map(|c| c[1].to_string())
            .unwrap_or_else(|| format!("{vmid}-{}", go_string_hash(config.meta)));
        let mut storage: Option<Option<String>> = None;
        for disk in &config.disks {
            if disk.contains("media=cdrom") || disk.starts_with("none") {
                continue;
            }
            let Some((id, _)) = disk.split_once(':') else {
                continue;
            };
            storage = match storage {
                None => Some(Some(id.to_string())),
                Some(Some(s)) if s == id => Some(Some(s)),
                Some(_) => Some(None),
            };
        }
        Self {
            region: region.to_string(),
            zone: zone.to_string(),
            vmid,
            name: name.to_string(),
            tags: config
                .tags
                .split([';', ',', ' '])
                .filter(|t| !t.is_empty())
                .map(str::to_string)
                .collect(),
            hash,
            storage: storage.flatten(),
        }
    }

    /// `region/zone/vmid`, the form template and NodeClass statuses list.
    pub fn zone_entry(&self) -> String {
        format!("{}/{}/{}", self.region, self.zone, self.vmid)
    }

    /// Whether a `ProxmoxUnmanagedTemplate` means this VM: its name (when given), its region
    /// (when given) and every one of its tags.
    pub fn matches_unmanaged(&self, spec: &ProxmoxUnmanagedTemplateSpec) -> bool {
        spec.template_name().is_none_or(|n| n == self.name)
            && spec
                .region
                .as_deref()
                .filter(|r| !r.is_empty())
                .is_none_or(|r| r == self.region)
            && spec.tags.iter().all(|t| self.tags.contains(t))
    }
}

/// The template a NodeClass clones from on `zone` of `region`: one of `template_ids` (its
/// status's selected zones) there.
pub fn for_zone<'a>(
    templates: &'a [TemplateVm],
    region: &str,
    zone: &str,
    template_ids: &[u64],
) -> Option<&'a TemplateVm> {
    templates
        .iter()
        .find(|t| t.region == region && t.zone == zone && template_ids.contains(&u64::from(t.vmid)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm(description: &str, meta: &str, disks: Vec<&str>) -> TemplateVm {
        TemplateVm::new(
            "pve",
            "pve1",
            9000,
            "talos",
            &TemplateConfig {
                tags: "k8s;talos",
                description,
                meta,
                disks,
            },
        )
    }

    #[test]
    fn the_hash_is_the_described_one_else_the_vmid_and_the_meta_hash() {
        let cases = [
            ("Karpenter template\nHash: 1234567", "ctime=1", "1234567"),
            ("Hash:98", "", "98"),
            ("", "", "9000-14695981039346656037"),
            ("hand made", "a", "9000-12638153115695167422"),
        ];
        for (description, meta, want) in cases {
            assert_eq!(vm(description, meta, vec![]).hash, want, "{description:?}");
        }
    }

    #[test]
    fn storage_is_the_one_all_disks_share() {
        let cases: [(Vec<&str>, Option<&str>); 5] = [
            (
                vec!["local-lvm:base-9000-disk-0,size=4G"],
                Some("local-lvm"),
            ),
            (
                vec![
                    "local-lvm:base-9000-disk-0,size=4G",
                    "local:iso/ci.iso,media=cdrom",
                    "local-lvm:base-9000-disk-1,size=4M",
                ],
                Some("local-lvm"),
            ),
            (
                vec!["local-lvm:base-9000-disk-0", "ceph:base-9000-disk-1"],
                None,
            ),
            (vec!["none,media=cdrom"], None),
            (vec![], None),
        ];
        for (disks, want) in cases {
            assert_eq!(
                vm("", "", disks.clone()).storage.as_deref(),
                want,
                "{disks:?}"
            );
        }
    }

    #[test]
    fn an_unmanaged_template_matches_by_name_region_and_every_tag() {
        let t = vm("", "", vec![]);
        let spec = |v: serde_json::Value| -> ProxmoxUnmanagedTemplateSpec {
            serde_json::from_value(v).unwrap()
        };
        let cases = [
            (serde_json::json!({"templateName": "talos"}), true),
            (serde_json::json!({"templateName": "k3s"}), false),
            (
                serde_json::json!({"templateName": "talos", "region": "pve"}),
                true,
            ),
            (
                serde_json::json!({"templateName": "talos", "region": "other"}),
                false,
            ),
            (serde_json::json!({"tags": ["k8s"]}), true),
            (serde_json::json!({"tags": ["k8s", "talos"]}), true),
            (serde_json::json!({"tags": ["k8s", "gpu"]}), false),
        ];
        for (s, want) in cases {
            assert_eq!(t.matches_unmanaged(&spec(s.clone())), want, "{s}");
        }
        assert_eq!(t.zone_entry(), "pve/pve1/9000");
        assert_eq!(t.tags, ["k8s", "talos"]);
    }

    #[test]
    fn disk_keys() {
        for (key, want) in [
            ("scsi0", true),
            ("virtio12", true),
            ("efidisk0", true),
            ("tpmstate0", true),
            ("net0", false),
            ("scsihw", false),
            ("ide", false),
        ] {
            assert_eq!(is_disk_key(key), want, "{key}");
        }
    }

    #[test]
    fn a_zones_template_is_one_of_the_node_classes() {
        let a = TemplateVm::new("pve", "pve1", 9000, "a", &TemplateConfig::default());
        let b = TemplateVm::new("pve", "pve2", 9001, "a", &TemplateConfig::default());
        let all = [a, b];
        assert_eq!(
            for_zone(&all, "pve", "pve2", &[9000, 9001]).unwrap().vmid,
            9001
        );
        assert!(for_zone(&all, "pve", "pve2", &[9000]).is_none());
        assert!(for_zone(&all, "other", "pve1", &[9000]).is_none());
    }
}
