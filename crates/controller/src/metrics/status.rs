//! operatorpkg's status-condition and termination metrics, per kind
//! (`operator_nodeclaim_status_condition_count`, …) and kind-agnostic
//! (`operator_status_condition_count{group,kind}`, which upstream still emits for NodeClaims,
//! NodePools and the NodeClasses), computed as operatorpkg's status controller does: each
//! pass looks at every object, sets what its conditions are now, and compares them with what
//! the last pass saw to count transitions and time the state each one left.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use karpenter_api::labels::{NODE_INITIALIZED_LABEL, NODE_POOL_LABEL, node_class_label_key};
use karpenter_api::{NodeClaim, NodePool};
use serde_json::Value;

use super::registry::{Counter, Family, Gauge, Histogram};
use super::{Builder, DEFAULT_BUCKETS, ProviderLabels, exponential_buckets, prometheus_label};

/// One status condition as the metrics read it.
#[derive(Clone, Debug, PartialEq)]
pub struct Cond {
    /// `type`
    pub type_: String,
    /// `status`: `True`, `False` or `Unknown`.
    pub status: String,
    /// `reason`
    pub reason: String,
    /// `lastTransitionTime`
    pub since: Option<Timestamp>,
}

/// What the metrics read of an object with status conditions.
#[derive(Clone, Debug, PartialEq)]
pub struct StatusObject {
    /// `metadata.namespace`, empty for cluster-scoped kinds.
    pub namespace: String,
    /// `metadata.name`
    pub name: String,
    /// `metadata.labels`
    pub labels: BTreeMap<String, String>,
    /// `metadata.deletionTimestamp`
    pub deleting_since: Option<Timestamp>,
    /// `status.conditions`
    pub conditions: Vec<Cond>,
}

impl StatusObject {
    /// A NodeClaim's.
    pub fn of_node_claim(c: &NodeClaim) -> Self {
        let conditions = c.status.as_ref().map(|s| &s.conditions[..]).unwrap_or(&[]);
        Self::of_meta(&c.metadata, conditions.iter().map(meta_cond).collect())
    }

    /// A NodePool's.
    pub fn of_node_pool(p: &NodePool) -> Self {
        let conditions = p.status.as_ref().map(|s| &s.conditions[..]).unwrap_or(&[]);
        Self::of_meta(&p.metadata, conditions.iter().map(meta_cond).collect())
    }

    /// A Node's.
    pub fn of_node(n: &Node) -> Self {
        let conditions = n
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .map(|cs| {
                cs.iter()
                    .map(|c| Cond {
                        type_: c.type_.clone(),
                        status: c.status.clone(),
                        reason: c.reason.clone().unwrap_or_default(),
                        since: c.last_transition_time.as_ref().map(|t| t.0),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self::of_meta(&n.metadata, conditions)
    }

    /// Any object, as JSON (the providers' NodeClasses).
    pub fn of_value(v: &Value) -> Self {
        let text = |p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or_default();
        let time = |c: &Value, p: &str| c.pointer(p).and_then(Value::as_str)?.parse().ok();
        Self {
            namespace: text("/metadata/namespace").into(),
            name: text("/metadata/name").into(),
            labels: v
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().into()))
                        .collect()
                })
                .unwrap_or_default(),
            deleting_since: time(v, "/metadata/deletionTimestamp"),
            conditions: v
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|c| Cond {
                    type_: c["type"].as_str().unwrap_or_default().into(),
                    status: c["status"].as_str().unwrap_or_default().into(),
                    reason: c["reason"].as_str().unwrap_or_default().into(),
                    since: time(c, "/lastTransitionTime"),
                })
                .collect(),
        }
    }

    fn of_meta(
        meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
        conditions: Vec<Cond>,
    ) -> Self {
        Self {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            labels: meta.labels.clone().unwrap_or_default(),
            deleting_since: meta.deletion_timestamp.as_ref().map(|t| t.0),
            conditions,
        }
    }

    fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

fn meta_cond(c: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition) -> Cond {
    Cond {
        type_: c.type_.clone(),
        status: c.status.clone(),
        reason: c.reason.clone(),
        since: Some(c.last_transition_time.0),
    }
}

/// The per-kind families of one kind, and what its last pass saw.
pub struct KindMetrics {
    /// The kind, as `operator_status_condition_*{kind}` names it (`NodeClaim`).
    pub kind: String,
    /// Its API group.
    pub group: String,
    /// Whether it also feeds the kind-agnostic families (operatorpkg's
    /// `EmitDeprecatedMetrics`).
    pub deprecated: bool,
    /// The object labels that become metric labels, `(object label, metric label)`.
    extra: Vec<(String, String)>,
    /// `operator_<kind>_status_condition_transition_seconds{type,status,…}`
    pub transition_seconds: Family<Histogram>,
    /// `operator_<kind>_status_condition_count{namespace,name,type,status,reason,…}`
    pub count: Family<Gauge>,
    /// `operator_<kind>_status_condition_current_status_seconds{namespace,name,type,status,reason,…}`
    pub current_status_seconds: Family<Gauge>,
    /// `operator_<kind>_status_condition_transitions_total{type,status,reason,…}`
    pub transitions_total: Family<Counter>,
    /// `operator_<kind>_termination_current_time_seconds{namespace,name,…}`
    pub termination_current_time: Family<Gauge>,
    /// `operator_<kind>_termination_duration_seconds{…}`
    pub termination_duration: Family<Histogram>,
    observed: std::sync::Mutex<HashMap<String, StatusObject>>,
    /// Objects whose termination was timed where their finalizer came off, since the last
    /// pass (so the pass does not time them again).
    finalized: std::sync::Mutex<std::collections::HashSet<String>>,
}

/// Every status metric: per kind, and the kind-agnostic families.
pub struct StatusMetrics {
    /// NodeClaims'.
    pub node_claims: KindMetrics,
    /// NodePools'.
    pub node_pools: KindMetrics,
    /// Nodes'.
    pub nodes: KindMetrics,
    /// The provider's NodeClasses', in the provider's order.
    pub node_classes: Vec<KindMetrics>,
    /// `operator_status_condition_transition_seconds{type,status,group,kind}`
    pub transition_seconds: Family<Histogram>,
    /// `operator_status_condition_count{namespace,name,type,status,reason,group,kind}`
    pub count: Family<Gauge>,
    /// `operator_status_condition_current_status_seconds{…as count}`
    pub current_status_seconds: Family<Gauge>,
    /// `operator_status_condition_transitions_total{type,status,reason,group,kind}`
    pub transitions_total: Family<Counter>,
    /// `operator_termination_current_time_seconds{namespace,name,group,kind}`
    pub termination_current_time: Family<Gauge>,
    /// `operator_termination_duration_seconds{group,kind}`
    pub termination_duration: Family<Histogram>,
}

/// The buckets karpenter gives its status controllers' histograms: 0.5 s to about 2 h.
fn status_buckets() -> Vec<f64> {
    exponential_buckets(0.5, 2.0, 15)
}

impl KindMetrics {
    fn register(
        b: &mut Builder,
        group: &str,
        kind: &str,
        extra_keys: &[String],
        buckets: &[f64],
        deprecated: bool,
    ) -> Self {
        let extra: Vec<(String, String)> = extra_keys
            .iter()
            .map(|k| (k.clone(), prometheus_label(k)))
            .collect();
        let names = |base: &[&str]| -> Vec<String> {
            base.iter()
                .map(|s| s.to_string())
                .chain(extra.iter().map(|(_, l)| l.clone()))
                .collect()
        };
        let p = format!("operator_{}", kind.to_lowercase());
        let gauge_names = names(&["namespace", "name", "type", "status", "reason"]);
        let transition = names(&["type", "status"]);
        let transitions = names(&["type", "status", "reason"]);
        let terminating = names(&["namespace", "name"]);
        let duration = names(&[]);
        Self {
            kind: kind.into(),
            group: group.into(),
            deprecated,
            transition_seconds: b.histogram(
                &format!("{p}_status_condition_transition_seconds"),
                "The amount of time a condition was in a given state before transitioning. e.g. Alarm := P99(Updated=False) > 5 minutes",
                &refs(&transition),
                buckets,
            ),
            count: b.gauge(
                &format!("{p}_status_condition_count"),
                "The number of a condition for a given object, type and status. e.g. Alarm := Available=False > 0",
                &refs(&gauge_names),
            ),
            current_status_seconds: b.gauge(
                &format!("{p}_status_condition_current_status_seconds"),
                "The current amount of time in seconds that a status condition has been in a specific state. Alarm := P99(Updated=Unknown) > 5 minutes",
                &refs(&gauge_names),
            ),
            transitions_total: b.counter(
                &format!("{p}_status_condition_transitions_total"),
                "The count of transitions of a given object, type and status.",
                &refs(&transitions),
            ),
            termination_current_time: b.gauge(
                &format!("{p}_termination_current_time_seconds"),
                "The current amount of time in seconds that an object has been in terminating state.",
                &refs(&terminating),
            ),
            termination_duration: b.histogram(
                &format!("{p}_termination_duration_seconds"),
                "The amount of time taken by an object to terminate completely.",
                &refs(&duration),
                buckets,
            ),
            extra,
            observed: Default::default(),
            finalized: Default::default(),
        }
    }

    /// Drops its gauges and forgets what the passes saw (this replica stopped leading).
    pub fn clear(&self) {
        self.count.replace_all([]);
        self.current_status_seconds.replace_all([]);
        self.termination_current_time.replace_all([]);
        self.observed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    fn extra_values<'a>(&'a self, o: &'a StatusObject) -> Vec<&'a str> {
        self.extra
            .iter()
            .map(|(k, _)| o.labels.get(k).map_or("", String::as_str))
            .collect()
    }
}

impl StatusMetrics {
    /// Registers the families of NodeClaims, NodePools, Nodes and the provider's NodeClasses,
    /// labelled as karpenter configures operatorpkg.
    pub(super) fn register(b: &mut Builder, provider: &ProviderLabels) -> Self {
        let class_labels: Vec<String> = provider
            .node_classes
            .iter()
            .map(|(g, k)| node_class_label_key(g, k))
            .collect();
        let status = status_buckets();
        let mut claim_labels = class_labels.clone();
        claim_labels.push(NODE_POOL_LABEL.into());
        let mut node_labels = claim_labels.clone();
        node_labels.push(NODE_INITIALIZED_LABEL.into());
        let group = karpenter_api::labels::GROUP;
        let node_claims =
            KindMetrics::register(b, group, "NodeClaim", &claim_labels, &status, true);
        let node_pools = KindMetrics::register(b, group, "NodePool", &[], &status, true);
        let nodes = KindMetrics::register(b, "", "Node", &node_labels, &status, false);
        // The providers' status controllers take operatorpkg's defaults.
        let node_classes = provider
            .node_classes
            .iter()
            .map(|(g, k)| KindMetrics::register(b, g, k, &[], &DEFAULT_BUCKETS, true))
            .collect();
        let gauge = [
            "namespace",
            "name",
            "type",
            "status",
            "reason",
            "group",
            "kind",
        ];
        Self {
            node_claims,
            node_pools,
            nodes,
            node_classes,
            transition_seconds: b.histogram(
                "operator_status_condition_transition_seconds",
                "The amount of time a condition was in a given state before transitioning. e.g. Alarm := P99(Updated=False) > 5 minutes",
                &["type", "status", "group", "kind"],
                &DEFAULT_BUCKETS,
            ),
            count: b.gauge(
                "operator_status_condition_count",
                "The number of a condition for a given object, type and status. e.g. Alarm := Available=False > 0",
                &gauge,
            ),
            current_status_seconds: b.gauge(
                "operator_status_condition_current_status_seconds",
                "The current amount of time in seconds that a status condition has been in a specific state. Alarm := P99(Updated=Unknown) > 5 minutes",
                &gauge,
            ),
            transitions_total: b.counter(
                "operator_status_condition_transitions_total",
                "The count of transitions of a given object, type and status.",
                &["type", "status", "reason", "group", "kind"],
            ),
            termination_current_time: b.gauge(
                "operator_termination_current_time_seconds",
                "The current amount of time in seconds that an object has been in terminating state.",
                &["namespace", "name", "group", "kind"],
            ),
            termination_duration: b.histogram(
                "operator_termination_duration_seconds",
                "The amount of time taken by an object to terminate completely.",
                &["group", "kind"],
                &DEFAULT_BUCKETS,
            ),
        }
    }

    /// The families of the NodeClass `kind`, if the provider has it.
    pub fn node_class(&self, kind: &str) -> Option<&KindMetrics> {
        self.node_classes.iter().find(|k| k.kind == kind)
    }

    /// Times the termination of `object`, whose finalizer just came off (upstream's status
    /// controller times it when it sees the object gone; the passes here are too far apart
    /// to see every termination, so the controllers that remove finalizers say so).
    pub fn terminated(&self, kind: &KindMetrics, object: &StatusObject, now: Timestamp) {
        let Some(since) = object.deleting_since else {
            return;
        };
        let took = now.duration_since(since).as_secs_f64();
        kind.termination_duration
            .with(&kind.extra_values(object))
            .observe(took);
        if kind.deprecated {
            self.termination_duration
                .with(&[&kind.group, &kind.kind])
                .observe(took);
        }
        kind.finalized
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(object.key());
    }

    /// One pass over every object of `kind` there is now: sets the gauges, removes the series
    /// of objects and conditions that are gone, counts the transitions since the last pass
    /// and times the states they left, and times the terminations that finished.
    pub fn observe(&self, kind: &KindMetrics, objects: &[StatusObject], now: Timestamp) {
        let secs = |t: Option<Timestamp>| t.map_or(0.0, |t| now.duration_since(t).as_secs_f64());
        let (group, k) = (kind.group.as_str(), kind.kind.as_str());
        let mut gauges: Vec<(Vec<String>, f64, f64)> = Vec::new();
        let mut old_gauges: Vec<(Vec<String>, f64, f64)> = Vec::new();
        let mut terminating: Vec<(Vec<String>, f64)> = Vec::new();
        let mut old_terminating: Vec<(Vec<String>, f64)> = Vec::new();
        let mut observed = kind.observed.lock().unwrap_or_else(|e| e.into_inner());
        let mut seen = HashMap::with_capacity(objects.len());
        for o in objects {
            let extra = kind.extra_values(o);
            let with_extra = |base: &[&str]| -> Vec<String> {
                base.iter().chain(&extra).map(|s| s.to_string()).collect()
            };
            if let Some(since) = o.deleting_since {
                let age = secs(Some(since));
                terminating.push((with_extra(&[&o.namespace, &o.name]), age));
                old_terminating.push((strings(&[&o.namespace, &o.name, group, k]), age));
            }
            for c in &o.conditions {
                let base = [&o.namespace[..], &o.name, &c.type_, &c.status, &c.reason];
                gauges.push((with_extra(&base), 1.0, secs(c.since)));
                let mut old = strings(&base);
                old.extend([group.to_string(), k.to_string()]);
                old_gauges.push((old, 1.0, secs(c.since)));
            }
            let before = observed.get(&o.key());
            for c in &o.conditions {
                let was = before.and_then(|b| b.conditions.iter().find(|x| x.type_ == c.type_));
                if was.is_some_and(|w| w.status == c.status) {
                    continue;
                }
                kind.transitions_total
                    .with(&refs(&with_extra(&[&c.type_, &c.status, &c.reason])))
                    .inc();
                if kind.deprecated {
                    self.transitions_total
                        .with(&[&c.type_, &c.status, &c.reason, group, k])
                        .inc();
                }
                let Some(was) = was else { continue };
                let (Some(from), Some(to)) = (was.since, c.since) else {
                    continue;
                };
                let held = to.duration_since(from).as_secs_f64();
                kind.transition_seconds
                    .with(&refs(&with_extra(&[&was.type_, &was.status])))
                    .observe(held);
                if kind.deprecated {
                    self.transition_seconds
                        .with(&[&was.type_, &was.status, group, k])
                        .observe(held);
                }
            }
            seen.insert(o.key(), o.clone());
        }
        // Objects gone since the last pass: a termination that was seen finishes now.
        let finalized =
            std::mem::take(&mut *kind.finalized.lock().unwrap_or_else(|e| e.into_inner()));
        for (key, gone) in observed.iter() {
            if seen.contains_key(key) || finalized.contains(key) {
                continue;
            }
            if let Some(since) = gone.deleting_since {
                let took = secs(Some(since));
                let extra = kind.extra_values(gone);
                kind.termination_duration.with(&extra).observe(took);
                if kind.deprecated {
                    self.termination_duration.with(&[group, k]).observe(took);
                }
            }
        }
        *observed = seen;
        drop(observed);
        kind.count
            .replace_all(gauges.iter().map(|(l, v, _)| (l.clone(), *v)));
        kind.current_status_seconds
            .replace_all(gauges.into_iter().map(|(l, _, s)| (l, s)));
        kind.termination_current_time.replace_all(terminating);
        if kind.deprecated {
            let this = [("group", group), ("kind", k)];
            self.count
                .replace_matching(&this, old_gauges.iter().map(|(l, v, _)| (l.clone(), *v)));
            self.current_status_seconds
                .replace_matching(&this, old_gauges.into_iter().map(|(l, _, s)| (l, s)));
            self.termination_current_time
                .replace_matching(&this, old_terminating);
        }
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[cfg(test)]
mod tests {
    use super::super::Metrics;
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn claim(name: &str, conditions: &[(&str, &str, &str, &str)]) -> StatusObject {
        StatusObject {
            namespace: String::new(),
            name: name.into(),
            labels: [("karpenter.sh/nodepool".to_string(), "default".to_string())].into(),
            deleting_since: None,
            conditions: conditions
                .iter()
                .map(|(t, s, r, since)| Cond {
                    type_: t.to_string(),
                    status: s.to_string(),
                    reason: r.to_string(),
                    since: Some(at(since)),
                })
                .collect(),
        }
    }

    fn metrics() -> Metrics {
        Metrics::for_provider(&ProviderLabels {
            well_known: vec![],
            node_classes: vec![("karpenter.kwok.sh".into(), "KWOKNodeClass".into())],
        })
    }

    #[test]
    fn gauges_transitions_and_the_time_a_state_lasted() {
        let m = metrics();
        let s = &m.status;
        let kind = &s.node_claims;
        let t0 = "2026-01-01T00:00:00Z";
        s.observe(
            kind,
            &[claim("a", &[("Launched", "Unknown", "", t0)])],
            at("2026-01-01T00:00:30Z"),
        );
        let launched = ["", "a", "Launched", "Unknown", "", "", "default"];
        assert_eq!(kind.count.value(&launched), Some(1.0));
        assert_eq!(kind.current_status_seconds.value(&launched), Some(30.0));
        assert_eq!(
            s.count.value(&[
                "",
                "a",
                "Launched",
                "Unknown",
                "",
                "karpenter.sh",
                "NodeClaim"
            ]),
            Some(1.0),
            "the kind-agnostic family too"
        );
        // First sight counts as a transition, as operatorpkg's first reconcile does.
        let first = kind
            .transitions_total
            .get(&["Launched", "Unknown", "", "", "default"]);
        assert_eq!(first.map(|c| c.get()), Some(1));

        s.observe(
            kind,
            &[claim(
                "a",
                &[("Launched", "True", "Launched", "2026-01-01T00:01:00Z")],
            )],
            at("2026-01-01T00:01:10Z"),
        );
        assert_eq!(kind.count.value(&launched), None, "the old status is gone");
        assert_eq!(
            kind.current_status_seconds
                .value(&["", "a", "Launched", "True", "Launched", "", "default"]),
            Some(10.0)
        );
        let held = kind
            .transition_seconds
            .get(&["Launched", "Unknown", "", "default"])
            .unwrap();
        assert_eq!((held.count(), held.sum()), (1, 60.0));
        assert_eq!(
            kind.transitions_total
                .get(&["Launched", "True", "Launched", "", "default"])
                .map(|c| c.get()),
            Some(1)
        );

        // A reason change alone is no transition.
        s.observe(
            kind,
            &[claim(
                "a",
                &[("Launched", "True", "Other", "2026-01-01T00:01:00Z")],
            )],
            at("2026-01-01T00:01:20Z"),
        );
        assert_eq!(held.count(), 1);
    }

    #[test]
    fn a_termination_is_timed_when_the_object_goes() {
        let m = metrics();
        let s = &m.status;
        let kind = &s.node_pools;
        let mut pool = claim("p", &[]);
        pool.deleting_since = Some(at("2026-01-01T00:00:00Z"));
        s.observe(kind, &[pool], at("2026-01-01T00:00:04Z"));
        assert_eq!(kind.termination_current_time.value(&["", "p"]), Some(4.0));
        s.observe(kind, &[], at("2026-01-01T00:00:06Z"));
        assert!(kind.termination_current_time.is_empty());
        let took = kind.termination_duration.get(&[]).unwrap();
        assert_eq!((took.count(), took.sum()), (1, 6.0));
        let old = s
            .termination_duration
            .get(&["karpenter.sh", "NodePool"])
            .unwrap();
        assert_eq!(old.count(), 1);
    }

    #[test]
    fn nodes_feed_only_their_own_families() {
        let m = metrics();
        let s = &m.status;
        s.observe(
            &s.nodes,
            &[claim(
                "n",
                &[("Ready", "True", "KubeletReady", "2026-01-01T00:00:00Z")],
            )],
            at("2026-01-01T00:00:01Z"),
        );
        assert_eq!(s.nodes.count.len(), 1);
        assert!(
            s.count.is_empty(),
            "upstream emits no deprecated metrics for nodes"
        );
        assert_eq!(
            s.nodes.count.desc().labels,
            [
                "namespace",
                "name",
                "type",
                "status",
                "reason",
                "karpenter_kwok_sh_kwoknodeclass",
                "karpenter_sh_nodepool",
                "karpenter_sh_initialized"
            ]
        );
    }

    #[test]
    fn node_classes_from_json() {
        let v = serde_json::json!({
            "metadata": {"name": "default", "labels": {"a": "b"}},
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        });
        let o = StatusObject::of_value(&v);
        assert_eq!(o.name, "default");
        assert_eq!(o.conditions[0].since, Some(at("2026-01-01T00:00:00Z")));
        assert_eq!(o.labels["a"], "b");
    }
}
