//! Day-one tools on a fresh 2-node lab, with stock kubectl 1.33 (websocket, and SPDY
//! tunnelled in websocket for port-forward) and 1.27 (SPDY): exec with exit codes and
//! stdin, an interactive terminal under tmux that follows a resize, port-forward with two
//! connections at once, cp both ways, attach, `kubectl debug` with a target, the
//! node/pod/service proxy; cluster DNS from a pod (Service names, headless Services with
//! ready pods only, StatefulSet pod names, SRV); and bad input:
//! a missing container, a finished pod, a client killed mid-exec (its process is reaped),
//! a port-forward to a closed port; the official Python client's exec, stdin and
//! port-forward, its Job deletions (pods must finish), and pods deleted while their
//! images cannot be pulled; an HPA scaling a Deployment out under load and back in;
//! `kubectl top` with and without a node's agent.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "day_one/autoscaling.rs"]
mod autoscaling;
mod common;
#[path = "day_one/eviction.rs"]
mod eviction;
#[path = "day_one/metrics.rs"]
mod metrics;

use std::io::Write as _;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{eventually, Lab};

const PAGE: &str = "It works!";
const MINUTE: Duration = Duration::from_secs(60);
/// kubectl 1.33 speaks websocket (v5); 1.27 only SPDY.
fn kubectls() -> [String; 2] {
    [common::kubectl_path(33), common::kubectl_path(27)]
}

fn kubectl(lab: &Lab, bin: &str) -> Command {
    let mut c = Command::new(bin);
    c.arg("--kubeconfig").arg(&lab.kubeconfig);
    c
}

/// Exit code, stdout and stderr of a kubectl run with `stdin` fed in.
fn run(lab: &Lab, bin: &str, args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = kubectl(lab, bin)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn pod_ready(lab: &Lab, name: &str) {
    lab.kubectl(&[
        "wait",
        "--for=condition=Ready",
        &format!("pod/{name}"),
        "--timeout=90s",
    ]);
}

#[test]
fn exec_port_forward_cp_attach_proxy_and_bad_input() {
    // The switch stands for the world outside: its resolver is every agent's upstream.
    let upstream = "--agent-arg=--dns-upstream=198.18.0.1:53";
    // Quick housekeeping and scrapes, so `kubectl top` has two points within seconds.
    let quick_stats = [
        "--agent-arg=--housekeeping-interval-seconds=1",
        "--control-arg=--metric-resolution=2s",
        // HPAs decide every 2 s and scale in 10 s after the load goes.
        "--control-arg=--horizontal-pod-autoscaler-sync-period=2s",
        "--control-arg=--horizontal-pod-autoscaler-downscale-stabilization=10s",
    ];
    // Pods get 800 MiB of the host and evict below 500 MiB (see day_one/eviction.rs); the
    // status is checked every 2 s and pressure holds 15 s after it cleared.
    let reserved = format!(
        "--agent-arg=--reserved-memory-mib={}",
        eviction::reserved_memory_mib()
    );
    let pressure = [
        reserved.as_str(),
        "--agent-arg=--eviction-hard=memory.available<500Mi",
        "--agent-arg=--eviction-pressure-transition-period-seconds=15",
        "--agent-arg=--node-status-update-seconds=2",
    ];
    let args = [
        &["--driver=netns", "--nodes=2", upstream][..],
        &quick_stats,
        &pressure,
    ]
    .concat();
    let lab = Lab::up("e2eday1", 16491, &args);
    lab.kubectl(&["run", "web", "--image=httpd", "--port=80"]);
    lab.kubectl(&["expose", "pod", "web", "--port=80"]);
    pod_ready(&lab, "web");
    for bin in &kubectls() {
        exec_exit_codes_and_stdin(&lab, bin);
        interactive_terminal_follows_resize(&lab, bin);
        port_forward_two_connections(&lab, bin);
        copy_both_ways(&lab, bin);
    }
    attach_follows_output(&lab);
    debug_container_sees_the_target(&lab);
    proxies(&lab);
    cluster_dns(&lab);
    metrics::every_component_serves_metrics(&lab);
    metrics::prometheus_scrapes_the_lab(&lab);
    bad_input(&lab);
    python_client_streams_and_jobs(&lab);
    python_client_in_cluster(&lab);
    deleted_pods_stop_pulling(&lab);
    autoscaling::hpa_scales_out_and_back_in(&lab);
    eviction::memory_pressure_evicts_the_hog(&lab);
    kubectl_top_with_and_without_a_node(&lab);
}

/// Stock `kubectl top` (1.33 and 1.27) against the built-in metrics API; then node-2's
/// agent stops answering: node-2 has no metrics (`<unknown>`), node-1 still shows. Last,
/// because node-2 stays without its agent.
fn kubectl_top_with_and_without_a_node(lab: &Lab) {
    for bin in &kubectls() {
        let top = |args: &[&str]| run(lab, bin, args, "");
        eventually("kubectl top nodes lists both nodes", MINUTE, || {
            let (code, out, _) = top(&["top", "nodes"]);
            (code == 0 && out.contains("node-1") && out.contains("node-2")).then_some(())
        });
        let out = eventually("kubectl top pods -A --containers shows web", MINUTE, || {
            let (code, out, _) = top(&["top", "pods", "-A", "--containers"]);
            (code == 0 && out.contains("web")).then_some(out)
        });
        assert!(
            out.lines().next().is_some_and(|h| h.contains("POD")
                && h.contains("NAME")
                && h.contains("CPU(cores)")),
            "{out}"
        );
        let (code, out, err) = top(&["top", "pod", "-l", "run=web"]);
        assert!(code == 0 && out.contains("web"), "{out}{err}");
    }
    lab.lab(&["stop", "node-2", "agent", "--kill"]);
    // kubectl lists every Node, those without metrics as <unknown>.
    eventually(
        "node-2 without metrics in kubectl top nodes",
        MINUTE,
        || {
            let out = lab.try_kubectl(&["top", "nodes"]).ok()?;
            let line = |node: &str| {
                out.lines()
                    .find(|l| l.starts_with(node))
                    .map(str::to_string)
            };
            let (one, two) = (line("node-1")?, line("node-2")?);
            (!one.contains("<unknown>") && two.contains("<unknown>")).then_some(())
        },
    );
    let missing = lab.try_kubectl(&["get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes/node-2"]);
    let err = missing.expect_err("node-2 has no metrics");
    assert!(err.contains("not found"), "{err}");
}

/// The official Python client: Debian's python3-kubernetes, and the PyPI release
/// `scripts/install-deps.sh` puts in [`PYPI_CLIENT`] when it could (v5 and stdin close).
const PYPI_CLIENT: &str = "/opt/cairn-test/python-kubernetes/bin/python3";

fn python_clients() -> Vec<&'static str> {
    let mut clients = vec!["/usr/bin/python3"];
    if std::path::Path::new(PYPI_CLIENT).exists() {
        clients.push(PYPI_CLIENT);
    } else {
        println!("{PYPI_CLIENT} not installed: only Debian's client runs");
    }
    clients
}

fn python(script: &str, args: &[&str], interpreter: &str) {
    let path = format!("{}/tests/python/{script}", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(interpreter)
        .arg(&path)
        .args(args)
        .output()
        .unwrap();
    let text = common::combined(&out);
    println!("{interpreter} {script}:\n{text}");
    assert!(
        out.status.success(),
        "{interpreter} {script} failed:\n{text}"
    );
}

/// Exec (plain, stdin, exit codes, v5 close, base64), port-forward, and the issue's Job
/// deletions with the Python client; each client in a namespace of its own for its Jobs.
fn python_client_streams_and_jobs(lab: &Lab) {
    let kubeconfig = lab.kubeconfig.display().to_string();
    for (i, interpreter) in python_clients().into_iter().enumerate() {
        python("streams.py", &[&kubeconfig, "web"], interpreter);
        let ns = format!("pyjobs-{i}");
        lab.kubectl(&["create", "namespace", &ns]);
        python("jobs.py", &[&kubeconfig, &ns], interpreter);
    }
}

const IN_CLUSTER: &str = "
from kubernetes import client, config
config.load_incluster_config()
try:
    pods = client.CoreV1Api().list_namespaced_pod('incluster')
    print('listed', len(pods.items))
except client.exceptions.ApiException as e:
    print('status', e.status)
";

/// A pod running Debian's python3-kubernetes as `account`: the node's /usr mounted
/// read-only over busybox (no Python image can be pulled or built offline here).
fn python_pod(name: &str, account: &str) -> String {
    let host = |n: &str, p: &str| serde_json::json!({"name": n, "hostPath": {"path": p}});
    let mount = |n: &str, p: &str| serde_json::json!({"name": n, "mountPath": p, "readOnly": true});
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "incluster"},
        "spec": {
            "serviceAccountName": account,
            "restartPolicy": "Never",
            "containers": [{
                "name": "py", "image": "busybox",
                "command": ["/usr/bin/python3", "-c", IN_CLUSTER],
                "volumeMounts": [mount("usr", "/usr"), mount("lib", "/lib"), mount("lib64", "/lib64")],
            }],
            "volumes": [host("usr", "/usr"), host("lib", "/usr/lib"), host("lib64", "/usr/lib64")],
        },
    })
    .to_string()
}

/// From a pod, the official Python client's `load_incluster_config()` (the mounted
/// token, CA and namespace; the `kubernetes` Service through the proxy) lists pods with
/// a ServiceAccount bound to `view`, and gets 403 with one that is not.
fn python_client_in_cluster(lab: &Lab) {
    let bin = &kubectls()[0];
    lab.kubectl(&["create", "namespace", "incluster"]);
    let ns = ["-n", "incluster"];
    for account in ["reader", "stranger"] {
        lab.kubectl(&[&["create", "serviceaccount", account], &ns[..]].concat());
    }
    let bind = ["create", "rolebinding", "reader-view", "--clusterrole=view"];
    lab.kubectl(&[&bind[..], &["--serviceaccount=incluster:reader"], &ns[..]].concat());
    for (pod, account) in [("py-reader", "reader"), ("py-stranger", "stranger")] {
        let (code, _, err) = run(lab, bin, &["create", "-f", "-"], &python_pod(pod, account));
        assert_eq!(code, 0, "{err}");
    }
    for (pod, want) in [("py-reader", "listed "), ("py-stranger", "status 403")] {
        let jsonpath = "jsonpath={.status.phase}";
        let phase = eventually(&format!("{pod} finished"), Duration::from_secs(90), || {
            let phase = lab.try_kubectl(&["get", "pod", pod, "-n", "incluster", "-o", jsonpath]);
            let phase = phase.ok().map(|p| p.trim().to_string());
            phase.filter(|p| p == "Succeeded" || p == "Failed")
        });
        let logs = lab.kubectl(&["logs", "-n", "incluster", pod]);
        assert_eq!(phase, "Succeeded", "{pod}: {logs}");
        assert!(logs.trim().starts_with(want), "{pod}: {logs}");
    }
}

/// A registry that accepts connections and never answers (pulls hang until their
/// timeout) and one that refuses them: deleting the pods waiting on such pulls finishes
/// them long before their 30 s grace period ends.
const SILENT_REGISTRY: &str = "import socket\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\ns.bind(('198.18.0.1',5998))\ns.listen(64)\nheld=[]\nwhile True:\n    held.append(s.accept()[0])\n";

fn deleted_pods_stop_pulling(lab: &Lab) {
    let mut registry = lab
        .switch_command(&["python3", "-c", SILENT_REGISTRY])
        .spawn()
        .unwrap();
    let pods = [
        ("hang-1", "198.18.0.1:5998/e2e/hang:1"),
        ("hang-2", "198.18.0.1:5998/e2e/hang:1"),
        ("hang-3", "198.18.0.1:5998/e2e/hang:2"),
        ("refused", "198.18.0.1:5999/e2e/refused:1"),
    ];
    for (name, image) in pods {
        lab.kubectl(&["run", name, &format!("--image={image}")]);
    }
    for (name, _) in pods {
        let selector = format!("involvedObject.name={name}");
        eventually(&format!("{name} to start pulling"), MINUTE, || {
            let events = lab.kubectl(&["get", "events", "--field-selector", &selector]);
            events.contains("Pulling").then_some(())
        });
    }
    let mut args = vec!["delete", "pod", "--wait=false"];
    args.extend(pods.iter().map(|(n, _)| *n));
    lab.kubectl(&args);
    let names: Vec<String> = pods.iter().map(|(n, _)| format!("pod/{n}")).collect();
    let mut wait = vec!["wait", "--for=delete", "--timeout=20s"];
    wait.extend(names.iter().map(String::as_str));
    if let Err(e) = lab.try_kubectl(&wait) {
        let left = lab.kubectl(&["get", "pods", "-o", "wide"]);
        panic!("pods waiting on pulls outlived their deletion by 20 s: {e}\n{left}");
    }
    registry.kill().unwrap();
    registry.wait().unwrap();
}

fn exec_exit_codes_and_stdin(lab: &Lab, bin: &str) {
    let started = Instant::now();
    let (code, out, _) = run(
        lab,
        bin,
        &["exec", "web", "--", "sh", "-c", "echo out; exit 3"],
        "",
    );
    assert_eq!((code, out.as_str()), (3, "out\n"), "{bin}");
    println!("{bin}: exec with exit 3 in {:?}", started.elapsed());
    let (code, out, err) = run(
        lab,
        bin,
        &["exec", "-i", "web", "--", "cat"],
        "through stdin\n",
    );
    assert_eq!((code, out.as_str()), (0, "through stdin\n"), "{bin}: {err}");
    let (code, _, err) = run(
        lab,
        bin,
        &["exec", "web", "--", "sh", "-c", "echo to-stderr >&2"],
        "",
    );
    assert_eq!(code, 0);
    assert!(err.contains("to-stderr"), "{bin}: {err}");
}

fn tmux(args: &[&str]) -> String {
    let out = Command::new("tmux").args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn interactive_terminal_follows_resize(lab: &Lab, bin: &str) {
    let session = format!(
        "cairn-e2e-{}",
        bin.rsplit('/').next().unwrap_or(bin).replace('.', "-")
    );
    let cmd = format!(
        "{bin} --kubeconfig {} exec -it web -- sh",
        lab.kubeconfig.display()
    );
    tmux(&["kill-session", "-t", &session]);
    tmux(&[
        "new-session",
        "-d",
        "-s",
        &session,
        "-x",
        "100",
        "-y",
        "30",
        &cmd,
    ]);
    let screen = || tmux(&["capture-pane", "-p", "-t", &session]);
    eventually("a shell prompt", MINUTE, || {
        screen().contains('#').then_some(())
    });
    tmux(&[
        "send-keys",
        "-t",
        &session,
        "echo sum-$((40+2)); stty size",
        "Enter",
    ]);
    eventually("the command's output", MINUTE, || {
        let s = screen();
        (s.contains("sum-42") && s.contains("30 100")).then_some(())
    });
    tmux(&["resize-window", "-t", &session, "-x", "120", "-y", "40"]);
    std::thread::sleep(Duration::from_millis(500));
    tmux(&["send-keys", "-t", &session, "stty size", "Enter"]);
    eventually("the new size inside", MINUTE, || {
        screen().contains("40 120").then_some(())
    });
    tmux(&["send-keys", "-t", &session, "exit", "Enter"]);
    eventually("the session to end", MINUTE, || {
        let listed = Command::new("tmux")
            .args(["has-session", "-t", &session])
            .output()
            .map(|o| o.status);
        (!listed.map(|s| s.success()).unwrap_or(false)).then_some(())
    });
}

fn spawn_quiet(lab: &Lab, bin: &str, args: &[&str]) -> Child {
    kubectl(lab, bin)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn fetch(url: &str) -> Result<String, String> {
    common::output(Command::new("curl").args(["-sS", "--max-time", "5", url]))
}

fn port_forward_two_connections(lab: &Lab, bin: &str) {
    let port = if bin.ends_with("27") { 18127 } else { 18133 };
    let mut pf = spawn_quiet(
        lab,
        bin,
        &["port-forward", "pod/web", &format!("{port}:80")],
    );
    let url = format!("http://127.0.0.1:{port}/");
    eventually("the forwarded port", MINUTE, || fetch(&url).ok());
    let both: Vec<_> = (0..2)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || fetch(&url))
        })
        .collect();
    for t in both {
        assert!(t.join().unwrap().unwrap().contains(PAGE), "{bin}");
    }
    pf.kill().unwrap();
    pf.wait().unwrap();
}

fn copy_both_ways(lab: &Lab, bin: &str) {
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("in.txt");
    let content = format!("copied by {bin}\n").repeat(2000);
    std::fs::write(&local, &content).unwrap();
    let (code, _, err) = run(
        lab,
        bin,
        &["cp", local.to_str().unwrap(), "web:/tmp/in.txt"],
        "",
    );
    assert_eq!(code, 0, "{bin} cp in: {err}");
    let back = dir.path().join("back.txt");
    let (code, _, err) = run(
        lab,
        bin,
        &["cp", "web:/tmp/in.txt", back.to_str().unwrap()],
        "",
    );
    assert_eq!(code, 0, "{bin} cp out: {err}");
    assert_eq!(std::fs::read_to_string(&back).unwrap(), content);
}

fn attach_follows_output(lab: &Lab) {
    lab.kubectl(&[
        "run",
        "ticker",
        "--image=busybox",
        "--",
        "sh",
        "-c",
        "i=0; while true; do echo tick-$i; i=$((i+1)); sleep 0.5; done",
    ]);
    pod_ready(lab, "ticker");
    let mut attach = spawn_quiet(lab, "kubectl", &["attach", "ticker"]);
    std::thread::sleep(Duration::from_secs(4));
    attach.kill().unwrap();
    let out = attach.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.matches("tick-").count() >= 3,
        "attach output: {text:?}"
    );
}

/// `kubectl debug --target`: an ephemeral container in the target's PID namespace; the
/// list of ephemeral containers only grows.
fn debug_container_sees_the_target(lab: &Lab) {
    lab.kubectl(&[
        "debug",
        "web",
        "--image=busybox",
        "--target=web",
        "-c",
        "dbg",
        "--",
        "ps",
    ]);
    eventually("the debugger's view of the target", MINUTE, || {
        let out = lab.try_kubectl(&["logs", "web", "-c", "dbg"]).ok()?;
        out.contains("httpd -f").then_some(())
    });
    // The logs can be complete before the agent's next status sync reports the exit.
    eventually("the debugger's terminated status", MINUTE, || {
        let reason = lab
            .try_kubectl(&[
                "get",
                "pod",
                "web",
                "-o",
                "jsonpath={.status.ephemeralContainerStatuses[0].state.terminated.reason}",
            ])
            .ok()?;
        (reason == "Completed").then_some(())
    });
    let removal = r#"[{"op":"remove","path":"/spec/ephemeralContainers/0"}]"#;
    let err = lab
        .try_kubectl(&[
            "patch",
            "pod",
            "web",
            "--subresource=ephemeralcontainers",
            "--type=json",
            "-p",
            removal,
        ])
        .unwrap_err();
    assert!(err.contains("may not be changed"), "{err}");
}

fn proxies(lab: &Lab) {
    let summary = lab.kubectl(&["get", "--raw", "/api/v1/nodes/node-2/proxy/stats/summary"]);
    let summary: serde_json::Value = serde_json::from_str(&summary).unwrap();
    assert_eq!(summary["node"]["nodeName"], "node-2");
    let metrics = lab.kubectl(&["get", "--raw", "/api/v1/nodes/node-1/proxy/metrics"]);
    assert!(
        metrics.contains("kubelet_node_name{node=\"node-1\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("kubelet_running_pods "), "{metrics}");
    let page = lab.kubectl(&["get", "--raw", "/api/v1/namespaces/default/pods/web/proxy/"]);
    assert!(page.contains(PAGE), "{page}");
    let page = lab.kubectl(&[
        "get",
        "--raw",
        "/api/v1/namespaces/default/services/web:80/proxy/",
    ]);
    assert!(page.contains(PAGE), "{page}");
    let err = lab
        .try_kubectl(&[
            "get",
            "--raw",
            "/api/v1/namespaces/default/services/nope/proxy/",
        ])
        .unwrap_err();
    assert!(err.contains("not found"), "{err}");
}

/// A resolver for the world outside the cluster, on the lab's switch: `outside.example`
/// is 198.18.0.99, other `example` names have no records, anything else is NXDOMAIN.
const FAKE_UPSTREAM: &str = r#"
import socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("198.18.0.1", 53))
while True:
    q, addr = s.recvfrom(512)
    end = q.index(b"\0", 12) + 5
    qtype = struct.unpack("!H", q[end - 4:end - 2])[0]
    name = q[12:end - 4].lower()
    answer, count, rcode = b"", 0, (0 if b"\x07example\0" in name else 3)
    if name == b"\x07outside\x07example\0" and qtype == 1:
        answer = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) + socket.inet_aton("198.18.0.99")
        count = 1
    header = q[:2] + struct.pack("!HHHHH", 0x8180 | rcode, 1, count, 0, 0)
    s.sendto(header + q[12:end] + answer, addr)
"#;

const HEADLESS: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: sts}
spec:
  clusterIP: None
  selector: {app: sts}
  ports: [{name: http, port: 80, protocol: TCP}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: sts}
spec:
  serviceName: sts
  replicas: 2
  selector: {matchLabels: {app: sts}}
  template:
    metadata: {labels: {app: sts}}
    spec:
      containers: [{name: httpd, image: httpd, ports: [{name: http, containerPort: 80}]}]
---
apiVersion: v1
kind: Pod
metadata: {name: sts-unready, labels: {app: sts}}
spec:
  containers:
  - name: httpd
    image: httpd
    readinessProbe: {exec: {command: ["false"]}, periodSeconds: 1}
"#;

fn pod_ip(lab: &Lab, pod: &str) -> String {
    lab.kubectl(&["get", "pod", pod, "-o", "jsonpath={.status.podIP}"])
}

/// What busybox's nslookup prints for `name` from the `client` pod, once it resolves.
fn lookup(lab: &Lab, args: &[&str], expect: &str) -> String {
    let mut cmd = vec!["exec", "client", "--", "nslookup"];
    cmd.extend(args);
    eventually(
        &format!("nslookup {args:?} to show {expect}"),
        MINUTE,
        || {
            // busybox nslookup exits 1 when any of its A/AAAA/search lookups fails.
            let out = match lab.try_kubectl(&cmd) {
                Ok(o) => o,
                Err(e) => e,
            };
            out.contains(expect).then_some(out)
        },
    )
}

/// Cluster DNS from a pod: resolv.conf as ClusterFirst writes it, a Service by short and
/// full name, a headless Service (ready pods only), a StatefulSet pod, SRV for named ports.
fn cluster_dns(lab: &Lab) {
    lab.kubectl(&["run", "client", "--image=busybox", "--", "sleep", "3600"]);
    pod_ready(lab, "client");
    let resolv = lab.kubectl(&["exec", "client", "--", "cat", "/etc/resolv.conf"]);
    assert!(resolv.contains("nameserver 10.96.0.10"), "{resolv}");
    assert!(
        resolv.contains("search default.svc.cluster.local svc.cluster.local cluster.local"),
        "{resolv}"
    );
    assert!(resolv.contains("ndots:5"), "{resolv}");
    let web_ip = lab.kubectl(&["get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}"]);
    lookup(lab, &["web"], &format!("Address: {web_ip}"));
    let page = lab.kubectl(&[
        "exec",
        "client",
        "--",
        "timeout",
        "5",
        "wget",
        "-qO-",
        "http://web.default.svc.cluster.local",
    ]);
    assert!(page.contains(PAGE), "{page}");

    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("headless.yaml");
    std::fs::write(&manifest, HEADLESS).unwrap();
    lab.kubectl(&["apply", "-f", manifest.to_str().unwrap()]);
    lab.kubectl(&["rollout", "status", "statefulset/sts", "--timeout=120s"]);
    let (ip0, ip1) = (pod_ip(lab, "sts-0"), pod_ip(lab, "sts-1"));
    eventually("the unready pod's IP", MINUTE, || {
        let ip = pod_ip(lab, "sts-unready");
        (!ip.is_empty()).then_some(())
    });
    let unready = pod_ip(lab, "sts-unready");
    let out = lookup(
        lab,
        &["sts.default.svc.cluster.local"],
        &format!("Address: {ip1}"),
    );
    assert!(out.contains(&format!("Address: {ip0}")), "{out}");
    assert!(
        !out.contains(&format!("Address: {unready}")),
        "an unready pod answered:\n{out}"
    );
    lookup(
        lab,
        &["sts-0.sts.default.svc.cluster.local"],
        &format!("Address: {ip0}"),
    );
    let srv = lookup(
        lab,
        &["-type=SRV", "_http._tcp.sts.default.svc.cluster.local"],
        "sts-1.sts.default.svc.cluster.local",
    );
    assert!(
        srv.contains("80 sts-0.sts.default.svc.cluster.local"),
        "{srv}"
    );
    let missing = lookup(lab, &["nope.default.svc.cluster.local"], "NXDOMAIN");
    assert!(!missing.contains("Address: 10."), "{missing}");

    // A name outside the cluster goes to the node's upstream resolver.
    let mut upstream = lab
        .switch_command(&["python3", "-c", FAKE_UPSTREAM])
        .spawn()
        .unwrap();
    lookup(lab, &["outside.example"], "Address: 198.18.0.99");
    let nx = lookup(lab, &["nowhere.invalid"], "NXDOMAIN");
    assert!(!nx.contains("198.18.0.99"), "{nx}");
    upstream.kill().unwrap();
    upstream.wait().unwrap();
}

/// Exec processes of `marker` still alive on the host (the netns driver shares its PID
/// namespace with the nodes).
fn live_processes(marker: &str) -> usize {
    common::processes_mentioning(marker).len()
}

fn bad_input(lab: &Lab) {
    for bin in &kubectls() {
        let (code, _, err) = run(lab, bin, &["exec", "web", "-c", "nope", "--", "true"], "");
        assert_ne!(code, 0);
        assert!(
            err.contains("container nope is not valid for pod web"),
            "{bin}: {err}"
        );
    }
    lab.kubectl(&[
        "run",
        "done",
        "--image=busybox",
        "--restart=Never",
        "--",
        "true",
    ]);
    eventually("the pod to finish", MINUTE, || {
        let phase = lab.kubectl(&["get", "pod", "done", "-o", "jsonpath={.status.phase}"]);
        (phase == "Succeeded").then_some(())
    });
    let (code, _, err) = run(lab, "kubectl", &["exec", "done", "--", "true"], "");
    assert_ne!(code, 0);
    assert!(err.contains("completed pod"), "{err}");

    // A client killed mid-exec: the process in the container is killed and reaped.
    // Only the container's child spells the marker out (kubectl's own command line does not).
    let marker = "sleep 7777";
    for bin in &kubectls() {
        let mut exec = spawn_quiet(
            lab,
            bin,
            &["exec", "web", "--", "sh", "-c", "sleep $((7000+777))"],
        );
        eventually("the exec to run", MINUTE, || {
            (live_processes(marker) > 0).then_some(())
        });
        exec.kill().unwrap();
        exec.wait().unwrap();
        eventually("the abandoned exec to be reaped", MINUTE, || {
            (live_processes(marker) == 0).then_some(())
        });
    }

    // Port-forward to a port nothing listens on: the client's connection fails with the
    // agent's message, and the forward keeps serving the next one.
    let mut pf = spawn_quiet(lab, "kubectl", &["port-forward", "pod/web", "18181:81"]);
    std::thread::sleep(Duration::from_secs(2));
    assert!(fetch("http://127.0.0.1:18181/").is_err());
    // kubectl ≥ 1.23 exits by itself after a stream error; kill it if it has not.
    let _ = pf.kill();
    let out = pf.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("error forwarding port 81"), "{err}");
}
