//! The controller's API client, rate-limited as client-go's is (`KUBE_CLIENT_QPS` requests per
//! second on average, bursts of `KUBE_CLIENT_BURST`), so a busy controller cannot flood the API
//! server: requests wait for a token rather than fail. A watch takes one token to start.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};
use tower_layer::Layer;
use tower_service::Service;

use crate::Options;

/// A token bucket: `qps` tokens a second, at most `burst` kept.
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    at: Instant,
}

impl TokenBucket {
    /// A full bucket at `now`.
    pub fn new(qps: u32, burst: u32, now: Instant) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            qps: f64::from(qps.max(1)),
            burst,
            tokens: burst,
            at: now,
        }
    }

    /// Takes a token at `now`, or says how long until there is one.
    pub fn take(&mut self, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / self.qps))
        }
    }
}

/// The layer putting [`RateLimited`] over a client's service.
#[derive(Clone, Debug)]
pub struct RateLimitLayer {
    bucket: Arc<Mutex<TokenBucket>>,
}

impl RateLimitLayer {
    /// `qps` requests a second, bursts of `burst`.
    pub fn new(qps: u32, burst: u32) -> Self {
        Self {
            bucket: Arc::new(Mutex::new(TokenBucket::new(qps, burst, Instant::now()))),
        }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;

    fn layer(&self, inner: S) -> RateLimited<S> {
        RateLimited {
            inner,
            bucket: self.bucket.clone(),
            wait: None,
            permitted: false,
        }
    }
}

/// A service that is ready only once it holds a token.
pub struct RateLimited<S> {
    inner: S,
    bucket: Arc<Mutex<TokenBucket>>,
    wait: Option<Pin<Box<Sleep>>>,
    /// A token is held for the next call (taken while the inner service was not ready).
    permitted: bool,
}

impl<S, R> Service<R> for RateLimited<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        while !self.permitted {
            if let Some(wait) = self.wait.as_mut() {
                if wait.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.wait = None;
            }
            let taken = self
                .bucket
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take(Instant::now());
            match taken {
                Ok(()) => self.permitted = true,
                Err(wait) => self.wait = Some(Box::pin(tokio::time::sleep(wait))),
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> S::Future {
        self.permitted = false;
        self.inner.call(request)
    }
}

/// The client of the cluster the kubeconfig or the pod's service account names, limited to
/// `options`' rate.
pub async fn client(options: &Options) -> Result<kube::Client, kube::Error> {
    let config = kube::Config::infer()
        .await
        .map_err(kube::Error::InferConfig)?;
    let builder = kube::client::ClientBuilder::try_from(config)?;
    Ok(builder
        .with_layer(&RateLimitLayer::new(
            options.kube_client_qps,
            options.kube_client_burst,
        ))
        .build())
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_bucket_allows_bursts_then_the_rate() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(10, 3, t0);
        for _ in 0..3 {
            assert_eq!(b.take(t0), Ok(()));
        }
        assert_eq!(b.take(t0), Err(Duration::from_millis(100)));
        assert_eq!(b.take(t0 + Duration::from_millis(100)), Ok(()));
        assert!(b.take(t0 + Duration::from_millis(150)).is_err());
        // Idle for a long time: the bucket fills to the burst, no further.
        let later = t0 + Duration::from_secs(60);
        for _ in 0..3 {
            assert_eq!(b.take(later), Ok(()));
        }
        assert!(b.take(later).is_err());
    }

    #[derive(Clone)]
    struct Count(Arc<AtomicUsize>);

    impl Service<()> for Count {
        type Response = ();
        type Error = Infallible;
        type Future = std::future::Ready<Result<(), Infallible>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: ()) -> Self::Future {
            self.0.fetch_add(1, Ordering::SeqCst);
            std::future::ready(Ok(()))
        }
    }

    async fn ready_and_call<S: Service<()>>(s: &mut S) {
        std::future::poll_fn(|cx| s.poll_ready(cx)).await.ok();
        let _ = s.call(()).await;
    }

    #[tokio::test(start_paused = true)]
    async fn requests_beyond_the_burst_wait_for_the_rate() {
        let calls = Arc::new(AtomicUsize::new(0));
        let mut svc = RateLimitLayer::new(5, 2).layer(Count(calls.clone()));
        let start = Instant::now();
        for _ in 0..12 {
            ready_and_call(&mut svc).await;
        }
        assert_eq!(calls.load(Ordering::SeqCst), 12);
        // Two at once, then ten at 5 a second: two seconds on the paused clock.
        assert_eq!(start.elapsed(), Duration::from_secs(2));
    }
}
