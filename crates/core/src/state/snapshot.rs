//! The one way from observed objects to decision inputs. The controller's watch-fed state, the
//! simulator's cluster and `plan`'s dump all hand their Nodes, NodeClaims, pods, DaemonSets and
//! PodDisruptionBudgets to [`Snapshot::new`], so provisioning and disruption see the same
//! cluster whichever of them asks.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, Taint,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use karpenter_api::NodeClaim;
use karpenter_api::labels::{
    CAPACITY_TYPE_LABEL, HOSTNAME_LABEL, INSTANCE_TYPE_LABEL, NODE_INITIALIZED_LABEL,
    NODE_POOL_LABEL, ZONE_LABEL,
};
use karpenter_api::nodeclaim::condition::{DRIFTED, INITIALIZED, INSTANCE_TERMINATING};

use super::pods::{self, ObservedPod};
use super::selectors::{PodController, ServiceSelector};
use super::volumes::{PodVolumes, Volumes};
use crate::instancetype::NodePoolInput;
use crate::resources::Resources;
use crate::scheduling::requirements::node_claim_labels;
use crate::scheduling::volumeusage::{Attachment, VolumeUsage};

/// What was observed of the cluster, by reference.
pub struct Observed<'a, P> {
    /// Every Node.
    pub nodes: Vec<&'a Node>,
    /// Every NodeClaim.
    pub node_claims: Vec<&'a NodeClaim>,
    /// Every pod.
    pub pods: Vec<&'a P>,
    /// Every DaemonSet.
    pub daemonsets: Vec<&'a DaemonSet>,
    /// Every PodDisruptionBudget, with the status kube-controller-manager gave it.
    pub pdbs: Vec<&'a PodDisruptionBudget>,
    /// Every Namespace (their labels answer affinity terms' `namespaceSelector`).
    pub namespaces: Vec<&'a Namespace>,
    /// Every PersistentVolumeClaim, PersistentVolume and StorageClass (what pods' volumes
    /// require of their node).
    pub volume_claims: Vec<&'a PersistentVolumeClaim>,
    /// See `volume_claims`.
    pub volumes: Vec<&'a PersistentVolume>,
    /// See `volume_claims`.
    pub storage_classes: Vec<&'a StorageClass>,
    /// Every CSINode: how many volumes of each CSI driver a node can attach.
    pub csi_nodes: Vec<&'a CSINode>,
    /// Services' pod selectors (default topology spread deduces pods' selectors from them).
    pub services: Vec<&'a ServiceSelector>,
    /// ReplicationControllers, ReplicaSets and StatefulSets (see `services`).
    pub pod_controllers: Vec<&'a PodController>,
    /// The NodePools in use, with their instance types (prices come from them).
    pub node_pools: &'a [NodePoolInput],
    /// The labels a launching claim's instance will decide (the provider's well-known ones).
    pub provider_labels: &'a [String],
    /// Nodes a recent provisioning decision counts on (upstream's nominations).
    pub nominated: BTreeSet<String>,
    /// Nodes a disruption command has taken (upstream's `MarkedForDeletion`): they count as
    /// being deleted before their NodeClaims are.
    pub marked_for_deletion: BTreeSet<String>,
    /// ResourceClaims, DeviceClasses and ResourceSlices.
    pub devices: std::sync::Arc<crate::scheduling::dynamic_resources::DeviceInventory>,
}

/// A node, a launched NodeClaim without its node yet, or both paired — upstream's `StateNode`.
pub struct StateNode<'a, P> {
    /// The Node, once registered.
    pub node: Option<&'a Node>,
    /// Its NodeClaim, for nodes karpenter launched.
    pub claim: Option<&'a NodeClaim>,
    /// The pods bound to it that have not finished.
    pub pods: Vec<&'a P>,
    marked: bool,
}

fn is_true(conditions: &[Condition], type_: &str) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == type_ && c.status == "True")
}

fn at(t: Option<&Time>) -> Option<Timestamp> {
    t.map(|t| t.0)
}

fn resources(list: Option<&karpenter_api::nodeclaim::ResourceList>) -> Resources {
    list.and_then(|l| Resources::from_list(l).ok())
        .unwrap_or_default()
}

impl<'a, P: ObservedPod> StateNode<'a, P> {
    /// The node's name, or the claim's while it has no node.
    pub fn name(&self) -> &'a str {
        match (self.node, self.claim) {
            (Some(n), _) => n.metadata.name.as_deref().unwrap_or_default(),
            (None, Some(c)) => c.metadata.name.as_deref().unwrap_or_default(),
            (None, None) => "",
        }
    }

    /// Its NodePool, from the node's label or the claim's.
    pub fn node_pool(&self) -> Option<&'a str> {
        let label = |labels: Option<&'a BTreeMap<String, String>>| {
            labels
                .and_then(|l| l.get(NODE_POOL_LABEL))
                .map(String::as_str)
        };
        label(self.node.and_then(|n| n.metadata.labels.as_ref()))
            .or_else(|| label(self.claim.and_then(|c| c.metadata.labels.as_ref())))
    }

    /// Karpenter launched it.
    pub fn managed(&self) -> bool {
        self.node_pool().is_some()
    }

    /// A NodeClaim launched and not registered yet.
    pub fn launching(&self) -> bool {
        self.node.is_none()
    }

    /// Being deleted: the node, its claim, or marked by a disruption command.
    pub fn deleting(&self) -> bool {
        self.marked
            || self
                .node
                .is_some_and(|n| n.metadata.deletion_timestamp.is_some())
            || self
                .claim
                .is_some_and(|c| c.metadata.deletion_timestamp.is_some())
    }

    /// Pods may be scheduled against it: a managed node once karpenter initialized it (Ready,
    /// startup taints gone, resources reported); any other node always (as upstream).
    pub fn initialized(&self) -> bool {
        let Some(node) = self.node else {
            return false;
        };
        if !self.managed() {
            return true;
        }
        let labelled = node
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(NODE_INITIALIZED_LABEL))
            .is_some_and(|v| v == "true");
        labelled
            || self
                .claim
                .and_then(|c| c.status.as_ref())
                .is_some_and(|s| is_true(&s.conditions, INITIALIZED))
    }

    /// The node's `Ready` condition is true.
    pub fn ready(&self) -> bool {
        self.node.is_some_and(super::node_ready)
    }

    /// Its labels: the node's, or what the claim's requirements decide while it launches.
    pub fn labels(&self, provider_labels: &[String]) -> BTreeMap<String, String> {
        if let Some(node) = self.node {
            return node.metadata.labels.clone().unwrap_or_default();
        }
        let Some(claim) = self.claim else {
            return BTreeMap::new();
        };
        let mut labels = node_claim_labels(claim, provider_labels);
        labels
            .entry(HOSTNAME_LABEL.into())
            .or_insert_with(|| self.name().to_string());
        labels
    }

    /// Its taints: the node's, or the claim's while it launches.
    pub fn taints(&self) -> Vec<Taint> {
        match (self.node, self.claim) {
            (Some(n), _) => n
                .spec
                .as_ref()
                .and_then(|s| s.taints.clone())
                .unwrap_or_default(),
            (None, Some(c)) => c.spec.taints.clone(),
            (None, None) => Vec::new(),
        }
    }

    /// The claim's startup taints (gone once it initializes).
    pub fn startup_taints(&self) -> Vec<Taint> {
        self.claim
            .map(|c| c.spec.startup_taints.clone())
            .unwrap_or_default()
    }

    /// What pods can use: the node's allocatable, or what the claim's instance reported
    /// (see [`StateNode::awaited`] for a node not initialized yet).
    pub fn allocatable(&self) -> Resources {
        match (self.node, self.claim) {
            (Some(n), _) => self.awaited(
                resources(n.status.as_ref().and_then(|s| s.allocatable.as_ref())),
                |s| &s.allocatable,
            ),
            (None, Some(c)) => resources(c.status.as_ref().map(|s| &s.allocatable)),
            (None, None) => Resources::default(),
        }
    }

    /// Its capacity (see [`StateNode::awaited`] for a node not initialized yet).
    pub fn capacity(&self) -> Resources {
        match (self.node, self.claim) {
            (Some(n), _) => self.awaited(
                resources(n.status.as_ref().and_then(|s| s.capacity.as_ref())),
                |s| &s.capacity,
            ),
            (None, Some(c)) => resources(c.status.as_ref().map(|s| &s.capacity)),
            (None, None) => Resources::default(),
        }
    }

    /// A registered node's `reported` resources, where it is not initialized yet, with what its
    /// NodeClaim says for each resource the node still reports as zero: the kubelet reports
    /// extended resources (GPUs) only once their device plugin runs (upstream's
    /// `StateNode.Allocatable` and `Capacity`, which provisioning and disruption both read).
    fn awaited(
        &self,
        mut reported: Resources,
        of: impl Fn(
            &karpenter_api::nodeclaim::NodeClaimStatus,
        ) -> &karpenter_api::nodeclaim::ResourceList,
    ) -> Resources {
        let Some(status) = self.claim.and_then(|c| c.status.as_ref()) else {
            return reported;
        };
        if self.initialized() {
            return reported;
        }
        let Ok(claimed) = Resources::from_list(of(status)) else {
            return reported;
        };
        for (name, milli) in claimed.iter() {
            if reported.get(name) == 0 {
                reported.set(name, milli);
            }
        }
        reported
    }

    /// When it was created: its claim, else its node (`None` if neither says).
    pub fn created_at(&self) -> Option<Timestamp> {
        at(self
            .claim
            .and_then(|c| c.metadata.creation_timestamp.as_ref()))
        .or_else(|| {
            at(self
                .node
                .and_then(|n| n.metadata.creation_timestamp.as_ref()))
        })
    }

    /// When a pod last bound to or left it: the claim's `lastPodEventTime` or its newest pod
    /// (other than DaemonSet pods), never before it initialized (upstream counts from then
    /// when no pod has come or gone) or was created.
    pub fn last_pod_event(&self, created_at: Timestamp) -> Timestamp {
        let status = self.claim.and_then(|c| c.status.as_ref());
        self.pods
            .iter()
            .filter(|p| !pods::is_daemonset_pod(**p))
            .filter_map(|p| at(p.start_time()).or_else(|| at(p.meta().creation_timestamp.as_ref())))
            .chain(at(status.and_then(|s| s.last_pod_event_time.as_ref())))
            .chain(at(status.and_then(|s| {
                s.conditions
                    .iter()
                    .find(|c| c.type_ == INITIALIZED && c.status == "True")
                    .map(|c| &c.last_transition_time)
            })))
            .max()
            .unwrap_or(created_at)
            .max(created_at)
    }

    /// Its NodeClaim's `Drifted` condition is true.
    pub fn drifted(&self) -> bool {
        self.claim
            .and_then(|c| c.status.as_ref())
            .is_some_and(|s| is_true(&s.conditions, DRIFTED))
    }

    /// When its NodeClaim's `Drifted` condition last changed, if it says.
    pub fn drifted_at(&self) -> Option<Timestamp> {
        self.claim
            .and_then(|c| c.status.as_ref())
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == DRIFTED))
            .map(|c| c.last_transition_time.0)
    }

    /// Its NodeClaim's instance is being terminated (`InstanceTerminating` is true).
    pub fn instance_terminating(&self) -> bool {
        self.claim
            .and_then(|c| c.status.as_ref())
            .is_some_and(|s| is_true(&s.conditions, INSTANCE_TERMINATING))
    }

    /// Its annotations: the node's, overlaid with the claim's.
    pub fn annotations(&self) -> BTreeMap<String, String> {
        let mut out = self
            .node
            .and_then(|n| n.metadata.annotations.clone())
            .unwrap_or_default();
        if let Some(a) = self.claim.and_then(|c| c.metadata.annotations.as_ref()) {
            out.extend(a.clone());
        }
        out
    }
}

/// The cluster as one pass of decisions sees it.
pub struct Snapshot<'a, P> {
    pub(crate) observed: Observed<'a, P>,
    /// Every node and launched NodeClaim, by name.
    pub nodes: Vec<StateNode<'a, P>>,
    /// NodeClaims with no instance yet (no `providerID`): provisioning waits for them, since
    /// their capacity is not known (upstream's state is not synced until they launch).
    pub not_launched: Vec<&'a NodeClaim>,
    /// Pending pods kube-scheduler could not place, oldest first.
    pub provisionable: Vec<&'a P>,
    /// The pods of nodes being deleted that must find a new home.
    pub displaced: Vec<&'a P>,
    /// Pods neither bound nor provisionable (not yet seen by kube-scheduler, nominated for
    /// preemption, DaemonSet or static pods, finished or deleting, or using a volume claim that
    /// does not exist yet).
    pub ignored: usize,
    /// The pending pods among the ignored that provisioning will not place, with why (upstream's
    /// `FailedScheduling` "ignoring pod" events): node selection karpenter cannot meet, or
    /// volumes that cannot be placed yet. Pods that keep off karpenter's nodes on purpose are
    /// ignored without a reason.
    pub rejected: Vec<(&'a P, String)>,
    /// Pending pods that keep off karpenter's nodes on purpose (`karpenter.sh/nodepool
    /// DoesNotExist`): with `rejected`, upstream's `karpenter_scheduler_ignored_pods_count`.
    pub avoiding: usize,
    /// What pods' volumes bring to scheduling, by `namespace/name`.
    pub pod_volumes: Arc<HashMap<String, PodVolumes>>,
    /// Each node's CSI volume limits (from its CSINode) with what its pods attach.
    volume_usage: HashMap<&'a str, VolumeUsage>,
}

impl<'a, P: ObservedPod> Snapshot<'a, P> {
    /// Pairs nodes with their NodeClaims (by `providerID`, else by the claim's `nodeName`),
    /// gives each its pods, and sorts the pods that need a node.
    pub fn new(observed: Observed<'a, P>) -> Self {
        let mut pods_by_node: HashMap<&str, Vec<&'a P>> = HashMap::new();
        let mut provisionable = Vec::new();
        let mut ignored = 0;
        let mut rejected = Vec::new();
        let mut avoiding = 0;
        let volumes = Volumes::new(
            &observed.volume_claims,
            &observed.volumes,
            &observed.storage_classes,
        );
        let mut pod_volumes = HashMap::new();
        // What bound pods attach, by node: counted against the node's CSI limits once here.
        let mut attached_on: HashMap<&str, Vec<Attachment>> = HashMap::new();
        for &pod in &observed.pods {
            let of_pod = || volumes.of_pod(pod);
            match pod.node_name() {
                Some(_) if pods::is_terminal(pod) => {}
                Some(node) => {
                    // A bound pod's volumes count against its node's limits, and matter when
                    // disruption moves it.
                    if !pods::claim_names(pod).is_empty() {
                        let found = PodVolumes {
                            requirements: volumes.requirements(pod).ok().flatten(),
                            alternatives: volumes.alternatives(pod),
                            attachments: volumes.attachments(pod),
                        };
                        if !found.attachments.is_empty() {
                            attached_on
                                .entry(node)
                                .or_default()
                                .extend(found.attachments.iter().cloned());
                        }
                        if !found.is_empty() {
                            pod_volumes.insert(pods::key(pod), found);
                        }
                    }
                    pods_by_node.entry(node).or_default().push(pod)
                }
                None if pods::is_provisionable(pod) => {
                    let checked = match pods::rejection(pod) {
                        Some(pods::Rejection::AvoidsKarpenter) => Err(None),
                        Some(pods::Rejection::Invalid(why)) => Err(Some(why)),
                        None => of_pod().map_err(Some),
                    };
                    match checked {
                        Ok(found) => {
                            if !found.is_empty() {
                                pod_volumes.insert(pods::key(pod), found);
                            }
                            provisionable.push(pod)
                        }
                        // As upstream: the pod waits (for its claim, say), said why.
                        Err(why) => {
                            ignored += 1;
                            match why {
                                Some(why) => rejected.push((pod, why)),
                                None => avoiding += 1,
                            }
                        }
                    }
                }
                None => ignored += 1,
            }
        }
        provisionable.sort_by_key(|p| at(p.meta().creation_timestamp.as_ref()));
        let mut claims_by_provider_id: HashMap<&str, &'a NodeClaim> = HashMap::new();
        let mut claims_by_node_name: HashMap<&str, &'a NodeClaim> = HashMap::new();
        for &claim in &observed.node_claims {
            let Some(status) = claim.status.as_ref() else {
                continue;
            };
            if let Some(id) = status.provider_id.as_deref() {
                claims_by_provider_id.insert(id, claim);
            }
            if let Some(node) = status.node_name.as_deref() {
                claims_by_node_name.insert(node, claim);
            }
        }
        let mut paired: BTreeSet<&str> = BTreeSet::new();
        let mut nodes = Vec::new();
        for &node in &observed.nodes {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            let claim = node
                .spec
                .as_ref()
                .and_then(|s| s.provider_id.as_deref())
                .and_then(|id| claims_by_provider_id.get(id))
                .or_else(|| claims_by_node_name.get(name))
                .copied();
            if let Some(c) = claim {
                paired.insert(c.metadata.name.as_deref().unwrap_or_default());
            }
            nodes.push(StateNode {
                node: Some(node),
                claim,
                pods: pods_by_node.remove(name).unwrap_or_default(),
                marked: observed.marked_for_deletion.contains(name),
            });
        }
        let mut not_launched = Vec::new();
        for &claim in &observed.node_claims {
            let name = claim.metadata.name.as_deref().unwrap_or_default();
            if paired.contains(name) {
                continue;
            }
            let launched = claim
                .status
                .as_ref()
                .is_some_and(|s| s.provider_id.is_some());
            if !launched {
                if claim.metadata.deletion_timestamp.is_none() {
                    not_launched.push(claim);
                }
                continue;
            }
            nodes.push(StateNode {
                node: None,
                claim: Some(claim),
                pods: Vec::new(),
                marked: observed.marked_for_deletion.contains(name),
            });
        }
        nodes.sort_by(|a, b| a.name().cmp(b.name()));
        let displaced = nodes
            .iter()
            .filter(|n| n.deleting())
            .flat_map(|n| n.pods.iter().copied())
            .filter(|p| pods::is_reschedulable(*p))
            .collect();
        Self {
            nodes,
            not_launched,
            provisionable,
            displaced,
            ignored,
            rejected,
            avoiding,
            pod_volumes: Arc::new(pod_volumes),
            volume_usage: observed
                .csi_nodes
                .iter()
                .map(|c| {
                    let limits = c
                        .spec
                        .drivers
                        .iter()
                        .filter_map(|d| {
                            let count = d.allocatable.as_ref()?.count?;
                            Some((d.name.clone(), usize::try_from(count).unwrap_or(0)))
                        })
                        .collect();
                    let name = c.metadata.name.as_deref().unwrap_or_default();
                    let mut usage = VolumeUsage::new(limits);
                    if let Some(attached) = attached_on.get(name) {
                        usage.add(attached);
                    }
                    (name, usage)
                })
                .collect(),
            observed,
        }
    }

    /// The node's CSI volume limits with the volumes its pods attach.
    pub(crate) fn volume_usage(&self, node: &StateNode<'a, P>) -> VolumeUsage {
        self.volume_usage
            .get(node.name())
            .cloned()
            .unwrap_or_default()
    }

    /// How much of each kind the snapshot holds.
    pub fn counts(&self) -> Counts {
        Counts {
            nodes: self.nodes.iter().filter(|n| !n.launching()).count(),
            launching: self.nodes.iter().filter(|n| n.launching()).count()
                + self.not_launched.len(),
            bound_pods: self.nodes.iter().map(|n| n.pods.len()).sum(),
            pending_pods: self.provisionable.len(),
            displaced_pods: self.displaced.len(),
            ignored_pods: self.ignored,
        }
    }

    /// The pods provisioning places at `now`: the provisionable ones, oldest first, then those
    /// of nodes being deleted that can leave now (upstream's `CurrentlyReschedulablePods`): a
    /// pod an active `do-not-disrupt` or a fully blocking PodDisruptionBudget holds stays on
    /// its node until a `terminationGracePeriod` forces it out, so no capacity is launched for
    /// it yet.
    pub fn pods_to_schedule(&self, now: Timestamp) -> Vec<&'a P> {
        let mut out = self.provisionable.clone();
        out.extend(self.displaced.iter().copied().filter(|p| {
            super::pdb::can_leave_now(&p.to_pod(), self.observed.pdbs.iter().copied(), now)
        }));
        out
    }

    /// DaemonSet pods as they would start on a new node: each DaemonSet's newest pod when it
    /// has one (an admission webhook or a vertical autoscaler may have changed what it asks
    /// for), else its template — upstream's `getDaemonSetPods`. A real pod carries the
    /// DaemonSet controller's pin to its node; the template's node affinity replaces it.
    pub fn daemonset_pods(&self) -> Vec<Pod> {
        let key = |namespace: Option<&str>, name: &str| {
            (namespace.unwrap_or("default").to_string(), name.to_string())
        };
        let mut newest: HashMap<(String, String), &P> = HashMap::new();
        for &pod in &self.observed.pods {
            let meta = pod.meta();
            let Some(owner) = meta
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.kind == "DaemonSet")
            else {
                continue;
            };
            if pods::is_terminal(pod) || meta.deletion_timestamp.is_some() {
                continue;
            }
            let created = |p: &P| p.meta().creation_timestamp.as_ref().map(|t| t.0);
            newest
                .entry(key(meta.namespace.as_deref(), &owner.name))
                .and_modify(|held| {
                    if created(pod) > created(held) {
                        *held = pod;
                    }
                })
                .or_insert(pod);
        }
        self.observed
            .daemonsets
            .iter()
            .filter_map(|ds| {
                let template = ds.spec.as_ref()?.template.clone();
                let name = ds.metadata.name.clone().unwrap_or_default();
                let existing = newest.get(&key(ds.metadata.namespace.as_deref(), &name));
                let mut pod = match existing {
                    Some(p) => {
                        let mut pod = p.to_pod();
                        pod.status = None;
                        if let Some(spec) = pod.spec.as_mut() {
                            spec.node_name = None;
                            let from_template = template
                                .spec
                                .as_ref()
                                .and_then(|s| s.affinity.as_ref())
                                .and_then(|a| a.node_affinity.clone());
                            spec.affinity.get_or_insert_default().node_affinity = from_template;
                        }
                        pod
                    }
                    None => Pod {
                        metadata: template.metadata.unwrap_or_default(),
                        spec: template.spec,
                        status: None,
                    },
                };
                pod.metadata.namespace = ds.metadata.namespace.clone();
                pod.metadata.owner_references = Some(vec![OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: "DaemonSet".into(),
                    name,
                    uid: ds.metadata.uid.clone().unwrap_or_default(),
                    ..Default::default()
                }]);
                Some(pod)
            })
            .collect()
    }

    /// Every namespace with its labels, as [`SchedulerOptions::namespaces`] takes them.
    pub fn namespaces(&self) -> Vec<(String, BTreeMap<String, String>)> {
        self.observed
            .namespaces
            .iter()
            .map(|n| {
                (
                    n.metadata.name.clone().unwrap_or_default(),
                    n.metadata.labels.clone().unwrap_or_default(),
                )
            })
            .collect()
    }

    /// The PodDisruptionBudgets.
    pub fn pdbs(&self) -> Vec<PodDisruptionBudget> {
        self.observed.pdbs.iter().map(|p| (*p).clone()).collect()
    }

    /// Every Node observed.
    pub fn observed_nodes(&self) -> Vec<&'a Node> {
        self.observed.nodes.clone()
    }

    /// Every NodeClaim observed.
    pub fn observed_node_claims(&self) -> Vec<&'a NodeClaim> {
        self.observed.node_claims.clone()
    }

    /// The nodes a disruption command has taken.
    pub fn marked_for_deletion(&self) -> &BTreeSet<String> {
        &self.observed.marked_for_deletion
    }

    /// The cluster's ResourceClaims, DeviceClasses and ResourceSlices.
    pub fn devices(
        &self,
    ) -> &std::sync::Arc<crate::scheduling::dynamic_resources::DeviceInventory> {
        &self.observed.devices
    }

    /// The NodePools in use.
    pub fn node_pools(&self) -> &'a [NodePoolInput] {
        self.observed.node_pools
    }

    /// The provider's well-known labels.
    pub fn provider_labels(&self) -> &'a [String] {
        self.observed.provider_labels
    }
}

/// How much of each kind a snapshot holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Registered nodes.
    pub nodes: usize,
    /// NodeClaims without a node yet.
    pub launching: usize,
    /// Pods bound to nodes, not finished.
    pub bound_pods: usize,
    /// Pods kube-scheduler could not place.
    pub pending_pods: usize,
    /// Pods of nodes being deleted.
    pub displaced_pods: usize,
    /// Pods neither bound nor provisionable.
    pub ignored_pods: usize,
}

/// What a node costs per hour: the offering of its NodePool's instance type in its zone and
/// capacity type (0 when the catalog does not have it).
pub fn price_of(pools: &[NodePoolInput], pool: &str, labels: &BTreeMap<String, String>) -> f64 {
    let label = |k: &str| labels.get(k).map(String::as_str).unwrap_or_default();
    pools
        .iter()
        .filter(|p| p.node_pool.name() == pool)
        .flat_map(|p| &p.instance_types)
        .find(|it| it.name == label(INSTANCE_TYPE_LABEL))
        .and_then(|it| {
            it.offerings
                .iter()
                .find(|o| {
                    o.zone == label(ZONE_LABEL)
                        && o.capacity_type == label(CAPACITY_TYPE_LABEL)
                        // A reserved node is priced by its own reservation's offering.
                        && o
                            .reservation
                            .as_ref()
                            .is_none_or(|r| labels.get(&r.label).is_none_or(|id| *id == r.id))
                })
                .map(|o| o.price)
        })
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bound_pods_that_read_the_same_share_one_value() {
        let node: Node = serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap();
        let pod = |name: &str, app: &str| -> Pod {
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ns", "labels": {"app": app}},
                "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
                "status": {"phase": "Running"},
            }))
            .unwrap()
        };
        let pods = [pod("a", "web"), pod("b", "web"), pod("c", "db")];
        let snapshot = Snapshot::new(Observed {
            nodes: vec![&node],
            node_claims: Vec::new(),
            pods: pods.iter().collect(),
            daemonsets: Vec::new(),
            pdbs: Vec::new(),
            namespaces: Vec::new(),
            volume_claims: Vec::new(),
            volumes: Vec::new(),
            storage_classes: Vec::new(),
            csi_nodes: Vec::new(),
            services: Vec::new(),
            pod_controllers: Vec::new(),
            node_pools: &[],
            provider_labels: &[],
            nominated: BTreeSet::new(),
            devices: Default::default(),
            marked_for_deletion: BTreeSet::new(),
        });
        let existing = snapshot.existing_nodes();
        let bound = &existing[0].pods;
        assert_eq!(bound.len(), 3, "every pod still takes its room");
        assert!(Arc::ptr_eq(&bound[0], &bound[1]));
        assert!(!Arc::ptr_eq(&bound[0], &bound[2]));
        assert_eq!(bound[2].labels.get("app").map(String::as_str), Some("db"));
    }
}
