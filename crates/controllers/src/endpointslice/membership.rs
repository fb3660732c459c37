//! Which Services a pod event wakes: those whose selector matches the pod now and those it
//! matched before (a pod whose labels changed must leave its old services' endpoints), as
//! upstream's `GetPodServiceMemberships` over the old and the new pod.

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::api::core::v1::Service;
use kube::runtime::reflector::{ObjectRef, Store};
use parking_lot::Mutex;

use crate::cached_pod::CachedPod;

pub struct Membership {
    services: Store<Service>,
    /// Pod `namespace/name` → the services it was last matched to.
    last: Mutex<HashMap<String, BTreeSet<String>>>,
}

impl Membership {
    pub fn new(services: Store<Service>) -> Self {
        Membership {
            services,
            last: Mutex::default(),
        }
    }

    /// The services to wake for a touched (or deleted) pod.
    pub fn touched(&self, pod: &CachedPod, deleted: bool) -> Vec<ObjectRef<Service>> {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let key = format!("{ns}/{}", pod.metadata.name.as_deref().unwrap_or(""));
        let now: BTreeSet<String> = if deleted {
            BTreeSet::new()
        } else {
            self.matching(&ns, pod)
        };
        let before = {
            let mut last = self.last.lock();
            if now.is_empty() {
                last.remove(&key).unwrap_or_default()
            } else {
                last.insert(key, now.clone()).unwrap_or_default()
            }
        };
        now.union(&before)
            .map(|name| ObjectRef::new(name).within(&ns))
            .collect()
    }

    fn matching(&self, ns: &str, pod: &CachedPod) -> BTreeSet<String> {
        let empty = Default::default();
        let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
        self.services
            .state()
            .iter()
            .filter(|s| s.metadata.namespace.as_deref() == Some(ns))
            .filter(|s| {
                let selector = s.spec.as_ref().and_then(|sp| sp.selector.as_ref());
                selector.is_some_and(|sel| {
                    cairn_semantics::selector::Selector::from_map(sel).matches(labels)
                })
            })
            .filter_map(|s| s.metadata.name.clone())
            .collect()
    }
}
