//! Upstream's provisioning batcher, as a state machine driven by the caller's clock: a window
//! opens with the first new provisionable pod, stays open while new ones keep arriving within
//! `idle` of each other, and closes after `max` regardless. A pod still pending
//! [`RETRIGGER`] after it opened a window counts as new again. The controller feeds it the
//! pods of its watch-fed state, the simulator those of its model.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// A pod still pending this long after it was batched triggers again.
pub const RETRIGGER: Duration = Duration::from_secs(10);

/// The batching window. Times are the caller's clock as a [`Duration`] since any fixed origin.
#[derive(Debug)]
pub struct Batcher {
    idle: Duration,
    max: Duration,
    window: Option<(Duration, Duration)>,
    triggered: HashMap<String, Duration>,
}

impl Batcher {
    /// A batcher with the given idle and maximum durations (upstream: 1 s and 10 s).
    pub fn new(idle: Duration, max: Duration) -> Self {
        Self {
            idle,
            max,
            window: None,
            triggered: HashMap::new(),
        }
    }

    /// Takes the provisionable pods seen at `now` (by UID); returns true when a batch is due.
    pub fn observe<'a>(&mut self, now: Duration, pods: impl IntoIterator<Item = &'a str>) -> bool {
        let mut current = HashSet::new();
        for uid in pods {
            current.insert(uid);
            let due = self
                .triggered
                .get(uid)
                .is_none_or(|at| now.saturating_sub(*at) >= RETRIGGER);
            if due {
                self.triggered.insert(uid.to_string(), now);
                let (start, _) = self.window.unwrap_or((now, now));
                self.window = Some((start, now));
            }
        }
        self.triggered
            .retain(|uid, _| current.contains(uid.as_str()));
        match self.window {
            Some((start, last))
                if now.saturating_sub(last) >= self.idle
                    || now.saturating_sub(start) >= self.max =>
            {
                self.window = None;
                true
            }
            _ => false,
        }
    }

    /// Runs the next batch as soon as possible (state was not ready for this one).
    pub fn retry(&mut self, now: Duration) {
        self.window = Some((now.saturating_sub(self.max), now.saturating_sub(self.idle)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_batch_closes_after_idle_or_max() {
        let t0 = ms(50_000);
        let mut b = Batcher::new(ms(1000), ms(10_000));
        assert!(!b.observe(t0, ["a"]), "the window opens");
        assert!(
            !b.observe(t0 + ms(900), ["a", "b"]),
            "b arrives within idle"
        );
        assert!(!b.observe(t0 + ms(1500), ["a", "b"]), "idle counts from b");
        assert!(b.observe(t0 + ms(1900), ["a", "b"]), "1s after b");
        assert!(
            !b.observe(t0 + ms(2000), ["a", "b"]),
            "already batched pods do not reopen it"
        );
        // A steady stream closes at max.
        let mut b = Batcher::new(ms(1000), ms(10_000));
        let mut closed_at = None;
        for i in 0..200u64 {
            let uids: Vec<String> = (0..=i).map(|n| format!("p{n}")).collect();
            if b.observe(t0 + ms(i * 100), uids.iter().map(String::as_str)) {
                closed_at = Some(i * 100);
                break;
            }
        }
        assert_eq!(closed_at, Some(10_000));
    }

    #[test]
    fn pending_pods_trigger_again_after_ten_seconds() {
        let t0 = ms(50_000);
        let mut b = Batcher::new(ms(1000), ms(10_000));
        b.observe(t0, ["a"]);
        assert!(b.observe(t0 + ms(1000), ["a"]));
        assert!(!b.observe(t0 + ms(5000), ["a"]));
        assert!(
            !b.observe(t0 + ms(11_000), ["a"]),
            "re-triggered, window open"
        );
        assert!(b.observe(t0 + ms(12_000), ["a"]));
    }

    #[test]
    fn a_retry_runs_on_the_next_observation() {
        let t0 = ms(20_000);
        let mut b = Batcher::new(ms(1000), ms(10_000));
        b.retry(t0);
        assert!(b.observe(t0 + ms(100), std::iter::empty()));
    }

    /// Upstream's batcher cases: a lone pod's batch closes once idle, the same pod seen again
    /// does not hold the window open, a new pod does (idle 5 s, max 10 s).
    #[test]
    fn idle_counts_from_the_last_new_pod() {
        let t0 = ms(30_000);
        let mut b = Batcher::new(ms(1000), ms(10_000));
        assert!(!b.observe(t0, ["a"]));
        assert!(
            b.observe(t0 + ms(11_000), ["a"]),
            "a single pod, idle passed"
        );

        let mut b = Batcher::new(ms(5000), ms(10_000));
        assert!(!b.observe(t0, ["a"]));
        assert!(!b.observe(t0 + ms(3000), ["a"]), "the same pod within idle");
        assert!(
            b.observe(t0 + ms(6000), ["a"]),
            "closed 5 s after the first sight, not extended"
        );

        let mut b = Batcher::new(ms(5000), ms(10_000));
        assert!(!b.observe(t0, ["a"]));
        assert!(
            !b.observe(t0 + ms(3000), ["a", "b"]),
            "a new pod within idle"
        );
        assert!(!b.observe(t0 + ms(6000), ["a", "b"]), "extended by b");
        assert!(b.observe(t0 + ms(9000), ["a", "b"]), "5 s after b");
    }

    #[test]
    fn nothing_pending_never_closes_a_window() {
        let mut b = Batcher::new(ms(1000), ms(10_000));
        for s in 0..30 {
            assert!(!b.observe(Duration::from_secs(s), std::iter::empty()));
        }
    }
}
