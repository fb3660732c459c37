//! The data plane on loopback: real hyper backends, the proxy's real listeners, real TLS
//! handshakes. Every wait is on a response or a closed connection, never a sleep.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use cairn_ingress::gateway::{attach, Gateway, GatewayClass, HttpRoute, ServedListener};
use cairn_ingress_proxy::{
    bind_listener, default_certificate, server_config, ForwardConfig, Inputs, RequestMetrics,
    Routes, ServeConfig, Served, Snapshot, SniResolver, Workers,
};
use cairn_pki::authority::Authority;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::Ingress;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify};

/// `/slow` requests tell `arrived` and wait for `release`.
#[derive(Default)]
struct Gate {
    arrived: Notify,
    release: Notify,
    /// `/reset` requests: received, then the connection is dropped unanswered.
    resets: std::sync::atomic::AtomicUsize,
}

/// A backend answering with its name, the path and the headers it got; `/slow` waits
/// at the gate; an `Upgrade: echo` request is switched and echoed.
async fn backend(name: &'static str, release: Arc<Gate>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let release = release.clone();
            let service = service_fn(move |req: Request<Incoming>| {
                let release = release.clone();
                async move {
                    if req.uri().path() == "/reset" {
                        release
                            .resets
                            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        return Err("dropped unanswered");
                    }
                    Ok(answer(name, req, release).await)
                }
            });
            tokio::spawn(async move {
                let conn = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .with_upgrades();
                let _ = conn.await;
            });
        }
    });
    addr
}

async fn answer(name: &str, mut req: Request<Incoming>, gate: Arc<Gate>) -> Response<Full<Bytes>> {
    if req.headers().get("upgrade").is_some() {
        let upgraded = hyper::upgrade::on(&mut req);
        tokio::spawn(async move {
            let mut io = TokioIo::new(upgraded.await.unwrap());
            let mut buf = [0u8; 64];
            while let Ok(n @ 1..) = io.read(&mut buf).await {
                // `bye`: the backend closes first.
                if &buf[..n] == b"bye" {
                    break;
                }
                io.write_all(&buf[..n]).await.unwrap();
            }
        });
        return Response::builder()
            .status(StatusCode::SWITCHING_PROTOCOLS)
            .header("connection", "upgrade")
            .header("upgrade", "echo")
            .body(Full::default())
            .unwrap();
    }
    if req.uri().path() == "/slow" {
        gate.arrived.notify_one();
        gate.release.notified().await;
    }
    let headers: serde_json::Map<String, serde_json::Value> = req
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v.to_str().unwrap_or(""))))
        .collect();
    let body = json!({"backend": name, "path": req.uri().to_string(), "headers": headers});
    Response::new(Full::new(Bytes::from(body.to_string())))
}

fn service(name: &str, port: i32) -> Service {
    serde_json::from_value(json!({
        "metadata": {"namespace": "default", "name": name},
        "spec": {"ports": [{"name": "http", "port": port}]}
    }))
    .unwrap()
}

/// One EndpointSlice per endpoint: loopback backends differ by port, and a slice has
/// one port per name.
fn slices(service: &str, endpoints: &[SocketAddr]) -> Vec<EndpointSlice> {
    let one = |(i, e): (usize, &SocketAddr)| {
        serde_json::from_value(json!({
            "metadata": {"namespace": "default", "name": format!("{service}-{i}"),
                         "labels": {"kubernetes.io/service-name": service}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [e.ip().to_string()]}],
            "ports": [{"name": "http", "port": e.port(), "protocol": "TCP"}]
        }))
        .unwrap()
    };
    endpoints.iter().enumerate().map(one).collect()
}

fn tls_secret(name: &str, cert: &str, key: &str) -> Secret {
    use k8s_openapi::ByteString;
    let mut s: Secret = serde_json::from_value(json!({
        "metadata": {"namespace": "default", "name": name},
        "type": "kubernetes.io/tls"
    }))
    .unwrap();
    s.data = Some(
        [
            ("tls.crt".to_string(), ByteString(cert.as_bytes().to_vec())),
            ("tls.key".to_string(), ByteString(key.as_bytes().to_vec())),
        ]
        .into(),
    );
    s
}

/// `kubectl create ingress simple --rule="foo.com/bar=svc1:8080,tls=my-cert"` and a
/// catch-all to svc2, with svc1 and svc2's endpoints, and `missing` routed to a Service
/// that does not exist.
fn ingresses() -> Vec<Ingress> {
    let rule = |host: Option<&str>, path: &str, svc: &str, port: i32| {
        json!({"host": host, "http": {"paths": [{"path": path, "pathType": "Prefix",
              "backend": {"service": {"name": svc, "port": {"number": port}}}}]}})
    };
    [
        json!({"metadata": {"namespace": "default", "name": "simple",
                            "creationTimestamp": "2026-01-01T00:00:00Z"},
               "spec": {"ingressClassName": "cairn",
                        "rules": [rule(Some("foo.com"), "/bar", "svc1", 8080)],
                        "tls": [{"hosts": ["foo.com"], "secretName": "my-cert"}]}}),
        json!({"metadata": {"namespace": "default", "name": "rest",
                            "creationTimestamp": "2026-01-02T00:00:00Z"},
               "spec": {"rules": [rule(None, "/", "svc2", 80),
                                  rule(Some("missing.com"), "/", "nosuch", 80)]}}),
    ]
    .into_iter()
    .map(|v| serde_json::from_value(v).unwrap())
    .collect()
}

struct Harness {
    routes: Arc<Routes>,
    http: SocketAddr,
    https: SocketAddr,
    gate: Arc<Gate>,
    backends: (SocketAddr, SocketAddr),
    shutdown: Option<watch::Sender<bool>>,
    stopped: Vec<Served>,
    metrics: RequestMetrics,
    /// Last: stopped (joined) after the rest.
    _workers: Workers,
}

impl Harness {
    async fn start(header_timeout: Duration) -> Harness {
        let gate = Arc::new(Gate::default());
        let one = backend("svc1", gate.clone()).await;
        let two = backend("svc2", gate.clone()).await;
        let routes = Arc::new(Routes::default());
        let fallback = Arc::new(default_certificate().unwrap());
        // Two workers, as on a 2-core node: a test's connections land on either.
        let forwarding = ForwardConfig::default();
        let metrics = forwarding.metrics.clone();
        let workers = Workers::start(2, &routes, &forwarding).unwrap();
        let config = ServeConfig {
            header_timeout,
            drain_timeout: Duration::from_secs(10),
        };
        let (tx, rx) = watch::channel(false);
        let mut stopped = Vec::new();
        // As cairn-proxy binds them: a socket per worker (`SO_REUSEPORT`).
        let any = SocketAddr::from(([127, 0, 0, 1], 0));
        let sockets = [bind_listener(any).unwrap(), bind_listener(any).unwrap()];
        let addrs: Vec<SocketAddr> = sockets.iter().map(|s| s.local_addr().unwrap()).collect();
        // The HTTPS port's resolver asks the Gateway listeners on that port first.
        let resolver = SniResolver::new(routes.clone(), fallback, addrs[1].port(), true);
        let tls = server_config(Arc::new(resolver)).unwrap();
        let [plain_socket, tls_socket] = sockets;
        for (socket, tls) in [
            (plain_socket, None),
            (tls_socket, Some(tokio_rustls::TlsAcceptor::from(tls))),
        ] {
            stopped.push(workers.serve(socket, tls, true, &config, &rx).unwrap());
        }
        Harness {
            routes,
            http: addrs[0],
            https: addrs[1],
            gate,
            backends: (one, two),
            shutdown: Some(tx),
            stopped,
            metrics,
            _workers: workers,
        }
    }

    fn load(
        &self,
        secrets: &[Secret],
        second_backend: &[SocketAddr],
    ) -> Vec<cairn_ingress_proxy::Problem> {
        self.load_with(secrets, second_backend, Vec::new())
    }

    fn load_with(
        &self,
        secrets: &[Secret],
        second_backend: &[SocketAddr],
        gateways: Vec<ServedListener>,
    ) -> Vec<cairn_ingress_proxy::Problem> {
        let ingresses = ingresses();
        let mut two = vec![self.backends.1];
        two.extend_from_slice(second_backend);
        let services = [service("svc1", 8080), service("svc2", 80)];
        let mut slices = slices("svc1", &[self.backends.0]);
        slices.extend(self::slices("svc2", &two));
        let inputs = Inputs {
            ingresses: ingresses.iter().collect(),
            services: services.iter().collect(),
            slices: slices.iter().collect(),
            secrets: secrets.iter().collect(),
            gateways,
        };
        let (snapshot, problems) = Snapshot::build(inputs);
        self.routes.replace(snapshot);
        problems
    }
}

async fn get_on(
    sender: &mut hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
    host: &str,
    path: &str,
) -> (StatusCode, String) {
    let req = Request::get(path)
        .header("host", host)
        .header("x-forwarded-for", "6.6.6.6")
        .body(Empty::new())
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    let status = resp.status();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

async fn connect_http(addr: SocketAddr) -> hyper::client::conn::http1::SendRequest<Empty<Bytes>> {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    sender
}

async fn get(addr: SocketAddr, host: &str, path: &str) -> (StatusCode, String) {
    let mut sender = connect_http(addr).await;
    get_on(&mut sender, host, path).await
}

fn client_tls(ca_pem: &str) -> tokio_rustls::TlsConnector {
    let roots = cairn_pki::tls::roots(ca_pem).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

async fn connect_https(
    addr: SocketAddr,
    name: &str,
    ca_pem: &str,
) -> Result<hyper::client::conn::http1::SendRequest<Empty<Bytes>>, std::io::Error> {
    let stream = TcpStream::connect(addr).await?;
    let server_name = rustls::pki_types::ServerName::try_from(name.to_string()).unwrap();
    let tls = client_tls(ca_pem).connect(server_name, stream).await?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(conn);
    Ok(sender)
}

fn body_json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

#[tokio::test]
async fn hosts_and_paths_route_to_their_services_with_forwarded_headers_and_clear_errors() {
    let h = Harness::start(Duration::from_secs(10)).await;
    h.load(&[], &[]);
    let (status, body) = get(h.http, "foo.com", "/bar/baz?q=1").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let answer = body_json(&body);
    assert_eq!(answer["backend"], "svc1");
    assert_eq!(answer["path"], "/bar/baz?q=1");
    assert_eq!(answer["headers"]["host"], "foo.com");
    assert_eq!(
        answer["headers"]["x-forwarded-for"], "127.0.0.1",
        "a client's own value is replaced"
    );
    assert_eq!(answer["headers"]["x-forwarded-proto"], "http");
    assert_eq!(answer["headers"]["x-forwarded-host"], "foo.com");
    // foo.com has a group of its own: a path it lacks is a 404, not the hostless rule's.
    let (status, body) = get(h.http, "foo.com", "/other").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        body,
        "no Ingress rule matches host \"foo.com\" and path \"/other\"\n"
    );
    let (status, body) = get(h.http, "else.org", "/x").await;
    assert_eq!(
        (status, body_json(&body)["backend"].clone()),
        (StatusCode::OK, json!("svc2"))
    );
    let (status, body) = get(h.http, "missing.com", "/").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body, "service \"default/nosuch\" not found\n");
    // Each response counted once, by the Service it came from (none chosen: empty).
    let counted = |service: &str, code: u16| {
        let namespace = if service.is_empty() { "" } else { "default" };
        h.metrics.requests(namespace, service, code)
    };
    assert_eq!(
        [
            counted("svc1", 200),
            counted("svc2", 200),
            counted("", 404),
            counted("", 503)
        ],
        [1, 1, 1, 1]
    );
}

/// Reads HTTP/1.1 responses (each with a Content-Length) off `wire`: status and body;
/// `heads`: whether each answers a HEAD request (no body, whatever the length says).
fn responses(mut wire: &[u8], heads: &[bool]) -> Vec<(u16, String)> {
    let mut out = Vec::new();
    for head in heads {
        let mut slots = [httparse::EMPTY_HEADER; 32];
        let mut parsed = httparse::Response::new(&mut slots);
        let httparse::Status::Complete(len) = parsed.parse(wire).unwrap() else {
            panic!("a cut response: {}", String::from_utf8_lossy(wire));
        };
        let length: usize = parsed
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("content-length"))
            .map_or(0, |h| {
                std::str::from_utf8(h.value).unwrap().parse().unwrap()
            });
        let length = if *head { 0 } else { length };
        let body = String::from_utf8_lossy(&wire[len..len + length]).into_owned();
        out.push((parsed.code.unwrap(), body));
        wire = &wire[len + length..];
    }
    assert!(wire.is_empty(), "more: {}", String::from_utf8_lossy(wire));
    out
}

#[tokio::test]
async fn pipelined_requests_are_answered_in_order_and_hyper_takes_over_at_a_body() {
    let h = Harness::start(Duration::from_secs(10)).await;
    h.load(&[], &[]);
    // In one write: two plain GETs (served directly), a POST with a body (hyper's from
    // there on), a GET after it on hyper, and a close.
    let mut s = TcpStream::connect(h.http).await.unwrap();
    let wire = "GET /one HTTP/1.1\r\nHost: else.org\r\nConnection: keep-alive, X-Secret\r\n\
                X-Secret: 1\r\nX-Forwarded-For: 6.6.6.6\r\n\r\n\
                HEAD /two HTTP/1.1\r\nHost: else.org\r\n\r\n\
                GET /nowhere HTTP/1.1\r\nHost: foo.com\r\n\r\n\
                POST /three HTTP/1.1\r\nHost: else.org\r\nContent-Length: 3\r\n\r\nxyz\
                GET /four HTTP/1.1\r\nHost: else.org\r\nConnection: close\r\n\r\n";
    s.write_all(wire.as_bytes()).await.unwrap();
    let mut answers = Vec::new();
    // The proxy closes after the last: the read ends.
    s.read_to_end(&mut answers).await.unwrap();
    let answers = responses(&answers, &[false, true, false, false, false]);
    let statuses: Vec<u16> = answers.iter().map(|a| a.0).collect();
    assert_eq!(statuses, [200, 200, 404, 200, 200]);
    let one = body_json(&answers[0].1);
    assert_eq!(one["path"], "/one");
    assert_eq!(one["headers"]["x-forwarded-for"], "127.0.0.1");
    assert_eq!(one["headers"]["host"], "else.org");
    let headers = one["headers"].as_object().unwrap();
    assert!(!headers.contains_key("x-secret") && !headers.contains_key("connection"));
    assert!(answers[1].1.is_empty(), "a HEAD answer has no body");
    assert!(answers[2].1.starts_with("no Ingress rule matches"));
    assert_eq!(body_json(&answers[3].1)["path"], "/three");
    assert_eq!(body_json(&answers[4].1)["path"], "/four");
    assert_eq!(h.metrics.requests("default", "svc2", 200), 4);
}

#[tokio::test]
async fn a_request_that_never_reached_a_dead_endpoint_goes_to_the_next_and_a_received_one_is_not_repeated(
) {
    let h = Harness::start(Duration::from_secs(10)).await;
    // A port nothing listens on: bound, then closed.
    let dead = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    h.load(&[], &[dead]);
    for _ in 0..6 {
        let (status, body) = get(h.http, "else.org", "/").await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    // A POST with a body goes on too: it never reached the dead endpoint.
    for _ in 0..4 {
        let stream = TcpStream::connect(h.http).await.unwrap();
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(conn);
        let req = Request::post("/")
            .header("host", "else.org")
            .body(Full::new(Bytes::from("x")))
            .unwrap();
        assert_eq!(
            sender.send_request(req).await.unwrap().status(),
            StatusCode::OK
        );
    }
    // A request a backend received and dropped unanswered is not sent again: a 502.
    let (status, body) = get(h.http, "else.org", "/reset").await;
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{body}");
    assert!(body.starts_with("endpoint 127.0.0.1:"), "{body}");
    assert_eq!(h.gate.resets.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test]
async fn https_serves_the_secrets_certificate_and_a_secret_update_switches_it_without_failing_a_request(
) {
    let h = Harness::start(Duration::from_secs(10)).await;
    let year = Duration::from_secs(365 * 86400);
    let ca1 = Authority::generate("ca-one", year).unwrap();
    let ca2 = Authority::generate("ca-two", year).unwrap();
    let leaf1 = ca1
        .issue_serving("foo.com", &["foo.com".into()], year)
        .unwrap();
    let leaf2 = ca2
        .issue_serving("foo.com", &["foo.com".into()], year)
        .unwrap();
    assert!(h
        .load(
            &[tls_secret("my-cert", &leaf1.cert_pem, &leaf1.key_pem)],
            &[]
        )
        .is_empty());
    let mut open = connect_https(h.https, "foo.com", ca1.cert_pem())
        .await
        .unwrap();
    let (status, body) = get_on(&mut open, "foo.com", "/bar").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body_json(&body)["headers"]["x-forwarded-proto"], "https");
    assert!(
        connect_https(h.https, "foo.com", ca2.cert_pem())
            .await
            .is_err(),
        "not yet the new one"
    );
    h.load(
        &[tls_secret("my-cert", &leaf2.cert_pem, &leaf2.key_pem)],
        &[],
    );
    // The connection made before the update goes on; new handshakes get the new one.
    assert_eq!(get_on(&mut open, "foo.com", "/bar").await.0, StatusCode::OK);
    let mut fresh = connect_https(h.https, "foo.com", ca2.cert_pem())
        .await
        .unwrap();
    assert_eq!(
        get_on(&mut fresh, "foo.com", "/bar").await.0,
        StatusCode::OK
    );
    assert!(connect_https(h.https, "foo.com", ca1.cert_pem())
        .await
        .is_err());
}

#[tokio::test]
async fn a_secret_that_is_not_a_certificate_is_reported_and_its_host_gets_the_default() {
    let h = Harness::start(Duration::from_secs(10)).await;
    let problems = h.load(
        &[tls_secret("my-cert", "not a certificate", "nor a key")],
        &[],
    );
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].reason, "InvalidCertificate");
    assert!(
        problems[0]
            .message
            .starts_with("secret \"default/my-cert\" does not hold a usable certificate and key"),
        "{}",
        problems[0].message
    );
    let year = Duration::from_secs(365 * 86400);
    let other = Authority::generate("ca-x", year).unwrap();
    let refused = connect_https(h.https, "foo.com", other.cert_pem())
        .await
        .err()
        .unwrap();
    assert!(refused.to_string().contains("UnknownIssuer"), "{refused}");
    let default = connect_https(h.https, "ingress.local", other.cert_pem())
        .await
        .err()
        .unwrap();
    assert!(default.to_string().contains("UnknownIssuer"), "{default}");
    // Plain HTTP to the same host is unaffected.
    assert_eq!(get(h.http, "foo.com", "/bar").await.0, StatusCode::OK);
}

#[tokio::test]
async fn a_slow_loris_client_is_cut_off_and_others_are_served_meanwhile() {
    let h = Harness::start(Duration::from_millis(800)).await;
    h.load(&[], &[]);
    let mut slow = Vec::new();
    for _ in 0..50 {
        let mut s = TcpStream::connect(h.http).await.unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nHost: else.org\r\nX-A: ")
            .await
            .unwrap();
        slow.push(s);
    }
    for _ in 0..20 {
        assert_eq!(get(h.http, "else.org", "/").await.0, StatusCode::OK);
    }
    for mut s in slow {
        let mut buf = Vec::new();
        // The proxy closes the connection (408 or EOF): the read ends.
        let read = tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut buf));
        assert!(
            read.await.is_ok(),
            "a slow client's connection was left open"
        );
        let text = String::from_utf8_lossy(&buf);
        assert!(buf.is_empty() || text.starts_with("HTTP/1.1 408"), "{text}");
    }
}

#[tokio::test]
async fn a_websocket_style_upgrade_is_tunnelled_both_ways() {
    let h = Harness::start(Duration::from_secs(10)).await;
    h.load(&[], &[]);
    let mut s = TcpStream::connect(h.http).await.unwrap();
    s.write_all(
        b"GET /ws HTTP/1.1\r\nHost: else.org\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n",
    )
    .await
    .unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        assert_eq!(
            s.read(&mut byte).await.unwrap(),
            1,
            "closed after {:?}",
            String::from_utf8_lossy(&head)
        );
        head.push(byte[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 101"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    s.write_all(b"ping").await.unwrap();
    let mut echoed = [0u8; 4];
    s.read_exact(&mut echoed).await.unwrap();
    assert_eq!(&echoed, b"ping");
    // The backend's close reaches the client (a WebSocket client waits for it).
    s.write_all(b"bye").await.unwrap();
    let mut rest = [0u8; 8];
    let closed = tokio::time::timeout(Duration::from_secs(10), s.read(&mut rest)).await;
    assert_eq!(
        closed
            .expect("the backend's close never reached the client")
            .unwrap(),
        0
    );
}

#[tokio::test]
async fn shutdown_stops_accepting_and_lets_a_request_in_flight_finish() {
    let mut h = Harness::start(Duration::from_secs(10)).await;
    h.load(&[], &[]);
    let mut sender = connect_http(h.http).await;
    let in_flight = tokio::spawn(async move { get_on(&mut sender, "else.org", "/slow").await });
    h.gate.arrived.notified().await;
    // A second request in flight, on a raw connection, to see its answer's head.
    let mut raw_in_flight = TcpStream::connect(h.http).await.unwrap();
    raw_in_flight
        .write_all(b"GET /slow HTTP/1.1\r\nHost: else.org\r\n\r\n")
        .await
        .unwrap();
    // Shut down once the backend has both requests.
    h.gate.arrived.notified().await;
    h.shutdown.take().unwrap().send(true).unwrap();
    // The listener closes: a new connection is refused.
    // (One still in the backlog as the socket closes is reset.)
    loop {
        match TcpStream::connect(h.http).await {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => break,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            Err(e) => panic!("{e}"),
            Ok(_) => tokio::task::yield_now().await,
        }
    }
    // Once the backend answers, the requests complete and the servers stop. (Both wait
    // at the gate: each registered before telling it had arrived.)
    h.gate.release.notify_waiters();
    let (status, body) = in_flight.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    // The answer said it was the last on its connection, which then closed.
    let mut answer = String::new();
    raw_in_flight.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\r\nconnection: close\r\n"), "{answer}");
    for served in h.stopped.drain(..) {
        served.finished().await;
    }
}

#[tokio::test]
async fn requests_during_table_swaps_see_one_whole_table_or_the_other() {
    let h = Harness::start(Duration::from_secs(10)).await;
    h.load(&[], &[]);
    // Every swap puts a table built anew in place of the last: a request must never see
    // one half built (no 404, no 503) nor a route of the other's.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut clients = Vec::new();
    for _ in 0..4 {
        let (addr, stop) = (h.http, stop.clone());
        clients.push(tokio::spawn(async move {
            let mut sender = connect_http(addr).await;
            let mut answered = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for (host, path, backend) in
                    [("foo.com", "/bar", "svc1"), ("else.org", "/", "svc2")]
                {
                    let (status, body) = get_on(&mut sender, host, path).await;
                    assert_eq!(status, StatusCode::OK, "{body}");
                    assert_eq!(body_json(&body)["backend"], backend);
                    answered += 1;
                }
            }
            answered
        }));
    }
    for _ in 0..300 {
        h.load(&[], &[]);
        tokio::task::yield_now().await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut total = 0;
    for c in clients {
        total += c.await.unwrap();
    }
    assert!(total > 0);
}

/// A Gateway listener for `*.gw.test` on the Ingress HTTP port, and an HTTPRoute for
/// `a.gw.test`: a header match with header filters, a redirect, weights, a rule with no
/// backend and one whose Service does not exist.
fn gateway_listeners(port: u16) -> Vec<ServedListener> {
    let class: GatewayClass = serde_json::from_value(json!({"metadata": {"name": "cairn"},
        "spec": {"controllerName": "cairn.io/gateway-controller"}}))
    .unwrap();
    let gateway: Gateway = serde_json::from_value(json!({
        "metadata": {"namespace": "default", "name": "gw"},
        "spec": {"gatewayClassName": "cairn", "listeners": [
            {"name": "web", "port": port, "protocol": "HTTP", "hostname": "*.gw.test"}]}
    }))
    .unwrap();
    let to =
        |svc: &str, port: i32, weight: i32| json!({"name": svc, "port": port, "weight": weight});
    let path = |p: &str| json!([{"path": {"type": "PathPrefix", "value": p}}]);
    let route: HttpRoute = serde_json::from_value(json!({
        "metadata": {"namespace": "default", "name": "r"},
        "spec": {"parentRefs": [{"name": "gw"}], "hostnames": ["a.gw.test"], "rules": [
            {"matches": [{"headers": [{"name": "x-canary", "value": "yes"}]}],
             "filters": [
                {"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "x-added", "value": "1"}]}},
                {"type": "ResponseHeaderModifier", "responseHeaderModifier": {"add": [{"name": "x-resp", "value": "r"}]}}],
             "backendRefs": [to("svc2", 80, 1)]},
            {"matches": path("/old"), "filters": [{"type": "RequestRedirect",
                "requestRedirect": {"hostname": "b.gw.test", "statusCode": 301}}]},
            {"matches": path("/w"), "backendRefs": [to("svc1", 8080, 3), to("svc2", 80, 1)]},
            {"matches": path("/nobackend")},
            {"matches": path("/gone"), "backendRefs": [to("nosuch", 80, 1)]}]}
    }))
    .unwrap();
    let inputs = attach::Inputs {
        classes: vec![&class],
        gateways: vec![&gateway],
        routes: vec![&route],
        services: [("default", "svc1"), ("default", "svc2")]
            .map(|(n, s)| (n.to_string(), s.to_string()))
            .into(),
        ..Default::default()
    };
    attach::attach(&inputs).listeners
}

#[tokio::test]
async fn gateway_routes_share_the_ingress_port_with_filters_redirects_and_weights() {
    let h = Harness::start(Duration::from_secs(10)).await;
    h.load_with(&[], &[], gateway_listeners(h.http.port()));
    let mut sender = connect_http(h.http).await;
    let canary = Request::get("/x")
        .header("host", "a.gw.test")
        .header("x-canary", "yes")
        .body(Empty::new())
        .unwrap();
    let resp = sender.send_request(canary).await.unwrap();
    assert_eq!(
        resp.headers()["x-resp"],
        "r",
        "the response header modifier"
    );
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let answer = body_json(&String::from_utf8_lossy(&body));
    assert_eq!(
        (
            answer["backend"].clone(),
            answer["headers"]["x-added"].clone()
        ),
        (json!("svc2"), json!("1"))
    );
    let redirect = Request::get("/old/page?q=1")
        .header("host", "a.gw.test:8080")
        .body(Empty::new())
        .unwrap();
    let resp = sender.send_request(redirect).await.unwrap();
    assert_eq!(resp.status(), StatusCode::MOVED_PERMANENTLY);
    let port = h.http.port();
    assert_eq!(
        resp.headers()["location"],
        format!("http://b.gw.test:{port}/old/page?q=1").as_str()
    );
    let _ = resp.into_body().collect().await;
    // Weights 3:1 over consecutive draws: exactly 6 and 2 of 8.
    let mut seen = std::collections::BTreeMap::new();
    for _ in 0..8 {
        let (status, body) = get_on(&mut sender, "a.gw.test", "/w").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        *seen
            .entry(body_json(&body)["backend"].as_str().unwrap().to_string())
            .or_insert(0) += 1;
    }
    assert_eq!(
        seen,
        [("svc1".to_string(), 6), ("svc2".to_string(), 2)].into()
    );
    let (status, body) = get_on(&mut sender, "a.gw.test", "/nobackend").await;
    assert_eq!(
        (status, body.as_str()),
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            "the matched HTTPRoute rule has no backend\n"
        )
    );
    let (status, body) = get_on(&mut sender, "a.gw.test", "/gone").await;
    assert_eq!(
        (status, body.as_str()),
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            "backendRef nosuch: BackendNotFound\n"
        )
    );
    // A host the listener takes but no route claims, and one it does not take: the
    // Ingress routes of the shared port.
    for host in ["c.gw.test", "else.org"] {
        let (status, body) = get_on(&mut sender, host, "/x").await;
        assert_eq!(
            (status, body_json(&body)["backend"].clone()),
            (StatusCode::OK, json!("svc2")),
            "{host}"
        );
    }
}

#[tokio::test]
async fn a_gateway_https_listener_serves_its_secret_beside_the_ingress_hosts() {
    let h = Harness::start(Duration::from_secs(10)).await;
    let year = Duration::from_secs(365 * 24 * 3600);
    let ca = Authority::generate("gateway-ca", year).unwrap();
    let gw_leaf = ca
        .issue_serving("secure.gw.test", &["secure.gw.test".into()], year)
        .unwrap();
    let ingress_leaf = ca
        .issue_serving("foo.com", &["foo.com".into()], year)
        .unwrap();
    let secrets = [
        tls_secret("gw-cert", &gw_leaf.cert_pem, &gw_leaf.key_pem),
        tls_secret("my-cert", &ingress_leaf.cert_pem, &ingress_leaf.key_pem),
    ];
    let class: GatewayClass = serde_json::from_value(json!({"metadata": {"name": "cairn"},
        "spec": {"controllerName": "cairn.io/gateway-controller"}}))
    .unwrap();
    let gateway: Gateway = serde_json::from_value(json!({
        "metadata": {"namespace": "default", "name": "secure"},
        "spec": {"gatewayClassName": "cairn", "listeners": [
            {"name": "https", "port": h.https.port(), "protocol": "HTTPS", "hostname": "secure.gw.test",
             "tls": {"certificateRefs": [{"name": "gw-cert"}]}}]}
    }))
    .unwrap();
    let route: HttpRoute = serde_json::from_value(json!({
        "metadata": {"namespace": "default", "name": "secure"},
        "spec": {"parentRefs": [{"name": "secure"}],
                 "rules": [{"backendRefs": [{"name": "svc1", "port": 8080}]}]}
    }))
    .unwrap();
    let inputs = attach::Inputs {
        classes: vec![&class],
        gateways: vec![&gateway],
        routes: vec![&route],
        services: [("default".to_string(), "svc1".to_string())].into(),
        tls_secrets: [("default".to_string(), "gw-cert".to_string())].into(),
        ..Default::default()
    };
    let listeners = attach::attach(&inputs).listeners;
    assert_eq!(listeners.len(), 1);
    assert!(h.load_with(&secrets, &[], listeners).is_empty());
    let mut secure = connect_https(h.https, "secure.gw.test", ca.cert_pem())
        .await
        .unwrap();
    let (status, body) = get_on(&mut secure, "secure.gw.test", "/any").await;
    assert_eq!(
        (status, body_json(&body)["backend"].clone()),
        (StatusCode::OK, json!("svc1"))
    );
    assert_eq!(body_json(&body)["headers"]["x-forwarded-proto"], "https");
    // The Ingress's TLS host on the same port keeps its own certificate and routes.
    let mut ingress = connect_https(h.https, "foo.com", ca.cert_pem())
        .await
        .unwrap();
    assert_eq!(
        get_on(&mut ingress, "foo.com", "/bar").await.0,
        StatusCode::OK
    );
}

/// An HTTP/2 request on `sender` (the authority in the URI, as HTTP/2 clients send it,
/// no `Host` header); `(status, body)`.
async fn get_h2(
    sender: &mut hyper::client::conn::http2::SendRequest<Empty<Bytes>>,
    uri: &str,
) -> (StatusCode, String) {
    let req = Request::get(uri).body(Empty::new()).unwrap();
    let resp = sender.send_request(req).await.unwrap();
    assert_eq!(resp.version(), http::Version::HTTP_2);
    let status = resp.status();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

async fn h2_over<S>(io: S) -> hyper::client::conn::http2::SendRequest<Empty<Bytes>>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let executor = hyper_util::rt::TokioExecutor::new();
    let (sender, conn) = hyper::client::conn::http2::handshake(executor, TokioIo::new(io))
        .await
        .unwrap();
    tokio::spawn(conn);
    sender
}

/// HTTP/2 clients (ALPN `h2` on the HTTPS port, prior knowledge on the plain one) get
/// their requests routed by the URI's authority, several at once on one connection; the
/// backend gets HTTP/1.1 with that authority as its `Host`.
#[tokio::test]
async fn http2_requests_are_routed_by_their_authority() {
    let h = Harness::start(Duration::from_secs(10)).await;
    let year = Duration::from_secs(365 * 86400);
    let ca = Authority::generate("ca-h2", year).unwrap();
    let leaf = ca
        .issue_serving("foo.com", &["foo.com".into()], year)
        .unwrap();
    h.load(&[tls_secret("my-cert", &leaf.cert_pem, &leaf.key_pem)], &[]);
    let roots = cairn_pki::tls::roots(ca.cert_pem()).unwrap();
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let stream = TcpStream::connect(h.https).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("foo.com").unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, stream)
        .await
        .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let mut secure = h2_over(tls).await;
    let mut plain = h2_over(TcpStream::connect(h.http).await.unwrap()).await;
    let (mut a, mut b) = (secure.clone(), secure.clone());
    let (one, two) = tokio::join!(
        get_h2(&mut a, "https://foo.com/bar/1"),
        get_h2(&mut b, "https://foo.com/bar/2"),
    );
    for (status, body) in [one, two] {
        assert_eq!(status, StatusCode::OK, "{body}");
        let answer = body_json(&body);
        assert_eq!(answer["backend"], "svc1");
        assert_eq!(answer["headers"]["host"], "foo.com");
        assert_eq!(answer["headers"]["x-forwarded-proto"], "https");
    }
    let (status, body) = get_h2(&mut plain, "http://else.org/x").await;
    assert_eq!(
        (status, body_json(&body)["backend"].clone()),
        (StatusCode::OK, json!("svc2"))
    );
    assert_eq!(body_json(&body)["headers"]["host"], "else.org");
    let (status, body) = get_h2(&mut secure, "https://foo.com/other").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
}
