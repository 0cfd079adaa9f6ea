//! `karpenter-rs controller`: runs the controller against the cluster in the kubeconfig (or the
//! one it runs in), with the metrics and health endpoints, until SIGTERM or SIGINT.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use anyhow::Context;
use karpenter_controller::{Controller, Options, admin};
use karpenter_kwok::KwokProvider;
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

/// Log output: JSON lines (upstream's default) or text.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line.
    Json,
    /// Human-readable lines.
    Text,
}

/// Sets up logging at `level` (`info`, `debug`, or any `tracing` filter).
pub fn init_logging(level: &str, format: LogFormat) -> anyhow::Result<()> {
    let filter = EnvFilter::try_new(level).with_context(|| format!("LOG_LEVEL {level:?}"))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let result = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
    result.map_err(|e| anyhow::anyhow!("setting up logging: {e}"))
}

async fn signalled() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// Which cloud the controller launches nodes in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Provider {
    /// Nodes are Node objects faked by KWOK: any cluster, no cloud.
    Kwok,
    /// EC2 instances, configured by EC2NodeClasses.
    Aws,
}

/// The AWS provider's settings, under upstream's environment variable names.
#[derive(Clone, Debug, clap::Args)]
pub struct AwsArgs {
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
}

type AwsProvider = karpenter_aws::provider::AwsCloudProvider<
    karpenter_aws::ec2::Ec2Client,
    kube::Api<karpenter_api::EC2NodeClass>,
>;

async fn aws_provider(
    client: &kube::Client,
    args: AwsArgs,
) -> anyhow::Result<(AwsProvider, karpenter_aws::http::AwsHttp)> {
    use karpenter_aws::auth::{CredentialsProvider, credentials::Source};
    use karpenter_aws::http::{AwsHttp, Endpoints};
    anyhow::ensure!(
        !args.cluster_name.is_empty(),
        "CLUSTER_NAME must be set for the aws provider"
    );
    anyhow::ensure!(
        !args.cluster_endpoint.is_empty(),
        "CLUSTER_ENDPOINT must be set for the aws provider"
    );
    anyhow::ensure!(
        !args.aws_region.is_empty(),
        "AWS_REGION must be set for the aws provider"
    );
    let version = client
        .apiserver_version()
        .await
        .context("reading the API server's version")?;
    let minor: String = version
        .minor
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    let ca_bundle = match args.cluster_ca_bundle {
        Some(bundle) => Some(bundle),
        None => kube::Config::infer()
            .await
            .ok()
            .and_then(|c| c.root_cert)
            .map(|certs| pem_bundle(&certs)),
    };
    let source = Source::from_env(|k| std::env::var(k).ok()).context("AWS credentials")?;
    let http = AwsHttp::new(
        Endpoints {
            region: args.aws_region.clone(),
            override_url: args.aws_endpoint_url,
        },
        CredentialsProvider::new(source),
    )?;
    let options = karpenter_aws::provider::AwsOptions {
        cluster_name: args.cluster_name,
        cluster_endpoint: args.cluster_endpoint,
        ca_bundle,
        cluster_cidr: args.cluster_cidr,
        kubernetes_version: format!("{}.{minor}", version.major),
        region: args.aws_region,
        vm_memory_overhead_percent: args.vm_memory_overhead_percent,
        reserved_enis: args.reserved_enis,
        isolated_vpc: args.isolated_vpc,
    };
    let provider = karpenter_aws::provider::AwsCloudProvider::new(
        karpenter_aws::ec2::Ec2Client::new(http.clone()),
        kube::Api::all(client.clone()),
        options,
    );
    Ok((provider, http))
}

/// DER certificates as nodes expect the cluster CA: a PEM bundle, base64-encoded.
fn pem_bundle(certs: &[Vec<u8>]) -> String {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut pem = String::new();
    for der in certs {
        pem.push_str("-----BEGIN CERTIFICATE-----\n");
        let body = b64.encode(der);
        for line in body.as_bytes().chunks(64) {
            pem.push_str(&String::from_utf8_lossy(line));
            pem.push('\n');
        }
        pem.push_str("-----END CERTIFICATE-----\n");
    }
    b64.encode(pem)
}

/// Runs until a signal, then stops the loops, releases the lease and returns.
pub fn run(options: Options, provider: Provider, aws: AwsArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let client = kube::Client::try_default()
            .await
            .context("connecting to the cluster (kubeconfig or in-cluster)")?;
        match provider {
            Provider::Kwok => {
                let provider = Arc::new(KwokProvider::new(client.clone()));
                serve(client, provider, options, "kwok", None).await
            }
            Provider::Aws => {
                let queue_name = aws.interruption_queue.clone();
                let (provider, http) = aws_provider(&client, aws).await?;
                let queue = match queue_name.filter(|q| !q.is_empty()) {
                    Some(name) => {
                        let queue = karpenter_aws::sqs::SqsQueue::open(http, &name)
                            .await
                            .with_context(|| format!("opening the interruption queue {name:?}"))?;
                        tracing::info!(queue = queue.url(), "handling interruption messages");
                        Some(queue)
                    }
                    None => None,
                };
                // The EC2NodeClass status loop, and the interruption loop when a queue is set.
                let extra: Option<Extra<_>> = Some(Box::new(move |ctx, shutdown| {
                    tokio::spawn(async move {
                        let status = tokio::spawn(karpenter_aws::nodeclass_status::run(
                            ctx.clone(),
                            shutdown.clone(),
                        ));
                        if let Some(queue) = queue {
                            karpenter_aws::interruption_controller::run(ctx, queue, shutdown).await;
                        }
                        let _ = status.await;
                    })
                }));
                serve(client, Arc::new(provider), options, "aws", extra).await
            }
        }
    })
}

/// A provider's own loop beside the controller's (AWS interruption handling).
type Extra<P> = Box<
    dyn FnOnce(
        Arc<karpenter_controller::Context<P>>,
        CancellationToken,
    ) -> tokio::task::JoinHandle<()>,
>;

async fn serve<P: karpenter_controller::cloudprovider::CloudProvider>(
    client: kube::Client,
    provider: Arc<P>,
    options: Options,
    name: &'static str,
    extra: Option<Extra<P>>,
) -> anyhow::Result<()> {
    {
        let metrics = SocketAddr::from((Ipv4Addr::UNSPECIFIED, options.metrics_port));
        let health = SocketAddr::from((Ipv4Addr::UNSPECIFIED, options.health_probe_port));
        let controller = Controller::new(client, provider, options);
        let shutdown = CancellationToken::new();
        let extra = extra.map(|start| start(controller.context(), shutdown.clone()));
        let admin = tokio::spawn(admin::serve(
            metrics,
            health,
            controller.context(),
            shutdown.clone(),
        ));
        let on_signal = shutdown.clone();
        tokio::spawn(async move {
            signalled().await;
            tracing::info!("shutting down");
            on_signal.cancel();
        });
        tracing::info!(
            version = env!("CARGO_PKG_VERSION"),
            provider = name,
            "starting controller"
        );
        controller.run(shutdown).await;
        if let Some(extra) = extra {
            extra.await?;
        }
        admin.await?.context("serving metrics and health probes")?;
        Ok(())
    }
}
