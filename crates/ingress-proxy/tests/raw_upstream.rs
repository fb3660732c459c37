//! Bodiless requests over the raw upstream connections, against a backend that writes
//! its answers byte for byte: chunked bodies with trailers, HEAD, interim responses,
//! bodies until close, a connection the backend closes while it is idle, large bodies
//! and malformed answers. One worker, so a client's requests share one idle set and
//! connection reuse is visible (each answer names the backend connection it came on).
//! Every wait is on a response or a backend event, never a sleep.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use cairn_ingress_proxy::{ForwardConfig, Inputs, Routes, ServeConfig, Served, Snapshot, Workers};
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::Ingress;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

const BIG: usize = 1 << 20;

/// The backend's answer to `method path` on its connection number `conn`, and whether
/// it closes the connection after it.
fn script(method: &str, path: &str, conn: usize) -> (Vec<u8>, bool) {
    let ok = |body: &str| {
        let head = format!(
            "HTTP/1.1 200 OK\r\nx-conn: {conn}\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        (head + body).into_bytes()
    };
    match (method, path) {
        ("GET", "/chunked") => (
            format!(
                "HTTP/1.1 200 OK\r\nx-conn: {conn}\r\nTransfer-Encoding: chunked\r\n\r\n\
                     5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"
            )
            .into_bytes(),
            false,
        ),
        ("HEAD", _) => (
            format!("HTTP/1.1 200 OK\r\nx-conn: {conn}\r\nContent-Length: 1000\r\n\r\n")
                .into_bytes(),
            false,
        ),
        (_, "/early-hints") => {
            let mut answer = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>\r\n\r\n".to_vec();
            answer.extend(ok("after hints"));
            (answer, false)
        }
        (_, "/until-close") => (
            format!("HTTP/1.1 200 OK\r\nx-conn: {conn}\r\nConnection: close\r\n\r\nuntil close")
                .into_bytes(),
            true,
        ),
        (_, "/bye") => (ok("bye"), true),
        (_, "/te-and-length") => (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 100\r\n\r\n\
              5\r\nhello\r\n0\r\n\r\n"
                .to_vec(),
            false,
        ),
        (_, "/http10") => (
            b"HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nold".to_vec(),
            true,
        ),
        (_, "/garbage") => (b"SSH-2.0-OpenSSH_9.2\r\n\r\n".to_vec(), true),
        (_, "/bad-chunks") => (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".to_vec(),
            true,
        ),
        (_, "/huge-head") => {
            let filler = "a".repeat(70 * 1024);
            (
                format!("HTTP/1.1 200 OK\r\nx-big: {filler}\r\n\r\n").into_bytes(),
                true,
            )
        }
        (_, "/big") => {
            let head =
                format!("HTTP/1.1 200 OK\r\nx-conn: {conn}\r\nContent-Length: {BIG}\r\n\r\n");
            let mut answer = head.into_bytes();
            answer.extend((0..BIG).map(|i| (i % 251) as u8));
            (answer, false)
        }
        _ => (ok(&format!("conn {conn}")), false),
    }
}

/// The backend: each request's head read, its scripted answer written; tells `closed`
/// when it has closed a connection.
async fn backend(closed: mpsc::UnboundedSender<usize>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let conn = count.fetch_add(1, Ordering::SeqCst) + 1;
            tokio::spawn(serve_raw(stream, conn, closed.clone()));
        }
    });
    addr
}

async fn serve_raw(mut stream: TcpStream, conn: usize, closed: mpsc::UnboundedSender<usize>) {
    let mut buf = Vec::new();
    loop {
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            let mut more = [0u8; 4096];
            match stream.read(&mut more).await {
                Ok(n @ 1..) => buf.extend_from_slice(&more[..n]),
                _ => return,
            }
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        buf.drain(..end + 4);
        let mut words = head.split_whitespace();
        let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
        let (answer, close) = script(method, path, conn);
        stream.write_all(&answer).await.unwrap();
        if close {
            drop(stream);
            let _ = closed.send(conn);
            return;
        }
    }
}

struct Proxy {
    http: SocketAddr,
    closed: mpsc::UnboundedReceiver<usize>,
    _stop: watch::Sender<bool>,
    _served: Served,
    _workers: Workers,
}

async fn start() -> Proxy {
    let (tell, closed) = mpsc::unbounded_channel();
    let endpoint = backend(tell).await;
    let ingress: Ingress = serde_json::from_value(json!({
        "metadata": {"namespace": "default", "name": "raw"},
        "spec": {"defaultBackend": {"service": {"name": "raw", "port": {"number": 80}}}}
    }))
    .unwrap();
    let service: Service = serde_json::from_value(json!({
        "metadata": {"namespace": "default", "name": "raw"},
        "spec": {"ports": [{"port": 80}]}
    }))
    .unwrap();
    let slice: EndpointSlice = serde_json::from_value(json!({
        "metadata": {"namespace": "default", "name": "raw-1",
                     "labels": {"kubernetes.io/service-name": "raw"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["127.0.0.1"]}],
        "ports": [{"port": endpoint.port(), "protocol": "TCP"}]
    }))
    .unwrap();
    let routes = Arc::new(Routes::default());
    let (snapshot, problems) = Snapshot::build(Inputs {
        ingresses: vec![&ingress],
        services: vec![&service],
        slices: vec![&slice],
        secrets: vec![],
        gateways: vec![],
    });
    assert!(problems.is_empty(), "{problems:?}");
    routes.replace(snapshot);
    let workers = Workers::start(1, &routes, &ForwardConfig::default()).unwrap();
    let socket = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let http = socket.local_addr().unwrap();
    let (stop, stopping) = watch::channel(false);
    let served = workers
        .serve(socket, None, true, &ServeConfig::default(), &stopping)
        .unwrap();
    Proxy {
        http,
        closed,
        _stop: stop,
        _served: served,
        _workers: workers,
    }
}

async fn client(addr: SocketAddr) -> SendRequest<Empty<Bytes>> {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    sender
}

struct Answer {
    status: StatusCode,
    version: http::Version,
    conn: String,
    length: Option<String>,
    body: Bytes,
}

async fn ask(sender: &mut SendRequest<Empty<Bytes>>, method: Method, path: &str) -> Answer {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "raw.example")
        .body(Empty::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let header = |name| {
        let value = response.headers().get(name)?;
        Some(value.to_str().unwrap().to_string())
    };
    let (conn, length) = (
        header("x-conn").unwrap_or_default(),
        header("content-length"),
    );
    let (status, version) = (response.status(), response.version());
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Answer {
        status,
        version,
        conn,
        length,
        body,
    }
}

#[tokio::test]
async fn chunked_head_and_interim_answers_pass_through_on_one_reused_connection() {
    let p = start().await;
    let mut c = client(p.http).await;
    let chunked = ask(&mut c, Method::GET, "/chunked").await;
    assert_eq!(chunked.status, StatusCode::OK);
    assert_eq!(chunked.body, "hello world");
    assert_eq!(chunked.conn, "1");
    let head = ask(&mut c, Method::HEAD, "/").await;
    assert_eq!(head.status, StatusCode::OK);
    assert_eq!(
        head.length.as_deref(),
        Some("1000"),
        "HEAD keeps the length"
    );
    assert!(head.body.is_empty());
    let hinted = ask(&mut c, Method::GET, "/early-hints").await;
    assert_eq!(
        (hinted.status, &hinted.body[..]),
        (StatusCode::OK, &b"after hints"[..])
    );
    let plain = ask(&mut c, Method::GET, "/").await;
    assert_eq!(
        plain.body, "conn 1",
        "every answer came on the first connection"
    );
    let big = ask(&mut c, Method::GET, "/big").await;
    assert_eq!(big.body.len(), BIG);
    assert!(big
        .body
        .iter()
        .enumerate()
        .all(|(i, b)| *b == (i % 251) as u8));
    assert_eq!(
        big.conn, "1",
        "a large body is read across many reads and reused"
    );
    assert_eq!(ask(&mut c, Method::GET, "/").await.body, "conn 1");
    // Both framings: the chunks count and the length goes (RFC 9112 §6.3).
    let both = ask(&mut c, Method::GET, "/te-and-length").await;
    assert_eq!(
        (both.status, &both.body[..]),
        (StatusCode::OK, &b"hello"[..])
    );
    assert_ne!(both.length.as_deref(), Some("100"));
    // An HTTP/1.0 endpoint's answer goes out in the proxy's own version.
    let old = ask(&mut c, Method::GET, "/http10").await;
    assert_eq!(
        (old.version, &old.body[..]),
        (http::Version::HTTP_11, &b"old"[..])
    );
    assert_eq!(ask(&mut c, Method::GET, "/").await.status, StatusCode::OK);
}

#[tokio::test]
async fn a_connection_the_backend_closes_is_not_reused_and_no_request_fails() {
    let mut p = start().await;
    let mut c = client(p.http).await;
    let until_close = ask(&mut c, Method::GET, "/until-close").await;
    assert_eq!(
        (until_close.status, &until_close.body[..]),
        (StatusCode::OK, &b"until close"[..])
    );
    assert_eq!(p.closed.recv().await, Some(1));
    assert_eq!(ask(&mut c, Method::GET, "/").await.body, "conn 2");
    // Kept alive by its answer, then closed by the backend while idle in the pool.
    let bye = ask(&mut c, Method::GET, "/bye").await;
    assert_eq!((bye.status, bye.conn.as_str()), (StatusCode::OK, "2"));
    assert_eq!(p.closed.recv().await, Some(2));
    let after = ask(&mut c, Method::GET, "/").await;
    assert_eq!(
        (after.status, &after.body[..]),
        (StatusCode::OK, &b"conn 3"[..])
    );
}

#[tokio::test]
async fn malformed_answers_are_bad_gateway_saying_why() {
    let p = start().await;
    let mut c = client(p.http).await;
    let garbage = ask(&mut c, Method::GET, "/garbage").await;
    assert_eq!(garbage.status, StatusCode::BAD_GATEWAY);
    let why = String::from_utf8_lossy(&garbage.body);
    assert!(why.contains("response head is not HTTP/1.x"), "{why}");
    let huge = ask(&mut c, Method::GET, "/huge-head").await;
    assert_eq!(huge.status, StatusCode::BAD_GATEWAY);
    let why = String::from_utf8_lossy(&huge.body);
    assert!(why.contains("longer than 65536 bytes"), "{why}");
    assert_eq!(ask(&mut c, Method::GET, "/").await.status, StatusCode::OK);
    // A body that fails before any of it reached the client: a 502 still, and the
    // client's connection closes.
    let cut = ask(&mut c, Method::GET, "/bad-chunks").await;
    assert_eq!(cut.status, StatusCode::BAD_GATEWAY);
    let why = String::from_utf8_lossy(&cut.body);
    assert!(why.contains("chunk size"), "{why}");
}
