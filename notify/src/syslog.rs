//! Syslog forwarding to a SIEM: RFC 5424 messages over UDP, TCP with octet-counted frames
//! (RFC 6587), or TLS (RFC 5425, the same framing).
//!
//! A TCP or TLS connection is kept between messages; one the collector has closed (it
//! restarted) is noticed before the next write and opened again, and one that failed or timed
//! out mid-write is dropped, so a frame is never left half written on a kept connection. A
//! message counts as delivered once it is written and flushed to the socket: syslog has no
//! acknowledgement, so a collector that dies with unread bytes in its buffer loses them (RELP
//! would close that gap; rsyslog's `omrelp` peers are rare on the sending side of a SIEM).
//! Over UDP a message counts as delivered once sent.

use super::{ChannelError, DeliveryError};
use rustls::pki_types::ServerName;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpStream, UdpSocket};
use tokio_rustls::client::TlsStream;

/// Largest message over UDP: what fits one datagram on any path without IP fragmentation
/// trouble is smaller, but rsyslog and most SIEM collectors take up to 64 KiB datagrams.
const MAX_UDP_BYTES: usize = 65_000;

/// Local facility 4 (20), a SIEM's usual choice for security tools, times 8.
const FACILITY: u8 = 20;

/// Where and how to send.
pub(crate) struct SyslogTransport {
    address: String,
    transport: Transport,
    /// The open connection, when there is one.
    stream: tokio::sync::Mutex<Option<Connection>>,
    /// Host name put in each message.
    hostname: String,
}

enum Transport {
    Udp,
    Tcp,
    Tls(tokio_rustls::TlsConnector),
}

/// A kept connection.
enum Connection {
    Tcp(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Connection {
    fn tcp(&self) -> &TcpStream {
        match self {
            Connection::Tcp(t) => t,
            Connection::Tls(t) => t.get_ref().0,
        }
    }

    /// The collector closed it (or sent something, which a syslog collector never does but a
    /// TLS close does): it is dropped rather than written to, since the first write after the
    /// peer closed still succeeds locally and its message would be lost.
    fn closed_by_peer(&self) -> bool {
        let mut probe = [0u8; 1];
        !matches!(self.tcp().try_read(&mut probe), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
    }

    async fn write_frame(&mut self, frame: &[u8]) -> std::io::Result<()> {
        match self {
            Connection::Tcp(t) => {
                t.write_all(frame).await?;
                t.flush().await
            }
            Connection::Tls(t) => {
                t.write_all(frame).await?;
                t.flush().await
            }
        }
    }
}

impl SyslogTransport {
    /// A transport to `address` (`host:port`) over `transport` (`udp`, `tcp` or `tls`);
    /// `tls` checks the collector's certificate against the system's roots and `ca_file`.
    pub(crate) fn new(
        address: &str,
        transport: &str,
        ca_file: Option<&std::path::Path>,
    ) -> Result<SyslogTransport, ChannelError> {
        let transport = match transport {
            "udp" => Transport::Udp,
            "tcp" => Transport::Tcp,
            _ => {
                let roots = watchpost_outbound::roots(ca_file)?;
                let config = watchpost_outbound::tls_client_config(roots)?;
                Transport::Tls(tokio_rustls::TlsConnector::from(Arc::new(config)))
            }
        };
        Ok(SyslogTransport {
            address: address.to_string(),
            transport,
            stream: tokio::sync::Mutex::new(None),
            hostname: host_name(),
        })
    }

    /// The RFC 5424 line of `msg` with severity `severity` (0 to 5, the alert scale).
    fn frame(&self, msg: &str, severity: u8, msg_id: &str) -> String {
        // Alert severity 5 (critical) to syslog 2, 4 to 3 (error), 3 to 4, 2 to 5, 1 to 6, 0 to 7.
        let syslog_severity = 7 - severity.min(5);
        let pri = u16::from(FACILITY) * 8 + u16::from(syslog_severity);
        format!(
            "<{pri}>1 {} {} watchpost - {msg_id} - {msg}",
            timestamp(watchpost_proto::now_ns()),
            self.hostname
        )
    }

    /// Sends one message within `deadline`.
    pub(crate) async fn send(
        &self,
        msg: &str,
        severity: u8,
        msg_id: &str,
        deadline: Duration,
    ) -> Result<(), DeliveryError> {
        let line = self.frame(msg, severity, msg_id);
        tokio::time::timeout(deadline, self.send_line(line))
            .await
            .map_err(|_| DeliveryError::Timeout(deadline.as_secs_f64()))?
    }

    async fn send_line(&self, line: String) -> Result<(), DeliveryError> {
        if let Transport::Udp = self.transport {
            if line.len() > MAX_UDP_BYTES {
                return Err(DeliveryError::Unsendable(format!(
                    "a {} byte message does not fit a UDP datagram (at most {MAX_UDP_BYTES}); use tcp or tls",
                    line.len()
                )));
            }
            let socket = UdpSocket::bind(if self.address.starts_with('[') {
                "[::]:0"
            } else {
                "0.0.0.0:0"
            })
            .await
            .map_err(|e| DeliveryError::Connect(format!("UDP socket: {e}")))?;
            socket
                .send_to(line.as_bytes(), &self.address)
                .await
                .map_err(|e| DeliveryError::Connect(format!("{}: {e}", self.address)))?;
            return Ok(());
        }
        let mut held = self.stream.lock().await;
        // Taken out while in use: if this future is dropped (the deadline) or the write fails,
        // the connection goes with it instead of going back with half a frame on it.
        let mut conn = match held.take() {
            Some(c) if !c.closed_by_peer() => c,
            _ => self.connect().await?,
        };
        // Octet counting: a message may hold line breaks (a CEF value never does, JSON may not).
        let frame = format!("{} {line}", line.len());
        conn.write_frame(frame.as_bytes())
            .await
            .map_err(|e| DeliveryError::Exchange(format!("{}: {e}", self.address)))?;
        *held = Some(conn);
        Ok(())
    }

    async fn connect(&self) -> Result<Connection, DeliveryError> {
        let tcp = TcpStream::connect(&self.address)
            .await
            .map_err(|e| DeliveryError::Connect(format!("{}: {e}", self.address)))?;
        let _ = tcp.set_nodelay(true);
        match &self.transport {
            Transport::Tls(connector) => {
                let host = self
                    .address
                    .rsplit_once(':')
                    .map_or(self.address.as_str(), |(h, _)| h)
                    .trim_start_matches('[')
                    .trim_end_matches(']');
                let name = ServerName::try_from(host.to_string()).map_err(|e| {
                    DeliveryError::Connect(format!("`{host}` as a TLS server name: {e}"))
                })?;
                let tls = connector.connect(name, tcp).await.map_err(|e| {
                    DeliveryError::Connect(format!("TLS with {}: {e}", self.address))
                })?;
                Ok(Connection::Tls(Box::new(tls)))
            }
            _ => Ok(Connection::Tcp(tcp)),
        }
    }
}

/// An RFC 5424 TIMESTAMP: RFC 3339 with at most six fractional digits (the RFC's limit).
fn timestamp(ns: i64) -> String {
    let text = watchpost_normalize::Rfc3339(ns).to_string();
    match (text.find('.'), text.find('Z')) {
        (Some(dot), Some(z)) if z > dot + 7 => format!("{}Z", &text[..dot + 7]),
        _ => text,
    }
}

/// This host's name, for the HOSTNAME field; `-` (nil) when it cannot be read.
fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at most that much.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "-".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let name = String::from_utf8_lossy(&buf[..end]).to_string();
    if name.is_empty() || name.contains(' ') {
        "-".into()
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn timestamps_have_at_most_six_fractional_digits() {
        let t = super::timestamp(1_700_000_000_123_456_789);
        assert_eq!(t, "2023-11-14T22:13:20.123456Z");
        assert_eq!(
            super::timestamp(1_700_000_000_000_000_000),
            "2023-11-14T22:13:20.000000Z"
        );
    }
}
