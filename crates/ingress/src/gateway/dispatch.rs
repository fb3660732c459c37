//! A request's listener and, after its route matched, its backend: the most specific
//! listener on the port whose hostname matches (exact, then the longest wildcard, then
//! none: `gateway_types.go`, "Listener Isolation"), and a backendRef drawn by weight.

use super::attach::{Protocol, ServedListener};
use super::hostname;
use super::route::BackendRef;

/// The listener a request for `host` (lower case, no port) on `port` goes to.
pub fn listener_for<'a>(
    listeners: &'a [ServedListener],
    port: u16,
    protocol: Protocol,
    host: &str,
) -> Option<&'a ServedListener> {
    listeners
        .iter()
        .filter(|l| l.port == port && l.protocol == protocol)
        .filter(|l| hostname::matches(l.hostname.as_deref(), host))
        .max_by_key(|l| hostname::specificity(l.hostname.as_deref()))
}

/// The backend of draw `n` (a per-request counter): each gets its weight's share of
/// every `sum of weights` consecutive draws, spread rather than in runs (a multiplier
/// coprime with the usual sums scatters consecutive draws).
pub fn weighted(backends: &[(BackendRef, u32)], n: u64) -> Option<&BackendRef> {
    let total: u64 = backends.iter().map(|(_, w)| u64::from(*w)).sum();
    if total == 0 {
        return None;
    }
    let mut at = n.wrapping_mul(2_654_435_761) % total;
    for (backend, weight) in backends {
        let weight = u64::from(*weight);
        if at < weight {
            return Some(backend);
        }
        at -= weight;
    }
    None
}
