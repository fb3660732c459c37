//! The in-process connection the embedded scheduler and controllers use: requests act
//! as the connection's own user (whatever credentials they carry), are authorized like
//! any other, and watches stream.

// Test code: a failed step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use serde_json::{json, Value};

async fn raw(client: &kube::Client, method: &str, path: &str, body: Value) -> (u16, Value) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .header("authorization", "Bearer made-up")
        .body(if body.is_null() {
            Vec::new()
        } else {
            serde_json::to_vec(&body).unwrap()
        })
        .unwrap();
    match client.request::<Value>(req).await {
        Ok(v) => (200, v),
        Err(kube::Error::Api(status)) => (status.code, json!({"reason": status.reason})),
        Err(e) => panic!("{method} {path}: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_process_requests_act_as_their_connections_user() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = cairn_apiserver::ServerConfig::new(dir.path().join("control"));
    config.bind = "127.0.0.1:0".parse().unwrap();
    let server = cairn_apiserver::start(config).await.unwrap();
    let connect = |user: &str, groups: &[&str]| {
        let groups = groups.iter().map(|g| g.to_string()).collect();
        kube::Client::new(server.in_process_service(user, groups).unwrap(), "default")
    };
    let nobody = connect("nobody", &[]);
    let admin = connect("in-process-admin", &["system:masters"]);

    // The connection's user, not the made-up token the request carried.
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let path = "/apis/authentication.k8s.io/v1/selfsubjectreviews";
    let (code, me) = raw(&nobody, "POST", path, review).await;
    assert_eq!(code, 200);
    assert_eq!(me["status"]["userInfo"]["username"], "nobody");
    let groups = me["status"]["userInfo"]["groups"].as_array().unwrap();
    assert!(
        groups.contains(&json!("system:authenticated")),
        "{groups:?}"
    );

    let (code, denied) = raw(
        &nobody,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        Value::Null,
    )
    .await;
    assert_eq!((code, denied["reason"].as_str()), (403, Some("Forbidden")));

    let configmaps: Api<ConfigMap> = Api::default_namespaced(admin.clone());
    let mut events = configmaps
        .watch(&WatchParams::default().timeout(30), "0")
        .await
        .unwrap()
        .boxed();
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "seen"}, "data": {"k": "v"}})).unwrap();
    configmaps
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    loop {
        match events.next().await.expect("the watch ended").unwrap() {
            WatchEvent::Added(cm) if cm.metadata.name.as_deref() == Some("seen") => break,
            _ => {}
        }
    }
    server.stop().await.unwrap();
}
