//! UTC timestamps as Alibaba writes them (`2023-10-26T10:22:32Z`): in `x-acs-date`, the RPC
//! `Timestamp` and the `Expiration` of temporary credentials. Through jiff, which
//! `k8s-openapi` already builds for Kubernetes' own timestamps.

use k8s_openapi::jiff::Timestamp;

/// `YYYY-MM-DDTHH:MM:SSZ` for seconds since the Unix epoch.
pub fn iso8601(unix_seconds: u64) -> String {
    i64::try_from(unix_seconds)
        .ok()
        .and_then(|s| Timestamp::from_second(s).ok())
        .unwrap_or(Timestamp::MAX)
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Seconds since the Unix epoch of `YYYY-MM-DDTHH:MM:SSZ` (fractional seconds, which some
/// answers carry, are dropped); `None` for anything else.
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
    fn formats_and_parses_alibaba_timestamps() {
        // The V3 signature documentation's example date.
        assert_eq!(iso8601(1_698_315_752), "2023-10-26T10:22:32Z");
        assert_eq!(iso8601(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso8601(1_709_208_000), "2024-02-29T12:00:00Z");
        assert_eq!(parse_iso8601("2023-10-26T10:22:32Z"), Some(1_698_315_752));
        assert_eq!(parse_iso8601("2021-10-20T04:27:09Z"), Some(1_634_704_029));
        assert_eq!(
            parse_iso8601("2024-02-29T12:00:00.000Z"),
            Some(1_709_208_000)
        );
        for t in [0, 951_782_400, 1_709_208_000, 4_102_444_799] {
            assert_eq!(parse_iso8601(&iso8601(t)), Some(t), "{t}");
        }
        for bad in ["soon", "2023-10-26 10:22:32", "2023-13-01T00:00:00Z", ""] {
            assert_eq!(parse_iso8601(bad), None, "{bad}");
        }
    }
}
