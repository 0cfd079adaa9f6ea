//! Cluster state: an in-memory index of every object the controller reasons about, fed by
//! watches (the linkerd policy-controller pattern) and by the controller's own writes, so a
//! decision never waits for its own change to come back round.

mod changes;
pub mod pod;
mod snapshot;

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{DaemonSet, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ReplicationController, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass, VolumeAttachment};
use karpenter_api::dra::{DeviceClass, ResourceClaim, ResourceSlice};
use karpenter_api::{NodeClaim, NodePool};
use karpenter_core::state::selectors::{PodController, ServiceSelector};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

pub use changes::{Changes, Subscribers};
pub use pod::{SharedSpec, SpecInterner, StoredPod};

/// What an index can hold: objects with a key and a resourceVersion.
pub trait Stored {
    /// `namespace/name`, or `name` for cluster-scoped objects.
    fn key(&self) -> String;
    /// The resourceVersion it was read at.
    fn resource_version(&self) -> Option<&str>;
    /// Whether the object no longer exists although it was read: deleted, with no finalizer
    /// left to hold it. The API server answers the write that removes the last finalizer with
    /// the object as it was deleted, and that answer must not bring it back into state.
    fn is_gone(&self) -> bool;
    /// The key of the index's secondary lookup, kept current with every change (a node's
    /// and a NodeClaim's providerID, a pod's node), so finding by it costs no scan.
    fn secondary_key(&self) -> Option<&str> {
        None
    }
}

/// Implements [`Stored`](crate::state::Stored) for kinds with no secondary key:
/// `impl_stored!(Kind, …)`, for the kinds a provider keeps an index of (its NodeClass) as for
/// the controller's own.
#[macro_export]
macro_rules! impl_stored {
    (@common) => {
        fn key(&self) -> String {
            $crate::state::key_of(self)
        }
        fn resource_version(&self) -> Option<&str> {
            $crate::state::resource_version_of(self)
        }
        fn is_gone(&self) -> bool {
            $crate::state::is_gone(self)
        }
    };
    ($($ty:ty),*) => {$(
        impl $crate::state::Stored for $ty {
            $crate::impl_stored!(@common);
        }
    )*};
}

impl_stored!(
    NodePool,
    PodDisruptionBudget,
    DaemonSet,
    Namespace,
    PersistentVolumeClaim,
    PersistentVolume,
    StorageClass,
    CSINode,
    ResourceClaim,
    DeviceClass,
    ResourceSlice
);

impl Stored for Node {
    impl_stored!(@common);
    fn secondary_key(&self) -> Option<&str> {
        self.spec.as_ref()?.provider_id.as_deref()
    }
}

impl Stored for VolumeAttachment {
    impl_stored!(@common);
    fn secondary_key(&self) -> Option<&str> {
        Some(self.spec.node_name.as_str())
    }
}

impl Stored for NodeClaim {
    impl_stored!(@common);
    fn secondary_key(&self) -> Option<&str> {
        self.status.as_ref()?.provider_id.as_deref()
    }
}

/// A trimmed object's metadata, as [`Stored`] reads it.
fn meta_key(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    let name = meta.name.as_deref().unwrap_or_default();
    match meta.namespace.as_deref() {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

fn meta_gone(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> bool {
    meta.deletion_timestamp.is_some() && meta.finalizers.as_ref().is_none_or(|f| f.is_empty())
}

impl Stored for ServiceSelector {
    fn key(&self) -> String {
        meta_key(&self.metadata)
    }
    fn resource_version(&self) -> Option<&str> {
        self.metadata.resource_version.as_deref()
    }
    fn is_gone(&self) -> bool {
        meta_gone(&self.metadata)
    }
}

impl Stored for PodController {
    fn key(&self) -> String {
        meta_key(&self.metadata)
    }
    fn resource_version(&self) -> Option<&str> {
        self.metadata.resource_version.as_deref()
    }
    fn is_gone(&self) -> bool {
        meta_gone(&self.metadata)
    }
}

impl Stored for StoredPod {
    fn key(&self) -> String {
        StoredPod::key(self)
    }
    fn resource_version(&self) -> Option<&str> {
        self.metadata.resource_version.as_deref()
    }
    fn is_gone(&self) -> bool {
        // A deleted pod stays until its kubelet confirms it stopped (graceful deletion), with
        // or without finalizers; only the watch's delete event says it is gone.
        false
    }
    fn secondary_key(&self) -> Option<&str> {
        self.node_name.as_deref()
    }
}

/// How many deletions an index remembers. A write's answer arrives within a request's time of
/// the deletion it raced with; this many deletions later it is long settled.
const TOMBSTONES: usize = 16_384;

/// Objects of one kind by `namespace/name` (or `name`).
pub struct Index<K> {
    state: RwLock<IndexState<K>>,
    synced: AtomicBool,
    subscribers: Subscribers,
    observer: OnceLock<Observer<K>>,
    keep: OnceLock<Keep<K>>,
}

type Keep<K> = Box<dyn Fn(&K) -> bool + Send + Sync>;

type Observer<K> = Box<dyn Fn(Option<&K>, Option<&K>) + Send + Sync>;

/// An object before and after a change (`None`: absent).
type Change<K> = (Option<Arc<K>>, Option<Arc<K>>);

struct IndexState<K> {
    objects: HashMap<String, Arc<K>>,
    /// Keys deleted, with the resourceVersion of their deletion: an older version of the
    /// object arriving later (the answer to a write that raced the delete event) is stale.
    tombstones: HashMap<String, Option<String>>,
    /// Tombstones oldest first, to forget them past [`TOMBSTONES`].
    tombstone_order: VecDeque<String>,
    /// Keys of the objects by their [`Stored::secondary_key`].
    by_secondary: HashMap<String, HashSet<String>>,
}

impl<K> Default for Index<K> {
    fn default() -> Self {
        Self {
            state: RwLock::new(IndexState {
                objects: HashMap::new(),
                tombstones: HashMap::new(),
                tombstone_order: VecDeque::new(),
                by_secondary: HashMap::new(),
            }),
            synced: AtomicBool::new(false),
            subscribers: Default::default(),
            observer: OnceLock::new(),
            keep: OnceLock::new(),
        }
    }
}

/// Whether a read object no longer exists: deleted, with no finalizer left to hold it (what
/// [`Stored::is_gone`] says of every kind but pods).
pub fn is_gone<K: Resource>(obj: &K) -> bool {
    let meta = obj.meta();
    meta.deletion_timestamp.is_some() && meta.finalizers.as_ref().is_none_or(|f| f.is_empty())
}

/// The resourceVersion an object was read at.
pub fn resource_version_of<K: Resource>(obj: &K) -> Option<&str> {
    obj.meta().resource_version.as_deref()
}

/// An object's index key: `namespace/name`, or `name` for cluster-scoped objects.
pub fn key_of<K: Resource>(obj: &K) -> String {
    match obj.meta().namespace.as_deref() {
        Some(ns) => format!("{ns}/{}", obj.meta().name.as_deref().unwrap_or_default()),
        None => obj.meta().name.clone().unwrap_or_default(),
    }
}

/// Whether `new` is at least as recent as `old`. ResourceVersions are opaque, but every API
/// server numbers them from etcd's revision; when they do not parse, the newcomer wins.
fn is_newer(old: Option<&str>, new: Option<&str>) -> bool {
    match (
        old.and_then(|o| o.parse::<u64>().ok()),
        new.and_then(|n| n.parse::<u64>().ok()),
    ) {
        (Some(o), Some(n)) => n >= o,
        _ => true,
    }
}

/// Whether `new` was written after the deletion recorded at `deleted` (a re-created object).
fn is_after(deleted: Option<&str>, new: Option<&str>) -> bool {
    match (
        deleted.and_then(|o| o.parse::<u64>().ok()),
        new.and_then(|n| n.parse::<u64>().ok()),
    ) {
        (Some(o), Some(n)) => n > o,
        _ => true,
    }
}

impl<K: Stored> IndexState<K> {
    /// Keeps `obj` under `key`; returns what it replaced.
    fn insert(&mut self, key: String, obj: Arc<K>) -> Option<Arc<K>> {
        if let Some(old) = self.objects.get(&key)
            && old.secondary_key() != obj.secondary_key()
        {
            let old = old.clone();
            self.unlink(&key, &old);
        }
        if let Some(secondary) = obj.secondary_key() {
            self.by_secondary
                .entry(secondary.to_string())
                .or_default()
                .insert(key.clone());
        }
        self.objects.insert(key, obj)
    }

    fn unlink(&mut self, key: &str, obj: &K) {
        if let Some(secondary) = obj.secondary_key()
            && let Some(keys) = self.by_secondary.get_mut(secondary)
        {
            keys.remove(key);
            if keys.is_empty() {
                self.by_secondary.remove(secondary);
            }
        }
    }

    /// Removes `key` and remembers its deletion; returns what was there.
    fn bury(&mut self, key: String, resource_version: Option<String>) -> Option<Arc<K>> {
        let old = self.objects.remove(&key);
        if let Some(old) = &old {
            self.unlink(&key, old);
        }
        if self
            .tombstones
            .insert(key.clone(), resource_version)
            .is_none()
        {
            self.tombstone_order.push_back(key);
        }
        while self.tombstone_order.len() > TOMBSTONES {
            if let Some(oldest) = self.tombstone_order.pop_front() {
                self.tombstones.remove(&oldest);
            }
        }
        old
    }
}

impl<K: Stored> Index<K> {
    /// One object.
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        self.read().objects.get(key).cloned()
    }

    /// Every object.
    pub fn all(&self) -> Vec<Arc<K>> {
        self.read().objects.values().cloned().collect()
    }

    /// How many objects there are.
    pub fn len(&self) -> usize {
        self.read().objects.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.read().objects.is_empty()
    }

    /// The objects whose [`Stored::secondary_key`] is `secondary`.
    pub fn by_secondary_key(&self, secondary: &str) -> Vec<Arc<K>> {
        let state = self.read();
        state
            .by_secondary
            .get(secondary)
            .into_iter()
            .flatten()
            .filter_map(|key| state.objects.get(key).cloned())
            .collect()
    }

    /// Whether the initial list has arrived.
    pub fn synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// Records an object (from a watch, or as a write of ours returned it) unless a newer
    /// version is already known or the object was deleted since this version.
    pub fn apply(&self, obj: K) {
        let key = obj.key();
        let mut state = self.write();
        // A re-created object is newer than its tombstone, which may stay: every later
        // version of it is newer still.
        if let Some(deleted) = state.tombstones.get(&key)
            && !is_after(deleted.as_deref(), obj.resource_version())
        {
            return;
        }
        // A kept object whose newer version the filter refuses (a NodePool moved to another
        // provider's NodeClass) leaves, as if deleted; one never kept stays unknown.
        let refused = !self.keeps(&obj);
        if refused
            && !state
                .objects
                .get(&key)
                .is_some_and(|old| is_newer(old.resource_version(), obj.resource_version()))
        {
            return;
        }
        if refused || obj.is_gone() {
            let rv = obj.resource_version().map(str::to_string);
            let old = state.bury(key.clone(), rv);
            drop(state);
            self.observed(old.as_deref(), None);
            self.subscribers.key(&key);
            return;
        }
        let newer = state
            .objects
            .get(&key)
            .is_none_or(|old| is_newer(old.resource_version(), obj.resource_version()));
        if newer {
            let obj = Arc::new(obj);
            let old = state.insert(key.clone(), obj.clone());
            drop(state);
            self.observed(old.as_deref(), Some(&obj));
            self.subscribers.key(&key);
        }
    }

    /// Forgets a deleted object (`obj` as the delete event carries it, at the deletion's
    /// resourceVersion) and ignores older versions of it from then on.
    pub fn remove(&self, obj: &K) {
        let rv = obj.resource_version().map(str::to_string);
        let key = obj.key();
        let old = self.write().bury(key.clone(), rv);
        self.observed(old.as_deref(), None);
        self.subscribers.key(&key);
    }

    /// Has `observer` told of every change from the first list on, with the object before
    /// and after (`None`: absent): what a watch's event handler sees, for the loops that act
    /// on transitions rather than on state (pod events). One observer per index.
    pub fn observe(&self, observer: impl Fn(Option<&K>, Option<&K>) + Send + Sync + 'static) {
        if self.observer.set(Box::new(observer)).is_err() {
            tracing::error!("an index has one observer; the second is ignored");
        }
    }

    /// Keeps only the objects `keep` accepts, from the first list on: the others are as if
    /// they did not exist (upstream's state ignores NodeClaims and NodePools of NodeClasses
    /// its cloud provider does not support). One filter per index, fixed for its life.
    pub fn keep_only(&self, keep: impl Fn(&K) -> bool + Send + Sync + 'static) {
        if self.keep.set(Box::new(keep)).is_err() {
            tracing::error!("an index has one filter; the second is ignored");
        }
    }

    fn keeps(&self, obj: &K) -> bool {
        self.keep.get().is_none_or(|keep| keep(obj))
    }

    fn observed(&self, old: Option<&K>, new: Option<&K>) {
        // The first list is where state starts, not a change.
        if let Some(observer) = self.observer.get()
            && self.synced()
        {
            observer(old, new);
        }
    }

    /// A subscription to the keys that change from now on (every key after a relist).
    pub fn subscribe(&self) -> Arc<Changes> {
        self.subscribers.subscribe()
    }

    /// Replaces everything after a (re)list: objects deleted while the watch was away go.
    pub fn reset(&self, objects: Vec<Arc<K>>) {
        let mut state = self.write();
        let before = std::mem::take(&mut state.objects);
        state.by_secondary.clear();
        for o in objects
            .into_iter()
            .filter(|o| !o.is_gone() && self.keeps(o))
        {
            state.insert(o.key(), o);
        }
        // What changed while the watch was away, as the events it missed would have told;
        // told once the lock is released, so an observer may read the index.
        let mut missed: Vec<Change<K>> = Vec::new();
        if self.observer.get().is_some() && self.synced() {
            for (key, old) in &before {
                match state.objects.get(key) {
                    None => missed.push((Some(old.clone()), None)),
                    Some(new) if new.resource_version() != old.resource_version() => {
                        missed.push((Some(old.clone()), Some(new.clone())))
                    }
                    Some(_) => {}
                }
            }
            for (key, new) in &state.objects {
                if !before.contains_key(key) {
                    missed.push((None, Some(new.clone())));
                }
            }
        }
        drop(before);
        let IndexState {
            objects,
            tombstones,
            tombstone_order,
            ..
        } = &mut *state;
        tombstones.retain(|key, _| !objects.contains_key(key));
        tombstone_order.retain(|key| tombstones.contains_key(key));
        drop(state);
        for (old, new) in missed {
            self.observed(old.as_deref(), new.as_deref());
        }
        self.synced.store(true, Ordering::Release);
        self.subscribers.all();
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, IndexState<K>> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, IndexState<K>> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }
}

/// Everything the controller watches.
pub struct Cluster {
    /// Nodes.
    pub nodes: Index<Node>,
    /// Pods, compact (see [`StoredPod`]).
    pub pods: Index<StoredPod>,
    /// The pod specs the pods share.
    pub specs: SpecInterner,
    /// NodePools.
    pub node_pools: Index<NodePool>,
    /// NodeClaims.
    pub node_claims: Index<NodeClaim>,
    /// PodDisruptionBudgets.
    pub pdbs: Index<PodDisruptionBudget>,
    /// DaemonSets (their pods' overhead lands on every new node).
    pub daemonsets: Index<DaemonSet>,
    /// Namespaces (their labels answer affinity terms' `namespaceSelector`).
    pub namespaces: Index<Namespace>,
    /// PersistentVolumeClaims, PersistentVolumes and StorageClasses: what pods' volumes
    /// require of their node.
    pub volume_claims: Index<PersistentVolumeClaim>,
    /// See `volume_claims`.
    pub volumes: Index<PersistentVolume>,
    /// See `volume_claims`.
    pub storage_classes: Index<StorageClass>,
    /// VolumeAttachments, by node: a terminating node waits for its volumes to detach.
    pub volume_attachments: Index<VolumeAttachment>,
    /// CSINodes: how many volumes of each CSI driver a node can attach.
    pub csi_nodes: Index<CSINode>,
    /// Services' pod selectors, watched only for default topology spread (see
    /// [`Cluster::with_selector_sources`]).
    pub services: Index<ServiceSelector>,
    /// ReplicaSets' pod selectors (see `services`).
    pub replica_sets: Index<PodController>,
    /// StatefulSets' pod selectors (see `services`).
    pub stateful_sets: Index<PodController>,
    /// ReplicationControllers' pod selectors (see `services`).
    pub replication_controllers: Index<PodController>,
    /// Whether the four indexes above are watched.
    selector_sources: bool,
    /// ResourceClaims, DeviceClasses and ResourceSlices, watched only when pods' device claims
    /// are simulated (see [`Cluster::with_dynamic_resources`]).
    pub resource_claims: Index<ResourceClaim>,
    /// See `resource_claims`.
    pub device_classes: Index<DeviceClass>,
    /// See `resource_claims`.
    pub resource_slices: Index<ResourceSlice>,
    /// Whether the three indexes above are watched.
    dynamic_resources: bool,
    /// Nodes a provisioning result counted on, and until when.
    pub nominations: Nominations,
    /// Nodes whose pods bound, left or finished since the pod-events loop last looked.
    pub pod_events: Arc<crate::podevents::PodEvents>,
    /// Nodes a disruption command has taken and not yet deleted (upstream's
    /// `MarkedForDeletion`): their pods need a new home and they are no place for others.
    marked: std::sync::Mutex<std::collections::BTreeSet<String>>,
    changes: watch::Sender<u64>,
}

/// Upstream's node nominations: when provisioning decides pending pods will land on an existing
/// node, that node is not a disruption candidate for a while, so consolidation does not remove
/// capacity the scheduler is about to use.
#[derive(Debug, Default)]
pub struct Nominations(std::sync::Mutex<std::collections::HashMap<String, tokio::time::Instant>>);

impl Nominations {
    /// Nominates `node` until `window` from now (a later nomination extends it).
    pub fn nominate(&self, node: &str, window: std::time::Duration) {
        let until = tokio::time::Instant::now() + window;
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, t| *t > tokio::time::Instant::now());
        let entry = map.entry(node.to_string()).or_insert(until);
        *entry = (*entry).max(until);
    }

    /// The nodes nominated now.
    pub fn nominated(&self) -> std::collections::BTreeSet<String> {
        let now = tokio::time::Instant::now();
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.iter()
            .filter(|(_, until)| **until > now)
            .map(|(node, _)| node.clone())
            .collect()
    }

    /// Whether `node` is nominated now.
    pub fn is_nominated(&self, node: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(node)
            .is_some_and(|t| *t > tokio::time::Instant::now())
    }
}

impl Default for Cluster {
    fn default() -> Self {
        let pod_events = Arc::new(crate::podevents::PodEvents::default());
        let pods = Index::default();
        let events = pod_events.clone();
        pods.observe(move |old, new| events.observe(old, new));
        Self {
            pod_events,
            nodes: Index::default(),
            pods,
            specs: SpecInterner::default(),
            node_pools: Index::default(),
            node_claims: Index::default(),
            pdbs: Index::default(),
            daemonsets: Index::default(),
            namespaces: Index::default(),
            volume_claims: Index::default(),
            volumes: Index::default(),
            storage_classes: Index::default(),
            volume_attachments: Index::default(),
            csi_nodes: Index::default(),
            services: Index::default(),
            replica_sets: Index::default(),
            stateful_sets: Index::default(),
            replication_controllers: Index::default(),
            selector_sources: false,
            resource_claims: Index::default(),
            device_classes: Index::default(),
            resource_slices: Index::default(),
            dynamic_resources: false,
            nominations: Nominations::default(),
            marked: Default::default(),
            changes: watch::channel(0).0,
        }
    }
}

impl Cluster {
    /// Watches Services, ReplicaSets, StatefulSets and ReplicationControllers too: default
    /// topology spread (`--scheduler-config`) deduces pods' selectors from them. Without it
    /// they are neither watched nor asked for.
    pub fn with_selector_sources(mut self, on: bool) -> Self {
        self.selector_sources = on;
        self
    }

    /// Watches ResourceClaims, DeviceClasses and ResourceSlices too (`resource.k8s.io/v1`):
    /// scheduling allocates pods' device claims (`IGNORE_DRA_REQUESTS=false`). Without it
    /// they are neither watched nor asked for.
    pub fn with_dynamic_resources(mut self, on: bool) -> Self {
        self.dynamic_resources = on;
        self
    }

    /// Every kind the controller watches, once: a new kind is its field and a line here, and
    /// syncing, listing and watching follow.
    fn each_kind(&self, visit: &mut impl EachKind) {
        fn same<K>(_: &Cluster, k: K) -> K {
            k
        }
        fn pod(c: &Cluster, p: Pod) -> StoredPod {
            StoredPod::new(p, &c.specs)
        }
        visit.kind(|c| &c.nodes, same::<Node>);
        visit.kind(|c| &c.pods, pod);
        visit.kind(|c| &c.node_pools, same::<NodePool>);
        visit.kind(|c| &c.node_claims, same::<NodeClaim>);
        visit.kind(|c| &c.pdbs, same::<PodDisruptionBudget>);
        visit.kind(|c| &c.daemonsets, same::<DaemonSet>);
        visit.kind(|c| &c.namespaces, same::<Namespace>);
        visit.kind(|c| &c.volume_claims, same::<PersistentVolumeClaim>);
        visit.kind(|c| &c.volumes, same::<PersistentVolume>);
        visit.kind(|c| &c.storage_classes, same::<StorageClass>);
        visit.kind(|c| &c.volume_attachments, same::<VolumeAttachment>);
        visit.kind(|c| &c.csi_nodes, same::<CSINode>);
        if self.dynamic_resources {
            visit.kind(|c| &c.resource_claims, same::<ResourceClaim>);
            visit.kind(|c| &c.device_classes, same::<DeviceClass>);
            visit.kind(|c| &c.resource_slices, same::<ResourceSlice>);
        }
        if self.selector_sources {
            visit.kind(|c| &c.services, |_, s: Service| ServiceSelector::from(s));
            visit.kind(
                |c| &c.replica_sets,
                |_, rs: ReplicaSet| PodController::from(rs),
            );
            visit.kind(
                |c| &c.stateful_sets,
                |_, ss: StatefulSet| PodController::from(ss),
            );
            visit.kind(
                |c| &c.replication_controllers,
                |_, rc: ReplicationController| PodController::from(rc),
            );
        }
    }

    /// Every pod controller watched (see [`Cluster::with_selector_sources`]).
    pub fn pod_controllers(&self) -> Vec<Arc<PodController>> {
        let mut all = self.replica_sets.all();
        all.extend(self.stateful_sets.all());
        all.extend(self.replication_controllers.all());
        all
    }

    /// Marks every index listed, whatever it holds (tests that set state by hand).
    #[cfg(test)]
    pub(crate) fn mark_listed(&self) {
        struct Mark<'a>(&'a Cluster);
        impl EachKind for Mark<'_> {
            fn kind<K: Kind, T: Stored + Send + Sync + 'static>(
                &mut self,
                index: fn(&Cluster) -> &Index<T>,
                _: fn(&Cluster, K) -> T,
            ) where
                K::DynamicType: Default,
            {
                index(self.0).synced.store(true, Ordering::Release);
            }
        }
        self.each_kind(&mut Mark(self));
    }

    /// Whether every index has its initial list.
    pub fn synced(&self) -> bool {
        struct Synced<'a>(&'a Cluster, bool);
        impl EachKind for Synced<'_> {
            fn kind<K: Kind, T: Stored + Send + Sync + 'static>(
                &mut self,
                index: fn(&Cluster) -> &Index<T>,
                _: fn(&Cluster, K) -> T,
            ) where
                K::DynamicType: Default,
            {
                self.1 &= index(self.0).synced();
            }
        }
        let mut all = Synced(self, true);
        self.each_kind(&mut all);
        all.1
    }

    /// Sets the nodes disruption has taken: the candidates of the command in flight, none
    /// when nothing is (a new leader starts with none).
    pub fn set_marked_for_deletion(&self, nodes: std::collections::BTreeSet<String>) {
        let mut set = self.marked.lock().unwrap_or_else(|e| e.into_inner());
        if *set != nodes {
            *set = nodes;
            drop(set);
            self.changed();
        }
    }

    /// The nodes marked for deletion.
    pub fn marked_for_deletion(&self) -> std::collections::BTreeSet<String> {
        self.marked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// A receiver that wakes on every change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Wakes the loops.
    pub fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// The node with this providerID (the first by name, should two claim it).
    pub fn node_for_provider_id(&self, provider_id: &str) -> Option<Arc<Node>> {
        first_by_name(self.nodes.by_secondary_key(provider_id))
    }

    /// The NodeClaim whose instance has this providerID.
    pub fn node_claim_for_provider_id(&self, provider_id: &str) -> Option<Arc<NodeClaim>> {
        first_by_name(self.node_claims.by_secondary_key(provider_id))
    }

    /// NodeClaims by their instance's providerID, for passes over every node (one index build
    /// instead of a scan per node).
    pub fn node_claims_by_provider_id(&self) -> HashMap<String, Arc<NodeClaim>> {
        self.node_claims
            .all()
            .into_iter()
            .filter_map(|c| Some((c.status.as_ref()?.provider_id.clone()?, c)))
            .collect()
    }

    /// Every bound pod (terminal ones included), grouped by node, for passes over every node.
    pub fn pods_by_node(&self) -> HashMap<String, Vec<Arc<StoredPod>>> {
        let mut by_node: HashMap<String, Vec<Arc<StoredPod>>> = HashMap::new();
        for pod in self.pods.all() {
            if let Some(node) = pod.node_name.clone() {
                by_node.entry(node).or_default().push(pod);
            }
        }
        by_node
    }

    /// Pods bound to a node.
    pub fn pods_on(&self, node: &str) -> Vec<Arc<StoredPod>> {
        self.pods.by_secondary_key(node)
    }

    /// Lists every kind once, read-only (for `plan`: the state a controller would start from).
    pub async fn list(&self, client: &Client) -> Result<(), kube::Error> {
        type Listing<'a> = Pin<Box<dyn Future<Output = Result<(), kube::Error>> + Send + 'a>>;
        struct List<'a>(&'a Cluster, &'a Client, Vec<Listing<'a>>);
        impl<'a> EachKind for List<'a> {
            fn kind<K: Kind, T: Stored + Send + Sync + 'static>(
                &mut self,
                index: fn(&Cluster) -> &Index<T>,
                convert: fn(&Cluster, K) -> T,
            ) where
                K::DynamicType: Default,
            {
                let api = Api::all(self.1.clone());
                self.2
                    .push(Box::pin(list_into(self.0, api, index, convert)));
            }
        }
        let mut listings = List(self, client, Vec::new());
        self.each_kind(&mut listings);
        for listing in listings.2 {
            listing.await?;
        }
        Ok(())
    }

    /// Starts one watch per kind, feeding the indexes until the tasks are aborted.
    pub fn watch(self: &Arc<Self>, client: &Client) -> Vec<tokio::task::JoinHandle<()>> {
        struct Watch<'a>(
            &'a Arc<Cluster>,
            &'a Client,
            Vec<tokio::task::JoinHandle<()>>,
        );
        impl EachKind for Watch<'_> {
            fn kind<K: Kind, T: Stored + Send + Sync + 'static>(
                &mut self,
                index: fn(&Cluster) -> &Index<T>,
                convert: fn(&Cluster, K) -> T,
            ) where
                K::DynamicType: Default,
            {
                let api = Api::all(self.1.clone());
                self.2
                    .push(spawn_watch(self.0.clone(), api, index, convert));
            }
        }
        let mut watches = Watch(self, client, Vec::new());
        self.each_kind(&mut watches);
        watches.2
    }
}

/// What the API serves for a watched kind.
trait Kind: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static {}
impl<K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static> Kind for K {}

/// Something done once for each watched kind (see [`Cluster::each_kind`]).
trait EachKind {
    fn kind<K: Kind, T: Stored + Send + Sync + 'static>(
        &mut self,
        index: fn(&Cluster) -> &Index<T>,
        convert: fn(&Cluster, K) -> T,
    ) where
        K::DynamicType: Default;
}

fn first_by_name<K: Resource>(objects: Vec<Arc<K>>) -> Option<Arc<K>> {
    objects
        .into_iter()
        .min_by(|a, b| a.meta().name.cmp(&b.meta().name))
}

/// Feeds one index from a watch; `convert` turns what the API server sends into what the
/// index keeps.
/// Lists every object of a kind once into its index.
async fn list_into<K, T>(
    cluster: &Cluster,
    api: Api<K>,
    index: fn(&Cluster) -> &Index<T>,
    convert: fn(&Cluster, K) -> T,
) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
    T: Stored,
{
    let listed = api.list(&Default::default()).await?;
    let objects = listed
        .items
        .into_iter()
        .map(|o| Arc::new(convert(cluster, o)))
        .collect();
    index(cluster).reset(objects);
    Ok(())
}

fn spawn_watch<K, T>(
    cluster: Arc<Cluster>,
    api: Api<K>,
    index: fn(&Cluster) -> &Index<T>,
    convert: fn(&Cluster, K) -> T,
) -> tokio::task::JoinHandle<()>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default,
    T: Stored + Send + Sync + 'static,
{
    let converting = cluster.clone();
    tokio::spawn(feed(
        api,
        move |o| convert(&converting, o),
        move |event| {
            let index = index(&cluster);
            match event {
                Fed::Listed(objects) => index.reset(objects),
                Fed::Applied(o) => index.apply(o),
                Fed::Deleted(o) => index.remove(&o),
            }
            cluster.changed();
        },
    ))
}

/// Feeds an index the caller keeps from a watch of `api` until the task is aborted: a
/// provider's own kinds (its NodeClasses), reconciled by the work queue's `run_own`.
pub fn follow<K>(api: Api<K>, index: Arc<Index<K>>) -> tokio::task::JoinHandle<()>
where
    K: Stored + Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default,
{
    tokio::spawn(feed(
        api,
        |o| o,
        move |event| match event {
            Fed::Listed(objects) => index.reset(objects),
            Fed::Applied(o) => index.apply(o),
            Fed::Deleted(o) => index.remove(&o),
        },
    ))
}

/// What a watch brings an index.
enum Fed<T> {
    /// A whole (re)list.
    Listed(Vec<Arc<T>>),
    Applied(T),
    Deleted(T),
}

/// Runs a watch of `api` for good (retrying with backoff), handing each relist and change on
/// as `convert` makes them (at once, so a relist buffers what the index keeps, not what the
/// API server sent).
async fn feed<K, T>(api: Api<K>, convert: impl Fn(K) -> T, mut on: impl FnMut(Fed<T>))
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default,
{
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut relisted = Vec::new();
    let mut not_served = false;
    while let Some(event) = stream.next().await {
        match event {
            Ok(Event::Init) => relisted.clear(),
            Ok(Event::InitApply(o)) => relisted.push(Arc::new(convert(o))),
            Ok(Event::InitDone) => on(Fed::Listed(std::mem::take(&mut relisted))),
            Ok(Event::Apply(o)) => on(Fed::Applied(convert(o))),
            Ok(Event::Delete(o)) => on(Fed::Deleted(convert(o))),
            // A kind the API server does not serve (resource.k8s.io/v1 before Kubernetes
            // 1.34) has no objects: the index counts as listed, empty, so the rest of the
            // state syncs; the watch keeps trying in case the API appears.
            Err(e) if is_not_served(&e) => {
                if !not_served {
                    not_served = true;
                    tracing::error!(kind = %K::kind(&Default::default()), error = %e, "the API server does not serve this kind; it counts as empty until it does");
                    on(Fed::Listed(Vec::new()));
                }
            }
            Err(e) => {
                tracing::warn!(kind = %K::kind(&Default::default()), error = %e, "watch failed, retrying");
            }
        }
    }
}

/// Whether a watch failed because its kind is not served (404 on the list or the watch).
fn is_not_served(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status)) => status.code == 404,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, rv: &str) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n.metadata.resource_version = Some(rv.into());
        n
    }

    /// The observer sees changes as a watch's handler would, a relist's included, and the
    /// first list as none.
    #[test]
    fn an_observer_sees_each_change_and_what_a_relist_missed() {
        use std::sync::Mutex;
        let index = Index::<Node>::default();
        let seen = Arc::new(Mutex::new(Vec::<String>::new()));
        let log = seen.clone();
        index.observe(move |old: Option<&Node>, new: Option<&Node>| {
            let rv = |n: Option<&Node>| {
                n.map_or("-".to_string(), |n| {
                    format!("{}@{}", key_of(n), n.resource_version().unwrap_or_default())
                })
            };
            log.lock()
                .unwrap()
                .push(format!("{} -> {}", rv(old), rv(new)));
        });
        index.apply(node("early", "1"));
        index.reset(vec![Arc::new(node("a", "2")), Arc::new(node("b", "3"))]);
        assert!(
            seen.lock().unwrap().is_empty(),
            "the first list is no change"
        );
        index.apply(node("a", "4"));
        index.remove(&node("b", "5"));
        index.reset(vec![Arc::new(node("a", "4")), Arc::new(node("c", "6"))]);
        index.reset(vec![Arc::new(node("c", "7"))]);
        let mut seen = seen.lock().unwrap().clone();
        // A relist reports in no particular order.
        seen[3..].sort();
        assert_eq!(
            seen,
            [
                "a@2 -> a@4",
                "b@3 -> -",
                "- -> c@6",
                "a@4 -> -",
                "c@6 -> c@7",
            ]
        );
    }

    /// A filter applies to every version: an object that stops passing it leaves the index,
    /// and comes back if a later version passes again.
    #[test]
    fn an_object_that_stops_passing_the_filter_leaves() {
        use kube::ResourceExt;
        let index = Index::<Node>::default();
        index.keep_only(|n: &Node| n.labels().contains_key("ours"));
        let labelled = |rv: &str| {
            let mut n = node("a", rv);
            n.labels_mut().insert("ours".into(), String::new());
            n
        };
        index.apply(labelled("1"));
        assert_eq!(rv(&index, "a").as_deref(), Some("1"));
        index.apply(node("a", "0"));
        assert_eq!(
            rv(&index, "a").as_deref(),
            Some("1"),
            "an older version changes nothing"
        );
        index.apply(node("a", "2"));
        assert!(index.get("a").is_none());
        index.apply(labelled("2"));
        assert!(
            index.get("a").is_none(),
            "the version that left does not come back"
        );
        index.apply(labelled("3"));
        assert_eq!(rv(&index, "a").as_deref(), Some("3"));
    }

    #[test]
    fn an_index_keeps_the_newest_version() {
        let index = Index::<Node>::default();
        index.apply(node("a", "5"));
        index.apply(node("a", "3"));
        assert_eq!(
            index.get("a").unwrap().metadata.resource_version.as_deref(),
            Some("5")
        );
        index.apply(node("a", "7"));
        assert_eq!(
            index.get("a").unwrap().metadata.resource_version.as_deref(),
            Some("7")
        );
        index.remove(&node("a", "8"));
        assert!(index.get("a").is_none());
        assert!(!index.synced());
        index.reset(vec![Arc::new(node("b", "1"))]);
        assert!(index.synced());
        assert_eq!(index.len(), 1);
    }

    fn deleting(mut n: Node, finalizers: &[&str]) -> Node {
        n.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
        n.metadata.finalizers = Some(finalizers.iter().map(|f| f.to_string()).collect());
        n
    }

    fn rv(index: &Index<Node>, key: &str) -> Option<String> {
        index
            .get(key)
            .map(|n| n.metadata.resource_version.clone().unwrap_or_default())
    }

    #[test]
    fn an_answer_to_a_write_does_not_bring_back_a_deleted_object() {
        // The finalizer's removal is answered with the object at its deletion; whichever of
        // the answer and the delete event comes first, the node ends up gone.
        let index = Index::<Node>::default();
        index.apply(deleting(node("a", "5"), &["karpenter.sh/termination"]));
        index.remove(&deleting(node("a", "9"), &[]));
        index.apply(deleting(node("a", "9"), &[]));
        assert_eq!(rv(&index, "a"), None, "answer after the delete event");

        let index = Index::<Node>::default();
        index.apply(deleting(node("a", "5"), &["karpenter.sh/termination"]));
        index.apply(deleting(node("a", "9"), &[]));
        assert_eq!(rv(&index, "a"), None, "answer before the delete event");
        index.remove(&deleting(node("a", "9"), &[]));
        assert_eq!(rv(&index, "a"), None);

        // An older write (a taint, say) answered after the delete event is stale too.
        let index = Index::<Node>::default();
        index.apply(node("a", "5"));
        index.remove(&node("a", "9"));
        index.apply(node("a", "7"));
        assert_eq!(rv(&index, "a"), None, "stale answer");
    }

    #[test]
    fn a_recreated_object_is_kept_after_its_tombstone() {
        let index = Index::<Node>::default();
        index.apply(node("a", "5"));
        index.remove(&node("a", "9"));
        index.apply(node("a", "12"));
        assert_eq!(rv(&index, "a").as_deref(), Some("12"));
        index.apply(node("a", "8"));
        assert_eq!(
            rv(&index, "a").as_deref(),
            Some("12"),
            "older than what is known"
        );
        index.remove(&node("a", "14"));
        index.apply(node("a", "13"));
        assert_eq!(rv(&index, "a"), None, "deleted again");
    }

    #[test]
    fn a_relist_drops_what_was_deleted_while_away_and_keeps_tombstones_of_the_rest() {
        let index = Index::<Node>::default();
        index.apply(node("a", "1"));
        index.apply(node("b", "2"));
        index.remove(&node("c", "3"));
        index.reset(vec![
            Arc::new(node("b", "4")),
            Arc::new(deleting(node("d", "5"), &[])),
        ]);
        assert_eq!(rv(&index, "a"), None, "deleted while the watch was away");
        assert_eq!(rv(&index, "b").as_deref(), Some("4"));
        assert_eq!(rv(&index, "d"), None, "listed as it was deleted");
        index.apply(node("c", "3"));
        assert_eq!(rv(&index, "c"), None, "a tombstone outlives the relist");
    }

    #[test]
    fn tombstones_are_bounded() {
        let index = Index::<Node>::default();
        for i in 0..(TOMBSTONES + 10) {
            index.remove(&node(&format!("n{i}"), "2"));
        }
        assert_eq!(index.read().tombstones.len(), TOMBSTONES);
        assert_eq!(index.read().tombstone_order.len(), TOMBSTONES);
        index.apply(node("n0", "1"));
        assert!(
            index.get("n0").is_some(),
            "the oldest tombstone was forgotten"
        );
        index.apply(node(&format!("n{}", TOMBSTONES + 9), "1"));
        assert!(index.get(&format!("n{}", TOMBSTONES + 9)).is_none());
    }

    fn with_provider_id(mut n: Node, id: &str) -> Node {
        n.spec = Some(k8s_openapi::api::core::v1::NodeSpec {
            provider_id: Some(id.into()),
            ..Default::default()
        });
        n
    }

    fn names(nodes: Vec<Arc<Node>>) -> Vec<String> {
        let mut names: Vec<String> = nodes
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn the_secondary_index_follows_every_change() {
        let index = Index::<Node>::default();
        index.apply(with_provider_id(node("a", "1"), "kwok://a"));
        index.apply(node("b", "2"));
        assert_eq!(names(index.by_secondary_key("kwok://a")), ["a"]);
        // b gets its providerID, a changes its own.
        index.apply(with_provider_id(node("b", "3"), "kwok://b"));
        index.apply(with_provider_id(node("a", "4"), "kwok://a2"));
        assert_eq!(
            names(index.by_secondary_key("kwok://a")),
            Vec::<String>::new()
        );
        assert_eq!(names(index.by_secondary_key("kwok://a2")), ["a"]);
        assert_eq!(names(index.by_secondary_key("kwok://b")), ["b"]);
        // A stale version changes nothing.
        index.apply(with_provider_id(node("a", "2"), "kwok://old"));
        assert!(index.by_secondary_key("kwok://old").is_empty());
        index.remove(&node("b", "5"));
        assert!(index.by_secondary_key("kwok://b").is_empty());
        index.reset(vec![Arc::new(with_provider_id(
            node("c", "6"),
            "kwok://a2",
        ))]);
        assert_eq!(
            names(index.by_secondary_key("kwok://a2")),
            ["c"],
            "a went in the relist"
        );
        assert_eq!(
            index.read().by_secondary.len(),
            1,
            "nothing else is left behind"
        );
    }

    #[test]
    fn pods_are_found_by_their_node() {
        let cluster = Cluster::default();
        let pod = |name: &str, node: Option<&str>, rv: &str| {
            let mut p = Pod::default();
            p.metadata.name = Some(name.into());
            p.metadata.namespace = Some("default".into());
            p.metadata.resource_version = Some(rv.into());
            p.spec = Some(k8s_openapi::api::core::v1::PodSpec {
                node_name: node.map(String::from),
                ..Default::default()
            });
            StoredPod::new(p, &cluster.specs)
        };
        cluster.pods.apply(pod("p", None, "1"));
        cluster.pods.apply(pod("q", Some("n1"), "2"));
        assert_eq!(cluster.pods_on("n1").len(), 1);
        cluster.pods.apply(pod("p", Some("n1"), "3"));
        assert_eq!(cluster.pods_on("n1").len(), 2, "bound since");
        cluster.pods.remove(&pod("q", Some("n1"), "4"));
        let on: Vec<String> = cluster.pods_on("n1").iter().map(|p| p.key()).collect();
        assert_eq!(on, ["default/p"]);
    }

    #[test]
    fn nominations_last_their_window_and_extend() {
        let n = Nominations::default();
        assert!(!n.is_nominated("a"));
        n.nominate("a", std::time::Duration::from_secs(3600));
        assert!(n.is_nominated("a"));
        assert!(!n.is_nominated("b"));
        // A shorter, later nomination does not cut the window short.
        n.nominate("a", std::time::Duration::ZERO);
        assert!(n.is_nominated("a"));
        n.nominate("b", std::time::Duration::ZERO);
        assert!(!n.is_nominated("b"), "an elapsed window no longer shields");
    }
}
