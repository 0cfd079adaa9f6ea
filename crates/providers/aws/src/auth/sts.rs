//! STS: AssumeRoleWithWebIdentity (IRSA, `web_identity_token_file`; unsigned, the token is
//! the proof) and AssumeRole (profiles' `role_arn`; signed with the source credentials). Both
//! answer in the Query protocol's XML.

use super::credentials::{AssumeRole, Fetched, parse_time, read_token};
use super::sigv4::{Credentials, uri_encode};
use crate::http::{AwsError, AwsHttp, Result};

/// The session name when none is configured.
pub const DEFAULT_SESSION_NAME: &str = "karpenter-rs";

fn form(params: &[(&str, &str)]) -> String {
    params
        .iter()
        .map(|(k, v)| format!("{k}={}", uri_encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// Exchanges the token in `token_file` for the role's credentials, in a session named
/// `session_name` (the SDKs' default when `None`).
pub async fn web_identity(
    http: &AwsHttp,
    role_arn: &str,
    token_file: &str,
    session_name: Option<&str>,
) -> Result<Fetched> {
    let token = read_token(token_file)?;
    let body = form(&[
        ("Action", "AssumeRoleWithWebIdentity"),
        ("Version", "2011-06-15"),
        ("RoleArn", role_arn),
        (
            "RoleSessionName",
            session_name.unwrap_or(DEFAULT_SESSION_NAME),
        ),
        ("WebIdentityToken", token.as_str()),
    ]);
    let url = format!("{}/", http.url("sts"));
    let response = http
        .unsigned_call(false, || {
            http::Request::post(&url)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(bytes::Bytes::from(body.clone()))
        })
        .await
        .map_err(|e| AwsError::Credentials(format!("AssumeRoleWithWebIdentity {role_arn}: {e}")))?;
    parse_credentials("AssumeRoleWithWebIdentity", &response.body)
}

/// Assumes `role` with `base` credentials.
pub async fn assume_role(http: &AwsHttp, base: &Credentials, role: &AssumeRole) -> Result<Fetched> {
    let duration = role.duration_seconds.map(|d| d.to_string());
    let mut params = vec![
        ("Action", "AssumeRole"),
        ("Version", "2011-06-15"),
        ("RoleArn", role.role_arn.as_str()),
        (
            "RoleSessionName",
            role.session_name.as_deref().unwrap_or(DEFAULT_SESSION_NAME),
        ),
    ];
    if let Some(id) = &role.external_id {
        params.push(("ExternalId", id));
    }
    if let Some(d) = &duration {
        params.push(("DurationSeconds", d));
    }
    let body = http
        .send_as(
            base,
            "sts",
            "POST",
            "/",
            &[],
            &[(
                "content-type",
                "application/x-www-form-urlencoded; charset=utf-8",
            )],
            form(&params).into_bytes(),
        )
        .await
        .map_err(|e| AwsError::Credentials(format!("AssumeRole {}: {e}", role.role_arn)))?;
    parse_credentials("AssumeRole", &body)
}

/// The `<Credentials>` of an STS answer.
pub fn parse_credentials(action: &str, body: &[u8]) -> Result<Fetched> {
    let text = String::from_utf8_lossy(body);
    let doc =
        roxmltree::Document::parse(&text).map_err(|e| AwsError::Parse(format!("{action}: {e}")))?;
    let get = |name: &str| {
        doc.descendants()
            .find(|n| n.has_tag_name(name))
            .and_then(|n| n.text())
            .map(|t| t.trim().to_string())
            .ok_or_else(|| AwsError::Parse(format!("{action}: no {name}")))
    };
    let credentials = Credentials {
        access_key_id: get("AccessKeyId")?,
        secret_access_key: get("SecretAccessKey")?,
        session_token: Some(get("SessionToken")?),
    };
    let expires = get("Expiration")?;
    let expires = parse_time(&expires)
        .ok_or_else(|| AwsError::Parse(format!("{action}: Expiration {expires:?}")))?;
    Ok((credentials, Some(expires)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The STS API reference's AssumeRole example answer.
    #[test]
    fn the_documented_answer() {
        let xml = br#"<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleResult>
  <SourceIdentity>Alice</SourceIdentity>
    <AssumedRoleUser>
      <Arn>arn:aws:sts::123456789012:assumed-role/demo/TestAR</Arn>
      <AssumedRoleId>ARO123EXAMPLE123:TestAR</AssumedRoleId>
    </AssumedRoleUser>
    <Credentials>
      <AccessKeyId>ASIAIOSFODNN7EXAMPLE</AccessKeyId>
      <SecretAccessKey>wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY</SecretAccessKey>
      <SessionToken>AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQW</SessionToken>
      <Expiration>2019-11-09T13:34:41Z</Expiration>
    </Credentials>
    <PackedPolicySize>6</PackedPolicySize>
  </AssumeRoleResult>
  <ResponseMetadata>
    <RequestId>c6104cbe-af31-11e0-8154-cbc7ccf896c7</RequestId>
  </ResponseMetadata>
</AssumeRoleResponse>"#;
        let (c, expires) = parse_credentials("AssumeRole", xml).unwrap();
        assert_eq!(c.access_key_id, "ASIAIOSFODNN7EXAMPLE");
        assert!(c.session_token.unwrap().starts_with("AQoDYXdzEPT"));
        assert_eq!(expires, Some(1_573_306_481));
        let e = parse_credentials("AssumeRole", b"<x/>").unwrap_err();
        assert!(e.to_string().contains("AssumeRole: no AccessKeyId"), "{e}");
    }
}
