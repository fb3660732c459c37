//! HTTP scheduler extenders, speaking upstream's wire types (`ExtenderArgs`,
//! `ExtenderFilterResult`, `HostPriorityList`, `ExtenderBindingArgs`): POST JSON to
//! `<urlPrefix>/<verb>`.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Node, Pod};
use serde::{Deserialize, Serialize};

use crate::config::ExtenderConfig;
use crate::pod_info::PodInfo;

/// Scores an extender returns run 0–10; they are scaled to the plugins' 0–100.
pub const MAX_EXTENDER_PRIORITY: i64 = 10;

#[derive(Debug, thiserror::Error)]
pub enum ExtenderError {
    #[error("extender {url}: {reason}")]
    Call { url: String, reason: String },
}

#[derive(Serialize)]
struct ExtenderArgs<'a> {
    pod: &'a Pod,
    #[serde(skip_serializing_if = "Option::is_none")]
    nodes: Option<NodeList<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    nodenames: Option<Vec<String>>,
}

#[derive(Serialize)]
struct NodeList<'a> {
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    kind: &'static str,
    metadata: serde_json::Value,
    items: Vec<&'a Node>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExtenderFilterResult {
    nodes: Option<OwnedNodeList>,
    #[serde(rename = "nodenames")]
    node_names: Option<Vec<String>>,
    #[serde(default)]
    failed_nodes: BTreeMap<String, String>,
    #[serde(default)]
    failed_and_unresolvable_nodes: BTreeMap<String, String>,
    #[serde(default)]
    error: String,
}

#[derive(Debug, Default, Deserialize)]
struct OwnedNodeList {
    #[serde(default)]
    items: Vec<Node>,
}

#[derive(Debug, Deserialize)]
struct HostPriority {
    host: String,
    score: i64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ExtenderBindingArgs<'a> {
    pod_name: &'a str,
    pod_namespace: &'a str,
    #[serde(rename = "podUID")]
    pod_uid: &'a str,
    node: &'a str,
}

#[derive(Debug, Default, Deserialize)]
struct ExtenderBindingResult {
    #[serde(default)]
    error: String,
}

/// What an extender's filter left, and why it dropped the others.
#[derive(Debug, Default)]
pub struct Filtered {
    pub nodes: Vec<String>,
    /// node → (reason, unresolvable)
    pub failed: HashMap<String, (String, bool)>,
}

pub struct Extender {
    pub config: ExtenderConfig,
    http: reqwest::Client,
}

impl Extender {
    pub fn new(config: ExtenderConfig) -> Result<Extender, ExtenderError> {
        let http = reqwest::Client::builder()
            .timeout(config.http_timeout)
            .build()
            .map_err(|e| ExtenderError::Call {
                url: config.url_prefix.clone(),
                reason: e.to_string(),
            })?;
        Ok(Extender { config, http })
    }

    /// Whether the extender cares about this pod (managedResources empty: every pod).
    pub fn interested(&self, pod: &PodInfo) -> bool {
        self.config.managed_resources.is_empty()
            || self
                .config
                .managed_resources
                .iter()
                .any(|m| pod.requests.scalar.contains_key(&m.name))
    }

    fn url(&self, verb: &str) -> String {
        let prefix = &self.config.url_prefix;
        if self.config.enable_https && prefix.starts_with("http://") {
            format!("https://{}/{verb}", &prefix["http://".len()..])
        } else {
            format!("{prefix}/{verb}")
        }
    }

    async fn post<A: Serialize, R: for<'de> Deserialize<'de>>(
        &self,
        verb: &str,
        args: &A,
    ) -> Result<R, ExtenderError> {
        let url = self.url(verb);
        let fail = |reason: String| ExtenderError::Call {
            url: url.clone(),
            reason,
        };
        let resp = self
            .http
            .post(&url)
            .json(args)
            .send()
            .await
            .map_err(|e| fail(e.to_string()))?;
        let status = resp.status();
        let body = resp.bytes().await.map_err(|e| fail(e.to_string()))?;
        if !status.is_success() {
            return Err(fail(format!(
                "HTTP {status}: {}",
                String::from_utf8_lossy(&body)
                    .chars()
                    .take(200)
                    .collect::<String>()
            )));
        }
        serde_json::from_slice(&body).map_err(|e| fail(format!("invalid answer: {e}")))
    }

    fn args<'a>(&self, pod: &'a Pod, nodes: &[&'a Node]) -> ExtenderArgs<'a> {
        let names = nodes
            .iter()
            .map(|n| n.metadata.name.clone().unwrap_or_default())
            .collect();
        if self.config.node_cache_capable {
            ExtenderArgs {
                pod,
                nodes: None,
                nodenames: Some(names),
            }
        } else {
            ExtenderArgs {
                pod,
                nodes: Some(NodeList {
                    api_version: "v1",
                    kind: "NodeList",
                    metadata: serde_json::json!({}),
                    items: nodes.to_vec(),
                }),
                nodenames: None,
            }
        }
    }

    pub async fn filter(&self, pod: &Pod, nodes: &[&Node]) -> Result<Filtered, ExtenderError> {
        let Some(verb) = &self.config.filter_verb else {
            return Ok(Filtered {
                nodes: nodes
                    .iter()
                    .map(|n| n.metadata.name.clone().unwrap_or_default())
                    .collect(),
                failed: HashMap::new(),
            });
        };
        let r: ExtenderFilterResult = self.post(verb, &self.args(pod, nodes)).await?;
        if !r.error.is_empty() {
            return Err(ExtenderError::Call {
                url: self.url(verb),
                reason: r.error,
            });
        }
        let kept = match (r.node_names, r.nodes) {
            (Some(names), _) => names,
            (None, Some(list)) => list
                .items
                .into_iter()
                .filter_map(|n| n.metadata.name)
                .collect(),
            (None, None) => Vec::new(),
        };
        let mut failed: HashMap<String, (String, bool)> = r
            .failed_nodes
            .into_iter()
            .map(|(k, v)| (k, (v, false)))
            .collect();
        failed.extend(
            r.failed_and_unresolvable_nodes
                .into_iter()
                .map(|(k, v)| (k, (v, true))),
        );
        Ok(Filtered {
            nodes: kept,
            failed,
        })
    }

    /// node → score already weighted and scaled to the plugins' range.
    pub async fn prioritize(
        &self,
        pod: &Pod,
        nodes: &[&Node],
    ) -> Result<HashMap<String, i64>, ExtenderError> {
        let Some(verb) = &self.config.prioritize_verb else {
            return Ok(HashMap::new());
        };
        let list: Vec<HostPriority> = self.post(verb, &self.args(pod, nodes)).await?;
        let scale = crate::framework::MAX_NODE_SCORE / MAX_EXTENDER_PRIORITY;
        Ok(list
            .into_iter()
            .map(|h| {
                (
                    h.host,
                    h.score.clamp(0, MAX_EXTENDER_PRIORITY) * self.config.weight * scale,
                )
            })
            .collect())
    }

    pub fn binds(&self) -> bool {
        self.config.bind_verb.is_some()
    }

    pub async fn bind(&self, pod: &Pod, node: &str) -> Result<(), ExtenderError> {
        let Some(verb) = &self.config.bind_verb else {
            return Ok(());
        };
        let args = ExtenderBindingArgs {
            pod_name: pod.metadata.name.as_deref().unwrap_or(""),
            pod_namespace: pod.metadata.namespace.as_deref().unwrap_or(""),
            pod_uid: pod.metadata.uid.as_deref().unwrap_or(""),
            node,
        };
        let r: ExtenderBindingResult = self.post(verb, &args).await?;
        if r.error.is_empty() {
            Ok(())
        } else {
            Err(ExtenderError::Call {
                url: self.url(verb),
                reason: r.error,
            })
        }
    }
}
