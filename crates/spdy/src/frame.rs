//! SPDY/3 frames (pure codec). Control frames: C=1, version 3, type, flags, 24-bit
//! length; data frames: C=0, 31-bit stream id, flags, 24-bit length.

use bytes::{Buf, BufMut, Bytes, BytesMut};

pub const FLAG_FIN: u8 = 0x01;
pub const VERSION: u16 = 3;
const SYN_STREAM: u16 = 1;
const SYN_REPLY: u16 = 2;
const RST_STREAM: u16 = 3;
const SETTINGS: u16 = 4;
const PING: u16 = 6;
const GOAWAY: u16 = 7;
const HEADERS: u16 = 8;
const WINDOW_UPDATE: u16 = 9;
/// RST_STREAM status: a frame for a stream that is not open.
pub const INVALID_STREAM: u32 = 2;
/// GOAWAY status: the peer broke the protocol.
pub const PROTOCOL_ERROR: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    Data {
        stream_id: u32,
        fin: bool,
        data: Bytes,
    },
    SynStream {
        stream_id: u32,
        fin: bool,
        header_block: Bytes,
    },
    SynReply {
        stream_id: u32,
        fin: bool,
        header_block: Bytes,
    },
    RstStream {
        stream_id: u32,
        status: u32,
    },
    Ping {
        id: u32,
    },
    GoAway {
        last_good_stream_id: u32,
        status: u32,
    },
    /// SETTINGS, HEADERS, WINDOW_UPDATE and unknown control frames: nothing a server
    /// session of ours acts on.
    Ignored {
        kind: u16,
    },
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("SPDY control frame of version {0}, expected 3")]
    Version(u16),
    #[error("SPDY frame of {0} bytes exceeds the limit")]
    TooLarge(usize),
    #[error("SPDY {kind} frame too short ({len} bytes)")]
    Short { kind: &'static str, len: usize },
}

/// Frames larger than this end the session (kubectl sends at most 32 KiB of data).
pub const MAX_FRAME: usize = 1024 * 1024;

fn control_header(out: &mut BytesMut, kind: u16, flags: u8, len: usize) {
    out.put_u16(0x8000 | VERSION);
    out.put_u16(kind);
    out.put_u8(flags);
    // Lengths are bounded by MAX_FRAME, far below 2^24.
    out.put_uint(len as u64, 3);
}

impl Frame {
    pub fn encode(&self, out: &mut BytesMut) {
        let fin = |f: bool| if f { FLAG_FIN } else { 0 };
        match self {
            Frame::Data {
                stream_id,
                fin: f,
                data,
            } => {
                out.put_u32(stream_id & 0x7fff_ffff);
                out.put_u8(fin(*f));
                out.put_uint(data.len() as u64, 3);
                out.put_slice(data);
            }
            Frame::SynStream {
                stream_id,
                fin: f,
                header_block,
            } => {
                control_header(out, SYN_STREAM, fin(*f), 10 + header_block.len());
                out.put_u32(stream_id & 0x7fff_ffff);
                out.put_u32(0);
                out.put_u16(0);
                out.put_slice(header_block);
            }
            Frame::SynReply {
                stream_id,
                fin: f,
                header_block,
            } => {
                control_header(out, SYN_REPLY, fin(*f), 4 + header_block.len());
                out.put_u32(stream_id & 0x7fff_ffff);
                out.put_slice(header_block);
            }
            Frame::RstStream { stream_id, status } => {
                control_header(out, RST_STREAM, 0, 8);
                out.put_u32(stream_id & 0x7fff_ffff);
                out.put_u32(*status);
            }
            Frame::Ping { id } => {
                control_header(out, PING, 0, 4);
                out.put_u32(*id);
            }
            Frame::GoAway {
                last_good_stream_id,
                status,
            } => {
                control_header(out, GOAWAY, 0, 8);
                out.put_u32(last_good_stream_id & 0x7fff_ffff);
                out.put_u32(*status);
            }
            Frame::Ignored { .. } => {}
        }
    }

    /// Takes one whole frame off the front of `buf`; `None` when more bytes are needed.
    pub fn decode(buf: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        if buf.len() < 8 {
            return Ok(None);
        }
        let len = (usize::from(buf[5]) << 16) | (usize::from(buf[6]) << 8) | usize::from(buf[7]);
        if len > MAX_FRAME {
            return Err(FrameError::TooLarge(len));
        }
        if buf.len() < 8 + len {
            return Ok(None);
        }
        let mut head = buf.split_to(8);
        let body = buf.split_to(len).freeze();
        let first = head.get_u32();
        let flags = head.get_u8();
        let fin = flags & FLAG_FIN != 0;
        if first & 0x8000_0000 == 0 {
            return Ok(Some(Frame::Data {
                stream_id: first,
                fin,
                data: body,
            }));
        }
        let version = ((first >> 16) & 0x7fff) as u16;
        if version != VERSION {
            return Err(FrameError::Version(version));
        }
        decode_control((first & 0xffff) as u16, fin, body).map(Some)
    }
}

fn need(kind: &'static str, body: &Bytes, n: usize) -> Result<(), FrameError> {
    if body.len() < n {
        return Err(FrameError::Short {
            kind,
            len: body.len(),
        });
    }
    Ok(())
}

fn decode_control(kind: u16, fin: bool, mut body: Bytes) -> Result<Frame, FrameError> {
    Ok(match kind {
        SYN_STREAM => {
            need("SYN_STREAM", &body, 10)?;
            let stream_id = body.get_u32() & 0x7fff_ffff;
            body.advance(6);
            Frame::SynStream {
                stream_id,
                fin,
                header_block: body,
            }
        }
        SYN_REPLY => {
            need("SYN_REPLY", &body, 4)?;
            let stream_id = body.get_u32() & 0x7fff_ffff;
            Frame::SynReply {
                stream_id,
                fin,
                header_block: body,
            }
        }
        RST_STREAM => {
            need("RST_STREAM", &body, 8)?;
            Frame::RstStream {
                stream_id: body.get_u32() & 0x7fff_ffff,
                status: body.get_u32(),
            }
        }
        PING => {
            need("PING", &body, 4)?;
            Frame::Ping { id: body.get_u32() }
        }
        GOAWAY => {
            need("GOAWAY", &body, 4)?;
            let last_good_stream_id = body.get_u32() & 0x7fff_ffff;
            let status = if body.len() >= 4 { body.get_u32() } else { 0 };
            Frame::GoAway {
                last_good_stream_id,
                status,
            }
        }
        other => {
            // SETTINGS, HEADERS, WINDOW_UPDATE, CREDENTIAL, unknown: skipped.
            let _ = (SETTINGS, HEADERS, WINDOW_UPDATE);
            Frame::Ignored { kind: other }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(f: Frame) {
        let mut b = BytesMut::new();
        f.encode(&mut b);
        assert_eq!(Frame::decode(&mut b).unwrap(), Some(f));
        assert!(b.is_empty());
    }

    #[test]
    fn frames_round_trip() {
        round_trip(Frame::Data {
            stream_id: 5,
            fin: true,
            data: Bytes::from_static(b"abc"),
        });
        round_trip(Frame::SynStream {
            stream_id: 1,
            fin: false,
            header_block: Bytes::from_static(b"hb"),
        });
        round_trip(Frame::SynReply {
            stream_id: 3,
            fin: false,
            header_block: Bytes::new(),
        });
        round_trip(Frame::RstStream {
            stream_id: 7,
            status: INVALID_STREAM,
        });
        round_trip(Frame::Ping { id: 1 });
        round_trip(Frame::GoAway {
            last_good_stream_id: 9,
            status: PROTOCOL_ERROR,
        });
    }

    #[test]
    fn known_layouts() {
        let mut b = BytesMut::new();
        Frame::Ping { id: 1 }.encode(&mut b);
        assert_eq!(&b[..], b"\x80\x03\x00\x06\x00\x00\x00\x04\x00\x00\x00\x01");
        let mut b = BytesMut::new();
        Frame::Data {
            stream_id: 1,
            fin: true,
            data: Bytes::from_static(b"x"),
        }
        .encode(&mut b);
        assert_eq!(&b[..], b"\x00\x00\x00\x01\x01\x00\x00\x01x");
    }

    #[test]
    fn partial_and_bad_input() {
        let mut b = BytesMut::from(&b"\x80\x03\x00\x06\x00\x00\x00\x04\x00\x00"[..]);
        assert_eq!(Frame::decode(&mut b).unwrap(), None);
        let mut v2 = BytesMut::from(&b"\x80\x02\x00\x06\x00\x00\x00\x04\x00\x00\x00\x01"[..]);
        assert_eq!(Frame::decode(&mut v2), Err(FrameError::Version(2)));
        let mut huge = BytesMut::from(&b"\x00\x00\x00\x01\x00\xff\xff\xff"[..]);
        assert!(matches!(
            Frame::decode(&mut huge),
            Err(FrameError::TooLarge(_))
        ));
        let mut short = BytesMut::from(&b"\x80\x03\x00\x03\x00\x00\x00\x02\x00\x00"[..]);
        assert!(matches!(
            Frame::decode(&mut short),
            Err(FrameError::Short { .. })
        ));
        let mut settings = BytesMut::from(&b"\x80\x03\x00\x04\x00\x00\x00\x04\x00\x00\x00\x00"[..]);
        assert_eq!(
            Frame::decode(&mut settings).unwrap(),
            Some(Frame::Ignored { kind: 4 })
        );
    }
}
