//! Retries that sign each attempt afresh. Alibaba refuses a signature nonce it has seen
//! (`SignatureNonceUsed`) and a date more than 15 minutes old, so a retried call is a new
//! request, not the same bytes again — which is why this wraps the shared client's single
//! [`HttpClient::send`] rather than its `send_with_retries`. The policy, the `Retry-After`
//! reading and the backoff ceiling are the shared client's.

use std::time::Duration;

use bytes::Bytes;
use karpenter_cloudprovider::http::{HttpClient, HttpError, Response, RetryPolicy, retry_after};

/// Sends the request `build` makes, building and sending it again after a backoff while
/// `again` says the outcome is worth another attempt, at most `policy.attempts` times; the last
/// outcome is returned.
pub(crate) async fn send_fresh(
    http: &HttpClient,
    policy: RetryPolicy,
    mut build: impl FnMut() -> Result<http::Request<Bytes>, HttpError>,
    again: impl Fn(&Result<Response, HttpError>) -> bool,
) -> Result<Response, HttpError> {
    let mut attempt = 1;
    loop {
        let request = build()?;
        let outcome = http.send(&request).await;
        if attempt >= policy.attempts || !again(&outcome) {
            return outcome;
        }
        let wait = outcome
            .as_ref()
            .ok()
            .and_then(|r| retry_after(&r.headers))
            .map(|w| w.min(policy.max))
            .unwrap_or_else(|| jittered(policy.ceiling(attempt)));
        // The host only: the query of an ECS call can hold a password or user data.
        tracing::debug!(
            host = request.uri().host().unwrap_or_default(),
            attempt,
            wait_ms = wait.as_millis() as u64,
            "retrying an Alibaba Cloud request"
        );
        tokio::time::sleep(wait).await;
        attempt += 1;
    }
}

/// Full jitter below `ceiling`, as the shared client does, so controllers throttled together do
/// not come back together.
fn jittered(ceiling: Duration) -> Duration {
    ceiling.mul_f64(random_fraction())
}

/// A number in [0, 1) from the standard library's randomly seeded hasher: enough spread for
/// backoff and nonces, without a random-number crate.
pub(crate) fn random_fraction() -> f64 {
    (random_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// 64 random-enough bits: `RandomState` is seeded from the OS per instance, and the counter and
/// clock make two draws in the same instant differ.
pub(crate) fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.finish()
}

/// A signature nonce: 32 hex digits, different for every request.
pub(crate) fn nonce() -> String {
    format!("{:016x}{:016x}", random_u64(), random_u64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonces_differ_and_jitter_stays_below_the_ceiling() {
        let nonces: std::collections::BTreeSet<String> = (0..1000).map(|_| nonce()).collect();
        assert_eq!(nonces.len(), 1000);
        assert!(nonces.iter().all(|n| n.len() == 32));
        for _ in 0..100 {
            assert!(jittered(Duration::from_secs(2)) < Duration::from_secs(2));
        }
    }
}
