//! The one place the controller's loops read the time from.
//!
//! Decisions take the time as a value; the loops that call them ask a [`Clock`] for it. In
//! production that is the system's wall clock. In tests it is wall time that moves with
//! tokio's clock, so a test on a paused runtime ages NodeClaims, expires them and runs out
//! grace periods by advancing time, as its timers see it, instead of waiting.

use std::sync::Arc;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use tokio::time::Instant;

/// Wall time for the controller's loops (and monotonic time, which is always tokio's).
#[derive(Clone, Debug, Default)]
pub struct Clock {
    /// `None`: the system clock. Otherwise the wall time and tokio instant it started at.
    anchor: Option<Arc<(Timestamp, Instant)>>,
}

impl Clock {
    /// The system's wall clock.
    pub fn system() -> Self {
        Self::default()
    }

    /// Wall time that starts at the system's time now and from then on advances exactly as
    /// tokio's clock does (paused, auto-advanced or advanced by hand in tests). Call it inside
    /// the runtime whose clock it should follow.
    pub fn following_tokio() -> Self {
        Self {
            anchor: Some(Arc::new((Timestamp::now(), Instant::now()))),
        }
    }

    /// The wall time now.
    pub fn now(&self) -> Timestamp {
        match self.anchor.as_deref() {
            None => Timestamp::now(),
            Some((wall, at)) => {
                let elapsed = SignedDuration::try_from(Instant::now().duration_since(*at))
                    .unwrap_or(SignedDuration::MAX);
                wall.saturating_add(elapsed).unwrap_or(*wall)
            }
        }
    }

    /// The monotonic time now: tokio's, which tests pause.
    pub fn instant(&self) -> Instant {
        Instant::now()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_clock_following_tokio_moves_only_with_tokio() {
        let clock = Clock::following_tokio();
        let start = clock.now();
        assert_eq!(clock.now(), start, "paused time stands still");
        tokio::time::advance(Duration::from_secs(3600)).await;
        assert_eq!(
            clock.now().duration_since(start),
            SignedDuration::from_secs(3600)
        );
        tokio::time::sleep(Duration::from_secs(90)).await;
        assert_eq!(
            clock.now().duration_since(start),
            SignedDuration::from_secs(3690)
        );
    }

    #[test]
    fn the_system_clock_is_the_wall_clock() {
        let before = Timestamp::now();
        let now = Clock::system().now();
        assert!(now >= before && now <= Timestamp::now());
    }
}
