//! The CNI operations of the bridge plugin: ADD, DEL, CHECK, STATUS and GC.
//!
//! Host side: the bridge (created when missing, gateway addresses on it when
//! `isGateway`), one veth per attachment named `veth<hash of network, container,
//! ifname>` with the alias `cairn-cni:<network>:<container>:<ifname>` (so DEL works
//! without the netns and GC finds leftovers), attached to the bridge. The veth's peer is
//! created directly inside the pod's namespace with its final name, in the same netlink
//! request, so no half-moved interface can be left behind.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use cairn_netlink::{disable_dad, open_netns, Netlink, NetlinkError, NetnsGuard, VethSpec, EEXIST};
use ipnetwork::IpNetwork;
use rscni_plugin::cni::Cni;
use rscni_plugin::error::Error as CniError;
use rscni_plugin::types::{Args, CNIResult, Dns, Interface, IpConfig, Route};

use crate::config::{self, ConfigError, NetConf, Strictness};
use crate::ipam::{Allocation, IpamError, Store};
use crate::masq::{self, MasqError};

mod add;
mod check;
mod del;
mod status;

pub use add::add;
pub use check::check;
pub use del::del;
pub use status::{gc, status};

/// Error codes of this plugin above the spec's reserved range.
pub const CODE_NETLINK: u32 = 100;
pub const CODE_MASQ: u32 = 101;
pub const CODE_CHECK: u32 = 102;
pub const CODE_DUPLICATE: u32 = 103;
pub const CODE_INTERNAL: u32 = 104;
pub const CODE_REQUESTED_UNAVAILABLE: u32 = 105;

#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Ipam(#[from] IpamError),
    #[error(transparent)]
    Netlink(#[from] NetlinkError),
    #[error(transparent)]
    Masq(#[from] MasqError),
    #[error("CNI_NETNS {path}: {source}")]
    Netns { path: PathBuf, source: NetlinkError },
    #[error("missing {0}")]
    MissingEnv(&'static str),
    #[error("start async runtime: {0}")]
    Runtime(std::io::Error),
    #[error("{0}")]
    Check(String),
    #[error("{0}")]
    NotReady(String),
    #[error("{0}")]
    InvalidConfig(String),
    #[error("write {path}: {source}")]
    Sysctl {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Multiple(Vec<PluginError>),
}

impl From<PluginError> for CniError {
    fn from(e: PluginError) -> Self {
        let details = e.to_string();
        match e {
            PluginError::Config(ConfigError::Decode(_)) => CniError::FailedToDecode(details),
            PluginError::Config(ConfigError::Unsupported { .. }) => {
                CniError::UnsupportedNetworkConfiguration(details)
            }
            PluginError::Config(_) | PluginError::InvalidConfig(_) => {
                CniError::InvalidNetworkConfig(details)
            }
            PluginError::Ipam(IpamError::Exhausted(_)) => CniError::TryAgainLater(details),
            PluginError::Ipam(IpamError::RequestedOutOfRange(_)) => {
                CniError::InvalidNetworkConfig(details)
            }
            PluginError::Ipam(IpamError::RequestedUnavailable { .. }) => CniError::Custom(
                CODE_REQUESTED_UNAVAILABLE,
                "requested IP address unavailable".into(),
                details,
            ),
            PluginError::Ipam(IpamError::Duplicate { .. }) => {
                CniError::Custom(CODE_DUPLICATE, "duplicate allocation".into(), details)
            }
            PluginError::Ipam(_) | PluginError::Sysctl { .. } => CniError::IOFailure(details),
            PluginError::Netns { .. } | PluginError::MissingEnv(_) => {
                CniError::InvalidEnvValue(details)
            }
            PluginError::Netlink(_) => {
                CniError::Custom(CODE_NETLINK, "netlink operation failed".into(), details)
            }
            PluginError::Masq(_) => {
                CniError::Custom(CODE_MASQ, "IP masquerade setup failed".into(), details)
            }
            PluginError::Check(_) => CniError::Custom(CODE_CHECK, "check failed".into(), details),
            PluginError::NotReady(_) => CniError::PluginNotAvailable(details),
            PluginError::Runtime(_) | PluginError::Multiple(_) => {
                CniError::Custom(CODE_INTERNAL, "operation failed".into(), details)
            }
        }
    }
}

/// The per-invocation context taken from the environment and stdin.
#[derive(Debug, Clone)]
pub struct Ctx {
    pub id: String,
    pub ifname: String,
    pub netns: Option<PathBuf>,
    pub conf: NetConf,
    /// Addresses asked for: `IP=` in CNI_ARGS, `args.cni.ips`, runtimeConfig `ips`.
    pub requested: Vec<IpAddr>,
}

impl Ctx {
    /// The host end's name: `veth` + 8 hex digits of a hash of the attachment.
    pub fn host_veth(&self) -> String {
        host_veth_name(&self.conf.name, &self.id, &self.ifname)
    }

    fn alias(&self) -> String {
        masq::tag(&self.conf.name, &self.id, &self.ifname)
    }
}

/// The host veth name of an attachment.
pub fn host_veth_name(network: &str, id: &str, ifname: &str) -> String {
    let h = crate::fnv64(&[network, id, ifname]);
    format!("veth{:08x}", (h >> 32) ^ (h & 0xffff_ffff))
}

fn conf_from_args(args: &Args, strict: Strictness) -> Result<NetConf, PluginError> {
    let v = serde_json::to_value(args.config())
        .map_err(|e| PluginError::Config(ConfigError::Decode(e.to_string())))?;
    let raw = config::parse_raw(&v)?;
    Ok(config::resolve(&raw, strict)?)
}

fn ctx_from_args(args: &Args, strict: Strictness) -> Result<Ctx, PluginError> {
    Ok(Ctx {
        id: args
            .container_id()
            .map(|c| c.to_string())
            .ok_or(PluginError::MissingEnv("CNI_CONTAINERID"))?,
        ifname: args
            .ifname()
            .map(|i| i.to_string())
            .ok_or(PluginError::MissingEnv("CNI_IFNAME"))?,
        netns: args.netns().cloned().filter(|p| !p.as_os_str().is_empty()),
        conf: conf_from_args(args, strict)?,
        requested: requested_ips(args)?,
    })
}

/// Parses one requested address (`10.0.0.5` or `10.0.0.5/24`).
fn parse_requested(field: &str, s: &str) -> Result<IpAddr, PluginError> {
    let ip = s.split('/').next().unwrap_or(s).trim();
    ip.parse().map_err(|e| {
        PluginError::InvalidConfig(format!("{field}: {s:?} is not an IP address: {e}"))
    })
}

fn requested_from_list(
    field: &str,
    v: Option<&serde_json::Value>,
) -> Result<Vec<IpAddr>, PluginError> {
    let mut out = Vec::new();
    for item in v.and_then(|v| v.as_array()).into_iter().flatten() {
        let s = item.as_str().ok_or_else(|| {
            PluginError::InvalidConfig(format!("{field}: {item} is not a string"))
        })?;
        out.push(parse_requested(field, s)?);
    }
    Ok(out)
}

/// host-local's static address requests, in its order of precedence: runtimeConfig
/// `ips`, then `args.cni.ips`, then `IP=` (comma-separated) in CNI_ARGS.
fn requested_ips(args: &Args) -> Result<Vec<IpAddr>, PluginError> {
    let conf = args.config();
    let rt = requested_from_list(
        "runtimeConfig.ips",
        conf.runtime_config
            .as_ref()
            .and_then(|r| r.custom.get("ips")),
    )?;
    if !rt.is_empty() {
        return Ok(rt);
    }
    let cni_args = requested_from_list(
        "args.cni.ips",
        conf.args
            .as_ref()
            .and_then(|a| a.get("cni"))
            .and_then(|c| c.get("ips")),
    )?;
    if !cni_args.is_empty() {
        return Ok(cni_args);
    }
    let mut out = Vec::new();
    for kv in args.args().unwrap_or_default().split(';') {
        if let Some(("IP", v)) = kv.split_once('=') {
            for ip in v.split(',').filter(|s| !s.is_empty()) {
                out.push(parse_requested("CNI_ARGS IP", ip)?);
            }
        }
    }
    Ok(out)
}

fn block_on<F: std::future::Future>(f: F) -> Result<F::Output, PluginError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(PluginError::Runtime)?;
    Ok(rt.block_on(f))
}

/// The plugin.
pub struct Bridge;

impl Cni for Bridge {
    fn add(&self, args: Args) -> Result<CNIResult, CniError> {
        let ctx = ctx_from_args(&args, Strictness::Strict)?;
        Ok(block_on(add(&ctx))??)
    }

    fn del(&self, args: Args) -> Result<(), CniError> {
        let ctx = ctx_from_args(&args, Strictness::Lenient)?;
        Ok(block_on(del(&ctx))??)
    }

    fn check(&self, args: Args) -> Result<(), CniError> {
        let ctx = ctx_from_args(&args, Strictness::Lenient)?;
        let prev = args.config().prev_result.clone().ok_or_else(|| {
            PluginError::InvalidConfig("CHECK requires prevResult in the configuration".into())
        })?;
        Ok(block_on(check(&ctx, &prev))??)
    }

    fn status(&self, args: Args) -> Result<(), CniError> {
        let conf = match conf_from_args(&args, Strictness::Strict) {
            Err(PluginError::Config(
                e @ (ConfigError::SubnetFile { .. } | ConfigError::SubnetFileContent { .. }),
            )) => return Err(PluginError::NotReady(e.to_string()).into()),
            other => other?,
        };
        Ok(status(&conf)?)
    }

    fn gc(&self, args: Args) -> Result<(), CniError> {
        let conf = conf_from_args(&args, Strictness::Lenient)?;
        // Without the list every attachment would look stale: refuse rather than wipe.
        let list = args.config().valid_attachments.as_ref().ok_or_else(|| {
            PluginError::InvalidConfig("GC requires cni.dev/valid-attachments".into())
        })?;
        let valid: HashSet<(String, String)> = list
            .iter()
            .map(|a| (a.container_id.clone(), a.ifname.clone()))
            .collect();
        Ok(block_on(gc(&conf, &valid))??)
    }
}

fn netns_err(path: &Path) -> impl FnOnce(NetlinkError) -> PluginError + '_ {
    move |source| PluginError::Netns {
        path: path.to_path_buf(),
        source,
    }
}

fn is_link_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    }
}
