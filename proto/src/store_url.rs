//! The address of the shared rate-limit store (`api_rate_limit_store_url`), parsed once at start
//! so that a bad URL is a configuration error with a message, not a failure on the first request.

use crate::ParseError;
use std::path::PathBuf;

/// Where the store listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreAddress {
    /// `host:port`.
    Tcp(String),
    /// A Unix socket path.
    Unix(PathBuf),
}

/// A parsed `redis://[user:password@]host[:port][/db]` or `unix:///path[?db=N]` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreUrl {
    /// Where to connect.
    pub address: StoreAddress,
    /// `AUTH` user, when the URL names one.
    pub user: Option<String>,
    /// `AUTH` password, when the URL has one.
    pub password: Option<String>,
    /// `SELECT` database.
    pub db: u32,
}

impl StoreUrl {
    /// Parses the store URL. `rediss://` (TLS) is refused with a message: put the store on a
    /// private network or a Unix socket, or terminate TLS in a local tunnel.
    pub fn parse(url: &str) -> Result<StoreUrl, ParseError> {
        Self::parse_text(url).map_err(ParseError::StoreUrl)
    }

    fn parse_text(url: &str) -> Result<StoreUrl, String> {
        if url.starts_with("rediss://") {
            return Err(
                "rediss:// (TLS) is not supported: use redis:// on a private network, \
                 unix:///path, or a local TLS tunnel"
                    .into(),
            );
        }
        if let Some(rest) = url.strip_prefix("unix://") {
            let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
            let mut db = 0;
            for kv in query.split('&').filter(|s| !s.is_empty()) {
                match kv.split_once('=') {
                    Some(("db", n)) => db = n.parse().map_err(|_| format!("bad db `{n}`"))?,
                    _ => return Err(format!("unknown parameter `{kv}` in the unix:// URL")),
                }
            }
            if path.is_empty() {
                return Err("unix:// needs a socket path".into());
            }
            return Ok(StoreUrl {
                address: StoreAddress::Unix(path.into()),
                user: None,
                password: None,
                db,
            });
        }
        let rest = url
            .strip_prefix("redis://")
            .ok_or("must start with redis:// or unix://")?;
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (credentials, host) = match authority.rsplit_once('@') {
            Some((c, h)) => (Some(c), h),
            None => (None, authority),
        };
        let (user, password) = match credentials {
            None => (None, None),
            Some(c) => match c.split_once(':') {
                Some((u, p)) => ((!u.is_empty()).then(|| u.to_string()), Some(p.to_string())),
                None => (Some(c.to_string()), None),
            },
        };
        if host.is_empty() {
            return Err("the URL has no host".into());
        }
        let has_port = host.rsplit_once(':').is_some_and(|(_, p)| !p.contains(']'));
        let address = if has_port {
            host.to_string()
        } else {
            format!("{host}:6379")
        };
        let db = if path.is_empty() {
            0
        } else {
            path.parse()
                .map_err(|_| format!("`/{path}` is not a database number"))?
        };
        Ok(StoreUrl {
            address: StoreAddress::Tcp(address),
            user,
            password,
            db,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse() {
        let t = StoreUrl::parse("redis://:pw@10.0.0.5/2").unwrap();
        assert_eq!(t.address, StoreAddress::Tcp("10.0.0.5:6379".into()));
        assert_eq!((t.user, t.password, t.db), (None, Some("pw".into()), 2));
        let t = StoreUrl::parse("redis://u:p@[::1]:7000").unwrap();
        assert_eq!(t.address, StoreAddress::Tcp("[::1]:7000".into()));
        assert_eq!(t.user.as_deref(), Some("u"));
        let t = StoreUrl::parse("unix:///run/redis.sock?db=3").unwrap();
        assert_eq!(
            (t.address, t.db),
            (StoreAddress::Unix("/run/redis.sock".into()), 3)
        );
        assert!(
            StoreUrl::parse("rediss://h")
                .unwrap_err()
                .to_string()
                .contains("TLS")
        );
        assert!(StoreUrl::parse("redis://h/x").is_err());
        assert!(StoreUrl::parse("redis://").is_err());
    }
}
