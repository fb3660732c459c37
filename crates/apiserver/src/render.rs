//! Turning stored objects into answers: plain objects, lists, Tables, PartialObjectMetadata.

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use cairn_api::registry::ResourceInfo;

use crate::custom::CustomVersion;
use cairn_api::status::Status;
use cairn_store::cache::CachedObject;
use serde_json::{json, Value};

use crate::request::Representation;

pub fn partial_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

fn parse(o: &CachedObject) -> Result<Value, Status> {
    serde_json::from_slice(&o.bytes)
        .map_err(|e| Status::internal(format!("decoding {}: {e}", o.key)))
}

/// How objects of one served resource are rendered: the shape they are stored in, and for
/// a custom resource its printer columns ([`crate::state::ApiState::view`] makes one).
#[derive(Clone)]
pub struct View {
    pub served: &'static ResourceInfo,
    pub storage: &'static ResourceInfo,
    pub custom: Option<Arc<CustomVersion>>,
    /// The CRD's conversion webhook, when its versions convert through one.
    pub conversion: Option<crate::conversion_webhook::ConversionWebhook>,
}

impl View {
    /// Whether stored objects need converting to the served shape.
    /// With a conversion webhook, objects stored at an earlier storage version need it
    /// even when the served version is today's storage version (`convert` skips the
    /// objects already in the served version).
    pub fn converts(&self) -> bool {
        !std::ptr::eq(self.storage, self.served) || self.conversion.is_some()
    }

    /// The Table of stored objects: upstream prints every version of a kind alike.
    fn table(&self, objects: &[Value]) -> Value {
        let now = chrono::Utc::now();
        match &self.custom {
            Some(c) => c.table(objects, now),
            None => cairn_api::table::table(self.storage, objects, now),
        }
    }
}

/// A stored object in the shape `view` serves (autoscaling/v1 HPAs, events.k8s.io Events,
/// other versions of a custom resource). Bodies that are not objects of the stored kind (a
/// `Status`) pass unchanged, and so does an object a built-in conversion cannot convert,
/// which is logged: the read still answers. A conversion webhook that fails is an error.
pub fn served_bytes(view: &View, stored: &Bytes) -> Result<Bytes, Status> {
    if !view.converts() {
        return Ok(stored.clone());
    }
    let Ok(v) = serde_json::from_slice::<Value>(stored) else {
        return Ok(stored.clone());
    };
    if v.get("kind").and_then(Value::as_str) != Some(view.storage.kind) {
        return Ok(stored.clone());
    }
    let r = view.served;
    if let Some(webhook) = &view.conversion {
        if v.get("apiVersion").and_then(Value::as_str) == Some(r.api_version().as_str()) {
            return Ok(stored.clone());
        }
        let converted = webhook.convert_one(v, r)?;
        return to_bytes(&converted);
    }
    match cairn_api::conversion::convert(&v, r).map(|c| serde_json::to_vec(&c)) {
        Ok(Ok(b)) => Ok(Bytes::from(b)),
        Ok(Err(e)) => {
            tracing::warn!(resource = r.plural, error = %e, "encoding a converted object");
            Ok(stored.clone())
        }
        Err(e) => {
            tracing::warn!(resource = r.plural, error = %e, "serving an object in its stored shape");
            Ok(stored.clone())
        }
    }
}

/// Every item in the served shape; a conversion webhook gets them all in one call.
fn served_items(view: &View, items: &[Arc<CachedObject>]) -> Result<Vec<Bytes>, Status> {
    let Some(webhook) = view.conversion.as_ref().filter(|_| view.converts()) else {
        return items.iter().map(|o| served_bytes(view, &o.bytes)).collect();
    };
    let values = items
        .iter()
        .map(|o| parse(o))
        .collect::<Result<Vec<_>, _>>()?;
    webhook
        .convert(values, view.served)?
        .iter()
        .map(to_bytes)
        .collect()
}

/// List metadata: resourceVersion, continue and remainingItemCount.
pub struct ListMeta {
    pub resource_version: String,
    pub continue_token: Option<String>,
    pub remaining: Option<usize>,
}

impl ListMeta {
    fn to_json(&self) -> Value {
        let mut m = json!({"resourceVersion": self.resource_version});
        if let Some(c) = &self.continue_token {
            m["continue"] = json!(c);
        }
        if let Some(n) = self.remaining {
            m["remainingItemCount"] = json!(n);
        }
        m
    }
}

/// A plain list as a stream of chunks that share the cached objects' bytes: a list of
/// 10k pods costs no copy of them and no 25 MB buffer per request.
pub fn list_stream(
    view: View,
    items: Vec<Arc<CachedObject>>,
    meta: &ListMeta,
) -> Result<impl futures::Stream<Item = Result<Bytes, std::convert::Infallible>>, Status> {
    let r = view.served;
    let head =
        json!({"kind": r.list_kind(), "apiVersion": r.api_version(), "metadata": meta.to_json()});
    let head = serde_json::to_vec(&head).map_err(|e| Status::internal(e.to_string()))?;
    let mut opening = BytesMut::with_capacity(head.len() + 16);
    opening.put_slice(&head[..head.len().saturating_sub(1)]);
    opening.put_slice(b",\"items\":[");
    let opening = opening.freeze();
    let pieces = items.into_iter().enumerate().flat_map(move |(i, o)| {
        let sep = (i > 0).then(|| Bytes::from_static(b","));
        // Views with a conversion webhook are not streamed (see `list`); the fallback
        // keeps a failed built-in conversion in the stored shape, as `served_bytes` does.
        let item = served_bytes(&view, &o.bytes).unwrap_or_else(|_| o.bytes.clone());
        sep.into_iter().chain(std::iter::once(item))
    });
    let all = std::iter::once(opening)
        .chain(pieces)
        .chain(std::iter::once(Bytes::from_static(b"]}")));
    Ok(futures::stream::iter(Chunker { pieces: all }.map(Ok)))
}

/// Groups pieces into chunks of at least 64 KiB, lazily: only one chunk is in memory.
struct Chunker<I> {
    pieces: I,
}

impl<I: Iterator<Item = Bytes>> Iterator for Chunker<I> {
    type Item = Bytes;

    fn next(&mut self) -> Option<Bytes> {
        let mut group: Vec<Bytes> = Vec::new();
        let mut len = 0;
        for piece in self.pieces.by_ref() {
            len += piece.len();
            group.push(piece);
            if len >= 64 * 1024 {
                break;
            }
        }
        (!group.is_empty()).then(|| concat(&group))
    }
}

fn concat(pieces: &[Bytes]) -> Bytes {
    if pieces.len() == 1 {
        return pieces[0].clone();
    }
    let mut buf = BytesMut::with_capacity(pieces.iter().map(Bytes::len).sum());
    pieces.iter().for_each(|p| buf.put_slice(p));
    buf.freeze()
}

/// A list answer in the asked representation. Plain lists are spliced from the stored
/// bytes without decoding them.
pub fn list(
    view: &View,
    items: &[Arc<CachedObject>],
    meta: &ListMeta,
    repr: Representation,
) -> Result<Bytes, Status> {
    let r = view.served;
    match repr {
        Representation::Object => {
            let size: usize = items.iter().map(|o| o.bytes.len() + 1).sum();
            let mut out = BytesMut::with_capacity(size + 256);
            let head = json!({"kind": r.list_kind(), "apiVersion": r.api_version(), "metadata": meta.to_json()});
            let head = serde_json::to_vec(&head).map_err(|e| Status::internal(e.to_string()))?;
            // Drop the closing brace of the head and append the items array.
            out.put_slice(&head[..head.len().saturating_sub(1)]);
            out.put_slice(b",\"items\":[");
            for (i, o) in served_items(view, items)?.iter().enumerate() {
                if i > 0 {
                    out.put_u8(b',');
                }
                out.put_slice(o);
            }
            out.put_slice(b"]}");
            Ok(out.freeze())
        }
        Representation::Table => {
            let objects = match view.conversion {
                // A custom resource's columns read the served version's fields.
                Some(_) => served_items(view, items)?
                    .iter()
                    .map(|b| serde_json::from_slice(b).map_err(|e| Status::internal(e.to_string())))
                    .collect::<Result<Vec<Value>, _>>()?,
                None => items
                    .iter()
                    .map(|o| parse(o))
                    .collect::<Result<Vec<_>, _>>()?,
            };
            let mut table = view.table(&objects);
            table["metadata"] = meta.to_json();
            to_bytes(&table)
        }
        Representation::PartialMetadata => {
            let objects = items
                .iter()
                .map(|o| parse(o).map(|v| partial_metadata(&v)))
                .collect::<Result<Vec<_>, _>>()?;
            to_bytes(&json!({
                "kind": "PartialObjectMetadataList",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": meta.to_json(),
                "items": objects,
            }))
        }
    }
}

/// One object in the asked representation.
pub fn object(view: &View, bytes: &Bytes, repr: Representation) -> Result<Bytes, Status> {
    match repr {
        Representation::Object => served_bytes(view, bytes),
        Representation::Table => {
            // A custom resource's columns read the served version's fields.
            let bytes = match view.conversion {
                Some(_) => served_bytes(view, bytes)?,
                None => bytes.clone(),
            };
            let v: Value =
                serde_json::from_slice(&bytes).map_err(|e| Status::internal(e.to_string()))?;
            let rv = v
                .pointer("/metadata/resourceVersion")
                .cloned()
                .unwrap_or(Value::Null);
            let mut table = view.table(&[v]);
            table["metadata"] = json!({"resourceVersion": rv});
            to_bytes(&table)
        }
        Representation::PartialMetadata => partial_metadata_bytes(bytes),
    }
}

/// A stored object's PartialObjectMetadata, its metadata copied as stored: no tree is
/// built of the object (the garbage collector's metadata watches get every pod event,
/// and decoding each pod's spec only to drop it was most of their cost).
fn partial_metadata_bytes(bytes: &[u8]) -> Result<Bytes, Status> {
    #[derive(serde::Deserialize)]
    struct MetadataOnly<'a> {
        #[serde(borrow)]
        metadata: Option<&'a serde_json::value::RawValue>,
    }
    let object: MetadataOnly =
        serde_json::from_slice(bytes).map_err(|e| Status::internal(e.to_string()))?;
    let metadata = object.metadata.map_or("{}", |m| m.get());
    const HEAD: &[u8] =
        br#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":"#;
    let mut out = BytesMut::with_capacity(HEAD.len() + metadata.len() + 1);
    out.put_slice(HEAD);
    out.put_slice(metadata.as_bytes());
    out.put_u8(b'}');
    Ok(out.freeze())
}

pub fn to_bytes(v: &Value) -> Result<Bytes, Status> {
    serde_json::to_vec(v)
        .map(Bytes::from)
        .map_err(|e| Status::internal(format!("encoding response: {e}")))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod partial_metadata_tests {
    use super::*;

    #[test]
    fn spliced_metadata_is_what_the_tree_gives() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "n", "labels": {"a": "b\"c"},
                         "ownerReferences": [{"kind": "ReplicaSet", "name": "r", "uid": "u"}]},
            "spec": {"containers": [{"name": "c", "image": "i"}]}, "status": {"phase": "Pending"}});
        let bytes = serde_json::to_vec(&pod).unwrap();
        let spliced: Value =
            serde_json::from_slice(&partial_metadata_bytes(&bytes).unwrap()).unwrap();
        assert_eq!(spliced, partial_metadata(&pod));
        assert!(partial_metadata_bytes(b"{not json").is_err());
    }
}
