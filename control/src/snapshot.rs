//! `cairn-control snapshot save|restore`: backups of the cluster's store.
//!
//! `save` works while the server runs: on SQLite a consistent copy of `store.db`, on etcd
//! etcd's own snapshot (restored with `etcdctl snapshot restore`, as for any Kubernetes
//! cluster on etcd). `restore` is for the embedded store and refuses while a server uses
//! it. The restored store's revision is raised by `--bump-revision`, and every older
//! revision is marked compacted, as `etcdutl snapshot restore --bump-revision
//! --mark-compacted` does. Clients' resourceVersions therefore never go back, and their
//! watches get 410 Gone and relist.

use std::path::PathBuf;

use anyhow::Context;

use crate::store_args::StoreArgs;

#[derive(clap::Subcommand)]
pub enum SnapshotCommand {
    /// Save the store to FILE (the server may be running).
    Save {
        file: PathBuf,
        #[arg(long, default_value = "/var/lib/cairn/control")]
        data_dir: PathBuf,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Replace the embedded store in --data-dir with FILE (cairn-control stopped).
    Restore {
        file: PathBuf,
        #[arg(long, default_value = "/var/lib/cairn/control")]
        data_dir: PathBuf,
        /// How far the restored revision moves on (upstream's docs suggest 1000000000).
        #[arg(long, default_value_t = 1_000_000_000)]
        bump_revision: i64,
    },
}

pub async fn run(command: SnapshotCommand) -> anyhow::Result<()> {
    match command {
        SnapshotCommand::Save {
            file,
            data_dir,
            store,
        } => match store.etcd()? {
            Some(etcd) => {
                let backend = cairn_store_etcd::EtcdBackend::connect(&etcd).await?;
                let size = backend.save_snapshot(&file).await?;
                println!("saved etcd's snapshot ({size} bytes) to {}", file.display());
                Ok(())
            }
            None => {
                let revision = cairn_store::sqlite::snapshot::save(&data_dir, &file)?;
                println!(
                    "saved the store at revision {revision} to {}",
                    file.display()
                );
                Ok(())
            }
        },
        SnapshotCommand::Restore {
            file,
            data_dir,
            bump_revision,
        } => {
            anyhow::ensure!(
                bump_revision >= 0,
                "--bump-revision {bump_revision}: must not be negative"
            );
            let revision = cairn_store::sqlite::snapshot::restore(&file, &data_dir, bump_revision)
                .with_context(|| {
                    format!("restoring {} into {}", file.display(), data_dir.display())
                })?;
            println!(
                "restored {} into {}: revision {revision}, older revisions compacted (clients relist)",
                file.display(),
                data_dir.display()
            );
            Ok(())
        }
    }
}
