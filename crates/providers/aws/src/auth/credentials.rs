//! Where credentials come from, in the order the AWS SDKs look: static keys in the
//! environment, IRSA (a projected service-account token exchanged with STS
//! AssumeRoleWithWebIdentity) and EKS Pod Identity (the node agent's credentials endpoint).
//! Temporary credentials are cached and refreshed five minutes before they expire.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::Full;
use tokio::sync::Mutex;

use super::sigv4::{Credentials, uri_encode};
use crate::http::{AwsError, AwsHttp, Result};

/// How credentials are obtained.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Fixed keys (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`).
    Static(Credentials),
    /// IRSA: `AWS_ROLE_ARN` and `AWS_WEB_IDENTITY_TOKEN_FILE`.
    WebIdentity {
        /// The role to assume.
        role_arn: String,
        /// The projected token's file.
        token_file: String,
    },
    /// EKS Pod Identity: `AWS_CONTAINER_CREDENTIALS_FULL_URI` and
    /// `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`.
    Container {
        /// The agent's endpoint.
        uri: String,
        /// The token's file.
        token_file: Option<String>,
    },
}

impl Source {
    /// The source the environment describes.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Self> {
        if let (Some(id), Some(secret)) = (get("AWS_ACCESS_KEY_ID"), get("AWS_SECRET_ACCESS_KEY")) {
            return Ok(Self::Static(Credentials {
                access_key_id: id,
                secret_access_key: secret,
                session_token: get("AWS_SESSION_TOKEN"),
            }));
        }
        if let (Some(role_arn), Some(token_file)) =
            (get("AWS_ROLE_ARN"), get("AWS_WEB_IDENTITY_TOKEN_FILE"))
        {
            return Ok(Self::WebIdentity {
                role_arn,
                token_file,
            });
        }
        if let Some(uri) = get("AWS_CONTAINER_CREDENTIALS_FULL_URI") {
            return Ok(Self::Container {
                uri,
                token_file: get("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"),
            });
        }
        Err(AwsError::Credentials(
            "none found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or run with IRSA (AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE) or EKS Pod Identity (AWS_CONTAINER_CREDENTIALS_FULL_URI)".into(),
        ))
    }
}

#[derive(Default)]
struct Cached {
    credentials: Option<Credentials>,
    expires_at: u64,
}

/// Hands out current credentials, refreshing temporary ones before they expire.
#[derive(Clone)]
pub struct CredentialsProvider {
    source: Source,
    cache: Arc<Mutex<Cached>>,
}

const REFRESH_MARGIN: u64 = 300;

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl CredentialsProvider {
    /// A provider reading `source`.
    pub fn new(source: Source) -> Self {
        Self {
            source,
            cache: Arc::default(),
        }
    }

    /// Current credentials.
    pub async fn get(&self, http: &AwsHttp) -> Result<Credentials> {
        if let Source::Static(c) = &self.source {
            return Ok(c.clone());
        }
        let mut cache = self.cache.lock().await;
        if let Some(c) = &cache.credentials
            && now() + REFRESH_MARGIN < cache.expires_at
        {
            return Ok(c.clone());
        }
        let (credentials, expires_at) = match &self.source {
            Source::Static(_) => unreachable!("answered above"),
            Source::WebIdentity {
                role_arn,
                token_file,
            } => web_identity(http, role_arn, token_file).await?,
            Source::Container { uri, token_file } => {
                container(http, uri, token_file.as_deref()).await?
            }
        };
        cache.credentials = Some(credentials.clone());
        cache.expires_at = expires_at;
        Ok(credentials)
    }
}

fn read_token(file: &str) -> Result<String> {
    std::fs::read_to_string(file)
        .map(|t| t.trim().to_string())
        .map_err(|e| AwsError::Credentials(format!("reading {file}: {e}")))
}

/// Seconds since the epoch of an RFC 3339 time (`2026-11-22T10:00:00Z`).
fn parse_time(s: &str) -> Option<u64> {
    let t: k8s_openapi::jiff::Timestamp = s.parse().ok()?;
    u64::try_from(t.as_second()).ok()
}

async fn web_identity(
    http: &AwsHttp,
    role_arn: &str,
    token_file: &str,
) -> Result<(Credentials, u64)> {
    let token = read_token(token_file)?;
    let form = [
        ("Action", "AssumeRoleWithWebIdentity"),
        ("Version", "2011-06-15"),
        ("RoleArn", role_arn),
        ("RoleSessionName", "karpenter-rs"),
        ("WebIdentityToken", token.as_str()),
    ]
    .iter()
    .map(|(k, v)| format!("{k}={}", uri_encode(v)))
    .collect::<Vec<_>>()
    .join("&");
    let url = format!("{}/", http.endpoints.url("sts"));
    let request = http::Request::post(&url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(Full::new(Bytes::from(form)))
        .map_err(|e| AwsError::Credentials(e.to_string()))?;
    let (status, body) = http.send_unsigned(request).await?;
    if status >= 400 {
        return Err(AwsError::Credentials(format!(
            "AssumeRoleWithWebIdentity: {}",
            crate::http::parse_error(status, &body)
        )));
    }
    let text = String::from_utf8_lossy(&body);
    let doc = roxmltree::Document::parse(&text).map_err(|e| AwsError::Parse(e.to_string()))?;
    let get = |name: &str| {
        doc.descendants()
            .find(|n| n.has_tag_name(name))
            .and_then(|n| n.text())
            .map(str::to_string)
            .ok_or_else(|| AwsError::Parse(format!("AssumeRoleWithWebIdentity: no {name}")))
    };
    let credentials = Credentials {
        access_key_id: get("AccessKeyId")?,
        secret_access_key: get("SecretAccessKey")?,
        session_token: Some(get("SessionToken")?),
    };
    let expires = parse_time(&get("Expiration")?).unwrap_or_else(|| now() + 900);
    Ok((credentials, expires))
}

async fn container(
    http: &AwsHttp,
    uri: &str,
    token_file: Option<&str>,
) -> Result<(Credentials, u64)> {
    let mut request = http::Request::get(uri);
    if let Some(file) = token_file {
        request = request.header("authorization", read_token(file)?);
    }
    let request = request
        .body(Full::new(Bytes::new()))
        .map_err(|e| AwsError::Credentials(e.to_string()))?;
    let (status, body) = http.send_unsigned(request).await?;
    if status >= 400 {
        return Err(AwsError::Credentials(format!("{uri}: HTTP {status}")));
    }
    let json: serde_json::Value =
        serde_json::from_slice(&body).map_err(|e| AwsError::Parse(e.to_string()))?;
    let field = |name: &str| {
        json[name]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| AwsError::Parse(format!("{uri}: no {name}")))
    };
    let credentials = Credentials {
        access_key_id: field("AccessKeyId")?,
        secret_access_key: field("SecretAccessKey")?,
        session_token: field("Token").ok(),
    };
    let expires = field("Expiration")
        .ok()
        .and_then(|e| parse_time(&e))
        .unwrap_or_else(|| now() + 900);
    Ok((credentials, expires))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_decides_the_source() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert!(matches!(
            Source::from_env(env(&[
                ("AWS_ACCESS_KEY_ID", "a"),
                ("AWS_SECRET_ACCESS_KEY", "b")
            ])),
            Ok(Source::Static(_))
        ));
        assert!(matches!(
            Source::from_env(env(&[
                ("AWS_ROLE_ARN", "arn"),
                ("AWS_WEB_IDENTITY_TOKEN_FILE", "/t")
            ])),
            Ok(Source::WebIdentity { .. })
        ));
        assert!(matches!(
            Source::from_env(env(&[(
                "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                "http://169.254.170.23/v1/credentials"
            )])),
            Ok(Source::Container { .. })
        ));
        let err = Source::from_env(env(&[])).unwrap_err().to_string();
        assert!(
            err.contains("AWS_ACCESS_KEY_ID") && err.contains("IRSA"),
            "{err}"
        );
    }

    #[test]
    fn expiration_times() {
        assert_eq!(parse_time("2015-08-30T12:36:00Z"), Some(1_440_938_160));
        assert_eq!(parse_time("2024-02-29T12:00:00.000Z"), Some(1_709_208_000));
        assert_eq!(parse_time("soon"), None);
    }
}
