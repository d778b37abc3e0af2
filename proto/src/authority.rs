//! The authority of an HTTP request (`Host: name[:port]`) and the names the service answers to.
//!
//! Why it matters: the service binds to loopback and trusts that only local users reach it. A web
//! page on an attacker's domain can rebind that domain's DNS name to 127.0.0.1 (DNS rebinding);
//! the browser then takes the service for the attacker's own origin and lets the page read and
//! change it. The one thing such a request cannot fake is its `Host`, which still names the
//! attacker's domain. So requests are answered only when the `Host` is one of the service's own
//! names: the loopback names and the bind address at the listener's port, and the names operators
//! list (`api_allowed_hosts`) for a reverse proxy or a DNS name of the sensor.
//!
//! Matching is exact: names compare without regard to case, addresses by value (`[::1]` and
//! `[0:0::1]` are one address), and a name with no port in `Host` means port 80, as in HTTP.

use crate::ParseError;
use std::fmt;
use std::net::IpAddr;

/// The host part of an authority.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostName {
    /// A registered name, lower case (`localhost`, `sensor-01.corp.example`).
    Name(String),
    /// An address literal (`127.0.0.1`, `[::1]`).
    Address(IpAddr),
}

/// `host[:port]`, as in an HTTP `Host` header or an `api_allowed_hosts` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Authority {
    /// The host.
    pub host: HostName,
    /// The port, when written.
    pub port: Option<u16>,
}

/// Longest DNS name (RFC 1035), in characters.
const MAX_NAME_LEN: usize = 253;

impl Authority {
    /// Parses `name`, `name:port`, `1.2.3.4[:port]` or `[v6][:port]`. Refuses anything else:
    /// user information, paths, empty or over-long names, characters a DNS name cannot hold.
    pub fn parse(text: &str) -> Result<Authority, ParseError> {
        let bad = |reason: &'static str| {
            Err(ParseError::Authority {
                text: text.to_string(),
                reason,
            })
        };
        let (host, port) = if let Some(rest) = text.strip_prefix('[') {
            let Some((inside, after)) = rest.split_once(']') else {
                return bad("`[` without `]`");
            };
            let Ok(ip) = inside.parse::<std::net::Ipv6Addr>() else {
                return bad("not an IPv6 address inside the brackets");
            };
            let port = match after {
                "" => None,
                p => match p.strip_prefix(':') {
                    Some(p) => Some(p),
                    None => return bad("text after `]`"),
                },
            };
            (HostName::Address(IpAddr::V6(ip)), port)
        } else {
            let (name, port) = match text.rsplit_once(':') {
                Some((n, p)) => (n, Some(p)),
                None => (text, None),
            };
            if name.is_empty() {
                return bad("no host");
            }
            if name.len() > MAX_NAME_LEN {
                return bad("longer than a DNS name can be");
            }
            if name.contains(':') {
                return bad("an IPv6 address must be in brackets");
            }
            let host = match name.parse::<std::net::Ipv4Addr>() {
                Ok(ip) => HostName::Address(IpAddr::V4(ip)),
                Err(_) => {
                    let allowed =
                        |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_');
                    if !name.chars().all(allowed) {
                        return bad("a name holds only letters, digits, `-`, `_` and `.`");
                    }
                    HostName::Name(name.to_ascii_lowercase())
                }
            };
            (host, port)
        };
        let port = match port {
            None => None,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 && p.bytes().all(|b| b.is_ascii_digit()) => Some(n),
                _ => return bad("the port is not 1-65535"),
            },
        };
        Ok(Authority { host, port })
    }

    /// The port a request meant: the written one, or HTTP's 80.
    pub fn effective_port(&self) -> u16 {
        self.port.unwrap_or(80)
    }
}

impl fmt::Display for Authority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            HostName::Name(n) => f.write_str(n)?,
            HostName::Address(IpAddr::V4(ip)) => write!(f, "{ip}")?,
            HostName::Address(IpAddr::V6(ip)) => write!(f, "[{ip}]")?,
        }
        match self.port {
            Some(p) => write!(f, ":{p}"),
            None => Ok(()),
        }
    }
}

/// The `Host` values one listener answers: a list of authorities, where an entry without a port
/// allows its host at any port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllowedHosts {
    entries: Vec<Authority>,
    /// The listener binds every address (`0.0.0.0`, `::`): any address literal at its port is
    /// one of its own. A literal cannot be rebound, so this opens nothing to DNS rebinding.
    any_address_at: Option<u16>,
}

impl AllowedHosts {
    /// The names of a listener bound to `bind_address:port`: `localhost`, `127.0.0.1`, `[::1]` and
    /// the bind address at `port`, plus `extra` (entries of `api_allowed_hosts`; invalid ones,
    /// which configuration validation refuses at start, are skipped here).
    pub fn for_listener(bind_address: &str, port: u16, extra: &[String]) -> AllowedHosts {
        let at = |host: HostName| Authority {
            host,
            port: Some(port),
        };
        let mut entries = vec![
            at(HostName::Name("localhost".into())),
            at(HostName::Address(IpAddr::from([127, 0, 0, 1]))),
            at(HostName::Address(IpAddr::from([0u16, 0, 0, 0, 0, 0, 0, 1]))),
        ];
        let bind = bind_address.parse::<IpAddr>().ok();
        if let Some(ip) = bind
            && !ip.is_unspecified()
        {
            entries.push(at(HostName::Address(ip)));
        }
        entries.extend(extra.iter().filter_map(|e| Authority::parse(e).ok()));
        AllowedHosts {
            entries,
            any_address_at: bind.filter(IpAddr::is_unspecified).map(|_| port),
        }
    }

    /// Whether a request whose `Host` header is `host` may be answered.
    pub fn allows(&self, host: &str) -> bool {
        let Ok(asked) = Authority::parse(host.trim()) else {
            return false;
        };
        let port = asked.effective_port();
        if matches!(asked.host, HostName::Address(_)) && self.any_address_at == Some(port) {
            return true;
        }
        self.entries
            .iter()
            .any(|e| e.host == asked.host && e.port.is_none_or(|p| p == port))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities_parse_names_addresses_and_ports() {
        let a = Authority::parse("Sensor-01.Corp.example:8443").unwrap();
        assert_eq!(a.host, HostName::Name("sensor-01.corp.example".into()));
        assert_eq!(a.port, Some(8443));
        assert_eq!(a.to_string(), "sensor-01.corp.example:8443");
        let v6 = Authority::parse("[0:0::1]:8080").unwrap();
        assert_eq!(v6.to_string(), "[::1]:8080");
        assert_eq!(Authority::parse("10.0.0.5").unwrap().effective_port(), 80);
        for bad in [
            "",
            ":8080",
            "a b",
            "user@host",
            "host/path",
            "::1",
            "[::1",
            "[::1]x",
            "[not-v6]",
            "host:0",
            "host:65536",
            "host:+80",
            "host:",
            &"a".repeat(254),
        ] {
            assert!(Authority::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_loopback_listener_answers_its_own_names_at_its_port_only() {
        let h = AllowedHosts::for_listener("127.0.0.1", 8080, &[]);
        for ok in [
            "localhost:8080",
            "LOCALHOST:8080",
            "127.0.0.1:8080",
            "[::1]:8080",
        ] {
            assert!(h.allows(ok), "{ok}");
        }
        for refused in [
            "rebind.attacker.example:8080",
            "rebind.attacker.example",
            "localhost:9090",
            "localhost",
            "10.0.0.5:8080",
            "localhost.:8080",
            "",
        ] {
            assert!(!h.allows(refused), "{refused}");
        }
        let on_80 = AllowedHosts::for_listener("127.0.0.1", 80, &[]);
        assert!(on_80.allows("localhost"), "no port in Host means 80");
    }

    #[test]
    fn listed_names_and_the_bind_address_are_allowed() {
        let h = AllowedHosts::for_listener(
            "10.0.0.5",
            8080,
            &["soc.corp.example".into(), "proxy.corp.example:8443".into()],
        );
        assert!(h.allows("10.0.0.5:8080"));
        assert!(!h.allows("10.0.0.6:8080"));
        assert!(
            h.allows("soc.corp.example"),
            "a listed name without port: any port"
        );
        assert!(h.allows("soc.corp.example:9999"));
        assert!(h.allows("proxy.corp.example:8443"));
        assert!(!h.allows("proxy.corp.example"));
        assert!(!h.allows("evil.corp.example:8080"));
    }

    #[test]
    fn an_unspecified_bind_address_answers_address_literals_but_not_names() {
        let h = AllowedHosts::for_listener("0.0.0.0", 8080, &[]);
        assert!(h.allows("192.0.2.10:8080"));
        assert!(h.allows("[2001:db8::1]:8080"));
        assert!(!h.allows("192.0.2.10:9090"));
        assert!(!h.allows("sensor-01:8080"), "names must be listed");
        assert!(!h.allows("0.0.0.0.attacker.example:8080"));
    }
}
