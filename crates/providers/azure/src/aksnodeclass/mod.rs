//! `karpenter.azure.com/v1beta1` AKSNodeClass: how the Azure provider launches AKS nodes —
//! subnet, image family, OS disk, kubelet and kernel settings, LocalDNS, security and tags.
//! Field for field as upstream's, so existing manifests apply unchanged.
//!
//! The CRD also serves the deprecated `v1alpha2`, as upstream's does: the same schema under an
//! older name, stored as v1beta1 (the API server converts by rewriting `apiVersion`, there is
//! no conversion webhook). Karpenter reads and writes v1beta1 only; [`conversion`] turns
//! v1alpha2 manifests into v1beta1 for `karpenter-rs convert`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NodeSelectorRequirement;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use karpenter_api::Duration;
use karpenter_api::crd::{Crd, READY_COLUMN_PATH, ServedVersion};
use karpenter_api::validation::{Problem, ProblemKind};

pub mod conversion;
mod hash;
mod schema;

pub use hash::{
    AKS_MACHINE_RESOURCE_ID_ANNOTATION, AKS_NODE_CLASS_HASH_ANNOTATION,
    AKS_NODE_CLASS_HASH_VERSION, AKS_NODE_CLASS_HASH_VERSION_ANNOTATION,
};

pub use crate::GROUP;
/// The version served and stored, and the one karpenter reads and writes.
pub const VERSION: &str = "v1beta1";
/// The older version still served (not stored), deprecated, with the same schema.
pub const DEPRECATED_VERSION: &str = "v1alpha2";

/// `aksnodeclasses.karpenter.azure.com`: v1beta1 served and stored, v1alpha2 served and
/// deprecated.
pub const CRD: Crd = Crd::new(
    GROUP,
    VERSION,
    "AKSNodeClass",
    "aksnodeclasses",
    schema::schema,
)
.with_short_names(&["aksnc", "aksncs"])
.with_printer_columns(printer_columns)
.with_runtime_checks(runtime_checks)
.with_served_versions(&[ServedVersion::new(DEPRECATED_VERSION)
    .deprecated_with_warning("use v1beta1.AKSNodeClass instead")]);

fn printer_columns() -> Value {
    serde_json::json!([
        {"jsonPath": READY_COLUMN_PATH, "name": "Ready", "type": "string"},
        {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"},
        {"jsonPath": ".spec.imageFamily", "name": "ImageFamily", "priority": 1, "type": "string"},
    ])
}

/// Upstream runs no checks beyond the CRD's. `cpuCFSQuotaPeriod` has no pattern there (it is a
/// Go duration the controller parses), so one that does not parse is stored but unusable;
/// otherwise reading the object as the type catches a schema and type that disagree.
fn runtime_checks(object: &Value, problems: &mut Vec<Problem>) {
    if let Some(period) = object
        .pointer("/spec/kubelet/cpuCFSQuotaPeriod")
        .and_then(Value::as_str)
        && let Err(e) = period.parse::<Duration>()
    {
        problems.push(Problem {
            path: "spec.kubelet.cpuCFSQuotaPeriod".into(),
            message: e.to_string(),
            kind: ProblemKind::NotReady,
        });
        return;
    }
    karpenter_api::validation::typed::<AKSNodeClass>(object, problems, |_, _| {});
}

/// The CRD's defaults, shared by the schema and the types' serde defaults so they cannot
/// disagree.
mod defaults {
    pub const IMAGE_FAMILY: &str = "Ubuntu";
    pub const OS_DISK_SIZE_GB: i32 = 128;
    pub const GPU_MODE: &str = "Driver";
    pub const NONE: &str = "none";
    pub const CPU_CFS_QUOTA_PERIOD: &str = "100ms";
    pub const CONTAINER_LOG_MAX_SIZE: &str = "50Mi";
    pub const CONTAINER_LOG_MAX_FILES: i32 = 5;

    pub fn image_family() -> String {
        IMAGE_FAMILY.into()
    }
    pub fn os_disk_size_gb() -> i32 {
        OS_DISK_SIZE_GB
    }
    pub fn gpu_mode() -> String {
        GPU_MODE.into()
    }
    pub fn none() -> String {
        NONE.into()
    }
    pub fn yes() -> bool {
        true
    }
    pub fn cpu_cfs_quota_period() -> karpenter_api::Duration {
        CPU_CFS_QUOTA_PERIOD
            .parse()
            .expect("the default period is a duration")
    }
    pub fn container_log_max_size() -> String {
        CONTAINER_LOG_MAX_SIZE.into()
    }
    pub fn container_log_max_files() -> i32 {
        CONTAINER_LOG_MAX_FILES
    }
}

/// The node image family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ImageFamily {
    /// Ubuntu, the version AKS picks for the Kubernetes version (the default).
    Ubuntu,
    /// Ubuntu 22.04.
    Ubuntu2204,
    /// Ubuntu 24.04.
    Ubuntu2404,
    /// Azure Linux.
    AzureLinux,
}

impl ImageFamily {
    /// Every family, in the CRD's order.
    pub const ALL: [Self; 4] = [
        Self::Ubuntu,
        Self::Ubuntu2204,
        Self::Ubuntu2404,
        Self::AzureLinux,
    ];

    /// Parses the `imageFamily` spelling.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.as_str() == s)
    }

    /// The `imageFamily` spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ubuntu => "Ubuntu",
            Self::Ubuntu2204 => "Ubuntu2204",
            Self::Ubuntu2404 => "Ubuntu2404",
            Self::AzureLinux => "AzureLinux",
        }
    }
}

/// Kubelet settings, the subset AKS exposes. Unset fields take the CRD's defaults when the
/// `kubelet` block is present.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeletConfiguration {
    /// `none` or `static`.
    #[serde(default = "defaults::none")]
    pub cpu_manager_policy: String,
    /// Whether CPU limits are enforced with CFS quota.
    #[serde(default = "defaults::yes", rename = "cpuCFSQuota")]
    pub cpu_cfs_quota: bool,
    /// The CFS quota period.
    #[serde(
        default = "defaults::cpu_cfs_quota_period",
        rename = "cpuCFSQuotaPeriod"
    )]
    pub cpu_cfs_quota_period: Duration,
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
    /// `restricted`, `best-effort`, `none` or `single-numa-node`.
    #[serde(default = "defaults::none")]
    pub topology_manager_policy: String,
    /// Unsafe sysctls (or `prefix*` patterns) pods may set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_unsafe_sysctls: Vec<String>,
    /// How large a container log grows before rotation (`50Mi`).
    #[serde(default = "defaults::container_log_max_size")]
    pub container_log_max_size: String,
    /// How many log files a container keeps.
    #[serde(default = "defaults::container_log_max_files")]
    pub container_log_max_files: i32,
    /// The most PIDs a pod may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_pids_limit: Option<i64>,
    /// Whether the kubelet refuses to start with swap on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_swap_on: Option<bool>,
}

impl Default for KubeletConfiguration {
    fn default() -> Self {
        Self {
            cpu_manager_policy: defaults::none(),
            cpu_cfs_quota: true,
            cpu_cfs_quota_period: defaults::cpu_cfs_quota_period(),
            image_gc_high_threshold_percent: None,
            image_gc_low_threshold_percent: None,
            topology_manager_policy: defaults::none(),
            allowed_unsafe_sysctls: Vec::new(),
            container_log_max_size: defaults::container_log_max_size(),
            container_log_max_files: defaults::CONTAINER_LOG_MAX_FILES,
            pod_pids_limit: None,
            fail_swap_on: None,
        }
    }
}

/// Trusted Launch: Secure Boot and the virtual TPM.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrustedLaunch {
    /// Whether the virtual TPM is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vtpm: Option<bool>,
    /// Whether Secure Boot is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secure_boot: Option<bool>,
}

/// Security settings of the nodes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Security {
    /// Whether the host encrypts the node's disks and caches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption_at_host: Option<bool>,
    /// Trusted Launch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trusted_launch: Option<TrustedLaunch>,
}

/// How LocalDNS answers for one zone; every field is required.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalDnsZoneOverride {
    /// The zone (`.`, `cluster.local`).
    pub zone: String,
    /// `Error` or `Log`.
    pub query_logging: String,
    /// `PreferUDP` or `ForceTCP`.
    pub protocol: String,
    /// `ClusterCoreDNS` or `VnetDNS`.
    pub forward_destination: String,
    /// `Sequential`, `RoundRobin` or `Random`.
    pub forward_policy: String,
    /// The most queries in flight.
    pub max_concurrent: i32,
    /// The longest time an answer is cached.
    pub cache_duration: Duration,
    /// How long stale answers may be served.
    pub serve_stale_duration: Duration,
    /// `Verify`, `Immediate` or `Disable`.
    pub serve_stale: String,
}

/// The node-local DNS cache.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalDns {
    /// `Preferred` (the provider decides), `Required` or `Disabled`.
    pub mode: String,
    /// Overrides for pods with `dnsPolicy: Default` and the kubelet.
    #[serde(rename = "vnetDNSOverrides")]
    pub vnet_dns_overrides: Vec<LocalDnsZoneOverride>,
    /// Overrides for pods with `dnsPolicy: ClusterFirst`.
    #[serde(rename = "kubeDNSOverrides")]
    pub kube_dns_overrides: Vec<LocalDnsZoneOverride>,
}

/// GPU nodes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gpu {
    /// `Driver` (AKS installs the driver) or `None` (a GPU operator does).
    #[serde(default = "defaults::gpu_mode")]
    pub mode: String,
}

impl Default for Gpu {
    fn default() -> Self {
        Self {
            mode: defaults::gpu_mode(),
        }
    }
}

/// Artifact streaming: container images pulled on demand.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactStreaming {
    /// Whether it is on; off when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// Kernel settings AKS lets a node set; each maps to the sysctl its name spells.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(missing_docs)] // each field is the sysctl its name spells (fsAioMaxNr: fs.aio-max-nr)
pub struct SysctlConfiguration {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_aio_max_nr: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_file_max: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_inotify_max_user_watches: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_nr_open: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_threads_max: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_core_netdev_max_backlog: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_core_optmem_max: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_core_rmem_default: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_core_rmem_max: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_core_somaxconn: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_core_wmem_default: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_core_wmem_max: Option<i32>,
    /// `"FIRST LAST"`.
    #[serde(
        default,
        rename = "netIPv4IPLocalPortRange",
        skip_serializing_if = "Option::is_none"
    )]
    pub net_ipv4_ip_local_port_range: Option<String>,
    #[serde(
        default,
        rename = "netIPv4NeighDefaultGcThresh1",
        skip_serializing_if = "Option::is_none"
    )]
    pub net_ipv4_neigh_default_gc_thresh1: Option<i32>,
    #[serde(
        default,
        rename = "netIPv4NeighDefaultGcThresh2",
        skip_serializing_if = "Option::is_none"
    )]
    pub net_ipv4_neigh_default_gc_thresh2: Option<i32>,
    #[serde(
        default,
        rename = "netIPv4NeighDefaultGcThresh3",
        skip_serializing_if = "Option::is_none"
    )]
    pub net_ipv4_neigh_default_gc_thresh3: Option<i32>,
    #[serde(
        default,
        rename = "netIPv4TCPFinTimeout",
        skip_serializing_if = "Option::is_none"
    )]
    pub net_ipv4_tcp_fin_timeout: Option<i32>,
    #[serde(
        default,
        rename = "netIPv4TCPKeepaliveProbes",
        skip_serializing_if = "Option::is_none"
    )]
    pub net_ipv4_tcp_keepalive_probes: Option<i32>,
    #[serde(
        default,
        rename = "netIPv4TCPKeepaliveTime",
        skip_serializing_if = "Option::is_none"
    )]
    pub net_ipv4_tcp_keepalive_time: Option<i32>,
    #[serde(
        default,
        rename = "netIPv4TCPMaxSynBacklog",
        skip_serializing_if = "Option::is_none"
    )]
    pub net_ipv4_tcp_max_syn_backlog: Option<i32>,
    #[serde(
        default,
        rename = "netIPv4TCPMaxTwBuckets",
        skip_serializing_if = "Option::is_none"
    )]
    pub net_ipv4_tcp_max_tw_buckets: Option<i32>,
    #[serde(
        default,
        rename = "netIPv4TCPTwReuse",
        skip_serializing_if = "Option::is_none"
    )]
    pub net_ipv4_tcp_tw_reuse: Option<bool>,
    #[serde(
        default,
        rename = "netIPv4TCPKeepaliveIntvl",
        skip_serializing_if = "Option::is_none"
    )]
    pub net_ipv4_tcp_keepalive_intvl: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_netfilter_nf_conntrack_buckets: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_netfilter_nf_conntrack_max: Option<i32>,
    #[serde(
        default,
        rename = "vmMaxMapCount",
        skip_serializing_if = "Option::is_none"
    )]
    pub vm_max_map_count: Option<i32>,
    #[serde(
        default,
        rename = "vmSwappiness",
        skip_serializing_if = "Option::is_none"
    )]
    pub vm_swappiness: Option<i32>,
    #[serde(
        default,
        rename = "vmVfsCachePressure",
        skip_serializing_if = "Option::is_none"
    )]
    pub vm_vfs_cache_pressure: Option<i32>,
}

/// Linux settings of the nodes (AKS's custom node configuration).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LinuxOsConfiguration {
    /// The size of a swap file each node gets (`1500Mi`); needs `kubelet.failSwapOn: false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap_file_size: Option<String>,
    /// Kernel settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sysctls: Option<SysctlConfiguration>,
    /// `always`, `defer`, `defer+madvise`, `madvise` or `never`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transparent_huge_page_defrag: Option<String>,
    /// `always`, `madvise` or `never`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transparent_huge_page_enabled: Option<String>,
}

/// How nodes are launched.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AKSNodeClassSpec {
    /// The subnet of the nodes' NICs (an ARM id); unset, the controller's `--vnet-subnet-id`.
    #[serde(
        default,
        rename = "vnetSubnetID",
        skip_serializing_if = "Option::is_none"
    )]
    pub vnet_subnet_id: Option<String>,
    /// The OS disk's size in GB.
    #[serde(default = "defaults::os_disk_size_gb", rename = "osDiskSizeGB")]
    pub os_disk_size_gb: i32,
    /// `Ubuntu`, `Ubuntu2204`, `Ubuntu2404` or `AzureLinux`; see [`Self::image_family`].
    #[serde(default = "defaults::image_family")]
    pub image_family: String,
    /// `FIPS` or `Disabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fips_mode: Option<String>,
    /// Tags on the nodes' Azure resources. Not hashed: they are updated in place.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// Kubelet settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<KubeletConfiguration>,
    /// The most pods a node runs; unset, it depends on the network plugin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pods: Option<i32>,
    /// Security settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security: Option<Security>,
    /// The node-local DNS cache.
    #[serde(default, rename = "localDNS", skip_serializing_if = "Option::is_none")]
    pub local_dns: Option<LocalDns>,
    /// GPU nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<Gpu>,
    /// Artifact streaming.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_streaming: Option<ArtifactStreaming>,
    /// Linux settings.
    #[serde(
        default,
        rename = "linuxOSConfig",
        skip_serializing_if = "Option::is_none"
    )]
    pub linux_os_config: Option<LinuxOsConfiguration>,
}

impl Default for AKSNodeClassSpec {
    fn default() -> Self {
        Self {
            vnet_subnet_id: None,
            os_disk_size_gb: defaults::OS_DISK_SIZE_GB,
            image_family: defaults::image_family(),
            fips_mode: None,
            tags: BTreeMap::new(),
            kubelet: None,
            max_pods: None,
            security: None,
            local_dns: None,
            gpu: None,
            artifact_streaming: None,
            linux_os_config: None,
        }
    }
}

impl AKSNodeClassSpec {
    /// The image family; Ubuntu for a spelling the CRD would not have admitted.
    pub fn image_family(&self) -> ImageFamily {
        ImageFamily::parse(&self.image_family).unwrap_or(ImageFamily::Ubuntu)
    }

    /// Whether Trusted Launch is on: either Secure Boot or the virtual TPM.
    pub fn trusted_launch(&self) -> bool {
        let tl = self
            .security
            .as_ref()
            .and_then(|s| s.trusted_launch.as_ref());
        tl.is_some_and(|t| t.vtpm == Some(true) || t.secure_boot == Some(true))
    }

    /// Whether nodes boot FIPS images (`fipsMode: FIPS`).
    pub fn fips(&self) -> bool {
        self.fips_mode.as_deref() == Some("FIPS")
    }

    /// Whether artifact streaming is explicitly enabled.
    pub fn artifact_streaming_enabled(&self) -> bool {
        self.artifact_streaming
            .as_ref()
            .and_then(|a| a.enabled)
            .unwrap_or(false)
    }

    /// Whether AKS installs the GPU driver on GPU nodes (the default).
    pub fn gpu_driver_installed(&self) -> bool {
        self.gpu.as_ref().is_none_or(|g| g.mode != "None")
    }
}

/// An image nodes may boot, and the instance types it boots.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeImage {
    /// The image's gallery id (`/CommunityGalleries/…/versions/…` or an ARM id).
    pub id: String,
    /// The instance types it boots.
    pub requirements: Vec<NodeSelectorRequirement>,
}

/// What the AKSNodeClass resolved to.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AKSNodeClassStatus {
    /// Images nodes may boot.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<NodeImage>,
    /// The Kubernetes version nodes get.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
    /// `Ready`, `ImagesReady`, `KubernetesVersionReady`, `SubnetsReady`,
    /// `ValidationSucceeded`, `LocalDNSReady`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// `Enabled` or `Disabled`: what LocalDNS mode `Preferred` resolved to.
    #[serde(
        default,
        rename = "localDNSState",
        skip_serializing_if = "Option::is_none"
    )]
    pub local_dns_state: Option<String>,
}

/// The Azure provider's NodeClass.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AKSNodeClass {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// How nodes are launched.
    pub spec: AKSNodeClassSpec,
    /// What it resolved to.
    pub status: Option<AKSNodeClassStatus>,
}

karpenter_api::cluster_resource!(
    AKSNodeClass, AKSNodeClassSpec, AKSNodeClassStatus,
    group: "karpenter.azure.com", version: "v1beta1", plural: "aksnodeclasses"
);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn class(spec: Value) -> AKSNodeClass {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.azure.com/v1beta1",
            "kind": "AKSNodeClass",
            "metadata": {"name": "default"},
            "spec": spec,
        }))
        .expect("valid AKSNodeClass")
    }

    #[test]
    fn wire_names_are_upstreams() {
        let c = class(json!({
            "vnetSubnetID": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/n",
            "osDiskSizeGB": 64,
            "kubelet": {"cpuCFSQuota": false, "imageGCHighThresholdPercent": 90},
            "localDNS": {"mode": "Disabled", "vnetDNSOverrides": [], "kubeDNSOverrides": []},
            "linuxOSConfig": {"sysctls": {"netIPv4TCPTwReuse": true, "vmMaxMapCount": 65530}},
        }));
        assert!(c.spec.vnet_subnet_id.is_some());
        assert_eq!(c.spec.os_disk_size_gb, 64);
        let kubelet = c.spec.kubelet.as_ref().unwrap();
        assert!(!kubelet.cpu_cfs_quota);
        assert_eq!(kubelet.image_gc_high_threshold_percent, Some(90));
        assert_eq!(kubelet.container_log_max_files, 5, "unset fields default");
        let sysctls = c.spec.linux_os_config.as_ref().unwrap().sysctls.as_ref();
        assert_eq!(sysctls.unwrap().net_ipv4_tcp_tw_reuse, Some(true));
        let back = serde_json::to_value(&c).unwrap();
        assert_eq!(back["spec"]["kubelet"]["cpuCFSQuotaPeriod"], "100ms");
        assert_eq!(
            back["spec"]["linuxOSConfig"]["sysctls"]["vmMaxMapCount"],
            65530
        );
        assert_eq!(back["spec"]["localDNS"]["mode"], "Disabled");
    }

    #[test]
    fn helpers_read_upstreams_defaults() {
        let c = class(json!({}));
        assert_eq!(c.spec.image_family(), ImageFamily::Ubuntu);
        assert_eq!(c.spec.os_disk_size_gb, 128);
        assert!(!c.spec.trusted_launch());
        assert!(c.spec.gpu_driver_installed());
        let c = class(json!({"imageFamily": "AzureLinux", "gpu": {"mode": "None"},
            "security": {"trustedLaunch": {"secureBoot": true}}}));
        assert_eq!(c.spec.image_family(), ImageFamily::AzureLinux);
        assert!(c.spec.trusted_launch());
        assert!(!c.spec.gpu_driver_installed());
    }
}
