//! `url()`, `isURL()` and the URL getters, parsing as Go's
//! `url.ParseRequestURI` does (upstream requires it to succeed): an absolute
//! URI or an absolute path, no fragment, valid `%` escapes, numeric ports.

use super::{fail, opaque_val};
use cel::common::types::{CelBool, CelList, CelMap, CelMapKey, CelString};
use cel::common::value::Val;
use cel::{DeclarationError, Env, ExecutionError};
use std::collections::HashMap;

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Url {
    scheme: String,
    host: String,
    /// As written (still escaped).
    path: String,
    raw_query: String,
}
opaque_val!(Url, URL_TYPE, "kubernetes.URL");

pub(super) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    cel::add_overload!(env, fn string_to_url: (CelString) -> Result<Url>, name = "url", id = "string_to_url")?;
    cel::add_overload!(env, fn is_url: (CelString) -> CelBool, name = "isURL", id = "is_url_string")?;
    cel::add_member_overload!(env, fn get_scheme: (Url) -> CelString, id = "url_get_scheme")?;
    cel::add_member_overload!(env, fn get_host: (Url) -> CelString, id = "url_get_host")?;
    cel::add_member_overload!(env, fn get_hostname: (Url) -> CelString, id = "url_get_hostname")?;
    cel::add_member_overload!(env, fn get_port: (Url) -> CelString, id = "url_get_port")?;
    cel::add_member_overload!(env, fn get_escaped_path: (Url) -> CelString, id = "url_get_escaped_path")?;
    cel::add_member_overload!(env, fn get_query: (Url) -> CelMap, id = "url_get_query")?;
    Ok(())
}

fn string_to_url(s: &CelString<'_>) -> Result<Url, ExecutionError> {
    parse_request_uri(s.inner()).map_err(|why| {
        fail(
            "url",
            format!(
                "URL parse error during conversion from string: parse {:?}: {why}",
                s.inner()
            ),
        )
    })
}

fn is_url(s: &CelString<'_>) -> CelBool {
    parse_request_uri(s.inner()).is_ok().into()
}

pub(crate) fn parse_request_uri(raw: &str) -> Result<Url, String> {
    if raw.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err("net/url: invalid control character in URL".into());
    }
    if raw.is_empty() {
        return Err("empty url".into());
    }
    let (scheme, rest) = split_scheme(raw)?;
    let (rest, raw_query) = if rest.ends_with('?') && rest.matches('?').count() == 1 {
        (&rest[..rest.len() - 1], "")
    } else {
        rest.split_once('?').unwrap_or((rest, ""))
    };
    let mut url = Url {
        scheme: scheme.to_ascii_lowercase(),
        host: String::new(),
        path: String::new(),
        raw_query: raw_query.into(),
    };
    if !rest.starts_with('/') {
        if scheme.is_empty() {
            return Err("invalid URI for request".into());
        }
        // An opaque URI such as `mailto:x`: no host, no path.
        return Ok(url);
    }
    let path = match rest.strip_prefix("//") {
        Some(after) if !scheme.is_empty() => {
            let (authority, path) = after.find('/').map_or((after, ""), |i| after.split_at(i));
            url.host = parse_authority(authority)?;
            path
        }
        _ => rest,
    };
    unescape(path)?;
    url.path = path.to_owned();
    Ok(url)
}

/// Go's `getScheme`: letters first, then letters, digits, `+-.` up to `:`.
fn split_scheme(raw: &str) -> Result<(&str, &str), String> {
    for (i, c) in raw.char_indices() {
        match c {
            'a'..='z' | 'A'..='Z' => {}
            '0'..='9' | '+' | '-' | '.' if i > 0 => {}
            ':' if i == 0 => return Err("missing protocol scheme".into()),
            ':' => return Ok((&raw[..i], &raw[i + 1..])),
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

/// The host (with its port) of `userinfo@host:port`.
fn parse_authority(authority: &str) -> Result<String, String> {
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let port = if let Some(rest) = host.strip_prefix('[') {
        let end = rest.find(']').ok_or("missing ']' in host")?;
        &rest[end + 1..]
    } else {
        host.rfind(':').map_or("", |i| &host[i..])
    };
    let valid_port = port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()));
    if !valid_port {
        return Err(format!("invalid port {port:?} after host"));
    }
    for c in host.chars() {
        let allowed =
            c.is_ascii_alphanumeric() || !c.is_ascii() || "-_.~!$&'()*+,;=:[]<>\"%".contains(c);
        if !allowed {
            return Err(format!(
                "invalid character {:?} in host name",
                c.to_string()
            ));
        }
    }
    unescape(host)?;
    Ok(host.to_owned())
}

/// Decodes `%XX` escapes, refusing malformed ones as Go does.
fn unescape(s: &str) -> Result<Vec<u8>, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
            let Some(byte) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) else {
                let bad: String = s[i..].chars().take(3).collect();
                return Err(format!("invalid URL escape {bad:?}"));
            };
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Ok(out)
}

/// Whether Go escapes byte `b` in a path.
fn escape_in_path(b: u8) -> bool {
    !(b.is_ascii_alphanumeric() || b"-_.~$&+,/:;=@".contains(&b))
}

fn get_scheme(u: &Url) -> CelString<'static> {
    u.scheme.clone().into()
}

fn get_host(u: &Url) -> CelString<'static> {
    u.host.clone().into()
}

fn split_host_port(host: &str) -> (&str, &str) {
    if let Some(rest) = host.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((name, port)) => (name, port.strip_prefix(':').unwrap_or("")),
            None => (rest, ""),
        };
    }
    match host.rsplit_once(':') {
        Some((name, port)) => (name, port),
        None => (host, ""),
    }
}

fn get_hostname(u: &Url) -> CelString<'static> {
    split_host_port(&u.host).0.to_owned().into()
}

fn get_port(u: &Url) -> CelString<'static> {
    split_host_port(&u.host).1.to_owned().into()
}

/// Go's `EscapedPath`: the path as written when that is a valid encoding,
/// else the decoded path re-escaped.
fn get_escaped_path(u: &Url) -> CelString<'static> {
    let valid = u
        .path
        .bytes()
        .all(|b| b == b'%' || b"!$&'()*+,;=:@[]".contains(&b) || !escape_in_path(b));
    if valid {
        return u.path.clone().into();
    }
    let decoded = unescape(&u.path).unwrap_or_else(|_| u.path.clone().into_bytes());
    let mut out = String::with_capacity(decoded.len());
    for b in decoded {
        if escape_in_path(b) {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push(char::from(b));
        }
    }
    out.into()
}

/// Go's `url.ParseQuery`, dropping malformed pairs: key to values, in order.
fn get_query(u: &Url) -> CelMap<'static> {
    let mut query: Vec<(String, Vec<String>)> = Vec::new();
    for pair in u
        .raw_query
        .split('&')
        .filter(|p| !p.is_empty() && !p.contains(';'))
    {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let decode = |s: &str| {
            unescape(&s.replace('+', " "))
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
        };
        let (Some(key), Some(value)) = (decode(key), decode(value)) else {
            continue;
        };
        match query.iter_mut().find(|(k, _)| *k == key) {
            Some((_, values)) => values.push(value),
            None => query.push((key, vec![value])),
        }
    }
    let entries = query.into_iter().map(|(k, values)| {
        let list: Vec<Box<dyn Val>> = values
            .into_iter()
            .map(|v| Box::new(CelString::from(v)) as Box<dyn Val>)
            .collect();
        (
            CelMapKey::from(k),
            Box::new(CelList::from(list)) as Box<dyn Val>,
        )
    });
    CelMap::from(entries.collect::<HashMap<_, _>>())
}
