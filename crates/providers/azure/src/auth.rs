//! Entra ID tokens for ARM, found as the Azure SDKs' `DefaultAzureCredential` finds them in a
//! cluster: a service principal's secret (`AZURE_CLIENT_SECRET`), workload identity (the
//! projected service-account token in `AZURE_FEDERATED_TOKEN_FILE`, exchanged as a client
//! assertion), or the VM's managed identity through IMDS. Tokens are cached and refreshed five
//! minutes before they expire; secrets and tokens never reach a log (`Debug` redacts them).

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use karpenter_cloudprovider::http::{HttpClient, RetryPolicy};
use serde::Deserialize;
use tokio::sync::Mutex;

/// The instance metadata service's token endpoint.
pub const IMDS_TOKEN_URL: &str = "http://169.254.169.254/metadata/identity/oauth2/token";

/// How a token could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// The environment names no usable credential, or misses a setting.
    #[error("azure credentials: {0}")]
    Config(String),
    /// The token endpoint refused or could not be reached.
    #[error("getting an azure token from {endpoint}: {reason}")]
    Token {
        /// The endpoint asked.
        endpoint: String,
        /// Why it failed.
        reason: String,
    },
}

/// Where tokens come from.
#[derive(Clone, PartialEq, Eq)]
pub enum Credential {
    /// A service principal with a secret.
    ClientSecret {
        /// The tenant.
        tenant_id: String,
        /// The application (client) id.
        client_id: String,
        /// The secret.
        secret: String,
    },
    /// Workload identity: the federated token file exchanged as a client assertion.
    WorkloadIdentity {
        /// The tenant.
        tenant_id: String,
        /// The application (client) id.
        client_id: String,
        /// The projected service-account token's file (read afresh each time: it rotates).
        token_file: String,
    },
    /// The VM's managed identity (user-assigned when a client id is given).
    ManagedIdentity {
        /// A user-assigned identity's client id.
        client_id: Option<String>,
    },
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credential::ClientSecret {
                tenant_id,
                client_id,
                ..
            } => f
                .debug_struct("ClientSecret")
                .field("tenant_id", tenant_id)
                .field("client_id", client_id)
                .field("secret", &"<redacted>")
                .finish(),
            Credential::WorkloadIdentity {
                tenant_id,
                client_id,
                token_file,
            } => f
                .debug_struct("WorkloadIdentity")
                .field("tenant_id", tenant_id)
                .field("client_id", client_id)
                .field("token_file", token_file)
                .finish(),
            Credential::ManagedIdentity { client_id } => f
                .debug_struct("ManagedIdentity")
                .field("client_id", client_id)
                .finish(),
        }
    }
}

impl Credential {
    /// The credential the environment describes, in `DefaultAzureCredential`'s order: a
    /// secret, then workload identity, then the managed identity.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Self, AuthError> {
        let get = |k: &str| get(k).filter(|v| !v.is_empty());
        let tenant = || {
            get("AZURE_TENANT_ID")
                .or_else(|| get("ARM_TENANT_ID"))
                .ok_or_else(|| AuthError::Config("AZURE_TENANT_ID is not set".into()))
        };
        let client_id = get("AZURE_CLIENT_ID").or_else(|| get("ARM_CLIENT_ID"));
        if let Some(secret) = get("AZURE_CLIENT_SECRET").or_else(|| get("ARM_CLIENT_SECRET")) {
            return Ok(Credential::ClientSecret {
                tenant_id: tenant()?,
                client_id: client_id.ok_or_else(|| {
                    AuthError::Config(
                        "AZURE_CLIENT_SECRET is set but AZURE_CLIENT_ID is not".into(),
                    )
                })?,
                secret,
            });
        }
        if let Some(token_file) = get("AZURE_FEDERATED_TOKEN_FILE") {
            return Ok(Credential::WorkloadIdentity {
                tenant_id: tenant()?,
                client_id: client_id.ok_or_else(|| {
                    AuthError::Config(
                        "AZURE_FEDERATED_TOKEN_FILE is set but AZURE_CLIENT_ID is not".into(),
                    )
                })?,
                token_file,
            });
        }
        Ok(Credential::ManagedIdentity { client_id })
    }
}

/// A bearer token and when it expires (Unix seconds).
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    /// The token.
    pub access_token: String,
    /// When it expires.
    pub expires_at: u64,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("access_token", &"<redacted>")
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// Entra ID's and IMDS's token answers: `expires_in` is a number from Entra ID, a string from
/// IMDS (which also gives `expires_on`).
#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    #[serde(default)]
    expires_in: Option<serde_json::Value>,
    #[serde(default)]
    expires_on: Option<serde_json::Value>,
}

fn seconds(v: &serde_json::Value) -> Option<u64> {
    match v {
        serde_json::Value::Number(n) => n.as_u64(),
        serde_json::Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// Reads a token answer received at `now`.
pub fn parse_token(body: &[u8], now: u64) -> Result<Token, String> {
    let r: TokenResponse = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let expires_at = r
        .expires_on
        .as_ref()
        .and_then(seconds)
        .or_else(|| r.expires_in.as_ref().and_then(seconds).map(|s| now + s))
        .ok_or("the answer says no expiry")?;
    Ok(Token {
        access_token: r.access_token,
        expires_at,
    })
}

/// Where tokens are asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Authorities {
    /// Entra ID's authority (`AZURE_AUTHORITY_HOST`; sovereign clouds differ).
    pub authority: String,
    /// IMDS's token endpoint.
    pub imds: String,
    /// What the tokens are for: ARM's audience in the cloud the provider runs in
    /// ([`crate::cloud::CloudEnvironment::token_audience`]).
    pub audience: String,
}

impl Default for Authorities {
    /// The public cloud's.
    fn default() -> Self {
        let public = crate::cloud::CloudEnvironment::public();
        Self {
            authority: public.active_directory_endpoint,
            imds: IMDS_TOKEN_URL.into(),
            audience: public.token_audience,
        }
    }
}

/// Refresh this long before a token expires.
const REFRESH_MARGIN: u64 = 300;

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Tokens for ARM from one credential, cached.
#[derive(Clone, Debug)]
pub struct TokenSource {
    credential: Credential,
    authorities: Authorities,
    http: HttpClient,
    cached: Arc<Mutex<Option<Token>>>,
}

impl TokenSource {
    /// Tokens from `credential`, asked of `authorities` through `http`.
    pub fn new(credential: Credential, authorities: Authorities, http: HttpClient) -> Self {
        Self {
            credential,
            authorities,
            http,
            cached: Arc::default(),
        }
    }

    /// A token valid for at least five more minutes.
    pub async fn token(&self) -> Result<String, AuthError> {
        let mut cached = self.cached.lock().await;
        if let Some(t) = cached.as_ref()
            && now() + REFRESH_MARGIN < t.expires_at
        {
            return Ok(t.access_token.clone());
        }
        let token = self.fetch().await?;
        let access = token.access_token.clone();
        *cached = Some(token);
        Ok(access)
    }

    async fn fetch(&self) -> Result<Token, AuthError> {
        let (endpoint, request) = self.request()?;
        let response = self
            .http
            .send_with_retries(&request, RetryPolicy::STANDARD)
            .await
            .map_err(|e| AuthError::Token {
                endpoint: endpoint.clone(),
                reason: e.to_string(),
            })?;
        if !response.is_success() {
            return Err(AuthError::Token {
                endpoint,
                reason: format!(
                    "HTTP {}: {}",
                    response.status,
                    error_description(&response.body)
                ),
            });
        }
        parse_token(&response.body, now()).map_err(|reason| AuthError::Token { endpoint, reason })
    }

    fn request(&self) -> Result<(String, http::Request<Bytes>), AuthError> {
        let form = |pairs: &[(&str, &str)]| {
            let mut s = form_urlencoded::Serializer::new(String::new());
            for (k, v) in pairs {
                s.append_pair(k, v);
            }
            s.finish()
        };
        let token_url = |tenant: &str| {
            format!(
                "{}/{tenant}/oauth2/v2.0/token",
                self.authorities.authority.trim_end_matches('/')
            )
        };
        let scope = format!(
            "{}/.default",
            self.authorities.audience.trim_end_matches('/')
        );
        let post = |url: &str, body: String| {
            http::Request::post(url)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(Bytes::from(body))
                .map_err(|e| AuthError::Config(e.to_string()))
        };
        match &self.credential {
            Credential::ClientSecret {
                tenant_id,
                client_id,
                secret,
            } => {
                let url = token_url(tenant_id);
                let body = form(&[
                    ("grant_type", "client_credentials"),
                    ("client_id", client_id),
                    ("client_secret", secret),
                    ("scope", &scope),
                ]);
                Ok((url.clone(), post(&url, body)?))
            }
            Credential::WorkloadIdentity {
                tenant_id,
                client_id,
                token_file,
            } => {
                let assertion = std::fs::read_to_string(token_file).map_err(|e| {
                    AuthError::Config(format!("reading the federated token {token_file}: {e}"))
                })?;
                let url = token_url(tenant_id);
                let body = form(&[
                    ("grant_type", "client_credentials"),
                    ("client_id", client_id),
                    (
                        "client_assertion_type",
                        "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
                    ),
                    ("client_assertion", assertion.trim()),
                    ("scope", &scope),
                ]);
                Ok((url.clone(), post(&url, body)?))
            }
            Credential::ManagedIdentity { client_id } => {
                let mut query = form_urlencoded::Serializer::new(String::new());
                query.append_pair("api-version", "2018-02-01");
                query.append_pair("resource", &self.authorities.audience);
                if let Some(id) = client_id {
                    query.append_pair("client_id", id);
                }
                let url = format!("{}?{}", self.authorities.imds, query.finish());
                let request = http::Request::get(&url)
                    .header("metadata", "true")
                    .body(Bytes::new())
                    .map_err(|e| AuthError::Config(e.to_string()))?;
                Ok((self.authorities.imds.clone(), request))
            }
        }
    }
}

/// Entra ID's `error_description` (it names the problem: a wrong secret, an unknown client),
/// else the body's first characters.
fn error_description(body: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            v.get("error_description")
                .or_else(|| v.get("error"))
                .and_then(|d| d.as_str())
                .map(str::to_string)
        })
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: std::collections::HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn the_environment_picks_the_credential_as_the_sdk_does() {
        let secret = Credential::from_env(env(&[
            ("AZURE_TENANT_ID", "t"),
            ("AZURE_CLIENT_ID", "c"),
            ("AZURE_CLIENT_SECRET", "s"),
            ("AZURE_FEDERATED_TOKEN_FILE", "/var/run/token"),
        ]))
        .unwrap();
        assert!(
            matches!(secret, Credential::ClientSecret { .. }),
            "a secret comes first"
        );
        assert!(!format!("{secret:?}").contains("\"s\""), "{secret:?}");
        let federated = Credential::from_env(env(&[
            ("ARM_TENANT_ID", "t"),
            ("AZURE_CLIENT_ID", "c"),
            ("AZURE_FEDERATED_TOKEN_FILE", "/var/run/token"),
        ]))
        .unwrap();
        assert_eq!(
            federated,
            Credential::WorkloadIdentity {
                tenant_id: "t".into(),
                client_id: "c".into(),
                token_file: "/var/run/token".into()
            }
        );
        assert_eq!(
            Credential::from_env(env(&[("AZURE_CLIENT_ID", "kubelet")])).unwrap(),
            Credential::ManagedIdentity {
                client_id: Some("kubelet".into())
            }
        );
        let err = Credential::from_env(env(&[
            ("AZURE_CLIENT_SECRET", "s"),
            ("AZURE_CLIENT_ID", "c"),
        ]))
        .unwrap_err();
        assert!(err.to_string().contains("AZURE_TENANT_ID"), "{err}");
    }

    #[test]
    fn token_answers_of_entra_id_and_imds() {
        let entra = br#"{"token_type":"Bearer","expires_in":3599,"access_token":"eyJ0"}"#;
        assert_eq!(
            parse_token(entra, 1000).unwrap(),
            Token {
                access_token: "eyJ0".into(),
                expires_at: 4599
            }
        );
        let imds = br#"{"access_token":"eyJ1","expires_in":"86399","expires_on":"1700086399","resource":"https://management.azure.com/","token_type":"Bearer"}"#;
        assert_eq!(parse_token(imds, 1000).unwrap().expires_at, 1_700_086_399);
        assert!(parse_token(br#"{"access_token":"x"}"#, 0).is_err());
    }
}
