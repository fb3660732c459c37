//! What a node's credentials reach (upstream's Node authorizer and NodeRestriction)
//! and what every namespace is given for its pods (the root CA publisher).

// Test code: a failed setup step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use cairn_testsupport::api_client::Credentials;
use common::{wait_for, Kubectl, Server};

const NODE_SETUP: &str = r#"
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Namespace, metadata: {name: ns1}}
- {apiVersion: v1, kind: Node, metadata: {name: node-1}}
- {apiVersion: v1, kind: Node, metadata: {name: node-2}}
- {apiVersion: v1, kind: Secret, metadata: {name: own, namespace: ns1}, stringData: {k: v}}
- {apiVersion: v1, kind: Secret, metadata: {name: other, namespace: ns1}, stringData: {k: v}}
- {apiVersion: v1, kind: Secret, metadata: {name: unused, namespace: ns1}, stringData: {k: v}}
- apiVersion: v1
  kind: Pod
  metadata: {name: p1, namespace: ns1}
  spec:
    nodeName: node-1
    containers: [{name: c, image: busybox}]
    volumes: [{name: s, secret: {secretName: own}}]
- apiVersion: v1
  kind: Pod
  metadata: {name: p2, namespace: ns1}
  spec:
    nodeName: node-2
    containers: [{name: c, image: busybox}]
    volumes: [{name: s, secret: {secretName: other}}]
"#;

/// With node-1's credentials: its own pod's Secret, Node and pod status are reachable;
/// node-2's Node and pods and Secrets no pod of node-1 uses are not (Node authorizer +
/// NodeRestriction, upstream's messages).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_reaches_only_its_own_objects() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(
        &dir.path().join("data"),
        &["--scheduler=false", "--controllers="],
    );
    let admin = Kubectl::new(33, &server);
    admin.ok_stdin(&["create", "-f", "-"], NODE_SETUP);
    let mut node1 = Kubectl::new(33, &server);
    node1.kubeconfig = common::member_kubeconfig(
        &server,
        dir.path(),
        "system:node:node-1",
        Some("system:nodes"),
    );
    // The graph follows the pod a moment after its write.
    wait_for("node-1 reads its pod's secret", 10, || {
        node1
            .output(&["get", "secret", "own", "-n", "ns1"])
            .status
            .success()
            .then_some(())
    });
    let forbidden = |args: &[&str], want: &str| {
        let err = node1.fails(args);
        assert!(err.contains(want), "{args:?}: {err}");
    };
    forbidden(
        &["get", "secret", "other", "-n", "ns1"],
        r#"secrets "other" is forbidden: User "system:node:node-1" cannot get resource "secrets" in API group "" in the namespace "ns1": no relationship found between node 'node-1' and this object"#,
    );
    forbidden(
        &["get", "secret", "unused", "-n", "ns1"],
        "no relationship found",
    );
    forbidden(
        &["get", "secrets", "-n", "ns1"],
        "cannot list resource \"secrets\"",
    );
    let label = r#"{"metadata":{"labels":{"team":"a"}}}"#;
    forbidden(
        &["patch", "node", "node-2", "-p", label],
        r#"nodes "node-2" is forbidden: node "node-1" is not allowed to modify node "node-2""#,
    );
    node1.ok(&["patch", "node", "node-1", "-p", label]);
    forbidden(
        &[
            "label",
            "node",
            "node-1",
            "node-restriction.kubernetes.io/pool=x",
        ],
        "is not allowed to modify labels: node-restriction.kubernetes.io/pool",
    );
    // As a kubelet does, a PATCH of pods/status (kubectl would GET it first, which
    // upstream's Node authorizer refuses too).
    let http = Credentials::from_kubeconfig(&node1.kubeconfig)
        .unwrap()
        .reqwest()
        .unwrap();
    let patch_status = |pod: &str| {
        http.patch(format!(
            "{}/api/v1/namespaces/ns1/pods/{pod}/status",
            server.url
        ))
        .header("Content-Type", "application/merge-patch+json")
        .body(r#"{"status":{"message":"seen"}}"#)
        .send()
    };
    let refused = patch_status("p2").await.unwrap();
    assert_eq!(refused.status(), 403);
    let err = refused.text().await.unwrap();
    assert!(
        err.contains(r#"pods \"p2\" is forbidden: node \"node-1\" can only update pod status for pods with spec.nodeName set to itself"#),
        "{err}"
    );
    assert_eq!(patch_status("p1").await.unwrap().status(), 200);
    // Pods: only its own, listed by its spec.nodeName.
    node1.ok(&[
        "get",
        "pods",
        "-A",
        "--field-selector",
        "spec.nodeName=node-1",
    ]);
    forbidden(
        &["get", "pods", "-A"],
        "can only list/watch pods with spec.nodeName field selector",
    );
    forbidden(&["get", "pod", "p2", "-n", "ns1"], "no relationship found");
    // Once p2 moves nothing, but p1 is deleted, node-1 loses the Secret.
    admin.ok(&[
        "delete",
        "pod",
        "p1",
        "-n",
        "ns1",
        "--grace-period=0",
        "--force",
    ]);
    wait_for("node-1 loses its pod's secret", 10, || {
        (!node1
            .output(&["get", "secret", "own", "-n", "ns1"])
            .status
            .success())
        .then_some(())
    });
}

/// Every namespace gets `kube-root-ca.crt` with the cluster CA; deleted or edited, it
/// comes back (upstream's root CA publisher).
#[test]
fn the_cluster_ca_is_published_in_every_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(&dir.path().join("data"), &["--scheduler=false"]);
    let ca = std::fs::read_to_string(server.data_dir.join("pki/ca.crt")).unwrap();
    let admin = Kubectl::new(33, &server);
    admin.ok(&["create", "namespace", "fresh"]);
    let published = |want: &str| {
        let out = admin.output(&[
            "get",
            "configmap",
            "kube-root-ca.crt",
            "-n",
            "fresh",
            "-o",
            "jsonpath={.data.ca\\.crt}",
        ]);
        (out.status.success() && String::from_utf8_lossy(&out.stdout) == want).then_some(())
    };
    wait_for("kube-root-ca.crt in a new namespace", 15, || published(&ca));
    // Its sibling controller: every namespace has a `default` ServiceAccount.
    wait_for("the default ServiceAccount", 15, || {
        let out = admin.output(&["get", "serviceaccount", "default", "-n", "fresh"]);
        out.status.success().then_some(())
    });
    for ns in ["default", "kube-system"] {
        let cm = admin.json(&[
            "get",
            "configmap",
            "kube-root-ca.crt",
            "-n",
            ns,
            "-o",
            "json",
        ]);
        assert_eq!(cm["data"]["ca.crt"], ca.as_str(), "{ns}");
    }
    admin.ok(&["delete", "configmap", "kube-root-ca.crt", "-n", "fresh"]);
    wait_for("kube-root-ca.crt back after a delete", 15, || {
        published(&ca)
    });
    let edit = r#"{"data":{"ca.crt":"not a CA"}}"#;
    admin.ok(&[
        "patch",
        "configmap",
        "kube-root-ca.crt",
        "-n",
        "fresh",
        "-p",
        edit,
    ]);
    wait_for("kube-root-ca.crt restored after an edit", 15, || {
        published(&ca)
    });
}

/// A kubelet serving request as node `node` for `names` and `ips`, created with the
/// node's credentials.
fn serving_request(node: &Kubectl, name: &str, node_name: &str, ips: &[&str]) {
    let subject = cairn_pki::csr::RequestSubject {
        common_name: format!("system:node:{node_name}"),
        organizations: vec!["system:nodes".into()],
        dns_names: vec![node_name.into()],
        ip_addresses: ips.iter().map(|ip| ip.parse().unwrap()).collect(),
    };
    let usages = ["digital signature", "key encipherment", "server auth"];
    request(
        node,
        name,
        &subject,
        "kubernetes.io/kubelet-serving",
        &usages,
    );
}

/// A CertificateSigningRequest named `name` for `subject`, created as `who`.
fn request(
    who: &Kubectl,
    name: &str,
    subject: &cairn_pki::csr::RequestSubject,
    signer: &str,
    usages: &[&str],
) {
    use base64::Engine;
    let (_, pem) = cairn_pki::csr::generate_request(subject).unwrap();
    let request = base64::engine::general_purpose::STANDARD.encode(pem);
    let csr = serde_json::json!({
        "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "spec": {"request": request, "signerName": signer, "usages": usages}});
    who.ok_stdin(&["create", "-f", "-"], &csr.to_string());
}

/// A node's serving certificate is approved for the addresses it reports, but not for
/// an address another Node reports too or a Service's (the API server's): reporting
/// someone else's address must not get a node a certificate that impersonates it. Its
/// proxy's `system:kube-proxy` client certificate is approved, with no group and for no
/// other user.
#[test]
fn serving_certificates_are_not_approved_for_another_nodes_address() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(&dir.path().join("data"), &["--scheduler=false"]);
    let admin = Kubectl::new(33, &server);
    for (node, ips) in [
        ("node-1", vec!["198.18.0.11"]),
        // 10.96.0.1 is the `kubernetes` Service's address.
        ("node-2", vec!["198.18.0.12", "198.18.0.11", "10.96.0.1"]),
    ] {
        let addresses: Vec<_> = ips
            .iter()
            .map(|ip| serde_json::json!({"type": "InternalIP", "address": ip}))
            .collect();
        let body =
            serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}});
        admin.ok_stdin(&["create", "-f", "-"], &body.to_string());
        let status = serde_json::json!({"status": {"addresses": addresses}});
        admin.ok(&[
            "patch",
            "node",
            node,
            "--subresource=status",
            "--type=merge",
            "-p",
            &status.to_string(),
        ]);
    }
    let mut node2 = Kubectl::new(33, &server);
    node2.kubeconfig = common::member_kubeconfig(
        &server,
        dir.path(),
        "system:node:node-2",
        Some("system:nodes"),
    );
    serving_request(&node2, "stolen", "node-2", &["198.18.0.11"]);
    serving_request(&node2, "server-ip", "node-2", &["10.96.0.1"]);
    // A proxy credential in system:masters, and one for another user, are a node's to
    // ask for but not to get.
    let client = "kubernetes.io/kube-apiserver-client";
    let usages = ["digital signature", "client auth"];
    for (name, cn, group) in [
        ("proxy-masters", "system:kube-proxy", Some("system:masters")),
        ("proxy-admin", "cairn-admin", None),
    ] {
        let subject = cairn_pki::csr::RequestSubject {
            common_name: cn.into(),
            organizations: group.into_iter().map(String::from).collect(),
            ..Default::default()
        };
        request(&node2, name, &subject, client, &usages);
    }
    let proxy = cairn_pki::csr::RequestSubject {
        common_name: "system:kube-proxy".into(),
        ..Default::default()
    };
    request(&node2, "proxy", &proxy, client, &usages);
    serving_request(&node2, "own", "node-2", &["198.18.0.12"]);
    let conditions = |name: &str| {
        admin.ok(&[
            "get",
            "csr",
            name,
            "-o",
            "jsonpath={.status.conditions[*].type}",
        ])
    };
    // The approver judges requests in the order they were made: once the second is
    // approved the first has been judged.
    wait_for("node-2's own serving request approved", 15, || {
        conditions("own").contains("Approved").then_some(())
    });
    assert_eq!(
        conditions("stolen"),
        "",
        "node-1's address must stay unapproved"
    );
    assert_eq!(
        conditions("server-ip"),
        "",
        "the kubernetes Service's address too"
    );
    assert_eq!(conditions("proxy"), "Approved");
    for escalation in ["proxy-masters", "proxy-admin"] {
        assert_eq!(conditions(escalation), "", "{escalation}");
    }
}
