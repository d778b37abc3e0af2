//! Timestamp parsing for the formats log producers actually send.
//!
//! Everything is normalised to nanoseconds since the Unix epoch in an `i64`, the unit the store and
//! the detectors use. That type only reaches 2262-04-11T23:47:16.854775807Z, so although dates are
//! validated against the plausible calendar range 1970..=9999, any instant that does not fit in an
//! `i64` is rejected too (`None`) rather than wrapped or saturated: a silently wrong timestamp is
//! worse than a missing one, because the caller falls back to the receive time on `None`.
//!
//! The calendar arithmetic is Howard Hinnant's `days_from_civil`/`civil_from_days`, which is exact
//! for the proleptic Gregorian calendar and needs no tables; that keeps these functions free of
//! allocation and of panics on any input.

use std::fmt;

const NANOS_PER_SEC: i64 = 1_000_000_000;
const SECS_PER_DAY: i64 = 86_400;
const NANOS_PER_DAY: i64 = SECS_PER_DAY * NANOS_PER_SEC;
const MIN_YEAR: i64 = 1970;
const MAX_YEAR: i64 = 9999;

/// Days from 1970-01-01 to the given proleptic Gregorian date (negative before it).
///
/// The arguments are not validated, because the parsers validate first and then need the raw
/// arithmetic: out-of-range months or days give a meaningless but panic-free result, and years
/// beyond about ±2.5e16 wrap.
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let month = i64::from(month);
    let day = i64::from(day);
    // Shift the year to start in March so that the leap day is the last day of the year.
    let year = if month <= 2 {
        year.wrapping_sub(1)
    } else {
        year
    };
    let era = year.div_euclid(400);
    let yoe = year.wrapping_sub(era.wrapping_mul(400)); // [0, 399]
    let mp = (month.rem_euclid(12) + 9) % 12; // March = 0
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era.wrapping_mul(146_097)
        .wrapping_add(doe)
        .wrapping_sub(719_468)
}

/// Inverse of [`days_from_civil`]: (year, month 1-12, day 1-31). Only called with day counts derived
/// from an `i64` of nanoseconds, which are small enough for the arithmetic never to overflow.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097; // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11]
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(y) => 29,
        2 => 28,
        _ => 0,
    }
}

/// A validated wall-clock time of day; `sec` may be 60 (a leap second, folded into the next minute).
#[derive(Clone, Copy)]
struct Civil {
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    min: u32,
    sec: u32,
    nanos: u32,
}

impl Civil {
    fn valid(&self) -> bool {
        (MIN_YEAR..=MAX_YEAR).contains(&self.year)
            && (1..=12).contains(&self.month)
            && self.day >= 1
            && self.day <= days_in_month(self.year, self.month)
            && self.hour <= 23
            && self.min <= 59
            && self.sec <= 60
    }

    /// Nanoseconds since the epoch minus `offset_secs` (the zone's offset east of UTC), or `None`
    /// when invalid or outside `i64`.
    fn to_ns(self, offset_secs: i64) -> Option<i64> {
        if !self.valid() {
            return None;
        }
        let days = days_from_civil(self.year, self.month, self.day);
        // At most ~3.6e6 days: the seconds fit easily; only the nanosecond scaling can overflow.
        let secs = days * SECS_PER_DAY
            + i64::from(self.hour) * 3600
            + i64::from(self.min) * 60
            + i64::from(self.sec)
            - offset_secs;
        secs.checked_mul(NANOS_PER_SEC)?
            .checked_add(i64::from(self.nanos))
    }
}

/// Reads exactly `n` ASCII digits at `s[at..]`.
fn digits(s: &[u8], at: usize, n: usize) -> Option<u32> {
    let bytes = s.get(at..at.checked_add(n)?)?;
    let mut v: u32 = 0;
    for &b in bytes {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u32::from(b - b'0');
    }
    Some(v)
}

/// Reads a fraction of a second (1 to 9 digits) after the separator at `s[at]`, returning
/// (nanoseconds, position after the digits). Returns `(0, at)` when `s[at]` is not '.' or ','.
fn fraction(s: &[u8], at: usize) -> Option<(u32, usize)> {
    match s.get(at) {
        Some(b'.' | b',') => {}
        _ => return Some((0, at)),
    }
    let start = at + 1;
    let mut i = start;
    let mut v: u32 = 0;
    while let Some(&b) = s.get(i) {
        if !b.is_ascii_digit() {
            break;
        }
        if i - start == 9 {
            return None; // more precision than the type can hold: refuse rather than guess
        }
        v = v * 10 + u32::from(b - b'0');
        i += 1;
    }
    let n = i - start;
    if n == 0 {
        return None;
    }
    Some((v * 10u32.pow(9 - n as u32), i))
}

/// Parses an RFC 3339 timestamp (and the common relaxations of it) to nanoseconds since the epoch.
///
/// Accepts a 'T', 't' or ' ' date/time separator, a '.' or ',' fraction of 1 to 9 digits, and a
/// zone of 'Z'/'z', `±hh:mm` or `±hhmm`; a missing zone means UTC, because producers that omit it
/// (Windows event forwarding, many JSON loggers) log in UTC far more often than in local time, and
/// the parser has no local zone to apply anyway. Second 60 (a leap second) is accepted and lands on
/// the next minute's first second. The whole input must be the timestamp.
pub fn parse_rfc3339(text: &[u8]) -> Option<i64> {
    if text.len() < 19 || text[4] != b'-' || text[7] != b'-' || text[13] != b':' || text[16] != b':'
    {
        return None;
    }
    if !matches!(text[10], b'T' | b't' | b' ') {
        return None;
    }
    let civil = Civil {
        year: i64::from(digits(text, 0, 4)?),
        month: digits(text, 5, 2)?,
        day: digits(text, 8, 2)?,
        hour: digits(text, 11, 2)?,
        min: digits(text, 14, 2)?,
        sec: digits(text, 17, 2)?,
        nanos: 0,
    };
    let (nanos, i) = fraction(text, 19)?;
    let civil = Civil { nanos, ..civil };
    let offset = match &text[i..] {
        [] | [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), rest @ ..] => {
            let (h, m) = match rest.len() {
                5 if rest[2] == b':' => (digits(rest, 0, 2)?, digits(rest, 3, 2)?),
                4 => (digits(rest, 0, 2)?, digits(rest, 2, 2)?),
                _ => return None,
            };
            if h > 23 || m > 59 {
                return None;
            }
            let secs = i64::from(h * 3600 + m * 60);
            if *sign == b'-' { -secs } else { secs }
        }
        _ => return None,
    };
    civil.to_ns(offset)
}

/// Epoch numbers below these magnitudes are taken as seconds, milliseconds and microseconds
/// respectively; anything larger is nanoseconds. 1e11 seconds is the year 5138 and 1e11
/// milliseconds is 1973, so no plausible modern timestamp is ambiguous.
const EPOCH_SECS_BELOW: u64 = 100_000_000_000;
const EPOCH_MILLIS_BELOW: u64 = 100_000_000_000_000;
const EPOCH_MICROS_BELOW: u64 = 100_000_000_000_000_000;

/// Parses whatever a JSON producer put in a timestamp field: RFC 3339 (see [`parse_rfc3339`],
/// which also covers Windows' `2026-11-21 10:00:00.1234567` as UTC), or a non-negative epoch
/// number whose unit is inferred from its magnitude (seconds, millis, micros or nanos), optionally
/// with a fraction of that unit. Surrounding ASCII whitespace is ignored.
pub fn parse_timestamp(text: &[u8]) -> Option<i64> {
    let text = text.trim_ascii();
    if text.len() >= 19 && text[4] == b'-' {
        return parse_rfc3339(text);
    }
    let (int_part, frac_part) = match memchr::memchr(b'.', text) {
        Some(dot) => (&text[..dot], &text[dot + 1..]),
        None => (text, &text[text.len()..]),
    };
    if int_part.is_empty() || int_part.len() > 19 || !int_part.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if memchr::memchr(b'.', text).is_some()
        && (frac_part.is_empty() || !frac_part.iter().all(u8::is_ascii_digit))
    {
        return None;
    }
    let int = int_part
        .iter()
        .fold(0u64, |v, &b| v * 10 + u64::from(b - b'0')); // at most 19 digits: fits in u64
    let (unit_ns, unit_digits) = if int < EPOCH_SECS_BELOW {
        (1_000_000_000u64, 9usize)
    } else if int < EPOCH_MILLIS_BELOW {
        (1_000_000, 6)
    } else if int < EPOCH_MICROS_BELOW {
        (1_000, 3)
    } else {
        (1, 0)
    };
    // The fraction of one unit, in nanoseconds; digits beyond nanosecond precision are dropped.
    let mut frac_ns: u64 = 0;
    for i in 0..unit_digits {
        let d = frac_part.get(i).map_or(0, |&b| u64::from(b - b'0'));
        frac_ns = frac_ns * 10 + d;
    }
    let ns = int.checked_mul(unit_ns)?.checked_add(frac_ns)?;
    // Epoch numbers are at least 1970 by construction, and `i64` ends long before 9999.
    i64::try_from(ns).ok()
}

const MONTHS: [&[u8; 3]; 12] = [
    b"jan", b"feb", b"mar", b"apr", b"may", b"jun", b"jul", b"aug", b"sep", b"oct", b"nov", b"dec",
];

/// The fields of an RFC 3164 timestamp, before a year has been chosen for it.
#[derive(Clone, Copy)]
pub(crate) struct BsdTime {
    month: u32,
    day: u32,
    hour: u32,
    min: u32,
    sec: u32,
    nanos: u32,
}

/// Recognises `Mmm dd hh:mm:ss` (month name in any case; day as `dd`, space-padded ` d` or a bare
/// `d`; optional `.fraction` of 1-9 digits, as some network devices add) and returns the fields and
/// the bytes consumed. Syntax only: the syslog parser needs to recognise the header even when no
/// valid year can be found for it (Feb 29 in a non-leap year).
pub(crate) fn scan_bsd_timestamp(s: &[u8]) -> Option<(BsdTime, usize)> {
    let mon = s.get(..3)?;
    let month = MONTHS
        .iter()
        .position(|m| m.eq_ignore_ascii_case(mon))
        .map(|i| i as u32 + 1)?;
    if s.get(3) != Some(&b' ') {
        return None;
    }
    let (day, mut i) = match (s.get(4), s.get(5)) {
        (Some(b' '), Some(d)) if d.is_ascii_digit() => (u32::from(d - b'0'), 6),
        (Some(a), Some(b)) if a.is_ascii_digit() && b.is_ascii_digit() => {
            (u32::from(a - b'0') * 10 + u32::from(b - b'0'), 6)
        }
        (Some(a), Some(b' ')) if a.is_ascii_digit() => (u32::from(a - b'0'), 5),
        _ => return None,
    };
    if s.get(i) != Some(&b' ') || s.get(i + 3) != Some(&b':') || s.get(i + 6) != Some(&b':') {
        return None;
    }
    let hour = digits(s, i + 1, 2)?;
    let min = digits(s, i + 4, 2)?;
    let sec = digits(s, i + 7, 2)?;
    i += 9;
    // A '.' directly after the seconds only starts a fraction when a digit follows it.
    let nanos = if s.get(i) == Some(&b'.') && s.get(i + 1).is_some_and(u8::is_ascii_digit) {
        let (nanos, end) = fraction(s, i)?;
        i = end;
        nanos
    } else {
        0
    };
    if day == 0 || day > 31 || hour > 23 || min > 59 || sec > 60 {
        return None;
    }
    Some((
        BsdTime {
            month,
            day,
            hour,
            min,
            sec,
            nanos,
        },
        i,
    ))
}

/// Chooses the year for a yearless timestamp: `now`'s year, or the previous one when that would put
/// the event more than a day in the future (a December line read in January) or the date does not
/// exist in `now`'s year (Feb 29).
pub(crate) fn resolve_bsd_year(t: BsdTime, now_ns: i64) -> Option<i64> {
    let (now_year, _, _) = civil_from_days(now_ns.div_euclid(NANOS_PER_DAY));
    let civil = |year| Civil {
        year,
        month: t.month,
        day: t.day,
        hour: t.hour,
        min: t.min,
        sec: t.sec,
        nanos: t.nanos,
    };
    let horizon = now_ns.saturating_add(NANOS_PER_DAY);
    match civil(now_year).to_ns(0) {
        Some(ns) if ns <= horizon => Some(ns),
        _ => civil(now_year - 1).to_ns(0),
    }
}

/// Parses an RFC 3164 (BSD syslog) timestamp, `Mmm dd hh:mm:ss`, as UTC, returning nanoseconds and
/// the number of bytes consumed (the caller checks what follows).
///
/// The format has no year and no zone. UTC is assumed because the receiver cannot know the sender's
/// zone; the year is `now`'s, or the previous year's when that would put the event more than a day
/// in the future, which handles logs read across New Year and tolerates small clock skew.
#[cfg(test)]
pub fn parse_bsd_timestamp(text: &[u8], now_ns: i64) -> Option<(i64, usize)> {
    let (t, used) = scan_bsd_timestamp(text)?;
    Some((resolve_bsd_year(t, now_ns)?, used))
}

/// Formats nanoseconds since the epoch as RFC 3339 UTC with exactly nine fraction digits, so that
/// formatted timestamps sort lexicographically in time order and round-trip through
/// [`parse_rfc3339`]. Writes straight into the formatter: no intermediate `String`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rfc3339(
    /// Nanoseconds since the Unix epoch.
    pub i64,
);

impl fmt::Display for Rfc3339 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.0.div_euclid(NANOS_PER_SEC);
        let nanos = self.0.rem_euclid(NANOS_PER_SEC);
        let (y, m, d) = civil_from_days(secs.div_euclid(SECS_PER_DAY));
        let sod = secs.rem_euclid(SECS_PER_DAY);
        write!(
            f,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:09}Z",
            y,
            m,
            d,
            sod / 3600,
            sod / 60 % 60,
            sod % 60,
            nanos
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NS: i64 = NANOS_PER_SEC;

    /// 2026-11-21T10:00:00Z, used as "now" in tests.
    const NOV21: i64 = 1_795_255_200 * NS;

    #[test]
    fn days_from_civil_known_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(2026, 11, 21), 20_778); // cross-checked with Python datetime
        assert_eq!(
            days_from_civil(2024, 2, 29) + 1,
            days_from_civil(2024, 3, 1)
        );
        assert_eq!(
            days_from_civil(2100, 2, 28) + 1,
            days_from_civil(2100, 3, 1)
        );
        // Garbage in is harmless.
        let _ = days_from_civil(i64::MAX, u32::MAX, 0);
        let _ = days_from_civil(i64::MIN, 0, u32::MAX);
    }

    #[test]
    fn civil_round_trip_over_a_long_span() {
        let mut z = days_from_civil(1970, 1, 1);
        let end = days_from_civil(2400, 1, 1);
        while z < end {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z);
            assert!(d >= 1 && d <= days_in_month(y, m));
            z += 1;
        }
    }

    #[test]
    fn rfc3339_variants() {
        let base = NOV21;
        assert_eq!(parse_rfc3339(b"2026-11-21T10:00:00Z"), Some(base));
        assert_eq!(parse_rfc3339(b"2026-11-21t10:00:00z"), Some(base));
        assert_eq!(parse_rfc3339(b"2026-11-21 10:00:00"), Some(base));
        assert_eq!(
            parse_rfc3339(b"2026-11-21T10:00:00.5Z"),
            Some(base + NS / 2)
        );
        assert_eq!(
            parse_rfc3339(b"2026-11-21T10:00:00.123456789Z"),
            Some(base + 123_456_789)
        );
        assert_eq!(parse_rfc3339(b"2026-11-21T11:30:00+01:30"), Some(base));
        assert_eq!(parse_rfc3339(b"2026-11-21T11:30:00+0130"), Some(base));
        assert_eq!(parse_rfc3339(b"2026-11-21T05:00:00-05:00"), Some(base));
        assert_eq!(
            parse_rfc3339(b"2026-11-21T10:00:01.123456+00:00"),
            Some(base + NS + 123_456_000)
        );
        assert_eq!(
            parse_rfc3339(b"2026-11-21T10:00:00,25Z"),
            Some(base + NS / 4)
        );
        // Leap second folds into the next minute.
        assert_eq!(parse_rfc3339(b"2026-11-21T09:59:60Z"), Some(base));
        assert_eq!(
            parse_rfc3339(b"2024-02-29T00:00:00Z"),
            Some(1_709_164_800 * NS)
        );
    }

    #[test]
    fn rfc3339_rejects() {
        for bad in [
            &b""[..],
            b"2026-11-21",
            b"2026-11-21T10:00",
            b"2026-13-01T00:00:00Z",
            b"2026-00-01T00:00:00Z",
            b"2026-02-30T00:00:00Z",
            b"2025-02-29T00:00:00Z",
            b"2100-02-29T00:00:00Z",
            b"2026-11-31T00:00:00Z",
            b"2026-11-21T24:00:00Z",
            b"2026-11-21T10:60:00Z",
            b"2026-11-21T10:00:61Z",
            b"1969-12-31T23:59:59Z",
            b"2026-11-21T10:00:00.Z",
            b"2026-11-21T10:00:00.1234567890Z",
            b"2026-11-21T10:00:00+24:00",
            b"2026-11-21T10:00:00+01",
            b"2026-11-21T10:00:00+01:3",
            b"2026-11-21T10:00:00ZZ",
            b"2026-11-21X10:00:00Z",
            b"2026-11-21T10:00:00 ",
            b"2026-1a-21T10:00:00Z",
            b"+026-11-21T10:00:00Z",
            // Valid calendar dates that do not fit in i64 nanoseconds.
            b"2263-01-01T00:00:00Z",
            b"9999-12-31T23:59:59Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{}", String::from_utf8_lossy(bad));
        }
        assert!(parse_rfc3339(b"2262-04-11T23:47:16.854775807Z").is_some());
        assert_eq!(parse_rfc3339(b"2262-04-11T23:47:16.854775808Z"), None);
    }

    #[test]
    fn timestamp_formats() {
        let base = NOV21;
        assert_eq!(parse_timestamp(b"2026-11-21T10:00:00Z"), Some(base));
        assert_eq!(
            parse_timestamp(b"2026-11-21 10:00:00.1234567"),
            Some(base + 123_456_700)
        );
        assert_eq!(parse_timestamp(b"1795255200"), Some(base));
        assert_eq!(parse_timestamp(b"1795255200.5"), Some(base + NS / 2));
        assert_eq!(parse_timestamp(b"1795255200123"), Some(base + 123_000_000));
        assert_eq!(
            parse_timestamp(b"1795255200123.5"),
            Some(base + 123_500_000)
        );
        assert_eq!(
            parse_timestamp(b"1795255200123456"),
            Some(base + 123_456_000)
        );
        assert_eq!(
            parse_timestamp(b"1795255200123456789"),
            Some(base + 123_456_789)
        );
        assert_eq!(parse_timestamp(b" 1795255200 "), Some(base));
        assert_eq!(parse_timestamp(b"0"), Some(0));
        assert_eq!(parse_timestamp(b"1.0000000019"), Some(NS + 1));
    }

    #[test]
    fn timestamp_rejects() {
        for bad in [
            &b""[..],
            b"-1",
            b"abc",
            b"1e9",
            b"1795255200.",
            b".5",
            b"17952552x0",
            b"1795255200.5.5",
            b"99999999999999999999",
            b"9999999999999999999",
            b"2026-11-21",
            b"2026-11-21T10:00:00Q",
        ] {
            assert_eq!(
                parse_timestamp(bad),
                None,
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn bsd_timestamps() {
        let now = NOV21;
        let nov21 = |h: i64, m: i64, s: i64| now - 10 * 3600 * NS + (h * 3600 + m * 60 + s) * NS;
        assert_eq!(
            parse_bsd_timestamp(b"Nov 21 10:00:01 web-01", now),
            Some((nov21(10, 0, 1), 15))
        );
        assert_eq!(
            parse_bsd_timestamp(b"nov 21 09:00:00", now),
            Some((nov21(9, 0, 0), 15))
        );
        let nov1 = days_from_civil(2026, 11, 1) * NANOS_PER_DAY;
        assert_eq!(
            parse_bsd_timestamp(b"Nov  1 00:00:00", now),
            Some((nov1, 15))
        );
        assert_eq!(
            parse_bsd_timestamp(b"Nov 01 00:00:00", now),
            Some((nov1, 15))
        );
        assert_eq!(
            parse_bsd_timestamp(b"Nov 1 00:00:00 x", now),
            Some((nov1, 14))
        );
        assert_eq!(
            parse_bsd_timestamp(b"Nov 21 10:00:01.250 x", now),
            Some((nov21(10, 0, 1) + NS / 4, 19))
        );
        // A '.' not followed by a digit is not a fraction.
        assert_eq!(
            parse_bsd_timestamp(b"Nov 21 10:00:01. x", now),
            Some((nov21(10, 0, 1), 15))
        );
        // Up to a day ahead stays in this year (clock skew); further ahead is last year.
        assert_eq!(
            parse_bsd_timestamp(b"Nov 22 09:00:00", now).map(|t| t.0),
            Some(nov21(9, 0, 0) + NANOS_PER_DAY)
        );
        let dec_last_year = days_from_civil(2025, 12, 31) * NANOS_PER_DAY;
        assert_eq!(
            parse_bsd_timestamp(b"Dec 31 00:00:00", now),
            Some((dec_last_year, 15))
        );
        // Feb 29 read in a non-leap year after a leap year resolves to the leap year.
        let now_2029 = days_from_civil(2029, 1, 5) * NANOS_PER_DAY;
        assert_eq!(
            parse_bsd_timestamp(b"Feb 29 12:00:00", now_2029).map(|t| t.0),
            Some(days_from_civil(2028, 2, 29) * NANOS_PER_DAY + 12 * 3600 * NS)
        );
        assert_eq!(parse_bsd_timestamp(b"Feb 29 12:00:00", NOV21), None);
    }

    #[test]
    fn bsd_rejects() {
        for bad in [
            &b""[..],
            b"Nov",
            b"Nox 21 10:00:00",
            b"Nov 21 10:00",
            b"Nov 32 10:00:00",
            b"Nov 00 10:00:00",
            b"Nov 21 24:00:00",
            b"Nov 21 10:60:00",
            b"Nov 21 1:00:00",
            b"Nov21 10:00:00",
            b"Nov 21 10:00:00.1234567890",
            b"Nov  x 10:00:00",
        ] {
            assert_eq!(
                parse_bsd_timestamp(bad, NOV21),
                None,
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        // "now" values whose year is out of range must not panic.
        for now in [i64::MIN, -1, 0, i64::MAX] {
            let _ = parse_bsd_timestamp(b"Jan  1 00:00:00", now);
        }
        assert_eq!(parse_bsd_timestamp(b"Dec 31 00:00:00", 0), None); // would be 1969
    }

    #[test]
    fn display_round_trips() {
        assert_eq!(Rfc3339(0).to_string(), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(
            Rfc3339(NOV21 + 123_456_789).to_string(),
            "2026-11-21T10:00:00.123456789Z"
        );
        assert_eq!(Rfc3339(-1).to_string(), "1969-12-31T23:59:59.999999999Z");
        assert_eq!(
            Rfc3339(i64::MAX).to_string(),
            "2262-04-11T23:47:16.854775807Z"
        );
        assert_eq!(
            Rfc3339(i64::MIN).to_string(),
            "1677-09-21T00:12:43.145224192Z"
        );
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..5000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let ns = (x >> 2) as i64; // 0 ..= 2^62
            let s = Rfc3339(ns).to_string();
            assert_eq!(parse_rfc3339(s.as_bytes()), Some(ns), "{s}");
            assert_eq!(parse_timestamp(s.as_bytes()), Some(ns), "{s}");
        }
    }

    #[test]
    fn fuzz_never_panics() {
        let seeds: [&[u8]; 6] = [
            b"2026-11-21T10:00:00.123456789+01:00",
            b"Nov  1 10:00:00.5",
            b"1795255200123.456",
            b"2026-11-21 10:00:00.1234567",
            b"Feb 29 23:59:60",
            b"9999-12-31T23:59:60Z",
        ];
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut buf = Vec::new();
        for i in 0..20_000 {
            buf.clear();
            buf.extend_from_slice(seeds[i % seeds.len()]);
            for _ in 0..(next() % 4) {
                let r = next();
                let len = buf.len();
                match r % 4 {
                    0 if len > 0 => buf[(r >> 8) as usize % len] = (r >> 16) as u8,
                    1 if len > 0 => buf.truncate((r >> 8) as usize % len),
                    2 => buf.push(b"0123456789:.-+TZ "[(r >> 8) as usize % 17]),
                    _ => buf.push((r >> 8) as u8),
                }
            }
            let now = next() as i64;
            let _ = parse_rfc3339(&buf);
            let _ = parse_timestamp(&buf);
            if let Some((ns, used)) = parse_bsd_timestamp(&buf, now) {
                assert!(used <= buf.len());
                let _ = Rfc3339(ns).to_string();
            }
            let _ = parse_bsd_timestamp(&buf, NOV21);
        }
    }
}
