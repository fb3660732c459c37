//! Which endpoints serve a registry: containerd's `hosts.toml` layout
//! (`<dir>/<host>/hosts.toml`, falling back to `<dir>/_default/hosts.toml`), else the
//! registry itself over HTTPS, or plain HTTP for loopback registries (as Docker and
//! containerd allow without configuration).

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use url::Url;

use crate::reference::DOCKER_HUB;

/// Default location of the hosts directory on a node.
pub const DEFAULT_HOSTS_DIR: &str = "/etc/cairn/certs.d";

const DOCKER_HUB_SERVER: &str = "https://registry-1.docker.io";

/// A hosts.toml that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum HostsError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("parsing {path}: {detail}")]
    Parse { path: PathBuf, detail: String },
}

/// One endpoint to try, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryHost {
    /// Base URL up to and including the API path, e.g. `https://mirror:5000/v2`.
    pub base: Url,
    /// May resolve tags to manifests.
    pub resolve: bool,
    /// May serve blobs and manifests by digest.
    pub pull: bool,
    /// Accept any TLS certificate.
    pub skip_verify: bool,
    /// Extra CA certificates (PEM files).
    pub ca: Vec<PathBuf>,
}

impl RegistryHost {
    /// `scheme://host[:port]` for messages.
    pub fn origin(&self) -> String {
        self.base.origin().ascii_serialization()
    }
}

/// The endpoints for `registry` (as in an image reference: `docker.io`, `host:port`).
pub fn registry_hosts(
    registry: &str,
    hosts_dir: Option<&Path>,
) -> Result<Vec<RegistryHost>, HostsError> {
    if let Some(dir) = hosts_dir {
        for candidate in [dir.join(registry), dir.join("_default")] {
            let file = candidate.join("hosts.toml");
            match std::fs::read_to_string(&file) {
                Ok(text) => return parse_hosts_toml(registry, &file, &text),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(source) => return Err(HostsError::Read { path: file, source }),
            }
        }
    }
    Ok(vec![default_host(registry)?])
}

fn default_server(registry: &str) -> String {
    if registry == DOCKER_HUB {
        DOCKER_HUB_SERVER.to_owned()
    } else if is_loopback(registry) {
        format!("http://{registry}")
    } else {
        format!("https://{registry}")
    }
}

fn default_host(registry: &str) -> Result<RegistryHost, HostsError> {
    let server = default_server(registry);
    let base = with_api_path(&server, false).map_err(|e| HostsError::Parse {
        path: PathBuf::from(registry),
        detail: format!("registry {registry:?} is not a valid host: {e}"),
    })?;
    Ok(RegistryHost {
        base,
        resolve: true,
        pull: true,
        skip_verify: false,
        ca: Vec::new(),
    })
}

/// `localhost`, `127.0.0.0/8` and `::1`, with or without a port.
pub fn is_loopback(registry: &str) -> bool {
    let host = if let Some(rest) = registry.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else {
        registry.split(':').next().unwrap_or_default()
    };
    host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Appends containerd's default `/v2` API path unless `override_path`.
fn with_api_path(server: &str, override_path: bool) -> Result<Url, url::ParseError> {
    let server = if server.contains("://") {
        server.to_owned()
    } else {
        format!("https://{server}")
    };
    let mut url = Url::parse(&server)?;
    let path = url.path().trim_end_matches('/').to_owned();
    if !override_path {
        url.set_path(&format!("{path}/v2"));
    } else {
        url.set_path(&path);
    }
    Ok(url)
}

fn parse_hosts_toml(
    registry: &str,
    path: &Path,
    text: &str,
) -> Result<Vec<RegistryHost>, HostsError> {
    let parse_err = |detail: String| HostsError::Parse {
        path: path.to_path_buf(),
        detail,
    };
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| parse_err(e.to_string()))?;
    let mut hosts = Vec::new();
    if let Some(host_tables) = table.get("host") {
        let host_tables = host_tables
            .as_table()
            .ok_or_else(|| parse_err("`host` must be a table".into()))?;
        for (url, cfg) in host_tables {
            let cfg = cfg
                .as_table()
                .ok_or_else(|| parse_err(format!("host {url:?} must be a table")))?;
            hosts.push(host_entry(url, cfg).map_err(&parse_err)?);
        }
    }
    let server = match table.get("server") {
        Some(v) => v
            .as_str()
            .ok_or_else(|| parse_err("`server` must be a string".into()))?
            .to_owned(),
        None => default_server(registry),
    };
    hosts.push(host_entry(&server, &table).map_err(&parse_err)?);
    Ok(hosts)
}

fn host_entry(url: &str, cfg: &toml::Table) -> Result<RegistryHost, String> {
    let override_path = cfg
        .get("override_path")
        .and_then(toml::Value::as_bool)
        .unwrap_or(false);
    let base = with_api_path(url, override_path).map_err(|e| format!("host {url:?}: {e}"))?;
    let (resolve, pull) = match cfg.get("capabilities") {
        Some(caps) => {
            let caps = caps
                .as_array()
                .ok_or_else(|| format!("host {url:?}: capabilities must be a list"))?;
            let has = |c: &str| caps.iter().any(|v| v.as_str() == Some(c));
            (has("resolve"), has("pull"))
        }
        None => (true, true),
    };
    let skip_verify = cfg
        .get("skip_verify")
        .and_then(toml::Value::as_bool)
        .unwrap_or(false);
    let ca = match cfg.get("ca") {
        Some(toml::Value::String(s)) => vec![PathBuf::from(s)],
        Some(toml::Value::Array(a)) => a
            .iter()
            .filter_map(|v| v.as_str().map(PathBuf::from))
            .collect(),
        Some(_) => return Err(format!("host {url:?}: ca must be a string or a list")),
        None => Vec::new(),
    };
    Ok(RegistryHost {
        base,
        resolve,
        pull,
        skip_verify,
        ca,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn defaults() {
        let hub = registry_hosts("docker.io", None).unwrap();
        assert_eq!(hub[0].base.as_str(), "https://registry-1.docker.io/v2");
        let local = registry_hosts("127.0.0.1:5000", None).unwrap();
        assert_eq!(local[0].base.as_str(), "http://127.0.0.1:5000/v2");
        let localhost = registry_hosts("localhost:5000", None).unwrap();
        assert_eq!(localhost[0].base.as_str(), "http://localhost:5000/v2");
        let remote = registry_hosts("registry.k8s.io", None).unwrap();
        assert_eq!(remote[0].base.as_str(), "https://registry.k8s.io/v2");
        assert!(is_loopback("[::1]:5000"));
        assert!(!is_loopback("10.0.0.1:5000"));
    }

    #[test]
    fn hosts_toml_mirrors_in_order_then_server() {
        let dir = tempfile::tempdir().unwrap();
        let hub = dir.path().join("docker.io");
        std::fs::create_dir_all(&hub).unwrap();
        std::fs::write(
            hub.join("hosts.toml"),
            r#"
server = "https://registry-1.docker.io"
[host."http://198.18.0.2:5000"]
  capabilities = ["pull", "resolve"]
[host."https://mirror.example.com/prefix"]
  capabilities = ["pull"]
  skip_verify = true
  ca = ["/etc/ca.pem"]
[host."https://other.example.com/exact/v2"]
  override_path = true
"#,
        )
        .unwrap();
        let hosts = registry_hosts("docker.io", Some(dir.path())).unwrap();
        let bases: Vec<&str> = hosts.iter().map(|h| h.base.as_str()).collect();
        assert_eq!(
            bases,
            [
                "http://198.18.0.2:5000/v2",
                "https://mirror.example.com/prefix/v2",
                "https://other.example.com/exact/v2",
                "https://registry-1.docker.io/v2"
            ]
        );
        assert!(hosts[0].resolve && hosts[0].pull);
        assert!(!hosts[1].resolve && hosts[1].pull && hosts[1].skip_verify);
        assert_eq!(hosts[1].ca, [PathBuf::from("/etc/ca.pem")]);

        // Registries without their own dir use _default when present, else defaults.
        assert_eq!(
            registry_hosts("quay.io", Some(dir.path())).unwrap()[0]
                .base
                .as_str(),
            "https://quay.io/v2"
        );
        std::fs::create_dir_all(dir.path().join("_default")).unwrap();
        std::fs::write(
            dir.path().join("_default/hosts.toml"),
            "server = \"http://198.18.0.9\"\n",
        )
        .unwrap();
        assert_eq!(
            registry_hosts("quay.io", Some(dir.path())).unwrap()[0]
                .base
                .as_str(),
            "http://198.18.0.9/v2"
        );
    }

    #[test]
    fn bad_hosts_toml_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("r.io")).unwrap();
        std::fs::write(dir.path().join("r.io/hosts.toml"), "server = [").unwrap();
        assert!(matches!(
            registry_hosts("r.io", Some(dir.path())),
            Err(HostsError::Parse { .. })
        ));
    }
}
