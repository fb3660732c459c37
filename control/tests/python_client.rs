//! The official Python client (Debian's python3-kubernetes) against cairn-control.

// Test code: a failed setup step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::Server;

#[test]
fn python_client_lists_creates_patches_watches() {
    let dir = tempfile::tempdir().unwrap();
    // The client's wire behaviour alone: the embedded scheduler's PodScheduled update would
    // add a MODIFIED event to the exact sequence the script checks.
    let server = Server::start_with(dir.path(), &["--scheduler=false"]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/client_test.py");
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
    assert!(String::from_utf8_lossy(&out.stdout).contains("python client: ok"));
}
