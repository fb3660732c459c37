//! Acceptance: what a new user does with stock kubectl against a fresh cairn-control,
//! run with kubectl 1.33 and 1.27.

// Test code: a failed setup step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Kubectl, Server, Streaming};
use serde_json::Value;

fn json(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

/// Lines of a kubectl table, split on runs of spaces.
fn rows(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

fn header(table: &str) -> String {
    table
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

const DEPLOYMENT_V1: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: applied
  labels:
    app: applied
spec:
  replicas: 1
  selector:
    matchLabels:
      app: applied
  template:
    metadata:
      labels:
        app: applied
    spec:
      containers:
      - name: web
        image: nginx:1.25
        env:
        - name: A
          value: "1"
"#;

const NODE: &str = r#"apiVersion: v1
kind: Node
metadata:
  name: node-a
  labels:
    kubernetes.io/hostname: node-a
"#;

fn scenario(minor: u32) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let k = Kubectl::new(minor, &server);

    discovery_and_boot_namespaces(&k);
    create_and_show_deployment(&k);
    scale_deployment(&k);
    client_side_apply_twice(&k);
    server_side_apply_twice(&k);
    label_and_annotate(&k);
    patch_merge_json_strategic(&k);
    edit_with_scripted_editor(&k);

    // watch pods while they come and go
    let mut watch_cmd = k.command(&["get", "pods", "-w", "--output-watch-events"]);
    watch_cmd.stdin(std::process::Stdio::null());
    let watch = Streaming::spawn(watch_cmd);
    std::thread::sleep(std::time::Duration::from_millis(500));

    run_pod_and_select_it(&k, &watch);
    expose_gets_cluster_ip(&k);
    cordon_and_uncordon_node(&k);
    delete_pod_waits_and_returns(&k, &watch);
    drop(watch);

    delete_namespace_with_contents(&k);
    errors_are_status_objects(&k, &server);
}

fn discovery_and_boot_namespaces(k: &Kubectl) {
    // version and discovery
    let version = k.ok(&["version", "-o", "json"]);
    let v = json(&version);
    assert_eq!(v["serverVersion"]["major"], "1");
    assert!(v["serverVersion"]["gitVersion"]
        .as_str()
        .unwrap()
        .starts_with("v1.33"));
    let resources = k.ok(&["api-resources"]);
    assert!(
        header(&resources).starts_with("NAME SHORTNAMES APIVERSION NAMESPACED KIND"),
        "{resources}"
    );
    for needle in [
        "deployments",
        "deploy",
        "apps/v1",
        "pods",
        "po",
        "endpointslices",
        "leases",
    ] {
        assert!(
            resources.contains(needle),
            "api-resources lacks {needle}:\n{resources}"
        );
    }

    // namespaces exist at boot
    let ns = k.ok(&["get", "ns"]);
    assert_eq!(header(&ns), "NAME STATUS AGE");
    for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(
            rows(&ns).iter().any(|r| r[0] == name && r[1] == "Active"),
            "{ns}"
        );
    }
}

fn create_and_show_deployment(k: &Kubectl) {
    // create deployment (protobuf body with kubectl >= 1.32)
    let out = k.ok(&[
        "create",
        "deployment",
        "web",
        "--image=nginx",
        "--replicas=2",
    ]);
    assert_eq!(out.trim(), "deployment.apps/web created");
    let d = json(&k.ok(&["get", "deployment", "web", "-o", "json"]));
    assert_eq!(d["spec"]["replicas"], 2);
    assert_eq!(d["spec"]["strategy"]["type"], "RollingUpdate");
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
        "Always"
    );
    assert_eq!(d["metadata"]["generation"], 1);

    let wide = k.ok(&["get", "deploy,rs,po", "-o", "wide"]);
    assert!(
        wide.contains("NAME")
            && wide.contains("READY")
            && wide.contains("UP-TO-DATE")
            && wide.contains("AVAILABLE"),
        "{wide}"
    );
    assert!(
        wide.contains("CONTAINERS") && wide.contains("IMAGES") && wide.contains("SELECTOR"),
        "{wide}"
    );
    assert!(
        wide.contains("deployment.apps/web") && wide.contains("0/2") && wide.contains("app=web"),
        "{wide}"
    );

    let all = k.ok(&["get", "all"]);
    assert!(
        all.contains("service/kubernetes") && all.contains("10.96.0.1"),
        "{all}"
    );
    assert!(all.contains("deployment.apps/web"), "{all}");

    let described = k.ok(&["describe", "deployment", "web"]);
    assert!(
        described.contains("Name:") && described.contains("web"),
        "{described}"
    );
    assert!(described.contains("2 desired"), "{described}");
    assert!(described.contains("RollingUpdate"), "{described}");
}

fn scale_deployment(k: &Kubectl) {
    // scale
    assert_eq!(
        k.ok(&["scale", "deployment", "web", "--replicas=3"]).trim(),
        "deployment.apps/web scaled"
    );
    assert_eq!(
        k.ok(&["get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"]),
        "3"
    );
    assert_eq!(
        k.ok(&[
            "scale",
            "deployment",
            "web",
            "--current-replicas=3",
            "--replicas=4"
        ])
        .trim(),
        "deployment.apps/web scaled"
    );
    assert!(
        k.fails(&[
            "scale",
            "deployment",
            "web",
            "--current-replicas=3",
            "--replicas=5"
        ])
        .contains("Conflict")
            || k.output(&["get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"])
                .stdout
                == b"4"
    );
}

fn client_side_apply_twice(k: &Kubectl) {
    // client-side apply twice with a change
    let out = k.ok_stdin(&["apply", "-f", "-"], DEPLOYMENT_V1);
    assert_eq!(out.trim(), "deployment.apps/applied created");
    let changed = DEPLOYMENT_V1
        .replace("nginx:1.25", "nginx:1.27")
        .replace("value: \"1\"", "value: \"2\"");
    let out = k.ok_stdin(&["apply", "-f", "-"], &changed);
    assert_eq!(out.trim(), "deployment.apps/applied configured");
    let d = json(&k.ok(&["get", "deploy", "applied", "-o", "json"]));
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.27"
    );
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"],
        "2"
    );
    assert_eq!(d["metadata"]["generation"], 2);
    assert!(
        d["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .is_string()
    );
    let out = k.ok_stdin(&["apply", "-f", "-"], &changed);
    assert_eq!(out.trim(), "deployment.apps/applied unchanged");
}

fn server_side_apply_twice(k: &Kubectl) {
    // server-side apply twice with a change
    let ssa = DEPLOYMENT_V1
        .replace("name: applied", "name: ssa")
        .replace("app: applied", "app: ssa");
    let out = k.ok_stdin(&["apply", "--server-side", "-f", "-"], &ssa);
    assert_eq!(out.trim(), "deployment.apps/ssa serverside-applied");
    let out = k.ok_stdin(
        &["apply", "--server-side", "-f", "-"],
        &ssa.replace("replicas: 1", "replicas: 5"),
    );
    assert_eq!(out.trim(), "deployment.apps/ssa serverside-applied");
    let d = json(&k.ok(&[
        "get",
        "deploy",
        "ssa",
        "-o",
        "json",
        "--show-managed-fields",
    ]));
    assert_eq!(d["spec"]["replicas"], 5);
    let managers: Vec<&str> = d["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["operation"] == "Apply")
        .map(|m| m["manager"].as_str().unwrap())
        .collect();
    assert_eq!(managers, vec!["kubectl"]);
}

fn label_and_annotate(k: &Kubectl) {
    // label, annotate
    assert_eq!(
        k.ok(&["label", "deployment", "web", "tier=frontend"])
            .trim(),
        "deployment.apps/web labeled"
    );
    // kubectl 1.27 words it "annotate", later versions "annotated".
    assert!(k
        .ok(&["annotate", "deployment", "web", "note=hello"])
        .starts_with("deployment.apps/web annotate"));
    let d = json(&k.ok(&["get", "deploy", "web", "-o", "json"]));
    assert_eq!(d["metadata"]["labels"]["tier"], "frontend");
    assert_eq!(d["metadata"]["annotations"]["note"], "hello");
    assert_eq!(
        k.ok(&["label", "deployment", "web", "tier-"]).trim(),
        "deployment.apps/web unlabeled"
    );
}

fn patch_merge_json_strategic(k: &Kubectl) {
    // patch: merge, json, strategic
    k.ok(&[
        "patch",
        "deployment",
        "web",
        "--type=merge",
        "-p",
        r#"{"spec":{"minReadySeconds":5}}"#,
    ]);
    k.ok(&[
        "patch",
        "deployment",
        "web",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/revisionHistoryLimit","value":3}]"#,
    ]);
    k.ok(&[
        "patch",
        "deployment",
        "web",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox"}]}}}}"#,
    ]);
    let d = json(&k.ok(&["get", "deploy", "web", "-o", "json"]));
    assert_eq!(d["spec"]["minReadySeconds"], 5);
    assert_eq!(d["spec"]["revisionHistoryLimit"], 3);
    let names: Vec<&str> = d["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    // Kubernetes' mergeSortedSlice puts items only in the patch before server-only ones.
    assert_eq!(
        names,
        vec!["sidecar", "nginx"],
        "strategic patch merges containers by name"
    );
    let err = k.fails(&[
        "patch",
        "deployment",
        "web",
        "--type=json",
        "-p",
        r#"[{"op":"test","path":"/spec/replicas","value":99}]"#,
    ]);
    assert!(!err.is_empty());
}

fn edit_with_scripted_editor(k: &Kubectl) {
    // edit with a scripted editor
    let mut edit = k.command(&["edit", "deployment", "web"]);
    edit.env(
        "EDITOR",
        "sed -i s/minReadySeconds:\\ 5/minReadySeconds:\\ 7/",
    );
    let out = edit.output().unwrap();
    assert!(
        out.status.success(),
        "edit: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        k.ok(&[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.spec.minReadySeconds}"
        ]),
        "7"
    );
}

fn run_pod_and_select_it(k: &Kubectl, watch: &Streaming) {
    // run, field and label selectors
    assert_eq!(
        k.ok(&[
            "run",
            "box",
            "--image=busybox",
            "--labels=app=box",
            "--",
            "sleep",
            "3600"
        ])
        .trim(),
        "pod/box created"
    );
    watch.wait_for("ADDED box", |t| {
        t.lines().any(|l| l.contains("ADDED") && l.contains("box"))
    });
    let pods = k.ok(&["get", "pods", "-o", "wide"]);
    assert!(
        header(&pods)
            .starts_with("NAME READY STATUS RESTARTS AGE IP NODE NOMINATED NODE READINESS GATES"),
        "{pods}"
    );
    assert!(
        rows(&pods)
            .iter()
            .any(|r| r[0] == "box" && r[1] == "0/1" && r[2] == "Pending"),
        "{pods}"
    );
    let p = json(&k.ok(&["get", "pod", "box", "-o", "json"]));
    assert_eq!(p["spec"]["restartPolicy"], "Always");
    assert_eq!(p["spec"]["terminationGracePeriodSeconds"], 30);
    assert_eq!(p["spec"]["dnsPolicy"], "ClusterFirst");
    assert_eq!(p["status"]["qosClass"], "BestEffort");
    assert!(k
        .ok(&["get", "pods", "--field-selector", "status.phase=Pending"])
        .contains("box"));
    assert!(!k
        .ok(&["get", "pods", "--field-selector", "status.phase=Running"])
        .contains("box"));
    assert!(k.ok(&["get", "pods", "-l", "app=box"]).contains("box"));
    assert!(k
        .ok(&["get", "pods", "-l", "app in (web,box)"])
        .contains("box"));
    assert!(!k.ok(&["get", "pods", "-l", "app!=box"]).contains("box"));
    k.ok(&["label", "pod", "box", "touched=yes"]);
    watch.wait_for("MODIFIED box", |t| {
        t.lines()
            .any(|l| l.contains("MODIFIED") && l.contains("box"))
    });
}

fn expose_gets_cluster_ip(k: &Kubectl) {
    // expose: a ClusterIP from the service range
    assert_eq!(
        k.ok(&["expose", "deployment", "web", "--port=80"]).trim(),
        "service/web exposed"
    );
    let svc = k.ok(&["get", "svc", "web"]);
    assert_eq!(header(&svc), "NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE");
    let row = rows(&svc).into_iter().find(|r| r[0] == "web").unwrap();
    assert_eq!(row[1], "ClusterIP");
    assert!(row[2].starts_with("10.9") && row[2] != "10.96.0.1", "{svc}");
    assert_eq!(row[4], "80/TCP");
}

fn cordon_and_uncordon_node(k: &Kubectl) {
    // cordon / uncordon a node object
    k.ok_stdin(&["create", "-f", "-"], NODE);
    assert_eq!(k.ok(&["cordon", "node-a"]).trim(), "node/node-a cordoned");
    assert_eq!(
        k.ok(&[
            "get",
            "node",
            "node-a",
            "-o",
            "jsonpath={.spec.unschedulable}"
        ]),
        "true"
    );
    assert!(k.ok(&["get", "nodes"]).contains("SchedulingDisabled"));
    assert!(k
        .ok(&[
            "get",
            "nodes",
            "--field-selector",
            "spec.unschedulable=true"
        ])
        .contains("node-a"));
    assert_eq!(
        k.ok(&["uncordon", "node-a"]).trim(),
        "node/node-a uncordoned"
    );
}

fn delete_pod_waits_and_returns(k: &Kubectl, watch: &Streaming) {
    // delete waits and returns
    assert_eq!(
        k.ok(&["delete", "pod", "box"]).trim(),
        "pod \"box\" deleted"
    );
    watch.wait_for("DELETED box", |t| {
        t.lines()
            .any(|l| l.contains("DELETED") && l.contains("box"))
    });
    assert!(k.fails(&["get", "pod", "box"]).contains("NotFound"));
}

fn delete_namespace_with_contents(k: &Kubectl) {
    // delete a namespace with contents
    k.ok(&["create", "namespace", "scratch"]);
    k.ok(&[
        "-n",
        "scratch",
        "create",
        "configmap",
        "cfg",
        "--from-literal=a=b",
    ]);
    k.ok(&[
        "-n",
        "scratch",
        "create",
        "deployment",
        "d",
        "--image=nginx",
    ]);
    k.ok(&["-n", "scratch", "run", "p", "--image=busybox"]);
    assert_eq!(
        k.ok(&["delete", "ns", "scratch"]).trim(),
        "namespace \"scratch\" deleted"
    );
    assert!(k.fails(&["get", "ns", "scratch"]).contains("NotFound"));
    assert!(k
        .fails(&["-n", "scratch", "create", "configmap", "again"])
        .contains("not found"));
}

fn errors_are_status_objects(k: &Kubectl, server: &Server) {
    // errors are Status objects kubectl understands
    assert!(k
        .fails(&["get", "pod", "nope"])
        .contains("pods \"nope\" not found"));
    assert!(k
        .fails(&["create", "deployment", "Bad_Name", "--image=x"])
        .contains("Invalid"));
    assert!(k
        .fails(&["get", "widgets"])
        .contains("the server doesn't have a resource type"));
    assert!(server.log().contains("cairn-control serving"));
}

#[test]
fn kubectl_1_33() {
    scenario(33);
}

#[test]
fn kubectl_1_27() {
    scenario(27);
}
