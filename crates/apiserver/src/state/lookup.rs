//! The reads of the token authenticators: ServiceAccounts, the objects bound tokens name,
//! and bootstrap-token Secrets, from the watch cache.

use serde_json::Value;

use super::ApiState;

/// Token checks read ServiceAccounts and the objects tokens are bound to from the cache.
impl crate::authn::ObjectLookup for ApiState {
    fn live(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<crate::authn::serviceaccount::LiveObject> {
        let r = cairn_api::registry::find("", "v1", resource)?;
        let (v, _) = self.get_value(r, namespace, name).ok()?;
        let deletion = v
            .pointer("/metadata/deletionTimestamp")
            .and_then(Value::as_str)
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.timestamp());
        Some(crate::authn::serviceaccount::LiveObject {
            uid: v.pointer("/metadata/uid")?.as_str()?.to_string(),
            deletion,
        })
    }

    fn secret(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<crate::authn::serviceaccount::SecretView> {
        use base64::Engine;
        let r = cairn_api::registry::find("", "v1", "secrets")?;
        let (v, _) = self.get_value(r, Some(namespace), name).ok()?;
        let data = v
            .get("data")
            .and_then(Value::as_object)
            .map(|d| {
                d.iter()
                    .filter_map(|(k, b)| {
                        let bytes = base64::engine::general_purpose::STANDARD
                            .decode(b.as_str()?)
                            .ok()?;
                        Some((k.clone(), bytes))
                    })
                    .collect()
            })
            .unwrap_or_default();
        Some(crate::authn::serviceaccount::SecretView {
            type_: v
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            data,
            deleting: v.pointer("/metadata/deletionTimestamp").is_some(),
        })
    }
}
