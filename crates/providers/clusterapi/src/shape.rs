//! What a MachineDeployment says its nodes are, in the annotations the Cluster Autoscaler
//! reads to scale from zero (`capacity.cluster-autoscaler.kubernetes.io/*`), its max size,
//! and the price karpenter-rs reads beside them. Every annotation that does not read is named
//! with the MachineDeployment; one bad annotation keeps the whole MachineDeployment out, so a
//! typo never launches nodes of the wrong size.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::Taint;
use karpenter_api::labels::{check_label_value, check_qualified_name};
use karpenter_core::resources::{self, Resources, parse_milli};

use crate::capi::{MAX_SIZE_ANNOTATION, MachineDeployment};

/// CPU capacity (required).
pub const CPU_ANNOTATION: &str = "capacity.cluster-autoscaler.kubernetes.io/cpu";
/// Memory capacity (required).
pub const MEMORY_ANNOTATION: &str = "capacity.cluster-autoscaler.kubernetes.io/memory";
/// How many GPUs; needs [`GPU_TYPE_ANNOTATION`].
pub const GPU_COUNT_ANNOTATION: &str = "capacity.cluster-autoscaler.kubernetes.io/gpu-count";
/// The GPUs' resource name (`nvidia.com/gpu`).
pub const GPU_TYPE_ANNOTATION: &str = "capacity.cluster-autoscaler.kubernetes.io/gpu-type";
/// Ephemeral storage capacity.
pub const EPHEMERAL_DISK_ANNOTATION: &str =
    "capacity.cluster-autoscaler.kubernetes.io/ephemeral-disk";
/// How many pods a node runs (110 when absent, as the Cluster Autoscaler assumes).
pub const MAX_PODS_ANNOTATION: &str = "capacity.cluster-autoscaler.kubernetes.io/maxPods";
/// Node labels, `key=value,key=value`.
pub const LABELS_ANNOTATION: &str = "capacity.cluster-autoscaler.kubernetes.io/labels";
/// Node taints, `key=value:Effect,key:Effect`.
pub const TAINTS_ANNOTATION: &str = "capacity.cluster-autoscaler.kubernetes.io/taints";
/// The price per hour of one node (karpenter-rs; upstream's sample MachineDeployment already
/// carries it, marked "not supported yet"). Absent means 0, so NodePool weights decide.
pub const PRICE_ANNOTATION: &str = "cluster.x-k8s.io/machine-current-price";

/// The pods a node runs when the MachineDeployment does not say (the Cluster Autoscaler's
/// default).
pub const DEFAULT_MAX_PODS: i64 = 110;

const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// One annotation that does not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The annotation.
    pub annotation: &'static str,
    /// What is wrong with it.
    pub reason: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.annotation, self.reason)
    }
}

/// A MachineDeployment left out, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("MachineDeployment {machine_deployment} skipped: {}", join(.problems))]
pub struct Skipped {
    /// `namespace/name`.
    pub machine_deployment: String,
    /// Every problem found.
    pub problems: Vec<Problem>,
}

fn join(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(Problem::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// What a MachineDeployment's nodes are.
#[derive(Clone, Debug, PartialEq)]
pub struct Shape {
    /// Capacity: cpu, memory, pods, and ephemeral storage and GPUs when given.
    pub capacity: Resources,
    /// Labels from the labels annotation.
    pub labels: BTreeMap<String, String>,
    /// Taints from the taints annotation.
    pub taints: Vec<Taint>,
    /// The max size, when given.
    pub max_size: Option<i32>,
    /// The price per hour.
    pub price: f64,
}

fn quantity(
    md: &MachineDeployment,
    annotation: &'static str,
    problems: &mut Vec<Problem>,
) -> Option<i64> {
    let value = md.annotation(annotation)?;
    match parse_milli(value) {
        Ok(v) if v < 0 => {
            problems.push(Problem {
                annotation,
                reason: format!("{value:?} is negative"),
            });
            None
        }
        Ok(v) => Some(v),
        Err(e) => {
            problems.push(Problem {
                annotation,
                reason: e.to_string(),
            });
            None
        }
    }
}

/// `key=value,key=value`; spaces around entries are ignored, an empty annotation is no
/// labels. Upstream drops entries without `=` silently; they are named here.
pub fn parse_labels(value: &str) -> Result<BTreeMap<String, String>, String> {
    let mut labels = BTreeMap::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((key, value)) = entry.split_once('=') else {
            return Err(format!("{entry:?} is not key=value"));
        };
        let (key, value) = (key.trim(), value.trim());
        check_qualified_name(key).map_err(|e| format!("label key {key:?}: {e}"))?;
        check_label_value(value).map_err(|e| format!("label {key:?} value {value:?}: {e}"))?;
        labels.insert(key.to_string(), value.to_string());
    }
    Ok(labels)
}

/// `key=value:Effect,key:Effect`, as the Cluster Autoscaler reads it.
pub fn parse_taints(value: &str) -> Result<Vec<Taint>, String> {
    let mut taints = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((key_value, effect)) = entry.rsplit_once(':') else {
            return Err(format!("{entry:?} is not key=value:Effect"));
        };
        if !TAINT_EFFECTS.contains(&effect) {
            return Err(format!(
                "{entry:?}: effect {effect:?} is not one of {}",
                TAINT_EFFECTS.join(", ")
            ));
        }
        let (key, value) = match key_value.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (key_value, None),
        };
        check_qualified_name(key).map_err(|e| format!("taint key {key:?}: {e}"))?;
        if let Some(v) = value {
            check_label_value(v).map_err(|e| format!("taint {key:?} value {v:?}: {e}"))?;
        }
        taints.push(Taint {
            key: key.to_string(),
            value: value.filter(|v| !v.is_empty()).map(str::to_string),
            effect: effect.to_string(),
            time_added: None,
        });
    }
    Ok(taints)
}

/// The nodes of `md`, or every annotation that does not read. CPU and memory are required
/// (upstream refuses a Machine whose MachineDeployment lacks them); a GPU count needs its
/// type; the max size is a non-negative integer (upstream ignores one that does not parse,
/// which would scale without bound); the price a non-negative number.
pub fn shape(md: &MachineDeployment) -> Result<Shape, Skipped> {
    let mut problems = Vec::new();
    let mut capacity = Resources::new();
    for (annotation, resource) in [
        (CPU_ANNOTATION, resources::CPU),
        (MEMORY_ANNOTATION, resources::MEMORY),
    ] {
        match (
            md.annotation(annotation),
            quantity(md, annotation, &mut problems),
        ) {
            (None, _) => problems.push(Problem {
                annotation,
                reason: "required to know the nodes' size".into(),
            }),
            (Some(_), Some(v)) => capacity.set(resource, v),
            (Some(_), None) => {}
        }
    }
    if let Some(v) = quantity(md, EPHEMERAL_DISK_ANNOTATION, &mut problems) {
        capacity.set(resources::EPHEMERAL_STORAGE, v);
    }
    match md.annotation(MAX_PODS_ANNOTATION) {
        None => capacity.set(resources::PODS, DEFAULT_MAX_PODS * 1000),
        Some(_) => {
            if let Some(v) = quantity(md, MAX_PODS_ANNOTATION, &mut problems) {
                capacity.set(resources::PODS, v);
            }
        }
    }
    match (
        md.annotation(GPU_COUNT_ANNOTATION),
        md.annotation(GPU_TYPE_ANNOTATION),
    ) {
        (Some(_), Some(gpu_type)) => {
            if let Err(e) = check_qualified_name(gpu_type) {
                problems.push(Problem {
                    annotation: GPU_TYPE_ANNOTATION,
                    reason: format!("{gpu_type:?} is not a resource name: {e}"),
                });
            } else if let Some(v) = quantity(md, GPU_COUNT_ANNOTATION, &mut problems) {
                capacity.set(gpu_type, v);
            }
        }
        (Some(_), None) => problems.push(Problem {
            annotation: GPU_COUNT_ANNOTATION,
            reason: format!("a GPU count needs {GPU_TYPE_ANNOTATION} (the resource name)"),
        }),
        (None, _) => {}
    }
    let labels = match md.annotation(LABELS_ANNOTATION).map(parse_labels) {
        None => BTreeMap::new(),
        Some(Ok(l)) => l,
        Some(Err(reason)) => {
            problems.push(Problem {
                annotation: LABELS_ANNOTATION,
                reason,
            });
            BTreeMap::new()
        }
    };
    let taints = match md.annotation(TAINTS_ANNOTATION).map(parse_taints) {
        None => Vec::new(),
        Some(Ok(t)) => t,
        Some(Err(reason)) => {
            problems.push(Problem {
                annotation: TAINTS_ANNOTATION,
                reason,
            });
            Vec::new()
        }
    };
    let max_size = md
        .annotation(MAX_SIZE_ANNOTATION)
        .and_then(|v| match v.trim().parse::<i32>() {
            Ok(n) if n >= 0 => Some(n),
            _ => {
                problems.push(Problem {
                    annotation: MAX_SIZE_ANNOTATION,
                    reason: format!("{v:?} is not a non-negative integer"),
                });
                None
            }
        });
    let price = match md.annotation(PRICE_ANNOTATION) {
        None => 0.0,
        Some(v) => match v.trim().parse::<f64>() {
            Ok(p) if p.is_finite() && p >= 0.0 => p,
            _ => {
                problems.push(Problem {
                    annotation: PRICE_ANNOTATION,
                    reason: format!("{v:?} is not a non-negative number"),
                });
                0.0
            }
        },
    };
    if !problems.is_empty() {
        return Err(Skipped {
            machine_deployment: md.key(),
            problems,
        });
    }
    Ok(Shape {
        capacity,
        labels,
        taints,
        max_size,
        price,
    })
}

/// Whether a MachineDeployment of `replicas` may grow by one: below its max size, or without
/// one (upstream's `isBelowMaxSize`).
pub fn below_max_size(replicas: i32, max_size: Option<i32>) -> bool {
    max_size.is_none_or(|max| replicas < max)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn md(annotations: serde_json::Value) -> MachineDeployment {
        serde_json::from_value(json!({
            "metadata": {"name": "md-1", "namespace": "test", "annotations": annotations},
        }))
        .unwrap()
    }

    /// Upstream's "adds capacity resources from scale from zero annotations", and the rest of
    /// the capacity annotations.
    #[test]
    fn capacity_from_the_annotations() {
        let s = shape(&md(json!({
            CPU_ANNOTATION: "1",
            MEMORY_ANNOTATION: "16Gi",
            GPU_COUNT_ANNOTATION: "1",
            GPU_TYPE_ANNOTATION: "nvidia.com/gpu",
        })))
        .unwrap();
        assert_eq!(s.capacity.cpu, 1000);
        assert_eq!(s.capacity.memory, (16i64 << 30) * 1000);
        assert_eq!(s.capacity.get("nvidia.com/gpu"), 1000);
        assert_eq!(s.capacity.pods, 110_000, "the Cluster Autoscaler's default");
        assert_eq!(s.price, 0.0);
        assert_eq!(s.max_size, None);

        let s = shape(&md(json!({
            CPU_ANNOTATION: "4",
            MEMORY_ANNOTATION: "16777220Ki",
            EPHEMERAL_DISK_ANNOTATION: "100Gi",
            MAX_PODS_ANNOTATION: "200",
            MAX_SIZE_ANNOTATION: "10",
            PRICE_ANNOTATION: "0.50",
        })))
        .unwrap();
        assert_eq!(s.capacity.cpu, 4000);
        assert_eq!(s.capacity.memory, 16_777_220 * 1024 * 1000);
        assert_eq!(s.capacity.ephemeral_storage, (100i64 << 30) * 1000);
        assert_eq!(s.capacity.pods, 200_000);
        assert_eq!(s.max_size, Some(10));
        assert_eq!(s.price, 0.5);
    }

    #[test]
    fn bad_annotations_are_named_with_the_machine_deployment() {
        let cases = [
            (json!({MEMORY_ANNOTATION: "1Gi"}), vec![CPU_ANNOTATION]),
            (json!({CPU_ANNOTATION: "1"}), vec![MEMORY_ANNOTATION]),
            (json!({}), vec![CPU_ANNOTATION, MEMORY_ANNOTATION]),
            (
                json!({CPU_ANNOTATION: "four", MEMORY_ANNOTATION: "16GiB"}),
                vec![CPU_ANNOTATION, MEMORY_ANNOTATION],
            ),
            (
                json!({CPU_ANNOTATION: "-1", MEMORY_ANNOTATION: "1Gi"}),
                vec![CPU_ANNOTATION],
            ),
            (
                json!({CPU_ANNOTATION: "1", MEMORY_ANNOTATION: "1Gi", EPHEMERAL_DISK_ANNOTATION: "lots"}),
                vec![EPHEMERAL_DISK_ANNOTATION],
            ),
            (
                json!({CPU_ANNOTATION: "1", MEMORY_ANNOTATION: "1Gi", MAX_PODS_ANNOTATION: "x"}),
                vec![MAX_PODS_ANNOTATION],
            ),
            (
                json!({CPU_ANNOTATION: "1", MEMORY_ANNOTATION: "1Gi", GPU_COUNT_ANNOTATION: "2"}),
                vec![GPU_COUNT_ANNOTATION],
            ),
            (
                json!({CPU_ANNOTATION: "1", MEMORY_ANNOTATION: "1Gi", GPU_COUNT_ANNOTATION: "2", GPU_TYPE_ANNOTATION: "not a name"}),
                vec![GPU_TYPE_ANNOTATION],
            ),
            (
                json!({CPU_ANNOTATION: "1", MEMORY_ANNOTATION: "1Gi", LABELS_ANNOTATION: "zone"}),
                vec![LABELS_ANNOTATION],
            ),
            (
                json!({CPU_ANNOTATION: "1", MEMORY_ANNOTATION: "1Gi", TAINTS_ANNOTATION: "gpu=true:Sometimes"}),
                vec![TAINTS_ANNOTATION],
            ),
            // Upstream ignores a max size that does not parse (no limit); here it is named.
            (
                json!({CPU_ANNOTATION: "1", MEMORY_ANNOTATION: "1Gi", MAX_SIZE_ANNOTATION: "not-a-number"}),
                vec![MAX_SIZE_ANNOTATION],
            ),
            (
                json!({CPU_ANNOTATION: "1", MEMORY_ANNOTATION: "1Gi", MAX_SIZE_ANNOTATION: "-1"}),
                vec![MAX_SIZE_ANNOTATION],
            ),
            (
                json!({CPU_ANNOTATION: "1", MEMORY_ANNOTATION: "1Gi", PRICE_ANNOTATION: "$1"}),
                vec![PRICE_ANNOTATION],
            ),
            (
                json!({CPU_ANNOTATION: "1", MEMORY_ANNOTATION: "1Gi", PRICE_ANNOTATION: "-0.1"}),
                vec![PRICE_ANNOTATION],
            ),
        ];
        for (annotations, named) in cases {
            let e = shape(&md(annotations.clone())).unwrap_err();
            assert_eq!(e.machine_deployment, "test/md-1");
            let got: Vec<&str> = e.problems.iter().map(|p| p.annotation).collect();
            assert_eq!(got, named, "{annotations}");
            let message = e.to_string();
            assert!(
                message.starts_with("MachineDeployment test/md-1 skipped: "),
                "{message}"
            );
            for a in named {
                assert!(message.contains(a), "{message}");
            }
        }
    }

    #[test]
    fn labels_annotation() {
        let ok: [(&str, &[(&str, &str)]); 3] = [
            ("", &[]),
            (
                "topology.kubernetes.io/zone=east,karpenter.cluster.x-k8s.io/instance-size=big",
                &[
                    ("karpenter.cluster.x-k8s.io/instance-size", "big"),
                    ("topology.kubernetes.io/zone", "east"),
                ],
            ),
            (" a=1 , b= ,", &[("a", "1"), ("b", "")]),
        ];
        for (value, want) in ok {
            let got = parse_labels(value).unwrap();
            let got: Vec<(&str, &str)> =
                got.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            assert_eq!(got, want, "{value:?}");
        }
        // Upstream drops an entry without '=' silently; here every bad entry is named.
        for (bad, named) in [
            ("novalue", "\"novalue\""),
            ("bad key=1", "\"bad key\""),
            ("a=bad value", "\"bad value\""),
            ("k=v=w", "\"v=w\""),
        ] {
            let e = parse_labels(bad).unwrap_err();
            assert!(e.contains(named), "{bad:?}: {e}");
        }
    }

    #[test]
    fn taints_annotation() {
        let taints = parse_taints("key1=value1:NoSchedule, key2:NoExecute,").unwrap();
        let got: Vec<(&str, Option<&str>, &str)> = taints
            .iter()
            .map(|t| (t.key.as_str(), t.value.as_deref(), t.effect.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("key1", Some("value1"), "NoSchedule"),
                ("key2", None, "NoExecute")
            ]
        );
        for bad in ["key1=value1", "key1=value1:Never", "=v:NoSchedule"] {
            assert!(parse_taints(bad).is_err(), "{bad:?}");
        }
    }

    /// Upstream's `isBelowMaxSize` cases (a max size that does not parse is refused earlier).
    #[test]
    fn below_max_size_as_upstream() {
        let cases = [
            (5, None, true),
            (3, Some(10), true),
            (10, Some(10), false),
            (12, Some(10), false),
            (0, Some(10), true),
            (0, Some(0), false),
        ];
        for (replicas, max, want) in cases {
            assert_eq!(below_max_size(replicas, max), want, "{replicas} of {max:?}");
        }
    }
}
