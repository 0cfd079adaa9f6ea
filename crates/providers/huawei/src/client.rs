//! The REST client for CCE, ECS, VPC, BSS and IAM, sending what huaweicloud-sdk-go-v3 sends:
//! JSON bodies (`Content-Type: application/json`), the region's project id as `X-Project-Id`
//! on the project-scoped services (CCE, ECS, VPC) and the account's domain id as `X-Domain-Id`
//! on BSS, `X-Security-Token` with temporary credentials, and the `SDK-HMAC-SHA256` signature
//! ([`crate::auth::signer`]) over all of them, made afresh for every attempt.
//!
//! Paths are given unencoded, with the SDK's placeholders `{project_id}` and `{domain_id}`
//! filled in (`/v1/{project_id}/cloudservers/flavors`); each segment is escaped on the wire as
//! it is in the signature. The project and domain ids come from the settings or, as the SDK
//! does, from IAM (`GET /v3/projects?name=<region>`, `GET /v3/auth/domains`), looked up once.
//!
//! Throttling (HTTP 429, the gateway's `APIGW.0308`) is retried with the shared backoff and
//! jitter; so are server errors and lost connections, except for [`Client::post`], whose
//! second copy could create a second node (use [`Client::post_idempotent`] for reads such as
//! BSS's ratings). Refusals (other 4xx) are not retried. Request ids go to debug logs; bodies
//! never do.

use bytes::Bytes;
use karpenter_cloudprovider::http::{HttpClient, HttpError, Response, RetryPolicy, retryable};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::sync::OnceCell;

use crate::auth::signer::{self, SignableRequest};
use crate::auth::{CredentialsError, CredentialsProvider};
use crate::endpoint::{Endpoints, Scope, Service};
use crate::errors::HuaweiError;

/// The `User-Agent` the calls carry (and sign, as the SDK signs its own).
pub const USER_AGENT: &str = concat!("karpenter-rs/", env!("CARGO_PKG_VERSION"));

/// The `Content-Type` of every call, as the SDK's generated clients declare it.
pub const JSON_CONTENT_TYPE: &str = "application/json";

/// The most pages a listing follows: a guard against a service that never stops answering
/// with full pages.
pub const MAX_PAGES: usize = 1000;

/// Why a Huawei Cloud call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The service answered with an error.
    #[error("{service}: {error}")]
    Api {
        /// The service called.
        service: Service,
        /// What it answered.
        error: HuaweiError,
    },
    /// No credentials.
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
    /// No answer (connection, timeout).
    #[error("{service}: {reason}")]
    Transport {
        /// The service called.
        service: Service,
        /// What went wrong.
        reason: String,
    },
    /// A successful answer that could not be read as expected.
    #[error("{service} {path}: unreadable answer: {reason}")]
    Decode {
        /// The service called.
        service: Service,
        /// The path called.
        path: String,
        /// What was wrong.
        reason: String,
    },
    /// The call could not be made as asked: no project or domain id to be found, a path that
    /// is not one.
    #[error("{0}")]
    Config(String),
}

impl ClientError {
    /// The service's error answer, when there was one.
    pub fn api_error(&self) -> Option<&HuaweiError> {
        match self {
            ClientError::Api { error, .. } => Some(error),
            _ => None,
        }
    }

    /// The primary error code of an error answer.
    pub fn code(&self) -> Option<&str> {
        self.api_error().and_then(|e| e.code.as_deref())
    }

    /// The HTTP status of an error answer.
    pub fn status(&self) -> Option<u16> {
        self.api_error().map(|e| e.status)
    }

    /// The request id of an error answer.
    pub fn request_id(&self) -> Option<&str> {
        self.api_error().and_then(|e| e.request_id.as_deref())
    }

    /// See [`HuaweiError::is_not_found`].
    pub fn is_not_found(&self) -> bool {
        self.api_error().is_some_and(HuaweiError::is_not_found)
    }

    /// See [`HuaweiError::is_insufficient_capacity`].
    pub fn is_insufficient_capacity(&self) -> bool {
        self.api_error()
            .is_some_and(HuaweiError::is_insufficient_capacity)
    }

    /// See [`HuaweiError::is_unsupported_network`].
    pub fn is_unsupported_network(&self) -> bool {
        self.api_error()
            .is_some_and(HuaweiError::is_unsupported_network)
    }

    /// See [`HuaweiError::is_throttling`].
    pub fn is_throttling(&self) -> bool {
        self.api_error().is_some_and(HuaweiError::is_throttling)
    }

    /// Worth trying again later: a retryable answer ([`HuaweiError::is_retryable`]) or no
    /// answer at all.
    pub fn is_retryable(&self) -> bool {
        match self {
            ClientError::Api { error, .. } => error.is_retryable(),
            ClientError::Transport { .. } => true,
            _ => false,
        }
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The request id of an answer: `X-Request-Id`, or IAM's `X-IAM-Trace-Id`.
fn request_id(response: &Response) -> Option<&str> {
    response
        .header("X-Request-Id")
        .or_else(|| response.header("X-IAM-Trace-Id"))
}

/// A successful answer read as `T`; an empty one as JSON `null`.
fn decode<T: DeserializeOwned>(
    service: Service,
    path: String,
    answer: &[u8],
) -> Result<T, ClientError> {
    if answer.iter().all(u8::is_ascii_whitespace) {
        return serde_json::from_value(Value::Null).map_err(|e| ClientError::Decode {
            service,
            path,
            reason: format!("empty answer: {e}"),
        });
    }
    serde_json::from_slice(answer).map_err(|e| ClientError::Decode {
        service,
        path,
        reason: e.to_string(),
    })
}

fn is_throttled(response: &Response) -> bool {
    response.status == 429
        || (!response.is_success()
            && HuaweiError::parse(response.status, None, &response.body).is_throttling())
}

/// A base URL split into its origin (`https://host:port`) and path prefix (`/proxy`, or
/// empty), the prefix being part of what is signed.
fn split_base(base: &str) -> (&str, &str) {
    let after_scheme = base.find("://").map_or(0, |i| i + 3);
    match base[after_scheme..].find('/') {
        Some(i) => base.split_at(after_scheme + i),
        None => (base, ""),
    }
}

/// `name=value` pairs escaped as the signer escapes them, joined with `&`.
fn encode_query(query: &[(String, String)]) -> String {
    query
        .iter()
        .map(|(k, v)| format!("{}={}", signer::escape(k), signer::escape(v)))
        .collect::<Vec<_>>()
        .join("&")
}

#[derive(Deserialize)]
struct Projects {
    #[serde(default)]
    projects: Vec<IamEntity>,
}

#[derive(Deserialize)]
struct Domains {
    #[serde(default)]
    domains: Vec<IamEntity>,
}

#[derive(Deserialize)]
struct IamEntity {
    id: String,
}

/// A client for one region's APIs. Cheap to clone; clones share the credentials' cache and the
/// looked-up ids.
#[derive(Clone, Debug)]
pub struct Client {
    http: HttpClient,
    endpoints: Endpoints,
    credentials: CredentialsProvider,
    retry: RetryPolicy,
    project_id: std::sync::Arc<OnceCell<String>>,
    domain_id: std::sync::Arc<OnceCell<String>>,
}

impl Client {
    /// A client calling `endpoints` through `http`, signing with `credentials`.
    pub fn new(http: HttpClient, endpoints: Endpoints, credentials: CredentialsProvider) -> Self {
        Self {
            http,
            endpoints,
            credentials,
            retry: RetryPolicy::STANDARD,
            project_id: Default::default(),
            domain_id: Default::default(),
        }
    }

    /// The same client with another retry policy (tests keep backoffs short).
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// The region.
    pub fn region(&self) -> &str {
        self.endpoints.region()
    }

    /// Where the calls go.
    pub fn endpoints(&self) -> &Endpoints {
        &self.endpoints
    }

    /// The credentials the calls are signed with.
    pub fn credentials(&self) -> &CredentialsProvider {
        &self.credentials
    }

    /// The base URL of `service`: IAM at the credentials file's `iam_endpoint` when it names
    /// one, as the SDK's credentials do.
    fn base_url(&self, service: Service) -> String {
        match (service, self.credentials.iam_endpoint()) {
            (Service::Iam, Some(url)) => url.to_string(),
            _ => self.endpoints.url(service),
        }
    }

    /// The region's project id: the settings', else the one IAM has named after the region
    /// (`GET /v3/projects?name=<region>`), looked up once. No project, or several (the SDK
    /// refuses to pick), is an error that says to set `HUAWEICLOUD_SDK_PROJECT_ID`.
    pub async fn project_id(&self) -> Result<String, ClientError> {
        if let Some(id) = self.credentials.project_id() {
            return Ok(id.to_string());
        }
        self.project_id
            .get_or_try_init(|| async {
                let region = self.region().to_string();
                let answer: Projects = self
                    .iam_get("/v3/projects", &[("name".into(), region.clone())])
                    .await?;
                match answer.projects.as_slice() {
                    [one] => Ok(one.id.clone()),
                    [] => Err(ClientError::Config(format!(
                        "IAM has no project named {region:?}: set HUAWEICLOUD_SDK_PROJECT_ID"
                    ))),
                    many => Err(ClientError::Config(format!(
                        "IAM has several projects named {region:?} ({}): set HUAWEICLOUD_SDK_PROJECT_ID to one",
                        many.iter().map(|p| p.id.as_str()).collect::<Vec<_>>().join(", ")
                    ))),
                }
            })
            .await
            .cloned()
    }

    /// The account's domain id: the settings', else the first IAM lists
    /// (`GET /v3/auth/domains`), looked up once.
    pub async fn domain_id(&self) -> Result<String, ClientError> {
        if let Some(id) = self.credentials.domain_id() {
            return Ok(id.to_string());
        }
        self.domain_id
            .get_or_try_init(|| async {
                let answer: Domains = self.iam_get("/v3/auth/domains", &[]).await?;
                answer.domains.into_iter().next().map(|d| d.id).ok_or_else(|| {
                    ClientError::Config(
                        "IAM lists no domain for these credentials (is iam:users:getUser allowed?): set HUAWEICLOUD_SDK_DOMAIN_ID"
                            .into(),
                    )
                })
            })
            .await
            .cloned()
    }

    /// `GET path?query`: the answer read as `T`. Retried on throttling, server errors and lost
    /// connections.
    pub async fn get<T: DeserializeOwned>(
        &self,
        service: Service,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<T, ClientError> {
        self.call(http::Method::GET, service, path, query, None, true)
            .await
    }

    /// `POST path` with a JSON `body`: the answer read as `T`. Retried on throttling only,
    /// which the gateway answers before anything is done: a second `CreateNode` after a lost
    /// answer could make a second node.
    pub async fn post<T: DeserializeOwned>(
        &self,
        service: Service,
        path: &str,
        body: &Value,
    ) -> Result<T, ClientError> {
        self.call(http::Method::POST, service, path, &[], Some(body), false)
            .await
    }

    /// As [`Client::post`], for a call that may be repeated (BSS's price ratings, ECS's tag
    /// action): retried as [`Client::get`] is.
    pub async fn post_idempotent<T: DeserializeOwned>(
        &self,
        service: Service,
        path: &str,
        body: &Value,
    ) -> Result<T, ClientError> {
        self.call(http::Method::POST, service, path, &[], Some(body), true)
            .await
    }

    /// `DELETE path?query`: the answer read as `T` (an empty answer reads as JSON `null`, so
    /// `()`, `Option<_>` and `Value` take it). Retried as [`Client::get`] is: a second delete
    /// finds nothing to delete.
    pub async fn delete<T: DeserializeOwned>(
        &self,
        service: Service,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<T, ClientError> {
        self.call(http::Method::DELETE, service, path, query, None, true)
            .await
    }

    /// Any call: `method` on `path` with `query` and an optional JSON `body`, retried on server
    /// errors and lost connections when `repeatable` (always on throttling).
    pub async fn call<T: DeserializeOwned>(
        &self,
        method: http::Method,
        service: Service,
        path: &str,
        query: &[(&str, String)],
        body: Option<&Value>,
        repeatable: bool,
    ) -> Result<T, ClientError> {
        let path = self.fill_path(path).await?;
        let scope = match service.scope() {
            Scope::Project => Some(("X-Project-Id", self.project_id().await?)),
            Scope::Domain => Some(("X-Domain-Id", self.domain_id().await?)),
            Scope::Unscoped => None,
        };
        let query: Vec<(String, String)> = query
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        let body = body.map(|b| Bytes::from(b.to_string()));
        let answer = self
            .exchange(&method, service, &path, &query, body, scope, repeatable)
            .await?;
        decode(service, path, &answer)
    }

    /// An IAM lookup, made without the ids it may be looking up.
    async fn iam_get<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(String, String)],
    ) -> Result<T, ClientError> {
        let answer = self
            .exchange(
                &http::Method::GET,
                Service::Iam,
                path,
                query,
                None,
                None,
                true,
            )
            .await?;
        decode(Service::Iam, path.to_string(), &answer)
    }

    /// Every item at `items` (`flavors`, `subnets`) of every page of a `limit`/`marker`
    /// listing (ECS's `ListFlavors`, VPC's `ListSubnets`): the `id` of each page's last item is
    /// the next page's `marker`, until a page comes back shorter than `limit`.
    pub async fn list_by_marker(
        &self,
        service: Service,
        path: &str,
        query: &[(&str, String)],
        items: &str,
        limit: u32,
    ) -> Result<Vec<Value>, ClientError> {
        let mut all = Vec::new();
        let mut marker: Option<String> = None;
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..MAX_PAGES {
            let mut page_query: Vec<(&str, String)> = query.to_vec();
            page_query.push(("limit", limit.to_string()));
            if let Some(m) = &marker {
                page_query.push(("marker", m.clone()));
            }
            let page: Value = self.get(service, path, &page_query).await?;
            let found = match page.get(items) {
                Some(Value::Array(found)) => found.clone(),
                _ => Vec::new(),
            };
            let full = found.len() >= limit as usize && !found.is_empty();
            let last_id = found
                .last()
                .and_then(|i| i.get("id"))
                .and_then(Value::as_str)
                .map(str::to_string);
            all.extend(found);
            if !full {
                return Ok(all);
            }
            let next = last_id.ok_or_else(|| ClientError::Decode {
                service,
                path: path.to_string(),
                reason: format!("the last of {items} has no id to page on"),
            })?;
            if !seen.insert(next.clone()) {
                return Err(ClientError::Decode {
                    service,
                    path: path.to_string(),
                    reason: format!("marker {next:?} came back twice"),
                });
            }
            marker = Some(next);
        }
        Err(ClientError::Decode {
            service,
            path: path.to_string(),
            reason: format!("more than {MAX_PAGES} pages"),
        })
    }

    /// The path with `{project_id}` and `{domain_id}` filled in (looked up only when used).
    async fn fill_path(&self, path: &str) -> Result<String, ClientError> {
        if !path.starts_with('/') {
            return Err(ClientError::Config(format!(
                "path {path:?} does not start with /"
            )));
        }
        let mut path = path.to_string();
        if path.contains("{project_id}") {
            path = path.replace("{project_id}", &self.project_id().await?);
        }
        if path.contains("{domain_id}") {
            path = path.replace("{domain_id}", &self.domain_id().await?);
        }
        Ok(path)
    }

    /// One signed call with the `scope` header, retried as `repeatable` allows: the body of a
    /// successful answer, or the error answer read as Huawei's.
    #[allow(clippy::too_many_arguments)]
    async fn exchange(
        &self,
        method: &http::Method,
        service: Service,
        path: &str,
        query: &[(String, String)],
        body: Option<Bytes>,
        scope: Option<(&str, String)>,
        repeatable: bool,
    ) -> Result<Bytes, ClientError> {
        let credentials = self.credentials.get().await?;
        let base = self.base_url(service);
        let (origin, prefix) = split_base(&base);
        let signed_path = format!("{prefix}{path}");
        let encoded_path = signed_path
            .split('/')
            .map(signer::escape)
            .collect::<Vec<_>>()
            .join("/");
        let url = match encode_query(query) {
            q if q.is_empty() => format!("{origin}{encoded_path}"),
            q => format!("{origin}{encoded_path}?{q}"),
        };
        let payload = body.unwrap_or_default();
        let mut headers: Vec<(String, String)> = vec![
            ("User-Agent".into(), USER_AGENT.into()),
            ("Content-Type".into(), JSON_CONTENT_TYPE.into()),
        ];
        if let Some((name, value)) = &scope {
            headers.push((name.to_string(), value.clone()));
        }
        if let Some(token) = &credentials.security_token {
            headers.push(("X-Security-Token".into(), token.clone()));
        }
        let build = || {
            // A fresh date each attempt: the gateway refuses signatures older than 15 minutes.
            let signature = signer::sign(
                &SignableRequest {
                    method: method.as_str(),
                    path: &signed_path,
                    query,
                    headers: &headers,
                    body: &payload,
                },
                &credentials.access_key,
                &credentials.secret_key,
                unix_now(),
            );
            let mut builder = http::Request::builder().method(method.clone()).uri(&url);
            for (name, value) in &headers {
                builder = builder.header(name.as_str(), value.as_str());
            }
            for (name, value) in &signature.headers {
                builder = builder.header(*name, value.as_str());
            }
            builder
                .body(payload.clone())
                .map_err(|e| HttpError::Transport {
                    url: origin.to_string(),
                    reason: e.to_string(),
                })
        };
        let response = self
            .http
            .send_rebuilt_with_retries(self.retry, build, |outcome| match outcome {
                Ok(r) => is_throttled(r) || (repeatable && retryable(r.status)),
                Err(_) => repeatable,
            })
            .await
            .map_err(|e| ClientError::Transport {
                service,
                reason: e.to_string(),
            })?;
        let id = request_id(&response).unwrap_or_default();
        if !response.is_success() {
            let error = HuaweiError::parse(response.status, request_id(&response), &response.body);
            tracing::debug!(
                %service,
                %method,
                path,
                status = response.status,
                code = error.code.as_deref().unwrap_or_default(),
                request_id = id,
                "Huawei Cloud call refused"
            );
            return Err(ClientError::Api { service, error });
        }
        tracing::debug!(
            %service,
            %method,
            path,
            status = response.status,
            request_id = id,
            "Huawei Cloud call"
        );
        Ok(response.body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_split_into_origin_and_prefix() {
        assert_eq!(
            split_base("https://cce.cn-north-4.myhuaweicloud.com"),
            ("https://cce.cn-north-4.myhuaweicloud.com", "")
        );
        assert_eq!(
            split_base("http://127.0.0.1:8080/proxy/cce"),
            ("http://127.0.0.1:8080", "/proxy/cce")
        );
    }

    #[test]
    fn queries_are_escaped_as_signed() {
        let q = vec![
            ("name".to_string(), "cn-north-4".to_string()),
            ("filter".to_string(), "a b/c".to_string()),
        ];
        assert_eq!(encode_query(&q), "name=cn-north-4&filter=a%20b%2Fc");
    }

    #[test]
    fn classifiers_forward_to_the_answer() {
        let api = |status, body: &str| ClientError::Api {
            service: Service::Cce,
            error: HuaweiError::parse(status, Some("req-1"), body.as_bytes()),
        };
        let ice = api(
            409,
            r#"{"error_code":"CCE_CM.0021","error_msg":"[c7.large.2|cn-north-4a] flavor is insufficient in specified az"}"#,
        );
        assert!(ice.is_insufficient_capacity() && !ice.is_not_found() && !ice.is_retryable());
        assert_eq!(ice.code(), Some("CCE_CM.0021"));
        assert_eq!(ice.request_id(), Some("req-1"));
        assert_eq!(ice.status(), Some(409));
        assert_eq!(
            ice.to_string(),
            "CCE: CCE_CM.0021: [c7.large.2|cn-north-4a] flavor is insufficient in specified az (HTTP 409, request id req-1)"
        );
        assert!(api(404, "").is_not_found());
        assert!(api(429, "").is_throttling() && api(503, "").is_retryable());
        let network = api(400, r#"{"error_code":"CCE.01400025","error_msg":"x"}"#);
        assert!(network.is_unsupported_network());
        let transport = ClientError::Transport {
            service: Service::Ecs,
            reason: "connection refused".into(),
        };
        assert!(
            transport.is_retryable() && !transport.is_not_found() && transport.code().is_none()
        );
        assert!(!ClientError::Config("x".into()).is_retryable());
    }
}
