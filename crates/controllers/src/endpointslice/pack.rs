//! Turning desired endpoint groups into slice changes with upstream's packing, which keeps
//! churn low: existing slices first lose what is gone and update what changed; new
//! endpoints fill the slices already being updated (fullest first); what is left goes into
//! the one unchanged slice it fits best, else into new slices of at most 100; a slice
//! deleted and one created in the same pass become one update; a service without
//! endpoints keeps one empty placeholder slice. Pure: no API calls.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::desired::{group_key, Group};
use super::{CONTROLLER_NAME, HEADLESS, MANAGED_BY, SERVICE_NAME};

pub const MAX_ENDPOINTS_PER_SLICE: usize = 100;

/// What one pass writes.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Plan {
    /// New slices (named by the server from `generateName`).
    pub create: Vec<EndpointSlice>,
    pub update: Vec<EndpointSlice>,
    pub delete: Vec<EndpointSlice>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.create.is_empty() && self.update.is_empty() && self.delete.is_empty()
    }
}

/// An endpoint's identity across passes: its pod, else its addresses.
fn endpoint_key(ep: &Endpoint) -> String {
    match ep.target_ref.as_ref().and_then(|r| r.uid.clone()) {
        Some(uid) => uid,
        None => ep.addresses.join(","),
    }
}

/// Who the slices belong to: what every slice of theirs carries, and whether an empty
/// placeholder stands in when there are no endpoints.
#[derive(Debug, Clone, PartialEq)]
pub struct Owner {
    pub namespace: String,
    /// Prefix of new slices' names (`<service>-`).
    pub generate_name: String,
    pub labels: BTreeMap<String, String>,
    pub reference: OwnerReference,
    pub placeholder: bool,
}

/// The labels a slice of `service` carries: the service's own, the headless marker, the
/// service name and the manager.
pub fn slice_labels(service: &Service) -> BTreeMap<String, String> {
    let mut labels = service.metadata.labels.clone().unwrap_or_default();
    labels.remove(SERVICE_NAME);
    labels.remove(MANAGED_BY);
    labels.remove(HEADLESS);
    let headless = service.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("None");
    if headless {
        labels.insert(HEADLESS.into(), String::new());
    }
    let name = service.metadata.name.clone().unwrap_or_default();
    labels.insert(SERVICE_NAME.into(), name);
    labels.insert(MANAGED_BY.into(), CONTROLLER_NAME.into());
    labels
}

impl Owner {
    /// The EndpointSlice controller's slices of `service`.
    pub fn of_service(service: &Service) -> Owner {
        let name = service.metadata.name.clone().unwrap_or_default();
        Owner {
            namespace: service.metadata.namespace.clone().unwrap_or_default(),
            generate_name: format!("{name}-"),
            labels: slice_labels(service),
            reference: OwnerReference {
                api_version: "v1".into(),
                kind: "Service".into(),
                name,
                uid: service.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            },
            placeholder: true,
        }
    }

    /// A new, empty slice for `group`'s address type and ports.
    pub fn new_slice(&self, group: &Group) -> EndpointSlice {
        EndpointSlice {
            metadata: ObjectMeta {
                generate_name: Some(self.generate_name.clone()),
                namespace: Some(self.namespace.clone()),
                labels: Some(self.labels.clone()),
                owner_references: Some(vec![self.reference.clone()]),
                ..Default::default()
            },
            address_type: group.address_type.clone(),
            ports: Some(group.ports.clone()),
            endpoints: Vec::new(),
        }
    }
}

/// The changes that make `existing` (this service's slices) hold `desired`.
pub fn plan(owner: &Owner, existing: &[EndpointSlice], desired: &BTreeMap<String, Group>) -> Plan {
    let mut by_key: BTreeMap<String, Vec<&EndpointSlice>> = BTreeMap::new();
    for slice in existing {
        let ports = slice.ports.clone().unwrap_or_default();
        by_key
            .entry(group_key(&slice.address_type, &ports))
            .or_default()
            .push(slice);
    }
    let mut plan = Plan::default();
    for (key, group) in desired {
        let slices = by_key.remove(key).unwrap_or_default();
        let part = plan_group(owner, &slices, group);
        plan.create.extend(part.create);
        plan.update.extend(part.update);
        plan.delete.extend(part.delete);
    }
    // Port sets no longer wanted.
    plan.delete.extend(by_key.into_values().flatten().cloned());
    if owner.placeholder && existing.len() == plan.delete.len() && plan.create.is_empty() {
        keep_placeholder(owner, &mut plan);
    }
    reuse_deleted(&mut plan);
    plan
}

/// A service with no endpoints keeps one empty IPv4 slice without ports.
fn keep_placeholder(owner: &Owner, plan: &mut Plan) {
    let group = Group {
        address_type: "IPv4".into(),
        ..Default::default()
    };
    let placeholder = owner.new_slice(&group);
    let is_placeholder = |s: &EndpointSlice| {
        s.endpoints.is_empty()
            && s.address_type == "IPv4"
            && s.ports.as_deref().unwrap_or_default().is_empty()
            && s.metadata.labels == placeholder.metadata.labels
    };
    if plan.delete.len() == 1 && is_placeholder(&plan.delete[0]) {
        plan.delete.clear();
    } else {
        plan.create.push(placeholder);
    }
}

/// A slice about to be deleted takes the place of one about to be created: one update
/// instead of a delete and a create.
fn reuse_deleted(plan: &mut Plan) {
    let mut i = 0;
    while i < plan.delete.len() && !plan.create.is_empty() {
        if plan.delete[i].address_type == plan.create[0].address_type {
            let old = plan.delete.remove(i);
            let mut new = plan.create.remove(0);
            new.metadata.name = old.metadata.name;
            new.metadata.generate_name = None;
            new.metadata.resource_version = old.metadata.resource_version;
            plan.update.push(new);
        } else {
            i += 1;
        }
    }
}

/// Step 1 for one slice: drop endpoints no longer desired, refresh changed ones (taking
/// them out of `wanted`). `None`: the slice is unchanged.
fn refresh_slice(
    owner: &Owner,
    slice: &EndpointSlice,
    wanted: &mut HashMap<String, Endpoint>,
) -> Option<EndpointSlice> {
    let mut changed = false;
    let mut endpoints = Vec::with_capacity(slice.endpoints.len());
    for ep in &slice.endpoints {
        match wanted.remove(&endpoint_key(ep)) {
            Some(new) => {
                changed |= &new != ep;
                endpoints.push(new);
            }
            None => changed = true,
        }
    }
    let labels = Some(owner.labels.clone());
    if !changed && labels == slice.metadata.labels {
        return None;
    }
    let mut updated = slice.clone();
    updated.endpoints = endpoints;
    updated.metadata.labels = labels;
    Some(updated)
}

fn plan_group(owner: &Owner, existing: &[&EndpointSlice], group: &Group) -> Plan {
    let mut order: Vec<String> = Vec::with_capacity(group.endpoints.len());
    let mut wanted: HashMap<String, Endpoint> = HashMap::new();
    for ep in &group.endpoints {
        let key = endpoint_key(ep);
        order.push(key.clone());
        wanted.insert(key, ep.clone());
    }
    let mut plan = Plan::default();
    let mut unchanged: Vec<&EndpointSlice> = Vec::new();
    for slice in existing {
        match refresh_slice(owner, slice, &mut wanted) {
            None => unchanged.push(slice),
            Some(s) if s.endpoints.is_empty() => plan.delete.push((*slice).clone()),
            Some(s) => plan.update.push(s),
        }
    }
    // New endpoints, in the desired order.
    let mut new: std::collections::VecDeque<Endpoint> =
        order.iter().filter_map(|k| wanted.remove(k)).collect();
    // Step 2: fill the slices being updated anyway, fullest first.
    plan.update
        .sort_by_key(|s| std::cmp::Reverse(s.endpoints.len()));
    for slice in &mut plan.update {
        while slice.endpoints.len() < MAX_ENDPOINTS_PER_SLICE {
            let Some(ep) = new.pop_front() else { break };
            slice.endpoints.push(ep);
        }
    }
    // Step 3: the rest into the unchanged slice it fits best, else new slices.
    while !new.is_empty() {
        let fit = (new.len() < MAX_ENDPOINTS_PER_SLICE)
            .then(|| best_fit(&unchanged, new.len()))
            .flatten();
        let mut slice = match fit {
            Some(i) => unchanged.remove(i).clone(),
            None => owner.new_slice(group),
        };
        while slice.endpoints.len() < MAX_ENDPOINTS_PER_SLICE {
            let Some(ep) = new.pop_front() else { break };
            slice.endpoints.push(ep);
        }
        if slice.metadata.name.is_some() {
            plan.update.push(slice);
        } else {
            plan.create.push(slice);
        }
    }
    plan
}

/// The unchanged slice with the least room left that still takes `count` endpoints.
fn best_fit(slices: &[&EndpointSlice], count: usize) -> Option<usize> {
    slices
        .iter()
        .enumerate()
        .filter(|(_, s)| s.endpoints.len() + count <= MAX_ENDPOINTS_PER_SLICE)
        .min_by_key(|(_, s)| MAX_ENDPOINTS_PER_SLICE - (s.endpoints.len() + count))
        .map(|(i, _)| i)
}
