//! The node network controller (flannel semantics, Kubernetes subnet manager style):
//! watches the Nodes, waits for this node's `spec.podCIDR`, writes the subnet file and the
//! CNI conflist, publishes this node's backend data in annotations, and programs the path
//! to every other node's pod subnet (`host-gw` routes or a `vxlan` overlay), plus
//! masquerading and IP forwarding.
//!
//! It converges level-triggered: every change of a Node the data plane depends on, and
//! every `resync_interval`, recomputes the whole desired state and applies only the
//! difference. It owns exactly: routes with rtnetlink protocol
//! [`dataplane::ROUTE_PROTOCOL`], the vxlan device `cairn.<VNI>` (with its neighbours and
//! FDB), the `CAIRN-POSTRTG` chain / `ip cairn-netctl` table, and the two files.
//! Nothing is torn down on shutdown: pods keep their connectivity while it restarts.
//!
//! Embedded in cairn-agent through [`run`]; `cairn-cni controller ...` runs it alone.

pub mod dataplane;
pub mod files;
pub mod masquerade;
pub mod peers;

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use cairn_netlink::overlay::{mac_to_string, VxlanSpec};
use cairn_netlink::{Netlink, NetlinkError};
use futures::StreamExt;
use ipnetwork::{IpNetwork, Ipv4Network};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{reflector, watcher, WatchStreamExt};
use serde_json::{json, Value};
use tokio::sync::Notify;
use tracing::{debug, info, warn};

use crate::config::MasqBackend;
use crate::masq::MasqError;
use peers::{NodeView, Peer};

/// How the pod subnets of the other nodes are reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A route per peer subnet via the peer's IP: the nodes share an L2 segment.
    HostGw,
    /// A VXLAN overlay across any IP underlay.
    Vxlan,
}

impl Backend {
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::HostGw => "host-gw",
            Backend::Vxlan => "vxlan",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "host-gw" => Ok(Backend::HostGw),
            "vxlan" => Ok(Backend::Vxlan),
            other => Err(format!(
                "backend {other:?} is neither \"host-gw\" nor \"vxlan\""
            )),
        }
    }
}

/// Default subnet file, as read by cairn-cni in cairn mode.
pub const DEFAULT_SUBNET_FILE: &str = crate::config::DEFAULT_SUBNET_FILE;
pub const DEFAULT_CNI_CONF_DIR: &str = "/etc/cni/net.d";
pub const DEFAULT_CONFLIST_NAME: &str = "10-cairn.conflist";
pub const FIELD_MANAGER: &str = "cairn-netctl";
/// Vxlan encapsulation overhead (outer Ethernet, IP, UDP, VXLAN headers).
pub const VXLAN_OVERHEAD: u32 = 50;

#[derive(Debug, Clone)]
pub struct NetControllerConfig {
    /// This node's Node object.
    pub node_name: String,
    pub backend: Backend,
    /// All pod subnets (IPv4): pod → pod inside it is never masqueraded.
    pub cluster_cidr: IpNetwork,
    /// Default [`DEFAULT_SUBNET_FILE`].
    pub subnet_file: PathBuf,
    /// Default [`DEFAULT_CNI_CONF_DIR`].
    pub cni_conf_dir: PathBuf,
    /// Default [`DEFAULT_CONFLIST_NAME`].
    pub conflist_name: String,
    /// CNI network name (default `cairn`).
    pub network_name: String,
    /// Pod bridge (default `cni0`).
    pub bridge: String,
    /// IPAM state directory written into the conflist (default: the plugin's).
    pub cni_data_dir: Option<PathBuf>,
    /// Plugins appended to the conflist's chain (e.g. `{"type": "portmap", ...}`).
    pub extra_plugins: Vec<Value>,
    /// Default: the interface holding the node IP.
    pub underlay_iface: Option<String>,
    /// The node IP to publish and tunnel from. Default: the Node's InternalIP.
    pub public_ip: Option<Ipv4Addr>,
    pub vxlan_vni: u32,
    pub vxlan_port: u16,
    pub masquerade: bool,
    /// Default: iptables when installed, else nftables.
    pub masquerade_backend: Option<MasqBackend>,
    /// Full reconciliation period, whatever the watch says.
    pub resync_interval: Duration,
    /// Where the namespace's sysctls are (default `/proc/sys`).
    pub proc_sys: PathBuf,
}

impl NetControllerConfig {
    pub fn new(node_name: impl Into<String>, backend: Backend, cluster_cidr: IpNetwork) -> Self {
        NetControllerConfig {
            node_name: node_name.into(),
            backend,
            cluster_cidr,
            subnet_file: PathBuf::from(DEFAULT_SUBNET_FILE),
            cni_conf_dir: PathBuf::from(DEFAULT_CNI_CONF_DIR),
            conflist_name: DEFAULT_CONFLIST_NAME.to_string(),
            network_name: "cairn".to_string(),
            bridge: crate::config::DEFAULT_BRIDGE.to_string(),
            cni_data_dir: None,
            extra_plugins: Vec::new(),
            underlay_iface: None,
            public_ip: None,
            vxlan_vni: 1,
            vxlan_port: 8472,
            masquerade: true,
            masquerade_backend: None,
            resync_interval: Duration::from_secs(60),
            proc_sys: PathBuf::from("/proc/sys"),
        }
    }

    /// The vxlan device's name, `cairn.<VNI>` as flannel's `flannel.<VNI>`.
    pub fn vxlan_device(&self) -> String {
        format!("cairn.{}", self.vxlan_vni)
    }

    pub fn conflist_path(&self) -> PathBuf {
        self.cni_conf_dir.join(&self.conflist_name)
    }

    fn cluster_v4(&self) -> Result<Ipv4Network, NetControllerError> {
        match self.cluster_cidr {
            IpNetwork::V4(n) => Ok(Ipv4Network::new(n.network(), n.prefix()).unwrap_or(n)),
            IpNetwork::V6(n) => Err(NetControllerError::Config(format!(
                "cluster CIDR {n} is IPv6; only IPv4 pod networks are supported"
            ))),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum NetControllerError {
    #[error("network controller configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Netlink(#[from] NetlinkError),
    #[error("masquerade rules: {0}")]
    Masquerade(#[from] MasqError),
    #[error("write {path}: {source}")]
    WriteFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("publishing annotations on Node {node}: {source}")]
    Annotate { node: String, source: kube::Error },
    #[error("the Node watch ended before its first list: {0}")]
    Watch(String),
    #[error("{0} not found")]
    Missing(String),
}

/// Runs the controller until `shutdown` completes. Errors of one reconciliation are
/// logged and retried; only a configuration error or a broken watch ends it.
pub async fn run(
    client: kube::Client,
    config: NetControllerConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), NetControllerError> {
    let cluster = config.cluster_v4()?;
    let nl = Netlink::connect()?;
    let api: Api<Node> = Api::all(client);
    let (reader, writer) = reflector::store();
    let notify = Arc::new(Notify::new());
    let stream =
        reflector(writer, watcher(api.clone(), watcher::Config::default())).default_backoff();
    let watch_task = tokio::spawn({
        let notify = Arc::clone(&notify);
        async move {
            futures::pin_mut!(stream);
            while let Some(ev) = stream.next().await {
                if let Err(e) = ev {
                    warn!(error = %e, "node watch failed; retrying");
                }
                notify.notify_one();
            }
        }
    });
    tokio::pin!(shutdown);
    tokio::select! {
        _ = &mut shutdown => {
            watch_task.abort();
            return Ok(());
        }
        r = reader.wait_until_ready() => {
            if let Err(e) = r {
                watch_task.abort();
                return Err(NetControllerError::Watch(e.to_string()));
            }
        }
    }
    info!(node = %config.node_name, backend = %config.backend, %cluster, "network controller watching nodes");
    let mut controller = Controller::new(config, cluster, nl, api);
    let mut resync = tokio::time::interval(controller.config.resync_interval);
    loop {
        let full = tokio::select! {
            _ = &mut shutdown => break,
            _ = notify.notified() => false,
            _ = resync.tick() => true,
        };
        let nodes: Vec<NodeView> = reader
            .state()
            .iter()
            .map(|n| NodeView::from_node(n))
            .collect();
        if let Err(e) = controller.reconcile(nodes, full).await {
            warn!(error = %e, "network reconciliation failed; retrying");
            controller.last_nodes = None;
            let notify = Arc::clone(&notify);
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(2)).await;
                notify.notify_one();
            });
        }
    }
    watch_task.abort();
    info!("network controller stopped");
    Ok(())
}

struct Controller {
    config: NetControllerConfig,
    cluster: Ipv4Network,
    nl: Netlink,
    api: Api<Node>,
    /// The Nodes (as far as they matter) of the last successful reconciliation.
    last_nodes: Option<Vec<NodeView>>,
    /// The (subnet, backend) the masquerade rules were last checked for.
    masquerade_for: Option<(Ipv4Network, Option<MasqBackend>)>,
    waiting_for: Option<String>,
    skipped: Vec<(String, String)>,
}

impl Controller {
    fn new(config: NetControllerConfig, cluster: Ipv4Network, nl: Netlink, api: Api<Node>) -> Self {
        Controller {
            config,
            cluster,
            nl,
            api,
            last_nodes: None,
            masquerade_for: None,
            waiting_for: None,
            skipped: Vec::new(),
        }
    }

    fn wait(&mut self, what: String) {
        if self.waiting_for.as_ref() != Some(&what) {
            info!(node = %self.config.node_name, "waiting for {what}");
            self.waiting_for = Some(what);
        }
    }

    async fn reconcile(
        &mut self,
        mut nodes: Vec<NodeView>,
        full: bool,
    ) -> Result<(), NetControllerError> {
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        if !full && self.last_nodes.as_ref() == Some(&nodes) {
            return Ok(());
        }
        let cfg = &self.config;
        let Some(me) = nodes.iter().find(|n| n.name == cfg.node_name).cloned() else {
            self.wait(format!("Node {} to exist", cfg.node_name));
            return Ok(());
        };
        let Some(subnet) = me.pod_cidr else {
            self.wait(format!("a podCIDR on Node {}", cfg.node_name));
            return Ok(());
        };
        let Some(node_ip) = cfg.public_ip.or(me.internal_ip) else {
            self.wait(format!("an InternalIP on Node {}", cfg.node_name));
            return Ok(());
        };
        dataplane::enable_forwarding(&cfg.proc_sys)?;
        let underlay =
            dataplane::underlay_link(&self.nl, cfg.underlay_iface.as_deref(), node_ip).await?;
        let (mtu, vxlan) = match cfg.backend {
            Backend::HostGw => {
                dataplane::remove_vxlan(&self.nl, &cfg.vxlan_device()).await?;
                (underlay.mtu, None)
            }
            Backend::Vxlan => {
                let mtu = underlay.mtu.saturating_sub(VXLAN_OVERHEAD);
                let spec = VxlanSpec {
                    name: cfg.vxlan_device(),
                    vni: cfg.vxlan_vni,
                    local: node_ip,
                    port: cfg.vxlan_port,
                    underlay_index: underlay.index,
                    mtu,
                    mac: dataplane::vtep_mac(&cfg.node_name, cfg.vxlan_vni),
                    learning: false,
                };
                let dev = dataplane::ensure_vxlan(&self.nl, &spec).await?;
                let addr = Ipv4Network::new(subnet.network(), 32)
                    .map_err(|e| NetControllerError::Config(e.to_string()))?;
                dataplane::ensure_only_address(&self.nl, &dev.link, addr).await?;
                (mtu, Some(dev))
            }
        };
        let vtep_mac = vxlan.as_ref().map(|v| v.link.mac.clone());
        self.publish(&me, node_ip, vtep_mac.as_deref()).await?;
        let cfg = &self.config;
        files::write_if_changed(
            &cfg.subnet_file,
            &files::subnet_file_text(self.cluster, subnet, mtu, cfg.masquerade),
        )?;
        let conflist = files::conflist(&files::ConflistParams {
            network_name: &cfg.network_name,
            bridge: &cfg.bridge,
            subnet_file: &cfg.subnet_file,
            data_dir: cfg.cni_data_dir.as_deref(),
            extra_plugins: &cfg.extra_plugins,
        });
        let conflist_text = serde_json::to_string_pretty(&conflist)
            .map_err(|e| NetControllerError::Config(e.to_string()))?;
        if files::write_if_changed(&cfg.conflist_path(), &format!("{conflist_text}\n"))? {
            info!(path = %cfg.conflist_path().display(), %subnet, mtu, "wrote CNI conflist and subnet file");
        }
        let (peers, skipped) = peers::peers(&nodes, &me, cfg.backend, self.cluster);
        if skipped != self.skipped {
            for (name, why) in &skipped {
                info!(peer = %name, reason = %why, "peer not programmed");
            }
            self.skipped = skipped;
        }
        let desired = match &vxlan {
            None => peers::desired_host_gw(&peers, underlay.index),
            Some(dev) => peers::desired_vxlan(&peers, dev.link.index),
        };
        let changes =
            dataplane::apply(&self.nl, &desired, vxlan.as_ref().map(|v| v.link.index)).await?;
        if !changes.is_empty() {
            info!(?changes, peers = peers.len(), "data plane updated");
        } else {
            debug!(peers = peers.len(), "data plane already converged");
        }
        self.ensure_masquerade(subnet, full)?;
        if self.waiting_for.take().is_some() || self.last_nodes.is_none() {
            info!(node = %self.config.node_name, %subnet, %node_ip, peers = %peer_names(&peers), "node network ready");
        }
        self.last_nodes = Some(nodes);
        Ok(())
    }

    fn ensure_masquerade(
        &mut self,
        subnet: Ipv4Network,
        full: bool,
    ) -> Result<(), NetControllerError> {
        let key = (subnet, self.config.masquerade_backend);
        if !full && self.masquerade_for == Some(key) {
            return Ok(());
        }
        if self.config.masquerade {
            let backend = masquerade::backend(self.config.masquerade_backend);
            if masquerade::ensure_only(backend, self.cluster, subnet)? {
                info!(%subnet, cluster = %self.cluster, ?backend, "installed masquerade rules");
            }
        } else {
            masquerade::remove_all()?;
        }
        self.masquerade_for = Some(key);
        Ok(())
    }

    /// Publishes backend type, public IP and VTEP MAC on this node's Node, when they differ.
    async fn publish(
        &self,
        me: &NodeView,
        node_ip: Ipv4Addr,
        vtep_mac: Option<&[u8]>,
    ) -> Result<(), NetControllerError> {
        let wanted = peers::own_annotations(self.config.backend, node_ip, vtep_mac);
        let current: BTreeMap<String, Option<String>> = [
            (peers::ANNOTATION_BACKEND_TYPE, me.backend_type.clone()),
            (
                peers::ANNOTATION_PUBLIC_IP,
                me.public_ip_annotation.map(|ip| ip.to_string()),
            ),
            (
                peers::ANNOTATION_VTEP_MAC,
                me.vtep_mac.map(|m| mac_to_string(&m)),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        if current == wanted {
            return Ok(());
        }
        let patch = json!({"metadata": {"annotations": wanted}});
        self.api
            .patch(
                &self.config.node_name,
                &PatchParams {
                    field_manager: Some(FIELD_MANAGER.to_string()),
                    ..Default::default()
                },
                &Patch::Merge(&patch),
            )
            .await
            .map_err(|source| NetControllerError::Annotate {
                node: self.config.node_name.clone(),
                source,
            })?;
        info!(node = %self.config.node_name, annotations = %patch["metadata"]["annotations"], "published node network annotations");
        Ok(())
    }
}

fn peer_names(peers: &[Peer]) -> String {
    peers
        .iter()
        .map(|p| p.name.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_names() {
        assert_eq!("host-gw".parse::<Backend>(), Ok(Backend::HostGw));
        assert_eq!("vxlan".parse::<Backend>(), Ok(Backend::Vxlan));
        assert!("udp".parse::<Backend>().is_err());
        assert_eq!(Backend::Vxlan.to_string(), "vxlan");
    }

    #[test]
    fn config_defaults() {
        let c = NetControllerConfig::new("n", Backend::Vxlan, "10.244.0.0/16".parse().unwrap());
        assert_eq!(c.vxlan_device(), "cairn.1");
        assert_eq!(c.vxlan_port, 8472);
        assert_eq!(c.subnet_file, PathBuf::from("/run/cairn/subnet.env"));
        assert_eq!(
            c.conflist_path(),
            PathBuf::from("/etc/cni/net.d/10-cairn.conflist")
        );
        assert!(c.masquerade);
        let v6 = NetControllerConfig::new("n", Backend::Vxlan, "fd00::/48".parse().unwrap());
        assert!(v6.cluster_v4().is_err());
    }
}
