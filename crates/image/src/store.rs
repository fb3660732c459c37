//! Thin wrappers over containerd's content, snapshots, diff, images and leases services,
//! carrying the namespace and (while pulling) the lease as gRPC metadata.

use std::collections::HashMap;

use containerd_client::services::v1::snapshots::snapshots_client::SnapshotsClient;
use containerd_client::services::v1::snapshots::{
    CommitSnapshotRequest, PrepareSnapshotRequest, RemoveSnapshotRequest, StatSnapshotRequest,
};
use containerd_client::services::v1::{
    content_client::ContentClient, diff_client::DiffClient, images_client::ImagesClient,
    leases_client::LeasesClient, AbortRequest, ApplyRequest, CreateImageRequest, CreateRequest,
    DeleteImageRequest, DeleteRequest, GetImageRequest, Image, Info, InfoRequest,
    ListImagesRequest, ReadContentRequest, UpdateImageRequest, UpdateRequest, WriteAction,
    WriteContentRequest, WriteContentResponse,
};
use containerd_client::types::Mount;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;
use tonic::{Code, Request, Streaming};

use crate::media::Desc;
use crate::ImageError;

/// Leases expire on their own after this long, so a crashed pull leaks nothing for good.
const LEASE_EXPIRY: chrono::Duration = chrono::Duration::hours(1);

#[derive(Clone)]
pub struct Store {
    channel: Channel,
    namespace: String,
    lease: Option<String>,
}

impl Store {
    pub fn new(channel: Channel, namespace: &str) -> Self {
        Self {
            channel,
            namespace: namespace.to_owned(),
            lease: None,
        }
    }

    fn request<T>(&self, msg: T) -> Result<Request<T>, ImageError> {
        let mut req = Request::new(msg);
        let ns = MetadataValue::try_from(self.namespace.as_str()).map_err(|_| {
            ImageError::containerd(
                "namespace",
                &self.namespace,
                tonic::Status::invalid_argument("namespace is not a valid metadata value"),
            )
        })?;
        req.metadata_mut().insert("containerd-namespace", ns);
        if let Some(lease) = &self.lease {
            if let Ok(v) = MetadataValue::try_from(lease.as_str()) {
                req.metadata_mut().insert("containerd-lease", v);
            }
        }
        Ok(req)
    }

    /// Creates a lease (expiring after [`LEASE_EXPIRY`]) and returns a store that uses it.
    pub async fn with_new_lease(&self) -> Result<Store, ImageError> {
        let id = format!("cairn-image-{}", uuid::Uuid::new_v4());
        let expire =
            (chrono::Utc::now() + LEASE_EXPIRY).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let labels = HashMap::from([("containerd.io/gc.expire".to_owned(), expire)]);
        LeasesClient::new(self.channel.clone())
            .create(self.request(CreateRequest {
                id: id.clone(),
                labels,
            })?)
            .await
            .map_err(|s| ImageError::containerd("Leases.Create", &id, s))?;
        Ok(Store {
            lease: Some(id),
            ..self.clone()
        })
    }

    /// Deletes this store's lease; what it protected is now kept only by references.
    pub async fn release_lease(&self) -> Result<(), ImageError> {
        let Some(id) = &self.lease else {
            return Ok(());
        };
        let plain = Store {
            lease: None,
            ..self.clone()
        };
        LeasesClient::new(self.channel.clone())
            .delete(plain.request(DeleteRequest {
                id: id.clone(),
                sync: false,
            })?)
            .await
            .map_err(|s| ImageError::containerd("Leases.Delete", id, s))?;
        Ok(())
    }

    pub async fn content_info(&self, digest: &str) -> Result<Option<Info>, ImageError> {
        match ContentClient::new(self.channel.clone())
            .info(self.request(InfoRequest {
                digest: digest.to_owned(),
            })?)
            .await
        {
            Ok(r) => Ok(r.into_inner().info),
            Err(s) if s.code() == Code::NotFound => Ok(None),
            Err(s) => Err(ImageError::containerd("Content.Info", digest, s)),
        }
    }

    /// Reads a whole (small) blob; `None` if it is not in the store.
    pub async fn read_blob(
        &self,
        digest: &str,
        limit: usize,
    ) -> Result<Option<Vec<u8>>, ImageError> {
        let mut stream = match ContentClient::new(self.channel.clone())
            .read(self.request(ReadContentRequest {
                digest: digest.to_owned(),
                offset: 0,
                size: 0,
            })?)
            .await
        {
            Ok(r) => r.into_inner(),
            Err(s) if s.code() == Code::NotFound => return Ok(None),
            Err(s) => return Err(ImageError::containerd("Content.Read", digest, s)),
        };
        let mut out = Vec::new();
        loop {
            match stream.message().await {
                Ok(Some(chunk)) => {
                    out.extend_from_slice(&chunk.data);
                    if out.len() > limit {
                        return Err(ImageError::containerd(
                            "Content.Read",
                            digest,
                            tonic::Status::out_of_range(format!("blob larger than {limit} bytes")),
                        ));
                    }
                }
                Ok(None) => return Ok(Some(out)),
                Err(s) if s.code() == Code::NotFound => return Ok(None),
                Err(s) => return Err(ImageError::containerd("Content.Read", digest, s)),
            }
        }
    }

    /// Writes a small blob in one go (no-op if present). The digest is checked by containerd.
    pub async fn write_blob(&self, desc: &Desc, data: &[u8]) -> Result<(), ImageError> {
        if self.content_info(&desc.digest).await?.is_some() {
            return Ok(());
        }
        let mut w = self.writer(&desc.digest).await?;
        w.write(data.to_vec()).await?;
        w.commit(desc.size, &desc.digest).await
    }

    /// Starts a streaming content write (a fresh ingest ref per call, so concurrent
    /// writers of the same blob never lock each other out).
    pub async fn writer(&self, digest: &str) -> Result<ContentWriter, ImageError> {
        let r#ref = format!(
            "cairn-{}-{}",
            digest.replace(':', "-"),
            uuid::Uuid::new_v4()
        );
        let (tx, rx) = mpsc::channel(2);
        let stat = WriteContentRequest {
            action: WriteAction::Stat as i32,
            r#ref: r#ref.clone(),
            ..Default::default()
        };
        tx.send(stat).await.map_err(|_| closed(digest))?;
        let mut responses = ContentClient::new(self.channel.clone())
            .write(self.request(ReceiverStream::new(rx))?)
            .await
            .map_err(|s| ImageError::containerd("Content.Write", digest, s))?
            .into_inner();
        next_response(&mut responses, digest).await?;
        Ok(ContentWriter {
            store: self.clone(),
            tx,
            responses,
            r#ref,
            digest: digest.to_owned(),
            offset: 0,
        })
    }

    pub async fn update_labels(
        &self,
        digest: &str,
        labels: HashMap<String, String>,
    ) -> Result<(), ImageError> {
        if labels.is_empty() {
            return Ok(());
        }
        let paths = labels.keys().map(|k| format!("labels.{k}")).collect();
        ContentClient::new(self.channel.clone())
            .update(self.request(UpdateRequest {
                info: Some(Info {
                    digest: digest.to_owned(),
                    labels,
                    ..Default::default()
                }),
                update_mask: Some(prost_types::FieldMask { paths }),
            })?)
            .await
            .map_err(|s| ImageError::containerd("Content.Update", digest, s))?;
        Ok(())
    }

    pub async fn snapshot_exists(&self, snapshotter: &str, key: &str) -> Result<bool, ImageError> {
        match SnapshotsClient::new(self.channel.clone())
            .stat(self.request(StatSnapshotRequest {
                snapshotter: snapshotter.to_owned(),
                key: key.to_owned(),
            })?)
            .await
        {
            Ok(_) => Ok(true),
            Err(s) if s.code() == Code::NotFound => Ok(false),
            Err(s) => Err(ImageError::containerd("Snapshots.Stat", key, s)),
        }
    }

    pub async fn prepare(
        &self,
        snapshotter: &str,
        key: &str,
        parent: &str,
        labels: HashMap<String, String>,
    ) -> Result<Vec<Mount>, tonic::Status> {
        let req = self
            .request(PrepareSnapshotRequest {
                snapshotter: snapshotter.to_owned(),
                key: key.to_owned(),
                parent: parent.to_owned(),
                labels,
            })
            .map_err(|e| tonic::Status::invalid_argument(e.to_string()))?;
        Ok(SnapshotsClient::new(self.channel.clone())
            .prepare(req)
            .await?
            .into_inner()
            .mounts)
    }

    pub async fn commit(
        &self,
        snapshotter: &str,
        name: &str,
        key: &str,
        labels: HashMap<String, String>,
    ) -> Result<(), tonic::Status> {
        let req = self
            .request(CommitSnapshotRequest {
                snapshotter: snapshotter.to_owned(),
                name: name.to_owned(),
                key: key.to_owned(),
                labels,
            })
            .map_err(|e| tonic::Status::invalid_argument(e.to_string()))?;
        SnapshotsClient::new(self.channel.clone())
            .commit(req)
            .await?;
        Ok(())
    }

    /// Removes a snapshot, ignoring "not found".
    pub async fn remove_snapshot(&self, snapshotter: &str, key: &str) {
        let Ok(req) = self.request(RemoveSnapshotRequest {
            snapshotter: snapshotter.to_owned(),
            key: key.to_owned(),
        }) else {
            return;
        };
        if let Err(s) = SnapshotsClient::new(self.channel.clone()).remove(req).await {
            if s.code() != Code::NotFound {
                tracing::warn!(key, error = %s, "removing snapshot");
            }
        }
    }

    /// Applies a layer onto mounts; returns the digest of the uncompressed tar.
    pub async fn apply(&self, layer: &Desc, mounts: Vec<Mount>) -> Result<String, tonic::Status> {
        let req = self
            .request(ApplyRequest {
                diff: Some(layer.to_proto()),
                mounts,
                payloads: HashMap::new(),
                sync_fs: false,
            })
            .map_err(|e| tonic::Status::invalid_argument(e.to_string()))?;
        let applied = DiffClient::new(self.channel.clone())
            .apply(req)
            .await?
            .into_inner()
            .applied;
        Ok(applied.map(|d| d.digest).unwrap_or_default())
    }

    pub async fn image_get(&self, name: &str) -> Result<Option<Image>, ImageError> {
        match ImagesClient::new(self.channel.clone())
            .get(self.request(GetImageRequest {
                name: name.to_owned(),
            })?)
            .await
        {
            Ok(r) => Ok(r.into_inner().image),
            Err(s) if s.code() == Code::NotFound => Ok(None),
            Err(s) => Err(ImageError::containerd("Images.Get", name, s)),
        }
    }

    /// Creates the image record or points an existing one at `target`.
    pub async fn image_put(&self, name: &str, target: &Desc) -> Result<(), ImageError> {
        let now = prost_types::Timestamp::from(std::time::SystemTime::now());
        let image = Image {
            name: name.to_owned(),
            labels: HashMap::new(),
            target: Some(target.to_proto()),
            created_at: Some(now),
            updated_at: Some(now),
        };
        let mut client = ImagesClient::new(self.channel.clone());
        match client
            .create(self.request(CreateImageRequest {
                image: Some(image.clone()),
                source_date_epoch: None,
            })?)
            .await
        {
            Ok(_) => Ok(()),
            Err(s) if s.code() == Code::AlreadyExists => {
                client
                    .update(self.request(UpdateImageRequest {
                        image: Some(image),
                        update_mask: Some(prost_types::FieldMask {
                            paths: vec!["target".to_owned()],
                        }),
                        source_date_epoch: None,
                    })?)
                    .await
                    .map_err(|s| ImageError::containerd("Images.Update", name, s))?;
                Ok(())
            }
            Err(s) => Err(ImageError::containerd("Images.Create", name, s)),
        }
    }

    pub async fn image_list(&self) -> Result<Vec<Image>, ImageError> {
        Ok(ImagesClient::new(self.channel.clone())
            .list(self.request(ListImagesRequest { filters: vec![] })?)
            .await
            .map_err(|s| ImageError::containerd("Images.List", &self.namespace, s))?
            .into_inner()
            .images)
    }

    pub async fn image_delete(&self, name: &str) -> Result<bool, ImageError> {
        match ImagesClient::new(self.channel.clone())
            .delete(self.request(DeleteImageRequest {
                name: name.to_owned(),
                sync: false,
                target: None,
            })?)
            .await
        {
            Ok(_) => Ok(true),
            Err(s) if s.code() == Code::NotFound => Ok(false),
            Err(s) => Err(ImageError::containerd("Images.Delete", name, s)),
        }
    }
}

fn closed(digest: &str) -> ImageError {
    ImageError::containerd(
        "Content.Write",
        digest,
        tonic::Status::unavailable("write stream closed"),
    )
}

async fn next_response(
    responses: &mut Streaming<WriteContentResponse>,
    digest: &str,
) -> Result<WriteContentResponse, ImageError> {
    match responses.message().await {
        Ok(Some(r)) => Ok(r),
        Ok(None) => Err(closed(digest)),
        Err(s) => Err(ImageError::containerd("Content.Write", digest, s)),
    }
}

/// One in-progress ingest. Call [`ContentWriter::commit`] or [`ContentWriter::abort`].
pub struct ContentWriter {
    store: Store,
    tx: mpsc::Sender<WriteContentRequest>,
    responses: Streaming<WriteContentResponse>,
    r#ref: String,
    digest: String,
    offset: i64,
}

impl ContentWriter {
    pub async fn write(&mut self, data: Vec<u8>) -> Result<(), ImageError> {
        if data.is_empty() {
            return Ok(());
        }
        let len = i64::try_from(data.len()).unwrap_or(i64::MAX);
        let req = WriteContentRequest {
            action: WriteAction::Write as i32,
            r#ref: self.r#ref.clone(),
            offset: self.offset,
            data,
            ..Default::default()
        };
        self.tx.send(req).await.map_err(|_| closed(&self.digest))?;
        next_response(&mut self.responses, &self.digest).await?;
        self.offset += len;
        Ok(())
    }

    /// Commits with containerd verifying `expected` and `total`. An already existing blob
    /// (another writer won) counts as success.
    pub async fn commit(mut self, total: i64, expected: &str) -> Result<(), ImageError> {
        let req = WriteContentRequest {
            action: WriteAction::Commit as i32,
            r#ref: self.r#ref.clone(),
            offset: self.offset,
            total,
            expected: expected.to_owned(),
            ..Default::default()
        };
        self.tx.send(req).await.map_err(|_| closed(&self.digest))?;
        match self.responses.message().await {
            Ok(_) => Ok(()),
            Err(s) if s.code() == Code::AlreadyExists => Ok(()),
            Err(s) => {
                let digest = self.digest.clone();
                self.abort().await;
                Err(ImageError::containerd("Content.Write commit", digest, s))
            }
        }
    }

    /// Drops the ingest (partial data is removed).
    pub async fn abort(self) {
        let ContentWriter {
            store, tx, r#ref, ..
        } = self;
        drop(tx);
        let Ok(req) = store.request(AbortRequest {
            r#ref: r#ref.clone(),
        }) else {
            return;
        };
        if let Err(s) = ContentClient::new(store.channel.clone()).abort(req).await {
            if s.code() != Code::NotFound {
                tracing::debug!(r#ref, error = %s, "aborting ingest");
            }
        }
    }
}
