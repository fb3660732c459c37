//! Liveness, readiness and startup probes (exec, httpGet, tcpSocket) with the kubelet's
//! thresholds, run from the pod worker's loop.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use cairn_runtime::Runtime;

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
        let host = http
            .host
            .clone()
            .or(pod_ip.map(str::to_string))
            .unwrap_or_else(|| "127.0.0.1".into());
        let Some(port) = port_of(container, &http.port) else {
            return (false, format!("invalid port {:?}", http.port));
        };
        let scheme = http
            .scheme
            .clone()
            .unwrap_or_else(|| "HTTP".into())
            .to_ascii_lowercase();
        let path = http.path.clone().unwrap_or_else(|| "/".into());
        let url = format!("{scheme}://{host}:{port}{path}");
        let client = match reqwest::Client::builder().timeout(timeout).build() {
            Ok(c) => c,
            Err(e) => return (false, e.to_string()),
        };
        let mut req = client.get(&url).header("User-Agent", "kube-probe/1.33");
        for h in http.http_headers.iter().flatten() {
            req = req.header(h.name.as_str(), h.value.as_str());
        }
        return match req.send().await {
            Ok(r) if (200..400).contains(&r.status().as_u16()) => (true, String::new()),
            Ok(r) => (
                false,
                format!("HTTP probe failed with statuscode: {}", r.status().as_u16()),
            ),
            Err(e) => (false, format!("Get {url:?}: {e}")),
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
