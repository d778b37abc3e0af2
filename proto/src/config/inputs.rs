//! The `[inputs]` tables: UDP and TCP syslog, JSON over TCP, files, HTTP.

use super::Config;
use super::problems::Problems;
use serde::{Deserialize, Serialize};

/// `[inputs]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct InputsConfig {
    /// Syslog over UDP (RFC 5424 and RFC 3164).
    pub syslog_udp: UdpInputConfig,
    /// Syslog over TCP (newline or octet-counting framing).
    pub syslog_tcp: TcpInputConfig,
    /// JSON lines over TCP.
    pub json_tcp: TcpInputConfig,
    /// Tailed files.
    pub file: FileInputConfig,
    /// `POST /api/v1/ingest` on the API port.
    pub http: HttpInputConfig,
    /// Syslog over RELP (rsyslog's `omrelp`), acknowledged once durable.
    pub relp: TcpInputConfig,
}

impl InputsConfig {
    /// Turns every input off (a fleet's node that is not a sensor reads none).
    pub fn disable_all(&mut self) {
        self.syslog_udp.enabled = false;
        self.syslog_tcp.enabled = false;
        self.json_tcp.enabled = false;
        self.file.enabled = false;
        self.http.enabled = false;
        self.relp.enabled = false;
    }
}

impl Default for InputsConfig {
    fn default() -> InputsConfig {
        InputsConfig {
            syslog_udp: UdpInputConfig::default(),
            syslog_tcp: TcpInputConfig {
                address: "127.0.0.1:5514".into(),
                ..TcpInputConfig::default()
            },
            json_tcp: TcpInputConfig {
                address: "127.0.0.1:5515".into(),
                ..TcpInputConfig::default()
            },
            file: FileInputConfig::default(),
            http: HttpInputConfig::default(),
            relp: TcpInputConfig {
                enabled: false,
                address: "127.0.0.1:2514".into(),
                ..TcpInputConfig::default()
            },
        }
    }
}

/// A UDP input.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct UdpInputConfig {
    /// Listen at all.
    pub enabled: bool,
    /// `ip:port` to bind.
    pub address: String,
    /// Kernel receive buffer asked for (SO_RCVBUF); bursts beyond it are dropped by the kernel.
    pub recv_buffer_bytes: u32,
}

impl Default for UdpInputConfig {
    fn default() -> UdpInputConfig {
        UdpInputConfig {
            enabled: true,
            address: "127.0.0.1:5514".into(),
            recv_buffer_bytes: 8 << 20,
        }
    }
}

/// A TCP input.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TcpInputConfig {
    /// Listen at all.
    pub enabled: bool,
    /// `ip:port` to bind.
    pub address: String,
    /// Connections served at once; more are refused (and counted).
    pub max_connections: u32,
    /// Seconds a connection may send nothing before it is closed.
    pub idle_timeout_s: u64,
}

impl Default for TcpInputConfig {
    fn default() -> TcpInputConfig {
        TcpInputConfig {
            enabled: true,
            address: String::new(),
            max_connections: 512,
            idle_timeout_s: 600,
        }
    }
}

/// The file tail input.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct FileInputConfig {
    /// Tail at all.
    pub enabled: bool,
    /// Glob patterns of files to tail (`/var/log/auth.log`, `/var/log/nginx/*.log`).
    pub paths: Vec<String>,
    /// `syslog`, `json` or `auto` (a line starting with `{` is JSON).
    pub format: String,
    /// Where a file never seen before is read from: `beginning` or `end`.
    pub start_at: String,
    /// Milliseconds between looks for new data, new files, rotation and truncation.
    pub poll_interval_ms: u64,
}

impl Default for FileInputConfig {
    fn default() -> FileInputConfig {
        FileInputConfig {
            enabled: false,
            paths: Vec::new(),
            format: "auto".into(),
            start_at: "beginning".into(),
            poll_interval_ms: 250,
        }
    }
}

/// The HTTP ingest input.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct HttpInputConfig {
    /// Serve `POST /api/v1/ingest`.
    pub enabled: bool,
}

impl Default for HttpInputConfig {
    fn default() -> HttpInputConfig {
        HttpInputConfig { enabled: true }
    }
}

/// Checks the table's keys.
pub(super) fn check(config: &Config, p: &mut Problems) {
    let i = &config.inputs;
    if i.syslog_udp.enabled {
        p.socket("inputs.syslog_udp.address", &i.syslog_udp.address);
    }
    p.range_u64(
        "inputs.syslog_udp.recv_buffer_bytes",
        i.syslog_udp.recv_buffer_bytes.into(),
        4096,
        1 << 30,
    );
    for (name, t) in [
        ("syslog_tcp", &i.syslog_tcp),
        ("json_tcp", &i.json_tcp),
        ("relp", &i.relp),
    ] {
        if t.enabled {
            p.socket(&format!("inputs.{name}.address"), &t.address);
        }
        p.range_u64(
            &format!("inputs.{name}.max_connections"),
            t.max_connections.into(),
            1,
            100_000,
        );
        p.range_u64(
            &format!("inputs.{name}.idle_timeout_s"),
            t.idle_timeout_s,
            1,
            86_400 * 7,
        );
    }
    let f = &i.file;
    if f.enabled && f.paths.is_empty() {
        p.add(
            "inputs.file.paths",
            "at least one glob is required when inputs.file.enabled is true",
        );
    }
    for (n, g) in f.paths.iter().enumerate() {
        if g.trim().is_empty() {
            p.add(&format!("inputs.file.paths[{n}]"), "must not be empty");
        }
    }
    p.one_of("inputs.file.format", &f.format, &["auto", "syslog", "json"]);
    p.one_of("inputs.file.start_at", &f.start_at, &["beginning", "end"]);
    p.range_u64(
        "inputs.file.poll_interval_ms",
        f.poll_interval_ms,
        10,
        60_000,
    );
}
