//! The AWS SDKs' `standard` retry mode: which failures are worth another attempt, how long to
//! wait before it (exponential backoff with full jitter), and the retry quota, a token bucket
//! shared by every call of one client so that a service in trouble is not hammered by retries.
//!
//! The figures are the SDKs' (aws-sdk-go-v2 `aws/retry`, smithy-rs `standard_retries`): three
//! attempts; backoff `random × 1 s × 2^(n-1)` for the n-th retry, at most 20 s; a bucket of 500
//! tokens, a retry costing 5 (10 after a timeout), a success without retry adding 1 back and a
//! success after retries returning what they cost. `AWS_NEW_RETRIES_2026=true` opts into the
//! SDKs' revised rules (a 50 ms base for errors other than throttling, the maximum applied
//! before the jitter, a retry costing 14 and 5 after throttling, timeouts priced as the rest).
//!
//! Pure but for the quota's counter: the random fraction is passed in.

use std::sync::Mutex;
use std::time::Duration;

/// Error codes that mean "slow down" (the SDKs' throttling list).
pub const THROTTLING_CODES: &[&str] = &[
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottledException",
    "TooManyRequestsException",
    "ProvisionedThroughputExceededException",
    "TransactionInProgressException",
    "RequestLimitExceeded",
    "BandwidthLimitExceeded",
    "LimitExceededException",
    "RequestThrottled",
    "SlowDown",
    "PriorRequestNotComplete",
    "EC2ThrottledException",
];

/// Error codes of failures that may pass by themselves.
pub const TRANSIENT_CODES: &[&str] = &["RequestTimeout", "RequestTimeoutException"];

/// HTTP statuses of failures that may pass by themselves.
pub const TRANSIENT_STATUSES: &[u16] = &[500, 502, 503, 504];

/// Error codes a service answers when the request's clock and its own disagree: retried once
/// the client has corrected its clock from the answer's `Date`.
pub const CLOCK_SKEW_CODES: &[&str] = &[
    "RequestTimeTooSkewed",
    "RequestExpired",
    "InvalidSignatureException",
    "SignatureDoesNotMatch",
    "AuthFailure",
    "RequestInTheFuture",
];

/// Why an attempt failed, when the failure is worth another attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryKind {
    /// The service throttled the request.
    Throttling,
    /// A server error or a lost connection.
    Transient,
    /// No answer within the attempt's timeout.
    Timeout,
    /// The signature's time was off and the client corrected its clock.
    ClockSkew,
}

/// How a failed answer is classified: `None` when another attempt would fail the same way.
pub fn classify_answer(status: u16, code: Option<&str>) -> Option<RetryKind> {
    if let Some(code) = code {
        if THROTTLING_CODES.contains(&code) {
            return Some(RetryKind::Throttling);
        }
        if TRANSIENT_CODES.contains(&code) {
            return Some(RetryKind::Transient);
        }
    }
    if status == 429 {
        return Some(RetryKind::Throttling);
    }
    if TRANSIENT_STATUSES.contains(&status) {
        return Some(RetryKind::Transient);
    }
    None
}

/// Whether an error code says the request's clock was off.
pub fn is_clock_skew(code: &str) -> bool {
    CLOCK_SKEW_CODES.contains(&code)
}

/// `retry_mode`: the SDKs' names. `adaptive` adds client-side rate limiting to `standard`;
/// karpenter-rs runs it as `standard` (its own controllers already pace their calls).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryMode {
    /// The SDKs' standard mode.
    Standard,
    /// Standard plus client-side rate limiting (run as standard).
    Adaptive,
    /// The SDKs' pre-standard behaviour (run as standard).
    Legacy,
}

/// A retry setting that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RetryConfigError {
    /// `AWS_MAX_ATTEMPTS` / `max_attempts` is not a whole number of at least 1.
    #[error("{setting} = {value:?}: expected a whole number of attempts, at least 1")]
    MaxAttempts {
        /// Where it was set.
        setting: String,
        /// What it said.
        value: String,
    },
    /// `AWS_RETRY_MODE` / `retry_mode` is not `standard`, `adaptive` or `legacy`.
    #[error("{setting} = {value:?}: expected standard, adaptive or legacy")]
    Mode {
        /// Where it was set.
        setting: String,
        /// What it said.
        value: String,
    },
}

/// How a client retries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryConfig {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// The configured mode.
    pub mode: RetryMode,
    /// The longest wait between two attempts.
    pub max_backoff: Duration,
    /// The SDKs' 2026 revision of standard mode (`AWS_NEW_RETRIES_2026=true`).
    pub revised_2026: bool,
}

impl Default for RetryConfig {
    fn default() -> Self {
        Self::STANDARD
    }
}

impl RetryConfig {
    /// The SDKs' defaults: standard mode, three attempts, at most 20 s between them.
    pub const STANDARD: RetryConfig = RetryConfig {
        max_attempts: 3,
        mode: RetryMode::Standard,
        max_backoff: Duration::from_secs(20),
        revised_2026: false,
    };

    /// One attempt, never a retry.
    pub const NEVER: RetryConfig = RetryConfig {
        max_attempts: 1,
        ..Self::STANDARD
    };

    /// The settings as the SDKs read them: each from the environment variable, else from the
    /// profile's key (`setting` gives the environment's value and the profile's value with the
    /// name each was found under).
    pub fn from_settings(
        max_attempts: Option<(String, String)>,
        mode: Option<(String, String)>,
        revised_2026: bool,
    ) -> Result<Self, RetryConfigError> {
        let mut config = Self {
            revised_2026,
            ..Self::STANDARD
        };
        if let Some((setting, value)) = mode {
            config.mode = match value.trim().to_ascii_lowercase().as_str() {
                "standard" => RetryMode::Standard,
                "adaptive" => RetryMode::Adaptive,
                "legacy" => RetryMode::Legacy,
                _ => return Err(RetryConfigError::Mode { setting, value }),
            };
        }
        if let Some((setting, value)) = max_attempts {
            config.max_attempts = match value.trim().parse::<u32>() {
                Ok(n) if n >= 1 => n,
                _ => return Err(RetryConfigError::MaxAttempts { setting, value }),
            };
        }
        Ok(config)
    }

    /// The wait before retry number `retry` (1 = the second attempt), for a failure of `kind`,
    /// with `jitter` a random fraction in `[0, 1)`.
    pub fn backoff(&self, kind: RetryKind, retry: u32, jitter: f64) -> Duration {
        let jitter = jitter.clamp(0.0, 1.0);
        let doubling = 2f64.powi(i32::try_from(retry.saturating_sub(1)).unwrap_or(i32::MAX));
        let max = self.max_backoff.as_secs_f64();
        let seconds = if self.revised_2026 {
            let base = if kind == RetryKind::Throttling {
                1.0
            } else {
                0.05
            };
            (base * doubling).min(max) * jitter
        } else {
            (jitter * doubling).min(max)
        };
        Duration::from_secs_f64(seconds.min(max))
    }

    /// What a retry after a failure of `kind` costs from the quota.
    pub fn retry_cost(&self, kind: RetryKind) -> u32 {
        match (self.revised_2026, kind) {
            (false, RetryKind::Timeout) => 10,
            (false, _) => 5,
            (true, RetryKind::Throttling) => 5,
            (true, _) => 14,
        }
    }

    /// The wait a server asked for in `x-amz-retry-after` (milliseconds), within bounds: the
    /// revised rules keep it between the computed backoff and 5 s above it, the older ones
    /// within the maximum backoff.
    pub fn server_backoff(&self, computed: Duration, asked_ms: u64) -> Duration {
        let asked = Duration::from_millis(asked_ms);
        if self.revised_2026 {
            asked.clamp(computed, computed + Duration::from_secs(5))
        } else {
            asked.min(self.max_backoff)
        }
    }
}

/// The retry quota: a bucket of tokens a client's retries draw from. Clones of a client share
/// one.
#[derive(Debug)]
pub struct RetryQuota {
    capacity: u32,
    available: Mutex<u32>,
}

impl Default for RetryQuota {
    fn default() -> Self {
        Self::new(Self::CAPACITY)
    }
}

impl RetryQuota {
    /// The SDKs' bucket size.
    pub const CAPACITY: u32 = 500;
    /// What a success on the first attempt adds back.
    pub const NO_RETRY_INCREMENT: u32 = 1;

    /// A full bucket of `capacity` tokens.
    pub fn new(capacity: u32) -> Self {
        Self {
            capacity,
            available: Mutex::new(capacity),
        }
    }

    /// Tokens left.
    pub fn available(&self) -> u32 {
        *self.available.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes `cost` tokens for a retry; `false` (and nothing taken) when too few are left.
    pub fn acquire(&self, cost: u32) -> bool {
        let mut available = self.available.lock().unwrap_or_else(|e| e.into_inner());
        if *available < cost {
            return false;
        }
        *available -= cost;
        true
    }

    /// A call succeeded: its retries' cost comes back, or one token when it needed none.
    pub fn succeeded(&self, retries_cost: u32) {
        let refund = if retries_cost == 0 {
            Self::NO_RETRY_INCREMENT
        } else {
            retries_cost
        };
        let mut available = self.available.lock().unwrap_or_else(|e| e.into_inner());
        *available = (*available + refund).min(self.capacity);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sdks_retryable_errors() {
        // (status, code, expected): the SDKs' classification tables.
        let cases: &[(u16, Option<&str>, Option<RetryKind>)] = &[
            (400, Some("Throttling"), Some(RetryKind::Throttling)),
            (
                503,
                Some("RequestLimitExceeded"),
                Some(RetryKind::Throttling),
            ),
            (
                400,
                Some("EC2ThrottledException"),
                Some(RetryKind::Throttling),
            ),
            (
                400,
                Some("ThrottlingException"),
                Some(RetryKind::Throttling),
            ),
            (400, Some("SlowDown"), Some(RetryKind::Throttling)),
            (429, None, Some(RetryKind::Throttling)),
            (400, Some("RequestTimeout"), Some(RetryKind::Transient)),
            (
                408,
                Some("RequestTimeoutException"),
                Some(RetryKind::Transient),
            ),
            (500, Some("InternalError"), Some(RetryKind::Transient)),
            (502, None, Some(RetryKind::Transient)),
            (503, Some("Unavailable"), Some(RetryKind::Transient)),
            (504, None, Some(RetryKind::Transient)),
            (501, None, None),
            (400, Some("InvalidParameterValue"), None),
            (403, Some("UnauthorizedOperation"), None),
            (400, Some("InsufficientInstanceCapacity"), None),
            (404, Some("QueueDoesNotExist"), None),
        ];
        for (status, code, expected) in cases {
            assert_eq!(
                classify_answer(*status, *code),
                *expected,
                "{status} {code:?}"
            );
        }
        for code in [
            "RequestTimeTooSkewed",
            "SignatureDoesNotMatch",
            "AuthFailure",
        ] {
            assert!(is_clock_skew(code), "{code}");
        }
        assert!(!is_clock_skew("UnauthorizedOperation"));
    }

    #[test]
    fn backoff_doubles_with_full_jitter_within_twenty_seconds() {
        let c = RetryConfig::STANDARD;
        let t = RetryKind::Transient;
        assert_eq!(c.backoff(t, 1, 0.5), Duration::from_millis(500));
        assert_eq!(c.backoff(t, 2, 0.5), Duration::from_secs(1));
        assert_eq!(c.backoff(t, 3, 0.5), Duration::from_secs(2));
        assert_eq!(
            c.backoff(t, 1, 0.0),
            Duration::ZERO,
            "full jitter reaches zero"
        );
        assert_eq!(c.backoff(t, 5, 0.5), Duration::from_secs(8));
        assert_eq!(
            c.backoff(t, 6, 0.99),
            Duration::from_secs(20),
            "31.68 s capped"
        );
        assert_eq!(c.backoff(t, 60, 0.9), Duration::from_secs(20));
        assert_eq!(
            c.backoff(RetryKind::Throttling, 2, 0.25),
            Duration::from_millis(500)
        );
    }

    #[test]
    fn the_2026_rules_start_faster_except_for_throttling() {
        let c = RetryConfig {
            revised_2026: true,
            ..RetryConfig::STANDARD
        };
        assert_eq!(
            c.backoff(RetryKind::Transient, 1, 1.0),
            Duration::from_millis(50)
        );
        assert_eq!(
            c.backoff(RetryKind::Transient, 3, 0.5),
            Duration::from_millis(100)
        );
        assert_eq!(
            c.backoff(RetryKind::Throttling, 1, 0.5),
            Duration::from_millis(500)
        );
        // The maximum is applied before the jitter: half of 20 s, not 20 s.
        assert_eq!(
            c.backoff(RetryKind::Throttling, 30, 0.5),
            Duration::from_secs(10)
        );
        assert_eq!(c.retry_cost(RetryKind::Transient), 14);
        assert_eq!(c.retry_cost(RetryKind::Timeout), 14);
        assert_eq!(c.retry_cost(RetryKind::Throttling), 5);
        let computed = Duration::from_millis(100);
        assert_eq!(c.server_backoff(computed, 10), computed);
        assert_eq!(c.server_backoff(computed, 2_000), Duration::from_secs(2));
        assert_eq!(
            c.server_backoff(computed, 60_000),
            Duration::from_millis(5_100)
        );
        let old = RetryConfig::STANDARD;
        assert_eq!(old.retry_cost(RetryKind::Timeout), 10);
        assert_eq!(old.retry_cost(RetryKind::Throttling), 5);
        assert_eq!(
            old.server_backoff(computed, 60_000),
            Duration::from_secs(20)
        );
    }

    #[test]
    fn settings_are_read_and_checked() {
        let s = |k: &str, v: &str| Some((k.to_string(), v.to_string()));
        let c = RetryConfig::from_settings(
            s("AWS_MAX_ATTEMPTS", "5"),
            s("AWS_RETRY_MODE", "adaptive"),
            false,
        )
        .unwrap();
        assert_eq!((c.max_attempts, c.mode), (5, RetryMode::Adaptive));
        assert_eq!(
            RetryConfig::from_settings(None, None, false).unwrap(),
            RetryConfig::STANDARD
        );
        for bad in ["0", "-1", "three"] {
            let err = RetryConfig::from_settings(s("max_attempts", bad), None, false).unwrap_err();
            assert!(err.to_string().starts_with("max_attempts = "), "{err}");
        }
        let err = RetryConfig::from_settings(None, s("AWS_RETRY_MODE", "fast"), false).unwrap_err();
        assert!(err.to_string().contains("AWS_RETRY_MODE"), "{err}");
    }

    #[test]
    fn the_quota_drains_on_retries_and_refills_on_success() {
        let q = RetryQuota::default();
        // 100 retries of 5 tokens empty the bucket; the 101st is refused.
        for _ in 0..100 {
            assert!(q.acquire(5));
        }
        assert_eq!(q.available(), 0);
        assert!(!q.acquire(5));
        q.succeeded(0);
        assert_eq!(q.available(), 1, "a first-attempt success adds one");
        q.succeeded(10);
        assert_eq!(q.available(), 11, "a success after retries refunds them");
        let full = RetryQuota::default();
        full.succeeded(0);
        assert_eq!(
            full.available(),
            RetryQuota::CAPACITY,
            "never above capacity"
        );
        let small = RetryQuota::new(12);
        assert!(small.acquire(10), "a timeout costs 10");
        assert!(!small.acquire(5));
    }
}
