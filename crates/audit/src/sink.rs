//! Where events go. [`FileSink`] is upstream's log backend with lumberjack's rotation:
//! JSON lines appended to `--audit-log-path`, which at `--audit-log-maxsize` MB is
//! renamed to `<name>-<UTC time>.<ext>` and started anew; backups past
//! `--audit-log-maxbackup` or older than `--audit-log-maxage` days are deleted.
//!
//! Requests only queue an event: one writer thread owns the file. A full queue drops
//! the event and says so, as upstream's batching backend does, rather than stall
//! every request behind the disk.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use std::sync::Mutex;
use tracing::warn;

use crate::event::Event;

/// Events waiting for the writer (upstream's batch buffer size).
const QUEUE: usize = 10_000;
/// How long the writer lets events gather between batches while they keep coming: the
/// log trails the requests by at most this much more.
const BATCH_NAP: Duration = Duration::from_millis(5);
/// lumberjack's size when none is set.
const DEFAULT_MAX_BYTES: u64 = 100 * 1024 * 1024;
const BACKUP_TIME_FORMAT: &str = "%Y-%m-%dT%H-%M-%S%.3f";

/// Somewhere events are written.
pub trait Sink: Send + Sync {
    fn emit(&self, event: &Event);
}

/// The `--audit-log-*` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSettings {
    /// `-` writes to standard output.
    pub path: PathBuf,
    /// Rotate past this many bytes (0: lumberjack's 100 MB).
    pub max_bytes: u64,
    /// Backups kept (0: all).
    pub max_backups: usize,
    /// Days a backup is kept (0: forever).
    pub max_age_days: u32,
}

#[derive(Debug, thiserror::Error)]
#[error("audit log {}: {source}", path.display())]
pub struct SinkError {
    pub path: PathBuf,
    pub source: std::io::Error,
}

/// The file sink: a queue in front of a writer thread.
pub struct FileSink {
    queue: SyncSender<Vec<u8>>,
    dropped: AtomicU64,
}

impl FileSink {
    /// Opens (creating, `0600`) the log and starts its writer.
    pub fn open(settings: LogSettings) -> Result<FileSink, SinkError> {
        let mut writer = RotatingWriter::open(settings)?;
        let (queue, rx) = mpsc::sync_channel(QUEUE);
        std::thread::Builder::new()
            .name("audit-log".into())
            .spawn(move || writer.run(rx))
            .map_err(|source| SinkError {
                path: PathBuf::from("(starting its writer thread)"),
                source,
            })?;
        Ok(FileSink {
            queue,
            dropped: AtomicU64::new(0),
        })
    }
}

impl Sink for FileSink {
    fn emit(&self, event: &Event) {
        match self.queue.try_send(event.to_line()) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                let n = self.dropped.fetch_add(1, Ordering::Relaxed);
                if n.is_multiple_of(1000) {
                    warn!(dropped = n + 1, "audit log queue full: events dropped");
                }
            }
            Err(TrySendError::Disconnected(_)) => {
                warn!("audit log writer stopped: event dropped");
            }
        }
    }
}

enum Output {
    Stdout,
    File { file: BufWriter<File>, written: u64 },
}

/// The writer thread's side: the open file and its rotation.
struct RotatingWriter {
    settings: LogSettings,
    out: Output,
    /// The last write failed (its warning was given).
    failing: bool,
}

fn open_log(path: &Path) -> Result<(File, u64), SinkError> {
    let err = |source| SinkError {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .map_err(err)?;
    let written = file.metadata().map_err(err)?.len();
    Ok((file, written))
}

impl RotatingWriter {
    fn open(settings: LogSettings) -> Result<RotatingWriter, SinkError> {
        let out = if settings.path.as_os_str() == "-" {
            Output::Stdout
        } else {
            let (file, written) = open_log(&settings.path)?;
            Output::File {
                file: BufWriter::new(file),
                written,
            }
        };
        Ok(RotatingWriter {
            settings,
            out,
            failing: false,
        })
    }

    fn max_bytes(&self) -> u64 {
        match self.settings.max_bytes {
            0 => DEFAULT_MAX_BYTES,
            n => n,
        }
    }

    /// Writes every queued line, flushing whenever the queue runs dry. After each batch
    /// the writer naps instead of waiting on the queue, and waits on it only once a nap
    /// brought nothing: under load a request queues its event without waking the
    /// writer (a futex call and a file write per event when it waited on every one).
    fn run(&mut self, rx: Receiver<Vec<u8>>) {
        while let Ok(line) = rx.recv() {
            self.write_line(&line);
            loop {
                while let Ok(line) = rx.try_recv() {
                    self.write_line(&line);
                }
                self.flush();
                std::thread::sleep(BATCH_NAP);
                match rx.try_recv() {
                    Ok(line) => self.write_line(&line),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => return,
                }
            }
        }
        self.flush();
    }

    fn flush(&mut self) {
        let flushed = match &mut self.out {
            Output::Stdout => std::io::stdout().lock().flush(),
            Output::File { file, .. } => file.flush(),
        };
        if let Err(e) = flushed {
            self.warn_once(&e);
        }
    }

    /// One warning per run of failures, not one per event.
    fn warn_once(&mut self, e: &std::io::Error) {
        if !self.failing {
            warn!(path = %self.settings.path.display(), error = %e, "writing the audit log");
        }
        self.failing = true;
    }

    fn write_line(&mut self, line: &[u8]) {
        match self.try_write(line) {
            Ok(()) => self.failing = false,
            Err(e) => self.warn_once(&e),
        }
    }

    fn try_write(&mut self, line: &[u8]) -> std::io::Result<()> {
        let max = self.max_bytes();
        if let Output::File { written, .. } = &self.out {
            if *written > 0 && *written + line.len() as u64 > max {
                self.rotate()?;
            }
        }
        match &mut self.out {
            Output::Stdout => std::io::stdout().lock().write_all(line),
            Output::File { file, written } => {
                file.write_all(line)?;
                *written += line.len() as u64;
                Ok(())
            }
        }
    }

    /// Renames the full log to its backup name, opens a new one, prunes backups. A log
    /// someone moved or deleted is simply started anew (lumberjack's behaviour).
    fn rotate(&mut self) -> std::io::Result<()> {
        if let Output::File { file, .. } = &mut self.out {
            file.flush()?;
        }
        let path = self.settings.path.clone();
        let backup = backup_name(&path, chrono::Utc::now());
        match std::fs::rename(&path, &backup) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let (file, written) = open_log(&path).map_err(|e| e.source)?;
        self.out = Output::File {
            file: BufWriter::new(file),
            written,
        };
        prune_backups(&self.settings, SystemTime::now());
        Ok(())
    }
}

/// `<dir>/<stem>-<time>.<ext>` (lumberjack's backup name).
pub fn backup_name(path: &Path, at: chrono::DateTime<chrono::Utc>) -> PathBuf {
    let (stem, ext) = stem_and_ext(path);
    let stamp = at.format(BACKUP_TIME_FORMAT);
    path.with_file_name(format!("{stem}-{stamp}{ext}"))
}

fn stem_and_ext(path: &Path) -> (String, String) {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = path
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    (stem, ext)
}

/// The backups of `path`, newest first, with the time in their names.
pub fn backups(path: &Path) -> Vec<(PathBuf, chrono::NaiveDateTime)> {
    let (stem, ext) = stem_and_ext(path);
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => d.to_path_buf(),
        None => PathBuf::from("."),
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let prefix = format!("{stem}-");
    let mut found: Vec<_> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let stamp = name.strip_prefix(&prefix)?.strip_suffix(ext.as_str())?;
            let at = chrono::NaiveDateTime::parse_from_str(stamp, BACKUP_TIME_FORMAT).ok()?;
            Some((e.path(), at))
        })
        .collect();
    found.sort_by_key(|f| std::cmp::Reverse(f.1));
    found
}

fn prune_backups(settings: &LogSettings, now: SystemTime) {
    let max_age = Duration::from_secs(u64::from(settings.max_age_days) * 86_400);
    // An age past the epoch keeps everything.
    let cutoff = now
        .checked_sub(max_age)
        .map(|t| chrono::DateTime::<chrono::Utc>::from(t).naive_utc())
        .unwrap_or_default();
    for (i, (path, at)) in backups(&settings.path).into_iter().enumerate() {
        let too_many = settings.max_backups > 0 && i >= settings.max_backups;
        let too_old = settings.max_age_days > 0 && at < cutoff;
        if too_many || too_old {
            if let Err(e) = std::fs::remove_file(&path) {
                warn!(path = %path.display(), error = %e, "removing an old audit log");
            }
        }
    }
}

/// Keeps events in memory: the fake for tests.
#[derive(Default, Clone)]
pub struct MemorySink(pub Arc<Mutex<Vec<Event>>>);

impl MemorySink {
    pub fn events(&self) -> Vec<Event> {
        self.0.lock().map(|e| e.clone()).unwrap_or_default()
    }
}

impl Sink for MemorySink {
    fn emit(&self, event: &Event) {
        if let Ok(mut events) = self.0.lock() {
            events.push(event.clone());
        }
    }
}

#[cfg(test)]
mod tests;
