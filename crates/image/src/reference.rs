//! Image references, normalised like containerd's `reference/docker.ParseDockerRef`
//! (what the kubelet and the CRI plugin use): `httpd` → `docker.io/library/httpd:latest`.

use std::fmt;
use std::str::FromStr;

/// The registry Docker Hub images live on.
pub const DOCKER_HUB: &str = "docker.io";
const DOCKER_HUB_LEGACY: &str = "index.docker.io";
const OFFICIAL_NAMESPACE: &str = "library";
const DEFAULT_TAG: &str = "latest";
const NAME_MAX: usize = 255;

/// Why a string is not a valid image reference (the wording follows distribution's).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    #[error("invalid reference format: repository name must have at least one component")]
    Empty,
    #[error("invalid reference format")]
    InvalidFormat,
    #[error("invalid reference format: repository name ({0}) must be lowercase")]
    Uppercase(String),
    #[error("invalid repository name ({0}), cannot specify 64-byte hexadecimal strings")]
    HexIdentifier(String),
    #[error("repository name must not be more than 255 characters")]
    NameTooLong,
    #[error("invalid tag format")]
    InvalidTag,
    #[error("invalid checksum digest format")]
    InvalidDigest,
    #[error("unsupported digest algorithm")]
    UnsupportedDigest,
    #[error("invalid checksum digest length")]
    DigestLength,
}

/// A fully qualified image reference.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ImageRef {
    /// Registry host (with port), `docker.io` for Docker Hub.
    pub registry: String,
    /// Repository path, `library/busybox` for official Docker Hub images.
    pub repository: String,
    /// Tag; `None` when the reference is by digest only.
    pub tag: Option<String>,
    /// `algorithm:hex`.
    pub digest: Option<String>,
}

impl ImageRef {
    /// `registry/repository` without tag or digest.
    pub fn name(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    /// The tag or digest to ask the registry for (digest wins).
    pub fn object(&self) -> &str {
        self.digest
            .as_deref()
            .or(self.tag.as_deref())
            .unwrap_or(DEFAULT_TAG)
    }

    /// `registry/repository@digest` for a known manifest digest (kubelet's imageRef).
    pub fn with_digest(&self, digest: &str) -> String {
        format!("{}@{digest}", self.name())
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

impl FromStr for ImageRef {
    type Err = ReferenceError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        normalize(s)
    }
}

/// Parses and normalises `s`: default registry `docker.io`, `library/` for single-component
/// Docker Hub names, tag `latest` when neither tag nor digest is given, and the tag dropped
/// when a digest is given (ParseDockerRef semantics).
pub fn normalize(s: &str) -> Result<ImageRef, ReferenceError> {
    if s.is_empty() {
        return Err(ReferenceError::Empty);
    }
    if is_hex64(s) {
        return Err(ReferenceError::HexIdentifier(s.to_owned()));
    }
    let (rest, digest) = match s.split_once('@') {
        Some((rest, digest)) => (rest, Some(parse_digest(digest)?)),
        None => (s, None),
    };
    // A tag is after the last ':' that follows the last '/'.
    let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match rest[last_slash..].rfind(':') {
        Some(i) => {
            let at = last_slash + i;
            (&rest[..at], Some(&rest[at + 1..]))
        }
        None => (rest, None),
    };
    if let Some(tag) = tag {
        if !valid_tag(tag) {
            return Err(ReferenceError::InvalidTag);
        }
    }
    let (registry, remainder) = split_domain(name);
    if !valid_domain(&registry) {
        return Err(ReferenceError::InvalidFormat);
    }
    if remainder.is_empty() || !remainder.split('/').all(valid_path_component) {
        if remainder.to_lowercase() != remainder
            && remainder
                .to_lowercase()
                .split('/')
                .all(valid_path_component)
        {
            return Err(ReferenceError::Uppercase(remainder));
        }
        return Err(ReferenceError::InvalidFormat);
    }
    let repository = if registry == DOCKER_HUB && !remainder.contains('/') {
        format!("{OFFICIAL_NAMESPACE}/{remainder}")
    } else {
        remainder
    };
    if registry.len() + 1 + repository.len() > NAME_MAX {
        return Err(ReferenceError::NameTooLong);
    }
    let tag = match (&digest, tag) {
        (Some(_), _) => None,
        (None, Some(t)) => Some(t.to_owned()),
        (None, None) => Some(DEFAULT_TAG.to_owned()),
    };
    Ok(ImageRef {
        registry,
        repository,
        tag,
        digest,
    })
}

/// distribution's splitDockerDomain: the first component is a registry only if it looks
/// like a host (has '.' or ':', or is `localhost`) and is not upper case.
fn split_domain(name: &str) -> (String, String) {
    let (domain, remainder) = match name.split_once('/') {
        Some((first, rest))
            if (first.contains(['.', ':']) || first == "localhost")
                && first.to_lowercase() == first =>
        {
            (first.to_owned(), rest.to_owned())
        }
        _ => (DOCKER_HUB.to_owned(), name.to_owned()),
    };
    let domain = if domain == DOCKER_HUB_LEGACY {
        DOCKER_HUB.to_owned()
    } else {
        domain
    };
    (domain, remainder)
}

fn is_hex64(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// `[a-z0-9]+(?:(?:[._]|__|[-]*)[a-z0-9]+)*`
fn valid_path_component(c: &str) -> bool {
    let b = c.as_bytes();
    if b.is_empty() || !is_alnum_lower(b[0]) || !is_alnum_lower(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if is_alnum_lower(b[i]) {
            i += 1;
            continue;
        }
        // A separator run: ".", "_", "__" or any number of "-".
        let start = i;
        while i < b.len() && !is_alnum_lower(b[i]) {
            i += 1;
        }
        let sep = &c[start..i];
        let ok = sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|x| x == b'-');
        if !ok {
            return false;
        }
    }
    true
}

fn is_alnum_lower(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// Host components `[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?` joined by '.', optional
/// `:port`, or a bracketed IPv6 address with optional port.
fn valid_domain(d: &str) -> bool {
    if let Some(rest) = d.strip_prefix('[') {
        let Some((addr, after)) = rest.split_once(']') else {
            return false;
        };
        let port_ok = after.is_empty()
            || after
                .strip_prefix(':')
                .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
        return addr.parse::<std::net::Ipv6Addr>().is_ok() && port_ok;
    }
    let (host, port) = match d.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (d, None),
    };
    if let Some(p) = port {
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
    }
    !host.is_empty()
        && host.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter().all(|x| x.is_ascii_alphanumeric() || *x == b'-')
        })
}

/// `[\w][\w.-]{0,127}`
fn valid_tag(t: &str) -> bool {
    let b = t.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
        && b.iter()
            .all(|x| x.is_ascii_alphanumeric() || matches!(x, b'_' | b'.' | b'-'))
}

fn parse_digest(d: &str) -> Result<String, ReferenceError> {
    let (algo, hex) = d.split_once(':').ok_or(ReferenceError::InvalidDigest)?;
    let algo_ok = !algo.is_empty()
        && algo.as_bytes()[0].is_ascii_alphabetic()
        && algo
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'+' | b'.'));
    if !algo_ok || hex.len() < 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ReferenceError::InvalidDigest);
    }
    let want = match algo {
        "sha256" => 64,
        "sha384" => 96,
        "sha512" => 128,
        _ => return Err(ReferenceError::UnsupportedDigest),
    };
    if hex.len() != want {
        return Err(ReferenceError::DigestLength);
    }
    Ok(d.to_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    const D: &str = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    #[test]
    fn normalizes_like_parse_docker_ref() {
        let digest_ref = format!("docker.io/library/busybox@{D}");
        let cases: Vec<(String, String)> = vec![
            ("httpd".into(), "docker.io/library/httpd:latest".into()),
            (
                "busybox:1.36".into(),
                "docker.io/library/busybox:1.36".into(),
            ),
            (
                "library/busybox".into(),
                "docker.io/library/busybox:latest".into(),
            ),
            (
                "docker.io/busybox".into(),
                "docker.io/library/busybox:latest".into(),
            ),
            (
                "index.docker.io/busybox".into(),
                "docker.io/library/busybox:latest".into(),
            ),
            (
                "index.docker.io/foo/bar:v1".into(),
                "docker.io/foo/bar:v1".into(),
            ),
            (
                "bitnami/nginx".into(),
                "docker.io/bitnami/nginx:latest".into(),
            ),
            (
                "registry.k8s.io/pause:3.9".into(),
                "registry.k8s.io/pause:3.9".into(),
            ),
            ("localhost/foo".into(), "localhost/foo:latest".into()),
            (
                "localhost:5000/foo/bar:t".into(),
                "localhost:5000/foo/bar:t".into(),
            ),
            (
                "127.0.0.1:5000/cairn/busybox".into(),
                "127.0.0.1:5000/cairn/busybox:latest".into(),
            ),
            (
                "test.com:5000".into(),
                "docker.io/library/test.com:5000".into(),
            ),
            (
                "test.com:tag".into(),
                "docker.io/library/test.com:tag".into(),
            ),
            (
                "foo_bar.com:8080".into(),
                "docker.io/library/foo_bar.com:8080".into(),
            ),
            (
                "lowercase:Uppercase".into(),
                "docker.io/library/lowercase:Uppercase".into(),
            ),
            (
                "a.b-c.d/e_f--g__h.i:1".into(),
                "a.b-c.d/e_f--g__h.i:1".into(),
            ),
            ("[::1]:5000/img".into(), "[::1]:5000/img:latest".into()),
            (format!("busybox@{D}"), digest_ref.clone()),
            (format!("busybox:1.0@{D}"), digest_ref.clone()),
            (format!("docker.io/library/busybox:latest@{D}"), digest_ref),
        ];
        for (input, want) in cases {
            let got = normalize(&input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(got.to_string(), want, "input {input}");
            let again = normalize(&got.to_string()).unwrap();
            assert_eq!(again, got, "idempotent for {input}");
        }
    }

    #[test]
    fn rejects_invalid_references() {
        let hex64 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        let cases = [
            ("", ReferenceError::Empty),
            ("Busybox", ReferenceError::Uppercase("Busybox".into())),
            (
                "docker.io/Foo/bar",
                ReferenceError::Uppercase("Foo/bar".into()),
            ),
            (hex64, ReferenceError::HexIdentifier(hex64.into())),
            ("busybox:", ReferenceError::InvalidTag),
            ("busybox:-x", ReferenceError::InvalidTag),
            ("busybox@sha256:abc", ReferenceError::InvalidDigest),
            (
                "busybox@md5:0123456789abcdef0123456789abcdef",
                ReferenceError::UnsupportedDigest,
            ),
            (
                "busybox@sha256:0123456789abcdef0123456789abcdef",
                ReferenceError::DigestLength,
            ),
            ("foo//bar", ReferenceError::InvalidFormat),
            ("foo/bar/", ReferenceError::InvalidFormat),
            ("-foo", ReferenceError::InvalidFormat),
            ("foo..bar", ReferenceError::InvalidFormat),
            ("foo___bar", ReferenceError::InvalidFormat),
            ("a b", ReferenceError::InvalidFormat),
            ("host:port:5000/x", ReferenceError::InvalidFormat),
            ("-bad.host/x", ReferenceError::InvalidFormat),
        ];
        for (input, want) in cases {
            assert_eq!(normalize(input), Err(want), "input {input:?}");
        }
        let long = format!("example.com/{}", "a".repeat(250));
        assert_eq!(normalize(&long), Err(ReferenceError::NameTooLong));
    }

    #[test]
    fn parts_and_object() {
        let r = normalize("127.0.0.1:5000/cairn/busybox").unwrap();
        assert_eq!(r.registry, "127.0.0.1:5000");
        assert_eq!(r.repository, "cairn/busybox");
        assert_eq!(r.object(), "latest");
        assert_eq!(r.name(), "127.0.0.1:5000/cairn/busybox");
        let r = normalize(&format!("busybox@{D}")).unwrap();
        assert_eq!(r.object(), D);
        assert_eq!(r.tag, None);
    }
}
