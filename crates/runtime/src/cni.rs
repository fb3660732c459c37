//! Runs CNI plugins the way libcni does: the first network config in the conf dir
//! (lexical order, `.conflist` / `.conf` / `.json`), each plugin exec'd with the CNI
//! environment and its config on stdin, `prevResult` chained through ADD, DEL in reverse.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::Value;
use tokio::io::AsyncWriteExt;

#[derive(Debug, thiserror::Error)]
pub enum CniError {
    #[error("no CNI network config in {dir}")]
    NoConfig { dir: PathBuf },
    #[error("reading CNI config {path}: {message}")]
    BadConfig { path: PathBuf, message: String },
    #[error("CNI plugin {plugin} not found in {dir}")]
    PluginNotFound { plugin: String, dir: PathBuf },
    #[error("CNI plugin {plugin} {command} failed for {container}: {message}")]
    Plugin {
        plugin: String,
        command: &'static str,
        container: String,
        message: String,
    },
    #[error("running CNI plugin {plugin}: {source}")]
    Exec {
        plugin: String,
        source: std::io::Error,
    },
    #[error("CNI result of {plugin} has no IP address")]
    NoAddress { plugin: String },
}

/// Where the agent finds CNI configs and plugins.
#[derive(Debug, Clone)]
pub struct CniConfig {
    pub conf_dir: PathBuf,
    pub bin_dirs: Vec<PathBuf>,
    pub ifname: String,
}

impl CniConfig {
    /// The network list to use: the lexically first config file, as libcni/kubelet pick it.
    pub fn load_network(&self) -> Result<(PathBuf, NetworkList), CniError> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&self.conf_dir)
            .map_err(|_| CniError::NoConfig {
                dir: self.conf_dir.clone(),
            })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                matches!(
                    p.extension().and_then(|e| e.to_str()),
                    Some("conflist") | Some("conf") | Some("json")
                )
            })
            .collect();
        files.sort();
        let path = files.into_iter().next().ok_or_else(|| CniError::NoConfig {
            dir: self.conf_dir.clone(),
        })?;
        let text = std::fs::read(&path).map_err(|e| CniError::BadConfig {
            path: path.clone(),
            message: e.to_string(),
        })?;
        let list = NetworkList::parse(&text).map_err(|message| CniError::BadConfig {
            path: path.clone(),
            message,
        })?;
        Ok((path, list))
    }

    /// Whether a usable network config exists (the Ready condition needs it).
    pub fn network_ready(&self) -> bool {
        self.load_network().is_ok()
    }

    fn plugin_path(&self, plugin: &str) -> Result<PathBuf, CniError> {
        self.bin_dirs
            .iter()
            .map(|d| d.join(plugin))
            .find(|p| p.is_file())
            .ok_or_else(|| CniError::PluginNotFound {
                plugin: plugin.to_string(),
                dir: self.bin_dirs.first().cloned().unwrap_or_default(),
            })
    }

    fn cni_path(&self) -> String {
        self.bin_dirs
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(":")
    }

    /// ADD on every plugin of the network; returns the pod's first IP.
    pub async fn add(&self, attachment: &Attachment<'_>) -> Result<String, CniError> {
        let (_, list) = self.load_network()?;
        let mut prev: Option<Value> = None;
        for plugin in &list.plugins {
            let config = list.plugin_config(plugin, prev.as_ref());
            let result = self.exec(plugin, "ADD", attachment, &config).await?;
            prev = Some(result);
        }
        let result = prev.unwrap_or(Value::Null);
        first_ip(&result).ok_or_else(|| CniError::NoAddress {
            plugin: list.name.clone(),
        })
    }

    /// DEL on every plugin, last first; keeps going after failures and reports the first.
    pub async fn del(&self, attachment: &Attachment<'_>) -> Result<(), CniError> {
        let (_, list) = self.load_network()?;
        let mut first_error = None;
        for plugin in list.plugins.iter().rev() {
            let config = list.plugin_config(plugin, None);
            if let Err(e) = self.exec(plugin, "DEL", attachment, &config).await {
                tracing::warn!(container = attachment.container_id, error = %e, "CNI DEL");
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    async fn exec(
        &self,
        plugin: &Value,
        command: &'static str,
        attachment: &Attachment<'_>,
        config: &Value,
    ) -> Result<Value, CniError> {
        let kind = plugin
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let path = self.plugin_path(&kind)?;
        let args = format!(
            "IgnoreUnknown=1;K8S_POD_NAMESPACE={};K8S_POD_NAME={};K8S_POD_INFRA_CONTAINER_ID={};K8S_POD_UID={}",
            attachment.pod_namespace, attachment.pod_name, attachment.container_id, attachment.pod_uid
        );
        let mut child = tokio::process::Command::new(&path)
            .env_clear()
            .env("CNI_COMMAND", command)
            .env("CNI_CONTAINERID", attachment.container_id)
            .env("CNI_NETNS", attachment.netns)
            .env("CNI_IFNAME", &self.ifname)
            .env("CNI_PATH", self.cni_path())
            .env("CNI_ARGS", args)
            .env(
                "PATH",
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| CniError::Exec {
                plugin: kind.clone(),
                source,
            })?;
        let body = serde_json::to_vec(config).unwrap_or_default();
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(&body)
                .await
                .map_err(|source| CniError::Exec {
                    plugin: kind.clone(),
                    source,
                })?;
        }
        let output = child
            .wait_with_output()
            .await
            .map_err(|source| CniError::Exec {
                plugin: kind.clone(),
                source,
            })?;
        let parsed: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
        if !output.status.success() {
            let message = parsed
                .get("msg")
                .and_then(Value::as_str)
                .map(|m| match parsed.get("details").and_then(Value::as_str) {
                    Some(d) if !d.is_empty() => format!("{m}: {d}"),
                    _ => m.to_string(),
                })
                .unwrap_or_else(|| {
                    format!(
                        "{} {}",
                        output.status,
                        String::from_utf8_lossy(&output.stderr).trim()
                    )
                });
            return Err(CniError::Plugin {
                plugin: kind,
                command,
                container: attachment.container_id.to_string(),
                message,
            });
        }
        Ok(parsed)
    }
}

/// The pod-side facts of one CNI attachment.
#[derive(Debug, Clone, Copy)]
pub struct Attachment<'a> {
    pub container_id: &'a str,
    pub netns: &'a str,
    pub pod_namespace: &'a str,
    pub pod_name: &'a str,
    pub pod_uid: &'a str,
}

/// A network configuration list (a `.conf` is read as a list of one).
#[derive(Debug, Clone)]
pub struct NetworkList {
    pub name: String,
    pub cni_version: String,
    pub plugins: Vec<Value>,
}

impl NetworkList {
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        let value: Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        let name = value
            .get("name")
            .and_then(Value::as_str)
            .ok_or("missing network name")?
            .to_string();
        let cni_version = value
            .get("cniVersion")
            .and_then(Value::as_str)
            .unwrap_or("0.4.0")
            .to_string();
        let plugins = match value.get("plugins") {
            Some(Value::Array(plugins)) => plugins.clone(),
            Some(_) => return Err("plugins is not a list".into()),
            None => vec![value.clone()],
        };
        if plugins.is_empty() {
            return Err("no plugins".into());
        }
        for p in &plugins {
            if p.get("type").and_then(Value::as_str).is_none() {
                return Err("plugin without type".into());
            }
        }
        Ok(NetworkList {
            name,
            cni_version,
            plugins,
        })
    }

    fn plugin_config(&self, plugin: &Value, prev: Option<&Value>) -> Value {
        let mut config = plugin.clone();
        if let Value::Object(map) = &mut config {
            map.insert("name".into(), Value::String(self.name.clone()));
            map.insert("cniVersion".into(), Value::String(self.cni_version.clone()));
            if let Some(prev) = prev {
                map.insert("prevResult".into(), prev.clone());
            }
        }
        config
    }
}

fn first_ip(result: &Value) -> Option<String> {
    // CNI ≥0.3 results: ips[].address "10.244.1.5/24"; 0.2: ip4.ip.
    let address = result
        .get("ips")
        .and_then(Value::as_array)
        .and_then(|ips| ips.first())
        .and_then(|ip| ip.get("address"))
        .or_else(|| result.get("ip4").and_then(|v| v.get("ip")))
        .and_then(Value::as_str)?;
    Some(address.split('/').next().unwrap_or(address).to_string())
}

/// Default CNI dirs (kubelet's).
pub fn default_dirs() -> (PathBuf, PathBuf) {
    (
        Path::new("/etc/cni/net.d").to_path_buf(),
        Path::new("/opt/cni/bin").to_path_buf(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_conflist_and_single_conf() {
        let list = NetworkList::parse(
            br#"{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"cairn-cni"},{"type":"portmap"}]}"#,
        )
        .unwrap();
        assert_eq!(list.plugins.len(), 2);
        let conf =
            NetworkList::parse(br#"{"cniVersion":"0.4.0","name":"n","type":"bridge"}"#).unwrap();
        assert_eq!(conf.plugins.len(), 1);
        assert!(NetworkList::parse(br#"{"name":"n","plugins":[{}]}"#).is_err());
        assert!(NetworkList::parse(b"nope").is_err());
    }

    #[test]
    fn finds_first_ip() {
        let r: Value =
            serde_json::from_str(r#"{"ips":[{"address":"10.244.0.5/24","gateway":"10.244.0.1"}]}"#)
                .unwrap();
        assert_eq!(first_ip(&r).as_deref(), Some("10.244.0.5"));
        assert_eq!(first_ip(&Value::Null), None);
    }

    #[test]
    fn plugin_config_chains_prev_result() {
        let list =
            NetworkList::parse(br#"{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"a"}]}"#)
                .unwrap();
        let prev = serde_json::json!({"ips":[]});
        let c = list.plugin_config(&list.plugins[0], Some(&prev));
        assert_eq!(c["name"], "n");
        assert_eq!(c["cniVersion"], "1.0.0");
        assert_eq!(c["prevResult"], prev);
    }
}
