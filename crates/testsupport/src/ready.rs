//! The harness plays systemd for the daemons it starts: each gets a `NOTIFY_SOCKET`, and
//! the moment its `READY=1` arrives the harness checks that it serves, which is what a
//! `Type=notify` unit's dependents rely on.

use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

/// What the first notification said, and whether the daemon served when it came.
pub type Readiness = (String, Result<(), String>);

pub struct ReadyWatch(mpsc::Receiver<Readiness>);

impl ReadyWatch {
    /// Binds `socket` and waits on a thread (which inherits the test thread's network
    /// namespace) for its first datagram; `serves` runs the moment it arrives.
    pub fn start(
        socket: &Path,
        serves: impl FnOnce() -> Result<(), String> + Send + 'static,
    ) -> ReadyWatch {
        let _ = std::fs::remove_file(socket);
        let sock = UnixDatagram::bind(socket).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(300)))
            .unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            if let Ok(n) = sock.recv(&mut buf) {
                let message = String::from_utf8_lossy(&buf[..n]).into_owned();
                let _ = tx.send((message, serves()));
            }
        });
        ReadyWatch(rx)
    }

    /// The first notification (it has come by the time a cluster is up, if ever).
    pub fn wait(&self) -> Readiness {
        self.0
            .recv_timeout(Duration::from_secs(60))
            .expect("no sd_notify message from the daemon")
    }
}

/// An HTTP status code from `url` (any: it answered), or why not.
pub fn answers(url: &str) -> Result<String, String> {
    let out = std::process::Command::new("curl")
        .args([
            "-sk",
            "--max-time",
            "5",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            url,
        ])
        .output()
        .map_err(|e| format!("curl: {e}"))?;
    let code = String::from_utf8_lossy(&out.stdout).into_owned();
    match code.as_str() {
        "" | "000" => Err(format!("{url} did not answer")),
        _ => Ok(code),
    }
}
