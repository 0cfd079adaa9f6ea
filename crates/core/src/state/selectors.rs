//! The objects that say which pods belong together, as kube-scheduler's default topology spread
//! reads them (its `DefaultSelector`): Services by their pod selector, and the
//! ReplicationControllers, ReplicaSets and StatefulSets that control pods by theirs. Only
//! what that reading needs is kept, so a cluster's thousands of ReplicaSets cost little.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{ReplicationController, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

/// The metadata kept: identity, version and deletion, what an index of them needs.
fn trimmed(meta: ObjectMeta) -> ObjectMeta {
    ObjectMeta {
        name: meta.name,
        namespace: meta.namespace,
        uid: meta.uid,
        resource_version: meta.resource_version,
        deletion_timestamp: meta.deletion_timestamp,
        finalizers: meta.finalizers,
        ..Default::default()
    }
}

/// A Service's pod selector.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServiceSelector {
    /// The Service's metadata, trimmed.
    pub metadata: ObjectMeta,
    /// `spec.selector`: `None` selects no pod, an empty map every pod of the namespace.
    pub selector: Option<BTreeMap<String, String>>,
}

impl From<Service> for ServiceSelector {
    fn from(service: Service) -> Self {
        Self {
            selector: service.spec.and_then(|s| s.selector),
            metadata: trimmed(service.metadata),
        }
    }
}

/// The kinds of pod controller kube-scheduler deduces a default spread's selector from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ControllerKind {
    /// `v1` ReplicationController: its selector is a label map.
    ReplicationController,
    /// `apps/v1` ReplicaSet.
    ReplicaSet,
    /// `apps/v1` StatefulSet.
    StatefulSet,
}

impl ControllerKind {
    /// The kind an owner reference names (`apiVersion`, `kind`), if it is one of these.
    pub fn of_owner(api_version: &str, kind: &str) -> Option<Self> {
        match (api_version, kind) {
            ("v1", "ReplicationController") => Some(Self::ReplicationController),
            ("apps/v1", "ReplicaSet") => Some(Self::ReplicaSet),
            ("apps/v1", "StatefulSet") => Some(Self::StatefulSet),
            _ => None,
        }
    }
}

/// A ReplicationController, ReplicaSet or StatefulSet: its pod selector.
#[derive(Clone, Debug, PartialEq)]
pub struct PodController {
    /// Its metadata, trimmed.
    pub metadata: ObjectMeta,
    /// Which kind it is.
    pub kind: ControllerKind,
    /// A ReplicationController's `spec.selector` as a selector's `matchLabels`; the others'
    /// `spec.selector`. `None`: none set.
    pub selector: Option<LabelSelector>,
}

impl From<ReplicaSet> for PodController {
    fn from(rs: ReplicaSet) -> Self {
        Self {
            selector: rs.spec.map(|s| s.selector),
            metadata: trimmed(rs.metadata),
            kind: ControllerKind::ReplicaSet,
        }
    }
}

impl From<StatefulSet> for PodController {
    fn from(ss: StatefulSet) -> Self {
        Self {
            selector: ss.spec.map(|s| s.selector),
            metadata: trimmed(ss.metadata),
            kind: ControllerKind::StatefulSet,
        }
    }
}

impl From<ReplicationController> for PodController {
    fn from(rc: ReplicationController) -> Self {
        Self {
            selector: rc
                .spec
                .and_then(|s| s.selector)
                .map(|labels| LabelSelector {
                    match_labels: Some(labels),
                    match_expressions: None,
                }),
            metadata: trimmed(rc.metadata),
            kind: ControllerKind::ReplicationController,
        }
    }
}
