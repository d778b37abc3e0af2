//! Splitting a byte stream into messages: newline framing, and RFC 6587 octet counting.
//!
//! One [`Framer`] per connection or file keeps the bytes of a message that has not fully arrived.
//! Its buffer is allocated once; a message longer than `dataplane.max_line_bytes` is cut there,
//! flagged as truncated, and the rest of it is skipped, so a hostile peer can neither grow memory
//! nor hide the start of an oversized line.

use std::io::{self, Read};
use std::ops::Range;

/// How messages are delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// One message per line (JSON lines, files).
    Newline,
    /// Syslog over TCP: each message is either octet-counted (`LEN SP MSG`) or newline-terminated,
    /// decided per message by its first byte (a digit starts an octet count).
    Syslog,
}

/// One framed message: where it is in the framer's buffer, and whether it was cut.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Byte range in [`Framer::buffer`].
    pub range: Range<usize>,
    /// The message was longer than the limit and was cut.
    pub truncated: bool,
}

/// The per-stream framing state.
pub struct Framer {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    max_line: usize,
    framing: Framing,
    /// Bytes still to discard of an oversized message.
    skip: usize,
    /// Discard up to the next newline (an oversized newline-framed message).
    skip_to_newline: bool,
    /// Bytes fully dealt with (framed or discarded) since creation: a file's resume offset.
    consumed: u64,
}

impl Framer {
    /// A framer for messages of at most `max_line` bytes.
    pub fn new(framing: Framing, max_line: usize) -> Framer {
        Framer {
            buf: vec![0; max_line + (64 << 10)],
            start: 0,
            end: 0,
            max_line,
            framing,
            skip: 0,
            skip_to_newline: false,
            consumed: 0,
        }
    }

    /// The buffer frames point into.
    pub fn buffer(&self) -> &[u8] {
        &self.buf
    }

    /// Bytes consumed so far (framed or skipped).
    pub fn consumed(&self) -> u64 {
        self.consumed
    }

    /// Bytes buffered but not yet framed.
    #[cfg(test)]
    pub fn pending(&self) -> usize {
        self.end - self.start
    }

    /// Reads once from `reader` into free space; `Ok(0)` is end of stream.
    pub fn read_from(&mut self, reader: &mut impl Read) -> io::Result<usize> {
        if self.start > 0 && (self.end == self.buf.len() || self.start == self.end) {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            // Cannot happen: a full buffer always holds a frame or an oversized message to cut.
            return Err(io::Error::other("framer buffer full"));
        }
        let n = reader.read(&mut self.buf[self.end..])?;
        self.end += n;
        Ok(n)
    }

    /// Appends bytes directly (tests). Returns how many fitted.
    #[cfg(test)]
    pub fn feed(&mut self, bytes: &[u8]) -> usize {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let n = bytes.len().min(self.buf.len() - self.end);
        self.buf[self.end..self.end + n].copy_from_slice(&bytes[..n]);
        self.end += n;
        n
    }

    /// The next complete message, if one is buffered. Empty lines are skipped.
    pub fn next_frame(&mut self) -> Option<Frame> {
        loop {
            if self.skip > 0 {
                let n = self.skip.min(self.end - self.start);
                self.start += n;
                self.skip -= n;
                self.consumed += n as u64;
                if self.skip > 0 {
                    return None;
                }
            }
            let avail = &self.buf[self.start..self.end];
            if avail.is_empty() {
                return None;
            }
            if self.skip_to_newline {
                match memchr::memchr(b'\n', avail) {
                    Some(i) => {
                        self.start += i + 1;
                        self.consumed += i as u64 + 1;
                        self.skip_to_newline = false;
                        continue;
                    }
                    None => {
                        self.consumed += avail.len() as u64;
                        self.start = self.end;
                        return None;
                    }
                }
            }
            if self.framing == Framing::Syslog
                && avail[0].is_ascii_digit()
                && avail[0] != b'0'
                && let Some(f) = self.octet_frame()
            {
                match f {
                    OctetFrame::Need => return None,
                    OctetFrame::Frame(fr) => return Some(fr),
                }
            }
            let avail = &self.buf[self.start..self.end];
            match memchr::memchr(b'\n', avail) {
                Some(i) => {
                    let s = self.start;
                    self.start += i + 1;
                    self.consumed += i as u64 + 1;
                    let mut e = s + i;
                    if e > s && self.buf[e - 1] == b'\r' {
                        e -= 1;
                    }
                    if e - s > self.max_line {
                        return Some(Frame {
                            range: s..s + self.max_line,
                            truncated: true,
                        });
                    }
                    if self.buf[s..e].iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    return Some(Frame {
                        range: s..e,
                        truncated: false,
                    });
                }
                None if avail.len() > self.max_line => {
                    let s = self.start;
                    self.start = self.end;
                    self.consumed += avail.len() as u64;
                    self.skip_to_newline = true;
                    return Some(Frame {
                        range: s..s + self.max_line,
                        truncated: true,
                    });
                }
                None => return None,
            }
        }
    }

    fn octet_frame(&mut self) -> Option<OctetFrame> {
        let avail = &self.buf[self.start..self.end];
        let mut len: usize = 0;
        let mut i = 0;
        while i < avail.len() && i < 10 && avail[i].is_ascii_digit() {
            len = len * 10 + usize::from(avail[i] - b'0');
            i += 1;
        }
        if i == avail.len() {
            return Some(OctetFrame::Need);
        }
        if avail[i] != b' ' {
            return None; // not an octet count: newline framing
        }
        let header = i + 1;
        let take = len.min(self.max_line);
        if avail.len() < header + take {
            return Some(OctetFrame::Need);
        }
        let s = self.start + header;
        self.start += header + take;
        self.consumed += (header + take) as u64;
        self.skip = len - take;
        let mut e = s + take;
        while e > s && matches!(self.buf[e - 1], b'\n' | b'\r') {
            e -= 1;
        }
        Some(OctetFrame::Frame(Frame {
            range: s..e,
            truncated: len > take,
        }))
    }

    /// At end of stream: whatever is left becomes a final message (a sender that closes without
    /// a trailing newline still had its last line accepted).
    pub fn finish(&mut self) -> Option<Frame> {
        if self.skip > 0 || self.skip_to_newline {
            self.consumed += (self.end - self.start) as u64;
            self.start = self.end;
            return None;
        }
        let s = self.start;
        let mut e = self.end;
        self.consumed += (e - s) as u64;
        self.start = self.end;
        while e > s && matches!(self.buf[e - 1], b'\n' | b'\r') {
            e -= 1;
        }
        if self.buf[s..e].iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        let truncated = e - s > self.max_line;
        Some(Frame {
            range: s..s + (e - s).min(self.max_line),
            truncated,
        })
    }
}

enum OctetFrame {
    Need,
    Frame(Frame),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(framing: Framing, max: usize, chunks: &[&[u8]]) -> Vec<(String, bool)> {
        let mut f = Framer::new(framing, max);
        let mut out = Vec::new();
        for c in chunks {
            let mut r: &[u8] = c;
            while !r.is_empty() {
                let n = f.read_from(&mut r).unwrap();
                assert!(n > 0);
                while let Some(fr) = f.next_frame() {
                    out.push((
                        String::from_utf8_lossy(&f.buffer()[fr.range]).into_owned(),
                        fr.truncated,
                    ));
                }
            }
        }
        if let Some(fr) = f.finish() {
            out.push((
                String::from_utf8_lossy(&f.buffer()[fr.range]).into_owned(),
                fr.truncated,
            ));
        }
        out
    }

    #[test]
    fn newline_frames_across_reads_and_final_partial_line() {
        let got = frames(Framing::Newline, 1024, &[b"a\r\nb", b"c\n\n  \nd"]);
        assert_eq!(
            got,
            vec![
                ("a".into(), false),
                ("bc".into(), false),
                ("d".into(), false)
            ]
        );
    }

    #[test]
    fn octet_counting_and_newline_mixed() {
        let got = frames(
            Framing::Syslog,
            1024,
            &[b"11 <13>hello w", b"orld<14>plain\n5 <1>x\n"],
        );
        assert_eq!(
            got,
            vec![
                ("<13>hello w".into(), false),
                ("orld<14>plain".into(), false),
                ("<1>x".into(), false)
            ]
        );
    }

    #[test]
    fn oversized_lines_are_cut_and_the_rest_skipped() {
        let mut big = vec![b'x'; 5000];
        big.push(b'\n');
        big.extend_from_slice(b"next\n");
        let got = frames(Framing::Newline, 256, &[&big[..3000], &big[3000..]]);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].0.len(), 256);
        assert!(got[0].1);
        assert_eq!(got[1], ("next".into(), false));
    }

    #[test]
    fn oversized_octet_frames_are_cut_and_skipped() {
        let mut msg = b"600 ".to_vec();
        msg.extend(std::iter::repeat_n(b'y', 600));
        msg.extend_from_slice(b"3 abc");
        let got = frames(Framing::Syslog, 256, &[&msg]);
        assert_eq!(got.len(), 2);
        assert!(got[0].1 && got[0].0.len() == 256);
        assert_eq!(got[1], ("abc".into(), false));
    }

    #[test]
    fn consumed_counts_every_byte_of_complete_frames_only() {
        let mut f = Framer::new(Framing::Newline, 64);
        f.feed(b"one\ntwo\nthr");
        while f.next_frame().is_some() {}
        assert_eq!(f.consumed(), 8);
        assert_eq!(f.pending(), 3);
    }
}
