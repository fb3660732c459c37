//! Pod volumes under `<root>/pods/<uid>/volumes/<plugin>/<name>` (emptyDir, hostPath, a
//! persistentVolumeClaim's bound local or hostPath volume,
//! configMap, secret, downwardAPI, projected of those), written atomically like the
//! kubelet's AtomicWriter (a `..data` symlink swapped to a new timestamped dir) so running
//! containers see updates, plus the pod's /etc/hosts, /etc/resolv.conf and /etc/hostname.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, KeyToPath, Pod, Volume};

use crate::env::{self, ConfigSource, EnvError};
use cairn_runtime::Mount;

#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    #[error("MountVolume.SetUp failed for volume {volume:?} : {message}")]
    SetUp { volume: String, message: String },
    #[error("unable to find volume {volume:?} for container {container:?}")]
    Missing { volume: String, container: String },
    #[error("writing {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Env(#[from] EnvError),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> VolumeError + '_ {
    move |source| VolumeError::Io {
        path: path.to_path_buf(),
        source,
    }
}

pub fn pod_dir(root: &Path, uid: &str) -> PathBuf {
    root.join("pods").join(uid)
}

/// Writes `files` into `dir` atomically: a fresh `..<timestamp>` dir, `..data` pointing at
/// it, and top-level symlinks per key.
pub fn atomic_write(
    dir: &Path,
    files: &BTreeMap<String, (Vec<u8>, u32)>,
) -> Result<(), VolumeError> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let stamp = format!("..{}", chrono::Utc::now().format("%Y_%m_%d_%H_%M_%S.%f"));
    let staging = dir.join(&stamp);
    std::fs::create_dir_all(&staging).map_err(io(&staging))?;
    for (name, (content, mode)) in files {
        let path = staging.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        std::fs::write(&path, content).map_err(io(&path))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(*mode))
            .map_err(io(&path))?;
    }
    let tmp_link = dir.join("..data_tmp");
    // Err: no leftover link from an interrupted write, the usual case.
    let _ = std::fs::remove_file(&tmp_link);
    std::os::unix::fs::symlink(&stamp, &tmp_link).map_err(io(&tmp_link))?;
    let data = dir.join("..data");
    let old = std::fs::read_link(&data).ok();
    std::fs::rename(&tmp_link, &data).map_err(io(&data))?;
    for name in files.keys() {
        let top = name.split('/').next().unwrap_or(name);
        let link = dir.join(top);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(Path::new("..data").join(top), &link).map_err(io(&link))?;
        }
    }
    // Remove keys that disappeared, then the previous data dir.
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.starts_with("..")
                && !files
                    .keys()
                    .any(|k| k.split('/').next() == Some(name.as_str()))
            {
                // Err: a stale link that is already gone; a leftover one only shows an
                // old key, and the next write retries.
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    if let Some(old) = old {
        if old != Path::new(&stamp) {
            // Err: the old generation stays on disk until the pod's volumes are torn down.
            let _ = std::fs::remove_dir_all(dir.join(old));
        }
    }
    Ok(())
}

fn project(
    data: &BTreeMap<String, Vec<u8>>,
    items: &Option<Vec<KeyToPath>>,
    default_mode: u32,
    volume: &str,
    optional: bool,
    what: &str,
) -> Result<BTreeMap<String, (Vec<u8>, u32)>, VolumeError> {
    let mut out = BTreeMap::new();
    match items {
        Some(items) if !items.is_empty() => {
            for item in items {
                match data.get(&item.key) {
                    Some(v) => {
                        let mode = item.mode.map(|m| m as u32).unwrap_or(default_mode);
                        out.insert(item.path.clone(), (v.clone(), mode));
                    }
                    None if optional => {}
                    None => {
                        return Err(VolumeError::SetUp {
                            volume: volume.into(),
                            message: format!(
                                "configmap references non-existent config key: {} ({what})",
                                item.key
                            ),
                        })
                    }
                }
            }
        }
        _ => {
            for (k, v) in data {
                out.insert(k.clone(), (v.clone(), default_mode));
            }
        }
    }
    Ok(out)
}

/// Context for building volumes.
pub struct VolumeContext<'a> {
    pub root: &'a Path,
    pub pod: &'a Pod,
    pub source: &'a dyn ConfigSource,
    pub host_ip: Option<&'a str>,
    pub pod_ip: Option<&'a str>,
    pub node_alloc: &'a BTreeMap<String, String>,
    /// The earliest time a projected token must be replaced (set while projecting).
    pub refresh_by: parking_lot::Mutex<Option<std::time::SystemTime>>,
}

impl VolumeContext<'_> {
    fn refresh_no_later_than(&self, at: std::time::SystemTime) {
        let mut by = self.refresh_by.lock();
        *by = Some(by.map_or(at, |b| b.min(at)));
    }
}

/// Files a volume projects: path → (content, mode).
type Files = BTreeMap<String, (Vec<u8>, u32)>;

fn mode_or(mode: Option<i32>, default: u32) -> u32 {
    mode.and_then(|m| u32::try_from(m).ok()).unwrap_or(default)
}

fn not_found(volume: &str, what: &str, name: &str) -> VolumeError {
    VolumeError::SetUp {
        volume: volume.to_string(),
        message: format!("{what} {name:?} not found"),
    }
}

impl VolumeContext<'_> {
    fn namespace(&self) -> &str {
        self.pod.metadata.namespace.as_deref().unwrap_or("default")
    }
}

/// Prepares every volume of the pod; returns volume name → host path, or the first
/// volume's failure. Each volume is tried even after one fails, as the kubelet's volume
/// manager mounts each on its own: a deleted ConfigMap must not keep a running pod's
/// token from being refreshed.
pub async fn setup(ctx: &VolumeContext<'_>) -> Result<BTreeMap<String, PathBuf>, VolumeError> {
    let uid = ctx.pod.metadata.uid.as_deref().unwrap_or_default();
    let base = pod_dir(ctx.root, uid).join("volumes");
    let mut out = BTreeMap::new();
    let mut first_failure = None;
    let volumes = ctx.pod.spec.iter().flat_map(|s| s.volumes.iter().flatten());
    for v in volumes {
        match setup_one(ctx, v, &base).await {
            Ok(path) => {
                out.insert(v.name.clone(), path);
            }
            Err(e) => {
                first_failure.get_or_insert(e);
            }
        }
    }
    match first_failure {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// One volume under `base/kubernetes.io~<plugin>/<name>`.
async fn setup_one(
    ctx: &VolumeContext<'_>,
    v: &Volume,
    base: &Path,
) -> Result<PathBuf, VolumeError> {
    let name = &v.name;
    if v.empty_dir.is_some() {
        let p = base.join("kubernetes.io~empty-dir").join(name);
        std::fs::create_dir_all(&p).map_err(io(&p))?;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o777)).map_err(io(&p))?;
        return Ok(p);
    }
    if let Some(hp) = &v.host_path {
        return host_path(name, &hp.path, hp.type_.as_deref().unwrap_or(""));
    }
    if let Some(claim) = &v.persistent_volume_claim {
        // The volume's own directory, bind-mounted as a hostPath is.
        return ctx
            .source
            .claim_path(ctx.namespace(), &claim.claim_name)
            .await
            .map_err(|message| VolumeError::SetUp {
                volume: name.clone(),
                message,
            });
    }
    let (plugin, files) = if let Some(cm) = &v.config_map {
        let optional = cm.optional == Some(true);
        let data = ctx.source.config_map(ctx.namespace(), &cm.name).await?;
        let data = match data {
            Some(d) => d,
            None if optional => BTreeMap::new(),
            None => return Err(not_found(name, "configmap", &cm.name)),
        };
        let mode = mode_or(cm.default_mode, 0o644);
        let files = project(&data, &cm.items, mode, name, optional, "configMap")?;
        ("configmap", files)
    } else if let Some(s) = &v.secret {
        let secret_name = s.secret_name.clone().unwrap_or_default();
        let optional = s.optional == Some(true);
        let data = match ctx.source.secret(ctx.namespace(), &secret_name).await? {
            Some(d) => d,
            None if optional => BTreeMap::new(),
            None => return Err(not_found(name, "secret", &secret_name)),
        };
        let mode = mode_or(s.default_mode, 0o644);
        (
            "secret",
            project(&data, &s.items, mode, name, optional, "secret")?,
        )
    } else if let Some(d) = &v.downward_api {
        ("downward-api", downward_files(ctx, d)?)
    } else if let Some(pj) = &v.projected {
        ("projected", projected_files(ctx, name, pj).await?)
    } else {
        return Err(VolumeError::SetUp {
            volume: name.clone(),
            message: "volume type not supported by cairn-agent".into(),
        });
    };
    let p = base.join(format!("kubernetes.io~{plugin}")).join(name);
    atomic_write(&p, &files)?;
    Ok(p)
}

/// A downwardAPI volume's files: pod fields and container resources.
fn downward_files(
    ctx: &VolumeContext<'_>,
    d: &k8s_openapi::api::core::v1::DownwardAPIVolumeSource,
) -> Result<Files, VolumeError> {
    let mode = mode_or(d.default_mode, 0o644);
    let containers: &[Container] = ctx.pod.spec.as_ref().map_or(&[], |s| &s.containers);
    let mut files = BTreeMap::new();
    for item in d.items.iter().flatten() {
        let content = if let Some(f) = &item.field_ref {
            env::pod_field(ctx.pod, &f.field_path, ctx.host_ip, ctx.pod_ip)?
        } else if let Some(r) = &item.resource_field_ref {
            let target = r
                .container_name
                .as_ref()
                .and_then(|n| containers.iter().find(|c| &c.name == n))
                .or(containers.first());
            let divisor = r.divisor.as_ref().map(|q| q.0.as_str());
            target.map_or_else(String::new, |c| {
                env::resource_field(c, &r.resource, divisor, ctx.node_alloc)
            })
        } else {
            String::new()
        };
        let item_mode = mode_or(item.mode, mode);
        files.insert(item.path.clone(), (content.into_bytes(), item_mode));
    }
    Ok(files)
}

/// A projected volume's files: configMaps, secrets, pod fields and ServiceAccount tokens
/// (bound to the pod, renewed by [`crate::sa_tokens`]) merged.
async fn projected_files(
    ctx: &VolumeContext<'_>,
    name: &str,
    pj: &k8s_openapi::api::core::v1::ProjectedVolumeSource,
) -> Result<Files, VolumeError> {
    let mode = mode_or(pj.default_mode, 0o644);
    let ns = ctx.namespace();
    let mut files = BTreeMap::new();
    for src in pj.sources.iter().flatten() {
        if let Some(cm) = &src.config_map {
            let optional = cm.optional == Some(true);
            match ctx.source.config_map(ns, &cm.name).await? {
                Some(data) => files.extend(project(
                    &data,
                    &cm.items,
                    mode,
                    name,
                    optional,
                    "configMap",
                )?),
                None if optional => {}
                None => return Err(not_found(name, "configmap", &cm.name)),
            }
        }
        if let Some(s) = &src.secret {
            let optional = s.optional == Some(true);
            match ctx.source.secret(ns, &s.name).await? {
                Some(data) => {
                    files.extend(project(&data, &s.items, mode, name, optional, "secret")?)
                }
                None if optional => {}
                None => return Err(not_found(name, "secret", &s.name)),
            }
        }
        if let Some(t) = &src.service_account_token {
            let issued = ctx.source.service_account_token(&token_ask(ctx, t)).await?;
            ctx.refresh_no_later_than(issued.refresh_at);
            files.insert(t.path.clone(), (issued.token.into_bytes(), mode));
        }
        for item in src
            .downward_api
            .iter()
            .flat_map(|d| d.items.iter().flatten())
        {
            if let Some(f) = &item.field_ref {
                let content = env::pod_field(ctx.pod, &f.field_path, ctx.host_ip, ctx.pod_ip)?;
                files.insert(item.path.clone(), (content.into_bytes(), mode));
            }
        }
    }
    Ok(files)
}

/// The token a `serviceAccountToken` source asks for: the pod's account, bound to it
/// (an hour unless the source says).
fn token_ask(
    ctx: &VolumeContext<'_>,
    t: &k8s_openapi::api::core::v1::ServiceAccountTokenProjection,
) -> crate::sa_tokens::TokenAsk {
    let spec = ctx.pod.spec.as_ref();
    crate::sa_tokens::TokenAsk {
        namespace: ctx.namespace().to_string(),
        account: spec
            .and_then(|s| s.service_account_name.clone())
            .filter(|a| !a.is_empty())
            .unwrap_or_else(|| "default".into()),
        pod_name: ctx.pod.metadata.name.clone().unwrap_or_default(),
        pod_uid: ctx.pod.metadata.uid.clone().unwrap_or_default(),
        audience: t.audience.clone().filter(|a| !a.is_empty()),
        expiration_seconds: t.expiration_seconds.unwrap_or(3600),
    }
}

fn host_path(volume: &str, path: &str, kind: &str) -> Result<PathBuf, VolumeError> {
    let p = PathBuf::from(path);
    let meta = std::fs::metadata(&p);
    let fail = |message: String| VolumeError::SetUp {
        volume: volume.into(),
        message,
    };
    use std::os::unix::fs::FileTypeExt;
    match kind {
        "DirectoryOrCreate" => {
            if meta.is_err() {
                std::fs::create_dir_all(&p).map_err(io(&p))?;
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755))
                    .map_err(io(&p))?;
            } else if !p.is_dir() {
                return Err(fail(format!(
                    "hostPath type check failed: {path} is not a directory"
                )));
            }
        }
        "Directory" => {
            if !meta.as_ref().is_ok_and(|m| m.is_dir()) {
                return Err(fail(format!(
                    "hostPath type check failed: {path} is not a directory"
                )));
            }
        }
        "FileOrCreate" => {
            if meta.is_err() {
                if let Some(parent) = p.parent() {
                    std::fs::create_dir_all(parent).map_err(io(parent))?;
                }
                std::fs::File::create(&p).map_err(io(&p))?;
            } else if !p.is_file() {
                return Err(fail(format!(
                    "hostPath type check failed: {path} is not a file"
                )));
            }
        }
        "File" => {
            if !meta.as_ref().is_ok_and(|m| m.is_file()) {
                return Err(fail(format!(
                    "hostPath type check failed: {path} is not a file"
                )));
            }
        }
        "Socket" | "CharDevice" | "BlockDevice" => {
            let ok = meta.as_ref().is_ok_and(|m| {
                let t = m.file_type();
                match kind {
                    "Socket" => t.is_socket(),
                    "CharDevice" => t.is_char_device(),
                    _ => t.is_block_device(),
                }
            });
            if !ok {
                return Err(fail(format!(
                    "hostPath type check failed: {path} is not a {kind}"
                )));
            }
        }
        "" => {
            // No type: like containerd's CRI, a missing path is created as a directory.
            if meta.is_err() {
                std::fs::create_dir_all(&p).map_err(io(&p))?;
            }
        }
        other => return Err(fail(format!("invalid hostPath type {other:?}"))),
    }
    Ok(p)
}

/// Bind mounts of one container from its volumeMounts (subPath resolved and created).
pub fn container_mounts(
    container: &Container,
    volumes: &BTreeMap<String, PathBuf>,
) -> Result<Vec<Mount>, VolumeError> {
    let mut out = Vec::new();
    for vm in container.volume_mounts.iter().flatten() {
        let base = volumes.get(&vm.name).ok_or_else(|| VolumeError::Missing {
            volume: vm.name.clone(),
            container: container.name.clone(),
        })?;
        let mut host = base.clone();
        if let Some(sub) = vm.sub_path.as_ref().filter(|s| !s.is_empty()) {
            if sub.split('/').any(|p| p == "..") || sub.starts_with('/') {
                return Err(VolumeError::SetUp {
                    volume: vm.name.clone(),
                    message: format!("invalid subPath {sub:?}"),
                });
            }
            host = base.join(sub);
            if !host.exists() {
                std::fs::create_dir_all(&host).map_err(io(&host))?;
            }
        }
        out.push(Mount {
            host_path: host,
            container_path: vm.mount_path.clone(),
            readonly: vm.read_only == Some(true),
        });
    }
    Ok(out)
}

/// The pod's /etc/hosts, as the kubelet writes it.
pub fn hosts_file(pod: &Pod, ip: Option<&str>, cluster_domain: &str) -> String {
    let spec = pod.spec.as_ref();
    let hostname = spec
        .and_then(|s| s.hostname.clone())
        .or_else(|| pod.metadata.name.clone())
        .unwrap_or_default();
    let mut out = String::from("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n");
    if let Some(ip) = ip {
        match spec.and_then(|s| s.subdomain.clone()) {
            Some(sub) if !sub.is_empty() => {
                let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
                out.push_str(&format!(
                    "{ip}\t{hostname}.{sub}.{ns}.svc.{cluster_domain}\t{hostname}\n"
                ));
            }
            _ => out.push_str(&format!("{ip}\t{hostname}\n")),
        }
    }
    let aliases = spec
        .and_then(|s| s.host_aliases.clone())
        .unwrap_or_default();
    if !aliases.is_empty() {
        out.push_str("\n# Entries added by HostAliases.\n");
        for a in aliases {
            out.push_str(&format!(
                "{}\t{}\n",
                a.ip,
                a.hostnames.unwrap_or_default().join("\t")
            ));
        }
    }
    out
}

/// resolv.conf by dnsPolicy (ClusterFirst with cluster DNS, Default = host's, None = dnsConfig).
pub fn resolv_conf(
    pod: &Pod,
    cluster_dns: &[String],
    cluster_domain: &str,
    host_resolv: &str,
) -> String {
    let spec = pod.spec.as_ref();
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let policy = spec
        .and_then(|s| s.dns_policy.clone())
        .unwrap_or_else(|| "ClusterFirst".into());
    let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
    let (mut servers, mut searches, mut options) = (Vec::new(), Vec::new(), Vec::new());
    let host_parse =
        |servers: &mut Vec<String>, searches: &mut Vec<String>, options: &mut Vec<String>| {
            for line in host_resolv.lines() {
                let mut f = line.split_whitespace();
                match f.next() {
                    Some("nameserver") => servers.extend(f.next().map(str::to_string)),
                    Some("search") => searches.extend(f.map(str::to_string)),
                    Some("options") => options.extend(f.map(str::to_string)),
                    _ => {}
                }
            }
        };
    let cluster_first =
        (policy == "ClusterFirst" && !host_network) || policy == "ClusterFirstWithHostNet";
    if policy == "None" {
    } else if cluster_first && !cluster_dns.is_empty() {
        servers = cluster_dns.to_vec();
        searches = vec![
            format!("{ns}.svc.{cluster_domain}"),
            format!("svc.{cluster_domain}"),
            cluster_domain.to_string(),
        ];
        let mut hs = Vec::new();
        host_parse(&mut Vec::new(), &mut hs, &mut Vec::new());
        searches.extend(hs);
        options = vec!["ndots:5".into()];
    } else {
        host_parse(&mut servers, &mut searches, &mut options);
    }
    if let Some(cfg) = spec.and_then(|s| s.dns_config.clone()) {
        servers.extend(cfg.nameservers.unwrap_or_default());
        searches.extend(cfg.searches.unwrap_or_default());
        for o in cfg.options.unwrap_or_default() {
            let s = match o.value {
                Some(v) => format!("{}:{v}", o.name.unwrap_or_default()),
                None => o.name.unwrap_or_default(),
            };
            options.retain(|x| x.split(':').next() != s.split(':').next());
            options.push(s);
        }
    }
    let mut out = String::new();
    if !searches.is_empty() {
        out.push_str(&format!("search {}\n", searches.join(" ")));
    }
    for s in servers.iter().take(3) {
        out.push_str(&format!("nameserver {s}\n"));
    }
    if !options.is_empty() {
        out.push_str(&format!("options {}\n", options.join(" ")));
    }
    out
}

/// Removes the volumes of a pod whose containers have all stopped, as the kubelet tears
/// down a terminated pod's volumes (an evicted pod's emptyDir is what disk pressure
/// reclaims). Its etc files stay until the pod is removed. Tolerates a missing dir.
pub fn teardown_volumes(root: &Path, uid: &str) {
    let dir = pod_dir(root, uid).join("volumes");
    if let Err(e) = std::fs::remove_dir_all(&dir) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(path = %dir.display(), error = %e, "removing a finished pod's volumes");
        }
    }
}

/// Removes the pod's directory (volumes, etc files). Tolerates a missing dir.
pub fn teardown(root: &Path, uid: &str) {
    let dir = pod_dir(root, uid);
    if let Err(e) = std::fs::remove_dir_all(&dir) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(path = %dir.display(), error = %e, "removing pod dir");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn a_failing_volume_does_not_keep_the_token_from_being_refreshed() {
        let dir = tempfile::tempdir().unwrap();
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns1", "uid": "u1"},
            "spec": {"containers": [{"name": "c"}], "volumes": [
                {"name": "gone", "configMap": {"name": "deleted"}},
                {"name": "token", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}}
                ]}}
            ]}
        }))
        .unwrap();
        let alloc = BTreeMap::new();
        let ctx = VolumeContext {
            root: dir.path(),
            pod: &pod,
            source: &crate::env::FakeConfigSource {
                token: Some(crate::sa_tokens::IssuedToken {
                    token: "fresh-token".into(),
                    refresh_at: std::time::UNIX_EPOCH + std::time::Duration::from_secs(1000),
                }),
            },
            host_ip: None,
            pod_ip: None,
            node_alloc: &alloc,
            refresh_by: parking_lot::Mutex::new(None),
        };
        let failed = setup(&ctx).await.unwrap_err().to_string();
        assert!(
            failed.contains("\"gone\"") && failed.contains("deleted"),
            "{failed}"
        );
        let token = pod_dir(dir.path(), "u1").join("volumes/kubernetes.io~projected/token/token");
        assert_eq!(std::fs::read(&token).unwrap(), b"fresh-token");
        assert!(
            ctx.refresh_by.lock().is_some(),
            "the next refresh is still scheduled"
        );
    }

    #[test]
    fn atomic_write_swaps_and_prunes() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("v");
        let mut files = BTreeMap::from([
            ("a".to_string(), (b"1".to_vec(), 0o644)),
            ("b".to_string(), (b"2".to_vec(), 0o600)),
        ]);
        atomic_write(&d, &files).unwrap();
        assert_eq!(std::fs::read(d.join("a")).unwrap(), b"1");
        files.remove("b");
        files.insert("a".into(), (b"new".to_vec(), 0o644));
        atomic_write(&d, &files).unwrap();
        assert_eq!(std::fs::read(d.join("a")).unwrap(), b"new");
        assert!(!d.join("b").exists());
        let dirs = std::fs::read_dir(&d)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with("..2")
            })
            .count();
        assert_eq!(dirs, 1);
    }

    #[test]
    fn host_path_types() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let err = host_path("v", missing.to_str().unwrap(), "Directory").unwrap_err();
        assert!(err.to_string().contains("is not a directory"), "{err}");
        host_path("v", missing.to_str().unwrap(), "DirectoryOrCreate").unwrap();
        assert!(missing.is_dir());
        assert!(host_path("v", missing.to_str().unwrap(), "File").is_err());
    }

    #[test]
    fn resolv_conf_cluster_first() {
        let pod: Pod = serde_json::from_value(
            json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": []}}),
        )
        .unwrap();
        let r = resolv_conf(
            &pod,
            &["10.96.0.10".into()],
            "cluster.local",
            "nameserver 1.1.1.1\nsearch corp\n",
        );
        assert_eq!(r, "search ns.svc.cluster.local svc.cluster.local cluster.local corp\nnameserver 10.96.0.10\noptions ndots:5\n");
        let r = resolv_conf(&pod, &[], "cluster.local", "nameserver 1.1.1.1\n");
        assert_eq!(r, "nameserver 1.1.1.1\n");
    }

    #[test]
    fn hosts_has_pod_entry() {
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": [], "hostAliases": [{"ip": "1.2.3.4", "hostnames": ["a"]}]}})).unwrap();
        let h = hosts_file(&pod, Some("10.244.0.5"), "cluster.local");
        assert!(h.contains("10.244.0.5\tp\n"));
        assert!(h.contains("1.2.3.4\ta\n"));
    }
}
