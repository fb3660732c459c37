//! What a request asks for, as upstream's `RequestInfoFactory` reads it from the method,
//! path and query: a resource request (verb, group, version, namespace, resource,
//! subresource, name) under `/api` and `/apis/<group>/<version>`, or a non-resource
//! request (any other path, with the lower-cased method as its verb).

use http::Method;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestInfo {
    pub resource_request: bool,
    pub path: String,
    pub verb: String,
    pub api_group: String,
    pub api_version: String,
    pub namespace: String,
    pub resource: String,
    pub subresource: String,
    pub name: String,
    /// A list's or watch's raw `fieldSelector` (the Node authorizer scopes a node's
    /// pod lists by `spec.nodeName`).
    pub field_selector: String,
}

/// Path segments after a namespace that are its own subresources, not a resource.
const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];

fn method_verb(method: &Method) -> &'static str {
    match *method {
        Method::POST => "create",
        Method::GET | Method::HEAD => "get",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "",
    }
}

/// The decoded value of one query parameter.
fn query_value(query: Option<&str>, key: &str) -> Option<String> {
    query.unwrap_or("").split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == key).then(|| {
            let v = v.replace('+', " ");
            percent_encoding::percent_decode_str(&v)
                .decode_utf8_lossy()
                .into_owned()
        })
    })
}

fn query_flag(query: Option<&str>, key: &str) -> bool {
    query.unwrap_or("").split('&').any(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        k == key && matches!(v, "1" | "true" | "True" | "TRUE")
    })
}

impl RequestInfo {
    pub fn new(method: &Method, path: &str, query: Option<&str>) -> RequestInfo {
        let non_resource = RequestInfo {
            path: path.to_string(),
            verb: method.as_str().to_ascii_lowercase(),
            ..RequestInfo::default()
        };
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        let (group, version, mut rest) = match parts.as_slice() {
            ["api", version, rest @ ..] if !rest.is_empty() => ("", *version, rest),
            ["apis", group, version, rest @ ..] if !rest.is_empty() => (*group, *version, rest),
            _ => return non_resource,
        };
        let mut verb = method_verb(method).to_string();
        if verb.is_empty() {
            return non_resource;
        }
        if rest.first() == Some(&"watch") {
            // The deprecated `/watch/` paths: a watch of what follows.
            verb = "watch".into();
            rest = &rest[1..];
        }
        let mut namespace = "";
        if rest.first() == Some(&"namespaces") && rest.len() > 1 {
            namespace = rest[1];
            if rest.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&rest[2]) {
                rest = &rest[2..];
            }
        }
        let at = |i: usize| rest.get(i).copied().unwrap_or("").to_string();
        let mut info = RequestInfo {
            resource_request: true,
            path: path.to_string(),
            verb,
            api_group: group.to_string(),
            api_version: version.to_string(),
            namespace: namespace.to_string(),
            resource: at(0),
            name: at(1),
            subresource: at(2),
            field_selector: String::new(),
        };
        info.refine_verb(query);
        info
    }

    /// A collection GET is a list (a watch with `watch=true`), a collection DELETE a
    /// deletecollection.
    fn refine_verb(&mut self, query: Option<&str>) {
        if self.name.is_empty() {
            match self.verb.as_str() {
                "get" => self.verb = "list".into(),
                "delete" => self.verb = "deletecollection".into(),
                _ => {}
            }
        }
        if matches!(self.verb.as_str(), "list" | "get") && query_flag(query, "watch") {
            self.verb = "watch".into();
        }
        if self.name.is_empty() && matches!(self.verb.as_str(), "list" | "watch") {
            self.field_selector = query_value(query, "fieldSelector").unwrap_or_default();
            // Upstream: a list or watch of one name by `metadata.name=` is authorized
            // as a request for that name (a kubelet watches one Secret this way).
            if let Some(name) = exact_name(&self.field_selector) {
                self.name = name.to_string();
            }
        }
    }
}

/// The name a field selector requires exactly (`metadata.name=x` or `==x`), when it
/// is a valid path segment.
fn exact_name(selector: &str) -> Option<&str> {
    let found = selector.split(',').find_map(|req| {
        let (k, v) = req.split_once('=')?;
        (k.trim() == "metadata.name").then(|| v.strip_prefix('=').unwrap_or(v).trim())
    });
    found.filter(|n| !n.is_empty() && *n != "." && *n != ".." && !n.contains(['/', '%']))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(
        m: Method,
        p: &str,
        q: Option<&str>,
    ) -> (String, String, String, String, String, String) {
        let i = RequestInfo::new(&m, p, q);
        (
            i.verb,
            i.api_group,
            i.namespace,
            i.resource,
            i.subresource,
            i.name,
        )
    }

    fn t(
        v: &str,
        g: &str,
        ns: &str,
        r: &str,
        s: &str,
        n: &str,
    ) -> (String, String, String, String, String, String) {
        (v.into(), g.into(), ns.into(), r.into(), s.into(), n.into())
    }

    #[test]
    fn upstreams_cases() {
        let pods = "/api/v1/namespaces/ns1/pods";
        assert_eq!(
            info(Method::GET, pods, None),
            t("list", "", "ns1", "pods", "", "")
        );
        assert_eq!(
            info(Method::GET, pods, Some("watch=true")),
            t("watch", "", "ns1", "pods", "", "")
        );
        assert_eq!(
            info(Method::POST, pods, None),
            t("create", "", "ns1", "pods", "", "")
        );
        assert_eq!(
            info(Method::DELETE, pods, None),
            t("deletecollection", "", "ns1", "pods", "", "")
        );
        assert_eq!(
            info(Method::GET, "/api/v1/namespaces/ns1/pods/web/log", None),
            t("get", "", "ns1", "pods", "log", "web")
        );
        assert_eq!(
            info(Method::POST, "/api/v1/namespaces/ns1/pods/web/exec", None),
            t("create", "", "ns1", "pods", "exec", "web")
        );
        assert_eq!(
            info(Method::GET, "/api/v1/namespaces/ns1", None),
            t("get", "", "ns1", "namespaces", "", "ns1")
        );
        assert_eq!(
            info(Method::PUT, "/api/v1/namespaces/ns1/finalize", None),
            t("update", "", "ns1", "namespaces", "finalize", "ns1")
        );
        assert_eq!(
            info(
                Method::PATCH,
                "/apis/apps/v1/namespaces/a/deployments/d/scale",
                None
            ),
            t("patch", "apps", "a", "deployments", "scale", "d")
        );
        assert_eq!(
            info(Method::GET, "/api/v1/nodes", None),
            t("list", "", "", "nodes", "", "")
        );
        assert_eq!(
            info(Method::GET, "/api/v1/watch/namespaces/a/pods", None),
            t("watch", "", "a", "pods", "", "")
        );
    }

    #[test]
    fn a_list_of_one_name_is_a_request_for_that_name() {
        let q = Some("fieldSelector=metadata.name%3Dtls&watch=1");
        let i = RequestInfo::new(&Method::GET, "/api/v1/namespaces/a/secrets", q);
        assert_eq!((i.verb.as_str(), i.name.as_str()), ("watch", "tls"));
        assert_eq!(i.field_selector, "metadata.name=tls");
        let q = Some("fieldSelector=spec.nodeName%3Dn1");
        let i = RequestInfo::new(&Method::GET, "/api/v1/pods", q);
        assert_eq!(
            (i.name.as_str(), i.field_selector.as_str()),
            ("", "spec.nodeName=n1")
        );
        // metadata.name!=x names nothing; a name with a slash is not a name.
        for sel in ["metadata.name!%3Dx", "metadata.name%3Da/b"] {
            let q = format!("fieldSelector={sel}");
            let i = RequestInfo::new(&Method::GET, "/api/v1/secrets", Some(&q));
            assert_eq!(i.name, "", "{sel}");
        }
    }

    #[test]
    fn discovery_and_health_are_non_resource() {
        for p in [
            "/api",
            "/api/v1",
            "/apis",
            "/apis/apps",
            "/apis/apps/v1",
            "/healthz",
            "/version",
        ] {
            let i = RequestInfo::new(&Method::GET, p, None);
            assert!(!i.resource_request, "{p}");
            assert_eq!(i.verb, "get");
        }
    }
}
