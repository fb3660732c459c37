//! Upstream's request limits: at most `--max-requests-inflight` reads and
//! `--max-mutating-requests-inflight` writes at once (the rest get 429 with
//! `Retry-After: 1`), and a `--request-timeout` for each (504). Long-running requests —
//! watches, exec/attach/port-forward, proxies, followed logs — count against neither,
//! as kube-apiserver's `LongRunningFunc` exempts them.

use std::future::Future;
use std::time::Duration;

use cairn_api::status::Status;
use tokio::sync::Semaphore;

use crate::authz::RequestInfo;
use crate::handlers::status_response;

#[derive(Debug, Clone, Copy)]
pub struct RequestLimits {
    /// 0: no limit.
    pub max_inflight: usize,
    /// 0: no limit.
    pub max_mutating_inflight: usize,
    pub timeout: Duration,
}

impl Default for RequestLimits {
    /// kube-apiserver's defaults.
    fn default() -> Self {
        RequestLimits {
            max_inflight: 400,
            max_mutating_inflight: 200,
            timeout: Duration::from_secs(60),
        }
    }
}

pub(crate) struct Limiter {
    reads: Option<Semaphore>,
    writes: Option<Semaphore>,
    timeout: Duration,
}

const LONG_RUNNING_SUBRESOURCES: &[&str] = &["exec", "attach", "portforward", "proxy", "log"];

fn long_running(info: &RequestInfo, query: Option<&str>) -> bool {
    if !info.resource_request {
        return false;
    }
    info.verb == "watch"
        || LONG_RUNNING_SUBRESOURCES.contains(&info.subresource.as_str())
        || info.resource == "proxy"
        // `kubectl logs -f` holds its request open for as long as it follows.
        || query.is_some_and(|q| q.split('&').any(|kv| kv == "follow=true" || kv == "watch=1"))
}

fn mutating(verb: &str) -> bool {
    !matches!(verb, "get" | "list" | "watch")
}

impl Limiter {
    pub fn new(limits: RequestLimits) -> Limiter {
        let semaphore = |n: usize| (n > 0).then(|| Semaphore::new(n));
        Limiter {
            reads: semaphore(limits.max_inflight),
            writes: semaphore(limits.max_mutating_inflight),
            timeout: limits.timeout,
        }
    }

    /// Runs `handler` within the limits that apply to `info`; members of
    /// `system:masters` are not counted, as upstream's max-in-flight filter exempts them.
    pub async fn run<F>(
        &self,
        info: &RequestInfo,
        query: Option<&str>,
        privileged: bool,
        handler: F,
    ) -> axum::response::Response
    where
        F: Future<Output = axum::response::Response>,
    {
        if privileged || long_running(info, query) {
            return handler.await;
        }
        let semaphore = if mutating(&info.verb) {
            &self.writes
        } else {
            &self.reads
        };
        let _permit = match semaphore.as_ref().map(Semaphore::try_acquire) {
            Some(Err(_)) => return status_response(&too_many_requests()),
            Some(Ok(p)) => Some(p),
            None => None,
        };
        match tokio::time::timeout(self.timeout, handler).await {
            Ok(response) => response,
            Err(_) => status_response(&Status::new(
                504,
                "Timeout",
                "Timeout: request did not complete within requested timeout - context deadline exceeded",
            )),
        }
    }
}

/// Upstream's 429.
fn too_many_requests() -> Status {
    let mut s = Status::new(
        429,
        "TooManyRequests",
        "Too many requests, please try again later.",
    );
    s.details.retry_after_seconds = Some(1);
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    #[test]
    fn watches_streams_and_proxies_are_long_running() {
        let i =
            |m: Method, p: &str, q: Option<&str>| (RequestInfo::new(&m, p, q), q.map(String::from));
        for (info, q) in [
            i(Method::GET, "/api/v1/pods", Some("watch=true")),
            i(Method::POST, "/api/v1/namespaces/a/pods/p/exec", None),
            i(
                Method::GET,
                "/api/v1/namespaces/a/pods/p/log",
                Some("follow=true"),
            ),
            i(Method::GET, "/api/v1/nodes/n/proxy/stats/summary", None),
        ] {
            assert!(long_running(&info, q.as_deref()), "{info:?}");
        }
        let (info, _) = i(Method::GET, "/api/v1/pods", None);
        assert!(!long_running(&info, None));
        assert!(mutating("create") && !mutating("list"));
    }

    #[tokio::test]
    async fn a_full_house_answers_429_and_a_slow_handler_504() {
        let limiter = Limiter::new(RequestLimits {
            max_inflight: 1,
            max_mutating_inflight: 1,
            timeout: Duration::from_millis(50),
        });
        let info = RequestInfo::new(&Method::GET, "/api/v1/pods", None);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let held = limiter.run(&info, None, false, async {
            let _ = rx.await;
            status_response(&Status::new(200, "", ""))
        });
        let second = async {
            let r = limiter
                .run(&info, None, false, async {
                    status_response(&Status::new(200, "", ""))
                })
                .await;
            assert_eq!(r.status().as_u16(), 429);
            assert_eq!(r.headers()["retry-after"], "1");
            let _ = tx.send(());
        };
        let (first, ()) = tokio::join!(held, second);
        // The held one was released after the 429 or timed out first; either is bounded.
        assert!(matches!(first.status().as_u16(), 200 | 504));
        let slow = limiter
            .run(&info, None, false, std::future::pending())
            .await;
        assert_eq!(slow.status().as_u16(), 504);
    }
}
