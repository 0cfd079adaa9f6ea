//! An in-process fake Kubernetes API server for end-to-end tests of the controller.
//!
//! [`FakeApiServer`] is an axum [`Router`] that [`kube::Client`] talks to directly (no sockets),
//! or that can be bound to 127.0.0.1 for a separate process. It keeps every object as JSON and
//! implements what the controller relies on:
//!
//! - one resourceVersion counter; LIST with label and field selectors, `limit` and `continue`;
//!   WATCH streams from a resourceVersion with bookmarks, and `410 Gone` once that history is
//!   compacted ([`FakeApiServer::compact`]);
//! - create (`generateName`, 409 AlreadyExists), get, update with resourceVersion preconditions
//!   (409 Conflict), merge, strategic-merge (read as merge) and JSON patches, server-side apply
//!   (create if absent, else merged; field ownership is not tracked), status subresources;
//! - custom resources learnt from their CRDs ([`FakeApiServer::install_crds`]): their `scale`
//!   subresource (get, update with resourceVersion preconditions, patch) and the discovery of
//!   their group's versions (`GET /apis/GROUP`);
//! - deletion with finalizers (`deletionTimestamp`, removal once the last finalizer goes) and a
//!   background cascade along ownerReferences;
//! - `pods/eviction` that honours PodDisruptionBudgets (429, or 500 for a pod under two);
//! - fault injection per verb and resource ([`Fault`]) and a log of every request;
//! - [`FakeApiServer::reconcile_cluster`], standing in for kube-scheduler, kubelet and
//!   kube-controller-manager: binds pending pods to Ready nodes they fit, marks the rest
//!   `Unschedulable`, runs bound pods, removes pods of vanished nodes and keeps PDB status.

mod cluster;
pub mod eviction;
mod faults;
pub mod real;
mod request;
mod resources;
mod scale;
pub mod selector;
mod server;
mod store;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use faults::Fault;
pub use request::{ApiRequest, Verb};
pub use resources::{InvalidCrd, ResourceType, ScalePaths, install_crd};
pub use store::ApiError;
use store::Store;

/// One request the server received.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestRecord {
    /// Its verb.
    pub verb: Verb,
    /// The API group (empty for the core group).
    pub group: String,
    /// The resource plural.
    pub plural: String,
    /// The namespace, if any.
    pub namespace: Option<String>,
    /// The object name, if any.
    pub name: Option<String>,
    /// The subresource, if any.
    pub subresource: Option<String>,
    /// The name of the view it came through ([`FakeApiServer::named`]), if any: which of a
    /// test's clients (the code under test, a controller stand-in) sent it.
    pub client: Option<String>,
}

struct Inner {
    store: Mutex<Store>,
    faults: Mutex<Vec<Fault>>,
    log: Mutex<Vec<RequestRecord>>,
    bookmark_interval: Duration,
    cluster: Mutex<cluster::Memory>,
    version: Mutex<String>,
}

/// The fake API server. Clones share one store.
#[derive(Clone)]
pub struct FakeApiServer {
    inner: Arc<Inner>,
    /// The name its requests are logged under (see [`FakeApiServer::named`]).
    name: Option<Arc<str>>,
}

/// The Kubernetes version the fake server reports unless told otherwise.
pub const DEFAULT_VERSION: &str = "v1.33.2";

impl Default for FakeApiServer {
    fn default() -> Self {
        Self::new()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A test that panicked while holding the lock already failed; keep serving the others.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl FakeApiServer {
    /// An empty server keeping the last 10,000 watch events.
    pub fn new() -> Self {
        Self::with_history(10_000)
    }

    /// Teaches the server the custom resources of these CRDs (a provider's NodeClasses), as
    /// applying them teaches a real API server. See [`install_crd`].
    pub fn install_crds(
        &self,
        definitions: impl IntoIterator<Item = serde_json::Value>,
    ) -> Result<(), InvalidCrd> {
        definitions.into_iter().try_for_each(|d| install_crd(&d))
    }

    /// An empty server keeping the last `events` watch events.
    pub fn with_history(events: usize) -> Self {
        Self {
            inner: Arc::new(Inner {
                store: Mutex::new(Store::new(events)),
                faults: Mutex::new(Vec::new()),
                log: Mutex::new(Vec::new()),
                bookmark_interval: Duration::from_secs(1),
                cluster: Mutex::new(cluster::Memory::default()),
                version: Mutex::new(DEFAULT_VERSION.into()),
            }),
            name: None,
        }
    }

    /// The same server, its requests logged as sent by `name` ([`RequestRecord::client`]): so a
    /// test tells the requests of the code under test from those of its stand-ins.
    pub fn named(&self, name: &str) -> Self {
        Self {
            inner: self.inner.clone(),
            name: Some(name.into()),
        }
    }

    /// The Kubernetes version `/version` answers with (`v1.33.2` by default), as a control-plane
    /// upgrade changes it.
    pub fn set_version(&self, git_version: &str) {
        *lock(&self.inner.version) = git_version.into();
    }

    /// What `/version` answers.
    pub(crate) fn version_info(&self) -> serde_json::Value {
        let git_version = lock(&self.inner.version).clone();
        let mut parts = git_version.trim_start_matches('v').split('.');
        serde_json::json!({
            "major": parts.next().unwrap_or_default(),
            "minor": parts.next().unwrap_or_default(),
            "gitVersion": git_version,
            "gitCommit": "", "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
            "goVersion": "go1.24", "compiler": "gc", "platform": "linux/amd64",
        })
    }

    /// Stamps creation and deletion times from `clock` instead of the system's, so a test on
    /// tokio's paused clock sees objects age as its controller's clock says.
    pub fn set_clock(
        &self,
        clock: impl Fn() -> k8s_openapi::jiff::Timestamp + Send + Sync + 'static,
    ) {
        self.with_store(|s| s.clock = Arc::new(clock));
    }

    /// The router serving the Kubernetes API paths.
    pub fn router(&self) -> Router {
        Router::new()
            .fallback(server::handle)
            .with_state(self.clone())
    }

    /// A client whose requests go straight to this server, in process.
    pub fn client(&self) -> kube::Client {
        kube::Client::new(self.router(), "default")
    }

    /// Serves on `addr` (e.g. `127.0.0.1:0`) until the task is dropped; returns the address.
    pub async fn serve(
        &self,
        addr: SocketAddr,
    ) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        let router = self.router();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok((local, task))
    }

    pub(crate) fn with_store<T>(&self, f: impl FnOnce(&mut Store) -> T) -> T {
        f(&mut lock(&self.inner.store))
    }

    pub(crate) fn bookmark_interval(&self) -> Duration {
        self.inner.bookmark_interval
    }

    pub(crate) fn log(&self, req: &ApiRequest) {
        lock(&self.inner.log).push(RequestRecord {
            verb: req.verb,
            group: req.resource.group.clone(),
            plural: req.resource.plural.clone(),
            namespace: req.namespace.clone(),
            name: req.name.clone(),
            subresource: req.subresource.clone(),
            client: self.name.as_deref().map(str::to_string),
        });
    }

    /// The first fault matching the request, spent by one: its latency and error code.
    pub(crate) fn fault_for(&self, req: &ApiRequest) -> (Duration, Option<http::StatusCode>) {
        let mut faults = lock(&self.inner.faults);
        let Some(fault) = faults.iter_mut().find(|f| f.matches(req)) else {
            return (Duration::ZERO, None);
        };
        if let Some(n) = fault.times.as_mut() {
            *n -= 1;
        }
        (fault.latency, fault.code)
    }

    /// Adds a fault rule (rules are tried in the order they were added).
    pub fn inject(&self, fault: Fault) {
        lock(&self.inner.faults).push(fault);
    }

    /// Removes every fault rule.
    pub fn clear_faults(&self) {
        lock(&self.inner.faults).clear();
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<RequestRecord> {
        lock(&self.inner.log).clone()
    }

    /// How many requests of a verb went to a resource.
    pub fn count(&self, verb: Verb, plural: &str) -> usize {
        lock(&self.inner.log)
            .iter()
            .filter(|r| r.verb == verb && r.plural == plural)
            .count()
    }

    /// Forgets the watch history: every watch resuming from an older resourceVersion gets
    /// 410 Gone and must relist.
    pub fn compact(&self) {
        self.with_store(Store::compact);
    }

    /// Creates an object as a test's setup would (no faults, not logged).
    pub fn create<K: k8s_openapi::Resource + Serialize>(
        &self,
        object: &K,
    ) -> Result<Value, ApiError> {
        let value =
            serde_json::to_value(object).map_err(|e| ApiError::bad_request(e.to_string()))?;
        let namespace = value["metadata"]["namespace"].as_str().map(str::to_string);
        self.with_store(|s| s.create(&resource_type::<K>(), namespace.as_deref(), value))
    }

    /// Every object of a type, parsed (objects that do not parse are skipped).
    pub fn list<K: k8s_openapi::Resource + DeserializeOwned>(&self) -> Vec<K> {
        let rt = resource_type::<K>();
        eviction::typed(&self.with_store(|s| s.all(&rt.group, &rt.plural)))
    }

    /// One object, parsed.
    pub fn get<K: k8s_openapi::Resource + DeserializeOwned>(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<K> {
        let rt = resource_type::<K>();
        let value = self.with_store(|s| s.get(&rt, namespace, name)).ok()?;
        serde_json::from_value((*value).clone()).ok()
    }

    /// Merge-patches an object as a test would (status included, no faults, not logged).
    pub fn merge<K: k8s_openapi::Resource>(
        &self,
        namespace: &str,
        name: &str,
        patch: Value,
    ) -> Result<Value, ApiError> {
        let rt = resource_type::<K>();
        let has_status = patch.get("status").is_some();
        let mut rest = patch.clone();
        if let Some(m) = rest.as_object_mut() {
            m.remove("status");
        }
        self.with_store(|s| {
            let mut out = s.patch(&rt, namespace, name, store::PatchType::Merge, rest, false)?;
            if has_status {
                out = s.patch(
                    &rt,
                    namespace,
                    name,
                    store::PatchType::Merge,
                    serde_json::json!({"status": patch["status"]}),
                    true,
                )?;
            }
            Ok(out)
        })
    }

    /// Deletes an object as a test would (finalizers honoured, no faults, not logged).
    pub fn delete<K: k8s_openapi::Resource>(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Value, ApiError> {
        let rt = resource_type::<K>();
        self.with_store(|s| s.delete(&rt, namespace, name, &Value::Null))
    }
}

/// The resource type of a Rust type.
pub fn resource_type<K: k8s_openapi::Resource>() -> ResourceType {
    ResourceType {
        group: K::GROUP.to_string(),
        version: K::VERSION.to_string(),
        plural: K::URL_PATH_SEGMENT.to_string(),
    }
}

/// Runs `f` until it returns `Some`, polling every 20 ms, for at most `timeout`.
pub async fn eventually<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
