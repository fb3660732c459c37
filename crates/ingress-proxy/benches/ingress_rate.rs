//! Requests/s and latency through cairn's Ingress data plane against Debian's nginx as
//! the same reverse proxy, to the same two backends, in the same run (issue 33's
//! benchmark). Everything on loopback.
//!
//! - Backends: one nginx process (one worker) serving two ports, `return 200`.
//! - Peer: nginx (2 workers, one per core here) with an upstream of both backends,
//!   `keepalive 64`, HTTP/1.1 to them and the headers an ingress sets (Host,
//!   X-Forwarded-For/Proto/Host), HTTP and HTTPS listeners.
//! - cairn: the data plane in this process on 2 workers (`Workers`), one Ingress routing
//!   `foo.com` to a Service whose EndpointSlice holds both backends; the same certificate.
//! - Load: wrk (1 thread, 32 connections) with `Host: foo.com`; keep-alive, and a new
//!   connection per request (`Connection: close`); HTTP and HTTPS. The two proxies take
//!   turns within each round, the first one alternating by round.
//!
//! `CAIRN_BENCH_ROUNDS` (default 3) and `CAIRN_BENCH_SECONDS` (default 3) per row;
//! `CAIRN_BENCH_ONLY`: only the rows whose name contains it (e.g. `HTTP new`).
//! The allocator is set up as cairn-proxy's (freed pages purged after mimalloc's delay by
//! a background thread, no transparent huge pages); `CAIRN_BENCH_PURGE_AT_ONCE` purges
//! them at once instead, for an A/B.
//! Run: `cargo bench -p cairn-ingress-proxy --bench ingress_rate`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::TcpListener as StdListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use cairn_ingress_proxy::{
    bind_listener, serve, server_config, ForwardConfig, Forwarder, Inputs, Listener, Routes,
    ServeConfig, Snapshot, SniResolver, Workers,
};
use serde_json::json;

fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Nginx(Child);

impl Drop for Nginx {
    /// SIGQUIT: the master stops its workers (a SIGKILL would leave them running).
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-QUIT", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }
}

/// nginx with `http` as its http block, in a prefix of its own under `dir`.
fn nginx(dir: &Path, name: &str, workers: u32, http: &str) -> Nginx {
    let prefix = dir.join(name);
    std::fs::create_dir_all(prefix.join("logs")).unwrap();
    let temp: String = ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"]
        .iter()
        .map(|t| format!("{t}_temp_path {}/{t};\n", prefix.display()))
        .collect();
    let conf = format!(
        "worker_processes {workers};\npid {p}/nginx.pid;\nerror_log {p}/logs/error.log warn;\n\
         events {{ worker_connections 4096; }}\n\
         http {{\n access_log off;\n {temp}\n{http}\n}}\n",
        p = prefix.display()
    );
    let path = prefix.join("nginx.conf");
    std::fs::write(&path, conf).unwrap();
    let child = Command::new("nginx")
        .arg("-p")
        .arg(&prefix)
        .arg("-c")
        .arg(&path)
        .args(["-g", "daemon off;"])
        .stderr(Stdio::inherit())
        .spawn()
        .expect("nginx (apt install nginx-light; scripts/install-deps.sh does)");
    Nginx(child)
}

fn wait_listening(port: u16) {
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("nothing listens on {port}");
}

/// The backends and the nginx peer; the ports of the peer's HTTP and HTTPS listeners.
fn start_nginx(dir: &Path, backends: [u16; 2], cert: &Path, key: &Path) -> (Vec<Nginx>, u16, u16) {
    let servers: String = backends
        .iter()
        .enumerate()
        .map(|(i, p)| {
            format!(
                "server {{ listen 127.0.0.1:{p}; keepalive_requests 100000; \
                 location / {{ return 200 \"backend-{i}\\n\"; }} }}\n"
            )
        })
        .collect();
    let backend = nginx(dir, "backends", 1, &servers);
    let (http, https) = (free_port(), free_port());
    let peer = format!(
        "upstream svc {{ server 127.0.0.1:{b0}; server 127.0.0.1:{b1}; keepalive 64; }}\n\
         server {{\n listen 127.0.0.1:{http};\n listen 127.0.0.1:{https} ssl http2;\n\
          server_name foo.com;\n ssl_certificate {cert};\n ssl_certificate_key {key};\n\
          ssl_protocols TLSv1.2 TLSv1.3;\n\
          keepalive_requests 100000;\n\
          location / {{\n  proxy_pass http://svc;\n  proxy_http_version 1.1;\n\
           proxy_set_header Connection \"\";\n  proxy_set_header Host $host;\n\
           proxy_set_header X-Forwarded-For $remote_addr;\n\
           proxy_set_header X-Forwarded-Proto $scheme;\n\
           proxy_set_header X-Forwarded-Host $host;\n }}\n}}\n",
        b0 = backends[0],
        b1 = backends[1],
        cert = cert.display(),
        key = key.display(),
    );
    let peer = nginx(dir, "peer", 2, &peer);
    for p in [backends[0], backends[1], http, https] {
        wait_listening(p);
    }
    (vec![backend, peer], http, https)
}

/// cairn's data plane on its own 2-worker runtime; its HTTP and HTTPS ports.
/// The same on one work-stealing runtime (`CAIRN_BENCH_STEALING`), for comparison.
fn stealing_runtime(routes: Arc<Routes>, tls: Arc<rustls::ServerConfig>, http: u16, https: u16) {
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(env_or("CAIRN_BENCH_WORKERS", 2) as usize)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let forwarder = Arc::new(Forwarder::new(routes, &ForwardConfig::default()));
            let mut tasks = Vec::new();
            for (port, tls) in [
                (http, None),
                (https, Some(tokio_rustls::TlsAcceptor::from(tls))),
            ] {
                let socket = tokio::net::TcpListener::bind(("127.0.0.1", port))
                    .await
                    .unwrap();
                let listener = Listener {
                    socket,
                    tls,
                    ingress: true,
                };
                let never = std::future::pending();
                tasks.push(tokio::spawn(serve(
                    listener,
                    forwarder.clone(),
                    ServeConfig::default(),
                    never,
                )));
            }
            for t in tasks {
                let _ = t.await;
            }
        });
    });
}

fn start_cairn(backends: [u16; 2], cert_pem: &str, key_pem: &str) -> (u16, u16) {
    let ingress: k8s_openapi::api::networking::v1::Ingress = serde_json::from_value(json!({
        "metadata": {"namespace": "default", "name": "bench"},
        "spec": {"rules": [{"host": "foo.com", "http": {"paths": [{"path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": "svc", "port": {"number": 80}}}}]}}]}
    }))
    .unwrap();
    let service = serde_json::from_value(json!({
        "metadata": {"namespace": "default", "name": "svc"},
        "spec": {"ports": [{"port": 80}]}
    }))
    .unwrap();
    let slices: Vec<k8s_openapi::api::discovery::v1::EndpointSlice> = backends
        .iter()
        .map(|p| {
            serde_json::from_value(json!({
                "metadata": {"namespace": "default", "name": format!("svc-{p}"),
                             "labels": {"kubernetes.io/service-name": "svc"}},
                "addressType": "IPv4",
                "endpoints": [{"addresses": ["127.0.0.1"]}],
                "ports": [{"port": p, "protocol": "TCP"}]
            }))
            .unwrap()
        })
        .collect();
    let routes = Arc::new(Routes::default());
    let (snapshot, problems) = Snapshot::build(Inputs {
        ingresses: vec![&ingress],
        services: vec![&service],
        slices: slices.iter().collect(),
        secrets: vec![],
        gateways: vec![],
    });
    assert!(problems.is_empty(), "{problems:?}");
    routes.replace(snapshot);
    // The bench's certificate as the default: wrk sends no usable SNI for 127.0.0.1.
    let key = Arc::new(cairn_pki::tls::certified_key(cert_pem, key_pem).unwrap());
    let tls = server_config(Arc::new(SniResolver::new(routes.clone(), key, 0, true))).unwrap();
    let (http, https) = (free_port(), free_port());
    if std::env::var_os("CAIRN_BENCH_STEALING").is_some() {
        stealing_runtime(routes, tls, http, https);
    } else {
        let workers = env_or("CAIRN_BENCH_WORKERS", 2) as usize;
        let workers = Workers::start(workers, &routes, &ForwardConfig::default()).unwrap();
        let (stop, stopping) = tokio::sync::watch::channel(false);
        for (port, tls) in [
            (http, None),
            (https, Some(tokio_rustls::TlsAcceptor::from(tls))),
        ] {
            // As cairn-proxy binds: a socket per worker (`SO_REUSEPORT`).
            let address = std::net::SocketAddr::from(([127, 0, 0, 1], port));
            let socket = bind_listener(address).unwrap();
            let served = workers.serve(socket, tls, true, &ServeConfig::default(), &stopping);
            std::mem::forget(served.unwrap());
        }
        // Served until the process exits.
        std::mem::forget((workers, stop));
    }
    wait_listening(http);
    wait_listening(https);
    (http, https)
}

#[derive(Debug, Clone, Copy, Default)]
struct Run {
    rps: f64,
    requests: f64,
    /// CPU time the proxy's processes used in the run (user + system), in seconds.
    cpu_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    errors: u64,
}

fn millis(text: &str) -> f64 {
    let (number, unit) = text.split_at(
        text.find(|c: char| c.is_ascii_alphabetic())
            .unwrap_or(text.len()),
    );
    let n: f64 = number.parse().unwrap_or(f64::NAN);
    match unit {
        "us" => n / 1000.0,
        "ms" => n,
        "s" => n * 1000.0,
        _ => f64::NAN,
    }
}

fn wrk(url: &str, seconds: u64, close: bool) -> Run {
    let mut cmd = Command::new("wrk");
    cmd.args([
        "-t1",
        "-c32",
        &format!("-d{seconds}s"),
        "--latency",
        "-H",
        "Host: foo.com",
    ]);
    if close {
        cmd.args(["-H", "Connection: close"]);
    }
    let out = cmd.arg(url).output().expect("wrk (apt install wrk)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut run = Run::default();
    for line in text.lines().map(str::trim) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["50%", v] => run.p50_ms = millis(v),
            ["99%", v] => run.p99_ms = millis(v),
            ["Requests/sec:", v] => run.rps = v.parse().unwrap_or(0.0),
            [n, "requests", "in", ..] => run.requests = n.parse().unwrap_or(0.0),
            ["Non-2xx", "or", "3xx", "responses:", n] => {
                run.errors += n.parse::<u64>().unwrap_or(0)
            }
            _ if line.starts_with("Socket errors:") => {
                run.errors += line
                    .split(|c: char| !c.is_ascii_digit())
                    .filter_map(|n| n.parse::<u64>().ok())
                    .sum::<u64>();
            }
            _ => {}
        }
    }
    run
}

/// User + system CPU seconds of these processes (every thread), from /proc.
fn cpu_seconds(pids: &[u32]) -> f64 {
    let ticks: u64 = pids
        .iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
        .map(|stat| {
            // After the command's closing parenthesis: field 3 onwards; utime, stime are 14, 15.
            let rest = &stat[stat.rfind(')').map_or(0, |i| i + 2)..];
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
            field(14).unwrap_or(0) + field(15).unwrap_or(0)
        })
        .sum();
    ticks as f64 / 100.0
}

/// An nginx master's worker processes.
fn workers_of(master: u32) -> Vec<u32> {
    let children = std::fs::read_to_string(format!("/proc/{master}/task/{master}/children"));
    children
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// wrk through one proxy, with the CPU its processes (`pids`) used meanwhile.
fn measured(url: &str, seconds: u64, close: bool, pids: &[u32]) -> Run {
    let before = cpu_seconds(pids);
    let mut run = wrk(url, seconds, close);
    run.cpu_s = cpu_seconds(pids) - before;
    run
}

cairn_alloc::small_pages_from_start!();

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    // The allocator setup of cairn-proxy, which runs the data plane.
    if std::env::var_os("CAIRN_BENCH_PURGE_AT_ONCE").is_some() {
        cairn_alloc::purge_freed_pages_at_once();
    } else {
        cairn_alloc::purge_freed_pages_in_background(Duration::from_secs(1)).unwrap();
    }
    let rounds = env_or("CAIRN_BENCH_ROUNDS", 3);
    let seconds = env_or("CAIRN_BENCH_SECONDS", 3);
    let dir = tempfile::tempdir().unwrap();
    let year = Duration::from_secs(365 * 86400);
    let ca = cairn_pki::Authority::generate("bench-ca", year).unwrap();
    let leaf = ca
        .issue_serving("foo.com", &["foo.com".into()], year)
        .unwrap();
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert, &leaf.cert_pem).unwrap();
    std::fs::write(&key, &leaf.key_pem).unwrap();
    let backends = [free_port(), free_port()];
    let (_nginx, nginx_http, nginx_https) = start_nginx(dir.path(), backends, &cert, &key);
    let (cairn_http, cairn_https) = start_cairn(backends, &leaf.cert_pem, &leaf.key_pem);
    let cairn_pids = vec![std::process::id()];
    let nginx_pids = workers_of(_nginx[1].0.id());
    assert!(
        !nginx_pids.is_empty(),
        "the nginx peer's workers are not found"
    );
    let cases = [
        ("HTTP keep-alive", "http", false),
        ("HTTP new connection", "http", true),
        ("HTTPS keep-alive", "https", false),
        ("HTTPS new connection", "https", true),
    ];
    println!(
        "ingress_rate: {rounds} rounds x {seconds} s per row, wrk -t1 -c32, 2 cores shared by all"
    );
    println!(
        "{:<22} {:>11} {:>6} {:>6} {:>6} | {:>11} {:>6} {:>6} {:>6} | {:>6} {:>6} {:>6}",
        "case",
        "cairn req/s",
        "p50ms",
        "p99ms",
        "cpu us",
        "nginx req/s",
        "p50ms",
        "p99ms",
        "cpu us",
        "rps x",
        "p99 x",
        "cpu x"
    );
    println!("(cpu us: the proxy's own user + system CPU time per request)");
    let only = std::env::var("CAIRN_BENCH_ONLY").unwrap_or_default();
    for (name, scheme, close) in cases {
        if !name.contains(only.as_str()) {
            continue;
        }
        let port = |cairn: bool| match (scheme, cairn) {
            ("http", true) => cairn_http,
            ("http", false) => nginx_http,
            (_, true) => cairn_https,
            (_, false) => nginx_https,
        };
        // Warm both (pools, sessions) before measuring.
        for cairn in [true, false] {
            wrk(&format!("{scheme}://127.0.0.1:{}/", port(cairn)), 1, close);
        }
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            let order = if round % 2 == 0 {
                [true, false]
            } else {
                [false, true]
            };
            for cairn in order {
                let pids = if cairn { &cairn_pids } else { &nginx_pids };
                let url = format!("{scheme}://127.0.0.1:{}/", port(cairn));
                let run = measured(&url, seconds, close, pids);
                assert_eq!(
                    run.errors,
                    0,
                    "{name}: errors through {}",
                    if cairn { "cairn" } else { "nginx" }
                );
                if cairn {
                    ours.push(run)
                } else {
                    theirs.push(run)
                }
            }
        }
        let m = |runs: &[Run], f: fn(&Run) -> f64| median(runs.iter().map(f).collect());
        let (rps, p50, p99, cpu) = (
            m(&ours, |r| r.rps),
            m(&ours, |r| r.p50_ms),
            m(&ours, |r| r.p99_ms),
            m(&ours, |r| r.cpu_s * 1e6 / r.requests.max(1.0)),
        );
        let (nrps, np50, np99, ncpu) = (
            m(&theirs, |r| r.rps),
            m(&theirs, |r| r.p50_ms),
            m(&theirs, |r| r.p99_ms),
            m(&theirs, |r| r.cpu_s * 1e6 / r.requests.max(1.0)),
        );
        println!(
            "{name:<22} {rps:>11.0} {p50:>6.2} {p99:>6.2} {cpu:>6.1} | {nrps:>11.0} {np50:>6.2} {np99:>6.2} {ncpu:>6.1} | {:>5.2}x {:>5.2}x {:>5.2}x",
            rps / nrps,
            p99 / np99,
            cpu / ncpu
        );
    }
}
