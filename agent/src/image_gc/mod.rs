//! The kubelet's image garbage collector: every `--image-gc-period-seconds` (upstream's
//! fixed five minutes) list the images and the containers (running or not: an exited
//! container keeps its image in use, as upstream's), and when the image filesystem is
//! at `--image-gc-high-threshold` or above remove unused images, least recently used
//! first and none seen for less than `--minimum-image-ttl-duration`, until it is at the
//! low threshold. A pass that cannot free enough posts upstream's `ImageGCFailed` Warning
//! on the node. The decision is [`plan`]; this is the IO around it. cairn's image
//! filesystem is the agent's root directory's (see `eviction`).

pub mod plan;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use tracing::{debug, info, warn};

use crate::Agent;
pub use plan::{GcPlan, GcSettings, ListedImage, Seen};

/// What the collector remembers between passes.
#[derive(Default)]
pub struct ImageGc {
    seen: Mutex<HashMap<String, Seen>>,
}

impl ImageGc {
    /// Lists images with their use, and updates what was seen; `None` when the runtime
    /// or containerd does not answer.
    async fn observe(&self, agent: &Agent, now: Instant) -> Option<Vec<ListedImage>> {
        let images = match agent.images.list().await {
            Ok(images) => images,
            Err(e) => {
                warn!(error = %e, "image GC: listing images");
                return None;
            }
        };
        let containers = match agent.runtime.list_containers().await {
            Ok(c) => c,
            Err(e) => {
                warn!(error = %e, "image GC: listing containers");
                return None;
            }
        };
        let used: HashSet<&str> = containers
            .iter()
            .flat_map(|c| [c.image_ref.as_str(), c.image_id.as_str()])
            .collect();
        let listed: Vec<ListedImage> = images
            .iter()
            .map(|i| ListedImage {
                name: i.name.clone(),
                size: i.size,
                in_use: used.contains(i.name.as_str()) || used.contains(i.repo_digest.as_str()),
            })
            .collect();
        plan::remember(&mut self.seen.lock(), &listed, now);
        Some(listed)
    }

    /// One pass at the thresholds.
    pub async fn collect(&self, agent: &Agent) {
        let now = Instant::now();
        let Some(images) = self.observe(agent, now).await else {
            return;
        };
        let Some(fs) = crate::sysinfo::filesystem_bytes(&agent.config.root_dir) else {
            return;
        };
        let settings = agent.config.image_gc;
        let plan = plan::plan(&settings, fs, &images, &self.seen.lock(), now);
        self.apply(agent, &plan, &images).await;
        if plan.short() {
            let message = format!(
                "Failed to garbage collect required amount of images. Attempted to free {} bytes, but only found {} bytes eligible to free.",
                plan.wanted, plan.freed
            );
            warn!(%message, "image GC");
            agent
                .events
                .node(crate::events::EventType::Warning, "ImageGCFailed", &message);
        }
    }

    /// Every unused image old enough, whatever the thresholds (the eviction manager's
    /// reclaim before it evicts for disk); the bytes freed.
    pub async fn delete_unused(&self, agent: &Agent) -> u64 {
        let now = Instant::now();
        let Some(images) = self.observe(agent, now).await else {
            return 0;
        };
        let settings = agent.config.image_gc;
        let plan = plan::free(&settings, u64::MAX, &images, &self.seen.lock(), now);
        self.apply(agent, &plan, &images).await
    }

    /// Removes the plan's images; the bytes the removed ones held.
    async fn apply(&self, agent: &Agent, plan: &GcPlan, images: &[ListedImage]) -> u64 {
        let mut freed = 0;
        for name in &plan.remove {
            match agent.images.remove(name).await {
                Ok(_) => {
                    info!(image = %name, "image GC: removed an unused image");
                    self.seen.lock().remove(name);
                    let size = images
                        .iter()
                        .find(|i| &i.name == name)
                        .map_or(0, |i| i.size);
                    freed += size;
                }
                Err(e) => warn!(image = %name, error = %e, "image GC: removing"),
            }
        }
        debug!(freed, "image GC pass");
        freed
    }
}

/// The collector's loop: a pass at start, then every period (upstream's `wait.Until`).
pub async fn run(agent: Arc<Agent>) {
    let period = agent.config.image_gc.period;
    loop {
        agent.image_gc.collect(&agent).await;
        tokio::time::sleep(period).await;
    }
}
