//! `IpvsNetlink` against a kernel with IPVS. This host's kernel has none, so the host side
//! boots Debian's kernel in a qemu guest (cairn_testsupport::qemu) and runs this very test
//! inside it, where it loads `ip_vs`, drives services and real servers through generic
//! netlink in the guest's own (throwaway) namespace, checks what `ipvsadm -Ln` (from the
//! host's root, which the guest mounts) sees, and ends with `RESULT ok` / `RESULT fail: ...`,
//! which the host asserts on. Needs root, qemu-system-x86, linux-image-amd64 and ipvsadm
//! (scripts/install-deps.sh); without them the host side fails, it never skips.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::os::unix::fs::MetadataExt;
use std::process::Command;
use std::time::{Duration, Instant};

use cairn_netfilter::ipvs::{IPPROTO_TCP, IPPROTO_UDP};
use cairn_netfilter::{IpvsDriver, IpvsError, IpvsNetlink, RealServer, VirtualServer};
use cairn_testsupport::qemu::{in_guest, Guest};

/// One boot under TCG (~5-10 s) plus a few module loads and netlink calls; a guard against a
/// hung guest, not a speed assertion.
const GUEST_TIMEOUT: Duration = Duration::from_secs(300);

/// The guest side's failures, as text for the `RESULT fail:` line.
type Result<T> = std::result::Result<T, String>;

macro_rules! bail {
    ($($arg:tt)*) => {
        return Err(format!($($arg)*))
    };
}

macro_rules! ensure {
    ($cond:expr) => {
        if !$cond {
            bail!("check failed: {}", stringify!($cond));
        }
    };
    ($cond:expr, $($arg:tt)*) => {
        if !$cond {
            bail!($($arg)*);
        }
    };
}

macro_rules! ensure_eq {
    ($got:expr, $want:expr) => {{
        let (got, want) = ($got, $want);
        if got != want {
            bail!("{} is {:?}, expected {:?}", stringify!($got), got, want);
        }
    }};
}

/// `?` for the driver's errors.
fn text(e: IpvsError) -> String {
    e.to_string()
}

#[test]
fn ipvs_services_and_real_servers_in_a_guest() {
    if in_guest() {
        guest_side();
        return;
    }
    assert_eq!(
        std::fs::metadata("/proc/self").unwrap().uid(),
        0,
        "this test boots a qemu guest and must run as root"
    );
    assert!(
        cairn_netfilter::find_binary("ipvsadm").is_some(),
        "ipvsadm is missing on the host (apt-get install ipvsadm); the guest runs it from \
         the host's root"
    );
    let guest = Guest::new().unwrap();
    let out = guest
        .run_test("ipvs_services_and_real_servers_in_a_guest", GUEST_TIMEOUT)
        .unwrap();
    eprintln!(
        "guest ({}) took {:.1?}",
        guest.kernel_release(),
        out.elapsed
    );
    eprintln!("{}", out.output);
    assert_eq!(
        out.last_line_starting_with("RESULT "),
        Some("RESULT ok"),
        "{out}"
    );
    assert!(out.success(), "{out}");
}

fn guest_side() {
    match exercise_ipvs() {
        Ok(()) => println!("RESULT ok"),
        Err(e) => {
            println!("RESULT fail: {e}");
            panic!("{e}");
        }
    }
}

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

fn run(program: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("running {program}: {e}"))?;
    ensure!(
        out.status.success(),
        "{program} {args:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `ipvsadm -Ln` as {service line: {real server lines}}, whitespace collapsed:
/// `TCP 10.96.0.10:80 rr` -> {`-> 10.244.1.5:8080 Masq 1 0 0`, ...}.
fn ipvsadm_table() -> Result<BTreeMap<String, BTreeSet<String>>> {
    let listing = run("ipvsadm", &["-Ln"])?;
    let mut table = BTreeMap::new();
    let mut current: Option<String> = None;
    // Three header lines: the version, then the two column legends.
    for line in listing.lines().skip(3) {
        let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
        if line.starts_with("->") {
            let Some(service) = &current else {
                bail!("real server line before any service in:\n{listing}");
            };
            table
                .entry(service.clone())
                .or_insert_with(BTreeSet::new)
                .insert(line);
        } else if !line.is_empty() {
            table.insert(line.clone(), BTreeSet::new());
            current = Some(line);
        }
    }
    Ok(table)
}

fn expect_table(expected: &[(&str, &[&str])]) -> Result<()> {
    let want: BTreeMap<String, BTreeSet<String>> = expected
        .iter()
        .map(|(s, reals)| (s.to_string(), reals.iter().map(|r| r.to_string()).collect()))
        .collect();
    let got = ipvsadm_table()?;
    ensure!(
        got == want,
        "ipvsadm -Ln shows {got:#?}, expected {want:#?}"
    );
    Ok(())
}

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v
}

fn exercise_ipvs() -> Result<()> {
    let started = Instant::now();
    let phase = |what: &str| println!("{:>6.1?} {what}", started.elapsed());
    let ipvs = IpvsNetlink::new();

    // Before the module is loaded the lookup either fails clearly or (the controller asks
    // for the module by its family alias) has loaded it by itself.
    match ipvs.services() {
        Err(IpvsError::Unavailable { .. }) => println!("before modprobe: IPVS unavailable"),
        Ok(s) if s.is_empty() => println!("before modprobe: the lookup loaded ip_vs"),
        other => bail!("before modprobe: {other:?}"),
    }
    for module in ["ip_vs", "ip_vs_rr", "ip_vs_sh"] {
        run("modprobe", &[module])?;
    }
    phase("modules loaded");

    let ipvs = IpvsNetlink::new();
    ensure!(
        ipvs.services().map_err(text)?.is_empty(),
        "services before any were added"
    );
    let mut tcp = VirtualServer::new(IPPROTO_TCP, ip("10.96.0.10"), 80);
    let udp = VirtualServer {
        persistent_timeout: Some(600),
        ..VirtualServer::new(IPPROTO_UDP, ip("10.96.0.10"), 53)
    };
    let a = RealServer::new(ip("10.244.1.5"), 8080, 1);
    let b = RealServer::new(ip("10.244.2.5"), 8080, 1);
    let dns = RealServer::new(ip("10.244.1.5"), 5353, 1);

    add_services_and_list_them(&ipvs, &tcp, &udp, &a, &b, &dns, &phase)?;
    service_settings_change_in_place(&ipvs, &mut tcp)?;
    drain_and_remove_real_servers(&ipvs, &tcp, &a, &b, &phase)?;
    service_goes_with_its_real_servers(&ipvs, &tcp, &udp, &dns)?;

    // Calls act in the calling thread's network namespace: a fresh one has no services.
    let in_new_ns = std::thread::spawn(move || -> Result<Vec<VirtualServer>> {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)
            .map_err(|e| format!("unshare(CLONE_NEWNET): {e}"))?;
        ipvs.services().map_err(text)
    })
    .join()
    .map_err(|_| "the namespace thread panicked".to_string())??;
    ensure!(in_new_ns.is_empty(), "a new namespace lists {in_new_ns:?}");
    let ipvs = IpvsNetlink::new();
    ensure_eq!(ipvs.services().map_err(text)?, vec![tcp.clone()]);

    ipvs.delete_service(&tcp).map_err(text)?;
    ensure!(ipvs.services().map_err(text)?.is_empty());
    expect_table(&[])?;
    phase("services deleted");
    Ok(())
}

fn add_services_and_list_them(
    ipvs: &IpvsNetlink,
    tcp: &VirtualServer,
    udp: &VirtualServer,
    a: &RealServer,
    b: &RealServer,
    dns: &RealServer,
    phase: &impl Fn(&str),
) -> Result<()> {
    ipvs.add_service(tcp).map_err(text)?;
    ipvs.add_service(udp).map_err(text)?;
    let dup = ipvs.add_service(tcp).unwrap_err();
    ensure!(dup.is_already_exists(), "adding twice: {dup}");
    ensure!(
        dup.to_string()
            .starts_with("adding IPVS service TCP 10.96.0.10:80: "),
        "{dup}"
    );
    ipvs.add_real_server(tcp, a).map_err(text)?;
    ipvs.add_real_server(tcp, b).map_err(text)?;
    ipvs.add_real_server(udp, dns).map_err(text)?;
    let dup = ipvs.add_real_server(tcp, a).unwrap_err();
    ensure!(dup.is_already_exists(), "adding a real server twice: {dup}");
    phase("services added");

    ensure!(
        sorted(ipvs.services().map_err(text)?) == sorted(vec![tcp.clone(), udp.clone()]),
        "listed {:?}",
        ipvs.services().map_err(text)?
    );
    ensure_eq!(
        sorted(ipvs.real_servers(tcp).map_err(text)?),
        sorted(vec![a.clone(), b.clone()])
    );
    ensure_eq!(
        sorted(ipvs.real_servers(udp).map_err(text)?),
        vec![dns.clone()]
    );
    expect_table(&[
        (
            "TCP 10.96.0.10:80 rr",
            &[
                "-> 10.244.1.5:8080 Masq 1 0 0",
                "-> 10.244.2.5:8080 Masq 1 0 0",
            ],
        ),
        (
            "UDP 10.96.0.10:53 rr persistent 600",
            &["-> 10.244.1.5:5353 Masq 1 0 0"],
        ),
    ])?;
    Ok(())
}

fn service_settings_change_in_place(ipvs: &IpvsNetlink, tcp: &mut VirtualServer) -> Result<()> {
    // Settings change in place: scheduler and persistence on, then off again.
    tcp.scheduler = "sh".into();
    tcp.persistent_timeout = Some(120);
    ipvs.update_service(tcp).map_err(text)?;
    ensure!(
        ipvs.services().map_err(text)?.contains(tcp),
        "after update: {:?}",
        ipvs.services().map_err(text)?
    );
    tcp.scheduler = "rr".into();
    tcp.persistent_timeout = None;
    ipvs.update_service(tcp).map_err(text)?;
    ensure!(
        ipvs.services().map_err(text)?.contains(tcp),
        "after update: {:?}",
        ipvs.services().map_err(text)?
    );
    Ok(())
}

fn drain_and_remove_real_servers(
    ipvs: &IpvsNetlink,
    tcp: &VirtualServer,
    a: &RealServer,
    b: &RealServer,
    phase: &impl Fn(&str),
) -> Result<()> {
    // Draining: weight 0, then removal; removing again is no error.
    let drained = RealServer {
        weight: 0,
        ..a.clone()
    };
    ipvs.update_real_server(tcp, &drained).map_err(text)?;
    ensure_eq!(
        sorted(ipvs.real_servers(tcp).map_err(text)?),
        vec![drained.clone(), b.clone()]
    );
    ipvs.delete_real_server(tcp, b).map_err(text)?;
    ipvs.delete_real_server(tcp, b).map_err(text)?;
    ensure_eq!(
        sorted(ipvs.real_servers(tcp).map_err(text)?),
        vec![drained.clone()]
    );
    let missing = ipvs.update_real_server(tcp, b).unwrap_err();
    ensure!(
        missing.errno() == Some(libc::ENOENT),
        "updating a removed real server: {missing}"
    );
    expect_table(&[
        ("TCP 10.96.0.10:80 rr", &["-> 10.244.1.5:8080 Masq 0 0 0"]),
        (
            "UDP 10.96.0.10:53 rr persistent 600",
            &["-> 10.244.1.5:5353 Masq 1 0 0"],
        ),
    ])?;
    phase("real servers changed");
    Ok(())
}

fn service_goes_with_its_real_servers(
    ipvs: &IpvsNetlink,
    tcp: &VirtualServer,
    udp: &VirtualServer,
    dns: &RealServer,
) -> Result<()> {
    // A service goes with its real servers; deleting it again is no error.
    ipvs.delete_service(udp).map_err(text)?;
    ipvs.delete_service(udp).map_err(text)?;
    ipvs.delete_real_server(udp, dns).map_err(text)?;
    ensure_eq!(ipvs.services().map_err(text)?, vec![tcp.clone()]);
    ensure!(ipvs.real_servers(udp).map_err(text)?.is_empty());
    let gone = ipvs.add_real_server(udp, dns).unwrap_err();
    ensure!(
        gone.errno() == Some(libc::ESRCH)
            && gone.to_string().starts_with(
                "adding real server 10.244.1.5:5353 to IPVS service UDP 10.96.0.10:53"
            ),
        "adding to a deleted service: {gone}"
    );
    let gone = ipvs.update_service(udp).unwrap_err();
    ensure!(gone.errno() == Some(libc::ESRCH), "{gone}");
    expect_table(&[("TCP 10.96.0.10:80 rr", &["-> 10.244.1.5:8080 Masq 0 0 0"])])?;
    Ok(())
}
