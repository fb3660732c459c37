//! Bearer-token auth: a tiny token server + challenging proxy in front of the local
//! docker-registry (distribution's token mode would need a JWT signer and certificates).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use cairn_image::{pull, Credentials, ErrorKind, PullOptions};
use cairn_testsupport::{Containerd, Registry};

const TOKEN: &str = "tok-2f9c";
const BASIC_BOB: &str = "Basic Ym9iOnB3"; // bob:pw

struct Shared {
    backend: String,
    addr: String,
    allow_anonymous: bool,
    token_requests: Mutex<Vec<String>>,
}

async fn token(State(s): State<Arc<Shared>>, headers: HeaderMap, req: Request) -> Response {
    let query = req.uri().query().unwrap_or_default().to_owned();
    s.token_requests.lock().unwrap().push(query);
    let auth = headers.get("authorization").and_then(|v| v.to_str().ok());
    let ok = match auth {
        Some(a) => a == BASIC_BOB,
        None => s.allow_anonymous,
    };
    if !ok {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    (
        [("content-type", "application/json")],
        format!(r#"{{"token":"{TOKEN}","expires_in":300}}"#),
    )
        .into_response()
}

async fn proxy(State(s): State<Arc<Shared>>, req: Request) -> Response {
    let authorized = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        == Some(&format!("Bearer {TOKEN}"));
    let path = req.uri().path().to_owned();
    if !authorized {
        let challenge = format!(
            r#"Bearer realm="http://{}/token",service="cairn-test",scope="repository:cairn/busybox:pull""#,
            s.addr
        );
        return (
            StatusCode::UNAUTHORIZED,
            [("www-authenticate", challenge)],
            r#"{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}"#,
        )
            .into_response();
    }
    let mut upstream = cairn_testsupport::api_client::plain_http_builder()
        .build()
        .unwrap()
        .get(format!("http://{}{path}", s.backend));
    if let Some(accept) = req.headers().get("accept") {
        upstream = upstream.header("accept", accept.clone());
    }
    let resp = upstream.send().await.unwrap();
    let mut out = Response::builder().status(resp.status().as_u16());
    for name in ["content-type", "docker-content-digest", "content-length"] {
        if let Some(v) = resp.headers().get(name) {
            out = out.header(name, v.as_bytes());
        }
    }
    out.body(Body::from(resp.bytes().await.unwrap())).unwrap()
}

async fn start_proxy(backend: String, allow_anonymous: bool) -> Arc<Shared> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let shared = Arc::new(Shared {
        backend,
        addr: listener.local_addr().unwrap().to_string(),
        allow_anonymous,
        token_requests: Mutex::new(Vec::new()),
    });
    let app = Router::new()
        .route("/token", get(token))
        .fallback(proxy)
        .with_state(shared.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    shared
}

fn opts(credentials: Vec<Credentials>) -> PullOptions {
    PullOptions {
        credentials,
        hosts_dir: None,
        ..PullOptions::default()
    }
}

#[tokio::test]
async fn bearer_token_with_credentials() {
    let containerd = Containerd::start().unwrap();
    let registry = Registry::start().unwrap();
    let (_, image) = registry.push_busybox().await.unwrap();
    let proxy = start_proxy(registry.addr(), false).await;
    let reference = format!("{}/cairn/busybox:latest", proxy.addr);
    let ch = containerd.channel().await.unwrap();

    let err = pull(ch.clone(), "bearer", &reference, &opts(vec![]))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unauthorized, "{err}");
    assert!(
        err.to_string().contains("failed to fetch anonymous token"),
        "{err}"
    );

    let wrong = vec![Credentials::basic("bob", "wrong")];
    let err = pull(ch.clone(), "bearer", &reference, &opts(wrong))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unauthorized, "{err}");

    let creds = vec![
        Credentials::basic("bob", "wrong"),
        Credentials::basic("bob", "pw"),
    ];
    let info = pull(ch, "bearer", &reference, &opts(creds)).await.unwrap();
    assert_eq!(info.id, image.config_digest());
    let requests = proxy.token_requests.lock().unwrap().clone();
    assert!(
        requests.iter().all(|q| q.contains("service=cairn-test")
            && q.contains("scope=repository%3Acairn%2Fbusybox%3Apull")),
        "{requests:?}"
    );
}

#[tokio::test]
async fn anonymous_bearer_token() {
    let containerd = Containerd::start().unwrap();
    let registry = Registry::start().unwrap();
    let (_, image) = registry.push_busybox().await.unwrap();
    let proxy = start_proxy(registry.addr(), true).await;
    let reference = format!("{}/cairn/busybox:latest", proxy.addr);
    let ch = containerd.channel().await.unwrap();
    let info = pull(ch, "bearer", &reference, &opts(vec![])).await.unwrap();
    assert_eq!(info.id, image.config_digest());
    // One token for the whole pull: it is reused for every request to the host.
    assert_eq!(proxy.token_requests.lock().unwrap().len(), 1);
}
