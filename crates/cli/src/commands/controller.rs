//! `karpenter-rs controller`: runs the controller against the cluster in the kubeconfig (or the
//! one it runs in), with the metrics and health endpoints, until SIGTERM or SIGINT.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use anyhow::Context;
use karpenter_controller::{Controller, Options, Provider, admin};
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

/// Runs until a signal, then stops the loops, releases the lease and returns.
pub fn run(
    options: Options,
    provider: &str,
    settings: crate::registry::ProviderSettings,
) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let client = karpenter_controller::kube_client::client(&options)
            .await
            .context("connecting to the cluster (kubeconfig or in-cluster)")?;
        crate::registry::with_provider(provider, client, settings, Serve(options)).await
    })
}

/// `controller`'s part once the provider is built.
struct Serve(Options);

impl crate::registry::ProviderCommand for Serve {
    type Output = ();

    async fn run<P: Provider>(self, client: kube::Client, provider: P) -> anyhow::Result<()> {
        serve(client, provider, self.0).await
    }
}

/// Runs the controller with `provider` and the provider's own controllers, with the metrics
/// and health endpoints, until a signal.
pub async fn serve<P: Provider>(
    client: kube::Client,
    provider: P,
    options: Options,
) -> anyhow::Result<()> {
    let metrics = SocketAddr::from((Ipv4Addr::UNSPECIFIED, options.metrics_port));
    let health = SocketAddr::from((Ipv4Addr::UNSPECIFIED, options.health_probe_port));
    let name = provider.name();
    let controller = Controller::new(client, Arc::new(provider), options);
    let shutdown = CancellationToken::new();
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
    controller.run_with_provider_controllers(shutdown).await;
    admin.await?.context("serving metrics and health probes")?;
    Ok(())
}
