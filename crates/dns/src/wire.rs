//! The cluster-name fast path. Every record set of the zone is rendered to wire format
//! once, when the zone is built ([`crate::records`]), as the bytes that follow the header
//! and question of its response. A query whose question is at the usual place (offset 12, no compression
//! pointers) gets that response by copying: the header, the client's own question bytes
//! (so its case survives, and the name pointers rendered against the lower-case question
//! stay valid, the question having the same length), the pre-rendered sections and an
//! OPT record. No allocation, no name parsing beyond lower-casing into a stack buffer.
//! Anything unusual falls back to the general path built on hickory's `Message`.

use hickory_proto::rr::RecordType;

use crate::records::{Chunk, ClusterZone, Kind};

/// The UDP payload this server advertises and the most it sends to an EDNS client
/// (the DNS flag day 2020 value: no fragmentation on common paths).
pub(crate) const EDNS_PAYLOAD: u16 = 1232;
/// The UDP limit without EDNS.
pub(crate) const PLAIN_UDP: usize = 512;
/// Response codes of the fast path.
const NOERROR: u8 = 0;
const SERVFAIL: u8 = 2;
const NXDOMAIN: u8 = 3;
const REFUSED: u8 = 5;
const CLASS_IN: u16 = 1;
const TYPE_OPT: u16 = 41;
const MAX_LABELS: usize = 128;

/// What the fast path decided.
#[derive(Debug)]
pub(crate) enum Fast<'z> {
    Positive(&'z Chunk),
    Negative {
        rcode: u8,
    },
    /// SERVFAIL or REFUSED, without records.
    Error {
        rcode: u8,
    },
    /// The general path answers (forwarding, CNAMEs, pod names, odd classes).
    Slow,
}

/// EDNS of a query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClientEdns {
    pub(crate) payload: u16,
    pub(crate) dnssec_ok: bool,
}

/// The lower-cased question name of a query, with where its labels start.
pub(crate) struct KeyBuf {
    bytes: [u8; 256],
    len: usize,
    starts: [u8; MAX_LABELS],
    labels: usize,
}

impl KeyBuf {
    pub(crate) fn new() -> KeyBuf {
        KeyBuf {
            bytes: [0; 256],
            len: 0,
            starts: [0; MAX_LABELS],
            labels: 0,
        }
    }

    fn key(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// Label `i` (0 = leftmost).
    fn label(&self, i: usize) -> Option<&[u8]> {
        let start = usize::from(*self.starts[..self.labels].get(i)?);
        let len = usize::from(self.bytes[start]);
        self.bytes.get(start + 1..start + 1 + len)
    }
}

/// A query in the usual shape.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FastQuery<'p> {
    id: [u8; 2],
    /// RD and CD, to copy.
    rd: bool,
    cd: bool,
    question: &'p [u8],
    qtype: u16,
    qclass: u16,
    pub(crate) edns: Option<ClientEdns>,
}

/// What the first look at a packet says.
pub(crate) enum Parsed<'p> {
    /// Too short to answer, or a response: never answered (no reflection, no loops).
    Drop,
    /// Not the usual shape: the general path decides (FORMERR, NOTIMP, …).
    Slow,
    Query(FastQuery<'p>),
}

fn u16_at(p: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*p.get(at)?, *p.get(at + 1)?]))
}

/// Reads header, question and an optional OPT record, lower-casing the name into `key`.
pub(crate) fn parse<'p>(p: &'p [u8], key: &mut KeyBuf) -> Parsed<'p> {
    if p.len() < 12 || p[2] & 0x80 != 0 {
        return Parsed::Drop;
    }
    let opcode = (p[2] >> 3) & 0x0f;
    let counts = [u16_at(p, 4), u16_at(p, 6), u16_at(p, 8), u16_at(p, 10)];
    if opcode != 0 || counts[..3] != [Some(1), Some(0), Some(0)] || counts[3] > Some(1) {
        return Parsed::Slow;
    }
    let Some(name_end) = read_name(p, key) else {
        return Parsed::Slow;
    };
    let (Some(qtype), Some(qclass)) = (u16_at(p, name_end), u16_at(p, name_end + 2)) else {
        return Parsed::Slow;
    };
    let question_end = name_end + 4;
    let edns = if counts[3] == Some(1) {
        match read_opt(p, question_end) {
            Some(edns) => Some(edns),
            None => return Parsed::Slow,
        }
    } else if p.len() != question_end {
        return Parsed::Slow;
    } else {
        None
    };
    Parsed::Query(FastQuery {
        id: [p[0], p[1]],
        rd: p[2] & 0x01 != 0,
        cd: p[3] & 0x10 != 0,
        question: &p[12..question_end],
        qtype,
        qclass,
        edns,
    })
}

/// The question name from offset 12, without pointers; its end offset.
fn read_name(p: &[u8], key: &mut KeyBuf) -> Option<usize> {
    let mut at = 12;
    key.len = 0;
    key.labels = 0;
    loop {
        let len = usize::from(*p.get(at)?);
        if len & 0xc0 != 0 || key.len + len + 1 > key.bytes.len() {
            return None;
        }
        if len > 0 {
            *key.starts.get_mut(key.labels)? = u8::try_from(key.len).ok()?;
            key.labels += 1;
        }
        key.bytes[key.len] = len as u8;
        let label = p.get(at + 1..at + 1 + len)?;
        for (dst, src) in key.bytes[key.len + 1..key.len + 1 + len]
            .iter_mut()
            .zip(label)
        {
            *dst = src.to_ascii_lowercase();
        }
        key.len += len + 1;
        at += len + 1;
        if len == 0 {
            return Some(at);
        }
    }
}

/// An OPT record that ends the packet: root owner, type 41, version 0.
fn read_opt(p: &[u8], at: usize) -> Option<ClientEdns> {
    if *p.get(at)? != 0 || u16_at(p, at + 1)? != TYPE_OPT {
        return None;
    }
    let payload = u16_at(p, at + 3)?;
    let version = *p.get(at + 6)?;
    let flags = u16_at(p, at + 7)?;
    let rdlen = usize::from(u16_at(p, at + 9)?);
    if version != 0 || at + 11 + rdlen != p.len() {
        return None;
    }
    Some(ClientEdns {
        payload,
        dnssec_ok: flags & 0x8000 != 0,
    })
}

impl FastQuery<'_> {
    pub(crate) fn qtype(&self) -> u16 {
        self.qtype
    }

    /// The most a UDP response may carry.
    pub(crate) fn udp_limit(&self) -> usize {
        match self.edns {
            Some(e) => usize::from(e.payload.min(EDNS_PAYLOAD)).max(PLAIN_UDP),
            None => PLAIN_UDP,
        }
    }

    fn opt_len(&self) -> usize {
        if self.edns.is_some() {
            11
        } else {
            0
        }
    }

    fn header(&self, out: &mut Vec<u8>, aa: bool, tc: bool, rcode: u8, counts: [u16; 3]) {
        out.clear();
        out.extend_from_slice(&self.id);
        out.push(0x80 | u8::from(aa) << 2 | u8::from(tc) << 1 | u8::from(self.rd));
        out.push(0x80 | u8::from(self.cd) << 4 | (rcode & 0x0f));
        out.extend_from_slice(&1u16.to_be_bytes());
        let additionals = counts[2] + u16::from(self.edns.is_some());
        for c in [counts[0], counts[1], additionals] {
            out.extend_from_slice(&c.to_be_bytes());
        }
        out.extend_from_slice(self.question);
    }

    fn opt(&self, out: &mut Vec<u8>) {
        if let Some(e) = self.edns {
            out.extend_from_slice(&[0, 0, 41]);
            out.extend_from_slice(&EDNS_PAYLOAD.to_be_bytes());
            out.extend_from_slice(&[0, 0, if e.dnssec_ok { 0x80 } else { 0 }, 0, 0, 0]);
        }
    }

    /// A positive answer within `limit` bytes: whole; else without the additional
    /// section; else as many answers as fit, with TC.
    pub(crate) fn write_positive(&self, out: &mut Vec<u8>, chunk: &Chunk, limit: usize) {
        let fixed = 12 + self.question.len() + self.opt_len();
        let counts = [chunk.answers, 0, chunk.additionals];
        let additional_start = usize::from(chunk.additional_start);
        if fixed + chunk.bytes.len() <= limit {
            self.header(out, true, false, NOERROR, counts);
            out.extend_from_slice(&chunk.bytes);
        } else if fixed + additional_start <= limit {
            self.header(out, true, false, NOERROR, [counts[0], 0, 0]);
            out.extend_from_slice(&chunk.bytes[..additional_start]);
        } else {
            let room = limit.saturating_sub(fixed);
            let fit = chunk.answer_ends().take_while(|end| *end <= room);
            let (count, end) = fit.fold((0u16, 0usize), |(n, _), end| (n + 1, end));
            self.header(out, true, true, NOERROR, [count, 0, 0]);
            out.extend_from_slice(&chunk.bytes[..end]);
        }
        self.opt(out);
    }

    /// NODATA or NXDOMAIN with the zone's SOA in authority.
    pub(crate) fn write_negative(&self, out: &mut Vec<u8>, rcode: u8, soa: &[u8]) {
        self.header(out, true, false, rcode, [0, 1, 0]);
        out.extend_from_slice(soa);
        self.opt(out);
    }

    /// An error code without records.
    pub(crate) fn write_error(&self, out: &mut Vec<u8>, rcode: u8) {
        self.header(out, false, false, rcode, [0, 0, 0]);
        self.opt(out);
    }
}

/// The fast path's decision for a query whose name is in `key`.
pub(crate) fn decide<'z>(zone: &'z ClusterZone, q: &FastQuery<'_>, key: &KeyBuf) -> Fast<'z> {
    if q.qclass != CLASS_IN {
        return Fast::Slow;
    }
    let transfer = matches!(
        RecordType::from(q.qtype),
        RecordType::AXFR | RecordType::IXFR
    );
    let Some(node) = zone.node(key.key()) else {
        return decide_missing(zone, key, transfer);
    };
    match (node.kind, node.chunk(q.qtype)) {
        (Kind::Reverse, Some(chunk)) => Fast::Positive(chunk),
        (Kind::Reverse, None) | (Kind::Alias, _) => Fast::Slow,
        (Kind::Static, _) if transfer => Fast::Error { rcode: REFUSED },
        (Kind::Static, Some(chunk)) => Fast::Positive(chunk),
        (Kind::Static, None) => Fast::Negative { rcode: NOERROR },
    }
}

fn decide_missing<'z>(zone: &'z ClusterZone, key: &KeyBuf, transfer: bool) -> Fast<'z> {
    let origin = zone.origin_wire();
    let first = key.labels.checked_sub(zone.origin_labels());
    let suffix_start = first.and_then(|f| key.starts[..key.labels].get(f));
    let suffix = suffix_start.and_then(|s| key.bytes.get(usize::from(*s)..key.len));
    if suffix != Some(origin) {
        return Fast::Slow;
    }
    if transfer {
        return Fast::Error { rcode: REFUSED };
    }
    // `<a-b-c-d>.<ns>.pod.<domain>`: computed by the general path.
    if first == Some(3) && key.label(2) == Some(b"pod") {
        return Fast::Slow;
    }
    if zone.is_synced() {
        Fast::Negative { rcode: NXDOMAIN }
    } else {
        Fast::Error { rcode: SERVFAIL }
    }
}

#[cfg(test)]
mod tests {
    use hickory_proto::op::{Edns, Message, Query};
    use hickory_proto::rr::{Name, RecordType};

    use super::*;

    fn packet(edns: Option<u8>) -> Vec<u8> {
        let mut m = Message::query();
        m.add_query(Query::query(
            Name::from_ascii("Web.Default.svc.cluster.local.").unwrap(),
            RecordType::A,
        ));
        if let Some(version) = edns {
            let mut e = Edns::new();
            e.set_max_payload(4096)
                .set_version(version)
                .set_dnssec_ok(true);
            m.set_edns(e);
        }
        m.to_vec().unwrap()
    }

    #[test]
    fn the_usual_shape_is_read_and_lower_cased() {
        let mut key = KeyBuf::new();
        let p = packet(Some(0));
        let Parsed::Query(q) = parse(&p, &mut key) else {
            panic!("fast")
        };
        assert_eq!(
            key.key(),
            &b"\x03web\x07default\x03svc\x07cluster\x05local\x00"[..]
        );
        assert_eq!(key.label(1), Some(&b"default"[..]));
        assert_eq!(
            q.edns,
            Some(ClientEdns {
                payload: 4096,
                dnssec_ok: true
            })
        );
        assert_eq!(q.udp_limit(), usize::from(EDNS_PAYLOAD));
        let plain = packet(None);
        let Parsed::Query(q) = parse(&plain, &mut key) else {
            panic!("fast")
        };
        assert_eq!(q.udp_limit(), PLAIN_UDP);
    }

    #[test]
    fn anything_unusual_goes_the_general_way() {
        let mut key = KeyBuf::new();
        assert!(
            matches!(parse(&packet(Some(1)), &mut key), Parsed::Slow),
            "EDNS version 1"
        );
        let mut trailing = packet(None);
        trailing.push(0);
        assert!(matches!(parse(&trailing, &mut key), Parsed::Slow));
        let mut pointer = packet(None)[..12].to_vec();
        pointer.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1]);
        assert!(matches!(parse(&pointer, &mut key), Parsed::Slow));
        let mut cut = packet(None);
        cut.truncate(20);
        assert!(matches!(parse(&cut, &mut key), Parsed::Slow));
        let mut response = packet(None);
        response[2] |= 0x80;
        assert!(matches!(parse(&response, &mut key), Parsed::Drop));
        assert!(matches!(parse(&[0; 11], &mut key), Parsed::Drop));
    }
}
