//! Event (core): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    validate: Some(crate::validation::validate_event),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::core::v1::Event>,
    zero_values: Some(zero_values),
    allow_create_on_update: true,
    ..Strategy::NONE
};

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
