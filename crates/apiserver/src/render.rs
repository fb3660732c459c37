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
}

impl View {
    /// Whether stored objects need converting to the served shape.
    pub fn converts(&self) -> bool {
        !std::ptr::eq(self.storage, self.served)
    }

    /// The Table of stored objects: upstream prints every version of a kind alike.
    fn table(&self, objects: &[Value]) -> Value {
        let now = chrono::Utc::now();
        match &self.custom {
            Some(c) => cairn_api::table::custom_table(&c.columns, objects, now),
            None => cairn_api::table::table(self.storage, objects, now),
        }
    }
}

/// A stored object in the shape `view` serves (autoscaling/v1 HPAs, events.k8s.io Events,
/// other versions of a custom resource). Bodies that are not objects of the stored kind (a
/// `Status`) pass unchanged, and so does an object that cannot be converted, which is
/// logged: the read still answers.
pub fn served_bytes(view: &View, stored: &Bytes) -> Bytes {
    if !view.converts() {
        return stored.clone();
    }
    let Ok(v) = serde_json::from_slice::<Value>(stored) else {
        return stored.clone();
    };
    if v.get("kind").and_then(Value::as_str) != Some(view.storage.kind) {
        return stored.clone();
    }
    let r = view.served;
    match cairn_api::conversion::convert(&v, r).map(|c| serde_json::to_vec(&c)) {
        Ok(Ok(b)) => Bytes::from(b),
        Ok(Err(e)) => {
            tracing::warn!(resource = r.plural, error = %e, "encoding a converted object");
            stored.clone()
        }
        Err(e) => {
            tracing::warn!(resource = r.plural, error = %e, "serving an object in its stored shape");
            stored.clone()
        }
    }
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
        sep.into_iter()
            .chain(std::iter::once(served_bytes(&view, &o.bytes)))
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
            for (i, o) in items.iter().enumerate() {
                if i > 0 {
                    out.put_u8(b',');
                }
                out.put_slice(&served_bytes(view, &o.bytes));
            }
            out.put_slice(b"]}");
            Ok(out.freeze())
        }
        Representation::Table => {
            let objects = items
                .iter()
                .map(|o| parse(o))
                .collect::<Result<Vec<_>, _>>()?;
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
        Representation::Object => Ok(served_bytes(view, bytes)),
        Representation::Table => {
            let v: Value =
                serde_json::from_slice(bytes).map_err(|e| Status::internal(e.to_string()))?;
            let rv = v
                .pointer("/metadata/resourceVersion")
                .cloned()
                .unwrap_or(Value::Null);
            let mut table = view.table(&[v]);
            table["metadata"] = json!({"resourceVersion": rv});
            to_bytes(&table)
        }
        Representation::PartialMetadata => {
            let v: Value =
                serde_json::from_slice(bytes).map_err(|e| Status::internal(e.to_string()))?;
            to_bytes(&partial_metadata(&v))
        }
    }
}

pub fn to_bytes(v: &Value) -> Result<Bytes, Status> {
    serde_json::to_vec(v)
        .map(Bytes::from)
        .map_err(|e| Status::internal(format!("encoding response: {e}")))
}
