//! Cluster state: an in-memory index of every object the controller reasons about, fed by
//! watches (the linkerd policy-controller pattern) and by the controller's own writes, so a
//! decision never waits for its own change to come back round.

pub mod pod;

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use karpenter_api::{NodeClaim, NodePool};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

pub use pod::{SharedSpec, SpecInterner, StoredPod};

/// What an index can hold: objects with a key and a resourceVersion.
pub trait Stored {
    /// `namespace/name`, or `name` for cluster-scoped objects.
    fn key(&self) -> String;
    /// The resourceVersion it was read at.
    fn resource_version(&self) -> Option<&str>;
}

macro_rules! stored_resource {
    ($($ty:ty),*) => {$(
        impl Stored for $ty {
            fn key(&self) -> String {
                key_of(self)
            }
            fn resource_version(&self) -> Option<&str> {
                self.meta().resource_version.as_deref()
            }
        }
    )*};
}

stored_resource!(Node, NodePool, NodeClaim, PodDisruptionBudget, DaemonSet);

impl Stored for StoredPod {
    fn key(&self) -> String {
        StoredPod::key(self)
    }
    fn resource_version(&self) -> Option<&str> {
        self.metadata.resource_version.as_deref()
    }
}

/// Objects of one kind by `namespace/name` (or `name`).
pub struct Index<K> {
    objects: RwLock<HashMap<String, Arc<K>>>,
    synced: AtomicBool,
}

impl<K> Default for Index<K> {
    fn default() -> Self {
        Self {
            objects: RwLock::new(HashMap::new()),
            synced: AtomicBool::new(false),
        }
    }
}

fn key_of<K: Resource>(obj: &K) -> String {
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

impl<K: Stored> Index<K> {
    /// One object.
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        self.read().get(key).cloned()
    }

    /// Every object.
    pub fn all(&self) -> Vec<Arc<K>> {
        self.read().values().cloned().collect()
    }

    /// How many objects there are.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// Whether the initial list has arrived.
    pub fn synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// Records an object (from a watch, or as a write of ours returned it) unless a newer
    /// version is already known.
    pub fn apply(&self, obj: K) {
        let key = obj.key();
        let mut objects = self.write();
        let newer = objects
            .get(&key)
            .is_none_or(|old| is_newer(old.resource_version(), obj.resource_version()));
        if newer {
            objects.insert(key, Arc::new(obj));
        }
    }

    /// Forgets a deleted object.
    pub fn remove(&self, obj: &K) {
        self.write().remove(&obj.key());
    }

    /// Replaces everything after a (re)list.
    pub fn reset(&self, objects: Vec<Arc<K>>) {
        *self.write() = objects.into_iter().map(|o| (o.key(), o)).collect();
        self.synced.store(true, Ordering::Release);
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Arc<K>>> {
        self.objects.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Arc<K>>> {
        self.objects.write().unwrap_or_else(|e| e.into_inner())
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
    /// Nodes a provisioning result counted on, and until when.
    pub nominations: Nominations,
    changes: watch::Sender<u64>,
}

/// Upstream's node nominations: when provisioning decides pending pods will land on an existing
/// node, that node is not a disruption candidate for a while, so consolidation does not remove
/// capacity the scheduler is about to use.
#[derive(Debug, Default)]
pub struct Nominations(std::sync::Mutex<std::collections::HashMap<String, std::time::Instant>>);

impl Nominations {
    /// Nominates `node` until `window` from now (a later nomination extends it).
    pub fn nominate(&self, node: &str, window: std::time::Duration) {
        let until = std::time::Instant::now() + window;
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, t| *t > std::time::Instant::now());
        let entry = map.entry(node.to_string()).or_insert(until);
        *entry = (*entry).max(until);
    }

    /// Whether `node` is nominated now.
    pub fn is_nominated(&self, node: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(node)
            .is_some_and(|t| *t > std::time::Instant::now())
    }
}

impl Default for Cluster {
    fn default() -> Self {
        Self {
            nodes: Index::default(),
            pods: Index::default(),
            specs: SpecInterner::default(),
            node_pools: Index::default(),
            node_claims: Index::default(),
            pdbs: Index::default(),
            daemonsets: Index::default(),
            nominations: Nominations::default(),
            changes: watch::channel(0).0,
        }
    }
}

impl Cluster {
    /// Whether every index has its initial list.
    pub fn synced(&self) -> bool {
        self.nodes.synced()
            && self.pods.synced()
            && self.node_pools.synced()
            && self.node_claims.synced()
            && self.pdbs.synced()
            && self.daemonsets.synced()
    }

    /// A receiver that wakes on every change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Wakes the loops.
    pub fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// The node with this providerID.
    pub fn node_for_provider_id(&self, provider_id: &str) -> Option<Arc<Node>> {
        self.nodes
            .all()
            .into_iter()
            .find(|n| n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(provider_id))
    }

    /// The NodeClaim whose instance has this providerID.
    pub fn node_claim_for_provider_id(&self, provider_id: &str) -> Option<Arc<NodeClaim>> {
        self.node_claims
            .all()
            .into_iter()
            .find(|c| c.status.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(provider_id))
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
        self.pods
            .all()
            .into_iter()
            .filter(|p| p.node_name.as_deref() == Some(node))
            .collect()
    }

    /// Starts one watch per kind, feeding the indexes until the tasks are aborted.
    pub fn watch(self: &Arc<Self>, client: &Client) -> Vec<tokio::task::JoinHandle<()>> {
        fn same<K>(_: &Cluster, k: K) -> K {
            k
        }
        fn pod(c: &Cluster, p: Pod) -> StoredPod {
            StoredPod::new(p, &c.specs)
        }
        vec![
            spawn_watch(self.clone(), Api::all(client.clone()), |c| &c.nodes, same),
            spawn_watch(self.clone(), Api::all(client.clone()), |c| &c.pods, pod),
            spawn_watch(
                self.clone(),
                Api::all(client.clone()),
                |c| &c.node_pools,
                same,
            ),
            spawn_watch(
                self.clone(),
                Api::all(client.clone()),
                |c| &c.node_claims,
                same,
            ),
            spawn_watch(self.clone(), Api::all(client.clone()), |c| &c.pdbs, same),
            spawn_watch(
                self.clone(),
                Api::all(client.clone()),
                |c| &c.daemonsets,
                same,
            ),
        ]
    }
}

/// Feeds one index from a watch; `convert` turns what the API server sends into what the
/// index keeps.
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
    tokio::spawn(async move {
        let mut stream = watcher::watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        let mut relisted = Vec::new();
        while let Some(event) = stream.next().await {
            match event {
                Ok(Event::Init) => relisted.clear(),
                Ok(Event::InitApply(o)) => relisted.push(Arc::new(convert(&cluster, o))),
                Ok(Event::InitDone) => index(&cluster).reset(std::mem::take(&mut relisted)),
                Ok(Event::Apply(o)) => index(&cluster).apply(convert(&cluster, o)),
                Ok(Event::Delete(o)) => index(&cluster).remove(&convert(&cluster, o)),
                Err(e) => {
                    tracing::warn!(kind = %K::kind(&Default::default()), error = %e, "watch failed, retrying");
                    continue;
                }
            }
            cluster.changed();
        }
    })
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
