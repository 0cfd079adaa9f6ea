//! Capacity buffers (the `CapacityBuffer` gate), as upstream's `capacitybuffer` controller and
//! virtual-pod cache: every [`RESYNC`] (sooner, with backoff, after a failure) the loop lists
//! the CapacityBuffers and what they reference, writes each one's `ReadyForProvisioning`
//! status and keeps the virtual pods of the ready ones in [`BufferStore`]. Provisioning
//! schedules those with the real pending pods (never binding, nominating or reporting events
//! for them), then [`record_round`] writes each buffer's `Provisioning` condition and notes
//! which nodes hold buffer capacity; disruption reads both (the virtual pods are pending pods;
//! emptiness keeps the nodes). The decisions are `karpenter_core::provisioning::capacity_buffer`'s.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, PodTemplate};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use karpenter_api::capacitybuffer::{CapacityBuffer, CapacityBufferStatus};
use karpenter_core::provisioning::capacity_buffer::{
    Workloads, all_virtual_pods, buffer_pods_by_node, placements, provisioning_condition, resolve,
    resolved_status, with_condition,
};
use karpenter_core::provisioning::scheduling::Results;
use karpenter_core::state::pods::ObservedPod;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client};
use tokio_util::sync::CancellationToken;

use crate::cloudprovider::CloudProvider;
use crate::{Context, Error};

/// Upstream requeues every buffer this often even without a change.
pub const RESYNC: Duration = Duration::from_secs(30);
/// The first retry after a failed pass; doubled per failure up to [`RESYNC`].
const FIRST_RETRY: Duration = Duration::from_secs(1);

#[derive(Debug, Default)]
struct Held {
    buffers: Arc<Vec<CapacityBuffer>>,
    virtual_pods: Arc<Vec<Pod>>,
    by_node: BTreeMap<String, usize>,
    /// Whether a provisioning round has placed the virtual pods since this process started.
    noted: bool,
}

/// The buffers last listed, their virtual pods (upstream's virtual-pod cache) and how many a
/// provisioning round last placed on each node.
#[derive(Debug, Default)]
pub struct BufferStore(RwLock<Held>);

impl BufferStore {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Held> {
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Held> {
        self.0.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The virtual pods of the buffers ready for provisioning.
    pub fn virtual_pods(&self) -> Arc<Vec<Pod>> {
        self.read().virtual_pods.clone()
    }

    /// The buffers last listed, with the statuses last written.
    pub fn buffers(&self) -> Arc<Vec<CapacityBuffer>> {
        self.read().buffers.clone()
    }

    /// Replaces the buffers and their virtual pods.
    pub fn set(&self, buffers: Vec<CapacityBuffer>, virtual_pods: Vec<Pod>) {
        let mut held = self.write();
        held.buffers = Arc::new(buffers);
        held.virtual_pods = Arc::new(virtual_pods);
    }

    /// How many virtual pods the last provisioning round placed on each node; `None` until a
    /// round has placed them since this process started (disruption then takes every node to
    /// hold some).
    pub fn placed(&self) -> Option<BTreeMap<String, usize>> {
        let held = self.read();
        held.noted.then(|| held.by_node.clone())
    }
}

async fn list<K>(client: &Client) -> Result<Vec<K>, Error>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let api: Api<K> = Api::all(client.clone());
    Ok(api.list(&ListParams::default()).await?.items)
}

fn now_of<P>(ctx: &Context<P>) -> Time {
    Time(ctx.clock.now())
}

/// Writes `status` on `buffer` (a merge patch, guarded by its resourceVersion when `guarded`);
/// `None` when it was deleted or changed since listed (the next pass sees it as it is), else
/// its new resourceVersion.
async fn write_status(
    client: &Client,
    buffer: &CapacityBuffer,
    status: &CapacityBufferStatus,
    guarded: bool,
) -> Result<Option<Option<String>>, Error> {
    let api: Api<CapacityBuffer> = Api::namespaced(client.clone(), buffer.namespace());
    let mut patch = serde_json::json!({ "status": status });
    if guarded {
        patch["metadata"] =
            serde_json::json!({"resourceVersion": buffer.metadata.resource_version});
    }
    match api
        .patch_status(buffer.name(), &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(written) => Ok(Some(written.metadata.resource_version)),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(None),
        Err(e) => Err(Error::Kube(e)),
    }
}

/// One pass: list the buffers and what they reference, write the statuses that changed,
/// rebuild the virtual pods. Returns how many statuses were written.
pub async fn reconcile<P: CloudProvider>(ctx: &Context<P>) -> Result<usize, Error> {
    observe(ctx, true).await
}

/// [`reconcile`] without writing anything (`plan` against a live cluster): the virtual pods
/// follow the statuses the buffer controller would write.
pub async fn read<P: CloudProvider>(ctx: &Context<P>) -> Result<(), Error> {
    observe(ctx, false).await.map(|_| ())
}

async fn observe<P: CloudProvider>(ctx: &Context<P>, write: bool) -> Result<usize, Error> {
    let mut buffers: Vec<CapacityBuffer> = list(&ctx.client).await?;
    if buffers.is_empty() {
        ctx.buffers.set(Vec::new(), Vec::new());
        return Ok(0);
    }
    // Only the kinds some buffer references are listed.
    let wants = |kind: &str| {
        buffers
            .iter()
            .any(|b| b.spec.scalable_ref.as_ref().is_some_and(|r| r.kind == kind))
    };
    let templates: Vec<PodTemplate> = if buffers.iter().any(|b| b.spec.pod_template_ref.is_some()) {
        list(&ctx.client).await?
    } else {
        Vec::new()
    };
    let deployments: Vec<Deployment> = if wants("Deployment") {
        list(&ctx.client).await?
    } else {
        Vec::new()
    };
    let sets: Vec<StatefulSet> = if wants("StatefulSet") {
        list(&ctx.client).await?
    } else {
        Vec::new()
    };
    let replica_sets: Vec<ReplicaSet> = if wants("ReplicaSet") {
        list(&ctx.client).await?
    } else {
        Vec::new()
    };
    let workloads = Workloads {
        pod_templates: &templates,
        deployments: &deployments,
        stateful_sets: &sets,
        replica_sets: &replica_sets,
    };
    let now = now_of(ctx);
    let mut written = 0;
    for buffer in &mut buffers {
        let status = resolved_status(buffer, &resolve(buffer, &workloads), &now);
        if buffer.status.as_ref() == Some(&status) {
            continue;
        }
        if write
            && ctx.is_leader()
            && let Some(version) = write_status(&ctx.client, buffer, &status, true).await?
        {
            buffer.metadata.resource_version = version;
            written += 1;
        }
        // The virtual pods follow what was resolved now, written or not (as upstream's
        // cache is refreshed from the resolved spec).
        buffer.status = Some(status);
    }
    let virtual_pods = all_virtual_pods(&buffers, &workloads, &now);
    ctx.buffers.set(buffers, virtual_pods);
    Ok(written)
}

/// Notes which nodes a provisioning round over `batch` placed virtual pods on (disruption
/// keeps them), writing nothing.
pub fn note_round<P, T: ObservedPod>(ctx: &Context<P>, results: &Results, batch: &[T]) {
    let mut held = ctx.buffers.write();
    held.by_node = buffer_pods_by_node(results, batch);
    held.noted = true;
}

/// After a provisioning round over `batch`: each buffer's `Provisioning` condition, and the
/// nodes that hold buffer capacity.
pub async fn record_round<P: CloudProvider, T: ObservedPod>(
    ctx: &Context<P>,
    results: &Results,
    batch: &[T],
) {
    note_round(ctx, results, batch);
    let placed = placements(results, batch);
    let now = now_of(ctx);
    let mut buffers = (*ctx.buffers.buffers()).clone();
    let mut changed = false;
    for buffer in &mut buffers {
        let Some(c) = provisioning_condition(buffer, placed.get(&buffer.key()), &now) else {
            continue;
        };
        let Some(status) = with_condition(buffer, c) else {
            continue;
        };
        // Unguarded: the buffer controller may have written ReadyForProvisioning since the
        // list, and the conditions sent carry it.
        match write_status(&ctx.client, buffer, &status, false).await {
            Ok(Some(version)) => buffer.metadata.resource_version = version,
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(capacitybuffer = %buffer.key(), error = %e, "writing Provisioning")
            }
        }
        buffer.status = Some(status);
        changed = true;
    }
    if changed {
        ctx.buffers.write().buffers = Arc::new(buffers);
    }
}

/// Reconciles the buffers every [`RESYNC`] (retrying failures sooner, backing off) until
/// `shutdown`; does nothing while the `CapacityBuffer` gate is off.
pub async fn run<P: CloudProvider>(ctx: Arc<Context<P>>, shutdown: CancellationToken) {
    if !ctx.options.feature_gates.capacity_buffer {
        shutdown.cancelled().await;
        return;
    }
    let lm = ctx.metrics.runtime.controller("capacitybuffer", 1);
    let mut retry = FIRST_RETRY;
    loop {
        let started = tokio::time::Instant::now();
        let result = reconcile(&ctx).await;
        lm.singleton_pass(started.elapsed());
        ctx.metrics.reconciled("capacitybuffer", result.is_ok());
        let wait = match result {
            Ok(_) => {
                retry = FIRST_RETRY;
                RESYNC
            }
            Err(e) => {
                tracing::warn!(error = %e, "capacitybuffer");
                let wait = retry;
                retry = (retry * 2).min(RESYNC);
                wait
            }
        };
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
    }
}
