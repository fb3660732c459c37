//! What attachment decided, as the `status` objects the controller writes. A condition
//! keeps its `lastTransitionTime` while its status stays the same, so a status that did
//! not change renders equal to the one stored and is not written again.

use serde_json::{json, Map, Value};

use super::attach::{Cond, GatewayState, RouteState, CONTROLLER_NAME};
use super::route::ParentRef;

fn conditions_in(old: Option<&Value>) -> &[Value] {
    old.and_then(|o| o.get("conditions"))
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// One `metav1.Condition`; `old` is the conditions' previous holder.
fn condition(kind: &str, cond: &Cond, generation: Option<i64>, old: &[Value], now: &str) -> Value {
    let status = if cond.status { "True" } else { "False" };
    let since = old
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
        .filter(|c| c.get("status").and_then(Value::as_str) == Some(status))
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| Value::from(now));
    json!({
        "type": kind,
        "status": status,
        "reason": cond.reason,
        "message": cond.message,
        "observedGeneration": generation.unwrap_or(0),
        "lastTransitionTime": since,
    })
}

fn conditions(
    list: &[(&'static str, Cond)],
    generation: Option<i64>,
    old: &[Value],
    now: &str,
) -> Value {
    list.iter()
        .map(|(kind, cond)| condition(kind, cond, generation, old, now))
        .collect()
}

/// A cairn GatewayClass's status: accepted.
pub fn class_status(generation: Option<i64>, old: Option<&Value>, now: &str) -> Value {
    let accepted = Cond::yes("Accepted", "handled by cairn-proxy on every node");
    json!({"conditions": conditions(&[("Accepted", accepted)], generation, conditions_in(old), now)})
}

/// A Gateway's status; `addresses` are the nodes' (every node serves every Gateway).
pub fn gateway_status(
    state: &GatewayState,
    addresses: &[String],
    old: Option<&Value>,
    now: &str,
) -> Value {
    let generation = state.generation;
    let old_listeners = old
        .and_then(|o| o.get("listeners"))
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let listeners: Vec<Value> = state
        .listeners
        .iter()
        .map(|l| {
            let before = old_listeners
                .iter()
                .find(|o| o.get("name").and_then(Value::as_str) == Some(&l.name));
            let kinds: Vec<Value> = l
                .supported_kinds
                .iter()
                .map(|k| json!({"group": k.group, "kind": k.kind}))
                .collect();
            json!({
                "name": l.name,
                "supportedKinds": kinds,
                "attachedRoutes": l.attached_routes,
                "conditions": conditions(&l.conditions, generation, conditions_in(before), now),
            })
        })
        .collect();
    let addresses: Vec<Value> = addresses
        .iter()
        .map(|a| json!({"type": "IPAddress", "value": a}))
        .collect();
    json!({
        "addresses": addresses,
        "conditions": conditions(&state.conditions, generation, conditions_in(old), now),
        "listeners": listeners,
    })
}

fn parent_ref_json(p: &ParentRef) -> Value {
    let mut out = Map::new();
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            out.insert(k.into(), v);
        }
    };
    put("group", p.group.clone().map(Value::from));
    put("kind", p.kind.clone().map(Value::from));
    put("namespace", p.namespace.clone().map(Value::from));
    put("name", Some(Value::from(p.name.clone())));
    put("sectionName", p.section_name.clone().map(Value::from));
    put("port", p.port.map(Value::from));
    Value::Object(out)
}

/// An HTTPRoute's status: other controllers' parent entries kept, cairn's replaced.
pub fn route_status(state: &RouteState, old: Option<&Value>, now: &str) -> Value {
    let old_parents = old
        .and_then(|o| o.get("parents"))
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let ours =
        |p: &&Value| p.get("controllerName").and_then(Value::as_str) == Some(CONTROLLER_NAME);
    let mut parents: Vec<Value> = old_parents.iter().filter(|p| !ours(p)).cloned().collect();
    for parent in &state.parents {
        let reference = parent_ref_json(&parent.parent_ref);
        let before = old_parents
            .iter()
            .filter(ours)
            .find(|p| p.get("parentRef") == Some(&reference));
        parents.push(json!({
            "parentRef": reference,
            "controllerName": CONTROLLER_NAME,
            "conditions": conditions(&parent.conditions, state.generation, conditions_in(before), now),
        }));
    }
    json!({"parents": parents})
}
