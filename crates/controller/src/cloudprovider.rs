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

/// The CA the controller trusts the API server by, as nodes take it in their bootstrap: a
/// PEM bundle, base64-encoded. `None` when the client configuration has no CA of its own.
pub async fn cluster_ca_bundle() -> Option<String> {
    let certs = kube::Config::infer().await.ok()?.root_cert?;
    Some(pem_bundle(&certs))
}

/// DER certificates as a base64-encoded PEM bundle.
pub fn pem_bundle(certs: &[Vec<u8>]) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    #[test]
    fn ca_bundles_are_pem_wrapped_at_64_columns() {
        let der = vec![0u8; 60];
        let bundle = pem_bundle(&[der.clone(), der]);
        let pem = base64::engine::general_purpose::STANDARD
            .decode(bundle)
            .unwrap();
        let pem = String::from_utf8(pem).unwrap();
        assert_eq!(pem.matches("-----BEGIN CERTIFICATE-----").count(), 2);
        assert!(pem.lines().all(|l| l.len() <= 64), "{pem}");
    }
}
