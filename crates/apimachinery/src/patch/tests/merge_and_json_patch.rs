use super::*;

// --- JSON merge patch (RFC 7386) -------------------------------------------------

#[test]
fn merge_patch_rfc7386_appendix_a() {
    let cases = [
        (json!({"a":"b"}), json!({"a":"c"}), json!({"a":"c"})),
        (json!({"a":"b"}), json!({"b":"c"}), json!({"a":"b","b":"c"})),
        (json!({"a":"b"}), json!({"a":null}), json!({})),
        (
            json!({"a":"b","b":"c"}),
            json!({"a":null}),
            json!({"b":"c"}),
        ),
        (json!({"a":["b"]}), json!({"a":"c"}), json!({"a":"c"})),
        (json!({"a":"c"}), json!({"a":["b"]}), json!({"a":["b"]})),
        (
            json!({"a":{"b":"c"}}),
            json!({"a":{"b":"d","c":null}}),
            json!({"a":{"b":"d"}}),
        ),
        (json!({"a":[{"b":"c"}]}), json!({"a":[1]}), json!({"a":[1]})),
        (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
        (json!({"a":"b"}), json!(["c"]), json!(["c"])),
        (json!({"a":"foo"}), json!(null), json!(null)),
        (json!({"a":"foo"}), json!("bar"), json!("bar")),
        (json!({"e":null}), json!({"a":1}), json!({"e":null,"a":1})),
        (json!([1, 2]), json!({"a":"b","c":null}), json!({"a":"b"})),
        (
            json!({}),
            json!({"a":{"bb":{"ccc":null}}}),
            json!({"a":{"bb":{}}}),
        ),
    ];
    for (target, patch, want) in cases {
        assert_eq!(merge_patch(&target, &patch), want, "{target} + {patch}");
    }
}

#[test]
fn merge_patch_keeps_key_order_and_arrays_verbatim() {
    let out = merge_patch(
        &json!({"z":1,"a":{"y":1,"b":2},"m":3}),
        &json!({"a":{"b":null,"c":[null,{"d":null}]},"n":4,"z":5}),
    );
    assert_eq!(keys(&out), ["z", "a", "m", "n"]);
    assert_eq!(
        out,
        json!({"z":5,"a":{"y":1,"c":[null,{"d":null}]},"m":3,"n":4})
    );
}

#[test]
fn merge_patch_deep_input_does_not_overflow() {
    let mut patch = json!({"leaf": null});
    for _ in 0..5000 {
        patch = wrap("n", patch);
    }
    let out = merge_patch(&json!({}), &patch);
    assert_eq!(depth_of(&out), 5000);
    // Dismantle iteratively so the test's own drop does not recurse 5000 deep.
    for v in [out, patch] {
        let mut stack = vec![v];
        while let Some(mut v) = stack.pop() {
            if let Value::Object(m) = &mut v {
                stack.extend(std::mem::take(m).into_iter().map(|(_, v)| v));
            }
        }
    }
}

// --- JSON patch (RFC 6902) -------------------------------------------------------

fn jp(doc: Value, patch: Value) -> Result<Value, PatchError> {
    json_patch(&doc, &patch)
}

#[test]
fn json_patch_rfc6902_appendix_a() {
    // A.1 .. A.8, A.10, A.11, A.14, A.16
    let ok = [
        (
            json!({"foo":"bar"}),
            json!([{"op":"add","path":"/baz","value":"qux"}]),
            json!({"baz":"qux","foo":"bar"}),
        ),
        (
            json!({"foo":["bar","baz"]}),
            json!([{"op":"add","path":"/foo/1","value":"qux"}]),
            json!({"foo":["bar","qux","baz"]}),
        ),
        (
            json!({"baz":"qux","foo":"bar"}),
            json!([{"op":"remove","path":"/baz"}]),
            json!({"foo":"bar"}),
        ),
        (
            json!({"foo":["bar","qux","baz"]}),
            json!([{"op":"remove","path":"/foo/1"}]),
            json!({"foo":["bar","baz"]}),
        ),
        (
            json!({"baz":"qux","foo":"bar"}),
            json!([{"op":"replace","path":"/baz","value":"boo"}]),
            json!({"baz":"boo","foo":"bar"}),
        ),
        (
            json!({"foo":{"bar":"baz","waldo":"fred"},"qux":{"corge":"grault"}}),
            json!([{"op":"move","from":"/foo/waldo","path":"/qux/thud"}]),
            json!({"foo":{"bar":"baz"},"qux":{"corge":"grault","thud":"fred"}}),
        ),
        (
            json!({"foo":["all","grass","cows","eat"]}),
            json!([{"op":"move","from":"/foo/1","path":"/foo/3"}]),
            json!({"foo":["all","cows","eat","grass"]}),
        ),
        (
            json!({"baz":"qux","foo":["a",2,"c"]}),
            json!([{"op":"test","path":"/baz","value":"qux"},{"op":"test","path":"/foo/1","value":2}]),
            json!({"baz":"qux","foo":["a",2,"c"]}),
        ),
        (
            json!({"foo":"bar"}),
            json!([{"op":"add","path":"/child","value":{"grandchild":{}}}]),
            json!({"foo":"bar","child":{"grandchild":{}}}),
        ),
        (
            json!({"foo":"bar"}),
            json!([{"op":"add","path":"/baz","value":"qux","xyz":123}]),
            json!({"foo":"bar","baz":"qux"}),
        ),
        (
            json!({"/":9,"~1":10}),
            json!([{"op":"test","path":"/~01","value":10}]),
            json!({"/":9,"~1":10}),
        ),
        (
            json!({"foo":["bar"]}),
            json!([{"op":"add","path":"/foo/-","value":["abc","def"]}]),
            json!({"foo":["bar",["abc","def"]]}),
        ),
    ];
    for (doc, patch, want) in ok {
        assert_eq!(
            jp(doc.clone(), patch.clone()).expect("apply"),
            want,
            "{doc} + {patch}"
        );
    }

    // A.9 test failure, A.12 add to a nonexistent target, A.15 string vs number.
    assert!(matches!(
        jp(
            json!({"baz":"qux"}),
            json!([{"op":"test","path":"/baz","value":"bar"}])
        ),
        Err(PatchError::TestFailed { index: 0, .. })
    ));
    assert!(matches!(
        jp(
            json!({"foo":"bar"}),
            json!([{"op":"add","path":"/baz/bat","value":"qux"}])
        ),
        Err(PatchError::OperationFailed { index: 0, .. })
    ));
    assert!(matches!(
        jp(
            json!({"/":9,"~1":10}),
            json!([{"op":"test","path":"/~01","value":"10"}])
        ),
        Err(PatchError::TestFailed { .. })
    ));
}

#[test]
fn json_patch_pointer_escapes_and_root() {
    let doc = json!({"a/b":{"m~n":1}});
    assert_eq!(
        jp(
            doc.clone(),
            json!([{"op":"replace","path":"/a~1b/m~0n","value":2}])
        )
        .expect("escaped"),
        json!({"a/b":{"m~n":2}})
    );
    let err = jp(
        doc.clone(),
        json!([{"op":"replace","path":"/a~2b","value":2}]),
    )
    .expect_err("bad escape");
    assert!(err.to_string().contains("invalid escape"), "{err}");
    let err = jp(doc.clone(), json!([{"op":"add","path":"a","value":2}])).expect_err("no slash");
    assert!(matches!(err, PatchError::InvalidOperation { .. }), "{err}");
    assert_eq!(
        jp(doc.clone(), json!([{"op":"replace","path":"","value":[1]}])).expect("root"),
        json!([1])
    );
    assert_eq!(
        jp(doc.clone(), json!([{"op":"add","path":"","value":{"x":1}}])).expect("root add"),
        json!({"x":1})
    );
    assert!(jp(doc, json!([{"op":"remove","path":""}])).is_err());
    // An empty key is a real member name.
    assert_eq!(
        jp(json!({}), json!([{"op":"add","path":"/","value":1}])).expect("empty key"),
        json!({"":1})
    );
}

#[test]
fn json_patch_arrays() {
    let doc = json!({"a":[1,2,3]});
    let bad = [
        json!([{"op":"add","path":"/a/4","value":0}]),
        json!([{"op":"add","path":"/a/01","value":0}]),
        json!([{"op":"add","path":"/a/-1","value":0}]),
        json!([{"op":"remove","path":"/a/3"}]),
        json!([{"op":"remove","path":"/a/-"}]),
        json!([{"op":"replace","path":"/a/x","value":0}]),
        json!([{"op":"replace","path":"/a/99999999999999999999999","value":0}]),
        json!([{"op":"add","path":"/a/0/x","value":0}]),
    ];
    for p in bad {
        assert!(jp(doc.clone(), p.clone()).is_err(), "{p} should fail");
    }
    assert_eq!(
        jp(doc.clone(), json!([{"op":"add","path":"/a/3","value":4}])).expect("append by index"),
        json!({"a":[1,2,3,4]})
    );
    assert_eq!(
        jp(doc, json!([{"op":"add","path":"/a/0","value":0}])).expect("prepend"),
        json!({"a":[0,1,2,3]})
    );
}

#[test]
fn json_patch_copy_move_test_semantics() {
    let doc = json!({"a":{"b":[1,{"c":2}]},"n":1});
    assert_eq!(
        jp(
            doc.clone(),
            json!([{"op":"copy","from":"/a/b/1","path":"/d"}])
        )
        .expect("copy"),
        json!({"a":{"b":[1,{"c":2}]},"n":1,"d":{"c":2}})
    );
    let err = jp(
        doc.clone(),
        json!([{"op":"move","from":"/a","path":"/a/b/x"}]),
    )
    .expect_err("into child");
    assert!(err.to_string().contains("own children"), "{err}");
    assert_eq!(
        jp(doc.clone(), json!([{"op":"move","from":"/a","path":"/a"}])).expect("self move"),
        doc
    );
    assert!(jp(doc.clone(), json!([{"op":"move","from":"/zz","path":"/a"}])).is_err());
    // Numbers compare by value in `test`.
    assert!(jp(doc.clone(), json!([{"op":"test","path":"/n","value":1.0}])).is_ok());
    assert!(jp(
        doc.clone(),
        json!([{"op":"test","path":"/a","value":{"b":[1,{"c":2.0}]}}])
    )
    .is_ok());
    assert!(jp(
        doc.clone(),
        json!([{"op":"test","path":"/a","value":{"b":[1]}}])
    )
    .is_err());
    assert!(jp(
        doc.clone(),
        json!([{"op":"test","path":"/missing","value":null}])
    )
    .is_err());
    // A failed operation leaves no partial result: the whole patch fails.
    let err = jp(
        doc,
        json!([{"op":"add","path":"/x","value":1},{"op":"remove","path":"/nope"}]),
    )
    .expect_err("second op fails");
    assert!(
        matches!(err, PatchError::OperationFailed { index: 1, .. }),
        "{err}"
    );
}

#[test]
fn json_patch_malformed_operations() {
    let doc = json!({"a":1});
    let cases = [
        (json!({"op":"add"}), "must be an array"),
        (json!([1]), "must be an object"),
        (json!([{"path":"/a"}]), "member \"op\" is missing"),
        (
            json!([{"op":"add","value":1}]),
            "member \"path\" is missing",
        ),
        (
            json!([{"op":"add","path":"/b"}]),
            "needs a \"value\" member",
        ),
        (
            json!([{"op":"replace","path":"/a"}]),
            "needs a \"value\" member",
        ),
        (
            json!([{"op":"test","path":"/a"}]),
            "needs a \"value\" member",
        ),
        (
            json!([{"op":"move","path":"/b"}]),
            "member \"from\" is missing",
        ),
        (
            json!([{"op":"copy","path":"/b","from":5}]),
            "must be a string",
        ),
        (json!([{"op":"frobnicate","path":"/a"}]), "unknown op"),
        (json!([{"op":1,"path":"/a"}]), "must be a string"),
    ];
    for (patch, want) in cases {
        let err = jp(doc.clone(), patch.clone()).expect_err("malformed");
        assert!(err.to_string().contains(want), "{patch}: {err}");
    }
    // `value: null` is a value.
    assert_eq!(
        jp(doc, json!([{"op":"add","path":"/b","value":null}])).expect("null value"),
        json!({"a":1,"b":null})
    );
}

#[test]
fn json_patch_limits() {
    let ops: Vec<Value> = (0..=MAX_JSON_PATCH_OPERATIONS)
        .map(|_| json!({"op":"test","path":"","value":{}}))
        .collect();
    assert!(matches!(
        jp(json!({}), Value::Array(ops)),
        Err(PatchError::TooManyOperations(_))
    ));

    // Doubling a document with `copy` is cut off by the copy budget.
    let ops: Vec<Value> = (0..64)
        .map(|i| json!({"op":"copy","from":"","path":format!("/k{i}")}))
        .collect();
    let err = jp(json!({"seed":[1,2,3,4,5,6,7,8]}), Value::Array(ops)).expect_err("copy bomb");
    assert!(err.to_string().contains("copies more than"), "{err}");

    // Growing depth with `copy` is cut off by the depth limit.
    let ops: Vec<Value> = (0..MAX_DEPTH + 5)
        .map(|_| json!({"op":"copy","from":"","path":"/a"}))
        .collect();
    let err = jp(json!({"a":1}), Value::Array(ops.clone())).expect_err("depth bomb");
    assert!(err.to_string().contains("levels deep"), "{err}");
}
