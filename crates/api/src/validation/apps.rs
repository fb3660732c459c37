//! Label selectors and the checks the workloads that use them share (selector, pod template,
//! rolling update, claim spec); each workload's own rules are its kind's (`kinds/apps/*`,
//! `kinds/core/replication_controller.rs`).

use super::pod::validate_pod_spec;
use super::*;

/// A label selector printed as Go's `%#v` of `v1.LabelSelector` (what Kubernetes shows for an
/// invalid or changed selector).
pub(crate) fn go_selector(sel: Option<&Value>) -> String {
    let empty = Map::new();
    let sel = sel.and_then(Value::as_object).unwrap_or(&empty);
    let labels = match obj(sel, "matchLabels") {
        Some(m) if !m.is_empty() => go_repr(&Value::Object(m.clone())),
        Some(_) => "map[string]string{}".to_string(),
        None => "map[string]string(nil)".to_string(),
    };
    let exprs: Vec<String> = objs(sel, "matchExpressions")
        .map(|(_, e)| {
            let values = match field(e, "values").and_then(Value::as_array) {
                Some(vs) => format!(
                    "[]string{{{}}}",
                    vs.iter().map(go_repr).collect::<Vec<_>>().join(", ")
                ),
                None => "[]string(nil)".to_string(),
            };
            format!(
                "v1.LabelSelectorRequirement{{Key:{}, Operator:{}, Values:{values}}}",
                go_repr(&Value::from(s(e, "key"))),
                go_repr(&Value::from(s(e, "operator")))
            )
        })
        .collect();
    let exprs = if field(sel, "matchExpressions").is_none() {
        "[]v1.LabelSelectorRequirement(nil)".to_string()
    } else {
        format!("[]v1.LabelSelectorRequirement{{{}}}", exprs.join(", "))
    };
    format!("v1.LabelSelector{{MatchLabels:{labels}, MatchExpressions:{exprs}}}")
}

pub(crate) fn validate_label_selector(sel: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    validate_labels(sel, "matchLabels", &format!("{p}.matchLabels"), errs);
    for (i, e) in objs(sel, "matchExpressions") {
        let ep = format!("{p}.matchExpressions[{i}]");
        let values = arr(e, "values");
        match s(e, "operator") {
            "In" | "NotIn" => {
                if values.is_empty() {
                    errs.push(Cause::required_detail(
                        format!("{ep}.values"),
                        "must be specified when `operator` is 'In' or 'NotIn'",
                    ));
                }
            }
            "Exists" | "DoesNotExist" => {
                if !values.is_empty() {
                    errs.push(Cause::forbidden(
                        format!("{ep}.values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    ));
                }
            }
            other => errs.push(Cause::invalid(
                format!("{ep}.operator"),
                other,
                "not a valid selector operator",
            )),
        }
        let key = s(e, "key");
        for msg in is_qualified_name(key) {
            errs.push(Cause::invalid(format!("{ep}.key"), key, &msg));
        }
        for (j, v) in values.iter().enumerate() {
            let v = v.as_str().unwrap_or("");
            for msg in is_valid_label_value(v) {
                errs.push(Cause::invalid(format!("{ep}.values[{j}]"), v, &msg));
            }
        }
    }
}

/// Whether `labels` satisfy the label selector `sel` (`matchLabels` and `matchExpressions`).
pub fn selector_matches(sel: &Map<String, Value>, labels: &BTreeMap<String, String>) -> bool {
    let labels_ok = obj(sel, "matchLabels").is_none_or(|m| {
        m.iter()
            .all(|(k, v)| labels.get(k).map(String::as_str) == Some(v.as_str().unwrap_or("")))
    });
    labels_ok
        && objs(sel, "matchExpressions").all(|(_, e)| {
            let key = s(e, "key");
            let values: Vec<&str> = arr(e, "values").iter().filter_map(Value::as_str).collect();
            let have = labels.get(key);
            match s(e, "operator") {
                "In" => have.is_some_and(|v| values.contains(&v.as_str())),
                "NotIn" => have.is_none_or(|v| !values.contains(&v.as_str())),
                "Exists" => have.is_some(),
                "DoesNotExist" => have.is_none(),
                _ => false,
            }
        })
}

pub(crate) fn selector_is_empty(sel: &Map<String, Value>) -> bool {
    obj(sel, "matchLabels").is_none_or(Map::is_empty) && arr(sel, "matchExpressions").is_empty()
}

/// Selector and template checks shared by Deployments, ReplicaSets, DaemonSets and
/// StatefulSets.
pub(crate) fn validate_workload(spec: &Map<String, Value>, kind_word: &str, errs: &mut Vec<Cause>) {
    let selector = obj(spec, "selector");
    match selector {
        None => errs.push(Cause::required("spec.selector")),
        Some(sel) => {
            validate_label_selector(sel, "spec.selector", errs);
            if selector_is_empty(sel) {
                errs.push(Cause::invalid_repr(
                    "spec.selector",
                    &go_selector(field(spec, "selector")),
                    &format!("empty selector is invalid for {kind_word}"),
                ));
            }
        }
    }
    let selector = selector.filter(|sel| !selector_is_empty(sel));
    let owner = if kind_word == "statefulset" {
        "StatefulSet"
    } else {
        "ReplicaSet"
    };
    validate_template(spec, "spec", selector, &["Always"], Some(owner), errs);
}

/// `spec.template`: present, its labels matched by `selector`, a valid pod spec whose
/// restart policy is one of `restart_policies`; `deadline_owner` names the kind in the
/// message when `activeDeadlineSeconds` is not allowed.
pub(crate) fn validate_template(
    spec: &Map<String, Value>,
    p: &str,
    selector: Option<&Map<String, Value>>,
    restart_policies: &[&str],
    deadline_owner: Option<&str>,
    errs: &mut Vec<Cause>,
) {
    let Some(template) = obj(spec, "template") else {
        errs.push(Cause::required(format!("{p}.template")));
        return;
    };
    let empty = Map::new();
    let tmeta = obj(template, "metadata").unwrap_or(&empty);
    if let Some(sel) = selector {
        if !selector_matches(sel, &str_map(tmeta, "labels")) {
            errs.push(Cause::invalid_value(
                format!("{p}.template.metadata.labels"),
                field(tmeta, "labels").unwrap_or(&Value::Object(Map::new())),
                "`selector` does not match template `labels`",
            ));
        }
    }
    validate_labels(
        tmeta,
        "labels",
        &format!("{p}.template.metadata.labels"),
        errs,
    );
    let tspec = obj(template, "spec").unwrap_or(&empty);
    validate_pod_spec(tspec, &format!("{p}.template.spec"), errs);
    let rp = s(tspec, "restartPolicy");
    if !rp.is_empty() && !restart_policies.contains(&rp) {
        errs.push(Cause::not_supported(
            format!("{p}.template.spec.restartPolicy"),
            rp,
            restart_policies,
        ));
    }
    if let Some(owner) = deadline_owner {
        if field(tspec, "activeDeadlineSeconds").is_some() {
            errs.push(Cause::forbidden(
                format!("{p}.template.spec.activeDeadlineSeconds"),
                &format!("activeDeadlineSeconds in {owner} is not Supported"),
            ));
        }
    }
}

/// A non-negative int or a percentage (`max_100`: at most 100 %), upstream's
/// `ValidatePositiveIntOrPercent` and `IsNotMoreThan100Percent`; its number when valid.
pub(crate) fn int_or_percent(
    v: &Value,
    p: &str,
    max_100: bool,
    errs: &mut Vec<Cause>,
) -> Option<u64> {
    match v {
        Value::Number(n) => match n.as_i64().and_then(|n| u64::try_from(n).ok()) {
            Some(n) => Some(n),
            None => {
                errs.push(Cause::invalid_value(p, v, IS_NEGATIVE));
                None
            }
        },
        Value::String(pct) => {
            let digits = pct
                .strip_suffix('%')
                .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
            match digits.and_then(|d| d.parse::<u64>().ok()) {
                None => {
                    errs.push(Cause::invalid(
                        p,
                        pct,
                        "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
                    ));
                    None
                }
                Some(n) if max_100 && n > 100 => {
                    errs.push(Cause::invalid(p, pct, "must not be greater than 100%"));
                    None
                }
                Some(n) => Some(n),
            }
        }
        _ => None,
    }
}

/// `maxUnavailable`/`maxSurge`: non-negative ints or percentages, not both zero.
pub(crate) fn validate_rolling_update(
    ru: &Map<String, Value>,
    p: &str,
    unavailable_max_100: bool,
    errs: &mut Vec<Cause>,
) {
    let mut zero = [false, false];
    for (i, key) in ["maxUnavailable", "maxSurge"].iter().enumerate() {
        let Some(v) = field(ru, key) else {
            zero[i] = true;
            continue;
        };
        let max_100 = unavailable_max_100 && i == 0;
        zero[i] = int_or_percent(v, &format!("{p}.{key}"), max_100, errs) == Some(0);
    }
    if zero[0] && zero[1] {
        errs.push(Cause::invalid_value(
            format!("{p}.maxUnavailable"),
            field(ru, "maxUnavailable").unwrap_or(&Value::from(0)),
            "may not be 0 when `maxSurge` is 0",
        ));
    }
}

/// A PersistentVolumeClaim's spec (`ValidatePersistentVolumeClaimSpec`): access modes and
/// a storage request.
pub(crate) fn validate_claim(pvc: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    const MODES: [&str; 4] = [
        "ReadOnlyMany",
        "ReadWriteMany",
        "ReadWriteOnce",
        "ReadWriteOncePod",
    ];
    let empty = Map::new();
    let spec = obj(pvc, "spec").unwrap_or(&empty);
    let modes = arr(spec, "accessModes");
    if modes.is_empty() {
        errs.push(Cause::required_detail(
            format!("{p}.accessModes"),
            "at least 1 access mode is required",
        ));
    }
    for m in modes.iter().filter_map(Value::as_str) {
        if !MODES.contains(&m) {
            errs.push(Cause::not_supported(format!("{p}.accessModes"), m, &MODES));
        }
    }
    let storage = path(spec, &["resources", "requests", "storage"]);
    if storage.is_none() {
        errs.push(Cause::required(format!("{p}.resources[storage]")));
    }
}

/// A workload's `spec.selector` may not change (apps/v1).
pub(crate) fn selector_immutable(
    o: &Map<String, Value>,
    n: &Map<String, Value>,
    errs: &mut Vec<Cause>,
) {
    let old_sel = path(o, &["spec", "selector"]);
    let new_sel = path(n, &["spec", "selector"]);
    if strip(old_sel) != strip(new_sel) {
        errs.push(Cause::invalid_repr(
            "spec.selector",
            &go_selector(new_sel),
            IMMUTABLE,
        ));
    }
}
