//! What a failed pod means for its Job: the pod failure policy's verdict
//! (`podFailurePolicy`: FailJob, Ignore, Count on exit codes and pod conditions), and the
//! exponential back-off before failed pods are replaced.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::{Job, PodFailurePolicyRule};
use parking_lot::Mutex;

use crate::cached_pod::CachedPod;

/// The verdict on one failed pod.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Counts toward `backoffLimit` (no rule matched, or `Count`).
    Count,
    /// Not counted (`Ignore`): a disruption, say.
    Ignore,
    /// The whole Job fails, with this message.
    FailJob(String),
}

/// Upstream's `matchPodFailurePolicy`: the first rule that matches decides.
pub fn verdict(job: &Job, pod: &CachedPod) -> Verdict {
    let Some(policy) = job
        .spec
        .as_ref()
        .and_then(|s| s.pod_failure_policy.as_ref())
    else {
        return Verdict::Count;
    };
    let Some(failure) = pod.failure.as_deref() else {
        return Verdict::Count;
    };
    let pod_name = format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or("")
    );
    for (i, rule) in policy.rules.iter().enumerate() {
        let Some(what) = rule_matches(rule, failure) else {
            continue;
        };
        return match rule.action.as_str() {
            "Ignore" => Verdict::Ignore,
            "FailJob" => Verdict::FailJob(format!(
                "{what} for pod {pod_name} matching FailJob rule at index {i}"
            )),
            _ => Verdict::Count,
        };
    }
    Verdict::Count
}

/// What matched, in the words of upstream's messages.
fn rule_matches(
    rule: &PodFailurePolicyRule,
    failure: &crate::cached_pod::PodFailure,
) -> Option<String> {
    if let Some(codes) = &rule.on_exit_codes {
        let wanted = |code: i32| codes.values.contains(&code);
        return failure
            .exit_codes
            .iter()
            .filter(|(name, _)| codes.container_name.as_ref().is_none_or(|c| c == name))
            // Exit code 0 never matches: the container succeeded.
            .filter(|(_, code)| *code != 0)
            .find(|(_, code)| match codes.operator.as_str() {
                "In" => wanted(*code),
                "NotIn" => !wanted(*code),
                _ => false,
            })
            .map(|(name, code)| format!("Container {name} failed with exit code {code}"));
    }
    let patterns = rule.on_pod_conditions.as_ref()?;
    patterns.iter().find_map(|p| {
        failure
            .conditions
            .iter()
            .any(|(t, s)| *t == p.type_ && *s == p.status)
            .then(|| format!("Pod has condition {} matching", p.type_))
    })
}

/// Per-Job failure back-off: `base * 2^(failures-1)` after the latest failure, capped at
/// `max` (upstream: 10 s doubling to 6 min), kept in memory as upstream does.
pub struct Backoff {
    pub base: Duration,
    pub max: Duration,
    last: Mutex<HashMap<String, (u32, Instant)>>,
}

impl Backoff {
    pub fn new(base: Duration) -> Self {
        Backoff {
            base,
            max: Duration::from_secs(360),
            last: Mutex::default(),
        }
    }

    /// `key` saw `n` more failed pods just now.
    pub fn failed(&self, key: &str, n: u32) {
        if n == 0 {
            return;
        }
        let mut m = self.last.lock();
        let e = m.entry(key.to_string()).or_insert((0, Instant::now()));
        e.0 += n;
        e.1 = Instant::now();
    }

    /// How long `key` must still wait before creating pods.
    pub fn remaining(&self, key: &str) -> Duration {
        let m = self.last.lock();
        let Some(&(failures, at)) = m.get(key) else {
            return Duration::ZERO;
        };
        let exp = failures.saturating_sub(1).min(20);
        let delay = self.base.saturating_mul(1 << exp).min(self.max);
        delay.saturating_sub(at.elapsed())
    }

    pub fn forget(&self, key: &str) {
        self.last.lock().remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cached_pod::PodFailure;

    fn job(rules: serde_json::Value) -> Job {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "j"},
            "spec": {"template": {}, "podFailurePolicy": {"rules": rules}}
        }))
        .unwrap()
    }

    fn failed(codes: &[(&str, i32)], conditions: &[(&str, &str)]) -> CachedPod {
        CachedPod {
            phase: Some("Failed".into()),
            failure: Some(Box::new(PodFailure {
                exit_codes: codes.iter().map(|(n, c)| (n.to_string(), *c)).collect(),
                conditions: conditions
                    .iter()
                    .map(|(t, s)| (t.to_string(), s.to_string()))
                    .collect(),
            })),
            ..Default::default()
        }
    }

    #[test]
    fn first_matching_rule_decides() {
        let j = job(serde_json::json!([
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
            {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
            {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [1]}},
        ]));
        assert_eq!(
            verdict(&j, &failed(&[("main", 1)], &[("DisruptionTarget", "True")])),
            Verdict::Ignore
        );
        let Verdict::FailJob(msg) = verdict(&j, &failed(&[("main", 42)], &[])) else {
            panic!("expected FailJob");
        };
        assert_eq!(
            msg,
            "Container main failed with exit code 42 for pod / matching FailJob rule at index 1"
        );
        assert_eq!(verdict(&j, &failed(&[("side", 42)], &[])), Verdict::Count);
        assert_eq!(verdict(&j, &failed(&[("main", 0)], &[])), Verdict::Count);
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let b = Backoff::new(Duration::from_secs(10));
        assert_eq!(b.remaining("k"), Duration::ZERO);
        b.failed("k", 1);
        assert!(b.remaining("k") > Duration::from_secs(9));
        b.failed("k", 2);
        assert!(b.remaining("k") > Duration::from_secs(39));
        b.failed("k", 30);
        assert!(b.remaining("k") <= Duration::from_secs(360));
        b.forget("k");
        assert_eq!(b.remaining("k"), Duration::ZERO);
    }
}
