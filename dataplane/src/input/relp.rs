//! RELP input: syslog delivered by rsyslog's `omrelp` (or any librelp client), acknowledged only
//! once durable.
//!
//! RELP is syslog over TCP with a transaction number on every message and an answer to each:
//! the sender keeps a message until its answer says `200 OK`, and sends it again on a new session
//! otherwise. This input answers `200 OK` only once the message is in the store's ingest spool
//! (RocksDB's write-ahead log, as HTTP ingest does; docs/guarantees.md), so a crash of the
//! service loses nothing the sender was told is delivered. What it reads in one wake-up from one
//! session is spooled in one write. While the store refuses writes the answers are
//! `500 store unavailable` and the sender retries.
//!
//! One thread and one `mio` poll for every session, like the TCP inputs, so the rings stay
//! single-producer. A session whose sender stops reading its answers is not read either until
//! they drain: its acknowledgements are what bounds its memory.

use super::outlet::Outlet;
use super::registry::{Bound, Delivery, Input, Running, Start};
use super::relp_frame::{self, Frame, Parsed};
use super::spool::{self, Decoded, SpoolRecord};
use crate::Error;
use crate::stats::Stats;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use watchpost_normalize::Format;
use watchpost_proto::config::InputsConfig;
use watchpost_proto::{Config, InputId, now_ns};
use watchpost_store::{SpooledRequest, Store};

const LISTENER: Token = Token(usize::MAX);
/// Answers waiting for a slow sender past which its session is not read.
const MAX_PENDING_ANSWERS: usize = 64 << 10;
/// Bytes read per read call.
const READ_CHUNK: usize = 64 << 10;
/// What this input offers in answer to `open`.
const OFFERS: &str = "relp_version=0\nrelp_software=watchpost\ncommands=syslog";

/// Settings of the RELP input.
pub struct RelpSettings {
    /// `dataplane.max_line_bytes`: longer messages are cut and flagged, as on every input.
    pub max_line: usize,
    /// `inputs.relp.max_connections`.
    pub max_connections: usize,
    /// `inputs.relp.idle_timeout_s`.
    pub idle_timeout: Duration,
    /// `dataplane.batch_linger_ms`.
    pub linger: Duration,
    /// The store whose spool makes acknowledgements durable.
    pub store: Arc<Store>,
    /// Messages this input acknowledged and the pipeline had not stored at the last stop.
    pub pending: Vec<SpooledRequest>,
}

struct Session {
    stream: TcpStream,
    /// Bytes read and not yet taken as frames.
    input: Vec<u8>,
    /// Answers not yet written.
    answers: Vec<u8>,
    /// `open` was answered.
    open: bool,
    /// Close once the answers are out (`close` received, or a broken frame).
    closing: bool,
    last_active: Instant,
    shard: usize,
    writable: bool,
}

/// Starts the RELP input on an already bound listener; it first replays what was pending.
pub fn spawn(
    listener: std::net::TcpListener,
    outlet: Outlet,
    settings: RelpSettings,
    stats: Arc<Stats>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<JoinHandle<()>> {
    listener.set_nonblocking(true)?;
    let listener = TcpListener::from_std(listener);
    std::thread::Builder::new()
        .name("wp-in-relp".into())
        .spawn(move || run(listener, outlet, settings, &stats, &stop))
}

fn run(
    mut listener: TcpListener,
    mut outlet: Outlet,
    mut s: RelpSettings,
    stats: &Stats,
    stop: &AtomicBool,
) {
    let replayed = spool::replay(&mut outlet, InputId::Relp, &s.pending);
    stats.spool.replayed.add(replayed);
    s.pending = Vec::new();
    let counters = stats.input(InputId::Relp);
    let Ok(mut poll) = Poll::new() else {
        tracing::error!("relp: cannot create a poll");
        counters.up.store(false, Ordering::Relaxed);
        return;
    };
    if let Err(e) = poll
        .registry()
        .register(&mut listener, LISTENER, Interest::READABLE)
    {
        tracing::error!("relp: register: {e}");
        counters.up.store(false, Ordering::Relaxed);
        return;
    }
    let mut sessions: Vec<Option<Session>> = Vec::new();
    let mut live = 0usize;
    let mut next_shard = 0usize;
    let mut events = Events::with_capacity(256);
    let mut last_sweep = Instant::now();
    let mut record = SpoolRecord::default();
    let mut seqs = Vec::with_capacity(1);
    let workers = outlet.workers().max(1);
    // The largest frame read: a message of `max_line` bytes, cut to it when stored, plus room
    // for a sender that counts a longer one (it is cut, not refused, up to twice that).
    let max_data = (s.max_line * 2).max(64 << 10);

    while !stop.load(Ordering::Relaxed) {
        if let Err(e) = poll.poll(&mut events, Some(s.linger)) {
            if e.kind() != ErrorKind::Interrupted {
                tracing::warn!("relp: poll: {e}");
            }
            continue;
        }
        for ev in events.iter() {
            if ev.token() == LISTENER {
                accept(
                    &mut listener,
                    &poll,
                    &mut sessions,
                    &mut live,
                    &mut next_shard,
                    workers,
                    s.max_connections,
                    stats,
                );
                continue;
            }
            let slot = ev.token().0;
            let Some(Some(session)) = sessions.get_mut(slot) else {
                continue;
            };
            if ev.is_writable() {
                session.writable = true;
            }
            let mut ctx = Serve {
                outlet: &mut outlet,
                store: &s.store,
                stats,
                record: &mut record,
                seqs: &mut seqs,
                max_line: s.max_line,
                max_data,
                stop,
            };
            let done = ctx.serve(session);
            if !flush(session) || done {
                close(&poll, &mut sessions, slot);
                live -= 1;
            }
        }
        outlet.flush_due(now_ns());
        if last_sweep.elapsed() >= Duration::from_secs(1) {
            last_sweep = Instant::now();
            for slot in 0..sessions.len() {
                let idle = sessions[slot]
                    .as_ref()
                    .is_some_and(|c| c.last_active.elapsed() >= s.idle_timeout);
                if idle {
                    counters.connections_idle_closed.add(1);
                    close(&poll, &mut sessions, slot);
                    live -= 1;
                }
            }
        }
    }
    // Stop: nothing unanswered is lost (the senders send it again to the next process), and
    // what was answered is in the spool.
    for slot in 0..sessions.len() {
        close(&poll, &mut sessions, slot);
    }
    outlet.flush_all();
}

#[allow(clippy::too_many_arguments)]
fn accept(
    listener: &mut TcpListener,
    poll: &Poll,
    sessions: &mut Vec<Option<Session>>,
    live: &mut usize,
    next_shard: &mut usize,
    workers: usize,
    max_connections: usize,
    stats: &Stats,
) {
    let counters = stats.input(InputId::Relp);
    loop {
        match listener.accept() {
            Ok((mut stream, _)) => {
                if *live >= max_connections {
                    counters.connections_refused.add(1);
                    continue;
                }
                let slot = sessions
                    .iter()
                    .position(Option::is_none)
                    .unwrap_or_else(|| {
                        sessions.push(None);
                        sessions.len() - 1
                    });
                if poll
                    .registry()
                    .register(
                        &mut stream,
                        Token(slot),
                        Interest::READABLE | Interest::WRITABLE,
                    )
                    .is_err()
                {
                    continue;
                }
                counters.connections.add(1);
                *live += 1;
                *next_shard += 1;
                sessions[slot] = Some(Session {
                    stream,
                    input: Vec::with_capacity(READ_CHUNK),
                    answers: Vec::with_capacity(1024),
                    open: false,
                    closing: false,
                    last_active: Instant::now(),
                    shard: *next_shard % workers,
                    writable: true,
                });
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::warn!("relp: accept: {e}");
                return;
            }
        }
    }
}

/// What serving a session needs besides the session.
struct Serve<'a> {
    outlet: &'a mut Outlet,
    store: &'a Arc<Store>,
    stats: &'a Stats,
    record: &'a mut SpoolRecord,
    seqs: &'a mut Vec<u64>,
    max_line: usize,
    max_data: usize,
    stop: &'a AtomicBool,
}

impl Serve<'_> {
    /// Reads what the session sent and answers its frames; `true` when it is over.
    fn serve(&mut self, session: &mut Session) -> bool {
        let counters = self.stats.input(InputId::Relp);
        let mut chunk = [0u8; 8192];
        // A sender that does not read its answers is not read either.
        while session.answers.len() < MAX_PENDING_ANSWERS
            && !session.closing
            && !self.stop.load(Ordering::Relaxed)
        {
            match session.stream.read(&mut chunk) {
                Ok(0) => {
                    self.answer_frames(session);
                    return true;
                }
                Ok(n) => {
                    session.last_active = Instant::now();
                    session.input.extend_from_slice(&chunk[..n]);
                    if session.input.len() >= READ_CHUNK {
                        self.answer_frames(session);
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => {
                    counters.connection_errors.add(1);
                    return true;
                }
            }
        }
        self.answer_frames(session);
        false
    }

    /// Takes every whole frame off the front of the session's input and answers it; the
    /// messages among them are spooled together before any of them is answered.
    fn answer_frames(&mut self, session: &mut Session) {
        let mut used = 0;
        let mut txnrs: Vec<u32> = Vec::new();
        self.record.begin(InputId::Relp, now_ns());
        // Taken out while its frames are answered (the answers go to the session), put back
        // with what is left.
        let mut input = std::mem::take(&mut session.input);
        loop {
            match relp_frame::parse(&input[used..], self.max_data) {
                Ok(Parsed::Partial) => break,
                Ok(Parsed::Frame(frame, n)) => {
                    used += n;
                    if frame.command == "syslog" && session.open {
                        let line = trim_line(frame.data);
                        let truncated = line.len() > self.max_line;
                        self.record
                            .push(&line[..line.len().min(self.max_line)], truncated);
                        txnrs.push(frame.txnr);
                        continue;
                    }
                    // Anything else is answered in order after the messages before it.
                    self.commit(session, &mut txnrs);
                    self.record.begin(InputId::Relp, now_ns());
                    control(session, &frame);
                }
                Err(e) => {
                    self.stats.input(InputId::Relp).connection_errors.add(1);
                    tracing::warn!("relp: closing a session: {e}");
                    self.commit(session, &mut txnrs);
                    relp_frame::write_serverclose(&mut session.answers);
                    session.closing = true;
                    used = input.len();
                    break;
                }
            }
        }
        self.commit(session, &mut txnrs);
        input.drain(..used);
        session.input = input;
    }

    /// Spools the messages collected, then answers each: `200 OK` once durable, `500`
    /// otherwise (the sender keeps them and sends them again).
    fn commit(&mut self, session: &mut Session, txnrs: &mut Vec<u32>) {
        if txnrs.is_empty() {
            return;
        }
        let durable = spool::commit(self.store, &[&*self.record], self.seqs);
        match durable {
            Ok(()) => {
                self.stats.spool.requests.add(1);
                let seq = self.seqs[0];
                match Decoded::read(self.record.as_bytes()) {
                    Ok(d) => {
                        if let Err(e) = spool::feed(self.outlet, session.shard, seq, &d, 0) {
                            tracing::error!("relp: a record just written does not read: {e}");
                        }
                    }
                    Err(e) => tracing::error!("relp: a record just written does not read: {e}"),
                }
                for &t in txnrs.iter() {
                    relp_frame::write_rsp(&mut session.answers, t, 200, "OK", "");
                }
            }
            Err(e) => {
                self.stats.spool.failures.add(1);
                tracing::error!("relp: spool write failed, answering 500: {e}");
                for &t in txnrs.iter() {
                    relp_frame::write_rsp(&mut session.answers, t, 500, "store unavailable", "");
                }
            }
        }
        txnrs.clear();
    }
}

/// Answers a frame that is not a message of an open session.
fn control(session: &mut Session, frame: &Frame<'_>) {
    match frame.command {
        "open" => {
            session.open = true;
            relp_frame::write_rsp(&mut session.answers, frame.txnr, 200, "OK", OFFERS);
        }
        "close" => {
            // An empty answer, then the session ends.
            session
                .answers
                .extend_from_slice(format!("{} rsp 0\n", frame.txnr).as_bytes());
            session.closing = true;
        }
        "syslog" => {
            relp_frame::write_rsp(
                &mut session.answers,
                frame.txnr,
                500,
                "session not open",
                "",
            );
        }
        _ => {
            relp_frame::write_rsp(&mut session.answers, frame.txnr, 500, "unknown command", "");
        }
    }
}

/// A message without the line end some senders add.
fn trim_line(data: &[u8]) -> &[u8] {
    let mut end = data.len();
    while end > 0 && matches!(data[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    &data[..end]
}

/// Writes what answers it can; `false` when the session is over (closed, or its peer gone).
fn flush(session: &mut Session) -> bool {
    while session.writable && !session.answers.is_empty() {
        match session.stream.write(&session.answers) {
            Ok(0) => return false,
            Ok(n) => {
                session.answers.drain(..n);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => session.writable = false,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    !(session.closing && session.answers.is_empty())
}

fn close(poll: &Poll, sessions: &mut [Option<Session>], slot: usize) {
    if let Some(mut s) = sessions[slot].take() {
        let _ = poll.registry().deregister(&mut s.stream);
    }
}

/// RELP in the registry.
pub(crate) struct RelpInput;

impl Input for RelpInput {
    fn id(&self) -> InputId {
        InputId::Relp
    }

    fn delivery(&self) -> Delivery {
        Delivery::Durable
    }

    fn enabled(&self, inputs: &InputsConfig) -> bool {
        inputs.relp.enabled
    }

    fn format(&self, _: &InputsConfig) -> Format {
        Format::Syslog
    }

    fn bind(&self, cfg: &Config) -> Result<Box<dyn Bound>, Error> {
        let c = &cfg.inputs.relp;
        let listener = std::net::TcpListener::bind(&c.address).map_err(|source| Error::Bind {
            key: "inputs.relp.address",
            addr: c.address.clone(),
            source,
        })?;
        Ok(Box::new(BoundRelp(listener)))
    }
}

struct BoundRelp(std::net::TcpListener);

impl Bound for BoundRelp {
    fn local_addr(&self) -> Option<SocketAddr> {
        self.0.local_addr().ok()
    }

    fn start(self: Box<Self>, with: Start<'_>) -> Result<Running, Error> {
        let c = &with.cfg.inputs.relp;
        let settings = RelpSettings {
            max_line: with.cfg.dataplane.max_line_bytes as usize,
            max_connections: c.max_connections as usize,
            idle_timeout: Duration::from_secs(c.idle_timeout_s),
            linger: Duration::from_millis(with.cfg.dataplane.batch_linger_ms),
            store: Arc::clone(with.store),
            pending: with.pending,
        };
        spawn(
            self.0,
            with.outlet,
            settings,
            Arc::clone(with.stats),
            Arc::clone(with.stop),
        )
        .map(Running::thread)
        .map_err(Error::Thread)
    }
}
