//! The lab's daemons: started in their own session inside a node's network namespace
//! (`setsid nsenter --net=… -- CMD`; neither forks, so the PID is the daemon's), logs
//! appended to a file; stopped by PID only while the PID still runs the command it was
//! started with.

use std::fs::OpenOptions;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::error::{LabError, Result, WaitFailure};
use crate::state::ProcessRecord;

/// Starts `argv` inside `netns_path` (the host's namespace when `None`), output appended
/// to `log`.
pub fn spawn(
    netns_path: Option<&Path>,
    argv: &[String],
    log: &Path,
    env: &[(&str, &str)],
) -> Result<u32> {
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir).map_err(|e| LabError::io(dir, e))?;
    }
    let open = || {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| LabError::io(log, e))
    };
    let mut header = open()?;
    // A marker between runs of the same component in one log.
    std::io::Write::write_all(
        &mut header,
        format!("=== cairn-lab: {}\n", argv.join(" ")).as_bytes(),
    )
    .map_err(|e| LabError::io(log, e))?;
    let mut command = Command::new("setsid");
    if let Some(ns) = netns_path {
        command
            .arg("nsenter")
            .arg(format!("--net={}", ns.display()))
            .arg("--");
    }
    command
        .args(argv)
        .stdin(Stdio::null())
        .stdout(open()?)
        .stderr(open()?)
        .env("NO_COLOR", "1");
    for (k, v) in env {
        command.env(k, v);
    }
    let child = command.spawn().map_err(|source| LabError::Spawn {
        command: argv.join(" "),
        source,
    })?;
    Ok(child.id())
}

fn cmdline(pid: u32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(String::from_utf8_lossy(&raw).replace('\0', " "))
}

/// Running (a zombie counts as gone) and still the process that was recorded.
pub fn is_running(record: &ProcessRecord) -> bool {
    alive(record.pid) && cmdline(record.pid).is_some_and(|c| c.contains(record.expect.as_str()))
}

/// Running and not a zombie.
pub fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the command name in parentheses, which may contain anything.
    let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
    !matches!(
        state.and_then(|s| s.chars().next()),
        Some('Z') | Some('X') | None
    )
}

/// Every process whose command line contains `needle` (leftover shims of a node).
pub fn pids_matching(needle: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != std::process::id())
        .filter(|pid| cmdline(*pid).is_some_and(|c| c.contains(needle)))
        .collect()
}

/// SIGTERM, up to `grace` to exit, then SIGKILL; returns the PIDs that needed SIGKILL.
pub fn terminate(pids: &[u32], grace: Duration) -> Vec<u32> {
    signal_all(pids, Signal::SIGTERM);
    if wait_gone(pids, grace) {
        return Vec::new();
    }
    let stubborn: Vec<u32> = pids.iter().copied().filter(|p| alive(*p)).collect();
    signal_all(&stubborn, Signal::SIGKILL);
    wait_gone(&stubborn, Duration::from_secs(10));
    stubborn
}

/// SIGKILL at once (a simulated crash), then waits for the processes to be gone.
pub fn kill_now(pids: &[u32]) {
    signal_all(pids, Signal::SIGKILL);
    wait_gone(pids, Duration::from_secs(10));
}

fn signal_all(pids: &[u32], signal: Signal) {
    for pid in pids {
        if let Ok(raw) = i32::try_from(*pid) {
            // Gone already (ESRCH) is what we want anyway.
            let _ = kill(Pid::from_raw(raw), signal);
        }
    }
}

fn wait_gone(pids: &[u32], within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if pids.iter().all(|p| !alive(*p)) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The last `lines` lines of a log, for error messages.
pub fn tail(log: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Polls `ready` until it holds; fails early when the component's process exits.
pub fn wait_for(
    record: &ProcessRecord,
    what: &str,
    timeout: Duration,
    mut ready: impl FnMut() -> bool,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        if ready() {
            return Ok(());
        }
        let failure = |waited_seconds| {
            LabError::Wait(Box::new(WaitFailure {
                node: record.node.clone(),
                component: record.component.clone(),
                what: what.into(),
                waited_seconds,
                log: record.log.clone(),
                tail: tail(&record.log, 20),
            }))
        };
        // Gone, not "no longer showing its command line": while the process is still
        // exec'ing from `setsid nsenter` into the daemon, /proc/PID/cmdline can read empty
        // for a moment (the soak's agent restarts hit that). The PID was just started by
        // us, so it cannot have been recycled yet.
        if !alive(record.pid) {
            return Err(failure(None));
        }
        if Instant::now() >= deadline {
            return Err(failure(Some(timeout.as_secs())));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recycled_pid_is_not_ours_and_terminate_escalates() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let rec = |expect: &str| ProcessRecord {
            node: "n".into(),
            component: "c".into(),
            pid: child.id(),
            expect: expect.into(),
            log: "/nonexistent".into(),
        };
        // Until the child has exec'd, its command line is ours.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !is_running(&rec("sleep 30")) {
            assert!(Instant::now() < deadline, "sleep never showed up");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!is_running(&rec("cairn-agent")));
        assert!(pids_matching("sleep 30").contains(&child.id()));
        // A reaper thread, as init would be for a daemon.
        let pid = child.id();
        let reaper = std::thread::spawn(move || child.wait().unwrap());
        assert!(terminate(&[pid], Duration::from_secs(5)).is_empty());
        reaper.join().unwrap();
        assert!(!alive(pid));
    }

    #[test]
    fn waiting_on_an_exited_process_names_it_and_shows_its_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("agent.log");
        std::fs::write(&log, "starting\nerror: bad flag --x\n").unwrap();
        let rec = ProcessRecord {
            node: "node-2".into(),
            component: "agent".into(),
            pid: u32::MAX,
            expect: "x".into(),
            log,
        };
        let err = wait_for(&rec, "a Ready node", Duration::from_secs(5), || false)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("node-2/agent exited while waiting for a Ready node"),
            "{err}"
        );
        assert!(err.ends_with("starting\nerror: bad flag --x"), "{err}");
    }
}
