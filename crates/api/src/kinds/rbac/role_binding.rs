//! RoleBinding (rbac.authorization.k8s.io): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    admission: &[Admission::RbacEscalation],
    default: Some(default),
    validate: Some(validate),
    validate_update: Some(validate_update),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::rbac::v1::RoleBinding>,
    name_rule: NameRule::PathSegment,
    ..Strategy::NONE
};

fn validate(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    validate_binding(o, true, errs)
}

pub(super) fn validate_update(
    o: &Map<String, Value>,
    n: &Map<String, Value>,
    errs: &mut Vec<Cause>,
) {
    validate_binding_update(o, n, errs)
}

pub(super) fn default(o: &mut Map<String, Value>) {
    default_binding_subjects(o)
}

pub(super) fn columns() -> Vec<Col> {
    vec![
        NAME,
        col(
            "Role",
            "string",
            "RoleRef references the Role or ClusterRole being granted.",
        ),
        AGE,
        wide("Users", "string", "Users in the binding"),
        wide("Groups", "string", "Groups in the binding"),
        wide(
            "ServiceAccounts",
            "string",
            "ServiceAccounts in the binding",
        ),
    ]
}

pub(super) fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    binding_row(obj, name, created)
}

/// `subjects[].apiGroup`: `rbac.authorization.k8s.io` for users and groups. A service
/// account's is `""`, which Go omits (`omitempty`), so it is left unset.
fn default_binding_subjects(o: &mut Map<String, Value>) {
    let Some(subjects) = o.get_mut("subjects").and_then(Value::as_array_mut) else {
        return;
    };
    for s in subjects.iter_mut().filter_map(Value::as_object_mut) {
        let is_user_or_group = matches!(
            s.get("kind").and_then(Value::as_str),
            Some("User" | "Group")
        );
        if is_user_or_group && is_unset(s.get("apiGroup")) {
            s.insert("apiGroup".into(), json!("rbac.authorization.k8s.io"));
        }
    }
}

fn binding_row(obj: &Value, name: Value, created: &str) -> Vec<Value> {
    let role = format!(
        "{}/{}",
        get_str(obj, &["roleRef", "kind"]),
        get_str(obj, &["roleRef", "name"])
    );
    let (mut users, mut groups, mut accounts) = (Vec::new(), Vec::new(), Vec::new());
    for s in get_arr(obj, &["subjects"]) {
        let subject_name = get_str(s, &["name"]).to_string();
        match get_str(s, &["kind"]) {
            "User" => users.push(subject_name),
            "Group" => groups.push(subject_name),
            "ServiceAccount" => {
                accounts.push(format!("{}/{subject_name}", get_str(s, &["namespace"])))
            }
            _ => {}
        }
    }
    vec![
        name,
        json!(role),
        json!(created),
        json!(users.join(", ")),
        json!(groups.join(", ")),
        json!(accounts.join(", ")),
    ]
}
