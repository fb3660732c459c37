//! Pull orchestration and what pulls and imports share: unpacking layers onto snapshots,
//! the garbage-collection labels, the image record, and reading an image back.

use std::collections::HashMap;

use oci_spec::image::{ImageConfiguration, ImageManifest};
use sha2::{Digest, Sha256};
use tonic::transport::Channel;
use tonic::Code;

use crate::fetch::Remote;
use crate::media::{self, Desc, MAX_MANIFEST_BYTES};
use crate::reference::{normalize, ImageRef};
use crate::store::Store;
use crate::{ImageError, ImageInfo, Platform, PullOptions};

/// Blobs are streamed to containerd in chunks of this size.
const WRITE_CHUNK: usize = 1 << 20;

pub(crate) fn parse_ref(reference: &str) -> Result<ImageRef, ImageError> {
    normalize(reference).map_err(|source| ImageError::InvalidReference {
        reference: reference.to_owned(),
        source,
    })
}

pub async fn pull(
    channel: Channel,
    namespace: &str,
    reference: &str,
    opts: &PullOptions,
) -> Result<ImageInfo, ImageError> {
    let r = parse_ref(reference)?;
    let remote = Remote::new(&r, opts)?;
    let store = Store::new(channel, namespace).with_new_lease().await?;
    let result = pull_leased(&store, &remote, &r, opts).await;
    if let Err(e) = store.release_lease().await {
        tracing::warn!(error = %e, "releasing pull lease (it expires on its own)");
    }
    result
}

async fn pull_leased(
    store: &Store,
    remote: &Remote,
    r: &ImageRef,
    opts: &PullOptions,
) -> Result<ImageInfo, ImageError> {
    let name = r.to_string();
    let (target, target_body) = remote.resolve().await?;
    tracing::debug!(image = %name, target = %target.digest, media_type = %target.media_type, "resolved");
    let mut small: HashMap<String, (Desc, Vec<u8>)> = HashMap::new();
    let manifest_desc = if media::is_index(&target.media_type) {
        let index =
            media::parse_index(&target_body).map_err(|detail| bad(&name, &target, detail))?;
        let child = media::select_manifest(&index, &opts.platform).ok_or_else(|| {
            ImageError::NoMatchingPlatform {
                reference: name.clone(),
                platform: opts.platform.to_string(),
                digest: target.digest.clone(),
            }
        })?;
        small.insert(target.digest.clone(), (target.clone(), target_body));
        let body = remote.fetch_manifest(&child).await?;
        let child = Desc {
            media_type: media::manifest_media_type(Some(&child.media_type), &body),
            ..child
        };
        small.insert(child.digest.clone(), (child.clone(), body));
        child
    } else if media::is_manifest(&target.media_type) {
        small.insert(target.digest.clone(), (target.clone(), target_body));
        target.clone()
    } else {
        return Err(bad(
            &name,
            &target,
            format!("unsupported media type {}", target.media_type),
        ));
    };
    let manifest_body = small
        .get(&manifest_desc.digest)
        .map(|(_, b)| b.clone())
        .unwrap_or_default();
    let manifest =
        media::parse_manifest(&manifest_body).map_err(|d| bad(&name, &manifest_desc, d))?;
    let config_desc = Desc::from_oci(manifest.config());
    let config_body = remote.fetch_small_blob(&config_desc).await?;
    let config = media::parse_config(&config_body).map_err(|d| bad(&name, &config_desc, d))?;
    check_layers(&name, &manifest_desc, &manifest, &config)?;

    // Layers first (big, verified while streaming), then the small blobs that point at them.
    for layer in manifest.layers() {
        let layer = Desc::from_oci(layer);
        if store.content_info(&layer.digest).await?.is_none() {
            fetch_layer(store, remote, &layer).await?;
        }
    }
    store.write_blob(&config_desc, &config_body).await?;
    for (desc, body) in small.values() {
        store.write_blob(desc, body).await?;
    }
    let index = if target.digest != manifest_desc.digest {
        Some(&target)
    } else {
        None
    };
    register(
        store,
        &name,
        r,
        &target,
        index,
        (&manifest_desc, &manifest),
        (&config_desc, &config),
        opts,
    )
    .await
}

fn bad(reference: &str, desc: &Desc, detail: String) -> ImageError {
    ImageError::BadManifest {
        reference: reference.to_owned(),
        digest: desc.digest.clone(),
        detail,
    }
}

fn check_layers(
    name: &str,
    manifest_desc: &Desc,
    manifest: &ImageManifest,
    config: &ImageConfiguration,
) -> Result<(), ImageError> {
    let diff_ids = config.rootfs().diff_ids();
    if diff_ids.len() != manifest.layers().len() {
        return Err(bad(
            name,
            manifest_desc,
            format!(
                "{} layers but {} diff_ids in the config",
                manifest.layers().len(),
                diff_ids.len()
            ),
        ));
    }
    for layer in manifest.layers() {
        let media_type = layer.media_type().to_string();
        if !media::is_supported_layer(&media_type) {
            return Err(bad(
                name,
                manifest_desc,
                format!("unsupported layer media type {media_type}"),
            ));
        }
    }
    Ok(())
}

/// Streams one layer into the content store, checking size and digest on the way;
/// a mismatch aborts the ingest so nothing of it stays.
async fn fetch_layer(store: &Store, remote: &Remote, layer: &Desc) -> Result<(), ImageError> {
    let (mut resp, origin) = remote.blob_response(layer).await?;
    let mut writer = store.writer(&layer.digest).await?;
    let mut hasher = Sha256::new();
    let mut size: i64 = 0;
    let mut buf = Vec::with_capacity(WRITE_CHUNK);
    loop {
        let chunk = match resp.chunk().await {
            Ok(Some(c)) => c,
            Ok(None) => break,
            Err(e) => {
                writer.abort().await;
                return Err(ImageError::Unreachable {
                    reference: remote.display().to_owned(),
                    host: origin,
                    detail: format!("reading blob {}: {e}", layer.digest),
                });
            }
        };
        hasher.update(&chunk);
        size += i64::try_from(chunk.len()).unwrap_or(i64::MAX);
        if size > layer.size {
            break;
        }
        buf.extend_from_slice(&chunk);
        if buf.len() >= WRITE_CHUNK {
            if let Err(e) = writer.write(std::mem::take(&mut buf)).await {
                writer.abort().await;
                return Err(e);
            }
        }
    }
    let actual = format!("sha256:{}", hex::encode(hasher.finalize()));
    if actual != layer.digest || size != layer.size {
        writer.abort().await;
        return Err(ImageError::DigestMismatch {
            reference: remote.display().to_owned(),
            expected: format!("{} ({} bytes)", layer.digest, layer.size),
            actual: if size > layer.size {
                format!("more than {} bytes", layer.size)
            } else {
                format!("{actual} ({size} bytes)")
            },
        });
    }
    if let Err(e) = writer.write(buf).await {
        writer.abort().await;
        return Err(e);
    }
    writer.commit(layer.size, &layer.digest).await
}

/// Unpacks the layers, labels the content for containerd's GC and registers the image.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn register(
    store: &Store,
    name: &str,
    r: &ImageRef,
    target: &Desc,
    index: Option<&Desc>,
    (manifest_desc, manifest): (&Desc, &ImageManifest),
    (config_desc, config): (&Desc, &ImageConfiguration),
    opts: &PullOptions,
) -> Result<ImageInfo, ImageError> {
    let layers: Vec<Desc> = manifest.layers().iter().map(Desc::from_oci).collect();
    let diff_ids: Vec<String> = config
        .rootfs()
        .diff_ids()
        .iter()
        .map(ToString::to_string)
        .collect();
    let chain = media::chain_ids(&diff_ids);
    for (i, layer) in layers.iter().enumerate() {
        let parent = if i == 0 { "" } else { chain[i - 1].as_str() };
        unpack_layer(
            store,
            name,
            &opts.snapshotter,
            layer,
            &diff_ids[i],
            &chain[i],
            parent,
        )
        .await?;
    }
    let top = chain.last().cloned().unwrap_or_default();

    // The labels containerd's own pull sets, so GC keeps children and snapshots.
    if let Some(index) = index {
        store
            .update_labels(
                &index.digest,
                HashMap::from([(
                    "containerd.io/gc.ref.content.m.0".to_owned(),
                    manifest_desc.digest.clone(),
                )]),
            )
            .await?;
    }
    let mut manifest_labels = HashMap::from([(
        "containerd.io/gc.ref.content.config".to_owned(),
        config_desc.digest.clone(),
    )]);
    for (i, layer) in layers.iter().enumerate() {
        manifest_labels.insert(
            format!("containerd.io/gc.ref.content.l.{i}"),
            layer.digest.clone(),
        );
    }
    store
        .update_labels(&manifest_desc.digest, manifest_labels)
        .await?;
    if !top.is_empty() {
        store
            .update_labels(
                &config_desc.digest,
                HashMap::from([(
                    format!("containerd.io/gc.ref.snapshot.{}", opts.snapshotter),
                    top.clone(),
                )]),
            )
            .await?;
    }
    for (layer, diff_id) in layers.iter().zip(&diff_ids) {
        if layer.digest != *diff_id {
            store
                .update_labels(
                    &layer.digest,
                    HashMap::from([("containerd.io/uncompressed".to_owned(), diff_id.clone())]),
                )
                .await?;
        }
    }
    store.image_put(name, target).await?;
    tracing::info!(image = %name, id = %config_desc.digest, "image registered");
    Ok(image_info(
        name,
        r,
        target,
        manifest_desc,
        config_desc,
        config,
        &layers,
        top,
    ))
}

#[allow(clippy::too_many_arguments)]
async fn unpack_layer(
    store: &Store,
    name: &str,
    snapshotter: &str,
    layer: &Desc,
    diff_id: &str,
    chain_id: &str,
    parent: &str,
) -> Result<(), ImageError> {
    if store.snapshot_exists(snapshotter, chain_id).await? {
        return Ok(());
    }
    let unpack_err = |detail: String| ImageError::Unpack {
        reference: name.to_owned(),
        layer: layer.digest.clone(),
        detail,
    };
    let key = format!("extract-{} {chain_id}", uuid::Uuid::new_v4());
    let labels = HashMap::from([("containerd.io/snapshot.ref".to_owned(), chain_id.to_owned())]);
    let mounts = match store
        .prepare(snapshotter, &key, parent, labels.clone())
        .await
    {
        Ok(m) => m,
        Err(s) if s.code() == Code::AlreadyExists => return Ok(()),
        Err(s) => return Err(unpack_err(format!("preparing snapshot: {}", s.message()))),
    };
    let applied = match store.apply(layer, mounts).await {
        Ok(d) => d,
        Err(s) => {
            store.remove_snapshot(snapshotter, &key).await;
            return Err(unpack_err(format!("applying layer: {}", s.message())));
        }
    };
    if applied != diff_id {
        store.remove_snapshot(snapshotter, &key).await;
        return Err(unpack_err(format!(
            "wrong diff id calculated on extraction: got {applied}, the config says {diff_id}"
        )));
    }
    match store.commit(snapshotter, chain_id, &key, labels).await {
        Ok(()) => Ok(()),
        Err(s) if s.code() == Code::AlreadyExists => {
            store.remove_snapshot(snapshotter, &key).await;
            Ok(())
        }
        Err(s) => {
            store.remove_snapshot(snapshotter, &key).await;
            Err(unpack_err(format!(
                "committing snapshot {chain_id}: {}",
                s.message()
            )))
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn image_info(
    name: &str,
    r: &ImageRef,
    target: &Desc,
    manifest_desc: &Desc,
    config_desc: &Desc,
    config: &ImageConfiguration,
    layers: &[Desc],
    chain_id: String,
) -> ImageInfo {
    let size = manifest_desc.size + config_desc.size + layers.iter().map(|l| l.size).sum::<i64>();
    ImageInfo {
        name: name.to_owned(),
        id: config_desc.digest.clone(),
        repo_digest: r.with_digest(&target.digest),
        manifest_digest: manifest_desc.digest.clone(),
        config: media::runtime_config(config),
        chain_id,
        size: u64::try_from(size).unwrap_or(0),
    }
}

pub async fn get(
    channel: Channel,
    namespace: &str,
    reference: &str,
    opts: &PullOptions,
) -> Result<Option<ImageInfo>, ImageError> {
    let r = parse_ref(reference)?;
    let store = Store::new(channel, namespace);
    let name = r.to_string();
    let Some(image) = store.image_get(&name).await? else {
        return Ok(None);
    };
    info_from_store(
        &store,
        &name,
        &r,
        image.target,
        &opts.platform,
        &opts.snapshotter,
    )
    .await
}

pub async fn list(
    channel: Channel,
    namespace: &str,
    opts: &PullOptions,
) -> Result<Vec<ImageInfo>, ImageError> {
    let store = Store::new(channel, namespace);
    let mut out = Vec::new();
    for image in store.image_list().await? {
        let Ok(r) = normalize(&image.name) else {
            tracing::debug!(image = %image.name, "skipping image whose name is not a reference");
            continue;
        };
        match info_from_store(
            &store,
            &image.name,
            &r,
            image.target,
            &opts.platform,
            &opts.snapshotter,
        )
        .await
        {
            Ok(Some(info)) => out.push(info),
            Ok(None) => {}
            Err(e) => tracing::warn!(image = %image.name, error = %e, "skipping unreadable image"),
        }
    }
    Ok(out)
}

pub async fn remove(
    channel: Channel,
    namespace: &str,
    reference: &str,
) -> Result<bool, ImageError> {
    let r = parse_ref(reference)?;
    Store::new(channel, namespace)
        .image_delete(&r.to_string())
        .await
}

/// Reads an image back from the content store; `None` if content or snapshots are missing.
async fn info_from_store(
    store: &Store,
    name: &str,
    r: &ImageRef,
    target: Option<containerd_client::types::Descriptor>,
    platform: &Platform,
    snapshotter: &str,
) -> Result<Option<ImageInfo>, ImageError> {
    let Some(target) = target else {
        return Ok(None);
    };
    let target = Desc {
        media_type: target.media_type,
        digest: target.digest,
        size: target.size,
    };
    let Some(body) = store.read_blob(&target.digest, MAX_MANIFEST_BYTES).await? else {
        return Ok(None);
    };
    let (manifest_desc, manifest_body) = if media::is_index(&target.media_type) {
        let index = media::parse_index(&body).map_err(|d| bad(name, &target, d))?;
        let Some(child) = media::select_manifest(&index, platform) else {
            return Ok(None);
        };
        let Some(child_body) = store.read_blob(&child.digest, MAX_MANIFEST_BYTES).await? else {
            return Ok(None);
        };
        (child, child_body)
    } else {
        (target.clone(), body)
    };
    let manifest =
        media::parse_manifest(&manifest_body).map_err(|d| bad(name, &manifest_desc, d))?;
    let config_desc = Desc::from_oci(manifest.config());
    let Some(config_body) = store
        .read_blob(&config_desc.digest, MAX_MANIFEST_BYTES)
        .await?
    else {
        return Ok(None);
    };
    let config = media::parse_config(&config_body).map_err(|d| bad(name, &config_desc, d))?;
    let diff_ids: Vec<String> = config
        .rootfs()
        .diff_ids()
        .iter()
        .map(ToString::to_string)
        .collect();
    let chain = media::chain_ids(&diff_ids);
    let top = chain.last().cloned().unwrap_or_default();
    if top.is_empty() || !store.snapshot_exists(snapshotter, &top).await? {
        return Ok(None);
    }
    let layers: Vec<Desc> = manifest.layers().iter().map(Desc::from_oci).collect();
    Ok(Some(image_info(
        name,
        r,
        &target,
        &manifest_desc,
        &config_desc,
        &config,
        &layers,
        top,
    )))
}
