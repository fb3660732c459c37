//! Resource quantities for the agent's cgroup and env code, through `cairn-semantics`
//! (exact, rounded up as Kubernetes rounds them).

use cairn_semantics::quantity::{parse_milli, parse_value};

/// The value in base units (cores for CPU, bytes for memory), to a thousandth.
pub fn parse(q: &str) -> Option<f64> {
    parse_milli(q).ok().map(|m| m as f64 / 1000.0)
}

/// CPU quantity in millicores (rounded up, as the kubelet does).
pub fn millicores(q: &str) -> Option<u64> {
    parse_milli(q).ok().map(|v| v.max(0) as u64)
}

pub fn bytes(q: &str) -> Option<i64> {
    parse_value(q).ok()
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
        assert_eq!(parse("1500m"), Some(1.5));
    }
}
