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
    let mut usec = 0u64;
    sd_notify::watchdog_enabled(false, &mut usec).then(|| Duration::from_micros(usec / 2))
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
