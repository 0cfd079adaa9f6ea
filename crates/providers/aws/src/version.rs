//! Keeping the cluster's Kubernetes version current: AMI aliases (`al2023@latest`) resolve
//! through SSM parameters named for the control plane's minor version, so after an upgrade new
//! nodes must get the new version's AMIs. Upstream re-reads the version every five minutes;
//! so does this.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use karpenter_controller::Context;
use tokio_util::sync::CancellationToken;

use crate::provider::{AwsApi, AwsCloudProvider, NodeClassStore};

/// How often the version is read again (upstream's version controller period).
pub const VERSION_REFRESH_INTERVAL: Duration = Duration::from_secs(5 * 60);

/// `1` and `33+` (as the API server's `/version` says) → `1.33`; `None` when they are not
/// numbers.
pub fn minor_version(major: &str, minor: &str) -> Option<String> {
    let digits = |s: &str| -> Option<String> {
        let d: String = s.chars().take_while(char::is_ascii_digit).collect();
        (!d.is_empty()).then_some(d)
    };
    Some(format!("{}.{}", digits(major)?, digits(minor)?))
}

/// Reads the version once through `read` and records it; returns whether it changed. A
/// failed read keeps the last version.
pub async fn refresh_once<A, S, F>(provider: &AwsCloudProvider<A, S>, read: F) -> bool
where
    A: AwsApi,
    S: NodeClassStore,
    F: Future<Output = Result<String, String>>,
{
    match read.await {
        Ok(version) => {
            let changed = provider.set_kubernetes_version(&version);
            if changed {
                tracing::info!(version = %version, "discovered kubernetes version");
            }
            changed
        }
        Err(e) => {
            tracing::warn!(error = %e, "reading the kubernetes version; keeping the last one");
            false
        }
    }
}

/// The API server's minor version.
pub async fn apiserver_version(client: &kube::Client) -> Result<String, String> {
    let info = client
        .apiserver_version()
        .await
        .map_err(|e| format!("reading the API server's version: {e}"))?;
    minor_version(&info.major, &info.minor).ok_or_else(|| {
        format!(
            "the API server's version {:?}.{:?} is not a number",
            info.major, info.minor
        )
    })
}

/// Re-reads the API server's version every [`VERSION_REFRESH_INTERVAL`] until shutdown.
pub async fn run<A, S>(ctx: Arc<Context<AwsCloudProvider<A, S>>>, shutdown: CancellationToken)
where
    A: AwsApi,
    S: NodeClassStore,
{
    loop {
        tokio::select! {
            _ = tokio::time::sleep(VERSION_REFRESH_INTERVAL) => {}
            _ = shutdown.cancelled() => return,
        }
        refresh_once(&ctx.provider, apiserver_version(&ctx.client)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_read_as_upstream() {
        assert_eq!(minor_version("1", "33"), Some("1.33".into()));
        assert_eq!(minor_version("1", "34+"), Some("1.34".into()));
        assert_eq!(minor_version("", "34"), None);
        assert_eq!(minor_version("1", "x"), None);
    }
}
