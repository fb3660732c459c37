//! Which service ports changed between the last applied state and the desired one.

use crate::model::{ProxyState, ServicePortName};

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Diff {
    pub added: Vec<ServicePortName>,
    pub changed: Vec<ServicePortName>,
    pub removed: Vec<ServicePortName>,
}

impl Diff {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.changed.is_empty() && self.removed.is_empty()
    }
}

pub fn diff(applied: &ProxyState, desired: &ProxyState) -> Diff {
    let mut d = Diff::default();
    for (name, entry) in desired {
        match applied.get(name) {
            None => d.added.push(name.clone()),
            Some(old) if old != entry => d.changed.push(name.clone()),
            Some(_) => {}
        }
    }
    d.removed = applied
        .keys()
        .filter(|k| !desired.contains_key(k))
        .cloned()
        .collect();
    d
}
