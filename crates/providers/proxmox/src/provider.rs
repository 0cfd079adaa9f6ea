//! The Proxmox VE `CloudProvider`: NodeClaims become VMs cloned from templates.
//!
//! * **Instance types** are upstream's synthetic list (or the operator's file), offered in the
//!   zones (Proxmox nodes) whose free CPU and memory can hold them; the room is read from
//!   `/cluster/resources` and kept a short while, and creates in flight count against it.
//! * **Create** picks the cheapest type the NodeClaim allows, then the zone by the NodeClass's
//!   placement strategy, clones the NodeClass's template there, sizes the VM, attaches its
//!   security groups and its cloud-init CD-ROM, and starts it ([`crate::instance`]). A retried
//!   create finds the VM named after the NodeClaim and never makes a second.
//! * **Get/List/Delete** go through `/cluster/resources`: only VMs carrying
//!   [`MARKER_TAG`](crate::instance::MARKER_TAG) are this provider's.
//! * **Drift**: the NodeClass hash, and the template (image) the VM was cloned from.
//!
//! providerID: `proxmox://<region>/<vmid>`, as upstream's nodes register.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karpenter_api::crd::Crd;
use karpenter_api::labels::{
    CAPACITY_TYPE_LABEL, INSTANCE_TYPE_LABEL, NODE_POOL_LABEL, REGION_LABEL, ZONE_LABEL,
};
use karpenter_api::{NodeClaim, NodeClaimStatus, NodeClassReference, NodePool};
use karpenter_cloudprovider::resolved::ResolvedTypes;
use karpenter_cloudprovider::unavailable::UnavailableOfferings;
use karpenter_cloudprovider::{
    CloudProvider, CloudProviderError, InstanceType, NodeClassReadiness, Offering, RepairPolicy,
    Result,
};
use karpenter_controller::nodeclasses::NodeClasses;
use karpenter_core::instancetype::{launch_labels, launchable, order_by_price};
use kube::Api;
use tokio::sync::Mutex;

use crate::apis::{
    LABEL_INSTANCE_IMAGE_ID, MetadataType, PROXMOX_NODE_CLASS_HASH_ANNOTATION,
    PROXMOX_NODE_CLASS_HASH_VERSION, PROXMOX_NODE_CLASS_HASH_VERSION_ANNOTATION, ProxmoxNodeClass,
};
use crate::capacity::{self, Capacities, NodeSettingsFile, VmShape};
use crate::cloudinit::bootstrap::TOKEN_ANNOTATION;
use crate::inplace;
use crate::instance::{self, CloudInitIso, CreateError, MARKER_TAG, TaskTiming, VmPlan};
use crate::instancetype::{self, InstanceTypeOptions, InstanceTypeSpec};
use crate::placement::{self, PlacementRequest, ZoneBalance};
use crate::provider_id::{format as provider_id, parse as parse_provider_id};
use crate::pve::types::{ClusterResource, split_tags};
use crate::pve::{PveClient, PvePool};
use crate::template_build::StorageInfo;
use crate::templates::{self, TemplateConfig, TemplateVm, is_disk_key};

/// The provider's settings.
#[derive(Clone, Debug)]
pub struct ProxmoxOptions {
    /// `PROXMOX_VMID`: the lowest id a new VM gets (upstream: 20000).
    pub min_vmid: u32,
    /// The instance types (upstream's list, or the `INSTANCE_TYPES_FILE`).
    pub instance_types: Vec<InstanceTypeSpec>,
    /// `NODE_SETTING_FILE`: what each Proxmox node keeps for itself.
    pub node_settings: Option<NodeSettingsFile>,
    /// How long Proxmox tasks are waited for and how often they are polled.
    pub tasks: TaskTiming,
    /// How long the nodes' room and the template list are reused before they are read again.
    pub inventory_ttl: Duration,
    /// Where the cluster's CA (`kube-root-ca.crt`) and bootstrap tokens are (`SYSTEM_NAMESPACE`
    /// for the first, as upstream; bootstrap tokens always live in kube-system).
    pub system_namespace: String,
}

impl Default for ProxmoxOptions {
    fn default() -> Self {
        Self {
            min_vmid: 20_000,
            instance_types: instancetype::default_specs(),
            node_settings: None,
            tasks: TaskTiming {
                wait: Duration::from_secs(5 * 60),
                poll: Duration::from_secs(1),
            },
            inventory_ttl: Duration::from_secs(30),
            system_namespace: "kube-system".into(),
        }
    }
}

/// What the provider reads from Proxmox: each region's nodes' room and template VMs.
#[derive(Default)]
struct Inventory {
    capacities: Capacities,
    templates: Vec<TemplateVm>,
    /// Every region's storages that hold images, ISOs or imports.
    storages: Vec<StorageInfo>,
    at: Option<Instant>,
    /// Bumped at every read, so resolved types know they are stale.
    generation: u64,
}

/// The Proxmox VE provider.
pub struct ProxmoxCloudProvider {
    clusters: PvePool,
    kube: kube::Client,
    options: ProxmoxOptions,
    inventory: Mutex<Inventory>,
    types: ResolvedTypes,
    unavailable: UnavailableOfferings,
}

fn other(e: impl std::error::Error + Send + Sync + 'static) -> CloudProviderError {
    CloudProviderError::other(e)
}

impl ProxmoxCloudProvider {
    /// A provider over the Proxmox clusters of `clusters`, reading NodeClasses, templates and
    /// Secrets through `kube`.
    pub fn new(clusters: PvePool, kube: kube::Client, options: ProxmoxOptions) -> Self {
        Self {
            clusters,
            kube,
            options,
            inventory: Mutex::default(),
            types: ResolvedTypes::default(),
            unavailable: UnavailableOfferings::default(),
        }
    }

    /// The Proxmox clusters, by region.
    pub fn clusters(&self) -> &PvePool {
        &self.clusters
    }

    /// The settings it runs with.
    pub fn options(&self) -> &ProxmoxOptions {
        &self.options
    }

    /// The Kubernetes client it reads the cluster with.
    pub fn kube(&self) -> &kube::Client {
        &self.kube
    }

    /// The unavailable-offerings cache.
    pub fn unavailable(&self) -> &UnavailableOfferings {
        &self.unavailable
    }

    /// Every region's template VMs, read again when older than the inventory TTL.
    pub async fn templates(&self) -> std::result::Result<Vec<TemplateVm>, String> {
        self.refresh(false).await?;
        Ok(self.inventory.lock().await.templates.clone())
    }

    /// Every region's storages holding images, ISOs or imports, as last read.
    pub async fn storages(&self) -> Vec<StorageInfo> {
        self.inventory.lock().await.storages.clone()
    }

    /// The storages of `region`'s node `zone` holding `content` (`images`, `iso`, `import`).
    pub async fn storages_with(&self, region: &str, zone: &str, content: &str) -> Vec<String> {
        let inventory = self.inventory.lock().await;
        inventory
            .storages
            .iter()
            .filter(|s| s.region == region && s.nodes.iter().any(|n| n == zone))
            .filter(|s| s.holds(content))
            .map(|s| s.storage.clone())
            .collect()
    }

    /// The (region, node) pairs that have storage `storage`.
    pub async fn zones_with_storage(&self, storage: &str) -> Vec<(String, String)> {
        let inventory = self.inventory.lock().await;
        inventory
            .storages
            .iter()
            .filter(|s| s.storage == storage)
            .flat_map(|s| s.nodes.iter().map(|n| (s.region.clone(), n.clone())))
            .collect()
    }

    /// Reads every region's nodes, VMs, storages and templates when the last read is older than
    /// the TTL (or `force`). A region that cannot be read keeps what was read before.
    pub async fn refresh(&self, force: bool) -> std::result::Result<(), String> {
        let mut inventory = self.inventory.lock().await;
        if !force
            && inventory
                .at
                .is_some_and(|at| at.elapsed() < self.options.inventory_ttl)
        {
            return Ok(());
        }
        let mut failures = Vec::new();
        let mut templates = Vec::new();
        let mut read_regions = BTreeSet::new();
        for (region, client) in self.clusters.iter() {
            match read_region(region, client, self.options.node_settings.as_ref()).await {
                Ok(read) => {
                    inventory.capacities.replace_region(region, read.nodes);
                    inventory.storages.retain(|s| s.region != region);
                    inventory.storages.extend(read.storages);
                    templates.extend(read.templates);
                    read_regions.insert(region.to_string());
                }
                Err(e) => failures.push(format!("{region}: {e}")),
            }
        }
        // Keep the last templates of regions that could not be read.
        templates.extend(
            inventory
                .templates
                .iter()
                .filter(|t| !read_regions.contains(&t.region))
                .cloned(),
        );
        inventory.templates = templates;
        inventory.generation += 1;
        if failures.is_empty() || inventory.at.is_none() {
            inventory.at = Some(Instant::now());
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(format!("reading Proxmox: {}", failures.join("; ")))
        }
    }

    async fn node_class(&self, name: &str) -> Result<ProxmoxNodeClass> {
        let api: Api<ProxmoxNodeClass> = Api::all(self.kube.clone());
        match api.node_class(name).await {
            Ok(Some(class)) => Ok(class),
            Ok(None) => Err(CloudProviderError::node_class_not_ready(format!(
                "ProxmoxNodeClass {name:?} not found"
            ))),
            Err(e) => Err(CloudProviderError::Other(e.into())),
        }
    }

    /// The instance types `class` can launch, with offerings where the nodes have room; reused
    /// while nothing they derive from changed.
    async fn types_for(&self, class: &ProxmoxNodeClass) -> Result<Vec<Arc<InstanceType>>> {
        if let Err(e) = self.refresh(false).await {
            tracing::warn!(error = %e, "keeping the last Proxmox inventory");
        }
        let inventory = self.inventory.lock().await;
        let zones: BTreeSet<String> = class
            .selected_zones()
            .into_iter()
            .filter(|z| class.spec.region.as_deref().is_none_or(|r| r == z.region))
            .map(|z| z.zone)
            .collect();
        let options = InstanceTypeOptions {
            max_pods: class
                .spec
                .kubelet_configuration
                .as_ref()
                .and_then(|k| k.max_pods),
            region: class.spec.region.clone().filter(|r| !r.is_empty()),
            zones: Some(zones),
        };
        let key = format!(
            "{options:?}/{}/{}",
            inventory.generation,
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
            &self.options.instance_types,
            &inventory.capacities,
            &options,
            &unavailable,
        )
        .into_iter()
        .map(Arc::new)
        .collect();
        self.types.put(&name, key, types.clone(), now);
        Ok(types)
    }

    /// Every VM of this provider in every region that could be read.
    async fn own_vms(&self) -> Result<Vec<(String, ClusterResource)>> {
        let mut out = Vec::new();
        for (region, client) in self.clusters.iter() {
            let vms = client.vm_resources().await.map_err(other)?;
            out.extend(
                vms.into_iter()
                    .filter(|vm| {
                        !vm.template && split_tags(&vm.tags).iter().any(|t| t == MARKER_TAG)
                    })
                    .map(|vm| (region.to_string(), vm)),
            );
        }
        Ok(out)
    }

    /// The claim a VM stands for: its region and zone, its providerID; named after the VM (the
    /// NodeClaim's name) so garbage collection knows an in-flight create by it.
    fn claim_for(&self, region: &str, vm: &ClusterResource) -> NodeClaim {
        let labels = BTreeMap::from([
            (REGION_LABEL.to_string(), region.to_string()),
            (ZONE_LABEL.to_string(), vm.node.clone()),
        ]);
        NodeClaim {
            metadata: ObjectMeta {
                name: Some(vm.name.clone()).filter(|n| !n.is_empty()),
                labels: Some(labels),
                ..Default::default()
            },
            spec: Default::default(),
            status: Some(NodeClaimStatus {
                provider_id: vm.vmid.map(|id| provider_id(region, id)),
                ..Default::default()
            }),
        }
    }

    /// The NodeClaim a create returns: labels of the type, offering and NodeClaim, the image
    /// (template) id, the NodeClass hash.
    #[allow(clippy::too_many_arguments)]
    fn launched(
        &self,
        claim: &NodeClaim,
        class: &ProxmoxNodeClass,
        it: &InstanceType,
        capacity_type: &str,
        region: &str,
        zone: &str,
        vmid: u32,
        template: Option<&TemplateVm>,
    ) -> NodeClaim {
        let offering = it
            .offerings
            .iter()
            .find(|o| o.zone == zone && o.capacity_type == capacity_type)
            .cloned()
            .unwrap_or_else(|| Offering {
                zone: zone.to_string(),
                capacity_type: capacity_type.to_string(),
                price: 0.0,
                available: true,
                reservation: None,
            });
        let mut labels = launch_labels(claim, it, &offering, &instancetype::LABELS);
        labels.insert(REGION_LABEL.into(), region.into());
        labels.insert(ZONE_LABEL.into(), zone.into());
        labels.insert(INSTANCE_TYPE_LABEL.into(), it.name.clone());
        labels.insert(CAPACITY_TYPE_LABEL.into(), capacity_type.into());
        if let Some(t) = template {
            labels.insert(LABEL_INSTANCE_IMAGE_ID.into(), t.hash.clone());
        }
        if let Some(pool) = claim
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(NODE_POOL_LABEL))
        {
            labels.insert(NODE_POOL_LABEL.into(), pool.clone());
        }
        let mut annotations = BTreeMap::from([
            (PROXMOX_NODE_CLASS_HASH_ANNOTATION.to_string(), class.hash()),
            (
                PROXMOX_NODE_CLASS_HASH_VERSION_ANNOTATION.to_string(),
                PROXMOX_NODE_CLASS_HASH_VERSION.to_string(),
            ),
        ]);
        annotations.extend(inplace::launch_annotations(class));
        NodeClaim {
            metadata: ObjectMeta {
                labels: Some(labels),
                annotations: Some(annotations),
                ..Default::default()
            },
            spec: Default::default(),
            status: Some(NodeClaimStatus {
                provider_id: Some(provider_id(region, vmid)),
                image_id: template.map(|t| t.hash.clone()),
                capacity: it.capacity.to_list(),
                allocatable: it.allocatable().to_list(),
                ..Default::default()
            }),
        }
    }
}

/// What one region's read found.
struct RegionRead {
    nodes: Vec<capacity::NodeCapacity>,
    storages: Vec<StorageInfo>,
    templates: Vec<TemplateVm>,
}

async fn read_region(
    region: &str,
    client: &PveClient,
    settings: Option<&NodeSettingsFile>,
) -> std::result::Result<RegionRead, String> {
    let resources = client.resources(None).await.map_err(|e| e.to_string())?;
    let nodes: Vec<capacity::NodeStatus> = resources
        .iter()
        .filter(|r| r.kind == "node")
        .map(|r| capacity::NodeStatus {
            name: r.node.clone(),
            online: r.status == "online",
            cpus: u32::try_from(r.maxcpu).unwrap_or(u32::MAX),
            memory: r.maxmem,
            cpu_load: r.cpu,
        })
        .collect();
    let vms: Vec<capacity::VmStatus> = resources
        .iter()
        .filter(|r| r.kind == "qemu" && !r.template)
        .filter_map(|r| {
            Some(capacity::VmStatus {
                id: r.vmid?,
                name: r.name.clone(),
                node: r.node.clone(),
                running: r.status == "running",
                cpus: u32::try_from(r.maxcpu).unwrap_or(u32::MAX),
                memory: r.maxmem,
                affinity: None,
            })
        })
        .collect();
    let (capacities, errors) = capacity::region_nodes(region, &nodes, &vms, settings);
    for e in errors {
        tracing::warn!(region, error = %e, "a Proxmox node offers no room");
    }
    let storages = StorageInfo::from_resources(region, &resources);
    let mut templates = Vec::new();
    for r in resources.iter().filter(|r| r.kind == "qemu" && r.template) {
        let Some(vmid) = r.vmid else { continue };
        let config = match client.vm_config(&r.node, vmid).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(region, vmid, error = %e, "reading a template's config");
                continue;
            }
        };
        let text = |k: &str| config.get(k).unwrap_or_default();
        let (tags, description, meta) = (text("tags"), text("description"), text("meta"));
        let disks: Vec<String> = config
            .0
            .keys()
            .filter(|k| is_disk_key(k))
            .filter_map(|k| config.get(k))
            .collect();
        templates.push(TemplateVm::new(
            region,
            &r.node,
            vmid,
            &r.name,
            &TemplateConfig {
                tags: &tags,
                description: &description,
                meta: &meta,
                disks: disks.iter().map(String::as_str).collect(),
            },
        ));
    }
    Ok(RegionRead {
        nodes: capacities,
        storages,
        templates,
    })
}

impl CloudProvider for ProxmoxCloudProvider {
    fn name(&self) -> &'static str {
        "proxmox"
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
        let api: Api<ProxmoxNodeClass> = Api::all(self.kube.clone());
        NodeClassReadiness::of_lookup(api.node_class(&reference.name).await)
    }

    /// Upstream's policies: a node not Ready for fifteen minutes is replaced.
    fn repair_policies(&self) -> Vec<RepairPolicy> {
        let fifteen_minutes = Duration::from_secs(15 * 60);
        vec![
            RepairPolicy::new("Ready", "False", fifteen_minutes),
            RepairPolicy::new("Ready", "Unknown", fifteen_minutes),
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
            return Err(CloudProviderError::create(
                "InvalidNodeClass",
                e.to_string(),
            ));
        }
        let claim_name = claim.metadata.name.clone().unwrap_or_default();
        let types = self.types_for(&class).await?;
        // Asked for before (a retry after a lost answer, a restart): that VM, never a second.
        if let Some((region, vm)) = self
            .own_vms()
            .await?
            .into_iter()
            .find(|(_, vm)| vm.name == claim_name)
        {
            let mut out = self.claim_for(&region, &vm);
            out.metadata.name = None;
            return Ok(out);
        }
        let (requirements, launchable) = launchable(&types, claim);
        let mut candidates: Vec<Arc<InstanceType>> = launchable.into_iter().cloned().collect();
        order_by_price(&mut candidates, &requirements);
        let strategy =
            ZoneBalance::from_spec(Some(class.spec.placement_strategy.zone_balance.as_str()));
        let regions: Vec<String> = match class.spec.region.as_deref().filter(|r| !r.is_empty()) {
            Some(r) => vec![r.to_string()],
            None => self
                .clusters
                .regions()
                .into_iter()
                .map(str::to_string)
                .collect(),
        };
        let mut tried = Vec::new();
        for it in &candidates {
            for region in &regions {
                let client = match self.clusters.get(region) {
                    Ok(c) => c,
                    Err(_) => continue,
                };
                let selected = class.zones(region);
                let template_ids = class.template_ids(region);
                let zones = {
                    let inventory = self.inventory.lock().await;
                    placement::zones_for_create(
                        &PlacementRequest {
                            instance_type: it,
                            requirements: &requirements,
                            region,
                            selected_zones: &selected,
                            strategy,
                            seed: &claim_name,
                        },
                        &inventory.capacities,
                    )
                };
                for zone in zones {
                    let template = {
                        let inventory = self.inventory.lock().await;
                        templates::for_zone(&inventory.templates, region, &zone, &template_ids)
                            .cloned()
                    };
                    let Some(template) = template else {
                        tried.push(format!("{region}/{zone}: no template"));
                        continue;
                    };
                    let shape = VmShape::of(&it.capacity);
                    if let Err(e) = self.inventory.lock().await.capacities.reserve(
                        region,
                        &zone,
                        &claim_name,
                        shape,
                    ) {
                        tried.push(format!("{region}/{zone}: {e}"));
                        continue;
                    }
                    let capacity_type = placement::capacity_type(&requirements, it, &zone);
                    match self
                        .launch(
                            claim,
                            &class,
                            it,
                            capacity_type,
                            region,
                            &zone,
                            client,
                            &template,
                        )
                        .await
                    {
                        Ok((vmid, token_id)) => {
                            // The VM counts as running from the next read on.
                            self.inventory.lock().await.at = None;
                            let mut out = self.launched(
                                claim,
                                &class,
                                it,
                                capacity_type,
                                region,
                                &zone,
                                vmid,
                                Some(&template),
                            );
                            if let Some(id) = token_id {
                                out.metadata
                                    .annotations
                                    .get_or_insert_default()
                                    .insert(TOKEN_ANNOTATION.to_string(), id);
                            }
                            return Ok(out);
                        }
                        Err(e) => {
                            self.inventory.lock().await.capacities.release(&claim_name);
                            if let CloudProviderError::Create { .. } = e {
                                return Err(e);
                            }
                            tracing::warn!(nodeclaim = %claim_name, region, zone, instance_type = %it.name, error = %e, "creating a VM");
                            self.unavailable
                                .mark(&it.name, &zone, capacity_type, Instant::now());
                            tried.push(format!("{region}/{zone} {}: {e}", it.name));
                        }
                    }
                }
            }
        }
        Err(CloudProviderError::insufficient_capacity(format!(
            "NodeClaim {claim_name}: no Proxmox node could take it ({} types allowed){}",
            types.len(),
            if tried.is_empty() {
                String::new()
            } else {
                format!("; tried: {}", tried.join("; "))
            }
        )))
    }

    async fn delete(&self, claim: &NodeClaim) -> Result<()> {
        let provider_id = claim
            .status
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .unwrap_or_default();
        let name = claim.metadata.name.clone().unwrap_or_default();
        // A claim that never got a providerID may still own a VM named after it.
        let (region, vmid) = match parse_provider_id(provider_id) {
            Some((r, id)) => (r.to_string(), id),
            None => match self
                .own_vms()
                .await?
                .into_iter()
                .find(|(_, vm)| !name.is_empty() && vm.name == name)
            {
                Some((r, vm)) => (r, vm.vmid.unwrap_or_default()),
                None => {
                    return Err(CloudProviderError::not_found(format!(
                        "no Proxmox VM for NodeClaim {name:?}"
                    )));
                }
            },
        };
        let client = self.clusters.get(&region).map_err(|_| {
            CloudProviderError::not_found(format!("no Proxmox cluster for region {region:?}"))
        })?;
        let Some(vm) = client.vm_by_id(vmid).await.map_err(other)? else {
            return Err(CloudProviderError::not_found(format!(
                "Proxmox VM {vmid} in {region} already deleted"
            )));
        };
        match instance::destroy(client, &vm.node, vmid, self.options.tasks).await {
            Ok(()) => {}
            Err(e) if e.is_not_found() => {
                return Err(CloudProviderError::not_found(format!(
                    "Proxmox VM {vmid} in {region} already deleted"
                )));
            }
            Err(e) => return Err(other(e)),
        }
        for storage in self.storages_with(&region, &vm.node, "iso").await {
            instance::remove_iso(client, &vm.node, &storage, &instance::iso_file(vmid)).await;
        }
        crate::bootstrap::forget(&self.kube, claim).await;
        self.inventory.lock().await.at = None;
        Ok(())
    }

    async fn get(&self, provider_id: &str) -> Result<NodeClaim> {
        let (region, vmid) = parse_provider_id(provider_id).ok_or_else(|| {
            CloudProviderError::not_found(format!("not a Proxmox providerID: {provider_id:?}"))
        })?;
        let client = self.clusters.get(region).map_err(|_| {
            CloudProviderError::not_found(format!("no Proxmox cluster for region {region:?}"))
        })?;
        match client.vm_by_id(vmid).await.map_err(other)? {
            Some(vm) => Ok(self.claim_for(region, &vm)),
            None => Err(CloudProviderError::not_found(format!(
                "Proxmox VM {vmid} in {region} not found"
            ))),
        }
    }

    async fn list(&self) -> Result<Vec<NodeClaim>> {
        Ok(self
            .own_vms()
            .await?
            .iter()
            .map(|(region, vm)| self.claim_for(region, vm))
            .collect())
    }

    async fn is_drifted(&self, claim: &NodeClaim) -> Result<Option<String>> {
        let class = match self.node_class(&claim.spec.node_class_ref.name).await {
            Ok(c) => c,
            Err(CloudProviderError::NodeClassNotReady(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        if let Some(reason) = crate::drift::static_drift(claim, &class) {
            return Ok(Some(reason.to_string()));
        }
        let templates = match self.templates().await {
            Ok(t) => t,
            Err(e) => {
                tracing::debug!(error = %e, "drift: keeping the last template list");
                self.inventory.lock().await.templates.clone()
            }
        };
        Ok(crate::drift::image_drift(claim, &class, &templates).map(str::to_string))
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

impl ProxmoxCloudProvider {
    /// Makes one VM for `claim`: a new id, the template cloned, sized, its cloud-init attached
    /// and started. Returns the VM's id.
    #[allow(clippy::too_many_arguments)]
    async fn launch(
        &self,
        claim: &NodeClaim,
        class: &ProxmoxNodeClass,
        it: &InstanceType,
        capacity_type: &str,
        region: &str,
        zone: &str,
        client: &PveClient,
        template: &TemplateVm,
    ) -> Result<(u32, Option<String>)> {
        let storage = class
            .spec
            .boot_device
            .storage
            .clone()
            .filter(|s| !s.is_empty())
            .or_else(|| template.storage.clone())
            .ok_or_else(|| {
                CloudProviderError::create(
                    "NoBootStorage",
                    format!(
                        "template {} on {zone} has disks on several storages: set spec.bootDevice.storage",
                        template.vmid
                    ),
                )
            })?;
        let vmid = client
            .next_id_from(self.options.min_vmid)
            .await
            .map_err(other)?;
        let claim_name = claim.metadata.name.clone().unwrap_or_default();
        let class_name = class.metadata.name.clone().unwrap_or_default();
        let ephemeral_gb = u64::try_from(it.capacity.get("ephemeral-storage"))
            .ok()
            .filter(|bytes| *bytes > 0)
            .map(|bytes| bytes.div_ceil(1_000_000_000));
        let disk_gb = match (class.spec.boot_device.size_gigabytes(), ephemeral_gb) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let plan = VmPlan {
            node: zone.to_string(),
            template: template.vmid,
            vmid,
            name: claim_name.clone(),
            description: format!(
                "Karpenter managed instance, class={class_name}, capacity-type={capacity_type}, instance-type={}",
                it.name
            ),
            storage,
            pool: class.spec.resource_pool.clone().unwrap_or_default(),
            cores: u32::try_from((it.capacity.cpu + 999) / 1000).unwrap_or(1),
            memory_mib: u64::try_from(it.capacity.memory).unwrap_or(0) / (1024 * 1024),
            disk_gb,
            tags: inplace::vm_tags(class),
            firewall_rules: inplace::firewall_rules(class),
        };
        let iso_storages = self.storages_with(region, zone, "iso").await;
        let request = crate::bootstrap::Request {
            claim,
            class,
            instance_type: it,
            region,
            zone,
            vmid,
            template,
        };
        let cdrom = class.spec.metadata_options.type_ == MetadataType::Cdrom;
        if cdrom && iso_storages.is_empty() {
            return Err(CloudProviderError::create(
                "NoIsoStorage",
                format!(
                    "node {zone} of {region} has no storage for ISO images (content iso) to hold the cloud-init CD-ROM"
                ),
            ));
        }
        let mut token_id = None;
        let made = instance::create(client, &plan, self.options.tasks, async |config| {
            if !cdrom {
                return Ok(None);
            }
            let rendered = crate::bootstrap::render(
                &self.kube,
                &self.options.system_namespace,
                &request,
                config,
            )
            .await?;
            token_id = Some(rendered.token_id);
            Ok(Some(CloudInitIso {
                storage: iso_storages[0].clone(),
                file: instance::iso_file(vmid),
                data: rendered.iso,
            }))
        })
        .await;
        match made {
            Ok(()) => Ok((vmid, token_id)),
            Err(CreateError::CloudInit(e)) => Err(CloudProviderError::create("CloudInitFailed", e)),
            Err(CreateError::Pve(e)) => Err(other(e)),
        }
    }
}

/// Reads the cluster's CA as the nodes need it (`kube-root-ca.crt` in the system namespace).
pub async fn root_ca(kube: &kube::Client, namespace: &str) -> std::result::Result<String, String> {
    let api: Api<ConfigMap> = Api::namespaced(kube.clone(), namespace);
    let cm = api
        .get_opt("kube-root-ca.crt")
        .await
        .map_err(|e| format!("reading {namespace}/kube-root-ca.crt: {e}"))?
        .ok_or_else(|| format!("{namespace}/kube-root-ca.crt not found"))?;
    cm.data
        .and_then(|d| d.get("ca.crt").cloned())
        .ok_or_else(|| format!("{namespace}/kube-root-ca.crt has no ca.crt"))
}

/// The data of Secret `namespace/name`, as text.
pub async fn secret_data(
    kube: &kube::Client,
    namespace: &str,
    name: &str,
) -> std::result::Result<Option<BTreeMap<String, String>>, String> {
    let api: Api<Secret> = Api::namespaced(kube.clone(), namespace);
    let secret = api
        .get_opt(name)
        .await
        .map_err(|e| format!("reading Secret {namespace}/{name}: {e}"))?;
    Ok(secret.map(|s| {
        let mut out: BTreeMap<String, String> = s.string_data.unwrap_or_default();
        for (k, v) in s.data.unwrap_or_default() {
            out.insert(k, String::from_utf8_lossy(&v.0).into_owned());
        }
        out
    }))
}
