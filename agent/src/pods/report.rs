//! The status phase: the pod's status from what runs and what the worker saw, written to
//! `pods/status` only when it changed.

use super::*;

impl Worker {
    pub(super) async fn write_status(
        &mut self,
        pod: &Pod,
        containers: &[&ContainerStatus],
        pod_ip: Option<String>,
    ) {
        let obs = self.observed(pod, containers, pod_ip);
        for c in containers {
            let live = c.state == ContainerState::Running;
            self.h
                .ledger
                .set_log_live(std::path::Path::new(&c.log_path), live);
        }
        let status = status::pod_status(pod, &obs, self.h.clock.now());
        self.count_start(pod, &status);
        if self.last_status.as_ref() == Some(&status) || pod.status.as_ref() == Some(&status) {
            self.last_status = Some(status);
            return;
        }
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let name = if is_static(pod) {
            crate::pod_meta::api_name(pod)
        } else {
            pod.metadata.name.clone().unwrap_or_default()
        };
        match self.h.api.write_status(ns, &name, &status).await {
            Ok(()) => self.last_status = Some(status),
            // A static pod's mirror may not exist yet; a deleted pod's worker ends soon.
            Err(PodApiError::NotFound(_)) => {}
            Err(e) => {
                warn!(error = %e, "writing pod status");
                self.wake_in(Duration::from_secs(2));
            }
        }
    }

    /// Observes the pod's start once, when this agent first reports it Running. A pod
    /// that was already Running (an agent restart) is not a start.
    fn count_start(&mut self, pod: &Pod, status: &PodStatus) {
        let phase = |s: Option<&PodStatus>| s.and_then(|s| s.phase.as_deref()) == Some("Running");
        if self.start_counted || !phase(Some(status)) {
            return;
        }
        self.start_counted = true;
        if !phase(pod.status.as_ref()) {
            self.h.metrics.pod_started(self.seen_at.elapsed());
        }
    }

    /// What the status is made of besides the pod: containers, waiting reasons, probe
    /// verdicts, addresses, and an admission rejection.
    fn observed<'a>(
        &self,
        pod: &Pod,
        containers: &[&'a ContainerStatus],
        pod_ip: Option<String>,
    ) -> Observed<'a> {
        let pod_failure = match &self.state {
            WorkerState::Rejected { reason, message } => Some((reason.clone(), message.clone())),
            WorkerState::Evicted { message } => Some(("Evicted".to_string(), message.clone())),
            _ => None,
        };
        let mut obs = Observed {
            containers: containers.to_vec(),
            waiting: self.waiting.clone(),
            pod_ip,
            host_ip: self.h.node.node_ip.clone(),
            pod_failure,
            terminal: matches!(self.state, WorkerState::Terminating { .. }),
            ..Default::default()
        };
        for ((name, kind), st) in &self.probes {
            match kind {
                ProbeKind::Readiness => {
                    obs.ready.insert(name.clone(), st.ok);
                }
                ProbeKind::Startup => {
                    obs.started.insert(name.clone(), st.ok);
                }
                ProbeKind::Liveness => {}
            }
        }
        // A probe that has not run yet counts as failing.
        for c in pod.spec.iter().flat_map(|s| s.containers.iter()) {
            if c.readiness_probe.is_some() {
                obs.ready.entry(c.name.clone()).or_insert(false);
            }
            if c.startup_probe.is_some() {
                obs.started.entry(c.name.clone()).or_insert(false);
            }
        }
        obs
    }
}

pub(super) fn write_if_changed(path: &std::path::Path, content: &[u8]) -> std::io::Result<()> {
    if std::fs::read(path).ok().as_deref() == Some(content) {
        return Ok(());
    }
    std::fs::write(path, content)
}
