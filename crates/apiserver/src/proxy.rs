//! The `proxy` subresources: `/api/v1/nodes/{node}[:port]/proxy/{path}` to the node's
//! agent, `/api/v1/namespaces/{ns}/pods/{pod}[:port]/proxy/{path}` to the pod's IP, and
//! `/api/v1/namespaces/{ns}/services/[scheme:]{svc}[:port]/proxy/{path}` to a ready
//! endpoint of the service, any method. Agents are reached over HTTPS as the API
//! server's own client ([`crate::agent_dial`]); pods and services over plain HTTP, with
//! no credentials.

use std::sync::OnceLock;
use std::time::Duration;

use axum::body::Body;
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use cairn_api::registry::{self, ResourceInfo};
use cairn_api::status::Status;
use serde_json::Value;
use tracing::debug;

use crate::podlog::{join_host_port, kubelet_endpoint};
use crate::state::ApiState;

/// What a proxy path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyTarget<'a> {
    pub kind: &'a str,
    pub namespace: Option<&'a str>,
    /// `name`, `name:port` or `scheme:name:port`, as the client wrote it.
    pub name: &'a str,
    /// The rest of the path after `proxy`, with its leading slash (or empty).
    pub rest: String,
}

pub fn match_path(path: &str) -> Option<ProxyTarget<'_>> {
    let rest = path.strip_prefix("/api/v1/")?;
    let parts: Vec<&str> = rest.splitn(6, '/').collect();
    let (kind, namespace, name, tail) = match parts.as_slice() {
        ["nodes", name, "proxy", tail @ ..] => ("nodes", None, *name, tail.to_vec()),
        ["namespaces", ns, kind @ ("pods" | "services"), name, "proxy", tail @ ..] => {
            (*kind, Some(*ns), *name, tail.to_vec())
        }
        _ => return None,
    };
    if name.is_empty() {
        return None;
    }
    let rest = if tail.is_empty() {
        String::new()
    } else {
        format!("/{}", tail.join("/"))
    };
    Some(ProxyTarget {
        kind,
        namespace,
        name,
        rest,
    })
}

/// `(scheme, name, port)` from `[scheme:]name[:port]`.
fn split_name(spec: &str) -> (&str, &str, &str) {
    let parts: Vec<&str> = spec.split(':').collect();
    match parts.as_slice() {
        [name] => ("", name, ""),
        [name, port] => ("", name, port),
        [scheme, name, port, ..] => (scheme, name, port),
        [] => ("", "", ""),
    }
}

fn resource(plural: &str, group: &str, version: &str) -> Result<&'static ResourceInfo, Status> {
    registry::find(group, version, plural)
        .ok_or_else(|| Status::internal(format!("resource {plural} is not registered")))
}

fn service_unavailable(message: String) -> Status {
    Status::new(503, "ServiceUnavailable", message)
}

/// The client for pods and services: no proxy, a connect timeout, no client certificate.
fn plain_client() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .no_proxy()
            .build()
            .unwrap_or_default()
    })
}

/// `(scheme, host:port)` of the backend.
fn resolve(state: &ApiState, t: &ProxyTarget<'_>) -> Result<(String, String), Status> {
    let (scheme, name, port) = split_name(t.name);
    let wanted = match (t.kind, scheme) {
        ("nodes", "" | "https") => "https",
        ("nodes", _) => "",
        (_, "" | "http") => "http",
        _ => "",
    };
    if wanted.is_empty() {
        return Err(Status::bad_request(format!(
            "scheme {scheme} is not supported: agents are reached over https, pods and services over http"
        )));
    }
    let scheme = wanted.to_string();
    match t.kind {
        "nodes" => {
            let node = state.get_value(resource("nodes", "", "v1")?, None, name)?.0;
            let (host, kubelet_port) = kubelet_endpoint(&node)?;
            let port = port.parse::<u64>().unwrap_or(kubelet_port);
            Ok((scheme, join_host_port(&host, port)))
        }
        "pods" => {
            let pod = state
                .get_value(resource("pods", "", "v1")?, t.namespace, name)?
                .0;
            let ip = pod
                .pointer("/status/podIP")
                .and_then(Value::as_str)
                .filter(|ip| !ip.is_empty())
                .ok_or_else(|| service_unavailable(format!("pod {name} has no IP yet")))?;
            let port = if port.is_empty() {
                first_container_port(&pod).unwrap_or(80).to_string()
            } else {
                container_port(&pod, port)?
            };
            Ok((scheme, format!("{ip}:{port}")))
        }
        _ => Ok((scheme, service_endpoint(state, t.namespace, name, port)?)),
    }
}

fn first_container_port(pod: &Value) -> Option<u64> {
    pod.pointer("/spec/containers")?
        .as_array()?
        .iter()
        .find_map(|c| c.pointer("/ports/0/containerPort")?.as_u64())
}

/// A numeric port, or a container port's name.
fn container_port(pod: &Value, port: &str) -> Result<String, Status> {
    if port.parse::<u16>().is_ok() {
        return Ok(port.to_string());
    }
    pod.pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(|c| {
            c.get("ports")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .find(|p| p.get("name").and_then(Value::as_str) == Some(port))
        .and_then(|p| p.get("containerPort").and_then(Value::as_u64))
        .map(|p| p.to_string())
        .ok_or_else(|| Status::bad_request(format!("no port named {port:?} in pod")))
}

/// A ready endpoint of the service port named (or numbered) `port`, or its only port.
fn service_endpoint(
    state: &ApiState,
    ns: Option<&str>,
    name: &str,
    port: &str,
) -> Result<String, Status> {
    let svc = state
        .get_value(resource("services", "", "v1")?, ns, name)?
        .0;
    let ports = svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let chosen = ports
        .iter()
        .find(|p| {
            port.is_empty() && ports.len() == 1
                || p.get("name").and_then(Value::as_str) == Some(port)
                || p.get("port")
                    .and_then(Value::as_u64)
                    .map(|n| n.to_string())
                    .as_deref()
                    == Some(port)
        })
        .ok_or_else(|| {
            service_unavailable(format!(
                "no service port {port:?} found for service {name:?}"
            ))
        })?;
    let port_name = chosen.get("name").and_then(Value::as_str).unwrap_or("");
    let slices = resource("endpointslices", "discovery.k8s.io", "v1")?;
    let (items, _) = state.cache.list(&slices.list_prefix(ns));
    for item in items {
        let Ok(slice) = serde_json::from_slice::<Value>(&item.bytes) else {
            continue;
        };
        if slice
            .pointer("/metadata/labels/kubernetes.io~1service-name")
            .and_then(Value::as_str)
            != Some(name)
        {
            continue;
        }
        let Some(target_port) = slice.get("ports").and_then(Value::as_array).and_then(|ps| {
            ps.iter()
                .find(|p| p.get("name").and_then(Value::as_str).unwrap_or("") == port_name)
                .and_then(|p| p.get("port").and_then(Value::as_u64))
        }) else {
            continue;
        };
        let ready = slice
            .get("endpoints")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|e| e.pointer("/conditions/ready").and_then(Value::as_bool) != Some(false))
            .find_map(|e| e.pointer("/addresses/0").and_then(Value::as_str));
        if let Some(address) = ready {
            return Ok(join_host_port(address, target_port));
        }
    }
    Err(service_unavailable(format!(
        "no endpoints available for service \"{name}\""
    )))
}

/// Forwards the request and relays the answer.
pub async fn proxy(
    state: &ApiState,
    target: ProxyTarget<'_>,
    parts: &Parts,
    body: Bytes,
) -> Result<Response, Status> {
    let (scheme, host) = resolve(state, &target)?;
    let query = parts
        .uri
        .query()
        .map(|q| format!("?{q}"))
        .unwrap_or_default();
    let path = if target.rest.is_empty() {
        "/"
    } else {
        &target.rest
    };
    let url = format!("{scheme}://{host}{path}{query}");
    debug!(%url, "proxying");
    let client = if target.kind == "nodes" {
        state.agents.http()
    } else {
        plain_client()
    };
    let mut request = client.request(parts.method.clone(), &url).body(body);
    for (k, v) in &parts.headers {
        if k != header::HOST && k != header::AUTHORIZATION && k != header::CONTENT_LENGTH {
            request = request.header(k, v);
        }
    }
    let upstream = request.send().await.map_err(|e| {
        service_unavailable(format!(
            "error trying to reach {}: {e}",
            target.kind.trim_end_matches('s')
        ))
    })?;
    let status =
        StatusCode::from_u16(upstream.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let content_type = upstream.headers().get(header::CONTENT_TYPE).cloned();
    let mut response = Response::new(Body::from_stream(upstream.bytes_stream()));
    *response.status_mut() = status;
    if let Some(ct) = content_type {
        response.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_paths() {
        let t = match_path("/api/v1/nodes/n1/proxy/stats/summary").unwrap();
        assert_eq!(
            (t.kind, t.namespace, t.name, t.rest.as_str()),
            ("nodes", None, "n1", "/stats/summary")
        );
        let t = match_path("/api/v1/namespaces/default/services/http:web:80/proxy/").unwrap();
        assert_eq!(
            (t.kind, t.namespace, t.name),
            ("services", Some("default"), "http:web:80")
        );
        let t = match_path("/api/v1/namespaces/default/pods/web/proxy").unwrap();
        assert_eq!(t.rest, "");
        assert!(match_path("/api/v1/namespaces/default/pods/web/log").is_none());
        assert!(match_path("/api/v1/nodes/n1").is_none());
    }

    #[test]
    fn name_forms() {
        assert_eq!(split_name("web"), ("", "web", ""));
        assert_eq!(split_name("web:8080"), ("", "web", "8080"));
        assert_eq!(split_name("https:web:443"), ("https", "web", "443"));
    }
}
