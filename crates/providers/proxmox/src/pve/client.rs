//! The client for one Proxmox VE cluster, over the providers' shared HTTP client.
//!
//! Calls go to `<url><path>`, the config's `url` being the API's base
//! (`https://host:8006/api2/json`). Reads put their parameters in the query string, writes in a
//! form-encoded body; every answer is `{"data": …}` and comes back unwrapped.
//!
//! Logging in is by API token (`Authorization: PVEAPIToken=user@realm!id=secret`, nothing more
//! to do) or by ticket: `POST /access/ticket` with the user and password gives a ticket, sent
//! as the `PVEAuthCookie` cookie, and a CSRF token, sent as `CSRFPreventionToken` with every
//! write. A ticket lives two hours; the client logs in again once it is [`TICKET_LIFETIME`] less
//! [`TICKET_RENEWAL`] old (by its [`Clock`], so a test can age it), and once more when a call is
//! refused with 401 (a restarted or re-keyed cluster), which is safe to resend: nothing was done.
//!
//! Reads are retried with the shared backoff on server errors (but not on PVE's "does not
//! exist", which will not change) and lost connections. Writes never are: a second clone after
//! a lost answer would be a second VM. Secrets never reach a log or a `Debug` output; the logs
//! have the method, the path and the status, not the query, headers or bodies.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use karpenter_cloudprovider::http::{HttpClient, HttpError, Response, RetryPolicy};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::time::Instant;

use super::config::Credentials;
use super::error::{ApiError, PveError};
use super::form::{Multipart, Params};
use super::types::TaskStatus;
use super::upid::Upid;

/// The `User-Agent` of every call.
pub const USER_AGENT: &str = concat!("karpenter-rs/", env!("CARGO_PKG_VERSION"));

/// How long a PVE ticket is valid.
pub const TICKET_LIFETIME: Duration = Duration::from_secs(2 * 60 * 60);

/// How long before its end a ticket is replaced.
pub const TICKET_RENEWAL: Duration = Duration::from_secs(15 * 60);

/// How often a task's status is asked by default (go-proxmox's interval).
pub const DEFAULT_TASK_POLL: Duration = Duration::from_secs(1);

/// The time a ticket's age is measured with: tokio's clock by default.
pub type Clock = Arc<dyn Fn() -> Instant + Send + Sync>;

/// A ticket login.
#[derive(Clone)]
struct Session {
    ticket: String,
    csrf: String,
    issued: Instant,
}

/// The answer of `POST /access/ticket`.
#[derive(serde::Deserialize)]
struct TicketAnswer {
    ticket: String,
    #[serde(rename = "CSRFPreventionToken")]
    csrf_prevention_token: String,
}

/// What a call sends.
enum Payload {
    None,
    Form(Params),
    Multipart(Multipart),
}

/// A client for one cluster. Cheap to clone; clones share the login and the VM ids handed out.
#[derive(Clone)]
pub struct PveClient {
    http: HttpClient,
    base: Arc<str>,
    credentials: Arc<Credentials>,
    session: Arc<tokio::sync::Mutex<Option<Session>>>,
    retry: RetryPolicy,
    clock: Clock,
    /// VM ids [`PveClient::next_id_from`] handed out, and when: not handed out again for a
    /// while, as the clone that takes one may not have started yet.
    pub(super) handed_out: Arc<std::sync::Mutex<HashMap<u32, Instant>>>,
}

impl std::fmt::Debug for PveClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PveClient")
            .field("url", &self.base)
            .field("credentials", &self.credentials)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

/// The reason of a transport error, without its URL (a query is nobody's business in a log).
fn transport_reason(e: &HttpError) -> String {
    match e {
        HttpError::Transport { reason, .. } => reason.clone(),
        HttpError::TimedOut(_) => "timed out".to_string(),
    }
}

/// A GET's answer worth another try: a server error that may pass. PVE's "does not exist" is a
/// 500 too, and will not pass.
fn worth_retrying(response: &Response) -> bool {
    response.status >= 500
        && response.status != 501
        && !ApiError::parse(response.status, response.reason.as_deref(), &response.body)
            .is_not_found()
}

/// `{"data": …}` read as `T`; no body or no `data` is null.
fn unwrap_data<T: DeserializeOwned>(method: &str, path: &str, body: &[u8]) -> Result<T, PveError> {
    let decode = |reason: String| PveError::Decode {
        method: method.to_string(),
        path: path.to_string(),
        reason,
    };
    let data = if body.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        match serde_json::from_slice::<Value>(body).map_err(|e| decode(e.to_string()))? {
            Value::Object(mut o) => o.remove("data").unwrap_or(Value::Null),
            _ => return Err(decode("not a JSON object".to_string())),
        }
    };
    serde_json::from_value(data).map_err(|e| decode(e.to_string()))
}

impl PveClient {
    /// A client for the API at `url` (`https://host:8006/api2/json`), logging in with
    /// `credentials`, calling through `http`.
    pub fn new(url: &str, credentials: Credentials, http: HttpClient) -> Result<Self, PveError> {
        let base = url.trim_end_matches('/');
        let uri: http::Uri = base
            .parse()
            .map_err(|e| PveError::Request(format!("url {base:?}: {e}")))?;
        if !matches!(uri.scheme_str(), Some("https" | "http")) || uri.host().is_none() {
            return Err(PveError::Request(format!(
                "url {base:?}: not an http(s) URL with a host"
            )));
        }
        Ok(Self {
            http,
            base: base.into(),
            credentials: Arc::new(credentials),
            session: Default::default(),
            retry: RetryPolicy::STANDARD,
            clock: Arc::new(Instant::now),
            handed_out: Default::default(),
        })
    }

    /// The same client with another retry policy for reads (tests keep backoffs short).
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// The same client measuring a ticket's age (and a handed-out id's) with `clock`.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The API's base URL.
    pub fn url(&self) -> &str {
        &self.base
    }

    /// How the client logs in.
    pub fn credentials(&self) -> &Credentials {
        &self.credentials
    }

    pub(super) fn now(&self) -> Instant {
        (self.clock)()
    }

    /// `GET path?query`, the answer's `data` read as `T`; retried on server errors and lost
    /// connections.
    pub async fn get<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &Params,
    ) -> Result<T, PveError> {
        self.call(http::Method::GET, path, query, Payload::None)
            .await
    }

    /// `POST path` with a form body; never retried.
    pub async fn post<T: DeserializeOwned>(&self, path: &str, body: Params) -> Result<T, PveError> {
        self.call(
            http::Method::POST,
            path,
            &Params::new(),
            Payload::Form(body),
        )
        .await
    }

    /// `PUT path` with a form body; never retried.
    pub async fn put<T: DeserializeOwned>(&self, path: &str, body: Params) -> Result<T, PveError> {
        self.call(http::Method::PUT, path, &Params::new(), Payload::Form(body))
            .await
    }

    /// `DELETE path?query`; never retried.
    pub async fn delete<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &Params,
    ) -> Result<T, PveError> {
        self.call(http::Method::DELETE, path, query, Payload::None)
            .await
    }

    /// `POST path` with a multipart body (an upload); never retried.
    pub async fn post_multipart<T: DeserializeOwned>(
        &self,
        path: &str,
        body: Multipart,
    ) -> Result<T, PveError> {
        self.call(
            http::Method::POST,
            path,
            &Params::new(),
            Payload::Multipart(body),
        )
        .await
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: http::Method,
        path: &str,
        query: &Params,
        payload: Payload,
    ) -> Result<T, PveError> {
        let body = self.exchange(&method, path, query, &payload).await?;
        unwrap_data(method.as_str(), path, &body)
    }

    /// The current ticket, logging in when there is none or it is about to end.
    async fn session(&self) -> Result<Session, PveError> {
        let mut current = self.session.lock().await;
        if let Some(s) = current.as_ref()
            && self.now().saturating_duration_since(s.issued) < TICKET_LIFETIME - TICKET_RENEWAL
        {
            return Ok(s.clone());
        }
        let fresh = self.login().await?;
        *current = Some(fresh.clone());
        Ok(fresh)
    }

    /// Forgets `stale` (refused by the server) unless another call already replaced it.
    async fn forget(&self, stale: &Session) {
        let mut current = self.session.lock().await;
        if current.as_ref().is_some_and(|s| s.ticket == stale.ticket) {
            *current = None;
        }
    }

    /// `POST /access/ticket` with the user and password.
    async fn login(&self) -> Result<Session, PveError> {
        let Credentials::Password { username, password } = &*self.credentials else {
            return Err(PveError::Request("no password to log in with".to_string()));
        };
        let path = "/access/ticket";
        let url = format!("{}{path}", self.base);
        let body = Bytes::from(
            Params::new()
                .set("username", username)
                .set("password", password)
                .encode(),
        );
        let build = || {
            http::Request::post(&url)
                .header("User-Agent", USER_AGENT)
                .header("Accept", "application/json")
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body(body.clone())
                .map_err(|e| HttpError::Transport {
                    url: String::new(),
                    reason: e.to_string(),
                })
        };
        // A login changes nothing: it may be repeated like a read.
        let response = self
            .http
            .send_rebuilt_with_retries(self.retry, build, |outcome| match outcome {
                Ok(r) => worth_retrying(r),
                Err(_) => true,
            })
            .await
            .map_err(|e| PveError::Transport {
                method: "POST".into(),
                path: path.into(),
                reason: transport_reason(&e),
            })?;
        if !response.is_success() {
            let error =
                ApiError::parse(response.status, response.reason.as_deref(), &response.body);
            tracing::debug!(url = %self.base, user = %username, status = response.status, "Proxmox VE login refused");
            if matches!(response.status, 401 | 403) {
                return Err(PveError::Auth {
                    url: self.base.to_string(),
                    reason: format!("login as {username}: {}", error.message),
                });
            }
            return Err(PveError::Api {
                method: "POST".into(),
                path: path.into(),
                error,
            });
        }
        let answer: Value = unwrap_data("POST", path, &response.body)?;
        if answer.get("NeedTFA").is_some_and(|v| v != &Value::from(0)) {
            return Err(PveError::Auth {
                url: self.base.to_string(),
                reason: format!(
                    "login as {username}: the user needs a second factor; use an API token"
                ),
            });
        }
        let answer: TicketAnswer =
            serde_json::from_value(answer).map_err(|e| PveError::Decode {
                method: "POST".into(),
                path: path.into(),
                reason: e.to_string(),
            })?;
        tracing::debug!(url = %self.base, user = %username, "Proxmox VE ticket issued");
        Ok(Session {
            ticket: answer.ticket,
            csrf: answer.csrf_prevention_token,
            issued: self.now(),
        })
    }

    /// One call, logged in, retried as its method allows: the body of a successful answer.
    async fn exchange(
        &self,
        method: &http::Method,
        path: &str,
        query: &Params,
        payload: &Payload,
    ) -> Result<Bytes, PveError> {
        let url = if query.is_empty() {
            format!("{}{path}", self.base)
        } else {
            format!("{}{path}?{}", self.base, query.encode())
        };
        let (content_type, body) = match payload {
            Payload::None => (None, Bytes::new()),
            Payload::Form(p) => (
                Some("application/x-www-form-urlencoded".to_string()),
                Bytes::from(p.encode()),
            ),
            Payload::Multipart(m) => (Some(m.content_type.clone()), Bytes::from(m.body.clone())),
        };
        let read = *method == http::Method::GET;
        let mut logged_in_again = false;
        loop {
            let mut headers: Vec<(&str, String)> = vec![
                ("User-Agent", USER_AGENT.to_string()),
                ("Accept", "application/json".to_string()),
            ];
            if let Some(ct) = &content_type {
                headers.push(("Content-Type", ct.clone()));
            }
            let session = match &*self.credentials {
                Credentials::Token { id, secret } => {
                    headers.push(("Authorization", format!("PVEAPIToken={id}={secret}")));
                    None
                }
                Credentials::Password { .. } => {
                    let s = self.session().await?;
                    headers.push(("Cookie", format!("PVEAuthCookie={}", s.ticket)));
                    if !read {
                        headers.push(("CSRFPreventionToken", s.csrf.clone()));
                    }
                    Some(s)
                }
            };
            let build = || {
                let mut request = http::Request::builder().method(method.clone()).uri(&url);
                for (name, value) in &headers {
                    request = request.header(*name, value.as_str());
                }
                request
                    .body(body.clone())
                    .map_err(|e| HttpError::Transport {
                        url: String::new(),
                        reason: e.to_string(),
                    })
            };
            let policy = if read { self.retry } else { RetryPolicy::NEVER };
            let response = self
                .http
                .send_rebuilt_with_retries(policy, build, |outcome| match outcome {
                    Ok(r) => worth_retrying(r),
                    Err(_) => true,
                })
                .await
                .map_err(|e| PveError::Transport {
                    method: method.to_string(),
                    path: path.to_string(),
                    reason: transport_reason(&e),
                })?;
            tracing::debug!(%method, path, status = response.status, "Proxmox VE call");
            if response.status == 401 {
                let error =
                    ApiError::parse(response.status, response.reason.as_deref(), &response.body);
                if let Some(stale) = session
                    && !logged_in_again
                {
                    // Refused before anything was done: log in again and resend once.
                    self.forget(&stale).await;
                    logged_in_again = true;
                    continue;
                }
                return Err(PveError::Auth {
                    url: self.base.to_string(),
                    reason: error.message,
                });
            }
            if !response.is_success() {
                return Err(PveError::Api {
                    method: method.to_string(),
                    path: path.to_string(),
                    error: ApiError::parse(
                        response.status,
                        response.reason.as_deref(),
                        &response.body,
                    ),
                });
            }
            return Ok(response.body);
        }
    }

    /// `GET /nodes/{node}/tasks/{upid}/status`, on the node the UPID names.
    pub async fn task_status(&self, upid: &Upid) -> Result<TaskStatus, PveError> {
        use super::form::encode_segment;
        self.get(
            &format!(
                "/nodes/{}/tasks/{}/status",
                encode_segment(&upid.node),
                encode_segment(upid.as_str())
            ),
            &Params::new(),
        )
        .await
    }

    /// Waits for the task to stop, asking every `poll`: its last status when it succeeded,
    /// [`PveError::TaskFailed`] with its exit status when it did not, [`PveError::TaskTimeout`]
    /// when it still runs after `timeout`.
    pub async fn wait_task(
        &self,
        upid: &Upid,
        timeout: Duration,
        poll: Duration,
    ) -> Result<TaskStatus, PveError> {
        let started = tokio::time::Instant::now();
        loop {
            let status = self.task_status(upid).await?;
            if !status.is_running() {
                if status.is_successful() {
                    return Ok(status);
                }
                return Err(PveError::TaskFailed {
                    upid: upid.to_string(),
                    exitstatus: status
                        .exitstatus
                        .unwrap_or_else(|| "stopped without an exit status".to_string()),
                });
            }
            let waited = started.elapsed();
            if waited >= timeout {
                return Err(PveError::TaskTimeout {
                    upid: upid.to_string(),
                    waited,
                });
            }
            tokio::time::sleep(poll.min(timeout - waited)).await;
        }
    }

    /// Waits for the task when there is one (calls that run in the foreground on some PVE
    /// versions answer without a UPID).
    pub async fn wait_optional_task(
        &self,
        upid: Option<&Upid>,
        timeout: Duration,
        poll: Duration,
    ) -> Result<Option<TaskStatus>, PveError> {
        match upid {
            Some(upid) => self.wait_task(upid, timeout, poll).await.map(Some),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_unwrapped_from_data() {
        let n: String = unwrap_data("GET", "/cluster/nextid", br#"{"data":"100"}"#).unwrap();
        assert_eq!(n, "100");
        let none: Option<String> = unwrap_data("PUT", "/x", br#"{"data":null}"#).unwrap();
        assert_eq!(none, None);
        let unit: () = unwrap_data("PUT", "/x", b"").unwrap();
        assert_eq!(unit, ());
        let missing: Option<u32> = unwrap_data("PUT", "/x", b"{}").unwrap();
        assert_eq!(missing, None);
        let err = unwrap_data::<u32>("GET", "/x", br#"{"data":"abc"}"#).unwrap_err();
        assert!(
            matches!(&err, PveError::Decode { path, .. } if path == "/x"),
            "{err}"
        );
        assert!(unwrap_data::<Value>("GET", "/x", b"[1]").is_err());
        assert!(unwrap_data::<Value>("GET", "/x", b"<html>").is_err());
    }

    #[test]
    fn reads_are_retried_on_errors_that_may_pass() {
        let answer = |status, reason: Option<&str>| Response {
            status,
            headers: Default::default(),
            body: Bytes::from_static(br#"{"data":null}"#),
            reason: reason.map(str::to_string),
        };
        assert!(worth_retrying(&answer(503, None)));
        assert!(worth_retrying(&answer(595, Some("No route to host"))));
        assert!(worth_retrying(&answer(500, Some("VM is locked (clone)"))));
        assert!(!worth_retrying(&answer(
            500,
            Some("Configuration file 'nodes/pve1/qemu-server/1.conf' does not exist")
        )));
        assert!(!worth_retrying(&answer(501, None)));
        assert!(!worth_retrying(&answer(400, None)));
        assert!(!worth_retrying(&answer(200, None)));
    }

    #[test]
    fn urls_must_be_http_with_a_host() {
        let http = HttpClient::new(Duration::from_secs(1)).unwrap();
        let token = Credentials::Token {
            id: "u@pam!k".into(),
            secret: "s".into(),
        };
        let client =
            PveClient::new("https://pve:8006/api2/json/", token.clone(), http.clone()).unwrap();
        assert_eq!(client.url(), "https://pve:8006/api2/json");
        for bad in ["pve:8006", "ftp://pve/api2/json", "https://"] {
            assert!(
                PveClient::new(bad, token.clone(), http.clone()).is_err(),
                "{bad}"
            );
        }
        let shown = format!("{client:?}");
        assert!(
            !shown.contains("\"s\"") && shown.contains("u@pam!k"),
            "{shown}"
        );
    }
}
