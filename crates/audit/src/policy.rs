//! Upstream's audit Policy (`audit.k8s.io/v1`, `staging/src/k8s.io/apiserver/pkg/audit/policy/checker.go`):
//! rules are tried in order and the first that matches gives the level; a request no
//! rule matches is not audited. A rule matches when every list it sets holds the
//! request's value: `users`, `userGroups` (any of the user's groups), `verbs`, and
//! either `namespaces`/`resources` (resource requests only) or `nonResourceURLs`
//! (the others; `*` at the end matches a prefix).

use std::collections::BTreeSet;
use std::path::Path;

use cairn_auth::UserInfo;
use serde::Deserialize;

use crate::event::{Level, Stage};

const API_VERSIONS: &[&str] = &["audit.k8s.io/v1"];

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("audit policy {path}: {message}")]
    Invalid { path: String, message: String },
    #[error("audit policy {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PolicyDocument {
    api_version: Option<String>,
    kind: Option<String>,
    /// Accepted (upstream's documents carry it) and not used.
    #[serde(default)]
    #[allow(dead_code)]
    metadata: Option<serde_json::Value>,
    #[serde(default)]
    rules: Vec<Rule>,
    #[serde(default)]
    omit_stages: Vec<Stage>,
    #[serde(default)]
    omit_managed_fields: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Rule {
    level: Level,
    #[serde(default)]
    users: Vec<String>,
    #[serde(default)]
    user_groups: Vec<String>,
    #[serde(default)]
    verbs: Vec<String>,
    #[serde(default)]
    resources: Vec<GroupResources>,
    #[serde(default)]
    namespaces: Vec<String>,
    #[serde(default, rename = "nonResourceURLs")]
    non_resource_urls: Vec<String>,
    #[serde(default)]
    omit_stages: Vec<Stage>,
    #[serde(default)]
    omit_managed_fields: Option<bool>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct GroupResources {
    #[serde(default)]
    group: String,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    resource_names: Vec<String>,
}

/// What the policy is asked about one request.
#[derive(Debug, Clone, Default)]
pub struct RequestAttributes<'a> {
    pub user: Option<&'a UserInfo>,
    pub verb: &'a str,
    pub resource_request: bool,
    pub path: &'a str,
    pub api_group: &'a str,
    pub namespace: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub name: &'a str,
}

/// The first matching rule's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleOutcome {
    pub level: Level,
    pub omit_stages: BTreeSet<Stage>,
    pub omit_managed_fields: bool,
}

impl RuleOutcome {
    pub fn none() -> RuleOutcome {
        RuleOutcome {
            level: Level::None,
            omit_stages: BTreeSet::new(),
            omit_managed_fields: false,
        }
    }

    /// Whether `stage` is written.
    pub fn records(&self, stage: Stage) -> bool {
        self.level != Level::None && !self.omit_stages.contains(&stage)
    }
}

/// A parsed policy.
#[derive(Debug, Clone)]
pub struct Policy {
    rules: Vec<Rule>,
    omit_stages: Vec<Stage>,
    omit_managed_fields: bool,
}

fn invalid(path: &str, message: impl Into<String>) -> PolicyError {
    PolicyError::Invalid {
        path: path.to_string(),
        message: message.into(),
    }
}

impl Policy {
    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
            path: shown.clone(),
            source,
        })?;
        Policy::parse(&text, &shown)
    }

    /// Parses `text`, naming `path` in errors.
    pub fn parse(text: &str, path: &str) -> Result<Policy, PolicyError> {
        let doc: PolicyDocument =
            serde_yaml::from_str(text).map_err(|e| invalid(path, e.to_string()))?;
        match doc.api_version.as_deref() {
            Some(v) if API_VERSIONS.contains(&v) => {}
            other => {
                return Err(invalid(
                    path,
                    format!("apiVersion {other:?} is not one of {API_VERSIONS:?}"),
                ))
            }
        }
        if doc.kind.as_deref() != Some("Policy") {
            return Err(invalid(path, format!("kind {:?} is not Policy", doc.kind)));
        }
        if doc.rules.is_empty() {
            // Upstream refuses it too: a policy that audits nothing is a mistake.
            return Err(invalid(path, "loaded illegal policy with 0 rules"));
        }
        for (i, rule) in doc.rules.iter().enumerate() {
            validate(rule).map_err(|m| invalid(path, format!("rules[{i}]: {m}")))?;
        }
        Ok(Policy {
            rules: doc.rules,
            omit_stages: doc.omit_stages,
            omit_managed_fields: doc.omit_managed_fields,
        })
    }

    /// The level and omitted stages for a request: its first matching rule's, or
    /// `None` when no rule matches.
    pub fn evaluate(&self, attrs: &RequestAttributes<'_>) -> RuleOutcome {
        let Some(rule) = self.rules.iter().find(|r| rule_matches(r, attrs)) else {
            return RuleOutcome::none();
        };
        RuleOutcome {
            level: rule.level,
            omit_stages: self
                .omit_stages
                .iter()
                .chain(&rule.omit_stages)
                .copied()
                .collect(),
            omit_managed_fields: rule.omit_managed_fields.unwrap_or(self.omit_managed_fields),
        }
    }
}

/// Upstream's validation: resource and non-resource rules do not mix, and
/// non-resource URLs are paths with `*` only at their end.
fn validate(rule: &Rule) -> Result<(), String> {
    let resource_rule = !rule.resources.is_empty() || !rule.namespaces.is_empty();
    if resource_rule && !rule.non_resource_urls.is_empty() {
        return Err("rules cannot apply to both regular resources and non-resource URLs".into());
    }
    for url in &rule.non_resource_urls {
        let star = url.find('*');
        if !url.starts_with('/') && url != "*" {
            return Err(format!("nonResourceURLs {url:?}: must start with /"));
        }
        if star.is_some_and(|i| i != url.len() - 1) {
            return Err(format!(
                "nonResourceURLs {url:?}: * is allowed only at the end"
            ));
        }
    }
    for gr in &rule.resources {
        if gr.group.contains('/') {
            return Err(format!(
                "resources group {:?}: a group, not a group/version",
                gr.group
            ));
        }
        if !gr.resource_names.is_empty() && gr.resources.is_empty() {
            return Err("resourceNames requires resources".into());
        }
    }
    Ok(())
}

fn holds(list: &[String], value: &str) -> bool {
    list.iter().any(|v| v == value)
}

fn rule_matches(rule: &Rule, attrs: &RequestAttributes<'_>) -> bool {
    let user = attrs.user;
    if !rule.users.is_empty() && !user.is_some_and(|u| holds(&rule.users, &u.username)) {
        return false;
    }
    if !rule.user_groups.is_empty()
        && !user.is_some_and(|u| u.groups.iter().any(|g| holds(&rule.user_groups, g)))
    {
        return false;
    }
    if !rule.verbs.is_empty() && !holds(&rule.verbs, attrs.verb) {
        return false;
    }
    if !rule.namespaces.is_empty() || !rule.resources.is_empty() {
        return matches_resource(rule, attrs);
    }
    if !rule.non_resource_urls.is_empty() {
        return !attrs.resource_request && matches_url(&rule.non_resource_urls, attrs.path);
    }
    true
}

fn matches_resource(rule: &Rule, attrs: &RequestAttributes<'_>) -> bool {
    if !attrs.resource_request {
        return false;
    }
    // A cluster-scoped object's namespace is "", which a rule names as "".
    if !rule.namespaces.is_empty() && !holds(&rule.namespaces, attrs.namespace) {
        return false;
    }
    if rule.resources.is_empty() {
        return true;
    }
    rule.resources.iter().any(|gr| group_matches(gr, attrs))
}

fn group_matches(gr: &GroupResources, attrs: &RequestAttributes<'_>) -> bool {
    if gr.group != attrs.api_group {
        return false;
    }
    if gr.resources.is_empty() {
        return true;
    }
    if !gr.resource_names.is_empty() && !holds(&gr.resource_names, attrs.name) {
        return false;
    }
    let (resource, sub) = (attrs.resource, attrs.subresource);
    let combined = if sub.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}/{sub}")
    };
    gr.resources.iter().any(|res| {
        res == &combined
            || res == "*"
            || (!sub.is_empty() && res.strip_prefix("*/") == Some(sub))
            || res.strip_suffix("/*") == Some(resource)
    })
}

fn matches_url(urls: &[String], path: &str) -> bool {
    urls.iter()
        .any(|u| u == "*" || u == path || u.strip_suffix('*').is_some_and(|p| path.starts_with(p)))
}

#[cfg(test)]
mod tests;
