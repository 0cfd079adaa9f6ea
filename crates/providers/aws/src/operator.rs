//! How the `karpenter-rs controller` binary builds and runs the AWS provider: its settings,
//! under upstream's flag and environment names, and its own controllers (the EC2NodeClass
//! status loop, and the interruption queue when one is set).

use std::sync::Arc;

use karpenter_cloudprovider::BoxError;
use karpenter_controller::Context;
use karpenter_controller::cloudprovider::{Provider, ProviderLoop};
use kube::Api;
use tokio_util::sync::CancellationToken;

use crate::auth::{CredentialsProvider, SharedConfig};
use crate::ec2::Ec2Client;
use crate::eks::{ClusterApi, EksClient, cluster_dns_ip};
use crate::http::{AwsHttp, Endpoints};
use crate::provider::{AwsCloudProvider, AwsOptions};
use crate::sqs::SqsQueue;
use crate::{EC2NodeClass, interruption_controller, nodeclass_status};

/// The provider as the controller runs it: EC2 through the AWS APIs, EC2NodeClasses from the
/// cluster.
pub type AwsProvider = AwsCloudProvider<Ec2Client, Api<EC2NodeClass>>;

/// The AWS provider's settings, under upstream's environment variable names.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct AwsSettings {
    /// The cluster's name: tags instances, names instance profiles, goes into user data.
    #[arg(long, env = "CLUSTER_NAME", default_value = "")]
    pub cluster_name: String,
    /// The API server URL nodes join (default: EKS DescribeCluster's endpoint).
    #[arg(long, env = "CLUSTER_ENDPOINT", default_value = "")]
    pub cluster_endpoint: String,
    /// The cluster CA bundle, base64 (default: the CA the controller trusts the API server by).
    #[arg(long, env = "CLUSTER_CA_BUNDLE")]
    pub cluster_ca_bundle: Option<String>,
    /// The service CIDR, which AL2023's nodeadm needs (`10.100.0.0/16`; default: EKS
    /// DescribeCluster's).
    #[arg(long, env = "CLUSTER_CIDR")]
    pub cluster_cidr: Option<String>,
    /// The region (default: as the AWS SDKs find it: `AWS_DEFAULT_REGION`, the profile's
    /// `region`, the instance's region from IMDS).
    #[arg(long, env = "AWS_REGION", default_value = "")]
    pub aws_region: String,
    /// One endpoint for every AWS service instead of the public ones (VPC endpoints, tests).
    #[arg(long, env = "AWS_ENDPOINT_URL")]
    pub aws_endpoint_url: Option<String>,
    /// The share of instance memory the hypervisor keeps.
    #[arg(long, env = "VM_MEMORY_OVERHEAD_PERCENT", default_value_t = 0.075)]
    pub vm_memory_overhead_percent: f64,
    /// Network interfaces kept from pods when computing max pods.
    #[arg(long, env = "RESERVED_ENIS", default_value_t = 0)]
    pub reserved_enis: i64,
    /// The Price List API is out of reach (no internet egress): keep the embedded on-demand
    /// prices instead of refreshing them.
    #[arg(long, env = "ISOLATED_VPC", default_value_t = false)]
    pub isolated_vpc: bool,
    /// The SQS queue of interruption events (spot interruption warnings, rebalance
    /// recommendations, scheduled changes, state changes); none handled when unset.
    #[arg(long, env = "INTERRUPTION_QUEUE")]
    pub interruption_queue: Option<String>,
    /// Mark EC2NodeClasses `ValidationSucceeded` without the dry-run permission checks
    /// (CreateFleet, RunInstances).
    #[arg(long, env = "DISABLE_DRY_RUN", default_value_t = false)]
    pub disable_dry_run: bool,
}

/// The AWS client as the SDKs would configure it from the environment and the shared files:
/// the region chain (unless `region` is given), the default credentials chain, the retry
/// settings and the configured endpoints. Returns the client and the region.
pub async fn connect(
    region: String,
    endpoint_url: Option<String>,
) -> Result<(AwsHttp, String), BoxError> {
    let config = SharedConfig::from_process().map_err(|e| format!("AWS settings: {e}"))?;
    let credentials =
        CredentialsProvider::default_chain(&config).map_err(|e| format!("AWS credentials: {e}"))?;
    let retry = crate::http::retry::RetryConfig::from_settings(
        config.setting("AWS_MAX_ATTEMPTS", "max_attempts"),
        config.setting("AWS_RETRY_MODE", "retry_mode"),
        config
            .env("AWS_NEW_RETRIES_2026")
            .is_some_and(|v| v.eq_ignore_ascii_case("true")),
    )
    .map_err(|e| format!("AWS retries: {e}"))?;
    let endpoints = crate::http::EndpointSettings::from_settings(
        |k| config.env(k),
        config.profile_value("endpoint_url"),
        config.files.service_endpoints(&config.profile),
        config
            .profile_value("ignore_configured_endpoint_urls")
            .is_some_and(|v| v.eq_ignore_ascii_case("true")),
    );
    let mut http = AwsHttp::new(
        Endpoints {
            region: region.clone(),
            override_url: endpoint_url.filter(|u| !u.is_empty()),
        },
        credentials,
    )?
    .with_retry(retry)
    .with_endpoint_settings(endpoints);
    if http.endpoints.region.is_empty() {
        let region = crate::auth::region::resolve(&config, &http).await?;
        http.endpoints.region = region;
    }
    tracing::info!(
        region = http.endpoints.region,
        credentials = http.credentials().source().kind(),
        "AWS client configured"
    );
    let region = http.endpoints.region.clone();
    Ok((http, region))
}

impl Provider for AwsProvider {
    type Settings = AwsSettings;

    async fn build(client: kube::Client, mut settings: AwsSettings) -> Result<Self, BoxError> {
        for (value, name) in [(&settings.cluster_name, "CLUSTER_NAME")] {
            if value.is_empty() {
                return Err(karpenter_cloudprovider::SettingsError::Missing(name).into());
            }
        }
        let kubernetes_version = crate::version::apiserver_version(&client).await?;
        let ca_bundle = match settings.cluster_ca_bundle.clone() {
            Some(bundle) => Some(bundle),
            None => karpenter_controller::cloudprovider::cluster_ca_bundle().await,
        };
        let (http, region) = connect(
            std::mem::take(&mut settings.aws_region),
            settings.aws_endpoint_url.clone(),
        )
        .await?;
        settings.aws_region = region;
        let cluster = discover_cluster(
            &EksClient::new(http.clone()),
            &settings,
            ca_bundle,
            kube_dns_service_ip(&client).await,
        )
        .await?;
        let queue = match settings
            .interruption_queue
            .clone()
            .filter(|q| !q.is_empty())
        {
            Some(name) => {
                let queue = SqsQueue::open(http.clone(), &name)
                    .await
                    .map_err(|e| format!("opening the interruption queue {name:?}: {e}"))?;
                tracing::info!(queue = queue.url(), "handling interruption messages");
                Some(queue)
            }
            None => None,
        };
        let options = AwsOptions {
            cluster_name: settings.cluster_name,
            cluster_endpoint: cluster.endpoint,
            ca_bundle: cluster.ca_bundle,
            cluster_cidr: cluster.cidr,
            kube_dns_ip: cluster.kube_dns_ip,
            kubernetes_version,
            region: settings.aws_region,
            vm_memory_overhead_percent: settings.vm_memory_overhead_percent,
            reserved_enis: settings.reserved_enis,
            isolated_vpc: settings.isolated_vpc,
            disable_dry_run: settings.disable_dry_run,
        };
        Ok(
            AwsCloudProvider::new(Ec2Client::new(http), Api::all(client), options)
                .with_interruption_queue(queue),
        )
    }

    fn controllers(ctx: &Arc<Context<Self>>, shutdown: &CancellationToken) -> Vec<ProviderLoop> {
        let mut loops: Vec<ProviderLoop> = vec![
            Box::pin(nodeclass_status::run(ctx.clone(), shutdown.clone())),
            Box::pin(crate::reservation_expiration::run(
                ctx.clone(),
                shutdown.clone(),
            )),
            Box::pin(crate::version::run(ctx.clone(), shutdown.clone())),
        ];
        if let Some(queue) = ctx.provider.interruption_queue().cloned() {
            loops.push(Box::pin(interruption_controller::run(
                ctx.clone(),
                queue,
                shutdown.clone(),
            )));
        }
        loops
    }
}

/// What nodes need to know of the cluster, from the settings or discovered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterSettings {
    /// The API server nodes join.
    pub endpoint: String,
    /// The CA bundle, base64.
    pub ca_bundle: Option<String>,
    /// The service CIDR.
    pub cidr: Option<String>,
    /// The cluster DNS service's address.
    pub kube_dns_ip: Option<String>,
}

/// The `kube-system/kube-dns` service's cluster IP (upstream reads the same), if readable.
async fn kube_dns_service_ip(client: &kube::Client) -> Option<String> {
    let services: Api<k8s_openapi::api::core::v1::Service> =
        Api::namespaced(client.clone(), "kube-system");
    match services.get_opt("kube-dns").await {
        Ok(service) => service
            .and_then(|s| s.spec)
            .and_then(|s| s.cluster_ip)
            .filter(|ip| ip.parse::<std::net::IpAddr>().is_ok()),
        Err(e) => {
            tracing::debug!(error = %e, "reading kube-system/kube-dns");
            None
        }
    }
}

/// Fills what the settings leave out from EKS `DescribeCluster` (asked only then): the
/// endpoint, the CA bundle (when the controller's own CA is unknown too) and the service CIDR.
/// The cluster DNS is the kube-dns service's address, else the one EKS derives from the CIDR.
/// Without an endpoint from either, the settings are incomplete.
pub async fn discover_cluster<E: ClusterApi>(
    eks: &E,
    settings: &AwsSettings,
    ca_bundle: Option<String>,
    kube_dns_ip: Option<String>,
) -> Result<ClusterSettings, BoxError> {
    let mut out = ClusterSettings {
        endpoint: settings.cluster_endpoint.clone(),
        ca_bundle,
        cidr: settings.cluster_cidr.clone().filter(|c| !c.is_empty()),
        kube_dns_ip,
    };
    if out.endpoint.is_empty() || out.ca_bundle.is_none() || out.cidr.is_none() {
        match eks.describe_cluster(settings.cluster_name.clone()).await {
            Ok(info) => {
                if out.endpoint.is_empty() {
                    out.endpoint = info.endpoint.clone().unwrap_or_default();
                }
                out.ca_bundle = out.ca_bundle.or(info.certificate_authority.clone());
                out.cidr = out.cidr.or(info.service_cidr().map(str::to_string));
                tracing::info!(endpoint = %out.endpoint, cidr = ?out.cidr, "discovered the cluster through EKS");
            }
            Err(e) if out.endpoint.is_empty() => {
                return Err(format!(
                    "CLUSTER_ENDPOINT is not set and EKS DescribeCluster {:?} failed: {e}",
                    settings.cluster_name
                )
                .into());
            }
            Err(e) => tracing::warn!(error = %e, "EKS DescribeCluster; going on with the settings"),
        }
    }
    if out.endpoint.is_empty() {
        return Err(karpenter_cloudprovider::SettingsError::Missing("CLUSTER_ENDPOINT").into());
    }
    if out.kube_dns_ip.is_none() {
        out.kube_dns_ip = out
            .cidr
            .as_deref()
            .and_then(cluster_dns_ip)
            .map(|ip| ip.to_string());
    }
    Ok(out)
}
