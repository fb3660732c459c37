//! The store's keys in etcd: under the prefix, and back.

use cairn_store::KeyValue;

pub(crate) struct Keys {
    /// Without a trailing `/`: store keys start with one.
    prefix: String,
}

impl Keys {
    pub(crate) fn new(prefix: &str) -> Keys {
        Keys {
            prefix: prefix.trim_end_matches('/').to_string(),
        }
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
            create_revision: kv.create_revision(),
            mod_revision: kv.mod_revision(),
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
}
