//! Leader election on a `coordination.k8s.io/v1` Lease (`karpenter-leader-election`, or
//! `LEADER_ELECTION_NAME`), as client-go's leader election does it: the holder renews, the
//! others take over once the lease record has not changed for the lease duration — measured on
//! their own clock from when they saw it change, never by comparing the holder's `renewTime`
//! with their clock, so clock skew between nodes cannot make two leaders. Every replica keeps
//! its state warm; only the leader acts.
//!
//! As client-go's, a leader whose lease is still valid renews by writing the lease as it last
//! wrote it, without reading it first; only when that write fails does it read the lease and
//! decide again — the slow path `leader_election_slowpath_total` counts.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::Clock;
use crate::metrics::Metrics;

/// Upstream's Lease name.
pub const LEASE_NAME: &str = "karpenter-leader-election";
/// How long a lease holds without renewal (client-go's default).
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
/// How often the holder renews and the others retry.
pub const RETRY_PERIOD: Duration = Duration::from_secs(2);

/// What a replica does with the lease it read.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    /// It holds the lease: renew it.
    Renew,
    /// Nobody holds it, or the holder let it lapse: take it.
    Acquire,
    /// Someone else holds it.
    Follow(String),
}

/// Decides from the lease as read, the record having been seen unchanged for `unchanged_for`
/// on this replica's clock.
pub fn decide(spec: Option<&LeaseSpec>, identity: &str, unchanged_for: Duration) -> Decision {
    let Some(spec) = spec else {
        return Decision::Acquire;
    };
    let holder = spec.holder_identity.as_deref().unwrap_or_default();
    if holder == identity {
        return Decision::Renew;
    }
    if holder.is_empty() {
        return Decision::Acquire;
    }
    let duration = spec
        .lease_duration_seconds
        .and_then(|s| u64::try_from(s).ok())
        .map_or(LEASE_DURATION, Duration::from_secs);
    if unchanged_for <= duration {
        Decision::Follow(holder.into())
    } else {
        Decision::Acquire
    }
}

/// The lease record as this replica last saw it, and since when (client-go's
/// `observedRecord` and `observedTime`).
#[derive(Debug, Default)]
pub struct Observed {
    record: Option<LeaseSpec>,
    since: Option<Instant>,
    /// The lease as this replica last wrote it, and when: while it holds, the next renewal
    /// writes over it without reading.
    held: Option<(Lease, Instant)>,
}

impl Observed {
    /// How long the record `spec` has been seen unchanged at `now`: from now when it differs
    /// from the last one seen.
    pub fn unchanged_for(&mut self, spec: Option<&LeaseSpec>, now: Instant) -> Duration {
        match self.since {
            Some(since) if self.record.as_ref() == spec => now.saturating_duration_since(since),
            _ => {
                self.record = spec.cloned();
                self.since = Some(now);
                Duration::ZERO
            }
        }
    }
}

impl Observed {
    /// Records the lease as this replica wrote it at `now`.
    fn wrote(&mut self, lease: Lease, now: Instant) {
        self.unchanged_for(lease.spec.as_ref(), now);
        self.held = Some((lease, now));
    }
}

fn spec(identity: &str, now: Timestamp, previous: Option<&LeaseSpec>) -> LeaseSpec {
    let renewing = previous.is_some_and(|p| p.holder_identity.as_deref() == Some(identity));
    LeaseSpec {
        holder_identity: Some(identity.into()),
        lease_duration_seconds: Some(LEASE_DURATION.as_secs() as i32),
        acquire_time: if renewing {
            previous.and_then(|p| p.acquire_time.clone())
        } else {
            Some(MicroTime(now))
        },
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(
            previous.and_then(|p| p.lease_transitions).unwrap_or(0) + i32::from(!renewing),
        ),
        ..Default::default()
    }
}

/// One round on the Lease `name`: renews the lease this replica holds without reading it
/// (the fast path), or reads it and renews or takes it when it may (the slow path, counted in
/// `metrics` when the fast one failed). Returns whether this replica leads. Writes carry the
/// resourceVersion last seen, so of two replicas taking over only one wins.
pub async fn try_lead(
    api: &Api<Lease>,
    name: &str,
    identity: &str,
    observed: &mut Observed,
    clock: &Clock,
    metrics: &Metrics,
) -> Result<bool, kube::Error> {
    if let Some((mut lease, at)) = observed.held.take()
        && clock.instant().saturating_duration_since(at) < LEASE_DURATION
    {
        lease.spec = Some(spec(identity, clock.now(), lease.spec.as_ref()));
        match api.replace(name, &PostParams::default(), &lease).await {
            Ok(written) => {
                observed.wrote(written, clock.instant());
                return Ok(true);
            }
            Err(e) => {
                tracing::debug!(error = %e, "renewing the lease as last written failed, reading it");
                metrics.leader_election_slowpath.with(&[name]).inc();
            }
        }
    }
    let current = api.get_opt(name).await?;
    let spec_read = current.as_ref().and_then(|l| l.spec.as_ref());
    let unchanged_for = observed.unchanged_for(spec_read, clock.instant());
    match decide(spec_read, identity, unchanged_for) {
        Decision::Follow(_) => Ok(false),
        Decision::Renew | Decision::Acquire => {
            let spec = spec(identity, clock.now(), spec_read);
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    resource_version: current
                        .as_ref()
                        .and_then(|l| l.metadata.resource_version.clone()),
                    ..Default::default()
                },
                spec: Some(spec.clone()),
            };
            let written = match current {
                None => api.create(&PostParams::default(), &lease).await,
                Some(_) => api.replace(name, &PostParams::default(), &lease).await,
            };
            match written {
                Ok(written) => {
                    observed.wrote(written, clock.instant());
                    Ok(true)
                }
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(e) => Err(e),
            }
        }
    }
}

/// The Lease a replica campaigns for, and who it is.
#[derive(Clone, Debug)]
pub struct LeaseRef {
    /// The Lease's namespace.
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// This replica's identity, written as the holder.
    pub identity: String,
}

/// Campaigns until `shutdown`, publishing leadership on `leader`. A leader that cannot renew
/// within the lease duration steps down before anyone else may take over.
pub async fn run(
    client: Client,
    lease: LeaseRef,
    leader: watch::Sender<bool>,
    clock: Clock,
    metrics: std::sync::Arc<Metrics>,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let LeaseRef {
        namespace,
        name,
        identity,
    } = lease;
    let api: Api<Lease> = Api::namespaced(client, &namespace);
    let mut last_renewal = clock.instant();
    let mut observed = Observed::default();
    loop {
        match try_lead(&api, &name, &identity, &mut observed, &clock, &metrics).await {
            Ok(true) => {
                last_renewal = clock.instant();
                if !*leader.borrow() {
                    tracing::info!(%identity, "acquired the leader lease");
                }
                leader.send_replace(true);
            }
            Ok(false) => {
                leader.send_replace(false);
            }
            Err(e) => {
                tracing::warn!(error = %e, "leader election");
                if last_renewal.elapsed() >= LEASE_DURATION - RETRY_PERIOD {
                    leader.send_replace(false);
                }
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(RETRY_PERIOD) => {}
        }
    }
    if *leader.borrow() {
        // Hand over at once instead of making the standby wait out the lease.
        if let Ok(Some(mut lease)) = api.get_opt(&name).await
            && let Some(spec) = lease.spec.as_mut()
            && spec.holder_identity.as_deref() == Some(identity.as_str())
        {
            spec.holder_identity = None;
            let _ = api.replace(&name, &PostParams::default(), &lease).await;
        }
        leader.send_replace(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: &str, renewed: i64) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()).filter(|h: &String| !h.is_empty()),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(Timestamp::from_second(renewed).unwrap())),
            ..Default::default()
        }
    }

    #[test]
    fn decisions_go_by_how_long_the_record_stood_still_here() {
        let secs = Duration::from_secs;
        // The holder's renewTime is an hour in this replica's future or past: it does not
        // matter, only how long the record has been seen unchanged.
        for renewed in [-3_600, 0, 3_600] {
            assert_eq!(decide(None, "a", secs(0)), Decision::Acquire);
            assert_eq!(
                decide(Some(&lease("a", renewed)), "a", secs(99)),
                Decision::Renew
            );
            assert_eq!(
                decide(Some(&lease("b", renewed)), "a", secs(10)),
                Decision::Follow("b".into())
            );
            assert_eq!(
                decide(Some(&lease("b", renewed)), "a", secs(15)),
                Decision::Follow("b".into()),
                "exactly the duration"
            );
            assert_eq!(
                decide(Some(&lease("b", renewed)), "a", secs(16)),
                Decision::Acquire,
                "lapsed"
            );
            assert_eq!(
                decide(Some(&lease("", renewed)), "a", secs(0)),
                Decision::Acquire,
                "released"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_record_is_timed_from_when_it_was_seen_to_change() {
        let mut o = Observed::default();
        let t0 = Instant::now();
        let a = lease("b", 100);
        assert_eq!(o.unchanged_for(Some(&a), t0), Duration::ZERO, "first sight");
        assert_eq!(
            o.unchanged_for(Some(&a), t0 + Duration::from_secs(10)),
            Duration::from_secs(10)
        );
        // Renewed: the clock starts again.
        let renewed = lease("b", 102);
        let t1 = t0 + Duration::from_secs(12);
        assert_eq!(o.unchanged_for(Some(&renewed), t1), Duration::ZERO);
        assert_eq!(
            o.unchanged_for(Some(&renewed), t1 + Duration::from_secs(16)),
            Duration::from_secs(16)
        );
        // Deleted, then made again.
        assert_eq!(
            o.unchanged_for(None, t1 + Duration::from_secs(17)),
            Duration::ZERO
        );
    }

    #[test]
    fn transitions_count_takeovers_only() {
        let now = Timestamp::from_second(1_000).unwrap();
        let taken = spec("a", now, Some(&lease("b", 900)));
        assert_eq!(taken.lease_transitions, Some(1));
        let renewed = spec("a", now, Some(&taken));
        assert_eq!(renewed.lease_transitions, Some(1));
        assert_eq!(renewed.acquire_time, taken.acquire_time);
    }

    /// Against the fake API server: the holder renews by writing over its last write without
    /// reading; when someone else wrote the lease in between, that write fails, the slow path
    /// reads it, is counted, and renews.
    #[tokio::test]
    async fn a_holder_renews_without_reading_until_its_write_fails() {
        use karpenter_testkit::{FakeApiServer, Verb};

        let server = FakeApiServer::new();
        let api: Api<Lease> = Api::namespaced(server.client(), "kube-system");
        let clock = Clock::system();
        let metrics = Metrics::new();
        let mut observed = Observed::default();
        let lead = async |observed: &mut Observed| {
            try_lead(&api, LEASE_NAME, "a", observed, &clock, &metrics)
                .await
                .expect("the server answers")
        };
        assert!(lead(&mut observed).await, "takes the free lease");
        assert_eq!(server.count(Verb::Get, "leases"), 1);
        assert!(lead(&mut observed).await);
        assert!(lead(&mut observed).await);
        assert_eq!(
            server.count(Verb::Get, "leases"),
            1,
            "renewals write without reading"
        );
        assert_eq!(server.count(Verb::Update, "leases"), 2);
        assert!(metrics.leader_election_slowpath.is_empty());

        // Someone touches the lease: the write as last written is stale.
        server
            .merge::<Lease>(
                "kube-system",
                LEASE_NAME,
                serde_json::json!({"metadata": {"labels": {"touched": "yes"}}}),
            )
            .expect("the lease exists");
        assert!(lead(&mut observed).await, "still the holder, renewed");
        assert_eq!(
            server.count(Verb::Get, "leases"),
            2,
            "read on the slow path"
        );
        assert_eq!(
            metrics
                .leader_election_slowpath
                .get(&[LEASE_NAME])
                .map(|c| c.get()),
            Some(1)
        );
        assert!(lead(&mut observed).await);
        assert_eq!(server.count(Verb::Get, "leases"), 2, "fast again");
    }
}
