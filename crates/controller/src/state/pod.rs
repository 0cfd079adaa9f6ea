//! Pods as cluster state keeps them. A `Pod` from k8s-openapi is over 4 KB before any of its
//! strings (every optional field of the spec and its containers is inline), so 100,000 of them
//! would not fit the memory a controller may use. A [`StoredPod`] keeps the metadata and the
//! status fields the controller reads, and shares its spec and labels with every pod of the
//! same template: both are interned, so a ReplicaSet's thousand pods hold one of each.

use std::collections::{BTreeMap, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, Weak};

use k8s_openapi::api::core::v1::{
    ObjectReference, Pod, PodAffinityTerm, PodCondition, PodResourceClaimStatus, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use karpenter_core::provisioning::scheduling::BoundPod;
use karpenter_core::resources::{QuantityError, Resources, pod_requests};
use karpenter_core::scheduling::hostports::{self, HostPort};
use karpenter_core::state::pods::{self, ObservedPod};

/// A pod template's spec and what scheduling derives from it, computed once per template.
#[derive(Debug)]
pub struct SharedSpec {
    /// The spec, without `nodeName` and without what neither scheduling nor draining reads.
    pub spec: PodSpec,
    /// Its requests (init containers, sidecars and overhead included).
    pub requests: Resources,
    /// Why its requests could not be read (`requests` is then empty), so that scheduling
    /// reports the pod as reading the whole `Pod` would.
    pub requests_error: Option<QuantityError>,
    /// Host ports it binds.
    pub host_ports: Vec<HostPort>,
    /// Its required pod anti-affinity terms.
    pub anti_affinity: Vec<PodAffinityTerm>,
}

/// A pod in cluster state.
#[derive(Clone, Debug)]
pub struct StoredPod {
    /// Metadata, without labels (see `labels`), managed fields or
    /// `last-applied-configuration`.
    pub metadata: ObjectMeta,
    /// Its labels, shared.
    pub labels: Arc<BTreeMap<String, String>>,
    /// The node it is bound to.
    pub node_name: Option<String>,
    /// `status.phase`.
    pub phase: Option<String>,
    /// kube-scheduler set `PodScheduled=False` with reason `Unschedulable`.
    pub unschedulable: bool,
    /// The `Ready` condition is `True`.
    pub ready: bool,
    /// When `Ready` last turned `True`, while it is (pod startup metrics).
    pub ready_at: Option<Time>,
    /// The `PodScheduled` condition is `True`.
    pub scheduled: bool,
    /// When `PodScheduled` turned `True`, while it is (pod binding metrics).
    pub scheduled_at: Option<Time>,
    /// `status.nominatedNodeName`.
    pub nominated_node_name: Option<String>,
    /// `status.startTime`.
    pub start_time: Option<Time>,
    /// The spec, shared.
    pub spec: Arc<SharedSpec>,
    /// The PersistentVolumeClaims its volumes use (the shared spec keeps no volumes).
    pub claims: Vec<String>,
    /// The ResourceClaims made for it from templates (`status.resourceClaimStatuses`).
    pub resource_claim_statuses: Vec<PodResourceClaimStatus>,
}

/// One shared value per distinct value, kept while someone holds it.
struct Interner<T> {
    values: Mutex<(HashMap<u64, Weak<T>>, usize)>,
}

impl<T> Default for Interner<T> {
    fn default() -> Self {
        Self {
            values: Mutex::new((HashMap::new(), 0)),
        }
    }
}

impl<T> Interner<T> {
    /// The value with this hash that `same` accepts, or a new one from `make`.
    fn get_or_make(
        &self,
        hash: u64,
        same: impl Fn(&T) -> bool,
        make: impl FnOnce() -> T,
    ) -> Arc<T> {
        let mut guard = self.values.lock().unwrap_or_else(|e| e.into_inner());
        let (values, inserts) = &mut *guard;
        if let Some(shared) = values.get(&hash).and_then(Weak::upgrade)
            && same(&shared)
        {
            return shared;
        }
        let shared = Arc::new(make());
        values.insert(hash, Arc::downgrade(&shared));
        *inserts += 1;
        if *inserts % 4096 == 0 {
            values.retain(|_, w| w.strong_count() > 0);
        }
        shared
    }

    fn live(&self) -> usize {
        let guard = self.values.lock().unwrap_or_else(|e| e.into_inner());
        guard.0.values().filter(|w| w.strong_count() > 0).count()
    }
}

/// Hands out one [`SharedSpec`] per distinct spec, and one label map per distinct map.
#[derive(Default)]
pub struct SpecInterner {
    specs: Interner<SharedSpec>,
    labels: Interner<BTreeMap<String, String>>,
}

fn trim_spec(spec: &mut PodSpec) {
    spec.node_name = None;
    for c in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        c.image = None;
        c.command = None;
        c.args = None;
        c.env = None;
        c.env_from = None;
        c.volume_mounts = None;
        c.liveness_probe = None;
        c.readiness_probe = None;
        c.startup_probe = None;
        c.lifecycle = None;
        c.security_context = None;
        c.working_dir = None;
        c.termination_message_path = None;
        c.termination_message_policy = None;
        c.image_pull_policy = None;
    }
    spec.volumes = None;
    spec.ephemeral_containers = None;
    spec.image_pull_secrets = None;
}

impl SpecInterner {
    /// The shared form of `spec` (trimmed first).
    pub fn intern(&self, mut spec: PodSpec) -> Arc<SharedSpec> {
        trim_spec(&mut spec);
        let mut hasher = DefaultHasher::new();
        serde_json::to_vec(&spec)
            .unwrap_or_default()
            .hash(&mut hasher);
        let hash = hasher.finish();
        let same = |s: &SharedSpec| s.spec == spec;
        let make = || {
            let pod = Pod {
                spec: Some(spec.clone()),
                ..Default::default()
            };
            let requests = pod_requests(&pod);
            SharedSpec {
                requests_error: requests.as_ref().err().cloned(),
                requests: requests.unwrap_or_default(),
                host_ports: hostports::host_ports(&pod),
                anti_affinity: spec
                    .affinity
                    .as_ref()
                    .and_then(|a| a.pod_anti_affinity.as_ref())
                    .and_then(|a| {
                        a.required_during_scheduling_ignored_during_execution
                            .clone()
                    })
                    .unwrap_or_default(),
                spec: spec.clone(),
            }
        };
        self.specs.get_or_make(hash, same, make)
    }

    /// The shared form of a label map.
    pub fn labels(&self, labels: BTreeMap<String, String>) -> Arc<BTreeMap<String, String>> {
        let mut hasher = DefaultHasher::new();
        labels.hash(&mut hasher);
        self.labels
            .get_or_make(hasher.finish(), |l| *l == labels, || labels.clone())
    }

    /// How many distinct specs are alive.
    pub fn len(&self) -> usize {
        self.specs.live()
    }

    /// Whether none are.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl StoredPod {
    /// Keeps what the controller reads of a pod.
    pub fn new(pod: Pod, specs: &SpecInterner) -> Self {
        let mut metadata = pod.metadata;
        metadata.managed_fields = None;
        let labels = specs.labels(metadata.labels.take().unwrap_or_default());
        if let Some(a) = metadata.annotations.as_mut() {
            a.remove("kubectl.kubernetes.io/last-applied-configuration");
        }
        let claims = pods::volume_claims(
            metadata.name.as_deref().unwrap_or_default(),
            pod.spec.as_ref(),
        );
        let spec = pod.spec.unwrap_or_default();
        let node_name = spec.node_name.clone().filter(|n| !n.is_empty());
        let status = pod.status.unwrap_or_default();
        let condition = |type_: &str| {
            status
                .conditions
                .iter()
                .flatten()
                .find(|c| c.type_ == type_)
                .map(|c| (c.status.as_str(), c.reason.as_deref()))
        };
        let true_since = |type_: &str| {
            status
                .conditions
                .iter()
                .flatten()
                .find(|c| c.type_ == type_ && c.status == "True")
                .map(|c| c.last_transition_time.clone())
        };
        let (scheduled, scheduled_at) = match true_since("PodScheduled") {
            Some(at) => (true, at),
            None => (false, None),
        };
        let ready_at = true_since("Ready").flatten();
        let unschedulable = condition("PodScheduled") == Some(("False", Some("Unschedulable")));
        let ready = condition("Ready").is_some_and(|(s, _)| s == "True");
        Self {
            metadata,
            labels,
            node_name,
            phase: status.phase,
            unschedulable,
            ready,
            ready_at,
            scheduled,
            scheduled_at,
            nominated_node_name: status.nominated_node_name,
            start_time: status.start_time,
            spec: specs.intern(spec),
            claims,
            resource_claim_statuses: status.resource_claim_statuses.unwrap_or_default(),
        }
    }

    /// The pod again, as the scheduler and the predicates in `karpenter_core::state::pods` take it.
    pub fn to_pod(&self) -> Pod {
        let mut spec = self.spec.spec.clone();
        spec.node_name = self.node_name.clone();
        let mut metadata = self.metadata.clone();
        metadata.labels = Some((*self.labels).clone()).filter(|l| !l.is_empty());
        let mut conditions = Vec::new();
        if self.unschedulable {
            conditions.push(PodCondition {
                type_: "PodScheduled".into(),
                status: "False".into(),
                reason: Some("Unschedulable".into()),
                ..Default::default()
            });
        }
        if self.ready {
            conditions.push(PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..Default::default()
            });
        }
        Pod {
            metadata,
            spec: Some(spec),
            status: Some(PodStatus {
                phase: self.phase.clone(),
                conditions: Some(conditions).filter(|c| !c.is_empty()),
                nominated_node_name: self.nominated_node_name.clone(),
                start_time: self.start_time.clone(),
                resource_claim_statuses: Some(self.resource_claim_statuses.clone())
                    .filter(|s| !s.is_empty()),
                ..Default::default()
            }),
        }
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!(
            "{}/{}",
            self.metadata.namespace.as_deref().unwrap_or("default"),
            self.metadata.name.as_deref().unwrap_or_default()
        )
    }

    /// As scheduling sees it on its node; `None` once it finished.
    pub fn bound(&self) -> Option<BoundPod> {
        if pods::is_terminal(self) {
            return None;
        }
        Some(BoundPod {
            namespace: self
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
            labels: self.labels.clone(),
            requests: self.spec.requests.clone(),
            host_ports: self.spec.host_ports.clone(),
            daemonset: pods::is_daemonset_pod(self),
            anti_affinity: self.spec.anti_affinity.clone(),
            terminating: self.metadata.deletion_timestamp.is_some(),
        })
    }

    /// A reference for events about it.
    pub fn reference(&self) -> ObjectReference {
        pods::reference(self)
    }
}

impl ObservedPod for StoredPod {
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn node_name(&self) -> Option<&str> {
        self.node_name.as_deref()
    }

    fn phase(&self) -> Option<&str> {
        self.phase.as_deref()
    }

    fn unschedulable(&self) -> bool {
        self.unschedulable
    }

    fn nominated_node_name(&self) -> Option<&str> {
        self.nominated_node_name.as_deref()
    }

    fn labels(&self) -> Option<&BTreeMap<String, String>> {
        // As `to_pod` gives them back: no map when there are none.
        Some(&*self.labels).filter(|l| !l.is_empty())
    }

    fn pod_spec(&self) -> Option<&PodSpec> {
        Some(&self.spec.spec)
    }

    fn requests(&self) -> Result<Resources, QuantityError> {
        match &self.spec.requests_error {
            Some(e) => Err(e.clone()),
            None => Ok(self.spec.requests.clone()),
        }
    }

    fn start_time(&self) -> Option<&Time> {
        self.start_time.as_ref()
    }

    fn bound(&self) -> Option<BoundPod> {
        StoredPod::bound(self)
    }

    fn to_pod(&self) -> Pod {
        StoredPod::to_pod(self)
    }

    fn claim_names(&self) -> Vec<String> {
        self.claims.clone()
    }

    fn resource_claim_statuses(&self) -> &[PodResourceClaimStatus] {
        &self.resource_claim_statuses
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, node: Option<&str>) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "labels": {"app": "web"},
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}", "keep": "me"}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "big/image:1", "env": [{"name": "A", "value": "1"}],
                "resources": {"requests": {"cpu": "250m"}}, "ports": [{"containerPort": 80, "hostPort": 8080}]}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}, {"type": "ContainersReady", "status": "True"}]},
        }))
        .unwrap()
    }

    #[test]
    fn pods_of_one_template_share_their_spec() {
        let specs = SpecInterner::default();
        let a = StoredPod::new(pod("a", Some("n1")), &specs);
        let b = StoredPod::new(pod("b", Some("n2")), &specs);
        assert!(
            Arc::ptr_eq(&a.spec, &b.spec),
            "nodeName does not split templates"
        );
        assert!(Arc::ptr_eq(&a.labels, &b.labels));
        assert_eq!(specs.len(), 1);
        assert_eq!(
            (a.node_name.as_deref(), b.node_name.as_deref()),
            (Some("n1"), Some("n2"))
        );
        assert_eq!(a.spec.requests.cpu, 250);
        assert_eq!(a.spec.host_ports.len(), 1);
        drop((a, b));
        assert!(specs.is_empty(), "specs go with their pods");
    }

    #[test]
    fn round_trips_what_scheduling_and_draining_read() {
        let specs = SpecInterner::default();
        let original = pod("a", Some("n1"));
        let back = StoredPod::new(original.clone(), &specs).to_pod();
        assert_eq!(back.metadata.name, original.metadata.name);
        assert_eq!(back.metadata.labels, original.metadata.labels);
        assert_eq!(
            back.metadata.annotations.as_ref().unwrap().len(),
            1,
            "last-applied-configuration dropped"
        );
        assert_eq!(back.spec.as_ref().unwrap().node_name.as_deref(), Some("n1"));
        assert_eq!(
            pod_requests(&back).unwrap(),
            pod_requests(&original).unwrap()
        );
        assert_eq!(
            hostports::host_ports(&back),
            hostports::host_ports(&original)
        );
        let conditions = back.status.unwrap().conditions.unwrap();
        assert_eq!(conditions.len(), 1, "only PodScheduled and Ready are kept");
        assert_eq!(conditions[0].type_, "Ready");
        assert!(back.spec.unwrap().containers[0].image.is_none());
    }
}
