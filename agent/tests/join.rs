//! Joining with a token: the CA pin is checked before anything is sent, a wrong token is
//! refused, a right one gets the node a `system:node:<name>` client certificate through
//! a CertificateSigningRequest the server approves and signs, and then one for its
//! proxy (`system:kube-proxy`); the agent renews both. (The lab's nodes join
//! this way, so every lab e2e test runs joined nodes; this test covers the refusals.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::bin;

struct Control {
    child: Child,
    data: PathBuf,
    url: String,
}

impl Drop for Control {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_until<T>(what: &str, secs: u64, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn start_control(dir: &Path) -> Control {
    let data = dir.join("control");
    std::fs::create_dir_all(&data).unwrap();
    let log = std::fs::File::create(dir.join("control.log")).unwrap();
    let child = Command::new(bin("cairn-control"))
        .args(["serve", "--data-dir"])
        .arg(&data)
        // Short certificates: the node's client certificate rotates during the test.
        .args([
            "--bind",
            "127.0.0.1:0",
            "--scheduler=false",
            "--cert-lifetime-seconds=12",
        ])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let url_file = data.join("server-url");
    let url = wait_until("cairn-control's URL", 30, || {
        std::fs::read_to_string(&url_file).ok()
    });
    Control {
        child,
        data,
        url: url.trim().to_string(),
    }
}

fn create_token(control: &Control) -> String {
    common::create_join_token(&control.data)
}

/// `cairn-agent` joining `control` as `node` with `token` (its containerd is absent:
/// after joining it waits for one, which the test does not need).
fn agent(dir: &Path, control: &Control, node: &str, token: &str) -> (Child, PathBuf) {
    let log = dir.join(format!("{node}.log"));
    let child = Command::new(bin("cairn-agent"))
        .args([
            "--server",
            &control.url,
            "--token",
            token,
            "--node-name",
            node,
        ])
        .arg("--root-dir")
        .arg(dir.join(node))
        .arg("--state-dir")
        .arg(dir.join(format!("{node}-run")))
        .arg("--containerd-socket")
        .arg(dir.join("no-containerd.sock"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    (child, log)
}

/// Runs an agent that must refuse to join; returns its log.
fn refused(dir: &Path, control: &Control, node: &str, token: &str) -> String {
    let (mut child, log) = agent(dir, control, node, token);
    let status = wait_until("the agent to give up", 30, || child.try_wait().unwrap());
    assert!(!status.success());
    assert!(!dir.join(node).join("kubeconfig").exists());
    std::fs::read_to_string(log).unwrap()
}

fn kubectl(kubeconfig: &Path, args: &[&str]) -> String {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn join_pins_the_ca_checks_the_token_issues_and_renews_a_node_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let control = start_control(dir.path());
    let token = create_token(&control);
    let (pin, bootstrap) = token.split_once("::").unwrap();
    assert!(pin.starts_with("K10") && pin.len() == 67, "{token}");

    let wrong_ca = format!("K10{}::{bootstrap}", "0".repeat(64));
    let log = refused(dir.path(), &control, "n-wrong-ca", &wrong_ca);
    assert!(log.contains("does not match the join token"), "{log}");
    assert!(
        !log.contains(bootstrap),
        "the token must not be logged: {log}"
    );

    let (id, _) = bootstrap.split_once('.').unwrap();
    let wrong_secret = format!("{pin}::{id}.0000000000000000");
    let log = refused(dir.path(), &control, "n-wrong-secret", &wrong_secret);
    assert!(log.contains("Unauthorized"), "{log}");

    let (mut child, log) = agent(dir.path(), &control, "n1", &token);
    let kubeconfig = dir.path().join("n1/kubeconfig");
    let first = wait_until("n1's kubeconfig", 60, || {
        std::fs::read_to_string(&kubeconfig).ok()
    });
    // Rotation: a third of the way before expiry the node renews with its own
    // credentials (a selfnodeclient request) and rewrites its kubeconfig.
    wait_until("n1's renewed certificate", 30, || {
        let now = std::fs::read_to_string(&kubeconfig).ok()?;
        (now != first).then_some(())
    });
    // The proxy's certificate: asked for with the node's credentials, renewed the same way.
    let proxy_kubeconfig = dir.path().join("n1/proxy.kubeconfig");
    let proxy_first = wait_until("n1's proxy kubeconfig", 60, || {
        std::fs::read_to_string(&proxy_kubeconfig).ok()
    });
    wait_until("n1's renewed proxy certificate", 30, || {
        let now = std::fs::read_to_string(&proxy_kubeconfig).ok()?;
        (now != proxy_first).then_some(())
    });
    let _ = child.kill();
    let _ = child.wait();
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&kubeconfig).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    let whoami = kubectl(&kubeconfig, &["auth", "whoami", "-o", "json"]);
    let me: serde_json::Value = serde_json::from_str(&whoami).unwrap();
    assert_eq!(
        me["status"]["userInfo"]["username"], "system:node:n1",
        "{whoami}"
    );
    let groups = me["status"]["userInfo"]["groups"].to_string();
    assert!(groups.contains("system:nodes"), "{groups}");
    let proxy: serde_json::Value = serde_json::from_str(&kubectl(
        &proxy_kubeconfig,
        &["auth", "whoami", "-o", "json"],
    ))
    .unwrap();
    assert_eq!(proxy["status"]["userInfo"]["username"], "system:kube-proxy");
    let proxy_groups = proxy["status"]["userInfo"]["groups"].to_string();
    assert!(!proxy_groups.contains("system:nodes"), "{proxy_groups}");
    let admin = control.data.join("admin.kubeconfig");
    let csrs = kubectl(&admin, &["get", "csr", "--no-headers"]);
    let requester = format!("system:bootstrap:{id}");
    assert!(
        csrs.lines()
            .any(|l| l.contains(&requester) && l.contains("Approved,Issued")),
        "{csrs}\n{}",
        std::fs::read_to_string(log).unwrap()
    );
}
