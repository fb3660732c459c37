//! Host matching (`spec.rules[].host`): "a fully qualified domain name of a network host
//! as defined by RFC 3986", optionally prefixed by `*.` to match exactly one label.

/// A rule's host, as it matches a request's.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HostMatch {
    /// `example.com`: that host only (compared case-insensitively, as DNS names are).
    Exact(String),
    /// `*.example.com`: one label before `.example.com` (`a.example.com`, not
    /// `example.com` nor `a.b.example.com`). Holds `.example.com`.
    Wildcard(String),
    /// No host: any request.
    Any,
}

impl HostMatch {
    /// The rule's `host` field: empty or missing is [`HostMatch::Any`].
    pub fn parse(host: Option<&str>) -> HostMatch {
        match host.map(str::to_ascii_lowercase) {
            None => HostMatch::Any,
            Some(h) if h.is_empty() => HostMatch::Any,
            Some(h) => match h.strip_prefix('*') {
                Some(suffix) => HostMatch::Wildcard(suffix.to_string()),
                None => HostMatch::Exact(h),
            },
        }
    }

    /// Whether a request for `host` (lower case, no port) matches.
    pub fn matches(&self, host: &str) -> bool {
        match self {
            HostMatch::Exact(h) => h == host,
            HostMatch::Wildcard(suffix) => host
                .strip_suffix(suffix.as_str())
                .is_some_and(|label| !label.is_empty() && !label.contains('.')),
            HostMatch::Any => true,
        }
    }
}

/// A request's host as rules compare it: the `Host` header or `:authority` without its
/// port, lower case, without a trailing dot.
pub fn request_host(authority: &str) -> String {
    let host = match authority.rsplit_once(':') {
        // `[::1]:80`, `example.com:80`; a bare IPv6 literal keeps its colons.
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) && !h.ends_with(':') => h,
        _ => authority,
    };
    host.trim_end_matches('.').to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_match_exactly_one_label() {
        // Upstream's table (Ingress docs, "Hostname wildcards").
        let w = HostMatch::parse(Some("*.foo.com"));
        assert!(w.matches("bar.foo.com"));
        assert!(!w.matches("baz.bar.foo.com"));
        assert!(!w.matches("foo.com"));
        assert!(!w.matches(".foo.com"));
        let e = HostMatch::parse(Some("Foo.Bar.com"));
        assert!(e.matches("foo.bar.com") && !e.matches("bar.com"));
        assert_eq!(HostMatch::parse(Some("")), HostMatch::Any);
        assert!(HostMatch::parse(None).matches("anything"));
    }

    #[test]
    fn a_request_host_loses_its_port_and_case() {
        assert_eq!(request_host("Foo.Example.com:8443"), "foo.example.com");
        assert_eq!(request_host("foo.example.com."), "foo.example.com");
        assert_eq!(request_host("[::1]:80"), "[::1]");
        assert_eq!(request_host("198.18.0.11"), "198.18.0.11");
    }
}
