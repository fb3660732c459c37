//! A private containerd (Debian's 1.6) for integration tests: its own root, state,
//! sockets and config in a fresh temp dir, torn down completely on drop.

use std::fmt::Write as _;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::proc_util::{kill_tree, pids_whose_cmdline_contains, unmount_under};

/// The containerd binary the tests use (Debian's `containerd` package).
pub const CONTAINERD_BIN: &str = "/usr/bin/containerd";

/// How long to wait for the daemon's socket before giving up: a guard against a hung
/// start, not a performance assertion.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Options for [`Containerd::start_with`].
#[derive(Debug, Clone, Default)]
pub struct ContainerdOptions {
    /// Keep the CRI plugin enabled (with `restrict_oom_score_adj = true`, which this host
    /// needs, see host-facts.md). Off by default: the agent talks to containerd directly.
    pub cri: bool,
    /// CNI config dir for the CRI plugin (default `<dir>/net.d`).
    pub cni_conf_dir: Option<PathBuf>,
    /// Sandbox (pause) image for the CRI plugin.
    pub sandbox_image: Option<String>,
    /// Run the daemon inside this network namespace (`/run/netns/NAME`), entered with
    /// `nsenter --net` so the host's mounts (and cgroups) stay visible.
    pub netns: Option<PathBuf>,
}

/// A running private containerd. Dropping it kills the daemon and its shims (and their
/// containers), unmounts everything under its dirs and removes them.
pub struct Containerd {
    /// gRPC socket.
    pub socket: PathBuf,
    /// `--root` (content store, snapshots, metadata).
    pub root: PathBuf,
    /// `--state` (runtime state, shim bundles).
    pub state: PathBuf,
    /// Daemon log (stdout+stderr).
    pub log: PathBuf,
    child: Child,
    dir: tempfile::TempDir,
    opts: ContainerdOptions,
}

impl Containerd {
    /// Starts containerd without the CRI plugin.
    pub fn start() -> Result<Self> {
        Self::start_with(ContainerdOptions::default())
    }

    /// Starts containerd with its CRI plugin enabled (the benchmark peer).
    pub fn start_with_cri() -> Result<Self> {
        Self::start_with(ContainerdOptions {
            cri: true,
            ..ContainerdOptions::default()
        })
    }

    /// Starts containerd with `opts` and waits until its gRPC socket accepts connections.
    pub fn start_with(opts: ContainerdOptions) -> Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("cairn-ctrd-")
            .tempdir()
            .context("creating containerd temp dir")?;
        let base = dir.path().to_path_buf();
        let root = base.join("root");
        let state = base.join("state");
        let socket = base.join("containerd.sock");
        let log = base.join("containerd.log");
        for d in [&root, &state, &base.join("opt"), &base.join("net.d")] {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
        }
        let config_path = base.join("config.toml");
        std::fs::write(&config_path, config_toml(&base, &opts)?)
            .with_context(|| format!("writing {}", config_path.display()))?;

        let child = spawn_daemon(&config_path, &log, &opts)?;
        let mut me = Self {
            socket,
            root,
            state,
            log,
            child,
            dir,
            opts,
        };
        me.wait_ready()?;
        Ok(me)
    }

    /// Stops the daemon alone (SIGTERM, as an upgrade does; shims and containers keep
    /// running) and starts it again on the same root, state and socket.
    pub fn restart(&mut self) -> Result<()> {
        self.stop_daemon()?;
        self.start_daemon()
    }

    /// SIGTERM to the daemon only; shims and their containers keep running.
    pub fn stop_daemon(&mut self) -> Result<()> {
        let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM);
        self.child
            .wait()
            .context("waiting for containerd to stop")?;
        let _ = std::fs::remove_file(&self.socket);
        Ok(())
    }

    /// Starts the daemon again after [`Containerd::stop_daemon`].
    pub fn start_daemon(&mut self) -> Result<()> {
        let config_path = self.dir.path().join("config.toml");
        self.child = spawn_daemon(&config_path, &self.log, &self.opts)?;
        self.wait_ready()
    }

    fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().context("polling containerd")? {
                bail!(
                    "containerd exited during start ({status}); log:\n{}",
                    self.log_tail()
                );
            }
            if UnixStream::connect(&self.socket).is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "containerd socket {} not ready after {START_TIMEOUT:?}; log:\n{}",
                    self.socket.display(),
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The daemon's PID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The temp dir holding everything of this instance.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A runc state root private to this instance (`<state>/runc`): pass it as the runc
    /// shim option `Root` so two test daemons never share `/run/containerd/runc/<ns>`.
    pub fn runc_root(&self) -> PathBuf {
        self.state.join("runc")
    }

    /// The CNI config dir the CRI variant reads (`<dir>/net.d`) unless overridden.
    pub fn default_cni_conf_dir(&self) -> PathBuf {
        self.dir.path().join("net.d")
    }

    /// A tonic channel to the gRPC socket.
    pub async fn channel(&self) -> Result<tonic::transport::Channel> {
        containerd_client::connect(&self.socket)
            .await
            .with_context(|| format!("connecting to {}", self.socket.display()))
    }

    /// The last lines of the daemon's log, for failure messages.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let start = lines.len().saturating_sub(40);
        lines[start..].join("\n")
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        let pid = Pid::from_raw(self.child.id() as i32);
        let _ = kill(pid, Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if Instant::now() > deadline => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        // Shims outlive the daemon by design; theirs mention our socket in `-address`.
        let address = self.socket.to_string_lossy().into_owned();
        for shim in pids_whose_cmdline_contains(&["containerd-shim", &address]) {
            kill_tree(shim);
        }
        unmount_under(self.dir.path());
    }
}

/// Spawns containerd on `config_path`, appending its output to `log`.
fn spawn_daemon(config_path: &Path, log: &Path, opts: &ContainerdOptions) -> Result<Child> {
    let log_file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("opening {}", log.display()))?;
    let log_err = log_file
        .try_clone()
        .context("duplicating log file handle")?;
    let mut cmd = match &opts.netns {
        Some(ns) => {
            let mut c = Command::new("nsenter");
            c.arg(format!("--net={}", ns.display()))
                .arg("--")
                .arg(CONTAINERD_BIN);
            c
        }
        None => Command::new(CONTAINERD_BIN),
    };
    cmd.arg("--config")
        .arg(config_path)
        .stdin(Stdio::null())
        .stdout(log_file)
        .stderr(log_err);
    cmd.spawn()
        .with_context(|| format!("spawning {CONTAINERD_BIN}"))
}

fn config_toml(base: &Path, opts: &ContainerdOptions) -> Result<String> {
    let p = |name: &str| base.join(name).to_string_lossy().into_owned();
    let mut s = String::new();
    writeln!(s, "version = 2")?;
    writeln!(s, "root = {:?}", p("root"))?;
    writeln!(s, "state = {:?}", p("state"))?;
    // Snapshotters that cannot work here only add noise and start time.
    let mut disabled = vec![
        "io.containerd.snapshotter.v1.aufs",
        "io.containerd.snapshotter.v1.btrfs",
        "io.containerd.snapshotter.v1.zfs",
        "io.containerd.snapshotter.v1.devmapper",
    ];
    if !opts.cri {
        disabled.push("io.containerd.grpc.v1.cri");
    }
    writeln!(s, "disabled_plugins = {disabled:?}")?;
    writeln!(s, "[grpc]\n  address = {:?}", p("containerd.sock"))?;
    writeln!(s, "[ttrpc]\n  address = {:?}", p("containerd.sock.ttrpc"))?;
    writeln!(s, "[debug]\n  address = \"\"\n  level = \"info\"")?;
    writeln!(s, "[metrics]\n  address = \"\"")?;
    writeln!(
        s,
        "[plugins.\"io.containerd.internal.v1.opt\"]\n  path = {:?}",
        p("opt")
    )?;
    writeln!(
        s,
        "[plugins.\"io.containerd.snapshotter.v1.overlayfs\"]\n  root_path = \"\""
    )?;
    if opts.cri {
        let cni_conf = opts
            .cni_conf_dir
            .clone()
            .unwrap_or_else(|| base.join("net.d"));
        let sandbox = opts
            .sandbox_image
            .clone()
            .unwrap_or_else(|| "registry.k8s.io/pause:3.6".to_owned());
        let runc_root = base.join("state").join("runc");
        writeln!(
            s,
            r#"[plugins."io.containerd.grpc.v1.cri"]
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  sandbox_image = {sandbox:?}
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = {cni:?}
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = {runc:?}"#,
            cni = cni_conf.to_string_lossy(),
            runc = runc_root.to_string_lossy(),
        )?;
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_is_valid_toml_and_disables_cri_by_default() {
        let base = Path::new("/tmp/x");
        let plain = config_toml(base, &ContainerdOptions::default()).unwrap();
        assert!(plain.contains("\"io.containerd.grpc.v1.cri\""));
        let cri = config_toml(
            base,
            &ContainerdOptions {
                cri: true,
                ..Default::default()
            },
        )
        .unwrap();
        assert!(cri.contains("restrict_oom_score_adj = true"));
        let disabled_line = cri
            .lines()
            .find(|l| l.starts_with("disabled_plugins"))
            .unwrap();
        assert!(!disabled_line.contains("cri"));
    }
}
