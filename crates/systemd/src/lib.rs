//! The systemd service protocol (`sd_notify(3)`) for cairn's daemons, over the
//! `sd-notify` crate (the protocol is one datagram; a libsystemd binding would add a C
//! dependency for nothing). `Type=notify` units are started, and their dependents
//! released, only once the daemon says `READY=1`, so each daemon says it only once it
//! serves: the API server once it answers, the agent once its node is registered and its
//! port serves, the proxy once its first rules are programmed. With `WatchdogSec=` set,
//! `WATCHDOG=1` goes out at half the interval from a task of the daemon's runtime, so a
//! runtime that stops turning is restarted. Outside systemd (no `NOTIFY_SOCKET`) both do
//! nothing.

use std::time::Duration;

use sd_notify::NotifyState;

/// Tells the service manager the daemon serves; `status` is what `systemctl status`
/// shows beside it.
pub fn ready(status: &str) {
    let states = [NotifyState::Ready, NotifyState::Status(status)];
    match sd_notify::notify(false, &states) {
        Ok(()) => tracing::debug!(status, "told the service manager: ready"),
        Err(e) => tracing::warn!(error = %e, "could not tell the service manager: ready"),
    }
}

/// The watchdog's ping interval: half of `WatchdogSec=`, as `sd_watchdog_enabled(3)`
/// advises; `None` without a watchdog for this process.
pub fn watchdog_interval() -> Option<Duration> {
    interval_of(
        std::env::var("WATCHDOG_USEC").ok().as_deref(),
        std::env::var("WATCHDOG_PID").ok().as_deref(),
        std::process::id(),
    )
}

/// `sd_watchdog_enabled(3)`'s reading: `WATCHDOG_USEC` set and positive, and
/// `WATCHDOG_PID` either unset or this process (the crate's own check wants it set).
fn interval_of(usec: Option<&str>, pid: Option<&str>, me: u32) -> Option<Duration> {
    let usec: u64 = usec?.trim().parse().ok().filter(|u| *u > 0)?;
    match pid.map(|p| p.trim().parse::<u32>()) {
        Some(Ok(p)) if p != me => None,
        Some(Err(_)) => None,
        _ => Some(Duration::from_micros(usec / 2)),
    }
}

/// Pings the watchdog for as long as the runtime runs, if the unit has one.
pub fn spawn_watchdog() -> Option<tokio::task::JoinHandle<()>> {
    let interval = watchdog_interval()?;
    tracing::info!(?interval, "pinging the systemd watchdog");
    Some(tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        loop {
            tick.tick().await;
            if let Err(e) = sd_notify::notify(false, &[NotifyState::Watchdog]) {
                tracing::warn!(error = %e, "could not ping the systemd watchdog");
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watchdog_is_this_process_s_when_its_pid_is_unset_or_ours() {
        let half = Some(Duration::from_millis(200));
        assert_eq!(interval_of(Some("400000"), None, 7), half);
        assert_eq!(interval_of(Some("400000"), Some("7"), 7), half);
        assert_eq!(
            interval_of(Some("400000"), Some("8"), 7),
            None,
            "another process's"
        );
        assert_eq!(interval_of(Some("400000"), Some("x"), 7), None);
        assert_eq!(interval_of(Some("0"), None, 7), None, "0 disables it");
        assert_eq!(interval_of(None, Some("7"), 7), None);
    }
}
