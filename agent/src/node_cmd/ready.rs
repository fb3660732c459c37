//! Waiting for the joined node to be Ready: its Node reports `Ready=True` with a
//! heartbeat from after the units started (a re-joined node's old Ready status does
//! not count), read with the node's own credentials.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::Api;

use super::{io, NodeError, Progress};

/// Which node to wait for, through which API, how long.
pub struct ReadyWait<'a> {
    pub server: &'a str,
    pub node: &'a str,
    /// The node's own kubeconfig: readiness is read with its credentials.
    pub kubeconfig: &'a std::path::Path,
    pub timeout: Duration,
}

/// Between two reads of the Node.
const POLL: Duration = Duration::from_millis(500);

/// What the Node says about readiness, as one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    NotRegistered,
    NotReady(String),
}

/// Readiness from `node`, counting only heartbeats at or after `since` (seconds: the
/// API's times have no finer precision).
pub fn readiness(node: Option<&Node>, since: Timestamp) -> Readiness {
    let Some(node) = node else {
        return Readiness::NotRegistered;
    };
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
    let Some(ready) = ready else {
        return Readiness::NotReady("registered, no Ready condition yet".into());
    };
    let floor = since.as_second();
    let fresh = ready
        .last_heartbeat_time
        .as_ref()
        .is_some_and(|t| t.0.as_second() >= floor);
    match (ready.status.as_str(), fresh) {
        ("True", true) => Readiness::Ready,
        ("True", false) => Readiness::NotReady("Ready only from before this join".into()),
        (status, _) => Readiness::NotReady(format!(
            "Ready={status}: {}",
            ready.message.as_deref().unwrap_or("no message")
        )),
    }
}

fn describe(r: &Readiness, node: &str) -> String {
    match r {
        Readiness::Ready => format!("node {node} is Ready"),
        Readiness::NotRegistered => format!("node {node} is not registered yet"),
        Readiness::NotReady(why) => format!("node {node}: {why}"),
    }
}

pub async fn wait_until_ready(o: &ReadyWait<'_>, say: Progress<'_>) -> Result<(), NodeError> {
    let since = Timestamp::now();
    let started = Instant::now();
    let text = std::fs::read_to_string(o.kubeconfig).map_err(io(o.kubeconfig))?;
    let client = crate::join::client_from_text(o.server, &text).await?;
    let nodes: Api<Node> = Api::all(client);
    let mut last = String::new();
    loop {
        let state = match nodes.get_opt(o.node).await {
            Ok(node) => readiness(node.as_ref(), since),
            Err(e) => Readiness::NotReady(format!("reading the Node: {e}")),
        };
        if state == Readiness::Ready {
            say(&format!(
                "Node {} is Ready ({:.1} s after the units started)",
                o.node,
                started.elapsed().as_secs_f64()
            ));
            return Ok(());
        }
        let line = describe(&state, o.node);
        if line != last {
            say(&format!("Waiting: {line}"));
            last = line;
        }
        if started.elapsed() >= o.timeout {
            return Err(NodeError::NotReady {
                node: o.node.to_string(),
                waited: o.timeout,
                last,
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(status: &str, heartbeat: &str) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "n1"},
            "status": {"conditions": [{
                "type": "Ready", "status": status, "message": "container runtime is down",
                "lastHeartbeatTime": heartbeat,
            }]}
        }))
        .unwrap()
    }

    #[test]
    fn only_a_fresh_ready_heartbeat_counts() {
        let since: Timestamp = "2026-11-29T10:00:00.700Z".parse().unwrap();
        assert_eq!(readiness(None, since), Readiness::NotRegistered);
        let fresh = node("True", "2026-11-29T10:00:00Z");
        assert_eq!(readiness(Some(&fresh), since), Readiness::Ready);
        let stale = node("True", "2026-11-29T09:59:59Z");
        assert!(
            matches!(readiness(Some(&stale), since), Readiness::NotReady(w) if w.contains("before"))
        );
        let down = node("False", "2026-11-29T10:00:05Z");
        assert!(
            matches!(readiness(Some(&down), since), Readiness::NotReady(w) if w.contains("Ready=False: container runtime is down"))
        );
        let bare: Node = serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap();
        assert!(matches!(
            readiness(Some(&bare), since),
            Readiness::NotReady(_)
        ));
    }
}
