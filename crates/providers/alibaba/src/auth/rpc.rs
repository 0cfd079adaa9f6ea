//! The legacy RPC signature (`SignatureVersion=1.0`, `SignatureMethod=HMAC-SHA1`): every
//! parameter — the call's own and the common ones — in the query or the form body, signed as
//!
//! ```text
//! StringToSign = METHOD & percent("/") & percent(sorted "name=value" pairs, each percent-encoded, joined with "&")
//! Signature    = base64(hmac_sha1(secret + "&", StringToSign))
//! ```
//!
//! The current SDKs sign ECS and VPC calls with [`super::acs3`] instead; the credential chain
//! still signs STS `AssumeRole` this way, as the official credentials library does.

use base64::Engine as _;
use ring::hmac;

use super::{Credentials, percent_encode};

/// The sorted, encoded `name=value&…` of the parameters (`Signature` left out).
pub fn canonicalized_query(params: &[(String, String)]) -> String {
    let mut pairs: Vec<(String, String)> = params
        .iter()
        .filter(|(k, _)| k != "Signature")
        .map(|(k, v)| (percent_encode(k), percent_encode(v)))
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// `METHOD&%2F&` + the percent-encoded canonicalized query.
pub fn string_to_sign(method: &str, params: &[(String, String)]) -> String {
    format!(
        "{method}&{}&{}",
        percent_encode("/"),
        percent_encode(&canonicalized_query(params))
    )
}

/// The base64 HMAC-SHA1 of the string to sign, keyed with `secret&`.
pub fn signature(access_key_secret: &str, string_to_sign: &str) -> String {
    // Alibaba's RPC scheme appends "&" to the secret (room for a token secret that was never
    // used); SHA-1 is what the scheme fixes, hence ring's legacy-use-only key.
    let key = hmac::Key::new(
        hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
        format!("{access_key_secret}&").as_bytes(),
    );
    base64::engine::general_purpose::STANDARD.encode(hmac::sign(&key, string_to_sign.as_bytes()))
}

/// The signature of `params` sent with `method`.
pub fn sign(method: &str, params: &[(String, String)], access_key_secret: &str) -> String {
    signature(access_key_secret, &string_to_sign(method, params))
}

/// The call's `params` with the common parameters added (`Action`, `Version`, `Format=JSON`,
/// `AccessKeyId`, `SecurityToken` for STS credentials, `SignatureMethod`, `SignatureVersion`,
/// `SignatureNonce`, `Timestamp`) and the `Signature` last.
pub fn signed_params(
    method: &str,
    action: &str,
    version: &str,
    params: &[(String, String)],
    credentials: &Credentials,
    unix_seconds: u64,
    nonce: &str,
) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = params.to_vec();
    let mut common = vec![
        ("Action", action.to_string()),
        ("Version", version.to_string()),
        ("Format", "JSON".to_string()),
        ("AccessKeyId", credentials.access_key_id.clone()),
        ("SignatureMethod", "HMAC-SHA1".to_string()),
        ("SignatureVersion", "1.0".to_string()),
        ("SignatureNonce", nonce.to_string()),
        ("Timestamp", crate::time::iso8601(unix_seconds)),
    ];
    if let Some(token) = &credentials.security_token {
        common.push(("SecurityToken", token.clone()));
    }
    all.extend(common.into_iter().map(|(k, v)| (k.to_string(), v)));
    let signature = sign(method, &all, &credentials.access_key_secret);
    all.push(("Signature".into(), signature));
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// The fixed-parameter example of Alibaba's "Request syntax and signature method V2 for RPC
    /// APIs" (https://www.alibabacloud.com/help/en/sdk/product-overview/rpc-mechanism): ECS
    /// DescribeDedicatedHosts with `testid` / `testsecret`.
    #[test]
    fn documented_rpc_example() {
        let params = pairs(&[
            ("AccessKeyId", "testid"),
            ("Action", "DescribeDedicatedHosts"),
            ("Format", "JSON"),
            ("RegionId", "cn-beijing"),
            ("SignatureMethod", "HMAC-SHA1"),
            ("SignatureNonce", "edb2b34af0af9a6d14deaf7c1a5315eb"),
            ("SignatureVersion", "1.0"),
            ("Timestamp", "2023-03-13T08:34:30Z"),
            ("Version", "2014-05-26"),
        ]);
        assert_eq!(
            canonicalized_query(&params),
            "AccessKeyId=testid&Action=DescribeDedicatedHosts&Format=JSON&RegionId=cn-beijing&SignatureMethod=HMAC-SHA1&SignatureNonce=edb2b34af0af9a6d14deaf7c1a5315eb&SignatureVersion=1.0&Timestamp=2023-03-13T08%3A34%3A30Z&Version=2014-05-26"
        );
        assert_eq!(
            string_to_sign("GET", &params),
            "GET&%2F&AccessKeyId%3Dtestid%26Action%3DDescribeDedicatedHosts%26Format%3DJSON%26RegionId%3Dcn-beijing%26SignatureMethod%3DHMAC-SHA1%26SignatureNonce%3Dedb2b34af0af9a6d14deaf7c1a5315eb%26SignatureVersion%3D1.0%26Timestamp%3D2023-03-13T08%253A34%253A30Z%26Version%3D2014-05-26"
        );
        assert_eq!(
            sign("GET", &params, "testsecret"),
            "9NaGiOspFP5UPcwX8Iwt2YJXXuk="
        );
        // The same parameters built by `signed_params` at the example's time and nonce.
        let built = signed_params(
            "GET",
            "DescribeDedicatedHosts",
            "2014-05-26",
            &pairs(&[("RegionId", "cn-beijing")]),
            &Credentials::new("testid", "testsecret"),
            1_678_696_470, // 2023-03-13T08:34:30Z
            "edb2b34af0af9a6d14deaf7c1a5315eb",
        );
        assert_eq!(
            built.last(),
            Some(&(
                "Signature".to_string(),
                "9NaGiOspFP5UPcwX8Iwt2YJXXuk=".to_string()
            ))
        );
    }

    /// The SDK's own unit tests of `GetRPCSignature` in aliyun/darabonba-openapi-util:
    /// `golang/service/service_test.go` `Test_GetRPCSignature` (empty method) and
    /// `python/tests/test_client.py` `test_get_rpc_signature`.
    #[test]
    fn sdk_rpc_signature_vectors() {
        assert_eq!(
            sign("", &pairs(&[("test", "ok")]), "accessKeySecret"),
            "jHx/oHoHNrbVfhncHEvPdHXZwHU="
        );
        assert_eq!(
            sign(
                "GET",
                &pairs(&[("query", "test"), ("body", "test")]),
                "secret"
            ),
            "XlUyV4sXjOuX5FnjUz9IF9tm5rU="
        );
    }

    #[test]
    fn the_signature_itself_is_not_signed_and_tokens_are() {
        let credentials = Credentials::new("STS.a", "s").with_security_token("tok");
        let params = signed_params(
            "POST",
            "AssumeRole",
            "2015-04-01",
            &[],
            &credentials,
            0,
            "n",
        );
        assert!(
            params
                .iter()
                .any(|(k, v)| k == "SecurityToken" && v == "tok")
        );
        let (_, sig) = params.last().unwrap();
        assert_eq!(&sign("POST", &params, "s"), sig, "Signature is excluded");
    }
}
