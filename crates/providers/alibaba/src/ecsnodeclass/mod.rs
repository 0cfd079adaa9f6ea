//! `karpenter.k8s.alibabacloud/v1alpha1` ECSNodeClass: how the Alibaba Cloud provider launches
//! ECS instances — which vSwitches, security groups and images, the system and data disks,
//! kubelet settings, tags, the resource group, user data and login. Field for field as the
//! cloudpilot-ai provider's, so existing manifests apply unchanged.
//!
//! Where upstream's Go markers and its generated CRD disagree, the CRD wins: it is what the API
//! server enforces. (Its alias rule admits a bare family, `ContainerOS`, which the examples use,
//! and its disk categories carry no enum.)

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NodeSelectorRequirement;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use karpenter_api::crd::Crd;
use karpenter_api::duration::parse_go_duration;
use karpenter_api::validation::{Problem, ProblemKind};

mod hash;
mod schema;

pub use hash::{
    ECS_NODE_CLASS_HASH_ANNOTATION, ECS_NODE_CLASS_HASH_VERSION,
    ECS_NODE_CLASS_HASH_VERSION_ANNOTATION,
};

pub use crate::GROUP;
/// The only version upstream serves, stored.
pub const VERSION: &str = "v1alpha1";

/// `ecsnodeclasses.karpenter.k8s.alibabacloud`. Upstream declares no printer columns, so
/// neither does this.
pub const CRD: Crd = Crd::new(
    GROUP,
    VERSION,
    "ECSNodeClass",
    "ecsnodeclasses",
    schema::schema,
)
.with_short_names(&["ecsnc", "ecsncs"])
.with_runtime_checks(runtime_checks);

/// The condition that the vSwitch selectors found vSwitches.
pub const CONDITION_VSWITCHES_READY: &str = "VSwitchesReady";
/// The condition that the security group selectors found groups.
pub const CONDITION_SECURITY_GROUPS_READY: &str = "SecurityGroupsReady";
/// The condition that the image selectors found images.
pub const CONDITION_IMAGES_READY: &str = "ImagesReady";
/// The conditions `Ready` summarises, as upstream's status lists them.
pub const READY_CONDITIONS: [&str; 3] = [
    CONDITION_VSWITCHES_READY,
    CONDITION_SECURITY_GROUPS_READY,
    CONDITION_IMAGES_READY,
];

/// The disk categories ECS knows, in the order upstream defaults the system disk's to: a
/// launch tries each until an instance type takes one.
pub const DISK_CATEGORIES: [&str; 6] = [
    "cloud",
    "cloud_efficiency",
    "cloud_ssd",
    "cloud_essd",
    "cloud_auto",
    "cloud_essd_entry",
];

/// The eviction signals the kubelet's eviction maps may name.
pub const EVICTION_SIGNALS: [&str; 6] = [
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
];

/// The resources `systemReserved` and `kubeReserved` may name.
pub const RESERVED_RESOURCES: [&str; 4] = ["cpu", "memory", "ephemeral-storage", "pid"];

/// The schema types grace periods as plain strings, but upstream reads them as Go durations:
/// one that does not parse is stored, and then the controller cannot read the class at all.
fn runtime_checks(object: &Value, problems: &mut Vec<Problem>) {
    let periods = object
        .pointer("/spec/kubeletConfiguration/evictionSoftGracePeriod")
        .and_then(Value::as_object);
    let unparsed: Vec<Problem> = periods
        .into_iter()
        .flatten()
        .filter_map(|(signal, period)| {
            let e = parse_go_duration(period.as_str()?).err()?;
            Some(Problem {
                path: format!("spec.kubeletConfiguration.evictionSoftGracePeriod.{signal}"),
                message: e.to_string(),
                kind: ProblemKind::NotReady,
            })
        })
        .collect();
    if unparsed.is_empty() {
        karpenter_api::validation::typed::<ECSNodeClass>(object, problems, |_, _| {});
    } else {
        problems.extend(unparsed);
    }
}

/// The CRD's defaults, shared by the schema and the types' serde defaults so they cannot
/// disagree.
mod defaults {
    pub const V_SWITCH_SELECTION_POLICY: &str = "cheapest";
    pub const PERFORMANCE_LEVEL: &str = "PL0";
    pub const DATA_DISK_VOLUME_SIZE: &str = "20Gi";

    pub fn v_switch_selection_policy() -> String {
        V_SWITCH_SELECTION_POLICY.into()
    }
    pub fn performance_level() -> String {
        PERFORMANCE_LEVEL.into()
    }
    pub fn system_disk_categories() -> Vec<String> {
        super::DISK_CATEGORIES.map(String::from).to_vec()
    }
    pub fn data_disk_volume_size() -> String {
        DATA_DISK_VOLUME_SIZE.into()
    }
}

/// A vSwitch selector: by id, or by tags (all must match).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VSwitchSelectorTerm {
    /// Tags the vSwitch must carry; `"*"` as a value matches any value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// The vSwitch id, `vsw-…`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// A security group selector: by id, by name, or by tags.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecurityGroupSelectorTerm {
    /// Tags the group must carry; `"*"` as a value matches any value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// The group id, `sg-…`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The group's name (its name field, not a `Name` tag).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// An image selector: an ACK image family by alias, or an image id.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageSelectorTerm {
    /// An ACK image family (`ContainerOS`, `AlibabaCloudLinux3`); its latest image is used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    /// The image id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// Kubelet settings of the nodes: a subset of the kubelet's configuration, under its names.
/// Upstream defaults none of them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeletConfiguration {
    /// Cluster DNS server addresses.
    #[serde(default, rename = "clusterDNS", skip_serializing_if = "Vec::is_empty")]
    pub cluster_dns: Vec<String>,
    /// The most pods a node runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pods: Option<i32>,
    /// Pods per CPU core; never more than `maxPods`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods_per_core: Option<i32>,
    /// Resources kept for the OS (`cpu`, `memory`, `ephemeral-storage`, `pid`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub system_reserved: BTreeMap<String, String>,
    /// Resources kept for Kubernetes' daemons, under the same keys.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kube_reserved: BTreeMap<String, String>,
    /// Hard eviction thresholds by signal (`memory.available: 5%`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub eviction_hard: BTreeMap<String, String>,
    /// Soft eviction thresholds by signal; each needs a grace period.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub eviction_soft: BTreeMap<String, String>,
    /// How long each soft threshold may be crossed before pods are evicted, as Go durations.
    /// Kept as written so a manifest round-trips unchanged; see [`Self::eviction_soft_grace_period`].
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub eviction_soft_grace_period: BTreeMap<String, String>,
    /// The longest grace period (seconds) a pod gets when evicted for a soft threshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_max_pod_grace_period: Option<i32>,
    /// Disk usage (percent) above which images are always garbage collected.
    #[serde(
        default,
        rename = "imageGCHighThresholdPercent",
        skip_serializing_if = "Option::is_none"
    )]
    pub image_gc_high_threshold_percent: Option<i32>,
    /// Disk usage (percent) below which images are never garbage collected.
    #[serde(
        default,
        rename = "imageGCLowThresholdPercent",
        skip_serializing_if = "Option::is_none"
    )]
    pub image_gc_low_threshold_percent: Option<i32>,
    /// Whether CPU limits are enforced with CFS quota; the kubelet's default (on) when unset.
    #[serde(
        default,
        rename = "cpuCFSQuota",
        skip_serializing_if = "Option::is_none"
    )]
    pub cpu_cfs_quota: Option<bool>,
}

impl KubeletConfiguration {
    /// The soft eviction grace periods, parsed; a period that is not a Go duration is left out
    /// (the runtime checks report it).
    pub fn eviction_soft_grace_period(&self) -> BTreeMap<String, std::time::Duration> {
        self.eviction_soft_grace_period
            .iter()
            .filter_map(|(signal, period)| Some((signal.clone(), parse_go_duration(period).ok()?)))
            .collect()
    }
}

/// The system disk. When the block is present, the API server fills in every category and
/// `PL0`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SystemDisk {
    /// The categories a launch may use, tried in order (instance types take different ones).
    /// Always written out: an explicit empty list is not the default list.
    #[serde(default = "defaults::system_disk_categories")]
    pub categories: Vec<String>,
    /// The size as a quantity (`60Gi`, `1Ti`); wins over `size`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_size: Option<String>,
    /// The size in GiB: 20 to 500 for `cloud`, to 2048 for the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<i32>,
    /// The ESSD performance level, `PL0` to `PL3`.
    #[serde(default = "defaults::performance_level")]
    pub performance_level: String,
}

impl Default for SystemDisk {
    fn default() -> Self {
        Self {
            categories: defaults::system_disk_categories(),
            volume_size: None,
            size: None,
            performance_level: defaults::performance_level(),
        }
    }
}

impl SystemDisk {
    /// The size in whole GiB, as upstream launches it: `volumeSize` (rounded down) if set,
    /// else `size`, else 0 (ECS's own default).
    pub fn gib(&self) -> i32 {
        match &self.volume_size {
            Some(quantity) => quantity_gib(quantity),
            None => self.size.unwrap_or(0),
        }
    }
}

/// A data disk.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DataDisk {
    /// The size as a quantity; `20Gi` unless set.
    #[serde(default = "defaults::data_disk_volume_size")]
    pub volume_size: String,
    /// The device (mount point) of the disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
}

impl Default for DataDisk {
    fn default() -> Self {
        Self {
            volume_size: defaults::data_disk_volume_size(),
            device: None,
        }
    }
}

impl DataDisk {
    /// The size in whole GiB (rounded down), as upstream launches it.
    pub fn gib(&self) -> i32 {
        quantity_gib(&self.volume_size)
    }
}

/// A quantity in whole GiB, rounded down; 0 for one that does not parse (the schema's pattern
/// admits none such).
fn quantity_gib(quantity: &str) -> i32 {
    const GIB_MILLI: i64 = 1000 << 30;
    karpenter_core::resources::parse_milli(quantity)
        .map(|milli| i32::try_from(milli / GIB_MILLI).unwrap_or(i32::MAX))
        .unwrap_or(0)
}

/// How launches spread over the vSwitches the selectors found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VSwitchSelectionPolicy {
    /// Across zones evenly.
    Balanced,
    /// Wherever the instance is cheapest (the default).
    Cheapest,
}

impl VSwitchSelectionPolicy {
    /// Every policy, in the CRD's order.
    pub const ALL: [Self; 2] = [Self::Balanced, Self::Cheapest];

    /// Parses the `vSwitchSelectionPolicy` spelling.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == s)
    }

    /// The `vSwitchSelectionPolicy` spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Balanced => "balanced",
            Self::Cheapest => "cheapest",
        }
    }
}

/// An ACK image family an alias may name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ImageFamily {
    /// Alibaba Cloud Linux 3 (x86_64 and arm64).
    AlibabaCloudLinux3,
    /// ContainerOS (x86_64 only; boots faster).
    ContainerOS,
}

impl ImageFamily {
    /// Every family, in the CRD's order.
    pub const ALL: [Self; 2] = [Self::AlibabaCloudLinux3, Self::ContainerOS];

    /// Parses a family as an alias spells it.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.as_str() == s)
    }

    /// The alias spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AlibabaCloudLinux3 => "AlibabaCloudLinux3",
            Self::ContainerOS => "ContainerOS",
        }
    }
}

/// The version an alias without one means.
pub const ALIAS_VERSION_LATEST: &str = "latest";

/// An image alias: a family and a version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Alias {
    /// The image family.
    pub family: ImageFamily,
    /// The image version; [`ALIAS_VERSION_LATEST`] when the alias names none.
    pub version: String,
}

impl Alias {
    /// Parses `family` or `family@version`, as upstream reads them; `None` for an unknown
    /// family or more than one `@`.
    pub fn parse(alias: &str) -> Option<Self> {
        let mut parts = alias.split('@');
        let family = ImageFamily::parse(parts.next()?)?;
        let version = parts.next();
        if parts.next().is_some() {
            return None;
        }
        Some(Self {
            family,
            version: version.unwrap_or(ALIAS_VERSION_LATEST).to_string(),
        })
    }
}

impl std::fmt::Display for Alias {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.family.as_str(), self.version)
    }
}

/// How ECS instances are launched.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ECSNodeClassSpec {
    /// Which vSwitches instances launch into; a vSwitch matching any term is used.
    #[serde(default, rename = "vSwitchSelectorTerms")]
    pub v_switch_selector_terms: Vec<VSwitchSelectorTerm>,
    /// `cheapest` or `balanced`; see [`Self::v_switch_selection_policy`].
    #[serde(
        default = "defaults::v_switch_selection_policy",
        rename = "vSwitchSelectionPolicy"
    )]
    pub v_switch_selection_policy: String,
    /// Which security groups instances get.
    #[serde(default)]
    pub security_group_selector_terms: Vec<SecurityGroupSelectorTerm>,
    /// Which images instances boot.
    #[serde(default)]
    pub image_selector_terms: Vec<ImageSelectorTerm>,
    /// Kubelet settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet_configuration: Option<KubeletConfiguration>,
    /// The system disk; ECS's defaults when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_disk: Option<SystemDisk>,
    /// Data disks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data_disks: Vec<DataDisk>,
    /// The categories the data disks may use, tried in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data_disk_categories: Vec<String>,
    /// Whether ACK formats the last data disk (ext4) and mounts it for containerd and the
    /// kubelet when it is not yet formatted.
    #[serde(default)]
    pub format_data_disk: bool,
    /// Tags on the instances.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// The resource group instances go to, `rg-…`.
    #[serde(
        default,
        rename = "resourceGroupId",
        skip_serializing_if = "Option::is_none"
    )]
    pub resource_group_id: Option<String>,
    /// User data run on the nodes, merged with the bootstrap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    /// The root password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// The key pair for root logins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_pair_name: Option<String>,
    /// Whether the image's preset password is kept (then `password` may not be set).
    #[serde(default)]
    pub password_inherit: bool,
}

impl Default for ECSNodeClassSpec {
    fn default() -> Self {
        Self {
            v_switch_selector_terms: Vec::new(),
            v_switch_selection_policy: defaults::v_switch_selection_policy(),
            security_group_selector_terms: Vec::new(),
            image_selector_terms: Vec::new(),
            kubelet_configuration: None,
            system_disk: None,
            data_disks: Vec::new(),
            data_disk_categories: Vec::new(),
            format_data_disk: false,
            tags: BTreeMap::new(),
            resource_group_id: None,
            user_data: None,
            password: None,
            key_pair_name: None,
            password_inherit: false,
        }
    }
}

impl ECSNodeClassSpec {
    /// The vSwitch selection policy; `cheapest` for a spelling the CRD would not have admitted.
    pub fn v_switch_selection_policy(&self) -> VSwitchSelectionPolicy {
        VSwitchSelectionPolicy::parse(&self.v_switch_selection_policy)
            .unwrap_or(VSwitchSelectionPolicy::Cheapest)
    }

    /// The alias term's family and version, when the images are chosen by alias (the CRD
    /// admits an alias only as the sole term).
    pub fn alias(&self) -> Option<Alias> {
        self.image_selector_terms
            .iter()
            .find_map(|t| t.alias.as_deref())
            .and_then(Alias::parse)
    }
}

/// A vSwitch the selectors found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VSwitch {
    /// `vsw-…`.
    pub id: String,
    /// The zone it is in (`cn-hangzhou-h`).
    #[serde(rename = "zoneID")]
    pub zone_id: String,
}

/// A security group the selectors found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecurityGroup {
    /// `sg-…`.
    pub id: String,
    /// The group's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// An image the selectors found, and the instance types it boots.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Image {
    /// The image id.
    pub id: String,
    /// The image name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The instance types it boots (architecture, GPU or not).
    #[serde(default)]
    pub requirements: Vec<NodeSelectorRequirement>,
}

/// What the selectors resolved to.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ECSNodeClassStatus {
    /// vSwitches instances may launch into.
    #[serde(default, rename = "vSwitches", skip_serializing_if = "Vec::is_empty")]
    pub v_switches: Vec<VSwitch>,
    /// Security groups instances get.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_groups: Vec<SecurityGroup>,
    /// Images instances may boot.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<Image>,
    /// `Ready` and the [`READY_CONDITIONS`] it summarises.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// The Alibaba Cloud provider's NodeClass.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ECSNodeClass {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// How instances are launched.
    pub spec: ECSNodeClassSpec,
    /// What the selectors resolved to.
    pub status: Option<ECSNodeClassStatus>,
}

karpenter_api::cluster_resource!(
    ECSNodeClass, ECSNodeClassSpec, ECSNodeClassStatus,
    group: "karpenter.k8s.alibabacloud", version: "v1alpha1", plural: "ecsnodeclasses"
);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn class(spec: Value) -> ECSNodeClass {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.k8s.alibabacloud/v1alpha1",
            "kind": "ECSNodeClass",
            "metadata": {"name": "default"},
            "spec": spec,
        }))
        .expect("valid ECSNodeClass")
    }

    #[test]
    fn wire_names_are_upstreams() {
        let c = class(json!({
            "vSwitchSelectorTerms": [{"id": "vsw-1"}],
            "securityGroupSelectorTerms": [{"name": "default"}],
            "imageSelectorTerms": [{"alias": "ContainerOS"}],
            "vSwitchSelectionPolicy": "balanced",
            "resourceGroupId": "rg-abc",
            "dataDiskCategories": ["cloud_essd"],
            "kubeletConfiguration": {"clusterDNS": ["10.0.0.10"], "cpuCFSQuota": false,
                "imageGCHighThresholdPercent": 85, "evictionSoftGracePeriod": {"memory.available": "1m30s"}},
        }));
        assert_eq!(
            c.spec.v_switch_selector_terms[0].id.as_deref(),
            Some("vsw-1")
        );
        assert_eq!(
            c.spec.v_switch_selection_policy(),
            VSwitchSelectionPolicy::Balanced
        );
        assert_eq!(c.spec.resource_group_id.as_deref(), Some("rg-abc"));
        let kubelet = c.spec.kubelet_configuration.as_ref().unwrap();
        assert_eq!(kubelet.cluster_dns, ["10.0.0.10"]);
        assert_eq!(kubelet.cpu_cfs_quota, Some(false));
        assert_eq!(kubelet.image_gc_high_threshold_percent, Some(85));
        assert_eq!(
            kubelet.eviction_soft_grace_period()["memory.available"],
            std::time::Duration::from_secs(90)
        );
        let back = serde_json::to_value(&c).unwrap();
        assert_eq!(back["spec"]["vSwitchSelectorTerms"][0]["id"], "vsw-1");
        assert_eq!(back["spec"]["resourceGroupId"], "rg-abc");
        assert_eq!(
            back["spec"]["kubeletConfiguration"]["clusterDNS"][0],
            "10.0.0.10"
        );
        assert_eq!(back["spec"]["kubeletConfiguration"]["cpuCFSQuota"], false);
        assert_eq!(
            back["spec"]["kubeletConfiguration"]["evictionSoftGracePeriod"]["memory.available"],
            "1m30s",
            "durations stay as written"
        );
        let status: ECSNodeClassStatus = serde_json::from_value(json!({
            "vSwitches": [{"id": "vsw-1", "zoneID": "cn-hangzhou-h"}],
            "securityGroups": [{"id": "sg-1", "name": "default"}],
            "images": [{"id": "m-1", "name": "ContainerOS", "requirements": []}],
        }))
        .unwrap();
        assert_eq!(status.v_switches[0].zone_id, "cn-hangzhou-h");
        let back = serde_json::to_value(&status).unwrap();
        assert_eq!(back["vSwitches"][0]["zoneID"], "cn-hangzhou-h");
        assert_eq!(back["images"][0]["requirements"], json!([]));
    }

    #[test]
    fn helpers_read_upstreams_defaults() {
        let c = class(json!({}));
        assert_eq!(
            c.spec.v_switch_selection_policy(),
            VSwitchSelectionPolicy::Cheapest
        );
        assert_eq!(c.spec.alias(), None);
        assert!(!c.spec.format_data_disk && !c.spec.password_inherit);
        let c = class(json!({"systemDisk": {}, "dataDisks": [{}]}));
        let disk = c.spec.system_disk.as_ref().unwrap();
        assert_eq!(disk.categories, DISK_CATEGORIES);
        assert_eq!(disk.performance_level, "PL0");
        assert_eq!(disk.gib(), 0);
        assert_eq!(c.spec.data_disks[0].volume_size, "20Gi");
        assert_eq!(c.spec.data_disks[0].gib(), 20);
    }

    #[test]
    fn aliases_parse_as_upstream_reads_them() {
        let alias = |s: &str| Alias::parse(s).map(|a| a.to_string());
        assert_eq!(alias("ContainerOS").as_deref(), Some("ContainerOS@latest"));
        assert_eq!(
            alias("AlibabaCloudLinux3@v1").as_deref(),
            Some("AlibabaCloudLinux3@v1")
        );
        assert_eq!(alias("Ubuntu"), None);
        assert_eq!(alias("ContainerOS@a@b"), None);
        let c = class(json!({"imageSelectorTerms": [{"alias": "AlibabaCloudLinux3"}]}));
        assert_eq!(
            c.spec.alias().map(|a| a.family),
            Some(ImageFamily::AlibabaCloudLinux3)
        );
        let c = class(json!({"imageSelectorTerms": [{"id": "m-1"}]}));
        assert_eq!(c.spec.alias(), None);
    }

    #[test]
    fn disk_sizes_in_gib_as_upstream_rounds_them() {
        let disk = |v: Value| serde_json::from_value::<SystemDisk>(v).unwrap().gib();
        assert_eq!(disk(json!({"volumeSize": "60Gi", "size": 40})), 60);
        assert_eq!(disk(json!({"size": 40})), 40);
        assert_eq!(disk(json!({"volumeSize": "1Ti"})), 1024);
        // 60 GB is 55.9 GiB.
        assert_eq!(disk(json!({"volumeSize": "60G"})), 55);
    }
}
