#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use super::*;
use crate::files::rotated_path;
use futures::StreamExt;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

fn not_running() -> RunningProbe {
    Arc::new(|| false)
}

async fn read_all(path: &Path, opts: LogOptions) -> String {
    let mut s = read_logs(path.to_path_buf(), opts, not_running())
        .await
        .unwrap();
    let mut out = Vec::new();
    while let Some(chunk) = s.next().await {
        out.extend_from_slice(&chunk.unwrap());
    }
    String::from_utf8(out).unwrap()
}

fn rec(sec: u32, stream: &str, tag: &str, content: &str) -> String {
    format!("2024-01-01T00:00:{sec:02}.5Z {stream} {tag} {content}\n")
}

fn fixture(dir: &Path) -> PathBuf {
    let path = dir.join("0.log");
    let mut text = String::new();
    text += &rec(1, "stdout", "F", "one");
    text += &rec(2, "stderr", "P", "two-a");
    text += &rec(3, "stdout", "F", "three");
    text += &rec(4, "stderr", "F", "two-b");
    text += "not a record\n";
    text += &rec(5, "stdout", "P", "four-a");
    text += &rec(6, "stdout", "P", "four-b");
    text += &rec(7, "stdout", "F", "four-c");
    text += &rec(8, "stdout", "F", "");
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test]
async fn joins_partials_and_skips_garbage() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture(dir.path());
    assert_eq!(
        read_all(&path, LogOptions::default()).await,
        "one\nthree\ntwo-atwo-b\nfour-afour-bfour-c\n\n"
    );
}

#[tokio::test]
async fn tail_counts_joined_lines() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture(dir.path());
    let tail = |n| LogOptions {
        tail_lines: Some(n),
        ..Default::default()
    };
    assert_eq!(read_all(&path, tail(0)).await, "");
    assert_eq!(read_all(&path, tail(1)).await, "\n");
    assert_eq!(read_all(&path, tail(2)).await, "four-afour-bfour-c\n\n");
    // The stderr line started before "three": its first part is still found.
    assert_eq!(
        read_all(&path, tail(3)).await,
        "two-atwo-b\nfour-afour-bfour-c\n\n"
    );
    assert_eq!(
        read_all(&path, tail(4)).await,
        "three\ntwo-atwo-b\nfour-afour-bfour-c\n\n"
    );
    assert_eq!(
        read_all(&path, tail(100)).await,
        read_all(&path, LogOptions::default()).await
    );
}

#[tokio::test]
async fn timestamps_since_and_limit() {
    let dir = tempfile::tempdir().unwrap();
    let path = fixture(dir.path());
    let out = read_all(
        &path,
        LogOptions {
            timestamps: true,
            tail_lines: Some(2),
            ..Default::default()
        },
    )
    .await;
    // A joined line carries its first record's time, with nine fraction digits.
    assert_eq!(
        out,
        "2024-01-01T00:00:05.500000000Z four-afour-bfour-c\n2024-01-01T00:00:08.500000000Z \n"
    );
    let since = LogOptions {
        since_time: Some(DateTime::parse_from_rfc3339("2024-01-01T00:00:03Z").unwrap()),
        ..Default::default()
    };
    // "two" started at 00:02 and is left out with "one".
    assert_eq!(
        read_all(&path, since).await,
        "three\nfour-afour-bfour-c\n\n"
    );
    for limit in [1usize, 4, 5, 9, 14] {
        let out = read_all(
            &path,
            LogOptions {
                limit_bytes: Some(limit as i64),
                ..Default::default()
            },
        )
        .await;
        assert_eq!(out, "one\nthree\ntwo-atwo-b\n"[..limit].to_string());
    }
    // sinceSeconds relative to now: everything in the fixture is older.
    let recent = LogOptions {
        since_seconds: Some(60),
        ..Default::default()
    };
    assert_eq!(read_all(&path, recent).await, "");
}

#[tokio::test]
async fn unfinished_lines_end_the_log_without_newline() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.log");
    let text = rec(1, "stdout", "F", "a") + &rec(2, "stdout", "P", "no newline");
    std::fs::write(&path, text + "2024-01-01T00:00:03Z stdout F cut").unwrap();
    // A record without its newline at the end is shown too, as kubelet does.
    assert_eq!(
        read_all(&path, LogOptions::default()).await,
        "a\nno newlinecut\n"
    );
    std::fs::write(
        &path,
        rec(1, "stdout", "F", "a") + &rec(2, "stdout", "P", "open"),
    )
    .unwrap();
    assert_eq!(read_all(&path, LogOptions::default()).await, "a\nopen");
    // The unfinished line is the newest one and counts for tailLines.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(rec(3, "stderr", "F", "b").as_bytes()).unwrap();
    f.write_all(rec(4, "stdout", "P", "-more").as_bytes())
        .unwrap();
    let tail = |n| LogOptions {
        tail_lines: Some(n),
        ..Default::default()
    };
    assert_eq!(read_all(&path, tail(1)).await, "open-more");
    assert_eq!(read_all(&path, tail(2)).await, "b\nopen-more");
    assert_eq!(read_all(&path, tail(3)).await, "a\nb\nopen-more");
}

#[tokio::test]
async fn reads_across_rotated_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("2.log");
    let t = Utc::now();
    std::fs::write(
        rotated_path(&path, t - chrono::Duration::seconds(2)),
        rec(1, "stdout", "F", "r1") + &rec(2, "stdout", "P", "long-"),
    )
    .unwrap();
    std::fs::write(
        rotated_path(&path, t - chrono::Duration::seconds(1)),
        rec(3, "stdout", "F", "line") + &rec(4, "stderr", "F", "r2"),
    )
    .unwrap();
    std::fs::write(&path, rec(5, "stdout", "F", "cur")).unwrap();
    // Another instance's files are not read.
    std::fs::write(dir.path().join("1.log"), rec(0, "stdout", "F", "old")).unwrap();
    assert_eq!(
        read_all(&path, LogOptions::default()).await,
        "r1\nlong-line\nr2\ncur\n"
    );
    let tail = |n| LogOptions {
        tail_lines: Some(n),
        ..Default::default()
    };
    assert_eq!(read_all(&path, tail(3)).await, "long-line\nr2\ncur\n");
    assert_eq!(read_all(&path, tail(2)).await, "r2\ncur\n");
    // Only rotated files left (the current one not yet created).
    std::fs::remove_file(&path).unwrap();
    assert_eq!(read_all(&path, tail(1)).await, "r2\n");
}

#[tokio::test]
async fn missing_log_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = read_logs(
        dir.path().join("0.log"),
        LogOptions::default(),
        not_running(),
    )
    .await;
    assert!(matches!(err, Err(LogReadError::Open { .. })));
}

#[tokio::test]
async fn follow_sees_appends_and_rotation_and_stops_with_the_container() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.log");
    std::fs::write(&path, rec(1, "stdout", "F", "first")).unwrap();
    let running = Arc::new(AtomicBool::new(true));
    let probe = {
        let running = Arc::clone(&running);
        Arc::new(move || running.load(Ordering::SeqCst)) as RunningProbe
    };
    let opts = LogOptions {
        follow: true,
        tail_lines: Some(1),
        ..Default::default()
    };
    let mut stream = read_logs(path.clone(), opts, probe).await.unwrap();
    let mut seen = String::new();
    async fn until(stream: &mut LogStream, seen: &mut String, want: &str) {
        while !seen.contains(want) {
            // Bounded so that a follower that misses a write fails instead of hanging.
            let chunk = tokio::time::timeout(Duration::from_secs(30), stream.next())
                .await
                .unwrap_or_else(|_| panic!("{want:?} never came; got {seen:?}"))
                .unwrap()
                .unwrap();
            seen.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }
    until(&mut stream, &mut seen, "first\n").await;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(rec(2, "stdout", "P", "sec").as_bytes())
        .unwrap();
    f.write_all(rec(3, "stdout", "F", "ond").as_bytes())
        .unwrap();
    until(&mut stream, &mut seen, "second\n").await;
    // Rotate: more lines in the old file, then a new file.
    f.write_all(rec(4, "stdout", "F", "third").as_bytes())
        .unwrap();
    drop(f);
    std::fs::rename(&path, rotated_path(&path, Utc::now())).unwrap();
    std::fs::write(&path, rec(5, "stderr", "F", "fourth")).unwrap();
    until(&mut stream, &mut seen, "fourth\n").await;
    assert_eq!(seen, "first\nsecond\nthird\nfourth\n");
    // The container stops after a last line: it is shown, then the stream ends.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(rec(6, "stdout", "F", "last").as_bytes())
        .unwrap();
    running.store(false, Ordering::SeqCst);
    while let Some(chunk) = stream.next().await {
        seen.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
    }
    assert_eq!(seen, "first\nsecond\nthird\nfourth\nlast\n");
}

#[tokio::test]
async fn follower_stops_when_the_client_goes_away() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("0.log");
    std::fs::write(&path, rec(1, "stdout", "F", "x")).unwrap();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    // The probe reports each call; once the stream is dropped, calls must stop.
    let probe: RunningProbe = Arc::new(move || {
        let _ = done_tx.send(());
        true
    });
    let opts = LogOptions {
        follow: true,
        ..Default::default()
    };
    let mut stream = read_logs(path, opts, probe).await.unwrap();
    assert_eq!(&stream.next().await.unwrap().unwrap()[..], b"x\n");
    done_rx.recv().unwrap();
    drop(stream);
    // The worker notices the closed channel and exits, dropping the probe (and the sender).
    loop {
        match done_rx.recv_timeout(Duration::from_secs(30)) {
            Ok(()) => continue,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                panic!("the follower kept running after its client left")
            }
        }
    }
}
