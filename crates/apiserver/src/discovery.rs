//! Discovery documents: legacy (`/api`, `/apis`, `/api/v1`, `/apis/{g}/{v}`) and
//! aggregated (`apidiscovery.k8s.io` v2 and v2beta1), plus `/version`.

use cairn_api::registry::ResourceInfo;
use serde_json::{json, Value};

/// The Kubernetes version we claim. kubectl's dispatcher picks its client by this.
pub const KUBERNETES_VERSION: &str = "v1.33.0";

pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": format!("{KUBERNETES_VERSION}+cairn-{}", env!("CARGO_PKG_VERSION")),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, go_arch()),
    })
}

fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// `/api`: the core group's versions.
pub fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

/// The served group/versions in discovery order: built-in groups as registered, and each
/// group's versions with the preferred first. Custom groups' versions are ordered as
/// upstream orders CRD versions (GA before beta before alpha, higher numbers first).
fn group_versions(resources: &[&'static ResourceInfo]) -> Vec<(&'static str, Vec<&'static str>)> {
    let mut groups: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for r in resources {
        match groups.iter_mut().find(|(name, _)| *name == r.group) {
            Some((_, versions)) if versions.contains(&r.version) => {}
            Some((_, versions)) => versions.push(r.version),
            None => groups.push((r.group, vec![r.version])),
        }
    }
    for (group, versions) in &mut groups {
        let builtin = resources.iter().any(|r| {
            r.group == *group && cairn_api::registry::find(r.group, r.version, r.plural).is_some()
        });
        if !builtin {
            versions.sort_by_key(|v| version_priority(v));
        }
    }
    groups
}

/// Sort key of a Kubernetes version name (`v2` < `v1` < `v1beta2` < `v1beta1` < `v1alpha1`
/// < anything else, alphabetically).
fn version_priority(v: &str) -> (u8, std::cmp::Reverse<u64>, std::cmp::Reverse<u64>, String) {
    let parsed = v.strip_prefix('v').and_then(|rest| {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let major: u64 = rest[..digits].parse().ok()?;
        let tail = &rest[digits..];
        let (level, minor) = match tail {
            "" => (0, "0"),
            t if t.starts_with("beta") => (1, &t[4..]),
            t if t.starts_with("alpha") => (2, &t[5..]),
            _ => return None,
        };
        let minor: u64 = minor.parse().ok()?;
        Some((level, major, minor))
    });
    match parsed {
        Some((level, major, minor)) => (
            level,
            std::cmp::Reverse(major),
            std::cmp::Reverse(minor),
            String::new(),
        ),
        None => (3, std::cmp::Reverse(0), std::cmp::Reverse(0), v.to_string()),
    }
}

fn named_groups(resources: &[&'static ResourceInfo]) -> Vec<(&'static str, Vec<&'static str>)> {
    group_versions(resources)
        .into_iter()
        .filter(|(g, _)| !g.is_empty())
        .collect()
}

fn api_group(name: &str, versions: &[&str]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({
        "name": name,
        "versions": versions,
        "preferredVersion": versions.first().cloned().unwrap_or(Value::Null),
    })
}

/// The review kinds: create-only, never stored, answered by their own handlers
/// (`handlers/reviews.rs`, `access_reviews.rs`, `tokens.rs`), listed as upstream lists them.
static REVIEWS: [ResourceInfo; 6] = [
    review(
        "authentication.k8s.io",
        "TokenReview",
        "tokenreviews",
        false,
    ),
    review(
        "authentication.k8s.io",
        "SelfSubjectReview",
        "selfsubjectreviews",
        false,
    ),
    review(
        "authorization.k8s.io",
        "LocalSubjectAccessReview",
        "localsubjectaccessreviews",
        true,
    ),
    review(
        "authorization.k8s.io",
        "SelfSubjectAccessReview",
        "selfsubjectaccessreviews",
        false,
    ),
    review(
        "authorization.k8s.io",
        "SelfSubjectRulesReview",
        "selfsubjectrulesreviews",
        false,
    ),
    review(
        "authorization.k8s.io",
        "SubjectAccessReview",
        "subjectaccessreviews",
        false,
    ),
];

const fn review(
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
) -> ResourceInfo {
    ResourceInfo::unstored(group, "v1", kind, plural, namespaced, &["create"])
}

/// What discovery lists: the served resources, the review kinds and the metrics API.
pub fn discoverable(served: Vec<&'static ResourceInfo>) -> Vec<&'static ResourceInfo> {
    let mut all = served;
    all.extend(REVIEWS.iter());
    all.extend(crate::metrics_api::RESOURCES.iter());
    all
}

/// `/apis`: every named group.
pub fn api_group_list(resources: &[&'static ResourceInfo]) -> Value {
    let groups: Vec<Value> = named_groups(resources)
        .iter()
        .map(|(name, versions)| api_group(name, versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`: one group, if served.
pub fn api_group_doc(resources: &[&'static ResourceInfo], group: &str) -> Option<Value> {
    named_groups(resources)
        .iter()
        .find(|(name, _)| *name == group)
        .map(|(name, versions)| {
            let mut g = api_group(name, versions);
            g["kind"] = json!("APIGroup");
            g["apiVersion"] = json!("v1");
            g
        })
}

fn resources_in<'a>(
    resources: &'a [&'static ResourceInfo],
    group: &'a str,
    version: &'a str,
) -> impl Iterator<Item = &'static ResourceInfo> + 'a {
    resources
        .iter()
        .copied()
        .filter(move |r| r.group == group && r.version == version)
}

/// `/api/v1` or `/apis/{group}/{version}`: an APIResourceList, if served.
pub fn api_resource_list(
    all: &[&'static ResourceInfo],
    group: &str,
    version: &str,
) -> Option<Value> {
    let mut resources = Vec::new();
    for r in resources_in(all, group, version) {
        let mut entry = json!({
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": r.verbs,
            "storageVersionHash": "",
        });
        if !r.short_names.is_empty() {
            entry["shortNames"] = json!(r.short_names);
        }
        if !r.categories.is_empty() {
            entry["categories"] = json!(r.categories);
        }
        resources.push(entry);
        for sub in r.subresources {
            let mut s = json!({
                "name": format!("{}/{}", r.plural, sub.name),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": sub.kind,
                "verbs": sub.verbs,
            });
            if !sub.group.is_empty() {
                s["group"] = json!(sub.group);
                s["version"] = json!(sub.version);
            }
            resources.push(s);
        }
    }
    if resources.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }))
}

/// Aggregated discovery for the core group (`core = true`, served at `/api`) or the named
/// groups (`/apis`), in the `apidiscovery.k8s.io/<disc_version>` format the client asked for.
pub fn aggregated(all: &[&'static ResourceInfo], core: bool, disc_version: &str) -> Value {
    let mut items = Vec::new();
    let groups: Vec<(&str, Vec<&str>)> = if core {
        vec![("", vec!["v1"])]
    } else {
        named_groups(all)
    };
    for (group, versions) in groups {
        let versions: Vec<Value> = versions
            .iter()
            .map(|version| {
                let resources: Vec<Value> = resources_in(all, group, version)
                    .map(|r| {
                        let mut entry = json!({
                            "resource": r.plural,
                            "responseKind": {"group": r.group, "version": r.version, "kind": r.kind},
                            "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
                            "singularResource": r.singular,
                            "verbs": r.verbs,
                        });
                        if !r.short_names.is_empty() {
                            entry["shortNames"] = json!(r.short_names);
                        }
                        if !r.categories.is_empty() {
                            entry["categories"] = json!(r.categories);
                        }
                        let subs: Vec<Value> = r
                            .subresources
                            .iter()
                            .map(|s| {
                                let (g, v) = if s.group.is_empty() {
                                    (r.group, r.version)
                                } else {
                                    (s.group, s.version)
                                };
                                json!({
                                    "subresource": s.name,
                                    "responseKind": {"group": g, "version": v, "kind": s.kind},
                                    "verbs": s.verbs,
                                })
                            })
                            .collect();
                        if !subs.is_empty() {
                            entry["subresources"] = Value::Array(subs);
                        }
                        entry
                    })
                    .collect();
                json!({"version": version, "resources": resources, "freshness": "Current"})
            })
            .collect();
        let mut metadata = json!({"creationTimestamp": null});
        if !group.is_empty() {
            metadata["name"] = json!(group);
        }
        items.push(json!({"metadata": metadata, "versions": versions}));
    }
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{disc_version}"),
        "metadata": {},
        "items": items,
    })
}

/// The Content-Type of an aggregated discovery answer.
pub fn aggregated_content_type(disc_version: &str) -> String {
    format!("application/json;g=apidiscovery.k8s.io;v={disc_version};as=APIGroupDiscoveryList")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builtin() -> Vec<&'static ResourceInfo> {
        cairn_api::registry::RESOURCES.iter().collect()
    }

    #[test]
    fn review_kinds_are_listed_create_only() {
        let all = discoverable(builtin());
        let list = api_resource_list(&all, "authorization.k8s.io", "v1").unwrap();
        let names: Vec<&str> = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "localsubjectaccessreviews",
                "selfsubjectaccessreviews",
                "selfsubjectrulesreviews",
                "subjectaccessreviews"
            ]
        );
        assert_eq!(list["resources"][0]["verbs"], json!(["create"]));
        assert_eq!(list["resources"][0]["namespaced"], true);
        let groups = api_group_list(&all).to_string();
        assert!(groups.contains("authentication.k8s.io/v1"), "{groups}");
    }

    #[test]
    fn versions_in_kubernetes_priority_order() {
        let mut v = vec![
            "v1alpha1", "v1", "v2beta1", "foo", "v1beta2", "v2", "v1beta1",
        ];
        v.sort_by_key(|x| version_priority(x));
        assert_eq!(
            v,
            ["v2", "v1", "v2beta1", "v1beta2", "v1beta1", "v1alpha1", "foo"]
        );
    }

    #[test]
    fn core_resource_list_has_pods_with_verbs_and_short_names() {
        let all = builtin();
        let list = api_resource_list(&all, "", "v1").unwrap();
        let pods = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "pods")
            .unwrap();
        assert_eq!(pods["shortNames"], json!(["po"]));
        assert_eq!(pods["categories"], json!(["all"]));
        assert!(pods["verbs"].as_array().unwrap().contains(&json!("watch")));
        assert!(list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "pods/status"));
    }

    #[test]
    fn aggregated_named_groups_include_scale() {
        let all = builtin();
        let doc = aggregated(&all, false, "v2");
        assert_eq!(doc["apiVersion"], "apidiscovery.k8s.io/v2");
        let apps = doc["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["metadata"]["name"] == "apps")
            .unwrap();
        let deploy = apps["versions"][0]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "deployments")
            .unwrap();
        let scale = deploy["subresources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["subresource"] == "scale")
            .unwrap();
        assert_eq!(scale["responseKind"]["group"], "autoscaling");
        assert!(api_group_doc(&all, "apps").is_some());
        assert!(api_group_doc(&all, "nope").is_none());
        assert!(api_resource_list(&all, "apps", "v2").is_none());
    }
}
