//! UTC timestamps as Huawei Cloud writes them: the signature's `X-Sdk-Date`
//! (`20060102T150405Z`, no separators) and the `expires_at` of temporary credentials
//! (`2006-01-02T15:04:05Z`, IAM adds microseconds: `…:05.123000Z`). Through jiff, which
//! `k8s-openapi` already builds.

use k8s_openapi::jiff::Timestamp;

fn timestamp(unix_seconds: u64) -> Timestamp {
    i64::try_from(unix_seconds)
        .ok()
        .and_then(|s| Timestamp::from_second(s).ok())
        .unwrap_or(Timestamp::MAX)
}

/// `YYYYMMDDTHHMMSSZ` for seconds since the Unix epoch.
pub fn sdk_date(unix_seconds: u64) -> String {
    timestamp(unix_seconds)
        .strftime("%Y%m%dT%H%M%SZ")
        .to_string()
}

/// Seconds since the Unix epoch of a `YYYYMMDDTHHMMSSZ` date; `None` for anything else.
pub fn parse_sdk_date(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    if b.len() != 16 || b[8] != b'T' || b[15] != b'Z' || !digits(0..8) || !digits(9..15) {
        return None;
    }
    // Rewritten in the extended form jiff parses, which also checks the calendar.
    let extended = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &s[0..4],
        &s[4..6],
        &s[6..8],
        &s[9..11],
        &s[11..13],
        &s[13..15]
    );
    parse_iso8601(&extended)
}

/// Seconds since the Unix epoch of `YYYY-MM-DDTHH:MM:SS[.frac]Z` (the fraction is dropped);
/// `None` for anything else.
pub fn parse_iso8601(s: &str) -> Option<u64> {
    let s = s.trim();
    if !s.ends_with('Z') || !s.contains('T') {
        return None;
    }
    u64::try_from(s.parse::<Timestamp>().ok()?.as_second()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sdk_dates_both_ways() {
        // The signer tests' date, Go's reference time.
        assert_eq!(sdk_date(1_136_214_245), "20060102T150405Z");
        assert_eq!(parse_sdk_date("20060102T150405Z"), Some(1_136_214_245));
        assert_eq!(sdk_date(0), "19700101T000000Z");
        for t in [0, 951_782_400, 1_709_208_000, 4_102_444_799] {
            assert_eq!(parse_sdk_date(&sdk_date(t)), Some(t), "{t}");
        }
        for bad in [
            "",
            "2006-01-02T15:04:05Z",
            "20060102T150405",
            "20061302T150405Z",
            "2006010xT150405Z",
            "20060102 150405Z",
        ] {
            assert_eq!(parse_sdk_date(bad), None, "{bad}");
        }
    }

    #[test]
    fn expiry_times_with_and_without_fractions() {
        assert_eq!(parse_iso8601("2006-01-02T15:04:05Z"), Some(1_136_214_245));
        // IAM's securitytokens answer carries microseconds.
        assert_eq!(
            parse_iso8601("2006-01-02T15:04:05.587000Z"),
            Some(1_136_214_245)
        );
        for bad in [
            "soon",
            "2006-01-02 15:04:05",
            "2006-01-02T15:04:05+08:00",
            "",
        ] {
            assert_eq!(parse_iso8601(bad), None, "{bad}");
        }
    }
}
