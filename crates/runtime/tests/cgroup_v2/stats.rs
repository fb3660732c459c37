//! Issue 29's stats acceptance on pure cgroup v2, read by `cairn-stats` exactly as the
//! agent's housekeeping reads them: a busy loop limited to 500m reads half a core (± 10 %)
//! and is throttled, a container holding 64 MiB reads a working set within 10 % of it,
//! and the pod's eth0 counters grow by what the guest pinged into it (± 5 %).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use cairn_runtime::{ContainerConfig, ContainerdRuntime, PodSandbox, Resources, Runtime};
use cairn_stats::{Collector, PodCgroups};

use super::{CGROUP_ROOT, HELD_BYTES};

/// How long the readings may take to settle under TCG: a guard, not a speed goal.
const SETTLE: Duration = Duration::from_secs(90);

/// Starts the burner and the holder, checks their readings and the pod's traffic; returns
/// their ids for the caller's cleanup.
pub async fn burner_holder_and_traffic(
    runtime: &ContainerdRuntime,
    sandbox: &PodSandbox,
    container: &impl Fn(&str, &[&str], Resources) -> ContainerConfig,
    pod_cgroup: &str,
) -> Result<Vec<String>> {
    let burner = start(
        runtime,
        sandbox,
        container(
            "burner",
            &["sh", "-c", "while :; do :; done"],
            Resources {
                cpu_shares: Some(512),
                cpu_quota: Some(50_000),
                cpu_period: Some(100_000),
                memory_limit: Some(64 << 20),
                oom_score_adj: None,
            },
        ),
    )
    .await?;
    let hold = format!("BEGIN {{ s = sprintf(\"%{HELD_BYTES}s\", \"\"); system(\"sleep 3600\") }}");
    let holder = start(
        runtime,
        sandbox,
        container(
            "holder",
            &["awk", &hold],
            Resources {
                memory_limit: Some(192 << 20),
                ..Default::default()
            },
        ),
    )
    .await?;
    let pod = PodCgroups {
        uid: "cgv2-pod".into(),
        cgroup: pod_cgroup.to_owned(),
        containers: vec![
            cgroup_of(runtime, &burner).await?,
            cgroup_of(runtime, &holder).await?,
        ],
    };
    let mut collector = Collector::new(
        Path::new(CGROUP_ROOT),
        Path::new("/proc"),
        Duration::from_secs(1),
    );
    burner_at_half_a_core_and_throttled(&mut collector, &pod)?;
    holder_working_set(&mut collector, &pod)?;
    let ip = sandbox
        .ip
        .clone()
        .context("the bridged sandbox has no IP")?;
    traffic_is_counted(&mut collector, &pod, &ip)?;
    Ok(vec![burner, holder])
}

async fn start(
    runtime: &ContainerdRuntime,
    sandbox: &PodSandbox,
    config: ContainerConfig,
) -> Result<String> {
    let name = config.name.clone();
    let id = runtime
        .create_container(sandbox, &config)
        .await
        .with_context(|| format!("creating the {name} container"))?;
    runtime
        .start_container(&id)
        .await
        .with_context(|| format!("starting the {name} container"))?;
    Ok(id)
}

async fn cgroup_of(runtime: &ContainerdRuntime, id: &str) -> Result<String> {
    Ok(runtime.container_status(id).await?.cgroup)
}

/// Housekeeping passes a second apart until `done` accepts the collector or `SETTLE`
/// passes; `what` and the last `describe` go into the error.
fn passes_until(
    collector: &mut Collector,
    pod: &PodCgroups,
    what: &str,
    mut done: impl FnMut(&Collector) -> bool,
    describe: impl Fn(&Collector) -> String,
) -> Result<()> {
    let deadline = Instant::now() + SETTLE;
    loop {
        collector.housekeep(std::slice::from_ref(pod));
        if done(collector) {
            println!("{what}: {}", describe(collector));
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{what}: {}", describe(collector));
        }
        // The passes' interval is the measurement (usageNanoCores is a rate over it).
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn burner_at_half_a_core_and_throttled(collector: &mut Collector, pod: &PodCgroups) -> Result<()> {
    let burner = pod.containers[0].clone();
    let throttled = |c: &Collector| {
        c.history()
            .latest(&burner)
            .and_then(|r| r.sample.cpu.throttled_periods)
    };
    let mut first = None;
    passes_until(
        collector,
        pod,
        "the burner at 0.5 core (± 10 %), throttled more in a later pass",
        |c| {
            let cores = c.history().usage_nano_cores(&burner).unwrap_or(0);
            let now = throttled(c);
            let grew = first.is_some_and(|f| now > Some(f));
            first = first.or(now);
            (450_000_000..=550_000_000).contains(&cores) && grew
        },
        |c| {
            let cores = c.history().usage_nano_cores(&burner);
            let cpu = c.history().latest(&burner).map(|r| &r.sample.cpu);
            format!("usageNanoCores {cores:?}, {cpu:?}")
        },
    )
}

fn holder_working_set(collector: &mut Collector, pod: &PodCgroups) -> Result<()> {
    let holder = pod.containers[1].clone();
    let working_set = |c: &Collector| {
        c.history()
            .latest(&holder)
            .and_then(|r| r.sample.memory.working_set_bytes)
    };
    passes_until(
        collector,
        pod,
        "the holder's working set within 10 % of 64 MiB",
        |c| working_set(c).is_some_and(|b| b.abs_diff(HELD_BYTES) <= HELD_BYTES / 10),
        |c| {
            format!(
                "{:?}",
                c.history().latest(&holder).map(|r| &r.sample.memory)
            )
        },
    )
}

/// The pod's eth0 rx and tx bytes in the last pass.
fn eth0(collector: &Collector, pod: &PodCgroups) -> Option<(u64, u64)> {
    let reading = collector.network(&pod.uid)?;
    let eth0 = reading.interfaces.iter().find(|i| i.name == "eth0")?;
    Some((eth0.rx_bytes, eth0.tx_bytes))
}

/// 8 MiB of ICMP echo payload each way (`ping -A`: the next request as soon as the reply
/// is in); IP fragment and Ethernet headers add 2.4 % at MTU 1500.
fn traffic_is_counted(collector: &mut Collector, pod: &PodCgroups, ip: &str) -> Result<()> {
    let (count, size) = (256u64, 32768u64);
    let sent = count * size;
    collector.housekeep(std::slice::from_ref(pod));
    let (rx0, tx0) = eth0(collector, pod).context("no eth0 reading for the pod")?;
    let out = Command::new("ping")
        .args([
            "-q",
            "-A",
            "-c",
            &count.to_string(),
            "-s",
            &size.to_string(),
            ip,
        ])
        .output()
        .context("running ping")?;
    ensure!(
        out.status.success(),
        "ping {ip}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let within = |grown: u64| (sent..=sent + sent / 20).contains(&grown);
    passes_until(
        collector,
        pod,
        "the pod's eth0 grown by 8 MiB each way (± 5 %)",
        |c| {
            eth0(c, pod).is_some_and(|(rx, tx)| {
                within(rx.saturating_sub(rx0)) && within(tx.saturating_sub(tx0))
            })
        },
        |c| format!("before rx {rx0} tx {tx0}, now {:?}", eth0(c, pod)),
    )
}
