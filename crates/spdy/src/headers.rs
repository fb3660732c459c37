//! Header blocks: `u32 count, (u32 len, name, u32 len, value)*`, zlib-compressed with the
//! SPDY/3 dictionary in one stream per direction for the whole connection, each block
//! ending in a sync flush.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

use crate::dictionary::dictionary;

#[derive(Debug, thiserror::Error)]
pub enum HeaderError {
    #[error("compressing SPDY headers: {0}")]
    Compress(String),
    #[error("decompressing SPDY headers: {0}")]
    Decompress(String),
    #[error("malformed SPDY header block")]
    Malformed,
}

pub type Headers = Vec<(String, String)>;

/// Largest decompressed header block accepted (a stream's headers are a few dozen bytes).
const MAX_BLOCK: usize = 256 * 1024;

pub struct HeaderEncoder {
    z: Compress,
}

impl HeaderEncoder {
    pub fn new() -> Result<Self, HeaderError> {
        let mut z = Compress::new(Compression::default(), true);
        z.set_dictionary(dictionary())
            .map_err(|e| HeaderError::Compress(e.to_string()))?;
        Ok(HeaderEncoder { z })
    }

    pub fn encode(&mut self, headers: &[(String, String)]) -> Result<Bytes, HeaderError> {
        let mut raw = BytesMut::new();
        raw.put_u32(headers.len() as u32);
        for (k, v) in headers {
            raw.put_u32(k.len() as u32);
            raw.put_slice(k.as_bytes());
            raw.put_u32(v.len() as u32);
            raw.put_slice(v.as_bytes());
        }
        let mut out = Vec::with_capacity(raw.len() + 64);
        let mut input = &raw[..];
        loop {
            out.reserve(256);
            let before = self.z.total_in();
            self.z
                .compress_vec(input, &mut out, FlushCompress::Sync)
                .map_err(|e| HeaderError::Compress(e.to_string()))?;
            let used = (self.z.total_in() - before) as usize;
            input = &input[used..];
            // Done once all input is in and the flush left spare room in the buffer.
            if input.is_empty() && out.len() < out.capacity() {
                return Ok(Bytes::from(out));
            }
        }
    }
}

pub struct HeaderDecoder {
    z: Decompress,
}

impl Default for HeaderDecoder {
    fn default() -> Self {
        HeaderDecoder {
            z: Decompress::new(true),
        }
    }
}

impl HeaderDecoder {
    pub fn decode(&mut self, block: &[u8]) -> Result<Headers, HeaderError> {
        let raw = self.inflate(block)?;
        parse(Bytes::from(raw)).ok_or(HeaderError::Malformed)
    }

    fn inflate(&mut self, mut input: &[u8]) -> Result<Vec<u8>, HeaderError> {
        let mut out = Vec::with_capacity(input.len() * 4 + 64);
        loop {
            out.reserve(1024);
            let before = self.z.total_in();
            match self
                .z
                .decompress_vec(input, &mut out, FlushDecompress::Sync)
            {
                Ok(Status::Ok | Status::BufError | Status::StreamEnd) => {}
                Err(e) if e.needs_dictionary().is_some() => {
                    self.z
                        .set_dictionary(dictionary())
                        .map_err(|e| HeaderError::Decompress(e.to_string()))?;
                }
                Err(e) => return Err(HeaderError::Decompress(e.to_string())),
            }
            let used = (self.z.total_in() - before) as usize;
            input = &input[used..];
            if out.len() > MAX_BLOCK {
                return Err(HeaderError::Malformed);
            }
            if input.is_empty() && out.len() < out.capacity() {
                return Ok(out);
            }
        }
    }
}

fn take_string(b: &mut Bytes) -> Option<String> {
    if b.remaining() < 4 {
        return None;
    }
    let n = b.get_u32() as usize;
    if b.remaining() < n {
        return None;
    }
    String::from_utf8(b.split_to(n).to_vec()).ok()
}

/// Names are lowercase on the wire; several values of one name are NUL-separated.
fn parse(mut b: Bytes) -> Option<Headers> {
    if b.remaining() < 4 {
        return None;
    }
    let count = b.get_u32();
    let mut headers = Vec::new();
    for _ in 0..count {
        let name = take_string(&mut b)?.to_ascii_lowercase();
        let value = take_string(&mut b)?;
        for v in value.split('\0') {
            headers.push((name.clone(), v.to_string()));
        }
    }
    Some(headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Headers {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn blocks_share_one_stream_per_direction() {
        let mut enc = HeaderEncoder::new().unwrap();
        let mut dec = HeaderDecoder::default();
        for block in [
            h(&[("streamtype", "error")]),
            h(&[
                ("streamtype", "stdout"),
                ("port", "8080"),
                ("requestid", "0"),
            ]),
            h(&[]),
        ] {
            let bytes = enc.encode(&block).unwrap();
            assert_eq!(dec.decode(&bytes).unwrap(), block);
        }
    }

    #[test]
    fn dictionary_id_as_every_spdy3_stream_announces() {
        let mut check = Compress::new(Compression::default(), true);
        assert_eq!(check.set_dictionary(dictionary()).unwrap(), 0xE3C6_A7C2);
    }

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn decodes_chromium_test_vector() {
        // Chromium SpdyFramer's compressed SYN_STREAM (bar: foo, foo: bar); the header
        // block starts at byte 18.
        let frame = unhex(concat!(
            "80030001000000370000000100000000800038eae3c6a7c202e50e50c24b4a04e50b66",
            "80004acbcf0708201095969f0fa200022829b108208000000000ffff"
        ));
        let mut dec = HeaderDecoder::default();
        assert_eq!(
            dec.decode(&frame[18..]).unwrap(),
            h(&[("bar", "foo"), ("foo", "bar")])
        );
    }

    #[test]
    fn garbage_is_an_error() {
        let mut dec = HeaderDecoder::default();
        assert!(dec.decode(b"\x01\x02\x03garbage").is_err());
    }

    #[test]
    fn nul_separated_values() {
        let mut raw = BytesMut::new();
        raw.put_u32(1);
        raw.put_u32(1);
        raw.put_slice(b"A");
        raw.put_u32(3);
        raw.put_slice(b"x\0y");
        assert_eq!(parse(raw.freeze()).unwrap(), h(&[("a", "x"), ("a", "y")]));
    }
}
