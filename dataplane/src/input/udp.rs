//! Syslog over UDP: one message per datagram.

use super::outlet::Outlet;
use super::registry::{Bound, Delivery, Input, Running, Start};
use crate::Error;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;
use watchpost_normalize::Format;
use watchpost_proto::config::InputsConfig;
use watchpost_proto::{Config, InputId, now_ns};

/// Asks the kernel for a receive buffer of `bytes` (bursts beyond it are dropped by the kernel)
/// and returns what it gave, in the same terms: Linux caps the request at `net.core.rmem_max`
/// without an error, and reports twice the usable size (its bookkeeping overhead), so half of
/// what it reports is compared with what was asked.
pub fn set_recv_buffer(socket: &UdpSocket, bytes: u32) -> u32 {
    use std::os::fd::AsRawFd;
    let v: libc::c_int = bytes.min(i32::MAX as u32) as libc::c_int;
    let mut got: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: a valid socket descriptor and pointers to c_ints of the sizes given.
    unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&mut got as *mut libc::c_int).cast(),
            &mut len,
        );
    }
    u32::try_from(got / 2).unwrap_or(0)
}

/// What the kernel counts of this process's UDP sockets bound to a local port (IPv4 and IPv6),
/// from `/proc/net/udp` and `/proc/net/udp6`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct UdpKernel {
    /// Datagrams the kernel dropped because the receive buffer was full (since the socket
    /// opened): the sign that `recv_buffer_bytes` or `net.core.rmem_max` is too small, or the
    /// input thread too slow.
    pub drops: u64,
    /// Kernel memory the datagrams waiting now take (their bytes and the kernel's overhead per
    /// datagram, the measure the kernel compares with the buffer's size).
    pub queued_bytes: u64,
}

/// The kernel's counters of the UDP sockets on local `port`; `None` where `/proc` cannot be
/// read (not Linux) or no socket is bound to it.
pub fn udp_kernel(port: u16) -> Option<UdpKernel> {
    // This process's sockets, by inode (`/proc/self/fd/N` -> `socket:[INODE]`): another
    // process's socket on the same port (SO_REUSEPORT, another network stack's listener) is
    // not counted.
    let ours: std::collections::HashSet<u64> = std::fs::read_dir("/proc/self/fd")
        .ok()?
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter_map(|l| {
            l.to_str()?
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect();
    let mut found = None;
    for table in ["/proc/self/net/udp", "/proc/self/net/udp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            if let Some((k, inode)) = udp_line(line, port)
                && ours.contains(&inode)
            {
                let sum: &mut UdpKernel = found.get_or_insert_with(UdpKernel::default);
                sum.drops += k.drops;
                sum.queued_bytes += k.queued_bytes;
            }
        }
    }
    found
}

/// One line of `/proc/net/udp`: `sl local_address rem_address st tx_queue:rx_queue tr
/// tm->when retrnsmt uid timeout inode ref pointer drops`, addresses `HEXIP:HEXPORT`.
fn udp_line(line: &str, port: u16) -> Option<(UdpKernel, u64)> {
    let f: Vec<&str> = line.split_whitespace().collect();
    let local_port = f.get(1)?.rsplit_once(':')?.1;
    if u16::from_str_radix(local_port, 16).ok()? != port {
        return None;
    }
    let rx = f.get(4)?.split_once(':')?.1;
    Some((
        UdpKernel {
            drops: f.last()?.parse().ok()?,
            queued_bytes: u64::from_str_radix(rx, 16).ok()?,
        },
        f.get(9)?.parse().ok()?,
    ))
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

/// The syslog UDP input in the registry.
pub(crate) struct SyslogUdp;

impl Input for SyslogUdp {
    fn id(&self) -> InputId {
        InputId::SyslogUdp
    }

    fn delivery(&self) -> Delivery {
        Delivery::Unacknowledged
    }

    fn enabled(&self, inputs: &InputsConfig) -> bool {
        inputs.syslog_udp.enabled
    }

    fn format(&self, _: &InputsConfig) -> Format {
        Format::Syslog
    }

    fn bind(&self, cfg: &Config) -> Result<Box<dyn Bound>, Error> {
        let c = &cfg.inputs.syslog_udp;
        let socket = UdpSocket::bind(&c.address).map_err(|source| Error::Bind {
            key: "inputs.syslog_udp.address",
            addr: c.address.clone(),
            source,
        })?;
        let got = set_recv_buffer(&socket, c.recv_buffer_bytes);
        if got < c.recv_buffer_bytes {
            tracing::warn!(
                "inputs.syslog_udp.recv_buffer_bytes: asked for {} bytes, the kernel gave {got} \
                 (net.core.rmem_max caps it): bursts beyond it are dropped by the kernel \
                 (/stats syslog_udp_kernel.drops); raise net.core.rmem_max (deploy/TUNING.md)",
                c.recv_buffer_bytes
            );
        }
        Ok(Box::new(BoundUdp(socket)))
    }
}

struct BoundUdp(UdpSocket);

impl Bound for BoundUdp {
    fn local_addr(&self) -> Option<SocketAddr> {
        self.0.local_addr().ok()
    }

    fn start(self: Box<Self>, with: Start<'_>) -> Result<Running, Error> {
        let dp = &with.cfg.dataplane;
        spawn(
            self.0,
            with.outlet,
            dp.max_line_bytes as usize,
            dp.batch_linger_ms,
            Arc::clone(with.stop),
        )
        .map(Running::thread)
        .map_err(Error::Thread)
    }
}

#[cfg(test)]
mod kernel_tests {
    use super::*;

    #[test]
    fn proc_net_udp_lines_give_drops_and_queued_bytes_of_their_port() {
        let line = "  934: 0100007F:158A 00000000:0000 07 00000000:00000A00 00:00000000 00000000     0        0 123456 2 0000000000000000 42";
        assert_eq!(
            udp_line(line, 5514),
            Some((
                UdpKernel {
                    drops: 42,
                    queued_bytes: 2560
                },
                123456
            ))
        );
        assert_eq!(udp_line(line, 514), None);
        assert_eq!(udp_line("garbage", 5514), None);
    }

    #[test]
    fn a_bound_socket_is_found_with_its_buffer() {
        if !std::path::Path::new("/proc/self/net/udp").exists() {
            return; // not Linux: udp_kernel answers None by design
        }
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = socket.local_addr().unwrap().port();
        let got = set_recv_buffer(&socket, 64 << 10);
        assert!(got >= 32 << 10, "{got}");
        let k = udp_kernel(port).expect("the socket is in /proc/net/udp");
        assert_eq!(k.drops, 0);
    }
}
