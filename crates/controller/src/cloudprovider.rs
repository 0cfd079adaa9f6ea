//! The cloud provider as the controller runs it. The boundary itself — [`CloudProvider`], its
//! errors, the instance-type model — is `karpenter-cloudprovider`'s, so a provider's pure part
//! never depends on this crate; [`Provider`] adds what only a running controller needs: how
//! the binary builds a provider from its settings, and the provider's own loops.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

pub use karpenter_cloudprovider::{
    BoxError, Cause, CloudProvider, CloudProviderError, NodeClassReadiness, RepairPolicy, Result,
};
use tokio_util::sync::CancellationToken;

use crate::Context;

/// A loop a provider runs beside the controller's, until shutdown.
pub type ProviderLoop = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A provider the `karpenter-rs controller` binary can run (upstream's provider operator plus
/// its `NewControllers`).
pub trait Provider: CloudProvider + Sized {
    /// The provider's settings: flags and environment variables, under upstream's names.
    type Settings: clap::Args + Send + 'static;

    /// Builds the provider for the cluster `client` talks to (reads credentials, checks
    /// settings, opens queues). An error names the setting at fault.
    fn build(
        client: kube::Client,
        settings: Self::Settings,
    ) -> impl Future<Output = std::result::Result<Self, BoxError>> + Send;

    /// The provider's own controllers (NodeClass status, interruption queue, price refresh),
    /// each running until `shutdown`; the controller runs them beside its own loops and
    /// leaves leadership to them (`ctx.is_leader()`). None by default.
    fn controllers(ctx: &Arc<Context<Self>>, shutdown: &CancellationToken) -> Vec<ProviderLoop> {
        let _ = (ctx, shutdown);
        Vec::new()
    }
}
