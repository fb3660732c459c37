//! Writing an HTTP/1.1 response head: the status line, header lines, and the `Date` a
//! response gets when it has none.

use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

use http::StatusCode;

pub fn write_status(out: &mut Vec<u8>, status: StatusCode) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
}

pub fn write_line(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

thread_local! {
    /// The `Date` value of the current second, formatted once per second per thread.
    static DATE_NOW: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
}

/// A `Date` header, as a proxy adds to an answer without one (RFC 9110 §6.6.1).
pub fn write_date(out: &mut Vec<u8>) {
    let now = SystemTime::now();
    let second = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    DATE_NOW.with_borrow_mut(|(cached, text)| {
        if *cached != second {
            *cached = second;
            *text = httpdate::fmt_http_date(now);
        }
        write_line(out, b"date", text.as_bytes());
    });
}

/// A whole answer of the proxy's own with a one-line plain-text body, after which the
/// connection closes, in place of whatever `out` held.
pub fn write_plain_closing(out: &mut Vec<u8>, status: StatusCode, message: &str) {
    out.clear();
    write_status(out, status);
    write_line(out, b"content-type", b"text/plain; charset=utf-8");
    write_date(out);
    let length = (message.len() + 1).to_string();
    write_line(out, b"content-length", length.as_bytes());
    write_line(out, b"connection", b"close");
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(message.as_bytes());
    out.push(b'\n');
}
