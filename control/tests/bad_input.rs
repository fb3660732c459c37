//! Bad input gets a Status with the right code and reason, and loses nothing accepted.

// Test code: a failed setup step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::Server;
use serde_json::{json, Value};

struct Api {
    c: reqwest::Client,
    url: String,
}

impl Api {
    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        ct: &str,
        body: Vec<u8>,
    ) -> (u16, Value) {
        let resp = self
            .c
            .request(method, format!("{}{path}", self.url))
            .header("content-type", ct)
            .body(body)
            .send()
            .await
            .unwrap();
        let code = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        let v = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("answer to {path} is not JSON ({e}): {text}"));
        (code, v)
    }

    async fn post_json(&self, path: &str, v: &Value) -> (u16, Value) {
        self.send(
            reqwest::Method::POST,
            path,
            "application/json",
            serde_json::to_vec(v).unwrap(),
        )
        .await
    }
}

fn assert_status(got: &(u16, Value), code: u16, reason: &str) {
    assert_eq!(got.0, code, "{}", got.1);
    assert_eq!(got.1["kind"], "Status", "{}", got.1);
    assert_eq!(got.1["reason"], reason, "{}", got.1);
    assert_eq!(got.1["code"], code);
    assert!(!got.1["message"].as_str().unwrap_or("").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_status_errors() {
    let dir = tempfile::tempdir().unwrap();
    // The API alone: an embedded scheduler would update the pods under test (PodScheduled)
    // and turn the stale-resourceVersion checks into races.
    let server = Server::start_with(dir.path(), &["--scheduler=false"]);
    let api = Api {
        c: reqwest::Client::builder()
            .timeout(Duration::from_secs(20))
            .build()
            .unwrap(),
        url: server.url.clone(),
    };
    let pods = "/api/v1/namespaces/default/pods";
    let good = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "keep"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    let created = api.post_json(pods, &good).await;
    assert_eq!(created.0, 201, "{}", created.1);
    let rv = created.1["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();

    // Malformed bodies.
    assert_status(
        &api.send(
            reqwest::Method::POST,
            pods,
            "application/json",
            b"{\"a\":".to_vec(),
        )
        .await,
        400,
        "BadRequest",
    );
    assert_status(
        &api.send(
            reqwest::Method::POST,
            pods,
            "application/yaml",
            b"a: [b\n c: :".to_vec(),
        )
        .await,
        400,
        "BadRequest",
    );
    assert_status(
        &api.send(
            reqwest::Method::POST,
            pods,
            "application/vnd.kubernetes.protobuf",
            b"k8s\x00\xff\xff\xff".to_vec(),
        )
        .await,
        400,
        "BadRequest",
    );
    assert_status(
        &api.send(reqwest::Method::POST, pods, "text/html", b"{}".to_vec())
            .await,
        415,
        "UnsupportedMediaType",
    );
    assert_status(
        &api.post_json(pods, &json!([1, 2])).await,
        400,
        "BadRequest",
    );

    // Wrong apiVersion or kind.
    let mut wrong = good.clone();
    wrong["apiVersion"] = json!("apps/v1");
    assert_status(&api.post_json(pods, &wrong).await, 400, "BadRequest");
    let mut wrong = good.clone();
    wrong["kind"] = json!("Service");
    assert_status(&api.post_json(pods, &wrong).await, 400, "BadRequest");

    // Invalid objects: 422 with field causes.
    let mut bad_name = good.clone();
    bad_name["metadata"]["name"] = json!("Bad_Name");
    let got = api.post_json(pods, &bad_name).await;
    assert_status(&got, 422, "Invalid");
    assert_eq!(got.1["details"]["causes"][0]["field"], "metadata.name");
    let no_containers = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "empty"}, "spec": {"containers": []}});
    let got = api.post_json(pods, &no_containers).await;
    assert_status(&got, 422, "Invalid");
    let wrong_type = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "typed"}, "spec": {"containers": "nope"}});
    assert_status(&api.post_json(pods, &wrong_type).await, 400, "BadRequest");

    // Unknown fields under Strict validation.
    let mut unknown = good.clone();
    unknown["metadata"]["name"] = json!("strict");
    unknown["spec"]["bogus"] = json!(1);
    let got = api
        .post_json(&format!("{pods}?fieldValidation=Strict"), &unknown)
        .await;
    assert_status(&got, 400, "BadRequest");
    assert!(
        got.1["message"].as_str().unwrap().contains("spec.bogus"),
        "{}",
        got.1
    );

    // Oversize body.
    let mut huge = good.clone();
    huge["metadata"]["name"] = json!("huge");
    huge["metadata"]["annotations"] = json!({"x": "a".repeat(4 * 1024 * 1024)});
    assert_status(
        &api.post_json(pods, &huge).await,
        413,
        "RequestEntityTooLarge",
    );

    // Unknown resources and paths.
    assert_status(
        &api.send(reqwest::Method::GET, "/api/v1/widgets", "", vec![])
            .await,
        404,
        "NotFound",
    );
    assert_status(
        &api.send(reqwest::Method::GET, "/apis/nope/v1/things", "", vec![])
            .await,
        404,
        "NotFound",
    );
    assert_status(
        &api.send(reqwest::Method::GET, "/nothing/here", "", vec![])
            .await,
        404,
        "NotFound",
    );
    assert_status(
        &api.send(reqwest::Method::GET, &format!("{pods}/missing"), "", vec![])
            .await,
        404,
        "NotFound",
    );
    assert_status(
        &api.send(
            reqwest::Method::POST,
            &format!("{pods}/keep"),
            "application/json",
            b"{}".to_vec(),
        )
        .await,
        405,
        "MethodNotAllowed",
    );

    // Missing namespace, duplicate name.
    assert_status(
        &api.post_json("/api/v1/namespaces/nowhere/pods", &good)
            .await,
        404,
        "NotFound",
    );
    assert_status(&api.post_json(pods, &good).await, 409, "AlreadyExists");

    // Conflicting update: stale resourceVersion.
    let mut update = created.1.clone();
    update["metadata"]["labels"] = json!({"v": "1"});
    let ok = api
        .send(
            reqwest::Method::PUT,
            &format!("{pods}/keep"),
            "application/json",
            serde_json::to_vec(&update).unwrap(),
        )
        .await;
    assert_eq!(ok.0, 200, "{}", ok.1);
    update["metadata"]["resourceVersion"] = json!(rv);
    update["metadata"]["labels"] = json!({"v": "2"});
    let stale = api
        .send(
            reqwest::Method::PUT,
            &format!("{pods}/keep"),
            "application/json",
            serde_json::to_vec(&update).unwrap(),
        )
        .await;
    assert_status(&stale, 409, "Conflict");

    // Bad selectors and query parameters.
    assert_status(
        &api.send(
            reqwest::Method::GET,
            &format!("{pods}?labelSelector=a%20in%20(b"),
            "",
            vec![],
        )
        .await,
        400,
        "BadRequest",
    );
    assert_status(
        &api.send(
            reqwest::Method::GET,
            &format!("{pods}?fieldSelector=spec.bogus%3Dx"),
            "",
            vec![],
        )
        .await,
        400,
        "BadRequest",
    );
    assert_status(
        &api.send(
            reqwest::Method::GET,
            &format!("{pods}?limit=abc"),
            "",
            vec![],
        )
        .await,
        400,
        "BadRequest",
    );
    assert_status(
        &api.send(
            reqwest::Method::GET,
            &format!("{pods}?continue=%25%25"),
            "",
            vec![],
        )
        .await,
        400,
        "BadRequest",
    );

    // Bad patches.
    let bad_patch = api
        .send(
            reqwest::Method::PATCH,
            &format!("{pods}/keep"),
            "application/json-patch+json",
            b"[{\"op\":\"explode\"}]".to_vec(),
        )
        .await;
    assert!(bad_patch.0 == 422 || bad_patch.0 == 400, "{}", bad_patch.1);
    let bad_patch = api
        .send(
            reqwest::Method::PATCH,
            &format!("{pods}/keep"),
            "application/merge-patch+json",
            b"{\"spec\":".to_vec(),
        )
        .await;
    assert_status(&bad_patch, 400, "BadRequest");

    // Nothing accepted was lost along the way.
    let (code, kept) = api
        .send(reqwest::Method::GET, &format!("{pods}/keep"), "", vec![])
        .await;
    assert_eq!(code, 200);
    assert_eq!(kept["metadata"]["labels"]["v"], "1");
    assert_eq!(kept["spec"]["containers"][0]["image"], "busybox");
}
