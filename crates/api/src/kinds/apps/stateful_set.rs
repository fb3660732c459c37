//! StatefulSet (apps): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(default_stateful_set),
    validate: Some(validate_stateful_set),
    validate_update: Some(validate_update),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::apps::v1::StatefulSet>,
    tracks_generation: true,
    resets_status: true,
    status_counters: STATUS_COUNTERS,
    zero_values: Some(zero_values),
    ..Strategy::NONE
};

fn default_stateful_set(o: &mut Map<String, Value>) {
    let Some(spec) = child_obj(o, "spec") else {
        return;
    };
    set_default_str(spec, "podManagementPolicy", "OrderedReady");
    if let Some(strategy) = child_obj(spec, "updateStrategy") {
        set_default_str(strategy, "type", "RollingUpdate");
        if str_of(strategy, "type") == "RollingUpdate" {
            if let Some(ru) = child_obj(strategy, "rollingUpdate") {
                set_default(ru, "partition", json!(0));
            }
        }
    }
    if let Some(policy) = child_obj(spec, "persistentVolumeClaimRetentionPolicy") {
        set_default_str(policy, "whenDeleted", "Retain");
        set_default_str(policy, "whenScaled", "Retain");
    }
    set_default(spec, "replicas", json!(1));
    set_default(spec, "revisionHistoryLimit", json!(10));
    for pvc in list_objs(spec, "volumeClaimTemplates") {
        // Embedded claims are defaulted as PersistentVolumeClaims are.
        set_default_str(pvc, "apiVersion", "v1");
        set_default_str(pvc, "kind", "PersistentVolumeClaim");
        default_claim(pvc);
    }
    default_template(spec);
}

fn validate_stateful_set(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    for key in ["replicas", "minReadySeconds", "revisionHistoryLimit"] {
        nonnegative(spec, key, "spec", errs);
    }
    let policy = s(spec, "podManagementPolicy");
    require_one_of(
        errs,
        "spec.podManagementPolicy".into(),
        policy,
        &["OrderedReady", "Parallel"],
    );
    if let Some(strategy) = obj(spec, "updateStrategy") {
        match s(strategy, "type") {
            "OnDelete" => {
                if field(strategy, "rollingUpdate").is_some() {
                    errs.push(Cause::invalid(
                        "spec.updateStrategy.rollingUpdate",
                        "OnDelete",
                        "only allowed for updateStrategy 'RollingUpdate'",
                    ));
                }
            }
            "RollingUpdate" => {
                if let Some(ru) = obj(strategy, "rollingUpdate") {
                    nonnegative(ru, "partition", "spec.updateStrategy.rollingUpdate", errs);
                }
            }
            "" => errs.push(Cause::required("spec.updateStrategy")),
            other => errs.push(Cause::invalid(
                "spec.updateStrategy",
                other,
                "must be 'RollingUpdate' or 'OnDelete'",
            )),
        }
    }
    if let Some(retention) = obj(spec, "persistentVolumeClaimRetentionPolicy") {
        for key in ["whenDeleted", "whenScaled"] {
            let p = format!("spec.persistentVolumeClaimRetentionPolicy.{key}");
            require_one_of(errs, p, s(retention, key), &["Retain", "Delete"]);
        }
    }
    for (i, pvc) in objs(spec, "volumeClaimTemplates") {
        let name = obj(pvc, "metadata").map(|m| s(m, "name")).unwrap_or("");
        let p = format!("spec.volumeClaimTemplates[{i}].metadata.name");
        if name.is_empty() {
            errs.push(Cause::required(p));
        } else {
            for msg in is_dns1123_subdomain(name) {
                errs.push(Cause::invalid(&p, name, &msg));
            }
        }
        validate_claim(pvc, &format!("spec.volumeClaimTemplates[{i}].spec"), errs);
    }
    validate_workload(&with_claim_volumes(spec), "statefulset", errs);
}

/// The spec with each claim template as a template volume, as the controller adds them
/// to the pods, so mounts of claim templates are found.
fn with_claim_volumes(spec: &Map<String, Value>) -> Map<String, Value> {
    let names: Vec<String> = objs(spec, "volumeClaimTemplates")
        .filter_map(|(_, pvc)| obj(pvc, "metadata").map(|m| s(m, "name").to_string()))
        .filter(|n| !n.is_empty())
        .collect();
    let mut out = spec.clone();
    if names.is_empty() {
        return out;
    }
    let pod_spec = out
        .get_mut("template")
        .and_then(|t| t.get_mut("spec"))
        .and_then(Value::as_object_mut);
    if let Some(pod_spec) = pod_spec {
        let volumes = pod_spec
            .entry("volumes")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Some(list) = volumes.as_array_mut() {
            for n in names {
                let claim =
                    serde_json::json!({"name": n, "persistentVolumeClaim": {"claimName": n}});
                if !list
                    .iter()
                    .any(|v| v.get("name").and_then(Value::as_str) == Some(n.as_str()))
                {
                    list.push(claim);
                }
            }
        }
    }
    out
}

/// The spec fields a StatefulSet update may change (upstream `ValidateStatefulSetUpdate`).
fn validate_stateful_set_update(
    old: &Map<String, Value>,
    new: &Map<String, Value>,
    errs: &mut Vec<Cause>,
) {
    const MUTABLE: [&str; 7] = [
        "replicas",
        "ordinals",
        "template",
        "updateStrategy",
        "persistentVolumeClaimRetentionPolicy",
        "minReadySeconds",
        "revisionHistoryLimit",
    ];
    let fixed = |o: &Map<String, Value>| -> Value {
        let mut spec = obj(o, "spec").cloned().unwrap_or_default();
        spec.retain(|k, _| !MUTABLE.contains(&k.as_str()));
        strip(Some(&Value::Object(spec)))
    };
    if fixed(old) != fixed(new) {
        errs.push(Cause::forbidden(
            "spec",
            "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
        ));
    }
}

fn validate_update(o: &Map<String, Value>, n: &Map<String, Value>, errs: &mut Vec<Cause>) {
    selector_immutable(o, n, errs);
    validate_stateful_set_update(o, n, errs);
}

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col("Ready", "string", "Number of the pod with ready state"),
        AGE,
        wide("Containers", "string", DESC_CONTAINERS),
        wide("Images", "string", DESC_IMAGES),
    ]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    let ready_of = || {
        format!(
            "{}/{}",
            get_int(obj, &["status", "readyReplicas"]),
            get_int(obj, &["spec", "replicas"])
        )
    };
    let (names, images) = container_cells(obj);
    with_template_cells(name, &[json!(ready_of())], created, names, images, None)
}

/// Status counters Go prints even when zero.
const STATUS_COUNTERS: &[&str] = &["replicas", "availableReplicas"];

/// Go's zero values of the kind (see `Strategy::zero_values`).
fn zero_values(o: &mut Map<String, Value>) {
    workload_zero_values(o, &["lastTransitionTime"], STATUS_COUNTERS);
}
