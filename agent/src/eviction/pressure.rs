//! Thresholds against observations, and the node conditions they raise (no IO): a
//! condition stays True for the pressure transition period after its last threshold
//! cleared (`--eviction-pressure-transition-period`), so a node does not flap.

use std::time::{Duration, Instant};

use cairn_semantics::quantity::print_binary;

use super::thresholds::{Amount, Signal, Threshold};

/// What a signal measures now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observation {
    pub signal: Signal,
    pub available: i64,
    pub capacity: i64,
}

/// A threshold that is met.
#[derive(Debug, Clone, PartialEq)]
pub struct Met {
    pub signal: Signal,
    /// The threshold as written (`100Mi`).
    pub threshold: String,
    pub available: i64,
}

/// The thresholds met by the observations (a signal may be observed more than once,
/// e.g. memory on the node and within the pods' allocatable: the lowest counts).
pub fn met(thresholds: &[Threshold], observations: &[Observation]) -> Vec<Met> {
    let mut out: Vec<Met> = Vec::new();
    for t in thresholds {
        let worst = observations
            .iter()
            .filter(|o| o.signal == t.signal && t.met(o.available, o.capacity))
            .min_by_key(|o| o.available);
        if let Some(o) = worst {
            // Upstream's message prints a percentage as the amount it came to.
            let threshold = match t.amount {
                Amount::Absolute(_) => t.text.clone(),
                Amount::Percent(_) => print_binary(t.quantity(o.capacity)),
            };
            out.push(Met {
                signal: t.signal,
                threshold,
                available: o.available,
            });
        }
    }
    out
}

/// The node's pressure conditions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodePressure {
    pub memory: bool,
    pub disk: bool,
    pub pid: bool,
}

/// When each condition's thresholds were last met.
#[derive(Debug, Default)]
pub struct Pressure {
    memory: Option<Instant>,
    disk: Option<Instant>,
    pid: Option<Instant>,
}

impl Pressure {
    pub fn observe(&mut self, met: &[Met], now: Instant) {
        for m in met {
            let slot = match m.signal {
                Signal::MemoryAvailable => &mut self.memory,
                Signal::PidAvailable => &mut self.pid,
                _ => &mut self.disk,
            };
            *slot = Some(now);
        }
    }

    pub fn conditions(&self, now: Instant, transition: Duration) -> NodePressure {
        let active =
            |at: Option<Instant>| at.is_some_and(|t| now.saturating_duration_since(t) < transition);
        NodePressure {
            memory: active(self.memory),
            disk: active(self.disk),
            pid: active(self.pid),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::thresholds::parse;
    use super::*;

    #[test]
    fn the_lowest_observation_decides_and_conditions_hold_for_the_transition() {
        let t = parse("memory.available<100Mi,nodefs.available<10%").expect("parses");
        let obs = [
            Observation {
                signal: Signal::MemoryAvailable,
                available: 8 << 30,
                capacity: 16 << 30,
            },
            Observation {
                signal: Signal::MemoryAvailable,
                available: 40 << 20,
                capacity: 500 << 20,
            },
            Observation {
                signal: Signal::NodefsAvailable,
                available: 50,
                capacity: 100,
            },
        ];
        let m = met(&t, &obs);
        assert_eq!(m.len(), 1);
        assert_eq!(
            (m[0].signal, m[0].available),
            (Signal::MemoryAvailable, 40 << 20)
        );
        let mut p = Pressure::default();
        let start = Instant::now();
        p.observe(&m, start);
        let period = Duration::from_secs(5);
        assert!(p.conditions(start + Duration::from_secs(4), period).memory);
        let later = p.conditions(start + Duration::from_secs(6), period);
        assert_eq!(
            later,
            NodePressure::default(),
            "cleared after the transition period"
        );
    }

    #[test]
    fn a_percentage_is_reported_as_the_amount_it_came_to() {
        let t = parse("nodefs.available<10%,nodefs.inodesFree<300").expect("parses");
        let obs = [
            Observation {
                signal: Signal::NodefsAvailable,
                available: 1 << 30,
                capacity: 20 << 30,
            },
            Observation {
                signal: Signal::NodefsInodesFree,
                available: 200,
                capacity: 1000,
            },
        ];
        let m = met(&t, &obs);
        let thresholds: Vec<&str> = m.iter().map(|m| m.threshold.as_str()).collect();
        assert_eq!(thresholds, ["2Gi", "300"]);
    }
}
