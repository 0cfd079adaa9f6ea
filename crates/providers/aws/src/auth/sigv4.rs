//! AWS Signature Version 4: every request to EC2, SQS, SSM, IAM and the Pricing API carries
//! one. Pure: the caller passes the time, so signatures are reproducible in tests.

use ring::{digest, hmac};

/// Credentials a request is signed with.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// `AKIA…` or `ASIA…`.
    pub access_key_id: String,
    /// The secret key.
    pub secret_access_key: String,
    /// The session token of temporary credentials (IRSA, Pod Identity).
    pub session_token: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the secret or the token, even in debug logs.
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

/// What is signed: the request's parts, with header names in any case.
pub struct SignableRequest<'a> {
    /// `GET`, `POST`.
    pub method: &'a str,
    /// The path, already percent-encoded (`/`).
    pub path: &'a str,
    /// Query parameters, not encoded.
    pub query: &'a [(String, String)],
    /// Headers to sign; `host` must be among them.
    pub headers: &'a [(String, String)],
    /// The body.
    pub body: &'a [u8],
}

/// The headers to add: `authorization`, `x-amz-date`, `x-amz-content-sha256`-less (EC2 and
/// friends do not need it) and, for temporary credentials, `x-amz-security-token`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    /// `x-amz-date` (`20150830T123600Z`).
    pub amz_date: String,
    /// The `authorization` header.
    pub authorization: String,
    /// The hex signature alone.
    pub signature: String,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256_hex(data: &[u8]) -> String {
    hex(digest::digest(&digest::SHA256, data).as_ref())
}

fn hmac(key: &[u8], data: &str) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data.as_bytes())
        .as_ref()
        .to_vec()
}

/// Percent-encodes as SigV4 requires: everything but unreserved characters.
pub fn uri_encode(s: &str) -> String {
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

/// `YYYYMMDDTHHMMSSZ` for seconds since the Unix epoch.
pub fn amz_date(unix_seconds: u64) -> String {
    let seconds = i64::try_from(unix_seconds).unwrap_or(i64::MAX);
    k8s_openapi::jiff::Timestamp::from_second(seconds)
        .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
        .strftime("%Y%m%dT%H%M%SZ")
        .to_string()
}

/// The canonical request, as the service rebuilds it to check the signature.
pub fn canonical_request(request: &SignableRequest<'_>) -> (String, String) {
    let mut query: Vec<(String, String)> = request
        .query
        .iter()
        .map(|(k, v)| (uri_encode(k), uri_encode(v)))
        .collect();
    query.sort();
    let query = query
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&");
    let mut headers: Vec<(String, String)> = request
        .headers
        .iter()
        .map(|(k, v)| {
            let value = v.split_whitespace().collect::<Vec<_>>().join(" ");
            (k.to_ascii_lowercase(), value)
        })
        .collect();
    headers.sort();
    let canonical_headers: String = headers.iter().map(|(k, v)| format!("{k}:{v}\n")).collect();
    let signed_headers = headers
        .iter()
        .map(|(k, _)| k.as_str())
        .collect::<Vec<_>>()
        .join(";");
    let canonical = format!(
        "{}\n{}\n{query}\n{canonical_headers}\n{signed_headers}\n{}",
        request.method,
        request.path,
        sha256_hex(request.body)
    );
    (canonical, signed_headers)
}

/// Signs a request for `service` in `region` at `amz_date`. The request's headers must
/// already include `host` and `x-amz-date` (and `x-amz-security-token` for temporary
/// credentials): they are signed as given.
pub fn sign(
    request: &SignableRequest<'_>,
    credentials: &Credentials,
    region: &str,
    service: &str,
    amz_date: &str,
) -> Signature {
    let date = &amz_date[..8];
    let scope = format!("{date}/{region}/{service}/aws4_request");
    let (canonical, signed_headers) = canonical_request(request);
    let string_to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
        sha256_hex(canonical.as_bytes())
    );
    let mut key = hmac(
        format!("AWS4{}", credentials.secret_access_key).as_bytes(),
        date,
    );
    for part in [region, service, "aws4_request"] {
        key = hmac(&key, part);
    }
    let signature = hex(&hmac(&key, &string_to_sign));
    Signature {
        amz_date: amz_date.to_string(),
        authorization: format!(
            "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed_headers}, Signature={signature}",
            credentials.access_key_id
        ),
        signature,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> Credentials {
        Credentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
            session_token: None,
        }
    }

    fn headers(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// AWS's signing test suite, case `get-vanilla`.
    #[test]
    fn get_vanilla() {
        let h = headers(&[
            ("Host", "example.amazonaws.com"),
            ("X-Amz-Date", "20150830T123600Z"),
        ]);
        let request = SignableRequest {
            method: "GET",
            path: "/",
            query: &[],
            headers: &h,
            body: b"",
        };
        let s = sign(
            &request,
            &example(),
            "us-east-1",
            "service",
            "20150830T123600Z",
        );
        assert_eq!(
            s.signature,
            "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
        );
        assert_eq!(
            s.authorization,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
        );
    }

    /// The worked example of AWS's SigV4 documentation: IAM ListUsers.
    #[test]
    fn iam_list_users_example() {
        let h = headers(&[
            (
                "Content-Type",
                "application/x-www-form-urlencoded; charset=utf-8",
            ),
            ("Host", "iam.amazonaws.com"),
            ("X-Amz-Date", "20150830T123600Z"),
        ]);
        let query = vec![
            ("Version".to_string(), "2010-05-08".to_string()),
            ("Action".to_string(), "ListUsers".to_string()),
        ];
        let request = SignableRequest {
            method: "GET",
            path: "/",
            query: &query,
            headers: &h,
            body: b"",
        };
        let (canonical, _) = canonical_request(&request);
        assert_eq!(
            sha256_hex(canonical.as_bytes()),
            "f536975d06c0309214f805bb90ccff089219ecd68b2577efef23edd43b7e1a59"
        );
        let s = sign(&request, &example(), "us-east-1", "iam", "20150830T123600Z");
        assert_eq!(
            s.signature,
            "5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
        );
    }

    #[test]
    fn dates_and_encoding() {
        assert_eq!(amz_date(1_440_938_160), "20150830T123600Z");
        assert_eq!(amz_date(0), "19700101T000000Z");
        assert_eq!(amz_date(1_709_208_000), "20240229T120000Z");
        assert_eq!(uri_encode("a b/c~d=e"), "a%20b%2Fc~d%3De");
    }

    #[test]
    fn secrets_stay_out_of_debug_output() {
        let mut c = example();
        c.session_token = Some("token-value".into());
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("EXAMPLEKEY") && !shown.contains("token-value"),
            "{shown}"
        );
    }
}
