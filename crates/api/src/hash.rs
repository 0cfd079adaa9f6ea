//! The NodePool template hash behind static drift.
//!
//! A NodeClaim records the hash of the template it was made from
//! (`karpenter.sh/nodepool-hash`); when the NodePool's hash moves on, the claim has drifted.
//! Only the fields that cannot be changed on a running node are hashed: template labels and
//! annotations, taints, startup taints, the NodeClass reference, `expireAfter` and
//! `terminationGracePeriod`. Requirements are judged by label compatibility instead, and
//! disruption settings, limits and weight are behaviour, not node shape.
//!
//! The algorithm is this project's own, so it carries its own
//! `karpenter.sh/nodepool-hash-version`. That is upstream's mechanism for changing hash
//! algorithms without drifting every node: a NodeClaim whose version differs from the
//! controller's is re-stamped with the current hash instead of being judged, so moving a
//! cluster between upstream Karpenter and karpenter-rs (either way) replaces nothing.

use std::time::Duration as StdDuration;

use k8s_openapi::api::core::v1::Taint;

use crate::NodePool;

/// The hash of a NodeClass spec as JSON: FNV-1a over its canonical text, in decimal. Object
/// keys are sorted, arrays hashed as sorted lists (reordering changes nothing) and zero values
/// (null, false, 0, "", empty list or object) left out, so writing a default out drifts
/// nothing. Providers remove the fields they do not hash first.
pub fn json_hash(value: &serde_json::Value) -> String {
    let mut fnv = Fnv::default();
    fnv.str(&canonical_json(value));
    fnv.0.to_string()
}

/// A JSON value's canonical text, as [`json_hash`] reads it.
pub fn canonical_json(value: &serde_json::Value) -> String {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            let mut fields: Vec<(&String, String)> = map
                .iter()
                .filter(|(_, v)| !is_zero(v))
                .map(|(k, v)| (k, canonical_json(v)))
                .collect();
            fields.sort();
            let inner: Vec<String> = fields
                .into_iter()
                .map(|(k, v)| format!("{}:{v}", Value::String(k.clone())))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(items) => {
            let mut inner: Vec<String> = items.iter().map(canonical_json).collect();
            inner.sort();
            format!("[{}]", inner.join(","))
        }
        other => other.to_string(),
    }
}

fn is_zero(value: &serde_json::Value) -> bool {
    use serde_json::Value;
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.values().all(is_zero),
    }
}

/// This implementation's `karpenter.sh/nodepool-hash-version` (upstream's is `v3`).
pub const NODE_POOL_HASH_VERSION: &str = "rs-v1";

/// 64-bit FNV-1a: stable across Rust releases and platforms, unlike `DefaultHasher`, so a
/// hash written by one build is understood by the next. Providers hash their NodeClasses with
/// it too.
#[derive(Clone, Copy, Debug)]
pub struct Fnv(pub u64);

impl Default for Fnv {
    fn default() -> Self {
        Self(Self::OFFSET)
    }
}

impl Fnv {
    /// The FNV-1a offset basis: the state before any byte.
    pub const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    /// Mixes in raw bytes.
    pub fn bytes(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }

    /// A length-prefixed string, so `("ab", "c")` and `("a", "bc")` differ.
    pub fn str(&mut self, s: &str) {
        self.bytes(&(s.len() as u64).to_le_bytes());
        self.bytes(s.as_bytes());
    }

    fn field(&mut self, name: &str, value: &str) {
        self.str(name);
        self.str(value);
    }
}

/// 64-bit FNV-1a of `text`, for names derived from their inputs (launch templates, instance
/// profiles) that every build and replica must derive alike.
pub fn fnv64(text: &str) -> u64 {
    let mut fnv = Fnv(Fnv::OFFSET);
    fnv.bytes(text.as_bytes());
    fnv.0
}

fn nanos(d: StdDuration) -> String {
    d.as_nanos().to_string()
}

/// Taints are a set: order does not matter and a repeated taint counts once.
fn taint_set(taints: &[Taint]) -> Vec<String> {
    let mut set: Vec<String> = taints
        .iter()
        .map(|t| {
            format!(
                "{}\u{0}{}\u{0}{}",
                t.key,
                t.value.as_deref().unwrap_or(""),
                t.effect
            )
        })
        .collect();
    set.sort();
    set.dedup();
    set
}

impl NodePool {
    /// The hash of the template's static fields, as a decimal string (upstream's format).
    /// Two templates that differ only in how they are written (map order, taint order, `1h`
    /// versus `60m`) hash the same.
    pub fn hash(&self) -> String {
        let template = &self.spec.template;
        let spec = &template.spec;
        let mut h = Fnv(Fnv::OFFSET);
        for (k, v) in &template.metadata.labels {
            h.field("label", &format!("{k}={v}"));
        }
        for (k, v) in &template.metadata.annotations {
            h.field("annotation", &format!("{k}={v}"));
        }
        for t in taint_set(&spec.taints) {
            h.field("taint", &t);
        }
        for t in taint_set(&spec.startup_taints) {
            h.field("startupTaint", &t);
        }
        let r = &spec.node_class_ref;
        h.field(
            "nodeClassRef",
            &format!("{}/{}/{}", r.group, r.kind, r.name),
        );
        match spec.expire_after.0 {
            Some(d) => h.field("expireAfter", &nanos(d)),
            None => h.field("expireAfter", "Never"),
        }
        if let Some(tgp) = &spec.termination_grace_period {
            h.field("terminationGracePeriod", &nanos(tgp.0));
        }
        h.0.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Duration, NillableDuration, NodePool};

    type Edit = Box<dyn Fn(&mut NodePool)>;

    fn pool() -> NodePool {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "default"},
            "spec": {
                "template": {
                    "metadata": {
                        "labels": {"keyLabel": "valueLabel", "keyLabel2": "valueLabel2"},
                        "annotations": {"keyAnnotation": "valueAnnotation"}
                    },
                    "spec": {
                        "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                        "taints": [{"key": "a", "effect": "NoExecute"}, {"key": "b", "value": "v", "effect": "NoSchedule"}],
                        "startupTaints": [{"key": "startup", "effect": "NoExecute"}],
                        "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
                        "expireAfter": "5m",
                        "terminationGracePeriod": "5m"
                    }
                }
            }
        }))
        .unwrap()
    }

    #[test]
    fn fnv_matches_the_published_vectors() {
        let mut h = Fnv(Fnv::OFFSET);
        h.bytes(b"a");
        assert_eq!(h.0, 0xaf63_dc4c_8601_ec8c);
        let mut h = Fnv(Fnv::OFFSET);
        h.bytes(b"foobar");
        assert_eq!(h.0, 0x8594_4171_f739_67e8);
    }

    #[test]
    fn is_stable_across_builds() {
        // A hash written into NodeClaims must read the same after an upgrade: pin one value.
        assert_eq!(pool().hash(), pool().hash());
        let mut empty = pool();
        empty.spec.template = Default::default();
        assert_eq!(empty.hash(), "2284781722785401816");
    }

    #[test]
    fn every_static_field_moves_the_hash() {
        let base = pool().hash();
        let edits: Vec<(&str, Edit)> = vec![
            (
                "annotations",
                Box::new(|p| {
                    p.spec
                        .template
                        .metadata
                        .annotations
                        .insert("keyAnnotationTest".into(), "valueAnnotationTest".into());
                }),
            ),
            (
                "labels",
                Box::new(|p| {
                    p.spec
                        .template
                        .metadata
                        .labels
                        .insert("keyLabelTest".into(), "valueLabelTest".into());
                }),
            ),
            (
                "label value",
                Box::new(|p| {
                    p.spec
                        .template
                        .metadata
                        .labels
                        .insert("keyLabel".into(), "other".into());
                }),
            ),
            (
                "taints",
                Box::new(|p| {
                    p.spec.template.spec.taints = vec![Taint {
                        key: "keytest2taint".into(),
                        effect: "NoExecute".into(),
                        ..Default::default()
                    }]
                }),
            ),
            (
                "taint value",
                Box::new(|p| p.spec.template.spec.taints[1].value = Some("w".into())),
            ),
            (
                "startupTaints",
                Box::new(|p| {
                    p.spec.template.spec.startup_taints = vec![Taint {
                        key: "keytest2taint".into(),
                        effect: "NoExecute".into(),
                        ..Default::default()
                    }]
                }),
            ),
            (
                "nodeClassRef name",
                Box::new(|p| p.spec.template.spec.node_class_ref.name = "testName".into()),
            ),
            (
                "nodeClassRef kind",
                Box::new(|p| p.spec.template.spec.node_class_ref.kind = "Other".into()),
            ),
            (
                "expireAfter",
                Box::new(|p| p.spec.template.spec.expire_after = NillableDuration::from_secs(6000)),
            ),
            (
                "expireAfter Never",
                Box::new(|p| p.spec.template.spec.expire_after = NillableDuration::NEVER),
            ),
            (
                "terminationGracePeriod",
                Box::new(|p| {
                    p.spec.template.spec.termination_grace_period = Some(Duration::from_secs(6000))
                }),
            ),
            (
                "terminationGracePeriod unset",
                Box::new(|p| p.spec.template.spec.termination_grace_period = None),
            ),
        ];
        for (name, edit) in edits {
            let mut p = pool();
            edit(&mut p);
            assert_ne!(p.hash(), base, "{name} must drift");
        }
    }

    #[test]
    fn behaviour_and_spelling_do_not_move_the_hash() {
        let base = pool().hash();
        let mut p = pool();
        p.spec.weight = Some(80);
        p.spec.limits = Some(
            [(
                "cpu".to_string(),
                k8s_openapi::apimachinery::pkg::api::resource::Quantity("16".into()),
            )]
            .into(),
        );
        p.spec.disruption.consolidate_after = NillableDuration::from_secs(30);
        p.spec.disruption.consolidation_policy = crate::ConsolidationPolicy::WhenEmpty;
        p.spec.template.spec.requirements.clear();
        p.metadata.annotations = Some(
            [(
                crate::labels::NODE_POOL_HASH_ANNOTATION.to_string(),
                "x".to_string(),
            )]
            .into(),
        );
        assert_eq!(
            p.hash(),
            base,
            "requirements, limits, weight and disruption are not hashed"
        );
        let mut p = pool();
        p.spec.template.spec.taints.reverse();
        p.spec
            .template
            .spec
            .taints
            .push(p.spec.template.spec.taints[0].clone());
        p.spec.template.spec.expire_after = NillableDuration(Some(StdDuration::from_secs(300)));
        assert_eq!(p.hash(), base, "taints are a set; 5m is 300s");
    }
}
