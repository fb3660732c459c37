//! Image references, registry pulls and imports into containerd.
//!
//! containerd 1.6 has no Transfer API, so a pull is done here: resolve the reference on the
//! registry (or the mirrors of a containerd-style `hosts.toml`), select the platform from an
//! index, stream every blob into containerd's content store with its digest checked, apply
//! each layer through the Diff service onto overlayfs snapshots named by chain ID, and
//! register the image with the garbage-collection labels containerd's own unpacker sets, all
//! under a lease that is dropped at the end. The result is an image `ctr` and the CRI plugin
//! could use as well.

mod archive;
pub mod credentials;
mod fetch;
pub mod hosts;
mod http;
mod media;
pub mod reference;
mod store;
mod unpack;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use tonic::transport::Channel;

pub use credentials::{
    credentials_from_docker_config, docker_config_credentials, Credentials, CredentialsError,
};
pub use fetch::AnyServerCertificate;
pub use hosts::{registry_hosts, HostsError, RegistryHost, DEFAULT_HOSTS_DIR};
pub use reference::{normalize, ImageRef, ReferenceError};

/// Why a pull, lookup or import failed. [`ImageError::kind`] sorts them for the agent.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("invalid image reference {reference:?}: {source}")]
    InvalidReference {
        reference: String,
        source: ReferenceError,
    },
    #[error("failed to resolve reference \"{reference}\": {reference}: not found")]
    NotFound { reference: String },
    #[error("failed to resolve reference \"{reference}\": pull access denied, repository does not exist or may require authorization: {host}: {detail}")]
    Unauthorized {
        reference: String,
        host: String,
        detail: String,
    },
    #[error("failed to do request to {host} for \"{reference}\": {detail}")]
    Unreachable {
        reference: String,
        host: String,
        detail: String,
    },
    #[error("unexpected status from {url} for \"{reference}\": {status}: {detail}")]
    Registry {
        reference: String,
        url: String,
        status: u16,
        detail: String,
    },
    #[error("bad manifest {digest} of \"{reference}\": {detail}")]
    BadManifest {
        reference: String,
        digest: String,
        detail: String,
    },
    #[error("digest mismatch for blob of \"{reference}\": expected {expected}, got {actual}")]
    DigestMismatch {
        reference: String,
        expected: String,
        actual: String,
    },
    #[error("no match for platform {platform} in manifest {digest} of \"{reference}\": not found")]
    NoMatchingPlatform {
        reference: String,
        platform: String,
        digest: String,
    },
    #[error("failed to unpack layer {layer} of \"{reference}\": {detail}")]
    Unpack {
        reference: String,
        layer: String,
        detail: String,
    },
    #[error("containerd {call} failed for {object}: {status}")]
    Containerd {
        call: &'static str,
        object: String,
        status: Box<tonic::Status>,
    },
    #[error(transparent)]
    Hosts(#[from] HostsError),
    #[error("TLS setup for {host}: {detail}")]
    Tls { host: String, detail: String },
    #[error("importing {path}: {detail}")]
    Archive { path: PathBuf, detail: String },
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}

/// Coarse classes of [`ImageError`], for the agent's status reasons and retry decisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The reference does not parse (`InvalidImageName`).
    InvalidReference,
    /// Manifest or repository unknown on every host, or no manifest for this platform.
    NotFound,
    /// 401/403 even after authenticating with the given credentials.
    Unauthorized,
    /// No host answered (connection refused, DNS, TLS, timeout).
    Unreachable,
    /// Content that does not verify or parse: digest or size mismatch, bad manifest/config.
    BadContent,
    /// Applying a layer onto a snapshot failed.
    Unpack,
    /// containerd, local I/O or configuration trouble.
    Other,
}

impl ImageError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::InvalidReference { .. } => ErrorKind::InvalidReference,
            Self::NotFound { .. } | Self::NoMatchingPlatform { .. } => ErrorKind::NotFound,
            Self::Unauthorized { .. } => ErrorKind::Unauthorized,
            Self::Unreachable { .. } | Self::Tls { .. } => ErrorKind::Unreachable,
            Self::BadManifest { .. } | Self::DigestMismatch { .. } => ErrorKind::BadContent,
            Self::Unpack { .. } => ErrorKind::Unpack,
            Self::Registry { status, .. } if *status == 404 => ErrorKind::NotFound,
            Self::Registry { .. }
            | Self::Containerd { .. }
            | Self::Hosts(_)
            | Self::Archive { .. }
            | Self::Io { .. } => ErrorKind::Other,
        }
    }

    pub(crate) fn containerd(
        call: &'static str,
        object: impl Into<String>,
        status: tonic::Status,
    ) -> Self {
        Self::Containerd {
            call,
            object: object.into(),
            status: Box::new(status),
        }
    }
}

/// The kubelet's wording for a failed pull (`ErrImagePull` message), e.g.
/// `failed to pull and unpack image "docker.io/library/x:latest": failed to resolve
/// reference "docker.io/library/x:latest": docker.io/library/x:latest: not found`.
pub fn pull_error_message(reference: &str, err: &ImageError) -> String {
    let name = normalize(reference).map_or_else(|_| reference.to_owned(), |r| r.to_string());
    format!("failed to pull and unpack image \"{name}\": {err}")
}

/// An OS/architecture(/variant) to select from an image index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Platform {
    pub os: String,
    /// GOARCH name (`amd64`, `arm64`, ...).
    pub architecture: String,
    pub variant: Option<String>,
}

impl Default for Platform {
    /// `linux/<this machine's architecture>`.
    fn default() -> Self {
        Self {
            os: "linux".to_owned(),
            architecture: media::goarch(std::env::consts::ARCH).to_owned(),
            variant: None,
        }
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(v) = &self.variant {
            write!(f, "/{v}")?;
        }
        Ok(())
    }
}

impl FromStr for Platform {
    type Err = String;

    /// `os/arch[/variant]`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut parts = s.split('/');
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(os), Some(arch), variant, None) if !os.is_empty() && !arch.is_empty() => {
                Ok(Self {
                    os: os.to_owned(),
                    architecture: media::goarch(arch).to_owned(),
                    variant: variant.filter(|v| !v.is_empty()).map(str::to_owned),
                })
            }
            _ => Err(format!("invalid platform {s:?}: want os/arch[/variant]")),
        }
    }
}

/// How to pull.
#[derive(Debug, Clone)]
pub struct PullOptions {
    /// Credentials for the image's registry, tried in order when it asks for authentication
    /// (e.g. from the pod's `imagePullSecrets` via [`docker_config_credentials`]).
    pub credentials: Vec<Credentials>,
    /// containerd `hosts.toml` layout: `<dir>/<host>/hosts.toml`. `None` uses the registry
    /// directly. Default [`DEFAULT_HOSTS_DIR`]; a missing directory is fine.
    pub hosts_dir: Option<PathBuf>,
    pub platform: Platform,
    /// containerd snapshotter (`overlayfs`).
    pub snapshotter: String,
}

impl Default for PullOptions {
    fn default() -> Self {
        Self {
            credentials: Vec::new(),
            hosts_dir: Some(PathBuf::from(DEFAULT_HOSTS_DIR)),
            platform: Platform::default(),
            snapshotter: "overlayfs".to_owned(),
        }
    }
}

/// The runtime-relevant part of an image config.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageConfig {
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    pub env: Vec<String>,
    pub working_dir: String,
    pub user: String,
    /// `port/proto`, sorted.
    pub exposed_ports: Vec<String>,
    pub labels: BTreeMap<String, String>,
    pub stop_signal: Option<String>,
}

/// A pulled (and unpacked) image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInfo {
    /// Normalised reference, the containerd image name.
    pub name: String,
    /// Image ID: the config digest (`sha256:...`), the kubelet's `imageID` for CRI images.
    pub id: String,
    /// `registry/repository@<target digest>` (manifest, or index when pulled through one):
    /// the repo digest the kubelet reports as `imageID` in container statuses.
    pub repo_digest: String,
    /// Digest of the platform manifest used.
    pub manifest_digest: String,
    pub config: ImageConfig,
    /// Chain ID of the top layer: the parent snapshot of a container's rootfs.
    pub chain_id: String,
    /// Compressed size of manifest, config and layers.
    pub size: u64,
}

/// Pulls `reference` into containerd namespace `namespace` and unpacks it.
pub async fn pull(
    channel: Channel,
    namespace: &str,
    reference: &str,
    opts: &PullOptions,
) -> Result<ImageInfo, ImageError> {
    unpack::pull(channel, namespace, reference, opts).await
}

/// The image named `reference` if it is registered and unpacked for the default platform
/// and `overlayfs` (else `None`: a pull is needed).
pub async fn get(
    channel: Channel,
    namespace: &str,
    reference: &str,
) -> Result<Option<ImageInfo>, ImageError> {
    get_with(channel, namespace, reference, &PullOptions::default()).await
}

/// [`get`] for the platform and snapshotter of `opts`.
pub async fn get_with(
    channel: Channel,
    namespace: &str,
    reference: &str,
    opts: &PullOptions,
) -> Result<Option<ImageInfo>, ImageError> {
    unpack::get(channel, namespace, reference, opts).await
}

/// Every registered image that is unpacked for the default platform.
pub async fn list(channel: Channel, namespace: &str) -> Result<Vec<ImageInfo>, ImageError> {
    unpack::list(channel, namespace, &PullOptions::default()).await
}

/// Removes the image named `reference`; its content and snapshots go with containerd's
/// garbage collection once nothing else uses them. Returns whether it existed.
pub async fn remove(
    channel: Channel,
    namespace: &str,
    reference: &str,
) -> Result<bool, ImageError> {
    unpack::remove(channel, namespace, reference).await
}

/// Imports an OCI image layout tar or a `docker save` tar (optionally gzip-compressed):
/// every named image in it is stored, unpacked and registered.
pub async fn import_archive(
    channel: Channel,
    namespace: &str,
    path: &Path,
    opts: &PullOptions,
) -> Result<Vec<ImageInfo>, ImageError> {
    archive::import(channel, namespace, path, opts).await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn platform_parse_and_display() {
        let p: Platform = "linux/arm64/v8".parse().unwrap();
        assert_eq!(p.variant.as_deref(), Some("v8"));
        assert_eq!(p.to_string(), "linux/arm64/v8");
        let p: Platform = "linux/x86_64".parse().unwrap();
        assert_eq!(p.architecture, "amd64");
        assert!("linux".parse::<Platform>().is_err());
    }

    #[test]
    fn error_kinds_and_message() {
        let e = ImageError::NotFound {
            reference: "docker.io/library/nope:latest".into(),
        };
        assert_eq!(e.kind(), ErrorKind::NotFound);
        assert_eq!(
            pull_error_message("nope", &e),
            "failed to pull and unpack image \"docker.io/library/nope:latest\": failed to resolve reference \"docker.io/library/nope:latest\": docker.io/library/nope:latest: not found"
        );
    }
}
