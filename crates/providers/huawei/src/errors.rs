//! Huawei Cloud's error answers and what they mean to the provider.
//!
//! The services answer errors in several shapes, all read by [`HuaweiError::parse`]:
//!
//! * `{"error_code": "…", "error_msg": "…"}` (IAM, BSS, the API gateway's own `APIGW.*`);
//! * `{"error": {"code": "Ecs.0114", "message": "…"}}` (ECS, VPC: nested, as the SDK's parser
//!   finds them by walking into objects);
//! * CCE's Kubernetes-like status, which carries two codes and three messages:
//!   `{"kind": "Status", "apiVersion": "v3", "status": "Failure", "code": 400,
//!   "errorCode": "CCE.01400001", "errorMessage": "Invalid request.", "error_code":
//!   "CCE_CM.0004", "error_msg": "Request is invalid", "message": "<the detail>", "reason":
//!   "BadRequest"}`.
//!
//! The primary code and message are the SDK's (`core/sdkerr/errors.go`): `error_code` and
//! `error_msg` first, then `code` and `message`, then the same inside nested objects; every
//! other code and message the body carries is kept in [`HuaweiError::details`], so the
//! classifiers see CCE's `errorCode` and detailed `message` too. The request id is the
//! `X-Request-Id` header (IAM's `X-IAM-Trace-Id` when that is missing).
//!
//! The classifiers follow upstream's `pkg/providers/instance/instance.go`: capacity by CCE's
//! `CCE_CM.0021` or, when the answer has no code at all, by its message; an unsupported ENI
//! network by `CCE.01400025` or its message (both matched case-sensitively, as upstream's tests
//! insist); not found by HTTP 404.

use serde_json::{Map, Value};

/// CCE's code for a flavor with no capacity in the zone (`[x1e.12u.96g|ap-southeast-3a] flavor
/// is insufficient in specified az`).
pub const CCE_FLAVOR_INSUFFICIENT: &str = "CCE_CM.0021";

/// CCE's code for a flavor whose network interfaces the cluster's ENI network cannot use.
pub const CCE_UNSUPPORTED_NETWORK: &str = "CCE.01400025";

/// The messages that mean "no capacity" in an answer without a code (upstream's list).
pub const INSUFFICIENT_CAPACITY_MESSAGES: [&str; 5] = [
    "insufficient in specified az",
    "insufficient capacity",
    "out of stock",
    "sold out",
    "sell out",
];

/// The message of an unsupported ENI network (upstream's).
pub const UNSUPPORTED_NETWORK_MESSAGE: &str = "Eni network is not supported";

/// CCE's code for a resource that does not exist (`{"ErrorCode": "CCE_CM.0003", "Message":
/// "Resource not found"}`), sometimes answered without a 404.
pub const CCE_NOT_FOUND: &str = "CCE_CM.0003";

/// The API gateway's throttling code (`The throttling threshold has been reached`), under both
/// of the gateway's prefixes.
pub const THROTTLING_CODES: [&str; 2] = ["APIGW.0308", "APIG.0308"];

/// The gateway's own codes (`APIGW.*`, `APIG.*`): about the request's route or credentials,
/// never about a resource — a 404 `APIGW.0101` ("The API does not exist") is a wrong endpoint
/// or path, and reading it as "the node is gone" would let garbage collection drop live nodes.
pub fn is_gateway_code(code: &str) -> bool {
    code.starts_with("APIGW.") || code.starts_with("APIG.")
}

/// The longest piece of a body that is not JSON kept as the message (an HTML error page).
const MAX_RAW_MESSAGE: usize = 300;

/// One code and message found in an error answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorDetail {
    /// The code, when this part of the answer had one.
    pub code: Option<String>,
    /// The message (empty when there was only a code).
    pub message: String,
}

/// A Huawei Cloud error answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct HuaweiError {
    /// The HTTP status.
    pub status: u16,
    /// The primary error code (`CCE_CM.0021`, `Ecs.0114`, `APIGW.0308`), when there was one.
    pub code: Option<String>,
    /// The primary message; the body itself (cut short) when it held none.
    pub message: String,
    /// The request id (`X-Request-Id`), which Huawei's support asks for.
    pub request_id: Option<String>,
    /// Every other code and message in the answer (CCE's `errorCode`/`errorMessage` and its
    /// detailed `message`, ECS's nested errors, `details` lists).
    pub details: Vec<ErrorDetail>,
}

impl std::fmt::Display for HuaweiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Only what the service said: neither the request's body nor its headers are known
        // here, so no secret can end up in the text.
        let mut head = match (&self.code, self.message.is_empty()) {
            (Some(code), false) => format!("{code}: {}", self.message),
            (Some(code), true) => code.clone(),
            (None, _) => self.message.clone(),
        };
        // CCE's most useful words are often in a second message.
        for d in &self.details {
            if !d.message.is_empty() && d.message != self.message {
                head.push_str("; ");
                head.push_str(&d.message);
            }
        }
        let id = self
            .request_id
            .as_ref()
            .map(|id| format!(", request id {id}"))
            .unwrap_or_default();
        if head.is_empty() {
            write!(f, "HTTP {}{id}", self.status)
        } else {
            write!(f, "{head} (HTTP {}{id})", self.status)
        }
    }
}

fn string_at<'a>(m: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    m.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// The SDK's pick: `error_code`+`error_msg`, then `code`+`message` (both non-empty strings),
/// then the same in nested objects, in order.
fn sdk_primary(m: &Map<String, Value>) -> Option<(String, String)> {
    for (code, message) in [("error_code", "error_msg"), ("code", "message")] {
        if let (Some(c), Some(msg)) = (string_at(m, code), string_at(m, message)) {
            return Some((c.to_string(), msg.to_string()));
        }
    }
    m.values()
        .filter_map(Value::as_object)
        .find_map(sdk_primary)
}

/// Every code and message in the answer, outer ones first.
fn collect(m: &Map<String, Value>, out: &mut Vec<ErrorDetail>) {
    let mut used_message = false;
    for (code, message) in [
        ("error_code", "error_msg"),
        ("errorCode", "errorMessage"),
        ("code", "message"),
    ] {
        if let Some(c) = string_at(m, code) {
            used_message |= message == "message";
            out.push(ErrorDetail {
                code: Some(c.to_string()),
                message: string_at(m, message).unwrap_or_default().to_string(),
            });
        }
    }
    // A Kubernetes status's `message` beside a numeric `code`.
    if !used_message && let Some(msg) = string_at(m, "message") {
        out.push(ErrorDetail {
            code: None,
            message: msg.to_string(),
        });
    }
    for (key, value) in m {
        match value {
            Value::Object(inner) => collect(inner, out),
            Value::Array(items) if key == "details" => {
                for item in items.iter().filter_map(Value::as_object) {
                    collect(item, out);
                }
            }
            _ => {}
        }
    }
}

fn raw_message(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    match text.char_indices().nth(MAX_RAW_MESSAGE) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

impl HuaweiError {
    /// Reads an error answer: its status, its `X-Request-Id` (or `X-IAM-Trace-Id`) header and
    /// its body, whatever its shape (see the module's documentation).
    pub fn parse(status: u16, request_id: Option<&str>, body: &[u8]) -> Self {
        let object = serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|v| match v {
                Value::Object(m) => Some(m),
                _ => None,
            });
        let mut details = Vec::new();
        let mut primary = None;
        if let Some(m) = &object {
            collect(m, &mut details);
            primary = sdk_primary(m);
        }
        // Not the SDK's shapes (CCE's camel-case alone, a status with only a message): the
        // first thing found; nothing at all: the body itself.
        let (code, mut message) = primary
            .map(|(c, m)| (Some(c), m))
            .or_else(|| details.first().map(|d| (d.code.clone(), d.message.clone())))
            .unwrap_or_default();
        if let Some(i) = details
            .iter()
            .position(|d| d.code == code && d.message == message)
        {
            details.remove(i);
        }
        if message.is_empty() {
            message = raw_message(body);
        }
        Self {
            status,
            code,
            message,
            request_id: request_id
                .map(str::trim)
                .filter(|id| !id.is_empty())
                .map(str::to_string),
            details,
        }
    }

    /// Every code in the answer, the primary one first.
    pub fn codes(&self) -> impl Iterator<Item = &str> {
        self.code
            .as_deref()
            .into_iter()
            .chain(self.details.iter().filter_map(|d| d.code.as_deref()))
    }

    /// Every message in the answer, the primary one first.
    pub fn messages(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.message.as_str()).chain(
            self.details
                .iter()
                .map(|d| d.message.as_str())
                .filter(|m| !m.is_empty()),
        )
    }

    fn has_code(&self, code: &str) -> bool {
        self.codes().any(|c| c == code)
    }

    /// The resource does not exist: HTTP 404 (upstream's rule) unless the API gateway answered
    /// it (a wrong route, not a missing resource), or CCE's not-found code.
    pub fn is_not_found(&self) -> bool {
        if self.codes().any(is_gateway_code) {
            return false;
        }
        self.status == 404 || self.has_code(CCE_NOT_FOUND)
    }

    /// The zone has no capacity for the flavor: CCE's [`CCE_FLAVOR_INSUFFICIENT`] whatever the
    /// status, or — in an answer without any code — one of
    /// [`INSUFFICIENT_CAPACITY_MESSAGES`]. An answer with other codes is not a capacity error
    /// even if its message reads like one (a quota, say).
    pub fn is_insufficient_capacity(&self) -> bool {
        if self.codes().next().is_some() {
            return self.has_code(CCE_FLAVOR_INSUFFICIENT);
        }
        self.messages().any(reads_as_insufficient_capacity)
    }

    /// The flavor cannot join the cluster's ENI network: [`CCE_UNSUPPORTED_NETWORK`] or
    /// [`UNSUPPORTED_NETWORK_MESSAGE`].
    pub fn is_unsupported_network(&self) -> bool {
        self.has_code(CCE_UNSUPPORTED_NETWORK)
            || self
                .messages()
                .any(|m| m.contains(UNSUPPORTED_NETWORK_MESSAGE))
    }

    /// Throttled: HTTP 429 or the gateway's [`THROTTLING_CODES`]. The gateway refuses before
    /// the service does anything, so the request may always be sent again.
    pub fn is_throttling(&self) -> bool {
        self.status == 429 || self.codes().any(|c| THROTTLING_CODES.contains(&c))
    }

    /// Worth sending again after a backoff: throttling, a timeout, or a server error that may
    /// pass (500, 502, 503, 504). Refusals (other 4xx) are not.
    pub fn is_retryable(&self) -> bool {
        self.is_throttling() || matches!(self.status, 408 | 500 | 502 | 503 | 504)
    }
}

/// Whether a message (an error's, a failed CCE job's reason) says the zone has no capacity for
/// the flavor: it holds one of [`INSUFFICIENT_CAPACITY_MESSAGES`].
pub fn reads_as_insufficient_capacity(message: &str) -> bool {
    INSUFFICIENT_CAPACITY_MESSAGES
        .iter()
        .any(|s| message.contains(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(status: u16, body: &str) -> HuaweiError {
        HuaweiError::parse(status, Some("97e2***11df"), body.as_bytes())
    }

    /// The SDK's own parsing table (`core/sdkerr/errors_test.go`).
    #[test]
    fn the_sdks_shapes() {
        let e = parse(
            400,
            r#"{"error_code":"XXX.0001","error_msg":"Some errors occurred.","encoded_authorization_message":"Egpjbi1ub*****GoxMzgrcA=="}"#,
        );
        assert_eq!(e.code.as_deref(), Some("XXX.0001"));
        assert_eq!(e.message, "Some errors occurred.");
        assert_eq!(e.request_id.as_deref(), Some("97e2***11df"));
        assert!(e.details.is_empty());

        let nested = parse(
            400,
            r#"{"error":{"code":"XXX.0001","message":"Some errors occurred."}}"#,
        );
        assert_eq!(nested.code.as_deref(), Some("XXX.0001"));
        assert_eq!(nested.message, "Some errors occurred.");

        let both = parse(
            400,
            r#"{"error":{"code":"XXX.0002","message":"Some errors occurred..."},"error_code":"XXX.0001","error_msg":"Some errors occurred."}"#,
        );
        assert_eq!(both.code.as_deref(), Some("XXX.0001"), "top level first");
        assert_eq!(both.codes().collect::<Vec<_>>(), ["XXX.0001", "XXX.0002"]);

        let unknown = parse(400, r#"{"invalid_key":"invalid_value"}"#);
        assert_eq!(unknown.code, None);
        assert_eq!(unknown.message, r#"{"invalid_key":"invalid_value"}"#);

        let text = parse(502, "invalid json data");
        assert_eq!(
            (text.code, text.message.as_str()),
            (None, "invalid json data")
        );

        let details = parse(
            400,
            r#"{"code":"C.XXXX","message":"C failed","details":[{"code":"C.XXXX","message":"You do not have permission to perform action xxx on resource xxx."},{"error_code":"XXX.0001","error_msg":"errors"}]}"#,
        );
        assert_eq!(details.code.as_deref(), Some("C.XXXX"));
        assert_eq!(details.message, "C failed");
        assert_eq!(
            details.messages().collect::<Vec<_>>(),
            [
                "C failed",
                "You do not have permission to perform action xxx on resource xxx.",
                "errors"
            ]
        );
    }

    /// CCE's status answer (as CCE returns it for an invalid ENI subnet): the SDK's pick is
    /// `error_code`; the camel-case code and the detailed message stay reachable.
    #[test]
    fn cces_status_answer() {
        let e = parse(
            400,
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","code":400,"errorCode":"CCE.01400001","errorMessage":"Invalid request.","error_code":"CCE_CM.0004","error_msg":"Request is invalid","message":"Eni subnetId and subnetCidr not matched","reason":"BadRequest"}"#,
        );
        assert_eq!(e.code.as_deref(), Some("CCE_CM.0004"));
        assert_eq!(e.message, "Request is invalid");
        assert_eq!(
            e.codes().collect::<Vec<_>>(),
            ["CCE_CM.0004", "CCE.01400001"]
        );
        assert!(
            e.messages()
                .any(|m| m == "Eni subnetId and subnetCidr not matched")
        );
        assert_eq!(
            e.to_string(),
            "CCE_CM.0004: Request is invalid; Invalid request.; Eni subnetId and subnetCidr not matched (HTTP 400, request id 97e2***11df)"
        );
        assert!(!e.is_not_found() && !e.is_insufficient_capacity() && !e.is_retryable());

        let camel_only = parse(
            409,
            r#"{"kind":"Status","apiVersion":"v3","status":"Failure","code":409,"errorCode":"CCE_CM.0021","errorMessage":"[x1e.12u.96g|ap-southeast-3a] flavor is insufficient in specified az"}"#,
        );
        assert_eq!(camel_only.code.as_deref(), Some("CCE_CM.0021"));
        assert!(camel_only.is_insufficient_capacity());
    }

    /// Upstream's `TestIsInsufficientCapacityError` table, and the same with CCE's two codes.
    #[test]
    fn insufficient_capacity() {
        let coded = |status, code: &str, message: &str| HuaweiError {
            status,
            code: (!code.is_empty()).then(|| code.to_string()),
            message: message.to_string(),
            request_id: None,
            details: Vec::new(),
        };
        for (e, want) in [
            (
                coded(
                    418,
                    "CCE_CM.0021",
                    "[as7.xlarge.2|ap-southeast-3a] flavor is insufficient in specified az",
                ),
                true,
            ),
            (
                coded(418, "", "flavor is insufficient in specified az"),
                true,
            ),
            (coded(400, "cce_cm.0021", ""), false),
            (coded(400, "", "Insufficient capacity"), false),
            (coded(400, "CCE_CM.0099", "quota exceeded"), false),
            (coded(400, "CCE_CM.0099", "the flavor is sold out"), false),
            (coded(400, "", "the flavor is sold out"), true),
            (coded(400, "", "out of stock"), true),
            (coded(400, "", "sell out"), true),
        ] {
            assert_eq!(e.is_insufficient_capacity(), want, "{e}");
        }
        let dual = parse(
            409,
            r#"{"code":409,"errorCode":"CCE.01409001","errorMessage":"Conflict","error_code":"CCE_CM.0021","error_msg":"[x1e.12u.96g|ap-southeast-3a] flavor is insufficient in specified az"}"#,
        );
        assert!(dual.is_insufficient_capacity());
        let message_in_status = parse(
            400,
            r#"{"kind":"Status","status":"Failure","code":400,"message":"flavor c7.large.2 is sold out in cn-north-4a"}"#,
        );
        assert_eq!(message_in_status.code, None);
        assert!(message_in_status.is_insufficient_capacity());
    }

    /// Upstream's `TestIsUnsupportedNetworkError` table.
    #[test]
    fn unsupported_network() {
        for (body, want) in [
            (r#"{"error_code":"CCE.01400025","error_msg":"x"}"#, true),
            (r#"{"error_code":"cce.01400025","error_msg":"x"}"#, false),
            (
                r#"{"message":"Flavor does not support Eni network is not supported mode"}"#,
                true,
            ),
            (
                r#"{"message":"Flavor does not support eni network is not supported mode"}"#,
                false,
            ),
            (
                r#"{"error_code":"CCE_CM.0004","error_msg":"Request is invalid","errorCode":"CCE.01400025","errorMessage":"x"}"#,
                true,
            ),
            (
                r#"{"error_code":"CCE_CM.0004","error_msg":"Request is invalid","code":400,"message":"Subeni quota is not enough of VM's flavor, Flavor [t7.xlarge.2] 's subeni quota is 0, Eni network is not supported "}"#,
                true,
            ),
        ] {
            assert_eq!(parse(400, body).is_unsupported_network(), want, "{body}");
        }
    }

    #[test]
    fn not_found_is_a_404_from_the_service() {
        assert!(
            parse(
                404,
                r#"{"error_code":"CCE.01404001","error_msg":"The node does not exist"}"#
            )
            .is_not_found()
        );
        assert!(parse(404, "").is_not_found());
        assert!(
            parse(
                400,
                r#"{"ErrorCode":"x","error_code":"CCE_CM.0003","error_msg":"Resource not found"}"#
            )
            .is_not_found()
        );
        let route = parse(
            404,
            r#"{"error_msg":"The API does not exist or has not been published in the environment","error_code":"APIGW.0101","request_id":"a"}"#,
        );
        assert!(!route.is_not_found(), "a wrong route is not a missing node");
        assert!(
            !parse(
                400,
                r#"{"error":{"code":"Ecs.0005","message":"Invalid parameter."}}"#
            )
            .is_not_found()
        );
    }

    #[test]
    fn throttling_and_retries() {
        let gateway = parse(
            429,
            r#"{"error_msg":"The throttling threshold has been reached: policy user over ratelimit,limit:100,time:1 minute","error_code":"APIGW.0308","request_id":"r"}"#,
        );
        assert!(gateway.is_throttling() && gateway.is_retryable());
        assert!(parse(403, r#"{"error_code":"APIG.0308","error_msg":"x"}"#).is_throttling());
        assert!(parse(429, "").is_throttling());
        for status in [500, 502, 503, 504, 408] {
            let e = parse(status, "");
            assert!(e.is_retryable() && !e.is_throttling(), "{status}");
        }
        for status in [400, 401, 403, 404, 409, 501] {
            assert!(
                !parse(status, r#"{"error_code":"X.1","error_msg":"no"}"#).is_retryable(),
                "{status}"
            );
        }
    }

    #[test]
    fn bodies_that_are_not_json_are_cut_short() {
        let page = format!("<html>{}</html>", "x".repeat(1000));
        let e = HuaweiError::parse(502, None, page.as_bytes());
        assert!(
            e.message.chars().count() <= MAX_RAW_MESSAGE + 1,
            "{}",
            e.message
        );
        assert!(e.message.starts_with("<html>"));
        assert_eq!(e.request_id, None);
        assert_eq!(
            HuaweiError::parse(503, Some("  "), b"").to_string(),
            "HTTP 503"
        );
    }
}
