//! Leader election on a `coordination.k8s.io/v1` Lease named `karpenter-leader-election`, as
//! client-go's leader election does it: the holder renews, the others take over once it has
//! not renewed for the lease duration. Every replica keeps its state warm; only the leader
//! acts.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::sync::watch;

use crate::Clock;

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

/// Decides from the lease as read at `now`.
pub fn decide(spec: Option<&LeaseSpec>, identity: &str, now: Timestamp) -> Decision {
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
        .map_or(LEASE_DURATION.as_secs() as i64, i64::from);
    let renewed = spec
        .renew_time
        .as_ref()
        .or(spec.acquire_time.as_ref())
        .map(|t| t.0);
    match renewed {
        Some(t) if now.as_second() - t.as_second() <= duration => Decision::Follow(holder.into()),
        _ => Decision::Acquire,
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

/// One round: reads the lease and renews or takes it when it may. Returns whether this replica
/// leads. Writes carry the resourceVersion read, so of two replicas taking over only one wins.
pub async fn try_lead(
    api: &Api<Lease>,
    identity: &str,
    clock: &Clock,
) -> Result<bool, kube::Error> {
    let now = clock.now();
    let current = api.get_opt(LEASE_NAME).await?;
    let spec_read = current.as_ref().and_then(|l| l.spec.as_ref());
    match decide(spec_read, identity, now) {
        Decision::Follow(_) => Ok(false),
        Decision::Renew | Decision::Acquire => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(LEASE_NAME.into()),
                    resource_version: current
                        .as_ref()
                        .and_then(|l| l.metadata.resource_version.clone()),
                    ..Default::default()
                },
                spec: Some(spec(identity, now, spec_read)),
            };
            let written = match current {
                None => api.create(&PostParams::default(), &lease).await,
                Some(_) => {
                    api.replace(LEASE_NAME, &PostParams::default(), &lease)
                        .await
                }
            };
            match written {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(e) => Err(e),
            }
        }
    }
}

/// Campaigns until `shutdown`, publishing leadership on `leader`. A leader that cannot renew
/// within the lease duration steps down before anyone else may take over.
pub async fn run(
    client: Client,
    namespace: String,
    identity: String,
    leader: watch::Sender<bool>,
    clock: Clock,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let api: Api<Lease> = Api::namespaced(client, &namespace);
    let mut last_renewal = clock.instant();
    loop {
        match try_lead(&api, &identity, &clock).await {
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
        if let Ok(Some(mut lease)) = api.get_opt(LEASE_NAME).await
            && let Some(spec) = lease.spec.as_mut()
            && spec.holder_identity.as_deref() == Some(identity.as_str())
        {
            spec.holder_identity = None;
            let _ = api
                .replace(LEASE_NAME, &PostParams::default(), &lease)
                .await;
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
    fn decisions() {
        let now = Timestamp::from_second(1_000).unwrap();
        assert_eq!(decide(None, "a", now), Decision::Acquire);
        assert_eq!(decide(Some(&lease("a", 990)), "a", now), Decision::Renew);
        assert_eq!(
            decide(Some(&lease("b", 990)), "a", now),
            Decision::Follow("b".into())
        );
        assert_eq!(
            decide(Some(&lease("b", 985)), "a", now),
            Decision::Follow("b".into()),
            "exactly the duration"
        );
        assert_eq!(
            decide(Some(&lease("b", 984)), "a", now),
            Decision::Acquire,
            "lapsed"
        );
        assert_eq!(
            decide(Some(&lease("", 999)), "a", now),
            Decision::Acquire,
            "released"
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
}
