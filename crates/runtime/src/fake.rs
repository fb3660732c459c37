//! An in-memory [`Runtime`] for tests of the agent's logic without root: sandboxes and
//! containers that start, exit with a chosen code (or as OOM-killed) after a chosen time,
//! and stop at once or only when the grace period runs out. Time is tokio's, so a test
//! under `tokio::time::pause()` drives back-off and grace periods with a fake clock.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use parking_lot::Mutex;
use tokio::sync::broadcast;

use chrono::{DateTime, Utc};

use crate::clock::{Clock, TokioClock};
use crate::{
    ContainerConfig, ContainerExit, ContainerState, ContainerStatus, ExecResult, ExecStreamRequest,
    ExecStreams, PodSandbox, PodSandboxConfig, Runtime, RuntimeError, RuntimeVersion, SandboxState,
};

/// How a container named `name` behaves in this runtime.
#[derive(Debug, Clone, Default)]
pub struct Script {
    /// Exits by itself this long after starting, with this code.
    pub exits_after: Option<(Duration, i32)>,
    /// Its exit is an OOM kill (reason `OOMKilled`, code 137).
    pub oom: bool,
    /// Ignores SIGTERM: `stop_container` waits out the grace period, then kills it.
    pub hangs_on_stop: bool,
    /// Exit code of every exec in it (probes, hooks).
    pub exec_exit_code: i32,
    /// `start_container` takes this long before the container runs (a start that a
    /// deletion can race).
    pub start_takes: Option<Duration>,
}

#[derive(Default)]
struct State {
    next_id: u64,
    sandboxes: BTreeMap<String, PodSandbox>,
    containers: BTreeMap<String, ContainerStatus>,
    scripts: HashMap<String, Script>,
    /// Exec processes still in the runtime: exit code, and the sender that kills one.
    execs: HashMap<String, (i32, Option<tokio::sync::oneshot::Sender<()>>)>,
    /// Every call, in order (`start_container <id>`) and when, for tests of ordering.
    calls: Vec<(DateTime<Utc>, String)>,
    /// The runtime is down (restarting): every call fails as an unreachable containerd.
    down: bool,
}

/// The fake exec's process: echo stdin to stdout until stdin closes or a kill.
fn fake_exec_process(
    state: Arc<Mutex<State>>,
    exec_id: String,
    request: &ExecStreamRequest,
) -> ExecStreams {
    use tokio::io::AsyncWriteExt as _;
    let (client_stdin, mut process_stdin) = tokio::io::duplex(64 * 1024);
    let (mut process_stdout, client_stdout) = tokio::io::duplex(64 * 1024);
    let (kill_tx, kill_rx) = tokio::sync::oneshot::channel::<()>();
    if let Some(e) = state.lock().execs.get_mut(&exec_id) {
        e.1 = Some(kill_tx);
    }
    let with_stdin = request.stdin;
    let banner = request.command.join(" ");
    let id = exec_id.clone();
    // The process runs on its own, like a real one: it is reaped whether or not anyone
    // awaits `exit`.
    let process = tokio::spawn(async move {
        let work = async {
            if with_stdin {
                // A broken client pipe ends the echo like EOF would.
                let _ = tokio::io::copy(&mut process_stdin, &mut process_stdout).await;
            } else {
                let _ = process_stdout.write_all(banner.as_bytes()).await;
            }
        };
        tokio::select! {
            _ = work => {}
            _ = kill_rx => {}
        }
        drop(process_stdout);
        state.lock().execs.remove(&id).map_or(0, |e| e.0)
    });
    let exit = async move {
        process.await.map_err(|e| RuntimeError::Io {
            what: "fake exec".into(),
            source: std::io::Error::other(e.to_string()),
        })
    };
    ExecStreams {
        exec_id,
        stdin: request
            .stdin
            .then(|| Box::new(client_stdin) as crate::StreamWriter),
        stdout: Some(Box::new(client_stdout)),
        stderr: None,
        exit: Box::pin(exit),
    }
}

#[derive(Clone)]
pub struct FakeRuntime {
    state: Arc<Mutex<State>>,
    exits: broadcast::Sender<ContainerExit>,
    clock: Arc<dyn Clock>,
}

impl Default for FakeRuntime {
    fn default() -> Self {
        FakeRuntime {
            state: Arc::default(),
            exits: broadcast::channel(1024).0,
            clock: Arc::new(TokioClock::new()),
        }
    }
}

impl FakeRuntime {
    pub fn new() -> Self {
        Self::default()
    }

    /// Stamps records with `clock` instead of a [`TokioClock`] started now.
    pub fn with_clock(clock: Arc<dyn Clock>) -> Self {
        FakeRuntime {
            clock,
            ..Self::default()
        }
    }

    /// Exec processes not yet exited (a leak check for streaming tests).
    pub fn live_execs(&self) -> usize {
        self.state.lock().execs.len()
    }

    /// Every container record, for tests that look at one directly.
    pub fn containers(&self) -> Vec<ContainerStatus> {
        self.state.lock().containers.values().cloned().collect()
    }

    /// Containers named `name` (in any pod) follow `script`.
    pub fn script(&self, name: &str, script: Script) {
        self.state.lock().scripts.insert(name.to_string(), script);
    }

    /// The calls made so far.
    pub fn calls(&self) -> Vec<String> {
        self.state
            .lock()
            .calls
            .iter()
            .map(|(_, c)| c.clone())
            .collect()
    }

    /// The calls made so far with the clock's time of each.
    pub fn timed_calls(&self) -> Vec<(DateTime<Utc>, String)> {
        self.state.lock().calls.clone()
    }

    /// Makes a running container exit now with `code`.
    pub fn exit(&self, id: &str, code: i32) {
        self.finish(id, code, false);
    }

    /// Makes a running container exit now with `code` without an exit event, as an exit
    /// that happened before anyone watched for it.
    pub fn exit_unseen(&self, id: &str, code: i32) {
        let mut st = self.state.lock();
        if let Some(c) = st.containers.get_mut(id) {
            if c.state == ContainerState::Running {
                c.state = ContainerState::Exited;
                c.exit_code = Some(code);
                c.finished_at = Some(self.clock.now());
                c.pid = None;
                c.reason = Some(if code == 0 { "Completed" } else { "Error" }.into());
            }
        }
    }

    /// Takes the runtime down (every call fails until [`FakeRuntime::set_down`]`(false)`),
    /// as a containerd restart does; its containers keep running.
    pub fn set_down(&self, down: bool) {
        self.state.lock().down = down;
    }

    fn reachable(&self) -> Result<(), RuntimeError> {
        if self.state.lock().down {
            return Err(RuntimeError::Io {
                what: "fake runtime".into(),
                source: std::io::Error::new(
                    std::io::ErrorKind::ConnectionRefused,
                    "containerd is restarting",
                ),
            });
        }
        Ok(())
    }

    fn call(&self, what: &str, id: &str) {
        let now = self.clock.now();
        self.state.lock().calls.push((now, format!("{what} {id}")));
    }

    fn finish(&self, id: &str, code: i32, oom: bool) {
        let pod_uid = {
            let mut st = self.state.lock();
            let Some(c) = st.containers.get_mut(id) else {
                return;
            };
            if c.state != ContainerState::Running {
                return;
            }
            c.state = ContainerState::Exited;
            c.exit_code = Some(code);
            c.finished_at = Some(self.clock.now());
            c.pid = None;
            c.reason = Some(
                match (oom, code) {
                    (true, _) => "OOMKilled",
                    (false, 0) => "Completed",
                    _ => "Error",
                }
                .into(),
            );
            let pod_uid = c.pod_uid.clone();
            let now = self.clock.now();
            st.calls.push((now, format!("exit {id} {code}")));
            pod_uid
        };
        // Err: nobody listens, which is fine for a fake.
        let _ = self.exits.send(ContainerExit {
            id: id.to_string(),
            pod_uid,
        });
    }

    fn not_found(id: &str) -> RuntimeError {
        RuntimeError::NotFound(id.to_string())
    }
}

#[async_trait]
impl Runtime for FakeRuntime {
    async fn version(&self) -> Result<RuntimeVersion, RuntimeError> {
        Ok(RuntimeVersion {
            runtime_name: "fake".into(),
            runtime_version: "0".into(),
        })
    }

    async fn run_pod_sandbox(&self, config: &PodSandboxConfig) -> Result<PodSandbox, RuntimeError> {
        let mut st = self.state.lock();
        st.next_id += 1;
        let id = format!("sandbox-{}", st.next_id);
        let sandbox = PodSandbox {
            id: id.clone(),
            uid: config.uid.clone(),
            namespace: config.namespace.clone(),
            name: config.name.clone(),
            attempt: config.attempt,
            netns: None,
            utsns: None,
            ipcns: None,
            ip: (!config.host_network).then(|| format!("10.244.0.{}", st.next_id % 250 + 2)),
            cgroup_parent: config.cgroup_parent.clone(),
            state: SandboxState::Ready,
            created_at: Some(self.clock.now()),
        };
        st.sandboxes.insert(id.clone(), sandbox.clone());
        st.calls
            .push((self.clock.now(), format!("run_pod_sandbox {id}")));
        Ok(sandbox)
    }

    async fn stop_pod_sandbox(&self, id: &str) -> Result<(), RuntimeError> {
        self.call("stop_pod_sandbox", id);
        let mut st = self.state.lock();
        let s = st
            .sandboxes
            .get_mut(id)
            .ok_or_else(|| Self::not_found(id))?;
        s.state = SandboxState::NotReady;
        Ok(())
    }

    async fn remove_pod_sandbox(&self, id: &str) -> Result<(), RuntimeError> {
        self.reachable()?;
        self.call("remove_pod_sandbox", id);
        let mut st = self.state.lock();
        st.containers.retain(|_, c| c.sandbox_id != id);
        st.sandboxes
            .remove(id)
            .map(|_| ())
            .ok_or_else(|| Self::not_found(id))
    }

    async fn list_pod_sandboxes(&self) -> Result<Vec<PodSandbox>, RuntimeError> {
        self.reachable()?;
        Ok(self.state.lock().sandboxes.values().cloned().collect())
    }

    async fn create_container(
        &self,
        sandbox: &PodSandbox,
        config: &ContainerConfig,
    ) -> Result<String, RuntimeError> {
        let mut st = self.state.lock();
        if !st.sandboxes.contains_key(&sandbox.id) {
            return Err(Self::not_found(&sandbox.id));
        }
        st.next_id += 1;
        let id = format!("container-{}", st.next_id);
        let status = ContainerStatus {
            id: id.clone(),
            sandbox_id: sandbox.id.clone(),
            pod_uid: sandbox.uid.clone(),
            pod_namespace: sandbox.namespace.clone(),
            pod_name: sandbox.name.clone(),
            name: config.name.clone(),
            attempt: config.attempt,
            spec_hash: config.spec_hash.clone(),
            init: config.init,
            state: ContainerState::Created,
            image_ref: config.image.name.clone(),
            image_id: config.image.id.clone(),
            pid: None,
            created_at: Some(self.clock.now()),
            started_at: None,
            finished_at: None,
            exit_code: None,
            reason: None,
            log_path: config.log_path.display().to_string(),
            cgroup: sandbox.cgroup_parent.clone(),
            termination_message_path: config
                .termination_message_path
                .as_ref()
                .map(|p| p.display().to_string()),
            labels: BTreeMap::new(),
        };
        st.containers.insert(id.clone(), status);
        let call = format!("create_container {id} {}", config.name);
        st.calls.push((self.clock.now(), call));
        Ok(id)
    }

    async fn start_container(&self, id: &str) -> Result<(), RuntimeError> {
        self.reachable()?;
        let takes = {
            let st = self.state.lock();
            let name = st.containers.get(id).map(|c| c.name.clone());
            name.and_then(|n| st.scripts.get(&n)?.start_takes)
        };
        if let Some(takes) = takes {
            tokio::time::sleep(takes).await;
        }
        let script = {
            let mut st = self.state.lock();
            let name = {
                let c = st
                    .containers
                    .get_mut(id)
                    .ok_or_else(|| Self::not_found(id))?;
                c.state = ContainerState::Running;
                c.started_at = Some(self.clock.now());
                c.pid = Some(1000);
                c.name.clone()
            };
            st.calls
                .push((self.clock.now(), format!("start_container {id} {name}")));
            st.scripts.get(&name).cloned().unwrap_or_default()
        };
        if let Some((after, code)) = script.exits_after {
            let this = self.clone();
            let id = id.to_string();
            tokio::spawn(async move {
                tokio::time::sleep(after).await;
                let code = if script.oom { 137 } else { code };
                this.finish(&id, code, script.oom);
            });
        }
        Ok(())
    }

    async fn stop_container(&self, id: &str, grace: Duration) -> Result<(), RuntimeError> {
        self.reachable()?;
        self.call("stop_container", id);
        let (running, hangs) = {
            let st = self.state.lock();
            let c = st.containers.get(id).ok_or_else(|| Self::not_found(id))?;
            let hangs = st.scripts.get(&c.name).is_some_and(|s| s.hangs_on_stop);
            (c.state == ContainerState::Running, hangs)
        };
        if !running {
            return Ok(());
        }
        if hangs {
            tokio::time::sleep(grace).await;
            self.finish(id, 137, false);
        } else {
            self.finish(id, 143, false);
        }
        Ok(())
    }

    async fn remove_container(&self, id: &str) -> Result<(), RuntimeError> {
        self.reachable()?;
        self.call("remove_container", id);
        self.state
            .lock()
            .containers
            .remove(id)
            .map(|_| ())
            .ok_or_else(|| Self::not_found(id))
    }

    async fn list_containers(&self) -> Result<Vec<ContainerStatus>, RuntimeError> {
        self.reachable()?;
        Ok(self.state.lock().containers.values().cloned().collect())
    }

    async fn container_status(&self, id: &str) -> Result<ContainerStatus, RuntimeError> {
        self.reachable()?;
        self.state
            .lock()
            .containers
            .get(id)
            .cloned()
            .ok_or_else(|| Self::not_found(id))
    }

    async fn exec_sync(
        &self,
        id: &str,
        command: &[String],
        _timeout: Duration,
    ) -> Result<ExecResult, RuntimeError> {
        let mut st = self.state.lock();
        let c = st.containers.get(id).ok_or_else(|| Self::not_found(id))?;
        let exit_code = st.scripts.get(&c.name).map_or(0, |s| s.exec_exit_code);
        let call = format!("exec_sync {id} {}", command.join(" "));
        st.calls.push((self.clock.now(), call));
        Ok(ExecResult {
            exit_code,
            output: command.join(" "),
        })
    }

    /// A process that echoes stdin to stdout (or, without stdin, prints its command line)
    /// and exits with the script's `exec_exit_code`, or 137 when killed.
    async fn exec_stream(
        &self,
        id: &str,
        request: &ExecStreamRequest,
    ) -> Result<ExecStreams, RuntimeError> {
        let exec_id = {
            let mut st = self.state.lock();
            let c = st.containers.get(id).ok_or_else(|| Self::not_found(id))?;
            let exit_code = st.scripts.get(&c.name).map_or(0, |s| s.exec_exit_code);
            st.next_id += 1;
            let exec_id = format!("exec-{}", st.next_id);
            let call = format!("exec_stream {id} {}", request.command.join(" "));
            st.calls.push((self.clock.now(), call));
            st.execs.insert(exec_id.clone(), (exit_code, None));
            exec_id
        };
        Ok(fake_exec_process(self.state.clone(), exec_id, request))
    }

    async fn resize_exec(
        &self,
        id: &str,
        exec_id: &str,
        width: u16,
        height: u16,
    ) -> Result<(), RuntimeError> {
        let mut st = self.state.lock();
        let call = format!("resize_exec {id} {exec_id} {width}x{height}");
        st.calls.push((self.clock.now(), call));
        Ok(())
    }

    async fn kill_exec(&self, id: &str, exec_id: &str) -> Result<(), RuntimeError> {
        let mut st = self.state.lock();
        st.calls
            .push((self.clock.now(), format!("kill_exec {id} {exec_id}")));
        let entry = st
            .execs
            .get_mut(exec_id)
            .ok_or_else(|| RuntimeError::NotFound(format!("exec {exec_id} in {id}")))?;
        entry.0 = 137;
        if let Some(kill) = entry.1.take() {
            // The process may have exited on its own already.
            let _ = kill.send(());
        }
        Ok(())
    }

    fn subscribe_exits(&self) -> broadcast::Receiver<ContainerExit> {
        self.exits.subscribe()
    }
}
