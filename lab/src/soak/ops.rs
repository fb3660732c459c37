//! What the soak does to the cluster: workloads created, scaled and deleted, bare pods of
//! every deletion flavour (grace 0, the default, a long preStop, images that cannot be
//! pulled), exec and port-forward sessions opened and dropped. Each operation is one
//! kubectl call or session; what exists is tracked in [`World`].

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use chrono::{DateTime, Utc};
use rand::seq::IndexedRandom;
use rand::Rng;
use serde_json::{json, Value};

use super::error::SoakError;
use super::kubectl::Kubectl;

/// A registry address nothing listens on: pulls are refused at once.
pub const REFUSED_IMAGE: &str = "198.18.0.1:5999/soak/missing:1";
/// A registry address that accepts connections and never answers (the soak holds a
/// listener there): pulls hang until their timeout.
pub const HANGING_IMAGE: &str = "198.18.0.1:5998/soak/hanging:1";

/// The kinds of bare pods the soak makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodKind {
    /// The default grace period (httpd ignores SIGTERM as PID 1: it waits out the grace).
    Plain,
    /// `terminationGracePeriodSeconds: 0`.
    GraceZero,
    /// A 5 s preStop hook within a 10 s grace period.
    LongPreStop,
    Refused,
    Hanging,
}

/// What the soak made and still has, and when each workload last changed.
#[derive(Default)]
pub struct World {
    pub namespace: String,
    next: u32,
    pub deployments: BTreeMap<String, i64>,
    pub statefulsets: BTreeMap<String, i64>,
    pub jobs: Vec<String>,
    pub cronjob: Option<String>,
    pub pods: BTreeMap<String, PodKind>,
    /// `namespace/name` → when its size last changed (for convergence).
    pub changed: HashMap<String, DateTime<Utc>>,
}

impl World {
    pub fn new(namespace: &str) -> World {
        World {
            namespace: namespace.to_string(),
            ..Default::default()
        }
    }

    fn name(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}-{}", self.next)
    }

    fn touched(&mut self, name: &str) {
        let key = format!("{}/{name}", self.namespace);
        self.changed.insert(key, Utc::now());
    }
}

fn meta(ns: &str, name: &str) -> Value {
    json!({"name": name, "namespace": ns, "labels": {"soak": name}})
}

fn httpd() -> Value {
    json!({"name": "web", "image": "httpd",
           "readinessProbe": {"tcpSocket": {"port": 80}, "periodSeconds": 2}})
}

fn workload(kind: &str, ns: &str, name: &str, replicas: i64) -> Value {
    let mut spec = json!({
        "replicas": replicas,
        "selector": {"matchLabels": {"soak": name}},
        "template": {"metadata": {"labels": {"soak": name}},
                     "spec": {"terminationGracePeriodSeconds": 2, "containers": [httpd()]}},
    });
    if kind == "StatefulSet" {
        spec["serviceName"] = json!(name);
        spec["podManagementPolicy"] = json!("Parallel");
    }
    json!({"apiVersion": "apps/v1", "kind": kind, "metadata": meta(ns, name), "spec": spec})
}

fn job_spec(completions: i64) -> Value {
    json!({"completions": completions, "parallelism": 2, "backoffLimit": 2,
           "template": {"spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
               "containers": [{"name": "work", "image": "busybox",
                               "command": ["sh", "-c", "sleep 2"]}]}}})
}

fn bare_pod(ns: &str, name: &str, kind: PodKind) -> Value {
    let mut c = httpd();
    let mut spec = json!({});
    match kind {
        PodKind::Plain => {}
        PodKind::GraceZero => spec["terminationGracePeriodSeconds"] = json!(0),
        PodKind::LongPreStop => {
            spec["terminationGracePeriodSeconds"] = json!(10);
            c["lifecycle"] = json!({"preStop": {"exec": {"command": ["sleep", "5"]}}});
        }
        PodKind::Refused => c["image"] = json!(REFUSED_IMAGE),
        PodKind::Hanging => c["image"] = json!(HANGING_IMAGE),
    }
    spec["containers"] = json!([c]);
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta(ns, name), "spec": spec})
}

impl World {
    pub fn create_deployment(&mut self, k: &Kubectl, rng: &mut impl Rng) -> Result<(), SoakError> {
        let name = self.name("deploy");
        let replicas = rng.random_range(1..=3);
        k.apply(&workload("Deployment", &self.namespace, &name, replicas))?;
        self.deployments.insert(name.clone(), replicas);
        self.touched(&name);
        Ok(())
    }

    pub fn create_statefulset(&mut self, k: &Kubectl, rng: &mut impl Rng) -> Result<(), SoakError> {
        let name = self.name("sts");
        let replicas = rng.random_range(1..=2);
        k.apply(&workload("StatefulSet", &self.namespace, &name, replicas))?;
        self.statefulsets.insert(name.clone(), replicas);
        self.touched(&name);
        Ok(())
    }

    /// Scales a Deployment (`statefulset` false) or StatefulSet to 0–3.
    pub fn scale(
        &mut self,
        k: &Kubectl,
        rng: &mut impl Rng,
        statefulset: bool,
    ) -> Result<(), SoakError> {
        let (kind, set) = if statefulset {
            ("statefulset", &self.statefulsets)
        } else {
            ("deployment", &self.deployments)
        };
        let Some(name) = set.keys().cloned().collect::<Vec<_>>().choose(rng).cloned() else {
            return Ok(());
        };
        let replicas: i64 = rng.random_range(0..=3);
        let target = format!("{kind}/{name}");
        k.run(&[
            "scale",
            "-n",
            &self.namespace,
            &target,
            &format!("--replicas={replicas}"),
        ])?;
        if statefulset {
            self.statefulsets.insert(name.clone(), replicas);
        } else {
            self.deployments.insert(name.clone(), replicas);
        }
        self.touched(&name);
        Ok(())
    }

    pub fn delete_workload(&mut self, k: &Kubectl, rng: &mut impl Rng) -> Result<(), SoakError> {
        let mut all: Vec<(String, &str)> = self
            .deployments
            .keys()
            .map(|n| (n.clone(), "deployment"))
            .collect();
        all.extend(self.statefulsets.keys().map(|n| (n.clone(), "statefulset")));
        let Some((name, kind)) = all.choose(rng).cloned() else {
            return Ok(());
        };
        k.run(&["delete", "-n", &self.namespace, kind, &name, "--wait=false"])?;
        self.deployments.remove(&name);
        self.statefulsets.remove(&name);
        Ok(())
    }

    pub fn create_job(&mut self, k: &Kubectl, rng: &mut impl Rng) -> Result<(), SoakError> {
        let name = self.name("job");
        let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta(&self.namespace, &name),
                         "spec": job_spec(rng.random_range(1..=2))});
        k.apply(&job)?;
        self.jobs.push(name);
        Ok(())
    }

    /// Deletes a Job (its pods with it) — some right after their creation.
    pub fn delete_job(&mut self, k: &Kubectl, rng: &mut impl Rng) -> Result<(), SoakError> {
        if self.jobs.is_empty() {
            return Ok(());
        }
        let name = self.jobs.remove(rng.random_range(0..self.jobs.len()));
        k.run(&[
            "delete",
            "-n",
            &self.namespace,
            "job",
            &name,
            "--cascade=background",
            "--wait=false",
        ])?;
        Ok(())
    }

    /// A CronJob every minute while there is none; deleted otherwise.
    pub fn toggle_cronjob(&mut self, k: &Kubectl) -> Result<(), SoakError> {
        if let Some(name) = self.cronjob.take() {
            k.run(&[
                "delete",
                "-n",
                &self.namespace,
                "cronjob",
                &name,
                "--wait=false",
            ])?;
            return Ok(());
        }
        let name = self.name("cron");
        let cron = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta(&self.namespace, &name),
                          "spec": {"schedule": "*/1 * * * *", "successfulJobsHistoryLimit": 1,
                                   "jobTemplate": {"spec": job_spec(1)}}});
        k.apply(&cron)?;
        self.cronjob = Some(name);
        Ok(())
    }

    pub fn create_pod(&mut self, k: &Kubectl, rng: &mut impl Rng) -> Result<(), SoakError> {
        let kind = *[
            PodKind::Plain,
            PodKind::GraceZero,
            PodKind::LongPreStop,
            PodKind::Refused,
            PodKind::Hanging,
        ]
        .choose(rng)
        .unwrap_or(&PodKind::Plain);
        let name = self.name("pod");
        k.apply(&bare_pod(&self.namespace, &name, kind))?;
        self.pods.insert(name, kind);
        Ok(())
    }

    /// Deletes a bare pod: its own grace period, a grace of 1 s, or forced.
    pub fn delete_pod(&mut self, k: &Kubectl, rng: &mut impl Rng) -> Result<(), SoakError> {
        let names: Vec<String> = self.pods.keys().cloned().collect();
        let Some(name) = names.choose(rng).cloned() else {
            return Ok(());
        };
        let how: &[&str] = [
            &[][..],
            &["--grace-period=1"][..],
            &["--grace-period=0", "--force"][..],
        ]
        .choose(rng)
        .copied()
        .unwrap_or(&[]);
        let mut args = vec![
            "delete",
            "-n",
            &self.namespace,
            "pod",
            &name,
            "--wait=false",
        ];
        args.extend(how);
        k.run(&args)?;
        self.pods.remove(&name);
        Ok(())
    }

    /// A running pod of the soak that serves HTTP (a workload's or a plain bare pod).
    pub fn serving_pod(&self, pods: &Value, rng: &mut impl Rng) -> Option<String> {
        let running: Vec<String> = pods["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
            .filter(|p| {
                p["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
            .filter_map(|p| p["metadata"]["name"].as_str().map(String::from))
            .filter(|n| !n.starts_with("job-") && !n.starts_with("cron-"))
            .collect();
        running.choose(rng).cloned()
    }
}

/// `kubectl exec` of a short command, its output checked.
pub fn exec(k: &Kubectl, ns: &str, pod: &str) -> Result<(), SoakError> {
    let out = k.run(&["exec", "-n", ns, pod, "--", "sh", "-c", "echo soak-exec"])?;
    if out.trim() != "soak-exec" {
        return Err(SoakError::Violation(format!(
            "exec in {ns}/{pod} printed {out:?}"
        )));
    }
    Ok(())
}

/// An interactive exec whose client goes away mid-session.
pub fn dropped_exec(k: &Kubectl, ns: &str, pod: &str) -> Result<(), SoakError> {
    let mut child = k.spawn(&["exec", "-i", "-n", ns, pod, "--", "cat"])?;
    if let Some(stdin) = child.stdin.as_mut() {
        // The session may already have failed; the drop is what is being exercised.
        let _ = stdin.write_all(b"dropped\n");
    }
    let mut first = [0u8; 8];
    if let Some(out) = child.stdout.as_mut() {
        // Waits for the echo: the session is established before the client dies.
        let _ = out.read(&mut first);
    }
    let _ = child.kill();
    let _ = child.wait();
    Ok(())
}

/// `kubectl port-forward` to port 80 of `pod`, one HTTP request through it, then the
/// client killed.
pub fn port_forward(k: &Kubectl, ns: &str, pod: &str) -> Result<(), SoakError> {
    let mut child = k.spawn(&["port-forward", "-n", ns, &format!("pod/{pod}"), ":80"])?;
    let result = forwarded_request(&mut child, ns, pod);
    let _ = child.kill();
    let _ = child.wait();
    result
}

fn forwarded_request(
    child: &mut std::process::Child,
    ns: &str,
    pod: &str,
) -> Result<(), SoakError> {
    let broken = |what: String| SoakError::Violation(format!("port-forward to {ns}/{pod}: {what}"));
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| broken("no stdout".into()))?;
    // Kept open until the end: kubectl reports each connection there and dies of SIGPIPE
    // if nobody holds the pipe.
    let mut stdout = BufReader::new(stdout);
    let mut line = String::new();
    stdout
        .read_line(&mut line)
        .map_err(|e| broken(e.to_string()))?;
    // "Forwarding from 127.0.0.1:PORT -> 80"
    let port = line
        .split_whitespace()
        .nth(2)
        .and_then(|a| a.rsplit(':').next())
        .and_then(|p| p.parse::<u16>().ok())
        .ok_or_else(|| broken(format!("kubectl said {line:?}")))?;
    let mut conn = TcpStream::connect(("127.0.0.1", port)).map_err(|e| broken(e.to_string()))?;
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| broken(e.to_string()))?;
    conn.write_all(b"GET / HTTP/1.0\r\n\r\n")
        .map_err(|e| broken(e.to_string()))?;
    let mut reply = String::new();
    // A reset after the body is fine; what matters is the page.
    let _ = conn.read_to_string(&mut reply);
    drop(stdout);
    if !reply.contains("It works!") {
        return Err(broken(format!("answered {reply:?}")));
    }
    Ok(())
}
