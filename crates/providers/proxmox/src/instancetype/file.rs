//! The instance types file (`--instance-types-file` / `INSTANCE_TYPES_FILE`, upstream's
//! `docs/instancetypes.md` and `hack/instance-types.json`): a JSON list of
//!
//! ```json
//! {"name": "c1.1VCPU-2GB",
//!  "capacity": {"cpu": "1", "memory": "2Gi", "pods": "64", "ephemeral-storage": "30Gi"},
//!  "capacitytype": "on-demand",
//!  "overhead": {"KubeReserved": {"cpu": "20m", "memory": "384Mi"},
//!               "SystemReserved": {"cpu": "10m", "memory": "64Mi"},
//!               "EvictionThreshold": {"memory": "100Mi"}}}
//! ```
//!
//! Keys match case-insensitively, as Go's decoder matches them, so files upstream reads parse
//! here. `offerings`, which upstream's generator may write, is accepted and ignored: offerings
//! come from the Proxmox nodes' room. Stricter than upstream, which takes any JSON that
//! decodes: every entry is checked and the first problem is refused naming the entry and the
//! field — a missing or duplicate name, a name that cannot be a label value, a capacity
//! without `cpu`, `memory` or `pods` (or with part of a vCPU: a VM has whole vCPUs), a value
//! that is not a quantity, a capacity type other than `on-demand` or `spot`, reservations
//! larger than the capacity, an unknown key (a misspelt `overhead` would otherwise vanish).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use karpenter_api::labels::{CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT};
use karpenter_core::instancetype::Overhead;
use karpenter_core::resources::{self, CPU, MEMORY, PODS, Resources};
use serde_json::{Map, Value};

use super::InstanceTypeSpec;

/// The capacity types an entry may be offered as.
pub const FILE_CAPACITY_TYPES: [&str; 2] = [CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT];

/// Why an instance types file is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InstanceTypesFileError {
    /// Not JSON.
    #[error("instance types file: not JSON: {0}")]
    Json(String),
    /// JSON, but not a list.
    #[error("instance types file: expected a list of instance types, not {0}")]
    NotAList(&'static str),
    /// An empty list: no node could ever be made.
    #[error("instance types file: the list is empty")]
    Empty,
    /// An entry with a problem.
    #[error("instance types file: {}: {reason}", entry_path(*index, name.as_deref(), field))]
    Entry {
        /// The entry's position in the list, from 0.
        index: usize,
        /// Its name, when it has a valid one.
        name: Option<String>,
        /// The field, as a path inside the entry (`capacity.memory`); empty for the entry.
        field: String,
        /// What is wrong.
        reason: String,
    },
}

impl InstanceTypesFileError {
    /// The field an [`InstanceTypesFileError::Entry`] names.
    pub fn field(&self) -> Option<&str> {
        match self {
            Self::Entry { field, .. } => Some(field),
            _ => None,
        }
    }
}

fn entry_path(index: usize, name: Option<&str>, field: &str) -> String {
    let mut path = format!("[{index}]");
    if let Some(name) = name {
        let _ = write!(path, " ({name})");
    }
    if !field.is_empty() {
        let _ = write!(path, " {field}");
    }
    path
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The entry being read, to build errors that name it.
struct Entry<'a> {
    index: usize,
    name: Option<&'a str>,
}

impl Entry<'_> {
    fn error(&self, field: &str, reason: impl Into<String>) -> InstanceTypesFileError {
        InstanceTypesFileError::Entry {
            index: self.index,
            name: self.name.map(str::to_string),
            field: field.to_string(),
            reason: reason.into(),
        }
    }
}

/// Whether `name` can be a label value (`node.kubernetes.io/instance-type`): at most 63
/// characters, alphanumerics with `-`, `_` and `.` inside.
fn label_value_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("must not be empty");
    }
    if name.len() > 63 {
        return Some("must be at most 63 characters (it is the instance-type label's value)");
    }
    let inner_ok = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let ends_ok = name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    (!inner_ok || !ends_ok).then_some(
        "must be letters, digits, '-', '_' and '.', starting and ending with a letter or digit \
         (it is the instance-type label's value)",
    )
}

/// A quantity as Go's `resource.Quantity` decodes one: a string or a bare number.
fn quantity(entry: &Entry<'_>, field: &str, value: &Value) -> Result<i64, InstanceTypesFileError> {
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        other => {
            return Err(entry.error(field, format!("expected a quantity, not {}", kind(other))));
        }
    };
    let milli = resources::parse_milli(&text).map_err(|e| entry.error(field, e.to_string()))?;
    if milli < 0 {
        return Err(entry.error(field, format!("{text:?} must not be negative")));
    }
    Ok(milli)
}

/// A resource list: `{"cpu": "1", "memory": "2Gi"}`; `null` is an empty one.
fn resource_list(
    entry: &Entry<'_>,
    field: &str,
    value: &Value,
) -> Result<Resources, InstanceTypesFileError> {
    let map = match value {
        Value::Null => return Ok(Resources::new()),
        Value::Object(map) => map,
        other => {
            return Err(entry.error(
                field,
                format!("expected resources by name, not {}", kind(other)),
            ));
        }
    };
    let mut list = Resources::new();
    for (name, value) in map {
        let path = format!("{field}.{name}");
        if name.is_empty() || name.chars().any(char::is_whitespace) {
            return Err(entry.error(&path, "is not a resource name"));
        }
        list.set(name, quantity(entry, &path, value)?);
    }
    Ok(list)
}

fn parse_capacity(
    entry: &Entry<'_>,
    field: &str,
    value: &Value,
) -> Result<Resources, InstanceTypesFileError> {
    if !value.is_object() {
        return Err(entry.error(
            field,
            format!("expected resources by name, not {}", kind(value)),
        ));
    }
    let capacity = resource_list(entry, field, value)?;
    for name in [CPU, MEMORY, PODS] {
        let path = format!("{field}.{name}");
        let milli = capacity.get(name);
        if milli == 0 {
            return Err(entry.error(&path, "is required and must be more than zero"));
        }
        if name != MEMORY && milli % 1000 != 0 {
            let what = if name == CPU {
                "must be whole vCPUs (a VM has whole vCPUs)"
            } else {
                "must be a whole number"
            };
            return Err(entry.error(&path, what));
        }
    }
    Ok(capacity)
}

/// The overhead's three lists, keyed as upstream's Go field names.
const OVERHEAD_KEYS: [&str; 3] = ["KubeReserved", "SystemReserved", "EvictionThreshold"];

fn parse_overhead(
    entry: &Entry<'_>,
    field: &str,
    value: &Value,
) -> Result<Overhead, InstanceTypesFileError> {
    let map = match value {
        Value::Null => return Ok(Overhead::default()),
        Value::Object(map) => map,
        other => {
            return Err(entry.error(
                field,
                format!(
                    "expected an object of {}, not {}",
                    OVERHEAD_KEYS.join(", "),
                    kind(other)
                ),
            ));
        }
    };
    let mut overhead = Overhead::default();
    for (key, value) in map {
        let path = format!("{field}.{key}");
        let list = match OVERHEAD_KEYS
            .iter()
            .position(|k| k.eq_ignore_ascii_case(key))
        {
            Some(0) => &mut overhead.kube_reserved,
            Some(1) => &mut overhead.system_reserved,
            Some(_) => &mut overhead.eviction_threshold,
            None => {
                return Err(entry.error(
                    &path,
                    format!("unknown field (expected {})", OVERHEAD_KEYS.join(", ")),
                ));
            }
        };
        *list = resource_list(entry, &path, value)?;
    }
    Ok(overhead)
}

fn parse_capacity_type(
    entry: &Entry<'_>,
    field: &str,
    value: &Value,
) -> Result<String, InstanceTypesFileError> {
    let text = match value {
        Value::Null => "",
        Value::String(s) => s.as_str(),
        other => return Err(entry.error(field, format!("expected a string, not {}", kind(other)))),
    };
    match text {
        // Upstream offers a type without one on demand.
        "" => Ok(CAPACITY_TYPE_ON_DEMAND.into()),
        t if FILE_CAPACITY_TYPES.contains(&t) => Ok(t.into()),
        t => Err(entry.error(
            field,
            format!(
                "{t:?} is not a capacity type (expected {})",
                FILE_CAPACITY_TYPES.join(" or ")
            ),
        )),
    }
}

/// The keys of an entry, in Go's field names' lower case.
const ENTRY_KEYS: [&str; 5] = ["name", "capacity", "capacitytype", "overhead", "offerings"];

fn find<'a>(map: &'a Map<String, Value>, key: &str) -> Option<(&'a str, &'a Value)> {
    map.iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(k, v)| (k.as_str(), v))
}

fn parse_entry(
    index: usize,
    value: &Value,
    seen: &mut BTreeMap<String, usize>,
) -> Result<InstanceTypeSpec, InstanceTypesFileError> {
    let mut entry = Entry { index, name: None };
    let Value::Object(map) = value else {
        return Err(entry.error("", format!("expected an object, not {}", kind(value))));
    };
    let name = match find(map, "name") {
        None => return Err(entry.error("name", "is required")),
        Some((_, Value::String(name))) => name.as_str(),
        Some((key, other)) => {
            return Err(entry.error(key, format!("expected a string, not {}", kind(other))));
        }
    };
    if let Some(problem) = label_value_problem(name) {
        return Err(entry.error("name", format!("{name:?} {problem}")));
    }
    entry.name = Some(name);
    if let Some(first) = seen.insert(name.to_string(), index) {
        return Err(entry.error("name", format!("repeats entry [{first}]'s name")));
    }
    if let Some(key) = map
        .keys()
        .find(|k| !ENTRY_KEYS.iter().any(|known| known.eq_ignore_ascii_case(k)))
    {
        return Err(entry.error(
            key,
            format!("unknown field (expected {})", ENTRY_KEYS.join(", ")),
        ));
    }
    let capacity = match find(map, "capacity") {
        None => return Err(entry.error("capacity", "is required")),
        Some((key, value)) => parse_capacity(&entry, key, value)?,
    };
    let capacity_type = match find(map, "capacitytype") {
        None => CAPACITY_TYPE_ON_DEMAND.to_string(),
        Some((key, value)) => parse_capacity_type(&entry, key, value)?,
    };
    let (overhead_key, overhead) = match find(map, "overhead") {
        None => ("overhead", Overhead::default()),
        Some((key, value)) => (key, parse_overhead(&entry, key, value)?),
    };
    let reserved = overhead.total();
    for name in [CPU, MEMORY] {
        if reserved.get(name) > capacity.get(name) {
            return Err(entry.error(
                overhead_key,
                format!(
                    "reserves {} {name}, more than the capacity's {}",
                    resources::format_milli(name, reserved.get(name)),
                    resources::format_milli(name, capacity.get(name)),
                ),
            ));
        }
    }
    Ok(InstanceTypeSpec {
        name: name.to_string(),
        capacity,
        capacity_type,
        overhead,
    })
}

/// Parses an instance types file. The list's order is kept.
pub fn parse_file(text: &str) -> Result<Vec<InstanceTypeSpec>, InstanceTypesFileError> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| InstanceTypesFileError::Json(e.to_string()))?;
    let Value::Array(entries) = &value else {
        return Err(InstanceTypesFileError::NotAList(kind(&value)));
    };
    if entries.is_empty() {
        return Err(InstanceTypesFileError::Empty);
    }
    let mut seen = BTreeMap::new();
    entries
        .iter()
        .enumerate()
        .map(|(index, entry)| parse_entry(index, entry, &mut seen))
        .collect()
}

fn list_value(resources: &Resources) -> Value {
    if resources.iter().next().is_none() {
        return Value::Null;
    }
    Value::Object(
        resources
            .to_list()
            .into_iter()
            .map(|(name, q)| (name, Value::String(q.0)))
            .collect(),
    )
}

/// Writes instance types in the file's format (what upstream's `instancetypes generate`
/// prints), so the built-in list can be written out, edited and read back.
pub fn to_file(specs: &[InstanceTypeSpec]) -> String {
    let entries: Vec<Value> = specs
        .iter()
        .map(|spec| {
            let mut entry = Map::new();
            entry.insert("name".into(), Value::String(spec.name.clone()));
            entry.insert("capacity".into(), list_value(&spec.capacity));
            entry.insert(
                "capacitytype".into(),
                Value::String(spec.capacity_type.clone()),
            );
            let mut overhead = Map::new();
            for (key, list) in OVERHEAD_KEYS.iter().zip([
                &spec.overhead.kube_reserved,
                &spec.overhead.system_reserved,
                &spec.overhead.eviction_threshold,
            ]) {
                overhead.insert((*key).into(), list_value(list));
            }
            entry.insert("overhead".into(), Value::Object(overhead));
            Value::Object(entry)
        })
        .collect();
    let mut text = serde_json::to_string_pretty(&Value::Array(entries))
        .expect("a JSON value always serializes");
    text.push('\n');
    text
}
