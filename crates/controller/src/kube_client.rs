//! The controller's API client, rate-limited as client-go's is (`KUBE_CLIENT_QPS` requests per
//! second on average, bursts of `KUBE_CLIENT_BURST`), so a busy controller cannot flood the API
//! server: requests wait for a token rather than fail. A watch takes one token to start.
//! Every request is counted and timed as client-go's are ([`MetricsLayer`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};
use tower_layer::Layer;
use tower_service::Service;

use crate::Options;
use crate::metrics::client::ClientMetrics;

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

/// The layer putting [`Timed`] over a client's service.
#[derive(Clone)]
pub struct MetricsLayer {
    metrics: ClientMetrics,
}

impl MetricsLayer {
    /// Records into `metrics` (the controller's: [`ClientMetrics::global`]).
    pub fn new(metrics: ClientMetrics) -> Self {
        Self { metrics }
    }
}

impl<S> Layer<S> for MetricsLayer {
    type Service = Timed<S>;

    fn layer(&self, inner: S) -> Timed<S> {
        Timed {
            inner,
            metrics: self.metrics.clone(),
            waiting_since: None,
        }
    }
}

/// A service that counts its requests by status and method and times them, from when the
/// next request starts waiting to be let through (the rate limiter's wait, which client-go
/// times too) to its response. Watches are counted, not timed: their response is a stream.
pub struct Timed<S> {
    inner: S,
    metrics: ClientMetrics,
    /// When the request about to be called started waiting for the service to be ready.
    waiting_since: Option<Instant>,
}

impl<S, B, RB> Service<http::Request<B>> for Timed<S>
where
    S: Service<http::Request<B>, Response = http::Response<RB>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.waiting_since.get_or_insert_with(Instant::now);
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let started = self.waiting_since.take().unwrap_or_else(Instant::now);
        let method = request.method().as_str().to_string();
        let path = request.uri().path().to_string();
        let watch = request
            .uri()
            .query()
            .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
        let metrics = self.metrics.clone();
        let response = self.inner.call(request);
        Box::pin(async move {
            let result = response.await;
            let code = result.as_ref().ok().map(|r| r.status().as_u16());
            metrics.result(&method, code);
            if !watch {
                metrics.latency(&method, &path, started.elapsed().as_secs_f64());
            }
            result
        })
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
        // Outside the rate limit, so a request's time includes its wait for a token.
        .with_layer(&MetricsLayer::new(ClientMetrics::global().clone()))
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

    /// A fake API server: answers after `latency` with the status the path asks for
    /// (`.../teapot` 418), or fails without a response for `.../down`.
    #[derive(Clone)]
    struct FakeApi {
        latency: Duration,
    }

    impl Service<http::Request<()>> for FakeApi {
        type Response = http::Response<()>;
        type Error = &'static str;
        type Future =
            Pin<Box<dyn Future<Output = Result<http::Response<()>, &'static str>> + Send>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, request: http::Request<()>) -> Self::Future {
            let latency = self.latency;
            let path = request.uri().path().to_string();
            Box::pin(async move {
                tokio::time::sleep(latency).await;
                let status = if path.ends_with("/teapot") {
                    418
                } else if path.ends_with("/down") {
                    return Err("connection refused");
                } else {
                    200
                };
                Ok(http::Response::builder().status(status).body(()).unwrap())
            })
        }
    }

    async fn send<S: Service<http::Request<()>>>(s: &mut S, method: &str, uri: &str) {
        std::future::poll_fn(|cx| s.poll_ready(cx)).await.ok();
        let request = http::Request::builder()
            .method(method)
            .uri(uri)
            .body(())
            .unwrap();
        let _ = s.call(request).await;
    }

    /// Requests through the rate limit and the metrics layer on the paused clock: counted by
    /// method and status, timed with their wait for a token, by verb and resource.
    #[tokio::test(start_paused = true)]
    async fn requests_are_counted_and_timed_with_their_wait_for_the_rate_limit() {
        let metrics = ClientMetrics::new();
        let api = FakeApi {
            latency: Duration::from_millis(30),
        };
        let limited = RateLimitLayer::new(1, 1).layer(api);
        let mut svc = MetricsLayer::new(metrics.clone()).layer(limited);
        // The burst's one token: 30 ms. The next waits a second for its token.
        send(&mut svc, "GET", "/api/v1/nodes/n1").await;
        send(&mut svc, "GET", "/api/v1/nodes/n2").await;
        send(
            &mut svc,
            "GET",
            "/api/v1/namespaces/default/pods?watch=true&resourceVersion=1",
        )
        .await;
        send(&mut svc, "POST", "/apis/karpenter.sh/v1/nodeclaims").await;
        send(&mut svc, "PATCH", "/api/v1/nodes/n1/teapot").await;
        send(&mut svc, "DELETE", "/api/v1/nodes/down").await;

        let count =
            |code: &str, method: &str| metrics.requests.get(&[code, method]).map(|c| c.get());
        assert_eq!(count("200", "GET"), Some(3), "the watch is counted");
        assert_eq!(count("200", "POST"), Some(1));
        assert_eq!(count("418", "PATCH"), Some(1));
        assert_eq!(count("<error>", "DELETE"), Some(1));

        let gets = metrics
            .duration
            .get(&["GET", "", "v1", "nodes", ""])
            .expect("gets of nodes timed");
        assert_eq!(gets.count(), 2);
        assert_eq!(gets.count_le(0.04), 1, "the first took its 30 ms");
        assert!(
            (gets.sum() - 1.03).abs() < 1e-6,
            "the second waited ~970 ms for its token, then 30 ms: {}",
            gets.sum()
        );
        assert!(
            metrics
                .duration
                .get(&["LIST", "", "v1", "pods", ""])
                .is_none(),
            "a watch is not timed"
        );
        let creates = metrics
            .duration
            .get(&["CREATE", "karpenter.sh", "v1", "nodeclaims", ""])
            .expect("create timed");
        assert_eq!(creates.count(), 1);
        assert!(
            metrics
                .duration
                .get(&["PATCH", "", "v1", "nodes", "teapot"])
                .is_some()
        );
    }
}
