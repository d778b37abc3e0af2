//! The log lines of a generated organisation, as a sensor receives them: syslog (RFC 3164 in UTC,
//! or RFC 5424 in local time), a web server's nested-ECS access log and a VPN's flat dotted
//! JSON, each line labelled with the attack it belongs to. Shared by the organisations of
//! `realistic` and `orgs`.

use crate::scenario::civil;
use watchpost_detect::SplitMix64;

/// Writes an organisation's log lines in the formats a sensor receives, with their labels.
pub(crate) struct LogWriter {
    pub(crate) rng: SplitMix64,
    /// (time, line, the attack it belongs to).
    pub(crate) events: Vec<(i64, String, Option<usize>)>,
    pid: u32,
    /// Host names by index (the index the `ssh_*` and `sudo` writers take).
    hosts: Vec<String>,
    /// Syslog as RFC 5424 stamped in local time with this UTC offset (ns), instead of RFC 3164
    /// in UTC without a year or zone.
    rfc5424_offset: Option<i64>,
}

impl LogWriter {
    /// A writer seeded `rng`, naming hosts from `hosts`.
    pub(crate) fn new(rng: SplitMix64, hosts: Vec<String>) -> LogWriter {
        LogWriter {
            rng,
            events: Vec::new(),
            pid: 1000,
            hosts,
            rfc5424_offset: None,
        }
    }

    /// Writes syslog from now on as RFC 5424 in local time at `offset_ns` from UTC (a second
    /// log mix; called again when the zone's offset changes).
    pub(crate) fn set_zone(&mut self, offset_ns: i64) {
        self.rfc5424_offset = Some(offset_ns);
    }

    fn pid(&mut self) -> u32 {
        self.pid = 1000 + (self.pid + 7 + self.rng.below(50) as u32) % 60_000;
        self.pid
    }

    pub(crate) fn iso(ts: i64) -> String {
        let secs = ts.div_euclid(1_000_000_000);
        let ms = ts.rem_euclid(1_000_000_000) / 1_000_000;
        let (y, m, d) = civil(secs.div_euclid(86_400));
        let rem = secs.rem_euclid(86_400);
        format!(
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
            rem / 3600,
            (rem / 60) % 60,
            rem % 60
        )
    }

    /// RFC 3339 in local time at `offset_ns` from UTC, with the offset (`+09:00`).
    pub(crate) fn iso_at(ts: i64, offset_ns: i64) -> String {
        let utc = LogWriter::iso(ts + offset_ns);
        let minutes = offset_ns / 60_000_000_000;
        let sign = if minutes < 0 { '-' } else { '+' };
        let zone = format!("{sign}{:02}:{:02}", minutes.abs() / 60, minutes.abs() % 60);
        format!("{}{zone}", utc.trim_end_matches('Z'))
    }

    /// RFC 3164: `<PRI>Mmm dd hh:mm:ss host tag[pid]: message`, no year, no zone (UTC here).
    pub(crate) fn syslog(
        &mut self,
        ts: i64,
        pri: u8,
        host: &str,
        tag: &str,
        msg: &str,
        attack: Option<usize>,
    ) {
        const MON: [&str; 12] = [
            "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
        ];
        let pid = self.pid();
        if let Some(offset) = self.rfc5424_offset {
            let line = format!(
                "<{pri}>1 {} {host} {tag} {pid} - - {msg}",
                LogWriter::iso_at(ts, offset)
            );
            self.events.push((ts, line, attack));
            return;
        }
        let secs = ts.div_euclid(1_000_000_000);
        let (_, m, d) = civil(secs.div_euclid(86_400));
        let rem = secs.rem_euclid(86_400);
        let line = format!(
            "<{pri}>{} {d:>2} {:02}:{:02}:{:02} {host} {tag}[{pid}]: {msg}",
            MON[(m - 1) as usize],
            rem / 3600,
            (rem / 60) % 60,
            rem % 60
        );
        self.events.push((ts, line, attack));
    }

    /// A web server's access log entry as nested ECS.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn web(
        &mut self,
        ts: i64,
        host: &str,
        client: &str,
        user: Option<&str>,
        req: &str,
        status: u16,
        agent: &str,
        attack: Option<usize>,
    ) {
        let who = user.unwrap_or("-");
        let user = user.map_or(String::new(), |u| format!(",\"user\":{{\"name\":\"{u}\"}}"));
        let bytes = 200 + self.rng.below(9000);
        let line = format!(
            "{{\"@timestamp\":\"{}\",\"event\":{{\"dataset\":\"nginx.access\"}},\"host\":{{\"name\":\"{host}\"}},\"source\":{{\"ip\":\"{client}\"}}{user},\"http\":{{\"response\":{{\"status_code\":{status}}}}},\"user_agent\":{{\"original\":\"{agent}\"}},\"message\":\"{client} - {} \\\"{req} HTTP/1.1\\\" {status} {} \\\"-\\\" \\\"{agent}\\\"\"}}",
            LogWriter::iso(ts),
            who,
            bytes
        );
        self.events.push((ts, line, attack));
    }

    /// A VPN session as flat dotted JSON.
    pub(crate) fn vpn(&mut self, ts: i64, user: &str, from: &str, attack: Option<usize>) {
        let line = format!(
            "{{\"@timestamp\":\"{}\",\"event.dataset\":\"vpn.session\",\"host.name\":\"vpn-01\",\"user.name\":\"{user}\",\"source.ip\":\"{from}\",\"message\":\"session established for {user} from {from}\"}}",
            LogWriter::iso(ts)
        );
        self.events.push((ts, line, attack));
    }

    pub(crate) fn ssh_login(
        &mut self,
        ts: i64,
        user: &str,
        from: &str,
        host: usize,
        key: bool,
        attack: Option<usize>,
    ) {
        let h = self.hosts[host].clone();
        let port = 40_000 + self.rng.below(20_000);
        let how = if key { "publickey" } else { "password" };
        self.syslog(
            ts,
            38,
            &h,
            "sshd",
            &format!("Accepted {how} for {user} from {from} port {port} ssh2"),
            attack,
        );
        let uid = 1000 + self.rng.below(1000);
        self.syslog(
            ts + 40_000_000,
            86,
            &h,
            "sshd",
            &format!(
                "pam_unix(sshd:session): session opened for user {user}(uid={uid}) by (uid=0)"
            ),
            attack,
        );
    }

    pub(crate) fn ssh_failed(
        &mut self,
        ts: i64,
        user: &str,
        from: &str,
        host: usize,
        attack: Option<usize>,
    ) {
        let h = self.hosts[host].clone();
        let port = 30_000 + self.rng.below(30_000);
        self.syslog(
            ts,
            38,
            &h,
            "sshd",
            &format!("Failed password for {user} from {from} port {port} ssh2"),
            attack,
        );
    }

    /// A login attempt for an account the host does not have: sshd says so, and when the client
    /// goes on to offer a password (most scanners do) it logs the failure too, as OpenSSH does:
    /// `Failed password for invalid user <name> from <addr> ...`.
    pub(crate) fn ssh_invalid(
        &mut self,
        ts: i64,
        user: &str,
        from: &str,
        host: usize,
        attack: Option<usize>,
    ) {
        let h = self.hosts[host].clone();
        let port = 30_000 + self.rng.below(30_000);
        self.syslog(
            ts,
            38,
            &h,
            "sshd",
            &format!("Invalid user {user} from {from} port {port}"),
            attack,
        );
        if self.rng.below(5) != 0 {
            let later = ts + (1 + self.rng.below(3) as i64) * 1_000_000_000;
            self.syslog(
                later,
                38,
                &h,
                "sshd",
                &format!("Failed password for invalid user {user} from {from} port {port} ssh2"),
                attack,
            );
        }
    }

    pub(crate) fn sudo(
        &mut self,
        ts: i64,
        user: &str,
        host: usize,
        cmd: &str,
        attack: Option<usize>,
    ) {
        let h = self.hosts[host].clone();
        let tty = self.rng.below(6);
        self.syslog(
            ts,
            86,
            &h,
            "sudo",
            &format!("{user} : TTY=pts/{tty} ; PWD=/home/{user} ; USER=root ; COMMAND={cmd}"),
            attack,
        );
    }

    /// One internet scanner's visit to `host` from `ip`: `tries` attempts `step_ns` apart, a
    /// third of them `root`'s password, the rest the names of `names` in turn from `first`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn scanner_visit(
        &mut self,
        t: i64,
        step_ns: i64,
        ip: &str,
        host: usize,
        names: &[&str],
        first: usize,
        tries: u64,
    ) {
        for k in 0..tries as i64 {
            let at = t + k * step_ns;
            if self.rng.below(3) == 0 {
                self.ssh_failed(at, "root", ip, host, None);
            } else {
                let u = names[(first + k as usize) % names.len()];
                self.ssh_invalid(at, u, ip, host, None);
            }
        }
    }

    pub(crate) fn internet_ip(&mut self) -> String {
        // Documentation and public-looking ranges, never the organisation's own.
        let a = [45, 61, 91, 103, 109, 146, 159, 185, 193, 212][self.rng.below(10) as usize];
        format!(
            "{a}.{}.{}.{}",
            self.rng.below(256),
            self.rng.below(256),
            1 + self.rng.below(254)
        )
    }
}
