//! Control-plane processes for benchmarks: the release `cairn-control` binary, `serve`
//! on a private data dir and port, sidecar processes (`scheduler`, `controllers`) against
//! its kubeconfig, clients (reqwest, kube) with its admin credentials over HTTPS, and
//! per-process CPU and memory from `/proc`. Processes are killed by PID when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::api_client::Credentials;

/// A child process killed (and reaped) on drop.
pub struct Proc(pub Child);

impl Proc {
    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // Best effort: the process may have exited already.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `CAIRN_CONTROL_BIN` (e.g. a frame-pointer build for profiling), else a fresh release
/// build of the workspace at `root`.
pub fn control_binary(root: &Path) -> Result<PathBuf> {
    if let Some(bin) = std::env::var_os("CAIRN_CONTROL_BIN") {
        return Ok(PathBuf::from(bin));
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let st = Command::new(cargo)
        .args(["build", "--release", "-p", "cairn-control"])
        .current_dir(root)
        .status()
        .context("running cargo build")?;
    if !st.success() {
        bail!("building cairn-control failed");
    }
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join("target"));
    Ok(target.join("release/cairn-control"))
}

/// A running `cairn-control serve` and its kubeconfig.
pub struct ControlPlane {
    pub server: Proc,
    pub url: String,
    pub kubeconfig: PathBuf,
    bin: PathBuf,
    dir: PathBuf,
}

impl ControlPlane {
    /// Starts `serve` in `dir` with `args` added (logs at warn to `dir/control.log`).
    pub fn start(bin: &Path, dir: &Path, args: &[&str]) -> Result<ControlPlane> {
        let log = std::fs::File::create(dir.join("control.log"))?;
        let child = Command::new(bin)
            .args(["serve", "--bind", "127.0.0.1:0", "--data-dir"])
            .arg(dir)
            .args(args)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("starting cairn-control serve")?;
        let server = Proc(child);
        let url_file = dir.join("server-url");
        let deadline = Instant::now() + Duration::from_secs(30);
        let url = loop {
            if let Ok(u) = std::fs::read_to_string(&url_file) {
                break u.trim().to_string();
            }
            if Instant::now() > deadline {
                bail!(
                    "cairn-control did not start (see {})",
                    dir.join("control.log").display()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let kc = Command::new(bin)
            .args(["kubeconfig", "--data-dir"])
            .arg(dir)
            .output()?;
        if !kc.status.success() {
            bail!(
                "cairn-control kubeconfig failed: {}",
                String::from_utf8_lossy(&kc.stderr)
            );
        }
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(&kubeconfig, &kc.stdout)?;
        Ok(ControlPlane {
            server,
            url,
            kubeconfig,
            bin: bin.to_path_buf(),
            dir: dir.to_path_buf(),
        })
    }

    /// The admin credentials of `dir/kubeconfig`.
    pub fn credentials(&self) -> Result<Credentials> {
        Credentials::from_kubeconfig(&self.kubeconfig)
    }

    /// A reqwest builder speaking HTTPS to the server as the admin.
    pub fn http_builder(&self) -> Result<reqwest::ClientBuilder> {
        self.credentials()?.reqwest_builder()
    }

    /// A kube client as the admin, from `dir/kubeconfig`.
    pub async fn kube_client(&self) -> Result<kube::Client> {
        let kc = kube::config::Kubeconfig::read_from(&self.kubeconfig)?;
        let options = kube::config::KubeConfigOptions::default();
        let config = kube::Config::from_custom_kubeconfig(kc, &options).await?;
        Ok(kube::Client::try_from(config)?)
    }

    /// Starts `cairn-control SUBCOMMAND --kubeconfig K ARGS` (logs to `dir/SUBCOMMAND.log`).
    pub fn sidecar(&self, subcommand: &str, args: &[&str]) -> Result<Proc> {
        let log = std::fs::File::create(self.dir.join(format!("{subcommand}.log")))?;
        let child = Command::new(&self.bin)
            .args([subcommand, "--kubeconfig"])
            .arg(&self.kubeconfig)
            .args(args)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting cairn-control {subcommand}"))?;
        Ok(Proc(child))
    }
}

/// utime + stime of a process, in seconds.
pub fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of stat; index 11 and 12 after the ')'.
    (ticks(11) + ticks(12)) / 100.0
}

/// A `/proc/PID/status` memory line (`VmRSS:`, `VmHWM:`) in KiB.
pub fn vm_kib(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}
