//! Syslog over UDP: one message per datagram.

use super::outlet::Outlet;
use std::net::UdpSocket;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;
use watchpost_proto::now_ns;

/// Asks the kernel for a receive buffer of `bytes` (bursts beyond it are dropped by the kernel).
pub fn set_recv_buffer(socket: &UdpSocket, bytes: u32) {
    use std::os::fd::AsRawFd;
    let v: libc::c_int = bytes.min(i32::MAX as u32) as libc::c_int;
    // SAFETY: a valid socket descriptor and a pointer to a c_int of the size given.
    unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// Starts the UDP input on an already bound socket.
pub fn spawn(
    socket: UdpSocket,
    mut outlet: Outlet,
    max_line: usize,
    linger_ms: u64,
    stop: Arc<AtomicBool>,
) -> std::io::Result<JoinHandle<()>> {
    socket.set_read_timeout(Some(Duration::from_millis(linger_ms.max(1))))?;
    std::thread::Builder::new()
        .name("wp-in-udp".into())
        .spawn(move || {
            let mut buf = vec![0u8; 65_536];
            let workers = outlet.workers().max(1);
            while !stop.load(Ordering::Relaxed) {
                match socket.recv_from(&mut buf) {
                    Ok((n, peer)) => {
                        let now = now_ns();
                        let mut line = &buf[..n];
                        while let [rest @ .., b'\n' | b'\r' | 0] = line {
                            line = rest;
                        }
                        if !line.is_empty() {
                            let truncated = line.len() > max_line;
                            let line = &line[..line.len().min(max_line)];
                            let shard = peer_shard(&peer) % workers;
                            outlet.push_line_or_drop(shard, line, now, truncated);
                        }
                        outlet.flush_due(now);
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) =>
                    {
                        outlet.flush_due(now_ns());
                    }
                    Err(e) => {
                        tracing::warn!("udp input: {e}");
                        std::thread::sleep(Duration::from_millis(10));
                    }
                }
            }
            outlet.flush_all();
        })
}

fn peer_shard(peer: &std::net::SocketAddr) -> usize {
    match peer.ip() {
        std::net::IpAddr::V4(v) => u32::from(v) as usize,
        std::net::IpAddr::V6(v) => u128::from(v) as usize,
    }
}
