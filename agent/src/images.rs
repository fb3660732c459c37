//! imagePullPolicy, imagePullSecrets and pull back-off over `cairn_image`, with the
//! kubelet's waiting reasons (ErrImagePull, ImagePullBackOff, ErrImageNeverPull,
//! InvalidImageName).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_runtime::{ImageConfig, ImageSpec};
use k8s_openapi::api::core::v1::{Container, Pod, Secret};
use kube::api::Api;
use tonic::transport::Channel;

const BACKOFF_START: Duration = Duration::from_secs(10);
const BACKOFF_MAX: Duration = Duration::from_secs(300);

/// Why an image is not available, as the kubelet words it in the container's waiting state.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageFailure {
    pub reason: &'static str,
    pub message: String,
}

/// (pod UID, image reference).
type BackoffKey = (String, String);
/// (failures in a row, time of the last, its message).
type PullFailures = (u32, Instant, String);

pub struct ImageManager {
    channel: Channel,
    namespace: String,
    hosts_dir: PathBuf,
    snapshotter: String,
    /// image → (consecutive failures, last failure, last message).
    /// Pull failures per (pod UID, image), like the kubelet's back-off key: one pod's
    /// missing credentials must not hold back another pod that has them.
    backoff: parking_lot::Mutex<HashMap<BackoffKey, PullFailures>>,
    /// One pull at a time (the kubelet's `serializeImagePulls`).
    pulling: Arc<tokio::sync::Mutex<()>>,
    /// Pulls in flight, by image and credentials.
    inflight: crate::inflight::Inflight<PullResult>,
}

pub enum Outcome {
    /// Present (`pulled` says whether we fetched it now).
    Ready {
        image: ImageSpec,
        pulled: bool,
        took: Duration,
    },
    Failed(ImageFailure),
}

fn to_spec(info: cairn_image::ImageInfo) -> ImageSpec {
    ImageSpec {
        name: info.name,
        id: info.repo_digest,
        chain_id: info.chain_id,
        config: ImageConfig {
            entrypoint: info.config.entrypoint,
            cmd: info.config.cmd,
            env: info.config.env,
            working_dir: info.config.working_dir,
            user: info.config.user,
        },
    }
}

impl ImageManager {
    /// Every image unpacked here (for the image garbage collector).
    pub async fn list(&self) -> Result<Vec<cairn_image::ImageInfo>, cairn_image::ImageError> {
        cairn_image::list(self.channel.clone(), &self.namespace).await
    }

    /// Removes the image named `name` (its content goes with containerd's GC).
    pub async fn remove(&self, name: &str) -> Result<bool, cairn_image::ImageError> {
        cairn_image::remove(self.channel.clone(), &self.namespace, name).await
    }

    pub fn new(channel: Channel, namespace: &str, hosts_dir: PathBuf) -> Self {
        ImageManager {
            channel,
            namespace: namespace.into(),
            hosts_dir,
            snapshotter: "overlayfs".into(),
            backoff: Default::default(),
            pulling: Default::default(),
            inflight: Default::default(),
        }
    }

    /// Credentials from the pod's imagePullSecrets for `image`.
    async fn credentials(
        &self,
        client: &kube::Client,
        pod: &Pod,
        image: &str,
    ) -> Vec<cairn_image::Credentials> {
        let ns = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let api: Api<Secret> = Api::namespaced(client.clone(), &ns);
        let mut out = Vec::new();
        for r in pod
            .spec
            .as_ref()
            .and_then(|s| s.image_pull_secrets.clone())
            .unwrap_or_default()
        {
            let Ok(Some(secret)) = api.get_opt(&r.name).await else {
                tracing::warn!(secret = %format!("{ns}/{}", r.name), "imagePullSecret not found");
                continue;
            };
            let data = secret.data.unwrap_or_default();
            for key in [".dockerconfigjson", ".dockercfg"] {
                if let Some(bytes) = data.get(key) {
                    if let Some(c) = cairn_image::credentials_from_docker_config(&bytes.0, image) {
                        out.push(c);
                    }
                }
            }
        }
        out
    }

    /// Makes the container's image available according to its pull policy.
    /// `pulling` is told when a pull starts (the kubelet's `Pulling` event).
    pub async fn ensure(
        &self,
        client: &kube::Client,
        pod: &Pod,
        container: &Container,
        pulling: &(dyn Fn() + Send + Sync),
    ) -> Outcome {
        let image = container.image.clone().unwrap_or_default();
        let reference = match cairn_image::normalize(&image) {
            Ok(r) => r.to_string(),
            Err(e) => {
                return Outcome::Failed(ImageFailure {
                    reason: "InvalidImageName",
                    message: format!("Failed to apply default image tag {image:?}: couldn't parse image name {image:?}: {e}"),
                })
            }
        };
        let policy = container.image_pull_policy.clone().unwrap_or_else(|| {
            if reference.ends_with(":latest") || !image.contains(':') {
                "Always".into()
            } else {
                "IfNotPresent".into()
            }
        });
        if policy != "Always" {
            match cairn_image::get(self.channel.clone(), &self.namespace, &reference).await {
                Ok(Some(info)) => {
                    return Outcome::Ready {
                        image: to_spec(info),
                        pulled: false,
                        took: Duration::ZERO,
                    }
                }
                Ok(None) if policy == "Never" => {
                    return Outcome::Failed(ImageFailure {
                        reason: "ErrImageNeverPull",
                        message: format!(
                            "Container image {image:?} is not present with pull policy of Never"
                        ),
                    })
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(image = %reference, error = %e, "looking up image"),
            }
        }
        let backoff_key = (
            pod.metadata.uid.clone().unwrap_or_default(),
            reference.clone(),
        );
        if let Some((failures, at, message)) = self.backoff.lock().get(&backoff_key).cloned() {
            let wait = backoff_delay(failures);
            if at.elapsed() < wait {
                return Outcome::Failed(ImageFailure {
                    reason: "ImagePullBackOff",
                    message: format!("Back-off pulling image {image:?}: {message}"),
                });
            }
        }
        let creds = self.credentials(client, pod, &reference).await;
        pulling();
        let started = Instant::now();
        match self
            .pull_shared(&reference, policy != "Always", creds)
            .await
        {
            Ok((info, pulled)) => {
                self.backoff.lock().remove(&backoff_key);
                Outcome::Ready {
                    image: to_spec(info),
                    pulled,
                    took: started.elapsed(),
                }
            }
            Err(message) => {
                let mut b = self.backoff.lock();
                // Entries of pods long gone (no failure for twice the cap) are dropped.
                b.retain(|_, (_, at, _)| at.elapsed() < 2 * BACKOFF_MAX);
                let entry = b
                    .entry(backoff_key)
                    .or_insert((0, Instant::now(), String::new()));
                entry.0 += 1;
                entry.1 = Instant::now();
                entry.2 = message.clone();
                Outcome::Failed(ImageFailure {
                    reason: "ErrImagePull",
                    message,
                })
            }
        }
    }

    /// Pulls `reference` in a task of its own that every pod needing the same image (with
    /// the same credentials) waits on: a pod that goes away stops waiting, and the pull is
    /// cancelled only when no pod waits for it any more. Pulls run one at a time, as the
    /// kubelet's `serializeImagePulls` default. `Ok((info, pulled))`, or the kubelet's
    /// message.
    async fn pull_shared(
        &self,
        reference: &str,
        if_missing: bool,
        credentials: Vec<cairn_image::Credentials>,
    ) -> PullResult {
        let key = format!("{reference} {}", credentials_digest(&credentials));
        // The job (and its copy of the credentials) is built only by the pod that starts
        // the pull; the others just wait.
        self.inflight
            .join(&key, || {
                pull_one(self.pull_job(reference, if_missing, credentials))
            })
            .await
            .unwrap_or_else(|| Err(format!("pulling image {reference:?}: the pull task failed")))
    }

    fn pull_job(
        &self,
        reference: &str,
        if_missing: bool,
        credentials: Vec<cairn_image::Credentials>,
    ) -> PullJob {
        PullJob {
            channel: self.channel.clone(),
            namespace: self.namespace.clone(),
            reference: reference.to_string(),
            if_missing,
            serialize: self.pulling.clone(),
            opts: cairn_image::PullOptions {
                credentials,
                hosts_dir: Some(self.hosts_dir.clone()),
                snapshotter: self.snapshotter.clone(),
                ..Default::default()
            },
        }
    }
}

/// `Ok((image, pulled now))` or the kubelet's message for the failed pull.
type PullResult = Result<(cairn_image::ImageInfo, bool), String>;

/// Everything one pull needs, owned, for its own task.
struct PullJob {
    channel: Channel,
    namespace: String,
    reference: String,
    if_missing: bool,
    serialize: Arc<tokio::sync::Mutex<()>>,
    opts: cairn_image::PullOptions,
}

async fn pull_one(job: PullJob) -> PullResult {
    let _one_at_a_time = job.serialize.lock().await;
    // Someone else may have pulled it while we waited.
    if job.if_missing {
        if let Ok(Some(info)) =
            cairn_image::get(job.channel.clone(), &job.namespace, &job.reference).await
        {
            return Ok((info, false));
        }
    }
    cairn_image::pull(job.channel, &job.namespace, &job.reference, &job.opts)
        .await
        .map(|info| (info, true))
        .map_err(|e| cairn_image::pull_error_message(&job.reference, &e))
}

/// Pulls with different credentials are different pulls (one pod's secret must not
/// fetch another pod's image); a digest keeps the secrets out of the key.
fn credentials_digest(credentials: &[cairn_image::Credentials]) -> String {
    use sha2::Digest;
    let mut hash = sha2::Sha256::new();
    for c in credentials {
        let (kind, a, b) = match c {
            cairn_image::Credentials::Basic { username, password } => {
                ("basic", username, password.as_str())
            }
            cairn_image::Credentials::IdentityToken(t) => ("identity", t, ""),
            cairn_image::Credentials::RegistryToken(t) => ("registry", t, ""),
        };
        for part in [kind, a.as_str(), b] {
            hash.update(part.len().to_le_bytes());
            hash.update(part.as_bytes());
        }
    }
    hex::encode(&hash.finalize()[..8])
}

/// 10 s doubling to 5 min, like the kubelet's image back-off.
pub fn backoff_delay(failures: u32) -> Duration {
    let exp = failures.saturating_sub(1).min(10);
    (BACKOFF_START * 2u32.pow(exp)).min(BACKOFF_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(backoff_delay(1), Duration::from_secs(10));
        assert_eq!(backoff_delay(2), Duration::from_secs(20));
        assert_eq!(backoff_delay(6), Duration::from_secs(300));
        assert_eq!(backoff_delay(60), Duration::from_secs(300));
    }
}
