//! Time as the wire sees it: the clock requests are signed with (corrected by the skew a
//! service reported), how a client waits between attempts, and the random fraction of its
//! jitter. All three are injectable, so tests run on a fake clock with no real sleeps.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of the current time.
pub trait Clock: Send + Sync {
    /// Now.
    fn now(&self) -> SystemTime;
}

/// The system's clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A future that completes after a wait.
pub type SleepFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Waits, as a client does between attempts.
pub type Sleep = Arc<dyn Fn(Duration) -> SleepFuture + Send + Sync>;

/// A random fraction in `[0, 1)`.
pub type Jitter = Arc<dyn Fn() -> f64 + Send + Sync>;

/// The clock, the waiting and the randomness a client uses.
#[derive(Clone)]
pub struct Timing {
    /// What "now" is.
    pub clock: Arc<dyn Clock>,
    /// How to wait.
    pub sleep: Sleep,
    /// The jitter's random fraction.
    pub jitter: Jitter,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            clock: Arc::new(SystemClock),
            sleep: Arc::new(|d| Box::pin(tokio::time::sleep(d))),
            jitter: Arc::new(random_fraction),
        }
    }
}

impl std::fmt::Debug for Timing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timing").finish_non_exhaustive()
    }
}

impl Timing {
    /// Seconds since the epoch now.
    pub fn unix_now(&self) -> i64 {
        unix_seconds(self.clock.now())
    }
}

/// Seconds since the epoch of `t` (negative before it).
pub fn unix_seconds(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
    }
}

/// A random fraction without a random-number crate: the standard library's per-process random
/// hash keys, which is enough spread for backoff.
pub fn random_fraction() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(0);
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// The least difference between a service's clock and the corrected one taken as skew (the
/// Java and Go SDKs' four minutes; AWS rejects requests more than five minutes off).
pub const SKEW_THRESHOLD: Duration = Duration::from_secs(4 * 60);

/// How far the services' clock is ahead of ours, learned from the `Date` of an answer that
/// rejected a request's time. Clones of a client share one.
#[derive(Debug, Default)]
pub struct ClockSkew(AtomicI64);

impl ClockSkew {
    /// The offset in seconds (positive: the service is ahead).
    pub fn seconds(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }

    /// The time to sign with: ours, corrected.
    pub fn corrected(&self, clock: &dyn Clock) -> i64 {
        unix_seconds(clock.now()).saturating_add(self.seconds())
    }

    /// Records the offset a service's `Date` header shows against our clock's `now` when it
    /// differs from the one in use by [`SKEW_THRESHOLD`] or more; whether it did (so a request
    /// signed again would carry another time). A smaller difference cannot be why AWS rejected
    /// the request's time (it takes requests within five minutes), so an authentication failure
    /// then is a real one and is not retried as skew.
    pub fn observe(&self, server_date: &str, now: SystemTime) -> bool {
        let Some(server) = parse_http_date(server_date) else {
            return false;
        };
        let offset = server - unix_seconds(now);
        if offset.abs_diff(self.seconds()) < SKEW_THRESHOLD.as_secs() {
            return false;
        }
        self.0.store(offset, Ordering::Relaxed);
        true
    }
}

/// Seconds since the epoch of an HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT`, RFC 7231's
/// preferred form, which AWS services send).
pub fn parse_http_date(s: &str) -> Option<i64> {
    let t = k8s_openapi::jiff::fmt::rfc2822::parse(s.trim()).ok()?;
    Some(t.timestamp().as_second())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct At(i64);
    impl Clock for At {
        fn now(&self) -> SystemTime {
            UNIX_EPOCH + Duration::from_secs(self.0 as u64)
        }
    }

    #[test]
    fn http_dates() {
        assert_eq!(
            parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(
            parse_http_date("Sun, 30 Aug 2015 12:36:00 GMT"),
            Some(1_440_938_160)
        );
        assert_eq!(parse_http_date("yesterday"), None);
    }

    #[test]
    fn skew_is_learned_from_the_services_date() {
        let skew = ClockSkew::default();
        let ours = At(1_440_938_160 - 900);
        assert_eq!(skew.corrected(&ours), 1_440_938_160 - 900);
        assert!(skew.observe("Sun, 30 Aug 2015 12:36:00 GMT", ours.now()));
        assert_eq!(skew.seconds(), 900);
        assert_eq!(skew.corrected(&ours), 1_440_938_160);
        assert!(
            !skew.observe("Sun, 30 Aug 2015 12:36:00 GMT", ours.now()),
            "the same offset again changes nothing"
        );
        assert!(!skew.observe("garbage", ours.now()));
        assert_eq!(skew.seconds(), 900);
        // A second off (or three minutes) is not what got a request rejected: no new skew.
        let a_second_ahead = At(1_440_938_160 - 900 - 1);
        assert!(!skew.observe("Sun, 30 Aug 2015 12:36:00 GMT", a_second_ahead.now()));
        let minutes_ahead = At(1_440_938_160 - 900 - 180);
        assert!(!skew.observe("Sun, 30 Aug 2015 12:36:00 GMT", minutes_ahead.now()));
        assert_eq!(skew.seconds(), 900);
        // From four minutes on, it is.
        let far = At(1_440_938_160 - 900 - 240);
        assert!(skew.observe("Sun, 30 Aug 2015 12:36:00 GMT", far.now()));
        assert_eq!(skew.seconds(), 1140);
        // And a server clock a second off ours from the start is no skew.
        let fresh = ClockSkew::default();
        assert!(!fresh.observe("Sun, 30 Aug 2015 12:36:01 GMT", At(1_440_938_160).now()));
        assert_eq!(fresh.seconds(), 0);
    }

    #[test]
    fn random_fractions_stay_in_range() {
        for _ in 0..1000 {
            let f = random_fraction();
            assert!((0.0..1.0).contains(&f), "{f}");
        }
    }
}
