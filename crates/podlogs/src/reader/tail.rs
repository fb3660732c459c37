//! Reading a log backwards: where the last N lines start (`tailLines`).

use super::*;

/// A position in the list of segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Pos {
    pub(super) segment: usize,
    pub(super) offset: u64,
}

/// Lines of a file from the last complete one backwards, with their start offsets.
pub(super) struct BackLines<'a> {
    file: &'a File,
    /// File offset of `buf[0]`.
    pos: u64,
    buf: Vec<u8>,
    trimmed: bool,
}

impl<'a> BackLines<'a> {
    pub(super) fn new(file: &'a File, len: u64) -> Self {
        BackLines {
            file,
            pos: len,
            buf: Vec::new(),
            trimmed: false,
        }
    }

    fn fill(&mut self) -> std::io::Result<bool> {
        if self.pos == 0 {
            return Ok(false);
        }
        let n = self.pos.min(BACK_BLOCK);
        self.pos -= n;
        let mut block = vec![0u8; n as usize];
        self.file.read_exact_at(&mut block, self.pos)?;
        block.extend_from_slice(&self.buf);
        self.buf = block;
        Ok(true)
    }

    pub(super) fn next_line(&mut self) -> std::io::Result<Option<(u64, Vec<u8>)>> {
        if !self.trimmed {
            // Bytes after the last newline are a record still being written: not a line yet.
            loop {
                if let Some(i) = self.buf.iter().rposition(|&b| b == b'\n') {
                    self.buf.truncate(i + 1);
                    break;
                }
                self.buf.clear();
                if !self.fill()? {
                    self.trimmed = true;
                    return Ok(None);
                }
            }
            self.trimmed = true;
        }
        loop {
            if self.buf.is_empty() {
                if !self.fill()? {
                    return Ok(None);
                }
                continue;
            }
            let body_end = self.buf.len() - 1;
            match self.buf[..body_end].iter().rposition(|&b| b == b'\n') {
                Some(i) => {
                    let line = self.buf[i + 1..body_end].to_vec();
                    let start = self.pos + i as u64 + 1;
                    self.buf.truncate(i + 1);
                    return Ok(Some((start, line)));
                }
                None if self.pos == 0 => {
                    let line = self.buf[..body_end].to_vec();
                    self.buf.clear();
                    return Ok(Some((0, line)));
                }
                None => {
                    self.fill()?;
                }
            }
        }
    }
}

/// Where to start reading so that the last `n` lines are complete: just after the
/// (n+1)-th last full record, moved back to the start of the other stream's line if that
/// one is still open there.
pub(super) fn tail_start(segments: &[Segment], n: u64) -> std::io::Result<Pos> {
    let want = n.saturating_add(1);
    let mut count = 0u64;
    let mut boundary = None;
    let mut extended: Option<Pos> = None;
    let mut scanned = 0u64;
    // Streams met so far (from the end): a stream's last record being partial is a line
    // still unfinished, shown last and counted like any other.
    let mut seen = [false; 2];
    for (index, segment) in segments.iter().enumerate().rev() {
        let len = segment.file.metadata()?.len();
        let mut back = BackLines::new(&segment.file, len);
        while let Some((start, line)) = back.next_line()? {
            let Ok(record) = parse_record(&line) else {
                continue;
            };
            let slot = usize::from(record.stream == OutputStream::Stderr);
            let unfinished = record.partial && !seen[slot];
            seen[slot] = true;
            match boundary {
                None => {
                    if unfinished {
                        count += 1;
                    } else if !record.partial {
                        count += 1;
                        if count >= want {
                            let pos = Pos {
                                segment: index,
                                offset: start + line.len() as u64 + 1,
                            };
                            boundary = Some((pos, record.stream));
                        }
                    }
                }
                Some((pos, stream)) => {
                    scanned += line.len() as u64 + 1;
                    if record.stream != stream && !record.partial {
                        return Ok(extended.unwrap_or(pos));
                    }
                    if record.stream != stream {
                        extended = Some(Pos {
                            segment: index,
                            offset: start,
                        });
                    }
                    if scanned > EXTEND_LIMIT {
                        return Ok(extended.unwrap_or(pos));
                    }
                }
            }
        }
    }
    Ok(match boundary {
        None => Pos {
            segment: 0,
            offset: 0,
        },
        Some((pos, _)) => extended.unwrap_or(pos),
    })
}
