//! Two nodes in network namespaces joined by an underlay (a bridge in a third "switch"
//! namespace, node IPs 198.18.0.1/24 and 198.18.0.2/24), a cairn API server on the switch
//! (198.18.0.254, in-process; node IPAM gives the Nodes their podCIDRs), the network
//! controller in standalone mode (`cairn-cni controller`, entered into each node's
//! namespace with nsenter), and pods set up cnitool-style through the conflist the
//! controller wrote. Real traffic (ping and TCP) is checked for both backends, as are
//! departing nodes, controller restarts and masquerading.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
#[path = "two_nodes/scenario.rs"]
mod scenario;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Netns, CAIRN};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{json, Value};
use sha2::Digest;

const SWITCH_IP: &str = "198.18.0.254";

/// Polls `check` until it yields; the deadline only guards against a hang.
fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn ip(ns: &Netns, args: &[&str]) {
    run_ok(Command::new("ip").arg("-n").arg(&ns.name).args(args));
}

/// The switch namespace with its bridge, the API server on it, and an API client.
struct Cluster {
    dir: tempfile::TempDir,
    switch: Netns,
    rt: tokio::runtime::Runtime,
    server: Option<cairn_apiserver::RunningServer>,
    client: kube::Client,
    kubeconfig: PathBuf,
}

impl Cluster {
    fn new() -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let switch = Netns::new();
        ip(&switch, &["link", "set", "lo", "up"]);
        ip(&switch, &["link", "add", "br0", "type", "bridge"]);
        ip(
            &switch,
            &["addr", "add", &format!("{SWITCH_IP}/24"), "dev", "br0"],
        );
        ip(&switch, &["link", "set", "br0", "up"]);
        // Every socket of this runtime (the API server's and the test client's) lives in
        // the switch namespace.
        let ns_path = switch.path();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .on_thread_start(move || {
                let f = std::fs::File::open(&ns_path).unwrap();
                nix::sched::setns(&f, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
            })
            .build()
            .unwrap();
        let mut config = cairn_apiserver::ServerConfig::new(dir.path().join("control"));
        config.bind = format!("{SWITCH_IP}:0").parse().unwrap();
        let server = rt
            .block_on(async { tokio::spawn(cairn_apiserver::start(config)).await })
            .unwrap()
            .unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, server.admin_kubeconfig().unwrap()).unwrap();
        let kc = kubeconfig.clone();
        let client = rt
            .block_on(async {
                tokio::spawn(async move {
                    let k = kube::config::Kubeconfig::read_from(&kc).unwrap();
                    let c = kube::Config::from_custom_kubeconfig(k, &Default::default())
                        .await
                        .unwrap();
                    kube::Client::try_from(c).unwrap()
                })
                .await
            })
            .unwrap();
        Cluster {
            dir,
            switch,
            rt,
            server: Some(server),
            client,
            kubeconfig,
        }
    }

    fn on_rt<F>(&self, f: F) -> F::Output
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.rt.block_on(async { tokio::spawn(f).await.unwrap() })
    }

    fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    /// A node namespace: `eth0` with `ip`/24 on the switch's bridge.
    fn node_netns(&self, ip_addr: &str, port: &str) -> Netns {
        let ns = Netns::new();
        ip(&ns, &["link", "set", "lo", "up"]);
        ip(
            &self.switch,
            &[
                "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", &ns.name,
            ],
        );
        ip(&self.switch, &["link", "set", port, "master", "br0", "up"]);
        ip(
            &ns,
            &["addr", "add", &format!("{ip_addr}/24"), "dev", "eth0"],
        );
        ip(&ns, &["link", "set", "eth0", "up"]);
        ns
    }

    fn create_node(&self, name: &str, internal_ip: &str, annotations: Value) {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": annotations},
            "status": {"addresses": [
                {"type": "InternalIP", "address": internal_ip},
                {"type": "Hostname", "address": name}]}
        }))
        .unwrap();
        let api = self.nodes();
        self.on_rt(async move { api.create(&PostParams::default(), &node).await })
            .unwrap();
    }

    fn delete_node(&self, name: &str) {
        let api = self.nodes();
        let name = name.to_string();
        self.on_rt(async move { api.delete(&name, &DeleteParams::default()).await })
            .unwrap();
    }

    fn node(&self, name: &str) -> Node {
        let api = self.nodes();
        let name = name.to_string();
        self.on_rt(async move { api.get(&name).await }).unwrap()
    }

    fn pod_cidr(&self, name: &str) -> String {
        eventually(&format!("podCIDR of {name}"), || {
            self.node(name).spec.and_then(|s| s.pod_cidr)
        })
    }

    fn node_dir(&self, node: &str) -> PathBuf {
        self.dir.path().join(node)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            let _ = self
                .rt
                .block_on(async { tokio::spawn(server.stop()).await });
        }
    }
}

/// `cairn-cni controller` running in a node's namespace; killed on drop.
struct ControllerProc {
    child: Child,
    log: PathBuf,
}

impl ControllerProc {
    fn start(cluster: &Cluster, node_ns: &Netns, node: &str, backend: &str) -> ControllerProc {
        let dir = cluster.node_dir(node);
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("controller.log");
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        let child = Command::new("nsenter")
            .arg(format!("--net={}", node_ns.path().display()))
            .arg(CAIRN)
            .arg("controller")
            .arg("--kubeconfig")
            .arg(&cluster.kubeconfig)
            .args(["--node-name", node, "--backend", backend])
            .arg("--subnet-file")
            .arg(dir.join("subnet.env"))
            .arg("--cni-conf-dir")
            .arg(dir.join("net.d"))
            .arg("--cni-data-dir")
            .arg(dir.join("ipam"))
            .env_remove("CNI_COMMAND")
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .unwrap();
        ControllerProc { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ControllerProc {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Exactly what `cnitool add|check|del NET NETNS` does through libcni: find the conflist
/// named NET in NETCONFPATH, derive the container ID from the netns path, then exec each
/// plugin found in CNI_PATH with the CNI environment and its config on stdin (name and
/// cniVersion injected, prevResult chained on ADD, the cached result given on CHECK/DEL,
/// plugins in reverse order on DEL). cnitool itself is not packaged in Debian, so this is
/// an emulation of its behaviour, run from a thread inside the node's namespace.
struct CniTool {
    conf_dir: PathBuf,
    cni_path: PathBuf,
    cache: std::collections::HashMap<String, Value>,
}

impl CniTool {
    fn new(conf_dir: &Path) -> CniTool {
        CniTool {
            conf_dir: conf_dir.to_path_buf(),
            cni_path: Path::new(CAIRN).parent().unwrap().to_path_buf(),
            cache: Default::default(),
        }
    }

    fn load_conflist(&self, net: &str) -> Value {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&self.conf_dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                matches!(
                    p.extension().and_then(|e| e.to_str()),
                    Some("conflist") | Some("conf") | Some("json")
                )
            })
            .collect();
        files.sort();
        files
            .iter()
            .map(|p| serde_json::from_slice::<Value>(&std::fs::read(p).unwrap()).unwrap())
            .find(|v| v["name"] == net)
            .unwrap_or_else(|| panic!("no network {net} in {}", self.conf_dir.display()))
    }

    fn container_id(netns: &Path) -> String {
        let digest = sha2::Sha512::digest(netns.display().to_string().as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        format!("cnitool-{}", &hex[..20])
    }

    fn exec(
        &self,
        host: &Netns,
        plugin_type: &str,
        command: &str,
        netns: &Path,
        conf: &Value,
    ) -> (bool, Value) {
        let plugin = self.cni_path.join(plugin_type);
        assert!(plugin.exists(), "plugin {plugin_type} not in CNI_PATH");
        let env = vec![
            ("CNI_COMMAND", command.to_string()),
            ("CNI_CONTAINERID", Self::container_id(netns)),
            ("CNI_NETNS", netns.display().to_string()),
            ("CNI_IFNAME", "eth0".to_string()),
            ("CNI_ARGS", String::new()),
            ("CNI_PATH", self.cni_path.display().to_string()),
        ];
        let stdin = serde_json::to_vec(conf).unwrap();
        let host_path = host.path();
        let out = std::thread::spawn(move || {
            let _g = cairn_netlink::NetnsGuard::enter(&host_path).unwrap();
            let mut child = Command::new(&plugin)
                .env_clear()
                .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
                .envs(env)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let _ = child.stdin.take().unwrap().write_all(&stdin);
            child.wait_with_output().unwrap()
        })
        .join()
        .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let v = if stdout.trim().is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&stdout).unwrap()
        };
        (out.status.success(), v)
    }

    fn plugin_conf(list: &Value, plugin: &Value, prev: Option<&Value>) -> Value {
        let mut conf = plugin.clone();
        conf["name"] = list["name"].clone();
        conf["cniVersion"] = list["cniVersion"].clone();
        if let Some(p) = prev {
            conf["prevResult"] = p.clone();
        }
        conf
    }

    /// `cnitool add NET NETNS`: the final result.
    fn add(&mut self, host: &Netns, net: &str, netns: &Path) -> Value {
        let list = self.load_conflist(net);
        let mut prev: Option<Value> = None;
        for plugin in list["plugins"].as_array().unwrap() {
            let conf = Self::plugin_conf(&list, plugin, prev.as_ref());
            let (ok, result) =
                self.exec(host, plugin["type"].as_str().unwrap(), "ADD", netns, &conf);
            assert!(ok, "ADD through {} failed: {result}", plugin["type"]);
            prev = Some(result);
        }
        let result = prev.unwrap();
        self.cache
            .insert(netns.display().to_string(), result.clone());
        result
    }

    /// `cnitool check NET NETNS`.
    fn check(&self, host: &Netns, net: &str, netns: &Path) -> bool {
        let list = self.load_conflist(net);
        let cached = self.cache.get(&netns.display().to_string());
        list["plugins"].as_array().unwrap().iter().all(|plugin| {
            let conf = Self::plugin_conf(&list, plugin, cached);
            self.exec(
                host,
                plugin["type"].as_str().unwrap(),
                "CHECK",
                netns,
                &conf,
            )
            .0
        })
    }

    /// `cnitool del NET NETNS`.
    fn del(&mut self, host: &Netns, net: &str, netns: &Path) -> bool {
        let list = self.load_conflist(net);
        let cached = self.cache.remove(&netns.display().to_string());
        list["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .all(|plugin| {
                let conf = Self::plugin_conf(&list, plugin, cached.as_ref());
                self.exec(host, plugin["type"].as_str().unwrap(), "DEL", netns, &conf)
                    .0
            })
    }
}

fn pod_ip(result: &Value) -> Ipv4Addr {
    result["ips"][0]["address"]
        .as_str()
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// `ping` from inside `from`; true when a reply came back.
fn ping(from: &Netns, to: Ipv4Addr) -> bool {
    Command::new("nsenter")
        .arg(format!("--net={}", from.path().display()))
        .args([
            "ping",
            "-c",
            "3",
            "-i",
            "0.2",
            "-W",
            "2",
            "-q",
            &to.to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success()
}

/// One TCP exchange: a listener in `server_ns` on `server_ip`, a client in `client_ns`.
/// Returns the client address the server saw.
fn tcp(server_ns: &Path, server_ip: Ipv4Addr, client_ns: &Path) -> Result<SocketAddr, String> {
    let (port_tx, port_rx) = std::sync::mpsc::channel();
    let server_ns = server_ns.to_path_buf();
    let server = std::thread::spawn(move || -> Result<SocketAddr, String> {
        let _g = cairn_netlink::NetnsGuard::enter(&server_ns).map_err(|e| e.to_string())?;
        let listener = TcpListener::bind((server_ip, 0)).map_err(|e| e.to_string())?;
        port_tx.send(listener.local_addr().unwrap().port()).unwrap();
        listener.set_nonblocking(true).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let (mut stream, peer) = loop {
            match listener.accept() {
                Ok(s) => break s,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() > deadline {
                        return Err("no connection arrived".into());
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => return Err(e.to_string()),
            }
        };
        stream.set_nonblocking(false).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut line = String::new();
        BufReader::new(stream.try_clone().unwrap())
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        stream
            .write_all(format!("pong {line}").as_bytes())
            .map_err(|e| e.to_string())?;
        Ok(peer)
    });
    let port = port_rx
        .recv_timeout(Duration::from_secs(5))
        .map_err(|e| format!("listener did not start: {e}"))?;
    let client_ns = client_ns.to_path_buf();
    let client = std::thread::spawn(move || -> Result<String, String> {
        let _g = cairn_netlink::NetnsGuard::enter(&client_ns).map_err(|e| e.to_string())?;
        let mut s = TcpStream::connect_timeout(
            &SocketAddr::from((server_ip, port)),
            Duration::from_secs(5),
        )
        .map_err(|e| format!("connect {server_ip}:{port}: {e}"))?;
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(b"ping\n").map_err(|e| e.to_string())?;
        let mut reply = String::new();
        s.read_to_string(&mut reply).map_err(|e| e.to_string())?;
        Ok(reply)
    });
    let reply = client.join().unwrap();
    let seen = server.join().unwrap();
    match (reply, seen) {
        (Ok(r), Ok(peer)) if r == "pong ping\n" => Ok(peer),
        (r, s) => Err(format!("client: {r:?}, server: {s:?}")),
    }
}

fn json_in(ns: &Netns, args: &[&str]) -> Value {
    let out = ns.sh(args);
    if out.trim().is_empty() {
        Value::Array(vec![])
    } else {
        serde_json::from_str(&out).unwrap()
    }
}

/// The destinations of the controller's routes (`proto 202`) in a node namespace.
fn owned_routes(ns: &Netns) -> BTreeSet<String> {
    json_in(ns, &["ip", "-j", "route", "show", "proto", "202"])
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{} via {} dev {}{}",
                r["dst"].as_str().unwrap_or(""),
                r["gateway"].as_str().unwrap_or("-"),
                r["dev"].as_str().unwrap_or(""),
                if r["flags"]
                    .as_array()
                    .is_some_and(|f| f.iter().any(|x| x == "onlink"))
                {
                    " onlink"
                } else {
                    ""
                }
            )
        })
        .collect()
}

fn route_dsts(ns: &Netns) -> BTreeSet<String> {
    owned_routes(ns)
        .into_iter()
        .map(|r| r.split(' ').next().unwrap().to_string())
        .collect()
}

fn vxlan_neighbours(ns: &Netns) -> BTreeSet<String> {
    json_in(
        ns,
        &[
            "ip",
            "-j",
            "neigh",
            "show",
            "dev",
            "cairn.1",
            "nud",
            "permanent",
        ],
    )
    .as_array()
    .unwrap()
    .iter()
    .map(|n| {
        format!(
            "{} {}",
            n["dst"].as_str().unwrap(),
            n["lladdr"].as_str().unwrap_or("")
        )
    })
    .collect()
}

fn vxlan_fdb(ns: &Netns) -> BTreeSet<String> {
    json_in(ns, &["bridge", "-j", "fdb", "show", "dev", "cairn.1"])
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["dst"].is_string())
        .map(|e| {
            format!(
                "{} {}",
                e["mac"].as_str().unwrap(),
                e["dst"].as_str().unwrap()
            )
        })
        .collect()
}

fn vxlan_link(ns: &Netns) -> (u64, String, u64) {
    let l = json_in(ns, &["ip", "-j", "-d", "link", "show", "cairn.1"]);
    let l = &l[0];
    (
        l["ifindex"].as_u64().unwrap(),
        l["address"].as_str().unwrap().to_string(),
        l["mtu"].as_u64().unwrap(),
    )
}

fn cidr_base(cidr: &str) -> Ipv4Addr {
    cidr.split('/').next().unwrap().parse().unwrap()
}

#[test]
fn host_gw_two_nodes() {
    scenario::two_nodes("host-gw");
}

#[test]
fn vxlan_two_nodes() {
    scenario::two_nodes("vxlan");
}

/// cnitool-style use in one namespace standing for the host: a conflist file in a
/// NETCONFPATH directory, the plugin found through CNI_PATH by its `type`, ADD, CHECK and
/// DEL of one container as cnitool does them.
#[test]
fn cnitool_style_conflist() {
    let host = Netns::new();
    let pod = Netns::new();
    let dir = tempfile::tempdir().unwrap();
    let conf_dir = dir.path().join("net.d");
    std::fs::create_dir_all(&conf_dir).unwrap();
    let list = json!({
        "cniVersion": "1.0.0",
        "name": "mynet",
        "plugins": [{
            "type": "cairn-cni", "bridge": "cni0", "isGateway": true, "isDefaultGateway": true,
            "ipMasq": true,
            "ipam": {"type": "host-local", "subnet": "10.244.7.0/24",
                     "dataDir": dir.path().join("ipam").display().to_string()}
        }]
    });
    std::fs::write(conf_dir.join("10-mynet.conflist"), list.to_string()).unwrap();
    std::fs::write(
        conf_dir.join("20-other.conflist"),
        json!({"cniVersion": "1.0.0", "name": "other", "plugins": []}).to_string(),
    )
    .unwrap();
    let mut tool = CniTool::new(&conf_dir);
    let result = tool.add(&host, "mynet", &pod.path());
    assert_eq!(result["cniVersion"], "1.0.0");
    assert_eq!(result["ips"][0]["address"], "10.244.7.2/24");
    assert_eq!(result["ips"][0]["gateway"], "10.244.7.1");
    let ifaces = result["interfaces"].as_array().unwrap();
    assert!(ifaces
        .iter()
        .any(|i| i["name"] == "eth0" && i["sandbox"] == pod.path().display().to_string()));
    let addrs = pod.sh(&["ip", "-4", "-o", "addr", "show", "dev", "eth0"]);
    assert!(addrs.contains("10.244.7.2/24"));
    let id = CniTool::container_id(&pod.path());
    assert!(id.starts_with("cnitool-") && id.len() == 28);
    let files = common::ip_files(&dir.path().join("ipam"), "mynet");
    assert_eq!(files, ["10.244.7.2"]);
    let owner = std::fs::read_to_string(dir.path().join("ipam/mynet/10.244.7.2")).unwrap();
    assert!(owner.starts_with(&id), "{owner}");
    assert!(tool.check(&host, "mynet", &pod.path()));
    assert!(
        ping(&host, "10.244.7.2".parse().unwrap()) || ping(&pod, "10.244.7.1".parse().unwrap())
    );
    assert!(tool.del(&host, "mynet", &pod.path()));
    assert!(common::ip_files(&dir.path().join("ipam"), "mynet").is_empty());
    assert!(common::veths(&host).is_empty());
    // DEL again (cnitool run twice) is still success.
    assert!(tool.del(&host, "mynet", &pod.path()));
}
