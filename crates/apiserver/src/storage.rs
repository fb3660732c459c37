//! Storage admission: the `DefaultStorageClass` plugin (a claim that names no class gets
//! the default one — the newest class annotated `storageclass.kubernetes.io/is-default-
//! class: "true"`) and the `StorageObjectInUseProtection` plugin (new claims and volumes
//! get the `kubernetes.io/pvc-protection` / `kubernetes.io/pv-protection` finalizers, which
//! the protection controllers remove once nothing uses them).

use cairn_store::cache::WatchCache;
use serde_json::{json, Value};

const IS_DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";
pub const CLAIM_FINALIZER: &str = "kubernetes.io/pvc-protection";
pub const VOLUME_FINALIZER: &str = "kubernetes.io/pv-protection";

/// The default class's name, if any class is marked default.
pub fn default_class(cache: &WatchCache) -> Option<String> {
    crate::default_class::newest_default(
        cache,
        ("storage.k8s.io", "storageclasses"),
        IS_DEFAULT_CLASS,
    )
}

fn add_finalizer(obj: &mut Value, finalizer: &str) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let list = meta.entry("finalizers").or_insert_with(|| json!([]));
    if let Some(list) = list.as_array_mut() {
        if !list.iter().any(|f| f == finalizer) {
            list.push(json!(finalizer));
        }
    } else {
        *list = json!([finalizer]);
    }
}

/// A new claim: the default class when it names none (`storageClassName` absent; an
/// empty string asks for no class), and the protection finalizer.
pub fn admit_claim(cache: &WatchCache, pvc: &mut Value) {
    let names_class = pvc
        .pointer("/spec/storageClassName")
        .is_some_and(|v| !v.is_null());
    if !names_class {
        if let (Some(class), Some(spec)) = (
            default_class(cache),
            pvc.get_mut("spec").and_then(Value::as_object_mut),
        ) {
            spec.insert("storageClassName".into(), json!(class));
        }
    }
    add_finalizer(pvc, CLAIM_FINALIZER);
}

/// A new volume: the protection finalizer.
pub fn admit_volume(pv: &mut Value) {
    add_finalizer(pv, VOLUME_FINALIZER);
}
