//! The Vagrant lab (`packaging/vagrant/`).
//!
//! Its Vagrantfile is valid to Vagrant itself (`vagrant validate --ignore-provider`),
//! defines the control VM and one VM per node asked for, and a bad setting stops it with
//! Ruby's message. No hypervisor runs on these machines; Vagrant's docker provider does:
//! `vagrant up` brings the lab up as three systemd-booted containers (the lab's offline
//! node image with sshd) provisioned over SSH with the real packages, and its provisioning
//! ends with the seed scenario passing. On that lab: each node's proxy serves the
//! Service; provisioning again changes nothing; an agent restart and a package upgrade keep node1's pod (same container, no
//! restart) and never take node1 out of Ready; `cairn-node reset` and `apt-get purge`
//! leave each machine as the before-install hook recorded it; `vagrant destroy -f`
//! leaves no container, network, volume or cgroup behind.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{ok, repo, UPGRADE};

fn vagrant_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("vagrant")
}

/// `vagrant validate` with the lab's settings, its state kept out of the checkout.
fn validate(home: &Path, settings: &[(&str, &str)]) -> Output {
    let packages = home.join("packages");
    std::fs::create_dir_all(&packages).unwrap();
    Command::new("vagrant")
        .args(["validate", "--ignore-provider"])
        .current_dir(vagrant_dir())
        .env("VAGRANT_HOME", home.join("vagrant.d"))
        .env("VAGRANT_DOTFILE_PATH", home.join("dotfile"))
        .env("CAIRN_PACKAGES", &packages)
        .envs(settings.iter().copied())
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn vagrantfile_validates_with_a_vm_per_node_and_refuses_a_bad_setting() {
    let home = tempfile::tempdir().unwrap();
    let out = validate(home.path(), &[("CAIRN_NODES", "3")]);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("Vagrantfile validated successfully"),
        "{said}"
    );
    for machine in ["control", "node1", "node2", "node3"] {
        assert!(
            said.contains(&format!("==> {machine}:")),
            "{machine}: {said}"
        );
    }
    assert!(!said.contains("node4"), "{said}");

    let out = validate(home.path(), &[("CAIRN_NODES", "two")]);
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("invalid value for Integer(): \"two\""),
        "{said}"
    );
    // The checkout is left as it was: the lab's state went to the temp dir.
    assert!(!vagrant_dir().join(".vagrant").exists());
}

/// A Vagrant lab on the docker provider, its state (Vagrant's home and dotfile, the
/// shared directory) in a temp dir.
struct DockerLab {
    home: tempfile::TempDir,
    packages: PathBuf,
    destroyed: bool,
}

impl DockerLab {
    fn new() -> DockerLab {
        cairn_lab::docker::ensure_image().unwrap();
        let lab = DockerLab {
            home: tempfile::tempdir().unwrap(),
            packages: common::shared_packages(),
            destroyed: false,
        };
        let images = lab.shared().join("images");
        std::fs::create_dir_all(&images).unwrap();
        ok(
            Command::new("python3")
                .arg(repo().join("scripts/busybox-image.py"))
                .arg("archive")
                .arg(images.join("httpd.tar"))
                .args([
                    "--name",
                    "docker.io/library/httpd:2.4",
                    "--variant",
                    "httpd",
                ])
                .output()
                .unwrap(),
            "busybox-image.py",
        );
        lab
    }

    fn shared(&self) -> PathBuf {
        self.home.path().join("shared")
    }

    fn vagrant(&self, args: &[&str]) -> Output {
        // The node flags this engine allows; systemd is PID 1, so no `--init`.
        let flags: Vec<String> = cairn_lab::docker::node_run_flags()
            .into_iter()
            .filter(|f| f != "--init")
            .collect();
        Command::new("timeout")
            .arg("900")
            .arg("vagrant")
            .args(args)
            .current_dir(vagrant_dir())
            .env("VAGRANT_DEFAULT_PROVIDER", "docker")
            .env("VAGRANT_HOME", self.home.path().join("vagrant.d"))
            .env("VAGRANT_DOTFILE_PATH", self.home.path().join("dotfile"))
            .env("CAIRN_PACKAGES", &self.packages)
            .env("CAIRN_SHARED", self.shared())
            .env("CAIRN_NODES", "2")
            .env("CAIRN_DOCKER_ARGS", flags.join(" "))
            .env(
                "CAIRN_BEFORE_INSTALL",
                repo().join("packaging/tests/host-state.sh"),
            )
            .output()
            .unwrap()
    }

    /// The container Vagrant made for `machine`.
    fn container(&self, machine: &str) -> String {
        let id = self
            .home
            .path()
            .join(format!("dotfile/machines/{machine}/docker/id"));
        std::fs::read_to_string(id).unwrap().trim().to_string()
    }

    fn sh_status(&self, machine: &str, script: &str) -> Output {
        Command::new("docker")
            .args(["exec", &self.container(machine), "sh", "-ec", script])
            .output()
            .unwrap()
    }

    fn sh(&self, machine: &str, script: &str) -> String {
        ok(
            self.sh_status(machine, script),
            &format!("{machine}: {script}"),
        )
    }

    fn kubectl(&self, args: &str) -> String {
        // kubectl's cache in /tmp, which the purge check leaves out: the test's, not cairn's.
        self.sh(
            "control",
            &format!("kubectl --kubeconfig /cairn-shared/kubeconfig --cache-dir /tmp/kubectl-cache {args}"),
        )
    }
}

impl Drop for DockerLab {
    /// A failed test's lab goes too.
    fn drop(&mut self) {
        if !self.destroyed {
            let _ = self.vagrant(&["destroy", "-f"]);
        }
    }
}

/// What Docker holds, to compare before `vagrant up` and after `vagrant destroy -f`.
fn docker_objects() -> BTreeSet<String> {
    let mut objects = BTreeSet::new();
    for (kind, args) in [
        ("container", &["ps", "-aq", "--no-trunc"][..]),
        ("network", &["network", "ls", "-q", "--no-trunc"][..]),
        ("volume", &["volume", "ls", "-q"][..]),
    ] {
        let out = ok(Command::new("docker").args(args).output().unwrap(), kind);
        objects.extend(out.lines().map(|l| format!("{kind} {l}")));
    }
    objects
}

/// `vagrant up`: three machines, provisioned with the packages, the seed scenario last.
fn lab_comes_up(lab: &DockerLab) {
    let started = Instant::now();
    let out = lab.vagrant(&["up"]);
    let said = text(&out);
    assert!(out.status.success(), "vagrant up: {said}");
    assert!(said.contains("seed scenario passed"), "{said}");
    eprintln!(
        "vagrant up (docker, 3 machines, seed scenario): {:.0} s",
        started.elapsed().as_secs_f64()
    );
    let ready = lab.kubectl(
        "get nodes -o jsonpath='{range .items[*]}{.metadata.name}={.status.conditions[?(@.type==\"Ready\")].status} {end}'",
    );
    assert_eq!(ready.trim(), "node1=True node2=True");
    let units = "cairn-agent cairn-proxy";
    let node1 = lab.sh(
        "node1",
        &format!("systemctl is-active {units}; systemctl is-enabled {units}"),
    );
    assert_eq!(node1, "active\nactive\nenabled\nenabled\n");
    // The docker machines' eviction thresholds (they share this host's disk).
    let args = lab.sh("node1", "systemctl show -p ExecStart --value cairn-agent; cat /proc/$(systemctl show -p MainPID --value cairn-agent)/cmdline | tr '\\0' ' '");
    assert!(args.contains("imagefs.available<1%"), "{args}");
    let control = lab.sh(
        "control",
        "systemctl is-active cairn-control; systemctl is-enabled cairn-control",
    );
    assert_eq!(control, "active\nenabled\n");
}

/// A node provisioned again is left as it is.
fn provisioning_again_changes_nothing(lab: &DockerLab) {
    let out = lab.vagrant(&["provision", "node1", "--provision-with", "node"]);
    let said = text(&out);
    assert!(
        out.status.success() && said.contains("already joined"),
        "{said}"
    );
}

/// Each unit's resident memory, idle after the seed scenario.
fn print_idle_rss(lab: &DockerLab) {
    for (machine, unit) in [
        ("control", "cairn-control"),
        ("node1", "cairn-agent"),
        ("node1", "cairn-proxy"),
    ] {
        let rss = lab.sh(
            machine,
            &format!(
                "awk '/VmRSS/ {{print $2, $3}}' /proc/$(systemctl show -p MainPID --value {unit})/status"
            ),
        );
        eprintln!("idle RSS of {unit}: {}", rss.trim());
    }
}

/// The seed scenario curled the Service from node2; node1's proxy serves it too.
fn node1_serves_the_service(lab: &DockerLab) {
    let ip = lab.kubectl("get service httpd-app -o jsonpath='{.spec.clusterIP}'");
    let page = lab.sh(
        "node1",
        &format!(
            "curl -fsS --retry 30 --retry-delay 1 --retry-all-errors --max-time 5 http://{ip}/"
        ),
    );
    assert!(page.contains("It works!"), "{page}");
}

/// The container of the Deployment's pod on node1, and its restart count.
fn node1_container(lab: &DockerLab) -> String {
    lab.kubectl(
        "get pods -l app=httpd-app --field-selector spec.nodeName=node1 -o jsonpath='{.items[0].status.containerStatuses[0].containerID} {.items[0].status.containerStatuses[0].restartCount}'",
    )
}

/// Node1's Ready condition as a watch reports each change of the Node, from the host's
/// kubectl (the API is at the control machine's address on the lab's network).
fn watch_node1_ready(lab: &DockerLab) -> std::process::Child {
    let log = std::fs::File::create(lab.home.path().join("ready-watch")).unwrap();
    Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(lab.shared().join("kubeconfig"))
        .args(["get", "node", "node1", "--watch", "-o"])
        .arg("jsonpath={.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}")
        .stdout(log)
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits until node1's Lease was renewed at `since` (RFC 3339 seconds, UTC) or later: the
/// restarted agent is up and heartbeating (its Node status is posted only on change, as
/// upstream's, so the Lease is the heartbeat to wait for).
fn node1_lease_renewed_since(lab: &DockerLab, since: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let renewed =
            lab.kubectl("get lease node1 -n kube-node-lease -o jsonpath='{.spec.renewTime}'");
        // Micro-second precision: compared by the second.
        if renewed.get(..19) >= since.get(..19) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "node1's lease not renewed since {since}: {renewed}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The Deployment's pods are Ready; if not, the failure shows the pods, the events and
/// both agents' recent logs.
fn pods_stay_ready(lab: &DockerLab, what: &str) {
    let wait = "kubectl --kubeconfig /cairn-shared/kubeconfig --cache-dir /tmp/kubectl-cache \
                wait --for=condition=Ready pod -l app=httpd-app --timeout=120s";
    let out = lab.sh_status("control", wait);
    if out.status.success() {
        return;
    }
    let kubectl = "kubectl --kubeconfig /cairn-shared/kubeconfig --cache-dir /tmp/kubectl-cache";
    let mut report = text(&out);
    for (machine, script) in [
        (
            "control",
            format!("{kubectl} get pods -o wide; {kubectl} get events -A"),
        ),
        (
            "node1",
            "journalctl -u cairn-agent -n 150 --no-pager".to_string(),
        ),
        (
            "node2",
            "journalctl -u cairn-agent -n 60 --no-pager".to_string(),
        ),
    ] {
        report += &format!(
            "\n--- {machine}: {script}\n{}",
            text(&lab.sh_status(machine, &script))
        );
    }
    panic!("the Deployment's pods after {what}:\n{report}");
}

/// `script` on node1 restarts cairn-agent; node1's pod keeps its container and node1
/// never leaves Ready.
fn node1_pod_survives(lab: &DockerLab, what: &str, script: &str) {
    let before = node1_container(lab);
    let agent_pid = || lab.sh("node1", "systemctl show -p MainPID --value cairn-agent");
    let pid = agent_pid();
    let mut watch = watch_node1_ready(lab);
    let log = lab.home.path().join("ready-watch");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(&log).unwrap().is_empty() {
        assert!(Instant::now() < deadline, "the watch printed nothing");
        std::thread::sleep(Duration::from_millis(100));
    }
    lab.sh("node1", script);
    assert_ne!(agent_pid(), pid, "{what} did not restart cairn-agent");
    // A heartbeat from after the restart: the watch covered the new agent's first posts.
    let since = lab.sh("node1", "date -u +%Y-%m-%dT%H:%M:%SZ");
    node1_lease_renewed_since(lab, since.trim());
    pods_stay_ready(lab, what);
    assert_eq!(node1_container(lab), before, "node1's pod after {what}");
    let _ = watch.kill();
    let _ = watch.wait();
    let seen = std::fs::read_to_string(lab.home.path().join("ready-watch")).unwrap();
    assert!(
        !seen.is_empty() && seen.lines().all(|l| l == "True"),
        "node1's Ready during {what}: {seen:?}"
    );
    node1_serves_the_service(lab);
}

/// `script` removes cairn from `machine`; its state is then what the before-install hook
/// recorded, and no cairn process runs.
fn leaves_the_host_as_before(lab: &DockerLab, machine: &str, script: &str) {
    lab.sh(machine, script);
    let out = Command::new("docker")
        .args(["exec", "-i", &lab.container(machine), "sh", "-c"])
        .arg(format!(
            "sh -s /tmp/after && diff /cairn-shared/{machine}.before /tmp/after"
        ))
        .stdin(std::fs::File::open(repo().join("packaging/tests/host-state.sh")).unwrap())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{machine} after `{script}` differs from before the install (< before, > after):\n{}",
        text(&out)
    );
    let processes = lab.sh(machine, "pgrep -a cairn || true");
    assert_eq!(processes, "", "{machine}");
}

/// Cgroup directories of the given containers anywhere in the host's hierarchies.
fn cgroups_of(containers: &[String]) -> Vec<String> {
    let out = Command::new("find")
        .args(["/sys/fs/cgroup", "-maxdepth", "4", "-type", "d"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|dir| containers.iter().any(|id| dir.contains(id.as_str())))
        .map(str::to_string)
        .collect()
}

#[test]
fn docker_provider_lab_runs_the_seed_scenario_upgrades_purges_and_destroys_cleanly() {
    let mut lab = DockerLab::new();
    let before = docker_objects();
    lab_comes_up(&lab);
    let containers: Vec<String> = ["control", "node1", "node2"]
        .iter()
        .map(|m| lab.container(m))
        .collect();
    node1_serves_the_service(&lab);
    provisioning_again_changes_nothing(&lab);
    print_idle_rss(&lab);
    node1_pod_survives(&lab, "an agent restart", "systemctl restart cairn-agent");
    node1_pod_survives(
        &lab,
        "an upgrade",
        &format!(
            "dpkg -i /cairn-packages/upgrade/cairn-node_{UPGRADE}_amd64.deb \
             && test \"$(dpkg-query -W -f '${{Version}}' cairn-node)\" = '{UPGRADE}'"
        ),
    );
    leaves_the_host_as_before(
        &lab,
        "node1",
        "cairn-node reset && apt-get purge -y -q cairn-node",
    );
    leaves_the_host_as_before(&lab, "control", "apt-get purge -y -q cairn-control");

    let out = lab.vagrant(&["destroy", "-f"]);
    lab.destroyed = true;
    assert!(out.status.success(), "vagrant destroy: {}", text(&out));
    assert_eq!(
        docker_objects(),
        before,
        "vagrant destroy -f left Docker objects"
    );
    assert_eq!(cgroups_of(&containers), Vec::<String>::new());
    assert!(!lab.shared().join("join-token").exists());
}
