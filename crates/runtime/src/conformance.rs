//! The runtime contract, as one suite every [`Runtime`] must pass — the in-memory
//! [`crate::fake::FakeRuntime`] and containerd alike, as the store's backends share theirs.
//! `runtime_conformance_tests!(factory)` expands to one `#[tokio::test]` per case, where
//! `factory` is `|| async { (Fixture, guard) }` and `guard` lives as long as the test.

// A test suite: a broken contract fails by assertion.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use crate::{ContainerConfig, ContainerState, PodSandboxConfig, Runtime, SandboxState};

/// What a case needs: the runtime and two containers it can run.
pub struct Fixture {
    pub runtime: Arc<dyn Runtime>,
    /// Runs until stopped.
    pub sleeper: ContainerConfig,
    /// Exits by itself, soon, with code 3.
    pub exits_3: ContainerConfig,
    /// An existing cgroup for the sandboxes.
    pub cgroup_parent: String,
}

const TIMEOUT: Duration = Duration::from_secs(30);

#[macro_export]
macro_rules! runtime_conformance_tests {
    ($factory:expr) => {
        $crate::runtime_conformance_tests!(@cases $factory;
            sandbox_lifecycle,
            container_lifecycle,
            exit_code_and_event,
            listing_by_pod,
            streaming_exec,
            killed_exec_is_reaped,
        );
    };
    (@cases $factory:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let (fixture, _guard) = ($factory)().await;
                $crate::conformance::$case(fixture).await;
            }
        )*
    };
}

fn sandbox_config(f: &Fixture, uid: &str) -> PodSandboxConfig {
    PodSandboxConfig {
        uid: uid.into(),
        namespace: "default".into(),
        name: format!("conformance-{uid}"),
        attempt: 0,
        hostname: "conformance".into(),
        host_network: true,
        cgroup_parent: f.cgroup_parent.clone(),
    }
}

pub async fn sandbox_lifecycle(f: Fixture) {
    let rt = &f.runtime;
    let sb = rt
        .run_pod_sandbox(&sandbox_config(&f, "pod-a"))
        .await
        .unwrap();
    assert_eq!(sb.state, SandboxState::Ready);
    let mine = rt.list_pod_sandboxes_of("pod-a").await.unwrap();
    assert_eq!(
        mine.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        [sb.id.as_str()]
    );
    rt.stop_pod_sandbox(&sb.id).await.unwrap();
    let stopped = rt.list_pod_sandboxes_of("pod-a").await.unwrap();
    assert_eq!(stopped[0].state, SandboxState::NotReady);
    rt.remove_pod_sandbox(&sb.id).await.unwrap();
    assert!(rt.list_pod_sandboxes_of("pod-a").await.unwrap().is_empty());
}

pub async fn container_lifecycle(f: Fixture) {
    let rt = &f.runtime;
    let sb = rt
        .run_pod_sandbox(&sandbox_config(&f, "pod-b"))
        .await
        .unwrap();
    let id = rt.create_container(&sb, &f.sleeper).await.unwrap();
    assert_eq!(
        rt.container_status(&id).await.unwrap().state,
        ContainerState::Created
    );
    rt.start_container(&id).await.unwrap();
    let running = rt.container_status(&id).await.unwrap();
    assert_eq!(running.state, ContainerState::Running);
    assert!(running.started_at.is_some());
    assert_eq!(
        (running.name.as_str(), running.pod_uid.as_str()),
        (f.sleeper.name.as_str(), "pod-b")
    );
    let exec = rt
        .exec_sync(&id, &["true".to_string()], Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(exec.exit_code, 0);
    rt.stop_container(&id, Duration::from_secs(2))
        .await
        .unwrap();
    let stopped = rt.container_status(&id).await.unwrap();
    assert_eq!(stopped.state, ContainerState::Exited);
    assert!(stopped.finished_at.is_some());
    rt.remove_container(&id).await.unwrap();
    assert!(rt.container_status(&id).await.unwrap_err().is_not_found());
    rt.stop_pod_sandbox(&sb.id).await.unwrap();
    rt.remove_pod_sandbox(&sb.id).await.unwrap();
}

pub async fn exit_code_and_event(f: Fixture) {
    let rt = &f.runtime;
    let mut exits = rt.subscribe_exits();
    let sb = rt
        .run_pod_sandbox(&sandbox_config(&f, "pod-c"))
        .await
        .unwrap();
    let id = rt.create_container(&sb, &f.exits_3).await.unwrap();
    rt.start_container(&id).await.unwrap();
    let exit = tokio::time::timeout(TIMEOUT, async {
        loop {
            let e = exits.recv().await.unwrap();
            if e.id == id {
                return e;
            }
        }
    })
    .await
    .expect("an exit event");
    assert_eq!(exit.pod_uid, "pod-c");
    let st = rt.container_status(&id).await.unwrap();
    assert_eq!((st.state, st.exit_code), (ContainerState::Exited, Some(3)));
    assert_eq!(st.reason.as_deref(), Some("Error"));
    rt.remove_container(&id).await.unwrap();
    rt.stop_pod_sandbox(&sb.id).await.unwrap();
    rt.remove_pod_sandbox(&sb.id).await.unwrap();
}

pub async fn listing_by_pod(f: Fixture) {
    let rt = &f.runtime;
    let a = rt
        .run_pod_sandbox(&sandbox_config(&f, "pod-d"))
        .await
        .unwrap();
    let b = rt
        .run_pod_sandbox(&sandbox_config(&f, "pod-e"))
        .await
        .unwrap();
    let in_a = rt.create_container(&a, &f.sleeper).await.unwrap();
    let in_b = rt.create_container(&b, &f.sleeper).await.unwrap();
    let of_a: Vec<String> = rt
        .list_containers_of("pod-d")
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(of_a, std::slice::from_ref(&in_a));
    let all: Vec<String> = rt
        .list_containers()
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert!(all.contains(&in_a) && all.contains(&in_b));
    for (id, sb) in [(in_a, a), (in_b, b)] {
        rt.remove_container(&id).await.unwrap();
        rt.stop_pod_sandbox(&sb.id).await.unwrap();
        rt.remove_pod_sandbox(&sb.id).await.unwrap();
    }
}

async fn running_sleeper(f: &Fixture, uid: &str) -> (crate::PodSandbox, String) {
    let rt = &f.runtime;
    let sb = rt.run_pod_sandbox(&sandbox_config(f, uid)).await.unwrap();
    let id = rt.create_container(&sb, &f.sleeper).await.unwrap();
    rt.start_container(&id).await.unwrap();
    (sb, id)
}

async fn remove(f: &Fixture, sb: crate::PodSandbox, id: String) {
    let rt = &f.runtime;
    rt.stop_container(&id, Duration::from_secs(2))
        .await
        .unwrap();
    rt.remove_container(&id).await.unwrap();
    rt.stop_pod_sandbox(&sb.id).await.unwrap();
    rt.remove_pod_sandbox(&sb.id).await.unwrap();
}

fn cat() -> crate::ExecStreamRequest {
    crate::ExecStreamRequest {
        command: vec!["cat".into()],
        stdin: true,
        stdout: true,
        stderr: true,
        tty: false,
    }
}

/// `cat` through the streams: stdin's EOF ends it with code 0 and all its output.
pub async fn streaming_exec(f: Fixture) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (sb, id) = running_sleeper(&f, "pod-f").await;
    let rt = &f.runtime;
    let mut s = rt.exec_stream(&id, &cat()).await.unwrap();
    let mut stdin = s.stdin.take().unwrap();
    stdin.write_all(b"hello through a fifo\n").await.unwrap();
    stdin.shutdown().await.unwrap();
    drop(stdin);
    let mut out = String::new();
    let mut stdout = s.stdout.take().unwrap();
    tokio::time::timeout(TIMEOUT, stdout.read_to_string(&mut out))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out, "hello through a fifo\n");
    let code = tokio::time::timeout(TIMEOUT, s.exit)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(code, 0);
    remove(&f, sb, id).await;
}

/// A process whose client left is killed (137) and reaped.
pub async fn killed_exec_is_reaped(f: Fixture) {
    let (sb, id) = running_sleeper(&f, "pod-g").await;
    let rt = &f.runtime;
    let s = rt.exec_stream(&id, &cat()).await.unwrap();
    rt.kill_exec(&id, &s.exec_id).await.unwrap();
    let code = tokio::time::timeout(TIMEOUT, s.exit)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(code, 137);
    assert!(
        rt.kill_exec(&id, &s.exec_id).await.is_err(),
        "the process is gone from the runtime"
    );
    remove(&f, sb, id).await;
}

#[cfg(test)]
mod fake_conformance {
    use std::sync::Arc;
    use std::time::Duration;

    use crate::conformance::Fixture;
    use crate::fake::{FakeRuntime, Script};
    use crate::ContainerConfig;

    async fn fake() -> (Fixture, ()) {
        let rt = FakeRuntime::new();
        rt.script(
            "exits",
            Script {
                exits_after: Some((Duration::from_millis(10), 3)),
                ..Default::default()
            },
        );
        let named = |name: &str| ContainerConfig {
            name: name.into(),
            ..Default::default()
        };
        let fixture = Fixture {
            runtime: Arc::new(rt),
            sleeper: named("sleeper"),
            exits_3: named("exits"),
            cgroup_parent: "/fake".into(),
        };
        (fixture, ())
    }

    crate::runtime_conformance_tests!(fake);
}
