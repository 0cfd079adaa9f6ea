//! What the cloud-init templates see, with upstream's field names so existing templates
//! render unchanged (`pkg/providers/instance/cloudinit/types.go`,
//! `pkg/providers/instance/types.go`, filled in `generateCloudInitVars`):
//!
//! * `user-data` gets [`UserDataValues`]: `.Metadata`, `.Network`, `.Resources`,
//!   `.Kubernetes`, `.Values`;
//! * `meta-data` and `vendor-data` get [`MetaData`] itself (`.Hostname`, `.InstanceID`, …);
//! * `network-config` gets [`NetworkConfig`] itself (`.Interfaces`, `.NameServers`, …).
//!
//! Each type converts into the template [`Value`] (`Value::from(&values)`), which also
//! carries the YAML keys upstream's `toYaml` prints (`instanceid`, `hugepages2Mi`,
//! `registerWithTaints`).

mod kubelet;
mod network;

use std::collections::BTreeMap;

use gtmpl::Value;
use karpenter_core::resources::Resources as Capacity;

use super::template::GoStruct;

pub use kubelet::{DEFAULT_EVICTION_HARD, KubeletConfiguration, KubernetesTaint, go_duration};
pub use network::{InterfaceConfig, NetworkConfig, NodeInterface};

/// The provider ID of VM `vmid` in region (Proxmox cluster) `region`: `proxmox://<region>/<vmid>`,
/// upstream's `GetProviderID`.
pub fn provider_id(region: &str, vmid: u32) -> String {
    crate::provider_id::format(region, vmid)
}

/// The instance (upstream's `MetaData`): `.Hostname`, `.InstanceID`, `.InstanceUUID`,
/// `.InstanceType`, `.ProviderID`, `.Region`, `.Zone`, `.Tags`, `.NodeClass`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetaData {
    /// The NodeClaim's name, which becomes the node's.
    pub hostname: String,
    /// The VM ID, in decimal.
    pub instance_id: String,
    /// The VM's SMBIOS UUID (`smbios1: uuid=…`).
    pub instance_uuid: String,
    /// The instance type's name.
    pub instance_type: String,
    /// `proxmox://<region>/<vmid>` ([`provider_id`]).
    pub provider_id: String,
    /// The Proxmox cluster's region name.
    pub region: String,
    /// The Proxmox node the VM runs on.
    pub zone: String,
    /// The NodeClass's tags.
    pub tags: Vec<String>,
    /// The NodeClass's name.
    pub node_class: String,
}

/// The machine's size (upstream's `Resources`): `.CPU`, `.Memory` (bytes), `.Hugepages1Gi`
/// and `.Hugepages2Mi` (page counts).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    /// vCPUs.
    pub cpu: i64,
    /// Memory, bytes.
    pub memory: i64,
    /// 1 GiB huge pages.
    pub hugepages_1gi: i64,
    /// 2 MiB huge pages.
    pub hugepages_2mi: i64,
}

impl Resources {
    /// The resources of an instance type's capacity: whole CPUs and bytes rounded up as Go's
    /// `Quantity.Value()`, huge pages counted from `hugepages-1Gi`/`hugepages-2Mi`.
    pub fn from_capacity(capacity: &Capacity) -> Self {
        let whole = |milli: i64| milli.div_euclid(1000) + i64::from(milli.rem_euclid(1000) != 0);
        Self {
            cpu: whole(capacity.cpu),
            memory: whole(capacity.memory),
            hugepages_1gi: whole(capacity.get("hugepages-1Gi")) / (1 << 30),
            hugepages_2mi: whole(capacity.get("hugepages-2Mi")) / (2 << 20),
        }
    }
}

/// The cluster the node joins (upstream's `Kubernetes`): `.Version`, `.RootCA`,
/// `.BootstrapToken`, `.KubeletConfiguration`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Kubernetes {
    /// The API server's version (`v1.33.4`).
    pub version: String,
    /// The cluster's CA bundle (`kube-root-ca.crt`'s `ca.crt`), PEM.
    pub root_ca: String,
    /// The bootstrap token, `<id>.<secret>` ([`crate::cloudinit::bootstrap`]).
    pub bootstrap_token: String,
    /// The kubelet settings.
    pub kubelet_configuration: KubeletConfiguration,
}

/// Everything `user-data` sees (upstream's `UserDataValues`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserDataValues {
    /// `.Metadata`.
    pub metadata: MetaData,
    /// `.Network`.
    pub network: NetworkConfig,
    /// `.Resources`.
    pub resources: Resources,
    /// `.Kubernetes`.
    pub kubernetes: Kubernetes,
    /// `.Values`: the NodeClass's values Secret (`metadataOptions.valuesRef`), key by key.
    pub values: BTreeMap<String, String>,
}

/// A `[]string` as a template value.
fn strings(list: &[String]) -> Value {
    Value::Array(list.iter().map(Value::from).collect())
}

impl From<&MetaData> for Value {
    fn from(m: &MetaData) -> Self {
        GoStruct::new()
            .field("Hostname", m.hostname.as_str())
            .field("InstanceID", m.instance_id.as_str())
            .field("InstanceUUID", m.instance_uuid.as_str())
            .field("InstanceType", m.instance_type.as_str())
            .field("ProviderID", m.provider_id.as_str())
            .field("Region", m.region.as_str())
            .field("Zone", m.zone.as_str())
            .collection("Tags", strings(&m.tags))
            .field("NodeClass", m.node_class.as_str())
            .build()
    }
}

impl From<&Resources> for Value {
    fn from(r: &Resources) -> Self {
        GoStruct::new()
            .omitempty("CPU", "cpu", r.cpu)
            .omitempty("Memory", "memory", r.memory)
            .omitempty("Hugepages1Gi", "hugepages1Gi", r.hugepages_1gi)
            .omitempty("Hugepages2Mi", "hugepages2Mi", r.hugepages_2mi)
            .build()
    }
}

impl From<&Kubernetes> for Value {
    fn from(k: &Kubernetes) -> Self {
        GoStruct::new()
            .field("Version", k.version.as_str())
            .field("RootCA", k.root_ca.as_str())
            .field("BootstrapToken", k.bootstrap_token.as_str())
            .field(
                "KubeletConfiguration",
                Value::from(&k.kubelet_configuration),
            )
            .build()
    }
}

/// A `map[string]string` as a template value.
fn string_map(map: &BTreeMap<String, String>) -> Value {
    Value::Map(
        map.iter()
            .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
            .collect(),
    )
}

impl From<&UserDataValues> for Value {
    fn from(v: &UserDataValues) -> Self {
        GoStruct::new()
            .field("Metadata", Value::from(&v.metadata))
            .field("Network", Value::from(&v.network))
            .field("Resources", Value::from(&v.resources))
            .field("Kubernetes", Value::from(&v.kubernetes))
            .collection("Values", string_map(&v.values))
            .build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_round_up_and_count_huge_pages() {
        let capacity = Capacity::parse(&[
            ("cpu", "1500m"),
            ("memory", "6Gi"),
            ("hugepages-1Gi", "2Gi"),
            ("hugepages-2Mi", "2Gi"),
        ]);
        assert_eq!(
            Resources::from_capacity(&capacity),
            Resources {
                cpu: 2,
                memory: 6 << 30,
                hugepages_1gi: 2,
                hugepages_2mi: 1024,
            }
        );
        assert_eq!(provider_id("region-1", 100), "proxmox://region-1/100");
    }
}
