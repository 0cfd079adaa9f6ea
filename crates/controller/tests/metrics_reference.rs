//! Our registry against upstream's list of metrics (`testdata/upstream_metrics.json`, see
//! `testdata/README.md`): every upstream metric must be ours with the same type, label names
//! and buckets or quantiles, unless it is listed in [`NOT_YET`]; every metric of ours must
//! be upstream's unless it is listed in [`EXTRAS`]. Both lists carry their reason, and
//! [`NOT_YET`] may only shrink: a metric we export that is still listed there fails the test.

use std::collections::{BTreeMap, BTreeSet};

use karpenter_controller::metrics::{Desc, Kind, Metrics, ProviderLabels};
use serde_json::Value;

/// Upstream metrics we do not export yet, and why.
const NOT_YET: &[(&str, &str)] = &[
    (
        "karpenter_nodepools_cost_total",
        "no cluster cost tracker yet (upstream's alpha pkg/state/cost)",
    ),
    (
        "karpenter_nodepools_cost_tracker_errors_total",
        "no cluster cost tracker yet",
    ),
    (
        "karpenter_consolidation_score",
        "the core's Balanced consolidation does not hand its move scores out yet",
    ),
    (
        "karpenter_consolidation_moves_total",
        "the core's Balanced consolidation does not hand its approved and rejected moves out yet",
    ),
];

/// Metrics of ours upstream's core does not have, and why.
const EXTRAS: &[(&str, &str)] = &[
    (
        "karpenter_nodeclaims_drifted_total",
        "kept for dashboards built on it; upstream removed it in v1.0 (drift shows as \
         karpenter_nodeclaims_disrupted_total{reason=\"drifted\"} there)",
    ),
    (
        "karpenter_interruption_received_messages_total",
        "the AWS provider's, as upstream's AWS provider exports it; the registry is shared",
    ),
    (
        "karpenter_interruption_deleted_messages_total",
        "the AWS provider's, as upstream's AWS provider exports it",
    ),
    (
        "karpenter_interruption_message_queue_duration_seconds",
        "the AWS provider's, as upstream's AWS provider exports it",
    ),
    (
        "operator_kwoknodeclass_status_condition_transition_seconds",
        "status metrics for every provider's NodeClass, as upstream's AWS and Huawei \
         providers have for theirs; upstream's KWOK provider has no status controller",
    ),
    (
        "operator_kwoknodeclass_status_condition_count",
        "as operator_kwoknodeclass_status_condition_transition_seconds",
    ),
    (
        "operator_kwoknodeclass_status_condition_current_status_seconds",
        "as operator_kwoknodeclass_status_condition_transition_seconds",
    ),
    (
        "operator_kwoknodeclass_status_condition_transitions_total",
        "as operator_kwoknodeclass_status_condition_transition_seconds",
    ),
    (
        "operator_kwoknodeclass_termination_current_time_seconds",
        "as operator_kwoknodeclass_status_condition_transition_seconds",
    ),
    (
        "operator_kwoknodeclass_termination_duration_seconds",
        "as operator_kwoknodeclass_status_condition_transition_seconds",
    ),
];

struct Upstream {
    provider: ProviderLabels,
    metrics: BTreeMap<String, Value>,
}

fn upstream() -> Upstream {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/testdata/upstream_metrics.json"
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    };
    let provider = ProviderLabels {
        well_known: strings(&doc["provider"]["well_known_labels"]),
        node_classes: doc["provider"]["node_classes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["group"].as_str().unwrap().to_string(),
                    c["kind"].as_str().unwrap().to_string(),
                )
            })
            .collect(),
    };
    let metrics = doc["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["name"].as_str().unwrap().to_string(), m.clone()))
        .collect();
    Upstream { provider, metrics }
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .map(|a| a.iter().map(|x| x.as_f64().unwrap()).collect())
        .unwrap_or_default()
}

fn same_floats(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| (x - y).abs() <= 1e-12 * x.abs().max(y.abs()))
}

/// How `ours` differs from upstream's `theirs`, if it does.
fn differences(ours: &Desc, theirs: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let kind = theirs["type"].as_str().unwrap();
    if ours.kind.as_str() != kind {
        out.push(format!("type {} ≠ upstream's {kind}", ours.kind.as_str()));
    }
    let our_labels: BTreeSet<&str> = ours.labels.iter().map(String::as_str).collect();
    let their_labels: BTreeSet<&str> = theirs["labels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    if our_labels.len() != ours.labels.len() {
        out.push(format!("duplicate labels {:?}", ours.labels));
    }
    if our_labels != their_labels {
        out.push(format!(
            "labels: ours lack {:?}, have extra {:?}",
            their_labels.difference(&our_labels).collect::<Vec<_>>(),
            our_labels.difference(&their_labels).collect::<Vec<_>>()
        ));
    }
    if ours.kind == Kind::Histogram && !same_floats(&ours.buckets, &floats(&theirs["buckets"])) {
        out.push(format!(
            "buckets {:?} ≠ upstream's {}",
            ours.buckets, theirs["buckets"]
        ));
    }
    if ours.kind == Kind::Summary && !same_floats(&ours.quantiles, &floats(&theirs["quantiles"])) {
        out.push(format!(
            "quantiles {:?} ≠ upstream's {}",
            ours.quantiles, theirs["quantiles"]
        ));
    }
    out
}

#[test]
fn every_upstream_metric_is_ours_with_the_same_shape() {
    let upstream = upstream();
    let ours: BTreeMap<String, Desc> = Metrics::for_provider(&upstream.provider)
        .descriptors()
        .into_iter()
        .map(|d| (d.name.clone(), d))
        .collect();
    let not_yet: BTreeMap<&str, &str> = NOT_YET.iter().copied().collect();
    let extras: BTreeMap<&str, &str> = EXTRAS.iter().copied().collect();
    let mut problems = Vec::new();
    for (name, theirs) in &upstream.metrics {
        match (ours.get(name), not_yet.contains_key(name.as_str())) {
            (Some(_), true) => problems.push(format!("{name}: exported now; take it off NOT_YET")),
            (None, true) => {}
            (None, false) => problems.push(format!("{name}: upstream's, missing from ours")),
            (Some(desc), false) => {
                for d in differences(desc, theirs) {
                    problems.push(format!("{name}: {d}"));
                }
            }
        }
    }
    for name in ours.keys() {
        if !upstream.metrics.contains_key(name) && !extras.contains_key(name.as_str()) {
            problems.push(format!(
                "{name}: ours, not upstream's; list it in EXTRAS with a reason or remove it"
            ));
        }
    }
    for name in not_yet.keys() {
        if !upstream.metrics.contains_key(*name) {
            problems.push(format!(
                "NOT_YET lists {name}, which upstream does not have"
            ));
        }
    }
    for name in extras.keys() {
        if upstream.metrics.contains_key(*name) {
            problems.push(format!("EXTRAS lists {name}, which is upstream's"));
        } else if !ours.contains_key(*name) {
            problems.push(format!("EXTRAS lists {name}, which we do not export"));
        }
    }
    let exported = upstream
        .metrics
        .keys()
        .filter(|n| ours.contains_key(*n))
        .count();
    eprintln!(
        "metrics: {exported} of upstream's {} exported; not yet ({}):",
        upstream.metrics.len(),
        NOT_YET.len()
    );
    for (name, why) in NOT_YET {
        eprintln!("  not yet: {name} — {why}");
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_reference_is_well_formed() {
    let upstream = upstream();
    for (name, m) in &upstream.metrics {
        let kind = m["type"].as_str().unwrap();
        assert!(
            ["counter", "gauge", "histogram", "summary"].contains(&kind),
            "{name}: {kind}"
        );
        assert!(
            kind != "counter" || name.ends_with("_total"),
            "{name}: counters end in _total"
        );
        if kind == "histogram" {
            let b = floats(&m["buckets"]);
            assert!(!b.is_empty() && b.windows(2).all(|w| w[0] < w[1]), "{name}");
        }
    }
}
