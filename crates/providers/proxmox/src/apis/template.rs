//! `ProxmoxTemplate`: a VM template the provider builds on each Proxmox node from a cloud
//! image it has Proxmox download — the image, where it is stored, and the VM's hardware
//! (machine, BIOS, TPM, guest agent, CPU, VGA, network interfaces, PCI devices).
//!
//! The CRD's defaults (`q35`, SeaBIOS, an `x86-64-v2-AES` CPU, `virtio` NICs of MTU 1500, …) are
//! the types' serde defaults too, so an object reads the same before and after the API server
//! defaults it.
//!
//! Two hashes, both upstream's numbers (see `gohash` for why): [`ProxmoxTemplate::hash`] over
//! what needs the template made again (the image, the storages, the BIOS, the TPM), and
//! [`ProxmoxTemplate::in_place_hash`] over the rest, which is applied to the templates as they
//! stand.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use karpenter_api::crd::{Crd, READY_COLUMN_PATH};
use karpenter_api::validation::{Problem, ProblemKind};

use super::gohash::Go;
use super::{CommonTemplate, FieldError, GROUP, InvalidSpec, VERSION, schema};

/// `proxmoxtemplates.karpenter.proxmox.sinextra.dev`.
pub(super) const CRD: Crd = Crd::new(
    GROUP,
    VERSION,
    "ProxmoxTemplate",
    "proxmoxtemplates",
    schema::template,
)
.with_printer_columns(printer_columns)
.with_runtime_checks(runtime_checks);

fn printer_columns() -> Value {
    serde_json::json!([
        {"jsonPath": ".status.resources.zones", "name": "Zones", "type": "string"},
        {"jsonPath": ".spec.machine", "name": "Machine", "type": "string"},
        {"jsonPath": ".spec.cpu.type", "name": "CPU", "type": "string"},
        {"jsonPath": ".spec.vga.type", "name": "VGA", "type": "string"},
        {"jsonPath": READY_COLUMN_PATH, "name": "Ready", "type": "string"},
        {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"},
    ])
}

fn runtime_checks(object: &Value, problems: &mut Vec<Problem>) {
    karpenter_api::validation::typed::<ProxmoxTemplate>(object, problems, |template, problems| {
        if let Err(InvalidSpec(found)) = template.spec.validate_for_create() {
            problems.extend(found.into_iter().map(|e| Problem {
                path: e.field,
                message: e.reason,
                kind: ProblemKind::NotReady,
            }));
        }
    });
}

/// The condition that a template's VM templates are made (what `Ready` summarises).
pub const CONDITION_TEMPLATE_READY: &str = "ProxmoxVirtualMachineTemplateReady";
/// The condition upstream declares for the template's image (not part of `Ready`).
pub const CONDITION_TEMPLATE_IMAGE_READY: &str = "ProxmoxVirtualMachineTemplateImageReady";
/// The conditions `Ready` summarises for either kind of template.
pub const TEMPLATE_READY_CONDITIONS: [&str; 1] = [CONDITION_TEMPLATE_READY];

/// The CRD's defaults, shared by the schema and the serde defaults so they cannot disagree.
pub(super) mod defaults {
    pub(crate) const MACHINE: &str = "q35";
    pub(crate) const BIOS: &str = "seabios";
    pub(crate) const TPM_VERSION: &str = "v2.0";
    pub(crate) const AGENT_TYPE: &str = "virtio";
    pub(crate) const CPU_TYPE: &str = "x86-64-v2-AES";
    pub(crate) const VGA_TYPE: &str = "std";
    pub(crate) const NETWORK_MODEL: &str = "virtio";
    pub(crate) const MTU: u16 = 1500;

    pub(crate) fn machine() -> String {
        MACHINE.into()
    }
    pub(crate) fn bios() -> String {
        BIOS.into()
    }
    pub(crate) fn tpm_version() -> String {
        TPM_VERSION.into()
    }
    pub(crate) fn agent_type() -> String {
        AGENT_TYPE.into()
    }
    pub(crate) fn cpu() -> super::Cpu {
        super::Cpu {
            type_: CPU_TYPE.into(),
            flags: Vec::new(),
        }
    }
    pub(crate) fn cpu_type() -> String {
        CPU_TYPE.into()
    }
    pub(crate) fn vga_type() -> String {
        VGA_TYPE.into()
    }
    pub(crate) fn network_model() -> String {
        NETWORK_MODEL.into()
    }
    pub(crate) fn mtu() -> u16 {
        MTU
    }
}

/// The cloud image the template boots.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceImage {
    /// Where Proxmox downloads the image from (http or https; qcow2 or raw).
    #[serde(default)]
    pub url: String,
    /// The file name to store it under, with its extension (`noble-amd64.qcow2`); the provider
    /// adds the URL's hash before the extension (see [`ProxmoxTemplateSpec::image_id`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_name: Option<String>,
    /// The image's checksum, which Proxmox checks after downloading.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<String>,
    /// The checksum's algorithm: `md5`, `sha1`, `sha224`, `sha256`, `sha384` or `sha512`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum_type: Option<String>,
}

/// The VM's trusted platform module.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tpm {
    /// `v1.2` or `v2.0` (the default).
    #[serde(default = "defaults::tpm_version")]
    pub version: String,
}

impl Default for Tpm {
    fn default() -> Self {
        Self {
            version: defaults::tpm_version(),
        }
    }
}

/// The QEMU guest agent of the VM.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QemuGuestAgent {
    /// Whether the agent's channel is there.
    #[serde(default)]
    pub enabled: bool,
    /// The channel: `virtio` (the default) or `isa`.
    #[serde(default = "defaults::agent_type", rename = "type")]
    pub type_: String,
    /// Whether backups freeze the file systems.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_freeze_on_backup: Option<bool>,
    /// Whether cloned disks are trimmed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_trim_cloned_disks: Option<bool>,
}

impl Default for QemuGuestAgent {
    fn default() -> Self {
        Self {
            enabled: false,
            type_: defaults::agent_type(),
            fs_freeze_on_backup: None,
            fs_trim_cloned_disks: None,
        }
    }
}

/// The VM's CPU.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cpu {
    /// The emulated CPU type: `host`, `kvm64`, `x86-64-v2`, `x86-64-v2-AES` (the default),
    /// `x86-64-v3` or `x86-64-v4`.
    #[serde(default = "defaults::cpu_type", rename = "type")]
    pub type_: String,
    /// More CPU flags (`+pdpe1gb`), at most 10.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
}

impl Default for Cpu {
    fn default() -> Self {
        defaults::cpu()
    }
}

/// The VM's display.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vga {
    /// `none`, `serial0`, `std` (the default) or `vmware`.
    #[serde(default = "defaults::vga_type", rename = "type")]
    pub type_: String,
    /// Its memory, MiB (4 to 512).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<i64>,
}

impl Default for Vga {
    fn default() -> Self {
        Self {
            type_: defaults::vga_type(),
            memory: None,
        }
    }
}

/// An interface's addresses; unset is DHCP for IPv4 and SLAAC for IPv6.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IpConfig {
    /// The IPv4 address with its prefix length (`192.168.0.10/24`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address4: Option<String>,
    /// The IPv6 address with its prefix length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address6: Option<String>,
    /// The IPv4 default gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway4: Option<String>,
    /// The IPv6 default gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway6: Option<String>,
    /// DNS servers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dns_servers: Vec<String>,
}

/// One of the VM's network interfaces.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Network {
    /// Its addresses (inline, as upstream's).
    #[serde(flatten)]
    pub ip_config: IpConfig,
    /// The Proxmox interface (`net0`); unset is by position.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The bridge it attaches to (`vmbr0`).
    #[serde(default)]
    pub bridge: String,
    /// The card: `e1000`, `e1000e`, `rtl8139`, `virtio` (the default) or `vmxnet3`.
    #[serde(default = "defaults::network_model")]
    pub model: String,
    /// The MTU: 1 (the bridge's) or 576 to 65520; 1500 by default.
    #[serde(default = "defaults::mtu")]
    pub mtu: u16,
    /// The VLAN tag, 1 to 4094.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan: Option<u16>,
    /// Whether Proxmox's firewall guards it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firewall: Option<bool>,
}

/// A PCI device passed through to the VM, by Proxmox resource mapping.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PciDevice {
    /// The resource mapping's name.
    #[serde(default)]
    pub mapping: String,
    /// The mediated device type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mdev: Option<String>,
    /// Whether it is attached as PCI Express.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie: Option<bool>,
    /// Whether it is the primary display.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xvga: Option<bool>,
}

/// A VM template the provider builds and keeps.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxTemplateSpec {
    /// The Proxmox cluster the template is built in; unset is every one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// The VM template's description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The image the template boots (the CRD requires it).
    #[serde(default)]
    pub source_image: SourceImage,
    /// Storages for the image and the template, best first; they must hold `images` and
    /// `import` content.
    #[serde(default, rename = "storageIDs", skip_serializing_if = "Vec::is_empty")]
    pub storage_ids: Vec<String>,
    /// `pc` or `q35` (the default).
    #[serde(default = "defaults::machine")]
    pub machine: String,
    /// `seabios` (the default) or `ovmf`.
    #[serde(default = "defaults::bios")]
    pub bios: String,
    /// The trusted platform module.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpm: Option<Tpm>,
    /// The QEMU guest agent.
    #[serde(default, rename = "agent", skip_serializing_if = "Option::is_none")]
    pub qemu_guest_agent: Option<QemuGuestAgent>,
    /// The CPU.
    #[serde(default = "defaults::cpu")]
    pub cpu: Cpu,
    /// The display.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vga: Option<Vga>,
    /// The network interfaces, 1 to 6 (the CRD requires one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network: Vec<Network>,
    /// PCI devices, at most 6.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pci_devices: Vec<PciDevice>,
    /// Tags on the VM template, at most 10.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The Proxmox resource pool the template joins; it must exist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_pool: Option<String>,
    /// Whether the VMs start when their Proxmox node boots (clones inherit it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_boot: Option<bool>,
}

impl Default for ProxmoxTemplateSpec {
    /// A spec as the API server defaults an empty one.
    fn default() -> Self {
        Self {
            region: None,
            description: None,
            source_image: SourceImage::default(),
            storage_ids: Vec::new(),
            machine: defaults::machine(),
            bios: defaults::bios(),
            tpm: None,
            qemu_guest_agent: None,
            cpu: defaults::cpu(),
            vga: None,
            network: Vec::new(),
            pci_devices: Vec::new(),
            tags: Vec::new(),
            resource_pool: None,
            on_boot: None,
        }
    }
}

impl ProxmoxTemplateSpec {
    /// The name the image is downloaded under, upstream's exactly: the image name with the
    /// URL's hash ([`super::go_string_hash`]) before its first dot
    /// (`noble-amd64.qcow2` → `noble-amd64-<hash>.qcow2`), so a new URL is a new image and an
    /// image already downloaded by upstream is found again. An image name missing or without
    /// an extension has no such name (upstream crashes on it).
    pub fn image_id(&self) -> Result<String, FieldError> {
        let image = &self.source_image;
        let name = image.image_name.as_deref().unwrap_or_default();
        let Some((stem, extension)) = name.split_once('.') else {
            return Err(FieldError::new(
                "spec.sourceImage.imageName",
                format!(
                    "must name the image file with its extension, such as noble-amd64.qcow2 (it is {name:?})"
                ),
            ));
        };
        let hash = super::go_string_hash(&image.url);
        Ok(format!("{stem}-{hash}.{extension}"))
    }

    /// What the CRD admits but upstream cannot use, each problem naming its field: an image
    /// name the image id cannot be made from ([`Self::image_id`]); and the fields the CRD
    /// requires only inside a `spec` (an object without one is stored): the image's URL, a
    /// storage and an interface.
    pub fn validate_for_create(&self) -> Result<(), InvalidSpec> {
        let mut problems = Vec::new();
        if self.source_image.url.is_empty() {
            problems.push(FieldError::new(
                "spec.sourceImage.url",
                "is required: where Proxmox downloads the image from",
            ));
        }
        if let Err(e) = self.image_id() {
            problems.push(e);
        }
        if self.storage_ids.is_empty() {
            problems.push(FieldError::new(
                "spec.storageIDs",
                "must name at least one storage",
            ));
        }
        if self.network.is_empty() {
            problems.push(FieldError::new(
                "spec.network",
                "must have at least one interface",
            ));
        }
        InvalidSpec::check(problems)
    }

    /// Upstream's hash of what makes the template again when it changes — the image, the
    /// storages, the BIOS and the TPM — number for number. Upstream writes it into the VM
    /// template's description and recognises its templates by it, and nodes carry it as their
    /// image id ([`super::LABEL_INSTANCE_IMAGE_ID`]).
    pub fn hash(&self) -> String {
        let image = &self.source_image;
        let source_image = Go::Struct(
            "SourceImage",
            vec![
                ("URL", Go::Str(&image.url)),
                ("ImageName", Go::str_or_empty(&image.image_name)),
                ("Checksum", Go::str_or_empty(&image.checksum)),
                ("ChecksumType", Go::str_or_empty(&image.checksum_type)),
            ],
        );
        let tpm = self
            .tpm
            .as_ref()
            .map(|t| Go::Struct("TPM", vec![("Version", Go::Str(&t.version))]));
        Go::Struct(
            "hashFields",
            vec![
                ("SourceImage", Go::ptr(Some(source_image))),
                ("StorageIDs", Go::strings(&self.storage_ids)),
                ("Bios", Go::Str(&self.bios)),
                ("TPM", Go::ptr(tpm)),
            ],
        )
        .hash()
        .to_string()
    }

    /// Upstream's in-place hash, number for number: every field but the ones [`Self::hash`]
    /// covers and the resource pool. When it changes the provider reconfigures the templates
    /// as they stand.
    pub fn in_place_hash(&self) -> String {
        let agent = self.qemu_guest_agent.as_ref().map(|a| {
            Go::Struct(
                "QemuGuestAgent",
                vec![
                    ("Enabled", Go::Bool(a.enabled)),
                    ("Type", Go::Str(&a.type_)),
                    ("FsFreezeOnBackup", Go::opt_bool(a.fs_freeze_on_backup)),
                    ("FsTrimClonedDisks", Go::opt_bool(a.fs_trim_cloned_disks)),
                ],
            )
        });
        let cpu = Go::Struct(
            "CPU",
            vec![
                ("Type", Go::Str(&self.cpu.type_)),
                ("Flags", Go::strings(&self.cpu.flags)),
            ],
        );
        let vga = self.vga.as_ref().map(|v| {
            Go::Struct(
                "VGA",
                vec![
                    ("Type", Go::Str(&v.type_)),
                    ("Memory", Go::ptr(v.memory.map(Go::Int))),
                ],
            )
        });
        let network = self.network.iter().map(network).collect();
        let pci = self
            .pci_devices
            .iter()
            .map(|d| {
                Go::Struct(
                    "PCIDevice",
                    vec![
                        ("Mapping", Go::Str(&d.mapping)),
                        ("MDev", Go::str_or_empty(&d.mdev)),
                        ("PCIe", Go::opt_bool(d.pcie)),
                        ("XVga", Go::opt_bool(d.xvga)),
                    ],
                )
            })
            .collect();
        Go::Struct(
            "ProxmoxTemplateSpec",
            vec![
                ("Region", Go::str_or_empty(&self.region)),
                ("Description", Go::str_or_empty(&self.description)),
                ("Machine", Go::Str(&self.machine)),
                ("QemuGuestAgent", Go::ptr(agent)),
                ("CPU", Go::ptr(Some(cpu))),
                ("VGA", Go::ptr(vga)),
                ("Network", Go::Slice(network)),
                ("PCIDevices", Go::Slice(pci)),
                ("Tags", Go::strings(&self.tags)),
                ("OnBoot", Go::opt_bool(self.on_boot)),
            ],
        )
        .hash()
        .to_string()
    }
}

fn network(n: &Network) -> Go<'_> {
    let ip = &n.ip_config;
    let ip_config = Go::Struct(
        "IPConfig",
        vec![
            ("Address4", Go::str_or_empty(&ip.address4)),
            ("Address6", Go::str_or_empty(&ip.address6)),
            ("Gateway4", Go::str_or_empty(&ip.gateway4)),
            ("Gateway6", Go::str_or_empty(&ip.gateway6)),
            ("DNSServers", Go::strings(&ip.dns_servers)),
        ],
    );
    Go::Struct(
        "Network",
        vec![
            ("IPConfig", ip_config),
            ("Name", Go::str_or_empty(&n.name)),
            ("Bridge", Go::Str(&n.bridge)),
            ("Model", Go::ptr(Some(Go::Str(&n.model)))),
            ("MTU", Go::ptr(Some(Go::Uint16(n.mtu)))),
            ("VLAN", Go::ptr(n.vlan.map(Go::Uint16))),
            ("Firewall", Go::opt_bool(n.firewall)),
        ],
    )
}

/// What the provider made of a template (either kind).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxTemplateStatus {
    /// `Ready` and the [`TEMPLATE_READY_CONDITIONS`] it summarises.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Counts of what the template offers: [`super::RESOURCE_ZONES`], the zones it is ready in.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: BTreeMap<String, Quantity>,
    /// The `region/zone/vmid` entries ([`super::SelectedZone`]) where the VM template is.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<String>,
    /// The image the VM templates boot.
    #[serde(default, rename = "imageID", skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
}

/// A VM template the provider builds from a cloud image and keeps.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProxmoxTemplate {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// The image and the VM's hardware.
    pub spec: ProxmoxTemplateSpec,
    /// What the provider made.
    pub status: Option<ProxmoxTemplateStatus>,
}

karpenter_api::cluster_resource!(
    ProxmoxTemplate, ProxmoxTemplateSpec, ProxmoxTemplateStatus,
    group: "karpenter.proxmox.sinextra.dev", version: "v1alpha1", plural: "proxmoxtemplates"
);

impl ProxmoxTemplate {
    /// [`ProxmoxTemplateSpec::hash`] of the template's spec.
    pub fn hash(&self) -> String {
        self.spec.hash()
    }

    /// [`ProxmoxTemplateSpec::in_place_hash`] of the template's spec.
    pub fn in_place_hash(&self) -> String {
        self.spec.in_place_hash()
    }
}

impl CommonTemplate for ProxmoxTemplate {
    fn template_status(&self) -> Option<&ProxmoxTemplateStatus> {
        self.status.as_ref()
    }

    /// The name the spec's image is downloaded under ([`ProxmoxTemplateSpec::image_id`]).
    fn image_id(&self) -> Option<String> {
        self.spec.image_id().ok()
    }
}
