//! The ResourceQuota admission plugin (upstream `plugin/pkg/admission/resourcequota`): a
//! new object is charged to every quota of its namespace that tracks it, and refused with
//! 403 when one would go over its `spec.hard`; pods must state the requests and limits a
//! quota constrains. The charge is written to the quota's `status.used` at once (a
//! guaranteed update that re-checks), so back-to-back creates see each other; the quota
//! controller recomputes `status.used` from the objects and so corrects what admission
//! cannot see (deletes, creates that failed after admission).
//!
//! As upstream, a quota whose `status.used` does not yet cover a charged resource refuses
//! with "status unknown" until the controller has counted it.

use cairn_api::kinds::Admission;
use cairn_api::registry::{self, ResourceInfo};
use cairn_api::status::Status;
use cairn_semantics::quota::{self, PodQuota, Usage};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, PodSpec, ResourceQuota, Service};
use k8s_openapi::jiff::Timestamp;
use serde_json::{json, Value};

use crate::state::{ApiState, WriteOptions};

/// What creating an object charges, read from it once per admission.
struct Charged {
    usage: Usage,
    /// For a pod: its quota facts and spec (scopes, required requests and limits).
    pod: Option<(PodQuota, PodSpec)>,
}

fn charged(r: &ResourceInfo, obj: &Value) -> Result<Charged, Status> {
    let typed = |what: &str, e: serde_json::Error| {
        Status::internal(format!("reading the {what} for quota: {e}"))
    };
    let mut pod = None;
    let steps = r.strategy;
    let usage = if steps.admits(Admission::PodQuota) {
        {
            let p: Pod = serde_json::from_value(obj.clone()).map_err(|e| typed("pod", e))?;
            let facts = PodQuota::of(&p);
            let usage = facts.usage(Timestamp::now());
            pod = Some((facts, p.spec.unwrap_or_default()));
            usage
        }
    } else if steps.admits(Admission::ServiceQuota) {
        {
            let svc: Service =
                serde_json::from_value(obj.clone()).map_err(|e| typed("service", e))?;
            quota::service_usage(&svc)
        }
    } else if steps.admits(Admission::ClaimQuota) {
        {
            let pvc: PersistentVolumeClaim =
                serde_json::from_value(obj.clone()).map_err(|e| typed("claim", e))?;
            quota::claim_usage(&pvc)
        }
    } else {
        quota::object_usage(r.group, r.plural)
    };
    Ok(Charged { usage, pod })
}

/// Why a quota refuses an object.
enum Refusal {
    /// Over a limit: `q, requested: …, used: …, limited: …` (joined over quotas).
    Exceeded(String),
    /// Anything else, said as it is (`failed quota: …`, `status unknown for quota: …`).
    Other(String),
}

/// One quota's part in an admission: what it is charged.
struct Charge {
    quota: String,
    requested: Usage,
}

fn forbidden(r: &ResourceInfo, name: &str, msg: String) -> Status {
    Status::forbidden(format!(
        "{} \"{name}\" is forbidden: {msg}",
        r.group_resource()
    ))
    .with_details(r.group, r.plural, name)
}

/// The part of the charge `q` tracks, or `None` when `q` does not apply to the object.
/// A quota with scopes tracks only pods, and only those its scopes select.
fn tracked(q: &ResourceQuota, c: &Charged) -> Result<Option<Usage>, Refusal> {
    let spec = q.spec.clone().unwrap_or_default();
    let hard = spec.hard.clone().unwrap_or_default();
    let selectors = quota::quota_selectors(&spec);
    match &c.pod {
        Some((facts, _)) if !quota::pod_matches(&selectors, &facts.scopes) => return Ok(None),
        None if !selectors.is_empty() => return Ok(None),
        _ => {}
    }
    let is_pod = c.pod.is_some();
    let requested = c.usage.restricted_to(
        hard.keys()
            .map(String::as_str)
            .filter(|n| c.usage.contains(n) || (is_pod && PodQuota::is_pod_resource(n))),
    );
    if requested.is_empty() {
        return Ok(None);
    }
    if let Some((_, pod_spec)) = &c.pod {
        if let Some(missing) = quota::missing_constraints(pod_spec, hard.keys().map(String::as_str))
        {
            return Err(Refusal::Other(format!(
                "failed quota: {}: {missing}",
                name_of(q)
            )));
        }
    }
    Ok(Some(requested))
}

fn name_of(q: &ResourceQuota) -> &str {
    q.metadata.name.as_deref().unwrap_or_default()
}

/// Checks `requested` against `q`'s used and hard amounts: the failure text, if any.
fn over_limit(q: &ResourceQuota, requested: &Usage) -> Result<(), Refusal> {
    let parse = |l: Option<&std::collections::BTreeMap<String, _>>| {
        l.map(Usage::parse)
            .transpose()
            .map(Option::unwrap_or_default)
    };
    let bad = |e: cairn_semantics::QuantityError| Refusal::Other(e.to_string());
    let hard = parse(q.spec.as_ref().and_then(|s| s.hard.as_ref())).map_err(bad)?;
    let used = parse(q.status.as_ref().and_then(|s| s.used.as_ref())).map_err(bad)?;
    let unknown: Vec<&str> = requested.names().filter(|n| !used.contains(n)).collect();
    if !unknown.is_empty() {
        return Err(Refusal::Other(format!(
            "status unknown for quota: {}, resources: {}",
            name_of(q),
            unknown.join(",")
        )));
    }
    let exceeded: Vec<&str> = requested
        .iter()
        .filter(|(n, amount)| used.get(n).unwrap_or(0) + amount > hard.get(n).unwrap_or(0))
        .map(|(n, _)| n)
        .collect();
    if exceeded.is_empty() {
        return Ok(());
    }
    let only = |u: &Usage| u.restricted_to(exceeded.iter().copied()).pretty();
    Err(Refusal::Exceeded(format!(
        "{}, requested: {}, used: {}, limited: {}",
        name_of(q),
        only(requested),
        only(&used),
        only(&hard)
    )))
}

impl ApiState {
    /// The namespace's quotas, as stored.
    fn quotas_of(&self, ns: &str) -> Vec<ResourceQuota> {
        let Some(r) = registry::find("", "v1", "resourcequotas") else {
            return Vec::new();
        };
        let (objects, _) = self.cache.list(&r.list_prefix(Some(ns)));
        objects
            .iter()
            .filter_map(|o| serde_json::from_slice(&o.bytes).ok())
            .collect()
    }

    /// Admits a new object against the quotas of `ns` and charges them (not on dry runs).
    pub(crate) async fn charge_quotas(
        &self,
        r: &'static ResourceInfo,
        ns: &str,
        obj: &Value,
        name: &str,
        dry_run: bool,
    ) -> Result<(), Status> {
        let quotas = self.quotas_of(ns);
        if quotas.is_empty() {
            return Ok(());
        }
        let c = charged(r, obj)?;
        let mut charges = Vec::new();
        let mut failures = Vec::new();
        for q in &quotas {
            let checked = tracked(q, &c).and_then(|requested| match requested {
                Some(requested) => over_limit(q, &requested).map(|()| Some(requested)),
                None => Ok(None),
            });
            match checked {
                Ok(Some(requested)) => charges.push(Charge {
                    quota: name_of(q).to_string(),
                    requested,
                }),
                Ok(None) => {}
                Err(Refusal::Exceeded(part)) => failures.push(part),
                Err(Refusal::Other(msg)) => return Err(forbidden(r, name, msg)),
            }
        }
        if !failures.is_empty() {
            let msg = format!("exceeded quota: {}", failures.join(", "));
            return Err(forbidden(r, name, msg));
        }
        if dry_run {
            return Ok(());
        }
        for c in charges {
            self.record_charge(r, ns, name, &c).await?;
        }
        Ok(())
    }

    /// Adds a charge to the quota's `status.used`, re-checking against the latest copy.
    async fn record_charge(
        &self,
        r: &ResourceInfo,
        ns: &str,
        name: &str,
        c: &Charge,
    ) -> Result<(), Status> {
        let Some(quotas) = registry::find("", "v1", "resourcequotas") else {
            return Ok(());
        };
        let opts = WriteOptions::default();
        self.guaranteed_update(
            quotas,
            Some(ns),
            &c.quota,
            Some("status"),
            &opts,
            |current| {
                let q: ResourceQuota = serde_json::from_value(current.clone()).map_err(|e| {
                    Status::internal(format!("reading quota {ns}/{}: {e}", c.quota))
                })?;
                over_limit(&q, &c.requested).map_err(|refusal| {
                    let msg = match refusal {
                        Refusal::Exceeded(part) => format!("exceeded quota: {part}"),
                        Refusal::Other(msg) => msg,
                    };
                    forbidden(r, name, msg)
                })?;
                let mut used = q
                    .status
                    .as_ref()
                    .and_then(|s| s.used.as_ref())
                    .map(Usage::parse)
                    .transpose()
                    .map_err(|e| Status::internal(e.to_string()))?
                    .unwrap_or_default();
                used.add(&c.requested);
                let mut next = current.clone();
                next["status"]["used"] = json!(used.to_list());
                Ok(next)
            },
        )
        .await
        .map(|_| ())
    }
}
