//! Forwarding: names outside the cluster go to the node's upstream resolvers, in the
//! configured order, the next one only when one does not answer (a SERVFAIL or NXDOMAIN
//! is an answer and is relayed as it is, like CoreDNS's `forward`). UDP first, TCP when
//! the answer is truncated; each exchange on its own socket, so the source port is
//! random, and the reply must match the query's ID and question. Answers are cached until
//! their TTL runs out (negative ones for the SOA's minimum, RFC 2308) and served with the
//! TTLs counted down, as CoreDNS's `cache` in front of `forward` does.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hickory_proto::op::{Edns, Message, MessageType, Query, ResponseCode};
use hickory_proto::rr::{Name, RData};
use hickory_proto::ProtoError;
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::debug;

use crate::records::wire_key;
use crate::wire::EDNS_PAYLOAD;

/// Longest a positive answer is kept (CoreDNS's `cache` default).
const MAX_TTL: u32 = 3600;
/// Longest a negative answer is kept (CoreDNS's `cache` default).
const MAX_NEGATIVE_TTL: u32 = 1800;

/// Why an upstream gave no answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ForwardError {
    #[error("no upstream resolvers configured")]
    NoUpstreams,
    #[error("upstream {upstream}: no answer within {timeout:?}")]
    Timeout {
        upstream: SocketAddr,
        timeout: Duration,
    },
    #[error("upstream {upstream}: {source}")]
    Io {
        upstream: SocketAddr,
        source: io::Error,
    },
    #[error("encoding the query for {name}: {source}")]
    Encode { name: Name, source: ProtoError },
}

struct Cached {
    message: Arc<Message>,
    stored: Instant,
    ttl: u32,
}

/// Upstream resolvers and the answers they gave.
pub(crate) struct Forwarder {
    upstreams: Vec<SocketAddr>,
    timeout: Duration,
    capacity: usize,
    cache: Mutex<HashMap<Vec<u8>, Cached>>,
    slots: Arc<Semaphore>,
}

/// The cache key: lower-case name, type, class, and the DO and CD bits (which change
/// what an upstream returns).
pub(crate) fn cache_key(query: &Query, dnssec_ok: bool, cd: bool) -> Vec<u8> {
    let mut key = wire_key(query.name());
    key.extend_from_slice(&u16::from(query.query_type()).to_be_bytes());
    key.extend_from_slice(&u16::from(query.query_class()).to_be_bytes());
    key.push(u8::from(dnssec_ok) | u8::from(cd) << 1);
    key
}

/// How long `m` may be cached, if at all.
fn cache_ttl(m: &Message) -> Option<u32> {
    if m.truncation {
        return None;
    }
    let negative = m.response_code == ResponseCode::NXDomain
        || (m.response_code == ResponseCode::NoError && m.answers.is_empty());
    let ttl = if negative {
        let soa = m.authorities.iter().find_map(|r| match &r.data {
            RData::SOA(soa) => Some(r.ttl.min(soa.minimum)),
            _ => None,
        })?;
        soa.min(MAX_NEGATIVE_TTL)
    } else if m.response_code == ResponseCode::NoError {
        let all = m.answers.iter().chain(&m.authorities).chain(&m.additionals);
        all.map(|r| r.ttl).min()?.min(MAX_TTL)
    } else {
        return None;
    };
    (ttl > 0).then_some(ttl)
}

impl Forwarder {
    pub(crate) fn new(
        upstreams: Vec<SocketAddr>,
        timeout: Duration,
        capacity: usize,
        max_in_flight: usize,
    ) -> Forwarder {
        Forwarder {
            upstreams,
            timeout,
            capacity,
            cache: Mutex::new(HashMap::new()),
            slots: Arc::new(Semaphore::new(max_in_flight.max(1))),
        }
    }

    /// A place for one more forwarded query, or None when too many are in flight
    /// (answered REFUSED, as CoreDNS's `max_concurrent` does).
    pub(crate) fn try_slot(&self) -> Option<OwnedSemaphorePermit> {
        self.slots.clone().try_acquire_owned().ok()
    }

    /// A cached answer with its TTLs counted down.
    pub(crate) fn cached(&self, key: &[u8]) -> Option<Message> {
        let (message, spent) = {
            let mut cache = self.cache.lock();
            let entry = cache.get(key)?;
            let elapsed = entry.stored.elapsed().as_secs();
            if elapsed >= u64::from(entry.ttl) {
                cache.remove(key);
                return None;
            }
            (
                entry.message.clone(),
                u32::try_from(elapsed).unwrap_or(u32::MAX),
            )
        };
        let mut m = Message::clone(&message);
        for r in m
            .answers
            .iter_mut()
            .chain(&mut m.authorities)
            .chain(&mut m.additionals)
        {
            r.ttl = r.ttl.saturating_sub(spent);
        }
        Some(m)
    }

    fn store(&self, key: Vec<u8>, message: &Message) {
        let Some(ttl) = cache_ttl(message) else {
            return;
        };
        let mut cache = self.cache.lock();
        if cache.len() >= self.capacity {
            let now = Instant::now();
            cache.retain(|_, c| now.duration_since(c.stored).as_secs() < u64::from(c.ttl));
            // Still full: make room by dropping an eighth, whichever entries come first.
            if cache.len() >= self.capacity {
                let mut to_drop = (self.capacity / 8).max(1);
                cache.retain(|_, _| {
                    let keep = to_drop == 0;
                    to_drop = to_drop.saturating_sub(1);
                    keep
                });
            }
        }
        if self.capacity > 0 {
            let cached = Cached {
                message: Arc::new(message.clone()),
                stored: Instant::now(),
                ttl,
            };
            cache.insert(key, cached);
        }
    }

    /// The upstreams' answer to `query`, from the cache when it has one.
    pub(crate) async fn resolve(
        &self,
        query: &Query,
        dnssec_ok: bool,
        cd: bool,
    ) -> Result<Message, ForwardError> {
        let key = cache_key(query, dnssec_ok, cd);
        if let Some(m) = self.cached(&key) {
            return Ok(m);
        }
        let mut last = ForwardError::NoUpstreams;
        for upstream in &self.upstreams {
            match exchange(*upstream, query, dnssec_ok, cd, self.timeout).await {
                Ok(m) => {
                    self.store(key, &m);
                    return Ok(m);
                }
                Err(e) => {
                    debug!(error = %e, name = %query.name(), "upstream did not answer");
                    last = e;
                }
            }
        }
        Err(last)
    }
}

/// One query to one upstream: UDP, then TCP if the answer was truncated.
async fn exchange(
    upstream: SocketAddr,
    query: &Query,
    dnssec_ok: bool,
    cd: bool,
    timeout: Duration,
) -> Result<Message, ForwardError> {
    let id: u16 = rand::random();
    let mut m = Message::query();
    m.metadata.id = id;
    m.metadata.recursion_desired = true;
    m.metadata.checking_disabled = cd;
    m.add_query(query.clone());
    let mut edns = Edns::new();
    edns.set_max_payload(EDNS_PAYLOAD).set_dnssec_ok(dnssec_ok);
    m.set_edns(edns);
    let bytes = m.to_vec().map_err(|source| ForwardError::Encode {
        name: query.name().clone(),
        source,
    })?;
    let io_err = |source| ForwardError::Io { upstream, source };
    let timed_out = |_| ForwardError::Timeout { upstream, timeout };
    let answer = tokio::time::timeout(timeout, udp_exchange(upstream, &bytes, id, query))
        .await
        .map_err(timed_out)?
        .map_err(io_err)?;
    if !answer.truncation {
        return Ok(answer);
    }
    tokio::time::timeout(timeout, tcp_exchange(upstream, &bytes, id, query))
        .await
        .map_err(timed_out)?
        .map_err(io_err)
}

fn answers(m: &Message, id: u16, query: &Query) -> bool {
    m.metadata.id == id
        && m.metadata.message_type == MessageType::Response
        && m.queries.first().is_some_and(|q| {
            q.name() == query.name()
                && q.query_type() == query.query_type()
                && q.query_class() == query.query_class()
        })
}

async fn udp_exchange(
    upstream: SocketAddr,
    bytes: &[u8],
    id: u16,
    query: &Query,
) -> io::Result<Message> {
    let local: SocketAddr = match upstream.ip() {
        IpAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        IpAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let socket = UdpSocket::bind(local).await?;
    socket.connect(upstream).await?;
    socket.send(bytes).await?;
    let mut buf = vec![0u8; usize::from(u16::MAX)];
    loop {
        let n = socket.recv(&mut buf).await?;
        // Anything else on the socket (a late or forged reply) is ignored.
        if let Ok(m) = Message::from_vec(&buf[..n]) {
            if answers(&m, id, query) {
                return Ok(m);
            }
        }
    }
}

async fn tcp_exchange(
    upstream: SocketAddr,
    bytes: &[u8],
    id: u16,
    query: &Query,
) -> io::Result<Message> {
    let mut stream = TcpStream::connect(upstream).await?;
    let len = u16::try_from(bytes.len()).map_err(io::Error::other)?;
    let mut framed = Vec::with_capacity(bytes.len() + 2);
    framed.extend_from_slice(&len.to_be_bytes());
    framed.extend_from_slice(bytes);
    stream.write_all(&framed).await?;
    loop {
        let len = stream.read_u16().await?;
        let mut buf = vec![0u8; usize::from(len)];
        stream.read_exact(&mut buf).await?;
        let m = Message::from_vec(&buf).map_err(io::Error::other)?;
        if answers(&m, id, query) {
            return Ok(m);
        }
    }
}

/// The `nameserver` addresses of a resolv.conf text, on port 53, in order. Link-local
/// IPv6 addresses with a zone (`fe80::1%eth0`) are skipped. Loopback addresses are kept:
/// a server inside the node's agent reaches the node's own stub resolver.
pub fn upstreams_from_resolv_conf(text: &str) -> Vec<SocketAddr> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("nameserver")).then_some(())?;
            let ip: IpAddr = words.next()?.parse().ok()?;
            Some(SocketAddr::new(ip, 53))
        })
        .collect()
}

/// [`upstreams_from_resolv_conf`] of a file (the node's `/etc/resolv.conf`, or
/// `/run/systemd/resolve/resolv.conf` behind systemd-resolved).
pub fn read_resolv_conf(path: &Path) -> io::Result<Vec<SocketAddr>> {
    Ok(upstreams_from_resolv_conf(&std::fs::read_to_string(path)?))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use hickory_proto::op::{Message, OpCode, Query, ResponseCode};
    use hickory_proto::rr::rdata::{A, SOA};
    use hickory_proto::rr::{Name, RData, Record, RecordType};

    use super::*;

    fn answer(rcode: ResponseCode, ttl: u32, soa: Option<(u32, u32)>) -> Message {
        let name = Name::from_ascii("www.example.com.").unwrap();
        let mut m = Message::response(1, OpCode::Query);
        m.metadata.response_code = rcode;
        m.add_query(Query::query(name.clone(), RecordType::A));
        if rcode == ResponseCode::NoError && ttl > 0 {
            m.add_answer(Record::from_rdata(
                name.clone(),
                ttl,
                RData::A(A::new(192, 0, 2, 1)),
            ));
        }
        if let Some((record_ttl, minimum)) = soa {
            let soa = SOA::new(name.clone(), name.clone(), 1, 1, 1, 1, minimum);
            m.add_authority(Record::from_rdata(name, record_ttl, RData::SOA(soa)));
        }
        m
    }

    #[test]
    fn how_long_answers_are_kept() {
        assert_eq!(
            cache_ttl(&answer(ResponseCode::NoError, 300, None)),
            Some(300)
        );
        assert_eq!(
            cache_ttl(&answer(ResponseCode::NoError, 90_000, None)),
            Some(MAX_TTL)
        );
        assert_eq!(
            cache_ttl(&answer(ResponseCode::NoError, 0, None)),
            None,
            "NODATA without SOA"
        );
        assert_eq!(
            cache_ttl(&answer(ResponseCode::NXDomain, 0, Some((600, 60)))),
            Some(60)
        );
        assert_eq!(
            cache_ttl(&answer(ResponseCode::NXDomain, 0, Some((30, 60)))),
            Some(30)
        );
        assert_eq!(
            cache_ttl(&answer(ResponseCode::ServFail, 0, Some((600, 60)))),
            None
        );
        let mut truncated = answer(ResponseCode::NoError, 300, None);
        truncated.metadata.truncation = true;
        assert_eq!(cache_ttl(&truncated), None);
    }

    #[test]
    fn cached_answers_count_their_ttl_down_and_expire() {
        let f = Forwarder::new(vec![], Duration::from_secs(1), 10, 1);
        let m = answer(ResponseCode::NoError, 300, None);
        let key = cache_key(&m.queries[0], false, false);
        f.store(key.clone(), &m);
        let aged = |secs| {
            let mut cache = f.cache.lock();
            let entry = cache.get_mut(&key).unwrap();
            entry.stored = Instant::now() - Duration::from_secs(secs);
        };
        aged(100);
        assert_eq!(f.cached(&key).unwrap().answers[0].ttl, 200);
        aged(300);
        assert!(f.cached(&key).is_none());
        assert!(f.cache.lock().is_empty(), "expired entries are removed");
        // Another DO bit is another entry.
        assert_ne!(key, cache_key(&m.queries[0], true, false));
    }

    #[test]
    fn a_full_cache_makes_room() {
        let f = Forwarder::new(vec![], Duration::from_secs(1), 8, 1);
        for i in 0..50 {
            let mut m = answer(ResponseCode::NoError, 300, None);
            let name = Name::from_ascii(format!("n{i}.example.com.")).unwrap();
            m.queries[0] = Query::query(name, RecordType::A);
            f.store(cache_key(&m.queries[0], false, false), &m);
        }
        assert!(f.cache.lock().len() <= 8);
    }

    #[test]
    fn resolv_conf_nameservers_in_order() {
        let text = "# generated\nsearch corp.example\nnameserver 10.0.0.2\nnameserver 127.0.0.53\n\
                    nameserver fe80::1%eth0\nnameserver 2001:db8::53\noptions edns0\n";
        let got: Vec<String> = upstreams_from_resolv_conf(text)
            .iter()
            .map(|a| a.to_string())
            .collect();
        assert_eq!(got, ["10.0.0.2:53", "127.0.0.53:53", "[2001:db8::53]:53"]);
    }
}
