//! Expectations, as upstream's controllers keep them: the pods a controller created or
//! deleted and has not yet seen in its cache. While any are outstanding it does not
//! count replicas again (it would create the same pods twice); after five minutes it
//! stops waiting, in case an event was missed.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

const TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Default)]
struct Pending {
    created: HashSet<String>,
    deleted: HashSet<String>,
    since: Option<Instant>,
}

#[derive(Default)]
pub struct Expectations {
    by_owner: Mutex<HashMap<String, Pending>>,
}

impl Expectations {
    fn touch(p: &mut Pending) {
        p.since = Some(Instant::now());
    }

    /// `owner` created the pod `name` (namespace-relative).
    pub fn created(&self, owner: &str, name: &str) {
        let mut m = self.by_owner.lock();
        let p = m.entry(owner.to_string()).or_default();
        p.created.insert(name.to_string());
        Self::touch(p);
    }

    /// `owner` deleted (or asked to delete) the pod `name`.
    pub fn deleted(&self, owner: &str, name: &str) {
        let mut m = self.by_owner.lock();
        let p = m.entry(owner.to_string()).or_default();
        p.deleted.insert(name.to_string());
        Self::touch(p);
    }

    /// Whether `owner` may count its pods: everything it did is visible in the cache.
    /// `seen(name)` says whether the cache has the pod, `gone(name)` whether it no longer
    /// has it (or has it terminating).
    pub fn satisfied(
        &self,
        owner: &str,
        seen: impl Fn(&str) -> bool,
        gone: impl Fn(&str) -> bool,
    ) -> bool {
        let mut m = self.by_owner.lock();
        let Some(p) = m.get_mut(owner) else {
            return true;
        };
        p.created.retain(|n| !seen(n));
        p.deleted.retain(|n| !gone(n));
        let expired = p.since.is_some_and(|t| t.elapsed() > TIMEOUT);
        if (p.created.is_empty() && p.deleted.is_empty()) || expired {
            m.remove(owner);
            return true;
        }
        false
    }

    /// The owner is gone: forget it.
    pub fn forget(&self, owner: &str) {
        self.by_owner.lock().remove(owner);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_until_the_cache_shows_every_create_and_delete() {
        let e = Expectations::default();
        assert!(e.satisfied("rs", |_| false, |_| false));
        e.created("rs", "a");
        e.created("rs", "b");
        e.deleted("rs", "c");
        assert!(!e.satisfied("rs", |n| n == "a", |_| false));
        assert!(
            !e.satisfied("rs", |n| n == "b", |_| false),
            "c is still there"
        );
        assert!(e.satisfied("rs", |_| false, |n| n == "c"));
        e.created("rs", "d");
        e.forget("rs");
        assert!(e.satisfied("rs", |_| false, |_| false));
    }
}
