//! Signing and credentials. Alibaba Cloud has two request signatures the provider speaks:
//! [`acs3`] (`ACS3-HMAC-SHA256`, what the current SDKs sign every ECS, VPC, STS and ACK call
//! with) and the legacy [`rpc`] signature (HMAC-SHA1, which the credential chain's STS
//! `AssumeRole` still uses). Both are pure: time and nonce are passed in, so the official
//! examples reproduce byte for byte. `credentials` (feature `cloud`) finds the keys.

pub mod acs3;
#[cfg(feature = "cloud")]
pub mod credentials;
pub mod rpc;

#[cfg(feature = "cloud")]
pub use credentials::{CredentialsError, CredentialsProvider, Source};

/// An access key, with the security token of temporary (STS) credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// `LTAI…` for a RAM user's key, `STS.…` for temporary credentials.
    pub access_key_id: String,
    /// The secret.
    pub access_key_secret: String,
    /// The STS security token, sent as `x-acs-security-token` (`SecurityToken` in RPC v1).
    pub security_token: Option<String>,
}

impl Credentials {
    /// A long-term access key.
    pub fn new(access_key_id: impl Into<String>, access_key_secret: impl Into<String>) -> Self {
        Self {
            access_key_id: access_key_id.into(),
            access_key_secret: access_key_secret.into(),
            security_token: None,
        }
    }

    /// The same key with an STS security token.
    pub fn with_security_token(mut self, token: impl Into<String>) -> Self {
        self.security_token = Some(token.into());
        self
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key id identifies the caller in Alibaba's audit logs and is not secret; the
        // secret and the token never reach a log, even a debug one.
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("access_key_secret", &"<redacted>")
            .field(
                "security_token",
                &self.security_token.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// Percent-encodes as both of Alibaba's signatures require (RFC 3986): every byte but
/// `A-Z a-z 0-9 - _ . ~` becomes `%XX` in upper case — so a space is `%20` (never `+`), `*` is
/// `%2A` and `~` stays as it is, the three places where the usual form encoders differ.
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn sha256_hex(data: &[u8]) -> String {
    hex(ring::digest::digest(&ring::digest::SHA256, data).as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_encoding_follows_alibabas_rules() {
        assert_eq!(percent_encode("AZaz09-_.~"), "AZaz09-_.~");
        assert_eq!(
            percent_encode("a b*c+d/e=f&g:h"),
            "a%20b%2Ac%2Bd%2Fe%3Df%26g%3Ah"
        );
        assert_eq!(percent_encode("!'()"), "%21%27%28%29");
        assert_eq!(
            percent_encode("2023-03-13T08:34:30Z"),
            "2023-03-13T08%3A34%3A30Z"
        );
        assert_eq!(percent_encode("中"), "%E4%B8%AD");
    }

    #[test]
    fn secrets_stay_out_of_debug_output() {
        let c = Credentials::new("LTAI5tExample", "very-secret").with_security_token("CAIS-token");
        let shown = format!("{c:?}");
        assert!(shown.contains("LTAI5tExample"), "{shown}");
        assert!(
            !shown.contains("very-secret") && !shown.contains("CAIS-token"),
            "{shown}"
        );
    }
}
