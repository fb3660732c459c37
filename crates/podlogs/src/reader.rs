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

/// A position in the list of segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pos {
    segment: usize,
    offset: u64,
}

/// Lines of a file from the last complete one backwards, with their start offsets.
struct BackLines<'a> {
    file: &'a File,
    /// File offset of `buf[0]`.
    pos: u64,
    buf: Vec<u8>,
    trimmed: bool,
}

impl<'a> BackLines<'a> {
    fn new(file: &'a File, len: u64) -> Self {
        BackLines {
            file,
            pos: len,
            buf: Vec::new(),
            trimmed: false,
        }
    }

    fn fill(&mut self) -> std::io::Result<bool> {
        if self.pos == 0 {
            return Ok(false);
        }
        let n = self.pos.min(BACK_BLOCK);
        self.pos -= n;
        let mut block = vec![0u8; n as usize];
        self.file.read_exact_at(&mut block, self.pos)?;
        block.extend_from_slice(&self.buf);
        self.buf = block;
        Ok(true)
    }

    fn next_line(&mut self) -> std::io::Result<Option<(u64, Vec<u8>)>> {
        if !self.trimmed {
            // Bytes after the last newline are a record still being written: not a line yet.
            loop {
                if let Some(i) = self.buf.iter().rposition(|&b| b == b'\n') {
                    self.buf.truncate(i + 1);
                    break;
                }
                self.buf.clear();
                if !self.fill()? {
                    self.trimmed = true;
                    return Ok(None);
                }
            }
            self.trimmed = true;
        }
        loop {
            if self.buf.is_empty() {
                if !self.fill()? {
                    return Ok(None);
                }
                continue;
            }
            let body_end = self.buf.len() - 1;
            match self.buf[..body_end].iter().rposition(|&b| b == b'\n') {
                Some(i) => {
                    let line = self.buf[i + 1..body_end].to_vec();
                    let start = self.pos + i as u64 + 1;
                    self.buf.truncate(i + 1);
                    return Ok(Some((start, line)));
                }
                None if self.pos == 0 => {
                    let line = self.buf[..body_end].to_vec();
                    self.buf.clear();
                    return Ok(Some((0, line)));
                }
                None => {
                    self.fill()?;
                }
            }
        }
    }
}

/// Where to start reading so that the last `n` lines are complete: just after the
/// (n+1)-th last full record, moved back to the start of the other stream's line if that
/// one is still open there.
fn tail_start(segments: &[Segment], n: u64) -> std::io::Result<Pos> {
    let want = n.saturating_add(1);
    let mut count = 0u64;
    let mut boundary = None;
    let mut extended: Option<Pos> = None;
    let mut scanned = 0u64;
    // Streams met so far (from the end): a stream's last record being partial is a line
    // still unfinished, shown last and counted like any other.
    let mut seen = [false; 2];
    for (index, segment) in segments.iter().enumerate().rev() {
        let len = segment.file.metadata()?.len();
        let mut back = BackLines::new(&segment.file, len);
        while let Some((start, line)) = back.next_line()? {
            let Ok(record) = parse_record(&line) else {
                continue;
            };
            let slot = usize::from(record.stream == OutputStream::Stderr);
            let unfinished = record.partial && !seen[slot];
            seen[slot] = true;
            match boundary {
                None => {
                    if unfinished {
                        count += 1;
                    } else if !record.partial {
                        count += 1;
                        if count >= want {
                            let pos = Pos {
                                segment: index,
                                offset: start + line.len() as u64 + 1,
                            };
                            boundary = Some((pos, record.stream));
                        }
                    }
                }
                Some((pos, stream)) => {
                    scanned += line.len() as u64 + 1;
                    if record.stream != stream && !record.partial {
                        return Ok(extended.unwrap_or(pos));
                    }
                    if record.stream != stream {
                        extended = Some(Pos {
                            segment: index,
                            offset: start,
                        });
                    }
                    if scanned > EXTEND_LIMIT {
                        return Ok(extended.unwrap_or(pos));
                    }
                }
            }
        }
    }
    Ok(match boundary {
        None => Pos {
            segment: 0,
            offset: 0,
        },
        Some((pos, _)) => extended.unwrap_or(pos),
    })
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
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use crate::files::rotated_path;
    use futures::StreamExt;
    use std::io::Write;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn not_running() -> RunningProbe {
        Arc::new(|| false)
    }

    async fn read_all(path: &Path, opts: LogOptions) -> String {
        let mut s = read_logs(path.to_path_buf(), opts, not_running())
            .await
            .unwrap();
        let mut out = Vec::new();
        while let Some(chunk) = s.next().await {
            out.extend_from_slice(&chunk.unwrap());
        }
        String::from_utf8(out).unwrap()
    }

    fn rec(sec: u32, stream: &str, tag: &str, content: &str) -> String {
        format!("2024-01-01T00:00:{sec:02}.5Z {stream} {tag} {content}\n")
    }

    fn fixture(dir: &Path) -> PathBuf {
        let path = dir.join("0.log");
        let mut text = String::new();
        text += &rec(1, "stdout", "F", "one");
        text += &rec(2, "stderr", "P", "two-a");
        text += &rec(3, "stdout", "F", "three");
        text += &rec(4, "stderr", "F", "two-b");
        text += "not a record\n";
        text += &rec(5, "stdout", "P", "four-a");
        text += &rec(6, "stdout", "P", "four-b");
        text += &rec(7, "stdout", "F", "four-c");
        text += &rec(8, "stdout", "F", "");
        std::fs::write(&path, text).unwrap();
        path
    }

    #[tokio::test]
    async fn joins_partials_and_skips_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let path = fixture(dir.path());
        assert_eq!(
            read_all(&path, LogOptions::default()).await,
            "one\nthree\ntwo-atwo-b\nfour-afour-bfour-c\n\n"
        );
    }

    #[tokio::test]
    async fn tail_counts_joined_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = fixture(dir.path());
        let tail = |n| LogOptions {
            tail_lines: Some(n),
            ..Default::default()
        };
        assert_eq!(read_all(&path, tail(0)).await, "");
        assert_eq!(read_all(&path, tail(1)).await, "\n");
        assert_eq!(read_all(&path, tail(2)).await, "four-afour-bfour-c\n\n");
        // The stderr line started before "three": its first part is still found.
        assert_eq!(
            read_all(&path, tail(3)).await,
            "two-atwo-b\nfour-afour-bfour-c\n\n"
        );
        assert_eq!(
            read_all(&path, tail(4)).await,
            "three\ntwo-atwo-b\nfour-afour-bfour-c\n\n"
        );
        assert_eq!(
            read_all(&path, tail(100)).await,
            read_all(&path, LogOptions::default()).await
        );
    }

    #[tokio::test]
    async fn timestamps_since_and_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = fixture(dir.path());
        let out = read_all(
            &path,
            LogOptions {
                timestamps: true,
                tail_lines: Some(2),
                ..Default::default()
            },
        )
        .await;
        // A joined line carries its first record's time, with nine fraction digits.
        assert_eq!(
            out,
            "2024-01-01T00:00:05.500000000Z four-afour-bfour-c\n2024-01-01T00:00:08.500000000Z \n"
        );
        let since = LogOptions {
            since_time: Some(DateTime::parse_from_rfc3339("2024-01-01T00:00:03Z").unwrap()),
            ..Default::default()
        };
        // "two" started at 00:02 and is left out with "one".
        assert_eq!(
            read_all(&path, since).await,
            "three\nfour-afour-bfour-c\n\n"
        );
        for limit in [1usize, 4, 5, 9, 14] {
            let out = read_all(
                &path,
                LogOptions {
                    limit_bytes: Some(limit as i64),
                    ..Default::default()
                },
            )
            .await;
            assert_eq!(out, "one\nthree\ntwo-atwo-b\n"[..limit].to_string());
        }
        // sinceSeconds relative to now: everything in the fixture is older.
        let recent = LogOptions {
            since_seconds: Some(60),
            ..Default::default()
        };
        assert_eq!(read_all(&path, recent).await, "");
    }

    #[tokio::test]
    async fn unfinished_lines_end_the_log_without_newline() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.log");
        let text = rec(1, "stdout", "F", "a") + &rec(2, "stdout", "P", "no newline");
        std::fs::write(&path, text + "2024-01-01T00:00:03Z stdout F cut").unwrap();
        // A record without its newline at the end is shown too, as kubelet does.
        assert_eq!(
            read_all(&path, LogOptions::default()).await,
            "a\nno newlinecut\n"
        );
        std::fs::write(
            &path,
            rec(1, "stdout", "F", "a") + &rec(2, "stdout", "P", "open"),
        )
        .unwrap();
        assert_eq!(read_all(&path, LogOptions::default()).await, "a\nopen");
        // The unfinished line is the newest one and counts for tailLines.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(rec(3, "stderr", "F", "b").as_bytes()).unwrap();
        f.write_all(rec(4, "stdout", "P", "-more").as_bytes())
            .unwrap();
        let tail = |n| LogOptions {
            tail_lines: Some(n),
            ..Default::default()
        };
        assert_eq!(read_all(&path, tail(1)).await, "open-more");
        assert_eq!(read_all(&path, tail(2)).await, "b\nopen-more");
        assert_eq!(read_all(&path, tail(3)).await, "a\nb\nopen-more");
    }

    #[tokio::test]
    async fn reads_across_rotated_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("2.log");
        let t = Utc::now();
        std::fs::write(
            rotated_path(&path, t - chrono::Duration::seconds(2)),
            rec(1, "stdout", "F", "r1") + &rec(2, "stdout", "P", "long-"),
        )
        .unwrap();
        std::fs::write(
            rotated_path(&path, t - chrono::Duration::seconds(1)),
            rec(3, "stdout", "F", "line") + &rec(4, "stderr", "F", "r2"),
        )
        .unwrap();
        std::fs::write(&path, rec(5, "stdout", "F", "cur")).unwrap();
        // Another instance's files are not read.
        std::fs::write(dir.path().join("1.log"), rec(0, "stdout", "F", "old")).unwrap();
        assert_eq!(
            read_all(&path, LogOptions::default()).await,
            "r1\nlong-line\nr2\ncur\n"
        );
        let tail = |n| LogOptions {
            tail_lines: Some(n),
            ..Default::default()
        };
        assert_eq!(read_all(&path, tail(3)).await, "long-line\nr2\ncur\n");
        assert_eq!(read_all(&path, tail(2)).await, "r2\ncur\n");
        // Only rotated files left (the current one not yet created).
        std::fs::remove_file(&path).unwrap();
        assert_eq!(read_all(&path, tail(1)).await, "r2\n");
    }

    #[tokio::test]
    async fn missing_log_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_logs(
            dir.path().join("0.log"),
            LogOptions::default(),
            not_running(),
        )
        .await;
        assert!(matches!(err, Err(LogReadError::Open { .. })));
    }

    #[tokio::test]
    async fn follow_sees_appends_and_rotation_and_stops_with_the_container() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.log");
        std::fs::write(&path, rec(1, "stdout", "F", "first")).unwrap();
        let running = Arc::new(AtomicBool::new(true));
        let probe = {
            let running = Arc::clone(&running);
            Arc::new(move || running.load(Ordering::SeqCst)) as RunningProbe
        };
        let opts = LogOptions {
            follow: true,
            tail_lines: Some(1),
            ..Default::default()
        };
        let mut stream = read_logs(path.clone(), opts, probe).await.unwrap();
        let mut seen = String::new();
        async fn until(stream: &mut LogStream, seen: &mut String, want: &str) {
            while !seen.contains(want) {
                // Bounded so that a follower that misses a write fails instead of hanging.
                let chunk = tokio::time::timeout(Duration::from_secs(30), stream.next())
                    .await
                    .unwrap_or_else(|_| panic!("{want:?} never came; got {seen:?}"))
                    .unwrap()
                    .unwrap();
                seen.push_str(std::str::from_utf8(&chunk).unwrap());
            }
        }
        until(&mut stream, &mut seen, "first\n").await;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(rec(2, "stdout", "P", "sec").as_bytes())
            .unwrap();
        f.write_all(rec(3, "stdout", "F", "ond").as_bytes())
            .unwrap();
        until(&mut stream, &mut seen, "second\n").await;
        // Rotate: more lines in the old file, then a new file.
        f.write_all(rec(4, "stdout", "F", "third").as_bytes())
            .unwrap();
        drop(f);
        std::fs::rename(&path, rotated_path(&path, Utc::now())).unwrap();
        std::fs::write(&path, rec(5, "stderr", "F", "fourth")).unwrap();
        until(&mut stream, &mut seen, "fourth\n").await;
        assert_eq!(seen, "first\nsecond\nthird\nfourth\n");
        // The container stops after a last line: it is shown, then the stream ends.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(rec(6, "stdout", "F", "last").as_bytes())
            .unwrap();
        running.store(false, Ordering::SeqCst);
        while let Some(chunk) = stream.next().await {
            seen.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
        }
        assert_eq!(seen, "first\nsecond\nthird\nfourth\nlast\n");
    }

    #[tokio::test]
    async fn follower_stops_when_the_client_goes_away() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.log");
        std::fs::write(&path, rec(1, "stdout", "F", "x")).unwrap();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        // The probe reports each call; once the stream is dropped, calls must stop.
        let probe: RunningProbe = Arc::new(move || {
            let _ = done_tx.send(());
            true
        });
        let opts = LogOptions {
            follow: true,
            ..Default::default()
        };
        let mut stream = read_logs(path, opts, probe).await.unwrap();
        assert_eq!(&stream.next().await.unwrap().unwrap()[..], b"x\n");
        done_rx.recv().unwrap();
        drop(stream);
        // The worker notices the closed channel and exits, dropping the probe (and the sender).
        loop {
            match done_rx.recv_timeout(Duration::from_secs(30)) {
                Ok(()) => continue,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    panic!("the follower kept running after its client left")
                }
            }
        }
    }
}
