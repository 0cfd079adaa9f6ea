//! `karpenter-rs validate`: checks NodePool, NodeClaim and every registered provider's
//! NodeClass manifests against the same rules as the CRDs and karpenter's runtime validation.

use std::fmt::Write;
use std::path::PathBuf;

use karpenter_api::validation::{ProblemKind, validate_object};

use karpenter_planner::manifest::{ManifestError, read_documents};

/// What a validation run found.
#[derive(Debug, Default)]
pub struct Outcome {
    /// One line per problem: `FILE: Kind/name: field.path: reason`.
    pub lines: Vec<String>,
    /// Files that could not be read or parsed.
    pub unreadable: Vec<ManifestError>,
    /// Karpenter objects checked.
    pub checked: usize,
    /// Of those, how many had problems.
    pub invalid: usize,
    /// Objects of other kinds, left alone.
    pub skipped: usize,
}

impl Outcome {
    /// The process exit code: 2 when a file could not be used, 1 when an object is invalid.
    pub fn exit_code(&self) -> u8 {
        if !self.unreadable.is_empty() {
            2
        } else if self.invalid > 0 {
            1
        } else {
            0
        }
    }

    /// The closing summary.
    pub fn summary(&self) -> String {
        let mut s = format!("{} objects checked, {} invalid", self.checked, self.invalid);
        if self.skipped > 0 {
            let _ = write!(s, ", {} of other kinds skipped", self.skipped);
        }
        if !self.unreadable.is_empty() {
            let _ = write!(s, ", {} files unreadable", self.unreadable.len());
        }
        s
    }
}

/// Validates every object in `files`.
pub fn run(files: &[PathBuf]) -> Outcome {
    let crds = crate::registry::crds();
    let mut outcome = Outcome::default();
    for path in files {
        let documents = match read_documents(path) {
            Ok(documents) => documents,
            Err(e) => {
                outcome.unreadable.push(e);
                continue;
            }
        };
        for document in documents {
            let Some(mut report) = validate_object(&crds, &document.object) else {
                outcome.skipped += 1;
                continue;
            };
            outcome.checked += 1;
            if document.object.pointer("/metadata/name").is_none() {
                report.name = format!("<document {}>", document.index);
            }
            if !report.problems.is_empty() {
                outcome.invalid += 1;
            }
            for problem in &report.problems {
                let note = match problem.kind {
                    ProblemKind::Rejected => "",
                    ProblemKind::NotReady => {
                        " (the API server accepts this, but karpenter's validation fails and the NodePool is not Ready)"
                    }
                };
                outcome.lines.push(format!(
                    "{}: {}/{}: {problem}{note}",
                    path.display(),
                    report.kind,
                    report.name
                ));
            }
        }
    }
    outcome
}
