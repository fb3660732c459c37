//! `kubectl logs` (plain, tail, follow), stats, the agent's HTTPS port and who may use it,
//! the ServiceAccount token volume, and static pods: one cluster for the whole flow.

use super::*;

#[tokio::test]
async fn kubectl_logs_and_static_pods() {
    let _cgroups;
    let cluster = Cluster::start().await;
    _cgroups = CgroupCleanup(cluster.cgroup_root.clone());
    let img = cluster.image.clone();
    start_talker(&cluster, &img).await;
    let follow = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .args(["logs", "-f", "talker"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    logs_show_both_lines_and_tail(&cluster).await;
    service_account_token_is_mounted_and_works(&cluster).await;
    stats_summary_reports_pod_and_node(&cluster).await;
    agent_port_refuses_strangers_and_viewers(&cluster).await;
    deleting_pod_ends_follow(&cluster, follow).await;
    static_pod_runs_mirrors_and_goes(&cluster, &img).await;
}

async fn start_talker(cluster: &Cluster, img: &str) {
    cluster
        .create(busybox_pod(
            "talker",
            img,
            json!([{"name": "c", "image": img, "command": ["sh", "-c", "echo first; sleep 2; echo second; sleep 3600"]}]),
            json!({}),
        ))
        .await;
    cluster
        .wait_for("talker", "Running", 60, |p| phase(p) == "Running")
        .await;
}

async fn logs_show_both_lines_and_tail(cluster: &Cluster) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = cluster.kubectl(&["logs", "talker"]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if text == "first\nsecond\n" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "kubectl logs: {text:?} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let tail = cluster.kubectl(&["logs", "--tail=1", "talker"]);
    assert_eq!(String::from_utf8_lossy(&tail.stdout), "second\n");
}

/// The agent's `/stats/summary` (admin, on its port) until `done` accepts it or 60 s pass.
pub(super) async fn summary_until(
    cluster: &Cluster,
    what: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) {
    let admin = cairn_testsupport::api_client::http_client(&cluster.kubeconfig).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let summary: serde_json::Value = admin
            .get(format!("https://{NODE_IP}:10250/stats/summary"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if done(&summary) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {summary}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

pub(super) fn pod_stats<'a>(
    summary: &'a serde_json::Value,
    name: &str,
) -> Option<&'a serde_json::Value> {
    summary["pods"]
        .as_array()?
        .iter()
        .find(|p| p["podRef"]["name"] == name)
}

/// The container `name` of a pod in a summary.
pub(super) fn container<'a>(
    pod: &'a serde_json::Value,
    name: &str,
) -> Option<&'a serde_json::Value> {
    pod["containers"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == name)
}

/// 64 MiB held by a sleeping awk (65.5 MiB RSS with busybox's own pages, measured).
const HELD_BYTES: u64 = 64 << 20;

/// cAdvisor-style stats from the housekeeping passes (every second here): a busy loop
/// limited to 500m reads half a core (± 10 %) in some pass, as `kubectl top` would show;
/// a container holding 64 MiB reads a working set within 10 % of it.
async fn stats_summary_reports_pod_and_node(cluster: &Cluster) {
    let img = &cluster.image;
    // 5 MiB in its writable layer first, for the rootfs figure.
    let burn = "dd if=/dev/zero of=/blob bs=1M count=5 2>/dev/null; while :; do :; done";
    let hold = format!("BEGIN {{ s = sprintf(\"%{HELD_BYTES}s\", \"\"); system(\"sleep 3600\") }}");
    let burner = json!([{"name": "burn", "image": img, "command": ["sh", "-c", burn],
        "resources": {"limits": {"cpu": "500m", "memory": "64Mi"}},
        "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 1}},
        {"name": "hold", "image": img, "command": ["awk", hold],
        "resources": {"limits": {"memory": "192Mi"}}}]);
    cluster
        .create(busybox_pod("burner", img, burner, json!({})))
        .await;
    summary_until(cluster, "talker's container and the node", |s| {
        let Some(pod) = pod_stats(s, "talker") else {
            return false;
        };
        pod["memory"]["workingSetBytes"]
            .as_u64()
            .is_some_and(|b| b > 0)
            && container(pod, "c").is_some_and(|c| c["cpu"]["usageCoreNanoSeconds"].is_u64())
            && pod["network"]["name"] == "eth0"
            && s["node"]["memory"]["availableBytes"]
                .as_u64()
                .is_some_and(|b| b > 0)
            && s["node"]["cpu"]["usageNanoCores"].as_u64().is_some()
    })
    .await;
    summary_until(cluster, "the burner at half a core", |s| {
        let Some(burn) = pod_stats(s, "burner").and_then(|p| container(p, "burn")) else {
            return false;
        };
        let cores = burn["cpu"]["usageNanoCores"].as_u64().unwrap_or(0);
        let limited = burn["memory"]["availableBytes"].as_u64().is_some();
        limited && (450_000_000..=550_000_000).contains(&cores)
    })
    .await;
    summary_until(cluster, "the holder's 64 MiB working set (± 10 %)", |s| {
        let held = pod_stats(s, "burner")
            .and_then(|p| container(p, "hold"))
            .and_then(|c| c["memory"]["workingSetBytes"].as_u64());
        held.is_some_and(|b| b.abs_diff(HELD_BYTES) <= HELD_BYTES / 10)
    })
    .await;
    summary_until(
        cluster,
        "the burner's 5 MiB layer and the talker's logs",
        |s| {
            let layer = pod_stats(s, "burner")
                .and_then(|p| container(p, "burn"))
                .and_then(|c| c["rootfs"]["usedBytes"].as_u64());
            let logs = pod_stats(s, "talker")
                .and_then(|p| container(p, "c"))
                .and_then(|c| c["logs"]["usedBytes"].as_u64());
            let storage =
                pod_stats(s, "burner").and_then(|p| p["ephemeral-storage"]["usedBytes"].as_u64());
            layer.is_some_and(|b| b >= 5 << 20) && logs.is_some_and(|b| b > 0) && storage >= layer
        },
    )
    .await;
    network_counters_count_a_transfer(cluster).await;
    metrics_endpoints_parse_and_count_the_burner(cluster).await;
    let out = cluster.kubectl(&["delete", "pod", "burner", "--wait=false"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The pod's network counters as the summary has them: rx and tx bytes of `eth0`.
fn pod_network(summary: &serde_json::Value, name: &str) -> Option<(u64, u64)> {
    let net = &pod_stats(summary, name)?["network"];
    Some((net["rxBytes"].as_u64()?, net["txBytes"].as_u64()?))
}

/// 8 MiB of ICMP echo payload each way between the burner and the talker (`ping -A`:
/// the next request as soon as the reply is in). Each pod's rx and tx counters grow by
/// that ± 5 % (IP fragment and Ethernet headers add 2.4 % at MTU 1500).
async fn network_counters_count_a_transfer(cluster: &Cluster) {
    let (count, size) = (256u64, 32768u64);
    let sent = count * size;
    let ip = cluster.kubectl(&["get", "pod", "talker", "-o", "jsonpath={.status.podIP}"]);
    let ip = String::from_utf8_lossy(&ip.stdout).to_string();
    let admin = cairn_testsupport::api_client::http_client(&cluster.kubeconfig).unwrap();
    let summary = || async {
        let url = format!("https://{NODE_IP}:10250/stats/summary");
        let r = admin.get(url).send().await.unwrap();
        r.json::<serde_json::Value>().await.unwrap()
    };
    let before = summary().await;
    let before = ["burner", "talker"].map(|p| pod_network(&before, p).expect(p));
    let (c, s) = (count.to_string(), size.to_string());
    let args = [
        "exec", "burner", "-c", "hold", "--", "ping", "-q", "-A", "-c", &c, "-s", &s,
    ];
    let out = cluster.kubectl(&[&args[..], &[ip.as_str()]].concat());
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success() && text.contains(&format!("{count} packets received")),
        "ping {ip}: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let within = |grown: u64| (sent..=sent + sent / 20).contains(&grown);
    summary_until(
        cluster,
        "both pods' counters grown by 8 MiB (± 5 %)",
        |s| {
            ["burner", "talker"]
                .iter()
                .zip(before)
                .all(|(pod, (rx0, tx0))| {
                    pod_network(s, pod).is_some_and(|(rx, tx)| {
                        within(rx.saturating_sub(rx0)) && within(tx.saturating_sub(tx0))
                    })
                })
        },
    )
    .await;
}

/// The agent's Prometheus endpoint `path`, read by a real text-format parser.
async fn scrape(cluster: &Cluster, path: &str) -> prometheus_parse::Scrape {
    let admin = cairn_testsupport::api_client::http_client(&cluster.kubeconfig).unwrap();
    let resp = admin
        .get(format!("https://{NODE_IP}:10250{path}"))
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success(), "{path}: {}", resp.status());
    let text = resp.text().await.unwrap();
    let lines = text.lines().map(|l| Ok(l.to_string()));
    prometheus_parse::Scrape::parse(lines).unwrap_or_else(|e| panic!("{path}: {e}\n{text}"))
}

/// The value of the burner's `metric` (whose labels include `labels`) in `scrape`.
fn burner_value(
    scrape: &prometheus_parse::Scrape,
    metric: &str,
    labels: &[(&str, &str)],
) -> Option<f64> {
    let sample = scrape.samples.iter().find(|s| {
        s.metric == metric
            && s.labels.get("pod") == Some("burner")
            && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v))
    })?;
    match sample.value {
        prometheus_parse::Value::Counter(v)
        | prometheus_parse::Value::Gauge(v)
        | prometheus_parse::Value::Untyped(v) => Some(v),
        _ => None,
    }
}

/// `/metrics/cadvisor`, `/metrics/resource` and `/metrics/probes` parse and carry the
/// burner: its throttling grows between passes, its CPU and probes are counted.
async fn metrics_endpoints_parse_and_count_the_burner(cluster: &Cluster) {
    let throttled = "container_cpu_cfs_throttled_periods_total";
    let burn = [("container", "burn")];
    let first = burner_value(
        &scrape(cluster, "/metrics/cadvisor").await,
        throttled,
        &burn,
    );
    let first = first.expect("the limited container's throttled periods");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = burner_value(
            &scrape(cluster, "/metrics/cadvisor").await,
            throttled,
            &burn,
        );
        if now.is_some_and(|n| n > first) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "throttled periods stayed at {first}: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let resource = scrape(cluster, "/metrics/resource").await;
    let cpu = burner_value(&resource, "container_cpu_usage_seconds_total", &burn);
    assert!(cpu.is_some_and(|s| s > 0.0), "{cpu:?}");
    let error = resource
        .samples
        .iter()
        .find(|s| s.metric == "resource_scrape_error");
    assert!(error.is_some_and(|s| matches!(s.value, prometheus_parse::Value::Gauge(v) if v == 0.0)));
    let probes = scrape(cluster, "/metrics/probes").await;
    let ok = [
        ("probe_type", "Readiness"),
        ("result", "successful"),
        ("container", "burn"),
    ];
    let count = burner_value(&probes, "prober_probe_total", &ok);
    assert!(count.is_some_and(|n| n >= 1.0), "{count:?}");
}

/// The ServiceAccount admission's projected volume: a token bound to the pod that the API
/// server accepts as `system:serviceaccount:default:default`, the cluster CA and the
/// namespace; `automountServiceAccountToken: false` leaves it out.
async fn service_account_token_is_mounted_and_works(cluster: &Cluster) {
    let dir = "/var/run/secrets/kubernetes.io/serviceaccount";
    let cat = |file: &str| {
        let out = cluster.kubectl(&["exec", "talker", "--", "cat", &format!("{dir}/{file}")]);
        assert!(
            out.status.success(),
            "{file}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    assert_eq!(cat("namespace"), "default");
    let credentials = cluster.credentials_without_user();
    assert_eq!(cat("ca.crt"), credentials.ca_pem);
    let response = who_am_i(cluster, &cat("token")).await;
    let review: serde_json::Value = response.json().await.unwrap();
    let user = &review["status"]["userInfo"];
    assert_eq!(
        user["username"], "system:serviceaccount:default:default",
        "{review}"
    );
    assert_eq!(
        user["extra"]["authentication.kubernetes.io/pod-name"][0], "talker",
        "{review}"
    );
    token_is_replaced_before_it_expires(cluster, &cat).await;

    let opted_out = busybox_pod(
        "no-token",
        &cluster.image,
        json!([{"name": "c", "image": cluster.image}]),
        json!({"automountServiceAccountToken": false}),
    );
    let out = cluster.kubectl_stdin(
        &["create", "--dry-run=server", "-o", "json", "-f", "-"],
        &opted_out.to_string(),
    );
    let created: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(created["spec"].get("volumes").is_none(), "{created}");
    assert!(
        created["spec"]["containers"][0]
            .get("volumeMounts")
            .is_none(),
        "{created}"
    );
}

/// A SelfSubjectReview with `token` as the bearer.
async fn who_am_i(cluster: &Cluster, token: &str) -> reqwest::Response {
    let mut as_pod = cluster.credentials_without_user();
    as_pod.token = Some(token.to_string());
    as_pod
        .reqwest()
        .unwrap()
        .post(format!(
            "{}/apis/authentication.k8s.io/v1/selfsubjectreviews",
            as_pod.server
        ))
        .json(&json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}))
        .send()
        .await
        .unwrap()
}

/// A JWT's claims (the test reads them; the server checked the signature).
fn claims(token: &str) -> serde_json::Value {
    use base64::Engine;
    let payload = token.split('.').nth(1).unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// The harness caps tokens at 30 s: the agent writes a new one 80 % into the old one's
/// life, and a client that reads the file keeps getting in.
async fn token_is_replaced_before_it_expires(cluster: &Cluster, cat: &dyn Fn(&str) -> String) {
    let first = cat("token");
    let (iat, exp) = (claims(&first)["iat"].clone(), claims(&first)["exp"].clone());
    let life = exp.as_i64().unwrap() - iat.as_i64().unwrap();
    assert_eq!(life, TOKEN_SECONDS, "the harness's cap");
    let deadline = std::time::Instant::now() + Duration::from_secs(2 * life as u64);
    let next = loop {
        let now = cat("token");
        if now != first {
            break now;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the mounted token was not replaced; agent log:\n{}",
            cluster.agent_log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let issued = claims(&next)["iat"].as_i64().unwrap();
    assert!(
        issued < exp.as_i64().unwrap(),
        "the new token (iat {issued}) came after the old one expired ({exp})"
    );
    assert!(
        issued >= iat.as_i64().unwrap() + life * 8 / 10 - 1,
        "not before 80 %"
    );
    assert_eq!(who_am_i(cluster, &next).await.status(), 201);
}

/// The agent's port: anonymous → 401; a ServiceAccount bound to `view` → 403 on the
/// port (`nodes/proxy` is not in `view`); through the API the same user reads logs but
/// may not exec, while an admin may.
async fn agent_port_refuses_strangers_and_viewers(cluster: &Cluster) {
    let pods = format!("https://{NODE_IP}:10250/pods");
    let anonymous = cluster.credentials_without_user().reqwest().unwrap();
    let answer = anonymous.get(&pods).send().await.unwrap();
    assert_eq!(answer.status(), 401);
    assert_eq!(answer.text().await.unwrap(), "Unauthorized\n");

    let ok = |args: &[&str]| {
        let out = cluster.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    ok(&["create", "serviceaccount", "viewer"]);
    ok(&[
        "create",
        "rolebinding",
        "viewer-view",
        "--clusterrole=view",
        "--serviceaccount=default:viewer",
    ]);
    let token = ok(&["create", "token", "viewer"]);
    let mut viewer = cluster.credentials_without_user();
    viewer.token = Some(token);
    let answer = viewer.reqwest().unwrap().get(&pods).send().await.unwrap();
    assert_eq!(answer.status(), 403);
    assert_eq!(
        answer.text().await.unwrap(),
        "Forbidden (user=system:serviceaccount:default:viewer, verb=get, resource=nodes, subresource(s)=[proxy])\n"
    );

    let as_viewer = [
        "--as",
        "system:serviceaccount:default:viewer",
        "--as-group",
        "system:serviceaccounts",
    ];
    let logs = cluster.kubectl(&[&as_viewer[..], &["logs", "talker"]].concat());
    assert!(
        logs.status.success(),
        "{}",
        String::from_utf8_lossy(&logs.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&logs.stdout), "first\nsecond\n");
    let exec = cluster.kubectl(&[&as_viewer[..], &["exec", "talker", "--", "true"]].concat());
    assert!(!exec.status.success());
    let stderr = String::from_utf8_lossy(&exec.stderr);
    assert!(
        stderr.contains("cannot create resource \"pods/exec\""),
        "{stderr}"
    );
    assert_eq!(
        ok(&["exec", "talker", "--", "echo", "admin-exec"]),
        "admin-exec"
    );
}

async fn deleting_pod_ends_follow(cluster: &Cluster, follow: std::process::Child) {
    // -f saw both lines live; deleting the pod ends the stream.
    cluster
        .pods()
        .delete("talker", &DeleteParams::default())
        .await
        .unwrap();
    let out = follow.wait_with_output().unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("first\nsecond\n"),
        "{:?}",
        String::from_utf8_lossy(&out.stdout)
    );
}

async fn static_pod_runs_mirrors_and_goes(cluster: &Cluster, img: &str) {
    // Static pod: runs from the manifest dir, mirrored into the API, gone with its file.
    let manifest = cluster.path("manifests").join("static-web.yaml");
    std::fs::write(
        &manifest,
        format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: static-web\n  namespace: default\nspec:\n  containers:\n  - name: c\n    image: {img}\n    command: [\"sleep\", \"3600\"]\n"),
    )
    .unwrap();
    let mirror_name = format!("static-web-{NODE}");
    let mirror = cluster
        .wait_for(&mirror_name, "mirror Running", 60, |p| {
            phase(p) == "Running"
        })
        .await;
    let ann = mirror.metadata.annotations.clone().unwrap_or_default();
    assert!(ann.contains_key("kubernetes.io/config.mirror"), "{ann:?}");
    let static_id = container_id(&mirror, "c");
    std::fs::remove_file(&manifest).unwrap();
    let deadline = Instant::now() + Duration::from_secs(40);
    while cluster
        .pods()
        .get_opt(&mirror_name)
        .await
        .unwrap()
        .is_some()
        || cluster
            .ctr(&["containers", "ls", "-q"])
            .contains(&static_id)
    {
        assert!(
            Instant::now() < deadline,
            "static pod not removed:\n{}",
            cluster.agent_log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
