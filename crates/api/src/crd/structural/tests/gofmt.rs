//! Go's rendering of values, which error messages depend on.

use serde_json::json;

use super::super::formats::validates;
use super::super::gofmt::{bad_value, float, json as go_json, quote};
use super::super::pattern::{compile, matches};
use super::super::validate::is_json_integer;

#[test]
fn floats_print_as_go_v() {
    let cases = [
        (10.0, "10"),
        (0.5, "0.5"),
        (-2.25, "-2.25"),
        (100000.0, "100000"),
        (1000000.0, "1e+06"),
        (1234567.0, "1.234567e+06"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (1e21, "1e+21"),
        (1e100, "1e+100"),
        (0.1 + 0.2, "0.30000000000000004"),
        (0.0, "0"),
    ];
    for (f, want) in cases {
        assert_eq!(float(f), want, "{f}");
    }
}

#[test]
fn json_is_go_json() {
    assert_eq!(
        go_json(&json!({"b": 1, "a": [1.5, "<&>", null, true]})),
        r#"{"a":[1.5,"\u003c\u0026\u003e",null,true],"b":1}"#
    );
    assert_eq!(go_json(&json!(1e21)), "1e+21");
    assert_eq!(go_json(&json!(1e-7)), "1e-7");
    assert_eq!(go_json(&json!(2.0)), "2");
}

#[test]
fn quoting_is_strconv_quote() {
    assert_eq!(
        quote("a\"b\\c\n\t\u{1}\u{7f}é\u{a0}\u{1F600}"),
        r#""a\"b\\c\n\t\x01\x7fé\u00a0😀""#
    );
}

#[test]
fn bad_values_print_as_field_errors_do() {
    assert_eq!(bad_value(&json!(null)), r#""null""#);
    assert_eq!(bad_value(&json!("s")), r#""s""#);
    assert_eq!(bad_value(&json!(3)), "3");
    assert_eq!(bad_value(&json!(2.5)), "2.5");
    assert_eq!(bad_value(&json!(true)), "true");
    assert_eq!(
        bad_value(&json!({"b": [1, "x", null], "a": {}})),
        r#"map[string]interface {}{"a":map[string]interface {}{}, "b":[]interface {}{1, "x", interface {}(nil)}}"#
    );
}

#[test]
fn json_integers_as_swag_sees_them() {
    assert!(is_json_integer(3.0));
    assert!(is_json_integer(-3.0));
    assert!(is_json_integer(3.000_000_000_000_000_4));
    assert!(!is_json_integer(2.5));
    assert!(!is_json_integer(0.5));
    assert!(!is_json_integer(1e300));
    assert!(!is_json_integer(f64::NAN));
}

#[test]
fn go_regexp_dialect() {
    assert!(matches(r"^\d+$", "123"));
    assert!(!matches(r"^\d+$", "١٢٣"));
    assert!(matches(r"^[\w.-]+$", "a_b.c-d"));
    assert!(matches(r"^a{2}$", "aa"));
    assert!(matches(r"^a{$", "a{"));
    assert!(matches(r"^{x}$", "{x}"));
    assert!(matches(r"^[[]$", "["));
    assert!(matches(r"^[a&&b]+$", "a&b"));
    assert!(matches(r"^\Qa.b\E$", "a.b"));
    assert!(!matches(r"^\Qa.b\E$", "axb"));
    assert!(matches(r"^[[:alpha:]]+$", "abc"));
    assert!(matches(r"^\p{Greek}+$", "αβ"));
    assert!(matches(r"^\x{41}$", "A"));
    assert_eq!(
        compile("a)").err().as_deref(),
        Some("error parsing regexp: unexpected ): `a)`")
    );
    assert_eq!(
        compile("[a").err().as_deref(),
        Some("error parsing regexp: missing closing ]: `[a`")
    );
    assert_eq!(
        compile("*a").err().as_deref(),
        Some("error parsing regexp: missing argument to repetition operator: `*`")
    );
}

#[test]
fn formats() {
    let good = [
        ("date-time", "2006-01-02T15:04:05.999Z"),
        ("date-time", "2006-01-02t15:04:05+07:00"),
        ("datetime", "2006-01-02T15:04:05Z"),
        ("date", "2000-02-29"),
        ("email", "First Last <first.last@example.com>"),
        ("email", "\"quoted local\"@example.com"),
        ("hostname", "example.com"),
        ("hostname", "a"),
        ("ipv4", "010.000.000.001"),
        ("ipv6", "2001:db8::1"),
        ("cidr", "10.0.0.0/8"),
        ("cidr", "2001:db8::/32"),
        ("mac", "01:23:45:67:89:ab"),
        ("mac", "0123.4567.89ab"),
        ("uuid", "A987FBC9-4BED-3078-CF07-9141BA07C9F3"),
        ("uuid4", "a987fbc9-4bed-4078-8f07-9141ba07c9f3"),
        ("isbn10", "0-321-75104-3"),
        ("isbn13", "978-0321751041"),
        ("creditcard", "4111 1111 1111 1111"),
        ("ssn", "123-45-6789"),
        ("hexcolor", "#fff"),
        ("rgbcolor", "rgb(255, 0, 10)"),
        ("byte", "aGVsbG8="),
        ("password", ""),
        ("duration", "1h30m"),
        ("duration", "3 days"),
        ("uri", "https://example.com/a?b=c"),
        ("uri", "/relative/path"),
        ("uri", "mailto:someone@example.com"),
        ("bsonobjectid", "507f1f77bcf86cd799439011"),
    ];
    for (format, s) in good {
        assert!(validates(format, s), "{format} {s:?} should be valid");
    }
    let bad = [
        ("date-time", "2006-01-02 15:04:05Z"),
        ("date-time", "2006-01-02T25:04:05Z"),
        ("date", "2001-02-29"),
        ("date", "2001-1-02"),
        ("email", "no-at-sign"),
        ("email", "a..b@example.com"),
        ("hostname", "-bad-.com"),
        ("ipv4", "1.2.3"),
        ("ipv4", "2001:db8::1"),
        ("ipv6", "1.2.3.4"),
        ("cidr", "10.0.0.0/33"),
        ("mac", "01:23:45:67:89"),
        ("uuid", "xyz"),
        ("uuid3", "a987fbc9-4bed-4078-8f07-9141ba07c9f3"),
        ("isbn10", "0-321-75104-4"),
        ("creditcard", "4111 1111 1111 1112"),
        ("ssn", "123456789"),
        ("hexcolor", "#ffff"),
        ("rgbcolor", "rgb(256,0,0)"),
        ("byte", "abc"),
        ("duration", "soon"),
        ("uri", "relative/path"),
        ("uri", "http://a b.com/"),
        ("bsonobjectid", "507f1f77bcf86cd79943901"),
    ];
    for (format, s) in bad {
        assert!(!validates(format, s), "{format} {s:?} should be invalid");
    }
}
