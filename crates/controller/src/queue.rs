//! Per-object reconcile loops, as controller-runtime's work queue: an object is reconciled when
//! it (or an object it depends on) changes, again when its last reconcile asked to be looked at
//! after a while, and again after a failure with per-object exponential backoff — so a pass
//! costs O(change), and no object waits on a watch event that may never come.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use tokio::time::Instant;

use crate::cloudprovider::CloudProvider;
use crate::metrics::runtime::{LoopMetrics, UNFINISHED_WORK_PERIOD};
use crate::state::{Changes, Cluster, Index, Stored};
use crate::{Context, Error};

/// The first retry after a failure; each further failure doubles it.
pub const BACKOFF_BASE: Duration = Duration::from_millis(100);
/// The longest wait between retries of a failing object.
pub const BACKOFF_MAX: Duration = Duration::from_secs(5 * 60);
/// How many objects of one loop are reconciled at once.
pub const CONCURRENCY: usize = 64;

/// Which objects are due when: each key at most once, at its earliest time, with a count of
/// its consecutive failures.
#[derive(Debug, Default)]
pub struct WorkQueue {
    due: BTreeSet<(Instant, String)>,
    at: HashMap<String, Instant>,
    failures: HashMap<String, u32>,
}

impl WorkQueue {
    /// Schedules `key` at `when`, unless it is due sooner already.
    pub fn add(&mut self, key: &str, when: Instant) {
        if let Some(current) = self.at.get(key) {
            if *current <= when {
                return;
            }
            self.due.remove(&(*current, key.to_string()));
        }
        self.at.insert(key.to_string(), when);
        self.due.insert((when, key.to_string()));
    }

    /// The keys due at `now` with the time each became due, removed from the queue.
    pub fn pop_due(&mut self, now: Instant) -> Vec<(String, Instant)> {
        let mut out = Vec::new();
        while let Some((when, _)) = self.due.first()
            && *when <= now
        {
            let (when, key) = self.due.pop_first().expect("checked above");
            self.at.remove(&key);
            out.push((key, when));
        }
        out
    }

    /// How many keys are due at `now`.
    pub fn due_at(&self, now: Instant) -> usize {
        self.due.iter().take_while(|(when, _)| *when <= now).count()
    }

    /// When the next key is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.due.first().map(|(when, _)| *when)
    }

    /// Records a failure of `key` and schedules its retry: [`BACKOFF_BASE`] doubled per
    /// consecutive failure, at most [`BACKOFF_MAX`].
    pub fn failed(&mut self, key: &str, now: Instant) -> Duration {
        let n = self.failures.entry(key.to_string()).or_default();
        let delay = backoff(BACKOFF_BASE, BACKOFF_MAX, *n);
        *n = n.saturating_add(1);
        self.add(key, now + delay);
        delay
    }

    /// Records a success of `key`: its backoff starts over.
    pub fn succeeded(&mut self, key: &str) {
        self.failures.remove(key);
    }

    /// Forgets `key` (its object is gone).
    pub fn forget(&mut self, key: &str) {
        if let Some(when) = self.at.remove(key) {
            self.due.remove(&(when, key.to_string()));
        }
        self.failures.remove(key);
    }
}

/// The wait after `failures` consecutive failures: `base` doubled per failure, at most `max`.
pub(crate) fn backoff(base: Duration, max: Duration, failures: u32) -> Duration {
    base.saturating_mul(1u32.checked_shl(failures).unwrap_or(u32::MAX))
        .min(max)
}

/// Another kind's changes, and the keys of this loop's objects they concern.
pub(crate) struct Related {
    pub changes: Arc<Changes>,
    pub keys: fn(&Cluster, &str) -> Vec<String>,
}

/// What a reconcile asks of the queue when it succeeds: look at the object again after this
/// long (`None`: only when it changes).
pub(crate) type Requeue = Option<Duration>;

/// Where a loop's objects are kept.
enum Objects<K> {
    /// An index of cluster state.
    Cluster(fn(&Cluster) -> &Index<K>),
    /// An index the loop's owner feeds (a provider's NodeClasses, see [`crate::state::follow`]).
    Own(Arc<Index<K>>),
}

impl<K> Objects<K> {
    fn get<'a>(&'a self, cluster: &'a Cluster) -> &'a Index<K> {
        match self {
            Objects::Cluster(index) => index(cluster),
            Objects::Own(index) => index,
        }
    }
}

/// Reconciles the objects of `index` one by one until `shutdown`, while this replica leads and
/// state is synced: when they change (or a `related` object does), when their last reconcile
/// asked, and after failures with backoff.
pub(crate) async fn run<P, K, R, Fut>(
    ctx: Arc<Context<P>>,
    shutdown: tokio_util::sync::CancellationToken,
    name: &'static str,
    index: fn(&Cluster) -> &Index<K>,
    related: Vec<Related>,
    reconcile: R,
) where
    P: CloudProvider,
    K: Stored + Send + Sync + 'static,
    R: Fn(Arc<Context<P>>, Arc<K>) -> Fut,
    Fut: Future<Output = Result<Requeue, Error>>,
{
    run_objects(
        ctx,
        shutdown,
        name,
        Objects::Cluster(index),
        related,
        reconcile,
    )
    .await;
}

/// [`run`] over an index the caller keeps (fed by [`crate::state::follow`]), for the kinds a
/// provider adds, such as its NodeClass: each object is reconciled when it changes, again
/// after the duration its reconcile returns, and after failures with per-object backoff.
pub async fn run_own<P, K, R, Fut>(
    ctx: Arc<Context<P>>,
    shutdown: tokio_util::sync::CancellationToken,
    name: &'static str,
    index: Arc<Index<K>>,
    reconcile: R,
) where
    P: CloudProvider,
    K: Stored + Send + Sync + 'static,
    R: Fn(Arc<Context<P>>, Arc<K>) -> Fut,
    Fut: Future<Output = Result<Option<Duration>, Error>>,
{
    run_objects(
        ctx,
        shutdown,
        name,
        Objects::Own(index),
        Vec::new(),
        reconcile,
    )
    .await;
}

async fn run_objects<P, K, R, Fut>(
    ctx: Arc<Context<P>>,
    shutdown: tokio_util::sync::CancellationToken,
    name: &'static str,
    objects: Objects<K>,
    related: Vec<Related>,
    reconcile: R,
) where
    P: CloudProvider,
    K: Stored + Send + Sync + 'static,
    R: Fn(Arc<Context<P>>, Arc<K>) -> Fut,
    Fut: Future<Output = Result<Requeue, Error>>,
{
    let own = objects.get(&ctx.cluster).subscribe();
    let mut queue = WorkQueue::default();
    let lm = ctx.metrics.runtime.controller(name, CONCURRENCY);
    // Everything is looked at once this replica leads with synced state.
    let mut everything = true;
    loop {
        let next = queue.next_due();
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = own.changed() => {}
            _ = async {
                futures::future::select_all(related.iter().map(|r| Box::pin(r.changes.changed()))).await
            }, if !related.is_empty() => {}
            _ = async {
                match next {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => {}
            // Leadership and sync are not events of this index.
            _ = tokio::time::sleep(ctx.options.resync) => {}
        }
        let now = ctx.clock.instant();
        let (keys, all) = own.take();
        everything |= all;
        for key in keys {
            queue.add(&key, now);
        }
        for r in &related {
            let (keys, all) = r.changes.take();
            everything |= all;
            for key in keys {
                for own_key in (r.keys)(&ctx.cluster, &key) {
                    queue.add(&own_key, now);
                }
            }
        }
        if !ctx.is_leader() || !ctx.cluster.synced() || !objects.get(&ctx.cluster).synced() {
            everything = true;
            continue;
        }
        if std::mem::take(&mut everything) {
            for object in objects.get(&ctx.cluster).all() {
                queue.add(&object.key(), now);
            }
        }
        let due: Vec<(String, Instant, Arc<K>)> = queue
            .pop_due(now)
            .into_iter()
            .filter_map(|(key, when)| match objects.get(&ctx.cluster).get(&key) {
                Some(object) => Some((key, when, object)),
                None => {
                    queue.forget(&key);
                    None
                }
            })
            .collect();
        let results = work(&ctx, &queue, &lm, name, due, &reconcile).await;
        let now = ctx.clock.instant();
        for (key, result, took) in results {
            ctx.metrics.reconciled_in(name, result.is_ok(), took);
            match result {
                Ok(requeue) => {
                    queue.succeeded(&key);
                    if let Some(after) = requeue {
                        queue.add(&key, now + after);
                        lm.retried();
                    }
                }
                Err(e) => {
                    let retry = queue.failed(&key, now);
                    lm.retried();
                    if e.is_conflict() {
                        tracing::debug!(controller = name, key = %key, "conflict, retrying");
                    } else {
                        tracing::warn!(controller = name, key = %key, error = %e, retry_in = ?retry, "reconcile failed");
                    }
                }
            }
        }
    }
}

/// What a batch has in hand: objects due and waiting for a worker, and since when each
/// running reconcile runs.
#[derive(Default)]
struct InFlight {
    waiting: usize,
    running: HashMap<String, Instant>,
}

/// Reconciles the objects `due` (with the time each became due), [`CONCURRENCY`] at a time,
/// keeping the loop's work-queue metrics; a reconcile that panics is counted and fails.
async fn work<P, K, R, Fut>(
    ctx: &Arc<Context<P>>,
    queue: &WorkQueue,
    lm: &LoopMetrics,
    name: &'static str,
    due: Vec<(String, Instant, Arc<K>)>,
    reconcile: &R,
) -> Vec<(String, Result<Requeue, Error>, f64)>
where
    P: CloudProvider,
    K: Stored + Send + Sync + 'static,
    R: Fn(Arc<Context<P>>, Arc<K>) -> Fut,
    Fut: Future<Output = Result<Requeue, Error>>,
{
    let in_flight = Mutex::new(InFlight {
        waiting: due.len(),
        running: HashMap::new(),
    });
    let lock = || in_flight.lock().unwrap_or_else(|e| e.into_inner());
    lm.added(due.len());
    lm.depth(due.len() + queue.due_at(ctx.clock.instant()));
    let batch = futures::stream::iter(due)
        .map(|(key, due_at, object)| {
            let started = ctx.clock.instant();
            {
                let mut f = lock();
                f.waiting -= 1;
                f.running.insert(key.clone(), started);
                lm.depth(f.waiting);
            }
            lm.started(started.saturating_duration_since(due_at));
            let done = std::panic::AssertUnwindSafe(crate::metrics::in_controller(
                name,
                reconcile(ctx.clone(), object),
            ))
            .catch_unwind();
            async move {
                let result = done.await.unwrap_or_else(|panic| {
                    lm.panicked();
                    let why = panic_message(&*panic);
                    tracing::error!(controller = name, key = %key, panic = %why, "reconcile panicked");
                    Err(Error::Panicked(why))
                });
                let took = started.elapsed();
                lock().running.remove(&key);
                lm.finished(took);
                (key, result, took.as_secs_f64())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect::<Vec<_>>();
    tokio::pin!(batch);
    // The reconciles' running time is brought up to date while they run, as client-go's
    // queue does, so a stuck one shows before it ends.
    let results = loop {
        tokio::select! {
            results = &mut batch => break results,
            _ = tokio::time::sleep(UNFINISHED_WORK_PERIOD) => {
                let now = ctx.clock.instant();
                let f = lock();
                lm.in_flight(f.running.values().map(|s| now.saturating_duration_since(*s)));
                lm.depth(f.waiting + queue.due_at(now));
            }
        }
    };
    lm.in_flight([]);
    lm.depth(queue.due_at(ctx.clock.instant()));
    results
}

/// What a panic said, when it said it with a string.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_key_is_due_once_at_its_earliest_time() {
        let t0 = Instant::now();
        let mut q = WorkQueue::default();
        q.add("a", t0 + ms(500));
        q.add("a", t0 + ms(900));
        q.add("b", t0 + ms(100));
        q.add("a", t0 + ms(200));
        assert_eq!(q.next_due(), Some(t0 + ms(100)));
        assert!(q.pop_due(t0 + ms(50)).is_empty());
        assert_eq!(
            q.pop_due(t0 + ms(300)),
            [
                ("b".to_string(), t0 + ms(100)),
                ("a".to_string(), t0 + ms(200))
            ]
        );
        assert!(
            q.pop_due(t0 + ms(10_000)).is_empty(),
            "the later times went with it"
        );
        assert_eq!(q.next_due(), None);
    }

    #[test]
    fn failures_back_off_exponentially_and_a_success_starts_over() {
        let t0 = Instant::now();
        let mut q = WorkQueue::default();
        let delays: Vec<Duration> = (0..5).map(|_| q.failed("a", t0)).collect();
        assert_eq!(delays, [ms(100), ms(200), ms(400), ms(800), ms(1600)]);
        assert_eq!(
            q.next_due(),
            Some(t0 + ms(100)),
            "the earliest retry stands"
        );
        for _ in 0..30 {
            q.failed("a", t0);
        }
        assert_eq!(q.failed("a", t0), BACKOFF_MAX);
        q.succeeded("a");
        assert_eq!(q.failed("a", t0), ms(100));
        q.forget("a");
        assert_eq!(q.next_due(), None);
    }

    /// The next reconcile the loop reports; an hour of paused time without one fails the test.
    async fn next(
        calls: &mut tokio::sync::mpsc::UnboundedReceiver<(String, Instant)>,
    ) -> (String, Instant) {
        tokio::time::timeout(Duration::from_secs(3600), calls.recv())
            .await
            .expect("a reconcile within the hour")
            .expect("the loop runs")
    }

    /// The loop on tokio's paused clock: a change is reconciled at once, a failure is retried
    /// after 100, 200 and 400 ms, and a reconcile's requeue brings the object back when asked.
    #[tokio::test(start_paused = true)]
    async fn objects_are_reconciled_on_change_retried_with_backoff_and_requeued() {
        use k8s_openapi::api::core::v1::Node;
        use tokio::sync::mpsc;

        let ctx = crate::testing::context(crate::Options::default());
        let (seen, mut calls) = mpsc::unbounded_channel::<(String, Instant)>();
        let node = |name: &str, rv: &str| {
            let mut n = Node::default();
            n.metadata.name = Some(name.into());
            n.metadata.resource_version = Some(rv.into());
            n
        };
        ctx.cluster.nodes.reset(vec![Arc::new(node("steady", "1"))]);
        ctx.cluster.mark_listed();
        let failures = Arc::new(Mutex::new(3));
        let shutdown = tokio_util::sync::CancellationToken::new();
        let runner = tokio::spawn(run(
            ctx.clone(),
            shutdown.clone(),
            "test",
            |c| &c.nodes,
            Vec::new(),
            move |_, node: Arc<Node>| {
                let seen = seen.clone();
                let failures = failures.clone();
                async move {
                    let name = node.metadata.name.clone().unwrap_or_default();
                    seen.send((name.clone(), Instant::now()))
                        .expect("the test listens");
                    match name.as_str() {
                        "flaky" => {
                            let mut left = failures.lock().unwrap();
                            if *left > 0 {
                                *left -= 1;
                                return Err(Error::NotSynced("not yet".into()));
                            }
                            Ok(None)
                        }
                        "periodic" => Ok(Some(Duration::from_secs(30))),
                        _ => Ok(None),
                    }
                }
            },
        ));
        let (key, t0) = next(&mut calls).await;
        assert_eq!(key, "steady", "everything is looked at once on start");

        ctx.cluster.nodes.apply(node("flaky", "2"));
        let mut at = Vec::new();
        for _ in 0..4 {
            let (key, when) = next(&mut calls).await;
            assert_eq!(key, "flaky");
            at.push(when);
        }
        let gaps: Vec<Duration> = at.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(
            gaps,
            [ms(100), ms(200), ms(400)],
            "retried with backoff until it succeeds"
        );
        assert!(at[0] - t0 < ms(10), "a change is reconciled at once");

        ctx.cluster.nodes.apply(node("periodic", "3"));
        let (_, first) = next(&mut calls).await;
        let (key, again) = next(&mut calls).await;
        assert_eq!(key, "periodic");
        assert_eq!(
            again - first,
            Duration::from_secs(30),
            "back when its reconcile asked"
        );

        ctx.cluster.nodes.apply(node("steady", "4"));
        let (key, _) = next(&mut calls).await;
        assert_eq!(key, "steady", "a settled object comes back when it changes");
        shutdown.cancel();
        runner.await.unwrap();
    }

    /// The loop's work-queue and controller-runtime metrics on tokio's paused clock: 70
    /// objects of a second's work fill the 64 workers and leave 6 queued; a failing object
    /// counts its retries; a panicking one counts the panic, fails and is retried.
    #[tokio::test(start_paused = true)]
    async fn the_queue_and_its_workers_are_measured_and_a_panic_is_retried() {
        use k8s_openapi::api::core::v1::Node;
        use tokio::sync::mpsc;

        let ctx = crate::testing::context(crate::Options::default());
        let (seen, mut calls) = mpsc::unbounded_channel::<(String, Instant)>();
        let node = |name: &str| {
            let mut n = Node::default();
            n.metadata.name = Some(name.into());
            n.metadata.resource_version = Some("1".into());
            n
        };
        ctx.cluster.nodes.reset(
            (0..70)
                .map(|i| Arc::new(node(&format!("slow-{i}"))))
                .collect(),
        );
        ctx.cluster.mark_listed();
        let left = Arc::new(Mutex::new((2, 1)));
        let shutdown = tokio_util::sync::CancellationToken::new();
        let runner = tokio::spawn(run(
            ctx.clone(),
            shutdown.clone(),
            "test",
            |c| &c.nodes,
            Vec::new(),
            move |_, node: Arc<Node>| {
                let seen = seen.clone();
                let left = left.clone();
                async move {
                    let name = node.metadata.name.clone().unwrap_or_default();
                    seen.send((name.clone(), Instant::now()))
                        .expect("the test listens");
                    if name.starts_with("slow-") {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                    let mut left = left.lock().unwrap();
                    match name.as_str() {
                        "flaky" if left.0 > 0 => {
                            left.0 -= 1;
                            Err(Error::NotSynced("not yet".into()))
                        }
                        "boom" if left.1 > 0 => {
                            left.1 -= 1;
                            drop(left);
                            panic!("boom");
                        }
                        _ => Ok(None),
                    }
                }
            },
        ));
        let m = ctx.metrics.clone();
        let r = &m.runtime;
        let q = ["test", "test"];
        let gauge = |f: &crate::metrics::Family<crate::metrics::Gauge>, v: &[&str]| {
            f.value(v).expect("the series exists")
        };
        let counter = |f: &crate::metrics::Family<crate::metrics::Counter>, v: &[&str]| {
            f.get(v).expect("the series exists").get()
        };
        // The first batch starts once the loop sees leadership and synced state.
        let (_, t0) = next(&mut calls).await;
        tokio::time::sleep_until(t0 + ms(750)).await;
        assert_eq!(gauge(&r.max_concurrent, &["test"]), CONCURRENCY as f64);
        assert_eq!(gauge(&r.active_workers, &["test"]), 64.0);
        assert_eq!(gauge(&r.depth, &["test", "test", "0"]), 6.0, "six wait");
        assert_eq!(counter(&r.adds, &q), 70);
        assert_eq!(
            gauge(&r.unfinished_work, &q),
            64.0 * 0.5,
            "as of the tick at 500 ms"
        );
        assert_eq!(gauge(&r.longest_running, &q), 0.5);

        tokio::time::sleep_until(t0 + ms(2500)).await;
        assert_eq!(gauge(&r.active_workers, &["test"]), 0.0);
        assert_eq!(gauge(&r.depth, &["test", "test", "0"]), 0.0);
        assert_eq!(gauge(&r.unfinished_work, &q), 0.0);
        let waited = r.queue_duration.get(&q).expect("observed");
        assert_eq!(waited.count(), 70);
        assert_eq!(waited.count_le(0.1), 64, "six waited a second for a worker");
        let worked = r.work_duration.get(&q).expect("observed");
        assert_eq!((worked.count(), worked.count_le(1.0)), (70, 70));
        assert_eq!(counter(&r.retries, &q), 0);
        while calls.try_recv().is_ok() {}

        ctx.cluster.nodes.apply(node("flaky"));
        for _ in 0..3 {
            assert_eq!(next(&mut calls).await.0, "flaky");
        }
        ctx.cluster.nodes.apply(node("boom"));
        let (_, panicked) = next(&mut calls).await;
        let (key, retried) = next(&mut calls).await;
        assert_eq!(key, "boom", "the loop lives on and retries the object");
        assert_eq!(retried - panicked, BACKOFF_BASE, "with backoff");
        tokio::time::sleep(ms(10)).await;
        assert_eq!(counter(&r.panics, &["test"]), 1);
        assert_eq!(counter(&r.retries, &q), 3, "two failures and a panic");
        assert_eq!(counter(&m.reconcile_errors, &["test"]), 3);
        assert_eq!(counter(&r.adds, &q), 70 + 3 + 2);
        assert_eq!(counter(&r.terminal_errors, &["test"]), 0);
        assert_eq!(counter(&r.timeouts, &["test"]), 0);
        shutdown.cancel();
        runner.await.unwrap();
    }
}
