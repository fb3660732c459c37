//! Autoscaling on the lab: a Deployment whose pods burn CPU per HTTP request behind a
//! Service (upstream's php-apache walkthrough, on busybox's httpd), `kubectl autoscale`
//! at 50 % CPU, a load generator pod; the HPA scales out, and back in once the load is
//! gone and the (flag-shortened) stabilization window has passed.

use std::time::Duration;

use crate::common::{eventually, Lab};

/// Each request to `/cgi-bin/burn` spins a shell loop for tens of milliseconds.
const BURNER: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: burn}
spec:
  replicas: 1
  selector: {matchLabels: {app: burn}}
  template:
    metadata: {labels: {app: burn}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: burn
        image: busybox
        resources: {requests: {cpu: 100m}, limits: {cpu: 300m}}
        ports: [{containerPort: 8080}]
        command: ["sh", "-c"]
        args:
        - |
          mkdir -p /www/cgi-bin
          printf '#!/bin/sh\necho Content-Type: text/plain\necho\ni=0\nwhile [ $i -lt 20000 ]; do i=$((i+1)); done\necho burnt\n' > /www/cgi-bin/burn
          chmod +x /www/cgi-bin/burn
          exec httpd -f -p 8080 -h /www
---
apiVersion: v1
kind: Service
metadata: {name: burn}
spec:
  selector: {app: burn}
  ports: [{port: 80, targetPort: 8080}]
"#;

fn replicas(lab: &Lab) -> Option<i32> {
    lab.try_kubectl(&[
        "get",
        "deployment",
        "burn",
        "-o",
        "jsonpath={.spec.replicas}",
    ])
    .ok()?
    .trim()
    .parse()
    .ok()
}

fn describe(lab: &Lab) -> String {
    lab.try_kubectl(&["describe", "hpa", "burn"])
        .unwrap_or_default()
}

/// One line of `kubectl describe hpa`'s Conditions table, by type, as its words.
fn condition_words(described: &str, type_: &str) -> Vec<String> {
    let line = described
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with(&format!("{type_} ")))
        .unwrap_or("");
    line.split_whitespace()
        .take(3)
        .map(str::to_string)
        .collect()
}

pub fn hpa_scales_out_and_back_in(lab: &Lab) {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("burn.yaml");
    std::fs::write(&manifest, BURNER).unwrap();
    lab.kubectl(&["apply", "-f", manifest.to_str().unwrap()]);
    lab.kubectl(&["rollout", "status", "deployment/burn", "--timeout=120s"]);
    lab.kubectl(&[
        "autoscale",
        "deployment",
        "burn",
        "--cpu-percent=50",
        "--min=1",
        "--max=4",
    ]);
    eventually(
        "the HPA computes from a valid metric",
        Duration::from_secs(60),
        || {
            let d = describe(lab);
            (condition_words(&d, "ScalingActive") == ["ScalingActive", "True", "ValidMetricFound"])
                .then_some(())
        },
    );
    let load = "while true; do wget -q -O /dev/null http://burn/cgi-bin/burn; done";
    lab.kubectl(&["run", "load", "--image=busybox", "--", "sh", "-c", load]);
    let out = eventually(
        "the HPA scales out under load",
        Duration::from_secs(120),
        || (replicas(lab)? > 1).then(|| describe(lab)),
    );
    assert!(out.contains("SuccessfulRescale"), "{out}");
    assert!(
        out.contains("reason: cpu resource utilization (percentage of request) above target"),
        "{out}"
    );
    assert_eq!(
        condition_words(&out, "AbleToScale")[..2],
        ["AbleToScale", "True"],
        "{out}"
    );
    lab.kubectl(&["delete", "pod", "load", "--grace-period=0", "--force"]);
    let out = eventually("the HPA scales back in", Duration::from_secs(120), || {
        (replicas(lab)? == 1).then(|| describe(lab))
    });
    assert!(out.contains("All metrics below target"), "{out}");
    assert_eq!(
        condition_words(&out, "ScalingActive"),
        ["ScalingActive", "True", "ValidMetricFound"],
        "{out}"
    );
    lab.kubectl(&["delete", "hpa", "burn"]);
    lab.kubectl(&["delete", "-f", manifest.to_str().unwrap(), "--wait=false"]);
}
