//! The string formats kube-openapi's default registry checks (`strfmt.Default`), which are
//! exactly the formats a 1.33 apiextensions-apiserver keeps in CRD schemas (others are
//! stripped and ignored). Names are compared without dashes (`date-time` is `datetime`).

use std::net::{Ipv4Addr, Ipv6Addr};

use super::pattern;

const KNOWN: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
];

fn normalize(format: &str) -> String {
    format.replace('-', "")
}

/// Whether `format` is one the registry knows.
pub(crate) fn known(format: &str) -> bool {
    !format.is_empty() && KNOWN.contains(&normalize(format).as_str())
}

const HOSTNAME: &str = r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([-a-zA-Z0-9\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$";
const UUID: &str = r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$";
const UUID3: &str = r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$";
const UUID4: &str =
    r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$";
const UUID5: &str =
    r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$";
const CREDIT_CARD: &str = r"^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35\d{3})\d{11})$";
const HEX_COLOR: &str = r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$";
const RGB_COLOR: &str = r"^rgb\(\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*\)$";
const BASE64: &str =
    r"^(?:[A-Za-z0-9+\/]{4})*(?:[A-Za-z0-9+\/]{2}==|[A-Za-z0-9+\/]{3}=|[A-Za-z0-9+\/]{4})$";
const SSN: &str = r"^\d{3}[- ]?\d{2}[- ]?\d{4}$";
const DATE_TIME_TAIL: &str =
    r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$";

/// Whether `s` is valid in `format` (a known one; unknown formats validate nothing).
pub(crate) fn validates(format: &str, s: &str) -> bool {
    match normalize(format).as_str() {
        "bsonobjectid" => s.len() == 24 && s.bytes().all(|b| b.is_ascii_hexdigit()),
        "uri" => is_request_uri(s),
        "email" => is_email(s),
        "hostname" => is_hostname(s),
        "ipv4" => is_ipv4(s),
        "ipv6" => s.contains(':') && s.parse::<Ipv6Addr>().is_ok(),
        "cidr" => is_cidr(s),
        "mac" => is_mac(s),
        "uuid" => pattern::matches(UUID, s),
        "uuid3" => pattern::matches(UUID3, s),
        "uuid4" => pattern::matches(UUID4, s),
        "uuid5" => pattern::matches(UUID5, s),
        "isbn" => is_isbn10(s) || is_isbn13(s),
        "isbn10" => is_isbn10(s),
        "isbn13" => is_isbn13(s),
        "creditcard" => is_credit_card(s),
        "ssn" => s.len() == 11 && pattern::matches(SSN, s),
        "hexcolor" => pattern::matches(HEX_COLOR, s),
        "rgbcolor" => pattern::matches(RGB_COLOR, s),
        "byte" => pattern::matches(BASE64, s),
        "password" => true,
        "date" => is_date(s),
        "duration" => is_duration(s),
        "datetime" => is_date_time(s),
        _ => true,
    }
}

fn days_in(month: u32, year: i64) -> u32 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Go's `time.Parse("2006-01-02", s)` succeeds.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    if !digits(0..4) || !digits(5..7) || !digits(8..10) {
        return false;
    }
    let num = |r: std::ops::Range<usize>| s[r].parse::<u32>().unwrap_or(0);
    let (year, month, day) = (num(0..4), num(5..7), num(8..10));
    (1..=12).contains(&month) && day >= 1 && day <= days_in(month, i64::from(year))
}

/// strfmt's `IsDateTime`: a date, a `t`, then `hh:mm:ss[.frac](z|±hh:mm)` (case-insensitive).
fn is_date_time(s: &str) -> bool {
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_lowercase();
    let parts: Vec<&str> = lower.split('t').collect();
    if parts.len() < 2 || !is_date(parts[0]) {
        return false;
    }
    let Ok(re) = pattern::compile(DATE_TIME_TAIL) else {
        return false;
    };
    let Some(m) = re.captures(parts[1]) else {
        return false;
    };
    let part = |i: usize| m.get(i).map_or("", |g| g.as_str());
    part(1) <= "23" && part(2) <= "59" && part(3) <= "59"
}

/// Go's `net/mail.ParseAddress` succeeds (addr-spec, or a display name and `<addr-spec>`).
fn is_email(s: &str) -> bool {
    let s = s.trim_matches(|c| c == ' ' || c == '\t');
    if let (Some(open), true) = (s.rfind('<'), s.ends_with('>')) {
        let name = s[..open].trim();
        let name_ok = name.is_empty()
            || (name.starts_with('"') && name.ends_with('"') && name.len() >= 2)
            || name
                .split_whitespace()
                .all(|w| w.chars().all(|c| is_atext(c, true)));
        return name_ok && is_addr_spec(&s[open + 1..s.len() - 1]);
    }
    is_addr_spec(s)
}

fn is_atext(c: char, dot: bool) -> bool {
    match c {
        '.' => dot,
        c if !c.is_ascii() => true,
        c => c.is_ascii_alphanumeric() || "!#$%&'*+-/=?^_`{|}~".contains(c),
    }
}

fn is_dot_atom(s: &str) -> bool {
    !s.is_empty()
        && s.chars().all(|c| is_atext(c, true))
        && !s.starts_with('.')
        && !s.ends_with('.')
        && !s.contains("..")
}

fn is_addr_spec(s: &str) -> bool {
    let (local_ok, rest) = if let Some(quoted) = s.strip_prefix('"') {
        let mut escaped = false;
        let end = quoted.char_indices().find(|&(_, c)| {
            let close = c == '"' && !escaped;
            escaped = c == '\\' && !escaped;
            close
        });
        match end {
            Some((i, _)) => (true, &quoted[i + 1..]),
            None => return false,
        }
    } else {
        match s.find('@') {
            Some(i) => (is_dot_atom(&s[..i]), &s[i..]),
            None => return false,
        }
    };
    let Some(domain) = rest.strip_prefix('@') else {
        return false;
    };
    let domain_ok = if domain.starts_with('[') {
        domain.ends_with(']') && !domain[1..domain.len() - 1].contains(['[', ']', '\\'])
    } else {
        is_dot_atom(domain)
    };
    local_ok && domain_ok
}

fn is_hostname(s: &str) -> bool {
    pattern::matches(HOSTNAME, s) && s.len() <= 255 && s.split('.').all(|p| p.len() <= 63)
}

/// Go's pre-1.17 `parseIPv4`: four decimal parts of at most 255, leading zeros allowed.
fn sloppy_ipv4(s: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.len() != 4 {
        return None;
    }
    let mut octets = [0u8; 4];
    for (o, p) in octets.iter_mut().zip(&parts) {
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let n = p.trim_start_matches('0').parse::<u32>().unwrap_or(0);
        if p.trim_start_matches('0').len() > 3 || n > 255 {
            return None;
        }
        *o = n as u8;
    }
    Some(Ipv4Addr::from(octets))
}

/// `ParseIPSloppy(s) != nil && strings.Contains(s, ".")`.
fn is_ipv4(s: &str) -> bool {
    let first = s.find(['.', ':']);
    let parsed = match first.map(|i| &s[i..i + 1]) {
        Some(".") => sloppy_ipv4(s).is_some(),
        Some(":") => s.parse::<Ipv6Addr>().is_ok(),
        _ => false,
    };
    parsed && s.contains('.')
}

fn is_cidr(s: &str) -> bool {
    let Some((addr, mask)) = s.split_once('/') else {
        return false;
    };
    let bits = if sloppy_ipv4(addr).is_some() {
        32
    } else if addr.parse::<Ipv6Addr>().is_ok() {
        128
    } else {
        return false;
    };
    !mask.is_empty()
        && mask.bytes().all(|b| b.is_ascii_digit())
        && mask.trim_start_matches('0').len() <= 3
        && mask.trim_start_matches('0').parse::<u32>().unwrap_or(0) <= bits
}

/// Go's `net.ParseMAC`: 6, 8 or 20 octets as `xx:xx…`, `xx-xx…` or `xxxx.xxxx…`.
fn is_mac(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 14 {
        return false;
    }
    let hex2 = |i: usize| b[i].is_ascii_hexdigit() && b[i + 1].is_ascii_hexdigit();
    let (group, sep) = if b[2] == b':' || b[2] == b'-' {
        (2, b[2])
    } else if b[4] == b'.' {
        (4, b'.')
    } else {
        return false;
    };
    if !(b.len() + 1).is_multiple_of(group + 1) {
        return false;
    }
    let groups = (b.len() + 1) / (group + 1);
    let octets = groups * group / 2;
    if ![6, 8, 20].contains(&octets) {
        return false;
    }
    (0..groups).all(|g| {
        let at = g * (group + 1);
        let sep_ok = g + 1 == groups || b[at + group] == sep;
        sep_ok && (0..group).step_by(2).all(|o| hex2(at + o))
    })
}

fn isbn_digits(s: &str) -> Vec<u8> {
    s.chars()
        .filter(|c| *c != '-' && !matches!(c, ' ' | '\t' | '\n' | '\r' | '\u{c}' | '\u{b}'))
        .map(|c| if c.is_ascii() { c as u8 } else { 0 })
        .collect()
}

fn is_isbn10(s: &str) -> bool {
    let d = isbn_digits(s);
    let shape = d.len() == 10
        && d[..9].iter().all(u8::is_ascii_digit)
        && (d[9].is_ascii_digit() || d[9] == b'X');
    if !shape {
        return false;
    }
    let mut sum: u32 = (0..9)
        .map(|i| (i as u32 + 1) * u32::from(d[i] - b'0'))
        .sum();
    sum += if d[9] == b'X' {
        100
    } else {
        10 * u32::from(d[9] - b'0')
    };
    sum.is_multiple_of(11)
}

fn is_isbn13(s: &str) -> bool {
    let d = isbn_digits(s);
    if d.len() != 13 || !d.iter().all(u8::is_ascii_digit) {
        return false;
    }
    let sum: u32 = (0..12)
        .map(|i| [1, 3][i % 2] * u32::from(d[i] - b'0'))
        .sum();
    u32::from(d[12] - b'0') == (10 - sum % 10) % 10
}

fn is_credit_card(s: &str) -> bool {
    let digits: String = s.chars().filter(char::is_ascii_digit).collect();
    if !pattern::matches(CREDIT_CARD, &digits) {
        return false;
    }
    let mut sum = 0;
    for (i, c) in digits.bytes().rev().enumerate() {
        let mut n = u32::from(c - b'0');
        if i % 2 == 1 {
            n *= 2;
            if n >= 10 {
                n = n % 10 + 1;
            }
        }
        sum += n;
    }
    sum % 10 == 0
}

/// `url.ParseRequestURI` succeeds: an absolute URI, or an absolute path.
fn is_request_uri(s: &str) -> bool {
    if s.is_empty() || s.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return false;
    }
    if s == "*" {
        return true;
    }
    let (scheme, rest) = match split_scheme(s) {
        Some(split) => split,
        None => return false,
    };
    let rest = match rest.split_once('?') {
        Some((before, _)) => before,
        None => rest,
    };
    if !rest.starts_with('/') {
        return !scheme.is_empty();
    }
    let mut path = rest;
    if !scheme.is_empty() {
        if let Some(auth) = rest.strip_prefix("//") {
            let (authority, p) = auth.split_at(auth.find('/').unwrap_or(auth.len()));
            if !valid_authority(authority) {
                return false;
            }
            path = p;
        }
    }
    valid_escapes(path)
}

/// Go's `getScheme`: `Some((scheme, rest))`, `None` for a leading `:`.
fn split_scheme(s: &str) -> Option<(&str, &str)> {
    for (i, c) in s.char_indices() {
        match c {
            c if c.is_ascii_alphabetic() => {}
            c if (c.is_ascii_digit() || matches!(c, '+' | '-' | '.')) && i > 0 => {}
            ':' if i == 0 => return None,
            ':' => return Some((&s[..i], &s[i + 1..])),
            _ => return Some(("", s)),
        }
    }
    Some(("", s))
}

fn valid_escapes(s: &str) -> bool {
    let b = s.as_bytes();
    (0..b.len()).all(|i| {
        b[i] != b'%'
            || (i + 2 < b.len() && b[i + 1].is_ascii_hexdigit() && b[i + 2].is_ascii_hexdigit())
    })
}

fn valid_authority(authority: &str) -> bool {
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (name, port) = if let Some(inner) = host.strip_prefix('[') {
        match inner.split_once(']') {
            Some((_, "")) => (host, ""),
            Some((_, after)) => match after.strip_prefix(':') {
                Some(port) => (host, port),
                None => return false,
            },
            None => return false,
        }
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) => (name, port),
            None => (host, ""),
        }
    };
    let host_char = |b: u8| {
        !b.is_ascii() || b.is_ascii_alphanumeric() || b"-_.~!$&'()*+,;=:[]<>\"%".contains(&b)
    };
    port.bytes().all(|b| b.is_ascii_digit()) && name.bytes().all(host_char) && valid_escapes(name)
}

fn duration_unit_ns(unit: &str) -> Option<f64> {
    Some(match unit {
        "ns" => 1.0,
        "us" | "\u{b5}s" | "\u{3bc}s" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" => 60e9,
        "h" => 3600e9,
        _ => return None,
    })
}

/// Go's `time.ParseDuration` succeeds: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, or `0`.
fn go_duration(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    if s == "0" {
        return true;
    }
    if s.is_empty() {
        return false;
    }
    let mut rest = s;
    let mut total = 0f64;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (int, after) = rest.split_at(int_len);
        let (frac, after) = match after.strip_prefix('.') {
            Some(a) => a.split_at(a.bytes().take_while(u8::is_ascii_digit).count()),
            None => ("", after),
        };
        if int.is_empty() && frac.is_empty() {
            return false;
        }
        let unit_len = after
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(after.len());
        let Some(ns) = duration_unit_ns(&after[..unit_len]) else {
            return false;
        };
        let value: f64 = format!("{}.{}0", if int.is_empty() { "0" } else { int }, frac)
            .parse()
            .unwrap_or(f64::INFINITY);
        total += value * ns;
        if int.len() > 19 || total > 9.223_372_036_854_775e18 {
            return false;
        }
        rest = &after[unit_len..];
    }
    true
}

/// strfmt's `ParseDuration`: Go's syntax, or `<n> <unit>` pairs in Scala's words.
fn is_duration(s: &str) -> bool {
    if go_duration(s) {
        return true;
    }
    const UNITS: &[&[&str]] = &[
        &["ns", "nano"],
        &["us", "\u{b5}s", "micro"],
        &["ms", "milli"],
        &["s", "sec"],
        &["m", "min"],
        &["h", "hr", "hour"],
        &["d", "day"],
        &["w", "wk", "week"],
    ];
    let Ok(re) = pattern::compile("((\\d+)\\s*([A-Za-z\u{b5}]+))") else {
        return false;
    };
    let mut ok = false;
    for m in re.captures_iter(s) {
        let digits = m.get(2).map_or("", |g| g.as_str());
        if digits.parse::<i64>().is_err() {
            return false;
        }
        let unit = m
            .get(3)
            .map_or(String::new(), |g| g.as_str().trim().to_lowercase());
        ok |= UNITS.iter().any(|variants| {
            let last = variants.len() - 1;
            variants
                .iter()
                .enumerate()
                .any(|(i, v)| (i == last && unit.starts_with(v)) || v.to_lowercase() == unit)
        });
    }
    ok
}
