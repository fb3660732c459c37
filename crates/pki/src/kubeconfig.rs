//! A kubeconfig that stock kubectl and client libraries use as is: the cluster CA and a
//! client certificate (or a bearer token) embedded, so the file is all a client needs.

use base64::Engine;

use crate::IssuedCert;

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s.as_bytes())
}

/// A kubeconfig for `server`, trusting `ca_pem`, authenticating with `client`.
pub fn render(server: &str, ca_pem: &str, user: &str, client: &IssuedCert) -> String {
    let credentials = format!(
        "    client-certificate-data: {}\n    client-key-data: {}\n",
        b64(&client.cert_pem),
        b64(&client.key_pem)
    );
    document(server, ca_pem, user, &credentials)
}

/// A kubeconfig for `server`, trusting `ca_pem`, authenticating with a bearer token.
pub fn render_token(server: &str, ca_pem: &str, user: &str, token: &str) -> String {
    document(server, ca_pem, user, &format!("    token: {token}\n"))
}

fn document(server: &str, ca_pem: &str, user: &str, credentials: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: cairn
  cluster:
    server: {server}
    certificate-authority-data: {ca}
contexts:
- name: cairn
  context:
    cluster: cairn
    user: {user}
    namespace: default
current-context: cairn
users:
- name: {user}
  user:
{credentials}",
        ca = b64(ca_pem),
        user = yaml_name(user),
    )
}

/// User names like `system:node:node-1` hold colons: quoted, they stay one YAML scalar.
fn yaml_name(name: &str) -> String {
    format!("\"{}\"", name.replace('\\', "\\\\").replace('"', "\\\""))
}
