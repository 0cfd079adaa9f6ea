//! Where credentials come from, in the order of the official credentials library's default
//! chain (aliyun/credentials-go `providers/default.go`, which the cloudpilot-ai provider uses
//! through `credentials.NewCredential(nil)`):
//!
//! 1. access keys in the environment: `ALIBABA_CLOUD_ACCESS_KEY_ID` (or the older
//!    `ALIBABA_CLOUD_ACCESS_KEY_Id` of the library's first chain), `ALIBABA_CLOUD_ACCESS_KEY_SECRET`
//!    and, for temporary keys, `ALIBABA_CLOUD_SECURITY_TOKEN`;
//! 2. RRSA, ACK's workload identity: `ALIBABA_CLOUD_ROLE_ARN`, `ALIBABA_CLOUD_OIDC_PROVIDER_ARN`
//!    and `ALIBABA_CLOUD_OIDC_TOKEN_FILE`, the projected token exchanged with STS
//!    `AssumeRoleWithOIDC` (an anonymous call);
//! 3. the Alibaba CLI's config file, `ALIBABA_CLOUD_CONFIG_FILE` or `~/.aliyun/config.json` —
//!    what the cloudpilot-ai chart mounts from its Secret — in the modes `AK`, `StsToken`,
//!    `RamRoleArn` (STS `AssumeRole`, signed with the legacy RPC signature as the library
//!    does), `ChainableRamRoleArn`, `EcsRamRole` and `OIDC`; the profile is
//!    `ALIBABA_CLOUD_PROFILE` or the file's `current`;
//! 4. a credentials URI, `ALIBABA_CLOUD_CREDENTIALS_URI`;
//! 5. the ECS instance's RAM role through the metadata service at `100.100.100.200`, with the
//!    metadata token (`PUT /latest/api/token`) the library asks for first, required when
//!    `ALIBABA_CLOUD_IMDSV1_DISABLED=true`; the role is `ALIBABA_CLOUD_ECS_METADATA` or the one
//!    the instance has. `ALIBABA_CLOUD_ECS_METADATA_DISABLED=true` turns it off.
//!
//! Temporary credentials are cached and fetched again three minutes before they expire, as the
//! library does. Secrets and tokens never reach a log: `Debug` redacts them and errors carry
//! Alibaba's code and message, never a request body.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use karpenter_cloudprovider::http::{HttpClient, HttpError, Response, RetryPolicy, retryable};
use serde::Deserialize;
use tokio::sync::Mutex;

use super::{Credentials, percent_encode, rpc};
use crate::endpoint::{Endpoints, Network, Product};
use crate::nonce::nonce;

/// The ECS metadata service.
pub const METADATA_ENDPOINT: &str = "http://100.100.100.200";
/// How long temporary credentials are used at most before they are fetched again: the
/// credentials library's three minutes before expiry.
pub const REFRESH_MARGIN_SECONDS: u64 = 180;
/// The lifetime asked of STS, the library's default.
pub const DEFAULT_DURATION_SECONDS: u32 = 3600;
/// The session name STS records unless `ALIBABA_CLOUD_ROLE_SESSION_NAME` says otherwise.
pub const DEFAULT_SESSION_NAME: &str = "karpenter";
/// How long the metadata token lives (the library's six hours).
const METADATA_TOKEN_TTL_SECONDS: u32 = 21_600;

/// Why no credentials could be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialsError {
    /// The settings name no usable source, or a source misses a setting.
    #[error("alibaba cloud credentials: {0}")]
    Config(String),
    /// The source refused or could not be reached.
    #[error("alibaba cloud credentials from {source_name}: {reason}")]
    Fetch {
        /// Which source ([`Source::name`]).
        source_name: &'static str,
        /// Why.
        reason: String,
    },
}

/// An STS role session's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoleSession {
    /// The role to assume (`acs:ram::<account>:role/<name>`).
    pub role_arn: String,
    /// The session name STS records.
    pub session_name: String,
    /// How long the credentials are to live.
    pub duration_seconds: u32,
    /// A policy narrowing the role's permissions.
    pub policy: Option<String>,
    /// STS's base URL.
    pub sts_url: String,
}

/// Where credentials come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Fixed keys (environment, or a CLI profile in `AK` or `StsToken` mode).
    Static(Credentials),
    /// RRSA: the projected OIDC token exchanged with STS `AssumeRoleWithOIDC`.
    Oidc {
        /// The role and STS.
        session: RoleSession,
        /// The RAM OIDC provider (`acs:ram::<account>:oidc-provider/<name>`).
        oidc_provider_arn: String,
        /// The token's file, read afresh each time (the kubelet rotates it).
        token_file: PathBuf,
    },
    /// A role assumed with STS `AssumeRole`, signed with another source's keys.
    RamRoleArn {
        /// The role and STS.
        session: RoleSession,
        /// The keys that assume it.
        source: Box<Source>,
        /// The external id the role's trust policy may ask for.
        external_id: Option<String>,
    },
    /// A credentials endpoint answering as the metadata service does.
    Uri(String),
    /// The ECS instance's RAM role, from the metadata service.
    EcsRamRole {
        /// The role; asked of the metadata service when not set.
        role_name: Option<String>,
        /// The metadata service's base URL.
        metadata_url: String,
        /// Refuse to go on without a metadata token (hardened, IMDSv2-only instances).
        disable_imdsv1: bool,
    },
}

/// The Alibaba CLI's `config.json`.
#[derive(Deserialize)]
struct CliConfig {
    #[serde(default)]
    current: String,
    #[serde(default)]
    profiles: Vec<CliProfile>,
}

/// One profile of the CLI's config (the fields the supported modes read).
#[derive(Deserialize, Default)]
#[serde(default)]
struct CliProfile {
    name: String,
    mode: String,
    access_key_id: String,
    access_key_secret: String,
    sts_token: String,
    ram_role_arn: String,
    ram_session_name: String,
    expired_seconds: u32,
    sts_region: String,
    enable_vpc: bool,
    source_profile: String,
    ram_role_name: String,
    oidc_token_file: String,
    oidc_provider_arn: String,
    policy: String,
    external_id: String,
}

fn non_empty(s: &str) -> Option<String> {
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}

fn is_true(v: Option<String>) -> bool {
    v.is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

impl Source {
    /// The source's name in errors and logs, as the credentials library names its providers.
    pub fn name(&self) -> &'static str {
        match self {
            Source::Static(_) => "static_ak",
            Source::Oidc { .. } => "oidc_role_arn",
            Source::RamRoleArn { .. } => "ram_role_arn",
            Source::Uri(_) => "credentials_uri",
            Source::EcsRamRole { .. } => "ecs_ram_role",
        }
    }

    /// The source the settings describe, in the default chain's order (see the module's
    /// documentation). `get` reads a setting (the environment in the binary, a map in tests);
    /// STS is asked at `endpoints`' STS endpoint.
    pub fn from_env(
        get: impl Fn(&str) -> Option<String>,
        endpoints: &Endpoints,
    ) -> Result<Self, CredentialsError> {
        let get = |k: &str| get(k).as_deref().and_then(non_empty);
        let id = get("ALIBABA_CLOUD_ACCESS_KEY_ID").or_else(|| get("ALIBABA_CLOUD_ACCESS_KEY_Id"));
        if let Some(id) = id {
            let secret = get("ALIBABA_CLOUD_ACCESS_KEY_SECRET").ok_or_else(|| {
                CredentialsError::Config(
                    "ALIBABA_CLOUD_ACCESS_KEY_ID is set but ALIBABA_CLOUD_ACCESS_KEY_SECRET is not"
                        .into(),
                )
            })?;
            let mut credentials = Credentials::new(id, secret);
            credentials.security_token = get("ALIBABA_CLOUD_SECURITY_TOKEN");
            return Ok(Source::Static(credentials));
        }

        let role_arn = get("ALIBABA_CLOUD_ROLE_ARN");
        let provider_arn = get("ALIBABA_CLOUD_OIDC_PROVIDER_ARN");
        let token_file = get("ALIBABA_CLOUD_OIDC_TOKEN_FILE");
        if provider_arn.is_some() || token_file.is_some() {
            let missing: Vec<&str> = [
                ("ALIBABA_CLOUD_ROLE_ARN", role_arn.is_none()),
                ("ALIBABA_CLOUD_OIDC_PROVIDER_ARN", provider_arn.is_none()),
                ("ALIBABA_CLOUD_OIDC_TOKEN_FILE", token_file.is_none()),
            ]
            .into_iter()
            .filter_map(|(k, missing)| missing.then_some(k))
            .collect();
            if !missing.is_empty() {
                return Err(CredentialsError::Config(format!(
                    "RRSA is half configured: {} not set",
                    missing.join(", ")
                )));
            }
            return Ok(Source::Oidc {
                session: RoleSession {
                    role_arn: role_arn.unwrap_or_default(),
                    session_name: get("ALIBABA_CLOUD_ROLE_SESSION_NAME")
                        .unwrap_or_else(|| DEFAULT_SESSION_NAME.into()),
                    duration_seconds: DEFAULT_DURATION_SECONDS,
                    policy: None,
                    sts_url: endpoints.url(Product::Sts),
                },
                oidc_provider_arn: provider_arn.unwrap_or_default(),
                token_file: token_file.unwrap_or_default().into(),
            });
        }

        if !is_true(get("ALIBABA_CLOUD_CLI_PROFILE_DISABLED")) {
            let explicit = get("ALIBABA_CLOUD_CONFIG_FILE").map(PathBuf::from);
            let path = explicit.clone().or_else(|| {
                get("HOME").map(|home| Path::new(&home).join(".aliyun").join("config.json"))
            });
            if let Some(path) = path
                && (explicit.is_some() || path.exists())
            {
                return cli_profile(
                    &path,
                    get("ALIBABA_CLOUD_PROFILE"),
                    endpoints,
                    is_true(get("ALIBABA_CLOUD_IMDSV1_DISABLED")),
                );
            }
        }

        if let Some(uri) = get("ALIBABA_CLOUD_CREDENTIALS_URI") {
            return Ok(Source::Uri(uri));
        }

        if is_true(get("ALIBABA_CLOUD_ECS_METADATA_DISABLED")) {
            return Err(CredentialsError::Config(
                "none found: set ALIBABA_CLOUD_ACCESS_KEY_ID and ALIBABA_CLOUD_ACCESS_KEY_SECRET, configure RRSA (ALIBABA_CLOUD_ROLE_ARN, ALIBABA_CLOUD_OIDC_PROVIDER_ARN, ALIBABA_CLOUD_OIDC_TOKEN_FILE), mount an Alibaba CLI config (ALIBABA_CLOUD_CONFIG_FILE), or allow the instance's RAM role (ALIBABA_CLOUD_ECS_METADATA_DISABLED is true)".into(),
            ));
        }
        Ok(Source::EcsRamRole {
            role_name: get("ALIBABA_CLOUD_ECS_METADATA"),
            metadata_url: METADATA_ENDPOINT.into(),
            disable_imdsv1: is_true(get("ALIBABA_CLOUD_IMDSV1_DISABLED")),
        })
    }
}

/// The source of the profile `name` (else the file's current one) of the CLI config at `path`.
fn cli_profile(
    path: &Path,
    name: Option<String>,
    endpoints: &Endpoints,
    imdsv1_disabled: bool,
) -> Result<Source, CredentialsError> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| {
        CredentialsError::Config(format!("reading the Alibaba CLI config {shown}: {e}"))
    })?;
    Source::from_cli_config(&text, name.as_deref(), endpoints, imdsv1_disabled).map_err(|e| match e
    {
        CredentialsError::Config(reason) => CredentialsError::Config(format!("{shown}: {reason}")),
        other => other,
    })
}

impl Source {
    /// The source of the profile `name` (else the `current` one) of an Alibaba CLI config
    /// (`config.json`), as the credentials library reads it; `imdsv1_disabled` applies to an
    /// `EcsRamRole` profile.
    pub fn from_cli_config(
        text: &str,
        name: Option<&str>,
        endpoints: &Endpoints,
        imdsv1_disabled: bool,
    ) -> Result<Self, CredentialsError> {
        let error = |e: String| CredentialsError::Config(format!("the Alibaba CLI config: {e}"));
        // Where the file is broken, never what it says: serde_json's messages can quote a
        // value, and the file holds secrets.
        let config: CliConfig = serde_json::from_str(text).map_err(|e| {
            error(format!(
                "not a valid config ({:?} error at line {}, column {})",
                e.classify(),
                e.line(),
                e.column()
            ))
        })?;
        if config.profiles.is_empty() {
            return Err(error("no profiles".into()));
        }
        // As the library: the named profile, else the current one — and a file without names
        // (as the cloudpilot-ai chart writes it) matches its unnamed profile.
        let name = name.map_or_else(|| config.current.clone(), str::to_string);
        profile_source(&config, &name, endpoints, imdsv1_disabled, 0).map_err(error)
    }
}

fn profile_source(
    config: &CliConfig,
    name: &str,
    endpoints: &Endpoints,
    imdsv1_disabled: bool,
    depth: usize,
) -> Result<Source, String> {
    if depth > 8 {
        return Err(format!(
            "profile {name:?}: source_profile chain too long (a cycle?)"
        ));
    }
    let p = config
        .profiles
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| format!("no profile named {name:?}"))?;
    let keys = || -> Result<Credentials, String> {
        match (non_empty(&p.access_key_id), non_empty(&p.access_key_secret)) {
            (Some(id), Some(secret)) => Ok(Credentials::new(id, secret)),
            _ => Err(format!(
                "profile {name:?} (mode {}): access_key_id and access_key_secret are required",
                p.mode
            )),
        }
    };
    let session = || -> Result<RoleSession, String> {
        let mut sts = endpoints.clone();
        if let Some(region) = non_empty(&p.sts_region) {
            sts.sts_region = Some(region);
        }
        if p.enable_vpc {
            sts.sts_network = Network::Vpc;
        }
        Ok(RoleSession {
            role_arn: non_empty(&p.ram_role_arn)
                .ok_or_else(|| format!("profile {name:?}: ram_role_arn is required"))?,
            session_name: non_empty(&p.ram_session_name)
                .unwrap_or_else(|| DEFAULT_SESSION_NAME.into()),
            duration_seconds: if p.expired_seconds == 0 {
                DEFAULT_DURATION_SECONDS
            } else {
                p.expired_seconds
            },
            policy: non_empty(&p.policy),
            sts_url: sts.url(Product::Sts),
        })
    };
    match p.mode.as_str() {
        "AK" => Ok(Source::Static(keys()?)),
        "StsToken" => {
            let token = non_empty(&p.sts_token).ok_or_else(|| {
                format!("profile {name:?} (mode StsToken): sts_token is required")
            })?;
            Ok(Source::Static(keys()?.with_security_token(token)))
        }
        "RamRoleArn" => Ok(Source::RamRoleArn {
            session: session()?,
            source: Box::new(Source::Static(keys()?)),
            external_id: non_empty(&p.external_id),
        }),
        "ChainableRamRoleArn" => Ok(Source::RamRoleArn {
            session: session()?,
            source: Box::new(profile_source(
                config,
                &p.source_profile,
                endpoints,
                imdsv1_disabled,
                depth + 1,
            )?),
            external_id: non_empty(&p.external_id),
        }),
        "EcsRamRole" => Ok(Source::EcsRamRole {
            role_name: non_empty(&p.ram_role_name),
            metadata_url: METADATA_ENDPOINT.into(),
            disable_imdsv1: imdsv1_disabled,
        }),
        "OIDC" => Ok(Source::Oidc {
            session: session()?,
            oidc_provider_arn: non_empty(&p.oidc_provider_arn)
                .ok_or_else(|| format!("profile {name:?}: oidc_provider_arn is required"))?,
            token_file: non_empty(&p.oidc_token_file)
                .ok_or_else(|| format!("profile {name:?}: oidc_token_file is required"))?
                .into(),
        }),
        other => Err(format!(
            "profile {name:?}: mode {other:?} is not supported (AK, StsToken, RamRoleArn, ChainableRamRoleArn, EcsRamRole and OIDC are)"
        )),
    }
}

/// Temporary credentials and when they stop being used (Unix seconds).
struct Cached {
    credentials: Credentials,
    refresh_at: u64,
}

/// Hands out current credentials from one [`Source`], fetching temporary ones again before they
/// expire. Cheap to clone; clones share the cache.
#[derive(Clone)]
pub struct CredentialsProvider {
    source: Source,
    http: HttpClient,
    retry: RetryPolicy,
    /// For a role assumed with another source's keys: that source.
    inner: Option<Box<CredentialsProvider>>,
    cache: Arc<Mutex<Option<Cached>>>,
}

impl std::fmt::Debug for CredentialsProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialsProvider")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// STS's and the metadata service's credentials (`Expiration` like `2021-10-20T04:27:09Z`).
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct TemporaryCredentials {
    #[serde(default)]
    code: Option<String>,
    access_key_id: String,
    access_key_secret: String,
    security_token: String,
    expiration: String,
}

#[derive(Deserialize)]
struct StsAnswer {
    #[serde(rename = "Credentials")]
    credentials: Option<TemporaryCredentials>,
}

/// Alibaba's error body, for the code and message of a refusal.
#[derive(Deserialize, Default)]
#[serde(default, rename_all = "PascalCase")]
struct ErrorBody {
    code: String,
    message: String,
    request_id: String,
}

fn describe_refusal(response: &Response) -> String {
    match serde_json::from_slice::<ErrorBody>(&response.body) {
        Ok(e) if !e.code.is_empty() => format!(
            "HTTP {}: {}: {} (RequestId {})",
            response.status, e.code, e.message, e.request_id
        ),
        _ => format!("HTTP {}", response.status),
    }
}

impl CredentialsProvider {
    /// A provider of `source`'s credentials, fetched through `http`.
    pub fn new(source: Source, http: HttpClient) -> Self {
        let inner = match &source {
            Source::RamRoleArn { source, .. } => {
                Some(Box::new(Self::new((**source).clone(), http.clone())))
            }
            _ => None,
        };
        Self {
            source,
            http,
            retry: RetryPolicy::STANDARD,
            inner,
            cache: Arc::default(),
        }
    }

    /// The same provider with another retry policy for its fetches (tests keep backoffs short).
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        if let Some(inner) = self.inner.take() {
            self.inner = Some(Box::new(inner.with_retry(retry)));
        }
        self
    }

    /// Where the credentials come from.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// Current credentials.
    pub async fn get(&self) -> Result<Credentials, CredentialsError> {
        self.get_at(now()).await
    }

    /// The credentials to use at `now` (Unix seconds): the cached ones while they have more
    /// than [`REFRESH_MARGIN_SECONDS`] left, else fetched anew.
    pub async fn get_at(&self, now: u64) -> Result<Credentials, CredentialsError> {
        if let Source::Static(c) = &self.source {
            return Ok(c.clone());
        }
        let mut cache = self.cache.lock().await;
        if let Some(cached) = cache.as_ref()
            && now < cached.refresh_at
        {
            return Ok(cached.credentials.clone());
        }
        let (credentials, expires_at) = self.fetch(now).await?;
        *cache = Some(Cached {
            credentials: credentials.clone(),
            refresh_at: expires_at.saturating_sub(REFRESH_MARGIN_SECONDS),
        });
        Ok(credentials)
    }

    fn fetch_error(&self, reason: impl Into<String>) -> CredentialsError {
        CredentialsError::Fetch {
            source_name: self.source.name(),
            reason: reason.into(),
        }
    }

    async fn fetch(&self, now: u64) -> Result<(Credentials, u64), CredentialsError> {
        match &self.source {
            Source::Static(c) => Ok((c.clone(), u64::MAX)),
            Source::Oidc {
                session,
                oidc_provider_arn,
                token_file,
            } => {
                self.assume_role_with_oidc(session, oidc_provider_arn, token_file, now)
                    .await
            }
            Source::RamRoleArn {
                session,
                external_id,
                ..
            } => {
                let inner = self
                    .inner
                    .as_ref()
                    .ok_or_else(|| self.fetch_error("no source credentials"))?;
                // Boxed: the inner provider may itself assume a role.
                let keys = Box::pin(inner.get_at(now)).await?;
                self.assume_role(session, external_id.as_deref(), &keys, now)
                    .await
            }
            Source::Uri(uri) => {
                let response = self.send(|| get_request(uri, &[])).await?;
                self.temporary(&response)
            }
            Source::EcsRamRole {
                role_name,
                metadata_url,
                disable_imdsv1,
            } => {
                self.ecs_ram_role(role_name.as_deref(), metadata_url, *disable_imdsv1)
                    .await
            }
        }
    }

    /// Sends a request `build` makes, again on throttling, server errors and lost connections
    /// (every credential request may be repeated).
    async fn send(
        &self,
        build: impl FnMut() -> Result<http::Request<Bytes>, HttpError>,
    ) -> Result<Response, CredentialsError> {
        self.send_with(self.retry, build).await
    }

    async fn send_with(
        &self,
        policy: RetryPolicy,
        build: impl FnMut() -> Result<http::Request<Bytes>, HttpError>,
    ) -> Result<Response, CredentialsError> {
        self.http
            .send_rebuilt_with_retries(policy, build, |outcome| match outcome {
                Ok(r) => retryable(r.status) || is_throttled(r),
                Err(_) => true,
            })
            .await
            .map_err(|e| self.fetch_error(e.to_string()))
    }

    /// Reads temporary credentials from a 2xx answer of STS or the metadata service.
    fn temporary(&self, response: &Response) -> Result<(Credentials, u64), CredentialsError> {
        if !response.is_success() {
            return Err(self.fetch_error(describe_refusal(response)));
        }
        let parsed = serde_json::from_slice::<StsAnswer>(&response.body)
            .ok()
            .and_then(|a| a.credentials)
            .or_else(|| serde_json::from_slice::<TemporaryCredentials>(&response.body).ok())
            .ok_or_else(|| self.fetch_error("the answer holds no credentials"))?;
        if let Some(code) = &parsed.code
            && code != "Success"
        {
            return Err(self.fetch_error(format!("the answer's Code is {code:?}")));
        }
        let expires_at = crate::time::parse_iso8601(&parsed.expiration).ok_or_else(|| {
            self.fetch_error(format!("unreadable Expiration {:?}", parsed.expiration))
        })?;
        Ok((
            Credentials::new(parsed.access_key_id, parsed.access_key_secret)
                .with_security_token(parsed.security_token),
            expires_at,
        ))
    }

    async fn assume_role_with_oidc(
        &self,
        session: &RoleSession,
        oidc_provider_arn: &str,
        token_file: &Path,
        now: u64,
    ) -> Result<(Credentials, u64), CredentialsError> {
        let token = std::fs::read_to_string(token_file)
            .map(|t| t.trim().to_string())
            .map_err(|e| {
                self.fetch_error(format!(
                    "reading the OIDC token {}: {e}",
                    token_file.display()
                ))
            })?;
        let mut form = vec![
            ("RoleArn".to_string(), session.role_arn.clone()),
            ("OIDCProviderArn".to_string(), oidc_provider_arn.to_string()),
            ("OIDCToken".to_string(), token),
            ("RoleSessionName".to_string(), session.session_name.clone()),
            (
                "DurationSeconds".to_string(),
                session.duration_seconds.to_string(),
            ),
        ];
        if let Some(policy) = &session.policy {
            form.push(("Policy".into(), policy.clone()));
        }
        // Anonymous, as the credentials library sends it: the OIDC token is the proof.
        let url = &session.sts_url;
        let response = self
            .send(|| {
                let query = [
                    ("Action".to_string(), "AssumeRoleWithOIDC".to_string()),
                    ("Version".to_string(), Product::Sts.version().to_string()),
                    ("Format".to_string(), "JSON".to_string()),
                    ("Timestamp".to_string(), crate::time::iso8601(now)),
                ];
                form_request(url, &query, &form)
            })
            .await?;
        self.temporary(&response)
    }

    async fn assume_role(
        &self,
        session: &RoleSession,
        external_id: Option<&str>,
        keys: &Credentials,
        now: u64,
    ) -> Result<(Credentials, u64), CredentialsError> {
        let mut form = vec![
            ("RoleArn".to_string(), session.role_arn.clone()),
            ("RoleSessionName".to_string(), session.session_name.clone()),
            (
                "DurationSeconds".to_string(),
                session.duration_seconds.to_string(),
            ),
        ];
        if let Some(policy) = &session.policy {
            form.push(("Policy".into(), policy.clone()));
        }
        if let Some(id) = external_id {
            form.push(("ExternalId".into(), id.to_string()));
        }
        let url = &session.sts_url;
        let response = self
            .send(|| {
                // Signed as the credentials library signs AssumeRole (RPC v1 over the query and
                // the form together), afresh per attempt: a nonce is good once.
                let signed = rpc::signed_params(
                    "POST",
                    "AssumeRole",
                    Product::Sts.version(),
                    &form,
                    keys,
                    now,
                    &nonce(),
                );
                let query: Vec<(String, String)> = signed
                    .into_iter()
                    .filter(|pair| !form.contains(pair))
                    .collect();
                form_request(url, &query, &form)
            })
            .await?;
        self.temporary(&response)
    }

    async fn ecs_ram_role(
        &self,
        role_name: Option<&str>,
        metadata_url: &str,
        disable_imdsv1: bool,
    ) -> Result<(Credentials, u64), CredentialsError> {
        let base = metadata_url.trim_end_matches('/');
        let token_url = format!("{base}/latest/api/token");
        // Asked once: off ECS (or where the token endpoint is blocked) the library goes on
        // without it, and waiting through retries would only delay the answer.
        let token = match self
            .send_with(RetryPolicy::NEVER, || {
                http::Request::put(&token_url)
                    .header(
                        "x-aliyun-ecs-metadata-token-ttl-seconds",
                        METADATA_TOKEN_TTL_SECONDS.to_string(),
                    )
                    .body(Bytes::new())
                    .map_err(|e| build_error(&token_url, e))
            })
            .await
        {
            Ok(r) if r.is_success() => Some(String::from_utf8_lossy(&r.body).trim().to_string()),
            // Without the hardening the library goes on without a token, as IMDSv1 allows.
            _ if !disable_imdsv1 => None,
            Ok(r) => {
                return Err(self.fetch_error(format!(
                    "the metadata token: HTTP {} (ALIBABA_CLOUD_IMDSV1_DISABLED is true)",
                    r.status
                )));
            }
            Err(e) => {
                return Err(self.fetch_error(format!(
                    "the metadata token (ALIBABA_CLOUD_IMDSV1_DISABLED is true): {e}"
                )));
            }
        };
        let headers: Vec<(&str, String)> = token
            .iter()
            .map(|t| ("x-aliyun-ecs-metadata-token", t.clone()))
            .collect();
        let roles_url = format!("{base}/latest/meta-data/ram/security-credentials/");
        let role = match role_name {
            Some(role) => role.to_string(),
            None => {
                let response = self.send(|| get_request(&roles_url, &headers)).await?;
                if !response.is_success() {
                    return Err(self.fetch_error(format!(
                        "the instance's RAM role: HTTP {} (does the instance have one?)",
                        response.status
                    )));
                }
                String::from_utf8_lossy(&response.body)
                    .lines()
                    .next()
                    .map(str::trim)
                    .filter(|r| !r.is_empty())
                    .ok_or_else(|| self.fetch_error("the instance has no RAM role"))?
                    .to_string()
            }
        };
        let url = format!("{roles_url}{}", percent_encode(&role));
        let response = self.send(|| get_request(&url, &headers)).await?;
        self.temporary(&response)
    }
}

fn is_throttled(response: &Response) -> bool {
    serde_json::from_slice::<ErrorBody>(&response.body)
        .is_ok_and(|e| crate::errors::is_throttling(&e.code))
}

fn build_error(url: &str, e: http::Error) -> HttpError {
    HttpError::Transport {
        url: url.to_string(),
        reason: e.to_string(),
    }
}

fn encode_pairs(pairs: &[(String, String)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", percent_encode(k), percent_encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// `POST url/?query` with `form` as an `application/x-www-form-urlencoded` body.
fn form_request(
    url: &str,
    query: &[(String, String)],
    form: &[(String, String)],
) -> Result<http::Request<Bytes>, HttpError> {
    let full = format!("{}/?{}", url.trim_end_matches('/'), encode_pairs(query));
    http::Request::post(&full)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("accept", "application/json")
        .body(Bytes::from(encode_pairs(form)))
        .map_err(|e| build_error(url, e))
}

fn get_request(url: &str, headers: &[(&str, String)]) -> Result<http::Request<Bytes>, HttpError> {
    let mut builder = http::Request::get(url);
    for (k, v) in headers {
        builder = builder.header(*k, v.as_str());
    }
    builder.body(Bytes::new()).map_err(|e| build_error(url, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    fn endpoints() -> Endpoints {
        Endpoints::new("cn-hangzhou", Network::Public)
    }

    fn no_home() -> (&'static str, &'static str) {
        ("HOME", "/nonexistent-home-for-tests")
    }

    #[test]
    fn environment_keys_come_first() {
        let source = Source::from_env(
            env(&[
                ("ALIBABA_CLOUD_ACCESS_KEY_ID", "LTAI5t"),
                ("ALIBABA_CLOUD_ACCESS_KEY_SECRET", "secret"),
                ("ALIBABA_CLOUD_SECURITY_TOKEN", "token"),
                ("ALIBABA_CLOUD_ROLE_ARN", "acs:ram::1:role/r"),
                (
                    "ALIBABA_CLOUD_OIDC_PROVIDER_ARN",
                    "acs:ram::1:oidc-provider/p",
                ),
                ("ALIBABA_CLOUD_OIDC_TOKEN_FILE", "/var/run/token"),
            ]),
            &endpoints(),
        )
        .unwrap();
        assert_eq!(
            source,
            Source::Static(Credentials::new("LTAI5t", "secret").with_security_token("token"))
        );
        let shown = format!("{source:?}");
        assert!(
            !shown.contains("\"secret\"") && !shown.contains("\"token\""),
            "{shown}"
        );

        let legacy = Source::from_env(
            env(&[
                ("ALIBABA_CLOUD_ACCESS_KEY_Id", "LTAI-old"),
                ("ALIBABA_CLOUD_ACCESS_KEY_SECRET", "s"),
            ]),
            &endpoints(),
        )
        .unwrap();
        assert_eq!(legacy, Source::Static(Credentials::new("LTAI-old", "s")));

        let half = Source::from_env(
            env(&[("ALIBABA_CLOUD_ACCESS_KEY_ID", "LTAI5t")]),
            &endpoints(),
        )
        .unwrap_err();
        assert!(
            half.to_string().contains("ALIBABA_CLOUD_ACCESS_KEY_SECRET"),
            "{half}"
        );
    }

    #[test]
    fn rrsa_from_the_environment() {
        let source = Source::from_env(
            env(&[
                ("ALIBABA_CLOUD_ROLE_ARN", "acs:ram::1:role/karpenter"),
                (
                    "ALIBABA_CLOUD_OIDC_PROVIDER_ARN",
                    "acs:ram::1:oidc-provider/ack-rrsa-c",
                ),
                (
                    "ALIBABA_CLOUD_OIDC_TOKEN_FILE",
                    "/var/run/secrets/ack.alibabacloud.com/rrsa-tokens/token",
                ),
                no_home(),
            ]),
            &Endpoints::new("cn-beijing", Network::Vpc),
        )
        .unwrap();
        match source {
            Source::Oidc {
                session,
                oidc_provider_arn,
                token_file,
            } => {
                assert_eq!(session.role_arn, "acs:ram::1:role/karpenter");
                assert_eq!(session.session_name, "karpenter");
                assert_eq!(session.duration_seconds, 3600);
                assert_eq!(session.sts_url, "https://sts-vpc.cn-beijing.aliyuncs.com");
                assert_eq!(oidc_provider_arn, "acs:ram::1:oidc-provider/ack-rrsa-c");
                assert!(token_file.ends_with("rrsa-tokens/token"));
            }
            other => panic!("{other:?}"),
        }
        let half = Source::from_env(
            env(&[("ALIBABA_CLOUD_OIDC_TOKEN_FILE", "/t"), no_home()]),
            &endpoints(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            half.contains("ALIBABA_CLOUD_ROLE_ARN")
                && half.contains("ALIBABA_CLOUD_OIDC_PROVIDER_ARN"),
            "{half}"
        );
    }

    #[test]
    fn the_instance_role_is_the_last_resort() {
        assert_eq!(
            Source::from_env(
                env(&[
                    no_home(),
                    ("ALIBABA_CLOUD_ECS_METADATA", "KubernetesWorkerRole"),
                    ("ALIBABA_CLOUD_IMDSV1_DISABLED", "true"),
                ]),
                &endpoints()
            )
            .unwrap(),
            Source::EcsRamRole {
                role_name: Some("KubernetesWorkerRole".into()),
                metadata_url: METADATA_ENDPOINT.into(),
                disable_imdsv1: true,
            }
        );
        assert_eq!(
            Source::from_env(
                env(&[
                    no_home(),
                    ("ALIBABA_CLOUD_CREDENTIALS_URI", "http://127.0.0.1:9/c")
                ]),
                &endpoints()
            )
            .unwrap(),
            Source::Uri("http://127.0.0.1:9/c".into())
        );
        let err = Source::from_env(
            env(&[no_home(), ("ALIBABA_CLOUD_ECS_METADATA_DISABLED", "TRUE")]),
            &endpoints(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("ALIBABA_CLOUD_ACCESS_KEY_ID") && err.contains("RRSA"),
            "{err}"
        );
    }

    const PROFILES: &str = r#"{
  "current": "sts",
  "profiles": [
    {"name": "sts", "mode": "StsToken", "access_key_id": "STS.a", "access_key_secret": "s", "sts_token": "t"},
    {"name": "base", "mode": "AK", "access_key_id": "LTAI5t", "access_key_secret": "s"},
    {"name": "role", "mode": "RamRoleArn", "access_key_id": "LTAI5t", "access_key_secret": "s",
     "ram_role_arn": "acs:ram::1:role/admin", "ram_session_name": "ops", "expired_seconds": 900,
     "sts_region": "cn-shanghai", "enable_vpc": true, "external_id": "x"},
    {"name": "chained", "mode": "ChainableRamRoleArn", "source_profile": "role", "ram_role_arn": "acs:ram::2:role/deploy"},
    {"name": "ecs", "mode": "EcsRamRole", "ram_role_name": "worker"},
    {"name": "oidc", "mode": "OIDC", "ram_role_arn": "acs:ram::1:role/r", "oidc_provider_arn": "acs:ram::1:oidc-provider/p", "oidc_token_file": "/t"},
    {"name": "sso", "mode": "CloudSSO"},
    {"name": "loop", "mode": "ChainableRamRoleArn", "source_profile": "loop", "ram_role_arn": "acs:ram::1:role/r"},
    {"name": "keyless", "mode": "AK", "access_key_id": "LTAI5t"}
  ]
}"#;

    #[test]
    fn cli_profiles_in_every_supported_mode() {
        let source =
            |profile: Option<&str>| Source::from_cli_config(PROFILES, profile, &endpoints(), true);
        assert_eq!(
            source(None).unwrap(),
            Source::Static(Credentials::new("STS.a", "s").with_security_token("t")),
            "the current profile"
        );
        assert_eq!(
            source(Some("base")).unwrap(),
            Source::Static(Credentials::new("LTAI5t", "s"))
        );
        match source(Some("role")).unwrap() {
            Source::RamRoleArn {
                session,
                source,
                external_id,
            } => {
                assert_eq!(session.role_arn, "acs:ram::1:role/admin");
                assert_eq!(session.session_name, "ops");
                assert_eq!(session.duration_seconds, 900);
                assert_eq!(session.sts_url, "https://sts-vpc.cn-shanghai.aliyuncs.com");
                assert_eq!(*source, Source::Static(Credentials::new("LTAI5t", "s")));
                assert_eq!(external_id.as_deref(), Some("x"));
            }
            other => panic!("{other:?}"),
        }
        match source(Some("chained")).unwrap() {
            Source::RamRoleArn {
                session, source, ..
            } => {
                assert_eq!(session.role_arn, "acs:ram::2:role/deploy");
                assert_eq!(session.sts_url, "https://sts.cn-hangzhou.aliyuncs.com");
                assert!(matches!(*source, Source::RamRoleArn { .. }));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            source(Some("ecs")).unwrap(),
            Source::EcsRamRole {
                role_name: Some("worker".into()),
                metadata_url: METADATA_ENDPOINT.into(),
                disable_imdsv1: true,
            }
        );
        assert!(matches!(source(Some("oidc")).unwrap(), Source::Oidc { .. }));
        let sso = source(Some("sso")).unwrap_err().to_string();
        assert!(
            sso.contains("CloudSSO") && sso.contains("not supported"),
            "{sso}"
        );
        assert!(
            source(Some("loop"))
                .unwrap_err()
                .to_string()
                .contains("cycle")
        );
        assert!(
            source(Some("nobody"))
                .unwrap_err()
                .to_string()
                .contains("nobody")
        );
        let keyless = source(Some("keyless")).unwrap_err().to_string();
        assert!(keyless.contains("access_key_secret"), "{keyless}");
    }

    #[test]
    fn the_cloudpilot_chart_config() {
        // The Secret the cloudpilot-ai chart mounts at ~/.aliyun/config.json: no profile name,
        // no `current`.
        let chart = r#"{
  "profiles": [
    {
      "mode": "AK",
      "access_key_id": "LTAI5tChart",
      "access_key_secret": "chart-secret",
      "region_id": "cn-hangzhou"
    }
  ]
}"#;
        assert_eq!(
            Source::from_cli_config(chart, None, &endpoints(), false).unwrap(),
            Source::Static(Credentials::new("LTAI5tChart", "chart-secret"))
        );
    }

    #[test]
    fn a_broken_config_is_reported_without_its_contents() {
        let err = Source::from_cli_config(
            r#"{"profiles": [{"mode": "AK", "access_key_secret": "leaked?"#,
            None,
            &endpoints(),
            false,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("CLI config") && !err.contains("leaked"),
            "{err}"
        );
        let mistyped = Source::from_cli_config(
            r#"{"profiles": [{"mode": "AK", "access_key_id": "LTAI5t", "access_key_secret": 918273645}]}"#,
            None,
            &endpoints(),
            false,
        )
        .unwrap_err()
        .to_string();
        assert!(
            mistyped.contains("line 1") && !mistyped.contains("918273645"),
            "{mistyped}"
        );
        let empty = Source::from_cli_config(r#"{"profiles": []}"#, None, &endpoints(), false)
            .unwrap_err()
            .to_string();
        assert!(empty.contains("no profiles"), "{empty}");
    }
}
