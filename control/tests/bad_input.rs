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
        c: server
            .http_builder()
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

    malformed_bodies(&api, pods).await;
    wrong_kind_invalid_and_unknown_fields(&api, pods, &good).await;
    oversize_body_and_unknown_paths(&api, pods, &good).await;
    missing_namespace_duplicate_and_stale_update(&api, pods, &good, &created, &rv).await;
    bad_selectors_and_query_parameters(&api, pods).await;
    bad_patches(&api, pods).await;

    // Nothing accepted was lost along the way.
    let (code, kept) = api
        .send(reqwest::Method::GET, &format!("{pods}/keep"), "", vec![])
        .await;
    assert_eq!(code, 200);
    assert_eq!(kept["metadata"]["labels"]["v"], "1");
    assert_eq!(kept["spec"]["containers"][0]["image"], "busybox");
}

async fn malformed_bodies(api: &Api, pods: &str) {
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
}

async fn wrong_kind_invalid_and_unknown_fields(api: &Api, pods: &str, good: &Value) {
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
}

async fn oversize_body_and_unknown_paths(api: &Api, pods: &str, good: &Value) {
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
}

async fn missing_namespace_duplicate_and_stale_update(
    api: &Api,
    pods: &str,
    good: &Value,
    created: &(u16, Value),
    rv: &str,
) {
    // Missing namespace, duplicate name.
    assert_status(
        &api.post_json("/api/v1/namespaces/nowhere/pods", good).await,
        404,
        "NotFound",
    );
    assert_status(&api.post_json(pods, good).await, 409, "AlreadyExists");

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
}

async fn bad_selectors_and_query_parameters(api: &Api, pods: &str) {
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
}

async fn bad_patches(api: &Api, pods: &str) {
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
}

/// Objects and errors as kube-apiserver serializes them: status counters Go writes even
/// when zero, Status members in metav1.Status's order ending with a newline, subresources
/// answering only their verbs, and `pods/log` in discovery.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serialized_like_kube_apiserver() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(dir.path(), &["--scheduler=false", "--controllers="]);
    let c = server.http();
    let url = &server.url;
    workload_status_counters_written_when_zero(&c, url).await;
    not_found_status_byte_for_byte(&c, url).await;
    subresources_answer_only_their_verbs(&c, url).await;
    pods_log_and_binding_in_discovery(&c, url).await;
}

async fn workload_status_counters_written_when_zero(c: &reqwest::Client, url: &str) {
    let tmpl = json!({"metadata": {"labels": {"app": "a"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs"},
        "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": tmpl}});
    let ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds"},
        "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": tmpl}});
    for (plural, obj) in [("replicasets", rs), ("daemonsets", ds)] {
        let r = c
            .post(format!("{url}/apis/apps/v1/namespaces/default/{plural}"))
            .json(&obj)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 201);
    }
    let rs = get_json(
        c,
        format!("{url}/apis/apps/v1/namespaces/default/replicasets/rs"),
    )
    .await;
    assert_eq!(rs["status"], json!({"replicas": 0}), "{rs}");
    let ds = get_json(
        c,
        format!("{url}/apis/apps/v1/namespaces/default/daemonsets/ds"),
    )
    .await;
    for f in [
        "currentNumberScheduled",
        "numberMisscheduled",
        "desiredNumberScheduled",
        "numberReady",
    ] {
        assert_eq!(ds["status"][f], 0, "{f}: {ds}");
    }
}

async fn not_found_status_byte_for_byte(c: &reqwest::Client, url: &str) {
    let missing = c
        .get(format!("{url}/api/v1/namespaces/default/pods/nope"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(
        missing,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"pods \\\"nope\\\" not found\",\"reason\":\"NotFound\",\"details\":{\"name\":\"nope\",\"kind\":\"pods\"},\"code\":404}\n"
    );
}

async fn subresources_answer_only_their_verbs(c: &reqwest::Client, url: &str) {
    let pods = format!("{url}/api/v1/namespaces/default/pods");
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    assert_eq!(
        c.post(&pods)
            .json(&pod)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        201
    );
    for (method, sub) in [
        (reqwest::Method::GET, "binding"),
        (reqwest::Method::PUT, "log"),
        (reqwest::Method::DELETE, "status"),
    ] {
        let r = c
            .request(method.clone(), format!("{pods}/p/{sub}"))
            .json(&pod)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 405, "{method} pods/{sub}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["reason"], "MethodNotAllowed");
    }
}

async fn pods_log_and_binding_in_discovery(c: &reqwest::Client, url: &str) {
    let core = get_json(c, format!("{url}/api/v1")).await;
    let names: Vec<&str> = core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert!(
        names.contains(&"pods/log") && names.contains(&"pods/binding"),
        "{names:?}"
    );
}

async fn get_json(c: &reqwest::Client, path: String) -> Value {
    c.get(path)
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap()
}
