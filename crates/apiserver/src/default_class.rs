//! Default classes: the newest class object marked default (what upstream's
//! DefaultStorageClass and DefaultIngressClass admission plugins pick), and the
//! DefaultIngressClass plugin itself (the storage one is in `storage.rs` with the claim's
//! other admission).

use cairn_api::registry;
use cairn_store::cache::WatchCache;
use serde_json::{json, Value};

/// The newest object of a cluster-scoped class kind (`group`, `plural`) whose
/// `annotation` is `"true"`: upstream's default-class admission plugins pick it when
/// several are marked.
pub fn newest_default(
    cache: &WatchCache,
    (group, plural): (&str, &str),
    annotation: &str,
) -> Option<String> {
    let r = registry::find(group, "v1", plural)?;
    let (objects, _) = cache.list(&r.list_prefix(None));
    let pointer = format!("/metadata/annotations/{}", annotation.replace('/', "~1"));
    objects
        .iter()
        .filter_map(|o| serde_json::from_slice::<Value>(&o.bytes).ok())
        .filter(|c| c.pointer(&pointer) == Some(&json!("true")))
        .max_by(|a, b| {
            let t = |c: &Value| {
                c.pointer("/metadata/creationTimestamp")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            t(a).cmp(&t(b))
        })
        .and_then(|c| {
            c.pointer("/metadata/name")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
}

/// upstream's DefaultIngressClass: a new Ingress that names no class (neither
/// `spec.ingressClassName` nor the legacy `kubernetes.io/ingress.class` annotation) gets
/// the default IngressClass, the newest one marked
/// `ingressclass.kubernetes.io/is-default-class: "true"`.
pub fn admit_ingress(cache: &WatchCache, ingress: &mut Value) {
    let names_class = ingress
        .pointer("/spec/ingressClassName")
        .is_some_and(|v| !v.is_null())
        || ingress
            .pointer("/metadata/annotations/kubernetes.io~1ingress.class")
            .is_some();
    if names_class {
        return;
    }
    let default = newest_default(
        cache,
        ("networking.k8s.io", "ingressclasses"),
        "ingressclass.kubernetes.io/is-default-class",
    );
    if let (Some(class), Some(spec)) = (
        default,
        ingress.get_mut("spec").and_then(Value::as_object_mut),
    ) {
        spec.insert("ingressClassName".into(), json!(class));
    }
}
