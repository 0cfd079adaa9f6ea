//! The checks karpenter runs on objects the API server accepted (upstream's `RuntimeValidate`).
//! A NodePool that fails them is not `Ready` (`ValidationSucceeded=False`) and launches nothing.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::Taint;

use super::{Problem, ProblemKind};
use crate::cron::Schedule;
use crate::labels::{
    CAPACITY_TYPE_LABEL, CAPACITY_TYPES, NODE_POOL_LABEL, check_label_value, check_qualified_name,
    normalize_label, restricted_label_reason,
};
use crate::nodeclaim::{NodeClaim, NodeSelectorRequirementWithMinValues, Operator};
use crate::nodeoverlay::{NodeOverlay, RESTRICTED_CAPACITY};
use crate::nodepool::NodePool;

struct Sink<'a>(&'a mut Vec<Problem>);

impl Sink<'_> {
    fn push(&mut self, path: String, message: String) {
        self.0.push(Problem {
            path,
            message,
            kind: ProblemKind::NotReady,
        });
    }
}

/// Runs the runtime checks on a NodePool, appending what fails.
pub fn validate_node_pool(node_pool: &NodePool, problems: &mut Vec<Problem>) {
    let mut sink = Sink(problems);
    let template = &node_pool.spec.template;
    validate_labels(
        &template.metadata.labels,
        "spec.template.metadata.labels",
        &mut sink,
    );
    let spec_path = "spec.template.spec";
    validate_taints(
        &template.spec.taints,
        &template.spec.startup_taints,
        spec_path,
        &mut sink,
    );
    validate_requirements(&template.spec.requirements, spec_path, &mut sink);
    for (i, requirement) in template.spec.requirements.iter().enumerate() {
        if requirement.key == NODE_POOL_LABEL {
            sink.push(
                format!("{spec_path}.requirements[{i}].key"),
                format!("label {NODE_POOL_LABEL:?} is set by karpenter and may not be required"),
            );
        }
    }
    for (i, budget) in node_pool.spec.disruption.budgets.iter().enumerate() {
        if let Some(schedule) = &budget.schedule
            && let Err(e) = Schedule::parse(schedule)
        {
            sink.push(
                format!("spec.disruption.budgets[{i}].schedule"),
                format!("{e}; karpenter treats an invalid budget as allowing no disruptions"),
            );
        }
    }
}

/// Runs the runtime checks on a NodeClaim's taints and requirements.
pub fn validate_node_claim(node_claim: &NodeClaim, problems: &mut Vec<Problem>) {
    let mut sink = Sink(problems);
    let spec = &node_claim.spec;
    validate_taints(&spec.taints, &spec.startup_taints, "spec", &mut sink);
    validate_requirements(&spec.requirements, "spec", &mut sink);
}

/// Runs the runtime checks on a NodeOverlay (upstream's `RuntimeValidate`): its requirements
/// as a NodePool's are judged (the `karpenter.sh/nodepool` label allowed), and no well-known
/// resource in `capacity`. An overlay that fails them is not applied
/// (`ValidationSucceeded=False`, reason `RuntimeValidation`).
pub fn validate_node_overlay(overlay: &NodeOverlay, problems: &mut Vec<Problem>) {
    let mut sink = Sink(problems);
    for (i, requirement) in overlay.spec.requirements.iter().enumerate() {
        let at = format!("spec.requirements[{i}]");
        for message in requirement_problems(&requirement.to_node_selector()) {
            sink.push(at.clone(), message);
        }
        if requirement.operator == Operator::NotIn && requirement.values.is_empty() {
            sink.push(
                at,
                format!(
                    "key {} with operator NotIn must have a value defined",
                    requirement.key
                ),
            );
        }
    }
    for name in overlay.spec.capacity.iter().flat_map(|c| c.keys()) {
        if RESTRICTED_CAPACITY.contains(&name.as_str()) {
            sink.push(
                super::structural::map_entry("spec.capacity", name),
                format!(
                    "invalid capacity {name:?}: only extended resources may be set, not {}",
                    RESTRICTED_CAPACITY.join(", ")
                ),
            );
        }
    }
}

fn validate_labels(labels: &BTreeMap<String, String>, path: &str, sink: &mut Sink<'_>) {
    for (key, value) in labels {
        let path = super::structural::map_entry(path, key);
        if key == NODE_POOL_LABEL {
            sink.push(
                path.clone(),
                format!("label {key:?} is set by karpenter and may not be set in the template"),
            );
        }
        if let Err(e) = check_qualified_name(key) {
            sink.push(path.clone(), format!("invalid label key {key:?}: {e}"));
        }
        if let Err(e) = check_label_value(value) {
            sink.push(path.clone(), format!("invalid label value {value:?}: {e}"));
        }
        if let Some(reason) = restricted_label_reason(key) {
            sink.push(path, reason);
        }
    }
}

fn validate_taints(taints: &[Taint], startup_taints: &[Taint], path: &str, sink: &mut Sink<'_>) {
    let mut seen = HashSet::new();
    for (field, list) in [("taints", taints), ("startupTaints", startup_taints)] {
        for (i, taint) in list.iter().enumerate() {
            let at = format!("{path}.{field}[{i}]");
            if let Err(e) = check_qualified_name(&taint.key) {
                sink.push(
                    format!("{at}.key"),
                    format!("invalid taint key {:?}: {e}", taint.key),
                );
            }
            if let Some(value) = taint.value.as_deref().filter(|v| !v.is_empty())
                && let Err(e) = check_qualified_name(value)
            {
                sink.push(
                    format!("{at}.value"),
                    format!("invalid taint value {value:?}: {e}"),
                );
            }
            if !matches!(
                taint.effect.as_str(),
                "NoSchedule" | "PreferNoSchedule" | "NoExecute" | ""
            ) {
                sink.push(
                    format!("{at}.effect"),
                    format!("invalid taint effect {:?}", taint.effect),
                );
            }
            if !seen.insert((taint.key.as_str(), taint.effect.as_str())) {
                sink.push(
                    at,
                    format!("duplicate taint {}:{} (taints and startupTaints together may hold each key and effect once)", taint.key, taint.effect),
                );
            }
        }
    }
}

fn validate_requirements(
    requirements: &[NodeSelectorRequirementWithMinValues],
    path: &str,
    sink: &mut Sink<'_>,
) {
    for (i, requirement) in requirements.iter().enumerate() {
        let at = format!("{path}.requirements[{i}]");
        for message in requirement_problems(requirement) {
            sink.push(at.clone(), message);
        }
    }
}

/// What is wrong with one requirement, as upstream's `ValidateRequirement` judges it.
pub fn requirement_problems(requirement: &NodeSelectorRequirementWithMinValues) -> Vec<String> {
    let mut out = Vec::new();
    let key = normalize_label(&requirement.key);
    let op = requirement.operator;
    if let Some(reason) = restricted_label_reason(key) {
        out.push(reason);
    }
    if let Some(message) = well_known_value_problem(key, requirement) {
        out.push(message);
    }
    if let Err(e) = check_qualified_name(key) {
        out.push(format!("key {key:?} is not a qualified name: {e}"));
    }
    for value in &requirement.values {
        if let Err(e) = check_label_value(value) {
            out.push(format!("invalid value {value:?} for key {key}: {e}"));
        }
    }
    if op == Operator::In && requirement.values.is_empty() {
        out.push(format!(
            "key {key} with operator In must have a value defined"
        ));
    }
    if op == Operator::In
        && let Some(min) = requirement.min_values
        && (requirement.values.len() as i64) < i64::from(min)
    {
        out.push(format!(
            "key {key} with operator In must have at least minValues ({min}) values defined, not {}",
            requirement.values.len()
        ));
    }
    if op.is_numeric() {
        let single_non_negative =
            matches!(&requirement.values[..], [v] if v.parse::<i64>().is_ok_and(|n| n >= 0));
        if !single_non_negative {
            out.push(format!(
                "key {key} with operator {} must have a single non-negative integer value",
                op.as_str()
            ));
        }
    }
    out
}

fn well_known_value_problem(
    key: &str,
    requirement: &NodeSelectorRequirementWithMinValues,
) -> Option<String> {
    if key != CAPACITY_TYPE_LABEL || requirement.operator != Operator::In {
        return None;
    }
    let valid = requirement
        .values
        .iter()
        .filter(|v| CAPACITY_TYPES.contains(&v.as_str()))
        .count();
    if valid == 0 {
        return Some(format!(
            "no valid values found in {:?} for {key}, expected one of: {}",
            requirement.values,
            CAPACITY_TYPES.join(", ")
        ));
    }
    match requirement.min_values {
        Some(min) if (valid as i64) < i64::from(min) => Some(format!(
            "not enough valid values in {:?} for {key}: minValues is {min} but only {valid} of {} are valid",
            requirement.values,
            CAPACITY_TYPES.join(", ")
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(
        key: &str,
        op: Operator,
        values: &[&str],
        min_values: Option<i32>,
    ) -> NodeSelectorRequirementWithMinValues {
        NodeSelectorRequirementWithMinValues {
            key: key.into(),
            operator: op,
            values: values.iter().map(|s| s.to_string()).collect(),
            min_values,
        }
    }

    #[test]
    fn requirement_table() {
        // (requirement, is valid)
        let cases = [
            (
                req("topology.kubernetes.io/zone", Operator::In, &["test"], None),
                true,
            ),
            (
                req("topology.kubernetes.io/zone", Operator::Gt, &["1"], None),
                true,
            ),
            (
                req("topology.kubernetes.io/zone", Operator::NotIn, &[], None),
                true,
            ),
            (
                req(
                    "failure-domain.beta.kubernetes.io/zone",
                    Operator::Exists,
                    &[],
                    None,
                ),
                true,
            ),
            (
                req(
                    "karpenter.sh/capacity-type",
                    Operator::In,
                    &["spot", "bogus"],
                    None,
                ),
                true,
            ),
            (
                req(
                    "karpenter.sh/capacity-type",
                    Operator::In,
                    &["ondemand"],
                    None,
                ),
                false,
            ),
            (
                req(
                    "karpenter.sh/capacity-type",
                    Operator::In,
                    &["spot", "bogus"],
                    Some(2),
                ),
                false,
            ),
            (
                req("topology.kubernetes.io/zone", Operator::Gt, &[], None),
                false,
            ),
            (
                req(
                    "topology.kubernetes.io/zone",
                    Operator::Gt,
                    &["1", "2"],
                    None,
                ),
                false,
            ),
            (
                req("topology.kubernetes.io/zone", Operator::Lt, &["a"], None),
                false,
            ),
            (
                req("topology.kubernetes.io/zone", Operator::Lte, &["-1"], None),
                false,
            ),
            (
                req("topology.kubernetes.io/zone", Operator::In, &[], None),
                false,
            ),
            (
                req(
                    "node.kubernetes.io/instance-type",
                    Operator::In,
                    &["a"],
                    Some(2),
                ),
                false,
            ),
            (
                req("kubernetes.io/hostname", Operator::Exists, &[], None),
                false,
            ),
            (
                req("karpenter.sh/custom", Operator::Exists, &[], None),
                false,
            ),
            (req("test.com.com}", Operator::Exists, &[], None), false),
            (
                req("example.com/tier", Operator::In, &["has space"], None),
                false,
            ),
            (
                req("kubernetes.io/custom", Operator::In, &["x"], None),
                true,
            ),
        ];
        for (requirement, valid) in cases {
            let problems = requirement_problems(&requirement);
            assert_eq!(problems.is_empty(), valid, "{requirement:?}: {problems:?}");
        }
    }
}
