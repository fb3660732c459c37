//! Kinds a quota counts that the controllers do not cache: listed when the quota syncs.
//! Claims are read whole (their storage is charged); everything else only by metadata.

use cairn_semantics::quota::{self, Usage};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, ResourceQuotaSpec};
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::Client;

use super::Error;

/// A counted resource: group and plural, from a `count/` or legacy name.
fn counted_resource(name: &str) -> Option<(String, String)> {
    if let Some(rest) = name.strip_prefix("count/") {
        let (plural, group) = rest.split_once('.').unwrap_or((rest, ""));
        return Some((group.to_string(), plural.to_string()));
    }
    quota::legacy_count_name("", name).map(|n| (String::new(), n.to_string()))
}

/// Kinds the shared caches already cover, and claims (read in [`claims_usage`]).
fn cached_elsewhere(group: &str, plural: &str) -> bool {
    group.is_empty() && matches!(plural, "pods" | "services" | "persistentvolumeclaims")
}

fn is_claim_resource(name: &str) -> bool {
    name == "requests.storage"
        || name.contains(".storageclass.storage.k8s.io/")
        || counted_resource(name)
            .is_some_and(|(g, p)| g.is_empty() && p == "persistentvolumeclaims")
}

/// What the namespace's uncached kinds charge the quota (none under a scoped quota).
pub(super) async fn usage(
    client: &Client,
    key: &str,
    ns: &str,
    spec: &ResourceQuotaSpec,
) -> Result<Usage, Error> {
    let mut used = Usage::default();
    if !quota::quota_selectors(spec).is_empty() {
        return Ok(used);
    }
    let hard = spec.hard.clone().unwrap_or_default();
    if hard.keys().any(|n| is_claim_resource(n)) {
        used.add(&claims_usage(client, key, ns).await?);
    }
    let mut done = Vec::new();
    for name in hard.keys() {
        let Some((group, plural)) = counted_resource(name) else {
            continue;
        };
        if cached_elsewhere(&group, &plural) || done.contains(&(group.clone(), plural.clone())) {
            continue;
        }
        let n = count(client, ns, &group, &plural)
            .await
            .map_err(|source| Error::Count {
                quota: key.to_string(),
                resource: name.clone(),
                source,
            })?;
        let mut one = quota::object_usage(&group, &plural);
        for (k, v) in one.clone().iter() {
            one.set(k, v * i128::from(n));
        }
        used.add(&one);
        done.push((group, plural));
    }
    Ok(used)
}

async fn claims_usage(client: &Client, key: &str, ns: &str) -> Result<Usage, Error> {
    let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    let mut used = Usage::default();
    match api.list(&ListParams::default()).await {
        Ok(list) => list
            .items
            .iter()
            .for_each(|c| used.add(&quota::claim_usage(c))),
        // A server without claims has none to count.
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(source) => {
            return Err(Error::Count {
                quota: key.to_string(),
                resource: "persistentvolumeclaims".into(),
                source,
            })
        }
    }
    Ok(used)
}

/// The number of `group/plural` objects in `ns`; a kind the server does not serve has none.
async fn count(client: &Client, ns: &str, group: &str, plural: &str) -> Result<i64, kube::Error> {
    let version = if group.is_empty() {
        "v1".to_string()
    } else {
        match kube::discovery::group(client, group).await {
            Ok(g) => g.preferred_version_or_latest().to_string(),
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(0),
            Err(e) => return Err(e),
        }
    };
    let resource = ApiResource {
        group: group.to_string(),
        version: version.clone(),
        api_version: if group.is_empty() {
            version
        } else {
            format!("{group}/{version}")
        },
        kind: String::new(),
        plural: plural.to_string(),
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
    match api.list_metadata(&ListParams::default()).await {
        Ok(list) => Ok(i64::try_from(list.items.len()).unwrap_or(i64::MAX)),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(0),
        Err(e) => Err(e),
    }
}
