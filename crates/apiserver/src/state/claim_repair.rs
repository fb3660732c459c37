//! Upstream's ClusterIP and NodePort repair controllers, for the allocation claims: a
//! claim no Service holds (its replica crashed between the claim and the Service's write,
//! or a release failed) is leaked. Every replica checks every interval; a claim found
//! leaked, unchanged, in `PASSES_BEFORE_RELEASE` successive passes is deleted (with its
//! mod revision as precondition, so a claim made again meanwhile stays) and its value is
//! free again. Upstream waits the same number of passes (`numRepairsBeforeLeakCleanup`),
//! so a Service whose create is in flight is never robbed of its claim.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use cairn_api::registry;
use cairn_store::{Revision, StoreError};
use serde_json::Value;
use tracing::{debug, info, warn};

use super::claims::{claimed_value, keys_of, owner_name, owner_of, Claimed, CLAIMS};
use super::ApiState;

/// Passes a claim must be seen leaked in, unchanged, before it is deleted.
const PASSES_BEFORE_RELEASE: u32 = 3;

/// Claims seen leaked so far: the mod revision seen and in how many passes in a row.
#[derive(Debug, Default)]
pub struct Leaks(HashMap<String, (Revision, u32)>);

/// A claim as stored: its key, mod revision and owner (`namespace/name`).
pub(super) struct Claim {
    pub key: String,
    pub revision: Revision,
    pub owner: String,
}

/// The claims to delete now: leaked (`held` names no owner for the key, or another one)
/// in enough passes in a row at the same revision. `leaks` forgets what is not leaked.
pub(super) fn due(
    leaks: &mut Leaks,
    claims: &[Claim],
    held: &HashMap<String, String>,
) -> Vec<(String, Revision)> {
    let mut seen = HashMap::new();
    let mut release = Vec::new();
    for claim in claims {
        if held.get(&claim.key) == Some(&claim.owner) {
            continue;
        }
        let passes = match leaks.0.get(&claim.key) {
            Some((revision, passes)) if *revision == claim.revision => passes + 1,
            _ => 1,
        };
        if passes >= PASSES_BEFORE_RELEASE {
            release.push((claim.key.clone(), claim.revision));
        } else {
            seen.insert(claim.key.clone(), (claim.revision, passes));
        }
    }
    leaks.0 = seen;
    release
}

impl ApiState {
    /// One repair pass; the claims it deleted.
    pub async fn repair_claims(&self, leaks: &mut Leaks) -> usize {
        let Some(services) = registry::find("", "v1", "services") else {
            return 0;
        };
        let (objects, _) = self.cache.list(&services.list_prefix(None));
        let mut held = HashMap::new();
        for svc in objects
            .iter()
            .filter_map(|o| serde_json::from_slice::<Value>(&o.bytes).ok())
        {
            let owner = owner_name(&svc);
            for key in keys_of(&svc) {
                held.insert(key, owner.clone());
            }
        }
        let (stored, _) = self.cache.list(CLAIMS);
        let claims: Vec<Claim> = stored
            .iter()
            .map(|o| Claim {
                key: o.key.clone(),
                revision: o.mod_revision,
                owner: owner_of(&o.bytes),
            })
            .collect();
        let mut released = 0;
        for (key, revision) in due(leaks, &claims, &held) {
            match self.cache.backend().delete(&key, Some(revision)).await {
                Ok(_) | Err(StoreError::NotFound { .. }) => {
                    info!(%key, "released an allocation claim no Service holds");
                    self.forget_claimed_value(&key);
                    released += 1;
                }
                Err(StoreError::Conflict { .. }) => debug!(%key, "leaked claim changed; kept"),
                Err(e) => warn!(%key, error = %e, "releasing a leaked allocation claim"),
            }
        }
        released
    }

    /// Frees a released claim's value in this replica's allocator.
    fn forget_claimed_value(&self, key: &str) {
        match claimed_value(key) {
            Some(Claimed::Ip(ip)) => self.cluster_ips.lock().release(ip),
            Some(Claimed::Port(port)) => self.node_ports.lock().release(port),
            None => {}
        }
    }
}

/// A repair pass every `interval` until the server stops.
pub async fn claim_repair_loop(state: Arc<ApiState>, interval: Duration) {
    let mut leaks = Leaks::default();
    loop {
        tokio::time::sleep(interval).await;
        state.repair_claims(&mut leaks).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(key: &str, revision: Revision, owner: &str) -> Claim {
        Claim {
            key: key.into(),
            revision,
            owner: owner.into(),
        }
    }

    #[test]
    fn a_claim_goes_after_three_leaked_passes_at_one_revision() {
        let held: HashMap<String, String> = [("/a/ip/1", "ns/web"), ("/a/ip/2", "ns/db")]
            .map(|(k, o)| (k.to_string(), o.to_string()))
            .into();
        let claims = [
            claim("/a/ip/1", 5, "ns/web"),   // held by its owner
            claim("/a/ip/2", 6, "ns/old"),   // held, but by another Service
            claim("/a/ip/3", 7, "ns/ghost"), // held by none
        ];
        let mut leaks = Leaks::default();
        assert!(due(&mut leaks, &claims, &held).is_empty());
        assert!(due(&mut leaks, &claims, &held).is_empty());
        let third = due(&mut leaks, &claims, &held);
        assert_eq!(
            third,
            [("/a/ip/2".to_string(), 6), ("/a/ip/3".to_string(), 7)]
        );
        assert!(leaks.0.is_empty());
    }

    #[test]
    fn a_claim_held_again_or_written_again_starts_over() {
        let mut leaks = Leaks::default();
        let none = HashMap::new();
        let leaked = [claim("/a/ip/3", 7, "ns/web")];
        due(&mut leaks, &leaked, &none);
        due(&mut leaks, &leaked, &none);
        // Its Service's write landed: held, forgotten.
        let held: HashMap<String, String> = [("/a/ip/3".to_string(), "ns/web".to_string())].into();
        assert!(due(&mut leaks, &leaked, &held).is_empty());
        assert!(leaks.0.is_empty());
        // Leaked again, then claimed again at a new revision: the count restarts.
        due(&mut leaks, &leaked, &none);
        due(&mut leaks, &leaked, &none);
        let rewritten = [claim("/a/ip/3", 9, "ns/web")];
        assert!(due(&mut leaks, &rewritten, &none).is_empty());
        assert_eq!(leaks.0["/a/ip/3"], (9, 1));
    }
}
