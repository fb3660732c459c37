//! NetworkPolicy enforcement on this node (issue 32's dataplane), beside the service
//! proxy: reflectors of NetworkPolicies, Pods, Namespaces and the node; on any change the
//! node's nftables state is computed again (`cairn-netpol`) and the difference from what
//! was applied goes to the kernel as one transaction. The first sync, and the one after a
//! failed apply, replaces the whole table atomically. The table outlives the agent, so a
//! restarted agent leaves policy in force until its first sync replaces it.
//!
//! While any policy exists, the node's pod ranges are guarded: a local pod address the
//! last sync did not program is dropped (see `cairn_netpol::nft`). [`Observed`] serves
//! the drop counters and each pod's effective policy.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use cairn_netfilter::NftDriver;
use cairn_netpol::nft::batch::{diff, script};
use cairn_netpol::nft::{full_script, Desired};
use kube::runtime::watcher;
use kube::Api;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tracing::{info, warn};

mod observed;
mod stores;

use crate::follow::follow;
pub use observed::{counters_of, routes, CounterValue, Observed};
use stores::Stores;

#[derive(Debug, thiserror::Error)]
pub enum PolicyControllerError {
    #[error("the {0} watch ended before its first list: {1}")]
    Watch(&'static str, String),
}

/// Applies `next` over `applied` (everything when `None`); what is in force after.
fn apply(nft: &dyn NftDriver, applied: Option<&Desired>, next: Desired) -> Option<Desired> {
    if !next.shared.is_empty() && applied.map(|a| &a.shared) != Some(&next.shared) {
        warn!(addresses = ?next.shared, "local pods share these addresses; each stays closed until one pod claims it");
    }
    let text = match applied {
        Some(before) if *before == next => return Some(next),
        Some(before) => script(&diff(before, &next)),
        None => full_script(&next),
    };
    match nft.apply(&text) {
        Ok(()) => Some(next),
        Err(e) => {
            warn!(error = %e, "applying network policy failed; replacing the table next");
            None
        }
    }
}

/// Removes the policy table (`cairn-proxy --cleanup`); nothing to do when it is absent.
pub fn cleanup() -> Result<(), cairn_netfilter::NftError> {
    let nft = match cairn_netfilter::NftCommand::new() {
        Ok(nft) => nft,
        Err(cairn_netfilter::NftError::Missing) => return Ok(()),
        Err(e) => return Err(e),
    };
    if nft.table_exists("ip", cairn_netpol::nft::TABLE)? {
        nft.apply(&format!("delete table ip {}\n", cairn_netpol::nft::TABLE))?;
    }
    Ok(())
}

/// Runs until `shutdown` completes.
pub async fn run(
    client: kube::Client,
    node: String,
    observed: Arc<Observed>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), PolicyControllerError> {
    let notify = Arc::new(Notify::new());
    let all = watcher::Config::default;
    let this_node = all().fields(&format!("metadata.name={node}"));
    let mut watches = JoinSet::new();
    let w = &mut watches;
    let stores = Stores {
        policies: follow(
            Api::all(client.clone()),
            all(),
            &notify,
            "networkpolicies",
            w,
        ),
        pods: follow(Api::all(client.clone()), all(), &notify, "pods", w),
        namespaces: follow(Api::all(client.clone()), all(), &notify, "namespaces", w),
        node: follow(Api::all(client), this_node, &notify, "nodes", w),
    };
    for (what, ready) in [
        ("networkpolicies", stores.policies.wait_until_ready().await),
        ("pods", stores.pods.wait_until_ready().await),
        ("namespaces", stores.namespaces.wait_until_ready().await),
        ("nodes", stores.node.wait_until_ready().await),
    ] {
        ready.map_err(|e| PolicyControllerError::Watch(what, e.to_string()))?;
    }
    info!(%node, "network policy controller in sync");
    tokio::pin!(shutdown);
    // What is in the kernel, and whether the next apply must replace the whole table (the
    // first one, and any after a failure: a failed `nft -f` changes nothing, so `applied`
    // stays what is in force).
    let mut applied: Option<Arc<Desired>> = None;
    let mut replace = true;
    let mut check = tokio::time::interval(TABLE_CHECK_PERIOD);
    let nft = observed.nft();
    loop {
        // Computing and applying take tens of ms at a thousand pods: off the async workers.
        tokio::task::block_in_place(|| {
            let (pods, desired) = stores.desired(&node);
            let base = if replace { None } else { applied.as_deref() };
            match apply(nft, base, desired) {
                Some(now) => (applied, replace) = (Some(Arc::new(now)), false),
                None => replace = true,
            }
            observed.record(Arc::new(pods), applied.clone());
        });
        tokio::select! {
            _ = &mut shutdown => return Ok(()),
            _ = notify.notified() => {}
            _ = tokio::time::sleep(Duration::from_secs(2)), if replace => {}
            _ = check.tick() => {
                if !table_in_place(nft) {
                    replace = true;
                }
            }
        }
    }
}

/// How often the table is checked for removal from outside (a flushed ruleset, a
/// firewall reload): then the next sync puts all of it back.
const TABLE_CHECK_PERIOD: Duration = Duration::from_secs(30);

fn table_in_place(nft: &dyn NftDriver) -> bool {
    match nft.table_exists("ip", cairn_netpol::nft::TABLE) {
        Ok(present) => {
            if !present {
                warn!("the network policy table was removed; putting it back");
            }
            present
        }
        Err(e) => {
            warn!(error = %e, "checking the network policy table");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::BTreeSet;

    use cairn_netfilter::RecordingNft;
    use cairn_netpol::nft::AddrRange;

    use super::*;

    fn state(peers: &[&str]) -> Desired {
        let mut d = Desired::default();
        let elements: BTreeSet<AddrRange> = peers
            .iter()
            .map(|p| AddrRange(p.parse().unwrap(), p.parse().unwrap()))
            .collect();
        d.sets.insert("peers_1".into(), elements);
        d
    }

    #[test]
    fn the_first_sync_replaces_the_table_then_only_differences_go_and_a_failure_replaces_again() {
        let nft = RecordingNft::default();
        let applied = apply(&nft, None, state(&["10.244.1.2"]));
        assert!(nft.scripts.lock()[0].starts_with("table ip cairn-netpol {}\ndelete table"));
        let applied = apply(&nft, applied.as_ref(), state(&["10.244.1.2"]));
        assert_eq!(
            nft.scripts.lock().len(),
            1,
            "an unchanged state sends nothing"
        );
        let applied = apply(&nft, applied.as_ref(), state(&["10.244.1.2", "10.244.1.9"]));
        assert_eq!(
            nft.scripts.lock()[1],
            "add element ip cairn-netpol peers_1 { 10.244.1.9 }\n"
        );
        *nft.fail_next.lock() = Some("Error: busy".into());
        let applied = apply(&nft, applied.as_ref(), state(&["10.244.1.9"]));
        assert!(applied.is_none());
        apply(&nft, None, state(&["10.244.1.9"]));
        assert!(nft.scripts.lock()[2].starts_with("table ip cairn-netpol {}\ndelete table"));
        // The fake lists the last script as the table; an empty ruleset has none.
        assert!(table_in_place(&nft));
        nft.tables
            .lock()
            .insert("ip other".into(), "table ip other {}".into());
        assert!(
            !table_in_place(&nft),
            "a table removed from outside is noticed"
        );
    }
}
