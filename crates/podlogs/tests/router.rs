//! The `containerLogs` endpoint over a fixture `LogSource`, spoken to over real HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cairn_podlogs::{router, LocateError, LogLocation, LogSource};
use futures::StreamExt;

struct Fixture {
    dir: PathBuf,
    running: Arc<AtomicBool>,
}

impl LogSource for Fixture {
    fn locate(
        &self,
        ns: &str,
        pod: &str,
        container: &str,
        previous: bool,
    ) -> Result<LogLocation, LocateError> {
        if ns != "default" || pod != "web" {
            return Err(LocateError::PodNotFound(pod.to_string()));
        }
        if container != "app" {
            return Err(LocateError::ContainerNotFound {
                pod: pod.into(),
                container: container.into(),
            });
        }
        if previous {
            return Ok(LogLocation::exited(self.dir.join("0.log")));
        }
        let running = Arc::clone(&self.running);
        Ok(LogLocation::running_while(
            self.dir.join("1.log"),
            move || running.load(Ordering::SeqCst),
        ))
    }
}

async fn serve(source: Fixture) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, router(Arc::new(source)))
            .await
            .unwrap();
    });
    format!("http://{addr}")
}

fn line(sec: u32, content: &str) -> String {
    format!("2024-01-01T00:00:{sec:02}Z stdout F {content}\n")
}

#[tokio::test]
async fn serves_logs_and_kubelet_errors() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("0.log"), line(1, "old")).unwrap();
    std::fs::write(
        dir.path().join("1.log"),
        line(2, "a") + &line(3, "b") + &line(4, "c"),
    )
    .unwrap();
    cairn_testsupport::api_client::install_crypto_provider();
    let running = Arc::new(AtomicBool::new(true));
    let base = serve(Fixture {
        dir: dir.path().to_path_buf(),
        running: Arc::clone(&running),
    })
    .await;
    let get = |path: &str| {
        let url = format!("{base}{path}");
        async move {
            let r = reqwest::get(&url).await.unwrap();
            let code = r.status().as_u16();
            (code, r.text().await.unwrap())
        }
    };
    assert_eq!(
        get("/containerLogs/default/web/app").await,
        (200, "a\nb\nc\n".into())
    );
    assert_eq!(
        get("/containerLogs/default/web/app?tailLines=2&timestamps=true").await,
        (
            200,
            "2024-01-01T00:00:03.000000000Z b\n2024-01-01T00:00:04.000000000Z c\n".into()
        )
    );
    assert_eq!(
        get("/containerLogs/default/web/app?limitBytes=3").await,
        (200, "a\nb".into())
    );
    assert_eq!(
        get("/containerLogs/default/web/app?previous=true").await,
        (200, "old\n".into())
    );
    assert_eq!(
        get("/containerLogs/default/nope/app").await,
        (404, "pod \"nope\" does not exist".into())
    );
    assert_eq!(
        get("/containerLogs/default/web/db").await,
        (404, "container \"db\" not found in pod \"web\"".into())
    );
    let (code, text) = get("/containerLogs/default/web/app?tailLines=x").await;
    assert_eq!(code, 400, "{text}");
    let (code, text) = get("/containerLogs/default/web/app?tailLines=-2").await;
    assert_eq!(code, 422, "{text}");
    assert!(
        text.contains("must be greater than or equal to 0"),
        "{text}"
    );

    // follow: a chunked stream that shows appended lines and ends when the container stops.
    let resp = reqwest::get(format!(
        "{base}/containerLogs/default/web/app?follow=true&tailLines=1"
    ))
    .await
    .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let mut body = resp.bytes_stream();
    let mut seen = String::new();
    let mut next = async |seen: &mut String| {
        let chunk = tokio::time::timeout(Duration::from_secs(30), body.next())
            .await
            .expect("no chunk from the follower")
            .unwrap()
            .unwrap();
        seen.push_str(std::str::from_utf8(&chunk).unwrap());
    };
    next(&mut seen).await;
    assert_eq!(seen, "c\n");
    std::fs::OpenOptions::new()
        .append(true)
        .open(dir.path().join("1.log"))
        .unwrap()
        .write_all(line(5, "live").as_bytes())
        .unwrap();
    while !seen.contains("live") {
        next(&mut seen).await;
    }
    running.store(false, Ordering::SeqCst);
    let rest = tokio::time::timeout(Duration::from_secs(30), body.next())
        .await
        .expect("the stream did not end");
    assert!(rest.is_none(), "{rest:?}");
    assert_eq!(seen, "c\nlive\n");
}
