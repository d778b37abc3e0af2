//! The address of the shared rate-limit store (`api_rate_limit_store_url`), parsed once at start
//! so that a bad URL is a configuration error with a message, not a failure on the first request.
//!
//! The forms are those Redis users write (docs/api.md, Rate limits):
//!
//! | URL | what |
//! |---|---|
//! | `redis://[user:password@]host[:6379][/db]` | one server |
//! | `rediss://[user:password@]host[:6379][/db]` | one server over TLS |
//! | `unix:///path[?db=N&user=U&password=P]` | a Unix socket |
//! | `redis+sentinel://[user:password@]host[:26379][,host[:26379]...]/master[/db][?sentinel_user=U&sentinel_password=P]` | the master Sentinel names |
//! | `rediss+sentinel://...` | the same, TLS to the sentinels and the master |
//!
//! Credentials are percent-decoded (`%40` for `@`), as in every Redis client's URLs. With
//! Sentinel, those before the `@` are the master's, and the sentinels' own (Sentinel's
//! `requirepass`, often unset) are query parameters: the two are separate settings in Redis, and
//! in redis-py (`sentinel_kwargs`) and go-redis (`SentinelPassword`) alike.

use crate::ParseError;
use std::path::PathBuf;

/// Where the store listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreAddress {
    /// One server.
    Tcp(HostPort),
    /// A Unix socket path.
    Unix(PathBuf),
    /// The master that these sentinels name.
    Sentinel {
        /// The sentinels asked, in order.
        sentinels: Vec<HostPort>,
        /// The master's name in their configuration (`sentinel monitor <name> ...`).
        master: String,
        /// The sentinels' ACL user (`sentinel_user=`).
        user: Option<String>,
        /// The sentinels' password (`sentinel_password=`).
        password: Option<String>,
    },
}

/// A host (an IPv6 literal without its brackets) and a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPort {
    /// Name or address.
    pub host: String,
    /// Port.
    pub port: u16,
}

impl std::fmt::Display for HostPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// A parsed store URL (the module's table gives the forms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreUrl {
    /// Where to connect.
    pub address: StoreAddress,
    /// TLS to every server named (`rediss://`, `rediss+sentinel://`).
    pub tls: bool,
    /// ACL user, when the URL names one (else Redis's `default` user).
    pub user: Option<String>,
    /// Password, when the URL has one.
    pub password: Option<String>,
    /// `SELECT` database.
    pub db: u32,
}

impl StoreUrl {
    /// Parses the store URL.
    pub fn parse(url: &str) -> Result<StoreUrl, ParseError> {
        Self::parse_text(url).map_err(ParseError::StoreUrl)
    }

    /// Where the store is, for `/health` and logs: no credentials.
    pub fn display(&self) -> String {
        let scheme = if self.tls { "tls " } else { "" };
        match &self.address {
            StoreAddress::Tcp(h) => format!("{scheme}{h}"),
            StoreAddress::Unix(p) => p.display().to_string(),
            StoreAddress::Sentinel {
                sentinels, master, ..
            } => {
                let list: Vec<String> = sentinels.iter().map(|s| s.to_string()).collect();
                format!("{scheme}master {master} via sentinel {}", list.join(","))
            }
        }
    }

    fn parse_text(url: &str) -> Result<StoreUrl, String> {
        if let Some(rest) = url.strip_prefix("unix://") {
            return parse_unix(rest);
        }
        let (rest, tls, sentinel) = if let Some(r) = url.strip_prefix("redis://") {
            (r, false, false)
        } else if let Some(r) = url.strip_prefix("rediss://") {
            (r, true, false)
        } else if let Some(r) = url.strip_prefix("redis+sentinel://") {
            (r, false, true)
        } else if let Some(r) = url.strip_prefix("rediss+sentinel://") {
            (r, true, true)
        } else {
            return Err(
                "must start with redis://, rediss://, unix://, redis+sentinel:// \
                        or rediss+sentinel://"
                    .into(),
            );
        };
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (credentials, hosts) = match authority.rsplit_once('@') {
            Some((c, h)) => (Some(c), h),
            None => (None, authority),
        };
        let (user, password) = match credentials {
            None => (None, None),
            Some(c) => match c.split_once(':') {
                Some((u, p)) => (
                    (!u.is_empty()).then(|| percent_decode(u)).transpose()?,
                    Some(percent_decode(p)?),
                ),
                None => (Some(percent_decode(c)?), None),
            },
        };
        if hosts.is_empty() {
            return Err("the URL has no host".into());
        }
        let mut segments = path.split('/').filter(|s| !s.is_empty());
        let address = if sentinel {
            let sentinels = hosts
                .split(',')
                .map(|h| host_port(h, 26379))
                .collect::<Result<Vec<_>, _>>()?;
            let master = segments
                .next()
                .ok_or("a sentinel URL names the master after the hosts: .../mymaster[/db]")?;
            let (mut user, mut password) = (None, None);
            for kv in query.split('&').filter(|s| !s.is_empty()) {
                match kv.split_once('=') {
                    Some(("sentinel_user", u)) => user = Some(percent_decode(u)?),
                    Some(("sentinel_password", p)) => password = Some(percent_decode(p)?),
                    _ => return Err(format!("unknown parameter `{kv}` in the sentinel URL")),
                }
            }
            StoreAddress::Sentinel {
                sentinels,
                master: percent_decode(master)?,
                user,
                password,
            }
        } else {
            if !query.is_empty() {
                return Err(format!("unknown parameter `{query}` in the redis URL"));
            }
            if hosts.contains(',') {
                return Err("several hosts are for Sentinel: redis+sentinel://h1,h2/master".into());
            }
            StoreAddress::Tcp(host_port(hosts, 6379)?)
        };
        let db = match segments.next() {
            None => 0,
            Some(n) => n
                .parse()
                .map_err(|_| format!("`/{n}` is not a database number"))?,
        };
        if let Some(extra) = segments.next() {
            return Err(format!("unexpected `/{extra}` after the database number"));
        }
        Ok(StoreUrl {
            address,
            tls,
            user,
            password,
            db,
        })
    }
}

fn parse_unix(rest: &str) -> Result<StoreUrl, String> {
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (mut db, mut user, mut password) = (0, None, None);
    for kv in query.split('&').filter(|s| !s.is_empty()) {
        match kv.split_once('=') {
            Some(("db", n)) => db = n.parse().map_err(|_| format!("bad db `{n}`"))?,
            Some(("user", u)) => user = Some(percent_decode(u)?),
            Some(("password", p)) => password = Some(percent_decode(p)?),
            _ => return Err(format!("unknown parameter `{kv}` in the unix:// URL")),
        }
    }
    if path.is_empty() {
        return Err("unix:// needs a socket path".into());
    }
    Ok(StoreUrl {
        address: StoreAddress::Unix(path.into()),
        tls: false,
        user,
        password,
        db,
    })
}

/// `host[:port]` or `[v6][:port]`.
fn host_port(text: &str, default_port: u16) -> Result<HostPort, String> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("`{text}`: an IPv6 address needs its closing `]`"))?;
        match after {
            "" => (host, None),
            p => (
                host,
                Some(
                    p.strip_prefix(':')
                        .ok_or_else(|| format!("`{text}`: `:port` must follow `]`"))?,
                ),
            ),
        }
    } else {
        match text.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (text, None),
        }
    };
    if host.is_empty() {
        return Err(format!("`{text}` has no host"));
    }
    let port = match port {
        None => default_port,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| format!("`{p}` is not a port (in `{text}`)"))?,
    };
    Ok(HostPort {
        host: host.to_string(),
        port,
    })
}

/// `%XX` escapes decoded, as URL credentials are written.
fn percent_decode(text: &str) -> Result<String, String> {
    let mut out = Vec::with_capacity(text.len());
    let mut bytes = text.bytes();
    while let Some(b) = bytes.next() {
        if b != b'%' {
            out.push(b);
            continue;
        }
        let hex = [bytes.next(), bytes.next()];
        let digit = |c: Option<u8>| (c? as char).to_digit(16);
        match (digit(hex[0]), digit(hex[1])) {
            (Some(h), Some(l)) => out.push((h * 16 + l) as u8),
            _ => return Err("a `%` in the URL is not followed by two hex digits".into()),
        }
    }
    String::from_utf8(out).map_err(|_| "the URL's credentials are not UTF-8 once decoded".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hp(host: &str, port: u16) -> HostPort {
        HostPort {
            host: host.into(),
            port,
        }
    }

    #[test]
    fn single_server_urls_parse_with_their_defaults() {
        let t = StoreUrl::parse("redis://:pw@10.0.0.5/2").unwrap();
        assert_eq!(t.address, StoreAddress::Tcp(hp("10.0.0.5", 6379)));
        assert_eq!(
            (t.user, t.password, t.db, t.tls),
            (None, Some("pw".into()), 2, false)
        );
        let t = StoreUrl::parse("redis://u:p@[::1]:7000").unwrap();
        assert_eq!(t.address, StoreAddress::Tcp(hp("::1", 7000)));
        assert_eq!(t.user.as_deref(), Some("u"));
        assert_eq!(t.display(), "[::1]:7000");
        let t = StoreUrl::parse("rediss://watchpost:s%40cr%3At@cache.internal:6380/1").unwrap();
        assert!(t.tls);
        assert_eq!(t.address, StoreAddress::Tcp(hp("cache.internal", 6380)));
        assert_eq!(
            (t.user.as_deref(), t.password.as_deref(), t.db),
            (Some("watchpost"), Some("s@cr:t"), 1)
        );
        assert_eq!(t.display(), "tls cache.internal:6380");
        let t = StoreUrl::parse("unix:///run/redis.sock?db=3&user=wp&password=x%26y").unwrap();
        assert_eq!(
            (t.address, t.db, t.user.as_deref(), t.password.as_deref()),
            (
                StoreAddress::Unix("/run/redis.sock".into()),
                3,
                Some("wp"),
                Some("x&y")
            )
        );
    }

    #[test]
    fn sentinel_urls_name_the_sentinels_and_the_master() {
        let t = StoreUrl::parse("redis+sentinel://:pw@s1,s2:5000,[fd00::3]/cache/4").unwrap();
        assert_eq!(
            t.address,
            StoreAddress::Sentinel {
                sentinels: vec![hp("s1", 26379), hp("s2", 5000), hp("fd00::3", 26379)],
                master: "cache".into(),
                user: None,
                password: None,
            }
        );
        assert_eq!((t.password.as_deref(), t.db, t.tls), (Some("pw"), 4, false));
        assert_eq!(
            t.display(),
            "master cache via sentinel s1:26379,s2:5000,[fd00::3]:26379"
        );
        let t = StoreUrl::parse(
            "redis+sentinel://wp:pw@s1/cache?sentinel_user=mon&sentinel_password=s%2Fpw",
        )
        .unwrap();
        assert!(matches!(
            &t.address,
            StoreAddress::Sentinel { user: Some(u), password: Some(p), .. } if u == "mon" && p == "s/pw"
        ));
        assert_eq!(
            (t.user.as_deref(), t.password.as_deref()),
            (Some("wp"), Some("pw"))
        );
        assert!(
            StoreUrl::parse("rediss+sentinel://s1/m")
                .unwrap()
                .display()
                .starts_with("tls master m")
        );
    }

    #[test]
    fn bad_urls_say_what_is_wrong() {
        for (url, says) in [
            ("http://h", "must start with"),
            ("redis://", "no host"),
            ("redis://h/x", "not a database number"),
            ("redis://h:0", "not a port"),
            ("redis://h:99999", "not a port"),
            ("redis://a,b", "Sentinel"),
            ("redis+sentinel://s1", "names the master"),
            ("redis://h/1/2", "unexpected"),
            ("redis://u:%zz@h", "hex digits"),
            ("redis://[::1:6379", "closing"),
            ("unix://", "socket path"),
            ("unix:///s?tls=1", "unknown parameter"),
            ("redis://h?x=1", "unknown parameter"),
            ("redis+sentinel://s1/m?password=x", "unknown parameter"),
        ] {
            let e = StoreUrl::parse(url).unwrap_err().to_string();
            assert!(e.contains(says), "{url}: {e}");
        }
    }
}
