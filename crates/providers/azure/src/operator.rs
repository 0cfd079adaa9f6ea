//! How the `karpenter-rs controller` binary builds and runs the Azure provider: its settings,
//! under upstream's flag and environment names, and its own loop (the AKSNodeClass status).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use karpenter_cloudprovider::BoxError;
use karpenter_cloudprovider::http::HttpClient;
use karpenter_controller::Context;
use karpenter_controller::cloudprovider::{Provider, ProviderLoop};
use kube::Api;
use tokio_util::sync::CancellationToken;

use crate::arm::Arm;
use crate::auth::{Authorities, Credential, TokenSource};
use crate::bootstrap::Network;
use crate::catalog_api::RETAIL_PRICES_URL;
use crate::cloud::CloudEnvironment;
use crate::nodeclass_status;
use crate::provider::{AzureCloudProvider, AzureOptions, KubeState};

/// The provider as the controller runs it: ARM, AKSNodeClasses and Nodes from the cluster.
pub type AzureProvider = AzureCloudProvider<KubeState>;

/// The Azure provider's settings, under upstream's environment variable names.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct AzureSettings {
    /// The cluster's name: tags every node VM.
    #[arg(
        id = "azure-cluster-name",
        long = "azure-cluster-name",
        env = "CLUSTER_NAME",
        default_value = ""
    )]
    pub cluster_name: String,
    /// The API server URL nodes join.
    #[arg(
        id = "azure-cluster-endpoint",
        long = "azure-cluster-endpoint",
        env = "CLUSTER_ENDPOINT",
        default_value = ""
    )]
    pub cluster_endpoint: String,
    /// The bootstrap token nodes join with (`<id>.<secret>`).
    #[arg(long, env = "KUBELET_BOOTSTRAP_TOKEN", default_value = "")]
    pub kubelet_bootstrap_token: String,
    /// The SSH public key of the nodes' admin user.
    #[arg(long, env = "SSH_PUBLIC_KEY", default_value = "")]
    pub ssh_public_key: String,
    /// The nodes' admin user.
    #[arg(long, env = "LINUX_ADMIN_USERNAME", default_value = "azureuser")]
    pub linux_admin_username: String,
    /// The cluster's network plugin: `azure`, `kubenet` or `none`.
    #[arg(long, env = "NETWORK_PLUGIN", default_value = "azure")]
    pub network_plugin: String,
    /// The network plugin's mode: `overlay`, or empty for pods on the node subnet.
    #[arg(long, env = "NETWORK_PLUGIN_MODE", default_value = "overlay")]
    pub network_plugin_mode: String,
    /// The network policy engine (`azure`, `calico`, `cilium` or empty).
    #[arg(long, env = "NETWORK_POLICY", default_value = "")]
    pub network_policy: String,
    /// The network dataplane.
    #[arg(long, env = "NETWORK_DATAPLANE", default_value = "cilium")]
    pub network_dataplane: String,
    /// The nodes' VNet GUID (Azure CNI overlay with a custom VNet).
    #[arg(long, env = "VNET_GUID", default_value = "")]
    pub vnet_guid: String,
    /// The cluster DNS service's IP.
    #[arg(long, env = "DNS_SERVICE_IP", default_value = "")]
    pub dns_service_ip: String,
    /// The nodes' default subnet (an ARM id).
    #[arg(long, env = "VNET_SUBNET_ID", default_value = "")]
    pub vnet_subnet_id: String,
    /// The resource group AKS manages the nodes in.
    #[arg(long, env = "AZURE_NODE_RESOURCE_GROUP", default_value = "")]
    pub node_resource_group: String,
    /// The kubelet identity's client id.
    #[arg(long, env = "KUBELET_IDENTITY_CLIENT_ID", default_value = "")]
    pub kubelet_identity_client_id: String,
    /// The share of VM memory the hypervisor keeps.
    #[arg(
        id = "azure-vm-memory-overhead-percent",
        long = "azure-vm-memory-overhead-percent",
        env = "VM_MEMORY_OVERHEAD_PERCENT",
        default_value_t = 0.075
    )]
    pub vm_memory_overhead_percent: f64,
    /// Tags on every node resource, `k1=v1,k2=v2` (the NodeClass's tags win).
    #[arg(long, env = "ADDITIONAL_TAGS", default_value = "")]
    pub additional_tags: String,
    /// The subscription (also `ARM_SUBSCRIPTION_ID`).
    #[arg(long, env = "AZURE_SUBSCRIPTION_ID", default_value = "")]
    pub subscription_id: String,
    /// The cluster's resource group.
    #[arg(long, env = "ARM_RESOURCE_GROUP", default_value = "")]
    pub resource_group: String,
    /// The region.
    #[arg(long, env = "LOCATION", default_value = "")]
    pub location: String,
    /// ARM's URL (a private endpoint or a test double); empty for the cloud's own (see
    /// `ARM_CLOUD` and `AZURE_ENVIRONMENT_FILEPATH`).
    #[arg(long, env = "ARM_ENDPOINT", default_value = "")]
    pub arm_endpoint: String,
    /// The Retail Prices API; empty keeps the embedded prices (no internet egress).
    #[arg(long, env = "AZURE_RETAIL_PRICES_URL", default_value = RETAIL_PRICES_URL)]
    pub retail_prices_url: String,
}

pub use karpenter_cloudprovider::SettingsError;

/// `k1=v1,k2=v2` as upstream's `ADDITIONAL_TAGS` takes them.
pub fn parse_tags(s: &str) -> Result<BTreeMap<String, String>, SettingsError> {
    s.split(',')
        .map(str::trim)
        .filter(|pair| !pair.is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().into(), v.trim().into())),
            _ => Err(SettingsError::Invalid {
                name: "ADDITIONAL_TAGS",
                reason: format!("{pair:?} is not key=value"),
            }),
        })
        .collect()
}

impl AzureSettings {
    /// The provider's options, or the first setting at fault. `env` reads the environment
    /// (for the `ARM_*` spellings upstream also accepts).
    pub fn options(
        self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<AzureOptions, SettingsError> {
        let or_env = |value: String, name: &str| {
            Some(value)
                .filter(|v| !v.is_empty())
                .or_else(|| env(name).filter(|v| !v.is_empty()))
                .unwrap_or_default()
        };
        let subscription_id = or_env(self.subscription_id, "ARM_SUBSCRIPTION_ID");
        let tenant_id = or_env(env("AZURE_TENANT_ID").unwrap_or_default(), "ARM_TENANT_ID");
        for (value, name) in [
            (&self.cluster_name, "CLUSTER_NAME"),
            (&self.cluster_endpoint, "CLUSTER_ENDPOINT"),
            (&self.kubelet_bootstrap_token, "KUBELET_BOOTSTRAP_TOKEN"),
            (&self.ssh_public_key, "SSH_PUBLIC_KEY"),
            (&self.vnet_subnet_id, "VNET_SUBNET_ID"),
            (&self.node_resource_group, "AZURE_NODE_RESOURCE_GROUP"),
            (&subscription_id, "AZURE_SUBSCRIPTION_ID"),
            (&self.location, "LOCATION"),
        ] {
            if value.is_empty() {
                return Err(SettingsError::Missing(name));
            }
        }
        if !(0.0..1.0).contains(&self.vm_memory_overhead_percent) {
            return Err(SettingsError::Invalid {
                name: "VM_MEMORY_OVERHEAD_PERCENT",
                reason: format!("{} is not in [0, 1)", self.vm_memory_overhead_percent),
            });
        }
        if crate::bootstrap::SubnetId::parse(&self.vnet_subnet_id).is_none() {
            return Err(SettingsError::Invalid {
                name: "VNET_SUBNET_ID",
                reason: format!("{:?} is not a subnet's ARM id", self.vnet_subnet_id),
            });
        }
        Ok(AzureOptions {
            cluster_name: self.cluster_name,
            cluster_endpoint: self.cluster_endpoint,
            ca_bundle: None,
            kubelet_bootstrap_token: self.kubelet_bootstrap_token,
            subscription_id,
            tenant_id,
            resource_group: self.resource_group,
            node_resource_group: self.node_resource_group,
            location: self.location.to_ascii_lowercase(),
            vnet_subnet_id: self.vnet_subnet_id,
            ssh_public_key: self.ssh_public_key,
            linux_admin_username: self.linux_admin_username,
            network: Network {
                plugin: self.network_plugin,
                plugin_mode: self.network_plugin_mode,
                dataplane: self.network_dataplane,
                policy: self.network_policy,
            },
            vnet_guid: self.vnet_guid,
            dns_service_ip: self.dns_service_ip,
            kubelet_identity_client_id: self.kubelet_identity_client_id,
            vm_memory_overhead_percent: self.vm_memory_overhead_percent,
            additional_tags: parse_tags(&self.additional_tags)?,
            retail_prices_url: Some(self.retail_prices_url).filter(|u| !u.is_empty()),
        })
    }
}

impl Provider for AzureProvider {
    type Settings = AzureSettings;

    async fn build(client: kube::Client, settings: AzureSettings) -> Result<Self, BoxError> {
        let env = |k: &str| std::env::var(k).ok();
        let cloud = CloudEnvironment::resolve(
            env("ARM_CLOUD").as_deref(),
            env("AZURE_ENVIRONMENT_FILEPATH").as_deref(),
            |path: &str| std::fs::read_to_string(path),
        )?;
        let endpoint = Some(settings.arm_endpoint.clone())
            .filter(|e| !e.is_empty())
            .unwrap_or_else(|| {
                cloud
                    .resource_manager_endpoint
                    .trim_end_matches('/')
                    .to_string()
            });
        let mut options = settings.options(env)?;
        options.ca_bundle = karpenter_controller::cloudprovider::cluster_ca_bundle().await;
        if !cloud.is_public() && options.retail_prices_url.take().is_some() {
            tracing::info!(
                "the Retail Prices API serves the public cloud only: keeping the embedded prices"
            );
        }
        let credential = Credential::from_env(env)?;
        let authorities = Authorities {
            authority: env("AZURE_AUTHORITY_HOST")
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| cloud.active_directory_endpoint.clone()),
            audience: cloud.token_audience.clone(),
            ..Authorities::default()
        };
        let http = HttpClient::new(Duration::from_secs(30))?;
        let tokens = TokenSource::new(credential, authorities, http.clone());
        let arm = Arm::new(http.clone(), endpoint, tokens);
        let state = KubeState {
            node_classes: Api::all(client.clone()),
            nodes: Api::all(client),
        };
        Ok(AzureCloudProvider::new(arm, http, state, options))
    }

    fn controllers(ctx: &Arc<Context<Self>>, shutdown: &CancellationToken) -> Vec<ProviderLoop> {
        vec![Box::pin(nodeclass_status::run(
            ctx.clone(),
            shutdown.clone(),
        ))]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> AzureSettings {
        AzureSettings {
            cluster_name: "c".into(),
            cluster_endpoint: "https://c.hcp.eastus.azmk8s.io:443".into(),
            kubelet_bootstrap_token: "abcdef.0123456789abcdef".into(),
            ssh_public_key: "ssh-rsa AAAA".into(),
            vnet_subnet_id: "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/n".into(),
            node_resource_group: "MC_rg_c_eastus".into(),
            location: "EastUS".into(),
            vm_memory_overhead_percent: 0.075,
            ..Default::default()
        }
    }

    #[test]
    fn settings_name_what_is_missing_or_wrong() {
        let env = |k: &str| (k == "ARM_SUBSCRIPTION_ID").then(|| "sub".to_string());
        let o = settings().options(env).unwrap();
        assert_eq!(o.subscription_id, "sub", "upstream's ARM_ spelling counts");
        assert_eq!(o.location, "eastus");
        let none = |_: &str| None;
        let e = settings().options(none).unwrap_err();
        assert_eq!(e.to_string(), "AZURE_SUBSCRIPTION_ID must be set");
        let mut s = settings();
        s.subscription_id = "sub".into();
        s.vnet_subnet_id = "subnet-1".into();
        assert!(
            s.options(none)
                .unwrap_err()
                .to_string()
                .starts_with("VNET_SUBNET_ID:")
        );
        let mut s = settings();
        s.subscription_id = "sub".into();
        s.additional_tags = "team=a, cost-center = 42".into();
        let o = s.options(none).unwrap();
        assert_eq!(
            o.additional_tags.get("cost-center").map(String::as_str),
            Some("42")
        );
        assert!(parse_tags("novalue").is_err());
    }
}
