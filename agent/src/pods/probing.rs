//! Liveness, readiness and startup probes of running containers.

use super::*;

impl Worker {
    pub(super) async fn run_probes(
        &mut self,
        pod: &Pod,
        c: &Container,
        cur: &ContainerStatus,
        pod_ip: Option<&str>,
    ) {
        // Readiness and liveness wait until the startup probe has succeeded once.
        if let Some(p) = &c.startup_probe {
            if !self
                .probe_once(pod, c, cur, pod_ip, ProbeKind::Startup, p)
                .await
            {
                let key = (c.name.clone(), ProbeKind::Startup);
                let failed_out = self
                    .probes
                    .get(&key)
                    .is_some_and(|s| s.failures >= p.failure_threshold.unwrap_or(3).max(1));
                if failed_out {
                    kill_container(
                        &self.h,
                        pod,
                        Some(c),
                        cur,
                        pod_ip,
                        probe_grace(pod, p),
                        &format!(
                            "Container {} failed startup probe, will be restarted",
                            c.name
                        ),
                    )
                    .await;
                    self.probes.remove(&key);
                }
                return;
            }
        }
        if let Some(p) = &c.readiness_probe {
            self.probe_once(pod, c, cur, pod_ip, ProbeKind::Readiness, p)
                .await;
        }
        if let Some(p) = &c.liveness_probe {
            let alive = self
                .probe_once(pod, c, cur, pod_ip, ProbeKind::Liveness, p)
                .await;
            if !alive {
                kill_container(
                    &self.h,
                    pod,
                    Some(c),
                    cur,
                    pod_ip,
                    probe_grace(pod, p),
                    &format!(
                        "Container {} failed liveness probe, will be restarted",
                        c.name
                    ),
                )
                .await;
                self.probes.remove(&(c.name.clone(), ProbeKind::Liveness));
            }
        }
    }

    pub(super) async fn probe_once(
        &mut self,
        pod: &Pod,
        c: &Container,
        cur: &ContainerStatus,
        pod_ip: Option<&str>,
        kind: ProbeKind,
        probe: &k8s_openapi::api::core::v1::Probe,
    ) -> bool {
        let key = (c.name.clone(), kind);
        let now = self.h.clock.now();
        let state = self
            .probes
            .entry(key.clone())
            .or_insert_with(|| ProbeState::new(&cur.id, kind, cur.started_at, now));
        if state.container_id != cur.id {
            *state = ProbeState::new(&cur.id, kind, cur.started_at, now);
        }
        // A startup probe is done once it succeeded; it never runs again for this instance.
        if kind == ProbeKind::Startup && state.ok {
            return true;
        }
        if !state.due(probe) {
            return state.ok;
        }
        let run = probes::run(self.h.runtime.as_ref(), c, &cur.id, pod_ip, probe);
        let Some((ok, message)) = self.unless_deleted(run).await else {
            // The pod is being deleted: no verdict, and no kill for it.
            return true;
        };
        let state = self
            .probes
            .entry(key)
            .or_insert_with(|| ProbeState::new(&cur.id, kind, cur.started_at, now));
        state.record(probe, ok);
        let verdict = state.ok;
        self.count_probe(pod, c, kind, ok);
        if !ok {
            let what = match kind {
                ProbeKind::Liveness => "Liveness",
                ProbeKind::Readiness => "Readiness",
                ProbeKind::Startup => "Startup",
            };
            self.h.events.pod(
                pod,
                Some(&c.name),
                EventType::Warning,
                "Unhealthy",
                &format!("{what} probe failed: {message}"),
            );
        }
        verdict
    }

    fn count_probe(&self, pod: &Pod, c: &Container, kind: ProbeKind, ok: bool) {
        use crate::metrics::{ProbeTarget, ProbeType};
        let probe_type = match kind {
            ProbeKind::Liveness => ProbeType::Liveness,
            ProbeKind::Readiness => ProbeType::Readiness,
            ProbeKind::Startup => ProbeType::Startup,
        };
        let target = ProbeTarget {
            namespace: pod.metadata.namespace.as_deref().unwrap_or_default(),
            pod: pod.metadata.name.as_deref().unwrap_or_default(),
            pod_uid: &self.uid,
            container: &c.name,
        };
        self.h.metrics.probe(probe_type, target, Some(ok));
    }
}
