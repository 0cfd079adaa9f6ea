//! The V3 signature, `ACS3-HMAC-SHA256`: what Alibaba's current SDKs sign every call with, RPC
//! (ECS, VPC, STS) and ROA (ACK) alike. The caller passes the time and the nonce, so the
//! documented example reproduces byte for byte.
//!
//! ```text
//! CanonicalRequest = METHOD \n CanonicalURI \n CanonicalQuery \n CanonicalHeaders \n SignedHeaders \n HashedPayload
//! StringToSign     = "ACS3-HMAC-SHA256" \n hex(sha256(CanonicalRequest))
//! Authorization    = ACS3-HMAC-SHA256 Credential=<AccessKeyId>,SignedHeaders=<…>,Signature=hex(hmac_sha256(secret, StringToSign))
//! ```

use ring::hmac;

use super::{Credentials, hex, percent_encode, sha256_hex};

/// The algorithm's name, first in the string to sign and the `Authorization` header.
pub const ALGORITHM: &str = "ACS3-HMAC-SHA256";

/// `hex(sha256(""))`: the hashed payload of a request without a body, as RPC calls are.
pub const EMPTY_PAYLOAD_SHA256: &str =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// What is signed: the request's parts as they go on the wire.
#[derive(Clone, Copy, Debug)]
pub struct SignableRequest<'a> {
    /// `POST`, `GET`, … (the SDKs' own tests also sign an empty method).
    pub method: &'a str,
    /// The path, not yet encoded: `/` for RPC, the resource path for ROA.
    pub path: &'a str,
    /// The query parameters, not encoded.
    pub query: &'a [(String, String)],
    /// The headers; those that are signed (`host`, `content-type`, `x-acs-*`) are picked out
    /// here, in any case, values trimmed, repeated names joined with `,` in sorted order.
    pub headers: &'a [(String, String)],
    /// `hex(sha256(body))`, also sent as `x-acs-content-sha256`.
    pub hashed_payload: &'a str,
}

/// A computed signature with the steps that led to it (a server compares the canonical request
/// when a signature does not match; tests assert every step).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    /// The canonical request.
    pub canonical_request: String,
    /// The string to sign.
    pub string_to_sign: String,
    /// The signed header names, `;`-separated.
    pub signed_headers: String,
    /// The hex signature.
    pub signature: String,
    /// The `Authorization` header.
    pub authorization: String,
}

/// `hex(sha256(body))`.
pub fn hashed_payload(body: &[u8]) -> String {
    sha256_hex(body)
}

/// The canonical URI: the path with each segment percent-encoded, `/` for an empty path.
pub fn canonical_uri(path: &str) -> String {
    if path.is_empty() {
        return "/".into();
    }
    path.split('/')
        .map(percent_encode)
        .collect::<Vec<_>>()
        .join("/")
}

/// The canonical query: names and values percent-encoded, sorted by name, `name=value` joined
/// with `&` (a parameter without a value keeps its `=`).
pub fn canonical_query(query: &[(String, String)]) -> String {
    let mut pairs: Vec<(String, String)> = query
        .iter()
        .map(|(k, v)| (percent_encode(k), percent_encode(v)))
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// Whether a header takes part in the signature.
pub fn is_signed_header(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name == "host" || name == "content-type" || name.starts_with("x-acs-")
}

/// The canonical headers (`name:value\n` each) and the signed header names (`;`-separated).
pub fn canonical_headers(headers: &[(String, String)]) -> (String, String) {
    let mut by_name: std::collections::BTreeMap<String, Vec<&str>> = Default::default();
    for (name, value) in headers {
        if is_signed_header(name) {
            by_name
                .entry(name.to_ascii_lowercase())
                .or_default()
                .push(value.trim());
        }
    }
    let mut canonical = String::new();
    for (name, values) in &mut by_name {
        values.sort_unstable();
        canonical.push_str(&format!("{name}:{}\n", values.join(",")));
    }
    let signed = by_name.keys().cloned().collect::<Vec<_>>().join(";");
    (canonical, signed)
}

/// The canonical request and the signed header names.
pub fn canonical_request(request: &SignableRequest<'_>) -> (String, String) {
    let (headers, signed) = canonical_headers(request.headers);
    let canonical = format!(
        "{}\n{}\n{}\n{headers}\n{signed}\n{}",
        request.method,
        canonical_uri(request.path),
        canonical_query(request.query),
        request.hashed_payload
    );
    (canonical, signed)
}

/// `ACS3-HMAC-SHA256\n` + the hex SHA-256 of the canonical request.
pub fn string_to_sign(canonical_request: &str) -> String {
    format!("{ALGORITHM}\n{}", sha256_hex(canonical_request.as_bytes()))
}

/// The hex HMAC-SHA256 of the string to sign, keyed with the secret.
pub fn signature(access_key_secret: &str, string_to_sign: &str) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, access_key_secret.as_bytes());
    hex(hmac::sign(&key, string_to_sign.as_bytes()).as_ref())
}

/// The `Authorization` header.
pub fn authorization(access_key_id: &str, signed_headers: &str, signature: &str) -> String {
    format!(
        "{ALGORITHM} Credential={access_key_id},SignedHeaders={signed_headers},Signature={signature}"
    )
}

/// Signs `request` with `credentials`. The headers must already hold everything that is to be
/// signed (see [`headers_to_sign`]).
pub fn sign(request: &SignableRequest<'_>, credentials: &Credentials) -> Signature {
    let (canonical_request, signed_headers) = canonical_request(request);
    let string_to_sign = string_to_sign(&canonical_request);
    let signature = signature(&credentials.access_key_secret, &string_to_sign);
    Signature {
        authorization: authorization(&credentials.access_key_id, &signed_headers, &signature),
        canonical_request,
        string_to_sign,
        signed_headers,
        signature,
    }
}

/// The common headers of a V3 call, as the SDKs set them: `host`, `x-acs-action`,
/// `x-acs-version`, `x-acs-date` (`unix_seconds` as ISO 8601 UTC), `x-acs-signature-nonce`,
/// `x-acs-content-sha256`, and — for STS credentials — `x-acs-security-token` with
/// `x-acs-accesskey-id`.
pub fn headers_to_sign(
    host: &str,
    action: &str,
    version: &str,
    unix_seconds: u64,
    nonce: &str,
    hashed_payload: &str,
    credentials: &Credentials,
) -> Vec<(String, String)> {
    let mut headers = vec![
        ("host".to_string(), host.to_string()),
        ("x-acs-action".to_string(), action.to_string()),
        ("x-acs-version".to_string(), version.to_string()),
        ("x-acs-date".to_string(), crate::time::iso8601(unix_seconds)),
        ("x-acs-signature-nonce".to_string(), nonce.to_string()),
        (
            "x-acs-content-sha256".to_string(),
            hashed_payload.to_string(),
        ),
    ];
    if let Some(token) = &credentials.security_token {
        headers.push(("x-acs-security-token".into(), token.clone()));
        headers.push((
            "x-acs-accesskey-id".into(),
            credentials.access_key_id.clone(),
        ));
    }
    headers
}

/// The parts of an `Authorization` header: access key id, signed header names, signature.
pub fn parse_authorization(header: &str) -> Option<(&str, &str, &str)> {
    let rest = header.strip_prefix(ALGORITHM)?.trim_start();
    let mut credential = None;
    let mut signed = None;
    let mut signature = None;
    for part in rest.split(',') {
        let (k, v) = part.trim().split_once('=')?;
        match k {
            "Credential" => credential = Some(v),
            "SignedHeaders" => signed = Some(v),
            "Signature" => signature = Some(v),
            _ => return None,
        }
    }
    Some((credential?, signed?, signature?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// The worked example of Alibaba's "Request syntax and signature method V3"
    /// (https://www.alibabacloud.com/help/en/sdk/product-overview/v3-request-structure-and-signature,
    /// "Signature examples" with fixed parameter values): RunInstances on ecs.cn-shanghai. The
    /// page gives the canonical request, the string to sign and the signature; all three are
    /// asserted.
    #[test]
    fn documented_v3_example() {
        let credentials = Credentials::new("YourAccessKeyId", "YourAccessKeySecret");
        let headers = headers_to_sign(
            "ecs.cn-shanghai.aliyuncs.com",
            "RunInstances",
            "2014-05-26",
            1_698_315_752, // 2023-10-26T10:22:32Z
            "3156853299f313e23d1673dc12e1703d",
            &hashed_payload(b""),
            &credentials,
        );
        let query = pairs(&[
            (
                "ImageId",
                "win2019_1809_x64_dtc_zh-cn_40G_alibase_20230811.vhd",
            ),
            ("RegionId", "cn-shanghai"),
        ]);
        let request = SignableRequest {
            method: "POST",
            path: "/",
            query: &query,
            headers: &headers,
            hashed_payload: EMPTY_PAYLOAD_SHA256,
        };
        let signed = sign(&request, &credentials);
        assert_eq!(
            signed.canonical_request,
            "POST\n\
             /\n\
             ImageId=win2019_1809_x64_dtc_zh-cn_40G_alibase_20230811.vhd&RegionId=cn-shanghai\n\
             host:ecs.cn-shanghai.aliyuncs.com\n\
             x-acs-action:RunInstances\n\
             x-acs-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n\
             x-acs-date:2023-10-26T10:22:32Z\n\
             x-acs-signature-nonce:3156853299f313e23d1673dc12e1703d\n\
             x-acs-version:2014-05-26\n\
             \n\
             host;x-acs-action;x-acs-content-sha256;x-acs-date;x-acs-signature-nonce;x-acs-version\n\
             e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            signed.string_to_sign,
            "ACS3-HMAC-SHA256\n7ea06492da5221eba5297e897ce16e55f964061054b7695beedaac1145b1e259"
        );
        assert_eq!(
            signed.signature,
            "06563a9e1b43f5dfe96b81484da74bceab24a1d853912eee15083a6f0f3283c0"
        );
        assert_eq!(
            signed.authorization,
            "ACS3-HMAC-SHA256 Credential=YourAccessKeyId,SignedHeaders=host;x-acs-action;x-acs-content-sha256;x-acs-date;x-acs-signature-nonce;x-acs-version,Signature=06563a9e1b43f5dfe96b81484da74bceab24a1d853912eee15083a6f0f3283c0"
        );
        assert_eq!(
            parse_authorization(&signed.authorization),
            Some((
                "YourAccessKeyId",
                "host;x-acs-action;x-acs-content-sha256;x-acs-date;x-acs-signature-nonce;x-acs-version",
                "06563a9e1b43f5dfe96b81484da74bceab24a1d853912eee15083a6f0f3283c0"
            ))
        );
    }

    /// The SDK's own unit tests of `GetAuthorization`, in aliyun/darabonba-openapi-util: an empty
    /// value keeps its `=`, header names of any case merge, their values sorted and joined.
    /// `golang/service/service_test.go` `Test_GetAuthorization` signs with an empty method;
    /// `python/tests/test_client.py` `test_get_authorization` with the default `GET`.
    #[test]
    fn sdk_get_authorization_vectors() {
        let query = pairs(&[("test", "ok"), ("empty", "")]);
        let headers = pairs(&[("x-acs-test", "http"), ("x-acs-TEST", "https")]);
        let credentials = Credentials::new("acesskey", "secret");
        let payload = "55e12e91650d2fec56ec74e1d3e4ddbfce2ef3a65890c2a19ecf88a307e76a23";
        for (method, expected) in [
            (
                "",
                "4ab59fffe3c5738ff8a2729f90cc04fe18b02a4b15b2102cbaf92f9ff3df2ea3",
            ),
            (
                "GET",
                "d16b30a7699ae9e43875b13195b2f81bcc3ed10c14a9b5eb780e51619aa50be1",
            ),
        ] {
            let request = SignableRequest {
                method,
                path: "",
                query: &query,
                headers: &headers,
                hashed_payload: payload,
            };
            let signed = sign(&request, &credentials);
            assert!(
                signed
                    .canonical_request
                    .contains("\n/\nempty=&test=ok\nx-acs-test:http,https\n\nx-acs-test\n"),
                "{}",
                signed.canonical_request
            );
            assert_eq!(
                signed.authorization,
                format!(
                    "ACS3-HMAC-SHA256 Credential=acesskey,SignedHeaders=x-acs-test,Signature={expected}"
                ),
                "method {method:?}"
            );
        }
    }

    #[test]
    fn sts_credentials_sign_their_token() {
        let credentials =
            Credentials::new("STS.NUgYrLnoC37mZZCNnAbez", "s").with_security_token("CAIS-token");
        let headers = headers_to_sign(
            "ecs.cn-hangzhou.aliyuncs.com",
            "DescribeRegions",
            "2014-05-26",
            0,
            "n",
            EMPTY_PAYLOAD_SHA256,
            &credentials,
        );
        let request = SignableRequest {
            method: "POST",
            path: "/",
            query: &[],
            headers: &headers,
            hashed_payload: EMPTY_PAYLOAD_SHA256,
        };
        let signed = sign(&request, &credentials);
        assert_eq!(
            signed.signed_headers,
            "host;x-acs-accesskey-id;x-acs-action;x-acs-content-sha256;x-acs-date;x-acs-security-token;x-acs-signature-nonce;x-acs-version"
        );
        assert!(
            signed
                .canonical_request
                .contains("x-acs-security-token:CAIS-token\n")
        );
    }

    #[test]
    fn canonical_parts() {
        assert_eq!(canonical_uri(""), "/");
        assert_eq!(
            canonical_uri("/clusters/c 1/nodepools"),
            "/clusters/c%201/nodepools"
        );
        assert_eq!(
            canonical_query(&pairs(&[
                ("b", "a b*~"),
                ("a", "中"),
                ("Tag.1.Key", "k8s/x")
            ])),
            "Tag.1.Key=k8s%2Fx&a=%E4%B8%AD&b=a%20b%2A~"
        );
        let (canonical, signed) = canonical_headers(&pairs(&[
            ("X-Acs-Date", " 2023-10-26T10:22:32Z "),
            ("user-agent", "curl"),
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("accept", "application/json"),
        ]));
        assert_eq!(
            canonical,
            "content-type:application/x-www-form-urlencoded\nx-acs-date:2023-10-26T10:22:32Z\n"
        );
        assert_eq!(signed, "content-type;x-acs-date");
        assert_eq!(parse_authorization("Bearer x"), None);
    }
}
