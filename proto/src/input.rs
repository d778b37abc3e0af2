//! Which input an event came in by: the key of the per-input counters and the `input` field of
//! stored events.

/// Which input produced a batch; indexes the per-input counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum InputId {
    /// Syslog over UDP.
    SyslogUdp = 0,
    /// Syslog over TCP.
    SyslogTcp = 1,
    /// JSON lines over TCP.
    JsonTcp = 2,
    /// Tailed files.
    File = 3,
    /// HTTP `POST /api/v1/ingest`.
    Http = 4,
    /// Syslog over RELP (rsyslog's `omrelp`).
    Relp = 5,
}

impl InputId {
    /// Every input, in counter order.
    pub const ALL: [InputId; 6] = [
        InputId::SyslogUdp,
        InputId::SyslogTcp,
        InputId::JsonTcp,
        InputId::File,
        InputId::Http,
        InputId::Relp,
    ];

    /// Name in `/stats` and `/health`.
    pub fn name(self) -> &'static str {
        match self {
            InputId::SyslogUdp => "syslog_udp",
            InputId::SyslogTcp => "syslog_tcp",
            InputId::JsonTcp => "json_tcp",
            InputId::File => "file",
            InputId::Http => "http",
            InputId::Relp => "relp",
        }
    }

    /// The `input` field of events from this input.
    pub fn event_input(self) -> &'static str {
        match self {
            InputId::SyslogUdp | InputId::SyslogTcp | InputId::Relp => "syslog",
            InputId::JsonTcp => "json",
            InputId::File => "file",
            InputId::Http => "http",
        }
    }

    /// Inverse of `as u8`.
    pub fn from_u8(value: u8) -> Option<InputId> {
        InputId::ALL.get(value as usize).copied()
    }
}
