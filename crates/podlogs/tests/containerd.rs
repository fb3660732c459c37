//! The real path: a private containerd 1.6 whose runc shim starts `cairn-logger` from the
//! task's `binary://` log URI (here through containerd's own `ctr run --log-uri`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use cairn_podlogs::cri::parse_record;
use cairn_podlogs::files::rotated_files;
use cairn_podlogs::{binary_log_uri, container_log_path, read_logs, LogOptions, RotateOptions};
use cairn_testsupport::{remove_cgroup, Containerd, Registry};
use futures::StreamExt;

const LOGGER: &str = env!("CARGO_BIN_EXE_cairn-logger");

fn ctr(c: &Containerd, args: &[&str]) -> String {
    let out = Command::new("ctr")
        .arg("-a")
        .arg(&c.socket)
        .args(["-n", "podlogs"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ctr {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        c.log_tail()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn containerd_shim_runs_cairn_logger() {
    let containerd = Containerd::start().unwrap();
    let registry = Registry::start().unwrap();
    let (reference, _) = registry.push_busybox().await.unwrap();
    ctr(&containerd, &["images", "pull", "--plain-http", &reference]);

    let dir = tempfile::tempdir().unwrap();
    let log = container_log_path(dir.path(), "default", "web", "uid-1", "app", 0);
    let opts = RotateOptions {
        max_size: 4096,
        max_files: 2,
    };
    let uri = binary_log_uri(Path::new(LOGGER), &log, &opts);
    let runc_root = containerd.runc_root();
    let cgroup = format!("cairn-podlogs-{}/logs-id", std::process::id());
    // stdout only: lines of two pipes are ordered by when the logger reads them, so a stderr
    // line could land anywhere in the tail (stderr is covered by the next test).
    let script = "echo out; i=0; while [ $i -lt 300 ]; do echo line $i; i=$((i+1)); done; printf 'no newline'";
    ctr(
        &containerd,
        &[
            "run",
            "--rm",
            "--log-uri",
            &uri,
            "--cgroup",
            &cgroup,
            "--runc-root",
            runc_root.to_str().unwrap(),
            &reference,
            "logs-id",
            "/bin/sh",
            "-c",
            script,
        ],
    );
    let left = remove_cgroup(cgroup.split('/').next().unwrap());
    assert!(left.is_empty(), "cgroups left: {left:?}");

    // Rotated once at least, never more than max_files files, each within max_size.
    let rotated = rotated_files(&log).unwrap();
    assert_eq!(rotated.len(), 1, "{rotated:?}");
    for f in rotated.iter().chain([&log]) {
        assert!(std::fs::metadata(f).unwrap().len() <= 4096);
    }
    // Every record is well formed; the last one is the unfinished line.
    let text = std::fs::read(&log).unwrap();
    let records: Vec<_> = text
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            let r = parse_record(l).unwrap();
            (
                r.stream,
                r.partial,
                String::from_utf8(r.content.to_vec()).unwrap(),
            )
        })
        .collect();
    let last = records.last().unwrap();
    assert!(last.1, "{last:?}");
    assert_eq!(last.2, "no newline");

    // The reader shows the end of the output across both files.
    let opts = LogOptions {
        tail_lines: Some(3),
        ..Default::default()
    };
    let mut s = read_logs(log.clone(), opts, Arc::new(|| false))
        .await
        .unwrap();
    let mut out = Vec::new();
    while let Some(chunk) = s.next().await {
        out.extend_from_slice(&chunk.unwrap());
    }
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "line 298\nline 299\nno newline"
    );
}

#[tokio::test]
async fn stdout_and_stderr_of_a_short_container() {
    let containerd = Containerd::start().unwrap();
    let registry = Registry::start().unwrap();
    let (reference, _) = registry.push_busybox().await.unwrap();
    ctr(&containerd, &["images", "pull", "--plain-http", &reference]);
    let dir = tempfile::tempdir().unwrap();
    let log = container_log_path(dir.path(), "ns", "pod", "uid", "c", 0);
    let uri = binary_log_uri(Path::new(LOGGER), &log, &RotateOptions::default());
    let runc_root = containerd.runc_root();
    let cgroup = format!("cairn-podlogs2-{}/short", std::process::id());
    ctr(
        &containerd,
        &[
            "run",
            "--rm",
            "--log-uri",
            &uri,
            "--cgroup",
            &cgroup,
            "--runc-root",
            runc_root.to_str().unwrap(),
            &reference,
            "short",
            "/bin/sh",
            "-c",
            "echo to-stdout; echo to-stderr >&2",
        ],
    );
    remove_cgroup(cgroup.split('/').next().unwrap());
    let text = std::fs::read(&log).unwrap();
    let mut records: Vec<(String, bool, String)> = text
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            let r = parse_record(l).unwrap();
            (
                r.stream.as_str().to_string(),
                r.partial,
                String::from_utf8(r.content.to_vec()).unwrap(),
            )
        })
        .collect();
    records.sort();
    assert_eq!(
        records,
        vec![
            ("stderr".to_string(), false, "to-stderr".to_string()),
            ("stdout".to_string(), false, "to-stdout".to_string()),
        ]
    );
}
