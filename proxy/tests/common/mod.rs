//! The proxy's end-to-end scenario, shared by the modes: real netfilter in network
//! namespaces this test makes (root only): a "node" with two "pods" (each behind a veth,
//! serving its name on TCP 8080) and an outside "client". cairn-control runs in the
//! node's namespace; the test writes Services and EndpointSlices as the controllers
//! would. Checked: a ClusterIP spreads over both endpoints from the node; a NodePort
//! answers from outside; a service without endpoints refuses at once; a not-ready
//! endpoint stops getting connections; `/healthz`; LoadBalancer with
//! `externalTrafficPolicy: Local`; ClientIP affinity; rules survive a killed proxy and a
//! new one converges; `--cleanup` leaves the ruleset as it was, others' rules included.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cairn_testsupport::NetNs;
use serde_json::json;

pub fn sh(ns: &NetNs, cmd: &str) {
    let out = Command::new("ip")
        .args(["netns", "exec", ns.name(), "sh", "-c", cmd])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn enter(ns: &NetNs) {
    ns.enter().unwrap();
}

/// target/debug, where cargo put the workspace's binaries.
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join(name)
}

/// A TCP server in `ns` that answers every connection with `name`.
pub fn serve(ns: &NetNs, name: &'static str) {
    let path = ns.path();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let f = std::fs::File::open(path).unwrap();
        nix::sched::setns(f.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        let l = TcpListener::bind("0.0.0.0:8080").unwrap();
        tx.send(()).unwrap();
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            // The name and the client address it sees (masqueraded or not).
            let peer = s
                .peer_addr()
                .map(|a| a.ip().to_string())
                .unwrap_or_default();
            let _ = s.write_all(format!("{name} {peer}").as_bytes());
        }
    });
    rx.recv().unwrap();
}

/// The answering pod's name.
pub fn fetch(addr: &str) -> std::io::Result<String> {
    let raw = fetch_raw(addr)?;
    Ok(raw
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string())
}

/// `<pod> <client address it saw>`.
pub fn fetch_raw(addr: &str) -> std::io::Result<String> {
    let mut s =
        TcpStream::connect_timeout(&addr.parse::<SocketAddr>().unwrap(), Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

/// `fetch` from another namespace (a thread that enters it).
pub fn fetch_from(ns: &NetNs, addr: &'static str) -> std::io::Result<String> {
    let path = ns.path();
    std::thread::spawn(move || {
        let f = std::fs::File::open(path).unwrap();
        nix::sched::setns(f.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        fetch_raw(addr)
    })
    .join()
    .unwrap()
}

pub fn wait<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub struct Kill(pub Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn kubectl(kubeconfig: &PathBuf, args: &[&str], stdin: Option<String>) -> String {
    let mut c = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(s) = stdin {
        c.stdin.take().unwrap().write_all(s.as_bytes()).unwrap();
    }
    drop(c.stdin.take());
    let out = c.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn slice(ready_b: bool) -> String {
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "web-1", "namespace": "default", "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4", "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": [
            {"addresses": ["10.244.1.2"], "nodeName": "node-a", "conditions": {"ready": true}},
            {"addresses": ["10.244.2.2"], "nodeName": "node-a", "conditions": {"ready": ready_b}}]})
    .to_string()
}

pub fn network() -> (NetNs, NetNs, NetNs, NetNs) {
    let node = NetNs::new("cprx-node").unwrap();
    let (a, b, client) = (
        NetNs::new("cprx-a").unwrap(),
        NetNs::new("cprx-b").unwrap(),
        NetNs::new("cprx-c").unwrap(),
    );
    for (pod, net) in [(&a, 1), (&b, 2)] {
        sh(&node, &format!("ip link add p{net} type veth peer name eth0 netns {} && ip addr add 10.244.{net}.1/24 dev p{net} && ip link set p{net} up", pod.name()));
        sh(pod, &format!("ip addr add 10.244.{net}.2/24 dev eth0 && ip link set eth0 up && ip route add default via 10.244.{net}.1"));
    }
    sh(&node, &format!("ip link add uplink type veth peer name eth0 netns {} && ip addr add 198.18.0.10/24 dev uplink && ip link set uplink up && ip route add default via 198.18.0.20 && sysctl -qw net.ipv4.ip_forward=1", client.name()));
    sh(
        &client,
        "ip addr add 198.18.0.20/24 dev eth0 && ip link set eth0 up",
    );
    (node, a, b, client)
}

/// A proxy mode and how to look at its rules.
#[derive(Debug, Clone, Copy)]
pub enum Mode {
    Nftables,
    Iptables,
}

impl Mode {
    fn flag(self) -> &'static str {
        match self {
            Mode::Nftables => "nftables",
            Mode::Iptables => "iptables",
        }
    }

    /// The proxy's rules, as text.
    fn rules(self) -> String {
        let (cmd, args): (&str, &[&str]) = match self {
            // The main table and its shards (the others' tables hold none of what is
            // looked for).
            Mode::Nftables => ("nft", &["list", "ruleset"]),
            Mode::Iptables => ("iptables-save", &[]),
        };
        String::from_utf8(Command::new(cmd).args(args).output().unwrap().stdout).unwrap()
    }

    /// How the rules name a service address and TCP port.
    fn key(self, ip: &str, port: u16) -> String {
        match self {
            Mode::Nftables => format!("{ip} . tcp . {port}"),
            Mode::Iptables => format!("-d {ip}/32 -p tcp -m tcp --dport {port}"),
        }
    }

    /// Text every ruleset of the mode has.
    fn skeleton(self) -> &'static str {
        match self {
            Mode::Nftables => "service-ips",
            Mode::Iptables => "CAIRN-SERVICES",
        }
    }
}

/// Rules another program put in the node's namespace (the proxy must leave them alone).
fn others_rules(node: &NetNs) {
    sh(node, "iptables -t nat -N OTHER && iptables -t nat -A PREROUTING -j OTHER && iptables -t nat -A OTHER -p tcp --dport 9999 -j RETURN && iptables -A INPUT -p tcp --dport 9998 -j ACCEPT");
    sh(node, "nft add table inet other && nft add chain inet other input '{ type filter hook input priority 10; }' && nft add rule inet other input tcp dport 9997 accept");
}

/// cairn-control in the current network namespace, and a kubeconfig for it.
pub fn start_control(dir: &std::path::Path) -> (Kill, PathBuf) {
    let log = std::fs::File::create(dir.join("control.log")).unwrap();
    let control = Kill(
        Command::new(bin("cairn-control"))
            .args(["serve", "--data-dir"])
            .arg(dir)
            .args([
                "--bind",
                "127.0.0.1:0",
                "--controllers=servicelb",
                "--scheduler=false",
            ])
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    wait("cairn-control", || {
        dir.join("server-url").exists().then_some(())
    });
    let kc = dir.join("kubeconfig");
    let out = Command::new(bin("cairn-control"))
        .args(["kubeconfig", "--data-dir"])
        .arg(dir)
        .output()
        .unwrap();
    std::fs::write(&kc, out.stdout).unwrap();
    (control, kc)
}

/// The whole scenario in one proxy mode.
pub fn scenario(mode: Mode) {
    let (node, pod_a, pod_b, client) = network();
    serve(&pod_a, "pod-a");
    serve(&pod_b, "pod-b");
    others_rules(&node);
    enter(&node);
    let dir = tempfile::tempdir().unwrap();
    let (_control, kc) = start_control(dir.path());

    let (vip, empty_vip) = create_services(&kc);
    let before = nft_ruleset();

    let proxy_log = dir.path().join("proxy.log");
    // Type=notify: READY=1 comes once the first rules are programmed (the VIP answers).
    let to_web = format!("{vip}:80");
    let ready = cairn_testsupport::ReadyWatch::start(&dir.path().join("proxy.notify"), move || {
        fetch(&to_web)
            .map(|_| ())
            .map_err(|e| format!("{to_web}: {e}"))
    });
    let proxy = start_proxy(
        &kc,
        mode,
        &proxy_log,
        Some(&dir.path().join("proxy.notify")),
    );
    let (message, served) = ready.wait();
    assert!(message.lines().any(|l| l == "READY=1"), "{message:?}");
    assert_eq!(
        served,
        Ok(()),
        "cairn-proxy said READY=1 before its rules worked"
    );
    // WatchdogSec=0.4s: pinged at half of it while it runs.
    ready.wait_for("WATCHDOG=1", 10);
    let to_vip = cluster_ip_spreads_and_node_port_masquerades(&client, &vip);
    empty_service_refuses_at_once(&empty_vip);
    not_ready_endpoint_leaves_rotation_and_metrics_show(&kc, to_vip);
    load_balancer_and_affinity(&kc, &client, mode);
    killed_proxy_leaves_rules_and_a_new_one_converges(
        proxy, &kc, mode, &proxy_log, to_vip, &empty_vip,
    );
    cleanup_restores_the_ruleset(mode, &before);
}

/// The services of the scenario; their cluster IPs (web's, then empty's).
fn create_services(kc: &PathBuf) -> (String, String) {
    let web = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"type": "NodePort", "ports": [{"name": "http", "port": 80, "targetPort": 8080, "nodePort": 30080}]}});
    kubectl(kc, &["apply", "-f", "-"], Some(web.to_string()));
    kubectl(kc, &["apply", "-f", "-"], Some(slice(true)));
    kubectl(
        kc,
        &["create", "service", "clusterip", "empty", "--tcp=80"],
        None,
    );
    let vip = kubectl(
        kc,
        &["get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}"],
        None,
    );
    let empty_vip = kubectl(
        kc,
        &["get", "svc", "empty", "-o", "jsonpath={.spec.clusterIP}"],
        None,
    );
    (vip, empty_vip)
}

fn nft_ruleset() -> String {
    String::from_utf8(
        Command::new("nft")
            .args(["list", "ruleset"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
}

/// cairn-proxy in `mode`, logging to `proxy_log`; killed when dropped.
/// `notify`: a `NOTIFY_SOCKET` for it (`Type=notify`, `WatchdogSec=0.4s`).
fn start_proxy(kc: &PathBuf, mode: Mode, proxy_log: &Path, notify: Option<&Path>) -> Kill {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(proxy_log)
        .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cairn-proxy"));
    if let Some(socket) = notify {
        // As a unit with WatchdogSec=0.4s would start it.
        cmd.env("NOTIFY_SOCKET", socket)
            .env("WATCHDOG_USEC", "400000");
    }
    Kill(
        cmd.arg("--kubeconfig")
            .arg(kc)
            .args([
                "--mode",
                mode.flag(),
                "--hostname-override",
                "node-a",
                "--cluster-cidr",
                "10.244.0.0/16",
                "--min-sync-period",
                "0.1",
                // No periodic full sync during the test: on a slow machine one could
                // absorb the endpoint change the partial-sync metric is checked on.
                "--sync-period",
                "600",
                "--healthz-bind-address",
                "127.0.0.1:10256",
                "--nodeport-addresses",
                "198.18.0.0/24",
                // The Ingress data plane has tests of its own; here it would take the
                // test host's ports 80 and 443.
                "--ingress=false",
            ])
            .stderr(log)
            .spawn()
            .unwrap(),
    )
}

fn cluster_ip_spreads_and_node_port_masquerades(client: &NetNs, vip: &str) -> &'static str {
    let to_vip: &'static str = Box::leak(format!("{vip}:80").into_boxed_str());
    wait("the cluster IP answering", || fetch(to_vip).ok());
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..40 {
        seen.insert(fetch(to_vip).unwrap());
    }
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        ["pod-a", "pod-b"],
        "spread over both endpoints"
    );
    let outside = fetch_from(client, "198.18.0.10:30080").unwrap();
    let masqueraded = ["pod-a 10.244.1.1", "pod-b 10.244.2.1"];
    assert!(masqueraded.contains(&outside.as_str()), "{outside}");
    // --nodeport-addresses: not on the node's other addresses.
    let elsewhere = fetch("10.244.1.1:30080").unwrap_err();
    assert_eq!(
        elsewhere.kind(),
        std::io::ErrorKind::ConnectionRefused,
        "{elsewhere}"
    );
    to_vip
}

fn empty_service_refuses_at_once(empty_vip: &str) {
    let t = Instant::now();
    let refused = fetch(&format!("{empty_vip}:80")).unwrap_err();
    assert_eq!(
        refused.kind(),
        std::io::ErrorKind::ConnectionRefused,
        "{refused}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "refused at once, not a timeout"
    );
}

fn not_ready_endpoint_leaves_rotation_and_metrics_show(kc: &PathBuf, to_vip: &str) {
    kubectl(kc, &["apply", "-f", "-"], Some(slice(false)));
    wait("pod-b out of rotation", || {
        (0..20)
            .all(|_| fetch(to_vip).ok().as_deref() == Some("pod-a"))
            .then_some(())
    });
    let health = fetch_http("127.0.0.1:10256", "/healthz");
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    let metrics = fetch_http("127.0.0.1:10249", "/metrics");
    let partial_syncs = metrics
        .lines()
        .find_map(|l| l.strip_prefix("cairn_proxy_partial_syncs_total "))
        .and_then(|v| v.trim().parse::<f64>().ok());
    assert!(partial_syncs.is_some_and(|n| n >= 1.0), "{metrics}");
    for name in [
        "kubeproxy_sync_proxy_rules_duration_seconds_bucket",
        "kubeproxy_sync_proxy_rules_last_timestamp_seconds",
        "kubeproxy_sync_proxy_rules_endpoint_changes_total",
    ] {
        assert!(metrics.contains(name), "{name} in {metrics}");
    }
}

fn killed_proxy_leaves_rules_and_a_new_one_converges(
    mut proxy: Kill,
    kc: &PathBuf,
    mode: Mode,
    proxy_log: &Path,
    to_vip: &str,
    empty_vip: &str,
) {
    // A killed proxy leaves its rules: traffic keeps flowing; a new one converges.
    drop(proxy);
    assert_eq!(fetch(to_vip).unwrap(), "pod-a");
    kubectl(kc, &["delete", "svc", "empty"], None);
    proxy = start_proxy(kc, mode, proxy_log, None);
    let empty_key = mode.key(empty_vip, 80);
    wait("the deleted service's rule gone", || {
        let rules = mode.rules();
        (!rules.contains(&empty_key) && rules.contains(mode.skeleton())).then_some(())
    });
    drop(proxy);
    let log = std::fs::read_to_string(proxy_log).unwrap();
    assert!(
        !log.contains("partial sync failed"),
        "every change applied as a partial sync:\n{log}"
    );
}

fn cleanup_restores_the_ruleset(mode: Mode, before: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_cairn-proxy"))
        .args(["--cleanup", "--mode", mode.flag()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = nft_ruleset();
    assert_eq!(before, after);
}

/// A LoadBalancer with `externalTrafficPolicy: Local` gets the node's address from the
/// built-in service LB, keeps the client's address, and its health-check node port
/// answers; ClientIP affinity pins a client to one endpoint.
fn load_balancer_and_affinity(kc: &PathBuf, client: &NetNs, mode: Mode) {
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"},
        "status": {"addresses": [{"type": "InternalIP", "address": "198.18.0.10"}],
            "conditions": [{"type": "Ready", "status": "True"}]}});
    kubectl(kc, &["apply", "-f", "-"], Some(node.to_string()));
    let lb = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "lb", "namespace": "default"},
        "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local",
            "ports": [{"name": "http", "port": 8081, "targetPort": 8080}]}});
    kubectl(kc, &["apply", "-f", "-"], Some(lb.to_string()));
    let sticky = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "sticky", "namespace": "default"},
        "spec": {"sessionAffinity": "ClientIP", "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 3}},
            "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}});
    kubectl(kc, &["apply", "-f", "-"], Some(sticky.to_string()));
    for svc in ["lb", "sticky"] {
        let slice = slice(true)
            .replace("\"web\"", &format!("\"{svc}\""))
            .replace("web-1", &format!("{svc}-1"));
        kubectl(kc, &["apply", "-f", "-"], Some(slice));
    }
    wait("the LoadBalancer ingress", || {
        let ip = kubectl(
            kc,
            &[
                "get",
                "svc",
                "lb",
                "-o",
                "jsonpath={.status.loadBalancer.ingress[0].ip}",
            ],
            None,
        );
        (ip == "198.18.0.10").then_some(())
    });
    let reply = wait("the LoadBalancer address answering", || {
        fetch_from(client, "198.18.0.10:8081").ok()
    });
    assert!(
        reply.ends_with(" 198.18.0.20"),
        "client address kept: {reply}"
    );
    let hc = kubectl(
        kc,
        &[
            "get",
            "svc",
            "lb",
            "-o",
            "jsonpath={.spec.healthCheckNodePort}",
        ],
        None,
    );
    let hc: &'static str = Box::leak(format!("127.0.0.1:{hc}").into_boxed_str());
    let answer = wait("the health-check node port", || {
        std::panic::catch_unwind(|| fetch_http(hc, "/")).ok()
    });
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.contains(r#""localEndpoints":2"#),
        "{answer}"
    );

    let vip = kubectl(
        kc,
        &["get", "svc", "sticky", "-o", "jsonpath={.spec.clusterIP}"],
        None,
    );
    let to: &'static str = Box::leak(format!("{vip}:80").into_boxed_str());
    let first = wait("the sticky service answering", || fetch(to).ok());
    for _ in 0..20 {
        assert_eq!(
            fetch(to).unwrap(),
            first,
            "ClientIP affinity pins the client"
        );
    }
    if let Mode::Nftables = mode {
        // The client is remembered for timeoutSeconds (3 s) after its last connection.
        let remembered = |rules: &str| {
            rules.split("set affinity-").skip(1).any(|set| {
                set.split('}')
                    .next()
                    .unwrap_or_default()
                    .contains("elements")
            })
        };
        assert!(remembered(&mode.rules()), "{}", mode.rules());
        wait("the affinity to expire", || {
            (!remembered(&mode.rules())).then_some(())
        });
    }
}

fn fetch_http(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}
