//! Secure by default: HTTPS only, every request authenticated (client certificates of
//! the cluster's client CA, bearer tokens), anonymous requests limited to the public
//! paths, the PKI's files and their renewal.

// Test code: a failed step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use cairn_testsupport::api_client::Credentials;
use common::{wait_for, Kubectl, Server, BIN};
use futures::StreamExt;
use serde_json::{json, Value};

/// kube-apiserver's 401 body, byte for byte.
const UNAUTHORIZED: &str = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"Unauthorized\",\"reason\":\"Unauthorized\",\"code\":401}\n";

/// The admin kubeconfig's CA and server, without its client certificate.
fn no_certificate(server: &Server) -> Credentials {
    let mut creds = Credentials::from_kubeconfig(&server.kubeconfig).unwrap();
    creds.client_cert_pem = None;
    creds.client_key_pem = None;
    creds
}

fn anonymous(server: &Server) -> reqwest::Client {
    no_certificate(server).reqwest().unwrap()
}

async fn get(c: &reqwest::Client, url: &str) -> (u16, String) {
    let r = c.get(url).send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// The API alone, with the test token file, and `extra` flags.
fn server_with_tokens(dir: &Path, extra: &[&str]) -> Server {
    let tokens = write_token_file(dir);
    let mut args = vec![
        "--scheduler=false",
        "--controllers=",
        "--token-auth-file",
        &tokens,
    ];
    args.extend(extra);
    Server::start_with(&dir.join("data"), &args)
}

fn write_token_file(dir: &Path) -> String {
    let path = dir.join("tokens.csv");
    std::fs::write(
        &path,
        "alice-token,alice,1001,\"dev,ops\"\nroot-token,root,0,system:masters\n",
    )
    .unwrap();
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_public_paths_answer_anonymous_requests() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(dir.path(), &["--scheduler=false", "--controllers="]);
    let anon = anonymous(&server);
    for path in ["/healthz", "/livez", "/readyz", "/version"] {
        let (code, _) = get(&anon, &format!("{}{path}", server.url)).await;
        assert_eq!(code, 200, "{path}");
    }
    for path in [
        "/api",
        "/apis",
        "/api/v1/namespaces/default/pods",
        "/openapi/v2",
        "/metrics",
    ] {
        assert_eq!(
            get(&anon, &format!("{}{path}", server.url)).await,
            (401, UNAUTHORIZED.to_string()),
            "{path}"
        );
    }
    let post = anon
        .post(format!(
            "{}/api/v1/namespaces/default/configmaps",
            server.url
        ))
        .json(&json!({"metadata": {"name": "x"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(post.status().as_u16(), 401);
    // Plain HTTP is not served at all.
    let plain = server.url.replace("https://", "http://");
    let r = cairn_testsupport::api_client::plain_http_builder()
        .build()
        .unwrap()
        .get(format!("{plain}/healthz"))
        .send()
        .await;
    assert!(r.map(|r| !r.status().is_success()).unwrap_or(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_credentials_are_401_even_on_public_paths() {
    let dir = tempfile::tempdir().unwrap();
    let server = server_with_tokens(dir.path(), &[]);
    // A client certificate from another CA, with a name the cluster would accept.
    let other = cairn_pki::Authority::generate("other-ca", Duration::from_secs(3600)).unwrap();
    let cert = other
        .issue_client(
            "cairn-admin",
            &["system:masters".into()],
            Duration::from_secs(3600),
        )
        .unwrap();
    let mut foreign = Credentials::from_kubeconfig(&server.kubeconfig).unwrap();
    foreign.client_cert_pem = Some(cert.cert_pem);
    foreign.client_key_pem = Some(cert.key_pem);
    let foreign = foreign.reqwest().unwrap();
    let mut wrong_token = no_certificate(&server);
    wrong_token.token = Some("not-a-token".into());
    let wrong_token = wrong_token.reqwest().unwrap();
    for c in [&foreign, &wrong_token] {
        for path in ["/api/v1/namespaces", "/healthz"] {
            assert_eq!(
                get(c, &format!("{}{path}", server.url)).await,
                (401, UNAUTHORIZED.to_string()),
                "{path}"
            );
        }
    }
    // The admin's certificate still works beside them.
    let (code, _) = get(&server.http(), &format!("{}/api/v1/namespaces", server.url)).await;
    assert_eq!(code, 200);
}

fn whoami(k: &Kubectl, kubeconfig: &Path) -> Value {
    let out = k
        .command(&["auth", "whoami", "-o", "json"])
        .env("KUBECONFIG", kubeconfig)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `kubectl auth whoami` for the admin, a node's certificate and a static token.
#[test]
fn whoami_names_certificate_and_token_users() {
    let dir = tempfile::tempdir().unwrap();
    let server = server_with_tokens(dir.path(), &[]);
    let k = Kubectl::new(33, &server);
    let admin = whoami(&k, &server.kubeconfig);
    assert_eq!(admin["status"]["userInfo"]["username"], "cairn-admin");
    assert_eq!(
        admin["status"]["userInfo"]["groups"],
        json!(["system:masters", "system:authenticated"])
    );
    let node_kc = dir.path().join("node.kubeconfig");
    let out = std::process::Command::new(BIN)
        .args(["kubeconfig", "--data-dir"])
        .arg(&server.data_dir)
        .args(["--user", "system:node:n1", "--group", "system:nodes"])
        .output()
        .unwrap();
    assert!(out.status.success());
    std::fs::write(&node_kc, &out.stdout).unwrap();
    let node = whoami(&Kubectl::new(27, &server), &node_kc);
    assert_eq!(node["status"]["userInfo"]["username"], "system:node:n1");
    assert_eq!(
        node["status"]["userInfo"]["groups"],
        json!(["system:nodes", "system:authenticated"])
    );
    let token_kc = dir.path().join("alice.kubeconfig");
    let admin_text = std::fs::read_to_string(&server.kubeconfig).unwrap();
    let ca = Credentials::from_kubeconfig_text(&admin_text)
        .unwrap()
        .ca_pem;
    std::fs::write(
        &token_kc,
        cairn_pki::kubeconfig::render_token(&server.url, &ca, "alice", "alice-token"),
    )
    .unwrap();
    let alice = whoami(&k, &token_kc);
    assert_eq!(alice["status"]["userInfo"]["username"], "alice");
    assert_eq!(alice["status"]["userInfo"]["uid"], "1001");
    assert_eq!(
        alice["status"]["userInfo"]["groups"],
        json!(["dev", "ops", "system:authenticated"])
    );
    let bad_kc = dir.path().join("bad.kubeconfig");
    std::fs::write(
        &bad_kc,
        cairn_pki::kubeconfig::render_token(&server.url, &ca, "mallory", "guess"),
    )
    .unwrap();
    let out = k
        .command(&["get", "pods"])
        .env("KUBECONFIG", &bad_kc)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    // What kubectl prints for kube-apiserver's 401 too.
    assert!(err.contains("You must be logged in to the server"), "{err}");
}

/// The PKI's files: private keys 0600, `certs check` lists each certificate.
#[test]
fn pki_files_are_private_and_listed_by_certs_check() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(dir.path(), &["--scheduler=false", "--controllers="]);
    let pki = server.data_dir.join("pki");
    for key in ["ca.key", "client-ca.key", "apiserver.key", "sa.key"] {
        let mode = std::fs::metadata(pki.join(key))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{key}");
    }
    let mode = std::fs::metadata(server.data_dir.join("admin.kubeconfig"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "admin.kubeconfig");
    let out = std::process::Command::new(BIN)
        .args(["certs", "check", "--data-dir"])
        .arg(&server.data_dir)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    // Ten years for the CAs, one for the leaves (a second either way at the edges).
    for (cn, residual) in [
        ("cairn-ca", ["9y", "10y"]),
        ("cairn-client-ca", ["9y", "10y"]),
        ("cairn-control", ["364d", "365d"]),
        ("cairn-admin", ["364d", "365d"]),
    ] {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{cn} ")))
            .unwrap_or_else(|| panic!("{cn} missing:\n{text}"));
        let cols: Vec<&str> = line.split_whitespace().collect();
        assert!(residual.contains(&cols[4]) && cols[5] == "ok", "{line}");
    }
    // Without a PKI: one clear line, non-zero exit.
    let empty = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(BIN)
        .args(["certs", "check", "--data-dir"])
        .arg(empty.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no cluster certificates"), "{err}");
}

/// The certificate the server presents to a new connection.
async fn served_certificate(server: &Server) -> Vec<u8> {
    let creds = Credentials::from_kubeconfig(&server.kubeconfig).unwrap();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(creds.tls_config().unwrap()));
    let addr = server.url.trim_start_matches("https://").to_string();
    let tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let tls = connector.connect(name, tcp).await.unwrap();
    tls.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

fn stored_serving_certificate(server: &Server) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject;
    let pem = std::fs::read(server.data_dir.join("pki/apiserver.crt")).unwrap();
    rustls::pki_types::CertificateDer::from_pem_slice(&pem)
        .unwrap()
        .to_vec()
}

/// With 6-second certificates the serving certificate is replaced twice while a watch
/// opened before stays open and delivers; new connections get the new certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serving_certificate_renews_without_dropping_watches() {
    let dir = tempfile::tempdir().unwrap();
    let server = server_with_tokens(dir.path(), &["--cert-lifetime-seconds", "6"]);
    // A token client: its credentials do not expire with the short-lived certificates.
    let mut creds = no_certificate(&server);
    creds.token = Some("root-token".into());
    let c = creds.reqwest().unwrap();
    let cms = format!("{}/api/v1/namespaces/default/configmaps", server.url);
    let watch = c.get(format!("{cms}?watch=true")).send().await.unwrap();
    assert_eq!(watch.status().as_u16(), 200);
    let mut events = watch.bytes_stream();
    let first = stored_serving_certificate(&server);
    assert_eq!(served_certificate(&server).await, first);
    let mut seen = vec![first];
    for round in 0..2 {
        let previous = seen.last().unwrap().clone();
        let renewed = wait_for("the serving certificate renewed", 20, || {
            let now = stored_serving_certificate(&server);
            (now != previous).then_some(now)
        });
        // The swap follows the file at once; a handshake may still race it.
        let mut served = served_certificate(&server).await;
        for _ in 0..50 {
            if served == renewed {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            served = served_certificate(&server).await;
        }
        assert_eq!(
            served, renewed,
            "round {round}: new connections get the new certificate"
        );
        seen.push(renewed);
        let name = format!("after-renewal-{round}");
        let r = c
            .post(&cms)
            .json(&json!({"metadata": {"name": name}}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 201);
        let mut text = String::new();
        while !text.contains(&name) {
            let chunk = tokio::time::timeout(Duration::from_secs(20), events.next())
                .await
                .expect("the watch opened before the renewal still delivers")
                .expect("the watch stays open")
                .unwrap();
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}

fn token_kubeconfig(server: &Server, dir: &Path, name: &str, token: &str) -> std::path::PathBuf {
    let admin_text = std::fs::read_to_string(&server.kubeconfig).unwrap();
    let ca = Credentials::from_kubeconfig_text(&admin_text)
        .unwrap()
        .ca_pem;
    let path = dir.join(format!("{name}.kubeconfig"));
    std::fs::write(
        &path,
        cairn_pki::kubeconfig::render_token(&server.url, &ca, name, token),
    )
    .unwrap();
    path
}

fn fails_unauthorized(k: &Kubectl, kubeconfig: &Path) {
    let out = k
        .command(&["auth", "whoami"])
        .env("KUBECONFIG", kubeconfig)
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("You must be logged in to the server"), "{err}");
}

/// A TokenReview POSTed as the admin (discovery does not list the review kinds yet, so
/// `kubectl create -f` cannot map them).
fn token_review(server: &Server, token: &str, audiences: &[&str]) -> Value {
    let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
        "spec": {"token": token, "audiences": audiences}});
    let url = format!("{}/apis/authentication.k8s.io/v1/tokenreviews", server.url);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let out: Value = rt.block_on(async {
        let r = server.http().post(url).json(&body).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 201);
        r.json().await.unwrap()
    });
    out["status"].clone()
}

/// `kubectl create token`: bound tokens name their ServiceAccount (and pod) and stop
/// working when either is gone; audiences are honoured; TokenReview agrees.
#[test]
fn service_account_tokens_follow_their_account_and_pod() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(
        &dir.path().join("data"),
        &["--scheduler=false", "--controllers="],
    );
    let k = Kubectl::new(33, &server);
    k.ok(&["create", "serviceaccount", "bot"]);
    k.ok(&["run", "p", "--image=busybox"]);
    let token = k.ok(&["create", "token", "bot"]).trim().to_string();
    let bot = token_kubeconfig(&server, dir.path(), "bot", &token);
    let me = whoami(&Kubectl::new(27, &server), &bot);
    assert_eq!(
        me["status"]["userInfo"]["username"],
        "system:serviceaccount:default:bot"
    );
    assert_eq!(
        me["status"]["userInfo"]["groups"],
        json!([
            "system:serviceaccounts",
            "system:serviceaccounts:default",
            "system:authenticated"
        ])
    );
    let review = token_review(&server, &token, &[]);
    assert_eq!(review["authenticated"], true, "{review}");
    assert_eq!(
        review["user"]["username"],
        "system:serviceaccount:default:bot"
    );
    // Another audience: not for this API, but a review for that audience accepts it.
    let other = k
        .ok(&["create", "token", "bot", "--audience=vault"])
        .trim()
        .to_string();
    fails_unauthorized(&k, &token_kubeconfig(&server, dir.path(), "vault", &other));
    assert_eq!(
        token_review(&server, &other, &["vault"])["audiences"],
        json!(["vault"])
    );
    assert_eq!(
        token_review(&server, &token, &["vault"])["authenticated"],
        false
    );
    // Bound to the pod: good while it exists.
    let bound = k
        .ok(&[
            "create",
            "token",
            "bot",
            "--bound-object-kind=Pod",
            "--bound-object-name=p",
        ])
        .trim()
        .to_string();
    let pod_kc = token_kubeconfig(&server, dir.path(), "pod", &bound);
    let me = whoami(&k, &pod_kc);
    assert_eq!(
        me["status"]["userInfo"]["extra"]["authentication.kubernetes.io/pod-name"],
        json!(["p"])
    );
    k.ok(&["delete", "pod", "p", "--wait=true"]);
    fails_unauthorized(&k, &pod_kc);
    // Too short a lifetime is refused in upstream's words.
    let err = k.fails(&["create", "token", "bot", "--duration=1m"]);
    assert!(
        err.contains("may not specify a duration less than 10 minutes"),
        "{err}"
    );
    // The account gone: its tokens are too.
    k.ok(&["delete", "serviceaccount", "bot"]);
    fails_unauthorized(&k, &bot);
    assert_eq!(token_review(&server, &token, &[])["authenticated"], false);
    // Malformed bearer tokens: 401, and the server keeps serving.
    for junk in [
        "eyJ.eyJ.eyJ",
        "eyJhbGciOiJFUzI1NiJ9.e30.AAAA",
        "a.b.c",
        "\u{7f}",
    ] {
        let c = anonymous(&server);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let r = rt.block_on(
            c.get(format!("{}/api", server.url))
                .bearer_auth(junk)
                .send(),
        );
        if let Ok(r) = r {
            assert_eq!(r.status().as_u16(), 401, "{junk:?}");
        }
    }
    k.ok(&["get", "ns"]);
}

fn bootstrap_secret(k: &Kubectl, id: &str, secret: &str, expiration: &str) {
    k.ok(&[
        "create",
        "secret",
        "generic",
        &format!("bootstrap-token-{id}"),
        "-n",
        "kube-system",
        "--type=bootstrap.kubernetes.io/token",
        &format!("--from-literal=token-id={id}"),
        &format!("--from-literal=token-secret={secret}"),
        "--from-literal=usage-bootstrap-authentication=true",
        "--from-literal=auth-extra-groups=system:bootstrappers:cairn:nodes",
        &format!("--from-literal=expiration={expiration}"),
    ]);
}

/// Bootstrap tokens: `system:bootstrap:<id>` in `system:bootstrappers` while the Secret
/// holds the secret and has not expired.
#[test]
fn bootstrap_tokens_authenticate_until_they_expire() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(
        &dir.path().join("data"),
        &["--scheduler=false", "--controllers="],
    );
    let k = Kubectl::new(33, &server);
    bootstrap_secret(&k, "abcdef", "0123456789abcdef", "2100-01-01T00:00:00Z");
    bootstrap_secret(&k, "oldold", "0123456789abcdef", "2020-01-01T00:00:00Z");
    let good = token_kubeconfig(&server, dir.path(), "good", "abcdef.0123456789abcdef");
    let me = whoami(&k, &good);
    assert_eq!(
        me["status"]["userInfo"]["username"],
        "system:bootstrap:abcdef"
    );
    assert_eq!(
        me["status"]["userInfo"]["groups"],
        json!([
            "system:bootstrappers",
            "system:bootstrappers:cairn:nodes",
            "system:authenticated"
        ])
    );
    for (name, token) in [
        ("expired", "oldold.0123456789abcdef"),
        ("wrong", "abcdef.aaaaaaaaaaaaaaaa"),
        ("unknown", "zzzzzz.0123456789abcdef"),
    ] {
        fails_unauthorized(&k, &token_kubeconfig(&server, dir.path(), name, token));
    }
    k.ok(&[
        "delete",
        "secret",
        "-n",
        "kube-system",
        "bootstrap-token-abcdef",
    ]);
    fails_unauthorized(&k, &good);
}

fn user_kubeconfig(server: &Server, dir: &Path, user: &str) -> std::path::PathBuf {
    common::member_kubeconfig(server, dir, user, None)
}

/// `kubectl auth can-i --as USER VERB RESOURCE [--subresource S] -n NS`: yes or no.
fn can_i(k: &Kubectl, user: &str, verb: &str, resource: &str, ns: &str) -> bool {
    let (resource, sub) = resource.split_once('/').unwrap_or((resource, ""));
    let mut args = vec!["auth", "can-i", "--as", user, verb, resource, "-n", ns];
    let sub_flag = format!("--subresource={sub}");
    if !sub.is_empty() {
        args.push(&sub_flag);
    }
    let out = k.output(&args);
    let answer = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        answer == "yes" || answer == "no",
        "can-i {args:?}: {answer} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    answer == "yes"
}

const RBAC_SETUP: &str = r#"
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Namespace, metadata: {name: ns1}}
- {apiVersion: v1, kind: Namespace, metadata: {name: ns2}}
- apiVersion: rbac.authorization.k8s.io/v1
  kind: Role
  metadata: {name: pod-reader, namespace: ns1}
  rules: [{apiGroups: [""], resources: [pods], verbs: [get, list]}]
- apiVersion: rbac.authorization.k8s.io/v1
  kind: Role
  metadata: {name: binding-writer, namespace: ns1}
  rules: [{apiGroups: [rbac.authorization.k8s.io], resources: [rolebindings], verbs: [create]}]
- apiVersion: rbac.authorization.k8s.io/v1
  kind: RoleBinding
  metadata: {name: viewer, namespace: ns1}
  roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
  subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: viewer}]
- apiVersion: rbac.authorization.k8s.io/v1
  kind: RoleBinding
  metadata: {name: editor, namespace: ns1}
  roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}
  subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: editor}]
- apiVersion: rbac.authorization.k8s.io/v1
  kind: RoleBinding
  metadata: {name: editor-binds, namespace: ns1}
  roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: binding-writer}
  subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: editor}]
- apiVersion: rbac.authorization.k8s.io/v1
  kind: RoleBinding
  metadata: {name: nsadmin, namespace: ns1}
  roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}
  subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: nsadmin}]
- apiVersion: rbac.authorization.k8s.io/v1
  kind: RoleBinding
  metadata: {name: reader, namespace: ns1}
  roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-reader}
  subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: reader}]
"#;

/// `kubectl auth can-i` for view, edit, admin and a namespaced Role, as upstream's
/// bootstrap policy answers them (asked by the admin with `--as`: impersonation).
#[test]
fn can_i_matches_upstreams_default_roles() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(
        &dir.path().join("data"),
        &["--scheduler=false", "--controllers="],
    );
    let k = Kubectl::new(33, &server);
    k.ok_stdin(&["create", "-f", "-"], RBAC_SETUP);
    #[rustfmt::skip]
    let table: &[(&str, &str, &str, &str, bool)] = &[
        ("viewer", "get", "pods", "ns1", true),
        ("viewer", "list", "deployments", "ns1", true),
        ("viewer", "watch", "services", "ns1", true),
        ("viewer", "get", "pods/log", "ns1", true),
        ("viewer", "get", "secrets", "ns1", false),
        ("viewer", "create", "pods", "ns1", false),
        ("viewer", "create", "pods/exec", "ns1", false),
        ("viewer", "delete", "pods", "ns1", false),
        ("viewer", "get", "pods", "ns2", false),
        ("editor", "create", "pods", "ns1", true),
        ("editor", "get", "secrets", "ns1", true),
        ("editor", "update", "secrets", "ns1", true),
        ("editor", "create", "pods/exec", "ns1", true),
        ("editor", "delete", "deployments", "ns1", true),
        ("editor", "patch", "services", "ns1", true),
        ("editor", "create", "roles", "ns1", false),
        ("editor", "get", "pods", "ns2", false),
        ("nsadmin", "create", "rolebindings", "ns1", true),
        ("nsadmin", "create", "roles", "ns1", true),
        ("nsadmin", "get", "resourcequotas", "ns1", true),
        ("nsadmin", "create", "rolebindings", "ns2", false),
        ("nsadmin", "delete", "namespaces", "ns1", false),
        ("reader", "get", "pods", "ns1", true),
        ("reader", "list", "pods", "ns1", true),
        ("reader", "delete", "pods", "ns1", false),
        ("reader", "get", "pods", "ns2", false),
        ("reader", "get", "configmaps", "ns1", false),
    ];
    // Bindings take effect when the authorizer has seen them: wait on the first one.
    wait_for("the bindings in effect", 10, || {
        can_i(&k, "reader", "get", "pods", "ns1").then_some(())
    });
    let wrong: Vec<String> = table
        .iter()
        .filter(|(u, v, r, ns, want)| can_i(&k, u, v, r, ns) != *want)
        .map(|(u, v, r, ns, want)| format!("{u} {v} {r} -n {ns}: want {want}"))
        .collect();
    assert!(
        wrong.is_empty(),
        "can-i disagrees with upstream:\n{}",
        wrong.join("\n")
    );
    let list = k.ok(&["auth", "can-i", "--list", "-n", "ns1", "--as", "reader"]);
    let pods = list
        .lines()
        .find(|l| l.starts_with("pods "))
        .unwrap_or_else(|| panic!("{list}"));
    assert!(pods.contains("[get list]"), "{list}");
    let k27 = Kubectl::new(27, &server);
    assert!(can_i(&k27, "editor", "create", "pods", "ns1"));
    assert!(!can_i(&k27, "viewer", "get", "secrets", "ns1"));
}

/// Forbidden requests get upstream's 403; impersonation needs `impersonate`; binding a
/// role one does not hold is an escalation.
#[test]
fn forbidden_impersonation_and_escalation() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(
        &dir.path().join("data"),
        &["--scheduler=false", "--controllers="],
    );
    let admin = Kubectl::new(33, &server);
    admin.ok_stdin(&["create", "-f", "-"], RBAC_SETUP);
    let as_user = |user: &str| {
        let mut k = Kubectl::new(33, &server);
        k.kubeconfig = user_kubeconfig(&server, dir.path(), user);
        k
    };
    let viewer = as_user("viewer");
    wait_for("view in effect", 10, || {
        viewer
            .output(&["get", "pods", "-n", "ns1"])
            .status
            .success()
            .then_some(())
    });
    let err = viewer.fails(&["get", "secrets", "-n", "ns1"]);
    assert!(
        err.contains(r#"secrets is forbidden: User "viewer" cannot list resource "secrets" in API group "" in the namespace "ns1""#),
        "{err}"
    );
    let me = whoami(&admin, &server.kubeconfig);
    assert_eq!(me["status"]["userInfo"]["username"], "cairn-admin");
    // Impersonation: only with the impersonate verb.
    let err = viewer.fails(&["get", "pods", "-n", "ns1", "--as", "editor"]);
    assert!(
        err.contains(r#"users "editor" is forbidden: User "viewer" cannot impersonate resource "users" in API group "" at the cluster scope"#),
        "{err}"
    );
    admin.ok(&[
        "create",
        "clusterrole",
        "impersonate-editor",
        "--verb=impersonate",
        "--resource=users",
        "--resource-name=editor",
    ]);
    admin.ok(&[
        "create",
        "clusterrolebinding",
        "viewer-impersonates",
        "--clusterrole=impersonate-editor",
        "--user=viewer",
    ]);
    wait_for("impersonation allowed", 10, || {
        viewer
            .output(&["get", "secrets", "-n", "ns1", "--as", "editor"])
            .status
            .success()
            .then_some(())
    });
    assert!(!viewer
        .output(&["get", "pods", "-n", "ns1", "--as", "nsadmin"])
        .status
        .success());
    // Escalation: the editor may create rolebindings, but not of cluster-admin.
    let editor = as_user("editor");
    let err = editor.fails(&[
        "create",
        "rolebinding",
        "grab",
        "-n",
        "ns1",
        "--clusterrole=cluster-admin",
        "--user=editor",
    ]);
    assert!(
        err.contains("attempting to grant RBAC permissions not currently held"),
        "{err}"
    );
    assert!(
        err.contains(r#"rolebindings.rbac.authorization.k8s.io "grab" is forbidden"#),
        "{err}"
    );
    // What it holds, it may bind.
    editor.ok(&[
        "create",
        "rolebinding",
        "share-view",
        "-n",
        "ns1",
        "--clusterrole=view",
        "--user=someone",
    ]);
}

/// A body over upstream's 3 MiB is a 413 in upstream's words; the server goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_bodies_are_413() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(dir.path(), &["--scheduler=false", "--controllers="]);
    let big = json!({"metadata": {"name": "big"}, "data": {"k": "x".repeat(4 << 20)}});
    let r = server
        .http()
        .post(format!(
            "{}/api/v1/namespaces/default/configmaps",
            server.url
        ))
        .json(&big)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 413);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["reason"], "RequestEntityTooLarge", "{body}");
    let (code, _) = get(&server.http(), &format!("{}/api/v1/namespaces", server.url)).await;
    assert_eq!(code, 200);
}
