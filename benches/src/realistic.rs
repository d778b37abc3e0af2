//! The realistic scenario: five weeks of a 150-person organisation's logs as a sensor really
//! receives them, with eleven labelled attacks and a benign look-alike of each in the last two.
//!
//! What makes it honest where `scenario` is clean:
//! - **Mixed formats**: RFC 3164 syslog without a year or zone (sshd, sudo, su, useradd, cron),
//!   nested-ECS JSON (`{"host":{"name":..}}`, the web servers) and flat dotted JSON (the VPN).
//! - **Internet background** on the edge hosts, all day: scanners probing `bastion-01` for
//!   accounts (`Invalid user`, root passwords), a few persistent brute-forcers, web scanners with
//!   their user agents and probe paths on `web-01`/`web-02`.
//! - **People in a time zone with DST**: local office hours (UTC+2, UTC+1 from 25 October), the odd
//!   early or late day, working from home over the VPN one day a week, DHCP leases that change
//!   within the office network, travellers abroad for a week (new network, shifted hours), a
//!   weekly on-call rotation with night logins, a new employee in week four.
//! - **Batch and service accounts**: nightly backups (`svc_backup` bursts onto every database),
//!   hourly ETL, deployments every half hour, cron everywhere, an internal vulnerability scanner's
//!   weekly sweep.
//! - **Benign look-alikes of every attack**: an admin's `sudo -i`, a monthly report burst, a
//!   traveller's login at 03:00 UTC from abroad, a contractor back after a holiday of a week, an
//!   on-call engineer hopping to a new server, a helpdesk password reset, a new account.

use crate::logwriter::LogWriter;
use crate::scenario::{Attack, Scenario, finish};
use watchpost_detect::SplitMix64;

const MIN: i64 = 60_000_000_000;
const HOUR: i64 = 60 * MIN;
const DAY: i64 = 24 * HOUR;
/// Monday 2026-10-05 00:00 UTC.
pub const START_NS: i64 = 1_791_158_400_000_000_000;
/// 2026-10-25 01:00 UTC: central European summer time ends.
const DST_END_NS: i64 = START_NS + 20 * DAY + HOUR;

/// People and hosts.
pub const PEOPLE: usize = 150;
const FIRST: [&str; 20] = [
    "anna", "ben", "carla", "dev", "elif", "femi", "greta", "hugo", "ines", "jonas", "kai", "lena",
    "marco", "nora", "omar", "paula", "quinn", "rosa", "sven", "tara",
];
const LAST: [&str; 12] = [
    "berg", "costa", "diaz", "evans", "fischer", "garcia", "hansen", "ito", "jensen", "klein",
    "lopez", "meyer",
];

/// The account name of person `index`, distinct for every person: the first name repeats every
/// 20, and within one first name the surname steps by one (8 of the 12 are needed for 150). An
/// earlier formula gave 70 pairs of people one shared account, which blurred both baselines.
fn person_name(index: usize) -> String {
    format!(
        "{}.{}",
        FIRST[index % 20],
        LAST[(index / 20 + index % 20) % 12]
    )
}

/// Hosts: bastion-01 and web-01/02 face the internet; app-01..10, srv-01..10, db-01..08,
/// backup-01, etl-01, mon-01, vpn-01.
fn host_name(i: usize) -> String {
    match i {
        0 => "bastion-01".into(),
        1 => "web-01".into(),
        2 => "web-02".into(),
        3..=12 => format!("app-{:02}", i - 2),
        13..=22 => format!("srv-{:02}", i - 12),
        23..=30 => format!("db-{:02}", i - 22),
        31 => "backup-01".into(),
        32 => "etl-01".into(),
        33 => "mon-01".into(),
        _ => "vpn-01".into(),
    }
}
const HOSTS: usize = 35;
const BASTION: usize = 0;
const BACKUP: usize = 31;
const ETL: usize = 32;
const MON: usize = 33;

fn host_ip(i: usize) -> String {
    format!("10.1.{}.{}", i / 200, 10 + i % 200)
}

struct Person {
    name: String,
    /// Office workstation address; `lease` moves it within its /24 now and then.
    desk: (u32, u32),
    home: String,
    /// Local start hour and length of the working day.
    start: i64,
    hours: i64,
    servers: Vec<usize>,
    admin: bool,
    /// Day of the week worked from home (0-4), or none.
    home_day: Option<i64>,
}

/// The UTC time of local hour `h` on day `d0` (midnight UTC of the day): UTC+2, UTC+1 after DST.
fn local(d0: i64, h: i64) -> i64 {
    let offset = if d0 + 12 * HOUR >= DST_END_NS {
        HOUR
    } else {
        2 * HOUR
    };
    d0 + h * HOUR - offset
}

const PATHS: [&str; 6] = [
    "/api/orders",
    "/api/customers",
    "/api/invoices",
    "/api/search",
    "/api/reports",
    "/app/home",
];
const AGENT: &str =
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/130.0 Safari/537.36";
const SCANNER_AGENTS: [&str; 4] = [
    "masscan/1.3 (https://github.com/robertdavidgraham/masscan)",
    "Mozilla/5.0 zgrab/0.x",
    "Nmap Scripting Engine",
    "python-requests/2.31",
];
const PROBES: [&str; 6] = [
    "GET /wp-login.php",
    "GET /.env",
    "GET /phpmyadmin/index.php",
    "GET /admin",
    "GET /robots.txt",
    "GET /owa/auth/logon.aspx",
];
const GUESSES: [&str; 16] = [
    "admin",
    "test",
    "oracle",
    "ubuntu",
    "pi",
    "guest",
    "ftpuser",
    "support",
    "git",
    "postgres1",
    "user",
    "deployer",
    "minecraft",
    "hadoop",
    "ubnt",
    "steam",
];

/// Generates the realistic scenario: `weeks` (at least 4) of behaviour, the attacks in the last two.
pub fn generate(seed: u64, weeks: i64) -> Scenario {
    let weeks = weeks.max(4);
    let mut g = LogWriter::new(
        SplitMix64::new(seed ^ 0x7265_616c),
        (0..HOSTS).map(host_name).collect(),
    );
    let people: Vec<Person> = (0..PEOPLE)
        .map(|i| {
            let n_servers = 1 + i % 3;
            Person {
                name: person_name(i),
                desk: (20 + (i / 100) as u32, (10 + i % 100) as u32),
                home: format!(
                    "{}.{}.{}.{}",
                    [84, 92, 178, 188][i % 4],
                    10 + i % 200,
                    (i * 7) % 250,
                    2 + i % 250
                ),
                start: 7 + (i % 4) as i64,
                hours: 8 + (i % 2) as i64,
                servers: (0..n_servers).map(|k| 13 + (i * 7 + k * 3) % 10).collect(),
                admin: i % 6 == 0,
                home_day: (i % 3 != 0).then_some((i % 5) as i64),
            }
        })
        .collect();
    let admins: Vec<usize> = (0..PEOPLE).filter(|i| people[*i].admin).collect();
    // Travellers: abroad (UTC+9) for five working days, each in another week of the last three.
    let travellers = [(11usize, 2i64), (47, 3), (83, 4), (119, 3)];
    let new_hire = 149usize;
    let contractor = "c.ext-wolf";
    let days = weeks * 7;
    let last2 = (weeks - 2) * 7;
    let mut leases: Vec<u32> = people.iter().map(|p| p.desk.1).collect();

    for day in 0..days {
        let d0 = START_NS + day * DAY;
        let weekday = day % 7 < 5;
        let week = day / 7;
        // Every host's own background: hourly cron.
        for h in 0..HOSTS {
            for hour in 0..24 {
                let t = d0 + hour * HOUR + g.rng.below(120) as i64 * 1_000_000_000;
                g.syslog(
                    t,
                    78,
                    &host_name(h),
                    "CRON",
                    "(root) CMD (run-parts /etc/cron.hourly)",
                    None,
                );
            }
        }
        // Nightly backups: svc_backup onto every database, a burst of sessions and copies.
        for db in 23..=30 {
            let t = d0 + HOUR + (db as i64 - 23) * 3 * MIN;
            g.ssh_login(t, "svc_backup", &host_ip(BACKUP), db, true, None);
            for k in 0..20 {
                g.syslog(t + k * 2_000_000_000, 86, &host_name(db), "sudo", &format!("svc_backup : TTY=unknown ; PWD=/var/backups ; USER=postgres ; COMMAND=/usr/bin/pg_dump --table=t{k}"), None);
            }
        }
        // Hourly ETL and half-hourly deployments.
        for hour in 0..24 {
            let t = d0 + hour * HOUR + 5 * MIN;
            g.ssh_login(
                t,
                "svc_etl",
                &host_ip(ETL),
                23 + (hour as usize % 8),
                true,
                None,
            );
            for slot in 0..2 {
                let app = 3 + ((hour * 2 + slot) as usize % 10);
                let db = 23 + (app * 3 + slot as usize) % 8;
                g.ssh_login(t + slot * 30 * MIN, "deploy", &host_ip(app), db, true, None);
            }
        }
        // The internal vulnerability scanner, Sunday night: every host, a few accounts each.
        if day % 7 == 6 {
            for h in 0..HOSTS {
                for (k, u) in ["admin", "test", "root"].iter().enumerate() {
                    let t = d0 + 2 * HOUR + (h as i64) * 20_000_000_000 + k as i64 * 1_000_000_000;
                    if *u == "root" {
                        g.ssh_failed(t, u, &host_ip(MON), h, None);
                    } else {
                        g.ssh_invalid(t, u, &host_ip(MON), h, None);
                    }
                }
            }
        }
        // The internet, all day: account probes on the bastion, web scanners on web-01/02.
        for hour in 0..24 {
            for _ in 0..(20 + g.rng.below(20)) {
                let ip = g.internet_ip();
                let t = d0 + hour * HOUR + g.rng.below(3_600_000) as i64 * 1_000_000;
                // Most try a few names; one in eighty (about nine a day) runs a dictionary of 5
                // to 16 account names once and leaves (never an account of the organisation's).
                let tries = if g.rng.below(80) == 0 {
                    5 + g.rng.below(12)
                } else {
                    1 + g.rng.below(4)
                };
                let first = g.rng.below(16) as usize;
                g.scanner_visit(t, 3_000_000_000, &ip, BASTION, &GUESSES, first, tries);
            }
            for _ in 0..(5 + g.rng.below(10)) {
                let ip = g.internet_ip();
                let t = d0 + hour * HOUR + g.rng.below(3_600_000) as i64 * 1_000_000;
                let host = host_name(1 + g.rng.below(2) as usize);
                let agent = SCANNER_AGENTS[g.rng.below(4) as usize];
                for k in 0..(1 + g.rng.below(3)) as i64 {
                    let probe = PROBES[g.rng.below(6) as usize];
                    g.web(
                        t + k * 500_000_000,
                        &host,
                        &ip,
                        None,
                        probe,
                        404,
                        agent,
                        None,
                    );
                }
            }
        }
        // Two persistent brute-forcers, a burst every few hours.
        for (b, ip) in ["193.32.162.17", "61.177.172.60"].iter().enumerate() {
            for burst in 0..4 {
                let t = d0
                    + (burst * 6 + b as i64 * 3) * HOUR
                    + g.rng.below(3600) as i64 * 1_000_000_000;
                for k in 0..30 {
                    g.ssh_failed(t + k * 3_000_000_000, "root", ip, BASTION, None);
                }
            }
        }
        // The on-call engineer of the week: a night call most weeks, over the VPN to a server.
        let oncall = admins[week as usize % admins.len()];
        if g.rng.below(7) < 2 {
            let p = &people[oncall];
            let t = local(d0, 2 + g.rng.below(3) as i64) + g.rng.below(3600) as i64 * 1_000_000_000;
            let (name, home) = (p.name.clone(), p.home.clone());
            let server = 13 + g.rng.below(18) as usize;
            g.vpn(t, &name, &home, None);
            g.ssh_login(t + MIN, &name, &home, server, true, None);
            g.sudo(
                t + 3 * MIN,
                &name,
                server,
                "/usr/bin/systemctl restart app",
                None,
            );
        }
        if !weekday {
            continue;
        }
        // The contractor works the first ten days and is gone after (the attack in the last week
        // is its account coming back).
        if day < 10 {
            for k in 0..25 {
                let t = local(d0, 9) + k * 15 * MIN + g.rng.below(600) as i64 * 1_000_000_000;
                let path = PATHS[g.rng.below(6) as usize];
                let id = g.rng.below(99_999);
                g.web(
                    t,
                    "web-02",
                    "10.30.0.77",
                    Some(contractor),
                    &format!("GET {path}/{id}"),
                    200,
                    AGENT,
                    None,
                );
            }
        }
        for (i, p) in people.iter().enumerate() {
            if i == new_hire && day < 22 {
                continue;
            }
            // Holidays: a week off, back on the Monday after (a benign look-alike of dormancy).
            if (i == 5 && week == 1) || (i == 6 && week == 2) || (i == 7 && week == weeks - 2) {
                continue;
            }
            if i == new_hire && day == 22 {
                // Helpdesk creates the account and sets its password (benign look-alikes).
                let t = local(d0, 8);
                g.syslog(
                    t,
                    86,
                    "srv-01",
                    "useradd",
                    &format!(
                        "new user: name={}, UID=1{:03}, GID=100, home=/home/{0}, shell=/bin/bash",
                        p.name, i
                    ),
                    None,
                );
                g.syslog(
                    t + MIN,
                    86,
                    "srv-01",
                    "chpasswd",
                    "pam_unix(chpasswd:chauthtok): password changed for user",
                    None,
                );
            }
            let travelling = travellers.iter().any(|(who, w)| *who == i && *w == week);
            let at_home = p.home_day == Some(day % 7);
            // Abroad: UTC+9, so a local 09:00 is midnight UTC; a hotel network.
            let (day_start, from) = if travelling {
                (
                    d0 + (p.start - 9) * HOUR,
                    format!("202.{}.{}.{}", 10 + i % 200, 30 + (i % 7), 5 + i % 200),
                )
            } else if at_home {
                (local(d0, p.start), p.home.clone())
            } else {
                // A new DHCP lease now and then, within the office /24.
                if g.rng.below(40) == 0 {
                    leases[i] = 10 + g.rng.below(240) as u32;
                }
                (
                    local(d0, p.start),
                    format!("10.{}.{}.{}", p.desk.0, i % 4, leases[i]),
                )
            };
            // One day in twenty starts an hour early; one in ten runs two hours late.
            let shift = match g.rng.below(20) {
                0 => -HOUR,
                _ => 0,
            };
            let span = p.hours * HOUR + if g.rng.below(10) == 0 { 2 * HOUR } else { 0 };
            let begin = day_start + shift;
            if travelling || at_home {
                let name = p.name.clone();
                g.vpn(begin - 5 * MIN, &name, &from, None);
            }
            for _ in 0..(2 + g.rng.below(4)) {
                let t = begin + (g.rng.next_f64() * span as f64) as i64;
                let server = p.servers[g.rng.below(p.servers.len() as u64) as usize];
                if g.rng.below(40) == 0 {
                    g.ssh_failed(t - 6_000_000_000, &p.name, &from, server, None);
                }
                g.ssh_login(t, &p.name, &from, server, p.admin, None);
                if p.admin {
                    for _ in 0..g.rng.below(3) {
                        let cmd = [
                            "/usr/bin/systemctl status app",
                            "/usr/bin/journalctl -u app",
                            "/usr/bin/apt-get update",
                            "/bin/df -h",
                        ][g.rng.below(4) as usize];
                        let t2 = t + (1 + g.rng.below(900)) as i64 * 1_000_000_000;
                        g.sudo(t2, &p.name, server, cmd, None);
                    }
                    // Now and then an interactive root shell (a low rule: a signal).
                    if g.rng.below(25) == 0 {
                        g.sudo(t + 20 * MIN, &p.name, server, "/bin/bash", None);
                    }
                }
            }
            for _ in 0..(8 + g.rng.below(15)) {
                let t = begin + (g.rng.next_f64() * span as f64) as i64;
                let path = PATHS[g.rng.below(6) as usize];
                let web = if g.rng.below(2) == 0 {
                    "web-01"
                } else {
                    "web-02"
                };
                let id = g.rng.below(99_999);
                g.web(
                    t,
                    web,
                    &from,
                    Some(&p.name),
                    &format!("GET {path}/{id}"),
                    200,
                    AGENT,
                    None,
                );
            }
        }
        // Month end (the last working days of October): finance's report burst, a benign rate
        // spike of the kind a scraper makes.
        if day == 25 || day == 26 {
            let p = &people[40];
            let name = p.name.clone();
            let from = format!("10.{}.{}.{}", p.desk.0, 40 % 4, leases[40]);
            let t = local(d0, 16);
            for k in 0..180 {
                g.web(
                    t + k * 700_000_000,
                    "web-01",
                    &from,
                    Some(&name),
                    &format!("GET /api/reports/{k}"),
                    200,
                    AGENT,
                    None,
                );
            }
        }
    }

    // The attacks, in the last two weeks (their first Monday is `a0`).
    let a0 = START_NS + last2 * DAY;
    let mut attacks: Vec<Attack> = Vec::new();
    let mut add = |name, description, entity: &str, actor: Option<&str>| {
        attacks.push(Attack::new(name, description, entity, actor));
        attacks.len() - 1
    };
    let desk = |i: usize| format!("10.{}.{}.{}", people[i].desk.0, i % 4, leases[i]);

    // 1. A stolen session used at 04:00 local from the user's own home address.
    let v = &people[23];
    let a = add(
        "never_active_hour",
        "a.person's account logs in at 04:10 local from their home address; they never work at night",
        &v.name,
        None,
    );
    let t = local(a0 + DAY, 4) + 10 * MIN;
    let (name, home, server) = (v.name.clone(), v.home.clone(), v.servers[0]);
    g.vpn(t, &name, &home, Some(a));
    g.ssh_login(t + MIN, &name, &home, server, false, Some(a));
    // 2. A user's account scrapes the application: a hundred times the usual rate.
    let v = &people[64];
    let a = add(
        "rate_spike",
        "an account pulls 400 customer records in five minutes",
        &v.name,
        None,
    );
    let (name, from) = (v.name.clone(), desk(64));
    let t = local(a0 + 2 * DAY, 11);
    for k in 0..400 {
        g.web(
            t + k * 750_000_000,
            "web-01",
            &from,
            Some(&name),
            &format!("GET /api/customers/{}", 10_000 + k),
            200,
            AGENT,
            Some(a),
        );
    }
    // 3. The first SSH hop between two servers the account never connected.
    let v = &people[31];
    let a = add(
        "server_hop",
        "an account hops from its server to a database it never used",
        &v.name,
        Some(&host_name(v.servers[0])),
    );
    let t = local(a0 + 2 * DAY, 15);
    let (name, from_host) = (v.name.clone(), v.servers[0]);
    g.ssh_login(t, &name, &host_ip(from_host), 28, false, Some(a));
    // 4. The contractor's account, silent since its third week, logs in to a server.
    let a = add(
        "dormant_account",
        "a contractor account silent for two weeks logs in over the VPN",
        contractor,
        Some("146.70.11.23"),
    );
    let t = local(a0 + 3 * DAY, 10);
    g.vpn(t, contractor, "146.70.11.23", Some(a));
    g.ssh_login(t + 2 * MIN, contractor, "146.70.11.23", 16, false, Some(a));
    // 5. Brute force on the bastion, then success.
    let v = &people[88];
    let a = add(
        "brute_force_success",
        "185.220.101.4 fails 150 passwords for an account on the bastion, then logs in",
        &v.name,
        Some("185.220.101.4"),
    );
    let t = local(a0 + 4 * DAY, 3);
    let name = v.name.clone();
    for k in 0..150 {
        g.ssh_failed(
            t + k * 1_500_000_000,
            &name,
            "185.220.101.4",
            BASTION,
            Some(a),
        );
    }
    g.ssh_login(
        t + 151 * 1_500_000_000,
        &name,
        "185.220.101.4",
        BASTION,
        false,
        Some(a),
    );
    // 6. Password spraying: real account names, one password, one address.
    let a = add(
        "password_spraying",
        "45.155.205.99 tries one password on 40 real accounts on the bastion",
        "45.155.205.99",
        Some("45.155.205.99"),
    );
    let t = local(a0 + 7 * DAY, 13);
    for k in 0..40usize {
        let name = people[(k * 3) % PEOPLE].name.clone();
        g.ssh_failed(
            t + k as i64 * 20_000_000_000,
            &name,
            "45.155.205.99",
            BASTION,
            Some(a),
        );
    }
    // 7. Privilege escalation by a non-admin: refused sudo, then a root shell and a UID-0 user.
    let v = &people[55];
    let a = add(
        "privilege_escalation",
        "a non-admin account is refused sudo, then gets root and adds a UID 0 user",
        &v.name,
        None,
    );
    let t = local(a0 + 8 * DAY, 14);
    let (name, server) = (v.name.clone(), v.servers[0]);
    let h = host_name(server);
    g.syslog(t, 86, &h, "sudo", &format!("{name} : user NOT in sudoers ; TTY=pts/1 ; PWD=/home/{name} ; USER=root ; COMMAND=/bin/bash"), Some(a));
    g.syslog(
        t + 2 * MIN,
        86,
        &h,
        "su",
        &format!("(to root) {name} on pts/1"),
        Some(a),
    );
    g.syslog(
        t + 3 * MIN,
        86,
        &h,
        "useradd",
        "new user: name=sysupd, UID=0, GID=0, home=/root, shell=/bin/bash",
        Some(a),
    );
    // 8. A service account used interactively, from a workstation, at midday.
    let a = add(
        "service_account_misuse",
        "svc_backup logs in with a password from a workstation at noon and dumps a database",
        "svc_backup",
        Some(&desk(70)),
    );
    let t = local(a0 + 9 * DAY, 12);
    let from = desk(70);
    g.ssh_login(t, "svc_backup", &from, 25, false, Some(a));
    g.sudo(t + MIN, "svc_backup", 25, "/usr/bin/pg_dumpall", Some(a));
    // 9. A login from a network the account never used, in working hours.
    let v = &people[97];
    let a = add(
        "new_network_login",
        "an account logs in over the VPN from a network it never used, at 10:00",
        &v.name,
        Some("103.75.190.12"),
    );
    let t = local(a0 + 9 * DAY, 10);
    let name = v.name.clone();
    g.vpn(t, &name, "103.75.190.12", Some(a));
    g.ssh_login(
        t + MIN,
        &name,
        "103.75.190.12",
        people[97].servers[0],
        false,
        Some(a),
    );
    // 10. Lateral movement: an application server reaches a host it never reached.
    let a = add(
        "lateral_new_path",
        "app-04 connects as deploy to backup-01, which it never reached",
        &host_ip(6),
        Some("backup-01"),
    );
    let t = local(a0 + 10 * DAY, 11);
    g.ssh_login(t, "deploy", &host_ip(6), BACKUP, true, Some(a));
    // 11. A patient brute force under the scanners' background: one address tries root on the
    // bastion about every ten minutes for nine hours, never ten in five minutes.
    let a = add(
        "slow_brute_force",
        "91.240.118.50 tries a root password on the bastion every ten minutes for nine hours",
        "91.240.118.50",
        Some("91.240.118.50"),
    );
    let t = local(a0 + 8 * DAY, 19);
    for k in 0..54 {
        let jitter = g.rng.below(240) as i64 * 1_000_000_000;
        g.ssh_failed(
            t + k * 10 * MIN + jitter,
            "root",
            "91.240.118.50",
            BASTION,
            Some(a),
        );
    }

    finish(g.events, attacks, START_NS + 7 * DAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_holds_every_format_and_each_attack_its_lines() {
        let s = generate(1, 4);
        assert_eq!(s.attacks.len(), 11);
        for a in &s.attacks {
            assert!(!a.lines.is_empty(), "{}", a.name);
        }
        let syslog = s.lines.iter().filter(|l| l.starts_with('<')).count();
        let nested = s.lines.iter().filter(|l| l.contains("\"host\":{")).count();
        let flat = s
            .lines
            .iter()
            .filter(|l| l.contains("\"host.name\""))
            .count();
        assert!(
            syslog > 0 && nested > 0 && flat > 0,
            "{syslog} {nested} {flat}"
        );
        assert!(
            s.lines.iter().any(|l| l.starts_with("<38>Oct  5 ")),
            "RFC 3164 day padding"
        );
        assert_eq!(generate(1, 4).lines, s.lines, "seeded");
    }

    #[test]
    fn every_person_has_an_account_of_their_own() {
        let names: std::collections::HashSet<String> = (0..PEOPLE).map(person_name).collect();
        assert_eq!(names.len(), PEOPLE);
    }

    #[test]
    fn office_hours_move_an_hour_in_utc_when_summer_time_ends() {
        let before = START_NS + 19 * DAY;
        let after = START_NS + 21 * DAY;
        assert_eq!((local(before, 9) - before) / HOUR, 7);
        assert_eq!((local(after, 9) - after) / HOUR, 8);
    }
}
