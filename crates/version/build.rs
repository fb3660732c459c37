//! Stamps the git commit into `CAIRN_GIT_COMMIT`: `$CAIRN_GIT_COMMIT` if set (a build
//! from a source tarball, a package build that knows it), else `git rev-parse HEAD` of
//! the checkout, else `unknown`. Re-runs when HEAD moves, so only this crate rebuilds.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=CAIRN_GIT_COMMIT");
    let commit = std::env::var("CAIRN_GIT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=CAIRN_GIT_COMMIT={commit}");
}

fn git_commit() -> Option<String> {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").ok()?;
    let out = Command::new("git")
        .args(["rev-parse", "--git-dir", "HEAD"])
        .current_dir(&manifest)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let mut lines = text.lines();
    let git_dir = Path::new(&manifest).join(lines.next()?);
    let commit = lines.next()?.trim().to_string();
    // HEAD, and the branch file it names, change with every commit or checkout. Only
    // files that exist: cargo reruns the script on every build for a missing one.
    let mut watched = vec![git_dir.join("HEAD"), git_dir.join("packed-refs")];
    if let Ok(head) = std::fs::read_to_string(git_dir.join("HEAD")) {
        if let Some(reference) = head.trim().strip_prefix("ref: ") {
            watched.push(git_dir.join(reference));
        }
    }
    for path in watched.iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    Some(commit)
}
