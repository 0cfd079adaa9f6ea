//! How the `karpenter-rs controller` binary builds and runs the AWS provider: its settings,
//! under upstream's flag and environment names, and its own controllers (the EC2NodeClass
//! status loop, and the interruption queue when one is set).

use std::sync::Arc;

use karpenter_cloudprovider::BoxError;
use karpenter_controller::Context;
use karpenter_controller::cloudprovider::{Provider, ProviderLoop};
use kube::Api;
use tokio_util::sync::CancellationToken;

use crate::auth::{CredentialsProvider, credentials::Source};
use crate::ec2::Ec2Client;
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
    /// The API server URL nodes join.
    #[arg(long, env = "CLUSTER_ENDPOINT", default_value = "")]
    pub cluster_endpoint: String,
    /// The cluster CA bundle, base64 (default: the CA the controller trusts the API server by).
    #[arg(long, env = "CLUSTER_CA_BUNDLE")]
    pub cluster_ca_bundle: Option<String>,
    /// The service CIDR, which AL2023's nodeadm needs (`10.100.0.0/16`).
    #[arg(long, env = "CLUSTER_CIDR")]
    pub cluster_cidr: Option<String>,
    /// The region.
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

impl Provider for AwsProvider {
    type Settings = AwsSettings;

    async fn build(client: kube::Client, settings: AwsSettings) -> Result<Self, BoxError> {
        for (value, name) in [
            (&settings.cluster_name, "CLUSTER_NAME"),
            (&settings.cluster_endpoint, "CLUSTER_ENDPOINT"),
            (&settings.aws_region, "AWS_REGION"),
        ] {
            if value.is_empty() {
                return Err(karpenter_cloudprovider::SettingsError::Missing(name).into());
            }
        }
        let version = client
            .apiserver_version()
            .await
            .map_err(|e| format!("reading the API server's version: {e}"))?;
        let minor: String = version
            .minor
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let ca_bundle = match settings.cluster_ca_bundle {
            Some(bundle) => Some(bundle),
            None => karpenter_controller::cloudprovider::cluster_ca_bundle().await,
        };
        let source = Source::from_env(|k| std::env::var(k).ok())
            .map_err(|e| format!("AWS credentials: {e}"))?;
        let http = AwsHttp::new(
            Endpoints {
                region: settings.aws_region.clone(),
                override_url: settings.aws_endpoint_url,
            },
            CredentialsProvider::new(source),
        )?;
        let queue = match settings.interruption_queue.filter(|q| !q.is_empty()) {
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
            cluster_endpoint: settings.cluster_endpoint,
            ca_bundle,
            cluster_cidr: settings.cluster_cidr,
            kubernetes_version: format!("{}.{minor}", version.major),
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
