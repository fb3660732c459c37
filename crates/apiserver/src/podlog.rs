//! `GET /api/v1/namespaces/{ns}/pods/{name}/log`: checked the way kube-apiserver checks it
//! (`PodLogOptions` decoding and validation, container choice, a node to ask), then proxied
//! to the node agent's `/containerLogs/{ns}/{pod}/{container}`, streaming each chunk as it
//! arrives so `kubectl logs -f` is live. Agents are reached over HTTPS as the API
//! server's own client ([`crate::agent_dial`]).

use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use cairn_api::registry;
use cairn_api::status::{Cause, Status};
use cairn_podlogs::{parse_log_query, LogOptions, LogQueryError};
use serde_json::Value;
use tracing::debug;

use crate::state::ApiState;

/// kubelet's default port, used when a Node does not publish its own.
pub const DEFAULT_KUBELET_PORT: u64 = 10250;

/// Most of an agent's error answer that is quoted back (kube-apiserver's `maxReadLength`).
const MAX_ERROR_BODY: usize = 50_000;

/// `(namespace, pod)` when `path` is a pod's log subresource.
pub fn match_path(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix("/api/v1/namespaces/")?;
    let mut parts = rest.split('/');
    let (ns, pods, name, log) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if pods != "pods" || log != "log" || parts.next().is_some() || ns.is_empty() || name.is_empty()
    {
        return None;
    }
    Some((ns, name))
}

/// Serves one log request.
pub async fn pod_log(
    state: &ApiState,
    namespace: &str,
    name: &str,
    query: Option<&str>,
) -> Result<Response, Status> {
    let parsed = parse_log_query(query).map_err(|e| query_status(e, name))?;
    let pods = resource("pods")?;
    let pod: Value = state.get_value(pods, Some(namespace), name)?.0;
    let container = choose_container(&pod, name, parsed.container.as_deref())?;
    let node_name = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| Status::bad_request(format!("pod {name} does not have a host assigned")))?;
    let node: Value = state.get_value(resource("nodes")?, None, node_name)?.0;
    let (host, port) = kubelet_endpoint(&node)?;
    let url = format!(
        "https://{}/containerLogs/{namespace}/{name}/{container}{}",
        join_host_port(&host, port),
        agent_query(&parsed.options)
    );
    debug!(%url, "proxying pod log");
    let upstream = state
        .agents
        .http()
        .get(&url)
        .send()
        .await
        .map_err(|e| Status::new(500, "", format!("Get \"{url}\": {e}")))?;
    let code = upstream.status().as_u16();
    if !(200..=206).contains(&code) {
        let body = upstream.bytes().await.unwrap_or_default();
        let text = String::from_utf8_lossy(&body[..body.len().min(MAX_ERROR_BODY)]).into_owned();
        return Err(upstream_error(code, name, text));
    }
    let mut resp = (StatusCode::OK, Body::from_stream(upstream.bytes_stream())).into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    Ok(resp)
}

fn resource(plural: &str) -> Result<&'static registry::ResourceInfo, Status> {
    registry::find("", "v1", plural)
        .ok_or_else(|| Status::internal(format!("resource {plural} is not registered")))
}

fn query_status(e: LogQueryError, name: &str) -> Status {
    match e {
        LogQueryError::Decode { .. } => Status::bad_request(e.to_string()),
        LogQueryError::Invalid(problems) => {
            let causes = problems
                .into_iter()
                .map(|(field, message)| Cause {
                    reason: if message.starts_with("Forbidden") {
                        "FieldValueForbidden"
                    } else {
                        "FieldValueInvalid"
                    },
                    field: if field.is_empty() { "<nil>" } else { field }.to_string(),
                    message,
                })
                .collect();
            Status::invalid("PodLogOptions", "", name, causes)
        }
    }
}

fn container_names(pod: &Value, list: &str) -> Vec<String> {
    pod.pointer(&format!("/spec/{list}"))
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .filter_map(|c| c.get("name").and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// kube-apiserver's `LogLocation` container rules.
fn choose_container(pod: &Value, name: &str, wanted: Option<&str>) -> Result<String, Status> {
    let containers = container_names(pod, "containers");
    let mut init = container_names(pod, "initContainers");
    init.extend(container_names(pod, "ephemeralContainers"));
    match wanted.filter(|c| !c.is_empty()) {
        Some(c) => {
            if containers.iter().chain(&init).any(|n| n == c) {
                Ok(c.to_string())
            } else {
                Err(Status::bad_request(format!(
                    "container {c} is not valid for pod {name}"
                )))
            }
        }
        None => match containers.as_slice() {
            [only] => Ok(only.clone()),
            [] => Err(Status::bad_request(format!(
                "a container name must be specified for pod {name}"
            ))),
            many => {
                let mut msg = format!(
                    "a container name must be specified for pod {name}, choose one of: [{}]",
                    many.join(" ")
                );
                if !init.is_empty() {
                    msg.push_str(&format!(
                        " or one of the init containers: [{}]",
                        init.join(" ")
                    ));
                }
                Err(Status::bad_request(msg))
            }
        },
    }
}

/// The agent's address (InternalIP, else ExternalIP, else Hostname) and port
/// (`status.daemonEndpoints.kubeletEndpoint.Port`, else 10250).
pub(crate) fn kubelet_endpoint(node: &Value) -> Result<(String, u64), Status> {
    let addresses: Vec<(&str, &str)> = node
        .pointer("/status/addresses")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| {
                    Some((
                        x.get("type").and_then(Value::as_str)?,
                        x.get("address").and_then(Value::as_str)?,
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    let host = ["InternalIP", "ExternalIP", "Hostname"]
        .iter()
        .find_map(|t| addresses.iter().find(|(address_type, _)| address_type == t))
        .map(|(_, a)| a.to_string())
        .ok_or_else(|| {
            let known: Vec<String> = addresses
                .iter()
                .map(|(t, a)| format!("{{{t} {a}}}"))
                .collect();
            Status::new(
                500,
                "",
                format!(
                    "no preferred addresses found; known addresses: [{}]",
                    known.join(" ")
                ),
            )
        })?;
    let port = node
        .pointer("/status/daemonEndpoints/kubeletEndpoint/Port")
        .and_then(Value::as_u64)
        .filter(|p| *p > 0 && *p <= 65535)
        .unwrap_or(DEFAULT_KUBELET_PORT);
    Ok((host, port))
}

pub(crate) fn join_host_port(host: &str, port: u64) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The options as kube-apiserver forwards them (Go's `url.Values.Encode`: sorted keys).
fn agent_query(o: &LogOptions) -> String {
    let mut params: Vec<(&str, String)> = Vec::new();
    if o.follow {
        params.push(("follow", "true".into()));
    }
    if let Some(n) = o.limit_bytes {
        params.push(("limitBytes", n.to_string()));
    }
    if o.previous {
        params.push(("previous", "true".into()));
    }
    if let Some(n) = o.since_seconds {
        params.push(("sinceSeconds", n.to_string()));
    }
    if let Some(t) = o.since_time {
        let t = t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        params.push(("sinceTime", t.replace(':', "%3A").replace('+', "%2B")));
    }
    if let Some(n) = o.tail_lines {
        params.push(("tailLines", n.to_string()));
    }
    if o.timestamps {
        params.push(("timestamps", "true".into()));
    }
    if params.is_empty() {
        return String::new();
    }
    let joined: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("?{}", joined.join("&"))
}

/// An agent's error answer as kube-apiserver's `GenericHttpResponseChecker` turns it into a
/// Status.
fn upstream_error(code: u16, name: &str, body: String) -> Status {
    match code {
        400 => Status::bad_request(body),
        500 => Status::internal(format!("Internal error occurred: {body}")),
        _ => {
            let (reason, message) = match code {
                404 => ("NotFound", "the server could not find the requested resource".to_string()),
                401 => ("Unauthorized", "the server has asked for the client to provide credentials".to_string()),
                403 => ("Forbidden", "the server does not allow access to the requested resource".to_string()),
                422 => ("Invalid", "the server rejected our request due to an error in our request".to_string()),
                503 => ("ServiceUnavailable", "the server is currently unable to handle the request".to_string()),
                _ => ("", format!("the server responded with the status code {code} but did not return more information")),
            };
            let mut s = Status::new(code, reason, format!("{message} ( pods/log {name})"))
                .with_details("", "pods/log", name);
            if !body.is_empty() {
                s.details.causes.push(Cause {
                    reason: "UnexpectedServerResponse",
                    field: String::new(),
                    message: body,
                });
            }
            s
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use serde_json::json;

    #[test]
    fn paths() {
        assert_eq!(
            match_path("/api/v1/namespaces/ns/pods/web/log"),
            Some(("ns", "web"))
        );
        assert_eq!(match_path("/api/v1/namespaces/ns/pods/web"), None);
        assert_eq!(match_path("/api/v1/namespaces/ns/pods/web/log/x"), None);
        assert_eq!(match_path("/api/v1/namespaces/ns/services/web/log"), None);
    }

    #[test]
    fn container_rules() {
        let pod = json!({"spec": {
            "initContainers": [{"name": "init"}],
            "containers": [{"name": "a"}, {"name": "b"}]
        }});
        assert_eq!(
            choose_container(&pod, "p", None).unwrap_err().message,
            "a container name must be specified for pod p, choose one of: [a b] or one of the init containers: [init]"
        );
        assert_eq!(choose_container(&pod, "p", Some("init")).unwrap(), "init");
        let e = choose_container(&pod, "p", Some("c")).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (400, "container c is not valid for pod p")
        );
        let one = json!({"spec": {"containers": [{"name": "only"}]}});
        assert_eq!(choose_container(&one, "p", None).unwrap(), "only");
    }

    #[test]
    fn endpoints_and_query() {
        let node = json!({"status": {
            "addresses": [{"type": "Hostname", "address": "n1"}, {"type": "InternalIP", "address": "198.18.0.5"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 11250}}
        }});
        assert_eq!(
            kubelet_endpoint(&node).unwrap(),
            ("198.18.0.5".into(), 11250)
        );
        let bare = json!({"status": {"addresses": [{"type": "Hostname", "address": "n1"}]}});
        assert_eq!(kubelet_endpoint(&bare).unwrap(), ("n1".into(), 10250));
        assert_eq!(kubelet_endpoint(&json!({})).unwrap_err().code, 500);
        assert_eq!(join_host_port("fd00::1", 10250), "[fd00::1]:10250");
        let o = parse_log_query(Some(
            "timestamps=true&tailLines=3&follow=1&sinceTime=2024-01-02T03:04:05Z&limitBytes=9&previous=true",
        ))
        .unwrap()
        .options;
        assert_eq!(
            agent_query(&o),
            "?follow=true&limitBytes=9&previous=true&sinceTime=2024-01-02T03%3A04%3A05Z&tailLines=3&timestamps=true"
        );
        assert_eq!(agent_query(&LogOptions::default()), "");
    }

    #[test]
    fn invalid_options_are_422() {
        let s = query_status(parse_log_query(Some("tailLines=-1")).unwrap_err(), "web");
        assert_eq!(s.code, 422);
        assert_eq!(
            s.message,
            "PodLogOptions \"web\" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0"
        );
        let s = query_status(parse_log_query(Some("limitBytes=x")).unwrap_err(), "web");
        assert_eq!(s.code, 400);
    }

    #[test]
    fn upstream_errors() {
        let s = upstream_error(
            400,
            "web",
            "previous terminated container \"a\" in pod \"web\" not found".into(),
        );
        assert_eq!((s.code, s.reason), (400, "BadRequest"));
        assert_eq!(
            s.message,
            "previous terminated container \"a\" in pod \"web\" not found"
        );
        let s = upstream_error(404, "web", "pod \"web\" does not exist".into());
        assert_eq!(
            s.message,
            "the server could not find the requested resource ( pods/log web)"
        );
    }
}
