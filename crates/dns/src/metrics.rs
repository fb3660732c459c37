//! CoreDNS's metrics for the agent's `/metrics`: `coredns_dns_requests_total{server,
//! zone, view, proto, family, type}`, `coredns_dns_responses_total{server, zone, view,
//! rcode, plugin}` and `coredns_dns_request_duration_seconds{server, zone, view, type}`
//! (zone `.`, view empty, as a CoreDNS serving the root zone labels them). The series of
//! each combination is looked up once and kept, so a query costs atomic increments, not
//! label hashing: the answer path is the hot one.

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// The query types CoreDNS names; the rest count as `other`.
const TYPES: &[(u16, &str)] = &[
    (1, "A"),
    (28, "AAAA"),
    (5, "CNAME"),
    (15, "MX"),
    (2, "NS"),
    (12, "PTR"),
    (6, "SOA"),
    (33, "SRV"),
    (16, "TXT"),
    (255, "ANY"),
    (65, "HTTPS"),
];
const OTHER: usize = TYPES.len();
const RCODES: &[&str] = &[
    "NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED", "YXDOMAIN", "YXRRSET",
    "NXRRSET", "NOTAUTH", "NOTZONE",
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    server: String,
    zone: &'static str,
    view: &'static str,
    proto: &'static str,
    family: &'static str,
    r#type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResponseLabels {
    server: String,
    zone: &'static str,
    view: &'static str,
    rcode: String,
    plugin: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DurationLabels {
    server: String,
    zone: &'static str,
    view: &'static str,
    r#type: &'static str,
}

fn duration_histogram() -> Histogram {
    // CoreDNS's buckets: 0.25 ms doubling, 16 of them.
    Histogram::new(exponential_buckets(0.00025, 2.0, 16))
}

/// One answered query, as the metrics see it.
#[derive(Debug, Clone, Copy)]
pub struct Answered {
    pub tcp: bool,
    pub peer: SocketAddr,
    pub qtype: Option<u16>,
    pub rcode: u8,
    pub took: Duration,
}

#[derive(Debug)]
pub struct DnsMetrics {
    server: OnceLock<String>,
    requests: Family<RequestLabels, Counter>,
    responses: Family<ResponseLabels, Counter>,
    durations: Family<DurationLabels, Histogram, fn() -> Histogram>,
    /// `[proto][family][type]`, flattened.
    request_slots: Vec<OnceLock<Counter>>,
    response_slots: Vec<OnceLock<Counter>>,
    duration_slots: Vec<OnceLock<Histogram>>,
}

impl Default for DnsMetrics {
    fn default() -> Self {
        fn slots<T>(n: usize) -> Vec<OnceLock<T>> {
            (0..n).map(|_| OnceLock::new()).collect()
        }
        DnsMetrics {
            server: OnceLock::new(),
            requests: Family::default(),
            responses: Family::default(),
            durations: Family::new_with_constructor(duration_histogram),
            request_slots: slots(2 * 2 * (OTHER + 1)),
            response_slots: slots(16),
            duration_slots: slots(OTHER + 1),
        }
    }
}

fn type_index(qtype: Option<u16>) -> usize {
    qtype
        .and_then(|t| TYPES.iter().position(|(code, _)| *code == t))
        .unwrap_or(OTHER)
}

fn type_name(index: usize) -> &'static str {
    TYPES.get(index).map_or("other", |(_, name)| name)
}

impl DnsMetrics {
    /// Registers the families in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "coredns_dns_requests",
            "Counter of DNS requests made per zone, protocol and family.",
            self.requests.clone(),
        );
        registry.register(
            "coredns_dns_responses",
            "Counter of response status codes.",
            self.responses.clone(),
        );
        registry.register(
            "coredns_dns_request_duration_seconds",
            "Histogram of the time (in seconds) each request took per zone.",
            self.durations.clone(),
        );
    }

    /// The server label (`dns://<listen>`), set once when the server binds.
    pub fn serving(&self, listen: SocketAddr) {
        let _ = self.server.set(format!("dns://{listen}"));
    }

    fn server(&self) -> String {
        self.server
            .get()
            .cloned()
            .unwrap_or_else(|| "dns://:53".into())
    }

    pub fn answered(&self, a: Answered) {
        let t = type_index(a.qtype);
        let (proto, family) = (usize::from(a.tcp), usize::from(a.peer.is_ipv6()));
        let slot = (proto * 2 + family) * (OTHER + 1) + t;
        if let Some(cell) = self.request_slots.get(slot) {
            cell.get_or_init(|| {
                let labels = RequestLabels {
                    server: self.server(),
                    zone: ".",
                    view: "",
                    proto: if a.tcp { "tcp" } else { "udp" },
                    family: if a.peer.is_ipv6() { "2" } else { "1" },
                    r#type: type_name(t),
                };
                self.requests.get_or_create(&labels).clone()
            })
            .inc();
        }
        if let Some(cell) = self.response_slots.get(usize::from(a.rcode & 0x0f)) {
            cell.get_or_init(|| {
                let rcode = RCODES
                    .get(usize::from(a.rcode))
                    .map_or_else(|| a.rcode.to_string(), |s| s.to_string());
                let labels = ResponseLabels {
                    server: self.server(),
                    zone: ".",
                    view: "",
                    rcode,
                    plugin: "",
                };
                self.responses.get_or_create(&labels).clone()
            })
            .inc();
        }
        if let Some(cell) = self.duration_slots.get(t) {
            cell.get_or_init(|| {
                let labels = DurationLabels {
                    server: self.server(),
                    zone: ".",
                    view: "",
                    r#type: type_name(t),
                };
                self.durations.get_or_create(&labels).clone()
            })
            .observe(a.took.as_secs_f64());
        }
    }
}

/// The question's type of a query (the first question), if it parses that far.
pub fn question_type(packet: &[u8]) -> Option<u16> {
    let mut at = 12;
    loop {
        let len = usize::from(*packet.get(at)?);
        if len == 0 {
            break;
        }
        if len & 0xc0 != 0 {
            return None;
        }
        at += len + 1;
    }
    let t = packet.get(at + 1..at + 3)?;
    Some(u16::from_be_bytes([t[0], t[1]]))
}

/// The response code of an answer.
pub fn response_code(answer: &[u8]) -> u8 {
    answer.get(3).map_or(2, |b| b & 0x0f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_count_under_coredns_names() {
        let m = DnsMetrics::default();
        let mut registry = Registry::default();
        m.register(&mut registry);
        m.serving("10.0.0.1:53".parse().expect("addr"));
        // A query for "a." type A, and an answer header with NXDOMAIN.
        let query = [0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, b'a', 0, 0, 1, 0, 1];
        let answer = [0, 1, 0x81, 0x83];
        let peer: SocketAddr = "10.244.0.5:4000".parse().expect("addr");
        for _ in 0..2 {
            m.answered(Answered {
                tcp: false,
                peer,
                qtype: question_type(&query),
                rcode: response_code(&answer),
                took: Duration::from_micros(30),
            });
        }
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
        assert!(text.contains(r#"coredns_dns_requests_total{server="dns://10.0.0.1:53",zone=".",view="",proto="udp",family="1",type="A"} 2"#), "{text}");
        assert!(text.contains(r#"coredns_dns_responses_total{server="dns://10.0.0.1:53",zone=".",view="",rcode="NXDOMAIN",plugin=""} 2"#), "{text}");
        assert!(text.contains(r#"coredns_dns_request_duration_seconds_count{server="dns://10.0.0.1:53",zone=".",view="",type="A"} 2"#), "{text}");
        assert_eq!(question_type(&[0; 5]), None);
    }
}
