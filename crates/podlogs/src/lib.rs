//! CRI-format container log files: the `cairn-logger` writer that containerd's shim runs
//! for each container (through a `binary://` log URI), size-based rotation, and the reader
//! and HTTP endpoint behind `kubectl logs`.
//!
//! - [`cri`]: the record format, line splitting and joining.
//! - [`files`]: the log directory layout, rotation, the logger's URI and arguments.
//! - [`reader`]: tail / since / limit / timestamps / follow over an instance's files.
//! - [`server`]: `GET /containerLogs/{ns}/{pod}/{container}` over a [`LogSource`].

pub mod cri;
pub mod files;
pub mod reader;
pub mod server;

pub use files::{
    binary_log_uri, container_log_path, pod_log_dir, LoggerSpec, RotateOptions, RotatingWriter,
};
pub use reader::{read_logs, LogOptions, LogReadError, LogStream, RunningProbe};
pub use server::{
    parse_log_query, router, LocateError, LogLocation, LogQuery, LogQueryError, LogSource,
};
