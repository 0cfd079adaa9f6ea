//! Validation of manifests as `kubectl apply` and karpenter would judge them: first the CRD's
//! structural schema and CEL rules (the API server rejects the object), then karpenter's
//! runtime checks (the object is stored but the NodePool never becomes Ready).

#[cfg(feature = "cel")]
mod cel;
pub mod runtime;
pub mod structural;
pub mod table;

use serde_json::Value;

use crate::crd::{Crd, find};
use crate::labels::{GROUP, check_dns_subdomain};

/// How serious a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ProblemKind {
    /// The API server would refuse the object.
    Rejected,
    /// The object would be stored, but karpenter's runtime validation fails, so the NodePool
    /// is not Ready and launches nothing.
    NotReady,
}

/// One thing wrong with an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The field, as `spec.template.spec.requirements[0].key`.
    pub path: String,
    /// Why it is wrong.
    pub message: String,
    /// How serious it is.
    pub kind: ProblemKind,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = if self.path.is_empty() {
            "(object)"
        } else {
            &self.path
        };
        write!(f, "{path}: {}", self.message)
    }
}

/// The outcome of validating one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The object's kind.
    pub kind: String,
    /// The object's name (`"<unnamed>"` when it has none).
    pub name: String,
    /// Everything wrong with it; empty when it is valid.
    pub problems: Vec<Problem>,
}

/// Validates one manifest against the CRDs in `crds` (karpenter's and the providers'). Returns
/// `None` for objects of other kinds (a Deployment in the same file, say), which are left to
/// their own API; a `karpenter.sh` object of a kind or version not served is a problem.
pub fn validate_object(crds: &[Crd], object: &Value) -> Option<Report> {
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("<unnamed>")
        .to_string();
    let mut report = Report {
        kind: kind.to_string(),
        name,
        problems: Vec::new(),
    };
    let Some(crd) = find(crds, api_version, kind) else {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        if group != GROUP {
            return None;
        }
        let message = if version == "v1beta1" || version == "v1alpha5" {
            format!(
                "{api_version} is no longer served; `karpenter-rs convert -f FILE` prints the karpenter.sh/v1 equivalent"
            )
        } else {
            format!(
                "{kind} in {api_version} is not a kind karpenter-rs serves (NodePool and NodeClaim are karpenter.sh/v1, NodeOverlay karpenter.sh/v1alpha1)"
            )
        };
        report.problems.push(Problem {
            path: "apiVersion".into(),
            message,
            kind: ProblemKind::Rejected,
        });
        return Some(report);
    };
    check_metadata(object, &mut report.problems);
    structural::check(&crd.schema(), object, "", &mut report.problems);
    #[cfg(feature = "cel")]
    if report.problems.is_empty() {
        // CEL rules assume a well-typed object; the API server reports them only then, too.
        cel::check(crd, object, &mut report.problems);
    }
    if report.problems.is_empty() {
        crd.runtime_checks(object, &mut report.problems);
    }
    Some(report)
}

fn check_metadata(object: &Value, problems: &mut Vec<Problem>) {
    match object.pointer("/metadata/name") {
        None | Some(Value::Null) => problems.push(Problem {
            path: "metadata.name".into(),
            message: "required value is missing (generateName is only honoured on create by the API server, not by apply)".into(),
            kind: ProblemKind::Rejected,
        }),
        Some(Value::String(name)) => {
            if let Err(e) = check_dns_subdomain(name) {
                problems.push(Problem { path: "metadata.name".into(), message: format!("invalid name {name:?}: {e}"), kind: ProblemKind::Rejected });
            }
        }
        Some(other) => problems.push(Problem {
            path: "metadata.name".into(),
            message: format!("must be a string, not {other}"),
            kind: ProblemKind::Rejected,
        }),
    }
}

/// Runs `check` on `object` as a `T`. The schema already admitted the object, so a failure to
/// read it as a `T` is a bug in one of them, reported as such.
pub fn typed<T: serde::de::DeserializeOwned>(
    object: &Value,
    problems: &mut Vec<Problem>,
    check: fn(&T, &mut Vec<Problem>),
) {
    match serde_json::from_value::<T>(object.clone()) {
        Ok(typed) => check(&typed, problems),
        Err(e) => problems.push(Problem {
            path: String::new(),
            message: format!("internal error: schema and types disagree: {e}"),
            kind: ProblemKind::Rejected,
        }),
    }
}
