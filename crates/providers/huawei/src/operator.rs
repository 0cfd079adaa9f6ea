//! How the `karpenter-rs controller` binary builds and runs the Huawei Cloud provider: its
//! settings, under upstream's environment names, and its own loop (the CCENodeClass status).

use std::sync::Arc;
use std::time::Duration;

use karpenter_cloudprovider::BoxError;
use karpenter_cloudprovider::http::HttpClient;
use karpenter_controller::Context;
use karpenter_controller::cloudprovider::{Provider, ProviderLoop};
use kube::Api;
use tokio_util::sync::CancellationToken;

use crate::auth::credentials::{self, CredentialsProvider};
use crate::client::Client;
use crate::endpoint::Endpoints;
use crate::provider::{HuaweiCloudProvider, HuaweiOptions, KubeState};
use crate::{nodeclass_status, unregistered_taint};

/// The provider as the controller runs it: CCE, ECS, VPC and BSS, CCENodeClasses from the
/// cluster.
pub type HuaweiProvider = HuaweiCloudProvider<KubeState>;

pub use karpenter_cloudprovider::SettingsError;

/// The Huawei Cloud provider's settings, under upstream's environment names (the ones
/// upstream's chart puts in its credentials Secret, so that Secret can be reused). Credentials come
/// from the SDK's own variables (`HUAWEICLOUD_SDK_AK`, `…_SK`, `…_SECURITY_TOKEN`,
/// `…_PROJECT_ID`, `…_DOMAIN_ID`, `…_IDP_ID` with `…_ID_TOKEN_FILE`), read by the credential
/// chain.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct HuaweiSettings {
    /// The CCE cluster's id: nodes are created in it.
    #[arg(
        id = "huawei_cluster_id",
        long = "huawei-cluster-id",
        env = "HUAWEICLOUD_SDK_CCE_CLUSTER_ID",
        default_value = ""
    )]
    pub cluster_id: String,
    /// The region (`ap-southeast-3`, `cn-north-4`, …).
    #[arg(
        long = "huawei-region",
        env = "HUAWEICLOUD_SDK_REGION_ID",
        default_value = ""
    )]
    pub region: String,
    /// Whether on-demand prices are read from BSS (`false` keeps the embedded table: the
    /// account then needs no BSS permission).
    #[arg(
        long = "huawei-bss-pricing",
        env = "HUAWEICLOUD_BSS_PRICING",
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    pub bss_pricing: bool,
}

impl HuaweiSettings {
    /// The provider's options, or the first setting at fault.
    pub fn options(&self) -> Result<HuaweiOptions, SettingsError> {
        if self.cluster_id.is_empty() {
            return Err(SettingsError::Missing("HUAWEICLOUD_SDK_CCE_CLUSTER_ID"));
        }
        if self.region.is_empty() {
            return Err(SettingsError::Missing("HUAWEICLOUD_SDK_REGION_ID"));
        }
        let mut options = HuaweiOptions::new(self.cluster_id.clone(), self.region.clone());
        options.bss_pricing = self.bss_pricing;
        Ok(options)
    }
}

impl Provider for HuaweiProvider {
    type Settings = HuaweiSettings;

    async fn build(client: kube::Client, settings: HuaweiSettings) -> Result<Self, BoxError> {
        let options = settings.options()?;
        let http = HttpClient::new(Duration::from_secs(30))?;
        let env = |k: &str| std::env::var(k).ok();
        let endpoints = Endpoints::from_env(options.region.clone(), env);
        let credentials = credentials::Settings::from_env(env, &endpoints)
            .map_err(|e| format!("Huawei Cloud credentials: {e}"))?;
        let credentials = CredentialsProvider::from_settings(credentials, http.clone());
        let cloud = Client::new(http, endpoints, credentials);
        let state: KubeState = Api::all(client);
        Ok(HuaweiCloudProvider::new(cloud, state, options))
    }

    fn controllers(ctx: &Arc<Context<Self>>, shutdown: &CancellationToken) -> Vec<ProviderLoop> {
        vec![
            Box::pin(nodeclass_status::run(ctx.clone(), shutdown.clone())),
            Box::pin(unregistered_taint::run(ctx.clone(), shutdown.clone())),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> HuaweiSettings {
        HuaweiSettings {
            cluster_id: "c-1234".into(),
            region: "ap-southeast-3".into(),
            bss_pricing: true,
        }
    }

    #[test]
    fn settings_name_what_is_missing() {
        let o = settings().options().unwrap();
        assert_eq!(o.cluster_id, "c-1234");
        assert_eq!(o.region, "ap-southeast-3");
        assert!(o.bss_pricing);
        type Case = (fn(&mut HuaweiSettings), &'static str);
        let cases: [Case; 2] = [
            (
                |s| s.cluster_id.clear(),
                "HUAWEICLOUD_SDK_CCE_CLUSTER_ID must be set",
            ),
            (
                |s| s.region.clear(),
                "HUAWEICLOUD_SDK_REGION_ID must be set",
            ),
        ];
        for (change, expected) in cases {
            let mut s = settings();
            change(&mut s);
            assert_eq!(s.options().unwrap_err().to_string(), expected);
        }
        let mut s = settings();
        s.bss_pricing = false;
        assert!(!s.options().unwrap().bss_pricing);
    }
}
