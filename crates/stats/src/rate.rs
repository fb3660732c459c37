//! Rates from two cumulative readings: upstream's `usageNanoCores` is the CPU time used
//! between two housekeeping passes over the wall time between them.

use std::time::Duration;

/// Nano-cores used while `usage_ns` went from `earlier` to `later` over `elapsed`.
/// `None` when there is no interval or the counter went backwards (a cgroup re-created
/// under the same path counts from zero again).
pub fn nano_cores(earlier: u64, later: u64, elapsed: Duration) -> Option<u64> {
    let elapsed_ns = elapsed.as_nanos();
    if elapsed_ns == 0 || later < earlier {
        return None;
    }
    let used = u128::from(later - earlier);
    u64::try_from(used * 1_000_000_000 / elapsed_ns).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_a_core_over_ten_seconds() {
        let five_s = 5_000_000_000;
        let got = nano_cores(1_000, 1_000 + five_s, Duration::from_secs(10));
        assert_eq!(got, Some(500_000_000));
    }

    #[test]
    fn no_rate_without_an_interval_or_when_the_counter_restarts() {
        assert_eq!(nano_cores(0, 10, Duration::ZERO), None);
        assert_eq!(nano_cores(10, 5, Duration::from_secs(1)), None);
    }
}
