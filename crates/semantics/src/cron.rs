//! CronJob schedules as Kubernetes reads them (robfig/cron's `ParseStandard`): five fields,
//! names for months and weekdays, the `@yearly`..`@hourly` macros, and `@every <duration>`.
//! Parsing and next-time search are croner's; `@every` and zone lookup are here.

use std::time::Duration;

use croner::parser::{CronParser, Seconds, Year};
use jiff::tz::TimeZone;
use jiff::Zoned;

/// A parsed `spec.schedule`.
#[derive(Debug, Clone)]
pub enum Schedule {
    Cron(Box<croner::Cron>),
    /// `@every 1h30m`: fixed intervals from the previous run.
    Every(Duration),
}

/// Parses a schedule; the error reads as robfig/cron's do where they differ little.
pub fn parse(schedule: &str) -> Result<Schedule, String> {
    let trimmed = schedule.trim();
    if let Some(rest) = trimmed.strip_prefix("@every ") {
        return parse_go_duration(rest.trim())
            .filter(|d| !d.is_zero())
            .map(Schedule::Every)
            .ok_or_else(|| format!("failed to parse duration {trimmed}"));
    }
    let fields = trimmed.split_whitespace().count();
    if !trimmed.starts_with('@') && fields != 5 {
        return Err(format!(
            "expected exactly 5 fields, found {fields}: [{}]",
            trimmed.split_whitespace().collect::<Vec<_>>().join(" ")
        ));
    }
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(trimmed)
        .map(|c| Schedule::Cron(Box::new(c)))
        .map_err(|e| e.to_string())
}

impl Schedule {
    /// The first scheduled time strictly after `after`.
    pub fn next_after(&self, after: &Zoned) -> Option<Zoned> {
        match self {
            Schedule::Cron(c) => c.find_next_occurrence(after, false).ok(),
            Schedule::Every(d) => {
                let span = jiff::SignedDuration::try_from(*d).ok()?;
                // robfig rounds `@every` to whole seconds after the previous time.
                after.checked_add(span).ok()?.round(jiff::Unit::Second).ok()
            }
        }
    }
}

/// The latest scheduled time after `earliest` and at or before `now`, with how many
/// scheduled times fell in that window (counted up to 101: upstream warns past 100).
pub fn most_recent(schedule: &Schedule, earliest: &Zoned, now: &Zoned) -> Option<(Zoned, u32)> {
    let first = schedule.next_after(earliest)?;
    if first > *now {
        return None;
    }
    let latest = match schedule {
        Schedule::Cron(c) => c.find_previous_occurrence(now, true).ok()?,
        Schedule::Every(d) => {
            let step = i128::try_from(d.as_nanos()).ok()?.max(1);
            let span = now.timestamp().as_nanosecond() - first.timestamp().as_nanosecond();
            let k = span / step;
            let offset = jiff::SignedDuration::from_nanos(i64::try_from(k * step).ok()?);
            first.checked_add(offset).ok()?
        }
    };
    let mut missed = 1;
    let mut t = first;
    while missed <= 100 && t < latest {
        t = schedule.next_after(&t)?;
        missed += 1;
    }
    Some((latest, missed))
}

/// An IANA zone from the node's database; Go's message when unknown.
pub fn time_zone(name: &str) -> Result<TimeZone, String> {
    if name.is_empty() || name == "UTC" {
        return Ok(TimeZone::UTC);
    }
    TimeZone::get(name).map_err(|_| format!("unknown time zone {name}"))
}

/// Go's `time.ParseDuration` for the units a schedule uses (`h`, `m`, `s`, `ms`).
fn parse_go_duration(s: &str) -> Option<Duration> {
    let mut total = Duration::ZERO;
    let mut rest = s;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let value: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let secs = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += Duration::try_from_secs_f64(value * secs).ok()?;
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Zoned {
        s.parse().unwrap()
    }

    #[test]
    fn standard_fields_and_macros() {
        let every_5 = parse("*/5 * * * *").unwrap();
        let next = every_5
            .next_after(&at("2026-01-01T10:02:30+00:00[UTC]"))
            .unwrap();
        assert_eq!(next, at("2026-01-01T10:05:00+00:00[UTC]"));
        let hourly = parse("@hourly").unwrap();
        let next = hourly
            .next_after(&at("2026-01-01T10:00:00+00:00[UTC]"))
            .unwrap();
        assert_eq!(next, at("2026-01-01T11:00:00+00:00[UTC]"));
        let weekday = parse("0 9 * * MON-FRI").unwrap();
        // 2026-01-03 is a Saturday.
        let next = weekday
            .next_after(&at("2026-01-03T08:00:00+00:00[UTC]"))
            .unwrap();
        assert_eq!(next, at("2026-01-05T09:00:00+00:00[UTC]"));
    }

    #[test]
    fn every_and_errors() {
        let every = parse("@every 1h30m").unwrap();
        let next = every
            .next_after(&at("2026-01-01T10:00:00+00:00[UTC]"))
            .unwrap();
        assert_eq!(next, at("2026-01-01T11:30:00+00:00[UTC]"));
        assert_eq!(
            parse("bad").unwrap_err(),
            "expected exactly 5 fields, found 1: [bad]"
        );
        assert!(parse("61 * * * *").is_err());
        assert!(parse("* * * * * *").is_err());
        assert!(parse("@every nope").is_err());
    }

    #[test]
    fn most_recent_times() {
        let hourly = parse("0 * * * *").unwrap();
        let (t, missed) = most_recent(
            &hourly,
            &at("2026-01-01T10:30:00+00:00[UTC]"),
            &at("2026-01-01T13:15:00+00:00[UTC]"),
        )
        .unwrap();
        assert_eq!((t, missed), (at("2026-01-01T13:00:00+00:00[UTC]"), 3));
        assert!(most_recent(
            &hourly,
            &at("2026-01-01T10:30:00+00:00[UTC]"),
            &at("2026-01-01T10:45:00+00:00[UTC]"),
        )
        .is_none());
        let every = parse("@every 2s").unwrap();
        let (t, missed) = most_recent(
            &every,
            &at("2026-01-01T10:00:00+00:00[UTC]"),
            &at("2026-01-01T10:00:07+00:00[UTC]"),
        )
        .unwrap();
        assert_eq!((t, missed), (at("2026-01-01T10:00:06+00:00[UTC]"), 3));
        let minutely = parse("* * * * *").unwrap();
        let (_, missed) = most_recent(
            &minutely,
            &at("2026-01-01T00:00:00+00:00[UTC]"),
            &at("2026-01-02T00:00:00+00:00[UTC]"),
        )
        .unwrap();
        assert_eq!(missed, 101);
    }

    #[test]
    fn zones() {
        assert!(time_zone("Etc/UTC").is_ok());
        assert_eq!(
            time_zone("Mars/Olympus").unwrap_err(),
            "unknown time zone Mars/Olympus"
        );
    }
}
