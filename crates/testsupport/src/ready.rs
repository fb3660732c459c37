//! The harness plays systemd for the daemons it starts: each gets a `NOTIFY_SOCKET`, and
//! the moment its `READY=1` arrives the harness checks that it serves, which is what a
//! `Type=notify` unit's dependents rely on.

use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

/// What the `READY=1` notification said, and whether the daemon served when it came.
pub type Readiness = (String, Result<(), String>);

pub struct ReadyWatch {
    ready: mpsc::Receiver<Readiness>,
    others: mpsc::Receiver<String>,
}

impl ReadyWatch {
    /// Binds `socket` and reads it on a thread (which inherits the test thread's network
    /// namespace); `serves` runs the moment the first `READY=1` arrives. Every other
    /// notification (`WATCHDOG=1`, ...) is kept for [`ReadyWatch::wait_for`].
    pub fn start(
        socket: &Path,
        serves: impl FnOnce() -> Result<(), String> + Send + 'static,
    ) -> ReadyWatch {
        let _ = std::fs::remove_file(socket);
        let sock = UnixDatagram::bind(socket).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(300)))
            .unwrap();
        let (ready_tx, ready) = mpsc::channel();
        let (others_tx, others) = mpsc::channel();
        std::thread::spawn(move || {
            let mut serves = Some(serves);
            let mut buf = [0u8; 4096];
            while let Ok(n) = sock.recv(&mut buf) {
                let message = String::from_utf8_lossy(&buf[..n]).into_owned();
                match serves.take_if(|_| message.lines().any(|l| l == "READY=1")) {
                    Some(check) => {
                        let _ = ready_tx.send((message, check()));
                    }
                    None => {
                        if others_tx.send(message).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        ReadyWatch { ready, others }
    }

    /// The `READY=1` notification (it has come by the time a cluster is up, if ever).
    pub fn wait(&self) -> Readiness {
        self.ready
            .recv_timeout(Duration::from_secs(60))
            .expect("no READY=1 from the daemon")
    }

    /// The first other notification with the line `line`, waiting up to `secs`.
    pub fn wait_for(&self, line: &str, secs: u64) -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(secs);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.others.recv_timeout(left) {
                Ok(m) if m.lines().any(|l| l == line) => return m,
                Ok(_) => {}
                Err(_) => panic!("no {line} from the daemon in {secs} s"),
            }
        }
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
