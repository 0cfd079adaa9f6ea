//! `toJson` and `toPrettyJson`: JSON as Go's `encoding/json` writes it (upstream's value
//! structs carry no JSON tags, so their keys are the Go field names; map keys sorted; `<`, `>`
//! and `&` escaped for HTML). Like upstream, a value Go cannot encode (a function, a NaN)
//! yields the empty string.

use std::fmt::Write;

use gtmpl::Value;

use super::gostruct;

/// `json.Marshal(value)`, or `""` when Go would fail.
pub fn to_json(value: &Value) -> String {
    let mut out = String::new();
    match write(&mut out, value, None, 0) {
        Ok(()) => out,
        Err(()) => String::new(),
    }
}

/// `json.MarshalIndent(value, "", "  ")`, or `""` when Go would fail.
pub fn to_pretty_json(value: &Value) -> String {
    let mut out = String::new();
    match write(&mut out, value, Some("  "), 0) {
        Ok(()) => out,
        Err(()) => String::new(),
    }
}

fn newline(out: &mut String, indent: Option<&str>, depth: usize) {
    if let Some(unit) = indent {
        out.push('\n');
        for _ in 0..depth {
            out.push_str(unit);
        }
    }
}

fn write(out: &mut String, value: &Value, indent: Option<&str>, depth: usize) -> Result<(), ()> {
    match value {
        Value::NoValue | Value::Nil => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match n.as_f64() {
            None => out.push_str(&n.to_string()),
            Some(f) => out.push_str(&float(f)?),
        },
        Value::String(s) => string(out, s),
        Value::Array(items) => {
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, indent, depth + 1);
                write(out, item, indent, depth + 1)?;
            }
            newline(out, indent, depth);
            out.push(']');
        }
        Value::Object(_) if gostruct::fields(value).is_some() => {
            let fields = gostruct::fields(value).unwrap_or_default();
            let entries: Vec<(&str, &Value, bool)> = fields
                .iter()
                .map(|f| (f.go, f.value, f.json_null()))
                .collect();
            object(out, &entries, indent, depth)?;
        }
        Value::Object(map) | Value::Map(map) => {
            let mut entries: Vec<(&str, &Value, bool)> = gostruct::entries(map)
                .map(|(k, v)| (k.as_str(), v, false))
                .collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            object(out, &entries, indent, depth)?;
        }
        Value::Function(_) => return Err(()),
    }
    Ok(())
}

fn object(
    out: &mut String,
    entries: &[(&str, &Value, bool)],
    indent: Option<&str>,
    depth: usize,
) -> Result<(), ()> {
    if entries.is_empty() {
        out.push_str("{}");
        return Ok(());
    }
    out.push('{');
    for (i, (key, value, null)) in entries.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        newline(out, indent, depth + 1);
        string(out, key);
        out.push(':');
        if indent.is_some() {
            out.push(' ');
        }
        if *null {
            out.push_str("null");
        } else {
            write(out, value, indent, depth + 1)?;
        }
    }
    newline(out, indent, depth);
    out.push('}');
    Ok(())
}

fn string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Go's float encoding: shortest digits, exponent form below 1e-6 and from 1e21.
fn float(f: f64) -> Result<String, ()> {
    if !f.is_finite() {
        return Err(());
    }
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let sci = format!("{f:e}");
        let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
        let exponent: i32 = exponent.parse().unwrap_or(0);
        // Go pads the exponent to two digits and strips the pad of a negative one again;
        // outside [1e-6, 1e21) that leaves exactly the digits.
        let sign = if exponent < 0 { '-' } else { '+' };
        Ok(format!("{mantissa}e{sign}{}", exponent.abs()))
    } else {
        Ok(format!("{f}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloudinit::template::GoStruct;

    #[test]
    fn structs_use_go_field_names_in_order_and_nil_collections_are_null() {
        let taint = GoStruct::new()
            .omitempty("Key", "key", "k")
            .omitempty("Value", "value", "")
            .build();
        let value = GoStruct::new()
            .field("Hostname", "<node & co>")
            .collection("Tags", Value::Array(vec![]))
            .pointer("MaxPods", "maxPods", None)
            .omitempty_collection("Taints", "registerWithTaints", Value::Array(vec![taint]))
            .build();
        assert_eq!(
            to_json(&value),
            r#"{"Hostname":"\u003cnode \u0026 co\u003e","Tags":null,"MaxPods":null,"Taints":[{"Key":"k","Value":""}]}"#
        );
        assert_eq!(
            to_pretty_json(&value),
            "{\n  \"Hostname\": \"\\u003cnode \\u0026 co\\u003e\",\n  \"Tags\": null,\n  \"MaxPods\": null,\n  \"Taints\": [\n    {\n      \"Key\": \"k\",\n      \"Value\": \"\"\n    }\n  ]\n}"
        );
    }

    #[test]
    fn maps_sort_their_keys_and_scalars_encode_as_go() {
        let map = Value::Map(
            [
                ("b".to_string(), Value::from(1u8)),
                ("a".to_string(), Value::Array(vec![])),
                ("c".to_string(), Value::Map(Default::default())),
            ]
            .into_iter()
            .collect(),
        );
        assert_eq!(to_json(&map), r#"{"a":[],"b":1,"c":{}}"#);
        assert_eq!(
            to_json(&Value::from("tab\tquote\"\u{1}")),
            r#""tab\tquote\"\u0001""#
        );
        assert_eq!(to_json(&Value::from(-2i64)), "-2");
        assert_eq!(to_json(&Value::from(0.5f64)), "0.5");
        assert_eq!(to_json(&Value::from(1e-7f64)), "1e-7");
        assert_eq!(float(1.5e21), Ok("1.5e+21".to_string()));
        assert_eq!(to_json(&Value::NoValue), "null");
        assert_eq!(to_json(&Value::from(f64::NAN)), "");
    }
}
