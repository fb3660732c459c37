//! Liveness, readiness and startup probes (exec, httpGet, tcpSocket, grpc) with the kubelet's
//! thresholds, run from the pod worker's loop.

use std::time::Duration;

// tokio's clock, so a test under a paused runtime drives periods and initial delays.
use tokio::time::Instant;

use k8s_openapi::api::core::v1::{Container, HTTPGetAction, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use cairn_runtime::Runtime;

/// The Kubernetes minor version the agent's HTTP requests claim (`kube-probe/1.33`).
const KUBE_VERSION: &str = "1.33";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProbeKind {
    Liveness,
    Readiness,
    Startup,
}

/// Consecutive results of one probe of one container instance.
#[derive(Debug, Clone)]
pub struct ProbeState {
    pub container_id: String,
    pub last_run: Option<Instant>,
    pub started: Instant,
    pub successes: i32,
    pub failures: i32,
    /// Current verdict: ready / alive / started.
    pub ok: bool,
}

impl ProbeState {
    /// A fresh state for the container `container_id` that started at `started_at` (the
    /// runtime's record): `initialDelaySeconds` counts from that start, so an agent restart
    /// does not reset it. Unknown or future start times count from `now`.
    pub fn new(
        container_id: &str,
        kind: ProbeKind,
        started_at: Option<chrono::DateTime<chrono::Utc>>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Self {
        let running_for = started_at
            .and_then(|t| (now - t).to_std().ok())
            .unwrap_or_default();
        let now = Instant::now();
        ProbeState {
            container_id: container_id.into(),
            last_run: None,
            started: now.checked_sub(running_for).unwrap_or(now),
            successes: 0,
            failures: 0,
            // Liveness is presumed fine until proven otherwise; readiness/startup are not.
            ok: kind == ProbeKind::Liveness,
        }
    }

    /// Whether the probe is due now.
    pub fn due(&self, probe: &Probe) -> bool {
        let initial = Duration::from_secs(probe.initial_delay_seconds.unwrap_or(0).max(0) as u64);
        let period = Duration::from_secs(probe.period_seconds.unwrap_or(10).max(1) as u64);
        if self.started.elapsed() < initial {
            return false;
        }
        self.last_run.is_none_or(|t| t.elapsed() >= period)
    }

    /// Folds one result in; returns whether the verdict changed.
    pub fn record(&mut self, probe: &Probe, success: bool) -> bool {
        self.last_run = Some(Instant::now());
        let before = self.ok;
        if success {
            self.successes += 1;
            self.failures = 0;
            if self.successes >= probe.success_threshold.unwrap_or(1).max(1) {
                self.ok = true;
            }
        } else {
            self.failures += 1;
            self.successes = 0;
            if self.failures >= probe.failure_threshold.unwrap_or(3).max(1) {
                self.ok = false;
            }
        }
        before != self.ok
    }
}

fn port_of(container: &Container, port: &IntOrString) -> Option<u16> {
    match port {
        IntOrString::Int(n) => u16::try_from(*n).ok(),
        IntOrString::String(name) => container
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some(name.as_str()))
            .and_then(|p| u16::try_from(p.container_port).ok())
            .or_else(|| name.parse().ok()),
    }
}

/// The URL of an `httpGet` action (probe or lifecycle hook), as the kubelet's
/// `GetProbeUrl`: scheme lower-cased (default http), host defaulting to the pod IP, port
/// by number or by the container's port name, path as given.
pub fn http_url(
    container: &Container,
    http: &HTTPGetAction,
    pod_ip: Option<&str>,
) -> Result<String, String> {
    let host = match http.host.as_deref().filter(|h| !h.is_empty()).or(pod_ip) {
        Some(h) => h.to_string(),
        None => return Err("failed to find the pod's IP address".into()),
    };
    let Some(port) = port_of(container, &http.port).filter(|p| *p > 0) else {
        return Err(format!("couldn't find port: {:?}", http.port));
    };
    let scheme = http
        .scheme
        .as_deref()
        .filter(|s| !s.is_empty())
        .unwrap_or("HTTP")
        .to_ascii_lowercase();
    // net.JoinHostPort: IPv6 literals in brackets.
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host
    };
    let path = http.path.clone().unwrap_or_default();
    let slash = if path.is_empty() || path.starts_with('/') {
        ""
    } else {
        "/"
    };
    Ok(format!("{scheme}://{host}:{port}{slash}{path}"))
}

/// Why an HTTP GET got no answer.
#[derive(Debug)]
pub struct HttpGetFailure {
    pub message: String,
    pub timed_out: bool,
}

const MAX_REDIRECTS: usize = 10;

type HttpsClient = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    String,
>;

/// One client for all probes and hooks: HTTP/1.1, no kept-alive connections (the kubelet
/// disables keep-alive for probes), HTTPS without certificate checks. It carries its own
/// rustls config with the ring provider, so it does not depend on a process-wide provider.
fn client() -> Result<&'static HttpsClient, String> {
    static CLIENT: std::sync::OnceLock<Result<HttpsClient, String>> = std::sync::OnceLock::new();
    CLIENT
        .get_or_init(|| {
            let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
            let tls = rustls::ClientConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()
                .map_err(|e| format!("TLS configuration for probes: {e}"))?
                .dangerous()
                .with_custom_certificate_verifier(std::sync::Arc::new(
                    cairn_image::AnyServerCertificate(provider),
                ))
                .with_no_client_auth();
            let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
            http.enforce_http(false);
            let https = hyper_rustls::HttpsConnectorBuilder::new()
                .with_tls_config(tls)
                .https_or_http()
                .enable_http1()
                .wrap_connector(http);
            Ok(
                hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                    .pool_max_idle_per_host(0)
                    .build(https),
            )
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// One GET with the action's headers (and the kubelet's default `User-Agent:
/// <agent>/<version>` and `Accept: */*` unless set); returns the status code. Redirects are
/// followed on the same host only: another host's 3xx is the answer, as upstream.
pub async fn http_get(
    url: &str,
    http: &HTTPGetAction,
    agent: &str,
    timeout: Duration,
) -> Result<u16, HttpGetFailure> {
    let fail = |message: String, timed_out: bool| HttpGetFailure {
        message: format!("Get {url:?}: {message}"),
        timed_out,
    };
    let client = client().map_err(|e| fail(e, false))?;
    let headers: Vec<(&str, &str)> = http
        .http_headers
        .iter()
        .flatten()
        .map(|h| (h.name.as_str(), h.value.as_str()))
        .collect();
    let has = |name: &str| headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    let user_agent = format!("{agent}/{KUBE_VERSION}");
    let deadline = tokio::time::Instant::now() + timeout;
    let mut target: hyper::Uri = url.parse().map_err(|e| fail(format!("{e}"), false))?;
    for _ in 0..=MAX_REDIRECTS {
        let mut req = hyper::Request::get(target.clone());
        if !has("User-Agent") {
            req = req.header("User-Agent", user_agent.as_str());
        }
        if !has("Accept") {
            req = req.header("Accept", "*/*");
        }
        for (name, value) in &headers {
            // An explicitly empty Accept removes the header, as upstream.
            if name.eq_ignore_ascii_case("Accept") && value.is_empty() {
                continue;
            }
            req = req.header(*name, *value);
        }
        let req = req
            .body(String::new())
            .map_err(|e| fail(error_chain(&e), false))?;
        let resp = match tokio::time::timeout_at(deadline, client.request(req)).await {
            Err(_) => {
                return Err(fail(
                    format!("timed out after {timeout:?} awaiting headers"),
                    true,
                ))
            }
            Ok(Err(e)) => return Err(fail(error_chain(&e), false)),
            Ok(Ok(r)) => r,
        };
        let status = resp.status();
        let next = status
            .is_redirection()
            .then(|| resp.headers().get(hyper::header::LOCATION))
            .flatten()
            .and_then(|l| l.to_str().ok())
            .and_then(|l| redirect_target(&target, l));
        match next {
            Some(next) if next.host() == target.host() => target = next,
            _ => return Ok(status.as_u16()),
        }
    }
    Err(fail(
        format!("stopped after {MAX_REDIRECTS} redirects"),
        false,
    ))
}

/// Where a `Location` points, relative to `base`.
fn redirect_target(base: &hyper::Uri, location: &str) -> Option<hyper::Uri> {
    if location.contains("://") {
        return location.parse().ok();
    }
    let mut parts = base.clone().into_parts();
    let path = if location.starts_with('/') {
        location.to_string()
    } else {
        // Relative to the current path's directory.
        let current = base.path();
        let dir = &current[..current.rfind('/').map_or(0, |i| i + 1)];
        format!("{}{location}", if dir.is_empty() { "/" } else { dir })
    };
    parts.path_and_query = Some(path.parse().ok()?);
    hyper::Uri::from_parts(parts).ok()
}

/// Errors' Display often hides the cause ("client error (Connect)"): include the chain.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let next = s.to_string();
        if !out.ends_with(&next) {
            out.push_str(": ");
            out.push_str(&next);
        }
        source = s.source();
    }
    out
}

/// Runs the probe once. Returns success and a message for events.
pub async fn run(
    runtime: &dyn Runtime,
    container: &Container,
    container_id: &str,
    pod_ip: Option<&str>,
    probe: &Probe,
) -> (bool, String) {
    let timeout = Duration::from_secs(probe.timeout_seconds.unwrap_or(1).max(1) as u64);
    if let Some(exec) = &probe.exec {
        let cmd = exec.command.clone().unwrap_or_default();
        return match runtime.exec_sync(container_id, &cmd, timeout).await {
            Ok(r) if r.exit_code == 0 => (true, String::new()),
            // The kubelet's message is the command's output; say more when there is none.
            Ok(r) if !r.output.trim().is_empty() => (false, r.output),
            Ok(r) => (
                false,
                format!("command {cmd:?} exited with {}", r.exit_code),
            ),
            Err(e) => (false, e.to_string()),
        };
    }
    if let Some(http) = &probe.http_get {
        let url = match http_url(container, http, pod_ip) {
            Ok(u) => u,
            Err(e) => return (false, e),
        };
        return match http_get(&url, http, "kube-probe", timeout).await {
            Ok(code) if (200..400).contains(&code) => (true, String::new()),
            Ok(code) => (false, format!("HTTP probe failed with statuscode: {code}")),
            Err(e) => (false, e.message),
        };
    }
    if let Some(tcp) = &probe.tcp_socket {
        let host = tcp
            .host
            .clone()
            .or(pod_ip.map(str::to_string))
            .unwrap_or_else(|| "127.0.0.1".into());
        let Some(port) = port_of(container, &tcp.port) else {
            return (false, format!("invalid port {:?}", tcp.port));
        };
        return match tokio::time::timeout(
            timeout,
            tokio::net::TcpStream::connect((host.as_str(), port)),
        )
        .await
        {
            Ok(Ok(_)) => (true, String::new()),
            Ok(Err(e)) => (false, format!("dial tcp {host}:{port}: {e}")),
            Err(_) => (false, format!("dial tcp {host}:{port}: i/o timeout")),
        };
    }
    if let Some(g) = &probe.grpc {
        let host = pod_ip.unwrap_or("127.0.0.1");
        let service = g.service.as_deref().unwrap_or("");
        return grpc_check(host, g.port, service, timeout).await;
    }
    // A probe without a handler fails validation at the API; nothing to check.
    (true, String::new())
}

/// The gRPC health checking protocol (`grpc.health.v1.Health/Check`), as the kubelet's
/// gRPC probe speaks it: `SERVING` succeeds; anything else, an error or the timeout fails,
/// with the kubelet's messages.
pub async fn grpc_check(host: &str, port: i32, service: &str, timeout: Duration) -> (bool, String) {
    use tonic_health::pb::{health_check_response::ServingStatus, health_client::HealthClient};
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    };
    let addr = format!("{host}:{port}");
    let check = async {
        let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| format!("error: failed to connect service at {addr:?}: {e}"))?;
        let channel = endpoint
            .connect()
            .await
            .map_err(|e| format!("error: failed to connect service at {addr:?}: {e}"))?;
        let request = tonic_health::pb::HealthCheckRequest {
            service: service.to_string(),
        };
        let response = HealthClient::new(channel)
            .check(request)
            .await
            .map_err(|e| format!("error: health rpc probe failed: {}", e.message()))?;
        Ok::<i32, String>(response.into_inner().status)
    };
    match tokio::time::timeout(timeout, check).await {
        Ok(Ok(s)) if s == ServingStatus::Serving as i32 => (true, String::new()),
        Ok(Ok(s)) => {
            let name = ServingStatus::try_from(s).map_or("UNKNOWN", |s| s.as_str_name());
            (
                false,
                format!("service unhealthy (responded with {name:?})"),
            )
        }
        Ok(Err(message)) => (false, message),
        Err(_) => (
            false,
            format!("timeout: failed to connect service {addr:?} within {timeout:?}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_urls_like_the_kubelet() {
        let c: Container = serde_json::from_value(
            serde_json::json!({"name": "c", "ports": [{"name": "http", "containerPort": 8080}]}),
        )
        .unwrap();
        let action = |v: serde_json::Value| -> HTTPGetAction { serde_json::from_value(v).unwrap() };
        let url = |v| http_url(&c, &action(v), Some("10.244.0.5"));
        assert_eq!(
            url(serde_json::json!({"port": "http", "path": "/stop?now=1"})).unwrap(),
            "http://10.244.0.5:8080/stop?now=1"
        );
        assert_eq!(
            url(serde_json::json!({"port": 81, "path": "healthz", "scheme": "HTTPS", "host": "fd00::1"})).unwrap(),
            "https://[fd00::1]:81/healthz"
        );
        assert_eq!(
            url(serde_json::json!({"port": "9090"})).unwrap(),
            "http://10.244.0.5:9090"
        );
        assert!(url(serde_json::json!({"port": "nope"})).is_err());
        assert!(http_url(&c, &action(serde_json::json!({"port": 80})), None).is_err());
    }

    #[test]
    fn redirects_resolve_against_the_current_url() {
        let base: hyper::Uri = "http://10.0.0.1:8080/a/b?x=1".parse().unwrap();
        let t = |l: &str| redirect_target(&base, l).unwrap().to_string();
        assert_eq!(t("/healthz"), "http://10.0.0.1:8080/healthz");
        assert_eq!(t("c?y=2"), "http://10.0.0.1:8080/a/c?y=2");
        assert_eq!(t("http://other:1/z"), "http://other:1/z");
    }

    #[test]
    fn thresholds() {
        let probe = Probe {
            failure_threshold: Some(2),
            success_threshold: Some(1),
            ..Default::default()
        };
        let mut s = ProbeState::new("c", ProbeKind::Liveness, None, chrono::Utc::now());
        assert!(s.ok);
        assert!(!s.record(&probe, false));
        assert!(s.record(&probe, false));
        assert!(!s.ok);
        assert!(s.record(&probe, true));
        let mut r = ProbeState::new("c", ProbeKind::Readiness, None, chrono::Utc::now());
        assert!(!r.ok);
        r.record(&probe, true);
        assert!(r.ok);
    }

    #[test]
    fn initial_delay_counts_from_the_container_start() {
        let probe = Probe {
            initial_delay_seconds: Some(30),
            ..Default::default()
        };
        // The agent (re)starts and first looks at a container running for a minute: the
        // delay has passed, the probe is due at once.
        let long_running = chrono::Utc::now() - chrono::Duration::seconds(60);
        let s = ProbeState::new(
            "c",
            ProbeKind::Liveness,
            Some(long_running),
            chrono::Utc::now(),
        );
        assert!(s.due(&probe));
        // One that started 5 s ago still waits; so does one whose start is unknown.
        let recent = chrono::Utc::now() - chrono::Duration::seconds(5);
        assert!(
            !ProbeState::new("c", ProbeKind::Liveness, Some(recent), chrono::Utc::now())
                .due(&probe)
        );
        assert!(!ProbeState::new("c", ProbeKind::Liveness, None, chrono::Utc::now()).due(&probe));
    }

    /// A real gRPC health server on loopback, probed through the protocol.
    #[tokio::test]
    async fn grpc_probe_speaks_the_health_protocol() {
        use tonic_health::pb::health_server::HealthServer;
        let (reporter, service) = tonic_health::server::health_reporter();
        reporter
            .set_service_status("app", tonic_health::ServingStatus::Serving)
            .await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = i32::from(listener.local_addr().unwrap().port());
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
        let server = tokio::spawn(
            tonic::transport::Server::builder()
                .add_service::<HealthServer<_>>(service)
                .serve_with_incoming(incoming),
        );
        let t = Duration::from_secs(2);
        assert_eq!(
            grpc_check("127.0.0.1", port, "app", t).await,
            (true, String::new())
        );
        reporter
            .set_service_status("app", tonic_health::ServingStatus::NotServing)
            .await;
        let (ok, message) = grpc_check("127.0.0.1", port, "app", t).await;
        assert!(!ok);
        assert_eq!(
            message,
            "service unhealthy (responded with \"NOT_SERVING\")"
        );
        let (ok, message) = grpc_check("127.0.0.1", port, "other", t).await;
        assert!(
            !ok && message.starts_with("error: health rpc probe failed"),
            "{message}"
        );
        server.abort();
        // Err(Cancelled): the abort just asked for.
        let _ = server.await;
        let (ok, message) = grpc_check("127.0.0.1", port, "app", t).await;
        assert!(
            !ok && message.starts_with("error: failed to connect service"),
            "{message}"
        );
    }
}
