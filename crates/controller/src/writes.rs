//! Writes the loops share: each merge-patches or deletes through the API server and records
//! what came back in cluster state, so the next pass decides from the write and not from a
//! watch event still on its way. A 404 on delete means the work is already done.

use k8s_openapi::api::core::v1::Node;
use karpenter_api::labels::TERMINATION_FINALIZER;
use karpenter_api::{NodeClaim, NodePool};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Resource};
use serde_json::{Value, json};

use crate::cloudprovider::CloudProvider;
use crate::{Context, Error};

fn merge(patch: Value) -> Patch<Value> {
    Patch::Merge(patch)
}

/// `Ok` when the object is already gone.
fn allow_missing<T>(result: Result<T, kube::Error>) -> Result<(), Error> {
    allow_missing_write(result.map(|_| ()).map_err(Error::from))
}

/// `Ok` when a write found the object gone.
pub fn allow_missing_write(result: Result<(), Error>) -> Result<(), Error> {
    match result {
        Err(Error::Kube(kube::Error::Api(e))) if e.code == 404 => Ok(()),
        other => other,
    }
}

/// A merge patch dropping `karpenter.sh/termination` from an object's finalizers, valid only
/// against the version read (another controller may have changed them since).
pub fn without_finalizer<K: Resource>(obj: &K) -> Value {
    let finalizers: Vec<&String> = obj
        .meta()
        .finalizers
        .iter()
        .flatten()
        .filter(|f| *f != TERMINATION_FINALIZER)
        .collect();
    json!({"metadata": {"finalizers": finalizers, "resourceVersion": obj.meta().resource_version}})
}

impl<P: CloudProvider> Context<P> {
    fn claims(&self) -> Api<NodeClaim> {
        Api::all(self.client.clone())
    }

    fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    /// Merge-patches a NodeClaim (metadata and spec).
    pub(crate) async fn patch_claim(&self, name: &str, patch: Value) -> Result<(), Error> {
        let updated = self
            .claims()
            .patch(name, &PatchParams::default(), &merge(patch))
            .await?;
        self.cluster.node_claims.apply(updated);
        Ok(())
    }

    /// Merge-patches a NodeClaim's status.
    pub(crate) async fn patch_claim_status(&self, name: &str, patch: Value) -> Result<(), Error> {
        let updated = self
            .claims()
            .patch_status(name, &PatchParams::default(), &merge(patch))
            .await?;
        self.cluster.node_claims.apply(updated);
        Ok(())
    }

    /// Deletes a NodeClaim (its finalizer keeps it until the instance is gone). State takes
    /// the answer at once, so the next decision sees the claim deleting rather than waiting
    /// for the watch (a disruption pass could take its node again).
    pub(crate) async fn delete_claim(
        &self,
        name: &str,
        params: &DeleteParams,
    ) -> Result<(), Error> {
        let deleted = self.claims().delete(name, params).await;
        if let Some(claim) = deleted.as_ref().ok().and_then(|d| d.as_ref().left()) {
            self.cluster.node_claims.apply(claim.clone());
        }
        allow_missing(deleted)
    }

    /// Merge-patches a NodePool's metadata.
    pub(crate) async fn patch_node_pool(&self, name: &str, patch: Value) -> Result<(), Error> {
        let updated = Api::<NodePool>::all(self.client.clone())
            .patch(name, &PatchParams::default(), &merge(patch))
            .await?;
        self.cluster.node_pools.apply(updated);
        Ok(())
    }

    /// Merge-patches a Node.
    pub(crate) async fn patch_node(&self, name: &str, patch: Value) -> Result<(), Error> {
        let updated = self
            .nodes()
            .patch(name, &PatchParams::default(), &merge(patch))
            .await?;
        self.cluster.nodes.apply(updated);
        Ok(())
    }

    /// Deletes a Node (its finalizer keeps it until it is drained).
    pub(crate) async fn delete_node(&self, name: &str) -> Result<(), Error> {
        allow_missing(self.nodes().delete(name, &DeleteParams::default()).await)
    }
}
