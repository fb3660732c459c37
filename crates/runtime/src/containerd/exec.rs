//! Exec in a running container. `exec_sync` (probes, hooks): a streamed exec read to
//! its end, with a timeout.
//! Streaming exec (`kubectl exec`): the process's stdio through FIFOs the shim opens, a
//! terminal when asked, and a background task that reaps the process (DeleteProcess, FIFO
//! directory) whether or not anyone waits for its exit, so no exec is left in the shim.

use std::path::{Path, PathBuf};
use std::time::Duration;

use containerd_client::services::v1::{
    CloseIoRequest, DeleteProcessRequest, ExecProcessRequest, KillRequest, ResizePtyRequest,
    StartRequest, WaitRequest,
};
use nix::sys::stat::Mode;
use prost_types::Any;
use serde_json::{json, Value};
use tokio::net::unix::pipe;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tracing::{debug, warn};

use super::{grpc, new_id, ContainerdRuntime, PROCESS_TYPE_URL};
use crate::{spec, ExecResult, ExecStreamRequest, ExecStreams, RuntimeError, StreamReader};

/// The FIFOs of one exec, in `<state>/exec/<exec-id>/`.
struct Fifos {
    dir: PathBuf,
    stdin: Option<PathBuf>,
    stdout: Option<PathBuf>,
    stderr: Option<PathBuf>,
}

fn io_error(what: String) -> impl FnOnce(std::io::Error) -> RuntimeError {
    move |source| RuntimeError::Io { what, source }
}

impl Fifos {
    fn create(dir: PathBuf, request: &ExecStreamRequest) -> Result<Self, RuntimeError> {
        std::fs::create_dir_all(&dir).map_err(io_error(format!("creating {}", dir.display())))?;
        let make = |wanted: bool, name: &str| -> Result<Option<PathBuf>, RuntimeError> {
            if !wanted {
                return Ok(None);
            }
            let path = dir.join(name);
            nix::unistd::mkfifo(&path, Mode::from_bits_truncate(0o600)).map_err(|e| {
                RuntimeError::Io {
                    what: format!("mkfifo {}", path.display()),
                    source: e.into(),
                }
            })?;
            Ok(Some(path))
        };
        Ok(Fifos {
            stdin: make(request.stdin, "stdin")?,
            // The shim opens every output path it is given and refuses an empty one next
            // to a set one ("opening file \"\" failed"); as containerd's CRI, make both
            // (stderr is the terminal with a tty) and discard what the client did not ask for.
            stdout: make(true, "stdout")?,
            stderr: make(!request.tty, "stderr")?,
            dir,
        })
    }

    /// stdin, stdout, stderr as the shim takes them (a path, or empty for none).
    fn uris(&self) -> [String; 3] {
        let uri = |p: &Option<PathBuf>| {
            p.as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        };
        [uri(&self.stdin), uri(&self.stdout), uri(&self.stderr)]
    }

    /// Wakes readers still blocked in `open` (the shim never opened the write end).
    fn unblock(&self) {
        for path in [&self.stdout, &self.stderr].into_iter().flatten() {
            // A failed open means nobody is waiting on this FIFO any more.
            let _ = pipe::OpenOptions::new().open_sender(path);
        }
    }

    fn remove(&self) {
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            debug!(dir = %self.dir.display(), error = %e, "removing exec FIFOs");
        }
    }
}

/// Opens the read end of `path` on a blocking thread: `open` returns once the shim opens
/// the write end, and reads then see EOF when the process's side closes.
fn open_reader(path: &Path) -> JoinHandle<Result<StreamReader, RuntimeError>> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let file = std::fs::File::open(&path)
            .map_err(io_error(format!("opening FIFO {}", path.display())))?;
        let receiver = pipe::Receiver::from_file(file)
            .map_err(io_error(format!("FIFO {}", path.display())))?;
        Ok(Box::new(receiver) as StreamReader)
    })
}

async fn join_reader(
    handle: Option<JoinHandle<Result<StreamReader, RuntimeError>>>,
) -> Result<Option<StreamReader>, RuntimeError> {
    match handle {
        None => Ok(None),
        Some(h) => h
            .await
            .map_err(|e| RuntimeError::Io {
                what: "opening exec FIFO".into(),
                source: std::io::Error::other(e.to_string()),
            })?
            .map(Some),
    }
}

/// A stream read to its end, its first [`crate::EXEC_OUTPUT_LIMIT`] bytes kept (the rest
/// is read too, so the process never blocks on a full pipe).
async fn read_limited(reader: Option<StreamReader>) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let Some(mut reader) = reader else {
        return Vec::new();
    };
    let mut kept = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => return kept,
            Ok(n) => {
                let room = crate::EXEC_OUTPUT_LIMIT.saturating_sub(kept.len());
                kept.extend_from_slice(&chunk[..n.min(room)]);
            }
        }
    }
}

/// Reads and discards output nobody asked for, so the process never blocks on it.
fn drain(reader: Option<StreamReader>) {
    if let Some(mut r) = reader {
        tokio::spawn(async move {
            // Discarded output: a read error only ends the draining.
            let _ = tokio::io::copy(&mut r, &mut tokio::io::sink()).await;
        });
    }
}

fn exec_process_spec(container_spec: &Value, request: &ExecStreamRequest) -> Value {
    let mut process = spec::exec_process(container_spec, &request.command);
    process["terminal"] = json!(request.tty);
    if request.tty {
        // As containerd's CRI plugin: a terminal without TERM leaves most shells dumb.
        let env = process["env"].as_array().cloned().unwrap_or_default();
        if !env
            .iter()
            .any(|e| e.as_str().is_some_and(|s| s.starts_with("TERM=")))
        {
            let mut env = env;
            env.push(json!("TERM=xterm"));
            process["env"] = json!(env);
        }
    }
    process
}

impl ContainerdRuntime {
    pub(super) async fn exec_stream_impl(
        &self,
        id: &str,
        request: &ExecStreamRequest,
    ) -> Result<ExecStreams, RuntimeError> {
        let container_spec = self.container_spec(id).await?;
        let exec_id = format!("exec-{}", &new_id()[..12]);
        let fifos = Fifos::create(
            self.inner.config.state_dir.join("exec").join(&exec_id),
            request,
        )?;
        let stdin = match &fifos.stdin {
            // Read-write: opening never blocks, and dropping it is the process's EOF.
            Some(p) => Some(
                pipe::OpenOptions::new()
                    .read_write(true)
                    .open_sender(p)
                    .map_err(io_error(format!("opening FIFO {}", p.display())))?,
            ),
            None => None,
        };
        let stdout = fifos.stdout.as_deref().map(open_reader);
        let stderr = fifos.stderr.as_deref().map(open_reader);
        if let Err(e) = self
            .start_exec(
                id,
                &exec_id,
                fifos.uris(),
                exec_process_spec(&container_spec, request),
            )
            .await
        {
            fifos.unblock();
            drop(stdin);
            // The readers fail or see EOF once unblocked; nothing else holds them.
            let _ = join_reader(stdout).await;
            let _ = join_reader(stderr).await;
            fifos.remove();
            return Err(e);
        }
        let wait = self.spawn_reaper(id, &exec_id, fifos);
        let stdin = stdin.map(|fifo| self.stdin_forwarder(id, &exec_id, fifo));
        let stdout_reader = join_reader(stdout).await?;
        let stderr_reader = join_reader(stderr).await?;
        Ok(ExecStreams {
            exec_id,
            stdin,
            stdout: if request.stdout {
                stdout_reader
            } else {
                drain(stdout_reader);
                None
            },
            stderr: if request.stderr {
                stderr_reader
            } else {
                drain(stderr_reader);
                None
            },
            exit: Box::pin(async move {
                wait.await.unwrap_or_else(|_| {
                    Err(RuntimeError::Io {
                        what: "exec reaper".into(),
                        source: std::io::Error::other("the reaper task ended without a result"),
                    })
                })
            }),
        })
    }

    /// The container's OCI spec (Null when unreadable: the exec then runs with defaults).
    async fn container_spec(&self, id: &str) -> Result<Value, RuntimeError> {
        let container = self.get_container(id).await?;
        Ok(container
            .spec
            .as_ref()
            .and_then(|s| serde_json::from_slice(&s.value).ok())
            .unwrap_or(Value::Null))
    }

    /// A command run to completion with its output (probes, hooks), killed at `timeout`:
    /// a streamed exec whose stdout and stderr are read to their end, as CRI's ExecSync
    /// waits for the IO after the exit. (The shim reports the exit before it has copied
    /// all the output; a file read at the exit was at times still empty.) The output is
    /// stdout then stderr, as the kubelet's `RunInContainer` joins them.
    pub(super) async fn exec_sync_impl(
        &self,
        id: &str,
        command: &[String],
        timeout: Duration,
    ) -> Result<ExecResult, RuntimeError> {
        let request = ExecStreamRequest {
            command: command.to_vec(),
            tty: false,
            stdin: false,
            stdout: true,
            stderr: true,
        };
        let streams = self.exec_stream_impl(id, &request).await?;
        let exec_id = streams.exec_id.clone();
        let run = async move {
            let (stdout, stderr) =
                tokio::join!(read_limited(streams.stdout), read_limited(streams.stderr));
            let exit_code = streams.exit.await?;
            let mut output = stdout;
            output.extend(stderr);
            output.truncate(crate::EXEC_OUTPUT_LIMIT);
            Ok(ExecResult {
                exit_code,
                output: String::from_utf8_lossy(&output).into_owned(),
            })
        };
        match tokio::time::timeout(timeout, run).await {
            Ok(result) => result,
            Err(_) => {
                // The reaper removes the process once the kill has ended it.
                if let Err(e) = self.kill_exec_impl(id, &exec_id).await {
                    debug!(container = id, exec_id, error = %e, "killing a timed-out exec");
                }
                Err(RuntimeError::ExecTimeout {
                    id: id.to_string(),
                    seconds: timeout.as_secs(),
                })
            }
        }
    }

    /// Exec + Start; on a failed Start the process is deleted again.
    async fn start_exec(
        &self,
        id: &str,
        exec_id: &str,
        [stdin, stdout, stderr]: [String; 3],
        process: Value,
    ) -> Result<(), RuntimeError> {
        self.tasks()
            .exec(self.request(ExecProcessRequest {
                container_id: id.to_string(),
                exec_id: exec_id.to_string(),
                terminal: process["terminal"].as_bool().unwrap_or(false),
                stdin,
                stdout,
                stderr,
                spec: Some(Any {
                    type_url: PROCESS_TYPE_URL.into(),
                    value: serde_json::to_vec(&process).unwrap_or_default(),
                }),
            }))
            .await
            .map_err(grpc("tasks.Exec", id))?;
        let started = self
            .tasks()
            .start(self.request(StartRequest {
                container_id: id.to_string(),
                exec_id: exec_id.to_string(),
            }))
            .await;
        if let Err(status) = started {
            self.delete_exec(id, exec_id).await;
            return Err(grpc("tasks.Start(exec)", id)(status));
        }
        Ok(())
    }

    /// The caller's stdin: copied into the FIFO, and its end passed on with CloseIO (the
    /// shim holds the FIFO open itself, so closing our end is not an EOF for the process).
    fn stdin_forwarder(
        &self,
        id: &str,
        exec_id: &str,
        mut fifo: pipe::Sender,
    ) -> crate::StreamWriter {
        let (writer, mut reader) = tokio::io::duplex(64 * 1024);
        let runtime = self.clone();
        let (id, exec_id) = (id.to_string(), exec_id.to_string());
        tokio::spawn(async move {
            // A failed copy means the process is gone; CloseIO then finds nothing to close.
            let _ = tokio::io::copy(&mut reader, &mut fifo).await;
            let closed = runtime
                .tasks()
                .close_io(runtime.request(CloseIoRequest {
                    container_id: id.clone(),
                    exec_id: exec_id.clone(),
                    stdin: true,
                }))
                .await;
            if let Err(e) = closed {
                debug!(container = %id, exec_id, error = %e, "closing the exec's stdin");
            }
        });
        Box::new(writer)
    }

    async fn delete_exec(&self, id: &str, exec_id: &str) {
        let deleted = self
            .tasks()
            .delete_process(self.request(DeleteProcessRequest {
                container_id: id.to_string(),
                exec_id: exec_id.to_string(),
            }))
            .await;
        if let Err(e) = deleted {
            if e.code() != tonic::Code::NotFound {
                warn!(container = id, exec_id, error = %e, "deleting exec process");
            }
        }
    }

    /// Waits for the exit, then removes the process and its FIFOs.
    fn spawn_reaper(
        &self,
        id: &str,
        exec_id: &str,
        fifos: Fifos,
    ) -> oneshot::Receiver<Result<i32, RuntimeError>> {
        let (tx, rx) = oneshot::channel();
        let runtime = self.clone();
        let (id, exec_id) = (id.to_string(), exec_id.to_string());
        tokio::spawn(async move {
            let waited = runtime
                .tasks()
                .wait(runtime.request(WaitRequest {
                    container_id: id.clone(),
                    exec_id: exec_id.clone(),
                }))
                .await;
            let result = waited
                .map(|r| i32::try_from(r.into_inner().exit_status).unwrap_or(255))
                .map_err(grpc("tasks.Wait(exec)", &id));
            runtime.delete_exec(&id, &exec_id).await;
            fifos.unblock();
            fifos.remove();
            // The receiver may be gone (the client left); the process is reaped either way.
            let _ = tx.send(result);
        });
        rx
    }

    pub(super) async fn resize_exec_impl(
        &self,
        id: &str,
        exec_id: &str,
        width: u16,
        height: u16,
    ) -> Result<(), RuntimeError> {
        self.tasks()
            .resize_pty(self.request(ResizePtyRequest {
                container_id: id.to_string(),
                exec_id: exec_id.to_string(),
                width: u32::from(width),
                height: u32::from(height),
            }))
            .await
            .map_err(grpc("tasks.ResizePty", id))?;
        Ok(())
    }

    pub(super) async fn kill_exec_impl(&self, id: &str, exec_id: &str) -> Result<(), RuntimeError> {
        self.tasks()
            .kill(self.request(KillRequest {
                container_id: id.to_string(),
                exec_id: exec_id.to_string(),
                signal: 9,
                all: false,
            }))
            .await
            .map_err(grpc("tasks.Kill(exec)", id))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tty_exec_gets_term_unless_set() {
        let spec = json!({"process": {"env": ["PATH=/bin"], "cwd": "/"}});
        let req = ExecStreamRequest {
            command: vec!["sh".into()],
            tty: true,
            ..Default::default()
        };
        let p = exec_process_spec(&spec, &req);
        assert_eq!(p["terminal"], json!(true));
        assert_eq!(p["env"], json!(["PATH=/bin", "TERM=xterm"]));
        let spec = json!({"process": {"env": ["TERM=vt100"]}});
        assert_eq!(exec_process_spec(&spec, &req)["env"], json!(["TERM=vt100"]));
        let plain = ExecStreamRequest { tty: false, ..req };
        assert_eq!(exec_process_spec(&spec, &plain)["terminal"], json!(false));
    }

    #[test]
    fn fifos_follow_the_request() {
        let dir = tempfile::tempdir().unwrap();
        let req = ExecStreamRequest {
            stdin: true,
            stdout: true,
            stderr: true,
            tty: true,
            ..Default::default()
        };
        let f = Fifos::create(dir.path().join("e1"), &req).unwrap();
        assert!(f.stdin.is_some() && f.stdout.is_some() && f.stderr.is_none());
        f.remove();
        assert!(!dir.path().join("e1").exists());
        // Only stdout asked for, no terminal: the shim still gets a stderr to write to.
        let only_stdout = ExecStreamRequest {
            stdin: false,
            stderr: false,
            tty: false,
            ..req
        };
        let f = Fifos::create(dir.path().join("e2"), &only_stdout).unwrap();
        let [stdin, stdout, stderr] = f.uris();
        assert!(stdin.is_empty() && !stdout.is_empty() && !stderr.is_empty());
        f.remove();
    }
}
