//! LimitRanges (upstream `ValidateLimitRange`): per item and resource, min ≤ default
//! request ≤ default ≤ max, a max limit/request ratio of at least 1 that min and max allow,
//! and no defaults for `Pod` items.

use std::collections::BTreeMap;

use cairn_apimachinery::quantity;
use serde_json::{Map, Value};

use crate::status::Cause;
use crate::validation::*;

/// A quantity's text and its value in nano-units.
fn quantity(v: &Value) -> Option<(String, i128)> {
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    let nanos = quantity::nanos(&text)?;
    Some((text, nanos))
}

type Quantities = BTreeMap<String, (String, i128)>;

fn quantities(item: &Map<String, Value>, key: &str) -> Quantities {
    obj(item, key)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), quantity(v)?)))
        .collect()
}

pub(super) fn validate_limit_range(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    for (i, item) in objs(spec, "limits") {
        let p = format!("spec.limits[{i}]");
        let limit_type = s(item, "type");
        if limit_type.is_empty() {
            errs.push(Cause::required(format!("{p}.type")));
        }
        if limit_type == "Pod" {
            for key in ["default", "defaultRequest"] {
                if field(item, key).is_some() {
                    errs.push(Cause::forbidden(
                        format!("{p}.{key}"),
                        "may not be specified when `type` is 'Pod'",
                    ));
                }
            }
        }
        validate_item(item, &p, errs);
    }
}

/// One pair check: `low` of `low_key` must not exceed `high`.
struct Order<'a> {
    field: &'a str,
    blame_low: bool,
    message: &'a str,
}

fn validate_item(item: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    let (min, max) = (quantities(item, "min"), quantities(item, "max"));
    let (default, request) = (
        quantities(item, "default"),
        quantities(item, "defaultRequest"),
    );
    let ratio = quantities(item, "maxLimitRequestRatio");
    let keys: std::collections::BTreeSet<&String> = min
        .keys()
        .chain(max.keys())
        .chain(default.keys())
        .chain(request.keys())
        .chain(ratio.keys())
        .collect();
    for k in keys {
        let pairs: [(&Quantities, &Quantities, Order); 6] = [
            (
                &min,
                &max,
                Order {
                    field: "min",
                    blame_low: true,
                    message: "min value {low} is greater than max value {high}",
                },
            ),
            (
                &min,
                &request,
                Order {
                    field: "defaultRequest",
                    blame_low: false,
                    message: "min value {low} is greater than default request value {high}",
                },
            ),
            (
                &request,
                &max,
                Order {
                    field: "defaultRequest",
                    blame_low: true,
                    message: "default request value {low} is greater than max value {high}",
                },
            ),
            (
                &request,
                &default,
                Order {
                    field: "defaultRequest",
                    blame_low: true,
                    message:
                        "default request value {low} is greater than default limit value {high}",
                },
            ),
            (
                &min,
                &default,
                Order {
                    field: "default",
                    blame_low: false,
                    message: "min value {low} is greater than default value {high}",
                },
            ),
            (
                &default,
                &max,
                Order {
                    field: "default",
                    blame_low: true,
                    message: "default value {low} is greater than max value {high}",
                },
            ),
        ];
        for (lows, highs, order) in pairs {
            let (Some(low), Some(high)) = (lows.get(k), highs.get(k)) else {
                continue;
            };
            if low.1 > high.1 {
                let blamed = if order.blame_low { &low.0 } else { &high.0 };
                let message = order
                    .message
                    .replace("{low}", &low.0)
                    .replace("{high}", &high.0);
                errs.push(Cause::invalid(
                    format!("{p}.{}[{k}]", order.field),
                    blamed,
                    &message,
                ));
            }
        }
        if let Some(r) = ratio.get(k) {
            validate_ratio(p, k, r, min.get(k), max.get(k), errs);
        }
    }
}

fn validate_ratio(
    p: &str,
    k: &str,
    ratio: &(String, i128),
    min: Option<&(String, i128)>,
    max: Option<&(String, i128)>,
    errs: &mut Vec<Cause>,
) {
    let path = format!("{p}.maxLimitRequestRatio[{k}]");
    if ratio.1 < 1_000_000_000 {
        errs.push(Cause::invalid(
            &path,
            &ratio.0,
            &format!("ratio {} is less than 1", ratio.0),
        ));
        return;
    }
    if let (Some(min), Some(max)) = (min, max) {
        if min.1 > 0 {
            let limit = max.1 as f64 / min.1 as f64;
            if ratio.1 as f64 / 1e9 > limit {
                errs.push(Cause::invalid(
                    &path,
                    &ratio.0,
                    &format!("ratio {} is greater than max/min = {limit:.6}", ratio.0),
                ));
            }
        }
    }
}
