//! The node's subnet file (read by cairn-cni in cairn mode, like flannel's `subnet.env`)
//! and the CNI conflist the runtime reads. Both are replaced atomically (write a temporary
//! file beside, fsync, rename) and only when their content changes.

use std::io::Write;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use ipnetwork::Ipv4Network;
use serde_json::{json, Value};

use super::NetControllerError;

/// The subnet file's content.
pub fn subnet_file_text(
    cluster: Ipv4Network,
    subnet: Ipv4Network,
    mtu: u32,
    masquerade: bool,
) -> String {
    format!(
        "CAIRN_NETWORK={cluster}\nCAIRN_SUBNET={subnet}\nCAIRN_MTU={mtu}\nCAIRN_IPMASQ={masquerade}\n"
    )
}

/// What goes in the conflist besides the network's name.
#[derive(Debug, Clone)]
pub struct ConflistParams<'a> {
    pub network_name: &'a str,
    pub bridge: &'a str,
    pub subnet_file: &'a Path,
    pub data_dir: Option<&'a Path>,
    /// Further plugins appended to the chain (e.g. `portmap`).
    pub extra_plugins: &'a [Value],
}

/// The conflist: cairn-cni in cairn mode (subnet and MTU from the subnet file, gateway
/// and default route in the pod, hairpin on). Masquerade is the controller's, so the
/// plugin's own `ipMasq` stays off, as flannel's delegate config does when flanneld
/// masquerades.
pub fn conflist(p: &ConflistParams<'_>) -> Value {
    let mut ipam = json!({"type": "cairn"});
    if let Some(dir) = p.data_dir {
        ipam["dataDir"] = json!(dir.display().to_string());
    }
    let mut plugins = vec![json!({
        "type": "cairn-cni",
        "bridge": p.bridge,
        "subnetFile": p.subnet_file.display().to_string(),
        "isGateway": true,
        "isDefaultGateway": true,
        "hairpinMode": true,
        "ipMasq": false,
        "ipam": ipam,
    })];
    plugins.extend(p.extra_plugins.iter().cloned());
    json!({
        "cniVersion": "1.0.0",
        "name": p.network_name,
        "plugins": plugins,
    })
}

/// Writes `content` to `path` atomically unless it already holds exactly that.
/// Returns whether the file changed.
pub fn write_if_changed(path: &Path, content: &str) -> Result<bool, NetControllerError> {
    if std::fs::read_to_string(path).is_ok_and(|old| old == content) {
        return Ok(false);
    }
    let err = |source: std::io::Error| NetControllerError::WriteFile {
        path: path.to_path_buf(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("/"));
    std::fs::create_dir_all(dir).map_err(err)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp: PathBuf = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(content.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        // The rename is durable once the directory is.
        std::fs::File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(err)?;
    Ok(true)
}

/// The first address of a subnet (`10.244.1.0` for `10.244.1.0/24`): the vxlan device's
/// address and the peers' next hop, as in flannel.
pub fn subnet_zero(subnet: Ipv4Network) -> Ipv4Addr {
    subnet.network()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subnet_file_is_what_the_plugin_reads() {
        let text = subnet_file_text(
            "10.244.0.0/16".parse().unwrap(),
            "10.244.3.0/24".parse().unwrap(),
            1450,
            true,
        );
        let sf = crate::config::parse_subnet_file(&text).unwrap();
        assert_eq!(sf.subnet.to_string(), "10.244.3.0/24");
        assert_eq!(sf.mtu, Some(1450));
        assert_eq!(sf.network.unwrap().to_string(), "10.244.0.0/16");
        assert!(text.contains("CAIRN_IPMASQ=true\n"));
    }

    #[test]
    fn conflist_resolves_in_cairn_mode() {
        let dir = tempfile::tempdir().unwrap();
        let subnet = dir.path().join("subnet.env");
        std::fs::write(
            &subnet,
            subnet_file_text(
                "10.244.0.0/16".parse().unwrap(),
                "10.244.3.0/24".parse().unwrap(),
                1450,
                true,
            ),
        )
        .unwrap();
        let extra = [json!({"type": "portmap", "capabilities": {"portMappings": true}})];
        let list = conflist(&ConflistParams {
            network_name: "cairn",
            bridge: "cni0",
            subnet_file: &subnet,
            data_dir: Some(dir.path()),
            extra_plugins: &extra,
        });
        assert_eq!(list["plugins"][1]["type"], "portmap");
        let mut plugin = list["plugins"][0].clone();
        plugin["name"] = list["name"].clone();
        plugin["cniVersion"] = list["cniVersion"].clone();
        let conf = crate::config::resolve(
            &crate::config::parse_raw(&plugin).unwrap(),
            crate::config::Strictness::Strict,
        )
        .unwrap();
        assert!(conf.cairn_mode && conf.is_default_gateway && !conf.ip_masq);
        assert_eq!(conf.mtu, Some(1450));
        assert_eq!(conf.range_sets[0][0].subnet.to_string(), "10.244.3.0/24");
        assert_eq!(conf.network_dir(), dir.path().join("cairn"));
    }

    #[test]
    fn writes_atomically_and_only_on_change() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/dir/subnet.env");
        assert!(write_if_changed(&path, "A=1\n").unwrap());
        assert!(!write_if_changed(&path, "A=1\n").unwrap());
        assert!(write_if_changed(&path, "A=2\n").unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "A=2\n");
        let leftovers: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(leftovers.len(), 1);
    }
}
