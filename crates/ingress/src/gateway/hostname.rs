//! Gateway API hostnames: `*.` wildcards match ONE OR MORE labels (unlike Ingress's one),
//! and a route's hostnames are intersected with its listener's.

/// A route's hostnames; `[None]` (any) when it names none.
pub fn of_route(route: &super::route::HttpRoute) -> Vec<Option<&str>> {
    match route.spec.hostnames.is_empty() {
        true => vec![None],
        false => route
            .spec
            .hostnames
            .iter()
            .map(|h| Some(h.as_str()))
            .collect(),
    }
}

/// Whether `pattern` (a hostname, `*.suffix`, or `None` for any) matches the request
/// host `host` (lower case, no port).
pub fn matches(pattern: Option<&str>, host: &str) -> bool {
    match pattern {
        None => true,
        Some(p) => match p.strip_prefix('*') {
            Some(suffix) => host.len() > suffix.len() && host.ends_with(suffix),
            None => p == host,
        },
    }
}

/// The hostname a route's `route` hostname serves on a listener of hostname `listener`:
/// the more specific of the two when one covers the other, else `None` (no intersection).
/// `Some(None)`: any host.
pub fn intersect(listener: Option<&str>, route: Option<&str>) -> Option<Option<String>> {
    match (listener, route) {
        (None, r) => Some(r.map(str::to_string)),
        (l, None) => Some(l.map(str::to_string)),
        (Some(l), Some(r)) => {
            // The narrower one is matched by the wider one, wildcards compared as names
            // (`*.example.com` is covered by `*.com`).
            let covers = |wide: &str, narrow: &str| {
                // A wildcard is covered only by a wildcard.
                let kinds_fit = wide.starts_with("*.") || !narrow.starts_with("*.");
                wide == narrow
                    || (kinds_fit && matches(Some(wide), narrow.trim_start_matches("*.")))
            };
            if covers(l, r) {
                Some(Some(r.to_string()))
            } else if covers(r, l) {
                Some(Some(l.to_string()))
            } else {
                None
            }
        }
    }
}

/// Precedence of a matched hostname: an exact name's length first, then its length
/// with the wildcard (upstream: "Characters in a matching non-wildcard hostname",
/// then "Characters in a matching hostname").
pub fn specificity(hostname: Option<&str>) -> (usize, usize) {
    match hostname {
        None => (0, 0),
        Some(h) if h.starts_with('*') => (0, h.len()),
        Some(h) => (h.len(), h.len()),
    }
}
