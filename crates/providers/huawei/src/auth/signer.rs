//! The AK/SK request signature of Huawei Cloud's API gateway, `SDK-HMAC-SHA256`, computed as
//! huaweicloud-sdk-go-v3 (`core/auth/signer/signer.go`) computes it. The caller passes the time,
//! so the SDK's own test vectors reproduce byte for byte; [`verify`] is the gateway's side, for
//! test servers.
//!
//! ```text
//! CanonicalRequest = METHOD \n CanonicalURI \n CanonicalQuery \n CanonicalHeaders \n SignedHeaders \n hex(sha256(body))
//! StringToSign     = "SDK-HMAC-SHA256" \n X-Sdk-Date \n hex(sha256(CanonicalRequest))
//! Authorization    = SDK-HMAC-SHA256 Access=<AK>, SignedHeaders=<…>, Signature=hex(hmac_sha256(SK, StringToSign))
//! ```
//!
//! Unlike AWS's SigV4 the key is the secret itself (no date or region derivation), the
//! canonical URI always ends in `/`, and the signed headers are every header the request
//! carries except `Content-Type` and names with an underscore (which proxies on the way may
//! drop).

use ring::hmac;

use super::time::{parse_sdk_date, sdk_date};

/// The algorithm's name, first in the string to sign and the `Authorization` header.
pub const ALGORITHM: &str = "SDK-HMAC-SHA256";

/// The header carrying the signing time, `YYYYMMDDTHHMMSSZ` in UTC.
pub const DATE_HEADER: &str = "X-Sdk-Date";

/// The header that, when present, stands in for the body's hash in the canonical request.
pub const CONTENT_SHA256_HEADER: &str = "X-Sdk-Content-Sha256";

/// [`CONTENT_SHA256_HEADER`]'s value for a body that is not signed: the SDK sets it for every
/// `Content-Type` but JSON and BSON (uploads, forms).
pub const UNSIGNED_PAYLOAD: &str = "UNSIGNED-PAYLOAD";

/// How far the gateway lets `X-Sdk-Date` be from its own clock: fifteen minutes.
pub const MAX_CLOCK_SKEW_SECONDS: u64 = 15 * 60;

/// `hex(sha256(""))`: the hash of a request without a body.
pub const EMPTY_PAYLOAD_SHA256: &str =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// `hex(sha256(data))`.
pub fn sha256_hex(data: &[u8]) -> String {
    hex(ring::digest::digest(&ring::digest::SHA256, data).as_ref())
}

/// Percent-encodes as the signer does: every byte but `A-Z a-z 0-9 - _ . ~` becomes `%XX` in
/// upper case, so a space is `%20` (never `+`) and `/` is `%2F`.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Decodes `%XX` escapes (and `+` as a space when `plus_is_space`, as in a query string); a
/// `%` not followed by two hex digits stays as it is.
pub fn unescape(s: &str, plus_is_space: bool) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let escaped = (b[i] == b'%')
            .then(|| s.get(i + 1..i + 3))
            .flatten()
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (escaped, b[i]) {
            (Some(byte), _) => {
                out.push(byte);
                i += 3;
                continue;
            }
            (None, b'+') if plus_is_space => out.push(b' '),
            (None, other) => out.push(other),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The canonical URI: each segment of the (unencoded) path escaped, and a `/` at the end
/// whether or not the path has one — the gateway compares paths with the slash.
pub fn canonical_uri(path: &str) -> String {
    uri_of_segments(path.split('/').map(escape))
}

fn uri_of_segments(segments: impl Iterator<Item = String>) -> String {
    let mut uri = segments.collect::<Vec<_>>().join("/");
    if !uri.ends_with('/') {
        uri.push('/');
    }
    uri
}

/// The canonical query: parameters (unencoded) sorted by name and, for a repeated name, by
/// value — both compared before escaping, as the SDK sorts them — then `name=value` escaped and
/// joined with `&`. A parameter without a value keeps its `=`.
pub fn canonical_query(query: &[(String, String)]) -> String {
    let mut pairs: Vec<&(String, String)> = query.iter().collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", escape(k), escape(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// Whether a header takes part in the signature: all do but `Content-Type` (any name starting
/// with it, in any case) and names containing `_`, which proxies on the way may drop.
pub fn is_signed_header(name: &str) -> bool {
    !name.to_ascii_lowercase().starts_with("content-type") && !name.contains('_')
}

/// The names of the signed headers among `headers`: lower-cased, sorted, each once.
pub fn signed_header_names(headers: &[(String, String)]) -> Vec<String> {
    let mut names: Vec<String> = headers
        .iter()
        .filter(|(name, _)| is_signed_header(name))
        .map(|(name, _)| name.to_ascii_lowercase())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The canonical headers: for each name of `signed` (lower case, in order), one
/// `name:value` line per value the request carries under that name in any case, values trimmed
/// and sorted. Ends with a newline, so the canonical request has an empty line after them.
pub fn canonical_headers(headers: &[(String, String)], signed: &[String]) -> String {
    let mut out = String::new();
    for name in signed {
        let mut values: Vec<&str> = headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim())
            .collect();
        values.sort_unstable();
        for value in values {
            out.push_str(name);
            out.push(':');
            out.push_str(value);
            out.push('\n');
        }
    }
    if out.is_empty() {
        out.push('\n');
    }
    out
}

fn header_value<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// The payload's hash in the canonical request: [`CONTENT_SHA256_HEADER`]'s value when the
/// request carries it, else `hex(sha256(body))`.
pub fn payload_hash(headers: &[(String, String)], body: &[u8]) -> String {
    match header_value(headers, CONTENT_SHA256_HEADER) {
        Some(v) => v.to_string(),
        None => sha256_hex(body),
    }
}

/// What is signed: the request's parts as they go on the wire, not yet encoded.
#[derive(Clone, Copy, Debug)]
pub struct SignableRequest<'a> {
    /// `GET`, `POST`, …
    pub method: &'a str,
    /// The path, not encoded (`/v1/0123/cloudservers/flavors`).
    pub path: &'a str,
    /// The query parameters, not encoded.
    pub query: &'a [(String, String)],
    /// Every header the request will carry but `X-Sdk-Date` and `Authorization`, which
    /// signing adds; `Host` only if it is sent explicitly (the SDK does not sign it).
    pub headers: &'a [(String, String)],
    /// The body as sent.
    pub body: &'a [u8],
}

/// The canonical request over the headers named in `signed`.
pub fn canonical_request(request: &SignableRequest<'_>, signed: &[String]) -> String {
    assemble(
        request.method,
        &canonical_uri(request.path),
        request.query,
        request.headers,
        signed,
        request.body,
    )
}

fn assemble(
    method: &str,
    uri: &str,
    query: &[(String, String)],
    headers: &[(String, String)],
    signed: &[String],
    body: &[u8],
) -> String {
    format!(
        "{method}\n{uri}\n{}\n{}\n{}\n{}",
        canonical_query(query),
        canonical_headers(headers, signed),
        signed.join(";"),
        payload_hash(headers, body)
    )
}

/// `SDK-HMAC-SHA256\n<X-Sdk-Date>\n` + the hex SHA-256 of the canonical request.
pub fn string_to_sign(canonical_request: &str, sdk_date: &str) -> String {
    format!(
        "{ALGORITHM}\n{sdk_date}\n{}",
        sha256_hex(canonical_request.as_bytes())
    )
}

/// The hex HMAC-SHA256 of the string to sign, keyed with the secret key itself.
pub fn signature(secret_key: &str, string_to_sign: &str) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret_key.as_bytes());
    hex(hmac::sign(&key, string_to_sign.as_bytes()).as_ref())
}

/// The `Authorization` header (the SDK separates its parts with `, `).
pub fn authorization(access_key: &str, signed_headers: &[String], signature: &str) -> String {
    format!(
        "{ALGORITHM} Access={access_key}, SignedHeaders={}, Signature={signature}",
        signed_headers.join(";")
    )
}

/// A computed signature, with the steps that led to it (tests assert each; a server shows the
/// canonical request when a signature does not match).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    /// The `X-Sdk-Date` value signed.
    pub date: String,
    /// The canonical request.
    pub canonical_request: String,
    /// The string to sign.
    pub string_to_sign: String,
    /// The signed header names, lower case and sorted.
    pub signed_headers: Vec<String>,
    /// The hex signature.
    pub signature: String,
    /// The `Authorization` header.
    pub authorization: String,
    /// The headers signing adds to the request, to be sent with it: `X-Sdk-Date`,
    /// `X-Sdk-Content-Sha256` when the body is not JSON, and `Authorization`.
    pub headers: Vec<(&'static str, String)>,
}

/// Whether the SDK leaves the body of a request with this `Content-Type` unsigned.
fn unsigned_content_type(content_type: &str) -> bool {
    !content_type.contains("application/json") && !content_type.contains("application/bson")
}

/// Signs `request` with the key pair at `unix_seconds`, as the SDK's `Signer.Sign` does: the
/// date becomes `X-Sdk-Date` (replacing one the headers may hold), a `Content-Type` other than
/// JSON adds `X-Sdk-Content-Sha256: UNSIGNED-PAYLOAD`, and every header then present is
/// signed but `Content-Type` and names with `_`.
pub fn sign(
    request: &SignableRequest<'_>,
    access_key: &str,
    secret_key: &str,
    unix_seconds: u64,
) -> Signature {
    let date = sdk_date(unix_seconds);
    let mut added: Vec<(&'static str, String)> = vec![(DATE_HEADER, date.clone())];
    if header_value(request.headers, CONTENT_SHA256_HEADER).is_none()
        && header_value(request.headers, "Content-Type").is_some_and(unsigned_content_type)
    {
        added.push((CONTENT_SHA256_HEADER, UNSIGNED_PAYLOAD.to_string()));
    }
    let mut headers: Vec<(String, String)> = request
        .headers
        .iter()
        .filter(|(name, _)| !name.eq_ignore_ascii_case(DATE_HEADER))
        .cloned()
        .collect();
    headers.extend(added.iter().map(|(k, v)| (k.to_string(), v.clone())));
    let with_date = SignableRequest {
        headers: &headers,
        ..*request
    };
    let signed_headers = signed_header_names(&headers);
    let canonical_request = canonical_request(&with_date, &signed_headers);
    let string_to_sign = string_to_sign(&canonical_request, &date);
    let signature = signature(secret_key, &string_to_sign);
    let authorization = authorization(access_key, &signed_headers, &signature);
    added.push(("Authorization", authorization.clone()));
    Signature {
        date,
        canonical_request,
        string_to_sign,
        signed_headers,
        signature,
        authorization,
        headers: added,
    }
}

/// The parts of an `Authorization` header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedAuthorization {
    /// The access key.
    pub access_key: String,
    /// The signed header names, as listed.
    pub signed_headers: Vec<String>,
    /// The hex signature.
    pub signature: String,
}

/// Reads an `SDK-HMAC-SHA256 Access=…, SignedHeaders=…, Signature=…` header (parts in any
/// order, with or without spaces after the commas).
pub fn parse_authorization(header: &str) -> Option<ParsedAuthorization> {
    let rest = header.trim().strip_prefix(ALGORITHM)?;
    if !rest.starts_with(' ') {
        return None;
    }
    let (mut access, mut signed, mut signature) = (None, None, None);
    for part in rest.split(',') {
        let (k, v) = part.trim().split_once('=')?;
        let slot = match k {
            "Access" => &mut access,
            "SignedHeaders" => &mut signed,
            "Signature" => &mut signature,
            _ => return None,
        };
        if slot.replace(v.trim().to_string()).is_some() {
            return None;
        }
    }
    let signed: String = signed?;
    Some(ParsedAuthorization {
        access_key: access.filter(|a| !a.is_empty())?,
        signed_headers: signed
            .split(';')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
        signature: signature?,
    })
}

/// A request as a server received it, for [`verify`].
#[derive(Clone, Copy, Debug)]
pub struct ReceivedRequest<'a> {
    /// The method.
    pub method: &'a str,
    /// The path as it came on the wire, still percent-encoded.
    pub path: &'a str,
    /// The raw query string (without `?`), still encoded; empty without one.
    pub query: &'a str,
    /// Every header received.
    pub headers: &'a [(String, String)],
    /// The body.
    pub body: &'a [u8],
}

/// A request whose signature holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    /// The access key that signed it.
    pub access_key: String,
    /// The headers it signed, lower case.
    pub signed_headers: Vec<String>,
}

/// Why a signature was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// No `Authorization` header.
    #[error("no Authorization header")]
    MissingAuthorization,
    /// An `Authorization` header that is not `SDK-HMAC-SHA256 Access=…, SignedHeaders=…, Signature=…`.
    #[error("the Authorization header is not an SDK-HMAC-SHA256 one")]
    MalformedAuthorization,
    /// An access key the server does not know.
    #[error("unknown access key {0:?}")]
    UnknownAccessKey(String),
    /// `X-Sdk-Date` is not signed, missing or unreadable.
    #[error("X-Sdk-Date is missing, unsigned or not YYYYMMDDTHHMMSSZ")]
    BadDate,
    /// `X-Sdk-Date` is too far from the server's clock.
    #[error(
        "X-Sdk-Date is {skew_seconds} s away from the server's time (at most {MAX_CLOCK_SKEW_SECONDS} s)"
    )]
    Expired {
        /// How far, in seconds.
        skew_seconds: u64,
    },
    /// A header named in `SignedHeaders` is not in the request.
    #[error("signed header {0:?} is not in the request")]
    MissingSignedHeader(String),
    /// The signature does not match the one recomputed from the request.
    #[error("the signature does not match; the server's canonical request:\n{canonical_request}")]
    Mismatch {
        /// The server's canonical request (security token redacted).
        canonical_request: String,
    },
}

/// Verifies a received request's signature as the gateway does: the `Authorization` header
/// read, the key's secret found by `secret_for(access_key)`, `X-Sdk-Date` signed and within
/// [`MAX_CLOCK_SKEW_SECONDS`] of `now` (Unix seconds), every signed header present, and the
/// signature recomputed over the decoded and re-escaped path and query, the signed headers and
/// the body. The comparison is constant-time.
pub fn verify(
    request: &ReceivedRequest<'_>,
    secret_for: impl FnOnce(&str) -> Option<String>,
    now: u64,
) -> Result<Verified, SignatureError> {
    let header = header_value(request.headers, "Authorization")
        .ok_or(SignatureError::MissingAuthorization)?;
    let auth = parse_authorization(header).ok_or(SignatureError::MalformedAuthorization)?;
    let secret = secret_for(&auth.access_key)
        .ok_or_else(|| SignatureError::UnknownAccessKey(auth.access_key.clone()))?;
    let date_name = DATE_HEADER.to_ascii_lowercase();
    if !auth.signed_headers.contains(&date_name) {
        return Err(SignatureError::BadDate);
    }
    let date = header_value(request.headers, DATE_HEADER).ok_or(SignatureError::BadDate)?;
    let signed_at = parse_sdk_date(date.trim()).ok_or(SignatureError::BadDate)?;
    let skew_seconds = now.abs_diff(signed_at);
    if skew_seconds > MAX_CLOCK_SKEW_SECONDS {
        return Err(SignatureError::Expired { skew_seconds });
    }
    for name in &auth.signed_headers {
        if header_value(request.headers, name).is_none() {
            return Err(SignatureError::MissingSignedHeader(name.clone()));
        }
    }
    // Segments are decoded one by one, so an escaped `/` inside a segment is escaped again
    // rather than splitting it.
    let uri = uri_of_segments(
        request
            .path
            .split('/')
            .map(|segment| escape(&unescape(segment, false))),
    );
    let query: Vec<(String, String)> = request
        .query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (unescape(k, true), unescape(v, true))
        })
        .collect();
    let canonical = assemble(
        request.method,
        &uri,
        &query,
        request.headers,
        &auth.signed_headers,
        request.body,
    );
    let sts = string_to_sign(&canonical, date.trim());
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes());
    let given = unhex(&auth.signature.to_ascii_lowercase()).unwrap_or_default();
    hmac::verify(&key, sts.as_bytes(), &given).map_err(|_| SignatureError::Mismatch {
        canonical_request: redact_token(&canonical),
    })?;
    Ok(Verified {
        access_key: auth.access_key,
        signed_headers: auth.signed_headers,
    })
}

/// [`verify`] for a request as an `http` server (axum) receives it: its parts and its body.
#[cfg(feature = "cloud")]
pub fn verify_parts(
    parts: &http::request::Parts,
    body: &[u8],
    secret_for: impl FnOnce(&str) -> Option<String>,
    now: u64,
) -> Result<Verified, SignatureError> {
    let headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .map(|(k, v)| {
            (
                k.to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    verify(
        &ReceivedRequest {
            method: parts.method.as_str(),
            path: parts.uri.path(),
            query: parts.uri.query().unwrap_or_default(),
            headers: &headers,
            body,
        },
        secret_for,
        now,
    )
}

fn redact_token(canonical: &str) -> String {
    canonical
        .lines()
        .map(|line| {
            if line.starts_with("x-security-token:") {
                "x-security-token:<redacted>"
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// `20060102T150405Z`, the date of the SDK's signer tests.
    const GO_REFERENCE_TIME: u64 = 1_136_214_245;

    /// huaweicloud-sdk-go-v3 `core/auth/signer/signer_test.go`, `TestSigner_Sign` "test1": a
    /// GET with `limit=1`; the header with an underscore is sent but not signed.
    #[test]
    fn sdk_get_vector() {
        let query = pairs(&[("limit", "1")]);
        let headers = pairs(&[("TEST_UNDERSCORE", "TEST_VALUE")]);
        let request = SignableRequest {
            method: "GET",
            path: "/path",
            query: &query,
            headers: &headers,
            body: b"",
        };
        let signed = sign(&request, "AccessKey", "SecretKey", GO_REFERENCE_TIME);
        assert_eq!(
            signed.canonical_request,
            format!(
                "GET\n/path/\nlimit=1\nx-sdk-date:20060102T150405Z\n\nx-sdk-date\n{EMPTY_PAYLOAD_SHA256}"
            )
        );
        assert_eq!(signed.date, "20060102T150405Z");
        assert_eq!(
            signed.authorization,
            "SDK-HMAC-SHA256 Access=AccessKey, SignedHeaders=x-sdk-date, Signature=5a2ce64c865e0e6046321c6f3d5a77ba8413eeaf355c3166c03d58d02ac79624"
        );
        assert_eq!(
            signed.headers,
            vec![
                ("X-Sdk-Date", "20060102T150405Z".to_string()),
                ("Authorization", signed.authorization.clone())
            ]
        );
    }

    /// The same test's "test2": a POST whose body is the SDK's JSON encoding of
    /// `{Name: "test", Id: 1}` — Go's `json.Encoder` ends it with a newline, which is hashed
    /// with the rest. `Content-Type: application/json` is sent unsigned, and a date already in
    /// the headers is replaced by the one passed in.
    #[test]
    fn sdk_post_vector() {
        let query = pairs(&[("key", "value")]);
        let headers = pairs(&[
            ("X-Sdk-Date", "20250101T000000Z"),
            ("TEST_UNDERSCORE", "TEST_VALUE"),
            ("Content-Type", "application/json"),
        ]);
        let request = SignableRequest {
            method: "POST",
            path: "/path",
            query: &query,
            headers: &headers,
            body: b"{\"Name\":\"test\",\"Id\":1}\n",
        };
        let signed = sign(&request, "AccessKey", "SecretKey", GO_REFERENCE_TIME);
        assert_eq!(signed.signed_headers, ["x-sdk-date"]);
        assert_eq!(
            signed.authorization,
            "SDK-HMAC-SHA256 Access=AccessKey, SignedHeaders=x-sdk-date, Signature=cecc2af119b18ab70b4d094c0750f3b42c02f254903179a0fc2cc72fc9db4f59"
        );
    }

    /// `TestSigner_canonicalQueryString`: a repeated name sorted by value, `/` and every
    /// reserved or non-ASCII byte escaped, a space as `%20`. The parameters come in scrambled
    /// here; the SDK's come from a Go map, in no order.
    #[test]
    fn sdk_canonical_query_vector() {
        let query = pairs(&[
            ("test", "一 (&=?!#%.*)"),
            ("multi", "3"),
            ("limit", "1"),
            ("multi", "1"),
            ("path", "/tmp/123"),
            ("enable", "true"),
            ("multi", "2"),
        ]);
        assert_eq!(
            canonical_query(&query),
            "enable=true&limit=1&multi=1&multi=2&multi=3&path=%2Ftmp%2F123&test=%E4%B8%80%20%28%26%3D%3F%21%23%25.%2A%29"
        );
        assert_eq!(canonical_query(&pairs(&[("empty", "")])), "empty=");
        assert_eq!(canonical_query(&[]), "");
    }

    #[test]
    fn canonical_uris_end_with_a_slash() {
        for (path, uri) in [
            ("", "/"),
            ("/", "/"),
            ("/path", "/path/"),
            ("/v1/p/cloudservers/", "/v1/p/cloudservers/"),
            ("/a b/c*d", "/a%20b/c%2Ad/"),
            ("/v3/projects/中", "/v3/projects/%E4%B8%AD/"),
        ] {
            assert_eq!(canonical_uri(path), uri, "{path:?}");
        }
    }

    #[test]
    fn which_headers_are_signed() {
        let headers = pairs(&[
            ("User-Agent", "karpenter-rs/0.1"),
            ("Content-Type", "application/json;charset=UTF-8"),
            ("content-type-options", "x"),
            ("X-Project-Id", "0123"),
            ("X_Forwarded", "y"),
            ("X-Security-Token", " token "),
            ("x-project-id", "0123"),
        ]);
        assert_eq!(
            signed_header_names(&headers),
            ["user-agent", "x-project-id", "x-security-token"]
        );
        assert_eq!(
            canonical_headers(&headers, &signed_header_names(&headers)),
            "user-agent:karpenter-rs/0.1\nx-project-id:0123\nx-project-id:0123\nx-security-token:token\n"
        );
        assert_eq!(canonical_headers(&headers, &[]), "\n");
    }

    #[test]
    fn a_body_that_is_not_json_is_left_unsigned() {
        let headers = pairs(&[("Content-Type", "application/octet-stream")]);
        let request = SignableRequest {
            method: "PUT",
            path: "/o",
            query: &[],
            headers: &headers,
            body: b"bytes",
        };
        let signed = sign(&request, "ak", "sk", GO_REFERENCE_TIME);
        assert!(
            signed
                .canonical_request
                .ends_with("\nx-sdk-content-sha256;x-sdk-date\nUNSIGNED-PAYLOAD"),
            "{}",
            signed.canonical_request
        );
        assert!(
            signed
                .headers
                .contains(&("X-Sdk-Content-Sha256", "UNSIGNED-PAYLOAD".into()))
        );
        let json = pairs(&[("Content-Type", "application/json;charset=UTF-8")]);
        let signed = sign(
            &SignableRequest {
                headers: &json,
                ..request
            },
            "ak",
            "sk",
            GO_REFERENCE_TIME,
        );
        assert!(signed.canonical_request.ends_with(&sha256_hex(b"bytes")));
        assert_eq!(signed.headers.len(), 2);
    }

    #[test]
    fn escaping_both_ways() {
        assert_eq!(escape("AZaz09-_.~"), "AZaz09-_.~");
        assert_eq!(escape("a b+c/d=e&f:g"), "a%20b%2Bc%2Fd%3De%26f%3Ag");
        assert_eq!(unescape("a%20b%2Bc%2fd+e", true), "a b+c/d e");
        assert_eq!(unescape("a+b%", false), "a+b%");
        assert_eq!(unescape("%zz%4", false), "%zz%4");
        assert_eq!(unescape("%E4%B8%80", false), "一");
        for s in ["一 (&=?!#%.*)", "/tmp/123", "plain", ""] {
            assert_eq!(unescape(&escape(s), true), s);
        }
    }

    #[test]
    fn authorization_headers_are_read_back() {
        let parsed = parse_authorization(
            "SDK-HMAC-SHA256 Access=AccessKey, SignedHeaders=user-agent;x-sdk-date, Signature=abc",
        )
        .unwrap();
        assert_eq!(parsed.access_key, "AccessKey");
        assert_eq!(parsed.signed_headers, ["user-agent", "x-sdk-date"]);
        assert_eq!(parsed.signature, "abc");
        assert!(
            parse_authorization("SDK-HMAC-SHA256 Signature=abc,SignedHeaders=x-sdk-date,Access=a")
                .is_some()
        );
        for bad in [
            "",
            "Bearer x",
            "SDK-HMAC-SHA256Access=a, SignedHeaders=x, Signature=s",
            "SDK-HMAC-SHA256 Access=a, SignedHeaders=x",
            "SDK-HMAC-SHA256 Access=, SignedHeaders=x, Signature=s",
            "SDK-HMAC-SHA256 Access=a, Access=b, SignedHeaders=x, Signature=s",
            "SDK-HMAC-SHA256 Access=a, SignedHeaders=x, Signature=s, Credential=c",
        ] {
            assert_eq!(parse_authorization(bad), None, "{bad:?}");
        }
    }

    /// A request signed here and received as it goes on the wire: path segments and query
    /// escaped, the signing headers added.
    fn received(
        signed_request: &SignableRequest<'_>,
        signature: &Signature,
    ) -> (String, String, Vec<(String, String)>) {
        let path = signed_request
            .path
            .split('/')
            .map(escape)
            .collect::<Vec<_>>()
            .join("/");
        let query = signed_request
            .query
            .iter()
            .map(|(k, v)| format!("{}={}", escape(k), escape(v)))
            .collect::<Vec<_>>()
            .join("&");
        let mut headers = signed_request.headers.to_vec();
        headers.extend(
            signature
                .headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone())),
        );
        (path, query, headers)
    }

    #[test]
    fn verify_accepts_what_sign_produced_and_nothing_else() {
        let query = pairs(&[("name", "cn-north-4"), ("tag", "a b/c"), ("tag", "x")]);
        let headers = pairs(&[
            ("User-Agent", "karpenter-rs"),
            ("X-Project-Id", "0123"),
            ("X-Security-Token", "token"),
            ("Content-Type", "application/json"),
        ]);
        let body = br#"{"kind":"Node"}"#;
        let request = SignableRequest {
            method: "POST",
            path: "/api/v3/projects/0123/clusters/c 1/nodes",
            query: &query,
            headers: &headers,
            body,
        };
        let now = 1_700_000_000;
        let signature = sign(&request, "AK", "SK", now);
        let (path, raw_query, received_headers) = received(&request, &signature);
        assert_eq!(path, "/api/v3/projects/0123/clusters/c%201/nodes");
        let incoming = ReceivedRequest {
            method: "POST",
            path: &path,
            query: &raw_query,
            headers: &received_headers,
            body,
        };
        let secret = |ak: &str| (ak == "AK").then(|| "SK".to_string());
        let verified = verify(&incoming, secret, now + 60).unwrap();
        assert_eq!(verified.access_key, "AK");
        assert_eq!(
            verified.signed_headers,
            [
                "user-agent",
                "x-project-id",
                "x-sdk-date",
                "x-security-token"
            ]
        );

        // A `+` for a space in the query, as form encoders write it, means the same.
        let plus_query = raw_query.replace("%20", "+");
        assert!(
            verify(
                &ReceivedRequest {
                    query: &plus_query,
                    ..incoming
                },
                secret,
                now
            )
            .is_ok()
        );

        let wrong_secret = verify(&incoming, |_| Some("other".to_string()), now).unwrap_err();
        match &wrong_secret {
            SignatureError::Mismatch { canonical_request } => {
                assert!(
                    canonical_request.contains("x-security-token:<redacted>")
                        && !canonical_request.contains("x-security-token:token"),
                    "{canonical_request}"
                );
            }
            other => panic!("{other:?}"),
        }
        let tampered = verify(
            &ReceivedRequest {
                body: br#"{"kind":"Node","count":9}"#,
                ..incoming
            },
            secret,
            now,
        );
        assert!(matches!(tampered, Err(SignatureError::Mismatch { .. })));
        let other_path = verify(
            &ReceivedRequest {
                path: "/api/v3/projects/0123/clusters/c%201/nodes/n",
                ..incoming
            },
            secret,
            now,
        );
        assert!(matches!(other_path, Err(SignatureError::Mismatch { .. })));
        assert_eq!(
            verify(&incoming, secret, now + MAX_CLOCK_SKEW_SECONDS + 1),
            Err(SignatureError::Expired {
                skew_seconds: MAX_CLOCK_SKEW_SECONDS + 1
            })
        );
        assert_eq!(
            verify(&incoming, |_| None, now),
            Err(SignatureError::UnknownAccessKey("AK".into()))
        );
        let without_token: Vec<(String, String)> = received_headers
            .iter()
            .filter(|(k, _)| k != "X-Security-Token")
            .cloned()
            .collect();
        assert_eq!(
            verify(
                &ReceivedRequest {
                    headers: &without_token,
                    ..incoming
                },
                secret,
                now
            ),
            Err(SignatureError::MissingSignedHeader(
                "x-security-token".into()
            ))
        );
        let unauthenticated: Vec<(String, String)> = received_headers
            .iter()
            .filter(|(k, _)| k != "Authorization")
            .cloned()
            .collect();
        assert_eq!(
            verify(
                &ReceivedRequest {
                    headers: &unauthenticated,
                    ..incoming
                },
                secret,
                now
            ),
            Err(SignatureError::MissingAuthorization)
        );
    }

    #[test]
    fn the_date_must_be_signed() {
        let headers = pairs(&[
            ("X-Sdk-Date", "20060102T150405Z"),
            (
                "Authorization",
                "SDK-HMAC-SHA256 Access=AK, SignedHeaders=user-agent, Signature=00",
            ),
            ("User-Agent", "x"),
        ]);
        let request = ReceivedRequest {
            method: "GET",
            path: "/",
            query: "",
            headers: &headers,
            body: b"",
        };
        assert_eq!(
            verify(&request, |_| Some("SK".into()), GO_REFERENCE_TIME),
            Err(SignatureError::BadDate)
        );
    }
}
