//! `ProxmoxNodeClass`: how the provider makes a node — the template it clones, where the boot
//! disk goes and how large it is, the cloud-init metadata, kubelet settings, and the tags,
//! firewall security groups and resource pool of the VM.
//!
//! The CRD's defaults (a `Balanced` placement, a 30G boot disk, no metadata CD-ROM, `net0` for a
//! security group) are the types' serde defaults too, so an object reads the same whether or
//! not the API server has defaulted it yet, and writes back what the server stores.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::SecretReference;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use karpenter_api::crd::{Crd, READY_COLUMN_PATH};
use karpenter_api::duration::{format_go_duration, parse_go_duration};
use karpenter_api::validation::{Problem, ProblemKind};

use super::{FieldError, GROUP, InvalidSpec, SelectedZone, VERSION, ready, schema};

/// `proxmoxnodeclasses.karpenter.proxmox.sinextra.dev`.
pub(super) const CRD: Crd = Crd::new(
    GROUP,
    VERSION,
    "ProxmoxNodeClass",
    "proxmoxnodeclasses",
    schema::node_class,
)
.with_printer_columns(printer_columns)
.with_runtime_checks(runtime_checks);

fn printer_columns() -> Value {
    serde_json::json!([
        {"jsonPath": ".status.resources.zones", "name": "Zones", "type": "string"},
        {"jsonPath": ".spec.placementStrategy.zoneBalance", "name": "Balance", "type": "string"},
        {"jsonPath": ".spec.instanceTemplateRef.name", "name": "Template", "type": "string"},
        {"jsonPath": ".spec.metadataOptions.type", "name": "Metadata", "type": "string"},
        {"jsonPath": ".spec.bootDevice.size", "name": "Disk", "type": "string"},
        {"jsonPath": READY_COLUMN_PATH, "name": "Ready", "type": "string"},
        {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"},
    ])
}

fn runtime_checks(object: &Value, problems: &mut Vec<Problem>) {
    karpenter_api::validation::typed::<ProxmoxNodeClass>(object, problems, |class, problems| {
        if let Err(InvalidSpec(found)) = class.spec.validate_for_create() {
            problems.extend(found.into_iter().map(|e| Problem {
                path: e.field,
                message: e.reason,
                kind: ProblemKind::NotReady,
            }));
        }
    });
}

/// The condition that the template the class names is ready in some zone.
pub const CONDITION_INSTANCE_TEMPLATE_READY: &str = "InstanceTemplateReady";
/// The condition that the class's cloud-init metadata Secret is there (when it needs one).
pub const CONDITION_INSTANCE_METADATA_OPTIONS_READY: &str = "InstanceMetadataOptionsReady";
/// The conditions `Ready` summarises, as upstream's status lists them.
pub const NODE_CLASS_READY_CONDITIONS: [&str; 2] = [
    CONDITION_INSTANCE_TEMPLATE_READY,
    CONDITION_INSTANCE_METADATA_OPTIONS_READY,
];

/// The boot disk's size when the class names no boot device (the CRD's default).
pub const DEFAULT_BOOT_DEVICE_SIZE: &str = "30G";
/// The interface a security group applies to when it names none (the CRD's default).
pub const DEFAULT_SECURITY_GROUP_INTERFACE: &str = "net0";

/// The CRD's defaults, shared by the schema and the serde defaults so they cannot disagree.
pub(super) mod defaults {
    use super::{BlockDevice, DEFAULT_SECURITY_GROUP_INTERFACE, MetadataOptions};

    pub(crate) fn boot_device() -> BlockDevice {
        BlockDevice {
            size: Some(super::DEFAULT_BOOT_DEVICE_SIZE.to_string()),
            storage: None,
        }
    }

    pub(crate) fn metadata_options() -> MetadataOptions {
        MetadataOptions::default()
    }

    pub(crate) fn security_group_interface() -> String {
        DEFAULT_SECURITY_GROUP_INTERFACE.to_string()
    }
}

/// How nodes spread over a region's zones (Proxmox nodes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ZoneBalance {
    /// Evenly over the zones (upstream's default).
    #[default]
    Balanced,
    /// Wherever there is room first, evenness second.
    AvailabilityFirst,
}

impl ZoneBalance {
    /// The value as the CRD spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ZoneBalance::Balanced => "Balanced",
            ZoneBalance::AvailabilityFirst => "AvailabilityFirst",
        }
    }
}

/// Where nodes go.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementStrategy {
    /// How nodes spread over the zones.
    #[serde(default)]
    pub zone_balance: ZoneBalance,
}

/// The kind of template a class clones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum InstanceTemplateKind {
    /// A [`super::ProxmoxTemplate`]: the provider builds the VM template.
    ProxmoxTemplate,
    /// A [`super::ProxmoxUnmanagedTemplate`]: the user made the VM template.
    ProxmoxUnmanagedTemplate,
}

impl InstanceTemplateKind {
    /// The kind's name.
    pub fn as_str(self) -> &'static str {
        match self {
            InstanceTemplateKind::ProxmoxTemplate => "ProxmoxTemplate",
            InstanceTemplateKind::ProxmoxUnmanagedTemplate => "ProxmoxUnmanagedTemplate",
        }
    }
}

/// The template a class clones: a cluster-scoped object of one of the two template kinds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceTemplateRef {
    /// The template's kind.
    pub kind: InstanceTemplateKind,
    /// The template's name.
    pub name: String,
}

/// A disk of the VM.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockDevice {
    /// The size, a whole number of `G`, `Gi`, `T` or `Ti`; unset keeps the template's disk.
    #[serde(
        default,
        deserialize_with = "int_or_string",
        skip_serializing_if = "Option::is_none"
    )]
    pub size: Option<String>,
    /// The Proxmox storage the disk is made on; unset is the template's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<String>,
}

/// The schema takes a size as an integer or a string (an int-or-string quantity); the type
/// reads both, so the runtime checks can name what is wrong with an integer.
fn int_or_string<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    Ok(match Option::<Value>::deserialize(deserializer)? {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(Value::Number(n)) => Some(n.to_string()),
        Some(other) => {
            return Err(serde::de::Error::custom(format!(
                "expected an integer or a string, not {other}"
            )));
        }
    })
}

impl BlockDevice {
    /// The size in bytes, when it is set and written as the CRD asks (a whole number of `G`,
    /// `Gi`, `T` or `Ti`, not overflowing).
    pub fn size_bytes(&self) -> Option<u64> {
        let size = self.size.as_deref()?;
        let digits = size.bytes().take_while(u8::is_ascii_digit).count();
        let (number, unit) = size.split_at(digits);
        let unit: u64 = match unit {
            "G" => 1_000_000_000,
            "Gi" => 1 << 30,
            "T" => 1_000_000_000_000,
            "Ti" => 1 << 40,
            _ => return None,
        };
        number.parse::<u64>().ok()?.checked_mul(unit)
    }

    /// The size in whole gigabytes (10⁹ bytes), rounded up, as upstream sizes the boot disk
    /// (`ScaledValue(Giga)`).
    pub fn size_gigabytes(&self) -> Option<u64> {
        self.size_bytes().map(|b| b.div_ceil(1_000_000_000))
    }
}

/// How the VM gets its cloud-init metadata.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MetadataType {
    /// None from the provider: the template's own cloud-init settings apply (the default).
    #[default]
    None,
    /// A NoCloud CD-ROM rendered from the `templatesRef` Secret.
    Cdrom,
}

/// The cloud-init metadata of the VMs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetadataOptions {
    /// How the metadata reaches the VM.
    #[serde(default, rename = "type")]
    pub type_: MetadataType,
    /// The Secret of Go templates (`user-data`, `meta-data`, `network-config`, each
    /// optional); required for `cdrom`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub templates_ref: Option<SecretReference>,
    /// A Secret of values the templates read as `.Values.<key>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values_ref: Option<SecretReference>,
}

/// A Secret's (name, namespace), when both are given (upstream ignores a reference lacking
/// either).
fn secret(reference: Option<&SecretReference>) -> Option<(&str, &str)> {
    let reference = reference?;
    let name = reference.name.as_deref().filter(|n| !n.is_empty())?;
    let namespace = reference.namespace.as_deref().filter(|n| !n.is_empty())?;
    Some((name, namespace))
}

impl MetadataOptions {
    /// The templates Secret's (name, namespace), when both are given.
    pub fn templates_secret(&self) -> Option<(&str, &str)> {
        secret(self.templates_ref.as_ref())
    }

    /// The values Secret's (name, namespace), when both are given.
    pub fn values_secret(&self) -> Option<(&str, &str)> {
        secret(self.values_ref.as_ref())
    }
}

/// A Proxmox firewall security group applied to one of the VM's interfaces.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecurityGroup {
    /// The interface (`net0`, `net1`, …).
    #[serde(default = "defaults::security_group_interface")]
    pub interface: String,
    /// The security group's name in Proxmox.
    pub name: String,
}

/// Kubelet settings for the nodes, a subset of the kubelet's `KubeletConfiguration` under its
/// names. The provider hands them to the cloud-init templates ([`KubeletConfiguration::to_json`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeletConfiguration {
    /// `none` or `static`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_manager_policy: Option<String>,
    /// Whether CPU limits are enforced with CFS quota.
    #[serde(
        default,
        rename = "cpuCFSQuota",
        skip_serializing_if = "Option::is_none"
    )]
    pub cpu_cfs_quota: Option<bool>,
    /// The CFS quota period, a Go duration (`100ms`).
    #[serde(
        default,
        rename = "cpuCFSQuotaPeriod",
        skip_serializing_if = "Option::is_none"
    )]
    pub cpu_cfs_quota_period: Option<String>,
    /// `restricted`, `best-effort`, `none` or `single-numa-node`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_manager_policy: Option<String>,
    /// `container` or `pod`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_manager_scope: Option<String>,
    /// Disk use (percent) above which images are always garbage collected.
    #[serde(
        default,
        rename = "imageGCHighThresholdPercent",
        skip_serializing_if = "Option::is_none"
    )]
    pub image_gc_high_threshold_percent: Option<i32>,
    /// Disk use (percent) image garbage collection brings the disk down to.
    #[serde(
        default,
        rename = "imageGCLowThresholdPercent",
        skip_serializing_if = "Option::is_none"
    )]
    pub image_gc_low_threshold_percent: Option<i32>,
    /// How long node shutdown waits for pods, a Go duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shutdown_grace_period: Option<String>,
    /// Unsafe sysctls (or patterns ending in `*`) pods may set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_unsafe_sysctls: Vec<String>,
    /// The cluster DNS servers' addresses (at most 3).
    #[serde(default, rename = "clusterDNS", skip_serializing_if = "Vec::is_empty")]
    pub cluster_dns: Vec<String>,
    /// The most pods a node runs, 10 to 250.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pods: Option<i32>,
    /// Whether the kubelet refuses to start with swap on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_swap_on: Option<bool>,
}

impl KubeletConfiguration {
    /// The settings as upstream hands them to the cloud-init templates: JSON under the
    /// kubelet's names, durations in Go's canonical form (`60s` is `1m0s`) as a Go duration
    /// marshals; one that does not parse (the runtime checks refuse it) is kept as written.
    pub fn to_json(&self) -> Value {
        let mut value = serde_json::to_value(self).unwrap_or(Value::Null);
        for field in ["cpuCFSQuotaPeriod", "shutdownGracePeriod"] {
            if let Some(Value::String(d)) = value.get_mut(field)
                && let Ok(parsed) = parse_go_duration(d)
            {
                *d = format_go_duration(parsed);
            }
        }
        value
    }
}

/// How the provider makes nodes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxNodeClassSpec {
    /// The Proxmox cluster nodes go to; unset is any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// How nodes spread over the zones.
    #[serde(default)]
    pub placement_strategy: PlacementStrategy,
    /// The template nodes are cloned from (the CRD requires it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_template_ref: Option<InstanceTemplateRef>,
    /// Kubelet settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet_configuration: Option<KubeletConfiguration>,
    /// The boot disk.
    #[serde(default = "defaults::boot_device")]
    pub boot_device: BlockDevice,
    /// Tags put on the VMs (updated in place; not hashed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The cloud-init metadata (not hashed).
    #[serde(default = "defaults::metadata_options")]
    pub metadata_options: MetadataOptions,
    /// Firewall security groups (updated in place; not hashed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_groups: Vec<SecurityGroup>,
    /// The Proxmox resource pool VMs join, up to three levels (`a/b/c`); it must exist
    /// (updated in place; not hashed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_pool: Option<String>,
}

impl Default for ProxmoxNodeClassSpec {
    /// A spec as the API server defaults an empty one.
    fn default() -> Self {
        Self {
            region: None,
            placement_strategy: PlacementStrategy::default(),
            instance_template_ref: None,
            kubelet_configuration: None,
            boot_device: defaults::boot_device(),
            tags: Vec::new(),
            metadata_options: defaults::metadata_options(),
            security_groups: Vec::new(),
            resource_pool: None,
        }
    }
}

/// The boot disk sizes the CRD's pattern admits.
fn is_disk_size(size: &str) -> bool {
    let digits = size.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0 && matches!(&size[digits..], "G" | "Gi" | "T" | "Ti")
}

impl ProxmoxNodeClassSpec {
    /// What the CRD admits but upstream cannot use, each problem naming its field:
    /// * `spec.instanceTemplateRef` missing (the CRD requires it only inside a `spec`, so an
    ///   object without one is stored, and upstream's status then fails);
    /// * `spec.bootDevice.size` not a whole number of `G`, `Gi`, `T` or `Ti` (the schema's
    ///   int-or-string admits a bare integer, a size in bytes no VM can boot from) or too large
    ///   to count in bytes;
    /// * a kubelet duration that is not a Go duration (upstream cannot read such an object at
    ///   all);
    /// * `spec.metadataOptions.type: cdrom` without a `templatesRef` naming a Secret and its
    ///   namespace (upstream's `InstanceMetadataOptionsReady` is then `False`).
    pub fn validate_for_create(&self) -> Result<(), InvalidSpec> {
        let mut problems = Vec::new();
        if self.instance_template_ref.is_none() {
            problems.push(FieldError::new(
                "spec.instanceTemplateRef",
                "is required: the template nodes are cloned from",
            ));
        }
        if let Some(size) = &self.boot_device.size {
            if !is_disk_size(size) {
                problems.push(FieldError::new(
                    "spec.bootDevice.size",
                    format!(
                        "must be a whole number of G, Gi, T or Ti such as 30G (it is {size:?})"
                    ),
                ));
            } else if self.boot_device.size_bytes().is_none() {
                problems.push(FieldError::new(
                    "spec.bootDevice.size",
                    format!("is too large (it is {size:?})"),
                ));
            }
        }
        if let Some(kubelet) = &self.kubelet_configuration {
            for (field, value) in [
                ("cpuCFSQuotaPeriod", &kubelet.cpu_cfs_quota_period),
                ("shutdownGracePeriod", &kubelet.shutdown_grace_period),
            ] {
                if let Some(value) = value
                    && let Err(e) = parse_go_duration(value)
                {
                    problems.push(FieldError::new(
                        &format!("spec.kubeletConfiguration.{field}"),
                        format!("must be a duration such as 100ms or 1m30s ({e})"),
                    ));
                }
            }
        }
        let metadata = &self.metadata_options;
        if metadata.type_ == MetadataType::Cdrom && metadata.templates_secret().is_none() {
            problems.push(FieldError::new(
                "spec.metadataOptions.templatesRef",
                "must name a Secret and its namespace when type is cdrom",
            ));
        }
        InvalidSpec::check(problems)
    }
}

/// What the provider found for a class.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxNodeClassStatus {
    /// `Ready` and the [`NODE_CLASS_READY_CONDITIONS`] it summarises.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Counts of what the class can use: [`super::RESOURCE_ZONES`], the zones it is ready in.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: BTreeMap<String, Quantity>,
    /// The `region/zone/vmid` entries ([`SelectedZone`]) where the class's template is ready
    /// on the class's boot storage.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub selected_zones: Vec<String>,
}

/// The Proxmox provider's NodeClass.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProxmoxNodeClass {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// How nodes are made.
    pub spec: ProxmoxNodeClassSpec,
    /// What the provider found.
    pub status: Option<ProxmoxNodeClassStatus>,
}

karpenter_api::cluster_resource!(
    ProxmoxNodeClass, ProxmoxNodeClassSpec, ProxmoxNodeClassStatus,
    group: "karpenter.proxmox.sinextra.dev", version: "v1alpha1", plural: "proxmoxnodeclasses"
);

impl ProxmoxNodeClass {
    /// The template nodes are cloned from (`None` only for a class the CRD would refuse or
    /// without a spec).
    pub fn template_ref(&self) -> Option<&InstanceTemplateRef> {
        self.spec.instance_template_ref.as_ref()
    }

    /// Whether the class's `Ready` condition is `True`.
    pub fn is_ready(&self) -> bool {
        self.status.as_ref().is_some_and(|s| ready(&s.conditions))
    }

    /// The status's zones, read; entries that do not read are left out.
    pub fn selected_zones(&self) -> Vec<SelectedZone> {
        self.status
            .iter()
            .flat_map(|s| &s.selected_zones)
            .filter_map(|z| SelectedZone::parse(z))
            .collect()
    }

    /// The zones (Proxmox nodes) of `region` the class is ready in, in the status's order
    /// (upstream's `GetZones`).
    pub fn zones(&self, region: &str) -> Vec<String> {
        self.selected_zones()
            .into_iter()
            .filter(|z| z.region == region)
            .map(|z| z.zone)
            .collect()
    }

    /// The VM ids of the class's templates in `region`, in the status's order (upstream's
    /// `GetTemplateIDs`).
    pub fn template_ids(&self, region: &str) -> Vec<u64> {
        self.selected_zones()
            .into_iter()
            .filter(|z| z.region == region)
            .map(|z| z.template_id)
            .collect()
    }
}
