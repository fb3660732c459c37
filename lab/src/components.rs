//! What runs where (pure): each component's command line and configuration files, from
//! the plan. `up` writes the files and starts the commands.

use std::path::PathBuf;

use crate::args;
use crate::plan::{
    LabPlan, NodePlan, API_PORT, CLUSTER_CIDR, CONTAINERD_NAMESPACE, ETCD_CLIENT_PORT,
    ETCD_METRICS_PORT, ETCD_PEER_PORT, REGISTRY_PORT,
};

/// A daemon to start: its name, command line and the piece of it that identifies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Daemon {
    pub component: &'static str,
    pub argv: Vec<String>,
    pub expect: String,
}

pub fn registry_config(plan: &LabPlan) -> String {
    format!(
        "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n  \
         delete:\n    enabled: true\nhttp:\n  addr: {}:{REGISTRY_PORT}\n",
        plan.data_dir.join("registry").display(),
        plan.registry_ip
    )
}

pub fn registry_config_path(plan: &LabPlan) -> PathBuf {
    plan.run_dir.join("registry.yml")
}

pub fn registry(plan: &LabPlan) -> Daemon {
    let config = registry_config_path(plan).display().to_string();
    Daemon {
        component: "registry",
        argv: args!["/usr/bin/docker-registry", "serve", config],
        expect: config,
    }
}

pub fn containerd_config_path(node: &NodePlan) -> PathBuf {
    node.run_dir.join("containerd/config.toml")
}

/// A private containerd: own root, state and socket; no CRI plugin (the agent is the CRI).
pub fn containerd_config(node: &NodePlan) -> String {
    let socket = node.containerd_socket();
    format!(
        r#"version = 2
root = "{root}"
state = "{state}"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "{socket}"
[ttrpc]
  address = "{socket}.ttrpc"
[debug]
  address = ""
  level = "info"
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "{root}/opt"
"#,
        root = node.data_dir.join("containerd").display(),
        state = node.run_dir.join("containerd/state").display(),
        socket = socket.display(),
    )
}

pub fn containerd(node: &NodePlan) -> Daemon {
    let config = containerd_config_path(node).display().to_string();
    Daemon {
        component: "containerd",
        argv: args!["/usr/bin/containerd", "--config", config],
        expect: config,
    }
}

/// The lab's audit policy: every request once, at Metadata level, but health checks.
pub const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  nonResourceURLs: [/healthz*, /livez*, /readyz*, /version]
- level: Metadata
";

pub fn audit_policy_path(node: &NodePlan) -> PathBuf {
    node.data_dir.join("control/audit-policy.yaml")
}

/// Where the control node's audit log is written.
pub fn audit_log_path(node: &NodePlan) -> PathBuf {
    node.data_dir.join("control/audit.log")
}

pub fn control(plan: &LabPlan, node: &NodePlan) -> Daemon {
    let bin = plan.bin("cairn-control").display().to_string();
    let mut argv = args![
        bin,
        "serve",
        "--data-dir",
        node.data_dir.join("control").display(),
        "--bind",
        format!("0.0.0.0:{API_PORT}"),
        "--cluster-cidr",
        CLUSTER_CIDR,
        "--advertise-address",
        node.ip,
        "--audit-policy-file",
        audit_policy_path(node).display(),
        "--audit-log-path",
        audit_log_path(node).display(),
        "--audit-log-maxbackup",
        "3"
    ];
    if plan.runs_etcd(node) {
        // Each replica on its own member, as kubeadm's stacked control plane: etcd's
        // clients stay on the node's loopback, over TLS with a client certificate.
        let pki = etcd_pki_dir(node);
        argv.extend(args![
            "--store",
            "etcd",
            "--etcd-servers",
            format!("https://127.0.0.1:{ETCD_CLIENT_PORT}"),
            "--etcd-cafile",
            pki.join("ca.crt").display(),
            "--etcd-certfile",
            pki.join("apiserver-etcd-client.crt").display(),
            "--etcd-keyfile",
            pki.join("apiserver-etcd-client.key").display()
        ]);
    }
    argv.extend(plan.options.control_args.iter().cloned());
    Daemon {
        component: "control",
        expect: node.data_dir.join("control").display().to_string(),
        argv,
    }
}

/// Where a node's etcd member keeps its CA and certificates (`cairn-control certs etcd`).
pub fn etcd_pki_dir(node: &NodePlan) -> std::path::PathBuf {
    node.data_dir.join("etcd-pki")
}

/// The node's etcd member (Debian's etcd-server), as kubeadm runs it: clients on its
/// loopback and peers on its address in the lab's underlay, both over TLS with client
/// certificates from etcd's own CA; /health and /metrics in plain HTTP on loopback.
pub fn etcd(plan: &LabPlan, node: &NodePlan) -> Daemon {
    let data = node.data_dir.join("etcd").display().to_string();
    let pki = etcd_pki_dir(node);
    let file = |name: &str| pki.join(name).display().to_string();
    let peer = format!("https://{}:{ETCD_PEER_PORT}", node.ip);
    let client = format!("https://127.0.0.1:{ETCD_CLIENT_PORT}");
    let mut argv = args![
        "etcd",
        "--name",
        node.name,
        "--data-dir",
        data,
        "--listen-client-urls",
        client,
        "--advertise-client-urls",
        client,
        "--listen-peer-urls",
        peer,
        "--initial-advertise-peer-urls",
        peer,
        "--listen-metrics-urls",
        format!("http://127.0.0.1:{ETCD_METRICS_PORT}"),
        "--initial-cluster",
        plan.etcd_initial_cluster(),
        "--initial-cluster-token",
        format!("cl-{}", plan.name()),
        "--initial-cluster-state",
        "new",
        "--log-level",
        "warn"
    ];
    argv.extend(args![
        "--client-cert-auth",
        "--trusted-ca-file",
        file("ca.crt"),
        "--cert-file",
        file("server.crt"),
        "--key-file",
        file("server.key"),
        "--peer-client-cert-auth",
        "--peer-trusted-ca-file",
        file("ca.crt"),
        "--peer-cert-file",
        file("peer.crt"),
        "--peer-key-file",
        file("peer.key")
    ]);
    Daemon {
        component: "etcd",
        argv,
        expect: data,
    }
}

/// The docker.io mirror every node pulls through: the lab registry first.
pub fn registry_hosts_toml(plan: &LabPlan) -> String {
    format!(
        "server = \"https://registry-1.docker.io\"\n\n[host.\"http://{}\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
        plan.registry()
    )
}

/// The node's credentials (`system:node:<name>` in `system:nodes`), which its agent
/// writes when it joins.
pub fn agent_kubeconfig(node: &NodePlan) -> PathBuf {
    node.data_dir.join("kubeconfig")
}

/// The join token the agent starts with.
pub fn join_token_file(node: &NodePlan) -> PathBuf {
    node.data_dir.join("join-token")
}

/// The proxy's credentials (`system:kube-proxy`, which upstream's bootstrap policy binds
/// to `system:node-proxier`).
pub fn proxy_kubeconfig(node: &NodePlan) -> PathBuf {
    node.data_dir.join("proxy-kubeconfig")
}

/// The `kube-dns` Service's address cairn-control creates: the 10th of the service range.
pub const CLUSTER_DNS_IP: &str = "10.96.0.10";

/// The lab agents' hard eviction thresholds (see [`agent`]).
const LAB_EVICTION_HARD: &str =
    "--eviction-hard=memory.available<100Mi,nodefs.available<1%,nodefs.inodesFree<1%,imagefs.available<1%";
/// The lab agents' image GC threshold (see [`agent`]): 99 % of the shared disk.
const LAB_IMAGE_GC_HIGH: &str = "--image-gc-high-threshold=99";

pub fn agent(plan: &LabPlan, node: &NodePlan) -> Daemon {
    let (d, r) = (&node.data_dir, &node.run_dir);
    let argv = args![
        plan.bin("cairn-agent").display(),
        "--kubeconfig",
        agent_kubeconfig(node).display(),
        "--server",
        plan.api_url_inside(),
        "--token-file",
        join_token_file(node).display(),
        "--node-name",
        node.name,
        "--node-ip",
        node.ip,
        "--containerd-socket",
        node.containerd_socket().display(),
        "--containerd-namespace",
        CONTAINERD_NAMESPACE,
        "--root-dir",
        d.join("agent").display(),
        "--state-dir",
        r.join("agent").display(),
        "--cni-conf-dir",
        d.join("cni/net.d").display(),
        "--cni-bin-dir",
        format!("{},/usr/lib/cni", plan.data_dir.join("cni/bin").display()),
        "--pod-log-dir",
        node.log_dir.join("pods").display(),
        "--cgroup-root",
        node.cgroup_root,
        "--listen",
        format!("{}:10250", node.ip),
        "--static-pod-dir",
        d.join("manifests").display(),
        "--registry-config-dir",
        d.join("certs.d").display(),
        "--logger-path",
        plan.bin("cairn-logger").display(),
        "--network-backend",
        plan.options.network.as_str(),
        "--cluster-cidr",
        CLUSTER_CIDR,
        "--subnet-file",
        r.join("cni/subnet.env").display(),
        "--cni-data-dir",
        r.join("cni/networks").display(),
        "--cluster-dns",
        CLUSTER_DNS_IP,
        "--dns-listen",
        format!("{}:53", node.ip)
    ];
    let mut argv = argv;
    // Lab nodes share the host's disk: a host more than 85 % full (a CI machine after a
    // build) would put every node under upstream's disk thresholds and taint it, and set
    // its image GC removing every unused image. Unless the user sets them, the lab's
    // eviction thresholds are upstream's memory one and 1 % of disk, and image GC starts
    // at 99 % used.
    let given = |flag: &str| plan.options.agent_args.iter().any(|a| a.starts_with(flag));
    if !given("--eviction-hard") {
        argv.push(LAB_EVICTION_HARD.to_string());
    }
    if !given("--image-gc-high-threshold") {
        argv.push(LAB_IMAGE_GC_HIGH.to_string());
    }
    argv.extend(plan.options.agent_args.iter().cloned());
    Daemon {
        component: "agent",
        expect: d.join("agent").display().to_string(),
        argv,
    }
}

pub fn proxy(plan: &LabPlan, node: &NodePlan) -> Daemon {
    let kubeconfig = proxy_kubeconfig(node).display().to_string();
    let mut argv = args![
        plan.bin("cairn-proxy").display(),
        "--kubeconfig",
        kubeconfig,
        "--hostname-override",
        node.name,
        "--mode",
        plan.options.proxy_mode.as_str(),
        "--cluster-cidr",
        CLUSTER_CIDR,
        "--healthz-bind-address",
        "0.0.0.0:10256",
        "--metrics-bind-address",
        "127.0.0.1:10249"
    ];
    argv.extend(plan.options.proxy_args.iter().cloned());
    Daemon {
        component: "proxy",
        argv,
        expect: kubeconfig,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{LabOptions, NetworkBackend, ProxyMode, Roots};

    fn plan() -> LabPlan {
        LabPlan::new(LabOptions {
            name: "e2e".into(),
            nodes: 2,
            driver: crate::plan::DriverKind::Netns,
            proxy_mode: ProxyMode::Iptables,
            network: NetworkBackend::Vxlan,
            api_port: 16443,
            bin_dir: "/b".into(),
            control_args: vec!["--node-monitor-grace-period=8".into()],
            agent_args: vec![],
            proxy_args: vec!["--ingress=false".into()],
            control_replicas: 1,
            store: Default::default(),
            roots: Roots::default(),
        })
        .unwrap()
    }

    fn flag<'a>(argv: &'a [String], name: &str) -> &'a str {
        let i = argv.iter().position(|a| a == name).unwrap();
        &argv[i + 1]
    }

    #[test]
    fn every_node_gets_private_paths_and_the_chosen_backends() {
        let plan = plan();
        let (a1, a2) = (
            agent(&plan, &plan.nodes[0]).argv,
            agent(&plan, &plan.nodes[1]).argv,
        );
        for f in [
            "--containerd-socket",
            "--root-dir",
            "--state-dir",
            "--cgroup-root",
            "--subnet-file",
        ] {
            assert_ne!(flag(&a1, f), flag(&a2, f), "{f} is shared");
        }
        assert_eq!(flag(&a2, "--network-backend"), "vxlan");
        assert_eq!(flag(&a2, "--listen"), "198.18.0.12:10250");
        assert_eq!(flag(&a2, "--cgroup-root"), "/cairn-lab/e2e/node-2");
        let p = proxy(&plan, &plan.nodes[1]).argv;
        assert_eq!(flag(&p, "--mode"), "iptables");
        assert_eq!(flag(&p, "--hostname-override"), "node-2");
        assert_eq!(p.last().unwrap(), "--ingress=false");
        let c = control(&plan, &plan.nodes[0]).argv;
        assert_eq!(c.last().unwrap(), "--node-monitor-grace-period=8");
        assert_eq!(flag(&c, "--advertise-address"), "198.18.0.11");
    }

    #[test]
    fn config_files_point_at_the_node_and_the_lab_registry() {
        let plan = plan();
        let toml = containerd_config(&plan.nodes[1]);
        assert!(toml
            .contains("address = \"/run/cairn-lab/e2e/nodes/node-2/containerd/containerd.sock\""));
        assert!(toml.contains("root = \"/var/lib/cairn-lab/e2e/nodes/node-2/containerd\""));
        assert!(registry_hosts_toml(&plan).contains("[host.\"http://198.18.0.1:5000\"]"));
        assert!(registry_config(&plan).contains("addr: 198.18.0.1:5000"));
    }
}
