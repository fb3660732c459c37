//! Kubernetes resource quantities (`500m`, `64Mi`, `1e3`, `2`) as numbers.

/// The value in base units (cores for CPU, bytes for memory), or None if malformed.
pub fn parse(q: &str) -> Option<f64> {
    let q = q.trim();
    if q.is_empty() {
        return None;
    }
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(q.len());
    let (num, suffix) = q.split_at(split);
    let n: f64 = num.parse().ok()?;
    let mult = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        s if s.starts_with('e') || s.starts_with('E') => 10f64.powi(s[1..].parse().ok()?),
        _ => return None,
    };
    Some(n * mult)
}

/// CPU quantity in millicores (rounded up, as the kubelet does).
pub fn millicores(q: &str) -> Option<u64> {
    parse(q).map(|v| (v * 1000.0).ceil().max(0.0) as u64)
}

pub fn bytes(q: &str) -> Option<i64> {
    parse(q).map(|v| v.ceil() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_suffixes() {
        assert_eq!(millicores("500m"), Some(500));
        assert_eq!(millicores("2"), Some(2000));
        assert_eq!(millicores("0.1"), Some(100));
        assert_eq!(bytes("64Mi"), Some(64 << 20));
        assert_eq!(bytes("1G"), Some(1_000_000_000));
        assert_eq!(bytes("1e3"), Some(1000));
        assert_eq!(bytes("12Qi"), None);
        assert_eq!(bytes(""), None);
    }
}
