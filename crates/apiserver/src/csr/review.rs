//! What the CSR approver and signer decide, as pure checks over a parsed request
//! (upstream's `pkg/controller/certificates/approver/sarapprove.go` and the signer's
//! `ValidateKubeletClientCSR` / `ValidateKubeletServingCSR`).

use std::collections::BTreeSet;
use std::net::IpAddr;

use cairn_pki::csr::RequestInfo;

pub const KUBELET_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
pub const KUBELET_SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";
pub const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";

const NODES_GROUP: &str = "system:nodes";
const NODE_PREFIX: &str = "system:node:";
/// The user upstream's bootstrap policy binds to `system:node-proxier` (and cairn to
/// `cairn:network-policy`).
pub const KUBE_PROXY_USER: &str = "system:kube-proxy";

/// A request as the controllers see it: the CSR's spec and its parsed PEM.
pub struct Review<'a> {
    pub signer: &'a str,
    pub username: &'a str,
    pub usages: Vec<&'a str>,
    pub request: &'a RequestInfo,
}

/// Why a request cannot be signed (the `Failed` condition's message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    #[error("subject organization is not system:nodes")]
    Organization,
    #[error("subject common name does not begin with system:node:")]
    CommonName,
    #[error("{0} subjectAltNames are not allowed")]
    AltNames(&'static str),
    #[error("usages did not match {0:?}")]
    Usages(Vec<&'static str>),
    #[error("DNS or IP subjectAltName is required")]
    NoAltNames,
    #[error("subject is not CN=system:kube-proxy with no organization")]
    KubeProxySubject,
}

fn node_subject(r: &RequestInfo) -> Result<(), Invalid> {
    if r.organizations != [NODES_GROUP] {
        return Err(Invalid::Organization);
    }
    if !r.common_name.starts_with(NODE_PREFIX) {
        return Err(Invalid::CommonName);
    }
    Ok(())
}

/// `usages` within `allowed` and holding `required`.
fn usages(review: &Review<'_>, allowed: &[&'static str], required: &str) -> Result<(), Invalid> {
    let set: BTreeSet<&str> = review.usages.iter().copied().collect();
    if !set.contains(required) || !set.iter().all(|u| allowed.contains(u)) {
        return Err(Invalid::Usages(allowed.to_vec()));
    }
    Ok(())
}

/// A kubelet client certificate: `system:node:<name>` in `system:nodes`, no names.
pub fn kubelet_client(review: &Review<'_>) -> Result<(), Invalid> {
    let r = review.request;
    node_subject(r)?;
    if !r.dns_names.is_empty() || !r.ip_addresses.is_empty() {
        return Err(Invalid::AltNames("DNS or IP"));
    }
    if !r.email_addresses.is_empty() || !r.uris.is_empty() {
        return Err(Invalid::AltNames("email or URI"));
    }
    let allowed = ["digital signature", "key encipherment", "client auth"];
    usages(review, &allowed, "client auth")
}

/// A kubelet serving certificate: the node's subject, DNS or IP names, server auth.
pub fn kubelet_serving(review: &Review<'_>) -> Result<(), Invalid> {
    let r = review.request;
    node_subject(r)?;
    if r.dns_names.is_empty() && r.ip_addresses.is_empty() {
        return Err(Invalid::NoAltNames);
    }
    if !r.email_addresses.is_empty() || !r.uris.is_empty() {
        return Err(Invalid::AltNames("email or URI"));
    }
    let allowed = ["digital signature", "key encipherment", "server auth"];
    usages(review, &allowed, "server auth")
}

/// A node's proxy client certificate: `system:kube-proxy` alone (no group, which could
/// be `system:masters`), no names, client usages.
pub fn kube_proxy_client(review: &Review<'_>) -> Result<(), Invalid> {
    let r = review.request;
    if r.common_name != KUBE_PROXY_USER || !r.organizations.is_empty() {
        return Err(Invalid::KubeProxySubject);
    }
    let names = !r.dns_names.is_empty() || !r.ip_addresses.is_empty();
    if names || !r.email_addresses.is_empty() || !r.uris.is_empty() {
        return Err(Invalid::AltNames("DNS, IP, email or URI"));
    }
    let allowed = ["digital signature", "key encipherment", "client auth"];
    usages(review, &allowed, "client auth")
}

/// Which SubjectAccessReview subresource the approver asks for a kubelet client
/// request: `selfnodeclient` for a node renewing its own, `nodeclient` otherwise.
pub fn client_approval_subresource(review: &Review<'_>) -> Option<&'static str> {
    if review.signer == CLIENT_SIGNER && kube_proxy_client(review).is_ok() {
        return Some("kubeproxyclient");
    }
    if review.signer != KUBELET_CLIENT_SIGNER || kubelet_client(review).is_err() {
        return None;
    }
    if review.username == review.request.common_name {
        Some("selfnodeclient")
    } else {
        Some("nodeclient")
    }
}

/// The message of an approval through `subresource`.
pub fn client_approval_message(subresource: &str) -> &'static str {
    if subresource == "selfnodeclient" {
        "Auto approving self kubelet client certificate after SubjectAccessReview."
    } else if subresource == "kubeproxyclient" {
        "Auto approving kube-proxy client certificate after SubjectAccessReview."
    } else {
        "Auto approving kubelet client certificate after SubjectAccessReview."
    }
}

/// cairn approves a serving request only when the node asks for itself and every
/// name is the node's: its name or a hostname it reports, an address it reports.
/// (Upstream leaves these to a third-party approver; kubeadm documents doing so.)
pub fn serving_is_the_nodes_own(
    review: &Review<'_>,
    node_names: &[String],
    node_ips: &[IpAddr],
) -> bool {
    let r = review.request;
    review.signer == KUBELET_SERVING_SIGNER
        && kubelet_serving(review).is_ok()
        && review.username == r.common_name
        && r.dns_names.iter().all(|d| node_names.contains(d))
        && r.ip_addresses.iter().all(|ip| node_ips.contains(ip))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(cn: &str, dns: &[&str], ips: &[&str]) -> RequestInfo {
        RequestInfo {
            common_name: cn.into(),
            organizations: vec![NODES_GROUP.into()],
            dns_names: dns.iter().map(|s| s.to_string()).collect(),
            ip_addresses: ips.iter().map(|s| s.parse().unwrap()).collect(),
            email_addresses: vec![],
            uris: vec![],
        }
    }

    fn review<'a>(
        signer: &'a str,
        user: &'a str,
        usages: &[&'a str],
        r: &'a RequestInfo,
    ) -> Review<'a> {
        Review {
            signer,
            username: user,
            usages: usages.to_vec(),
            request: r,
        }
    }

    #[test]
    fn client_requests_ask_nodeclient_or_selfnodeclient() {
        let r = request("system:node:n1", &[], &[]);
        let u = ["digital signature", "client auth"];
        let boot = review(KUBELET_CLIENT_SIGNER, "system:bootstrap:abcdef", &u, &r);
        assert_eq!(client_approval_subresource(&boot), Some("nodeclient"));
        let own = review(KUBELET_CLIENT_SIGNER, "system:node:n1", &u, &r);
        assert_eq!(client_approval_subresource(&own), Some("selfnodeclient"));
        let server = review(
            KUBELET_CLIENT_SIGNER,
            "system:node:n1",
            &["server auth"],
            &r,
        );
        assert_eq!(client_approval_subresource(&server), None);
        let named = request("system:node:n1", &["n1"], &[]);
        let named = review(KUBELET_CLIENT_SIGNER, "system:node:n1", &u, &named);
        assert_eq!(kubelet_client(&named), Err(Invalid::AltNames("DNS or IP")));
        let mut other = request("alice", &[], &[]);
        assert_eq!(
            kubelet_client(&review(KUBELET_CLIENT_SIGNER, "x", &u, &other)),
            Err(Invalid::CommonName)
        );
        other.organizations = vec!["system:masters".into()];
        assert_eq!(
            kubelet_client(&review(KUBELET_CLIENT_SIGNER, "x", &u, &other)),
            Err(Invalid::Organization)
        );
    }

    #[test]
    fn kube_proxy_requests_ask_kubeproxyclient_for_the_exact_subject_only() {
        let mut proxy = request(KUBE_PROXY_USER, &[], &[]);
        proxy.organizations.clear();
        let u = ["digital signature", "key encipherment", "client auth"];
        let ask = review(CLIENT_SIGNER, "system:node:n1", &u, &proxy);
        assert_eq!(client_approval_subresource(&ask), Some("kubeproxyclient"));
        // Another signer, a group, another name, names, a server usage: not approved.
        let kubelet = review(KUBELET_CLIENT_SIGNER, "system:node:n1", &u, &proxy);
        assert_eq!(client_approval_subresource(&kubelet), None);
        let mut masters = proxy.clone();
        masters.organizations = vec!["system:masters".into()];
        let ask = review(CLIENT_SIGNER, "system:node:n1", &u, &masters);
        assert_eq!(kube_proxy_client(&ask), Err(Invalid::KubeProxySubject));
        assert_eq!(client_approval_subresource(&ask), None);
        let other = request("system:kube-proxyx", &[], &[]);
        let ask = review(CLIENT_SIGNER, "system:node:n1", &u, &other);
        assert_eq!(client_approval_subresource(&ask), None);
        let mut named = proxy.clone();
        named.dns_names = vec!["n1".into()];
        let ask = review(CLIENT_SIGNER, "system:node:n1", &u, &named);
        assert_eq!(client_approval_subresource(&ask), None);
        let ask = review(CLIENT_SIGNER, "system:node:n1", &["server auth"], &proxy);
        assert_eq!(client_approval_subresource(&ask), None);
    }

    #[test]
    fn serving_requests_are_approved_only_for_the_nodes_names() {
        let names = vec!["n1".to_string()];
        let ips: Vec<IpAddr> = vec!["198.18.0.2".parse().unwrap()];
        let u = ["digital signature", "key encipherment", "server auth"];
        let own = request("system:node:n1", &["n1"], &["198.18.0.2"]);
        assert!(serving_is_the_nodes_own(
            &review(KUBELET_SERVING_SIGNER, "system:node:n1", &u, &own),
            &names,
            &ips
        ));
        // Someone else's address, another node asking, a client usage: left pending.
        let foreign = request("system:node:n1", &["n1"], &["198.18.0.3"]);
        assert!(!serving_is_the_nodes_own(
            &review(KUBELET_SERVING_SIGNER, "system:node:n1", &u, &foreign),
            &names,
            &ips
        ));
        assert!(!serving_is_the_nodes_own(
            &review(KUBELET_SERVING_SIGNER, "system:node:n2", &u, &own),
            &names,
            &ips
        ));
        let client = ["client auth", "server auth"];
        assert!(!serving_is_the_nodes_own(
            &review(KUBELET_SERVING_SIGNER, "system:node:n1", &client, &own),
            &names,
            &ips
        ));
    }
}
