//! Detection of protobuf fields that prost skipped.
//!
//! prost silently drops fields whose tag its message does not declare. A client built for a
//! newer Kubernetes than k8s-pb may send such fields; converting without them would lose data.
//! This module walks the raw wire bytes with the field tables of the generated code and
//! refuses any unknown field that carries data. Unknown fields holding only the zero value
//! (varint 0, empty bytes) are tolerated: Go clients always send their non-pointer fields, so
//! a field added in a newer release arrives empty in every request that does not use it.

use crate::error::ProtoError;
use crate::generated_schema::SCHEMA;
use crate::path::Path;
use crate::schema::FieldShape;

/// Deepest message nesting scanned; prost refuses deeper input (its recursion limit is 100).
const MAX_DEPTH: usize = 100;

/// One field read from the wire.
enum Wire<'b> {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    Bytes(&'b [u8]),
    Group,
}

struct Reader<'b> {
    buf: &'b [u8],
}

impl<'b> Reader<'b> {
    fn varint(&mut self, path: &Path<'_>) -> Result<u64, ProtoError> {
        let mut value: u64 = 0;
        for i in 0..10 {
            let (&byte, rest) = self
                .buf
                .split_first()
                .ok_or_else(|| malformed(path, "truncated varint"))?;
            self.buf = rest;
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(malformed(path, "varint longer than 10 bytes"))
    }

    fn take(&mut self, n: usize, path: &Path<'_>) -> Result<&'b [u8], ProtoError> {
        if n > self.buf.len() {
            return Err(malformed(path, "truncated field"));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    /// Next (tag, value), or None at the end of the buffer.
    fn field(&mut self, path: &Path<'_>) -> Result<Option<(u32, Wire<'b>)>, ProtoError> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let key = self.varint(path)?;
        let tag = u32::try_from(key >> 3)
            .ok()
            .filter(|t| *t != 0)
            .ok_or_else(|| malformed(path, "invalid field tag"))?;
        let wire = match key & 7 {
            0 => Wire::Varint(self.varint(path)?),
            1 => {
                let b = self.take(8, path)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                Wire::Fixed64(u64::from_le_bytes(a))
            }
            2 => {
                let len = usize::try_from(self.varint(path)?)
                    .map_err(|_| malformed(path, "length out of range"))?;
                Wire::Bytes(self.take(len, path)?)
            }
            3 => {
                // Deprecated groups: never produced by Kubernetes. The rest of the message
                // belongs to the group; stop here and let the caller decide.
                self.buf = &[];
                Wire::Group
            }
            5 => {
                let b = self.take(4, path)?;
                let mut a = [0u8; 4];
                a.copy_from_slice(b);
                Wire::Fixed32(u32::from_le_bytes(a))
            }
            _ => return Err(malformed(path, "invalid wire type")),
        };
        Ok(Some((tag, wire)))
    }
}

fn malformed(path: &Path<'_>, what: &str) -> ProtoError {
    ProtoError::InvalidField {
        path: path.render(),
        reason: format!("malformed protobuf: {what}"),
    }
}

fn is_zero(wire: &Wire<'_>) -> bool {
    match wire {
        Wire::Varint(v) | Wire::Fixed64(v) => *v == 0,
        Wire::Fixed32(v) => *v == 0,
        Wire::Bytes(b) => b.is_empty(),
        Wire::Group => false,
    }
}

fn unknown_field(path: &Path<'_>, tag: u32, wire: &Wire<'_>) -> Result<(), ProtoError> {
    if is_zero(wire) {
        Ok(())
    } else {
        Err(ProtoError::UnsupportedField {
            path: path.unknown(tag).render(),
        })
    }
}

/// Checks that `buf`, an encoded message of schema `msg`, has no unknown non-zero field.
pub(crate) fn check(
    buf: &[u8],
    msg: usize,
    path: &Path<'_>,
    depth: usize,
) -> Result<(), ProtoError> {
    if depth > MAX_DEPTH {
        return Err(malformed(path, "messages nested too deeply"));
    }
    let schema = SCHEMA
        .get(msg)
        .ok_or_else(|| malformed(path, "internal error: unknown schema"))?;
    let mut reader = Reader { buf };
    // occurrences seen so far of each repeated field, for list indices in paths
    let mut seen: Vec<(u32, usize)> = Vec::new();
    while let Some((tag, wire)) = reader.field(path)? {
        let Some(field) = schema.fields.iter().find(|f| f.tag == tag) else {
            unknown_field(path, tag, &wire)?;
            continue;
        };
        let nth = match seen.iter_mut().find(|(t, _)| *t == tag) {
            Some((_, n)) => {
                *n += 1;
                *n - 1
            }
            None => {
                seen.push((tag, 1));
                0
            }
        };
        match field.shape {
            FieldShape::Scalar => {}
            FieldShape::Message(inner) => {
                let Wire::Bytes(bytes) = wire else {
                    return Err(malformed(
                        &path.field(field.json),
                        "message with wrong wire type",
                    ));
                };
                if field.json.is_empty() {
                    // json:",inline": the embedded fields live at this level
                    check(bytes, inner, path, depth + 1)?;
                } else {
                    let at = path.field(field.json);
                    if field.repeated {
                        check(bytes, inner, &at.index(nth), depth + 1)?;
                    } else {
                        check(bytes, inner, &at, depth + 1)?;
                    }
                }
            }
            FieldShape::MapOfMessages(inner) => {
                let Wire::Bytes(entry) = wire else {
                    return Err(malformed(
                        &path.field(field.json),
                        "map entry with wrong wire type",
                    ));
                };
                check_map_entry(entry, inner, &path.field(field.json), depth + 1)?;
            }
        }
    }
    Ok(())
}

/// A map entry is a message `{1: key, 2: value}`.
fn check_map_entry(
    entry: &[u8],
    value_schema: usize,
    path: &Path<'_>,
    depth: usize,
) -> Result<(), ProtoError> {
    let mut key = String::new();
    let mut reader = Reader { buf: entry };
    while let Some((tag, wire)) = reader.field(path)? {
        if let (1, Wire::Bytes(b)) = (tag, &wire) {
            key = String::from_utf8_lossy(b).into_owned();
        }
    }
    let at = path.key(&key);
    let mut reader = Reader { buf: entry };
    while let Some((tag, wire)) = reader.field(&at)? {
        match (tag, wire) {
            (1, _) => {}
            (2, Wire::Bytes(bytes)) => check(bytes, value_schema, &at, depth)?,
            (2, _) => return Err(malformed(&at, "map value with wrong wire type")),
            (tag, wire) => unknown_field(&at, tag, &wire)?,
        }
    }
    Ok(())
}
