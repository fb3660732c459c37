//! The store's keys and revisions in etcd: keys under the prefix, revisions moved by the
//! offset a migration set, and back.

use cairn_store::{KeyValue, Revision};

/// Where the revision offset (decimal) is, after the prefix: outside the prefix's `/`
/// range, so no list or watch of the store ever sees it. Written once, by a migration.
pub const REVISION_OFFSET_SUFFIX: &str = ".cairn-revision-offset";

pub(crate) struct Keys {
    /// Without a trailing `/`: store keys start with one.
    prefix: String,
    /// What the store's revisions are ahead of etcd's. A store migrated from SQLite at
    /// revision R starts here at R, so no client ever sees a resourceVersion go back.
    offset: Revision,
}

impl Keys {
    pub(crate) fn new(prefix: &str) -> Keys {
        Keys {
            prefix: prefix.trim_end_matches('/').to_string(),
            offset: 0,
        }
    }

    /// The etcd key of the revision offset.
    pub(crate) fn offset_key(&self) -> String {
        format!("{}{REVISION_OFFSET_SUFFIX}", self.prefix)
    }

    pub(crate) fn with_offset(self, offset: Revision) -> Keys {
        Keys { offset, ..self }
    }

    /// The store's revision of an etcd revision.
    pub(crate) fn store_rev(&self, etcd: i64) -> Revision {
        etcd + self.offset
    }

    /// etcd's revision of a store revision (below 1 for revisions from before a migration).
    pub(crate) fn etcd_rev(&self, store: Revision) -> i64 {
        store - self.offset
    }

    /// The store's revision an etcd response was answered at.
    pub(crate) fn revision_of(&self, header: Option<&etcd_client::ResponseHeader>) -> Revision {
        self.store_rev(header.map(|h| h.revision()).unwrap_or(0))
    }

    pub(crate) fn to_etcd(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// The etcd prefix of a store prefix. The empty store prefix is the prefix and its
    /// `/`, so that `/registry` never reaches `/registry2`'s keys.
    pub(crate) fn prefix_to_etcd(&self, prefix: &str) -> String {
        if prefix.is_empty() {
            format!("{}/", self.prefix)
        } else {
            self.to_etcd(prefix)
        }
    }

    /// A store key from an etcd key (bytes that are not UTF-8 are replaced: cairn writes
    /// none).
    pub(crate) fn store_key(&self, key: &[u8]) -> String {
        let key = String::from_utf8_lossy(key);
        key.strip_prefix(&self.prefix).unwrap_or(&key).to_string()
    }

    pub(crate) fn key_value(&self, kv: &etcd_client::KeyValue) -> KeyValue {
        KeyValue {
            key: self.store_key(kv.key()),
            value: bytes::Bytes::copy_from_slice(kv.value()),
            create_revision: self.store_rev(kv.create_revision()),
            mod_revision: self.store_rev(kv.mod_revision()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Keys;

    #[test]
    fn keys_live_under_the_prefix_and_come_back() {
        for prefix in ["/cluster-a", "/cluster-a/"] {
            let keys = Keys::new(prefix);
            assert_eq!(keys.to_etcd("/pods/a/b"), "/cluster-a/pods/a/b");
            assert_eq!(keys.prefix_to_etcd(""), "/cluster-a/");
            assert_eq!(keys.prefix_to_etcd("/pods/"), "/cluster-a/pods/");
            assert_eq!(keys.store_key(b"/cluster-a/pods/a/b"), "/pods/a/b");
            let offset = keys.offset_key();
            assert!(!offset.starts_with(&keys.prefix_to_etcd("")), "{offset}");
        }
        let bare = Keys::new("");
        assert_eq!(
            bare.to_etcd("/registry/core/pods/a/b"),
            "/registry/core/pods/a/b"
        );
        assert_eq!(bare.prefix_to_etcd(""), "/");
        assert_eq!(
            bare.store_key(b"/registry/core/pods/a/b"),
            "/registry/core/pods/a/b"
        );
    }

    #[test]
    fn revisions_move_by_the_offset_both_ways() {
        let keys = Keys::new("").with_offset(1000);
        assert_eq!(keys.store_rev(2), 1002);
        assert_eq!(keys.etcd_rev(1002), 2);
        assert!(keys.etcd_rev(999) < 1);
        assert_eq!(Keys::new("").store_rev(7), 7);
    }
}
