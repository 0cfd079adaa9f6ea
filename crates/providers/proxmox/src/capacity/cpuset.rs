//! Sets of host CPU ids in the list syntax Proxmox writes a VM's `affinity` in and the node
//! settings file writes NUMA nodes in: `0-3,8,10-11`.

use std::collections::BTreeSet;
use std::fmt;

/// The highest CPU id a list may name. Linux builds for at most 8192 CPUs; the bound keeps a
/// mistyped range (`0-4000000000`) from allocating a set of billions.
pub const MAX_CPU_ID: u32 = 65_535;

/// Why a CPU list does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{input:?} is not a CPU list (such as \"0-3,8\"): {reason}")]
pub struct CpuSetError {
    /// The list as written.
    pub input: String,
    /// What is wrong with it.
    pub reason: String,
}

/// A set of host CPU ids.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct CpuSet(BTreeSet<u32>);

impl CpuSet {
    /// No CPUs.
    pub fn new() -> Self {
        Self::default()
    }

    /// The first `count` CPUs, `0..count`: a host's CPUs when nothing says otherwise.
    pub fn first(count: u32) -> Self {
        Self((0..count).collect())
    }

    /// Parses a list of ids and inclusive ranges separated by commas (`0-3,8,10-11`); blanks
    /// around the parts are allowed, an empty list is the empty set.
    pub fn parse(input: &str) -> Result<Self, CpuSetError> {
        let err = |reason: String| CpuSetError {
            input: input.to_string(),
            reason,
        };
        let id = |text: &str| -> Result<u32, CpuSetError> {
            let id: u32 = text
                .trim()
                .parse()
                .map_err(|_| err(format!("{:?} is not a CPU id", text.trim())))?;
            if id > MAX_CPU_ID {
                return Err(err(format!("CPU {id} is above {MAX_CPU_ID}")));
            }
            Ok(id)
        };
        let mut set = BTreeSet::new();
        if input.trim().is_empty() {
            return Ok(Self(set));
        }
        for part in input.split(',') {
            match part.split_once('-') {
                Some((start, end)) => {
                    let (start, end) = (id(start)?, id(end)?);
                    if start > end {
                        return Err(err(format!("the range {start}-{end} runs backwards")));
                    }
                    set.extend(start..=end);
                }
                None => {
                    set.insert(id(part)?);
                }
            }
        }
        Ok(Self(set))
    }

    /// How many CPUs.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `cpu` is in the set.
    pub fn contains(&self, cpu: u32) -> bool {
        self.0.contains(&cpu)
    }

    /// The ids, ascending.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().copied()
    }

    /// The CPUs in either set.
    pub fn union(&self, other: &CpuSet) -> CpuSet {
        Self(self.0.union(&other.0).copied().collect())
    }

    /// The CPUs in both sets.
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        Self(self.0.intersection(&other.0).copied().collect())
    }

    /// The CPUs of this set not in `other`.
    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        Self(self.0.difference(&other.0).copied().collect())
    }
}

impl FromIterator<u32> for CpuSet {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

/// The canonical list: ascending, runs of two or more as ranges (`0-3,8,10-11`).
impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut ids = self.0.iter().copied().peekable();
        let mut first = true;
        while let Some(start) = ids.next() {
            let mut end = start;
            while ids.peek() == Some(&(end + 1)) {
                end += 1;
                ids.next();
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if end == start {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet[{self}]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_and_print_canonically() {
        let cases = [
            ("", ""),
            ("0", "0"),
            ("0-3", "0-3"),
            ("0-3,8,10-11", "0-3,8,10-11"),
            // Overlaps merge, order does not matter, runs become ranges.
            ("2-4,0-3", "0-4"),
            ("5,4,6", "4-6"),
            (" 0 - 1 , 3 ", "0-1,3"),
            ("7-7", "7"),
        ];
        for (input, canonical) in cases {
            let set = CpuSet::parse(input).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(set.to_string(), canonical, "{input:?}");
        }
    }

    #[test]
    fn malformed_lists_are_refused_with_the_reason() {
        let cases = [
            ("a", "\"a\" is not a CPU id"),
            ("0-", "\"\" is not a CPU id"),
            ("1,,2", "\"\" is not a CPU id"),
            ("-1", "\"\" is not a CPU id"),
            ("4-2", "the range 4-2 runs backwards"),
            ("0-4000000000", "CPU 4000000000 is above 65535"),
        ];
        for (input, reason) in cases {
            let e = CpuSet::parse(input).unwrap_err();
            assert_eq!(e.reason, reason, "{input:?}");
            assert_eq!(e.input, input);
        }
    }

    #[test]
    fn set_operations() {
        let a = CpuSet::parse("0-5").unwrap();
        let b = CpuSet::parse("4-7").unwrap();
        assert_eq!(a.union(&b).to_string(), "0-7");
        assert_eq!(a.intersection(&b).to_string(), "4-5");
        assert_eq!(a.difference(&b).to_string(), "0-3");
        assert_eq!(CpuSet::first(4).to_string(), "0-3");
        assert!(CpuSet::first(0).is_empty());
    }
}
