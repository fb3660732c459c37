//! The transport protocols of ports (`protocol` of container, Service and policy ports).

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
}

impl Protocol {
    /// The API's spelling (`TCP`, `UDP`, `SCTP`); `None` for anything else.
    pub fn from_api(s: &str) -> Option<Protocol> {
        match s {
            "TCP" => Some(Protocol::Tcp),
            "UDP" => Some(Protocol::Udp),
            "SCTP" => Some(Protocol::Sctp),
            _ => None,
        }
    }

    /// A port's optional `protocol`: TCP when absent, as the API defaults it.
    pub fn parse(s: Option<&str>) -> Option<Protocol> {
        Protocol::from_api(s.unwrap_or("TCP"))
    }

    /// The name nftables and iptables use (`tcp`).
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Sctp => "sctp",
        }
    }
}

impl fmt::Display for Protocol {
    /// The API's spelling.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
            Protocol::Sctp => "SCTP",
        })
    }
}
