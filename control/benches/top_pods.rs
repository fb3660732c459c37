//! `kubectl top pods -A` against cairn-control's built-in metrics API with 1,000 pods on
//! 100 simulated nodes (issue 29's goal: p99 ≤ 100 ms). Each node is a loopback address
//! (127.0.0.1..) where a small HTTPS server, with a serving certificate from the cluster
//! CA, answers `/metrics/resource` for its pods as an agent would; cairn-control scrapes
//! them every `RESOLUTION_SECS` (15, the default). Measured in the same run: the metrics API's list alone (HTTPS,
//! reqwest), `kubectl top pods -A`, and `kubectl get --raw /healthz` (kubectl's own start
//! and connection, the floor under any kubectl command). Not a test: it prints figures.
//!
//! Run: `cargo bench -p cairn-control --bench top_pods` (env: NODES, PODS_PER_NODE, ROUNDS).

// A benchmark driver: failing loudly on a broken setup is what we want here.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use std::net::{Ipv4Addr, SocketAddr};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use common::{env_usize, percentile, start_server_with};
use http_body_util::Full;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};

fn node_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, (i / 250) as u8, (i % 250 + 1) as u8)
}

/// `/metrics/resource` of node `i` with `pods` pods of one container each.
fn resource_text(i: usize, pods: usize, started: Instant) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let secs = started.elapsed().as_secs_f64();
    let mut t = String::new();
    t.push_str("# TYPE node_cpu_usage_seconds_total counter\n");
    t.push_str(&format!(
        "node_cpu_usage_seconds_total {} {now}\n",
        1000.0 + secs * 0.5
    ));
    t.push_str("# TYPE node_memory_working_set_bytes gauge\n");
    t.push_str(&format!("node_memory_working_set_bytes 1.5e+09 {now}\n"));
    let labels = |p: usize| format!("container=\"c\",namespace=\"default\",pod=\"n{i}-p{p}\"");
    t.push_str("# TYPE container_cpu_usage_seconds_total counter\n");
    for p in 0..pods {
        let cpu = 10.0 + secs * 0.01 * (p + 1) as f64;
        t.push_str(&format!(
            "container_cpu_usage_seconds_total{{{}}} {cpu} {now}\n",
            labels(p)
        ));
    }
    t.push_str("# TYPE container_memory_working_set_bytes gauge\n");
    for p in 0..pods {
        t.push_str(&format!(
            "container_memory_working_set_bytes{{{}}} {} {now}\n",
            labels(p),
            ((p + 1) * 4) << 20
        ));
    }
    t.push_str("# TYPE container_start_time_seconds gauge\n");
    for p in 0..pods {
        t.push_str(&format!(
            "container_start_time_seconds{{{}}} 1.7e+09 {now}\n",
            labels(p)
        ));
    }
    t
}

/// One simulated agent per node address, all on `port`.
async fn start_agents(ca_dir: &std::path::Path, nodes: usize, pods: usize, port: u16) {
    let read = |f: &str| std::fs::read_to_string(ca_dir.join(f)).expect("cluster CA");
    let ca = cairn_pki::Authority::load(&read("ca.crt"), &read("ca.key")).expect("load CA");
    let names: Vec<String> = (0..nodes).map(|i| node_ip(i).to_string()).collect();
    let issued = ca
        .issue_serving("bench-agents", &names, Duration::from_secs(3600))
        .expect("serving certificate");
    use rustls::pki_types::pem::PemObject;
    let chain = rustls::pki_types::CertificateDer::pem_slice_iter(issued.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .expect("certificate PEM");
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(issued.key_pem.as_bytes())
        .expect("key PEM");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("serving config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let started = Instant::now();
    for i in 0..nodes {
        let addr = SocketAddr::from((node_ip(i), port));
        let listener = tokio::net::TcpListener::bind(addr).await.expect("bind");
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |_req: Request<_>| async move {
                        let body = resource_text(i, pods, started);
                        Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from(
                            body,
                        ))))
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
    }
}

async fn post(http: &reqwest::Client, url: &str, body: &Value) {
    let r = http.post(url).json(body).send().await.expect("post");
    assert!(
        r.status().is_success(),
        "{url}: {}",
        r.text().await.unwrap_or_default()
    );
}

async fn create_nodes_and_pods(
    http: &reqwest::Client,
    url: &str,
    nodes: usize,
    pods: usize,
    port: u16,
) {
    for i in 0..nodes {
        let name = format!("sim-{i}");
        post(
            http,
            &format!("{url}/api/v1/nodes"),
            &json!({"metadata": {"name": name}}),
        )
        .await;
        let status = json!({"status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "addresses": [{"type": "InternalIP", "address": node_ip(i).to_string()}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": port}}}});
        let r = http
            .patch(format!("{url}/api/v1/nodes/{name}/status"))
            .header("Content-Type", "application/merge-patch+json")
            .body(status.to_string())
            .send()
            .await
            .expect("patch status");
        assert!(r.status().is_success());
        for p in 0..pods {
            let pod = json!({"metadata": {"name": format!("n{i}-p{p}"), "labels": {"app": "bench"}},
                "spec": {"nodeName": name, "containers": [{"name": "c", "image": "busybox"}]}});
            post(http, &format!("{url}/api/v1/namespaces/default/pods"), &pod).await;
        }
    }
}

fn stats(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    (ms(percentile(&v, 0.5)), ms(percentile(&v, 0.99)))
}

fn kubectl_times(kubeconfig: &std::path::Path, args: &[&str], rounds: usize) -> Vec<Duration> {
    (0..rounds)
        .map(|_| {
            let t = Instant::now();
            let out = Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(kubeconfig)
                .args(args)
                .output()
                .expect("kubectl");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            t.elapsed()
        })
        .collect()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let (nodes, pods, rounds, resolution) = (
        env_usize("NODES", 100),
        env_usize("PODS_PER_NODE", 10),
        env_usize("ROUNDS", 200),
        // metrics-server's and cairn's default: the scrape load kubectl top competes with.
        env_usize("RESOLUTION_SECS", 15),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let ours = [
        format!("--metric-resolution={resolution}s"),
        "--controllers=".to_string(),
    ];
    let (mut server, url, http) =
        start_server_with(env!("CARGO_BIN_EXE_cairn-control"), dir.path(), &ours).await;
    let http = http.build().expect("client");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    start_agents(&dir.path().join("pki"), nodes, pods, port).await;
    create_nodes_and_pods(&http, &url, nodes, pods, port).await;
    let list = format!("{url}/apis/metrics.k8s.io/v1beta1/pods");
    let total = nodes * pods;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let body: Value = http
            .get(&list)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap_or_default();
        if body["items"].as_array().map_or(0, Vec::len) == total {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the metrics API never listed {total} pods"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let mut api = Vec::new();
    for _ in 0..rounds * 2 {
        let t = Instant::now();
        let r = http.get(&list).send().await.unwrap();
        let _ = r.bytes().await.unwrap();
        api.push(t.elapsed());
    }
    let kubeconfig = dir.path().join("kubeconfig-bench");
    let text = common::admin_kubeconfig(env!("CARGO_BIN_EXE_cairn-control"), dir.path());
    std::fs::write(&kubeconfig, text).unwrap();
    let top = tokio::task::spawn_blocking({
        let k = kubeconfig.clone();
        move || kubectl_times(&k, &["top", "pods", "-A"], rounds)
    });
    let top = top.await.unwrap();
    let floor = tokio::task::spawn_blocking(move || {
        kubectl_times(&kubeconfig, &["get", "--raw", "/healthz"], rounds)
    });
    let floor = floor.await.unwrap();
    let (a50, a99) = stats(api);
    let (t50, t99) = stats(top);
    let (f50, f99) = stats(floor);
    println!("top_pods: {total} pods on {nodes} simulated nodes, {rounds} rounds, scraped every {resolution} s");
    println!("  metrics API list (reqwest):  p50 {a50:6.1} ms  p99 {a99:6.1} ms");
    println!("  kubectl top pods -A:         p50 {t50:6.1} ms  p99 {t99:6.1} ms   goal p99 <= 100 ms: {}", if t99 <= 100.0 { "ok" } else { "MISSED" });
    println!(
        "  kubectl get --raw /healthz:  p50 {f50:6.1} ms  p99 {f99:6.1} ms   (kubectl's own floor)"
    );
    println!(
        "  top / floor ratio:           p50 {:.2}  p99 {:.2}",
        t50 / f50,
        t99 / f99
    );
    let _ = server.kill();
    let _ = server.wait();
}
