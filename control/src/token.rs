//! `cairn-control token create`: a join token for nodes. It stores an upstream bootstrap
//! token (Secret `kube-system/bootstrap-token-<id>`, expiring after `--ttl` like
//! kubeadm's 24 h default) through the admin kubeconfig and prints it in k3s's secure
//! form, `K10<sha256 of the cluster CA>::<id>.<secret>`, which pins the CA.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use rand::Rng;

#[derive(clap::Subcommand)]
pub enum TokenCommand {
    /// Create a join token and print it.
    Create {
        #[arg(long, default_value = "/var/lib/cairn/control")]
        data_dir: PathBuf,
        /// Admin kubeconfig to store the token with (default: the data dir's).
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// Lifetime (`24h`, `90m`); `0` never expires.
        #[arg(long, default_value = "24h")]
        ttl: String,
        #[arg(long, default_value = "cairn join token")]
        description: String,
    },
}

const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";

fn random_part(len: usize) -> String {
    let mut rng = rand::rng();
    (0..len)
        .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
        .collect()
}

fn bootstrap_secret(id: &str, secret: &str, ttl: Duration, description: &str) -> Secret {
    let mut data = std::collections::BTreeMap::from([
        ("token-id".to_string(), id.to_string()),
        ("token-secret".to_string(), secret.to_string()),
        (
            "usage-bootstrap-authentication".to_string(),
            "true".to_string(),
        ),
        ("usage-bootstrap-signing".to_string(), "true".to_string()),
        ("description".to_string(), description.to_string()),
    ]);
    if !ttl.is_zero() {
        let expires = chrono::Utc::now() + ttl;
        let at = expires.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        data.insert("expiration".to_string(), at);
    }
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("bootstrap-token-{id}")),
            namespace: Some("kube-system".into()),
            ..Default::default()
        },
        type_: Some("bootstrap.kubernetes.io/token".into()),
        string_data: Some(data),
        ..Default::default()
    }
}

pub async fn run(
    command: TokenCommand,
    ttl_parse: fn(&str, &str) -> anyhow::Result<Duration>,
) -> anyhow::Result<()> {
    let TokenCommand::Create {
        data_dir,
        kubeconfig,
        ttl,
        description,
    } = command;
    let ttl = ttl_parse("ttl", &ttl)?;
    let ca_path = data_dir.join("pki").join("ca.crt");
    let ca = std::fs::read(&ca_path).with_context(|| {
        format!(
            "reading the cluster CA {} (start `cairn-control serve` first)",
            ca_path.display()
        )
    })?;
    let kubeconfig = kubeconfig.unwrap_or_else(|| data_dir.join(cairn_pki::ADMIN_KUBECONFIG));
    let client = super::client_from_kubeconfig(&kubeconfig).await?;
    let (id, secret) = (random_part(6), random_part(16));
    let secrets: Api<Secret> = Api::namespaced(client, "kube-system");
    secrets
        .create(
            &PostParams::default(),
            &bootstrap_secret(&id, &secret, ttl, &description),
        )
        .await
        .context("storing the bootstrap token")?;
    println!("{}", cairn_pki::join::JoinToken::new(&ca, &id, &secret));
    Ok(())
}
