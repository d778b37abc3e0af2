//! `watchpost-loadgen`: sends seeded, realistic security log traffic to a running Watchpost.
//!
//! Each connection is a thread with its own socket and its own traffic stream (seeded from
//! `--seed` and the connection index), so a run is reproducible and connections do not replay
//! each other. Lines are generated straight into large write buffers, and pacing is a token bucket
//! consulted once per chunk of lines: a sleep per line would cap the rate at a few ten thousand
//! lines per second and measure the scheduler rather than the service.

use clap::{Parser, ValueEnum};
use std::io::{self, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs, UdpSocket};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use watchpost_benches::http_post::{HttpPoster, PostStats};
use watchpost_benches::{Traffic, stream_seed};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Runs without `--count` or `--duration` stop after this long, so a forgotten flag cannot leave
/// a load generator hammering a shared machine.
const DEFAULT_DURATION_S: f64 = 10.0;
/// How long a TCP write may make no progress before the run is failed.
const WRITE_STALL_LIMIT: Duration = Duration::from_secs(60);
/// Most lines generated between two checks of the clock, the stop flag and the token bucket.
const MAX_CHUNK_LINES: u64 = 4096;
/// The same for UDP, where every line is a syscall and 4096 of them would overshoot a deadline
/// by tens of milliseconds.
const MAX_CHUNK_DATAGRAMS: u64 = 256;

#[derive(Parser, Debug)]
#[command(
    name = "watchpost-loadgen",
    version,
    about = "Send seeded, realistic security log traffic to a running Watchpost.",
    after_help = "Prints the achieved rate to stderr once a second and, at the end, one JSON line \
                  to stdout: {\"sent\": N, \"seconds\": S, \"rate\": R, \"bytes\": B}.\n\
                  Without --count or --duration it runs for 10 seconds."
)]
struct Args {
    /// Where to send: tcp://HOST:PORT, udp://HOST:PORT (one datagram per line),
    /// http://HOST:PORT/PATH (each buffer of --batch-bytes one POST, e.g. to /api/v1/ingest with
    /// --format json, waiting for each answer), or `stdout` (the summary then goes to stderr).
    #[arg(long, default_value = "tcp://127.0.0.1:5514", value_parser = parse_target)]
    target: Target,

    /// What to generate: syslog lines (RFC 3164/5424) or JSON events (ECS and Windows).
    #[arg(long, value_enum, default_value_t = Format::Syslog)]
    format: Format,

    /// How messages are delimited on a stream: `newline` (LF-terminated) or `octet`
    /// (RFC 6587 octet counting, `LEN SP MSG`). Ignored for UDP.
    #[arg(long, value_enum, default_value_t = Framing::Newline)]
    framing: Framing,

    /// Total events per second over all connections; 0 sends as fast as possible.
    #[arg(long, default_value_t = 0)]
    rate: u64,

    /// Total events to send over all connections.
    #[arg(long)]
    count: Option<u64>,

    /// Stop after this many seconds (fractions allowed).
    #[arg(long, value_parser = parse_duration)]
    duration: Option<f64>,

    /// Parallel connections, each on its own thread with its own traffic stream.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1024))]
    connections: u64,

    /// Seed of the run: the same seed and count replay the same events (timestamps follow the
    /// clock).
    #[arg(long, default_value_t = 1)]
    seed: u64,

    /// Size at which a connection's write buffer is flushed (TCP and stdout).
    #[arg(long, default_value_t = 64 * 1024, value_parser = clap::value_parser!(u64).range(512..=(64 << 20)))]
    batch_bytes: u64,

    /// No per-second progress on stderr.
    #[arg(long)]
    quiet: bool,

    /// Every internet client address is new (an internet-facing sensor's traffic, where each
    /// source is a new UEBA entity) instead of one of 80.
    #[arg(long)]
    distinct_sources: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Format {
    Syslog,
    Json,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Framing {
    Newline,
    Octet,
}

#[derive(Clone, Debug)]
enum Target {
    Tcp(String, Vec<SocketAddr>),
    Udp(String, Vec<SocketAddr>),
    /// The URL, its addresses, the `Host` header and the path.
    Http(String, Vec<SocketAddr>, String, String),
    Stdout,
}

impl Target {
    fn describe(&self) -> &str {
        match self {
            Target::Tcp(s, _) | Target::Udp(s, _) | Target::Http(s, ..) => s,
            Target::Stdout => "stdout",
        }
    }
}

fn parse_target(s: &str) -> Result<Target, String> {
    if s == "stdout" || s == "-" {
        return Ok(Target::Stdout);
    }
    let (scheme, rest) = s.split_once("://").ok_or_else(|| {
        format!(
            "expected tcp://HOST:PORT, udp://HOST:PORT, http://HOST:PORT/PATH or stdout, got {s:?}"
        )
    })?;
    if scheme == "http" {
        let (host, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/api/v1/ingest"),
        };
        let addrs: Vec<SocketAddr> = host
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve {host:?}: {e}"))?
            .collect();
        if addrs.is_empty() {
            return Err(format!("{host:?} resolves to no address"));
        }
        return Ok(Target::Http(
            s.to_owned(),
            addrs,
            host.to_owned(),
            path.to_owned(),
        ));
    }
    if scheme != "tcp" && scheme != "udp" {
        return Err(format!(
            "unsupported scheme {scheme:?}: use tcp, udp or http"
        ));
    }
    let addrs: Vec<SocketAddr> = rest
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {rest:?}: {e}"))?
        .collect();
    if addrs.is_empty() {
        return Err(format!("{rest:?} resolves to no address"));
    }
    if scheme == "tcp" {
        Ok(Target::Tcp(s.to_owned(), addrs))
    } else {
        Ok(Target::Udp(s.to_owned(), addrs))
    }
}

fn parse_duration(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(d) if d.is_finite() && d > 0.0 && d < 1e9 => Ok(d),
        _ => Err(format!("expected a positive number of seconds, got {s:?}")),
    }
}

/// One connection's socket.
enum Sink {
    Tcp(TcpStream),
    Udp(UdpSocket),
    Http(HttpPoster),
    Stdout(io::Stdout),
}

fn connect(target: &Target, posts: &Arc<PostStats>) -> Result<Sink, String> {
    match target {
        Target::Http(_, addrs, host, path) => Ok(Sink::Http(HttpPoster::new(
            addrs[0],
            host,
            path,
            Arc::clone(posts),
        ))),
        Target::Tcp(name, addrs) => {
            let mut last = None;
            for addr in addrs {
                match TcpStream::connect_timeout(addr, Duration::from_secs(5)) {
                    Ok(s) => {
                        // Backpressure is expected and fine, but a service that stops reading
                        // altogether must fail the run instead of hanging it.
                        s.set_write_timeout(Some(WRITE_STALL_LIMIT))
                            .map_err(|e| format!("cannot configure the socket to {name}: {e}"))?;
                        return Ok(Sink::Tcp(s));
                    }
                    Err(e) => last = Some(e),
                }
            }
            let e = last.expect("at least one address");
            Err(format!(
                "cannot connect to {name}: {e}{}",
                if e.kind() == io::ErrorKind::ConnectionRefused {
                    " (is the service running and listening there?)"
                } else {
                    ""
                }
            ))
        }
        Target::Udp(name, addrs) => {
            let addr = addrs[0];
            let local: SocketAddr = if addr.is_ipv4() {
                "0.0.0.0:0".parse().expect("valid")
            } else {
                "[::]:0".parse().expect("valid")
            };
            let sock =
                UdpSocket::bind(local).map_err(|e| format!("cannot open a UDP socket: {e}"))?;
            sock.connect(addr)
                .map_err(|e| format!("cannot address {name}: {e}"))?;
            Ok(Sink::Udp(sock))
        }
        Target::Stdout => Ok(Sink::Stdout(io::stdout())),
    }
}

/// Counters the reporter reads while workers run.
struct Shared {
    sent: AtomicU64,
    bytes: AtomicU64,
    stop: AtomicBool,
}

/// What one worker is asked to do.
struct Job {
    index: u64,
    seed: u64,
    format: Format,
    framing: Framing,
    /// Events for this connection; `u64::MAX` when only a duration bounds the run.
    quota: u64,
    /// Events per second for this connection; 0 is unpaced.
    rate: f64,
    deadline: Option<Instant>,
    batch_bytes: usize,
    target: String,
    distinct_sources: bool,
}

/// A token bucket refilled continuously at `rate` tokens per second.
///
/// Its capacity is two chunks: enough to absorb sleep overshoot without losing tokens, small
/// enough that a stall (a slow reader pushing back) is not followed by a burst that would distort
/// the offered load.
struct Bucket {
    rate: f64,
    tokens: f64,
    cap: f64,
    last: Instant,
}

impl Bucket {
    fn new(rate: f64, chunk: u64) -> Self {
        let cap = 2.0 * chunk as f64;
        Bucket {
            rate,
            tokens: chunk as f64,
            cap,
            last: Instant::now(),
        }
    }

    /// Waits until `n` tokens are available and takes them; false if `deadline` comes first.
    fn take(&mut self, n: u64, deadline: Option<Instant>, stop: &AtomicBool) -> bool {
        let n = n as f64;
        loop {
            let now = Instant::now();
            self.tokens = (self.tokens + now.duration_since(self.last).as_secs_f64() * self.rate)
                .min(self.cap.max(n));
            self.last = now;
            if self.tokens >= n {
                self.tokens -= n;
                return true;
            }
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            let wait = Duration::from_secs_f64((n - self.tokens) / self.rate);
            // Sleep in slices of at most 100 ms so a stop request is honoured promptly.
            let wait = wait.min(Duration::from_millis(100));
            match deadline {
                Some(d) if now + wait >= d => {
                    thread::sleep(d.saturating_duration_since(now));
                    return false;
                }
                _ => thread::sleep(wait),
            }
        }
    }
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn write_err(job: &Job, what: &str, e: &io::Error) -> String {
    let hint = match e.kind() {
        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset => {
            " (the service closed the connection)"
        }
        io::ErrorKind::ConnectionRefused => " (nothing is listening there)",
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
            " (the service stopped reading for 60 s)"
        }
        _ => "",
    };
    format!(
        "connection {} to {}: {what} failed: {e}{hint}",
        job.index, job.target
    )
}

/// A stream connection's write buffer and the lines in it not yet written.
struct Pending {
    buf: Vec<u8>,
    lines: u64,
}

impl Pending {
    /// Writes the buffer out and only then counts its lines as sent, so `sent` never includes
    /// lines that a failed write lost.
    fn flush(&mut self, job: &Job, out: &mut dyn Write, shared: &Shared) -> Result<(), String> {
        if self.buf.is_empty() {
            return Ok(());
        }
        out.write_all(&self.buf)
            .map_err(|e| write_err(job, "writing", &e))?;
        shared.sent.fetch_add(self.lines, Ordering::Relaxed);
        shared
            .bytes
            .fetch_add(self.buf.len() as u64, Ordering::Relaxed);
        self.buf.clear();
        self.lines = 0;
        Ok(())
    }
}

/// Appends `msg` to `buf` as an RFC 6587 octet-counted frame: `LEN SP MSG`.
fn octet_frame(buf: &mut Vec<u8>, msg: &[u8]) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut v = msg.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    buf.extend_from_slice(&digits[i..]);
    buf.push(b' ');
    buf.extend_from_slice(msg);
}

/// Generates and sends until the quota, the deadline or a stop request; returns an error message
/// on an I/O failure.
fn run_worker(job: &Job, sink: Sink, shared: &Shared) -> Result<(), String> {
    let mut traffic = Traffic::new(stream_seed(job.seed, job.index));
    if job.distinct_sources {
        traffic = traffic.with_distinct_sources();
    }
    let max_chunk = if matches!(sink, Sink::Udp(_)) {
        MAX_CHUNK_DATAGRAMS
    } else {
        MAX_CHUNK_LINES
    };
    let chunk = if job.rate > 0.0 {
        // About 10 ms worth of lines per token-bucket check: smooth pacing, negligible overhead.
        ((job.rate / 100.0) as u64).clamp(1, max_chunk)
    } else {
        max_chunk
    };
    let mut bucket = (job.rate > 0.0).then(|| Bucket::new(job.rate, chunk));
    let mut line: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut pending = Pending {
        buf: Vec::with_capacity(job.batch_bytes + 16 * 1024),
        lines: 0,
    };
    let (udp, mut stream): (Option<UdpSocket>, Option<Box<dyn Write>>) = match sink {
        Sink::Udp(s) => (Some(s), None),
        Sink::Tcp(s) => (None, Some(Box::new(s))),
        Sink::Http(p) => (None, Some(Box::new(p))),
        Sink::Stdout(s) => (None, Some(Box::new(s.lock()))),
    };
    let mut generated: u64 = 0;

    while generated < job.quota {
        if shared.stop.load(Ordering::Relaxed) || job.deadline.is_some_and(|d| Instant::now() >= d)
        {
            break;
        }
        let n = chunk.min(job.quota - generated);
        if let Some(b) = bucket.as_mut()
            && !b.take(n, job.deadline, &shared.stop)
        {
            break;
        }
        let now = unix_now();
        for _ in 0..n {
            generated += 1;
            if udp.is_none() && job.framing == Framing::Newline {
                // Straight into the write buffer: no intermediate copy on the common path.
                match job.format {
                    Format::Syslog => traffic.next_syslog(now, &mut pending.buf),
                    Format::Json => traffic.next_json(now, &mut pending.buf),
                };
                pending.buf.push(b'\n');
                pending.lines += 1;
                if pending.buf.len() >= job.batch_bytes
                    && let Some(out) = stream.as_mut()
                {
                    pending.flush(job, out, shared)?;
                }
                continue;
            }
            line.clear();
            match job.format {
                Format::Syslog => traffic.next_syslog(now, &mut line),
                Format::Json => traffic.next_json(now, &mut line),
            };
            if let Some(sock) = &udp {
                sock.send(&line)
                    .map_err(|e| write_err(job, "sending a datagram", &e))?;
                shared.sent.fetch_add(1, Ordering::Relaxed);
                shared.bytes.fetch_add(line.len() as u64, Ordering::Relaxed);
                continue;
            }
            octet_frame(&mut pending.buf, &line);
            pending.lines += 1;
            if pending.buf.len() >= job.batch_bytes
                && let Some(out) = stream.as_mut()
            {
                pending.flush(job, out, shared)?;
            }
        }
        // Paced runs write every chunk so the offered load is smooth; unpaced runs keep filling
        // the buffer across chunks and write only full buffers.
        if bucket.is_some()
            && let Some(out) = stream.as_mut()
        {
            pending.flush(job, out, shared)?;
        }
    }
    if let Some(mut out) = stream {
        pending.flush(job, &mut out, shared)?;
        out.flush().map_err(|e| write_err(job, "flushing", &e))?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("watchpost-loadgen: {msg}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), String> {
    let duration = match (args.count, args.duration) {
        (None, None) => Some(DEFAULT_DURATION_S),
        (_, d) => d,
    };
    if args.count == Some(0) {
        return Err("--count must be at least 1".into());
    }
    if matches!(args.target, Target::Stdout) && args.connections > 1 {
        return Err("--target stdout takes a single connection".into());
    }
    let conns = args.connections;

    // Connect everything before the clock starts, so connection set-up is not counted and a
    // refused connection fails the run before any load is offered.
    let posts = Arc::new(PostStats::default());
    let mut sinks = Vec::new();
    for _ in 0..conns {
        sinks.push(connect(&args.target, &posts)?);
    }

    let shared = Arc::new(Shared {
        sent: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
        stop: AtomicBool::new(false),
    });
    let start = Instant::now();
    let deadline = duration.map(|d| start + Duration::from_secs_f64(d));
    let (tx, rx) = mpsc::channel::<Result<(), String>>();
    let mut handles = Vec::new();
    for (i, sink) in (0..conns).zip(sinks) {
        let quota = match args.count {
            Some(c) => c / conns + u64::from(i < c % conns),
            None => u64::MAX,
        };
        if quota == 0 {
            continue;
        }
        let job = Job {
            index: i,
            seed: args.seed,
            format: args.format,
            framing: args.framing,
            quota,
            rate: args.rate as f64 / conns as f64,
            deadline,
            batch_bytes: args.batch_bytes as usize,
            distinct_sources: args.distinct_sources,
            target: args.target.describe().to_owned(),
        };
        let shared = Arc::clone(&shared);
        let tx = tx.clone();
        let handle = thread::Builder::new()
            .name(format!("loadgen-{i}"))
            .spawn(move || {
                let r = run_worker(&job, sink, &shared);
                if r.is_err() {
                    shared.stop.store(true, Ordering::Relaxed);
                }
                let _ = tx.send(r);
            })
            .map_err(|e| format!("cannot start a worker thread: {e}"))?;
        handles.push(handle);
    }
    drop(tx);

    let mut errors = Vec::new();
    let mut done = 0;
    let mut end = start;
    let mut next_tick = start + Duration::from_secs(1);
    let (mut last_sent, mut last_bytes, mut last_t) = (0u64, 0u64, start);
    while done < handles.len() {
        match rx.recv_timeout(next_tick.saturating_duration_since(Instant::now())) {
            Ok(r) => {
                done += 1;
                end = Instant::now();
                if let Err(e) = r {
                    errors.push(e);
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let now = Instant::now();
                let sent = shared.sent.load(Ordering::Relaxed);
                let bytes = shared.bytes.load(Ordering::Relaxed);
                let dt = now.duration_since(last_t).as_secs_f64();
                if !args.quiet {
                    eprintln!(
                        "[{:>5.1}s] {:>12} events/s  {:>8.1} MiB/s  total {}",
                        now.duration_since(start).as_secs_f64(),
                        ((sent - last_sent) as f64 / dt).round(),
                        (bytes - last_bytes) as f64 / dt / (1024.0 * 1024.0),
                        sent
                    );
                }
                (last_sent, last_bytes, last_t) = (sent, bytes, now);
                next_tick += Duration::from_secs(1);
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    for h in handles {
        if h.join().is_err() {
            errors.push("a worker thread panicked".into());
        }
    }
    if !errors.is_empty() {
        return Err(errors.join("; "));
    }

    let sent = shared.sent.load(Ordering::Relaxed);
    let bytes = shared.bytes.load(Ordering::Relaxed);
    let secs = end.duration_since(start).as_secs_f64();
    let rate = if secs > 0.0 { sent as f64 / secs } else { 0.0 };
    let mut summary = format!(
        "{{\"sent\": {sent}, \"seconds\": {secs:.3}, \"rate\": {rate:.1}, \"bytes\": {bytes}"
    );
    if matches!(args.target, Target::Http(..)) {
        // Sent means acknowledged here: each body counts once its 2xx came back.
        summary.push_str(&format!(
            ", \"ack_p50_ms\": {:.2}, \"ack_p99_ms\": {:.2}, \"retries\": {}",
            posts.quantile_ms(0.5),
            posts.quantile_ms(0.99),
            posts.retries.load(Ordering::Relaxed)
        ));
    }
    summary.push('}');
    if matches!(args.target, Target::Stdout) {
        eprintln!("{summary}");
    } else {
        println!("{summary}");
    }
    Ok(())
}
