//! `kubectl attach`: the container's output from now on, followed from its log file
//! (the agent starts containers with their stdio going to the CRI log, not to FIFOs it
//! keeps, so there is no live stdin to attach to: `-i` gets the output only).

use cairn_podlogs::{read_logs, LocateError, LogLocation, LogOptions, LogSource};
use futures::StreamExt;
use serde_json::{json, Value};

use super::exec::ExecIo;
use super::StreamError;
use crate::pod_logs::AgentLogs;
use crate::Agent;

pub fn log_location(
    agent: &std::sync::Arc<Agent>,
    ns: &str,
    pod: &str,
    container: &str,
) -> Result<LogLocation, StreamError> {
    let logs = AgentLogs {
        agent: agent.clone(),
        ledger: agent.ledger.clone(),
    };
    logs.locate(ns, pod, container, false).map_err(|e| match e {
        LocateError::PodNotFound(p) => StreamError::PodNotFound(p),
        LocateError::ContainerNotFound { container, .. } => {
            StreamError::ContainerNotFound(container)
        }
        other => StreamError::BadRequest(other.to_string()),
    })
}

/// Streams new output to the client until the container stops or the client leaves.
pub async fn follow(location: LogLocation, io: ExecIo) -> Value {
    let options = LogOptions {
        follow: true,
        tail_lines: Some(0),
        ..Default::default()
    };
    let Some(out) = io.stdout.or(io.stderr) else {
        return json!({"metadata": {}, "status": "Success"});
    };
    let mut lines = match read_logs(location.path.clone(), options, location.running).await {
        Ok(s) => s,
        Err(e) => {
            return json!({"metadata": {}, "status": "Failure", "message": e.to_string(), "reason": "InternalError", "code": 500})
        }
    };
    loop {
        tokio::select! {
            chunk = lines.next() => match chunk {
                Some(Ok(bytes)) => if out.send(bytes).await.is_err() { break },
                _ => break,
            },
            () = io.gone.cancelled() => break,
        }
    }
    json!({"metadata": {}, "status": "Success"})
}
