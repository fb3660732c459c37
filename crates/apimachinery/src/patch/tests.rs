use super::*;
use serde_json::json;

fn smp(original: Value, patch: Value, kind: &str) -> Value {
    strategic_merge_patch(&original, &patch, kind)
        .unwrap_or_else(|e| panic!("strategic merge patch failed: {e}"))
}

fn smp_err(original: Value, patch: Value, kind: &str) -> String {
    match strategic_merge_patch(&original, &patch, kind) {
        Ok(v) => panic!("expected an error, got {v}"),
        Err(e) => e.to_string(),
    }
}

fn keys(v: &Value) -> Vec<&str> {
    v.as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

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

// --- Strategic merge patch --------------------------------------------------------

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "annotations": {"keep": "me"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {"name": "web", "image": "nginx:1.1",
                         "ports": [{"containerPort": 80, "protocol": "TCP"}],
                         "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
                        {"name": "sidecar", "image": "busybox"}
                    ],
                    "tolerations": [{"key": "k1", "operator": "Exists"}],
                    "volumes": [{"name": "data", "emptyDir": {}}]
                }
            }
        }
    })
}

#[test]
fn kubectl_apply_set_element_order_patch() {
    let patch = json!({
        "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}"}},
        "spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "web"}, {"name": "sidecar"}],
            "containers": [{"image": "nginx:1.2", "name": "web"}]
        }}}
    });
    let out = smp(deployment(), patch, "Deployment");
    let mut want = deployment();
    want["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] =
        json!("{...}");
    want["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:1.2");
    assert_eq!(out, want);
    // Key order: untouched keys stay, new ones are appended.
    assert_eq!(
        keys(&out["metadata"]["annotations"]),
        ["keep", "kubectl.kubernetes.io/last-applied-configuration"]
    );
}

#[test]
fn kubectl_apply_shape_from_the_brief() {
    let patch = json!({"metadata":{"annotations":{"x":"y"}},"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"web"}],"containers":[{"image":"nginx:1.2","name":"web"}]}}}});
    let out = smp(deployment(), patch, "Deployment");
    let containers = &out["spec"]["template"]["spec"]["containers"];
    assert_eq!(
        containers
            .as_array()
            .map(|a| a.iter().map(|c| c["name"].clone()).collect::<Vec<_>>()),
        Some(vec![json!("web"), json!("sidecar")])
    );
    assert_eq!(containers[0]["image"], "nginx:1.2");
    assert_eq!(
        containers[0]["ports"],
        json!([{"containerPort": 80, "protocol": "TCP"}])
    );
    assert_eq!(out["metadata"]["annotations"], json!({"keep":"me","x":"y"}));
}

#[test]
fn set_element_order_reorders_existing_list() {
    let original = json!({"spec":{"containers":[{"name":"a"},{"name":"b"},{"name":"c"}]}});
    let patch =
        json!({"spec":{"$setElementOrder/containers":[{"name":"c"},{"name":"a"},{"name":"b"}]}});
    assert_eq!(
        smp(original, patch, "Pod"),
        json!({"spec":{"containers":[{"name":"c"},{"name":"a"},{"name":"b"}]}})
    );
}

#[test]
fn set_element_order_with_server_only_items() {
    // Items the patch does not mention keep their place relative to the live list.
    let original =
        json!({"spec":{"containers":[{"name":"a"},{"name":"b","image":"old"},{"name":"x"}]}});
    let patch = json!({"spec":{
        "$setElementOrder/containers":[{"name":"b"},{"name":"a"}],
        "containers":[{"name":"b","image":"new"}]
    }});
    assert_eq!(
        smp(original, patch, "Pod"),
        json!({"spec":{"containers":[{"name":"b","image":"new"},{"name":"a"},{"name":"x"}]}})
    );
}

#[test]
fn set_element_order_adds_new_items_in_order() {
    let original = json!({"spec":{"containers":[{"name":"a"},{"name":"c"}]}});
    let patch = json!({"spec":{
        "$setElementOrder/containers":[{"name":"a"},{"name":"b"},{"name":"c"}],
        "containers":[{"name":"b","image":"i"}]
    }});
    assert_eq!(
        smp(original, patch, "Pod"),
        json!({"spec":{"containers":[{"name":"a"},{"name":"b","image":"i"},{"name":"c"}]}})
    );
}

#[test]
fn set_element_order_for_a_new_list_and_for_primitives() {
    let original = json!({"metadata":{"finalizers":["a","b","c"]},"spec":{}});
    let patch = json!({
        "metadata":{"$setElementOrder/finalizers":["c","a","b"]},
        "spec":{"$setElementOrder/containers":[{"name":"y"},{"name":"x"}],
                "containers":[{"name":"y"},{"name":"x"}]}
    });
    assert_eq!(
        smp(original, patch, "Pod"),
        json!({"metadata":{"finalizers":["c","a","b"]},"spec":{"containers":[{"name":"y"},{"name":"x"}]}})
    );
}

#[test]
fn set_element_order_mismatch_is_an_error() {
    let original = json!({"spec":{"containers":[{"name":"a"},{"name":"b"}]}});
    let patch = json!({"spec":{
        "$setElementOrder/containers":[{"name":"a"},{"name":"b"}],
        "containers":[{"name":"b"},{"name":"a"}]
    }});
    let err = smp_err(original.clone(), patch, "Pod");
    assert!(
        err.contains("doesn't match $setElementOrder/containers list"),
        "{err}"
    );
    assert!(
        err.starts_with("strategic merge patch at spec.containers:"),
        "{err}"
    );

    let err = smp_err(
        original.clone(),
        json!({"spec":{"$setElementOrder/containers":{"name":"a"}}}),
        "Pod",
    );
    assert!(err.contains("must be a list"), "{err}");
    let err = smp_err(
        original,
        json!({"spec":{"$setElementOrderX/containers":[]}}),
        "Pod",
    );
    assert!(
        err.contains("invalid patch format of setElementOrder list"),
        "{err}"
    );
}

#[test]
fn kubectl_edit_removes_a_port_with_delete_directive() {
    let original = json!({"spec":{"containers":[{"name":"web","image":"nginx","ports":[{"containerPort":80},{"containerPort":8080}]}]}});
    let patch = json!({"spec":{
        "$setElementOrder/containers":[{"name":"web"}],
        "containers":[{
            "$setElementOrder/ports":[{"containerPort":443},{"containerPort":8080}],
            "name":"web",
            "ports":[{"containerPort":443},{"$patch":"delete","containerPort":80}]
        }]
    }});
    assert_eq!(
        smp(original, patch, "Pod"),
        json!({"spec":{"containers":[{"name":"web","image":"nginx","ports":[{"containerPort":443},{"containerPort":8080}]}]}})
    );
}

#[test]
fn env_merges_by_name() {
    let patch = json!({"spec":{"template":{"spec":{"containers":[
        {"name":"web","env":[{"name":"B","value":"3"},{"name":"C","value":"4"}]}
    ]}}}});
    let out = smp(deployment(), patch, "Deployment");
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"][0]["env"],
        json!([{"name":"A","value":"1"},{"name":"B","value":"3"},{"name":"C","value":"4"}])
    );
    // The other container is untouched.
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"][1],
        json!({"name":"sidecar","image":"busybox"})
    );
}

#[test]
fn env_entry_field_removed_with_null() {
    let original = json!({"spec":{"containers":[{"name":"c","env":[{"name":"A","value":"1","valueFrom":{"x":1}}]}]}});
    let patch = json!({"spec":{"containers":[{"name":"c","env":[{"name":"A","valueFrom":null}]}]}});
    assert_eq!(
        smp(original, patch, "Pod"),
        json!({"spec":{"containers":[{"name":"c","env":[{"name":"A","value":"1"}]}]}})
    );
}

/// Without `$setElementOrder`, Kubernetes puts patch items that are new to the
/// list *before* the live-only items (see `mergeSortedSlice`: a patch item missing
/// from the live list always wins the comparison); items present in both keep the
/// live order. kubectl's own documentation shows this (`kubectl patch` adding a
/// container lists the new container first).
#[test]
fn new_items_come_first_like_kubernetes() {
    let original = json!({"spec":{"containers":[{"name":"patch-demo-ctr","image":"nginx"}]}});
    let patch = json!({"spec":{"containers":[{"name":"patch-demo-ctr-2","image":"redis"}]}});
    assert_eq!(
        smp(original, patch, "Pod"),
        json!({"spec":{"containers":[
            {"name":"patch-demo-ctr-2","image":"redis"},
            {"name":"patch-demo-ctr","image":"nginx"}
        ]}})
    );
}

#[test]
fn service_ports_merge_by_port() {
    let original = json!({"kind":"Service","spec":{"type":"ClusterIP","ports":[
        {"name":"http","port":80,"targetPort":8080},
        {"name":"https","port":443,"targetPort":8443}
    ]}});
    let patch =
        json!({"spec":{"ports":[{"port":80,"targetPort":9090},{"port":8081,"name":"metrics"}]}});
    assert_eq!(
        smp(original, patch, "Service"),
        json!({"kind":"Service","spec":{"type":"ClusterIP","ports":[
            {"name":"http","port":80,"targetPort":9090},
            {"port":8081,"name":"metrics"},
            {"name":"https","port":443,"targetPort":8443}
        ]}})
    );
}

#[test]
fn merge_key_compares_json_types_like_go() {
    // 80 (an integer) and "80" (a string) are different merge keys.
    let original = json!({"spec":{"ports":[{"port":80,"name":"a"}]}});
    let patch = json!({"spec":{"ports":[{"port":"80","name":"b"}]}});
    assert_eq!(
        smp(original, patch, "Service"),
        json!({"spec":{"ports":[{"port":"80","name":"b"},{"port":80,"name":"a"}]}})
    );
}

#[test]
fn primitive_list_with_merge_strategy_is_unioned() {
    let original = json!({"metadata":{"name":"n","finalizers":["a","b"]}});
    let patch = json!({"metadata":{"finalizers":["c","a"]}});
    // Kubernetes orders patch items by the patch and interleaves live-only items.
    assert_eq!(
        smp(original.clone(), patch, "ConfigMap"),
        json!({"metadata":{"name":"n","finalizers":["c","a","b"]}})
    );
    let patch = json!({"metadata":{"finalizers":["b","c"]}});
    assert_eq!(
        smp(original, patch, "ConfigMap"),
        json!({"metadata":{"name":"n","finalizers":["a","b","c"]}})
    );
    let node =
        json!({"spec":{"podCIDRs":["10.0.0.0/24"],"taints":[{"key":"a","effect":"NoSchedule"}]}});
    let patch =
        json!({"spec":{"podCIDRs":["fd00::/64"],"taints":[{"key":"b","effect":"NoExecute"}]}});
    assert_eq!(
        smp(node, patch, "Node"),
        json!({"spec":{"podCIDRs":["fd00::/64","10.0.0.0/24"],"taints":[{"key":"b","effect":"NoExecute"}]}})
    );
}

#[test]
fn delete_from_primitive_list() {
    let original = json!({"metadata":{"finalizers":["a","b","c"]}});
    let patch = json!({"metadata":{"$deleteFromPrimitiveList/finalizers":["b","zz"]}});
    assert_eq!(
        smp(original, patch, "Pod"),
        json!({"metadata":{"finalizers":["a","c"]}})
    );
    // Deleting from a list that does not exist is a no-op (Kubernetes ≥ 1.x fix).
    let original = json!({"metadata":{"name":"x"}});
    let patch = json!({"metadata":{"$deleteFromPrimitiveList/finalizers":["b"]}});
    assert_eq!(smp(original.clone(), patch, "Pod"), original);
    // Together with additions in the same patch.
    let original = json!({"metadata":{"finalizers":["a","b"]}});
    let patch =
        json!({"metadata":{"finalizers":["c"],"$deleteFromPrimitiveList/finalizers":["a"]}});
    assert_eq!(
        smp(original, patch, "Pod"),
        json!({"metadata":{"finalizers":["c","b"]}})
    );
    let err = smp_err(
        json!({"metadata":{"finalizers":["a"]}}),
        json!({"metadata":{"$deleteFromPrimitiveListX/finalizers":["a"]}}),
        "Pod",
    );
    assert!(
        err.contains("invalid patch format of primitive list"),
        "{err}"
    );
}

#[test]
fn delete_directive_in_merge_list() {
    let patch =
        json!({"spec":{"template":{"spec":{"containers":[{"name":"sidecar","$patch":"delete"}]}}}});
    let out = smp(deployment(), patch, "Deployment");
    let names: Vec<&Value> = out["spec"]["template"]["spec"]["containers"]
        .as_array()
        .map(|a| a.iter().map(|c| &c["name"]).collect())
        .unwrap_or_default();
    assert_eq!(names, [&json!("web")]);

    let err = smp_err(
        deployment(),
        json!({"spec":{"template":{"spec":{"containers":[{"$patch":"delete"}]}}}}),
        "Deployment",
    );
    assert!(
        err.contains("does not contain declared merge key: name"),
        "{err}"
    );
}

#[test]
fn replace_directive_in_merge_list() {
    let patch = json!({"spec":{"template":{"spec":{"containers":[
        {"$patch":"replace"},
        {"name":"only","image":"x"}
    ]}}}});
    let out = smp(deployment(), patch, "Deployment");
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"],
        json!([{"name":"only","image":"x"}])
    );
}

#[test]
fn merge_directive_in_list_and_unknown_directives_are_errors() {
    let err = smp_err(
        deployment(),
        json!({"spec":{"template":{"spec":{"containers":[{"$patch":"merge"}]}}}}),
        "Deployment",
    );
    assert!(
        err.contains("merging lists cannot yet be specified in the patch"),
        "{err}"
    );
    let err = smp_err(
        deployment(),
        json!({"spec":{"template":{"spec":{"containers":[{"name":"web","$patch":"bogus"}]}}}}),
        "Deployment",
    );
    assert!(err.contains("unknown patch type: \"bogus\""), "{err}");
    let err = smp_err(
        deployment(),
        json!({"spec":{"$patch":"merge"}}),
        "Deployment",
    );
    assert!(err.contains("unknown patch type: \"merge\""), "{err}");
}

#[test]
fn replace_and_delete_directives_on_maps() {
    let patch =
        json!({"spec":{"template":{"metadata":{"labels":{"$patch":"replace","tier":"x"}}}}});
    let out = smp(deployment(), patch, "Deployment");
    assert_eq!(
        out["spec"]["template"]["metadata"]["labels"],
        json!({"tier":"x"})
    );

    let patch = json!({"spec":{"strategy":{"$patch":"delete"}}});
    let out = smp(deployment(), patch, "Deployment");
    assert_eq!(out["spec"]["strategy"], json!({}));

    assert_eq!(
        smp(deployment(), json!({"$patch":"delete"}), "Deployment"),
        json!({})
    );
    assert_eq!(
        smp(
            deployment(),
            json!({"$patch":"replace","kind":"X"}),
            "Deployment"
        ),
        json!({"kind":"X"})
    );
}

#[test]
fn retain_keys_directive() {
    let patch = json!({"spec":{"strategy":{"$retainKeys":["type"],"type":"Recreate","rollingUpdate":null}}});
    let out = smp(deployment(), patch, "Deployment");
    assert_eq!(out["spec"]["strategy"], json!({"type":"Recreate"}));

    // Keys set by the patch must be listed.
    let err = smp_err(
        deployment(),
        json!({"spec":{"strategy":{"$retainKeys":["type"],"rollingUpdate":{"maxSurge":2}}}}),
        "Deployment",
    );
    assert!(err.contains("invalid patch format of retainKeys"), "{err}");
    let err = smp_err(
        deployment(),
        json!({"spec":{"strategy":{"$retainKeys":"type"}}}),
        "Deployment",
    );
    assert!(err.contains("must be a list"), "{err}");

    // Volumes: switching the volume source of one item.
    let patch = json!({"spec":{"template":{"spec":{"volumes":[
        {"name":"data","$retainKeys":["name","hostPath"],"hostPath":{"path":"/d"}}
    ]}}}});
    let out = smp(deployment(), patch, "Deployment");
    assert_eq!(
        out["spec"]["template"]["spec"]["volumes"],
        json!([{"name":"data","hostPath":{"path":"/d"}}])
    );
}

#[test]
fn lists_without_strategy_are_replaced() {
    let patch =
        json!({"spec":{"template":{"spec":{"tolerations":[{"key":"k2","operator":"Exists"}]}}}});
    let out = smp(deployment(), patch, "Deployment");
    assert_eq!(
        out["spec"]["template"]["spec"]["tolerations"],
        json!([{"key":"k2","operator":"Exists"}])
    );
    // Container args are atomic too.
    let original = json!({"spec":{"containers":[{"name":"c","args":["a","b"]}]}});
    let patch = json!({"spec":{"containers":[{"name":"c","args":["z"]}]}});
    assert_eq!(
        smp(original, patch, "Pod"),
        json!({"spec":{"containers":[{"name":"c","args":["z"]}]}})
    );
}

#[test]
fn unknown_kind_replaces_every_list_but_honours_directives() {
    let original = json!({"metadata":{"finalizers":["a"]},"spec":{"containers":[{"name":"a"}],"m":{"x":1,"y":2}}});
    let patch = json!({"metadata":{"finalizers":["b"]},"spec":{"containers":[{"name":"b"}],"m":{"x":null,"z":3}}});
    assert_eq!(
        smp(original.clone(), patch, "Widget"),
        json!({"metadata":{"finalizers":["b"]},"spec":{"containers":[{"name":"b"}],"m":{"y":2,"z":3}}})
    );
    let patch = json!({"spec":{"m":{"$patch":"replace","q":1}}});
    assert_eq!(
        smp(original, patch, "Widget"),
        json!({"metadata":{"finalizers":["a"]},"spec":{"containers":[{"name":"a"}],"m":{"q":1}}})
    );
}

#[test]
fn kubectl_label_annotate_cordon_patches() {
    let pod = json!({"metadata":{"name":"p","labels":{"app":"web","old":"x"},"annotations":{"a":"1"}},"spec":{"nodeName":"n1"}});
    assert_eq!(
        smp(
            pod.clone(),
            json!({"metadata":{"labels":{"app":"v2","old":null,"new":"y"}}}),
            "Pod"
        ),
        json!({"metadata":{"name":"p","labels":{"app":"v2","new":"y"},"annotations":{"a":"1"}},"spec":{"nodeName":"n1"}})
    );
    assert_eq!(
        smp(pod.clone(), json!({"metadata":{"annotations":null}}), "Pod"),
        json!({"metadata":{"name":"p","labels":{"app":"web","old":"x"}},"spec":{"nodeName":"n1"}})
    );
    let node = json!({"metadata":{"name":"n1"},"spec":{"podCIDR":"10.0.0.0/24"}});
    assert_eq!(
        smp(node, json!({"spec":{"unschedulable":true}}), "Node"),
        json!({"metadata":{"name":"n1"},"spec":{"podCIDR":"10.0.0.0/24","unschedulable":true}})
    );
}

#[test]
fn status_conditions_merge_by_type() {
    let original = json!({"status":{"conditions":[
        {"type":"Ready","status":"False"},{"type":"MemoryPressure","status":"False"}
    ],"addresses":[{"type":"InternalIP","address":"10.0.0.1"}]}});
    let patch = json!({"status":{"conditions":[{"type":"Ready","status":"True"}],
        "addresses":[{"type":"Hostname","address":"n1"}]}});
    assert_eq!(
        smp(original, patch, "Node"),
        json!({"status":{"conditions":[
            {"type":"Ready","status":"True"},{"type":"MemoryPressure","status":"False"}
        ],"addresses":[{"type":"Hostname","address":"n1"},{"type":"InternalIP","address":"10.0.0.1"}]}})
    );
    let rs = json!({"status":{"conditions":[{"type":"A","status":"x"}]}});
    assert_eq!(
        smp(
            rs,
            json!({"status":{"conditions":[{"type":"B","status":"y"}]}}),
            "ReplicaSet"
        ),
        json!({"status":{"conditions":[{"type":"B","status":"y"},{"type":"A","status":"x"}]}})
    );
}

#[test]
fn owner_references_merge_by_uid_and_other_pod_lists() {
    let original = json!({"metadata":{"ownerReferences":[{"uid":"1","name":"a"}]},
        "spec":{"imagePullSecrets":[{"name":"s1"}],"hostAliases":[{"ip":"1.1.1.1","hostnames":["a"]}],
                "initContainers":[{"name":"i","volumeMounts":[{"mountPath":"/a","name":"v"}]}]}});
    let patch = json!({"metadata":{"ownerReferences":[{"uid":"2","name":"b"}]},
        "spec":{"imagePullSecrets":[{"name":"s2"}],"hostAliases":[{"ip":"1.1.1.1","hostnames":["b"]}],
                "initContainers":[{"name":"i","volumeMounts":[{"mountPath":"/b","name":"w"}]}]}});
    assert_eq!(
        smp(original, patch, "Pod"),
        json!({"metadata":{"ownerReferences":[{"uid":"2","name":"b"},{"uid":"1","name":"a"}]},
            "spec":{"imagePullSecrets":[{"name":"s2"},{"name":"s1"}],"hostAliases":[{"ip":"1.1.1.1","hostnames":["b"]}],
                    "initContainers":[{"name":"i","volumeMounts":[{"mountPath":"/b","name":"w"},{"mountPath":"/a","name":"v"}]}]}})
    );
    let sa = json!({"metadata":{"name":"default"},"secrets":[{"name":"a"}]});
    assert_eq!(
        smp(sa, json!({"secrets":[{"name":"b"}]}), "ServiceAccount"),
        json!({"metadata":{"name":"default"},"secrets":[{"name":"b"},{"name":"a"}]})
    );
}

#[test]
fn same_field_name_means_different_things_by_path() {
    // `ports` merges by containerPort in a container, by port in a ServiceSpec, and is
    // atomic in an EndpointSlice.
    let slice = json!({"ports":[{"port":80}],"endpoints":[{"addresses":["1.1.1.1"]}]});
    assert_eq!(
        smp(
            slice,
            json!({"ports":[{"port":81}],"endpoints":[{"addresses":["2.2.2.2"]}]}),
            "EndpointSlice"
        ),
        json!({"ports":[{"port":81}],"endpoints":[{"addresses":["2.2.2.2"]}]})
    );
    // `conditions` merges in Pod status but spec-level lists of that name would not.
    let pod = json!({"status":{"conditions":[{"type":"Ready","status":"False"}]}});
    assert_eq!(
        smp(
            pod,
            json!({"status":{"conditions":[{"type":"Initialized","status":"True"}]}}),
            "Pod"
        ),
        json!({"status":{"conditions":[{"type":"Initialized","status":"True"},{"type":"Ready","status":"False"}]}})
    );
    let cm = json!({"data":{"conditions":"x"},"conditions":[{"type":"a"}]});
    assert_eq!(
        smp(cm, json!({"conditions":[{"type":"b"}]}), "ConfigMap"),
        json!({"data":{"conditions":"x"},"conditions":[{"type":"b"}]})
    );
}

#[test]
fn nulls_and_directives_never_reach_the_output() {
    let original = json!({"metadata":{"name":"x"},"spec":{}});
    let patch = json!({
        "metadata":{"labels":{"a":null,"b":"1"}},
        "spec":{
            "containers":[{"name":"c","image":null,"$setElementOrder/env":[{"name":"E"}],"env":[{"name":"E","value":"v"},{"$patch":"delete","name":"F"}]}],
            "gone":{"$patch":"delete"},
            "affinity":{"nodeAffinity":null,"x":{"$retainKeys":["y"],"y":1}}
        }
    });
    assert_eq!(
        smp(original, patch, "Pod"),
        json!({"metadata":{"name":"x","labels":{"b":"1"}},
               "spec":{"containers":[{"name":"c","env":[{"name":"E","value":"v"}]}],
                       "affinity":{"x":{"y":1}}}})
    );
    // New items appended to a merging list lose nested directives and nulls too.
    let original = json!({"spec":{"containers":[{"name":"a"}]}});
    let patch = json!({"spec":{"containers":[{"name":"b","image":null,"resources":{"$patch":"replace","limits":{"cpu":"1"}}}]}});
    assert_eq!(
        smp(original, patch, "Pod"),
        json!({"spec":{"containers":[{"name":"b","resources":{"limits":{"cpu":"1"}}},{"name":"a"}]}})
    );
}

#[test]
fn type_changes_replace_the_value() {
    let original = json!({"spec":{"replicas":2,"selector":{"matchLabels":{"a":"b"}},"containers":[{"name":"a"}]}});
    let patch = json!({"spec":{"replicas":"two","selector":["x"],"containers":{"name":"b"}}});
    assert_eq!(
        smp(original, patch, "Pod"),
        json!({"spec":{"replicas":"two","selector":["x"],"containers":{"name":"b"}}})
    );
    let original = json!({"metadata":{"creationTimestamp":null}});
    assert_eq!(
        smp(
            original,
            json!({"metadata":{"creationTimestamp":"2024-01-01T00:00:00Z"}}),
            "Pod"
        ),
        json!({"metadata":{"creationTimestamp":"2024-01-01T00:00:00Z"}})
    );
}

#[test]
fn malformed_lists_are_errors_not_panics() {
    let pod = |containers: Value| json!({"spec":{"containers":containers}});
    let cases = [
        (
            pod(json!([{"name":"a"}])),
            pod(json!([{"image":"x"}])),
            "does not contain declared merge key: name",
        ),
        (
            pod(json!([{"name":"a"}])),
            pod(json!(["x"])),
            "list element types are not identical",
        ),
        (
            pod(json!([["a"]])),
            pod(json!([["b"]])),
            "lists of lists are not supported",
        ),
        (
            pod(json!([null])),
            pod(json!([{"name":"a"}])),
            "null list items are not supported",
        ),
        (pod(json!(["a"])), pod(json!(["b"])), "expected an object"),
        (
            json!({"metadata":{"finalizers":[{"a":1}]}}),
            json!({"metadata":{"finalizers":[{"b":1}]}}),
            "cannot merge lists without merge key",
        ),
        (
            json!({"metadata":{"finalizers":["a"]}}),
            json!({"metadata":{"finalizers":[1]}}),
            "list element types are not identical",
        ),
    ];
    for (original, patch, want) in cases {
        let err = smp_err(original.clone(), patch.clone(), "Pod");
        assert!(err.contains(want), "{original} + {patch}: {err}");
    }
    // An object-valued merge key is compared structurally rather than crashing.
    let out = smp(
        pod(json!([{"name":{"x":[1]}, "image":"a"}])),
        pod(json!([{"name":{"x":[1]}, "image":"b"}])),
        "Pod",
    );
    assert_eq!(out, pod(json!([{"name":{"x":[1]}, "image":"b"}])));
}

#[test]
fn non_object_inputs() {
    assert!(matches!(
        strategic_merge_patch(&json!([]), &json!({}), "Pod"),
        Err(PatchError::NotAnObject {
            what: "original document",
            ..
        })
    ));
    assert!(matches!(
        strategic_merge_patch(&json!({}), &json!([1]), "Pod"),
        Err(PatchError::NotAnObject { what: "patch", .. })
    ));
    assert_eq!(
        strategic_merge_patch(&json!({"a":1}), &Value::Null, "Pod").expect("null patch"),
        json!({"a":1})
    );
}

#[test]
fn empty_lists() {
    let original = json!({"spec":{"containers":[]}});
    assert_eq!(
        smp(original.clone(), json!({"spec":{"containers":[]}}), "Pod"),
        original
    );
    assert_eq!(
        smp(
            original,
            json!({"spec":{"containers":[{"name":"a"}]}}),
            "Pod"
        ),
        json!({"spec":{"containers":[{"name":"a"}]}})
    );
    let err = smp_err(
        json!({"spec":{"containers":[]}}),
        json!({"spec":{"$setElementOrder/containers":[]}}),
        "Pod",
    );
    assert!(err.contains("no elements"), "{err}");
}

/// `{key: v}` without `json!`, which would serialize `v` recursively.
fn wrap(key: &str, v: Value) -> Value {
    let mut m = Map::new();
    m.insert(key.to_string(), v);
    Value::Object(m)
}

fn nested(depth: usize) -> Value {
    let mut v = json!({});
    for _ in 0..depth {
        v = wrap("a", v);
    }
    v
}

/// Tokio's default worker stack size.
const STACK: usize = 2 * 1024 * 1024;

#[test]
fn depth_limit() {
    // Run on a thread with a small (2 MiB, tokio's default) stack to prove the
    // recursion stays within it at the maximum accepted depth.
    let handle = std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(|| {
            let deep = nested(MAX_DEPTH);
            let out = strategic_merge_patch(&deep, &deep, "Pod").expect("max depth accepted");
            assert_eq!(depth_of(&out), MAX_DEPTH);
            let mut list_deep = json!({"name":"x"});
            for _ in 0..(MAX_DEPTH / 3 - 2) {
                let mut item = Map::new();
                item.insert("name".to_string(), json!("x"));
                item.insert("c".to_string(), list_deep);
                list_deep = wrap("containers", Value::Array(vec![Value::Object(item)]));
            }
            let list_deep = wrap("spec", list_deep);
            strategic_merge_patch(&list_deep, &list_deep, "Pod").expect("deep lists");
            let too_deep = nested(MAX_DEPTH + 1);
            assert!(matches!(
                strategic_merge_patch(&json!({}), &too_deep, "Pod"),
                Err(PatchError::TooDeep { .. })
            ));
            assert!(matches!(
                json_patch(&too_deep, &json!([])),
                Err(PatchError::TooDeep { .. })
            ));
            let mut op = Map::new();
            op.insert("op".to_string(), json!("add"));
            op.insert("path".to_string(), json!("/x"));
            op.insert("value".to_string(), nested(MAX_DEPTH));
            let err = json_patch(&json!({}), &Value::Array(vec![Value::Object(op)]))
                .expect_err("too deep after add");
            assert!(err.to_string().contains("levels deep"), "{err}");
        })
        .expect("spawn");
    handle.join().expect("no stack overflow");
}

#[test]
fn go_stable_sort_matches_a_stable_sort_for_consistent_comparators() {
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for len in 0..300 {
        let data: Vec<(u64, usize)> = (0..len).map(|i| (next() % 17, i)).collect();
        let mut ours = data.clone();
        go_stable_sort(&mut ours, &|a, b| a.0 < b.0);
        let mut std_sorted = data;
        std_sorted.sort_by_key(|x| x.0);
        assert_eq!(ours, std_sorted, "len {len}");
    }
}

#[test]
fn go_stable_sort_reproduces_go_for_always_true_comparator() {
    // Go's insertion sort moves every element to the front when Less is always true.
    let mut v: Vec<u32> = (0..10).collect();
    go_stable_sort(&mut v, &|_, _| true);
    assert_eq!(v, (0..10).rev().collect::<Vec<_>>());
    let mut v: Vec<u32> = (0..100).collect();
    go_stable_sort(&mut v, &|_, _| true);
    let mut sorted = v.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..100).collect::<Vec<_>>(), "a permutation");
}

#[test]
fn schema_table_covers_the_kinds() {
    for kind in STRATEGIC_KINDS {
        assert!(schema_for_kind(kind).is_some(), "{kind}");
    }
    assert!(schema_for_kind("Widget").is_none());
    let pod_spec = lookup(lookup(schema_for_kind("Pod"), "spec").schema, "tolerations");
    assert_eq!(pod_spec.strategy, Strategy::Default);
    let tsc = lookup(Some(&POD_SPEC), "topologySpreadConstraints");
    assert_eq!(
        (tsc.strategy, tsc.merge_key),
        (Strategy::Merge, "topologyKey")
    );
    let resize = lookup(Some(&CONTAINER), "resizePolicy");
    assert_eq!(resize.strategy, Strategy::Default, "resizePolicy is atomic");
    let template = lookup(
        lookup(schema_for_kind("DaemonSet"), "spec").schema,
        "template",
    );
    let containers = lookup(lookup(template.schema, "spec").schema, "containers");
    assert_eq!(containers.merge_key, "name");
}

// --- Conformance cases from Kubernetes' strategicpatch/patch_test.go ---------------
// (the "raw" cases, whose results Kubernetes compares exactly, order included:
// apply ThreeWay to Current and expect Result)

static TEST_ITEM: StructSchema = StructSchema {
    name: "MergeItem",
    fields: &[
        ("mergingList", merge_by("name", Some(&TEST_ITEM))),
        ("mergingIntList", MERGE_SCALARS),
        ("nonMergingIntList", NO_META),
    ],
};

fn apply_test_schema(current: Value, patch: Value) -> Value {
    let (Value::Object(c), Value::Object(p)) = (current, patch) else {
        panic!("objects expected");
    };
    let mut smp = Smp { path: Vec::new() };
    Value::Object(smp.merge_map(c, p, Some(&TEST_ITEM), 0).expect("apply"))
}

fn names(list: &[u32]) -> Value {
    Value::Array(list.iter().map(|n| json!({"name": n})).collect())
}

#[test]
fn kubernetes_set_element_order_cases() {
    let list = |v: Value| json!({"mergingList": v});
    let cases = [
        // add multiple items in a list and preserve order
        (
            list(json!([{"name":1,"other":"a"},{"name":2,"value":2,"other":"b"}])),
            json!({"$setElementOrder/mergingList": names(&[1,4,2,3]),
                   "mergingList":[{"name":4,"value":4},{"name":3,"value":3}]}),
            list(
                json!([{"name":1,"other":"a"},{"name":4,"value":4},{"name":2,"value":2,"other":"b"},{"name":3,"value":3}]),
            ),
        ),
        // delete an item in a list and preserve order
        (
            list(
                json!([{"name":1,"other":"a"},{"name":2,"value":2,"other":"b"},{"name":3,"value":3}]),
            ),
            json!({"$setElementOrder/mergingList": names(&[2,1]),
                   "mergingList":[{"name":3,"$patch":"delete"}]}),
            list(json!([{"name":2,"value":2,"other":"b"},{"name":1,"other":"a"}])),
        ),
        // change an item in a list and preserve order
        (
            list(
                json!([{"name":1,"other":"a"},{"name":2,"value":2,"other":"b"},{"name":3,"value":3}]),
            ),
            json!({"$setElementOrder/mergingList": names(&[2,3,1]),
                   "mergingList":[{"name":3,"value":"x"}]}),
            list(
                json!([{"name":2,"value":2,"other":"b"},{"name":3,"value":"x"},{"name":1,"other":"a"}]),
            ),
        ),
        // add and delete an item in a list and preserve order
        (
            list(
                json!([{"name":1,"other":"a"},{"name":2,"value":2,"other":"b"},{"name":3,"value":3}]),
            ),
            json!({"$setElementOrder/mergingList": names(&[4,2,1]),
                   "mergingList":[{"name":4,"value":4},{"name":3,"$patch":"delete"}]}),
            list(
                json!([{"name":4,"value":4},{"name":2,"value":2,"other":"b"},{"name":1,"other":"a"}]),
            ),
        ),
        // set elements order in a list with server-only items
        (
            list(names(&[1, 3, 4, 2, 9])),
            json!({"$setElementOrder/mergingList": names(&[4,2,3,1])}),
            list(names(&[4, 2, 3, 1, 9])),
        ),
        // ... 2
        (
            list(names(&[1, 2, 9, 3, 4])),
            json!({"$setElementOrder/mergingList": names(&[2,1,4,3])}),
            list(names(&[2, 1, 9, 4, 3])),
        ),
        // ... 3
        (
            list(names(&[1, 2, 7, 9, 8, 3, 4])),
            json!({"$setElementOrder/mergingList": names(&[2,1,4,3])}),
            list(names(&[2, 1, 7, 9, 8, 4, 3])),
        ),
        // behavior of set element order for a merging list with duplicate
        (
            list(
                json!([{"name":1},{"name":2,"value":"dup1"},{"name":3},{"name":2,"value":"dup2"},{"name":4}]),
            ),
            json!({"$setElementOrder/mergingList": names(&[2,1,4,3,2])}),
            list(
                json!([{"name":2,"value":"dup1"},{"name":2,"value":"dup2"},{"name":1},{"name":4},{"name":3}]),
            ),
        ),
        // nested merging lists with their own $setElementOrder
        (
            list(
                json!([{"name":1,"other":"a","mergingList":[{"name":1,"value":"a"},{"name":2,"value":2,"other":"b"}]},{"name":2,"other":"b"}]),
            ),
            json!({"$setElementOrder/mergingList": names(&[1,2]),
                   "mergingList":[{"$setElementOrder/mergingList": names(&[1,2]),"name":1,"mergingList":[{"name":1,"value":1}]}]}),
            list(
                json!([{"name":1,"other":"a","mergingList":[{"name":1,"value":1},{"name":2,"value":2,"other":"b"}]},{"name":2,"other":"b"}]),
            ),
        ),
    ];
    for (current, patch, want) in cases {
        assert_eq!(
            apply_test_schema(current.clone(), patch.clone()),
            want,
            "{current} + {patch}"
        );
    }
}

#[test]
fn kubernetes_int_list_cases() {
    let ints = |v: Value| json!({"mergingIntList": v});
    let cases = [
        (
            ints(json!([1, 2, 4])),
            json!({"$setElementOrder/mergingIntList":[1,2,3],"mergingIntList":[3]}),
            ints(json!([1, 2, 3, 4])),
        ),
        (
            ints(json!([1, 2])),
            json!({"$setElementOrder/mergingIntList":[3,1,2],"mergingIntList":[3]}),
            ints(json!([3, 1, 2])),
        ),
        (
            ints(json!([1, 2])),
            json!({"$setElementOrder/mergingIntList":[1,4,2,3],"mergingIntList":[4,3]}),
            ints(json!([1, 4, 2, 3])),
        ),
        (
            ints(json!([1, 2, 3])),
            json!({"$setElementOrder/mergingIntList":[2,1],"$deleteFromPrimitiveList/mergingIntList":[3]}),
            ints(json!([2, 1])),
        ),
        (
            ints(json!([1, 2, 3])),
            json!({"$setElementOrder/mergingIntList":[4,2,1],"mergingIntList":[4],"$deleteFromPrimitiveList/mergingIntList":[3]}),
            ints(json!([4, 2, 1])),
        ),
        (
            ints(json!([1, 3, 4, 2])),
            json!({"$setElementOrder/mergingIntList":[4,2,3,1]}),
            ints(json!([4, 2, 3, 1])),
        ),
        (
            ints(json!([1, 3, 4, 2, 9])),
            json!({"$setElementOrder/mergingIntList":[4,2,3,1]}),
            ints(json!([4, 2, 3, 1, 9])),
        ),
        (
            ints(json!([1, 2, 9, 3, 4])),
            json!({"$setElementOrder/mergingIntList":[2,1,4,3]}),
            ints(json!([2, 1, 9, 4, 3])),
        ),
        (
            ints(json!([1, 2, 7, 9, 8, 3, 4])),
            json!({"$setElementOrder/mergingIntList":[2,1,4,3]}),
            ints(json!([2, 1, 7, 9, 8, 4, 3])),
        ),
        (
            ints(json!([1, 2, 3, 2, 4])),
            json!({"$setElementOrder/mergingIntList":[2,1,4,3,2]}),
            ints(json!([2, 2, 1, 4, 3])),
        ),
        // A list without a patch strategy is replaced.
        (
            json!({"nonMergingIntList":[1,4]}),
            json!({"nonMergingIntList":[2,3]}),
            json!({"nonMergingIntList":[2,3]}),
        ),
    ];
    for (current, patch, want) in cases {
        assert_eq!(
            apply_test_schema(current.clone(), patch.clone()),
            want,
            "{current} + {patch}"
        );
    }
}

#[test]
fn kubernetes_retain_keys_cases() {
    let cases = [
        (
            json!({"retainKeysMap":{"name":"type1","value":"foo"}}),
            json!({"retainKeysMap":{"$retainKeys":["name","other"],"name":"type2","other":"bar"}}),
            json!({"retainKeysMap":{"name":"type2","other":"bar"}}),
        ),
        (
            json!({"retainKeysMap":{"name":"foo","other":"a"}}),
            json!({"retainKeysMap":{"$retainKeys":["name","value"],"value":"bar"}}),
            json!({"retainKeysMap":{"name":"foo","value":"bar"}}),
        ),
        (
            json!({"retainKeysMap":{"value":"foo"}}),
            json!({"retainKeysMap":{"$retainKeys":["other"],"other":"bar"}}),
            json!({"retainKeysMap":{"other":"bar"}}),
        ),
    ];
    for (current, patch, want) in cases {
        assert_eq!(
            apply_test_schema(current.clone(), patch.clone()),
            want,
            "{current} + {patch}"
        );
    }
}

#[test]
fn large_lists_merge_in_near_linear_time() {
    let n = 5_000;
    let original = json!({"spec":{"containers": (0..n).map(|i| json!({"name": format!("c{i}"), "image": "a"})).collect::<Vec<_>>()},
                          "metadata":{"finalizers": (0..n).map(|i| format!("f{i}")).collect::<Vec<_>>()}});
    let patch = json!({"spec":{
        "$setElementOrder/containers": (0..n + 10).rev().map(|i| json!({"name": format!("c{i}")})).collect::<Vec<_>>(),
        "containers": (0..n + 10).rev().step_by(2).map(|i| json!({"name": format!("c{i}"), "image": "b"})).collect::<Vec<_>>()},
        "metadata":{"finalizers": (n / 2..n + 10).map(|i| format!("f{i}")).collect::<Vec<_>>()}});
    let start = std::time::Instant::now();
    let out = smp(original, patch, "Pod");
    assert!(
        start.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        start.elapsed()
    );
    let containers = out["spec"]["containers"].as_array().map_or(0, Vec::len);
    assert_eq!(containers, n + 5);
    assert_eq!(out["spec"]["containers"][0]["name"], format!("c{}", n + 9));
    assert_eq!(
        out["metadata"]["finalizers"].as_array().map_or(0, Vec::len),
        n + 10
    );
}
