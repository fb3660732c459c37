#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The election's behaviour on the fake lease, in tokio's paused time: every wait is
//! exact and the tests are deterministic.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use crate::testing::{FakeLease, FakeLeaseLock};
use crate::{campaign, Elector, Leading, Lost, Timing, TimingError};

fn candidate(lease: &Arc<FakeLease>, name: &str) -> (Elector<FakeLeaseLock>, FakeLeaseLock) {
    let lock = lease.lock();
    (Elector::new(lock.clone(), name, Timing::default()), lock)
}

#[tokio::test(start_paused = true)]
async fn a_lone_candidate_creates_the_lease_and_holds_it() {
    let lease = FakeLease::new();
    let (mut a, _) = candidate(&lease, "a");
    a.acquire().await;
    let record = lease.record().unwrap();
    assert_eq!(
        (
            record.holder.as_str(),
            record.lease_duration_seconds,
            record.transitions
        ),
        ("a", 15, 0)
    );
    assert!(a.try_acquire_or_renew().await);
    assert_eq!(
        lease.record().unwrap().acquire_time,
        record.acquire_time,
        "a renewal keeps acquireTime"
    );
}

#[tokio::test(start_paused = true)]
async fn a_held_lease_is_taken_only_once_its_holder_stopped_renewing_for_the_lease_duration() {
    let lease = FakeLease::new();
    let (mut a, _) = candidate(&lease, "a");
    let (mut b, _) = candidate(&lease, "b");
    a.acquire().await;
    assert!(!b.try_acquire_or_renew().await);
    // a renews; b's clock restarts at each change it sees.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(a.try_acquire_or_renew().await);
    assert!(!b.try_acquire_or_renew().await);
    tokio::time::sleep(Duration::from_secs(14)).await;
    assert!(
        !b.try_acquire_or_renew().await,
        "15 s have not passed since b saw the renewal"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(b.try_acquire_or_renew().await);
    let record = lease.record().unwrap();
    assert_eq!((record.holder.as_str(), record.transitions), ("b", 1));
    assert!(!a.try_acquire_or_renew().await, "a sees b's fresh lease");
    assert!(!a.is_leader());
}

#[tokio::test(start_paused = true)]
async fn a_cut_off_leader_gives_up_before_another_candidate_can_take_the_lease() {
    let lease = FakeLease::new();
    let (mut a, a_lock) = candidate(&lease, "a");
    let (mut b, _) = candidate(&lease, "b");
    a.acquire().await;
    // b has seen a's lease, as a running candidate would have.
    assert!(!b.try_acquire_or_renew().await);
    let renewed = Instant::now();
    a_lock.set_cut(true);
    let (lost, acquired) = tokio::join!(
        async {
            assert_eq!(a.hold().await, Lost);
            Instant::now()
        },
        async {
            b.acquire().await;
            Instant::now()
        }
    );
    assert!(
        lost <= renewed + Duration::from_secs(10),
        "a held on {:?}",
        lost - renewed
    );
    assert!(
        acquired >= renewed + Duration::from_secs(15),
        "b took it after {:?}",
        acquired - renewed
    );
    assert!(lost < acquired);
}

#[tokio::test(start_paused = true)]
async fn a_leader_keeps_the_lease_through_failures_shorter_than_the_deadline() {
    let lease = FakeLease::new();
    let (mut a, a_lock) = candidate(&lease, "a");
    a.acquire().await;
    a_lock.set_cut(true);
    let heal = async {
        tokio::time::sleep(Duration::from_secs(7)).await;
        a_lock.set_cut(false);
        tokio::time::sleep(Duration::from_secs(60)).await;
    };
    tokio::select! {
        Lost = a.hold() => panic!("lost the lease to a 7 s outage"),
        () = heal => {}
    }
    assert_eq!(lease.record().unwrap().holder, "a");
}

#[tokio::test(start_paused = true)]
async fn a_released_lease_is_taken_within_a_retry_period() {
    let lease = FakeLease::new();
    let (mut a, _) = candidate(&lease, "a");
    let (mut b, _) = candidate(&lease, "b");
    a.acquire().await;
    assert!(!b.try_acquire_or_renew().await);
    assert!(a.release().await);
    assert_eq!(lease.record().unwrap().holder, "");
    let started = Instant::now();
    b.acquire().await;
    assert!(Instant::now() - started <= Duration::from_millis(2400));
    assert_eq!(lease.record().unwrap().transitions, 1);
}

/// Work that records when it was stopped.
struct Work {
    stopped: Arc<Mutex<Option<Instant>>>,
}

impl Leading for Work {
    async fn finished(&mut self) -> Result<(), String> {
        std::future::pending().await
    }
    async fn stop(self) {
        *self.stopped.lock() = Some(Instant::now());
    }
}

#[tokio::test(start_paused = true)]
async fn the_campaign_stops_the_work_before_the_next_leader_starts_and_campaigns_again() {
    let lease = FakeLease::new();
    let (a, a_lock) = candidate(&lease, "a");
    let (mut b, _) = candidate(&lease, "b");
    let stopped = Arc::new(Mutex::new(None));
    let starts = Arc::new(Mutex::new(0));
    let (stop_a, done) = tokio::sync::oneshot::channel::<()>();
    let a_campaign = {
        let stopped = Arc::clone(&stopped);
        let starts = Arc::clone(&starts);
        let start = move || {
            *starts.lock() += 1;
            Ok(Work {
                stopped: Arc::clone(&stopped),
            })
        };
        tokio::spawn(campaign(a, "test", None, start, async {
            let _ = done.await;
        }))
    };
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(*starts.lock(), 1);
    assert!(!b.try_acquire_or_renew().await);
    a_lock.set_cut(true);
    b.acquire().await;
    let took = Instant::now();
    let stopped_at = stopped.lock().expect("a's work was stopped");
    assert!(stopped_at < took);
    // a campaigns again and, once b is gone and a reachable, leads again.
    a_lock.set_cut(false);
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(*starts.lock(), 2);
    let _ = stop_a.send(());
    assert_eq!(a_campaign.await.unwrap(), Ok(()));
    assert_eq!(lease.record().unwrap().holder, "", "released on shutdown");
}

#[test]
fn timings_are_checked_as_client_go_checks_them() {
    let ok = Timing::default();
    assert_eq!(ok.validate(), Ok(()));
    let s = Duration::from_secs;
    let bad = |lease, deadline, retry| {
        Timing {
            lease_duration: lease,
            renew_deadline: deadline,
            retry_period: retry,
        }
        .validate()
    };
    assert_eq!(
        bad(s(10), s(10), s(2)),
        Err(TimingError::LeaseNotLongerThanDeadline)
    );
    assert_eq!(
        bad(s(15), s(2), s(2)),
        Err(TimingError::DeadlineNotLongerThanRetry)
    );
    assert_eq!(
        bad(
            Duration::from_millis(1500),
            s(1),
            Duration::from_millis(100)
        ),
        Err(TimingError::LeaseNotWholeSeconds)
    );
}

/// Who led, from when to when.
type Terms = Arc<Mutex<Vec<(&'static str, Instant, Instant)>>>;

/// Work that logs when it ran.
struct Logged {
    who: &'static str,
    started: Instant,
    log: Terms,
}

impl Leading for Logged {
    async fn finished(&mut self) -> Result<(), String> {
        std::future::pending().await
    }
    async fn stop(self) {
        self.log
            .lock()
            .push((self.who, self.started, Instant::now()));
    }
}

/// 20 forced fail-overs between two campaigns (the leader cut off each time): their
/// leading intervals never overlap.
#[tokio::test(start_paused = true)]
async fn leaders_never_overlap_over_twenty_forced_failovers() {
    let lease = FakeLease::new();
    let log: Terms = Arc::default();
    let mut locks = Vec::new();
    let mut stops = Vec::new();
    let mut campaigns = Vec::new();
    for who in ["a", "b"] {
        let (elector, lock) = candidate(&lease, who);
        locks.push(lock);
        let (stop, done) = tokio::sync::oneshot::channel::<()>();
        stops.push(stop);
        let log = Arc::clone(&log);
        let start = move || {
            Ok(Logged {
                who,
                started: Instant::now(),
                log: Arc::clone(&log),
            })
        };
        campaigns.push(tokio::spawn(campaign(elector, who, None, start, async {
            let _ = done.await;
        })));
    }
    let holder = || lease.record().map(|r| r.holder).unwrap_or_default();
    while holder().is_empty() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for _ in 0..20 {
        let leader = holder();
        let cut = &locks[usize::from(leader == "b")];
        cut.set_cut(true);
        while holder() == leader {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        cut.set_cut(false);
    }
    for stop in stops {
        let _ = stop.send(());
    }
    for c in campaigns {
        assert_eq!(c.await.unwrap(), Ok(()));
    }
    let mut intervals = log.lock().clone();
    assert!(intervals.len() >= 21, "{} terms", intervals.len());
    intervals.sort_by_key(|(_, start, _)| *start);
    for pair in intervals.windows(2) {
        let ((a, _, a_stop), (b, b_start, _)) = (pair[0], pair[1]);
        assert!(a_stop <= b_start, "{a}'s term overlaps {b}'s");
    }
}
