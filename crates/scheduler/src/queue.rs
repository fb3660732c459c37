//! The scheduling queue (upstream's PriorityQueue): an active heap ordered by priority
//! then arrival, a back-off heap (1 s doubling to 10 s per failed attempt), and the
//! unschedulable pods, which wait for a cluster event that could make them fit (or
//! five minutes) instead of spinning the scheduler. Pure: time is passed in.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;

pub const INITIAL_BACKOFF: Duration = Duration::from_secs(1);
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// Unschedulable pods are retried at the latest after this long.
pub const MAX_IN_UNSCHEDULABLE: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Where {
    Active,
    Backoff,
    Unschedulable,
    Gated,
    InFlight,
}

#[derive(Debug)]
struct Entry {
    pod: Arc<Pod>,
    priority: i32,
    attempts: u32,
    place: Where,
    /// Bumped on every move so stale heap entries are skipped.
    token: u64,
    backoff_until: Instant,
    unschedulable_since: Instant,
    /// A cluster event arrived while the pod was being scheduled.
    moved_while_in_flight: bool,
    /// When the pod first entered the queue (for the scheduling latency).
    first_queued: Instant,
}

#[derive(PartialEq, Eq)]
struct ActiveKey {
    priority: i32,
    token: u64,
    uid: String,
}

impl Ord for ActiveKey {
    fn cmp(&self, o: &Self) -> Ordering {
        self.priority
            .cmp(&o.priority)
            .then_with(|| o.token.cmp(&self.token))
    }
}

impl PartialOrd for ActiveKey {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// A pod handed out for one scheduling attempt.
#[derive(Debug, Clone)]
pub struct Popped {
    pub pod: Arc<Pod>,
    pub attempts: u32,
    pub first_queued: Instant,
}

#[derive(Default)]
pub struct SchedulingQueue {
    pods: HashMap<String, Entry>,
    active: BinaryHeap<ActiveKey>,
    backoff: BinaryHeap<Reverse<(Instant, u64, String)>>,
    /// Index of the pods waiting as unschedulable, so a cluster event costs O(them).
    waiting: HashSet<String>,
    in_flight: HashSet<String>,
    next_token: u64,
}

fn uid_of(p: &Pod) -> String {
    p.metadata.uid.clone().unwrap_or_default()
}

fn priority_of(p: &Pod) -> i32 {
    p.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
}

fn gated(p: &Pod) -> bool {
    p.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| !g.is_empty())
}

pub fn backoff_for(attempts: u32) -> Duration {
    let shift = attempts.saturating_sub(1).min(16);
    INITIAL_BACKOFF.saturating_mul(1 << shift).min(MAX_BACKOFF)
}

impl SchedulingQueue {
    pub fn len(&self) -> usize {
        self.pods.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }

    pub fn contains(&self, uid: &str) -> bool {
        self.pods.contains_key(uid)
    }

    /// Counts per place: (active, backoff, unschedulable, gated, in flight).
    pub fn stats(&self) -> [usize; 5] {
        let mut s = [0; 5];
        for e in self.pods.values() {
            s[e.place as usize] += 1;
        }
        s
    }

    fn place(&mut self, uid: &str, place: Where, now: Instant) {
        self.next_token += 1;
        let token = self.next_token;
        let Some(e) = self.pods.get_mut(uid) else {
            return;
        };
        if e.place == Where::Unschedulable {
            self.waiting.remove(uid);
        }
        if e.place == Where::InFlight {
            self.in_flight.remove(uid);
        }
        if place == Where::Unschedulable {
            self.waiting.insert(uid.to_string());
        }
        e.place = place;
        e.token = token;
        match place {
            Where::Active => self.active.push(ActiveKey {
                priority: e.priority,
                token,
                uid: uid.to_string(),
            }),
            Where::Backoff => self
                .backoff
                .push(Reverse((e.backoff_until, token, uid.to_string()))),
            Where::Unschedulable => e.unschedulable_since = now,
            Where::Gated | Where::InFlight => {}
        }
    }

    /// A new pending pod, or a changed one. A changed pod that waited as unschedulable
    /// or gated may fit now: it goes back to the active queue (or its back-off).
    pub fn upsert(&mut self, pod: Arc<Pod>, now: Instant) {
        let uid = uid_of(&pod);
        let is_gated = gated(&pod);
        match self.pods.get_mut(&uid) {
            Some(e) => {
                // Status-only updates (our own PodScheduled condition among them) do not
                // make a pod schedulable: only spec, labels or annotations count.
                let relevant = e.pod.spec != pod.spec
                    || e.pod.metadata.labels != pod.metadata.labels
                    || e.pod.metadata.annotations != pod.metadata.annotations;
                e.priority = priority_of(&pod);
                e.pod = pod;
                if !relevant {
                    return;
                }
                let to = match e.place {
                    Where::Gated if !is_gated => Some(Where::Active),
                    Where::Unschedulable if is_gated => Some(Where::Gated),
                    Where::Unschedulable if e.backoff_until > now => Some(Where::Backoff),
                    Where::Unschedulable => Some(Where::Active),
                    _ => None,
                };
                if let Some(to) = to {
                    self.place(&uid, to, now);
                }
            }
            None => {
                self.pods.insert(
                    uid.clone(),
                    Entry {
                        priority: priority_of(&pod),
                        pod,
                        attempts: 0,
                        place: Where::Gated,
                        token: 0,
                        backoff_until: now,
                        unschedulable_since: now,
                        moved_while_in_flight: false,
                        first_queued: now,
                    },
                );
                let to = if is_gated {
                    Where::Gated
                } else {
                    Where::Active
                };
                self.place(&uid, to, now);
            }
        }
    }

    /// The pod is gone or no longer pending (bound elsewhere, deleted).
    pub fn remove(&mut self, uid: &str) {
        self.pods.remove(uid);
        self.waiting.remove(uid);
        self.in_flight.remove(uid);
    }

    /// Moves pods whose back-off expired into the active queue.
    pub fn flush_backoff(&mut self, now: Instant) {
        while let Some(Reverse((until, token, uid))) = self.backoff.peek().cloned() {
            if until > now {
                break;
            }
            self.backoff.pop();
            if self
                .pods
                .get(&uid)
                .is_some_and(|e| e.token == token && e.place == Where::Backoff)
            {
                self.place(&uid, Where::Active, now);
            }
        }
        let stale: Vec<String> = self
            .pods
            .iter()
            .filter(|(_, e)| {
                e.place == Where::Unschedulable
                    && now.duration_since(e.unschedulable_since) >= MAX_IN_UNSCHEDULABLE
            })
            .map(|(u, _)| u.clone())
            .collect();
        for uid in stale {
            self.place(&uid, Where::Active, now);
        }
    }

    /// When the earliest back-off ends.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.backoff.peek().map(|Reverse((t, _, _))| *t)
    }

    /// The highest-priority, longest-waiting active pod, now in flight.
    pub fn pop(&mut self) -> Option<Popped> {
        while let Some(k) = self.active.pop() {
            let Some(e) = self.pods.get_mut(&k.uid) else {
                continue;
            };
            if e.token != k.token || e.place != Where::Active {
                continue;
            }
            e.place = Where::InFlight;
            self.in_flight.insert(k.uid.clone());
            e.attempts += 1;
            e.moved_while_in_flight = false;
            return Some(Popped {
                pod: e.pod.clone(),
                attempts: e.attempts,
                first_queued: e.first_queued,
            });
        }
        None
    }

    /// The attempt found no node. The pod waits for a cluster event, unless one came
    /// during the attempt, in which case only its back-off holds it.
    pub fn unschedulable(&mut self, uid: &str, now: Instant) {
        let Some(e) = self.pods.get_mut(uid) else {
            return;
        };
        e.backoff_until = now + backoff_for(e.attempts);
        let to = if e.moved_while_in_flight {
            Where::Backoff
        } else {
            Where::Unschedulable
        };
        self.place(uid, to, now);
    }

    /// The attempt failed for another reason (a bind error): retry after back-off.
    pub fn retry_later(&mut self, uid: &str, now: Instant) {
        let Some(e) = self.pods.get_mut(uid) else {
            return;
        };
        e.backoff_until = now + backoff_for(e.attempts);
        self.place(uid, Where::Backoff, now);
    }

    /// Something changed in the cluster that may let waiting pods fit.
    pub fn move_all(&mut self, now: Instant) {
        for uid in &self.in_flight {
            if let Some(e) = self.pods.get_mut(uid) {
                e.moved_while_in_flight = true;
            }
        }
        let waiting: Vec<(String, bool)> = self
            .waiting
            .iter()
            .filter_map(|u| Some((u.clone(), self.pods.get(u)?.backoff_until > now)))
            .collect();
        for (uid, backing_off) in waiting {
            let to = if backing_off {
                Where::Backoff
            } else {
                Where::Active
            };
            self.place(&uid, to, now);
        }
    }

    /// The pod was placed; it leaves the queue.
    pub fn done(&mut self, uid: &str) {
        self.remove(uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::pod;

    fn p(name: &str, prio: i32) -> Arc<Pod> {
        Arc::new(
            pod(name)
                .with(|p| p.spec.as_mut().unwrap().priority = Some(prio))
                .build(),
        )
    }

    fn name(x: &Popped) -> &str {
        x.pod.metadata.name.as_deref().unwrap()
    }

    #[test]
    fn priority_then_fifo() {
        let now = Instant::now();
        let mut q = SchedulingQueue::default();
        q.upsert(p("a", 0), now);
        q.upsert(p("b", 10), now);
        q.upsert(p("c", 0), now);
        let order: Vec<String> = std::iter::from_fn(|| q.pop())
            .map(|x| name(&x).to_string())
            .collect();
        assert_eq!(order, ["b", "a", "c"]);
    }

    #[test]
    fn unschedulable_waits_for_an_event_then_backs_off() {
        let t0 = Instant::now();
        let mut q = SchedulingQueue::default();
        q.upsert(p("a", 0), t0);
        assert_eq!(q.pop().unwrap().attempts, 1);
        q.unschedulable("uid-a", t0);
        q.flush_backoff(t0 + Duration::from_secs(60));
        assert!(q.pop().is_none(), "no event: no retry, no spinning");
        q.move_all(t0 + Duration::from_millis(10));
        assert!(q.pop().is_none(), "still in its 1 s back-off");
        q.flush_backoff(t0 + Duration::from_secs(2));
        assert_eq!(q.pop().unwrap().attempts, 2);
        q.unschedulable("uid-a", t0);
        assert_eq!(backoff_for(2), Duration::from_secs(2));
        assert_eq!(backoff_for(9), MAX_BACKOFF);
        q.flush_backoff(t0 + MAX_IN_UNSCHEDULABLE);
        assert!(q.pop().is_some(), "flushed after five minutes");
    }

    #[test]
    fn event_during_attempt_and_gates() {
        let t0 = Instant::now();
        let mut q = SchedulingQueue::default();
        q.upsert(p("a", 0), t0);
        q.pop().unwrap();
        q.move_all(t0);
        q.unschedulable("uid-a", t0);
        assert_eq!(q.next_deadline(), Some(t0 + INITIAL_BACKOFF));
        let gated = pod("g")
            .with(|p| {
                p.spec.as_mut().unwrap().scheduling_gates =
                    Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate {
                        name: "x".into(),
                    }])
            })
            .build();
        q.upsert(Arc::new(gated), t0);
        q.move_all(t0);
        assert!(q.pop().is_none(), "gated pods stay");
        let mut status_only = pod("g")
            .with(|p| {
                p.spec.as_mut().unwrap().scheduling_gates =
                    Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate {
                        name: "x".into(),
                    }])
            })
            .build();
        status_only.status = Some(Default::default());
        q.upsert(Arc::new(status_only), t0);
        assert!(q.pop().is_none(), "a status change does not release it");
        q.upsert(Arc::new(pod("g").build()), t0);
        assert_eq!(q.pop().map(|x| name(&x).to_string()).as_deref(), Some("g"));
        q.remove("uid-a");
        q.flush_backoff(t0 + MAX_BACKOFF);
        assert!(q.pop().is_none());
    }
}
