//! A Windows domain, as a third organisation unlike the realistic one (issue 54, item 6): its logs
//! are Windows Security events forwarded as flat JSON (the second log mix), not syslog.
//!
//! **`domain`**: an office of 240 in Bengaluru (UTC+05:30, a half-hour offset, no daylight
//! saving), `sAMAccountName` accounts (`akumar`), a workstation each (`WS-0042`), two domain
//! controllers that every Kerberos logon reaches (4768, 4769), a file server that every
//! workstation reaches all day (4624 type 3: a server of many clients), four application
//! servers and a SQL server, administrators who RDP (type 10, 4672), a day a week from home
//! over the VPN (its flat JSON log, then RDP to one's own workstation from the VPN pool), and one
//! RDP server exposed to the internet with its scanners (4625: unknown names 0xC0000064, the
//! real `administrator` 0xC000006A) and two brute-forcers. Service accounts: backup service
//! logons every night on every server, an hourly scheduled task, the application pools reaching
//! SQL every quarter hour, and a month-end report of 150 connections. Look-alikes: travellers
//! on the VPN from abroad, on-call administrators paged at night, people working late, typos.
//!
//! Ten attacks on its own people and hosts, Windows-shaped: a spray and a brute force over RDP
//! from the internet, a slow brute force, half an hour of night work from one's own
//! workstation, an RDP hop to a server the account never used, a leaver's return, a user adding
//! itself to Domain Admins, a service account logging on interactively, a login from a foreign
//! network, and Kerberoasting (RC4 service tickets for many services from one workstation).

use crate::logwriter::LogWriter;
use crate::scenario::{Attack, Scenario, attack_weekday, finish};
use watchpost_detect::SplitMix64;

const SEC: i64 = 1_000_000_000;
const MIN: i64 = 60 * SEC;
const HOUR: i64 = 60 * MIN;
const DAY: i64 = 24 * HOUR;
/// Monday 2026-10-05 00:00 UTC, as the other organisations.
const START_NS: i64 = 1_791_158_400_000_000_000;
/// India Standard Time.
const OFFSET: i64 = 5 * HOUR + 30 * MIN;
const PEOPLE: usize = 240;
const APPS: usize = 4;

const FIRST: [&str; 16] = [
    "a", "b", "c", "d", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "y",
];
const LAST: [&str; 15] = [
    "kumar", "iyer", "rao", "sharma", "nair", "reddy", "menon", "gupta", "das", "bose", "pillai",
    "shetty", "joshi", "khan", "mehta",
];
/// What the internet tries on an exposed RDP server.
const GUESSES: [&str; 10] = [
    "administrator",
    "admin",
    "user",
    "test",
    "guest",
    "scanner",
    "support",
    "backup",
    "user1",
    "rdp",
];

struct Person {
    name: String,
    ws: String,
    ws_ip: String,
    /// Home address, for the VPN.
    home: String,
    apps: Vec<usize>,
    admin: bool,
    /// Local start of the day, minutes after midnight.
    start_min: i64,
}

/// The UTC time of local minute `m` (may run past a day) of day `day`.
fn local(day: i64, m: i64) -> i64 {
    START_NS + day * DAY + m * MIN - OFFSET
}

/// One Security event as a forwarder writes it: flat JSON, the System fields by their Sigma
/// names and the EventData fields beside them.
fn event(g: &mut LogWriter, ts: i64, computer: &str, id: u32, data: &str, attack: Option<usize>) {
    let line = format!(
        "{{\"@timestamp\":\"{}\",\"Channel\":\"Security\",\"Provider_Name\":\"Microsoft-Windows-Security-Auditing\",\"EventID\":{id},\"Computer\":\"{computer}.corp.example\",{data}}}",
        LogWriter::iso(ts)
    );
    g.events.push((ts, line, attack));
}

/// 4624: `user` logged on to `computer` (type 2 interactive, 3 network, 4 batch, 5 service, 10
/// remote interactive) from `ip`.
#[allow(clippy::too_many_arguments)]
fn logon(
    g: &mut LogWriter,
    ts: i64,
    computer: &str,
    user: &str,
    logon_type: u8,
    ip: &str,
    ws: &str,
    attack: Option<usize>,
) {
    let (process, package) = match logon_type {
        2 | 10 => ("User32 ", "Negotiate"),
        3 => ("Kerberos", "Kerberos"),
        _ => ("Advapi  ", "Negotiate"),
    };
    let data = format!(
        "\"TargetUserName\":\"{user}\",\"TargetDomainName\":\"CORP\",\"LogonType\":{logon_type},\"IpAddress\":\"{ip}\",\"WorkstationName\":\"{ws}\",\"LogonProcessName\":\"{process}\",\"AuthenticationPackageName\":\"{package}\""
    );
    event(g, ts, computer, 4624, &data, attack);
}

/// 4625: a failed logon; `sub` is 0xC000006A (bad password) or 0xC0000064 (no such user).
fn failed(
    g: &mut LogWriter,
    ts: i64,
    computer: &str,
    user: &str,
    sub: &str,
    ip: &str,
    attack: Option<usize>,
) {
    let data = format!(
        "\"TargetUserName\":\"{user}\",\"TargetDomainName\":\"CORP\",\"Status\":\"0xc000006d\",\"SubStatus\":\"{sub}\",\"LogonType\":3,\"IpAddress\":\"{ip}\",\"WorkstationName\":\"-\",\"LogonProcessName\":\"NtLmSsp \",\"AuthenticationPackageName\":\"NTLM\""
    );
    event(g, ts, computer, 4625, &data, attack);
}

/// 4768 (a TGT) or 4769 (a service ticket for `service`), at a domain controller.
fn ticket(
    g: &mut LogWriter,
    ts: i64,
    dc: &str,
    user: &str,
    service: Option<&str>,
    ip: &str,
    attack: Option<usize>,
) {
    match service {
        None => {
            let data = format!(
                "\"TargetUserName\":\"{user}\",\"TargetDomainName\":\"CORP\",\"ServiceName\":\"krbtgt\",\"TicketEncryptionType\":\"0x12\",\"Status\":\"0x0\",\"IpAddress\":\"::ffff:{ip}\""
            );
            event(g, ts, dc, 4768, &data, attack);
        }
        Some(service) => {
            // Kerberoasting asks for RC4 (0x17), which a modern domain no longer hands out.
            let enc = if attack.is_some() { "0x17" } else { "0x12" };
            let data = format!(
                "\"TargetUserName\":\"{user}@CORP.EXAMPLE\",\"ServiceName\":\"{service}\",\"TicketOptions\":\"0x40810000\",\"TicketEncryptionType\":\"{enc}\",\"Status\":\"0x0\",\"IpAddress\":\"::ffff:{ip}\""
            );
            event(g, ts, dc, 4769, &data, attack);
        }
    }
}

/// 4672: special privileges assigned to an administrator's new logon.
fn privileged(g: &mut LogWriter, ts: i64, computer: &str, user: &str, attack: Option<usize>) {
    let data = format!(
        "\"SubjectUserName\":\"{user}\",\"SubjectDomainName\":\"CORP\",\"PrivilegeList\":\"SeBackupPrivilege SeRestorePrivilege SeDebugPrivilege\""
    );
    event(g, ts, computer, 4672, &data, attack);
}

/// An address of the VPN's pool (a /26), as each session gets one.
fn vpn_address(g: &mut LogWriter) -> String {
    format!("10.99.0.{}", 2 + g.rng.below(62))
}

fn dc(k: usize) -> &'static str {
    ["DC-01", "DC-02"][k % 2]
}

fn app(k: usize) -> String {
    format!("APP-{:02}", 1 + k % APPS)
}

fn server_ip(name: &str) -> String {
    let n = name
        .bytes()
        .fold(7u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    format!("10.10.0.{}", 10 + n % 200)
}

/// Generates the domain: `weeks` (at least 4) of behaviour, the attacks in the last two.
pub fn generate(seed: u64, weeks: i64) -> Scenario {
    let weeks = weeks.max(4);
    let days = weeks * 7;
    let mut g = LogWriter::new(SplitMix64::new(seed ^ 0x646f_6d61), Vec::new());
    let people: Vec<Person> = (0..PEOPLE)
        .map(|i| Person {
            name: format!("{}{}", FIRST[i % 16], LAST[(i / 16 + i % 16) % 15]),
            ws: format!("WS-{:04}", 10 + i),
            ws_ip: format!("10.20.{}.{}", i / 200, 10 + i % 200),
            home: format!(
                "{}.{}.{}.{}",
                [49, 103, 106, 117, 122][i % 5],
                30 + i % 200,
                (i * 13) % 250,
                4 + i % 250
            ),
            apps: (0..1 + i % 2).map(|k| (i + k * 3) % APPS).collect(),
            admin: i % 12 == 0,
            start_min: 9 * 60 + (i as i64 * 7) % 90,
        })
        .collect();
    let admins: Vec<usize> = (0..PEOPLE).filter(|&i| people[i].admin).collect();
    let pick = |k: usize| {
        (0..PEOPLE)
            .map(|i| (i + k * 41) % PEOPLE)
            .find(|&i| !people[i].admin)
            .unwrap_or(k)
    };
    let (leaver, night_victim, hopper, kerberoaster, escalator) =
        (pick(1), pick(2), pick(3), pick(4), pick(5));
    let travellers = [pick(6), pick(7)];
    let rds = "RDS-01";
    let brute_forcers = ["185.220.101.14", "45.155.205.99"];

    for day in 0..days {
        let weekday = day % 7 < 5;
        internet(&mut g, day, rds, &brute_forcers);
        service_accounts(&mut g, day, weekday);
        // On call: the week's administrator is paged at night about twice a week.
        let oncall = &people[admins[(day / 7) as usize % admins.len()]];
        if g.rng.below(7) < 2 {
            let t = local(day, 60 + g.rng.below(240) as i64) + g.rng.below(60) as i64 * SEC;
            let server = app(day as usize);
            g.vpn(t, &oncall.name, &oncall.home, None);
            let pool = vpn_address(&mut g);
            logon(
                &mut g,
                t + MIN,
                &oncall.ws,
                &oncall.name,
                10,
                &pool,
                "-",
                None,
            );
            logon(
                &mut g,
                t + 3 * MIN,
                &server,
                &oncall.name,
                10,
                &oncall.ws_ip,
                &oncall.ws,
                None,
            );
            privileged(&mut g, t + 3 * MIN, &server, &oncall.name, None);
        }
        if !weekday {
            continue;
        }
        for (i, person) in people.iter().enumerate() {
            if i == leaver && day >= 5 {
                continue;
            }
            if g.rng.below(25) == 0 {
                continue; // leave
            }
            let travelling = travellers.contains(&i) && (15..19).contains(&day);
            workday(&mut g, person, day, travelling);
        }
    }

    // The attacks, in the last two weeks, on working days.
    let mut attacks: Vec<Attack> = Vec::new();
    let mut add = |name, description, entity: &str, actor: Option<&str>| {
        attacks.push(Attack::new(name, description, entity, actor));
        attacks.len() - 1
    };
    let workday_of = |d: i64| attack_weekday(weeks, d);

    // 1. A spray over RDP from the internet: 30 real accounts, one wrong password each.
    let ip = "91.240.118.172";
    let a = add(
        "password_spraying",
        "one internet address tries one password on 30 real accounts on the exposed RDP server",
        ip,
        Some(ip),
    );
    let t = local(workday_of(0), 23 * 60);
    for k in 0..30 {
        let who = &people[(k * 7 + 3) % PEOPLE].name;
        failed(
            &mut g,
            t + k as i64 * 15 * SEC,
            rds,
            who,
            "0xC000006A",
            ip,
            Some(a),
        );
    }
    // 2. A brute force that finds the password of an administrator, then an RDP session.
    let ip = "176.111.174.83";
    let victim = people[admins[1]].name.clone();
    let a = add(
        "brute_force_success",
        "an internet address guesses an administrator's password 40 times, then logs on over RDP",
        &victim,
        Some(ip),
    );
    let t = local(workday_of(1), 2 * 60);
    for k in 0..40 {
        failed(
            &mut g,
            t + k * 4 * SEC,
            rds,
            &victim,
            "0xC000006A",
            ip,
            Some(a),
        );
    }
    logon(&mut g, t + 170 * SEC, rds, &victim, 10, ip, "kali", Some(a));
    privileged(&mut g, t + 170 * SEC, rds, &victim, Some(a));
    // 3. A slow brute force: `administrator` about every ten minutes for nine hours.
    let ip = "193.106.191.45";
    let a = add(
        "slow_brute_force",
        "one internet address tries administrator about every ten minutes for nine hours",
        ip,
        Some(ip),
    );
    let mut t = local(workday_of(2), 19 * 60);
    for _ in 0..54 {
        failed(&mut g, t, rds, "administrator", "0xC000006A", ip, Some(a));
        t += 8 * MIN + g.rng.below(240) as i64 * SEC;
    }
    // 4. Time of day alone: a day worker at their own workstation at 03:30 for half an hour.
    let v = &people[night_victim];
    let a = add(
        "night_session",
        "a day worker logs on at their own workstation at 03:30 and opens shares for half an hour",
        &v.name,
        Some(&v.ws_ip),
    );
    let t = local(workday_of(3), 3 * 60 + 30);
    logon(&mut g, t, &v.ws, &v.name, 2, "127.0.0.1", &v.ws, Some(a));
    ticket(&mut g, t, dc(0), &v.name, None, &v.ws_ip, Some(a));
    for k in 0..30 {
        logon(
            &mut g,
            t + (k + 1) * MIN,
            "FS-01",
            &v.name,
            3,
            &v.ws_ip,
            &v.ws,
            Some(a),
        );
    }
    // 5. An RDP hop onto the SQL server, which the account never used.
    let v = &people[hopper];
    let a = add(
        "server_hop",
        "an account RDPs from its workstation onto the SQL server it never used",
        &v.name,
        Some(&v.ws_ip),
    );
    let t = local(workday_of(4), v.start_min + 5 * 60);
    logon(&mut g, t, "SQL-01", &v.name, 10, &v.ws_ip, &v.ws, Some(a));
    // 6. The leaver's account, silent since the first week, over the VPN from a new address.
    let v = &people[leaver];
    let ip = "102.129.143.8";
    let a = add(
        "dormant_account",
        "an account silent since the first week logs on over the VPN from a new address",
        &v.name,
        Some(ip),
    );
    let t = local(workday_of(5), 11 * 60);
    g.vpn(t, &v.name, ip, Some(a));
    let pool = vpn_address(&mut g);
    logon(&mut g, t + MIN, &v.ws, &v.name, 10, &pool, "-", Some(a));
    // 7. A user adds itself to Domain Admins.
    let v = &people[escalator];
    let a = add(
        "privilege_escalation",
        "a non-administrator adds itself to Domain Admins",
        &v.name,
        None,
    );
    let t = local(workday_of(6), v.start_min + 3 * 60);
    let data = format!(
        "\"SubjectUserName\":\"{}\",\"SubjectDomainName\":\"CORP\",\"MemberName\":\"CN={},OU=Staff,DC=corp,DC=example\",\"TargetUserName\":\"Domain Admins\",\"TargetDomainName\":\"CORP\",\"TargetSid\":\"S-1-5-21-3623811015-3361044348-30300820-512\"",
        v.name, v.name
    );
    event(&mut g, t, dc(1), 4728, &data, Some(a));
    // 8. The backup service account logs on interactively from a workstation.
    let from = people[(hopper + 1) % PEOPLE].ws_ip.clone();
    let a = add(
        "service_account_misuse",
        "the backup service account logs on over RDP from a workstation",
        "svc_backup",
        Some(&from),
    );
    let t = local(workday_of(7), 15 * 60);
    logon(
        &mut g,
        t,
        &app(2),
        "svc_backup",
        10,
        &from,
        "WS-0099",
        Some(a),
    );
    // 9. A login over the VPN from a network the person never used, in working hours.
    let v = &people[pick(8)];
    let ip = "154.47.23.119";
    let a = add(
        "new_network_login",
        "an account logs on over the VPN from a foreign network it never used",
        &v.name,
        Some(ip),
    );
    let t = local(workday_of(8), v.start_min + 60);
    g.vpn(t, &v.name, ip, Some(a));
    let pool = vpn_address(&mut g);
    logon(&mut g, t + MIN, &v.ws, &v.name, 10, &pool, "-", Some(a));
    // 10. Kerberoasting: RC4 service tickets for eight service accounts from one workstation.
    let v = &people[kerberoaster];
    let a = add(
        "kerberoasting",
        "a workstation asks for RC4 service tickets for eight service accounts in a minute",
        &v.name,
        Some(&v.ws_ip),
    );
    let t = local(workday_of(9), v.start_min + 2 * 60);
    for (k, service) in [
        "svc_sql",
        "svc_backup",
        "svc_sched",
        "svc_report",
        "svc_web",
        "svc_ftp",
        "svc_crm",
        "svc_hr",
    ]
    .iter()
    .enumerate()
    {
        ticket(
            &mut g,
            t + k as i64 * 5 * SEC,
            dc(0),
            &v.name,
            Some(service),
            &v.ws_ip,
            Some(a),
        );
    }

    finish(g.events, attacks, START_NS + 7 * DAY)
}

/// One person's working day: the morning logon (at the desk, or from home over the VPN one day
/// a week, or abroad for a traveller), the file shares and their applications through the day,
/// an administrator's RDP sessions, now and then a typo and a late evening.
fn workday(g: &mut LogWriter, p: &Person, day: i64, travelling: bool) {
    let home_day = (day + p.start_min) % 5 == 0;
    let jitter = g.rng.below(40) as i64 - 20;
    // A traveller works from a time zone four and a half hours behind, from a hotel.
    let shift = if travelling { 4 * 60 + 30 } else { 0 };
    let begin = local(day, p.start_min + jitter + shift);
    let length = (8 * 60 + g.rng.below(60) as i64) * MIN;
    let late = g.rng.below(15) == 0;
    let end = begin + length + if late { 3 * HOUR } else { 0 };
    let (ip, how) = if travelling || home_day {
        let from = if travelling {
            format!("185.{}.{}.{}", 40 + day, 7 + p.start_min % 200, 9)
        } else {
            p.home.clone()
        };
        g.vpn(begin - MIN, &p.name, &from, None);
        (vpn_address(g), 10)
    } else {
        ("127.0.0.1".to_string(), 2)
    };
    if g.rng.below(30) == 0 {
        failed(g, begin - 30 * SEC, &p.ws, &p.name, "0xC000006A", &ip, None);
    }
    logon(g, begin, &p.ws, &p.name, how, &ip, &p.ws, None);
    ticket(
        g,
        begin,
        dc(p.ws.len() + day as usize),
        &p.name,
        None,
        &p.ws_ip,
        None,
    );
    let span = end - begin;
    for _ in 0..(3 + g.rng.below(6)) {
        let t = begin + (g.rng.next_f64() * span as f64) as i64;
        ticket(
            g,
            t,
            dc(day as usize),
            &p.name,
            Some("cifs/FS-01"),
            &p.ws_ip,
            None,
        );
        logon(g, t + SEC, "FS-01", &p.name, 3, &p.ws_ip, &p.ws, None);
    }
    for &k in &p.apps {
        for _ in 0..(1 + g.rng.below(3)) {
            let t = begin + (g.rng.next_f64() * span as f64) as i64;
            let server = app(k);
            logon(g, t, &server, &p.name, 3, &p.ws_ip, &p.ws, None);
        }
    }
    if p.admin {
        for _ in 0..(1 + g.rng.below(3)) {
            let t = begin + (g.rng.next_f64() * span as f64) as i64;
            let server = if g.rng.below(4) == 0 {
                "SQL-01".to_string()
            } else {
                app(g.rng.below(APPS as u64) as usize)
            };
            logon(g, t, &server, &p.name, 10, &p.ws_ip, &p.ws, None);
            privileged(g, t, &server, &p.name, None);
        }
    }
}

/// The service accounts' schedules of a day.
fn service_accounts(g: &mut LogWriter, day: i64, weekday: bool) {
    let servers: Vec<String> = (0..APPS)
        .map(app)
        .chain(["SQL-01".to_string(), "FS-01".to_string()])
        .collect();
    // The backup agent's service logons, nightly at 01:00 local, on every server.
    for (k, s) in servers.iter().enumerate() {
        let t = local(day, 60) + k as i64 * 2 * MIN + g.rng.below(60) as i64 * SEC;
        logon(g, t, s, "svc_backup", 5, "-", "-", None);
    }
    // An hourly scheduled task on the first application server.
    for h in 0..24 {
        let t = local(day, h * 60 + 5) + g.rng.below(30) as i64 * SEC;
        logon(g, t, &app(0), "svc_sched", 4, "-", "-", None);
    }
    // The application pools reach SQL every quarter hour in working hours, on weekdays.
    if weekday {
        for q in 0..(11 * 4) {
            for k in 0..APPS {
                let t =
                    local(day, 8 * 60 + q * 15) + (k as i64 * 11 + g.rng.below(20) as i64) * SEC;
                logon(
                    g,
                    t,
                    "SQL-01",
                    "svc_sql",
                    3,
                    &server_ip(&app(k)),
                    &app(k),
                    None,
                );
            }
        }
    }
    // The month-end report (the last day of October): 150 connections to SQL in ten minutes.
    if day == 26 {
        let t = local(day, 22 * 60);
        for k in 0..150 {
            logon(
                g,
                t + k * 4 * SEC,
                "SQL-01",
                "svc_report",
                3,
                &server_ip(&app(3)),
                &app(3),
                None,
            );
        }
    }
}

/// The exposed RDP server's internet: scanners trying common names, and two brute-forcers that
/// come back every six hours for `administrator`.
fn internet(g: &mut LogWriter, day: i64, rds: &str, brute_forcers: &[&str]) {
    for hour in 0..24 {
        for _ in 0..(8 + g.rng.below(17)) {
            let ip = g.internet_ip();
            let t = START_NS + day * DAY + hour * HOUR + g.rng.below(3_600) as i64 * SEC;
            let first = g.rng.below(GUESSES.len() as u64) as usize;
            for k in 0..(1 + g.rng.below(3) as usize) {
                let name = GUESSES[(first + k) % GUESSES.len()];
                let sub = if name == "administrator" {
                    "0xC000006A"
                } else {
                    "0xC0000064"
                };
                failed(g, t + k as i64 * 2 * SEC, rds, name, sub, &ip, None);
            }
        }
    }
    for (b, ip) in brute_forcers.iter().enumerate() {
        let mut at = (b as i64 * 3) % 6;
        while at < 24 {
            let t = START_NS + day * DAY + at * HOUR + g.rng.below(3000) as i64 * SEC;
            for k in 0..20 {
                failed(
                    g,
                    t + k * 3 * SEC,
                    rds,
                    "administrator",
                    "0xC000006A",
                    ip,
                    None,
                );
            }
            at += 6;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_domain_holds_its_attacks_as_windows_json() {
        let s = generate(1, 4);
        assert_eq!(s.attacks.len(), 10);
        for a in &s.attacks {
            assert!(!a.lines.is_empty(), "{}", a.name);
        }
        assert_eq!(generate(1, 4).lines, s.lines, "seeded");
        let first = serde_json::from_str::<serde_json::Value>(&s.lines[0]).unwrap();
        assert!(first.get("@timestamp").is_some(), "{first}");
        assert!(
            s.lines
                .iter()
                .any(|l| l.contains("\"EventID\":4624") && l.contains("\"LogonType\":10"))
        );
    }
}
