//! Standalone AKS node VMs through ARM, as upstream's default provisioning mode makes them:
//! for NodeClaim `x`, a NIC and a VM both named `aks-x` (PUT by name, so a retried create
//! never makes a second machine), the VM from a community-gallery image with the OS disk
//! deleted with it, spot as `evictionPolicy: Delete` with `maxPrice: -1`, tagged with the
//! cluster and NodePool. Get by name, List through Azure Resource Graph, Delete the VM
//! (forced) and then its NIC. The providerID is the VM's resource ID as AKS's cloud provider
//! registers it, resource group lower-cased.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::arm::{Arm, ArmError};
use crate::network::NicOptions;

/// `Microsoft.Compute` virtual machines' api-version.
pub const COMPUTE_API: &str = "2024-07-01";
/// `Microsoft.Network` network interfaces' api-version.
pub const NETWORK_API: &str = "2023-09-01";
/// Azure Resource Graph's api-version.
pub const RESOURCE_GRAPH_API: &str = "2022-10-01";
/// The tag naming the cluster (upstream replaces `/` with `_` in tag keys: Azure forbids it).
pub const CLUSTER_TAG: &str = "karpenter.azure.com_cluster";
/// The tag naming the NodePool.
pub const NODE_POOL_TAG: &str = "karpenter.sh_nodepool";
/// The tag AKS bills Linux nodes by.
pub const BILLING_TAG: &str = "compute.aks.billing";

/// Where the node VMs go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The subscription.
    pub subscription_id: String,
    /// The node resource group (`MC_…`).
    pub resource_group: String,
    /// The region (`eastus`).
    pub location: String,
    /// The cluster's name, for the cluster tag.
    pub cluster_name: String,
}

/// One node VM to create.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VmRequest {
    /// The NodeClaim's name; the VM, NIC and OS disk are `aks-<name>`.
    pub node_claim: String,
    /// The NodePool, for its tag.
    pub node_pool: String,
    /// The VM size (`Standard_D2s_v5`).
    pub vm_size: String,
    /// The zone number (`"1"`), none for a region without zones.
    pub zone: Option<String>,
    /// Spot rather than regular priority.
    pub spot: bool,
    /// The image: a community-gallery image version ID, or a gallery image ID.
    pub image_id: String,
    /// The OS disk's size in GB.
    pub os_disk_gb: i32,
    /// The subnet the NIC joins.
    pub subnet_id: String,
    /// The node's bootstrap, base64.
    pub custom_data: String,
    /// The admin user and its SSH public key.
    pub admin_username: String,
    /// See `admin_username`.
    pub ssh_public_key: String,
    /// The user's tags (from the NodeClass), with `/` in keys replaced as upstream does.
    pub tags: BTreeMap<String, String>,
    /// What the NIC joins besides the subnet.
    pub nic: NicOptions,
}

/// The resource name of a NodeClaim's VM and NIC.
pub fn resource_name(node_claim: &str) -> String {
    format!("aks-{node_claim}")
}

/// A node VM as ARM reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vm {
    /// Its name (`aks-<nodeclaim>`).
    pub name: String,
    /// Its resource ID.
    pub id: String,
    /// Its size.
    pub vm_size: String,
    /// Its zone number, if zonal.
    pub zone: Option<String>,
    /// Spot.
    pub spot: bool,
    /// `Creating`, `Succeeded`, `Deleting`, `Failed`…
    pub provisioning_state: String,
    /// Its image reference's ID.
    pub image_id: String,
    /// Its tags.
    pub tags: BTreeMap<String, String>,
    /// When ARM created it (RFC 3339), if it says.
    pub time_created: Option<String>,
}

impl Vm {
    /// Reads a VM resource (from GET, or a Resource Graph row).
    pub fn parse(v: &Value) -> Result<Self, ArmError> {
        let text = |p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_string);
        let name = text("/name").ok_or_else(|| ArmError::Parse("a VM without a name".into()))?;
        let image = v.pointer("/properties/storageProfile/imageReference");
        let image_id = image
            .and_then(|i| {
                i.get("communityGalleryImageId")
                    .or_else(|| i.get("sharedGalleryImageId"))
                    .or_else(|| i.get("id"))
            })
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        Ok(Self {
            id: text("/id").unwrap_or_default(),
            vm_size: text("/properties/hardwareProfile/vmSize").unwrap_or_default(),
            zone: v
                .pointer("/zones/0")
                .and_then(Value::as_str)
                .map(str::to_string),
            spot: text("/properties/priority").is_some_and(|p| p.eq_ignore_ascii_case("spot")),
            provisioning_state: text("/properties/provisioningState").unwrap_or_default(),
            time_created: text("/properties/timeCreated"),
            image_id,
            tags: v
                .get("tags")
                .and_then(Value::as_object)
                .map(|t| {
                    t.iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                        .collect()
                })
                .unwrap_or_default(),
            name,
        })
    }
}

/// The providerID AKS's cloud provider gives the node of VM `name`.
pub fn provider_id(placement: &Placement, name: &str) -> String {
    format!(
        "azure:///subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute/virtualMachines/{name}",
        placement.subscription_id,
        placement.resource_group.to_lowercase()
    )
}

/// The VM name in a providerID (`azure:///subscriptions/…/virtualMachines/<name>`).
pub fn vm_name(provider_id: &str) -> Option<&str> {
    let rest = provider_id.strip_prefix("azure://")?;
    let (kind, name) = rest.rsplit_once('/')?;
    kind.to_ascii_lowercase()
        .ends_with("/providers/microsoft.compute/virtualmachines")
        .then_some(name)
        .filter(|n| !n.is_empty())
}

fn group_path(p: &Placement) -> String {
    format!(
        "/subscriptions/{}/resourceGroups/{}",
        p.subscription_id, p.resource_group
    )
}

fn vm_path(p: &Placement, name: &str) -> String {
    format!(
        "{}/providers/Microsoft.Compute/virtualMachines/{name}",
        group_path(p)
    )
}

fn nic_path(p: &Placement, name: &str) -> String {
    format!(
        "{}/providers/Microsoft.Network/networkInterfaces/{name}",
        group_path(p)
    )
}

/// The tags every node VM and NIC carries: the user's, then the cluster, NodePool and billing
/// tags (which the user's cannot override).
pub fn tags(placement: &Placement, request: &VmRequest) -> BTreeMap<String, String> {
    let mut tags: BTreeMap<String, String> = request
        .tags
        .iter()
        .map(|(k, v)| (k.replace('/', "_"), v.clone()))
        .collect();
    tags.insert(CLUSTER_TAG.into(), placement.cluster_name.clone());
    tags.insert(NODE_POOL_TAG.into(), request.node_pool.clone());
    tags.insert(BILLING_TAG.into(), "linux".into());
    tags
}

/// The NIC's body, as upstream builds it: the primary IP configuration on the subnet in the
/// load balancers' backend pools, the managed NSG on a user's VNet, accelerated networking
/// when the size has it, and the pods' secondary IPs for Azure CNI on the node subnet.
pub fn nic_body(placement: &Placement, request: &VmRequest) -> Value {
    let nic = &request.nic;
    let pools: Vec<Value> = nic
        .backend_pools
        .iter()
        .map(|id| json!({"id": id}))
        .collect();
    let mut primary = json!({
        "name": resource_name(&request.node_claim),
        "properties": {
            "primary": true,
            "privateIPAllocationMethod": "Dynamic",
            "subnet": {"id": request.subnet_id},
        }
    });
    if !pools.is_empty() {
        primary["properties"]["loadBalancerBackendAddressPools"] = Value::Array(pools);
    }
    let mut configurations = vec![primary];
    configurations.extend((1..=nic.secondary_ip_configs).map(|i| {
        json!({
            "name": format!("ipconfig{i}"),
            "properties": {
                "primary": false,
                "privateIPAllocationMethod": "Dynamic",
                "subnet": {"id": request.subnet_id},
            }
        })
    }));
    let mut properties = json!({
        "ipConfigurations": configurations,
        "enableAcceleratedNetworking": nic.accelerated_networking,
        "enableIPForwarding": false,
    });
    if let Some(nsg) = &nic.network_security_group_id {
        properties["networkSecurityGroup"] = json!({"id": nsg});
    }
    json!({
        "location": placement.location,
        "tags": tags(placement, request),
        "properties": properties,
    })
}

/// The VM's body.
pub fn vm_body(placement: &Placement, request: &VmRequest, nic_id: &str) -> Value {
    let name = resource_name(&request.node_claim);
    let image = if request.image_id.starts_with("/CommunityGalleries/") {
        json!({"communityGalleryImageId": request.image_id})
    } else {
        json!({"id": request.image_id})
    };
    let mut properties = json!({
        "hardwareProfile": {"vmSize": request.vm_size},
        "storageProfile": {
            "imageReference": image,
            "osDisk": {
                "name": name,
                "createOption": "FromImage",
                "deleteOption": "Delete",
                "diskSizeGB": request.os_disk_gb,
                "managedDisk": {"storageAccountType": "Premium_LRS"},
            }
        },
        "osProfile": {
            "computerName": name,
            "adminUsername": request.admin_username,
            "customData": request.custom_data,
            "linuxConfiguration": {
                "disablePasswordAuthentication": true,
                "ssh": {"publicKeys": [{
                    "path": format!("/home/{}/.ssh/authorized_keys", request.admin_username),
                    "keyData": request.ssh_public_key,
                }]}
            }
        },
        "networkProfile": {"networkInterfaces": [{
            "id": nic_id,
            "properties": {"primary": true, "deleteOption": "Delete"}
        }]},
        "priority": if request.spot { "Spot" } else { "Regular" },
    });
    if request.spot {
        // As upstream: an evicted spot VM is deleted, and no price cap evicts it early.
        properties["evictionPolicy"] = json!("Delete");
        properties["billingProfile"] = json!({"maxPrice": -1});
    }
    let mut body = json!({
        "location": placement.location,
        "tags": tags(placement, request),
        "properties": properties,
    });
    if let Some(zone) = &request.zone {
        body["zones"] = json!([zone]);
    }
    body
}

/// The Resource Graph query listing the cluster's node VMs.
pub fn list_query(placement: &Placement) -> String {
    format!(
        "Resources | where type =~ 'microsoft.compute/virtualmachines' | where resourceGroup =~ '{}' | where tags['{CLUSTER_TAG}'] =~ '{}' | where tags has_cs '{NODE_POOL_TAG}'",
        placement.resource_group.replace('\'', ""),
        placement.cluster_name.replace('\'', "")
    )
}

/// Node VMs through ARM.
#[derive(Clone, Debug)]
pub struct Compute {
    arm: Arm,
    /// Where they go.
    pub placement: Placement,
}

impl Compute {
    /// VMs placed by `placement`, through `arm`.
    pub fn new(arm: Arm, placement: Placement) -> Self {
        Self { arm, placement }
    }

    /// Creates the NIC and then the VM of `request`, waiting for both to be provisioned; a VM
    /// a previous attempt made is returned as it is, never PUT again (a changed PUT could fail
    /// and the clean-up below would then delete a node in use). A VM that fails to come up is
    /// deleted with its NIC, so nothing is left behind; the error says why (`SkuNotAvailable`,
    /// `ZonalAllocationFailed`, `AllocationFailed`, a quota…).
    pub async fn create(&self, request: &VmRequest) -> Result<Vm, ArmError> {
        let name = resource_name(&request.node_claim);
        match self.get(&name).await {
            Ok(vm) => return Ok(vm),
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
        let nic = self
            .arm
            .put(
                &nic_path(&self.placement, &name),
                NETWORK_API,
                &nic_body(&self.placement, request),
            )
            .await?;
        let nic_id = nic
            .get("id")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| nic_path(&self.placement, &name));
        let created = self
            .arm
            .put(
                &vm_path(&self.placement, &name),
                COMPUTE_API,
                &vm_body(&self.placement, request, &nic_id),
            )
            .await;
        match created {
            Ok(vm) => Vm::parse(&vm),
            Err(e) => {
                // Best effort: the garbage collector deletes what this leaves.
                let _ = self.delete(&name).await;
                Err(e)
            }
        }
    }

    /// The VM named `name`.
    pub async fn get(&self, name: &str) -> Result<Vm, ArmError> {
        let v = self
            .arm
            .get(&vm_path(&self.placement, name), COMPUTE_API)
            .await?;
        Vm::parse(&v)
    }

    /// Every node VM of the cluster.
    pub async fn list(&self) -> Result<Vec<Vm>, ArmError> {
        let mut out = Vec::new();
        let mut skip_token: Option<String> = None;
        loop {
            let mut body = json!({
                "subscriptions": [self.placement.subscription_id],
                "query": list_query(&self.placement),
            });
            if let Some(token) = &skip_token {
                body["options"] = json!({"$skipToken": token});
            }
            let page = self
                .arm
                .post(
                    "/providers/Microsoft.ResourceGraph/resources",
                    RESOURCE_GRAPH_API,
                    &body,
                )
                .await?;
            for row in page
                .get("data")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                out.push(Vm::parse(row)?);
            }
            skip_token = page
                .get("$skipToken")
                .and_then(Value::as_str)
                .map(str::to_string);
            if skip_token.is_none() {
                return Ok(out);
            }
        }
    }

    /// Deletes the VM `name` (forced: no graceful shutdown, as upstream) and then its NIC.
    /// When neither exists the error is [`ArmError::is_not_found`].
    pub async fn delete(&self, name: &str) -> Result<(), ArmError> {
        let vm = self
            .arm
            .delete(
                &vm_path(&self.placement, name),
                COMPUTE_API,
                &[("forceDeletion", "true")],
            )
            .await;
        let nic = self
            .arm
            .delete(&nic_path(&self.placement, name), NETWORK_API, &[])
            .await;
        match (vm, nic) {
            (Err(vm), Err(nic)) if vm.is_not_found() && nic.is_not_found() => Err(vm),
            (Err(vm), _) if !vm.is_not_found() => Err(vm),
            (_, Err(nic)) if !nic.is_not_found() => Err(nic),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placement() -> Placement {
        Placement {
            subscription_id: "sub".into(),
            resource_group: "MC_rg_cluster_eastus".into(),
            location: "eastus".into(),
            cluster_name: "cluster".into(),
        }
    }

    fn request(spot: bool) -> VmRequest {
        VmRequest {
            node_claim: "default-abc".into(),
            node_pool: "default".into(),
            vm_size: "Standard_D2s_v5".into(),
            zone: Some("2".into()),
            spot,
            image_id: "/CommunityGalleries/AKSUbuntu-38d80f77-467a-481f-a8d4-09b6d4220bd2/images/2204gen2containerd/versions/202411.12.0".into(),
            os_disk_gb: 128,
            subnet_id: "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/s".into(),
            custom_data: "IyEvYmluL2Jhc2g=".into(),
            admin_username: "azureuser".into(),
            ssh_public_key: "ssh-rsa AAAA".into(),
            tags: [("team/name".to_string(), "web".to_string())].into(),
            nic: NicOptions::default(),
        }
    }

    #[test]
    fn provider_ids_as_aks_registers_them() {
        let id = provider_id(&placement(), "aks-default-abc");
        assert_eq!(
            id,
            "azure:///subscriptions/sub/resourceGroups/mc_rg_cluster_eastus/providers/Microsoft.Compute/virtualMachines/aks-default-abc"
        );
        assert_eq!(vm_name(&id), Some("aks-default-abc"));
        assert_eq!(vm_name("aws:///us-east-1a/i-1"), None);
        assert_eq!(
            vm_name(
                "azure:///subscriptions/s/resourceGroups/r/providers/Microsoft.Compute/virtualMachineScaleSets/vmss/virtualMachines/0"
            ),
            None,
            "a scale-set instance is not one of ours"
        );
    }

    #[test]
    fn spot_vms_are_deleted_on_eviction_and_never_priced_out() {
        let body = vm_body(&placement(), &request(true), "nic-id");
        assert_eq!(body["properties"]["priority"], "Spot");
        assert_eq!(body["properties"]["evictionPolicy"], "Delete");
        assert_eq!(body["properties"]["billingProfile"]["maxPrice"], -1);
        assert_eq!(body["zones"], json!(["2"]));
        assert_eq!(
            body["properties"]["storageProfile"]["imageReference"]["communityGalleryImageId"]
                .as_str()
                .map(|s| s.starts_with("/CommunityGalleries/")),
            Some(true)
        );
        assert_eq!(
            body["properties"]["storageProfile"]["osDisk"]["deleteOption"],
            "Delete"
        );
        let regular = vm_body(&placement(), &request(false), "nic-id");
        assert_eq!(regular["properties"]["priority"], "Regular");
        assert!(regular["properties"].get("evictionPolicy").is_none());
    }

    #[test]
    fn the_nic_joins_the_pools_and_nsg_it_is_given() {
        let plain = nic_body(&placement(), &request(false));
        let configs = plain["properties"]["ipConfigurations"].as_array().unwrap();
        assert_eq!(configs.len(), 1);
        assert!(
            configs[0]["properties"]
                .get("loadBalancerBackendAddressPools")
                .is_none()
        );
        assert!(plain["properties"].get("networkSecurityGroup").is_none());
        assert_eq!(plain["properties"]["enableAcceleratedNetworking"], false);

        let mut r = request(false);
        r.nic = NicOptions {
            backend_pools: vec!["pool-a".into(), "pool-b".into()],
            network_security_group_id: Some("nsg-id".into()),
            accelerated_networking: true,
            secondary_ip_configs: 2,
        };
        let body = nic_body(&placement(), &r);
        let configs = body["properties"]["ipConfigurations"].as_array().unwrap();
        assert_eq!(
            configs[0]["properties"]["loadBalancerBackendAddressPools"],
            json!([{"id": "pool-a"}, {"id": "pool-b"}])
        );
        assert_eq!(configs[0]["properties"]["primary"], true);
        let secondary: Vec<&str> = configs[1..]
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(secondary, ["ipconfig1", "ipconfig2"]);
        assert!(
            configs[1..]
                .iter()
                .all(|c| c["properties"]["primary"] == false
                    && c["properties"]
                        .get("loadBalancerBackendAddressPools")
                        .is_none()),
            "pod IPs stay out of the load balancers"
        );
        assert_eq!(body["properties"]["networkSecurityGroup"]["id"], "nsg-id");
        assert_eq!(body["properties"]["enableAcceleratedNetworking"], true);
    }

    #[test]
    fn tags_carry_the_cluster_and_pool_and_no_slashes() {
        let t = tags(&placement(), &request(false));
        assert_eq!(t.get("team_name").map(String::as_str), Some("web"));
        assert_eq!(t.get(CLUSTER_TAG).map(String::as_str), Some("cluster"));
        assert_eq!(t.get(NODE_POOL_TAG).map(String::as_str), Some("default"));
        assert_eq!(t.get(BILLING_TAG).map(String::as_str), Some("linux"));
    }
}
