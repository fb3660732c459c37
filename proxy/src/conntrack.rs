//! Stale UDP conntrack flows, removed after the syncs that changed a UDP service port
//! (the policy is `cairn_serviceproxy::conntrack`): UDP has no connection end, so a flow
//! DNATed to an endpoint that went away, or created while a service had no endpoints,
//! would keep its clients' packets going nowhere until it idles out. Checked against the
//! whole state rather than per event, so the first sync after a restart repairs what a
//! stopped proxy missed without cutting live flows.

use std::sync::Arc;

use cairn_netfilter::conntrack::{ConntrackDriver, ConntrackError, Flow, IPPROTO_UDP};
use cairn_serviceproxy::conntrack::{StaleFlowFilter, UdpFlow};
use cairn_serviceproxy::{Protocol, ProxyState};

pub struct UdpCleanup {
    driver: Arc<dyn ConntrackDriver>,
    /// The UDP service ports as of the last successful cleanup (None: none yet).
    cleaned: Option<ProxyState>,
}

impl UdpCleanup {
    pub fn new(driver: Arc<dyn ConntrackDriver>) -> UdpCleanup {
        UdpCleanup {
            driver,
            cleaned: None,
        }
    }

    /// Deletes the stale UDP flows of `desired` (just programmed) when its UDP service
    /// ports differ from the last cleaned ones; returns how many went. A failure is
    /// retried after the next sync.
    pub fn after_sync(&mut self, desired: &ProxyState) -> Result<usize, ConntrackError> {
        let udp_ports = || {
            desired
                .iter()
                .filter(|(name, _)| name.protocol == Protocol::Udp)
        };
        // Compared in place: this runs after every sync, and UDP rarely changes.
        if self
            .cleaned
            .as_ref()
            .is_some_and(|c| c.iter().eq(udp_ports()))
        {
            return Ok(0);
        }
        let udp: ProxyState = udp_ports()
            .map(|(name, entry)| (name.clone(), entry.clone()))
            .collect();
        let filter = StaleFlowFilter::new(&udp);
        let deleted = if filter.is_empty() {
            0
        } else {
            let stale: Vec<Flow> = self
                .driver
                .list(IPPROTO_UDP)?
                .into_iter()
                .filter(|f| filter.is_stale(&udp_flow(f)))
                .collect();
            if stale.is_empty() {
                0
            } else {
                self.driver.delete(&stale)?
            }
        };
        self.cleaned = Some(udp);
        Ok(deleted)
    }
}

fn udp_flow(f: &Flow) -> UdpFlow {
    UdpFlow {
        orig_dst: f.orig_dst,
        orig_dport: f.orig_dport,
        reply_src: f.reply_src,
        reply_sport: f.reply_sport,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use std::net::Ipv4Addr;

    use cairn_netfilter::conntrack::FakeConntrack;
    use cairn_serviceproxy::{Endpoint, ServiceEntry, ServicePort, ServicePortName};

    use super::*;

    fn state(endpoints: &[u8]) -> ProxyState {
        let eps: Vec<Endpoint> = endpoints
            .iter()
            .map(|l| Endpoint::ready(Ipv4Addr::new(10, 244, 1, *l), 5353))
            .collect();
        let name = ServicePortName {
            namespace: "ns".into(),
            name: "dns".into(),
            port: String::new(),
            protocol: Protocol::Udp,
        };
        let port = ServicePort {
            cluster_ip: Some(Ipv4Addr::new(10, 96, 0, 10)),
            port: 53,
            ..Default::default()
        };
        [(name, ServiceEntry::with_endpoints(port, eps))].into()
    }

    fn flow(sport: u16, to: u8) -> Flow {
        let client = Ipv4Addr::new(198, 18, 0, 20);
        Flow {
            protocol: IPPROTO_UDP,
            orig_src: client,
            orig_dst: Ipv4Addr::new(10, 96, 0, 10),
            orig_sport: sport,
            orig_dport: 53,
            reply_src: Ipv4Addr::new(10, 244, 1, to),
            reply_dst: client,
            reply_sport: 5353,
            reply_dport: sport,
        }
    }

    #[test]
    fn flows_to_a_removed_endpoint_go_once_per_change() {
        let ct = Arc::new(FakeConntrack::new([flow(1000, 2), flow(1001, 3)]));
        let mut cleanup = UdpCleanup::new(ct.clone());
        assert_eq!(cleanup.after_sync(&state(&[2, 3])).unwrap(), 0);
        assert_eq!(cleanup.after_sync(&state(&[2])).unwrap(), 1);
        assert_eq!(*ct.deleted.lock(), [flow(1001, 3)]);
        // Nothing changed for UDP: the table is not even listed.
        *ct.fail_next.lock() = Some(1);
        assert_eq!(cleanup.after_sync(&state(&[2])).unwrap(), 0);
    }

    #[test]
    fn a_failed_cleanup_is_retried_after_the_next_sync() {
        let ct = Arc::new(FakeConntrack::new([flow(1000, 3)]));
        let mut cleanup = UdpCleanup::new(ct.clone());
        *ct.fail_next.lock() = Some(1);
        assert!(cleanup.after_sync(&state(&[2])).is_err());
        assert_eq!(cleanup.after_sync(&state(&[2])).unwrap(), 1);
    }
}
