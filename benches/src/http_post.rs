//! A minimal HTTP/1.1 client that posts bodies to `POST /api/v1/ingest` over one keep-alive
//! connection and waits for each answer: the load generator's `http://` target.
//!
//! Acknowledged ingest is request and answer, so the figure that matters beside the rate is the
//! time to the acknowledgement; every successful post records it. A 503 or 429 is backpressure,
//! not failure: the poster waits the `Retry-After` it was given and sends the body again, and
//! counts the retry.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What every poster of a run adds to.
#[derive(Default)]
pub struct PostStats {
    /// Microseconds from sending a body to its 2xx answer, one per acknowledged body.
    pub latencies_us: Mutex<Vec<u32>>,
    /// Bodies sent again after a 503 or 429.
    pub retries: AtomicU64,
}

impl PostStats {
    /// The `q` quantile (0..=1) of the recorded latencies, in milliseconds.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        let mut v = self
            .latencies_us
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if v.is_empty() {
            return 0.0;
        }
        v.sort_unstable();
        let at = ((v.len() - 1) as f64 * q.clamp(0.0, 1.0)).round() as usize;
        f64::from(v[at]) / 1000.0
    }
}

/// One connection posting bodies to one path.
pub struct HttpPoster {
    addr: SocketAddr,
    host: String,
    path: String,
    stream: Option<TcpStream>,
    answer: Vec<u8>,
    latencies: Vec<u32>,
    stats: Arc<PostStats>,
}

impl HttpPoster {
    /// A poster to `path` on `addr`, sending `host` as the `Host` header.
    pub fn new(addr: SocketAddr, host: &str, path: &str, stats: Arc<PostStats>) -> HttpPoster {
        HttpPoster {
            addr,
            host: host.to_string(),
            path: path.to_string(),
            stream: None,
            answer: Vec::with_capacity(4096),
            latencies: Vec::new(),
            stats,
        }
    }

    /// Posts `body` until it is acknowledged (2xx), waiting out 503 and 429 answers; any other
    /// answer is an error that names its status and body.
    pub fn post(&mut self, body: &[u8]) -> io::Result<()> {
        loop {
            let started = Instant::now();
            let (status, retry_after, text) = self.exchange(body)?;
            match status {
                200..=299 => {
                    self.latencies
                        .push(started.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
                    return Ok(());
                }
                429 | 503 => {
                    self.stats.retries.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis((retry_after * 1000).clamp(20, 5000)));
                }
                _ => {
                    return Err(io::Error::other(format!(
                        "the service answered {status}: {text}"
                    )));
                }
            }
        }
    }

    /// One request and its answer: status, `Retry-After` seconds (0 if none), body text.
    fn exchange(&mut self, body: &[u8]) -> io::Result<(u16, u64, String)> {
        if self.stream.is_none() {
            let s = TcpStream::connect_timeout(&self.addr, Duration::from_secs(5))?;
            s.set_read_timeout(Some(Duration::from_secs(60)))?;
            s.set_nodelay(true)?;
            self.stream = Some(s);
        }
        let Some(s) = self.stream.as_mut() else {
            return Err(io::Error::other("no connection"));
        };
        let head = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-ndjson\r\nContent-Length: {}\r\n\r\n",
            self.path,
            self.host,
            body.len()
        );
        let sent = s
            .write_all(head.as_bytes())
            .and_then(|()| s.write_all(body));
        if let Err(e) = sent {
            self.stream = None;
            return Err(e);
        }
        self.answer.clear();
        let mut chunk = [0u8; 4096];
        let head_end = loop {
            if let Some(i) = find(&self.answer, b"\r\n\r\n") {
                break i + 4;
            }
            let n = s.read(&mut chunk)?;
            if n == 0 {
                self.stream = None;
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the service closed the connection before answering",
                ));
            }
            self.answer.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&self.answer[..head_end]).into_owned();
        let status: u16 = head.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
        let header = |name: &str| {
            head.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case(name)
                    .then(|| v.trim().to_string())
            })
        };
        let length: usize = header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        while self.answer.len() < head_end + length {
            let n = s.read(&mut chunk)?;
            if n == 0 {
                break;
            }
            self.answer.extend_from_slice(&chunk[..n]);
        }
        if header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close")) {
            self.stream = None;
        }
        let retry_after = header("retry-after")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let text = String::from_utf8_lossy(&self.answer[head_end..]).into_owned();
        Ok((status, retry_after, text))
    }
}

impl Drop for HttpPoster {
    fn drop(&mut self) {
        let mut all = self
            .stats
            .latencies_us
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        all.append(&mut self.latencies);
    }
}

/// A body per `write` call: the load generator's buffered writes become one request each.
impl Write for HttpPoster {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.post(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
