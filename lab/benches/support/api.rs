//! The API server by curl with the lab's admin credentials, for the scale benchmarks
//! (many writes, 8 at a time, without a client library's own costs in the figures).

use std::process::{Command, Stdio};

use serde_json::Value;

use super::common::Lab;

/// The API server by curl, with the admin credentials of the lab's kubeconfig.
pub struct Api {
    server: String,
    dir: tempfile::TempDir,
}

impl Api {
    pub fn new(lab: &Lab) -> Api {
        let dir = tempfile::tempdir().unwrap();
        let field = |path: &str| {
            lab.kubectl(&[
                "config",
                "view",
                "--raw",
                "-o",
                &format!("jsonpath={{{path}}}"),
            ])
        };
        for (file, path) in [
            ("ca", ".clusters[0].cluster.certificate-authority-data"),
            ("cert", ".users[0].user.client-certificate-data"),
            ("key", ".users[0].user.client-key-data"),
        ] {
            let out = Command::new("base64")
                .arg("-d")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            use std::io::Write;
            out.stdin
                .as_ref()
                .unwrap()
                .write_all(field(path).as_bytes())
                .unwrap();
            let decoded = out.wait_with_output().unwrap();
            std::fs::write(dir.path().join(file), decoded.stdout).unwrap();
        }
        Api {
            server: field(".clusters[0].cluster.server"),
            dir,
        }
    }

    /// One request; panics on a status other than 2xx.
    pub fn call(&self, method: &str, path: &str, content_type: &str, body: &Value) {
        let d = self.dir.path();
        let out = Command::new("curl")
            .args(["-sS", "-o", "/dev/null", "-w", "%{http_code}", "-X", method])
            .arg("--cacert")
            .arg(d.join("ca"))
            .arg("--cert")
            .arg(d.join("cert"))
            .arg("--key")
            .arg(d.join("key"))
            .args([
                "-H",
                &format!("Content-Type: {content_type}"),
                "--data-binary",
                &body.to_string(),
            ])
            .arg(format!("{}{path}", self.server))
            .output()
            .unwrap();
        let code = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            code.starts_with('2'),
            "{method} {path}: {code} {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    pub fn create(&self, path: &str, body: &Value) {
        self.call("POST", path, "application/json", body);
    }

    pub fn merge(&self, path: &str, body: &Value) {
        self.call("PATCH", path, "application/merge-patch+json", body);
    }

    /// `calls` 8 at a time.
    pub fn all(&self, calls: Vec<(String, Value, bool)>) {
        let chunks: Vec<Vec<(String, Value, bool)>> = calls
            .chunks(calls.len().div_ceil(8))
            .map(<[_]>::to_vec)
            .collect();
        std::thread::scope(|s| {
            for chunk in chunks {
                s.spawn(move || {
                    for (path, body, create) in chunk {
                        match create {
                            true => self.create(&path, &body),
                            false => self.merge(&path, &body),
                        }
                    }
                });
            }
        });
    }
}
