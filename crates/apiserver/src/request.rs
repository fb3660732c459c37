//! Parsing of what a request asks for: the resource path, query parameters, the media
//! type to answer with, and the body.

use std::collections::BTreeMap;

use bytes::Bytes;
use cairn_api::registry::ResourceInfo;
use cairn_api::status::Status;
use serde_json::Value;

/// Largest request body accepted (Kubernetes' limit is 3 MiB).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// A request for a resource, a collection, or a subresource.
#[derive(Debug, Clone)]
pub struct ResourcePath {
    pub resource: &'static ResourceInfo,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

/// Sub-paths of `namespaces/{name}` that are subresources of the namespace, not resources in it.
const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];

/// Parses `/api/v1/...` and `/apis/{group}/{version}/...` resource paths.
/// `Ok(None)` means the path is not a resource path at all (discovery and the like).
pub fn parse_resource_path(
    path: &str,
    find: impl Fn(&str, &str, &str) -> Option<&'static ResourceInfo>,
) -> Result<Option<ResourcePath>, Status> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match parts.as_slice() {
        ["api", version, rest @ ..] if !rest.is_empty() => ("", *version, rest),
        ["apis", group, version, rest @ ..] if !rest.is_empty() => (*group, *version, rest),
        _ => return Ok(None),
    };
    let mut rest: Vec<&str> = rest.to_vec();
    let mut namespace = None;
    if rest.first() == Some(&"namespaces")
        && rest.len() > 2
        && !NAMESPACE_SUBRESOURCES.contains(&rest[2])
    {
        namespace = Some(rest[1].to_string());
        rest.drain(..2);
    }
    let plural = rest[0];
    let resource = find(group, version, plural).ok_or_else(|| {
        Status::not_found_plain(&format!(
            "the server could not find the requested resource ({plural}{})",
            if group.is_empty() {
                String::new()
            } else {
                format!(".{group}")
            }
        ))
    })?;
    if namespace.is_some() && !resource.namespaced {
        return Err(Status::not_found_plain(
            "the server could not find the requested resource",
        ));
    }
    let name = rest.get(1).map(|s| s.to_string());
    let subresource = rest.get(2).map(|s| s.to_string());
    if rest.len() > 3 {
        return Err(Status::not_found_plain(
            "the server could not find the requested resource",
        ));
    }
    if let Some(sub) = &subresource {
        if resource.subresource(sub).is_none() {
            return Err(Status::not_found_plain(&format!(
                "the server could not find the requested resource ({}/{sub})",
                resource.plural
            )));
        }
    }
    if let Some(n) = &name {
        if n.is_empty() {
            return Err(Status::not_found_plain("resource name may not be empty"));
        }
    }
    Ok(Some(ResourcePath {
        resource,
        namespace,
        name,
        subresource,
    }))
}

/// Helpers that `Status` lacks for path errors.
pub trait StatusExt {
    fn not_found_plain(message: &str) -> Status;
}

impl StatusExt for Status {
    fn not_found_plain(message: &str) -> Status {
        Status::new(404, "NotFound", message)
    }
}

/// Decoded query string; repeated keys keep every value.
#[derive(Debug, Default, Clone)]
pub struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    pub fn parse(raw: Option<&str>) -> Query {
        let mut pairs = Vec::new();
        for part in raw.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').unwrap_or((part, ""));
            pairs.push((decode_component(k), decode_component(v)));
        }
        Query { pairs }
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of a repeated parameter, in order.
    pub fn all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.pairs
            .iter()
            .filter(move |(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// A boolean parameter, parsed like Go's strconv.ParseBool (clients send `true`,
    /// `True`, `1`...); a bare key counts as true.
    pub fn flag(&self, key: &str) -> bool {
        matches!(
            self.get(key),
            Some("true" | "True" | "TRUE" | "t" | "T" | "1" | "")
        )
    }

    pub fn int(&self, key: &str) -> Result<Option<i64>, Status> {
        match self.get(key) {
            None | Some("") => Ok(None),
            Some(v) => v.parse::<i64>().map(Some).map_err(|_| {
                Status::bad_request(format!("invalid value for query parameter {key}: {v:?}"))
            }),
        }
    }
}

fn decode_component(s: &str) -> String {
    let plus_decoded = s.replace('+', " ");
    percent_encoding::percent_decode_str(&plus_decoded)
        .decode_utf8_lossy()
        .into_owned()
}

/// What representation the client wants back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Representation {
    /// Plain objects and lists.
    Object,
    /// `meta.k8s.io/v1` Table.
    Table,
    /// `meta.k8s.io/v1` PartialObjectMetadata / PartialObjectMetadataList.
    PartialMetadata,
}

/// Parses one media range of an Accept header into its type and parameters.
fn media_range(s: &str) -> (String, BTreeMap<String, String>) {
    let mut pieces = s.split(';');
    let ty = pieces.next().unwrap_or("").trim().to_ascii_lowercase();
    let mut params = BTreeMap::new();
    for p in pieces {
        if let Some((k, v)) = p.split_once('=') {
            params.insert(
                k.trim().to_ascii_lowercase(),
                v.trim().trim_matches('"').to_string(),
            );
        }
    }
    (ty, params)
}

/// Picks the representation from the Accept header: the first media range we can serve.
/// We answer JSON only; protobuf-only clients get 406.
pub fn negotiate(accept: Option<&str>) -> Result<Representation, Status> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Ok(Representation::Object);
    };
    for range in accept.split(',') {
        let (ty, params) = media_range(range);
        if ty != "application/json"
            && ty != "*/*"
            && ty != "application/*"
            && ty != "application/yaml"
        {
            continue;
        }
        match (
            params.get("as").map(String::as_str),
            params.get("g").map(String::as_str),
        ) {
            (None, _) => return Ok(Representation::Object),
            (Some("Table"), Some("meta.k8s.io")) => return Ok(Representation::Table),
            (
                Some("PartialObjectMetadata") | Some("PartialObjectMetadataList"),
                Some("meta.k8s.io"),
            ) => return Ok(Representation::PartialMetadata),
            _ => continue,
        }
    }
    Err(Status::not_acceptable(format!(
        "only the following media types are accepted: application/json, application/json;as=Table;v=v1;g=meta.k8s.io (asked for {accept:?})"
    )))
}

/// The aggregated discovery version the client asked for, if any (`v2` or `v2beta1`),
/// honouring the order of the Accept header.
pub fn aggregated_discovery_version(accept: Option<&str>) -> Option<&'static str> {
    for range in accept?.split(',') {
        let (ty, params) = media_range(range);
        if ty != "application/json" {
            continue;
        }
        let is_discovery = params.get("g").map(String::as_str) == Some("apidiscovery.k8s.io")
            && params.get("as").map(String::as_str) == Some("APIGroupDiscoveryList");
        if !is_discovery {
            // Plain JSON first in the list: the client prefers legacy discovery.
            if !params.contains_key("as") {
                return None;
            }
            continue;
        }
        match params.get("v").map(String::as_str) {
            Some("v2") => return Some("v2"),
            Some("v2beta1") => return Some("v2beta1"),
            _ => continue,
        }
    }
    None
}

/// The body formats we decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFormat {
    Json,
    Yaml,
    Protobuf,
}

/// Decodes a request body into JSON, whatever format it came in.
pub fn decode_body(content_type: Option<&str>, body: &Bytes) -> Result<Value, Status> {
    let format = body_format(content_type)?;
    decode_as(format, body)
}

/// The media type of a `Content-Type` value, lower-cased and without parameters.
pub fn media_type(content_type: Option<&str>) -> String {
    content_type
        .map(|c| {
            c.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default()
}

pub fn body_format(content_type: Option<&str>) -> Result<BodyFormat, Status> {
    let ty = media_type(content_type);
    match ty.as_str() {
        ""
        | "application/json"
        | "application/merge-patch+json"
        | "application/strategic-merge-patch+json"
        | "application/json-patch+json"
        | "*/*" => Ok(BodyFormat::Json),
        "application/yaml"
        | "application/apply-patch+yaml"
        | "application/x-yaml"
        | "text/yaml" => Ok(BodyFormat::Yaml),
        "application/vnd.kubernetes.protobuf" => Ok(BodyFormat::Protobuf),
        _ => Err(Status::unsupported_media_type(content_type.unwrap_or(""))),
    }
}

pub fn decode_as(format: BodyFormat, body: &Bytes) -> Result<Value, Status> {
    match format {
        BodyFormat::Json => serde_json::from_slice(body)
            .map_err(|e| Status::bad_request(format!("error decoding request body as JSON: {e}"))),
        BodyFormat::Yaml => {
            // JSON is YAML; try the strict parser first for precise error messages.
            if let Ok(v) = serde_json::from_slice::<Value>(body) {
                return Ok(v);
            }
            let v: serde_yaml::Value = serde_yaml::from_slice(body).map_err(|e| {
                Status::bad_request(format!("error decoding request body as YAML: {e}"))
            })?;
            serde_json::to_value(v).map_err(|e| {
                Status::bad_request(format!("error converting YAML request body to JSON: {e}"))
            })
        }
        BodyFormat::Protobuf => cairn_proto::decode_object(body).map_err(|e| match e {
            cairn_proto::ProtoError::UnsupportedKind { .. }
            | cairn_proto::ProtoError::UnsupportedField { .. }
            | cairn_proto::ProtoError::UnsupportedEncoding { .. } => Status::new(
                415,
                "UnsupportedMediaType",
                format!("{e}; send this object as application/json"),
            ),
            other => Status::bad_request(format!("error decoding protobuf request body: {other}")),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_api::registry;

    #[test]
    fn resource_paths() {
        let p = parse_resource_path("/api/v1/namespaces/default/pods/web/status", registry::find)
            .unwrap()
            .unwrap();
        assert_eq!(p.resource.plural, "pods");
        assert_eq!(p.namespace.as_deref(), Some("default"));
        assert_eq!(p.name.as_deref(), Some("web"));
        assert_eq!(p.subresource.as_deref(), Some("status"));

        let p = parse_resource_path("/api/v1/namespaces/kube-system", registry::find)
            .unwrap()
            .unwrap();
        assert_eq!(p.resource.plural, "namespaces");
        assert_eq!(p.name.as_deref(), Some("kube-system"));

        let p = parse_resource_path("/api/v1/namespaces/kube-system/status", registry::find)
            .unwrap()
            .unwrap();
        assert_eq!(p.resource.plural, "namespaces");
        assert_eq!(p.subresource.as_deref(), Some("status"));

        let p = parse_resource_path("/apis/apps/v1/deployments", registry::find)
            .unwrap()
            .unwrap();
        assert!(p.namespace.is_none() && p.name.is_none());

        assert!(parse_resource_path("/api/v1", registry::find)
            .unwrap()
            .is_none());
        assert_eq!(
            parse_resource_path("/api/v1/widgets", registry::find)
                .unwrap_err()
                .code,
            404
        );
        assert_eq!(
            parse_resource_path("/api/v1/namespaces/a/nodes", registry::find)
                .unwrap_err()
                .code,
            404
        );
        assert_eq!(
            parse_resource_path("/api/v1/namespaces/a/pods/b/nope", registry::find)
                .unwrap_err()
                .code,
            404
        );
    }

    #[test]
    fn accept_negotiation() {
        let kubectl_get = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(negotiate(Some(kubectl_get)).unwrap(), Representation::Table);
        assert_eq!(
            negotiate(Some("application/json")).unwrap(),
            Representation::Object
        );
        assert_eq!(negotiate(None).unwrap(), Representation::Object);
        assert_eq!(
            negotiate(Some("application/vnd.kubernetes.protobuf"))
                .unwrap_err()
                .code,
            406
        );
        assert_eq!(
            negotiate(Some("application/vnd.kubernetes.protobuf, */*")).unwrap(),
            Representation::Object
        );
    }

    #[test]
    fn discovery_negotiation() {
        let v133 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(aggregated_discovery_version(Some(v133)), Some("v2"));
        let v127 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(aggregated_discovery_version(Some(v127)), Some("v2beta1"));
        assert_eq!(aggregated_discovery_version(Some("application/json")), None);
    }

    #[test]
    fn query_decoding() {
        let q = Query::parse(Some(
            "labelSelector=app%3Dweb&fieldSelector=metadata.name%3Dx&watch=true&limit=5",
        ));
        assert_eq!(q.get("labelSelector"), Some("app=web"));
        assert!(q.flag("watch"));
        assert!(Query::parse(Some("watch=True")).flag("watch"));
        assert!(!Query::parse(Some("watch=false")).flag("watch"));
        assert_eq!(q.int("limit").unwrap(), Some(5));
        assert_eq!(q.int("labelSelector").unwrap_err().code, 400);
    }

    #[test]
    fn bodies() {
        let v = decode_body(
            Some("application/yaml"),
            &Bytes::from_static(b"a: 1\nb: [x]\n"),
        )
        .unwrap();
        assert_eq!(v["a"], 1);
        assert_eq!(
            decode_body(Some("application/json"), &Bytes::from_static(b"{"))
                .unwrap_err()
                .code,
            400
        );
        assert_eq!(
            decode_body(Some("text/html"), &Bytes::from_static(b"{}"))
                .unwrap_err()
                .code,
            415
        );
    }
}
