//! Every component's `/metrics` on the lab parses with a Prometheus text-format parser
//! and carries upstream's series: each agent's (kubelet's and CoreDNS's names, through
//! the node proxy) and cairn-control's (API server, scheduler, controllers).

use std::time::Duration;

use crate::common::{eventually, Lab};

fn scrape(text: &str) -> prometheus_parse::Scrape {
    let lines = text.lines().map(|l| Ok(l.to_string()));
    prometheus_parse::Scrape::parse(lines).expect("the Prometheus text format")
}

/// The sum of `metric`'s samples whose labels include all of `labels`.
fn total(scrape: &prometheus_parse::Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match &s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => *v,
            prometheus_parse::Value::Histogram(b) => b.last().map_or(0.0, |b| b.count),
            _ => 0.0,
        })
        .sum()
}

/// After `cluster_dns`: the client pod's node answered its lookups.
pub fn every_component_serves_metrics(lab: &Lab) {
    let node = lab.kubectl(&["get", "pod", "client", "-o", "jsonpath={.spec.nodeName}"]);
    let path = format!("/api/v1/nodes/{node}/proxy/metrics");
    let agent = eventually(
        "the client's lookups in its node's DNS metrics",
        Duration::from_secs(30),
        || {
            let s = scrape(&lab.try_kubectl(&["get", "--raw", &path]).ok()?);
            (total(
                &s,
                "coredns_dns_requests_total",
                &[("type", "A"), ("proto", "udp")],
            ) > 0.0)
                .then_some(s)
        },
    );
    assert!(
        total(
            &agent,
            "coredns_dns_responses_total",
            &[("rcode", "NOERROR")]
        ) > 0.0
    );
    assert!(
        total(
            &agent,
            "coredns_dns_request_duration_seconds",
            &[("type", "A")]
        ) > 0.0
    );
    assert!(total(&agent, "kubelet_running_pods", &[]) > 0.0);
    let control = scrape(&lab.kubectl(&["get", "--raw", "/metrics"]));
    for (metric, labels) in [
        (
            "apiserver_request_total",
            &[("verb", "POST"), ("resource", "pods")][..],
        ),
        ("apiserver_request_duration_seconds", &[("verb", "GET")][..]),
        ("apiserver_storage_objects", &[("resource", "pods")][..]),
        ("apiserver_watch_events_total", &[("kind", "Pod")][..]),
        (
            "etcd_request_duration_seconds",
            &[("operation", "update")][..],
        ),
        (
            "scheduler_schedule_attempts_total",
            &[("result", "scheduled")][..],
        ),
        ("workqueue_adds_total", &[("name", "endpointslice")][..]),
    ] {
        assert!(total(&control, metric, labels) > 0.0, "{metric} {labels:?}");
    }
}

/// A Prometheus server that goes when the test does.
struct Prometheus {
    child: std::process::Child,
    port: u16,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    fn api(&self, path: &str, query: Option<&str>) -> Option<serde_json::Value> {
        let mut curl = std::process::Command::new("curl");
        curl.args(["-sf", &format!("http://127.0.0.1:{}{path}", self.port)]);
        if let Some(q) = query {
            curl.args(["--data-urlencode", &format!("query={q}")]);
        }
        let out = curl.output().ok()?;
        serde_json::from_slice(&out.stdout).ok()
    }
}

fn docs(file: &str) -> String {
    let path = format!("{}/../docs/monitoring/{file}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Debian's Prometheus with `docs/monitoring/prometheus.yml` (scraping every second)
/// against the lab, as its README says to set it up.
fn start_prometheus(lab: &Lab, dir: &std::path::Path) -> Prometheus {
    let rbac = dir.join("rbac.yaml");
    std::fs::write(&rbac, docs("rbac.yaml")).unwrap();
    lab.kubectl(&["apply", "-f", rbac.to_str().unwrap()]);
    let token = lab.kubectl(&["-n", "monitoring", "create", "token", "prometheus"]);
    std::fs::write(dir.join("token"), token.trim()).unwrap();
    std::fs::copy(lab.cluster_ca(), dir.join("ca.crt")).unwrap();
    let kubeconfig = std::fs::read_to_string(&lab.kubeconfig).unwrap();
    let server = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: https://"))
        .expect("the lab's API address")
        .to_string();
    let config = docs("prometheus.yml")
        .replace("/etc/prometheus/cairn/", &format!("{}/", dir.display()))
        .replace("CONTROL", &server)
        .replace("scrape_interval: 15s", "scrape_interval: 1s");
    let config_path = dir.join("prometheus.yml");
    std::fs::write(&config_path, config).unwrap();
    let script = format!(
        "{}/../docs/monitoring/nodes-to-targets.sh",
        env!("CARGO_MANIFEST_DIR")
    );
    let listed = std::process::Command::new(script)
        .args([server.as_str(), dir.join("nodes.json").to_str().unwrap()])
        .env("KUBECONFIG", &lab.kubeconfig)
        .status()
        .unwrap();
    assert!(listed.success(), "nodes-to-targets.sh");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    let child = std::process::Command::new("prometheus")
        .arg(format!("--config.file={}", config_path.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("prometheus (scripts/install-deps.sh installs it)");
    Prometheus { child, port }
}

/// Every target of the scrape configuration is up (cairn-control, and each node's
/// agent, cAdvisor and resource endpoints), and every query of the Grafana dashboard
/// answers; those with data to show show it.
pub fn prometheus_scrapes_the_lab(lab: &Lab) {
    let dir = tempfile::tempdir().unwrap();
    let prometheus = start_prometheus(lab, dir.path());
    let mut last = serde_json::Value::Null;
    let up = |t: &serde_json::Value| t["health"] == "up";
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(targets) = prometheus.api("/api/v1/targets", None) {
            let active = targets["data"]["activeTargets"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if active.len() == 7 && active.iter().all(up) {
                break;
            }
            last = targets;
        }
        let log = std::fs::read_to_string(dir.path().join("prometheus.log")).unwrap_or_default();
        assert!(
            std::time::Instant::now() < deadline,
            "targets not all up: {last}\n{log}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let dashboard: serde_json::Value = serde_json::from_str(&docs("cairn-dashboard.json")).unwrap();
    let panels = dashboard["panels"].as_array().unwrap();
    for panel in panels.iter().filter(|p| p["type"] == "timeseries") {
        let expr = panel["targets"][0]["expr"].as_str().unwrap();
        // Only a limited container shows throttling; none may run now.
        let may_be_empty = expr.contains("throttled");
        eventually(
            &format!("dashboard query {expr}"),
            Duration::from_secs(60),
            || {
                let answer = prometheus.api("/api/v1/query", Some(expr))?;
                let series = answer["data"]["result"].as_array()?.len();
                (answer["status"] == "success" && (may_be_empty || series > 0)).then_some(())
            },
        );
    }
}
