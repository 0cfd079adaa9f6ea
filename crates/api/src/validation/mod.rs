//! Validation of manifests as `kubectl apply` and karpenter would judge them: first the CRD's
//! structural schema and CEL rules (the API server rejects the object), then karpenter's
//! runtime checks (the object is stored but the NodePool never becomes Ready).

#[cfg(feature = "cel")]
mod cel;
pub mod runtime;
pub mod structural;

use serde_json::Value;

use crate::crd::Crd;
use crate::labels::{GROUP, check_dns_subdomain};
use crate::nodeclaim::NodeClaim;
use crate::nodepool::NodePool;

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

/// Validates one manifest. Returns `None` for objects that are not karpenter's (a Deployment
/// in the same file, say), which are left to their own API.
pub fn validate_object(object: &Value) -> Option<Report> {
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
    let Some(crd) = Crd::for_kind(api_version, kind) else {
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
                "{kind} in {api_version} is not a kind karpenter-rs serves (NodePool and NodeClaim are karpenter.sh/v1)"
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
        runtime_checks(crd, object, &mut report.problems);
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

fn runtime_checks(crd: Crd, object: &Value, problems: &mut Vec<Problem>) {
    let typed = match crd {
        Crd::NodePool => serde_json::from_value::<NodePool>(object.clone())
            .map(|np| runtime::validate_node_pool(&np, problems)),
        Crd::NodeClaim => serde_json::from_value::<NodeClaim>(object.clone())
            .map(|nc| runtime::validate_node_claim(&nc, problems)),
        Crd::EC2NodeClass => {
            serde_json::from_value::<crate::aws::EC2NodeClass>(object.clone()).map(|_| ())
        }
        Crd::KwokNodeClass => Ok(()),
    };
    if let Err(e) = typed {
        // The schema admitted something the types cannot hold: a bug in one of them.
        problems.push(Problem {
            path: String::new(),
            message: format!("internal error: schema and types disagree: {e}"),
            kind: ProblemKind::Rejected,
        });
    }
}
