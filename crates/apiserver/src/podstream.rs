//! `pods/exec`, `pods/attach` and `pods/portforward`: checked as kube-apiserver checks
//! them (the pod exists, is scheduled and not finished, the container is one of its
//! containers), then proxied to the node agent's `/exec`, `/attach` or `/portForward`
//! with the client's upgrade headers. Once the agent answers 101 the two connections are
//! spliced byte for byte, so whichever wire the agent chose (websocket channel protocol,
//! SPDY, SPDY tunnelled in websocket) passes through unchanged.

use axum::body::Body;
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use cairn_api::registry;
use cairn_api::status::Status;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tracing::{debug, Instrument};

use crate::podlog::{join_host_port, kubelet_endpoint};
use crate::state::ApiState;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKind {
    Exec,
    Attach,
    PortForward,
}

/// `(namespace, pod, kind)` when `path` is one of the streaming subresources.
pub fn match_path(path: &str) -> Option<(&str, &str, StreamKind)> {
    let rest = path.strip_prefix("/api/v1/namespaces/")?;
    let mut parts = rest.split('/');
    let (ns, pods, name, sub) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if pods != "pods" || parts.next().is_some() || ns.is_empty() || name.is_empty() {
        return None;
    }
    let kind = match sub {
        "exec" => StreamKind::Exec,
        "attach" => StreamKind::Attach,
        "portforward" => StreamKind::PortForward,
        _ => return None,
    };
    Some((ns, name, kind))
}

fn container_names(pod: &Value) -> Vec<String> {
    ["containers", "initContainers", "ephemeralContainers"]
        .iter()
        .flat_map(|list| {
            pod.pointer(&format!("/spec/{list}"))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|c| c.get("name").and_then(Value::as_str).map(str::to_string))
        .collect()
}

fn query_value(query: Option<&str>, key: &str) -> Option<String> {
    url_pairs(query?).find(|(k, _)| k == key).map(|(_, v)| v)
}

fn url_pairs(query: &str) -> impl Iterator<Item = (String, String)> + '_ {
    query.split('&').map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let decode = |s: &str| {
            percent_encoding::percent_decode_str(&s.replace('+', " "))
                .decode_utf8_lossy()
                .into_owned()
        };
        (decode(k), decode(v))
    })
}

/// kube-apiserver's container choice for exec/attach: the named one, else the
/// `kubectl.kubernetes.io/default-container`, else the only one.
fn choose_container(pod: &Value, name: &str, wanted: Option<String>) -> Result<String, Status> {
    let names = container_names(pod);
    if let Some(c) = wanted.filter(|c| !c.is_empty()) {
        if names.contains(&c) {
            return Ok(c);
        }
        return Err(Status::bad_request(format!(
            "container {c} is not valid for pod {name}"
        )));
    }
    let default = pod
        .pointer("/metadata/annotations/kubectl.kubernetes.io~1default-container")
        .and_then(Value::as_str);
    if let Some(d) = default.filter(|d| names.iter().any(|n| n == d)) {
        return Ok(d.to_string());
    }
    let regular: Vec<String> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .filter_map(|c| c.get("name").and_then(Value::as_str).map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    match regular.as_slice() {
        [only] => Ok(only.clone()),
        _ => Err(Status::bad_request(format!(
            "a container name must be specified for pod {name}, choose one of: [{}]",
            regular.join(" ")
        ))),
    }
}

/// The agent path for this request, after kube-apiserver's checks.
fn agent_path(
    pod: &Value,
    ns: &str,
    name: &str,
    kind: StreamKind,
    query: Option<&str>,
) -> Result<String, Status> {
    let phase = pod
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("");
    if matches!(phase, "Succeeded" | "Failed") && kind != StreamKind::PortForward {
        let verb = if matches!(kind, StreamKind::Exec) {
            "exec into"
        } else {
            "attach"
        };
        return Err(Status::bad_request(format!(
            "cannot {verb} a container in a completed pod; current phase is {phase}"
        )));
    }
    let q = query.map(|q| format!("?{q}")).unwrap_or_default();
    Ok(match kind {
        StreamKind::PortForward => format!("/portForward/{ns}/{name}{q}"),
        StreamKind::Exec | StreamKind::Attach => {
            let container = choose_container(pod, name, query_value(query, "container"))?;
            let op = if matches!(kind, StreamKind::Exec) {
                "exec"
            } else {
                "attach"
            };
            format!("/{op}/{ns}/{name}/{container}{q}")
        }
    })
}

/// Serves one streaming request (`parts` still holds the client's pending upgrade).
pub async fn pod_stream(
    state: &ApiState,
    ns: &str,
    name: &str,
    kind: StreamKind,
    parts: Parts,
) -> Result<Response, Status> {
    let pods = registry::find("", "v1", "pods")
        .ok_or_else(|| Status::internal("resource pods is not registered"))?;
    let nodes = registry::find("", "v1", "nodes")
        .ok_or_else(|| Status::internal("resource nodes is not registered"))?;
    let pod = state.get_value(pods, Some(ns), name)?.0;
    let node_name = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| Status::bad_request(format!("pod {name} does not have a host assigned")))?;
    let path = agent_path(&pod, ns, name, kind, parts.uri.query())?;
    let node = state.get_value(nodes, None, node_name)?.0;
    let (host, port) = kubelet_endpoint(&node)?;
    let agent = Agent {
        dialer: &state.agents,
        host: &host,
        addr: join_host_port(&host, port),
    };
    proxy_upgrade(agent, &path, parts).await
}

/// Headers that describe the hop, not the request: never forwarded.
fn hop_header(name: &header::HeaderName) -> bool {
    name == header::HOST || name == header::CONTENT_LENGTH || name == header::AUTHORIZATION
}

fn status_error(what: &str, e: impl std::fmt::Display) -> Status {
    Status::new(
        500,
        "InternalError",
        format!("error dialing backend: {what}: {e}"),
    )
}

/// The agent a stream goes to: its host (for the certificate check) and `host:port`.
struct Agent<'a> {
    dialer: &'a crate::agent_dial::AgentDialer,
    host: &'a str,
    addr: String,
}

async fn proxy_upgrade(to: Agent<'_>, path: &str, mut parts: Parts) -> Result<Response, Status> {
    let agent = to.addr.as_str();
    let stream =
        to.dialer.connect(to.host, agent).await.map_err(|e| {
            Status::new(500, "InternalError", format!("error dialing backend: {e}"))
        })?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| status_error(agent, e))?;
    tokio::spawn(
        async move {
            if let Err(e) = conn.with_upgrades().await {
                debug!(error = %e, "agent connection ended");
            }
        }
        .in_current_span(),
    );
    let mut builder = http::Request::builder()
        .method(parts.method.clone())
        .uri(path)
        .header(header::HOST, agent);
    for (k, v) in parts.headers.iter().filter(|(k, _)| !hop_header(k)) {
        builder = builder.header(k, v);
    }
    let request = builder
        .body(Empty::<Bytes>::new())
        .map_err(|e| Status::internal(format!("building the agent request: {e}")))?;
    let mut upstream = sender
        .send_request(request)
        .await
        .map_err(|e| status_error(agent, e))?;
    if upstream.status() != StatusCode::SWITCHING_PROTOCOLS {
        return Ok(relay_refusal(upstream).await);
    }
    let client_upgrade = parts
        .extensions
        .remove::<hyper::upgrade::OnUpgrade>()
        .ok_or_else(|| {
            Status::bad_request("unable to upgrade: the connection cannot be upgraded")
        })?;
    let upstream_headers: HeaderMap = upstream.headers().clone();
    let upstream_upgrade = hyper::upgrade::on(&mut upstream);
    tokio::spawn(
        async move {
            match tokio::try_join!(client_upgrade, upstream_upgrade) {
                Ok((client, agent)) => {
                    let (mut client, mut agent) = (TokioIo::new(client), TokioIo::new(agent));
                    let copied = tokio::io::copy_bidirectional(&mut client, &mut agent).await;
                    debug!(?copied, "stream ended");
                }
                Err(e) => debug!(error = %e, "upgrade failed"),
            }
        }
        .in_current_span(),
    );
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    *response.headers_mut() = upstream_headers;
    Ok(response)
}

/// The agent's refusal, passed on as it came (kubectl shows its text).
async fn relay_refusal(upstream: http::Response<hyper::body::Incoming>) -> Response {
    let (parts, body) = upstream.into_parts();
    let bytes = body
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let mut response = Response::new(Body::from(bytes));
    *response.status_mut() = parts.status;
    if let Some(ct) = parts.headers.get(header::CONTENT_TYPE) {
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, ct.clone());
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths() {
        assert_eq!(
            match_path("/api/v1/namespaces/ns/pods/web/exec"),
            Some(("ns", "web", StreamKind::Exec))
        );
        assert_eq!(
            match_path("/api/v1/namespaces/ns/pods/web/portforward"),
            Some(("ns", "web", StreamKind::PortForward))
        );
        assert_eq!(match_path("/api/v1/namespaces/ns/pods/web/log"), None);
        assert_eq!(match_path("/api/v1/namespaces/ns/pods/web/exec/x"), None);
    }

    fn pod(phase: &str, containers: &[&str]) -> Value {
        json!({
            "metadata": {"name": "web"},
            "spec": {"containers": containers.iter().map(|c| json!({"name": c})).collect::<Vec<_>>()},
            "status": {"phase": phase},
        })
    }

    #[test]
    fn container_choice_as_upstream() {
        let one = pod("Running", &["app"]);
        assert_eq!(
            agent_path(
                &one,
                "ns",
                "web",
                StreamKind::Exec,
                Some("command=ls&stdout=true")
            )
            .unwrap(),
            "/exec/ns/web/app?command=ls&stdout=true"
        );
        let two = pod("Running", &["a", "b"]);
        let err = agent_path(&two, "ns", "web", StreamKind::Attach, None).unwrap_err();
        assert_eq!(
            err.message,
            "a container name must be specified for pod web, choose one of: [a b]"
        );
        let err = agent_path(&two, "ns", "web", StreamKind::Exec, Some("container=c")).unwrap_err();
        assert_eq!(err.message, "container c is not valid for pod web");
        let mut annotated = two.clone();
        annotated["metadata"]["annotations"] =
            json!({"kubectl.kubernetes.io/default-container": "b"});
        assert_eq!(
            agent_path(&annotated, "ns", "web", StreamKind::Exec, None).unwrap(),
            "/exec/ns/web/b"
        );
    }

    #[test]
    fn finished_pods_refuse_exec_but_not_port_forward() {
        let done = pod("Succeeded", &["app"]);
        let err = agent_path(&done, "ns", "web", StreamKind::Exec, None).unwrap_err();
        assert_eq!(
            err.message,
            "cannot exec into a container in a completed pod; current phase is Succeeded"
        );
        assert_eq!(
            agent_path(
                &done,
                "ns",
                "web",
                StreamKind::PortForward,
                Some("ports=80")
            )
            .unwrap(),
            "/portForward/ns/web?ports=80"
        );
    }
}
