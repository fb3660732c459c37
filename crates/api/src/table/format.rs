//! Cell formatting shared by the tables: labels, selectors, endpoints, ports.

use super::*;

pub(crate) fn or_unset(s: &str) -> &str {
    if s.is_empty() {
        "<unset>"
    } else {
        s
    }
}

/// `layoutContainerCells`: container names and images of the pod template, comma-joined.
pub(crate) fn container_cells(obj: &Value) -> (String, String) {
    let containers = get_arr(obj, &["spec", "template", "spec", "containers"]);
    let names: Vec<&str> = containers.iter().map(|c| get_str(c, &["name"])).collect();
    let images: Vec<&str> = containers.iter().map(|c| get_str(c, &["image"])).collect();
    (names.join(","), images.join(","))
}

/// `labels.FormatLabels`: `k=v,k2=v2` sorted, `<none>` when empty.
pub(crate) fn format_labels(labels: Option<&Value>) -> String {
    let map: BTreeMap<&str, &str> = labels
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.as_str(), v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    if map.is_empty() {
        return "<none>".to_string();
    }
    map.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// `LabelSelectorAsSelector(...).String()`: requirements sorted by key; `None` when invalid.
pub(crate) fn selector_string(selector: Option<&Value>) -> Option<String> {
    let Some(sel) = selector else {
        return Some(String::new());
    };
    let sel = sel.as_object()?;
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(labels) = sel.get("matchLabels").filter(|v| !v.is_null()) {
        for (k, v) in labels.as_object()? {
            reqs.push((k.clone(), format!("{k}={}", v.as_str()?)));
        }
    }
    if let Some(exprs) = sel.get("matchExpressions").filter(|v| !v.is_null()) {
        for e in exprs.as_array()? {
            let key = e.get("key").and_then(Value::as_str)?;
            let mut values: Vec<&str> = match e.get("values") {
                Some(Value::Array(vs)) => vs.iter().map(Value::as_str).collect::<Option<_>>()?,
                None | Some(Value::Null) => Vec::new(),
                Some(_) => return None,
            };
            values.sort_unstable();
            let text = match e.get("operator").and_then(Value::as_str)? {
                "In" if !values.is_empty() => format!("{key} in ({})", values.join(",")),
                "NotIn" if !values.is_empty() => format!("{key} notin ({})", values.join(",")),
                "Exists" if values.is_empty() => key.to_string(),
                "DoesNotExist" if values.is_empty() => format!("!{key}"),
                _ => return None,
            };
            reqs.push((key.to_string(), text));
        }
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    Some(
        reqs.into_iter()
            .map(|(_, t)| t)
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// `metav1.FormatLabelSelector`: `<none>` when empty, `<error>` when invalid.
pub(crate) fn format_label_selector(selector: Option<&Value>) -> String {
    match selector_string(selector) {
        Some(s) if s.is_empty() => "<none>".to_string(),
        Some(s) => s,
        None => "<error>".to_string(),
    }
}

/// `formatEndpoints`: up to three `ip:port`, then ` + N more...`.
pub(crate) fn format_endpoints(ep: &Value) -> String {
    let subsets = get_arr(ep, &["subsets"]);
    if subsets.is_empty() {
        return "<none>".to_string();
    }
    const MAX: usize = 3;
    let mut list: Vec<String> = Vec::new();
    let mut more = false;
    let mut count = 0;
    for ss in subsets {
        let addresses = get_arr(ss, &["addresses"]);
        let ports = get_arr(ss, &["ports"]);
        if ports.is_empty() {
            count += addresses.len();
            for a in addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(get_str(a, &["ip"]).to_string());
            }
            continue;
        }
        for port in ports {
            count += addresses.len();
            for a in addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                let ip = get_str(a, &["ip"]);
                let p = get_int(port, &["port"]);
                // net.JoinHostPort brackets IPv6 addresses.
                list.push(if ip.contains(':') {
                    format!("[{ip}]:{p}")
                } else {
                    format!("{ip}:{p}")
                });
            }
        }
    }
    let ret = list.join(",");
    if more {
        format!("{ret} + {} more...", count.saturating_sub(MAX))
    } else {
        ret
    }
}

pub(crate) fn list_with_more(list: Vec<String>, more: bool, count: usize, max: usize) -> String {
    let ret = list.join(",");
    if more {
        return format!("{ret} + {} more...", count.saturating_sub(max));
    }
    if ret.is_empty() {
        return "<unset>".to_string();
    }
    ret
}

pub(crate) fn format_discovery_ports(slice: &Value) -> String {
    const MAX: usize = 3;
    let mut list = Vec::new();
    let mut more = false;
    let ports = get_arr(slice, &["ports"]);
    for p in ports {
        if list.len() < MAX {
            let text = match get(p, &["port"]).and_then(Value::as_i64) {
                Some(n) => n.to_string(),
                None => match get(p, &["name"]).and_then(Value::as_str) {
                    Some(name) => name.to_string(),
                    None => "*".to_string(),
                },
            };
            list.push(text);
        } else if list.len() == MAX {
            more = true;
        }
    }
    list_with_more(list, more, ports.len(), MAX)
}

pub(crate) fn format_discovery_endpoints(slice: &Value) -> String {
    const MAX: usize = 3;
    let mut list = Vec::new();
    let mut more = false;
    let mut count = 0;
    for ep in get_arr(slice, &["endpoints"]) {
        for a in get_arr(ep, &["addresses"]) {
            if list.len() < MAX {
                list.push(a.as_str().unwrap_or("").to_string());
            } else if list.len() == MAX {
                more = true;
            }
            count += 1;
        }
    }
    list_with_more(list, more, count, MAX)
}

/// Access modes as kubectl abbreviates them: `RWO,ROX,RWX,RWOP`.
pub(crate) fn access_modes(modes: &[Value]) -> String {
    let short: Vec<&str> = modes
        .iter()
        .filter_map(Value::as_str)
        .map(|m| match m {
            "ReadWriteOnce" => "RWO",
            "ReadOnlyMany" => "ROX",
            "ReadWriteMany" => "RWX",
            "ReadWriteOncePod" => "RWOP",
            other => other,
        })
        .collect();
    short.join(",")
}
