//! controller-runtime's per-controller metrics and its work queues' (`workqueue_*`), and the
//! handle a loop keeps to record them ([`LoopMetrics`]).
//!
//! Upstream's every controller is a controller-runtime controller with a work queue named as
//! the controller; ours are the per-object loops of the work queue and the singleton loops
//! (provisioner, disruption, …). Both record here under the name they already use for
//! `controller_runtime_reconcile_*`.

use std::time::Duration;

use super::{Builder, Counter, Family, Gauge, Histogram, exponential_buckets};

/// controller-runtime's priority queue's label for an item of normal priority. The queue is
/// on by default since v0.23, so `workqueue_depth` carries a `priority`; we queue every object
/// at the same priority.
pub const NORMAL_PRIORITY: &str = "0";

/// How often a busy queue's `workqueue_unfinished_work_seconds` and
/// `workqueue_longest_running_processor_seconds` are brought up to date (client-go's period).
pub const UNFINISHED_WORK_PERIOD: Duration = Duration::from_millis(500);

/// The families of controller-runtime and its work queues that `controller_runtime_reconcile_*`
/// do not cover.
pub struct RuntimeMetrics {
    /// `controller_runtime_terminal_reconcile_errors_total{controller}`
    pub terminal_errors: Family<Counter>,
    /// `controller_runtime_reconcile_panics_total{controller}`
    pub panics: Family<Counter>,
    /// `controller_runtime_reconcile_timeouts_total{controller}`
    pub timeouts: Family<Counter>,
    /// `controller_runtime_max_concurrent_reconciles{controller}`
    pub max_concurrent: Family<Gauge>,
    /// `controller_runtime_active_workers{controller}`
    pub active_workers: Family<Gauge>,
    /// `controller_runtime_conversion_webhook_panics_total`: we serve no conversion webhook;
    /// upstream's binary registers it whether or not one runs, so it stays at 0.
    pub conversion_webhook_panics: Family<Counter>,
    /// `workqueue_depth{controller,name,priority}`
    pub depth: Family<Gauge>,
    /// `workqueue_adds_total{controller,name}`
    pub adds: Family<Counter>,
    /// `workqueue_queue_duration_seconds{controller,name}`
    pub queue_duration: Family<Histogram>,
    /// `workqueue_work_duration_seconds{controller,name}`
    pub work_duration: Family<Histogram>,
    /// `workqueue_unfinished_work_seconds{controller,name}`
    pub unfinished_work: Family<Gauge>,
    /// `workqueue_longest_running_processor_seconds{controller,name}`
    pub longest_running: Family<Gauge>,
    /// `workqueue_retries_total{controller,name}`
    pub retries: Family<Counter>,
}

impl RuntimeMetrics {
    pub(super) fn register(b: &mut Builder) -> Self {
        let per_controller = &["controller"];
        let per_queue = &["controller", "name"];
        // client-go's workqueue buckets: 10 ns to 1000 s, a factor of 10 apart.
        let queue_buckets = exponential_buckets(10e-9, 10.0, 12);
        let conversion_webhook_panics = b.counter(
            "controller_runtime_conversion_webhook_panics_total",
            "Total number of conversion webhook panics",
            &[],
        );
        conversion_webhook_panics.with(&[]);
        Self {
            terminal_errors: b.counter(
                "controller_runtime_terminal_reconcile_errors_total",
                "Total number of terminal reconciliation errors per controller",
                per_controller,
            ),
            panics: b.counter(
                "controller_runtime_reconcile_panics_total",
                "Total number of reconciliation panics per controller",
                per_controller,
            ),
            timeouts: b.counter(
                "controller_runtime_reconcile_timeouts_total",
                "Total number of reconciliation timeouts per controller",
                per_controller,
            ),
            max_concurrent: b.gauge(
                "controller_runtime_max_concurrent_reconciles",
                "Maximum number of concurrent reconciles per controller",
                per_controller,
            ),
            active_workers: b.gauge(
                "controller_runtime_active_workers",
                "Number of currently used workers per controller",
                per_controller,
            ),
            conversion_webhook_panics,
            depth: b.gauge(
                "workqueue_depth",
                "Current depth of workqueue by workqueue and priority",
                &["controller", "name", "priority"],
            ),
            adds: b.counter(
                "workqueue_adds_total",
                "Total number of adds handled by workqueue",
                per_queue,
            ),
            queue_duration: b.histogram(
                "workqueue_queue_duration_seconds",
                "How long in seconds an item stays in workqueue before being requested",
                per_queue,
                &queue_buckets,
            ),
            work_duration: b.histogram(
                "workqueue_work_duration_seconds",
                "How long in seconds processing an item from workqueue takes.",
                per_queue,
                &queue_buckets,
            ),
            unfinished_work: b.gauge(
                "workqueue_unfinished_work_seconds",
                "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
                per_queue,
            ),
            longest_running: b.gauge(
                "workqueue_longest_running_processor_seconds",
                "How many seconds has the longest running processor for workqueue been running.",
                per_queue,
            ),
            retries: b.counter(
                "workqueue_retries_total",
                "Total number of retries handled by workqueue",
                per_queue,
            ),
        }
    }

    /// The handle of the loop `controller`, which runs at most `concurrency` reconciles at
    /// once. Its series start at zero, as controller-runtime starts a controller's.
    pub fn controller(&self, controller: &'static str, concurrency: usize) -> LoopMetrics {
        let c = [controller];
        let q = [controller, controller];
        self.max_concurrent.set(&c, concurrency as f64);
        self.active_workers.set(&c, 0.0);
        self.depth
            .set(&[controller, controller, NORMAL_PRIORITY], 0.0);
        self.unfinished_work.set(&q, 0.0);
        self.longest_running.set(&q, 0.0);
        LoopMetrics {
            terminal_errors: self.terminal_errors.with(&c),
            panics: self.panics.with(&c),
            timeouts: self.timeouts.with(&c),
            active_workers: self.active_workers.with(&c),
            depth: self.depth.with(&[controller, controller, NORMAL_PRIORITY]),
            adds: self.adds.with(&q),
            queue_duration: self.queue_duration.with(&q),
            work_duration: self.work_duration.with(&q),
            unfinished_work: self.unfinished_work.with(&q),
            longest_running: self.longest_running.with(&q),
            retries: self.retries.with(&q),
        }
    }
}

/// One loop's series, held by the loop so recording costs no lookup.
pub struct LoopMetrics {
    /// Its `controller_runtime_terminal_reconcile_errors_total`: none of our errors is
    /// terminal (every failure is retried), so it stays at 0.
    pub terminal_errors: std::sync::Arc<Counter>,
    /// Its `controller_runtime_reconcile_panics_total`.
    pub panics: std::sync::Arc<Counter>,
    /// Its `controller_runtime_reconcile_timeouts_total`: upstream sets no reconcile
    /// timeout, so neither do we and it stays at 0.
    pub timeouts: std::sync::Arc<Counter>,
    active_workers: std::sync::Arc<Gauge>,
    depth: std::sync::Arc<Gauge>,
    adds: std::sync::Arc<Counter>,
    queue_duration: std::sync::Arc<Histogram>,
    work_duration: std::sync::Arc<Histogram>,
    unfinished_work: std::sync::Arc<Gauge>,
    longest_running: std::sync::Arc<Gauge>,
    retries: std::sync::Arc<Counter>,
}

impl LoopMetrics {
    /// `n` objects became due and wait for a worker.
    pub fn added(&self, n: usize) {
        self.adds.inc_by(n as u64);
    }

    /// How many objects are due and wait for a worker.
    pub fn depth(&self, n: usize) {
        self.depth.set(n as f64);
    }

    /// An object scheduled again for later: a failure's backoff or a reconcile's requeue
    /// (client-go counts every delayed add as a retry).
    pub fn retried(&self) {
        self.retries.inc();
    }

    /// A worker took an object that waited `waited` since it was due.
    pub fn started(&self, waited: Duration) {
        self.queue_duration.observe(waited.as_secs_f64());
        self.active_workers.set(self.active_workers.get() + 1.0);
    }

    /// A worker finished an object after `worked`.
    pub fn finished(&self, worked: Duration) {
        self.work_duration.observe(worked.as_secs_f64());
        self.active_workers
            .set((self.active_workers.get() - 1.0).max(0.0));
    }

    /// A reconcile panicked.
    pub fn panicked(&self) {
        self.panics.inc();
    }

    /// The reconciles running now, by how long each has run: their sum and the longest.
    pub fn in_flight(&self, running: impl IntoIterator<Item = Duration>) {
        let (sum, longest) = running
            .into_iter()
            .fold((0.0, 0.0_f64), |(sum, longest), d| {
                let s = d.as_secs_f64();
                (sum + s, longest.max(s))
            });
        self.unfinished_work.set(sum);
        self.longest_running.set(longest);
    }

    /// One pass of a singleton loop (a queue of one item, requeued after every pass as
    /// upstream's singleton controllers are): added, taken at once, worked for `worked`.
    pub fn singleton_pass(&self, worked: Duration) {
        self.added(1);
        self.started(Duration::ZERO);
        self.finished(worked);
        self.retried();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;

    #[test]
    fn a_loop_starts_at_zero_and_its_queue_buckets_are_client_gos() {
        let m = Metrics::new();
        let l = m.runtime.controller("nodeclaim.lifecycle", 64);
        let text = m.encode();
        for line in [
            "controller_runtime_max_concurrent_reconciles{controller=\"nodeclaim.lifecycle\"} 64",
            "controller_runtime_active_workers{controller=\"nodeclaim.lifecycle\"} 0",
            "controller_runtime_reconcile_panics_total{controller=\"nodeclaim.lifecycle\"} 0",
            "controller_runtime_terminal_reconcile_errors_total{controller=\"nodeclaim.lifecycle\"} 0",
            "controller_runtime_reconcile_timeouts_total{controller=\"nodeclaim.lifecycle\"} 0",
            "controller_runtime_conversion_webhook_panics_total 0",
            "workqueue_depth{controller=\"nodeclaim.lifecycle\",name=\"nodeclaim.lifecycle\",priority=\"0\"} 0",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
        l.singleton_pass(Duration::from_millis(20));
        l.in_flight([Duration::from_secs(2), Duration::from_secs(3)]);
        let text = m.encode();
        for line in [
            "workqueue_adds_total{controller=\"nodeclaim.lifecycle\",name=\"nodeclaim.lifecycle\"} 1",
            "workqueue_retries_total{controller=\"nodeclaim.lifecycle\",name=\"nodeclaim.lifecycle\"} 1",
            "workqueue_work_duration_seconds_bucket{controller=\"nodeclaim.lifecycle\",name=\"nodeclaim.lifecycle\",le=\"0.1\"} 1",
            "workqueue_queue_duration_seconds_bucket{controller=\"nodeclaim.lifecycle\",name=\"nodeclaim.lifecycle\",le=\"1e-08\"} 1",
            "workqueue_unfinished_work_seconds{controller=\"nodeclaim.lifecycle\",name=\"nodeclaim.lifecycle\"} 5",
            "workqueue_longest_running_processor_seconds{controller=\"nodeclaim.lifecycle\",name=\"nodeclaim.lifecycle\"} 3",
            "controller_runtime_active_workers{controller=\"nodeclaim.lifecycle\"} 0",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }
}
