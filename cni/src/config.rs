//! Network configuration: the fields of the reference `bridge` + `host-local` plugins
//! (so an existing bridge conflist works by changing `type`), plus cairn mode, where the
//! node's subnet and MTU come from the subnet file the network controller writes.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use ipnetwork::IpNetwork;
use serde::Deserialize;
use serde_json::Value;

use crate::ipam::{Range, RangeSet};

/// Default location of the subnet file in cairn mode.
pub const DEFAULT_SUBNET_FILE: &str = "/run/cairn/subnet.env";
/// Default IPAM data directory, as host-local.
pub const DEFAULT_DATA_DIR: &str = "/var/lib/cni/networks";
/// Default bridge name, as the reference bridge plugin.
pub const DEFAULT_BRIDGE: &str = "cni0";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("decode network configuration: {0}")]
    Decode(String),
    #[error("network configuration field {field}: {msg}")]
    Invalid { field: String, msg: String },
    #[error("network configuration field {field}: {msg}")]
    Unsupported { field: String, msg: String },
    #[error("read subnet file {path}: {source}")]
    SubnetFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("subnet file {path}: {msg}")]
    SubnetFileContent { path: PathBuf, msg: String },
}

fn invalid(field: &str, msg: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field: field.to_string(),
        msg: msg.into(),
    }
}

/// The raw configuration as read from stdin (after the runtime's injection of `name`,
/// `cniVersion`, `prevResult`, `runtimeConfig`).
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct RawConf {
    #[serde(default)]
    pub cni_version: String,
    #[serde(default)]
    pub name: String,
    #[serde(default, rename = "type")]
    pub plugin_type: String,
    pub bridge: Option<String>,
    pub is_gateway: Option<bool>,
    pub is_default_gateway: Option<bool>,
    pub force_address: Option<bool>,
    pub ip_masq: Option<bool>,
    pub ip_masq_backend: Option<String>,
    pub mtu: Option<u32>,
    #[serde(default)]
    pub hairpin_mode: bool,
    #[serde(default)]
    pub promisc_mode: bool,
    pub vlan: Option<u32>,
    pub dns: Option<Value>,
    pub ipam: Option<RawIpam>,
    pub subnet_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct RawIpam {
    #[serde(default, rename = "type")]
    pub ipam_type: String,
    pub subnet: Option<String>,
    pub range_start: Option<String>,
    pub range_end: Option<String>,
    pub gateway: Option<String>,
    pub ranges: Option<Vec<Vec<RawRange>>>,
    pub routes: Option<Vec<RawRoute>>,
    pub data_dir: Option<PathBuf>,
    pub resolv_conf: Option<PathBuf>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct RawRange {
    pub subnet: String,
    pub range_start: Option<String>,
    pub range_end: Option<String>,
    pub gateway: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RawRoute {
    pub dst: String,
    pub gw: Option<String>,
}

/// A configured route for the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteConf {
    pub dst: IpNetwork,
    pub gw: Option<IpAddr>,
}

/// Masquerade backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MasqBackend {
    Iptables,
    Nftables,
}

/// The configuration with defaults applied, cairn mode resolved and ranges canonical.
#[derive(Debug, Clone)]
pub struct NetConf {
    pub name: String,
    pub bridge: String,
    pub is_gateway: bool,
    pub is_default_gateway: bool,
    pub force_address: bool,
    pub ip_masq: bool,
    pub masq_backend: Option<MasqBackend>,
    pub mtu: Option<u32>,
    pub hairpin: bool,
    pub promisc: bool,
    pub range_sets: Vec<RangeSet>,
    pub routes: Vec<RouteConf>,
    pub data_dir: PathBuf,
    pub dns: Option<Value>,
    pub resolv_conf: Option<PathBuf>,
    /// Destinations not masqueraded (the pod subnet, or the cluster network in cairn mode).
    pub masq_exclude: Vec<IpNetwork>,
    pub cairn_mode: bool,
}

impl NetConf {
    /// The network's IPAM state directory (`<dataDir>/<name>`).
    pub fn network_dir(&self) -> PathBuf {
        self.data_dir.join(&self.name)
    }
}

/// How strict resolution is: DEL and GC must work when the subnet file has gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strictness {
    Strict,
    Lenient,
}

/// Parses stdin JSON into the raw configuration.
pub fn parse_raw(v: &Value) -> Result<RawConf, ConfigError> {
    serde_json::from_value(v.clone()).map_err(|e| ConfigError::Decode(e.to_string()))
}

/// Applies defaults, reads the subnet file in cairn mode and canonicalizes ranges.
pub fn resolve(raw: &RawConf, strict: Strictness) -> Result<NetConf, ConfigError> {
    if let Some(vlan) = raw.vlan {
        if vlan != 0 {
            return Err(ConfigError::Unsupported {
                field: "vlan".into(),
                msg: format!("VLAN tagging ({vlan}) is not supported by cairn-cni"),
            });
        }
    }
    let ipam = raw.ipam.clone().unwrap_or_default();
    let cairn_mode = raw.ipam.is_none() || ipam.ipam_type == "cairn";
    if !cairn_mode && ipam.ipam_type != "host-local" {
        return Err(ConfigError::Unsupported {
            field: "ipam.type".into(),
            msg: format!(
                "IPAM type {:?} is not supported (use \"host-local\" or \"cairn\")",
                ipam.ipam_type
            ),
        });
    }
    let backend = masq_backend(raw.ip_masq_backend.as_deref())?;
    let ranges = if cairn_mode {
        cairn_ranges(raw, strict)?
    } else {
        ipam_ranges(raw.mtu, &ipam)?
    };
    let (mtu, range_sets, masq_exclude) = ranges;
    if let Some(mtu) = mtu {
        if !(68..=65535).contains(&mtu) {
            return Err(invalid("mtu", format!("{mtu} is outside 68..65535")));
        }
    }
    let routes = routes(&ipam)?;
    let is_default_gateway = raw.is_default_gateway.unwrap_or(cairn_mode);
    let is_gateway = raw.is_gateway.unwrap_or(cairn_mode) || is_default_gateway;
    Ok(NetConf {
        name: raw.name.clone(),
        bridge: raw
            .bridge
            .clone()
            .filter(|b| !b.is_empty())
            .unwrap_or_else(|| DEFAULT_BRIDGE.to_string()),
        is_gateway,
        is_default_gateway,
        // In cairn mode the controller owns the node subnet: follow it when it changes.
        force_address: raw.force_address.unwrap_or(cairn_mode),
        ip_masq: raw.ip_masq.unwrap_or(false),
        masq_backend: backend,
        mtu,
        hairpin: raw.hairpin_mode,
        promisc: raw.promisc_mode,
        range_sets,
        routes,
        data_dir: ipam
            .data_dir
            .clone()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_DIR)),
        dns: raw.dns.clone(),
        resolv_conf: ipam.resolv_conf.clone(),
        masq_exclude,
        cairn_mode,
    })
}

fn masq_backend(name: Option<&str>) -> Result<Option<MasqBackend>, ConfigError> {
    match name {
        None | Some("") => Ok(None),
        Some("iptables") => Ok(Some(MasqBackend::Iptables)),
        Some("nftables") => Ok(Some(MasqBackend::Nftables)),
        Some(other) => Err(invalid(
            "ipMasqBackend",
            format!("{other:?} is neither \"iptables\" nor \"nftables\""),
        )),
    }
}

/// The MTU, the range sets and the masquerade exclusions.
type Ranges = (Option<u32>, Vec<RangeSet>, Vec<IpNetwork>);

/// cairn mode: the node's subnet and MTU from the network controller's subnet file (not
/// there yet is an error only when strict).
fn cairn_ranges(raw: &RawConf, strict: Strictness) -> Result<Ranges, ConfigError> {
    let path = raw
        .subnet_file
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_SUBNET_FILE));
    match read_subnet_file(&path) {
        Ok(sf) => {
            let range = Range::new(sf.subnet, None, None, None)
                .map_err(|msg| ConfigError::SubnetFileContent { path, msg })?;
            let exclude = vec![sf.network.unwrap_or(range.subnet)];
            Ok((raw.mtu.or(sf.mtu), vec![vec![range]], exclude))
        }
        Err(e) if strict == Strictness::Strict => Err(e),
        Err(_) => Ok((raw.mtu, Vec::new(), Vec::new())),
    }
}

/// host-local IPAM: its ranges, each excluded from masquerading.
fn ipam_ranges(mtu: Option<u32>, ipam: &RawIpam) -> Result<Ranges, ConfigError> {
    let range_sets = ranges_from_ipam(ipam)?;
    let exclude = range_sets.iter().flatten().map(|r| r.subnet).collect();
    Ok((mtu, range_sets, exclude))
}

fn routes(ipam: &RawIpam) -> Result<Vec<RouteConf>, ConfigError> {
    let mut routes = Vec::new();
    for (i, r) in ipam.routes.iter().flatten().enumerate() {
        let dst = parse_net(&r.dst).map_err(|m| invalid(&format!("ipam.routes[{i}].dst"), m))?;
        let gw = match &r.gw {
            Some(g) if !g.is_empty() => Some(
                IpAddr::from_str(g)
                    .map_err(|e| invalid(&format!("ipam.routes[{i}].gw"), e.to_string()))?,
            ),
            _ => None,
        };
        routes.push(RouteConf { dst, gw });
    }
    Ok(routes)
}

fn parse_net(s: &str) -> Result<IpNetwork, String> {
    IpNetwork::from_str(s).map_err(|e| format!("{s:?} is not a CIDR: {e}"))
}

fn parse_ip(field: &str, s: &Option<String>) -> Result<Option<IpAddr>, ConfigError> {
    match s {
        Some(s) if !s.is_empty() => IpAddr::from_str(s)
            .map(Some)
            .map_err(|e| invalid(field, format!("{s:?}: {e}"))),
        _ => Ok(None),
    }
}

fn ranges_from_ipam(ipam: &RawIpam) -> Result<Vec<RangeSet>, ConfigError> {
    let mut raw_sets: Vec<Vec<RawRange>> = Vec::new();
    if let Some(subnet) = &ipam.subnet {
        raw_sets.push(vec![RawRange {
            subnet: subnet.clone(),
            range_start: ipam.range_start.clone(),
            range_end: ipam.range_end.clone(),
            gateway: ipam.gateway.clone(),
        }]);
    }
    raw_sets.extend(ipam.ranges.clone().unwrap_or_default());
    if raw_sets.is_empty() {
        return Err(invalid(
            "ipam",
            "no IP ranges specified (need subnet or ranges)",
        ));
    }
    let mut sets = Vec::new();
    for (i, rs) in raw_sets.iter().enumerate() {
        if rs.is_empty() {
            return Err(invalid(&format!("ipam.ranges[{i}]"), "empty range set"));
        }
        let mut set = Vec::new();
        for (j, r) in rs.iter().enumerate() {
            let field = format!("ipam.ranges[{i}][{j}]");
            let subnet = parse_net(&r.subnet).map_err(|m| invalid(&field, m))?;
            let range = Range::new(
                subnet,
                parse_ip(&format!("{field}.rangeStart"), &r.range_start)?,
                parse_ip(&format!("{field}.rangeEnd"), &r.range_end)?,
                parse_ip(&format!("{field}.gateway"), &r.gateway)?,
            )
            .map_err(|m| invalid(&field, m))?;
            if let Some(first) = set.first() {
                let first: &Range = first;
                if first.subnet.is_ipv4() != range.subnet.is_ipv4() {
                    return Err(invalid(&field, "mixed address families in one range set"));
                }
            }
            for other in &set {
                if range.overlaps(other) {
                    return Err(invalid(&field, format!("overlaps range {}", other.subnet)));
                }
            }
            set.push(range);
        }
        sets.push(set);
    }
    Ok(sets)
}

/// The subnet file written by the network controller (flannel `subnet.env` style).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubnetFile {
    pub subnet: IpNetwork,
    pub mtu: Option<u32>,
    pub network: Option<IpNetwork>,
}

/// Reads `KEY=VALUE` lines; `CAIRN_SUBNET` (or `FLANNEL_SUBNET`) is required,
/// `CAIRN_MTU`/`FLANNEL_MTU` and `CAIRN_NETWORK`/`FLANNEL_NETWORK` optional.
pub fn read_subnet_file(path: &Path) -> Result<SubnetFile, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::SubnetFile {
        path: path.to_path_buf(),
        source,
    })?;
    parse_subnet_file(&text).map_err(|msg| ConfigError::SubnetFileContent {
        path: path.to_path_buf(),
        msg,
    })
}

pub fn parse_subnet_file(text: &str) -> Result<SubnetFile, String> {
    let mut vars = HashMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        if let Some((k, v)) = line.split_once('=') {
            vars.insert(k.trim().to_string(), v.trim().trim_matches('"').to_string());
        }
    }
    let get = |k: &str| {
        vars.get(&format!("CAIRN_{k}"))
            .or_else(|| vars.get(&format!("FLANNEL_{k}")))
            .cloned()
    };
    let subnet = get("SUBNET").ok_or("CAIRN_SUBNET is missing")?;
    let subnet = parse_net(&subnet).map_err(|m| format!("CAIRN_SUBNET: {m}"))?;
    let mtu = match get("MTU") {
        Some(m) => Some(
            m.parse::<u32>()
                .map_err(|e| format!("CAIRN_MTU {m:?}: {e}"))?,
        ),
        None => None,
    };
    let network = match get("NETWORK") {
        Some(n) => Some(parse_net(&n).map_err(|m| format!("CAIRN_NETWORK: {m}"))?),
        None => None,
    };
    Ok(SubnetFile {
        subnet,
        mtu,
        network,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subnet_file_parses_cairn_and_flannel_keys() {
        let sf = parse_subnet_file("CAIRN_SUBNET=10.244.1.0/24\nCAIRN_MTU=1450\n").unwrap();
        assert_eq!(sf.subnet.to_string(), "10.244.1.0/24");
        assert_eq!(sf.mtu, Some(1450));
        let sf = parse_subnet_file(
            "FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.3.1/24\nFLANNEL_MTU=1400\n",
        )
        .unwrap();
        assert_eq!(sf.network.unwrap().to_string(), "10.244.0.0/16");
        assert_eq!(sf.mtu, Some(1400));
        assert!(parse_subnet_file("CAIRN_MTU=1\n").is_err());
        assert!(parse_subnet_file("CAIRN_SUBNET=banana\n").is_err());
    }

    #[test]
    fn host_local_defaults() {
        let v = serde_json::json!({"cniVersion":"1.0.0","name":"n","type":"cairn-cni",
            "isDefaultGateway": true,
            "ipam":{"type":"host-local","subnet":"10.244.5.0/24","routes":[{"dst":"0.0.0.0/0"}]}});
        let c = resolve(&parse_raw(&v).unwrap(), Strictness::Strict).unwrap();
        assert!(c.is_gateway);
        assert_eq!(c.bridge, "cni0");
        let r = &c.range_sets[0][0];
        assert_eq!(r.start.to_string(), "10.244.5.1");
        assert_eq!(r.end.to_string(), "10.244.5.254");
        assert_eq!(r.gateway.unwrap().to_string(), "10.244.5.1");
        assert_eq!(c.network_dir(), PathBuf::from("/var/lib/cni/networks/n"));
    }

    #[test]
    fn rejects_bad_fields() {
        for v in [
            serde_json::json!({"name":"n","type":"t","ipam":{"type":"dhcp"}}),
            serde_json::json!({"name":"n","type":"t","ipam":{"type":"host-local"}}),
            serde_json::json!({"name":"n","type":"t","ipam":{"type":"host-local","subnet":"10.0.0.0/31"}}),
            serde_json::json!({"name":"n","type":"t","ipam":{"type":"host-local","subnet":"10.0.0.0/24","rangeStart":"10.0.1.5"}}),
            serde_json::json!({"name":"n","type":"t","ipMasqBackend":"pf","ipam":{"type":"host-local","subnet":"10.0.0.0/24"}}),
        ] {
            assert!(
                resolve(&parse_raw(&v).unwrap(), Strictness::Strict).is_err(),
                "{v}"
            );
        }
        assert!(parse_raw(&serde_json::json!({"name":"n","mtu":"big"})).is_err());
    }
}
