//! Organisations built unlike the realistic scenario, to report detection on (issue 54, item 6).
//!
//! The detectors are tuned on `realistic` (an office of 150 in central Europe); a detector tuned
//! on one generator learns that generator. These organisations differ in structure, not in seed:
//!
//! - **`remote`**: a remote-first software company of 60 on US Eastern time (daylight saving
//!   ends on 1 November, a week before the realistic one's change would have), everyone working
//!   from home over the VPN every day, `first.last` accounts, syslog as RFC 5424 in local time
//!   (a second log mix), one internet-facing jump host with a light scanner background, a CI
//!   account deploying every quarter hour in working hours, a weekly Sunday backup and a
//!   month-end billing run, travellers in Europe (their mornings are the office's nights),
//!   on-call admins paged at night.
//! - **`shifts`**: a round-the-clock operation of 400 in Tokyo (UTC+9, no daylight saving), three
//!   eight-hour shifts (night work is normal), employee-number accounts, everyone on site,
//!   RFC 3164 in UTC, two internet-facing jump hosts under a heavy scanner background with three
//!   persistent brute-forcers, 24 application servers that all reach 6 databases every half
//!   hour (servers that many clients reach), a nightly sync, an hourly report and a Saturday
//!   archive.
//!
//! Each has the attacks of `realistic` built on its own people and hosts, with variety in their
//! numbers, and the two shapes an untuned organisation missed: a day worker active far outside
//! their hours from their usual address, and a patient brute force under the scanners.

use crate::logwriter::LogWriter;
use crate::scenario::{Attack, Scenario, attack_weekday, finish};
use watchpost_detect::SplitMix64;

const SEC: i64 = 1_000_000_000;
const MIN: i64 = 60 * SEC;
const HOUR: i64 = 60 * MIN;
const DAY: i64 = 24 * HOUR;
/// Monday 2026-10-05 00:00 UTC, as the realistic scenario.
const START_NS: i64 = 1_791_158_400_000_000_000;

/// How an organisation is built.
#[derive(Clone, Debug)]
pub struct Profile {
    /// Its name (`--org`).
    pub name: &'static str,
    /// People, each with an account.
    pub people: usize,
    /// UTC offset in hours before `dst_change_day` and from it on (equal without DST).
    pub utc_offset: (i64, i64),
    /// Day (from the start) the offset changes.
    pub dst_change_day: i64,
    /// Local start hours of the working shifts; people are assigned in turn.
    pub shifts: &'static [i64],
    /// Works every day from home over the VPN (true), or on site.
    pub remote: bool,
    /// Works weekends too (a round-the-clock operation).
    pub weekends: bool,
    /// Application servers and databases.
    pub apps: usize,
    /// See `apps`.
    pub dbs: usize,
    /// Internet-facing SSH jump hosts.
    pub exposed: usize,
    /// Scanner addresses per hour on each jump host (at least, at most).
    pub scanners_per_hour: (u64, u64),
    /// Addresses that come back every few hours with a burst of guesses, all weeks.
    pub brute_forcers: usize,
    /// Syslog as RFC 5424 in local time (true) or RFC 3164 in UTC.
    pub rfc5424: bool,
    /// Account names `first.last` (true) or employee numbers (`e10234`).
    pub named_accounts: bool,
}

/// The remote-first company (see the module's comment).
pub fn remote() -> Profile {
    Profile {
        name: "remote",
        people: 60,
        utc_offset: (-4, -5),
        // Sunday 1 November 2026.
        dst_change_day: 27,
        shifts: &[9],
        remote: true,
        weekends: false,
        apps: 6,
        dbs: 3,
        exposed: 1,
        scanners_per_hour: (4, 12),
        brute_forcers: 1,
        rfc5424: true,
        named_accounts: true,
    }
}

/// The round-the-clock operation (see the module's comment).
pub fn shifts() -> Profile {
    Profile {
        name: "shifts",
        people: 400,
        utc_offset: (9, 9),
        dst_change_day: i64::MAX,
        shifts: &[6, 14, 22],
        remote: false,
        weekends: true,
        apps: 24,
        dbs: 6,
        exposed: 2,
        scanners_per_hour: (40, 90),
        brute_forcers: 3,
        rfc5424: false,
        named_accounts: false,
    }
}

/// The profile called `name`.
pub fn by_name(name: &str) -> Option<Profile> {
    match name {
        "remote" => Some(remote()),
        "shifts" => Some(shifts()),
        _ => None,
    }
}

const FIRST: [&str; 24] = [
    "ali", "bea", "cem", "dora", "eli", "fay", "gus", "hana", "ivo", "jin", "kim", "lea", "mio",
    "ned", "oda", "pia", "raj", "sol", "tom", "uma", "vic", "wen", "yan", "zoe",
];
const LAST: [&str; 20] = [
    "abe",
    "bauer",
    "chen",
    "dubois",
    "eriksen",
    "fujii",
    "gomez",
    "horvat",
    "ikeda",
    "jovanovic",
    "kowalski",
    "larsen",
    "moreau",
    "nakamura",
    "okafor",
    "petrov",
    "quist",
    "rossi",
    "sato",
    "tanaka",
];
const GUESSES: [&str; 12] = [
    "admin", "test", "oracle", "ubuntu", "pi", "guest", "git", "user", "ftp", "nagios", "jenkins",
    "hadoop",
];
const PORTAL_PATHS: [&str; 5] = [
    "/api/tickets",
    "/api/projects",
    "/api/docs",
    "/api/search",
    "/app/dashboard",
];
const AGENT: &str = "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_1) AppleWebKit/605.1.15 Version/17.1 Safari/605.1.15";

/// Where the organisation's hosts sit in the writer's host table.
struct Layout {
    exposed: usize,
    apps: usize,
    dbs: usize,
}

impl Layout {
    fn jump(&self, k: usize) -> usize {
        k % self.exposed
    }
    fn app(&self, k: usize) -> usize {
        self.exposed + k % self.apps
    }
    fn db(&self, k: usize) -> usize {
        self.exposed + self.apps + k % self.dbs
    }
    fn ci(&self) -> usize {
        self.exposed + self.apps + self.dbs
    }
    fn backup(&self) -> usize {
        self.ci() + 1
    }
    fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = (0..self.exposed)
            .map(|k| format!("jump-{:02}", k + 1))
            .collect();
        v.extend((0..self.apps).map(|k| format!("app-{:02}", k + 1)));
        v.extend((0..self.dbs).map(|k| format!("db-{:02}", k + 1)));
        v.extend(["ci-01".to_string(), "backup-01".to_string()]);
        v
    }
}

fn host_ip(i: usize) -> String {
    format!("172.16.{}.{}", i / 200, 10 + i % 200)
}

struct Person {
    name: String,
    /// Where they work from: a home address (remote) or a desk on site.
    usual: String,
    shift: i64,
    servers: Vec<usize>,
    admin: bool,
}

/// The UTC time of local hour `h` (may run past 24) of day `day`.
fn local(p: &Profile, day: i64, h: i64) -> i64 {
    let offset = if day >= p.dst_change_day {
        p.utc_offset.1
    } else {
        p.utc_offset.0
    };
    START_NS + day * DAY + (h - offset) * HOUR
}

/// Generates organisation `p`: `weeks` (at least 4) of behaviour, the attacks in the last two.
pub fn generate(p: &Profile, seed: u64, weeks: i64) -> Scenario {
    let weeks = weeks.max(4);
    let layout = Layout {
        exposed: p.exposed,
        apps: p.apps,
        dbs: p.dbs,
    };
    let host_names = layout.names();
    let mut g = LogWriter::new(SplitMix64::new(seed ^ 0x6f72_6773), host_names.clone());
    let people: Vec<Person> = (0..p.people)
        .map(|i| {
            let name = if p.named_accounts {
                format!("{}.{}", FIRST[i % 24], LAST[(i / 24 + i % 24) % 20])
            } else {
                format!("e{}", 10_200 + i * 7)
            };
            let usual = if p.remote {
                format!(
                    "{}.{}.{}.{}",
                    [24, 67, 71, 98, 108][i % 5],
                    20 + i % 200,
                    (i * 11) % 250,
                    3 + i % 250
                )
            } else {
                format!("10.50.{}.{}", i / 200, 10 + i % 200)
            };
            Person {
                name,
                usual,
                shift: p.shifts[i % p.shifts.len()],
                servers: (0..1 + i % 3).map(|k| layout.app(i * 5 + k * 2)).collect(),
                admin: i % 8 == 0,
            }
        })
        .collect();
    let admins: Vec<usize> = (0..p.people).filter(|&i| people[i].admin).collect();
    // Who leaves in the first week (the dormant account), travels, or is the night-session
    // victim: chosen among day-shift non-admins, spread over the people.
    let pick = |k: usize| {
        (0..p.people)
            .map(|i| (i + k * 37) % p.people)
            .find(|&i| !people[i].admin && people[i].shift == p.shifts[0])
            .unwrap_or(k % p.people)
    };
    let (leaver, night_victim, hopper, sprayed_from) = (pick(1), pick(2), pick(3), pick(4));
    let travellers = [(pick(5), 2i64), (pick(6), 3)];
    let days = weeks * 7;
    let bf_ips: Vec<String> = (0..p.brute_forcers)
        .map(|k| {
            format!(
                "{}.{}.{}.{}",
                [193, 61, 218][k % 3],
                32 + k * 40,
                162 + k,
                17 + k
            )
        })
        .collect();

    for day in 0..days {
        let weekday = day % 7 < 5;
        let week = day / 7;
        let d0 = START_NS + day * DAY;
        if p.rfc5424 {
            // Hosts stamp their local time with the day's offset.
            let hours = if day >= p.dst_change_day {
                p.utc_offset.1
            } else {
                p.utc_offset.0
            };
            g.set_zone(hours * HOUR);
        }
        // Every host's hourly cron.
        for name in &host_names {
            for hour in 0..24 {
                let t = d0 + hour * HOUR + g.rng.below(90) as i64 * SEC;
                g.syslog(
                    t,
                    78,
                    name,
                    "CRON",
                    "(root) CMD (run-parts /etc/cron.hourly)",
                    None,
                );
            }
        }
        service_accounts(p, &layout, &mut g, day, weekday);
        internet(p, &layout, &mut g, d0, &bf_ips);
        // On-call: the week's admin is paged at night about twice a week.
        let oncall = admins[week as usize % admins.len()];
        if g.rng.below(7) < 2 {
            let who = &people[oncall];
            let t = local(p, day, 1 + g.rng.below(4) as i64) + g.rng.below(3600) as i64 * SEC;
            let (name, from, server) = (
                who.name.clone(),
                who.usual.clone(),
                layout.app(day as usize),
            );
            if p.remote {
                g.vpn(t, &name, &from, None);
            }
            g.ssh_login(t + MIN, &name, &from, server, true, None);
            g.sudo(
                t + 3 * MIN,
                &name,
                server,
                "/usr/bin/systemctl restart api",
                None,
            );
        }
        if !weekday && !p.weekends {
            continue;
        }
        for (i, person) in people.iter().enumerate() {
            if i == leaver && day >= 6 {
                continue;
            }
            // Shift workers work five days in seven, staggered.
            if p.weekends && (day + i as i64) % 7 >= 5 {
                continue;
            }
            let abroad = travellers.iter().any(|&(who, w)| who == i && w == week);
            let (begin, from) = if abroad {
                // Europe, six hours ahead: their 09:00 is the office's 03:00.
                (
                    local(p, day, person.shift - 6),
                    format!("81.{}.{}.{}", 20 + i % 100, 40 + i % 50, 7 + i % 200),
                )
            } else {
                let early = if g.rng.below(20) == 0 { -HOUR } else { 0 };
                (local(p, day, person.shift) + early, person.usual.clone())
            };
            let span = 8 * HOUR + if g.rng.below(10) == 0 { 2 * HOUR } else { 0 };
            let name = person.name.clone();
            if p.remote || abroad {
                g.vpn(begin - 4 * MIN, &name, &from, None);
            }
            for _ in 0..(1 + g.rng.below(4)) {
                let t = begin + (g.rng.next_f64() * span as f64) as i64;
                let server = person.servers[g.rng.below(person.servers.len() as u64) as usize];
                if g.rng.below(50) == 0 {
                    g.ssh_failed(t - 5 * SEC, &name, &from, server, None);
                }
                g.ssh_login(t, &name, &from, server, person.admin, None);
                if person.admin && g.rng.below(2) == 0 {
                    let cmd = [
                        "/usr/bin/systemctl status api",
                        "/bin/journalctl -u api",
                        "/usr/bin/docker ps",
                    ][g.rng.below(3) as usize];
                    let at = t + (1 + g.rng.below(600)) as i64 * SEC;
                    g.sudo(at, &name, server, cmd, None);
                }
            }
            for _ in 0..(6 + g.rng.below(12)) {
                let t = begin + (g.rng.next_f64() * span as f64) as i64;
                let path = PORTAL_PATHS[g.rng.below(5) as usize];
                let id = g.rng.below(50_000);
                g.web(
                    t,
                    "portal-01",
                    &from,
                    Some(&name),
                    &format!("GET {path}/{id}"),
                    200,
                    AGENT,
                    None,
                );
            }
        }
    }

    // The attacks, in the last two weeks, on working days.
    let mut attacks: Vec<Attack> = Vec::new();
    let mut add = |name, description, entity: &str, actor: Option<&str>| {
        attacks.push(Attack::new(name, description, entity, actor));
        attacks.len() - 1
    };
    let day_of = |d: i64| attack_weekday(weeks, d);

    // 1. Time of day alone: a day worker active in the small hours from their usual address,
    // browsing and exporting for half an hour.
    let v = &people[night_victim];
    let a = add(
        "night_session",
        "a day worker's account is active at 04:00 local from its usual address for half an hour",
        &v.name,
        Some(&v.usual),
    );
    let day = day_of(1);
    let t = local(p, day, v.shift - 5) + 20 * MIN;
    let (name, from) = (v.name.clone(), v.usual.clone());
    if p.remote {
        g.vpn(t, &name, &from, Some(a));
    }
    g.ssh_login(t + MIN, &name, &from, v.servers[0], false, Some(a));
    for k in 0..30 {
        g.web(
            t + 2 * MIN + k * MIN,
            "portal-01",
            &from,
            Some(&name),
            &format!("GET /api/export/{k}"),
            200,
            AGENT,
            Some(a),
        );
    }
    // 2. Brute force on a jump host, then success.
    let v = &people[pick(7)];
    let ip = "185.220.101.77";
    let a = add(
        "brute_force_success",
        "an address fails 120 passwords for an account on a jump host, then logs in",
        &v.name,
        Some(ip),
    );
    let t = local(p, day_of(2), 2);
    let name = v.name.clone();
    for k in 0..120 {
        g.ssh_failed(t + k * 2 * SEC, &name, ip, layout.jump(0), Some(a));
    }
    g.ssh_login(t + 242 * SEC, &name, ip, layout.jump(0), false, Some(a));
    // 3. Password spraying: one password on real accounts.
    let ip = "45.148.10.240";
    let a = add(
        "password_spraying",
        "an address tries one password on 30 real accounts",
        ip,
        Some(ip),
    );
    let t = local(p, day_of(3), 11);
    for k in 0..30 {
        let name = people[(sprayed_from + k * 7) % p.people].name.clone();
        g.ssh_failed(t + k as i64 * 25 * SEC, &name, ip, layout.jump(1), Some(a));
    }
    // 4. A patient brute force under the scanners: remote every ~7 minutes for five hours,
    // shifts every ~20 minutes for fourteen.
    let ip = "91.92.251.103";
    let (every, tries) = if p.remote { (7, 43) } else { (20, 42) };
    let a = add(
        "slow_brute_force",
        "an address guesses root on a jump host every few minutes for hours",
        ip,
        Some(ip),
    );
    let t = local(p, day_of(4), 18);
    for k in 0..tries {
        let jitter = g.rng.below(120) as i64 * SEC;
        g.ssh_failed(
            t + k * every * MIN + jitter,
            "root",
            ip,
            layout.jump(0),
            Some(a),
        );
    }
    // 5. A service account used interactively, with a password, from a person's address.
    let svc = if p.remote { "svc_backup" } else { "svc_sync" };
    let from = people[pick(8)].usual.clone();
    let a = add(
        "service_account_misuse",
        "a service account logs in with a password from a person's address at midday",
        svc,
        Some(&from),
    );
    let t = local(p, day_of(7), 12);
    g.ssh_login(t, svc, &from, layout.db(1), false, Some(a));
    g.sudo(t + MIN, svc, layout.db(1), "/usr/bin/pg_dumpall", Some(a));
    // 6. A login from a network the account never used, in working hours.
    let v = &people[pick(9)];
    let ip = "103.75.190.88";
    let a = add(
        "new_network_login",
        "an account logs in from a network it never used, in working hours",
        &v.name,
        Some(ip),
    );
    let t = local(p, day_of(8), v.shift + 2);
    let name = v.name.clone();
    if p.remote {
        g.vpn(t, &name, ip, Some(a));
        g.ssh_login(t + MIN, &name, ip, v.servers[0], false, Some(a));
    } else {
        g.ssh_login(t, &name, ip, layout.jump(1), false, Some(a));
    }
    // 7. The first SSH hop from an account's server to a database it never used.
    let v = &people[hopper];
    let a = add(
        "server_hop",
        "an account hops from its server to a database it never used",
        &v.name,
        Some(&host_ip(v.servers[0])),
    );
    let t = local(p, day_of(8), v.shift + 4);
    let name = v.name.clone();
    g.ssh_login(
        t,
        &name,
        &host_ip(v.servers[0]),
        layout.db(2),
        false,
        Some(a),
    );
    // 8. The leaver's account, silent since its first week, logs in again.
    let v = &people[leaver];
    let ip = "146.70.188.9";
    let a = add(
        "dormant_account",
        "an account silent since the first week logs in from a new address",
        &v.name,
        Some(ip),
    );
    let t = local(p, day_of(9), 10);
    let name = v.name.clone();
    if p.remote {
        g.vpn(t, &name, ip, Some(a));
    }
    g.ssh_login(t + MIN, &name, ip, v.servers[0], false, Some(a));
    // 9. Privilege escalation by a non-admin.
    let v = &people[pick(10)];
    let a = add(
        "privilege_escalation",
        "a non-admin account is refused sudo, then gets root and adds a UID 0 user",
        &v.name,
        None,
    );
    let t = local(p, day_of(10), v.shift + 3);
    let (name, server) = (v.name.clone(), v.servers[0]);
    let host = host_names[server].clone();
    g.syslog(t, 86, &host, "sudo", &format!("{name} : user NOT in sudoers ; TTY=pts/2 ; PWD=/home/{name} ; USER=root ; COMMAND=/bin/sh"), Some(a));
    g.syslog(
        t + 3 * MIN,
        86,
        &host,
        "su",
        &format!("(to root) {name} on pts/2"),
        Some(a),
    );
    g.syslog(
        t + 4 * MIN,
        86,
        &host,
        "useradd",
        "new user: name=svc-upd, UID=0, GID=0, home=/root, shell=/bin/sh",
        Some(a),
    );
    // 10. Lateral movement: an application server reaches a host it never reached.
    let from = host_ip(layout.app(3));
    let a = add(
        "lateral_new_path",
        "an application server connects to the backup host, which it never reached",
        &from,
        Some("backup-01"),
    );
    let t = local(p, day_of(11), 15);
    let svc = if p.remote { "svc_ci" } else { "svc_app" };
    g.ssh_login(t, svc, &from, layout.backup(), true, Some(a));

    finish(g.events, attacks, START_NS + 7 * DAY)
}

/// The service accounts' schedules of a day.
fn service_accounts(p: &Profile, layout: &Layout, g: &mut LogWriter, day: i64, weekday: bool) {
    let backup_ip = host_ip(layout.backup());
    let ci_ip = host_ip(layout.ci());
    if p.remote {
        // CI deploys every quarter hour in working hours, weekdays.
        if weekday {
            for q in 0..(13 * 4) {
                let t = local(p, day, 8) + q * 15 * MIN + g.rng.below(60) as i64 * SEC;
                let app = layout.app(q as usize);
                g.ssh_login(t, "svc_ci", &ci_ip, app, true, None);
                g.sudo(t + 20 * SEC, "svc_ci", app, "/opt/deploy/release.sh", None);
            }
        }
        // Weekly backup, Sunday 02:00: every database, a burst of dumps.
        if day % 7 == 6 {
            for d in 0..layout.dbs {
                let db = layout.db(d);
                let t = local(p, day, 2) + d as i64 * 4 * MIN;
                g.ssh_login(t, "svc_backup", &backup_ip, db, true, None);
                for k in 0..25 {
                    g.sudo(
                        t + k * 3 * SEC,
                        "svc_backup",
                        db,
                        &format!("/usr/bin/pg_dump --schema=s{k}"),
                        None,
                    );
                }
            }
        }
        // Billing: a small nightly reconcile, and the month-end run (the last day of the
        // month, 23:30) that reads every account.
        let t = local(p, day, 0) + 30 * MIN;
        g.ssh_login(t, "svc_billing", &ci_ip, layout.db(0), true, None);
        let month_end = day == 26;
        let queries = if month_end { 160 } else { 4 };
        for k in 0..queries {
            g.sudo(
                t + MIN + k * 2 * SEC,
                "svc_billing",
                layout.db(0),
                &format!("/usr/bin/psql -c 'select invoice_{k}'"),
                None,
            );
        }
    } else {
        // Every application server reaches every database's pool every half hour.
        for slot in 0..48 {
            for a in 0..layout.apps {
                let db = layout.db(a + slot);
                let t = START_NS
                    + day * DAY
                    + slot as i64 * 30 * MIN
                    + (a as i64 * 7 + g.rng.below(30) as i64) * SEC;
                g.ssh_login(t, "svc_app", &host_ip(layout.app(a)), db, true, None);
            }
        }
        // Nightly sync at 03:00 local onto every application server.
        for a in 0..layout.apps {
            let t = local(p, day, 3) + a as i64 * 90 * SEC;
            g.ssh_login(t, "svc_sync", &backup_ip, layout.app(a), true, None);
        }
        // Hourly report at half past, from the CI host onto one database in turn.
        for hour in 0..24 {
            let t = START_NS + day * DAY + hour * HOUR + 30 * MIN;
            g.ssh_login(
                t,
                "svc_report",
                &ci_ip,
                layout.db(hour as usize),
                true,
                None,
            );
        }
        // Saturday 23:00: the archive reads every database.
        if day % 7 == 5 {
            for d in 0..layout.dbs {
                let db = layout.db(d);
                let t = local(p, day, 23) + d as i64 * 5 * MIN;
                g.ssh_login(t, "svc_archive", &backup_ip, db, true, None);
                for k in 0..40 {
                    g.sudo(
                        t + k * 2 * SEC,
                        "svc_archive",
                        db,
                        &format!("/usr/bin/pg_dump --table=a{k}"),
                        None,
                    );
                }
            }
        }
    }
}

/// The internet's background on the jump hosts for a day: scanners that try a few names (one in
/// eighty a dictionary) and leave, and the persistent brute-forcers' bursts.
fn internet(p: &Profile, layout: &Layout, g: &mut LogWriter, d0: i64, brute_forcers: &[String]) {
    let (low, high) = p.scanners_per_hour;
    for j in 0..p.exposed {
        let host = layout.jump(j);
        for hour in 0..24 {
            for _ in 0..(low + g.rng.below(high - low + 1)) {
                let ip = g.internet_ip();
                let t = d0 + hour * HOUR + g.rng.below(3_600_000) as i64 * 1_000_000;
                let tries = if g.rng.below(80) == 0 {
                    5 + g.rng.below(10)
                } else {
                    1 + g.rng.below(3)
                };
                let first = g.rng.below(12) as usize;
                g.scanner_visit(t, 2 * SEC, &ip, host, &GUESSES, first, tries);
            }
        }
    }
    for (b, ip) in brute_forcers.iter().enumerate() {
        let every = 8 - 2 * (b as i64 % 3);
        let mut at = (b as i64 * 2) % every;
        while at < 24 {
            let t = d0 + at * HOUR + g.rng.below(3000) as i64 * SEC;
            for k in 0..25 {
                g.ssh_failed(t + k * 3 * SEC, "root", ip, layout.jump(b), None);
            }
            at += every;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_organisation_holds_its_attacks_and_differs_in_structure() {
        for p in [remote(), shifts()] {
            let s = generate(&p, 1, 5);
            assert_eq!(s.attacks.len(), 10, "{}", p.name);
            for a in &s.attacks {
                assert!(!a.lines.is_empty(), "{} {}", p.name, a.name);
            }
            assert_eq!(generate(&p, 1, 5).lines, s.lines, "seeded");
        }
        let r = generate(&remote(), 1, 4);
        assert!(
            r.lines.iter().any(|l| l.starts_with("<38>1 2026-10-")),
            "RFC 5424"
        );
        // Summer time, then standard time after 1 November.
        assert!(r.lines.iter().any(|l| l.contains("-04:00 ")));
        assert!(r.lines.iter().any(|l| l.contains("-05:00 ")));
        let s = generate(&shifts(), 1, 4);
        assert!(
            s.lines.iter().any(|l| l.starts_with("<38>Oct  5 ")),
            "RFC 3164"
        );
    }

    #[test]
    fn local_hours_follow_each_zone() {
        let r = remote();
        // 09:00 in New York is 13:00 UTC in summer time, 14:00 after 1 November.
        assert_eq!((local(&r, 0, 9) - START_NS) / HOUR, 13);
        assert_eq!((local(&r, 28, 9) - START_NS - 28 * DAY) / HOUR, 14);
        let s = shifts();
        // 06:00 in Tokyo is 21:00 UTC the day before.
        assert_eq!(local(&s, 1, 6) - START_NS - DAY, -3 * HOUR);
    }
}
