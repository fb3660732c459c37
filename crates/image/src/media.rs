//! Media types, descriptors, platform matching, chain IDs and parsing of manifests,
//! indexes and configs (through oci-spec's image types, which also read Docker schema 2).

use std::collections::{BTreeMap, HashMap};

use oci_spec::image::{Descriptor, ImageConfiguration, ImageIndex, ImageManifest};
use sha2::{Digest, Sha256};

use crate::{ImageConfig, Platform};

pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
pub const DOCKER_CONFIG: &str = "application/vnd.docker.container.image.v1+json";
pub const DOCKER_LAYER: &str = "application/vnd.docker.image.rootfs.diff.tar";
pub const DOCKER_LAYER_GZIP: &str = "application/vnd.docker.image.rootfs.diff.tar.gzip";

/// What we accept when resolving, in order of preference.
pub const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json";

/// Manifests and configs larger than this are refused (containerd uses the same bound).
pub const MAX_MANIFEST_BYTES: usize = 4 << 20;

/// A content descriptor as far as the puller needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Desc {
    pub media_type: String,
    pub digest: String,
    pub size: i64,
}

impl Desc {
    pub fn from_oci(d: &Descriptor) -> Self {
        Self {
            media_type: d.media_type().to_string(),
            digest: d.digest().to_string(),
            size: i64::try_from(d.size()).unwrap_or(i64::MAX),
        }
    }

    pub fn to_proto(&self) -> containerd_client::types::Descriptor {
        containerd_client::types::Descriptor {
            media_type: self.media_type.clone(),
            digest: self.digest.clone(),
            size: self.size,
            annotations: HashMap::new(),
        }
    }
}

pub fn is_index(media_type: &str) -> bool {
    media_type == OCI_INDEX || media_type == DOCKER_LIST
}

pub fn is_manifest(media_type: &str) -> bool {
    media_type == OCI_MANIFEST || media_type == DOCKER_MANIFEST
}

/// Layer media types the Diff service can apply (containerd 1.6's walking applier).
pub fn is_supported_layer(media_type: &str) -> bool {
    matches!(
        media_type,
        "application/vnd.oci.image.layer.v1.tar"
            | "application/vnd.oci.image.layer.v1.tar+gzip"
            | "application/vnd.oci.image.layer.v1.tar+zstd"
            | "application/vnd.oci.image.layer.nondistributable.v1.tar"
            | "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip"
            | "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd"
            | DOCKER_LAYER
            | DOCKER_LAYER_GZIP
            | "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip"
    )
}

/// The media type of a manifest body: the server's Content-Type when it names a manifest
/// type, else the body's `mediaType`, else guessed from its shape.
pub fn manifest_media_type(content_type: Option<&str>, body: &[u8]) -> String {
    let header = content_type
        .map(|c| c.split(';').next().unwrap_or_default().trim().to_owned())
        .filter(|c| is_index(c) || is_manifest(c));
    if let Some(h) = header {
        return h;
    }
    let value: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    if let Some(m) = value.get("mediaType").and_then(|v| v.as_str()) {
        return m.to_owned();
    }
    if value.get("manifests").is_some() {
        OCI_INDEX.to_owned()
    } else {
        OCI_MANIFEST.to_owned()
    }
}

/// `sha256:<hex>` of `data`.
pub fn sha256_digest(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(data)))
}

/// GOARCH name for a Rust/uname architecture name.
pub fn goarch(arch: &str) -> &str {
    match arch {
        "x86_64" | "x86-64" => "amd64",
        "aarch64" => "arm64",
        "x86" | "i386" | "i686" => "386",
        "powerpc64" => "ppc64le",
        "armhf" | "armel" => "arm",
        other => other,
    }
}

/// Normalised variant: arm64's default is `v8`, arm's `v7`; amd64 variants are ignored
/// (containerd 1.6 does not distinguish them).
fn variant_of(arch: &str, variant: Option<&str>) -> Option<String> {
    match (arch, variant.filter(|v| !v.is_empty())) {
        ("arm64", None) => Some("v8".to_owned()),
        ("arm", None) => Some("v7".to_owned()),
        ("amd64", _) => None,
        (_, v) => v.map(str::to_owned),
    }
}

/// How well `candidate` fits `want`: `None` if it does not run, lower is better
/// (containerd's `platforms.Only`: exact variant first, then older arm variants).
pub fn platform_rank(want: &Platform, os: &str, arch: &str, variant: Option<&str>) -> Option<u32> {
    if os != want.os || goarch(arch) != want.architecture {
        return None;
    }
    let want_variant = variant_of(&want.architecture, want.variant.as_deref());
    let have_variant = variant_of(&want.architecture, variant);
    if want_variant == have_variant {
        return Some(0);
    }
    if want.architecture == "arm" {
        let level = |v: &Option<String>| {
            v.as_deref()
                .and_then(|s| s.strip_prefix('v'))
                .and_then(|n| n.parse::<u32>().ok())
        };
        if let (Some(w), Some(h)) = (level(&want_variant), level(&have_variant)) {
            if h < w {
                return Some(w - h);
            }
        }
    }
    None
}

/// The best manifest for `platform` in `index` (first of the best rank, as containerd).
pub fn select_manifest(index: &ImageIndex, platform: &Platform) -> Option<Desc> {
    let mut best: Option<(u32, Desc)> = None;
    for m in index.manifests() {
        let Some(p) = m.platform() else {
            continue;
        };
        let arch = p.architecture().to_string();
        let os = p.os().to_string();
        if let Some(rank) = platform_rank(platform, &os, &arch, p.variant().as_deref()) {
            if best.as_ref().is_none_or(|(r, _)| rank < *r) {
                best = Some((rank, Desc::from_oci(m)));
            }
        }
    }
    best.map(|(_, d)| d)
}

pub fn parse_index(body: &[u8]) -> Result<ImageIndex, String> {
    ImageIndex::from_reader(body).map_err(|e| format!("invalid index: {e}"))
}

pub fn parse_manifest(body: &[u8]) -> Result<ImageManifest, String> {
    let m = ImageManifest::from_reader(body).map_err(|e| format!("invalid manifest: {e}"))?;
    if m.schema_version() != 2 {
        return Err(format!("unsupported schemaVersion {}", m.schema_version()));
    }
    Ok(m)
}

pub fn parse_config(body: &[u8]) -> Result<ImageConfiguration, String> {
    ImageConfiguration::from_reader(body).map_err(|e| format!("invalid image config: {e}"))
}

/// The runtime part of an image config.
pub fn runtime_config(cfg: &ImageConfiguration) -> ImageConfig {
    let Some(c) = cfg.config() else {
        return ImageConfig::default();
    };
    let mut exposed_ports = c.exposed_ports().clone().unwrap_or_default();
    exposed_ports.sort();
    ImageConfig {
        entrypoint: c.entrypoint().clone().unwrap_or_default(),
        cmd: c.cmd().clone().unwrap_or_default(),
        env: c.env().clone().unwrap_or_default(),
        working_dir: c.working_dir().clone().unwrap_or_default(),
        user: c.user().clone().unwrap_or_default(),
        exposed_ports,
        labels: c
            .labels()
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect::<BTreeMap<_, _>>(),
        stop_signal: c.stop_signal().clone(),
    }
}

/// Chain IDs of the layers: `chain[0] = diff[0]`, `chain[i] = sha256(chain[i-1] + " " + diff[i])`.
pub fn chain_ids(diff_ids: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(diff_ids.len());
    for d in diff_ids {
        let next = match out.last() {
            None => d.clone(),
            Some(parent) => sha256_digest(format!("{parent} {d}").as_bytes()),
        };
        out.push(next);
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn chain_ids_match_containerd() {
        // identity.ChainIDs of two layers, as computed by containerd.
        let a = "sha256:a".to_owned();
        let b = "sha256:b".to_owned();
        let ids = chain_ids(&[a.clone(), b]);
        assert_eq!(ids[0], a);
        assert_eq!(ids[1], sha256_digest(b"sha256:a sha256:b"));
    }

    #[test]
    fn platform_matching() {
        let amd = Platform::default();
        assert_eq!(platform_rank(&amd, "linux", "amd64", None), Some(0));
        assert_eq!(platform_rank(&amd, "linux", "amd64", Some("v3")), Some(0));
        assert_eq!(platform_rank(&amd, "linux", "arm64", None), None);
        assert_eq!(platform_rank(&amd, "windows", "amd64", None), None);
        let arm64: Platform = "linux/arm64".parse().unwrap();
        assert_eq!(platform_rank(&arm64, "linux", "arm64", Some("v8")), Some(0));
        assert_eq!(platform_rank(&arm64, "linux", "arm64", None), Some(0));
        let armv7: Platform = "linux/arm/v7".parse().unwrap();
        assert_eq!(platform_rank(&armv7, "linux", "arm", Some("v6")), Some(1));
        assert_eq!(platform_rank(&armv7, "linux", "arm", Some("v8")), None);
    }

    #[test]
    fn media_type_detection() {
        assert_eq!(
            manifest_media_type(Some("application/vnd.oci.image.index.v1+json"), b"{}"),
            OCI_INDEX
        );
        assert_eq!(
            manifest_media_type(Some("application/json"), br#"{"manifests":[]}"#),
            OCI_INDEX
        );
        assert_eq!(
            manifest_media_type(
                None,
                format!(r#"{{"mediaType":"{DOCKER_MANIFEST}"}}"#).as_bytes()
            ),
            DOCKER_MANIFEST
        );
    }
}
