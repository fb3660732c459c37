//! Rate-limited retries per key, as client-go's default controller rate limiter: a
//! failing key waits 5 ms, doubling up to 1,000 s; a success resets it.

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;

const BASE: Duration = Duration::from_millis(5);
const MAX: Duration = Duration::from_secs(1000);

#[derive(Default)]
pub struct Retries {
    failures: Mutex<HashMap<String, u32>>,
}

impl Retries {
    /// The wait before the key's next attempt, counting this failure.
    pub fn failed(&self, key: &str) -> Duration {
        let mut f = self.failures.lock();
        let n = f.entry(key.to_string()).or_default();
        let wait = BASE.saturating_mul(2u32.saturating_pow(*n));
        *n = n.saturating_add(1);
        wait.min(MAX)
    }

    pub fn succeeded(&self, key: &str) {
        self.failures.lock().remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_and_resets() {
        let r = Retries::default();
        assert_eq!(r.failed("a"), Duration::from_millis(5));
        assert_eq!(r.failed("a"), Duration::from_millis(10));
        assert_eq!(r.failed("a"), Duration::from_millis(20));
        for _ in 0..40 {
            r.failed("a");
        }
        assert_eq!(r.failed("a"), MAX);
        r.succeeded("a");
        assert_eq!(r.failed("a"), Duration::from_millis(5));
    }
}
