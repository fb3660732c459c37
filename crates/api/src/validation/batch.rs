//! The job spec checks Jobs and CronJobs share (upstream `pkg/apis/batch/validation`): each
//! kind's own rules are in `kinds/batch/`.

use super::*;

/// Most completions or parallelism of an Indexed Job.
pub(crate) const MAX_INDEXED: i64 = 100_000;

/// `spec` of a Job, or `spec.jobTemplate.spec` of a CronJob (`with_selector` false: a
/// template's selector is generated per Job).
pub(crate) fn validate_job_spec(
    spec: &Map<String, Value>,
    p: &str,
    with_selector: bool,
    errs: &mut Vec<Cause>,
) {
    for key in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "backoffLimitPerIndex",
        "maxFailedIndexes",
        "ttlSecondsAfterFinished",
    ] {
        nonnegative(spec, key, p, errs);
    }
    let selector = obj(spec, "selector");
    if with_selector {
        match selector {
            None => errs.push(Cause::required(format!("{p}.selector"))),
            Some(sel) => validate_label_selector(sel, &format!("{p}.selector"), errs),
        }
    }
    let selector = selector.filter(|sel| !selector_is_empty(sel));
    validate_template(spec, p, selector, &["OnFailure", "Never"], None, errs);
    let mode = s(spec, "completionMode");
    match mode {
        "" | "NonIndexed" => {
            if field(spec, "backoffLimitPerIndex").is_some() {
                errs.push(Cause::forbidden(
                    format!("{p}.backoffLimitPerIndex"),
                    "requires indexed completion mode",
                ));
            }
        }
        "Indexed" => validate_indexed(spec, p, errs),
        other => errs.push(Cause::not_supported(
            format!("{p}.completionMode"),
            other,
            &["NonIndexed", "Indexed"],
        )),
    }
    if let Some(policy) = obj(spec, "podFailurePolicy") {
        validate_pod_failure_policy(spec, policy, p, errs);
    }
}

pub(crate) fn validate_indexed(spec: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    match int(spec, "completions") {
        None => errs.push(Cause::required_detail(
            format!("{p}.completions"),
            "when completion mode is Indexed",
        )),
        Some(c) if c > MAX_INDEXED => errs.push(Cause::invalid_value(
            format!("{p}.completions"),
            &Value::from(c),
            "must be less than or equal to 100000",
        )),
        Some(_) => {}
    }
    if let Some(par) = int(spec, "parallelism").filter(|&n| n > MAX_INDEXED) {
        errs.push(Cause::invalid_value(
            format!("{p}.parallelism"),
            &Value::from(par),
            "must be less than or equal to 100000",
        ));
    }
}

pub(crate) fn validate_pod_failure_policy(
    spec: &Map<String, Value>,
    policy: &Map<String, Value>,
    p: &str,
    errs: &mut Vec<Cause>,
) {
    let rp = path(spec, &["template", "spec", "restartPolicy"])
        .and_then(Value::as_str)
        .unwrap_or("");
    if rp != "Never" {
        errs.push(Cause::invalid(
            format!("{p}.template.spec.restartPolicy"),
            rp,
            "only \"Never\" is supported when podFailurePolicy is specified",
        ));
    }
    for (i, rule) in objs(policy, "rules") {
        let rp = format!("{p}.podFailurePolicy.rules[{i}]");
        require_one_of(
            errs,
            format!("{rp}.action"),
            s(rule, "action"),
            &["Count", "FailIndex", "FailJob", "Ignore"],
        );
        let codes = obj(rule, "onExitCodes");
        let conditions = field(rule, "onPodConditions").is_some();
        if codes.is_some() == conditions {
            errs.push(Cause::invalid(
                &rp,
                "",
                "specifying one of OnExitCodes and OnPodConditions is required",
            ));
        }
        if let Some(codes) = codes {
            validate_exit_codes(codes, &format!("{rp}.onExitCodes"), errs);
        }
    }
}

pub(crate) fn validate_exit_codes(codes: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    let op = s(codes, "operator");
    require_one_of(errs, format!("{p}.operator"), op, &["In", "NotIn"]);
    let values: Vec<i64> = arr(codes, "values")
        .iter()
        .filter_map(Value::as_i64)
        .collect();
    if values.is_empty() {
        errs.push(Cause::invalid(
            format!("{p}.values"),
            "[]",
            "at least one value is required",
        ));
    }
    for (j, v) in values.iter().enumerate() {
        let vp = format!("{p}.values[{j}]");
        if j > 0 && values[j - 1] >= *v {
            errs.push(Cause::invalid_value(
                &vp,
                &Value::from(*v),
                "must be ordered and unique",
            ));
        }
        if op == "In" && *v == 0 {
            errs.push(Cause::invalid_value(
                &vp,
                &Value::from(*v),
                "must not be 0 for the In operator",
            ));
        }
    }
}
