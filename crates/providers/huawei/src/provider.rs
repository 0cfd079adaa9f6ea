//! The Huawei Cloud provider: the controller's [`CloudProvider`] over CCE, as
//! huaweicloud-samples' provider runs it.
//!
//! A create reads the NodeClaim's CCENodeClass (its status holds the subnets the status loop
//! resolved), orders the (flavor, zone) candidates cheapest first ([`cce::candidates`]) and
//! asks CCE for one node of each in turn until one is accepted: sold-out and unsupported-network
//! refusals mark that offering unavailable and move on. CCE then creates the ECS server and
//! installs the node; the create follows CCE's job until the server exists or the job fails,
//! so a stock-out CCE only finds later also moves on to the next candidate (and the failed
//! node is deleted, never left behind). The NodeClaim's uid rides along in `k8sTags`: a retried
//! create finds the node it already asked for instead of making a second.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use karpenter_api::crd::Crd;
use karpenter_api::labels::{
    CAPACITY_TYPE_LABEL, CAPACITY_TYPE_ON_DEMAND, INSTANCE_TYPE_LABEL, NODE_POOL_LABEL, ZONE_LABEL,
};
use karpenter_api::{NodeClaim, NodeClaimStatus, NodeClassReference, NodePool};
use karpenter_cloudprovider::resolved::ResolvedTypes;
use karpenter_cloudprovider::unavailable::UnavailableOfferings;
use karpenter_cloudprovider::{
    CloudProvider, CloudProviderError, NodeClassReadiness, RepairPolicy, Result,
};
use karpenter_controller::nodeclasses::NodeClasses;
use karpenter_core::instancetype::{InstanceType, Offering, launch_labels};
use tokio::sync::Mutex;

use crate::cce::{self, Candidate, CreateNode, Node};
use crate::ccenodeclass::{
    ANNOTATION_NODE_ID, ANNOTATION_SERVER_ID, CCE_NODE_CLASS_HASH_ANNOTATION,
    CCE_NODE_CLASS_HASH_VERSION, CCE_NODE_CLASS_HASH_VERSION_ANNOTATION, CCENodeClass,
};
use crate::client::{Client, ClientError};
use crate::instancetype::{self, Flavor, InstanceTypeOptions};
use crate::pricing::PriceTable;
use crate::subnet::SubnetInfo;
use crate::{catalog_api, drift, instance, subnet};

/// How long the region's flavors and zones are reused (upstream: five minutes).
const FLAVORS_TTL: Duration = Duration::from_secs(5 * 60);
/// How often prices are asked of BSS again (upstream: twelve hours).
const PRICES_TTL: Duration = Duration::from_secs(12 * 60 * 60);
/// How long a failed read waits before the next try when older answers are at hand.
const RETRY: Duration = Duration::from_secs(60);
/// How long a refused (flavor, zone) is not tried again (upstream's `UnavailableOfferingTTL`;
/// the core's default is three minutes).
const UNAVAILABLE_OFFERING_TTL: Duration = Duration::from_secs(5 * 60);
/// How long the subnets' free addresses are reused by launches (upstream: a minute).
const SUBNETS_TTL: Duration = Duration::from_secs(60);

/// What the provider knows of the cluster it creates nodes for (upstream's settings).
#[derive(Clone, Debug, PartialEq)]
pub struct HuaweiOptions {
    /// `HUAWEICLOUD_SDK_CCE_CLUSTER_ID`: the CCE cluster.
    pub cluster_id: String,
    /// `HUAWEICLOUD_SDK_REGION_ID`.
    pub region: String,
    /// Whether on-demand prices are asked of BSS (else the embedded table is kept).
    pub bss_pricing: bool,
    /// How long a create follows CCE's job before handing the node to registration.
    pub job_wait: Duration,
    /// How often the job is looked at meanwhile.
    pub job_poll: Duration,
}

impl HuaweiOptions {
    /// The defaults for a cluster in a region: BSS prices, a minute of job following every
    /// three seconds.
    pub fn new(cluster_id: impl Into<String>, region: impl Into<String>) -> Self {
        Self {
            cluster_id: cluster_id.into(),
            region: region.into(),
            bss_pricing: true,
            job_wait: Duration::from_secs(60),
            job_poll: Duration::from_secs(3),
        }
    }
}

/// What the provider reads from the cluster: CCENodeClasses — the API server
/// (`kube::Api<CCENodeClass>`) in the controller, a map by name ([`StaticState`]) in tests and
/// offline runs.
pub trait ClusterState: NodeClasses<CCENodeClass> {}

impl<T: NodeClasses<CCENodeClass>> ClusterState for T {}

/// The API server, as the controller reads it.
pub type KubeState = kube::Api<CCENodeClass>;

/// Fixed NodeClasses by name, for tests and offline runs.
pub type StaticState = BTreeMap<String, CCENodeClass>;

struct Catalog {
    flavors: Vec<Flavor>,
    zones: Vec<String>,
    flavors_at: Option<Instant>,
    prices: PriceTable,
    prices_at: Option<Instant>,
    /// Flavors BSS does not price (asked once, then left out).
    unpriced: BTreeSet<String>,
    /// Bumped whenever flavors, zones or prices change, so resolved types know they are stale.
    generation: u64,
}

#[derive(Default)]
struct Subnets {
    listed: Vec<SubnetInfo>,
    at: Option<Instant>,
    /// Creates under way per subnet: each will take an address the last listing still counts.
    in_flight: BTreeMap<String, i64>,
}

/// The Huawei Cloud provider.
pub struct HuaweiCloudProvider<S> {
    client: Client,
    state: S,
    options: HuaweiOptions,
    catalog: Mutex<Catalog>,
    types: ResolvedTypes,
    subnets: Arc<std::sync::Mutex<Subnets>>,
    unavailable: UnavailableOfferings,
}

fn other(e: impl std::error::Error + Send + Sync + 'static) -> CloudProviderError {
    CloudProviderError::other(e)
}

/// An address taken in a subnet while a create is under way; given back when dropped.
struct InFlight {
    subnets: Arc<std::sync::Mutex<Subnets>>,
    id: String,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut s = self.subnets.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = s.in_flight.get_mut(&self.id) {
            *n -= 1;
            if *n <= 0 {
                s.in_flight.remove(&self.id);
            }
        }
    }
}

/// How following a new node's creation ended.
enum Creation {
    /// The ECS server exists (or CCE finished, or the wait ran out): the node is on its way.
    Started(Box<Node>),
    /// CCE gave up; the reason is its job's.
    Failed(String),
}

impl<S: ClusterState> HuaweiCloudProvider<S> {
    /// A provider calling CCE, ECS, VPC and BSS through `client`, reading the cluster through
    /// `state`.
    pub fn new(client: Client, state: S, options: HuaweiOptions) -> Self {
        let catalog = Catalog {
            flavors: Vec::new(),
            zones: Vec::new(),
            flavors_at: None,
            prices: PriceTable::fallback(&options.region),
            prices_at: None,
            unpriced: BTreeSet::new(),
            generation: 0,
        };
        Self {
            client,
            state,
            options,
            catalog: Mutex::new(catalog),
            types: ResolvedTypes::default(),
            subnets: Arc::default(),
            unavailable: UnavailableOfferings::default(),
        }
    }

    /// The settings it runs with.
    pub fn options(&self) -> &HuaweiOptions {
        &self.options
    }

    /// The client, for the provider's own loops.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The unavailable-offerings cache.
    pub fn unavailable(&self) -> &UnavailableOfferings {
        &self.unavailable
    }

    /// The project's subnets, listed now; launches pick among the NodeClass's by the free
    /// addresses this listing reports.
    pub async fn subnets(&self) -> std::result::Result<Vec<SubnetInfo>, ClientError> {
        let listed = catalog_api::list_subnets(&self.client).await?;
        let mut s = self.subnets.lock().unwrap_or_else(|p| p.into_inner());
        s.listed = listed.clone();
        s.at = Some(Instant::now());
        Ok(listed)
    }

    /// Reads the region's flavors, zones and prices when stale. A failed read keeps the last
    /// answer; without any flavors the error is returned.
    async fn refresh(&self) -> Result<()> {
        let mut catalog = self.catalog.lock().await;
        let now = Instant::now();
        if catalog.flavors_at.is_none_or(|t| now - t > FLAVORS_TTL) {
            let read = async {
                let flavors = catalog_api::list_flavors(&self.client).await?;
                let zones = catalog_api::availability_zones(&self.client).await?;
                Ok::<_, ClientError>((flavors, zones))
            };
            match read.await {
                Ok((flavors, zones)) => {
                    if flavors != catalog.flavors || zones != catalog.zones {
                        catalog.flavors = flavors;
                        catalog.zones = zones;
                        catalog.generation += 1;
                    }
                    catalog.flavors_at = Some(now);
                }
                Err(e) if !catalog.flavors.is_empty() => {
                    tracing::warn!(error = %e, "reading flavors; keeping the last answer");
                    catalog.flavors_at = now.checked_sub(FLAVORS_TTL - RETRY);
                }
                Err(e) => return Err(other(e)),
            }
        }
        if self.options.bss_pricing && catalog.prices_at.is_none_or(|t| now - t > PRICES_TTL) {
            // Tried once per period either way: the embedded prices are a fine fallback.
            catalog.prices_at = Some(now);
            let flavors = catalog.flavors.clone();
            let mut unpriced = catalog.unpriced.clone();
            drop(catalog);
            let ratings = catalog_api::on_demand_ratings(
                &self.client,
                &self.options.region,
                &flavors,
                &mut unpriced,
            )
            .await;
            let mut catalog = self.catalog.lock().await;
            catalog.unpriced = unpriced;
            match ratings {
                Ok(ratings) if !ratings.prices.is_empty() => {
                    catalog.prices = PriceTable::from_ratings(self.options.region.clone(), ratings);
                    catalog.generation += 1;
                }
                // Asked again after RETRY, not a whole period: a permission granted meanwhile
                // (or BSS back) shows without a restart.
                Ok(_) => {
                    tracing::warn!("BSS priced no flavor; keeping the last prices");
                    catalog.prices_at = now.checked_sub(PRICES_TTL - RETRY);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "reading prices from BSS; keeping the last prices");
                    catalog.prices_at = now.checked_sub(PRICES_TTL - RETRY);
                }
            }
        }
        Ok(())
    }

    async fn node_class(&self, name: &str) -> Result<CCENodeClass> {
        match self.state.node_class(name).await {
            Ok(Some(c)) if c.metadata.deletion_timestamp.is_some() => {
                Err(CloudProviderError::node_class_not_ready(format!(
                    "CCENodeClass {name:?} is terminating"
                )))
            }
            Ok(Some(c)) => Ok(c),
            Ok(None) => Err(CloudProviderError::node_class_not_ready(format!(
                "CCENodeClass {name:?} not found"
            ))),
            Err(e) => Err(CloudProviderError::Other(e.into())),
        }
    }

    /// The NodeClass's instance types, reused until flavors, zones, prices, the NodeClass's
    /// options or the unavailable offerings change (or [`RESOLVED_TYPES_TTL`](karpenter_cloudprovider::resolved::RESOLVED_TYPES_TTL) passes, so
    /// expired capacity errors show).
    async fn types_for(&self, class: &CCENodeClass) -> Result<Vec<Arc<InstanceType>>> {
        self.refresh().await?;
        let catalog = self.catalog.lock().await;
        let options = InstanceTypeOptions::for_node_class(&class.spec, self.options.region.clone())
            .map_err(|e| CloudProviderError::node_class_not_ready(e.to_string()))?;
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
        let types: Vec<Arc<InstanceType>> = instancetype::instance_types(
            &catalog.flavors,
            &catalog.zones,
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

    /// The claim a CCE node stands for: labels from the node (and its type, when known), its
    /// providerID as CCE registers the node, the node and server ids, and deleting when CCE is
    /// deleting it.
    fn claim_for(
        &self,
        node: &Node,
        it: Option<&InstanceType>,
        class: Option<&CCENodeClass>,
    ) -> NodeClaim {
        let mut labels: BTreeMap<String, String> = it
            .map(|t| t.requirements.single_valued_labels())
            .unwrap_or_default();
        labels.insert(ZONE_LABEL.into(), node.spec.az.clone());
        labels.insert(CAPACITY_TYPE_LABEL.into(), CAPACITY_TYPE_ON_DEMAND.into());
        labels.insert(INSTANCE_TYPE_LABEL.into(), node.spec.flavor.clone());
        if let Some(pool) = node.node_pool() {
            labels.insert(NODE_POOL_LABEL.into(), pool.to_string());
        }
        let mut annotations =
            BTreeMap::from([(ANNOTATION_NODE_ID.to_string(), node.metadata.uid.clone())]);
        if let Some(server) = node.status.server_id.as_deref().filter(|s| !s.is_empty()) {
            annotations.insert(ANNOTATION_SERVER_ID.to_string(), server.to_string());
        }
        if let Some(class) = class {
            annotations.insert(CCE_NODE_CLASS_HASH_ANNOTATION.to_string(), class.hash());
            annotations.insert(
                CCE_NODE_CLASS_HASH_VERSION_ANNOTATION.to_string(),
                CCE_NODE_CLASS_HASH_VERSION.to_string(),
            );
        }
        NodeClaim {
            metadata: ObjectMeta {
                // Created under the claim's name (when CCE accepts it): garbage collection
                // knows it by that until the claim records the providerID.
                name: Some(node.metadata.name.clone()).filter(|n| !n.is_empty()),
                labels: Some(labels),
                annotations: Some(annotations),
                creation_timestamp: node
                    .metadata
                    .creation_timestamp
                    .as_deref()
                    .and_then(cce::parse_timestamp)
                    .map(Time),
                deletion_timestamp: node
                    .is_deleting()
                    .then(|| Time(k8s_openapi::jiff::Timestamp::now())),
                ..Default::default()
            },
            spec: Default::default(),
            status: Some(NodeClaimStatus {
                provider_id: Some(cce::provider_id(&node.metadata.uid)),
                image_id: node.spec.os.clone().filter(|s| !s.is_empty()),
                capacity: it.map(|t| t.capacity.to_list()).unwrap_or_default(),
                allocatable: it.map(|t| t.allocatable().to_list()).unwrap_or_default(),
                ..Default::default()
            }),
        }
    }

    /// A created claim: labels as the create decided them, and the NodeClass's hash for drift.
    fn launched(
        &self,
        claim: &NodeClaim,
        node: &Node,
        it: &InstanceType,
        class: &CCENodeClass,
    ) -> NodeClaim {
        let mut out = self.claim_for(node, Some(it), Some(class));
        let offering = it
            .offerings
            .iter()
            .find(|o| o.zone == node.spec.az)
            .cloned()
            .unwrap_or_else(|| Offering {
                zone: node.spec.az.clone(),
                capacity_type: CAPACITY_TYPE_ON_DEMAND.into(),
                price: 0.0,
                available: true,
                reservation: None,
            });
        let mut labels = launch_labels(claim, it, &offering, &instancetype::LABELS);
        labels.extend(out.metadata.labels.take().unwrap_or_default());
        out.metadata.labels = Some(labels);
        out.metadata.name = None;
        out.metadata.creation_timestamp = None;
        out.metadata.deletion_timestamp = None;
        out
    }

    /// The cluster's node created for the claim with this uid, if any (not one being deleted).
    async fn node_of_claim(&self, uid: &str) -> Result<Option<Node>> {
        if uid.is_empty() {
            return Ok(None);
        }
        let nodes = instance::list_nodes(&self.client, &self.options.cluster_id)
            .await
            .map_err(other)?;
        Ok(nodes
            .into_iter()
            .find(|n| n.node_claim_uid() == Some(uid) && !n.is_deleting()))
    }

    /// The subnet a create goes into, counted as taken until the returned guard drops.
    fn take_subnet(&self, class: &CCENodeClass) -> Option<InFlight> {
        let status = class.status.as_ref()?;
        let mut s = self.subnets.lock().unwrap_or_else(|p| p.into_inner());
        let fresh = s.at.is_some_and(|t| t.elapsed() < SUBNETS_TTL);
        let free: BTreeMap<String, i64> = if fresh {
            s.listed
                .iter()
                .filter_map(|x| Some((x.id.clone(), x.available_ip_address_count?)))
                .collect()
        } else {
            BTreeMap::new()
        };
        let id = subnet::pick_for_launch(&status.subnets, &free, &s.in_flight)?.to_string();
        *s.in_flight.entry(id.clone()).or_default() += 1;
        Some(InFlight {
            subnets: self.subnets.clone(),
            id,
        })
    }

    /// Follows a node CCE accepted until its ECS server exists, CCE's job ends, or
    /// [`HuaweiOptions::job_wait`] passes.
    async fn follow(&self, node: Node) -> Result<Creation> {
        let Some(job_id) = node.status.job_id.clone().filter(|j| !j.is_empty()) else {
            return Ok(Creation::Started(Box::new(node)));
        };
        let deadline = tokio::time::Instant::now() + self.options.job_wait;
        let mut latest = node;
        loop {
            let job = instance::show_job(&self.client, &job_id)
                .await
                .map_err(other)?;
            if job.failed() {
                let reason = job
                    .failure_reason()
                    .unwrap_or_else(|| format!("CCE job {job_id} failed"));
                return Ok(Creation::Failed(reason));
            }
            match instance::show_node(&self.client, &self.options.cluster_id, &latest.metadata.uid)
                .await
            {
                Ok(n) => latest = n,
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(other(e)),
            }
            let has_server = latest
                .status
                .server_id
                .as_deref()
                .is_some_and(|s| !s.is_empty());
            if job.succeeded() || has_server || tokio::time::Instant::now() >= deadline {
                return Ok(Creation::Started(Box::new(latest)));
            }
            tokio::time::sleep(self.options.job_poll).await;
        }
    }

    /// Deletes a node CCE failed to create, so nothing is left behind.
    async fn clean_up(&self, node: &Node) {
        if let Err(e) =
            instance::delete_node(&self.client, &self.options.cluster_id, &node.metadata.uid).await
            && !e.is_not_found()
        {
            // Garbage collection deletes it later: it carries the NodePool tag.
            tracing::warn!(node = %node.metadata.uid, error = %e, "deleting a node CCE failed to create");
        }
    }

    fn mark_unavailable(&self, c: &Candidate, why: &str) {
        self.unavailable.mark_for(
            &c.flavor,
            &c.zone,
            CAPACITY_TYPE_ON_DEMAND,
            Instant::now(),
            UNAVAILABLE_OFFERING_TTL,
        );
        tracing::info!(instance_type = %c.flavor, zone = %c.zone, reason = why, "offering unavailable");
    }
}

impl<S: ClusterState> CloudProvider for HuaweiCloudProvider<S> {
    fn name(&self) -> &'static str {
        "huawei"
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

    /// Upstream's policies: a node not Ready for thirty minutes is replaced.
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
        if let Err(e) = class.spec.validate_for_create() {
            return Err(CloudProviderError::create("InvalidNodeClass", e));
        }
        let claim_name = claim.metadata.name.clone().unwrap_or_default();
        let types = self.types_for(&class).await?;
        let find = |name: &str| types.iter().find(|t| t.name == name).map(|t| &**t);
        // Asked for before (a retry after a lost answer, a restart): that node, never a second.
        let uid = claim.metadata.uid.clone().unwrap_or_default();
        if let Some(existing) = self.node_of_claim(&uid).await? {
            let Some(it) = find(&existing.spec.flavor) else {
                let mut out = self.claim_for(&existing, None, Some(&class));
                out.metadata.name = None;
                out.metadata.creation_timestamp = None;
                return Ok(out);
            };
            return Ok(self.launched(claim, &existing, it, &class));
        }
        let candidates = cce::candidates(&types, claim);
        if candidates.is_empty() {
            return Err(CloudProviderError::insufficient_capacity(format!(
                "NodeClaim {claim_name}: no available on-demand offering fits ({} instance types)",
                types.len()
            )));
        }
        let Some(subnet) = self.take_subnet(&class) else {
            return Err(CloudProviderError::node_class_not_ready(format!(
                "CCENodeClass {:?} has no subnets",
                class.metadata.name.as_deref().unwrap_or_default()
            )));
        };
        let mut last_refusal = String::new();
        for c in &candidates {
            let body = cce::create_node_body(&CreateNode {
                spec: &class.spec,
                claim,
                candidate: c,
                subnet_id: &subnet.id,
            })
            .map_err(|e| CloudProviderError::create("InvalidNodeClass", e.to_string()))?;
            let node =
                match instance::create_node(&self.client, &self.options.cluster_id, &body).await {
                    Ok(node) => node,
                    Err(e) if e.is_insufficient_capacity() || e.is_unsupported_network() => {
                        self.mark_unavailable(c, &e.to_string());
                        last_refusal = e.to_string();
                        continue;
                    }
                    Err(e) => return Err(other(e)),
                };
            match self.follow(node.clone()).await? {
                Creation::Started(node) => {
                    let it = find(&c.flavor).ok_or_else(|| {
                        CloudProviderError::Other(
                            format!("created unknown flavor {}", c.flavor).into(),
                        )
                    })?;
                    return Ok(self.launched(claim, &node, it, &class));
                }
                Creation::Failed(reason) => {
                    self.clean_up(&node).await;
                    if crate::errors::reads_as_insufficient_capacity(&reason) {
                        self.mark_unavailable(c, &reason);
                        last_refusal = reason;
                        continue;
                    }
                    return Err(CloudProviderError::create("NodeCreationFailed", reason));
                }
            }
        }
        Err(CloudProviderError::insufficient_capacity(format!(
            "NodeClaim {claim_name}: every candidate was refused ({} tried), last: {last_refusal}",
            candidates.len()
        )))
    }

    async fn delete(&self, claim: &NodeClaim) -> Result<()> {
        let provider_id = claim
            .status
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .unwrap_or_default();
        // A claim that never got a providerID may still own a node tagged with its uid.
        let id = match cce::node_id(provider_id) {
            Some(id) => id.to_string(),
            None => match self
                .node_of_claim(claim.metadata.uid.as_deref().unwrap_or_default())
                .await?
            {
                Some(n) => n.metadata.uid,
                None => {
                    return Err(CloudProviderError::not_found(format!(
                        "no CCE node for NodeClaim {:?}",
                        claim.metadata.name.as_deref().unwrap_or_default()
                    )));
                }
            },
        };
        match instance::delete_node(&self.client, &self.options.cluster_id, &id).await {
            Ok(()) => Ok(()),
            Err(e) if e.is_not_found() => Err(CloudProviderError::not_found(format!(
                "CCE node {id} already deleted"
            ))),
            Err(e) => Err(other(e)),
        }
    }

    async fn get(&self, provider_id: &str) -> Result<NodeClaim> {
        let id = cce::node_id(provider_id).ok_or_else(|| {
            CloudProviderError::not_found(format!("not a CCE providerID: {provider_id:?}"))
        })?;
        match instance::show_node(&self.client, &self.options.cluster_id, id).await {
            Ok(node) => Ok(self.claim_for(&node, None, None)),
            Err(e) if e.is_not_found() => Err(CloudProviderError::not_found(format!(
                "CCE node {id} not found"
            ))),
            Err(e) => Err(other(e)),
        }
    }

    async fn list(&self) -> Result<Vec<NodeClaim>> {
        let nodes = instance::list_nodes(&self.client, &self.options.cluster_id)
            .await
            .map_err(other)?;
        // The cluster's other nodes (CCE's node pools, hand-made ones) are never Karpenter's to
        // collect.
        Ok(nodes
            .iter()
            .filter(|n| n.is_karpenters())
            .map(|n| self.claim_for(n, None, None))
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
            .and_then(cce::node_id)
        else {
            return Ok(None);
        };
        let node = match instance::show_node(&self.client, &self.options.cluster_id, id).await {
            Ok(n) => n,
            Err(e) if e.is_not_found() => {
                return Err(CloudProviderError::not_found(format!(
                    "CCE node {id} not found"
                )));
            }
            Err(e) => return Err(other(e)),
        };
        drift::node_drift(&class, &node)
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
