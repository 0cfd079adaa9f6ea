//! The HTTP client cloud providers share: hyper over rustls (or plain HTTP to a local endpoint,
//! such as an emulator in tests), a timeout per attempt, and — for requests that may be sent
//! twice — retries with exponential backoff and full jitter on throttling, server errors and
//! lost connections, honouring the server's `Retry-After`. Each provider keeps its own signing,
//! endpoints and error bodies.
//!
//! Certificates are checked against the system's roots ([`HttpClient::new`]); a provider whose
//! servers are on premises (Proxmox VE with its own CA, or self-signed) can trust given PEM
//! certificates instead, or skip the check when its operator says so ([`HttpClient::with_tls`]).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// Why a request got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    /// The connection failed or broke, or the request could not be built.
    #[error("request to {url}: {reason}")]
    Transport {
        /// Where it went.
        url: String,
        /// What went wrong.
        reason: String,
    },
    /// No answer within the timeout.
    #[error("request to {0}: timed out")]
    TimedOut(String),
}

/// An answer, whatever its status.
#[derive(Clone, Debug)]
pub struct Response {
    /// The HTTP status.
    pub status: u16,
    /// The response headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
    /// The HTTP/1 reason phrase, when the server sent one other than the status's standard
    /// phrase: Proxmox VE writes its error messages there (`500 Configuration file
    /// 'nodes/pve1/qemu-server/100.conf' does not exist`).
    pub reason: Option<String>,
}

impl Response {
    /// A 2xx status.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// A response header as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// How often, and how patiently, a request that may be repeated is retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub attempts: u32,
    /// The backoff before the second attempt; it doubles with each attempt.
    pub base: Duration,
    /// The longest backoff.
    pub max: Duration,
}

impl RetryPolicy {
    /// Send once, never retry: for requests a second copy of which would do harm.
    pub const NEVER: RetryPolicy = RetryPolicy {
        attempts: 1,
        base: Duration::ZERO,
        max: Duration::ZERO,
    };

    /// The cloud SDKs' standard mode: three attempts, backoff from 1 s up to 20 s.
    pub const STANDARD: RetryPolicy = RetryPolicy {
        attempts: 3,
        base: Duration::from_secs(1),
        max: Duration::from_secs(20),
    };

    /// The longest wait before attempt `attempt` (1 = the second attempt): the base doubled
    /// per attempt, within the maximum.
    pub fn ceiling(&self, attempt: u32) -> Duration {
        self.base
            .saturating_mul(
                1u32.checked_shl(attempt.saturating_sub(1))
                    .unwrap_or(u32::MAX),
            )
            .min(self.max)
    }
}

/// Whether a status is worth another attempt: throttling, a timeout, or a server error that
/// may pass.
pub fn retryable(status: u16) -> bool {
    matches!(status, 408 | 429 | 500 | 502 | 503 | 504)
}

/// The server's `Retry-After` in seconds, if it sent one.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

/// Full jitter: a wait spread evenly below `ceiling`, so clients that failed together do not
/// come back together.
fn jittered(ceiling: Duration) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    // RandomState is seeded randomly per process and per instance: enough spread for backoff,
    // without a random-number crate.
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(ceiling.as_nanos());
    let fraction = (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64;
    ceiling.mul_f64(fraction)
}

type Connector = hyper_rustls::HttpsConnector<HttpConnector>;

/// Which servers' certificates a client accepts.
#[derive(Clone, Default, PartialEq, Eq)]
pub enum TlsOptions {
    /// Certificates that chain to the system's root certificates.
    #[default]
    SystemRoots,
    /// Certificates that chain to one of these PEM certificates, and to nothing else: a private
    /// CA's, or a self-signed server's own certificate.
    CustomRoots(Vec<u8>),
    /// Any certificate, unchecked (the handshake's signatures still are). For servers with
    /// self-signed certificates whose operator chose not to name a CA; the connection is then
    /// open to whoever sits between the client and the server.
    InsecureSkipVerify,
}

impl std::fmt::Debug for TlsOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TlsOptions::SystemRoots => f.write_str("SystemRoots"),
            // The PEM text would fill a log line and say nothing a reader needs.
            TlsOptions::CustomRoots(pem) => write!(f, "CustomRoots({} bytes of PEM)", pem.len()),
            TlsOptions::InsecureSkipVerify => f.write_str("InsecureSkipVerify"),
        }
    }
}

fn tls_error(reason: String) -> HttpError {
    HttpError::Transport {
        url: String::new(),
        reason,
    }
}

/// The trust store of `pem`'s certificates; an error when it holds none, or one that is not a
/// certificate rustls can use.
fn root_store(pem: &[u8]) -> Result<rustls::RootCertStore, HttpError> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut store = rustls::RootCertStore::empty();
    for (n, cert) in CertificateDer::pem_slice_iter(pem).enumerate() {
        let cert = cert.map_err(|e| tls_error(format!("CA certificate #{}: {e}", n + 1)))?;
        store
            .add(cert)
            .map_err(|e| tls_error(format!("CA certificate #{}: {e}", n + 1)))?;
    }
    if store.is_empty() {
        return Err(tls_error(
            "the CA PEM holds no CERTIFICATE section".to_string(),
        ));
    }
    Ok(store)
}

/// A verifier that accepts every certificate but still checks that the server holds the key of
/// the one it sent ([`TlsOptions::InsecureSkipVerify`]).
#[derive(Debug)]
struct AnyServerCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyServerCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The rustls configuration for `CustomRoots` and `InsecureSkipVerify`, with the ring provider
/// the connector's own defaults use.
fn tls_config(tls: &TlsOptions) -> Result<rustls::ClientConfig, HttpError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_error(format!("TLS versions: {e}")))?;
    Ok(match tls {
        TlsOptions::CustomRoots(pem) => builder
            .with_root_certificates(root_store(pem)?)
            .with_no_client_auth(),
        TlsOptions::InsecureSkipVerify => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServerCertificate(provider)))
            .with_no_client_auth(),
        TlsOptions::SystemRoots => unreachable!("the system roots use the connector's defaults"),
    })
}

/// The shared client: cheap to clone (one connection pool).
#[derive(Clone, Debug)]
pub struct HttpClient {
    client: Client<Connector, Full<Bytes>>,
    timeout: Duration,
}

impl HttpClient {
    /// A client trusting the system's root certificates, with `timeout` per attempt.
    pub fn new(timeout: Duration) -> Result<Self, HttpError> {
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_native_roots()
            .map_err(|e| HttpError::Transport {
                url: String::new(),
                reason: format!("loading root certificates: {e}"),
            })?
            .https_or_http()
            .enable_http1()
            .build();
        Ok(Self {
            client: Client::builder(TokioExecutor::new()).build(connector),
            timeout,
        })
    }

    /// A client checking certificates as `tls` says, with `timeout` per attempt.
    /// [`TlsOptions::SystemRoots`] is [`HttpClient::new`]. A PEM without a certificate is an
    /// error here, not at the first request.
    pub fn with_tls(timeout: Duration, tls: TlsOptions) -> Result<Self, HttpError> {
        if tls == TlsOptions::SystemRoots {
            return Self::new(timeout);
        }
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls_config(&tls)?)
            .https_or_http()
            .enable_http1()
            .build();
        Ok(Self {
            client: Client::builder(TokioExecutor::new()).build(connector),
            timeout,
        })
    }

    /// Sends `request` once.
    pub async fn send(&self, request: &Request<Bytes>) -> Result<Response, HttpError> {
        let url = request.uri().to_string();
        let mut builder = Request::builder()
            .method(request.method().clone())
            .uri(request.uri().clone());
        if let Some(headers) = builder.headers_mut() {
            headers.clone_from(request.headers());
        }
        let copy = builder
            .body(Full::new(request.body().clone()))
            .map_err(|e| HttpError::Transport {
                url: url.clone(),
                reason: e.to_string(),
            })?;
        let response = tokio::time::timeout(self.timeout, self.client.request(copy))
            .await
            .map_err(|_| HttpError::TimedOut(url.clone()))?
            .map_err(|e| HttpError::Transport {
                url: url.clone(),
                reason: e.to_string(),
            })?;
        let status = response.status();
        let headers = response.headers().clone();
        let reason = response
            .extensions()
            .get::<hyper::ext::ReasonPhrase>()
            .map(|r| String::from_utf8_lossy(r.as_bytes()).into_owned());
        let body = tokio::time::timeout(self.timeout, response.into_body().collect())
            .await
            .map_err(|_| HttpError::TimedOut(url.clone()))?
            .map_err(|e| HttpError::Transport {
                url,
                reason: e.to_string(),
            })?
            .to_bytes();
        Ok(Response {
            status: status.as_u16(),
            headers,
            body,
            reason,
        })
    }

    /// Sends `request`, again after a backoff while the answer is retryable (or there is
    /// none), at most `policy.attempts` times; the last answer or error is returned.
    pub async fn send_with_retries(
        &self,
        request: &Request<Bytes>,
        policy: RetryPolicy,
    ) -> Result<Response, HttpError> {
        self.send_rebuilt_with_retries(
            policy,
            || Ok(request.clone()),
            |outcome| match outcome {
                Ok(r) => retryable(r.status),
                Err(_) => true,
            },
        )
        .await
    }

    /// Sends the request `build` makes, and after a backoff builds and sends it again while
    /// `again` says the outcome is worth it, at most `policy.attempts` times; the last outcome
    /// is returned. For platforms whose signatures may be used once (a nonce, a date), so a
    /// retry must be signed afresh rather than resent.
    pub async fn send_rebuilt_with_retries(
        &self,
        policy: RetryPolicy,
        mut build: impl FnMut() -> Result<Request<Bytes>, HttpError>,
        again: impl Fn(&Result<Response, HttpError>) -> bool,
    ) -> Result<Response, HttpError> {
        let mut attempt = 1;
        loop {
            let request = build()?;
            let outcome = self.send(&request).await;
            if attempt >= policy.attempts || !again(&outcome) {
                return outcome;
            }
            let wait = outcome
                .as_ref()
                .ok()
                .and_then(|r| retry_after(&r.headers))
                .map(|w| w.min(policy.max))
                .unwrap_or_else(|| jittered(policy.ceiling(attempt)));
            // The host only: a query can hold secrets.
            tracing::debug!(
                host = request.uri().host().unwrap_or_default(),
                attempt,
                wait_ms = wait.as_millis() as u64,
                "retrying a request"
            );
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_within_the_maximum_and_jitter_stays_below_it() {
        let p = RetryPolicy::STANDARD;
        assert_eq!(p.ceiling(1), Duration::from_secs(1));
        assert_eq!(p.ceiling(2), Duration::from_secs(2));
        assert_eq!(p.ceiling(5), Duration::from_secs(16));
        assert_eq!(p.ceiling(6), Duration::from_secs(20));
        assert_eq!(p.ceiling(60), Duration::from_secs(20));
        for _ in 0..100 {
            assert!(jittered(Duration::from_secs(4)) < Duration::from_secs(4));
        }
    }

    #[test]
    fn throttling_and_server_errors_are_retried_client_errors_are_not() {
        for s in [408, 429, 500, 502, 503, 504] {
            assert!(retryable(s), "{s}");
        }
        for s in [200, 400, 401, 403, 404, 409, 501] {
            assert!(!retryable(s), "{s}");
        }
        let mut h = HeaderMap::new();
        h.insert(http::header::RETRY_AFTER, "7".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(7)));
        h.insert(
            http::header::RETRY_AFTER,
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&h), None, "dates are not honoured");
    }

    #[test]
    fn a_custom_ca_must_hold_a_usable_certificate() {
        for (pem, why) in [
            (&b""[..], "no CERTIFICATE section"),
            (b"not PEM at all", "no CERTIFICATE section"),
            (
                b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
                "no CERTIFICATE section",
            ),
            (
                b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
                "CA certificate #1",
            ),
        ] {
            let err = HttpClient::with_tls(
                Duration::from_secs(1),
                TlsOptions::CustomRoots(pem.to_vec()),
            )
            .unwrap_err();
            assert!(err.to_string().contains(why), "{err}");
        }
        assert_eq!(
            format!("{:?}", TlsOptions::CustomRoots(vec![b'x'; 12])),
            "CustomRoots(12 bytes of PEM)"
        );
    }
}
