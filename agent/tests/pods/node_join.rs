//! `cairn-node join` and `reset` against the test cluster's cairn-control, with a second
//! agent on the same containerd: bad input is refused with one clear line and nothing
//! written; a join keeps the operator's flags in the units' environment files, starts
//! the units (a stand-in `systemctl` runs the agent from `agent.env` as the unit's
//! `ExecStart` would) and returns once the Node is Ready; a second join is refused;
//! reset puts `/etc/cairn` back byte for byte; the same node joins again after it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::{bin, bin_dir, CgroupCleanup, Cluster, NODE_IP};

const JOINED: &str = "node-j";

/// The test's host: its `/etc/cairn`, the agent's root, and the stand-in systemctl.
struct Host {
    etc: PathBuf,
    root: PathBuf,
    systemctl: PathBuf,
    calls: PathBuf,
    pid: PathBuf,
}

impl Drop for Host {
    fn drop(&mut self) {
        if let Ok(pid) = std::fs::read_to_string(&self.pid) {
            let _ = Command::new("kill").args(["-9", pid.trim()]).status();
        }
        cairn_testsupport::unmount_under(&self.root);
    }
}

/// `systemctl enable --now` runs the agent as the unit would (its environment file,
/// `$CAIRN_AGENT_ARGS`); `disable --now` kills it and waits until it is gone.
fn fake_systemctl(dir: &Path, etc: &Path) -> Host {
    let host = Host {
        etc: etc.to_path_buf(),
        root: dir.join("j-root"),
        systemctl: dir.join("systemctl"),
        calls: dir.join("systemctl.calls"),
        pid: dir.join("j-agent.pid"),
    };
    let script = format!(
        r#"#!/bin/sh
echo "$*" >> {calls}
case "$1" in
enable)
    set -a; . {etc}/agent.env; set +a
    RUST_LOG=info {agent} $CAIRN_AGENT_ARGS >> {dir}/j-agent.log 2>&1 &
    echo $! > {pid} ;;
disable)
    [ -f {pid} ] || exit 0
    pid=$(cat {pid}); kill -9 "$pid"; rm -f {pid}
    for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || exit 0; sleep 0.05; done
    exit 1 ;;
esac
"#,
        calls = host.calls.display(),
        etc = etc.display(),
        agent = bin("cairn-agent").display(),
        dir = dir.display(),
        pid = host.pid.display(),
    );
    std::fs::write(&host.systemctl, script).unwrap();
    std::fs::set_permissions(&host.systemctl, std::fs::Permissions::from_mode(0o755)).unwrap();
    host
}

/// What an operator put in `/etc/cairn` before joining: the second agent's own dirs and
/// ports beside the test cluster's agent (join must keep these).
fn operator_env(cluster: &Cluster, cgroup_root: &str) -> (String, String) {
    let p = |s: &str| cluster.path(s).display().to_string();
    let agent = format!(
        "# the operator's\nCAIRN_AGENT_ARGS=\"--node-ip {NODE_IP} --containerd-socket {sock} \
--containerd-namespace cairn-test-j --state-dir {run} --cni-conf-dir {netd} --cni-bin-dir {bins} \
--pod-log-dir {logs} --cgroup-root {cgroup_root} --listen {NODE_IP}:10260 \
--healthz-listen 127.0.0.1:10258 --client-ca-file {ca} --static-pod-dir {manifests} \
--registry-config-dir {certs} --eviction-hard=memory.available<100Mi \
--image-gc-high-threshold=100 --node-status-update-seconds 1 --root-dir /somewhere/else\"\n",
        sock = cluster.containerd.socket.display(),
        run = p("j-run"),
        netd = p("net.d"),
        bins = bin_dir().display(),
        logs = p("j-logs"),
        ca = p("control/pki/client-ca.crt"),
        manifests = p("j-manifests"),
        certs = p("certs.d"),
    );
    let proxy = "CAIRN_PROXY_ARGS=\"--mode nftables\"\nRUST_LOG=info\n".to_string();
    (agent, proxy)
}

fn cairn_node(host: &Host, args: &[&str]) -> Output {
    Command::new(bin("cairn-node"))
        .args(args)
        .arg("--etc-dir")
        .arg(&host.etc)
        .arg("--root-dir")
        .arg(&host.root)
        .arg("--systemctl")
        .arg(&host.systemctl)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `cairn-node join` as node-j at NODE_IP, giving up on Ready after two minutes.
fn join_args<'a>(server: &'a str, token: &'a str) -> Vec<&'a str> {
    let mut args = vec!["join", "--server", server, "--token", token];
    args.extend(["--node-name", JOINED, "--node-ip", NODE_IP]);
    args.extend(["--timeout-seconds", "120"]);
    args
}

/// A refused join: non-zero, one line naming the problem, nothing written.
fn refused(host: &Host, server: &str, token: &str, expect: &str) {
    let out = cairn_node(host, &join_args(server, token));
    let err = text(&out.stderr);
    eprintln!("refused: {err}");
    assert!(!out.status.success(), "{server} {err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.starts_with("cairn-node: ") && err.contains(expect),
        "want {expect:?}: {err}"
    );
    let secret = token.rsplit('.').next().unwrap();
    assert!(
        !err.contains(secret),
        "the token's secret must not be printed: {err}"
    );
    assert!(!host.etc.join("node").exists() && !host.root.join("kubeconfig").exists());
}

fn bad_input_is_refused(cluster: &Cluster, host: &Host, server: &str, token: &str) {
    let (pin, bootstrap) = token.split_once("::").unwrap();
    refused(host, server, "not-a-token", "token");
    let wrong_ca = format!("K10{}::{bootstrap}", "0".repeat(64));
    refused(host, server, &wrong_ca, "does not match the join token");
    refused(
        host,
        "https://127.0.0.1:1",
        token,
        "https://127.0.0.1:1/cacerts",
    );
    // An expired bootstrap token (upstream's Secret, expiration in the past).
    let out = cluster.kubectl(&[
        "-n",
        "kube-system",
        "create",
        "secret",
        "generic",
        "bootstrap-token-expire",
        "--type",
        "bootstrap.kubernetes.io/token",
        "--from-literal",
        "token-id=expire",
        "--from-literal",
        "token-secret=0123456789abcdef",
        "--from-literal",
        "expiration=2020-01-01T00:00:00Z",
        "--from-literal",
        "usage-bootstrap-authentication=true",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    refused(
        host,
        server,
        &format!("{pin}::expire.0123456789abcdef"),
        "refused the join token",
    );
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn join(host: &Host, server: &str, token: &str) -> String {
    let out = cairn_node(host, &join_args(server, token));
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains(&format!("Node {JOINED} is Ready")),
        "{stdout}"
    );
    eprintln!("cairn-node join said:\n{stdout}");
    stdout
}

fn configuration_is_merged(host: &Host, server: &str) {
    let agent = std::fs::read_to_string(host.etc.join("agent.env")).unwrap();
    let root = host.root.display();
    let token = host.etc.join("node/token");
    assert!(
        agent.starts_with("# the operator's\nCAIRN_AGENT_ARGS=\"--containerd-socket"),
        "{agent}"
    );
    assert!(
        agent.contains("--healthz-listen 127.0.0.1:10258"),
        "{agent}"
    );
    assert!(
        !agent.contains("/somewhere/else"),
        "join owns --root-dir: {agent}"
    );
    let ours = format!(
        "--root-dir {root} --node-name {JOINED} --server {server} --token-file {} --node-ip {NODE_IP}\"\n",
        token.display()
    );
    assert!(agent.ends_with(&ours), "{agent}");
    let proxy = std::fs::read_to_string(host.etc.join("proxy.env")).unwrap();
    let kubeconfig = host.root.join("kubeconfig");
    let proxy_kubeconfig = host.root.join("proxy.kubeconfig");
    assert_eq!(
        proxy,
        format!(
            "CAIRN_PROXY_ARGS=\"--mode nftables --kubeconfig {} --hostname-override {JOINED}\"\nRUST_LOG=info\n",
            proxy_kubeconfig.display()
        )
    );
    for private in [&token, &kubeconfig, &proxy_kubeconfig] {
        assert_eq!(mode(private), 0o600, "{}", private.display());
    }
    let node_user = format!("system:node:{JOINED}");
    assert_eq!(kubectl_as(&kubeconfig, &WHOAMI), node_user);
    assert_eq!(kubectl_as(&proxy_kubeconfig, &WHOAMI), "system:kube-proxy");
    // The proxy reads every pod and policy for NetworkPolicy; the node itself may not.
    let list_pods = ["auth", "can-i", "list", "pods", "--all-namespaces"];
    assert_eq!(kubectl_as(&proxy_kubeconfig, &list_pods), "yes");
    let list_policies = ["auth", "can-i", "watch", "networkpolicies", "-A"];
    assert_eq!(kubectl_as(&proxy_kubeconfig, &list_policies), "yes");
    assert_eq!(kubectl_as(&kubeconfig, &list_pods), "no");
    assert_eq!(
        kubectl_as(&proxy_kubeconfig, &["auth", "can-i", "create", "pods"]),
        "no"
    );
    // Its Ingress data plane reads Ingresses and their TLS Secrets; the node may not.
    for what in [
        "ingresses.networking.k8s.io",
        "ingressclasses.networking.k8s.io",
        "secrets",
    ] {
        let watch = ["auth", "can-i", "watch", what, "-A"];
        assert_eq!(kubectl_as(&proxy_kubeconfig, &watch), "yes", "{what}");
    }
    let list_secrets = ["auth", "can-i", "list", "secrets", "-A"];
    assert_eq!(kubectl_as(&kubeconfig, &list_secrets), "no");
    let write = [
        "auth",
        "can-i",
        "update",
        "ingresses.networking.k8s.io",
        "-A",
    ];
    assert_eq!(kubectl_as(&proxy_kubeconfig, &write), "no");
}

const WHOAMI: [&str; 4] = [
    "auth",
    "whoami",
    "-o",
    "jsonpath={.status.userInfo.username}",
];

/// kubectl's first word of output with `kubeconfig` (`can-i` exits 1 on "no", and may
/// say why after it).
fn kubectl_as(kubeconfig: &Path, args: &[&str]) -> String {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .unwrap();
    let said = text(&out.stdout);
    assert!(!said.is_empty(), "{args:?}: {}", text(&out.stderr));
    said.split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn node_join_and_reset() {
    let _cgroups;
    let cluster = Cluster::start().await;
    _cgroups = CgroupCleanup(cluster.cgroup_root.clone());
    let joined_cgroups = format!("{}-j", cluster.cgroup_root);
    let _joined_cgroups = CgroupCleanup(joined_cgroups.clone());
    let server = std::fs::read_to_string(cluster.path("control/server-url")).unwrap();
    let server = server.trim();
    let token = super::create_join_token(&cluster.path("control"));
    let etc = cluster.path("etc-cairn");
    std::fs::create_dir_all(&etc).unwrap();
    let host = fake_systemctl(cluster.dir.path(), &etc);

    bad_input_is_refused(&cluster, &host, server, &token);

    let (agent_env, proxy_env) = operator_env(&cluster, &joined_cgroups);
    std::fs::write(etc.join("agent.env"), &agent_env).unwrap();
    std::fs::write(etc.join("proxy.env"), &proxy_env).unwrap();
    let progress = join(&host, server, &token);
    assert!(
        progress.contains("Started cairn-agent.service, cairn-proxy.service"),
        "{progress}"
    );
    configuration_is_merged(&host, server);

    let again = cairn_node(&host, &["join", "--server", server, "--token", &token]);
    let err = text(&again.stderr);
    assert!(
        !again.status.success() && err.contains("already joined"),
        "{err}"
    );

    let out = cairn_node(&host, &["reset", "--keep-host-state"]);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(etc.join("agent.env")).unwrap(),
        agent_env
    );
    assert_eq!(
        std::fs::read_to_string(etc.join("proxy.env")).unwrap(),
        proxy_env
    );
    assert!(!etc.join("node").exists() && !host.root.exists());
    let calls = std::fs::read_to_string(&host.calls).unwrap();
    assert_eq!(
        calls,
        "enable --now cairn-agent.service cairn-proxy.service\n\
         disable --now cairn-proxy.service cairn-agent.service\n"
    );

    // The same node, re-installed, joins again: Ready from a fresh heartbeat.
    join(&host, server, &token);
}
