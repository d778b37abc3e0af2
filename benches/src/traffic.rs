//! The traffic generator: mixed, mostly benign security logs from one simulated organisation.

mod json;
mod syslog;

use crate::emit::{self, Civil};
use crate::rng::Rng;
use crate::world::{External, Role, World};

/// What kind of event a generated line is, so callers and tests can account for the mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// sshd `Accepted password|publickey`.
    SshdSuccess,
    /// sshd failed authentication, invalid users, pre-auth disconnects (benign typos and attacks).
    SshdFailure,
    /// sshd/pam session open/close and disconnects.
    SshdSession,
    /// sudo command executions, sessions and refusals.
    Sudo,
    /// cron jobs and their pam sessions.
    Cron,
    /// systemd and logind unit/session messages.
    Systemd,
    /// Kernel messages: OOM kills, USB, segfaults, filesystems, links, AppArmor.
    Kernel,
    /// Packet-filter log lines (`[UFW BLOCK] IN=... SRC=... DPT=...`).
    Firewall,
    /// nginx combined access log lines, including scanners.
    WebAccess,
    /// ECS application events (requests, orders, slow queries, errors).
    JsonApp,
    /// ECS authentication audit events from the SSO service.
    JsonAuth,
    /// Windows logons, logoffs and special-privilege assignments (4624, 4634, 4672).
    WindowsLogon,
    /// Windows failed logons, Kerberos pre-auth failures and lockouts (4625, 4771, 4740).
    WindowsLogonFailure,
    /// Windows process creation (4688).
    WindowsProcess,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 14] = [
        Kind::SshdSuccess,
        Kind::SshdFailure,
        Kind::SshdSession,
        Kind::Sudo,
        Kind::Cron,
        Kind::Systemd,
        Kind::Kernel,
        Kind::Firewall,
        Kind::WebAccess,
        Kind::JsonApp,
        Kind::JsonAuth,
        Kind::WindowsLogon,
        Kind::WindowsLogonFailure,
        Kind::WindowsProcess,
    ];

    /// Whether [`Traffic::next_json`] (rather than [`Traffic::next_syslog`]) produces this kind.
    pub fn is_json(self) -> bool {
        matches!(
            self,
            Kind::JsonApp
                | Kind::JsonAuth
                | Kind::WindowsLogon
                | Kind::WindowsLogonFailure
                | Kind::WindowsProcess
        )
    }

    /// A stable snake_case name, for reports.
    pub fn name(self) -> &'static str {
        match self {
            Kind::SshdSuccess => "sshd_success",
            Kind::SshdFailure => "sshd_failure",
            Kind::SshdSession => "sshd_session",
            Kind::Sudo => "sudo",
            Kind::Cron => "cron",
            Kind::Systemd => "systemd",
            Kind::Kernel => "kernel",
            Kind::Firewall => "firewall",
            Kind::WebAccess => "web_access",
            Kind::JsonApp => "json_app",
            Kind::JsonAuth => "json_auth",
            Kind::WindowsLogon => "windows_logon",
            Kind::WindowsLogonFailure => "windows_logon_failure",
            Kind::WindowsProcess => "windows_process",
        }
    }
}

/// An attack in progress: one hostile source hammering one target for a while.
///
/// Attacks come in bursts from few addresses; spreading the same number of failures uniformly
/// over random sources would hide exactly the structure rate-based detection looks for.
#[derive(Clone, Copy, Debug)]
struct Campaign {
    src: External,
    /// Index into `World::hosts`.
    target: usize,
    /// Lines still to emit.
    left: u32,
    /// Next source port; attackers' ports mostly increase.
    port: u16,
}

impl Campaign {
    fn start(rng: &mut Rng, world: &World, targets: &[usize]) -> Self {
        Campaign {
            src: rng.pick(&world.hostile),
            target: rng.pick(targets),
            left: rng.log_uniform(20, 600) as u32,
            port: rng.range(32_768, 60_000) as u16,
        }
    }

    /// Consumes one line of the campaign and returns the source port to print.
    fn step(&mut self, rng: &mut Rng) -> u16 {
        self.left -= 1;
        self.port = self.port.wrapping_add(rng.range(1, 40) as u16).max(1024);
        self.port
    }
}

/// Seeded generator of realistic mixed security log traffic.
///
/// Output is a pure function of the seed and the sequence of `now_unix_s` values passed in, so a
/// load run can be replayed exactly. Lines are appended to the caller's buffer; after warm-up no
/// call allocates.
#[derive(Clone, Debug)]
pub struct Traffic {
    rng: Rng,
    world: World,
    /// Breakdown of the last `now_unix_s` seen; most consecutive lines share a second.
    civil: Civil,
    /// Reused buffer for values that must be composed before being JSON-escaped.
    scratch: Vec<u8>,
    /// Host index lists by purpose, computed once.
    linux: Vec<usize>,
    servers: Vec<usize>,
    web: Vec<usize>,
    exposed: Vec<usize>,
    bastions: Vec<usize>,
    gateways: Vec<usize>,
    app_hosts: Vec<usize>,
    monitors: Vec<usize>,
    win_servers: Vec<usize>,
    win_dcs: Vec<usize>,
    /// Monotonic counters that real systems also keep monotonic (session ids, record ids).
    session_id: u64,
    record_id: u64,
    logon_id: u64,
    ssh_brute: Option<Campaign>,
    web_scan: Option<Campaign>,
    rdp_brute: Option<Campaign>,
    stuffing: Option<Campaign>,
    /// Every internet client is a new address (see [`Traffic::with_distinct_sources`]).
    distinct_sources: bool,
}

impl Traffic {
    /// A generator for the stream identified by `seed` (use [`crate::stream_seed`] to give each
    /// connection of a run its own).
    pub fn new(seed: u64) -> Self {
        let world = World::build();
        let mut rng = Rng::new(seed);
        let linux = world.hosts_with(&[
            Role::Web,
            Role::App,
            Role::Db,
            Role::Bastion,
            Role::Ci,
            Role::Mail,
            Role::Gateway,
            Role::K8s,
            Role::Monitor,
        ]);
        let servers = world.hosts_with(&[
            Role::Web,
            Role::App,
            Role::Db,
            Role::Bastion,
            Role::Ci,
            Role::Mail,
            Role::K8s,
            Role::Monitor,
        ]);
        Traffic {
            civil: Civil::from_unix(0),
            scratch: Vec::with_capacity(1024),
            web: world.hosts_with(&[Role::Web]),
            exposed: world.hosts_with(&[Role::Web, Role::Bastion, Role::Mail]),
            bastions: world.hosts_with(&[Role::Bastion]),
            gateways: world.hosts_with(&[Role::Gateway]),
            app_hosts: world.hosts_with(&[Role::App, Role::K8s]),
            monitors: world.hosts_with(&[Role::Monitor]),
            win_servers: world.hosts_with(&[Role::WinSrv, Role::WinDc]),
            win_dcs: world.hosts_with(&[Role::WinDc]),
            linux,
            servers,
            // Start counters somewhere plausible and seed-dependent, not at 0.
            session_id: rng.range(1_000, 90_000),
            record_id: rng.range(1_000_000, 90_000_000),
            logon_id: rng.range(0x10_0000, 0xFF_FFFF),
            ssh_brute: None,
            web_scan: None,
            rdp_brute: None,
            stuffing: None,
            distinct_sources: false,
            rng,
            world,
        }
    }

    /// Every internet client address drawn anew instead of from the world's 80: the traffic of an
    /// internet-facing sensor, where nearly every source is new and so is every UEBA entity it
    /// makes. The default stream is unchanged (same seed, same lines).
    pub fn with_distinct_sources(mut self) -> Self {
        self.distinct_sources = true;
        self
    }

    /// An internet client: one of the world's, or a fresh address with distinct sources.
    fn external(&mut self) -> crate::world::External {
        let known = self.rng.pick(&self.world.external);
        if self.distinct_sources {
            crate::world::External {
                ip: crate::world::public_ip(&mut self.rng),
                country: known.country,
            }
        } else {
            known
        }
    }

    /// Appends one syslog line (no trailing newline) to `out` and returns its kind.
    ///
    /// Each host consistently uses RFC 3164 (`<PRI>Mmm dd hh:mm:ss host app[pid]: msg`) or
    /// RFC 5424, as a real mixed fleet does. `out` is appended to, not cleared, so a caller can
    /// pack many lines into one write buffer.
    pub fn next_syslog(&mut self, now_unix_s: i64, out: &mut Vec<u8>) -> Kind {
        self.tick(now_unix_s);
        self.syslog_line(out)
    }

    /// Appends one JSON event (a single line, no trailing newline) to `out` and returns its kind.
    ///
    /// Application and SSO events are ECS-style (`@timestamp`, `message`, `host.name`,
    /// `source.ip`, `user.name`, `event.*`, `service.name`); most services nest the dotted fields
    /// as objects, a few ship them flat with dotted keys, as different log shippers do. Windows
    /// events are flat event-log records (`EventID`, `Channel`, `Computer`, `TargetUserName`, ...).
    pub fn next_json(&mut self, now_unix_s: i64, out: &mut Vec<u8>) -> Kind {
        self.tick(now_unix_s);
        self.json_line(out)
    }

    /// The simulated organisation, for tests and reports.
    pub fn world(&self) -> &World {
        &self.world
    }

    fn tick(&mut self, now_unix_s: i64) {
        if self.civil.unix != now_unix_s {
            self.civil = Civil::from_unix(now_unix_s);
        }
    }

    /// An ephemeral client port as Linux and Windows pick them.
    fn client_port(&mut self) -> u64 {
        self.rng.range(32_768, 65_535)
    }

    fn next_session(&mut self) -> u64 {
        self.session_id += 1;
        self.session_id
    }
}

/// Named values substituted into message templates by [`emit::expand`].
///
/// Holding indices and `'static` strings rather than references into the world keeps the
/// generator free to draw random numbers while a template is being filled.
#[derive(Clone, Copy, Debug, Default)]
struct Vars {
    /// Index into `World::users`.
    user: usize,
    /// A login that is not (or not necessarily) a user of the organisation.
    login: &'static str,
    /// Index into `World::hosts`.
    host: usize,
    ip: [u8; 4],
    dst: [u8; 4],
    port: u64,
    pid: u64,
    n: u64,
    m: u64,
    ts: u64,
    s: &'static str,
    t: &'static str,
}

impl Vars {
    fn fill(&self, world: &World, out: &mut Vec<u8>, name: &str) {
        let user = &world.users[self.user];
        match name {
            "user" => out.extend_from_slice(user.login.as_bytes()),
            "uid" => emit::u64(out, u64::from(user.uid)),
            "login" => out.extend_from_slice(self.login.as_bytes()),
            "host" => out.extend_from_slice(world.hosts[self.host].name.as_bytes()),
            "ip" => emit::ipv4(out, self.ip),
            "dst" => emit::ipv4(out, self.dst),
            "port" => emit::u64(out, self.port),
            "pid" => emit::u64(out, self.pid),
            "n" => emit::u64(out, self.n),
            "m" => emit::u64(out, self.m),
            "ts" => emit::u64(out, self.ts),
            "ms" => emit::padded(out, self.pid % 1000, 3),
            "fp" => fingerprint(out, self.n),
            "s" => out.extend_from_slice(self.s.as_bytes()),
            "t" => out.extend_from_slice(self.t.as_bytes()),
            _ => unreachable!("unknown template placeholder {{{name}}}"),
        }
    }
}

/// 43 base64 characters standing for an SSH key's SHA-256 fingerprint, a function of `key` so a
/// user's key prints the same every time.
fn fingerprint(out: &mut Vec<u8>, key: u64) {
    const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut state = key ^ 0x55AA_55AA_0F0F_F0F0;
    let mut bits = 0u64;
    let mut have = 0;
    for _ in 0..43 {
        if have < 6 {
            bits = crate::rng::splitmix64(&mut state);
            have = 64;
        }
        out.push(B64[(bits & 63) as usize]);
        bits >>= 6;
        have -= 6;
    }
}

impl Traffic {
    /// Appends `tpl` with its placeholders filled from `vars`.
    fn text(&self, out: &mut Vec<u8>, tpl: &str, vars: &Vars) {
        emit::expand(out, tpl, |o, name| vars.fill(&self.world, o, name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const NOW: i64 = 1_717_243_200; // 2024-06-01T12:00:00Z

    fn lines(seed: u64, n: usize, json: bool) -> Vec<(Kind, String)> {
        let mut t = Traffic::new(seed);
        let mut buf = Vec::new();
        (0..n)
            .map(|i| {
                buf.clear();
                let now = NOW + (i / 1000) as i64;
                let k = if json {
                    t.next_json(now, &mut buf)
                } else {
                    t.next_syslog(now, &mut buf)
                };
                (k, String::from_utf8(buf.clone()).expect("valid UTF-8"))
            })
            .collect()
    }

    #[test]
    fn deterministic_for_a_seed() {
        assert_eq!(lines(42, 3000, false), lines(42, 3000, false));
        assert_eq!(lines(42, 3000, true), lines(42, 3000, true));
        assert_ne!(lines(42, 100, false), lines(43, 100, false));
    }

    #[test]
    fn every_kind_appears_in_10k_lines() {
        let mut seen = BTreeMap::new();
        for (k, _) in lines(7, 10_000, false)
            .into_iter()
            .chain(lines(7, 10_000, true))
        {
            *seen.entry(k).or_insert(0u32) += 1;
        }
        for k in Kind::ALL {
            assert!(
                seen.contains_key(&k),
                "{} never produced: {seen:?}",
                k.name()
            );
        }
    }

    #[test]
    fn kinds_come_from_the_right_method() {
        for (k, _) in lines(9, 5_000, false) {
            assert!(!k.is_json(), "{k:?}");
        }
        for (k, _) in lines(9, 5_000, true) {
            assert!(k.is_json(), "{k:?}");
        }
    }

    #[test]
    fn syslog_lines_are_well_formed() {
        for (k, line) in lines(11, 20_000, false) {
            let rest = line.strip_prefix('<').expect("starts with <PRI>");
            let close = rest.find('>').expect("PRI closed");
            let pri: u32 = rest[..close].parse().expect("numeric PRI");
            assert!(pri <= 191, "{line}");
            let body = &rest[close + 1..];
            if let Some(v5424) = body.strip_prefix("1 ") {
                // TIMESTAMP HOSTNAME APP-NAME PROCID MSGID
                let fields: Vec<_> = v5424.splitn(6, ' ').collect();
                assert_eq!(fields.len(), 6, "{line}");
                assert!(fields[0].starts_with("2024-06-01T12:") && fields[0].ends_with('Z'));
            } else {
                assert!(body.starts_with("Jun  1 12:"), "{line}");
                assert!(body[16..].contains(": "), "{line}");
            }
            assert!(!line.contains('\n') && !line.contains('\r'), "{line}");
            assert!(line.len() < 2048, "{k:?} {line}");
        }
    }

    #[test]
    fn json_lines_parse() {
        for (k, line) in lines(13, 20_000, true) {
            let v: serde_json::Value =
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
            let obj = v.as_object().expect("object");
            match k {
                Kind::WindowsLogon | Kind::WindowsLogonFailure | Kind::WindowsProcess => {
                    assert!(obj["EventID"].is_u64(), "{line}");
                    for f in ["Channel", "Provider_Name", "Computer", "TimeCreated"] {
                        assert!(obj[f].is_string(), "{f}: {line}");
                    }
                }
                _ => {
                    assert!(
                        obj["@timestamp"]
                            .as_str()
                            .unwrap()
                            .starts_with("2024-06-01T12:")
                    );
                    assert!(obj["message"].is_string(), "{line}");
                    let host = obj
                        .get("host.name")
                        .or_else(|| obj.get("host").and_then(|h| h.get("name")));
                    assert!(host.is_some_and(|h| h.is_string()), "{line}");
                    let ds = obj
                        .get("event.dataset")
                        .or_else(|| obj.get("event").and_then(|e| e.get("dataset")));
                    assert!(ds.is_some_and(|d| d.is_string()), "{line}");
                }
            }
        }
    }

    #[test]
    fn mix_is_mostly_benign_and_varied() {
        let all = lines(5, 20_000, false);
        let failures = all.iter().filter(|(k, _)| *k == Kind::SshdFailure).count();
        assert!(failures < all.len() / 5, "{failures}");
        let web = all.iter().filter(|(k, _)| *k == Kind::WebAccess).count();
        assert!(web > all.len() / 5, "{web}");
        let distinct: std::collections::HashSet<_> = all.iter().map(|(_, l)| l).collect();
        // Identical lines do recur (the same cron session closing twice in one second), but rarely.
        assert!(distinct.len() > all.len() * 9 / 10, "{}", distinct.len());
    }

    #[test]
    fn appends_without_clearing_and_without_reallocating() {
        let mut t = Traffic::new(1);
        let mut buf = Vec::with_capacity(1 << 20);
        let ptr = buf.as_ptr();
        t.next_syslog(NOW, &mut buf);
        let first = buf.len();
        t.next_json(NOW, &mut buf);
        assert!(buf.len() > first);
        for _ in 0..1000 {
            t.next_syslog(NOW, &mut buf);
        }
        assert_eq!(ptr, buf.as_ptr());
    }
}
