//! A pod's own validation: its spec (the shared pod-spec rules of
//! `crate::validation::pod`, which templates use too) and what a pod update may change.

use serde_json::{Map, Value};

use crate::status::Cause;
use crate::validation::pod::*;
use crate::validation::*;

const POD_UPDATE_MESSAGE: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

pub(super) fn validate_pod(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    validate_pod_spec(spec, "spec", errs);
}

pub(super) fn validate_pod_update(
    old: &Map<String, Value>,
    new: &Map<String, Value>,
    errs: &mut Vec<Cause>,
) {
    let empty = Map::new();
    let os = obj(old, "spec").unwrap_or(&empty);
    let ns = obj(new, "spec").unwrap_or(&empty);

    for key in ["containers", "initContainers"] {
        if arr(os, key).len() != arr(ns, key).len() {
            errs.push(Cause::forbidden(
                format!("spec.{key}"),
                "pod updates may not add or remove containers",
            ));
            return;
        }
    }

    match (
        int(os, "activeDeadlineSeconds"),
        int(ns, "activeDeadlineSeconds"),
    ) {
        (Some(o), Some(n)) if n < o => {}
        (Some(o), Some(n)) if n > o => {
            errs.push(Cause::invalid_value(
                "spec.activeDeadlineSeconds",
                &Value::from(n),
                "must be less than or equal to previous value",
            ));
            return;
        }
        (Some(_), None) => errs.push(Cause::invalid_value(
            "spec.activeDeadlineSeconds",
            &Value::Null,
            "must not update from a positive integer to nil value",
        )),
        _ => {}
    }

    // Tolerations may only be added (and NoExecute ones shortened).
    let new_tols = arr(ns, "tolerations");
    for old_t in arr(os, "tolerations") {
        let found = new_tols.iter().any(|new_t| {
            let mut a = strip(Some(old_t));
            let b = strip(Some(new_t));
            if let (Some(a), Some(secs)) = (a.as_object_mut(), b.get("tolerationSeconds")) {
                a.insert("tolerationSeconds".into(), secs.clone());
            } else if let Some(a) = a.as_object_mut() {
                a.remove("tolerationSeconds");
            }
            a == b
        });
        if !found {
            errs.push(Cause::forbidden(
                "spec.tolerations",
                "existing toleration can not be modified except its tolerationSeconds",
            ));
            return;
        }
    }

    // Everything else must be unchanged: compare with the mutable fields carried over.
    let mut munged = ns.clone();
    for key in ["containers", "initContainers"] {
        if let (Some(new_list), Some(old_list)) = (
            munged.get_mut(key).and_then(Value::as_array_mut),
            os.get(key).and_then(Value::as_array),
        ) {
            for (n, o) in new_list.iter_mut().zip(old_list) {
                if let (Some(n), Some(img)) = (n.as_object_mut(), o.get("image")) {
                    n.insert("image".into(), img.clone());
                }
            }
        }
    }
    crate::scheduling_validation::validate_gates_update(os, ns, errs);
    for key in ["activeDeadlineSeconds", "tolerations", "schedulingGates"] {
        match os.get(key) {
            Some(v) => munged.insert(key.into(), v.clone()),
            None => munged.remove(key),
        };
    }
    if int(os, "terminationGracePeriodSeconds").is_some_and(|g| g < 0)
        && int(ns, "terminationGracePeriodSeconds") == Some(1)
    {
        if let Some(v) = os.get("terminationGracePeriodSeconds") {
            munged.insert("terminationGracePeriodSeconds".into(), v.clone());
        }
    }
    if strip(Some(&Value::Object(munged))) != strip(Some(&Value::Object(os.clone()))) {
        errs.push(Cause::forbidden("spec", POD_UPDATE_MESSAGE));
    }
}
