//! Reads Kubernetes manifests: multi-document YAML or JSON, with `kind: List` flattened, as
//! `kubectl apply -f` and `kubectl get -o yaml|json` write them — a file, standard input (`-`),
//! or a directory (recursively, as `kubectl apply -R -f`).
//!
//! Cluster dumps are large (100,000 pods with `managedFields` run to hundreds of MB), so the
//! reader keeps no more than it must: `metadata.managedFields`, the API server's bookkeeping of
//! who set which field, is dropped while parsing, and a List's items are handed to the caller's
//! [`FromObject`] one by one, so a caller that converts them to typed objects never holds the
//! whole dump as JSON values.

use std::fmt;
use std::io::Read;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

mod block_yaml;

/// The largest manifest file read: a dump of 100,000 pods with `managedFields` is well below.
pub const MAX_MANIFEST_BYTES: u64 = 4 << 30;

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
    /// The file is larger than the reader takes.
    #[error("{path}: {bytes} bytes is more than the {limit} bytes a manifest may hold")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size (at least; standard input is not read past the limit).
        bytes: u64,
        /// The limit ([`MAX_MANIFEST_BYTES`]).
        limit: u64,
    },
    /// The file is not valid YAML (or JSON).
    #[error("{path}:{line}:{column}: invalid {syntax}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// `YAML` or `JSON`.
        syntax: &'static str,
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
    /// The file it came from (`-` for standard input).
    pub file: PathBuf,
    /// Its position among the file's objects, from 1.
    pub index: usize,
    /// The object.
    pub object: Value,
}

/// What a manifest's objects are read into, one at a time.
pub trait FromObject: Sized {
    /// The object, `managedFields` dropped.
    fn from_object(object: Value) -> Self;
    /// The object again, where a non-List object turns out to have had an `items` array that
    /// was read as if it were a List's. Only a `Value` needs to give it back intact; a typed
    /// reader may lose it (no kind it reads has top-level `items`).
    fn into_object(self) -> Value;
}

impl FromObject for Value {
    fn from_object(object: Value) -> Self {
        object
    }
    fn into_object(self) -> Value {
        self
    }
}

/// Parses YAML or JSON text holding one or more documents into objects; empty documents are
/// skipped and `List` objects contribute their items.
pub fn parse_documents(path: &Path, text: &str) -> Result<Vec<Document>, ManifestError> {
    Ok(parse_objects::<Value>(path, text)?
        .into_iter()
        .enumerate()
        .map(|(i, object)| Document {
            file: path.to_path_buf(),
            index: i + 1,
            object,
        })
        .collect())
}

/// Parses YAML or JSON text into `T`s, one per object, in order (Lists flattened, empty
/// documents skipped). Text whose first character is `{` is read as JSON, several times faster
/// than reading it as YAML.
pub fn parse_objects<T: FromObject>(path: &Path, text: &str) -> Result<Vec<T>, ManifestError> {
    // As kubectl's YAML-or-JSON decoder sniffs it: a document that opens with `{` is JSON (a
    // flow-style YAML mapping there is refused by kubectl too).
    if text.trim_start().starts_with('{') {
        return parse_json(path, text);
    }
    parse_yaml(path, text)
}

fn parse_yaml<T: FromObject>(path: &Path, text: &str) -> Result<Vec<T>, ManifestError> {
    // What `kubectl get -o yaml` writes is read by the fast reader; anything else (and every
    // error) by the full parser.
    if let Ok(documents) = block_yaml::documents::<Objects<T>>(text) {
        return Ok(documents.into_iter().flat_map(|d| d.0).collect());
    }
    full_yaml(path, text)
}

fn full_yaml<T: FromObject>(path: &Path, text: &str) -> Result<Vec<T>, ManifestError> {
    let options = serde_saphyr::options! {
        // A dump is large by nature: its size is bounded by MAX_MANIFEST_BYTES instead. The
        // alias limits stay, so a small file cannot expand to an enormous one.
        budget: serde_saphyr::budget! {
            max_events: usize::MAX,
            max_nodes: usize::MAX,
            max_documents: usize::MAX,
            max_total_scalar_bytes: usize::MAX,
            max_depth: 512,
        },
    };
    let documents: Vec<Objects<T>> = serde_saphyr::from_multiple_with_options(text, options)
        .map_err(|e| {
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
                syntax: "YAML",
                line,
                column,
                message,
            }
        })?;
    Ok(documents.into_iter().flat_map(|d| d.0).collect())
}

fn parse_json<T: FromObject>(path: &Path, text: &str) -> Result<Vec<T>, ManifestError> {
    let error = |e: serde_json::Error| ManifestError::Parse {
        path: path.to_path_buf(),
        syntax: "JSON",
        line: e.line() as u64,
        column: e.column() as u64,
        message: {
            // serde_json appends the location we already print in front.
            let m = e.to_string();
            m.rsplit_once(" at line ")
                .map_or(m.clone(), |(m, _)| m.to_string())
        },
    };
    let mut objects = Vec::new();
    for document in serde_json::Deserializer::from_str(text).into_iter::<Objects<T>>() {
        objects.extend(document.map_err(error)?.0);
    }
    Ok(objects)
}

/// The manifest files `path` names: itself, or the `.yaml`, `.yml` and `.json` files under a
/// directory, recursively, in the order `kubectl apply -R` visits them.
pub fn manifest_files(path: &Path) -> Result<Vec<PathBuf>, ManifestError> {
    let read_error = |source| ManifestError::Read {
        path: path.to_path_buf(),
        source,
    };
    if path == Path::new("-") || !path.metadata().map_err(read_error)?.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = Vec::new();
    let mut dirs = vec![path.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|source| ManifestError::Read {
            path: dir.clone(),
            source,
        })?;
        for entry in entries {
            let entry = entry.map_err(|source| ManifestError::Read {
                path: dir.clone(),
                source,
            })?;
            let p = entry.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p
                .extension()
                .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
            {
                files.push(p);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// The text of the manifest file `path` (`-` reads standard input), at most `limit` bytes.
pub fn read_text(path: &Path, limit: u64) -> Result<String, ManifestError> {
    let read_error = |source| ManifestError::Read {
        path: path.to_path_buf(),
        source,
    };
    let too_large = |bytes| ManifestError::TooLarge {
        path: path.to_path_buf(),
        bytes,
        limit,
    };
    let mut text = String::new();
    if path == Path::new("-") {
        std::io::stdin()
            .take(limit + 1)
            .read_to_string(&mut text)
            .map_err(read_error)?;
    } else {
        let file = std::fs::File::open(path).map_err(read_error)?;
        let size = file.metadata().map_err(read_error)?.len();
        if size > limit {
            return Err(too_large(size));
        }
        text.reserve(size as usize);
        file.take(limit + 1)
            .read_to_string(&mut text)
            .map_err(read_error)?;
    }
    if text.len() as u64 > limit {
        return Err(too_large(text.len() as u64));
    }
    Ok(text)
}

/// Reads and parses the manifests `path` names (a file, `-` for standard input, or a
/// directory).
pub fn read_documents(path: &Path) -> Result<Vec<Document>, ManifestError> {
    let mut documents = Vec::new();
    for file in manifest_files(path)? {
        documents.extend(parse_documents(
            &file,
            &read_text(&file, MAX_MANIFEST_BYTES)?,
        )?);
    }
    Ok(documents)
}

/// One document's objects: itself, or a List's items, or nothing for an empty document.
struct Objects<T>(Vec<T>);

impl<'de, T: FromObject> Deserialize<'de> for Objects<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ObjectsVisitor(PhantomData))
    }
}

struct ObjectsVisitor<T>(PhantomData<T>);

impl<'de, T: FromObject> Visitor<'de> for ObjectsVisitor<T> {
    type Value = Objects<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Kubernetes object, a List, or an array of objects")
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Objects(Vec::new()))
    }

    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(Objects(Vec::new()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Items::<T>::visit(seq).map(|items| Objects(items.0))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut object = Map::new();
        let mut items: Option<Vec<T>> = None;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "managedFields" => {
                    map.next_value::<IgnoredAny>()?;
                }
                "items" => match map.next_value::<ItemsOrValue<T>>()? {
                    ItemsOrValue::Items(v) => items = Some(v),
                    ItemsOrValue::Value(v) => {
                        object.insert(key, v);
                    }
                },
                _ => {
                    object.insert(key, map.next_value::<Trimmed>()?.0);
                }
            }
        }
        let is_list = object
            .get("kind")
            .and_then(Value::as_str)
            .is_some_and(|k| k.ends_with("List"));
        Ok(match items {
            Some(items) if is_list => Objects(items),
            Some(items) => {
                let items = items.into_iter().map(T::into_object).collect();
                object.insert("items".into(), Value::Array(items));
                Objects(vec![T::from_object(Value::Object(object))])
            }
            None => Objects(vec![T::from_object(Value::Object(object))]),
        })
    }
}

/// A top-level `items` field: an array, read item by item, or anything else.
enum ItemsOrValue<T> {
    Items(Vec<T>),
    Value(Value),
}

impl<'de, T: FromObject> Deserialize<'de> for ItemsOrValue<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: FromObject> Visitor<'de> for V<T> {
            type Value = ItemsOrValue<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                Items::<T>::visit(seq).map(|items| ItemsOrValue::Items(items.0))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                TrimmedVisitor.visit_map(map).map(ItemsOrValue::Value)
            }
            fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
                Ok(ItemsOrValue::Value(Value::Bool(v)))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
                Ok(ItemsOrValue::Value(v.into()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
                Ok(ItemsOrValue::Value(v.into()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
                Ok(ItemsOrValue::Value(float(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(ItemsOrValue::Value(Value::String(v.into())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(ItemsOrValue::Value(Value::String(v)))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(ItemsOrValue::Value(Value::Null))
            }
            fn visit_none<E>(self) -> Result<Self::Value, E> {
                Ok(ItemsOrValue::Value(Value::Null))
            }
        }
        deserializer.deserialize_any(V(PhantomData))
    }
}

/// Array elements, each read as an object and handed to `T` at once (null elements skipped).
struct Items<T>(Vec<T>);

impl<T: FromObject> Items<T> {
    fn visit<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element::<Trimmed>()? {
            if !item.0.is_null() {
                items.push(T::from_object(item.0));
            }
        }
        Ok(Items(items))
    }
}

/// A JSON value without any `managedFields` member.
struct Trimmed(Value);

impl<'de> Deserialize<'de> for Trimmed {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TrimmedVisitor).map(Trimmed)
    }
}

fn float(v: f64) -> Value {
    Number::from_f64(v).map_or(Value::Null, Value::Number)
}

struct TrimmedVisitor;

impl<'de> Visitor<'de> for TrimmedVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.into()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(item) = seq.next_element::<Trimmed>()? {
            v.push(item.0);
        }
        Ok(Value::Array(v))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == "managedFields" {
                map.next_value::<IgnoredAny>()?;
            } else {
                object.insert(key, map.next_value::<Trimmed>()?.0);
            }
        }
        Ok(Value::Object(object))
    }
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

    /// `kubectl get -o yaml` and `-o json` of the same objects read the same, without
    /// `managedFields`, and a YAML dump past the parser's default budget (250,000 nodes) reads: 15,000 pods of about 20 nodes each.
    #[test]
    fn dumps_read_alike_in_yaml_and_json_without_managed_fields() {
        let pod = |i: usize| {
            serde_json::json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("p{i}"), "namespace": "default",
                    "managedFields": [{"manager": "kubelet", "operation": "Update",
                        "fieldsV1": {"f:status": {"f:conditions": {".": {}}}}}]},
                "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "100m"}}}]}})
        };
        let list = serde_json::json!({"apiVersion": "v1", "kind": "List",
            "items": (0..15_000).map(pod).collect::<Vec<_>>()});
        let json = serde_json::to_string_pretty(&list).unwrap();
        let yaml = to_yaml_documents(std::slice::from_ref(&list));
        let from_json = parse_documents(Path::new("dump.json"), &json).unwrap();
        let from_yaml = parse_documents(Path::new("dump.yaml"), &yaml).unwrap();
        assert_eq!(from_json.len(), 15_000);
        assert_eq!(from_yaml.len(), 15_000);
        let mut expected = pod(14_999);
        expected["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
        assert_eq!(from_json[14_999].object, expected);
        assert_eq!(from_yaml[14_999].object, expected);
        assert_eq!(from_yaml[14_999].index, 15_000);
    }

    #[test]
    fn an_object_with_items_that_is_no_list_stays_whole() {
        let text = "kind: Config\nitems: [{a: 1}, {b: 2}]\n---\n[{kind: Pod}, {kind: Node}]\n";
        let docs = parse_documents(Path::new("x.yaml"), text).unwrap();
        assert_eq!(docs.len(), 3, "{docs:?}");
        assert_eq!(docs[0].object["items"][1]["b"], 2);
        assert_eq!(
            docs[2].object["kind"], "Node",
            "a top-level array is a list of objects"
        );
    }

    #[test]
    fn json_errors_carry_line_and_column() {
        let text = "{\n  \"kind\": \"List\",\n  \"items\": [\n    {\"kind\": \"Pod\",}\n  ]\n}\n";
        let Err(ManifestError::Parse {
            syntax,
            line,
            column,
            message,
            ..
        }) = parse_documents(Path::new("x.json"), text)
        else {
            panic!("expected a parse error");
        };
        assert_eq!((syntax, line), ("JSON", 4), "{message}");
        assert!(column > 0);
        assert!(!message.contains(" at line "), "{message}");
    }

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("karpenter-manifest-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_file_past_the_limit_is_an_error_of_its_own() {
        let dir = scratch("limit");
        let file = dir.join("big.yaml");
        std::fs::write(&file, "kind: Pod\nmetadata: {name: a}\n").unwrap();
        let err = read_text(&file, 10).unwrap_err();
        assert!(
            matches!(
                err,
                ManifestError::TooLarge {
                    bytes: 30,
                    limit: 10,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("more than the 10 bytes"), "{err}");
        assert_eq!(read_text(&file, 30).unwrap().len(), 30);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_directory_is_read_recursively_in_path_order() {
        let dir = scratch("dir");
        std::fs::create_dir_all(dir.join("b/c")).unwrap();
        std::fs::write(dir.join("a.yaml"), "kind: Pod\nmetadata: {name: a}\n").unwrap();
        std::fs::write(
            dir.join("b/c/d.json"),
            r#"{"kind": "Pod", "metadata": {"name": "d"}}"#,
        )
        .unwrap();
        std::fs::write(dir.join("b/c.yml"), "kind: Pod\nmetadata: {name: c}\n").unwrap();
        std::fs::write(dir.join("b/notes.txt"), "not a manifest").unwrap();
        let docs = read_documents(&dir).unwrap();
        let names: Vec<(&str, String)> = docs
            .iter()
            .map(|d| {
                (
                    d.object["metadata"]["name"].as_str().unwrap(),
                    d.file.strip_prefix(&dir).unwrap().display().to_string(),
                )
            })
            .collect();
        assert_eq!(
            names,
            [
                ("a", "a.yaml".into()),
                ("d", "b/c/d.json".into()),
                ("c", "b/c.yml".into())
            ]
        );
        std::fs::remove_dir_all(dir).unwrap();
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
