//! `up` over the leftovers of a lab that never finished (kept with --keep-on-failure, which
//! leaves what a crash of `cairn-lab up` would: the state file, running daemons, the
//! namespaces) takes them down first and comes up clean; `down` then leaves nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{output, processes_mentioning, Claim, LAB};
use std::process::Command;

#[test]
fn up_over_a_crashed_labs_leftovers_cleans_them_first() {
    let claim = Claim::take("crashed");
    let roots = claim.roots();
    let lab = |args: &[&str]| {
        let mut c = Command::new(LAB);
        c.env("CAIRN_LAB", "crashed")
            .env("CAIRN_LAB_DATA_ROOT", roots.join("data"))
            .env("CAIRN_LAB_RUN_ROOT", roots.join("run"))
            .env("CAIRN_LAB_LOG_ROOT", roots.join("log"))
            .args(args);
        c
    };
    let out = lab(&[
        "up",
        "--api-port",
        "16496",
        "--keep-on-failure",
        "--control-arg=--no-such-flag",
    ])
    .output()
    .unwrap();
    assert!(!out.status.success());
    let left = processes_mentioning(&roots.display().to_string());
    assert!(!left.is_empty(), "the failed lab was kept, daemons and all");
    assert!(std::path::Path::new("/run/netns/cl-crashed-sw").exists());

    let out = lab(&["up", "--api-port", "16496"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("lab crashed has leftovers of an earlier run; taking them down first"),
        "{text}"
    );
    for line in &left {
        let (pid, cmdline) = line.split_once(": ").unwrap();
        let now = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let now = String::from_utf8_lossy(&now).replace('\0', " ");
        assert_ne!(now, cmdline, "a daemon of the crashed lab survived: {line}");
    }
    let status = output(&mut lab(&["status"])).unwrap();
    assert_eq!(status.matches(" running ").count(), 9, "{status}");

    output(&mut lab(&["down"])).unwrap();
    assert!(processes_mentioning(&roots.display().to_string()).is_empty());
    assert!(!std::path::Path::new("/run/netns/cl-crashed-sw").exists());
    std::fs::remove_dir_all(roots).unwrap();
}
