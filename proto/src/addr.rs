//! The text grammar of IP addresses and host names, shared by every scanner that looks for them
//! in a log line: entity extraction (`dataplane`, which also places roles), template masking
//! (`dataplane`, which turns them into `<IP>`) and the indicator scan (`rules`, which looks them
//! up). Each scanner keeps its own loop, because each looks for different things around the
//! address (a role keyword, a placeholder's neighbours, a token of an indicator's shape), but they
//! agree on what an address is: `1.2.3.999` is an address to none of them and `1.2.3.4` to all.
//!
//! Functions read bytes, allocate nothing and are `#[inline]`: they sit on the per-event path.

/// The dotted quad at the start of `text`: its value and length. Octets are one to three decimal
/// digits of at most 255 (zero-padded octets such as `010` are decimal, as log writers mean them);
/// a fourth digit continuing the last octet (`1.2.3.4567`) makes it no address. What follows the
/// quad is the caller's to judge (a port, a prefix length, the end of a sentence).
///
/// ```
/// use watchpost_proto::addr::dotted_quad;
/// assert_eq!(dotted_quad(b"10.0.0.1:22"), Some((0x0a00_0001, 8)));
/// assert_eq!(dotted_quad(b"10.0.0.256"), None);
/// ```
#[inline]
pub fn dotted_quad(text: &[u8]) -> Option<(u32, usize)> {
    let mut i = 0;
    let mut value: u32 = 0;
    for octet in 0..4 {
        if octet > 0 {
            if text.get(i) != Some(&b'.') {
                return None;
            }
            i += 1;
        }
        let start = i;
        let mut part: u32 = 0;
        while i < text.len() && text[i].is_ascii_digit() && i - start < 3 {
            part = part * 10 + u32::from(text[i] - b'0');
            i += 1;
        }
        if i == start || part > 255 {
            return None;
        }
        value = value << 8 | part;
    }
    if text.get(i).is_some_and(u8::is_ascii_digit) {
        return None;
    }
    Some((value, i))
}

/// Whether all of `text` is an IPv6 address in an RFC 4291 text form: eight groups, or fewer
/// with one `::`, the last two groups optionally a dotted quad. `::` alone is refused (it names no
/// host), and so are eight two-digit groups, which are a MAC or EUI-64 in logs, not an address.
///
/// ```
/// use watchpost_proto::addr::is_ipv6;
/// assert!(is_ipv6(b"fe80::1") && is_ipv6(b"::ffff:10.0.0.1"));
/// assert!(!is_ipv6(b"00:11:22:33:44:55:66:77") && !is_ipv6(b"::"));
/// ```
#[inline]
pub fn is_ipv6(text: &[u8]) -> bool {
    if text.len() < 2 || !text.iter().any(u8::is_ascii_hexdigit) {
        return false;
    }
    let (head, tail, compressed) = match find_double_colon(text) {
        Some(i) => (&text[..i], &text[i + 2..], true),
        None => (text, &text[..0], false),
    };
    let mut groups = 0;
    let mut all_two_digit = true;
    for (part, is_last_part) in [(head, !compressed), (tail, true)] {
        if part.is_empty() {
            continue;
        }
        let fields = part.split(|&c| c == b':').count();
        for (k, group) in part.split(|&c| c == b':').enumerate() {
            let last = is_last_part && k == fields - 1;
            if last && group.contains(&b'.') {
                if dotted_quad(group).map(|(_, len)| len) != Some(group.len()) {
                    return false;
                }
                groups += 2;
                all_two_digit = false;
                continue;
            }
            if group.is_empty() || group.len() > 4 || !group.iter().all(u8::is_ascii_hexdigit) {
                return false;
            }
            all_two_digit &= group.len() == 2;
            groups += 1;
        }
    }
    if compressed {
        groups <= 7
    } else {
        groups == 8 && !all_two_digit
    }
}

fn find_double_colon(text: &[u8]) -> Option<usize> {
    text.windows(2).position(|pair| pair == b"::")
}

/// Whether `text` is a DNS-style host name: letters, digits, `-`, `_` and `.`, at least one
/// letter (so that numbers and broken addresses are not hosts), no empty label, no label starting
/// or ending the name with `-` or `.`, at most 253 bytes.
///
/// ```
/// use watchpost_proto::addr::is_hostname;
/// assert!(is_hostname(b"web-01.example.com"));
/// assert!(!is_hostname(b"10.0.0.1") && !is_hostname(b"a..b"));
/// ```
#[inline]
pub fn is_hostname(text: &[u8]) -> bool {
    !text.is_empty()
        && text.len() <= 253
        && text.iter().any(u8::is_ascii_alphabetic)
        && text
            .iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && !matches!(text[0], b'-' | b'.')
        && !matches!(text[text.len() - 1], b'-' | b'.')
        && find_double_dot(text).is_none()
}

/// Whether `text` names no network address shared between hosts: a loopback address
/// (`127.0.0.0/8`, `::1`, `::ffff:127.x.x.x`), the unspecified one (`0.0.0.0`, `::`), or the
/// `-` Windows and many logs write for "none". `127.0.0.1` in a logon on one workstation and in
/// a logon on another are two different machines talking to themselves, not one address acting
/// on both; as an entity or a correlation's group it would join every host's local activity into
/// one attacker (docs/entities.md, "Local addresses"). Allocates nothing.
///
/// ```
/// use watchpost_proto::addr::is_local_address;
/// assert!(is_local_address("127.0.0.1") && is_local_address("::1") && is_local_address("-"));
/// assert!(is_local_address("0.0.0.0") && is_local_address("[::]"));
/// assert!(!is_local_address("10.0.0.1") && !is_local_address("fe80::1"));
/// assert!(!is_local_address("web-01"));
/// ```
pub fn is_local_address(text: &str) -> bool {
    let t = text.trim();
    if t == "-" {
        return true;
    }
    let t = t.trim_start_matches('[').trim_end_matches(']');
    let t = t.split('%').next().unwrap_or(t);
    match t.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(v4)) => v4.is_loopback() || v4.is_unspecified(),
        Ok(std::net::IpAddr::V6(v6)) => {
            v6.is_loopback()
                || v6.is_unspecified()
                || v6
                    .to_ipv4_mapped()
                    .is_some_and(|v4| v4.is_loopback() || v4.is_unspecified())
        }
        Err(_) => false,
    }
}

fn find_double_dot(text: &[u8]) -> Option<usize> {
    text.windows(2).position(|pair| pair == b"..")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    #[test]
    fn dotted_quads_agree_with_the_standard_parser_where_it_reads_them() {
        for text in [
            "0.0.0.0",
            "255.255.255.255",
            "192.168.1.10",
            "1.2.3.4",
            "256.1.1.1",
            "1.2.3",
            "1.2.3.4.",
            "1..2.3",
            "1.2.3.4567",
            "a.b.c.d",
        ] {
            let ours = dotted_quad(text.as_bytes())
                .filter(|&(_, len)| len == text.len())
                .map(|(v, _)| Ipv4Addr::from(v));
            assert_eq!(ours, text.parse::<Ipv4Addr>().ok(), "{text}");
        }
        // Zero-padded octets are read as decimal (the standard parser refuses them).
        assert_eq!(dotted_quad(b"010.001.000.009"), Some((0x0a01_0009, 15)));
        assert_eq!(dotted_quad(b"1.2.3.4:22"), Some((0x0102_0304, 7)));
    }

    #[test]
    fn ipv6_forms_agree_with_the_standard_parser_except_macs() {
        for text in [
            "::1",
            "fe80::1",
            "2001:db8::8a2e:370:7334",
            "2001:0db8:0000:0000:0000:ff00:0042:8329",
            "::ffff:192.0.2.1",
            "1::2::3",
            "12345::1",
            "g::1",
            "1:2:3:4:5:6:7",
            "1:2:3:4:5:6:7:8:9",
        ] {
            assert_eq!(
                is_ipv6(text.as_bytes()),
                text.parse::<Ipv6Addr>().is_ok(),
                "{text}"
            );
        }
        assert!(!is_ipv6(b"::"));
        assert!(!is_ipv6(b"00:1a:2b:3c:4d:5e:6f:70"));
    }

    #[test]
    fn host_names_need_a_letter_and_whole_labels() {
        assert!(is_hostname(b"db_backup-2.corp.example"));
        assert!(is_hostname(b"localhost"));
        for bad in [
            &b""[..],
            b"1234",
            b"-lead.example",
            b"trail.",
            b"a..b",
            b"sp ace",
        ] {
            assert!(!is_hostname(bad), "{}", String::from_utf8_lossy(bad));
        }
        assert!(!is_hostname(&[b'a'; 254]));
    }
}
