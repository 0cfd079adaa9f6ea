//! The clusters config file (`--cloud-config` / `CLOUD_CONFIG`), read as upstream's
//! `pkg/providers/config` reads it: YAML with a list of Proxmox VE clusters, each one a region.
//!
//! ```yaml
//! features:
//!   provider: default        # or capmox; empty or absent is default
//! clusters:
//!   - url: https://pve-1.example.com:8006/api2/json
//!     insecure: false        # skip the certificate check
//!     token_id: "kubernetes@pve!karpenter"
//!     token_secret: "secret"
//!     # or token_id_file / token_secret_file (the values win over the files),
//!     # or username / password (a ticket login; not with a token)
//!     region: Region-1
//!     ca_file: /etc/pve-ca.pem   # karpenter-rs: trust this CA instead of the system's
//! ```
//!
//! Keys the file does not know are ignored, as upstream's decoder ignores them, so one file
//! serves both. Checks name the cluster by its place in the list, counted from 1 as upstream
//! counts (`cluster #2: region is required`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer};

/// Why the clusters config cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A file (the config, a token file, a CA) could not be read.
    #[error("reading {path}: {reason}")]
    Read {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// The text is not YAML of the config's shape.
    #[error("clusters config: {0}")]
    Syntax(String),
    /// A cluster's field is missing or wrong.
    #[error("cluster #{index}: {field}: {reason}")]
    Cluster {
        /// The cluster's place in the list, from 1.
        index: usize,
        /// The field (`region`, `token_secret`, …).
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// `features.provider` names no provider.
    #[error("features.provider: {0:?} is not default or capmox")]
    Provider(String),
}

/// What machinery the nodes come from (`features.provider`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Provider {
    /// Karpenter clones the VMs itself.
    #[default]
    Default,
    /// Cluster API's Proxmox provider (CAPMOX) manages them.
    Capmox,
}

impl Provider {
    /// The name in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Default => "default",
            Provider::Capmox => "capmox",
        }
    }
}

/// How the client logs in to a cluster.
#[derive(Clone, PartialEq, Eq)]
pub enum Credentials {
    /// An API token: `Authorization: PVEAPIToken=<id>=<secret>`.
    Token {
        /// `user@realm!tokenid`.
        id: String,
        /// The token's secret.
        secret: String,
    },
    /// A user and password, exchanged for a ticket (`POST /access/ticket`).
    Password {
        /// `user@realm`.
        username: String,
        /// The password.
        password: String,
    },
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Who, never the secret: Debug output ends up in logs.
        match self {
            Credentials::Token { id, .. } => f
                .debug_struct("Token")
                .field("id", id)
                .field("secret", &"<redacted>")
                .finish(),
            Credentials::Password { username, .. } => f
                .debug_struct("Password")
                .field("username", username)
                .field("password", &"<redacted>")
                .finish(),
        }
    }
}

/// One cluster of the file, its fields as written (empty when absent).
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Cluster {
    /// The API's base URL, `https://host:8006/api2/json`.
    #[serde(deserialize_with = "text")]
    pub url: String,
    /// Skip the certificate check.
    #[serde(deserialize_with = "flag")]
    pub insecure: bool,
    /// The API token's id, `user@realm!tokenid`.
    #[serde(deserialize_with = "text")]
    pub token_id: String,
    /// A file holding the token's id (read when `token_id` is empty).
    #[serde(deserialize_with = "text")]
    pub token_id_file: String,
    /// The API token's secret.
    #[serde(deserialize_with = "text")]
    pub token_secret: String,
    /// A file holding the token's secret (read when `token_secret` is empty).
    #[serde(deserialize_with = "text")]
    pub token_secret_file: String,
    /// A user for a ticket login, `user@realm`.
    #[serde(deserialize_with = "text")]
    pub username: String,
    /// The user's password.
    #[serde(deserialize_with = "text")]
    pub password: String,
    /// The region this cluster is: the `topology.kubernetes.io/region` of its nodes.
    #[serde(deserialize_with = "text")]
    pub region: String,
    /// A PEM file of the CA (or the self-signed certificate) to trust instead of the system's
    /// roots. A karpenter-rs addition; upstream has only `insecure`.
    #[serde(deserialize_with = "text")]
    pub ca_file: String,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secret = |s: &str| if s.is_empty() { "" } else { "<redacted>" };
        f.debug_struct("Cluster")
            .field("url", &self.url)
            .field("insecure", &self.insecure)
            .field("token_id", &self.token_id)
            .field("token_id_file", &self.token_id_file)
            .field("token_secret", &secret(&self.token_secret))
            .field("token_secret_file", &self.token_secret_file)
            .field("username", &self.username)
            .field("password", &secret(&self.password))
            .field("region", &self.region)
            .field("ca_file", &self.ca_file)
            .finish()
    }
}

/// The file's `features`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Features {
    /// `features.provider`.
    pub provider: Provider,
}

/// The whole file, checked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClustersConfig {
    /// The file's `features`.
    pub features: Features,
    /// The clusters, in the file's order.
    pub clusters: Vec<Cluster>,
}

/// A YAML scalar as text: a string, or a number or boolean as written (a password of digits);
/// null (a key with no value) is empty, as upstream's decoder leaves it.
fn text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

/// A YAML boolean; null is false.
fn flag<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(Option::<bool>::deserialize(d)?.unwrap_or_default())
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawFeatures {
    #[serde(deserialize_with = "text")]
    provider: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawConfig {
    features: Option<RawFeatures>,
    clusters: Option<Vec<Cluster>>,
}

impl ClustersConfig {
    /// Reads and checks the file's text. An empty text is an empty config, as upstream reads a
    /// missing one; checking that there is a cluster at all is the client pool's
    /// ([`crate::pve::multi`]).
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let raw: RawConfig = if text.trim().is_empty() {
            RawConfig::default()
        } else {
            serde_saphyr::from_str::<Option<RawConfig>>(text)
                .map_err(|e| ConfigError::Syntax(e.to_string()))?
                .unwrap_or_default()
        };
        let provider = match raw
            .features
            .map(|f| f.provider)
            .unwrap_or_default()
            .as_str()
        {
            "" | "default" => Provider::Default,
            "capmox" => Provider::Capmox,
            other => return Err(ConfigError::Provider(other.to_string())),
        };
        let clusters = raw.clusters.unwrap_or_default();
        for (i, cluster) in clusters.iter().enumerate() {
            cluster.validate(i + 1)?;
            if let Some(first) = clusters[..i]
                .iter()
                .position(|c| c.region == cluster.region)
            {
                // Upstream keeps the last silently; one region must be one cluster.
                return Err(ConfigError::Cluster {
                    index: i + 1,
                    field: "region",
                    reason: format!("{:?} is cluster #{}'s too", cluster.region, first + 1),
                });
            }
        }
        Ok(Self {
            features: Features { provider },
            clusters,
        })
    }

    /// Reads and checks the file at `path`.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        Self::parse(&text)
    }

    /// The regions, in the file's order.
    pub fn regions(&self) -> Vec<&str> {
        self.clusters.iter().map(|c| c.region.as_str()).collect()
    }
}

/// The trimmed content of a token file, as upstream reads it.
fn read_value(index: usize, field: &'static str, path: &str) -> Result<String, ConfigError> {
    let value = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
        path: path.to_string(),
        reason: format!("cluster #{index}: {field}: {e}"),
    })?;
    let value = value.trim();
    if value.is_empty() {
        return Err(ConfigError::Cluster {
            index,
            field,
            reason: format!("{path} is empty"),
        });
    }
    Ok(value.to_string())
}

impl Cluster {
    /// Upstream's checks, in its order (credentials, region, url), with the token files counted
    /// as the token: upstream's docs allow a token given only by files, its check does not.
    fn validate(&self, index: usize) -> Result<(), ConfigError> {
        let invalid = |field, reason: &str| ConfigError::Cluster {
            index,
            field,
            reason: reason.to_string(),
        };
        let token_given = [
            &self.token_id,
            &self.token_secret,
            &self.token_id_file,
            &self.token_secret_file,
        ]
        .iter()
        .any(|s| !s.is_empty());
        if !self.username.is_empty() && !self.password.is_empty() {
            if token_given {
                return Err(invalid(
                    "token_id",
                    "a token is not allowed when username and password are set",
                ));
            }
        } else {
            if self.token_id.is_empty() && self.token_id_file.is_empty() {
                return Err(invalid(
                    "token_id",
                    "either username and password or token_id and token_secret are required",
                ));
            }
            if self.token_secret.is_empty() && self.token_secret_file.is_empty() {
                return Err(invalid(
                    "token_secret",
                    "either username and password or token_id and token_secret are required",
                ));
            }
            if !self.token_id.is_empty() && !self.token_id.contains('!') {
                return Err(invalid(
                    "token_id",
                    "must be user@realm!tokenid (the token's full id)",
                ));
            }
        }
        if self.region.is_empty() {
            return Err(invalid("region", "is required"));
        }
        if !self.url.starts_with("http") {
            return Err(invalid("url", "is required (https://host:8006/api2/json)"));
        }
        Ok(())
    }

    /// How to log in, the token's files read when the values are not given. `index` is the
    /// cluster's place in the file (from 1), for errors.
    pub fn credentials(&self, index: usize) -> Result<Credentials, ConfigError> {
        if !self.username.is_empty() && !self.password.is_empty() {
            return Ok(Credentials::Password {
                username: self.username.clone(),
                password: self.password.clone(),
            });
        }
        let id = match self.token_id.as_str() {
            "" => read_value(index, "token_id_file", &self.token_id_file)?,
            id => id.to_string(),
        };
        if !id.contains('!') {
            return Err(ConfigError::Cluster {
                index,
                field: "token_id_file",
                reason: "holds no user@realm!tokenid".to_string(),
            });
        }
        let secret = match self.token_secret.as_str() {
            "" => read_value(index, "token_secret_file", &self.token_secret_file)?,
            secret => secret.to_string(),
        };
        Ok(Credentials::Token { id, secret })
    }

    /// The CA file to trust, when one is named.
    pub fn ca_file(&self) -> Option<PathBuf> {
        (!self.ca_file.is_empty()).then(|| PathBuf::from(&self.ca_file))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        ClustersConfig::parse(text).unwrap_err().to_string()
    }

    #[test]
    fn upstreams_cases() {
        // Nothing, or no clusters: an empty config.
        assert_eq!(
            ClustersConfig::parse("").unwrap(),
            ClustersConfig::default()
        );
        assert_eq!(
            ClustersConfig::parse("clusters:\n").unwrap(),
            ClustersConfig::default()
        );
        // Clusters that are not a list.
        assert!(err("clusters:\n  test: false\n").starts_with("clusters config: "));
        // No credentials.
        assert_eq!(
            err("clusters:\n- url: abcd\n  region: cluster-1\n"),
            "cluster #1: token_id: either username and password or token_id and token_secret are required"
        );
        let token = ClustersConfig::parse(
            "clusters:\n  - url: https://example.com\n    insecure: false\n    token_id: \"user!token-id\"\n    token_secret: \"secret\"\n    region: cluster-1\n",
        )
        .unwrap();
        assert_eq!(token.clusters.len(), 1);
        assert_eq!(token.features.provider, Provider::Default);
        assert_eq!(
            token.clusters[0].credentials(1).unwrap(),
            Credentials::Token {
                id: "user!token-id".into(),
                secret: "secret".into()
            }
        );
        let password = "clusters:\n  - url: https://example.com\n    username: \"user@pam\"\n    password: \"secret\"\n    region: cluster-1\n";
        for (features, provider) in [
            ("", Provider::Default),
            ("features:\n  provider: 'default'\n", Provider::Default),
            ("features:\n  provider: 'capmox'\n", Provider::Capmox),
            ("features:\n  provider: ''\n", Provider::Default),
        ] {
            let cfg = ClustersConfig::parse(&format!("{features}{password}")).unwrap();
            assert_eq!(cfg.features.provider, provider, "{features}");
            assert_eq!(
                cfg.clusters[0].credentials(1).unwrap(),
                Credentials::Password {
                    username: "user@pam".into(),
                    password: "secret".into()
                }
            );
        }
    }

    #[test]
    fn upstreams_example_file_has_two_regions() {
        let cfg = ClustersConfig::parse(
            "clusters:
  - url: https://cluster-api-1.exmple.com:8006/api2/json
    insecure: false
    token_id: \"user!token-id\"
    token_secret: \"secret\"
    region: cluster-1
  - url: https://cluster-api-2.exmple.com:8006/api2/json
    insecure: false
    token_id: \"user!token-id\"
    token_secret: \"secret\"
    region: cluster-2
",
        )
        .unwrap();
        assert_eq!(cfg.regions(), ["cluster-1", "cluster-2"]);
        assert_eq!(
            cfg.clusters[1].url,
            "https://cluster-api-2.exmple.com:8006/api2/json"
        );
    }

    #[test]
    fn checks_name_the_cluster_and_the_field() {
        let ok = "  - url: https://a:8006/api2/json\n    token_id: u@pam!k\n    token_secret: s\n    region: a\n";
        for (second, want) in [
            (
                "  - url: https://b\n    token_id: u@pam!k\n    token_secret: s\n",
                "cluster #2: region: is required",
            ),
            (
                "  - region: b\n    token_id: u@pam!k\n    token_secret: s\n",
                "cluster #2: url: is required (https://host:8006/api2/json)",
            ),
            (
                "  - url: ftp://b\n    region: b\n    token_id: u@pam!k\n    token_secret: s\n",
                "cluster #2: url: is required (https://host:8006/api2/json)",
            ),
            (
                "  - url: https://b\n    region: b\n    token_id: u@pam!k\n",
                "cluster #2: token_secret: either username and password or token_id and token_secret are required",
            ),
            (
                "  - url: https://b\n    region: b\n    username: root@pam\n    password: x\n    token_id: u@pam!k\n",
                "cluster #2: token_id: a token is not allowed when username and password are set",
            ),
            (
                "  - url: https://b\n    region: b\n    token_id: karpenter\n    token_secret: s\n",
                "cluster #2: token_id: must be user@realm!tokenid (the token's full id)",
            ),
            (
                "  - url: https://b\n    region: a\n    token_id: u@pam!k\n    token_secret: s\n",
                "cluster #2: region: \"a\" is cluster #1's too",
            ),
        ] {
            assert_eq!(err(&format!("clusters:\n{ok}{second}")), want, "{second}");
        }
        assert_eq!(
            err("features:\n  provider: kubevirt\n"),
            "features.provider: \"kubevirt\" is not default or capmox"
        );
    }

    #[test]
    fn scalars_read_as_written_and_unknown_keys_are_ignored() {
        let cfg = ClustersConfig::parse(
            "clusters:\n  - url: https://a\n    region: 2024\n    username: root@pam\n    password: 0123\n    insecure:\n    token_id:\n    vlan: 7\n",
        )
        .unwrap();
        let c = &cfg.clusters[0];
        assert_eq!((c.region.as_str(), c.insecure), ("2024", false));
        assert_eq!(
            c.credentials(1).unwrap(),
            Credentials::Password {
                username: "root@pam".into(),
                password: "0123".into()
            }
        );
    }

    #[test]
    fn token_files_are_read_trimmed_and_values_win_over_them() {
        let dir = std::env::temp_dir().join(format!("pve-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let id = dir.join("token_id");
        let secret = dir.join("token_secret");
        std::fs::write(&id, "user@pve!token-id\n").unwrap();
        std::fs::write(&secret, "  from-file \n").unwrap();
        let cfg = ClustersConfig::parse(&format!(
            "clusters:\n  - url: https://a\n    region: a\n    token_id_file: {}\n    token_secret_file: {}\n  - url: https://b\n    region: b\n    token_id_file: {}\n    token_secret: given\n  - url: https://c\n    region: c\n    token_id: u@pam!k\n    token_secret_file: {}/missing\n",
            id.display(),
            secret.display(),
            id.display(),
            dir.display()
        ))
        .unwrap();
        assert_eq!(
            cfg.clusters[0].credentials(1).unwrap(),
            Credentials::Token {
                id: "user@pve!token-id".into(),
                secret: "from-file".into()
            }
        );
        assert_eq!(
            cfg.clusters[1].credentials(2).unwrap(),
            Credentials::Token {
                id: "user@pve!token-id".into(),
                secret: "given".into()
            }
        );
        let missing = cfg.clusters[2].credentials(3).unwrap_err().to_string();
        assert!(
            missing.contains("/missing: cluster #3: token_secret_file: "),
            "{missing}"
        );
        std::fs::write(&secret, " \n").unwrap();
        assert_eq!(
            cfg.clusters[0].credentials(1).unwrap_err(),
            ConfigError::Cluster {
                index: 1,
                field: "token_secret_file",
                reason: format!("{} is empty", secret.display())
            }
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn secrets_stay_out_of_debug_output() {
        let cfg = ClustersConfig::parse(
            "clusters:\n  - url: https://a\n    region: a\n    token_id: u@pam!k\n    token_secret: hunter2\n  - url: https://b\n    region: b\n    username: root@pam\n    password: swordfish\n",
        )
        .unwrap();
        let shown = format!(
            "{cfg:?} {:?} {:?}",
            cfg.clusters[0].credentials(1).unwrap(),
            cfg.clusters[1].credentials(2).unwrap()
        );
        assert!(
            !shown.contains("hunter2") && !shown.contains("swordfish"),
            "{shown}"
        );
        assert!(
            shown.contains("u@pam!k") && shown.contains("root@pam"),
            "{shown}"
        );
    }

    #[test]
    fn the_ca_file_is_optional() {
        let cfg = ClustersConfig::parse(
            "clusters:\n  - url: https://a\n    region: a\n    token_id: u@pam!k\n    token_secret: s\n    ca_file: /etc/pve/pve-root-ca.pem\n",
        )
        .unwrap();
        assert_eq!(
            cfg.clusters[0].ca_file(),
            Some(PathBuf::from("/etc/pve/pve-root-ca.pem"))
        );
        assert_eq!(Cluster::default().ca_file(), None);
    }
}
