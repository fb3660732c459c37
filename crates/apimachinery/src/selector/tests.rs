#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use super::*;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn sel(s: &str) -> LabelSelector {
    LabelSelector::parse(s).unwrap_or_else(|e| panic!("parse {s:?}: {e}"))
}

#[test]
fn parses_all_operators() {
    let cases = [
        ("x=a", "x=a"),
        ("x==a", "x==a"),
        ("x!=a", "x!=a"),
        ("x in (a,b)", "x in (a,b)"),
        ("x notin (b,a)", "x notin (a,b)"),
        ("x", "x"),
        ("!x", "!x"),
        ("x>1", "x>1"),
        ("x<10", "x<10"),
        ("  x = a ,  y  ", "x=a,y"),
        ("\tx\n=\ra", "x=a"),
        ("z=1,a=2", "a=2,z=1"),
        ("x=", "x="),
        ("x=,y=b", "x=,y=b"),
        ("x in (in)", "x in (in)"),
        ("x in (notin,in)", "x in (in,notin)"),
        ("x in (a,,b)", "x in (,a,b)"),
        ("x in ()", "x in ()"),
        ("x in (,)", "x in ()"),
        ("x in (a,)", "x in (,a)"),
        ("example.com/app=web", "example.com/app=web"),
        (
            "x in (foo,,baz),y,z notin ()",
            "x in (,baz,foo),y,z notin ()",
        ),
        ("", ""),
        ("   ", ""),
    ];
    for (input, want) in cases {
        assert_eq!(sel(input).to_string(), want, "input {input:?}");
    }
}

#[test]
fn operators_are_recognised() {
    let s = sel("a=1,b==2,c!=3,d in (4),e notin (5),f,!g,h>6,i<7");
    let ops: Vec<Operator> = s.requirements().iter().map(|r| r.operator()).collect();
    assert_eq!(
        ops,
        vec![
            Operator::Equals,
            Operator::DoubleEquals,
            Operator::NotEquals,
            Operator::In,
            Operator::NotIn,
            Operator::Exists,
            Operator::DoesNotExist,
            Operator::GreaterThan,
            Operator::LessThan
        ]
    );
    assert_eq!(s.requirements()[3].values(), ["4".to_string()]);
}

#[test]
fn matching() {
    let l = labels(&[("app", "web"), ("tier", "front"), ("n", "5")]);
    let yes = [
        "",
        "app=web",
        "app==web",
        "app!=db",
        "missing!=x",
        "app in (db,web)",
        "app notin (db)",
        "missing notin (db)",
        "app",
        "!missing",
        "n>4",
        "n<6",
        "app=web,tier=front",
    ];
    let no = [
        "app=db",
        "missing=x",
        "app!=web",
        "app in (db)",
        "missing in (db)",
        "app notin (web)",
        "missing",
        "!app",
        "n>5",
        "n<5",
        "app>1",
        "missing>1",
        "app=web,tier=back",
        "missing=",
    ];
    for s in yes {
        assert!(sel(s).matches(&l), "{s:?} should match");
    }
    for s in no {
        assert!(!sel(s).matches(&l), "{s:?} should not match");
    }
    assert!(sel("x=").matches(&labels(&[("x", "")])));
}

#[test]
fn is_empty_and_nothing() {
    assert!(sel("").is_empty());
    assert!(!sel("a").is_empty());
    assert!(LabelSelector::everything().matches(&labels(&[])));
    let nothing = LabelSelector::nothing();
    assert!(!nothing.is_empty());
    assert!(!nothing.matches(&labels(&[])));
    assert!(!nothing.matches(&labels(&[("a", "b")])));
}

#[test]
fn requires_exact_match() {
    let s = sel("a=1,b in (2),c in (3,4),d!=5");
    assert_eq!(s.requires_exact_match("a"), Some("1"));
    assert_eq!(s.requires_exact_match("b"), Some("2"));
    assert_eq!(s.requires_exact_match("c"), None);
    assert_eq!(s.requires_exact_match("d"), None);
    assert_eq!(s.requires_exact_match("e"), None);
}

#[test]
fn syntax_errors() {
    let cases = [
        ("x=a,", "found '', expected: identifier after ','"),
        (
            ",x=a",
            "found ',', expected: !, identifier, or 'end of string'",
        ),
        ("x=a b", "found 'b', expected: ',' or 'end of string'"),
        (
            "x in a",
            "unable to parse requirement: found 'a' expected: '('",
        ),
        (
            "x (a)",
            "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt",
        ),
        (
            "x in (a b)",
            "unable to parse requirement: found 'b', expected: ',' or ')'",
        ),
        (
            "x in (a",
            "unable to parse requirement: found '', expected: ',' or ')'",
        ),
        (
            "x=(a)",
            "unable to parse requirement: found '(', expected: identifier",
        ),
        (
            "!=a",
            "found '!=', expected: !, identifier, or 'end of string'",
        ),
        (
            "!",
            "unable to parse requirement: found '', expected: identifier",
        ),
        ("!x=a", "found '=', expected: ',' or 'end of string'"),
        (
            "x in (=)",
            "unable to parse requirement: found '=', expected: ',', ')' or identifier",
        ),
    ];
    for (input, want) in cases {
        let err = LabelSelector::parse(input).expect_err(input);
        assert_eq!(err.to_string(), want, "input {input:?}");
    }
}

#[test]
fn key_and_value_validation_errors() {
    let err = LabelSelector::parse("a b=c").expect_err("space");
    assert_eq!(
        err.to_string(),
        "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"
    );

    let err = LabelSelector::parse("-bad=c").expect_err("bad key");
    let msg = err.to_string();
    assert!(msg.starts_with("unable to parse requirement: <nil>: Invalid value: \"-bad\": name part must consist of alphanumeric characters"), "{msg}");

    let long = "k".repeat(64);
    let msg = LabelSelector::parse(&long).expect_err("long").to_string();
    assert!(
        msg.contains("name part must be no more than 63 characters"),
        "{msg}"
    );
    assert!(LabelSelector::parse(&"k".repeat(63)).is_ok());

    let msg = LabelSelector::parse("Example.com/a")
        .expect_err("prefix")
        .to_string();
    assert!(
        msg.contains("prefix part a lowercase RFC 1123 subdomain"),
        "{msg}"
    );
    let msg = LabelSelector::parse("/a")
        .expect_err("empty prefix")
        .to_string();
    assert!(msg.contains("prefix part must be non-empty"), "{msg}");
    let msg = LabelSelector::parse("a/b/c")
        .expect_err("two slashes")
        .to_string();
    assert!(msg.contains("a qualified name must consist of"), "{msg}");
    let msg = LabelSelector::parse("a/")
        .expect_err("empty name")
        .to_string();
    assert!(msg.contains("name part must be non-empty"), "{msg}");

    let msg = LabelSelector::parse("a=-x")
        .expect_err("bad value")
        .to_string();
    assert_eq!(
        msg,
        "unable to parse requirement: values[0][a]: Invalid value: \"-x\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
    );
    let msg = LabelSelector::parse(&format!("a={}", "v".repeat(64)))
        .expect_err("long value")
        .to_string();
    assert!(msg.contains("must be no more than 63 characters"), "{msg}");
    let msg = LabelSelector::parse("a in (ok,b@d)")
        .expect_err("bad in value")
        .to_string();
    assert!(
        msg.contains("values[0][a]: Invalid value: \"b@d\""),
        "{msg}"
    );

    let msg = LabelSelector::parse("a>b")
        .expect_err("gt non-int")
        .to_string();
    assert!(
        msg.contains("for 'Gt', 'Lt' operators, the value must be an integer"),
        "{msg}"
    );
    let msg = LabelSelector::parse("a>")
        .expect_err("gt empty")
        .to_string();
    assert!(msg.contains("the value must be an integer"), "{msg}");
    assert!(LabelSelector::parse("key.with-dash.ok/Na.me_1=V-al.u_e").is_ok());
    // Underscores and capitals are fine in the name, not in the DNS prefix.
    assert!(LabelSelector::parse("under_score.io/a").is_err());
    assert!(LabelSelector::parse(&format!("{}/a", "p".repeat(254))).is_err());
    assert!(LabelSelector::parse(&format!("{}/a", "p".repeat(253))).is_ok());
    assert!(LabelSelector::parse("é=a").is_err());
}

#[test]
fn nul_byte_ends_input_like_go() {
    // Kubernetes reads a NUL as end of input where a token starts, and as a
    // (consumed) terminator inside a token.
    assert_eq!(sel("a \0,b=c").to_string(), "a");
    assert_eq!(sel("\0garbage!").to_string(), "");
    assert_eq!(sel("a\0,b=c").to_string(), "a,b=c");
    assert_eq!(sel("a,\0b").to_string(), "a,b");
    assert!(LabelSelector::parse("a, \0b").is_err());
}

#[test]
fn gt_lt_integer_semantics() {
    let l = labels(&[("n", "-3"), ("m", "notanint")]);
    assert!(sel("n<0").matches(&l));
    assert!(!sel("n>0").matches(&l));
    assert!(!sel("m>0").matches(&l));
    assert!(!sel("m<0").matches(&l));
    let big = labels(&[("n", "99999999999999999999")]);
    assert!(
        !sel("n>1").matches(&big),
        "overflowing label value is not an integer"
    );
}

#[test]
fn metav1_label_selector_json() {
    let v = serde_json::json!({
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["front", "edge"]},
            {"key": "env", "operator": "NotIn", "values": ["prod"]},
            {"key": "team", "operator": "Exists"},
            {"key": "legacy", "operator": "DoesNotExist", "values": []}
        ]
    });
    let s = LabelSelector::from_label_selector_json(&v).expect("valid");
    assert_eq!(
        s.to_string(),
        "app=web,env notin (prod),!legacy,team,tier in (edge,front)"
    );
    assert!(s.matches(&labels(&[("app", "web"), ("tier", "edge"), ("team", "x")])));
    assert!(!s.matches(&labels(&[("app", "web"), ("tier", "edge")])));
    assert!(!s.matches(&labels(&[
        ("app", "web"),
        ("tier", "edge"),
        ("team", "x"),
        ("env", "prod")
    ])));

    let empty = LabelSelector::from_label_selector_json(&serde_json::json!({})).expect("{}");
    assert!(empty.is_empty());
    assert!(empty.matches(&labels(&[("any", "thing")])));
    let empty2 = LabelSelector::from_label_selector_json(
        &serde_json::json!({"matchLabels": {}, "matchExpressions": []}),
    )
    .expect("empty lists");
    assert!(empty2.matches(&labels(&[])));

    let null = LabelSelector::from_label_selector_json(&Value::Null).expect("null");
    assert!(!null.matches(&labels(&[])));
    assert!(null.is_nothing());
}

#[test]
fn metav1_label_selector_json_errors() {
    let bad = [
        (serde_json::json!([]), "expected an object"),
        (serde_json::json!({"matchLabels": []}), "matchLabels"),
        (
            serde_json::json!({"matchLabels": {"a": 1}}),
            "matchLabels[a]",
        ),
        (
            serde_json::json!({"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["b"]}]}),
            "\"Equals\" is not a valid label selector operator",
        ),
        (
            serde_json::json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}),
            "for 'in', 'notin' operators, values set can't be empty",
        ),
        (
            serde_json::json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
            "values set must be empty for exists and does not exist",
        ),
        (
            serde_json::json!({"matchExpressions": [{"key": "a", "operator": "In", "values": [1]}]}),
            "matchExpressions[0].values[0]",
        ),
        (
            serde_json::json!({"matchExpressions": [{"key": "b@d", "operator": "Exists"}]}),
            "key: Invalid value: \"b@d\"",
        ),
        (
            serde_json::json!({"matchLabels": {"a": "b c"}}),
            "values[0][a]: Invalid value: \"b c\"",
        ),
        (
            serde_json::json!({"matchExpressions": {}}),
            "matchExpressions",
        ),
    ];
    for (v, want) in bad {
        let err = LabelSelector::from_label_selector_json(&v).expect_err(&v.to_string());
        assert!(err.to_string().contains(want), "{v}: {err}");
    }
}

#[test]
fn requirement_new_validates() {
    assert!(Requirement::new("a", Operator::Equals, vec![]).is_err());
    assert!(Requirement::new("a", Operator::Equals, vec!["x".into(), "y".into()]).is_err());
    assert!(Requirement::new("a", Operator::GreaterThan, vec!["1".into()]).is_ok());
    let err = Requirement::new("", Operator::In, vec![]).expect_err("two errors");
    let msg = err.to_string();
    assert!(
        msg.starts_with('[') && msg.contains("values set can't be empty"),
        "{msg}"
    );
}

#[test]
fn field_selector_basic() {
    let f: FieldSelector = "metadata.name=foo,status.phase!=Running"
        .parse()
        .expect("parse");
    let reqs: Vec<_> = f.requirements().collect();
    assert_eq!(
        reqs,
        vec![
            ("metadata.name", Op::Equals, "foo"),
            ("status.phase", Op::NotEquals, "Running")
        ]
    );
    assert_eq!(f.single_value("metadata.name"), Some("foo"));
    assert_eq!(f.single_value("status.phase"), None);
    assert_eq!(f.single_value("spec.nodeName"), None);

    let mut fields = BTreeMap::new();
    fields.insert("metadata.name".to_string(), "foo".to_string());
    fields.insert("status.phase".to_string(), "Pending".to_string());
    assert!(f.matches(&fields));
    fields.insert("status.phase".to_string(), "Running".to_string());
    assert!(!f.matches(&fields));

    let d: FieldSelector = "a==b".parse().expect("==");
    assert_eq!(d.single_value("a"), Some("b"));
    assert_eq!(d.to_string(), "a=b");
}

#[test]
fn field_selector_missing_field_is_empty_string() {
    let fields = BTreeMap::new();
    assert!(FieldSelector::parse("spec.nodeName=")
        .expect("p")
        .matches(&fields));
    assert!(!FieldSelector::parse("spec.nodeName=n1")
        .expect("p")
        .matches(&fields));
    assert!(FieldSelector::parse("spec.nodeName!=n1")
        .expect("p")
        .matches(&fields));
    assert!(!FieldSelector::parse("spec.nodeName!=")
        .expect("p")
        .matches(&fields));
    assert!(FieldSelector::parse("").expect("p").matches(&fields));
    assert!(FieldSelector::parse("").expect("p").is_empty());
    assert!(FieldSelector::parse(",,").expect("p").is_empty());
}

#[test]
fn field_selector_escaping() {
    let f = FieldSelector::parse(r"a=x\,y\=z\\w,b=c").expect("parse");
    let reqs: Vec<_> = f.requirements().collect();
    assert_eq!(
        reqs,
        vec![("a", Op::Equals, r"x,y=z\w"), ("b", Op::Equals, "c")]
    );
    assert_eq!(f.to_string(), r"a=x\,y\=z\\w,b=c");
    assert_eq!(escape_field_value(r"a,b=c\d"), r"a\,b\=c\\d");
    assert_eq!(
        unescape_field_value(&escape_field_value("x=,\\y")).expect("roundtrip"),
        "x=,\\y"
    );

    assert_eq!(
        FieldSelector::parse(r"a=b\c")
            .expect_err("bad escape")
            .to_string(),
        r"invalid field selector: invalid escape sequence: \c"
    );
    assert_eq!(
        FieldSelector::parse(r"a=b\")
            .expect_err("trailing")
            .to_string(),
        r"invalid field selector: invalid escape sequence: \"
    );
    assert_eq!(
        FieldSelector::parse("a=b=c")
            .expect_err("unescaped")
            .to_string(),
        "invalid field selector: unescaped character in value: '='"
    );
    assert_eq!(
        FieldSelector::parse("a=b,c")
            .expect_err("no op")
            .to_string(),
        "invalid selector: 'a=b,c'; can't understand 'c'"
    );
}

#[test]
fn field_selector_operator_split_and_order() {
    // The first operator occurrence wins; `!=` and `==` are checked before `=`.
    let f = FieldSelector::parse("a!==b").expect_err("'=b' has unescaped =");
    assert!(matches!(f, SelectorError::UnescapedChar('=')));
    let f = FieldSelector::parse("x!=y").expect("parse");
    assert_eq!(f.requirements().next(), Some(("x", Op::NotEquals, "y")));
    let f = FieldSelector::parse("a=1,a=2").expect("parse");
    assert_eq!(f.single_value("a"), Some("1"));
    assert!(!f.matches(&[("a".to_string(), "1".to_string())].into_iter().collect()));
    // Terms are sorted by their raw text, like Kubernetes.
    let f = FieldSelector::parse("z=1,b=2").expect("parse");
    assert_eq!(f.to_string(), "b=2,z=1");
    // Whitespace is significant in field selectors.
    let f = FieldSelector::parse(" a = b").expect("parse");
    assert_eq!(f.requirements().next(), Some((" a ", Op::Equals, " b")));
    // Escaped comma in the key side is kept verbatim in the key.
    let f = FieldSelector::parse(r"a\,b=c").expect("parse");
    assert_eq!(f.requirements().next(), Some((r"a\,b", Op::Equals, "c")));
}

#[test]
fn large_selectors_parse_in_linear_time() {
    let values: Vec<String> = (0..50_000).map(|i| format!("v{i}")).collect();
    let s = sel(&format!("k in ({})", values.join(",")));
    assert_eq!(s.requirements()[0].values().len(), 50_000);
    assert!(s.matches(&labels(&[("k", "v49999")])));
    let bad: Vec<String> = (0..20_000).map(|i| format!("-{i}")).collect();
    let err = LabelSelector::parse(&format!("k in ({})", bad.join(","))).expect_err("bad");
    assert!(err.to_string().contains("values[19999][k]"));
    let f = FieldSelector::parse(&vec!["a=b"; 50_000].join(",")).expect("field");
    assert_eq!(f.requirements().count(), 50_000);
    assert!(from_label_selector_json(&Value::Null)
        .expect("null")
        .is_nothing());
}

#[test]
fn selectors_never_panic_on_odd_input() {
    let inputs = [
        "(",
        ")",
        "!",
        "!!",
        "=",
        "==",
        "!=",
        "<",
        ">",
        "in",
        "notin",
        "a in",
        "a notin (",
        "a in (,,,",
        "é",
        "a=é",
        "\u{0}",
        "a,\u{0}",
        "a in (b,\u{0}",
        "x=\u{0}y",
        "!\u{0}",
        "a\u{0}",
        "((((",
        "a in (b))",
        "a>>1",
        "a<=1",
        "a=>1",
        "a===b",
    ];
    for i in inputs {
        let _ = LabelSelector::parse(i);
        let _ = FieldSelector::parse(i);
    }
}
