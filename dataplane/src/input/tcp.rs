//! TCP inputs (syslog and JSON lines): one thread per input, all connections on one `mio` poll.
//!
//! One thread per input rather than per connection keeps each ring single-producer, and costs one
//! `epoll_wait` per wake-up, not per connection. When a ring is full the thread waits in
//! `Outlet::push_line`, so it stops reading every connection of this input and TCP flow control
//! slows the senders: nothing accepted is dropped.

use super::framing::{Framer, Framing};
use super::outlet::Outlet;
use crate::stats::Stats;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use std::io::ErrorKind;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use watchpost_proto::{InputId, now_ns};

const LISTENER: Token = Token(usize::MAX);

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
    let mut last_sweep = Instant::now();
    let workers = outlet.workers().max(1);

    while !stop.load(Ordering::Relaxed) {
        if let Err(e) = poll.poll(&mut events, Some(s.linger)) {
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
            let slot = ev.token().0;
            let Some(Some(conn)) = conns.get_mut(slot) else {
                continue;
            };
            if let Some(end) = drain(conn, &mut outlet, stop) {
                if end == End::Error {
                    counters.connection_errors.add(1);
                }
                close(&poll, &mut conns, slot, &mut outlet);
                free_slots.push(slot);
                live -= 1;
            }
        }
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

/// Reads until the socket would block or the input is told to stop; `Some` when the connection
/// ended. The stop flag is read once per read call: a peer that sends faster than the service
/// reads never lets the socket run dry, and would otherwise keep the input reading after a
/// SIGTERM for as long as it sent.
fn drain(conn: &mut Conn, outlet: &mut Outlet, stop: &AtomicBool) -> Option<End> {
    while !stop.load(Ordering::Relaxed) {
        match conn.framer.read_from(&mut conn.stream) {
            Ok(0) => return Some(End::Eof),
            Ok(_) => {
                conn.last_active = Instant::now();
                let now = now_ns();
                while let Some(f) = conn.framer.next_frame() {
                    outlet.push_line(conn.shard, &conn.framer.buffer()[f.range], now, f.truncated);
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return None,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return Some(End::Error),
        }
    }
    None
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
