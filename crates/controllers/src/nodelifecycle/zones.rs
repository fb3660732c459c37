//! Zones and the pace of NoExecute tainting (upstream `ComputeZoneState` and the zone
//! taint queues): a zone where most nodes went unhealthy is probably cut off rather than
//! broken, so its nodes are tainted at a slower rate (or not at all for small clusters),
//! and when every zone lost all its nodes — the control plane is the one cut off — nothing
//! is tainted for eviction and existing eviction taints are lifted.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZoneState {
    Normal,
    PartialDisruption,
    FullDisruption,
}

/// Thresholds and rates (upstream flags of the same names).
#[derive(Debug, Clone)]
pub struct Pacing {
    /// Nodes tainted per second in a healthy zone (`--node-eviction-rate`, 0.1).
    pub eviction_rate: f64,
    /// In a partly disrupted large zone (`--secondary-node-eviction-rate`, 0.01).
    pub secondary_eviction_rate: f64,
    /// Share of unhealthy nodes from which a zone counts as partly disrupted (0.55).
    pub unhealthy_zone_threshold: f64,
    /// Zones up to this size stop tainting when partly disrupted (50).
    pub large_cluster_size_threshold: usize,
}

impl Default for Pacing {
    fn default() -> Self {
        Pacing {
            eviction_rate: 0.1,
            secondary_eviction_rate: 0.01,
            unhealthy_zone_threshold: 0.55,
            large_cluster_size_threshold: 50,
        }
    }
}

pub fn zone_state(ready: usize, not_ready: usize, threshold: f64) -> ZoneState {
    let total = ready + not_ready;
    if ready == 0 && not_ready > 0 {
        ZoneState::FullDisruption
    } else if not_ready > 2 && total > 0 && not_ready as f64 / total as f64 >= threshold {
        ZoneState::PartialDisruption
    } else {
        ZoneState::Normal
    }
}

impl Pacing {
    /// Nodes per second a zone in `state` of `size` nodes may have tainted.
    pub fn rate(&self, state: ZoneState, size: usize) -> f64 {
        match state {
            ZoneState::Normal | ZoneState::FullDisruption => self.eviction_rate,
            ZoneState::PartialDisruption if size > self.large_cluster_size_threshold => {
                self.secondary_eviction_rate
            }
            ZoneState::PartialDisruption => 0.0,
        }
    }
}

/// A token bucket of one token per zone: the first taint goes at once, the next after
/// `1 / rate` seconds.
#[derive(Debug, Default)]
pub struct Limiters {
    last: BTreeMap<String, Instant>,
}

impl Limiters {
    /// Whether `zone` may taint one more node now at `rate` nodes per second.
    pub fn try_take(&mut self, zone: &str, rate: f64, now: Instant) -> bool {
        if rate <= 0.0 {
            return false;
        }
        let interval = Duration::from_secs_f64(1.0 / rate);
        match self.last.get(zone) {
            Some(last) if now.duration_since(*last) < interval => false,
            _ => {
                self.last.insert(zone.to_string(), now);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_and_rates_follow_upstream() {
        assert_eq!(zone_state(3, 0, 0.55), ZoneState::Normal);
        assert_eq!(
            zone_state(1, 2, 0.55),
            ZoneState::Normal,
            "two unhealthy never count"
        );
        assert_eq!(zone_state(2, 3, 0.55), ZoneState::PartialDisruption);
        assert_eq!(zone_state(0, 2, 0.55), ZoneState::FullDisruption);
        let p = Pacing::default();
        assert_eq!(p.rate(ZoneState::Normal, 3), 0.1);
        assert_eq!(p.rate(ZoneState::PartialDisruption, 10), 0.0);
        assert_eq!(p.rate(ZoneState::PartialDisruption, 100), 0.01);
    }

    #[test]
    fn one_node_per_interval() {
        let mut l = Limiters::default();
        let t0 = Instant::now();
        assert!(l.try_take("a", 0.1, t0));
        assert!(!l.try_take("a", 0.1, t0 + Duration::from_secs(9)));
        assert!(l.try_take("b", 0.1, t0), "zones pace apart");
        assert!(l.try_take("a", 0.1, t0 + Duration::from_secs(10)));
        assert!(!l.try_take("a", 0.0, t0 + Duration::from_secs(100)));
    }
}
