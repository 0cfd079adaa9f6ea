//! Where credentials come from, in the AWS SDKs' default order:
//! 1. static keys in the environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//!    `AWS_SESSION_TOKEN`);
//! 2. the selected profile of the shared files: static keys, `role_arn` assumed from a
//!    `source_profile` (chains of them) or a `credential_source`, `web_identity_token_file`,
//!    `credential_process`, or IAM Identity Center (SSO) from the token cache `aws sso login`
//!    fills;
//! 3. web identity from the environment (IRSA: `AWS_ROLE_ARN`, `AWS_WEB_IDENTITY_TOKEN_FILE`);
//! 4. the container endpoint (ECS `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`, EKS Pod Identity
//!    `AWS_CONTAINER_CREDENTIALS_FULL_URI`, with `AWS_CONTAINER_AUTHORIZATION_TOKEN[_FILE]`);
//! 5. the EC2 instance's role through IMDSv2, unless `AWS_EC2_METADATA_DISABLED=true`.
//!
//! The source is decided once, from the settings; temporary credentials are cached and
//! refreshed five minutes before they expire, and kept while still valid when a refresh fails.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::Mutex;

use super::config::SharedConfig;
use super::sigv4::Credentials;
use super::{metadata, process, sso, sts};
use crate::http::{AwsError, AwsHttp, Result};

/// Assuming a role with other credentials (STS AssumeRole).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AssumeRole {
    /// The role to assume.
    pub role_arn: String,
    /// `role_session_name`.
    pub session_name: Option<String>,
    /// `external_id`.
    pub external_id: Option<String>,
    /// `duration_seconds`.
    pub duration_seconds: Option<u32>,
}

/// IAM Identity Center: a role in an account, through the token `aws sso login` cached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sso {
    /// The portal's region (`sso_region`).
    pub region: String,
    /// `sso_account_id`.
    pub account_id: String,
    /// `sso_role_name`.
    pub role_name: String,
    /// The token cache file.
    pub cache_file: String,
}

/// How credentials are obtained.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Fixed keys.
    Static(Credentials),
    /// A web identity token exchanged with STS AssumeRoleWithWebIdentity (IRSA).
    WebIdentity {
        /// The role to assume.
        role_arn: String,
        /// The projected token's file.
        token_file: String,
        /// `AWS_ROLE_SESSION_NAME` or the profile's `role_session_name`; the SDKs' default
        /// otherwise.
        session_name: Option<String>,
    },
    /// The ECS or EKS Pod Identity credentials endpoint.
    Container {
        /// The endpoint.
        uri: String,
        /// The file holding the authorization token, read at each refresh.
        token_file: Option<String>,
    },
    /// The ECS endpoint with a token given in the environment.
    ContainerToken {
        /// The endpoint.
        uri: String,
        /// `AWS_CONTAINER_AUTHORIZATION_TOKEN`.
        token: String,
    },
    /// The EC2 instance's role, through IMDSv2 at this endpoint.
    Imds {
        /// `http://169.254.169.254` unless configured.
        endpoint: String,
    },
    /// `credential_process`: a command printing credentials as JSON.
    Process {
        /// The command line, run by the shell.
        command: String,
    },
    /// IAM Identity Center.
    Sso(Sso),
    /// A role assumed with the credentials of `base`.
    AssumeRole {
        /// The role.
        role: AssumeRole,
        /// Where the credentials that assume it come from.
        base: Box<Source>,
    },
}

fn err(message: impl Into<String>) -> AwsError {
    AwsError::Credentials(message.into())
}

/// Where the ECS agent answers for `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`.
pub const ECS_ENDPOINT: &str = "http://169.254.170.2";

/// The IMDS endpoints of each `ec2_metadata_service_endpoint_mode`.
pub const IMDS_IPV4: &str = "http://169.254.169.254";
/// The IPv6 one.
pub const IMDS_IPV6: &str = "http://[fd00:ec2::254]";

/// Whether a full container URI may be called: HTTPS anywhere, plain HTTP only on loopback or
/// the ECS and EKS agents' link-local addresses (as the SDKs allow).
fn container_uri_allowed(uri: &str) -> bool {
    if uri.starts_with("https://") {
        return true;
    }
    let Some(rest) = uri.strip_prefix("http://") else {
        return false;
    };
    let authority = rest.split('/').next().unwrap_or_default();
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next().unwrap_or_default()
    } else {
        authority.split(':').next().unwrap_or_default()
    };
    host == "localhost"
        || host == "169.254.170.2"
        || host == "169.254.170.23"
        || host.eq_ignore_ascii_case("fd00:ec2::23")
        || host == "::1"
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The container source the environment describes, if any.
fn container_from(get: &impl Fn(&str) -> Option<String>) -> Result<Option<Source>> {
    let uri = if let Some(relative) = get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") {
        format!("{ECS_ENDPOINT}{relative}")
    } else if let Some(full) = get("AWS_CONTAINER_CREDENTIALS_FULL_URI") {
        if !container_uri_allowed(&full) {
            return Err(err(format!(
                "AWS_CONTAINER_CREDENTIALS_FULL_URI = {full:?}: plain HTTP is only allowed to loopback or the ECS/EKS agent addresses"
            )));
        }
        full
    } else {
        return Ok(None);
    };
    if let Some(token_file) = get("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE") {
        return Ok(Some(Source::Container {
            uri,
            token_file: Some(token_file),
        }));
    }
    Ok(Some(match get("AWS_CONTAINER_AUTHORIZATION_TOKEN") {
        Some(token) => Source::ContainerToken { uri, token },
        None => Source::Container {
            uri,
            token_file: None,
        },
    }))
}

fn static_from_env(get: &impl Fn(&str) -> Option<String>) -> Option<Source> {
    Some(Source::Static(Credentials {
        access_key_id: get("AWS_ACCESS_KEY_ID")?,
        secret_access_key: get("AWS_SECRET_ACCESS_KEY")?,
        session_token: get("AWS_SESSION_TOKEN"),
    }))
}

fn web_identity_from_env(get: &impl Fn(&str) -> Option<String>) -> Option<Source> {
    Some(Source::WebIdentity {
        role_arn: get("AWS_ROLE_ARN")?,
        token_file: get("AWS_WEB_IDENTITY_TOKEN_FILE")?,
        session_name: get("AWS_ROLE_SESSION_NAME"),
    })
}

fn imds_from(config: Option<&SharedConfig>, get: &impl Fn(&str) -> Option<String>) -> Source {
    let setting =
        |var: &str, key: &str| get(var).or_else(|| config.and_then(|c| c.profile_value(key)));
    let endpoint = setting(
        "AWS_EC2_METADATA_SERVICE_ENDPOINT",
        "ec2_metadata_service_endpoint",
    )
    .unwrap_or_else(|| {
        match setting(
            "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE",
            "ec2_metadata_service_endpoint_mode",
        ) {
            Some(mode) if mode.eq_ignore_ascii_case("ipv6") => IMDS_IPV6.into(),
            _ => IMDS_IPV4.into(),
        }
    });
    Source::Imds {
        endpoint: endpoint.trim_end_matches('/').to_string(),
    }
}

fn imds_disabled(get: &impl Fn(&str) -> Option<String>) -> bool {
    get("AWS_EC2_METADATA_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

impl Source {
    /// A short name of the source, for logs (never a secret).
    pub fn kind(&self) -> &'static str {
        match self {
            Source::Static(_) => "static keys",
            Source::WebIdentity { .. } => "web identity",
            Source::Container { .. } | Source::ContainerToken { .. } => "container endpoint",
            Source::Imds { .. } => "instance metadata (IMDSv2)",
            Source::Process { .. } => "credential_process",
            Source::Sso(_) => "IAM Identity Center (SSO)",
            Source::AssumeRole { .. } => "assumed role",
        }
    }

    /// The source the environment alone describes (no shared files): static keys, web
    /// identity, the container endpoint, else IMDS unless disabled.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let get = |k: &str| get(k).filter(|v| !v.trim().is_empty());
        if let Some(s) = static_from_env(&get) {
            return Ok(s);
        }
        if let Some(s) = web_identity_from_env(&get) {
            return Ok(s);
        }
        if let Some(s) = container_from(&get)? {
            return Ok(s);
        }
        if !imds_disabled(&get) {
            return Ok(imds_from(None, &get));
        }
        Err(none_found(None))
    }

    /// The source of the SDKs' default chain for these settings.
    pub fn resolve(config: &SharedConfig) -> Result<Self> {
        let get = |k: &str| config.env(k);
        if let Some(s) = static_from_env(&get) {
            return Ok(s);
        }
        match profile_source(config, &config.profile, &mut Vec::new())? {
            Some(s) => return Ok(s),
            None if config.profile_chosen
                && !config.files.profiles.contains_key(&config.profile) =>
            {
                return Err(err(format!(
                    "AWS_PROFILE = {:?}: no such profile in the config or credentials file",
                    config.profile
                )));
            }
            None => {}
        }
        if let Some(s) = web_identity_from_env(&get) {
            return Ok(s);
        }
        if let Some(s) = container_from(&get)? {
            return Ok(s);
        }
        if !imds_disabled(&get) {
            return Ok(imds_from(Some(config), &get));
        }
        Err(none_found(Some(&config.profile)))
    }
}

fn none_found(profile: Option<&str>) -> AwsError {
    let profile = profile.map_or(String::new(), |p| format!(", the profile {p:?}"));
    err(format!(
        "none found: tried AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY{profile}, web identity (AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE), the container endpoint (AWS_CONTAINER_CREDENTIALS_FULL_URI/RELATIVE_URI) and IMDS (disabled by AWS_EC2_METADATA_DISABLED)"
    ))
}

fn profile_static(config: &SharedConfig, name: &str) -> Option<Source> {
    let get = |k: &str| config.files.get(name, k).map(str::to_string);
    Some(Source::Static(Credentials {
        access_key_id: get("aws_access_key_id")?,
        secret_access_key: get("aws_secret_access_key")?,
        session_token: get("aws_session_token"),
    }))
}

/// The source a profile describes; `None` when it has no credentials settings (or does not
/// exist). `visited` holds the profiles of the chain so far, to refuse loops.
fn profile_source(
    config: &SharedConfig,
    name: &str,
    visited: &mut Vec<String>,
) -> Result<Option<Source>> {
    if !config.files.profiles.contains_key(name) {
        return Ok(None);
    }
    if visited.iter().any(|v| v == name) {
        return Err(err(format!(
            "profile {name:?}: source_profile loop ({} -> {name})",
            visited.join(" -> ")
        )));
    }
    visited.push(name.to_string());
    let get = |k: &str| config.files.get(name, k).map(str::to_string);
    if let Some(role_arn) = get("role_arn") {
        if let Some(token_file) = get("web_identity_token_file") {
            return Ok(Some(Source::WebIdentity {
                role_arn,
                token_file,
                session_name: get("role_session_name"),
            }));
        }
        let role = AssumeRole {
            role_arn,
            session_name: get("role_session_name"),
            external_id: get("external_id"),
            duration_seconds: match get("duration_seconds") {
                Some(d) => Some(d.parse().map_err(|_| {
                    err(format!(
                        "profile {name:?}: duration_seconds = {d:?} is not a number of seconds"
                    ))
                })?),
                None => None,
            },
        };
        let base = if let Some(source) = get("source_profile") {
            if source == name {
                // A profile may name itself to assume its role with its own keys.
                profile_static(config, name).ok_or_else(|| {
                    err(format!(
                        "profile {name:?} is its own source_profile but has no aws_access_key_id/aws_secret_access_key"
                    ))
                })?
            } else {
                profile_source(config, &source, visited)?.ok_or_else(|| {
                    err(format!(
                        "profile {name:?}: source_profile {source:?} does not exist or holds no credentials"
                    ))
                })?
            }
        } else if let Some(source) = get("credential_source") {
            let env = |k: &str| config.env(k);
            match source.as_str() {
                "Environment" => static_from_env(&env).ok_or_else(|| {
                    err(format!(
                        "profile {name:?}: credential_source = Environment but AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY are not set"
                    ))
                })?,
                "Ec2InstanceMetadata" => imds_from(Some(config), &env),
                "EcsContainer" => container_from(&env)?.ok_or_else(|| {
                    err(format!(
                        "profile {name:?}: credential_source = EcsContainer but no AWS_CONTAINER_CREDENTIALS_* is set"
                    ))
                })?,
                other => {
                    return Err(err(format!(
                        "profile {name:?}: credential_source = {other:?}: expected Environment, Ec2InstanceMetadata or EcsContainer"
                    )));
                }
            }
        } else {
            return Err(err(format!(
                "profile {name:?}: role_arn needs source_profile, credential_source or web_identity_token_file"
            )));
        };
        return Ok(Some(Source::AssumeRole {
            role,
            base: Box::new(base),
        }));
    }
    if get("sso_session").is_some() || get("sso_start_url").is_some() {
        return sso::from_profile(config, name).map(|s| Some(Source::Sso(s)));
    }
    if let Some(s) = profile_static(config, name) {
        return Ok(Some(s));
    }
    if let Some(command) = get("credential_process") {
        return Ok(Some(Source::Process { command }));
    }
    Ok(None)
}

/// Credentials and when they expire (seconds since the epoch), if they do.
pub(crate) type Fetched = (Credentials, Option<i64>);

type FetchFuture<'a> = Pin<Box<dyn Future<Output = Result<Fetched>> + Send + 'a>>;

/// Fetches fresh credentials from `source`.
fn fetch<'a>(source: &'a Source, http: &'a AwsHttp) -> FetchFuture<'a> {
    Box::pin(async move {
        match source {
            Source::Static(c) => Ok((c.clone(), None)),
            Source::WebIdentity {
                role_arn,
                token_file,
                session_name,
            } => sts::web_identity(http, role_arn, token_file, session_name.as_deref()).await,
            Source::Container { uri, token_file } => {
                let token = match token_file {
                    Some(file) => Some(read_token(file)?),
                    None => None,
                };
                metadata::container(http, uri, token.as_deref()).await
            }
            Source::ContainerToken { uri, token } => {
                metadata::container(http, uri, Some(token)).await
            }
            Source::Imds { endpoint } => metadata::imds_credentials(http, endpoint).await,
            Source::Process { command } => process::run(command).await,
            Source::Sso(s) => sso::credentials(http, s).await,
            Source::AssumeRole { role, base } => {
                let (base, _) = fetch(base, http).await?;
                sts::assume_role(http, &base, role).await
            }
        }
    })
}

pub(crate) fn read_token(file: &str) -> Result<String> {
    std::fs::read_to_string(file)
        .map(|t| t.trim().to_string())
        .map_err(|e| err(format!("reading {file}: {e}")))
}

#[derive(Default)]
struct Cached {
    credentials: Option<Credentials>,
    expires_at: Option<i64>,
}

/// Hands out current credentials, refreshing temporary ones before they expire.
#[derive(Clone)]
pub struct CredentialsProvider {
    source: Source,
    cache: Arc<Mutex<Cached>>,
}

impl std::fmt::Debug for CredentialsProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialsProvider")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// Temporary credentials are refreshed this long before they expire.
pub const REFRESH_MARGIN_SECONDS: i64 = 300;

impl CredentialsProvider {
    /// A provider reading `source`.
    pub fn new(source: Source) -> Self {
        Self {
            source,
            cache: Arc::default(),
        }
    }

    /// The SDKs' default chain for these settings.
    pub fn default_chain(config: &SharedConfig) -> Result<Self> {
        Source::resolve(config).map(Self::new)
    }

    /// Where credentials come from.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// Current credentials.
    pub async fn get(&self, http: &AwsHttp) -> Result<Credentials> {
        if let Source::Static(c) = &self.source {
            return Ok(c.clone());
        }
        let mut cache = self.cache.lock().await;
        let now = http.timing().unix_now();
        if let Some(c) = &cache.credentials {
            match cache.expires_at {
                None => return Ok(c.clone()),
                Some(at) if now + REFRESH_MARGIN_SECONDS < at => return Ok(c.clone()),
                _ => {}
            }
        }
        match fetch(&self.source, http).await {
            Ok((credentials, expires_at)) => {
                cache.credentials = Some(credentials.clone());
                cache.expires_at = expires_at;
                Ok(credentials)
            }
            Err(e) => match (&cache.credentials, cache.expires_at) {
                // Still valid: keep working through a refresh that failed (the metadata
                // service restarting, STS throttled), and try again at the next call.
                (Some(c), Some(at)) if now < at => {
                    tracing::warn!(error = %e, "refreshing AWS credentials failed; using the current ones until they expire");
                    Ok(c.clone())
                }
                _ => Err(e),
            },
        }
    }
}

/// Seconds since the epoch of an RFC 3339 time (`2026-11-22T10:00:00Z`).
pub(crate) fn parse_time(s: &str) -> Option<i64> {
    let t: k8s_openapi::jiff::Timestamp = s.trim().parse().ok()?;
    Some(t.as_second())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::profile::FileKind;
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn config(vars: &[(&str, &str)], config_file: &str, credentials_file: &str) -> SharedConfig {
        SharedConfig::from_parts(
            env(vars),
            &[
                (FileKind::Config, config_file.to_string()),
                (FileKind::Credentials, credentials_file.to_string()),
            ],
        )
    }

    fn keys(id: &str) -> Source {
        Source::Static(Credentials {
            access_key_id: id.into(),
            secret_access_key: "s".into(),
            session_token: None,
        })
    }

    #[test]
    fn the_chain_in_the_sdks_order() {
        let files = "[default]\naws_access_key_id = profile\naws_secret_access_key = s\n";
        // (environment, expected source)
        let cases: Vec<(Vec<(&str, &str)>, Source)> = vec![
            (
                vec![("AWS_ACCESS_KEY_ID", "env"), ("AWS_SECRET_ACCESS_KEY", "s")],
                keys("env"),
            ),
            (vec![], keys("profile")),
            (
                vec![
                    ("AWS_ROLE_ARN", "arn:r"),
                    ("AWS_WEB_IDENTITY_TOKEN_FILE", "/t"),
                ],
                keys("profile"),
            ),
        ];
        for (vars, expected) in cases {
            assert_eq!(
                Source::resolve(&config(&vars, "", files)).unwrap(),
                expected,
                "{vars:?}"
            );
        }
        let none = |vars: &[(&str, &str)]| Source::resolve(&config(vars, "", "")).unwrap();
        assert_eq!(
            none(&[
                ("AWS_ROLE_ARN", "arn:r"),
                ("AWS_WEB_IDENTITY_TOKEN_FILE", "/t")
            ]),
            Source::WebIdentity {
                role_arn: "arn:r".into(),
                token_file: "/t".into(),
                session_name: None,
            }
        );
        assert_eq!(
            none(&[
                ("AWS_ROLE_ARN", "arn:r"),
                ("AWS_WEB_IDENTITY_TOKEN_FILE", "/t"),
                ("AWS_ROLE_SESSION_NAME", "karpenter-a"),
            ]),
            Source::WebIdentity {
                role_arn: "arn:r".into(),
                token_file: "/t".into(),
                session_name: Some("karpenter-a".into()),
            },
            "IRSA takes the session name the SDKs read"
        );
        assert_eq!(
            none(&[(
                "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                "/v2/credentials/abc"
            )]),
            Source::Container {
                uri: "http://169.254.170.2/v2/credentials/abc".into(),
                token_file: None
            }
        );
        assert_eq!(
            none(&[
                (
                    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                    "http://169.254.170.23/v1/credentials"
                ),
                ("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "/var/run/token"),
                ("AWS_CONTAINER_AUTHORIZATION_TOKEN", "ignored"),
            ]),
            Source::Container {
                uri: "http://169.254.170.23/v1/credentials".into(),
                token_file: Some("/var/run/token".into())
            }
        );
        assert_eq!(
            none(&[
                (
                    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                    "http://127.0.0.1:8080/creds"
                ),
                ("AWS_CONTAINER_AUTHORIZATION_TOKEN", "tok"),
            ]),
            Source::ContainerToken {
                uri: "http://127.0.0.1:8080/creds".into(),
                token: "tok".into()
            }
        );
        assert_eq!(
            none(&[]),
            Source::Imds {
                endpoint: IMDS_IPV4.into()
            }
        );
        assert_eq!(
            none(&[("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", "IPv6")]),
            Source::Imds {
                endpoint: IMDS_IPV6.into()
            }
        );
        assert_eq!(
            none(&[(
                "AWS_EC2_METADATA_SERVICE_ENDPOINT",
                "http://127.0.0.1:1338/"
            )]),
            Source::Imds {
                endpoint: "http://127.0.0.1:1338".into()
            }
        );
        let e = Source::resolve(&config(&[("AWS_EC2_METADATA_DISABLED", "true")], "", ""))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("AWS_ACCESS_KEY_ID") && e.contains("IMDS") && e.contains("\"default\""),
            "{e}"
        );
        let e = Source::resolve(&config(
            &[(
                "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                "http://evil.example.com/creds",
            )],
            "",
            "",
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("AWS_CONTAINER_CREDENTIALS_FULL_URI"), "{e}");
        let e = Source::resolve(&config(&[("AWS_PROFILE", "missing")], "", ""))
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"missing\""), "{e}");
    }

    #[test]
    fn profiles_assume_roles_in_chains() {
        let cfg = "\
[profile base]
aws_access_key_id = base
aws_secret_access_key = s
[profile middle]
role_arn = arn:aws:iam::1:role/middle
source_profile = base
external_id = ext
[profile top]
role_arn = arn:aws:iam::2:role/top
source_profile = middle
role_session_name = me
duration_seconds = 1800
[profile selfish]
role_arn = arn:aws:iam::3:role/self
source_profile = selfish
aws_access_key_id = own
aws_secret_access_key = s
[profile on-ec2]
role_arn = arn:aws:iam::4:role/x
credential_source = Ec2InstanceMetadata
[profile irsa]
role_arn = arn:aws:iam::5:role/irsa
web_identity_token_file = /token
[profile loop-a]
role_arn = arn:a
source_profile = loop-b
[profile loop-b]
role_arn = arn:b
source_profile = loop-a
[profile process]
credential_process = /usr/bin/creds --json
[profile region-only]
region = eu-west-1
";
        let resolve =
            |profile: &str| Source::resolve(&config(&[("AWS_PROFILE", profile)], cfg, ""));
        let top = resolve("top").unwrap();
        let Source::AssumeRole { role, base } = top else {
            panic!("{top:?}")
        };
        assert_eq!(role.role_arn, "arn:aws:iam::2:role/top");
        assert_eq!(role.session_name.as_deref(), Some("me"));
        assert_eq!(role.duration_seconds, Some(1800));
        let Source::AssumeRole { role, base } = *base else {
            panic!("a chain")
        };
        assert_eq!(role.external_id.as_deref(), Some("ext"));
        assert_eq!(*base, keys("base"));
        let Source::AssumeRole { base, .. } = resolve("selfish").unwrap() else {
            panic!()
        };
        assert_eq!(*base, keys("own"));
        let Source::AssumeRole { base, .. } = resolve("on-ec2").unwrap() else {
            panic!()
        };
        assert_eq!(
            *base,
            Source::Imds {
                endpoint: IMDS_IPV4.into()
            }
        );
        assert_eq!(
            resolve("irsa").unwrap(),
            Source::WebIdentity {
                role_arn: "arn:aws:iam::5:role/irsa".into(),
                token_file: "/token".into(),
                session_name: None,
            }
        );
        assert!(resolve("loop-a").unwrap_err().to_string().contains("loop"));
        assert_eq!(
            resolve("process").unwrap(),
            Source::Process {
                command: "/usr/bin/creds --json".into()
            }
        );
        // A profile without credentials settings falls through to the rest of the chain.
        assert_eq!(
            resolve("region-only").unwrap(),
            Source::Imds {
                endpoint: IMDS_IPV4.into()
            }
        );
    }

    #[test]
    fn expiration_times() {
        assert_eq!(parse_time("2015-08-30T12:36:00Z"), Some(1_440_938_160));
        assert_eq!(parse_time("2024-02-29T12:00:00.000Z"), Some(1_709_208_000));
        assert_eq!(parse_time("soon"), None);
    }
}
