//! A local OCI registry (Debian's `docker-registry`, distribution 2.8) on a free loopback
//! port, optionally behind htpasswd basic auth. Killed and removed on drop.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// The registry binary the tests use (Debian's `docker-registry` package).
pub const REGISTRY_BIN: &str = "/usr/bin/docker-registry";

const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A running `docker-registry serve`.
pub struct Registry {
    addr: String,
    credentials: Option<(String, String)>,
    /// Blob/manifest storage root (the registry's filesystem driver layout).
    pub storage: PathBuf,
    /// Registry log.
    pub log: PathBuf,
    /// The CA that signed the server certificate (for `127.0.0.1`) when serving HTTPS.
    pub tls_ca: Option<PathBuf>,
    child: Child,
    dir: tempfile::TempDir,
}

impl Registry {
    /// An anonymous (open) registry.
    pub fn start() -> Result<Self> {
        Self::start_inner(None, None, false)
    }

    /// Another registry process serving this one's storage over HTTPS with a certificate
    /// for `127.0.0.1` from a throwaway CA ([`Registry::tls_ca`]); push through `self`.
    pub fn start_tls_view(&self) -> Result<Self> {
        Self::start_inner(None, Some(self.storage.clone()), true)
    }

    /// A registry that requires basic auth with `user`/`pass` (htpasswd, bcrypt).
    pub fn start_with_htpasswd(user: &str, pass: &str) -> Result<Self> {
        Self::start_inner(Some((user.to_owned(), pass.to_owned())), None, false)
    }

    fn start_inner(
        credentials: Option<(String, String)>,
        shared_storage: Option<PathBuf>,
        tls: bool,
    ) -> Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("cairn-registry-")
            .tempdir()
            .context("creating registry temp dir")?;
        let storage = shared_storage.unwrap_or_else(|| dir.path().join("storage"));
        std::fs::create_dir_all(&storage)
            .with_context(|| format!("creating {}", storage.display()))?;
        let port = free_port()?;
        let addr = format!("127.0.0.1:{port}");
        let htpasswd = match &credentials {
            Some((user, pass)) => {
                let path = dir.path().join("htpasswd");
                let hash = bcrypt::hash_with_result(pass, 4)
                    .context("bcrypt-hashing the registry password")?
                    .format_for_version(bcrypt::Version::TwoY);
                std::fs::write(&path, format!("{user}:{hash}\n"))
                    .with_context(|| format!("writing {}", path.display()))?;
                Some(path)
            }
            None => None,
        };
        let tls_files = if tls {
            Some(test_certificates(dir.path())?)
        } else {
            None
        };
        let config = dir.path().join("config.yml");
        let mut yml = config_yml(&storage, &addr, htpasswd.as_deref())?;
        if let Some((cert, key, _)) = &tls_files {
            yml.push_str(&format!(
                "  tls:\n    certificate: {}\n    key: {}\n",
                cert.display(),
                key.display()
            ));
        }
        std::fs::write(&config, yml).with_context(|| format!("writing {}", config.display()))?;
        let log = dir.path().join("registry.log");
        let log_file =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let log_err = log_file
            .try_clone()
            .context("duplicating log file handle")?;
        let child = Command::new(REGISTRY_BIN)
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(log_err)
            .spawn()
            .with_context(|| format!("spawning {REGISTRY_BIN}"))?;
        let mut me = Self {
            addr,
            credentials,
            storage,
            log,
            tls_ca: tls_files.map(|(_, _, ca)| ca),
            child,
            dir,
        };
        me.wait_ready()?;
        Ok(me)
    }

    fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().context("polling registry")? {
                bail!(
                    "docker-registry exited during start ({status}); log:\n{}",
                    self.log_tail()
                );
            }
            if let Ok(status) = http_status(&self.addr, "/v2/") {
                // A TLS listener answers plain HTTP with 400: it is up.
                if status == 200 || status == 401 || (self.tls_ca.is_some() && status == 400) {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "docker-registry on {} not answering /v2/ after {START_TIMEOUT:?}; log:\n{}",
                    self.addr,
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        self.addr.clone()
    }

    /// The basic-auth credentials, for a private registry.
    pub fn credentials(&self) -> Option<(&str, &str)> {
        self.credentials
            .as_ref()
            .map(|(u, p)| (u.as_str(), p.as_str()))
    }

    /// The temp dir holding config, storage and log.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The path of a blob in the registry's storage (to corrupt it in tests).
    pub fn blob_path(&self, digest: &str) -> PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        self.storage
            .join("docker/registry/v2/blobs/sha256")
            .join(hex.get(..2).unwrap_or(""))
            .join(hex)
            .join("data")
    }

    /// The last lines of the registry log.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

/// A throwaway CA and a server certificate it signed for `127.0.0.1`/`localhost`
/// (openssl CLI). Returns (server cert, server key, CA cert).
fn test_certificates(dir: &Path) -> Result<(PathBuf, PathBuf, PathBuf)> {
    let p = |n: &str| dir.join(n);
    std::fs::write(
        p("leaf.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
    )
    .context("writing leaf.ext")?;
    let openssl = |args: &[&str], paths: &[(&str, &str)]| -> Result<()> {
        let mut cmd = Command::new("openssl");
        cmd.args(args);
        for (flag, file) in paths {
            cmd.arg(flag).arg(p(file));
        }
        let out = cmd
            .output()
            .context("running openssl (install the openssl package)")?;
        if !out.status.success() {
            bail!("{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(())
    };
    openssl(
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=cairn-test-ca",
        ],
        &[("-keyout", "ca.key"), ("-out", "ca.pem")],
    )?;
    openssl(
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
        ],
        &[("-keyout", "key.pem"), ("-out", "leaf.csr")],
    )?;
    openssl(
        &["x509", "-req", "-days", "2", "-CAcreateserial"],
        &[
            ("-in", "leaf.csr"),
            ("-CA", "ca.pem"),
            ("-CAkey", "ca.key"),
            ("-extfile", "leaf.ext"),
            ("-out", "cert.pem"),
        ],
    )?;
    Ok((p("cert.pem"), p("key.pem"), p("ca.pem")))
}

/// A port that was free a moment ago on 127.0.0.1.
pub fn free_port() -> Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("binding 127.0.0.1:0")?;
    Ok(listener.local_addr().context("local_addr")?.port())
}

/// A bare HTTP/1.0 GET, returning the status code (used before any runtime exists).
fn http_status(addr: &str, path: &str) -> Result<u16> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut buf = Vec::new();
    stream.read_to_end(&mut buf)?;
    let head = String::from_utf8_lossy(&buf);
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .context("no HTTP status line")?;
    Ok(code)
}

fn config_yml(storage: &Path, addr: &str, htpasswd: Option<&Path>) -> Result<String> {
    let mut s = String::new();
    writeln!(
        s,
        "version: 0.1
log:
  level: info
  accesslog:
    disabled: false
storage:
  filesystem:
    rootdirectory: {storage}
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
",
        storage = storage.display()
    )?;
    if let Some(path) = htpasswd {
        writeln!(
            s,
            "auth:
  htpasswd:
    realm: cairn-test
    path: {}",
            path.display()
        )?;
    }
    // Last, so a `tls:` block can be appended under it.
    writeln!(s, "http:\n  addr: {addr}\n  secret: cairn-test-secret")?;
    Ok(s)
}
