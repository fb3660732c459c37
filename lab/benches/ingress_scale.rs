//! Issue 33's scale measurement, on a 2-node lab of this build's release binaries
//! (`cargo build --release --bins` first): 1,000 Ingresses, then the time from an
//! Ingress write to its route in force on every node, and the proxies' memory.
//!
//! The 1,000 Ingresses (one host each, 50 backend Services without endpoints) are written
//! with curl, 8 at a time. Then, `INGRESS_SCALE_CHANGES` times (default 40), a new
//! Ingress for a new host: a poller on the switch (outside the nodes) asks both nodes for
//! that host back to back on keep-alive connections and reports when neither answers 404
//! any more (the route is in: a 503, its Service has no endpoints); measured from just
//! before the write. Memory: each cairn-proxy's RSS before the objects and after.
//!
//! `INGRESS_SCALE_LAB_ARGS` adds `cairn-lab up` flags (space-separated), e.g.
//! `--proxy-arg=--network-policy=false` for a node whose proxy serves only Services and
//! Ingress.
//!
//! `cargo bench -p cairn-lab --bench ingress_scale`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

#[path = "../tests/common/mod.rs"]
mod common;

#[path = "support/api.rs"]
mod api;

use api::Api;
use common::Lab;
use serde_json::{json, Value};

const NODES: [&str; 2] = ["node-1", "node-2"];

/// Asks every node (argv[3..]) for host argv[2] until none answers 404; prints "ready"
/// once it has asked each node once (all 404 when argv[1] is `new`), then "in" when the
/// route is everywhere.
const POLLER: &str = r#"
import http.client, sys
mode, host, nodes = sys.argv[1], sys.argv[2], sys.argv[3:]
conns = {n: http.client.HTTPConnection(n, 80, timeout=10) for n in nodes}
def status(n):
    c = conns[n]
    c.request("GET", "/", headers={"Host": host})
    r = c.getresponse()
    r.read()
    return r.status
pending = set(nodes)
for n in nodes:
    if status(n) != 404 and mode == "new":
        sys.exit(f"{host} already routed on {n}")
print("ready", flush=True)
while pending:
    for n in list(pending):
        if status(n) != 404:
            pending.discard(n)
print("in", flush=True)
"#;

fn ingress_body(host: &str, service: &str) -> Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": host.replace('.', "-")},
        "spec": {"rules": [{"host": host, "http": {"paths": [{"path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": service, "port": {"number": 80}}}}]}}]}})
}

fn populate(api: &Api) {
    let services = (0..50).map(|s| {
        let body = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": format!("web-{s}")},
            "spec": {"ports": [{"port": 80}]}});
        ("/api/v1/namespaces/default/services".to_string(), body, true)
    });
    api.all(services.collect());
    let ingresses = (0..1000).map(|i| {
        let body = ingress_body(&format!("i{i}.scale.test"), &format!("web-{}", i % 50));
        let path = "/apis/networking.k8s.io/v1/namespaces/default/ingresses".to_string();
        (path, body, true)
    });
    api.all(ingresses.collect());
}

/// The poller for `host`, once it has seen 404 from every node.
fn poller(
    lab: &Lab,
    mode: &str,
    host: &str,
    nodes: &[String],
) -> (Child, BufReader<std::process::ChildStdout>) {
    let mut args = vec!["python3", "-c", POLLER, mode, host];
    args.extend(nodes.iter().map(String::as_str));
    let mut child = lab
        .switch_command(&args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready", "the poller for {host}");
    (child, out)
}

fn proxy_pid(node: &str) -> String {
    let out = Command::new("pgrep")
        .args(["-f", &format!("cairn-proxy .*--hostname-override {node}")])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or_else(|| panic!("no proxy of {node}"))
        .to_string()
}

/// A proxy's resident memory in KiB: (all, anonymous). The rest is file-backed, mostly
/// the binary's code pages (shared, reclaimable page cache).
fn rss_kib(node: &str) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{}/status", proxy_pid(node))).unwrap();
    let field = |name: &str| -> u64 {
        let line = status.lines().find(|l| l.starts_with(name)).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    (field("VmRSS:"), field("RssAnon:"))
}

/// Where a proxy's anonymous memory is: its threads, and its largest anonymous mappings'
/// resident KiB with their sizes (the allocator's arenas are the large ones; thread stacks
/// are 2 MiB + a guard page, the main thread's `[stack]`).
fn anon_breakdown(node: &str) -> String {
    let pid = proxy_pid(node);
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let threads = status
        .lines()
        .find(|l| l.starts_with("Threads:"))
        .unwrap_or("");
    let mut maps: Vec<(u64, u64, String)> = Vec::new();
    let mut current: Option<(u64, String, bool)> = None;
    for line in smaps.lines() {
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or("");
        if let Some((start, end)) = first.split_once('-').filter(|_| !first.ends_with(':')) {
            let size =
                u64::from_str_radix(end, 16).unwrap() - u64::from_str_radix(start, 16).unwrap();
            let name = line.split_whitespace().nth(5).unwrap_or("").to_string();
            current = Some((
                size / 1024,
                name.clone(),
                name.is_empty() || name.starts_with('['),
            ));
        } else if first == "Rss:" {
            if let Some((size, name, true)) = current.take() {
                let rss: u64 = words.next().unwrap().parse().unwrap();
                maps.push((rss, size, name));
            }
        }
    }
    maps.sort_by_key(|m| std::cmp::Reverse(m.0));
    let small: u64 = maps.iter().filter(|m| m.1 <= 2052).map(|m| m.0).sum();
    let top: Vec<String> = maps
        .iter()
        .take(6)
        .map(|(rss, size, name)| format!("{rss} KiB of {size} KiB {name}"))
        .collect();
    format!(
        "{threads}; mappings up to 2 MiB (stacks) {small} KiB resident; largest: {}",
        top.join(", ")
    )
}

fn pct(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() as f64 - 1.0) * q).round() as usize]
}

fn main() {
    let changes: u32 = std::env::var("INGRESS_SCALE_CHANGES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    let extra = std::env::var("INGRESS_SCALE_LAB_ARGS").unwrap_or_default();
    let mut args = vec!["--nodes=2"];
    args.extend(extra.split_whitespace());
    println!("lab flags: {args:?}");
    let lab = Lab::up("ingscale", 16511, &args);
    let nodes: Vec<String> = NODES.iter().map(|n| lab.node_ip(n)).collect();
    let before: Vec<(u64, u64)> = NODES.iter().map(|n| rss_kib(n)).collect();
    let api = Api::new(&lab);
    let start = Instant::now();
    populate(&api);
    println!(
        "50 Services and 1,000 Ingresses written in {:.1?}",
        start.elapsed()
    );
    // The last one routed on both nodes: everything before it is in too.
    let (mut last, mut out) = poller(&lab, "wait", "i999.scale.test", &nodes);
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "in");
    last.wait().unwrap();
    let (mut total, mut write) = (Vec::new(), Vec::new());
    for i in 0..changes {
        let host = format!("new{i}.scale.test");
        let (mut child, mut out) = poller(&lab, "new", &host, &nodes);
        let t0 = Instant::now();
        api.create(
            "/apis/networking.k8s.io/v1/namespaces/default/ingresses",
            &ingress_body(&host, "web-0"),
        );
        write.push(t0.elapsed().as_secs_f64() * 1000.0);
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "in", "{host}");
        total.push(t0.elapsed().as_secs_f64() * 1000.0);
        child.wait().unwrap();
    }
    println!(
        "a new Ingress ({} runs, 1,000 in place): routed on every node p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms after the write began | the write itself p50 {:.0} ms, p99 {:.0} ms",
        total.len(),
        pct(&mut total, 0.5),
        pct(&mut total, 0.99),
        pct(&mut total, 1.0),
        pct(&mut write, 0.5),
        pct(&mut write, 0.99)
    );
    for (n, node) in NODES.iter().enumerate() {
        let (after, anon) = rss_kib(node);
        let mb = |kib: u64| kib as f64 / 1024.0;
        println!(
            "{node} cairn-proxy RSS: {:.1} MB before the objects, {:.1} MB with 1,000 Ingresses (+{:.1} MB); anonymous {:.1} MB -> {:.1} MB (the rest is code pages)",
            mb(before[n].0),
            mb(after),
            mb(after) - mb(before[n].0),
            mb(before[n].1),
            mb(anon)
        );
        println!(
            "{node} cairn-proxy anonymous memory: {}",
            anon_breakdown(node)
        );
    }
    drop(lab);
}
