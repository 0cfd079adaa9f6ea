//! The MIME multipart document a node boots with: ACK's join script and the `ECSNodeClass`'s
//! `userData`, as cloud-init reads them (upstream's `cloudinit.go`, which builds on the AWS
//! provider's MIME archive).
//!
//! * A user's data that starts (after whitespace) with `MIME-Version:` or `Content-Type:` is a
//!   MIME multipart document: its parts are taken over one by one, each with its
//!   `Content-Type`. Anything else is one shell script part
//!   (`text/x-shellscript; charset="us-ascii"`).
//! * Parts are kept in the order they were merged, except that shell scripts marked
//!   `stage=pre` move to the front (in their own order), so a user can run something before
//!   the node joins.
//! * The document is written with the boundary `//`, `\n` line ends (every `\r` is dropped, as
//!   upstream drops them), and comes out base64-encoded, which is what ECS's `UserData` takes.

use base64::Engine;
use std::collections::BTreeMap;

/// The boundary between parts.
pub const BOUNDARY: &str = "//";

/// The content type of a part that is a plain script.
pub const SHELL_SCRIPT: &str = "text/x-shellscript; charset=\"us-ascii\"";

/// A user's MIME document that could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MimeError {
    /// A header line of the document or of a part is not `Name: value`.
    #[error("user data: malformed MIME header line {0:?}")]
    MalformedHeader(String),
    /// The document's `Content-Type` could not be parsed.
    #[error("user data: Content-Type {content_type:?}: {reason}")]
    ContentType {
        /// The header's value.
        content_type: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The document is MIME but not multipart.
    #[error("user data: Content-Type {0:?} is not multipart")]
    NotMultipart(String),
    /// The multipart document names no boundary.
    #[error("user data: Content-Type {0:?} has no boundary")]
    NoBoundary(String),
    /// A part is not closed by a boundary.
    #[error("user data: the part {0} is not closed by a boundary")]
    Unterminated(usize),
}

/// One part of the document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The part's `Content-Type`, as written.
    pub content_type: String,
    /// The part's content.
    pub content: String,
}

impl Entry {
    /// A shell script part.
    pub fn shell_script(content: impl Into<String>) -> Self {
        Self {
            content_type: SHELL_SCRIPT.to_string(),
            content: content.into(),
        }
    }

    fn is_pre_stage(&self) -> bool {
        match parse_media_type(&self.content_type) {
            Ok((media_type, params)) => {
                media_type == "text/x-shellscript"
                    && params.get("stage").map(String::as_str) == Some("pre")
            }
            Err(_) => false,
        }
    }
}

/// The parts of a node's user data, merged from several sources.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CloudInit {
    /// The parts, in the order they were merged.
    pub entries: Vec<Entry>,
}

impl CloudInit {
    /// No parts.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `user_data`: nothing when empty, its parts when it is a MIME document, else one
    /// shell script part.
    pub fn merge(&mut self, user_data: &str) -> Result<(), MimeError> {
        if user_data.is_empty() {
            return Ok(());
        }
        let trimmed = user_data.trim();
        if trimmed.starts_with("MIME-Version:") || trimmed.starts_with("Content-Type:") {
            // Leading blank lines would end the headers before they begin.
            self.entries.extend(parse_archive(user_data.trim_start())?);
        } else {
            self.entries.push(Entry::shell_script(user_data));
        }
        Ok(())
    }

    /// The `stage=pre` shell scripts first, the rest after, each group in merge order.
    pub fn sort(&mut self) {
        let (pre, rest): (Vec<Entry>, Vec<Entry>) = std::mem::take(&mut self.entries)
            .into_iter()
            .partition(Entry::is_pre_stage);
        self.entries = pre.into_iter().chain(rest).collect();
    }

    /// The document, its parts sorted ([`CloudInit::sort`]), not yet base64-encoded.
    pub fn document(&mut self) -> String {
        self.sort();
        let mut out = format!(
            "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"{BOUNDARY}\"\n\n"
        );
        for (i, entry) in self.entries.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            out.push_str(&format!(
                "--{BOUNDARY}\nContent-Type: {}\n\n{}",
                entry.content_type, entry.content
            ));
        }
        out.push_str(&format!("\n--{BOUNDARY}--\n"));
        out.replace('\r', "")
    }

    /// The document, base64-encoded: what goes into ECS's `UserData`.
    pub fn script(&mut self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.document())
    }
}

/// One line and its line end (`\n` or `\r\n`, empty at the end of the text).
fn lines_with_ends(text: &str) -> impl Iterator<Item = (&str, &str)> {
    text.split_inclusive('\n').map(|line| {
        if let Some(l) = line.strip_suffix("\r\n") {
            (l, "\r\n")
        } else if let Some(l) = line.strip_suffix('\n') {
            (l, "\n")
        } else {
            (line, "")
        }
    })
}

/// Whether `line` is a header (`Name: value`) or the continuation of one.
fn is_header_line(line: &str) -> bool {
    line.starts_with([' ', '\t'])
        || line
            .split_once(':')
            .is_some_and(|(name, _)| !name.is_empty() && !name.contains([' ', '\t']))
}

/// Reads a header block (continuation lines folded in) up to its blank line: the headers by
/// lower-case name, first value wins, and the byte offset after the blank line (the text's
/// length when the block runs to the end).
fn read_headers(text: &str) -> Result<(BTreeMap<String, String>, usize), MimeError> {
    let mut headers: BTreeMap<String, String> = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    let mut offset = 0;
    for (line, end) in lines_with_ends(text) {
        offset += line.len() + end.len();
        if line.is_empty() {
            if let Some((k, v)) = current.take() {
                headers.entry(k).or_insert(v);
            }
            return Ok((headers, offset));
        }
        if line.starts_with([' ', '\t']) {
            match &mut current {
                Some((_, v)) => {
                    v.push(' ');
                    v.push_str(line.trim());
                }
                None => return Err(MimeError::MalformedHeader(line.to_string())),
            }
            continue;
        }
        let Some((name, value)) = line.split_once(':').filter(|_| is_header_line(line)) else {
            return Err(MimeError::MalformedHeader(line.to_string()));
        };
        if let Some((k, v)) = current.take() {
            headers.entry(k).or_insert(v);
        }
        current = Some((name.to_ascii_lowercase(), value.trim().to_string()));
    }
    if let Some((k, v)) = current.take() {
        headers.entry(k).or_insert(v);
    }
    Ok((headers, text.len()))
}

/// Whether `line` is the delimiter `--boundary` (`final`: `--boundary--`), trailing spaces and
/// tabs allowed.
fn delimiter(line: &str, boundary: &str) -> Option<bool> {
    let rest = line.strip_prefix("--")?.strip_prefix(boundary)?;
    let (is_final, rest) = match rest.strip_prefix("--") {
        Some(after) => (true, after),
        None => (false, rest),
    };
    rest.chars()
        .all(|c| c == ' ' || c == '\t')
        .then_some(is_final)
}

/// The parts of a MIME multipart document, each with its `Content-Type` and its content (the
/// line end before the next delimiter is the delimiter's, not the content's). The preamble and
/// the epilogue are dropped.
pub fn parse_archive(document: &str) -> Result<Vec<Entry>, MimeError> {
    let (headers, body_start) = read_headers(document)?;
    let content_type = headers.get("content-type").cloned().unwrap_or_default();
    let (media_type, params) =
        parse_media_type(&content_type).map_err(|reason| MimeError::ContentType {
            content_type: content_type.clone(),
            reason,
        })?;
    if !media_type.starts_with("multipart/") {
        return Err(MimeError::NotMultipart(content_type));
    }
    let boundary = match params.get("boundary") {
        Some(b) if !b.is_empty() => b.clone(),
        _ => return Err(MimeError::NoBoundary(content_type)),
    };
    let body = &document[body_start..];

    let mut entries = Vec::new();
    let mut lines = lines_with_ends(body).peekable();
    // The preamble, up to the first delimiter.
    let mut closed = loop {
        match lines.next() {
            None => return Ok(entries),
            Some((line, _)) => {
                if let Some(is_final) = delimiter(line, &boundary) {
                    break is_final;
                }
            }
        }
    };
    while !closed {
        // The part's headers, then its content up to the next delimiter.
        let mut header_text = String::new();
        loop {
            match lines.next() {
                None => return Err(MimeError::Unterminated(entries.len() + 1)),
                Some((line, end)) => {
                    // A line that cannot be a header is content without headers before it: the
                    // part is malformed, whatever follows.
                    if !line.is_empty() && !is_header_line(line) {
                        return Err(MimeError::MalformedHeader(line.to_string()));
                    }
                    header_text.push_str(line);
                    header_text.push_str(end);
                    if line.is_empty() {
                        break;
                    }
                }
            }
        }
        let (part_headers, _) = read_headers(&header_text)?;
        let mut content = String::new();
        let mut last_end = "";
        let is_final = loop {
            match lines.next() {
                None => return Err(MimeError::Unterminated(entries.len() + 1)),
                Some((line, end)) => {
                    if let Some(is_final) = delimiter(line, &boundary) {
                        break is_final;
                    }
                    content.push_str(last_end);
                    content.push_str(line);
                    last_end = end;
                }
            }
        };
        entries.push(Entry {
            content_type: part_headers
                .get("content-type")
                .cloned()
                .unwrap_or_default(),
            content,
        });
        closed = is_final;
    }
    Ok(entries)
}

fn is_token_char(c: char) -> bool {
    c.is_ascii() && c > ' ' && c != '\x7f' && !"()<>@,;:\\\"/[]?=".contains(c)
}

fn consume_token(s: &str) -> (&str, &str) {
    let end = s.find(|c| !is_token_char(c)).unwrap_or(s.len());
    s.split_at(end)
}

/// A parameter's value: a token or a quoted string (`\` escaping the next character).
fn consume_value(s: &str) -> Option<(String, &str)> {
    let Some(quoted) = s.strip_prefix('"') else {
        let (token, rest) = consume_token(s);
        return (!token.is_empty()).then(|| (token.to_string(), rest));
    };
    let mut value = String::new();
    let mut chars = quoted.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((value, &quoted[i + 1..])),
            '\\' => value.push(chars.next()?.1),
            c => value.push(c),
        }
    }
    None
}

/// A media type (`type/subtype`, lower-cased) and its parameters (names lower-cased), as
/// RFC 2045 and Go's `mime.ParseMediaType` read them: `text/x-shellscript"` or a parameter
/// without a value is an error.
pub fn parse_media_type(value: &str) -> Result<(String, BTreeMap<String, String>), String> {
    let (base, mut rest) = match value.find(';') {
        Some(i) => value.split_at(i),
        None => (value, ""),
    };
    let media_type = base.trim().to_ascii_lowercase();
    let (main, after) = consume_token(&media_type);
    if main.is_empty() {
        return Err("no media type".into());
    }
    if !after.is_empty() {
        let Some(sub) = after.strip_prefix('/') else {
            return Err("expected slash after first token".into());
        };
        let (subtype, after) = consume_token(sub);
        if subtype.is_empty() {
            return Err("expected token after slash".into());
        }
        if !after.is_empty() {
            return Err("unexpected content after media subtype".into());
        }
    }
    let mut params = BTreeMap::new();
    loop {
        rest = rest.trim_start_matches([' ', '\t']);
        if rest.is_empty() {
            break;
        }
        let parsed = rest.strip_prefix(';').and_then(|r| {
            let (key, r) = consume_token(r.trim_start_matches([' ', '\t']));
            if key.is_empty() {
                return None;
            }
            let r = r.trim_start_matches([' ', '\t']).strip_prefix('=')?;
            let (value, r) = consume_value(r.trim_start_matches([' ', '\t']))?;
            Some((key.to_ascii_lowercase(), value, r))
        });
        match parsed {
            Some((key, value, r)) => {
                if params.insert(key.clone(), value).is_some() {
                    return Err(format!("duplicate parameter {key:?}"));
                }
                rest = r;
            }
            // A trailing `;` is tolerated.
            None if rest.trim() == ";" => break,
            None => return Err(format!("invalid parameter at {rest:?}")),
        }
    }
    Ok((media_type, params))
}
