//! The DNS server: UDP and TCP on one address. Cluster names are answered from the
//! loaded zone (authoritative), everything else is forwarded ([`crate::forward`]). The
//! zone is swapped whole by [`DnsServer::set_zone`]; a query reads whichever zone was in
//! place when it arrived, without locks.
//!
//! Each UDP socket is read by one task that answers cluster names inline (no task, no
//! allocation per query) and hands forwarded queries to tasks of their own, at most
//! `max_forwards` at a time, so a slow upstream or a flood of garbage (dropped or answered
//! FORMERR on the spot) does not hold up cluster names. TCP connections are capped and
//! closed when idle.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::forward::Forwarder;
use crate::handler::{self, Outcome};
use crate::metrics::{question_type, response_code, Answered, DnsMetrics};
use crate::records::ClusterZone;
use crate::wire::{self, Fast, KeyBuf, Parsed};

/// Receive buffer asked of the kernel per UDP socket, to ride out bursts.
const UDP_RECV_BUFFER: usize = 4 << 20;
/// Largest query read over UDP (larger datagrams arrive cut and fail to decode).
const MAX_UDP_QUERY: usize = 4096;

/// How the server listens and forwards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// UDP and TCP address; port 0 picks a free port (the same for both).
    pub listen: SocketAddr,
    /// Resolvers for names outside the cluster, tried in order (see
    /// [`crate::read_resolv_conf`]). Empty: such names get SERVFAIL.
    pub upstreams: Vec<SocketAddr>,
    /// How long one upstream gets to answer before the next is tried.
    pub upstream_timeout: Duration,
    /// Upstream answers kept at most.
    pub cache_entries: usize,
    /// Forwarded queries in flight at most; more are refused.
    pub max_forwards: usize,
    /// TCP connections at most; more are closed on accept.
    pub max_tcp_connections: usize,
    /// A TCP connection is closed after this long without a query.
    pub tcp_idle_timeout: Duration,
    /// UDP sockets on the address (`SO_REUSEPORT`), each read by its own task, for a
    /// multi-threaded runtime to answer on several cores.
    pub udp_sockets: usize,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            listen: SocketAddr::from(([0, 0, 0, 0], 53)),
            upstreams: Vec::new(),
            upstream_timeout: Duration::from_secs(2),
            cache_entries: 10_000,
            max_forwards: 512,
            max_tcp_connections: 256,
            tcp_idle_timeout: Duration::from_secs(10),
            udp_sockets: 1,
        }
    }
}

/// The server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("binding {proto} {addr}: {source}")]
    Bind {
        proto: &'static str,
        addr: SocketAddr,
        source: io::Error,
    },
}

/// Counters since start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Packets received (UDP) and messages read (TCP).
    pub queries: u64,
    /// Answered from the pre-rendered zone.
    pub fast: u64,
    /// Handed to an upstream (cache misses).
    pub forwarded: u64,
    /// Not answered: too short, responses, undecodable without a header.
    pub dropped: u64,
}

#[derive(Default)]
struct Counters {
    queries: AtomicU64,
    fast: AtomicU64,
    forwarded: AtomicU64,
    dropped: AtomicU64,
}

struct Shared {
    zone: ArcSwap<ClusterZone>,
    metrics: Arc<DnsMetrics>,
    forwarder: Forwarder,
    counters: Counters,
    tcp_slots: Arc<Semaphore>,
    tcp_idle: Duration,
}

/// A running DNS server; dropping it stops it.
pub struct DnsServer {
    shared: Arc<Shared>,
    addr: SocketAddr,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

fn udp_socket(addr: SocketAddr, reuse_port: bool) -> io::Result<UdpSocket> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if reuse_port {
        socket.set_reuse_port(true)?;
    }
    if let Err(e) = socket.set_recv_buffer_size(UDP_RECV_BUFFER) {
        debug!(error = %e, "could not enlarge the UDP receive buffer");
    }
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    UdpSocket::from_std(socket.into())
}

/// UDP sockets and a TCP listener on one port (a free one when `addr` has port 0).
async fn bind_all(
    addr: SocketAddr,
    udp: usize,
) -> Result<(Vec<UdpSocket>, TcpListener), ServerError> {
    let bind_err = |proto, addr, source| ServerError::Bind {
        proto,
        addr,
        source,
    };
    let mut attempts = if addr.port() == 0 { 8 } else { 1 };
    loop {
        attempts -= 1;
        let first = udp_socket(addr, udp > 1).map_err(|e| bind_err("udp", addr, e))?;
        let bound = first.local_addr().map_err(|e| bind_err("udp", addr, e))?;
        let tcp = match TcpListener::bind(bound).await {
            Ok(tcp) => tcp,
            Err(e) if attempts > 0 && e.kind() == io::ErrorKind::AddrInUse => continue,
            Err(e) => return Err(bind_err("tcp", bound, e)),
        };
        let mut sockets = vec![first];
        for _ in 1..udp {
            sockets.push(udp_socket(bound, true).map_err(|e| bind_err("udp", bound, e))?);
        }
        return Ok((sockets, tcp));
    }
}

impl DnsServer {
    /// Binds and starts serving `zone` on the current Tokio runtime.
    pub async fn bind(config: ServerConfig, zone: ClusterZone) -> Result<DnsServer, ServerError> {
        Self::bind_metered(config, zone, Arc::default()).await
    }

    /// [`DnsServer::bind`], counting every answer in `metrics`.
    pub async fn bind_metered(
        config: ServerConfig,
        zone: ClusterZone,
        metrics: Arc<DnsMetrics>,
    ) -> Result<DnsServer, ServerError> {
        let (sockets, listener) = bind_all(config.listen, config.udp_sockets.max(1)).await?;
        let addr = listener.local_addr().map_err(|source| ServerError::Bind {
            proto: "tcp",
            addr: config.listen,
            source,
        })?;
        metrics.serving(addr);
        let shared = Arc::new(Shared {
            zone: ArcSwap::from_pointee(zone),
            metrics,
            forwarder: Forwarder::new(
                config.upstreams.clone(),
                config.upstream_timeout,
                config.cache_entries,
                config.max_forwards,
            ),
            counters: Counters::default(),
            tcp_slots: Arc::new(Semaphore::new(config.max_tcp_connections.max(1))),
            tcp_idle: config.tcp_idle_timeout,
        });
        let mut tasks = Vec::new();
        for socket in sockets {
            tasks.push(tokio::spawn(udp_loop(Arc::new(socket), shared.clone())));
        }
        tasks.push(tokio::spawn(tcp_loop(listener, shared.clone())));
        info!(%addr, upstreams = ?config.upstreams, "serving DNS");
        Ok(DnsServer {
            shared,
            addr,
            tasks: Mutex::new(tasks),
        })
    }

    /// The bound address (UDP and TCP).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Replaces the zone; queries already being answered finish with the old one.
    pub fn set_zone(&self, zone: impl Into<Arc<ClusterZone>>) {
        self.shared.zone.store(zone.into());
    }

    /// The zone being served.
    pub fn zone(&self) -> Arc<ClusterZone> {
        self.shared.zone.load_full()
    }

    pub fn stats(&self) -> ServerStats {
        let c = &self.shared.counters;
        ServerStats {
            queries: c.queries.load(Ordering::Relaxed),
            fast: c.fast.load(Ordering::Relaxed),
            forwarded: c.forwarded.load(Ordering::Relaxed),
            dropped: c.dropped.load(Ordering::Relaxed),
        }
    }

    /// Stops serving (also on drop).
    pub fn shutdown(&self) {
        for task in self.tasks.lock().drain(..) {
            task.abort();
        }
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl Shared {
    fn answered(
        &self,
        tcp: bool,
        peer: SocketAddr,
        qtype: Option<u16>,
        out: &[u8],
        started: Instant,
    ) {
        self.metrics.answered(Answered {
            tcp,
            peer,
            qtype,
            rcode: response_code(out),
            took: started.elapsed(),
        });
    }

    /// Answers one message into `out`: the fast path for cluster names, else the general
    /// one. Also the question's type for the metrics, from the parse the fast path made.
    fn handle(&self, packet: &[u8], tcp: bool, out: &mut Vec<u8>) -> (Outcome, Option<u16>) {
        let c = &self.counters;
        c.queries.fetch_add(1, Ordering::Relaxed);
        let zone = self.zone.load();
        let mut key = KeyBuf::new();
        let q = match wire::parse(packet, &mut key) {
            Parsed::Drop => {
                c.dropped.fetch_add(1, Ordering::Relaxed);
                return (Outcome::Drop, None);
            }
            Parsed::Slow => None,
            Parsed::Query(q) => Some(q),
        };
        if let Some(q) = q {
            let limit = if tcp {
                usize::from(u16::MAX)
            } else {
                q.udp_limit()
            };
            match wire::decide(&zone, &q, &key) {
                Fast::Positive(chunk) => q.write_positive(out, chunk, limit),
                Fast::Negative { rcode } => q.write_negative(out, rcode, zone.soa_wire()),
                Fast::Error { rcode } => q.write_error(out, rcode),
                Fast::Slow => return (self.general(&zone, packet, tcp, out), Some(q.qtype())),
            }
            c.fast.fetch_add(1, Ordering::Relaxed);
            return (Outcome::Reply, Some(q.qtype()));
        }
        (self.general(&zone, packet, tcp, out), question_type(packet))
    }

    fn general(&self, zone: &ClusterZone, packet: &[u8], tcp: bool, out: &mut Vec<u8>) -> Outcome {
        let outcome = handler::handle(zone, &self.forwarder, packet, tcp, out);
        match &outcome {
            Outcome::Drop => self.counters.dropped.fetch_add(1, Ordering::Relaxed),
            Outcome::Forward(_) => self.counters.forwarded.fetch_add(1, Ordering::Relaxed),
            Outcome::Reply => 0,
        };
        outcome
    }
}

async fn udp_loop(socket: Arc<UdpSocket>, shared: Arc<Shared>) {
    let mut buf = vec![0u8; MAX_UDP_QUERY];
    let mut out = Vec::with_capacity(usize::from(wire::EDNS_PAYLOAD) + 512);
    loop {
        let (n, peer) = match socket.recv_from(&mut buf).await {
            Ok(got) => got,
            Err(e) => {
                // Transient (no buffers and the like); a pause keeps a persistent one from
                // spinning.
                debug!(error = %e, "UDP receive failed");
                tokio::time::sleep(Duration::from_millis(1)).await;
                continue;
            }
        };
        let started = Instant::now();
        let (outcome, qtype) = shared.handle(&buf[..n], false, &mut out);
        match outcome {
            Outcome::Reply => {
                shared.answered(false, peer, qtype, &out, started);
                if let Err(e) = socket.send_to(&out, peer).await {
                    debug!(error = %e, %peer, "UDP send failed");
                }
            }
            Outcome::Drop => {}
            Outcome::Forward(job) => {
                let (socket, shared) = (socket.clone(), shared.clone());
                tokio::spawn(async move {
                    let mut out = Vec::new();
                    if job.run(&shared.forwarder, &mut out).await {
                        shared.answered(false, peer, qtype, &out, started);
                        if let Err(e) = socket.send_to(&out, peer).await {
                            debug!(error = %e, %peer, "UDP send failed");
                        }
                    }
                });
            }
        }
    }
}

async fn tcp_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(got) => got,
            Err(e) => {
                // Out of descriptors and the like: give it a moment rather than spin.
                warn!(error = %e, "TCP accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = shared.tcp_slots.clone().try_acquire_owned() else {
            debug!(%peer, "too many TCP connections; closing");
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            if let Err(e) = tcp_connection(stream, peer, &shared).await {
                debug!(error = %e, %peer, "TCP connection ended");
            }
            drop(slot);
        });
    }
}

/// Length-prefixed queries, answered in order, until the peer closes or idles.
async fn tcp_connection(
    mut stream: TcpStream,
    peer: SocketAddr,
    shared: &Shared,
) -> io::Result<()> {
    let mut buf = Vec::new();
    let mut out = Vec::new();
    loop {
        let len = match tokio::time::timeout(shared.tcp_idle, stream.read_u16()).await {
            Ok(Ok(len)) => usize::from(len),
            Ok(Err(e)) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Ok(Err(e)) => return Err(e),
            Err(_) => return Ok(()),
        };
        buf.resize(len, 0);
        tokio::time::timeout(shared.tcp_idle, stream.read_exact(&mut buf))
            .await
            .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
        let started = Instant::now();
        let (outcome, qtype) = shared.handle(&buf, true, &mut out);
        let replied = match outcome {
            Outcome::Reply => true,
            // Garbage on a stream: nothing sensible follows it.
            Outcome::Drop => return Ok(()),
            Outcome::Forward(job) => job.run(&shared.forwarder, &mut out).await,
        };
        if replied {
            shared.answered(true, peer, qtype, &out, started);
            let len = u16::try_from(out.len()).map_err(io::Error::other)?;
            let mut framed = Vec::with_capacity(out.len() + 2);
            framed.extend_from_slice(&len.to_be_bytes());
            framed.extend_from_slice(&out);
            // A peer that does not read is dropped like one that does not write.
            tokio::time::timeout(shared.tcp_idle, stream.write_all(&framed))
                .await
                .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
        }
    }
}
