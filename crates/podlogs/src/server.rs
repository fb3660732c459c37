//! The node agent's `GET /containerLogs/{namespace}/{pod}/{container}` endpoint, answering
//! like kubelet: plain-text errors, 404 for an unknown pod or container, 400 for undecodable
//! parameters or a log that cannot be served, 422 for invalid options.

use std::path::PathBuf;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use chrono::DateTime;
use percent_encoding::percent_decode_str;

use crate::reader::{read_logs, LogOptions, RunningProbe};

/// Where the log of the wanted container instance is.
#[derive(Clone)]
pub struct LogLocation {
    /// The instance's `<restartCount>.log` (its rotated files sit beside it).
    pub path: PathBuf,
    /// Whether the instance still runs; followers stop at the end of the log once it is false.
    pub running: RunningProbe,
}

impl LogLocation {
    /// An instance that has exited: following stops at the end of its log.
    pub fn exited(path: PathBuf) -> Self {
        LogLocation {
            path,
            running: Arc::new(|| false),
        }
    }

    /// An instance that runs while `probe` says so.
    pub fn running_while(path: PathBuf, probe: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        LogLocation {
            path,
            running: Arc::new(probe),
        }
    }
}

impl std::fmt::Debug for LogLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogLocation")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// Why a container's log cannot be served; the messages are kubelet's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LocateError {
    /// 404.
    #[error("pod {0:?} does not exist")]
    PodNotFound(String),
    /// 404.
    #[error("container {container:?} not found in pod {pod:?}")]
    ContainerNotFound { pod: String, container: String },
    /// 400.
    #[error("previous terminated container {container:?} in pod {pod:?} not found")]
    NoPreviousInstance { pod: String, container: String },
    /// 400, e.g. `container "c" in pod "p" is waiting to start: ContainerCreating`.
    #[error("{0}")]
    Unavailable(String),
}

impl LocateError {
    pub fn status(&self) -> StatusCode {
        match self {
            LocateError::PodNotFound(_) | LocateError::ContainerNotFound { .. } => {
                StatusCode::NOT_FOUND
            }
            LocateError::NoPreviousInstance { .. } | LocateError::Unavailable(_) => {
                StatusCode::BAD_REQUEST
            }
        }
    }
}

/// Finds container logs for the HTTP endpoint (the agent implements it over its pod state).
pub trait LogSource: Send + Sync {
    /// The log of the current instance of `container`, or with `previous` of the one before.
    fn locate(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        previous: bool,
    ) -> Result<LogLocation, LocateError>;
}

/// A query that cannot be turned into [`LogOptions`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogQueryError {
    /// A value of the wrong type (400).
    #[error("invalid value {value:?} for query parameter {param}: {reason}")]
    Decode {
        param: &'static str,
        value: String,
        reason: String,
    },
    /// Values that decode but are not allowed (422), as `(field, message)` pairs worded like
    /// the Kubernetes `ValidatePodLogOptions`.
    #[error("invalid log options: {}", .0.iter().map(|(f, m)| format!("{f}: {m}")).collect::<Vec<_>>().join(", "))]
    Invalid(Vec<(&'static str, String)>),
}

/// The query of a pod log request with its `container`, kept apart for the API server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogQuery {
    pub container: Option<String>,
    pub options: LogOptions,
}

/// Parses `follow`, `previous`, `timestamps`, `tailLines` (or kubelet's legacy `tail`, where
/// `all` means everything), `sinceSeconds`, `sinceTime`, `limitBytes` and `container`, with
/// the Kubernetes query conversions: a boolean is true unless `0` or `false`, numbers are
/// base-10 int64, `sinceTime` is RFC 3339. Unknown parameters are ignored.
pub fn parse_log_query(query: Option<&str>) -> Result<LogQuery, LogQueryError> {
    let mut out = LogQuery::default();
    let mut tail_seen = false;
    let mut legacy_tail: Option<String> = None;
    let mut seen: Vec<String> = Vec::new();
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = decode(key);
        let value = decode(value);
        // The first value of a repeated parameter wins, as in Go.
        if seen.contains(&key) {
            continue;
        }
        seen.push(key.clone());
        let o = &mut out.options;
        match key.as_str() {
            "container" => out.container = Some(value),
            "follow" => o.follow = go_bool(&value),
            "previous" => o.previous = go_bool(&value),
            "timestamps" => o.timestamps = go_bool(&value),
            "tailLines" => {
                tail_seen = true;
                o.tail_lines = int_param("tailLines", &value)?;
            }
            "tail" => legacy_tail = Some(value),
            "sinceSeconds" => o.since_seconds = int_param("sinceSeconds", &value)?,
            "limitBytes" => o.limit_bytes = int_param("limitBytes", &value)?,
            "sinceTime" => {
                o.since_time = if value.is_empty() || value == "null" {
                    None
                } else {
                    Some(DateTime::parse_from_rfc3339(&value).map_err(|e| {
                        LogQueryError::Decode {
                            param: "sinceTime",
                            value: value.clone(),
                            reason: e.to_string(),
                        }
                    })?)
                }
            }
            _ => {}
        }
    }
    if let Some(tail) = legacy_tail.filter(|t| !t.is_empty()) {
        if !tail_seen || tail == "all" {
            out.options.tail_lines = if tail == "all" {
                None
            } else {
                int_param("tail", &tail)?
            };
        }
    }
    let o = &out.options;
    let mut invalid = Vec::new();
    if let Some(n) = o.tail_lines.filter(|n| *n < 0) {
        invalid.push((
            "tailLines",
            format!("Invalid value: {n}: must be greater than or equal to 0"),
        ));
    }
    if let Some(n) = o.limit_bytes.filter(|n| *n < 1) {
        invalid.push((
            "limitBytes",
            format!("Invalid value: {n}: must be greater than 0"),
        ));
    }
    match (o.since_seconds, o.since_time) {
        (Some(_), Some(_)) => invalid.push((
            "",
            "Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified".to_string(),
        )),
        (Some(n), None) if n < 1 => invalid.push((
            "sinceSeconds",
            format!("Invalid value: {n}: must be greater than 0"),
        )),
        _ => {}
    }
    if !invalid.is_empty() {
        return Err(LogQueryError::Invalid(invalid));
    }
    Ok(out)
}

fn decode(s: &str) -> String {
    let plus_as_space = s.replace('+', " ");
    percent_decode_str(&plus_as_space)
        .decode_utf8_lossy()
        .into_owned()
}

/// apimachinery's `Convert_Slice_string_To_bool`.
fn go_bool(v: &str) -> bool {
    !(v == "0" || v.eq_ignore_ascii_case("false"))
}

fn int_param(param: &'static str, value: &str) -> Result<Option<i64>, LogQueryError> {
    if value.is_empty() {
        return Ok(None);
    }
    value
        .parse::<i64>()
        .map(Some)
        .map_err(|e| LogQueryError::Decode {
            param,
            value: value.to_string(),
            reason: e.to_string(),
        })
}

/// The `containerLogs` endpoint over `source`; merge it into the agent's router.
pub fn router(source: Arc<dyn LogSource>) -> Router {
    Router::new()
        .route(
            "/containerLogs/{namespace}/{pod}/{container}",
            get(container_logs),
        )
        .with_state(source)
}

fn text(code: StatusCode, message: String) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message,
    )
        .into_response()
}

async fn container_logs(
    State(source): State<Arc<dyn LogSource>>,
    Path((namespace, pod, container)): Path<(String, String, String)>,
    RawQuery(query): RawQuery,
) -> Response {
    let query = match parse_log_query(query.as_deref()) {
        Ok(q) => q,
        Err(e @ LogQueryError::Decode { .. }) => {
            return text(StatusCode::BAD_REQUEST, e.to_string())
        }
        Err(e @ LogQueryError::Invalid(_)) => {
            return text(StatusCode::UNPROCESSABLE_ENTITY, e.to_string())
        }
    };
    let location = match source.locate(&namespace, &pod, &container, query.options.previous) {
        Ok(l) => l,
        Err(e) => return text(e.status(), e.to_string()),
    };
    match read_logs(location.path, query.options, location.running).await {
        Ok(stream) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/plain")],
            Body::from_stream(stream),
        )
            .into_response(),
        Err(e) => text(StatusCode::BAD_REQUEST, e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn query_conversions() {
        let q = parse_log_query(Some(
            "container=app&follow=true&timestamps=1&previous=false&tailLines=10&limitBytes=5&sinceTime=2024-01-02T03%3A04%3A05Z&x=y",
        ))
        .unwrap();
        assert_eq!(q.container.as_deref(), Some("app"));
        assert!(q.options.follow && q.options.timestamps && !q.options.previous);
        assert_eq!(q.options.tail_lines, Some(10));
        assert_eq!(q.options.limit_bytes, Some(5));
        assert_eq!(
            q.options.since_time,
            Some(DateTime::parse_from_rfc3339("2024-01-02T03:04:05Z").unwrap())
        );
        // Bare keys and odd spellings are true, as the Go conversion has it.
        let q = parse_log_query(Some("follow&previous=yes&timestamps=FALSE")).unwrap();
        assert!(q.options.follow && q.options.previous && !q.options.timestamps);
        // kubelet's legacy tail parameter.
        assert_eq!(
            parse_log_query(Some("tail=3")).unwrap().options.tail_lines,
            Some(3)
        );
        assert_eq!(
            parse_log_query(Some("tailLines=3&tail=all"))
                .unwrap()
                .options
                .tail_lines,
            None
        );
        assert_eq!(parse_log_query(None).unwrap(), LogQuery::default());
    }

    #[test]
    fn query_errors() {
        assert!(matches!(
            parse_log_query(Some("tailLines=ten")),
            Err(LogQueryError::Decode {
                param: "tailLines",
                ..
            })
        ));
        assert!(matches!(
            parse_log_query(Some("sinceTime=yesterday")),
            Err(LogQueryError::Decode {
                param: "sinceTime",
                ..
            })
        ));
        let Err(LogQueryError::Invalid(causes)) =
            parse_log_query(Some("tailLines=-1&limitBytes=0&sinceSeconds=0"))
        else {
            panic!("expected invalid")
        };
        assert_eq!(
            causes,
            vec![
                (
                    "tailLines",
                    "Invalid value: -1: must be greater than or equal to 0".to_string()
                ),
                (
                    "limitBytes",
                    "Invalid value: 0: must be greater than 0".to_string()
                ),
                (
                    "sinceSeconds",
                    "Invalid value: 0: must be greater than 0".to_string()
                ),
            ]
        );
        let Err(LogQueryError::Invalid(causes)) =
            parse_log_query(Some("sinceSeconds=5&sinceTime=2024-01-02T03:04:05Z"))
        else {
            panic!("expected invalid")
        };
        assert_eq!(causes[0].0, "");
    }
}
