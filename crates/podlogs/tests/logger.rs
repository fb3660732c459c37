//! `cairn-logger` run the way containerd's shim runs it: the container's stdout and stderr
//! pipes on fds 3 and 4, a readiness pipe on fd 5, `CONTAINER_ID`/`CONTAINER_NAMESPACE` in
//! the environment, and the arguments the shim derives from the `binary://` URI.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{PipeWriter, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use cairn_podlogs::cri::parse_record;
use cairn_podlogs::files::{rotated_files, spec_from_uri};
use cairn_podlogs::{binary_log_uri, read_logs, LogOptions, RotateOptions};
use futures::StreamExt;

const LOGGER: &str = env!("CARGO_BIN_EXE_cairn-logger");

struct Logger {
    child: Child,
    stdout: Option<PipeWriter>,
    stderr: Option<PipeWriter>,
}

/// Moves `fds[i]` to descriptor `3 + i` in the child, as Go's `exec.Cmd.ExtraFiles` does.
#[allow(unsafe_code)]
fn with_extra_files(cmd: &mut Command, fds: [RawFd; 3]) {
    // SAFETY: the closure only calls fcntl and dup2, which are async-signal-safe, and touches
    // no memory shared with the parent.
    unsafe {
        cmd.pre_exec(move || {
            // Lift every source above the targets first so that no dup2 clobbers a source.
            let mut high = [0; 3];
            for (i, fd) in fds.iter().enumerate() {
                high[i] = libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, 100);
                if high[i] < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            for (i, fd) in high.iter().enumerate() {
                if libc::dup2(*fd, 3 + i as RawFd) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// Closes descriptors 3 to 5 in the child.
#[allow(unsafe_code)]
fn without_extra_files(cmd: &mut Command) {
    // SAFETY: close is async-signal-safe and the closure touches no shared memory.
    unsafe {
        cmd.pre_exec(|| {
            for fd in 3..=5 {
                libc::close(fd);
            }
            Ok(())
        });
    }
}

/// Starts the logger like the shim: the args from the URI's single query key (`[spec, ""]`),
/// and waits for its ready signal.
fn start_logger(log: &Path, opts: RotateOptions) -> Logger {
    let uri = binary_log_uri(Path::new(LOGGER), log, &opts);
    let spec = spec_from_uri(&uri).unwrap();
    assert_eq!(spec.path, log);
    let (out_r, out_w) = std::io::pipe().unwrap();
    let (err_r, err_w) = std::io::pipe().unwrap();
    let (mut ready_r, ready_w) = std::io::pipe().unwrap();
    let mut cmd = Command::new(LOGGER);
    cmd.arg(spec.to_arg())
        .arg("")
        .env_clear()
        .env("CONTAINER_ID", "c-1")
        .env("CONTAINER_NAMESPACE", "test")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    with_extra_files(
        &mut cmd,
        [out_r.as_raw_fd(), err_r.as_raw_fd(), ready_w.as_raw_fd()],
    );
    let child = cmd.spawn().unwrap();
    // Our copies go, as the shim closes its side of the ready pipe after the start.
    drop((out_r, err_r, ready_w));
    let mut byte = [0u8; 1];
    let _ = ready_r.read(&mut byte).unwrap();
    Logger {
        child,
        stdout: Some(out_w),
        stderr: Some(err_w),
    }
}

fn wait_exit(child: &mut Child) -> ExitStatus {
    // A guard against a logger that never exits, not a speed assertion.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("cairn-logger did not exit");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// (stream, tag, content) of every record; checks each timestamp parses.
fn records(path: &Path) -> Vec<(String, String, String)> {
    let text = std::fs::read(path).unwrap();
    assert!(text.is_empty() || text.ends_with(b"\n"));
    text.split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            let r = parse_record(l)
                .unwrap_or_else(|e| panic!("bad record {:?}: {e}", String::from_utf8_lossy(l)));
            (
                r.stream.as_str().to_string(),
                if r.partial { "P" } else { "F" }.to_string(),
                String::from_utf8(r.content.to_vec()).unwrap(),
            )
        })
        .collect()
}

fn rec(stream: &str, tag: &str, content: &str) -> (String, String, String) {
    (stream.into(), tag.into(), content.into())
}

#[test]
fn writes_cri_records_from_both_pipes_and_exits_at_eof() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("ns_pod_uid/app/0.log");
    let mut l = start_logger(&log, RotateOptions::default());
    let mut out = l.stdout.take().unwrap();
    let mut err = l.stderr.take().unwrap();
    out.write_all(b"hello\r\nwor").unwrap();
    out.write_all(b"ld\n\n").unwrap();
    let long = "x".repeat(16 * 1024 + 10);
    out.write_all(format!("{long}\n").as_bytes()).unwrap();
    err.write_all(b"oops\n").unwrap();
    out.write_all(b"no newline at the end").unwrap();
    drop(out);
    // Still running: stderr is open.
    assert!(l.child.try_wait().unwrap().is_none());
    drop(err);
    assert!(wait_exit(&mut l.child).success());

    let mut got = records(&log);
    // The two pipes are read independently: compare each stream's records in order.
    let stderr: Vec<_> = got.iter().filter(|r| r.0 == "stderr").cloned().collect();
    got.retain(|r| r.0 == "stdout");
    assert_eq!(stderr, vec![rec("stderr", "F", "oops")]);
    assert_eq!(
        got,
        vec![
            rec("stdout", "F", "hello"),
            rec("stdout", "F", "world"),
            rec("stdout", "F", ""),
            rec("stdout", "P", &long[..16 * 1024]),
            rec("stdout", "F", "xxxxxxxxxx"),
            rec("stdout", "P", "no newline at the end"),
        ]
    );
}

#[tokio::test]
async fn rotates_by_size_and_the_reader_follows_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("ns_pod_uid/app/1.log");
    let opts = RotateOptions {
        max_size: 2048,
        max_files: 3,
    };
    let mut l = start_logger(&log, opts);
    let mut out = l.stdout.take().unwrap();
    drop(l.stderr.take());
    let lines: Vec<String> = (0..400).map(|i| format!("line {i:05}")).collect();
    for chunk in lines.chunks(7) {
        out.write_all(format!("{}\n", chunk.join("\n")).as_bytes())
            .unwrap();
    }
    drop(out);
    assert!(wait_exit(&mut l.child).success());

    let rotated = rotated_files(&log).unwrap();
    assert_eq!(rotated.len(), 2, "{rotated:?}");
    for f in rotated.iter().chain([&log]) {
        let size = std::fs::metadata(f).unwrap().len();
        assert!(size <= 2048, "{} is {size} bytes", f.display());
    }
    // What is left is the newest part of the output, without gaps, across the three files.
    let mut s = read_logs(
        log.clone(),
        LogOptions::default(),
        std::sync::Arc::new(|| false),
    )
    .await
    .unwrap();
    let mut text = Vec::new();
    while let Some(chunk) = s.next().await {
        text.extend_from_slice(&chunk.unwrap());
    }
    let text = String::from_utf8(text).unwrap();
    let kept: Vec<&str> = text.lines().collect();
    assert!(kept.len() > 100 && kept.len() < 400, "{} lines", kept.len());
    assert_eq!(kept, lines[lines.len() - kept.len()..].to_vec());
    // tailLines reaches into the rotated files.
    let opts = LogOptions {
        tail_lines: Some(kept.len() as i64 - 1),
        ..Default::default()
    };
    let mut s = read_logs(log, opts, std::sync::Arc::new(|| false))
        .await
        .unwrap();
    let mut tail = Vec::new();
    while let Some(chunk) = s.next().await {
        tail.extend_from_slice(&chunk.unwrap());
    }
    assert_eq!(
        String::from_utf8(tail).unwrap(),
        kept[1..].join("\n") + "\n"
    );
}

#[test]
fn sigterm_writes_what_is_pending_and_exits() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("p/c/0.log");
    let mut l = start_logger(&log, RotateOptions::default());
    let mut out = l.stdout.take().unwrap();
    out.write_all(b"done\nhalf a line").unwrap();
    // The writers stay open (as if a process in the container still held them): only the
    // signal ends the logger, which writes the unfinished line first.
    let pid = nix::unistd::Pid::from_raw(l.child.id() as i32);
    // Wait until the complete line is in the file, so the signal finds the half line read.
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(&log).unwrap_or_default().is_empty() {
        assert!(Instant::now() < deadline, "nothing written");
        std::thread::sleep(Duration::from_millis(10));
    }
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    assert!(wait_exit(&mut l.child).success());
    assert_eq!(
        records(&log),
        vec![
            rec("stdout", "F", "done"),
            rec("stdout", "P", "half a line")
        ]
    );
    drop(out);
}

#[test]
fn bad_arguments_fail_with_a_message() {
    let out = Command::new(LOGGER).arg("max-size=1").output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("lacks path="));
    // No pipes on 3 and 4 (the test runner's own descriptors there, such as cargo's
    // jobserver pipes, are closed first).
    let mut cmd = Command::new(LOGGER);
    cmd.arg("path=/tmp/cairn-logger-never");
    without_extra_files(&mut cmd);
    let out = cmd.output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("fd 3"));
}
