//! The interruption loop: long-polls the queue while this replica leads, deletes the
//! NodeClaims of instances AWS is about to take (the core's termination then taints, drains
//! and replaces them), marks interrupted spot offerings and reclaimed capacity reservations
//! unavailable, and deletes each message once handled.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use karpenter_api::NodeClaim;
use karpenter_api::labels::{INSTANCE_TYPE_LABEL, ZONE_LABEL};
use karpenter_controller::{Context, events, metrics};
use kube::Api;
use kube::api::DeleteParams;
use tokio_util::sync::CancellationToken;

use crate::instancetype::LABEL_CAPACITY_RESERVATION_ID;
use crate::interruption::{self, Action, Kind};
use crate::provider::{AwsApi, AwsCloudProvider, NodeClassStore};
use crate::sqs::{Queue, QueueMessage};

type Ctx<A, S> = Arc<Context<AwsCloudProvider<A, S>>>;

/// Runs until `shutdown`.
pub async fn run<A, S, Q>(ctx: Ctx<A, S>, queue: Q, shutdown: CancellationToken)
where
    A: AwsApi,
    S: NodeClassStore,
    Q: Queue,
{
    loop {
        if !ctx.is_leader() {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(1)) => continue,
                _ = shutdown.cancelled() => return,
            }
        }
        let received = tokio::select! {
            r = queue.receive() => r,
            _ = shutdown.cancelled() => return,
        };
        match received {
            Ok(messages) => {
                for m in messages {
                    handle(&ctx, &queue, m).await;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "receiving interruption messages");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(5)) => {}
                    _ = shutdown.cancelled() => return,
                }
            }
        }
    }
}

async fn handle<A, S, Q>(ctx: &Ctx<A, S>, queue: &Q, m: QueueMessage)
where
    A: AwsApi,
    S: NodeClassStore,
    Q: Queue,
{
    let message = match interruption::parse(&m.body) {
        Ok(message) => message,
        Err(e) => {
            // A message that can never be read would come back forever: drop it.
            tracing::warn!(error = %e, "dropping unreadable interruption message");
            delete(ctx, queue, m.receipt_handle).await;
            return;
        }
    };
    ctx.metrics
        .interruption_received_messages
        .get_or_create(&metrics::labels(&[(
            "message_type",
            message.kind.metric_label(),
        )]))
        .inc();
    if let Some(sent) = m.sent_timestamp_ms {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        ctx.metrics
            .interruption_message_queue_duration
            .observe(now.saturating_sub(sent) as f64 / 1000.0);
    }
    let claims: Vec<Arc<NodeClaim>> = ctx.cluster.node_claims.all();
    let pools = ctx.cluster.node_pools.all();
    let decided = interruption::decide(&message, claims.iter().map(|c| &**c), |name| {
        pools
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
            .map(|p| &**p)
    });
    for (claim, action) in decided {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let text = format!(
            "{} for instance {}",
            message.kind.reason(),
            message.instance_ids.join(", ")
        );
        ctx.recorder
            .publish(claim, events::warning(message.kind.reason(), text.clone()))
            .await;
        if action != Action::Replace {
            continue;
        }
        if message.kind == Kind::SpotInterruption {
            let labels = claim.metadata.labels.clone().unwrap_or_default();
            if let (Some(t), Some(z)) = (labels.get(INSTANCE_TYPE_LABEL), labels.get(ZONE_LABEL)) {
                ctx.provider
                    .unavailable()
                    .mark(t, z, "spot", Instant::now());
            }
        }
        // The reservation is being reclaimed: launching the replacement into it would fail.
        if message.kind == Kind::CapacityReservationInterruption
            && let Some(reservation) = claim
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_CAPACITY_RESERVATION_ID))
        {
            ctx.provider.mark_reservation_unavailable(reservation).await;
        }
        let api: Api<NodeClaim> = Api::all(ctx.client.clone());
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {
                tracing::info!(nodeclaim = %name, reason = message.kind.reason(), "replacing interrupted nodeclaim")
            }
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => {
                // Leave the message: it comes back after its visibility timeout.
                tracing::warn!(nodeclaim = %name, error = %e, "deleting interrupted nodeclaim");
                return;
            }
        }
    }
    delete(ctx, queue, m.receipt_handle).await;
}

async fn delete<A, S, Q: Queue>(ctx: &Ctx<A, S>, queue: &Q, receipt_handle: String) {
    match queue.delete(receipt_handle).await {
        Ok(()) => {
            ctx.metrics.interruption_deleted_messages.inc();
        }
        Err(e) => tracing::warn!(error = %e, "deleting interruption message"),
    }
}
