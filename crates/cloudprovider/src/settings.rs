//! What a provider's settings can be wrong in, named the same way by every provider: the
//! controller refuses to start and says which setting and why.

/// A setting the provider cannot run without, or one that does not parse.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// Required and empty.
    #[error("{0} must be set")]
    Missing(&'static str),
    /// Present but wrong.
    #[error("{name}: {reason}")]
    Invalid {
        /// The setting (its environment variable name).
        name: &'static str,
        /// What is wrong.
        reason: String,
    },
}
