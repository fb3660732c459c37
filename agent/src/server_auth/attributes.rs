//! The attributes of an agent request (upstream's `GetRequestAttributes`): the verb from
//! the method, resource `nodes`, the node's name, and the subresource from the path:
//! `stats` under `/stats/`, `metrics` under `/metrics`, `log` under `/logs/`,
//! `proxy` for everything else (exec, attach, port-forward, container logs, pods).

/// What a request asks of the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRequest {
    pub verb: &'static str,
    pub subresource: &'static str,
    pub node: String,
    pub path: String,
}

impl NodeRequest {
    /// What the SubjectAccessReview asks: `nodes/<subresource>` of this node.
    pub fn access(&self) -> cairn_delegated::Access {
        cairn_delegated::Access::Resource {
            verb: self.verb,
            resource: "nodes",
            subresource: self.subresource,
            name: self.node.clone(),
        }
    }
}

/// `path` is `prefix` or below it (upstream's `isSubpath`).
fn under(path: &str, prefix: &str) -> bool {
    let prefix = prefix.trim_end_matches('/');
    path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
}

pub fn request_attributes(method: &http::Method, path: &str, node: &str) -> NodeRequest {
    let subresource = if under(path, "/stats") {
        "stats"
    } else if under(path, "/metrics") {
        "metrics"
    } else if under(path, "/logs") {
        "log"
    } else {
        "proxy"
    };
    NodeRequest {
        verb: cairn_delegated::access::verb(method),
        subresource,
        node: node.to_string(),
        path: path.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    #[test]
    fn paths_map_to_upstreams_subresources() {
        let cases = [
            (Method::GET, "/stats/summary", "get", "stats"),
            (Method::GET, "/stats", "get", "stats"),
            (Method::GET, "/statsx", "get", "proxy"),
            (Method::GET, "/metrics", "get", "metrics"),
            (Method::GET, "/metrics/cadvisor", "get", "metrics"),
            (Method::GET, "/logs/syslog", "get", "log"),
            (Method::POST, "/exec/ns/pod/c", "create", "proxy"),
            (Method::GET, "/containerLogs/ns/pod/c", "get", "proxy"),
            (Method::POST, "/portForward/ns/pod", "create", "proxy"),
            (Method::GET, "/pods", "get", "proxy"),
            (Method::HEAD, "/pods", "", "proxy"),
        ];
        for (method, path, verb, sub) in cases {
            let r = request_attributes(&method, path, "n1");
            assert_eq!((r.verb, r.subresource), (verb, sub), "{method} {path}");
        }
    }
}
