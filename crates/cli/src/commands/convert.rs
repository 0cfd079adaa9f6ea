//! `karpenter-rs convert`: prints the `karpenter.sh/v1` form of v1beta1 manifests.

use std::path::PathBuf;

use anyhow::{Context, bail};
use karpenter_api::convert::convert_v1beta1;
use karpenter_api::validation::validate_object;

use karpenter_planner::manifest::{read_documents, to_yaml_documents};

/// The converted YAML and the notes for the user.
pub struct Converted {
    /// Multi-document YAML of every object, converted or passed through.
    pub yaml: String,
    /// What changed, and what the converted objects still get wrong.
    pub notes: Vec<String>,
}

/// Converts every v1beta1 NodePool and NodeClaim in `files`, and provider NodeClasses of an
/// older version a provider registered a conversion for; other objects pass through.
pub fn run(files: &[PathBuf], node_class: Option<&str>) -> anyhow::Result<Converted> {
    let node_class = node_class
        .map(|s| {
            s.split_once('/').with_context(|| {
                format!("--nodeclass {s:?} must be GROUP/KIND, e.g. karpenter.k8s.aws/EC2NodeClass")
            })
        })
        .transpose()?;
    let crds = crate::registry::crds();
    let providers = crate::registry::node_classes();
    let mut objects = Vec::new();
    let mut notes = Vec::new();
    for path in files {
        for document in read_documents(path)? {
            let object = &document.object;
            let node_class_conversion = crate::registry::PROVIDERS
                .iter()
                .flat_map(|p| p.conversions)
                .find(|c| object["apiVersion"] == c.from_api_version && object["kind"] == c.kind);
            let is_v1beta1 = object["apiVersion"] == "karpenter.sh/v1beta1";
            if !is_v1beta1 && node_class_conversion.is_none() {
                objects.push(document.object);
                continue;
            }
            let label = format!(
                "{}: {}/{}",
                document.file.display(),
                object["kind"].as_str().unwrap_or("?"),
                object["metadata"]["name"].as_str().unwrap_or("<unnamed>")
            );
            let conversion = match node_class_conversion {
                Some(c) => (c.convert)(object),
                None => convert_v1beta1(object, node_class, &providers),
            }
            .with_context(|| label.clone())?;
            notes.extend(conversion.changes.iter().map(|c| format!("{label}: {c}")));
            if let Some(report) = validate_object(&crds, &conversion.object) {
                notes.extend(
                    report
                        .problems
                        .iter()
                        .map(|p| format!("{label}: still invalid: {p}")),
                );
            }
            objects.push(conversion.object);
        }
    }
    if objects.is_empty() {
        bail!("no objects found");
    }
    Ok(Converted {
        yaml: to_yaml_documents(&objects),
        notes,
    })
}
