//! RELP frames (the Reliable Event Logging Protocol of rsyslog's `omrelp` and `imrelp`):
//! `TXNR SP COMMAND SP DATALEN [SP DATA] LF`.
//!
//! A transaction number is 1 to 999,999,999, a command 1 to 32 ASCII letters, a data length
//! decimal; the data is opaque bytes of exactly that length. The parser takes a buffer that may
//! hold part of a frame, one frame or many, and says which: the input reads into one buffer per
//! connection and takes frames off its front.

/// Longest command name (`serverclose` is the longest the protocol defines).
const MAX_COMMAND: usize = 32;
/// Digits of a transaction number (999,999,999 at most).
const MAX_TXNR_DIGITS: usize = 9;
/// Digits of a data length the parser reads before refusing it.
const MAX_LEN_DIGITS: usize = 10;

/// One frame, borrowed from the buffer it was read into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Transaction number, echoed by the answer.
    pub txnr: u32,
    /// `open`, `syslog`, `close`, ...
    pub command: &'a str,
    /// The data (empty when the length is 0).
    pub data: &'a [u8],
}

/// Why a buffer does not start with a frame. The session cannot go on after any of these: RELP
/// has no way to find the next frame after a broken one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The transaction number is missing, not decimal, 0 or too long.
    #[error("bad transaction number")]
    Txnr,
    /// The command is missing, too long or not letters.
    #[error("bad command")]
    Command,
    /// The data length is missing or not decimal.
    #[error("bad data length")]
    Length,
    /// The data length is over the limit this session reads.
    #[error("a frame of {0} bytes, over the {1} bytes this input reads")]
    TooLarge(u64, usize),
    /// The frame does not end with LF where its length says it ends.
    #[error("no line feed after the frame's data")]
    Trailer,
}

/// What the front of a buffer holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// A whole frame, and the bytes it took.
    Frame(Frame<'a>, usize),
    /// Not a whole frame yet: read more.
    Partial,
}

/// Reads the frame at the front of `buf`; `max_data` bounds the data length accepted (a longer
/// one is an error as soon as its length is read, before its data arrives).
pub fn parse(buf: &[u8], max_data: usize) -> Result<Parsed<'_>, FrameError> {
    let mut at = 0;
    let Some((txnr, next)) = field(buf, at, MAX_TXNR_DIGITS, FrameError::Txnr)? else {
        return Ok(Parsed::Partial);
    };
    if !txnr.iter().all(u8::is_ascii_digit) {
        return Err(FrameError::Txnr);
    }
    let txnr = decimal(txnr).ok_or(FrameError::Txnr)?;
    if txnr == 0 || txnr > 999_999_999 {
        return Err(FrameError::Txnr);
    }
    at = next;
    let Some((command, next)) = field(buf, at, MAX_COMMAND, FrameError::Command)? else {
        return Ok(Parsed::Partial);
    };
    if !command.iter().all(u8::is_ascii_alphabetic) {
        return Err(FrameError::Command);
    }
    let command = std::str::from_utf8(command).map_err(|_| FrameError::Command)?;
    at = next;
    // The length ends at SP (data follows) or LF (no data, length 0).
    let rest = &buf[at..];
    let end = rest
        .iter()
        .take(MAX_LEN_DIGITS + 1)
        .position(|&b| b == b' ' || b == b'\n');
    let Some(end) = end else {
        return if rest.len() > MAX_LEN_DIGITS {
            Err(FrameError::Length)
        } else if rest.iter().all(u8::is_ascii_digit) {
            Ok(Parsed::Partial)
        } else {
            Err(FrameError::Length)
        };
    };
    let digits = &rest[..end];
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(FrameError::Length);
    }
    let len = decimal(digits).ok_or(FrameError::Length)?;
    if len > max_data as u64 {
        return Err(FrameError::TooLarge(len, max_data));
    }
    let len = len as usize;
    at += end;
    if rest[end] == b'\n' {
        if len != 0 {
            return Err(FrameError::Trailer);
        }
        return Ok(Parsed::Frame(
            Frame {
                txnr: txnr as u32,
                command,
                data: &[],
            },
            at + 1,
        ));
    }
    // SP, the data, LF.
    let data_start = at + 1;
    let data_end = data_start + len;
    if buf.len() <= data_end {
        return Ok(Parsed::Partial);
    }
    if buf[data_end] != b'\n' {
        return Err(FrameError::Trailer);
    }
    Ok(Parsed::Frame(
        Frame {
            txnr: txnr as u32,
            command,
            data: &buf[data_start..data_end],
        },
        data_end + 1,
    ))
}

/// The field at `at` up to the next SP: `None` when the buffer ends first (and the field is not
/// over its limit yet).
fn field(
    buf: &[u8],
    at: usize,
    max: usize,
    error: FrameError,
) -> Result<Option<(&[u8], usize)>, FrameError> {
    let rest = buf.get(at..).unwrap_or_default();
    match rest.iter().take(max + 1).position(|&b| b == b' ') {
        Some(0) => Err(error),
        Some(end) => Ok(Some((&rest[..end], at + end + 1))),
        None if rest.len() > max => Err(error),
        None if rest.contains(&b'\n') => Err(error),
        None => Ok(None),
    }
}

fn decimal(digits: &[u8]) -> Option<u64> {
    digits.iter().try_fold(0u64, |n, &d| {
        n.checked_mul(10)?
            .checked_add(u64::from(d.checked_sub(b'0')?))
    })
}

/// Appends the answer to transaction `txnr`: `TXNR rsp LEN CODE SP TEXT[LF EXTRA] LF`.
pub fn write_rsp(out: &mut Vec<u8>, txnr: u32, code: u16, text: &str, extra: &str) {
    let mut data = format!("{code} {text}");
    if !extra.is_empty() {
        data.push('\n');
        data.push_str(extra);
    }
    out.extend_from_slice(format!("{txnr} rsp {} {data}\n", data.len()).as_bytes());
}

/// Appends the server's notice that it closes the session (transaction number 0).
pub fn write_serverclose(out: &mut Vec<u8>) {
    out.extend_from_slice(b"0 serverclose 0\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_with_and_without_data_parse_and_say_how_long_they_are() {
        let offers = "relp_version=0\nrelp_software=librelp,1.2.13,http://librelp.adiscon.com\ncommands=syslog";
        let open = format!("1 open {} {offers}\n", offers.len());
        let Ok(Parsed::Frame(f, used)) = parse(open.as_bytes(), 1024) else {
            panic!()
        };
        assert_eq!(
            (f.txnr, f.command, f.data, used),
            (1, "open", offers.as_bytes(), open.len())
        );
        let two = b"2 syslog 5 hello\n3 close 0\n";
        let Ok(Parsed::Frame(f, used)) = parse(two, 1024) else {
            panic!()
        };
        assert_eq!((f.txnr, f.command, f.data), (2, "syslog", &b"hello"[..]));
        let Ok(Parsed::Frame(f, rest)) = parse(&two[used..], 1024) else {
            panic!()
        };
        assert_eq!(
            (f.txnr, f.command, f.data, rest),
            (3, "close", &b""[..], 10)
        );
    }

    #[test]
    fn a_frame_cut_anywhere_is_partial_and_never_an_error() {
        let frame = b"123 syslog 11 hello world\n";
        for cut in 0..frame.len() {
            assert_eq!(
                parse(&frame[..cut], 1024),
                Ok(Parsed::Partial),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn broken_frames_are_errors_that_say_what_is_wrong() {
        for (bytes, want) in [
            (&b"x syslog 1 a\n"[..], FrameError::Txnr),
            (b"0 syslog 1 a\n", FrameError::Txnr),
            (b"1234567890 syslog 1 a\n", FrameError::Txnr),
            (b" syslog 1 a\n", FrameError::Txnr),
            (b"1 sys-log 1 a\n", FrameError::Command),
            (b"1 syslog x a\n", FrameError::Length),
            (b"1 syslog 3 abcd\n", FrameError::Trailer),
            (b"1 syslog 3\n", FrameError::Trailer),
            (b"1 syslog 99999999999999999999 a\n", FrameError::Length),
        ] {
            assert_eq!(
                parse(bytes, 1024),
                Err(want),
                "{}",
                String::from_utf8_lossy(bytes)
            );
        }
        assert_eq!(
            parse(b"1 syslog 2000 ", 1024),
            Err(FrameError::TooLarge(2000, 1024)),
            "refused on its length, before its data"
        );
    }

    #[test]
    fn answers_carry_their_length() {
        let mut out = Vec::new();
        write_rsp(&mut out, 7, 200, "OK", "");
        write_rsp(&mut out, 1, 200, "OK", "relp_version=0\ncommands=syslog");
        write_serverclose(&mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "7 rsp 6 200 OK\n1 rsp 37 200 OK\nrelp_version=0\ncommands=syslog\n0 serverclose 0\n"
        );
    }

    /// Random and adversarial bytes: every answer is a frame, partial or an error, never a
    /// panic, and a frame never claims more bytes than the buffer holds.
    #[test]
    fn random_bytes_never_panic_and_frames_stay_inside_the_buffer() {
        let mut rng = watchpost_detect::SplitMix64::new(3);
        let alphabet = b"0123456789 syslogopenclose\n\xff";
        for _ in 0..200_000 {
            let len = rng.below(40) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|_| alphabet[rng.below(alphabet.len() as u64) as usize])
                .collect();
            if let Ok(Parsed::Frame(f, used)) = parse(&bytes, 16) {
                assert!(used <= bytes.len());
                assert!(f.data.len() <= 16);
            }
        }
    }
}
