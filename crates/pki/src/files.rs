//! Writing PEM files: atomically (a reader never sees half a key) and with the mode set
//! before the contents arrive, so a private key is never readable by others, not even
//! for a moment.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::PkiError;

/// Writes `contents` to `path` through a temporary file in the same directory.
pub fn write_atomic(path: &Path, contents: &[u8], mode: u32) -> Result<(), PkiError> {
    let io = |source| PkiError::Io {
        path: path.to_path_buf(),
        source,
    };
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .map_err(io)?;
    file.write_all(contents).map_err(io)?;
    file.sync_all().map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

/// A private key or anything holding one: owner read/write only.
pub fn write_private(path: &Path, contents: &[u8]) -> Result<(), PkiError> {
    write_atomic(path, contents, 0o600)
}

/// A certificate: world-readable, as kubeadm leaves `ca.crt`.
pub fn write_public(path: &Path, contents: &[u8]) -> Result<(), PkiError> {
    write_atomic(path, contents, 0o644)
}

pub fn read(path: &Path) -> Result<String, PkiError> {
    std::fs::read_to_string(path).map_err(|source| PkiError::Io {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn private_files_are_0600_and_replace_the_old_contents() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k.key");
        write_private(&p, b"one").unwrap();
        write_private(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
