//! Throwaway network namespaces (`ip netns add`), deleted on drop.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{bail, Context, Result};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A named network namespace `<prefix>-<pid>-<n>` with `lo` up.
pub struct NetNs {
    name: String,
}

impl NetNs {
    /// Creates the namespace and brings its loopback up.
    pub fn new(prefix: &str) -> Result<Self> {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let name = format!("{prefix}-{}-{n}", std::process::id());
        run(Command::new("ip").args(["netns", "add", &name]))?;
        let me = Self { name };
        run(Command::new("ip").args(["-n", &me.name, "link", "set", "lo", "up"]))?;
        Ok(me)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `/run/netns/<name>`.
    pub fn path(&self) -> PathBuf {
        PathBuf::from("/run/netns").join(&self.name)
    }

    /// Moves the calling thread into the namespace, for the rest of its life (a test's own
    /// thread, or one spawned for it: processes it starts inherit the namespace).
    pub fn enter(&self) -> Result<()> {
        let f = std::fs::File::open(self.path())
            .with_context(|| format!("opening {}", self.path().display()))?;
        nix::sched::setns(
            std::os::fd::AsFd::as_fd(&f),
            nix::sched::CloneFlags::CLONE_NEWNET,
        )
        .with_context(|| format!("entering network namespace {}", self.name))
    }

    /// Runs `f` on a thread of its own inside the namespace and returns what it returns
    /// (a panic in `f` is re-raised here).
    pub fn run_inside<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        std::thread::scope(|s| {
            let thread = s.spawn(|| {
                if let Err(e) = self.enter() {
                    panic!("{e:#}");
                }
                f()
            });
            match thread.join() {
                Ok(v) => v,
                Err(panic) => std::panic::resume_unwind(panic),
            }
        })
    }

    /// `prog` run inside the namespace via `nsenter --net` (host mounts and cgroups stay
    /// visible, unlike `ip netns exec`, see host-facts.md).
    pub fn command(&self, prog: &str) -> Command {
        let mut c = Command::new("nsenter");
        c.arg(format!("--net={}", self.path().display()))
            .arg("--")
            .arg(prog);
        c
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.name])
            .status();
    }
}

fn run(cmd: &mut Command) -> Result<()> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}
