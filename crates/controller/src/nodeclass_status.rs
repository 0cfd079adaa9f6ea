//! The skeleton every provider's NodeClass status loop shares: follow the NodeClasses into an
//! index, reconcile each one when it changes and again when its reconcile asks (what the
//! NodeClass resolves to changes in the cloud, not in the API), and write the status it
//! computed only when it differs, guarded by the resourceVersion it was computed from.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Patch, PatchParams};
use kube::{Api, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::cloudprovider::CloudProvider;
use crate::state::{self, Index, Stored};
use crate::{Context, Error, queue};

/// Writes `next` as the status of the cluster-scoped `object` unless it equals `current`. The
/// patch carries the resourceVersion `object` was read at, so a status computed from an older
/// spec is refused (and recomputed) rather than written. A NodeClass deleted meanwhile is fine.
pub async fn write<K, S>(
    client: &kube::Client,
    object: &K,
    current: Option<&S>,
    next: &S,
) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = kube::core::ClusterResourceScope>
        + Clone
        + DeserializeOwned
        + Debug,
    S: Serialize + PartialEq,
{
    if current == Some(next) {
        return Ok(());
    }
    let meta = object.meta();
    let name = meta.name.clone().unwrap_or_default();
    let patch = serde_json::json!({
        "metadata": {"resourceVersion": meta.resource_version},
        "status": next,
    });
    let api: Api<K> = Api::all(client.clone());
    match api
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(Error::Kube(e)),
    }
}

/// Follows every `K` into `index` and reconciles each one while this replica leads: when it
/// changes, again after the duration `reconcile` returns, and after failures with per-object
/// backoff. Runs until `shutdown`.
pub async fn run<P, K, R, Fut>(
    ctx: Arc<Context<P>>,
    shutdown: CancellationToken,
    name: &'static str,
    index: Arc<Index<K>>,
    reconcile: R,
) where
    P: CloudProvider,
    K: Stored + Resource + Clone + DeserializeOwned + Serialize + Debug + Send + Sync + 'static,
    K::DynamicType: Default,
    R: Fn(Arc<Context<P>>, Arc<K>) -> Fut,
    Fut: Future<Output = Result<Option<Duration>, Error>>,
{
    // operatorpkg's status-condition metrics of the provider's NodeClass.
    let objects = index.clone();
    ctx.metrics
        .track_node_classes(&K::kind(&Default::default()), move || {
            objects
                .all()
                .iter()
                .filter_map(|o| serde_json::to_value(&**o).ok())
                .map(|v| crate::metrics::status::StatusObject::of_value(&v))
                .collect()
        });
    let watch = state::follow(Api::all(ctx.client.clone()), index.clone());
    queue::run_own(ctx, shutdown, name, index, reconcile).await;
    watch.abort();
}
