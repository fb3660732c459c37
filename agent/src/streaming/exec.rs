//! One exec session, independent of the wire: the client's stdin and terminal sizes
//! come in on channels, the process's output goes out on channels, and the outcome
//! becomes the Status the kubelet writes on the error channel.

use std::time::Duration;

use bytes::Bytes;
use cairn_runtime::{ExecStreamRequest, Runtime, StreamReader, StreamWriter};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::options::ExecOptions;

/// A terminal size as kubectl sends it on the resize channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct TerminalSize {
    #[serde(rename = "Width")]
    pub width: u16,
    #[serde(rename = "Height")]
    pub height: u16,
}

/// The client's side of a session, as channels. A closed `stdin` is the client's EOF;
/// `gone` is cancelled when the client's connection ends.
pub struct ExecIo {
    pub stdin: Option<mpsc::Receiver<Bytes>>,
    pub resize: Option<mpsc::Receiver<TerminalSize>>,
    pub stdout: Option<mpsc::Sender<Bytes>>,
    pub stderr: Option<mpsc::Sender<Bytes>>,
    pub gone: CancellationToken,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecOutcome {
    Exited(i32),
    /// The runtime could not start it (missing binary, container gone, ...).
    Failed(String),
    /// The client left; the process was killed and reaped.
    ClientGone,
}

/// How long output still in flight is forwarded after the process exits.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
const CHUNK: usize = 32 * 1024;

/// Runs `options.command` in `container_id` with `io` attached, until it exits or the
/// client leaves. The output channels are closed (dropped) when this returns.
pub async fn run_exec(
    runtime: &dyn Runtime,
    container_id: &str,
    options: &ExecOptions,
    io: ExecIo,
) -> ExecOutcome {
    let request = ExecStreamRequest {
        command: options.command.clone(),
        tty: options.tty,
        stdin: options.stdin,
        stdout: options.stdout,
        stderr: options.stderr,
    };
    let streams = match runtime.exec_stream(container_id, &request).await {
        Ok(s) => s,
        Err(e) => return ExecOutcome::Failed(e.to_string()),
    };
    let exec_id = streams.exec_id.clone();
    let mut pumps = tokio::task::JoinSet::new();
    if let (Some(rx), Some(w)) = (io.stdin, streams.stdin) {
        pumps.spawn(pump_stdin(rx, w));
    }
    for (reader, tx) in [(streams.stdout, io.stdout), (streams.stderr, io.stderr)] {
        if let (Some(r), Some(tx)) = (reader, tx) {
            pumps.spawn(pump_output(r, tx));
        }
    }
    let resizing = io
        .resize
        .map(|rx| resize_loop(runtime, container_id, &exec_id, rx));
    let exit = streams.exit;
    tokio::pin!(exit);
    let waited = async {
        match resizing {
            Some(r) => tokio::select! { code = &mut exit => code, () = r => exit.await },
            None => exit.await,
        }
    };
    let result = tokio::select! {
        r = waited => r,
        () = io.gone.cancelled() => {
            debug!(container = container_id, exec_id, "client left: killing the exec");
            if let Err(e) = runtime.kill_exec(container_id, &exec_id).await {
                warn!(container = container_id, exec_id, error = %e, "killing an abandoned exec");
            }
            pumps.abort_all();
            return ExecOutcome::ClientGone;
        }
    };
    drain(&mut pumps).await;
    match result {
        Ok(code) => ExecOutcome::Exited(code),
        Err(e) => ExecOutcome::Failed(e.to_string()),
    }
}

/// Output pumps end at EOF; stdin's ends with the client's. Neither may hold the
/// session open long after the process is gone.
async fn drain(pumps: &mut tokio::task::JoinSet<()>) {
    let finished = tokio::time::timeout(DRAIN_TIMEOUT, async {
        while pumps.join_next().await.is_some() {}
    })
    .await;
    if finished.is_err() {
        pumps.abort_all();
    }
}

async fn resize_loop(
    runtime: &dyn Runtime,
    container_id: &str,
    exec_id: &str,
    mut rx: mpsc::Receiver<TerminalSize>,
) {
    while let Some(size) = rx.recv().await {
        if let Err(e) = runtime
            .resize_exec(container_id, exec_id, size.width, size.height)
            .await
        {
            debug!(container = container_id, exec_id, error = %e, "resizing the exec's terminal");
        }
    }
    // The client will send no more sizes; keep the select arm from finishing.
    std::future::pending::<()>().await;
}

async fn pump_stdin(mut rx: mpsc::Receiver<Bytes>, mut w: StreamWriter) {
    while let Some(data) = rx.recv().await {
        if w.write_all(&data).await.is_err() {
            return;
        }
    }
    // Closing the writer is the process's EOF; an error means it already went away.
    let _ = w.shutdown().await;
}

async fn pump_output(mut r: StreamReader, tx: mpsc::Sender<Bytes>) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if tx.send(Bytes::copy_from_slice(&buf[..n])).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// The Status the kubelet writes on the error channel (v4 and later).
pub fn outcome_status(outcome: &ExecOutcome, command: &[String]) -> Value {
    match outcome {
        ExecOutcome::Exited(0) | ExecOutcome::ClientGone => {
            json!({"metadata": {}, "status": "Success"})
        }
        ExecOutcome::Exited(code) => json!({
            "metadata": {},
            "status": "Failure",
            "message": format!(
                "command terminated with non-zero exit code: command '{}' exited with {code}",
                command.join(" ")
            ),
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
        }),
        ExecOutcome::Failed(message) => json!({
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": "InternalError",
            "code": 500,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_runtime::fake::FakeRuntime;

    fn options(stdin: bool) -> ExecOptions {
        ExecOptions {
            command: vec!["cat".into()],
            stdin,
            stdout: true,
            stderr: true,
            tty: false,
        }
    }

    #[test]
    fn statuses_as_the_kubelet_writes_them() {
        let cmd = vec!["sh".to_string(), "-c".into(), "exit 3".into()];
        let s = outcome_status(&ExecOutcome::Exited(3), &cmd);
        assert_eq!(s["reason"], "NonZeroExitCode");
        assert_eq!(
            s["details"]["causes"][0],
            json!({"reason": "ExitCode", "message": "3"})
        );
        assert_eq!(
            outcome_status(&ExecOutcome::Exited(0), &cmd)["status"],
            "Success"
        );
        assert_eq!(
            outcome_status(&ExecOutcome::Failed("no such file".into()), &cmd)["message"],
            "no such file"
        );
    }

    #[test]
    fn terminal_size_json() {
        let t: TerminalSize = serde_json::from_str(r#"{"Width":120,"Height":40}"#).unwrap();
        assert_eq!(
            t,
            TerminalSize {
                width: 120,
                height: 40
            }
        );
    }

    async fn fake_with_container() -> (FakeRuntime, String) {
        use cairn_runtime::{ContainerConfig, PodSandboxConfig};
        let rt = FakeRuntime::new();
        let sb = rt
            .run_pod_sandbox(&PodSandboxConfig {
                uid: "u".into(),
                name: "p".into(),
                namespace: "ns".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        let id = rt
            .create_container(
                &sb,
                &ContainerConfig {
                    name: "c".into(),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        rt.start_container(&id).await.unwrap();
        (rt, id)
    }

    #[tokio::test]
    async fn stdin_is_echoed_and_eof_ends_the_process() {
        let (rt, id) = fake_with_container().await;
        let (in_tx, in_rx) = mpsc::channel(4);
        let (out_tx, mut out_rx) = mpsc::channel(4);
        let io = ExecIo {
            stdin: Some(in_rx),
            resize: None,
            stdout: Some(out_tx),
            stderr: None,
            gone: CancellationToken::new(),
        };
        in_tx.send(Bytes::from_static(b"hello")).await.unwrap();
        drop(in_tx);
        let outcome = run_exec(&rt, &id, &options(true), io).await;
        assert_eq!(outcome, ExecOutcome::Exited(0));
        assert_eq!(out_rx.recv().await.unwrap(), Bytes::from_static(b"hello"));
        assert!(
            out_rx.recv().await.is_none(),
            "output closed after the exit"
        );
        assert_eq!(rt.live_execs(), 0);
    }

    #[tokio::test]
    async fn a_client_that_leaves_kills_the_process() {
        let (rt, id) = fake_with_container().await;
        let (_in_tx, in_rx) = mpsc::channel(4);
        let (out_tx, _out_rx) = mpsc::channel(4);
        let gone = CancellationToken::new();
        let io = ExecIo {
            stdin: Some(in_rx),
            resize: None,
            stdout: Some(out_tx),
            stderr: None,
            gone: gone.clone(),
        };
        let rt2 = rt.clone();
        let session = tokio::spawn(async move { run_exec(&rt2, &id, &options(true), io).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(rt.live_execs(), 1);
        gone.cancel();
        assert_eq!(session.await.unwrap(), ExecOutcome::ClientGone);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(rt.live_execs(), 0, "the killed exec was reaped");
    }

    #[tokio::test]
    async fn a_missing_container_fails_clearly() {
        let rt = FakeRuntime::new();
        let io = ExecIo {
            stdin: None,
            resize: None,
            stdout: None,
            stderr: None,
            gone: CancellationToken::new(),
        };
        match run_exec(&rt, "nope", &options(false), io).await {
            ExecOutcome::Failed(m) => assert!(m.contains("nope"), "{m}"),
            other => panic!("{other:?}"),
        }
    }
}
