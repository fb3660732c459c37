//! Dispatching against a fake caller: order, patches, reinvocation, failure policies.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine as _;
use bytes::Bytes;
use cairn_api::registry;
use cairn_api::status::Status;
use parking_lot::Mutex;
use serde_json::{json, Value};

use super::*;
use crate::admission::matching::Target;
use crate::admission::webhook::{Destination, Hook};

type Respond = dyn Fn(&Hook, &Value) -> Result<Value, CallError> + Send + Sync;

/// Answers each call with `respond(hook, request)` and records the webhooks called.
struct Fake {
    respond: Box<Respond>,
    calls: Mutex<Vec<String>>,
}

#[async_trait]
impl Caller for Fake {
    async fn call(&self, hook: &Hook, review: Bytes) -> Result<Bytes, CallError> {
        self.calls.lock().push(hook.name.clone());
        let review: Value = serde_json::from_slice(&review).unwrap();
        let request = &review["request"];
        let mut response = (self.respond)(hook, request)?;
        response["uid"] = request["uid"].clone();
        let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response});
        Ok(Bytes::from(serde_json::to_vec(&body).unwrap()))
    }
}

fn fake(
    respond: impl Fn(&Hook, &Value) -> Result<Value, CallError> + Send + Sync + 'static,
) -> Fake {
    Fake {
        respond: Box::new(respond),
        calls: Mutex::new(Vec::new()),
    }
}

fn hook(name: &str) -> Hook {
    Hook {
        configuration: "cfg".into(),
        name: name.into(),
        destination: Destination::Url(format!("https://127.0.0.1:1/{name}")),
        ca_bundle: Arc::new(Vec::new()),
        rules: vec![
            json!({"apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"], "operations": ["CREATE", "UPDATE"]}),
        ],
        exact_version: false,
        fail_closed: true,
        namespace_selector: json!({}),
        object_selector: json!({}),
        timeout: Duration::from_secs(1),
        mutating: true,
        reinvoke: false,
        dry_run_safe: true,
        review_version: Some(crate::admission::webhook::review::ReviewVersion::V1),
        response_limit: 1 << 20,
        match_conditions: Vec::new(),
    }
}

fn context<'a>(caller: &'a Fake, expressions: &'a ExpressionCache) -> Context<'a> {
    Context {
        caller,
        expressions,
        attributes: Attributes {
            target: Target {
                resource: registry::find("", "v1", "configmaps").unwrap(),
                subresource: None,
                operation: "CREATE",
            },
            name: "cm",
            namespace: Some("default"),
            dry_run: false,
            field_manager: None,
        },
        namespace_labels: Some([("env".to_string(), "prod".to_string())].into()),
    }
}

fn patch(ops: Value) -> Value {
    let encoded = base64::engine::general_purpose::STANDARD.encode(ops.to_string());
    json!({"allowed": true, "patchType": "JSONPatch", "patch": encoded})
}

/// Applies the patch as the server would (without re-defaulting).
fn apply(_: &Hook, obj: &mut Value, p: &Value) -> Result<(), Status> {
    *obj = cairn_apimachinery::patch::json_patch(obj, p)
        .map_err(|e| Status::bad_request(e.to_string()))?;
    Ok(())
}

fn set(configs: Vec<Hook>) -> Vec<Arc<Vec<Hook>>> {
    vec![Arc::new(configs)]
}

#[tokio::test]
async fn mutating_webhooks_run_in_order_and_see_earlier_patches() {
    let caller = fake(|h, req| {
        Ok(match h.name.as_str() {
            "first" => patch(json!([{"op": "add", "path": "/data", "value": {"a": "1"}}])),
            _ => {
                assert_eq!(
                    req["object"]["data"]["a"], "1",
                    "second sees the first's patch"
                );
                patch(json!([{"op": "add", "path": "/data/b", "value": "2"}]))
            }
        })
    });
    let exprs = ExpressionCache::default();
    let ctx = context(&caller, &exprs);
    let mut obj = json!({"metadata": {"name": "cm"}});
    mutate(
        &ctx,
        &set(vec![hook("first"), hook("second")]),
        Some(&mut obj),
        None,
        &mut apply,
    )
    .await
    .unwrap();
    assert_eq!(obj["data"], json!({"a": "1", "b": "2"}));
    assert_eq!(*caller.calls.lock(), vec!["first", "second"]);
}

#[tokio::test]
async fn if_needed_webhooks_are_reinvoked_once_after_a_later_change() {
    let caller = fake(|h, _| {
        Ok(match h.name.as_str() {
            "labeller" => {
                patch(json!([{"op": "add", "path": "/metadata/labels", "value": {"x": "y"}}]))
            }
            _ => json!({"allowed": true}),
        })
    });
    let exprs = ExpressionCache::default();
    let ctx = context(&caller, &exprs);
    let mut watcher = hook("watcher");
    watcher.reinvoke = true;
    let mut unchanged = hook("unchanged");
    unchanged.reinvoke = true;
    let mut obj = json!({"metadata": {"name": "cm"}});
    mutate(
        &ctx,
        &set(vec![watcher, hook("labeller"), unchanged]),
        Some(&mut obj),
        None,
        &mut apply,
    )
    .await
    .unwrap();
    // `unchanged` ran after the last change: no reinvocation for it.
    assert_eq!(
        *caller.calls.lock(),
        vec!["watcher", "labeller", "unchanged", "watcher"]
    );
}

#[tokio::test]
async fn failure_policy_decides_what_a_failed_call_means() {
    let caller = fake(|_, _| {
        Err(CallError::Call(
            "Post \"https://127.0.0.1:1/x?timeout=1s\": connection refused".into(),
        ))
    });
    let exprs = ExpressionCache::default();
    let ctx = context(&caller, &exprs);
    let obj = json!({"metadata": {"name": "cm"}});
    let err = validate(&ctx, &set(vec![hook("down")]), Some(&obj), None)
        .await
        .unwrap_err();
    assert_eq!(err.code, 500);
    assert_eq!(
        err.message,
        "Internal error occurred: failed calling webhook \"down\": failed to call webhook: Post \"https://127.0.0.1:1/x?timeout=1s\": connection refused"
    );
    let mut ignored = hook("down");
    ignored.fail_closed = false;
    assert!(validate(&ctx, &set(vec![ignored]), Some(&obj), None)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn validating_webhooks_deny_with_the_first_denial_and_collect_warnings() {
    let caller = fake(|h, _| {
        Ok(match h.name.as_str() {
            "deny" => json!({"allowed": false, "status": {"code": 403, "message": "not today"}}),
            _ => json!({"allowed": true, "warnings": ["from ok"]}),
        })
    });
    let exprs = ExpressionCache::default();
    let ctx = context(&caller, &exprs);
    let obj = json!({"metadata": {"name": "cm"}});
    let warnings = validate(&ctx, &set(vec![hook("ok")]), Some(&obj), None)
        .await
        .unwrap();
    assert_eq!(warnings, vec!["from ok"]);
    let err = validate(&ctx, &set(vec![hook("ok"), hook("deny")]), Some(&obj), None)
        .await
        .unwrap_err();
    assert_eq!(
        (err.code, err.message.as_str()),
        (
            403,
            "admission webhook \"deny\" denied the request: not today"
        )
    );
}

#[tokio::test]
async fn selectors_rules_and_match_conditions_choose_the_webhooks() {
    let caller = fake(|_, _| Ok(json!({"allowed": true})));
    let exprs = ExpressionCache::default();
    let ctx = context(&caller, &exprs);
    let obj = json!({"metadata": {"name": "cm", "labels": {"app": "web"}}});
    let mut other_ns = hook("other-ns");
    other_ns.namespace_selector = json!({"matchLabels": {"env": "dev"}});
    let mut other_obj = hook("other-obj");
    other_obj.object_selector = json!({"matchLabels": {"app": "db"}});
    let mut pods = hook("pods");
    pods.rules = vec![
        json!({"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "operations": ["*"]}),
    ];
    let mut conditioned = hook("conditioned");
    conditioned.match_conditions =
        vec![("named-cm".into(), "object.metadata.name == 'other'".into())];
    let mut matching = hook("matching");
    matching.match_conditions = vec![("is-create".into(), "request.operation == 'CREATE'".into())];
    validate(
        &ctx,
        &set(vec![other_ns, other_obj, pods, conditioned, matching]),
        Some(&obj),
        None,
    )
    .await
    .unwrap();
    assert_eq!(*caller.calls.lock(), vec!["matching"]);
    let mut broken = hook("broken");
    broken.match_conditions = vec![("bad".into(), "object.nope.deeper".into())];
    let err = validate(&ctx, &set(vec![broken.clone()]), Some(&obj), None)
        .await
        .unwrap_err();
    assert_eq!(err.code, 403, "{}", err.message);
    assert!(
        err.message.starts_with(
            "configmaps \"cm\" is forbidden: failed to evaluate match condition \"bad\""
        ),
        "{}",
        err.message
    );
    broken.fail_closed = false;
    validate(&ctx, &set(vec![broken]), Some(&obj), None)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_mutating_denial_stops_the_chain() {
    let caller = fake(|h, _| {
        Ok(match h.name.as_str() {
            "deny" => json!({"allowed": false, "status": {"reason": "Forbidden"}}),
            _ => json!({"allowed": true}),
        })
    });
    let exprs = ExpressionCache::default();
    let ctx = context(&caller, &exprs);
    let mut obj = json!({"metadata": {"name": "cm"}});
    let err = mutate(
        &ctx,
        &set(vec![hook("deny"), hook("after")]),
        Some(&mut obj),
        None,
        &mut apply,
    )
    .await
    .unwrap_err();
    assert_eq!(
        err.message,
        "admission webhook \"deny\" denied the request: Forbidden"
    );
    assert_eq!(*caller.calls.lock(), vec!["deny"]);
}
