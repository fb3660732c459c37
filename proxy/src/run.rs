//! The watch and sync loop: Services and EndpointSlices in reflector stores; a change
//! wakes the loop, which waits out `--min-sync-period` since the last sync, computes the
//! desired state and has the backend apply the difference; every `--sync-period` the sync
//! is full, repairing drift. `/healthz` and `/livez` answer 200 while syncs succeed and
//! 503 once none has for two sync periods.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_serviceproxy::desired_state;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kube::{Api, Client};
use parking_lot::Mutex;
use tokio::sync::Notify;
use tracing::{error, info, info_span, warn};

use crate::backend::ProxyBackend;

#[derive(Debug, Clone)]
pub struct ProxyConfig {
    pub node_name: String,
    pub min_sync_period: Duration,
    pub sync_period: Duration,
    pub healthz: Option<SocketAddr>,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("binding the health server on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// When the last sync succeeded, for the health endpoints.
#[derive(Default)]
struct Health {
    last_success: Mutex<Option<Instant>>,
}

fn watch<K>(api: Api<K>, changed: Arc<Notify>) -> reflector::Store<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    // Stored without managedFields and annotations, which the proxy does not read (kubectl's
    // last-applied copy alone can double a Service).
    let events = watcher::watcher(api, watcher::Config::default()).modify(|o| {
        o.meta_mut().managed_fields = None;
        o.meta_mut().annotations = None;
    });
    let stream = reflector::reflector(writer, events)
        .default_backoff()
        .touched_objects();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(ev) = stream.next().await {
            if let Err(e) = ev {
                warn!(error = %e, "watch failed; re-listing");
            }
            changed.notify_one();
        }
    });
    store
}

async fn serve_health(
    addr: SocketAddr,
    health: Arc<Health>,
    window: Duration,
) -> Result<(), RunError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| RunError::Bind { addr, source })?;
    let answer = move || {
        let health = health.clone();
        async move {
            let fresh = health
                .last_success
                .lock()
                .is_some_and(|t| t.elapsed() < window);
            if fresh {
                (axum::http::StatusCode::OK, "ok")
            } else {
                (
                    axum::http::StatusCode::SERVICE_UNAVAILABLE,
                    "no successful sync recently",
                )
            }
        }
    };
    let app = axum::Router::new()
        .route("/healthz", axum::routing::get(answer.clone()))
        .route("/livez", axum::routing::get(answer));
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            error!(error = %e, "health server stopped");
        }
    });
    Ok(())
}

/// Runs until the process stops.
pub async fn run(
    client: Client,
    config: ProxyConfig,
    mut backend: Box<dyn ProxyBackend>,
) -> Result<(), RunError> {
    let changed = Arc::new(Notify::new());
    let services = watch(Api::<Service>::all(client.clone()), changed.clone());
    let slices = watch(Api::<EndpointSlice>::all(client), changed.clone());
    let health = Arc::new(Health::default());
    if let Some(addr) = config.healthz {
        serve_health(addr, health.clone(), config.sync_period * 2).await?;
    }
    // Wait for both lists, so the first sync is not made from half a cluster.
    let _ = services.wait_until_ready().await;
    let _ = slices.wait_until_ready().await;
    let mut last_full: Option<Instant> = None;
    let mut last_warnings = BTreeSet::new();
    let mut failures = 0u32;
    let mut health_checks = crate::health_check::HealthChecks::default();
    loop {
        let full = last_full.is_none_or(|t| t.elapsed() >= config.sync_period);
        let started = Instant::now();
        let (svcs, eps) = (services.state(), slices.state());
        let (desired, mut warnings) = desired_state(
            svcs.iter().map(|s| s.as_ref()),
            eps.iter().map(|s| s.as_ref()),
            &config.node_name,
        );
        drop((svcs, eps));
        let span = info_span!("sync", full, services = desired.len());
        let result = span.in_scope(|| tokio::task::block_in_place(|| backend.sync(&desired, full)));
        match result {
            Ok(report) => {
                *health.last_success.lock() = Some(Instant::now());
                health_checks.sync(&desired).await;
                if report.full {
                    last_full = Some(started);
                }
                if report.written > 0 {
                    info!(
                        full = report.full,
                        written = report.written,
                        took_ms = started.elapsed().as_millis() as u64,
                        "synced"
                    );
                }
                warnings.extend(report.warnings);
            }
            Err(e) => error!(error = %e, "sync failed; retrying with a full sync"),
        }
        let now: BTreeSet<String> = warnings.into_iter().collect();
        for w in now.difference(&last_warnings) {
            warn!("{w}");
        }
        last_warnings = now;
        let wait = if result_failed(&health, started) {
            // Retried as a full sync, backing off 1 s doubling to the sync period.
            last_full = None;
            failures += 1;
            Duration::from_secs(1u64 << failures.min(16)).min(config.sync_period)
        } else {
            failures = 0;
            last_full.map_or(Duration::ZERO, |t| {
                config.sync_period.saturating_sub(t.elapsed())
            })
        };
        tokio::select! {
            _ = changed.notified() => {}
            _ = tokio::time::sleep(wait) => {}
        }
        // Rate limit: at most one sync per min period, changes batched meanwhile.
        let since = started.elapsed();
        if since < config.min_sync_period {
            tokio::time::sleep(config.min_sync_period - since).await;
        }
    }
}

/// Whether the sync that started at `started` failed (no success recorded since).
fn result_failed(health: &Health, started: Instant) -> bool {
    health.last_success.lock().is_none_or(|t| t < started)
}
