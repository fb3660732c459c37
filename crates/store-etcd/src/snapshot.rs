//! etcd's own snapshot, streamed from the member answering into a file: what
//! `etcdctl snapshot save` writes, restored with `etcdctl snapshot restore` (etcd 3.4) or
//! `etcdutl snapshot restore --bump-revision --mark-compacted` (3.5+).

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::EtcdBackend;

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("snapshot {path}: already exists")]
    Exists { path: PathBuf },
    #[error("writing the snapshot {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("etcd snapshot: {0}")]
    Etcd(#[from] etcd_client::Error),
}

impl EtcdBackend {
    /// Writes etcd's snapshot to `dest` (which must not exist); returns its size in bytes.
    pub async fn save_snapshot(&self, dest: &Path) -> Result<u64, SnapshotError> {
        if dest.exists() {
            return Err(SnapshotError::Exists {
                path: dest.to_path_buf(),
            });
        }
        let write_error = |source| SnapshotError::Write {
            path: dest.to_path_buf(),
            source,
        };
        let partial = dest.with_extension("part");
        let mut file = std::fs::File::create(&partial).map_err(write_error)?;
        let mut stream = self.client().snapshot().await?;
        let mut size = 0u64;
        let streamed: Result<(), SnapshotError> = async {
            while let Some(chunk) = stream.message().await? {
                file.write_all(chunk.blob()).map_err(write_error)?;
                size += chunk.blob().len() as u64;
            }
            file.sync_all().map_err(write_error)
        }
        .await;
        if let Err(e) = streamed.and_then(|()| std::fs::rename(&partial, dest).map_err(write_error))
        {
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
        Ok(size)
    }
}
