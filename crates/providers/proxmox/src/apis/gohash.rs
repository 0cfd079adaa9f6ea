//! The hash upstream computes with `mitchellh/hashstructure/v2` (format 2, lists as sets, zero
//! values skipped, a nil pointer as its zero value), reproduced number for number.
//!
//! Unlike the NodeClass hash (stamped beside a hash version, so a different number re-stamps
//! rather than drifts), upstream stores these numbers where no version travels with them: a
//! managed template's hash in the Proxmox VM template's description (a template whose hash
//! differs is deleted and made again) and in every node's image-id label (a node whose label
//! differs has drifted), and the source URL's hash in the name of the downloaded image. A cluster
//! moved from upstream keeps its templates, images and nodes only if these numbers are the same.
//!
//! The algorithm, as the library walks a Go value:
//! * a string is the FNV-1 (not FNV-1a) 64-bit hash of its bytes; an integer or bool that of its
//!   little-endian bytes at its Go width (`int` as 8 bytes, `uint16` 2, `bool` 1);
//! * a struct starts from its type's name; each field that is not zero is mixed in as the hash
//!   of (its Go name's hash, its value's hash), XORed into the running value, which is then
//!   re-hashed: so field order matters, and a field's Go name (not its JSON name) is hashed;
//! * a slice is the XOR of its items' hashes (as a set: order does not matter, and an item
//!   listed twice cancels out, as upstream's does);
//! * a set pointer is hashed as what it points to, even when that is a zero value.

/// FNV-1 64-bit offset basis.
const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1 64-bit prime.
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1 (multiply, then XOR) of `bytes`, as Go's `hash/fnv.New64`.
fn fnv1(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(OFFSET, |h, b| h.wrapping_mul(PRIME) ^ u64::from(*b))
}

/// The library's hash of a pair in order.
fn ordered(a: u64, b: u64) -> u64 {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&a.to_le_bytes());
    bytes[8..].copy_from_slice(&b.to_le_bytes());
    fnv1(&bytes)
}

/// A Go value, as much of Go's type system as upstream's API types use.
#[derive(Clone, Debug)]
pub(crate) enum Go<'a> {
    /// A `string`.
    Str(&'a str),
    /// An `int` or `int64`.
    Int(i64),
    /// A `uint16`.
    Uint16(u16),
    /// A `bool`.
    Bool(bool),
    /// A pointer field: nil (`None`) is zero and skipped; a set pointer is hashed as its
    /// target, even a zero one (`onBoot: false` is not unset).
    Ptr(Option<Box<Go<'a>>>),
    /// A slice; empty is taken as nil (JSON cannot tell the two apart once read).
    Slice(Vec<Go<'a>>),
    /// A struct: its Go type name and its exported fields in declaration order, by Go name,
    /// fields tagged `hash:"ignore"` left out.
    Struct(&'static str, Vec<(&'static str, Go<'a>)>),
}

impl<'a> Go<'a> {
    /// A pointer to `value`, or nil.
    pub(crate) fn ptr(value: Option<Go<'a>>) -> Self {
        Go::Ptr(value.map(Box::new))
    }

    /// A pointer to a bool, nil when `None`.
    pub(crate) fn opt_bool(value: Option<bool>) -> Self {
        Go::ptr(value.map(Go::Bool))
    }

    /// A non-pointer string field that Rust holds as an `Option` (unset is Go's `""`).
    pub(crate) fn str_or_empty(value: &'a Option<String>) -> Self {
        Go::Str(value.as_deref().unwrap_or_default())
    }

    /// A `[]string`.
    pub(crate) fn strings(values: &'a [String]) -> Self {
        Go::Slice(values.iter().map(|s| Go::Str(s)).collect())
    }

    /// Go's `reflect.Value.IsZero`, which the library's zero-skipping asks of each field.
    fn is_zero(&self) -> bool {
        match self {
            Go::Str(s) => s.is_empty(),
            Go::Int(n) => *n == 0,
            Go::Uint16(n) => *n == 0,
            Go::Bool(b) => !b,
            Go::Ptr(target) => target.is_none(),
            Go::Slice(items) => items.is_empty(),
            Go::Struct(_, fields) => fields.iter().all(|(_, v)| v.is_zero()),
        }
    }

    /// The library's hash of this value.
    pub(crate) fn hash(&self) -> u64 {
        match self {
            Go::Str(s) => fnv1(s.as_bytes()),
            Go::Int(n) => fnv1(&n.to_le_bytes()),
            Go::Uint16(n) => fnv1(&n.to_le_bytes()),
            Go::Bool(b) => fnv1(&[u8::from(*b)]),
            // A nil pointer is only ever a field here, and a zero field is skipped before it
            // would be hashed.
            Go::Ptr(target) => target.as_ref().map_or(OFFSET, |t| t.hash()),
            Go::Slice(items) => items.iter().fold(0, |h, item| h ^ item.hash()),
            Go::Struct(name, fields) => fields.iter().filter(|(_, value)| !value.is_zero()).fold(
                fnv1(name.as_bytes()),
                |h, (field, value)| {
                    let mixed = h ^ ordered(fnv1(field.as_bytes()), value.hash());
                    fnv1(&mixed.to_le_bytes())
                },
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Go's `hash/fnv` test vectors for FNV-1 64.
    #[test]
    fn fnv1_is_gos_fnv1() {
        for (input, expected) in [
            ("", 0xcbf2_9ce4_8422_2325u64),
            ("a", 0xaf63_bd4c_8601_b7be),
            ("ab", 0x0832_6707_b4eb_37b8),
            ("abc", 0xd8dc_ca18_6baf_adcb),
        ] {
            assert_eq!(fnv1(input.as_bytes()), expected, "{input:?}");
        }
    }

    #[test]
    fn zero_fields_are_skipped_but_set_pointers_are_not() {
        let unset = Go::Struct("T", vec![("A", Go::Str("")), ("B", Go::ptr(None))]);
        let empty = Go::Struct("T", vec![]);
        assert_eq!(unset.hash(), empty.hash());
        let set_false = Go::Struct("T", vec![("B", Go::opt_bool(Some(false)))]);
        assert_ne!(set_false.hash(), empty.hash());
        let plain_false = Go::Struct("T", vec![("B", Go::Bool(false))]);
        assert_eq!(plain_false.hash(), empty.hash());
    }

    #[test]
    fn slices_are_sets_and_fields_are_ordered() {
        let ab = Go::Slice(vec![Go::Str("a"), Go::Str("b")]);
        let ba = Go::Slice(vec![Go::Str("b"), Go::Str("a")]);
        assert_eq!(ab.hash(), ba.hash());
        // An item listed twice cancels itself out, as upstream's XOR does.
        let aab = Go::Slice(vec![Go::Str("a"), Go::Str("a"), Go::Str("b")]);
        assert_eq!(aab.hash(), Go::Slice(vec![Go::Str("b")]).hash());
        let xy = Go::Struct("T", vec![("X", Go::Str("1")), ("Y", Go::Str("2"))]);
        let yx = Go::Struct("T", vec![("Y", Go::Str("2")), ("X", Go::Str("1"))]);
        assert_ne!(xy.hash(), yx.hash());
        // The type's name and the fields' Go names are part of the hash.
        let renamed = Go::Struct("U", vec![("X", Go::Str("1")), ("Y", Go::Str("2"))]);
        assert_ne!(xy.hash(), renamed.hash());
    }

    #[test]
    fn numbers_hash_at_their_go_width() {
        assert_ne!(Go::Int(1500).hash(), Go::Uint16(1500).hash());
        assert_eq!(Go::Uint16(1500).hash(), fnv1(&[0xdc, 0x05]));
    }
}
