//! The Azure cloud provider: the controller's [`CloudProvider`] over ARM, as upstream's
//! default (`aksscriptless`) mode runs it.
//!
//! A launch reads the NodeClaim's AKSNodeClass (its status holds the images and Kubernetes
//! version the status loop resolved), picks one size and offering
//! ([`crate::allocation`]), renders the node's bootstrap, and creates the NIC and then the
//! VM (`aks-<nodeclaim>`), waiting on ARM's long-running operation. A capacity or quota error
//! marks the offerings it rules out unavailable ([`crate::offerings`]) so the next attempt
//! picks others. VMs carry the cluster and NodePool tags; List finds them through Resource
//! Graph and garbage collection through List.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use karpenter_api::crd::Crd;
use karpenter_api::labels::{CAPACITY_TYPE_LABEL, NODE_POOL_LABEL, ZONE_LABEL};
use karpenter_api::{NodeClaim, NodeClaimStatus, NodeClassReference, NodePool};
use karpenter_cloudprovider::resolved::ResolvedTypes;
use karpenter_cloudprovider::unavailable::UnavailableOfferings;
use karpenter_cloudprovider::{
    CloudProvider, CloudProviderError, NodeClassReadiness, RepairPolicy, Result,
};
use karpenter_core::instancetype::{InstanceType, launch_labels};
use tokio::sync::Mutex;

use crate::aksnodeclass::{
    AKS_NODE_CLASS_HASH_ANNOTATION, AKS_NODE_CLASS_HASH_VERSION,
    AKS_NODE_CLASS_HASH_VERSION_ANNOTATION, AKSNodeClass, NodeImage,
};
use crate::allocation::{self, Selection};
use crate::arm::{Arm, ArmError};
use crate::bootstrap::{self, SubnetId};
use crate::compute::{self, Compute, NODE_POOL_TAG, Vm, VmRequest};
use crate::images::{self, CommunityImages, ImageSource};
use crate::instancetype::{
    AKS_LABEL_PRIORITY, AKS_LABEL_SCALE_SET_PRIORITY, AZURE_LABELS, InstanceTypeOptions,
    LABEL_PLACEMENT_SCOPE, LABEL_SKU_ACCELERATED_NETWORKING, REGIONAL_ZONE, zone_label,
};
use crate::network::{self, NicOptions};
use crate::offerings::{self, CapacityFailure};
use crate::pricing::PriceTable;
use crate::skus::ResourceSku;
use crate::{catalog_api, drift};

/// How long the region's sizes are reused before ARM is asked again (upstream: a day for
/// SKUs; an hour keeps restrictions fresher at one request).
const SKUS_TTL: Duration = Duration::from_secs(60 * 60);
/// How often prices are read again (upstream refreshes them twice a day).
const PRICES_TTL: Duration = Duration::from_secs(12 * 60 * 60);
/// How long a failed SKU read waits before the next try when older sizes are at hand.
const SKUS_RETRY: Duration = Duration::from_secs(5 * 60);

/// What the provider knows of the cluster it launches nodes for (upstream's settings).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AzureOptions {
    /// `CLUSTER_NAME`.
    pub cluster_name: String,
    /// `CLUSTER_ENDPOINT`: the API server nodes join.
    pub cluster_endpoint: String,
    /// The cluster CA bundle nodes trust, base64 PEM.
    pub ca_bundle: Option<String>,
    /// `KUBELET_BOOTSTRAP_TOKEN`.
    pub kubelet_bootstrap_token: String,
    /// `AZURE_SUBSCRIPTION_ID` / `ARM_SUBSCRIPTION_ID`.
    pub subscription_id: String,
    /// `AZURE_TENANT_ID` / `ARM_TENANT_ID`.
    pub tenant_id: String,
    /// `ARM_RESOURCE_GROUP`: the cluster's resource group.
    pub resource_group: String,
    /// `AZURE_NODE_RESOURCE_GROUP`: where the node VMs live.
    pub node_resource_group: String,
    /// `LOCATION`.
    pub location: String,
    /// `VNET_SUBNET_ID`: the nodes' subnet unless the NodeClass names one.
    pub vnet_subnet_id: String,
    /// `SSH_PUBLIC_KEY`.
    pub ssh_public_key: String,
    /// `LINUX_ADMIN_USERNAME` (`azureuser`).
    pub linux_admin_username: String,
    /// `NETWORK_PLUGIN`, `NETWORK_PLUGIN_MODE`, `NETWORK_DATAPLANE`, `NETWORK_POLICY`.
    pub network: crate::bootstrap::Network,
    /// `VNET_GUID`: the nodes' VNet GUID, for Azure CNI overlay.
    pub vnet_guid: String,
    /// `DNS_SERVICE_IP`.
    pub dns_service_ip: String,
    /// `KUBELET_IDENTITY_CLIENT_ID`.
    pub kubelet_identity_client_id: String,
    /// `VM_MEMORY_OVERHEAD_PERCENT` (0.075).
    pub vm_memory_overhead_percent: f64,
    /// `ADDITIONAL_TAGS`: on every node resource, under the NodeClass's tags.
    pub additional_tags: BTreeMap<String, String>,
    /// The Retail Prices API; `None` keeps the embedded prices (no internet egress).
    pub retail_prices_url: Option<String>,
}

impl AzureOptions {
    /// Where the node VMs go.
    pub fn placement(&self) -> compute::Placement {
        compute::Placement {
            subscription_id: self.subscription_id.clone(),
            resource_group: self.node_resource_group.clone(),
            location: self.location.clone(),
            cluster_name: self.cluster_name.clone(),
        }
    }
}

/// What the provider reads from the cluster: AKSNodeClasses, and Nodes for drift.
pub trait ClusterState: Send + Sync + 'static {
    /// The AKSNodeClass named `name`, if it exists.
    fn node_class(
        &self,
        name: &str,
    ) -> impl Future<Output = std::result::Result<Option<AKSNodeClass>, String>> + Send;

    /// The Node named `name`, if it exists.
    fn node(
        &self,
        name: &str,
    ) -> impl Future<Output = std::result::Result<Option<Node>, String>> + Send;
}

/// The API server, as the controller reads it.
#[derive(Clone)]
pub struct KubeState {
    /// AKSNodeClasses.
    pub node_classes: kube::Api<AKSNodeClass>,
    /// Nodes.
    pub nodes: kube::Api<Node>,
}

impl ClusterState for KubeState {
    async fn node_class(&self, name: &str) -> std::result::Result<Option<AKSNodeClass>, String> {
        self.node_classes
            .get_opt(name)
            .await
            .map_err(|e| e.to_string())
    }

    async fn node(&self, name: &str) -> std::result::Result<Option<Node>, String> {
        self.nodes.get_opt(name).await.map_err(|e| e.to_string())
    }
}

/// Fixed NodeClasses and Nodes, for tests and offline runs.
#[derive(Clone, Debug, Default)]
pub struct StaticState {
    /// By name.
    pub node_classes: BTreeMap<String, AKSNodeClass>,
    /// By name.
    pub nodes: BTreeMap<String, Node>,
}

impl ClusterState for StaticState {
    async fn node_class(&self, name: &str) -> std::result::Result<Option<AKSNodeClass>, String> {
        Ok(self.node_classes.get(name).cloned())
    }

    async fn node(&self, name: &str) -> std::result::Result<Option<Node>, String> {
        Ok(self.nodes.get(name).cloned())
    }
}

#[derive(Default)]
struct Catalog {
    skus: Vec<ResourceSku>,
    prices: PriceTable,
    skus_at: Option<Instant>,
    prices_at: Option<Instant>,
    /// Bumped whenever sizes or prices change, so resolved types know they are stale.
    generation: u64,
}

/// The Azure provider.
pub struct AzureCloudProvider<S> {
    arm: Arm,
    compute: Compute,
    images: CommunityImages,
    http: karpenter_cloudprovider::http::HttpClient,
    state: S,
    options: AzureOptions,
    catalog: Mutex<Catalog>,
    types: ResolvedTypes,
    unavailable: UnavailableOfferings,
    nsg: Mutex<Option<ManagedNsg>>,
    load_balancers: Mutex<LoadBalancers>,
}

/// AKS's network security group in the node resource group.
#[derive(Clone, Debug)]
struct ManagedNsg {
    name: String,
    id: String,
}

/// The backend pools new NICs join, as last listed.
#[derive(Debug, Default)]
struct LoadBalancers {
    pools: Vec<String>,
    at: Option<Instant>,
    /// Bumped on every list, so that of several launches that saw the same stale pools only
    /// the first lists again.
    generation: u64,
}

fn other(e: impl std::error::Error + Send + Sync + 'static) -> CloudProviderError {
    CloudProviderError::other(e)
}

impl<S: ClusterState> AzureCloudProvider<S> {
    /// A provider calling ARM through `arm` (prices through `http`), reading the cluster
    /// through `state`.
    pub fn new(
        arm: Arm,
        http: karpenter_cloudprovider::http::HttpClient,
        state: S,
        options: AzureOptions,
    ) -> Self {
        Self {
            compute: Compute::new(arm.clone(), options.placement()),
            images: CommunityImages::new(
                arm.clone(),
                options.subscription_id.clone(),
                options.location.clone(),
            ),
            arm,
            http,
            state,
            options,
            catalog: Mutex::default(),
            types: ResolvedTypes::default(),
            unavailable: UnavailableOfferings::default(),
            nsg: Mutex::default(),
            load_balancers: Mutex::default(),
        }
    }

    /// The settings it runs with.
    pub fn options(&self) -> &AzureOptions {
        &self.options
    }

    /// ARM, for the provider's own loops.
    pub fn arm(&self) -> &Arm {
        &self.arm
    }

    /// The unavailable-offerings cache.
    pub fn unavailable(&self) -> &UnavailableOfferings {
        &self.unavailable
    }

    /// Reads the region's sizes and prices when stale. A failed read keeps the last answer
    /// (sizes) or the embedded table (prices); without any sizes the error is returned.
    async fn refresh(&self) -> Result<()> {
        let mut catalog = self.catalog.lock().await;
        let now = Instant::now();
        if catalog.skus_at.is_none_or(|t| now - t > SKUS_TTL) {
            match catalog_api::resource_skus(
                &self.arm,
                &self.options.subscription_id,
                &self.options.location,
            )
            .await
            {
                Ok(skus) => {
                    let supported =
                        crate::instancetype::supported_skus(skus, &self.options.location);
                    catalog.skus = supported.into_values().collect();
                    catalog.skus_at = Some(now);
                    catalog.generation += 1;
                }
                Err(e) if !catalog.skus.is_empty() => {
                    tracing::warn!(error = %e, "reading resource SKUs; keeping the last answer");
                    catalog.skus_at = now.checked_sub(SKUS_TTL - SKUS_RETRY);
                }
                Err(e) => return Err(other(e)),
            }
        }
        if let Some(url) = &self.options.retail_prices_url
            && catalog.prices_at.is_none_or(|t| now - t > PRICES_TTL)
        {
            // Tried once per period either way: the embedded prices are a fine fallback.
            catalog.prices_at = Some(now);
            match catalog_api::retail_prices(&self.http, url, &self.options.location).await {
                Ok(pages) => {
                    let changed = catalog.prices.update(&pages);
                    if changed.on_demand || changed.spot {
                        catalog.generation += 1;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "reading retail prices; keeping the last ones")
                }
            }
        }
        Ok(())
    }

    async fn node_class(&self, name: &str) -> Result<AKSNodeClass> {
        match self.state.node_class(name).await {
            Ok(Some(c)) => Ok(c),
            Ok(None) => Err(CloudProviderError::node_class_not_ready(format!(
                "AKSNodeClass {name:?} not found"
            ))),
            Err(e) => Err(CloudProviderError::Other(e.into())),
        }
    }

    fn type_options(&self, class: &AKSNodeClass) -> InstanceTypeOptions {
        InstanceTypeOptions::for_node_class(
            &class.spec,
            local_dns_enabled(class),
            &self.options.network,
            self.options.vm_memory_overhead_percent,
        )
    }

    /// The NodeClass's instance types, reused until sizes, prices, the NodeClass's options or
    /// the unavailable offerings change (or [`RESOLVED_TYPES_TTL`](karpenter_cloudprovider::resolved::RESOLVED_TYPES_TTL) passes, so expired
    /// capacity errors show).
    async fn types_for(&self, class: &AKSNodeClass) -> Result<Vec<Arc<InstanceType>>> {
        self.refresh().await?;
        let options = self.type_options(class);
        let catalog = self.catalog.lock().await;
        let key = format!(
            "{options:?}/{}/{}",
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
        let types: Vec<Arc<InstanceType>> = crate::instancetype::instance_types(
            &catalog.skus,
            &self.options.location,
            &options,
            &catalog.prices,
            &unavailable,
        )
        .into_iter()
        .map(Arc::new)
        .collect();
        self.types.put(&name, key, types.clone(), now);
        Ok(types)
    }

    /// Marks what a capacity failure of `selection` rules out; true when it was one.
    async fn mark_unavailable(
        &self,
        error: &ArmError,
        selection: &Selection,
        types: &[Arc<InstanceType>],
    ) -> bool {
        let (Some(code), ArmError::Api { message, .. }) = (error.code(), error) else {
            return false;
        };
        let Some(failure) = CapacityFailure::classify(code, message) else {
            return false;
        };
        let now = Instant::now();
        let blocks = offerings::blocks(
            failure,
            &selection.instance_type.name,
            &selection.offering.zone,
            &selection.offering.capacity_type,
        );
        let families: BTreeMap<String, (String, i64)> = self
            .catalog
            .lock()
            .await
            .skus
            .iter()
            .filter_map(|sku| Some((sku.name.clone(), (sku.family.clone()?, sku.vcpus()?))))
            .collect();
        let family_of = |name: &str| families.get(name).cloned();
        for (size, zone, capacity_type, ttl) in offerings::expand(&blocks, types, &family_of) {
            self.unavailable
                .mark_for(&size, &zone, &capacity_type, now, ttl);
        }
        tracing::info!(
            instance_type = %selection.instance_type.name,
            zone = %selection.offering.zone,
            capacity_type = %selection.offering.capacity_type,
            reason = failure.reason(),
            "offering unavailable"
        );
        true
    }

    fn tags(&self, class: &AKSNodeClass) -> BTreeMap<String, String> {
        let mut tags = self.options.additional_tags.clone();
        tags.extend(class.spec.tags.clone());
        tags
    }

    /// The claim a VM stands for: its labels from the VM (and its size's instance type, when
    /// known), its providerID as AKS's cloud provider registers the node.
    fn claim_for(&self, vm: &Vm, it: Option<&InstanceType>) -> NodeClaim {
        let mut labels: BTreeMap<String, String> = it
            .map(|t| t.requirements.single_valued_labels())
            .unwrap_or_default();
        let zone = match &vm.zone {
            Some(z) => zone_label(&self.options.location, z),
            None => REGIONAL_ZONE.to_string(),
        };
        let capacity_type = if vm.spot {
            karpenter_api::labels::CAPACITY_TYPE_SPOT
        } else {
            karpenter_api::labels::CAPACITY_TYPE_ON_DEMAND
        };
        labels.insert(
            LABEL_PLACEMENT_SCOPE.into(),
            allocation::placement_scope(&zone).into(),
        );
        labels.insert(ZONE_LABEL.into(), zone);
        labels.insert(CAPACITY_TYPE_LABEL.into(), capacity_type.into());
        labels.insert(
            AKS_LABEL_SCALE_SET_PRIORITY.into(),
            allocation::priority(capacity_type).into(),
        );
        labels.insert(
            AKS_LABEL_PRIORITY.into(),
            allocation::priority(capacity_type).into(),
        );
        labels.insert(
            karpenter_api::labels::INSTANCE_TYPE_LABEL.into(),
            vm.vm_size.clone(),
        );
        if let Some(pool) = vm.tags.get(NODE_POOL_TAG) {
            labels.insert(NODE_POOL_LABEL.into(), pool.clone());
        }
        let created = vm
            .time_created
            .as_deref()
            .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
            .map(Time);
        let name = vm.name.strip_prefix("aks-").unwrap_or(&vm.name).to_string();
        NodeClaim {
            metadata: ObjectMeta {
                name: Some(name),
                labels: Some(labels),
                creation_timestamp: created,
                ..Default::default()
            },
            spec: Default::default(),
            status: Some(NodeClaimStatus {
                provider_id: Some(compute::provider_id(&self.compute.placement, &vm.name)),
                image_id: Some(vm.image_id.clone()).filter(|i| !i.is_empty()),
                capacity: it.map(|t| t.capacity.to_list()).unwrap_or_default(),
                allocatable: it.map(|t| t.allocatable().to_list()).unwrap_or_default(),
                ..Default::default()
            }),
        }
    }

    /// A launched claim: labels as the launch decided them, and the NodeClass's hash for drift.
    fn launched(
        &self,
        claim: &NodeClaim,
        vm: &Vm,
        selection: &Selection,
        class: &AKSNodeClass,
    ) -> NodeClaim {
        let mut out = self.claim_for(vm, Some(&selection.instance_type));
        let mut labels = launch_labels(
            claim,
            &selection.instance_type,
            &selection.offering,
            &AZURE_LABELS,
        );
        labels.extend(out.metadata.labels.take().unwrap_or_default());
        out.metadata.labels = Some(labels);
        out.metadata.creation_timestamp = None;
        out.metadata.annotations = Some(BTreeMap::from([
            (AKS_NODE_CLASS_HASH_ANNOTATION.to_string(), class.hash()),
            (
                AKS_NODE_CLASS_HASH_VERSION_ANNOTATION.to_string(),
                AKS_NODE_CLASS_HASH_VERSION.to_string(),
            ),
        ]));
        out
    }

    /// The cluster's network security group in the node resource group
    /// (`aks-agentpool-<8 digits>-nsg`), which the node's bootstrap names and a NIC on a
    /// user's VNet joins; read once. More than one is an error, as upstream: which one the
    /// nodes need cannot be told.
    async fn managed_nsg(&self) -> Result<ManagedNsg> {
        let mut cached = self.nsg.lock().await;
        if let Some(nsg) = cached.as_ref() {
            return Ok(nsg.clone());
        }
        let path = format!(
            "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Network/networkSecurityGroups",
            self.options.subscription_id, self.options.node_resource_group
        );
        let groups = self
            .arm
            .list(&path, compute::NETWORK_API, &[])
            .await
            .map_err(other)?;
        let managed: Vec<ManagedNsg> = groups
            .iter()
            .filter_map(|g| {
                let name = g.get("name").and_then(serde_json::Value::as_str)?;
                is_managed_nsg(name).then(|| ManagedNsg {
                    name: name.to_string(),
                    id: g
                        .get("id")
                        .and_then(serde_json::Value::as_str)
                        .map_or_else(|| format!("{path}/{name}"), str::to_string),
                })
            })
            .collect();
        let nsg = match managed.as_slice() {
            [one] => one.clone(),
            [] => {
                return Err(CloudProviderError::node_class_not_ready(format!(
                    "no AKS network security group (aks-agentpool-<id>-nsg) in {}",
                    self.options.node_resource_group
                )));
            }
            many => {
                let names: Vec<&str> = many.iter().map(|n| n.name.as_str()).collect();
                return Err(CloudProviderError::node_class_not_ready(format!(
                    "several AKS network security groups in {}: {}",
                    self.options.node_resource_group,
                    names.join(", ")
                )));
            }
        };
        *cached = Some(nsg.clone());
        Ok(nsg)
    }

    /// The backend pools of the cluster's load balancers, listed again when older than
    /// upstream's TTL or when `stale` (the generation a failed NIC saw) is still the latest.
    async fn backend_pools(&self, stale: Option<u64>) -> Result<(Vec<String>, u64)> {
        let mut lbs = self.load_balancers.lock().await;
        let expired = lbs
            .at
            .is_none_or(|t| t.elapsed() > network::LOAD_BALANCERS_TTL);
        if expired || stale == Some(lbs.generation) {
            let listed = self
                .arm
                .list(
                    &format!(
                        "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Network/loadBalancers",
                        self.options.subscription_id, self.options.node_resource_group
                    ),
                    compute::NETWORK_API,
                    &[],
                )
                .await
                .map_err(other)?;
            lbs.pools = network::backend_pool_ids(&listed);
            lbs.at = Some(Instant::now());
            lbs.generation += 1;
        }
        Ok((lbs.pools.clone(), lbs.generation))
    }

    /// What the NIC of a launch of `it` on `subnet_id` joins.
    async fn nic_options(
        &self,
        class: &AKSNodeClass,
        it: &InstanceType,
        subnet_id: &str,
        pools: Vec<String>,
    ) -> Result<NicOptions> {
        let subnet = SubnetId::parse(subnet_id).ok_or_else(|| {
            CloudProviderError::node_class_not_ready(format!(
                "vnetSubnetID {subnet_id:?} is not a subnet's resource ID"
            ))
        })?;
        // AKS's own VNet carries the NSG on its subnet; a user's VNet does not.
        let network_security_group_id = if subnet.is_aks_managed(&self.options.node_resource_group)
        {
            None
        } else {
            Some(self.managed_nsg().await?.id)
        };
        Ok(NicOptions {
            backend_pools: pools,
            network_security_group_id,
            accelerated_networking: it
                .requirements
                .get(LABEL_SKU_ACCELERATED_NETWORKING)
                .is_some_and(|r| r.has("true")),
            secondary_ip_configs: network::secondary_ip_configs(
                &self.options.network,
                self.options.network.max_pods(class.spec.max_pods),
            ),
        })
    }

    /// The node's bootstrap (AKS's script-less custom data) for a launch of `selection`.
    async fn custom_data(
        &self,
        claim: &NodeClaim,
        class: &AKSNodeClass,
        selection: &Selection,
        kubernetes_version: &str,
        subnet_id: &str,
    ) -> Result<String> {
        let it = &selection.instance_type;
        let arch = it
            .requirements
            .get(karpenter_api::labels::ARCH_LABEL)
            .and_then(|r| r.values().next().map(str::to_string))
            .unwrap_or_else(|| "amd64".into());
        let effective = images::resolve_family(&class.spec, kubernetes_version);
        let mut labels = crate::labels::base_labels(
            &class.spec,
            &crate::labels::LabelInputs {
                node_resource_group: &self.options.node_resource_group,
                kubelet_identity_client_id: &self.options.kubelet_identity_client_id,
                network: &self.options.network,
                subnet_id,
                vnet_guid: &self.options.vnet_guid,
                kubernetes_version,
                effective_os_sku: effective.name(),
                local_dns_enabled: local_dns_enabled(class),
                arch: &arch,
            },
        );
        labels.extend(launch_labels(claim, it, &selection.offering, &AZURE_LABELS));
        labels.insert(
            LABEL_PLACEMENT_SCOPE.into(),
            allocation::placement_scope(&selection.offering.zone).into(),
        );
        let priority = allocation::priority(&selection.offering.capacity_type);
        labels.insert(AKS_LABEL_SCALE_SET_PRIORITY.into(), priority.into());
        labels.insert(AKS_LABEL_PRIORITY.into(), priority.into());
        let options = bootstrap::Options {
            cluster_endpoint: self.options.cluster_endpoint.clone(),
            ca_bundle: self.options.ca_bundle.clone().unwrap_or_default(),
            tls_bootstrap_token: self.options.kubelet_bootstrap_token.clone(),
            kubernetes_version: kubernetes_version.to_string(),
            arch: bootstrap::Arch::parse(&arch).ok_or_else(|| {
                CloudProviderError::node_class_not_ready(format!(
                    "{}: architecture {arch:?} has no AKS node image",
                    it.name
                ))
            })?,
            tenant_id: self.options.tenant_id.clone(),
            subscription_id: self.options.subscription_id.clone(),
            location: self.options.location.clone(),
            node_resource_group: self.options.node_resource_group.clone(),
            kubelet_identity_client_id: self.options.kubelet_identity_client_id.clone(),
            subnet_id: subnet_id.to_string(),
            network_security_group: self.managed_nsg().await?.name,
            network: self.options.network.clone(),
            cluster_dns: Some(self.options.dns_service_ip.clone()).filter(|d| !d.is_empty()),
            labels,
            taints: bootstrap::node_taints(&claim.spec.taints, &claim.spec.startup_taints),
            kubelet: class.spec.kubelet.clone(),
            max_pods: self.options.network.max_pods(class.spec.max_pods),
            overhead: it.overhead.clone(),
            vm_size: it.name.clone(),
            install_gpu_driver: class.spec.gpu_driver_installed(),
        };
        bootstrap::custom_data(&options)
            .map_err(|e| CloudProviderError::node_class_not_ready(e.to_string()))
    }

    /// The newest images for the NodeClass in a cluster at `kubernetes_version`, best first.
    /// The community galleries carry no FIPS images (upstream needs AKS's own galleries).
    pub async fn node_images(
        &self,
        class: &AKSNodeClass,
        kubernetes_version: &str,
    ) -> std::result::Result<Vec<NodeImage>, String> {
        if class.spec.fips() {
            return Err("FIPS images require UseSIG to be enabled, which only AKS's managed node auto-provisioning has".into());
        }
        let defaults = images::default_images(
            &class.spec,
            kubernetes_version,
            ImageSource::CommunityGallery,
        );
        self.images
            .node_images(defaults, kubernetes_version)
            .await
            .map_err(|e| e.to_string())
    }

    /// Whether the NodeClass's subnet (or the cluster's) may be used and exists.
    pub async fn check_subnet(
        &self,
        class: &AKSNodeClass,
    ) -> std::result::Result<(), crate::nodeclass_status::SubnetProblem> {
        use crate::nodeclass_status::{SubnetProblem, check_subnet_id};
        let cluster = &self.options.vnet_subnet_id;
        let id = class.spec.vnet_subnet_id.as_deref().unwrap_or(cluster);
        check_subnet_id(id, cluster, &self.options.node_resource_group)?;
        match self.arm.get(id, compute::NETWORK_API).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Err(SubnetProblem {
                reason: "SubnetNotFound",
                message: format!("subnet {id} not found"),
            }),
            Err(e) => Err(SubnetProblem {
                reason: "SubnetUnknownError",
                message: format!("reading subnet {id}: {e}"),
            }),
        }
    }

    async fn vm(&self, provider_id: &str) -> Result<Vm> {
        let name = compute::vm_name(provider_id).ok_or_else(|| {
            CloudProviderError::not_found(format!("not an Azure VM providerID: {provider_id:?}"))
        })?;
        match self.compute.get(name).await {
            Ok(vm) => Ok(vm),
            Err(e) if e.is_not_found() => Err(CloudProviderError::not_found(format!(
                "VM {name} not found"
            ))),
            Err(e) => Err(other(e)),
        }
    }
}

/// Whether the NodeClass's nodes run LocalDNS, as its status resolved `localDNS.mode`.
fn local_dns_enabled(class: &AKSNodeClass) -> bool {
    class
        .status
        .as_ref()
        .and_then(|s| s.local_dns_state.as_deref())
        == Some("Enabled")
}

/// AKS's own network security group: `aks-agentpool-<8 digits>-nsg`.
fn is_managed_nsg(name: &str) -> bool {
    name.strip_prefix("aks-agentpool-")
        .and_then(|rest| rest.strip_suffix("-nsg"))
        .is_some_and(|id| id.len() == 8 && id.bytes().all(|b| b.is_ascii_digit()))
}

impl<S: ClusterState> CloudProvider for AzureCloudProvider<S> {
    fn name(&self) -> &'static str {
        "azure"
    }

    fn node_classes(&self) -> &'static [Crd] {
        crate::CRDS
    }

    /// The status loop writes the `Ready` condition; this reads it.
    async fn node_class_readiness(
        &self,
        reference: &NodeClassReference,
    ) -> Result<NodeClassReadiness> {
        if !self.supports(reference) {
            return Ok(NodeClassReadiness::NotFound);
        }
        NodeClassReadiness::of_lookup(self.state.node_class(&reference.name).await)
    }

    /// Upstream's Azure policies: a node not Ready for ten minutes is replaced; one AKS's node
    /// agent reports unhealthy, or a spot VM with an eviction scheduled (Azure gives about 30 s
    /// notice), is replaced at once. An evicted VM is deleted (`evictionPolicy: Delete`), so
    /// without node repair garbage collection replaces its NodeClaim once the node stops
    /// reporting.
    fn repair_policies(&self) -> Vec<RepairPolicy> {
        let ten_minutes = Duration::from_secs(10 * 60);
        vec![
            RepairPolicy::new("Ready", "False", ten_minutes),
            RepairPolicy::new("Ready", "Unknown", ten_minutes),
            RepairPolicy::new("kubernetes.azure.com/NodeHealthy", "False", Duration::ZERO),
            RepairPolicy::new("PreemptionScheduled", "True", Duration::ZERO),
        ]
    }

    async fn create(&self, claim: &NodeClaim) -> Result<NodeClaim> {
        let class = self.node_class(&claim.spec.node_class_ref.name).await?;
        let claim_name = claim.metadata.name.clone().unwrap_or_default();
        let types = self.types_for(&class).await?;
        // Made before (a retry after a lost answer, a restart): that VM, never a second one.
        match self.compute.get(&compute::resource_name(&claim_name)).await {
            Ok(vm) => {
                let it = types.iter().find(|t| t.name == vm.vm_size);
                let mut out = self.claim_for(&vm, it.map(|t| &**t));
                out.metadata.creation_timestamp = None;
                return Ok(out);
            }
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(other(e)),
        }
        let not_ready =
            |e: images::ImageError| CloudProviderError::node_class_not_ready(e.to_string());
        let ready_images = images::ready_images(&class).map_err(not_ready)?;
        let kubernetes_version = images::kubernetes_version(&class).map_err(not_ready)?;
        let selection = allocation::select(&types, claim).ok_or_else(|| {
            CloudProviderError::insufficient_capacity(format!(
                "no offering of {} instance types is available for NodeClaim {claim_name}",
                types.len()
            ))
        })?;
        let image =
            images::pick_image(ready_images, &selection.instance_type).map_err(not_ready)?;
        let subnet_id = class
            .spec
            .vnet_subnet_id
            .clone()
            .unwrap_or_else(|| self.options.vnet_subnet_id.clone());
        let custom_data = self
            .custom_data(claim, &class, &selection, kubernetes_version, &subnet_id)
            .await?;
        let (pools, generation) = self.backend_pools(None).await?;
        let mut request = VmRequest {
            node_claim: claim_name.clone(),
            node_pool: claim
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(NODE_POOL_LABEL))
                .cloned()
                .unwrap_or_default(),
            vm_size: selection.instance_type.name.clone(),
            zone: selection.arm_zone(),
            spot: selection.spot(),
            image_id: image.id.clone(),
            os_disk_gb: class.spec.os_disk_size_gb,
            nic: self
                .nic_options(&class, &selection.instance_type, &subnet_id, pools)
                .await?,
            subnet_id,
            custom_data,
            admin_username: self.options.linux_admin_username.clone(),
            ssh_public_key: self.options.ssh_public_key.clone(),
            tags: self.tags(&class),
        };
        let mut created = self.compute.create(&request).await;
        // A load balancer changed since it was listed: list again and try once more.
        if let Err(ArmError::Api { code, message, .. }) = &created
            && network::is_missing_backend_pool(code, message, &request.nic.backend_pools)
        {
            tracing::info!(nodeclaim = %claim_name, error = %message, "a backend pool went away; listing the load balancers again");
            request.nic.backend_pools = self.backend_pools(Some(generation)).await?.0;
            created = self.compute.create(&request).await;
        }
        match created {
            Ok(vm) => Ok(self.launched(claim, &vm, &selection, &class)),
            Err(e) if self.mark_unavailable(&e, &selection, &types).await => {
                Err(CloudProviderError::insufficient_capacity(e.to_string()))
            }
            Err(e) => Err(other(e)),
        }
    }

    async fn delete(&self, claim: &NodeClaim) -> Result<()> {
        let provider_id = claim
            .status
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .unwrap_or_default();
        // A claim that never got a providerID still owns the VM named after it.
        let name = match compute::vm_name(provider_id) {
            Some(name) => name.to_string(),
            None => compute::resource_name(claim.metadata.name.as_deref().unwrap_or_default()),
        };
        match self.compute.delete(&name).await {
            Ok(()) => Ok(()),
            Err(e) if e.is_not_found() => Err(CloudProviderError::not_found(format!(
                "VM {name} not found"
            ))),
            Err(e) => Err(other(e)),
        }
    }

    async fn get(&self, provider_id: &str) -> Result<NodeClaim> {
        let vm = self.vm(provider_id).await?;
        Ok(self.claim_for(&vm, None))
    }

    async fn list(&self) -> Result<Vec<NodeClaim>> {
        let vms = self.compute.list().await.map_err(other)?;
        Ok(vms.iter().map(|vm| self.claim_for(vm, None)).collect())
    }

    async fn is_drifted(&self, claim: &NodeClaim) -> Result<Option<String>> {
        let class = match self.node_class(&claim.spec.node_class_ref.name).await {
            Ok(c) => c,
            Err(CloudProviderError::NodeClassNotReady(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        let node_name = claim.status.as_ref().and_then(|s| s.node_name.as_deref());
        let node = match node_name {
            Some(name) => self
                .state
                .node(name)
                .await
                .map_err(|e| CloudProviderError::Other(e.into()))?,
            None => None,
        };
        drift::drift_reason(
            claim,
            &class,
            node.as_ref(),
            &self.options.kubelet_identity_client_id,
        )
        .map(|r| r.map(str::to_string))
        .map_err(other)
    }

    async fn instance_types(&self, node_pool: &NodePool) -> Result<Vec<Arc<InstanceType>>> {
        let class = self
            .node_class(&node_pool.spec.template.spec.node_class_ref.name)
            .await?;
        self.types_for(&class).await
    }

    fn provider_labels(&self) -> Vec<String> {
        AZURE_LABELS.iter().map(|s| s.to_string()).collect()
    }
}
