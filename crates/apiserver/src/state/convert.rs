//! Writes to resources kept in another's shape (autoscaling/v1 HPAs stored as v2,
//! events.k8s.io Events stored as core Events): bodies are decoded in the shape they were
//! sent in (so unknown fields and wrong types are reported in that shape's terms), then
//! converted, and everything after — defaulting, validation, storage — sees the stored
//! shape. Reads convert back in [`crate::render`].

use cairn_api::conversion::convert;
use serde_json::Value;

use super::*;

impl ApiState {
    /// `(storage resource, body in the stored shape)` for a body sent to `served`.
    pub(crate) fn to_storage_shape(
        &self,
        served: &'static ResourceInfo,
        body: Value,
        opts: &WriteOptions,
    ) -> Result<(&'static ResourceInfo, Value), Status> {
        let stored = self.storage_of(served);
        if std::ptr::eq(stored, served) {
            return Ok((served, body));
        }
        let mut body = body;
        Self::check_type(served, &mut body, served.kind)?;
        let (body, _warnings) = Self::normalize(served, body, opts)?;
        if let Some(webhook) = self.conversion_webhook(served) {
            return Ok((stored, webhook.convert_one(body, stored)?));
        }
        let converted = convert(&body, stored).map_err(|e| Status::bad_request(e.to_string()))?;
        Ok((stored, converted))
    }

    /// A read-modify-write's `mutate`, run on the object in `served`'s shape and its
    /// result returned in the stored shape.
    pub(crate) fn mutate_in_served_shape<F>(
        &self,
        served: &'static ResourceInfo,
        current: &Value,
        opts: &WriteOptions,
        mutate: &mut F,
    ) -> Result<Value, Status>
    where
        F: FnMut(&Value) -> Result<Value, Status>,
    {
        if std::ptr::eq(self.storage_of(served), served) {
            return mutate(current);
        }
        let view = match self.conversion_webhook(served) {
            Some(webhook) => webhook.convert_one(current.clone(), served)?,
            None => convert(current, served).map_err(|e| Status::internal(e.to_string()))?,
        };
        let desired = mutate(&view)?;
        self.to_storage_shape(served, desired, opts).map(|(_, v)| v)
    }
}
