//! What the SDKs read their settings from: the environment and the selected profile of the
//! shared config and credentials files (`AWS_CONFIG_FILE`, `AWS_SHARED_CREDENTIALS_FILE`,
//! defaulting to `~/.aws/config` and `~/.aws/credentials`; `AWS_PROFILE`, else `default`).
//! Read once at startup into a snapshot, so the rest is pure and tests pass their own.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::profile::{FileKind, ProfileFiles};

/// A setting could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A shared file exists but could not be read.
    #[error("reading {path}: {reason}")]
    File {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
}

/// The environment and the shared files, as read at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SharedConfig {
    env: BTreeMap<String, String>,
    /// The profile settings are taken from.
    pub profile: String,
    /// Whether the profile was chosen (`AWS_PROFILE`) rather than defaulted.
    pub profile_chosen: bool,
    /// The parsed files.
    pub files: ProfileFiles,
    /// Where the config file is (for messages).
    pub config_path: Option<PathBuf>,
}

impl SharedConfig {
    /// The process's environment and the files it names.
    pub fn from_process() -> Result<Self, ConfigError> {
        Self::load(std::env::vars())
    }

    /// The environment `vars` and the files it names, read from disk; a missing file is an
    /// empty one.
    pub fn load(vars: impl IntoIterator<Item = (String, String)>) -> Result<Self, ConfigError> {
        let env: BTreeMap<String, String> = vars.into_iter().collect();
        let home = env
            .get("HOME")
            .or_else(|| env.get("USERPROFILE"))
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        let path = |var: &str, default: &str| {
            env.get(var)
                .filter(|p| !p.is_empty())
                .map(|p| expand_home(p, home.as_ref()))
                .or_else(|| home.as_ref().map(|h| h.join(".aws").join(default)))
        };
        let config_path = path("AWS_CONFIG_FILE", "config");
        let mut texts = Vec::new();
        for (kind, file) in [
            (FileKind::Config, config_path.clone()),
            (
                FileKind::Credentials,
                path("AWS_SHARED_CREDENTIALS_FILE", "credentials"),
            ),
        ] {
            let Some(file) = file else { continue };
            match std::fs::read_to_string(&file) {
                Ok(text) => texts.push((kind, text)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(ConfigError::File {
                        path: file.display().to_string(),
                        reason: e.to_string(),
                    });
                }
            }
        }
        let mut config = Self::from_parts(env, &texts);
        config.config_path = config_path;
        Ok(config)
    }

    /// An environment and the texts of the files, parsed (the config file first).
    pub fn from_parts(env: BTreeMap<String, String>, files: &[(FileKind, String)]) -> Self {
        let mut parsed = ProfileFiles::default();
        for (kind, text) in files {
            parsed.add(*kind, text);
        }
        let chosen = env
            .get("AWS_PROFILE")
            .or_else(|| env.get("AWS_DEFAULT_PROFILE"))
            .filter(|p| !p.is_empty())
            .cloned();
        Self {
            env,
            profile: chosen.clone().unwrap_or_else(|| "default".into()),
            profile_chosen: chosen.is_some(),
            files: parsed,
            config_path: None,
        }
    }

    /// An environment variable, when set to something.
    pub fn env(&self, name: &str) -> Option<String> {
        self.env
            .get(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    }

    /// A property of the selected profile.
    pub fn profile_value(&self, key: &str) -> Option<String> {
        self.files.get(&self.profile, key).map(str::to_string)
    }

    /// A setting: the environment variable `var`, else the profile's `key`; with the name it
    /// was found under.
    pub fn setting(&self, var: &str, key: &str) -> Option<(String, String)> {
        self.env(var).map(|v| (var.to_string(), v)).or_else(|| {
            self.profile_value(key)
                .map(|v| (format!("profile {}: {key}", self.profile), v))
        })
    }

    /// A boolean setting (`true`, case-insensitive).
    pub fn flag(&self, var: &str, key: &str) -> bool {
        self.setting(var, key)
            .is_some_and(|(_, v)| v.eq_ignore_ascii_case("true"))
    }

    /// The home directory.
    pub fn home(&self) -> Option<PathBuf> {
        self.env("HOME")
            .or_else(|| self.env("USERPROFILE"))
            .map(PathBuf::from)
    }
}

fn expand_home(path: &str, home: Option<&PathBuf>) -> PathBuf {
    match (path.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ => PathBuf::from(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_come_from_the_environment_or_home() {
        let dir = std::env::temp_dir().join(format!("karpenter-aws-config-{}", std::process::id()));
        std::fs::create_dir_all(dir.join(".aws")).unwrap();
        std::fs::write(
            dir.join(".aws/config"),
            "[profile dev]\nregion = eu-west-3\n",
        )
        .unwrap();
        std::fs::write(dir.join("creds"), "[dev]\naws_access_key_id = a\n").unwrap();
        let home = dir.display().to_string();
        let c = SharedConfig::load([
            ("HOME".to_string(), home.clone()),
            ("AWS_PROFILE".to_string(), "dev".to_string()),
            (
                "AWS_SHARED_CREDENTIALS_FILE".to_string(),
                "~/creds".to_string(),
            ),
        ])
        .unwrap();
        assert_eq!(c.profile, "dev");
        assert!(c.profile_chosen);
        assert_eq!(c.profile_value("region").as_deref(), Some("eu-west-3"));
        assert_eq!(c.profile_value("aws_access_key_id").as_deref(), Some("a"));
        assert_eq!(
            c.setting("AWS_REGION", "region"),
            Some(("profile dev: region".into(), "eu-west-3".into()))
        );
        let none =
            SharedConfig::load([("HOME".to_string(), "/nonexistent-home".to_string())]).unwrap();
        assert_eq!(none.profile, "default");
        assert!(none.files.profiles.is_empty());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
