//! `cairn-control migrate --to etcd://…`: moves a cluster from the embedded SQLite store
//! into an empty etcd, keeping every object and keeping resourceVersions monotonic for
//! clients (see `cairn_store_etcd::migrate`). cairn-control must be stopped; afterwards
//! every replica serves with `--store etcd` and a copy of this data dir (its PKI and
//! encryption key: Secrets are copied still encrypted).

use std::path::PathBuf;

use anyhow::Context;
use cairn_store_etcd::EtcdConfig;

use crate::store_args::EtcdArgs;

#[derive(clap::Args)]
pub struct MigrateArgs {
    /// The data dir whose `store.db` moves.
    #[arg(long, default_value = "/var/lib/cairn/control")]
    data_dir: PathBuf,
    /// etcd client URLs, comma-separated: `etcd://HOST:PORT` (https with --etcd-cafile,
    /// http without) or `http(s)://HOST:PORT`.
    #[arg(long, value_delimiter = ',', required = true)]
    to: Vec<String>,
    #[command(flatten)]
    etcd: EtcdArgs,
}

impl MigrateArgs {
    fn etcd(self) -> anyhow::Result<EtcdConfig> {
        let scheme = match self.etcd.etcd_cafile {
            Some(_) => "https",
            None => "http",
        };
        let endpoints = self
            .to
            .iter()
            .map(|url| endpoint(url, scheme))
            .collect::<anyhow::Result<Vec<_>>>()?;
        self.etcd.config(endpoints, "--to")
    }
}

/// One `--to` URL as the etcd client's endpoint.
fn endpoint(url: &str, scheme: &str) -> anyhow::Result<String> {
    if let Some(host) = url.strip_prefix("etcd://") {
        anyhow::ensure!(!host.is_empty(), "--to {url}: no host");
        return Ok(format!("{scheme}://{host}"));
    }
    anyhow::ensure!(
        url.starts_with("http://") || url.starts_with("https://"),
        "--to {url}: not an etcd URL (etcd://HOST:PORT, http:// or https://)"
    );
    Ok(url.to_string())
}

pub async fn run(args: MigrateArgs) -> anyhow::Result<()> {
    let data_dir = args.data_dir.clone();
    let db = data_dir.join("store.db");
    anyhow::ensure!(db.exists(), "{}: no store to migrate", db.display());
    let _lock = cairn_store::sqlite::DataDirLock::take(&data_dir)
        .context("cairn-control must be stopped to migrate its store")?;
    let etcd = args.etcd()?;
    let endpoints = etcd.endpoints.join(",");
    let source = cairn_store::sqlite::SqliteBackend::open(&data_dir)
        .with_context(|| format!("opening {}", db.display()))?;
    let migrated = cairn_store_etcd::migrate::migrate(source.as_ref(), &etcd)
        .await
        .with_context(|| format!("migrating {} to etcd at {endpoints}", db.display()))?;
    println!(
        "migrated {} keys from {} (revision {}) to etcd at {endpoints}: revision {} there, \
         older revisions compacted (clients relist)",
        migrated.keys,
        db.display(),
        migrated.source_revision,
        migrated.revision
    );
    println!(
        "serve with: cairn-control serve --data-dir {} --store etcd --etcd-servers {endpoints}",
        data_dir.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::endpoint;

    #[test]
    fn to_urls_become_etcd_endpoints_or_one_clear_error() {
        assert_eq!(
            endpoint("etcd://10.0.0.1:2379", "http").unwrap(),
            "http://10.0.0.1:2379"
        );
        assert_eq!(
            endpoint("etcd://a:2379", "https").unwrap(),
            "https://a:2379"
        );
        assert_eq!(
            endpoint("https://a:2379", "http").unwrap(),
            "https://a:2379"
        );
        assert_eq!(
            endpoint("a:2379", "http").unwrap_err().to_string(),
            "--to a:2379: not an etcd URL (etcd://HOST:PORT, http:// or https://)"
        );
        assert!(endpoint("etcd://", "http").is_err());
    }
}
