//! `/healthz`, `/livez` and `/readyz` with upstream's named checks and wire format.
//!
//! `/readyz` and `/healthz` include the `etcd` check: a read of the store's current revision
//! within 2 s (upstream's `--etcd-healthcheck-timeout`), linearizable on etcd, so a replica
//! whose etcd member is down or without quorum leaves a load balancer's rotation. As k3s
//! on kine does, the check keeps upstream's name on the embedded store too. `/livez` checks
//! only that the server answers: restarting a replica cannot bring its store back.

use std::time::Duration;

use tracing::warn;

use super::*;

/// How long the store may take to answer the `etcd` check.
const STORE_CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// Which endpoint: `livez` has no store check.
#[derive(Clone, Copy, PartialEq)]
enum Endpoint {
    Healthz,
    Livez,
    Readyz,
}

impl Endpoint {
    fn name(self) -> &'static str {
        match self {
            Endpoint::Healthz => "healthz",
            Endpoint::Livez => "livez",
            Endpoint::Readyz => "readyz",
        }
    }

    fn checks(self) -> &'static [&'static str] {
        match self {
            Endpoint::Livez => &["ping"],
            Endpoint::Healthz | Endpoint::Readyz => &["ping", "etcd"],
        }
    }
}

/// The answer for a health path (`None`: `path` is not one).
pub(super) async fn health(state: &AppState, path: &str, query: Option<&str>) -> Option<Response> {
    let (endpoint, only) = parse(path)?;
    let checks: Vec<&str> = match only {
        Some(one) if endpoint.checks().contains(&one) => vec![one],
        Some(_) => return None,
        None => endpoint.checks().to_vec(),
    };
    let params = Query::parse(query);
    let excluded: Vec<&str> = params.all("exclude").collect();
    let verbose = params.get("verbose").is_some();
    let mut results = Vec::new();
    for check in checks {
        if excluded.contains(&check) {
            results.push((check, Outcome::Excluded));
        } else {
            results.push((check, run(state, check).await));
        }
    }
    Some(render(endpoint, only.is_some(), verbose, &results))
}

fn parse(path: &str) -> Option<(Endpoint, Option<&str>)> {
    let rest = path.strip_prefix('/')?;
    let (head, check) = match rest.split_once('/') {
        Some((head, check)) => (head, Some(check)),
        None => (rest, None),
    };
    let endpoint = match head {
        "healthz" => Endpoint::Healthz,
        "livez" => Endpoint::Livez,
        "readyz" => Endpoint::Readyz,
        _ => return None,
    };
    Some((endpoint, check))
}

#[derive(Debug, PartialEq)]
enum Outcome {
    Ok,
    Failed,
    Excluded,
}

async fn run(state: &AppState, check: &str) -> Outcome {
    if check != "etcd" {
        return Outcome::Ok;
    }
    let store = state.cache.backend();
    match tokio::time::timeout(STORE_CHECK_TIMEOUT, store.current_revision()).await {
        Ok(Ok(_)) => Outcome::Ok,
        Ok(Err(e)) => {
            warn!(error = %e, "health check: the store did not answer");
            Outcome::Failed
        }
        Err(_) => {
            warn!("health check: the store did not answer within 2s");
            Outcome::Failed
        }
    }
}

/// Upstream's format: `ok` alone, or with `verbose` or on failure one line per check and
/// a verdict; a single check's path answers `ok` or `internal server error`.
fn render(
    endpoint: Endpoint,
    single: bool,
    verbose: bool,
    results: &[(&str, Outcome)],
) -> Response {
    let failed = results.iter().any(|(_, o)| *o == Outcome::Failed);
    let code = if failed {
        StatusCode::INTERNAL_SERVER_ERROR
    } else {
        StatusCode::OK
    };
    let body = if single {
        if failed {
            "internal server error: reason withheld\n".to_string()
        } else {
            "ok".to_string()
        }
    } else if failed || verbose {
        let mut body = String::new();
        for (name, outcome) in results {
            body.push_str(&match outcome {
                Outcome::Ok => format!("[+]{name} ok\n"),
                Outcome::Failed => format!("[-]{name} failed: reason withheld\n"),
                Outcome::Excluded => format!("[+]{name} excluded: ok\n"),
            });
        }
        let verdict = if failed { "failed" } else { "passed" };
        body.push_str(&format!("{} check {verdict}\n", endpoint.name()));
        body
    } else {
        "ok".to_string()
    };
    (
        code,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_an_endpoint_and_maybe_one_check() {
        assert!(matches!(parse("/readyz"), Some((Endpoint::Readyz, None))));
        assert!(matches!(
            parse("/livez/ping"),
            Some((Endpoint::Livez, Some("ping")))
        ));
        assert!(matches!(
            parse("/healthz/etcd"),
            Some((Endpoint::Healthz, Some("etcd")))
        ));
        assert!(parse("/version").is_none());
        assert!(!Endpoint::Livez.checks().contains(&"etcd"));
    }

    async fn body_of(resp: Response) -> (u16, String) {
        let code = resp.status().as_u16();
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap_or_default();
        (code, String::from_utf8_lossy(&bytes).into_owned())
    }

    #[tokio::test]
    async fn a_failed_check_is_a_500_listing_every_check() {
        let results = [("ping", Outcome::Ok), ("etcd", Outcome::Failed)];
        let (code, body) = body_of(render(Endpoint::Readyz, false, false, &results)).await;
        assert_eq!(code, 500);
        assert_eq!(
            body,
            "[+]ping ok\n[-]etcd failed: reason withheld\nreadyz check failed\n"
        );
        let results = [("ping", Outcome::Ok), ("etcd", Outcome::Excluded)];
        let (code, body) = body_of(render(Endpoint::Readyz, false, false, &results)).await;
        assert_eq!((code, body.as_str()), (200, "ok"));
        let (_, body) = body_of(render(Endpoint::Readyz, false, true, &results)).await;
        assert_eq!(
            body,
            "[+]ping ok\n[+]etcd excluded: ok\nreadyz check passed\n"
        );
    }
}
