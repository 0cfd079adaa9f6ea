//! Evaluates the CRDs' `x-kubernetes-validations` CEL rules client-side, as the API server
//! does on create (rules that compare with `oldSelf` only apply to updates and are skipped).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use kube_cel::{CompiledSchema, ErrorKind, Validator, compile_schema};
use serde_json::Value;

use super::{Problem, ProblemKind};
use crate::crd::Crd;

fn compiled(crd: &Crd) -> &'static CompiledSchema {
    // Compiled once per CRD for the life of the process: `validate` runs over many objects.
    // The restricted label domains change the rules, so they are part of the key (by the
    // address and length of their static list).
    type Key = (&'static str, &'static str, &'static str, usize, usize);
    type Cache = Mutex<HashMap<Key, &'static CompiledSchema>>;
    static SCHEMAS: OnceLock<Cache> = OnceLock::new();
    let mut schemas = SCHEMAS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    schemas
        .entry((
            crd.group(),
            crd.version(),
            crd.kind(),
            crd.label_domains().as_ptr() as usize,
            crd.label_domains().len(),
        ))
        .or_insert_with(|| Box::leak(Box::new(compile_schema(&crd.schema()))))
}

/// Appends a problem for every CEL rule the object breaks.
pub fn check(crd: &Crd, object: &Value, problems: &mut Vec<Problem>) {
    let Err(errors) = Validator::new().validate_compiled(compiled(crd), object, None) else {
        return;
    };
    for error in errors.iter() {
        let message = match error.kind {
            ErrorKind::ValidationFailure => error.message.clone(),
            // A rule that cannot run on this value (e.g. `int("a")`) fails the object, as
            // the API server's would.
            _ => format!(
                "rule `{}` could not be evaluated: {}",
                error.rule, error.message
            ),
        };
        problems.push(Problem {
            path: error.field_path.clone(),
            message,
            kind: ProblemKind::Rejected,
        });
    }
}
