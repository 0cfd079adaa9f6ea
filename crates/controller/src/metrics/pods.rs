//! Upstream's pod metrics: `karpenter_pods_state` per pod, how long pods have been unbound
//! and unstarted, how long binding and starting took (from creation, and from when
//! provisioning first found them a place), and how long provisioning took to decide about
//! them. Provisioning tells [`PodMetrics::ack`] and [`PodMetrics::decided`] when it sees and
//! decides about pods; [`PodMetrics::observe`] looks at every pod each metrics pass, as
//! upstream's pod metrics controller does on each pod's reconcile.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use karpenter_api::labels::{
    ARCH_LABEL, CAPACITY_TYPE_LABEL, INSTANCE_TYPE_LABEL, NODE_POOL_LABEL, ZONE_LABEL,
};
use karpenter_core::state::pods;

use super::registry::{Family, Gauge, Histogram, Summary};
use super::{Builder, DURATION_BUCKETS};
use crate::state::StoredPod;

/// When provisioning saw and decided about each pod, by `namespace/name` (upstream's cluster
/// state keeps these).
#[derive(Debug, Default)]
struct Times {
    /// First seen pending by the provisioner.
    acked: HashMap<String, Timestamp>,
    /// First simulated, successfully or not.
    attempted: HashMap<String, Timestamp>,
    /// First found a place by a simulation (cleared when a later one finds none).
    schedulable: HashMap<String, Timestamp>,
}

impl Times {
    fn forget(&mut self, key: &str) {
        self.acked.remove(key);
        self.attempted.remove(key);
        self.schedulable.remove(key);
    }
}

/// Pods the last passes saw pending, and not yet bound.
#[derive(Debug, Default)]
struct Seen {
    pending: HashSet<String>,
    unscheduled: HashSet<String>,
}

/// The pod metrics and what they remember between passes.
pub struct PodMetrics {
    /// `karpenter_pods_state{name,namespace,owner,node,scheduled,nodepool,zone,arch,capacity_type,instance_type,phase,ready,managed}`
    pub state: Family<Gauge>,
    /// `karpenter_pods_startup_duration_seconds`: creation to `Ready`.
    pub startup_duration: Family<Summary>,
    /// `karpenter_pods_unstarted_time_seconds{name,namespace}`
    pub unstarted_time: Family<Gauge>,
    /// `karpenter_pods_bound_duration_seconds`: creation to `PodScheduled`.
    pub bound_duration: Family<Histogram>,
    /// `karpenter_pods_unbound_time_seconds{name,namespace}`
    pub unbound_time: Family<Gauge>,
    /// `karpenter_pods_provisioning_bound_duration_seconds`
    pub provisioning_bound_duration: Family<Histogram>,
    /// `karpenter_pods_provisioning_unbound_time_seconds{name,namespace}`
    pub provisioning_unbound_time: Family<Gauge>,
    /// `karpenter_pods_provisioning_startup_duration_seconds`
    pub provisioning_startup_duration: Family<Histogram>,
    /// `karpenter_pods_provisioning_unstarted_time_seconds{name,namespace}`
    pub provisioning_unstarted_time: Family<Gauge>,
    /// `karpenter_pods_provisioning_scheduling_undecided_time_seconds{name,namespace}`
    pub scheduling_undecided_time: Family<Gauge>,
    /// `karpenter_pods_scheduling_decision_duration_seconds`: first seen to first decision.
    pub scheduling_decision_duration: Family<Histogram>,
    times: Mutex<Times>,
    seen: Mutex<Seen>,
}

const NAME_NS: [&str; 2] = ["name", "namespace"];

impl PodMetrics {
    pub(super) fn register(b: &mut Builder) -> Self {
        let from_schedulable =
            "The time from when Karpenter first thinks the pod can schedule until";
        let in_memory =
            "Note: this calculated from a point in memory, not by the pod creation timestamp.";
        Self {
            state: b.gauge(
                "karpenter_pods_state",
                "Pod state is the current state of pods. This metric can be used several ways as it is labeled by the pod name, namespace, owner, node, nodepool name, zone, architecture, capacity type, instance type, pod phase, and pod readiness.",
                &[
                    "name",
                    "namespace",
                    "owner",
                    "node",
                    "scheduled",
                    "nodepool",
                    "zone",
                    "arch",
                    "capacity_type",
                    "instance_type",
                    "phase",
                    "ready",
                    "managed",
                ],
            ),
            startup_duration: b.summary(
                "karpenter_pods_startup_duration_seconds",
                "The time from pod creation until the pod is running.",
                &[],
            ),
            unstarted_time: b.gauge(
                "karpenter_pods_unstarted_time_seconds",
                "The time from pod creation until the pod is running.",
                &NAME_NS,
            ),
            bound_duration: b.histogram(
                "karpenter_pods_bound_duration_seconds",
                "The time from pod creation until the pod is bound.",
                &[],
                &DURATION_BUCKETS,
            ),
            unbound_time: b.gauge(
                "karpenter_pods_unbound_time_seconds",
                "The time from pod creation until the pod is bound.",
                &NAME_NS,
            ),
            provisioning_bound_duration: b.histogram(
                "karpenter_pods_provisioning_bound_duration_seconds",
                &format!("{from_schedulable} it binds. {in_memory}"),
                &[],
                &DURATION_BUCKETS,
            ),
            provisioning_unbound_time: b.gauge(
                "karpenter_pods_provisioning_unbound_time_seconds",
                &format!("{from_schedulable} it binds. {in_memory}"),
                &NAME_NS,
            ),
            provisioning_startup_duration: b.histogram(
                "karpenter_pods_provisioning_startup_duration_seconds",
                &format!("{from_schedulable} the pod is running. {in_memory}"),
                &[],
                &DURATION_BUCKETS,
            ),
            provisioning_unstarted_time: b.gauge(
                "karpenter_pods_provisioning_unstarted_time_seconds",
                &format!("{from_schedulable} the pod is running. {in_memory}"),
                &NAME_NS,
            ),
            scheduling_undecided_time: b.gauge(
                "karpenter_pods_provisioning_scheduling_undecided_time_seconds",
                &format!("The time from when Karpenter has seen a pod without making a scheduling decision for the pod. {in_memory}"),
                &NAME_NS,
            ),
            scheduling_decision_duration: b.histogram(
                "karpenter_pods_scheduling_decision_duration_seconds",
                "The time it takes for Karpenter to first try to schedule a pod after it's been seen.",
                &[],
                &DURATION_BUCKETS,
            ),
            times: Mutex::default(),
            seen: Mutex::default(),
        }
    }

    fn times(&self) -> std::sync::MutexGuard<'_, Times> {
        self.times.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The provisioner saw these pods pending (`namespace/name`); the first time counts.
    pub fn ack<'a>(&self, keys: impl IntoIterator<Item = &'a str>, now: Timestamp) {
        let mut times = self.times();
        for key in keys {
            if !times.acked.contains_key(key) {
                times.acked.insert(key.to_string(), now);
            }
        }
    }

    /// A simulation decided about the pod `key`: found it a place (`placed`) or not. The
    /// first decision is timed from when the pod was first seen; the first place found is
    /// when provisioning's durations start (a later failure forgets it).
    pub fn decided(&self, key: &str, placed: bool, now: Timestamp) {
        let mut times = self.times();
        if placed {
            times.schedulable.entry(key.to_string()).or_insert(now);
        } else {
            times.schedulable.remove(key);
        }
        if times.attempted.contains_key(key) {
            return;
        }
        times.attempted.insert(key.to_string(), now);
        if let Some(acked) = times.acked.get(key) {
            self.scheduling_decision_duration
                .observe(now.duration_since(*acked).as_secs_f64());
        }
    }

    /// One pass over every pod: sets the per-pod gauges (dropping those of pods gone or past
    /// them) and observes the durations of the pods that bound or started since the last
    /// pass. `node` finds a pod's node by name.
    pub fn observe(
        &self,
        pods: &[Arc<StoredPod>],
        node: impl Fn(&str) -> Option<Arc<Node>>,
        now: Timestamp,
    ) {
        let since = |t: Timestamp| now.duration_since(t).as_secs_f64();
        let mut out = Pass::default();
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let mut times = self.times();
        let mut present = HashSet::with_capacity(pods.len());
        for pod in pods {
            let key = pod.key();
            let name = pod.metadata.name.clone().unwrap_or_default();
            let namespace = pod.metadata.namespace.clone().unwrap_or_default();
            let nn = vec![name.clone(), namespace.clone()];
            let node = pod.node_name.as_deref().and_then(&node);
            out.state.push((state_labels(pod, node.as_deref()), 1.0));
            let created = pod.metadata.creation_timestamp.as_ref().map(|t| t.0);
            let schedulable = times.schedulable.get(&key).copied();
            let pending = pod.phase.as_deref() == Some("Pending");
            let terminal = pods::is_terminal(&**pod);

            // Undecided: seen by the provisioner, not yet simulated, not bound.
            let decided = times.attempted.contains_key(&key)
                || pod.scheduled
                || pod.node_name.is_some()
                || terminal;
            if !decided && let Some(acked) = times.acked.get(&key) {
                out.undecided.push((nn.clone(), since(*acked)));
            }

            // Startup: pending until Ready.
            let mut forget = false;
            if pending || (seen.pending.contains(&key) && !pod.ready && !terminal) {
                if let Some(c) = created {
                    out.unstarted.push((nn.clone(), since(c)));
                }
                if let Some(s) = schedulable {
                    out.provisioning_unstarted.push((nn.clone(), since(s)));
                }
                if pending {
                    seen.pending.insert(key.clone());
                }
            } else if seen.pending.remove(&key) {
                if pod.ready {
                    if let (Some(ready), Some(c)) = (&pod.ready_at, created) {
                        self.startup_duration
                            .with(&[])
                            .observe(ready.0.duration_since(c).as_secs_f64());
                    }
                    if let (Some(ready), Some(s)) = (&pod.ready_at, schedulable) {
                        self.provisioning_startup_duration
                            .observe(ready.0.duration_since(s).as_secs_f64());
                    }
                }
                // Started or finished: provisioning's times for it are done with.
                forget = true;
            }

            // Binding: pending and not scheduled until `PodScheduled`.
            if pending {
                if !pod.scheduled {
                    if let Some(c) = created {
                        out.unbound.push((nn.clone(), since(c)));
                    }
                    if let Some(s) = schedulable {
                        out.provisioning_unbound.push((nn.clone(), since(s)));
                    }
                }
                seen.unscheduled.insert(key.clone());
            } else if pod.scheduled && seen.unscheduled.remove(&key) {
                if let (Some(bound), Some(c)) = (&pod.scheduled_at, created) {
                    self.bound_duration
                        .observe(bound.0.duration_since(c).as_secs_f64());
                }
                if let (Some(bound), Some(s)) = (&pod.scheduled_at, schedulable) {
                    self.provisioning_bound_duration
                        .observe(bound.0.duration_since(s).as_secs_f64());
                }
            }
            if forget {
                times.forget(&key);
            }
            present.insert(key);
        }
        // Pods gone: nothing of theirs stays.
        seen.pending.retain(|k| present.contains(k));
        seen.unscheduled.retain(|k| present.contains(k));
        times.acked.retain(|k, _| present.contains(k));
        times.attempted.retain(|k, _| present.contains(k));
        times.schedulable.retain(|k, _| present.contains(k));
        drop((seen, times));
        self.state.replace_all(out.state);
        self.unstarted_time.replace_all(out.unstarted);
        self.provisioning_unstarted_time
            .replace_all(out.provisioning_unstarted);
        self.unbound_time.replace_all(out.unbound);
        self.provisioning_unbound_time
            .replace_all(out.provisioning_unbound);
        self.scheduling_undecided_time.replace_all(out.undecided);
    }

    /// Drops every per-pod series and what the passes remembered (this replica stopped
    /// leading: the new leader reports them).
    pub fn clear(&self) {
        for f in [
            &self.state,
            &self.unstarted_time,
            &self.provisioning_unstarted_time,
            &self.unbound_time,
            &self.provisioning_unbound_time,
            &self.scheduling_undecided_time,
        ] {
            f.replace_all([]);
        }
        *self.seen.lock().unwrap_or_else(|e| e.into_inner()) = Seen::default();
        *self.times() = Times::default();
    }
}

#[derive(Default)]
struct Pass {
    state: Vec<(Vec<String>, f64)>,
    unstarted: Vec<(Vec<String>, f64)>,
    provisioning_unstarted: Vec<(Vec<String>, f64)>,
    unbound: Vec<(Vec<String>, f64)>,
    provisioning_unbound: Vec<(Vec<String>, f64)>,
    undecided: Vec<(Vec<String>, f64)>,
}

/// `karpenter_pods_state`'s labels, in the family's order.
fn state_labels(pod: &StoredPod, node: Option<&Node>) -> Vec<String> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    // Upstream rebuilds the first owner's long-deprecated selfLink.
    let owner = pod
        .metadata
        .owner_references
        .as_ref()
        .and_then(|o| o.first())
        .map(|o| {
            format!(
                "/apis/{}/namespaces/{namespace}/{}s/{}",
                o.api_version,
                o.kind.to_lowercase(),
                o.name
            )
        })
        .unwrap_or_default();
    let node_labels = node.and_then(|n| n.metadata.labels.as_ref());
    let label = |k: &str| {
        node_labels
            .and_then(|l| l.get(k))
            .cloned()
            .unwrap_or_default()
    };
    let node_pool = label(NODE_POOL_LABEL);
    vec![
        pod.metadata.name.clone().unwrap_or_default(),
        namespace,
        owner,
        pod.node_name.clone().unwrap_or_default(),
        pod.node_name.is_some().to_string(),
        node_pool.clone(),
        label(ZONE_LABEL),
        label(ARCH_LABEL),
        label(CAPACITY_TYPE_LABEL),
        label(INSTANCE_TYPE_LABEL),
        pod.phase.clone().unwrap_or_default(),
        pod.ready.to_string(),
        (!node_pool.is_empty()).to_string(),
    ]
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Pod, PodCondition, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
    use serde_json::json;

    use super::super::Metrics;
    use super::*;
    use crate::state::SpecInterner;

    fn at(minute: u32) -> Timestamp {
        format!("2026-01-01T00:{minute:02}:00Z").parse().unwrap()
    }

    /// A pod created at minute 0 with `phase`, bound at `bound` and ready at `ready`.
    fn pod(
        phase: &str,
        node: Option<&str>,
        bound: Option<u32>,
        ready: Option<u32>,
    ) -> Arc<StoredPod> {
        let condition = |type_: &str, minute: Option<u32>| {
            minute.map(|m| PodCondition {
                type_: type_.into(),
                status: "True".into(),
                last_transition_time: Some(Time(at(m))),
                ..Default::default()
            })
        };
        let unschedulable = (bound.is_none()).then(|| PodCondition {
            type_: "PodScheduled".into(),
            status: "False".into(),
            reason: Some("Unschedulable".into()),
            ..Default::default()
        });
        let p = Pod {
            metadata: ObjectMeta {
                name: Some("web-1".into()),
                namespace: Some("shop".into()),
                creation_timestamp: Some(Time(at(0))),
                owner_references: Some(vec![OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: "ReplicaSet".into(),
                    name: "web".into(),
                    uid: "u".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: node.map(str::to_string),
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some(phase.into()),
                conditions: Some(
                    [
                        condition("PodScheduled", bound),
                        condition("Ready", ready),
                        unschedulable,
                    ]
                    .into_iter()
                    .flatten()
                    .collect(),
                ),
                ..Default::default()
            }),
        };
        Arc::new(StoredPod::new(p, &SpecInterner::default()))
    }

    fn node() -> Option<Arc<Node>> {
        Some(Arc::new(
            serde_json::from_value(json!({"metadata": {"name": "n1", "labels": {
                "karpenter.sh/nodepool": "default", "topology.kubernetes.io/zone": "z1",
                "kubernetes.io/arch": "amd64", "karpenter.sh/capacity-type": "spot",
                "node.kubernetes.io/instance-type": "c-4x"}}}))
            .unwrap(),
        ))
    }

    #[test]
    fn a_pod_from_pending_to_running() {
        let m = Metrics::new();
        let p = &m.pods;
        let nn = ["web-1", "shop"];
        p.ack(["shop/web-1"], at(1));
        p.observe(&[pod("Pending", None, None, None)], |_| None, at(2));
        assert_eq!(p.unbound_time.value(&nn), Some(120.0));
        assert_eq!(p.unstarted_time.value(&nn), Some(120.0));
        assert_eq!(p.scheduling_undecided_time.value(&nn), Some(60.0));
        assert_eq!(
            p.provisioning_unbound_time.value(&nn),
            None,
            "no place found yet"
        );

        p.decided("shop/web-1", true, at(3));
        let decision = p.scheduling_decision_duration.with(&[]);
        assert_eq!((decision.count(), decision.sum()), (1, 120.0));
        p.decided("shop/web-1", true, at(4));
        assert_eq!(decision.count(), 1, "only the first decision is timed");
        p.observe(&[pod("Pending", None, None, None)], |_| None, at(5));
        assert_eq!(p.scheduling_undecided_time.value(&nn), None);
        assert_eq!(p.provisioning_unbound_time.value(&nn), Some(120.0));

        // Bound at 6 and still pending (pulling images): not unbound any more.
        p.observe(
            &[pod("Pending", Some("n1"), Some(6), None)],
            |_| node(),
            at(7),
        );
        assert_eq!(p.unbound_time.value(&nn), None);
        assert_eq!(p.unstarted_time.value(&nn), Some(420.0));
        let state = p.state.label_sets();
        assert_eq!(
            state[0],
            [
                "web-1",
                "shop",
                "/apis/apps/v1/namespaces/shop/replicasets/web",
                "n1",
                "true",
                "default",
                "z1",
                "amd64",
                "spot",
                "c-4x",
                "Pending",
                "false",
                "true"
            ]
        );

        // Running and ready at 8.
        p.observe(
            &[pod("Running", Some("n1"), Some(6), Some(8))],
            |_| node(),
            at(9),
        );
        assert_eq!(p.unstarted_time.value(&nn), None);
        let bound = p.bound_duration.with(&[]);
        assert_eq!((bound.count(), bound.sum()), (1, 360.0));
        let provisioning_bound = p.provisioning_bound_duration.with(&[]);
        assert_eq!(provisioning_bound.sum(), 180.0, "from the place found at 3");
        let started = p.startup_duration.with(&[]);
        assert_eq!((started.count(), started.sum()), (1, 480.0));
        assert_eq!(p.provisioning_startup_duration.with(&[]).sum(), 300.0);

        // Gone: its state series goes.
        p.observe(&[], |_| None, at(10));
        assert!(p.state.is_empty());
        assert_eq!(started.count(), 1);
    }

    #[test]
    fn a_failed_simulation_forgets_the_place_found() {
        let m = Metrics::new();
        let p = &m.pods;
        p.decided("shop/web-1", true, at(1));
        p.decided("shop/web-1", false, at(2));
        p.observe(&[pod("Pending", None, None, None)], |_| None, at(3));
        assert_eq!(p.provisioning_unbound_time.value(&["web-1", "shop"]), None);
        assert_eq!(
            p.scheduling_decision_duration.with(&[]).count(),
            0,
            "never acked"
        );
    }
}
