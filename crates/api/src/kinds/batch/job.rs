//! Job (batch): what cairn does that is specific to it.

use crate::kinds::prelude::*;
use crate::status::go_repr;
use crate::validation::batch::validate_job_spec;

pub const STRATEGY: Strategy = Strategy {
    default: Some(default_job),
    validate: Some(validate_job),
    validate_update: Some(validate_job_update),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::batch::v1::Job>,
    tracks_generation: true,
    resets_status: true,
    // The selector a Job gets from its uid (upstream's generateSelector).
    prepare_for_create: Some(generate_job_selector),
    admission: &[Admission::OrphanByDefault],
    zero_values: Some(zero_values),
    ..Strategy::NONE
};

fn default_job(o: &mut Map<String, Value>) {
    take_template_labels(o);
    if let Some(spec) = child_obj(o, "spec") {
        default_job_spec(spec);
    }
}

/// A Job without labels of its own takes its pod template's.
fn take_template_labels(o: &mut Map<String, Value>) {
    let labels = o
        .get("spec")
        .and_then(Value::as_object)
        .and_then(template_labels);
    if let (Some(labels), Some(meta)) = (labels, child_obj(o, "metadata")) {
        if is_empty_map(meta.get("labels")) {
            meta.insert("labels".into(), labels);
        }
    }
}

/// `SetDefaults_Job` (the server's selector is generated at admission, before this).
fn default_job_spec(spec: &mut Map<String, Value>) {
    if is_unset(spec.get("completions")) && is_unset(spec.get("parallelism")) {
        spec.insert("completions".into(), json!(1));
    }
    set_default(spec, "parallelism", json!(1));
    let backoff = if is_unset(spec.get("backoffLimitPerIndex")) {
        6
    } else {
        i64::from(i32::MAX)
    };
    set_default(spec, "backoffLimit", json!(backoff));
    set_default_str(spec, "completionMode", "NonIndexed");
    set_default(spec, "suspend", json!(false));
    set_default(spec, "manualSelector", json!(false));
    let replacement = if is_unset(spec.get("podFailurePolicy")) {
        "TerminatingOrFailed"
    } else {
        "Failed"
    };
    set_default_str(spec, "podReplacementPolicy", replacement);
    if let Some(policy) = existing_obj(spec, "podFailurePolicy") {
        for rule in list_objs(policy, "rules") {
            for pattern in list_objs(rule, "onPodConditions") {
                set_default_str(pattern, "status", "True");
            }
        }
    }
    default_template(spec);
}

/// What the Job strategy does on create unless `spec.manualSelector` is true: a selector on
/// the Job's uid, and the labels it matches added to the pod template (both the
/// `batch.kubernetes.io/` names and the legacy ones). A Job without labels of its own
/// takes the template's.
fn generate_job_selector(obj: &mut Value) {
    let uid = obj
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    let Some(spec) = existing_obj(o, "spec") else {
        return;
    };
    if spec.get("manualSelector") == Some(&Value::Bool(true)) {
        return;
    }
    spec.insert(
        "selector".into(),
        json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}),
    );
    if let Some(labels) = existing_obj(spec, "template")
        .and_then(|t| child_obj(t, "metadata"))
        .and_then(|m| child_obj(m, "labels"))
    {
        labels.insert("batch.kubernetes.io/controller-uid".into(), json!(uid));
        labels.insert("batch.kubernetes.io/job-name".into(), json!(name));
        labels.insert("controller-uid".into(), json!(uid));
        labels.insert("job-name".into(), json!(name));
    }
    take_template_labels(o);
}

fn validate_job(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    validate_job_spec(spec, "spec", true, errs);
}

/// Fields a Job update may not change (the template only while suspended, as upstream
/// allows its scheduling directives then; cairn allows the whole template).
fn validate_job_update(old: &Map<String, Value>, new: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let suspended = path(new, &["spec", "suspend"]) == Some(&Value::Bool(true));
    for key in ["selector", "completionMode", "template", "podFailurePolicy"] {
        if key == "template" && suspended {
            continue;
        }
        let before = strip(path(old, &["spec", key]));
        let after = strip(path(new, &["spec", key]));
        if before != after {
            errs.push(Cause::invalid_repr(
                format!("spec.{key}"),
                &go_repr(&after),
                IMMUTABLE,
            ));
        }
    }
}

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col("Status", "string", "Status of the job execution"),
        col("Completions", "string", "The completion status of the job"),
        col("Duration", "string", "Time required to complete the job."),
        AGE,
        wide("Containers", "string", DESC_CONTAINERS),
        wide("Images", "string", DESC_IMAGES),
        wide("Selector", "string", "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"),
    ]
}

fn row(obj: &Value, name: Value, created: &str, now: DateTime<Utc>) -> Vec<Value> {
    job_row(obj, name, created, now)
}

/// Go's zero values of the kind (see `Strategy::zero_values`).
fn zero_values(o: &mut Map<String, Value>) {
    workload_zero_values(o, &["lastProbeTime", "lastTransitionTime"], &[]);
}
