//! The one HTTP client every AWS call goes through: hyper over rustls (or plain HTTP to a local
//! endpoint such as moto in tests), SigV4-signed, with AWS's error bodies turned into
//! [`AwsError::Api`]. Calls are retried as the SDKs' standard mode does ([`retry`]), signed
//! again at each attempt with a clock corrected by the skew a service reported ([`timing`]),
//! and sent where the partition rules or the configured overrides say ([`endpoints`]).

pub mod endpoints;
pub mod retry;
pub mod timing;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use karpenter_cloudprovider::http::{HttpClient, HttpError, Response};

use crate::auth::CredentialsProvider;
use crate::auth::sigv4::{self, Credentials, SignableRequest};
pub use endpoints::{EndpointSettings, Endpoints};
use retry::{RetryConfig, RetryKind, RetryQuota, classify_answer, is_clock_skew};
use timing::{ClockSkew, Timing};

/// Why an AWS call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AwsError {
    /// The service answered with an error code (`InvalidInstanceID.NotFound`,
    /// `InsufficientInstanceCapacity`, …).
    #[error("{code}: {message}")]
    Api {
        /// The error code.
        code: String,
        /// The service's message.
        message: String,
        /// The HTTP status.
        status: u16,
    },
    /// The request did not get an answer.
    #[error("request to {0}")]
    Transport(String),
    /// The answer could not be read.
    #[error("unreadable response: {0}")]
    Parse(String),
    /// No credentials could be found or refreshed.
    #[error("credentials: {0}")]
    Credentials(String),
}

impl AwsError {
    /// The error code of an API error.
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Api { code, .. } => Some(code),
            _ => None,
        }
    }
}

/// A result of an AWS call.
pub type Result<T> = std::result::Result<T, AwsError>;

/// A signed AWS request sender. Clones share the connection pool, the retry quota and the
/// learned clock skew.
#[derive(Clone)]
pub struct AwsHttp {
    client: HttpClient,
    /// The link-local metadata endpoints (IMDS, the container agent) get a short timeout.
    metadata: HttpClient,
    /// Where the services are.
    pub endpoints: Endpoints,
    settings: Arc<EndpointSettings>,
    credentials: CredentialsProvider,
    retry: RetryConfig,
    quota: Arc<RetryQuota>,
    skew: Arc<ClockSkew>,
    timing: Timing,
}

/// The timeout of one attempt to an AWS API.
pub const API_TIMEOUT: Duration = Duration::from_secs(30);
/// The timeout of one attempt to IMDS or the container agent.
pub const METADATA_TIMEOUT: Duration = Duration::from_secs(5);

/// EC2 actions whose `ClientToken` the SDKs fill in when the caller did not, so that a retried
/// request is not carried out twice.
const IDEMPOTENCY_TOKEN_ACTIONS: &[&str] = &["CreateFleet", "RunInstances", "CreateLaunchTemplate"];

fn transport(e: impl std::fmt::Display) -> AwsError {
    AwsError::Transport(e.to_string())
}

impl AwsHttp {
    /// A client for `endpoints`, signing with `credentials`, retrying as the SDKs' standard
    /// mode does.
    pub fn new(endpoints: Endpoints, credentials: CredentialsProvider) -> Result<Self> {
        Ok(Self {
            client: HttpClient::new(API_TIMEOUT).map_err(transport)?,
            metadata: HttpClient::new(METADATA_TIMEOUT).map_err(transport)?,
            endpoints,
            settings: Arc::default(),
            credentials,
            retry: RetryConfig::STANDARD,
            quota: Arc::default(),
            skew: Arc::default(),
            timing: Timing::default(),
        })
    }

    /// The same client retrying as `retry` says.
    pub fn with_retry(mut self, retry: RetryConfig) -> Self {
        self.retry = retry;
        self
    }

    /// The same client with another clock, sleep and jitter (tests).
    pub fn with_timing(mut self, timing: Timing) -> Self {
        self.timing = timing;
        self
    }

    /// The same client with the configured endpoints (`AWS_ENDPOINT_URL_<SERVICE>`, the
    /// profile's, FIPS and dual-stack).
    pub fn with_endpoint_settings(mut self, settings: EndpointSettings) -> Self {
        self.settings = Arc::new(settings);
        self
    }

    /// The same client signing with other credentials.
    pub fn with_credentials(mut self, credentials: CredentialsProvider) -> Self {
        self.credentials = credentials;
        self
    }

    /// The same client sending each call once: no retry, so no retry-quota spent (upstream
    /// sends its validation dry runs with the SDK's no-op retryer, and a throttled check is
    /// simply validated again later).
    pub fn without_retries(&self) -> Self {
        self.clone().with_retry(RetryConfig {
            max_attempts: 1,
            ..self.retry
        })
    }

    /// The retry settings.
    pub fn retry_config(&self) -> RetryConfig {
        self.retry
    }

    /// The retry quota's tokens left.
    pub fn retry_tokens(&self) -> u32 {
        self.quota.available()
    }

    /// How far ahead of our clock the services' clock was found to be, in seconds.
    pub fn clock_skew_seconds(&self) -> i64 {
        self.skew.seconds()
    }

    /// The clock, sleep and jitter in use.
    pub fn timing(&self) -> &Timing {
        &self.timing
    }

    /// The credentials in use.
    pub fn credentials(&self) -> &CredentialsProvider {
        &self.credentials
    }

    /// The base URL of a service, configured or the partition's.
    pub fn url(&self, service: &str) -> String {
        self.settings.url(service, &self.endpoints)
    }

    /// The URL configured for a service, if any (no partition default).
    pub fn configured_url(&self, service: &str) -> Option<String> {
        let url = self.url(service);
        (url != endpoints::standard_url(service, &self.endpoints.region, self.settings.variant))
            .then_some(url)
    }

    /// Sends a signed request to `service`; `path` starts with `/`.
    pub async fn send(
        &self,
        service: &str,
        method: &str,
        path: &str,
        query: &[(String, String)],
        extra_headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Result<Bytes> {
        self.send_signed(None, service, method, path, query, extra_headers, body)
            .await
    }

    /// Sends a request signed with `credentials` rather than the client's own (STS
    /// AssumeRole with a source profile's credentials).
    #[allow(clippy::too_many_arguments)]
    pub async fn send_as(
        &self,
        credentials: &Credentials,
        service: &str,
        method: &str,
        path: &str,
        query: &[(String, String)],
        extra_headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Result<Bytes> {
        self.send_signed(
            Some(credentials),
            service,
            method,
            path,
            query,
            extra_headers,
            body,
        )
        .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn send_signed(
        &self,
        credentials: Option<&Credentials>,
        service: &str,
        method: &str,
        path: &str,
        query: &[(String, String)],
        extra_headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Result<Bytes> {
        let base = self.url(service);
        let host = base
            .split_once("://")
            .map_or(base.as_str(), |(_, rest)| rest)
            .split('/')
            .next()
            .unwrap_or_default()
            .to_string();
        let query_string = query
            .iter()
            .map(|(k, v)| format!("{}={}", sigv4::uri_encode(k), sigv4::uri_encode(v)))
            .collect::<Vec<_>>()
            .join("&");
        let url = if query_string.is_empty() {
            format!("{base}{path}")
        } else {
            format!("{base}{path}?{query_string}")
        };
        let region = self.endpoints.signing_region(service);
        let body = Bytes::from(body);
        let signing = match credentials {
            Some(c) => Signing::With(c),
            None => Signing::Own,
        };
        let build = |now: i64, credentials: Option<&Credentials>| -> Result<http::Request<Bytes>> {
            let credentials = credentials.ok_or_else(|| {
                AwsError::Credentials(format!("{url}: a signed call without credentials"))
            })?;
            let amz_date = sigv4::amz_date(u64::try_from(now).unwrap_or(0));
            let mut headers: Vec<(String, String)> = vec![
                ("host".into(), host.clone()),
                ("x-amz-date".into(), amz_date.clone()),
            ];
            headers.extend(
                extra_headers
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string())),
            );
            if let Some(token) = &credentials.session_token {
                headers.push(("x-amz-security-token".into(), token.clone()));
            }
            let signature = sigv4::sign(
                &SignableRequest {
                    method,
                    path,
                    query,
                    headers: &headers,
                    body: &body,
                },
                credentials,
                &region,
                service,
                &amz_date,
            );
            headers.push(("authorization".into(), signature.authorization));
            let mut builder = http::Request::builder().method(method).uri(&url);
            for (k, v) in &headers {
                if k != "host" {
                    builder = builder.header(k.as_str(), v.as_str());
                }
            }
            builder
                .body(body.clone())
                .map_err(|e| AwsError::Transport(format!("{url}: {e}")))
        };
        let response = self.call(&self.client, signing, build).await?;
        Ok(response.body)
    }

    /// A Query-protocol call (EC2, IAM): the parameters form-encoded in a signed POST, the
    /// XML answer as text.
    pub async fn query(&self, service: &str, params: &[(String, String)]) -> Result<String> {
        let mut params = params.to_vec();
        let action = params
            .iter()
            .find(|(k, _)| k == "Action")
            .map(|(_, v)| v.clone());
        if service == "ec2"
            && action.is_some_and(|a| IDEMPOTENCY_TOKEN_ACTIONS.contains(&a.as_str()))
            && !params.iter().any(|(k, _)| k == "ClientToken")
        {
            params.push(("ClientToken".into(), idempotency_token()));
        }
        let body = params
            .iter()
            .map(|(k, v)| format!("{}={}", sigv4::uri_encode(k), sigv4::uri_encode(v)))
            .collect::<Vec<_>>()
            .join("&");
        let bytes = self
            .send(
                service,
                "POST",
                "/",
                &[],
                &[(
                    "content-type",
                    "application/x-www-form-urlencoded; charset=utf-8",
                )],
                body.into_bytes(),
            )
            .await?;
        String::from_utf8(bytes.to_vec()).map_err(|e| AwsError::Parse(e.to_string()))
    }

    /// Sends an unsigned request once, whatever its answer.
    pub async fn send_unsigned(&self, request: http::Request<Full<Bytes>>) -> Result<(u16, Bytes)> {
        let (parts, body) = request.into_parts();
        let url = parts.uri.to_string();
        let body = body
            .collect()
            .await
            .map_err(|e| AwsError::Transport(format!("{url}: {e}")))?
            .to_bytes();
        let response = self
            .client
            .send(&http::Request::from_parts(parts, body))
            .await
            .map_err(transport)?;
        Ok((response.status, response.body))
    }

    /// An unsigned call with the SDKs' retries (STS web identity, SSO, and with `metadata`
    /// the link-local endpoints); an error answer becomes [`AwsError::Api`].
    pub async fn unsigned_call(
        &self,
        metadata: bool,
        build: impl Fn() -> http::Result<http::Request<Bytes>>,
    ) -> Result<Response> {
        let client = if metadata {
            &self.metadata
        } else {
            &self.client
        };
        self.call(client, Signing::None, |_, _| build().map_err(transport))
            .await
    }

    /// Sends the request `build` makes for a signing time, again after a backoff while the
    /// failure is retryable, attempts remain and the quota allows.
    async fn call(
        &self,
        client: &HttpClient,
        signing: Signing<'_>,
        build: impl Fn(i64, Option<&Credentials>) -> Result<http::Request<Bytes>>,
    ) -> Result<Response> {
        let mut attempt = 1;
        let mut spent = 0;
        loop {
            // Fetched at each attempt: a retry after a long backoff may need fresh ones.
            let credentials = match signing {
                Signing::None => None,
                Signing::With(c) => Some(c.clone()),
                Signing::Own => Some(self.credentials.get(self).await?),
            };
            let now = self.skew.corrected(&*self.timing.clock);
            let request = build(now, credentials.as_ref())?;
            let outcome = client.send(&request).await;
            let (kind, error, asked_ms) = match outcome {
                Ok(r) if r.status < 400 => {
                    self.quota.succeeded(spent);
                    return Ok(r);
                }
                Ok(r) => {
                    let error = parse_answer_error(r.status, r.header("x-amzn-errortype"), &r.body);
                    let code = error.code();
                    let mut kind = classify_answer(r.status, code);
                    if kind.is_none()
                        && code.is_some_and(is_clock_skew)
                        && r.header("date")
                            .is_some_and(|d| self.skew.observe(d, self.timing.clock.now()))
                    {
                        tracing::info!(
                            skew_seconds = self.skew.seconds(),
                            "AWS rejected the request's time; signing with the service's clock"
                        );
                        kind = Some(RetryKind::ClockSkew);
                    }
                    let asked = r
                        .header("x-amz-retry-after")
                        .and_then(|v| v.trim().parse::<u64>().ok());
                    (kind, error, asked)
                }
                Err(HttpError::TimedOut(url)) => (
                    Some(RetryKind::Timeout),
                    AwsError::Transport(format!("{url}: timed out")),
                    None,
                ),
                Err(e) => (Some(RetryKind::Transient), transport(e), None),
            };
            let Some(kind) = kind else {
                return Err(error);
            };
            if attempt >= self.retry.max_attempts {
                return Err(error);
            }
            let cost = self.retry.retry_cost(kind);
            if !self.quota.acquire(cost) {
                tracing::debug!(error = %error, "retry quota exhausted; not retrying");
                return Err(error);
            }
            spent += cost;
            let mut wait = self.retry.backoff(kind, attempt, (self.timing.jitter)());
            if let Some(ms) = asked_ms {
                wait = self.retry.server_backoff(wait, ms);
            }
            // The host only: a query can hold secrets.
            tracing::debug!(
                host = request.uri().host().unwrap_or_default(),
                attempt,
                ?kind,
                wait_ms = wait.as_millis() as u64,
                error = %error,
                "retrying an AWS request"
            );
            (self.timing.sleep)(wait).await;
            attempt += 1;
        }
    }
}

/// Which credentials sign a call.
#[derive(Clone, Copy)]
enum Signing<'a> {
    /// None: the call is unsigned.
    None,
    /// The client's own.
    Own,
    /// These.
    With(&'a Credentials),
}

/// A random version 4 UUID, as the SDKs fill idempotency tokens with.
fn idempotency_token() -> String {
    use ring::rand::SecureRandom;
    let mut b = [0u8; 16];
    if ring::rand::SystemRandom::new().fill(&mut b).is_err() {
        // No system randomness: fall back to the hash-seeded fraction, still unique enough
        // for one client's retries.
        for (i, chunk) in b.chunks_mut(8).enumerate() {
            let f = timing::random_fraction() * (1u64 << 53) as f64;
            chunk.copy_from_slice(&((f as u64) ^ (i as u64)).to_le_bytes());
        }
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// An error answer: the REST-JSON protocol (EKS) names the error in the `x-amzn-ErrorType`
/// header (`ResourceNotFoundException:http://…`), which wins over the body's; the others only
/// in the body ([`parse_error`]).
pub fn parse_answer_error(status: u16, error_type: Option<&str>, body: &[u8]) -> AwsError {
    let error = parse_error(status, body);
    let Some(named) = error_type
        .and_then(|t| t.split(':').next())
        .map(str::trim)
        .filter(|t| !t.is_empty())
    else {
        return error;
    };
    match error {
        AwsError::Api {
            message, status, ..
        } => AwsError::Api {
            code: named.to_string(),
            message,
            status,
        },
        other => other,
    }
}

/// An error body: EC2's `<Response><Errors><Error><Code>`, the query protocol's
/// `<ErrorResponse><Error><Code>`, or the JSON protocols' `{"__type": …, "message": …}`.
pub fn parse_error(status: u16, body: &[u8]) -> AwsError {
    let text = String::from_utf8_lossy(body);
    if let Ok(doc) = roxmltree::Document::parse(&text) {
        let find = |name: &str| {
            doc.descendants()
                .find(|n| n.has_tag_name(name))
                .and_then(|n| n.text())
                .map(str::to_string)
        };
        if let Some(code) = find("Code") {
            return AwsError::Api {
                code,
                message: find("Message").unwrap_or_default(),
                status,
            };
        }
    }
    if let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) {
        let code = json["__type"]
            .as_str()
            .or(json["code"].as_str())
            .unwrap_or("Unknown");
        // JSON 1.0/1.1 put the error shape's namespace before a '#'.
        let code = code.rsplit('#').next().unwrap_or(code).to_string();
        let message = json["message"]
            .as_str()
            .or(json["Message"].as_str())
            .unwrap_or_default()
            .to_string();
        return AwsError::Api {
            code,
            message,
            status,
        };
    }
    AwsError::Api {
        code: format!("HTTP{status}"),
        message: text.chars().take(200).collect(),
        status,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_from_each_protocol() {
        let ec2 = br#"<?xml version="1.0"?><Response><Errors><Error><Code>InvalidInstanceID.NotFound</Code><Message>The instance ID 'i-1' does not exist</Message></Error></Errors><RequestID>x</RequestID></Response>"#;
        assert_eq!(
            parse_error(400, ec2).code(),
            Some("InvalidInstanceID.NotFound")
        );
        let json = br#"{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"The specified queue does not exist."}"#;
        let e = parse_error(400, json);
        assert_eq!(e.code(), Some("QueueDoesNotExist"));
        assert!(e.to_string().contains("does not exist"));
        assert_eq!(parse_error(503, b"busy").code(), Some("HTTP503"));
        // REST-JSON: the header names it, the body only has the message.
        let eks = br#"{"message":"No cluster found for name: c."}"#;
        let e = parse_answer_error(
            404,
            Some("ResourceNotFoundException:http://internal.amazon.com/coral/com.amazon.eks/"),
            eks,
        );
        assert_eq!(e.code(), Some("ResourceNotFoundException"));
        assert!(e.to_string().contains("No cluster found"));
        assert_eq!(
            parse_answer_error(400, None, eks).code(),
            Some("Unknown"),
            "without the header the body has no code"
        );
    }

    #[test]
    fn endpoints() {
        let e = Endpoints {
            region: "eu-west-1".into(),
            override_url: None,
        };
        assert_eq!(e.url("ec2"), "https://ec2.eu-west-1.amazonaws.com");
        assert_eq!(
            e.url("pricing"),
            "https://api.pricing.eu-central-1.amazonaws.com"
        );
        assert_eq!(e.signing_region("iam"), "us-east-1");
        let local = Endpoints {
            region: "us-east-1".into(),
            override_url: Some("http://127.0.0.1:5000/".into()),
        };
        assert_eq!(local.url("sqs"), "http://127.0.0.1:5000");
    }
}
