//! Where log files live, how they rotate, and the `binary://` URI that makes containerd's
//! shim start `cairn-logger` for a container.
//!
//! Layout: `<root>/<ns>_<pod>_<uid>/<container>/<restartCount>.log`. Rotation renames the
//! current file to `<restartCount>.log.<YYYYMMDD-HHMMSS.nnnnnnnnn>` (UTC; kubelet's
//! container log manager uses the same name without the nanoseconds), so the rotated files
//! of one instance sort oldest first by name. At most `max_files` files exist per instance,
//! the current one included; the oldest rotated files are deleted first. Rotated files are
//! not compressed.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

use percent_encoding::{percent_decode_str, percent_encode, AsciiSet, NON_ALPHANUMERIC};

use crate::cri::{append_record, record_len, Stream, Tag};

/// kubelet's `--container-log-max-size` default (10Mi).
pub const DEFAULT_MAX_SIZE: u64 = 10 * 1024 * 1024;
/// kubelet's `--container-log-max-files` default.
pub const DEFAULT_MAX_FILES: u32 = 5;

/// Size-based rotation of one container instance's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RotateOptions {
    /// Rotate before a record would take the file past this many bytes; 0 never rotates.
    pub max_size: u64,
    /// Files kept per instance, the current one included (0 counts as 1).
    pub max_files: u32,
}

impl Default for RotateOptions {
    fn default() -> Self {
        RotateOptions {
            max_size: DEFAULT_MAX_SIZE,
            max_files: DEFAULT_MAX_FILES,
        }
    }
}

/// `<root>/<ns>_<pod>_<uid>`: the directory of all of a pod's container logs.
pub fn pod_log_dir(root: &Path, namespace: &str, pod: &str, uid: &str) -> PathBuf {
    root.join(format!("{namespace}_{pod}_{uid}"))
}

/// `<root>/<ns>_<pod>_<uid>/<container>/<restartCount>.log`.
pub fn container_log_path(
    root: &Path,
    namespace: &str,
    pod: &str,
    uid: &str,
    container: &str,
    restart_count: u32,
) -> PathBuf {
    pod_log_dir(root, namespace, pod, uid)
        .join(container)
        .join(format!("{restart_count}.log"))
}

#[derive(Debug, thiserror::Error)]
pub enum LogFileError {
    #[error("creating log directory {path}: {source}")]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("opening log file {path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("writing log file {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("rotating log file {path} to {rotated}: {source}")]
    Rotate {
        path: PathBuf,
        rotated: PathBuf,
        source: std::io::Error,
    },
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SpecError {
    #[error("logger spec {0:?} lacks path=")]
    NoPath(String),
    #[error("logger spec {spec:?}: bad {key} value {value:?}")]
    BadValue {
        spec: String,
        key: String,
        value: String,
    },
    #[error("logger spec {spec:?}: unknown key {key:?}")]
    UnknownKey { spec: String, key: String },
    #[error("logger spec path {0:?} is not absolute")]
    RelativePath(String),
}

/// What `cairn-logger` is told to do: the single argument it receives.
///
/// Text form: `max-size=<bytes>,max-files=<n>,path=<absolute path>`; `path=` comes last and
/// runs to the end, so a path may contain any character.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggerSpec {
    pub path: PathBuf,
    pub rotate: RotateOptions,
}

impl LoggerSpec {
    pub fn to_arg(&self) -> OsString {
        let mut arg = OsString::from(format!(
            "max-size={},max-files={},path=",
            self.rotate.max_size, self.rotate.max_files
        ));
        arg.push(self.path.as_os_str());
        arg
    }

    pub fn parse(spec: &OsStr) -> Result<Self, SpecError> {
        let bytes = spec.as_bytes();
        let lossy = || spec.to_string_lossy().into_owned();
        let mut rotate = RotateOptions::default();
        let mut rest = bytes;
        loop {
            if let Some(path) = rest.strip_prefix(b"path=") {
                if !path.starts_with(b"/") {
                    return Err(SpecError::RelativePath(
                        String::from_utf8_lossy(path).into_owned(),
                    ));
                }
                return Ok(LoggerSpec {
                    path: PathBuf::from(OsStr::from_bytes(path)),
                    rotate,
                });
            }
            let comma = rest
                .iter()
                .position(|&b| b == b',')
                .ok_or_else(|| SpecError::NoPath(lossy()))?;
            let field = String::from_utf8_lossy(&rest[..comma]).into_owned();
            let tail = &rest[comma + 1..];
            let (key, value) = field.split_once('=').unwrap_or((&field, ""));
            let bad = || SpecError::BadValue {
                spec: lossy(),
                key: key.to_string(),
                value: value.to_string(),
            };
            match key {
                "max-size" => rotate.max_size = value.parse().map_err(|_| bad())?,
                // 0 keeps only the current file, like 1.
                "max-files" => rotate.max_files = value.parse().map_err(|_| bad())?,
                other => {
                    return Err(SpecError::UnknownKey {
                        spec: lossy(),
                        key: other.to_string(),
                    })
                }
            }
            rest = tail;
        }
    }
}

/// Characters left as they are in the URI's path: unreserved ones and `/`.
const PATH_KEEP: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'/')
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');
/// In the query everything but unreserved characters is escaped, so Go's `url.ParseQuery`
/// sees one key (no `&`, `=`, `;` or `+` survive) and unescapes it to the spec.
const QUERY_KEEP: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The stdout/stderr URI to give a containerd task so that its shim runs `logger` with the
/// container's output pipes, writing `log_path` with `opts` rotation.
///
/// The shim turns each query key into an argument followed by its first value (Go map order,
/// hence a single key): here `[<spec>, ""]`, see [`LoggerSpec`].
pub fn binary_log_uri(logger: &Path, log_path: &Path, opts: &RotateOptions) -> String {
    let spec = LoggerSpec {
        path: log_path.to_path_buf(),
        rotate: *opts,
    }
    .to_arg();
    format!(
        "binary://{}?{}",
        percent_encode(logger.as_os_str().as_bytes(), PATH_KEEP),
        percent_encode(spec.as_bytes(), QUERY_KEEP)
    )
}

/// Decodes the spec from a URI made by [`binary_log_uri`] (what the shim would pass).
pub fn spec_from_uri(uri: &str) -> Result<LoggerSpec, SpecError> {
    let query = uri.split_once('?').map(|(_, q)| q).unwrap_or("");
    let decoded: Vec<u8> = percent_decode_str(query).collect();
    LoggerSpec::parse(OsStr::from_bytes(&decoded))
}

/// Name of the rotated file for `current` rotated at `at`.
pub fn rotated_path(current: &Path, at: DateTime<Utc>) -> PathBuf {
    let name = current
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    current.with_file_name(format!("{name}.{}", at.format("%Y%m%d-%H%M%S.%9f")))
}

fn is_rotation_suffix(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    match b.len() {
        15 => digits(0..8) && b[8] == b'-' && digits(9..15),
        25 => digits(0..8) && b[8] == b'-' && digits(9..15) && b[15] == b'.' && digits(16..25),
        _ => false,
    }
}

/// The rotated files of `current`, oldest first.
pub fn rotated_files(current: &Path) -> std::io::Result<Vec<PathBuf>> {
    let (Some(dir), Some(name)) = (current.parent(), current.file_name()) else {
        return Ok(Vec::new());
    };
    let prefix = format!("{}.", name.to_string_lossy());
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry?;
        let fname = entry.file_name();
        let fname = fname.to_string_lossy();
        if let Some(suffix) = fname.strip_prefix(&prefix) {
            if is_rotation_suffix(suffix) {
                out.push(entry.path());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Appends CRI records to one instance's log file, rotating by size.
#[derive(Debug)]
pub struct RotatingWriter {
    path: PathBuf,
    opts: RotateOptions,
    file: File,
    /// Bytes in the file (excluding `buf`).
    size: u64,
    buf: Vec<u8>,
}

/// Records are written out once this much is buffered (and at every [`RotatingWriter::flush`]).
const WRITE_BUFFER: usize = 64 * 1024;

impl RotatingWriter {
    /// Opens (creating the directories and the file) `path` for appending.
    pub fn open(path: &Path, opts: RotateOptions) -> Result<Self, LogFileError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| LogFileError::CreateDir {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let file = open_append(path)?;
        let size = file
            .metadata()
            .map(|m| m.len())
            .map_err(|source| LogFileError::Open {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(RotatingWriter {
            path: path.to_path_buf(),
            opts,
            file,
            size,
            buf: Vec::with_capacity(WRITE_BUFFER),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Queues one record, rotating first when it would take the file past `max_size`.
    pub fn push(
        &mut self,
        timestamp: &str,
        stream: Stream,
        tag: Tag,
        content: &[u8],
    ) -> Result<(), LogFileError> {
        let len = record_len(timestamp, stream, content) as u64;
        let used = self.size + self.buf.len() as u64;
        if self.opts.max_size > 0 && used > 0 && used + len > self.opts.max_size {
            self.flush()?;
            self.rotate()?;
        }
        append_record(&mut self.buf, timestamp, stream, tag, content);
        if self.buf.len() >= WRITE_BUFFER {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the queued records to the file.
    pub fn flush(&mut self) -> Result<(), LogFileError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.file
            .write_all(&self.buf)
            .map_err(|source| LogFileError::Write {
                path: self.path.clone(),
                source,
            })?;
        self.size += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    fn rotate(&mut self) -> Result<(), LogFileError> {
        let mut at = Utc::now();
        let mut rotated = rotated_path(&self.path, at);
        while rotated.exists() {
            at += chrono::Duration::nanoseconds(1);
            rotated = rotated_path(&self.path, at);
        }
        std::fs::rename(&self.path, &rotated).map_err(|source| LogFileError::Rotate {
            path: self.path.clone(),
            rotated: rotated.clone(),
            source,
        })?;
        self.file = open_append(&self.path)?;
        self.size = 0;
        let keep = self.opts.max_files.saturating_sub(1) as usize;
        match rotated_files(&self.path) {
            Ok(files) if files.len() > keep => {
                for old in &files[..files.len() - keep] {
                    if let Err(e) = std::fs::remove_file(old) {
                        tracing::warn!(path = %old.display(), error = %e, "removing old rotated log");
                    }
                }
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "listing rotated logs")
            }
        }
        Ok(())
    }
}

fn open_append(path: &Path) -> Result<File, LogFileError> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|source| LogFileError::Open {
            path: path.to_path_buf(),
            source,
        })
}

/// Inode of an open file, to recognise it among renamed ones.
pub(crate) fn inode(file: &File) -> std::io::Result<u64> {
    Ok(file.metadata()?.ino())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn layout_is_kubelets() {
        let p = container_log_path(Path::new("/var/log/pods"), "ns", "web", "u-1", "app", 3);
        assert_eq!(p, Path::new("/var/log/pods/ns_web_u-1/app/3.log"));
    }

    #[test]
    fn uri_round_trips_through_one_query_key() {
        let opts = RotateOptions {
            max_size: 1234,
            max_files: 3,
        };
        let log = Path::new("/var/log/pods/ns_p_u/c a&b=c;d+e%f/0.log");
        let uri = binary_log_uri(Path::new("/usr/lib/cairn/cairn-logger"), log, &opts);
        assert!(uri.starts_with("binary:///usr/lib/cairn/cairn-logger?max-size%3D1234"));
        let query = uri.split_once('?').unwrap().1;
        // Nothing Go's query parser splits on or rewrites is left unescaped.
        assert!(!query.contains(['&', '=', ';', '+', ' ', '/']));
        let spec = spec_from_uri(&uri).unwrap();
        assert_eq!(spec.path, log);
        assert_eq!(spec.rotate, opts);
    }

    #[test]
    fn spec_errors() {
        assert!(matches!(
            LoggerSpec::parse(OsStr::new("max-size=1")),
            Err(SpecError::NoPath(_))
        ));
        assert!(matches!(
            LoggerSpec::parse(OsStr::new("max-size=x,path=/a")),
            Err(SpecError::BadValue { .. })
        ));
        assert!(matches!(
            LoggerSpec::parse(OsStr::new("max-files=-1,path=/a")),
            Err(SpecError::BadValue { .. })
        ));
        assert!(matches!(
            LoggerSpec::parse(OsStr::new("colour=red,path=/a")),
            Err(SpecError::UnknownKey { .. })
        ));
        assert!(matches!(
            LoggerSpec::parse(OsStr::new("path=a")),
            Err(SpecError::RelativePath(_))
        ));
        // A path may contain commas and '='.
        let s = LoggerSpec::parse(OsStr::new("max-files=2,path=/a,b=c")).unwrap();
        assert_eq!(s.path, Path::new("/a,b=c"));
        assert_eq!(s.rotate.max_files, 2);
        assert_eq!(s.rotate.max_size, DEFAULT_MAX_SIZE);
    }

    #[test]
    fn rotated_names_sort_by_time_and_are_recognised() {
        let dir = tempfile::tempdir().unwrap();
        let cur = dir.path().join("0.log");
        let t1 = Utc.with_ymd_and_hms(2024, 1, 2, 3, 4, 5).unwrap();
        let t2 = t1 + chrono::Duration::nanoseconds(5);
        let t3 = Utc.with_ymd_and_hms(2024, 1, 2, 13, 0, 0).unwrap();
        for t in [t3, t1, t2] {
            std::fs::write(rotated_path(&cur, t), "").unwrap();
        }
        std::fs::write(dir.path().join("0.log.20240101-000000"), "").unwrap(); // kubelet-style
        std::fs::write(dir.path().join("0.log.20240101-000000.gz"), "").unwrap(); // ignored
        std::fs::write(dir.path().join("1.log.20240101-000000"), "").unwrap(); // other instance
        let names: Vec<String> = rotated_files(&cur)
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            vec![
                "0.log.20240101-000000",
                "0.log.20240102-030405.000000000",
                "0.log.20240102-030405.000000005",
                "0.log.20240102-130000.000000000",
            ]
        );
    }

    #[test]
    fn writer_rotates_and_prunes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c/0.log");
        let opts = RotateOptions {
            max_size: 100,
            max_files: 3,
        };
        let mut w = RotatingWriter::open(&path, opts).unwrap();
        let ts = "2024-01-01T00:00:00Z";
        // Each record: 20 + 1 + 6 + 1 + 1 + 1 + 10 + 1 = 41 bytes: two fit in 100.
        for i in 0..9 {
            w.push(
                ts,
                Stream::Stdout,
                Tag::Full,
                format!("line-{i:05}").as_bytes(),
            )
            .unwrap();
        }
        w.flush().unwrap();
        let rotated = rotated_files(&path).unwrap();
        assert_eq!(rotated.len(), 2, "max_files 3 keeps 2 rotated files");
        let current = std::fs::read_to_string(&path).unwrap();
        assert_eq!(current, format!("{ts} stdout F line-00008\n"));
        let newest = std::fs::read_to_string(&rotated[1]).unwrap();
        assert_eq!(
            newest,
            format!("{ts} stdout F line-00006\n{ts} stdout F line-00007\n")
        );
        for f in rotated.iter().chain([&path]) {
            assert!(std::fs::metadata(f).unwrap().len() <= 100);
        }
        // Reopening appends and counts what is there.
        drop(w);
        let mut w = RotatingWriter::open(&path, opts).unwrap();
        w.push(ts, Stream::Stderr, Tag::Partial, b"x").unwrap();
        w.flush().unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("{ts} stdout F line-00008\n{ts} stderr P x\n")
        );
    }

    #[test]
    fn one_file_or_none_keeps_only_the_current_file() {
        for max_files in [0, 1] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("0.log");
            let opts = RotateOptions {
                max_size: 60,
                max_files,
            };
            let mut w = RotatingWriter::open(&path, opts).unwrap();
            for i in 0..5 {
                w.push(
                    "2024-01-01T00:00:00Z",
                    Stream::Stdout,
                    Tag::Full,
                    format!("{i}").as_bytes(),
                )
                .unwrap();
            }
            w.flush().unwrap();
            assert!(rotated_files(&path).unwrap().is_empty());
            assert_eq!(
                std::fs::read_to_string(&path).unwrap(),
                "2024-01-01T00:00:00Z stdout F 4\n"
            );
        }
    }
}
