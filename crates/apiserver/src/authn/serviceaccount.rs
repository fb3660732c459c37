//! ServiceAccount tokens: bound JWTs as kube-apiserver issues them through the
//! TokenRequest API (`serviceaccounts/<name>/token`), and their authentication. A token
//! is good while it has not expired, names one of the audiences asked for, and the
//! ServiceAccount (and the Pod, Secret or Node it is bound to) still exists with the uid
//! it was issued for.

use std::collections::BTreeMap;

use cairn_auth::UserInfo;
use serde_json::{json, Value};

use super::jwt::{looks_like_jwt, JwtError, SigningKey};
use super::Unauthorized;

/// Issuer and default audience of the tokens, upstream's default for a cluster whose
/// domain is `cluster.local`.
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// Upstream's shortest TokenRequest lifetime.
pub const MIN_EXPIRATION_SECONDS: i64 = 600;
/// TokenRequest's default lifetime.
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// How long after its grace period a deleted pod's tokens still work (upstream's 60 s).
const DELETED_POD_LEEWAY: i64 = 60;

/// An object a token is bound to (a Pod, a Secret or a Node).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundObject {
    pub kind: String,
    pub name: String,
    pub uid: String,
}

/// What a token is for.
#[derive(Debug, Clone)]
pub struct TokenSpec {
    pub namespace: String,
    pub service_account: String,
    pub service_account_uid: String,
    pub audiences: Vec<String>,
    pub expiration_seconds: i64,
    pub bound: Option<BoundObject>,
    /// The node of a pod-bound token: (name, uid).
    pub node: Option<(String, String)>,
}

/// A stored object as token checks need it.
#[derive(Debug, Clone)]
pub struct LiveObject {
    pub uid: String,
    /// Unix seconds of `metadata.deletionTimestamp`, if set.
    pub deletion: Option<i64>,
}

/// A Secret as the bootstrap token authenticator reads it (data decoded).
#[derive(Debug, Clone)]
pub struct SecretView {
    pub type_: String,
    pub data: BTreeMap<String, Vec<u8>>,
    pub deleting: bool,
}

/// Reads the objects tokens are bound to (the watch cache, in the server).
pub trait ObjectLookup: Send + Sync {
    /// `resource` is a core/v1 plural: `serviceaccounts`, `pods`, `secrets`, `nodes`.
    fn live(&self, resource: &str, namespace: Option<&str>, name: &str) -> Option<LiveObject>;

    /// A Secret's type and decoded data.
    fn secret(&self, _namespace: &str, _name: &str) -> Option<SecretView> {
        None
    }
}

pub struct ServiceAccountTokens {
    key: SigningKey,
    /// The audiences a token must name to authenticate to this API.
    pub api_audiences: Vec<String>,
}

fn string_at<'a>(v: &'a Value, path: &str) -> &'a str {
    v.pointer(path).and_then(Value::as_str).unwrap_or("")
}

impl ServiceAccountTokens {
    pub fn new(key: SigningKey) -> ServiceAccountTokens {
        ServiceAccountTokens {
            key,
            api_audiences: vec![ISSUER.to_string()],
        }
    }

    /// A signed token for `spec` and its expiry (unix seconds).
    pub fn issue(&self, spec: &TokenSpec, now: i64) -> Result<(String, i64), JwtError> {
        let exp = now + spec.expiration_seconds;
        let mut k8s = json!({
            "namespace": spec.namespace,
            "serviceaccount": {"name": spec.service_account, "uid": spec.service_account_uid},
        });
        if let Some(b) = &spec.bound {
            k8s[b.kind.to_ascii_lowercase()] = json!({"name": b.name, "uid": b.uid});
        }
        if let Some((name, uid)) = &spec.node {
            k8s["node"] = json!({"name": name, "uid": uid});
        }
        let claims = json!({
            "aud": spec.audiences,
            "exp": exp,
            "iat": now,
            "iss": ISSUER,
            "jti": uuid::Uuid::new_v4().to_string(),
            "kubernetes.io": k8s,
            "nbf": now,
            "sub": format!("system:serviceaccount:{}:{}", spec.namespace, spec.service_account),
        });
        Ok((self.key.sign(&claims)?, exp))
    }

    /// The user of `token` if it is one of ours and good for one of `audiences`; None
    /// when it is not a token this issuer signed (other authenticators may know it).
    pub fn authenticate(
        &self,
        token: &str,
        audiences: &[String],
        objects: &dyn ObjectLookup,
        now: i64,
    ) -> Result<Option<(UserInfo, Vec<String>)>, Unauthorized> {
        if !looks_like_jwt(token) {
            return Ok(None);
        }
        let claims = match self.key.verify(token) {
            Ok(c) => c,
            Err(JwtError::Signature | JwtError::Algorithm(_)) => return Ok(None),
            Err(e) => return Err(Unauthorized(format!("service account token: {e}"))),
        };
        if string_at(&claims, "/iss") != ISSUER {
            return Ok(None);
        }
        check_times(&claims, now)?;
        let matched = matched_audiences(&claims, audiences)?;
        let user = bound_user(&claims, objects, now)?;
        Ok(Some((user, matched)))
    }
}

fn check_times(claims: &Value, now: i64) -> Result<(), Unauthorized> {
    let exp = claims.get("exp").and_then(Value::as_i64).unwrap_or(0);
    if now > exp {
        return Err(Unauthorized("service account token has expired".into()));
    }
    let nbf = claims.get("nbf").and_then(Value::as_i64).unwrap_or(0);
    if now < nbf {
        return Err(Unauthorized(
            "service account token is not valid yet".into(),
        ));
    }
    Ok(())
}

fn matched_audiences(claims: &Value, wanted: &[String]) -> Result<Vec<String>, Unauthorized> {
    let aud: Vec<String> = match claims.get("aud") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|v| v.as_str().map(String::from))
            .collect(),
        _ => Vec::new(),
    };
    let matched: Vec<String> = wanted.iter().filter(|w| aud.contains(w)).cloned().collect();
    if matched.is_empty() {
        return Err(Unauthorized(
            "service account token has no audience of this server".into(),
        ));
    }
    Ok(matched)
}

/// The user a token names, once its account and bound objects are checked to be there.
fn bound_user(
    claims: &Value,
    objects: &dyn ObjectLookup,
    now: i64,
) -> Result<UserInfo, Unauthorized> {
    let k8s = claims.get("kubernetes.io").cloned().unwrap_or(Value::Null);
    let ns = string_at(&k8s, "/namespace");
    let sa = string_at(&k8s, "/serviceaccount/name");
    let sa_uid = string_at(&k8s, "/serviceaccount/uid");
    if ns.is_empty() || sa.is_empty() {
        return Err(Unauthorized(
            "service account token names no account".into(),
        ));
    }
    let gone = |what: &str| Unauthorized(format!("{what} of the service account token is gone"));
    match objects.live("serviceaccounts", Some(ns), sa) {
        Some(o) if o.uid == sa_uid => {}
        _ => return Err(gone(&format!("serviceaccount {ns}/{sa}"))),
    }
    let mut extra = BTreeMap::new();
    for (kind, resource, namespaced) in [
        ("pod", "pods", true),
        ("secret", "secrets", true),
        ("node", "nodes", false),
    ] {
        let (name, uid) = (
            string_at(&k8s, &format!("/{kind}/name")),
            string_at(&k8s, &format!("/{kind}/uid")),
        );
        if name.is_empty() {
            continue;
        }
        let live = objects.live(resource, namespaced.then_some(ns), name);
        let deleted_long_ago =
            |o: &LiveObject| o.deletion.is_some_and(|d| d + DELETED_POD_LEEWAY < now);
        match live {
            Some(o) if o.uid == uid && !deleted_long_ago(&o) => {}
            // A node-bound claim beside a pod's is informational, as upstream treats it.
            _ if kind == "node" && !string_at(&k8s, "/pod/name").is_empty() => {}
            _ => return Err(gone(&format!("{kind} {name}"))),
        }
        if kind != "secret" {
            extra.insert(
                format!("authentication.kubernetes.io/{kind}-name"),
                vec![name.to_string()],
            );
            extra.insert(
                format!("authentication.kubernetes.io/{kind}-uid"),
                vec![uid.to_string()],
            );
        }
    }
    let jti = string_at(claims, "/jti");
    if !jti.is_empty() {
        extra.insert(
            "authentication.kubernetes.io/credential-id".into(),
            vec![format!("JTI={jti}")],
        );
    }
    Ok(UserInfo {
        username: format!("system:serviceaccount:{ns}:{sa}"),
        uid: sa_uid.to_string(),
        groups: vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{ns}"),
        ],
        extra,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct Objects(HashMap<String, LiveObject>);

    impl ObjectLookup for Objects {
        fn live(&self, resource: &str, ns: Option<&str>, name: &str) -> Option<LiveObject> {
            self.0
                .get(&format!("{resource}/{}/{name}", ns.unwrap_or("")))
                .cloned()
        }
    }

    fn live(uid: &str, deletion: Option<i64>) -> LiveObject {
        LiveObject {
            uid: uid.into(),
            deletion,
        }
    }

    fn issuer() -> ServiceAccountTokens {
        let dir = tempfile::tempdir().unwrap();
        let pki = cairn_pki::ClusterPki::ensure(
            dir.path(),
            &cairn_pki::ServingNames(vec!["a".into()]),
            cairn_pki::Lifetimes::default(),
        )
        .unwrap();
        let pem = std::fs::read_to_string(pki.sa_key_paths().0).unwrap();
        ServiceAccountTokens::new(SigningKey::from_pkcs8_pem(&pem).unwrap())
    }

    fn spec(bound: Option<BoundObject>) -> TokenSpec {
        TokenSpec {
            namespace: "ns".into(),
            service_account: "sa".into(),
            service_account_uid: "sa-uid".into(),
            audiences: vec![ISSUER.into()],
            expiration_seconds: 3600,
            bound,
            node: None,
        }
    }

    #[test]
    fn a_token_names_its_account_while_the_account_and_pod_exist() {
        let t = issuer();
        let pod = BoundObject {
            kind: "Pod".into(),
            name: "p".into(),
            uid: "p-uid".into(),
        };
        let (token, exp) = t.issue(&spec(Some(pod)), 1000).unwrap();
        assert_eq!(exp, 4600);
        let mut objects = Objects(HashMap::from([
            ("serviceaccounts/ns/sa".to_string(), live("sa-uid", None)),
            ("pods/ns/p".to_string(), live("p-uid", None)),
        ]));
        let aud = t.api_audiences.clone();
        let (user, _) = t
            .authenticate(&token, &aud, &objects, 1001)
            .unwrap()
            .unwrap();
        assert_eq!(user.username, "system:serviceaccount:ns:sa");
        assert_eq!(
            user.groups,
            vec!["system:serviceaccounts", "system:serviceaccounts:ns"]
        );
        assert_eq!(
            user.extra["authentication.kubernetes.io/pod-name"],
            vec!["p"]
        );
        // Expired, wrong audience, pod replaced, account gone: all refused.
        assert!(t.authenticate(&token, &aud, &objects, 4601).is_err());
        assert!(t
            .authenticate(&token, &["other".into()], &objects, 1001)
            .is_err());
        objects.0.insert("pods/ns/p".into(), live("new-uid", None));
        assert!(t.authenticate(&token, &aud, &objects, 1001).is_err());
        objects
            .0
            .insert("pods/ns/p".into(), live("p-uid", Some(900)));
        assert!(t.authenticate(&token, &aud, &objects, 1001).is_err());
        objects
            .0
            .insert("pods/ns/p".into(), live("p-uid", Some(990)));
        assert!(t.authenticate(&token, &aud, &objects, 1001).is_ok());
        objects.0.remove("serviceaccounts/ns/sa");
        assert!(t.authenticate(&token, &aud, &objects, 1001).is_err());
    }

    #[test]
    fn tokens_of_another_key_or_shape_are_not_ours() {
        let (a, b) = (issuer(), issuer());
        let (token, _) = a.issue(&spec(None), 1000).unwrap();
        let objects = Objects(HashMap::new());
        assert!(b
            .authenticate(&token, &b.api_audiences, &objects, 1001)
            .unwrap()
            .is_none());
        assert!(b
            .authenticate("abc", &b.api_audiences, &objects, 1001)
            .unwrap()
            .is_none());
    }
}
