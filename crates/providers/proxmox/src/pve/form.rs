//! What the Proxmox VE API is sent: parameters form-encoded (`application/x-www-form-urlencoded`
//! bodies for writes, the query string for reads and deletes), path segments escaped, and the
//! one multipart body (`POST …/storage/{storage}/upload`).
//!
//! Everything but RFC 3986's unreserved characters is percent-encoded, a space as `%20`: PVE's
//! decoder takes that in a body and a query alike, while some of its parameter checks (the
//! `urlencoded` format of `sshkeys`) refuse a `+` for a space.

use std::fmt::Write as _;

/// Parameters of a call, in order; a name may repeat.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Params(Vec<(String, String)>);

impl std::fmt::Debug for Params {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Names only: values can be passwords, cloud-init data, descriptions.
        f.debug_list()
            .entries(self.0.iter().map(|(k, _)| k))
            .finish()
    }
}

impl Params {
    /// No parameters.
    pub fn new() -> Self {
        Self::default()
    }

    /// With `name=value`.
    pub fn set(mut self, name: &str, value: impl ToString) -> Self {
        self.push(name, value);
        self
    }

    /// With `name=value` when there is a value.
    pub fn opt(self, name: &str, value: Option<impl ToString>) -> Self {
        match value {
            Some(v) => self.set(name, v),
            None => self,
        }
    }

    /// With `name=value` when the value is not empty.
    pub fn non_empty(self, name: &str, value: &str) -> Self {
        if value.is_empty() {
            self
        } else {
            self.set(name, value)
        }
    }

    /// With `name=1` or `name=0`, PVE's booleans.
    pub fn flag(self, name: &str, value: bool) -> Self {
        self.set(name, if value { "1" } else { "0" })
    }

    /// Adds `name=value`.
    pub fn push(&mut self, name: &str, value: impl ToString) {
        self.0.push((name.to_string(), value.to_string()));
    }

    /// The value of the first `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The pairs, in order.
    pub fn pairs(&self) -> &[(String, String)] {
        &self.0
    }

    /// No parameters at all.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `a=1&b=x%20y`, for a body or a query string.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                out.push('&');
            }
            out.push_str(&encode_component(k));
            out.push('=');
            out.push_str(&encode_component(v));
        }
        out
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Params {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Self(
            iter.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }
}

fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// `text` percent-encoded but for the unreserved characters.
pub fn encode_component(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if unreserved(b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// One path segment (a node, a storage, a volume id, a UPID): what may stand in a segment as it
/// is (`:`, `@`, `!` of volume ids and UPIDs), the rest percent-encoded, `/` included, so a
/// volume id `local:iso/a.iso` stays one segment.
pub fn encode_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if unreserved(b)
            || matches!(
                b,
                b':' | b'@' | b'!' | b'$' | b'\'' | b'*' | b',' | b';' | b'='
            )
        {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// A `multipart/form-data` body: its `Content-Type` (with the boundary) and its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Multipart {
    /// `multipart/form-data; boundary=…`.
    pub content_type: String,
    /// The body.
    pub body: Vec<u8>,
}

/// Why a multipart body cannot be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("upload {field}: {reason}")]
pub struct MultipartError {
    /// The field (or file name) at fault.
    pub field: String,
    /// What is wrong.
    pub reason: &'static str,
}

/// A name that can stand in a quoted `Content-Disposition` parameter.
fn quotable(field: &str) -> Result<(), MultipartError> {
    if field.is_empty()
        || field
            .bytes()
            .any(|b| b == b'"' || b == b'\\' || b.is_ascii_control())
    {
        return Err(MultipartError {
            field: field.to_string(),
            reason: "must be non-empty, without quotes, backslashes or control characters",
        });
    }
    Ok(())
}

/// Boundaries to try: random, so the chance that one occurs in the data is nil, yet checked.
fn candidates(seed: u64) -> impl Iterator<Item = String> {
    use std::hash::{BuildHasher, Hasher};
    (0u64..).map(move |n| {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(seed);
        hasher.write_u64(n);
        format!("karpenter-rs-{:016x}", hasher.finish())
    })
}

/// The first candidate found nowhere in `parts`.
fn pick_boundary(parts: &[&[u8]], mut candidates: impl Iterator<Item = String>) -> String {
    loop {
        let candidate = candidates.next().expect("endless candidates");
        if !parts.iter().any(|p| {
            p.windows(candidate.len())
                .any(|w| w == candidate.as_bytes())
        }) {
            return candidate;
        }
    }
}

/// The body PVE's upload takes: the text `fields` (`content=iso`), then the file as the part
/// named `filename` (PVE's name for it) with its file name.
pub fn multipart(
    fields: &[(&str, &str)],
    filename: &str,
    data: &[u8],
) -> Result<Multipart, MultipartError> {
    for (name, _) in fields {
        quotable(name)?;
    }
    quotable(filename)?;
    let mut parts: Vec<&[u8]> = fields.iter().map(|(_, v)| v.as_bytes()).collect();
    parts.push(data);
    let boundary = pick_boundary(&parts, candidates(data.len() as u64));
    let mut body = Vec::with_capacity(data.len() + 512);
    for (name, value) in fields {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"filename\"; filename=\"{filename}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(data);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    Ok(Multipart {
        content_type: format!("multipart/form-data; boundary={boundary}"),
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_escape_all_but_unreserved_with_spaces_as_percent_20() {
        let p = Params::new()
            .set("name", "node-a_1.x~")
            .set("description", "Karpenter managed instance, class=default")
            .set("sshkeys", "ssh-ed25519 AAA+/= me@host")
            .flag("full", true)
            .flag("purge", false)
            .opt("pool", None::<&str>)
            .opt("storage", Some("local-lvm"))
            .non_empty("target", "")
            .set("tags", "k8s;karpenter")
            .set("net0", "virtio=AA:BB,bridge=vmbr0")
            .set("unicode", "é");
        assert_eq!(
            p.encode(),
            "name=node-a_1.x~\
             &description=Karpenter%20managed%20instance%2C%20class%3Ddefault\
             &sshkeys=ssh-ed25519%20AAA%2B%2F%3D%20me%40host\
             &full=1&purge=0&storage=local-lvm\
             &tags=k8s%3Bkarpenter\
             &net0=virtio%3DAA%3ABB%2Cbridge%3Dvmbr0\
             &unicode=%C3%A9"
        );
        assert_eq!(p.get("storage"), Some("local-lvm"));
        assert_eq!(p.get("pool"), None);
        assert_eq!(Params::new().encode(), "");
        // Round trip through a standard decoder.
        let decoded: Vec<(String, String)> = form_urlencoded::parse(p.encode().as_bytes())
            .into_owned()
            .collect();
        assert_eq!(decoded, p.pairs());
    }

    #[test]
    fn debug_output_names_parameters_without_their_values() {
        let p = Params::new()
            .set("username", "root@pam")
            .set("password", "hunter2");
        assert_eq!(format!("{p:?}"), r#"["username", "password"]"#);
    }

    #[test]
    fn segments_keep_volume_and_task_ids_whole() {
        assert_eq!(
            encode_segment("local:iso/user-data-100.iso"),
            "local:iso%2Fuser-data-100.iso"
        );
        assert_eq!(
            encode_segment("UPID:pve1:0001:0002:0003:qmclone:9000:k@pve!tok:"),
            "UPID:pve1:0001:0002:0003:qmclone:9000:k@pve!tok:"
        );
        assert_eq!(encode_segment("a b?#%"), "a%20b%3F%23%25");
    }

    #[test]
    fn the_upload_body_has_the_fields_then_the_file_named_filename() {
        let m = multipart(
            &[("content", "iso")],
            "user-data-100.iso",
            b"\x00ISO\r\nbytes",
        )
        .unwrap();
        let boundary = m
            .content_type
            .strip_prefix("multipart/form-data; boundary=")
            .unwrap();
        let expected = [
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"content\"\r\n\r\niso\r\n").into_bytes(),
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"filename\"; filename=\"user-data-100.iso\"\r\nContent-Type: application/octet-stream\r\n\r\n").into_bytes(),
            b"\x00ISO\r\nbytes".to_vec(),
            format!("\r\n--{boundary}--\r\n").into_bytes(),
        ]
        .concat();
        assert_eq!(m.body, expected);
    }

    #[test]
    fn the_boundary_is_never_in_the_data() {
        let taken = ["b-1".to_string(), "b-2".to_string(), "b-3".to_string()];
        let picked = pick_boundary(&[b"iso", b"...b-1...", b"b-2"], taken.into_iter());
        assert_eq!(picked, "b-3");
        let random: Vec<String> = candidates(7).take(2).collect();
        assert!(random[0].starts_with("karpenter-rs-") && random[0] != random[1]);
    }

    #[test]
    fn names_that_would_break_the_header_are_refused() {
        for name in ["", "a\"b.iso", "a\r\nb", "a\\b"] {
            let err = multipart(&[], name, b"x").unwrap_err();
            assert_eq!(err.field, name);
        }
        assert!(multipart(&[("con\"tent", "iso")], "a.iso", b"x").is_err());
    }
}
