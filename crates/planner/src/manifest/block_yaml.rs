//! A fast reader for the block-style YAML that `kubectl get -o yaml` (and most hand-written
//! manifests) use: block mappings and sequences, plain, quoted and literal scalars, `{}` and
//! `[]`.
//!
//! The full YAML parser reads a dump of 100,000 pods at about 15 MB/s; this one reads it several
//! times faster because it assumes the layout those writers produce. It never decides what a
//! document means where that layout does not hold: at the first construct outside it (a comment,
//! an anchor, a tag, a flow collection, a folded scalar, a tab where indentation goes, an
//! ambiguous plain scalar it cannot type with certainty, a syntax error, …) it gives up with
//! [`Unsupported`] and the caller reads the whole text with the full parser, which also reports
//! any error. What it accepts it must read exactly as the full parser does; the tests hold the
//! two side by side.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// The text is outside the subset this reader takes (or not valid YAML).
#[derive(Debug)]
pub(super) struct Unsupported;

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("outside the block-style subset")
    }
}

impl std::error::Error for Unsupported {}

impl de::Error for Unsupported {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Unsupported
    }
}

type Result<T> = std::result::Result<T, Unsupported>;

/// As deep as the full parser nests before it refuses.
const MAX_DEPTH: usize = 512;

/// Reads every document of `text` into a `T`; an empty document reads as unit.
pub(super) fn documents<'de, T: de::Deserialize<'de>>(text: &'de str) -> Result<Vec<T>> {
    if !printable(text.as_bytes()) {
        return Err(Unsupported);
    }
    let mut reader = Reader {
        text,
        bytes: text.as_bytes(),
        pos: 0,
        depth: 0,
    };
    let mut out = Vec::new();
    let mut explicit = reader.document_start()?;
    loop {
        reader.skip_blank_lines()?;
        let at_end = reader.pos >= reader.bytes.len();
        if at_end || reader.at_document_marker() {
            // `---` then nothing: an empty document, as the full parser reads it.
            if explicit {
                out.push(T::deserialize(Unit)?);
            }
        } else {
            out.push(T::deserialize(BlockNode {
                reader: &mut reader,
                parent: -1,
                sequence_at_parent: false,
            })?);
            reader.skip_blank_lines()?;
            if reader.pos < reader.bytes.len() && !reader.at_document_marker() {
                return Err(Unsupported);
            }
        }
        if reader.pos >= reader.bytes.len() {
            return Ok(out);
        }
        explicit = reader.document_start()?;
    }
}

/// Every character is one YAML allows in a document, and no line ends with a carriage return
/// (this reader does not fold CRLF).
fn printable(bytes: &[u8]) -> bool {
    if bytes.starts_with(b"\xEF\xBB\xBF") {
        return false;
    }
    let mut previous = [0u8; 2];
    for &b in bytes {
        let ok = match b {
            b'\n' | b'\t' => true,
            0..=0x1F | 0x7F => false,
            // C1 control characters (U+0080–U+009F), NEL among them, which YAML 1.1 took as a
            // line break: none of them is read here.
            0x80..=0x9F => previous[1] != 0xC2,
            // U+FFFE and U+FFFF, and a byte order mark inside the text.
            0xBE | 0xBF => previous != [0xEF, 0xBF] && !(b == 0xBF && previous == [0xEF, 0xBB]),
            _ => true,
        };
        if !ok {
            return false;
        }
        previous = [previous[1], b];
    }
    true
}

struct Reader<'de> {
    text: &'de str,
    bytes: &'de [u8],
    /// Where reading goes on: the start of a line, or inside one after a `key:` or `-`.
    pos: usize,
    depth: usize,
}

impl<'de> Reader<'de> {
    fn byte(&self, at: usize) -> Option<u8> {
        self.bytes.get(at).copied()
    }

    fn line_end(&self, from: usize) -> usize {
        self.bytes[from..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(self.bytes.len(), |i| from + i)
    }

    fn next_line(&self, from: usize) -> usize {
        (self.line_end(from) + 1).min(self.bytes.len())
    }

    /// The spaces opening the line at `line`; a tab among them is refused.
    fn indent(&self, line: usize) -> Result<usize> {
        let spaces = self.bytes[line..]
            .iter()
            .take_while(|&&b| b == b' ')
            .count();
        if self.byte(line + spaces) == Some(b'\t') {
            return Err(Unsupported);
        }
        Ok(spaces)
    }

    /// Moves past lines holding only spaces; `pos` must be at a line start.
    fn skip_blank_lines(&mut self) -> Result<()> {
        while self.pos < self.bytes.len() {
            let indent = self.indent(self.pos)?;
            match self.byte(self.pos + indent) {
                None => self.pos = self.bytes.len(),
                Some(b'\n') => self.pos += indent + 1,
                Some(b'#') => return Err(Unsupported),
                Some(_) => return Ok(()),
            }
        }
        Ok(())
    }

    /// A `---` line at `pos`; a `...` line or a directive is refused.
    fn at_document_marker(&self) -> bool {
        let rest = &self.bytes[self.pos..];
        rest.starts_with(b"---") && matches!(rest.get(3), None | Some(b'\n'))
    }

    /// Consumes a `---` line if one opens here; says whether it did.
    fn document_start(&mut self) -> Result<bool> {
        self.skip_blank_lines()?;
        let rest = &self.bytes[self.pos..];
        if rest.starts_with(b"...") || rest.starts_with(b"%") {
            return Err(Unsupported);
        }
        if rest.starts_with(b"---") {
            if !self.at_document_marker() {
                return Err(Unsupported);
            }
            self.pos = self.next_line(self.pos);
            return Ok(true);
        }
        Ok(false)
    }

    /// Only spaces remain on this line: moves to the next line.
    fn end_line(&mut self) -> Result<()> {
        let end = self.line_end(self.pos);
        if self.bytes[self.pos..end].iter().any(|&b| b != b' ') {
            return Err(Unsupported);
        }
        self.pos = (end + 1).min(self.bytes.len());
        Ok(())
    }

    /// A single-line mapping key at `at` and where its value starts (past `:`), if `at` opens
    /// one.
    fn key_at(&self, at: usize) -> Result<Option<(Cow<'de, str>, usize)>> {
        let end = self.line_end(at);
        match self.byte(at) {
            Some(b'"') | Some(b'\'') => {
                let Some((key, after)) = self.quoted_on_line(at, end)? else {
                    return Ok(None);
                };
                if self.byte(after) == Some(b':')
                    && matches!(self.byte(after + 1), None | Some(b' ') | Some(b'\n'))
                {
                    return Ok(Some((key, after + 1)));
                }
                Ok(None)
            }
            Some(b) if starts_plain(b, self.byte(at + 1)) => {
                let line = &self.bytes[at..end];
                let Some(colon) = (0..line.len())
                    .find(|&i| line[i] == b':' && matches!(line.get(i + 1), None | Some(b' ')))
                else {
                    return Ok(None);
                };
                let key = trim_end(&self.text[at..at + colon]);
                // `<<` merges another mapping in: the full parser's business.
                if key.contains(" #") || key.contains('\t') || key == "<<" || !string_key(key) {
                    return Err(Unsupported);
                }
                Ok(Some((Cow::Borrowed(key), at + colon + 1)))
            }
            _ => Ok(None),
        }
    }

    /// A quoted scalar that closes on its line: its text and the position after the quote;
    /// `None` when it runs on to the next line.
    fn quoted_on_line(&self, at: usize, end: usize) -> Result<Option<(Cow<'de, str>, usize)>> {
        let quote = self.bytes[at];
        let mut i = at + 1;
        let mut owned: Option<String> = None;
        let mut run = i;
        while i < end {
            let b = self.bytes[i];
            if quote == b'\'' && b == b'\'' {
                if self.byte(i + 1) == Some(b'\'') {
                    let s = owned.get_or_insert_with(String::new);
                    s.push_str(&self.text[run..=i]);
                    i += 2;
                    run = i;
                    continue;
                }
                return Ok(Some((finish(owned, &self.text[run..i]), i + 1)));
            }
            if quote == b'"' && b == b'"' {
                return Ok(Some((finish(owned, &self.text[run..i]), i + 1)));
            }
            if quote == b'"' && b == b'\\' {
                let s = owned.get_or_insert_with(String::new);
                s.push_str(&self.text[run..i]);
                i = self.escape(i, s)?;
                run = i;
                continue;
            }
            i += 1;
        }
        Ok(None)
    }

    /// The escape at `at` (a backslash) appended to `out`; where reading goes on.
    fn escape(&self, at: usize, out: &mut String) -> Result<usize> {
        let Some(c) = self.byte(at + 1) else {
            return Err(Unsupported);
        };
        let simple = match c {
            b'0' => '\0',
            b'a' => '\u{7}',
            b'b' => '\u{8}',
            b't' | b'\t' => '\t',
            b'n' => '\n',
            b'v' => '\u{b}',
            b'f' => '\u{c}',
            b'r' => '\r',
            b'e' => '\u{1b}',
            b' ' => ' ',
            b'"' => '"',
            b'/' => '/',
            b'\\' => '\\',
            b'N' => '\u{85}',
            b'_' => '\u{a0}',
            b'L' => '\u{2028}',
            b'P' => '\u{2029}',
            b'x' | b'u' | b'U' => {
                let digits = match c {
                    b'x' => 2,
                    b'u' => 4,
                    _ => 8,
                };
                let hex = self.text.get(at + 2..at + 2 + digits).ok_or(Unsupported)?;
                if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(Unsupported);
                }
                let code = u32::from_str_radix(hex, 16).map_err(|_| Unsupported)?;
                out.push(char::from_u32(code).ok_or(Unsupported)?);
                return Ok(at + 2 + digits);
            }
            // An escaped line break (and anything else) is left to the full parser.
            _ => return Err(Unsupported),
        };
        out.push(simple);
        Ok(at + 2)
    }

    fn enter(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Unsupported);
        }
        Ok(())
    }

    /// The value written on the line at `pos` (after `key: ` or `- `), its continuation lines
    /// indented past `parent`.
    fn inline<V: Visitor<'de>>(&mut self, visitor: V, parent: isize) -> Result<V::Value> {
        let end = self.line_end(self.pos);
        match self.bytes[self.pos] {
            b'"' | b'\'' => {
                let value = self.quoted(parent)?;
                self.end_line()?;
                visit_str(visitor, value)
            }
            b'|' => {
                let value = self.literal(parent)?;
                visit_str(visitor, Cow::Owned(value))
            }
            b'{' | b'[' => {
                let open = self.bytes[self.pos];
                let close = if open == b'{' { b'}' } else { b']' };
                if self.byte(self.pos + 1) != Some(close) {
                    return Err(Unsupported);
                }
                self.pos += 2;
                self.end_line()?;
                if open == b'{' {
                    visitor.visit_map(EmptyMap)
                } else {
                    visitor.visit_seq(EmptySeq)
                }
            }
            b if starts_plain(b, self.byte(self.pos + 1)) => {
                let first = trim_end(&self.text[self.pos..end]);
                if has_plain_terminator(first) {
                    return Err(Unsupported);
                }
                self.pos = (end + 1).min(self.bytes.len());
                let value = self.plain_continuation(first, parent)?;
                plain_scalar(visitor, value)
            }
            _ => Err(Unsupported),
        }
    }

    /// A plain scalar's further lines, folded onto `first`.
    fn plain_continuation(&mut self, first: &'de str, parent: isize) -> Result<Cow<'de, str>> {
        let mut value = Cow::Borrowed(first);
        let mut breaks = 0;
        let mut line = self.pos;
        while line < self.bytes.len() {
            let indent = self.indent(line)?;
            let end = self.line_end(line);
            if line + indent == end {
                breaks += 1;
                line = (end + 1).min(self.bytes.len());
                continue;
            }
            if indent as isize <= parent {
                break;
            }
            let text = trim_end(&self.text[line + indent..end]);
            if has_plain_terminator(text) || !starts_plain(text.as_bytes()[0], None) {
                return Err(Unsupported);
            }
            let s = value.to_mut();
            if breaks == 0 {
                s.push(' ');
            }
            (0..breaks).for_each(|_| s.push('\n'));
            s.push_str(text);
            breaks = 0;
            line = (end + 1).min(self.bytes.len());
            self.pos = line;
        }
        Ok(value)
    }

    /// A quoted scalar at `pos`, over as many lines as it runs; `pos` ends after the closing
    /// quote.
    fn quoted(&mut self, parent: isize) -> Result<Cow<'de, str>> {
        let end = self.line_end(self.pos);
        if let Some((value, after)) = self.quoted_on_line(self.pos, end)? {
            self.pos = after;
            return Ok(value);
        }
        let quote = self.bytes[self.pos];
        let mut out = String::new();
        // How much of `out` an escape wrote last: escaped white space survives folding.
        let mut escaped = 0;
        let mut i = self.pos + 1;
        loop {
            let end = self.line_end(i);
            // This line's part: up to the closing quote or the line's end.
            let mut j = i;
            let mut closed = None;
            while j < end {
                let b = self.bytes[j];
                if b == quote {
                    if quote == b'\'' && self.byte(j + 1) == Some(b'\'') {
                        out.push('\'');
                        j += 2;
                        continue;
                    }
                    closed = Some(j);
                    break;
                }
                if quote == b'"' && b == b'\\' {
                    j = self.escape(j, &mut out)?;
                    escaped = out.len();
                    continue;
                }
                let width = utf8_width(b);
                out.push_str(&self.text[j..j + width]);
                j += width;
            }
            if let Some(close) = closed {
                self.pos = close + 1;
                return Ok(Cow::Owned(out));
            }
            if end >= self.bytes.len() {
                return Err(Unsupported);
            }
            // A line break inside the quotes folds: trailing and leading white space go, one
            // break becomes a space, each blank line a newline.
            let kept = out.trim_end_matches([' ', '\t']).len().max(escaped);
            out.truncate(kept);
            let mut line = end + 1;
            let mut blanks = 0;
            loop {
                if line >= self.bytes.len() {
                    return Err(Unsupported);
                }
                let indent = self.indent(line)?;
                let line_end = self.line_end(line);
                if line + indent == line_end {
                    blanks += 1;
                    line = line_end + 1;
                    continue;
                }
                if indent as isize <= parent || (indent == 0 && self.marker_line(line)) {
                    return Err(Unsupported);
                }
                i = line + indent;
                break;
            }
            if blanks == 0 {
                out.push(' ');
            }
            (0..blanks).for_each(|_| out.push('\n'));
        }
    }

    fn marker_line(&self, line: usize) -> bool {
        let rest = &self.bytes[line..];
        (rest.starts_with(b"---") || rest.starts_with(b"..."))
            && matches!(rest.get(3), None | Some(b' ') | Some(b'\n'))
    }

    /// A literal block scalar (`|`, `|-`, `|+`) whose header is at `pos`, its lines indented
    /// past `parent`; `pos` ends at the line after it.
    fn literal(&mut self, parent: isize) -> Result<String> {
        let header_end = self.line_end(self.pos);
        let header = &self.bytes[self.pos + 1..header_end];
        let (chomp, rest) = match header.first() {
            Some(b'-') => (Chomp::Strip, &header[1..]),
            Some(b'+') => (Chomp::Keep, &header[1..]),
            _ => (Chomp::Clip, header),
        };
        if rest.iter().any(|&b| b != b' ') || header_end >= self.bytes.len() {
            return Err(Unsupported);
        }
        let mut line = header_end + 1;
        // The first non-blank line sets the indentation.
        let mut content_indent = None;
        let mut leading = 0;
        let mut scan = line;
        while scan < self.bytes.len() {
            let indent = self.indent(scan)?;
            let end = self.line_end(scan);
            if scan + indent == end {
                leading = leading.max(indent);
                scan = (end + 1).min(self.bytes.len());
                continue;
            }
            content_indent = Some(indent);
            break;
        }
        let Some(content_indent) = content_indent.filter(|&i| i as isize > parent) else {
            return Err(Unsupported);
        };
        if leading > content_indent {
            return Err(Unsupported);
        }
        let mut out = String::new();
        let mut trailing_breaks = 0;
        while line < self.bytes.len() {
            // Past the indentation a tab is content; within it, the full parser's business.
            let indent = self.bytes[line..]
                .iter()
                .take_while(|&&b| b == b' ')
                .count();
            if indent < content_indent && self.byte(line + indent) == Some(b'\t') {
                return Err(Unsupported);
            }
            let end = self.line_end(line);
            if line + indent == end {
                if indent > content_indent {
                    return Err(Unsupported);
                }
                if end >= self.bytes.len() {
                    // Spaces at the very end of the text, without a line break.
                    line = end;
                    break;
                }
                trailing_breaks += 1;
                line = end + 1;
                continue;
            }
            if indent < content_indent {
                break;
            }
            if end >= self.bytes.len() {
                // The text ends inside the scalar without a line break.
                return Err(Unsupported);
            }
            (0..trailing_breaks).for_each(|_| out.push('\n'));
            trailing_breaks = 0;
            out.push_str(&self.text[line + content_indent..end]);
            out.push('\n');
            line = end + 1;
        }
        self.pos = line.min(self.bytes.len());
        match chomp {
            Chomp::Strip => {
                let kept = out.trim_end_matches('\n').len();
                out.truncate(kept);
            }
            Chomp::Clip => {}
            Chomp::Keep => (0..trailing_breaks).for_each(|_| out.push('\n')),
        }
        Ok(out)
    }
}

#[derive(Clone, Copy)]
enum Chomp {
    Strip,
    Clip,
    Keep,
}

fn utf8_width(first: u8) -> usize {
    match first {
        0..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        _ => 4,
    }
}

fn finish<'de>(owned: Option<String>, tail: &'de str) -> Cow<'de, str> {
    match owned {
        Some(mut s) => {
            s.push_str(tail);
            Cow::Owned(s)
        }
        None => Cow::Borrowed(tail),
    }
}

fn trim_end(s: &str) -> &str {
    s.trim_end_matches(' ')
}

/// `b` (followed by `next`) may open a plain scalar: not an indicator, or `-`, `?`, `:`
/// followed by something other than a space.
fn starts_plain(b: u8, next: Option<u8>) -> bool {
    match b {
        b'-' | b'?' | b':' => !matches!(next, None | Some(b' ') | Some(b'\n')),
        b',' | b'[' | b']' | b'{' | b'}' | b'#' | b'&' | b'*' | b'!' | b'|' | b'>' | b'\''
        | b'"' | b'%' | b'@' | b'`' | b' ' | b'\t' | b'\n' => false,
        _ => true,
    }
}

/// A plain scalar's line holds something that ends it early (`: `, ` #`, a trailing `:`) or
/// a tab, which this reader leaves to the full parser.
fn has_plain_terminator(s: &str) -> bool {
    s.contains(": ") || s.contains(" #") || s.ends_with(':') || s.contains('\t')
}

/// A plain scalar the full parser would surely read as a string. Nulls, booleans and numbers
/// open with a digit, a sign, `.`, `~` or a letter; the letter ones are the words YAML 1.1
/// reads as booleans and null and the spellings of infinity and NaN.
fn obviously_string(s: &str) -> bool {
    let Some(&first) = s.as_bytes().first() else {
        return false;
    };
    if first.is_ascii_alphabetic() {
        const WORDS: [&str; 12] = [
            "y", "yes", "n", "no", "on", "off", "true", "false", "null", "inf", "infinity", "nan",
        ];
        return s.len() > 8 || !WORDS.iter().any(|w| s.eq_ignore_ascii_case(w));
    }
    match first {
        b'0'..=b'9' | b'+' | b'-' | b'.' => !number_shaped(s),
        b'~' => false,
        _ => true,
    }
}

/// `s` might be read as a number: a radix prefix (`0x…`, `0o…`, `0b…`), a spelling of infinity
/// or NaN, or nothing but digits, dots, underscores, exponents and signs with at most one dot
/// (`500m`, `512Mi`, `5d8f9c`, `10.0.0.1`, `.` cannot be).
fn number_shaped(s: &str) -> bool {
    let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
    let bytes = unsigned.as_bytes();
    if bytes.len() >= 2
        && bytes[0] == b'0'
        && matches!(bytes[1], b'x' | b'X' | b'o' | b'O' | b'b' | b'B')
    {
        return true;
    }
    let word = unsigned.strip_prefix('.').unwrap_or(unsigned);
    if ["inf", "infinity", "nan"]
        .iter()
        .any(|w| word.eq_ignore_ascii_case(w))
    {
        return true;
    }
    // Every number YAML reads has a digit: `.` alone is a string (managedFields' key).
    bytes.iter().any(u8::is_ascii_digit)
        && bytes
            .iter()
            .all(|&b| b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'e' | b'E' | b'+' | b'-'))
        && bytes.iter().filter(|&&b| b == b'.').count() <= 1
}

/// A plain mapping key the full parser reads as the same string, and as no other key: a
/// key that might be a null, a boolean or a number is left to it (`0x1` and `1` are one key
/// there, as are `true` and `True`), and so is one past YAML's limit on implicit keys.
fn string_key(s: &str) -> bool {
    s.len() <= MAX_SIMPLE_KEY && obviously_string(s)
}

/// The longest implicit key YAML allows (1024 characters; counted here in bytes, which only
/// refuses more).
const MAX_SIMPLE_KEY: usize = 1024;

/// A plain scalar typed as the full parser types it: null, boolean, integer or string, and
/// anything this reader is unsure of refused.
fn plain_scalar<'de, V: Visitor<'de>>(visitor: V, value: Cow<'de, str>) -> Result<V::Value> {
    if obviously_string(&value) {
        return visit_str(visitor, value);
    }
    let s: &str = &value;
    match s {
        "~" | "null" | "Null" | "NULL" => return visitor.visit_unit(),
        "true" | "True" | "TRUE" => return visitor.visit_bool(true),
        "false" | "False" | "FALSE" => return visitor.visit_bool(false),
        _ => {}
    }
    let (negative, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s),
    };
    let decimal = !digits.is_empty()
        && digits.len() <= 18
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    if !decimal {
        return Err(Unsupported);
    }
    let n: u64 = digits.parse().map_err(|_| Unsupported)?;
    if negative {
        visitor.visit_i64(-(n as i64))
    } else {
        visitor.visit_u64(n)
    }
}

fn visit_str<'de, V: Visitor<'de>>(visitor: V, value: Cow<'de, str>) -> Result<V::Value> {
    match value {
        Cow::Borrowed(s) => visitor.visit_borrowed_str(s),
        Cow::Owned(s) => visitor.visit_string(s),
    }
}

/// A node that starts on a line of its own: a mapping or sequence indented past `parent` (a
/// sequence may also sit at `parent`'s own column when it is a mapping's value), or null when
/// nothing is indented there.
struct BlockNode<'a, 'de> {
    reader: &'a mut Reader<'de>,
    parent: isize,
    sequence_at_parent: bool,
}

impl<'de> Deserializer<'de> for BlockNode<'_, 'de> {
    type Error = Unsupported;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let reader = self.reader;
        reader.skip_blank_lines()?;
        if reader.pos >= reader.bytes.len() {
            return visitor.visit_unit();
        }
        let line = reader.pos;
        let indent = reader.indent(line)?;
        let at = line + indent;
        let entry = reader.bytes[at] == b'-'
            && matches!(reader.byte(at + 1), None | Some(b' ') | Some(b'\n'));
        let deeper = indent as isize > self.parent;
        if indent == 0 && reader.marker_line(line) {
            return visitor.visit_unit();
        }
        if entry && (deeper || (self.sequence_at_parent && indent as isize == self.parent)) {
            reader.enter()?;
            let value = visitor.visit_seq(BlockSeq {
                reader: &mut *reader,
                column: indent,
            })?;
            reader.depth -= 1;
            return Ok(value);
        }
        if !deeper {
            return visitor.visit_unit();
        }
        if entry {
            return Err(Unsupported);
        }
        let Some((key, after)) = reader.key_at(at)? else {
            return Err(Unsupported);
        };
        reader.enter()?;
        let value = visitor.visit_map(BlockMap::new(&mut *reader, indent, Some((key, after))))?;
        reader.depth -= 1;
        Ok(value)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

/// The value after `key:` or `- `: on the same line, or on the lines below.
struct ValueNode<'a, 'de> {
    reader: &'a mut Reader<'de>,
    /// The column of the mapping or sequence holding it.
    parent: usize,
    in_mapping: bool,
}

impl<'de> Deserializer<'de> for ValueNode<'_, 'de> {
    type Error = Unsupported;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let reader = self.reader;
        let end = reader.line_end(reader.pos);
        let spaces = reader.bytes[reader.pos..end]
            .iter()
            .take_while(|&&b| b == b' ')
            .count();
        if reader.byte(reader.pos + spaces) == Some(b'\t') {
            return Err(Unsupported);
        }
        if reader.pos + spaces == end {
            reader.pos = (end + 1).min(reader.bytes.len());
            return BlockNode {
                reader,
                parent: self.parent as isize,
                sequence_at_parent: self.in_mapping,
            }
            .deserialize_any(visitor);
        }
        if spaces == 0 && self.in_mapping {
            return Err(Unsupported);
        }
        reader.pos += spaces;
        let column = reader.pos - line_start(reader.bytes, reader.pos);
        let b = reader.bytes[reader.pos];
        if b == b'#' {
            return Err(Unsupported);
        }
        if b == b'-' && matches!(reader.byte(reader.pos + 1), None | Some(b' ') | Some(b'\n')) {
            // `- - x` or `key: - x`.
            return Err(Unsupported);
        }
        if !self.in_mapping
            && let Some((key, after)) = reader.key_at(reader.pos)?
        {
            // `- key: value`: a mapping whose keys sit at this column.
            reader.enter()?;
            let value =
                visitor.visit_map(BlockMap::new(&mut *reader, column, Some((key, after))))?;
            reader.depth -= 1;
            return Ok(value);
        }
        if self.in_mapping && reader.key_at(reader.pos)?.is_some() {
            return Err(Unsupported);
        }
        reader.inline(visitor, self.parent as isize)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

fn line_start(bytes: &[u8], pos: usize) -> usize {
    bytes[..pos]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1)
}

struct BlockSeq<'a, 'de> {
    reader: &'a mut Reader<'de>,
    column: usize,
}

impl<'de> SeqAccess<'de> for BlockSeq<'_, 'de> {
    type Error = Unsupported;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        let reader = &mut *self.reader;
        reader.skip_blank_lines()?;
        if reader.pos >= reader.bytes.len() {
            return Ok(None);
        }
        let line = reader.pos;
        let indent = reader.indent(line)?;
        let at = line + indent;
        let entry = reader.bytes[at] == b'-'
            && matches!(reader.byte(at + 1), None | Some(b' ') | Some(b'\n'));
        if indent < self.column || (indent == self.column && !entry) {
            return Ok(None);
        }
        if indent > self.column {
            return Err(Unsupported);
        }
        reader.pos = at + 1;
        seed.deserialize(ValueNode {
            reader,
            parent: self.column,
            in_mapping: false,
        })
        .map(Some)
    }
}

struct BlockMap<'a, 'de> {
    reader: &'a mut Reader<'de>,
    column: usize,
    /// The first key, already read where the mapping was recognised.
    first: Option<(Cow<'de, str>, usize)>,
    keys: Keys<'de>,
}

impl<'a, 'de> BlockMap<'a, 'de> {
    fn new(
        reader: &'a mut Reader<'de>,
        column: usize,
        first: Option<(Cow<'de, str>, usize)>,
    ) -> Self {
        BlockMap {
            reader,
            column,
            first,
            keys: Keys::default(),
        }
    }
}

/// The keys a mapping has had, to refuse a repeated one as the full parser does.
#[derive(Default)]
struct Keys<'de> {
    few: Vec<Cow<'de, str>>,
    many: Option<HashSet<Cow<'de, str>>>,
}

impl<'de> Keys<'de> {
    /// Adds `key`; false if it was there.
    fn insert(&mut self, key: Cow<'de, str>) -> bool {
        if let Some(many) = &mut self.many {
            return many.insert(key);
        }
        if self.few.contains(&key) {
            return false;
        }
        self.few.push(key);
        if self.few.len() > 16 {
            self.many = Some(self.few.drain(..).collect());
        }
        true
    }
}

impl<'de> MapAccess<'de> for BlockMap<'_, 'de> {
    type Error = Unsupported;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        let (key, after) = match self.first.take() {
            Some(first) => first,
            None => {
                let reader = &mut *self.reader;
                reader.skip_blank_lines()?;
                if reader.pos >= reader.bytes.len() {
                    return Ok(None);
                }
                let line = reader.pos;
                let indent = reader.indent(line)?;
                if indent < self.column || (indent == 0 && reader.marker_line(line)) {
                    return Ok(None);
                }
                let at = line + indent;
                if indent == self.column
                    && reader.bytes[at] == b'-'
                    && matches!(reader.byte(at + 1), None | Some(b' ') | Some(b'\n'))
                {
                    return Ok(None);
                }
                if indent > self.column {
                    return Err(Unsupported);
                }
                reader.key_at(at)?.ok_or(Unsupported)?
            }
        };
        if !self.keys.insert(key.clone()) {
            return Err(Unsupported);
        }
        self.reader.pos = after;
        seed.deserialize(Key(key)).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        seed.deserialize(ValueNode {
            reader: &mut *self.reader,
            parent: self.column,
            in_mapping: true,
        })
    }
}

/// A mapping key: always a string.
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserializer<'de> for Key<'de> {
    type Error = Unsupported;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visit_str(visitor, self.0)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

struct Unit;

impl<'de> Deserializer<'de> for Unit {
    type Error = Unsupported;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

struct EmptyMap;

impl<'de> MapAccess<'de> for EmptyMap {
    type Error = Unsupported;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, _: K) -> Result<Option<K::Value>> {
        Ok(None)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, _: V) -> Result<V::Value> {
        Err(Unsupported)
    }
}

struct EmptySeq;

impl<'de> SeqAccess<'de> for EmptySeq {
    type Error = Unsupported;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, _: T) -> Result<Option<T::Value>> {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::Value;

    use super::super::{Objects, full_yaml};
    use super::*;

    fn fast(text: &str) -> Result<Vec<Value>> {
        documents::<Objects<Value>>(text).map(|d| d.into_iter().flat_map(|o| o.0).collect())
    }

    fn full(text: &str) -> Vec<Value> {
        full_yaml::<Value>(Path::new("t.yaml"), text)
            .unwrap_or_else(|e| panic!("the full parser refuses {text:?}: {e}"))
    }

    /// Layouts `kubectl get -o yaml` and hand-written manifests use: the fast reader takes
    /// them and reads what the full parser reads.
    #[test]
    fn reads_block_yaml_as_the_full_parser_does() {
        let cases = [
            "a: 1\nb: two\n",
            "apiVersion: v1\nkind: List\nitems:\n- kind: Pod\n  metadata:\n    name: x\n  spec: {}\n- kind: Node\n  status:\n    conditions: []\n",
            "key:\n  - a\n  - b\nother: c\n",
            "m:\n  k:\n    o: p\n  q: r\ns: t",
            ".: {}\n.x: a\n-x: b\n1.2.3: c\nnUlLs: f\ninfo: g\n",
            "empty:\nnext: 1\n",
            "null1: null\nnull2: ~\nnull3: Null\nt: true\nf: False\nT: TRUE\n",
            "i0: 0\ni1: -0\ni2: 300\ni3: -42\ni4: 123456789012345678\n",
            "q1: \"2024-06-03T11:00:00Z\"\nq2: 'it''s'\nq3: \"a\\tb\\n\\u00e9\\\"\\\\\"\nq4: ''\nq5: \"\"\n",
            "cpu: 500m\nmemory: 512Mi\nip: 10.244.1.5\nv: 1.2.3\nhash: 5d8f9c\nh2: 7c5ddbdf54\ne: 1e5x\nd: 3d\nimage: registry.example/app:1.2.3\nargs:\n- --flag=value\n- -v\n",
            "url: http://example.com/a#b\ncolon: a:b\nk:{\"uid\":\"rs\"}: {}\n\".\": {}\n\"f:spec\": {}\n",
            "message: '0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes\n  are available: 3 No preemption victims found for incoming pod.'\n",
            "d: \"first line\n  second\n\n  third \\t\n  end\"\n",
            "plain: this is a long\n  plain scalar that\n\n  folds\nnext: x\n",
            "script: |\n  #!/bin/sh\n  echo hi\n\n    indented\n\tnot-a-tab-line\n",
            "keep: |+\n  a\n\n\nstrip: |-\n  b\n\nclip: |\n  c\n\n\nafter: 1\n",
            "annotations:\n  kubectl.kubernetes.io/last-applied-configuration: |\n    {\"apiVersion\":\"v1\",\"kind\":\"Pod\"}\n  other: x\n",
            "- a: 1\n  b:\n  - c\n  - d: e\n    f: g\n- h\n",
            "---\na: 1\n---\nb: 2\n---\n",
            "---\n\n---\nkind: Pod\n",
            "",
            "\n\n",
            "unicode: héllo wörld ✓\n\"ключ\": значение\n",
            "spaces:   x  \nwide:    \n  - 1\n",
            "slash: /var/lib\nstar: a*b\nq: a?b\n",
            "- |\n  a\n   b\n- c\n-  |-\n    d\n",
            "- \"a\n  b\"\n- 'c\n\n  d'\n",
        ];
        for text in cases {
            // A tab opens one case's line on purpose: as content of the literal, not
            // indentation.
            let text = &text.replace("\n\tnot-a-tab-line", "\n  \tnot-a-tab-line");
            match fast(text) {
                Ok(values) => assert_eq!(values, full(text), "{text:?}"),
                Err(Unsupported) => panic!("the fast reader gives up on {text:?}"),
            }
        }
    }

    /// A pod as `kubectl get pod -o yaml` prints it (go-yaml's layout: sequences at their
    /// key's column, long strings folded at 80 columns, a trailing-newline annotation as a
    /// literal block).
    const KUBECTL_POD: &str = r#"apiVersion: v1
kind: Pod
metadata:
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: |
      {"apiVersion":"v1","kind":"Pod","metadata":{"annotations":{},"name":"web-7c5ddbdf54-x2x9k","namespace":"default"}}
    prometheus.io/port: "9102"
  creationTimestamp: "2024-06-03T11:00:00Z"
  generateName: web-7c5ddbdf54-
  labels:
    app: web
    pod-template-hash: 7c5ddbdf54
  managedFields:
  - apiVersion: v1
    fieldsType: FieldsV1
    fieldsV1:
      f:metadata:
        f:generateName: {}
        f:labels:
          .: {}
          f:app: {}
        f:ownerReferences:
          .: {}
          k:{"uid":"5b1c6e4e-0c44-4a6b-9d43-64c1c1f7a7b1"}: {}
    manager: kube-controller-manager
    operation: Update
    time: "2024-06-03T11:00:00Z"
  name: web-7c5ddbdf54-x2x9k
  namespace: default
  ownerReferences:
  - apiVersion: apps/v1
    blockOwnerDeletion: true
    controller: true
    kind: ReplicaSet
    name: web-7c5ddbdf54
    uid: 5b1c6e4e-0c44-4a6b-9d43-64c1c1f7a7b1
  resourceVersion: "123456"
  uid: 0e7f3c2a-1111-4b7e-8a1e-2f0d3c4b5a69
spec:
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - key: karpenter.sh/capacity-type
            operator: In
            values:
            - spot
            - on-demand
  containers:
  - args:
    - --port=8080
    - -v
    command:
    - /bin/sh
    - -c
    - |
      echo starting
      exec /app
    env:
    - name: GREETING
      value: hello world
    - name: EMPTY
    image: registry.example/web@sha256:4f2b6a0c1e9d8b7a6f5e4d3c2b1a09f8e7d6c5b4a3928170f6e5d4c3b2a19080
    imagePullPolicy: IfNotPresent
    name: web
    ports:
    - containerPort: 8080
      name: http
      protocol: TCP
    resources:
      limits:
        nvidia.com/gpu: "1"
      requests:
        cpu: 250m
        memory: 512Mi
    terminationMessagePath: /dev/termination-log
    volumeMounts:
    - mountPath: /var/run/secrets/kubernetes.io/serviceaccount
      name: kube-api-access-abcde
      readOnly: true
  dnsPolicy: ClusterFirst
  enableServiceLinks: true
  preemptionPolicy: PreemptLowerPriority
  priority: 0
  restartPolicy: Always
  schedulerName: default-scheduler
  securityContext: {}
  terminationGracePeriodSeconds: 30
  tolerations:
  - effect: NoExecute
    key: node.kubernetes.io/not-ready
    operator: Exists
    tolerationSeconds: 300
  topologySpreadConstraints:
  - labelSelector:
      matchLabels:
        app: web
    maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: DoNotSchedule
  volumes:
  - name: kube-api-access-abcde
    projected:
      defaultMode: 420
      sources:
      - serviceAccountToken:
          expirationSeconds: 3607
          path: token
      - configMap:
          items:
          - key: ca.crt
            path: ca.crt
          name: kube-root-ca.crt
status:
  conditions:
  - lastProbeTime: null
    lastTransitionTime: "2024-06-03T11:00:00Z"
    message: '0/3 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/unreachable:
      }, 2 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims
      found for incoming pod.'
    reason: Unschedulable
    status: "False"
    type: PodScheduled
  hostIP: 10.0.1.23
  hostIPs:
  - ip: 10.0.1.23
  - ip: fd00:10:0:1::17
  phase: Pending
  podIP: 10.244.1.5
  qosClass: Burstable
  startTime: "2024-06-03T11:00:01Z"
"#;

    #[test]
    fn reads_a_kubectl_pod_fast_and_alike() {
        let values = fast(KUBECTL_POD).expect("the fast reader takes kubectl's layout");
        assert_eq!(values, full(KUBECTL_POD));
        assert_eq!(
            values[0]["status"]["conditions"][0]["lastProbeTime"],
            Value::Null
        );
        assert_eq!(values[0]["spec"]["priority"], Value::from(0));
    }

    /// What the fast reader does not take it leaves to the full parser, which reads it (or
    /// refuses it) as before.
    #[test]
    fn leaves_everything_else_to_the_full_parser() {
        let cases = [
            // Comments, anchors, aliases, tags, flow collections, folded scalars.
            "a: 1 # one\n",
            "# head\na: 1\n",
            "a: &x 1\nb: *x\n",
            "a: !!str 1\n",
            "a: {b: 1}\n",
            "a: [1, 2]\n",
            "a: >\n  folded\n",
            "a: |2\n   x\n",
            // Scalars the fast reader cannot type with certainty.
            "a: yes\n",
            "a: off\n",
            "a: 0x1F\n",
            "a: 1e3\n",
            "a: 1.5\n",
            "a: .inf\n",
            "a: 0755\n",
            "a: 1_000\n",
            "a: 12345678901234567890\n",
            "a: tRuE\n",
            "~: x\n",
            "a: \"\\\n  b\"\n",
            // Keys the full parser may resolve to another scalar, or refuses for length.
            "0x1: a\n1: b\n",
            "80: a\n",
            "1.5: c\n1e3: e\n",
            "true: a\nTrue: b\n",
            "False: 8\n",
            "y: 1\n",
            "on: 3\n",
            "nUlL: f\n",
            "~x: h\n",
            "nan: 10\n",
            "-1: a\n",
            "+1: g\n",
            ".5: a\n",
            ".inf: a\n",
            // A byte order mark inside the text.
            "a: 1\n---\n\u{feff}b: 2\n",
            // Tabs, carriage returns, directives, document ends.
            "a:\tb\n",
            "a:\r\n  b: 1\r\n",
            "%YAML 1.2\n---\na: 1\n",
            "a: 1\n...\n",
            "? a\n: b\n",
            // Compact nested sequences.
            "key:\n- a\n-\n- - \"x\"\n",
            "deep:\n  - - - 1\n",
            "base:\n  a: 1\nderived:\n  <<:\n    b: 2\n",
            // Invalid YAML: the full parser's error is the one reported.
            "a: 1\na: 2\n",
            "a: b\n  c: d\n",
            "a:\n  b: 1\n c: 2\n",
            "- a\nb: 1\n",
            "a: 'unclosed\n",
            "a: \"x\"y\n",
            "a: b: c\n",
        ];
        for text in cases {
            assert!(
                fast(text).is_err(),
                "the fast reader takes {text:?}: {:?}",
                fast(text)
            );
            let objects = super::super::parse_objects::<Value>(Path::new("t.yaml"), text);
            let full = full_yaml::<Value>(Path::new("t.yaml"), text);
            assert_eq!(
                objects.map_err(|e| e.to_string()),
                full.map_err(|e| e.to_string()),
                "{text:?}"
            );
        }
    }

    /// A key past YAML's 1024-character limit on implicit keys is the full parser's to judge.
    #[test]
    fn leaves_a_key_past_the_limit_to_the_full_parser() {
        let at_limit = format!("{}: 1\n", "k".repeat(1024));
        assert!(fast(&at_limit).is_ok());
        let past = format!("{}: 1\n", "k".repeat(1025));
        assert!(fast(&past).is_err());
    }

    /// Values written by another YAML writer (serde-saphyr's) and read back both ways.
    #[test]
    fn reads_what_another_writer_writes() {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        const WORDS: [&str; 16] = [
            "app",
            "500m",
            "512Mi",
            "10.0.0.1",
            "a b",
            "x: y",
            "#tag",
            "- item",
            "it's",
            "\"q\"",
            "line\nbreak",
            "tab\there",
            "",
            "true",
            "42",
            "ünï",
        ];
        let mut fast_read = 0;
        for _ in 0..300 {
            fn value(next: &mut impl FnMut(u64) -> u64, depth: u32) -> Value {
                match next(if depth > 3 { 4 } else { 6 }) {
                    0 => Value::String(WORDS[next(16) as usize].repeat(1 + next(3) as usize)),
                    1 => Value::from(next(1000) as i64 - 500),
                    2 => Value::Bool(next(2) == 0),
                    3 => Value::Null,
                    4 => Value::Array((0..next(4)).map(|_| value(next, depth + 1)).collect()),
                    _ => Value::Object(
                        (0..next(5))
                            .map(|i| {
                                (
                                    format!("{}{i}", WORDS[next(16) as usize]),
                                    value(next, depth + 1),
                                )
                            })
                            .collect(),
                    ),
                }
            }
            let object = Value::Object(
                (0..1 + next(5))
                    .map(|i| (format!("k{i}"), value(&mut next, 0)))
                    .collect(),
            );
            let text = serde_saphyr::to_string(&object).expect("serializes");
            let expected = full(&text);
            if let Ok(values) = fast(&text) {
                assert_eq!(values, expected, "{text}");
                fast_read += 1;
            }
        }
        assert!(fast_read > 150, "only {fast_read} of 300 read fast");
    }
}
