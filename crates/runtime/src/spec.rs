//! OCI runtime spec for a pod container, with containerd's defaults for Linux containers
//! (capabilities, mounts, masked paths) and the pod's shared namespaces joined by path.
//!
//! The spec is assembled as JSON and checked against `oci_spec::runtime::Spec` so a field
//! name mistake fails here rather than inside runc.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Value};

use crate::{ContainerConfig, PodSandbox};

#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error(
        "container {container}: no command: the pod gives none and the image has no Entrypoint/Cmd"
    )]
    NoCommand { container: String },
    #[error("container {container}: user {user:?} not found in the image's /etc/passwd")]
    UnknownUser { container: String, user: String },
    #[error("container {container}: invalid OCI spec: {message}")]
    Invalid { container: String, message: String },
}

/// The parts of an image config a container spec needs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImageConfig {
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    pub env: Vec<String>,
    pub working_dir: String,
    pub user: String,
}

/// Kubernetes' rule: `command` replaces Entrypoint (and drops Cmd), `args` replaces Cmd.
pub fn effective_args(config: &ContainerConfig) -> Vec<String> {
    let image = &config.image.config;
    let mut argv = if config.command.is_empty() {
        image.entrypoint.clone()
    } else {
        config.command.clone()
    };
    if !config.args.is_empty() {
        argv.extend(config.args.iter().cloned());
    } else if config.command.is_empty() {
        argv.extend(image.cmd.iter().cloned());
    }
    argv
}

/// Image env first, then the pod's (pod values win on the same name).
pub fn merged_env(config: &ContainerConfig) -> Vec<String> {
    let mut order: Vec<String> = Vec::new();
    let mut values: BTreeMap<String, String> = BTreeMap::new();
    let image = config.image.config.env.iter().filter_map(|kv| {
        kv.split_once('=')
            .map(|(k, v)| (k.to_string(), v.to_string()))
    });
    for (k, v) in image.chain(config.env.iter().cloned()) {
        if !values.contains_key(&k) {
            order.push(k.clone());
        }
        values.insert(k, v);
    }
    if !values.contains_key("PATH") {
        order.insert(0, "PATH".into());
        values.insert(
            "PATH".into(),
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
        );
    }
    order
        .into_iter()
        .map(|k| {
            let v = values.get(&k).cloned().unwrap_or_default();
            format!("{k}={v}")
        })
        .collect()
}

/// User and groups: securityContext wins over the image's `User` (`uid[:gid]` or names,
/// resolved against the rootfs' /etc/passwd and /etc/group).
pub fn resolve_user(
    config: &ContainerConfig,
    rootfs: Option<&Path>,
) -> Result<(u32, u32, Vec<u32>), SpecError> {
    let image_user = config.image.config.user.trim();
    let (user_part, group_part) = match image_user.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (image_user, None),
    };
    let passwd = rootfs
        .and_then(|r| std::fs::read_to_string(r.join("etc/passwd")).ok())
        .unwrap_or_default();
    let group_file = rootfs
        .and_then(|r| std::fs::read_to_string(r.join("etc/group")).ok())
        .unwrap_or_default();
    let lookup_user = |name: &str| -> Option<(u32, u32)> {
        passwd.lines().find_map(|line| {
            let f: Vec<&str> = line.split(':').collect();
            (f.len() >= 4 && f[0] == name)
                .then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))
                .flatten()
        })
    };
    let (mut uid, mut gid) = (0u32, 0u32);
    if let Some(u) = config.security.run_as_user {
        uid = u32::try_from(u).unwrap_or(0);
        gid = passwd
            .lines()
            .find_map(|line| {
                let f: Vec<&str> = line.split(':').collect();
                (f.len() >= 4 && f[2] == uid.to_string())
                    .then(|| f[3].parse().ok())
                    .flatten()
            })
            .unwrap_or(0);
    } else if !user_part.is_empty() {
        if let Ok(n) = user_part.parse::<u32>() {
            uid = n;
            gid = lookup_user_by_uid(&passwd, n).unwrap_or(0);
        } else {
            let (u, g) = lookup_user(user_part).ok_or_else(|| SpecError::UnknownUser {
                container: config.name.clone(),
                user: user_part.to_string(),
            })?;
            uid = u;
            gid = g;
        }
        if let Some(g) = group_part {
            gid = match g.parse::<u32>() {
                Ok(n) => n,
                Err(_) => lookup_group(&group_file, g).unwrap_or(gid),
            };
        }
    }
    if let Some(g) = config.security.run_as_group {
        gid = u32::try_from(g).unwrap_or(gid);
    }
    let additional = config
        .security
        .supplemental_groups
        .iter()
        .filter_map(|g| u32::try_from(*g).ok())
        .collect();
    Ok((uid, gid, additional))
}

fn lookup_user_by_uid(passwd: &str, uid: u32) -> Option<u32> {
    passwd.lines().find_map(|line| {
        let f: Vec<&str> = line.split(':').collect();
        (f.len() >= 4 && f[2] == uid.to_string())
            .then(|| f[3].parse().ok())
            .flatten()
    })
}

fn lookup_group(group: &str, name: &str) -> Option<u32> {
    group.lines().find_map(|line| {
        let f: Vec<&str> = line.split(':').collect();
        (f.len() >= 3 && f[0] == name)
            .then(|| f[2].parse().ok())
            .flatten()
    })
}

const DEFAULT_CAPS: [&str; 14] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
];

const ALL_CAPS: [&str; 41] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
];

fn normalize_cap(cap: &str) -> String {
    let upper = cap.to_ascii_uppercase();
    if upper.starts_with("CAP_") {
        upper
    } else {
        format!("CAP_{upper}")
    }
}

/// Capabilities after securityContext add/drop (`ALL` understood on both sides).
pub fn capabilities(config: &ContainerConfig) -> Vec<String> {
    if config.security.privileged {
        return ALL_CAPS.iter().map(|c| c.to_string()).collect();
    }
    let drop: Vec<String> = config
        .security
        .capabilities_drop
        .iter()
        .map(|c| normalize_cap(c))
        .collect();
    let add: Vec<String> = config
        .security
        .capabilities_add
        .iter()
        .map(|c| normalize_cap(c))
        .collect();
    let mut caps: Vec<String> = if drop.iter().any(|c| c == "CAP_ALL") {
        Vec::new()
    } else {
        DEFAULT_CAPS
            .iter()
            .map(|c| c.to_string())
            .filter(|c| !drop.contains(c))
            .collect()
    };
    if add.iter().any(|c| c == "CAP_ALL") {
        return ALL_CAPS.iter().map(|c| c.to_string()).collect();
    }
    for cap in add {
        if !caps.contains(&cap) {
            caps.push(cap);
        }
    }
    caps
}

/// The whole OCI spec of one container.
pub fn build(
    config: &ContainerConfig,
    sandbox: &PodSandbox,
    cgroups_path: &str,
    user: (u32, u32, Vec<u32>),
) -> Result<Value, SpecError> {
    let privileged = config.security.privileged;
    let mut linux = json!({
        "namespaces": namespaces(config, sandbox),
        "cgroupsPath": cgroups_path,
        "resources": resources(config),
    });
    if !privileged {
        mask_paths(&mut linux);
    }
    let spec = json!({
        "ociVersion": "1.0.2-dev",
        "process": process(config, user)?,
        "root": {"path": "rootfs", "readonly": config.security.readonly_rootfs},
        "mounts": mounts(config),
        "linux": linux,
    });
    serde_json::from_value::<oci_spec::runtime::Spec>(spec.clone()).map_err(|e| {
        SpecError::Invalid {
            container: config.name.clone(),
            message: e.to_string(),
        }
    })?;
    Ok(spec)
}

/// The container's process: command, user, environment, capabilities and limits.
fn process(config: &ContainerConfig, user: (u32, u32, Vec<u32>)) -> Result<Value, SpecError> {
    let args = effective_args(config);
    if args.is_empty() {
        return Err(SpecError::NoCommand {
            container: config.name.clone(),
        });
    }
    let cwd = config
        .working_dir
        .clone()
        .filter(|w| !w.is_empty())
        .or_else(|| Some(config.image.config.working_dir.clone()).filter(|w| !w.is_empty()))
        .unwrap_or_else(|| "/".into());
    let caps = capabilities(config);
    let privileged = config.security.privileged;
    let no_new_privs = !privileged && config.security.allow_privilege_escalation != Some(true);
    let (uid, gid, additional) = user;
    // Raising the hard limit needs CAP_SYS_RESOURCE, which some hosts withhold: never ask
    // for more than this process has.
    let nofile = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map(|(_, hard)| hard.min(1_048_576))
        .unwrap_or(1024);
    let mut process = json!({
        "terminal": config.tty,
        "user": {"uid": uid, "gid": gid},
        "args": args,
        "env": merged_env(config),
        "cwd": cwd,
        "capabilities": {"bounding": caps, "effective": caps, "permitted": caps},
        "rlimits": [{"type": "RLIMIT_NOFILE", "hard": nofile, "soft": nofile}],
        "noNewPrivileges": no_new_privs,
    });
    if !additional.is_empty() {
        process["user"]["additionalGids"] = json!(additional);
    }
    if let Some(adj) = config.resources.oom_score_adj {
        process["oomScoreAdj"] = json!(adj);
    }
    Ok(process)
}

/// The kernel filesystems every container gets, then the pod's volumes.
fn mounts(config: &ContainerConfig) -> Vec<Value> {
    let privileged = config.security.privileged;
    let mut mounts = vec![
        json!({"destination": "/proc", "type": "proc", "source": "proc", "options": ["nosuid", "noexec", "nodev"]}),
        json!({"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]}),
        json!({"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"]}),
        json!({"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]}),
        json!({"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": ["nosuid", "noexec", "nodev"]}),
        json!({"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", if privileged { "rw" } else { "ro" }]}),
        json!({"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup", "options": ["nosuid", "noexec", "nodev", "relatime", if privileged { "rw" } else { "ro" }]}),
    ];
    for m in &config.mounts {
        mounts.push(json!({
            "destination": m.container_path,
            "type": "bind",
            "source": m.host_path,
            "options": ["rbind", "rprivate", if m.readonly { "ro" } else { "rw" }],
        }));
    }
    mounts
}

/// Its own pid (or the pod's shared one) and mount namespaces; the pod's network, UTS
/// and IPC namespaces.
fn namespaces(config: &ContainerConfig, sandbox: &PodSandbox) -> Vec<Value> {
    let pid = match &config.pid_namespace {
        Some(p) => json!({"type": "pid", "path": p}),
        None => json!({"type": "pid"}),
    };
    let mut namespaces = vec![pid, json!({"type": "mount"})];
    for (kind, path) in [
        ("network", &sandbox.netns),
        ("uts", &sandbox.utsns),
        ("ipc", &sandbox.ipcns),
    ] {
        match path {
            Some(p) => namespaces.push(json!({"type": kind, "path": p})),
            // Host network pods join the agent's network namespace: no entry.
            None if kind == "network" => {}
            None => namespaces.push(json!({"type": kind})),
        }
    }
    namespaces
}

/// Devices (containerd's default allow-list unless privileged), memory and CPU.
fn resources(config: &ContainerConfig) -> Value {
    let privileged = config.security.privileged;
    let mut resources = json!({
        "devices": [{"allow": privileged, "access": "rwm"}],
    });
    if !privileged {
        // containerd's default device allow-list for unprivileged containers.
        let allowed = [
            ("c", 1, 3),
            ("c", 1, 5),
            ("c", 1, 7),
            ("c", 1, 8),
            ("c", 1, 9),
            ("c", 5, 0),
            ("c", 5, 1),
            ("c", 5, 2),
            ("c", 136, -1),
        ];
        if let Some(Value::Array(devices)) = resources.get_mut("devices") {
            for (kind, major, minor) in allowed {
                let mut d = json!({"allow": true, "type": kind, "major": major, "access": "rwm"});
                if minor >= 0 {
                    d["minor"] = json!(minor);
                }
                devices.push(d);
            }
        }
    }
    let r = &config.resources;
    if let Some(limit) = r.memory_limit {
        resources["memory"] = json!({"limit": limit});
    }
    let mut cpu = serde_json::Map::new();
    if let Some(shares) = r.cpu_shares {
        cpu.insert("shares".into(), json!(shares));
    }
    if let Some(quota) = r.cpu_quota {
        cpu.insert("quota".into(), json!(quota));
    }
    if let Some(period) = r.cpu_period {
        cpu.insert("period".into(), json!(period));
    }
    if !cpu.is_empty() {
        resources["cpu"] = Value::Object(cpu);
    }
    resources
}

/// containerd's masked and read-only paths for unprivileged containers.
fn mask_paths(linux: &mut Value) {
    linux["maskedPaths"] = json!([
        "/proc/acpi",
        "/proc/asound",
        "/proc/kcore",
        "/proc/keys",
        "/proc/latency_stats",
        "/proc/timer_list",
        "/proc/timer_stats",
        "/proc/sched_debug",
        "/proc/scsi",
        "/sys/firmware",
        "/sys/devices/virtual/powercap"
    ]);
    linux["readonlyPaths"] = json!([
        "/proc/bus",
        "/proc/fs",
        "/proc/irq",
        "/proc/sys",
        "/proc/sysrq-trigger"
    ]);
}

/// An exec'd process (probes, preStop hooks) inheriting the container's user and env.
pub fn exec_process(container_spec: &Value, command: &[String]) -> Value {
    let mut process = container_spec
        .get("process")
        .cloned()
        .unwrap_or_else(|| json!({"user": {"uid": 0, "gid": 0}, "cwd": "/"}));
    process["args"] = json!(command);
    process["terminal"] = json!(false);
    process
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ImageSpec, SandboxState, SecurityConfig};

    fn sandbox() -> PodSandbox {
        PodSandbox {
            id: "sb".into(),
            uid: "u".into(),
            namespace: "default".into(),
            name: "p".into(),
            attempt: 0,
            netns: Some("/run/cairn/netns/sb".into()),
            utsns: Some("/run/cairn/utsns/sb".into()),
            ipcns: Some("/run/cairn/ipcns/sb".into()),
            ip: Some("10.244.0.2".into()),
            cgroup_parent: "/cairn/kubepods/podu".into(),
            state: SandboxState::Ready,
            created_at: None,
        }
    }

    fn container(command: &[&str], args: &[&str]) -> ContainerConfig {
        ContainerConfig {
            name: "c".into(),
            image: ImageSpec {
                config: ImageConfig {
                    entrypoint: vec!["/entry".into()],
                    cmd: vec!["cmd1".into()],
                    env: vec!["PATH=/bin".into(), "A=image".into()],
                    working_dir: "/work".into(),
                    user: String::new(),
                },
                ..Default::default()
            },
            command: command.iter().map(|s| s.to_string()).collect(),
            args: args.iter().map(|s| s.to_string()).collect(),
            env: vec![("A".into(), "pod".into()), ("B".into(), "b".into())],
            ..Default::default()
        }
    }

    #[test]
    fn command_and_args_merge_like_kubernetes() {
        assert_eq!(effective_args(&container(&[], &[])), ["/entry", "cmd1"]);
        assert_eq!(effective_args(&container(&[], &["x"])), ["/entry", "x"]);
        assert_eq!(effective_args(&container(&["/bin/sh"], &[])), ["/bin/sh"]);
        assert_eq!(
            effective_args(&container(&["/bin/sh"], &["-c", "true"])),
            ["/bin/sh", "-c", "true"]
        );
    }

    #[test]
    fn pod_env_overrides_image_env() {
        assert_eq!(
            merged_env(&container(&[], &[])),
            ["PATH=/bin", "A=pod", "B=b"]
        );
    }

    #[test]
    fn capabilities_add_drop() {
        let mut c = container(&[], &[]);
        c.security = SecurityConfig {
            capabilities_drop: vec!["ALL".into()],
            capabilities_add: vec!["NET_ADMIN".into()],
            ..Default::default()
        };
        assert_eq!(capabilities(&c), ["CAP_NET_ADMIN"]);
        c.security.capabilities_drop = vec!["CAP_KILL".into()];
        let caps = capabilities(&c);
        assert!(!caps.contains(&"CAP_KILL".to_string()));
        assert!(caps.contains(&"CAP_CHOWN".to_string()));
    }

    #[test]
    fn spec_is_valid_oci_and_joins_pod_namespaces() {
        let mut c = container(&[], &[]);
        c.resources.memory_limit = Some(32 << 20);
        let spec = build(&c, &sandbox(), "/cairn/kubepods/podu/c1", (0, 0, vec![])).unwrap();
        let ns = spec["linux"]["namespaces"].as_array().unwrap();
        assert!(ns
            .iter()
            .any(|n| n["type"] == "network" && n["path"] == "/run/cairn/netns/sb"));
        assert_eq!(spec["linux"]["resources"]["memory"]["limit"], 32 << 20);
        assert_eq!(spec["process"]["cwd"], "/work");
        assert_eq!(spec["process"]["noNewPrivileges"], true);
    }

    #[test]
    fn no_command_is_an_error() {
        let mut c = container(&[], &[]);
        c.image.config.entrypoint.clear();
        c.image.config.cmd.clear();
        assert!(matches!(
            build(&c, &sandbox(), "/x", (0, 0, vec![])),
            Err(SpecError::NoCommand { .. })
        ));
    }

    #[test]
    fn users_resolve_from_rootfs() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("etc")).unwrap();
        std::fs::write(
            root.path().join("etc/passwd"),
            "root:x:0:0::/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n",
        )
        .unwrap();
        std::fs::write(
            root.path().join("etc/group"),
            "root:x:0:\nnogroup:x:65534:\n",
        )
        .unwrap();
        let mut c = container(&[], &[]);
        c.image.config.user = "nobody".into();
        assert_eq!(
            resolve_user(&c, Some(root.path())).unwrap(),
            (65534, 65534, vec![])
        );
        c.image.config.user = "1000:nogroup".into();
        assert_eq!(resolve_user(&c, Some(root.path())).unwrap().1, 65534);
        c.security.run_as_user = Some(65534);
        c.security.run_as_group = Some(7);
        assert_eq!(
            resolve_user(&c, Some(root.path())).unwrap(),
            (65534, 7, vec![])
        );
        c.security = Default::default();
        c.image.config.user = "ghost".into();
        assert!(resolve_user(&c, Some(root.path())).is_err());
    }
}
