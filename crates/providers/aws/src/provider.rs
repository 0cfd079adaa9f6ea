//! The AWS cloud provider: the controller's [`CloudProvider`] over EC2.
//!
//! A launch resolves the NodeClaim's EC2NodeClass (subnets, security groups, AMIs, instance
//! profile), plans one CreateFleet (see [`crate::launch`]), makes sure a launch template exists
//! for each AMI, pod count and capacity reservation, and asks EC2 for one instance. Capacity
//! errors mark offerings unavailable so the next attempt picks others. Instances carry the
//! cluster, NodePool, NodeClaim and EC2NodeClass tags, which List and garbage collection find
//! them by.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::ec2nodeclass::{
    AmiFamily, EC2_NODE_CLASS_HASH_ANNOTATION, EC2_NODE_CLASS_HASH_VERSION,
    EC2_NODE_CLASS_HASH_VERSION_ANNOTATION, EC2NodeClass,
};
use base64::Engine;
use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use karpenter_api::NodeClassReference;
use karpenter_api::crd::Crd;
use karpenter_api::labels::{
    CAPACITY_TYPE_LABEL, INSTANCE_TYPE_LABEL, NODE_DO_NOT_SYNC_TAINTS_LABEL, NODE_POOL_LABEL,
    UNREGISTERED_TAINT_KEY, ZONE_LABEL,
};
use karpenter_api::{NodeClaim, NodeClaimStatus, NodePool, Operator};
use karpenter_cloudprovider::resolved::ResolvedTypes;
use karpenter_cloudprovider::{
    CloudProvider, CloudProviderError, NodeClassReadiness, RepairPolicy, Result,
};
use karpenter_core::instancetype::InstanceType;
use karpenter_core::scheduling::Requirement;
use karpenter_core::scheduling::requirements::node_claim_labels;
use tokio::sync::Mutex;

use crate::ec2::{
    Ec2Api, Filter, FleetOverride, FleetRequest, Instance, LaunchTemplateBlockDevice,
    LaunchTemplateData,
};
use crate::ec2_extra::{DryRuns, PlacementGroups};
use crate::iam::InstanceProfiles;
use crate::instancetype::{
    self, AWS_LABELS, InstanceTypeInfo, LABEL_CAPACITY_RESERVATION_ID,
    LABEL_CAPACITY_RESERVATION_TYPE, NodeClassSettings, ZoneInfo,
};
use crate::interfaces::{self, InterfaceInputs};
use crate::launch::{self, LaunchImage, LaunchSubnet, PlanError};
use crate::nodeclass::{self, NodeClassError, ResolvedNodeClass};
use crate::placementgroup;
use crate::pricing::Pricing;
use crate::pricing_api::PriceList;
use crate::ssm::ParameterStore;
use crate::unavailable::is_insufficient_capacity;
use crate::userdata::{self, Bootstrap};
use karpenter_cloudprovider::unavailable::UnavailableOfferings;

/// The tag naming the NodePool an instance was launched for.
pub const TAG_NODE_POOL: &str = "karpenter.sh/nodepool";
/// The tag naming the NodeClaim.
pub const TAG_NODE_CLAIM: &str = "karpenter.sh/nodeclaim";
/// The tag naming the EC2NodeClass.
pub const TAG_NODE_CLASS: &str = "karpenter.k8s.aws/ec2nodeclass";
/// The tag naming the cluster.
pub const TAG_CLUSTER_NAME: &str = "eks:eks-cluster-name";
/// The label naming the EC2NodeClass on nodes.
pub const LABEL_NODE_CLASS: &str = "karpenter.k8s.aws/ec2nodeclass";

/// How long instance types and offerings are reused before EC2 is asked again.
const INSTANCE_TYPES_TTL: Duration = Duration::from_secs(60 * 60);
/// How long on-demand prices are reused (upstream refreshes them twice a day).
const ON_DEMAND_PRICES_TTL: Duration = Duration::from_secs(12 * 60 * 60);
/// How long spot prices are reused.
const SPOT_PRICES_TTL: Duration = Duration::from_secs(5 * 60);
/// How long a NodeClass's resolution is reused.
const NODE_CLASS_TTL: Duration = Duration::from_secs(60);

/// What the provider needs to know about the cluster it launches nodes for.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AwsOptions {
    /// `CLUSTER_NAME`: tags instances and names instance profiles.
    pub cluster_name: String,
    /// `CLUSTER_ENDPOINT`: the API server nodes join.
    pub cluster_endpoint: String,
    /// The cluster CA bundle, base64.
    pub ca_bundle: Option<String>,
    /// The service CIDR, for AL2023's nodeadm.
    pub cluster_cidr: Option<String>,
    /// The Kubernetes minor version (`1.33`), for AMI aliases.
    pub kubernetes_version: String,
    /// The region.
    pub region: String,
    /// `VM_MEMORY_OVERHEAD_PERCENT` (0.075).
    pub vm_memory_overhead_percent: f64,
    /// `RESERVED_ENIS` (0).
    pub reserved_enis: i64,
    /// `ISOLATED_VPC`: the Price List API is out of reach; keep the embedded prices.
    pub isolated_vpc: bool,
    /// The cluster DNS service's address (`kube-system/kube-dns`): the kubelet's `clusterDNS`
    /// when the EC2NodeClass sets none; an IPv6 address makes the cluster IPv6 (interfaces
    /// get IPv6 addresses and prefixes), as upstream decides.
    pub kube_dns_ip: Option<String>,
    /// `DISABLE_DRY_RUN`: `ValidationSucceeded` without the dry-run permission checks.
    pub disable_dry_run: bool,
}

impl AwsOptions {
    /// Whether the cluster is IPv6: its DNS service has an IPv6 address.
    pub fn ipv6(&self) -> bool {
        self.kube_dns_ip
            .as_deref()
            .is_some_and(|ip| ip.parse::<std::net::Ipv6Addr>().is_ok())
    }
}

/// Every AWS call the provider makes, so one fake can stand in for AWS in tests.
pub trait AwsApi:
    Ec2Api + ParameterStore + InstanceProfiles + PriceList + PlacementGroups + DryRuns
{
}

impl<T> AwsApi for T where
    T: Ec2Api + ParameterStore + InstanceProfiles + PriceList + PlacementGroups + DryRuns
{
}

/// Where EC2NodeClasses are read from: the API server in the controller, a map in tests.
pub trait NodeClassStore: Send + Sync + 'static {
    /// The EC2NodeClass named `name`, if it exists.
    fn get(
        &self,
        name: &str,
    ) -> impl Future<Output = std::result::Result<Option<EC2NodeClass>, String>> + Send;
}

impl NodeClassStore for kube::Api<EC2NodeClass> {
    async fn get(&self, name: &str) -> std::result::Result<Option<EC2NodeClass>, String> {
        self.get_opt(name).await.map_err(|e| e.to_string())
    }
}

impl NodeClassStore for BTreeMap<String, EC2NodeClass> {
    async fn get(&self, name: &str) -> std::result::Result<Option<EC2NodeClass>, String> {
        Ok(BTreeMap::get(self, name).cloned())
    }
}

#[derive(Default)]
struct Catalog {
    infos: Vec<InstanceTypeInfo>,
    zones: BTreeMap<String, Vec<String>>,
    pricing: Pricing,
    types_at: Option<Instant>,
    spot_at: Option<Instant>,
    on_demand_at: Option<Instant>,
    /// Bumped whenever types, zones or prices change, so resolved types know they are stale.
    generation: u64,
}

/// A NodeClass's resolved instance types, and what they were resolved from.
/// The AWS provider.
pub struct AwsCloudProvider<A, S> {
    api: A,
    node_classes: S,
    options: AwsOptions,
    catalog: Mutex<Catalog>,
    resolved: Mutex<BTreeMap<String, (String, Instant, ResolvedNodeClass)>>,
    templates: Mutex<std::collections::BTreeSet<String>>,
    types: ResolvedTypes,
    unavailable: UnavailableOfferings,
    interruption_queue: Option<crate::sqs::SqsQueue>,
    /// The cluster's Kubernetes minor version, refreshed while running so AMI aliases follow
    /// a control-plane upgrade (see [`crate::version`]).
    kubernetes_version: std::sync::RwLock<String>,
}

fn other(e: impl std::error::Error + Send + Sync + 'static) -> CloudProviderError {
    CloudProviderError::other(e)
}

fn not_ready(e: NodeClassError) -> CloudProviderError {
    match e {
        NodeClassError::NotReady(m) => CloudProviderError::node_class_not_ready(m),
        NodeClassError::Aws(e) => other(e),
    }
}

/// `aws:///us-east-1a/i-0123` → `i-0123`.
pub fn instance_id(provider_id: &str) -> Option<&str> {
    let rest = provider_id.strip_prefix("aws:///")?;
    let (_, id) = rest.rsplit_once('/')?;
    id.starts_with("i-").then_some(id)
}

fn gib(quantity: &str) -> Option<i64> {
    let milli = karpenter_core::resources::parse_milli(quantity).ok()?;
    let bytes = milli / 1000;
    Some((bytes + (1 << 30) - 1) / (1 << 30))
}

impl<A, S> AwsCloudProvider<A, S>
where
    A: AwsApi,
    S: NodeClassStore,
{
    /// A provider over `api`, reading NodeClasses from `node_classes`.
    pub fn new(api: A, node_classes: S, options: AwsOptions) -> Self {
        let kubernetes_version = std::sync::RwLock::new(options.kubernetes_version.clone());
        Self {
            api,
            node_classes,
            options,
            catalog: Mutex::default(),
            resolved: Mutex::default(),
            templates: Mutex::default(),
            types: ResolvedTypes::default(),
            unavailable: UnavailableOfferings::default(),
            interruption_queue: None,
            kubernetes_version,
        }
    }

    /// The Kubernetes minor version (`1.33`) AMI aliases resolve for.
    pub fn kubernetes_version(&self) -> String {
        self.kubernetes_version
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Records the control plane's version; the next resolution of each EC2NodeClass uses it.
    /// Returns whether it changed.
    pub fn set_kubernetes_version(&self, version: &str) -> bool {
        let mut current = self
            .kubernetes_version
            .write()
            .unwrap_or_else(|e| e.into_inner());
        if *current == version {
            return false;
        }
        *current = version.to_string();
        true
    }

    /// With the SQS queue of interruption events the interruption controller reads.
    pub fn with_interruption_queue(mut self, queue: Option<crate::sqs::SqsQueue>) -> Self {
        self.interruption_queue = queue;
        self
    }

    /// The interruption queue, if one is set.
    pub fn interruption_queue(&self) -> Option<&crate::sqs::SqsQueue> {
        self.interruption_queue.as_ref()
    }

    /// Takes a capacity reservation's room to none until the next resolution reads EC2's
    /// count again (a minute at most): its instances are being reclaimed, so launching into it
    /// would fail (upstream marks it unavailable the same way).
    pub async fn mark_reservation_unavailable(&self, id: &str) {
        self.update_reservation(id, |available| *available = 0)
            .await;
    }

    /// Applies `update` to the room of reservation `id` in every cached resolution.
    async fn update_reservation(&self, id: &str, update: impl Fn(&mut i64)) {
        for (_, _, resolved) in self.resolved.lock().await.values_mut() {
            for reservation in resolved
                .capacity_reservations
                .iter_mut()
                .filter(|r| r.id == id)
            {
                update(&mut reservation.available);
            }
        }
    }

    /// Counts one launch into a capacity reservation against the resolved reservation until
    /// the next resolution reads EC2's count again (upstream's `MarkLaunched`): without it a
    /// second provisioning round within the minute counts on the instance just taken, plans a
    /// claim into a full reservation and only learns from the failed launch.
    async fn mark_reservation_launched(&self, id: &str) {
        self.update_reservation(id, |available| *available = (*available - 1).max(0))
            .await;
    }

    /// The AWS calls, for the checks that make their own (validation's dry runs).
    pub(crate) fn api(&self) -> &A {
        &self.api
    }

    /// Whether `ValidationSucceeded` skips the dry runs (`DISABLE_DRY_RUN`).
    pub(crate) fn dry_run_disabled(&self) -> bool {
        self.options.disable_dry_run
    }

    /// What validation's dry runs launch from, made the way a launch makes it: a NodeClaim of
    /// the NodeClass asking for on-demand capacity is planned, and the launch template of its
    /// cheapest instance type is made for real (the CreateLaunchTemplate check); CreateFleet
    /// is then tried with that type in every subnet, RunInstances subnet by subnet.
    pub(crate) async fn validation_launch(
        &self,
        class: &EC2NodeClass,
        resolved: &ResolvedNodeClass,
    ) -> Result<crate::validation::ValidationLaunch> {
        let types = self.types_for(class, resolved).await?;
        let mut claim = NodeClaim::default();
        claim.spec.node_class_ref.name = class.metadata.name.clone().unwrap_or_default();
        // Tagged as a launch is (with an empty NodePool), so IAM policies that demand the
        // NodePool tag judge the dry runs as they judge launches.
        claim.metadata.labels = Some(BTreeMap::from([(NODE_POOL_LABEL.into(), String::new())]));
        claim
            .spec
            .requirements
            .push(karpenter_api::NodeSelectorRequirementWithMinValues {
                key: CAPACITY_TYPE_LABEL.into(),
                operator: Operator::In,
                values: vec!["on-demand".into()],
                min_values: None,
            });
        let plan = launch::plan(
            &claim,
            &types,
            &launch_subnets(resolved),
            &launch_images(resolved),
            &[],
        )
        .map_err(|e| CloudProviderError::node_class_not_ready(e.to_string()))?;
        let cheapest = plan
            .by_image
            .iter()
            .flat_map(|(key, list)| list.iter().map(move |o| (key, o)))
            .min_by(|a, b| a.1.price.total_cmp(&b.1.price))
            .map(|(key, o)| (key.clone(), o.clone()))
            .ok_or_else(|| CloudProviderError::insufficient_capacity("no offering to validate"))?;
        let (key, chosen) = cheapest;
        let overrides = plan.by_image[&key]
            .iter()
            .filter(|o| o.instance_type == chosen.instance_type)
            .cloned()
            .collect();
        let groups: Vec<String> = resolved
            .security_groups
            .iter()
            .map(|g| g.id.clone())
            .collect();
        let network_interfaces = self.template_interfaces(class, &groups, key.efa);
        let one = launch::FleetPlan {
            capacity_type: plan.capacity_type.clone(),
            by_image: BTreeMap::from([(key, overrides)]),
        };
        let tags = self.tags(&claim, class);
        let templates = self
            .ensure_launch_templates(&claim, class, resolved, &one, &tags, None)
            .await?;
        let subnets: Vec<String> = resolved.subnets.iter().map(|s| s.id.clone()).collect();
        Ok(crate::validation::ValidationLaunch {
            launch_template: templates
                .into_iter()
                .next()
                .map(|(n, _)| n)
                .unwrap_or_default(),
            overrides: subnets
                .iter()
                .map(|s| FleetOverride {
                    instance_type: chosen.instance_type.clone(),
                    subnet_id: s.clone(),
                    zone: String::new(),
                    priority: None,
                })
                .collect(),
            instance_type: chosen.instance_type,
            subnets,
            network_interfaces,
            tags,
        })
    }

    /// The unavailable-offerings cache (interruption handling marks spot offerings in it).
    pub fn unavailable(&self) -> &UnavailableOfferings {
        &self.unavailable
    }

    /// Refreshes instance types, offerings and spot prices when stale. EC2's answer replaces
    /// the embedded catalog; if EC2 cannot be asked, the last answer (or the catalog) stays.
    async fn refresh(&self) -> Result<()> {
        let mut catalog = self.catalog.lock().await;
        let now = Instant::now();
        if catalog
            .types_at
            .is_none_or(|t| now - t > INSTANCE_TYPES_TTL)
        {
            let answer = async {
                let infos = self.api.describe_instance_types().await?;
                let offerings = self.api.describe_instance_type_offerings().await?;
                Ok::<_, crate::http::AwsError>((infos, offerings))
            };
            match answer.await {
                Ok((infos, offerings)) => {
                    let mut zones: BTreeMap<String, Vec<String>> = BTreeMap::new();
                    for (t, z) in offerings {
                        zones.entry(t).or_default().push(z);
                    }
                    if catalog.types_at.is_none() {
                        catalog.pricing = Pricing::embedded();
                    }
                    catalog.infos = infos;
                    catalog.generation += 1;
                    catalog.zones = zones;
                    catalog.types_at = Some(now);
                }
                // Stale instance types beat none: keep launching while EC2 is unreachable.
                Err(e) if !catalog.infos.is_empty() => {
                    tracing::warn!(error = %e, "refreshing instance types; keeping the last answer");
                    // Asked again in five minutes, not on every launch.
                    catalog.types_at =
                        now.checked_sub(INSTANCE_TYPES_TTL - Duration::from_secs(300));
                }
                Err(e) => return Err(other(e)),
            }
        }
        if !self.options.isolated_vpc
            && catalog
                .on_demand_at
                .is_none_or(|t| now - t > ON_DEMAND_PRICES_TTL)
        {
            // Tried once per period either way: the embedded prices are a fine fallback.
            catalog.on_demand_at = Some(now);
            match self.api.on_demand_prices().await {
                Ok(prices) => {
                    catalog.pricing.update_on_demand(prices);
                    catalog.generation += 1;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "reading on-demand prices; keeping the embedded ones")
                }
            }
        }
        if catalog.spot_at.is_none_or(|t| now - t > SPOT_PRICES_TTL) {
            match self.api.describe_spot_price_history().await {
                Ok(rows) => {
                    catalog.pricing.update_spot(rows);
                    catalog.generation += 1;
                    catalog.spot_at = Some(now);
                }
                // Without spot prices spot is not offered; on-demand still launches.
                Err(e) => tracing::warn!(error = %e, "reading spot prices"),
            }
        }
        Ok(())
    }

    async fn node_class(&self, name: &str) -> Result<EC2NodeClass> {
        match self.node_classes.get(name).await {
            Ok(Some(c)) => Ok(c),
            Ok(None) => Err(CloudProviderError::node_class_not_ready(format!(
                "EC2NodeClass {name:?} not found"
            ))),
            Err(e) => Err(CloudProviderError::Other(e.into())),
        }
    }

    /// What a NodeClass's selectors resolve to now (cached for a minute), for its status.
    pub async fn resolve_node_class(
        &self,
        class: &EC2NodeClass,
    ) -> std::result::Result<ResolvedNodeClass, NodeClassError> {
        self.resolve_cached(class).await
    }

    async fn resolve(&self, class: &EC2NodeClass) -> Result<ResolvedNodeClass> {
        self.resolve_cached(class).await.map_err(not_ready)
    }

    async fn resolve_cached(
        &self,
        class: &EC2NodeClass,
    ) -> std::result::Result<ResolvedNodeClass, NodeClassError> {
        let name = class.metadata.name.clone().unwrap_or_default();
        // Exactly what resolution reads, so any change to it resolves afresh.
        let spec = &class.spec;
        let k8s_version = self.kubernetes_version();
        let hash = format!(
            "{:?}",
            (
                &k8s_version,
                &spec.subnet_selector_terms,
                &spec.security_group_selector_terms,
                &spec.ami_selector_terms,
                &spec.capacity_reservation_selector_terms,
                &spec.role,
                &spec.instance_profile,
                &spec.placement_group_selector,
            )
        );
        if let Some((h, at, r)) = self.resolved.lock().await.get(&name)
            && *h == hash
            && at.elapsed() < NODE_CLASS_TTL
        {
            return Ok(r.clone());
        }
        let resolved = nodeclass::resolve(
            &self.api,
            &name,
            &class.spec,
            &self.options.cluster_name,
            &k8s_version,
            k8s_openapi::jiff::Timestamp::now(),
        )
        .await?;
        self.resolved
            .lock()
            .await
            .insert(name, (hash, Instant::now(), resolved.clone()));
        Ok(resolved)
    }

    fn settings(&self, class: &EC2NodeClass) -> NodeClassSettings {
        NodeClassSettings::from_spec(
            &class.spec,
            self.options.vm_memory_overhead_percent,
            self.options.reserved_enis,
        )
    }

    /// The NodeClass's instance types. Resolving the whole catalog takes ~12 ms, and a
    /// provisioning batch asks once per NodePool and once per launch, so the answer is reused
    /// until the catalog, prices, settings, subnets, reservations or unavailable offerings
    /// change (or [`RESOLVED_TYPES_TTL`](karpenter_cloudprovider::resolved::RESOLVED_TYPES_TTL) passes, so expired capacity errors show).
    async fn types_for(
        &self,
        class: &EC2NodeClass,
        resolved: &ResolvedNodeClass,
    ) -> Result<Vec<Arc<InstanceType>>> {
        self.refresh().await?;
        let catalog = self.catalog.lock().await;
        let settings = self.settings(class);
        let subnet_zones: Vec<ZoneInfo> = resolved
            .subnets
            .iter()
            .map(|s| ZoneInfo {
                zone: s.zone.clone(),
                zone_id: s.zone_id.clone(),
            })
            .collect();
        let reservations = reservations(resolved);
        let key = format!(
            "{:?}{subnet_zones:?}{reservations:?}{}/{}",
            settings,
            catalog.generation,
            self.unavailable.version()
        );
        let name = class.metadata.name.clone().unwrap_or_default();
        let now = Instant::now();
        if let Some(types) = self.types.get(&name, &key, now) {
            return Ok(types);
        }
        let unavailable =
            |t: &str, z: &str, ct: &str| self.unavailable.is_unavailable(t, z, ct, now);
        let types: Vec<Arc<InstanceType>> = catalog
            .infos
            .iter()
            .filter_map(|info| {
                let zones = catalog.zones.get(&info.name)?;
                instancetype::resolve_with_reservations(
                    info,
                    &self.options.region,
                    zones,
                    &subnet_zones,
                    &settings,
                    &catalog.pricing,
                    &reservations,
                    &unavailable,
                )
            })
            .map(Arc::new)
            .collect();
        self.types.put(&name, key, types.clone(), now);
        Ok(types)
    }

    fn tags(&self, claim: &NodeClaim, class: &EC2NodeClass) -> BTreeMap<String, String> {
        let mut tags = class.spec.tags.clone();
        let cluster = &self.options.cluster_name;
        tags.insert(format!("kubernetes.io/cluster/{cluster}"), "owned".into());
        tags.insert(TAG_CLUSTER_NAME.into(), cluster.clone());
        tags.insert(
            TAG_NODE_CLASS.into(),
            class.metadata.name.clone().unwrap_or_default(),
        );
        if let Some(pool) = claim
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(NODE_POOL_LABEL))
        {
            tags.insert(TAG_NODE_POOL.into(), pool.clone());
        }
        tags.insert(
            TAG_NODE_CLAIM.into(),
            claim.metadata.name.clone().unwrap_or_default(),
        );
        tags
    }

    fn bootstrap(
        &self,
        claim: &NodeClaim,
        class: &EC2NodeClass,
        capacity_type: &str,
        pods: i64,
    ) -> Bootstrap {
        let mut labels = node_claim_labels(claim, &AWS_LABELS);
        labels.insert(CAPACITY_TYPE_LABEL.into(), capacity_type.into());
        labels.insert(
            LABEL_NODE_CLASS.into(),
            class.metadata.name.clone().unwrap_or_default(),
        );
        labels.insert(NODE_DO_NOT_SYNC_TAINTS_LABEL.into(), "true".into());
        let mut taints: Vec<Taint> = claim.spec.taints.clone();
        taints.extend(claim.spec.startup_taints.iter().cloned());
        taints.push(Taint {
            key: UNREGISTERED_TAINT_KEY.into(),
            effect: "NoExecute".into(),
            ..Default::default()
        });
        Bootstrap {
            cluster_name: self.options.cluster_name.clone(),
            cluster_endpoint: self.options.cluster_endpoint.clone(),
            ca_bundle: self.options.ca_bundle.clone(),
            cluster_cidr: self.options.cluster_cidr.clone(),
            labels,
            taints,
            kubelet: {
                let mut kubelet = class.spec.kubelet.clone().unwrap_or_default();
                // The cluster's DNS service, unless the NodeClass names its own (upstream).
                if let Some(ip) = &self.options.kube_dns_ip
                    && !kubelet.contains_key("clusterDNS")
                {
                    kubelet.insert("clusterDNS".into(), serde_json::json!([ip]));
                }
                kubelet
            },
            max_pods: Some(pods),
            instance_store_raid0: class.spec.instance_store_policy.as_deref() == Some("RAID0"),
            custom: class.spec.user_data.clone(),
        }
    }

    fn block_devices(class: &EC2NodeClass) -> Vec<LaunchTemplateBlockDevice> {
        if class.spec.block_device_mappings.is_empty() {
            // The family's default root volume: 20 GiB encrypted gp3 (Bottlerocket: a 4 GiB
            // OS volume and a 20 GiB data volume).
            let volume = |device: &str, size: i64| LaunchTemplateBlockDevice {
                device_name: device.into(),
                volume_size_gib: Some(size),
                volume_type: Some("gp3".into()),
                encrypted: Some(true),
                ..Default::default()
            };
            return match class.spec.ami_family() {
                AmiFamily::Bottlerocket => vec![volume("/dev/xvda", 4), volume("/dev/xvdb", 20)],
                AmiFamily::Custom => Vec::new(),
                f if f.is_windows() => vec![volume("/dev/sda1", 50)],
                _ => vec![volume("/dev/xvda", 20)],
            };
        }
        class
            .spec
            .block_device_mappings
            .iter()
            .map(|b| {
                let ebs = b.ebs.clone().unwrap_or_default();
                LaunchTemplateBlockDevice {
                    device_name: b.device_name.clone().unwrap_or_default(),
                    volume_size_gib: ebs.volume_size.as_deref().and_then(gib),
                    volume_type: ebs.volume_type,
                    iops: ebs.iops,
                    throughput: ebs.throughput,
                    encrypted: ebs.encrypted,
                    kms_key_id: ebs.kms_key_id,
                    snapshot_id: ebs.snapshot_id,
                    delete_on_termination: ebs.delete_on_termination,
                }
            })
            .collect()
    }

    /// The interfaces a launch template of `class` attaches, for `efa` EFA interfaces.
    fn template_interfaces(
        &self,
        class: &EC2NodeClass,
        security_groups: &[String],
        efa: i64,
    ) -> Vec<interfaces::LaunchTemplateInterface> {
        interfaces::network_interfaces(&InterfaceInputs {
            spec: &class.spec.network_interfaces,
            efa_count: efa,
            ipv6: self.options.ipv6(),
            ip_prefix_count: class.spec.ip_prefix_count,
            associate_public_ip: class.spec.associate_public_ip_address,
            security_groups,
            connection_tracking: class.spec.connection_tracking.as_ref(),
        })
    }

    /// Makes sure the launch template of each of `plan`'s AMI, pod count and reservation
    /// exists, and returns each with the overrides the fleet may launch from it.
    pub(crate) async fn ensure_launch_templates(
        &self,
        claim: &NodeClaim,
        class: &EC2NodeClass,
        resolved: &ResolvedNodeClass,
        plan: &launch::FleetPlan,
        tags: &BTreeMap<String, String>,
        reservation_type: Option<&str>,
    ) -> Result<Vec<(String, Vec<FleetOverride>)>> {
        let metadata = &class.spec.metadata_options;
        let security_groups: Vec<String> = resolved
            .security_groups
            .iter()
            .map(|g| g.id.clone())
            .collect();
        let capacity_block = reservation_type == Some(launch::CAPACITY_BLOCK);
        let mut launch_templates = Vec::new();
        for (key, overrides) in &plan.by_image {
            let mut bootstrap = self.bootstrap(claim, class, &plan.capacity_type, key.pods);
            if let Some(reservation) = &key.reservation {
                bootstrap
                    .labels
                    .insert(LABEL_CAPACITY_RESERVATION_ID.into(), reservation.clone());
                if let Some(kind) = reservation_type {
                    bootstrap
                        .labels
                        .insert(LABEL_CAPACITY_RESERVATION_TYPE.into(), kind.to_string());
                }
            }
            let user_data = userdata::render(class.spec.ami_family(), &bootstrap)
                .map_err(|e| CloudProviderError::node_class_not_ready(e.to_string()))?;
            let data = LaunchTemplateData {
                image_id: key.image.clone(),
                capacity_reservation_id: key.reservation.clone(),
                capacity_reservation_preference: Some(LaunchTemplateData::reservation_preference(
                    key.reservation.as_deref(),
                )),
                user_data: base64::engine::general_purpose::STANDARD.encode(user_data),
                instance_profile: resolved.instance_profile.clone(),
                network_interfaces: self.template_interfaces(class, &security_groups, key.efa),
                security_groups: security_groups.clone(),
                market_type: capacity_block.then(|| launch::CAPACITY_BLOCK.to_string()),
                nested_virtualization: class
                    .spec
                    .cpu_options
                    .as_ref()
                    .and_then(|c| c.nested_virtualization.clone()),
                block_devices: Self::block_devices(class),
                http_tokens: metadata.http_tokens.clone(),
                http_endpoint: metadata.http_endpoint.clone(),
                http_protocol_ipv6: metadata.http_protocol_ipv6.clone(),
                http_put_response_hop_limit: metadata.http_put_response_hop_limit,
                monitoring: class.spec.detailed_monitoring.unwrap_or(false),
                tags: tags
                    .iter()
                    .filter(|(k, _)| k.as_str() != TAG_NODE_CLAIM)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                placement: resolved
                    .placement_group
                    .as_ref()
                    .map(|g| (g.id.clone(), placementgroup::partition(claim, g))),
            };
            let name = self.ensure_launch_template(data).await?;
            launch_templates.push((
                name,
                overrides
                    .iter()
                    .map(|o| FleetOverride {
                        instance_type: o.instance_type.clone(),
                        subnet_id: o.subnet_id.clone(),
                        zone: o.zone.clone(),
                        priority: None,
                    })
                    .collect(),
            ));
        }
        Ok(launch_templates)
    }

    /// Makes sure the launch template for this data exists; its name is a hash of the data,
    /// so a change in any input is a new template and a retry finds the old one.
    async fn ensure_launch_template(&self, data: LaunchTemplateData) -> Result<String> {
        let hash = karpenter_api::hash::fnv64(&format!("{}{data:?}", self.options.cluster_name));
        let name = format!("karpenter.k8s.aws/{hash:016x}");
        if self.templates.lock().await.contains(&name) {
            return Ok(name);
        }
        let existing: Vec<String> = self
            .api
            .describe_launch_templates(vec![Filter::new("launch-template-name", &[&name])])
            .await
            .map(|found| found.into_iter().map(|(n, _)| n).collect())
            .or_else(|e| match e.code() {
                Some(c) if c.contains("NotFound") => Ok(Vec::new()),
                _ => Err(e),
            })
            .map_err(other)?;
        if !existing.contains(&name) {
            match self.api.create_launch_template(name.clone(), data).await {
                Ok(()) => {}
                // Another replica or an earlier attempt made it first.
                Err(e) if e.code() == Some("InvalidLaunchTemplateName.AlreadyExistsException") => {}
                Err(e) => return Err(other(e)),
            }
        }
        self.templates.lock().await.insert(name.clone());
        Ok(name)
    }

    fn claim_for(&self, instance: &Instance, it: Option<&InstanceType>) -> NodeClaim {
        let mut labels: BTreeMap<String, String> = BTreeMap::new();
        if let Some(it) = it {
            for r in it
                .requirements
                .iter()
                .filter(|r| r.operator() == Operator::In && r.values().len() == 1)
            {
                labels.insert(r.key().into(), r.values().next().unwrap_or_default().into());
            }
        }
        labels.insert(INSTANCE_TYPE_LABEL.into(), instance.instance_type.clone());
        labels.insert(ZONE_LABEL.into(), instance.zone.clone());
        labels.insert(CAPACITY_TYPE_LABEL.into(), instance.capacity_type.clone());
        match &instance.capacity_reservation_id {
            Some(id) => {
                labels.insert(LABEL_CAPACITY_RESERVATION_ID.into(), id.clone());
            }
            None => {
                labels.remove(LABEL_CAPACITY_RESERVATION_ID);
            }
        }
        if let Some(pool) = instance.tags.get(TAG_NODE_POOL) {
            labels.insert(NODE_POOL_LABEL.into(), pool.clone());
        }
        let created = instance
            .launch_time
            .parse::<k8s_openapi::jiff::Timestamp>()
            .ok()
            .map(Time);
        NodeClaim {
            metadata: ObjectMeta {
                name: instance.tags.get(TAG_NODE_CLAIM).cloned(),
                labels: Some(labels),
                creation_timestamp: created,
                ..Default::default()
            },
            spec: Default::default(),
            status: Some(NodeClaimStatus {
                provider_id: Some(format!("aws:///{}/{}", instance.zone, instance.id)),
                image_id: Some(instance.image_id.clone()).filter(|i| !i.is_empty()),
                capacity: it.map(|t| t.capacity.to_list()).unwrap_or_default(),
                allocatable: it.map(|t| t.allocatable().to_list()).unwrap_or_default(),
                ..Default::default()
            }),
        }
    }

    /// Deletes the launch templates this cluster made for EC2NodeClasses that no longer exist
    /// (upstream deletes them with the NodeClass); returns how many went.
    pub async fn collect_launch_templates(
        &self,
        node_classes: &[String],
    ) -> std::result::Result<usize, crate::http::AwsError> {
        let templates = self
            .api
            .describe_launch_templates(vec![
                Filter::new(
                    &format!("tag:{TAG_CLUSTER_NAME}"),
                    &[&self.options.cluster_name],
                ),
                Filter::new("tag-key", &[TAG_NODE_CLASS]),
            ])
            .await?;
        let mut deleted = 0;
        for (name, tags) in templates {
            let owner = tags.get(TAG_NODE_CLASS).cloned().unwrap_or_default();
            // Only this provider's templates of this cluster, and only orphans.
            if !name.starts_with("karpenter.k8s.aws/")
                || tags.get(TAG_CLUSTER_NAME) != Some(&self.options.cluster_name)
                || node_classes.contains(&owner)
            {
                continue;
            }
            match self.api.delete_launch_template(name.clone()).await {
                Ok(()) => deleted += 1,
                Err(e) if e.code().is_some_and(|c| c.contains("NotFound")) => {}
                Err(e) => return Err(e),
            }
            self.templates.lock().await.remove(&name);
            tracing::info!(launch_template = %name, ec2nodeclass = %owner, "deleted orphaned launch template");
        }
        Ok(deleted)
    }

    /// A launched claim carries the hash of the NodeClass it was launched from, for drift.
    fn launched(&self, mut out: NodeClaim, class: &EC2NodeClass) -> NodeClaim {
        out.metadata.creation_timestamp = None;
        let annotations = out.metadata.annotations.get_or_insert_with(BTreeMap::new);
        annotations.insert(EC2_NODE_CLASS_HASH_ANNOTATION.into(), class.hash());
        annotations.insert(
            EC2_NODE_CLASS_HASH_VERSION_ANNOTATION.into(),
            EC2_NODE_CLASS_HASH_VERSION.into(),
        );
        out
    }

    async fn describe(&self, provider_id: &str) -> Result<Instance> {
        let id = instance_id(provider_id).ok_or_else(|| {
            CloudProviderError::not_found(format!("not an EC2 providerID: {provider_id:?}"))
        })?;
        let found = match self
            .api
            .describe_instances(vec![id.to_string()], Vec::new())
            .await
        {
            Ok(found) => found,
            Err(e) if e.code() == Some("InvalidInstanceID.NotFound") => Vec::new(),
            Err(e) => return Err(other(e)),
        };
        found
            .into_iter()
            .find(|i| i.id == id && i.state != "terminated")
            .ok_or_else(|| CloudProviderError::not_found(format!("instance {id} not found")))
    }
}

impl<A, S> CloudProvider for AwsCloudProvider<A, S>
where
    A: AwsApi,
    S: NodeClassStore,
{
    fn name(&self) -> &'static str {
        "aws"
    }

    fn node_classes(&self) -> &'static [Crd] {
        crate::CRDS
    }

    /// The status loop ([`crate::nodeclass_status`]) writes the `Ready` condition; this reads it.
    async fn node_class_readiness(
        &self,
        reference: &NodeClassReference,
    ) -> Result<NodeClassReadiness> {
        if !self.supports(reference) {
            return Ok(NodeClassReadiness::NotFound);
        }
        NodeClassReadiness::of_lookup(self.node_classes.get(&reference.name).await)
    }

    /// Upstream's AWS policies: not Ready for 30 minutes, or an accelerator, storage,
    /// network, kernel or container runtime problem reported by the node monitoring agent.
    fn repair_policies(&self) -> Vec<RepairPolicy> {
        crate::catalog::repair_policies()
    }

    async fn create(&self, claim: &NodeClaim) -> Result<NodeClaim> {
        let class = self.node_class(&claim.spec.node_class_ref.name).await?;
        // Launched before (a retry after a lost answer, a restart): that instance, not a
        // second one.
        let claim_name = claim.metadata.name.clone().unwrap_or_default();
        let existing = self
            .api
            .describe_instances(
                Vec::new(),
                vec![
                    Filter::new(&format!("tag:{TAG_NODE_CLAIM}"), &[&claim_name]),
                    Filter::new(
                        &format!("tag:{TAG_CLUSTER_NAME}"),
                        &[&self.options.cluster_name],
                    ),
                    Filter::new("instance-state-name", &["pending", "running"]),
                ],
            )
            .await
            .map_err(other)?;
        if let Some(instance) = existing.first() {
            let resolved = self.resolve(&class).await?;
            let types = self.types_for(&class, &resolved).await?;
            let it = types.iter().find(|t| t.name == instance.instance_type);
            let out = self.launched(self.claim_for(instance, it.map(|t| &**t)), &class);
            return Ok(placed(out, claim, &resolved));
        }
        let resolved = self.resolve(&class).await?;
        let types = self.types_for(&class, &resolved).await?;
        let subnets = launch_subnets(&resolved);
        let images = launch_images(&resolved);
        let mut plan = launch::plan(claim, &types, &subnets, &images, &reservations(&resolved))
            .map_err(|e| match e {
                PlanError::NothingFits => CloudProviderError::insufficient_capacity(e.to_string()),
                PlanError::NoImage(_) => {
                    CloudProviderError::node_class_not_ready(format!("spec.amiSelectorTerms: {e}"))
                }
            })?;
        // One kind of reservation per fleet: Capacity Blocks launch under their own market type.
        let reservation_type = launch::keep_one_reservation_type(&mut plan, |id| {
            resolved
                .capacity_reservations
                .iter()
                .find(|r| r.id == id)
                .map_or_else(|| "default".to_string(), |r| r.reservation_type.clone())
        });
        let capacity_block = reservation_type.as_deref() == Some(launch::CAPACITY_BLOCK);
        let tags = self.tags(claim, &class);
        let launch_templates = self
            .ensure_launch_templates(
                claim,
                &class,
                &resolved,
                &plan,
                &tags,
                reservation_type.as_deref(),
            )
            .await?;
        let result = self
            .api
            .create_fleet(FleetRequest {
                capacity_type: plan.capacity_type.clone(),
                launch_templates,
                tags,
                context: class.spec.context.clone(),
                capacity_block,
            })
            .await
            .map_err(|e| match e.code() {
                Some(code) if is_insufficient_capacity(code) => {
                    CloudProviderError::insufficient_capacity(e.to_string())
                }
                _ => other(e),
            })?;
        let now = Instant::now();
        for error in result
            .errors
            .iter()
            .filter(|e| is_insufficient_capacity(&e.code))
        {
            self.unavailable
                .mark(&error.instance_type, &error.zone, &plan.capacity_type, now);
        }
        let Some(launched) = result.instances.first() else {
            let reasons: Vec<String> = result
                .errors
                .iter()
                .map(|e| format!("{}: {}", e.code, e.message))
                .collect();
            let message = format!("CreateFleet launched nothing: {}", reasons.join("; "));
            return Err(
                if result
                    .errors
                    .iter()
                    .all(|e| is_insufficient_capacity(&e.code))
                {
                    CloudProviderError::insufficient_capacity(message)
                } else {
                    CloudProviderError::Other(message.into())
                },
            );
        };
        let it = types.iter().find(|t| t.name == launched.instance_type);
        // The template the fleet used: the one whose overrides hold the launched type and zone.
        let key = plan
            .by_image
            .iter()
            .find(|(_, list)| {
                list.iter()
                    .any(|o| o.instance_type == launched.instance_type && o.zone == launched.zone)
            })
            .map(|(key, _)| key.clone());
        let reserved = plan.capacity_type == "reserved";
        let instance = Instance {
            id: launched.id.clone(),
            instance_type: launched.instance_type.clone(),
            zone: launched.zone.clone(),
            capacity_type: if reserved {
                "reserved".into()
            } else {
                launched.capacity_type.clone()
            },
            image_id: key.as_ref().map(|k| k.image.clone()).unwrap_or_default(),
            capacity_reservation_id: key.and_then(|k| k.reservation),
            tags: self.tags(claim, &class),
            ..Default::default()
        };
        if let Some(id) = &instance.capacity_reservation_id {
            self.mark_reservation_launched(id).await;
        }
        let out = self.launched(self.claim_for(&instance, it.map(|t| &**t)), &class);
        Ok(placed(out, claim, &resolved))
    }

    async fn delete(&self, claim: &NodeClaim) -> Result<()> {
        let provider_id = claim
            .status
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .unwrap_or_default();
        let instance = self.describe(provider_id).await?;
        if instance.state == "shutting-down" {
            // Going; asked again until it is gone.
            return Ok(());
        }
        match self
            .api
            .terminate_instances(vec![instance.id.clone()])
            .await
        {
            Ok(()) => Ok(()),
            Err(e) if e.code() == Some("InvalidInstanceID.NotFound") => {
                Err(CloudProviderError::not_found(instance.id))
            }
            Err(e) => Err(other(e)),
        }
    }

    async fn get(&self, provider_id: &str) -> Result<NodeClaim> {
        // Labels from the instance; capacity is the launch's (the NodeClass's kubelet settings
        // decide it, and the claim already carries it).
        let instance = self.describe(provider_id).await?;
        Ok(self.claim_for(&instance, None))
    }

    async fn list(&self) -> Result<Vec<NodeClaim>> {
        let filters = vec![
            Filter::new("tag-key", &[TAG_NODE_POOL]),
            Filter::new(
                &format!("tag:{TAG_CLUSTER_NAME}"),
                &[&self.options.cluster_name],
            ),
            Filter::new(
                "instance-state-name",
                &["pending", "running", "stopping", "stopped", "shutting-down"],
            ),
        ];
        let instances = self
            .api
            .describe_instances(Vec::new(), filters)
            .await
            .map_err(other)?;
        Ok(instances.iter().map(|i| self.claim_for(i, None)).collect())
    }

    async fn is_drifted(&self, claim: &NodeClaim) -> Result<Option<String>> {
        let class = match self.node_class(&claim.spec.node_class_ref.name).await {
            Ok(c) => c,
            Err(CloudProviderError::NodeClassNotReady(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        if let Some(reason) = class.static_drift(claim) {
            return Ok(Some(reason.into()));
        }
        let resolved = match self.resolve(&class).await {
            Ok(r) => r,
            // A NodeClass that resolves nothing now is not a reason to replace nodes.
            Err(CloudProviderError::NodeClassNotReady(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        let provider_id = claim
            .status
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .unwrap_or_default();
        let instance = match self.describe(provider_id).await {
            Ok(i) => i,
            Err(CloudProviderError::NotFound(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        let placement_drifted =
            placementgroup::is_drifted(claim, resolved.placement_group.as_ref());
        Ok(drift_reason(&instance, &resolved)
            .or_else(|| placement_drifted.then(|| "PlacementGroupDrift".into())))
    }

    async fn instance_types(&self, node_pool: &NodePool) -> Result<Vec<Arc<InstanceType>>> {
        let class = self
            .node_class(&node_pool.spec.template.spec.node_class_ref.name)
            .await?;
        let resolved = self.resolve(&class).await?;
        self.types_for(&class, &resolved).await
    }

    fn provider_labels(&self) -> Vec<String> {
        AWS_LABELS.iter().map(|s| s.to_string()).collect()
    }
}

/// The resolved subnets as a launch plans with them.
fn launch_subnets(resolved: &ResolvedNodeClass) -> Vec<LaunchSubnet> {
    resolved
        .subnets
        .iter()
        .map(|s| LaunchSubnet {
            id: s.id.clone(),
            zone: s.zone.clone(),
            available_ips: s.available_ips,
        })
        .collect()
}

/// The resolved images as a launch plans with them, newest first: the plan takes the first
/// image each type can boot.
fn launch_images(resolved: &ResolvedNodeClass) -> Vec<LaunchImage> {
    resolved
        .images
        .iter()
        .map(|i| LaunchImage {
            id: i.id.clone(),
            requirements: nodeclass::image_requirements(i)
                .into_iter()
                .map(|(key, op, values)| Requirement::new(key, op, &values))
                .collect(),
        })
        .collect()
}

/// A launched NodeClaim with the labels of where it launched: the placement group (and
/// partition), and the type of the capacity reservation it runs in (`default` or
/// `capacity-block`).
fn placed(mut out: NodeClaim, claim: &NodeClaim, resolved: &ResolvedNodeClass) -> NodeClaim {
    let labels = out.metadata.labels.get_or_insert_with(BTreeMap::new);
    if let Some(group) = &resolved.placement_group {
        labels.extend(placementgroup::labels(
            group,
            placementgroup::partition(claim, group),
        ));
    }
    let reservation_type = labels.get(LABEL_CAPACITY_RESERVATION_ID).and_then(|id| {
        resolved
            .capacity_reservations
            .iter()
            .find(|r| r.id == *id)
            .map(|r| r.reservation_type.clone())
    });
    if let Some(t) = reservation_type {
        labels.insert(LABEL_CAPACITY_RESERVATION_TYPE.into(), t);
    }
    out
}

/// The resolved reservations as the instance-type code takes them.
fn reservations(resolved: &ResolvedNodeClass) -> Vec<instancetype::Reservation> {
    resolved
        .capacity_reservations
        .iter()
        .map(|r| instancetype::Reservation {
            id: r.id.clone(),
            instance_type: r.instance_type.clone(),
            zone: r.zone.clone(),
            available: r.available,
        })
        .collect()
}

/// Why a running instance no longer matches its NodeClass's resolved selectors, in upstream's
/// order: its AMI, its security groups, its subnet, its capacity reservation. (The placement
/// group, judged by the NodeClaim's label, comes after these.)
pub fn drift_reason(instance: &Instance, resolved: &ResolvedNodeClass) -> Option<String> {
    if !instance.image_id.is_empty() && !resolved.images.iter().any(|i| i.id == instance.image_id) {
        return Some("AMIDrift".into());
    }
    let mut have: Vec<&str> = instance
        .security_groups
        .iter()
        .map(String::as_str)
        .collect();
    let mut want: Vec<&str> = resolved
        .security_groups
        .iter()
        .map(|g| g.id.as_str())
        .collect();
    have.sort_unstable();
    want.sort_unstable();
    if have != want {
        return Some("SecurityGroupDrift".into());
    }
    if !instance.subnet_id.is_empty()
        && !resolved.subnets.iter().any(|s| s.id == instance.subnet_id)
    {
        return Some("SubnetDrift".into());
    }
    // Only reserved capacity can drift from the reservations: an on-demand instance (one that
    // fell back from reserved capacity, or one EC2 placed in an open reservation on its own)
    // matches any selector, whatever reservation EC2 reports it in.
    if instance.capacity_type == "reserved"
        && let Some(id) = &instance.capacity_reservation_id
        && !resolved.capacity_reservations.iter().any(|c| c.id == *id)
    {
        return Some("CapacityReservationDrift".into());
    }
    None
}
