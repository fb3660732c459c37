//! Hard eviction thresholds, the kubelet's `--eviction-hard` (no IO): signals, amounts
//! as quantities or percentages of capacity, upstream's Linux defaults.

use std::fmt;

/// What a threshold watches (upstream's eviction signals).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Signal {
    MemoryAvailable,
    NodefsAvailable,
    NodefsInodesFree,
    ImagefsAvailable,
    ImagefsInodesFree,
    PidAvailable,
}

impl Signal {
    /// A filesystem signal (nodefs or imagefs, bytes or inodes).
    pub fn is_disk(self) -> bool {
        !matches!(self, Signal::MemoryAvailable | Signal::PidAvailable)
    }

    pub fn name(self) -> &'static str {
        match self {
            Signal::MemoryAvailable => "memory.available",
            Signal::NodefsAvailable => "nodefs.available",
            Signal::NodefsInodesFree => "nodefs.inodesFree",
            Signal::ImagefsAvailable => "imagefs.available",
            Signal::ImagefsInodesFree => "imagefs.inodesFree",
            Signal::PidAvailable => "pid.available",
        }
    }

    fn parse(name: &str) -> Option<Signal> {
        [
            Signal::MemoryAvailable,
            Signal::NodefsAvailable,
            Signal::NodefsInodesFree,
            Signal::ImagefsAvailable,
            Signal::ImagefsInodesFree,
            Signal::PidAvailable,
        ]
        .into_iter()
        .find(|s| s.name() == name)
    }

    /// The resource a pod is evicted to reclaim, as upstream's messages name it.
    pub fn resource(self) -> &'static str {
        match self {
            Signal::MemoryAvailable => "memory",
            Signal::PidAvailable => "pids",
            Signal::NodefsInodesFree | Signal::ImagefsInodesFree => "inodes",
            Signal::NodefsAvailable | Signal::ImagefsAvailable => "ephemeral-storage",
        }
    }
}

/// A threshold's amount.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Amount {
    /// Bytes, inodes or pids.
    Absolute(i64),
    /// Of the signal's capacity.
    Percent(f64),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    pub signal: Signal,
    pub amount: Amount,
    /// As written (`100Mi`, `10%`), for messages.
    pub text: String,
}

impl Threshold {
    /// The amount against `capacity`.
    pub fn quantity(&self, capacity: i64) -> i64 {
        match self.amount {
            Amount::Absolute(v) => v,
            Amount::Percent(p) => (capacity as f64 * p / 100.0) as i64,
        }
    }

    /// Upstream's `<`: met when less than the amount is available.
    pub fn met(&self, available: i64, capacity: i64) -> bool {
        available < self.quantity(capacity)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ThresholdError {
    #[error("--eviction-hard {0:?}: expected <signal><<value>, e.g. memory.available<100Mi")]
    Syntax(String),
    #[error("--eviction-hard {0:?}: unsupported eviction signal (one of memory.available, nodefs.available, nodefs.inodesFree, imagefs.available, imagefs.inodesFree, pid.available)")]
    Signal(String),
    #[error("--eviction-hard {0:?}: the value must be a non-negative quantity or a percentage up to 100%")]
    Value(String),
}

/// upstream's Linux defaults: `memory.available<100Mi`, `nodefs.available<10%`,
/// `nodefs.inodesFree<5%`, `imagefs.available<15%`.
pub fn defaults() -> Vec<Threshold> {
    #[allow(clippy::expect_used)] // constant input, covered by the tests
    parse("memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<15%")
        .expect("the defaults parse")
}

/// `signal<value,...`; an empty string means no thresholds.
pub fn parse(flag: &str) -> Result<Vec<Threshold>, ThresholdError> {
    flag.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(parse_one)
        .collect()
}

fn parse_one(item: &str) -> Result<Threshold, ThresholdError> {
    let (name, value) = item
        .split_once('<')
        .ok_or_else(|| ThresholdError::Syntax(item.to_string()))?;
    let signal =
        Signal::parse(name.trim()).ok_or_else(|| ThresholdError::Signal(item.to_string()))?;
    let value = value.trim();
    let bad = || ThresholdError::Value(item.to_string());
    let amount = match value.strip_suffix('%') {
        Some(p) => {
            let p: f64 = p.parse().map_err(|_| bad())?;
            if !(0.0..=100.0).contains(&p) {
                return Err(bad());
            }
            Amount::Percent(p)
        }
        None => {
            let v = cairn_semantics::quantity::parse_value(value).map_err(|_| bad())?;
            if v < 0 {
                return Err(bad());
            }
            Amount::Absolute(v)
        }
    };
    Ok(Threshold {
        signal,
        amount,
        text: value.to_string(),
    })
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}<{}", self.signal.name(), self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_defaults_and_flags_parse() {
        let d = defaults();
        assert_eq!(d.len(), 4);
        assert_eq!(d[0].amount, Amount::Absolute(100 << 20));
        assert_eq!(d[1].amount, Amount::Percent(10.0));
        assert!(d[1].met(9, 100) && !d[1].met(10, 100));
        let t = parse("memory.available<1.5Gi, pid.available<2.5%").expect("parses");
        assert_eq!(t[0].quantity(0), 3 << 29);
        assert_eq!(t[1].quantity(1000), 25);
        assert!(parse("").expect("empty").is_empty());
    }

    #[test]
    fn bad_thresholds_say_what_is_wrong() {
        assert!(matches!(
            parse("memory.available>1"),
            Err(ThresholdError::Syntax(_))
        ));
        assert!(matches!(
            parse("memory.free<1"),
            Err(ThresholdError::Signal(_))
        ));
        assert!(matches!(
            parse("nodefs.available<120%"),
            Err(ThresholdError::Value(_))
        ));
        assert!(matches!(
            parse("memory.available<lots"),
            Err(ThresholdError::Value(_))
        ));
        let e = parse("memory.available<-1").expect_err("negative");
        assert!(e.to_string().contains("non-negative"), "{e}");
    }
}
