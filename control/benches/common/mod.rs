//! What the benchmarks share: environment knobs, percentiles, starting the server (and a
//! client with its admin credentials) and timing one create.

use std::path::{Path, PathBuf};

use cairn_testsupport::api_client::Credentials;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// Starts `cairn-control` (`CAIRN_CONTROL_BIN` if set, for A/B runs, else `bin`) on a
/// private data dir and loopback port; returns the process, the URL it serves and a client
/// builder for it: HTTPS as the admin of its kubeconfig, or plain for an older binary's
/// `http://` URL.
// The caller owns the child and kills and waits for it when the benchmark ends.
#[allow(clippy::zombie_processes, dead_code)] // api_load passes arguments of its own
pub async fn start_server(bin: &str, data_dir: &Path) -> (Child, String, reqwest::ClientBuilder) {
    start_server_with(bin, data_dir, &[]).await
}

/// [`start_server`], passing `ours_only` to this workspace's binary but not to a
/// `CAIRN_CONTROL_BIN` (an older binary may not know them).
#[allow(clippy::zombie_processes)]
pub async fn start_server_with(
    bin: &str,
    data_dir: &Path,
    ours_only: &[String],
) -> (Child, String, reqwest::ClientBuilder) {
    let peer = std::env::var_os("CAIRN_CONTROL_BIN");
    let extra = if peer.is_some() { &[][..] } else { ours_only };
    let bin = peer.map_or_else(|| PathBuf::from(bin), PathBuf::from);
    let server = Command::new(&bin)
        .args(["serve", "--bind", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir)
        .args(extra)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn cairn-control");
    let url_file = data_dir.join("server-url");
    let url = loop {
        if let Ok(u) = std::fs::read_to_string(&url_file) {
            break u.trim().to_string();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let http = credentials(&bin, data_dir, &url)
        .reqwest_builder()
        .expect("client");
    (server, url, http)
}

/// The admin kubeconfig `bin kubeconfig` prints (empty when it fails).
pub fn admin_kubeconfig(bin: impl AsRef<Path>, data_dir: &Path) -> String {
    let out = Command::new(bin.as_ref())
        .args(["kubeconfig", "--data-dir"])
        .arg(data_dir)
        .output()
        .expect("run cairn-control kubeconfig");
    if out.status.success() {
        String::from_utf8(out.stdout).expect("kubeconfig is UTF-8")
    } else {
        String::new()
    }
}

/// The admin credentials `bin kubeconfig` prints; none for a plain-HTTP server whose
/// binary has no such subcommand.
pub fn credentials(bin: &Path, data_dir: &Path, url: &str) -> Credentials {
    let text = admin_kubeconfig(bin, data_dir);
    if text.is_empty() && url.starts_with("http://") {
        return Credentials {
            server: url.to_string(),
            ca_pem: String::new(),
            client_cert_pem: None,
            client_key_pem: None,
            token: None,
        };
    }
    Credentials::from_kubeconfig_text(&text).expect("admin kubeconfig")
}

/// POSTs `body` to `url`, expects 201 Created, and returns how long it took.
#[allow(dead_code)] // not every benchmark creates objects one by one
pub async fn timed_create(http: &reqwest::Client, url: &str, body: &serde_json::Value) -> Duration {
    let body = serde_json::to_vec(body).expect("encode");
    let t = Instant::now();
    let resp = http
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("create");
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    assert_eq!(status.as_u16(), 201, "{url}: {text}");
    t.elapsed()
}
