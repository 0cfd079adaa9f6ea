//! Upstream's template functions (`genericMap` in `functions.go`), with upstream's argument
//! orders: the value a pipeline feeds in is the last argument, so the string being tested or
//! trimmed comes last (`"x.com" | trimSuffix ".com"`, `hasPrefix "he" "hello"`), while `get`
//! takes the map first (`get .Values "key"`). Upstream's `docs/functions.md` shows some of
//! these the other way round; the code, followed here, is what existing templates rely on.
//!
//! Arguments are checked as Go's template engine checks them against the Go signatures: a
//! string parameter wants a string (a missing map key is no string: `invalid value`), an
//! `any` parameter takes anything, including a missing value as nil. Where Go would only fail
//! for its static typing (`hasKey` on a `map[string]string`), the functions accept the value.

use std::fmt::Write;

use gtmpl::{Func, FuncError, Value};
use regex::Regex;

use super::{b64, gostruct, json, net, yaml};

/// The functions templates can call besides Go's builtins, by name. `toPrettyYaml` is the
/// name upstream's documentation uses for `toYamlPretty`; both work here.
pub static FUNCTIONS: &[(&str, Func)] = &[
    ("default", default as Func),
    ("coalesce", coalesce as Func),
    ("ternary", ternary as Func),
    ("toJson", to_json as Func),
    ("toPrettyJson", to_pretty_json as Func),
    ("toYaml", to_yaml as Func),
    ("toYamlPretty", to_yaml_pretty as Func),
    ("toPrettyYaml", to_yaml_pretty as Func),
    ("indent", indent as Func),
    ("nindent", nindent as Func),
    ("quote", quote as Func),
    ("upper", upper as Func),
    ("lower", lower as Func),
    ("trim", trim as Func),
    ("trimSuffix", trim_suffix as Func),
    ("trimPrefix", trim_prefix as Func),
    ("split", split as Func),
    ("join", join as Func),
    ("replace", replace as Func),
    ("regexFind", regex_find as Func),
    ("regexFindString", regex_find_string as Func),
    ("regexReplaceAll", regex_replace_all as Func),
    ("get", get as Func),
    ("getValue", get_value as Func),
    ("empty", empty as Func),
    ("contains", contains as Func),
    ("hasPrefix", has_prefix as Func),
    ("hasSuffix", has_suffix as Func),
    ("hasKey", has_key as Func),
    ("hasTag", has_tag as Func),
    ("b64enc", b64enc as Func),
    ("b64dec", b64dec as Func),
    ("cidrhost", cidrhost as Func),
    ("cidrslaac", cidrslaac as Func),
];

fn fail(name: &str, reason: impl std::fmt::Display) -> FuncError {
    FuncError::Generic(format!("error calling {name}: {reason}"))
}

fn arity(name: &str, args: &[Value], want: usize) -> Result<(), FuncError> {
    if args.len() == want {
        Ok(())
    } else {
        Err(FuncError::Generic(format!(
            "wrong number of args for {name}: want {want} got {}",
            args.len()
        )))
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::NoValue => "no value",
        Value::Nil => "nil",
        Value::Bool(_) => "bool",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Array(_) => "list",
        Value::Map(_) => "map",
        Value::Object(_) => "struct",
        Value::Function(_) => "function",
    }
}

fn wrong_type(name: &str, i: usize, want: &str, got: &Value) -> FuncError {
    let got = match got {
        Value::NoValue | Value::Nil => "invalid value".to_string(),
        other => kind(other).to_string(),
    };
    FuncError::Generic(format!(
        "{name}: argument {} must be a {want}, got {got}",
        i + 1
    ))
}

fn string<'a>(name: &str, args: &'a [Value], i: usize) -> Result<&'a str, FuncError> {
    match &args[i] {
        Value::String(s) => Ok(s),
        other => Err(wrong_type(name, i, "string", other)),
    }
}

fn int(name: &str, args: &[Value], i: usize) -> Result<i64, FuncError> {
    match &args[i] {
        Value::Number(n) if n.as_i64().is_some() => Ok(n.as_i64().unwrap_or_default()),
        other => Err(wrong_type(name, i, "whole number", other)),
    }
}

fn boolean(name: &str, args: &[Value], i: usize) -> Result<bool, FuncError> {
    match &args[i] {
        Value::Bool(b) => Ok(*b),
        other => Err(wrong_type(name, i, "bool", other)),
    }
}

/// A `[]string` argument.
fn strings<'a>(name: &str, args: &'a [Value], i: usize) -> Result<Vec<&'a str>, FuncError> {
    match &args[i] {
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => Ok(s.as_str()),
                other => Err(wrong_type(name, i, "list of strings", other)),
            })
            .collect(),
        // A nil slice.
        Value::Nil | Value::NoValue => Ok(Vec::new()),
        other => Err(wrong_type(name, i, "list of strings", other)),
    }
}

fn regex(name: &str, pattern: &str) -> Result<Regex, FuncError> {
    Regex::new(pattern).map_err(|e| fail(name, e))
}

/// Go's `%v` of a value, for `quote`.
fn go_format(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::NoValue => "<no value>".to_string(),
        Value::Nil => "<nil>".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_f64() {
            Some(f) => yaml::go_float(f),
            None => n.to_string(),
        },
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(go_format).collect();
            format!("[{}]", parts.join(" "))
        }
        Value::Object(_) if gostruct::fields(v).is_some() => {
            let fields = gostruct::fields(v).unwrap_or_default();
            let parts: Vec<String> = fields.iter().map(|f| go_format(f.value)).collect();
            format!("{{{}}}", parts.join(" "))
        }
        Value::Object(map) | Value::Map(map) => {
            let mut entries: Vec<_> = gostruct::entries(map).collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let parts: Vec<String> = entries
                .iter()
                .map(|(k, v)| format!("{k}:{}", go_format(v)))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
        Value::Function(_) => "<func>".to_string(),
    }
}

/// Go's `strconv.Quote`: double quotes, Go escapes, printable characters as they are.
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() || matches!(c, '\u{ad}' | '\u{2028}' | '\u{2029}' | '\u{feff}') => {
                if (c as u32) < 0x10000 {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                } else {
                    let _ = write!(out, "\\U{:08x}", c as u32);
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `default DEFAULT VALUE`: VALUE unless it is empty (or missing), else DEFAULT.
fn default(args: &[Value]) -> Result<Value, FuncError> {
    match args {
        [] => Err(FuncError::AtLeastXArgs("default".into(), 1)),
        [d] => Ok(d.clone()),
        [d, given, ..] => Ok(if gostruct::is_zero(given) {
            d.clone()
        } else {
            given.clone()
        }),
    }
}

/// `coalesce A B …`: the first non-empty argument.
fn coalesce(args: &[Value]) -> Result<Value, FuncError> {
    Ok(args
        .iter()
        .find(|v| !gostruct::is_zero(v))
        .cloned()
        .unwrap_or(Value::Nil))
}

/// `ternary IF_TRUE IF_FALSE CONDITION`.
fn ternary(args: &[Value]) -> Result<Value, FuncError> {
    arity("ternary", args, 3)?;
    Ok(if boolean("ternary", args, 2)? {
        args[0].clone()
    } else {
        args[1].clone()
    })
}

fn to_json(args: &[Value]) -> Result<Value, FuncError> {
    arity("toJson", args, 1)?;
    Ok(Value::from(json::to_json(&args[0])))
}

fn to_pretty_json(args: &[Value]) -> Result<Value, FuncError> {
    arity("toPrettyJson", args, 1)?;
    Ok(Value::from(json::to_pretty_json(&args[0])))
}

fn to_yaml(args: &[Value]) -> Result<Value, FuncError> {
    arity("toYaml", args, 1)?;
    yaml::to_yaml(&args[0], 4)
        .map(Value::from)
        .map_err(|e| fail("toYaml", e))
}

fn to_yaml_pretty(args: &[Value]) -> Result<Value, FuncError> {
    arity("toYamlPretty", args, 1)?;
    yaml::to_yaml(&args[0], 2)
        .map(Value::from)
        .map_err(|e| fail("toYamlPretty", e))
}

fn pad(name: &str, args: &[Value]) -> Result<String, FuncError> {
    arity(name, args, 2)?;
    let spaces = int(name, args, 0)?;
    let text = string(name, args, 1)?;
    let count = usize::try_from(spaces).map_err(|_| fail(name, "negative indentation"))?;
    let pad = " ".repeat(count);
    Ok(format!("{pad}{}", text.replace('\n', &format!("\n{pad}"))))
}

/// `indent N TEXT`: every line of TEXT indented by N spaces.
fn indent(args: &[Value]) -> Result<Value, FuncError> {
    pad("indent", args).map(Value::from)
}

/// `nindent N TEXT`: a line break, then `indent N TEXT`.
fn nindent(args: &[Value]) -> Result<Value, FuncError> {
    pad("nindent", args).map(|s| Value::from(format!("\n{s}")))
}

/// `quote A B …`: each non-missing argument as a Go-quoted string, joined by spaces.
fn quote(args: &[Value]) -> Result<Value, FuncError> {
    let parts: Vec<String> = args
        .iter()
        .filter(|v| !matches!(v, Value::NoValue | Value::Nil))
        .map(|v| go_quote(&go_format(v)))
        .collect();
    Ok(Value::from(parts.join(" ")))
}

/// Go's `unicode.ToUpper`/`ToLower` rune by rune: a rune whose case mapping is several
/// characters (`ß`) stays as it is.
fn map_case(s: &str, upper: bool) -> String {
    s.chars()
        .map(|c| {
            let mut mapped: Vec<char> = if upper {
                c.to_uppercase().collect()
            } else {
                c.to_lowercase().collect()
            };
            if mapped.len() == 1 {
                mapped.remove(0)
            } else {
                c
            }
        })
        .collect()
}

fn upper(args: &[Value]) -> Result<Value, FuncError> {
    arity("upper", args, 1)?;
    Ok(Value::from(map_case(string("upper", args, 0)?, true)))
}

fn lower(args: &[Value]) -> Result<Value, FuncError> {
    arity("lower", args, 1)?;
    Ok(Value::from(map_case(string("lower", args, 0)?, false)))
}

fn trim(args: &[Value]) -> Result<Value, FuncError> {
    arity("trim", args, 1)?;
    Ok(Value::from(string("trim", args, 0)?.trim()))
}

/// `trimSuffix SUFFIX TEXT`.
fn trim_suffix(args: &[Value]) -> Result<Value, FuncError> {
    arity("trimSuffix", args, 2)?;
    let suffix = string("trimSuffix", args, 0)?;
    let text = string("trimSuffix", args, 1)?;
    Ok(Value::from(text.strip_suffix(suffix).unwrap_or(text)))
}

/// `trimPrefix PREFIX TEXT`.
fn trim_prefix(args: &[Value]) -> Result<Value, FuncError> {
    arity("trimPrefix", args, 2)?;
    let prefix = string("trimPrefix", args, 0)?;
    let text = string("trimPrefix", args, 1)?;
    Ok(Value::from(text.strip_prefix(prefix).unwrap_or(text)))
}

/// `split TEXT SEPARATOR` (Go's `strings.Split`: an empty separator splits into characters).
fn split(args: &[Value]) -> Result<Value, FuncError> {
    arity("split", args, 2)?;
    let text = string("split", args, 0)?;
    let sep = string("split", args, 1)?;
    let parts: Vec<Value> = if sep.is_empty() {
        text.chars().map(|c| Value::from(c.to_string())).collect()
    } else {
        text.split(sep).map(Value::from).collect()
    };
    Ok(Value::Array(parts))
}

/// `join LIST SEPARATOR`.
fn join(args: &[Value]) -> Result<Value, FuncError> {
    arity("join", args, 2)?;
    let items = strings("join", args, 0)?;
    let sep = string("join", args, 1)?;
    Ok(Value::from(items.join(sep)))
}

/// `replace OLD NEW TEXT`: every OLD in TEXT replaced.
fn replace(args: &[Value]) -> Result<Value, FuncError> {
    arity("replace", args, 3)?;
    let old = string("replace", args, 0)?;
    let new = string("replace", args, 1)?;
    let text = string("replace", args, 2)?;
    Ok(Value::from(text.replace(old, new)))
}

/// `regexFind REGEX TEXT`: the leftmost match, or "".
fn regex_find(args: &[Value]) -> Result<Value, FuncError> {
    arity("regexFind", args, 2)?;
    let re = regex("regexFind", string("regexFind", args, 0)?)?;
    let text = string("regexFind", args, 1)?;
    Ok(Value::from(re.find(text).map_or("", |m| m.as_str())))
}

/// `regexFindString REGEX TEXT N`: group N of the leftmost match (0 is the whole match), or "".
fn regex_find_string(args: &[Value]) -> Result<Value, FuncError> {
    arity("regexFindString", args, 3)?;
    let re = regex("regexFindString", string("regexFindString", args, 0)?)?;
    let text = string("regexFindString", args, 1)?;
    let n = int("regexFindString", args, 2)?;
    let n = usize::try_from(n).map_err(|_| fail("regexFindString", "negative group index"))?;
    let found = re
        .captures(text)
        .and_then(|c| c.get(n))
        .map_or("", |m| m.as_str());
    Ok(Value::from(found))
}

/// `regexReplaceAll REGEX TEXT REPLACEMENT` (`$1`, `${name}` expand to groups).
fn regex_replace_all(args: &[Value]) -> Result<Value, FuncError> {
    arity("regexReplaceAll", args, 3)?;
    let re = regex("regexReplaceAll", string("regexReplaceAll", args, 0)?)?;
    let text = string("regexReplaceAll", args, 1)?;
    let replacement = string("regexReplaceAll", args, 2)?;
    Ok(Value::from(re.replace_all(text, replacement).into_owned()))
}

/// `get MAP KEY`: the value, or "" when the key is missing.
fn get(args: &[Value]) -> Result<Value, FuncError> {
    arity("get", args, 2)?;
    let key = string("get", args, 1)?;
    match &args[0] {
        Value::Map(m) | Value::Object(m) => Ok(match m.get(key) {
            Some(v @ Value::String(_)) => v.clone(),
            Some(other) => Value::from(go_format(other)),
            None => Value::from(""),
        }),
        Value::Nil | Value::NoValue => Ok(Value::from("")),
        other => Err(wrong_type("get", 0, "map", other)),
    }
}

/// `getValue "k1=v1;k2=v2" KEY`: the value of KEY in a `;`-separated list of `k=v`, or "".
fn get_value(args: &[Value]) -> Result<Value, FuncError> {
    arity("getValue", args, 2)?;
    let source = string("getValue", args, 0)?;
    let key = string("getValue", args, 1)?;
    for part in source.split(';') {
        let mut kv = part.split('=');
        if kv.next() == Some(key) {
            // Upstream indexes the value unchecked: `k` without `=` is an error there too.
            return kv
                .next()
                .map(Value::from)
                .ok_or_else(|| fail("getValue", format!("{part:?} has no value")));
        }
    }
    Ok(Value::from(""))
}

fn empty(args: &[Value]) -> Result<Value, FuncError> {
    arity("empty", args, 1)?;
    Ok(Value::from(gostruct::is_zero(&args[0])))
}

/// `contains SUBSTRING TEXT`.
fn contains(args: &[Value]) -> Result<Value, FuncError> {
    arity("contains", args, 2)?;
    let needle = string("contains", args, 0)?;
    Ok(Value::from(string("contains", args, 1)?.contains(needle)))
}

/// `hasPrefix PREFIX TEXT`.
fn has_prefix(args: &[Value]) -> Result<Value, FuncError> {
    arity("hasPrefix", args, 2)?;
    let prefix = string("hasPrefix", args, 0)?;
    Ok(Value::from(
        string("hasPrefix", args, 1)?.starts_with(prefix),
    ))
}

/// `hasSuffix SUFFIX TEXT`.
fn has_suffix(args: &[Value]) -> Result<Value, FuncError> {
    arity("hasSuffix", args, 2)?;
    let suffix = string("hasSuffix", args, 0)?;
    Ok(Value::from(string("hasSuffix", args, 1)?.ends_with(suffix)))
}

/// `hasKey MAP KEY`.
fn has_key(args: &[Value]) -> Result<Value, FuncError> {
    arity("hasKey", args, 2)?;
    let key = string("hasKey", args, 1)?;
    Ok(Value::from(match &args[0] {
        Value::Map(m) | Value::Object(m) => key != gostruct::LAYOUT_KEY && m.contains_key(key),
        _ => false,
    }))
}

/// `hasTag TAGS TAG`: whether the list holds TAG (an empty TAG is never held).
fn has_tag(args: &[Value]) -> Result<Value, FuncError> {
    arity("hasTag", args, 2)?;
    let tags = strings("hasTag", args, 0)?;
    let tag = string("hasTag", args, 1)?;
    Ok(Value::from(!tag.is_empty() && tags.contains(&tag)))
}

fn b64enc(args: &[Value]) -> Result<Value, FuncError> {
    arity("b64enc", args, 1)?;
    Ok(Value::from(b64::encode(
        string("b64enc", args, 0)?.as_bytes(),
    )))
}

fn b64dec(args: &[Value]) -> Result<Value, FuncError> {
    arity("b64dec", args, 1)?;
    let bytes = b64::decode(string("b64dec", args, 0)?).map_err(|e| fail("b64dec", e))?;
    Ok(Value::from(String::from_utf8_lossy(&bytes).into_owned()))
}

/// `cidrhost CIDR [N]`.
fn cidrhost(args: &[Value]) -> Result<Value, FuncError> {
    let host = match args.len() {
        1 => None,
        2 => Some(int("cidrhost", args, 1)?),
        _ => {
            return Err(FuncError::Generic(format!(
                "wrong number of args for cidrhost: want 1 or 2 got {}",
                args.len()
            )));
        }
    };
    net::cidr_host(string("cidrhost", args, 0)?, host)
        .map(Value::from)
        .map_err(|e| fail("cidrhost", e))
}

/// `cidrslaac MAC CIDR` (so `PREFIX | cidrslaac MAC`).
fn cidrslaac(args: &[Value]) -> Result<Value, FuncError> {
    arity("cidrslaac", args, 2)?;
    net::slaac(string("cidrslaac", args, 0)?, string("cidrslaac", args, 1)?)
        .map(Value::from)
        .map_err(|e| fail("cidrslaac", e))
}
