//! Syslog header parsing: RFC 5424, RFC 3164 and the 3164 dialects found in files on disk.
//!
//! Every line gets a record, never an error: a line that matches no header is `Unstructured` and
//! its whole text is the message, so that nothing is lost before template mining. The record only
//! holds ranges into the caller's line, which keeps the parser allocation-free and lets the caller
//! decide what to copy.
//!
//! Decisions for the ambiguous cases, all of which a reader of real logs meets daily:
//! - **Missing host** (`<13>Oct 11 22:14:15 sshd[1]: msg`, as written by local `/dev/log` clients):
//!   if the token after the timestamp is itself a complete tag (`name:` or `name[pid]:`), the host is
//!   `None` and that token is the tag. A hostname never ends in ':' or `[pid]`, so this is safe; the
//!   opposite case (a host followed by a message with no tag) cannot be told apart from a missing
//!   host followed by a tagless message, and is parsed as host + message.
//! - **Tags**: `name:`, `name[pid]:`, `name[pid]` (no colon) and `name[pid]:text` (no space). A word
//!   with no terminator is not a tag: the message starts there and `app` is `None`. Two sysklogd-era
//!   forms with a space inside the tag are also recognised, because they appear in real archives
//!   (the Loghub Linux set): `syslogd 1.4.1: restart.` (name and version, app `syslogd 1.4.1`) and
//!   `-- root[2421]: ROOT LOGIN ON tty2` (app `-- root`). A two-word tag is only accepted when its
//!   second word carries a `[pid]` or is a version number, so `host disk error: x` still has no tag.
//! - **Timestamps** are UTC (the sender's zone is unknown); yearless BSD stamps take the year from
//!   `now_ns` (see `parse::time::parse_bsd_timestamp`). A malformed RFC 5424 timestamp leaves
//!   `timestamp_ns` as `None` but the rest of the header is still parsed.
//! - Trailing ASCII whitespace and NULs are stripped from every line; leading spaces are stripped
//!   from 3164 messages (they only carry column alignment, such as kernel `kernel:  BIOS-e820`).

use std::ops::Range;

use super::time::{parse_rfc3339, resolve_bsd_year, scan_bsd_timestamp};

/// Which header grammar a line matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyslogFormat {
    /// `<PRI>1 TIMESTAMP HOST APP PROCID MSGID SD MSG`.
    Rfc5424,
    /// BSD syslog: an optional `<PRI>`, a BSD or RFC 3339 timestamp, host, tag, message (or a
    /// `<PRI>` with no recognisable timestamp, as RFC 3164 allows).
    Rfc3164,
    /// No recognisable header: the whole trimmed line is the message.
    Unstructured,
}

/// A parsed syslog line. Every range indexes into the line passed to [`parse_syslog`]; when that line
/// is valid UTF-8, every range starts and ends on a character boundary (all delimiters are ASCII).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyslogRecord {
    /// Which header grammar matched.
    pub format: SyslogFormat,
    /// From `<PRI>` (PRI / 8); `None` when the line has no valid PRI.
    pub facility: Option<u8>,
    /// From `<PRI>` (PRI % 8, 0 = emergency); `None` when the line has no valid PRI.
    pub severity: Option<u8>,
    /// Header time in nanoseconds since the epoch; `None` if absent, NILVALUE or unparseable.
    pub timestamp_ns: Option<i64>,
    /// HOSTNAME; `None` when NILVALUE or, in 3164, when the line has none (see the module docs).
    pub host: Option<Range<usize>>,
    /// APP-NAME (5424) or the tag's name (3164), e.g. `sshd`.
    pub app: Option<Range<usize>>,
    /// PROCID (5424) or the tag's `[pid]` (3164).
    pub procid: Option<Range<usize>>,
    /// MSGID; RFC 5424 only.
    pub msgid: Option<Range<usize>>,
    /// RFC 5424 only: the raw SD-ELEMENTs (brackets included) when not NILVALUE; walk them with
    /// [`for_each_sd_param`].
    pub structured_data: Option<Range<usize>>,
    /// The message body: after SD with a UTF-8 BOM removed (5424), after the tag (3164), or the whole
    /// trimmed line (unstructured). May be empty.
    pub msg: Range<usize>,
}

impl SyslogRecord {
    fn empty(format: SyslogFormat, pri: Option<u8>, msg: Range<usize>) -> Self {
        SyslogRecord {
            format,
            facility: pri.map(|p| p >> 3),
            severity: pri.map(|p| p & 7),
            timestamp_ns: None,
            host: None,
            app: None,
            procid: None,
            msgid: None,
            structured_data: None,
            msg,
        }
    }
}

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// Longest tag (without `[pid]`) accepted. RFC 3164 says 32, but real tags such as
/// `org.gnome.Shell.desktop` or `systemd-networkd-wait-online` run longer.
const MAX_TAG: usize = 64;

/// Parses one syslog line (with or without its trailing newline). Never fails; see the module docs
/// for how ambiguous lines are read.
pub fn parse_syslog(line: &[u8], now_ns: i64) -> SyslogRecord {
    let mut end = line.len();
    while end > 0 && matches!(line[end - 1], b'\r' | b'\n' | b' ' | b'\t' | 0) {
        end -= 1;
    }
    let mut start = 0;
    while start < end && matches!(line[start], b' ' | b'\t') {
        start += 1;
    }
    let (pri, p) = match parse_pri(&line[start..end]) {
        Some((pri, used)) => (Some(pri), start + used),
        None => (None, start),
    };
    if pri.is_some() && line[p..end].starts_with(b"1 ") {
        return parse_5424(line, pri, p + 2, end);
    }
    parse_3164(line, pri, p, end, now_ns)
        .unwrap_or_else(|| SyslogRecord::empty(SyslogFormat::Unstructured, None, start..end))
}

/// `<N>` with N in 0..=191 written without leading zeros; returns (N, bytes used).
fn parse_pri(s: &[u8]) -> Option<(u8, usize)> {
    if s.first() != Some(&b'<') {
        return None;
    }
    let close = s.iter().take(5).position(|&b| b == b'>')?;
    let digits = &s[1..close];
    if digits.is_empty() || (digits.len() > 1 && digits[0] == b'0') {
        return None;
    }
    let mut v: u32 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u32::from(b - b'0');
    }
    if v > 191 {
        return None;
    }
    Some((v as u8, close + 1))
}

/// The next space-delimited token at or after `*p` (skipping spaces), advancing `*p` past it.
fn next_token(line: &[u8], p: &mut usize, end: usize) -> Option<Range<usize>> {
    while *p < end && line[*p] == b' ' {
        *p += 1;
    }
    if *p >= end {
        return None;
    }
    let s = *p;
    let e = memchr::memchr(b' ', &line[s..end]).map_or(end, |i| s + i);
    *p = e;
    Some(s..e)
}

fn nil_to_none(line: &[u8], r: Option<Range<usize>>) -> Option<Range<usize>> {
    r.filter(|r| &line[r.clone()] != b"-")
}

fn parse_5424(line: &[u8], pri: Option<u8>, mut p: usize, end: usize) -> SyslogRecord {
    let mut rec = SyslogRecord::empty(SyslogFormat::Rfc5424, pri, end..end);
    let ts = next_token(line, &mut p, end);
    rec.timestamp_ns = ts.and_then(|r| parse_rfc3339(&line[r]));
    rec.host = nil_to_none(line, next_token(line, &mut p, end));
    rec.app = nil_to_none(line, next_token(line, &mut p, end));
    rec.procid = nil_to_none(line, next_token(line, &mut p, end));
    rec.msgid = nil_to_none(line, next_token(line, &mut p, end));
    while p < end && line[p] == b' ' {
        p += 1;
    }
    if p >= end {
        return rec;
    }
    if line[p] == b'-' && (p + 1 == end || line[p + 1] == b' ') {
        p += 1;
    } else if line[p] == b'[' {
        // A malformed SD is kept as message text rather than dropped.
        if let Some(sd_end) = scan_sd(line, p, end) {
            rec.structured_data = Some(p..sd_end);
            p = sd_end;
        }
    }
    // MSG is separated by exactly one SP; further spaces belong to the message.
    if p < end && line[p] == b' ' {
        p += 1;
    }
    if line[p..end].starts_with(UTF8_BOM) {
        p += UTF8_BOM.len();
    }
    rec.msg = p..end;
    rec
}

/// Finds the end of one or more adjacent SD-ELEMENTs starting at `line[p] == b'['`, honouring quoted
/// values and their backslash escapes; `None` if an element is unterminated.
fn scan_sd(line: &[u8], mut p: usize, end: usize) -> Option<usize> {
    while p < end && line[p] == b'[' {
        p += 1;
        let mut in_quote = false;
        loop {
            let &b = line[..end].get(p)?;
            p += 1;
            match (in_quote, b) {
                (true, b'\\') => p += 1,
                (_, b'"') => in_quote = !in_quote,
                (false, b']') => break,
                _ => {}
            }
        }
    }
    (p <= end).then_some(p)
}

fn parse_3164(
    line: &[u8],
    pri: Option<u8>,
    mut p: usize,
    end: usize,
    now_ns: i64,
) -> Option<SyslogRecord> {
    let rest = &line[p..end];
    let mut has_ts = false;
    let mut ts = None;
    if let Some((t, used)) = scan_bsd_timestamp(rest) {
        if used == rest.len() || rest[used] == b' ' {
            has_ts = true;
            ts = resolve_bsd_year(t, now_ns);
            p += used;
        }
    } else if rest.first().is_some_and(u8::is_ascii_digit) {
        // rsyslog's RSYSLOG_FileFormat puts an RFC 3339 stamp where 3164 has its BSD one.
        let tok_end = memchr::memchr(b' ', rest).unwrap_or(rest.len());
        if let Some(ns) = parse_rfc3339(&rest[..tok_end]) {
            has_ts = true;
            ts = Some(ns);
            p += tok_end;
        }
    }
    if !has_ts && pri.is_none() {
        return None;
    }
    let mut rec = SyslogRecord::empty(SyslogFormat::Rfc3164, pri, end..end);
    rec.timestamp_ns = ts;
    while p < end && line[p] == b' ' {
        p += 1;
    }
    if has_ts && p < end && parse_tag(line, p, end).is_none() {
        let mut q = p;
        rec.host = next_token(line, &mut q, end);
        p = q;
        while p < end && line[p] == b' ' {
            p += 1;
        }
    }
    if let Some(tag) = parse_tag(line, p, end).or_else(|| parse_two_word_tag(line, p, end)) {
        rec.app = Some(tag.app);
        rec.procid = tag.procid;
        p = tag.msg_start;
    }
    while p < end && line[p] == b' ' {
        p += 1;
    }
    rec.msg = p..end;
    Some(rec)
}

struct Tag {
    app: Range<usize>,
    procid: Option<Range<usize>>,
    msg_start: usize,
}

/// Recognises a tag token at `line[p..]`: `name:`, `name[pid]:`, `name[pid]:text` or `name[pid]`
/// (numeric pid, then a space or the end). `name` may itself contain ':' (but not end with one) and
/// parentheses (`sshd(pam_unix)[19939]:`).
fn parse_tag(line: &[u8], p: usize, end: usize) -> Option<Tag> {
    let tok_end = memchr::memchr(b' ', &line[p..end]).map_or(end, |i| p + i);
    let limit = tok_end.min(p + MAX_TAG + 1);
    let mut i = p;
    while i < limit {
        match line[i] {
            b'[' if i > p => {
                let close = memchr::memchr(b']', &line[i..tok_end])? + i;
                let pid = i + 1..close;
                if pid.is_empty() {
                    return None;
                }
                let msg_start = if close + 1 == tok_end {
                    // `name[pid]` with no colon: only trust it with a numeric pid.
                    if !line[pid.clone()].iter().all(u8::is_ascii_digit) {
                        return None;
                    }
                    tok_end
                } else if line[close + 1] == b':' {
                    close + 2
                } else {
                    return None;
                };
                return Some(Tag {
                    app: p..i,
                    procid: Some(pid),
                    msg_start,
                });
            }
            b':' if i > p && i + 1 == tok_end => {
                return Some(Tag {
                    app: p..i,
                    procid: None,
                    msg_start: tok_end,
                });
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The two sysklogd-era tags with a space in them (see the module docs): `word version:` and
/// `word name[pid]:`.
fn parse_two_word_tag(line: &[u8], p: usize, end: usize) -> Option<Tag> {
    let first_end = memchr::memchr(b' ', &line[p..end])? + p;
    let first = &line[p..first_end];
    if first.is_empty() || first.len() > MAX_TAG || first.iter().any(|&b| b == b':' || b == b'[') {
        return None;
    }
    let second = parse_tag(line, first_end + 1, end)?;
    let second_name = &line[second.app.clone()];
    let is_version = second_name.first().is_some_and(u8::is_ascii_digit)
        && second_name.iter().all(|&b| b.is_ascii_digit() || b == b'.');
    if second.procid.is_none() && !is_version {
        return None;
    }
    Some(Tag {
        app: p..second.app.end,
        ..second
    })
}

/// Walks the parameters of RFC 5424 structured data (the text in
/// [`SyslogRecord::structured_data`]), calling `f(sd_id, param_name, raw_value)` for each. Values are
/// passed raw so that the common escape-free case costs nothing; use [`unescape_sd_value`] when a
/// value contains a backslash. Returns `false` if the text is malformed; `visit` may already have been
/// called for the parameters before the error, which callers should discard.
#[allow(clippy::type_complexity)] // the callback's shape is the API: (sd-id, name, raw value)
pub fn for_each_sd_param(sd: &[u8], visit: &mut dyn FnMut(&[u8], &[u8], &[u8])) -> bool {
    let is_name_byte = |b: u8| (33..=126).contains(&b) && !matches!(b, b'=' | b']' | b'"');
    let mut i = 0;
    if sd.is_empty() {
        return false;
    }
    while i < sd.len() {
        if sd[i] != b'[' {
            return false;
        }
        i += 1;
        let id_start = i;
        while i < sd.len() && is_name_byte(sd[i]) {
            i += 1;
        }
        let id = &sd[id_start..i];
        if id.is_empty() {
            return false;
        }
        loop {
            match sd.get(i) {
                Some(b']') => {
                    i += 1;
                    break;
                }
                Some(b' ') => i += 1,
                Some(_) => {
                    let name_start = i;
                    while i < sd.len() && is_name_byte(sd[i]) {
                        i += 1;
                    }
                    let name = &sd[name_start..i];
                    if name.is_empty() || sd.get(i) != Some(&b'=') || sd.get(i + 1) != Some(&b'"') {
                        return false;
                    }
                    i += 2;
                    let value_start = i;
                    loop {
                        match sd.get(i) {
                            None => return false,
                            Some(b'\\') => i += 2,
                            Some(b'"') => break,
                            Some(_) => i += 1,
                        }
                    }
                    // `i` may have stepped past the end on a trailing backslash: `get` caught that.
                    visit(id, name, &sd[value_start..i]);
                    i += 1;
                    if !matches!(sd.get(i), Some(b' ' | b']')) {
                        return false;
                    }
                }
                None => return false,
            }
        }
    }
    true
}

/// Removes RFC 5424 PARAM-VALUE escapes (`\"`, `\\`, `\]`) from `raw` into `out`, which is cleared
/// first so that one buffer can be reused for every value. A backslash before any other byte is kept,
/// as the RFC requires.
pub fn unescape_sd_value(raw: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let mut rest = raw;
    while let Some(i) = memchr::memchr(b'\\', rest) {
        out.extend_from_slice(&rest[..i]);
        match rest.get(i + 1) {
            Some(&c @ (b'"' | b'\\' | b']')) => {
                out.push(c);
                rest = &rest[i + 2..];
            }
            _ => {
                out.push(b'\\');
                rest = &rest[i + 1..];
            }
        }
    }
    out.extend_from_slice(rest);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::time::{days_from_civil, parse_rfc3339};

    const NS: i64 = 1_000_000_000;
    /// 2026-11-21T10:00:00Z.
    const NOW: i64 = 1_795_255_200 * NS;

    fn s<'a>(line: &'a [u8], r: &Option<Range<usize>>) -> Option<&'a str> {
        r.clone().map(|r| std::str::from_utf8(&line[r]).unwrap())
    }

    fn msg<'a>(line: &'a [u8], rec: &SyslogRecord) -> &'a str {
        std::str::from_utf8(&line[rec.msg.clone()]).unwrap()
    }

    fn bsd(year: i64, month: u32, day: u32, h: i64, m: i64, sec: i64) -> i64 {
        (days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + sec) * NS
    }

    #[test]
    fn rfc5424_full() {
        let line = "<165>1 2003-10-11T22:14:15.003Z mymachine.example.com evntslog - ID47 \
                    [exampleSDID@32473 iut=\"3\" eventSource=\"Application\" eventID=\"1011\"]\
                    \u{FEFF}An application event log entry...\n"
            .as_bytes();
        let r = parse_syslog(line, NOW);
        assert_eq!(r.format, SyslogFormat::Rfc5424);
        assert_eq!((r.facility, r.severity), (Some(20), Some(5)));
        assert_eq!(r.timestamp_ns, parse_rfc3339(b"2003-10-11T22:14:15.003Z"));
        assert_eq!(s(line, &r.host), Some("mymachine.example.com"));
        assert_eq!(s(line, &r.app), Some("evntslog"));
        assert_eq!(r.procid, None);
        assert_eq!(s(line, &r.msgid), Some("ID47"));
        assert_eq!(
            s(line, &r.structured_data),
            Some("[exampleSDID@32473 iut=\"3\" eventSource=\"Application\" eventID=\"1011\"]")
        );
        assert_eq!(msg(line, &r), "An application event log entry...");
    }

    #[test]
    fn rfc5424_nil_fields_and_multiple_sd() {
        let line = b"<34>1 - - - - - -";
        let r = parse_syslog(line, NOW);
        assert_eq!(r.format, SyslogFormat::Rfc5424);
        assert_eq!((r.facility, r.severity), (Some(4), Some(2)));
        assert_eq!(r.timestamp_ns, None);
        assert_eq!(
            (r.host, r.app, r.procid, r.msgid, r.structured_data),
            (None, None, None, None, None)
        );
        assert!(r.msg.is_empty());

        let line = br#"<13>1 2026-11-21T10:00:00+01:00 h app 42 - [a@1 x="y\]z"][b@2] m  x"#;
        let r = parse_syslog(line, NOW);
        assert_eq!(r.timestamp_ns, Some(NOW - 3600 * NS));
        assert_eq!(s(line, &r.procid), Some("42"));
        assert_eq!(s(line, &r.structured_data), Some(r#"[a@1 x="y\]z"][b@2]"#));
        assert_eq!(msg(line, &r), "m  x");

        // Unterminated SD stays in the message; a bad timestamp does not lose the header.
        let line = b"<13>1 yesterday h app - - [a@1 x=\"y";
        let r = parse_syslog(line, NOW);
        assert_eq!(r.format, SyslogFormat::Rfc5424);
        assert_eq!(r.timestamp_ns, None);
        assert_eq!(s(line, &r.app), Some("app"));
        assert_eq!(r.structured_data, None);
        assert_eq!(msg(line, &r), "[a@1 x=\"y");

        // Truncated header.
        let line = b"<13>1 2026-11-21T10:00:00Z host";
        let r = parse_syslog(line, NOW);
        assert_eq!(s(line, &r.host), Some("host"));
        assert_eq!(r.app, None);
        assert_eq!(r.msg, line.len()..line.len());
    }

    #[test]
    fn rfc3164_with_pri() {
        let line = b"<34>Oct 11 22:14:15 mymachine su: 'su root' failed for lonvick on /dev/pts/8";
        let r = parse_syslog(line, NOW);
        assert_eq!(r.format, SyslogFormat::Rfc3164);
        assert_eq!((r.facility, r.severity), (Some(4), Some(2)));
        assert_eq!(r.timestamp_ns, Some(bsd(2026, 10, 11, 22, 14, 15)));
        assert_eq!(s(line, &r.host), Some("mymachine"));
        assert_eq!(s(line, &r.app), Some("su"));
        assert_eq!(r.procid, None);
        assert_eq!(msg(line, &r), "'su root' failed for lonvick on /dev/pts/8");
    }

    #[test]
    fn rfc3164_auth_log_without_pri() {
        let line = b"Nov 21 10:00:01 web-01 sshd[4242]: Accepted publickey for alice from 10.0.0.5 port 50022 ssh2\r\n";
        let r = parse_syslog(line, NOW);
        assert_eq!(r.format, SyslogFormat::Rfc3164);
        assert_eq!((r.facility, r.severity), (None, None));
        assert_eq!(r.timestamp_ns, Some(NOW + NS));
        assert_eq!(s(line, &r.host), Some("web-01"));
        assert_eq!(s(line, &r.app), Some("sshd"));
        assert_eq!(s(line, &r.procid), Some("4242"));
        assert_eq!(
            msg(line, &r),
            "Accepted publickey for alice from 10.0.0.5 port 50022 ssh2"
        );
    }

    #[test]
    fn rfc3164_iso_timestamp_and_kernel() {
        let line =
            b"2026-11-21T10:00:01.123456+00:00 web-01 sudo:    alice : TTY=pts/0 ; USER=root";
        let r = parse_syslog(line, NOW);
        assert_eq!(r.format, SyslogFormat::Rfc3164);
        assert_eq!(r.timestamp_ns, Some(NOW + NS + 123_456_000));
        assert_eq!(s(line, &r.host), Some("web-01"));
        assert_eq!(s(line, &r.app), Some("sudo"));
        assert_eq!(msg(line, &r), "alice : TTY=pts/0 ; USER=root");

        let line = b"Nov 21 10:00:01 fw kernel: [12345.678] IN=eth0 OUT= SRC=1.2.3.4 DST=10.0.0.1";
        let r = parse_syslog(line, NOW);
        assert_eq!(s(line, &r.host), Some("fw"));
        assert_eq!(s(line, &r.app), Some("kernel"));
        assert_eq!(
            msg(line, &r),
            "[12345.678] IN=eth0 OUT= SRC=1.2.3.4 DST=10.0.0.1"
        );
    }

    #[test]
    fn rfc3164_missing_host_and_tag_forms() {
        let line = b"<13>Oct 11 22:14:15 sshd[1]: msg";
        let r = parse_syslog(line, NOW);
        assert_eq!(r.host, None);
        assert_eq!(s(line, &r.app), Some("sshd"));
        assert_eq!(s(line, &r.procid), Some("1"));
        assert_eq!(msg(line, &r), "msg");

        let line = b"<13>Oct 11 22:14:15 cron: job done";
        let r = parse_syslog(line, NOW);
        assert_eq!((r.host, s(line, &r.app)), (None, Some("cron")));

        // Tagless message after the host.
        let line = b"Nov 21 10:00:01 web-01 disk error: sda1";
        let r = parse_syslog(line, NOW);
        assert_eq!(s(line, &r.host), Some("web-01"));
        assert_eq!(r.app, None);
        assert_eq!(msg(line, &r), "disk error: sda1");

        // `name[pid]` without a colon, and `name[pid]:text` without a space.
        let line = b"Nov 21 10:00:01 h app[77] started";
        let r = parse_syslog(line, NOW);
        assert_eq!(
            (s(line, &r.app), s(line, &r.procid)),
            (Some("app"), Some("77"))
        );
        assert_eq!(msg(line, &r), "started");
        let line = b"Nov 21 10:00:01 h app[77]:started";
        let r = parse_syslog(line, NOW);
        assert_eq!(msg(line, &r), "started");

        // A colon inside the first word is not a tag terminator.
        let line = b"Nov 21 10:00:01 h http://x/ is down";
        let r = parse_syslog(line, NOW);
        assert_eq!(r.app, None);
        assert_eq!(msg(line, &r), "http://x/ is down");

        // Host only, and host with an empty message.
        let line = b"Nov 21 10:00:01 h";
        let r = parse_syslog(line, NOW);
        assert_eq!((s(line, &r.host), r.app.clone()), (Some("h"), None));
        assert!(r.msg.is_empty());
        let line = b"Nov 21 10:00:01 h su:";
        let r = parse_syslog(line, NOW);
        assert_eq!((s(line, &r.host), s(line, &r.app)), (Some("h"), Some("su")));
        assert!(r.msg.is_empty());

        // PRI with no timestamp: still 3164, whole rest is tag + message.
        let line = b"<13>sshd[9]: hello";
        let r = parse_syslog(line, NOW);
        assert_eq!(r.format, SyslogFormat::Rfc3164);
        assert_eq!((r.host.clone(), s(line, &r.app)), (None, Some("sshd")));
        assert_eq!(msg(line, &r), "hello");
    }

    #[test]
    fn year_rollover_uses_now() {
        let jan2 = days_from_civil(2027, 1, 2) * 86_400 * NS;
        let line = b"Dec 31 23:59:59 h a: b";
        let r = parse_syslog(line, jan2);
        assert_eq!(r.timestamp_ns, Some(bsd(2026, 12, 31, 23, 59, 59)));
    }

    #[test]
    fn unstructured_and_bad_pri() {
        for line in [
            &b"  just some text \r\n"[..],
            b"<192>Oct 11 22:14:15 h a: b",
            b"<01>Oct 11 22:14:15 h a: b",
            b"<>x",
            b"<1234>x",
            b"",
            b"\r\n",
            b"Nov 21 10:00:0 h a: b",
            b"Nov 21 10:00:00x h a: b",
        ] {
            let r = parse_syslog(line, NOW);
            assert_eq!(r.format, SyslogFormat::Unstructured, "{line:?}");
            assert_eq!((r.facility, r.severity, r.app), (None, None, None));
            assert_eq!(&line[r.msg.clone()], line.trim_ascii(), "{line:?}");
        }
        let r = parse_syslog(b"<0>x", NOW);
        assert_eq!(
            (r.format, r.facility, r.severity),
            (SyslogFormat::Rfc3164, Some(0), Some(0))
        );
        let r = parse_syslog(b"<191>x", NOW);
        assert_eq!((r.facility, r.severity), (Some(23), Some(7)));
    }

    #[test]
    fn sysklogd_two_word_tags() {
        let line = b"Jun 19 04:09:11 combo syslogd 1.4.1: restart.";
        let r = parse_syslog(line, NOW);
        assert_eq!(s(line, &r.app), Some("syslogd 1.4.1"));
        assert_eq!(msg(line, &r), "restart.");
        let line = b"Jul  7 08:06:15 combo  -- root[2421]: ROOT LOGIN ON tty2";
        let r = parse_syslog(line, NOW);
        assert_eq!(s(line, &r.host), Some("combo"));
        assert_eq!(
            (s(line, &r.app), s(line, &r.procid)),
            (Some("-- root"), Some("2421"))
        );
        assert_eq!(msg(line, &r), "ROOT LOGIN ON tty2");
    }

    /// Splits one CSV record (RFC 4180 quoting) into owned fields; test-only, so allocation is fine.
    fn csv_fields(line: &str) -> Vec<String> {
        let mut out = vec![String::new()];
        let mut quoted = false;
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match (quoted, c) {
                (true, '"') if chars.peek() == Some(&'"') => {
                    chars.next();
                    out.last_mut().unwrap().push('"');
                }
                (_, '"') => quoted = !quoted,
                (false, ',') => out.push(String::new()),
                _ => out.last_mut().unwrap().push(c),
            }
        }
        out
    }

    /// Every Loghub OpenSSH and Linux line parses to the host, tag, pid and content that the
    /// dataset's hand-corrected structured CSV gives.
    fn check_loghub(
        dataset: &str,
        host_col: usize,
        app_col: Option<usize>,
        pid_col: usize,
        content_col: usize,
    ) {
        let dir = "/work/shared/data/loghub-2k";
        let Ok(raw) = std::fs::read_to_string(format!("{dir}/{dataset}/{dataset}_2k.log")) else {
            eprintln!("loghub data not found, skipping");
            return;
        };
        let csv = std::fs::read_to_string(format!(
            "{dir}/{dataset}/{dataset}_2k.log_structured_corrected.csv"
        ))
        .unwrap();
        let mut n = 0;
        for (line, row) in raw.lines().zip(csv.lines().skip(1)) {
            let f = csv_fields(row);
            let b = line.as_bytes();
            let r = parse_syslog(b, NOW);
            assert_eq!(r.format, SyslogFormat::Rfc3164, "{line}");
            assert!(r.timestamp_ns.is_some(), "{line}");
            assert_eq!(s(b, &r.host), Some(f[host_col].as_str()), "{line}");
            let app = app_col.map_or("sshd", |c| f[c].as_str());
            assert_eq!(s(b, &r.app), Some(app), "{line}");
            let pid = f[pid_col].trim_end_matches(".0");
            assert_eq!(s(b, &r.procid).unwrap_or(""), pid, "{line}");
            assert_eq!(msg(b, &r), f[content_col].trim(), "{line}");
            n += 1;
        }
        assert_eq!(n, 2000);
    }

    #[test]
    fn loghub_openssh_matches_ground_truth() {
        check_loghub("OpenSSH", 4, None, 5, 6);
    }

    #[test]
    fn loghub_linux_matches_ground_truth() {
        check_loghub("Linux", 4, Some(5), 6, 7);
    }

    #[test]
    fn sd_params() {
        let sd = br#"[exampleSDID@32473 iut="3" eventSource="Appli\"cation"][examplePriority@32473 class="high"][empty@1]"#;
        let mut seen = Vec::new();
        assert!(for_each_sd_param(sd, &mut |id, k, v| {
            seen.push((id.to_vec(), k.to_vec(), v.to_vec()))
        }));
        let seen: Vec<(&[u8], &[u8], &[u8])> = seen
            .iter()
            .map(|(a, b, c)| (a.as_slice(), b.as_slice(), c.as_slice()))
            .collect();
        assert_eq!(
            seen,
            [
                (&b"exampleSDID@32473"[..], &b"iut"[..], &b"3"[..]),
                (b"exampleSDID@32473", b"eventSource", br#"Appli\"cation"#),
                (b"examplePriority@32473", b"class", b"high"),
            ]
        );
        for bad in [
            &b""[..],
            b"-",
            b"[",
            b"[]",
            b"[id",
            b"[id x]",
            b"[id x=]",
            b"[id x=\"1]",
            b"[id x=\"1\\",
            b"[id x=\"1\"y=\"2\"]",
            b"[id x=\"1\"] [id2]",
            b"[id =\"1\"]",
        ] {
            assert!(!for_each_sd_param(bad, &mut |_, _, _| {}), "{bad:?}");
        }
        assert!(for_each_sd_param(b"[id  x=\"\"]", &mut |_, k, v| {
            assert_eq!((k, v), (&b"x"[..], &b""[..]))
        }));
    }

    #[test]
    fn sd_unescape() {
        let mut out = Vec::with_capacity(64);
        unescape_sd_value(br#"a\"b\\c\]d\ne\"#, &mut out);
        assert_eq!(out, br#"a"b\c]d\ne\"#);
        unescape_sd_value(b"plain", &mut out);
        assert_eq!(out, b"plain");
        unescape_sd_value(b"", &mut out);
        assert!(out.is_empty());
    }

    fn check_record(line: &[u8], r: &SyslogRecord) {
        let text = std::str::from_utf8(line).ok();
        let ranges = [
            Some(r.msg.clone()),
            r.host.clone(),
            r.app.clone(),
            r.procid.clone(),
            r.msgid.clone(),
            r.structured_data.clone(),
        ];
        for range in ranges.into_iter().flatten() {
            assert!(
                range.start <= range.end && range.end <= line.len(),
                "{range:?} {line:?}"
            );
            if let Some(t) = text {
                assert!(t.is_char_boundary(range.start) && t.is_char_boundary(range.end));
            }
        }
        if let Some(sd) = &r.structured_data {
            let mut buf = Vec::new();
            for_each_sd_param(&line[sd.clone()], &mut |_, _, v| {
                unescape_sd_value(v, &mut buf)
            });
        }
        assert_eq!(r.facility.is_some(), r.severity.is_some());
    }

    #[test]
    fn fuzz_never_panics_and_ranges_are_sound() {
        let seeds: [&[u8]; 8] = [
            b"<165>1 2003-10-11T22:14:15.003Z host app 12 ID47 [a@1 x=\"y\\\"\" z=\"\xc3\xa9\"] \xEF\xBB\xBFmsg",
            b"<34>Oct 11 22:14:15 mymachine su: 'su root' failed",
            b"Nov  1 10:00:01 web-01 sshd[4242]: Accepted publickey for \xc3\xa9 from 10.0.0.5",
            b"2026-11-21T10:00:01.123456+00:00 web-01 sudo: alice : TTY=pts/0",
            b"Jul  7 08:06:15 combo  -- root[2421]: ROOT LOGIN ON tty2",
            b"Jun 19 04:09:11 combo syslogd 1.4.1: restart.",
            b"<13>Oct 11 22:14:15 sshd[1]: msg",
            b"\xff\xfe<1>1 - - - - - [",
        ];
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut buf = Vec::new();
        for i in 0..30_000 {
            buf.clear();
            if i % 10 == 0 {
                for _ in 0..next() % 80 {
                    buf.push(next() as u8);
                }
            } else {
                buf.extend_from_slice(seeds[i % seeds.len()]);
                for _ in 0..(next() % 5) {
                    let r = next();
                    let len = buf.len();
                    match r % 5 {
                        0 if len > 0 => buf[(r >> 8) as usize % len] = (r >> 16) as u8,
                        1 if len > 0 => buf.truncate((r >> 8) as usize % len),
                        2 if len > 0 => {
                            buf.remove((r >> 8) as usize % len);
                        }
                        3 => buf.insert(
                            (r >> 8) as usize % (len + 1),
                            b" []:<>\"\\-1"[(r >> 16) as usize % 10],
                        ),
                        _ => buf.push((r >> 8) as u8),
                    }
                }
            }
            let r = parse_syslog(&buf, next() as i64);
            check_record(&buf, &r);
            let _ = for_each_sd_param(&buf, &mut |_, _, _| {});
        }
    }

    #[test]
    fn huge_lines() {
        let mut line = b"<13>1 2026-11-21T10:00:00Z h a p m [x@1 k=\"".to_vec();
        line.resize(1 << 20, b'\\');
        let r = parse_syslog(&line, NOW);
        check_record(&line, &r);
        let mut line = b"Nov 21 10:00:01 h ".to_vec();
        line.resize(1 << 20, b'a');
        let r = parse_syslog(&line, NOW);
        check_record(&line, &r);
        assert_eq!(r.msg.len(), (1 << 20) - 18);
        let line = vec![b'['; 1 << 20];
        check_record(&line, &parse_syslog(&line, NOW));
    }
}
