#![allow(clippy::unwrap_used)]

use super::*;
use crate::event::{Level, Stage};

fn event(i: usize) -> Event {
    Event::received(
        Level::Metadata,
        format!("id-{i:04}"),
        "create",
        "/api/v1/pods",
    )
}

#[test]
fn the_writer_rotates_by_size_and_keeps_max_backups() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.log");
    let line = event(0).to_line().len() as u64;
    let settings = LogSettings {
        path: path.clone(),
        max_bytes: line * 10,
        max_backups: 2,
        max_age_days: 0,
    };
    let mut w = RotatingWriter::open(settings).unwrap();
    for i in 0..45 {
        w.write_line(&event(i).to_line());
        // Backup names carry milliseconds: rotations must not share one.
        if i % 10 == 9 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    w.flush();
    let kept = backups(&path);
    assert_eq!(kept.len(), 2, "{kept:?}");
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 5);
    let newest = std::fs::read_to_string(&kept[0].0).unwrap();
    let ids: Vec<Event> = newest
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(ids.len(), 10);
    assert_eq!(ids[0].audit_id, "id-0030");
    use std::os::unix::fs::PermissionsExt;
    for p in [path.clone(), kept[0].0.clone()] {
        let mode = std::fs::metadata(&p).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{}", p.display());
    }
}

#[test]
fn old_backups_are_pruned_by_age() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.log");
    let old = chrono::Utc::now() - chrono::Duration::days(3);
    std::fs::write(backup_name(&path, old), "old\n").unwrap();
    std::fs::write(dir.path().join("unrelated.log"), "x\n").unwrap();
    let settings = LogSettings {
        path: path.clone(),
        max_bytes: 1,
        max_backups: 0,
        max_age_days: 2,
    };
    let mut w = RotatingWriter::open(settings).unwrap();
    w.write_line(&event(1).to_line());
    w.write_line(&event(2).to_line());
    w.flush();
    let kept = backups(&path);
    assert_eq!(kept.len(), 1, "only the new backup stays: {kept:?}");
    assert!(dir.path().join("unrelated.log").exists());
}

#[test]
fn the_file_sink_writes_json_lines_in_upstreams_shape() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("logs/audit.log");
    let sink = FileSink::open(LogSettings {
        path: path.clone(),
        max_bytes: 0,
        max_backups: 0,
        max_age_days: 0,
    })
    .unwrap();
    let mut e = event(7).at(Stage::ResponseComplete);
    e.user = cairn_auth::UserInfo::new("alice", vec!["devs".into()]);
    e.response_status = Some(crate::ResponseStatus::code(201));
    sink.emit(&e);
    drop(sink);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        if text.ends_with('\n') || std::time::Instant::now() > deadline {
            break text;
        }
        std::thread::yield_now();
    };
    let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(v["kind"], "Event");
    assert_eq!(v["apiVersion"], "audit.k8s.io/v1");
    assert_eq!(v["auditID"], "id-0007");
    assert_eq!(v["stage"], "ResponseComplete");
    assert_eq!(v["requestURI"], "/api/v1/pods");
    assert_eq!(v["user"]["username"], "alice");
    assert_eq!(
        v["responseStatus"],
        serde_json::json!({"metadata": {}, "code": 201})
    );
    assert!(v["stageTimestamp"].as_str().unwrap().ends_with('Z'));
}

#[test]
fn a_log_deleted_under_the_writer_is_started_anew() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.log");
    let line = event(0).to_line().len() as u64;
    let settings = LogSettings {
        path: path.clone(),
        max_bytes: line * 2,
        max_backups: 0,
        max_age_days: 0,
    };
    let mut w = RotatingWriter::open(settings).unwrap();
    w.write_line(&event(1).to_line());
    w.flush();
    std::fs::remove_file(&path).unwrap();
    for i in 2..5 {
        w.write_line(&event(i).to_line());
    }
    w.flush();
    assert!(!w.failing);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("id-0004"), "{text}");
}

#[test]
fn events_from_many_requests_are_all_written_once_while_the_writer_batches() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.log");
    let sink = Arc::new(
        FileSink::open(LogSettings {
            path: path.clone(),
            max_bytes: 0,
            max_backups: 0,
            max_age_days: 0,
        })
        .unwrap(),
    );
    let senders: Vec<_> = (0..4)
        .map(|t| {
            let sink = Arc::clone(&sink);
            std::thread::spawn(move || {
                for i in 0..1000 {
                    sink.emit(&event(t * 1000 + i).at(Stage::ResponseComplete));
                    if i % 100 == 0 {
                        // Lulls, so the writer both naps and waits on the queue.
                        std::thread::sleep(Duration::from_millis(7));
                    }
                }
            })
        })
        .collect();
    senders.into_iter().for_each(|s| s.join().unwrap());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let ids = loop {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let ids: std::collections::BTreeSet<String> = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["auditID"].to_string())
            .collect();
        if text.lines().count() >= 4000 || std::time::Instant::now() > deadline {
            assert_eq!(text.lines().count(), ids.len(), "each event once");
            break ids;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(ids.len(), 4000);
}
