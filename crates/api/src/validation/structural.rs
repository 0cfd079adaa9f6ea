//! Checks a value against an OpenAPI v3 structural schema the way the API server does: types,
//! required fields, enums, patterns, lengths, bounds, list types, and unknown fields (which
//! `kubectl apply` rejects under its default strict field validation).

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

use regex::Regex;
use serde_json::{Map, Value};

use super::{Problem, ProblemKind};
use crate::crd;

/// Plain words for the patterns our schemas use, so an error says what is expected.
fn pattern_hint(pattern: &str) -> Option<&'static str> {
    Some(match pattern {
        crd::DURATION_OR_NEVER_PATTERN => {
            "a duration in whole s, m and h units such as 30s, 5m or 1h30m, or Never"
        }
        crd::DURATION_PATTERN => "a duration in whole s, m and h units such as 30s, 5m or 1h30m",
        crd::BUDGET_DURATION_PATTERN => "a duration in hours and minutes such as 8h, 30m or 2h20m",
        crd::BUDGET_NODES_PATTERN => "a node count such as 5, or a percentage from 0% to 100%",
        crd::CRON_PATTERN => {
            "a cron schedule of five fields (minute hour day-of-month month day-of-week) or @yearly, @monthly, @weekly, @daily, @hourly"
        }
        crd::QUANTITY_PATTERN => "a Kubernetes quantity such as 100, 500m, 4Gi or 1.5",
        crd::QUALIFIED_NAME_PATTERN => {
            "a qualified name: an optional DNS subdomain prefix and '/', then up to 63 alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"
        }
        crd::LABEL_VALUE_PATTERN => {
            "empty, or alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"
        }
        _ => return None,
    })
}

fn regex_for(pattern: &str) -> Result<Regex, regex::Error> {
    static CACHE: OnceLock<Mutex<Vec<(String, Regex)>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(Vec::new()));
    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, re)) = cache.iter().find(|(p, _)| p == pattern) {
        return Ok(re.clone());
    }
    let re = Regex::new(pattern)?;
    cache.push((pattern.to_string(), re.clone()));
    Ok(re)
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The path of an object property.
pub(crate) fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The path of a map entry (`metadata.labels[example.com/team]`).
pub(crate) fn map_entry(path: &str, key: &str) -> String {
    format!("{path}[{key}]")
}

struct Checker<'a> {
    problems: &'a mut Vec<Problem>,
}

impl Checker<'_> {
    fn report(&mut self, path: &str, message: String) {
        self.problems.push(Problem {
            path: path.to_string(),
            message,
            kind: ProblemKind::Rejected,
        });
    }

    fn check(&mut self, schema: &Value, value: &Value, path: &str) {
        let Some(schema) = schema.as_object() else {
            return;
        };
        if value.is_null() {
            // A null field is dropped by the API server, as if it were absent.
            return;
        }
        let int_or_string = schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
        if int_or_string {
            if !(value.is_string() || type_name(value) == "integer") {
                self.report(
                    path,
                    format!("must be an integer or a string, not {}", type_name(value)),
                );
                return;
            }
        } else if let Some(expected) = schema.get("type").and_then(Value::as_str) {
            let actual = type_name(value);
            let matches = actual == expected || (expected == "number" && actual == "integer");
            if !matches {
                self.report(path, format!("must be of type {expected}, not {actual}"));
                return;
            }
        }
        if let Some(options) = schema.get("enum").and_then(Value::as_array)
            && !options.contains(value)
        {
            let list: Vec<String> = options.iter().map(|o| o.to_string()).collect();
            self.report(
                path,
                format!(
                    "unsupported value {value}: supported values are {}",
                    list.join(", ")
                ),
            );
        }
        match value {
            Value::String(s) => self.check_string(schema, s, path),
            Value::Number(n) => self.check_number(schema, n, path),
            Value::Array(items) => self.check_array(schema, items, path),
            Value::Object(map) => self.check_object(schema, map, path),
            _ => {}
        }
    }

    fn check_string(&mut self, schema: &Map<String, Value>, s: &str, path: &str) {
        let chars = s.chars().count();
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
            && chars as u64 > max
        {
            self.report(
                path,
                format!("may not be longer than {max} characters (it has {chars})"),
            );
        }
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
            && (chars as u64) < min
        {
            let message = if chars == 0 {
                "may not be empty".to_string()
            } else {
                format!("must be at least {min} characters")
            };
            self.report(path, message);
        }
        if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
            match regex_for(pattern) {
                Ok(re) if !re.is_match(s) => {
                    let expected = pattern_hint(pattern)
                        .map_or_else(|| format!("a value matching '{pattern}'"), str::to_string);
                    self.report(path, format!("invalid value {s:?}: expected {expected}"));
                }
                Ok(_) => {}
                Err(e) => self.report(
                    path,
                    format!("schema pattern '{pattern}' does not compile: {e}"),
                ),
            }
        }
        if schema.get("format").and_then(Value::as_str) == Some("date-time") && !is_rfc3339(s) {
            self.report(path, format!("invalid value {s:?}: expected an RFC 3339 date-time such as 2024-01-01T00:00:00Z"));
        }
    }

    fn check_number(&mut self, schema: &Map<String, Value>, n: &serde_json::Number, path: &str) {
        let Some(v) = n.as_f64() else { return };
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
            && v < min
        {
            self.report(
                path,
                format!("must be greater than or equal to {min} (it is {n})"),
            );
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
            && v > max
        {
            self.report(
                path,
                format!("must be less than or equal to {max} (it is {n})"),
            );
        }
        if schema.get("format").and_then(Value::as_str) == Some("int32")
            && n.as_i64().is_none_or(|i| i32::try_from(i).is_err())
        {
            self.report(path, format!("{n} does not fit a 32-bit integer"));
        }
    }

    fn check_array(&mut self, schema: &Map<String, Value>, items: &[Value], path: &str) {
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
            && items.len() as u64 > max
        {
            self.report(
                path,
                format!("must have at most {max} items (it has {})", items.len()),
            );
        }
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
            && (items.len() as u64) < min
        {
            self.report(path, format!("must have at least {min} items"));
        }
        if let Some(item_schema) = schema.get("items") {
            for (i, item) in items.iter().enumerate() {
                self.check(item_schema, item, &format!("{path}[{i}]"));
            }
        }
        match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => {
                let mut seen = HashSet::new();
                for (i, item) in items.iter().enumerate() {
                    if !seen.insert(item.to_string()) {
                        self.report(&format!("{path}[{i}]"), format!("duplicate value {item}"));
                    }
                }
            }
            Some("map") => {
                let keys: Vec<&str> = schema
                    .get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|k| k.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let mut seen = HashSet::new();
                for (i, item) in items.iter().enumerate() {
                    let key: Vec<String> = keys
                        .iter()
                        .map(|k| item.get(*k).map(Value::to_string).unwrap_or_default())
                        .collect();
                    if !seen.insert(key.clone()) {
                        self.report(
                            &format!("{path}[{i}]"),
                            format!("duplicate entry with {} {}", keys.join(","), key.join(",")),
                        );
                    }
                }
            }
            _ => {}
        }
    }

    fn check_object(&mut self, schema: &Map<String, Value>, map: &Map<String, Value>, path: &str) {
        if let Some(required) = schema.get("required").and_then(Value::as_array) {
            for field in required.iter().filter_map(Value::as_str) {
                if map.get(field).is_none_or(Value::is_null) {
                    self.report(&child(path, field), "required value is missing".into());
                }
            }
        }
        if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64)
            && map.len() as u64 > max
        {
            self.report(
                path,
                format!("must have at most {max} entries (it has {})", map.len()),
            );
        }
        let properties = schema.get("properties").and_then(Value::as_object);
        let additional = schema.get("additionalProperties");
        for (key, value) in map {
            if let Some(property) = properties.and_then(|p| p.get(key)) {
                self.check(property, value, &child(path, key));
            } else if let Some(additional) = additional {
                self.check(additional, value, &map_entry(path, key));
            } else if properties.is_some() {
                self.report(&child(path, key), "unknown field".into());
            }
        }
    }
}

/// Checks `value` against `schema`, appending a problem for each violation.
pub fn check(schema: &Value, value: &Value, path: &str, problems: &mut Vec<Problem>) {
    Checker { problems }.check(schema, value, path);
}

/// Whether `s` is an RFC 3339 date-time (`2024-01-01T00:00:00Z`, fractions and offsets allowed).
fn is_rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |range: std::ops::Range<usize>| {
        b.get(range)
            .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
    };
    let fixed = b.len() >= 20
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && matches!(b[10], b'T' | b't' | b' ')
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19);
    if !fixed {
        return false;
    }
    let mut rest = &s[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return false;
        }
        rest = &frac[n..];
    }
    matches!(rest, "Z" | "z")
        || (rest.len() == 6
            && matches!(rest.as_bytes()[0], b'+' | b'-')
            && rest.as_bytes()[3] == b':'
            && rest[1..3]
                .bytes()
                .chain(rest[4..6].bytes())
                .all(|c| c.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn problems(schema: Value, value: Value) -> Vec<String> {
        let mut out = Vec::new();
        check(&schema, &value, "spec", &mut out);
        out.into_iter()
            .map(|p| format!("{}: {}", p.path, p.message))
            .collect()
    }

    #[test]
    fn reports_types_unknown_fields_and_required() {
        let schema = json!({"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}});
        assert_eq!(
            problems(schema.clone(), json!({"a": 1})),
            Vec::<String>::new()
        );
        assert_eq!(
            problems(schema.clone(), json!({"a": "1"})),
            ["spec.a: must be of type integer, not string"]
        );
        assert_eq!(
            problems(schema.clone(), json!({"b": "x"})),
            ["spec.a: required value is missing"]
        );
        assert_eq!(
            problems(schema, json!({"a": 1, "c": 2})),
            ["spec.c: unknown field"]
        );
    }

    #[test]
    fn int_or_string_and_patterns() {
        let schema = json!({"additionalProperties": {"anyOf": [{"type": "integer"}, {"type": "string"}], "pattern": crd::QUANTITY_PATTERN, "x-kubernetes-int-or-string": true}, "type": "object"});
        assert!(problems(schema.clone(), json!({"cpu": 4, "memory": "4Gi"})).is_empty());
        let out = problems(schema, json!({"cpu": "four"}));
        assert_eq!(out.len(), 1);
        assert!(
            out[0].starts_with("spec[cpu]: invalid value \"four\": expected a Kubernetes quantity"),
            "{out:?}"
        );
    }

    #[test]
    fn sets_reject_duplicates() {
        let schema =
            json!({"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"});
        assert_eq!(
            problems(schema, json!(["a", "b", "a"])),
            ["spec[2]: duplicate value \"a\""]
        );
    }

    #[test]
    fn date_times() {
        for ok in [
            "2024-01-01T01:01:01Z",
            "2024-01-01T01:01:01.5Z",
            "2024-01-01T01:01:01+02:00",
        ] {
            assert!(is_rfc3339(ok), "{ok}");
        }
        for bad in [
            "2024-01-01",
            "yesterday",
            "2024-01-01T01:01:01",
            "2024-01-01T01:01:01.Z",
        ] {
            assert!(!is_rfc3339(bad), "{bad}");
        }
    }
}
