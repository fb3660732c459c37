//! Test helpers: network namespaces that clean up after themselves, and running a CNI
//! plugin through the protocol (environment + stdin) with a namespace standing for the
//! host. Shared by the integration tests and the benchmark.
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::Value;

pub const CAIRN: &str = env!("CARGO_BIN_EXE_cairn-cni");
pub const REF_BRIDGE: &str = "/usr/lib/cni/bridge";
pub const REF_DIR: &str = "/usr/lib/cni";

static COUNTER: AtomicU32 = AtomicU32::new(0);

fn rand_suffix() -> String {
    let mut buf = [0u8; 4];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = f.read_exact(&mut buf);
    }
    format!(
        "{}-{}-{:02x}{:02x}{:02x}{:02x}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
        buf[0],
        buf[1],
        buf[2],
        buf[3]
    )
}

/// A named network namespace (`ip netns add cairn-test-...`), deleted on drop.
pub struct Netns {
    pub name: String,
    deleted: bool,
}

impl Netns {
    pub fn new() -> Self {
        let name = format!("cairn-test-{}", rand_suffix());
        let st = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .expect("run ip netns add");
        assert!(st.success(), "ip netns add {name} failed");
        Netns {
            name,
            deleted: false,
        }
    }

    pub fn path(&self) -> PathBuf {
        PathBuf::from(format!("/run/netns/{}", self.name))
    }

    /// Runs a command inside the namespace (`ip netns exec`), returning its output.
    pub fn exec(&self, args: &[&str]) -> Output {
        Command::new("ip")
            .args(["netns", "exec", &self.name])
            .args(args)
            .output()
            .expect("run ip netns exec")
    }

    /// Runs a command inside the namespace and returns stdout, asserting success.
    pub fn sh(&self, args: &[&str]) -> String {
        let out = self.exec(args);
        assert!(
            out.status.success(),
            "{args:?} in {} failed: {}",
            self.name,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `ip -j ...` inside the namespace, parsed.
    pub fn ip_json(&self, args: &[&str]) -> Value {
        let mut full = vec!["ip", "-j", "-d"];
        full.extend_from_slice(args);
        let out = self.sh(&full);
        if out.trim().is_empty() {
            return Value::Array(vec![]);
        }
        serde_json::from_str(&out).expect("ip -j output is JSON")
    }

    /// Deletes the namespace now (e.g. to test DEL after the netns is gone).
    pub fn delete(&mut self) {
        if !self.deleted {
            let _ = Command::new("ip")
                .args(["netns", "del", &self.name])
                .status();
            self.deleted = true;
        }
    }
}

impl Default for Netns {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        self.delete();
    }
}

/// One CNI invocation.
pub struct Call<'a> {
    pub plugin: &'a str,
    pub command: &'a str,
    pub container_id: &'a str,
    pub netns: Option<&'a Path>,
    pub ifname: &'a str,
    pub config: &'a Value,
    pub extra_env: Vec<(&'a str, String)>,
}

/// Spawns the plugin as a child of a thread that entered `host`'s network namespace, so
/// the plugin runs "on the host" without `ip netns exec` overhead.
pub fn spawn_in(host: &Netns, call: &Call<'_>) -> std::process::Child {
    let host_path = host.path();
    let plugin = call.plugin.to_string();
    let mut env: Vec<(String, String)> = vec![
        ("CNI_COMMAND".into(), call.command.into()),
        ("CNI_PATH".into(), REF_DIR.into()),
    ];
    if !call.container_id.is_empty() {
        env.push(("CNI_CONTAINERID".into(), call.container_id.into()));
    }
    if !call.ifname.is_empty() {
        env.push(("CNI_IFNAME".into(), call.ifname.into()));
    }
    if let Some(ns) = call.netns {
        env.push(("CNI_NETNS".into(), ns.display().to_string()));
    }
    for (k, v) in &call.extra_env {
        env.push(((*k).into(), v.clone()));
    }
    let stdin = serde_json::to_vec(call.config).expect("config serializes");
    std::thread::spawn(move || {
        let _g = cairn_netlink::NetnsGuard::enter(&host_path).expect("enter host netns");
        let mut child = Command::new(&plugin)
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .envs(env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn plugin");
        // The plugin may exit before reading stdin (it failed early): ignore EPIPE.
        let _ = child.stdin.take().expect("stdin").write_all(&stdin);
        child
    })
    .join()
    .expect("spawn thread")
}

/// Runs one invocation to completion.
pub fn run_in(host: &Netns, call: &Call<'_>) -> Output {
    spawn_in(host, call)
        .wait_with_output()
        .expect("wait plugin")
}

/// Convenience: runs `command` and returns (exit success, stdout JSON or Null, stderr).
pub fn cni(
    host: &Netns,
    plugin: &str,
    command: &str,
    id: &str,
    netns: Option<&Path>,
    ifname: &str,
    config: &Value,
) -> (bool, Value, String) {
    let out = run_in(
        host,
        &Call {
            plugin,
            command,
            container_id: id,
            netns,
            ifname,
            config,
            extra_env: vec![],
        },
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v = if stdout.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("{plugin} {command} stdout is not JSON ({e}): {stdout}"))
    };
    (
        out.status.success(),
        v,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A flannel-style bridge config for `plugin_type` ("bridge" or "cairn-cni").
pub fn bridge_conf(version: &str, plugin_type: &str, data_dir: &Path, subnet: &str) -> Value {
    serde_json::json!({
        "cniVersion": version,
        "name": "cairn-test",
        "type": plugin_type,
        "bridge": "cni0",
        "isGateway": true,
        "isDefaultGateway": true,
        "hairpinMode": true,
        "mtu": 1450,
        "ipam": {
            "type": "host-local",
            "subnet": subnet,
            "dataDir": data_dir.display().to_string(),
            "routes": [{"dst": "10.244.0.0/16"}]
        }
    })
}

/// Allocation files (named after addresses) in `<data_dir>/<network>`.
pub fn ip_files(data_dir: &Path, network: &str) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(data_dir.join(network))
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_str().map(String::from))
                .filter(|n| n.parse::<std::net::IpAddr>().is_ok())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// veth links in a namespace.
pub fn veths(ns: &Netns) -> Vec<String> {
    ns.ip_json(&["link", "show", "type", "veth"])
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|l| l["ifname"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}
