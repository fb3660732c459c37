//! Path matching (`spec.rules[].http.paths[]`), as the Ingress API defines `pathType`.

/// A path rule.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathMatch {
    /// The whole request path, case-sensitive.
    Exact(String),
    /// Element-wise on `/`: `/foo/bar` matches `/foo/bar` and `/foo/bar/baz`, not
    /// `/foo/barbaz`; a trailing slash on either side is ignored; `/` matches every path.
    /// Holds the path's elements.
    Prefix(Vec<String>),
}

/// Why a path rule cannot be used (the API server validates these; a controller reading
/// objects stored before validation, or by another server, still refuses them).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("path {0:?}: must be an absolute path")]
    NotAbsolute(String),
    #[error("pathType {0:?}: supported values: \"Exact\", \"ImplementationSpecific\", \"Prefix\"")]
    UnknownType(String),
}

fn elements(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter(|e| !e.is_empty())
}

impl PathMatch {
    /// A rule's `path` (default `/`) and `pathType`; `ImplementationSpecific` is `Prefix`
    /// here, as ingress-nginx treats a plain path.
    pub fn parse(path: Option<&str>, path_type: &str) -> Result<PathMatch, PathError> {
        let path = path.filter(|p| !p.is_empty()).unwrap_or("/");
        if !path.starts_with('/') {
            return Err(PathError::NotAbsolute(path.to_string()));
        }
        match path_type {
            "Exact" => Ok(PathMatch::Exact(path.to_string())),
            "Prefix" | "ImplementationSpecific" => Ok(PathMatch::Prefix(
                elements(path).map(str::to_string).collect(),
            )),
            other => Err(PathError::UnknownType(other.to_string())),
        }
    }

    /// Whether the request path (without its query) matches.
    pub fn matches(&self, request: &str) -> bool {
        match self {
            PathMatch::Exact(p) => p == request,
            PathMatch::Prefix(want) => {
                let mut got = elements(request);
                want.iter().all(|w| got.next() == Some(w.as_str()))
            }
        }
    }

    /// How specific the rule is, for precedence: the longest path first, then `Exact`
    /// before `Prefix` ("precedence will be given first to the longest matching path. If
    /// two paths are still equally matched, ... an exact path type over prefix").
    pub fn specificity(&self) -> (usize, bool) {
        match self {
            PathMatch::Exact(p) => (p.trim_end_matches('/').len(), true),
            PathMatch::Prefix(e) => (e.iter().map(|s| s.len() + 1).sum(), false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefix(p: &str) -> PathMatch {
        PathMatch::parse(Some(p), "Prefix").unwrap()
    }

    fn exact(p: &str) -> PathMatch {
        PathMatch::parse(Some(p), "Exact").unwrap()
    }

    /// The Ingress docs' "Examples" table, row by row.
    #[test]
    fn upstreams_path_table() {
        assert!(prefix("/").matches("/anything/at/all"));
        assert!(exact("/foo").matches("/foo"));
        assert!(!exact("/foo").matches("/bar"));
        assert!(!exact("/foo").matches("/foo/"));
        assert!(!exact("/foo/").matches("/foo"));
        assert!(prefix("/foo").matches("/foo") && prefix("/foo").matches("/foo/"));
        assert!(prefix("/foo/").matches("/foo") && prefix("/foo/").matches("/foo/"));
        assert!(!prefix("/aaa/bb").matches("/aaa/bbb"));
        assert!(prefix("/aaa/bbb").matches("/aaa/bbb"));
        assert!(prefix("/aaa/bbb/").matches("/aaa/bbb"));
        assert!(prefix("/aaa/bbb").matches("/aaa/bbb/"));
        assert!(prefix("/aaa/bbb").matches("/aaa/bbb/ccc"));
        assert!(!prefix("/aaa/bbb").matches("/aaa/bbbxyz"));
        assert!(!prefix("/foo").matches("/Foo"), "case-sensitive");
    }

    #[test]
    fn longer_paths_then_exact_paths_come_first() {
        assert!(prefix("/aaa").specificity() > prefix("/").specificity());
        assert!(exact("/foo").specificity() > prefix("/foo").specificity());
        assert!(exact("/foo").specificity() > prefix("/foo/").specificity());
        assert!(prefix("/aaa/bbb").specificity() > exact("/aaa").specificity());
    }

    #[test]
    fn bad_paths_are_refused_in_the_apis_words() {
        assert_eq!(
            PathMatch::parse(Some("foo"), "Prefix"),
            Err(PathError::NotAbsolute("foo".into()))
        );
        let e = PathMatch::parse(Some("/"), "Regex").unwrap_err();
        assert!(e.to_string().contains("supported values"), "{e}");
        assert_eq!(
            PathMatch::parse(None, "Prefix"),
            Ok(PathMatch::Prefix(vec![]))
        );
    }
}
