//! Scaling behavior, upstream's `normalizeDesiredReplicasWithBehaviors` (no IO): the
//! stabilization windows over past recommendations (scale-up takes the lowest, scale-down
//! the highest within its window), then the scaling policies' rate limits over past
//! scale events, then min and max replicas; with the reason upstream's ScalingLimited
//! condition reports.

use k8s_openapi::api::autoscaling::v2::{HPAScalingRules, HorizontalPodAutoscalerBehavior};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// One past recommendation or scale event.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timed {
    pub at: Timestamp,
    pub replicas: i32,
}

/// Scaling rules with upstream's defaults filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct Rules {
    pub stabilization: SignedDuration,
    /// `Max` (default), `Min` or `Disabled`.
    pub select: String,
    pub policies: Vec<(PolicyKind, i32, SignedDuration)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyKind {
    Pods,
    Percent,
}

/// Upstream's defaults (`pkg/apis/autoscaling/v2/defaults.go`): up at most max(4 pods,
/// 100 %) per 15 s with no stabilization; down 100 % per 15 s after `downscale_window`.
pub fn rules(
    behavior: Option<&HorizontalPodAutoscalerBehavior>,
    downscale_window: SignedDuration,
) -> (Rules, Rules) {
    let secs = |s: i32| SignedDuration::from_secs(i64::from(s));
    let build = |given: Option<&HPAScalingRules>,
                 window: SignedDuration,
                 default: &[(PolicyKind, i32, i32)]| Rules {
        stabilization: given
            .and_then(|r| r.stabilization_window_seconds)
            .map_or(window, secs),
        select: given
            .and_then(|r| r.select_policy.clone())
            .unwrap_or_else(|| "Max".into()),
        policies: match given.and_then(|r| r.policies.as_ref()) {
            Some(p) if !p.is_empty() => p
                .iter()
                .map(|p| {
                    let kind = if p.type_ == "Pods" {
                        PolicyKind::Pods
                    } else {
                        PolicyKind::Percent
                    };
                    (kind, p.value, secs(p.period_seconds))
                })
                .collect(),
            _ => default.iter().map(|(k, v, s)| (*k, *v, secs(*s))).collect(),
        },
    };
    let up = build(
        behavior.and_then(|b| b.scale_up.as_ref()),
        SignedDuration::ZERO,
        &[(PolicyKind::Pods, 4, 15), (PolicyKind::Percent, 100, 15)],
    );
    let down = build(
        behavior.and_then(|b| b.scale_down.as_ref()),
        downscale_window,
        &[(PolicyKind::Percent, 100, 15)],
    );
    (up, down)
}

/// The replicas to scale to, and the ScalingLimited reason and message; `stabilized`
/// is the recommendation after the windows, before the rate limits and bounds.
#[derive(Debug, Clone, PartialEq)]
pub struct Normalized {
    pub replicas: i32,
    pub stabilized: i32,
    pub reason: &'static str,
    pub message: &'static str,
}

/// What normalization needs besides the rules.
#[derive(Debug, Clone)]
pub struct Args<'a> {
    pub current: i32,
    pub desired: i32,
    pub min: i32,
    pub max: i32,
    pub recommendations: &'a [Timed],
    pub scale_up_events: &'a [Timed],
    pub scale_down_events: &'a [Timed],
    pub now: Timestamp,
}

pub fn normalize(args: &Args<'_>, up: &Rules, down: &Rules) -> Normalized {
    let stabilized = stabilize(args, up, down);
    limit_rate(args, stabilized, up, down)
}

/// Upstream's path for an HPA without `behavior` (`normalizeDesiredReplicas`): only the
/// scale-down window over past recommendations, then at most max(2 × current, 4) and
/// min/max replicas.
pub fn normalize_legacy(args: &Args<'_>, downscale_window: SignedDuration) -> Normalized {
    let stabilized = args
        .recommendations
        .iter()
        .filter(|r| r.at >= args.now - downscale_window)
        .map(|r| r.replicas)
        .fold(args.desired, i32::max);
    let scale_up_limit = (2 * args.current).max(4);
    let (max_allowed, reason, message) = match args.max > scale_up_limit {
        true => (scale_up_limit, "ScaleUpLimit", SCALE_UP_LIMIT),
        false => (args.max, "TooManyReplicas", TOO_MANY),
    };
    let n = |replicas, reason, message| Normalized {
        replicas,
        stabilized,
        reason,
        message,
    };
    if stabilized < args.min {
        n(args.min, "TooFewReplicas", TOO_FEW)
    } else if stabilized > max_allowed {
        n(max_allowed, reason, message)
    } else {
        n(stabilized, "DesiredWithinRange", WITHIN_RANGE)
    }
}

const SCALE_UP_LIMIT: &str =
    "the desired replica count is increasing faster than the maximum scale rate";
const SCALE_DOWN_LIMIT: &str =
    "the desired replica count is decreasing faster than the maximum scale rate";
const TOO_MANY: &str = "the desired replica count is more than the maximum replica count";
const TOO_FEW: &str = "the desired replica count is less than the minimum replica count";
const WITHIN_RANGE: &str = "the desired count is within the acceptable range";

/// The current count moved only as far as every recommendation in the windows agrees.
fn stabilize(args: &Args<'_>, up: &Rules, down: &Rules) -> i32 {
    let (mut up_rec, mut down_rec) = (args.desired, args.desired);
    for rec in args.recommendations {
        if rec.at > args.now - up.stabilization {
            up_rec = up_rec.min(rec.replicas);
        }
        if rec.at > args.now - down.stabilization {
            down_rec = down_rec.max(rec.replicas);
        }
    }
    args.current.max(up_rec).min(down_rec)
}

fn limit_rate(args: &Args<'_>, desired: i32, up: &Rules, down: &Rules) -> Normalized {
    let n = |replicas, reason, message| Normalized {
        replicas,
        stabilized: desired,
        reason,
        message,
    };
    if desired > args.current {
        let limit =
            scale_up_limit(args.current, args.scale_up_events, up, args.now).max(args.current);
        let (allowed, reason, message) = match args.max > limit {
            true => (limit, "ScaleUpLimit", SCALE_UP_LIMIT),
            false => (args.max, "TooManyReplicas", TOO_MANY),
        };
        if desired > allowed {
            return n(allowed, reason, message);
        }
    } else if desired < args.current {
        let limit = scale_down_limit(args.current, args.scale_down_events, down, args.now)
            .min(args.current);
        let (allowed, reason, message) = match args.min < limit {
            true => (limit, "ScaleDownLimit", SCALE_DOWN_LIMIT),
            false => (args.min, "TooFewReplicas", TOO_FEW),
        };
        if desired < allowed {
            return n(allowed, reason, message);
        }
    }
    n(desired, "DesiredWithinRange", WITHIN_RANGE)
}

/// Replicas changed by the events within `period` before `now`.
fn changed_within(events: &[Timed], period: SignedDuration, now: Timestamp) -> i32 {
    events
        .iter()
        .filter(|e| e.at > now - period)
        .map(|e| e.replicas)
        .sum()
}

fn scale_up_limit(current: i32, events: &[Timed], rules: &Rules, now: Timestamp) -> i32 {
    if rules.select == "Disabled" {
        return current;
    }
    let proposals = rules.policies.iter().map(|(kind, value, period)| {
        let start = current - changed_within(events, *period, now);
        match kind {
            PolicyKind::Pods => start + value,
            PolicyKind::Percent => {
                (f64::from(start) * (1.0 + f64::from(*value) / 100.0)).ceil() as i32
            }
        }
    });
    match rules.select.as_str() {
        "Min" => proposals.min().unwrap_or(i32::MAX),
        _ => proposals.max().unwrap_or(i32::MIN),
    }
}

fn scale_down_limit(current: i32, events: &[Timed], rules: &Rules, now: Timestamp) -> i32 {
    if rules.select == "Disabled" {
        return current;
    }
    let proposals = rules.policies.iter().map(|(kind, value, period)| {
        let start = current + changed_within(events, *period, now);
        match kind {
            PolicyKind::Pods => start - value,
            PolicyKind::Percent => (f64::from(start) * (1.0 - f64::from(*value) / 100.0)) as i32,
        }
    });
    match rules.select.as_str() {
        "Min" => proposals.max().unwrap_or(i32::MIN),
        _ => proposals.min().unwrap_or(i32::MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs_ago: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 - secs_ago).expect("time")
    }

    fn args<'a>(
        current: i32,
        desired: i32,
        recs: &'a [Timed],
        up: &'a [Timed],
        down: &'a [Timed],
    ) -> Args<'a> {
        Args {
            current,
            desired,
            min: 1,
            max: 100,
            recommendations: recs,
            scale_up_events: up,
            scale_down_events: down,
            now: at(0),
        }
    }

    #[test]
    fn defaults_scale_up_by_the_larger_of_four_pods_and_double() {
        let (up, down) = rules(None, SignedDuration::from_secs(300));
        let r = normalize(&args(3, 20, &[], &[], &[]), &up, &down);
        assert_eq!((r.replicas, r.reason), (7, "ScaleUpLimit"), "max(3+4, 3*2)");
        let r = normalize(&args(10, 50, &[], &[], &[]), &up, &down);
        assert_eq!(r.replicas, 20, "max(10+4, 10*2)");
        let within = normalize(&args(10, 12, &[], &[], &[]), &up, &down);
        assert_eq!((within.replicas, within.reason), (12, "DesiredWithinRange"));
    }

    #[test]
    fn scale_down_waits_out_the_stabilization_window() {
        let (up, down) = rules(None, SignedDuration::from_secs(300));
        let recent = [
            Timed {
                at: at(200),
                replicas: 8,
            },
            Timed {
                at: at(400),
                replicas: 10,
            },
        ];
        let r = normalize(&args(8, 2, &recent, &[], &[]), &up, &down);
        assert_eq!(
            r.replicas, 8,
            "8 was recommended 200 s ago, inside the 300 s window"
        );
        let old = [Timed {
            at: at(400),
            replicas: 10,
        }];
        let r = normalize(&args(8, 2, &old, &[], &[]), &up, &down);
        assert_eq!(r.replicas, 2, "100 % per 15 s allows any scale-down");
    }

    #[test]
    fn events_in_the_period_use_up_the_rate_and_bounds_apply() {
        let (up, down) = rules(None, SignedDuration::ZERO);
        let added = [Timed {
            at: at(5),
            replicas: 4,
        }];
        let r = normalize(&args(8, 30, &[], &added, &[]), &up, &down);
        assert_eq!(
            r.replicas, 8,
            "the 4 added 5 s ago count: the period began at 4, so 8 at most"
        );
        let mut a = args(3, 200, &[], &[], &[]);
        a.max = 5;
        let r = normalize(&a, &up, &down);
        assert_eq!((r.replicas, r.reason), (5, "TooManyReplicas"));
        let mut a = args(3, 0, &[], &[], &[]);
        a.min = 2;
        assert_eq!(normalize(&a, &up, &down).reason, "TooFewReplicas");
    }

    #[test]
    fn without_behavior_upstream_doubles_at_most_and_waits_the_window() {
        let window = SignedDuration::from_secs(300);
        let r = normalize_legacy(&args(1, 10, &[], &[], &[]), window);
        assert_eq!((r.replicas, r.reason), (4, "ScaleUpLimit"), "max(2 × 1, 4)");
        let r = normalize_legacy(&args(5, 30, &[], &[], &[]), window);
        assert_eq!(r.replicas, 10);
        let recent = [Timed {
            at: at(100),
            replicas: 6,
        }];
        let r = normalize_legacy(&args(6, 2, &recent, &[], &[]), window);
        assert_eq!((r.replicas, r.stabilized), (6, 6), "6 is inside the window");
        let r = normalize_legacy(
            &args(6, 2, &recent, &[], &[]),
            SignedDuration::from_secs(60),
        );
        assert_eq!((r.replicas, r.reason), (2, "DesiredWithinRange"));
    }
}
