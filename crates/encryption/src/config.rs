//! Upstream's `EncryptionConfiguration` (`apiserver.config.k8s.io/v1`, the file of
//! `--encryption-provider-config`): rules naming resources (`secrets`,
//! `deployments.apps`, `*.apps`, `*.` for the core group, `*.*` for everything), each
//! with its ordered providers. A storage key (`/registry/<group or core>/<plural>/…`)
//! takes the first rule that names its resource; keys no rule names are stored as they
//! are. `kms` providers are refused: cairn has no KMS plugin.

use std::path::Path;

use base64::Engine;
use serde::Deserialize;

use crate::providers::{AesCbc, AesGcm, Cipher, NamedKey, Provider, Secretbox, Transformer};

const API_VERSION: &str = "apiserver.config.k8s.io/v1";
const KIND: &str = "EncryptionConfiguration";

#[derive(Debug, thiserror::Error)]
pub enum EncryptionConfigError {
    #[error("reading encryption configuration {path}: {message}")]
    Read { path: String, message: String },
    #[error("encryption configuration {path}: {message}")]
    Invalid { path: String, message: String },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Document {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    resources: Vec<Rule>,
}

#[derive(Deserialize)]
struct Rule {
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    providers: Vec<ProviderEntry>,
}

#[derive(Deserialize)]
struct ProviderEntry {
    aesgcm: Option<Keys>,
    aescbc: Option<Keys>,
    secretbox: Option<Keys>,
    /// `- identity:` with nothing after it is YAML's null, and still names identity.
    #[serde(default, deserialize_with = "present")]
    identity: Option<serde_json::Value>,
    kms: Option<serde_json::Value>,
}

/// A field that is there, even as null.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<serde_json::Value>, D::Error> {
    serde_json::Value::deserialize(d).map(Some)
}

#[derive(Deserialize)]
struct Keys {
    #[serde(default)]
    keys: Vec<Key>,
}

#[derive(Deserialize)]
struct Key {
    #[serde(default)]
    name: String,
    #[serde(default)]
    secret: String,
}

/// What a rule's resource names: a group (`None`: any) and a resource (`None`: any).
#[derive(Debug, Clone, PartialEq, Eq)]
struct ResourceMatch {
    group: Option<String>,
    resource: Option<String>,
}

impl ResourceMatch {
    fn parse(text: &str) -> Result<ResourceMatch, String> {
        let (resource, group) = text.split_once('.').unwrap_or((text, ""));
        if resource.is_empty() {
            return Err(format!("resource {text:?} is empty"));
        }
        let group = if group.is_empty() { "core" } else { group };
        Ok(match (resource, group) {
            ("*", "*") => ResourceMatch {
                group: None,
                resource: None,
            },
            ("*", g) => ResourceMatch {
                group: Some(g.to_string()),
                resource: None,
            },
            (r, g) => ResourceMatch {
                group: Some(g.to_string()),
                resource: Some(r.to_string()),
            },
        })
    }

    fn matches(&self, group: &str, resource: &str) -> bool {
        self.group.as_deref().is_none_or(|g| g == group)
            && self.resource.as_deref().is_none_or(|r| r == resource)
    }
}

/// A parsed configuration: the rules in order.
pub struct EncryptionConfig {
    rules: Vec<(Vec<ResourceMatch>, Transformer)>,
}

fn cipher(kind: &str, secret: &[u8]) -> Result<Box<dyn Cipher>, String> {
    Ok(match kind {
        "aesgcm" => Box::new(AesGcm::new(secret)?),
        "aescbc" => Box::new(AesCbc::new(secret)?),
        _ => Box::new(Secretbox::new(secret)?),
    })
}

fn keyed(kind: &'static str, keys: &Keys) -> Result<Provider, String> {
    if keys.keys.is_empty() {
        return Err(format!("{kind}: at least one key is required"));
    }
    let mut named = Vec::new();
    for k in &keys.keys {
        if k.name.is_empty() || k.name.contains(':') {
            return Err(format!(
                "{kind}: key name {:?} must be non-empty, without ':'",
                k.name
            ));
        }
        if named.iter().any(|n: &NamedKey| n.name == k.name) {
            return Err(format!("{kind}: key name {:?} appears twice", k.name));
        }
        let secret = base64::engine::general_purpose::STANDARD
            .decode(k.secret.trim())
            .map_err(|e| format!("{kind} key {:?}: secret is not base64: {e}", k.name))?;
        let cipher = cipher(kind, &secret).map_err(|e| format!("{kind} key {:?}: {e}", k.name))?;
        named.push(NamedKey {
            name: k.name.clone(),
            cipher,
        });
    }
    Ok(Provider::Keys { kind, keys: named })
}

fn provider(entry: &ProviderEntry) -> Result<Provider, String> {
    let set = [
        entry.aesgcm.is_some(),
        entry.aescbc.is_some(),
        entry.secretbox.is_some(),
        entry.identity.is_some(),
        entry.kms.is_some(),
    ];
    if set.iter().filter(|s| **s).count() != 1 {
        return Err("each provider entry names exactly one provider".into());
    }
    match entry {
        ProviderEntry {
            aesgcm: Some(k), ..
        } => keyed("aesgcm", k),
        ProviderEntry {
            aescbc: Some(k), ..
        } => keyed("aescbc", k),
        ProviderEntry {
            secretbox: Some(k), ..
        } => keyed("secretbox", k),
        ProviderEntry { kms: Some(_), .. } => {
            Err("kms providers are not supported by cairn (no KMS plugin)".into())
        }
        _ => Ok(Provider::Identity),
    }
}

impl EncryptionConfig {
    /// Parses a configuration document (YAML or JSON); `path` names it in errors.
    pub fn parse(text: &str, path: &str) -> Result<EncryptionConfig, EncryptionConfigError> {
        let invalid = |message: String| EncryptionConfigError::Invalid {
            path: path.to_string(),
            message,
        };
        let doc: Document = serde_yaml::from_str(text).map_err(|e| invalid(e.to_string()))?;
        if doc.kind != KIND || doc.api_version != API_VERSION {
            return Err(invalid(format!(
                "expected kind {KIND} in {API_VERSION}, got {:?} in {:?}",
                doc.kind, doc.api_version
            )));
        }
        let mut rules = Vec::new();
        for (i, rule) in doc.resources.iter().enumerate() {
            let at = |m: String| invalid(format!("resources[{i}]: {m}"));
            if rule.resources.is_empty() || rule.providers.is_empty() {
                return Err(at("resources and providers must not be empty".into()));
            }
            let matches = rule
                .resources
                .iter()
                .map(|r| ResourceMatch::parse(r))
                .collect::<Result<Vec<_>, _>>()
                .map_err(at)?;
            let providers = rule
                .providers
                .iter()
                .map(provider)
                .collect::<Result<Vec<_>, _>>()
                .map_err(at)?;
            rules.push((matches, Transformer::new(providers)));
        }
        Ok(EncryptionConfig { rules })
    }

    pub fn load(path: &Path) -> Result<EncryptionConfig, EncryptionConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| EncryptionConfigError::Read {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        EncryptionConfig::parse(&text, &path.display().to_string())
    }

    /// The transformer of the first rule naming the resource of `storage_key`.
    pub fn transformer_for(&self, storage_key: &str) -> Option<&Transformer> {
        let rest = storage_key.strip_prefix("/registry/")?;
        let mut parts = rest.splitn(3, '/');
        let (group, resource) = (parts.next()?, parts.next()?);
        self.rules
            .iter()
            .find(|(matches, _)| matches.iter().any(|m| m.matches(group, resource)))
            .map(|(_, t)| t)
    }

    /// cairn's default: Secrets with secretbox under a fresh random key `key1`, and
    /// `identity` to read what was stored before encryption was on.
    pub fn default_document() -> String {
        let mut key = [0u8; 32];
        rand::fill(&mut key);
        let secret = base64::engine::general_purpose::STANDARD.encode(key);
        format!(
            "apiVersion: {API_VERSION}\nkind: {KIND}\nresources:\n- resources:\n  - secrets\n  providers:\n  - secretbox:\n      keys:\n      - name: key1\n        secret: {secret}\n  - identity: {{}}\n"
        )
    }
}

#[cfg(test)]
mod tests;
