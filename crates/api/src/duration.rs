//! Go-style durations (`"720h"`, `"1m30s"`, `"Never"`) as the Kubernetes API writes them.

use std::fmt;
use std::time::Duration as StdDuration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a duration string could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: {reason}")]
pub struct ParseDurationError {
    input: String,
    reason: &'static str,
}

const UNITS: [(&str, u128); 8] = [
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("μs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Parses a duration as Go's `time.ParseDuration` does (`"1h30m"`, `"1.5h"`, `"300ms"`, `"0"`),
/// rejecting negative values, which no karpenter field accepts.
pub fn parse_go_duration(input: &str) -> Result<StdDuration, ParseDurationError> {
    let err = |reason| ParseDurationError {
        input: input.to_string(),
        reason,
    };
    let mut s = input;
    if let Some(rest) = s.strip_prefix('+') {
        s = rest;
    } else if s.starts_with('-') {
        return Err(err("negative durations are not allowed"));
    }
    if s == "0" {
        return Ok(StdDuration::ZERO);
    }
    if s.is_empty() {
        return Err(err("empty"));
    }
    let mut total_nanos: u128 = 0;
    while !s.is_empty() {
        let number_len = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| err("missing unit (use ns, us, ms, s, m or h)"))?;
        let (number, rest) = s.split_at(number_len);
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return Err(err("expected a number before the unit"));
        }
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let (unit, rest) = rest.split_at(unit_len);
        let scale = UNITS
            .iter()
            .find(|(name, _)| *name == unit)
            .map(|(_, scale)| *scale)
            .ok_or_else(|| err("unknown unit (use ns, us, ms, s, m or h)"))?;
        let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| err("number out of range"))?
        };
        let mut nanos = whole
            .checked_mul(scale)
            .ok_or_else(|| err("out of range"))?;
        let mut place = scale;
        for digit in frac.bytes() {
            place /= 10;
            nanos += u128::from(digit - b'0') * place;
        }
        total_nanos = total_nanos
            .checked_add(nanos)
            .ok_or_else(|| err("out of range"))?;
        s = rest;
    }
    let nanos = u64::try_from(total_nanos).map_err(|_| err("out of range"))?;
    Ok(StdDuration::from_nanos(nanos))
}

/// Formats a duration as Go's `time.Duration.String` does (`"720h0m0s"`, `"1m30s"`, `"300ms"`).
pub fn format_go_duration(d: StdDuration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".into();
    }
    if nanos < 1_000_000_000 {
        let (scale, unit) = match nanos {
            n if n < 1_000 => (1, "ns"),
            n if n < 1_000_000 => (1_000, "µs"),
            _ => (1_000_000, "ms"),
        };
        return format!("{}{unit}", decimal(nanos, scale));
    }
    let total_secs = d.as_secs();
    let (hours, minutes) = (total_secs / 3600, (total_secs / 60) % 60);
    let seconds = decimal(
        u128::from(total_secs % 60) * 1_000_000_000 + u128::from(d.subsec_nanos()),
        1_000_000_000,
    );
    match (hours, minutes) {
        (0, 0) => format!("{seconds}s"),
        (0, m) => format!("{m}m{seconds}s"),
        (h, m) => format!("{h}h{m}m{seconds}s"),
    }
}

fn decimal(value: u128, scale: u128) -> String {
    let (whole, frac) = (value / scale, value % scale);
    if frac == 0 {
        return whole.to_string();
    }
    let width = scale.ilog10() as usize;
    let frac = format!("{frac:0width$}");
    format!("{whole}.{}", frac.trim_end_matches('0'))
}

/// A duration written as a Go duration string (`metav1.Duration`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(pub StdDuration);

impl Duration {
    /// A duration of `secs` seconds.
    pub const fn from_secs(secs: u64) -> Self {
        Self(StdDuration::from_secs(secs))
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_go_duration(self.0))
    }
}

impl std::str::FromStr for Duration {
    type Err = ParseDurationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_go_duration(s).map(Self)
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The word that turns a [`NillableDuration`] off.
pub const NEVER: &str = "Never";

/// A duration that may be `"Never"` (represented as `None`), as `expireAfter` and
/// `consolidateAfter` are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NillableDuration(pub Option<StdDuration>);

impl NillableDuration {
    /// The `"Never"` value.
    pub const NEVER: Self = Self(None);

    /// A duration of `secs` seconds.
    pub const fn from_secs(secs: u64) -> Self {
        Self(Some(StdDuration::from_secs(secs)))
    }
}

impl fmt::Display for NillableDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(d) => f.write_str(&format_go_duration(d)),
            None => f.write_str(NEVER),
        }
    }
}

impl std::str::FromStr for NillableDuration {
    type Err = ParseDurationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == NEVER {
            Ok(Self(None))
        } else {
            parse_go_duration(s).map(|d| Self(Some(d)))
        }
    }
}

impl Serialize for NillableDuration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for NillableDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        let cases: &[(&str, u64)] = &[
            ("0", 0),
            ("0s", 0),
            ("30s", 30_000_000_000),
            ("720h", 720 * 3_600_000_000_000),
            ("1h30m5s", 5_405_000_000_000),
            ("1.5h", 5_400_000_000_000),
            ("300ms", 300_000_000),
            ("1m30s", 90_000_000_000),
            ("+5s", 5_000_000_000),
            (".5s", 500_000_000),
            ("2h20m", 8_400_000_000_000),
            ("10us", 10_000),
            ("7ns", 7),
        ];
        for (input, nanos) in cases {
            assert_eq!(
                parse_go_duration(input),
                Ok(StdDuration::from_nanos(*nanos)),
                "{input}"
            );
        }
    }

    #[test]
    fn rejects_bad_durations() {
        for input in [
            "", "1hr", "-1s", "10", "h", "1.2.3s", "FooNever", "1d", "s1",
        ] {
            assert!(parse_go_duration(input).is_err(), "{input} should fail");
        }
    }

    #[test]
    fn formats_like_go() {
        let cases: &[(u64, &str)] = &[
            (0, "0s"),
            (30_000_000_000, "30s"),
            (720 * 3_600_000_000_000, "720h0m0s"),
            (90_000_000_000, "1m30s"),
            (1_500_000_000, "1.5s"),
            (300_000_000, "300ms"),
            (1_500, "1.5µs"),
        ];
        for (nanos, text) in cases {
            assert_eq!(format_go_duration(StdDuration::from_nanos(*nanos)), *text);
        }
    }

    #[test]
    fn nillable_never_round_trips() {
        let never: NillableDuration = "Never".parse().unwrap();
        assert_eq!(never, NillableDuration::NEVER);
        assert_eq!(never.to_string(), "Never");
        let d: NillableDuration = "1m".parse().unwrap();
        assert_eq!(d, NillableDuration::from_secs(60));
        assert_eq!(
            serde_json::to_string(&d).unwrap(),
            "\"1m0s\"",
            "serialized as Go does"
        );
    }
}
