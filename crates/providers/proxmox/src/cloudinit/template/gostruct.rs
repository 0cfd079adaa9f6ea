//! Go structs as template values, with what Go's YAML and JSON encoders read from the struct
//! type kept alongside the fields.

use std::collections::HashMap;

use gtmpl::Value;

/// Where a struct's layout lives inside its [`Value::Object`]. Template identifiers cannot
/// start with a NUL, so no template reaches it.
pub(super) const LAYOUT_KEY: &str = "\u{0}layout";

/// Omitted by `toYaml` when empty (`yaml:",omitempty"`).
const OMIT_EMPTY: u64 = 1;
/// A pointer: `omitempty` drops it only when nil, and a nil one is `null`.
const POINTER: u64 = 2;
/// A Go slice or map: printed `null` by `toJson` when empty, as a nil one is.
const NIL_WHEN_EMPTY: u64 = 4;

/// One field of a struct as the encoders see it.
pub(super) struct FieldLayout<'a> {
    /// The Go field name (also the JSON key: upstream's value types carry no JSON tags).
    pub go: &'a str,
    /// The YAML key.
    pub yaml: &'a str,
    /// The value.
    pub value: &'a Value,
    flags: u64,
}

impl FieldLayout<'_> {
    /// Whether `toYaml` leaves the field out.
    pub fn omitted_from_yaml(&self) -> bool {
        if self.flags & OMIT_EMPTY == 0 {
            return false;
        }
        if self.flags & POINTER != 0 {
            return matches!(self.value, Value::Nil | Value::NoValue);
        }
        is_zero(self.value)
    }

    /// Whether `toJson` prints the field as `null` (a nil slice or map).
    pub fn json_null(&self) -> bool {
        self.flags & NIL_WHEN_EMPTY != 0
            && match self.value {
                Value::Array(a) => a.is_empty(),
                Value::Map(m) | Value::Object(m) => m.is_empty(),
                _ => false,
            }
    }
}

/// The fields of a struct value in declaration order; `None` for anything else.
pub(super) fn fields(value: &Value) -> Option<Vec<FieldLayout<'_>>> {
    let Value::Object(map) = value else {
        return None;
    };
    let Some(Value::Array(layout)) = map.get(LAYOUT_KEY) else {
        return None;
    };
    let mut out = Vec::with_capacity(layout.len());
    for entry in layout {
        let Value::Array(parts) = entry else { continue };
        let [Value::String(go), Value::String(yaml), Value::Number(flags)] = parts.as_slice()
        else {
            continue;
        };
        let Some(value) = map.get(go) else { continue };
        out.push(FieldLayout {
            go,
            yaml,
            value,
            flags: flags.as_u64().unwrap_or(0),
        });
    }
    Some(out)
}

/// The visible entries of an object or map (a struct's layout left out).
pub(super) fn entries(map: &HashMap<String, Value>) -> impl Iterator<Item = (&String, &Value)> {
    map.iter().filter(|(k, _)| k.as_str() != LAYOUT_KEY)
}

/// Go's zero value test (`reflect.Value.IsZero`, which `empty` and `omitempty` use), on the
/// value a template sees: nil slices and maps arrive as empty ones.
pub(super) fn is_zero(value: &Value) -> bool {
    match value {
        Value::NoValue | Value::Nil => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n
            .as_f64()
            .map_or_else(|| n.as_u64() == Some(0), |f| f == 0.0),
        Value::Array(a) => a.is_empty(),
        Value::Map(m) => m.is_empty(),
        Value::Object(o) => match fields(value) {
            Some(fields) => fields.iter().all(|f| is_zero(f.value)),
            None => o.is_empty(),
        },
        Value::Function(_) => false,
    }
}

/// Builds the value of a Go struct, field by field in declaration order.
///
/// Untagged fields (upstream's `MetaData`, `Kubernetes`) get Go's YAML default key, the
/// lowercased field name, and are never omitted; tagged ones name their key and are
/// `omitempty` as upstream's tags are.
#[derive(Debug, Default)]
pub struct GoStruct {
    fields: HashMap<String, Value>,
    layout: Vec<Value>,
}

impl GoStruct {
    /// An empty struct.
    pub fn new() -> Self {
        Self::default()
    }

    fn push(mut self, go: &str, yaml: &str, flags: u64, value: Value) -> Self {
        self.layout.push(Value::Array(vec![
            Value::from(go),
            Value::from(yaml),
            Value::from(flags),
        ]));
        self.fields.insert(go.to_string(), value);
        self
    }

    /// An untagged field: YAML key is the lowercased Go name, always printed.
    pub fn field(self, go: &str, value: impl Into<Value>) -> Self {
        let yaml = go.to_lowercase();
        self.push(go, &yaml, 0, value.into())
    }

    /// An untagged slice or map field (`null` in JSON when empty, as Go's nil one).
    pub fn collection(self, go: &str, value: impl Into<Value>) -> Self {
        let yaml = go.to_lowercase();
        self.push(go, &yaml, NIL_WHEN_EMPTY, value.into())
    }

    /// A `yaml:"<yaml>"` field without `omitempty`.
    pub fn keyed(self, go: &str, yaml: &str, value: impl Into<Value>) -> Self {
        self.push(go, yaml, 0, value.into())
    }

    /// A `yaml:"<yaml>,omitempty"` value field: left out of YAML when zero.
    pub fn omitempty(self, go: &str, yaml: &str, value: impl Into<Value>) -> Self {
        self.push(go, yaml, OMIT_EMPTY, value.into())
    }

    /// A `yaml:"<yaml>,omitempty"` slice or map field.
    pub fn omitempty_collection(self, go: &str, yaml: &str, value: impl Into<Value>) -> Self {
        self.push(go, yaml, OMIT_EMPTY | NIL_WHEN_EMPTY, value.into())
    }

    /// A `yaml:"<yaml>,omitempty"` pointer field: `None` is nil (left out of YAML, `null` in
    /// JSON); a pointer to a zero value is still printed.
    pub fn pointer(self, go: &str, yaml: &str, value: Option<Value>) -> Self {
        self.push(go, yaml, OMIT_EMPTY | POINTER, value.unwrap_or(Value::Nil))
    }

    /// The struct's value.
    pub fn build(mut self) -> Value {
        self.fields
            .insert(LAYOUT_KEY.to_string(), Value::Array(self.layout));
        Value::Object(self.fields)
    }
}

impl From<GoStruct> for Value {
    fn from(s: GoStruct) -> Self {
        s.build()
    }
}
