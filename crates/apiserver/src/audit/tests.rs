#![allow(clippy::unwrap_used)]

use super::*;
use cairn_audit::MemorySink;
use http_body_util::BodyExt;

const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: None
  resources: [{group: "", resources: [events]}]
- level: RequestResponse
  resources: [{group: "", resources: [configmaps]}]
  omitManagedFields: true
- level: Metadata
  omitStages: [RequestReceived]
"#;

fn auditor() -> (Auditor, MemorySink) {
    let sink = MemorySink::default();
    let auditor = Auditor {
        policy: Policy::parse(POLICY, "p").unwrap(),
        sink: Arc::new(sink.clone()),
    };
    (auditor, sink)
}

fn request(method: http::Method, uri: &str, body: &str) -> (Request, RequestInfo) {
    let req = http::Request::builder()
        .method(method.clone())
        .uri(uri)
        .header("user-agent", "kubectl/v1.33.0")
        .header("x-forwarded-for", "203.0.113.7")
        .body(Body::from(body.to_string()))
        .unwrap();
    let info = RequestInfo::new(&method, req.uri().path(), req.uri().query());
    (req, info)
}

fn json_response(code: u16, body: &str) -> Response {
    http::Response::builder()
        .status(code)
        .body(Body::from(body.to_string()))
        .unwrap()
}

const REMOTE: &str = "192.0.2.1:5000";

#[tokio::test]
async fn a_create_at_metadata_is_one_event_naming_the_object() {
    let (auditor, sink) = auditor();
    let alice = UserInfo::new("alice", vec!["devs".into()]);
    let (req, info) = request(
        http::Method::POST,
        "/api/v1/namespaces/ns/pods?dryRun=All",
        "{}",
    );
    let mut cx = auditor
        .begin(&req, &info, Some(&alice), REMOTE.parse().unwrap(), "id-1")
        .unwrap();
    cx.authorized(true, "RBAC: allowed by ClusterRoleBinding");
    let created = r#"{"metadata":{"name":"web-x1","namespace":"ns"}}"#;
    let response = cx.finish(json_response(201, created)).await;
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, created.as_bytes(), "the client still gets the body");
    let events = sink.events();
    assert_eq!(events.len(), 1, "RequestReceived is omitted: {events:?}");
    let e = &events[0];
    assert_eq!(
        (e.stage, e.level),
        (Stage::ResponseComplete, Level::Metadata)
    );
    assert_eq!(e.audit_id, "id-1");
    assert_eq!(e.verb, "create");
    assert_eq!(e.request_uri, "/api/v1/namespaces/ns/pods?dryRun=All");
    assert_eq!(e.user.username, "alice");
    assert_eq!(e.source_ips, ["203.0.113.7", "192.0.2.1"]);
    assert_eq!(e.user_agent, "kubectl/v1.33.0");
    let r = e.object_ref.as_ref().unwrap();
    assert_eq!(
        (r.resource.as_str(), r.namespace.as_str(), r.name.as_str()),
        ("pods", "ns", "web-x1")
    );
    assert_eq!(r.api_version, "v1");
    assert_eq!(e.response_status.as_ref().unwrap().code, 201);
    assert_eq!(e.annotations[DECISION], "allow");
    assert!(e.request_object.is_none() && e.response_object.is_none());
}

#[tokio::test]
async fn request_response_records_both_objects_and_failures_their_status() {
    let (auditor, sink) = auditor();
    let admin = UserInfo::new("admin", vec![]);
    let body = r#"{"metadata":{"name":"c","managedFields":[{}]},"data":{"k":"v"}}"#;
    let (req, info) = request(http::Method::POST, "/api/v1/namespaces/ns/configmaps", body);
    let mut cx = auditor
        .begin(&req, &info, Some(&admin), REMOTE.parse().unwrap(), "id-2")
        .unwrap();
    let req = cx.record_request_body(req).await.unwrap();
    let passed = req.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(passed, body.as_bytes(), "the handler still gets the body");
    let conflict = r#"{"kind":"Status","status":"Failure","message":"configmaps \"c\" already exists","reason":"AlreadyExists","code":409}"#;
    let response = cx.finish(json_response(409, conflict)).await;
    let sent = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(
        sent,
        conflict.as_bytes(),
        "the client gets the body as it was"
    );
    let events = sink.events();
    assert_eq!(
        events.iter().map(|e| e.stage).collect::<Vec<_>>(),
        [Stage::RequestReceived, Stage::ResponseComplete]
    );
    let done = &events[1];
    let req_obj = done.request_object.as_ref().unwrap();
    assert_eq!(req_obj["data"]["k"], "v");
    assert!(req_obj["metadata"].get("managedFields").is_none());
    let status = done.response_status.as_ref().unwrap();
    assert_eq!(
        (status.code, status.reason.as_str(), status.status.as_str()),
        (409, "AlreadyExists", "Failure")
    );
    assert_eq!(status.message, "configmaps \"c\" already exists");
    assert_eq!(done.response_object.as_ref().unwrap()["code"], 409);
}

/// A list answered in chunks, as the list handler streams it.
fn streamed_list(items: usize, item: &str) -> Response {
    let mut chunks = vec![Ok::<_, std::convert::Infallible>(Bytes::from_static(
        br#"{"kind":"ConfigMapList","items":["#,
    ))];
    for i in 0..items {
        let sep = if i == 0 { "" } else { "," };
        chunks.push(Ok(Bytes::from(format!("{sep}{item}"))));
    }
    chunks.push(Ok(Bytes::from_static(b"]}")));
    let body = Body::from_stream(futures::stream::iter(chunks));
    http::Response::builder().status(200).body(body).unwrap()
}

#[tokio::test]
async fn request_response_records_a_streamed_list_at_its_end_and_truncates_a_large_one() {
    let (auditor, sink) = auditor();
    let admin = UserInfo::new("admin", vec![]);
    let item = format!(
        r#"{{"metadata":{{"name":"c"}},"data":{{"k":"{}"}}}}"#,
        "v".repeat(1000)
    );
    for (items, id) in [(3, "small"), (4000, "large")] {
        let (req, info) = request(http::Method::GET, "/api/v1/namespaces/ns/configmaps", "");
        let cx = auditor
            .begin(&req, &info, Some(&admin), REMOTE.parse().unwrap(), id)
            .unwrap();
        let response = cx.finish(streamed_list(items, &item)).await;
        assert!(
            sink.events()
                .iter()
                .all(|e| e.audit_id != id || e.stage != Stage::ResponseComplete),
            "{id}: nothing is recorded before the list has streamed"
        );
        let sent = response.into_body().collect().await.unwrap().to_bytes();
        let list: Value = serde_json::from_slice(&sent).unwrap();
        assert_eq!(
            list["items"].as_array().unwrap().len(),
            items,
            "{id}: the client gets it all"
        );
        let events = sink.events();
        let done = events
            .iter()
            .find(|e| e.audit_id == id && e.stage == Stage::ResponseComplete)
            .unwrap();
        match id {
            "small" => {
                assert_eq!(
                    done.response_object.as_ref().unwrap()["items"]
                        .as_array()
                        .unwrap()
                        .len(),
                    3
                );
                assert!(!done.annotations.contains_key(TRUNCATED));
            }
            _ => {
                assert!(done.response_object.is_none(), "a 4 MB list is not kept");
                assert_eq!(done.annotations[TRUNCATED], "true");
            }
        }
    }
}

#[tokio::test]
async fn long_running_requests_complete_when_their_body_ends() {
    let (auditor, sink) = auditor();
    let admin = UserInfo::new("admin", vec![]);
    let (req, info) = request(http::Method::GET, "/api/v1/pods?watch=true", "");
    let cx = auditor
        .begin(&req, &info, Some(&admin), REMOTE.parse().unwrap(), "id-3")
        .unwrap();
    let response = cx
        .finish(json_response(200, "{\"type\":\"ADDED\"}\n"))
        .await;
    let stages = || sink.events().iter().map(|e| e.stage).collect::<Vec<_>>();
    assert_eq!(stages(), [Stage::ResponseStarted]);
    let _ = response.into_body().collect().await.unwrap();
    assert_eq!(stages(), [Stage::ResponseStarted, Stage::ResponseComplete]);
    assert_eq!(sink.events()[1].verb, "watch");
}

#[tokio::test]
async fn failed_authentication_and_none_rules() {
    let (auditor, sink) = auditor();
    let (req, info) = request(http::Method::GET, "/api/v1/namespaces/ns/pods", "");
    let mut cx = auditor
        .begin(&req, &info, None, REMOTE.parse().unwrap(), "id-4")
        .unwrap();
    cx.complete_now(json_response(401, "{}"));
    let events = sink.events();
    assert_eq!(events.len(), 1);
    assert_eq!(
        (events[0].stage, events[0].user.username.as_str()),
        (Stage::ResponseStarted, "")
    );
    assert_eq!(events[0].response_status.as_ref().unwrap().code, 401);
    let (req, info) = request(http::Method::POST, "/api/v1/namespaces/ns/events", "{}");
    let admin = UserInfo::new("admin", vec![]);
    assert!(auditor
        .begin(&req, &info, Some(&admin), REMOTE.parse().unwrap(), "id-5")
        .is_none());
}

#[tokio::test]
async fn a_request_whose_client_leaves_still_ends_once() {
    let (auditor, sink) = auditor();
    let admin = UserInfo::new("admin", vec![]);
    let (req, info) = request(http::Method::DELETE, "/api/v1/namespaces/ns/pods/p", "");
    let cx = auditor
        .begin(&req, &info, Some(&admin), REMOTE.parse().unwrap(), "id-6")
        .unwrap();
    drop(cx);
    let events = sink.events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].stage, Stage::ResponseComplete);
    assert!(events[0].response_status.is_none());
    // And a finished request is not ended twice.
    let (req, info) = request(http::Method::GET, "/api/v1/pods?watch=true", "");
    let cx = auditor
        .begin(&req, &info, Some(&admin), REMOTE.parse().unwrap(), "id-7")
        .unwrap();
    drop(cx.finish(json_response(200, "")).await);
    let ends = sink
        .events()
        .iter()
        .filter(|e| e.audit_id == "id-7" && e.stage == Stage::ResponseComplete)
        .count();
    assert_eq!(ends, 1);
}
