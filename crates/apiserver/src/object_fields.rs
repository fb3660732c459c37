//! The internal selector fields the watch cache keeps beside each object, and which
//! resource a storage key belongs to: shared by the tree and raw decorators.

use std::sync::OnceLock;

use cairn_api::registry::{ResourceInfo, RESOURCES};

/// Internal field holding the comma-separated owner UIDs, for garbage collection.
/// Not a valid field selector, so clients cannot match on it.
pub const OWNER_UIDS_FIELD: &str = "cairn.internal/ownerUIDs";
/// Internal field holding the object's UID.
pub const UID_FIELD: &str = "metadata.uid";

/// The resource whose storage keys start like `key`. Every write is decorated, so the
/// prefixes are built once, not per call.
pub fn resource_for_key(key: &str) -> Option<&'static ResourceInfo> {
    static PREFIXES: OnceLock<Vec<(String, &'static ResourceInfo)>> = OnceLock::new();
    PREFIXES
        .get_or_init(|| RESOURCES.iter().map(|r| (r.key_prefix(), r)).collect())
        .iter()
        .find(|(prefix, _)| key.starts_with(prefix.as_str()))
        .map(|(_, r)| *r)
}
