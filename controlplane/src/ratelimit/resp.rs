//! Just enough of the Redis protocol (RESP2) for the shared rate-limit store: send a command as an
//! array of bulk strings, read one reply. A client crate would bring a connection manager, TLS and
//! a pub/sub layer that one script call per request does not need; this is about 150 lines and
//! adds nothing to the build.

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufStream};
use watchpost_proto::store_url::{StoreAddress, StoreUrl};

/// Largest bulk reply accepted; the store only ever answers small integers and script hashes, so
/// anything larger is a protocol error rather than a reason to allocate.
const MAX_BULK: usize = 1 << 20;

/// One reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `+OK`.
    Simple(String),
    /// `-ERR ...`.
    Error(String),
    /// `:42`.
    Int(i64),
    /// `$n` bytes, or nil.
    Bulk(Option<Vec<u8>>),
    /// `*n` replies, or nil.
    Array(Option<Vec<Reply>>),
}

/// A byte stream to the store.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// One connection.
pub struct Connection {
    stream: BufStream<Box<dyn Io>>,
}

impl Connection {
    /// Connects, authenticates and selects the database.
    pub async fn open(url: &StoreUrl) -> std::io::Result<Connection> {
        let io: Box<dyn Io> = match &url.address {
            StoreAddress::Tcp(a) => {
                let s = tokio::net::TcpStream::connect(a).await?;
                s.set_nodelay(true)?;
                Box::new(s)
            }
            StoreAddress::Unix(p) => Box::new(tokio::net::UnixStream::connect(p).await?),
        };
        let mut c = Connection {
            stream: BufStream::new(io),
        };
        if let Some(pw) = &url.password {
            let reply = match &url.user {
                Some(u) => c.call(&[b"AUTH", u.as_bytes(), pw.as_bytes()]).await?,
                None => c.call(&[b"AUTH", pw.as_bytes()]).await?,
            };
            ok_or_error(reply)?;
        }
        if url.db != 0 {
            let reply = c.call(&[b"SELECT", url.db.to_string().as_bytes()]).await?;
            ok_or_error(reply)?;
        }
        Ok(c)
    }

    /// Sends one command and reads its reply.
    pub async fn call(&mut self, args: &[&[u8]]) -> std::io::Result<Reply> {
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        self.stream.write_all(&out).await?;
        self.stream.flush().await?;
        read_reply(&mut self.stream).await
    }
}

/// `Ok` for a non-error reply; an error reply becomes an I/O error with its text.
pub fn ok_or_error(reply: Reply) -> std::io::Result<Reply> {
    match reply {
        Reply::Error(e) => Err(protocol(e)),
        reply => Ok(reply),
    }
}

fn protocol(msg: impl Into<String>) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, msg.into())
}

async fn read_line<R: AsyncBufReadExt + Unpin>(r: &mut R) -> std::io::Result<String> {
    let mut line = Vec::new();
    // Lines are short (a type byte and a number or a status); bound the read all the same.
    let n = (&mut *r)
        .take(64 * 1024)
        .read_until(b'\n', &mut line)
        .await?;
    if n == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    if !line.ends_with(b"\r\n") {
        return Err(protocol("reply line without CRLF"));
    }
    line.truncate(line.len() - 2);
    String::from_utf8(line).map_err(|_| protocol("reply line is not UTF-8"))
}

fn number(s: &str) -> std::io::Result<i64> {
    s.parse().map_err(|_| protocol(format!("bad number `{s}`")))
}

/// Deepest nesting of arrays in a reply. Our scripts answer flat arrays; the bound keeps a store
/// that answers `*1` a hundred thousand times from building a tree whose drop (recursive)
/// would overflow the stack of the runtime thread.
const MAX_REPLY_DEPTH: usize = 8;

/// Reads one reply (arrays nest through an explicit stack of pending lengths).
pub async fn read_reply<R: AsyncBufReadExt + Unpin>(reader: &mut R) -> std::io::Result<Reply> {
    // (expected length, items so far) for each open array.
    let mut open: Vec<(usize, Vec<Reply>)> = Vec::new();
    loop {
        let line = read_line(reader).await?;
        let (kind, rest) = line.split_at(line.len().min(1));
        let mut reply = match kind {
            "+" => Reply::Simple(rest.to_string()),
            "-" => Reply::Error(rest.to_string()),
            ":" => Reply::Int(number(rest)?),
            "$" => match number(rest)? {
                -1 => Reply::Bulk(None),
                n if n < 0 || n as usize > MAX_BULK => {
                    return Err(protocol(format!("bulk length {n} out of range")));
                }
                n => {
                    let mut buf = vec![0; n as usize + 2];
                    reader.read_exact(&mut buf).await?;
                    if !buf.ends_with(b"\r\n") {
                        return Err(protocol("bulk string without CRLF"));
                    }
                    buf.truncate(n as usize);
                    Reply::Bulk(Some(buf))
                }
            },
            "*" => match number(rest)? {
                -1 => Reply::Array(None),
                0 => Reply::Array(Some(Vec::new())),
                n if !(0..=1024).contains(&n) => {
                    return Err(protocol(format!("array length {n} out of range")));
                }
                _ if open.len() == MAX_REPLY_DEPTH => {
                    return Err(protocol(format!(
                        "arrays nested deeper than {MAX_REPLY_DEPTH}"
                    )));
                }
                n => {
                    open.push((n as usize, Vec::with_capacity(n as usize)));
                    continue;
                }
            },
            _ => return Err(protocol(format!("unknown reply `{line}`"))),
        };
        loop {
            match open.last_mut() {
                None => return Ok(reply),
                Some((want, items)) => {
                    items.push(reply);
                    if items.len() < *want {
                        break;
                    }
                    let (_, items) = open.pop().unwrap_or_default();
                    reply = Reply::Array(Some(items));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn parse(bytes: &[u8]) -> std::io::Result<Reply> {
        let mut r = tokio::io::BufReader::new(bytes);
        read_reply(&mut r).await
    }

    #[tokio::test]
    async fn replies_parse_and_garbage_is_an_error() {
        assert_eq!(parse(b"+OK\r\n").await.unwrap(), Reply::Simple("OK".into()));
        assert_eq!(parse(b":-3\r\n").await.unwrap(), Reply::Int(-3));
        assert_eq!(parse(b"$-1\r\n").await.unwrap(), Reply::Bulk(None));
        assert_eq!(
            parse(b"*2\r\n$3\r\nabc\r\n*1\r\n:1\r\n").await.unwrap(),
            Reply::Array(Some(vec![
                Reply::Bulk(Some(b"abc".to_vec())),
                Reply::Array(Some(vec![Reply::Int(1)]))
            ]))
        );
        assert!(parse(b"$99999999\r\n").await.is_err());
        assert!(parse(b"?what\r\n").await.is_err());
        assert!(parse(b"$3\r\nab").await.is_err());
        assert!(parse(b"").await.is_err());
        let nested = |depth: usize| {
            let mut r = b"*1\r\n".repeat(depth);
            r.extend_from_slice(b":1\r\n");
            r
        };
        assert!(parse(&nested(MAX_REPLY_DEPTH)).await.is_ok());
        assert!(parse(&nested(MAX_REPLY_DEPTH + 1)).await.is_err());
        assert!(parse(&nested(100_000)).await.is_err());
    }
}
