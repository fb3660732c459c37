//! The resources CustomResourceDefinitions define, served beside the built-in ones.
//!
//! Every served version of every CRD becomes a [`ResourceInfo`] that the rest of the server
//! handles like a built-in resource's (the same handlers, store, watch cache and
//! renderers), plus a [`CustomVersion`] with what only custom resources have: the version's
//! structural schema, printer columns and scale paths, and the storage version its objects
//! are kept in. That is the strategy the CRD builds (`strategy.rs`: prune, default,
//! validate, table), beside the fixed `cairn_api::kinds::CUSTOM`. The set is rebuilt from the stored CRDs whenever one is written.
//!
//! `ResourceInfo`s are `&'static` throughout the server, so the ones made here are
//! interned: each distinct definition is allocated once for the life of the process and
//! reused when a rebuild produces it again. A CRD whose names or subresources change
//! therefore keeps a few hundred bytes of its old shape alive; definitions that do not
//! change cost nothing more.

mod strategy;

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use cairn_api::registry::{
    ResourceInfo, Subresource, ALL_VERBS, STATUS_VERBS as SUBRESOURCE_VERBS,
};
use parking_lot::{Mutex, RwLock};
use serde_json::Value;

/// What a served version of a custom resource adds to its [`ResourceInfo`].
#[derive(Debug)]
pub struct CustomVersion {
    pub info: &'static ResourceInfo,
    /// The version whose shape objects are stored in (`storage: true`).
    pub storage: &'static ResourceInfo,
    /// Name of the CRD (`<plural>.<group>`).
    pub crd: String,
    /// `schema.openAPIV3Schema` of this version, when given.
    pub schema: Option<Value>,
    /// `additionalPrinterColumns` of this version.
    pub columns: Vec<Value>,
    /// `subresources.scale` of this version (`specReplicasPath`, ...), when enabled.
    pub scale: Option<Value>,
    /// The schema's CEL rules, compiled (none when they do not compile: such a CRD is
    /// refused when written, so only a CRD stored before a rule became invalid gets here).
    pub rules: Option<Arc<cairn_cel::SchemaRules>>,
    /// The CRD's conversion webhook (`spec.conversion.strategy: Webhook`).
    pub conversion: Option<Arc<crate::admission::webhook::Hook>>,
}

/// The served custom resources, swapped whole on every rebuild.
#[derive(Default)]
pub struct CustomRegistry {
    versions: RwLock<Arc<Vec<Arc<CustomVersion>>>>,
    /// Each CRD's storage version (served or not): what writes are admitted against.
    storages: RwLock<Arc<Vec<Arc<CustomVersion>>>>,
    interned: Mutex<Vec<&'static ResourceInfo>>,
    /// Compiled rules by (CRD, version, schema hash): a rebuild recompiles only what changed.
    compiled: Mutex<HashMap<(String, String, u64), Arc<cairn_cel::SchemaRules>>>,
}

impl CustomRegistry {
    /// Every served custom version.
    pub fn all(&self) -> Arc<Vec<Arc<CustomVersion>>> {
        self.versions.read().clone()
    }

    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<Arc<CustomVersion>> {
        self.versions
            .read()
            .iter()
            .find(|v| v.info.group == group && v.info.version == version && v.info.plural == plural)
            .cloned()
    }

    /// The custom version `r` is, if it is one.
    pub fn of(&self, r: &ResourceInfo) -> Option<Arc<CustomVersion>> {
        self.versions
            .read()
            .iter()
            .find(|v| std::ptr::eq(v.info, r))
            .cloned()
    }

    /// The storage version whose shape `r` (a storage resource) is, if `r` is custom.
    pub fn stored(&self, r: &ResourceInfo) -> Option<Arc<CustomVersion>> {
        self.storages
            .read()
            .iter()
            .find(|v| std::ptr::eq(v.info, r))
            .cloned()
    }

    /// Rebuilds the served set from every stored CRD (as JSON objects). CRDs that are being
    /// deleted stop being served at once.
    pub fn rebuild(&self, crds: &[Value]) {
        let mut served = Vec::new();
        let mut storages = Vec::new();
        for crd in crds {
            if crd.pointer("/metadata/deletionTimestamp").is_some() {
                continue;
            }
            let (storage, versions) = self.versions_of(crd);
            served.extend(versions);
            storages.extend(storage);
        }
        *self.versions.write() = Arc::new(served);
        *self.storages.write() = Arc::new(storages);
    }

    /// `(storage version, served versions)` of one CRD.
    fn versions_of(&self, crd: &Value) -> (Option<Arc<CustomVersion>>, Vec<Arc<CustomVersion>>) {
        let spec = &crd["spec"];
        let name = crd
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let versions = spec["versions"].as_array().map_or(&[][..], Vec::as_slice);
        let storage_name = versions
            .iter()
            .find(|v| v["storage"] == Value::Bool(true))
            .and_then(|v| v["name"].as_str());
        let Some(storage_name) = storage_name else {
            return (None, Vec::new());
        };
        let storage = self.intern(info_of(spec, storage_name, versions));
        let conversion = (spec.pointer("/conversion/strategy").and_then(Value::as_str)
            == Some("Webhook"))
        .then(|| {
            let webhook = spec.pointer("/conversion/webhook").unwrap_or(&Value::Null);
            Arc::new(crate::admission::webhook::Hook::for_conversion(
                name, webhook,
            ))
        });
        let custom_version = |v: &Value, info: &'static ResourceInfo| {
            let schema = v.pointer("/schema/openAPIV3Schema").cloned();
            Arc::new(CustomVersion {
                info,
                storage,
                crd: name.to_string(),
                rules: schema
                    .as_ref()
                    .and_then(|s| self.rules_of(name, info.version, s)),
                schema,
                columns: v["additionalPrinterColumns"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default(),
                scale: v.pointer("/subresources/scale").cloned(),
                conversion: conversion.clone(),
            })
        };
        let storage_version = versions
            .iter()
            .find(|v| v["name"].as_str() == Some(storage_name))
            .map(|v| custom_version(v, storage));
        let served = versions
            .iter()
            .filter(|v| v["served"] == Value::Bool(true))
            .filter_map(|v| {
                let version = v["name"].as_str()?;
                Some(custom_version(
                    v,
                    self.intern(info_of(spec, version, versions)),
                ))
            })
            .collect();
        (storage_version, served)
    }

    fn rules_of(
        &self,
        crd: &str,
        version: &str,
        schema: &Value,
    ) -> Option<Arc<cairn_cel::SchemaRules>> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        schema.to_string().hash(&mut h);
        let key = (crd.to_string(), version.to_string(), h.finish());
        if let Some(rules) = self.compiled.lock().get(&key) {
            return Some(rules.clone());
        }
        let rules = Arc::new(cairn_cel::compile_schema_rules(schema, "").ok()?);
        self.compiled.lock().insert(key, rules.clone());
        Some(rules)
    }

    /// The interned [`ResourceInfo`] of `spec`: an existing equal one, else a new one whose
    /// strings are leaked (once per distinct definition).
    fn intern(&self, spec: InfoSpec) -> &'static ResourceInfo {
        let mut interned = self.interned.lock();
        if let Some(existing) = interned.iter().find(|i| spec.describes(i)) {
            return existing;
        }
        let leaked: &'static ResourceInfo = Box::leak(Box::new(spec.into_static()));
        interned.push(leaked);
        leaked
    }
}

/// One version of a CRD's resource, before interning.
#[derive(Debug, PartialEq)]
struct InfoSpec {
    group: String,
    version: String,
    kind: String,
    plural: String,
    singular: String,
    namespaced: bool,
    short_names: Vec<String>,
    categories: Vec<String>,
    status: bool,
    scale: bool,
}

impl InfoSpec {
    fn describes(&self, info: &ResourceInfo) -> bool {
        let same_list =
            |a: &[String], b: &[&str]| a.iter().map(String::as_str).eq(b.iter().copied());
        self.group == info.group
            && self.version == info.version
            && self.kind == info.kind
            && self.plural == info.plural
            && self.singular == info.singular
            && self.namespaced == info.namespaced
            && same_list(&self.short_names, info.short_names)
            && same_list(&self.categories, info.categories)
            && self.status == info.subresource("status").is_some()
            && self.scale == info.subresource("scale").is_some()
    }

    fn into_static(self) -> ResourceInfo {
        let kind = leak(&self.kind);
        let mut subresources: Vec<Subresource> = Vec::new();
        if self.status {
            subresources.push(Subresource {
                name: "status",
                kind,
                group: "",
                version: "",
                verbs: SUBRESOURCE_VERBS,
            });
        }
        if self.scale {
            subresources.push(Subresource {
                name: "scale",
                kind: "Scale",
                group: "autoscaling",
                version: "v1",
                verbs: SUBRESOURCE_VERBS,
            });
        }
        ResourceInfo {
            group: leak(&self.group),
            version: leak(&self.version),
            kind,
            strategy: &cairn_api::kinds::CUSTOM,
            plural: leak(&self.plural),
            singular: leak(&self.singular),
            namespaced: self.namespaced,
            short_names: leak_list(&self.short_names),
            categories: leak_list(&self.categories),
            verbs: ALL_VERBS,
            subresources: Box::leak(subresources.into_boxed_slice()),
            field_selectors: &[],
        }
    }
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

fn leak_list(items: &[String]) -> &'static [&'static str] {
    let list: Vec<&'static str> = items.iter().map(|s| leak(s)).collect();
    Box::leak(list.into_boxed_slice())
}

/// One version of a CRD's resource, as `spec` defines it.
fn info_of(spec: &Value, version: &str, versions: &[Value]) -> InfoSpec {
    let names = &spec["names"];
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    let list = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect()
    };
    let kind = s(&names["kind"]);
    let singular = match s(&names["singular"]) {
        x if x.is_empty() => kind.to_lowercase(),
        x => x,
    };
    let subs = versions
        .iter()
        .find(|v| v["name"].as_str() == Some(version))
        .map(|v| &v["subresources"]);
    InfoSpec {
        group: s(&spec["group"]),
        version: version.to_string(),
        plural: s(&names["plural"]),
        singular,
        kind,
        namespaced: spec["scope"].as_str() == Some("Namespaced"),
        short_names: list(&names["shortNames"]),
        categories: list(&names["categories"]),
        status: subs.is_some_and(|s| s.get("status").is_some()),
        scale: subs.is_some_and(|s| s.get("scale").is_some()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(plural: &str, versions: Value) -> Value {
        json!({"metadata": {"name": format!("{plural}.example.com")},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": plural, "singular": "widget", "kind": "Widget", "shortNames": ["wd"], "categories": ["all"]},
                "versions": versions}})
    }

    #[test]
    fn served_versions_share_the_storage_version() {
        let registry = CustomRegistry::default();
        let versions = json!([
            {"name": "v1", "served": true, "storage": true, "subresources": {"status": {}}},
            {"name": "v1beta1", "served": true, "storage": false},
            {"name": "v1alpha1", "served": false, "storage": false}]);
        registry.rebuild(&[crd("widgets", versions.clone())]);
        let v1 = registry.find("example.com", "v1", "widgets").unwrap();
        let beta = registry.find("example.com", "v1beta1", "widgets").unwrap();
        assert!(registry
            .find("example.com", "v1alpha1", "widgets")
            .is_none());
        assert!(std::ptr::eq(beta.storage, v1.info));
        assert_eq!(v1.info.short_names, ["wd"]);
        assert!(v1.info.subresource("status").is_some());
        assert!(beta.info.subresource("status").is_none());
        assert_eq!(v1.info.key_prefix(), beta.info.key_prefix());
        // A rebuild with the same definitions reuses the interned infos.
        let before = registry.interned.lock().len();
        registry.rebuild(&[crd("widgets", versions)]);
        assert_eq!(registry.interned.lock().len(), before);
        assert!(registry.of(v1.info).is_some());
        assert!(registry.stored(v1.info).is_some());
        assert!(registry.stored(beta.info).is_none());
    }

    #[test]
    fn crds_without_a_storage_version_or_being_deleted_are_not_served() {
        let registry = CustomRegistry::default();
        let mut deleting = crd(
            "gadgets",
            json!([{"name": "v1", "served": true, "storage": true}]),
        );
        deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        registry.rebuild(&[
            crd(
                "widgets",
                json!([{"name": "v1", "served": true, "storage": false}]),
            ),
            deleting,
            json!("garbage"),
        ]);
        assert!(registry.all().is_empty());
    }
}
