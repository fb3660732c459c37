//! The Kubernetes libraries and the extensions, through admission-policy
//! expressions.

use crate::compile_expression;
use serde_json::{json, Value};

fn eval(expr: &str, vars: &[(&str, &Value)]) -> Result<bool, String> {
    compile_expression(expr)?.eval_bool(vars)
}

/// Every expression evaluates to true.
fn all_true(exprs: &[&str]) {
    for expr in exprs {
        assert_eq!(eval(expr, &[]), Ok(true), "{expr}");
    }
}

#[test]
fn ip_and_cidr() {
    all_true(&[
        "isIP('10.0.0.1') && isIP('fd00::1') && !isIP('10.0.0.01') && !isIP('fe80::1%eth0') && !isIP('::ffff:10.0.0.1')",
        "ip('10.0.0.1').family() == 4 && ip('::1').family() == 6 && ip('::1').isLoopback()",
        "ip('0.0.0.0').isUnspecified() && ip('169.254.1.1').isLinkLocalUnicast() && ip('ff02::1').isLinkLocalMulticast()",
        "ip('10.1.2.3').isGlobalUnicast() && !ip('127.0.0.1').isGlobalUnicast()",
        "string(ip('2001:DB8::1')) == '2001:db8::1' && ip.isCanonical('2001:db8::1') && !ip.isCanonical('2001:DB8::1')",
        "ip('10.0.0.1') == ip('10.0.0.1') && ip('10.0.0.1') != ip('10.0.0.2')",
        "isCIDR('10.0.0.0/8') && !isCIDR('10.0.0.0/33') && !isCIDR('10.0.0.0') && !isCIDR('10.0.0.0/08')",
        "cidr('10.0.0.0/8').containsIP('10.1.2.3') && cidr('10.0.0.0/8').containsIP(ip('10.1.2.3')) && !cidr('10.0.0.0/8').containsIP('11.0.0.1')",
        "cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16') && !cidr('10.1.0.0/16').containsCIDR('10.0.0.0/8')",
        "cidr('10.1.2.3/8').prefixLength() == 8 && string(cidr('10.1.2.3/8').masked()) == '10.0.0.0/8' && cidr('10.1.2.3/8').ip() == ip('10.1.2.3')",
    ]);
    assert_eq!(
        eval("ip('nope').family() == 4", &[]),
        Err("IP Address \"nope\" parse error during conversion from string: ParseAddr(\"nope\"): unable to parse IP".to_owned())
    );
}

#[test]
fn urls() {
    all_true(&[
        "isURL('https://example.com:8443/a%20b?x=1&x=2&y') && isURL('/path') && !isURL('example.com') && !isURL('https://a.com/%zz')",
        "!isURL('http://host:port/') && !isURL('')",
        "url('https://Example.com:8443/a/b').getScheme() == 'https' && url('https://Example.com:8443/a/b').getHost() == 'Example.com:8443'",
        "url('https://example.com:8443/').getHostname() == 'example.com' && url('https://example.com:8443/').getPort() == '8443'",
        "url('https://[::1]:80/').getHostname() == '::1' && url('https://[::1]:80/').getPort() == '80'",
        "url('https://example.com/a b').getEscapedPath() == '/a%20b' && url('/p%2Fq').getEscapedPath() == '/p%2Fq'",
        "url('https://example.com/?x=1&x=2&y=a+b').getQuery() == {'x': ['1', '2'], 'y': ['a b']}",
    ]);
}

#[test]
fn quantities() {
    all_true(&[
        "isQuantity('1Gi') && isQuantity('100m') && isQuantity('1e3') && isQuantity('-1.5') && !isQuantity('1GB') && !isQuantity('')",
        // resource.ParseQuantity reads "." as zero (no integer digits means 0).
        "isQuantity('.') && quantity('.') == quantity('0')",
        "quantity('1Gi').isGreaterThan(quantity('1000Mi')) && quantity('1k').isLessThan(quantity('1Ki'))",
        "quantity('1Gi').asInteger() == 1073741824 && quantity('1.5').isInteger() == false && quantity('100m').asApproximateFloat() == 0.1",
        "quantity('1').add(quantity('500m')) == quantity('1500m') && quantity('2').sub(1) == quantity('1') && quantity('1').add(2) == quantity('3')",
        "quantity('-2').sign() == -1 && quantity('0').sign() == 0 && quantity('1e3').compareTo(quantity('1k')) == 0",
    ]);
    assert_eq!(
        eval("quantity('1.5').asInteger() == 1", &[]),
        Err("cannot convert value to integer".to_owned())
    );
}

#[test]
fn strings_lists_regex_and_sets() {
    all_true(&[
        "'a/b/c'.split('/') == ['a', 'b', 'c'] && 'a/b/c'.split('/')[0].size() == 1 && 'hello'.substring(1, 3) == 'el'",
        "'ABC'.lowerAscii() == 'abc' && 'abc'.upperAscii() == 'ABC' && '  x '.trim() == 'x' && 'aXa'.replace('a', 'b') == 'bXb'",
        "'abcabc'.indexOf('c') == 2 && 'abcabc'.lastIndexOf('c') == 5 && ['a', 'b'].join('-') == 'a-b'",
        "'%s has %d items'.format(['list', 3]) == 'list has 3 items'",
        "[1, 2, 3].isSorted() && ![3, 1].isSorted() && [1, 2, 3].sum() == 6 && [1.5, 2.5].sum() == 4.0 && [].sum() == 0",
        "[3, 1, 2].min() == 1 && ['b', 'c', 'a'].max() == 'c' && [1, 2, 1].indexOf(1) == 0 && [1, 2, 1].lastIndexOf(1) == 2",
        "[1, 2, 3].slice(1, 3) == [2, 3] && [[1], [2]].flatten() == [1, 2] && [3, 1, 2].sort() == [1, 2, 3]",
        "'abc123def456'.find('[0-9]+') == '123' && 'abc'.find('[0-9]+') == '' && 'a1b2c3'.findAll('[0-9]') == ['1', '2', '3']",
        "'a1b2c3'.findAll('[0-9]', 2) == ['1', '2'] && 'example.com'.matches(r'''^[a-z.]+$''')",
        "sets.contains([1, 2, 3], [1, 2]) && sets.equivalent([1, 2], [2, 1, 1]) && sets.intersects([1, 2], [2, 3]) && !sets.intersects([1], [2])",
        "duration('1h30m') == duration('90m') && duration('1h') > duration('59m') && timestamp('2024-01-01T00:00:00Z') + duration('24h') == timestamp('2024-01-02T00:00:00Z')",
        "[1, 2, 3].exists_one(x, x == 2) && [1, 2, 3].filter(x, x > 1).map(x, x * 10) == [20, 30] && {'a': 1}.all(k, k == 'a')",
    ]);
    assert_eq!(
        eval("[].min() == 1", &[]),
        Err("min called on empty list".to_owned())
    );
}

#[test]
fn admission_policy_variables() {
    let object =
        json!({"metadata": {"name": "web", "labels": {"app": "web"}}, "spec": {"replicas": 3}});
    let request = json!({"operation": "CREATE", "userInfo": {"username": "alice"}});
    let vars = [("object", &object), ("request", &request)];
    all_true(&["true"]);
    assert_eq!(
        eval(
            "object.spec.replicas <= 5 && request.operation == 'CREATE'",
            &vars
        ),
        Ok(true)
    );
    // Unbound variables are null, as `params` without a param kind and
    // `oldObject` on create.
    assert_eq!(eval("oldObject == null && params == null", &vars), Ok(true));
    assert_eq!(
        eval(
            "object.?spec.?paused.orValue(false) == false && has(object.metadata.labels.app)",
            &vars
        ),
        Ok(true)
    );
    assert_eq!(
        eval("object.spec.paused", &vars),
        Err("no such key: paused".to_owned())
    );
    assert_eq!(
        eval("object.spec.replicas", &vars),
        Err("expression must evaluate to a bool".to_owned())
    );
    let message = compile_expression(
        "'replicas of ' + object.metadata.name + ': ' + string(object.spec.replicas)",
    )
    .and_then(|e| e.eval_string(&vars));
    assert_eq!(message, Ok("replicas of web: 3".to_owned()));
    assert!(
        matches!(compile_expression("authorizer.allowed()"), Err(e) if e.contains("undeclared reference to 'authorizer'"))
    );
}

/// Without a schema to bound it, a runaway expression stops at upstream's
/// per-call limit.
#[test]
fn runaway_expressions_hit_the_cost_limit() {
    let items: Vec<Value> = (0..200)
        .collect::<Vec<i32>>()
        .into_iter()
        .map(Value::from)
        .collect();
    let object = json!({"items": items});
    let expr = "object.items.all(a, object.items.all(b, object.items.all(c, a + b + c >= 0)))";
    assert_eq!(
        eval(expr, &[("object", &object)]),
        Err("operation cancelled: actual cost limit exceeded".to_owned())
    );
    assert_eq!(
        eval(
            "object.items.all(a, object.items.all(b, a + b >= 0))",
            &[("object", &object)]
        ),
        Ok(true)
    );
}
