//! Five-field cron schedules for disruption budgets, evaluated in UTC with the semantics of
//! the cron library upstream uses (robfig/cron `ParseStandard`): names for months and days,
//! ranges, steps, lists, `@daily`-style descriptors, and the rule that day-of-month and
//! day-of-week are OR-ed when both are restricted.

use std::fmt;

/// Why a schedule could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid cron schedule {input:?}: {reason}")]
pub struct CronError {
    input: String,
    reason: String,
}

/// A parsed schedule: one bit set per allowed value of each field.
#[derive(Clone, PartialEq, Eq)]
pub struct Schedule {
    minutes: u64,
    hours: u32,
    days_of_month: u32,
    months: u16,
    days_of_week: u8,
    /// Day-of-month or day-of-week was `*`/`?`: then both must match, not either.
    day_star: bool,
    source: String,
}

impl fmt::Debug for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Schedule({:?})", self.source)
    }
}

struct Field {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const MINUTE: Field = Field {
    name: "minute",
    min: 0,
    max: 59,
    names: &[],
};
const HOUR: Field = Field {
    name: "hour",
    min: 0,
    max: 23,
    names: &[],
};
const DAY_OF_MONTH: Field = Field {
    name: "day of month",
    min: 1,
    max: 31,
    names: &[],
};
const MONTH: Field = Field {
    name: "month",
    min: 1,
    max: 12,
    names: &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
};
const DAY_OF_WEEK: Field = Field {
    name: "day of week",
    min: 0,
    max: 6,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
};

/// The bits of one field, and whether it was a bare `*`/`?`.
fn parse_field(expr: &str, field: &Field) -> Result<(u64, bool), String> {
    let mut bits = 0u64;
    let mut star = false;
    for part in expr.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((range, step)) => {
                let step: u32 = step
                    .parse()
                    .map_err(|_| format!("{}: bad step {step:?}", field.name))?;
                if step == 0 {
                    return Err(format!("{}: step must be positive", field.name));
                }
                (range, Some(step))
            }
            None => (part, None),
        };
        let (start, end) = if range == "*" || range == "?" {
            star = step.is_none() && expr.split(',').count() == 1;
            (field.min, field.max)
        } else if let Some((a, b)) = range.split_once('-') {
            (value(a, field)?, value(b, field)?)
        } else {
            let start = value(range, field)?;
            (start, if step.is_some() { field.max } else { start })
        };
        if start > end {
            return Err(format!(
                "{}: beginning of range ({start}) beyond end of range ({end})",
                field.name
            ));
        }
        let step = step.unwrap_or(1);
        bits |= (start..=end)
            .step_by(step as usize)
            .fold(0u64, |acc, v| acc | 1 << v);
    }
    Ok((bits, star))
}

fn value(token: &str, field: &Field) -> Result<u32, String> {
    let lower = token.to_ascii_lowercase();
    let v = match field.names.iter().position(|n| *n == lower) {
        Some(i) => i as u32 + field.min,
        None => token
            .parse()
            .map_err(|_| format!("{}: {token:?} is not a number or a name", field.name))?,
    };
    if v < field.min || v > field.max {
        return Err(format!(
            "{}: {v} is outside {}-{}",
            field.name, field.min, field.max
        ));
    }
    Ok(v)
}

impl Schedule {
    /// Parses a five-field schedule or one of `@yearly`, `@annually`, `@monthly`, `@weekly`,
    /// `@daily`, `@midnight`, `@hourly`.
    pub fn parse(input: &str) -> Result<Self, CronError> {
        let err = |reason: String| CronError {
            input: input.to_string(),
            reason,
        };
        let expanded = match input.trim() {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            other if other.starts_with('@') => {
                return Err(err(format!("unrecognized descriptor {other:?}")));
            }
            other => other,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(err(format!(
                "expected 5 fields (minute hour day-of-month month day-of-week), found {}",
                fields.len()
            )));
        }
        let (minutes, _) = parse_field(fields[0], &MINUTE).map_err(err)?;
        let (hours, _) = parse_field(fields[1], &HOUR).map_err(err)?;
        let (dom, dom_star) = parse_field(fields[2], &DAY_OF_MONTH).map_err(err)?;
        let (months, _) = parse_field(fields[3], &MONTH).map_err(err)?;
        let (dow, dow_star) = parse_field(fields[4], &DAY_OF_WEEK).map_err(err)?;
        Ok(Self {
            minutes,
            hours: hours as u32,
            days_of_month: dom as u32,
            months: months as u16,
            days_of_week: dow as u8,
            day_star: dom_star || dow_star,
            source: input.to_string(),
        })
    }

    fn day_matches(&self, day_of_month: u32, day_of_week: u32) -> bool {
        let dom = self.days_of_month & (1 << day_of_month) != 0;
        let dow = self.days_of_week & (1 << day_of_week) != 0;
        if self.day_star {
            dom && dow
        } else {
            dom || dow
        }
    }

    /// The first time the schedule fires strictly after `after` (seconds since the Unix
    /// epoch, UTC), or `None` when it never fires within five years.
    pub fn next_after(&self, after: i64) -> Option<i64> {
        const MINUTE_SECS: i64 = 60;
        const DAY_SECS: i64 = 86_400;
        let mut t = (after + 1).div_euclid(MINUTE_SECS) * MINUTE_SECS;
        if t <= after {
            t += MINUTE_SECS;
        }
        let limit = after + 5 * 366 * DAY_SECS;
        while t <= limit {
            let days = t.div_euclid(DAY_SECS);
            let (year, month, day) = civil_from_days(days);
            if self.months & (1 << month) == 0 {
                let (y, m) = if month == 12 {
                    (year + 1, 1)
                } else {
                    (year, month + 1)
                };
                t = days_from_civil(y, m, 1) * DAY_SECS;
                continue;
            }
            let weekday = (days + 4).rem_euclid(7) as u32;
            if !self.day_matches(day, weekday) {
                t = (days + 1) * DAY_SECS;
                continue;
            }
            let second_of_day = t - days * DAY_SECS;
            let hour = (second_of_day / 3600) as u32;
            if self.hours & (1 << hour) == 0 {
                t = days * DAY_SECS + i64::from(hour + 1) * 3600;
                continue;
            }
            let minute = ((second_of_day % 3600) / 60) as u32;
            if self.minutes & (1 << minute) == 0 {
                t += MINUTE_SECS;
                continue;
            }
            return Some(t);
        }
        None
    }
}

/// Days since 1970-01-01 for a proleptic Gregorian date (Hinnant's algorithm).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day number (inverse of [`days_from_civil`]).
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Seconds since the epoch for a UTC date and time.
    fn at(year: i64, month: u32, day: u32, hour: i64, minute: i64) -> i64 {
        days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60
    }

    #[test]
    fn calendar_round_trips() {
        for days in [-1000, 0, 59, 365, 11_016, 20_000, 50_000] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(
            days_from_civil(2024, 2, 29) + 1,
            days_from_civil(2024, 3, 1)
        );
    }

    #[test]
    fn parses_what_upstream_accepts() {
        for ok in [
            "* * * * *",
            "0 9 * * mon-fri",
            "0 22 * * sat,sun",
            "*/15 * * * *",
            "0 0 1 JAN *",
            "5/10 * * * *",
            "0 0 ? * MON",
            "@annually",
            "@yearly",
            "@monthly",
            "@weekly",
            "@daily",
            "@midnight",
            "@hourly",
        ] {
            assert!(Schedule::parse(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn rejects_what_upstream_rejects() {
        for bad in [
            "*",
            "* * * * ",
            "61 * * * *",
            "* 24 * * *",
            "* * 0 * *",
            "* * * 13 *",
            "* * * * 7",
            "5-1 * * * *",
            "*/0 * * * *",
            "* * * * funday",
            "@every 5m",
            "* * * * * *",
        ] {
            assert!(Schedule::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn next_occurrences() {
        let weekdays_9am = Schedule::parse("0 9 * * mon-fri").unwrap();
        // 2024-06-01 is a Saturday: the next weekday 09:00 is Monday the 3rd.
        assert_eq!(
            weekdays_9am.next_after(at(2024, 6, 1, 12, 0)),
            Some(at(2024, 6, 3, 9, 0))
        );
        // Strictly after: firing at exactly 09:00 moves on to the next day.
        assert_eq!(
            weekdays_9am.next_after(at(2024, 6, 3, 9, 0)),
            Some(at(2024, 6, 4, 9, 0))
        );
        let every_minute = Schedule::parse("* * * * *").unwrap();
        assert_eq!(
            every_minute.next_after(at(2024, 6, 3, 9, 0) + 30),
            Some(at(2024, 6, 3, 9, 1))
        );
        let yearly = Schedule::parse("@yearly").unwrap();
        assert_eq!(
            yearly.next_after(at(2024, 3, 1, 0, 0)),
            Some(at(2025, 1, 1, 0, 0))
        );
        let leap_day = Schedule::parse("0 0 29 2 *").unwrap();
        assert_eq!(
            leap_day.next_after(at(2025, 1, 1, 0, 0)),
            Some(at(2028, 2, 29, 0, 0))
        );
    }

    #[test]
    fn restricted_day_fields_are_ored() {
        // The 13th of the month OR any Friday.
        let s = Schedule::parse("0 0 13 * fri").unwrap();
        // 2024-09-01 is a Sunday; Friday the 6th comes before the 13th.
        assert_eq!(
            s.next_after(at(2024, 9, 1, 0, 0)),
            Some(at(2024, 9, 6, 0, 0))
        );
        assert_eq!(
            s.next_after(at(2024, 9, 11, 0, 0)),
            Some(at(2024, 9, 13, 0, 0))
        );
        // With one side starred both must match: only Fridays.
        let fridays = Schedule::parse("0 0 * * fri").unwrap();
        assert_eq!(
            fridays.next_after(at(2024, 9, 7, 0, 0)),
            Some(at(2024, 9, 13, 0, 0))
        );
    }
}
