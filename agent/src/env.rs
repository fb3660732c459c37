//! Container environment as the kubelet builds it: service links, envFrom, env with
//! valueFrom (fieldRef, resourceFieldRef, configMapKeyRef, secretKeyRef) and `$(VAR)`
//! expansion.

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::{
    ConfigMap, Container, PersistentVolume, PersistentVolumeClaim, Pod, Secret, Service,
};
use kube::api::Api;

#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    #[error("configmap {namespace}/{name} not found")]
    ConfigMapNotFound { namespace: String, name: String },
    #[error("secret {namespace}/{name} not found")]
    SecretNotFound { namespace: String, name: String },
    #[error("couldn't find key {key} in {kind} {namespace}/{name}")]
    KeyNotFound {
        kind: &'static str,
        namespace: String,
        name: String,
        key: String,
    },
    #[error("unsupported fieldPath {0:?}")]
    FieldPath(String),
    #[error(transparent)]
    Token(#[from] crate::sa_tokens::TokenError),
    #[error("serviceaccount tokens are not available to this agent")]
    NoTokens,
    #[error("reading {kind} {namespace}/{name}: {source}")]
    Api {
        kind: &'static str,
        namespace: String,
        name: String,
        source: Box<kube::Error>,
    },
}

/// Reads ConfigMaps and Secrets of the pod's namespace (a seam for tests).
#[async_trait::async_trait]
pub trait ConfigSource: Send + Sync {
    async fn config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<BTreeMap<String, Vec<u8>>>, EnvError>;
    async fn secret(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<BTreeMap<String, Vec<u8>>>, EnvError>;
    /// A token of the pod's ServiceAccount for a projected volume.
    async fn service_account_token(
        &self,
        _ask: &crate::sa_tokens::TokenAsk,
    ) -> Result<crate::sa_tokens::IssuedToken, EnvError> {
        Err(EnvError::NoTokens)
    }
    /// The pod with this UID is gone: forget what was fetched for it.
    fn forget_pod(&self, _pod_uid: &str) {}
    /// Where a bound claim's volume lives on this node; `Err` with why when it cannot be
    /// used yet (unbound, missing, not a local or hostPath volume).
    async fn claim_path(&self, namespace: &str, claim: &str) -> Result<PathBuf, String> {
        Err(format!(
            "persistentvolumeclaim \"{namespace}/{claim}\" cannot be resolved here"
        ))
    }
}

/// The API's ConfigMaps, Secrets, claims and tokens, read with the node's credentials.
pub struct ApiConfigSource {
    client: kube::Client,
    tokens: crate::sa_tokens::TokenManager,
}

impl ApiConfigSource {
    pub fn new(client: kube::Client) -> ApiConfigSource {
        ApiConfigSource {
            tokens: crate::sa_tokens::TokenManager::new(client.clone()),
            client,
        }
    }
}

#[async_trait::async_trait]
impl ConfigSource for ApiConfigSource {
    async fn service_account_token(
        &self,
        ask: &crate::sa_tokens::TokenAsk,
    ) -> Result<crate::sa_tokens::IssuedToken, EnvError> {
        Ok(self.tokens.token(ask).await?)
    }

    fn forget_pod(&self, pod_uid: &str) {
        self.tokens.forget_pod(pod_uid);
    }

    async fn claim_path(&self, namespace: &str, claim: &str) -> Result<PathBuf, String> {
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), namespace);
        let pvc = match claims.get_opt(claim).await {
            Ok(Some(c)) => c,
            Ok(None) => return Err(format!("persistentvolumeclaim \"{claim}\" not found")),
            Err(e) => return Err(format!("reading persistentvolumeclaim \"{claim}\": {e}")),
        };
        let bound = pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
        let volume = pvc
            .spec
            .and_then(|s| s.volume_name)
            .filter(|v| !v.is_empty() && bound);
        let Some(volume) = volume else {
            return Err(format!("persistentvolumeclaim \"{claim}\" is not bound"));
        };
        let volumes: Api<PersistentVolume> = Api::all(self.client.clone());
        let pv = match volumes.get_opt(&volume).await {
            Ok(Some(v)) => v,
            Ok(None) => return Err(format!("persistentvolume \"{volume}\" not found")),
            Err(e) => return Err(format!("reading persistentvolume \"{volume}\": {e}")),
        };
        let spec = pv.spec.unwrap_or_default();
        let path = spec
            .local
            .map(|l| l.path)
            .or(spec.host_path.map(|h| h.path))
            .ok_or_else(|| {
                format!("persistentvolume \"{volume}\" is neither a local nor a hostPath volume")
            })?;
        let path = PathBuf::from(path);
        if !path.is_dir() {
            return Err(format!(
                "persistentvolume \"{volume}\": {} is not a directory on this node",
                path.display()
            ));
        }
        Ok(path)
    }

    async fn config_map(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<BTreeMap<String, Vec<u8>>>, EnvError> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
        match api.get_opt(name).await {
            Ok(Some(cm)) => {
                let mut out: BTreeMap<String, Vec<u8>> = cm
                    .data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.into_bytes()))
                    .collect();
                for (k, v) in cm.binary_data.unwrap_or_default() {
                    out.insert(k, v.0);
                }
                Ok(Some(out))
            }
            Ok(None) => Ok(None),
            Err(source) => Err(EnvError::Api {
                kind: "configmap",
                namespace: namespace.into(),
                name: name.into(),
                source: Box::new(source),
            }),
        }
    }

    async fn secret(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<BTreeMap<String, Vec<u8>>>, EnvError> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        match api.get_opt(name).await {
            Ok(Some(s)) => {
                let mut out: BTreeMap<String, Vec<u8>> = s
                    .data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.0))
                    .collect();
                for (k, v) in s.string_data.unwrap_or_default() {
                    out.insert(k, v.into_bytes());
                }
                Ok(Some(out))
            }
            Ok(None) => Ok(None),
            Err(source) => Err(EnvError::Api {
                kind: "secret",
                namespace: namespace.into(),
                name: name.into(),
                source: Box::new(source),
            }),
        }
    }
}

/// `{NAME}_SERVICE_HOST` & co. for the services visible to the pod (docker-links style).
pub fn service_env(pod: &Pod, services: &[Service]) -> Vec<(String, String)> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let links = pod
        .spec
        .as_ref()
        .and_then(|s| s.enable_service_links)
        .unwrap_or(true);
    let mut chosen: BTreeMap<String, &Service> = BTreeMap::new();
    for svc in services {
        let svc_ns = svc.metadata.namespace.as_deref().unwrap_or("default");
        let name = svc.metadata.name.clone().unwrap_or_default();
        let ip = svc
            .spec
            .as_ref()
            .and_then(|s| s.cluster_ip.as_deref())
            .unwrap_or("");
        if ip.is_empty() || ip == "None" {
            continue;
        }
        let is_master = svc_ns == "default" && name == "kubernetes";
        if (svc_ns == ns && links) || is_master {
            // Same-namespace services win over the master service of the same name.
            if svc_ns == ns || !chosen.contains_key(&name) {
                chosen.insert(name, svc);
            }
        }
    }
    let mut out = Vec::new();
    for (name, svc) in chosen {
        let prefix = name.to_ascii_uppercase().replace('-', "_");
        let spec = match &svc.spec {
            Some(s) => s,
            None => continue,
        };
        let ip = spec.cluster_ip.clone().unwrap_or_default();
        let ports = spec.ports.clone().unwrap_or_default();
        let Some(first) = ports.first() else { continue };
        out.push((format!("{prefix}_SERVICE_HOST"), ip.clone()));
        out.push((format!("{prefix}_SERVICE_PORT"), first.port.to_string()));
        for p in &ports {
            if let Some(pn) = &p.name {
                out.push((
                    format!(
                        "{prefix}_SERVICE_PORT_{}",
                        pn.to_ascii_uppercase().replace('-', "_")
                    ),
                    p.port.to_string(),
                ));
            }
        }
        let proto = first.protocol.clone().unwrap_or_else(|| "TCP".into());
        out.push((
            format!("{prefix}_PORT"),
            format!("{}://{ip}:{}", proto.to_ascii_lowercase(), first.port),
        ));
        for p in &ports {
            let proto = p.protocol.clone().unwrap_or_else(|| "TCP".into());
            let base = format!("{prefix}_PORT_{}_{}", p.port, proto.to_ascii_uppercase());
            out.push((
                base.clone(),
                format!("{}://{ip}:{}", proto.to_ascii_lowercase(), p.port),
            ));
            out.push((format!("{base}_PROTO"), proto.to_ascii_lowercase()));
            out.push((format!("{base}_PORT"), p.port.to_string()));
            out.push((format!("{base}_ADDR"), ip.clone()));
        }
    }
    out
}

/// A pod field for `fieldRef` (env and downward API volumes).
pub fn pod_field(
    pod: &Pod,
    path: &str,
    host_ip: Option<&str>,
    pod_ip: Option<&str>,
) -> Result<String, EnvError> {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    let map_entry = |map: &Option<BTreeMap<String, String>>, rest: &str| -> Option<String> {
        let key = rest.strip_prefix("['")?.strip_suffix("']")?;
        Some(map.as_ref()?.get(key).cloned().unwrap_or_default())
    };
    let value = match path {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
        "status.hostIP" | "status.hostIPs" => host_ip.unwrap_or_default().to_string(),
        "status.podIP" | "status.podIPs" => pod_ip.unwrap_or_default().to_string(),
        "metadata.labels" => format_map(&meta.labels),
        "metadata.annotations" => format_map(&meta.annotations),
        other => {
            if let Some(rest) = other.strip_prefix("metadata.labels") {
                map_entry(&meta.labels, rest).ok_or_else(|| EnvError::FieldPath(other.into()))?
            } else if let Some(rest) = other.strip_prefix("metadata.annotations") {
                map_entry(&meta.annotations, rest)
                    .ok_or_else(|| EnvError::FieldPath(other.into()))?
            } else {
                return Err(EnvError::FieldPath(other.into()));
            }
        }
    };
    Ok(value)
}

/// `key="value"` lines, sorted, as the downward API writes labels/annotations.
pub fn format_map(map: &Option<BTreeMap<String, String>>) -> String {
    map.as_ref()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={v:?}"))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// `resourceFieldRef` value with its divisor (ceil, as the kubelet rounds).
pub fn resource_field(
    container: &Container,
    resource: &str,
    divisor: Option<&str>,
    node_alloc: &BTreeMap<String, String>,
) -> String {
    let res = container.resources.as_ref();
    let (kind, name) = resource.split_once('.').unwrap_or(("limits", resource));
    let q = match kind {
        "limits" => res
            .and_then(|r| r.limits.as_ref())
            .and_then(|m| m.get(name))
            .map(|q| q.0.clone()),
        _ => res
            .and_then(|r| r.requests.as_ref())
            .and_then(|m| m.get(name))
            .map(|q| q.0.clone()),
    }
    .or_else(|| {
        (kind == "limits")
            .then(|| node_alloc.get(name).cloned())
            .flatten()
    })
    .unwrap_or_else(|| "0".into());
    let value = crate::quantity::parse(&q).unwrap_or(0.0);
    let div = divisor
        .and_then(crate::quantity::parse)
        .filter(|d| *d > 0.0)
        .unwrap_or(1.0);
    ((value / div).ceil() as i64).to_string()
}

/// Replaces `$(VAR)` with known values; `$$(VAR)` escapes; unknown references stay as is.
pub fn expand(input: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(input.len());
    let bytes = input.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'$' && i + 1 < bytes.len() {
            if bytes[i + 1] == b'$' {
                out.push('$');
                i += 2;
                continue;
            }
            if bytes[i + 1] == b'(' {
                if let Some(end) = input[i + 2..].find(')') {
                    let name = &input[i + 2..i + 2 + end];
                    match vars.get(name) {
                        Some(v) => out.push_str(v),
                        None => out.push_str(&input[i..i + 3 + end]),
                    }
                    i += 3 + end;
                    continue;
                }
            }
        }
        let ch = input[i..].chars().next().unwrap_or('\u{0}');
        out.push(ch);
        i += ch.len_utf8().max(1);
    }
    out
}

#[derive(Debug, Clone, Copy)]
enum RefKind {
    ConfigMap,
    Secret,
}

/// The referenced object's data; `None` when it is missing but optional.
async fn fetch(
    source: &dyn ConfigSource,
    kind: RefKind,
    ns: &str,
    name: &str,
    optional: Option<bool>,
) -> Result<Option<BTreeMap<String, Vec<u8>>>, EnvError> {
    let data = match kind {
        RefKind::ConfigMap => source.config_map(ns, name).await?,
        RefKind::Secret => source.secret(ns, name).await?,
    };
    match data {
        Some(d) => Ok(Some(d)),
        None if optional == Some(true) => Ok(None),
        None => {
            let (namespace, name) = (ns.to_string(), name.to_string());
            Err(match kind {
                RefKind::ConfigMap => EnvError::ConfigMapNotFound { namespace, name },
                RefKind::Secret => EnvError::SecretNotFound { namespace, name },
            })
        }
    }
}

/// One key of a configMap/secret; `None` when it (or the object) is missing but optional.
async fn key_value(
    source: &dyn ConfigSource,
    kind: RefKind,
    ns: &str,
    name: &str,
    key: &str,
    optional: Option<bool>,
) -> Result<Option<String>, EnvError> {
    let Some(data) = fetch(source, kind, ns, name, optional).await? else {
        return Ok(None);
    };
    match data.get(key) {
        Some(v) => Ok(Some(String::from_utf8_lossy(v).into_owned())),
        None if optional == Some(true) => Ok(None),
        None => Err(EnvError::KeyNotFound {
            kind: match kind {
                RefKind::ConfigMap => "configmap",
                RefKind::Secret => "secret",
            },
            namespace: ns.to_string(),
            name: name.to_string(),
            key: key.to_string(),
        }),
    }
}

/// The full env of one container, in kubelet order (service env, envFrom, env).
pub async fn container_env(
    pod: &Pod,
    container: &Container,
    services: &[Service],
    source: &dyn ConfigSource,
    host_ip: Option<&str>,
    pod_ip: Option<&str>,
    node_alloc: &BTreeMap<String, String>,
) -> Result<Vec<(String, String)>, EnvError> {
    let ns = pod
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let mut vars: BTreeMap<String, String> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut set = |vars: &mut BTreeMap<String, String>, k: String, v: String| {
        if !vars.contains_key(&k) {
            order.push(k.clone());
        }
        vars.insert(k, v);
    };
    for (k, v) in service_env(pod, services) {
        set(&mut vars, k, v);
    }
    for from in container.env_from.iter().flatten() {
        let prefix = from.prefix.clone().unwrap_or_default();
        let refs = [
            from.config_map_ref
                .as_ref()
                .map(|r| (RefKind::ConfigMap, &r.name, r.optional)),
            from.secret_ref
                .as_ref()
                .map(|r| (RefKind::Secret, &r.name, r.optional)),
        ];
        for (kind, name, optional) in refs.into_iter().flatten() {
            for (k, v) in fetch(source, kind, &ns, name, optional)
                .await?
                .unwrap_or_default()
            {
                set(
                    &mut vars,
                    format!("{prefix}{k}"),
                    String::from_utf8_lossy(&v).into_owned(),
                );
            }
        }
    }
    for e in container.env.iter().flatten() {
        let value = if let Some(v) = &e.value {
            expand(v, &vars)
        } else if let Some(from) = &e.value_from {
            if let Some(f) = &from.field_ref {
                pod_field(pod, &f.field_path, host_ip, pod_ip)?
            } else if let Some(r) = &from.resource_field_ref {
                let target = r
                    .container_name
                    .as_ref()
                    .and_then(|n| pod.spec.as_ref()?.containers.iter().find(|c| &c.name == n))
                    .unwrap_or(container);
                resource_field(
                    target,
                    &r.resource,
                    r.divisor.as_ref().map(|d| d.0.as_str()),
                    node_alloc,
                )
            } else if let Some(r) = &from.config_map_key_ref {
                match key_value(source, RefKind::ConfigMap, &ns, &r.name, &r.key, r.optional)
                    .await?
                {
                    Some(v) => v,
                    None => continue,
                }
            } else if let Some(r) = &from.secret_key_ref {
                match key_value(source, RefKind::Secret, &ns, &r.name, &r.key, r.optional).await? {
                    Some(v) => v,
                    None => continue,
                }
            } else {
                String::new()
            }
        } else {
            String::new()
        };
        set(&mut vars, e.name.clone(), value);
    }
    Ok(order
        .into_iter()
        .map(|k| {
            let v = vars.get(&k).cloned().unwrap_or_default();
            (k, v)
        })
        .collect())
}

/// A source that knows no ConfigMap or Secret and issues `token`, if any (tests).
#[cfg(test)]
#[derive(Default)]
pub(crate) struct FakeConfigSource {
    pub token: Option<crate::sa_tokens::IssuedToken>,
}

#[cfg(test)]
#[async_trait::async_trait]
impl ConfigSource for FakeConfigSource {
    async fn config_map(
        &self,
        _: &str,
        _: &str,
    ) -> Result<Option<BTreeMap<String, Vec<u8>>>, EnvError> {
        Ok(None)
    }
    async fn secret(
        &self,
        _: &str,
        _: &str,
    ) -> Result<Option<BTreeMap<String, Vec<u8>>>, EnvError> {
        Ok(None)
    }
    async fn service_account_token(
        &self,
        _: &crate::sa_tokens::TokenAsk,
    ) -> Result<crate::sa_tokens::IssuedToken, EnvError> {
        self.token.clone().ok_or(EnvError::NoTokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Fixture;

    #[async_trait::async_trait]
    impl ConfigSource for Fixture {
        async fn config_map(
            &self,
            _: &str,
            name: &str,
        ) -> Result<Option<BTreeMap<String, Vec<u8>>>, EnvError> {
            Ok((name == "cm").then(|| BTreeMap::from([("k".to_string(), b"cmval".to_vec())])))
        }
        async fn secret(
            &self,
            _: &str,
            name: &str,
        ) -> Result<Option<BTreeMap<String, Vec<u8>>>, EnvError> {
            Ok((name == "s").then(|| BTreeMap::from([("pw".to_string(), b"hunter2".to_vec())])))
        }
    }

    fn pod(env: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns1", "uid": "u1", "labels": {"app": "x"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "env": env,
                "resources": {"limits": {"memory": "64Mi"}}}]}
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn resolves_all_value_sources() {
        let p = pod(json!([
            {"name": "A", "value": "a"},
            {"name": "B", "value": "$(A)-b-$$(A)-$(NOPE)"},
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
            {"name": "CM", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}},
            {"name": "SEC", "valueFrom": {"secretKeyRef": {"name": "s", "key": "pw"}}},
            {"name": "OPT", "valueFrom": {"secretKeyRef": {"name": "missing", "key": "pw", "optional": true}}},
        ]));
        let c = p.spec.as_ref().unwrap().containers[0].clone();
        let env = container_env(
            &p,
            &c,
            &[],
            &Fixture,
            Some("198.18.0.1"),
            Some("10.244.0.5"),
            &BTreeMap::new(),
        )
        .await
        .unwrap();
        let m: BTreeMap<_, _> = env.into_iter().collect();
        assert_eq!(m["B"], "a-b-$(A)-$(NOPE)");
        assert_eq!(m["POD"], "p");
        assert_eq!(m["APP"], "x");
        assert_eq!(m["IP"], "10.244.0.5");
        assert_eq!(m["MEM"], "64");
        assert_eq!(m["CM"], "cmval");
        assert_eq!(m["SEC"], "hunter2");
        assert!(!m.contains_key("OPT"));
    }

    #[tokio::test]
    async fn missing_references_are_errors() {
        let p = pod(
            json!([{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "k"}}}]),
        );
        let c = p.spec.as_ref().unwrap().containers[0].clone();
        let err = container_env(&p, &c, &[], &Fixture, None, None, &BTreeMap::new())
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "configmap ns1/nope not found");
    }

    #[test]
    fn service_links() {
        let p = pod(json!([]));
        let svc: Service = serde_json::from_value(json!({
            "metadata": {"name": "my-svc", "namespace": "ns1"},
            "spec": {"clusterIP": "10.96.0.10", "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}
        }))
        .unwrap();
        let env: BTreeMap<_, _> = service_env(&p, &[svc]).into_iter().collect();
        assert_eq!(env["MY_SVC_SERVICE_HOST"], "10.96.0.10");
        assert_eq!(env["MY_SVC_SERVICE_PORT_HTTP"], "80");
        assert_eq!(env["MY_SVC_PORT_80_TCP_ADDR"], "10.96.0.10");
        assert_eq!(env["MY_SVC_PORT"], "tcp://10.96.0.10:80");
    }
}
