//! The lab's address plan and directory layout, derived from its options alone (no IO):
//!
//! - netns driver: switch namespace `cl-<lab>-sw`, bridge `br0` with 198.18.0.1/24; the
//!   lab registry listens there on :5000; node `i` (1-based) is `node-<i>`, namespace
//!   `cl-<lab>-n<i>`, `eth0` with 198.18.0.(10+i)/24 and a default route via the switch;
//! - docker driver: Docker network `cl-<lab>` on 198.18.N.0/24 (N from the lab's name, so
//!   labs of different names do not collide), gateway .1 (Docker's), the registry
//!   container `cl-<lab>-registry` at .2, node `i` the privileged container
//!   `cl-<lab>-node-<i>` at .(10+i);
//! - cairn-control on node-1, `0.0.0.0:6443` inside its namespace; the host reaches it
//!   through a forward on 127.0.0.1:<api-port> (the host's network is not changed);
//! - with `--control-replicas N --store etcd` (netns driver): on nodes 1..=N an etcd
//!   member (clients on the node's loopback :2379, peers on its address :2380, kubeadm's
//!   stacked topology) and a cairn-control replica on it; the host's forward tries the
//!   replicas in order, so it fails over to a live one;
//! - pods from 10.244.0.0/16 (node IPAM in cairn-control: a /24 per node), services
//!   from 10.96.0.0/12.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::{LabError, Result};

pub const CLUSTER_CIDR: &str = "10.244.0.0/16";
pub const SERVICE_CIDR: &str = "10.96.0.0/12";
pub const SWITCH_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
pub const UNDERLAY_PREFIX: u8 = 24;
pub const REGISTRY_PORT: u16 = 5000;
pub const API_PORT: u16 = 6443;
/// etcd's client port, on each etcd node's loopback.
pub const ETCD_CLIENT_PORT: u16 = 2379;
/// etcd's peer port, on each etcd node's address.
pub const ETCD_PEER_PORT: u16 = 2380;
/// etcd's plain-HTTP /health and /metrics, on the node's loopback only (kubeadm's 2381).
pub const ETCD_METRICS_PORT: u16 = 2381;
pub const MAX_NODES: usize = 50;
/// The containerd namespace every agent uses.
pub const CONTAINERD_NAMESPACE: &str = "cairn";

/// Where nodes live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum DriverKind {
    /// A network namespace per node, sharing the host's mounts and cgroups.
    Netns,
    /// A privileged container per node (own mount namespace, cgroup tree, containerd).
    Docker,
}

impl DriverKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DriverKind::Netns => "netns",
            DriverKind::Docker => "docker",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum ProxyMode {
    Nftables,
    Iptables,
    Ipvs,
}

impl ProxyMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ProxyMode::Nftables => "nftables",
            ProxyMode::Iptables => "iptables",
            ProxyMode::Ipvs => "ipvs",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkBackend {
    HostGw,
    Vxlan,
}

impl NetworkBackend {
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkBackend::HostGw => "host-gw",
            NetworkBackend::Vxlan => "vxlan",
        }
    }
}

/// Where the control plane keeps its state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum LabStore {
    /// cairn-control's embedded SQLite (one replica).
    #[default]
    Sqlite,
    /// An etcd member beside each control replica.
    Etcd,
}

fn one() -> usize {
    1
}

/// What `cairn-lab up` was asked for.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LabOptions {
    pub name: String,
    pub nodes: usize,
    pub driver: DriverKind,
    pub proxy_mode: ProxyMode,
    pub network: NetworkBackend,
    pub api_port: u16,
    /// Where cairn-control, cairn-agent, cairn-cni, cairn-logger and cairn-proxy are.
    pub bin_dir: PathBuf,
    /// Extra flags for `cairn-control serve` (e.g. a short node grace period in tests).
    pub control_args: Vec<String>,
    /// Extra flags for every node's `cairn-agent`.
    pub agent_args: Vec<String>,
    /// Extra flags for every node's `cairn-proxy`.
    #[serde(default)]
    pub proxy_args: Vec<String>,
    /// cairn-control replicas, on the first nodes.
    #[serde(default = "one")]
    pub control_replicas: usize,
    #[serde(default)]
    pub store: LabStore,
    /// Parents of the lab's data, runtime and log directories.
    pub roots: Roots,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Roots {
    pub data: PathBuf,
    pub run: PathBuf,
    pub log: PathBuf,
}

impl Default for Roots {
    fn default() -> Roots {
        Roots {
            data: "/var/lib/cairn-lab".into(),
            run: "/run/cairn-lab".into(),
            log: "/var/log/cairn-lab".into(),
        }
    }
}

impl Roots {
    pub fn state_file(&self, lab: &str) -> PathBuf {
        self.run.join(lab).join("lab.json")
    }
}

/// One node of the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodePlan {
    pub name: String,
    pub index: usize,
    pub ip: Ipv4Addr,
    /// Its network namespace.
    pub netns: String,
    /// Its veth on the switch's bridge.
    pub switch_port: String,
    pub data_dir: PathBuf,
    pub run_dir: PathBuf,
    pub log_dir: PathBuf,
    /// Its pods' cgroup parent.
    pub cgroup_root: String,
}

impl NodePlan {
    pub fn netns_path(&self) -> PathBuf {
        PathBuf::from("/run/netns").join(&self.netns)
    }
    pub fn containerd_socket(&self) -> PathBuf {
        self.run_dir.join("containerd/containerd.sock")
    }
    pub fn log(&self, component: &str) -> PathBuf {
        self.log_dir.join(format!("{component}.log"))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LabPlan {
    pub options: LabOptions,
    /// The underlay is 198.18.<subnet_octet>.0/24.
    pub subnet_octet: u8,
    /// Where the lab registry listens.
    pub registry_ip: Ipv4Addr,
    pub switch_netns: String,
    pub data_dir: PathBuf,
    pub run_dir: PathBuf,
    pub log_dir: PathBuf,
    pub nodes: Vec<NodePlan>,
}

/// A lab name becomes part of namespace and cgroup names: short, lower-case, no dots.
pub fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 8
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && name.as_bytes()[0].is_ascii_lowercase();
    if ok {
        Ok(())
    } else {
        Err(LabError::Usage(format!(
            "lab name {name:?}: 1 to 8 lower-case letters or digits, starting with a letter"
        )))
    }
}

/// Replicas need a store they can share and a host address that can fail over.
fn check_control(options: &LabOptions) -> Result<()> {
    let replicas = options.control_replicas;
    let refuse = |why: String| Err(LabError::Usage(why));
    if replicas == 0 || replicas > options.nodes {
        return refuse(format!(
            "--control-replicas {replicas}: 1 to the lab's {} node(s)",
            options.nodes
        ));
    }
    if replicas > 1 && options.store != LabStore::Etcd {
        return refuse(format!(
            "--control-replicas {replicas} needs --store etcd (the embedded SQLite is one host's)"
        ));
    }
    if options.store == LabStore::Etcd && options.driver != DriverKind::Netns {
        return refuse(
            "--store etcd needs --driver netns (etcd runs from the host, the docker node image has none)"
                .into(),
        );
    }
    Ok(())
}

impl LabPlan {
    pub fn new(options: LabOptions) -> Result<LabPlan> {
        check_name(&options.name)?;
        if options.nodes == 0 || options.nodes > MAX_NODES {
            return Err(LabError::Usage(format!(
                "--nodes {}: a lab has 1 to {MAX_NODES} nodes",
                options.nodes
            )));
        }
        check_control(&options)?;
        let lab = options.name.clone();
        let subnet_octet = match options.driver {
            DriverKind::Netns => 0,
            // FNV-1a of the name: a stable /24 per lab name in 198.18.1-250.
            DriverKind::Docker => {
                let h = lab.bytes().fold(0x811c9dc5u32, |h, b| {
                    (h ^ u32::from(b)).wrapping_mul(0x01000193)
                });
                1 + (h % 250) as u8
            }
        };
        let registry_ip = match options.driver {
            DriverKind::Netns => SWITCH_IP,
            DriverKind::Docker => Ipv4Addr::new(198, 18, subnet_octet, 2),
        };
        let data_dir = options.roots.data.join(&lab);
        let run_dir = options.roots.run.join(&lab);
        let log_dir = options.roots.log.join(&lab);
        let nodes = (1..=options.nodes)
            .map(|index| {
                let name = format!("node-{index}");
                NodePlan {
                    ip: Ipv4Addr::new(198, 18, subnet_octet, 10 + index as u8),
                    netns: format!("cl-{lab}-n{index}"),
                    switch_port: format!("n{index}"),
                    data_dir: data_dir.join("nodes").join(&name),
                    run_dir: run_dir.join("nodes").join(&name),
                    log_dir: log_dir.join(&name),
                    cgroup_root: format!("/cairn-lab/{lab}/{name}"),
                    name,
                    index,
                }
            })
            .collect();
        Ok(LabPlan {
            subnet_octet,
            registry_ip,
            switch_netns: format!("cl-{lab}-sw"),
            data_dir,
            run_dir,
            log_dir,
            nodes,
            options,
        })
    }

    pub fn name(&self) -> &str {
        &self.options.name
    }
    pub fn control_node(&self) -> &NodePlan {
        &self.nodes[0]
    }
    /// Whether `node` runs a cairn-control replica (the first `--control-replicas` nodes).
    pub fn runs_control(&self, node: &NodePlan) -> bool {
        node.index <= self.options.control_replicas
    }
    /// Whether `node` runs an etcd member (beside each replica, with `--store etcd`).
    pub fn runs_etcd(&self, node: &NodePlan) -> bool {
        self.options.store == LabStore::Etcd && self.runs_control(node)
    }
    /// The nodes running a control replica, node-1 first.
    pub fn control_nodes(&self) -> impl Iterator<Item = &NodePlan> {
        self.nodes.iter().filter(|n| self.runs_control(n))
    }
    /// etcd's `--initial-cluster`: every member's peer URL.
    pub fn etcd_initial_cluster(&self) -> String {
        let members: Vec<String> = self
            .nodes
            .iter()
            .filter(|n| self.runs_etcd(n))
            .map(|n| format!("{}=https://{}:{ETCD_PEER_PORT}", n.name, n.ip))
            .collect();
        members.join(",")
    }
    pub fn node(&self, name: &str) -> Result<&NodePlan> {
        self.nodes.iter().find(|n| n.name == name).ok_or_else(|| {
            let names: Vec<&str> = self.nodes.iter().map(|n| n.name.as_str()).collect();
            LabError::Usage(format!(
                "lab {} has no node {name} (nodes: {})",
                self.name(),
                names.join(", ")
            ))
        })
    }
    /// The API as the nodes reach it.
    pub fn api_url_inside(&self) -> String {
        format!("https://{}:{API_PORT}", self.control_node().ip)
    }
    /// The API as the host reaches it (through the forward).
    pub fn api_url_host(&self) -> String {
        format!("https://127.0.0.1:{}", self.options.api_port)
    }
    /// cairn-control's data dir on the control node.
    pub fn control_data_dir(&self) -> PathBuf {
        self.control_node().data_dir.join("control")
    }
    /// The cluster CA, which every client of the API trusts (the same path on the host
    /// and in every node).
    pub fn cluster_ca(&self) -> PathBuf {
        self.control_data_dir().join("pki/ca.crt")
    }
    pub fn registry(&self) -> String {
        format!("{}:{REGISTRY_PORT}", self.registry_ip)
    }
    pub fn subnet(&self) -> String {
        format!("198.18.{}.0/{UNDERLAY_PREFIX}", self.subnet_octet)
    }
    /// Docker objects of the docker driver.
    pub fn docker_network(&self) -> String {
        format!("cl-{}", self.name())
    }
    pub fn container(&self, node: &NodePlan) -> String {
        format!("cl-{}-{}", self.name(), node.name)
    }
    pub fn registry_container(&self) -> String {
        format!("cl-{}-registry", self.name())
    }
    pub fn switch_netns_path(&self) -> PathBuf {
        PathBuf::from("/run/netns").join(&self.switch_netns)
    }
    pub fn kubeconfig(&self) -> PathBuf {
        self.data_dir.join("kubeconfig")
    }
    pub fn bin(&self, name: &str) -> PathBuf {
        self.data_dir.join("bin").join(name)
    }
    pub fn state_file(&self) -> PathBuf {
        self.run_dir.join("lab.json")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A netns lab `t1` of `nodes` nodes, one SQLite replica (tests change what they need).
    pub(crate) fn options(nodes: usize) -> LabOptions {
        LabOptions {
            name: "t1".into(),
            nodes,
            driver: DriverKind::Netns,
            proxy_mode: ProxyMode::Nftables,
            network: NetworkBackend::HostGw,
            api_port: 16443,
            bin_dir: "/bin".into(),
            control_args: vec![],
            agent_args: vec![],
            proxy_args: vec![],
            control_replicas: 1,
            store: LabStore::Sqlite,
            roots: Roots::default(),
        }
    }

    #[test]
    fn nodes_get_addresses_namespaces_and_dirs_of_their_own() {
        let plan = LabPlan::new(options(3)).unwrap();
        let names: Vec<_> = plan.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["node-1", "node-2", "node-3"]);
        assert_eq!(plan.nodes[2].ip, Ipv4Addr::new(198, 18, 0, 13));
        assert_eq!(plan.nodes[1].netns, "cl-t1-n2");
        assert_eq!(plan.switch_netns, "cl-t1-sw");
        assert_eq!(plan.nodes[0].cgroup_root, "/cairn-lab/t1/node-1");
        assert_eq!(
            plan.nodes[1].containerd_socket(),
            PathBuf::from("/run/cairn-lab/t1/nodes/node-2/containerd/containerd.sock")
        );
        assert!(plan.runs_control(plan.control_node()));
        assert!(!plan.runs_control(&plan.nodes[1]));
        assert!(!plan.runs_etcd(plan.control_node()));
        assert_eq!(plan.api_url_inside(), "https://198.18.0.11:6443");
        assert_eq!(plan.api_url_host(), "https://127.0.0.1:16443");
        assert_eq!(plan.registry(), "198.18.0.1:5000");
        // Interface names fit IFNAMSIZ even at the largest lab.
        let big = LabPlan::new(options(MAX_NODES)).unwrap();
        assert!(big
            .nodes
            .iter()
            .all(|n| n.netns.len() <= 15 && n.switch_port.len() <= 15));
    }

    #[test]
    fn bad_names_and_sizes_are_refused_with_the_rule() {
        for bad in ["", "Lab", "1lab", "lab-one", "waytoolongname"] {
            let mut o = options(2);
            o.name = bad.into();
            let err = LabPlan::new(o).unwrap_err().to_string();
            assert!(err.contains("lower-case letters or digits"), "{bad}: {err}");
        }
        for n in [0, MAX_NODES + 1] {
            let err = LabPlan::new(options(n)).unwrap_err().to_string();
            assert!(err.contains("a lab has 1 to 50 nodes"), "{err}");
        }
        let err = LabPlan::new(options(2))
            .unwrap()
            .node("node-9")
            .unwrap_err()
            .to_string();
        assert_eq!(err, "lab t1 has no node node-9 (nodes: node-1, node-2)");
    }

    #[test]
    fn replicas_run_beside_etcd_members_on_the_first_nodes() {
        let mut o = options(4);
        (o.control_replicas, o.store) = (3, LabStore::Etcd);
        let plan = LabPlan::new(o).unwrap();
        let control: Vec<_> = plan.control_nodes().map(|n| n.name.as_str()).collect();
        assert_eq!(control, ["node-1", "node-2", "node-3"]);
        assert!(plan.runs_etcd(&plan.nodes[2]) && !plan.runs_etcd(&plan.nodes[3]));
        assert_eq!(
            plan.etcd_initial_cluster(),
            "node-1=https://198.18.0.11:2380,node-2=https://198.18.0.12:2380,node-3=https://198.18.0.13:2380"
        );
        for (replicas, store, driver, error) in [
            (
                0,
                LabStore::Etcd,
                DriverKind::Netns,
                "--control-replicas 0: 1 to the lab's 4 node(s)",
            ),
            (
                5,
                LabStore::Etcd,
                DriverKind::Netns,
                "--control-replicas 5: 1 to the lab's 4 node(s)",
            ),
            (
                3,
                LabStore::Sqlite,
                DriverKind::Netns,
                "--control-replicas 3 needs --store etcd",
            ),
            (
                1,
                LabStore::Etcd,
                DriverKind::Docker,
                "--store etcd needs --driver netns",
            ),
        ] {
            let mut o = options(4);
            (o.control_replicas, o.store, o.driver) = (replicas, store, driver);
            let err = LabPlan::new(o).unwrap_err().to_string();
            assert!(err.contains(error), "{err}");
        }
    }
}
