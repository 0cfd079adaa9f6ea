//! The EC2 calls the provider makes, as a trait ([`Ec2Api`]) so the provider can be driven by
//! a fake where no emulator models the behaviour (capacity errors, pagination), and its
//! implementation over EC2's Query protocol ([`Ec2Client`]): form-encoded requests with
//! flattened lists (`Filter.1.Value.1`), XML answers, `NextToken` pagination.

use std::collections::BTreeMap;
use std::future::Future;

use roxmltree::{Document, Node};

use crate::http::{AwsError, AwsHttp, Result};
use crate::instancetype::{InstanceTypeInfo, catalog};
use crate::pricing::SpotPrice;

const VERSION: &str = "2016-11-15";

/// A `Filter`: the name and the values any of which match.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filter {
    /// `tag:karpenter.sh/discovery`, `tag-key`, `instance-state-name`, …
    pub name: String,
    /// Values; `*` is a wildcard.
    pub values: Vec<String>,
}

impl Filter {
    /// A filter.
    pub fn new(name: &str, values: &[&str]) -> Self {
        Self {
            name: name.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }
}

/// A subnet.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubnetInfo {
    /// `subnet-…`.
    pub id: String,
    /// `us-east-1a`.
    pub zone: String,
    /// `use1-az2`.
    pub zone_id: Option<String>,
    /// Free addresses.
    pub available_ips: i64,
}

/// A security group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SecurityGroupInfo {
    /// `sg-…`.
    pub id: String,
    /// The group name.
    pub name: String,
}

/// An AMI.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Image {
    /// `ami-…`.
    pub id: String,
    /// The image name.
    pub name: String,
    /// `x86_64` or `arm64`.
    pub architecture: String,
    /// RFC 3339; the newest image wins among equals.
    pub creation_date: String,
    /// Whether the image is deprecated: its deprecation time has passed (decided when the
    /// NodeClass is resolved, see [`crate::nodeclass::is_deprecated`]).
    pub deprecated: bool,
    /// When EC2 deprecates (or deprecated) it, RFC 3339; a future time is not deprecated yet.
    pub deprecation_time: Option<String>,
    /// Which types it is built for, when an alias chose it.
    pub variant: crate::ssm::Variant,
}

/// A capacity reservation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CapacityReservationInfo {
    /// `cr-…`.
    pub id: String,
    /// The instance type it holds.
    pub instance_type: String,
    /// Its zone.
    pub zone: String,
    /// Instances it can still launch.
    pub available: i64,
    /// `open` or `targeted`.
    pub instance_match_criteria: String,
    /// The owning account.
    pub owner_id: String,
    /// When it ends (RFC 3339), if it does.
    pub end_date: Option<String>,
    /// `default` or `capacity-block`.
    pub reservation_type: String,
    /// `active`, `expired`, …
    pub state: String,
}

/// An instance.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Instance {
    /// `i-…`.
    pub id: String,
    /// `m5.large`.
    pub instance_type: String,
    /// `us-east-1a`.
    pub zone: String,
    /// `pending`, `running`, `shutting-down`, `terminated`, `stopping`, `stopped`.
    pub state: String,
    /// `spot` or `on-demand`.
    pub capacity_type: String,
    /// The AMI.
    pub image_id: String,
    /// The subnet.
    pub subnet_id: String,
    /// Security group ids.
    pub security_groups: Vec<String>,
    /// Tags.
    pub tags: BTreeMap<String, String>,
    /// RFC 3339.
    pub launch_time: String,
    /// The private DNS name (the node name on EKS).
    pub private_dns_name: String,
    /// The capacity reservation it was launched into, for reserved capacity only (see
    /// `capacity_type`); an on-demand instance EC2 placed in an open reservation has none.
    pub capacity_reservation_id: Option<String>,
}

/// A block device in a launch template.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LaunchTemplateBlockDevice {
    /// `/dev/xvda`.
    pub device_name: String,
    /// GiB.
    pub volume_size_gib: Option<i64>,
    /// `gp3`.
    pub volume_type: Option<String>,
    /// IOPS.
    pub iops: Option<i64>,
    /// MiB/s.
    pub throughput: Option<i64>,
    /// Encrypted.
    pub encrypted: Option<bool>,
    /// KMS key.
    pub kms_key_id: Option<String>,
    /// Snapshot.
    pub snapshot_id: Option<String>,
    /// Deleted with the instance.
    pub delete_on_termination: Option<bool>,
}

/// What a launch template holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LaunchTemplateData {
    /// The AMI.
    pub image_id: String,
    /// Base64 user data.
    pub user_data: String,
    /// The instance profile's name.
    pub instance_profile: String,
    /// Security group ids.
    pub security_groups: Vec<String>,
    /// Disks.
    pub block_devices: Vec<LaunchTemplateBlockDevice>,
    /// `required` / `optional`.
    pub http_tokens: String,
    /// `enabled` / `disabled`.
    pub http_endpoint: String,
    /// `enabled` / `disabled`.
    pub http_protocol_ipv6: String,
    /// Hop limit.
    pub http_put_response_hop_limit: i64,
    /// Detailed monitoring.
    pub monitoring: bool,
    /// The interfaces to attach (see [`crate::interfaces`]); when empty the security groups
    /// go on the template itself.
    pub network_interfaces: Vec<crate::interfaces::LaunchTemplateInterface>,
    /// Tags on the template and on the interfaces it creates.
    pub tags: BTreeMap<String, String>,
    /// The capacity reservation instances launch into (reserved capacity).
    pub capacity_reservation_id: Option<String>,
    /// `CapacityReservationPreference`: [`RESERVATIONS_ONLY`] for a launch into
    /// `capacity_reservation_id`, [`RESERVATIONS_NONE`] for on-demand and spot launches, so EC2
    /// never puts those into an *open* reservation (whose id would then look like reserved
    /// capacity). Unset sends nothing (EC2's default, `open`).
    pub capacity_reservation_preference: Option<String>,
    /// `capacity-block` when the reservation is a Capacity Block for ML (EC2 launches into
    /// those only with this market type).
    pub market_type: Option<String>,
    /// `cpuOptions.nestedVirtualization` (`enabled` / `disabled`).
    pub nested_virtualization: Option<String>,
    /// The placement group instances launch into (`pg-…`) and, for a partition group, the
    /// partition.
    pub placement: Option<(String, Option<i32>)>,
}

/// The reservation preference of a launch into a targeted reservation: that reservation or
/// nothing.
pub const RESERVATIONS_ONLY: &str = "capacity-reservations-only";
/// The reservation preference of an on-demand or spot launch: no reservation, open ones
/// included.
pub const RESERVATIONS_NONE: &str = "none";

impl LaunchTemplateData {
    /// The preference upstream sets for a launch into `reservation` (reserved capacity) or,
    /// with none, for an on-demand or spot launch.
    pub fn reservation_preference(reservation: Option<&str>) -> String {
        match reservation {
            Some(_) => RESERVATIONS_ONLY.into(),
            None => RESERVATIONS_NONE.into(),
        }
    }
}

/// Whether EC2 says a capacity reservation asked for by id does not exist
/// (`InvalidCapacityReservationId.NotFound`, or `.Malformed` for an id that cannot be one).
pub fn is_reservation_not_found(e: &AwsError) -> bool {
    e.code()
        .is_some_and(|c| c.starts_with("InvalidCapacityReservationId"))
}

/// One instance type × subnet a fleet may launch.
#[derive(Clone, Debug, PartialEq)]
pub struct FleetOverride {
    /// `m5.large`.
    pub instance_type: String,
    /// The subnet (which fixes the zone).
    pub subnet_id: String,
    /// The subnet's zone.
    pub zone: String,
    /// Lower is preferred (on-demand `prioritized`); the price otherwise.
    pub priority: Option<f64>,
}

/// A CreateFleet request of type `instant` for one instance.
#[derive(Clone, Debug, PartialEq)]
pub struct FleetRequest {
    /// `spot` or `on-demand`.
    pub capacity_type: String,
    /// One launch template per AMI, each with its overrides.
    pub launch_templates: Vec<(String, Vec<FleetOverride>)>,
    /// Tags for the instance, its volumes and the fleet.
    pub tags: BTreeMap<String, String>,
    /// The CreateFleet context.
    pub context: Option<String>,
    /// The reserved capacity is a Capacity Block: the fleet's target capacity type is
    /// `capacity-block` instead of `on-demand`.
    pub capacity_block: bool,
}

/// An error CreateFleet reports for one override.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetError {
    /// `InsufficientInstanceCapacity`, `UnfulfillableCapacity`, …
    pub code: String,
    /// The message.
    pub message: String,
    /// The override's type.
    pub instance_type: String,
    /// The override's zone.
    pub zone: String,
}

/// What CreateFleet answered.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FleetResult {
    /// Launched instances: `(id, type, zone, capacity type)`.
    pub instances: Vec<FleetInstance>,
    /// Overrides that failed.
    pub errors: Vec<FleetError>,
}

/// An instance a fleet launched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetInstance {
    /// `i-…`.
    pub id: String,
    /// `m5.large`.
    pub instance_type: String,
    /// `us-east-1a`.
    pub zone: String,
    /// `spot` or `on-demand`.
    pub capacity_type: String,
}

/// The EC2 calls the provider needs.
pub trait Ec2Api: Send + Sync + 'static {
    /// DescribeSubnets.
    fn describe_subnets(
        &self,
        filters: Vec<Filter>,
    ) -> impl Future<Output = Result<Vec<SubnetInfo>>> + Send;
    /// DescribeSecurityGroups.
    fn describe_security_groups(
        &self,
        filters: Vec<Filter>,
    ) -> impl Future<Output = Result<Vec<SecurityGroupInfo>>> + Send;
    /// DescribeCapacityReservations by ids (`CapacityReservationId.N`; EC2 answers
    /// `InvalidCapacityReservationId.NotFound` when one does not exist) and filters, every
    /// page.
    fn describe_capacity_reservations(
        &self,
        ids: Vec<String>,
        filters: Vec<Filter>,
    ) -> impl Future<Output = Result<Vec<CapacityReservationInfo>>> + Send;
    /// DescribeImages (owners may be empty).
    fn describe_images(
        &self,
        filters: Vec<Filter>,
        owners: Vec<String>,
    ) -> impl Future<Output = Result<Vec<Image>>> + Send;
    /// DescribeInstanceTypes, every page, x86_64 and arm64 HVM types.
    fn describe_instance_types(&self)
    -> impl Future<Output = Result<Vec<InstanceTypeInfo>>> + Send;
    /// DescribeInstanceTypeOfferings by availability zone: `(type, zone)`.
    fn describe_instance_type_offerings(
        &self,
    ) -> impl Future<Output = Result<Vec<(String, String)>>> + Send;
    /// DescribeSpotPriceHistory for Linux, current prices.
    fn describe_spot_price_history(&self) -> impl Future<Output = Result<Vec<SpotPrice>>> + Send;
    /// DescribeLaunchTemplates, every page: `(name, tags)` of the templates matching.
    fn describe_launch_templates(
        &self,
        filters: Vec<Filter>,
    ) -> impl Future<Output = Result<Vec<(String, BTreeMap<String, String>)>>> + Send;
    /// DeleteLaunchTemplate.
    fn delete_launch_template(&self, name: String) -> impl Future<Output = Result<()>> + Send;
    /// CreateLaunchTemplate.
    fn create_launch_template(
        &self,
        name: String,
        data: LaunchTemplateData,
    ) -> impl Future<Output = Result<()>> + Send;
    /// CreateFleet (instant, one instance).
    fn create_fleet(
        &self,
        request: FleetRequest,
    ) -> impl Future<Output = Result<FleetResult>> + Send;
    /// DescribeInstances by ids, or by filters when `ids` is empty; every page.
    fn describe_instances(
        &self,
        ids: Vec<String>,
        filters: Vec<Filter>,
    ) -> impl Future<Output = Result<Vec<Instance>>> + Send;
    /// TerminateInstances.
    fn terminate_instances(&self, ids: Vec<String>) -> impl Future<Output = Result<()>> + Send;
}

/// Builds a Query request's parameters.
#[derive(Default)]
struct Params(Vec<(String, String)>);

impl Params {
    fn new(action: &str) -> Self {
        let mut p = Self::default();
        p.set("Action", action);
        p.set("Version", VERSION);
        p
    }

    fn set(&mut self, key: impl Into<String>, value: impl ToString) {
        self.0.push((key.into(), value.to_string()));
    }

    fn opt<T: ToString>(&mut self, key: &str, value: Option<T>) {
        if let Some(v) = value {
            self.set(key, v.to_string());
        }
    }

    fn list(&mut self, prefix: &str, values: &[String]) {
        for (i, v) in values.iter().enumerate() {
            self.set(format!("{prefix}.{}", i + 1), v);
        }
    }

    fn filters(&mut self, filters: &[Filter]) {
        for (i, f) in filters.iter().enumerate() {
            self.set(format!("Filter.{}.Name", i + 1), &f.name);
            self.list(&format!("Filter.{}.Value", i + 1), &f.values);
        }
    }

    fn tags(
        &mut self,
        prefix: &str,
        index: usize,
        resource: &str,
        tags: &BTreeMap<String, String>,
    ) {
        let p = format!("{prefix}.{index}");
        self.set(format!("{p}.ResourceType"), resource);
        for (i, (k, v)) in tags.iter().enumerate() {
            self.set(format!("{p}.Tag.{}.Key", i + 1), k);
            self.set(format!("{p}.Tag.{}.Value", i + 1), v);
        }
    }
}

impl Params {
    /// One launch template interface under `prefix` (`LaunchTemplateData.NetworkInterface.1`).
    fn interface(&mut self, prefix: &str, ni: &crate::interfaces::LaunchTemplateInterface) {
        self.opt(&format!("{prefix}.NetworkCardIndex"), ni.network_card_index);
        self.set(format!("{prefix}.DeviceIndex"), ni.device_index);
        self.opt(
            &format!("{prefix}.InterfaceType"),
            ni.interface_type.as_ref(),
        );
        self.opt(
            &format!("{prefix}.AssociatePublicIpAddress"),
            ni.associate_public_ip,
        );
        self.opt(&format!("{prefix}.Ipv4PrefixCount"), ni.ipv4_prefix_count);
        self.opt(&format!("{prefix}.Ipv6PrefixCount"), ni.ipv6_prefix_count);
        self.opt(&format!("{prefix}.Ipv6AddressCount"), ni.ipv6_address_count);
        self.opt(&format!("{prefix}.PrimaryIpv6"), ni.primary_ipv6);
        self.list(&format!("{prefix}.SecurityGroupId"), &ni.security_groups);
        if let Some(ct) = &ni.connection_tracking {
            let c = format!("{prefix}.ConnectionTrackingSpecification");
            self.opt(
                &format!("{c}.TcpEstablishedTimeout"),
                ct.tcp_established_timeout,
            );
            self.opt(&format!("{c}.UdpStreamTimeout"), ct.udp_stream_timeout);
            self.opt(&format!("{c}.UdpTimeout"), ct.udp_timeout);
        }
    }
}

fn child<'a, 'i>(node: Node<'a, 'i>, name: &str) -> Option<Node<'a, 'i>> {
    node.children().find(|c| c.has_tag_name(name))
}

fn text(node: Node<'_, '_>, name: &str) -> String {
    child(node, name)
        .and_then(|c| c.text())
        .unwrap_or_default()
        .to_string()
}

fn path<'a, 'i>(node: Node<'a, 'i>, names: &[&str]) -> Option<Node<'a, 'i>> {
    names.iter().try_fold(node, |n, name| child(n, name))
}

fn path_text(node: Node<'_, '_>, names: &[&str]) -> Option<String> {
    path(node, names).and_then(|n| n.text()).map(str::to_string)
}

fn items<'a, 'i>(node: Option<Node<'a, 'i>>) -> impl Iterator<Item = Node<'a, 'i>> {
    node.into_iter()
        .flat_map(|n| n.children().filter(|c| c.has_tag_name("item")))
}

fn tags_of(node: Node<'_, '_>) -> BTreeMap<String, String> {
    items(child(node, "tagSet"))
        .map(|t| (text(t, "key"), text(t, "value")))
        .collect()
}

fn doc(text: &str) -> Result<Document<'_>> {
    Document::parse(text).map_err(|e| AwsError::Parse(e.to_string()))
}

/// Reads an instance-type item of DescribeInstanceTypes; what the API does not say (network
/// bandwidth, branch interfaces) comes from the embedded catalog when it knows the type.
pub fn instance_type_from_xml(item: Node<'_, '_>) -> Option<InstanceTypeInfo> {
    let name = text(item, "instanceType");
    let vcpu = path_text(item, &["vCpuInfo", "defaultVCpus"])?
        .parse()
        .ok()?;
    let memory_mib = path_text(item, &["memoryInfo", "sizeInMiB"])?
        .parse()
        .ok()?;
    let architecture = items(path(item, &["processorInfo", "supportedArchitectures"]))
        .filter_map(|a| a.text())
        .find_map(|a| match a {
            "x86_64" => Some("amd64"),
            "arm64" => Some("arm64"),
            _ => None,
        })?
        .to_string();
    let number = |names: &[&str]| path_text(item, names).and_then(|t| t.parse::<i64>().ok());
    let gpu = items(path(item, &["gpuInfo", "gpus"])).next();
    let neuron = items(path(item, &["neuronInfo", "neuronDevices"])).next();
    let inference = items(path(item, &["inferenceAcceleratorInfo", "accelerators"])).next();
    let accelerator = neuron.or(inference);
    let known = catalog().types.iter().find(|t| t.name == name);
    let usage: Vec<&str> = items(child(item, "supportedUsageClasses"))
        .filter_map(|u| u.text())
        .collect();
    let nvme = path_text(item, &["instanceStorageInfo", "nvmeSupport"]);
    let storage_gb = number(&["instanceStorageInfo", "totalSizeInGB"]).unwrap_or(0);
    Some(InstanceTypeInfo {
        vcpu,
        memory_mib,
        architecture,
        cpu_manufacturer: path_text(item, &["processorInfo", "manufacturer"])
            .map(|m| m.to_lowercase()),
        cpu_sustained_clock_mhz: path_text(item, &["processorInfo", "sustainedClockSpeedInGhz"])
            .and_then(|g| g.parse::<f64>().ok())
            .map(|g| (g * 1000.0).round() as i64),
        gpu_count: gpu.and_then(|g| text(g, "count").parse().ok()).unwrap_or(0),
        gpu_manufacturer: gpu.map(|g| text(g, "manufacturer").to_lowercase()),
        gpu_name: gpu.map(|g| text(g, "name").to_lowercase()),
        gpu_memory_mib: gpu
            .and_then(|g| path_text(g, &["memoryInfo", "sizeInMiB"]))
            .and_then(|m| m.parse().ok())
            .unwrap_or(0),
        accelerator_count: accelerator
            .and_then(|a| text(a, "count").parse().ok())
            .unwrap_or(0),
        accelerator_manufacturer: accelerator.map(|a| {
            let m = text(a, "manufacturer");
            if m.is_empty() {
                "aws".into()
            } else {
                m.to_lowercase()
            }
        }),
        accelerator_name: accelerator.map(|a| text(a, "name").to_lowercase()),
        local_nvme_gib: if nvme.as_deref().is_some_and(|n| n != "unsupported") {
            storage_gb
        } else {
            0
        },
        instance_store_gb: storage_gb,
        network_bandwidth_mbps: known.and_then(|k| k.network_bandwidth_mbps),
        ebs_bandwidth_mbps: number(&["ebsInfo", "ebsOptimizedInfo", "maximumBandwidthInMbps"]),
        max_enis: number(&["networkInfo", "maximumNetworkInterfaces"])?,
        ipv4_per_eni: number(&["networkInfo", "ipv4AddressesPerInterface"])?,
        pod_eni: known.map_or(0, |k| k.pod_eni),
        efa: number(&["networkInfo", "efaInfo", "maximumEfaInterfaces"]).unwrap_or(0),
        hypervisor: Some(text(item, "hypervisor")).filter(|h| !h.is_empty()),
        encryption_in_transit: path_text(item, &["networkInfo", "encryptionInTransitSupported"])
            .as_deref()
            == Some("true"),
        spot_supported: usage.contains(&"spot"),
        name,
    })
}

/// Reads an instance of DescribeInstances. Upstream's rule for reserved capacity: an instance
/// is `reserved` only when it runs in a reservation *and* was launched to use nothing but
/// reservations (`capacity-reservations-only`, what reserved launch templates ask for). An
/// instance EC2 put into an open reservation on its own is on-demand capacity, and its
/// reservation id is not reported (it would otherwise label the node and drive
/// reservation drift).
fn instance_from_xml(item: Node<'_, '_>) -> Instance {
    let reservation = Some(text(item, "capacityReservationId")).filter(|c| !c.is_empty());
    let targeted = path_text(
        item,
        &[
            "capacityReservationSpecification",
            "capacityReservationPreference",
        ],
    )
    .as_deref()
        == Some(RESERVATIONS_ONLY);
    let spot = text(item, "instanceLifecycle") == "spot";
    let reserved = !spot && targeted && reservation.is_some();
    Instance {
        id: text(item, "instanceId"),
        instance_type: text(item, "instanceType"),
        zone: path_text(item, &["placement", "availabilityZone"]).unwrap_or_default(),
        state: path_text(item, &["instanceState", "name"]).unwrap_or_default(),
        capacity_type: if spot {
            "spot".into()
        } else if reserved {
            "reserved".into()
        } else {
            "on-demand".into()
        },
        image_id: text(item, "imageId"),
        subnet_id: text(item, "subnetId"),
        security_groups: items(child(item, "groupSet"))
            .map(|g| text(g, "groupId"))
            .collect(),
        tags: tags_of(item),
        launch_time: text(item, "launchTime"),
        capacity_reservation_id: reservation.filter(|_| reserved),
        private_dns_name: text(item, "privateDnsName"),
    }
}

/// EC2 over the Query protocol.
#[derive(Clone)]
pub struct Ec2Client {
    http: AwsHttp,
}

impl Ec2Client {
    /// A client sending through `http`.
    pub fn new(http: AwsHttp) -> Self {
        Self { http }
    }

    /// The signed HTTP client, for the other services the provider reads (SSM).
    pub fn http(&self) -> &AwsHttp {
        &self.http
    }

    async fn call(&self, params: &Params) -> Result<String> {
        self.http.query("ec2", &params.0).await
    }

    /// One attempt, no retry (the validation dry runs).
    async fn call_once(&self, params: &Params) -> Result<String> {
        self.http.without_retries().query("ec2", &params.0).await
    }

    /// Calls every page of a paginated action, handing each page's document to `read`.
    async fn pages(&self, params: Params, mut read: impl FnMut(&Document<'_>)) -> Result<()> {
        let mut token: Option<String> = None;
        loop {
            let mut p = Params(params.0.clone());
            if let Some(t) = &token {
                p.set("NextToken", t);
            }
            let text = self.call(&p).await?;
            let d = doc(&text)?;
            read(&d);
            token = d
                .root_element()
                .children()
                .find(|c| c.has_tag_name("nextToken"))
                .and_then(|n| n.text())
                .filter(|t| !t.is_empty())
                .map(str::to_string);
            if token.is_none() {
                return Ok(());
            }
        }
    }
}

fn set_of<'a, 'i>(d: &'a Document<'i>, name: &str) -> Option<Node<'a, 'i>> {
    d.root_element().children().find(|c| c.has_tag_name(name))
}

impl Ec2Api for Ec2Client {
    async fn describe_subnets(&self, filters: Vec<Filter>) -> Result<Vec<SubnetInfo>> {
        let mut p = Params::new("DescribeSubnets");
        p.filters(&filters);
        let mut out = Vec::new();
        self.pages(p, |d| {
            out.extend(items(set_of(d, "subnetSet")).map(|s| SubnetInfo {
                id: text(s, "subnetId"),
                zone: text(s, "availabilityZone"),
                zone_id: Some(text(s, "availabilityZoneId")).filter(|z| !z.is_empty()),
                available_ips: text(s, "availableIpAddressCount").parse().unwrap_or(0),
            }));
        })
        .await?;
        Ok(out)
    }

    async fn describe_security_groups(
        &self,
        filters: Vec<Filter>,
    ) -> Result<Vec<SecurityGroupInfo>> {
        let mut p = Params::new("DescribeSecurityGroups");
        p.filters(&filters);
        let mut out = Vec::new();
        self.pages(p, |d| {
            out.extend(
                items(set_of(d, "securityGroupInfo")).map(|g| SecurityGroupInfo {
                    id: text(g, "groupId"),
                    name: text(g, "groupName"),
                }),
            );
        })
        .await?;
        Ok(out)
    }

    async fn describe_capacity_reservations(
        &self,
        ids: Vec<String>,
        filters: Vec<Filter>,
    ) -> Result<Vec<CapacityReservationInfo>> {
        let mut p = Params::new("DescribeCapacityReservations");
        p.list("CapacityReservationId", &ids);
        p.filters(&filters);
        // EC2 takes no page size with ids.
        if ids.is_empty() {
            p.set("MaxResults", 1000);
        }
        let mut out = Vec::new();
        self.pages(p, |d| {
            out.extend(items(set_of(d, "capacityReservationSet")).map(|r| {
                CapacityReservationInfo {
                    id: text(r, "capacityReservationId"),
                    instance_type: text(r, "instanceType"),
                    zone: text(r, "availabilityZone"),
                    available: text(r, "availableInstanceCount").parse().unwrap_or(0),
                    instance_match_criteria: text(r, "instanceMatchCriteria"),
                    owner_id: text(r, "ownerId"),
                    end_date: Some(text(r, "endDate")).filter(|d| !d.is_empty()),
                    reservation_type: Some(text(r, "reservationType"))
                        .filter(|t| !t.is_empty())
                        .unwrap_or_else(|| "default".into()),
                    state: text(r, "state"),
                }
            }));
        })
        .await?;
        Ok(out)
    }

    async fn describe_images(
        &self,
        filters: Vec<Filter>,
        owners: Vec<String>,
    ) -> Result<Vec<Image>> {
        let mut p = Params::new("DescribeImages");
        p.filters(&filters);
        // Deprecated images still match (upstream asks for them too): an image the account
        // pinned keeps launching, after any non-deprecated one.
        p.set("IncludeDeprecated", true);
        p.list("Owner", &owners);
        let mut out = Vec::new();
        self.pages(p, |d| {
            out.extend(items(set_of(d, "imagesSet")).map(|i| Image {
                id: text(i, "imageId"),
                name: text(i, "name"),
                architecture: text(i, "architecture"),
                creation_date: text(i, "creationDate"),
                deprecated: false,
                deprecation_time: Some(text(i, "deprecationTime")).filter(|t| !t.is_empty()),
                variant: Default::default(),
            }));
        })
        .await?;
        Ok(out)
    }

    async fn describe_instance_types(&self) -> Result<Vec<InstanceTypeInfo>> {
        let mut p = Params::new("DescribeInstanceTypes");
        p.filters(&[
            Filter::new("supported-virtualization-type", &["hvm"]),
            Filter::new(
                "processor-info.supported-architecture",
                &["x86_64", "arm64"],
            ),
        ]);
        p.set("MaxResults", 100);
        let mut out = Vec::new();
        self.pages(p, |d| {
            out.extend(items(set_of(d, "instanceTypeSet")).filter_map(instance_type_from_xml));
        })
        .await?;
        Ok(out)
    }

    async fn describe_instance_type_offerings(&self) -> Result<Vec<(String, String)>> {
        let mut p = Params::new("DescribeInstanceTypeOfferings");
        p.set("LocationType", "availability-zone");
        p.set("MaxResults", 1000);
        let mut out = Vec::new();
        self.pages(p, |d| {
            out.extend(
                items(set_of(d, "instanceTypeOfferingSet"))
                    .map(|o| (text(o, "instanceType"), text(o, "location"))),
            );
        })
        .await?;
        Ok(out)
    }

    async fn describe_spot_price_history(&self) -> Result<Vec<SpotPrice>> {
        let mut p = Params::new("DescribeSpotPriceHistory");
        p.list(
            "ProductDescription",
            &[
                "Linux/UNIX".to_string(),
                "Linux/UNIX (Amazon VPC)".to_string(),
            ],
        );
        p.set("MaxResults", 1000);
        let mut out = Vec::new();
        self.pages(p, |d| {
            out.extend(items(set_of(d, "spotPriceHistorySet")).map(|s| SpotPrice {
                instance_type: text(s, "instanceType"),
                zone: text(s, "availabilityZone"),
                price: text(s, "spotPrice").parse().unwrap_or(0.0),
                timestamp: text(s, "timestamp"),
            }));
        })
        .await?;
        Ok(out)
    }

    async fn describe_launch_templates(
        &self,
        filters: Vec<Filter>,
    ) -> Result<Vec<(String, BTreeMap<String, String>)>> {
        let mut p = Params::new("DescribeLaunchTemplates");
        p.filters(&filters);
        let mut out = Vec::new();
        self.pages(p, |d| {
            out.extend(
                items(set_of(d, "launchTemplates"))
                    .map(|t| (text(t, "launchTemplateName"), tags_of(t))),
            );
        })
        .await?;
        Ok(out)
    }

    async fn delete_launch_template(&self, name: String) -> Result<()> {
        let mut p = Params::new("DeleteLaunchTemplate");
        p.set("LaunchTemplateName", name);
        self.call(&p).await.map(|_| ())
    }

    async fn create_launch_template(&self, name: String, data: LaunchTemplateData) -> Result<()> {
        let mut p = Params::new("CreateLaunchTemplate");
        p.set("LaunchTemplateName", &name);
        let d = "LaunchTemplateData";
        p.set(format!("{d}.ImageId"), &data.image_id);
        p.set(format!("{d}.UserData"), &data.user_data);
        p.set(
            format!("{d}.IamInstanceProfile.Name"),
            &data.instance_profile,
        );
        // Interfaces and top-level groups are exclusive: with interfaces, theirs.
        if data.network_interfaces.is_empty() {
            p.list(&format!("{d}.SecurityGroupId"), &data.security_groups);
        }
        for (i, ni) in data.network_interfaces.iter().enumerate() {
            p.interface(&format!("{d}.NetworkInterface.{}", i + 1), ni);
        }
        p.opt(
            &format!("{d}.CpuOptions.NestedVirtualization"),
            data.nested_virtualization.as_ref(),
        );
        p.opt(
            &format!("{d}.InstanceMarketOptions.MarketType"),
            data.market_type.as_ref(),
        );
        for (i, b) in data.block_devices.iter().enumerate() {
            let bp = format!("{d}.BlockDeviceMapping.{}", i + 1);
            p.set(format!("{bp}.DeviceName"), &b.device_name);
            p.opt(&format!("{bp}.Ebs.VolumeSize"), b.volume_size_gib);
            p.opt(&format!("{bp}.Ebs.VolumeType"), b.volume_type.as_ref());
            p.opt(&format!("{bp}.Ebs.Iops"), b.iops);
            p.opt(&format!("{bp}.Ebs.Throughput"), b.throughput);
            p.opt(&format!("{bp}.Ebs.Encrypted"), b.encrypted);
            p.opt(&format!("{bp}.Ebs.KmsKeyId"), b.kms_key_id.as_ref());
            p.opt(&format!("{bp}.Ebs.SnapshotId"), b.snapshot_id.as_ref());
            p.opt(
                &format!("{bp}.Ebs.DeleteOnTermination"),
                b.delete_on_termination,
            );
        }
        p.set(format!("{d}.MetadataOptions.HttpTokens"), &data.http_tokens);
        p.set(
            format!("{d}.MetadataOptions.HttpEndpoint"),
            &data.http_endpoint,
        );
        p.set(
            format!("{d}.MetadataOptions.HttpProtocolIpv6"),
            &data.http_protocol_ipv6,
        );
        p.set(
            format!("{d}.MetadataOptions.HttpPutResponseHopLimit"),
            data.http_put_response_hop_limit,
        );
        p.set(
            format!("{d}.MetadataOptions.InstanceMetadataTags"),
            "disabled",
        );
        p.set(format!("{d}.Monitoring.Enabled"), data.monitoring);
        let crs = format!("{d}.CapacityReservationSpecification");
        p.opt(
            &format!("{crs}.CapacityReservationPreference"),
            data.capacity_reservation_preference.as_ref(),
        );
        p.opt(
            &format!("{crs}.CapacityReservationTarget.CapacityReservationId"),
            data.capacity_reservation_id.as_ref(),
        );
        if let Some((group, partition)) = &data.placement {
            p.set(format!("{d}.Placement.GroupId"), group);
            p.opt(&format!("{d}.Placement.PartitionNumber"), *partition);
        }
        p.tags(
            &format!("{d}.TagSpecification"),
            1,
            "network-interface",
            &data.tags,
        );
        p.tags("TagSpecification", 1, "launch-template", &data.tags);
        self.call(&p).await.map(|_| ())
    }

    async fn create_fleet(&self, request: FleetRequest) -> Result<FleetResult> {
        let mut p = Params::new("CreateFleet");
        p.set("Type", "instant");
        p.set("TargetCapacitySpecification.TotalTargetCapacity", 1);
        // Reserved capacity is on-demand capacity the launch templates aim at a reservation;
        // a Capacity Block is its own target type.
        let target = match request.capacity_type.as_str() {
            "reserved" if request.capacity_block => "capacity-block",
            "reserved" => "on-demand",
            other => other,
        };
        p.set(
            "TargetCapacitySpecification.DefaultTargetCapacityType",
            target,
        );
        if request.capacity_type == "spot" {
            p.set("SpotOptions.AllocationStrategy", "price-capacity-optimized");
        } else if !request.capacity_block {
            // Capacity Blocks take no on-demand options (upstream sends none).
            p.set("OnDemandOptions.AllocationStrategy", "lowest-price");
        }
        p.opt("Context", request.context.as_ref());
        for (i, (template, overrides)) in request.launch_templates.iter().enumerate() {
            let lp = format!("LaunchTemplateConfigs.{}", i + 1);
            p.set(
                format!("{lp}.LaunchTemplateSpecification.LaunchTemplateName"),
                template,
            );
            p.set(
                format!("{lp}.LaunchTemplateSpecification.Version"),
                "$Latest",
            );
            for (j, o) in overrides.iter().enumerate() {
                let op = format!("{lp}.Overrides.{}", j + 1);
                p.set(format!("{op}.InstanceType"), &o.instance_type);
                p.set(format!("{op}.SubnetId"), &o.subnet_id);
                p.set(format!("{op}.AvailabilityZone"), &o.zone);
                p.opt(&format!("{op}.Priority"), o.priority);
            }
        }
        p.tags("TagSpecification", 1, "instance", &request.tags);
        p.tags("TagSpecification", 2, "volume", &request.tags);
        p.tags("TagSpecification", 3, "fleet", &request.tags);
        let body = self.call(&p).await?;
        let d = doc(&body)?;
        let mut result = FleetResult::default();
        for item in items(set_of(&d, "fleetInstanceSet")) {
            let overrides = path(item, &["launchTemplateAndOverrides", "overrides"]);
            let zone = overrides
                .map(|o| text(o, "availabilityZone"))
                .unwrap_or_default();
            let lifecycle = text(item, "lifecycle");
            for id in items(child(item, "instanceIds")) {
                result.instances.push(FleetInstance {
                    id: id.text().unwrap_or_default().to_string(),
                    instance_type: text(item, "instanceType"),
                    zone: zone.clone(),
                    capacity_type: if lifecycle == "spot" {
                        "spot".into()
                    } else {
                        "on-demand".into()
                    },
                });
            }
        }
        for item in items(set_of(&d, "errorSet")) {
            let overrides = path(item, &["launchTemplateAndOverrides", "overrides"]);
            result.errors.push(FleetError {
                code: text(item, "errorCode"),
                message: text(item, "errorMessage"),
                instance_type: overrides
                    .map(|o| text(o, "instanceType"))
                    .unwrap_or_default(),
                zone: overrides
                    .map(|o| text(o, "availabilityZone"))
                    .unwrap_or_default(),
            });
        }
        Ok(result)
    }

    async fn describe_instances(
        &self,
        ids: Vec<String>,
        filters: Vec<Filter>,
    ) -> Result<Vec<Instance>> {
        let mut p = Params::new("DescribeInstances");
        p.list("InstanceId", &ids);
        p.filters(&filters);
        if ids.is_empty() {
            p.set("MaxResults", 1000);
        }
        let mut out = Vec::new();
        self.pages(p, |d| {
            for reservation in items(set_of(d, "reservationSet")) {
                out.extend(items(child(reservation, "instancesSet")).map(instance_from_xml));
            }
        })
        .await?;
        Ok(out)
    }

    async fn terminate_instances(&self, ids: Vec<String>) -> Result<()> {
        let mut p = Params::new("TerminateInstances");
        p.list("InstanceId", &ids);
        self.call(&p).await.map(|_| ())
    }
}

impl crate::ec2_extra::PlacementGroups for Ec2Client {
    async fn describe_placement_groups(
        &self,
        query: crate::ec2_extra::PlacementGroupQuery,
    ) -> Result<Vec<crate::ec2_extra::PlacementGroupInfo>> {
        let mut p = Params::new("DescribePlacementGroups");
        p.filters(&[Filter::new("state", &["available"])]);
        match (query.id, query.name) {
            (Some(id), _) => p.set("GroupId.1", id),
            (None, Some(name)) => p.set("GroupName.1", name),
            (None, None) => {}
        }
        let body = self.call(&p).await?;
        let d = doc(&body)?;
        Ok(items(set_of(&d, "placementGroupSet"))
            .map(|g| crate::ec2_extra::PlacementGroupInfo {
                id: text(g, "groupId"),
                name: text(g, "groupName"),
                strategy: text(g, "strategy"),
                partition_count: text(g, "partitionCount").parse().unwrap_or(0),
                spread_level: Some(text(g, "spreadLevel")).filter(|l| !l.is_empty()),
            })
            .collect())
    }
}

impl crate::ec2_extra::DryRuns for Ec2Client {
    async fn dry_run_create_fleet(
        &self,
        request: crate::ec2_extra::CreateFleetDryRun,
    ) -> Result<()> {
        let mut p = Params::new("CreateFleet");
        p.set("DryRun", true);
        p.set("Type", "instant");
        p.set("TargetCapacitySpecification.TotalTargetCapacity", 1);
        p.set(
            "TargetCapacitySpecification.DefaultTargetCapacityType",
            "on-demand",
        );
        p.set("OnDemandOptions.AllocationStrategy", "lowest-price");
        let lp = "LaunchTemplateConfigs.1";
        p.set(
            format!("{lp}.LaunchTemplateSpecification.LaunchTemplateName"),
            &request.launch_template,
        );
        p.set(
            format!("{lp}.LaunchTemplateSpecification.Version"),
            "$Latest",
        );
        for (j, o) in request.overrides.iter().enumerate() {
            let op = format!("{lp}.Overrides.{}", j + 1);
            p.set(format!("{op}.InstanceType"), &o.instance_type);
            p.set(format!("{op}.SubnetId"), &o.subnet_id);
        }
        p.tags("TagSpecification", 1, "instance", &request.tags);
        p.tags("TagSpecification", 2, "volume", &request.tags);
        p.tags("TagSpecification", 3, "fleet", &request.tags);
        crate::ec2_extra::dry_run_answer(self.call_once(&p).await)
    }

    async fn dry_run_run_instances(
        &self,
        request: crate::ec2_extra::RunInstancesDryRun,
    ) -> Result<()> {
        let mut p = Params::new("RunInstances");
        p.set("DryRun", true);
        p.set("MinCount", 1);
        p.set("MaxCount", 1);
        p.set(
            "LaunchTemplate.LaunchTemplateName",
            &request.launch_template,
        );
        p.set("LaunchTemplate.Version", "$Latest");
        p.set("InstanceType", &request.instance_type);
        // The subnet goes on the interfaces (never top-level SubnetId beside them, which EC2
        // rejects); the template's groups stay on its own interfaces.
        let primary = [crate::interfaces::LaunchTemplateInterface::default()];
        let interfaces = match request.network_interfaces.as_slice() {
            [] => &primary[..],
            list => list,
        };
        for (i, ni) in interfaces.iter().enumerate() {
            let prefix = format!("NetworkInterface.{}", i + 1);
            p.opt(&format!("{prefix}.NetworkCardIndex"), ni.network_card_index);
            p.set(format!("{prefix}.DeviceIndex"), ni.device_index);
            p.opt(
                &format!("{prefix}.InterfaceType"),
                ni.interface_type.as_ref(),
            );
            p.set(format!("{prefix}.SubnetId"), &request.subnet_id);
        }
        p.tags("TagSpecification", 1, "instance", &request.tags);
        p.tags("TagSpecification", 2, "volume", &request.tags);
        p.tags("TagSpecification", 3, "network-interface", &request.tags);
        crate::ec2_extra::dry_run_answer(self.call_once(&p).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_types_read_from_describe_instance_types() {
        let xml = r#"<DescribeInstanceTypesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
          <instanceTypeSet><item>
            <instanceType>g4dn.xlarge</instanceType>
            <vCpuInfo><defaultVCpus>4</defaultVCpus></vCpuInfo>
            <memoryInfo><sizeInMiB>16384</sizeInMiB></memoryInfo>
            <processorInfo><supportedArchitectures><item>x86_64</item></supportedArchitectures>
              <manufacturer>Intel</manufacturer><sustainedClockSpeedInGhz>2.5</sustainedClockSpeedInGhz></processorInfo>
            <gpuInfo><gpus><item><name>T4</name><manufacturer>NVIDIA</manufacturer><count>1</count>
              <memoryInfo><sizeInMiB>16384</sizeInMiB></memoryInfo></item></gpus></gpuInfo>
            <networkInfo><maximumNetworkInterfaces>3</maximumNetworkInterfaces>
              <ipv4AddressesPerInterface>10</ipv4AddressesPerInterface>
              <encryptionInTransitSupported>true</encryptionInTransitSupported></networkInfo>
            <instanceStorageInfo><totalSizeInGB>125</totalSizeInGB><nvmeSupport>required</nvmeSupport></instanceStorageInfo>
            <hypervisor>nitro</hypervisor>
            <supportedUsageClasses><item>on-demand</item><item>spot</item></supportedUsageClasses>
          </item></instanceTypeSet></DescribeInstanceTypesResponse>"#;
        let d = Document::parse(xml).unwrap();
        let item = items(set_of(&d, "instanceTypeSet")).next().unwrap();
        let info = instance_type_from_xml(item).unwrap();
        assert_eq!(info.name, "g4dn.xlarge");
        assert_eq!(
            (info.vcpu, info.memory_mib, info.architecture.as_str()),
            (4, 16384, "amd64")
        );
        assert_eq!(
            (
                info.gpu_count,
                info.gpu_name.as_deref(),
                info.gpu_manufacturer.as_deref()
            ),
            (1, Some("t4"), Some("nvidia"))
        );
        assert_eq!((info.max_enis, info.ipv4_per_eni), (3, 10));
        assert_eq!(info.local_nvme_gib, 125);
        assert_eq!(info.cpu_sustained_clock_mhz, Some(2500));
        assert!(info.spot_supported && info.encryption_in_transit);
        // The catalog fills what the API lacks.
        assert_eq!(
            info.network_bandwidth_mbps,
            catalog()
                .types
                .iter()
                .find(|t| t.name == "g4dn.xlarge")
                .unwrap()
                .network_bandwidth_mbps
        );
    }

    #[test]
    fn fleet_answers_with_instances_and_errors() {
        let xml = r#"<CreateFleetResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
          <fleetId>fleet-1</fleetId>
          <errorSet><item><errorCode>InsufficientInstanceCapacity</errorCode><errorMessage>none left</errorMessage>
            <launchTemplateAndOverrides><overrides><instanceType>m5.large</instanceType><availabilityZone>us-east-1a</availabilityZone></overrides></launchTemplateAndOverrides>
            <lifecycle>spot</lifecycle></item></errorSet>
          <fleetInstanceSet><item>
            <launchTemplateAndOverrides><overrides><instanceType>m5.xlarge</instanceType><availabilityZone>us-east-1b</availabilityZone><subnetId>subnet-2</subnetId></overrides></launchTemplateAndOverrides>
            <lifecycle>spot</lifecycle><instanceIds><item>i-0abc</item></instanceIds><instanceType>m5.xlarge</instanceType>
          </item></fleetInstanceSet></CreateFleetResponse>"#;
        let d = Document::parse(xml).unwrap();
        let errors: Vec<_> = items(set_of(&d, "errorSet")).collect();
        assert_eq!(errors.len(), 1);
        let inst: Vec<_> = items(set_of(&d, "fleetInstanceSet")).collect();
        assert_eq!(text(inst[0], "instanceType"), "m5.xlarge");
        assert_eq!(
            items(child(inst[0], "instanceIds")).next().unwrap().text(),
            Some("i-0abc")
        );
    }

    /// Upstream's capacity-type rule (`capacityTypeFromInstance`): reserved only with a
    /// reservation id *and* the `capacity-reservations-only` preference; spot by lifecycle.
    #[test]
    fn only_instances_launched_into_reservations_are_reserved() {
        let cases = [
            // (lifecycle, reservation id, preference, capacity type, reported reservation)
            (
                "",
                "cr-1",
                "capacity-reservations-only",
                "reserved",
                Some("cr-1"),
            ),
            ("", "cr-1", "open", "on-demand", None),
            ("", "cr-1", "none", "on-demand", None),
            ("", "cr-1", "", "on-demand", None),
            ("", "", "capacity-reservations-only", "on-demand", None),
            ("", "", "", "on-demand", None),
            ("spot", "", "none", "spot", None),
        ];
        for (lifecycle, reservation, preference, capacity_type, reported) in cases {
            let lifecycle = match lifecycle {
                "" => String::new(),
                l => format!("<instanceLifecycle>{l}</instanceLifecycle>"),
            };
            let reservation = match reservation {
                "" => String::new(),
                r => format!("<capacityReservationId>{r}</capacityReservationId>"),
            };
            let preference = match preference {
                "" => String::new(),
                p => format!(
                    "<capacityReservationSpecification><capacityReservationPreference>{p}</capacityReservationPreference></capacityReservationSpecification>"
                ),
            };
            let xml = format!(
                r#"<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><reservationSet><item><instancesSet><item>
                  <instanceId>i-1</instanceId><instanceType>m5.large</instanceType>{lifecycle}{reservation}{preference}
                </item></instancesSet></item></reservationSet></DescribeInstancesResponse>"#
            );
            let d = Document::parse(&xml).unwrap();
            let reservation_set = items(set_of(&d, "reservationSet")).next().unwrap();
            let item = items(child(reservation_set, "instancesSet"))
                .next()
                .unwrap();
            let instance = instance_from_xml(item);
            assert_eq!(
                (
                    instance.capacity_type.as_str(),
                    instance.capacity_reservation_id.as_deref()
                ),
                (capacity_type, reported),
                "{xml}"
            );
        }
    }

    #[test]
    fn query_lists_are_flattened() {
        let mut p = Params::new("DescribeSubnets");
        p.filters(&[
            Filter::new("tag:karpenter.sh/discovery", &["my cluster"]),
            Filter::new("subnet-id", &["subnet-1", "subnet-2"]),
        ]);
        let pairs: Vec<String> = p.0.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(
            pairs,
            [
                "Action=DescribeSubnets",
                "Version=2016-11-15",
                "Filter.1.Name=tag:karpenter.sh/discovery",
                "Filter.1.Value.1=my cluster",
                "Filter.2.Name=subnet-id",
                "Filter.2.Value.1=subnet-1",
                "Filter.2.Value.2=subnet-2",
            ]
        );
    }
}
