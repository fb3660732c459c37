use super::*;

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
