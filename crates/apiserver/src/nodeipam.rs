//! Node IPAM: gives every Node a pod CIDR (`spec.podCIDR` / `spec.podCIDRs`) carved out of
//! the cluster CIDR, like kube-controller-manager's range allocator.
//!
//! The allocation lives in the Node object itself, so the set of used blocks is rebuilt
//! from the stored Nodes whenever the loop (re)starts and nothing is handed out twice
//! across restarts. A Node created with a pod CIDR keeps it; its blocks are marked used
//! (a CIDR outside the cluster CIDR is left alone and logged, as the range allocator does).
//! A Node's blocks are released when the Node is deleted. When the range is exhausted the
//! Node stays without a CIDR, a warning is logged and a `CIDRNotAvailable` Event is
//! recorded for it; it gets a CIDR as soon as one is freed.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use cairn_api::registry::{self, ResourceInfo};
use cairn_api::status::Status;
use cairn_store::cache::{CachedObject, WatchEvent, WatchEventType};
use futures::FutureExt;
use ipnetwork::Ipv4Network;
use serde_json::{json, Value};
use tracing::{info, warn};

use crate::objects::{has_deletion_timestamp, meta_str, name_of, now_rfc3339};
use crate::state::{ApiState, WriteOptions};

/// Field manager of the writes this loop makes, and the Event source.
const FIELD_MANAGER: &str = "cairn-control";
const EVENT_SOURCE: &str = "cidrAllocator";
/// How often Nodes still waiting for a CIDR are retried without any Node event.
const RETRY_INTERVAL: Duration = Duration::from_secs(30);
/// The range allocator refuses cluster/node mask pairs with more blocks than this.
const MAX_MASK_DIFFERENCE: u8 = 16;

#[derive(Debug, thiserror::Error)]
pub enum NodeIpamError {
    #[error("node CIDR mask size /{node_mask} must be between the cluster CIDR's prefix /{cluster_prefix} and /32")]
    MaskOutOfRange { node_mask: u8, cluster_prefix: u8 },
    #[error("node CIDR mask size /{node_mask} is more than {MAX_MASK_DIFFERENCE} bits longer than the cluster CIDR {cluster_cidr}: too many blocks")]
    TooManyBlocks {
        node_mask: u8,
        cluster_cidr: Ipv4Network,
    },
    #[error("pod CIDR {cidr} is outside the cluster CIDR {cluster_cidr}")]
    OutOfRange {
        cidr: Ipv4Network,
        cluster_cidr: Ipv4Network,
    },
    #[error("watching Nodes: {0}")]
    Watch(cairn_store::StoreError),
    #[error("Nodes are not a registered resource")]
    NotRegistered,
}

/// What the allocator hands out: `node_mask`-sized blocks of `cluster_cidr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeIpamConfig {
    pub cluster_cidr: Ipv4Network,
    pub node_mask: u8,
}

impl NodeIpamConfig {
    pub fn new(cluster_cidr: Ipv4Network, node_mask: u8) -> Result<Self, NodeIpamError> {
        let cluster_prefix = cluster_cidr.prefix();
        if node_mask < cluster_prefix || node_mask > 32 {
            return Err(NodeIpamError::MaskOutOfRange {
                node_mask,
                cluster_prefix,
            });
        }
        if node_mask - cluster_prefix > MAX_MASK_DIFFERENCE {
            return Err(NodeIpamError::TooManyBlocks {
                node_mask,
                cluster_cidr,
            });
        }
        // Normalise 10.244.1.0/16 to 10.244.0.0/16.
        let cluster_cidr =
            Ipv4Network::new(cluster_cidr.network(), cluster_prefix).map_err(|_| {
                NodeIpamError::MaskOutOfRange {
                    node_mask,
                    cluster_prefix,
                }
            })?;
        Ok(NodeIpamConfig {
            cluster_cidr,
            node_mask,
        })
    }

    /// 10.244.0.0/16 in /24 blocks, as kube-controller-manager's defaults.
    pub fn kubernetes_default() -> Self {
        NodeIpamConfig {
            cluster_cidr: Ipv4Network::new(Ipv4Addr::new(10, 244, 0, 0), 16)
                .unwrap_or_else(|_| Ipv4Network::from(Ipv4Addr::new(10, 244, 0, 0))),
            node_mask: 24,
        }
    }
}

/// Indexes of the first and last block a pod CIDR covers (a CIDR larger than a block
/// covers several, a smaller one the block holding it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockRange {
    first: u32,
    last: u32,
}

/// The used blocks of the cluster CIDR, with a rotating next candidate like the range
/// allocator's cidrset (so a block just released is not handed out again at once).
/// Blocks are reference counted: two Nodes created with the same pod CIDR both hold it.
#[derive(Debug)]
pub struct CidrSet {
    config: NodeIpamConfig,
    used: BTreeMap<u32, u32>,
    next: u32,
}

impl CidrSet {
    pub fn new(config: NodeIpamConfig) -> Self {
        CidrSet {
            config,
            used: BTreeMap::new(),
            next: 0,
        }
    }

    fn block_bits(&self) -> u32 {
        32 - u32::from(self.config.node_mask)
    }

    /// Number of blocks in the cluster CIDR.
    pub fn size(&self) -> u32 {
        1u32 << (self.config.node_mask - self.config.cluster_cidr.prefix())
    }

    fn block(&self, index: u32) -> Option<Ipv4Network> {
        let base = u64::from(u32::from(self.config.cluster_cidr.network()));
        let addr = base + (u64::from(index) << self.block_bits());
        let addr = u32::try_from(addr).ok()?;
        Ipv4Network::new(Ipv4Addr::from(addr), self.config.node_mask).ok()
    }

    fn range_of(&self, cidr: Ipv4Network) -> Result<BlockRange, NodeIpamError> {
        let cluster = self.config.cluster_cidr;
        if cidr.prefix() < cluster.prefix() || !cluster.contains(cidr.network()) {
            return Err(NodeIpamError::OutOfRange {
                cidr,
                cluster_cidr: cluster,
            });
        }
        let base = u32::from(cluster.network());
        let index = |a: Ipv4Addr| (u32::from(a) - base) >> self.block_bits();
        Ok(BlockRange {
            first: index(cidr.network()),
            last: index(cidr.broadcast()),
        })
    }

    /// Marks the blocks `cidr` covers as used (once more, if they already were).
    pub fn occupy(&mut self, cidr: Ipv4Network) -> Result<BlockRange, NodeIpamError> {
        let range = self.range_of(cidr)?;
        for i in range.first..=range.last {
            *self.used.entry(i).or_insert(0) += 1;
        }
        Ok(range)
    }

    pub fn release(&mut self, range: BlockRange) {
        for i in range.first..=range.last {
            if let Some(count) = self.used.get_mut(&i) {
                *count -= 1;
                if *count == 0 {
                    self.used.remove(&i);
                }
            }
        }
    }

    /// The next free block after the last one handed out, wrapping around; None when full.
    pub fn allocate(&mut self) -> Option<(Ipv4Network, BlockRange)> {
        let size = self.size();
        if self.used.len() >= size as usize {
            return None;
        }
        for offset in 0..size {
            let index = (self.next + offset) % size;
            if !self.used.contains_key(&index) {
                let cidr = self.block(index)?;
                self.used.insert(index, 1);
                self.next = (index + 1) % size;
                return Some((
                    cidr,
                    BlockRange {
                        first: index,
                        last: index,
                    },
                ));
            }
        }
        None
    }

    pub fn used_blocks(&self) -> usize {
        self.used.len()
    }
}

/// What a Node holds, as far as the allocator knows.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Holding {
    /// No pod CIDR yet.
    Nothing,
    /// A pod CIDR inside the cluster CIDR, counted in the set.
    Blocks(Ipv4Network, BlockRange),
    /// A pod CIDR the allocator does not manage (outside the cluster CIDR, or unparsable).
    Foreign(String),
}

/// The first pod CIDR of a Node (`spec.podCIDRs[0]`, else `spec.podCIDR`), if any.
fn node_pod_cidr(node: &Value) -> Option<&str> {
    node.pointer("/spec/podCIDRs/0")
        .and_then(Value::as_str)
        .or_else(|| node.pointer("/spec/podCIDR").and_then(Value::as_str))
        .filter(|c| !c.is_empty())
}

/// The controller: the used set plus what each Node holds.
struct NodeIpam {
    state: Arc<ApiState>,
    nodes_resource: &'static ResourceInfo,
    set: CidrSet,
    holdings: HashMap<String, Holding>,
    /// Nodes waiting for a CIDR.
    pending: BTreeSet<String>,
    /// Nodes already told (Event) that no CIDR is left, so a retry does not repeat it.
    reported_exhausted: BTreeSet<String>,
}

impl NodeIpam {
    fn new(state: Arc<ApiState>, config: NodeIpamConfig) -> Result<Self, NodeIpamError> {
        let nodes_resource =
            registry::find("", "v1", "nodes").ok_or(NodeIpamError::NotRegistered)?;
        Ok(NodeIpam {
            state,
            nodes_resource,
            set: CidrSet::new(config),
            holdings: HashMap::new(),
            pending: BTreeSet::new(),
            reported_exhausted: BTreeSet::new(),
        })
    }

    fn forget(&mut self, name: &str) {
        if let Some(Holding::Blocks(_, range)) = self.holdings.remove(name) {
            self.set.release(range);
        }
        self.pending.remove(name);
    }

    /// Records the current state of one Node.
    fn observe(&mut self, node: &Value) {
        let name = name_of(node).to_string();
        let text = node_pod_cidr(node);
        let unchanged = match (self.holdings.get(&name), text) {
            // Already counted (our own write, or an update that did not touch the CIDR).
            (Some(Holding::Blocks(held, _)), Some(t)) => {
                t.parse::<Ipv4Network>().ok() == Some(*held)
            }
            (Some(Holding::Foreign(held)), Some(t)) => held == t,
            _ => false,
        };
        if unchanged {
            self.pending.remove(&name);
            return;
        }
        let holding = match text {
            None => Holding::Nothing,
            Some(text) => match text.parse::<Ipv4Network>() {
                Ok(cidr) => match self.set.occupy(cidr) {
                    Ok(range) => Holding::Blocks(cidr, range),
                    Err(e) => {
                        warn!(node = %name, error = %e, "node pod CIDR left alone by node IPAM");
                        Holding::Foreign(text.to_string())
                    }
                },
                Err(_) => {
                    warn!(node = %name, cidr = text, "node pod CIDR is not an IPv4 CIDR; left alone by node IPAM");
                    Holding::Foreign(text.to_string())
                }
            },
        };
        let waiting = holding == Holding::Nothing && !has_deletion_timestamp(node);
        if let Some(Holding::Blocks(_, old)) = self.holdings.insert(name.clone(), holding) {
            self.set.release(old);
        }
        if waiting {
            self.pending.insert(name);
        } else {
            self.pending.remove(&name);
            self.reported_exhausted.remove(&name);
        }
    }

    fn apply(&mut self, ev: &WatchEvent) {
        let Ok(node) = serde_json::from_slice::<Value>(&ev.object.bytes) else {
            warn!(key = %ev.object.key, "node IPAM: undecodable Node in watch event");
            return;
        };
        match ev.kind {
            WatchEventType::Added | WatchEventType::Modified => self.observe(&node),
            WatchEventType::Deleted => {
                let name = name_of(&node).to_string();
                if let Some(Holding::Blocks(cidr, _)) = self.holdings.get(&name) {
                    info!(node = %name, %cidr, "released node pod CIDR");
                }
                self.forget(&name);
                self.reported_exhausted.remove(&name);
            }
        }
    }

    /// Rebuilds everything from a full list of the Nodes.
    fn rebuild(&mut self, nodes: &[Arc<CachedObject>]) {
        self.set = CidrSet::new(self.set.config);
        self.holdings.clear();
        self.pending.clear();
        for o in nodes {
            match serde_json::from_slice::<Value>(&o.bytes) {
                Ok(node) => self.observe(&node),
                Err(e) => warn!(key = %o.key, error = %e, "node IPAM: undecodable Node"),
            }
        }
        info!(
            nodes = nodes.len(),
            used_blocks = self.set.used_blocks(),
            pending = self.pending.len(),
            cluster_cidr = %self.set.config.cluster_cidr,
            "node IPAM: restored pod CIDR allocations from the stored Nodes"
        );
    }

    /// Gives a CIDR to every pending Node, as long as blocks are left.
    async fn allocate_pending(&mut self) {
        let pending: Vec<String> = self.pending.iter().cloned().collect();
        for name in pending {
            let Some((cidr, range)) = self.set.allocate() else {
                self.report_exhausted(&name).await;
                continue;
            };
            self.pending.remove(&name);
            self.holdings
                .insert(name.clone(), Holding::Blocks(cidr, range));
            match self.write_cidr(&name, cidr).await {
                Ok(()) => {
                    self.reported_exhausted.remove(&name);
                    info!(node = %name, %cidr, "allocated node pod CIDR");
                }
                Err(e) => {
                    // The watch brings the Node's real state (deleted, or given a CIDR by
                    // someone else) next; until then the block is free again.
                    self.set.release(range);
                    self.holdings.insert(name.clone(), Holding::Nothing);
                    if e.code != 404 {
                        warn!(node = %name, %cidr, error = %e, "writing node pod CIDR");
                    }
                }
            }
        }
    }

    async fn write_cidr(&self, name: &str, cidr: Ipv4Network) -> Result<(), Status> {
        let opts = WriteOptions {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        let text = cidr.to_string();
        self.state
            .guaranteed_update(self.nodes_resource, None, name, None, &opts, |cur| {
                if node_pod_cidr(cur).is_some() {
                    return Err(Status::conflict(
                        "nodes",
                        name,
                        "the node was given a pod CIDR meanwhile",
                    ));
                }
                let mut next = cur.clone();
                if !next.get("spec").is_some_and(Value::is_object) {
                    next["spec"] = json!({});
                }
                next["spec"]["podCIDR"] = json!(text);
                next["spec"]["podCIDRs"] = json!([text]);
                Ok(next)
            })
            .await
            .map(|_| ())
    }

    /// Logs and records a `CIDRNotAvailable` Event for the Node, once per Node.
    async fn report_exhausted(&mut self, name: &str) {
        if !self.reported_exhausted.insert(name.to_string()) {
            return;
        }
        let cluster = self.set.config.cluster_cidr;
        let mask = self.set.config.node_mask;
        warn!(node = %name, cluster_cidr = %cluster, node_mask = mask,
            "node IPAM: no /{mask} left in the cluster CIDR; the node gets no pod CIDR until one is freed");
        let uid = self
            .state
            .get_value(self.nodes_resource, None, name)
            .ok()
            .and_then(|(v, _)| meta_str(&v, "uid").map(str::to_string))
            .unwrap_or_default();
        let Some(events) = registry::find("", "v1", "events") else {
            return;
        };
        let now = now_rfc3339();
        let stamp = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0);
        let event = json!({
            "metadata": {"name": format!("{name}.{stamp:x}"), "namespace": "default"},
            "involvedObject": {"kind": "Node", "name": name, "uid": uid, "apiVersion": "v1"},
            "reason": "CIDRNotAvailable",
            "message": format!("Node {name} status is now: CIDRNotAvailable (no free /{mask} left in cluster CIDR {cluster})"),
            "type": "Normal",
            "source": {"component": EVENT_SOURCE},
            "reportingComponent": EVENT_SOURCE,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        });
        let opts = WriteOptions {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        if let Err(e) = self
            .state
            .create(events, Some("default"), event, &opts)
            .await
        {
            warn!(node = %name, error = %e, "recording CIDRNotAvailable event");
        }
    }

    /// One list + watch session; returns when the watch breaks (the caller relists).
    async fn run_session(&mut self) -> NodeIpamError {
        let prefix = self.nodes_resource.list_prefix(None);
        let (nodes, revision) = self.state.cache.list(&prefix);
        self.rebuild(&nodes);
        self.allocate_pending().await;
        let mut watcher = match self.state.cache.watch(&prefix, revision).await {
            Ok(w) => w,
            Err(e) => return NodeIpamError::Watch(e),
        };
        let mut retry = tokio::time::interval(RETRY_INTERVAL);
        retry.tick().await;
        loop {
            tokio::select! {
                ev = watcher.next() => match ev {
                    Some(Ok(ev)) => self.apply(&ev),
                    Some(Err(e)) => return NodeIpamError::Watch(e),
                    None => return NodeIpamError::Watch(cairn_store::StoreError::Closed),
                },
                _ = retry.tick() => {}
            }
            // Take whatever else is already queued before writing, so a burst of Node
            // creations is handled in one pass.
            while let Some(ev) = watcher.next().now_or_never() {
                match ev {
                    Some(Ok(ev)) => self.apply(&ev),
                    Some(Err(e)) => return NodeIpamError::Watch(e),
                    None => return NodeIpamError::Watch(cairn_store::StoreError::Closed),
                }
            }
            self.allocate_pending().await;
        }
    }
}

/// Runs node IPAM forever: list the Nodes, rebuild the used set, then follow the watch;
/// relists from scratch whenever the watch breaks.
pub async fn node_ipam_loop(state: Arc<ApiState>, config: NodeIpamConfig) {
    let mut ipam = match NodeIpam::new(state, config) {
        Ok(i) => i,
        Err(e) => {
            warn!(error = %e, "node IPAM not started");
            return;
        }
    };
    info!(cluster_cidr = %config.cluster_cidr, node_mask = config.node_mask, "node IPAM started");
    loop {
        let e = ipam.run_session().await;
        warn!(error = %e, "node IPAM: watch ended; relisting");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> Ipv4Network {
        s.parse().unwrap()
    }

    #[test]
    fn config_checks_masks() {
        assert!(NodeIpamConfig::new(net("10.244.0.0/16"), 24).is_ok());
        assert!(matches!(
            NodeIpamConfig::new(net("10.244.0.0/16"), 8),
            Err(NodeIpamError::MaskOutOfRange {
                node_mask: 8,
                cluster_prefix: 16
            })
        ));
        assert!(NodeIpamConfig::new(net("10.244.0.0/16"), 33).is_err());
        assert!(matches!(
            NodeIpamConfig::new(net("10.0.0.0/8"), 26),
            Err(NodeIpamError::TooManyBlocks { .. })
        ));
        let c = NodeIpamConfig::new(net("10.244.7.9/16"), 24).unwrap();
        assert_eq!(c.cluster_cidr, net("10.244.0.0/16"));
        assert_eq!(
            NodeIpamConfig::kubernetes_default(),
            NodeIpamConfig::new(net("10.244.0.0/16"), 24).unwrap()
        );
    }

    #[test]
    fn allocates_distinct_blocks_until_full_then_reuses_released() {
        let mut s = CidrSet::new(NodeIpamConfig::new(net("10.244.0.0/22"), 24).unwrap());
        assert_eq!(s.size(), 4);
        let got: Vec<Ipv4Network> = (0..4).map(|_| s.allocate().unwrap().0).collect();
        assert_eq!(
            got,
            [
                "10.244.0.0/24",
                "10.244.1.0/24",
                "10.244.2.0/24",
                "10.244.3.0/24"
            ]
            .map(net)
        );
        assert!(s.allocate().is_none());
        let range = s.range_of(net("10.244.2.0/24")).unwrap();
        s.release(range);
        assert_eq!(s.allocate().unwrap().0, net("10.244.2.0/24"));
    }

    #[test]
    fn next_candidate_rotates_past_a_just_released_block() {
        let mut s = CidrSet::new(NodeIpamConfig::new(net("10.244.0.0/16"), 24).unwrap());
        let (a, ra) = s.allocate().unwrap();
        let (b, _) = s.allocate().unwrap();
        assert_eq!((a, b), (net("10.244.0.0/24"), net("10.244.1.0/24")));
        s.release(ra);
        assert_eq!(s.allocate().unwrap().0, net("10.244.2.0/24"));
    }

    #[test]
    fn occupy_counts_covered_blocks_and_refuses_outside() {
        let mut s = CidrSet::new(NodeIpamConfig::new(net("10.244.0.0/22"), 24).unwrap());
        let big = s.occupy(net("10.244.0.0/23")).unwrap();
        assert_eq!(big, BlockRange { first: 0, last: 1 });
        let small = s.occupy(net("10.244.3.128/25")).unwrap();
        assert_eq!(small, BlockRange { first: 3, last: 3 });
        assert_eq!(s.allocate().unwrap().0, net("10.244.2.0/24"));
        assert!(s.allocate().is_none());
        assert!(matches!(
            s.occupy(net("10.245.0.0/24")),
            Err(NodeIpamError::OutOfRange { .. })
        ));
        assert!(s.occupy(net("10.244.0.0/16")).is_err());
        // Held twice, released once: still used.
        s.occupy(net("10.244.3.0/24")).unwrap();
        s.release(small);
        assert!(s.allocate().is_none());
        s.release(big);
        assert_eq!(s.used_blocks(), 2);
    }

    #[test]
    fn full_slash_zero_range_does_not_overflow() {
        let mut s = CidrSet::new(NodeIpamConfig::new(net("0.0.0.0/0"), 16).unwrap());
        assert_eq!(s.size(), 65536);
        assert_eq!(s.allocate().unwrap().0, net("0.0.0.0/16"));
        let last = s.range_of(net("255.255.0.0/16")).unwrap();
        assert_eq!(
            last,
            BlockRange {
                first: 65535,
                last: 65535
            }
        );
    }

    #[test]
    fn pod_cidr_of_node() {
        assert_eq!(
            node_pod_cidr(&json!({"spec": {"podCIDR": "10.1.0.0/24"}})),
            Some("10.1.0.0/24")
        );
        assert_eq!(
            node_pod_cidr(
                &json!({"spec": {"podCIDR": "10.1.0.0/24", "podCIDRs": ["10.2.0.0/24"]}})
            ),
            Some("10.2.0.0/24")
        );
        assert_eq!(node_pod_cidr(&json!({"spec": {"podCIDR": ""}})), None);
        assert_eq!(node_pod_cidr(&json!({"spec": {}})), None);
    }
}
