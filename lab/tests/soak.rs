//! The churn soak (`cairn-lab soak`) on a fresh 3-node lab: creates, scales and deletes
//! of Deployments, Jobs, a CronJob, StatefulSets and bare pods of every deletion flavour,
//! exec and port-forward sessions opened and dropped, agent SIGKILL + restart and proxy
//! restarts, while the soak checks that deleted pods finish in time, Jobs complete once,
//! workloads converge and nothing is left on the nodes. Three minutes here
//! (`CAIRN_SOAK_MINUTES` sets more); the plain lane runs it, the container lane skips it
//! (the same daemons on the same kernel: it would only double the time).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::Lab;

#[test]
fn churn_soak() {
    let lab = Lab::up("e2esoak", 16497, &["--driver=netns", "--nodes=3"]);
    let minutes = std::env::var("CAIRN_SOAK_MINUTES").unwrap_or_else(|_| "3".into());
    let out = lab
        .cmd()
        .args(["soak", "--minutes", &minutes])
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    let text = common::combined(&out);
    println!("{text}");
    assert!(out.status.success(), "the soak failed:\n{text}");
    assert!(text.contains("agent restarts"), "{text}");
}
