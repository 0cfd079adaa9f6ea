//! How the `karpenter-rs controller` binary builds and runs the Alibaba Cloud provider: its
//! settings, under upstream's flag and environment names, and its own loops (the ECSNodeClass
//! status and spot reclaims).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use karpenter_cloudprovider::BoxError;
use karpenter_cloudprovider::http::{HttpClient, RetryPolicy};
use karpenter_controller::Context;
use karpenter_controller::cloudprovider::{Provider, ProviderLoop};
use kube::Api;
use tokio_util::sync::CancellationToken;

use crate::auth::credentials::{CredentialsProvider, METADATA_ENDPOINT, Source};
use crate::client::Client;
use crate::cluster::{Cluster, ClusterType};
use crate::endpoint::{Endpoints, Network};
use crate::provider::{AlibabaCloudProvider, AlibabaOptions, KubeState};
use crate::{interruption, nodeclass_status, pricing};

/// The provider as the controller runs it: ECS, VPC and ACK, ECSNodeClasses from the cluster.
pub type AlibabaProvider = AlibabaCloudProvider<KubeState>;

/// The Alibaba Cloud provider's settings, under upstream's flag and environment names.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct AlibabaSettings {
    /// The ACK cluster's id: tags every instance; ACK's bootstrap joins nodes to it.
    #[arg(
        id = "alibaba_cluster_id",
        long = "cluster-id",
        env = "CLUSTER_ID",
        default_value = ""
    )]
    pub cluster_id: String,
    /// The region; read from the instance metadata service when unset.
    #[arg(long, env = "REGION_ID", default_value = "")]
    pub region_id: String,
    /// `public` or `vpc` endpoints.
    #[arg(long, env = "ALIBABA_CLOUD_NETWORK", default_value = "")]
    pub alibaba_cloud_network: String,
    /// The share of instance memory the hypervisor keeps.
    #[arg(
        id = "alibaba-vm-memory-overhead-percent",
        long = "alibaba-vm-memory-overhead-percent",
        env = "VM_MEMORY_OVERHEAD_PERCENT",
        default_value_t = crate::instancetype::VM_MEMORY_OVERHEAD_PERCENT
    )]
    pub vm_memory_overhead_percent: f64,
    /// Whether spot nodes ACK marks `InstanceExpired` are replaced.
    #[arg(long, env = "INTERRUPTION", default_value_t = true, action = clap::ArgAction::Set)]
    pub interruption: bool,
    /// How user data is made: `ACKManaged` (ACK's attach script) or `Custom` (the
    /// ECSNodeClass's `userData` alone; nodes must register with the
    /// `karpenter.sh/unregistered:NoExecute` taint themselves).
    #[arg(long, env = "CLUSTER_TYPE", default_value = "ACKManaged")]
    pub cluster_type: String,
    /// Where on-demand and spot prices are read; empty keeps the embedded on-demand prices and
    /// reads spot prices from ECS's spot price history.
    #[arg(long, env = "PRICE_SERVER_URL", default_value = pricing::PRICE_SERVER_URL)]
    pub price_server_url: String,
}

pub use karpenter_cloudprovider::SettingsError;

impl AlibabaSettings {
    /// The provider's options and cluster type, given the region (the setting's, or the
    /// metadata service's), or the first setting at fault.
    pub fn options(&self, region: &str) -> Result<(AlibabaOptions, ClusterType), SettingsError> {
        if self.cluster_id.is_empty() {
            return Err(SettingsError::Missing("CLUSTER_ID"));
        }
        if region.is_empty() {
            return Err(SettingsError::Missing("REGION_ID"));
        }
        if !(0.0..1.0).contains(&self.vm_memory_overhead_percent) {
            return Err(SettingsError::Invalid {
                name: "VM_MEMORY_OVERHEAD_PERCENT",
                reason: format!("{} is not in [0, 1)", self.vm_memory_overhead_percent),
            });
        }
        let cluster_type =
            self.cluster_type
                .parse::<ClusterType>()
                .map_err(|e| SettingsError::Invalid {
                    name: "CLUSTER_TYPE",
                    reason: e.to_string(),
                })?;
        Ok((
            AlibabaOptions {
                cluster_id: self.cluster_id.clone(),
                region: region.to_string(),
                vm_memory_overhead_percent: self.vm_memory_overhead_percent,
                price_server_url: Some(self.price_server_url.clone()).filter(|u| !u.is_empty()),
                interruption: self.interruption,
            },
            cluster_type,
        ))
    }

    /// The endpoint network.
    pub fn network(&self) -> Result<Network, SettingsError> {
        if self.alibaba_cloud_network.is_empty() {
            return Ok(Network::Public);
        }
        self.alibaba_cloud_network
            .parse()
            .map_err(|reason| SettingsError::Invalid {
                name: "ALIBABA_CLOUD_NETWORK",
                reason,
            })
    }
}

/// The region of the ECS instance this runs on, from the metadata service (with a hardened
/// mode token when the service gives one), as upstream finds it when `REGION_ID` is unset.
async fn metadata_region(http: &HttpClient) -> Result<String, String> {
    let token = http
        .send_with_retries(
            &http::Request::put(format!("{METADATA_ENDPOINT}/latest/api/token"))
                .header("x-aliyun-ecs-metadata-token-ttl-seconds", "60")
                .body(Bytes::new())
                .map_err(|e| e.to_string())?,
            RetryPolicy::NEVER,
        )
        .await
        .ok()
        .filter(|r| r.is_success())
        .map(|r| String::from_utf8_lossy(&r.body).trim().to_string());
    let mut request = http::Request::get(format!("{METADATA_ENDPOINT}/latest/meta-data/region-id"));
    if let Some(token) = token {
        request = request.header("x-aliyun-ecs-metadata-token", token);
    }
    let response = http
        .send_with_retries(
            &request.body(Bytes::new()).map_err(|e| e.to_string())?,
            RetryPolicy::NEVER,
        )
        .await
        .map_err(|e| e.to_string())?;
    if !response.is_success() {
        return Err(format!("HTTP {}", response.status));
    }
    Ok(String::from_utf8_lossy(&response.body).trim().to_string())
}

impl Provider for AlibabaProvider {
    type Settings = AlibabaSettings;

    async fn build(client: kube::Client, settings: AlibabaSettings) -> Result<Self, BoxError> {
        let http = HttpClient::new(Duration::from_secs(30))?;
        let region = if settings.region_id.is_empty() {
            let metadata = HttpClient::new(Duration::from_secs(2))?;
            metadata_region(&metadata).await.map_err(|e| {
                format!("REGION_ID is unset and the metadata service did not say ({e})")
            })?
        } else {
            settings.region_id.clone()
        };
        let (options, cluster_type) = settings.options(&region)?;
        let env = |k: &str| std::env::var(k).ok();
        let mut endpoints = Endpoints::from_env(&region, env)?;
        // The flag wins over the environment variable the endpoints read.
        if !settings.alibaba_cloud_network.is_empty() {
            endpoints.network = settings.network()?;
            if endpoints.network == Network::Vpc {
                endpoints.sts_network = Network::Vpc;
            }
        }
        let source = Source::from_env(env, &endpoints)
            .map_err(|e| format!("Alibaba Cloud credentials: {e}"))?;
        let credentials = CredentialsProvider::new(source, http.clone());
        let ecs = Client::new(http.clone(), endpoints, credentials);
        let cluster = Cluster::new(
            cluster_type,
            ecs.clone(),
            options.cluster_id.clone(),
            region.clone(),
        );
        let state: KubeState = Api::all(client);
        Ok(AlibabaCloudProvider::new(
            ecs, http, cluster, state, options,
        ))
    }

    fn controllers(ctx: &Arc<Context<Self>>, shutdown: &CancellationToken) -> Vec<ProviderLoop> {
        let mut loops: Vec<ProviderLoop> = vec![Box::pin(nodeclass_status::run(
            ctx.clone(),
            shutdown.clone(),
        ))];
        if ctx.provider.options().interruption {
            loops.push(Box::pin(interruption::run(ctx.clone(), shutdown.clone())));
        }
        loops
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> AlibabaSettings {
        AlibabaSettings {
            cluster_id: "c1234".into(),
            vm_memory_overhead_percent: 0.065,
            interruption: true,
            cluster_type: "ACKManaged".into(),
            price_server_url: pricing::PRICE_SERVER_URL.into(),
            ..Default::default()
        }
    }

    #[test]
    fn settings_name_what_is_missing_or_wrong() {
        let (o, t) = settings().options("cn-hangzhou").unwrap();
        assert_eq!(o.region, "cn-hangzhou");
        assert_eq!(
            o.price_server_url.as_deref(),
            Some(pricing::PRICE_SERVER_URL)
        );
        assert_eq!(t, ClusterType::AckManaged);
        type Case = (fn(&mut AlibabaSettings), &'static str, &'static str);
        let cases: [Case; 4] = [
            (
                |s| s.cluster_id.clear(),
                "cn-hangzhou",
                "CLUSTER_ID must be set",
            ),
            (|_| {}, "", "REGION_ID must be set"),
            (
                |s| s.vm_memory_overhead_percent = 1.5,
                "cn-hangzhou",
                "VM_MEMORY_OVERHEAD_PERCENT: 1.5 is not in [0, 1)",
            ),
            (
                |s| s.cluster_type = "EKS".into(),
                "cn-hangzhou",
                "CLUSTER_TYPE:",
            ),
        ];
        for (change, region, expected) in cases {
            let mut s = settings();
            change(&mut s);
            let e = s.options(region).unwrap_err().to_string();
            assert!(e.starts_with(expected), "{e}");
        }
        let mut s = settings();
        s.price_server_url.clear();
        assert_eq!(s.options("cn-hangzhou").unwrap().0.price_server_url, None);
        s.alibaba_cloud_network = "vpc".into();
        assert_eq!(s.network().unwrap(), Network::Vpc);
        s.alibaba_cloud_network = "intranet".into();
        assert!(
            s.network()
                .unwrap_err()
                .to_string()
                .starts_with("ALIBABA_CLOUD_NETWORK:")
        );
    }
}
