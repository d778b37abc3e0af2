//! Byte-level formatting helpers.
//!
//! The generator has to outrun the service it loads, so lines are assembled with direct byte
//! pushes instead of `write!`: `core::fmt` costs a dynamic dispatch per argument, and numbers,
//! padded fields and IP addresses are most of what a log line is made of.

/// Appends the decimal form of `v`.
#[inline]
pub fn u64(out: &mut Vec<u8>, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// Appends `v` zero-padded to at least `width` digits.
#[inline]
pub fn padded(out: &mut Vec<u8>, v: u64, width: usize) {
    let mut buf = [b'0'; 20];
    let mut i = buf.len();
    let mut x = v;
    loop {
        i -= 1;
        buf[i] = b'0' + (x % 10) as u8;
        x /= 10;
        if x == 0 {
            break;
        }
    }
    let start = i.min(buf.len() - width.min(buf.len()));
    out.extend_from_slice(&buf[start..]);
}

/// Appends `v` right-aligned in a field of `width` characters, padded with spaces (the kernel's
/// `%5lu` uptime field).
#[inline]
pub fn spaced(out: &mut Vec<u8>, v: u64, width: usize) {
    let digits = if v == 0 { 1 } else { v.ilog10() as usize + 1 };
    for _ in digits..width {
        out.push(b' ');
    }
    u64(out, v);
}

/// Appends the low `digits` nibbles of `v` as lower-case hex, zero-padded.
#[inline]
pub fn hex(out: &mut Vec<u8>, v: u64, digits: u32) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for i in (0..digits).rev() {
        out.push(HEX[((v >> (i * 4)) & 0xF) as usize]);
    }
}

/// Appends dotted-quad notation.
#[inline]
pub fn ipv4(out: &mut Vec<u8>, ip: [u8; 4]) {
    for (i, octet) in ip.iter().enumerate() {
        if i > 0 {
            out.push(b'.');
        }
        u64(out, u64::from(*octet));
    }
}

/// Appends `bytes` as the contents of a JSON string (no surrounding quotes), escaped per RFC 8259.
///
/// Generated values include Windows paths, quoted command lines and multi-line stack traces; an
/// unescaped backslash or newline would produce invalid JSON or split one event into two frames.
#[inline]
pub fn json_escaped(out: &mut Vec<u8>, bytes: &[u8]) {
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..=0x1F => {
                out.extend_from_slice(&bytes[start..i]);
                out.extend_from_slice(b"\\u00");
                hex(out, u64::from(b), 2);
                start = i + 1;
                continue;
            }
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        out.extend_from_slice(esc);
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
}

/// Appends `tpl`, replacing each `{name}` by whatever `fill` writes for `name`.
///
/// Message texts are kept as readable templates (they mirror what the real daemons print) while
/// the variable parts come from the generator's state; the callback writes straight into `out`,
/// so expansion allocates nothing.
#[inline]
pub fn expand(out: &mut Vec<u8>, tpl: &str, mut fill: impl FnMut(&mut Vec<u8>, &str)) {
    let bytes = tpl.as_bytes();
    let mut i = 0;
    while let Some(open) = bytes[i..].iter().position(|&c| c == b'{') {
        let open = i + open;
        out.extend_from_slice(&bytes[i..open]);
        let close = open
            + bytes[open..]
                .iter()
                .position(|&c| c == b'}')
                .expect("template placeholder is closed");
        fill(out, &tpl[open + 1..close]);
        i = close + 1;
    }
    out.extend_from_slice(&bytes[i..]);
}

/// A UTC civil time, broken down once per second of generated time and reused for every line
/// stamped in that second.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Civil {
    /// Seconds since the Unix epoch this was computed from.
    pub unix: i64,
    /// Proleptic Gregorian year.
    pub year: i64,
    /// 1..=12.
    pub month: u32,
    /// 1..=31.
    pub day: u32,
    /// 0..=23.
    pub hour: u32,
    /// 0..=59.
    pub minute: u32,
    /// 0..=59.
    pub second: u32,
}

const MONTHS: [&[u8; 3]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

impl Civil {
    /// Breaks down a Unix time (Howard Hinnant's `civil_from_days`, exact over the whole range).
    pub fn from_unix(unix: i64) -> Self {
        let days = unix.div_euclid(86_400);
        let secs = unix.rem_euclid(86_400) as u32;
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097) as u64;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        let year = yoe as i64 + era * 400 + i64::from(month <= 2);
        Civil {
            unix,
            year,
            month,
            day,
            hour: secs / 3600,
            minute: secs / 60 % 60,
            second: secs % 60,
        }
    }

    fn hms(&self, out: &mut Vec<u8>) {
        padded(out, u64::from(self.hour), 2);
        out.push(b':');
        padded(out, u64::from(self.minute), 2);
        out.push(b':');
        padded(out, u64::from(self.second), 2);
    }

    fn ymd(&self, out: &mut Vec<u8>) {
        padded(out, self.year.max(0) as u64, 4);
        out.push(b'-');
        padded(out, u64::from(self.month), 2);
        out.push(b'-');
        padded(out, u64::from(self.day), 2);
    }

    /// RFC 3164 `Mmm dd hh:mm:ss` (day space-padded, no year, no zone).
    pub fn rfc3164(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(MONTHS[self.month as usize - 1]);
        out.push(b' ');
        spaced(out, u64::from(self.day), 2);
        out.push(b' ');
        self.hms(out);
    }

    /// RFC 3339 in UTC with `frac_digits` fractional digits of `frac` (e.g. 3 for milliseconds),
    /// as RFC 5424, ECS `@timestamp` and Windows `TimeCreated` use.
    pub fn rfc3339(&self, out: &mut Vec<u8>, frac: u64, frac_digits: usize) {
        self.ymd(out);
        out.push(b'T');
        self.hms(out);
        if frac_digits > 0 {
            out.push(b'.');
            padded(out, frac, frac_digits);
        }
        out.push(b'Z');
    }

    /// nginx `$time_local` in UTC: `10/Oct/2000:13:55:36 +0000`.
    pub fn clf(&self, out: &mut Vec<u8>) {
        padded(out, u64::from(self.day), 2);
        out.push(b'/');
        out.extend_from_slice(MONTHS[self.month as usize - 1]);
        out.push(b'/');
        padded(out, self.year.max(0) as u64, 4);
        out.push(b':');
        self.hms(out);
        out.extend_from_slice(b" +0000");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(f: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut v = Vec::new();
        f(&mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn numbers() {
        assert_eq!(s(|o| u64(o, 0)), "0");
        assert_eq!(s(|o| u64(o, u64::MAX)), u64::MAX.to_string());
        assert_eq!(s(|o| padded(o, 7, 3)), "007");
        assert_eq!(s(|o| padded(o, 12345, 3)), "12345");
        assert_eq!(s(|o| spaced(o, 42, 5)), "   42");
        assert_eq!(s(|o| spaced(o, 123456, 5)), "123456");
        assert_eq!(s(|o| hex(o, 0xbeef, 6)), "00beef");
        assert_eq!(s(|o| ipv4(o, [10, 0, 255, 1])), "10.0.255.1");
    }

    #[test]
    fn json_escaping() {
        let got = s(|o| json_escaped(o, "a\"b\\c\nd\te\u{1}é".as_bytes()));
        assert_eq!(got, "a\\\"b\\\\c\\nd\\te\\u0001é");
    }

    #[test]
    fn template_expansion() {
        let got = s(|o| {
            expand(o, "x={a} y={b}!", |o, name| {
                o.extend_from_slice(name.to_uppercase().as_bytes())
            })
        });
        assert_eq!(got, "x=A y=B!");
    }

    #[test]
    fn civil_times() {
        let c = Civil::from_unix(0);
        assert_eq!((c.year, c.month, c.day, c.hour), (1970, 1, 1, 0));
        // 2024-02-29T23:59:58Z, a leap day.
        let c = Civil::from_unix(1_709_251_198);
        assert_eq!(s(|o| c.rfc3339(o, 5, 3)), "2024-02-29T23:59:58.005Z");
        assert_eq!(s(|o| c.rfc3164(o)), "Feb 29 23:59:58");
        assert_eq!(s(|o| c.clf(o)), "29/Feb/2024:23:59:58 +0000");
        let c = Civil::from_unix(1_704_445_506); // 2024-01-05T09:05:06Z
        assert_eq!(s(|o| c.rfc3164(o)), "Jan  5 09:05:06");
    }
}
