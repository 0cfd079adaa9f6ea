//! How the `karpenter-rs controller` binary builds and runs the Cluster API provider: its
//! settings, under upstream's flag and environment names, the management cluster's client,
//! and its own loop (the ClusterAPINodeClass status).

use std::sync::Arc;

use karpenter_cloudprovider::{BoxError, SettingsError};
use karpenter_controller::Context;
use karpenter_controller::cloudprovider::{Provider, ProviderLoop};
use kube::Api;
use tokio_util::sync::CancellationToken;

use crate::management::{self, Access, Management};
use crate::nodeclass_status;
use crate::provider::{ClusterApiCloudProvider, KubeState, ProviderOptions};

/// The provider as the controller runs it: ClusterAPINodeClasses from the cluster it runs in,
/// MachineDeployments and Machines from the management cluster.
pub type ClusterApiProvider = ClusterApiCloudProvider<KubeState>;

/// The Cluster API provider's settings: upstream's (`pkg/operator/options`), and the Cluster
/// Autoscaler's default architecture for nodes whose labels do not say. Each argument's id is
/// its flag, so none collides with another provider's field of the same name once all are
/// flattened into one command.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct ClusterApiSettings {
    /// The management cluster's kubeconfig file; unset uses the cluster karpenter runs in
    /// (or `--cluster-api-url`).
    #[arg(
        id = "cluster-api-kubeconfig",
        long = "cluster-api-kubeconfig",
        env = "CLUSTER_API_KUBECONFIG",
        default_value = ""
    )]
    pub kubeconfig: String,
    /// The management cluster's API server URL.
    #[arg(
        id = "cluster-api-url",
        long = "cluster-api-url",
        env = "CLUSTER_API_URL",
        default_value = ""
    )]
    pub url: String,
    /// A bearer token for the management cluster.
    #[arg(
        id = "cluster-api-token",
        long = "cluster-api-token",
        env = "CLUSTER_API_TOKEN",
        default_value = "",
        hide_env_values = true
    )]
    pub token: String,
    /// The management cluster's CA bundle: PEM, or base64 of PEM as in a kubeconfig.
    #[arg(
        id = "cluster-api-certificate-authority-data",
        long = "cluster-api-certificate-authority-data",
        env = "CLUSTER_API_CERTIFICATE_AUTHORITY_DATA",
        default_value = ""
    )]
    pub certificate_authority_data: String,
    /// Skip verifying the management cluster's certificate (insecure).
    #[arg(
        id = "cluster-api-skip-tls-verify",
        long = "cluster-api-skip-tls-verify",
        env = "CLUSTER_API_SKIP_TLS_VERIFY",
        default_value_t = false
    )]
    pub skip_tls_verify: bool,
    /// `kubernetes.io/arch` of nodes whose MachineDeployment's labels do not say (the
    /// Cluster Autoscaler's setting).
    #[arg(
        id = "cluster-api-default-arch",
        long = "cluster-api-default-arch",
        env = "CAPI_SCALE_ZERO_DEFAULT_ARCH",
        default_value = "amd64"
    )]
    pub default_arch: String,
}

impl ClusterApiSettings {
    /// How to reach the management cluster: a kubeconfig wins, then a URL, else the cluster
    /// karpenter runs in (upstream's order).
    pub fn access(&self) -> Result<Access, SettingsError> {
        if !self.kubeconfig.is_empty() {
            return Ok(Access::Kubeconfig(self.kubeconfig.clone().into()));
        }
        if self.url.is_empty() {
            return Ok(Access::Workload);
        }
        let ca = match self.certificate_authority_data.trim() {
            "" => None,
            data => Some(
                management::ca_data(data).map_err(|reason| SettingsError::Invalid {
                    name: "CLUSTER_API_CERTIFICATE_AUTHORITY_DATA",
                    reason,
                })?,
            ),
        };
        Ok(Access::Url {
            url: self.url.clone(),
            token: self.token.clone(),
            ca,
            insecure: self.skip_tls_verify,
        })
    }

    /// The provider's options.
    pub fn options(&self) -> Result<ProviderOptions, SettingsError> {
        match self.default_arch.as_str() {
            "amd64" | "arm64" | "s390x" | "ppc64le" | "arm" | "386" => {}
            other => {
                return Err(SettingsError::Invalid {
                    name: "CAPI_SCALE_ZERO_DEFAULT_ARCH",
                    reason: format!("{other:?} is not a Kubernetes architecture"),
                });
            }
        }
        let mut options = ProviderOptions::default();
        options.instance_types.default_arch = self.default_arch.clone();
        Ok(options)
    }
}

impl Provider for ClusterApiProvider {
    type Settings = ClusterApiSettings;

    async fn build(client: kube::Client, settings: ClusterApiSettings) -> Result<Self, BoxError> {
        let options = settings.options()?;
        let management_client = match management::config(&settings.access()?).await? {
            None => client.clone(),
            Some(config) => kube::Client::try_from(config)
                .map_err(|e| format!("the management cluster's client: {e}"))?,
        };
        let management = Management::discover(management_client).await?;
        tracing::info!(
            version = management.version().as_str(),
            "Cluster API management cluster"
        );
        let classes: KubeState = Api::all(client);
        Ok(ClusterApiCloudProvider::new(management, classes, options))
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

    fn settings() -> ClusterApiSettings {
        ClusterApiSettings {
            default_arch: "amd64".into(),
            ..Default::default()
        }
    }

    #[test]
    fn the_management_cluster_as_upstream_finds_it() {
        assert_eq!(settings().access().unwrap(), Access::Workload);
        let mut s = settings();
        s.kubeconfig = "/etc/capi/kubeconfig".into();
        s.url = "https://ignored:6443".into();
        assert_eq!(
            s.access().unwrap(),
            Access::Kubeconfig("/etc/capi/kubeconfig".into()),
            "a kubeconfig wins"
        );
        let mut s = settings();
        s.url = "https://mgmt:6443".into();
        s.token = "t".into();
        s.skip_tls_verify = true;
        assert_eq!(
            s.access().unwrap(),
            Access::Url {
                url: "https://mgmt:6443".into(),
                token: "t".into(),
                ca: None,
                insecure: true
            }
        );
        s.certificate_authority_data = "not a certificate".into();
        assert_eq!(
            s.access().unwrap_err().to_string(),
            "CLUSTER_API_CERTIFICATE_AUTHORITY_DATA: neither a PEM certificate bundle nor base64 of one"
        );
    }

    #[test]
    fn the_default_architecture_is_checked() {
        assert_eq!(
            settings().options().unwrap().instance_types.default_arch,
            "amd64"
        );
        let mut s = settings();
        s.default_arch = "arm64".into();
        assert_eq!(s.options().unwrap().instance_types.default_arch, "arm64");
        s.default_arch = "x86_64".into();
        assert_eq!(
            s.options().unwrap_err().to_string(),
            "CAPI_SCALE_ZERO_DEFAULT_ARCH: \"x86_64\" is not a Kubernetes architecture"
        );
    }

    #[test]
    fn flags_and_environment_names_are_upstreams() {
        use clap::{CommandFactory, Parser};
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            settings: ClusterApiSettings,
            // Flattened beside the controller's options and another provider's field of the
            // same name, as the binary does: no id collides.
            #[command(flatten)]
            options: karpenter_controller::Options,
            #[arg(long = "other-url", default_value = "")]
            url: String,
        }
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from([
            "karpenter",
            "--cluster-api-url",
            "https://mgmt:6443",
            "--cluster-api-token",
            "t",
            "--cluster-api-skip-tls-verify",
        ])
        .unwrap();
        assert_eq!(cli.settings.url, "https://mgmt:6443");
        assert!(cli.url.is_empty());
        assert!(cli.settings.skip_tls_verify);
        assert_eq!(cli.settings.default_arch, "amd64");
        assert!(!cli.options.disable_leader_election);
    }
}
