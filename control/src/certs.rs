//! `cairn-control kubeconfig` and `cairn-control certs check|etcd`: read the data dir's
//! PKI, issue a client certificate, list every certificate with its expiry, make an etcd
//! member's certificates.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Subcommand;

#[derive(Subcommand)]
pub enum CertsCommand {
    /// List every certificate of the data dir with its expiry.
    Check {
        #[arg(long, default_value = "/var/lib/cairn/control")]
        data_dir: PathBuf,
    },
    /// Make an etcd member's CA and certificates, as kubeadm's `init phase certs etcd-*`:
    /// the CA when missing (copy it to the other members' dirs first), the server and peer
    /// certificates and cairn-control's client certificate.
    Etcd {
        /// Where the files go (kubeadm's `/etc/kubernetes/pki/etcd`).
        #[arg(long, default_value = "/etc/cairn/etcd-pki")]
        dir: PathBuf,
        /// The member's name (etcd's `--name`).
        #[arg(long)]
        name: String,
        /// An address or DNS name peers and clients reach the member at (repeatable).
        #[arg(long = "address")]
        addresses: Vec<String>,
    },
}

fn load(data_dir: &Path) -> anyhow::Result<cairn_pki::ClusterPki> {
    cairn_pki::ClusterPki::load(data_dir, cairn_pki::Lifetimes::default()).with_context(|| {
        format!(
            "no cluster certificates in {} (start `cairn-control serve` first)",
            data_dir.join("pki").display()
        )
    })
}

pub fn print_kubeconfig(
    data_dir: &Path,
    server: Option<String>,
    user: Option<String>,
    groups: &[String],
) -> anyhow::Result<()> {
    let url = match server {
        Some(s) => s,
        None => cairn_apiserver::server_url_from_data_dir(data_dir).with_context(|| {
            format!(
                "no server URL recorded in {} (start `cairn-control serve` first, or pass --server)",
                data_dir.display()
            )
        })?,
    };
    let (user, groups) = match user {
        Some(u) => (u, groups.to_vec()),
        None if groups.is_empty() => (
            cairn_apiserver::ADMIN_USER.to_string(),
            vec![cairn_apiserver::ADMIN_GROUP.to_string()],
        ),
        None => anyhow::bail!("--group needs --user"),
    };
    let kc = load(data_dir)?.client_kubeconfig(&url, &user, &groups)?;
    print!("{kc}");
    Ok(())
}

pub fn run(command: CertsCommand) -> anyhow::Result<()> {
    match command {
        CertsCommand::Check { data_dir } => check(&data_dir),
        CertsCommand::Etcd {
            dir,
            name,
            addresses,
        } => {
            cairn_pki::etcd::ensure_member(&dir, &name, &addresses, Default::default())
                .with_context(|| format!("etcd certificates in {}", dir.display()))?;
            println!("etcd certificates for {name} in {}", dir.display());
            Ok(())
        }
    }
}

fn check(data_dir: &Path) -> anyhow::Result<()> {
    let pki = load(data_dir)?;
    let now = cairn_pki::inspect::now();
    println!(
        "{:<28} {:<22} {:<14} {:<10} FILE",
        "CERTIFICATE", "EXPIRES", "RESIDUAL TIME", "STATUS"
    );
    for entry in pki.check(data_dir) {
        let info = &entry.info;
        let expires = chrono::DateTime::from_timestamp(info.not_after, 0)
            .map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string())
            .unwrap_or_default();
        let status = if info.expired(now) {
            "expired"
        } else if info.renewal_due(now) {
            "renew-due"
        } else {
            "ok"
        };
        println!(
            "{:<28} {:<22} {:<14} {:<10} {}",
            info.common_name,
            expires,
            residual(info.not_after - now),
            status,
            entry.file.display()
        );
    }
    Ok(())
}

/// kubeadm's `certs check-expiration` style: `364d`, `9y`, `5h`, `42s`.
fn residual(secs: i64) -> String {
    match secs {
        s if s < 0 => "0s".into(),
        s if s >= 2 * 365 * 86400 => format!("{}y", s / (365 * 86400)),
        s if s >= 86400 => format!("{}d", s / 86400),
        s if s >= 3600 => format!("{}h", s / 3600),
        s if s >= 60 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}
