//! The packages `packaging/build` makes from the binaries this build made: lintian and
//! rpmlint find no error, the metadata says what an operator needs (files, config files,
//! dependencies, scripts), the .debs rebuild bit for bit, and in a container of the lab's
//! offline Debian image (`cairn-lab`'s node image, debootstrapped) the .debs install,
//! upgrade keeping a changed config file, and purge back to the file tree before the
//! install, taking cairn's network state and nothing else with them. The .rpms install
//! into and erase from an `rpm --root` tree (no RHEL-family root can be built here, so
//! their scripts are checked by rpmlint and `rpm -qp --scripts`, not run).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::{build, ok, repo, UPGRADE, VERSION};

/// The packages, built once for every test here (and shared with `vagrant.rs`).
fn packages() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(common::shared_packages)
}

fn deb(name: &str) -> PathBuf {
    packages().join(format!("{name}_{VERSION}_amd64.deb"))
}

fn rpm(name: &str) -> PathBuf {
    packages().join(format!("{name}-{VERSION}-1.x86_64.rpm"))
}

fn run(program: &str, args: &[&str], files: &[PathBuf]) -> String {
    ok(
        Command::new(program)
            .args(args)
            .args(files)
            .output()
            .unwrap(),
        program,
    )
}

#[test]
fn lintian_and_rpmlint_find_no_error() {
    let debs = [deb("cairn-control"), deb("cairn-node")];
    let out = Command::new("lintian")
        .arg("--pedantic")
        .args(&debs)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    let findings: Vec<&str> = said.lines().filter(|l| l.contains(": ")).collect();
    // Explained in packaging/README.md: cairn ships no manual pages yet.
    let unexplained: Vec<&&str> = findings
        .iter()
        .filter(|l| !l.contains(": no-manual-page "))
        .collect();
    assert!(unexplained.is_empty(), "lintian: {said}");
    let rpms = [rpm("cairn-control"), rpm("cairn-node")];
    let rc = repo().join("packaging/rpm/rpmlintrc");
    let said = run("rpmlint", &["-r", rc.to_str().unwrap()], &rpms);
    assert!(said.contains(" 0 errors,"), "rpmlint: {said}");
}

#[test]
fn metadata_lists_files_config_dependencies_and_scripts() {
    let node = deb("cairn-node");
    let files = run("dpkg", &["-c"], std::slice::from_ref(&node));
    for path in [
        "./usr/bin/cairn-node",
        "./usr/bin/cairn-agent",
        "./usr/bin/cairn-proxy",
        "./usr/bin/cairn-logger",
        "./usr/lib/cni/cairn-cni",
        "./usr/lib/systemd/system/cairn-agent.service",
        "./usr/lib/sysctl.d/90-cairn.conf",
        "./usr/lib/modules-load.d/cairn.conf",
    ] {
        assert!(files.contains(path), "dpkg -c lacks {path}: {files}");
    }
    let info = run("dpkg", &["-I"], &[node]);
    for wanted in [
        "Depends: libc6 (>= 2.",
        "containerd, runc, nftables | iptables, conntrack, iproute2, kmod",
        " postinst",
        " prerm",
        " postrm",
        " conffiles",
    ] {
        assert!(info.contains(wanted), "dpkg -I lacks {wanted}: {info}");
    }
    let rpm_node = rpm("cairn-node");
    let requires = run("rpm", &["-qpR"], std::slice::from_ref(&rpm_node));
    for wanted in [
        "(containerd or containerd.io)",
        "runc",
        "(nftables or iptables)",
        "conntrack-tools",
        "iproute",
    ] {
        assert!(
            requires.contains(wanted),
            "rpm -qpR lacks {wanted}: {requires}"
        );
    }
    let config = run("rpm", &["-qpc"], std::slice::from_ref(&rpm_node));
    assert_eq!(config.trim(), "/etc/cairn/agent.env\n/etc/cairn/proxy.env");
    let scripts = run("rpm", &["-qp", "--scripts"], &[rpm_node]);
    for wanted in [
        "systemctl try-restart",
        "disable --now",
        "cairn_forget_network",
        "ln -sfn /usr/lib/cni/cairn-cni /opt/cni/bin/cairn-cni",
    ] {
        assert!(
            scripts.contains(wanted),
            "%scripts lack {wanted}: {scripts}"
        );
    }
}

#[test]
fn debs_rebuild_bit_for_bit() {
    let again = tempfile::tempdir().unwrap();
    build(again.path(), VERSION, false);
    for name in ["cairn-control", "cairn-node"] {
        let file = format!("{name}_{VERSION}_amd64.deb");
        let (a, b) = (deb(name), again.path().join(&file));
        assert!(
            std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap(),
            "{file} differs between two builds"
        );
    }
}

#[test]
fn rpms_install_into_and_erase_from_a_root() {
    let root = tempfile::tempdir().unwrap();
    let r = format!("--root={}", root.path().display());
    let r = r.as_str();
    run("rpm", &[r, "--initdb"], &[]);
    let rpms = [rpm("cairn-control"), rpm("cairn-node")];
    run("rpm", &[r, "-i", "--nodeps", "--noscripts"], &rpms);
    assert!(root.path().join("usr/bin/cairn-agent").exists());
    assert!(root.path().join("etc/cairn/control.env").exists());
    let installed = run("rpm", &[r, "-qa"], &[]);
    assert!(
        installed.contains(&format!("cairn-node-{VERSION}-1")),
        "{installed}"
    );
    run(
        "rpm",
        &[
            r,
            "-e",
            "--nodeps",
            "--noscripts",
            "cairn-node",
            "cairn-control",
        ],
        &[],
    );
    assert!(!root.path().join("usr/bin/cairn-agent").exists());
}

/// A container of the lab's node image (Debian 12 from debootstrap, offline), with the
/// lab's capabilities (its network namespace is its own); removed when dropped.
struct NodeContainer(String);

impl NodeContainer {
    fn start() -> NodeContainer {
        cairn_lab::docker::ensure_image().unwrap();
        let name = format!("cairn-packages-{}", std::process::id());
        let _ = Command::new("docker").args(["rm", "-f", &name]).output();
        let mounts = format!("{}:/pkgs:ro", packages().display());
        ok(
            Command::new("docker")
                .args(["run", "-d", "--name", &name, "-v", &mounts])
                .args(cairn_lab::docker::node_run_flags())
                .arg(cairn_lab::docker::NODE_IMAGE)
                .output()
                .unwrap(),
            "docker run",
        );
        NodeContainer(name)
    }

    fn sh(&self, script: &str) -> String {
        ok(
            Command::new("docker")
                .args(["exec", &self.0, "sh", "-ec", script])
                .output()
                .unwrap(),
            script,
        )
    }

    /// Every path outside the package manager's own records, the kernel's and the test's.
    fn tree(&self) -> String {
        self.sh(
            "find / -xdev \\( -path /proc -o -path /sys -o -path /dev -o -path /pkgs \
             -o -path /var/lib/dpkg -o -path /var/log -o -path /var/cache -o -path /tmp \\) \
             -prune -o -print | sort",
        )
    }
}

impl Drop for NodeContainer {
    fn drop(&mut self) {
        let _ = Command::new("docker").args(["rm", "-f", &self.0]).output();
    }
}

/// What a running node leaves on the host, cairn's and others' (the others must stay).
const NODE_STATE: &str = "
    nft add table inet cairn-cni; nft add table ip cairn-proxy; nft add table ip keep-me
    iptables -t nat -N CAIRN-SERVICES; iptables -t nat -A PREROUTING -j CAIRN-SERVICES
    iptables -t nat -N KEEP-ME; iptables -t nat -A PREROUTING -j KEEP-ME
    ip link add cni0 type bridge; ip link add keep0 type bridge
    ip link add cairn.1 type vxlan id 1 dstport 8472 dev lo
    mkdir -p /var/lib/cni/networks/cairn /run/cairn /var/lib/cairn/agent
    echo '{\"cniVersion\":\"1.0.0\",\"name\":\"cairn\",\"plugins\":[{\"type\":\"cairn-cni\",\"bridge\":\"cni0\"}]}' \
        > /etc/cni/net.d/10-cairn.conflist
    touch /var/lib/cni/networks/cairn/10.244.1.2 /run/cairn/subnet.env
    mkdir -p /var/log/pods/default_web_1 /etc/cairn/node && touch /etc/cairn/node/kubeconfig
";

#[test]
fn debs_install_upgrade_and_purge_to_the_tree_before() {
    let node = NodeContainer::start();
    // Directories every CNI node shares: purge empties cairn's part, and leaves them.
    node.sh("mkdir -p /etc/cni/net.d /var/lib/cni/networks");
    let before = node.tree();
    node.sh(&format!(
        "dpkg -i /pkgs/cairn-control_{VERSION}_amd64.deb /pkgs/cairn-node_{VERSION}_amd64.deb"
    ));
    for bin in [
        "cairn-control",
        "cairn-node",
        "cairn-agent",
        "cairn-proxy",
        "cairn-logger",
        "/opt/cni/bin/cairn-cni",
    ] {
        let version = node.sh(&format!("{bin} --version"));
        let commit = version
            .split("(commit ")
            .nth(1)
            .and_then(|rest| rest.split(')').next())
            .unwrap_or("");
        assert!(
            version.contains(VERSION)
                && commit.len() == 40
                && commit.bytes().all(|b| b.is_ascii_hexdigit()),
            "{bin} --version: {version}"
        );
    }
    let conffiles = node.sh("dpkg-query -W -f '${Conffiles}\\n' cairn-node cairn-control");
    for file in [
        "/etc/cairn/agent.env",
        "/etc/cairn/proxy.env",
        "/etc/cairn/control.env",
    ] {
        assert!(
            conffiles.contains(file),
            "{file} is no conffile: {conffiles}"
        );
    }

    // An upgrade keeps the operator's change of a config file.
    node.sh("echo 'CAIRN_AGENT_ARGS=\"--max-pods 50\"' >> /etc/cairn/agent.env");
    node.sh(&format!(
        "dpkg -i /pkgs/upgrade/cairn-node_{UPGRADE}_amd64.deb /pkgs/upgrade/cairn-control_{UPGRADE}_amd64.deb"
    ));
    assert_eq!(node.sh("dpkg-query -W -f '${Version}' cairn-node"), UPGRADE);
    assert!(node
        .sh("cat /etc/cairn/agent.env")
        .contains("--max-pods 50"));

    node.sh(NODE_STATE);
    node.sh("dpkg --purge cairn-node cairn-control");
    let after = node.tree();
    let (before, after): (Vec<&str>, Vec<&str>) =
        (before.lines().collect(), after.lines().collect());
    let left: Vec<&&str> = after.iter().filter(|p| !before.contains(p)).collect();
    let taken: Vec<&&str> = before.iter().filter(|p| !after.contains(p)).collect();
    assert!(
        left.is_empty() && taken.is_empty(),
        "purge left {left:?} and took {taken:?}"
    );
    let tables = node.sh("nft list tables");
    assert!(
        !tables.contains("cairn") && tables.contains("keep-me"),
        "{tables}"
    );
    let nat = node.sh("iptables -t nat -S");
    assert!(
        !nat.contains("CAIRN-") && nat.contains("-A PREROUTING -j KEEP-ME"),
        "{nat}"
    );
    let links = node.sh("ip -o link show");
    assert!(
        !links.contains("cni0") && !links.contains("cairn.1") && links.contains("keep0"),
        "{links}"
    );
}
