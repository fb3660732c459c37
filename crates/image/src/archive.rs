//! `import`: OCI image layout tars and `docker save` tars (plain or gzip-compressed) into
//! containerd, for air-gapped nodes. The tar is read once, streaming every file into the
//! content store (a blocking reader thread feeds the async writer), then each named image
//! is unpacked and registered like a pulled one.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tokio::sync::mpsc;
use tonic::transport::Channel;

use crate::media::{self, Desc, MAX_MANIFEST_BYTES};
use crate::store::Store;
use crate::unpack::{parse_ref, register};
use crate::{ImageError, ImageInfo, PullOptions};

const CHUNK: usize = 1 << 20;

/// Metadata files of the two layouts, kept in memory and not stored as blobs.
const METADATA: &[&str] = &["index.json", "oci-layout", "manifest.json", "repositories"];

enum TarEvent {
    Start { path: String },
    Chunk(Vec<u8>),
    End,
    Failed(String),
}

/// A file of the archive as stored.
struct Stored {
    digest: String,
    size: i64,
    gzip: bool,
}

pub async fn import(
    channel: Channel,
    namespace: &str,
    path: &Path,
    opts: &PullOptions,
) -> Result<Vec<ImageInfo>, ImageError> {
    let store = Store::new(channel, namespace).with_new_lease().await?;
    let result = import_leased(&store, path, opts).await;
    if let Err(e) = store.release_lease().await {
        tracing::warn!(error = %e, "releasing import lease (it expires on its own)");
    }
    result
}

fn archive_err(path: &Path, detail: impl Into<String>) -> ImageError {
    ImageError::Archive {
        path: path.to_path_buf(),
        detail: detail.into(),
    }
}

async fn import_leased(
    store: &Store,
    path: &Path,
    opts: &PullOptions,
) -> Result<Vec<ImageInfo>, ImageError> {
    let (memory, stored) = read_archive(store, path).await?;
    if let Some(index) = memory.get("index.json") {
        let infos = import_oci(store, path, index, &memory, &stored, opts).await?;
        if !infos.is_empty() {
            return Ok(infos);
        }
    }
    if let Some(manifest) = memory.get("manifest.json") {
        let infos = import_docker(store, path, manifest, &memory, &stored, opts).await?;
        if !infos.is_empty() {
            return Ok(infos);
        }
    }
    Err(archive_err(
        path,
        "no named image found (want an OCI layout with io.containerd.image.name or a full org.opencontainers.image.ref.name, or a docker save manifest.json with RepoTags)",
    ))
}

/// Streams the tar into the content store. Returns small JSON files by path and what was
/// stored by path.
async fn read_archive(
    store: &Store,
    path: &Path,
) -> Result<(HashMap<String, Vec<u8>>, HashMap<String, Stored>), ImageError> {
    let (tx, mut rx) = mpsc::channel::<TarEvent>(4);
    let tar_path = path.to_path_buf();
    let reader = tokio::task::spawn_blocking(move || {
        if let Err(e) = walk_tar(&tar_path, &tx) {
            let _ = tx.blocking_send(TarEvent::Failed(e));
        }
    });
    let mut memory = HashMap::new();
    let mut stored = HashMap::new();
    while let Some(event) = rx.recv().await {
        match event {
            TarEvent::Start { path: name } => {
                let (kept, file) = receive_file(store, path, &name, &mut rx).await?;
                if let Some(bytes) = kept {
                    memory.insert(name.clone(), bytes);
                }
                if let Some(file) = file {
                    stored.insert(name, file);
                }
            }
            TarEvent::Failed(e) => return Err(archive_err(path, e)),
            TarEvent::Chunk(_) | TarEvent::End => {
                return Err(archive_err(path, "tar reader out of step"));
            }
        }
    }
    reader
        .await
        .map_err(|e| archive_err(path, format!("tar reader thread: {e}")))?;
    Ok((memory, stored))
}

/// One file: JSON-looking files up to [`MAX_MANIFEST_BYTES`] are kept in memory; every
/// non-metadata file is written to the content store under its sha256.
async fn receive_file(
    store: &Store,
    archive: &Path,
    name: &str,
    rx: &mut mpsc::Receiver<TarEvent>,
) -> Result<(Option<Vec<u8>>, Option<Stored>), ImageError> {
    let base = name.rsplit('/').next().unwrap_or(name);
    let is_metadata = METADATA.contains(&name) || base == "VERSION" || base == "json";
    // The digest the layout promises, if the path is `blobs/<alg>/<hex>`.
    let promised = name
        .strip_prefix("blobs/sha256/")
        .map(|hex| format!("sha256:{hex}"));
    let mut writer = if is_metadata {
        None
    } else {
        Some(
            store
                .writer(promised.as_deref().unwrap_or("import"))
                .await?,
        )
    };
    let mut hasher = Sha256::new();
    let mut size: i64 = 0;
    let mut head: Vec<u8> = Vec::new();
    let mut memory: Option<Vec<u8>> = Some(Vec::new());
    loop {
        let event = rx
            .recv()
            .await
            .ok_or_else(|| archive_err(archive, "tar reader stopped"))?;
        match event {
            TarEvent::Chunk(data) => {
                hasher.update(&data);
                size += i64::try_from(data.len()).unwrap_or(i64::MAX);
                if head.len() < 2 {
                    head.extend(data.iter().take(2 - head.len()));
                }
                if let Some(m) = memory.as_mut() {
                    if m.len() + data.len() <= MAX_MANIFEST_BYTES {
                        m.extend_from_slice(&data);
                    } else {
                        memory = None;
                    }
                }
                if let Some(w) = writer.as_mut() {
                    if let Err(e) = w.write(data).await {
                        if let Some(w) = writer.take() {
                            w.abort().await;
                        }
                        return Err(e);
                    }
                }
            }
            TarEvent::End => break,
            TarEvent::Failed(e) => {
                if let Some(w) = writer.take() {
                    w.abort().await;
                }
                return Err(archive_err(archive, e));
            }
            TarEvent::Start { .. } => return Err(archive_err(archive, "tar reader out of step")),
        }
    }
    let digest = format!("sha256:{}", hex::encode(hasher.finalize()));
    if let Some(w) = writer {
        if let Some(p) = &promised {
            if *p != digest {
                w.abort().await;
                return Err(ImageError::DigestMismatch {
                    reference: format!("{}:{name}", archive.display()),
                    expected: p.clone(),
                    actual: digest,
                });
            }
        }
        w.commit(size, &digest).await?;
    }
    let looks_json = matches!(head.first(), Some(b'{') | Some(b'['));
    let kept = memory.filter(|_| looks_json || is_metadata);
    let file = (!is_metadata).then(|| Stored {
        digest,
        size,
        gzip: head == [0x1f, 0x8b],
    });
    Ok((kept, file))
}

/// Reads the tar (gunzipping it if needed) on a blocking thread.
fn walk_tar(path: &PathBuf, tx: &mpsc::Sender<TarEvent>) -> Result<(), String> {
    let mut file = std::fs::File::open(path).map_err(|e| format!("opening: {e}"))?;
    let mut magic = [0u8; 2];
    let n = file.read(&mut magic).map_err(|e| format!("reading: {e}"))?;
    drop(file);
    let file = std::fs::File::open(path).map_err(|e| format!("opening: {e}"))?;
    let reader: Box<dyn Read> = if n == 2 && magic == [0x1f, 0x8b] {
        Box::new(flate2::read::GzDecoder::new(std::io::BufReader::new(file)))
    } else {
        Box::new(std::io::BufReader::new(file))
    };
    let mut archive = tar::Archive::new(reader);
    for entry in archive.entries().map_err(|e| format!("reading tar: {e}"))? {
        let mut entry = entry.map_err(|e| format!("reading tar entry: {e}"))?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let name = entry
            .path()
            .map_err(|e| format!("tar entry path: {e}"))?
            .to_string_lossy()
            .trim_start_matches("./")
            .to_owned();
        if tx
            .blocking_send(TarEvent::Start { path: name.clone() })
            .is_err()
        {
            return Ok(());
        }
        loop {
            let mut buf = vec![0u8; CHUNK];
            let mut filled = 0;
            while filled < CHUNK {
                let n = entry
                    .read(&mut buf[filled..])
                    .map_err(|e| format!("reading {name}: {e}"))?;
                if n == 0 {
                    break;
                }
                filled += n;
            }
            if filled == 0 {
                break;
            }
            buf.truncate(filled);
            if tx.blocking_send(TarEvent::Chunk(buf)).is_err() {
                return Ok(());
            }
        }
        if tx.blocking_send(TarEvent::End).is_err() {
            return Ok(());
        }
    }
    Ok(())
}

async fn import_oci(
    store: &Store,
    path: &Path,
    index_json: &[u8],
    memory: &HashMap<String, Vec<u8>>,
    stored: &HashMap<String, Stored>,
    opts: &PullOptions,
) -> Result<Vec<ImageInfo>, ImageError> {
    let index = media::parse_index(index_json)
        .map_err(|d| archive_err(path, format!("index.json: {d}")))?;
    let blob = |digest: &str| -> Result<&Vec<u8>, ImageError> {
        let key = format!("blobs/{}", digest.replace(':', "/"));
        memory
            .get(&key)
            .ok_or_else(|| archive_err(path, format!("blob {digest} missing or too large")))
    };
    let mut infos = Vec::new();
    for desc in index.manifests() {
        let annotations = desc.annotations().clone().unwrap_or_default();
        let name = annotations.get("io.containerd.image.name").or_else(|| {
            annotations
                .get("org.opencontainers.image.ref.name")
                .filter(|n| n.contains('/'))
        });
        let Some(name) = name else {
            tracing::warn!(archive = %path.display(), digest = %desc.digest(), "skipping unnamed manifest");
            continue;
        };
        let r = parse_ref(name)?;
        let full = r.to_string();
        let target = Desc::from_oci(desc);
        let body = blob(&target.digest)?;
        let (manifest_desc, manifest_body) = if media::is_index(&target.media_type) {
            let inner = media::parse_index(body).map_err(|d| archive_err(path, d))?;
            let child = media::select_manifest(&inner, &opts.platform).ok_or_else(|| {
                ImageError::NoMatchingPlatform {
                    reference: full.clone(),
                    platform: opts.platform.to_string(),
                    digest: target.digest.clone(),
                }
            })?;
            let child_body = blob(&child.digest)?;
            (child, child_body)
        } else {
            (target.clone(), body)
        };
        let manifest = media::parse_manifest(manifest_body).map_err(|d| archive_err(path, d))?;
        let config_desc = Desc::from_oci(manifest.config());
        let config =
            media::parse_config(blob(&config_desc.digest)?).map_err(|d| archive_err(path, d))?;
        for layer in manifest.layers() {
            let key = format!("blobs/{}", layer.digest().to_string().replace(':', "/"));
            if !stored.contains_key(&key)
                && store.content_info(layer.digest().as_ref()).await?.is_none()
            {
                return Err(archive_err(
                    path,
                    format!("layer {} missing", layer.digest()),
                ));
            }
        }
        let index_desc = (target.digest != manifest_desc.digest).then_some(&target);
        let info = register(
            store,
            &full,
            &r,
            &target,
            index_desc,
            (&manifest_desc, &manifest),
            (&config_desc, &config),
            opts,
        )
        .await?;
        infos.push(info);
    }
    Ok(infos)
}

async fn import_docker(
    store: &Store,
    path: &Path,
    manifest_json: &[u8],
    memory: &HashMap<String, Vec<u8>>,
    stored: &HashMap<String, Stored>,
    opts: &PullOptions,
) -> Result<Vec<ImageInfo>, ImageError> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct Entry {
        config: String,
        #[serde(default)]
        repo_tags: Option<Vec<String>>,
        layers: Vec<String>,
    }
    let entries: Vec<Entry> = serde_json::from_slice(manifest_json)
        .map_err(|e| archive_err(path, format!("manifest.json: {e}")))?;
    let mut infos = Vec::new();
    for entry in entries {
        let tags = entry.repo_tags.unwrap_or_default();
        if tags.is_empty() {
            tracing::warn!(archive = %path.display(), config = %entry.config, "skipping image without RepoTags");
            continue;
        }
        let config_body = memory
            .get(&entry.config)
            .ok_or_else(|| archive_err(path, format!("config {} missing", entry.config)))?;
        let config = media::parse_config(config_body)
            .map_err(|d| archive_err(path, format!("{}: {d}", entry.config)))?;
        let config_desc = Desc {
            media_type: media::DOCKER_CONFIG.to_owned(),
            digest: media::sha256_digest(config_body),
            size: i64::try_from(config_body.len()).unwrap_or(i64::MAX),
        };
        store.write_blob(&config_desc, config_body).await?;
        let diff_ids = config.rootfs().diff_ids();
        if diff_ids.len() != entry.layers.len() {
            return Err(archive_err(
                path,
                format!(
                    "{} layers but {} diff_ids in {}",
                    entry.layers.len(),
                    diff_ids.len(),
                    entry.config
                ),
            ));
        }
        let mut layers = Vec::new();
        for (layer_path, diff_id) in entry.layers.iter().zip(diff_ids) {
            let file = stored
                .get(layer_path.trim_start_matches("./"))
                .ok_or_else(|| archive_err(path, format!("layer {layer_path} missing")))?;
            if !file.gzip && file.digest != *diff_id {
                return Err(ImageError::DigestMismatch {
                    reference: format!("{}:{layer_path}", path.display()),
                    expected: diff_id.to_string(),
                    actual: file.digest.clone(),
                });
            }
            let media_type = if file.gzip {
                media::DOCKER_LAYER_GZIP
            } else {
                media::DOCKER_LAYER
            };
            layers.push(serde_json::json!({"mediaType": media_type, "size": file.size, "digest": file.digest}));
        }
        let manifest_value = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": media::DOCKER_MANIFEST,
            "config": {"mediaType": config_desc.media_type, "size": config_desc.size, "digest": config_desc.digest},
            "layers": layers,
        });
        let manifest_body = serde_json::to_vec(&manifest_value)
            .map_err(|e| archive_err(path, format!("encoding manifest: {e}")))?;
        let manifest_desc = Desc {
            media_type: media::DOCKER_MANIFEST.to_owned(),
            digest: media::sha256_digest(&manifest_body),
            size: i64::try_from(manifest_body.len()).unwrap_or(i64::MAX),
        };
        let manifest = media::parse_manifest(&manifest_body).map_err(|d| archive_err(path, d))?;
        store.write_blob(&manifest_desc, &manifest_body).await?;
        for tag in tags {
            let r = parse_ref(&tag)?;
            let info = register(
                store,
                &r.to_string(),
                &r,
                &manifest_desc,
                None,
                (&manifest_desc, &manifest),
                (&config_desc, &config),
                opts,
            )
            .await?;
            infos.push(info);
        }
    }
    Ok(infos)
}
