//! The Priority admission plugin: a pod's `spec.priority` and `spec.preemptionPolicy`
//! come from its PriorityClass (or the global default class); only one class may be the
//! global default. The built-in `system-*` classes are created at bootstrap.

use cairn_api::registry::{self, ResourceInfo};
use cairn_api::status::Status;
use cairn_store::cache::WatchCache;
use serde_json::{json, Value};

use std::sync::Arc;

use cairn_store::Revision;
use parking_lot::Mutex;

struct Class {
    name: String,
    value: i64,
    global_default: bool,
    preemption_policy: String,
}

/// The parsed PriorityClasses, reused while none of them changed: every pod create
/// consults them, and parsing each class per create showed in the scheduler benchmark.
#[derive(Default)]
pub struct ClassMemo {
    built_from: Mutex<Memo>,
}

/// (key, modRevision) of each class the parsed list was built from, and the list.
type Memo = (Vec<(String, Revision)>, Arc<Vec<Class>>);

impl ClassMemo {
    fn classes(&self, cache: &WatchCache) -> Arc<Vec<Class>> {
        let Some(r) = registry::find("scheduling.k8s.io", "v1", "priorityclasses") else {
            return Arc::default();
        };
        let (objects, _) = cache.list(&r.key_prefix());
        let mut memo = self.built_from.lock();
        let unchanged = memo.0.len() == objects.len()
            && memo
                .0
                .iter()
                .zip(&objects)
                .all(|((key, rev), o)| *key == o.key && *rev == o.mod_revision);
        if !unchanged {
            let parsed = objects
                .iter()
                .filter_map(|o| serde_json::from_slice::<Value>(&o.bytes).ok())
                .map(|v| parse_class(&v))
                .collect();
            let built_from = objects
                .iter()
                .map(|o| (o.key.clone(), o.mod_revision))
                .collect();
            *memo = (built_from, Arc::new(parsed));
        }
        Arc::clone(&memo.1)
    }
}

fn parse_class(v: &Value) -> Class {
    Class {
        name: v
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        value: v.get("value").and_then(Value::as_i64).unwrap_or(0),
        global_default: v
            .get("globalDefault")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        preemption_policy: v
            .get("preemptionPolicy")
            .and_then(Value::as_str)
            .unwrap_or("PreemptLowerPriority")
            .to_string(),
    }
}

/// Sets a new pod's priority from its class; refuses unknown classes and a priority the
/// client set that the class contradicts, in kube-apiserver's words.
pub fn admit_pod(
    memo: &ClassMemo,
    cache: &WatchCache,
    pod: &mut Value,
    name: &str,
) -> Result<(), Status> {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    let all = memo.classes(cache);
    let wanted = spec
        .get("priorityClassName")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let class = if wanted.is_empty() {
        // The lowest-valued global default wins if several exist (as upstream).
        all.iter()
            .filter(|c| c.global_default)
            .min_by_key(|c| c.value)
    } else {
        let found = all.iter().find(|c| c.name == wanted);
        if found.is_none() {
            return Err(Status::forbidden(format!(
                "pods \"{name}\" is forbidden: no PriorityClass with name {wanted} was found"
            )));
        }
        found
    };
    let (class_name, value, policy) = match class {
        Some(c) => (c.name.clone(), c.value, c.preemption_policy.clone()),
        None => (String::new(), 0, "PreemptLowerPriority".to_string()),
    };
    if let Some(given) = spec.get("priority").and_then(Value::as_i64) {
        // Defaulting filled in the built-in classes and 0; any other given value must agree.
        let defaulted = wanted.is_empty() && given == 0;
        if given != value && !defaulted {
            return Err(Status::forbidden(format!(
                "pods \"{name}\" is forbidden: the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {value} from the given PriorityClass name"
            )));
        }
    }
    spec.insert("priority".into(), json!(value));
    spec.insert("preemptionPolicy".into(), json!(policy));
    if !class_name.is_empty() {
        spec.insert("priorityClassName".into(), json!(class_name));
    }
    Ok(())
}

/// A second global default is refused.
pub fn admit_class(
    memo: &ClassMemo,
    cache: &WatchCache,
    class: &Value,
    old: Option<&Value>,
) -> Result<(), Status> {
    if !class
        .get("globalDefault")
        .and_then(Value::as_bool)
        .unwrap_or(false)
    {
        return Ok(());
    }
    let me = class
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let was_default = old
        .and_then(|o| o.get("globalDefault"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if was_default {
        return Ok(());
    }
    let all = memo.classes(cache);
    if let Some(other) = all.iter().find(|c| c.global_default && c.name != me) {
        return Err(Status::forbidden(format!(
            "PriorityClass.scheduling.k8s.io \"{me}\" is forbidden: PriorityClass {} is already marked as default. Only one default can exist",
            other.name
        )));
    }
    Ok(())
}

pub fn is_priority_class(r: &ResourceInfo) -> bool {
    r.strategy
        .admits(cairn_api::kinds::Admission::PriorityClass)
}
