//! Validation test tables: a valid object, changes to it, and what [`super::validate_object`]
//! must say of each. Karpenter's API tests and every provider's NodeClass tests are written as
//! such tables (after upstream's CEL suites), so the runner lives here, once.

use serde_json::{Value, json};

use super::{ProblemKind, validate_object};
use crate::crd::Crd;

/// What validating a case must find.
#[derive(Clone, Copy, Debug)]
pub enum Expect {
    /// No problem at all.
    Valid,
    /// The API server refuses it; a problem names a field starting with the first string
    /// and says the second.
    Rejected(&'static str, &'static str),
    /// Stored, but karpenter's runtime validation fails, likewise.
    NotReady(&'static str, &'static str),
}

/// One case: a name, the object, and what must be found.
pub type Case = (&'static str, Value, Expect);

/// Sets (or, with `Value::Null`, removes) the field at a JSON pointer (`~1` for `/` in a
/// key), creating objects on the way.
pub fn set(mut object: Value, pointer: &str, value: Value) -> Value {
    let mut target = &mut object;
    let segments: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
    let (last, parents) = segments.split_last().expect("a pointer has a segment");
    for segment in parents {
        target = match target {
            Value::Array(items) => &mut items[segment.parse::<usize>().expect("an index")],
            other => other
                .as_object_mut()
                .expect("an object on the way")
                .entry(segment.replace("~1", "/"))
                .or_insert_with(|| json!({})),
        };
    }
    let last = last.replace("~1", "/");
    match target {
        Value::Array(items) => items[last.parse::<usize>().expect("an index")] = value,
        other if value.is_null() => {
            other.as_object_mut().expect("an object").remove(&last);
        }
        other => {
            other
                .as_object_mut()
                .expect("an object")
                .insert(last, value);
        }
    }
    object
}

/// Validates every case against `crds`; the failures, one line each (empty when all pass).
pub fn failures(crds: &[Crd], cases: Vec<Case>) -> Vec<String> {
    let mut failures = Vec::new();
    for (name, object, expect) in cases {
        let Some(report) = validate_object(crds, &object) else {
            failures.push(format!("{name}: not a kind of these CRDs"));
            continue;
        };
        let ok = match expect {
            Expect::Valid => report.problems.is_empty(),
            Expect::Rejected(path, text) | Expect::NotReady(path, text) => {
                let kind = if matches!(expect, Expect::Rejected(..)) {
                    ProblemKind::Rejected
                } else {
                    ProblemKind::NotReady
                };
                report
                    .problems
                    .iter()
                    .any(|p| p.kind == kind && p.path.starts_with(path) && p.message.contains(text))
            }
        };
        if !ok {
            let shown: Vec<String> = report
                .problems
                .iter()
                .map(|p| format!("{:?} {p}", p.kind))
                .collect();
            failures.push(format!("{name}: got {shown:?}"));
        }
    }
    failures
}
