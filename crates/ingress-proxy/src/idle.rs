//! Idle keep-alive connections to endpoints, per endpoint address, newest last, each
//! with when it went idle: the one store of both kinds of backend connection (raw
//! HTTP/1.1 streams for bodiless requests, hyper's client connections for the rest).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// A backend connection that may have been closed while it was idle.
pub trait Reusable {
    /// Whether it can no longer carry a request (the endpoint closed it, or sent
    /// something unasked). Cheap: no system call unless the socket has news.
    fn closed(&mut self) -> bool;
}

pub struct Idle<C> {
    conns: Mutex<HashMap<SocketAddr, Vec<(Instant, C)>>>,
    timeout: Duration,
    max_per_endpoint: usize,
    checkins: AtomicU64,
}

/// Every this many checkins every endpoint's list is swept of closed and expired
/// connections, and endpoints with none left (pods that went away) are forgotten.
const SWEEP_EVERY: u64 = 4096;

impl<C: Reusable> Idle<C> {
    pub fn new(timeout: Duration, max_per_endpoint: usize) -> Idle<C> {
        Idle {
            conns: Mutex::new(HashMap::new()),
            timeout,
            max_per_endpoint,
            checkins: AtomicU64::new(0),
        }
    }

    /// The newest idle connection to `endpoint` within the idle timeout (older ones
    /// past it are dropped on the way).
    pub fn take(&self, endpoint: SocketAddr) -> Option<C> {
        let mut conns = self.conns.lock();
        let list = conns.get_mut(&endpoint)?;
        while let Some((since, conn)) = list.pop() {
            if since.elapsed() <= self.timeout {
                return Some(conn);
            }
        }
        None
    }

    /// Keeps `conn` for reuse, unless it is closed or `endpoint` has its fill.
    pub fn put(&self, endpoint: SocketAddr, mut conn: C) {
        if conn.closed() {
            return;
        }
        let mut conns = self.conns.lock();
        let list = conns.entry(endpoint).or_default();
        if list.len() < self.max_per_endpoint {
            list.push((Instant::now(), conn));
        }
        if self.checkins.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            let timeout = self.timeout;
            for list in conns.values_mut() {
                list.retain_mut(|(since, c)| !c.closed() && since.elapsed() <= timeout);
            }
            conns.retain(|_, list| !list.is_empty());
        }
    }

    /// How many are idle, for tests.
    pub fn count(&self) -> usize {
        self.conns.lock().values().map(Vec::len).sum()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    struct Fake {
        id: u32,
        closed: bool,
    }

    impl Reusable for Fake {
        fn closed(&mut self) -> bool {
            self.closed
        }
    }

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn the_newest_is_reused_per_endpoint_and_closed_or_surplus_ones_are_not_kept() {
        let idle = Idle::new(Duration::from_secs(60), 2);
        idle.put(
            addr(1),
            Fake {
                id: 1,
                closed: false,
            },
        );
        idle.put(
            addr(1),
            Fake {
                id: 2,
                closed: false,
            },
        );
        idle.put(
            addr(1),
            Fake {
                id: 3,
                closed: false,
            },
        );
        idle.put(
            addr(1),
            Fake {
                id: 4,
                closed: true,
            },
        );
        idle.put(
            addr(2),
            Fake {
                id: 5,
                closed: false,
            },
        );
        assert_eq!(idle.count(), 3);
        assert_eq!(idle.take(addr(1)).unwrap().id, 2);
        assert_eq!(idle.take(addr(1)).unwrap().id, 1);
        assert!(idle.take(addr(1)).is_none());
        assert_eq!(idle.take(addr(2)).unwrap().id, 5);
        assert!(idle.take(addr(3)).is_none());
    }

    #[test]
    fn a_connection_idle_past_the_timeout_is_not_reused() {
        let idle = Idle::new(Duration::ZERO, 2);
        idle.put(
            addr(1),
            Fake {
                id: 1,
                closed: false,
            },
        );
        std::thread::sleep(Duration::from_millis(2));
        assert!(idle.take(addr(1)).is_none());
        assert_eq!(idle.count(), 0);
    }
}
