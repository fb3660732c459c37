//! The ServiceAccount admission plugin's token mount: a new pod gets upstream's projected
//! volume `kube-api-access-<5 random>` (a bound ServiceAccount token of 3607 s, the
//! `kube-root-ca.crt` ConfigMap's `ca.crt`, the namespace), mounted read-only at
//! `/var/run/secrets/kubernetes.io/serviceaccount` in every container that has nothing
//! mounted there, unless `automountServiceAccountToken` is false on the pod or, when the
//! pod does not say, on its ServiceAccount. Mirror pods get nothing (they have no
//! ServiceAccount).
//!
//! Deviation: upstream refuses a pod whose ServiceAccount does not exist yet; cairn
//! admits it (the agent's token request fails and is retried until the account exists),
//! so a pod created right after its namespace does not race the ServiceAccount
//! controller.

use cairn_api::registry;
use cairn_store::cache::WatchCache;
use serde_json::{json, Value};

pub const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
const VOLUME_PREFIX: &str = "kube-api-access-";
/// Upstream's: an hour, plus seven seconds so the token is told apart from legacy ones.
const TOKEN_EXPIRATION_SECONDS: i64 = 3607;
/// `k8s.io/apimachinery/pkg/util/rand`'s alphabet: no vowels, no look-alikes.
const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn random_suffix() -> String {
    (0..5)
        .map(|_| char::from(ALPHABET[rand::random_range(0..ALPHABET.len())]))
        .collect()
}

/// The ServiceAccount's `automountServiceAccountToken`, if it exists and says.
fn account_automount(cache: &WatchCache, ns: &str, account: &str) -> Option<bool> {
    let r = registry::find("", "v1", "serviceaccounts")?;
    let sa = cache.get(&r.key(Some(ns), account))?;
    serde_json::from_slice::<AutomountOnly>(&sa.bytes)
        .ok()?
        .automount_service_account_token
}

/// The one field read of a ServiceAccount (serde skips the rest without building it).
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct AutomountOnly {
    automount_service_account_token: Option<bool>,
}

fn token_volume(name: &str) -> Value {
    let mut volume = TOKEN_VOLUME.clone();
    volume["name"] = Value::String(name.to_string());
    volume
}

/// The volume without its name, built once: `json!` per pod was most of this plugin's
/// cost under a create load.
static TOKEN_VOLUME: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| {
    json!({
        "name": "",
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION_SECONDS, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ],
        },
    })
});

/// Mounts `volume` in each container without a mount at the token path; whether any
/// container got it.
fn mount_everywhere(spec: &mut Value, volume: &str) -> bool {
    let mut mounted = false;
    for list in ["initContainers", "containers"] {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in containers {
            let mounts = &mut c["volumeMounts"];
            if !mounts.is_array() {
                *mounts = json!([]);
            }
            let Some(mounts) = mounts.as_array_mut() else {
                continue;
            };
            let taken = mounts
                .iter()
                .any(|m| m.get("mountPath").and_then(Value::as_str) == Some(TOKEN_MOUNT_PATH));
            if !taken {
                mounts
                    .push(json!({"name": volume, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH}));
                mounted = true;
            }
        }
    }
    mounted
}

/// Adds the token volume and mounts to a new pod, as upstream's admission does.
pub fn admit_pod(cache: &WatchCache, pod: &mut Value) {
    let ns = pod
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default")
        .to_string();
    let Some(spec) = pod.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    let Some(account) = spec
        .get("serviceAccountName")
        .and_then(Value::as_str)
        .filter(|a| !a.is_empty())
        .map(str::to_string)
    else {
        return;
    };
    let automount = spec
        .get("automountServiceAccountToken")
        .and_then(Value::as_bool)
        .or_else(|| account_automount(cache, &ns, &account))
        .unwrap_or(true);
    let has_volume = spec
        .get("volumes")
        .and_then(Value::as_array)
        .is_some_and(|vs| {
            vs.iter().any(|v| {
                v.get("name")
                    .and_then(Value::as_str)
                    .is_some_and(|n| n.starts_with(VOLUME_PREFIX))
            })
        });
    if !automount || has_volume {
        return;
    }
    let name = format!("{VOLUME_PREFIX}{}", random_suffix());
    if !mount_everywhere(spec, &name) {
        return;
    }
    let volumes = &mut spec["volumes"];
    if !volumes.is_array() {
        *volumes = json!([]);
    }
    if let Some(list) = volumes.as_array_mut() {
        list.push(token_volume(&name));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn mount_path_and_volume_shape_follow_upstream() {
        let mut spec = json!({
            "serviceAccountName": "default",
            "initContainers": [{"name": "i"}],
            "containers": [
                {"name": "a"},
                {"name": "b", "volumeMounts": [{"name": "mine", "mountPath": TOKEN_MOUNT_PATH}]},
            ],
        });
        assert!(mount_everywhere(&mut spec, "kube-api-access-abcde"));
        assert_eq!(
            spec["initContainers"][0]["volumeMounts"][0]["mountPath"],
            TOKEN_MOUNT_PATH
        );
        assert_eq!(spec["containers"][0]["volumeMounts"][0]["readOnly"], true);
        assert_eq!(
            spec["containers"][1]["volumeMounts"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
        let v = token_volume("kube-api-access-abcde");
        assert_eq!(
            v["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"],
            3607
        );
        assert_eq!(
            v["projected"]["sources"][1]["configMap"]["name"],
            "kube-root-ca.crt"
        );
        let suffix = random_suffix();
        assert_eq!(suffix.len(), 5);
        assert!(suffix.bytes().all(|b| ALPHABET.contains(&b)));
        // Nothing to mount: every container mounts something there already.
        let mut full = json!({"containers": [{"name": "b", "volumeMounts": [{"name": "x", "mountPath": TOKEN_MOUNT_PATH}]}]});
        assert!(!mount_everywhere(&mut full, "kube-api-access-abcde"));
    }
}
