//! How a provider call fails. The controller reacts to the variant, as upstream reacts to its
//! error types; the message and the error underneath travel with it, so a log line or an
//! event can say what the cloud said.

use std::error::Error;
use std::fmt;
use std::sync::Arc;

/// Any error, boxed: what a provider's own failures are carried as.
pub type BoxError = Box<dyn Error + Send + Sync + 'static>;

/// What went wrong, in words, and the error underneath when there is one.
#[derive(Clone, Debug)]
pub struct Cause {
    message: String,
    source: Option<Arc<dyn Error + Send + Sync + 'static>>,
}

impl Cause {
    /// A cause that is only a message.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            source: None,
        }
    }

    /// A message with the error that led to it.
    pub fn with_source(
        message: impl Into<String>,
        source: impl Into<Box<dyn Error + Send + Sync + 'static>>,
    ) -> Self {
        Self {
            message: message.into(),
            source: Some(Arc::from(source.into())),
        }
    }

    /// An error as the cause: its message, and the error itself as the source.
    pub fn from_error(error: impl Error + Send + Sync + 'static) -> Self {
        Self::with_source(error.to_string(), error)
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The error underneath, if any.
    pub fn source(&self) -> Option<&(dyn Error + Send + Sync + 'static)> {
        self.source.as_deref()
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<String> for Cause {
    fn from(message: String) -> Self {
        Self::new(message)
    }
}

impl From<&str> for Cause {
    fn from(message: &str) -> Self {
        Self::new(message)
    }
}

/// Why a provider call failed.
#[derive(Clone, Debug)]
pub enum CloudProviderError {
    /// The instance does not exist (any more): deletion is complete, garbage collection may
    /// forget it (upstream's `NodeClaimNotFoundError`).
    NotFound(Cause),
    /// No offering could be launched; the NodeClaim is deleted so the next attempt picks
    /// others (upstream's `InsufficientCapacityError`).
    InsufficientCapacity(Cause),
    /// The NodeClass is missing or not ready; the NodeClaim is deleted (upstream's
    /// `NodeClassNotReadyError`).
    NodeClassNotReady(Cause),
    /// The launch failed for a reason the provider names; the NodeClaim's `Launched`
    /// condition carries the reason and the launch is retried (upstream's `CreateError`).
    Create {
        /// The condition reason, CamelCase (`LaunchTemplateNotFound`).
        reason: String,
        /// What happened.
        cause: Cause,
    },
    /// Anything else; retried.
    Other(Cause),
}

impl CloudProviderError {
    /// An instance that is gone.
    pub fn not_found(cause: impl Into<Cause>) -> Self {
        Self::NotFound(cause.into())
    }

    /// No capacity for any allowed offering.
    pub fn insufficient_capacity(cause: impl Into<Cause>) -> Self {
        Self::InsufficientCapacity(cause.into())
    }

    /// A NodeClass that is missing or cannot be resolved.
    pub fn node_class_not_ready(cause: impl Into<Cause>) -> Self {
        Self::NodeClassNotReady(cause.into())
    }

    /// A launch failure with a condition reason.
    pub fn create(reason: impl Into<String>, cause: impl Into<Cause>) -> Self {
        Self::Create {
            reason: reason.into(),
            cause: cause.into(),
        }
    }

    /// Any other failure, keeping the error as the source.
    pub fn other(error: impl Error + Send + Sync + 'static) -> Self {
        Self::Other(Cause::from_error(error))
    }

    /// The cause, whatever the variant.
    pub fn cause(&self) -> &Cause {
        match self {
            Self::NotFound(c)
            | Self::InsufficientCapacity(c)
            | Self::NodeClassNotReady(c)
            | Self::Other(c) => c,
            Self::Create { cause, .. } => cause,
        }
    }

    /// The message, without the variant's prefix.
    pub fn message(&self) -> &str {
        self.cause().message()
    }

    /// The label for `karpenter_cloudprovider_errors_total`, as upstream's
    /// `GetErrorTypeLabelValue` (empty for errors without a type).
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::NotFound(_) => "NodeClaimNotFoundError",
            Self::InsufficientCapacity(_) => "InsufficientCapacityError",
            Self::NodeClassNotReady(_) => "NodeClassNotReadyError",
            Self::Create { .. } | Self::Other(_) => "",
        }
    }
}

impl fmt::Display for CloudProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotFound(c) => write!(f, "instance not found: {c}"),
            Self::InsufficientCapacity(c) => write!(f, "insufficient capacity: {c}"),
            Self::NodeClassNotReady(c) => write!(f, "nodeclass not ready: {c}"),
            Self::Create { reason, cause } => write!(f, "creating instance ({reason}): {cause}"),
            Self::Other(c) => write!(f, "{c}"),
        }
    }
}

impl Error for CloudProviderError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.cause().source().map(|e| e as &(dyn Error + 'static))
    }
}

/// A result of a provider call.
pub type Result<T> = std::result::Result<T, CloudProviderError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Refused;

    impl fmt::Display for Refused {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("connection refused")
        }
    }

    impl Error for Refused {}

    #[test]
    fn errors_keep_their_source() {
        let e = CloudProviderError::other(Refused);
        assert_eq!(e.to_string(), "connection refused");
        let source = e.source().expect("the source is kept");
        assert!(source.downcast_ref::<Refused>().is_some());

        let e = CloudProviderError::InsufficientCapacity(Cause::with_source(
            "no m5.large in us-east-1a",
            Refused,
        ));
        assert_eq!(
            e.to_string(),
            "insufficient capacity: no m5.large in us-east-1a"
        );
        assert_eq!(e.source().unwrap().to_string(), "connection refused");
        assert!(CloudProviderError::not_found("i-1").source().is_none());
    }

    #[test]
    fn metric_labels_are_upstreams() {
        let cases = [
            (CloudProviderError::not_found("x"), "NodeClaimNotFoundError"),
            (
                CloudProviderError::insufficient_capacity("x"),
                "InsufficientCapacityError",
            ),
            (
                CloudProviderError::node_class_not_ready("x"),
                "NodeClassNotReadyError",
            ),
            (CloudProviderError::create("LaunchFailed", "x"), ""),
            (CloudProviderError::Other("x".into()), ""),
        ];
        for (error, label) in cases {
            assert_eq!(error.metric_label(), label, "{error}");
        }
    }
}
