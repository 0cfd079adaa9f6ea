//! UTC timestamps as Alibaba writes them (`2023-10-26T10:22:32Z`): in `x-acs-date`, the RPC
//! `Timestamp` and the `Expiration` of temporary credentials. Converted by hand (the civil-date
//! arithmetic is a dozen lines) so the pure part of the crate needs no date library.

const SECONDS_PER_DAY: u64 = 86_400;

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day since 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `YYYY-MM-DDTHH:MM:SSZ` for seconds since the Unix epoch.
pub fn iso8601(unix_seconds: u64) -> String {
    let days = (unix_seconds / SECONDS_PER_DAY) as i64;
    let rest = unix_seconds % SECONDS_PER_DAY;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

/// Seconds since the Unix epoch of `YYYY-MM-DDTHH:MM:SSZ` (fractional seconds, which some
/// answers carry, are dropped); `None` for anything else.
pub fn parse_iso8601(s: &str) -> Option<u64> {
    let s = s.trim().strip_suffix('Z')?;
    let (date, time) = s.split_once('T')?;
    let time = time.split_once('.').map_or(time, |(whole, _)| whole);
    let mut d = date.splitn(3, '-');
    let year: i64 = d.next()?.parse().ok()?;
    let month: u32 = d.next()?.parse().ok()?;
    let day: u32 = d.next()?.parse().ok()?;
    let mut t = time.splitn(3, ':');
    let hour: u64 = t.next()?.parse().ok()?;
    let minute: u64 = t.next()?.parse().ok()?;
    let second: u64 = t.next()?.parse().ok()?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    if second > 60 {
        return None;
    }
    let days = u64::try_from(days_from_civil(year, month, day)).ok()?;
    Some(days * SECONDS_PER_DAY + hour * 3600 + minute * 60 + second)
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
