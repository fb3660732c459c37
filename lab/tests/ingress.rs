//! Ingress on a 2-node lab (issue 33): every node's cairn-proxy serves the `cairn`
//! IngressClass (the cluster's default) on ports 80 and 443; requests come from the
//! switch, outside the nodes, to either node's address.
//!
//! One lab for every case, in order: `kubectl create ingress --help`'s examples (hosts,
//! exact and prefix paths, a default backend, TLS with a Secret, another class ignored);
//! the requests on a node's `/metrics`; the nodes' addresses in each Ingress's status; HTTPS verified against the Secret's CA;
//! a missing Service (503 saying which, a Warning event) and an overlapping rule (the
//! older Ingress keeps it, a Warning event on the newer); a Secret update under a client loop
//! (the new certificate served, no failed request); a rollout of a backend Deployment
//! under a keep-alive client loop (no failed request); a slow-loris client (others
//! served, its connections cut); NodePort and ServiceLB on the same nodes; then a
//! Gateway beside the Ingresses on port 80 and alone on 8088, with routes from another
//! namespace (allowedRoutes by namespace labels, a ReferenceGrant to the backend,
//! granted then revoked), a header match with a header filter, a redirect, and a route
//! the listener does not allow, with their conditions; a listener on a port the nodes
//! hold (a Warning event from them).
//!
//! Backends are python `http.server`s in busybox pods (the node's `/usr` mounted, as
//! `netpol.rs` does) answering with their Service, pod, path and request headers. Every
//! wait is on a condition (`rollout status`, a response), never a sleep.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{eventually, Lab};
use serde_json::{json, Value};

const MINUTE: Duration = Duration::from_secs(60);

/// The Gateway API's standard-channel CRDs, as released upstream.
const GATEWAY_API_CRDS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../control/tests/fixtures/crds/gateway-api-standard.yaml"
);

const ECHO: &str = r#"
import http.server, json, os, socket
class Echo(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = json.dumps({"service": os.environ["SERVICE"], "pod": socket.gethostname(),
                           "path": self.path,
                           "headers": {k.lower(): v for k, v in self.headers.items()}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("", 80), Echo).serve_forever()
"#;

/// A Deployment of echo servers and its Service (port 8080, named `http`, to 80). The
/// preStop sleep keeps a terminating pod serving while its removal from the endpoints
/// reaches every node, as upstream's docs advise for rollouts behind any ingress.
fn echo(name: &str, replicas: u32) -> [Value; 2] {
    let mounts = [
        ("host-usr", "/usr", "/host/usr"),
        ("host-lib", "/usr/lib", "/lib"),
        ("host-lib64", "/usr/lib64", "/lib64"),
    ];
    let volumes: Vec<Value> = mounts
        .iter()
        .map(|(n, path, _)| json!({"name": n, "hostPath": {"path": path}}))
        .collect();
    let volume_mounts: Vec<Value> = mounts
        .iter()
        .map(|(n, _, at)| json!({"name": n, "mountPath": at, "readOnly": true}))
        .collect();
    let container = json!({
        "name": "echo", "image": "busybox",
        "command": ["/host/usr/bin/python3", "-c", ECHO],
        "env": [{"name": "SERVICE", "value": name}],
        "ports": [{"name": "http", "containerPort": 80}],
        "volumeMounts": volume_mounts,
        "readinessProbe": {"httpGet": {"path": "/", "port": 80}, "periodSeconds": 1},
        "lifecycle": {"preStop": {"exec": {"command": ["sleep", "2"]}}},
    });
    let labels = json!({"app": name});
    [
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": name},
               "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                        "template": {"metadata": {"labels": labels},
                                     "spec": {"containers": [container], "volumes": volumes,
                                              "terminationGracePeriodSeconds": 10}}}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
               "spec": {"selector": labels,
                        "ports": [{"name": "http", "port": 8080, "targetPort": 80}]}}),
    ]
}

fn apply(lab: &Lab, items: &[Value]) {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), list.to_string()).unwrap();
    lab.kubectl(&["apply", "-f", &file.path().display().to_string()]);
}

fn client_script() -> String {
    format!("{}/tests/python/http_client.py", env!("CARGO_MANIFEST_DIR"))
}

/// `http_client.py ARGS` on the switch; its JSON line.
fn on_switch(lab: &Lab, args: &[&str]) -> Result<Value, String> {
    let script = client_script();
    let mut cmd = vec!["python3", script.as_str()];
    cmd.extend_from_slice(args);
    let out = lab.on_switch(&cmd)?;
    serde_json::from_str(out.trim()).map_err(|e| format!("{e}: {out}"))
}

/// One request; `(status, body)`.
fn get(lab: &Lab, target: &str, host: &str, path: &str, ca: Option<&Path>) -> (u64, String) {
    let ca_arg = ca.map(|p| p.display().to_string());
    let mut args = vec!["get", target, host, path];
    if let Some(ca) = &ca_arg {
        args.extend(["--ca", ca.as_str()]);
    }
    let r = on_switch(lab, &args).unwrap_or_else(|e| panic!("GET {host}{path} on {target}: {e}"));
    (
        r["status"].as_u64().unwrap(),
        r["body"].as_str().unwrap().to_string(),
    )
}

/// The Service that answered a request.
fn service_of(body: &str) -> String {
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    v["service"].as_str().unwrap().to_string()
}

/// A client loop on the switch until [`Loop::finish`].
struct Loop {
    child: Child,
    stop: tempfile::TempDir,
}

impl Loop {
    fn start(lab: &Lab, target: &str, host: &str, path: &str, extra: &[&str]) -> Loop {
        let stop = tempfile::tempdir().unwrap();
        let stop_file = stop.path().join("stop").display().to_string();
        let script = client_script();
        let mut cmd: Command =
            lab.switch_command(&["python3", &script, "loop", target, host, path]);
        cmd.arg(&stop_file).args(extra).stdout(Stdio::piped());
        Loop {
            child: cmd.spawn().unwrap(),
            stop,
        }
    }

    fn finish(self) -> Value {
        std::fs::write(self.stop.path().join("stop"), "").unwrap();
        let out = self.child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"))
    }
}

/// A CA and a serving certificate for `foo.com`, as files.
struct Certificate {
    ca: std::path::PathBuf,
    cert: std::path::PathBuf,
    key: std::path::PathBuf,
}

fn certificate(dir: &Path, ca_name: &str) -> Certificate {
    let year = Duration::from_secs(365 * 86400);
    let ca = cairn_pki::Authority::generate(ca_name, year).unwrap();
    let leaf = ca
        .issue_serving("foo.com", &["foo.com".into()], year)
        .unwrap();
    let files = Certificate {
        ca: dir.join(format!("{ca_name}.crt")),
        cert: dir.join(format!("{ca_name}-leaf.crt")),
        key: dir.join(format!("{ca_name}-leaf.key")),
    };
    std::fs::write(&files.ca, ca.cert_pem()).unwrap();
    std::fs::write(&files.cert, &leaf.cert_pem).unwrap();
    std::fs::write(&files.key, &leaf.key_pem).unwrap();
    files
}

/// `kubectl create secret tls my-cert` from `c`, or replacing it (`apply`).
fn tls_secret(lab: &Lab, c: &Certificate) {
    let yaml = lab.kubectl(&[
        "create",
        "secret",
        "tls",
        "my-cert",
        &format!("--cert={}", c.cert.display()),
        &format!("--key={}", c.key.display()),
        "--dry-run=client",
        "-o",
        "yaml",
    ]);
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), yaml).unwrap();
    lab.kubectl(&["apply", "-f", &file.path().display().to_string()]);
}

#[test]
fn ingress_routes_http_and_https_from_outside_the_nodes() {
    let lab = Lab::up("e2eing", 16507, &["--nodes=2"]);
    // The Gateway API's CRDs first: the controllers' watches find them while the
    // Ingress cases run.
    lab.kubectl(&["create", "-f", GATEWAY_API_CRDS]);
    let default =
        "jsonpath={.metadata.annotations.ingressclass\\.kubernetes\\.io/is-default-class}";
    assert_eq!(
        lab.kubectl(&["get", "ingressclass", "cairn", "-o", default]),
        "true"
    );
    let mut objects = Vec::new();
    objects.extend(echo("svc1", 2));
    objects.extend(echo("svc2", 1));
    apply(&lab, &objects);
    for d in ["svc1", "svc2"] {
        lab.kubectl(&[
            "rollout",
            "status",
            &format!("deployment/{d}"),
            "--timeout=3m",
        ]);
    }
    let nodes = [lab.node_ip("node-1"), lab.node_ip("node-2")];
    let http: Vec<String> = nodes.iter().map(|n| format!("{n}:80")).collect();
    let https: Vec<String> = nodes.iter().map(|n| format!("{n}:443")).collect();

    // `kubectl create ingress --help`'s examples, with cairn's class (the default: none
    // named) where they name `default`.
    for args in [
        &["simple", "--rule=foo.com/bar=svc1:8080,tls=my-cert"][..],
        &[
            "catch-all",
            "--class=otheringress",
            "--rule=/path=svc1:8080",
        ],
        &[
            "multipleingress",
            "--rule=foo.com/path*=svc2:8080",
            "--rule=bar.com/admin*=svc2:http",
        ],
        &[
            "ingdefault",
            "--default-backend=svc2:http",
            "--rule=default.com/*=svc1:8080",
        ],
        // Bad input: a Service that does not exist; a rule an older Ingress has.
        &["broken", "--rule=broken.com/*=nosuch:80"],
        &["simple-copy", "--rule=foo.com/bar=svc2:8080"],
    ] {
        let mut a = vec!["create", "ingress"];
        a.extend_from_slice(args);
        lab.kubectl(&a);
    }
    // DefaultIngressClass admission: an Ingress naming no class gets the default one.
    let class = "jsonpath={.spec.ingressClassName}";
    assert_eq!(
        lab.kubectl(&["get", "ingress", "simple", "-o", class]),
        "cairn"
    );
    assert_eq!(
        lab.kubectl(&["get", "ingress", "catch-all", "-o", class]),
        "otheringress"
    );
    let dir = tempfile::tempdir().unwrap();
    let one = certificate(dir.path(), "ca-one");
    tls_secret(&lab, &one);

    // Every node routes: wait for the last Ingress's route, then check all of them.
    for target in &http {
        eventually("the Ingresses routed", MINUTE, || {
            let (status, body) = get(&lab, target, "bar.com", "/admin/x", None);
            (status == 200 && service_of(&body) == "svc2").then_some(())
        });
        let (status, body) = get(&lab, target, "foo.com", "/bar", None);
        assert_eq!(
            (status, service_of(&body)),
            (200, "svc1".into()),
            "the oldest keeps foo.com/bar"
        );
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["path"], "/bar");
        assert_eq!(v["headers"]["x-forwarded-host"], "foo.com");
        assert_eq!(v["headers"]["x-forwarded-proto"], "http");
        assert_eq!(
            v["headers"]["x-forwarded-for"],
            cairn_lab::plan::SWITCH_IP.to_string(),
            "the switch's address: {body}"
        );
        // Exact: /bar only; /bar/baz matches no rule, so the default backend has it.
        let (status, body) = get(&lab, target, "foo.com", "/bar/baz", None);
        assert_eq!((status, service_of(&body)), (200, "svc2".into()));
        let (status, body) = get(&lab, target, "foo.com", "/path/deeper", None);
        assert_eq!((status, service_of(&body)), (200, "svc2".into()));
        // No host matches: the default backend; another class's rule is not ours.
        let (status, body) = get(&lab, target, "elsewhere.org", "/path", None);
        assert_eq!((status, service_of(&body)), (200, "svc2".into()));
        let (status, body) = get(&lab, target, "default.com", "/x", None);
        assert_eq!((status, service_of(&body)), (200, "svc1".into()));
        let (status, body) = get(&lab, target, "broken.com", "/", None);
        assert_eq!(
            (status, body.as_str()),
            (503, "service \"default/nosuch\" not found\n")
        );
    }

    // The data plane's requests on node-1's `/metrics`, by Service and status code.
    let metrics = lab
        .on_node(
            "node-1",
            &["curl", "-fsS", "http://127.0.0.1:10249/metrics"],
        )
        .unwrap();
    let count = |series: &str| -> u64 {
        let line = metrics
            .lines()
            .find(|l| l.starts_with(&format!("cairn_ingress_requests_total{{{series}}} ")))
            .unwrap_or_else(|| panic!("no {series} in {metrics}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert!(count("namespace=\"default\",service=\"svc1\",code=\"200\"") >= 2);
    assert!(count("namespace=\"\",service=\"\",code=\"503\"") >= 1);

    // Status: every node's address; what the table could not take, as Warning events.
    let mut addresses: Vec<String> = nodes.to_vec();
    addresses.sort();
    let lb = "jsonpath={.status.loadBalancer.ingress[*].ip}";
    eventually("the Ingress's status addresses", MINUTE, || {
        let got = lab.kubectl(&["get", "ingress", "simple", "-o", lb]);
        (got == addresses.join(" ")).then_some(())
    });
    // A Secret that is not a certificate: its host falls back to the default one, and
    // a Warning event says why.
    lab.kubectl(&[
        "create",
        "secret",
        "generic",
        "not-a-cert",
        "--type=kubernetes.io/tls",
        "--from-literal=tls.crt=junk",
        "--from-literal=tls.key=junk",
    ]);
    lab.kubectl(&[
        "create",
        "ingress",
        "badtls",
        "--rule=badtls.example/*=svc1:8080,tls=not-a-cert",
    ]);
    for (ingress, reason, words) in [
        (
            "broken",
            "ServiceNotFound",
            "service \"default/nosuch\" not found",
        ),
        (
            "simple-copy",
            "Conflict",
            "default/simple, an older Ingress, routes it",
        ),
    ] {
        let selector = format!("involvedObject.kind=Ingress,involvedObject.name={ingress}");
        let events = "jsonpath={range .items[*]}{.type} {.reason}: {.message}{\"\\n\"}{end}";
        let said = eventually(&format!("{ingress}'s {reason} event"), MINUTE, || {
            let got = lab.kubectl(&["get", "events", "--field-selector", &selector, "-o", events]);
            got.lines()
                .find(|l| l.starts_with(&format!("Warning {reason}: ")))
                .map(str::to_string)
        });
        assert!(said.contains(words), "{said}");
    }

    // HTTPS, verified against the Secret's CA, on both nodes.
    for target in &https {
        let (status, body) = eventually("foo.com's certificate served", MINUTE, || {
            let r = on_switch(
                &lab,
                &[
                    "get",
                    target,
                    "foo.com",
                    "/bar",
                    "--ca",
                    &one.ca.display().to_string(),
                ],
            );
            r.ok().map(|r| {
                (
                    r["status"].as_u64().unwrap(),
                    r["body"].as_str().unwrap().to_string(),
                )
            })
        });
        assert_eq!((status, service_of(&body)), (200, "svc1".into()));
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["headers"]["x-forwarded-proto"], "https");
    }

    certificate_switch_fails_no_request(&lab, &https[0], &one, dir.path());
    rollout_fails_no_request(&lab, &http[1]);
    slow_loris_leaves_others_served(&lab, &http[0]);
    node_port_and_service_lb_beside_ingress(&lab, &nodes);
    gateway_api_beside_ingress(&lab, &nodes);
    nodes_picked_by_label(&lab, &nodes);
}

/// Whether `node:80` answers foo.com/bar (`Some(true)`), refuses connections
/// (`Some(false)`: nothing listens), or neither yet.
fn serving(lab: &Lab, node: &str) -> Option<bool> {
    match on_switch(lab, &["get", &format!("{node}:80"), "foo.com", "/bar"]) {
        Ok(r) => (r["status"] == 200).then_some(true),
        Err(e) => e.contains("Connection refused").then_some(false),
    }
}

/// `ingress.cairn.io/enabled` picks the serving nodes (k3s ServiceLB's rule): `false`
/// keeps a node out; once a node has `true`, only such nodes serve. A node left out
/// closes its listeners and leaves the Ingress's and the Gateway's status addresses;
/// put back, it serves again.
fn nodes_picked_by_label(lab: &Lab, nodes: &[String; 2]) {
    let label = "ingress.cairn.io/enabled";
    let (one, two) = (&nodes[0], &nodes[1]);
    let addresses = |want: &str| {
        let lb = "jsonpath={.status.loadBalancer.ingress[*].ip}";
        let gw = "jsonpath={.status.addresses[*].value}";
        eventually(&format!("the status addresses {want}"), MINUTE, || {
            let ingress = lab.kubectl(&["get", "ingress", "simple", "-o", lb]);
            let gateway = lab.kubectl(&["get", "gateway", "web", "-o", gw]);
            (ingress == want && gateway == want).then_some(())
        });
    };
    let state = |node: &str, want: bool| {
        let what = format!("{node} serving: {want}");
        eventually(&what, MINUTE, || {
            (serving(lab, node) == Some(want)).then_some(())
        });
    };
    lab.kubectl(&["label", "node", "node-2", &format!("{label}=false")]);
    addresses(one);
    state(two, false);
    state(one, true);
    // node-1 opts in: node-2, unlabelled, stays out (in this order, node-2 is never
    // picked in between).
    lab.kubectl(&["label", "node", "node-1", &format!("{label}=true")]);
    lab.kubectl(&["label", "node", "node-2", &format!("{label}-")]);
    addresses(one);
    state(one, true);
    assert_eq!(
        serving(lab, two),
        Some(false),
        "{two} serves with node-1 picked"
    );
    // No label anywhere: every node serves again.
    lab.kubectl(&["label", "node", "node-1", &format!("{label}-")]);
    let mut both = nodes.to_vec();
    both.sort();
    addresses(&both.join(" "));
    state(two, true);
    state(one, true);
}

/// The Secret replaced under a loop of new HTTPS connections trusting both CAs: every
/// request succeeds, and the new certificate is served.
fn certificate_switch_fails_no_request(lab: &Lab, target: &str, one: &Certificate, dir: &Path) {
    let two = certificate(dir, "ca-two");
    let bundle = dir.join("both.crt");
    let both =
        std::fs::read_to_string(&one.ca).unwrap() + &std::fs::read_to_string(&two.ca).unwrap();
    std::fs::write(&bundle, both).unwrap();
    let bundle = bundle.display().to_string();
    let client = Loop::start(lab, target, "foo.com", "/bar", &["--ca", &bundle]);
    eventually("a request served with ca-one's certificate", MINUTE, || {
        on_switch(
            lab,
            &[
                "get",
                target,
                "foo.com",
                "/bar",
                "--ca",
                &one.ca.display().to_string(),
            ],
        )
        .ok()
    });
    tls_secret(lab, &two);
    let ca_two = two.ca.display().to_string();
    eventually("ca-two's certificate served", MINUTE, || {
        on_switch(lab, &["get", target, "foo.com", "/bar", "--ca", &ca_two]).ok()
    });
    let result = client.finish();
    println!("certificate switch: {result}");
    assert_eq!(result["failed"], 0, "{result}");
    assert!(
        result["issuers"]["ca-one"].as_u64().unwrap() > 0,
        "{result}"
    );
    assert!(
        result["issuers"]["ca-two"].as_u64().unwrap() > 0,
        "{result}"
    );
}

/// `kubectl rollout restart` of svc1 under a keep-alive client loop: no failed request.
fn rollout_fails_no_request(lab: &Lab, target: &str) {
    let before = lab.kubectl(&["get", "pods", "-l", "app=svc1", "-o", "name"]);
    let client = Loop::start(lab, target, "foo.com", "/bar", &["--keepalive"]);
    lab.kubectl(&["rollout", "restart", "deployment/svc1"]);
    lab.kubectl(&["rollout", "status", "deployment/svc1", "--timeout=3m"]);
    // Until the old pods are gone, so requests ran through their termination.
    eventually("the old svc1 pods gone", 2 * MINUTE, || {
        let now = lab.kubectl(&["get", "pods", "-l", "app=svc1", "-o", "name"]);
        before
            .lines()
            .all(|old| !now.lines().any(|l| l == old))
            .then_some(())
    });
    let result = client.finish();
    println!("rollout: {result}");
    assert_eq!(result["failed"], 0, "{result}");
    assert!(result["ok"].as_u64().unwrap() > 0, "{result}");
}

/// 200 connections that send half a request and stall: 50 normal requests meanwhile all
/// succeed, and the stalled connections are closed (the header timeout).
fn slow_loris_leaves_others_served(lab: &Lab, target: &str) {
    let result = on_switch(lab, &["slowloris", target, "default.com", "/", "200", "50"]).unwrap();
    println!("slow loris: {result}");
    assert_eq!(result["ok"], 50, "{result}");
    assert_eq!(result["slow_closed"], 200, "{result}");
}

/// A NodePort and a LoadBalancer Service (ServiceLB) of svc2 answer on the same nodes
/// as the Ingress listeners.
fn node_port_and_service_lb_beside_ingress(lab: &Lab, nodes: &[String; 2]) {
    lab.kubectl(&[
        "expose",
        "deployment",
        "svc2",
        "--name=svc2-np",
        "--type=NodePort",
        "--port=80",
    ]);
    lab.kubectl(&[
        "expose",
        "deployment",
        "svc2",
        "--name=svc2-lb",
        "--type=LoadBalancer",
        "--port=8081",
        "--target-port=80",
    ]);
    let node_port = lab.kubectl(&[
        "get",
        "service",
        "svc2-np",
        "-o",
        "jsonpath={.spec.ports[0].nodePort}",
    ]);
    for node in nodes {
        for url in [
            format!("http://{node}:{node_port}/"),
            format!("http://{node}:8081/"),
        ] {
            let body = eventually(&url, MINUTE, || {
                lab.on_switch(&["curl", "-fsS", "-m", "3", &url]).ok()
            });
            assert_eq!(service_of(&body), "svc2", "{url}");
        }
        let (status, body) = get(lab, &format!("{node}:80"), "foo.com", "/bar", None);
        assert_eq!((status, service_of(&body)), (200, "svc1".into()));
    }
}

fn gateway_objects() -> Vec<Value> {
    let gw = "gateway.networking.k8s.io/v1";
    let route = |ns: &str, name: &str, section: &str, spec: Value| {
        let mut spec = spec;
        spec["parentRefs"] =
            json!([{"name": "web", "namespace": "default", "sectionName": section}]);
        json!({"apiVersion": gw, "kind": "HTTPRoute", "metadata": {"namespace": ns, "name": name}, "spec": spec})
    };
    let svc = |name: &str| json!({"name": name, "namespace": "default", "port": 8080});
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace",
               "metadata": {"name": "gw-apps", "labels": {"team": "apps"}}}),
        json!({"apiVersion": gw, "kind": "GatewayClass", "metadata": {"name": "cairn"},
               "spec": {"controllerName": "cairn.io/gateway-controller"}}),
        json!({"apiVersion": gw, "kind": "Gateway", "metadata": {"namespace": "default", "name": "web"},
               "spec": {"gatewayClassName": "cairn", "listeners": [
                   {"name": "http", "port": 80, "protocol": "HTTP", "hostname": "*.gw.example",
                    "allowedRoutes": {"namespaces": {"from": "Selector",
                                      "selector": {"matchLabels": {"team": "apps"}}}}},
                   {"name": "alt", "port": 8088, "protocol": "HTTP",
                    "allowedRoutes": {"namespaces": {"from": "All"}}},
                   // Bad input: a port each node's cairn-proxy holds (its healthz).
                   {"name": "taken", "port": 10256, "protocol": "HTTP"}]}}),
        json!({"apiVersion": gw, "kind": "ReferenceGrant",
               "metadata": {"namespace": "default", "name": "gw-apps-to-services"},
               "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "gw-apps"}],
                        "to": [{"group": "", "kind": "Service"}]}}),
        route(
            "gw-apps",
            "shop",
            "http",
            json!({"hostnames": ["shop.gw.example"], "rules": [
            {"matches": [{"headers": [{"name": "x-canary", "value": "yes"}]}],
             "filters": [{"type": "RequestHeaderModifier",
                          "requestHeaderModifier": {"set": [{"name": "x-gateway", "value": "web"}]}}],
             "backendRefs": [svc("svc2")]},
            {"matches": [{"path": {"type": "PathPrefix", "value": "/old"}}],
             "filters": [{"type": "RequestRedirect",
                          "requestRedirect": {"hostname": "new.gw.example", "statusCode": 301}}]},
            {"backendRefs": [svc("svc1")]}]}),
        ),
        route(
            "default",
            "denied",
            "http",
            json!({"rules": [{"backendRefs": [svc("svc1")]}]}),
        ),
        route(
            "default",
            "alt",
            "alt",
            json!({"rules": [{"backendRefs": [svc("svc2")]}]}),
        ),
    ]
}

/// A route's condition on its first parent: `STATUS REASON`.
fn route_condition(lab: &Lab, namespace: &str, route: &str, kind: &str) -> String {
    let path = format!(
        "jsonpath={{.status.parents[0].conditions[?(@.type==\"{kind}\")].status}} {{.status.parents[0].conditions[?(@.type==\"{kind}\")].reason}}"
    );
    lab.kubectl(&["get", "httproute", "-n", namespace, route, "-o", &path])
}

/// A Gateway on port 80 beside the Ingresses and alone on 8088: its routes from the
/// switch to both nodes, and the conditions upstream asks for.
fn gateway_api_beside_ingress(lab: &Lab, nodes: &[String; 2]) {
    apply(lab, &gateway_objects());
    for (ns, route, want) in [
        ("gw-apps", "shop", "True Accepted"),
        ("default", "denied", "False NotAllowedByListeners"),
        ("default", "alt", "True Accepted"),
    ] {
        eventually(&format!("HTTPRoute {ns}/{route} {want}"), MINUTE, || {
            (route_condition(lab, ns, route, "Accepted") == want).then_some(())
        });
    }
    assert_eq!(
        route_condition(lab, "gw-apps", "shop", "ResolvedRefs"),
        "True ResolvedRefs"
    );
    let listeners = "jsonpath={.status.conditions[?(@.type==\"Programmed\")].status} {.status.listeners[*].attachedRoutes} {.status.addresses[*].value}";
    let mut addresses = nodes.to_vec();
    addresses.sort();
    let want = format!("True 1 1 0 {}", addresses.join(" "));
    eventually("the Gateway's status", MINUTE, || {
        (lab.kubectl(&["get", "gateway", "web", "-o", listeners]) == want).then_some(())
    });
    for node in nodes {
        let target = format!("{node}:80");
        let canary = eventually("the shop route served", MINUTE, || {
            let r = on_switch(
                lab,
                &[
                    "get",
                    &target,
                    "shop.gw.example",
                    "/x",
                    "--header",
                    "X-Canary: yes",
                ],
            )
            .ok()?;
            (r["status"] == 200).then_some(r)
        });
        let body: Value = serde_json::from_str(canary["body"].as_str().unwrap()).unwrap();
        assert_eq!(
            (
                body["service"].clone(),
                body["headers"]["x-gateway"].clone()
            ),
            (json!("svc2"), json!("web"))
        );
        let (status, body) = get(lab, &target, "shop.gw.example", "/x", None);
        assert_eq!((status, service_of(&body)), (200, "svc1".into()));
        let r = on_switch(lab, &["get", &target, "shop.gw.example", "/old/page"]).unwrap();
        assert_eq!(
            (r["status"].clone(), r["location"].clone()),
            (json!(301), json!("http://new.gw.example/old/page"))
        );
        // The Ingresses keep port 80's other hosts.
        let (status, body) = get(lab, &target, "foo.com", "/bar", None);
        assert_eq!((status, service_of(&body)), (200, "svc1".into()));
        let alt = format!("{node}:8088");
        let body = eventually("port 8088 bound", MINUTE, || {
            let r = on_switch(lab, &["get", &alt, "any.host", "/"]).ok()?;
            (r["status"] == 200).then(|| r["body"].as_str().unwrap().to_string())
        });
        assert_eq!(service_of(&body), "svc2");
    }
    // The listener whose port the nodes cannot bind: a Warning event from the nodes.
    let selector = "involvedObject.kind=Gateway,involvedObject.name=web";
    let events = "jsonpath={range .items[*]}{.type} {.reason}: {.message}{\"\\n\"}{end}";
    let said = eventually("the Gateway's PortUnavailable event", MINUTE, || {
        let got = lab.kubectl(&["get", "events", "--field-selector", selector, "-o", events]);
        got.lines()
            .find(|l| l.starts_with("Warning PortUnavailable: "))
            .map(str::to_string)
    });
    assert!(said.contains("listening on 0.0.0.0:10256"), "{said}");
    // The grant revoked: the cross-namespace backend is refused, and its share is a 500.
    lab.kubectl(&["delete", "referencegrant", "gw-apps-to-services"]);
    eventually("shop's ResolvedRefs RefNotPermitted", MINUTE, || {
        (route_condition(lab, "gw-apps", "shop", "ResolvedRefs") == "False RefNotPermitted")
            .then_some(())
    });
    let target = format!("{}:80", nodes[0]);
    eventually("the revoked backend answers 500", MINUTE, || {
        let (status, _) = get(lab, &target, "shop.gw.example", "/x", None);
        (status == 500).then_some(())
    });
}
