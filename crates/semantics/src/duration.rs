//! Go's `time.Duration` text (`15s`, `1m0.5s`, `500ms`, `2h`), as upstream's flags and
//! API fields (PodMetrics' `window`) write it. Negative durations are not accepted.

use std::time::Duration;

/// `s` as a duration; `None` unless every part is a number with a unit (or `"0"`).
pub fn parse_go(s: &str) -> Option<Duration> {
    if s == "0" {
        return Some(Duration::ZERO);
    }
    let mut rest = s;
    let mut total = 0f64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter(|&i| i > 0)?;
        let value: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        total += value * scale;
        rest = &rest[unit_len..];
    }
    Duration::try_from_secs_f64(total).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse() {
        assert_eq!(parse_go("15s"), Some(Duration::from_secs(15)));
        assert_eq!(parse_go("1m0.5s"), Some(Duration::from_millis(60_500)));
        assert_eq!(parse_go("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_go("2h"), Some(Duration::from_secs(7200)));
        assert_eq!(parse_go("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_go("0"), Some(Duration::ZERO));
        assert_eq!(parse_go("0s"), Some(Duration::ZERO));
        for bad in ["fast", "15", "", "-1s", "1x"] {
            assert_eq!(parse_go(bad), None, "{bad}");
        }
    }
}
