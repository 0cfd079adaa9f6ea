//! A cloud kept in memory, for tests of the code that drives a [`CloudProvider`] (upstream's
//! `cloudprovider/fake`): launches take the cheapest offering a NodeClaim allows, as KWOK's do,
//! instances are remembered until deleted, and a test can make launches fail, mark instances
//! drifted, leak an instance, or make one vanish. It creates no Nodes: the test plays the
//! kubelet and registers them when it wants to.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karpenter_api::crd::Crd;
use karpenter_api::{NodeClaim, NodeClaimStatus, NodeClassReference, NodePool};
use karpenter_core::instancetype::{InstanceType, cheapest_launch, fake, launch_labels};

use crate::{CloudProvider, CloudProviderError, NodeClassReadiness, RepairPolicy, Result};

/// The providerID scheme of fake instances.
pub const PROVIDER_ID_PREFIX: &str = "fake://";

/// An in-memory cloud; share it through an `Arc`.
pub struct FakeCloudProvider {
    instance_types: Vec<Arc<InstanceType>>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    launched: u64,
    /// Live instances by providerID, as NodeClaims named after the claim they were made for.
    instances: BTreeMap<String, NodeClaim>,
    /// Errors the next launches return, in order.
    create_errors: VecDeque<CloudProviderError>,
    /// Drift reasons by providerID.
    drifted: BTreeMap<String, String>,
    /// Every launch and termination, in order.
    created: Vec<String>,
    deleted: Vec<String>,
    readiness: Option<NodeClassReadiness>,
    repair_policies: Vec<RepairPolicy>,
}

impl Default for FakeCloudProvider {
    fn default() -> Self {
        Self::new(
            fake::default_instance_types()
                .into_iter()
                .map(Arc::new)
                .collect(),
        )
    }
}

impl FakeCloudProvider {
    /// A cloud offering these instance types.
    pub fn new(instance_types: Vec<Arc<InstanceType>>) -> Self {
        Self {
            instance_types,
            state: Mutex::default(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A test that panicked holding the lock has failed already.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The instance types with each capacity reservation's room less the live instances in it
    /// (unavailable when none is left), as upstream's fake counts launches down.
    fn with_reservations_counted(&self) -> Vec<Arc<InstanceType>> {
        let state = self.state();
        let in_use = |label: &str, id: &str| {
            state
                .instances
                .values()
                .filter(|i| {
                    i.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(label))
                        .is_some_and(|v| v == id)
                })
                .count() as u32
        };
        self.instance_types
            .iter()
            .map(|it| {
                if !it.offerings.iter().any(|o| o.reserved().is_some()) {
                    return it.clone();
                }
                let mut it = (**it).clone();
                for o in &mut it.offerings {
                    if let Some(r) = o.reservation.as_mut() {
                        r.capacity = r.capacity.saturating_sub(in_use(&r.label, &r.id));
                        o.available &= r.capacity > 0;
                    }
                }
                Arc::new(it)
            })
            .collect()
    }

    /// Makes the next launch fail with `error` (queued: one error per launch).
    pub fn fail_next_create(&self, error: CloudProviderError) {
        self.state().create_errors.push_back(error);
    }

    /// Makes [`CloudProvider::is_drifted`] answer `reason` for this instance.
    pub fn set_drifted(&self, provider_id: &str, reason: &str) {
        self.state()
            .drifted
            .insert(provider_id.into(), reason.into());
    }

    /// What [`CloudProvider::node_class_readiness`] answers (default: ready).
    pub fn set_node_class_readiness(&self, readiness: NodeClassReadiness) {
        self.state().readiness = Some(readiness);
    }

    /// What [`CloudProvider::repair_policies`] answers (default: none).
    pub fn set_repair_policies(&self, policies: Vec<RepairPolicy>) {
        self.state().repair_policies = policies;
    }

    /// Adds an instance no NodeClaim asked for (one a crash leaked); returns its providerID.
    pub fn leak_instance(&self, name: &str) -> String {
        let mut state = self.state();
        state.launched += 1;
        let provider_id = format!("{PROVIDER_ID_PREFIX}leaked/{}", state.launched);
        let instance = NodeClaim {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Default::default(),
            status: Some(NodeClaimStatus {
                provider_id: Some(provider_id.clone()),
                ..Default::default()
            }),
        };
        state.instances.insert(provider_id.clone(), instance);
        provider_id
    }

    /// Removes an instance behind the controller's back (the cloud lost it).
    pub fn vanish(&self, provider_id: &str) {
        self.state().instances.remove(provider_id);
    }

    /// The live instances, as NodeClaims with providerID, capacity, allocatable and labels.
    pub fn instances(&self) -> Vec<NodeClaim> {
        self.state().instances.values().cloned().collect()
    }

    /// The providerIDs launched so far, in order.
    pub fn created(&self) -> Vec<String> {
        self.state().created.clone()
    }

    /// The providerIDs terminated so far, in order.
    pub fn deleted(&self) -> Vec<String> {
        self.state().deleted.clone()
    }
}

fn name_of(claim: &NodeClaim) -> &str {
    claim.metadata.name.as_deref().unwrap_or_default()
}

impl CloudProvider for FakeCloudProvider {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn node_classes(&self) -> &'static [Crd] {
        &[]
    }

    fn supports(&self, _: &NodeClassReference) -> bool {
        true
    }

    fn manages_node(&self, _: &k8s_openapi::api::core::v1::Node) -> bool {
        true
    }

    async fn node_class_readiness(&self, _: &NodeClassReference) -> Result<NodeClassReadiness> {
        Ok(self
            .state()
            .readiness
            .clone()
            .unwrap_or(NodeClassReadiness::Ready))
    }

    async fn create(&self, claim: &NodeClaim) -> Result<NodeClaim> {
        // Reservations as the scheduler saw them: what is left of each.
        let types = self.with_reservations_counted();
        let mut state = self.state();
        // A second call for the same claim finds the first instance, as the trait requires.
        if let Some(existing) = state
            .instances
            .values()
            .find(|i| name_of(i) == name_of(claim))
        {
            return Ok(existing.clone());
        }
        if let Some(error) = state.create_errors.pop_front() {
            return Err(error);
        }
        let (it, offering) = cheapest_launch(&types, claim).ok_or_else(|| {
            CloudProviderError::insufficient_capacity(
                "no instance type satisfies the requirements and requests",
            )
        })?;
        state.launched += 1;
        let provider_id = format!("{PROVIDER_ID_PREFIX}{}/{}", offering.zone, state.launched);
        let labels = launch_labels(claim, it, offering, &fake::PROVIDER_LABELS);
        let instance = NodeClaim {
            metadata: ObjectMeta {
                name: claim.metadata.name.clone(),
                labels: Some(labels),
                ..Default::default()
            },
            spec: claim.spec.clone(),
            status: Some(NodeClaimStatus {
                provider_id: Some(provider_id.clone()),
                capacity: it.capacity.to_list(),
                allocatable: it.allocatable().to_list(),
                ..Default::default()
            }),
        };
        state
            .instances
            .insert(provider_id.clone(), instance.clone());
        state.created.push(provider_id);
        Ok(instance)
    }

    async fn delete(&self, claim: &NodeClaim) -> Result<()> {
        let provider_id = claim
            .status
            .as_ref()
            .and_then(|s| s.provider_id.clone())
            .unwrap_or_default();
        let mut state = self.state();
        match state.instances.remove(&provider_id) {
            Some(_) => {
                state.deleted.push(provider_id);
                Ok(())
            }
            None => Err(CloudProviderError::not_found(format!(
                "no instance {provider_id:?}"
            ))),
        }
    }

    async fn get(&self, provider_id: &str) -> Result<NodeClaim> {
        self.state()
            .instances
            .get(provider_id)
            .cloned()
            .ok_or_else(|| CloudProviderError::not_found(format!("no instance {provider_id:?}")))
    }

    async fn list(&self) -> Result<Vec<NodeClaim>> {
        Ok(self.instances())
    }

    async fn is_drifted(&self, claim: &NodeClaim) -> Result<Option<String>> {
        let provider_id = claim.status.as_ref().and_then(|s| s.provider_id.as_deref());
        Ok(provider_id.and_then(|id| self.state().drifted.get(id).cloned()))
    }

    async fn instance_types(&self, _: &NodePool) -> Result<Vec<Arc<InstanceType>>> {
        Ok(self.with_reservations_counted())
    }

    fn provider_labels(&self) -> Vec<String> {
        fake::provider_labels()
    }

    fn repair_policies(&self) -> Vec<RepairPolicy> {
        self.state().repair_policies.clone()
    }
}
