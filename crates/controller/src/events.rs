//! Kubernetes events with upstream's reasons, deduplicated as upstream's recorder does (one
//! event per reason and dedupe values — usually the object's UID — per window, whatever the
//! message) and rate-limited for the per-pod `Nominated` flood. [`catalog`] builds every event
//! upstream publishes, with its type, message and dedupe.

pub mod catalog;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::PostParams;
use kube::{Api, Client, Resource, ResourceExt};

use crate::Clock;

/// Upstream's default dedupe window.
pub const DEFAULT_DEDUPE: Duration = Duration::from_secs(120);

/// `Normal` or `Warning`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// Something expected happened.
    Normal,
    /// Something a person may need to act on.
    Warning,
}

/// Publishes events as `karpenter` (core/v1 Events, which `kubectl describe` shows).
pub struct Recorder {
    client: Client,
    clock: Clock,
    gate: Gate,
}

/// Which events go out: dedupe and the rate limit.
struct Gate {
    seen: Mutex<HashMap<String, Instant>>,
    bucket: Mutex<(f64, Instant)>,
}

impl Gate {
    fn admit(&self, key: String, note: &Note<'_>) -> bool {
        let now = Instant::now();
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen
            .get(&key)
            .is_some_and(|at| now.duration_since(*at) < note.dedupe)
        {
            return false;
        }
        if note.rate_limited {
            let mut bucket = self.bucket.lock().unwrap_or_else(|e| e.into_inner());
            let tokens = (bucket.0 + now.duration_since(bucket.1).as_secs_f64() * 5.0).min(10.0);
            if tokens < 1.0 {
                *bucket = (tokens, now);
                return false;
            }
            *bucket = (tokens - 1.0, now);
        }
        if seen.len() > 10_000 {
            seen.retain(|_, at| now.duration_since(*at) < DEFAULT_DEDUPE * 10);
        }
        seen.insert(key, now);
        true
    }
}

impl Default for Gate {
    fn default() -> Self {
        Self {
            seen: Mutex::new(HashMap::new()),
            bucket: Mutex::new((10.0, Instant::now())),
        }
    }
}

/// An event about to be published.
pub struct Note<'a> {
    /// Normal or Warning.
    pub type_: EventType,
    /// Upstream's reason (`Nominated`, `FailedScheduling`, `DisruptionBlocked`, …).
    pub reason: &'a str,
    /// The message.
    pub message: String,
    /// Events with the same reason and dedupe values within this window are dropped.
    pub dedupe: Duration,
    /// What makes two events the same for dedupe, with the reason (upstream's
    /// `DedupeValues`). Empty: the object and the message do, as the events providers
    /// publish without values have always been deduplicated.
    pub dedupe_values: Vec<String>,
    /// Whether the event shares the rate limit (5/s, burst 10) of the per-pod events.
    pub rate_limited: bool,
}

impl Note<'_> {
    /// The key two events share when they are the same for dedupe: upstream's
    /// `lowercase(reason)-values…`, or, without values, the object, reason and message.
    pub fn dedupe_key(&self, reference: &ObjectReference) -> String {
        if self.dedupe_values.is_empty() {
            return format!(
                "{}/{:?}/{}/{}/{}",
                reference.kind.as_deref().unwrap_or_default(),
                reference.namespace,
                reference.name.as_deref().unwrap_or_default(),
                self.reason,
                self.message
            );
        }
        format!(
            "{}-{}",
            self.reason.to_lowercase(),
            self.dedupe_values.join("-")
        )
    }

    /// The same note deduplicated by `values` (upstream's `DedupeValues`).
    pub fn deduped_by(mut self, values: &[&str]) -> Self {
        self.dedupe_values = values.iter().map(|v| v.to_string()).collect();
        self
    }

    /// The same note with its own dedupe window (upstream's `DedupeTimeout`).
    pub fn for_window(mut self, window: Duration) -> Self {
        self.dedupe = window;
        self
    }
}

impl Recorder {
    /// A recorder writing through `client`, stamping events with `clock`'s time.
    pub fn new(client: Client, clock: Clock) -> Self {
        Self {
            client,
            clock,
            gate: Gate::default(),
        }
    }

    /// Publishes an event about `object`; failures are logged, never returned (an event is
    /// never worth failing a reconcile for).
    pub async fn publish<K: Resource<DynamicType = ()>>(&self, object: &K, note: Note<'_>) {
        let reference = ObjectReference {
            api_version: Some(K::api_version(&()).into_owned()),
            kind: Some(K::kind(&()).into_owned()),
            name: Some(object.name_any()),
            namespace: object.namespace(),
            uid: object.meta().uid.clone(),
            ..Default::default()
        };
        self.publish_to(reference, note).await;
    }

    /// Publishes an event about the object `reference` names.
    pub async fn publish_to(&self, reference: ObjectReference, note: Note<'_>) {
        let name = reference.name.clone().unwrap_or_default();
        let namespace = reference.namespace.clone();
        let key = note.dedupe_key(&reference);
        if !self.gate.admit(key, &note) {
            return;
        }
        let now = Time(self.clock.now());
        let event = Event {
            metadata: ObjectMeta {
                generate_name: Some(format!("{name}.")),
                namespace: Some(namespace.clone().unwrap_or_else(|| "default".into())),
                ..Default::default()
            },
            involved_object: reference,
            reason: Some(note.reason.to_string()),
            message: Some(note.message),
            type_: Some(match note.type_ {
                EventType::Normal => "Normal".into(),
                EventType::Warning => "Warning".into(),
            }),
            source: Some(EventSource {
                component: Some("karpenter".into()),
                host: None,
            }),
            first_timestamp: Some(now.clone()),
            last_timestamp: Some(now),
            count: Some(1),
            ..Default::default()
        };
        let api: Api<Event> = Api::namespaced(
            self.client.clone(),
            namespace.as_deref().unwrap_or("default"),
        );
        if let Err(e) = api.create(&PostParams::default(), &event).await {
            tracing::debug!(error = %e, "failed to publish event");
        }
    }
}

/// A Normal event with the default dedupe window.
pub fn normal(reason: &str, message: impl Into<String>) -> Note<'_> {
    Note {
        type_: EventType::Normal,
        reason,
        message: message.into(),
        dedupe: DEFAULT_DEDUPE,
        dedupe_values: Vec::new(),
        rate_limited: false,
    }
}

/// A Warning event with the default dedupe window.
pub fn warning(reason: &str, message: impl Into<String>) -> Note<'_> {
    Note {
        type_: EventType::Warning,
        ..normal(reason, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_events_are_deduplicated_and_pod_events_rate_limited() {
        let recorder = Gate::default();
        assert!(recorder.admit("a".into(), &normal("R", "m")));
        assert!(
            !recorder.admit("a".into(), &normal("R", "m")),
            "same key within the window"
        );
        assert!(recorder.admit("b".into(), &normal("R", "m")));
        let limited = |i: usize| Note {
            rate_limited: true,
            ..normal("Nominated", format!("{i}"))
        };
        let admitted = (0..50)
            .filter(|&i| recorder.admit(format!("pod-{i}"), &limited(i)))
            .count();
        assert!((10..=11).contains(&admitted), "burst of 10, got {admitted}");
    }

    #[test]
    fn dedupe_keys_are_upstreams_reason_and_values() {
        let pod = ObjectReference {
            kind: Some("Pod".into()),
            name: Some("p".into()),
            ..Default::default()
        };
        let a = normal("FailedScheduling", "one").deduped_by(&["uid-1"]);
        let b = normal("FailedScheduling", "two").deduped_by(&["uid-1"]);
        assert_eq!(a.dedupe_key(&pod), "failedscheduling-uid-1");
        assert_eq!(
            a.dedupe_key(&pod),
            b.dedupe_key(&pod),
            "another message is the same event"
        );
        let plain = |m: &str| normal("R", m).dedupe_key(&pod);
        assert_ne!(
            plain("one"),
            plain("two"),
            "without values the message counts"
        );
    }
}
