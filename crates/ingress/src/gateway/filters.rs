//! What a matched rule's filters do to a request: header modifiers, and a redirect's
//! `Location` (`httproute_types.go`, HTTPHeaderFilter and HTTPRequestRedirectFilter).

use http::header::{HeaderName, HeaderValue};
use http::HeaderMap;

use super::route::{HeaderModifier, Redirect};

/// `set` overwrites, `add` appends to what is there (`foo` + `bar` = `foo,bar`),
/// `remove` deletes; names in any case.
pub fn modify_headers(headers: &mut HeaderMap, modifier: &HeaderModifier) {
    let parse = |name: &str, value: &str| {
        let name = HeaderName::from_bytes(name.as_bytes()).ok()?;
        Some((name, HeaderValue::from_str(value).ok()?))
    };
    for h in &modifier.set {
        if let Some((name, value)) = parse(&h.name, &h.value) {
            headers.insert(name, value);
        }
    }
    for h in &modifier.add {
        let Some((name, value)) = parse(&h.name, &h.value) else {
            continue;
        };
        let joined = match headers.get(&name).and_then(|v| v.to_str().ok()) {
            Some(old) => HeaderValue::from_str(&format!("{old},{}", h.value)).unwrap_or(value),
            None => value,
        };
        headers.insert(name, joined);
    }
    for name in &modifier.remove {
        if let Ok(name) = HeaderName::from_bytes(name.as_bytes()) {
            headers.remove(name);
        }
    }
}

/// Where a request for `scheme://host{path}` (`path` with its query) arriving on a
/// listener of port `listener_port` is sent, and the status; `prefix` is the matched
/// `PathPrefix` value (for `ReplacePrefixMatch`).
pub fn redirect_location(
    redirect: &Redirect,
    scheme: &str,
    host: &str,
    path: &str,
    prefix: Option<&str>,
    listener_port: u16,
) -> (u16, String) {
    let scheme_out = redirect.scheme.as_deref().unwrap_or(scheme);
    let port = match (redirect.port, &redirect.scheme) {
        (Some(p), _) => p,
        (None, Some(s)) if s == "https" => 443,
        (None, Some(_)) => 80,
        (None, None) => listener_port,
    };
    let default_port = matches!((scheme_out, port), ("http", 80) | ("https", 443));
    let host_out = redirect.hostname.as_deref().unwrap_or(host);
    let authority = match default_port {
        true => host_out.to_string(),
        false => format!("{host_out}:{port}"),
    };
    let (only_path, query) = match path.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path, None),
    };
    let mut new_path = match &redirect.path {
        Some(m) if m.type_ == "ReplaceFullPath" => m.replace_full_path.clone().unwrap_or_default(),
        Some(m) if m.type_ == "ReplacePrefixMatch" => {
            let with = m.replace_prefix_match.as_deref().unwrap_or("");
            replace_prefix(only_path, prefix.unwrap_or("/"), with)
        }
        _ => only_path.to_string(),
    };
    if let Some(q) = query {
        new_path = format!("{new_path}?{q}");
    }
    (
        redirect.status_code.unwrap_or(302),
        format!("{scheme_out}://{authority}{new_path}"),
    )
}

/// Upstream's ReplacePrefixMatch table: the matched prefix's elements replaced, slashes
/// kept single.
pub fn replace_prefix(path: &str, prefix: &str, with: &str) -> String {
    let prefix = prefix.trim_end_matches('/');
    let rest = path.strip_prefix(prefix).unwrap_or(path);
    let with = with.trim_end_matches('/');
    let joined = match (with.is_empty(), rest.is_empty()) {
        (true, true) => "/".to_string(),
        (true, false) => rest.to_string(),
        (false, _) => format!("{with}{rest}"),
    };
    if joined.is_empty() {
        "/".to_string()
    } else {
        joined
    }
}
