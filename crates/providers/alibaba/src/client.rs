//! RPC-style calls to ECS (`2014-05-26`), VPC (`2016-04-28`) and STS (`2015-04-01`), sent as the
//! current SDKs send them: `POST /` with every parameter in the query, an empty body, and the
//! V3 signature ([`crate::auth::acs3`]) over the common `x-acs-*` headers. The answer is the
//! JSON body; an error answer becomes [`AlibabaError::Api`] with Alibaba's `Code`, `Message` and
//! `RequestId`.
//!
//! ROA calls to ACK (CS, `2015-12-15`) — [`Client::roa`], [`Client::roa_text`] — carry the
//! method and resource path of the API (`GET /clusters/{ClusterId}`), their parameters in the
//! query, a JSON body when the API takes one (`content-type` signed with the rest), and the
//! same signature over the path, the query and the body's SHA-256. Their error answers use
//! lower-case names (`code`, `message`, `requestId`), which [`parse_error`] reads too.
//!
//! Throttling (`Throttling*` codes, HTTP 429) is retried with the shared backoff, each attempt
//! signed afresh; so are server errors and lost connections, except by
//! [`Client::call_once`], for a call a second copy of which could do harm (ROA calls are the
//! provider's reads of ACK, retried as [`Client::call`]). Mutating ECS calls
//! that carry a `ClientToken` are idempotent on it and may use [`Client::call`].

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use karpenter_cloudprovider::http::{HttpClient, HttpError, Response, RetryPolicy, retryable};
use serde_json::Value;

use crate::auth::acs3::{self, SignableRequest};
use crate::auth::{CredentialsError, CredentialsProvider, percent_encode};
use crate::endpoint::{Endpoints, Product};
use crate::errors;
use crate::nonce::nonce;

/// The `user-agent` the calls carry.
pub const USER_AGENT: &str = concat!("karpenter-rs/", env!("CARGO_PKG_VERSION"));

/// The `content-type` of a ROA call's JSON body, as the SDKs send it.
pub const JSON_CONTENT_TYPE: &str = "application/json; charset=utf-8";

/// The most pages a listing follows: a guard against a service that never stops answering
/// with a next token.
pub const MAX_PAGES: usize = 1000;

/// Why an Alibaba Cloud call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AlibabaError {
    /// The service answered with an error.
    #[error("{code}: {message} (RequestId {request_id}, HTTP {status})")]
    Api {
        /// Alibaba's error code (`InvalidInstanceId.NotFound`, `OperationDenied.NoStock`, …).
        code: String,
        /// Alibaba's message.
        message: String,
        /// The request's id, which Alibaba's support asks for.
        request_id: String,
        /// The HTTP status.
        status: u16,
    },
    /// No credentials.
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
    /// No answer.
    #[error("{0}")]
    Transport(String),
    /// An answer that could not be read.
    #[error("unreadable answer to {action}: {reason}")]
    Parse {
        /// The call.
        action: String,
        /// What was wrong.
        reason: String,
    },
}

impl AlibabaError {
    /// Alibaba's error code, when it gave one.
    pub fn code(&self) -> Option<&str> {
        match self {
            AlibabaError::Api { code, .. } => Some(code),
            _ => None,
        }
    }

    /// The request id of an error answer.
    pub fn request_id(&self) -> Option<&str> {
        match self {
            AlibabaError::Api { request_id, .. } => Some(request_id),
            _ => None,
        }
    }

    /// The resource does not exist: a `…NotFound` code, or HTTP 404 (the cloudpilot-ai
    /// provider's test), unless the code is about the request itself
    /// ([`errors::NOT_A_MISSING_RESOURCE`]).
    pub fn is_not_found(&self) -> bool {
        match self {
            AlibabaError::Api { code, status, .. } => {
                !errors::is_request_error(code) && (errors::is_not_found(code) || *status == 404)
            }
            _ => false,
        }
    }

    /// No capacity for the offering ([`errors::INSUFFICIENT_CAPACITY_CODES`]).
    pub fn is_insufficient_capacity(&self) -> bool {
        self.code().is_some_and(errors::is_insufficient_capacity)
    }

    /// An account quota is exhausted.
    pub fn is_quota(&self) -> bool {
        self.code().is_some_and(errors::is_quota)
    }

    /// Throttled.
    pub fn is_throttling(&self) -> bool {
        matches!(self, AlibabaError::Api { status: 429, .. })
            || self.code().is_some_and(errors::is_throttling)
    }
}

/// Alibaba's error body, `{"RequestId", "HostId", "Code", "Message", "Recommend"}` (the SDKs
/// also accept the lower-case names some gateways use).
pub fn parse_error(status: u16, body: &[u8]) -> AlibabaError {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let text = |upper: &str, lower: &str| {
        v.get(upper)
            .or_else(|| v.get(lower))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    AlibabaError::Api {
        code: text("Code", "code").unwrap_or_else(|| format!("HTTP{status}")),
        message: text("Message", "message")
            .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned()),
        request_id: text("RequestId", "requestId").unwrap_or_default(),
        status,
    }
}

/// A call's parameters, in order, with RPC's flattening of lists (`Name.1`, `Name.2`, …).
/// `Debug` shows the names only: values can be passwords or user data.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Params(Vec<(String, String)>);

impl std::fmt::Debug for Params {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|(k, _)| k))
            .finish()
    }
}

impl Params {
    /// No parameters.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `name` (replacing an earlier value).
    pub fn set(&mut self, name: impl Into<String>, value: impl Into<String>) {
        let name = name.into();
        let value = value.into();
        match self.0.iter_mut().find(|(k, _)| *k == name) {
            Some(slot) => slot.1 = value,
            None => self.0.push((name, value)),
        }
    }

    /// The same parameters with `name` set.
    pub fn with(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.set(name, value);
        self
    }

    /// The same parameters with `items` as the list `name.1`, `name.2`, … (RPC's `RepeatList`).
    pub fn with_list<I, S>(mut self, name: &str, items: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        for (i, item) in items.into_iter().enumerate() {
            self.set(format!("{name}.{}", i + 1), item);
        }
        self
    }

    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The parameters, in order.
    pub fn as_slice(&self) -> &[(String, String)] {
        &self.0
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Params {
    fn from_iter<T: IntoIterator<Item = (K, V)>>(iter: T) -> Self {
        let mut params = Params::new();
        for (k, v) in iter {
            params.set(k, v);
        }
        params
    }
}

/// The value at a dotted path (`Instances.Instance`) of a JSON answer.
pub fn at_path<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .filter(|p| !p.is_empty())
        .try_fold(value, |v, key| v.get(key))
}

/// An answer (or one item of it) read as `T`; a shape that does not fit is `Parse`, naming
/// the action.
pub fn parse<T: serde::de::DeserializeOwned>(
    action: &str,
    value: Value,
) -> Result<T, AlibabaError> {
    serde_json::from_value(value).map_err(|e| AlibabaError::Parse {
        action: action.to_string(),
        reason: e.to_string(),
    })
}

fn items_at(page: &Value, path: &str) -> Vec<Value> {
    match at_path(page, path) {
        Some(Value::Array(items)) => items.clone(),
        _ => Vec::new(),
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A client for the RPC APIs of one region. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Client {
    http: HttpClient,
    endpoints: Endpoints,
    credentials: CredentialsProvider,
    retry: RetryPolicy,
}

impl Client {
    /// A client calling `endpoints` through `http`, signing with `credentials`.
    pub fn new(http: HttpClient, endpoints: Endpoints, credentials: CredentialsProvider) -> Self {
        Self {
            http,
            endpoints,
            credentials,
            retry: RetryPolicy::STANDARD,
        }
    }

    /// The same client with another retry policy (tests keep backoffs short).
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Where the calls go.
    pub fn endpoints(&self) -> &Endpoints {
        &self.endpoints
    }

    /// The credentials the calls are signed with.
    pub fn credentials(&self) -> &CredentialsProvider {
        &self.credentials
    }

    /// Calls `action` of `product` with `params`: the answer's JSON. Retried on throttling,
    /// server errors and lost connections.
    pub async fn call(
        &self,
        product: Product,
        action: &str,
        params: &Params,
    ) -> Result<Value, AlibabaError> {
        self.send(product, action, params, true).await
    }

    /// As [`Client::call`], but retried on throttling only, which Alibaba answers before doing
    /// anything: for a call that is not idempotent (no `ClientToken`).
    pub async fn call_once(
        &self,
        product: Product,
        action: &str,
        params: &Params,
    ) -> Result<Value, AlibabaError> {
        self.send(product, action, params, false).await
    }

    async fn send(
        &self,
        product: Product,
        action: &str,
        params: &Params,
        repeatable: bool,
    ) -> Result<Value, AlibabaError> {
        let body = self
            .exchange(
                product,
                action,
                &http::Method::POST,
                "/",
                params.as_slice(),
                None,
                repeatable,
            )
            .await?;
        parse_json(action, &body)
    }

    /// Calls the ROA `action` of `product` (ACK's `DescribeClusterDetail`, …): `method` on
    /// `path` (not yet encoded: each segment is encoded on the wire and in the signature) with
    /// `query`, and `body` sent as JSON when given. The answer's JSON (`null` for an empty
    /// answer). Retried as [`Client::call`] is.
    pub async fn roa(
        &self,
        product: Product,
        action: &str,
        method: http::Method,
        path: &str,
        query: &Params,
        body: Option<&Value>,
    ) -> Result<Value, AlibabaError> {
        let answer = self
            .roa_bytes(product, action, method, path, query, body)
            .await?;
        parse_json(action, &answer)
    }

    /// As [`Client::roa`], for an API whose answer is text rather than JSON (ACK's
    /// `DescribeClusterAttachScripts`, whose SDK reads the body as a string): the body as it
    /// came, or the string it holds when it is a JSON string.
    pub async fn roa_text(
        &self,
        product: Product,
        action: &str,
        method: http::Method,
        path: &str,
        query: &Params,
        body: Option<&Value>,
    ) -> Result<String, AlibabaError> {
        let answer = self
            .roa_bytes(product, action, method, path, query, body)
            .await?;
        let text = String::from_utf8(answer.to_vec()).map_err(|e| AlibabaError::Parse {
            action: action.to_string(),
            reason: e.to_string(),
        })?;
        // Gateways differ in whether a string answer is quoted as JSON; a quoted one would end
        // up verbatim in a shell script.
        if text.trim_start().starts_with('"')
            && let Ok(Value::String(unquoted)) = serde_json::from_str::<Value>(&text)
        {
            return Ok(unquoted);
        }
        Ok(text)
    }

    async fn roa_bytes(
        &self,
        product: Product,
        action: &str,
        method: http::Method,
        path: &str,
        query: &Params,
        body: Option<&Value>,
    ) -> Result<Bytes, AlibabaError> {
        if !path.starts_with('/') {
            return Err(AlibabaError::Parse {
                action: action.to_string(),
                reason: format!("ROA path {path:?} does not start with /"),
            });
        }
        let body = body.map(|b| Bytes::from(b.to_string()));
        self.exchange(product, action, &method, path, query.as_slice(), body, true)
            .await
    }

    /// One signed call, retried as `repeatable` allows: the body of a successful answer, or
    /// the error answer read as Alibaba's. `path` is the unencoded resource path; a `body` is
    /// JSON.
    #[allow(clippy::too_many_arguments)]
    async fn exchange(
        &self,
        product: Product,
        action: &str,
        method: &http::Method,
        path: &str,
        query: &[(String, String)],
        body: Option<Bytes>,
        repeatable: bool,
    ) -> Result<Bytes, AlibabaError> {
        let credentials = self.credentials.get().await?;
        let base = self.endpoints.url(product);
        let host = self.endpoints.host(product);
        let encoded_path = acs3::canonical_uri(path);
        let encoded_query = query
            .iter()
            .map(|(k, v)| format!("{}={}", percent_encode(k), percent_encode(v)))
            .collect::<Vec<_>>()
            .join("&");
        let url = if encoded_query.is_empty() {
            format!("{base}{encoded_path}")
        } else {
            format!("{base}{encoded_path}?{encoded_query}")
        };
        let payload = body.clone().unwrap_or_default();
        let hashed_payload = match &body {
            Some(b) => acs3::hashed_payload(b),
            None => acs3::EMPTY_PAYLOAD_SHA256.to_string(),
        };
        let build = || {
            // A fresh date and nonce each attempt: Alibaba refuses a nonce it has seen.
            let mut headers = acs3::headers_to_sign(
                &host,
                action,
                product.version(),
                now(),
                &nonce(),
                &hashed_payload,
                &credentials,
            );
            if body.is_some() {
                // Signed along with the rest, as the SDKs sign it.
                headers.push(("content-type".to_string(), JSON_CONTENT_TYPE.to_string()));
            }
            let signature = acs3::sign(
                &SignableRequest {
                    method: method.as_str(),
                    path,
                    query,
                    headers: &headers,
                    hashed_payload: &hashed_payload,
                },
                &credentials,
            );
            let mut builder = http::Request::builder()
                .method(method.clone())
                .uri(&url)
                .header("accept", "application/json")
                .header("user-agent", USER_AGENT)
                .header("authorization", signature.authorization);
            for (name, value) in &headers {
                // hyper writes `host` from the URL, which is what was signed.
                if name != "host" {
                    builder = builder.header(name.as_str(), value.as_str());
                }
            }
            builder
                .body(payload.clone())
                .map_err(|e| HttpError::Transport {
                    url: base.clone(),
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
            .map_err(|e| AlibabaError::Transport(format!("{product} {action}: {e}")))?;
        if !response.is_success() {
            let error = parse_error(response.status, &response.body);
            tracing::debug!(
                %product,
                action,
                code = error.code().unwrap_or_default(),
                request_id = error.request_id().unwrap_or_default(),
                "Alibaba Cloud call failed"
            );
            return Err(error);
        }
        Ok(response.body)
    }

    /// Every item at `items` (a dotted path such as `VSwitches.VSwitch`) of every page of a
    /// `PageNumber`/`PageSize` listing (VPC's `DescribeVSwitches`, ECS's
    /// `DescribeSecurityGroups`): pages are asked for until one comes back short or empty, or
    /// `TotalCount` items are in.
    pub async fn pages(
        &self,
        product: Product,
        action: &str,
        params: &Params,
        items: &str,
        page_size: u32,
    ) -> Result<Vec<Value>, AlibabaError> {
        let mut all = Vec::new();
        for page_number in 1..=MAX_PAGES {
            let page = self
                .call(
                    product,
                    action,
                    &params
                        .clone()
                        .with("PageNumber", page_number.to_string())
                        .with("PageSize", page_size.to_string()),
                )
                .await?;
            let found = items_at(&page, items);
            let short = found.len() < page_size as usize;
            all.extend(found);
            let total = page.get("TotalCount").and_then(Value::as_u64);
            if short || total.is_some_and(|t| all.len() as u64 >= t) {
                return Ok(all);
            }
        }
        Err(AlibabaError::Parse {
            action: action.into(),
            reason: format!("more than {MAX_PAGES} pages"),
        })
    }

    /// Every item at `items` of every page of a `NextToken` listing (ECS's
    /// `DescribeInstances`, `DescribeInstanceTypes`): the token of each answer is sent back
    /// until an answer has none. `max_results` sets `MaxResults` when given.
    pub async fn pages_by_token(
        &self,
        product: Product,
        action: &str,
        params: &Params,
        items: &str,
        max_results: Option<u32>,
    ) -> Result<Vec<Value>, AlibabaError> {
        let mut all = Vec::new();
        let mut params = params.clone();
        if let Some(max) = max_results {
            params.set("MaxResults", max.to_string());
        }
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..MAX_PAGES {
            let page = self.call(product, action, &params).await?;
            all.extend(items_at(&page, items));
            match page.get("NextToken").and_then(Value::as_str) {
                Some(token) if !token.is_empty() => {
                    if !seen.insert(token.to_string()) {
                        return Err(AlibabaError::Parse {
                            action: action.into(),
                            reason: format!("NextToken {token:?} came back twice"),
                        });
                    }
                    params.set("NextToken", token);
                }
                _ => return Ok(all),
            }
        }
        Err(AlibabaError::Parse {
            action: action.into(),
            reason: format!("more than {MAX_PAGES} pages"),
        })
    }
}

/// A successful answer's JSON; `null` for an empty body.
fn parse_json(action: &str, body: &[u8]) -> Result<Value, AlibabaError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    serde_json::from_slice(body).map_err(|e| AlibabaError::Parse {
        action: action.to_string(),
        reason: e.to_string(),
    })
}

fn is_throttled(response: &Response) -> bool {
    response.status == 429
        || (!response.is_success()
            && parse_error(response.status, &response.body)
                .code()
                .is_some_and(errors::is_throttling))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_answers_carry_code_message_and_request_id() {
        let e = parse_error(
            404,
            br#"{"RequestId":"473469C7-AA6F-4DC5-B3DB-A3DC0DE3C83E","HostId":"ecs.cn-hangzhou.aliyuncs.com","Code":"InvalidInstanceId.NotFound","Message":"The specified InstanceId does not exist.","Recommend":"https://api.aliyun.com/troubleshoot?q=InvalidInstanceId.NotFound"}"#,
        );
        assert_eq!(e.code(), Some("InvalidInstanceId.NotFound"));
        assert_eq!(e.request_id(), Some("473469C7-AA6F-4DC5-B3DB-A3DC0DE3C83E"));
        assert!(e.is_not_found() && !e.is_insufficient_capacity());
        assert_eq!(
            e.to_string(),
            "InvalidInstanceId.NotFound: The specified InstanceId does not exist. (RequestId 473469C7-AA6F-4DC5-B3DB-A3DC0DE3C83E, HTTP 404)"
        );
        let stock = parse_error(
            403,
            br#"{"RequestId":"r","Code":"OperationDenied.NoStock","Message":"The requested resource is sold out in the specified zone; try other types of resources or other regions and zones."}"#,
        );
        assert!(stock.is_insufficient_capacity() && !stock.is_not_found() && !stock.is_quota());
        let throttled = parse_error(
            400,
            br#"{"RequestId":"r","Code":"Throttling.User","Message":"Request was denied due to user flow control."}"#,
        );
        assert!(throttled.is_throttling());
        let bare = parse_error(502, b"<html>Bad Gateway</html>");
        assert_eq!(bare.code(), Some("HTTP502"));
        assert!(bare.to_string().contains("Bad Gateway"));
        let unknown_key = parse_error(
            404,
            br#"{"RequestId":"r","Code":"InvalidAccessKeyId.NotFound","Message":"Specified access key is not found."}"#,
        );
        assert!(
            !unknown_key.is_not_found(),
            "an unknown key is not a missing resource"
        );
    }

    #[test]
    fn params_flatten_lists_and_keep_values_out_of_debug() {
        let p = Params::new()
            .with("RegionId", "cn-hangzhou")
            .with_list("SecurityGroupIds", ["sg-1", "sg-2"])
            .with("LaunchConfiguration.Password", "hunter2")
            .with("RegionId", "cn-beijing");
        assert_eq!(p.get("RegionId"), Some("cn-beijing"));
        assert_eq!(p.get("SecurityGroupIds.2"), Some("sg-2"));
        assert_eq!(p.as_slice().len(), 4);
        let shown = format!("{p:?}");
        assert!(shown.contains("LaunchConfiguration.Password") && !shown.contains("hunter2"));
        let from: Params = [("a", "1"), ("b", "2")].into_iter().collect();
        assert_eq!(from.get("b"), Some("2"));
    }

    #[test]
    fn paths_into_answers() {
        let v: Value = serde_json::json!({"Instances": {"Instance": [{"InstanceId": "i-1"}]}});
        assert_eq!(items_at(&v, "Instances.Instance").len(), 1);
        assert!(items_at(&v, "Instances.Missing").is_empty());
        assert_eq!(
            at_path(&v, "Instances.Instance").map(Value::is_array),
            Some(true)
        );
    }
}
