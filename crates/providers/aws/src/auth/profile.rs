//! The shared `config` and `credentials` files (`~/.aws/config`, `~/.aws/credentials`) as the
//! SDKs read them: `[default]` and `[profile name]` sections in the config file, `[name]` in
//! the credentials file (whose keys win), `[sso-session name]` and `[services name]`
//! sections, `#` and `;` comments, indented sub-properties (`ec2 =` then `  endpoint_url = …`)
//! and continuation lines.
//!
//! Pure: the files' text is passed in.

use std::collections::BTreeMap;

/// One section's properties; a sub-property is keyed `parent.child`.
pub type Properties = BTreeMap<String, String>;

/// Which file a text is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// The config file: profiles are `[profile name]` (or `[default]`).
    Config,
    /// The credentials file: profiles are `[name]`.
    Credentials,
}

/// The sections of both files.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProfileFiles {
    /// Profiles by name.
    pub profiles: BTreeMap<String, Properties>,
    /// `[sso-session name]` sections.
    pub sso_sessions: BTreeMap<String, Properties>,
    /// `[services name]` sections.
    pub services: BTreeMap<String, Properties>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Section {
    Profile,
    SsoSession,
    Services,
}

impl ProfileFiles {
    /// Adds a file's sections; keys already present are overwritten, so the credentials file
    /// is added after the config file.
    pub fn add(&mut self, kind: FileKind, text: &str) {
        let mut current: Option<(Section, String)> = None;
        let mut last_key: Option<String> = None;
        for raw in text.lines() {
            let line = raw.trim_end();
            let trimmed = line.trim_start();
            if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with(';') {
                continue;
            }
            if trimmed.starts_with('[') {
                last_key = None;
                current = parse_header(kind, trimmed);
                if let Some((section, name)) = &current {
                    self.section(*section).entry(name.clone()).or_default();
                }
                continue;
            }
            let Some((section, name)) = &current else {
                continue;
            };
            let indented = line.starts_with([' ', '\t']);
            if indented && let Some(key) = &last_key {
                let props = self.section(*section).entry(name.clone()).or_default();
                let parent_value = props.get(key).cloned().unwrap_or_default();
                if parent_value.is_empty()
                    || props.keys().any(|k| k.starts_with(&format!("{key}.")))
                {
                    // A sub-property of a property with no value of its own.
                    if let Some((k, v)) = trimmed.split_once('=') {
                        props.insert(format!("{key}.{}", k.trim()), v.trim().to_string());
                    }
                } else {
                    props.insert(key.clone(), format!("{parent_value}\n{trimmed}"));
                }
                continue;
            }
            let Some((k, v)) = trimmed.split_once('=') else {
                continue;
            };
            let key = k.trim().to_string();
            if key.is_empty() {
                continue;
            }
            let props = self.section(*section).entry(name.clone()).or_default();
            props.insert(key.clone(), v.trim().to_string());
            last_key = Some(key);
        }
    }

    fn section(&mut self, section: Section) -> &mut BTreeMap<String, Properties> {
        match section {
            Section::Profile => &mut self.profiles,
            Section::SsoSession => &mut self.sso_sessions,
            Section::Services => &mut self.services,
        }
    }

    /// A profile's property.
    pub fn get(&self, profile: &str, key: &str) -> Option<&str> {
        self.profiles
            .get(profile)?
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// The profile's `services` section as endpoint URLs by service id (`ec2`, `sqs`).
    pub fn service_endpoints(&self, profile: &str) -> BTreeMap<String, String> {
        let Some(services) = self
            .get(profile, "services")
            .and_then(|name| self.services.get(name))
        else {
            return BTreeMap::new();
        };
        services
            .iter()
            .filter_map(|(k, v)| {
                let service = k.strip_suffix(".endpoint_url")?;
                Some((service.to_ascii_lowercase(), v.clone()))
            })
            .collect()
    }
}

/// `[default]`, `[profile name]`, `[name]`, `[sso-session name]`, `[services name]`, with an
/// optional comment after the bracket; `None` for a header this file kind does not take.
fn parse_header(kind: FileKind, line: &str) -> Option<(Section, String)> {
    let inner = line.strip_prefix('[')?.split(']').next()?.trim();
    let mut words = inner.split_whitespace();
    let first = words.next()?;
    let rest: Vec<&str> = words.collect();
    match (kind, first, rest.as_slice()) {
        (FileKind::Config, "default", []) => Some((Section::Profile, "default".into())),
        (FileKind::Config, "profile", [name]) => Some((Section::Profile, (*name).into())),
        (FileKind::Config, "sso-session", [name]) => Some((Section::SsoSession, (*name).into())),
        (FileKind::Config, "services", [name]) => Some((Section::Services, (*name).into())),
        (FileKind::Credentials, name, []) => Some((Section::Profile, name.into())),
        // `[name]` without `profile ` in the config file is ignored, as the SDKs do.
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_files_as_the_sdks_read_them() {
        let mut files = ProfileFiles::default();
        files.add(
            FileKind::Config,
            "# a comment\n\
             [default]\n\
             region = eu-west-1\n\
             aws_access_key_id = from-config\n\
             ; another comment\n\
             [profile dev] # trailing comment\n\
             role_arn = arn:aws:iam::123456789012:role/dev\n\
             source_profile = default\n\
             services = local\n\
             [ignored]\n\
             region = nowhere\n\
             [sso-session corp]\n\
             sso_start_url = https://corp.awsapps.com/start\n\
             sso_region = us-east-1\n\
             [services local]\n\
             ec2 =\n  endpoint_url = http://localhost:4566\n\
             SQS =\n  endpoint_url = http://localhost:4567\n\
             [profile multi]\n\
             credential_process = /bin/creds\n  --flag\n",
        );
        files.add(
            FileKind::Credentials,
            "[default]\naws_access_key_id = AKIDEXAMPLE\naws_secret_access_key = secret\n\n[other]\naws_access_key_id=a\n",
        );
        assert_eq!(files.get("default", "region"), Some("eu-west-1"));
        assert_eq!(
            files.get("default", "aws_access_key_id"),
            Some("AKIDEXAMPLE"),
            "the credentials file wins"
        );
        assert_eq!(
            files.get("default", "aws_secret_access_key"),
            Some("secret")
        );
        assert_eq!(files.get("dev", "source_profile"), Some("default"));
        assert_eq!(files.get("other", "aws_access_key_id"), Some("a"));
        assert!(!files.profiles.contains_key("ignored"));
        assert_eq!(
            files.sso_sessions["corp"]["sso_start_url"],
            "https://corp.awsapps.com/start"
        );
        let services = files.service_endpoints("dev");
        assert_eq!(services["ec2"], "http://localhost:4566");
        assert_eq!(services["sqs"], "http://localhost:4567");
        assert_eq!(
            files.get("multi", "credential_process"),
            Some("/bin/creds\n--flag")
        );
        assert!(files.service_endpoints("default").is_empty());
    }
}
