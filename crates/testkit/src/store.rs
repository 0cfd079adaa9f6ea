//! The object store behind the fake server: every object as JSON, one resourceVersion counter
//! for all of them (as etcd's revision), and a bounded history of watch events so a watch can
//! resume from a resourceVersion or be told it is too old (410 Gone).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use http::StatusCode;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Map, Value, json};
use tokio::sync::broadcast;

use crate::resources::ResourceType;
use crate::selector::{FieldSelector, LabelSelector};

/// An error the API server answers with a `Status` object.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    /// HTTP status code.
    pub code: StatusCode,
    /// Kubernetes' `reason` (`NotFound`, `Conflict`, …).
    pub reason: &'static str,
    /// What went wrong.
    pub message: String,
}

impl ApiError {
    pub(crate) fn new(code: StatusCode, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
        }
    }

    fn not_found(rt: &ResourceType, name: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("{}.{} \"{name}\" not found", rt.plural, rt.group),
        )
    }

    fn conflict(rt: &ResourceType, name: &str) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {}.{} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                rt.plural, rt.group
            ),
        )
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "BadRequest", message)
    }

    /// The `Status` body.
    pub fn to_status(&self) -> Value {
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.message, "reason": self.reason, "code": self.code.as_u16(),
        })
    }
}

/// One change, as a watch reports it.
#[derive(Debug)]
pub(crate) struct WatchEvent {
    pub rv: u64,
    pub resource: (String, String),
    pub namespace: String,
    pub kind: &'static str,
    pub object: Arc<Value>,
}

type Key = (String, String);

/// How a patch body is read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum PatchType {
    Merge,
    Json,
    Apply,
}

pub(crate) struct Store {
    rv: u64,
    uids: u64,
    objects: HashMap<(String, String), BTreeMap<Key, Arc<Value>>>,
    history: VecDeque<Arc<WatchEvent>>,
    pub history_limit: usize,
    /// Events at or below this resourceVersion are no longer in `history`.
    compacted: u64,
    /// The time creation and deletion timestamps are taken from.
    pub clock: Clock,
    pub events: broadcast::Sender<Arc<WatchEvent>>,
}

fn res_key(rt: &ResourceType) -> (String, String) {
    (rt.group.clone(), rt.plural.clone())
}

/// Where the server reads the time it stamps objects with.
pub(crate) type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

fn stamp(t: Timestamp) -> String {
    Timestamp::from_second(t.as_second())
        .unwrap_or(Timestamp::UNIX_EPOCH)
        .to_string()
}

fn meta(obj: &Value) -> &Value {
    &obj["metadata"]
}

fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj["metadata"].is_object() {
        obj["metadata"] = json!({});
    }
    obj["metadata"]
        .as_object_mut()
        .expect("metadata is an object")
}

fn rv_of(obj: &Value) -> Option<&str> {
    meta(obj)["resourceVersion"]
        .as_str()
        .filter(|s| !s.is_empty())
}

fn has_finalizers(obj: &Value) -> bool {
    meta(obj)["finalizers"]
        .as_array()
        .is_some_and(|f| !f.is_empty())
}

impl Store {
    pub fn new(history_limit: usize) -> Self {
        Self {
            rv: 1,
            uids: 0,
            objects: HashMap::new(),
            history: VecDeque::new(),
            history_limit,
            compacted: 0,
            clock: Arc::new(Timestamp::now),
            events: broadcast::channel(1 << 16).0,
        }
    }

    /// The current resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.rv
    }

    fn record(
        &mut self,
        rt: &ResourceType,
        namespace: &str,
        kind: &'static str,
        object: Arc<Value>,
    ) {
        let event = Arc::new(WatchEvent {
            rv: self.rv,
            resource: res_key(rt),
            namespace: namespace.to_string(),
            kind,
            object,
        });
        self.history.push_back(event.clone());
        while self.history.len() > self.history_limit {
            if let Some(old) = self.history.pop_front() {
                self.compacted = old.rv;
            }
        }
        // Nobody watching is fine.
        let _ = self.events.send(event);
    }

    /// Forgets all history, so every watch from an older resourceVersion gets 410 Gone.
    pub fn compact(&mut self) {
        self.history.clear();
        self.compacted = self.rv;
    }

    pub fn get(&self, rt: &ResourceType, ns: &str, name: &str) -> Result<Arc<Value>, ApiError> {
        self.objects
            .get(&res_key(rt))
            .and_then(|m| m.get(&(ns.to_string(), name.to_string())))
            .cloned()
            .ok_or_else(|| ApiError::not_found(rt, name))
    }

    /// Objects of a type, in one namespace or all, sorted by namespace and name.
    pub fn list(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        labels: &LabelSelector,
        fields: &FieldSelector,
    ) -> Vec<Arc<Value>> {
        let Some(objects) = self.objects.get(&res_key(rt)) else {
            return Vec::new();
        };
        objects
            .iter()
            .filter(|((n, _), _)| ns.is_none_or(|ns| ns == n))
            .filter(|(_, o)| labels.matches(o) && fields.matches(o))
            .map(|(_, o)| o.clone())
            .collect()
    }

    /// One page of a list: up to `limit` objects after the key `after`, and the key to
    /// continue from when more remain.
    pub fn page(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        labels: &LabelSelector,
        fields: &FieldSelector,
        after: Option<(String, String)>,
        limit: usize,
    ) -> (Vec<Arc<Value>>, Option<(String, String)>) {
        use std::ops::Bound;
        let Some(objects) = self.objects.get(&res_key(rt)) else {
            return (Vec::new(), None);
        };
        let start = after.map_or(Bound::Unbounded, Bound::Excluded);
        let mut matching = objects
            .range((start, Bound::Unbounded))
            .filter(|((n, _), _)| ns.is_none_or(|ns| ns == n))
            .filter(|(_, o)| labels.matches(o) && fields.matches(o));
        let page: Vec<(&Key, &Arc<Value>)> = matching.by_ref().take(limit).collect();
        let next = match (page.last(), matching.next()) {
            (Some((key, _)), Some(_)) => Some((*key).clone()),
            _ => None,
        };
        (page.into_iter().map(|(_, o)| o.clone()).collect(), next)
    }

    /// Every object of every type (for the cluster stand-in and assertions).
    pub fn all(&self, group: &str, plural: &str) -> Vec<Arc<Value>> {
        self.objects
            .get(&(group.to_string(), plural.to_string()))
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Events after `since` for a watch, or `None` when that history is gone.
    pub fn since(&self, since: u64) -> Option<Vec<Arc<WatchEvent>>> {
        if since < self.compacted {
            return None;
        }
        Some(
            self.history
                .iter()
                .filter(|e| e.rv > since)
                .cloned()
                .collect(),
        )
    }

    fn next_name(&mut self, prefix: &str) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let mut x = (self.rv ^ 0x9E37_79B9_7F4A_7C15).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        let suffix: String = (0..5)
            .map(|_| {
                x ^= x >> 31;
                x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
                ALPHABET[(x % ALPHABET.len() as u64) as usize] as char
            })
            .collect();
        format!("{prefix}{suffix}")
    }

    pub fn create(
        &mut self,
        rt: &ResourceType,
        ns: Option<&str>,
        mut obj: Value,
    ) -> Result<Value, ApiError> {
        if !obj.is_object() {
            return Err(ApiError::bad_request("the body must be an object"));
        }
        let body_ns = meta(&obj)["namespace"].as_str().map(str::to_string);
        if let (Some(path), Some(body)) = (ns, body_ns.as_deref())
            && path != body
        {
            return Err(ApiError::bad_request(format!(
                "the namespace of the provided object ({body}) does not match the namespace sent on the request ({path})"
            )));
        }
        let namespace = ns.map(str::to_string).or(body_ns).unwrap_or_default();
        let mut name = meta(&obj)["name"].as_str().unwrap_or_default().to_string();
        if name.is_empty() {
            let Some(prefix) = meta(&obj)["generateName"].as_str().map(str::to_string) else {
                return Err(ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Invalid",
                    "metadata.name: Required value: name or generateName is required",
                ));
            };
            name = self.next_name(&prefix);
        }
        let key = (namespace.clone(), name.clone());
        if self
            .objects
            .get(&res_key(rt))
            .is_some_and(|m| m.contains_key(&key))
        {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "AlreadyExists",
                format!("{}.{} \"{name}\" already exists", rt.plural, rt.group),
            ));
        }
        self.rv += 1;
        self.uids += 1;
        obj["apiVersion"] = json!(rt.api_version());
        obj["kind"] = json!(rt.kind());
        let uid = format!("00000000-0000-4000-8000-{:012x}", self.uids);
        let m = meta_mut(&mut obj);
        m.insert("name".into(), json!(name));
        if !namespace.is_empty() {
            m.insert("namespace".into(), json!(namespace));
        }
        m.insert("uid".into(), json!(uid));
        m.insert("creationTimestamp".into(), json!(stamp((self.clock)())));
        m.insert("resourceVersion".into(), json!(self.rv.to_string()));
        m.insert("generation".into(), json!(1));
        m.remove("deletionTimestamp");
        let obj = Arc::new(obj);
        self.objects
            .entry(res_key(rt))
            .or_default()
            .insert(key, obj.clone());
        self.record(rt, &namespace, "ADDED", obj.clone());
        Ok((*obj).clone())
    }

    /// Replaces an object: `new` is the whole object as the client wants it. With
    /// `status_only` only its `status` is taken; otherwise a type with a status subresource
    /// keeps its stored status.
    pub fn update(
        &mut self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        mut new: Value,
        status_only: bool,
    ) -> Result<Value, ApiError> {
        let old = self.get(rt, ns, name)?;
        if let Some(rv) = rv_of(&new)
            && Some(rv) != rv_of(&old)
        {
            return Err(ApiError::conflict(rt, name));
        }
        if !new.is_object() {
            return Err(ApiError::bad_request("the body must be an object"));
        }
        if status_only {
            let status = new["status"].take();
            new = (*old).clone();
            new["status"] = status;
        } else if rt.has_status_subresource() {
            new["status"] = old["status"].clone();
        }
        let mut generation = meta(&old)["generation"].as_i64().unwrap_or(1);
        if new["spec"] != old["spec"] {
            generation += 1;
        }
        let deleting = meta(&old).get("deletionTimestamp").cloned();
        self.rv += 1;
        new["apiVersion"] = old["apiVersion"].clone();
        new["kind"] = old["kind"].clone();
        let m = meta_mut(&mut new);
        for field in ["name", "namespace", "uid", "creationTimestamp"] {
            match meta(&old).get(field) {
                Some(v) => m.insert(field.into(), v.clone()),
                None => m.remove(field),
            };
        }
        match deleting {
            Some(d) => m.insert("deletionTimestamp".into(), d),
            None => m.remove("deletionTimestamp"),
        };
        m.insert("generation".into(), json!(generation));
        m.insert("resourceVersion".into(), json!(self.rv.to_string()));
        if meta(&new).get("deletionTimestamp").is_some() && !has_finalizers(&new) {
            let key = (ns.to_string(), name.to_string());
            let obj = Arc::new(new);
            self.objects
                .entry(res_key(rt))
                .or_default()
                .insert(key.clone(), obj.clone());
            self.remove(rt, &key);
            return Ok((*obj).clone());
        }
        let obj = Arc::new(new);
        self.objects
            .entry(res_key(rt))
            .or_default()
            .insert((ns.to_string(), name.to_string()), obj.clone());
        self.record(rt, ns, "MODIFIED", obj.clone());
        Ok((*obj).clone())
    }

    pub fn patch(
        &mut self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        kind: PatchType,
        body: Value,
        status_only: bool,
    ) -> Result<Value, ApiError> {
        let old = match self.get(rt, ns, name) {
            Ok(old) => old,
            Err(_) if kind == PatchType::Apply && !status_only => {
                let mut obj = body;
                meta_mut(&mut obj).insert("name".into(), json!(name));
                return self.create(rt, Some(ns).filter(|n| !n.is_empty()), obj);
            }
            Err(e) => return Err(e),
        };
        let mut patched = (*old).clone();
        match kind {
            PatchType::Merge | PatchType::Apply => json_patch::merge(&mut patched, &body),
            PatchType::Json => {
                let ops: json_patch::Patch = serde_json::from_value(body)
                    .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
                json_patch::patch(&mut patched, &ops).map_err(|e| {
                    ApiError::new(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "Invalid",
                        format!("the JSON patch failed: {e}"),
                    )
                })?;
            }
        }
        self.update(rt, ns, name, patched, status_only)
    }

    /// Deletes an object: with finalizers it only gets a deletionTimestamp.
    pub fn delete(
        &mut self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        preconditions: &Value,
    ) -> Result<Value, ApiError> {
        let old = self.get(rt, ns, name)?;
        if let Some(uid) = preconditions["uid"].as_str()
            && Some(uid) != meta(&old)["uid"].as_str()
        {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "Conflict",
                format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    meta(&old)["uid"]
                ),
            ));
        }
        if let Some(rv) = preconditions["resourceVersion"].as_str()
            && Some(rv) != rv_of(&old)
        {
            return Err(ApiError::conflict(rt, name));
        }
        let key = (ns.to_string(), name.to_string());
        if has_finalizers(&old) {
            if meta(&old).get("deletionTimestamp").is_some() {
                return Ok((*old).clone());
            }
            let mut obj = (*old).clone();
            self.rv += 1;
            let m = meta_mut(&mut obj);
            m.insert("deletionTimestamp".into(), json!(stamp((self.clock)())));
            m.insert("resourceVersion".into(), json!(self.rv.to_string()));
            let obj = Arc::new(obj);
            self.objects
                .entry(res_key(rt))
                .or_default()
                .insert(key, obj.clone());
            self.record(rt, ns, "MODIFIED", obj.clone());
            return Ok((*obj).clone());
        }
        self.remove(rt, &key);
        Ok((*old).clone())
    }

    /// Removes an object for good, then the objects it owns (background cascade).
    fn remove(&mut self, rt: &ResourceType, key: &Key) {
        let mut work = vec![(rt.clone(), key.clone())];
        while let Some((rt, key)) = work.pop() {
            let Some(obj) = self
                .objects
                .get_mut(&res_key(&rt))
                .and_then(|m| m.remove(&key))
            else {
                continue;
            };
            self.rv += 1;
            let mut gone = (*obj).clone();
            meta_mut(&mut gone).insert("resourceVersion".into(), json!(self.rv.to_string()));
            self.record(&rt, &key.0, "DELETED", Arc::new(gone));
            let Some(uid) = meta(&obj)["uid"].as_str() else {
                continue;
            };
            let mut dependents = Vec::new();
            for ((group, plural), objects) in &self.objects {
                for (k, o) in objects {
                    let owned = meta(o)["ownerReferences"]
                        .as_array()
                        .is_some_and(|refs| refs.iter().any(|r| r["uid"] == uid));
                    if owned {
                        dependents.push((group.clone(), plural.clone(), k.clone()));
                    }
                }
            }
            for (group, plural, k) in dependents {
                let dependent_rt = ResourceType {
                    group,
                    version: "v1".into(),
                    plural,
                };
                let o = self.objects[&res_key(&dependent_rt)][&k].clone();
                if has_finalizers(&o) {
                    if meta(&o).get("deletionTimestamp").is_none() {
                        let _ = self.delete(&dependent_rt, &k.0, &k.1, &Value::Null);
                    }
                } else {
                    work.push((dependent_rt, k));
                }
            }
        }
    }
}
