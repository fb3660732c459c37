use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use cairn_serviceproxy::source::SliceSource;
use cairn_serviceproxy::{Protocol, ProxyState, ServiceEntry, ServicePort, ServicePortName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

fn entry(
    name: &str,
    internal_local: bool,
    external_local: bool,
    local_count: usize,
) -> (ServicePortName, ServiceEntry) {
    let key = ServicePortName {
        namespace: "default".into(),
        name: name.into(),
        port: String::new(),
        protocol: Protocol::Tcp,
    };
    let port = ServicePort {
        cluster_ip: Some("10.96.0.10".parse().expect("ip")),
        port: 80,
        node_port: external_local.then_some(30080),
        external_ips: Vec::new(),
        load_balancer_ips: Vec::new(),
        affinity_seconds: None,
        external_local,
        internal_local,
        health_check_node_port: None,
    };
    let entry = ServiceEntry {
        port,
        cluster: Vec::new(),
        external: Vec::new(),
        local_count,
    };
    (key, entry)
}

/// `GET path` over a plain TCP connection: status line, headers and body.
async fn get(addr: SocketAddr, path: &str) -> (String, String) {
    let mut conn = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    conn.write_all(request.as_bytes()).await.expect("write");
    let mut response = String::new();
    conn.read_to_string(&mut response).await.expect("read");
    let (head, body) = response.split_once("\r\n\r\n").expect("a header block");
    (head.to_string(), body.to_string())
}

fn sample(body: &str, series: &str) -> Option<f64> {
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
}

#[tokio::test]
async fn serves_what_was_observed() {
    let metrics = observed_metrics();

    let addr = serve(
        "127.0.0.1:0".parse().expect("addr"),
        metrics.clone(),
        axum::Router::new(),
    )
    .await
    .expect("serve");
    let (head, body) = get(addr, "/metrics").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_lowercase()
            .contains("content-type: application/openmetrics-text"),
        "{head}"
    );

    families_have_their_types(&body);
    samples_have_the_observed_values(&body);
    sync_timestamps_are_recent(&body);

    let (head, _) = get(addr, "/other").await;
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
}

/// Metrics after a known series of changes, syncs and states.
fn observed_metrics() -> Arc<Metrics> {
    let metrics = Arc::new(Metrics::new());
    metrics.changed(Change::Service);
    metrics.changed(Change::Service);
    for _ in 0..3 {
        metrics.changed(Change::EndpointSlice);
    }
    let full = SyncReport {
        full: true,
        written: 4,
        warnings: Vec::new(),
    };
    let partial = SyncReport {
        full: false,
        written: 1,
        warnings: Vec::new(),
    };
    metrics.observe_sync(&full, Duration::from_millis(5));
    metrics.observe_sync(&partial, Duration::from_millis(2));
    metrics.observe_sync(&partial, Duration::from_millis(3));
    metrics.observe_failure(Duration::from_millis(1));
    let state: ProxyState = [
        entry("internal-none", true, false, 0),
        entry("internal-none-2", true, false, 0),
        entry("external-none", false, true, 0),
        entry("both-none", true, true, 0),
        entry("external-some", false, true, 1),
        entry("cluster", false, false, 0),
    ]
    .into_iter()
    .collect();
    metrics.observe_state(&state);
    metrics.observe_programming(&[Duration::from_secs(2)]);
    metrics
}

fn families_have_their_types(body: &str) {
    for (name, kind) in [
        ("kubeproxy_sync_proxy_rules_duration_seconds", "histogram"),
        (
            "kubeproxy_sync_full_proxy_rules_duration_seconds",
            "histogram",
        ),
        (
            "kubeproxy_sync_partial_proxy_rules_duration_seconds",
            "histogram",
        ),
        (
            "kubeproxy_network_programming_duration_seconds",
            "histogram",
        ),
        ("kubeproxy_sync_proxy_rules_last_timestamp_seconds", "gauge"),
        (
            "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds",
            "gauge",
        ),
        (
            "kubeproxy_sync_proxy_rules_no_local_endpoints_total",
            "gauge",
        ),
        ("kubeproxy_sync_proxy_rules_endpoint_changes", "counter"),
        ("kubeproxy_sync_proxy_rules_service_changes", "counter"),
        ("cairn_proxy_sync_failures", "counter"),
        ("cairn_proxy_full_syncs", "counter"),
        ("cairn_proxy_partial_syncs", "counter"),
        ("cairn_proxy_service_ports", "gauge"),
    ] {
        let line = format!("# TYPE {name} {kind}");
        assert!(body.lines().any(|l| l == line), "no `{line}` in\n{body}");
    }
}

fn samples_have_the_observed_values(body: &str) {
    let expect = [
        ("kubeproxy_sync_proxy_rules_duration_seconds_count", 4.0),
        (
            "kubeproxy_sync_full_proxy_rules_duration_seconds_count",
            1.0,
        ),
        (
            "kubeproxy_sync_partial_proxy_rules_duration_seconds_count",
            2.0,
        ),
        (
            "kubeproxy_sync_partial_proxy_rules_duration_seconds_sum",
            0.005,
        ),
        ("kubeproxy_sync_proxy_rules_endpoint_changes_total", 3.0),
        ("kubeproxy_sync_proxy_rules_service_changes_total", 2.0),
        (
            "kubeproxy_sync_proxy_rules_no_local_endpoints_total{traffic_policy=\"internal\"}",
            3.0,
        ),
        (
            "kubeproxy_sync_proxy_rules_no_local_endpoints_total{traffic_policy=\"external\"}",
            2.0,
        ),
        ("cairn_proxy_sync_failures_total", 1.0),
        ("cairn_proxy_full_syncs_total", 1.0),
        ("cairn_proxy_partial_syncs_total", 2.0),
        ("cairn_proxy_service_ports", 6.0),
        ("kubeproxy_network_programming_duration_seconds_count", 1.0),
        (
            "kubeproxy_network_programming_duration_seconds_bucket{le=\"1.0\"}",
            0.0,
        ),
        (
            "kubeproxy_network_programming_duration_seconds_bucket{le=\"2.0\"}",
            1.0,
        ),
        (
            "kubeproxy_sync_proxy_rules_duration_seconds_bucket{le=\"0.001\"}",
            1.0,
        ),
        (
            "kubeproxy_sync_proxy_rules_duration_seconds_bucket{le=\"0.004\"}",
            3.0,
        ),
        (
            "kubeproxy_sync_proxy_rules_duration_seconds_bucket{le=\"+Inf\"}",
            4.0,
        ),
    ];
    for (series, want) in expect {
        let got = sample(body, series);
        assert!(
            got.is_some_and(|g| (g - want).abs() < 1e-9),
            "{series}: {got:?}, want {want}, in\n{body}"
        );
    }
}

fn sync_timestamps_are_recent(body: &str) {
    let now = unix_now();
    for series in [
        "kubeproxy_sync_proxy_rules_last_timestamp_seconds",
        "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds",
    ] {
        let got = sample(body, series).unwrap_or_default();
        assert!(
            (now - 60.0..=now).contains(&got),
            "{series}: {got}, now {now}"
        );
    }
}

#[tokio::test]
async fn bind_failure_is_an_error() {
    let taken = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = taken.local_addr().expect("addr");
    let err = serve(addr, Arc::new(Metrics::new()), axum::Router::new())
        .await
        .expect_err("port in use");
    assert!(matches!(err, MetricsError::Bind { .. }), "{err}");
}

fn slice(name: &str, trigger: Option<SystemTime>) -> SliceSource {
    let trigger_time = trigger.map(|t| {
        let ts = jiff::Timestamp::try_from(t).expect("a timestamp");
        ts.to_string()
    });
    SliceSource {
        namespace: "default".into(),
        name: name.into(),
        service: "web".into(),
        address_type: "IPv4".into(),
        ports: Vec::new(),
        endpoints: Vec::new(),
        trigger_time,
    }
}

#[test]
fn a_trigger_time_is_measured_once() {
    let now = SystemTime::now();
    let mut tracker = ProgrammingTracker::new(now - Duration::from_secs(60));
    let slices = vec![
        slice("a", Some(now - Duration::from_secs(2))),
        slice("plain", None),
    ];

    let pending = tracker.pending(&slices);
    assert_eq!(pending.len(), 1);
    let latencies = tracker.programmed(pending, now);
    assert_eq!(latencies.len(), 1);
    let secs = latencies[0].as_secs_f64();
    assert!((2.0..2.001).contains(&secs), "{secs}");

    // The same snapshot again: nothing new.
    let pending = tracker.pending(&slices);
    assert!(pending.is_empty());
    assert!(tracker.programmed(pending, now).is_empty());

    // A new trigger time on the slice is measured.
    let later = now + Duration::from_secs(5);
    let slices = vec![slice("a", Some(later - Duration::from_millis(500)))];
    let latencies = tracker.programmed(tracker.pending(&slices), later);
    assert_eq!(latencies, vec![Duration::from_millis(500)]);
}

#[test]
fn a_failed_sync_leaves_the_change_pending() {
    let now = SystemTime::now();
    let mut tracker = ProgrammingTracker::new(now - Duration::from_secs(60));
    let slices = vec![slice("a", Some(now - Duration::from_secs(2)))];
    // A sync whose pending set is dropped (it failed) records nothing ...
    drop(tracker.pending(&slices));
    // ... so the retry measures the change, up to its own end.
    let retried = now + Duration::from_secs(1);
    let latencies = tracker.programmed(tracker.pending(&slices), retried);
    assert_eq!(latencies, vec![Duration::from_secs(3)]);
}

#[test]
fn old_triggers_and_deleted_slices() {
    let now = SystemTime::now();
    let mut tracker = ProgrammingTracker::new(now - Duration::from_secs(60));
    // Triggered before the proxy started: remembered, not measured.
    let old = vec![slice("old", Some(now - Duration::from_secs(3600)))];
    assert!(tracker.programmed(tracker.pending(&old), now).is_empty());
    assert!(tracker.pending(&old).is_empty());
    // Deleted, then back with the same trigger time: forgotten meanwhile, measured anew
    // only if the trigger is recent.
    let recent = vec![slice("b", Some(now - Duration::from_secs(1)))];
    assert_eq!(tracker.programmed(tracker.pending(&recent), now).len(), 1);
    assert!(tracker
        .programmed(tracker.pending(std::iter::empty()), now)
        .is_empty());
    assert_eq!(tracker.programmed(tracker.pending(&recent), now).len(), 1);
    // A trigger time that does not parse is remembered and skipped.
    let mut bad = slice("bad", None);
    bad.trigger_time = Some("yesterday".into());
    let bad = vec![bad];
    assert!(tracker.programmed(tracker.pending(&bad), now).is_empty());
    assert!(tracker.pending(&bad).is_empty());
}

#[test]
fn the_ingress_data_planes_requests_are_served_beside_the_proxys_metrics() {
    let ingress = cairn_ingress_proxy::RequestMetrics::default();
    let mut metrics = Metrics::new();
    metrics.register_ingress(&ingress);
    ingress.counter().record(
        None,
        axum::http::StatusCode::NOT_FOUND,
        Duration::from_millis(1),
    );
    let text = metrics.encode().expect("encode");
    assert!(
        text.contains("cairn_ingress_requests_total{namespace=\"\",service=\"\",code=\"404\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("kubeproxy_sync_proxy_rules_duration_seconds"),
        "{text}"
    );
}
