//! The official Python client (Debian's python3-kubernetes) against cairn-control.

// Test code: a failed setup step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::Server;

/// Runs `script` with the server's kubeconfig; its stdout.
fn run_script(server: &Server, script: &str) -> String {
    // Debian's interpreter: python3-kubernetes is installed for it, not for other pythons on PATH.
    let python = if std::path::Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    };
    let out = std::process::Command::new(python)
        .arg(script)
        .arg(&server.kubeconfig)
        .output()
        .expect("python3 (install python3-kubernetes)");
    assert!(
        out.status.success(),
        "python client test failed:\nstdout: {}\nstderr: {}\nserver log:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        server.log()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every served kind, fresh (no controller has written its status), read back through the
/// typed models.
#[test]
fn python_client_reads_every_kind() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(dir.path(), &["--scheduler=false", "--controllers="]);
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/roundtrip_test.py"
    );
    assert!(run_script(&server, script).contains("python roundtrip: ok"));
}

#[test]
fn python_client_lists_creates_patches_watches() {
    let dir = tempfile::tempdir().unwrap();
    // The client's wire behaviour alone: the embedded scheduler's PodScheduled update would
    // add a MODIFIED event to the exact sequence the script checks.
    let server = Server::start_with(dir.path(), &["--scheduler=false"]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/client_test.py");
    assert!(run_script(&server, script).contains("python client: ok"));
}
