//! Record sets in wire format. The zone keeps each set only as the bytes that follow the
//! header and the lower-case question of its response, rendered by hickory with name
//! compression against that question: a few dozen bytes where hickory's `Record` takes
//! hundreds, and exactly what the server sends. [`Chunk::decode`] turns them back into
//! records for the general path and for callers of [`super::ClusterZone::answer`].

use hickory_proto::op::{Message, Query};
use hickory_proto::rr::{Name, Record, RecordType};
use hickory_proto::serialize::binary::{BinEncodable, BinEncoder, NameEncoding};
use hickory_proto::ProtoError;

/// The answer and additional sections of one response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Chunk {
    pub(crate) bytes: Box<[u8]>,
    pub(crate) answers: u16,
    pub(crate) additionals: u16,
    /// Where the additional section starts (it may be left out to fit).
    pub(crate) additional_start: u16,
}

fn too_big<E>(_: E) -> ProtoError {
    ProtoError::Message("response larger than a DNS message")
}

impl Chunk {
    /// Where each answer record ends, walked off the bytes (only truncation needs it).
    pub(crate) fn answer_ends(&self) -> impl Iterator<Item = usize> + '_ {
        let mut at = 0usize;
        (0..self.answers).map_while(move |_| {
            let b = &self.bytes;
            loop {
                let len = usize::from(*b.get(at)?);
                if len & 0xc0 == 0xc0 {
                    at += 2;
                    break;
                }
                at += 1 + len;
                if len == 0 {
                    break;
                }
            }
            let rdlen = usize::from(u16::from_be_bytes([*b.get(at + 8)?, *b.get(at + 9)?]));
            at += 10 + rdlen;
            (at <= b.len()).then_some(at)
        })
    }

    /// The records back: the response re-assembled around the question and decoded.
    pub(crate) fn decode(
        &self,
        key: &[u8],
        rtype: RecordType,
    ) -> Option<(Vec<Record>, Vec<Record>)> {
        let mut m = Vec::with_capacity(16 + key.len() + self.bytes.len());
        for v in [0, 0x8400, 1, self.answers, 0, self.additionals] {
            m.extend_from_slice(&u16::to_be_bytes(v));
        }
        m.extend_from_slice(key);
        m.extend_from_slice(&u16::from(rtype).to_be_bytes());
        m.extend_from_slice(&1u16.to_be_bytes());
        m.extend_from_slice(&self.bytes);
        let message = Message::from_vec(&m).ok()?;
        Some((message.answers, message.additionals))
    }
}

/// Renders sets, reusing one buffer.
#[derive(Default)]
pub(crate) struct Renderer {
    buf: Vec<u8>,
}

impl Renderer {
    /// The sections answering (`question`, `rtype`) with `answers` and `additionals`.
    pub(crate) fn render(
        &mut self,
        question: &Name,
        rtype: RecordType,
        answers: &[Record],
        additionals: &[Record],
    ) -> Result<Chunk, ProtoError> {
        self.buf.clear();
        let mut enc = BinEncoder::new(&mut self.buf);
        enc.emit_vec(&[0; 12])?;
        Query::query(question.clone(), rtype).emit(&mut enc)?;
        let start = enc.offset();
        for r in answers {
            r.emit(&mut enc)?;
        }
        let additional_start = u16::try_from(enc.offset() - start).map_err(too_big)?;
        for r in additionals {
            r.emit(&mut enc)?;
        }
        Ok(Chunk {
            bytes: self.buf[start..].into(),
            answers: u16::try_from(answers.len()).map_err(too_big)?,
            additionals: u16::try_from(additionals.len()).map_err(too_big)?,
            additional_start,
        })
    }
}

/// A record uncompressed, so it can follow any question (the SOA of negative answers).
pub(crate) fn render_alone(record: &Record) -> Result<Box<[u8]>, ProtoError> {
    let mut buf = Vec::with_capacity(128);
    let mut enc = BinEncoder::new(&mut buf);
    enc.set_name_encoding(NameEncoding::Uncompressed);
    record.emit(&mut enc)?;
    Ok(buf.into())
}
