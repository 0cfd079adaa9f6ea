//! Capacity blocks end at a fixed time, and EC2 starts reclaiming their instances 30 minutes
//! before. As upstream does, the NodeClaims of nodes in a capacity block that is `expiring`
//! (within 40 minutes of its end) are deleted ahead of that, so their nodes are drained and
//! replaced on the provider's terms rather than EC2's: [`expiring_claims`] decides, [`run`]
//! asks EC2 every [`INTERVAL`] while this replica leads.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use karpenter_api::NodeClaim;
use karpenter_controller::Context;
use kube::Api;
use kube::api::DeleteParams;
use tokio_util::sync::CancellationToken;

use crate::ec2::{CapacityReservationInfo, Filter};
use crate::instancetype::LABEL_CAPACITY_RESERVATION_ID;
use crate::nodeclass_status::reservation_state;
use crate::provider::{AwsApi, AwsCloudProvider, NodeClassStore};

/// How often reservations are looked at.
pub const INTERVAL: Duration = Duration::from_secs(60);

fn reservation_of(claim: &NodeClaim) -> Option<&str> {
    claim
        .metadata
        .labels
        .as_ref()?
        .get(LABEL_CAPACITY_RESERVATION_ID)
        .map(String::as_str)
}

/// The reservations the claims run in, to ask EC2 about.
pub fn reservation_ids<'a>(claims: impl IntoIterator<Item = &'a NodeClaim>) -> BTreeSet<String> {
    claims
        .into_iter()
        .filter_map(reservation_of)
        .map(str::to_string)
        .collect()
}

/// The claims, not already being deleted, whose reservation is an expiring capacity block.
pub fn expiring_claims<'a>(
    claims: impl IntoIterator<Item = &'a NodeClaim>,
    reservations: &[CapacityReservationInfo],
    now: Timestamp,
) -> Vec<&'a NodeClaim> {
    let expiring: BTreeSet<&str> = reservations
        .iter()
        .filter(|r| {
            let end = r
                .end_date
                .as_deref()
                .and_then(|d| d.parse::<Timestamp>().ok());
            reservation_state(&r.reservation_type, end, now) == "expiring"
        })
        .map(|r| r.id.as_str())
        .collect();
    claims
        .into_iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .filter(|c| reservation_of(c).is_some_and(|id| expiring.contains(id)))
        .collect()
}

/// One look: the reservations of the current claims from EC2, and the claims of expiring
/// capacity blocks deleted.
async fn reconcile<A, S>(ctx: &Context<AwsCloudProvider<A, S>>) -> Result<(), String>
where
    A: AwsApi,
    S: NodeClassStore,
{
    let claims = ctx.cluster.node_claims.all();
    let ids: Vec<String> = reservation_ids(claims.iter().map(|c| &**c))
        .into_iter()
        .collect();
    if ids.is_empty() {
        return Ok(());
    }
    // One id a call, as upstream asks: EC2 fails a call naming a reservation that no longer
    // exists, which must not hide the others.
    let mut reservations = Vec::new();
    for id in ids {
        match ctx
            .provider
            .api()
            .describe_capacity_reservations(vec![id], vec![Filter::new("state", &["active"])])
            .await
        {
            Ok(found) => reservations.extend(found),
            Err(e) if crate::ec2::is_reservation_not_found(&e) => {}
            Err(e) => return Err(format!("describing capacity reservations: {e}")),
        }
    }
    let api: Api<NodeClaim> = Api::all(ctx.client.clone());
    for claim in expiring_claims(claims.iter().map(|c| &**c), &reservations, ctx.clock.now()) {
        let name = claim.metadata.name.clone().unwrap_or_default();
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => tracing::info!(
                nodeclaim = %name,
                capacity_reservation_id = reservation_of(claim).unwrap_or_default(),
                "initiating delete for capacity block expiration"
            ),
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(format!("deleting nodeclaim {name}: {e}")),
        }
    }
    Ok(())
}

/// Runs until `shutdown`, looking every [`INTERVAL`] while this replica leads.
pub async fn run<A, S>(ctx: Arc<Context<AwsCloudProvider<A, S>>>, shutdown: CancellationToken)
where
    A: AwsApi,
    S: NodeClassStore,
{
    loop {
        let wait = if ctx.is_leader() && ctx.cluster.node_claims.synced() {
            if let Err(e) = reconcile(&ctx).await {
                tracing::warn!(error = %e, "capacity block expiration");
            }
            INTERVAL
        } else {
            ctx.options.resync
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shutdown.cancelled() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(name: &str, reservation: Option<&str>) -> NodeClaim {
        let mut c = NodeClaim::default();
        c.metadata.name = Some(name.into());
        c.metadata.labels = reservation
            .map(|r| [(LABEL_CAPACITY_RESERVATION_ID.to_string(), r.to_string())].into());
        c
    }

    fn reservation(id: &str, kind: &str, end: &str) -> CapacityReservationInfo {
        CapacityReservationInfo {
            id: id.into(),
            reservation_type: kind.into(),
            end_date: Some(end.into()),
            ..Default::default()
        }
    }

    #[test]
    fn only_claims_in_expiring_capacity_blocks_go() {
        let now: Timestamp = "2026-11-25T11:30:00Z".parse().unwrap();
        let claims = [
            claim("in-expiring-block", Some("cr-block")),
            claim("in-later-block", Some("cr-later")),
            claim("in-default", Some("cr-default")),
            claim("on-demand", None),
        ];
        let reservations = [
            reservation("cr-block", "capacity-block", "2026-11-25T12:00:00Z"),
            reservation("cr-later", "capacity-block", "2026-11-25T13:00:00Z"),
            reservation("cr-default", "default", "2026-11-25T12:00:00Z"),
        ];
        let names: Vec<_> = expiring_claims(&claims, &reservations, now)
            .into_iter()
            .map(|c| c.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["in-expiring-block"]);
        assert_eq!(
            reservation_ids(&claims),
            ["cr-block", "cr-default", "cr-later"]
                .map(String::from)
                .into()
        );
        // A claim already going is not deleted again.
        let mut going = claim("going", Some("cr-block"));
        going.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now));
        assert!(expiring_claims([&going], &reservations, now).is_empty());
    }
}
