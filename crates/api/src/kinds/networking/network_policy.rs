//! NetworkPolicy (networking.k8s.io): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(default_network_policy),
    validate: Some(validate_network_policy),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::networking::v1::NetworkPolicy>,
    tracks_generation: true,
    ..Strategy::NONE
};

fn validate_network_policy(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    if let Some(sel) = obj(spec, "podSelector") {
        validate_label_selector(sel, "spec.podSelector", errs);
    }
    for (direction, peers) in [("ingress", "from"), ("egress", "to")] {
        for (i, rule) in objs(spec, direction) {
            let p = format!("spec.{direction}[{i}]");
            for (j, port) in objs(rule, "ports") {
                validate_policy_port(port, &format!("{p}.ports[{j}]"), errs);
            }
            for (j, peer) in objs(rule, peers) {
                validate_peer(peer, &format!("{p}.{peers}[{j}]"), errs);
            }
        }
    }
    let types = arr(spec, "policyTypes");
    if types.len() > 2 {
        errs.push(Cause::invalid_repr(
            "spec.policyTypes",
            "[]networking.PolicyType{...}",
            "may not specify more than two policyTypes",
        ));
    }
    for (i, t) in types.iter().enumerate() {
        let t = t.as_str().unwrap_or("");
        if !matches!(t, "Ingress" | "Egress") {
            errs.push(Cause::not_supported(
                format!("spec.policyTypes[{i}]"),
                t,
                &["Ingress", "Egress"],
            ));
        }
    }
}

fn validate_policy_port(port: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    let protocol = s(port, "protocol");
    if !matches!(protocol, "" | "TCP" | "UDP" | "SCTP") {
        errs.push(Cause::not_supported(
            format!("{p}.protocol"),
            protocol,
            &["SCTP", "TCP", "UDP"],
        ));
    }
    match field(port, "port") {
        Some(Value::Number(n)) => {
            let n = n.as_i64().unwrap_or(0);
            if !(1..=65535).contains(&n) {
                errs.push(Cause::invalid_value(
                    format!("{p}.port"),
                    &Value::from(n),
                    &port_range_error(),
                ));
            }
            if let Some(end) = int(port, "endPort") {
                if end < n {
                    errs.push(Cause::invalid_value(
                        format!("{p}.endPort"),
                        &Value::from(end),
                        "must be greater than or equal to `port`",
                    ));
                }
            }
        }
        Some(Value::String(name)) => {
            for msg in is_valid_port_name(name) {
                errs.push(Cause::invalid(format!("{p}.port"), name, &msg));
            }
            if field(port, "endPort").is_some() {
                errs.push(Cause::forbidden(
                    format!("{p}.endPort"),
                    "may not be specified when `port` is non-numeric",
                ));
            }
        }
        _ if field(port, "endPort").is_some() => {
            errs.push(Cause::required_detail(
                format!("{p}.port"),
                "must be specified when `endPort` is specified",
            ));
        }
        _ => {}
    }
}

fn validate_peer(peer: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    let selectors = ["podSelector", "namespaceSelector"];
    for key in selectors {
        if let Some(sel) = obj(peer, key) {
            validate_label_selector(sel, &format!("{p}.{key}"), errs);
        }
    }
    let has_selector = selectors.iter().any(|k| field(peer, k).is_some());
    match obj(peer, "ipBlock") {
        Some(_) if has_selector => errs.push(Cause::forbidden(
            p,
            "may not specify both ipBlock and another peer",
        )),
        Some(block) => validate_ip_block(block, &format!("{p}.ipBlock"), errs),
        None if !has_selector => errs.push(Cause::required_detail(p, "must specify a peer")),
        None => {}
    }
}

fn validate_ip_block(block: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    let cidr = s(block, "cidr");
    let Ok(net) = cidr.parse::<ipnetwork::IpNetwork>() else {
        if cidr.is_empty() {
            errs.push(Cause::required(format!("{p}.cidr")));
        } else {
            errs.push(Cause::invalid(
                format!("{p}.cidr"),
                cidr,
                "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
            ));
        }
        return;
    };
    for (i, except) in arr(block, "except").iter().enumerate() {
        let except = except.as_str().unwrap_or("");
        let ep = format!("{p}.except[{i}]");
        match except.parse::<ipnetwork::IpNetwork>() {
            Err(_) => errs.push(Cause::invalid(
                &ep,
                except,
                "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
            )),
            Ok(e) if !(net.contains(e.network()) && e.prefix() > net.prefix()) => errs.push(
                Cause::invalid(&ep, except, "must be a strict subset of `cidr`"),
            ),
            Ok(_) => {}
        }
    }
}

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col("Pod-Selector", "string", "podSelector selects the pods to which this NetworkPolicy object applies. The array of rules is applied to any pods selected by this field. An empty selector matches all pods in the policy's namespace. Multiple network policies can select the same set of pods. In this case, the ingress rules for each are combined additively. This field is NOT optional and follows standard label selector semantics. An empty podSelector matches all pods in this namespace."),
        AGE,
    ]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name,
        json!(format_label_selector(get(obj, &["spec", "podSelector"]))),
        json!(created),
    ]
}

/// `policyTypes` from the rules present, and TCP for ports without a protocol.
fn default_network_policy(o: &mut Map<String, Value>) {
    let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for direction in ["ingress", "egress"] {
        let rules = spec.get_mut(direction).and_then(Value::as_array_mut);
        for rule in rules.into_iter().flatten().filter_map(Value::as_object_mut) {
            let ports = rule.get_mut("ports").and_then(Value::as_array_mut);
            for port in ports.into_iter().flatten().filter_map(Value::as_object_mut) {
                set_default_str(port, "protocol", "TCP");
            }
        }
    }
    if is_unset(spec.get("policyTypes")) {
        let mut types = vec![json!("Ingress")];
        if spec.get("egress").is_some_and(|e| !e.is_null()) {
            types.push(json!("Egress"));
        }
        spec.insert("policyTypes".into(), Value::Array(types));
    }
}
