//! `--leader-elect` for the scheduler and the controllers: each runs only while this
//! process holds its Lease in `kube-system` (`kube-scheduler`, `kube-controller-manager`,
//! as upstream's), on a runtime of its own that is shut down when leadership is lost.
//! Unlike upstream's binaries, a replica that loses leadership keeps serving the API and
//! campaigns again instead of exiting.

use std::future::Future;
use std::path::Path;

use anyhow::Context;
use cairn_leaderelection::{campaign, Elector, KubeLeaseLock, LeaderRuntime, LeaseLock, Timing};

/// Upstream's `--leader-elect*` flags of kube-scheduler and kube-controller-manager.
#[derive(clap::Args, Clone)]
pub struct LeaderElectArgs {
    /// Campaign for a Lease before running the scheduler and the controllers, so that of
    /// several replicas only one acts.
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    /// How long candidates wait after the last renewal they saw before taking the lease.
    #[arg(long, default_value = "15s")]
    pub leader_elect_lease_duration: String,
    /// How long the leader retries renewing before it stops acting.
    #[arg(long, default_value = "10s")]
    pub leader_elect_renew_deadline: String,
    /// How often candidates try to take, and the leader to renew, the lease.
    #[arg(long, default_value = "2s")]
    pub leader_elect_retry_period: String,
}

impl LeaderElectArgs {
    /// The election's timing; `None` when `--leader-elect=false`.
    pub fn timing(&self) -> anyhow::Result<Option<Timing>> {
        if !self.leader_elect {
            return Ok(None);
        }
        let flag = |name: &str, value: &str| crate::go_duration(name, value);
        let timing = Timing {
            lease_duration: flag(
                "leader-elect-lease-duration",
                &self.leader_elect_lease_duration,
            )?,
            renew_deadline: flag(
                "leader-elect-renew-deadline",
                &self.leader_elect_renew_deadline,
            )?,
            retry_period: flag("leader-elect-retry-period", &self.leader_elect_retry_period)?,
        };
        timing.validate().context("--leader-elect-*")?;
        Ok(Some(timing))
    }
}

/// Resolves on SIGINT or SIGTERM (systemd's stop), for every component that awaits it.
pub fn shutdown_signal() -> futures::future::Shared<futures::future::BoxFuture<'static, ()>> {
    use futures::FutureExt;
    async {
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut term) => {
                    term.recv().await;
                }
                Err(_) => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            () = term => {}
        }
    }
    .boxed()
    .shared()
}

/// A replica's identity as a candidate: the host's name and an id kept in its data
/// directory, so that a replica restarted after a crash takes its own unexpired lease back
/// at once instead of waiting out the lease duration (upstream's identity is fresh on
/// every start). Two processes never share a data directory, so never an identity.
pub fn identity_in(data_dir: &Path) -> anyhow::Result<String> {
    let path = data_dir.join("leader-identity");
    let id = match std::fs::read_to_string(&path) {
        Ok(id) if !id.trim().is_empty() => id.trim().to_string(),
        Ok(_) | Err(_) => {
            let id = uuid::Uuid::new_v4().to_string();
            std::fs::write(&path, format!("{id}\n")).with_context(|| {
                format!("writing the leader election identity {}", path.display())
            })?;
            id
        }
    };
    Ok(format!("{}_{id}", cairn_leaderelection::host_name()))
}

/// Runs what `work` makes while `identity` leads `lease` (with an election), or at once
/// (without). Ends with the work's error, or `Ok` once `shutdown` resolves (the lease
/// released first).
pub async fn run_elected<F, Fut>(
    (timing, identity): (Option<Timing>, &str),
    lease: &'static str,
    client: kube::Client,
    work: F,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()>
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: Future<Output = anyhow::Result<()>> + 'static,
{
    let Some(timing) = timing else {
        return tokio::select! {
            r = async move { work().await } => r,
            () = shutdown => Ok(()),
        };
    };
    let lock = KubeLeaseLock::new(client.clone(), "kube-system", lease);
    let events = lock.reference().map(|l| {
        cairn_leaderelection::events::LeaderEvents::new(
            cairn_events::Recorder::start(client, lease),
            l,
        )
    });
    tracing::info!(lease = %lock.describe(), %identity, "campaigning for the lease");
    let elector = Elector::new(lock, identity, timing);
    let start = move || {
        let work = work.clone();
        LeaderRuntime::spawn(lease, move || async move {
            work().await.map_err(|e| format!("{e:#}"))
        })
    };
    campaign(elector, lease, events, start, shutdown)
        .await
        .map_err(|e| anyhow::anyhow!("{lease}: {e}"))
}

/// `run_elected` for work that may be off (`None`): then it only waits for `shutdown`.
pub async fn run_elected_if<F, Fut>(
    work: Option<F>,
    election: (Option<Timing>, &str),
    lease: &'static str,
    client: kube::Client,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()>
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: Future<Output = anyhow::Result<()>> + 'static,
{
    match work {
        Some(work) => run_elected(election, lease, client, work, shutdown).await,
        None => {
            shutdown.await;
            Ok(())
        }
    }
}
