//! Names and values with upstream's messages: the generic checks are
//! `cairn-apimachinery`'s (upstream's `util/validation`); ports, IPs and domain-prefixed
//! paths are the API's.

use super::*;

pub use cairn_apimachinery::validation::*;

pub(crate) fn port_range_error() -> String {
    "must be between 1 and 65535, inclusive".to_string()
}

pub(crate) fn is_valid_ip(value: &str) -> bool {
    value.parse::<IpAddr>().is_ok()
}

pub(crate) const INVALID_IP: &str = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)";

/// `example.com/path` (upstream `IsDomainPrefixedPath`).
pub(crate) fn domain_prefixed_path_error(value: &str) -> Option<String> {
    let Some((domain, _)) = value.split_once('/') else {
        return Some("must be a domain-prefixed path (such as \"acme.io/foo\")".to_string());
    };
    is_dns1123_subdomain(domain).into_iter().next()
}
