//! Azure Resource Manager over REST: bearer-authenticated JSON, `api-version` per resource
//! provider, ARM's error bodies turned into [`ArmError::Api`], and long-running operations
//! (`Azure-AsyncOperation` or `Location`) polled to their end. Every ARM verb used here is
//! idempotent (PUT by name, GET, DELETE, the Resource Graph query), so each request is retried
//! on throttling and server errors.

use std::time::Duration;

use bytes::Bytes;
use karpenter_cloudprovider::http::{HttpClient, Response, RetryPolicy, retry_after};
use serde_json::Value;

use crate::auth::{AuthError, TokenSource};

/// Why an ARM call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ArmError {
    /// ARM answered with an error (`ResourceNotFound`, `SkuNotAvailable`, `QuotaExceeded`…),
    /// or a long-running operation ended with one.
    #[error("{code}: {message}")]
    Api {
        /// ARM's error code.
        code: String,
        /// ARM's message.
        message: String,
        /// The HTTP status (0 for a failed long-running operation).
        status: u16,
    },
    /// No token.
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// No answer.
    #[error("{0}")]
    Transport(String),
    /// An answer that could not be read.
    #[error("unreadable answer: {0}")]
    Parse(String),
}

impl ArmError {
    /// ARM's error code, when ARM gave one.
    pub fn code(&self) -> Option<&str> {
        match self {
            ArmError::Api { code, .. } => Some(code),
            _ => None,
        }
    }

    /// The resource does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, ArmError::Api { status: 404, .. })
            || matches!(self.code(), Some("ResourceNotFound" | "NotFound"))
    }
}

/// ARM's error body, `{"error": {"code", "message"}}` (sometimes without the envelope).
pub fn parse_error(status: u16, body: &[u8]) -> ArmError {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let e = v.get("error").unwrap_or(&v);
    let text = |k: &str| e.get(k).and_then(Value::as_str).map(str::to_string);
    ArmError::Api {
        code: text("code").unwrap_or_else(|| format!("HTTP{status}")),
        message: text("message")
            .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(300)]).into()),
        status,
    }
}

/// An ARM client for one cloud.
#[derive(Clone, Debug)]
pub struct Arm {
    http: HttpClient,
    endpoint: String,
    tokens: TokenSource,
    /// How long to wait between polls of a long-running operation when ARM does not say.
    pub poll_every: Duration,
    retry: RetryPolicy,
}

impl Arm {
    /// A client for `endpoint` (ARM's URL for the cloud), authenticated by `tokens`.
    pub fn new(http: HttpClient, endpoint: impl Into<String>, tokens: TokenSource) -> Self {
        Self {
            http,
            endpoint: endpoint.into().trim_end_matches('/').to_string(),
            tokens,
            poll_every: Duration::from_secs(5),
            retry: RetryPolicy::STANDARD,
        }
    }

    /// The same client with another retry policy (tests keep backoffs short).
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    fn url(&self, path: &str, api_version: &str, query: &[(&str, &str)]) -> String {
        let mut q = form_urlencoded::Serializer::new(String::new());
        q.append_pair("api-version", api_version);
        for (k, v) in query {
            q.append_pair(k, v);
        }
        format!("{}{path}?{}", self.endpoint, q.finish())
    }

    async fn send(
        &self,
        method: &str,
        url: &str,
        body: Option<&Value>,
    ) -> Result<Response, ArmError> {
        let token = self.tokens.token().await?;
        let mut builder = http::Request::builder()
            .method(method)
            .uri(url)
            .header("authorization", format!("Bearer {token}"));
        let bytes = match body {
            Some(b) => {
                builder = builder.header("content-type", "application/json");
                Bytes::from(serde_json::to_vec(b).map_err(|e| ArmError::Parse(e.to_string()))?)
            }
            None => Bytes::new(),
        };
        let request = builder
            .body(bytes)
            .map_err(|e| ArmError::Transport(format!("{url}: {e}")))?;
        self.http
            .send_with_retries(&request, self.retry)
            .await
            .map_err(|e| ArmError::Transport(e.to_string()))
    }

    fn json(response: &Response) -> Result<Value, ArmError> {
        if response.body.is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&response.body).map_err(|e| ArmError::Parse(e.to_string()))
    }

    /// `GET path`: the resource.
    pub async fn get(&self, path: &str, api_version: &str) -> Result<Value, ArmError> {
        let response = self
            .send("GET", &self.url(path, api_version, &[]), None)
            .await?;
        if !response.is_success() {
            return Err(parse_error(response.status, &response.body));
        }
        Self::json(&response)
    }

    /// `GET path` of a collection with `query`, following `nextLink` to the last page: every
    /// item of every page's `value`. A `nextLink` elsewhere than this client's endpoint is
    /// refused rather than sent the token.
    pub async fn list(
        &self,
        path: &str,
        api_version: &str,
        query: &[(&str, &str)],
    ) -> Result<Vec<Value>, ArmError> {
        let mut items = Vec::new();
        let mut url = self.url(path, api_version, query);
        loop {
            let response = self.send("GET", &url, None).await?;
            if !response.is_success() {
                return Err(parse_error(response.status, &response.body));
            }
            let mut page = Self::json(&response)?;
            if let Some(Value::Array(values)) = page.get_mut("value").map(Value::take) {
                items.extend(values);
            }
            match page.get("nextLink").and_then(Value::as_str) {
                Some(next) if !next.is_empty() => {
                    if !next.starts_with(&format!("{}/", self.endpoint)) {
                        return Err(ArmError::Transport(format!(
                            "{path}: nextLink {next:?} leaves {}",
                            self.endpoint
                        )));
                    }
                    // ARM's links carry their api-version; some examples' do not.
                    url = if next.contains("api-version=") {
                        next.to_string()
                    } else {
                        let sep = if next.contains('?') { '&' } else { '?' };
                        format!("{next}{sep}api-version={api_version}")
                    };
                }
                _ => return Ok(items),
            }
        }
    }

    /// `PUT path`, waiting for the operation to finish: the resource as it is then.
    pub async fn put(
        &self,
        path: &str,
        api_version: &str,
        body: &Value,
    ) -> Result<Value, ArmError> {
        let url = self.url(path, api_version, &[]);
        let response = self.send("PUT", &url, Some(body)).await?;
        if !response.is_success() {
            return Err(parse_error(response.status, &response.body));
        }
        if self.await_operation(&response).await? {
            return self.get(path, api_version).await;
        }
        Self::json(&response)
    }

    /// `DELETE path` (with `query`), waiting for the operation to finish. A resource already
    /// gone is an [`ArmError::is_not_found`] error, so callers can tell.
    pub async fn delete(
        &self,
        path: &str,
        api_version: &str,
        query: &[(&str, &str)],
    ) -> Result<(), ArmError> {
        let response = self
            .send("DELETE", &self.url(path, api_version, query), None)
            .await?;
        // ARM answers a DELETE of nothing with 204, which says nothing was there.
        if response.status == 204 {
            return Err(ArmError::Api {
                code: "ResourceNotFound".into(),
                message: format!("{path} does not exist"),
                status: 404,
            });
        }
        if !response.is_success() {
            return Err(parse_error(response.status, &response.body));
        }
        self.await_operation(&response).await.map(|_| ())
    }

    /// `POST path` with `body` (queries such as Resource Graph's): the answer.
    pub async fn post(
        &self,
        path: &str,
        api_version: &str,
        body: &Value,
    ) -> Result<Value, ArmError> {
        let response = self
            .send("POST", &self.url(path, api_version, &[]), Some(body))
            .await?;
        if !response.is_success() {
            return Err(parse_error(response.status, &response.body));
        }
        Self::json(&response)
    }

    /// Polls the long-running operation `response` started, if it started one; true when there
    /// was one and it succeeded, an error when it failed.
    async fn await_operation(&self, response: &Response) -> Result<bool, ArmError> {
        if let Some(url) = response.header("azure-asyncoperation").map(str::to_string) {
            let mut wait = retry_after(&response.headers).unwrap_or(self.poll_every);
            loop {
                tokio::time::sleep(wait).await;
                let poll = self.send("GET", &url, None).await?;
                if !poll.is_success() {
                    return Err(parse_error(poll.status, &poll.body));
                }
                let status = Self::json(&poll)?;
                match status.get("status").and_then(Value::as_str) {
                    Some("Succeeded") => return Ok(true),
                    Some("Failed" | "Canceled") => {
                        let mut err = parse_error(0, &poll.body);
                        if let ArmError::Api { code, .. } = &mut err
                            && code == "HTTP0"
                        {
                            *code = "OperationFailed".into();
                        }
                        return Err(err);
                    }
                    _ => wait = retry_after(&poll.headers).unwrap_or(self.poll_every),
                }
            }
        }
        if response.status == 202
            && let Some(url) = response.header("location").map(str::to_string)
        {
            let mut wait = retry_after(&response.headers).unwrap_or(self.poll_every);
            loop {
                tokio::time::sleep(wait).await;
                let poll = self.send("GET", &url, None).await?;
                match poll.status {
                    202 => wait = retry_after(&poll.headers).unwrap_or(self.poll_every),
                    s if (200..300).contains(&s) => return Ok(true),
                    s => return Err(parse_error(s, &poll.body)),
                }
            }
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arm_errors_name_their_code() {
        let e = parse_error(
            409,
            br#"{"error":{"code":"SkuNotAvailable","message":"The requested VM size Standard_D2s_v3 is currently not available in location 'eastus'."}}"#,
        );
        assert_eq!(e.code(), Some("SkuNotAvailable"));
        assert!(!e.is_not_found());
        let gone = parse_error(
            404,
            br#"{"error":{"code":"ResourceNotFound","message":"The Resource 'Microsoft.Compute/virtualMachines/aks-x' under resource group 'rg' was not found."}}"#,
        );
        assert!(gone.is_not_found());
        let bare = parse_error(500, b"upstream connect error");
        assert_eq!(bare.code(), Some("HTTP500"));
        assert!(bare.to_string().contains("upstream connect error"));
    }
}
