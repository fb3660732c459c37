//! CustomResourceDefinitions (upstream apiextensions `ValidateCustomResourceDefinition`):
//! the name, group, names, scope, versions (exactly one stored), schemas (structural, see
//! [`crate::crd::structural::check_structural`]), printer columns, subresources and
//! conversion.

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::crd::structural::check_structural;
use crate::jsonpath::JsonPath;
use crate::status::Cause;
use crate::validation::*;

pub(super) fn validate_crd(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    let names = obj(spec, "names").unwrap_or(&empty);
    let group = s(spec, "group");
    let plural = s(names, "plural");
    let name = obj(o, "metadata").map_or("", |m| s(m, "name"));
    if name != format!("{plural}.{group}") {
        errs.push(Cause::invalid(
            "metadata.name",
            name,
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    if group.is_empty() {
        errs.push(Cause::required("spec.group"));
    } else if !group.contains('.') {
        errs.push(Cause::invalid(
            "spec.group",
            group,
            "should be a domain with at least one dot",
        ));
    } else {
        for msg in is_dns1123_subdomain(group) {
            errs.push(Cause::invalid("spec.group", group, &msg));
        }
    }
    validate_crd_names(names, errs);
    match s(spec, "scope") {
        "Cluster" | "Namespaced" => {}
        "" => errs.push(Cause::required("spec.scope")),
        other => errs.push(Cause::not_supported(
            "spec.scope",
            other,
            &["Cluster", "Namespaced"],
        )),
    }
    validate_crd_versions(spec, errs);
    validate_crd_conversion(spec, errs);
}

fn validate_crd_names(names: &Map<String, Value>, errs: &mut Vec<Cause>) {
    for key in ["plural", "singular"] {
        let v = s(names, key);
        if v.is_empty() && key == "plural" {
            errs.push(Cause::required(format!("spec.names.{key}")));
        }
        for msg in is_dns1035_label(v).into_iter().filter(|_| !v.is_empty()) {
            errs.push(Cause::invalid(format!("spec.names.{key}"), v, &msg));
        }
    }
    for key in ["kind", "listKind"] {
        let v = s(names, key);
        if v.is_empty() {
            errs.push(Cause::required(format!("spec.names.{key}")));
        } else if !is_dns1035_label(&v.to_lowercase()).is_empty() {
            errs.push(Cause::invalid(
                format!("spec.names.{key}"),
                v,
                "may have mixed case, but should otherwise match: [a-z]([-a-z0-9]*[a-z0-9])?",
            ));
        }
    }
    if !s(names, "kind").is_empty() && s(names, "kind") == s(names, "listKind") {
        errs.push(Cause::invalid(
            "spec.names.listKind",
            s(names, "listKind"),
            "kind and listKind may not be the same or parsing become ambiguous",
        ));
    }
    for (i, short) in arr(names, "shortNames").iter().enumerate() {
        let short = short.as_str().unwrap_or("");
        for msg in is_dns1035_label(short) {
            errs.push(Cause::invalid(
                format!("spec.names.shortNames[{i}]"),
                short,
                &msg,
            ));
        }
    }
}

fn validate_crd_versions(spec: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let versions: Vec<(usize, &Map<String, Value>)> = objs(spec, "versions").collect();
    if versions.is_empty() {
        errs.push(Cause::required_detail(
            "spec.versions",
            "must have at least one version",
        ));
        return;
    }
    let storage = versions
        .iter()
        .filter(|(_, v)| field(v, "storage") == Some(&Value::Bool(true)))
        .count();
    if storage != 1 {
        errs.push(Cause::invalid_repr(
            "spec.versions",
            "[]apiextensions.CustomResourceDefinitionVersion{...}",
            "must have exactly one version marked as storage version",
        ));
    }
    if !versions
        .iter()
        .any(|(_, v)| field(v, "served") == Some(&Value::Bool(true)))
    {
        errs.push(Cause::invalid_repr(
            "spec.versions",
            "[]apiextensions.CustomResourceDefinitionVersion{...}",
            "must have at least one version marked as served",
        ));
    }
    let mut seen = HashSet::new();
    for (i, v) in versions {
        let p = format!("spec.versions[{i}]");
        let name = s(v, "name");
        if name.is_empty() {
            errs.push(Cause::required(format!("{p}.name")));
        }
        for msg in is_dns1035_label(name)
            .into_iter()
            .filter(|_| !name.is_empty())
        {
            errs.push(Cause::invalid(format!("{p}.name"), name, &msg));
        }
        if !seen.insert(name) {
            errs.push(Cause::duplicate(format!("{p}.name"), name));
        }
        match path(v, &["schema", "openAPIV3Schema"]) {
            Some(schema) => errs.extend(check_structural(
                schema,
                &format!("{p}.schema.openAPIV3Schema"),
            )),
            None => errs.push(Cause::required(format!("{p}.schema.openAPIV3Schema"))),
        }
        for (j, c) in objs(v, "additionalPrinterColumns") {
            validate_printer_column(c, &format!("{p}.additionalPrinterColumns[{j}]"), errs);
        }
        if let Some(scale) = path(v, &["subresources", "scale"]).and_then(Value::as_object) {
            validate_scale(scale, &format!("{p}.subresources.scale"), errs);
        }
    }
}

const COLUMN_TYPES: &[&str] = &["boolean", "date", "integer", "number", "string"];

fn validate_printer_column(c: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    if s(c, "name").is_empty() {
        errs.push(Cause::required(format!("{p}.name")));
    }
    let ty = s(c, "type");
    if ty.is_empty() {
        errs.push(Cause::required(format!("{p}.type")));
    } else if !COLUMN_TYPES.contains(&ty) {
        errs.push(Cause::not_supported(format!("{p}.type"), ty, COLUMN_TYPES));
    }
    let path_text = s(c, "jsonPath");
    if path_text.is_empty() {
        errs.push(Cause::required(format!("{p}.jsonPath")));
    } else if JsonPath::parse(path_text).is_err() {
        errs.push(Cause::invalid(
            format!("{p}.jsonPath"),
            path_text,
            "must be a simple json path",
        ));
    }
}

fn validate_scale(scale: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    let spec_path = s(scale, "specReplicasPath");
    if spec_path.is_empty() {
        errs.push(Cause::required(format!("{p}.specReplicasPath")));
    } else if !spec_path.starts_with(".spec.") {
        errs.push(Cause::invalid(
            format!("{p}.specReplicasPath"),
            spec_path,
            "should be a json path under .spec",
        ));
    }
    let status_path = s(scale, "statusReplicasPath");
    if status_path.is_empty() {
        errs.push(Cause::required(format!("{p}.statusReplicasPath")));
    } else if !status_path.starts_with(".status.") {
        errs.push(Cause::invalid(
            format!("{p}.statusReplicasPath"),
            status_path,
            "should be a json path under .status",
        ));
    }
}

fn validate_crd_conversion(spec: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let Some(conversion) = obj(spec, "conversion") else {
        return;
    };
    match s(conversion, "strategy") {
        "None" | "" => {
            if field(conversion, "webhook").is_some() {
                errs.push(Cause::forbidden(
                    "spec.conversion.webhook",
                    "should not be set when strategy is not set to Webhook",
                ));
            }
        }
        "Webhook" => {
            let webhook = obj(conversion, "webhook");
            if webhook.and_then(|w| obj(w, "clientConfig")).is_none() {
                errs.push(Cause::required_detail(
                    "spec.conversion.webhook",
                    "required when strategy is set to Webhook",
                ));
            }
            if webhook.is_some_and(|w| arr(w, "conversionReviewVersions").is_empty()) {
                errs.push(Cause::required_detail(
                    "spec.conversion.webhook.conversionReviewVersions",
                    "must include at least one of v1, v1beta1",
                ));
            }
        }
        other => errs.push(Cause::not_supported(
            "spec.conversion.strategy",
            other,
            &["None", "Webhook"],
        )),
    }
}

/// The scope never changes, and every version objects were stored in stays listed.
pub(super) fn validate_crd_update(
    o: &Map<String, Value>,
    n: &Map<String, Value>,
    errs: &mut Vec<Cause>,
) {
    let scope = |m: &Map<String, Value>| obj(m, "spec").map(|s| s.get("scope").cloned());
    if scope(o) != scope(n) {
        let value = scope(n).flatten().unwrap_or(Value::Null);
        errs.push(Cause::invalid_value("spec.scope", &value, IMMUTABLE));
    }
    let empty = Map::new();
    let spec = obj(n, "spec").unwrap_or(&empty);
    let names: Vec<&str> = objs(spec, "versions").map(|(_, v)| s(v, "name")).collect();
    let stored = obj(o, "status")
        .map(|st| arr(st, "storedVersions"))
        .unwrap_or(&[]);
    for (i, v) in stored.iter().enumerate() {
        let v = v.as_str().unwrap_or("");
        if !names.contains(&v) {
            errs.push(Cause::invalid(
                format!("status.storedVersions[{i}]"),
                v,
                "must appear in spec.versions",
            ));
        }
    }
}
