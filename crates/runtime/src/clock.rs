//! Wall-clock time for runtime records and the agent's back-off arithmetic, behind a trait
//! so tests under `tokio::time::pause()` see wall time move with tokio's virtual clock.

use chrono::{DateTime, Utc};

/// Where "now" comes from.
pub trait Clock: Send + Sync {
    fn now(&self) -> DateTime<Utc>;
}

/// The system's wall clock: what the agent runs with.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// Wall time that advances with tokio's clock: a fixed origin plus tokio's elapsed time. Under
/// `tokio::time::pause()` a test's sleeps (and back-off and grace periods) take no real time
/// and still move this clock.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    wall_origin: DateTime<Utc>,
    tokio_origin: tokio::time::Instant,
}

impl TokioClock {
    /// Starts at the current wall time.
    pub fn new() -> Self {
        TokioClock {
            wall_origin: Utc::now(),
            tokio_origin: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn now(&self) -> DateTime<Utc> {
        let elapsed = tokio::time::Instant::now() - self.tokio_origin;
        self.wall_origin + chrono::Duration::from_std(elapsed).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn tokio_clock_moves_with_paused_time() {
        let clock = TokioClock::new();
        let before = clock.now();
        tokio::time::sleep(std::time::Duration::from_secs(300)).await;
        assert_eq!((clock.now() - before).num_seconds(), 300);
    }
}
