//! Why a Proxmox VE call failed, and what that means to the provider.
//!
//! PVE answers an error with its HTTP status (400 for a parameter, 401 for credentials, 403 for
//! a permission, 500 for nearly everything else, 595/596 for an unreachable node) and its message
//! in the status line's reason phrase (`500 Configuration file 'nodes/pve1/qemu-server/100.conf'
//! does not exist`), the body being `{"data": null}`, or with some versions and proxies
//! `{"data": null, "message": "…\n", "errors": {"field": "why"}}`. [`ApiError::parse`] reads
//! all of these. A VM that is not there is a 500 like any other; [`PveError::is_not_found`]
//! tells it by its words.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use super::config::ConfigError;

/// The longest piece of a body that is not PVE's JSON kept as the message (a proxy's page).
const MAX_RAW_MESSAGE: usize = 200;

/// An error answer of the API.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: u16,
    /// PVE's message, trimmed.
    pub message: String,
    /// Per-parameter reasons of a 400 (`{"newid": "VM 100 already exists"}`).
    pub errors: BTreeMap<String, String>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (HTTP {}", self.message, self.status)?;
        for (field, why) in &self.errors {
            write!(f, "; {field}: {why}")?;
        }
        f.write_str(")")
    }
}

fn as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.trim().to_string(),
        other => other.to_string(),
    }
}

impl ApiError {
    /// Reads an error answer from its status, its reason phrase (when not the standard one)
    /// and its body.
    pub fn parse(status: u16, reason: Option<&str>, body: &[u8]) -> Self {
        let json = serde_json::from_slice::<Value>(body).ok();
        let object = json.as_ref().and_then(Value::as_object);
        let from_body = object
            .and_then(|o| o.get("message"))
            .map(as_text)
            .filter(|m| !m.is_empty());
        let errors = object
            .and_then(|o| o.get("errors"))
            .and_then(Value::as_object)
            .map(|e| e.iter().map(|(k, v)| (k.clone(), as_text(v))).collect())
            .unwrap_or_default();
        let raw = || {
            let text = String::from_utf8_lossy(body);
            let text = text.trim();
            match text.char_indices().nth(MAX_RAW_MESSAGE) {
                Some((cut, _)) => format!("{}…", &text[..cut]),
                None => text.to_string(),
            }
        };
        let message = from_body
            .or_else(|| {
                reason
                    .map(str::trim)
                    .filter(|r| !r.is_empty())
                    .map(str::to_string)
            })
            .or_else(|| (json.is_none()).then(raw).filter(|r| !r.is_empty()))
            .unwrap_or_else(|| format!("HTTP {status}"));
        Self {
            status,
            message,
            errors,
        }
    }

    /// The answer says the object is not there: a 404, or PVE's 500 for a VM, a volume or a
    /// storage that does not exist.
    pub fn is_not_found(&self) -> bool {
        let message = self.message.to_ascii_lowercase();
        self.status == 404
            || (self.status == 500
                && (message.contains("does not exist") || message.contains("no such vm")))
    }
}

/// Why a Proxmox VE call failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PveError {
    /// The API answered with an error.
    #[error("{method} {path}: {error}")]
    Api {
        /// The call's method.
        method: String,
        /// The call's path (under `/api2/json`, without the query).
        path: String,
        /// The answer.
        error: ApiError,
    },
    /// The credentials were refused (a login, or a token or ticket on a call).
    #[error("{url}: authentication failed: {reason}")]
    Auth {
        /// The cluster's API.
        url: String,
        /// What the server said.
        reason: String,
    },
    /// A task ended with an error.
    #[error("task {upid} failed: {exitstatus}")]
    TaskFailed {
        /// The task.
        upid: String,
        /// Its exit status (`clone failed: …`).
        exitstatus: String,
    },
    /// A task did not end in time.
    #[error("task {upid} still running after {waited:?}")]
    TaskTimeout {
        /// The task.
        upid: String,
        /// How long it was waited for.
        waited: Duration,
    },
    /// No answer: the connection failed or timed out.
    #[error("{method} {path}: {reason}")]
    Transport {
        /// The call's method.
        method: String,
        /// The call's path.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// A successful answer that could not be read as expected.
    #[error("{method} {path}: unreadable answer: {reason}")]
    Decode {
        /// The call's method.
        method: String,
        /// The call's path.
        path: String,
        /// What was wrong.
        reason: String,
    },
    /// The call could not be made as asked (a file name the upload cannot carry, a URL that is
    /// not one, a CA that cannot be used).
    #[error("{0}")]
    Request(String),
    /// No cluster is configured for the region.
    #[error("region {0:?} is not in the clusters config")]
    RegionNotFound(String),
    /// The clusters config names no cluster.
    #[error("the clusters config names no cluster")]
    NoClusters,
    /// The clusters config is wrong.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

impl PveError {
    /// The API's error answer, when there was one.
    pub fn api_error(&self) -> Option<&ApiError> {
        match self {
            PveError::Api { error, .. } => Some(error),
            _ => None,
        }
    }

    /// The HTTP status of an error answer.
    pub fn status(&self) -> Option<u16> {
        self.api_error().map(|e| e.status)
    }

    /// The object of the call is not there (see [`ApiError::is_not_found`]): a VM deleted
    /// behind the provider's back, a config of a VM on another node.
    pub fn is_not_found(&self) -> bool {
        self.api_error().is_some_and(ApiError::is_not_found)
    }

    /// The credentials were refused.
    pub fn is_auth(&self) -> bool {
        matches!(self, PveError::Auth { .. })
    }

    /// The credentials are good but lack a privilege (HTTP 403).
    pub fn is_permission_denied(&self) -> bool {
        self.status() == Some(403)
    }

    /// A task that ended with an error: its exit status.
    pub fn task_exitstatus(&self) -> Option<&str> {
        match self {
            PveError::TaskFailed { exitstatus, .. } => Some(exitstatus),
            _ => None,
        }
    }

    /// Worth trying again later: no answer, a server error other than "not found", an
    /// unreachable node (PVE's 595/596).
    pub fn is_retryable(&self) -> bool {
        match self {
            PveError::Transport { .. } => true,
            PveError::Api { error, .. } => {
                error.status >= 500 && error.status != 501 && !error.is_not_found()
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(status: u16, reason: Option<&str>, body: &str) -> PveError {
        PveError::Api {
            method: "GET".into(),
            path: "/nodes/pve1/qemu/100/config".into(),
            error: ApiError::parse(status, reason, body.as_bytes()),
        }
    }

    #[test]
    fn the_message_comes_from_the_body_then_the_reason_phrase() {
        // PVE itself: the message in the status line, an empty body.
        let e = ApiError::parse(
            500,
            Some("Configuration file 'nodes/pve1/qemu-server/100.conf' does not exist"),
            br#"{"data":null}"#,
        );
        assert_eq!(
            e.message,
            "Configuration file 'nodes/pve1/qemu-server/100.conf' does not exist"
        );
        // A body with the message (and its newline) and field errors.
        let e = ApiError::parse(
            400,
            Some("Parameter verification failed."),
            br#"{"data":null,"message":"Parameter verification failed.\n","errors":{"newid":"VM 100 already exists\n","full":1}}"#,
        );
        assert_eq!(e.message, "Parameter verification failed.");
        assert_eq!(
            e.to_string(),
            "Parameter verification failed. (HTTP 400; full: 1; newid: VM 100 already exists)"
        );
        // A proxy's page.
        let page = format!("<html>{}</html>", "x".repeat(400));
        let e = ApiError::parse(502, None, page.as_bytes());
        assert!(e.message.starts_with("<html>xx") && e.message.ends_with('…'));
        assert_eq!(e.message.chars().count(), MAX_RAW_MESSAGE + 1);
        // Nothing at all.
        assert_eq!(ApiError::parse(503, None, b"").message, "HTTP 503");
        assert_eq!(ApiError::parse(596, None, b"").message, "HTTP 596");
    }

    #[test]
    fn not_found_is_told_by_status_or_by_pves_words() {
        for (status, reason, body) in [
            (
                500,
                Some("Configuration file 'nodes/pve1/qemu-server/100.conf' does not exist"),
                "{\"data\":null}",
            ),
            (
                500,
                None,
                "{\"data\":null,\"message\":\"Configuration file 'nodes/pve2/qemu-server/7.conf' does not exist\\n\"}",
            ),
            (500, Some("no such VM ('100')"), ""),
            (500, Some("volume 'local:iso/a.iso' does not exist"), ""),
            (404, None, ""),
        ] {
            let e = api(status, reason, body);
            assert!(e.is_not_found() && !e.is_retryable(), "{e}");
        }
        for (status, reason) in [
            (500, "VM is locked (clone)"),
            (400, "Parameter verification failed."),
            (403, "Permission check failed (/vms/100, VM.Audit)"),
            (595, "No route to host"),
        ] {
            let e = api(status, Some(reason), "");
            assert!(!e.is_not_found(), "{e}");
        }
    }

    #[test]
    fn classifiers() {
        assert!(api(500, Some("VM is locked (clone)"), "").is_retryable());
        assert!(api(595, Some("No route to host"), "").is_retryable());
        assert!(!api(501, Some("Method not implemented"), "").is_retryable());
        assert!(!api(400, None, "").is_retryable());
        let denied = api(
            403,
            Some("Permission check failed (/vms/100, VM.Audit)"),
            "",
        );
        assert!(denied.is_permission_denied() && !denied.is_auth());
        assert_eq!(denied.status(), Some(403));
        let transport = PveError::Transport {
            method: "GET".into(),
            path: "/version".into(),
            reason: "connection refused".into(),
        };
        assert!(transport.is_retryable() && transport.status().is_none());
        let task = PveError::TaskFailed {
            upid: "UPID:pve1:1:2:3:qmstart:100:root@pam:".into(),
            exitstatus: "start failed: QEMU exited with code 1".into(),
        };
        assert_eq!(
            task.task_exitstatus(),
            Some("start failed: QEMU exited with code 1")
        );
        assert_eq!(
            task.to_string(),
            "task UPID:pve1:1:2:3:qmstart:100:root@pam: failed: start failed: QEMU exited with code 1"
        );
        assert_eq!(
            api(500, Some("VM is locked (clone)"), "").to_string(),
            "GET /nodes/pve1/qemu/100/config: VM is locked (clone) (HTTP 500)"
        );
    }
}
