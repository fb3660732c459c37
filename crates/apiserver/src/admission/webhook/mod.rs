//! Admission webhooks: the webhooks of MutatingWebhookConfigurations and
//! ValidatingWebhookConfigurations, read from the watch cache ([`Hooks`], parsed once
//! per stored revision), matched to a write and called over HTTPS ([`dispatch`],
//! through the [`Caller`] seam; [`client::HttpsCaller`] is the real one), with
//! AdmissionReview v1 bodies ([`review`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine as _;
use bytes::Bytes;
use cairn_store::cache::WatchCache;
use cairn_store::Revision;
use serde_json::Value;

pub mod client;
pub mod dispatch;
pub mod review;

/// Where a webhook is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    Url(String),
    Service {
        namespace: String,
        name: String,
        path: String,
        port: u16,
    },
}

/// One webhook of a configuration, as the dispatcher uses it.
#[derive(Debug, Clone)]
pub struct Hook {
    pub configuration: String,
    pub name: String,
    pub destination: Destination,
    /// The PEM trust roots (`clientConfig.caBundle`); empty means the public roots.
    pub ca_bundle: Arc<Vec<u8>>,
    /// `rules`, as JSON (see [`crate::admission::matching::rule_matches`]).
    pub rules: Vec<Value>,
    pub exact_version: bool,
    /// `failurePolicy: Fail` (the default): a call that fails denies the write.
    pub fail_closed: bool,
    pub namespace_selector: Value,
    pub object_selector: Value,
    pub timeout: Duration,
    pub mutating: bool,
    /// `reinvocationPolicy: IfNeeded` (mutating webhooks).
    pub reinvoke: bool,
    /// `sideEffects` is `None` or `NoneOnDryRun` (all v1 webhooks are).
    pub dry_run_safe: bool,
    /// The AdmissionReview version it is sent; none when it lists no known one.
    pub review_version: Option<review::ReviewVersion>,
    /// Largest response body read: an AdmissionReview is small, a ConversionReview holds
    /// a whole list page.
    pub response_limit: usize,
    /// `matchConditions`: (name, CEL expression).
    pub match_conditions: Vec<(String, String)>,
}

/// Largest AdmissionReview response read.
const ADMISSION_RESPONSE_LIMIT: usize = 3 * 1024 * 1024;
/// Largest ConversionReview response read (a page of converted objects).
const CONVERSION_RESPONSE_LIMIT: usize = 256 * 1024 * 1024;

/// Upstream's default and bounds for `timeoutSeconds`.
const DEFAULT_TIMEOUT_SECONDS: u64 = 10;
const MAX_TIMEOUT_SECONDS: u64 = 30;

impl Hook {
    /// The webhooks of one stored configuration (`mutating` for a
    /// MutatingWebhookConfiguration).
    pub fn from_configuration(config: &Value, mutating: bool) -> Vec<Hook> {
        let configuration = config
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let webhooks = config["webhooks"].as_array().into_iter().flatten();
        webhooks
            .map(|w| Hook::from_webhook(&configuration, w, mutating))
            .collect()
    }

    /// A CRD's conversion webhook (`spec.conversion.webhook`), called as `crd`, with
    /// upstream's fixed 30 s timeout.
    pub fn for_conversion(crd: &str, webhook: &Value) -> Hook {
        let w = serde_json::json!({
            "name": crd,
            "clientConfig": webhook["clientConfig"],
            "timeoutSeconds": MAX_TIMEOUT_SECONDS,
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        });
        Hook {
            response_limit: CONVERSION_RESPONSE_LIMIT,
            ..Hook::from_webhook(crd, &w, false)
        }
    }

    fn from_webhook(configuration: &str, w: &Value, mutating: bool) -> Hook {
        let cc = &w["clientConfig"];
        let destination = match cc["url"].as_str() {
            Some(url) => Destination::Url(url.to_string()),
            None => Destination::Service {
                namespace: cc["service"]["namespace"].as_str().unwrap_or("").into(),
                name: cc["service"]["name"].as_str().unwrap_or("").into(),
                path: cc["service"]["path"].as_str().unwrap_or("/").into(),
                port: cc["service"]["port"]
                    .as_u64()
                    .and_then(|p| u16::try_from(p).ok())
                    .unwrap_or(443),
            },
        };
        let ca_bundle = cc["caBundle"]
            .as_str()
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .unwrap_or_default();
        let timeout = w["timeoutSeconds"]
            .as_u64()
            .unwrap_or(DEFAULT_TIMEOUT_SECONDS)
            .clamp(1, MAX_TIMEOUT_SECONDS);
        let match_conditions = w["matchConditions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let text = |k: &str| c[k].as_str().unwrap_or("").to_string();
                (text("name"), text("expression"))
            })
            .collect();
        Hook {
            configuration: configuration.to_string(),
            name: w["name"].as_str().unwrap_or("").to_string(),
            destination,
            ca_bundle: Arc::new(ca_bundle),
            rules: w["rules"].as_array().cloned().unwrap_or_default(),
            exact_version: w["matchPolicy"].as_str() == Some("Exact"),
            fail_closed: w["failurePolicy"].as_str() != Some("Ignore"),
            namespace_selector: w["namespaceSelector"].clone(),
            object_selector: w["objectSelector"].clone(),
            timeout: Duration::from_secs(timeout),
            mutating,
            reinvoke: mutating && w["reinvocationPolicy"].as_str() == Some("IfNeeded"),
            dry_run_safe: matches!(w["sideEffects"].as_str(), Some("None" | "NoneOnDryRun")),
            response_limit: ADMISSION_RESPONSE_LIMIT,
            review_version: review::ReviewVersion::pick(
                &w["admissionReviewVersions"]
                    .as_array()
                    .map(|l| l.iter().filter_map(Value::as_str).collect::<Vec<_>>())
                    .unwrap_or_default(),
            ),
            match_conditions,
        }
    }
}

/// Why a call did not produce a response body.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    /// The request failed (connection, TLS, timeout, an HTTP error status); the text
    /// names the URL as upstream's `Post "<url>": ...` does.
    #[error("failed to call webhook: {0}")]
    Call(String),
    /// The service reference did not resolve to an endpoint.
    #[error("failed to call webhook: {0}")]
    Resolve(String),
}

/// The seam between dispatching and the network: the real [`client::HttpsCaller`], or a
/// fake in tests.
#[async_trait]
pub trait Caller: Send + Sync {
    /// POSTs an AdmissionReview to `hook` and returns the response body.
    async fn call(&self, hook: &Hook, review: Bytes) -> Result<Bytes, CallError>;
}

/// The configured webhooks, parsed once per stored revision of each configuration.
#[derive(Default)]
pub struct Hooks {
    mutating: Parsed,
    validating: Parsed,
}

/// Parsed webhooks by configuration key, with the revision they were parsed at.
type Parsed = parking_lot::Mutex<HashMap<String, (Revision, Arc<Vec<Hook>>)>>;

impl Hooks {
    /// Every mutating (or validating) webhook, in upstream's order: configurations by
    /// name, then each configuration's webhooks in order.
    pub fn current(&self, cache: &WatchCache, mutating: bool) -> Vec<Arc<Vec<Hook>>> {
        let plural = if mutating {
            "mutatingwebhookconfigurations"
        } else {
            "validatingwebhookconfigurations"
        };
        let (configs, _) = cache.list(&format!("/registry/{}/{plural}/", super::GROUP));
        let mut parsed = if mutating {
            self.mutating.lock()
        } else {
            self.validating.lock()
        };
        let mut out = Vec::with_capacity(configs.len());
        for c in &configs {
            match parsed.get(&c.key) {
                Some((rev, hooks)) if *rev == c.mod_revision => out.push(hooks.clone()),
                _ => {
                    let value: Value = serde_json::from_slice(&c.bytes).unwrap_or(Value::Null);
                    let hooks = Arc::new(Hook::from_configuration(&value, mutating));
                    parsed.insert(c.key.clone(), (c.mod_revision, hooks.clone()));
                    out.push(hooks);
                }
            }
        }
        if parsed.len() != configs.len() {
            // Forget deleted configurations.
            let live: std::collections::HashSet<&str> =
                configs.iter().map(|c| c.key.as_str()).collect();
            parsed.retain(|k, _| live.contains(k.as_str()));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hooks_read_their_configuration_with_defaults() {
        let config = json!({"metadata": {"name": "cfg"}, "webhooks": [
            {"name": "a.example.com", "clientConfig": {"url": "https://h:8443/a", "caBundle": "UEVN"},
             "rules": [{"operations": ["CREATE"]}], "failurePolicy": "Ignore", "timeoutSeconds": 99,
             "reinvocationPolicy": "IfNeeded", "matchPolicy": "Exact",
             "matchConditions": [{"name": "c", "expression": "true"}]},
            {"name": "b.example.com", "sideEffects": "None", "clientConfig": {"service": {"namespace": "ns", "name": "svc"}}}]});
        let hooks = Hook::from_configuration(&config, true);
        assert_eq!(hooks.len(), 2);
        let a = &hooks[0];
        assert_eq!(a.configuration, "cfg");
        assert_eq!(a.destination, Destination::Url("https://h:8443/a".into()));
        assert_eq!(a.ca_bundle.as_slice(), b"PEM");
        assert!(!a.fail_closed && a.reinvoke && a.exact_version);
        assert_eq!(a.timeout, Duration::from_secs(30));
        assert_eq!(
            a.match_conditions,
            vec![("c".to_string(), "true".to_string())]
        );
        let b = &hooks[1];
        assert_eq!(
            b.destination,
            Destination::Service {
                namespace: "ns".into(),
                name: "svc".into(),
                path: "/".into(),
                port: 443
            }
        );
        assert!(b.fail_closed && !b.reinvoke && b.dry_run_safe && !a.dry_run_safe);
        assert_eq!(b.timeout, Duration::from_secs(10));
        assert!(
            !Hook::from_configuration(&config, false)[0].reinvoke,
            "validating hooks are not reinvoked"
        );
    }
}
