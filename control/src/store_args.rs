//! `cairn-control serve`'s store flags: the embedded SQLite, or etcd with upstream's
//! `--etcd-*` flags.

use std::path::PathBuf;

use cairn_store_etcd::{EtcdConfig, EtcdTls};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum StoreKind {
    /// Embedded, in --data-dir: one control host.
    Sqlite,
    /// An etcd cluster (--etcd-servers), which several cairn-control replicas can share.
    Etcd,
}

/// Where the cluster's state is kept.
#[derive(clap::Args, Debug)]
pub struct StoreArgs {
    #[arg(long, value_enum, default_value = "sqlite")]
    store: StoreKind,
    /// etcd client URLs, comma-separated (`https://10.0.0.1:2379,https://10.0.0.2:2379`).
    #[arg(long, value_delimiter = ',')]
    etcd_servers: Vec<String>,
    #[command(flatten)]
    etcd: EtcdArgs,
}

/// How keys and TLS are set up in etcd, for `serve` and `migrate` alike.
#[derive(clap::Args, Debug)]
pub struct EtcdArgs {
    /// Put before every key in etcd, for clusters sharing one etcd (the keys themselves
    /// are `/registry/<group>/<resource>/…`).
    #[arg(long, default_value = "")]
    pub etcd_prefix: String,
    /// The CA of etcd's serving certificates (needed for https URLs).
    #[arg(long)]
    pub etcd_cafile: Option<PathBuf>,
    /// The client certificate etcd's --client-cert-auth asks for.
    #[arg(long)]
    etcd_certfile: Option<PathBuf>,
    #[arg(long)]
    etcd_keyfile: Option<PathBuf>,
}

impl EtcdArgs {
    /// The configuration for `endpoints`; contradicting flags are one clear error.
    pub fn config(self, endpoints: Vec<String>, flag: &str) -> anyhow::Result<EtcdConfig> {
        anyhow::ensure!(
            self.etcd_certfile.is_some() == self.etcd_keyfile.is_some(),
            "--etcd-certfile and --etcd-keyfile go together"
        );
        let https = endpoints.iter().any(|s| s.starts_with("https://"));
        anyhow::ensure!(
            !https || self.etcd_cafile.is_some(),
            "{flag} with https:// needs --etcd-cafile"
        );
        let tls = self.etcd_cafile.map(|ca| EtcdTls {
            ca,
            cert: self.etcd_certfile,
            key: self.etcd_keyfile,
        });
        Ok(EtcdConfig {
            endpoints,
            prefix: self.etcd_prefix,
            tls,
        })
    }
}

impl StoreArgs {
    /// The etcd configuration, None for SQLite; contradicting flags are one clear error.
    pub fn etcd(self) -> anyhow::Result<Option<EtcdConfig>> {
        if self.store == StoreKind::Sqlite {
            anyhow::ensure!(
                self.etcd_servers.is_empty() && self.etcd.etcd_cafile.is_none(),
                "--etcd-servers and --etcd-cafile need --store etcd"
            );
            return Ok(None);
        }
        anyhow::ensure!(
            !self.etcd_servers.is_empty(),
            "--store etcd needs --etcd-servers"
        );
        Ok(Some(self.etcd.config(self.etcd_servers, "--etcd-servers")?))
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::StoreArgs;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        store: StoreArgs,
    }

    fn etcd(args: &[&str]) -> Result<Option<cairn_store_etcd::EtcdConfig>, String> {
        let cli = Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        cli.store.etcd().map_err(|e| e.to_string())
    }

    #[test]
    fn store_flags_pick_sqlite_or_etcd_and_refuse_contradictions() {
        assert!(etcd(&[]).unwrap().is_none());
        let config = etcd(&[
            "--store",
            "etcd",
            "--etcd-servers",
            "http://a:2379,http://b:2379",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(config.endpoints, ["http://a:2379", "http://b:2379"]);
        assert_eq!(config.prefix, "");
        assert!(config.tls.is_none());
        for (args, error) in [
            (
                &["--store", "etcd"][..],
                "--store etcd needs --etcd-servers",
            ),
            (
                &["--etcd-servers", "http://a:2379"][..],
                "--etcd-servers and --etcd-cafile need --store etcd",
            ),
            (
                &["--store", "etcd", "--etcd-servers", "https://a:2379"][..],
                "--etcd-servers with https:// needs --etcd-cafile",
            ),
            (
                &[
                    "--store",
                    "etcd",
                    "--etcd-servers",
                    "http://a:2379",
                    "--etcd-certfile",
                    "c",
                ][..],
                "--etcd-certfile and --etcd-keyfile go together",
            ),
        ] {
            assert_eq!(etcd(args).unwrap_err(), error, "{args:?}");
        }
    }
}
