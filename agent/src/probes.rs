//! Liveness, readiness and startup probes (exec, httpGet, tcpSocket) with the kubelet's
//! thresholds, run from the pod worker's loop.

use std::time::{Duration, Instant};

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
    pub fn new(container_id: &str, kind: ProbeKind) -> Self {
        ProbeState {
            container_id: container_id.into(),
            last_run: None,
            started: Instant::now(),
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

/// One GET with the action's headers (and the kubelet's default `User-Agent:
/// <agent>/<version>` and `Accept: */*` unless set); returns the status code.
pub async fn http_get(
    url: &str,
    http: &HTTPGetAction,
    agent: &str,
    timeout: Duration,
) -> Result<u16, HttpGetFailure> {
    let fail = |message: String, timed_out: bool| HttpGetFailure { message, timed_out };
    let client = reqwest::Client::builder()
        .timeout(timeout)
        // The kubelet does not verify certificates of probe and hook targets.
        .tls_danger_accept_invalid_certs(true)
        // Redirects are followed on the same host only; another host's 3xx is the answer.
        .redirect(reqwest::redirect::Policy::custom(|attempt| {
            let same_host = attempt
                .previous()
                .first()
                .is_some_and(|first| first.host_str() == attempt.url().host_str());
            if attempt.previous().len() > 10 {
                attempt.error("stopped after 10 redirects")
            } else if same_host {
                attempt.follow()
            } else {
                attempt.stop()
            }
        }))
        .build()
        .map_err(|e| fail(e.to_string(), false))?;
    let headers: Vec<(&str, &str)> = http
        .http_headers
        .iter()
        .flatten()
        .map(|h| (h.name.as_str(), h.value.as_str()))
        .collect();
    let has = |name: &str| headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    let mut req = client.get(url);
    if !has("User-Agent") {
        req = req.header("User-Agent", format!("{agent}/{KUBE_VERSION}"));
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
    match req.send().await {
        Ok(r) => Ok(r.status().as_u16()),
        Err(e) => Err(fail(
            format!("Get {url:?}: {}", error_chain(&e)),
            e.is_timeout(),
        )),
    }
}

/// reqwest's Display hides the cause ("error sending request"): include the chain.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
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
    // gRPC probes are not implemented: count as success and say so once in the log.
    tracing::warn!(container = %container.name, "probe handler not supported; treating as success");
    (true, String::new())
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
    fn thresholds() {
        let probe = Probe {
            failure_threshold: Some(2),
            success_threshold: Some(1),
            ..Default::default()
        };
        let mut s = ProbeState::new("c", ProbeKind::Liveness);
        assert!(s.ok);
        assert!(!s.record(&probe, false));
        assert!(s.record(&probe, false));
        assert!(!s.ok);
        assert!(s.record(&probe, true));
        let mut r = ProbeState::new("c", ProbeKind::Readiness);
        assert!(!r.ok);
        r.record(&probe, true);
        assert!(r.ok);
    }
}
