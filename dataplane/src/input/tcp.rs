//! TCP inputs (syslog and JSON lines): one thread per input, all connections on one `mio` poll.
//!
//! One thread per input rather than per connection keeps each ring single-producer, and costs one
//! `epoll_wait` per wake-up, not per connection. Connections take turns: each reads at most
//! [`TURN_BYTES`] before the others get theirs, so one sender flooding as fast as it can does not
//! starve the rest (nor accepting new connections, the batch linger and the idle sweep). When a ring is full the thread waits in
//! `Outlet::push_line`, so it stops reading every connection of this input and TCP flow control
//! slows the senders: nothing accepted is dropped.

use super::framing::{Framer, Framing};
use super::outlet::Outlet;
use super::registry::{Bound, Delivery, Input, Running, Start};
use crate::Error;
use crate::stats::Stats;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use watchpost_normalize::Format;
use watchpost_proto::config::{InputsConfig, TcpInputConfig};
use watchpost_proto::{Config, InputId, now_ns};

const LISTENER: Token = Token(usize::MAX);

/// Bytes one connection reads per turn: enough to fill a few batches (the per-turn cost is one
/// bookkeeping step), small enough that a thousand connections each get a turn within a few
/// hundred milliseconds at line rate.
const TURN_BYTES: usize = 256 * 1024;

/// Settings of one TCP input.
pub struct TcpSettings {
    /// Which input (for counters).
    pub input: InputId,
    /// Framing of its messages.
    pub framing: Framing,
    /// Longest message kept whole.
    pub max_line: usize,
    /// Connections served at once.
    pub max_connections: usize,
    /// Idle connections are closed after this long.
    pub idle_timeout: Duration,
    /// Linger of partly filled batches.
    pub linger: Duration,
}

struct Conn {
    stream: TcpStream,
    framer: Framer,
    last_active: Instant,
    shard: usize,
    /// Ended its last turn with bytes still to read: it is in the ready list. The poll is
    /// edge-triggered and will not report the socket again until more arrives.
    ready: bool,
}

/// Starts a TCP input on an already bound listener.
pub fn spawn(
    listener: std::net::TcpListener,
    outlet: Outlet,
    settings: TcpSettings,
    stats: Arc<Stats>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<JoinHandle<()>> {
    listener.set_nonblocking(true)?;
    let listener = TcpListener::from_std(listener);
    let name = format!("wp-in-{}", settings.input.name());
    std::thread::Builder::new()
        .name(name)
        .spawn(move || run(listener, outlet, settings, &stats, &stop))
}

fn run(
    mut listener: TcpListener,
    mut outlet: Outlet,
    s: TcpSettings,
    stats: &Stats,
    stop: &AtomicBool,
) {
    let counters = stats.input(s.input);
    let mut poll = match Poll::new() {
        Ok(p) => p,
        Err(e) => {
            mark_down(stats, s.input, format!("poll: {e}"));
            return;
        }
    };
    if let Err(e) = poll
        .registry()
        .register(&mut listener, LISTENER, Interest::READABLE)
    {
        mark_down(stats, s.input, format!("register: {e}"));
        return;
    }
    let mut conns: Vec<Option<Conn>> = Vec::new();
    let mut free_slots: Vec<usize> = Vec::new();
    let mut live = 0usize;
    let mut next_shard = 0usize;
    let mut events = Events::with_capacity(256);
    // Connections that ended their turn still readable, served after this wake-up's events.
    let mut ready: Vec<usize> = Vec::new();
    let mut turn: Vec<usize> = Vec::new();
    let mut last_sweep = Instant::now();
    let workers = outlet.workers().max(1);

    while !stop.load(Ordering::Relaxed) {
        // With connections still readable the poll only collects what else happened.
        let wait = if ready.is_empty() {
            s.linger
        } else {
            Duration::ZERO
        };
        if let Err(e) = poll.poll(&mut events, Some(wait)) {
            if e.kind() != ErrorKind::Interrupted {
                tracing::warn!("{}: poll: {e}", s.input.name());
            }
            continue;
        }
        for ev in events.iter() {
            if ev.token() == LISTENER {
                loop {
                    match listener.accept() {
                        Ok((mut stream, _peer)) => {
                            if live >= s.max_connections {
                                counters.connections_refused.add(1);
                                drop(stream);
                                continue;
                            }
                            let slot = free_slots.pop().unwrap_or_else(|| {
                                conns.push(None);
                                conns.len() - 1
                            });
                            if poll
                                .registry()
                                .register(&mut stream, Token(slot), Interest::READABLE)
                                .is_err()
                            {
                                free_slots.push(slot);
                                continue;
                            }
                            counters.connections.add(1);
                            live += 1;
                            next_shard += 1;
                            conns[slot] = Some(Conn {
                                stream,
                                framer: Framer::new(s.framing, s.max_line),
                                last_active: Instant::now(),
                                shard: next_shard % workers,
                                ready: false,
                            });
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                        Err(e) => {
                            tracing::warn!("{}: accept: {e}", s.input.name());
                            break;
                        }
                    }
                }
                continue;
            }
            // One already in the ready list gets its turn there (once a round).
            let slot = ev.token().0;
            if conns
                .get(slot)
                .is_some_and(|c| c.as_ref().is_some_and(|c| !c.ready))
            {
                turn.push(slot);
            }
        }
        // This wake-up's connections, then those left readable by the last round, one turn each.
        turn.append(&mut ready);
        for &slot in &turn {
            let Some(Some(conn)) = conns.get_mut(slot) else {
                continue;
            };
            conn.ready = false;
            match drain(conn, &mut outlet, stop) {
                Drained::Dry => {}
                Drained::Turn => {
                    conn.ready = true;
                    ready.push(slot);
                }
                Drained::End(end) => {
                    if end == End::Error {
                        counters.connection_errors.add(1);
                    }
                    close(&poll, &mut conns, slot, &mut outlet);
                    free_slots.push(slot);
                    live -= 1;
                    // A slot is reused by the next connection: its old place in line goes.
                    ready.retain(|&r| r != slot);
                }
            }
        }
        turn.clear();
        let now = now_ns();
        outlet.flush_due(now);
        if last_sweep.elapsed() >= Duration::from_secs(1) {
            last_sweep = Instant::now();
            for slot in 0..conns.len() {
                let idle = conns[slot]
                    .as_ref()
                    .is_some_and(|c| c.last_active.elapsed() >= s.idle_timeout);
                if idle {
                    counters.connections_idle_closed.add(1);
                    close(&poll, &mut conns, slot, &mut outlet);
                    free_slots.push(slot);
                    live -= 1;
                    ready.retain(|&r| r != slot);
                }
            }
        }
    }
    // Shutdown: stop reading at once. What the framers hold (whole lines, and a last line
    // without its newline) goes on; what a peer keeps sending stays unread, and TCP tells it
    // the connection closed (docs/guarantees.md: TCP input acknowledges as far as the socket).
    for slot in 0..conns.len() {
        close(&poll, &mut conns, slot, &mut outlet);
    }
    outlet.flush_all();
}

#[derive(PartialEq, Eq)]
enum End {
    Eof,
    Error,
}

/// How a connection's turn ended.
enum Drained {
    /// The socket ran dry (or the input is stopping): the poll reports it when more arrives.
    Dry,
    /// It read its [`TURN_BYTES`] with more waiting: it goes to the back of the ready list.
    Turn,
    /// The connection ended.
    End(End),
}

/// Reads until the socket would block, the turn's bytes are read, or the input is told to
/// stop. The stop flag is read once per read call: a peer that sends faster than the service
/// reads never lets the socket run dry, and would otherwise keep the input reading after a
/// SIGTERM for as long as it sent.
fn drain(conn: &mut Conn, outlet: &mut Outlet, stop: &AtomicBool) -> Drained {
    let mut read = 0;
    while !stop.load(Ordering::Relaxed) {
        if read >= TURN_BYTES {
            return Drained::Turn;
        }
        match conn.framer.read_from(&mut conn.stream) {
            Ok(0) => return Drained::End(End::Eof),
            Ok(n) => {
                read += n;
                conn.last_active = Instant::now();
                let now = now_ns();
                while let Some(f) = conn.framer.next_frame() {
                    outlet.push_line(conn.shard, &conn.framer.buffer()[f.range], now, f.truncated);
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Drained::Dry,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return Drained::End(End::Error),
        }
    }
    Drained::Dry
}

/// Closes a connection, keeping a final line that had no newline.
fn close(poll: &Poll, conns: &mut [Option<Conn>], slot: usize, outlet: &mut Outlet) {
    if let Some(mut conn) = conns[slot].take() {
        while let Some(f) = conn.framer.next_frame() {
            outlet.push_line(
                conn.shard,
                &conn.framer.buffer()[f.range],
                now_ns(),
                f.truncated,
            );
        }
        if let Some(f) = conn.framer.finish() {
            outlet.push_line(
                conn.shard,
                &conn.framer.buffer()[f.range],
                now_ns(),
                f.truncated,
            );
        }
        let _ = poll.registry().deregister(&mut conn.stream);
    }
}

fn mark_down(stats: &Stats, input: InputId, why: String) {
    tracing::error!("{}: {why}", input.name());
    let c = stats.input(input);
    c.up.store(false, Ordering::Relaxed);
    if let Ok(mut e) = c.error.lock() {
        *e = Some(why);
    }
}

/// A TCP input in the registry: syslog (octet counting or newlines) or JSON lines.
pub(crate) struct TcpInput {
    id: InputId,
    framing: Framing,
}

/// Syslog over TCP.
pub(crate) static SYSLOG_TCP: TcpInput = TcpInput {
    id: InputId::SyslogTcp,
    framing: Framing::Syslog,
};

/// JSON lines over TCP.
pub(crate) static JSON_TCP: TcpInput = TcpInput {
    id: InputId::JsonTcp,
    framing: Framing::Newline,
};

/// The section of `[inputs]` of TCP input `id` and the key of its address.
fn config_of(id: InputId, inputs: &InputsConfig) -> (&TcpInputConfig, &'static str) {
    match id {
        InputId::JsonTcp => (&inputs.json_tcp, "inputs.json_tcp.address"),
        _ => (&inputs.syslog_tcp, "inputs.syslog_tcp.address"),
    }
}

impl Input for TcpInput {
    fn id(&self) -> InputId {
        self.id
    }

    fn delivery(&self) -> Delivery {
        Delivery::Transport
    }

    fn enabled(&self, inputs: &InputsConfig) -> bool {
        config_of(self.id, inputs).0.enabled
    }

    fn format(&self, _: &InputsConfig) -> Format {
        match self.framing {
            Framing::Newline => Format::Json,
            Framing::Syslog => Format::Syslog,
        }
    }

    fn bind(&self, cfg: &Config) -> Result<Box<dyn Bound>, Error> {
        let (c, key) = config_of(self.id, &cfg.inputs);
        let listener = std::net::TcpListener::bind(&c.address).map_err(|source| Error::Bind {
            key,
            addr: c.address.clone(),
            source,
        })?;
        Ok(Box::new(BoundTcp {
            input: self.id,
            framing: self.framing,
            listener,
        }))
    }
}

struct BoundTcp {
    input: InputId,
    framing: Framing,
    listener: std::net::TcpListener,
}

impl Bound for BoundTcp {
    fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    fn start(self: Box<Self>, with: Start<'_>) -> Result<Running, Error> {
        let dp = &with.cfg.dataplane;
        let (c, _) = config_of(self.input, &with.cfg.inputs);
        let settings = TcpSettings {
            input: self.input,
            framing: self.framing,
            max_line: dp.max_line_bytes as usize,
            max_connections: c.max_connections as usize,
            idle_timeout: Duration::from_secs(c.idle_timeout_s),
            linger: Duration::from_millis(dp.batch_linger_ms),
        };
        spawn(
            self.listener,
            with.outlet,
            settings,
            Arc::clone(with.stats),
            Arc::clone(with.stop),
        )
        .map(Running::thread)
        .map_err(Error::Thread)
    }
}
