//! `karpenter-rs validate`: checks NodePool, NodeClaim and every registered provider's
//! NodeClass manifests against the same rules as the CRDs and karpenter's runtime validation.
//! With a catalog, it also warns about requirement values no instance type of the catalog
//! has: the API server accepts them, but they match nothing there.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::path::PathBuf;

use karpenter_api::crd::GroupKind;
use karpenter_api::labels::{
    CAPACITY_TYPE_LABEL, INSTANCE_TYPE_LABEL, ZONE_LABEL, normalize_label,
};
use karpenter_api::validation::{ProblemKind, validate_object};
use karpenter_cloudprovider::Catalog;
use serde_json::Value;

use karpenter_planner::manifest::{ManifestError, read_documents};

/// What a validation run found.
#[derive(Debug, Default)]
pub struct Outcome {
    /// One line per problem or warning: `FILE: Kind/name: field.path: reason`.
    pub lines: Vec<String>,
    /// Files that could not be read or parsed.
    pub unreadable: Vec<ManifestError>,
    /// Karpenter objects checked.
    pub checked: usize,
    /// Of those, how many had problems.
    pub invalid: usize,
    /// Objects of other kinds, left alone.
    pub skipped: usize,
    /// Warnings among `lines` (values the catalog has no instance type for); they do not
    /// make an object invalid.
    pub warnings: usize,
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
        if self.warnings > 0 {
            let _ = write!(s, ", {} warnings", self.warnings);
        }
        if self.skipped > 0 {
            let _ = write!(s, ", {} of other kinds skipped", self.skipped);
        }
        if !self.unreadable.is_empty() {
            let _ = write!(s, ", {} files unreadable", self.unreadable.len());
        }
        s
    }
}

/// Validates every object in `files`; with `catalog`, also warns about NodePool and
/// NodeClaim requirement values none of its instance types has.
pub fn run(files: &[PathBuf], catalog: Option<&Catalog>) -> Outcome {
    let crds = crate::registry::crds();
    let known = catalog.map(KnownValues::of);
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
                    document.file.display(),
                    report.kind,
                    report.name
                ));
            }
            if let Some(known) = &known {
                for warning in known.warnings(&document.object) {
                    outcome.warnings += 1;
                    outcome.lines.push(format!(
                        "{}: {}/{}: {warning}",
                        document.file.display(),
                        report.kind,
                        report.name
                    ));
                }
            }
        }
    }
    outcome
}

/// How many of the values a catalog has a warning lists.
const SAMPLE: usize = 8;

/// The values a catalog's instance types have for each label: their requirements, their
/// names and their offerings' zones and capacity types.
#[derive(Debug)]
struct KnownValues {
    catalog: String,
    /// The NodeClass the catalog's NodePools name, when it says.
    node_class: Option<GroupKind>,
    values: BTreeMap<String, BTreeSet<String>>,
}

impl KnownValues {
    fn of(catalog: &Catalog) -> Self {
        let mut values: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for it in &catalog.instance_types {
            let mut add = |key: &str, value: &str| {
                values.entry(key.into()).or_default().insert(value.into());
            };
            add(INSTANCE_TYPE_LABEL, &it.name);
            for offering in &it.offerings {
                add(ZONE_LABEL, &offering.zone);
                add(CAPACITY_TYPE_LABEL, &offering.capacity_type);
            }
            for requirement in it.requirements.iter() {
                if requirement.is_complement() {
                    continue;
                }
                for value in requirement.values() {
                    add(requirement.key(), value);
                }
            }
        }
        Self {
            catalog: catalog.name.clone(),
            node_class: catalog.node_class,
            values,
        }
    }

    /// One warning per `In` requirement of a NodePool or NodeClaim naming values of a label
    /// the catalog's instance types have, but not those values. Requirements on labels no
    /// instance type has (a NodePool's own labels) are left alone, and so are objects naming
    /// another NodeClass than the catalog's: they would not launch from it.
    fn warnings(&self, object: &Value) -> Vec<String> {
        let (path, spec) = match object.get("kind").and_then(Value::as_str) {
            Some("NodePool") => ("spec.template.spec.requirements", "/spec/template/spec"),
            Some("NodeClaim") => ("spec.requirements", "/spec"),
            _ => return Vec::new(),
        };
        let Some(spec) = object.pointer(spec) else {
            return Vec::new();
        };
        if let Some(class) = self.node_class {
            let named = |field: &str| {
                spec.pointer(&format!("/nodeClassRef/{field}"))
                    .and_then(Value::as_str)
            };
            if named("group").is_some_and(|g| g != class.group)
                || named("kind").is_some_and(|k| k != class.kind)
            {
                return Vec::new();
            }
        }
        let Some(requirements) = spec.get("requirements").and_then(Value::as_array) else {
            return Vec::new();
        };
        let mut warnings = Vec::new();
        for (i, requirement) in requirements.iter().enumerate() {
            let text = |field: &str| requirement.get(field).and_then(Value::as_str);
            let (Some(key), Some("In")) = (text("key"), text("operator")) else {
                continue;
            };
            let key = normalize_label(key);
            let Some(known) = self.values.get(key) else {
                continue;
            };
            let missing: Vec<&str> = requirement
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .filter(|v| !known.contains(*v))
                .collect();
            if missing.is_empty() {
                continue;
            }
            warnings.push(format!(
                "{path}[{i}].values: warning: no instance type of the {} catalog has {key} {}; it has {}",
                self.catalog,
                missing.join(", "),
                sample(known)
            ));
        }
        warnings
    }
}

/// A few of `values`, numerically ordered when they are numbers, and how many there are.
fn sample(values: &BTreeSet<String>) -> String {
    let mut sorted: Vec<&str> = values.iter().map(String::as_str).collect();
    if sorted.iter().all(|v| v.parse::<f64>().is_ok()) {
        sorted.sort_by(|a, b| {
            a.parse::<f64>()
                .unwrap_or_default()
                .total_cmp(&b.parse().unwrap_or_default())
        });
    }
    let shown = sorted[..sorted.len().min(SAMPLE)].join(", ");
    if sorted.len() > SAMPLE {
        format!("{shown}, … ({} values)", sorted.len())
    } else {
        shown
    }
}
