//! The Cluster API provider: the controller's [`CloudProvider`] over a management cluster's
//! MachineDeployments, as kubernetes-sigs/karpenter-provider-cluster-api runs it.
//!
//! - Instance types are the NodeClass's MachineDeployments ([`instancetype`]), listed at most
//!   every [`ProviderOptions::machine_deployments_ttl`] and again after each scaling.
//! - A launch takes the cheapest compatible available MachineDeployment, scales it up through
//!   its `scale` subresource by what the launches waiting on it lack ([`claim`]), claims one
//!   of its unclaimed Machines with a resourceVersion-checked write, and returns once the
//!   infrastructure provider has set the Machine's providerID (else it fails, to be retried:
//!   the retry finds the Machine the NodeClaim already claimed). A MachineDeployment at its
//!   max size passes to the next; when none is left the launch has no capacity.
//! - A deletion marks the Machine `cluster.x-k8s.io/delete-machine`, then scales its
//!   MachineDeployment down by one; the mark is taken back when the scaling fails. A Machine
//!   already leaving is not counted twice, and one that is gone is `NotFound`.
//! - Get and list read Machines; list returns the claimed ones, so garbage collection deletes a
//!   Machine whose NodeClaim is gone.
//! - Drift compares the hash of the template the NodeClaim's Machine was made from (its
//!   MachineSet's, stored at launch) with its MachineDeployment's current one.
//!
//! Within one process the scaling decisions on one MachineDeployment are taken one at a time;
//! between processes (or with the Cluster Autoscaler, or a person) the resourceVersions keep
//! them from overwriting each other.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use karpenter_api::crd::Crd;
use karpenter_api::{NodeClaim, NodeClassReference, NodePool};
use karpenter_cloudprovider::{
    CloudProvider, CloudProviderError, InstanceType, NodeClassReadiness, Result,
};
use karpenter_controller::nodeclasses::NodeClasses;
use kube::ResourceExt;

use crate::capi::{
    DRIFT_REASON, MACHINE_ANNOTATION, MEMBER_LABEL, Machine, MachineDeployment,
    TEMPLATE_HASH_ANNOTATION, TEMPLATE_HASH_VERSION, TEMPLATE_HASH_VERSION_ANNOTATION,
    parse_machine_annotation, template_hash,
};
use crate::claim::{self, Deletion};
use crate::instancetype::{self, Offer, Resolved};
use crate::management::{Management, ManagementError};
use crate::nodeclass::ClusterAPINodeClass;

/// Where the provider reads ClusterAPINodeClasses: the API server (`kube::Api`) in the
/// controller, a map by name in tests.
pub trait NodeClassSource: NodeClasses<ClusterAPINodeClass> {}

impl<T: NodeClasses<ClusterAPINodeClass>> NodeClassSource for T {}

/// The API server, as the controller reads it.
pub type KubeState = kube::Api<ClusterAPINodeClass>;

/// How the provider behaves.
#[derive(Clone, Debug)]
pub struct ProviderOptions {
    /// How instance types are made.
    pub instance_types: instancetype::Options,
    /// How long a launch waits for a Machine to claim after scaling up (upstream: 30s).
    pub claim_wait: Duration,
    /// How long a launch waits for its Machine's providerID before failing to be retried.
    pub provider_id_wait: Duration,
    /// How often Machines are looked at while waiting.
    pub poll: Duration,
    /// How long a listing of MachineDeployments is reused.
    pub machine_deployments_ttl: Duration,
}

impl Default for ProviderOptions {
    fn default() -> Self {
        Self {
            instance_types: Default::default(),
            claim_wait: Duration::from_secs(30),
            provider_id_wait: Duration::from_secs(10),
            poll: Duration::from_secs(1),
            machine_deployments_ttl: Duration::from_secs(10),
        }
    }
}

/// Launches under way on one MachineDeployment in this process.
#[derive(Default)]
struct Scaling {
    /// Held while deciding how far to scale (and while scaling down).
    lock: tokio::sync::Mutex<()>,
    /// Launches that scaled (or found a Machine) and wait to claim one.
    waiting: AtomicUsize,
}

/// A launch's place among those waiting; given back when dropped.
struct Waiting(Arc<Scaling>);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Why a launch could not use a MachineDeployment.
enum LaunchError {
    /// It is at its max size: try another.
    Full(String),
    /// Anything else.
    Failed(CloudProviderError),
}

impl From<ManagementError> for LaunchError {
    fn from(e: ManagementError) -> Self {
        Self::Failed(CloudProviderError::other(e))
    }
}

/// The Cluster API provider.
pub struct ClusterApiCloudProvider<S> {
    management: Management,
    classes: S,
    options: ProviderOptions,
    listed: Mutex<Option<(Instant, Arc<Vec<MachineDeployment>>)>>,
    scaling: Mutex<HashMap<String, Arc<Scaling>>>,
}

fn other(e: ManagementError) -> CloudProviderError {
    CloudProviderError::other(e)
}

/// How many times a write that lost to another is tried again with a fresh read.
const CONFLICT_RETRIES: usize = 5;

impl<S: NodeClassSource> ClusterApiCloudProvider<S> {
    /// A provider acting on `management`, reading NodeClasses from `classes`.
    pub fn new(management: Management, classes: S, options: ProviderOptions) -> Self {
        Self {
            management,
            classes,
            options,
            listed: Mutex::default(),
            scaling: Mutex::default(),
        }
    }

    /// The settings it runs with.
    pub fn options(&self) -> &ProviderOptions {
        &self.options
    }

    /// The management cluster.
    pub fn management(&self) -> &Management {
        &self.management
    }

    /// The member MachineDeployments, listed now (and remembered).
    pub async fn machine_deployments_now(
        &self,
    ) -> std::result::Result<Arc<Vec<MachineDeployment>>, ManagementError> {
        let listed = Arc::new(self.management.machine_deployments().await?);
        *self.listed.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((Instant::now(), listed.clone()));
        Ok(listed)
    }

    /// The member MachineDeployments, as listed less than the TTL ago or now. A failed listing
    /// falls back on the last one.
    async fn machine_deployments(&self) -> Result<Arc<Vec<MachineDeployment>>> {
        let last = self
            .listed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some((at, listed)) = &last
            && at.elapsed() < self.options.machine_deployments_ttl
        {
            return Ok(listed.clone());
        }
        match self.machine_deployments_now().await {
            Ok(listed) => Ok(listed),
            Err(e) => match last {
                Some((_, listed)) => {
                    tracing::warn!(error = %e, "listing MachineDeployments; using the last listing");
                    Ok(listed)
                }
                None => Err(other(e)),
            },
        }
    }

    /// Forgets the listing, so the next one shows a scaling just done.
    fn forget_listing(&self) {
        *self.listed.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    fn scaling(&self, key: &str) -> Arc<Scaling> {
        self.scaling
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(key.to_string())
            .or_default()
            .clone()
    }

    async fn node_class(&self, name: &str) -> Result<ClusterAPINodeClass> {
        match self.classes.node_class(name).await {
            Ok(Some(c)) if c.metadata.deletion_timestamp.is_some() => {
                Err(CloudProviderError::node_class_not_ready(format!(
                    "ClusterAPINodeClass {name:?} is terminating"
                )))
            }
            Ok(Some(c)) => Ok(c),
            Ok(None) => Err(CloudProviderError::node_class_not_ready(format!(
                "ClusterAPINodeClass {name:?} not found"
            ))),
            Err(e) => Err(CloudProviderError::Other(e.into())),
        }
    }

    /// The class's instance types and where they launch.
    async fn resolved(&self, class: &ClusterAPINodeClass) -> Result<Resolved> {
        let mds = self.machine_deployments().await?;
        let resolved = instancetype::resolve(
            &mds,
            class.spec.scalable_resource_selector.as_ref(),
            &self.options.instance_types,
        );
        for skipped in &resolved.skipped {
            tracing::warn!(nodeclass = %class.name(), "{skipped}");
        }
        Ok(resolved)
    }

    /// A MachineDeployment alone as an instance type and offer (what a Machine of it is).
    async fn shape_of(&self, namespace: &str, name: &str) -> Result<Option<Resolved>> {
        let listed = self.machine_deployments().await?;
        let md = match listed
            .iter()
            .find(|md| md.namespace() == namespace && md.name() == name)
        {
            Some(md) => md.clone(),
            None => match self
                .management
                .machine_deployment(namespace, name)
                .await
                .map_err(other)?
            {
                Some(md) => md,
                None => return Ok(None),
            },
        };
        Ok(Some(instancetype::resolve(
            std::slice::from_ref(&md),
            None,
            &self.options.instance_types,
        )))
    }

    /// The NodeClaim's Machine: by its Machine annotation, else among the claimed Machines by
    /// its providerID or its name.
    async fn machine_of(&self, claim: &NodeClaim) -> Result<Option<Machine>> {
        if let Some(value) = claim.annotations().get(MACHINE_ANNOTATION) {
            let (ns, name) =
                parse_machine_annotation(value).map_err(|e| CloudProviderError::Other(e.into()))?;
            return self.management.machine(ns, name).await.map_err(other);
        }
        let provider_id = claim
            .status
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .filter(|p| !p.is_empty());
        let name = claim.metadata.name.as_deref();
        let claimed = self
            .management
            .machines(None, MEMBER_LABEL)
            .await
            .map_err(other)?;
        Ok(claimed.into_iter().find(|m| match provider_id {
            Some(p) => m.provider_id() == Some(p),
            None => name.is_some() && m.node_claim() == name,
        }))
    }

    /// Scales `offer`'s MachineDeployment up if the launches waiting on it lack a Machine, then
    /// claims one of its Machines for `claim`.
    async fn claim_in(
        &self,
        offer: &Offer,
        claim: &str,
    ) -> std::result::Result<Machine, LaunchError> {
        let key = offer.key();
        let (ns, name) = (offer.namespace.as_str(), offer.name.as_str());
        let scaling = self.scaling(&key);
        let waiting = {
            let _decide = scaling.lock.lock().await;
            let mut tries = 0;
            loop {
                let (replicas, rv) = self.management.scale(ns, name).await?;
                let machines = self.management.machines_of(ns, name).await?;
                let add = claim::replicas_to_add(
                    replicas,
                    &machines,
                    offer.template_marks_members,
                    scaling.waiting.load(Ordering::SeqCst),
                );
                if add == 0 {
                    break;
                }
                if let Some(max) = offer.max_size
                    && replicas + add > max
                {
                    return Err(LaunchError::Full(format!(
                        "MachineDeployment {key} is at its max size {max} ({replicas} replicas)"
                    )));
                }
                match self
                    .management
                    .set_scale(ns, name, replicas + add, &rv)
                    .await
                {
                    Ok(()) => {
                        tracing::info!(machine_deployment = %key, replicas = replicas + add, nodeclaim = %claim, "scaled up");
                        self.forget_listing();
                        break;
                    }
                    Err(e) if e.is_conflict() && tries < CONFLICT_RETRIES => tries += 1,
                    Err(e) => return Err(e.into()),
                }
            }
            scaling.waiting.fetch_add(1, Ordering::SeqCst);
            Waiting(scaling.clone())
        };
        let deadline = tokio::time::Instant::now() + self.options.claim_wait;
        loop {
            let machines = self.management.machines_of(ns, name).await?;
            for m in claim::claimable(&machines, offer.template_marks_members) {
                match self
                    .management
                    .patch_machine(m.namespace(), m.name(), &claim::claim_patch(m, claim))
                    .await
                {
                    Ok(claimed) => {
                        tracing::info!(machine = %claimed.key(), nodeclaim = %claim, "claimed machine");
                        drop(waiting);
                        return Ok(claimed);
                    }
                    // Another launch claimed it first, or it went away: the next one.
                    Err(e) if e.is_conflict() || e.is_not_found() => {}
                    Err(e) => return Err(e.into()),
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(LaunchError::Failed(CloudProviderError::create(
                    "MachineNotFound",
                    format!(
                        "no Machine of MachineDeployment {key} to claim within {:?}; its replica stays for the next launch",
                        self.options.claim_wait
                    ),
                )));
            }
            tokio::time::sleep(self.options.poll).await;
        }
    }

    /// The hash of the template `machine` was made from: its MachineSet's, or its
    /// MachineDeployment's when the MachineSet cannot be read.
    async fn made_from(&self, machine: &Machine, offer: &Offer) -> String {
        if let Some(set) = machine.machine_set() {
            match self.management.machine_set(machine.namespace(), set).await {
                Ok(Some(ms)) => return template_hash(&ms.spec.template.spec),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(machine = %machine.key(), error = %e, "reading the Machine's MachineSet; hashing its MachineDeployment's template")
                }
            }
        }
        offer.template_hash.clone()
    }

    /// The launch on a claimed Machine: its providerID (waited for), labels, capacity and the
    /// template hash.
    async fn launched(&self, claim: &NodeClaim, machine: Machine) -> Result<NodeClaim> {
        let deadline = tokio::time::Instant::now() + self.options.provider_id_wait;
        let mut machine = machine;
        while machine.provider_id().is_none() {
            if machine.metadata.deletion_timestamp.is_some() {
                return Err(CloudProviderError::create(
                    "MachineDeleted",
                    format!("Machine {} is being deleted", machine.key()),
                ));
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(CloudProviderError::create(
                    "MachineProviderIDPending",
                    format!(
                        "cannot satisfy create, waiting for Machine {} to have a providerID",
                        machine.key()
                    ),
                ));
            }
            tokio::time::sleep(self.options.poll).await;
            machine = match self
                .management
                .machine(machine.namespace(), machine.name())
                .await
                .map_err(other)?
            {
                Some(m) => m,
                None => {
                    return Err(CloudProviderError::create(
                        "MachineDeleted",
                        format!("Machine {} is gone", machine.key()),
                    ));
                }
            };
        }
        let md = machine.machine_deployment().ok_or_else(|| {
            CloudProviderError::Other(
                format!(
                    "Machine {} has no {} label",
                    machine.key(),
                    crate::capi::DEPLOYMENT_NAME_LABEL
                )
                .into(),
            )
        })?;
        let md_key = format!("{}/{md}", machine.namespace());
        let resolved = self
            .shape_of(machine.namespace(), md)
            .await?
            .ok_or_else(|| {
                CloudProviderError::Other(format!("MachineDeployment {md_key} not found").into())
            })?;
        let (Some(offer), Some(it)) = (
            resolved.offer(&md_key),
            resolved.instance_types.first().cloned(),
        ) else {
            let why = resolved
                .skipped
                .first()
                .map_or_else(|| "it is not a member".to_string(), ToString::to_string);
            return Err(CloudProviderError::create(
                "InvalidMachineDeployment",
                format!("Machine {}'s MachineDeployment: {why}", machine.key()),
            ));
        };
        let hash = self.made_from(&machine, offer).await;
        Ok(claim::launched(claim, &it, offer, &machine, &hash))
    }

    /// Marks `machine` and takes its MachineDeployment down by one, under the same lock as
    /// launches' scaling; the mark is taken back when the replicas cannot go down.
    async fn scale_down(&self, claim: &str, machine: &Machine, md: &str) -> Result<()> {
        let ns = machine.namespace();
        let key = format!("{ns}/{md}");
        let scaling = self.scaling(&key);
        let _decide = scaling.lock.lock().await;
        let (replicas, _) = match self.management.scale(ns, md).await {
            Ok(s) => s,
            Err(e) if e.is_not_found() => {
                return Err(CloudProviderError::Other(
                    format!(
                        "unable to delete NodeClaim {claim:?}, cannot find an owner MachineDeployment for Machine {:?}: {key} not found",
                        machine.name()
                    )
                    .into(),
                ));
            }
            Err(e) => return Err(other(e)),
        };
        match claim::deletion(claim, machine, md, Some(replicas)) {
            Deletion::Leaving => return Ok(()),
            Deletion::Refused(why) => return Err(CloudProviderError::Other(why.into())),
            Deletion::ScaleDown => {}
        }
        // Mark it, with the resourceVersion read; a Machine that moved on is read again.
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        let mut current = machine.clone();
        let mut tries = 0;
        loop {
            match self
                .management
                .patch_machine(
                    ns,
                    current.name(),
                    &claim::delete_mark_patch(&current, &now),
                )
                .await
            {
                Ok(_) => break,
                Err(e) if e.is_conflict() && tries < CONFLICT_RETRIES => {
                    tries += 1;
                    current = match self.management.machine(ns, current.name()).await {
                        Ok(Some(m)) if m.is_leaving() => return Ok(()),
                        Ok(Some(m)) => m,
                        Ok(None) => {
                            return Err(CloudProviderError::not_found(format!(
                                "Machine {} is gone",
                                machine.key()
                            )));
                        }
                        Err(e) => return Err(other(e)),
                    };
                }
                Err(e) if e.is_not_found() => {
                    return Err(CloudProviderError::not_found(format!(
                        "Machine {} is gone",
                        machine.key()
                    )));
                }
                Err(e) => return Err(other(e)),
            }
        }
        let mut tries = 0;
        let scaled = loop {
            let result = async {
                let (replicas, rv) = self.management.scale(ns, md).await?;
                self.management
                    .set_scale(ns, md, (replicas - 1).max(0), &rv)
                    .await
            }
            .await;
            match result {
                Err(e) if e.is_conflict() && tries < CONFLICT_RETRIES => tries += 1,
                other => break other,
            }
        };
        if let Err(e) = scaled {
            // Take the mark back: the MachineSet must not delete a Machine for replicas that
            // did not go down (it would delete this one at the next scale-down of any other).
            if let Err(undo) = self
                .management
                .patch_machine(ns, machine.name(), &claim::unmark_patch())
                .await
            {
                tracing::error!(machine = %machine.key(), error = %undo, "taking back the delete-machine mark");
            }
            return Err(CloudProviderError::Other(
                format!(
                    "unable to scale MachineDeployment {key} down for NodeClaim {claim:?}: {e}"
                )
                .into(),
            ));
        }
        self.forget_listing();
        tracing::info!(machine = %machine.key(), machine_deployment = %key, nodeclaim = %claim, "marked machine for deletion and scaled down");
        Ok(())
    }

    /// A Machine as a NodeClaim, with its MachineDeployment's type when it reads.
    async fn as_node_claim(&self, machine: &Machine) -> Result<NodeClaim> {
        let resolved = match machine.machine_deployment() {
            Some(md) => self.shape_of(machine.namespace(), md).await?,
            None => None,
        };
        let md_key = machine
            .machine_deployment()
            .map(|md| format!("{}/{md}", machine.namespace()));
        let found = resolved
            .as_ref()
            .and_then(|r| Some((&**r.instance_types.first()?, r.offer(md_key.as_deref()?)?)));
        Ok(claim::as_node_claim(machine, found))
    }
}

impl<S: NodeClassSource> CloudProvider for ClusterApiCloudProvider<S> {
    fn name(&self) -> &'static str {
        "clusterapi"
    }

    fn node_classes(&self) -> &'static [Crd] {
        crate::CRDS
    }

    /// The status loop writes the `Ready` condition; this reads it.
    async fn node_class_readiness(
        &self,
        reference: &NodeClassReference,
    ) -> Result<NodeClassReadiness> {
        if !self.supports(reference) {
            return Ok(NodeClassReadiness::NotFound);
        }
        NodeClassReadiness::of_lookup(self.classes.node_class(&reference.name).await)
    }

    async fn create(&self, claim: &NodeClaim) -> Result<NodeClaim> {
        let name = claim.name_any();
        // Claimed before (a retry, a restart): that Machine, never a second.
        if let Some(machine) = self.machine_of(claim).await?
            && !machine.is_leaving()
        {
            return self.launched(claim, machine).await;
        }
        let class = self.node_class(&claim.spec.node_class_ref.name).await?;
        if let NodeClassReadiness::NotReady { message, .. } =
            NodeClassReadiness::of_lookup(Ok(Some(&class)))?
        {
            return Err(CloudProviderError::node_class_not_ready(message));
        }
        let resolved = self.resolved(&class).await?;
        let candidates = resolved.candidates(claim);
        if candidates.is_empty() {
            return Err(CloudProviderError::insufficient_capacity(format!(
                "NodeClaim {name}: no available MachineDeployment fits ({} instance types)",
                resolved.instance_types.len()
            )));
        }
        let mut full = Vec::new();
        for (offer, _) in &candidates {
            match self.claim_in(offer, &name).await {
                Ok(machine) => return self.launched(claim, machine).await,
                Err(LaunchError::Full(why)) => full.push(why),
                Err(LaunchError::Failed(e)) => return Err(e),
            }
        }
        Err(CloudProviderError::insufficient_capacity(format!(
            "NodeClaim {name}: {}",
            full.join("; ")
        )))
    }

    async fn delete(&self, claim: &NodeClaim) -> Result<()> {
        let name = claim.name_any();
        let Some(machine) = self.machine_of(claim).await? else {
            let provider_id = claim
                .status
                .as_ref()
                .and_then(|s| s.provider_id.clone())
                .unwrap_or_default();
            return Err(CloudProviderError::not_found(format!(
                "unable to find Machine with provider ID {provider_id:?} to Delete NodeClaim {name:?}"
            )));
        };
        if machine.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let Some(md) = machine.machine_deployment() else {
            return Err(CloudProviderError::Other(
                format!(
                    "unable to delete NodeClaim {name:?}, Machine {:?} has no MachineDeployment label",
                    machine.name()
                )
                .into(),
            ));
        };
        let md = md.to_string();
        self.scale_down(&name, &machine, &md).await
    }

    async fn get(&self, provider_id: &str) -> Result<NodeClaim> {
        if provider_id.is_empty() {
            return Err(CloudProviderError::Other(
                "no providerID supplied to Get, cannot continue".into(),
            ));
        }
        // Any Machine, claimed or not, as upstream's GetByProviderID.
        let machines = self.management.machines(None, "").await.map_err(other)?;
        let Some(machine) = machines
            .into_iter()
            .find(|m| m.provider_id() == Some(provider_id))
        else {
            return Err(CloudProviderError::not_found(format!(
                "cannot find Machine with provider ID {provider_id:?}"
            )));
        };
        self.as_node_claim(&machine).await
    }

    async fn list(&self) -> Result<Vec<NodeClaim>> {
        let machines = self
            .management
            .machines(None, MEMBER_LABEL)
            .await
            .map_err(other)?;
        let mds = self.machine_deployments().await?;
        let marks = |m: &Machine| {
            mds.iter()
                .find(|md| {
                    md.namespace() == m.namespace() && Some(md.name()) == m.machine_deployment()
                })
                .is_some_and(|md| md.spec.template.metadata.labels.contains_key(MEMBER_LABEL))
        };
        let mut out = Vec::new();
        for m in machines.iter().filter(|m| claim::is_claimed(m, marks(m))) {
            out.push(self.as_node_claim(m).await?);
        }
        Ok(out)
    }

    async fn is_drifted(&self, claim: &NodeClaim) -> Result<Option<String>> {
        let annotations = claim.annotations();
        let (Some(stored), Some(TEMPLATE_HASH_VERSION)) = (
            annotations.get(TEMPLATE_HASH_ANNOTATION),
            annotations
                .get(TEMPLATE_HASH_VERSION_ANNOTATION)
                .map(String::as_str),
        ) else {
            return Ok(None);
        };
        let Some(machine) = self.machine_of(claim).await? else {
            return Ok(None);
        };
        let Some(md) = machine.machine_deployment() else {
            return Ok(None);
        };
        let listed = self.machine_deployments().await?;
        let current = match listed
            .iter()
            .find(|d| d.namespace() == machine.namespace() && d.name() == md)
        {
            Some(d) => d.template_hash(),
            None => match self
                .management
                .machine_deployment(machine.namespace(), md)
                .await
                .map_err(other)?
            {
                Some(d) => d.template_hash(),
                None => return Ok(None),
            },
        };
        Ok((current != *stored).then(|| DRIFT_REASON.to_string()))
    }

    async fn instance_types(&self, node_pool: &NodePool) -> Result<Vec<Arc<InstanceType>>> {
        let class = self
            .node_class(&node_pool.spec.template.spec.node_class_ref.name)
            .await?;
        Ok(self.resolved(&class).await?.for_node_pool(node_pool))
    }

    fn provider_labels(&self) -> Vec<String> {
        instancetype::LABELS.iter().map(|s| s.to_string()).collect()
    }
}
