//! Test harness: runs the real `cairn-control` binary on a private data dir and port,
//! and the real kubectl against it. Processes are killed by PID when dropped.

// Test code: a failed setup step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

pub mod sim;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_cairn-control");

pub struct Server {
    pub child: Child,
    pub url: String,
    pub data_dir: PathBuf,
    pub kubeconfig: PathBuf,
}

impl Server {
    pub fn start(data_dir: &Path) -> Server {
        Self::start_with(data_dir, &[])
    }

    pub fn start_with(data_dir: &Path, extra: &[&str]) -> Server {
        std::fs::create_dir_all(data_dir).unwrap();
        let url_file = data_dir.join("server-url");
        let _ = std::fs::remove_file(&url_file);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(data_dir.join("control.log"))
            .unwrap();
        let child = Command::new(BIN)
            .args(["serve", "--data-dir"])
            .arg(data_dir)
            .args(["--bind", "127.0.0.1:0"])
            .args(shared_etcd(data_dir, extra))
            .args(extra)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn cairn-control");
        let deadline = Instant::now() + Duration::from_secs(60);
        let url = loop {
            if let Ok(u) = std::fs::read_to_string(&url_file) {
                break u.trim().to_string();
            }
            assert!(
                Instant::now() < deadline,
                "cairn-control did not start; log:\n{}",
                std::fs::read_to_string(data_dir.join("control.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let kubeconfig = data_dir.join("kubeconfig");
        let out = Command::new(BIN)
            .args(["kubeconfig", "--data-dir"])
            .arg(data_dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "kubeconfig: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::write(&kubeconfig, &out.stdout).unwrap();
        Server {
            child,
            url,
            data_dir: data_dir.to_path_buf(),
            kubeconfig,
        }
    }

    /// An HTTPS client as the admin of the kubeconfig above.
    pub fn http(&self) -> reqwest::Client {
        self.http_builder().build().unwrap()
    }

    pub fn http_builder(&self) -> reqwest::ClientBuilder {
        cairn_testsupport::api_client::Credentials::from_kubeconfig(&self.kubeconfig)
            .unwrap()
            .reqwest_builder()
            .unwrap()
    }

    /// SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.data_dir.join("control.log")).unwrap_or_default()
    }

    /// GET `path` (from the API's root) as the admin, as JSON.
    pub async fn get_json(&self, path: &str) -> serde_json::Value {
        let resp = self
            .http()
            .get(format!("{}{path}", self.url))
            .send()
            .await
            .unwrap();
        resp.json().await.unwrap()
    }
}

/// With `CAIRN_TEST_ETCD=URL`, every server a test starts without store flags of its
/// own serves from that etcd, under a prefix of its data dir's (the same across a
/// restart): the whole suite, or one binary, runs on etcd instead of SQLite.
fn shared_etcd(data_dir: &Path, extra: &[&str]) -> Vec<String> {
    let Ok(url) = std::env::var("CAIRN_TEST_ETCD") else {
        return Vec::new();
    };
    if extra.contains(&"--store") {
        return Vec::new();
    }
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    std::hash::Hash::hash(&data_dir, &mut hasher);
    let prefix = format!("/cairn-test-{:016x}", std::hash::Hasher::finish(&hasher));
    [
        "--store",
        "etcd",
        "--etcd-servers",
        &url,
        "--etcd-prefix",
        &prefix,
    ]
    .map(String::from)
    .to_vec()
}

/// A private etcd on loopback (Debian's etcd-server), stopped when dropped.
pub async fn start_etcd() -> cairn_store_etcd::testing::EtcdServer {
    tokio::task::spawn_blocking(cairn_store_etcd::testing::EtcdServer::start)
        .await
        .unwrap()
        .unwrap()
}

/// Creates ConfigMap `default/name` (data `k: name`) as the admin; the created object.
pub async fn create_cm(server: &Server, name: &str) -> serde_json::Value {
    let resp = server
        .http()
        .post(format!("{}/api/v1/namespaces/default/configmaps", server.url))
        .json(&serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": name}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 201, "create {name}");
    resp.json().await.unwrap()
}

/// A replica's CA, keys and encryption configuration, copied for a second replica (its
/// leader election identity stays its own).
pub fn share_identity(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.join("pki")).unwrap();
    for entry in std::fs::read_dir(from.join("pki")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join("pki").join(entry.file_name())).unwrap();
    }
    let config = "encryption-config.yaml";
    std::fs::copy(from.join(config), to.join(config)).unwrap();
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Path of a specific kubectl minor version (the dispatcher's versioned binaries), or
/// `CAIRN_KUBECTL_1_<minor>` when set.
/// Polls `f` (every 100 ms) until it yields a value; fails the test after `secs`.
pub fn wait_for<T>(what: &str, secs: u64, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn kubectl_path(minor: u32) -> PathBuf {
    if let Ok(p) = std::env::var(format!("CAIRN_KUBECTL_1_{minor}")) {
        return PathBuf::from(p);
    }
    let p = PathBuf::from(format!("/usr/lib/google-cloud-sdk/bin/kubectl.1.{minor}"));
    assert!(
        p.exists(),
        "kubectl 1.{minor} not found at {} (set CAIRN_KUBECTL_1_{minor})",
        p.display()
    );
    p
}

pub struct Kubectl {
    pub bin: PathBuf,
    pub kubeconfig: PathBuf,
    pub home: PathBuf,
}

impl Kubectl {
    pub fn new(minor: u32, server: &Server) -> Kubectl {
        let home = server.data_dir.join(format!("home-{minor}"));
        std::fs::create_dir_all(&home).unwrap();
        Kubectl {
            bin: kubectl_path(minor),
            kubeconfig: server.kubeconfig.clone(),
            home,
        }
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", &self.home)
            .env_remove("KUBECTL_EXTERNAL_DIFF");
        c
    }

    /// `kubectl ARGS -o json`, parsed.
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&all)).unwrap()
    }

    pub fn output(&self, args: &[&str]) -> Output {
        self.command(args).stdin(Stdio::null()).output().unwrap()
    }

    /// Runs kubectl and returns stdout; fails the test on a non-zero exit.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.output(args);
        assert!(
            out.status.success(),
            "kubectl {} failed ({}):\nstdout: {}\nstderr: {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs kubectl with `stdin` as its standard input, whatever its exit.
    /// Runs a command that must fail; returns its stderr.
    pub fn fails_stdin(&self, args: &[&str], stdin: &str) -> String {
        let out = self.output_stdin(args, stdin);
        assert!(!out.status.success(), "kubectl {args:?} succeeded");
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    pub fn output_stdin(&self, args: &[&str], stdin: &str) -> Output {
        use std::io::Write;
        let mut child = self
            .command(args)
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
        child.wait_with_output().unwrap()
    }

    /// Runs kubectl with `stdin` as its standard input.
    pub fn ok_stdin(&self, args: &[&str], stdin: &str) -> String {
        let out = self.output_stdin(args, stdin);
        assert!(
            out.status.success(),
            "kubectl {} failed:\nstdout: {}\nstderr: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs kubectl expecting failure; returns stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        let out = self.output(args);
        assert!(
            !out.status.success(),
            "kubectl {} unexpectedly succeeded: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }
}

/// A child whose stdout is collected by a thread, for `kubectl get -w`.
pub struct Streaming {
    pub child: Child,
    pub output: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Streaming {
    pub fn spawn(mut cmd: Command) -> Streaming {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let output = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let sink = output.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Streaming { child, output }
    }

    /// Waits until the collected output satisfies `pred`.
    pub fn wait_for(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let text = self.output.lock().unwrap().clone();
            if pred(&text) {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; output so far:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Streaming {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A kubeconfig for `user`, in `group` if given (a file named after the user).
pub fn member_kubeconfig(
    server: &Server,
    dir: &Path,
    user: &str,
    group: Option<&str>,
) -> std::path::PathBuf {
    let mut cmd = Command::new(BIN);
    cmd.args(["kubeconfig", "--data-dir"])
        .arg(&server.data_dir)
        .args(["--user", user]);
    if let Some(g) = group {
        cmd.args(["--group", g]);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = dir.join(format!("{}.kubeconfig", user.replace(':', "_")));
    std::fs::write(&path, &out.stdout).unwrap();
    path
}
