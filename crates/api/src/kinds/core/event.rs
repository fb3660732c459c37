//! Event (core): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    validate: Some(validate_event),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::core::v1::Event>,
    zero_values: Some(zero_values),
    allow_create_on_update: true,
    ..Strategy::NONE
};

/// `legacyValidateEvent` for core/v1 Events: namespaces must agree; events with `eventTime`
/// (the new style) must also say who reported them, which action and why.
fn validate_event(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let ns = path(o, &["metadata", "namespace"])
        .and_then(Value::as_str)
        .unwrap_or("");
    let involved_ns = path(o, &["involvedObject", "namespace"])
        .and_then(Value::as_str)
        .unwrap_or("");
    let mismatch = || {
        Cause::invalid(
            "involvedObject.namespace",
            involved_ns,
            "does not match event.namespace",
        )
    };
    if field(o, "eventTime").is_none() {
        let ok = if involved_ns.is_empty() {
            ns.is_empty() || ns == "default"
        } else {
            ns == involved_ns
        };
        if !ok {
            errs.push(mismatch());
        }
        return;
    }
    if involved_ns.is_empty() && ns != "default" && ns != "kube-system" {
        errs.push(mismatch());
    }
    let controller = s(o, "reportingComponent");
    if controller.is_empty() {
        errs.push(Cause::required("reportingComponent"));
    }
    for msg in is_qualified_name(controller) {
        errs.push(Cause::invalid("reportingComponent", controller, &msg));
    }
    let limits = [("reportingInstance", 128), ("action", 128), ("reason", 128)];
    for (key, max) in limits {
        let v = s(o, key);
        if v.is_empty() {
            errs.push(Cause::required(key));
        } else if v.len() > max {
            errs.push(Cause::invalid(
                key,
                "",
                &format!("can have at most {max} characters"),
            ));
        }
    }
    if s(o, "message").len() > 1024 {
        errs.push(Cause::invalid(
            "message",
            "",
            "can have at most 1024 characters",
        ));
    }
}

fn columns() -> Vec<Col> {
    vec![
        col("Last Seen", "string", "The time at which the most recent occurrence of this event was recorded."),
        col("Type", "string", "Type of this event (Normal, Warning), new types could be added in the future"),
        col("Reason", "string", "This should be a short, machine understandable string that gives the reason for the transition into the object's current status."),
        col("Object", "string", "The object that this event is about."),
        wide("Subobject", "string", "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if the object reference is to a container within a pod, this would take on a value like: \"spec.containers{name}\" (where \"name\" refers to the name of the container that triggered the event) or if no container name is specified \"spec.containers[2]\" (container with index 2 in this pod). This syntax is chosen only to have some well-defined way of referencing a part of an object."),
        wide("Source", "string", "The component reporting this event. Should be a short machine understandable string."),
        col("Message", "string", "A human-readable description of the status of this operation."),
        wide("First Seen", "string", "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)"),
        wide("Count", "string", "The number of times this event has occurred."),
        Col { priority: 1, ..NAME },
    ]
}

fn row(obj: &Value, name: Value, _created: &str, now: DateTime<Utc>) -> Vec<Value> {
    event_row(obj, name, now)
}

/// Go's zero values of the kind (see `Strategy::zero_values`).
fn zero_values(o: &mut Map<String, Value>) {
    ensure_obj(o, "involvedObject");
    ensure_obj(o, "source");
    ensure(o, "firstTimestamp", Value::Null);
    ensure(o, "lastTimestamp", Value::Null);
    ensure(o, "eventTime", Value::Null);
    ensure(o, "reportingComponent", Value::from(""));
    ensure(o, "reportingInstance", Value::from(""));
}
