//! Registry credentials and their lookup in `imagePullSecrets` (`kubernetes.io/dockerconfigjson`
//! and `kubernetes.io/dockercfg`), with the kubelet keyring's matching rules.

use std::fmt;

use base64::Engine as _;
use serde_json::Value;

/// Docker Hub's legacy key in docker config files (`https://index.docker.io/v1/`).
const DOCKER_HUB_KEY_HOST: &str = "index.docker.io";

/// Credentials for one registry.
#[derive(Clone, PartialEq, Eq)]
pub enum Credentials {
    /// Username and password: sent as basic auth, or to the token endpoint of a Bearer
    /// challenge.
    Basic { username: String, password: String },
    /// An OAuth2 refresh token exchanged at the token endpoint (`identitytoken`).
    IdentityToken(String),
    /// A bearer token sent to the registry as is (`registrytoken`).
    RegistryToken(String),
}

impl Credentials {
    pub fn basic(username: &str, password: &str) -> Self {
        Self::Basic {
            username: username.to_owned(),
            password: password.to_owned(),
        }
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Basic { username, .. } => write!(f, "Basic({username}, <redacted>)"),
            Self::IdentityToken(_) => f.write_str("IdentityToken(<redacted>)"),
            Self::RegistryToken(_) => f.write_str("RegistryToken(<redacted>)"),
        }
    }
}

/// The docker config could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error("docker config is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("docker config is not a JSON object")]
    NotAnObject,
}

/// The first credentials in a docker config (`{"auths": {...}}` or the legacy top-level map)
/// that apply to `image`, which may be a registry host (`registry.example.com:5000`) or a
/// repository (`docker.io/library/busybox`). Invalid JSON yields `None`.
pub fn credentials_from_docker_config(json: &[u8], image: &str) -> Option<Credentials> {
    docker_config_credentials(json, image)
        .ok()
        .and_then(|v| v.into_iter().next())
}

/// Every credential in a docker config that applies to `image`, most specific first,
/// following the kubelet's `BasicDockerKeyring`: keys may carry a scheme, a path prefix
/// and `*` globs per host label; the `https://index.docker.io/v1/` key applies to Docker
/// Hub images.
pub fn docker_config_credentials(
    json: &[u8],
    image: &str,
) -> Result<Vec<Credentials>, CredentialsError> {
    let value: Value = serde_json::from_slice(json)?;
    let root = value.as_object().ok_or(CredentialsError::NotAnObject)?;
    let auths = match root.get("auths").and_then(Value::as_object) {
        Some(a) => a,
        None => root,
    };
    let mut entries: Vec<(String, Credentials)> = auths
        .iter()
        .filter_map(|(key, entry)| Some((keyring_key(key)?, entry_credentials(entry)?)))
        .collect();
    // Reverse-sorted keys: longer, more specific paths match first.
    entries.sort_by(|a, b| b.0.cmp(&a.0));
    let mut out: Vec<Credentials> = entries
        .iter()
        .filter(|(key, _)| urls_match(key, image))
        .map(|(_, c)| c.clone())
        .collect();
    if out.is_empty() && is_default_registry_match(image) {
        out = entries
            .iter()
            .filter(|(key, _)| key == DOCKER_HUB_KEY_HOST)
            .map(|(_, c)| c.clone())
            .collect();
    }
    out.dedup();
    Ok(out)
}

fn entry_credentials(entry: &Value) -> Option<Credentials> {
    let field = |name: &str| {
        entry
            .get(name)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    if let Some(token) = field("identitytoken") {
        return Some(Credentials::IdentityToken(token));
    }
    if let Some(token) = field("registrytoken") {
        return Some(Credentials::RegistryToken(token));
    }
    let (mut username, mut password) = (field("username"), field("password"));
    if username.is_none() && password.is_none() {
        let auth = field("auth")?;
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth.trim())
            .ok()?;
        let decoded = String::from_utf8(decoded).ok()?;
        let (u, p) = decoded.split_once(':')?;
        username = Some(u.to_owned());
        password = Some(p.to_owned());
    }
    Some(Credentials::Basic {
        username: username.unwrap_or_default(),
        password: password.unwrap_or_default(),
    })
}

/// Host (with port) plus the path below `/v1/` or `/v2/`, scheme removed.
fn keyring_key(location: &str) -> Option<String> {
    let (host, path) = split_schemeless(location)?;
    let path = path
        .strip_prefix("/v2/")
        .or_else(|| path.strip_prefix("/v1/"))
        .map_or(path.as_str(), |p| p);
    let path = path.trim_start_matches('/');
    if path.is_empty() {
        Some(host)
    } else {
        Some(format!("{host}/{path}"))
    }
}

/// (host[:port], path) of a URL that may lack a scheme.
fn split_schemeless(s: &str) -> Option<(String, String)> {
    let rest = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"))
        .unwrap_or(s);
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if host.is_empty() {
        return None;
    }
    Some((host.to_lowercase(), path.to_owned()))
}

/// kubelet's URLsMatchStr: same number of host labels, each matching as a glob, equal
/// ports, and the key's path a prefix of the image's.
fn urls_match(key: &str, image: &str) -> bool {
    let (Some((key_host, key_path)), Some((img_host, img_path))) =
        (split_schemeless(key), split_schemeless(image))
    else {
        return false;
    };
    let (key_name, key_port) = split_port(&key_host);
    let (img_name, img_port) = split_port(&img_host);
    if key_port != img_port {
        return false;
    }
    let key_labels: Vec<&str> = key_name.split('.').collect();
    let img_labels: Vec<&str> = img_name.split('.').collect();
    if key_labels.len() != img_labels.len() {
        return false;
    }
    if !key_labels
        .iter()
        .zip(&img_labels)
        .all(|(k, i)| glob_match(k.as_bytes(), i.as_bytes()))
    {
        return false;
    }
    img_path.starts_with(&key_path)
}

fn split_port(host: &str) -> (&str, &str) {
    match host.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || host.starts_with('[') => (h, p),
        _ => (host, ""),
    }
}

/// `*` (any run) and `?` (one byte) globbing, as filepath.Match does within a label.
fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    match (pattern.first(), text.first()) {
        (None, None) => true,
        (Some(b'*'), _) => {
            glob_match(&pattern[1..], text) || (!text.is_empty() && glob_match(pattern, &text[1..]))
        }
        (Some(b'?'), Some(_)) => glob_match(&pattern[1..], &text[1..]),
        (Some(p), Some(t)) if p == t => glob_match(&pattern[1..], &text[1..]),
        _ => false,
    }
}

/// Docker Hub images: no registry component, or `docker.io` / `index.docker.io`.
fn is_default_registry_match(image: &str) -> bool {
    let mut parts = image.splitn(2, '/');
    let first = parts.next().unwrap_or_default();
    if first.is_empty() {
        return false;
    }
    match parts.next() {
        None => true,
        Some(_) => {
            first == "docker.io" || first == DOCKER_HUB_KEY_HOST || !first.contains(['.', ':'])
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    fn basic(u: &str, p: &str) -> Credentials {
        Credentials::basic(u, p)
    }

    #[test]
    fn dockerconfigjson_and_dockercfg() {
        let auth = base64::engine::general_purpose::STANDARD.encode("bob:pw2");
        let json = format!(
            r#"{{"auths": {{
                "127.0.0.1:5000": {{"username": "alice", "password": "pw1"}},
                "registry.example.com/team": {{"auth": "{auth}"}},
                "https://index.docker.io/v1/": {{"username": "hub", "password": "hubpw"}},
                "*.corp.example": {{"identitytoken": "refresh"}}
            }}}}"#
        );
        let j = json.as_bytes();
        assert_eq!(
            credentials_from_docker_config(j, "127.0.0.1:5000"),
            Some(basic("alice", "pw1"))
        );
        assert_eq!(
            credentials_from_docker_config(j, "127.0.0.1:5000/cairn/busybox"),
            Some(basic("alice", "pw1"))
        );
        assert_eq!(credentials_from_docker_config(j, "127.0.0.1:5001/x"), None);
        assert_eq!(
            credentials_from_docker_config(j, "registry.example.com/team/app"),
            Some(basic("bob", "pw2"))
        );
        assert_eq!(
            credentials_from_docker_config(j, "registry.example.com/other/app"),
            None
        );
        assert_eq!(
            credentials_from_docker_config(j, "docker.io/library/busybox"),
            Some(basic("hub", "hubpw"))
        );
        assert_eq!(
            credentials_from_docker_config(j, "busybox"),
            Some(basic("hub", "hubpw"))
        );
        assert_eq!(
            credentials_from_docker_config(j, "reg.corp.example/app"),
            Some(Credentials::IdentityToken("refresh".into()))
        );
        assert_eq!(
            credentials_from_docker_config(j, "a.b.corp.example/app"),
            None
        );

        let legacy = br#"{"legacy.example.com": {"auth": "dTpw", "email": "x@y"}}"#;
        assert_eq!(
            credentials_from_docker_config(legacy, "legacy.example.com/x"),
            Some(basic("u", "p"))
        );
        assert_eq!(credentials_from_docker_config(b"not json", "x"), None);
    }

    #[test]
    fn more_specific_paths_first() {
        let json = br#"{"auths": {
            "quay.io": {"username": "a", "password": "1"},
            "quay.io/coreos": {"username": "b", "password": "2"}
        }}"#;
        let all = docker_config_credentials(json, "quay.io/coreos/etcd").unwrap();
        assert_eq!(all, vec![basic("b", "2"), basic("a", "1")]);
    }

    #[test]
    fn debug_redacts_secrets() {
        let text = format!("{:?}", basic("alice", "topsecret"));
        assert!(!text.contains("topsecret"), "{text}");
    }
}
