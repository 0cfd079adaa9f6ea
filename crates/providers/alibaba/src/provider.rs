//! The Alibaba Cloud provider: the controller's [`CloudProvider`] over ECS, as the
//! cloudpilot-ai provider runs it.
//!
//! A launch reads the NodeClaim's ECSNodeClass (its status holds the vSwitches, security
//! groups and images the status loop resolved), plans one instant auto-provisioning group
//! ([`crate::launch`]), renders the node's bootstrap through the cluster ([`crate::cluster`]),
//! and calls `CreateAutoProvisioningGroup` with a client token, so a retry never launches a
//! second instance. Stock-outs in its launch results mark those offerings unavailable.
//! Instances carry the cluster tag and the NodeClaim's name; List finds them by the first,
//! and a repeated Create by the second.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use karpenter_api::crd::Crd;
use karpenter_api::labels::{
    CAPACITY_TYPE_LABEL, INSTANCE_TYPE_LABEL, NODE_POOL_LABEL, UNREGISTERED_TAINT_KEY, ZONE_LABEL,
};
use karpenter_api::{NodeClaim, NodeClaimStatus, NodeClassReference, NodePool};
use karpenter_cloudprovider::http::HttpClient;
use karpenter_cloudprovider::resolved::ResolvedTypes;
use karpenter_cloudprovider::unavailable::UnavailableOfferings;
use karpenter_cloudprovider::{
    CloudProvider, CloudProviderError, NodeClassReadiness, RepairPolicy, Result,
};
use karpenter_controller::nodeclasses::NodeClasses;
use karpenter_core::instancetype::{InstanceType, Offering, launch_labels};
use tokio::sync::Mutex;

use crate::client::Client;
use crate::cluster::{Cluster, ClusterError, NodeBootstrap};
use crate::ecsnodeclass::{
    ECS_NODE_CLASS_HASH_ANNOTATION, ECS_NODE_CLASS_HASH_VERSION,
    ECS_NODE_CLASS_HASH_VERSION_ANNOTATION, ECSNodeClass,
};
use crate::instance::{self, GroupOutcome, GroupRequest, Instance};
use crate::instancetype::{self, Availability, Cni, EcsInstanceType, InstanceTypeOptions};
use crate::launch::{self, GroupPlan};
use crate::pricing::PriceTable;
use crate::{catalog_api, drift, ecs};

/// How long the region's instance types are reused (upstream refreshes them daily; an hour
/// keeps new types coming at one paged call).
const TYPES_TTL: Duration = Duration::from_secs(60 * 60);
/// How long zonal stock is reused (upstream: five minutes).
const AVAILABILITY_TTL: Duration = Duration::from_secs(5 * 60);
/// How often prices are read again (upstream: twelve hours).
const PRICES_TTL: Duration = Duration::from_secs(12 * 60 * 60);
/// How long a failed read waits before the next try when older answers are at hand.
const RETRY: Duration = Duration::from_secs(60);

/// What the provider knows of the cluster it launches nodes for (upstream's settings).
#[derive(Clone, Debug, PartialEq)]
pub struct AlibabaOptions {
    /// `CLUSTER_ID`: the ACK cluster; tags every instance.
    pub cluster_id: String,
    /// `REGION_ID`.
    pub region: String,
    /// `VM_MEMORY_OVERHEAD_PERCENT` (0.065).
    pub vm_memory_overhead_percent: f64,
    /// The price server (`PRICE_SERVER_URL`); `None` keeps the embedded on-demand prices and
    /// reads spot prices from ECS's spot price history.
    pub price_server_url: Option<String>,
    /// `INTERRUPTION`: replace spot nodes ACK marks `InstanceExpired`.
    pub interruption: bool,
}

/// What the provider reads from the cluster: ECSNodeClasses — the API server
/// (`kube::Api<ECSNodeClass>`) in the controller, a map by name ([`StaticState`]) in tests and
/// offline runs.
pub trait ClusterState: NodeClasses<ECSNodeClass> {}

impl<T: NodeClasses<ECSNodeClass>> ClusterState for T {}

/// The API server, as the controller reads it.
pub type KubeState = kube::Api<ECSNodeClass>;

/// Fixed NodeClasses by name, for tests and offline runs.
pub type StaticState = BTreeMap<String, ECSNodeClass>;

struct Catalog {
    types: Vec<EcsInstanceType>,
    types_at: Option<Instant>,
    availability: Availability,
    availability_at: Option<Instant>,
    cni: Option<Cni>,
    prices: PriceTable,
    prices_at: Option<Instant>,
    /// Bumped whenever types, stock or prices change, so resolved types know they are stale.
    generation: u64,
}

/// The Alibaba Cloud provider.
pub struct AlibabaCloudProvider<S> {
    client: Client,
    http: HttpClient,
    cluster: Cluster,
    state: S,
    options: AlibabaOptions,
    catalog: Mutex<Catalog>,
    types: ResolvedTypes,
    unavailable: UnavailableOfferings,
}

fn other(e: impl std::error::Error + Send + Sync + 'static) -> CloudProviderError {
    CloudProviderError::other(e)
}

impl<S: ClusterState> AlibabaCloudProvider<S> {
    /// A provider calling ECS and VPC through `client`, ACK through `cluster`, the price
    /// server through `http`, reading the cluster through `state`.
    pub fn new(
        client: Client,
        http: HttpClient,
        cluster: Cluster,
        state: S,
        options: AlibabaOptions,
    ) -> Self {
        let catalog = Catalog {
            types: Vec::new(),
            types_at: None,
            availability: Availability::default(),
            availability_at: None,
            cni: None,
            prices: PriceTable::embedded(&options.region),
            prices_at: None,
            generation: 0,
        };
        Self {
            client,
            http,
            cluster,
            state,
            options,
            catalog: Mutex::new(catalog),
            types: ResolvedTypes::default(),
            unavailable: UnavailableOfferings::default(),
        }
    }

    /// The settings it runs with.
    pub fn options(&self) -> &AlibabaOptions {
        &self.options
    }

    /// The ECS/VPC client, for the provider's own loops.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The cluster (ACK or custom), for the provider's own loops.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// The unavailable-offerings cache.
    pub fn unavailable(&self) -> &UnavailableOfferings {
        &self.unavailable
    }

    /// Reads the region's types, stock, the cluster's CNI and prices when stale. A failed read
    /// keeps the last answer; without any types or stock the error is returned.
    async fn refresh(&self) -> Result<()> {
        let mut catalog = self.catalog.lock().await;
        let now = Instant::now();
        // A cluster whose metadata names no CNI yet is asked again with the stock.
        if catalog.cni.is_none()
            || (catalog.cni == Some(Cni::Other)
                && catalog
                    .availability_at
                    .is_none_or(|t| now - t > AVAILABILITY_TTL))
        {
            let cni = self.cluster.cni().await.map_err(other)?;
            if catalog.cni != Some(cni) {
                catalog.cni = Some(cni);
                catalog.types_at = None;
            }
        }
        if catalog.types_at.is_none_or(|t| now - t > TYPES_TTL) {
            match catalog_api::describe_instance_types(&self.client).await {
                Ok(types) => {
                    let cni = catalog.cni.unwrap_or_default();
                    catalog.types = instancetype::supported_types(types, cni);
                    catalog.types_at = Some(now);
                    catalog.generation += 1;
                }
                Err(e) if !catalog.types.is_empty() => {
                    tracing::warn!(error = %e, "reading instance types; keeping the last answer");
                    catalog.types_at = now.checked_sub(TYPES_TTL - RETRY);
                }
                Err(e) => return Err(other(e)),
            }
        }
        if catalog
            .availability_at
            .is_none_or(|t| now - t > AVAILABILITY_TTL)
        {
            match catalog_api::availability(&self.client).await {
                Ok(availability) => {
                    if availability != catalog.availability {
                        catalog.availability = availability;
                        catalog.generation += 1;
                    }
                    catalog.availability_at = Some(now);
                }
                Err(e) if !catalog.availability.on_demand.is_empty() => {
                    tracing::warn!(error = %e, "reading zonal stock; keeping the last answer");
                    catalog.availability_at = now.checked_sub(AVAILABILITY_TTL - RETRY);
                }
                Err(e) => return Err(other(e)),
            }
        }
        if catalog.prices_at.is_none_or(|t| now - t > PRICES_TTL) {
            // Tried once per period either way: the embedded prices are a fine fallback.
            catalog.prices_at = Some(now);
            drop(catalog);
            self.refresh_prices().await;
        }
        Ok(())
    }

    /// Prices from the price server, or spot prices from ECS's spot price history of the
    /// types with spot stock when no price server is set.
    async fn refresh_prices(&self) {
        let region = self.options.region.clone();
        if let Some(url) = &self.options.price_server_url {
            match catalog_api::price_server(
                &self.http,
                url,
                &region,
                karpenter_cloudprovider::http::RetryPolicy::STANDARD,
            )
            .await
            {
                Ok(prices) => {
                    let mut catalog = self.catalog.lock().await;
                    let on_demand = catalog.prices.update_on_demand(&region, prices.on_demand);
                    let spot = catalog.prices.update_spot(&region, prices.spot);
                    if on_demand.is_ok() || spot.is_ok() {
                        catalog.generation += 1;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "reading the price server; keeping the last prices")
                }
            }
            return;
        }
        let spot_types: Vec<String> = {
            let catalog = self.catalog.lock().await;
            let sold: BTreeSet<&str> = catalog
                .availability
                .spot
                .keys()
                .map(String::as_str)
                .collect();
            catalog
                .types
                .iter()
                .map(|t| t.instance_type_id.as_str())
                .filter(|t| sold.contains(t))
                .map(str::to_string)
                .collect()
        };
        let history =
            catalog_api::spot_price_histories(&self.client, spot_types.iter().map(String::as_str))
                .await;
        for (name, e) in &history.failed {
            tracing::debug!(instance_type = %name, error = %e, "reading spot price history");
        }
        let mut catalog = self.catalog.lock().await;
        let spot = catalog
            .prices
            .spot_from_history(history.currency.as_deref(), &history.records);
        if catalog.prices.update_spot(&region, spot).is_ok() {
            catalog.generation += 1;
        }
    }

    async fn node_class(&self, name: &str) -> Result<ECSNodeClass> {
        match self.state.node_class(name).await {
            Ok(Some(c)) if c.metadata.deletion_timestamp.is_some() => {
                Err(CloudProviderError::node_class_not_ready(format!(
                    "ECSNodeClass {name:?} is terminating"
                )))
            }
            Ok(Some(c)) => Ok(c),
            Ok(None) => Err(CloudProviderError::node_class_not_ready(format!(
                "ECSNodeClass {name:?} not found"
            ))),
            Err(e) => Err(CloudProviderError::Other(e.into())),
        }
    }

    /// The NodeClass's instance types, reused until types, stock, prices, the NodeClass's
    /// options and vSwitch zones or the unavailable offerings change (or
    /// [`RESOLVED_TYPES_TTL`](karpenter_cloudprovider::resolved::RESOLVED_TYPES_TTL) passes, so expired capacity errors show).
    async fn types_for(&self, class: &ECSNodeClass) -> Result<Vec<Arc<InstanceType>>> {
        self.refresh().await?;
        let catalog = self.catalog.lock().await;
        let options = InstanceTypeOptions::for_node_class(
            &class.spec,
            self.options.region.clone(),
            catalog.cni.unwrap_or_default(),
            self.options.vm_memory_overhead_percent,
        );
        let zones: BTreeSet<String> = class
            .status
            .as_ref()
            .map(|s| s.v_switches.iter().map(|v| v.zone_id.clone()).collect())
            .unwrap_or_default();
        let key = format!(
            "{options:?}/{zones:?}/{}/{}",
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
        let types: Vec<Arc<InstanceType>> = instancetype::instance_types(
            &catalog.types,
            &catalog.availability,
            &zones,
            &options,
            &catalog.prices,
            &unavailable,
        )
        .map_err(|e| CloudProviderError::node_class_not_ready(e.to_string()))?
        .into_iter()
        .map(Arc::new)
        .collect();
        self.types.put(&name, key, types.clone(), now);
        Ok(types)
    }

    /// The claim an instance stands for: its labels from the instance (and its type, when
    /// known), its providerID as ACK registers the node, and deleting when it is stopping.
    fn claim_for(&self, i: &Instance, it: Option<&InstanceType>) -> NodeClaim {
        let mut labels: BTreeMap<String, String> = it
            .map(|t| t.requirements.single_valued_labels())
            .unwrap_or_default();
        labels.insert(ZONE_LABEL.into(), i.zone_id.clone());
        labels.insert(CAPACITY_TYPE_LABEL.into(), i.capacity_type().into());
        labels.insert(INSTANCE_TYPE_LABEL.into(), i.instance_type.clone());
        if let Some(pool) = i.tag(NODE_POOL_LABEL) {
            labels.insert(NODE_POOL_LABEL.into(), pool.to_string());
        }
        let region = if i.region_id.is_empty() {
            &self.options.region
        } else {
            &i.region_id
        };
        NodeClaim {
            metadata: ObjectMeta {
                name: i.tag(instance::NODE_CLAIM_TAG).map(str::to_string),
                labels: Some(labels),
                creation_timestamp: i.created().map(Time),
                // Upstream reports a stopping instance's claim as being deleted.
                deletion_timestamp: i
                    .is_stopping()
                    .then(|| Time(k8s_openapi::jiff::Timestamp::now())),
                ..Default::default()
            },
            spec: Default::default(),
            status: Some(NodeClaimStatus {
                provider_id: Some(instance::provider_id(region, &i.instance_id)),
                image_id: Some(i.image_id.clone()).filter(|s| !s.is_empty()),
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
        instance: &Instance,
        it: &InstanceType,
        offering: &Offering,
        class: &ECSNodeClass,
    ) -> NodeClaim {
        let mut out = self.claim_for(instance, Some(it));
        let mut labels = launch_labels(claim, it, offering, &instancetype::LABELS);
        labels.extend(out.metadata.labels.take().unwrap_or_default());
        out.metadata.labels = Some(labels);
        out.metadata.name = None;
        out.metadata.creation_timestamp = None;
        out.metadata.annotations = Some(BTreeMap::from([
            (ECS_NODE_CLASS_HASH_ANNOTATION.to_string(), class.hash()),
            (
                ECS_NODE_CLASS_HASH_VERSION_ANNOTATION.to_string(),
                ECS_NODE_CLASS_HASH_VERSION.to_string(),
            ),
        ]));
        out
    }

    /// The cluster's instance launched for the NodeClaim named `name`, if any.
    async fn instance_of_claim(&self, name: &str) -> Result<Option<Instance>> {
        let cluster_tag = instance::cluster_tag(&self.options.cluster_id);
        let found = ecs::describe_instances(
            &self.client,
            &[(&cluster_tag, "owned"), (instance::NODE_CLAIM_TAG, name)],
            None,
        )
        .await
        .map_err(other)?;
        Ok(found.into_iter().next())
    }

    /// The cluster's instance with this id.
    async fn instance(&self, id: &str) -> Result<Instance> {
        let cluster_tag = instance::cluster_tag(&self.options.cluster_id);
        let found = ecs::describe_instances(&self.client, &[(&cluster_tag, "owned")], Some(&[id]))
            .await
            .map_err(other)?;
        found
            .into_iter()
            .find(|i| i.instance_id == id)
            .ok_or_else(|| CloudProviderError::not_found(format!("instance {id} not found")))
    }

    /// The node's bootstrap for a launch of `plan`.
    async fn user_data(
        &self,
        claim: &NodeClaim,
        class: &ECSNodeClass,
        plan: &GroupPlan,
    ) -> Result<String> {
        let mut labels = claim.metadata.labels.clone().unwrap_or_default();
        labels.insert(CAPACITY_TYPE_LABEL.into(), plan.capacity_type.clone());
        let mut taints = claim.spec.taints.clone();
        taints.extend(claim.spec.startup_taints.iter().cloned());
        // ACK registers the node tainted so nothing schedules before Karpenter syncs it.
        if !taints
            .iter()
            .any(|t| t.key == UNREGISTERED_TAINT_KEY && t.effect == "NoExecute")
        {
            taints.push(k8s_openapi::api::core::v1::Taint {
                key: UNREGISTERED_TAINT_KEY.into(),
                effect: "NoExecute".into(),
                ..Default::default()
            });
        }
        let request = NodeBootstrap {
            labels: &labels,
            taints: &taints,
            kubelet: class.spec.kubelet_configuration.as_ref(),
            user_data: class.spec.user_data.as_deref(),
            format_data_disk: class.spec.format_data_disk,
        };
        match self.cluster.user_data(&request).await {
            Ok(user_data) => Ok(user_data),
            // The NodeClass's userData cannot be merged: only its owner can fix that.
            Err(e @ ClusterError::UserData(_)) => {
                Err(CloudProviderError::node_class_not_ready(e.to_string()))
            }
            // ACK did not answer: the launch is tried again.
            Err(e) => Err(other(e)),
        }
    }

    /// Marks what a group's launch results refused for capacity.
    fn mark_unavailable(&self, outcome: &GroupOutcome, capacity_type: &str) {
        let now = Instant::now();
        for (instance_type, zone) in &outcome.out_of_capacity {
            self.unavailable
                .mark(instance_type, zone, capacity_type, now);
            tracing::info!(%instance_type, %zone, %capacity_type, "offering unavailable");
        }
    }

    /// Marks every config of a group ECS refused outright for capacity.
    fn mark_group_unavailable(&self, plan: &GroupPlan) {
        let now = Instant::now();
        for c in &plan.configs {
            self.unavailable
                .mark(&c.instance_type, &c.zone, &plan.capacity_type, now);
        }
    }
}

/// A number that varies between claims and stays put for one claim: its retries ask for the
/// same group.
fn spread_of(claim: &NodeClaim) -> u64 {
    karpenter_api::hash::fnv64(claim.metadata.name.as_deref().unwrap_or_default())
}

impl<S: ClusterState> CloudProvider for AlibabaCloudProvider<S> {
    fn name(&self) -> &'static str {
        "alibaba"
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

    /// Upstream's policies: a node not Ready for thirty minutes is replaced. Spot reclaims
    /// are handled by the `InstanceExpired` loop ([`crate::interruption`]).
    fn repair_policies(&self) -> Vec<RepairPolicy> {
        let thirty_minutes = Duration::from_secs(30 * 60);
        vec![
            RepairPolicy::new("Ready", "False", thirty_minutes),
            RepairPolicy::new("Ready", "Unknown", thirty_minutes),
        ]
    }

    async fn create(&self, claim: &NodeClaim) -> Result<NodeClaim> {
        let class = self.node_class(&claim.spec.node_class_ref.name).await?;
        if let NodeClassReadiness::NotReady { message, .. } =
            NodeClassReadiness::of_lookup(Ok(Some(&class)))?
        {
            return Err(CloudProviderError::node_class_not_ready(message));
        }
        let claim_name = claim.metadata.name.clone().unwrap_or_default();
        let types = self.types_for(&class).await?;
        // Made before (a retry after a lost answer, a restart): that instance, never a second.
        if let Some(existing) = self.instance_of_claim(&claim_name).await? {
            let it = types.iter().find(|t| t.name == existing.instance_type);
            let mut out = self.claim_for(&existing, it.map(|t| &**t));
            out.metadata.name = None;
            out.metadata.creation_timestamp = None;
            out.metadata.deletion_timestamp = None;
            return Ok(out);
        }
        let status = class.status.clone().unwrap_or_default();
        let plan = launch::plan(
            claim,
            &types,
            &status.v_switches,
            &status.images,
            class.spec.v_switch_selection_policy(),
            spread_of(claim),
        )
        .map_err(|e| match e {
            launch::PlanError::NothingFits => CloudProviderError::insufficient_capacity(format!(
                "NodeClaim {claim_name}: {e} ({} instance types)",
                types.len()
            )),
            launch::PlanError::NoImage(_) => {
                CloudProviderError::node_class_not_ready(e.to_string())
            }
        })?;
        if !plan.spot()
            && claim_allows_spot(claim)
            && plan.configs.len() < launch::INSTANCE_TYPE_FLEXIBILITY_THRESHOLD
        {
            tracing::warn!(nodeclaim = %claim_name, types = plan.configs.len(), "launching on-demand with few instance types while spot is allowed: a stock-out fails the launch");
        }
        let user_data = self.user_data(claim, &class, &plan).await?;
        let node_pool = claim
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(NODE_POOL_LABEL))
            .cloned()
            .unwrap_or_default();
        let node_class_name = class.metadata.name.clone().unwrap_or_default();
        let tags = instance::launch_tags(
            &class.spec,
            &self.options.cluster_id,
            &node_class_name,
            &node_pool,
            &claim_name,
        );
        let security_group_ids: Vec<String> = status
            .security_groups
            .iter()
            .map(|g| g.id.clone())
            .collect();
        let client_token = claim
            .metadata
            .uid
            .clone()
            .unwrap_or_else(|| claim_name.clone());
        let params = instance::group_params(
            &plan,
            &GroupRequest {
                region: &self.options.region,
                spec: &class.spec,
                security_group_ids: &security_group_ids,
                user_data: &user_data,
                tags: &tags,
                client_token: &client_token,
            },
        );
        let answer = match ecs::create_auto_provisioning_group(&self.client, &params).await {
            Ok(answer) => answer,
            Err(e) if e.is_insufficient_capacity() => {
                self.mark_group_unavailable(&plan);
                return Err(CloudProviderError::insufficient_capacity(e.to_string()));
            }
            Err(e) => return Err(other(e)),
        };
        let outcome = GroupOutcome::of(&answer);
        self.mark_unavailable(&outcome, &plan.capacity_type);
        let Some(launched) = outcome.launched.clone() else {
            let (code, message) = outcome.failure.clone().unwrap_or_default();
            let text = format!(
                "auto-provisioning group {} launched nothing: {code}: {message} (request {})",
                answer.auto_provisioning_group_id, answer.request_id
            );
            return Err(if outcome.is_insufficient_capacity() {
                CloudProviderError::insufficient_capacity(text)
            } else {
                CloudProviderError::Other(text.into())
            });
        };
        let it = types
            .iter()
            .find(|t| t.name == launched.instance_type)
            .ok_or_else(|| {
                CloudProviderError::Other(
                    format!("launched unknown type {}", launched.instance_type).into(),
                )
            })?;
        let offering = it
            .offerings
            .iter()
            .find(|o| o.zone == launched.zone && o.capacity_type == launched.capacity_type)
            .cloned()
            .unwrap_or_else(|| Offering {
                zone: launched.zone.clone(),
                capacity_type: launched.capacity_type.clone(),
                price: 0.0,
                available: true,
                reservation: None,
            });
        let instance = Instance {
            instance_id: launched.instance_id,
            region_id: self.options.region.clone(),
            zone_id: launched.zone,
            instance_type: launched.instance_type,
            status: instance::status::PENDING.into(),
            image_id: plan.image_id.clone(),
            spot_strategy: if plan.spot() {
                "SpotAsPriceGo"
            } else {
                "NoSpot"
            }
            .into(),
            ..Instance::default()
        };
        Ok(self.launched(claim, &instance, it, &offering, &class))
    }

    async fn delete(&self, claim: &NodeClaim) -> Result<()> {
        let provider_id = claim
            .status
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .unwrap_or_default();
        // A claim that never got a providerID may still own an instance tagged with its name.
        let id = match instance::instance_id(provider_id) {
            Some(id) => id.to_string(),
            None => match self
                .instance_of_claim(claim.metadata.name.as_deref().unwrap_or_default())
                .await?
            {
                Some(i) => i.instance_id,
                None => {
                    return Err(CloudProviderError::not_found(format!(
                        "no instance for NodeClaim {:?}",
                        claim.metadata.name.as_deref().unwrap_or_default()
                    )));
                }
            },
        };
        match ecs::delete_instance(&self.client, &id).await {
            Ok(()) => Ok(()),
            Err(e) if e.is_not_found() => Err(CloudProviderError::not_found(format!(
                "instance {id} already terminated"
            ))),
            Err(e) => Err(other(e)),
        }
    }

    async fn get(&self, provider_id: &str) -> Result<NodeClaim> {
        let id = instance::instance_id(provider_id).ok_or_else(|| {
            CloudProviderError::not_found(format!(
                "not an Alibaba Cloud providerID: {provider_id:?}"
            ))
        })?;
        let i = self.instance(id).await?;
        Ok(self.claim_for(&i, None))
    }

    async fn list(&self) -> Result<Vec<NodeClaim>> {
        let cluster_tag = instance::cluster_tag(&self.options.cluster_id);
        let instances = ecs::describe_instances(&self.client, &[(&cluster_tag, "owned")], None)
            .await
            .map_err(other)?;
        // The cluster tag alone may also be on ACK's own node pools' instances: only those a
        // NodePool launched are Karpenter's to collect.
        Ok(instances
            .iter()
            .filter(|i| i.tag(NODE_POOL_LABEL).is_some())
            .map(|i| self.claim_for(i, None))
            .collect())
    }

    async fn is_drifted(&self, claim: &NodeClaim) -> Result<Option<String>> {
        let class = match self.node_class(&claim.spec.node_class_ref.name).await {
            Ok(c) => c,
            Err(CloudProviderError::NodeClassNotReady(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        if let Some(reason) = drift::static_drift(claim, &class) {
            return Ok(Some(reason.to_string()));
        }
        let Some(id) = claim
            .status
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .and_then(instance::instance_id)
        else {
            return Ok(None);
        };
        let i = self.instance(id).await?;
        drift::instance_drift(&class, &i)
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
        instancetype::LABELS.iter().map(|s| s.to_string()).collect()
    }
}

/// Whether the claim's requirements allow spot.
fn claim_allows_spot(claim: &NodeClaim) -> bool {
    karpenter_core::scheduling::Requirements::from_node_claim(&claim.spec.requirements).allows(
        CAPACITY_TYPE_LABEL,
        karpenter_api::labels::CAPACITY_TYPE_SPOT,
    )
}
