//! The CRI log line format shared by kubelet and containerd's CRI plugin:
//! `<RFC3339Nano timestamp> <stdout|stderr> <P|F> <content>\n`.
//!
//! Writers split container output on `\n` (a `\r` before it is dropped), cut lines longer
//! than [`MAX_LINE_BYTES`] into `P` (partial) records followed by one `F` (full) record, and
//! write a line still open at end of stream as a `P` record, as containerd's
//! `pkg/cri/io/logger.go` does.

use chrono::{DateTime, FixedOffset, SecondsFormat, Timelike, Utc};

/// Longest content of one record (containerd's default `max_container_log_line_size`).
pub const MAX_LINE_BYTES: usize = 16 * 1024;

/// Which output of the container a record came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }

    fn index(self) -> usize {
        match self {
            Stream::Stdout => 0,
            Stream::Stderr => 1,
        }
    }
}

/// Whether a record ends its line (`F`) or continues on the next record of its stream (`P`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tag {
    Partial,
    Full,
}

impl Tag {
    pub fn as_str(self) -> &'static str {
        match self {
            Tag::Partial => "P",
            Tag::Full => "F",
        }
    }
}

/// A timestamp as Go's `time.RFC3339Nano` prints it (what containerd writes): UTC here,
/// trailing zeros of the fraction trimmed, no fraction at all on a whole second.
pub fn format_rfc3339_nano(t: DateTime<Utc>) -> String {
    let base = t.format("%Y-%m-%dT%H:%M:%S").to_string();
    let nanos = t.nanosecond() % 1_000_000_000;
    if nanos == 0 {
        return format!("{base}Z");
    }
    let frac = format!("{nanos:09}");
    format!("{base}.{}Z", frac.trim_end_matches('0'))
}

/// A timestamp as kubelet prefixes log lines with `timestamps=true` (`RFC3339NanoFixed`:
/// always nine fraction digits, `Z` for UTC).
pub fn format_rfc3339_nano_fixed(t: &DateTime<FixedOffset>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Nanos, true)
}

/// Appends one record, newline included, to `out`.
pub fn append_record(out: &mut Vec<u8>, timestamp: &str, stream: Stream, tag: Tag, content: &[u8]) {
    out.reserve(timestamp.len() + content.len() + 12);
    out.extend_from_slice(timestamp.as_bytes());
    out.push(b' ');
    out.extend_from_slice(stream.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(tag.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(content);
    out.push(b'\n');
}

/// Length of the record [`append_record`] would write.
pub fn record_len(timestamp: &str, stream: Stream, content: &[u8]) -> usize {
    timestamp.len() + stream.as_str().len() + content.len() + 5
}

/// Cuts one stream of container output into records.
#[derive(Debug)]
pub struct LineSplitter {
    pending: Vec<u8>,
    max: usize,
}

impl Default for LineSplitter {
    fn default() -> Self {
        LineSplitter::new(MAX_LINE_BYTES)
    }
}

impl LineSplitter {
    /// `max` is the longest record content (at least 1).
    pub fn new(max: usize) -> Self {
        LineSplitter {
            pending: Vec::new(),
            max: max.max(1),
        }
    }

    /// Bytes of an unfinished line held back until its newline arrives.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Feeds output bytes; `emit` receives every record completed by them.
    pub fn feed(&mut self, mut data: &[u8], emit: &mut impl FnMut(Tag, &[u8])) {
        while !data.is_empty() {
            match data.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    if self.pending.is_empty() {
                        emit_line(&data[..i], self.max, emit);
                    } else {
                        self.pending.extend_from_slice(&data[..i]);
                        let line = std::mem::take(&mut self.pending);
                        emit_line(&line, self.max, emit);
                    }
                    data = &data[i + 1..];
                }
                None => {
                    self.pending.extend_from_slice(data);
                    self.spill(emit);
                    break;
                }
            }
        }
    }

    /// End of stream: an unfinished line is written as a partial record.
    pub fn finish(&mut self, emit: &mut impl FnMut(Tag, &[u8])) {
        if !self.pending.is_empty() {
            let line = std::mem::take(&mut self.pending);
            emit(Tag::Partial, &line);
        }
    }

    /// Writes full-size partial records out of an overlong unfinished line. A trailing `\r`
    /// is kept back: it may be the first half of a `\r\n`.
    fn spill(&mut self, emit: &mut impl FnMut(Tag, &[u8])) {
        let mut start = 0;
        loop {
            let rest = &self.pending[start..];
            let limit = self.max + usize::from(rest.last() == Some(&b'\r'));
            if rest.len() <= limit {
                break;
            }
            emit(Tag::Partial, &rest[..self.max]);
            start += self.max;
        }
        if start > 0 {
            self.pending.drain(..start);
        }
    }
}

fn emit_line(line: &[u8], max: usize, emit: &mut impl FnMut(Tag, &[u8])) {
    let mut line = line.strip_suffix(b"\r").unwrap_or(line);
    while line.len() > max {
        emit(Tag::Partial, &line[..max]);
        line = &line[max..];
    }
    emit(Tag::Full, line);
}

/// One parsed record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CriRecord<'a> {
    pub timestamp: DateTime<FixedOffset>,
    pub stream: Stream,
    pub partial: bool,
    pub content: &'a [u8],
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CriParseError {
    #[error("timestamp is not found")]
    NoTimestamp,
    #[error("unexpected timestamp {0:?}")]
    BadTimestamp(String),
    #[error("stream type is not found")]
    NoStream,
    #[error("unexpected stream type {0:?}")]
    BadStream(String),
    #[error("log tag is not found")]
    NoTag,
}

/// Parses one record, given without its trailing newline, like kubelet's `parseCRILog`
/// (tags may carry `:`-separated extensions after `P`/`F`).
pub fn parse_record(line: &[u8]) -> Result<CriRecord<'_>, CriParseError> {
    let (ts, rest) = split_field(line).ok_or(CriParseError::NoTimestamp)?;
    let ts = std::str::from_utf8(ts)
        .ok()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .ok_or_else(|| CriParseError::BadTimestamp(String::from_utf8_lossy(ts).into_owned()))?;
    let (stream, rest) = split_field(rest).ok_or(CriParseError::NoStream)?;
    let stream = match stream {
        b"stdout" => Stream::Stdout,
        b"stderr" => Stream::Stderr,
        other => {
            return Err(CriParseError::BadStream(
                String::from_utf8_lossy(other).into_owned(),
            ))
        }
    };
    let (tag, content) = split_field(rest).ok_or(CriParseError::NoTag)?;
    let partial = tag.split(|&b| b == b':').next() == Some(b"P");
    Ok(CriRecord {
        timestamp: ts,
        stream,
        partial,
        content,
    })
}

fn split_field(s: &[u8]) -> Option<(&[u8], &[u8])> {
    let i = s.iter().position(|&b| b == b' ')?;
    Some((&s[..i], &s[i + 1..]))
}

/// Joins partial records back into lines, per stream.
#[derive(Debug, Default)]
pub struct LineJoiner {
    pending: [Option<PendingLine>; 2],
    sequence: u64,
}

#[derive(Debug)]
struct PendingLine {
    timestamp: DateTime<FixedOffset>,
    content: Vec<u8>,
    sequence: u64,
}

/// A whole line of container output (or, at the very end, an unfinished one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// When its first record was written.
    pub timestamp: DateTime<FixedOffset>,
    pub stream: Stream,
    pub content: Vec<u8>,
    /// False for a line cut off by the end of the stream (no newline is printed after it).
    pub complete: bool,
}

impl LineJoiner {
    /// Adds one record; returns the line it completes, if any.
    pub fn push(&mut self, record: &CriRecord<'_>) -> Option<LogLine> {
        let slot = &mut self.pending[record.stream.index()];
        if record.partial {
            match slot {
                Some(p) => p.content.extend_from_slice(record.content),
                None => {
                    self.sequence += 1;
                    *slot = Some(PendingLine {
                        timestamp: record.timestamp,
                        content: record.content.to_vec(),
                        sequence: self.sequence,
                    });
                }
            }
            return None;
        }
        Some(match slot.take() {
            Some(mut p) => {
                p.content.extend_from_slice(record.content);
                LogLine {
                    timestamp: p.timestamp,
                    stream: record.stream,
                    content: p.content,
                    complete: true,
                }
            }
            None => LogLine {
                timestamp: record.timestamp,
                stream: record.stream,
                content: record.content.to_vec(),
                complete: true,
            },
        })
    }

    /// The unfinished lines, oldest first, as incomplete lines; the joiner is left empty.
    pub fn take_unfinished(&mut self) -> Vec<LogLine> {
        let mut out: Vec<(u64, LogLine)> = Vec::new();
        for (i, slot) in self.pending.iter_mut().enumerate() {
            if let Some(p) = slot.take() {
                let stream = if i == 0 {
                    Stream::Stdout
                } else {
                    Stream::Stderr
                };
                out.push((
                    p.sequence,
                    LogLine {
                        timestamp: p.timestamp,
                        stream,
                        content: p.content,
                        complete: false,
                    },
                ));
            }
        }
        out.sort_by_key(|(seq, _)| *seq);
        out.into_iter().map(|(_, l)| l).collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use chrono::TimeZone;

    fn split(max: usize, chunks: &[&[u8]], eof: bool) -> Vec<(Tag, Vec<u8>)> {
        let mut s = LineSplitter::new(max);
        let mut out = Vec::new();
        let mut emit = |t: Tag, c: &[u8]| out.push((t, c.to_vec()));
        for c in chunks {
            s.feed(c, &mut emit);
        }
        if eof {
            s.finish(&mut emit);
        }
        out
    }

    fn f(s: &str) -> (Tag, Vec<u8>) {
        (Tag::Full, s.as_bytes().to_vec())
    }
    fn p(s: &str) -> (Tag, Vec<u8>) {
        (Tag::Partial, s.as_bytes().to_vec())
    }

    #[test]
    fn go_rfc3339_nano_trims_zeros() {
        let t = Utc.with_ymd_and_hms(2024, 5, 6, 7, 8, 9).unwrap();
        assert_eq!(format_rfc3339_nano(t), "2024-05-06T07:08:09Z");
        let t2 = t + chrono::Duration::nanoseconds(120_000_000);
        assert_eq!(format_rfc3339_nano(t2), "2024-05-06T07:08:09.12Z");
        let t3 = t + chrono::Duration::nanoseconds(1);
        assert_eq!(format_rfc3339_nano(t3), "2024-05-06T07:08:09.000000001Z");
        let fixed = DateTime::parse_from_rfc3339("2024-05-06T07:08:09.12Z").unwrap();
        assert_eq!(
            format_rfc3339_nano_fixed(&fixed),
            "2024-05-06T07:08:09.120000000Z"
        );
        let offset = DateTime::parse_from_rfc3339("2024-05-06T07:08:09.5+02:00").unwrap();
        assert_eq!(
            format_rfc3339_nano_fixed(&offset),
            "2024-05-06T07:08:09.500000000+02:00"
        );
    }

    #[test]
    fn splits_lines_and_strips_crlf() {
        assert_eq!(
            split(16, &[b"a\nbb\r\n\nc"], true),
            vec![f("a"), f("bb"), f(""), p("c")]
        );
        // A line arriving in pieces is one record.
        assert_eq!(split(16, &[b"he", b"llo", b"\n"], false), vec![f("hello")]);
        // A lone \r inside a line is content.
        assert_eq!(split(16, &[b"a\rb\n"], false), vec![f("a\rb")]);
    }

    #[test]
    fn long_lines_become_partial_records() {
        // Exactly max: one full record; max+1: a partial of max, then the rest.
        assert_eq!(split(4, &[b"abcd\n"], false), vec![f("abcd")]);
        assert_eq!(split(4, &[b"abcde\n"], false), vec![p("abcd"), f("e")]);
        assert_eq!(
            split(4, &[b"abcdefghij\n"], false),
            vec![p("abcd"), p("efgh"), f("ij")]
        );
        // Same when the line arrives byte by byte.
        let bytes: Vec<&[u8]> = b"abcdefghij\n".chunks(1).collect();
        assert_eq!(split(4, &bytes, false), vec![p("abcd"), p("efgh"), f("ij")]);
        // A \r\n straddling the limit is still a line end.
        assert_eq!(split(4, &[b"abcd\r", b"\n"], false), vec![f("abcd")]);
        // An unfinished overlong line at EOF: partials all the way.
        assert_eq!(split(4, &[b"abcdef"], true), vec![p("abcd"), p("ef")]);
    }

    #[test]
    fn parses_records() {
        let r = parse_record(b"2016-10-06T00:17:09.669794202Z stdout P log content 1").unwrap();
        assert_eq!(r.stream, Stream::Stdout);
        assert!(r.partial);
        assert_eq!(r.content, b"log content 1");
        let r = parse_record(b"2016-10-06T00:17:09.669794203Z stderr F:x ").unwrap();
        assert!(!r.partial);
        assert_eq!(r.content, b"");
        assert_eq!(
            parse_record(b"2016-10-06T00:17:09Z stdin F x"),
            Err(CriParseError::BadStream("stdin".into()))
        );
        assert_eq!(parse_record(b"garbage"), Err(CriParseError::NoTimestamp));
        assert!(matches!(
            parse_record(b"yesterday stdout F x"),
            Err(CriParseError::BadTimestamp(_))
        ));
        assert_eq!(
            parse_record(b"2016-10-06T00:17:09Z stdout"),
            Err(CriParseError::NoStream)
        );
        assert_eq!(
            parse_record(b"2016-10-06T00:17:09Z stdout F"),
            Err(CriParseError::NoTag)
        );
    }

    #[test]
    fn joins_partials_per_stream() {
        let mut j = LineJoiner::default();
        let recs = [
            "2024-01-01T00:00:01Z stdout P ab",
            "2024-01-01T00:00:02Z stderr F err",
            "2024-01-01T00:00:03Z stdout P cd",
            "2024-01-01T00:00:04Z stdout F ef",
            "2024-01-01T00:00:05Z stderr P tail",
        ];
        let mut lines = Vec::new();
        for r in recs {
            if let Some(l) = j.push(&parse_record(r.as_bytes()).unwrap()) {
                lines.push(l);
            }
        }
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].content, b"err");
        assert_eq!(lines[1].content, b"abcdef");
        assert_eq!(
            lines[1].timestamp,
            DateTime::parse_from_rfc3339("2024-01-01T00:00:01Z").unwrap()
        );
        let rest = j.take_unfinished();
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].content, b"tail");
        assert!(!rest[0].complete);
    }
}
