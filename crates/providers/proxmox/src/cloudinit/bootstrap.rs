//! The Kubernetes bootstrap token a new node joins with (`.Kubernetes.BootstrapToken`), as
//! upstream's `pkg/providers/bootstrap` makes it: a `<id>.<secret>` token (6 and 16
//! characters of `[a-z0-9]`, drawn as `k8s.io/cluster-bootstrap` draws them) stored in the
//! Secret `kube-system/bootstrap-token-<id>` of type `bootstrap.kubernetes.io/token`, usable
//! for authentication only, in the group `system:bootstrappers:karpenter:proxmox`, expiring an
//! hour after it was made and labelled so the provider can find and delete its tokens.
//! Upstream records the token id on the NodeClaim ([`TOKEN_ANNOTATION`]) to delete it once the
//! node has joined.
//!
//! Pure: the random bytes and the time come from the caller.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// Where bootstrap tokens live.
pub const NAMESPACE: &str = "kube-system";
/// The Secret type the API server's bootstrap authenticator reads.
pub const SECRET_TYPE: &str = "bootstrap.kubernetes.io/token";
/// The Secret's name is this followed by the token id.
pub const SECRET_NAME_PREFIX: &str = "bootstrap-token-";
/// The label (value `"true"`) on the provider's token Secrets.
pub const LABEL: &str = "karpenter.proxmox.sinextra.dev/bootstrap-token";
/// The NodeClaim annotation holding the id of the token its node joins with.
pub const TOKEN_ANNOTATION: &str = "karpenter.proxmox.sinextra.dev/proxmoxcloudinit-token";
/// The group the token's user is put in, besides `system:bootstrappers`.
pub const EXTRA_GROUPS: &str = "system:bootstrappers:karpenter:proxmox";
/// The Secret's `description`.
pub const DESCRIPTION: &str = "Karpenter Proxmox Bootstrap Token";
/// How long a token is valid.
pub const TTL: SignedDuration = SignedDuration::from_hours(1);

/// The characters of token ids and secrets.
const ALPHABET: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
/// Random bytes at or above this are drawn again, so each character is equally likely
/// (252 is the largest multiple of 36 that fits a byte).
const REJECT_FROM: u8 = 252;

/// A bootstrap token.
#[derive(Clone, PartialEq, Eq)]
pub struct BootstrapToken {
    /// The public part, 6 characters; the Secret is named after it.
    pub id: String,
    /// The private part, 16 characters.
    pub secret: String,
}

impl std::fmt::Debug for BootstrapToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BootstrapToken")
            .field("id", &self.id)
            .field("secret", &"<redacted>")
            .finish()
    }
}

fn draw(len: usize, random_byte: &mut impl FnMut() -> u8) -> String {
    let mut out = String::with_capacity(len);
    while out.len() < len {
        let b = random_byte();
        if b < REJECT_FROM {
            out.push(char::from(ALPHABET[usize::from(b) % ALPHABET.len()]));
        }
    }
    out
}

impl BootstrapToken {
    /// A token from `random_byte`, a source of uniformly random bytes (the caller's CSPRNG).
    pub fn generate(mut random_byte: impl FnMut() -> u8) -> Self {
        let id = draw(6, &mut random_byte);
        let secret = draw(16, &mut random_byte);
        Self { id, secret }
    }

    /// `<id>.<secret>`, what the node presents.
    pub fn token(&self) -> String {
        format!("{}.{}", self.id, self.secret)
    }

    /// `bootstrap-token-<id>`.
    pub fn secret_name(&self) -> String {
        format!("{SECRET_NAME_PREFIX}{}", self.id)
    }

    /// The Secret that makes the token valid, made at `now` and expiring [`TTL`] later
    /// (RFC 3339, UTC, whole seconds, as upstream writes it).
    pub fn secret_object(&self, now: Timestamp) -> Secret {
        let expiration = now
            .checked_add(TTL)
            .unwrap_or(Timestamp::MAX)
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        let data = BTreeMap::from([
            ("token-id".to_string(), self.id.clone()),
            ("token-secret".to_string(), self.secret.clone()),
            (
                "usage-bootstrap-authentication".to_string(),
                "true".to_string(),
            ),
            ("auth-extra-groups".to_string(), EXTRA_GROUPS.to_string()),
            ("description".to_string(), DESCRIPTION.to_string()),
            ("expiration".to_string(), expiration),
        ]);
        Secret {
            metadata: ObjectMeta {
                name: Some(self.secret_name()),
                namespace: Some(NAMESPACE.to_string()),
                labels: Some(BTreeMap::from([(LABEL.to_string(), "true".to_string())])),
                ..ObjectMeta::default()
            },
            type_: Some(SECRET_TYPE.to_string()),
            string_data: Some(data),
            ..Secret::default()
        }
    }
}

/// A new token and its Secret: upstream's `CreateToken` without the API call. Returns the
/// Secret to create and the `<id>.<secret>` token for `.Kubernetes.BootstrapToken`.
pub fn new_token(random_byte: impl FnMut() -> u8, now: Timestamp) -> (Secret, String) {
    let token = BootstrapToken::generate(random_byte);
    (token.secret_object(now), token.token())
}

/// The token id a bootstrap token Secret is named after.
pub fn token_id(secret_name: &str) -> Option<&str> {
    secret_name.strip_prefix(SECRET_NAME_PREFIX)
}

/// Whether one of the provider's token Secrets has expired by `now` (upstream's
/// `DeleteExpiredTokens` test): a bootstrap token Secret whose `expiration` is before `now`.
/// A Secret of another type, without an expiration or with one that does not parse is kept.
pub fn is_expired(secret: &Secret, now: Timestamp) -> bool {
    if secret.type_.as_deref() != Some(SECRET_TYPE) {
        return false;
    }
    let expiration = secret
        .data
        .as_ref()
        .and_then(|d| d.get("expiration"))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .or_else(|| {
            secret
                .string_data
                .as_ref()
                .and_then(|d| d.get("expiration").cloned())
        });
    expiration
        .and_then(|e| e.parse::<Timestamp>().ok())
        .is_some_and(|e| now > e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_past_the_last_full_alphabet_cycle_are_drawn_again() {
        let bytes = [252u8, 255, 0, 35, 36, 251, 71, 100, 253];
        let mut it = bytes.iter().copied().cycle();
        let token = BootstrapToken::generate(|| it.next().unwrap_or(0));
        // 0→'0', 35→'z', 36→'0', 251→'z' (251 % 36 = 35), 71→'z', 100→'s'.
        assert_eq!(token.id, "0z0zzs");
        assert_eq!(token.secret.len(), 16);
        assert!(token.secret.bytes().all(|b| ALPHABET.contains(&b)));
        assert!(!format!("{token:?}").contains(&token.secret));
    }
}
