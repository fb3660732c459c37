//! Which UDP conntrack flows are stale, after kube-proxy's `CleanStaleEntries`
//! (`pkg/proxy/conntrack/cleanup.go`, 1.31+). UDP has no connection end: a flow DNATed to
//! an endpoint that went away keeps sending a client's packets there until it idles out,
//! and a flow created while a service had no endpoints is never DNATed at all. Rather
//! than deleting by events (missed on a restart), every sync compares the table with the
//! desired state; flows to anything that is not a UDP service frontend are never touched,
//! so a restarted proxy does not cut live traffic.
//!
//! A flow is stale when its original destination is a frontend of a UDP service port that
//! has endpoints (cluster IP, external IP or load-balancer IP at the port, or any address
//! at the node port) and its reply source (the DNAT target) is none of those endpoints.
//! As upstream, the endpoints are all of the port's usable ones whatever the traffic
//! policies (`cluster` ∪ `external`), so changing a policy does not cut existing flows,
//! as it does not cut TCP connections; unlike upstream the endpoint's port is compared
//! too (the DNAT target is `ip:port`, so a changed target port is stale as well).
//!
//! Pure: the caller lists the flows (cairn-netfilter's `ConntrackDriver`) and deletes the
//! ones returned.

use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;

use crate::model::{Protocol, ProxyState};

/// What the policy reads of a UDP conntrack flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpFlow {
    /// Original destination: the address the client sent to.
    pub orig_dst: Ipv4Addr,
    pub orig_dport: u16,
    /// Reply source: where the flow was DNATed to (`orig_dst` when it was not).
    pub reply_src: Ipv4Addr,
    pub reply_sport: u16,
}

/// `None`: a known frontend without endpoints (its flows are left alone).
type Backends = Option<HashSet<(Ipv4Addr, u16)>>;

/// The UDP frontends of a state and their endpoints, built once per check.
#[derive(Debug, Default)]
pub struct StaleFlowFilter {
    /// `ip:port` frontends: cluster, external and load-balancer IPs.
    frontends: HashMap<(Ipv4Addr, u16), Backends>,
    /// Node ports (any destination address).
    node_ports: HashMap<u16, Backends>,
}

/// Adds `backends` to a frontend's; endpoints win over "none" when two entries share one.
fn merge(slot: &mut Backends, backends: &Backends) {
    match (slot, backends) {
        (Some(mine), Some(more)) => mine.extend(more.iter().copied()),
        (slot @ None, Some(more)) => *slot = Some(more.clone()),
        (_, None) => {}
    }
}

impl StaleFlowFilter {
    pub fn new(state: &ProxyState) -> StaleFlowFilter {
        let mut filter = StaleFlowFilter::default();
        for (name, entry) in state {
            if name.protocol != Protocol::Udp {
                continue;
            }
            let endpoints: HashSet<(Ipv4Addr, u16)> = entry
                .cluster
                .iter()
                .chain(&entry.external)
                .map(|e| (e.ip, e.port))
                .collect();
            let backends = (!endpoints.is_empty()).then_some(endpoints);
            let p = &entry.port;
            let ips = p
                .cluster_ip
                .iter()
                .chain(&p.external_ips)
                .chain(&p.load_balancer_ips);
            for ip in ips {
                merge(
                    filter.frontends.entry((*ip, p.port)).or_default(),
                    &backends,
                );
            }
            if let Some(node_port) = p.node_port {
                merge(filter.node_ports.entry(node_port).or_default(), &backends);
            }
        }
        filter
    }

    /// No UDP service port has endpoints: no flow can be stale, the table need not be read.
    pub fn is_empty(&self) -> bool {
        self.frontends
            .values()
            .chain(self.node_ports.values())
            .all(Option::is_none)
    }

    /// Whether `flow` goes to a UDP frontend with endpoints but not to one of them. An
    /// `ip:port` frontend decides before a node port, so a service port that happens to
    /// equal another service's node port is judged by its own endpoints.
    pub fn is_stale(&self, flow: &UdpFlow) -> bool {
        let backends = match self.frontends.get(&(flow.orig_dst, flow.orig_dport)) {
            Some(b) => b,
            None => match self.node_ports.get(&flow.orig_dport) {
                Some(b) => b,
                None => return false,
            },
        };
        backends
            .as_ref()
            .is_some_and(|b| !b.contains(&(flow.reply_src, flow.reply_sport)))
    }
}

/// The indices (as given) of the stale flows among `flows`, in order.
pub fn stale_udp_flows(
    state: &ProxyState,
    flows: impl IntoIterator<Item = (usize, UdpFlow)>,
) -> Vec<usize> {
    let filter = StaleFlowFilter::new(state);
    if filter.is_empty() {
        return Vec::new();
    }
    flows
        .into_iter()
        .filter(|(_, f)| filter.is_stale(f))
        .map(|(i, _)| i)
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::model::{Endpoint, ServiceEntry, ServicePort, ServicePortName};

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    fn ep(addr: &str, port: u16) -> Endpoint {
        Endpoint::ready(ip(addr), port)
    }

    fn port(cluster_ip: &str, port: u16) -> ServicePort {
        ServicePort {
            cluster_ip: Some(ip(cluster_ip)),
            port,
            ..Default::default()
        }
    }

    fn state(entries: Vec<(&str, Protocol, ServicePort, Vec<Endpoint>)>) -> ProxyState {
        entries
            .into_iter()
            .map(|(name, protocol, port, endpoints)| {
                let key = ServicePortName {
                    namespace: "ns".into(),
                    name: name.into(),
                    port: String::new(),
                    protocol,
                };
                (key, ServiceEntry::with_endpoints(port, endpoints))
            })
            .collect()
    }

    /// A flow to `dst:dport` DNATed to `to` (`ip:port`).
    fn flow(dst: &str, dport: u16, to: (&str, u16)) -> UdpFlow {
        UdpFlow {
            orig_dst: ip(dst),
            orig_dport: dport,
            reply_src: ip(to.0),
            reply_sport: to.1,
        }
    }

    fn stale(state: &ProxyState, flows: &[UdpFlow]) -> Vec<usize> {
        stale_udp_flows(state, flows.iter().copied().enumerate())
    }

    #[test]
    fn a_removed_endpoints_flows_are_stale_the_others_kept() {
        let s = state(vec![(
            "dns",
            Protocol::Udp,
            port("10.96.0.10", 53),
            vec![ep("10.244.1.5", 5353)],
        )]);
        let flows = [
            flow("10.96.0.10", 53, ("10.244.1.5", 5353)), // current endpoint
            flow("10.96.0.10", 53, ("10.244.2.9", 5353)), // removed endpoint
            flow("10.96.0.10", 53, ("10.244.1.5", 53)),   // old target port
        ];
        assert_eq!(stale(&s, &flows), vec![1, 2]);
    }

    #[test]
    fn a_first_endpoint_makes_undnatted_flows_stale() {
        let flows = [flow("10.96.0.10", 53, ("10.96.0.10", 53))];
        let before = state(vec![("dns", Protocol::Udp, port("10.96.0.10", 53), vec![])]);
        assert!(StaleFlowFilter::new(&before).is_empty());
        assert_eq!(stale(&before, &flows), Vec::<usize>::new());
        let after = state(vec![(
            "dns",
            Protocol::Udp,
            port("10.96.0.10", 53),
            vec![ep("10.244.1.5", 5353)],
        )]);
        assert_eq!(stale(&after, &flows), vec![0]);
    }

    #[test]
    fn node_ports_match_any_destination_address() {
        let mut p = port("10.96.0.20", 5000);
        p.node_port = Some(30500);
        let s = state(vec![("np", Protocol::Udp, p, vec![ep("10.244.1.7", 5000)])]);
        let flows = [
            flow("192.168.1.10", 30500, ("10.244.1.7", 5000)), // current endpoint
            flow("192.168.1.10", 30500, ("10.244.3.3", 5000)), // gone endpoint
            flow("127.0.0.1", 30500, ("127.0.0.1", 30500)),    // from before endpoints
            flow("192.168.1.10", 30501, ("10.244.3.3", 5000)), // another port
        ];
        assert_eq!(stale(&s, &flows), vec![1, 2]);
    }

    #[test]
    fn external_and_load_balancer_ips_ignore_traffic_policies() {
        let mut p = port("10.96.0.30", 53);
        p.external_ips = vec![ip("203.0.113.1")];
        p.load_balancer_ips = vec![ip("198.51.100.7")];
        p.external_local = true;
        let mut s = state(vec![("lb", Protocol::Udp, p, vec![])]);
        let entry = s.values_mut().next().unwrap();
        entry.cluster = vec![ep("10.244.1.5", 53), ep("10.244.2.5", 53)];
        entry.external = vec![ep("10.244.1.5", 53)]; // local only
        let flows = [
            // DNATed to the remote endpoint before the policy became Local: kept.
            flow("198.51.100.7", 53, ("10.244.2.5", 53)),
            flow("203.0.113.1", 53, ("10.244.1.5", 53)),
            flow("203.0.113.1", 53, ("10.244.9.9", 53)),
            flow("198.51.100.7", 53, ("198.51.100.7", 53)),
        ];
        assert_eq!(stale(&s, &flows), vec![2, 3]);
    }

    #[test]
    fn unrelated_flows_and_endpointless_services_are_left_alone() {
        let mut empty = port("10.96.0.40", 30500);
        empty.node_port = Some(30600);
        let mut np = port("10.96.0.41", 53);
        np.node_port = Some(30500);
        let s = state(vec![
            ("empty", Protocol::Udp, empty, vec![]),
            ("np", Protocol::Udp, np, vec![ep("10.244.1.5", 53)]),
        ]);
        let flows = [
            flow("8.8.8.8", 53, ("8.8.8.8", 53)),       // not a service
            flow("10.96.0.41", 54, ("10.96.0.41", 54)), // service IP, other port
            flow("10.244.7.7", 53, ("10.244.7.7", 53)), // straight to a pod
            // The endpointless service's own port equals np's node port: its frontend
            // decides, and without endpoints it is left alone.
            flow("10.96.0.40", 30500, ("10.96.0.40", 30500)),
            flow("10.1.1.1", 30600, ("10.1.1.1", 30600)), // endpointless node port
        ];
        assert_eq!(stale(&s, &flows), Vec::<usize>::new());
    }

    #[test]
    fn tcp_and_sctp_service_ports_are_ignored() {
        let mut tcp = port("10.96.0.50", 53);
        tcp.node_port = Some(30053);
        let s = state(vec![
            ("tcp", Protocol::Tcp, tcp, vec![ep("10.244.1.5", 53)]),
            (
                "sctp",
                Protocol::Sctp,
                port("10.96.0.51", 53),
                vec![ep("10.244.1.6", 53)],
            ),
        ]);
        assert!(StaleFlowFilter::new(&s).is_empty());
        let flows = [
            flow("10.96.0.50", 53, ("10.244.9.9", 53)),
            flow("10.1.1.1", 30053, ("10.1.1.1", 30053)),
            flow("10.96.0.51", 53, ("10.96.0.51", 53)),
        ];
        assert_eq!(stale(&s, &flows), Vec::<usize>::new());
    }

    #[test]
    fn indices_are_the_callers() {
        let s = state(vec![(
            "dns",
            Protocol::Udp,
            port("10.96.0.10", 53),
            vec![ep("10.244.1.5", 53)],
        )]);
        let flows = [
            (7, flow("10.96.0.10", 53, ("10.244.1.5", 53))),
            (42, flow("10.96.0.10", 53, ("10.244.2.2", 53))),
        ];
        assert_eq!(stale_udp_flows(&s, flows), vec![42]);
    }
}
