//! The e2e harness: a lab brought up with `cairn-lab` (this build's binaries, private
//! data/run dirs, its own name and API port), kubectl against it, commands inside its
//! nodes and switch, and a snapshot of the host to prove `down` leaves nothing behind.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub const LAB: &str = env!("CARGO_BIN_EXE_cairn-lab");

/// Polls `check` until it yields; the deadline only guards against a hang.
pub fn eventually<T>(what: &str, within: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// A finished command's stdout then stderr, as one text.
pub fn combined(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub fn output(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{cmd:?} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Stock kubectl 1.`minor` (the machines ship 1.27–1.33 under google-cloud-sdk), or
/// `$CAIRN_KUBECTL_1_<minor>`.
#[allow(dead_code)] // Not every e2e binary drives several kubectl versions.
pub fn kubectl_path(minor: u32) -> String {
    if let Ok(p) = std::env::var(format!("CAIRN_KUBECTL_1_{minor}")) {
        return p;
    }
    let p = format!("/usr/lib/google-cloud-sdk/bin/kubectl.1.{minor}");
    assert!(
        Path::new(&p).exists(),
        "kubectl 1.{minor} not found at {p} (set CAIRN_KUBECTL_1_{minor})"
    );
    p
}

/// The right to run lab `name` on this host: an exclusive lock on a file named after it,
/// held for the lab's life. A second run of the suite (another clone, another CI job on the
/// same Docker engine) waits for it instead of finding the first one's nodes; and what a
/// run killed mid-test left behind (its roots carry its record) is taken down here, before
/// anything snapshots the host.
pub struct Claim {
    name: String,
    roots: PathBuf,
    _lock: std::fs::File,
}

impl Claim {
    pub fn take(name: &str) -> Claim {
        let base = std::env::temp_dir().join("cairn-e2e-roots");
        std::fs::create_dir_all(&base).unwrap();
        let lock = std::fs::File::create(base.join(format!("{name}.lock"))).unwrap();
        lock.lock().unwrap();
        let claim = Claim {
            name: name.into(),
            roots: base.join(name),
            _lock: lock,
        };
        if claim.roots.exists() {
            eprintln!(
                "lab {name}: a killed run left {}; taking it down",
                claim.roots.display()
            );
            let out = claim.cmd().arg("down").output().unwrap();
            eprintln!("{}", combined(&out));
            std::fs::remove_dir_all(&claim.roots).unwrap();
        }
        claim
    }

    /// Where the lab's data, run and state live; a later claim takes down what is left here.
    pub fn roots(&self) -> &Path {
        &self.roots
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new(LAB);
        c.env("CAIRN_LAB", &self.name)
            .env("CAIRN_LAB_DATA_ROOT", self.roots.join("data"))
            .env("CAIRN_LAB_RUN_ROOT", self.roots.join("run"))
            .env(
                "CAIRN_LAB_LOG_ROOT",
                std::env::temp_dir().join("cairn-e2e-logs"),
            )
            .env_remove("KUBECONFIG");
        c
    }
}

pub struct Lab {
    pub name: String,
    /// `netns` or `docker`.
    pub driver: String,
    pub port: u16,
    claim: Claim,
    pub log_root: PathBuf,
    pub kubeconfig: PathBuf,
    up: bool,
}

impl Lab {
    /// `cairn-lab up --name NAME --api-port PORT EXTRA...`; panics with its output on failure.
    pub fn up(name: &str, port: u16, extra: &[&str]) -> Lab {
        Lab::up_claimed(Claim::take(name), port, extra)
    }

    /// `up` for a lab already claimed (to snapshot the host in between).
    pub fn up_claimed(claim: Claim, port: u16, extra: &[&str]) -> Lab {
        let name = claim.name.clone();
        let name = name.as_str();
        std::fs::create_dir_all(&claim.roots).unwrap();
        let log_root = std::env::temp_dir().join("cairn-e2e-logs");
        // Only this run's logs, for a failure's post-mortem.
        let _ = std::fs::remove_dir_all(log_root.join(name));
        let driver = extra
            .iter()
            .find_map(|a| a.strip_prefix("--driver="))
            .unwrap_or("netns")
            .to_string();
        let mut lab = Lab {
            name: name.into(),
            driver,
            port,
            kubeconfig: claim.roots.join("data").join(name).join("kubeconfig"),
            claim,
            log_root,
            up: false,
        };
        let started = Instant::now();
        let out = lab
            .cmd()
            .args(["up", "--api-port", &port.to_string()])
            .args(extra)
            .output()
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(
            out.status.success(),
            "cairn-lab up failed ({}):\n{stdout}\n{stderr}",
            out.status
        );
        println!(
            "{stderr}{stdout}lab {name} up in {:.1}s",
            started.elapsed().as_secs_f64()
        );
        lab.up = true;
        lab
    }

    /// A `cairn-lab` command for this lab.
    pub fn cmd(&self) -> Command {
        self.claim.cmd()
    }

    pub fn roots(&self) -> &Path {
        &self.claim.roots
    }

    /// The cluster CA (the same path on the host and in every node).
    pub fn cluster_ca(&self) -> String {
        let node1 = self
            .claim
            .roots
            .join("data")
            .join(&self.name)
            .join("nodes/node-1");
        node1.join("control/pki/ca.crt").display().to_string()
    }

    pub fn lab(&self, args: &[&str]) -> String {
        output(self.cmd().args(args)).unwrap_or_else(|e| panic!("{e}"))
    }

    pub fn try_kubectl(&self, args: &[&str]) -> Result<String, String> {
        output(
            Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(&self.kubeconfig)
                .args(args),
        )
    }

    pub fn kubectl(&self, args: &[&str]) -> String {
        self.try_kubectl(args).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A command inside a node's network namespace (`cairn-lab exec`).
    pub fn on_node(&self, node: &str, cmd: &[&str]) -> Result<String, String> {
        output(self.cmd().args(["exec", node, "--"]).args(cmd))
    }

    /// A command on the switch ("outside the nodes", on the underlay): the netns driver's
    /// switch namespace, the docker driver's registry container.
    pub fn on_switch(&self, cmd: &[&str]) -> Result<String, String> {
        output(&mut self.switch_command(cmd))
    }

    pub fn switch_command(&self, cmd: &[&str]) -> Command {
        let prefix = self.switch_prefix();
        let mut c = Command::new(&prefix[0]);
        c.args(&prefix[1..]).args(cmd);
        c
    }

    /// The command line that runs a command on the switch.
    pub fn switch_prefix(&self) -> Vec<String> {
        if self.driver == "docker" {
            vec![
                "docker".into(),
                "exec".into(),
                format!("cl-{}-registry", self.name),
            ]
        } else {
            vec![
                "nsenter".into(),
                format!("--net=/run/netns/cl-{}-sw", self.name),
                "--".into(),
            ]
        }
    }

    /// The underlay address of node `i` (1-based), from the lab's status.
    pub fn node_ip(&self, node: &str) -> String {
        let status = self.lab(&["status"]);
        status
            .lines()
            .find(|l| l.starts_with(&format!("{node} ")))
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap_or_else(|| panic!("{node} not in status:\n{status}"))
            .to_string()
    }

    pub fn down(&mut self) {
        if self.up {
            self.up = false;
            self.lab(&["down"]);
            self.forget_roots();
        }
    }

    /// Once down, the roots hold nothing a later run must take down.
    fn forget_roots(&self) {
        if let Err(e) = std::fs::remove_dir_all(&self.claim.roots) {
            eprintln!("{}: {e}", self.claim.roots.display());
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if self.up {
            if std::thread::panicking() {
                if let Ok(s) = output(self.cmd().arg("status")) {
                    eprintln!("{s}");
                }
                eprintln!("logs: {}/{}", self.log_root.display(), self.name);
            }
            // Best effort on the way out of a failed test; its own errors are printed.
            match output(self.cmd().arg("down")) {
                Ok(_) => self.forget_roots(),
                Err(e) => eprintln!("{e}"),
            }
        }
    }
}

/// What `down` must restore: the host's namespaces, mounts, netfilter rules, Docker
/// objects, and no process mentioning the lab.
#[derive(Debug, PartialEq, Eq)]
pub struct HostSnapshot {
    netns: BTreeSet<String>,
    mounts: BTreeSet<String>,
    nft: String,
    iptables: String,
    docker: String,
}

fn lines(cmd: &mut Command) -> String {
    output(cmd).unwrap_or_else(|e| e)
}

impl HostSnapshot {
    pub fn take() -> HostSnapshot {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        // Policy counters ([packets:bytes]) move with the host's own traffic.
        let iptables = lines(&mut Command::new("iptables-save"))
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.split(" [").next().unwrap_or(l).to_string())
            .collect::<Vec<_>>()
            .join("\n");
        HostSnapshot {
            netns: lines(Command::new("ip").args(["netns", "list"]))
                .lines()
                .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
                .collect(),
            mounts: mountinfo
                .lines()
                .filter_map(|l| l.split(' ').nth(4))
                .map(String::from)
                .collect(),
            nft: without_counters(&lines(Command::new("nft").args(["list", "ruleset"]))),
            iptables,
            docker: ["ps -aq", "network ls -q", "images -q"]
                .iter()
                .map(|a| lines(Command::new("docker").args(a.split(' '))))
                .collect::<Vec<_>>()
                .join("|"),
        }
    }
}

/// An nft listing without the values of `counter packets N bytes M` (the host's own
/// traffic moves them).
fn without_counters(listing: &str) -> String {
    listing
        .lines()
        .map(|line| {
            let mut out = Vec::new();
            let mut skip_next = false;
            for word in line.split(' ') {
                if skip_next {
                    skip_next = false;
                    continue;
                }
                skip_next = word == "packets" || word == "bytes";
                out.push(word);
            }
            out.join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// PIDs whose command line mentions `needle`.
pub fn processes_mentioning(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if name.parse::<u32>().is_err() || name == std::process::id().to_string() {
            continue;
        }
        if let Ok(raw) = std::fs::read(e.path().join("cmdline")) {
            let c = String::from_utf8_lossy(&raw).replace('\0', " ");
            if c.contains(needle) {
                found.push(format!("{name}: {c}"));
            }
        }
    }
    found
}
