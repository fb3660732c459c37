//! The docker driver, kind-style: one privileged container per node on a private Docker
//! network, from a node image the lab builds offline (debootstrap of Debian 12 with
//! containerd, runc, iptables, nftables, iproute2, conntrack, then `docker import`; no
//! registry is needed). Each node has its own mount namespace, cgroup namespace (its pods'
//! cgroups nest under the container's, on cgroup v1 or v2) and containerd. The lab's
//! directories are bind-mounted at the same paths, so the components' command lines are
//! the netns driver's; node-1 publishes the API on 127.0.0.1:<api-port>.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::args;
use crate::cmd::{run, succeeds};
use crate::driver::{NodeDriver, Place};
use crate::error::{LabError, Result};
use crate::plan::{LabPlan, NodePlan, API_PORT};

pub struct DockerDriver;

/// The node image; its tag names the package set, so a changed set builds a new one.
pub const NODE_IMAGE: &str = "cairn-lab-node:bookworm-3";
/// systemd is there for the packages' tests and the Vagrant lab's docker provider, which
/// boot it as PID 1 (lab nodes run `sleep` under `--init` and never start it); sshd is
/// how Vagrant provisions those machines.
const PACKAGES: &str = "containerd,runc,iptables,nftables,iproute2,conntrack,curl,ca-certificates,procps,kmod,docker-registry,python3,busybox-static,systemd,systemd-sysv,dbus,openssh-server";
/// The debootstrapped root filesystem, kept so a later `up` imports it again quickly.
const ROOTFS_CACHE: &str = "/var/cache/cairn-lab/node-bookworm-3.tar";

fn container_of(plan: &LabPlan, place: Place<'_>) -> Option<String> {
    match place {
        Place::Switch => Some(plan.registry_container()),
        Place::Node(n) => Some(plan.container(n)),
        Place::Host => None,
    }
}

/// Marker: this lab imported the node image, so its `down` removes it again.
fn imported_marker(plan: &LabPlan) -> PathBuf {
    plan.run_dir.join("imported-node-image")
}

impl NodeDriver for DockerDriver {
    fn preflight(&self, _plan: &LabPlan) -> Result<()> {
        run(args!["docker", "info", "--format", "{{.ServerVersion}}"]).map_err(|e| {
            LabError::Usage(format!(
                "--driver docker needs a running Docker engine, and `docker info` failed: {e}"
            ))
        })?;
        Ok(())
    }

    fn leftovers(&self, plan: &LabPlan) -> Vec<String> {
        let mut names: Vec<String> = plan.nodes.iter().map(|n| plan.container(n)).collect();
        names.push(plan.registry_container());
        let mut found: Vec<String> = names
            .into_iter()
            .filter(|c| succeeds(args!["docker", "container", "inspect", c]))
            .collect();
        if succeeds(args!["docker", "network", "inspect", plan.docker_network()]) {
            found.push(format!("docker network {}", plan.docker_network()));
        }
        found
    }

    fn create(&self, plan: &LabPlan) -> Result<()> {
        if ensure_image()? {
            let marker = imported_marker(plan);
            std::fs::write(&marker, NODE_IMAGE).map_err(|e| LabError::io(&marker, e))?;
        }
        run(args![
            "docker",
            "network",
            "create",
            "--driver",
            "bridge",
            "--subnet",
            plan.subnet(),
            "--label",
            format!("cairn-lab={}", plan.name()),
            plan.docker_network()
        ])?;
        run_container(
            plan,
            &plan.registry_container(),
            &plan.registry_ip.to_string(),
            &[],
        )?;
        for node in &plan.nodes {
            let publish: Vec<String> = if plan.runs_control(node) {
                args![
                    "-p",
                    format!("127.0.0.1:{}:{API_PORT}", plan.options.api_port)
                ]
            } else {
                vec![]
            };
            run_container(plan, &plan.container(node), &node.ip.to_string(), &publish)?;
            prepare_node(plan, node)?;
        }
        Ok(())
    }

    fn command(&self, plan: &LabPlan, place: Place<'_>, cmd: Vec<String>) -> Vec<String> {
        match container_of(plan, place) {
            Some(c) => {
                let mut argv = args!["docker", "exec", c];
                argv.extend(cmd);
                argv
            }
            None => cmd,
        }
    }

    fn spawn(
        &self,
        plan: &LabPlan,
        place: Place<'_>,
        argv: &[String],
        log: &Path,
        env: &[(&str, &str)],
    ) -> Result<u32> {
        let Some(container) = container_of(plan, place) else {
            return crate::process::spawn(None, argv, log, env);
        };
        if let Some(dir) = log.parent() {
            std::fs::create_dir_all(dir).map_err(|e| LabError::io(dir, e))?;
        }
        let mut exec = args!["docker", "exec", "-d"];
        for (k, v) in env.iter().chain([("NO_COLOR", "1")].iter()) {
            exec.extend(args!["-e", format!("{k}={v}")]);
        }
        exec.extend(args![
            container,
            "setsid",
            "sh",
            "-c",
            "log=$1; shift; exec \"$@\" >>\"$log\" 2>&1",
            "sh",
            log.display()
        ]);
        exec.extend(argv.iter().cloned());
        run(exec)?;
        find_host_pid(&container, argv)
    }

    fn needs_api_forward(&self) -> bool {
        false
    }

    fn destroy(&self, plan: &LabPlan) -> Vec<String> {
        let mut problems = Vec::new();
        let mut containers: Vec<String> = plan.nodes.iter().map(|n| plan.container(n)).collect();
        containers.push(plan.registry_container());
        for c in containers {
            if succeeds(args!["docker", "container", "inspect", c])
                && !succeeds(args!["docker", "rm", "-f", "-v", c])
            {
                problems.push(format!("could not remove container {c}"));
            }
        }
        let net = plan.docker_network();
        if succeeds(args!["docker", "network", "inspect", net])
            && !succeeds(args!["docker", "network", "rm", net])
        {
            problems.push(format!("could not remove docker network {net}"));
        }
        if imported_marker(plan).exists()
            && !image_in_use()
            && !succeeds(args!["docker", "rmi", NODE_IMAGE])
        {
            problems.push(format!("could not remove image {NODE_IMAGE}"));
        }
        problems
    }
}

fn image_in_use() -> bool {
    run(args![
        "docker",
        "ps",
        "-aq",
        "--filter",
        format!("ancestor={NODE_IMAGE}")
    ])
    .is_ok_and(|o| !o.trim().is_empty())
}

/// The node image: imported from the cached root filesystem, which is debootstrapped
/// first when missing (Debian's packages are the only network access needed). Whether it
/// had to be imported.
pub fn ensure_image() -> Result<bool> {
    if succeeds(args!["docker", "image", "inspect", NODE_IMAGE]) {
        return Ok(false);
    }
    let cache = Path::new(ROOTFS_CACHE);
    if !cache.exists() {
        build_rootfs(cache)?;
    }
    eprintln!("cairn-lab: importing {NODE_IMAGE} from {ROOTFS_CACHE}");
    run(args![
        "docker",
        "import",
        "--change",
        "CMD [\"sleep\", \"infinity\"]",
        cache.display(),
        NODE_IMAGE
    ])?;
    Ok(true)
}

fn build_rootfs(cache: &Path) -> Result<()> {
    if !succeeds(args!["sh", "-c", "command -v debootstrap"]) {
        return Err(LabError::Usage(
            "building the node image needs debootstrap (apt-get install debootstrap)".into(),
        ));
    }
    let dir = cache.parent().unwrap_or(Path::new("/var/cache"));
    std::fs::create_dir_all(dir).map_err(|e| LabError::io(dir, e))?;
    let root = dir.join("rootfs.tmp");
    // A half-built root of an interrupted run goes first.
    let _ = std::fs::remove_dir_all(&root);
    eprintln!("cairn-lab: building the node image root with debootstrap (Debian 12 + {PACKAGES}); once, about a minute");
    let result = run(args![
        "debootstrap",
        "--variant=minbase",
        format!("--include={PACKAGES}"),
        "bookworm",
        root.display(),
        "http://deb.debian.org/debian"
    ])
    .and_then(|_| {
        run(args![
            "tar",
            "-C",
            root.display(),
            "-cf",
            format!("{}.tmp", cache.display()),
            "."
        ])
    })
    .and_then(|_| {
        std::fs::rename(format!("{}.tmp", cache.display()), cache)
            .map_err(|e| LabError::io(cache, e))
    });
    // The tarball is what is kept; the tree is only its source.
    let _ = std::fs::remove_dir_all(&root);
    result
}

/// Capabilities in `CapBnd` order, as Docker names them.
const CAPS: [&str; 41] = [
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
];

/// Capabilities outside our bounding set, which the engine (started with the same) cannot
/// grant either: asking for them fails the container's start ("unable to apply caps").
/// This is also why nodes are not `--privileged` containers: on such hosts those cannot
/// start at all.
fn caps_the_engine_lacks() -> Vec<&'static str> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let bounding = status
        .lines()
        .find_map(|l| l.strip_prefix("CapBnd:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(u64::MAX);
    CAPS.iter()
        .enumerate()
        .filter(|(bit, _)| bounding >> bit & 1 == 0)
        .map(|(_, name)| *name)
        .collect()
}

/// What a node container (and the test container of scripts/test-in-container.sh) gets:
/// every capability the engine can grant, no seccomp or AppArmor profile, /proc and /sys
/// unmasked (what `--privileged` gives, bar devices), a private cgroup namespace, an init.
pub fn node_run_flags() -> Vec<String> {
    let mut flags = args![
        "--init",
        "--cgroupns=private",
        "--security-opt",
        "seccomp=unconfined",
        "--security-opt",
        "apparmor=unconfined",
        "--security-opt",
        "systempaths=unconfined",
        "--cap-add",
        "ALL"
    ];
    for cap in caps_the_engine_lacks() {
        flags.extend(args!["--cap-drop", cap]);
    }
    flags
}

/// A node container of the node image on the lab's network, with the lab's directories
/// mounted at their host paths.
fn run_container(plan: &LabPlan, name: &str, ip: &str, extra: &[String]) -> Result<()> {
    let mut argv = args!["docker", "run", "-d"];
    argv.extend(node_run_flags());
    argv.extend(args![
        "--name",
        name,
        "--hostname",
        name.trim_start_matches(&format!("cl-{}-", plan.name())),
        "--network",
        plan.docker_network(),
        "--ip",
        ip,
        "--label",
        format!("cairn-lab={}", plan.name()),
        "--tmpfs",
        "/tmp"
    ]);
    for dir in [&plan.data_dir, &plan.run_dir, &plan.log_dir] {
        argv.extend(args!["-v", format!("{0}:{0}", dir.display())]);
    }
    argv.extend(extra.iter().cloned());
    argv.extend(args![NODE_IMAGE, "sleep", "infinity"]);
    run(argv)?;
    Ok(())
}

/// What a node needs that the image does not carry: forwarding, and the kernel modules
/// are the host's (loaded there).
fn prepare_node(plan: &LabPlan, node: &NodePlan) -> Result<()> {
    run(args![
        "docker",
        "exec",
        plan.container(node),
        "sh",
        "-c",
        WRITABLE_CGROUPS
    ])?;
    run(args![
        "docker",
        "exec",
        plan.container(node),
        "sysctl",
        "-qw",
        "net.ipv4.ip_forward=1"
    ])?;
    Ok(())
}

/// Docker mounts the node's cgroup tree read-only; the script remounts it writable inside
/// the node's cgroup namespace (shared with scripts/test-in-container.sh).
const WRITABLE_CGROUPS: &str = include_str!("../../scripts/node-cgroups.sh");

/// The host PID of the daemon `docker exec -d` just started: the process in the
/// container's mount namespace running exactly `argv`.
fn find_host_pid(container: &str, argv: &[String]) -> Result<u32> {
    let init = run(args![
        "docker",
        "inspect",
        "-f",
        "{{.State.Pid}}",
        container
    ])?;
    let mnt = std::fs::read_link(format!("/proc/{}/ns/mnt", init.trim()))
        .map_err(|e| LabError::io(format!("/proc/{}/ns/mnt", init.trim()), e))?;
    let wanted = argv.join("\0");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        for pid in crate::process::pids_matching(&argv[0]) {
            let same_ns = std::fs::read_link(format!("/proc/{pid}/ns/mnt")).is_ok_and(|m| m == mnt);
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline);
            if same_ns && cmdline.trim_end_matches('\0') == wanted {
                return Ok(pid);
            }
        }
        if Instant::now() >= deadline {
            return Err(LabError::Usage(format!(
                "{container}: `{}` did not start",
                argv.join(" ")
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
