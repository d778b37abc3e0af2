//! Syslog forwarding to a SIEM: RFC 5424 messages over UDP, TCP with octet-counted frames
//! (RFC 6587), or TLS (RFC 5425, the same framing).
//!
//! A TCP or TLS connection is kept between messages and opened again after a failure. A
//! message counts as delivered once it is written and flushed to the socket: syslog has no
//! acknowledgement, so a collector that dies with unread bytes in its buffer loses them (RELP
//! would close that gap; rsyslog's `omrelp` peers are rare on the sending side of a SIEM).
//! Over UDP a message counts as delivered once sent.

use super::DeliveryError;
use rustls::pki_types::ServerName;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

/// Largest message over UDP: what fits one datagram on any path without IP fragmentation
/// trouble is smaller, but rsyslog and most SIEM collectors take up to 64 KiB datagrams.
const MAX_UDP_BYTES: usize = 65_000;

/// Local facility 4 (20), a SIEM's usual choice for security tools, times 8.
const FACILITY: u8 = 20;

/// Where and how to send.
pub(crate) struct SyslogTransport {
    address: String,
    transport: Transport,
    /// The open stream, when there is one.
    stream: tokio::sync::Mutex<Option<Box<dyn Stream>>>,
    /// Host name put in each message.
    hostname: String,
}

enum Transport {
    Udp,
    Tcp,
    Tls(tokio_rustls::TlsConnector),
}

trait Stream: AsyncWrite + Unpin + Send {}
impl<T: AsyncWrite + Unpin + Send> Stream for T {}

impl SyslogTransport {
    /// A transport to `address` (`host:port`) over `transport` (`udp`, `tcp` or `tls`);
    /// `tls` checks the collector's certificate against the system's roots and `ca_file`.
    pub(crate) fn new(
        address: &str,
        transport: &str,
        ca_file: Option<&std::path::Path>,
    ) -> Result<SyslogTransport, String> {
        let transport = match transport {
            "udp" => Transport::Udp,
            "tcp" => Transport::Tcp,
            _ => {
                let roots = crate::outbound::roots(ca_file)?;
                let provider = Arc::new(rustls::crypto::ring::default_provider());
                let config = rustls::ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(|e| format!("TLS set-up: {e}"))?
                    .with_root_certificates(roots)
                    .with_no_client_auth();
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
            watchpost_dataplane::Rfc3339(watchpost_proto::now_ns()),
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
                return Err(DeliveryError::Refused(format!(
                    "a {} byte message does not fit a UDP datagram",
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
        if held.is_none() {
            *held = Some(self.connect().await?);
        }
        let Some(stream) = held.as_mut() else {
            return Err(DeliveryError::Connect("no connection".into()));
        };
        // Octet counting: a message may hold line breaks (a CEF value never does, JSON may not).
        let frame = format!("{} {line}", line.len());
        let written = async {
            stream.write_all(frame.as_bytes()).await?;
            stream.flush().await
        }
        .await;
        if let Err(e) = written {
            *held = None;
            return Err(DeliveryError::Exchange(format!("{}: {e}", self.address)));
        }
        Ok(())
    }

    async fn connect(&self) -> Result<Box<dyn Stream>, DeliveryError> {
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
                Ok(Box::new(tls))
            }
            _ => Ok(Box::new(tcp)),
        }
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
