//! Small, deterministic OCI/Docker images built from Debian's static busybox, pushed to a
//! [`Registry`] with the distribution v2 API, or written as OCI-layout / docker-archive tars.
//!
//! Every image has two layers: a shared base (busybox, applet symlinks, passwd/group, /tmp)
//! and a small per-image layer with `/etc/cairn-image` (`arch=...`) plus any extra files,
//! so multi-layer unpacking and platform selection are both visible from inside.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::OnceLock;

use anyhow::{bail, Context, Result};
use flate2::write::GzEncoder;
use flate2::Compression;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::registry::Registry;

/// The static busybox the images are built from (Debian's `busybox-static`).
pub const BUSYBOX_BIN: &str = "/bin/busybox";

/// Fixed mtime for every tar entry and the config's `created`, so digests are stable.
const FIXED_MTIME: u64 = 1_700_000_000;
const FIXED_CREATED: &str = "2023-11-14T22:13:20Z";

/// Applets linked into `/bin`.
pub const APPLETS: &[&str] = &[
    "sh",
    "ash",
    "sleep",
    "cat",
    "echo",
    "ls",
    "nc",
    "wget",
    "httpd",
    "id",
    "env",
    "true",
    "false",
    "kill",
    "dd",
    "head",
    "tail",
    "hostname",
    "ps",
    "yes",
    "ip",
    "ping",
    "nslookup",
    "mkdir",
    "rm",
    "touch",
    "grep",
    "wc",
    "date",
    "pwd",
    "test",
    "[",
    "stat",
    "cp",
    "mv",
    "ln",
    "chmod",
    "df",
    "mount",
    "umount",
    "free",
    "uname",
    "whoami",
    "sed",
    "awk",
    "seq",
    "printf",
    "tee",
    "sync",
    "readlink",
    "find",
    "xargs",
    "timeout",
    "nproc",
    "sha256sum",
    "md5sum",
    "cut",
    "sort",
    "uniq",
    "tr",
    "basename",
    "dirname",
    "mkfifo",
    "usleep",
    "pidof",
    "killall",
    "ifconfig",
    "route",
    "netstat",
    "hexdump",
    "od",
    "vi",
    "tar",
    "gzip",
    "gunzip",
];

pub const MEDIA_OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const MEDIA_OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const MEDIA_OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
pub const MEDIA_OCI_LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
pub const MEDIA_OCI_LAYER: &str = "application/vnd.oci.image.layer.v1.tar";
pub const MEDIA_DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
pub const MEDIA_DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
pub const MEDIA_DOCKER_CONFIG: &str = "application/vnd.docker.container.image.v1+json";
pub const MEDIA_DOCKER_LAYER_GZIP: &str = "application/vnd.docker.image.rootfs.diff.tar.gzip";
pub const MEDIA_DOCKER_LAYER: &str = "application/vnd.docker.image.rootfs.diff.tar";

/// Manifest flavour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ManifestFormat {
    /// OCI image manifest / index.
    Oci,
    /// Docker v2 schema 2 manifest / manifest list.
    Docker,
}

/// What goes into an image's config and its second layer.
#[derive(Debug, Clone)]
pub struct ImageSpec {
    pub entrypoint: Option<Vec<String>>,
    pub cmd: Option<Vec<String>>,
    pub env: Vec<String>,
    pub working_dir: Option<String>,
    pub user: Option<String>,
    /// e.g. `"80/tcp"`.
    pub exposed_ports: Vec<String>,
    pub labels: BTreeMap<String, String>,
    /// GOARCH name: `amd64`, `arm64`, ...
    pub architecture: String,
    pub variant: Option<String>,
    pub format: ManifestFormat,
    /// gzip the layers (else plain tar layers).
    pub gzip: bool,
    /// Extra regular files (path without leading `/`, content, mode) in the second layer.
    pub extra_files: Vec<(String, Vec<u8>, u32)>,
}

impl Default for ImageSpec {
    fn default() -> Self {
        Self {
            entrypoint: None,
            cmd: Some(vec!["sh".to_owned()]),
            env: vec![
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_owned(),
            ],
            working_dir: None,
            user: None,
            exposed_ports: Vec::new(),
            labels: BTreeMap::new(),
            architecture: host_arch().to_owned(),
            variant: None,
            format: ManifestFormat::Oci,
            gzip: true,
            extra_files: Vec::new(),
        }
    }
}

/// This machine's GOARCH name.
pub fn host_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

/// A content-addressed blob.
#[derive(Debug, Clone)]
pub struct Blob {
    pub media_type: String,
    /// `sha256:<hex>`.
    pub digest: String,
    pub data: Vec<u8>,
}

impl Blob {
    pub fn new(media_type: &str, data: Vec<u8>) -> Self {
        Self {
            media_type: media_type.to_owned(),
            digest: sha256_digest(&data),
            data,
        }
    }

    pub fn size(&self) -> u64 {
        self.data.len() as u64
    }

    /// The OCI descriptor JSON of this blob.
    pub fn descriptor(&self) -> Value {
        json!({"mediaType": self.media_type, "digest": self.digest, "size": self.size()})
    }

    pub fn hex(&self) -> &str {
        self.digest.trim_start_matches("sha256:")
    }
}

/// `sha256:<hex>` of `data`.
pub fn sha256_digest(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(data)))
}

/// One single-platform image.
#[derive(Debug, Clone)]
pub struct BuiltImage {
    /// Layers as stored/pushed (gzip or plain per the spec).
    pub layers: Vec<Blob>,
    /// Uncompressed layer tars (docker-archive uses these).
    pub layer_tars: Vec<Vec<u8>>,
    /// sha256 of each uncompressed layer.
    pub diff_ids: Vec<String>,
    pub config: Blob,
    pub manifest: Blob,
    pub architecture: String,
    pub variant: Option<String>,
}

impl BuiltImage {
    pub fn manifest_digest(&self) -> &str {
        &self.manifest.digest
    }

    /// The image ID as Kubernetes/containerd report it (config digest).
    pub fn config_digest(&self) -> &str {
        &self.config.digest
    }

    /// All blobs that a registry needs before the manifest.
    pub fn blobs(&self) -> impl Iterator<Item = &Blob> {
        self.layers.iter().chain(std::iter::once(&self.config))
    }
}

/// A multi-platform image: an index / manifest list over several [`BuiltImage`]s.
#[derive(Debug, Clone)]
pub struct BuiltIndex {
    pub index: Blob,
    pub images: Vec<BuiltImage>,
}

impl BuiltIndex {
    /// The child image for `architecture`.
    pub fn image_for(&self, architecture: &str) -> Option<&BuiltImage> {
        self.images.iter().find(|i| i.architecture == architecture)
    }
}

struct BaseLayer {
    tar: Vec<u8>,
    gzip: Vec<u8>,
}

fn base_layer() -> Result<&'static BaseLayer> {
    static BASE: OnceLock<BaseLayer> = OnceLock::new();
    if let Some(b) = BASE.get() {
        return Ok(b);
    }
    let tar = build_base_tar()?;
    let gzip = gzip(&tar)?;
    Ok(BASE.get_or_init(|| BaseLayer { tar, gzip }))
}

fn build_base_tar() -> Result<Vec<u8>> {
    let busybox = std::fs::read(BUSYBOX_BIN)
        .with_context(|| format!("reading {BUSYBOX_BIN} (install busybox-static)"))?;
    let mut t = TarWriter::new();
    for (dir, mode) in [
        ("bin", 0o755),
        ("dev", 0o755),
        ("etc", 0o755),
        ("proc", 0o555),
        ("root", 0o700),
        ("sys", 0o555),
        ("tmp", 0o1777),
        ("usr", 0o755),
        ("usr/bin", 0o755),
        ("var", 0o755),
        ("var/www", 0o755),
    ] {
        t.dir(dir, mode)?;
    }
    t.file("bin/busybox", &busybox, 0o755)?;
    let mut seen = std::collections::BTreeSet::new();
    for applet in APPLETS {
        if seen.insert(*applet) {
            t.symlink(&format!("bin/{applet}"), "busybox")?;
        }
    }
    t.file(
        "etc/passwd",
        b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
        0o644,
    )?;
    t.file("etc/group", b"root:x:0:\nnobody:x:65534:\n", 0o644)?;
    t.file(
        "var/www/index.html",
        b"hello from cairn test image\n",
        0o644,
    )?;
    t.finish()
}

/// Builds one busybox image per `spec`.
pub fn busybox_image(spec: &ImageSpec) -> Result<BuiltImage> {
    let base = base_layer()?;
    let mut top = TarWriter::new();
    top.dir("etc", 0o755)?;
    let marker = format!("arch={}\n", spec.architecture);
    top.file("etc/cairn-image", marker.as_bytes(), 0o644)?;
    for (path, content, mode) in &spec.extra_files {
        top.file(path.trim_start_matches('/'), content, *mode)?;
    }
    let top_tar = top.finish()?;

    let layer_tars = vec![base.tar.clone(), top_tar];
    let diff_ids: Vec<String> = layer_tars.iter().map(|t| sha256_digest(t)).collect();
    let (layer_media, config_media, manifest_media) = match (spec.format, spec.gzip) {
        (ManifestFormat::Oci, true) => (MEDIA_OCI_LAYER_GZIP, MEDIA_OCI_CONFIG, MEDIA_OCI_MANIFEST),
        (ManifestFormat::Oci, false) => (MEDIA_OCI_LAYER, MEDIA_OCI_CONFIG, MEDIA_OCI_MANIFEST),
        (ManifestFormat::Docker, true) => (
            MEDIA_DOCKER_LAYER_GZIP,
            MEDIA_DOCKER_CONFIG,
            MEDIA_DOCKER_MANIFEST,
        ),
        (ManifestFormat::Docker, false) => (
            MEDIA_DOCKER_LAYER,
            MEDIA_DOCKER_CONFIG,
            MEDIA_DOCKER_MANIFEST,
        ),
    };
    let mut layers = Vec::new();
    for (i, tar) in layer_tars.iter().enumerate() {
        let data = match (spec.gzip, i) {
            (true, 0) => base.gzip.clone(),
            (true, _) => gzip(tar)?,
            (false, _) => tar.clone(),
        };
        layers.push(Blob::new(layer_media, data));
    }

    let mut config = serde_json::Map::new();
    if let Some(user) = &spec.user {
        config.insert("User".into(), json!(user));
    }
    if !spec.exposed_ports.is_empty() {
        let ports: serde_json::Map<String, Value> = spec
            .exposed_ports
            .iter()
            .map(|p| (p.clone(), json!({})))
            .collect();
        config.insert("ExposedPorts".into(), Value::Object(ports));
    }
    config.insert("Env".into(), json!(spec.env));
    if let Some(e) = &spec.entrypoint {
        config.insert("Entrypoint".into(), json!(e));
    }
    if let Some(c) = &spec.cmd {
        config.insert("Cmd".into(), json!(c));
    }
    if let Some(w) = &spec.working_dir {
        config.insert("WorkingDir".into(), json!(w));
    }
    if !spec.labels.is_empty() {
        config.insert("Labels".into(), json!(spec.labels));
    }
    let mut image_config = json!({
        "created": FIXED_CREATED,
        "architecture": spec.architecture,
        "os": "linux",
        "config": Value::Object(config),
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
        "history": [
            {"created": FIXED_CREATED, "created_by": "cairn-testsupport: busybox base"},
            {"created": FIXED_CREATED, "created_by": "cairn-testsupport: image files"},
        ],
    });
    if let (Some(v), Some(obj)) = (&spec.variant, image_config.as_object_mut()) {
        obj.insert("variant".into(), json!(v));
    }
    let config = Blob::new(config_media, serde_json::to_vec(&image_config)?);
    let manifest_json = json!({
        "schemaVersion": 2,
        "mediaType": manifest_media,
        "config": config.descriptor(),
        "layers": layers.iter().map(Blob::descriptor).collect::<Vec<_>>(),
    });
    let manifest = Blob::new(manifest_media, serde_json::to_vec(&manifest_json)?);
    Ok(BuiltImage {
        layers,
        layer_tars,
        diff_ids,
        config,
        manifest,
        architecture: spec.architecture.clone(),
        variant: spec.variant.clone(),
    })
}

/// Builds an index (OCI) or manifest list (Docker) with one image per architecture
/// (`"arm64"` gets variant `v8`). Each child's `/etc/cairn-image` names its arch.
pub fn busybox_index(spec: &ImageSpec, architectures: &[&str]) -> Result<BuiltIndex> {
    let mut images = Vec::new();
    let mut entries = Vec::new();
    for arch in architectures {
        let child_spec = ImageSpec {
            architecture: (*arch).to_owned(),
            variant: (*arch == "arm64").then(|| "v8".to_owned()),
            ..spec.clone()
        };
        let image = busybox_image(&child_spec)?;
        let mut platform = json!({"architecture": arch, "os": "linux"});
        if let (Some(v), Some(obj)) = (&image.variant, platform.as_object_mut()) {
            obj.insert("variant".into(), json!(v));
        }
        let mut desc = image.manifest.descriptor();
        if let Some(obj) = desc.as_object_mut() {
            obj.insert("platform".into(), platform);
        }
        entries.push(desc);
        images.push(image);
    }
    let media = match spec.format {
        ManifestFormat::Oci => MEDIA_OCI_INDEX,
        ManifestFormat::Docker => MEDIA_DOCKER_LIST,
    };
    let index_json = json!({"schemaVersion": 2, "mediaType": media, "manifests": entries});
    Ok(BuiltIndex {
        index: Blob::new(media, serde_json::to_vec(&index_json)?),
        images,
    })
}

impl Registry {
    fn http_client() -> Result<reqwest::Client> {
        crate::api_client::plain_http_builder()
            .no_proxy()
            .build()
            .context("building HTTP client")
    }

    fn with_auth(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match self.credentials() {
            Some((u, p)) => req.basic_auth(u, Some(p)),
            None => req,
        }
    }

    /// Uploads one blob (monolithic POST + PUT), skipping it when already present.
    pub async fn push_blob(&self, repository: &str, blob: &Blob) -> Result<()> {
        let client = Self::http_client()?;
        let base = format!("http://{}/v2/{repository}", self.addr());
        let head = self
            .with_auth(client.head(format!("{base}/blobs/{}", blob.digest)))
            .send()
            .await
            .with_context(|| format!("HEAD blob {} on {base}", blob.digest))?;
        if head.status().is_success() {
            return Ok(());
        }
        let start = self
            .with_auth(client.post(format!("{base}/blobs/uploads/")))
            .send()
            .await
            .with_context(|| format!("starting upload on {base}"))?;
        if start.status().as_u16() != 202 {
            bail!(
                "starting blob upload on {base}: HTTP {}: {}",
                start.status(),
                start.text().await.unwrap_or_default()
            );
        }
        let location = start
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .context("upload answer without Location")?
            .to_owned();
        let mut url = url::Url::parse(&format!("http://{}/", self.addr()))?
            .join(&location)
            .with_context(|| format!("upload Location {location}"))?;
        url.query_pairs_mut().append_pair("digest", &blob.digest);
        let put = self
            .with_auth(client.put(url))
            .header("content-type", "application/octet-stream")
            .body(blob.data.clone())
            .send()
            .await
            .with_context(|| format!("uploading blob {}", blob.digest))?;
        if put.status().as_u16() != 201 {
            bail!(
                "uploading blob {} to {base}: HTTP {}: {}",
                blob.digest,
                put.status(),
                put.text().await.unwrap_or_default()
            );
        }
        Ok(())
    }

    /// PUTs a manifest or index under `reference` (tag or digest).
    pub async fn push_manifest(
        &self,
        repository: &str,
        reference: &str,
        blob: &Blob,
    ) -> Result<()> {
        let client = Self::http_client()?;
        let url = format!(
            "http://{}/v2/{repository}/manifests/{reference}",
            self.addr()
        );
        let put = self
            .with_auth(client.put(&url))
            .header("content-type", &blob.media_type)
            .body(blob.data.clone())
            .send()
            .await
            .with_context(|| format!("PUT {url}"))?;
        if put.status().as_u16() != 201 {
            bail!(
                "PUT {url}: HTTP {}: {}",
                put.status(),
                put.text().await.unwrap_or_default()
            );
        }
        Ok(())
    }

    /// Pushes `image` as `repository:tag`; returns `<addr>/<repository>:<tag>`.
    pub async fn push_image(
        &self,
        repository: &str,
        tag: &str,
        image: &BuiltImage,
    ) -> Result<String> {
        for blob in image.blobs() {
            self.push_blob(repository, blob).await?;
        }
        self.push_manifest(repository, tag, &image.manifest).await?;
        Ok(format!("{}/{repository}:{tag}", self.addr()))
    }

    /// Pushes every child image by digest, then the index as `repository:tag`.
    pub async fn push_index(
        &self,
        repository: &str,
        tag: &str,
        index: &BuiltIndex,
    ) -> Result<String> {
        for image in &index.images {
            for blob in image.blobs() {
                self.push_blob(repository, blob).await?;
            }
            self.push_manifest(repository, &image.manifest.digest, &image.manifest)
                .await?;
        }
        self.push_manifest(repository, tag, &index.index).await?;
        Ok(format!("{}/{repository}:{tag}", self.addr()))
    }

    /// Builds the default busybox image and pushes it as `cairn/busybox:latest`.
    /// Returns the reference and the image.
    pub async fn push_busybox(&self) -> Result<(String, BuiltImage)> {
        let image = busybox_image(&ImageSpec::default())?;
        let reference = self.push_image("cairn/busybox", "latest", &image).await?;
        Ok((reference, image))
    }

    /// Builds a linux/amd64 + linux/arm64 index of busybox and pushes it as
    /// `cairn/busybox-multi:latest`.
    pub async fn push_busybox_index(&self) -> Result<(String, BuiltIndex)> {
        let index = busybox_index(&ImageSpec::default(), &["amd64", "arm64"])?;
        let reference = self
            .push_index("cairn/busybox-multi", "latest", &index)
            .await?;
        Ok((reference, index))
    }
}

/// Writes `image` as an OCI image layout tar (`oci-layout`, `index.json`, `blobs/sha256/*`).
/// `name` is the full reference stored in `io.containerd.image.name` (its tag also goes in
/// `org.opencontainers.image.ref.name`).
pub fn write_oci_layout_tar(path: &Path, name: &str, image: &BuiltImage) -> Result<()> {
    let tag = name
        .rsplit_once(':')
        .filter(|(_, t)| !t.contains('/'))
        .map_or("latest", |(_, t)| t);
    let mut desc = image.manifest.descriptor();
    if let Some(obj) = desc.as_object_mut() {
        obj.insert(
            "annotations".into(),
            json!({"io.containerd.image.name": name, "org.opencontainers.image.ref.name": tag}),
        );
    }
    let index = json!({"schemaVersion": 2, "mediaType": MEDIA_OCI_INDEX, "manifests": [desc]});
    let mut t = TarWriter::new();
    t.file("oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#, 0o644)?;
    t.file("index.json", &serde_json::to_vec(&index)?, 0o644)?;
    t.dir("blobs", 0o755)?;
    t.dir("blobs/sha256", 0o755)?;
    for blob in image.blobs().chain(std::iter::once(&image.manifest)) {
        t.file(&format!("blobs/sha256/{}", blob.hex()), &blob.data, 0o644)?;
    }
    std::fs::write(path, t.finish()?).with_context(|| format!("writing {}", path.display()))
}

/// Writes `image` in `docker save` format: `manifest.json`, `<config>.json`,
/// `<id>/layer.tar` (uncompressed) and `repositories`. `repo_tag` is e.g. `busybox:latest`.
pub fn write_docker_archive_tar(path: &Path, repo_tag: &str, image: &BuiltImage) -> Result<()> {
    let mut t = TarWriter::new();
    let config_name = format!("{}.json", image.config.hex());
    let mut layer_names = Vec::new();
    for (tar, diff_id) in image.layer_tars.iter().zip(&image.diff_ids) {
        let id = diff_id.trim_start_matches("sha256:");
        t.dir(id, 0o755)?;
        t.file(&format!("{id}/VERSION"), b"1.0", 0o644)?;
        let name = format!("{id}/layer.tar");
        t.file(&name, tar, 0o644)?;
        layer_names.push(name);
    }
    t.file(&config_name, &image.config.data, 0o644)?;
    let manifest = json!([{"Config": config_name, "RepoTags": [repo_tag], "Layers": layer_names}]);
    t.file("manifest.json", &serde_json::to_vec(&manifest)?, 0o644)?;
    if let Some((repo, tag)) = repo_tag.rsplit_once(':') {
        let top = layer_names
            .last()
            .and_then(|n| n.split('/').next())
            .unwrap_or_default();
        let repositories = json!({ repo: { tag: top } });
        t.file("repositories", &serde_json::to_vec(&repositories)?, 0o644)?;
    }
    std::fs::write(path, t.finish()?).with_context(|| format!("writing {}", path.display()))
}

fn gzip(data: &[u8]) -> Result<Vec<u8>> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::default());
    enc.write_all(data).context("gzip")?;
    enc.finish().context("gzip finish")
}

/// A tar builder with fixed owner and mtime for every entry.
struct TarWriter {
    builder: tar::Builder<Vec<u8>>,
}

impl TarWriter {
    fn new() -> Self {
        Self {
            builder: tar::Builder::new(Vec::new()),
        }
    }

    fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(FIXED_MTIME);
        h.set_size(size);
        h
    }

    fn dir(&mut self, path: &str, mode: u32) -> Result<()> {
        let mut h = Self::header(tar::EntryType::Directory, mode, 0);
        self.builder
            .append_data(&mut h, format!("{path}/"), std::io::empty())
            .with_context(|| format!("tar dir {path}"))
    }

    fn file(&mut self, path: &str, data: &[u8], mode: u32) -> Result<()> {
        let mut h = Self::header(tar::EntryType::Regular, mode, data.len() as u64);
        self.builder
            .append_data(&mut h, path, data)
            .with_context(|| format!("tar file {path}"))
    }

    fn symlink(&mut self, path: &str, target: &str) -> Result<()> {
        let mut h = Self::header(tar::EntryType::Symlink, 0o777, 0);
        self.builder
            .append_link(&mut h, path, target)
            .with_context(|| format!("tar symlink {path}"))
    }

    fn finish(self) -> Result<Vec<u8>> {
        self.builder.into_inner().context("finishing tar")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_deterministic_and_platforms_differ() {
        let a = busybox_image(&ImageSpec::default()).unwrap();
        let b = busybox_image(&ImageSpec::default()).unwrap();
        assert_eq!(a.manifest.digest, b.manifest.digest);
        assert_eq!(a.layers.len(), 2);
        let idx = busybox_index(&ImageSpec::default(), &["amd64", "arm64"]).unwrap();
        let amd = idx.image_for("amd64").unwrap();
        let arm = idx.image_for("arm64").unwrap();
        assert_ne!(amd.config_digest(), arm.config_digest());
        assert_eq!(amd.layers[0].digest, arm.layers[0].digest);
    }
}
