//! The routes attached to one listener, as one ranked list of matches (HTTPRoute
//! precedence, `httproute_types.go`), per match, not per rule. Descending on the matched
//! hostname's non-wildcard length, then its length, an `Exact` path, the path value's
//! length, a method, the number of header matches, of query matches; then ascending on
//! the route's creation time, its `namespace/name`, the rule's and the match's index. A
//! request takes the first match that holds; no match is a 404.

use std::cmp::Reverse;

use crate::path::PathMatch;

use super::hostname;
use super::route::{BackendRef, Filter, HttpRoute, NameValueMatch, Redirect};

/// A request as matching reads it.
pub struct Request<'a> {
    /// Lower case, no port.
    pub host: &'a str,
    pub method: &'a str,
    /// Without the query.
    pub path: &'a str,
    /// The raw query (`a=1&b=2`), if any.
    pub query: Option<&'a str>,
    /// A header's first value by name (any case).
    pub header: &'a dyn Fn(&str) -> Option<String>,
}

/// What a matched rule does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send to one of these (weight > 0), after the rule's request header filters.
    Forward {
        backends: Vec<(BackendRef, u32)>,
        /// Shared: a request takes them without copying.
        filters: std::sync::Arc<[Filter]>,
    },
    Redirect(Redirect),
    /// A rule with no backend and no redirect: upstream asks for a 500.
    Error500,
}

/// Why a route does not serve on a listener (its parent status).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotAccepted {
    /// `Accepted=False`, reason `NoMatchingListenerHostname`.
    NoMatchingListenerHostname,
}

struct Ranked {
    key: RankKey,
    hostname: Option<String>,
    path: PathMatch,
    /// The path value as written (a redirect's `ReplacePrefixMatch` replaces it).
    value: String,
    method: Option<String>,
    headers: Vec<(String, String)>,
    query: Vec<(String, String)>,
    action: usize,
}

type RankKey = (
    Reverse<(usize, usize)>,
    Reverse<(bool, usize)>,
    Reverse<bool>,
    Reverse<usize>,
    Reverse<usize>,
    Option<String>,
    String,
    usize,
    usize,
);

/// The routes of one listener.
#[derive(Default)]
pub struct ListenerTable {
    matches: Vec<Ranked>,
    actions: Vec<Action>,
}

fn action_of(filters: &[Filter], backends: &[BackendRef]) -> Action {
    if let Some(r) = filters.iter().find_map(|f| f.request_redirect.clone()) {
        return Action::Redirect(r);
    }
    let weighted: Vec<(BackendRef, u32)> = backends
        .iter()
        .map(|b| (b.clone(), b.weight.unwrap_or(1).max(0) as u32))
        .filter(|(_, w)| *w > 0)
        .collect();
    if weighted.is_empty() {
        return Action::Error500;
    }
    Action::Forward {
        backends: weighted,
        filters: filters.into(),
    }
}

fn pairs(list: &[NameValueMatch], lower: bool) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for m in list {
        let name = if lower {
            m.name.to_ascii_lowercase()
        } else {
            m.name.clone()
        };
        // Equivalent names: only the first counts.
        if !out.iter().any(|(n, _)| *n == name) {
            out.push((name, m.value.clone()));
        }
    }
    out
}

impl ListenerTable {
    /// The table of `routes` on a listener of hostname `listener`; the routes with no
    /// hostname in common with it are returned apart, not served.
    pub fn build<'a>(
        listener: Option<&str>,
        routes: impl IntoIterator<Item = &'a HttpRoute>,
    ) -> (ListenerTable, Vec<(&'a HttpRoute, NotAccepted)>) {
        let mut table = ListenerTable::default();
        let mut refused = Vec::new();
        for route in routes {
            let effective: Vec<Option<String>> = hostname::of_route(route)
                .into_iter()
                .filter_map(|h| hostname::intersect(listener, h))
                .collect();
            if effective.is_empty() {
                refused.push((route, NotAccepted::NoMatchingListenerHostname));
                continue;
            }
            table.add(route, &effective);
        }
        table.matches.sort_by(|a, b| a.key.cmp(&b.key));
        (table, refused)
    }

    fn add(&mut self, route: &HttpRoute, hostnames: &[Option<String>]) {
        let created = route
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string());
        let namespace = route.metadata.namespace.clone().unwrap_or_default();
        let name = format!(
            "{namespace}/{}",
            route.metadata.name.clone().unwrap_or_default()
        );
        for (r, rule) in route.spec.rules.iter().enumerate() {
            self.actions
                .push(action_of(&rule.filters, &rule.backend_refs));
            let action = self.actions.len() - 1;
            let default = [Default::default()];
            let matches = rule
                .matches
                .as_deref()
                .filter(|m| !m.is_empty())
                .unwrap_or(&default);
            for (m, spec) in matches.iter().enumerate() {
                let path = spec.path.clone().unwrap_or_default();
                let value = path.value.unwrap_or_else(|| "/".into());
                let exact = path.type_.as_deref() == Some("Exact");
                let Ok(parsed) =
                    PathMatch::parse(Some(&value), if exact { "Exact" } else { "Prefix" })
                else {
                    continue;
                };
                let headers = pairs(&spec.headers, true);
                let query = pairs(&spec.query_params, false);
                for host in hostnames {
                    let key = (
                        Reverse(hostname::specificity(host.as_deref())),
                        Reverse((exact, value.len())),
                        Reverse(spec.method.is_some()),
                        Reverse(headers.len()),
                        Reverse(query.len()),
                        created.clone(),
                        name.clone(),
                        r,
                        m,
                    );
                    self.matches.push(Ranked {
                        key,
                        hostname: host.clone(),
                        path: parsed.clone(),
                        value: value.clone(),
                        method: spec.method.clone(),
                        headers: headers.clone(),
                        query: query.clone(),
                        action,
                    });
                }
            }
        }
    }

    /// Every rule's action (the Services a snapshot must know).
    pub fn actions(&self) -> &[Action] {
        &self.actions
    }

    /// What the request's best match does; `None`: a 404.
    pub fn route(&self, request: &Request<'_>) -> Option<&Action> {
        self.route_match(request).map(|(action, _)| action)
    }

    /// What the request's best match does, and that match's path value.
    pub fn route_match(&self, request: &Request<'_>) -> Option<(&Action, &str)> {
        let query: Vec<(&str, &str)> = request
            .query
            .unwrap_or("")
            .split('&')
            .filter_map(|kv| kv.split_once('=').or(Some((kv, ""))))
            .filter(|(k, _)| !k.is_empty())
            .collect();
        // The first value of a repeated parameter, as upstream recommends.
        let param = |name: &str| query.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
        self.matches
            .iter()
            .find(|m| {
                hostname::matches(m.hostname.as_deref(), request.host)
                    && m.path.matches(request.path)
                    && m.method.as_deref().is_none_or(|x| x == request.method)
                    && m.headers
                        .iter()
                        .all(|(n, v)| (request.header)(n).as_deref() == Some(v))
                    && m.query.iter().all(|(n, v)| param(n) == Some(v.as_str()))
            })
            .map(|m| (&self.actions[m.action], m.value.as_str()))
    }
}
