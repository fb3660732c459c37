//! `cairn-logger`: writes one container's stdout and stderr as a CRI log file.
//!
//! containerd's runc shim starts it for a task whose stdout URI is
//! `binary:///path/to/cairn-logger?<spec>` (made by `cairn_podlogs::binary_log_uri`), with
//! the container's stdout pipe as fd 3, stderr as fd 4, and fd 5 to close (or write a
//! byte to) once ready; `CONTAINER_ID` and `CONTAINER_NAMESPACE` are in the environment.
//! The shim owns it, so logs keep flowing while the node agent restarts. It exits once both
//! pipes reach end of file, or shortly after SIGTERM (sent by the shim when the task is
//! deleted) having written what was left in the pipes.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, FromRawFd, OwnedFd, RawFd};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use cairn_podlogs::cri::{format_rfc3339_nano, LineSplitter, Stream, Tag};
use cairn_podlogs::{LoggerSpec, RotatingWriter};
use chrono::Utc;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

const USAGE: &str = "usage: cairn-logger max-size=<bytes>,max-files=<n>,path=<absolute log path>
  (normally started by containerd's shim: stdout on fd 3, stderr on fd 4, ready pipe on fd 5)";

/// After SIGTERM, what is still in the pipes is written for at most this long.
const DRAIN_AFTER_TERM: Duration = Duration::from_secs(2);

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cairn-logger: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Takes ownership of an inherited descriptor, if it is open.
#[allow(unsafe_code)]
fn inherited_fd(fd: RawFd) -> Option<File> {
    if std::fs::symlink_metadata(format!("/proc/self/fd/{fd}")).is_err() {
        return None;
    }
    // SAFETY: `fd` is open (checked just above) and was inherited from the shim, which
    // passed it for this process alone; nothing else in this process refers to it, so
    // taking ownership cannot double-close it.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    Some(File::from(owned))
}

struct Input {
    stream: Stream,
    file: Option<File>,
    splitter: LineSplitter,
}

fn run() -> anyhow::Result<()> {
    // First, before this process opens anything that could take their numbers.
    let stdout_pipe = inherited_fd(3);
    let stderr_pipe = inherited_fd(4);
    let ready_pipe = inherited_fd(5);
    let args: Vec<_> = std::env::args_os()
        .skip(1)
        .filter(|a| !a.is_empty())
        .collect();
    let Some(spec_arg) = args.first() else {
        bail!("no log spec given\n{USAGE}");
    };
    if spec_arg == "--version" || spec_arg == "-V" {
        println!("cairn-logger {}", cairn_version::LONG);
        return Ok(());
    }
    if spec_arg == "--help" || spec_arg == "-h" {
        println!("{USAGE}");
        return Ok(());
    }
    let spec = LoggerSpec::parse(spec_arg).context("parsing arguments")?;
    let container = std::env::var("CONTAINER_ID").unwrap_or_default();

    let signals = signal_fd()?;

    let mut inputs = [
        Input {
            stream: Stream::Stdout,
            file: stdout_pipe,
            splitter: LineSplitter::default(),
        },
        Input {
            stream: Stream::Stderr,
            file: stderr_pipe,
            splitter: LineSplitter::default(),
        },
    ];
    if inputs.iter().all(|i| i.file.is_none()) {
        bail!("neither fd 3 (stdout) nor fd 4 (stderr) is open\n{USAGE}");
    }
    let mut writer = open_writer(&spec, &container);
    // Ready: the shim waits for a byte or end of file on fd 5 before starting the task.
    if let Some(mut ready) = ready_pipe {
        let _ = ready.write_all(b"1");
    }

    let mut buf = vec![0u8; 64 * 1024];
    let mut deadline: Option<Instant> = None;
    loop {
        let open: Vec<usize> = (0..inputs.len())
            .filter(|&i| inputs[i].file.is_some())
            .collect();
        if open.is_empty() {
            break;
        }
        let timeout = match deadline {
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                PollTimeout::from(u16::try_from(left.as_millis()).unwrap_or(u16::MAX))
            }
            None => PollTimeout::NONE,
        };
        let Some(ready) = poll_ready(&inputs, &open, &signals, timeout)? else {
            continue;
        };
        if ready[open.len()] {
            while let Ok(Some(_)) = signals.read_signal() {}
            deadline.get_or_insert_with(|| Instant::now() + DRAIN_AFTER_TERM);
        }
        let now = format_rfc3339_nano(Utc::now());
        for (slot, &i) in open.iter().enumerate() {
            if !ready[slot] {
                continue;
            }
            let input = &mut inputs[i];
            let Some(n) = read_some(input, &mut buf) else {
                continue;
            };
            let stream = input.stream;
            let mut emit = |tag: Tag, content: &[u8]| {
                write_record(&mut writer, &spec, &container, &now, stream, tag, content)
            };
            if n == 0 {
                input.splitter.finish(&mut emit);
                input.file = None;
            } else {
                input.splitter.feed(&buf[..n], &mut emit);
            }
        }
        flush(&mut writer);
    }
    finish_open_lines(&mut inputs, &mut writer, &spec, &container);
    Ok(())
}

/// Stopped by the deadline: lines still open are written as partial records.
fn finish_open_lines(
    inputs: &mut [Input],
    writer: &mut Option<RotatingWriter>,
    spec: &LoggerSpec,
    container: &str,
) {
    let now = format_rfc3339_nano(Utc::now());
    for input in inputs.iter_mut() {
        let stream = input.stream;
        input.splitter.finish(&mut |tag: Tag, content: &[u8]| {
            write_record(writer, spec, container, &now, stream, tag, content)
        });
    }
    flush(writer);
}

/// SIGTERM and SIGINT, blocked, as a descriptor polled with the pipes.
fn signal_fd() -> anyhow::Result<SignalFd> {
    let mut mask = SigSet::empty();
    mask.add(Signal::SIGTERM);
    mask.add(Signal::SIGINT);
    mask.thread_block().context("blocking SIGTERM")?;
    SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
        .context("creating signalfd")
}

/// Which of the `open` inputs and, last, the signal descriptor are readable; None when
/// the wait was interrupted.
fn poll_ready(
    inputs: &[Input],
    open: &[usize],
    signals: &SignalFd,
    timeout: PollTimeout,
) -> anyhow::Result<Option<Vec<bool>>> {
    let mut fds: Vec<PollFd> = open
        .iter()
        .filter_map(|&i| inputs[i].file.as_ref())
        .map(|f| PollFd::new(f.as_fd(), PollFlags::POLLIN))
        .collect();
    fds.push(PollFd::new(signals.as_fd(), PollFlags::POLLIN));
    match poll(&mut fds, timeout) {
        Ok(_) => {}
        Err(nix::errno::Errno::EINTR) => return Ok(None),
        Err(e) => return Err(e).context("polling the container's pipes"),
    }
    Ok(Some(
        fds.iter()
            .map(|fd| fd.revents().is_some_and(|r| !r.is_empty()))
            .collect(),
    ))
}

/// One read from a ready input: the byte count (0 at end of file or on an error, which
/// closes it), None when interrupted or already closed.
fn read_some(input: &mut Input, buf: &mut [u8]) -> Option<usize> {
    match input.file.as_mut().map(|f| f.read(buf)) {
        Some(Ok(n)) => Some(n),
        Some(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => None,
        Some(Err(e)) => {
            eprintln!("cairn-logger: reading {}: {e}", input.stream.as_str());
            Some(0)
        }
        None => None,
    }
}

fn open_writer(spec: &LoggerSpec, container: &str) -> Option<RotatingWriter> {
    match RotatingWriter::open(&spec.path, spec.rotate) {
        Ok(w) => Some(w),
        Err(e) => {
            eprintln!("cairn-logger: container {container}: {e}");
            None
        }
    }
}

/// Writes one record; while the file cannot be opened the output is dropped (the pipes
/// must still be drained or the container blocks) and opening is retried.
fn write_record(
    writer: &mut Option<RotatingWriter>,
    spec: &LoggerSpec,
    container: &str,
    timestamp: &str,
    stream: Stream,
    tag: Tag,
    content: &[u8],
) {
    if writer.is_none() {
        *writer = open_writer(spec, container);
    }
    if let Some(w) = writer {
        if let Err(e) = w.push(timestamp, stream, tag, content) {
            eprintln!("cairn-logger: container {container}: {e}");
            *writer = None;
        }
    }
}

fn flush(writer: &mut Option<RotatingWriter>) {
    if let Some(w) = writer {
        if let Err(e) = w.flush() {
            eprintln!("cairn-logger: {e}");
            *writer = None;
        }
    }
}
