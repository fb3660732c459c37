//! The general path, on hickory's `Message`: queries the fast path of [`crate::wire`]
//! leaves (odd shapes, pod names, ExternalName CNAMEs, other classes) and everything that
//! is forwarded. Undecodable queries get FORMERR when their header can be read, nothing
//! otherwise; responses are never answered.

use std::iter;

use hickory_proto::op::{
    emit_message_parts, Message, MessageType, Metadata, OpCode, Query, ResponseCode,
};
use hickory_proto::rr::{DNSClass, Name, Record};
use hickory_proto::serialize::binary::BinEncoder;
use tokio::sync::OwnedSemaphorePermit;
use tracing::debug;

use crate::forward::{cache_key, Forwarder};
use crate::records::{Answer, ClusterZone};
use crate::wire::{ClientEdns, EDNS_PAYLOAD, PLAIN_UDP};

/// What to do with a packet.
pub(crate) enum Outcome {
    /// The response is in the output buffer.
    Reply,
    Drop,
    /// Wait for an upstream; the job writes the response.
    Forward(Box<ForwardJob>),
}

/// What a response needs from its query.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    metadata: Metadata,
    query: Query,
    edns: Option<ClientEdns>,
    /// Most bytes the response may take.
    limit: usize,
}

/// A query waiting for an upstream.
pub(crate) struct ForwardJob {
    request: Request,
    /// An ExternalName CNAME chain to complete with the upstream's answer for its target.
    chase: Option<(Vec<Record>, Name)>,
    _slot: OwnedSemaphorePermit,
}

impl Request {
    fn new(m: &Message, query: Query, tcp: bool) -> Request {
        let edns = m.edns.as_ref().map(|e| ClientEdns {
            payload: e.max_payload(),
            dnssec_ok: e.flags().dnssec_ok,
        });
        let limit = match (tcp, edns) {
            (true, _) => usize::from(u16::MAX),
            (false, Some(e)) => usize::from(e.payload.min(EDNS_PAYLOAD)).max(PLAIN_UDP),
            (false, None) => PLAIN_UDP,
        };
        Request {
            metadata: m.metadata,
            query,
            edns,
            limit,
        }
    }

    fn dnssec_ok(&self) -> bool {
        self.edns.is_some_and(|e| e.dnssec_ok)
    }

    fn response(&self, rcode: ResponseCode, authoritative: bool) -> Metadata {
        let mut md = Metadata::response_from_request(&self.metadata);
        md.recursion_available = true;
        md.authoritative = authoritative;
        md.response_code = rcode;
        md
    }

    /// Encodes a response within the size limit (hickory sets TC when records are left
    /// out), the OPT record added after, so truncation never drops it.
    fn encode(&self, md: Metadata, sections: [&[Record]; 3], out: &mut Vec<u8>) -> bool {
        out.clear();
        let opt_len = if self.edns.is_some() { 11 } else { 0 };
        let mut low = md;
        low.response_code = ResponseCode::from_low(md.response_code.low());
        let mut enc = BinEncoder::new(out);
        let max = self
            .limit
            .saturating_sub(opt_len)
            .min(usize::from(u16::MAX));
        enc.set_max_size(u16::try_from(max).unwrap_or(u16::MAX));
        let [answers, authorities, additionals] = sections;
        let emitted = emit_message_parts(
            &low,
            &mut iter::once(&self.query),
            &mut answers.iter(),
            &mut authorities.iter(),
            &mut additionals.iter(),
            None,
            None,
            &mut enc,
        );
        if let Err(e) = emitted {
            debug!(error = %e, name = %self.query.name(), "response not encodable");
            return false;
        }
        if let Some(edns) = self.edns {
            let count = u16::from_be_bytes([out[10], out[11]]).saturating_add(1);
            out[10..12].copy_from_slice(&count.to_be_bytes());
            out.extend_from_slice(&[0, 0, 41]);
            out.extend_from_slice(&EDNS_PAYLOAD.to_be_bytes());
            out.push(md.response_code.high());
            out.extend_from_slice(&[0, if edns.dnssec_ok { 0x80 } else { 0 }, 0, 0, 0]);
        }
        true
    }

    fn error(&self, rcode: ResponseCode, out: &mut Vec<u8>) -> Outcome {
        let md = self.response(rcode, false);
        if self.encode(md, [&[], &[], &[]], out) {
            Outcome::Reply
        } else {
            Outcome::Drop
        }
    }

    /// An upstream's answer, as it came (TTLs aside), under our header flags.
    fn relay(&self, upstream: &Message, out: &mut Vec<u8>) -> bool {
        let mut md = self.response(upstream.response_code, upstream.authoritative);
        md.authentic_data = upstream.authentic_data;
        let sections = [
            &upstream.answers[..],
            &upstream.authorities,
            &upstream.additionals,
        ];
        self.encode(md, sections, out)
    }
}

/// FORMERR for a query whose header is readable and nothing else is.
fn format_error(packet: &[u8], out: &mut Vec<u8>) -> Outcome {
    if packet.len() < 12 || packet[2] & 0x80 != 0 {
        return Outcome::Drop;
    }
    out.clear();
    out.extend_from_slice(&packet[..2]);
    out.push(0x80 | (packet[2] & 0x79));
    out.push(0x80 | ResponseCode::FormErr.low());
    out.extend_from_slice(&[0; 8]);
    Outcome::Reply
}

/// The general path for one packet.
pub(crate) fn handle(
    zone: &ClusterZone,
    forwarder: &Forwarder,
    packet: &[u8],
    tcp: bool,
    out: &mut Vec<u8>,
) -> Outcome {
    let m = match Message::from_vec(packet) {
        Ok(m) => m,
        Err(_) => return format_error(packet, out),
    };
    if m.metadata.message_type == MessageType::Response {
        return Outcome::Drop;
    }
    let Some(query) = m.queries.first().cloned() else {
        return format_error(packet, out);
    };
    let request = Request::new(&m, query, tcp);
    if m.metadata.op_code != OpCode::Query {
        return request.error(ResponseCode::NotImp, out);
    }
    if m.queries.len() != 1 {
        return request.error(ResponseCode::FormErr, out);
    }
    if m.edns.as_ref().is_some_and(|e| e.version() != 0) {
        return request.error(ResponseCode::BADVERS, out);
    }
    answer(zone, forwarder, request, out)
}

fn answer(
    zone: &ClusterZone,
    forwarder: &Forwarder,
    request: Request,
    out: &mut Vec<u8>,
) -> Outcome {
    let name = request.query.name();
    if request.query.query_class() != DNSClass::IN {
        if zone.contains(name) {
            return request.error(ResponseCode::Refused, out);
        }
        return forward(forwarder, request, None, out);
    }
    let soa = std::slice::from_ref(zone.soa());
    let (md, sections) = match zone.answer(name, request.query.query_type()) {
        Answer::Records(reply) => {
            if let Some(target) = reply.resolve_upstream {
                return forward(forwarder, request, Some((reply.answers, target)), out);
            }
            let md = request.response(ResponseCode::NoError, true);
            return match request.encode(md, [&reply.answers, &[], &reply.additionals], out) {
                true => Outcome::Reply,
                false => Outcome::Drop,
            };
        }
        Answer::NoData => (
            request.response(ResponseCode::NoError, true),
            [&[][..], soa, &[]],
        ),
        Answer::NxDomain if !zone.is_synced() => return request.error(ResponseCode::ServFail, out),
        Answer::NxDomain => (
            request.response(ResponseCode::NXDomain, true),
            [&[][..], soa, &[]],
        ),
        Answer::Refused => return request.error(ResponseCode::Refused, out),
        Answer::NotOurs => return forward(forwarder, request, None, out),
    };
    match request.encode(md, sections, out) {
        true => Outcome::Reply,
        false => Outcome::Drop,
    }
}

/// From the cache when it can; else a job, if there is room for one.
fn forward(
    forwarder: &Forwarder,
    request: Request,
    chase: Option<(Vec<Record>, Name)>,
    out: &mut Vec<u8>,
) -> Outcome {
    if chase.is_none() {
        let key = cache_key(
            &request.query,
            request.dnssec_ok(),
            request.metadata.checking_disabled,
        );
        if let Some(cached) = forwarder.cached(&key) {
            return match request.relay(&cached, out) {
                true => Outcome::Reply,
                false => Outcome::Drop,
            };
        }
    }
    match forwarder.try_slot() {
        Some(slot) => Outcome::Forward(Box::new(ForwardJob {
            request,
            chase,
            _slot: slot,
        })),
        None => request.error(ResponseCode::Refused, out),
    }
}

impl ForwardJob {
    /// Asks upstream and writes the response into `out` (false: nothing to send).
    pub(crate) async fn run(self, forwarder: &Forwarder, out: &mut Vec<u8>) -> bool {
        let r = &self.request;
        let cd = r.metadata.checking_disabled;
        match self.chase {
            None => match forwarder.resolve(&r.query, r.dnssec_ok(), cd).await {
                Ok(m) => r.relay(&m, out),
                Err(e) => {
                    debug!(error = %e, name = %r.query.name(), "forwarding failed");
                    matches!(r.error(ResponseCode::ServFail, out), Outcome::Reply)
                }
            },
            Some((mut answers, target)) => {
                let mut query = Query::query(target, r.query.query_type());
                query.set_query_class(DNSClass::IN);
                let (mut rcode, mut authorities) = (ResponseCode::NoError, Vec::new());
                match forwarder.resolve(&query, r.dnssec_ok(), cd).await {
                    Ok(m) => {
                        if m.response_code == ResponseCode::NXDomain {
                            rcode = m.response_code;
                        }
                        if m.answers.is_empty() {
                            authorities = m.authorities;
                        }
                        answers.extend(m.answers);
                    }
                    // The CNAME alone still tells the client where to look.
                    Err(e) => debug!(error = %e, target = %query.name(), "chasing CNAME failed"),
                }
                let md = r.response(rcode, true);
                r.encode(md, [&answers, &authorities, &[]], out)
            }
        }
    }
}
