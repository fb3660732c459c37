//! The packages on a host booted by systemd: a container of the lab's node image with
//! systemd as PID 1 (its own network, 198.18.201.0/24; the agent's containerd state on
//! a host directory, as overlayfs cannot stack on the container's root).
//!
//! One host runs both packages, as a k3s server runs its agent, provisioned by the
//! Vagrant lab's own scripts (`packaging/vagrant/provision-{control,node}.sh`): `dpkg -i`
//! starts cairn-control (its unit is `Type=notify`, so "active" means it serves);
//! `cairn-node join` with the token `cairn-control token create` printed enables and
//! starts cairn-agent and cairn-proxy through systemd and returns once the Node is Ready;
//! provisioning again changes nothing.
//! Then the seed scenario's path: a Deployment of the offline httpd image behind a
//! Service answers through its ClusterIP (the proxy on the node's own credentials). An
//! agent restart and a package upgrade keep the pod's container (same ID, no restart)
//! and the Service answering. `cairn-node reset` stops and disables the units and
//! removes the pods and cairn's network state. Prints the time from `dpkg -i` to Ready
//! and each unit's idle RSS.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use common::{ok, repo, UPGRADE};

const SUBNET: &str = "198.18.201.0/24";
const HOST_IP: &str = "198.18.201.10";
/// What provision-control.sh leaves for the lab's user: the API at the host's address.
const ADMIN: &str = "/shared/kubeconfig";
/// What provision-node.sh writes before the package is installed; reset restores it.
const PROVISIONED_AGENT_ENV: &str =
    "CAIRN_AGENT_ARGS=\"--root-dir /var/lib/cairn/agent --network-backend vxlan --node-ip 198.18.201.10\"\n";

/// `ok` for a command still to run.
fn run_ok(cmd: &mut Command, what: &str) -> String {
    ok(cmd.output().unwrap(), what)
}

/// The systemd-booted container, its network and its containerd directory.
struct Host {
    name: String,
    network: String,
    packages: std::path::PathBuf,
    _containerd: tempfile::TempDir,
}

impl Host {
    fn boot() -> Host {
        cairn_lab::docker::ensure_image().unwrap();
        let packages = common::shared_packages();
        let containerd = tempfile::tempdir().unwrap();
        let name = format!("cairn-systemd-{}", std::process::id());
        let network = format!("{name}-net");
        let _ = Command::new("docker").args(["rm", "-f", &name]).output();
        let _ = Command::new("docker")
            .args(["network", "rm", &network])
            .output();
        run_ok(
            Command::new("docker").args([
                "network",
                "create",
                "--subnet",
                SUBNET,
                "--label",
                "cairn-packaging=1",
                &network,
            ]),
            "docker network create",
        );
        let host = Host {
            name,
            network,
            packages,
            _containerd: containerd,
        };
        host.run_container();
        // Blocks until boot finished: "running", or "degraded" with a failed unit.
        // systemd answers once its private socket is there; then `--wait` blocks until
        // the boot finished.
        let state = host.sh_status(
            "timeout 60 sh -c 'until [ -S /run/systemd/private ]; do sleep 0.1; done' && \
             systemctl is-system-running --wait",
        );
        assert_eq!(
            state.trim(),
            "running",
            "{}",
            host.sh_status("systemctl --failed")
        );
        host
    }

    fn run_container(&self) {
        let mount = |from: &Path, to: &str, mode: &str| format!("{}:{to}{mode}", from.display());
        // systemd is PID 1: no `--init`.
        let flags: Vec<String> = cairn_lab::docker::node_run_flags()
            .into_iter()
            .filter(|f| f != "--init")
            .collect();
        run_ok(
            Command::new("docker")
                .args(["run", "-d", "--name", &self.name, "--hostname", "node-s"])
                .args(["--network", &self.network, "--ip", HOST_IP])
                .args(flags)
                .args(["--tmpfs", "/run", "--tmpfs", "/run/lock", "--tmpfs", "/tmp"])
                .args(["-e", "container=docker", "-v"])
                .arg(mount(&self.packages, "/pkgs", ":ro"))
                .arg("-v")
                .arg(mount(&repo().join("scripts"), "/scripts", ":ro"))
                .arg("-v")
                .arg(mount(&repo().join("packaging/vagrant"), "/vagrant", ":ro"))
                .arg("-v")
                .arg(mount(
                    Path::new("/usr/bin/kubectl"),
                    "/usr/local/bin/kubectl",
                    ":ro",
                ))
                .arg("-v")
                .arg(mount(self._containerd.path(), "/var/lib/containerd", ""))
                .arg(cairn_lab::docker::NODE_IMAGE)
                .args([
                    "sh",
                    "-c",
                    "sh /scripts/node-cgroups.sh && exec /lib/systemd/systemd",
                ]),
            "docker run",
        );
    }

    fn sh(&self, script: &str) -> String {
        run_ok(
            Command::new("docker").args(["exec", &self.name, "sh", "-ec", script]),
            script,
        )
    }

    /// stdout whatever the exit status.
    fn sh_status(&self, script: &str) -> String {
        let out = Command::new("docker")
            .args(["exec", &self.name, "sh", "-c", script])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn kubectl(&self, args: &str) -> String {
        self.sh(&format!("kubectl --kubeconfig {ADMIN} {args}"))
    }

    fn web_container(&self) -> (String, String) {
        let out = self.kubectl(
            "get pods -l app=web -o jsonpath='{.items[0].status.containerStatuses[0].containerID} {.items[0].status.containerStatuses[0].restartCount}'",
        );
        let (id, restarts) = out.split_once(' ').unwrap();
        (id.to_string(), restarts.to_string())
    }

    /// The Service answers through its ClusterIP, once the proxy has programmed it (until
    /// then the address would be routed out of the host, to whatever answers there).
    fn service_answers(&self) {
        let ip = self.kubectl("get service web -o jsonpath='{.spec.clusterIP}'");
        self.sh(&format!(
            "timeout 60 sh -c 'until nft list ruleset | grep -qF \"{ip} \"; do sleep 0.2; done'"
        ));
        let page = self.sh(&format!(
            "curl -fsS --retry 30 --retry-delay 1 --retry-all-errors --max-time 5 http://{ip}/"
        ));
        assert!(page.contains("It works!"), "{page}");
    }

    fn active(&self, units: &str) -> String {
        self.sh_status(&format!("systemctl is-active {units}"))
    }

    fn idle_rss(&self) -> String {
        self.sh("for u in cairn-control cairn-agent cairn-proxy; do \
               pid=$(systemctl show -p MainPID --value $u); \
               echo \"$u $(awk '/VmRSS/ {print $2, $3}' /proc/$pid/status)\"; done")
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        // The pods' cgroups nest under the container's: remove them before it goes.
        let _ = Command::new("docker")
            .args(["exec", &self.name, "sh", "-c"])
            .arg("systemctl stop cairn-agent cairn-proxy; ctr -n cairn tasks ls -q | xargs -r -n1 ctr -n cairn tasks kill -s KILL; find /sys/fs/cgroup/*/cairn -depth -type d -exec rmdir {} \\; 2>/dev/null")
            .output();
        let _ = Command::new("docker")
            .args(["rm", "-f", &self.name])
            .output();
        let _ = Command::new("docker")
            .args(["network", "rm", &self.network])
            .output();
    }
}

/// The Vagrant lab's provisioning (`packaging/vagrant/provision-*.sh`), control then
/// node, on the one host.
fn provision(host: &Host) {
    let started = Instant::now();
    let control = host.sh(&format!(
        "CAIRN_PACKAGES=/pkgs CAIRN_CONTROL_IP={HOST_IP} CAIRN_SHARED=/shared \
         sh /vagrant/provision-control.sh"
    ));
    assert_eq!(host.active("cairn-control"), "active\n", "{control}");
    let node_env = format!(
        "CAIRN_PACKAGES=/pkgs CAIRN_SERVER=https://{HOST_IP}:6443 CAIRN_NODE_IP={HOST_IP} \
         CAIRN_SHARED=/shared"
    );
    let said = host.sh(&format!("{node_env} sh /vagrant/provision-node.sh"));
    assert!(said.contains("Node node-s is Ready"), "{said}");
    eprintln!(
        "dpkg -i to Ready: {:.1} s\n{said}",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(host.active("cairn-agent cairn-proxy"), "active\nactive\n");
    let enabled = host.sh_status("systemctl is-enabled cairn-agent cairn-proxy cairn-control");
    assert_eq!(enabled, "enabled\nenabled\nenabled\n");
    // Provisioning again changes nothing.
    let again = host.sh(&format!("{node_env} sh /vagrant/provision-node.sh"));
    assert!(again.contains("already joined"), "{again}");
    // The kubeconfig left for the lab's user reaches the API by the address nodes use.
    let nodes = host.kubectl("get nodes -o name");
    assert_eq!(nodes, "node/node-s\n");
}

fn run_the_web_service(host: &Host) {
    host.sh(
        "python3 /scripts/busybox-image.py archive /tmp/httpd.tar --name docker.io/library/httpd:2.4 --variant httpd \
         && cairn-agent --root-dir /var/lib/cairn/agent import-image /tmp/httpd.tar",
    );
    host.kubectl("create deployment web --image=httpd:2.4 --port=80");
    host.kubectl("expose deployment web --port=80");
    host.kubectl("rollout status deployment/web --timeout=120s");
    host.service_answers();
}

fn pods_survive(host: &Host, what: &str, script: &str) {
    let before = host.web_container();
    let agent_pid = || host.sh("systemctl show -p MainPID --value cairn-agent");
    let pid = agent_pid();
    host.sh(script);
    assert_ne!(agent_pid(), pid, "{what} did not restart cairn-agent");
    assert_eq!(
        host.active("cairn-agent cairn-proxy"),
        "active\nactive\n",
        "after {what}"
    );
    host.kubectl("wait --for=condition=Ready pod -l app=web --timeout=120s");
    assert_eq!(
        host.web_container(),
        before,
        "the pod's container after {what}"
    );
    host.service_answers();
}

fn reset_removes_the_node_state(host: &Host) {
    let said = host.sh("cairn-node reset");
    assert!(said.contains("Stopped and disabled"), "{said}");
    assert_eq!(
        host.active("cairn-agent cairn-proxy"),
        "inactive\ninactive\n"
    );
    let enabled = host.sh_status("systemctl is-enabled cairn-agent cairn-proxy");
    assert_eq!(enabled, "disabled\ndisabled\n");
    assert_eq!(host.sh("ctr -n cairn containers ls -q"), "");
    let tables = host.sh("nft list tables");
    assert!(!tables.contains("cairn"), "{tables}");
    assert_eq!(host.sh("cat /etc/cairn/agent.env"), PROVISIONED_AGENT_ENV);
    host.sh("test ! -e /etc/cairn/node");
}

#[test]
fn packages_on_a_systemd_host_join_serve_restart_upgrade_and_reset() {
    let host = Host::boot();
    provision(&host);
    run_the_web_service(&host);
    eprintln!("idle RSS:\n{}", host.idle_rss());
    pods_survive(&host, "an agent restart", "systemctl restart cairn-agent");
    pods_survive(
        &host,
        "an upgrade",
        &format!(
            "dpkg -i /pkgs/upgrade/cairn-node_{UPGRADE}_amd64.deb /pkgs/upgrade/cairn-control_{UPGRADE}_amd64.deb \
             && test \"$(dpkg-query -W -f '${{Version}}' cairn-node)\" = '{UPGRADE}'"
        ),
    );
    reset_removes_the_node_state(&host);
}
