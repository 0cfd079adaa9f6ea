//! Signing and credentials. Every Huawei Cloud API the provider calls (CCE, ECS, VPC, BSS, IAM)
//! takes the API gateway's AK/SK signature, [`signer`] (`SDK-HMAC-SHA256`), which is pure: the
//! time is passed in, so the SDK's vectors reproduce byte for byte. `credentials` (feature
//! `cloud`) finds the keys as the SDK's credential chain does.

#[cfg(feature = "cloud")]
pub mod credentials;
pub mod signer;
mod time;

#[cfg(feature = "cloud")]
pub use credentials::{CredentialsError, CredentialsProvider, Source};

/// An access key pair, with the security token of temporary credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The access key (AK): it names the caller in Huawei's audit logs and is not secret.
    pub access_key: String,
    /// The secret key (SK).
    pub secret_key: String,
    /// The security token of temporary credentials, sent as `X-Security-Token`.
    pub security_token: Option<String>,
}

impl Credentials {
    /// A permanent access key pair.
    pub fn new(access_key: impl Into<String>, secret_key: impl Into<String>) -> Self {
        Self {
            access_key: access_key.into(),
            secret_key: secret_key.into(),
            security_token: None,
        }
    }

    /// The same keys with a security token (temporary credentials).
    pub fn with_security_token(mut self, token: impl Into<String>) -> Self {
        self.security_token = Some(token.into());
        self
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The secret and the token never reach a log, even a debug one.
        f.debug_struct("Credentials")
            .field("access_key", &self.access_key)
            .field("secret_key", &"<redacted>")
            .field(
                "security_token",
                &self.security_token.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_stay_out_of_debug_output() {
        let c =
            Credentials::new("HPUAEXAMPLEKEY", "very-secret").with_security_token("gQpjbi1ub3J0");
        let shown = format!("{c:?}");
        assert!(shown.contains("HPUAEXAMPLEKEY"), "{shown}");
        assert!(
            !shown.contains("very-secret") && !shown.contains("gQpjbi1ub3J0"),
            "{shown}"
        );
    }
}
