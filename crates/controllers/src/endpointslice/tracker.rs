//! Which slice writes the cache has not shown yet (upstream's `EndpointSliceTracker`): a
//! reconcile that planned from a cache missing its own last writes would create slices
//! twice, so it waits until the cache caught up.

use std::collections::HashMap;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use parking_lot::Mutex;

#[derive(Default)]
pub struct SliceTracker {
    /// Service key → slice name → the resourceVersion written, `None` for a deletion.
    pending: Mutex<HashMap<String, HashMap<String, Option<u64>>>>,
}

fn version(slice: &EndpointSlice) -> Option<u64> {
    slice.metadata.resource_version.as_deref()?.parse().ok()
}

impl SliceTracker {
    pub fn wrote(&self, service: &str, slice: &EndpointSlice) {
        let name = slice.metadata.name.clone().unwrap_or_default();
        let rv = version(slice).or(Some(0));
        self.pending
            .lock()
            .entry(service.to_string())
            .or_default()
            .insert(name, rv);
    }

    pub fn deleted(&self, service: &str, name: &str) {
        self.pending
            .lock()
            .entry(service.to_string())
            .or_default()
            .insert(name.to_string(), None);
    }

    /// Forgets a deleted service.
    pub fn forget(&self, service: &str) {
        self.pending.lock().remove(service);
    }

    /// Whether `cached` (the service's slices in the cache) lacks one of our writes; the
    /// writes it shows are forgotten.
    pub fn is_stale(&self, service: &str, cached: &[EndpointSlice]) -> bool {
        let mut pending = self.pending.lock();
        let Some(writes) = pending.get_mut(service) else {
            return false;
        };
        writes.retain(|name, rv| {
            let seen = cached
                .iter()
                .find(|s| s.metadata.name.as_deref() == Some(name));
            match (rv, seen) {
                (Some(rv), Some(s)) => version(s).is_none_or(|v| v < *rv),
                (Some(_), None) => true,
                (None, Some(_)) => true,
                (None, None) => false,
            }
        });
        let stale = !writes.is_empty();
        if !stale {
            pending.remove(service);
        }
        stale
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(name: &str, rv: &str) -> EndpointSlice {
        let mut s = EndpointSlice::default();
        s.metadata.name = Some(name.into());
        s.metadata.resource_version = Some(rv.into());
        s
    }

    #[test]
    fn stale_until_the_cache_shows_each_write() {
        let t = SliceTracker::default();
        assert!(!t.is_stale("ns/s", &[]));
        t.wrote("ns/s", &slice("a", "7"));
        t.deleted("ns/s", "b");
        assert!(t.is_stale("ns/s", &[slice("a", "6"), slice("b", "3")]));
        assert!(t.is_stale("ns/s", &[slice("a", "7"), slice("b", "3")]));
        assert!(!t.is_stale("ns/s", &[slice("a", "8")]));
        assert!(!t.is_stale("ns/s", &[]), "satisfied writes are forgotten");
    }
}
