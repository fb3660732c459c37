//! Acceptance (issue 15, admission webhooks): a mutating and a validating webhook served
//! over HTTPS by a test program with a throwaway CA, configured by `url` and by `service`,
//! driven with stock kubectl 1.33 and 1.27: objects are patched and rejected, warnings
//! reach kubectl, namespace selectors choose where webhooks apply, DELETE is admitted,
//! dry runs say so; `failurePolicy: Fail` vs `Ignore` with a webhook that is down or
//! hangs (its timeout, never a stuck API server); bad configurations get upstream's 422s.

// Test code: a failed setup step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
#[path = "support/webhook_server.rs"]
mod webhook_server;

use std::time::{Duration, Instant};

use common::{wait_for, Kubectl, Server};
use serde_json::Value;
use webhook_server::WebhookServer;

fn setup(name: &str) -> (tempfile::TempDir, Server, Kubectl, WebhookServer) {
    let dir = tempfile::Builder::new().prefix(name).tempdir().unwrap();
    let server = Server::start(dir.path());
    let k = Kubectl::new(33, &server);
    let hooks = WebhookServer::start();
    (dir, server, k, hooks)
}

/// Namespace `hooked` (labelled for the webhooks) and `plain` (not).
fn namespaces(k: &Kubectl) {
    k.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: hooked\n  labels:\n    webhooks: \"on\"\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: plain\n",
    );
}

/// The webhook server as Service `webhooks/hook` (no selector, Endpoints by hand).
fn webhook_service(k: &Kubectl, hooks: &WebhookServer) {
    k.ok(&["create", "namespace", "webhooks"]);
    let manifest = format!(
        r#"apiVersion: v1
kind: Service
metadata: {{name: hook, namespace: webhooks}}
spec:
  ports: [{{name: https, port: 443, targetPort: {port}}}]
---
apiVersion: v1
kind: Endpoints
metadata: {{name: hook, namespace: webhooks}}
subsets:
- addresses: [{{ip: 127.0.0.1}}]
  ports: [{{name: https, port: {port}}}]
"#,
        port = hooks.addr.port()
    );
    k.ok_stdin(&["apply", "-f", "-"], &manifest);
}

fn configurations(hooks: &WebhookServer) -> String {
    format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {{name: label-configmaps}}
webhooks:
- name: mutate.cairn.test
  clientConfig: {{url: "{mutate}", caBundle: "{ca}"}}
  rules: [{{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}}]
  namespaceSelector: {{matchLabels: {{webhooks: "on"}}}}
  sideEffects: None
  admissionReviewVersions: [v1]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {{name: check-configmaps}}
webhooks:
- name: validate.cairn.test
  clientConfig:
    service: {{namespace: webhooks, name: hook, path: /validate}}
    caBundle: "{ca}"
  rules: [{{operations: [CREATE, UPDATE, DELETE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}}]
  namespaceSelector: {{matchLabels: {{webhooks: "on"}}}}
  sideEffects: NoneOnDryRun
  admissionReviewVersions: [v1, v1beta1]
"#,
        mutate = hooks.url("/mutate"),
        ca = hooks.ca_bundle
    )
}

#[test]
fn webhooks_patch_reject_and_warn_through_kubectl() {
    let (_dir, _server, k, hooks) = setup("webhooks-e2e");
    namespaces(&k);
    webhook_service(&k, &hooks);
    k.ok_stdin(&["apply", "-f", "-"], &configurations(&hooks));
    let table = k.ok(&[
        "get",
        "validatingwebhookconfigurations,mutatingwebhookconfigurations",
    ]);
    assert!(table.contains("WEBHOOKS"), "{table}");
    assert!(table.contains("check-configmaps   1"), "{table}");

    create_is_mutated_warned_and_validated(&k, &hooks);
    rejected_in_upstreams_words(&k, &_server);
    updates_admitted_and_dry_run_stores_nothing(&k, &hooks);
    other_namespaces_skipped_and_delete_sees_old_object(&k, &hooks);
}

fn create_is_mutated_warned_and_validated(k: &Kubectl, hooks: &WebhookServer) {
    // Mutated by the url webhook, allowed with a warning by the service webhook.
    let out = k.output(&[
        "create",
        "configmap",
        "ok",
        "-n",
        "hooked",
        "--from-literal=a=b",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Warning: checked by the test webhook"),
        "{stderr}"
    );
    let cm = k.json(&["get", "configmap", "ok", "-n", "hooked"]);
    assert_eq!(cm["metadata"]["labels"]["mutated-by"], "test-webhook");
    assert_eq!(cm["data"]["injected"], "yes");
    assert_eq!(cm["data"]["a"], "b");
    // What the validating webhook was sent: the mutated object, as upstream's request.
    let sent = hooks.requests("/validate");
    let req = sent.last().unwrap();
    assert_eq!(req["operation"], "CREATE");
    assert_eq!(req["kind"]["kind"], "ConfigMap");
    assert_eq!(req["resource"]["resource"], "configmaps");
    assert_eq!(req["namespace"], "hooked");
    assert_eq!(req["object"]["data"]["injected"], "yes");
    assert_eq!(req["options"]["kind"], "CreateOptions");
    assert_eq!(req["dryRun"], false);
}

fn rejected_in_upstreams_words(k: &Kubectl, server: &Server) {
    // Rejected, in upstream's words, by both kubectl versions.
    for minor in [33, 27] {
        let kv = Kubectl::new(minor, server);
        let err = kv.fails(&[
            "create",
            "configmap",
            "bad",
            "-n",
            "hooked",
            "--from-literal=forbidden=x",
        ]);
        assert!(
            err.contains("admission webhook \"validate.cairn.test\" denied the request: the key \"forbidden\" is not allowed in data"),
            "kubectl 1.{minor}: {err}"
        );
    }
    assert!(k
        .fails(&["get", "configmap", "bad", "-n", "hooked"])
        .contains("NotFound"));
}

fn updates_admitted_and_dry_run_stores_nothing(k: &Kubectl, hooks: &WebhookServer) {
    // Updates are admitted too; a dry run says so and stores nothing.
    let err = k.fails(&[
        "patch",
        "configmap",
        "ok",
        "-n",
        "hooked",
        "-p",
        r#"{"data":{"forbidden":"1"}}"#,
    ]);
    assert!(err.contains("denied the request"), "{err}");
    k.ok(&[
        "create",
        "configmap",
        "dry",
        "-n",
        "hooked",
        "--dry-run=server",
        "--from-literal=a=b",
    ]);
    assert_eq!(hooks.requests("/validate").last().unwrap()["dryRun"], true);
    assert!(k
        .fails(&["get", "configmap", "dry", "-n", "hooked"])
        .contains("NotFound"));
}

fn other_namespaces_skipped_and_delete_sees_old_object(k: &Kubectl, hooks: &WebhookServer) {
    // Outside the selected namespace neither webhook applies.
    k.ok(&[
        "create",
        "configmap",
        "free",
        "-n",
        "plain",
        "--from-literal=forbidden=x",
    ]);
    let free = k.json(&["get", "configmap", "free", "-n", "plain"]);
    assert!(free["metadata"]["labels"].get("mutated-by").is_none());

    // DELETE: the webhook sees the stored object as oldObject.
    k.ok(&["label", "configmap", "ok", "-n", "hooked", "protect=true"]);
    let err = k.fails(&["delete", "configmap", "ok", "-n", "hooked"]);
    assert!(err.contains("this object is protected"), "{err}");
    let delete = hooks.requests("/validate");
    let delete = delete.last().unwrap();
    assert_eq!(delete["operation"], "DELETE");
    assert_eq!(delete["oldObject"]["metadata"]["name"], "ok");
    assert!(delete["object"].is_null());
    k.ok(&["label", "configmap", "ok", "-n", "hooked", "protect-"]);
    k.ok(&["delete", "configmap", "ok", "-n", "hooked"]);
}

fn failing_configuration(hooks: &WebhookServer, url: &str, policy: &str, timeout: u32) -> String {
    format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {{name: flaky}}
webhooks:
- name: flaky.cairn.test
  clientConfig: {{url: "{url}", caBundle: "{ca}"}}
  rules: [{{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}}]
  failurePolicy: {policy}
  timeoutSeconds: {timeout}
  sideEffects: None
  admissionReviewVersions: [v1]
"#,
        ca = hooks.ca_bundle
    )
}

#[test]
fn failure_policy_decides_when_a_webhook_is_down_or_hangs() {
    let (_dir, server, k, hooks) = setup("webhooks-failure");
    // Down: a port nothing listens on (bound, then released).
    let down_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let down = format!("https://127.0.0.1:{down_port}/validate");
    k.ok_stdin(
        &["apply", "-f", "-"],
        &failing_configuration(&hooks, &down, "Fail", 2),
    );
    let err = k.fails(&["create", "configmap", "a", "--from-literal=a=b"]);
    assert!(
        err.contains(&format!(
            "Internal error occurred: failed calling webhook \"flaky.cairn.test\": failed to call webhook: Post \"https://127.0.0.1:{down_port}/validate?timeout=2s\""
        )),
        "{err}"
    );
    k.ok_stdin(
        &["apply", "-f", "-"],
        &failing_configuration(&hooks, &down, "Ignore", 2),
    );
    k.ok(&["create", "configmap", "a", "--from-literal=a=b"]);

    // Hangs: the call ends at its timeout and the API server keeps answering meanwhile.
    let slow = hooks.url("/slow");
    k.ok_stdin(
        &["apply", "-f", "-"],
        &failing_configuration(&hooks, &slow, "Fail", 1),
    );
    let started = Instant::now();
    let writer = {
        let k = Kubectl::new(33, &server);
        std::thread::spawn(move || k.fails(&["create", "configmap", "b", "--from-literal=a=b"]))
    };
    std::thread::sleep(Duration::from_millis(200));
    k.ok(&["get", "configmaps"]);
    let err = writer.join().unwrap();
    assert!(err.contains("context deadline exceeded"), "{err}");
    // The webhook answers after 5 s: the write was cut at its 1 s timeout, not waited out.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    k.ok_stdin(
        &["apply", "-f", "-"],
        &failing_configuration(&hooks, &slow, "Ignore", 1),
    );
    k.ok(&["create", "configmap", "b", "--from-literal=a=b"]);

    // A caBundle that does not sign the server's certificate is a failed call.
    let other_ca = WebhookServer::start().ca_bundle;
    let wrong = failing_configuration(&hooks, &hooks.url("/validate"), "Fail", 2)
        .replace(&hooks.ca_bundle, &other_ca);
    k.ok_stdin(&["apply", "-f", "-"], &wrong);
    let err = k.fails(&["create", "configmap", "c", "--from-literal=a=b"]);
    assert!(
        err.contains("failed calling webhook \"flaky.cairn.test\""),
        "{err}"
    );
    assert!(err.to_lowercase().contains("certificate"), "{err}");
}

#[test]
fn bad_webhook_configurations_get_upstream_422s() {
    let (_dir, _server, k, _hooks) = setup("webhooks-bad");
    let bad = r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: bad}
webhooks:
- name: short.name
  clientConfig: {url: "http://example.com/x"}
  rules: [{operations: ["*", CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  timeoutSeconds: 31
  admissionReviewVersions: [v1]
  matchConditions: [{name: broken, expression: "object.metadata.name =="}]
"#;
    let err = k.fails_stdin(&["apply", "-f", "-"], bad);
    for expected in [
        "The ValidatingWebhookConfiguration \"bad\" is invalid",
        "webhooks[0].name: Invalid value: \"short.name\": should be a domain with at least three segments separated by dots",
        "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun",
        "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds",
        "webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme",
        "webhooks[0].rules[0].operations: Invalid value: []string{\"*\", \"CREATE\"}: if '*' is present, must not specify other operations",
        "webhooks[0].matchConditions[0].expression: Invalid value: \"object.metadata.name ==\"",
    ] {
        assert!(err.contains(expected), "missing {expected:?} in {err}");
    }
    // Defaults as upstream fills them.
    let good = r#"apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: good}
webhooks:
- name: good.cairn.test
  clientConfig: {service: {namespace: default, name: hook}}
  rules: [{operations: [CREATE], apiGroups: [apps], apiVersions: [v1], resources: [deployments]}]
  sideEffects: None
  admissionReviewVersions: [v1]
"#;
    k.ok_stdin(&["apply", "-f", "-"], good);
    let stored: Value = k.json(&["get", "mutatingwebhookconfiguration", "good"]);
    let w = &stored["webhooks"][0];
    assert_eq!(w["failurePolicy"], "Fail");
    assert_eq!(w["matchPolicy"], "Equivalent");
    assert_eq!(w["timeoutSeconds"], 10);
    assert_eq!(w["reinvocationPolicy"], "Never");
    assert_eq!(w["rules"][0]["scope"], "*");
    assert_eq!(w["clientConfig"]["service"]["port"], 443);
    // Nothing serves that service: a Deployment write fails closed, naming the service URL.
    let err = k.fails(&["create", "deployment", "web", "--image=nginx"]);
    assert!(
        err.contains("failed calling webhook \"good.cairn.test\": failed to call webhook: Post \"https://hook.default.svc:443/?timeout=10s\": service \"hook\" not found"),
        "{err}"
    );
    // Webhook configurations themselves are never sent to webhooks: the fix goes through.
    k.ok(&["delete", "mutatingwebhookconfiguration", "good"]);
    k.ok(&["create", "deployment", "web", "--image=nginx"]);
}

fn convertible_crd(hooks: &WebhookServer, url: &str) -> String {
    format!(
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: convertibles.cairn.test}}
spec:
  group: cairn.test
  scope: Namespaced
  names: {{plural: convertibles, singular: convertible, kind: Convertible}}
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig: {{url: "{url}", caBundle: "{ca}"}}
  versions:
  - name: v1
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {{type: object, properties: {{size: {{type: integer}}}}}}
  - name: v2
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {{type: object, properties: {{replicas: {{type: integer}}}}}}
"#,
        ca = hooks.ca_bundle
    )
}

#[test]
fn conversion_webhook_converts_between_versions() {
    let (_dir, _server, k, hooks) = setup("webhooks-conversion");
    k.ok_stdin(
        &["apply", "-f", "-"],
        &convertible_crd(&hooks, &hooks.url("/convert")),
    );
    wait_for("convertibles served", 30, || {
        k.output(&["get", "convertibles.v1.cairn.test"])
            .status
            .success()
            .then_some(())
    });
    // Written through v1, stored as v2 by the webhook.
    k.ok_stdin(
        &["apply", "-f", "-"],
        "apiVersion: cairn.test/v1\nkind: Convertible\nmetadata: {name: c1, labels: {app: demo}}\nspec: {size: 3}\n",
    );
    let v2 = k.json(&["get", "convertibles.v2.cairn.test", "c1"]);
    assert_eq!(v2["apiVersion"], "cairn.test/v2");
    assert_eq!(v2["spec"]["replicas"], 3, "{v2}");
    assert!(v2["spec"].get("size").is_none());
    assert_eq!(v2["metadata"]["labels"]["app"], "demo");
    // Read back through v1, one object and a list (one call for the whole list).
    let v1 = k.json(&["get", "convertibles.v1.cairn.test", "c1"]);
    assert_eq!(v1["apiVersion"], "cairn.test/v1");
    assert_eq!(v1["spec"]["size"], 3, "{v1}");
    let list = k.json(&["get", "convertibles.v1.cairn.test"]);
    assert_eq!(list["items"][0]["spec"]["size"], 3, "{list}");
    let reviews = hooks.requests("/convert");
    assert!(reviews
        .iter()
        .any(|r| r["desiredAPIVersion"] == "cairn.test/v2"));
    assert!(reviews
        .iter()
        .any(|r| r["desiredAPIVersion"] == "cairn.test/v1"));
    // An update through v1 goes through the webhook both ways.
    k.ok(&[
        "patch",
        "convertibles.v1.cairn.test",
        "c1",
        "--type=merge",
        "-p",
        r#"{"spec":{"size":5}}"#,
    ]);
    assert_eq!(
        k.json(&["get", "convertibles.v2.cairn.test", "c1"])["spec"]["replicas"],
        5
    );

    // The webhook down: reads that need it fail with upstream's message, others work.
    let down_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    k.ok_stdin(
        &["apply", "-f", "-"],
        &convertible_crd(&hooks, &format!("https://127.0.0.1:{down_port}/convert")),
    );
    let err = wait_for("conversion failing", 30, || {
        let out = k.output(&["get", "convertibles.v1.cairn.test", "c1"]);
        (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).into_owned())
    });
    assert!(
        err.contains("conversion webhook for cairn.test/v2, Kind=Convertible failed: failed to call webhook: Post"),
        "{err}"
    );
    assert_eq!(
        k.json(&["get", "convertibles.v2.cairn.test", "c1"])["spec"]["replicas"],
        5
    );
}
