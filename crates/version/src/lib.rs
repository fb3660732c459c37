//! What `--version` prints in every cairn binary: Cargo.toml's version and the commit.

/// The workspace's version (Cargo.toml's `workspace.package.version`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The git commit the binary was built from (`unknown` outside a checkout).
pub const COMMIT: &str = env!("CAIRN_GIT_COMMIT");

/// `0.1.0 (commit 3c96707…)`: clap's `version` for every binary.
pub const LONG: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("CAIRN_GIT_COMMIT"),
    ")"
);

#[cfg(test)]
mod tests {
    #[test]
    fn the_long_version_names_the_version_and_a_commit() {
        assert!(super::LONG.starts_with(super::VERSION));
        assert!(super::LONG.ends_with(')'));
        assert!(!super::COMMIT.is_empty());
    }
}
