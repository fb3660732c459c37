//! Private etcd for tests: Debian's `etcd-server` binary, one member or a cluster of
//! several, on loopback ports the kernel picked, data in a temp dir, killed and removed
//! on drop.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::EtcdConfig;

#[derive(Debug, thiserror::Error)]
pub enum EtcdServerError {
    #[error("starting etcd (apt-get install etcd-server): {0}")]
    Spawn(std::io::Error),
    #[error("etcd at {url} did not become healthy within 30 s; its log: {log}")]
    NotReady { url: String, log: String },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// A loopback port free now (the kernel's pick; etcd binds it a moment later).
fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

struct Member {
    name: String,
    client_url: String,
    peer_url: String,
    child: Option<Child>,
}

/// One etcd member, or a cluster of them.
pub struct EtcdServer {
    members: Vec<Member>,
    dir: tempfile::TempDir,
}

impl EtcdServer {
    /// A single-member etcd.
    pub fn start() -> Result<EtcdServer, EtcdServerError> {
        Self::start_cluster(1)
    }

    /// A cluster of `size` members, started together and healthy (a leader elected).
    pub fn start_cluster(size: usize) -> Result<EtcdServer, EtcdServerError> {
        let mut members = Vec::with_capacity(size);
        for i in 0..size {
            members.push(Member {
                name: format!("member-{i}"),
                client_url: format!("http://127.0.0.1:{}", free_port()?),
                peer_url: format!("http://127.0.0.1:{}", free_port()?),
                child: None,
            });
        }
        let mut server = EtcdServer {
            members,
            dir: tempfile::tempdir()?,
        };
        for i in 0..size {
            server.spawn(i)?;
        }
        for i in 0..size {
            server.wait_healthy(i)?;
        }
        Ok(server)
    }

    fn initial_cluster(&self) -> String {
        let peers: Vec<String> = self
            .members
            .iter()
            .map(|m| format!("{}={}", m.name, m.peer_url))
            .collect();
        peers.join(",")
    }

    fn log_path(&self, i: usize) -> std::path::PathBuf {
        self.dir
            .path()
            .join(format!("{}.log", self.members[i].name))
    }

    /// Starts member `i` (again, after `kill`: its data dir is kept).
    pub fn spawn(&mut self, i: usize) -> Result<(), EtcdServerError> {
        let cluster = self.initial_cluster();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path(i))?;
        let m = &self.members[i];
        let child = Command::new("etcd")
            .args(["--name", &m.name, "--data-dir"])
            .arg(self.dir.path().join(&m.name))
            .args(["--listen-client-urls", &m.client_url])
            .args(["--advertise-client-urls", &m.client_url])
            .args(["--listen-peer-urls", &m.peer_url])
            .args(["--initial-advertise-peer-urls", &m.peer_url])
            .args(["--initial-cluster", &cluster])
            .args(["--initial-cluster-token", "cairn-test"])
            .args(["--log-level", "warn"])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .map_err(EtcdServerError::Spawn)?;
        self.members[i].child = Some(child);
        Ok(())
    }

    /// SIGKILL member `i`.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Polls member `i`'s /health until it reports a leader.
    pub fn wait_healthy(&self, i: usize) -> Result<(), EtcdServerError> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let url = format!("{}/health", self.members[i].client_url);
        while Instant::now() < deadline {
            let out = Command::new("curl")
                .args(["-fsS", "-m", "1", &url])
                .output()?;
            if String::from_utf8_lossy(&out.stdout).contains("\"health\":\"true\"") {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(EtcdServerError::NotReady {
            url: self.members[i].client_url.clone(),
            log: std::fs::read_to_string(self.log_path(i)).unwrap_or_default(),
        })
    }

    /// The first member's client URL.
    pub fn client_url(&self) -> &str {
        &self.members[0].client_url
    }

    /// Every member's client URL.
    pub fn client_urls(&self) -> Vec<String> {
        self.members.iter().map(|m| m.client_url.clone()).collect()
    }

    /// A config naming every member, under `prefix`.
    pub fn config(&self, prefix: &str) -> EtcdConfig {
        EtcdConfig {
            endpoints: self.client_urls(),
            prefix: prefix.to_string(),
            tls: None,
        }
    }
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }
}
