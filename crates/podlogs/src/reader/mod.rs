//! Reading one container instance's log the way kubelet serves `containerLogs`: partial
//! records joined back into lines, `tailLines` counted across rotated files, `sinceSeconds`
//! / `sinceTime`, `limitBytes` (cut exactly at the limit), `timestamps`, and `follow`
//! through rotations until the container stops.
//!
//! The file work runs on a blocking thread that hands chunks to the returned stream over
//! a small channel, so a slow client slows the reader down instead of filling memory. A
//! follower waits on inotify (on the log directory, so rotations wake it too), falling back
//! to polling when no inotify instance is available.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, FixedOffset, Utc};
use futures::Stream;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use tokio::sync::{mpsc, oneshot};
use tracing::debug;

use crate::cri::{
    format_rfc3339_nano_fixed, parse_record, LineJoiner, LogLine, Stream as OutputStream,
};
use crate::files::{inode, rotated_files};

mod tail;
use tail::*;

/// Answers whether the container whose log is read is still running; a follower stops at
/// the end of the log once it answers false.
pub type RunningProbe = Arc<dyn Fn() -> bool + Send + Sync>;

/// What to read (kubelet's `PodLogOptions`, minus the container).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogOptions {
    pub follow: bool,
    /// Last N lines only (0: none of the existing ones).
    pub tail_lines: Option<i64>,
    /// Prefix each line with its RFC3339Nano timestamp (nine fraction digits).
    pub timestamps: bool,
    pub since_seconds: Option<i64>,
    pub since_time: Option<DateTime<FixedOffset>>,
    /// Stop after exactly this many bytes of output.
    pub limit_bytes: Option<i64>,
    /// Read the previous instance's log (chosen by the caller's `LogSource`).
    pub previous: bool,
}

impl LogOptions {
    /// The oldest timestamp shown: `now - sinceSeconds`, or `sinceTime` when it is later
    /// (kubelet's `NewLogOptions`).
    pub fn since(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let from_seconds = self
            .since_seconds
            .map(|s| now - chrono::Duration::seconds(s));
        let from_time = self.since_time.map(|t| t.with_timezone(&Utc));
        match (from_seconds, from_time) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LogReadError {
    #[error("failed to open log file {path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("failed to read log file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("log reader for {0} stopped before starting")]
    Worker(PathBuf),
}

/// The bytes of a log as served to a client.
pub type LogStream = Pin<Box<dyn Stream<Item = Result<Bytes, LogReadError>> + Send>>;

/// Output is handed over in chunks of about this size (sooner when the log is exhausted).
const CHUNK: usize = 32 * 1024;
/// Blocks read when scanning a file backwards for `tailLines`.
const BACK_BLOCK: u64 = 64 * 1024;
/// How far before the tail boundary to look for the start of the other stream's unfinished
/// line; a longer line is shown from there on.
const EXTEND_LIMIT: u64 = 1024 * 1024;
/// A follower re-checks the container and the client this often when nothing is written.
const FOLLOW_TICK: Duration = Duration::from_millis(250);

/// Opens the log of one container instance (`current` is its `<n>.log`; rotated siblings
/// are read first) and streams it as kubelet would.
pub async fn read_logs(
    current: PathBuf,
    opts: LogOptions,
    running: RunningProbe,
) -> Result<LogStream, LogReadError> {
    let (ready_tx, ready_rx) = oneshot::channel();
    let (tx, rx) = mpsc::channel(4);
    let path = current.clone();
    tokio::task::spawn_blocking(move || {
        let worker = match Worker::start(current, opts, running, tx) {
            Ok(w) => {
                let _ = ready_tx.send(Ok(()));
                w
            }
            Err(e) => {
                let _ = ready_tx.send(Err(e));
                return;
            }
        };
        worker.run();
    });
    match ready_rx.await {
        Ok(Ok(())) => Ok(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(LogReadError::Worker(path)),
    }
}

struct Segment {
    path: PathBuf,
    file: File,
}

/// The rotated files then the current one, opened; missing ones are skipped.
fn open_segments(current: &Path) -> Result<Vec<Segment>, LogReadError> {
    let rotated = rotated_files(current).map_err(|source| LogReadError::Open {
        path: current.to_path_buf(),
        source,
    })?;
    let mut out = Vec::new();
    let mut last_err = None;
    for path in rotated.into_iter().chain([current.to_path_buf()]) {
        match File::open(&path) {
            Ok(file) => out.push(Segment { path, file }),
            Err(e) => last_err = Some((path, e)),
        }
    }
    if out.is_empty() {
        if let Some((path, source)) = last_err {
            return Err(LogReadError::Open { path, source });
        }
    }
    Ok(out)
}

enum Flow {
    Continue,
    Stop,
}

struct Worker {
    current: PathBuf,
    follow: bool,
    timestamps: bool,
    since: Option<DateTime<Utc>>,
    remaining: Option<u64>,
    running: RunningProbe,
    tx: mpsc::Sender<Result<Bytes, LogReadError>>,
    reader: BufReader<File>,
    reading: PathBuf,
    inode: u64,
    joiner: LineJoiner,
    /// The last `tailLines` lines, collected until the first end of the log.
    ring: Option<(VecDeque<LogLine>, usize)>,
    out: Vec<u8>,
}

impl Worker {
    fn start(
        current: PathBuf,
        opts: LogOptions,
        running: RunningProbe,
        tx: mpsc::Sender<Result<Bytes, LogReadError>>,
    ) -> Result<Self, LogReadError> {
        let mut segments = open_segments(&current)?;
        let tail = opts.tail_lines.map(|n| n.max(0) as u64);
        let start = match tail {
            Some(n) => tail_start(&segments, n).map_err(|source| LogReadError::Read {
                path: current.clone(),
                source,
            })?,
            None => Pos {
                segment: 0,
                offset: 0,
            },
        };
        let segment = segments.swap_remove(start.segment);
        let read_err = |source| LogReadError::Read {
            path: segment.path.clone(),
            source,
        };
        let ino = inode(&segment.file).map_err(read_err)?;
        let mut file = segment.file;
        file.seek(SeekFrom::Start(start.offset)).map_err(read_err)?;
        Ok(Worker {
            current,
            follow: opts.follow,
            timestamps: opts.timestamps,
            since: opts.since(Utc::now()),
            remaining: opts.limit_bytes.map(|n| n.max(0) as u64),
            running,
            tx,
            reader: BufReader::with_capacity(64 * 1024, file),
            reading: segment.path,
            inode: ino,
            joiner: LineJoiner::default(),
            ring: tail.map(|n| (VecDeque::new(), n.min(1 << 20) as usize)),
            out: Vec::with_capacity(CHUNK),
        })
    }

    fn run(mut self) {
        let mut record = Vec::new();
        let mut waiter: Option<Waiter> = None;
        let mut final_pass = false;
        loop {
            // Everything written so far.
            loop {
                match self.reader.read_until(b'\n', &mut record) {
                    Ok(0) => break,
                    Ok(_) if record.ends_with(b"\n") => {
                        let flow = self.record(&record[..record.len() - 1]);
                        record.clear();
                        if let Flow::Stop = flow {
                            self.send();
                            return;
                        }
                    }
                    // A record being written: the rest comes with the next read.
                    Ok(_) => break,
                    Err(source) => {
                        let _ = self.tx.blocking_send(Err(LogReadError::Read {
                            path: self.reading.clone(),
                            source,
                        }));
                        return;
                    }
                }
            }
            if self.advance_segment() {
                if !record.is_empty() {
                    debug!(path = %self.reading.display(), "dropping a cut record at the end of a rotated file");
                    record.clear();
                }
                continue;
            }
            let ending = !self.follow || final_pass;
            if ending {
                // A record cut short and unfinished lines end the log as they are, after
                // everything else (and within tailLines).
                let cut = std::mem::take(&mut record);
                if let Flow::Stop = self.finish_lines(&cut) {
                    self.send();
                    return;
                }
            }
            if let Some((lines, _)) = self.ring.take() {
                for line in lines {
                    if let Flow::Stop = self.output(line) {
                        self.send();
                        return;
                    }
                }
            }
            if ending {
                self.send();
                return;
            }
            if !self.send() || self.tx.is_closed() {
                return;
            }
            if !(self.running)() {
                // One more pass picks up what was written before the container stopped.
                final_pass = true;
                continue;
            }
            match &waiter {
                Some(w) => w.wait(FOLLOW_TICK),
                None => {
                    // Read once more after the watch exists: a write just before it is not
                    // announced.
                    waiter = Some(Waiter::new(self.current.parent()));
                }
            }
        }
    }

    /// Handles one record.
    fn record(&mut self, raw: &[u8]) -> Flow {
        match parse_record(raw) {
            Ok(record) => match self.joiner.push(&record) {
                Some(line) => self.line(line),
                None => Flow::Continue,
            },
            Err(e) => {
                debug!(path = %self.reading.display(), error = %e, "skipping a malformed log record");
                Flow::Continue
            }
        }
    }

    fn line(&mut self, line: LogLine) -> Flow {
        if let Some((ring, cap)) = &mut self.ring {
            if *cap > 0 {
                if ring.len() == *cap {
                    ring.pop_front();
                }
                ring.push_back(line);
            }
            return Flow::Continue;
        }
        self.output(line)
    }

    fn output(&mut self, line: LogLine) -> Flow {
        if let Some(since) = self.since {
            if line.timestamp.with_timezone(&Utc) < since {
                return Flow::Continue;
            }
        }
        let mut text = Vec::with_capacity(line.content.len() + 32);
        if self.timestamps {
            text.extend_from_slice(format_rfc3339_nano_fixed(&line.timestamp).as_bytes());
            text.push(b' ');
        }
        text.extend_from_slice(&line.content);
        if line.complete {
            text.push(b'\n');
        }
        if let Some(remaining) = &mut self.remaining {
            if text.len() as u64 >= *remaining {
                self.out.extend_from_slice(&text[..*remaining as usize]);
                *remaining = 0;
                return Flow::Stop;
            }
            *remaining -= text.len() as u64;
        }
        self.out.extend_from_slice(&text);
        if self.out.len() >= CHUNK && !self.send() {
            return Flow::Stop;
        }
        Flow::Continue
    }

    /// Hands the buffered output to the stream; false when the client is gone.
    fn send(&mut self) -> bool {
        if self.out.is_empty() {
            return true;
        }
        let chunk = Bytes::from(std::mem::replace(&mut self.out, Vec::with_capacity(CHUNK)));
        self.tx.blocking_send(Ok(chunk)).is_ok()
    }

    /// End of the log: the record cut short, then the lines left unfinished.
    fn finish_lines(&mut self, cut_record: &[u8]) -> Flow {
        if !cut_record.is_empty() {
            if let Flow::Stop = self.record(cut_record) {
                return Flow::Stop;
            }
        }
        for line in self.joiner.take_unfinished() {
            if let Flow::Stop = self.line(line) {
                return Flow::Stop;
            }
        }
        Flow::Continue
    }

    /// Moves to the file written after the one being read, if it was rotated.
    fn advance_segment(&mut self) -> bool {
        let Ok(rotated) = rotated_files(&self.current) else {
            return false;
        };
        let all: Vec<PathBuf> = rotated.into_iter().chain([self.current.clone()]).collect();
        let here = all.iter().position(|p| {
            std::fs::metadata(p)
                .map(|m| m.ino() == self.inode)
                .unwrap_or(false)
        });
        // Not listed any more: it was the oldest and got pruned, so every file left is newer.
        let next_index = here.map_or(0, |i| i + 1);
        for path in all.iter().skip(next_index) {
            let Ok(file) = File::open(path) else {
                continue;
            };
            let Ok(ino) = inode(&file) else {
                continue;
            };
            if ino == self.inode {
                return false;
            }
            self.reader = BufReader::with_capacity(64 * 1024, file);
            self.reading = path.clone();
            self.inode = ino;
            return true;
        }
        false
    }
}

/// Sleeps until the log directory changes or the timeout passes.
struct Waiter {
    inotify: Option<Inotify>,
}

impl Waiter {
    fn new(dir: Option<&Path>) -> Self {
        let inotify = dir.and_then(|dir| {
            let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).ok()?;
            inotify
                .add_watch(
                    dir,
                    AddWatchFlags::IN_MODIFY
                        | AddWatchFlags::IN_CREATE
                        | AddWatchFlags::IN_MOVED_TO
                        | AddWatchFlags::IN_MOVED_FROM
                        | AddWatchFlags::IN_DELETE,
                )
                .ok()?;
            Some(inotify)
        });
        if inotify.is_none() {
            debug!("no inotify for the log directory; polling");
        }
        Waiter { inotify }
    }

    fn wait(&self, timeout: Duration) {
        match &self.inotify {
            Some(inotify) => {
                let mut fds = [PollFd::new(inotify.as_fd(), PollFlags::POLLIN)];
                let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
                let _ = poll(&mut fds, PollTimeout::from(ms));
                // Drain the queue; the events themselves do not matter.
                while let Ok(events) = inotify.read_events() {
                    if events.is_empty() {
                        break;
                    }
                }
            }
            None => std::thread::sleep(timeout.min(Duration::from_millis(100))),
        }
    }
}

#[cfg(test)]
mod tests;
