//! Where credentials come from, in the order of huaweicloud-sdk-go-v3's credential chains
//! (`core/auth/provider/provider_chain.go`: `BasicCredentialProviderChain` for the regional
//! services, `GlobalCredentialProviderChain` for BSS — upstream builds both; one provider here
//! serves both, with the project id and the domain id beside the keys):
//!
//! 1. the environment: `HUAWEICLOUD_SDK_IDP_ID` with `HUAWEICLOUD_SDK_ID_TOKEN_FILE` (CCE's
//!    workload identity: the projected OIDC token exchanged with IAM for temporary keys), else
//!    `HUAWEICLOUD_SDK_AK` with `HUAWEICLOUD_SDK_SK` and, for temporary keys,
//!    `HUAWEICLOUD_SDK_SECURITY_TOKEN`;
//! 2. the SDK's credentials file, `HUAWEICLOUD_SDK_CREDENTIALS_FILE` or
//!    `~/.huaweicloud/credentials`: an INI file whose `[basic]` section holds `ak`, `sk`,
//!    `security_token`, `idp_id`, `id_token_file`, `project_id` and `iam_endpoint`, and whose
//!    `[global]` section may hold `domain_id`;
//! 3. the ECS metadata service's temporary keys (`GET
//!    http://169.254.169.254/openstack/latest/securitykey`, the instance's agency), with the
//!    metadata token the SDK asks for first (`PUT /meta-data/latest/api/token`).
//!
//! The project id is `HUAWEICLOUD_SDK_PROJECT_ID` (or the file's `project_id`) and the domain id
//! `HUAWEICLOUD_SDK_DOMAIN_ID` (or the file's); when they are not set the client looks them up
//! in IAM as the SDK does (see `crate::client::Client::project_id`).
//!
//! The OIDC exchange is the SDK's (`core/auth/base_credentials.go`, `internal/iam_helper.go`):
//! `POST /v3.0/OS-AUTH/id-token/tokens` with `X-Idp-Id` and `{"auth": {"id_token": {"id":
//! <token>}}}`, unsigned, answers an unscoped token in `X-Subject-Token`; `POST
//! /v3.0/OS-CREDENTIAL/securitytokens` with `{"auth": {"identity": {"methods": ["token"],
//! "token": {"id": <that token>, "duration_seconds": 21600}}}}` answers `{"credential":
//! {"access", "secret", "securitytoken", "expires_at"}}` — the metadata service's shape too.
//!
//! Temporary credentials are cached and fetched again forty minutes before they expire, as the
//! SDK does (half their lifetime when they live less than eighty minutes); the deadline is kept
//! on tokio's clock, which tests advance. Secrets, tokens and the OIDC token never reach a log or
//! an error: `Debug` redacts them and errors carry IAM's code and message only.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use karpenter_cloudprovider::http::{HttpClient, HttpError, Response, RetryPolicy, retryable};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::Mutex;
use tokio::time::Instant;

use super::Credentials;
use super::time::parse_iso8601;
use crate::endpoint::Endpoints;
use crate::errors::HuaweiError;

/// The ECS metadata service.
pub const METADATA_ENDPOINT: &str = "http://169.254.169.254";
/// How long before expiry temporary credentials are fetched again: the SDK's forty minutes.
pub const REFRESH_MARGIN_SECONDS: u64 = 40 * 60;
/// The lifetime asked of IAM for federated credentials, the SDK's six hours.
pub const DEFAULT_DURATION_SECONDS: u32 = 6 * 60 * 60;
/// How long the metadata token lives (the SDK's six hours).
const METADATA_TOKEN_TTL_SECONDS: u32 = 6 * 60 * 60;
/// The metadata service's answer when the instance has no agency to take keys from.
const NO_AGENCY: &str = "Please configure Cloud Service Agency first";

/// IAM's federated-token path.
pub const ID_TOKEN_PATH: &str = "/v3.0/OS-AUTH/id-token/tokens";
/// IAM's temporary-key path.
pub const SECURITY_TOKENS_PATH: &str = "/v3.0/OS-CREDENTIAL/securitytokens";
/// The metadata token's path.
pub const METADATA_TOKEN_PATH: &str = "/meta-data/latest/api/token";
/// The metadata service's temporary-key path.
pub const SECURITY_KEY_PATH: &str = "/openstack/latest/securitykey";

/// Why no credentials could be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialsError {
    /// The settings name no usable source, or a source misses a setting.
    #[error("huawei cloud credentials: {0}")]
    Config(String),
    /// The source refused or could not be reached.
    #[error("huawei cloud credentials from {source_name}: {reason}")]
    Fetch {
        /// Which source ([`Source::name`]).
        source_name: &'static str,
        /// Why.
        reason: String,
    },
}

/// Where the keys come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Fixed keys (permanent, or temporary ones with their security token).
    Static(Credentials),
    /// CCE's workload identity: the projected OIDC token exchanged with IAM.
    Oidc {
        /// The IAM identity provider's id (`HUAWEICLOUD_SDK_IDP_ID`).
        idp_id: String,
        /// The token's file, read afresh each time (the kubelet rotates it).
        token_file: PathBuf,
        /// The IAM base URL the token is exchanged at.
        iam_url: String,
    },
    /// The ECS instance's agency, through the metadata service.
    Metadata {
        /// The metadata service's base URL.
        url: String,
    },
}

impl Source {
    /// The source's name in errors and logs.
    pub fn name(&self) -> &'static str {
        match self {
            Source::Static(_) => "static keys",
            Source::Oidc { .. } => "OIDC federation",
            Source::Metadata { .. } => "the ECS metadata service",
        }
    }
}

/// What the settings say: the source, and the ids the SDK keeps with the keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Where the keys come from.
    pub source: Source,
    /// The project id of the region, when set.
    pub project_id: Option<String>,
    /// The account's domain id, when set.
    pub domain_id: Option<String>,
    /// An IAM endpoint for the project and domain lookups (the file's `iam_endpoint`).
    pub iam_endpoint: Option<String>,
}

fn non_empty(s: Option<&str>) -> Option<String> {
    s.map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// The keys of one place (the environment, a file's section) as the SDK's `fillCommonAttrs`
/// reads them: OIDC when both of its settings are there, else the key pair. `names` are the
/// settings' names there, for the errors.
struct Attrs {
    ak: Option<String>,
    sk: Option<String>,
    security_token: Option<String>,
    idp_id: Option<String>,
    id_token_file: Option<String>,
}

impl Attrs {
    /// The source these settings make, `None` when they name none. Half a pair is refused
    /// rather than passed over as the SDK does: the next source (the metadata service) would
    /// only fail later with a less helpful error.
    fn source(self, names: [&str; 4], iam_url: String) -> Result<Option<Source>, CredentialsError> {
        let [ak_name, sk_name, idp_name, file_name] = names;
        if let (Some(idp_id), Some(token_file)) = (&self.idp_id, &self.id_token_file) {
            return Ok(Some(Source::Oidc {
                idp_id: idp_id.clone(),
                token_file: token_file.into(),
                iam_url,
            }));
        }
        match (self.ak, self.sk) {
            (Some(ak), Some(sk)) => {
                let mut credentials = Credentials::new(ak, sk);
                credentials.security_token = self.security_token;
                Ok(Some(Source::Static(credentials)))
            }
            (Some(_), None) => Err(CredentialsError::Config(format!(
                "{ak_name} is set but {sk_name} is not"
            ))),
            (None, Some(_)) => Err(CredentialsError::Config(format!(
                "{sk_name} is set but {ak_name} is not"
            ))),
            (None, None) => match (self.idp_id, self.id_token_file) {
                (Some(_), None) => Err(CredentialsError::Config(format!(
                    "{idp_name} is set but {file_name} is not"
                ))),
                (None, Some(_)) => Err(CredentialsError::Config(format!(
                    "{file_name} is set but {idp_name} is not"
                ))),
                _ => Ok(None),
            },
        }
    }
}

impl Settings {
    /// The settings the environment describes, in the chain's order (see the module's
    /// documentation); `get` reads a setting (the environment in the binary, a map in tests).
    /// Federation goes to `endpoints`' global IAM endpoint unless the file names one.
    pub fn from_env(
        get: impl Fn(&str) -> Option<String>,
        endpoints: &Endpoints,
    ) -> Result<Self, CredentialsError> {
        let get = |k: &str| non_empty(get(k).as_deref());
        let project_id = get("HUAWEICLOUD_SDK_PROJECT_ID");
        let domain_id = get("HUAWEICLOUD_SDK_DOMAIN_ID");
        let env = Attrs {
            ak: get("HUAWEICLOUD_SDK_AK"),
            sk: get("HUAWEICLOUD_SDK_SK"),
            security_token: get("HUAWEICLOUD_SDK_SECURITY_TOKEN"),
            idp_id: get("HUAWEICLOUD_SDK_IDP_ID"),
            id_token_file: get("HUAWEICLOUD_SDK_ID_TOKEN_FILE"),
        };
        let names = [
            "HUAWEICLOUD_SDK_AK",
            "HUAWEICLOUD_SDK_SK",
            "HUAWEICLOUD_SDK_IDP_ID",
            "HUAWEICLOUD_SDK_ID_TOKEN_FILE",
        ];
        if let Some(source) = env.source(names, endpoints.global_iam_url())? {
            return Ok(Settings {
                source,
                project_id,
                domain_id,
                iam_endpoint: None,
            });
        }

        let explicit = get("HUAWEICLOUD_SDK_CREDENTIALS_FILE").map(PathBuf::from);
        let path = explicit.clone().or_else(|| {
            get("HOME").map(|home| Path::new(&home).join(".huaweicloud").join("credentials"))
        });
        if let Some(path) = path
            && (explicit.is_some() || path.exists())
        {
            let text = std::fs::read_to_string(&path).map_err(|e| {
                CredentialsError::Config(format!(
                    "reading the credentials file {}: {e}",
                    path.display()
                ))
            })?;
            let from_file = Self::from_profile(&text, endpoints).map_err(|e| match e {
                CredentialsError::Config(reason) => {
                    CredentialsError::Config(format!("{}: {reason}", path.display()))
                }
                other => other,
            })?;
            if let Some(mut settings) = from_file {
                // The environment's ids win over the file's, as with the keys.
                settings.project_id = project_id.or(settings.project_id);
                settings.domain_id = domain_id.or(settings.domain_id);
                return Ok(settings);
            }
        }

        Ok(Settings {
            source: Source::Metadata {
                url: METADATA_ENDPOINT.into(),
            },
            project_id,
            domain_id,
            iam_endpoint: None,
        })
    }

    /// The settings of the SDK's credentials file (INI: `[basic]` for the keys, the project id
    /// and `iam_endpoint`, `[global]` for the domain id); `None` when `[basic]` names no keys.
    pub fn from_profile(
        text: &str,
        endpoints: &Endpoints,
    ) -> Result<Option<Self>, CredentialsError> {
        let sections = parse_ini(text);
        let empty = BTreeMap::new();
        let basic = sections.get("basic").unwrap_or(&empty);
        let global = sections.get("global").unwrap_or(&empty);
        let key = |section: &BTreeMap<String, String>, k: &str| {
            non_empty(section.get(k).map(String::as_str))
        };
        let iam_endpoint = key(basic, "iam_endpoint");
        let attrs = Attrs {
            ak: key(basic, "ak"),
            sk: key(basic, "sk"),
            security_token: key(basic, "security_token"),
            idp_id: key(basic, "idp_id"),
            id_token_file: key(basic, "id_token_file"),
        };
        let iam_url = iam_endpoint
            .as_deref()
            .map(normalize_url)
            .unwrap_or_else(|| endpoints.global_iam_url());
        let source = attrs.source(
            [
                "[basic] ak",
                "[basic] sk",
                "[basic] idp_id",
                "[basic] id_token_file",
            ],
            iam_url,
        )?;
        Ok(source.map(|source| Settings {
            source,
            project_id: key(basic, "project_id"),
            domain_id: key(global, "domain_id").or_else(|| key(basic, "domain_id")),
            iam_endpoint: iam_endpoint.as_deref().map(normalize_url),
        }))
    }
}

/// `https://` added to a bare host (the SDK's rule for IAM endpoints), no trailing `/`.
fn normalize_url(endpoint: &str) -> String {
    let endpoint = endpoint.trim().trim_end_matches('/');
    if endpoint.contains("://") {
        endpoint.to_string()
    } else {
        format!("https://{endpoint}")
    }
}

/// An INI file's sections as gopkg.in/ini.v1 reads the SDK's credentials file with its
/// defaults: `[section]` headers, `key = value` or `key: value`, whole-line comments and
/// inline ones (from the first `#` or `;` of an unquoted value), values in `"…"`, `'…'` or
/// `` `…` `` taken as they are. Keys before any section are in `DEFAULT`.
fn parse_ini(text: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut sections: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut current = "DEFAULT".to_string();
    for line in text.lines() {
        let line = line.trim().trim_start_matches('\u{feff}');
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.split_once(']')) {
            current = name.0.trim().to_string();
            sections.entry(current.clone()).or_default();
            continue;
        }
        let Some(at) = line.find(['=', ':']) else {
            continue;
        };
        let key = line[..at].trim().to_string();
        let raw = line[at + 1..].trim();
        let quoted = ['"', '\'', '`'].into_iter().find_map(|q| {
            raw.strip_prefix(q)
                .and_then(|rest| rest.find(q).map(|end| rest[..end].to_string()))
        });
        let value = quoted.unwrap_or_else(|| {
            raw.split(['#', ';'])
                .next()
                .unwrap_or_default()
                .trim()
                .to_string()
        });
        sections
            .entry(current.clone())
            .or_default()
            .insert(key, value);
    }
    sections
}

/// Temporary credentials and when to fetch them again (tokio's clock).
struct Cached {
    credentials: Credentials,
    refresh_at: Instant,
    expires_at: Instant,
}

/// Hands out current credentials from one [`Source`], fetching temporary ones again before they
/// expire; keeps the project and domain ids the settings gave. Cheap to clone; clones share the
/// cache.
#[derive(Clone)]
pub struct CredentialsProvider {
    source: Source,
    project_id: Option<String>,
    domain_id: Option<String>,
    iam_endpoint: Option<String>,
    http: Option<HttpClient>,
    retry: RetryPolicy,
    cache: Arc<Mutex<Option<Cached>>>,
}

impl std::fmt::Debug for CredentialsProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialsProvider")
            .field("source", &self.source)
            .field("project_id", &self.project_id)
            .field("domain_id", &self.domain_id)
            .finish_non_exhaustive()
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// IAM's and the metadata service's temporary credentials.
#[derive(Deserialize)]
struct TemporaryCredentials {
    access: String,
    secret: String,
    securitytoken: String,
    expires_at: String,
}

#[derive(Deserialize)]
struct CredentialAnswer {
    credential: Option<TemporaryCredentials>,
}

#[derive(Deserialize)]
struct TokenAnswer {
    token: Option<TokenInfo>,
}

#[derive(Deserialize)]
struct TokenInfo {
    #[serde(default)]
    expires_at: String,
}

/// A refusal as IAM words it: code, message and trace id, never the request.
fn describe_refusal(response: &Response) -> String {
    let id = response
        .header("X-Request-Id")
        .or_else(|| response.header("X-IAM-Trace-Id"));
    HuaweiError::parse(response.status, id, &response.body).to_string()
}

/// Where a JSON answer is broken, never what it says: the answers hold secrets.
fn unreadable(e: &serde_json::Error) -> String {
    format!(
        "unreadable answer ({:?} error at line {}, column {})",
        e.classify(),
        e.line(),
        e.column()
    )
}

fn build_error(url: &str, e: http::Error) -> HttpError {
    HttpError::Transport {
        url: url.to_string(),
        reason: e.to_string(),
    }
}

fn json_post(
    url: &str,
    headers: &[(&str, &str)],
    body: &serde_json::Value,
) -> Result<http::Request<Bytes>, HttpError> {
    let mut builder = http::Request::post(url)
        .header("Content-Type", "application/json;charset=UTF-8")
        .header("User-Agent", crate::client::USER_AGENT);
    for (k, v) in headers {
        builder = builder.header(*k, *v);
    }
    builder
        .body(Bytes::from(body.to_string()))
        .map_err(|e| build_error(url, e))
}

fn is_throttled(response: &Response) -> bool {
    !response.is_success()
        && HuaweiError::parse(response.status, None, &response.body).is_throttling()
}

impl CredentialsProvider {
    /// A provider of `source`'s credentials, fetched through `http`.
    pub fn new(source: Source, http: HttpClient) -> Self {
        Self {
            source,
            project_id: None,
            domain_id: None,
            iam_endpoint: None,
            http: Some(http),
            retry: RetryPolicy::STANDARD,
            cache: Arc::default(),
        }
    }

    /// A provider of what `settings` describe, fetched through `http`.
    pub fn from_settings(settings: Settings, http: HttpClient) -> Self {
        let mut provider = Self::new(settings.source, http);
        provider.project_id = settings.project_id;
        provider.domain_id = settings.domain_id;
        provider.iam_endpoint = settings.iam_endpoint;
        provider
    }

    /// Fixed, permanent keys (tests, and keys from a Secret); no HTTP client needed.
    pub fn static_keys(access_key: impl Into<String>, secret_key: impl Into<String>) -> Self {
        Self::static_credentials(Credentials::new(access_key, secret_key))
    }

    /// Fixed credentials, temporary ones with their token included.
    pub fn static_credentials(credentials: Credentials) -> Self {
        Self {
            source: Source::Static(credentials),
            project_id: None,
            domain_id: None,
            iam_endpoint: None,
            http: None,
            retry: RetryPolicy::STANDARD,
            cache: Arc::default(),
        }
    }

    /// The same provider with the region's project id set (no IAM lookup then).
    pub fn with_project_id(mut self, project_id: impl Into<String>) -> Self {
        self.project_id = Some(project_id.into());
        self
    }

    /// The same provider with the account's domain id set (no IAM lookup then).
    pub fn with_domain_id(mut self, domain_id: impl Into<String>) -> Self {
        self.domain_id = Some(domain_id.into());
        self
    }

    /// The same provider with another retry policy for its fetches (tests keep backoffs short).
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Where the keys come from.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// The project id the settings gave.
    pub fn project_id(&self) -> Option<&str> {
        self.project_id.as_deref()
    }

    /// The domain id the settings gave.
    pub fn domain_id(&self) -> Option<&str> {
        self.domain_id.as_deref()
    }

    /// The IAM endpoint the credentials file named for the lookups.
    pub fn iam_endpoint(&self) -> Option<&str> {
        self.iam_endpoint.as_deref()
    }

    /// Current credentials: fixed ones as they are; temporary ones from the cache while they
    /// are not due for refreshing, else fetched anew. When a refresh fails while the cached
    /// ones are still valid, those are used and the failure is logged.
    pub async fn get(&self) -> Result<Credentials, CredentialsError> {
        if let Source::Static(c) = &self.source {
            return Ok(c.clone());
        }
        let mut cache = self.cache.lock().await;
        if let Some(cached) = cache.as_ref()
            && Instant::now() < cached.refresh_at
        {
            return Ok(cached.credentials.clone());
        }
        match self.fetch().await {
            Ok((credentials, expires_at_unix)) => {
                let lifetime = expires_at_unix.saturating_sub(unix_now());
                let margin = REFRESH_MARGIN_SECONDS.min(lifetime / 2);
                let now = Instant::now();
                *cache = Some(Cached {
                    credentials: credentials.clone(),
                    refresh_at: now + Duration::from_secs(lifetime - margin),
                    expires_at: now + Duration::from_secs(lifetime),
                });
                tracing::debug!(
                    source = self.source.name(),
                    access_key = %credentials.access_key,
                    lifetime_seconds = lifetime,
                    "fetched temporary Huawei Cloud credentials"
                );
                Ok(credentials)
            }
            Err(e) => match cache.as_ref() {
                Some(cached) if Instant::now() < cached.expires_at => {
                    tracing::warn!(error = %e, "refreshing Huawei Cloud credentials failed; the current ones are still valid");
                    Ok(cached.credentials.clone())
                }
                _ => Err(e),
            },
        }
    }

    fn fetch_error(&self, reason: impl Into<String>) -> CredentialsError {
        CredentialsError::Fetch {
            source_name: self.source.name(),
            reason: reason.into(),
        }
    }

    async fn fetch(&self) -> Result<(Credentials, u64), CredentialsError> {
        match &self.source {
            Source::Static(c) => Ok((c.clone(), u64::MAX)),
            Source::Oidc {
                idp_id,
                token_file,
                iam_url,
            } => self.federate(idp_id, token_file, iam_url).await,
            Source::Metadata { url } => self.metadata_keys(url).await,
        }
    }

    fn http(&self) -> Result<&HttpClient, CredentialsError> {
        self.http
            .as_ref()
            .ok_or_else(|| self.fetch_error("no HTTP client to fetch with"))
    }

    /// Sends a request `build` makes, again on throttling, server errors and lost connections
    /// (every credential request may be repeated).
    async fn send(
        &self,
        policy: RetryPolicy,
        build: impl FnMut() -> Result<http::Request<Bytes>, HttpError>,
    ) -> Result<Response, CredentialsError> {
        self.http()?
            .send_rebuilt_with_retries(policy, build, |outcome| match outcome {
                Ok(r) => retryable(r.status) || is_throttled(r),
                Err(_) => true,
            })
            .await
            .map_err(|e| self.fetch_error(e.to_string()))
    }

    /// Reads `{"credential": {…}}` from a 2xx answer.
    fn temporary(&self, response: &Response) -> Result<(Credentials, u64), CredentialsError> {
        if !response.is_success() {
            return Err(self.fetch_error(describe_refusal(response)));
        }
        let answer: CredentialAnswer =
            serde_json::from_slice(&response.body).map_err(|e| self.fetch_error(unreadable(&e)))?;
        let c = answer
            .credential
            .ok_or_else(|| self.fetch_error("the answer holds no credential"))?;
        let expires_at = parse_iso8601(&c.expires_at)
            .ok_or_else(|| self.fetch_error(format!("unreadable expires_at {:?}", c.expires_at)))?;
        Ok((
            Credentials::new(c.access, c.secret).with_security_token(c.securitytoken),
            expires_at,
        ))
    }

    async fn federate(
        &self,
        idp_id: &str,
        token_file: &Path,
        iam_url: &str,
    ) -> Result<(Credentials, u64), CredentialsError> {
        let id_token = std::fs::read_to_string(token_file)
            .map(|t| t.trim().to_string())
            .map_err(|e| {
                self.fetch_error(format!(
                    "reading the OIDC token {}: {e}",
                    token_file.display()
                ))
            })?;
        if id_token.is_empty() {
            return Err(self.fetch_error(format!(
                "the OIDC token file {} is empty",
                token_file.display()
            )));
        }
        let base = iam_url.trim_end_matches('/');
        let token_url = format!("{base}{ID_TOKEN_PATH}");
        let body = json!({"auth": {"id_token": {"id": id_token}}});
        let response = self
            .send(self.retry, || {
                json_post(&token_url, &[("X-Idp-Id", idp_id)], &body)
            })
            .await?;
        if !response.is_success() {
            return Err(self.fetch_error(format!(
                "exchanging the OIDC token with IAM identity provider {idp_id}: {}",
                describe_refusal(&response)
            )));
        }
        let subject_token = response
            .header("X-Subject-Token")
            .filter(|t| !t.is_empty())
            .ok_or_else(|| self.fetch_error("IAM's token answer has no X-Subject-Token"))?
            .to_string();
        let expiry = serde_json::from_slice::<TokenAnswer>(&response.body)
            .ok()
            .and_then(|a| a.token)
            .map(|t| t.expires_at)
            .unwrap_or_default();
        if expiry.is_empty() {
            return Err(self.fetch_error("IAM's token answer has no token.expires_at"));
        }
        let keys_url = format!("{base}{SECURITY_TOKENS_PATH}");
        let body = json!({"auth": {"identity": {
            "methods": ["token"],
            "token": {"id": subject_token, "duration_seconds": DEFAULT_DURATION_SECONDS},
        }}});
        let response = self
            .send(self.retry, || json_post(&keys_url, &[], &body))
            .await?;
        self.temporary(&response).map_err(|e| match e {
            CredentialsError::Fetch { reason, .. } => {
                self.fetch_error(format!("temporary keys for the federated token: {reason}"))
            }
            other => other,
        })
    }

    async fn metadata_keys(&self, url: &str) -> Result<(Credentials, u64), CredentialsError> {
        let base = url.trim_end_matches('/');
        let mut token = self.metadata_token(base, false).await?;
        let key_url = format!("{base}{SECURITY_KEY_PATH}");
        let get = |token: &Option<String>| {
            let mut builder = http::Request::get(&key_url);
            if let Some(t) = token {
                builder = builder.header("X-Metadata-Token", t.as_str());
            }
            builder
                .body(Bytes::new())
                .map_err(|e| build_error(&key_url, e))
        };
        let mut response = self.send(self.retry, || get(&token)).await?;
        let no_agency = |r: &Response| String::from_utf8_lossy(&r.body).contains(NO_AGENCY);
        if response.status == 401 && !no_agency(&response) {
            // The token expired or is required: the SDK asks for one again, insisting.
            token = self.metadata_token(base, true).await?;
            response = self.send(self.retry, || get(&token)).await?;
        }
        if !response.is_success() && no_agency(&response) {
            return Err(self.fetch_error(
                "the instance has no agency to take keys from (the metadata service says: configure a Cloud Service Agency)",
            ));
        }
        self.temporary(&response)
    }

    /// The metadata token: `None` where the service has none to give (404, 405, 503) unless
    /// `required`, as the SDK's accessor decides.
    async fn metadata_token(
        &self,
        base: &str,
        required: bool,
    ) -> Result<Option<String>, CredentialsError> {
        let url = format!("{base}{METADATA_TOKEN_PATH}");
        let response = self
            .send(RetryPolicy::NEVER, || {
                http::Request::put(&url)
                    .header(
                        "X-Metadata-Token-Ttl-Seconds",
                        METADATA_TOKEN_TTL_SECONDS.to_string(),
                    )
                    .body(Bytes::new())
                    .map_err(|e| build_error(&url, e))
            })
            .await?;
        match response.status {
            200 => Ok(Some(
                String::from_utf8_lossy(&response.body).trim().to_string(),
            )),
            404 | 405 | 503 if !required => Ok(None),
            status => Err(self.fetch_error(format!("the metadata token: HTTP {status}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    fn endpoints() -> Endpoints {
        Endpoints::new("cn-north-4")
    }

    fn no_home() -> (&'static str, &'static str) {
        ("HOME", "/nonexistent-home-for-tests")
    }

    #[test]
    fn environment_keys_with_their_ids() {
        let settings = Settings::from_env(
            env(&[
                ("HUAWEICLOUD_SDK_AK", "HPUAEXAMPLE"),
                ("HUAWEICLOUD_SDK_SK", "secret"),
                ("HUAWEICLOUD_SDK_SECURITY_TOKEN", "token"),
                ("HUAWEICLOUD_SDK_PROJECT_ID", "0123456789abcdef"),
                ("HUAWEICLOUD_SDK_DOMAIN_ID", "fedcba9876543210"),
                no_home(),
            ]),
            &endpoints(),
        )
        .unwrap();
        assert_eq!(
            settings,
            Settings {
                source: Source::Static(
                    Credentials::new("HPUAEXAMPLE", "secret").with_security_token("token")
                ),
                project_id: Some("0123456789abcdef".into()),
                domain_id: Some("fedcba9876543210".into()),
                iam_endpoint: None,
            }
        );
        let shown = format!("{settings:?}");
        assert!(
            !shown.contains("\"secret\"") && !shown.contains("\"token\""),
            "{shown}"
        );
    }

    #[test]
    fn federation_comes_before_keys() {
        // As the SDK's fillCommonAttrs: both OIDC settings win over a key pair.
        let settings = Settings::from_env(
            env(&[
                ("HUAWEICLOUD_SDK_IDP_ID", "karpenter-idp"),
                (
                    "HUAWEICLOUD_SDK_ID_TOKEN_FILE",
                    "/var/run/secrets/tokens/oidc-token",
                ),
                ("HUAWEICLOUD_SDK_AK", "HPUAEXAMPLE"),
                ("HUAWEICLOUD_SDK_SK", "secret"),
                no_home(),
            ]),
            &endpoints(),
        )
        .unwrap();
        assert_eq!(
            settings.source,
            Source::Oidc {
                idp_id: "karpenter-idp".into(),
                token_file: "/var/run/secrets/tokens/oidc-token".into(),
                iam_url: "https://iam.myhuaweicloud.com".into(),
            }
        );
        // Half of federation beside a full key pair: the keys.
        let keys = Settings::from_env(
            env(&[
                ("HUAWEICLOUD_SDK_IDP_ID", "karpenter-idp"),
                ("HUAWEICLOUD_SDK_AK", "HPUAEXAMPLE"),
                ("HUAWEICLOUD_SDK_SK", "secret"),
            ]),
            &endpoints(),
        )
        .unwrap();
        assert!(matches!(keys.source, Source::Static(_)));
    }

    #[test]
    fn half_settings_are_refused_by_name() {
        for (pairs, named) in [
            (vec![("HUAWEICLOUD_SDK_AK", "a")], "HUAWEICLOUD_SDK_SK"),
            (vec![("HUAWEICLOUD_SDK_SK", "s")], "HUAWEICLOUD_SDK_AK"),
            (
                vec![("HUAWEICLOUD_SDK_IDP_ID", "idp")],
                "HUAWEICLOUD_SDK_ID_TOKEN_FILE",
            ),
            (
                vec![("HUAWEICLOUD_SDK_ID_TOKEN_FILE", "/t")],
                "HUAWEICLOUD_SDK_IDP_ID",
            ),
        ] {
            let mut pairs = pairs;
            pairs.push(no_home());
            let err = Settings::from_env(env(&pairs), &endpoints())
                .unwrap_err()
                .to_string();
            assert!(err.contains(named), "{err}");
        }
    }

    #[test]
    fn the_metadata_service_is_the_last_resort() {
        let settings = Settings::from_env(
            env(&[
                no_home(),
                ("HUAWEICLOUD_SDK_PROJECT_ID", "p"),
                ("HUAWEICLOUD_SDK_AK", " "),
            ]),
            &endpoints(),
        )
        .unwrap();
        assert_eq!(
            settings.source,
            Source::Metadata {
                url: METADATA_ENDPOINT.into()
            }
        );
        assert_eq!(settings.project_id.as_deref(), Some("p"));
    }

    const PROFILE: &str = "
; the SDK's credentials file
[basic]
ak = HPUAPROFILE
sk = \"profile#secret\"
project_id = 0123 ; inline comment
iam_endpoint = iam.proxy.internal/

[global]
ak = HPUAGLOBAL
sk = other
domain_id: d0m41n
";

    #[test]
    fn the_sdks_credentials_file() {
        let settings = Settings::from_profile(PROFILE, &endpoints())
            .unwrap()
            .unwrap();
        assert_eq!(
            settings,
            Settings {
                source: Source::Static(Credentials::new("HPUAPROFILE", "profile#secret")),
                project_id: Some("0123".into()),
                domain_id: Some("d0m41n".into()),
                iam_endpoint: Some("https://iam.proxy.internal".into()),
            }
        );
        let federated =
            Settings::from_profile("[basic]\nidp_id = idp\nid_token_file = /t\n", &endpoints())
                .unwrap()
                .unwrap();
        assert_eq!(
            federated.source,
            Source::Oidc {
                idp_id: "idp".into(),
                token_file: "/t".into(),
                iam_url: "https://iam.myhuaweicloud.com".into()
            }
        );
        assert_eq!(
            Settings::from_profile("[global]\nak = a\nsk = s\n", &endpoints()).unwrap(),
            None,
            "keys only in [global] are not the regional services'"
        );
        let half = Settings::from_profile("[basic]\nak = a\n", &endpoints())
            .unwrap_err()
            .to_string();
        assert!(half.contains("[basic] sk"), "{half}");
    }

    #[test]
    fn the_file_is_found_through_the_environment() {
        let dir = std::env::temp_dir().join(format!("hw-credentials-{}", std::process::id()));
        std::fs::create_dir_all(dir.join(".huaweicloud")).unwrap();
        std::fs::write(dir.join(".huaweicloud/credentials"), PROFILE).unwrap();
        let home = dir.display().to_string();
        let settings = Settings::from_env(
            env(&[("HOME", &home), ("HUAWEICLOUD_SDK_PROJECT_ID", "from-env")]),
            &endpoints(),
        )
        .unwrap();
        assert!(matches!(settings.source, Source::Static(ref c) if c.access_key == "HPUAPROFILE"));
        assert_eq!(settings.project_id.as_deref(), Some("from-env"));

        let missing = Settings::from_env(
            env(&[
                ("HOME", &home),
                (
                    "HUAWEICLOUD_SDK_CREDENTIALS_FILE",
                    "/nonexistent/credentials",
                ),
            ]),
            &endpoints(),
        )
        .unwrap_err()
        .to_string();
        assert!(missing.contains("/nonexistent/credentials"), "{missing}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn ini_as_the_sdk_reads_it() {
        let sections = parse_ini(
            "top = level\n[a]\nk1 = v1 # c\nk2: 'quoted ; kept'\n# comment\n  k3=`x#y`\nbroken line\n[b]\nk1 = other\n",
        );
        assert_eq!(sections["DEFAULT"]["top"], "level");
        assert_eq!(sections["a"]["k1"], "v1");
        assert_eq!(sections["a"]["k2"], "quoted ; kept");
        assert_eq!(sections["a"]["k3"], "x#y");
        assert_eq!(sections["a"].len(), 3);
        assert_eq!(sections["b"]["k1"], "other");
    }

    #[test]
    fn secrets_stay_out_of_the_providers_debug_output() {
        let p = CredentialsProvider::static_credentials(
            Credentials::new("HPUA", "s3cr3t").with_security_token("t0k3n"),
        )
        .with_project_id("p");
        let shown = format!("{p:?}");
        assert!(
            shown.contains("HPUA") && !shown.contains("s3cr3t") && !shown.contains("t0k3n"),
            "{shown}"
        );
    }
}
