//! `toYaml` and `toYamlPretty`: YAML as upstream's encoder (go-yaml v3, through
//! `sigs.k8s.io/yaml/goyaml.v3`) writes it, so rendered documents match upstream's byte for
//! byte: block style, sequences indented under their key, `[]`/`{}` for empty collections,
//! map keys in go-yaml's natural order, strings quoted only when a plain scalar would read
//! back as something else (`"100"`, `"true"`, `""`, `"yes"`), multi-line strings as literal
//! blocks, no line folding.
//!
//! The layout follows go-yaml's emitter: a nested block is indented to the next multiple of
//! the indent, except right after a `- ` where it starts two columns in.

use std::cmp::Ordering;
use std::collections::HashMap;

use gtmpl::Value;

use super::gostruct;

/// The YAML for `value` with `indent` spaces per level (`toYaml` uses 4, `toYamlPretty` 2),
/// without the final line break. Functions have no YAML form.
pub fn to_yaml(value: &Value, indent: usize) -> Result<String, String> {
    let mut e = Emitter {
        out: String::new(),
        best: indent.clamp(2, 9) as i32,
        indent: -1,
        indents: Vec::new(),
        column: 0,
        whitespace: true,
        indention: true,
    };
    e.node(value, Ctx::Root)?;
    // The document end: go-yaml finishes the line.
    e.write_indent();
    let mut out = e.out;
    if out.ends_with('\n') {
        out.pop();
    }
    Ok(out)
}

/// What holds the node being written (go-yaml's state below it).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    Root,
    SeqItem,
    MapKey,
    MapValue,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Style {
    Plain,
    Single,
    Double,
    Literal,
}

struct Emitter {
    out: String,
    best: i32,
    indent: i32,
    indents: Vec<i32>,
    column: i32,
    /// The last thing written was whitespace (no separating space needed).
    whitespace: bool,
    /// Only indentation has been written on this line so far.
    indention: bool,
}

impl Emitter {
    fn node(&mut self, value: &Value, ctx: Ctx) -> Result<(), String> {
        match value {
            Value::NoValue | Value::Nil => self.scalar("null", Style::Plain, ctx),
            Value::Bool(b) => self.scalar(if *b { "true" } else { "false" }, Style::Plain, ctx),
            Value::Number(n) => self.scalar(&number(n), Style::Plain, ctx),
            Value::String(s) => self.string(s, ctx),
            Value::Array(items) => self.sequence(items, ctx),
            Value::Object(_) if gostruct::fields(value).is_some() => {
                let fields = gostruct::fields(value).unwrap_or_default();
                let entries: Vec<(Value, &Value)> = fields
                    .iter()
                    .filter(|f| !f.omitted_from_yaml())
                    .map(|f| (Value::from(f.yaml), f.value))
                    .collect();
                self.mapping(&entries, ctx)
            }
            Value::Object(map) | Value::Map(map) => {
                let entries = sorted_entries(map);
                self.mapping(&entries, ctx)
            }
            Value::Function(_) => Err("cannot marshal a function to YAML".to_string()),
        }
    }

    fn increase_indent(&mut self, flow: bool, ctx: Ctx) {
        self.indents.push(self.indent);
        if self.indent < 0 {
            self.indent = if flow { self.best } else { 0 };
        } else if ctx == Ctx::SeqItem {
            self.indent += 2;
        } else {
            self.indent = self.best * ((self.indent + self.best) / self.best);
        }
    }

    fn decrease_indent(&mut self) {
        self.indent = self.indents.pop().unwrap_or(-1);
    }

    fn put(&mut self, c: char) {
        self.out.push(c);
        self.column += 1;
    }

    fn put_break(&mut self) {
        self.out.push('\n');
        self.column = 0;
        self.indention = true;
    }

    fn write_indent(&mut self) {
        let indent = self.indent.max(0);
        if !self.indention || self.column > indent || (self.column == indent && !self.whitespace) {
            self.put_break();
        }
        while self.column < indent {
            self.put(' ');
        }
        self.whitespace = true;
    }

    fn write_indicator(
        &mut self,
        indicator: &str,
        need_whitespace: bool,
        is_whitespace: bool,
        is_indention: bool,
    ) {
        if need_whitespace && !self.whitespace {
            self.put(' ');
        }
        for c in indicator.chars() {
            self.put(c);
        }
        self.whitespace = is_whitespace;
        self.indention = self.indention && is_indention;
    }

    fn sequence(&mut self, items: &[Value], ctx: Ctx) -> Result<(), String> {
        if items.is_empty() {
            self.write_indicator("[", true, true, false);
            self.write_indicator("]", false, false, false);
            return Ok(());
        }
        self.increase_indent(false, ctx);
        for item in items {
            self.write_indent();
            self.write_indicator("-", true, false, true);
            self.node(item, Ctx::SeqItem)?;
        }
        self.decrease_indent();
        Ok(())
    }

    fn mapping(&mut self, entries: &[(Value, &Value)], ctx: Ctx) -> Result<(), String> {
        if entries.is_empty() {
            self.write_indicator("{", true, true, false);
            self.write_indicator("}", false, false, false);
            return Ok(());
        }
        self.increase_indent(false, ctx);
        for (key, value) in entries {
            self.write_indent();
            self.node(key, Ctx::MapKey)?;
            self.write_indicator(":", false, false, false);
            self.node(value, Ctx::MapValue)?;
        }
        self.decrease_indent();
        Ok(())
    }

    /// A string as go-yaml's encoder asks for it: literal when multi-line, plain when it reads
    /// back as a string, double-quoted otherwise; the emitter then overrides what the
    /// characters do not allow.
    fn string(&mut self, s: &str, ctx: Ctx) -> Result<(), String> {
        let style = if s.contains('\n') {
            Style::Literal
        } else if reads_back_as_string(s) {
            Style::Plain
        } else {
            Style::Double
        };
        self.scalar(s, style, ctx)
    }

    fn scalar(&mut self, s: &str, requested: Style, ctx: Ctx) -> Result<(), String> {
        let a = Analysis::of(s);
        let simple_key = ctx == Ctx::MapKey;
        let mut style = requested;
        if simple_key && a.multiline {
            style = Style::Double;
        }
        if style == Style::Plain && (!a.block_plain_allowed || (s.is_empty() && simple_key)) {
            style = Style::Single;
        }
        if style == Style::Single && !a.single_quoted_allowed {
            style = Style::Double;
        }
        if style == Style::Literal && (!a.block_allowed || simple_key) {
            style = Style::Double;
        }
        self.increase_indent(true, ctx);
        match style {
            Style::Plain => self.write_plain(s),
            Style::Single => self.write_single(s),
            Style::Double => self.write_double(s),
            Style::Literal => self.write_literal(s),
        }
        self.decrease_indent();
        Ok(())
    }

    fn write_plain(&mut self, s: &str) {
        if !s.is_empty() && !self.whitespace {
            self.put(' ');
        }
        for c in s.chars() {
            self.put(c);
        }
        if !s.is_empty() {
            self.whitespace = false;
        }
        self.indention = false;
    }

    fn write_single(&mut self, s: &str) {
        self.write_indicator("'", true, false, false);
        let mut breaks = false;
        for c in s.chars() {
            if is_break(c) {
                if !breaks && c == '\n' {
                    self.put_break();
                }
                self.write_break(c);
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                if c == '\'' {
                    self.put('\'');
                }
                self.put(c);
                self.indention = false;
                breaks = false;
            }
        }
        self.write_indicator("'", false, false, false);
        self.whitespace = false;
        self.indention = false;
    }

    fn write_double(&mut self, s: &str) {
        self.write_indicator("\"", true, false, false);
        // go-yaml tests for a byte order mark at the start of the value, not at each
        // character: a value that starts with one is escaped throughout.
        let bom = s.starts_with('\u{feff}');
        for c in s.chars() {
            if !is_printable(c) || bom || is_break(c) || c == '"' || c == '\\' {
                self.put('\\');
                match c {
                    '\0' => self.put('0'),
                    '\u{7}' => self.put('a'),
                    '\u{8}' => self.put('b'),
                    '\t' => self.put('t'),
                    '\n' => self.put('n'),
                    '\u{b}' => self.put('v'),
                    '\u{c}' => self.put('f'),
                    '\r' => self.put('r'),
                    '\u{1b}' => self.put('e'),
                    '"' => self.put('"'),
                    '\\' => self.put('\\'),
                    '\u{85}' => self.put('N'),
                    '\u{a0}' => self.put('_'),
                    '\u{2028}' => self.put('L'),
                    '\u{2029}' => self.put('P'),
                    _ => {
                        let v = c as u32;
                        let (letter, width) = if v <= 0xff {
                            ('x', 2)
                        } else if v <= 0xffff {
                            ('u', 4)
                        } else {
                            ('U', 8)
                        };
                        self.put(letter);
                        for digit in format!("{v:0width$X}").chars() {
                            self.put(digit);
                        }
                    }
                }
            } else {
                self.put(c);
            }
        }
        self.write_indicator("\"", false, false, false);
        self.whitespace = false;
        self.indention = false;
    }

    fn write_literal(&mut self, s: &str) {
        self.write_indicator("|", true, false, false);
        if s.starts_with(' ') || s.starts_with(is_break) {
            let hint = char::from(b'0' + self.best as u8);
            self.write_indicator(&hint.to_string(), false, false, false);
        }
        let chomp = match s.chars().next_back() {
            None => Some('-'),
            Some(last) if !is_break(last) => Some('-'),
            Some(_) => {
                let mut rest = s.chars().rev().skip(1);
                match rest.next() {
                    None => Some('+'),
                    Some(c) if is_break(c) => Some('+'),
                    Some(_) => None,
                }
            }
        };
        if let Some(chomp) = chomp {
            self.write_indicator(&chomp.to_string(), false, false, false);
        }
        self.whitespace = true;
        let mut breaks = true;
        for c in s.chars() {
            if is_break(c) {
                self.write_break(c);
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                self.put(c);
                self.indention = false;
                breaks = false;
            }
        }
    }

    fn write_break(&mut self, c: char) {
        if c == '\n' {
            self.put_break();
        } else {
            self.out.push(c);
            self.column = 0;
            self.indention = true;
        }
    }
}

/// What a scalar's characters allow (go-yaml's `yaml_emitter_analyze_scalar`, block context).
struct Analysis {
    multiline: bool,
    block_plain_allowed: bool,
    single_quoted_allowed: bool,
    block_allowed: bool,
}

impl Analysis {
    fn of(s: &str) -> Self {
        if s.is_empty() {
            return Self {
                multiline: false,
                block_plain_allowed: true,
                single_quoted_allowed: true,
                block_allowed: false,
            };
        }
        let chars: Vec<char> = s.chars().collect();
        let mut block_indicators = s.starts_with("---") || s.starts_with("...");
        let (mut line_breaks, mut special, mut tabs) = (false, false, false);
        let (mut leading_space, mut leading_break) = (false, false);
        let (mut trailing_space, mut trailing_break) = (false, false);
        let (mut break_space, mut space_break) = (false, false);
        let (mut previous_space, mut previous_break) = (false, false);
        let mut preceded_by_whitespace = true;
        for (i, &c) in chars.iter().enumerate() {
            let last = i + 1 == chars.len();
            let followed_by_whitespace = last || matches!(chars[i + 1], ' ' | '\t');
            if i == 0 {
                match c {
                    '#' | ',' | '[' | ']' | '{' | '}' | '&' | '*' | '!' | '|' | '>' | '\''
                    | '"' | '%' | '@' | '`' => block_indicators = true,
                    '?' | ':' | '-' if followed_by_whitespace => block_indicators = true,
                    _ => {}
                }
            } else {
                match c {
                    ':' if followed_by_whitespace => block_indicators = true,
                    '#' if preceded_by_whitespace => block_indicators = true,
                    _ => {}
                }
            }
            if c == '\t' {
                tabs = true;
            } else if !is_printable(c) {
                special = true;
            }
            if c == ' ' {
                leading_space |= i == 0;
                trailing_space |= last;
                break_space |= previous_break;
                previous_space = true;
                previous_break = false;
            } else if is_break(c) {
                line_breaks = true;
                leading_break |= i == 0;
                trailing_break |= last;
                space_break |= previous_space;
                previous_space = false;
                previous_break = true;
            } else {
                previous_space = false;
                previous_break = false;
            }
            preceded_by_whitespace = matches!(c, ' ' | '\t' | '\0') || is_break(c);
        }
        let mut a = Self {
            multiline: line_breaks,
            block_plain_allowed: true,
            single_quoted_allowed: true,
            block_allowed: true,
        };
        if leading_space || leading_break || trailing_space || trailing_break {
            a.block_plain_allowed = false;
        }
        if trailing_space {
            a.block_allowed = false;
        }
        if break_space {
            a.block_plain_allowed = false;
            a.single_quoted_allowed = false;
        }
        if space_break || tabs || special {
            a.block_plain_allowed = false;
            a.single_quoted_allowed = false;
        }
        if space_break || special {
            a.block_allowed = false;
        }
        if line_breaks || block_indicators {
            a.block_plain_allowed = false;
        }
        a
    }
}

fn is_break(c: char) -> bool {
    matches!(c, '\r' | '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// Characters YAML lets a scalar carry unescaped (go-yaml's `is_printable`; it leaves out
/// everything beyond the Basic Multilingual Plane).
fn is_printable(c: char) -> bool {
    matches!(c, '\n' | ' '..='~' | '\u{a0}'..='\u{d7ff}')
        || (('\u{e000}'..='\u{fffd}').contains(&c) && c != '\u{feff}')
}

/// Whether a plain scalar `s` would read back as a string (go-yaml's `resolve` plus its
/// YAML 1.1 caution about `yes`/`no`/`on`/`off` and base-60 numbers).
fn reads_back_as_string(s: &str) -> bool {
    match s {
        "" | "~" | "null" | "Null" | "NULL" | "true" | "True" | "TRUE" | "false" | "False"
        | "FALSE" | ".nan" | ".NaN" | ".NAN" | ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf"
        | "+.INF" | "-.inf" | "-.Inf" | "-.INF" => return false,
        "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "n" | "N" | "no" | "No" | "NO"
        | "off" | "Off" | "OFF" => return false,
        _ => {}
    }
    let first = s.as_bytes()[0];
    match first {
        b'.' => !is_dot_float(s),
        b'0'..=b'9' | b'+' | b'-' => {
            if is_timestamp(s) || is_base60_float(s) {
                return false;
            }
            let plain: String = s.chars().filter(|&c| c != '_').collect();
            !(is_go_int(&plain) || is_yaml_float(&plain) || is_prefixed_int(&plain))
        }
        _ => true,
    }
}

/// `strconv.ParseInt(s, 0, 64)` or `ParseUint` accepting `s` (sign, then `0x`/`0o`/`0b`/`0`
/// prefixed or decimal digits; range is not checked: anything longer reads back as a float).
fn is_go_int(s: &str) -> bool {
    let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (digits, radix) = if let Some(d) = unsigned
        .strip_prefix("0x")
        .or_else(|| unsigned.strip_prefix("0X"))
    {
        (d, 16)
    } else if let Some(d) = unsigned
        .strip_prefix("0o")
        .or_else(|| unsigned.strip_prefix("0O"))
    {
        (d, 8)
    } else if let Some(d) = unsigned
        .strip_prefix("0b")
        .or_else(|| unsigned.strip_prefix("0B"))
    {
        (d, 2)
    } else if unsigned.len() > 1 && unsigned.starts_with('0') {
        (&unsigned[1..], 8)
    } else {
        (unsigned, 10)
    };
    !digits.is_empty() && digits.chars().all(|c| c.is_digit(radix))
}

/// go-yaml's own `0b…`/`0o…` readings (after Go's parser declined).
fn is_prefixed_int(s: &str) -> bool {
    for (prefix, radix) in [("0b", 2), ("-0b", 2), ("0o", 8), ("-0o", 8)] {
        if let Some(d) = s.strip_prefix(prefix) {
            return !d.is_empty() && d.chars().all(|c| c.is_digit(radix));
        }
    }
    false
}

/// `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`
fn is_yaml_float(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let mantissa_ok = match mantissa.split_once('.') {
        Some(("", frac)) => !frac.is_empty() && frac.bytes().all(|b| b.is_ascii_digit()),
        Some((int, frac)) => {
            !int.is_empty()
                && int.bytes().all(|b| b.is_ascii_digit())
                && frac.bytes().all(|b| b.is_ascii_digit())
        }
        None => !mantissa.is_empty() && mantissa.bytes().all(|b| b.is_ascii_digit()),
    };
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit())
    });
    mantissa_ok && exponent_ok
}

/// `strconv.ParseFloat` on a value starting with a dot (`.5`, `.5e3`).
fn is_dot_float(s: &str) -> bool {
    is_yaml_float(s)
}

/// `^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$`
fn is_base60_float(s: &str) -> bool {
    if !s.contains(':') {
        return false;
    }
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (body, frac) = match s.split_once('.') {
        Some((b, f)) => (b, Some(f)),
        None => (s, None),
    };
    if frac.is_some_and(|f| !f.bytes().all(|b| b.is_ascii_digit() || b == b'_')) {
        return false;
    }
    let mut parts = body.split(':');
    let head = parts.next().unwrap_or("");
    if !head.starts_with(|c: char| c.is_ascii_digit())
        || !head.bytes().all(|b| b.is_ascii_digit() || b == b'_')
    {
        return false;
    }
    let mut any = false;
    for part in parts {
        any = true;
        let ok = match part.as_bytes() {
            [d] => d.is_ascii_digit(),
            [a, b] => (b'0'..=b'5').contains(a) && b.is_ascii_digit(),
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    any
}

/// The timestamps go-yaml reads from a plain scalar: `YYYY-M-D`, optionally followed by
/// `T`/`t` and a time with a zone (`Z` or `±hh:mm`), or a space and a time without one.
fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 5 || !b[..4].iter().all(u8::is_ascii_digit) || b[4] != b'-' {
        return false;
    }
    let rest = &s[5..];
    let (date, time) = match rest.find(['T', 't', ' ']) {
        Some(i) => (&rest[..i], Some((&rest[i..i + 1], &rest[i + 1..]))),
        None => (rest, None),
    };
    let Some((month, day)) = date.split_once('-') else {
        return false;
    };
    let (Some(month), Some(day)) = (small_number(month, 2), small_number(day, 2)) else {
        return false;
    };
    let year: u32 = s[..4].parse().unwrap_or(0);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return false;
    }
    let Some((separator, time)) = time else {
        return true;
    };
    let (clock, zone) = if separator == " " {
        (time, None)
    } else if let Some(clock) = time.strip_suffix('Z') {
        (clock, Some(""))
    } else {
        match time.rfind(['+', '-']) {
            Some(i) => (&time[..i], Some(&time[i..])),
            None => return false,
        }
    };
    if let Some(zone) = zone
        && !zone.is_empty()
    {
        let z = &zone.as_bytes()[1..];
        if z.len() != 5 || z[2] != b':' || !z[..2].iter().chain(&z[3..]).all(u8::is_ascii_digit) {
            return false;
        }
    }
    let (hms, frac) = match clock.split_once('.') {
        Some((hms, frac)) => (hms, Some(frac)),
        None => (clock, None),
    };
    if frac.is_some_and(|f| f.is_empty() || f.len() > 9 || !f.bytes().all(|b| b.is_ascii_digit())) {
        return false;
    }
    let parts: Vec<&str> = hms.split(':').collect();
    let [h, m, sec] = parts.as_slice() else {
        return false;
    };
    matches!(
        (small_number(h, 2), small_number(m, 2), small_number(sec, 2)),
        (Some(h), Some(m), Some(sec)) if h < 24 && m < 60 && sec < 60
    )
}

fn small_number(s: &str, max_digits: usize) -> Option<u32> {
    if s.is_empty() || s.len() > max_digits || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// A number as Go formats it (`strconv.FormatFloat(f, 'g', -1, 64)` for floats).
pub(super) fn number(n: &gtmpl_value::Number) -> String {
    match n.as_f64() {
        None => n.to_string(),
        Some(f) => go_float(f),
    }
}

/// Go's shortest `%g` float (`strconv.FormatFloat(f, 'g', -1, 64)`): exponent form when the
/// exponent is below -4 or at least 21, with a sign and two digits at least (`1e+21`, `1e-05`).
pub(super) fn go_float(f: f64) -> String {
    if f.is_nan() {
        return ".nan".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 { ".inf" } else { "-.inf" }.to_string();
    }
    let sci = format!("{f:e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if !(-4..21).contains(&exponent) {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.abs())
    } else {
        format!("{f}")
    }
}

/// A Go map's entries in go-yaml's key order.
fn sorted_entries(map: &HashMap<String, Value>) -> Vec<(Value, &Value)> {
    let mut entries: Vec<(&String, &Value)> = gostruct::entries(map).collect();
    entries.sort_by(|a, b| natural_cmp(a.0, b.0));
    entries
        .into_iter()
        .map(|(k, v)| (Value::from(k.as_str()), v))
        .collect()
}

/// go-yaml's order of string keys: letters before other characters unless following a digit,
/// runs of digits compared by value (`a2` before `a10`).
pub(super) fn natural_cmp(a: &str, b: &str) -> Ordering {
    if less(a, b) {
        Ordering::Less
    } else if less(b, a) {
        Ordering::Greater
    } else {
        Ordering::Equal
    }
}

fn less(a: &str, b: &str) -> bool {
    let ar: Vec<char> = a.chars().collect();
    let br: Vec<char> = b.chars().collect();
    let mut digits = false;
    let mut i = 0;
    while i < ar.len() && i < br.len() {
        if ar[i] == br[i] {
            digits = ar[i].is_numeric();
            i += 1;
            continue;
        }
        let al = ar[i].is_alphabetic();
        let bl = br[i].is_alphabetic();
        if al && bl {
            return ar[i] < br[i];
        }
        if al || bl {
            return if digits { al } else { bl };
        }
        let (mut an, mut bn) = (0i64, 0i64);
        if ar[i] == '0' || br[i] == '0' {
            let mut j = i;
            while j > 0 && ar[j - 1].is_numeric() {
                j -= 1;
                if ar[j] != '0' {
                    an = 1;
                    bn = 1;
                    break;
                }
            }
        }
        let mut ai = i;
        while ai < ar.len() && ar[ai].is_ascii_digit() {
            an = an
                .wrapping_mul(10)
                .wrapping_add(i64::from(ar[ai] as u8 - b'0'));
            ai += 1;
        }
        let mut bi = i;
        while bi < br.len() && br[bi].is_ascii_digit() {
            bn = bn
                .wrapping_mul(10)
                .wrapping_add(i64::from(br[bi] as u8 - b'0'));
            bi += 1;
        }
        if an != bn {
            return an < bn;
        }
        if ai != bi {
            return ai < bi;
        }
        return ar[i] < br[i];
    }
    ar.len() < br.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Value {
        Value::from(v)
    }

    #[test]
    fn scalars_are_quoted_only_when_plain_would_read_back_differently() {
        for (input, want) in [
            ("hostname-1", "hostname-1"),
            ("100", "\"100\""),
            ("", "\"\""),
            ("true", "\"true\""),
            ("yes", "\"yes\""),
            ("Off", "\"Off\""),
            ("1.5", "\"1.5\""),
            ("1e3", "\"1e3\""),
            (".5", "\".5\""),
            ("0x1F", "\"0x1F\""),
            ("0o17", "\"0o17\""),
            ("0b101", "\"0b101\""),
            ("1_000", "\"1_000\""),
            ("12:30", "\"12:30\""),
            ("2024-01-02", "\"2024-01-02\""),
            ("2024-01-02T03:04:05Z", "\"2024-01-02T03:04:05Z\""),
            ("2024-13-02", "2024-13-02"),
            ("~", "\"~\""),
            ("null", "\"null\""),
            ("v1.33.4", "v1.33.4"),
            ("1.2.3.4/24", "1.2.3.4/24"),
            ("-", "'-'"),
            ("- x", "'- x'"),
            ("<<", "<<"),
            ("a: b", "'a: b'"),
            ("proxmox://region/100", "proxmox://region/100"),
            (
                "ssh-rsa AAAA...,ssh-rsa BBBB...",
                "ssh-rsa AAAA...,ssh-rsa BBBB...",
            ),
            ("#comment", "'#comment'"),
            ("a #b", "'a #b'"),
            ("a#b", "a#b"),
            (" lead", "' lead'"),
            ("trail ", "'trail '"),
            ("it's", "it's"),
            ("'quoted'", "'''quoted'''"),
            ("tab\there", "\"tab\\there\""),
            ("bell\u{7}", "\"bell\\a\""),
            ("emoji 🙂", "\"emoji \\U0001F642\""),
            ("café", "café"),
            ("---", "'---'"),
            ("*star", "'*star'"),
            ("10%", "10%"),
        ] {
            assert_eq!(to_yaml(&s(input), 4).unwrap(), want, "{input:?}");
        }
    }

    #[test]
    fn multi_line_strings_are_literal_blocks_with_go_yamls_chomping() {
        assert_eq!(to_yaml(&s("a\nb"), 4).unwrap(), "|-\n    a\n    b");
        assert_eq!(to_yaml(&s("a\nb\n"), 4).unwrap(), "|\n    a\n    b");
        assert_eq!(to_yaml(&s("a\n\n"), 4).unwrap(), "|+\n    a\n");
        // A trailing space before a line break rules the block out.
        assert_eq!(to_yaml(&s("a \nb"), 4).unwrap(), "\"a \\nb\"");
        let map = Value::Map([("k".to_string(), s("x\n\ny\n"))].into_iter().collect());
        assert_eq!(to_yaml(&map, 2).unwrap(), "k: |\n  x\n\n  y");
        let list = Value::Array(vec![s("x\ny")]);
        assert_eq!(to_yaml(&list, 4).unwrap(), "- |-\n  x\n  y");
        // A leading space needs an explicit indentation indicator.
        assert_eq!(to_yaml(&s(" a\nb"), 2).unwrap(), "|2-\n   a\n  b");
    }

    #[test]
    fn collections_nest_as_go_yaml_indents_them() {
        let taint = taint();
        let value = Value::Map(
            [
                ("list".to_string(), Value::Array(vec![s("a"), s("b")])),
                ("empty".to_string(), Value::Array(vec![])),
                ("none".to_string(), Value::Map(HashMap::new())),
                ("taints".to_string(), Value::Array(vec![taint])),
                (
                    "nested".to_string(),
                    Value::Array(vec![Value::Array(vec![s("x"), s("y")])]),
                ),
            ]
            .into_iter()
            .collect(),
        );
        assert_eq!(
            to_yaml(&value, 2).unwrap(),
            "empty: []\nlist:\n  - a\n  - b\nnested:\n  - - x\n    - \"y\"\nnone: {}\ntaints:\n  - key: k\n    effect: NoSchedule"
        );
        assert_eq!(
            to_yaml(&value, 4).unwrap(),
            "empty: []\nlist:\n    - a\n    - b\nnested:\n    - - x\n      - \"y\"\nnone: {}\ntaints:\n    - key: k\n      effect: NoSchedule"
        );
        assert_eq!(to_yaml(&Value::Array(vec![s("a")]), 4).unwrap(), "- a");
        assert_eq!(to_yaml(&Value::Nil, 4).unwrap(), "null");
        assert_eq!(to_yaml(&Value::from(-3i64), 4).unwrap(), "-3");
        assert_eq!(to_yaml(&Value::from(2.5f64), 4).unwrap(), "2.5");
        assert_eq!(to_yaml(&Value::from(true), 4).unwrap(), "true");
    }

    #[test]
    fn struct_fields_keep_their_order_keys_and_omitempty() {
        let value = super::super::GoStruct::new()
            .field("InstanceID", "100")
            .omitempty("Skipped", "skipped", "")
            .pointer("MaxPods", "maxPods", Some(Value::from(0u32)))
            .pointer("Nil", "nil", None)
            .omitempty_collection("Empty", "empty", Value::Array(vec![]))
            .collection("Tags", Value::Array(vec![]))
            .build();
        assert_eq!(
            to_yaml(&value, 2).unwrap(),
            "instanceid: \"100\"\nmaxPods: 0\ntags: []"
        );
    }

    #[test]
    fn map_keys_sort_naturally() {
        let mut keys = vec![
            "a10",
            "a2",
            "b",
            "A",
            "a",
            "x-1",
            "x_1",
            "memory.available",
            "imagefs.available",
        ];
        keys.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            keys,
            vec![
                "A",
                "a",
                "a2",
                "a10",
                "b",
                "imagefs.available",
                "memory.available",
                "x-1",
                "x_1"
            ]
        );
    }

    #[test]
    fn floats_print_as_go_does() {
        assert_eq!(go_float(1.5), "1.5");
        assert_eq!(go_float(1e21), "1e+21");
        assert_eq!(go_float(1e20), "100000000000000000000");
        assert_eq!(go_float(0.0001), "0.0001");
        assert_eq!(go_float(0.00001), "1e-05");
    }

    fn taint() -> Value {
        super::super::GoStruct::new()
            .omitempty("Key", "key", "k")
            .omitempty("Value", "value", "")
            .omitempty("Effect", "effect", "NoSchedule")
            .build()
    }
}
