//! `karpenter.k8s.aws/v1` EC2NodeClass: how the AWS provider launches instances — which
//! subnets, security groups and AMIs, the IAM role, user data, disks, metadata options and
//! kubelet settings. Field for field as upstream, so existing manifests apply unchanged.
//!
//! The types live here, beside the core API, so `karpenter-rs validate` and the CRD generator
//! judge them with the same machinery; the provider (`karpenter-aws`) re-exports them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NodeSelectorRequirement;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use karpenter_api::crd::{Crd, READY_COLUMN_PATH};
use karpenter_api::hash::json_hash;

pub mod conversion;
mod schema;

/// The API group of EC2NodeClass.
pub const GROUP: &str = "karpenter.k8s.aws";

/// `ec2nodeclasses.karpenter.k8s.aws`.
pub const CRD: Crd = Crd::new(
    GROUP,
    "v1",
    "EC2NodeClass",
    "ec2nodeclasses",
    schema::schema,
)
.with_short_names(&["ec2nc", "ec2ncs"])
.with_printer_columns(printer_columns)
.with_runtime_checks(runtime_checks);

fn printer_columns() -> Value {
    serde_json::json!([
        {"jsonPath": READY_COLUMN_PATH, "name": "Ready", "type": "string"},
        {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"},
        {"jsonPath": ".spec.role", "name": "Role", "priority": 1, "type": "string"},
    ])
}

/// Upstream runs no checks beyond the CRD's; reading the object as the type catches a schema
/// and type that disagree.
fn runtime_checks(object: &Value, problems: &mut Vec<karpenter_api::validation::Problem>) {
    karpenter_api::validation::typed::<EC2NodeClass>(object, problems, |_, _| {});
}
/// The annotation carrying the hash of the EC2NodeClass a NodeClaim was launched from.
pub const EC2_NODE_CLASS_HASH_ANNOTATION: &str = "karpenter.k8s.aws/ec2nodeclass-hash";
/// The hash algorithm's version, beside the hash.
pub const EC2_NODE_CLASS_HASH_VERSION_ANNOTATION: &str =
    "karpenter.k8s.aws/ec2nodeclass-hash-version";
/// This implementation's hash version (upstream's is `v6`; see `karpenter_api::hash` for why a
/// different version re-stamps instead of drifting).
pub const EC2_NODE_CLASS_HASH_VERSION: &str = "rs-v1";

/// A subnet selector: by id, or by tags (all must match).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubnetSelectorTerm {
    /// Tags the subnet must carry; `"*"` as a value matches any value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// The subnet id, `subnet-…`.
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
    /// The group name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// An AMI selector: an alias (`al2023@latest`), an id, an SSM parameter, or name/owner/tags.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AmiSelectorTerm {
    /// `family@version`: the EKS-optimized AMI of a family (`al2023@latest`,
    /// `bottlerocket@v1.20.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    /// Tags the image must carry.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// The image id, `ami-…`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The image name; `*` wildcards allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The owning account id or alias (`self`, `amazon`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// An SSM parameter holding the image id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssm_parameter: Option<String>,
}

/// A capacity reservation selector.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CapacityReservationSelectorTerm {
    /// Tags the reservation must carry.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// The reservation id, `cr-…`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The owning account.
    #[serde(default, rename = "ownerID", skip_serializing_if = "Option::is_none")]
    pub owner_id: Option<String>,
    /// `open` or `targeted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_match_criteria: Option<String>,
}

/// The placement group instances launch into.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacementGroupSelector {
    /// The group name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The group id, `pg-…`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// An EBS volume.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockDevice {
    /// Whether the volume goes with the instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_on_termination: Option<bool>,
    /// Whether the volume is encrypted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<bool>,
    /// Provisioned IOPS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops: Option<i64>,
    /// The KMS key encrypting the volume.
    #[serde(default, rename = "kmsKeyID", skip_serializing_if = "Option::is_none")]
    pub kms_key_id: Option<String>,
    /// The snapshot the volume starts from.
    #[serde(
        default,
        rename = "snapshotID",
        skip_serializing_if = "Option::is_none"
    )]
    pub snapshot_id: Option<String>,
    /// Throughput in MiB/s (gp3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<i64>,
    /// How fast a snapshot is restored, MiB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_initialization_rate: Option<i32>,
    /// The size, as a quantity (`20Gi`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_size: Option<String>,
    /// `gp3`, `gp2`, `io1`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_type: Option<String>,
}

/// A disk attached at launch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockDeviceMapping {
    /// The device name (`/dev/xvda`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    /// The volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ebs: Option<BlockDevice>,
    /// Whether this is the root volume, whose size becomes the node's ephemeral storage.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub root_volume: bool,
}

/// A network interface attached at launch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkInterface {
    /// The network card.
    pub network_card_index: i32,
    /// The device index on that card.
    pub device_index: i32,
    /// `interface` or `efa-only`.
    pub interface_type: String,
}

/// The instance metadata service's settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetadataOptions {
    /// `enabled` or `disabled`.
    #[serde(default = "enabled")]
    pub http_endpoint: String,
    /// `enabled` or `disabled`.
    #[serde(default = "disabled", rename = "httpProtocolIPv6")]
    pub http_protocol_ipv6: String,
    /// How many network hops a metadata response may travel; 1 keeps it from pods.
    #[serde(default = "one")]
    pub http_put_response_hop_limit: i64,
    /// `required` (IMDSv2 only) or `optional`.
    #[serde(default = "required")]
    pub http_tokens: String,
}

fn enabled() -> String {
    "enabled".into()
}
fn disabled() -> String {
    "disabled".into()
}
fn required() -> String {
    "required".into()
}
fn one() -> i64 {
    1
}

impl Default for MetadataOptions {
    fn default() -> Self {
        Self {
            http_endpoint: enabled(),
            http_protocol_ipv6: disabled(),
            http_put_response_hop_limit: one(),
            http_tokens: required(),
        }
    }
}

/// Connection tracking timeouts of the primary interface, in seconds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionTracking {
    /// Established TCP connections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_established_timeout: Option<i32>,
    /// UDP flows seen in both directions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_stream_timeout: Option<i32>,
    /// UDP flows seen in one direction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_timeout: Option<i32>,
}

/// CPU options.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CpuOptions {
    /// `enabled` or `disabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested_virtualization: Option<String>,
}

/// How instances are launched.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EC2NodeClassSpec {
    /// Which subnets instances launch into; a subnet matching any term is used.
    #[serde(default)]
    pub subnet_selector_terms: Vec<SubnetSelectorTerm>,
    /// Which security groups instances get.
    #[serde(default)]
    pub security_group_selector_terms: Vec<SecurityGroupSelectorTerm>,
    /// Which capacity reservations may be used.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity_reservation_selector_terms: Vec<CapacityReservationSelectorTerm>,
    /// The placement group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_group_selector: Option<PlacementGroupSelector>,
    /// Whether instances get a public IPv4 address (the subnet decides when unset).
    #[serde(
        default,
        rename = "associatePublicIPAddress",
        skip_serializing_if = "Option::is_none"
    )]
    pub associate_public_ip_address: Option<bool>,
    /// How many IPv4 prefixes the primary interface gets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_prefix_count: Option<i32>,
    /// Which AMIs instances boot.
    #[serde(default)]
    pub ami_selector_terms: Vec<AmiSelectorTerm>,
    /// The bootstrap format when no alias says it: `AL2`, `AL2023`, `Bottlerocket`, `Custom`,
    /// `Windows2019`, `Windows2022`, `Windows2025`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ami_family: Option<String>,
    /// User data merged with what the AMI family generates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    /// The IAM role; the provider manages an instance profile for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// An existing instance profile, instead of `role`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    /// Tags on instances, volumes and launch templates.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// Kubelet configuration: any `KubeletConfiguration` key (`maxPods`, `kubeReserved`,
    /// `evictionHard`, …), passed to the node's bootstrap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<Map<String, Value>>,
    /// Disks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub block_device_mappings: Vec<BlockDeviceMapping>,
    /// `RAID0`: use the instance store for the kubelet and container runtime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_store_policy: Option<String>,
    /// Network interfaces (EFA).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network_interfaces: Vec<NetworkInterface>,
    /// One-minute CloudWatch metrics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detailed_monitoring: Option<bool>,
    /// The instance metadata service (upstream's defaults when unset: IMDSv2 only, one hop).
    #[serde(default)]
    pub metadata_options: MetadataOptions,
    /// Connection tracking timeouts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_tracking: Option<ConnectionTracking>,
    /// The CreateFleet context (reserved capacity pools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// CPU options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_options: Option<CpuOptions>,
}

/// A subnet the selectors found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subnet {
    /// `subnet-…`.
    pub id: String,
    /// The availability zone.
    pub zone: String,
    /// The zone's id (`use1-az2`).
    #[serde(default, rename = "zoneID", skip_serializing_if = "Option::is_none")]
    pub zone_id: Option<String>,
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

/// An AMI the selectors found, and the instance types it can boot.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Ami {
    /// `ami-…`.
    pub id: String,
    /// The image name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Whether the image is deprecated (used only when nothing else matches).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deprecated: bool,
    /// The instance types it boots (architecture, GPU or not).
    #[serde(default)]
    pub requirements: Vec<NodeSelectorRequirement>,
}

/// A capacity reservation the selectors found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CapacityReservation {
    /// The zone it is in.
    pub availability_zone: String,
    /// When it ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<Time>,
    /// `cr-…`.
    pub id: String,
    /// `open` or `targeted`.
    pub instance_match_criteria: String,
    /// The instance type it holds.
    pub instance_type: String,
    /// Whether the owner may reclaim it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interruptible: bool,
    /// The owning account.
    #[serde(rename = "ownerID")]
    pub owner_id: String,
    /// `default` or `capacity-block`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_type: Option<String>,
    /// `active` or `expiring`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

/// What the selectors resolved to.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EC2NodeClassStatus {
    /// Subnets instances may launch into.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subnets: Vec<Subnet>,
    /// Security groups instances get.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_groups: Vec<SecurityGroup>,
    /// Capacity reservations that may be used.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity_reservations: Vec<CapacityReservation>,
    /// AMIs instances may boot.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub amis: Vec<Ami>,
    /// The instance profile instances get.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    /// `Ready`, `SubnetsReady`, `SecurityGroupsReady`, `AMIsReady`, `InstanceProfileReady`, …
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// The AWS provider's NodeClass.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EC2NodeClass {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// How instances are launched.
    pub spec: EC2NodeClassSpec,
    /// What the selectors resolved to.
    pub status: Option<EC2NodeClassStatus>,
}

karpenter_api::cluster_resource!(
    EC2NodeClass, EC2NodeClassSpec, EC2NodeClassStatus,
    group: "karpenter.k8s.aws", version: "v1", plural: "ec2nodeclasses"
);

/// The bootstrap format of an AMI family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AmiFamily {
    /// Amazon Linux 2: `/etc/eks/bootstrap.sh`.
    AL2,
    /// Amazon Linux 2023: nodeadm `NodeConfig`.
    AL2023,
    /// Bottlerocket: TOML settings.
    Bottlerocket,
    /// Windows Server 2019.
    Windows2019,
    /// Windows Server 2022.
    Windows2022,
    /// Windows Server 2025.
    Windows2025,
    /// The user's own AMI and user data, passed through unchanged.
    Custom,
}

impl AmiFamily {
    /// Parses the `amiFamily` spelling (`AL2023`) or an alias family (`al2023`).
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.to_ascii_lowercase().as_str() {
            "al2" => Self::AL2,
            "al2023" => Self::AL2023,
            "bottlerocket" => Self::Bottlerocket,
            "windows2019" => Self::Windows2019,
            "windows2022" => Self::Windows2022,
            "windows2025" => Self::Windows2025,
            "custom" => Self::Custom,
            _ => return None,
        })
    }

    /// The `amiFamily` spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AL2 => "AL2",
            Self::AL2023 => "AL2023",
            Self::Bottlerocket => "Bottlerocket",
            Self::Windows2019 => "Windows2019",
            Self::Windows2022 => "Windows2022",
            Self::Windows2025 => "Windows2025",
            Self::Custom => "Custom",
        }
    }

    /// Whether nodes of this family run Windows.
    pub fn is_windows(self) -> bool {
        matches!(
            self,
            Self::Windows2019 | Self::Windows2022 | Self::Windows2025
        )
    }

    /// The `node.kubernetes.io/windows-build` its nodes report, for Windows families.
    pub fn windows_build(self) -> Option<&'static str> {
        match self {
            Self::Windows2019 => Some("10.0.17763"),
            Self::Windows2022 => Some("10.0.20348"),
            Self::Windows2025 => Some("10.0.26100"),
            _ => None,
        }
    }
}

impl EC2NodeClassSpec {
    /// The alias term's `(family, version)`, when the AMIs are chosen by alias.
    pub fn alias(&self) -> Option<(AmiFamily, &str)> {
        let alias = self
            .ami_selector_terms
            .iter()
            .find_map(|t| t.alias.as_deref())?;
        let (family, version) = alias.split_once('@')?;
        Some((AmiFamily::parse(family)?, version))
    }

    /// The bootstrap format: `amiFamily` when set, else the alias's family, else Custom.
    pub fn ami_family(&self) -> AmiFamily {
        self.ami_family
            .as_deref()
            .and_then(AmiFamily::parse)
            .or_else(|| self.alias().map(|(family, _)| family))
            .unwrap_or(AmiFamily::Custom)
    }

    /// A kubelet setting as an integer (`maxPods`, `podsPerCore`).
    pub fn kubelet_i64(&self, key: &str) -> Option<i64> {
        self.kubelet.as_ref()?.get(key)?.as_i64()
    }

    /// A kubelet map setting of strings (`kubeReserved`, `systemReserved`, `evictionHard`).
    pub fn kubelet_map(&self, key: &str) -> BTreeMap<String, String> {
        self.kubelet
            .as_ref()
            .and_then(|k| k.get(key))
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl EC2NodeClass {
    /// The hash behind static drift: every field that shapes an instance at launch, except the
    /// selector terms (judged against the live instance instead, so a term that resolves to
    /// the same subnets does not replace nodes). Zero values and absent fields hash alike, and
    /// lists hash as sets, so reordering disks or spelling out a default drifts nothing.
    pub fn hash(&self) -> String {
        let mut spec = serde_json::to_value(&self.spec).unwrap_or(Value::Null);
        if let Some(fields) = spec.as_object_mut() {
            for ignored in [
                "subnetSelectorTerms",
                "securityGroupSelectorTerms",
                "capacityReservationSelectorTerms",
                "amiSelectorTerms",
                "amiFamily",
                "ipPrefixCount",
            ] {
                fields.remove(ignored);
            }
            fields.insert(
                "amiFamily".into(),
                Value::String(self.spec.ami_family().as_str().into()),
            );
            let defaults = serde_json::to_value(MetadataOptions::default()).unwrap_or_default();
            if fields.get("metadataOptions") == Some(&defaults) {
                fields.remove("metadataOptions");
            }
        }
        json_hash(&spec)
    }

    /// Static drift (`NodeClassDrift`): `claim` carries this implementation's hash version and
    /// another hash than the NodeClass's now. A claim of another version, or without a hash,
    /// has not drifted (the hash is re-stamped instead).
    pub fn static_drift(&self, claim: &karpenter_api::NodeClaim) -> Option<&'static str> {
        let annotations = claim.metadata.annotations.as_ref()?;
        (annotations
            .get(EC2_NODE_CLASS_HASH_VERSION_ANNOTATION)
            .map(String::as_str)
            == Some(EC2_NODE_CLASS_HASH_VERSION)
            && annotations
                .get(EC2_NODE_CLASS_HASH_ANNOTATION)
                .is_some_and(|h| *h != self.hash()))
        .then_some("NodeClassDrift")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(yaml: serde_json::Value) -> EC2NodeClass {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": yaml,
        }))
        .expect("valid EC2NodeClass")
    }

    #[test]
    fn family_comes_from_the_alias_unless_set() {
        let c = class(serde_json::json!({"amiSelectorTerms": [{"alias": "bottlerocket@latest"}]}));
        assert_eq!(c.spec.ami_family(), AmiFamily::Bottlerocket);
        assert_eq!(c.spec.alias(), Some((AmiFamily::Bottlerocket, "latest")));
        let c = class(serde_json::json!({
            "amiSelectorTerms": [{"alias": "al2023@v20240807"}], "amiFamily": "Custom"}));
        assert_eq!(c.spec.ami_family(), AmiFamily::Custom);
        let c = class(serde_json::json!({"amiSelectorTerms": [{"id": "ami-123"}]}));
        assert_eq!(c.spec.ami_family(), AmiFamily::Custom);
    }

    #[test]
    fn wire_names_are_upstreams() {
        let c = class(serde_json::json!({
            "associatePublicIPAddress": true,
            "blockDeviceMappings": [{"deviceName": "/dev/xvda", "rootVolume": true,
                "ebs": {"volumeSize": "100Gi", "kmsKeyID": "k", "snapshotID": "snap-1"}}],
            "metadataOptions": {"httpProtocolIPv6": "enabled"},
        }));
        assert_eq!(c.spec.associate_public_ip_address, Some(true));
        let ebs = c.spec.block_device_mappings[0].ebs.as_ref().unwrap();
        assert_eq!(ebs.kms_key_id.as_deref(), Some("k"));
        assert_eq!(ebs.snapshot_id.as_deref(), Some("snap-1"));
        let md = &c.spec.metadata_options;
        assert_eq!(md.http_protocol_ipv6, "enabled");
        assert_eq!(md.http_tokens, "required", "unset fields take the defaults");
        let back = serde_json::to_value(&c).unwrap();
        assert_eq!(back["spec"]["associatePublicIPAddress"], true);
        assert_eq!(
            back["spec"]["metadataOptions"]["httpProtocolIPv6"],
            "enabled"
        );
    }

    #[test]
    fn hash_ignores_selectors_order_and_defaults_but_not_shape() {
        let base = class(serde_json::json!({
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"a": "b"}}],
            "role": "KarpenterNodeRole",
            "tags": {"team": "a"},
            "blockDeviceMappings": [
                {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "20Gi"}},
                {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "50Gi"}}],
        }));
        let same = [
            serde_json::json!({
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"tags": {"other": "subnets"}}],
                "role": "KarpenterNodeRole",
                "tags": {"team": "a"},
                "blockDeviceMappings": [
                    {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "50Gi"}},
                    {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "20Gi"}}],
                "detailedMonitoring": false,
                "metadataOptions": {},
            }),
            serde_json::json!({
                "amiSelectorTerms": [{"alias": "al2023@v20250101"}],
                "amiFamily": "AL2023",
                "role": "KarpenterNodeRole",
                "tags": {"team": "a"},
                "blockDeviceMappings": [
                    {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "20Gi"}},
                    {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "50Gi"}}],
            }),
        ];
        for spec in same {
            assert_eq!(class(spec.clone()).hash(), base.hash(), "{spec}");
        }
        let different = [
            ("role", serde_json::json!("OtherRole")),
            ("tags", serde_json::json!({"team": "b"})),
            ("userData", serde_json::json!("#!/bin/bash")),
            ("detailedMonitoring", serde_json::json!(true)),
            ("kubelet", serde_json::json!({"maxPods": 20})),
            (
                "metadataOptions",
                serde_json::json!({"httpTokens": "optional"}),
            ),
            ("amiFamily", serde_json::json!("Bottlerocket")),
        ];
        for (field, value) in different {
            let mut spec = serde_json::to_value(&base.spec).unwrap();
            spec[field] = value;
            assert_ne!(
                class(spec).hash(),
                base.hash(),
                "changing {field} must drift"
            );
        }
    }
}
