use super::*;

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
