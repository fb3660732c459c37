//! `ConntrackNetlink` against the kernel (root only): flows made by the `conntrack` tool
//! (Debian package `conntrack`) in a private network namespace, listed and deleted over
//! ctnetlink. The host's table is never touched: every netlink call runs on a thread that
//! entered the namespace, every `conntrack` run is `nsenter`ed into it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::Ipv4Addr;
use std::os::fd::AsFd;

use cairn_netfilter::conntrack::{Flow, IPPROTO_TCP, IPPROTO_UDP};
use cairn_netfilter::{ConntrackDriver, ConntrackNetlink};
use cairn_testsupport::NetNs;

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

/// `conntrack args...` inside `ns`; its stdout.
fn conntrack(ns: &NetNs, args: &[&str]) -> String {
    assert!(
        cairn_netfilter::find_binary("conntrack").is_some(),
        "the conntrack tool is missing (apt-get install conntrack)"
    );
    let out = ns.command("conntrack").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "conntrack {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `f` on a thread that entered `ns` (this thread stays in the host namespace).
fn in_ns<T: Send + 'static>(ns: &NetNs, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = ns.path();
    std::thread::spawn(move || {
        let file = std::fs::File::open(path).unwrap();
        nix::sched::setns(file.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        f()
    })
    .join()
    .unwrap()
}

fn list(ns: &NetNs, protocol: u8) -> Vec<Flow> {
    let mut flows = in_ns(ns, move || ConntrackNetlink.list(protocol)).unwrap();
    flows.sort();
    flows
}

fn delete(ns: &NetNs, flows: Vec<Flow>) -> usize {
    in_ns(ns, move || ConntrackNetlink.delete(&flows)).unwrap()
}

#[test]
fn lists_and_deletes_single_udp_flows() {
    let ns = NetNs::new("cairn-ct").unwrap();
    let udp = ["-p", "udp", "--timeout", "300"];
    let plain = [
        "-s", "10.0.0.1", "-d", "10.0.0.2", "--sport", "1000", "--dport", "53",
    ];
    conntrack(&ns, &[&["-I"][..], &udp, &plain].concat());
    // A flow to a service address, DNATed to an endpoint (as the proxy's rules do).
    let dnat = [
        "-s",
        "10.0.0.3",
        "-d",
        "10.96.0.10",
        "--sport",
        "40000",
        "--dport",
        "53",
        "-r",
        "10.244.1.5",
        "-q",
        "10.0.0.3",
        "--reply-port-src",
        "5353",
        "--reply-port-dst",
        "40000",
    ];
    conntrack(&ns, &[&["-I"][..], &udp, &dnat].concat());
    let tcp = [
        "-I",
        "-p",
        "tcp",
        "--state",
        "ESTABLISHED",
        "--timeout",
        "300",
        "-s",
        "10.0.0.1",
        "-d",
        "10.0.0.2",
        "--sport",
        "2000",
        "--dport",
        "80",
    ];
    conntrack(&ns, &tcp);

    let plain_flow = Flow::unnatted(IPPROTO_UDP, ip("10.0.0.1"), 1000, ip("10.0.0.2"), 53);
    let dnat_flow = Flow {
        protocol: IPPROTO_UDP,
        orig_src: ip("10.0.0.3"),
        orig_dst: ip("10.96.0.10"),
        orig_sport: 40000,
        orig_dport: 53,
        reply_src: ip("10.244.1.5"),
        reply_dst: ip("10.0.0.3"),
        reply_sport: 5353,
        reply_dport: 40000,
    };
    assert_eq!(list(&ns, IPPROTO_UDP), vec![plain_flow, dnat_flow]);
    let tcp_flow = Flow::unnatted(IPPROTO_TCP, ip("10.0.0.1"), 2000, ip("10.0.0.2"), 80);
    assert_eq!(list(&ns, IPPROTO_TCP), vec![tcp_flow]);

    assert_eq!(delete(&ns, vec![dnat_flow]), 1);
    let left = conntrack(&ns, &["-L"]);
    assert_eq!(left.lines().count(), 2, "{left}");
    assert!(!left.contains("10.96.0.10"), "{left}");
    assert!(left.contains("sport=1000 dport=53"), "{left}");
    assert!(left.contains("sport=2000 dport=80"), "{left}");
    assert_eq!(list(&ns, IPPROTO_UDP), vec![plain_flow]);

    // Gone already: no error, nothing counted (and nothing else touched).
    assert_eq!(delete(&ns, vec![dnat_flow]), 0);
    assert_eq!(delete(&ns, vec![]), 0);
    assert_eq!(conntrack(&ns, &["-L"]).lines().count(), 2);
}

/// Enough flows that the dump spans several datagrams and the deletes several batches.
#[test]
fn large_tables_span_many_datagrams_and_batches() {
    let ns = NetNs::new("cairn-ct").unwrap();
    let n: u16 = 700;
    let script: String = (1..=n)
        .map(|p| {
            format!("-I -p udp -s 10.1.0.1 -d 10.2.0.1 --sport {p} --dport 53 --timeout 300\n")
        })
        .collect();
    let file = std::env::temp_dir().join(format!("cairn-ct-{}.txt", std::process::id()));
    std::fs::write(&file, script).unwrap();
    conntrack(&ns, &["-R", file.to_str().unwrap()]);
    std::fs::remove_file(&file).unwrap();

    let flows = list(&ns, IPPROTO_UDP);
    let expected: Vec<Flow> = (1..=n)
        .map(|p| Flow::unnatted(IPPROTO_UDP, ip("10.1.0.1"), p, ip("10.2.0.1"), 53))
        .collect();
    assert_eq!(flows, expected);

    let odd: Vec<Flow> = flows
        .into_iter()
        .filter(|f| f.orig_sport % 2 == 1)
        .collect();
    assert_eq!(delete(&ns, odd.clone()), odd.len());
    let left = list(&ns, IPPROTO_UDP);
    assert_eq!(left.len(), usize::from(n) - odd.len());
    assert!(left.iter().all(|f| f.orig_sport % 2 == 0));
    assert_eq!(conntrack(&ns, &["-L"]).lines().count(), left.len());
}
