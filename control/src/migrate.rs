//! `cairn-control migrate --to etcd://…`: moves a cluster from the embedded SQLite store
//! into an empty etcd, keeping every object and keeping resourceVersions monotonic for
//! clients (see `cairn_store_etcd::migrate`). cairn-control must be stopped; afterwards
//! every replica serves with `--store etcd` and a copy of this data dir (its PKI and
//! encryption key: Secrets are copied still encrypted).

use std::path::PathBuf;

use anyhow::Context;
use cairn_store_etcd::{EtcdConfig, EtcdTls};

#[derive(clap::Args)]
pub struct MigrateArgs {
    /// The data dir whose `store.db` moves.
    #[arg(long, default_value = "/var/lib/cairn/control")]
    data_dir: PathBuf,
    /// etcd client URLs, comma-separated: `etcd://HOST:PORT` (https with --etcd-cafile,
    /// http without) or `http(s)://HOST:PORT`.
    #[arg(long, value_delimiter = ',', required = true)]
    to: Vec<String>,
    /// Put before every key in etcd (as `serve --etcd-prefix`).
    #[arg(long, default_value = "")]
    etcd_prefix: String,
    #[arg(long)]
    etcd_cafile: Option<PathBuf>,
    #[arg(long)]
    etcd_certfile: Option<PathBuf>,
    #[arg(long)]
    etcd_keyfile: Option<PathBuf>,
}

impl MigrateArgs {
    fn etcd(self) -> anyhow::Result<EtcdConfig> {
        anyhow::ensure!(
            self.etcd_certfile.is_some() == self.etcd_keyfile.is_some(),
            "--etcd-certfile and --etcd-keyfile go together"
        );
        let scheme = if self.etcd_cafile.is_some() {
            "https"
        } else {
            "http"
        };
        let endpoints = self
            .to
            .iter()
            .map(|url| endpoint(url, scheme))
            .collect::<anyhow::Result<Vec<_>>>()?;
        anyhow::ensure!(
            self.etcd_cafile.is_some() || endpoints.iter().all(|e| e.starts_with("http://")),
            "--to with https:// needs --etcd-cafile"
        );
        Ok(EtcdConfig {
            endpoints,
            prefix: self.etcd_prefix,
            tls: self.etcd_cafile.map(|ca| EtcdTls {
                ca,
                cert: self.etcd_certfile,
                key: self.etcd_keyfile,
            }),
        })
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
