//! Which Azure cloud the provider talks to: ARM's endpoint, Entra ID's authority and the token
//! audience. The public cloud by default; a sovereign cloud by name (`ARM_CLOUD`), or any
//! cloud from an environment file (`AZURE_ENVIRONMENT_FILEPATH`, the JSON shape AKS's cloud
//! provider reads), as upstream resolves it.

use serde::Deserialize;

/// Where ARM, Entra ID and the token audience are for one cloud.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CloudEnvironment {
    /// ARM (`https://management.azure.com/`).
    pub resource_manager_endpoint: String,
    /// Entra ID's authority host (`https://login.microsoftonline.com/`).
    pub active_directory_endpoint: String,
    /// What ARM tokens are for (`https://management.azure.com/`).
    pub token_audience: String,
}

/// Why a cloud cannot be resolved.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CloudError {
    /// `ARM_CLOUD` names no cloud this provider knows.
    #[error(
        "ARM_CLOUD: unknown cloud {0:?}; known: AzurePublicCloud, AzureChinaCloud, AzureUSGovernmentCloud"
    )]
    UnknownName(String),
    /// Both ways of choosing a cloud were used.
    #[error("ARM_CLOUD and AZURE_ENVIRONMENT_FILEPATH cannot both be set: choose one")]
    Both,
    /// The environment file is wrong.
    #[error("AZURE_ENVIRONMENT_FILEPATH {path}: {reason}")]
    File {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
}

fn environment(resource_manager: &str, active_directory: &str) -> CloudEnvironment {
    CloudEnvironment {
        resource_manager_endpoint: resource_manager.into(),
        active_directory_endpoint: active_directory.into(),
        token_audience: resource_manager.into(),
    }
}

impl CloudEnvironment {
    /// Azure's public cloud.
    pub fn public() -> Self {
        environment(
            "https://management.azure.com/",
            "https://login.microsoftonline.com/",
        )
    }

    /// A cloud by the name the Azure SDKs give it, in any case (`AzureChinaCloud`).
    pub fn from_name(name: &str) -> Result<Self, CloudError> {
        match name.trim().to_ascii_uppercase().as_str() {
            "AZUREPUBLICCLOUD" => Ok(Self::public()),
            "AZURECHINACLOUD" => Ok(environment(
                "https://management.chinacloudapi.cn/",
                "https://login.chinacloudapi.cn/",
            )),
            "AZUREUSGOVERNMENTCLOUD" => Ok(environment(
                "https://management.usgovcloudapi.net/",
                "https://login.microsoftonline.us/",
            )),
            _ => Err(CloudError::UnknownName(name.to_string())),
        }
    }

    /// A cloud from an environment file's JSON; ARM's endpoint, the authority and the audience
    /// are required.
    pub fn from_file(path: &str, text: &str) -> Result<Self, CloudError> {
        let file = |reason: String| CloudError::File {
            path: path.to_string(),
            reason,
        };
        if !path.starts_with('/') {
            return Err(file("must be an absolute path".into()));
        }
        let env: CloudEnvironment =
            serde_json::from_str(text).map_err(|e| file(format!("not an environment: {e}")))?;
        for (field, value) in [
            ("resourceManagerEndpoint", &env.resource_manager_endpoint),
            ("activeDirectoryEndpoint", &env.active_directory_endpoint),
            ("tokenAudience", &env.token_audience),
        ] {
            if value.trim().is_empty() {
                return Err(file(format!("{field} is required")));
            }
        }
        Ok(env)
    }

    /// The cloud `ARM_CLOUD` or `AZURE_ENVIRONMENT_FILEPATH` chooses (`read` reads the file),
    /// the public cloud when neither is set.
    pub fn resolve(
        name: Option<&str>,
        file: Option<&str>,
        read: impl FnOnce(&str) -> std::io::Result<String>,
    ) -> Result<Self, CloudError> {
        fn set(v: Option<&str>) -> Option<&str> {
            v.filter(|s| !s.trim().is_empty())
        }
        match (set(name), set(file)) {
            (Some(_), Some(_)) => Err(CloudError::Both),
            (Some(name), None) => Self::from_name(name),
            (None, Some(path)) => {
                let text = read(path).map_err(|e| CloudError::File {
                    path: path.to_string(),
                    reason: e.to_string(),
                })?;
                Self::from_file(path, &text)
            }
            (None, None) => Ok(Self::public()),
        }
    }

    /// The OAuth scope of ARM tokens (`https://management.azure.com/.default`).
    pub fn scope(&self) -> String {
        format!("{}/.default", self.token_audience.trim_end_matches('/'))
    }

    /// Whether this is the public cloud.
    pub fn is_public(&self) -> bool {
        let trimmed = |s: &str| s.trim_end_matches('/').to_ascii_lowercase();
        trimmed(&self.resource_manager_endpoint)
            == trimmed(&Self::public().resource_manager_endpoint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clouds_by_name() {
        let cases = [
            (
                "AzurePublicCloud",
                "https://management.azure.com/.default",
                "https://login.microsoftonline.com/",
            ),
            (
                " azurechinacloud ",
                "https://management.chinacloudapi.cn/.default",
                "https://login.chinacloudapi.cn/",
            ),
            (
                "AZUREUSGOVERNMENTCLOUD",
                "https://management.usgovcloudapi.net/.default",
                "https://login.microsoftonline.us/",
            ),
        ];
        for (name, scope, authority) in cases {
            let env = CloudEnvironment::from_name(name).unwrap();
            assert_eq!(env.scope(), scope, "{name}");
            assert_eq!(env.active_directory_endpoint, authority, "{name}");
        }
        assert!(CloudEnvironment::public().is_public());
        assert!(
            !CloudEnvironment::from_name("AzureChinaCloud")
                .unwrap()
                .is_public()
        );
        let err = CloudEnvironment::from_name("AzureGermanCloud").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("ARM_CLOUD: unknown cloud \"AzureGermanCloud\"")
        );
    }

    #[test]
    fn resolving_by_name_file_or_default() {
        let no_file = |_: &str| -> std::io::Result<String> { panic!("no file is read") };
        assert_eq!(
            CloudEnvironment::resolve(None, Some(""), no_file).unwrap(),
            CloudEnvironment::public()
        );
        assert_eq!(
            CloudEnvironment::resolve(Some("AzureChinaCloud"), Some("/etc/env.json"), no_file),
            Err(CloudError::Both)
        );
        let stack = r#"{"name": "AzureStackCloud", "resourceManagerEndpoint": "https://management.local.azurestack.external/",
                        "activeDirectoryEndpoint": "https://login.local/", "tokenAudience": "https://management.adfs.azurestack.local/4711"}"#;
        let env = CloudEnvironment::resolve(None, Some("/etc/env.json"), |p| {
            assert_eq!(p, "/etc/env.json");
            Ok(stack.to_string())
        })
        .unwrap();
        assert_eq!(
            env.resource_manager_endpoint,
            "https://management.local.azurestack.external/"
        );
        assert_eq!(
            env.scope(),
            "https://management.adfs.azurestack.local/4711/.default"
        );

        let bad = [
            ("env.json", stack, "must be an absolute path"),
            (
                "/e.json",
                r#"{"resourceManagerEndpoint": "x", "activeDirectoryEndpoint": "y", "tokenAudience": " "}"#,
                "tokenAudience is required",
            ),
            ("/e.json", "{", "not an environment"),
        ];
        for (path, text, reason) in bad {
            let err =
                CloudEnvironment::resolve(None, Some(path), |_| Ok(text.to_string())).unwrap_err();
            assert!(err.to_string().contains(reason), "{path}: {err}");
            assert!(
                err.to_string().starts_with("AZURE_ENVIRONMENT_FILEPATH"),
                "{err}"
            );
        }
        let unreadable = CloudEnvironment::resolve(None, Some("/missing.json"), |_| {
            Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no such file",
            ))
        })
        .unwrap_err();
        assert!(
            unreadable
                .to_string()
                .contains("/missing.json: no such file"),
            "{unreadable}"
        );
    }
}
