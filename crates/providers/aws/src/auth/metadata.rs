//! The link-local credential endpoints: the EC2 instance metadata service (IMDSv2: a session
//! token from `PUT /latest/api/token`, then the role's credentials and the instance's region)
//! and the ECS / EKS Pod Identity container endpoint (a GET with an authorization token).

use bytes::Bytes;

use super::credentials::{Fetched, parse_time};
use super::sigv4::Credentials;
use crate::http::{AwsError, AwsHttp, Result};

/// How long an IMDS session token lives (the SDKs ask for six hours).
pub const IMDS_TOKEN_TTL_SECONDS: &str = "21600";

fn err(message: String) -> AwsError {
    AwsError::Credentials(message)
}

/// A session token from IMDS.
async fn imds_token(http: &AwsHttp, endpoint: &str) -> Result<String> {
    let url = format!("{endpoint}/latest/api/token");
    let response = http
        .unsigned_call(true, || {
            http::Request::put(&url)
                .header(
                    "x-aws-ec2-metadata-token-ttl-seconds",
                    IMDS_TOKEN_TTL_SECONDS,
                )
                .body(Bytes::new())
        })
        .await
        .map_err(|e| err(format!("IMDS session token from {url}: {e}")))?;
    Ok(String::from_utf8_lossy(&response.body).trim().to_string())
}

/// A metadata path's text, with a session token.
async fn imds_get(http: &AwsHttp, endpoint: &str, token: &str, path: &str) -> Result<String> {
    let url = format!("{endpoint}{path}");
    let response = http
        .unsigned_call(true, || {
            http::Request::get(&url)
                .header("x-aws-ec2-metadata-token", token)
                .body(Bytes::new())
        })
        .await
        .map_err(|e| err(format!("IMDS {path}: {e}")))?;
    Ok(String::from_utf8_lossy(&response.body).trim().to_string())
}

const ROLE_PATH: &str = "/latest/meta-data/iam/security-credentials/";

/// The instance role's credentials.
pub async fn imds_credentials(http: &AwsHttp, endpoint: &str) -> Result<Fetched> {
    let token = imds_token(http, endpoint).await?;
    let roles = imds_get(http, endpoint, &token, ROLE_PATH).await?;
    let role = roles
        .lines()
        .next()
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .ok_or_else(|| err("IMDS: the instance has no IAM role (instance profile)".into()))?;
    let text = imds_get(http, endpoint, &token, &format!("{ROLE_PATH}{role}")).await?;
    let json: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| AwsError::Parse(format!("IMDS credentials of {role}: {e}")))?;
    if let Some(code) = json["Code"].as_str().filter(|c| *c != "Success") {
        return Err(err(format!(
            "IMDS credentials of {role}: {code}: {}",
            json["Message"].as_str().unwrap_or_default()
        )));
    }
    parse_json_credentials(&format!("IMDS credentials of {role}"), &json)
}

/// The instance's region (`placement/region`).
pub async fn imds_region(http: &AwsHttp, endpoint: &str) -> Result<String> {
    let token = imds_token(http, endpoint).await?;
    let region = imds_get(http, endpoint, &token, "/latest/meta-data/placement/region").await?;
    if region.is_empty() {
        return Err(err("IMDS placement/region is empty".into()));
    }
    Ok(region)
}

/// The container endpoint's credentials.
pub async fn container(http: &AwsHttp, uri: &str, token: Option<&str>) -> Result<Fetched> {
    if let Some(t) = token
        && t.contains(['\r', '\n'])
    {
        return Err(err(format!(
            "{uri}: the authorization token holds a line break"
        )));
    }
    let response = http
        .unsigned_call(true, || {
            let mut request = http::Request::get(uri);
            if let Some(token) = token {
                request = request.header("authorization", token);
            }
            request.body(Bytes::new())
        })
        .await
        .map_err(|e| err(format!("container credentials from {uri}: {e}")))?;
    let json: serde_json::Value = serde_json::from_slice(&response.body)
        .map_err(|e| AwsError::Parse(format!("{uri}: {e}")))?;
    parse_json_credentials(uri, &json)
}

/// `AccessKeyId`, `SecretAccessKey`, `Token` and `Expiration`, as IMDS and the container
/// endpoints answer.
fn parse_json_credentials(what: &str, json: &serde_json::Value) -> Result<Fetched> {
    let field = |name: &str| {
        json[name]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| AwsError::Parse(format!("{what}: no {name}")))
    };
    let credentials = Credentials {
        access_key_id: field("AccessKeyId")?,
        secret_access_key: field("SecretAccessKey")?,
        session_token: field("Token").ok(),
    };
    let expires = match json["Expiration"].as_str() {
        Some(e) => Some(
            parse_time(e).ok_or_else(|| AwsError::Parse(format!("{what}: Expiration {e:?}")))?,
        ),
        None => None,
    };
    Ok((credentials, expires))
}
