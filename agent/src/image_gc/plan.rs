//! The image garbage collector's decision (upstream's `realImageGCManager`), no IO: when
//! the image filesystem is at or above the high threshold, free down to the low one by
//! removing unused images, least recently used first, none younger than the minimum age.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The collector's settings (the kubelet's flags).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GcSettings {
    /// `--image-gc-high-threshold` (percent of the filesystem used; 100 turns GC off).
    pub high_percent: u8,
    /// `--image-gc-low-threshold`.
    pub low_percent: u8,
    /// `--minimum-image-ttl-duration`: an image seen more recently than this stays.
    pub minimum_age: Duration,
    /// How often the collector runs (upstream's fixed five minutes).
    pub period: Duration,
}

impl Default for GcSettings {
    fn default() -> Self {
        GcSettings {
            high_percent: 85,
            low_percent: 80,
            minimum_age: Duration::from_secs(120),
            period: Duration::from_secs(300),
        }
    }
}

/// What the collector remembers of an image between passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    pub first: Instant,
    pub last_used: Instant,
}

/// An image as listed now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedImage {
    pub name: String,
    pub size: u64,
    pub in_use: bool,
}

/// Upstream's ordering and bookkeeping: images in use get `last_used = now`; new images
/// are first seen now; images no longer listed are forgotten.
pub fn remember(seen: &mut HashMap<String, Seen>, images: &[ListedImage], now: Instant) {
    seen.retain(|name, _| images.iter().any(|i| &i.name == name));
    for image in images {
        let entry = seen.entry(image.name.clone()).or_insert(Seen {
            first: now,
            last_used: now,
        });
        if image.in_use {
            entry.last_used = now;
        }
    }
}

/// What a pass decided.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct GcPlan {
    /// Images to remove, in order.
    pub remove: Vec<String>,
    /// Bytes to free and bytes the removals free; short when the second is smaller.
    pub wanted: u64,
    pub freed: u64,
}

impl GcPlan {
    pub fn short(&self) -> bool {
        self.freed < self.wanted
    }
}

/// The removals that bring `capacity`/`available` below the low threshold, or nothing
/// when usage is under the high one.
pub fn plan(
    settings: &GcSettings,
    (capacity, available): (u64, u64),
    images: &[ListedImage],
    seen: &HashMap<String, Seen>,
    now: Instant,
) -> GcPlan {
    if capacity == 0 || settings.high_percent >= 100 {
        return GcPlan::default();
    }
    let used_percent = 100 - available.saturating_mul(100) / capacity;
    if used_percent < u64::from(settings.high_percent) {
        return GcPlan::default();
    }
    let target_available = capacity.saturating_mul(100 - u64::from(settings.low_percent)) / 100;
    free(
        settings,
        target_available.saturating_sub(available),
        images,
        seen,
        now,
    )
}

/// Unused images old enough, least recently used first (then first seen), until
/// `wanted` bytes are freed; `u64::MAX` frees every such image (the eviction manager's
/// reclaim).
pub fn free(
    settings: &GcSettings,
    wanted: u64,
    images: &[ListedImage],
    seen: &HashMap<String, Seen>,
    now: Instant,
) -> GcPlan {
    let mut candidates: Vec<(&ListedImage, Seen)> = images
        .iter()
        .filter(|i| !i.in_use)
        .filter_map(|i| Some((i, *seen.get(&i.name)?)))
        .filter(|(_, s)| now.duration_since(s.first) >= settings.minimum_age)
        .collect();
    candidates.sort_by_key(|(i, s)| (s.last_used, s.first, i.name.clone()));
    let mut plan = GcPlan {
        wanted,
        ..GcPlan::default()
    };
    for (image, _) in candidates {
        if plan.freed >= wanted {
            break;
        }
        plan.freed = plan.freed.saturating_add(image.size);
        plan.remove.push(image.name.clone());
    }
    plan
}

#[cfg(test)]
mod tests;
