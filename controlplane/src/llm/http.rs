//! The smallest HTTP/1.1 client the model daemons need: one request per connection, JSON in and
//! out, a deadline over the whole exchange and a cap on the answer's size.
//!
//! Why not a client crate: the daemon protocols are a POST and a GET of JSON, and this build has
//! no HTTP client or TLS stack to draw on; a connection per request also means no pool to go
//! stale while a model loads. Answers may come with `Content-Length`, chunked, or delimited by
//! the server closing (we send `Connection: close`).

use super::LlmError;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use watchpost_proto::ParseError;

/// Largest answer read (headers and body): a model's reply is text, a few kilobytes.
const MAX_ANSWER_BYTES: usize = 4 << 20;

/// Where a daemon listens: `http://host:port/prefix`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// Host name or address (IPv6 without brackets).
    pub host: String,
    /// Port.
    pub port: u16,
    /// Path the API's paths are appended to, without a trailing slash (`""` or `/v1`).
    pub prefix: String,
}

impl Endpoint {
    /// Parses an `http://` URL; `https://` is refused with the reason (no TLS in this build).
    pub fn parse(url: &str) -> Result<Endpoint, ParseError> {
        Self::parse_text(url).map_err(ParseError::HttpUrl)
    }

    fn parse_text(url: &str) -> Result<Endpoint, String> {
        let rest = match url.split_once("://") {
            Some(("http", rest)) => rest,
            Some(("https", _)) => {
                return Err(
                    "https:// is not supported by this build: reach the daemon over http:// \
                     (it normally listens on loopback) or through a local TLS-terminating proxy"
                        .into(),
                );
            }
            _ => return Err(format!("{url:?} is not an http:// URL")),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if authority.contains('@') {
            return Err("credentials in the URL are not supported".into());
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) = v6
                .split_once(']')
                .ok_or_else(|| format!("unclosed IPv6 address in {url:?}"))?;
            (h, after.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return Err(format!("no host in {url:?}"));
        }
        let port = match port {
            None => 80,
            Some(p) => p.parse().map_err(|_| format!("bad port in {url:?}"))?,
        };
        Ok(Endpoint {
            host: host.to_string(),
            port,
            prefix: path.trim_end_matches('/').to_string(),
        })
    }

    fn host_header(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == 80 {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }
}

/// An answer: status and body.
#[derive(Debug)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// Body, de-chunked.
    pub body: Vec<u8>,
}

/// Sends `method path` (appended to the endpoint's prefix) with an optional JSON body and reads
/// the whole answer, all within `deadline`. A refused or unreachable connection is
/// [`LlmError::NotReady`]; a timeout or an unreadable answer is [`LlmError::Upstream`].
pub async fn request(
    at: &Endpoint,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
    deadline: Duration,
) -> Result<Answer, LlmError> {
    let exchange = async {
        let mut conn = TcpStream::connect((at.host.as_str(), at.port))
            .await
            .map_err(|e| {
                LlmError::NotReady(format!("cannot connect to {}:{}: {e}", at.host, at.port))
            })?;
        let mut head = format!(
            "{method} {}{path} HTTP/1.1\r\nHost: {}\r\nUser-Agent: watchpost/{}\r\n\
             Accept: application/json\r\nConnection: close\r\n",
            at.prefix,
            at.host_header(),
            env!("CARGO_PKG_VERSION"),
        );
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        if let Some(b) = body {
            head.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                b.len()
            ));
        }
        head.push_str("\r\n");
        let sent = async {
            conn.write_all(head.as_bytes()).await?;
            if let Some(b) = body {
                conn.write_all(b).await?;
            }
            conn.flush().await
        };
        sent.await
            .map_err(|e| LlmError::Upstream(format!("sending the request failed: {e}")))?;
        let mut raw = Vec::with_capacity(8192);
        let mut buf = [0u8; 8192];
        let mut chunks = Dechunker::default();
        loop {
            let n = conn
                .read(&mut buf)
                .await
                .map_err(|e| LlmError::Upstream(format!("reading the answer failed: {e}")))?;
            if n == 0 {
                break;
            }
            raw.extend_from_slice(&buf[..n]);
            if raw.len() > MAX_ANSWER_BYTES {
                return Err(LlmError::Upstream(format!(
                    "the answer is larger than {MAX_ANSWER_BYTES} bytes"
                )));
            }
            if let Some(done) = complete(&raw, &mut chunks)? {
                return Ok(done);
            }
        }
        complete_at_eof(&raw)
    };
    tokio::time::timeout(deadline, exchange)
        .await
        .map_err(|_| {
            LlmError::Upstream(format!("no answer within {:.1} s", deadline.as_secs_f64()))
        })?
}

/// Parsed head of an answer: status, where the body starts, how it is framed.
struct Head {
    status: u16,
    body_at: usize,
    framing: Framing,
}

enum Framing {
    Length(usize),
    Chunked,
    UntilClose,
}

fn parse_head(raw: &[u8]) -> Result<Option<Head>, LlmError> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut headers);
    let body_at = match resp.parse(raw) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(LlmError::Upstream(format!("not an HTTP answer: {e}"))),
    };
    let status = resp.code.unwrap_or(0);
    let mut framing = Framing::UntilClose;
    for h in resp.headers.iter() {
        let value = std::str::from_utf8(h.value).unwrap_or("").trim();
        if h.name.eq_ignore_ascii_case("transfer-encoding")
            && value.to_ascii_lowercase().contains("chunked")
        {
            framing = Framing::Chunked;
            break;
        }
        if h.name.eq_ignore_ascii_case("content-length") {
            let n = value
                .parse()
                .map_err(|_| LlmError::Upstream(format!("bad Content-Length {value:?}")))?;
            framing = Framing::Length(n);
        }
    }
    Ok(Some(Head {
        status,
        body_at,
        framing,
    }))
}

/// The answer, once `raw` holds all of it. Called after every read: a chunked body is parsed by
/// `chunks` from where the last call stopped, so each chunk is walked once.
fn complete(raw: &[u8], chunks: &mut Dechunker) -> Result<Option<Answer>, LlmError> {
    let Some(head) = parse_head(raw)? else {
        return Ok(None);
    };
    let body = &raw[head.body_at..];
    Ok(match head.framing {
        Framing::Length(n) if body.len() >= n => Some(Answer {
            status: head.status,
            body: body[..n].to_vec(),
        }),
        Framing::Chunked if chunks.feed(body)? => Some(Answer {
            status: head.status,
            body: std::mem::take(&mut chunks.out),
        }),
        _ => None,
    })
}

/// The answer when the server has closed: only an until-close body may end there.
fn complete_at_eof(raw: &[u8]) -> Result<Answer, LlmError> {
    let head = parse_head(raw)?
        .ok_or_else(|| LlmError::Upstream("the connection closed before an answer".into()))?;
    match head.framing {
        Framing::UntilClose => Ok(Answer {
            status: head.status,
            body: raw[head.body_at..].to_vec(),
        }),
        Framing::Chunked => {
            let mut chunks = Dechunker::default();
            if chunks.feed(&raw[head.body_at..])? {
                Ok(Answer {
                    status: head.status,
                    body: chunks.out,
                })
            } else {
                Err(LlmError::Upstream(
                    "the connection closed in the middle of the answer".into(),
                ))
            }
        }
        Framing::Length(_) => Err(LlmError::Upstream(
            "the connection closed in the middle of the answer".into(),
        )),
    }
}

/// A chunked body decoded as it arrives: resumes at the first chunk not yet complete.
#[derive(Default)]
struct Dechunker {
    /// Offset in the body of the next chunk's size line.
    at: usize,
    /// The data of the chunks decoded so far.
    out: Vec<u8>,
}

impl Dechunker {
    /// Decodes the complete chunks of `body` past the last call's; true once the last chunk
    /// (size 0) has come. Trailers after it are not waited for.
    fn feed(&mut self, body: &[u8]) -> Result<bool, LlmError> {
        loop {
            let rest = &body[self.at..];
            let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") else {
                return Ok(false);
            };
            let line = std::str::from_utf8(&rest[..eol]).unwrap_or("");
            let size_text = line.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size_text, 16)
                .map_err(|_| LlmError::Upstream(format!("bad chunk size {size_text:?}")))?;
            if size == 0 {
                return Ok(true);
            }
            let data = eol + 2;
            // A size near usize::MAX would wrap the sum and index out of bounds.
            let Some(end) = size.checked_add(data + 2) else {
                return Err(LlmError::Upstream(format!(
                    "chunk size {size_text} is too large"
                )));
            };
            if rest.len() < end {
                return Ok(false);
            }
            self.out.extend_from_slice(&rest[data..data + size]);
            self.at += data + size + 2;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `complete` on an answer read in one go.
    fn whole(raw: &[u8]) -> Result<Option<Answer>, LlmError> {
        complete(raw, &mut Dechunker::default())
    }

    #[test]
    fn urls_parse_and_https_is_refused_with_the_reason() {
        let e = Endpoint::parse("http://127.0.0.1:11434").unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.prefix.as_str()),
            ("127.0.0.1", 11434, "")
        );
        let e = Endpoint::parse("http://[::1]:8080/v1/").unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.prefix.as_str()),
            ("::1", 8080, "/v1")
        );
        assert_eq!(e.host_header(), "[::1]:8080");
        assert_eq!(Endpoint::parse("http://models.lan").unwrap().port, 80);
        assert!(
            Endpoint::parse("https://x")
                .unwrap_err()
                .to_string()
                .contains("TLS")
        );
        assert!(Endpoint::parse("ftp://x").is_err());
        assert!(Endpoint::parse("http://:80").is_err());
        assert!(Endpoint::parse("http://h:99999").is_err());
        assert!(Endpoint::parse("http://u:p@h").is_err());
    }

    #[test]
    fn answers_are_framed_by_length_chunks_or_close() {
        let a = whole(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            .unwrap()
            .unwrap();
        assert_eq!((a.status, a.body.as_slice()), (200, &b"ok"[..]));
        assert!(
            whole(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nok")
                .unwrap()
                .is_none()
        );
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n";
        assert_eq!(whole(chunked).unwrap().unwrap().body, b"abcde");
        assert!(whole(&chunked[..chunked.len() - 7]).unwrap().is_none());
        // Read by read, as the client does: each prefix leaves the decoder where it stopped, and
        // the answer is whole at the last chunk's size line (the final CRLF is not waited for).
        let mut chunks = Dechunker::default();
        for end in 1..chunked.len() - 2 {
            assert!(
                complete(&chunked[..end], &mut chunks).unwrap().is_none(),
                "{end}"
            );
        }
        assert_eq!(
            complete(chunked, &mut chunks).unwrap().unwrap().body,
            b"abcde"
        );
        let trailer =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-T: 1\r\n\r\n";
        assert_eq!(whole(trailer).unwrap().unwrap().body, b"ok");
        assert_eq!(complete_at_eof(trailer).unwrap().body, b"ok");
        assert!(complete_at_eof(&chunked[..chunked.len() - 7]).is_err());
        let closed = complete_at_eof(b"HTTP/1.0 502 Bad\r\n\r\nbody").unwrap();
        assert_eq!((closed.status, closed.body.as_slice()), (502, &b"body"[..]));
        assert!(complete_at_eof(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nab").is_err());
        assert!(whole(b"garbage\r\n\r\n").is_err());
        assert!(whole(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_err());
        let huge = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nab";
        assert!(
            whole(huge).is_err(),
            "a chunk size that would wrap is an error, not a panic"
        );
    }
}
