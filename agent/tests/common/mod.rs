//! A one-node cluster inside a private network namespace: cairn-control, a private
//! containerd, a local registry with the busybox test image, the cairn-cni bridge and
//! cairn-agent. The test thread itself enters the namespace (setns on this thread only),
//! so the daemons it spawns, its kube client and kubectl all live there while keeping the
//! host's mounts and cgroups (see host-facts.md).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use cairn_testsupport::{ready, Containerd, NetNs, Registry};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::Value;

pub const NODE: &str = "node-a";
pub const NODE_IP: &str = "198.18.7.10";
/// The control server caps ServiceAccount tokens at this many seconds, so a test sees
/// the agent replace mounted tokens.
pub const TOKEN_SECONDS: i64 = 30;

/// target/debug (or release) where cargo put this workspace's binaries.
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/debug/deps/<test> → target/debug
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

pub fn bin(name: &str) -> PathBuf {
    let p = bin_dir().join(name);
    assert!(
        p.exists(),
        "{} is missing: build the workspace binaries first (cargo test --workspace does)",
        p.display()
    );
    p
}

fn sh(cmd: &str) {
    let out = Command::new("sh").arg("-c").arg(cmd).output().unwrap();
    assert!(
        out.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `cairn-control token create`: a join token pinning the cluster CA.
pub fn create_join_token(data_dir: &Path) -> String {
    let out = Command::new(bin("cairn-control"))
        .args(["token", "create", "--data-dir"])
        .arg(data_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub netns: NetNs,
    pub control: Child,
    pub kubeconfig: PathBuf,
    pub containerd: Containerd,
    pub registry: Registry,
    pub image: String,
    pub agent: Option<Child>,
    pub cgroup_root: String,
    pub client: kube::Client,
    pub backend: Option<String>,
    /// A join token: the agent joins with it (and rotates its certificate) instead of
    /// using a ready-made node kubeconfig.
    pub join_token: Option<String>,
    /// See [`ClusterOptions::eager_image_gc`].
    pub eager_image_gc: bool,
    /// See [`ClusterOptions::eviction_hard`].
    pub eviction_hard: Option<String>,
    /// cairn-control's `READY=1`, checked against `/readyz` when it came.
    pub control_ready: ready::ReadyWatch,
    /// The agent's last start's `READY=1`, checked against its port and Node.
    pub agent_ready: Option<ready::ReadyWatch>,
}

/// How a [`Cluster`] starts.
#[derive(Default)]
pub struct ClusterOptions<'a> {
    /// The embedded network controller (`--network-backend`) instead of a conflist.
    pub backend: Option<&'a str>,
    /// `--cert-lifetime-seconds` for cairn-control: every leaf certificate it issues
    /// (its own, the nodes') rotates within the test.
    pub cert_lifetime_seconds: Option<u64>,
    /// Join the node with a token (bootstrap CSR, rotation) rather than a kubeconfig.
    pub join_by_token: bool,
    /// Image GC that removes every unused image seen for 3 s, each second; else it is off, because
    /// the test node shares this machine's disk and a full CI disk would start it.
    pub eager_image_gc: bool,
    /// `--eviction-hard` instead of memory only (see [`Cluster::start_agent`]).
    pub eviction_hard: Option<String>,
}

impl Cluster {
    pub async fn start() -> Cluster {
        Self::start_with(None).await
    }

    /// `backend`: run the embedded network controller (`--network-backend`) instead of a
    /// hand-written conflist.
    pub async fn start_with(backend: Option<&str>) -> Cluster {
        Self::start_opts(ClusterOptions {
            backend,
            ..ClusterOptions::default()
        })
        .await
    }

    pub async fn start_opts(opts: ClusterOptions<'_>) -> Cluster {
        let backend = opts.backend;
        let lifetime = opts
            .cert_lifetime_seconds
            .map(|s| format!("--cert-lifetime-seconds={s}"));
        let _ = rustls::crypto::ring::default_provider().install_default();
        let netns = NetNs::new("cairn-agt").unwrap();
        let f = std::fs::File::open(netns.path()).unwrap();
        nix::sched::setns(f.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        sh(&format!("ip link add node0 type veth peer name node0p && ip addr add {NODE_IP}/24 dev node0 && ip link set node0p up && ip link set node0 up"));

        let dir = tempfile::Builder::new()
            .prefix("cairn-agent-test-")
            .tempdir()
            .unwrap();
        let data = dir.path().join("control");
        std::fs::create_dir_all(&data).unwrap();
        let log = std::fs::File::create(dir.path().join("control.log")).unwrap();
        let url_file = data.join("server-url");
        let control_ready =
            ready::ReadyWatch::start(&dir.path().join("control.notify"), move || {
                let url = std::fs::read_to_string(&url_file).map_err(|e| e.to_string())?;
                match ready::answers(&format!("{}/readyz", url.trim()))?.as_str() {
                    "200" => Ok(()),
                    code => Err(format!("/readyz said {code}")),
                }
            });
        let control = Command::new(bin("cairn-control"))
            .env("NOTIFY_SOCKET", dir.path().join("control.notify"))
            .args(["serve", "--data-dir"])
            .arg(&data)
            .args(["--bind", "127.0.0.1:0"])
            .args([
                "--service-account-token-max-seconds",
                &TOKEN_SECONDS.to_string(),
            ])
            .args(lifetime.iter())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !data.join("server-url").exists() {
            assert!(Instant::now() < deadline, "cairn-control did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = Command::new(bin("cairn-control"))
            .args(["kubeconfig", "--data-dir"])
            .arg(&data)
            .output()
            .unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, &out.stdout).unwrap();
        // The agent runs as its node, as on a real one (Node authorizer, NodeRestriction).
        let node_user = format!("system:node:{NODE}");
        let out = Command::new(bin("cairn-control"))
            .args(["kubeconfig", "--data-dir"])
            .arg(&data)
            .args(["--user", &node_user, "--group", "system:nodes"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::write(dir.path().join("node.kubeconfig"), &out.stdout).unwrap();
        let join_token = opts.join_by_token.then(|| create_join_token(&data));

        let containerd = Containerd::start().unwrap();
        let registry = Registry::start().unwrap();
        let (image, _) = registry.push_busybox().await.unwrap();

        let conf_dir = dir.path().join("net.d");
        std::fs::create_dir_all(&conf_dir).unwrap();
        if backend.is_none() {
            std::fs::write(
            conf_dir.join("10-test.conflist"),
            format!(
                r#"{{"cniVersion":"1.0.0","name":"podnet","plugins":[{{"type":"cairn-cni","bridge":"cni0","isGateway":true,"ipMasq":false,"ipam":{{"type":"host-local","ranges":[[{{"subnet":"10.244.7.0/24"}}]],"dataDir":"{}"}}}}]}}"#,
                dir.path().join("ipam").display()
            ),
        )
        .unwrap();
        }
        std::fs::create_dir_all(dir.path().join("manifests")).unwrap();

        let kc = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap();
        let client = kube::Client::try_from(config).unwrap();
        // One cgroup tree per cluster: the tests of a binary run in parallel, and each agent
        // keeps its own kubepods QoS parents.
        static CLUSTERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let cgroup_root = format!(
            "/cairn-test-{}-{}",
            std::process::id(),
            CLUSTERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let mut c = Cluster {
            dir,
            netns,
            control,
            kubeconfig,
            containerd,
            registry,
            image,
            agent: None,
            cgroup_root,
            client,
            backend: backend.map(str::to_string),
            join_token,
            eager_image_gc: opts.eager_image_gc,
            eviction_hard: opts.eviction_hard,
            control_ready,
            agent_ready: None,
        };
        c.start_agent();
        c.wait_node_ready().await;
        c
    }

    pub fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    pub fn start_agent(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path("agent.log"))
            .unwrap();
        let socket = self.path("agent.notify");
        let kubeconfig = self.kubeconfig.clone();
        self.agent_ready = Some(ready::ReadyWatch::start(&socket, move || {
            // The node port wants a client certificate: that it accepts is enough.
            std::net::TcpStream::connect((NODE_IP, 10250)).map_err(|e| format!(":10250: {e}"))?;
            match ready::answers("http://127.0.0.1:10248/healthz")?.as_str() {
                "200" => {}
                code => return Err(format!("/healthz said {code}")),
            }
            let node = Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args(["get", "node", NODE, "-o", "name"])
                .output()
                .map_err(|e| e.to_string())?;
            match node.status.success() {
                true => Ok(()),
                false => Err(String::from_utf8_lossy(&node.stderr).into_owned()),
            }
        }));
        let mut cmd = Command::new(bin("cairn-agent"));
        cmd.env("NOTIFY_SOCKET", socket);
        if let Some(b) = &self.backend {
            cmd.args(["--network-backend", b])
                .arg("--subnet-file")
                .arg(self.path("subnet.env"))
                .arg("--cni-data-dir")
                .arg(self.path("ipam"));
        }
        match &self.join_token {
            Some(token) => {
                let url = std::fs::read_to_string(self.path("control/server-url")).unwrap();
                cmd.args(["--server", url.trim(), "--token", token])
            }
            None => cmd.arg("--kubeconfig").arg(self.path("node.kubeconfig")),
        };
        let child = cmd
            .args(["--node-name", NODE, "--node-ip", NODE_IP])
            .arg("--containerd-socket")
            .arg(&self.containerd.socket)
            .args(["--containerd-namespace", "cairn-test"])
            .arg("--root-dir")
            .arg(self.path("root"))
            .arg("--state-dir")
            .arg(self.path("run"))
            .arg("--cni-conf-dir")
            .arg(self.path("net.d"))
            .arg("--cni-bin-dir")
            .arg(bin_dir())
            .arg("--pod-log-dir")
            .arg(self.path("logs"))
            .args(["--cgroup-root", &self.cgroup_root])
            .args(["--listen", &format!("{NODE_IP}:10250")])
            // The test node shares this machine's disk, which a CI build may have filled
            // past upstream's 10-15 %: memory only, so no disk pressure taints the node.
            .arg(format!(
                "--eviction-hard={}",
                self.eviction_hard
                    .as_deref()
                    .unwrap_or("memory.available<100Mi")
            ))
            .args(if self.eager_image_gc {
                &[
                    "--image-gc-high-threshold=1",
                    "--image-gc-low-threshold=0",
                    "--minimum-image-ttl-duration=3s",
                    "--image-gc-period-seconds=1",
                ][..]
            } else {
                &["--image-gc-high-threshold=100"][..]
            })
            // Pinned from a file here; the lab's agents read the published one.
            .arg("--client-ca-file")
            .arg(self.path("control/pki/client-ca.crt"))
            .arg("--static-pod-dir")
            .arg(self.path("manifests"))
            .arg("--registry-config-dir")
            .arg(self.path("certs.d"))
            .arg("--logger-path")
            .arg(bin("cairn-logger"))
            .args(["--node-status-update-seconds", "1"])
            .args(["--housekeeping-interval-seconds", "1"])
            .env("RUST_LOG", "info,cairn_agent=debug,kube=warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.agent = Some(child);
    }

    /// SIGKILL, as a crash would.
    pub fn kill_agent(&mut self) {
        if let Some(mut a) = self.agent.take() {
            let _ = a.kill();
            let _ = a.wait();
        }
    }

    pub fn agent_log(&self) -> String {
        std::fs::read_to_string(self.path("agent.log")).unwrap_or_default()
    }

    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), "default")
    }

    pub async fn wait_node_ready(&self) {
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(self.client.clone());
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(n) = nodes.get(NODE).await {
                let ready = n
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
                if ready && self.agent_port_answers().await {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "node never became Ready; agent log:\n{}",
                self.agent_log()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The agent's port completes a TLS handshake verified against the cluster CA (its
    /// serving certificate is issued) and answers; anonymous requests get a 401.
    pub async fn agent_port_answers(&self) -> bool {
        let anonymous = self.credentials_without_user().reqwest().unwrap();
        let answer = anonymous
            .get(format!("https://{NODE_IP}:10250/healthz"))
            .send()
            .await;
        answer.is_ok_and(|r| r.status() == 401)
    }

    /// The admin kubeconfig's cluster and CA, with no user.
    pub fn credentials_without_user(&self) -> cairn_testsupport::api_client::Credentials {
        let mut c =
            cairn_testsupport::api_client::Credentials::from_kubeconfig(&self.kubeconfig).unwrap();
        c.client_cert_pem = None;
        c.client_key_pem = None;
        c.token = None;
        c
    }

    pub async fn create(&self, pod: Value) -> Pod {
        let pod: Pod = serde_json::from_value(pod).unwrap();
        self.pods()
            .create(&PostParams::default(), &pod)
            .await
            .unwrap()
    }

    /// Polls the pod until `check` holds (returns the pod), failing with the agent log.
    pub async fn wait_for(
        &self,
        name: &str,
        what: &str,
        secs: u64,
        check: impl Fn(&Pod) -> bool,
    ) -> Pod {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let last = self.pods().get_opt(name).await.unwrap();
            if let Some(p) = &last {
                if check(p) {
                    return p.clone();
                }
            }
            if Instant::now() > deadline {
                let log = self.agent_log();
                let tail: String = log
                    .lines()
                    .rev()
                    .take(60)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect::<Vec<_>>()
                    .join("\n");
                panic!(
                    "pod {name}: {what} not reached; pod: {}\nagent log tail:\n{tail}",
                    serde_json::to_string_pretty(&last).unwrap()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Events about `pod` as (type, reason, message).
    pub async fn events(&self, pod: &str) -> Vec<(String, String, String)> {
        let api: Api<k8s_openapi::api::core::v1::Event> =
            Api::namespaced(self.client.clone(), "default");
        api.list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some(pod))
            .map(|e| {
                (
                    e.type_.unwrap_or_default(),
                    e.reason.unwrap_or_default(),
                    e.message.unwrap_or_default(),
                )
            })
            .collect()
    }

    pub fn kubectl(&self, args: &[&str]) -> Output {
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .output()
            .unwrap()
    }

    /// kubectl with `stdin` as its input; fails the test if kubectl does.
    pub fn kubectl_stdin(&self, args: &[&str], stdin: &str) -> Output {
        use std::io::Write;
        let mut child = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    pub fn ctr(&self, args: &[&str]) -> String {
        let out = Command::new("ctr")
            .arg("-a")
            .arg(&self.containerd.socket)
            .args(["-n", "cairn-test"])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs a command inside a container of a pod via the runtime's exec (ctr task exec).
    pub fn exec(&self, container_id: &str, cmd: &[&str]) -> Output {
        Command::new("ctr")
            .arg("-a")
            .arg(&self.containerd.socket)
            .args(["-n", "cairn-test", "task", "exec", "--exec-id"])
            .arg(format!("t{}", rand_suffix()))
            .arg(container_id)
            .args(cmd)
            .output()
            .unwrap()
    }
}

fn rand_suffix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        % 1_000_000_007
}

pub fn phase(p: &Pod) -> String {
    p.status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default()
}

pub fn container_status(
    p: &Pod,
    name: &str,
) -> Option<k8s_openapi::api::core::v1::ContainerStatus> {
    p.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == name)
        .cloned()
}

pub fn container_id(p: &Pod, name: &str) -> String {
    container_status(p, name)
        .and_then(|c| c.container_id)
        .unwrap_or_default()
        .trim_start_matches("containerd://")
        .to_string()
}

pub fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.kill_agent();
        let _ = self.control.kill();
        let _ = self.control.wait();
        // Containerd's Drop kills shims and unmounts its dirs; then our pinned namespaces.
        cairn_testsupport::unmount_under(&self.path("run"));
        cairn_testsupport::unmount_under(&self.path("root"));
        let _ = Path::new("/");
    }
}

/// Cgroups of the test's pods, removed after containerd is gone.
pub struct CgroupCleanup(pub String);

impl Drop for CgroupCleanup {
    fn drop(&mut self) {
        let _ = cairn_testsupport::remove_cgroup(self.0.trim_start_matches('/'));
    }
}
