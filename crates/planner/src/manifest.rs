//! Reads Kubernetes manifests: multi-document YAML (or JSON), with `kind: List` flattened, as
//! `kubectl apply -f` and `kubectl get -o yaml` write them.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// Why a manifest file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file could not be read.
    #[error("{path}: cannot read: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid YAML.
    #[error("{path}:{line}:{column}: invalid YAML: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line of the error (0 when unknown).
        line: u64,
        /// 1-based column of the error (0 when unknown).
        column: u64,
        /// What the parser said.
        message: String,
    },
}

/// One object from a manifest file.
#[derive(Debug, Clone)]
pub struct Document {
    /// Its position among the file's objects, from 1.
    pub index: usize,
    /// The object.
    pub object: Value,
}

/// Parses YAML text holding one or more documents into objects; empty documents are skipped
/// and `List` objects contribute their items.
pub fn parse_documents(path: &Path, text: &str) -> Result<Vec<Document>, ManifestError> {
    let values: Vec<Value> = serde_saphyr::from_multiple(text).map_err(|e| {
        let (line, column) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
        let message = e.to_string();
        let first_line = message.lines().next().unwrap_or_default();
        // The parser repeats the location we already print in front.
        let message = first_line
            .strip_prefix("error: ")
            .and_then(|m| m.split_once(": ").filter(|(at, _)| at.starts_with("line ")))
            .map_or(first_line, |(_, rest)| rest)
            .to_string();
        ManifestError::Parse {
            path: path.to_path_buf(),
            line,
            column,
            message,
        }
    })?;
    let mut objects = Vec::new();
    for value in values {
        match value {
            Value::Null => {}
            Value::Object(ref map)
                if map
                    .get("kind")
                    .and_then(Value::as_str)
                    .is_some_and(|k| k.ends_with("List"))
                    && map.get("items").is_some_and(Value::is_array) =>
            {
                if let Some(Value::Array(items)) = map.get("items") {
                    objects.extend(items.iter().cloned());
                }
            }
            other => objects.push(other),
        }
    }
    Ok(objects
        .into_iter()
        .enumerate()
        .map(|(i, object)| Document {
            index: i + 1,
            object,
        })
        .collect())
}

/// Reads and parses a manifest file (`-` reads standard input).
pub fn read_documents(path: &Path) -> Result<Vec<Document>, ManifestError> {
    let text = if path == Path::new("-") {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(path)
    }
    .map_err(|source| ManifestError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse_documents(path, &text)
}

/// Renders objects as multi-document YAML.
pub fn to_yaml_documents(objects: &[Value]) -> String {
    let mut out = String::new();
    for object in objects {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(object).expect("JSON values always serialize"));
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_documents_and_lists() {
        let text = "apiVersion: v1\nkind: List\nitems:\n- kind: Node\n  metadata: {name: a}\n- kind: Node\n  metadata: {name: b}\n---\n---\nkind: Pod\nmetadata:\n  name: c\nspec:\n  replicas: 3\n";
        let docs = parse_documents(Path::new("x.yaml"), text).unwrap();
        let names: Vec<&str> = docs
            .iter()
            .map(|d| d.object["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert_eq!(
            docs[2].object["spec"]["replicas"], 3,
            "integers stay integers"
        );
        assert_eq!(docs[2].index, 3);
    }

    #[test]
    fn parse_errors_carry_line_and_column() {
        let text = "kind: NodePool\nmetadata:\n  name: [unclosed\n";
        let Err(ManifestError::Parse { line, column, .. }) =
            parse_documents(Path::new("x.yaml"), text)
        else {
            panic!("expected a parse error");
        };
        assert!(line >= 3, "line {line}");
        assert!(column > 0);
    }

    #[test]
    fn yaml_round_trips() {
        for crd in karpenter_api::crd::CORE {
            let definition = crd.definition();
            let text = to_yaml_documents(std::slice::from_ref(&definition));
            let back = parse_documents(Path::new("crd.yaml"), &text).unwrap();
            assert_eq!(back[0].object, definition, "{crd:?}");
        }
    }
}
