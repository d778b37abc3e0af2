//! Syslog lines: sshd, sudo, cron, systemd, kernel, packet filter and nginx.

use super::{Campaign, Kind, Traffic, Vars};
use crate::emit;

/// Relative frequency of each kind outside attack bursts; web traffic and housekeeping dominate,
/// as on a real fleet.
const MIX: &[(u32, Kind)] = &[
    (380, Kind::WebAccess),
    (110, Kind::Cron),
    (90, Kind::Systemd),
    (110, Kind::Firewall),
    (50, Kind::SshdSuccess),
    (80, Kind::SshdSession),
    (80, Kind::SshdFailure),
    (60, Kind::Sudo),
    (40, Kind::Kernel),
];

/// Chance per line (in 1/100 000) that an idle attacker starts a burst.
const CAMPAIGN_START_PER_100K: u64 = 25;
/// Share (per mille) of lines a running burst takes over.
const CAMPAIGN_SHARE: u32 = 400;

// syslog facilities (RFC 5424 table 1)
const KERN: u8 = 0;
const DAEMON: u8 = 3;
const AUTH: u8 = 4;
const CRON: u8 = 9;
const AUTHPRIV: u8 = 10;
const LOCAL7: u8 = 23;

// severities
const ALERT: u8 = 1;
const ERR: u8 = 3;
const WARNING: u8 = 4;
const NOTICE: u8 = 5;
const INFO: u8 = 6;

const BAD_LOGINS: &[&str] = &[
    "admin",
    "test",
    "user",
    "oracle",
    "postgres",
    "ubuntu",
    "pi",
    "guest",
    "ftpuser",
    "git",
    "deploy",
    "support",
    "administrator",
    "hadoop",
    "jenkins",
    "ansible",
    "nagios",
    "minecraft",
    "test1",
    "steam",
    "ec2-user",
    "centos",
    "dev",
    "www",
];

const SSH_FAIL_HOSTILE: &[&str] = &[
    "Failed password for invalid user {login} from {ip} port {port} ssh2",
    "Failed password for root from {ip} port {port} ssh2",
    "Invalid user {login} from {ip} port {port}",
    "Connection closed by invalid user {login} {ip} port {port} [preauth]",
    "Disconnected from authenticating user root {ip} port {port} [preauth]",
    "error: maximum authentication attempts exceeded for root from {ip} port {port} ssh2 [preauth]",
    "pam_unix(sshd:auth): authentication failure; logname= uid=0 euid=0 tty=ssh ruser= rhost={ip}  user=root",
    "Received disconnect from {ip} port {port}:11: Bye Bye [preauth]",
    "banner exchange: Connection from {ip} port {port}: invalid format",
    "Unable to negotiate with {ip} port {port}: no matching key exchange method found. Their offer: diffie-hellman-group14-sha1,diffie-hellman-group1-sha1 [preauth]",
];

const SSH_FAIL_USER: &[&str] = &[
    "Failed password for {user} from {ip} port {port} ssh2",
    "Failed publickey for {user} from {ip} port {port} ssh2: ED25519 SHA256:{fp}",
    "pam_unix(sshd:auth): authentication failure; logname= uid=0 euid=0 tty=ssh ruser= rhost={ip}  user={user}",
];

const SSH_SESSION: &[&str] = &[
    "pam_unix(sshd:session): session opened for user {user}(uid={uid}) by (uid=0)",
    "pam_unix(sshd:session): session closed for user {user}",
    "Received disconnect from {ip} port {port}:11: disconnected by user",
    "Disconnected from user {user} {ip} port {port}",
    "Connection closed by {ip} port {port}",
];

const SUDO_COMMANDS: &[&str] = &[
    "/usr/bin/systemctl restart nginx",
    "/usr/bin/systemctl status postgresql",
    "/usr/bin/journalctl -u nginx --since today",
    "/usr/bin/apt-get update",
    "/usr/bin/apt-get install -y htop",
    "/usr/bin/tail -n 200 /var/log/auth.log",
    "/usr/bin/docker ps -a",
    "/usr/bin/docker logs --tail 100 api",
    "/usr/sbin/iptables -L -n -v",
    "/bin/bash",
    "/usr/bin/vim /etc/nginx/sites-available/default",
    "/usr/bin/kubectl get pods -A",
    "/usr/bin/psql -U postgres -c SELECT 1",
    "/usr/bin/rm -rf /tmp/build-cache",
    "/usr/bin/chmod 600 /etc/ssl/private/server.key",
    "/usr/sbin/reboot",
    "/usr/bin/su - postgres",
];

/// Rarely run by anyone legitimate; present so detectors have something to find.
const SUDO_SUSPICIOUS: &[&str] = &[
    "/usr/sbin/useradd -o -u 0 -g 0 sysupdate",
    "/usr/bin/base64 -d /tmp/.cache/x",
    "/usr/bin/cat /etc/shadow",
    "/usr/bin/chattr +i /etc/ld.so.preload",
];

/// (user, uid, command)
const CRON_JOBS: &[(&str, u32, &str)] = &[
    ("root", 0, "   cd / && run-parts --report /etc/cron.hourly"),
    (
        "root",
        0,
        "test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.daily; }",
    ),
    (
        "root",
        0,
        "[ -x /usr/lib/php/sessionclean ] && if [ ! -d /run/systemd/system ]; then /usr/lib/php/sessionclean; fi",
    ),
    (
        "www-data",
        33,
        "php /var/www/app/artisan schedule:run >> /dev/null 2>&1",
    ),
    ("postgres", 114, "/usr/local/bin/pg_backup.sh --full"),
    (
        "backup",
        34,
        "/usr/local/bin/restic-backup.sh > /var/log/restic.log 2>&1",
    ),
    ("root", 0, "/usr/sbin/logrotate /etc/logrotate.conf"),
    (
        "nagios",
        116,
        "/usr/lib/nagios/plugins/check_disk -w 20% -c 10% -p /",
    ),
    ("root", 0, "/usr/bin/certbot renew --quiet"),
    ("root", 0, "run-parts /etc/cron.hourly"),
];

const UNITS: &[(&str, &str)] = &[
    (
        "nginx",
        "A high performance web server and a reverse proxy server",
    ),
    ("postgresql", "PostgreSQL RDBMS"),
    ("docker", "Docker Application Container Engine"),
    ("node-exporter", "Prometheus Node Exporter"),
    ("api", "Shop API"),
    ("worker", "Background job worker"),
    ("postfix", "Postfix Mail Transport Agent"),
    ("kubelet", "kubelet: The Kubernetes Node Agent"),
];

const SYSTEMD: &[&str] = &[
    "Starting Daily apt upgrade and clean activities...",
    "apt-daily-upgrade.service: Deactivated successfully.",
    "Finished Daily apt upgrade and clean activities.",
    "Starting Cleanup of Temporary Directories...",
    "Finished Cleanup of Temporary Directories.",
    "Started {s}.service - {t}.",
    "Stopping {s}.service - {t}...",
    "Reloading.",
    "Starting Rotate log files...",
    "logrotate.service: Deactivated successfully.",
];

const SYSTEMD_FAIL: &[&str] = &[
    "{s}.service: Main process exited, code=exited, status=1/FAILURE",
    "{s}.service: Failed with result 'exit-code'.",
    "{s}.service: Scheduled restart job, restart counter is at {n}.",
    "{s}.service: Main process exited, code=killed, status=9/KILL",
];

const PROCESSES: &[&str] = &[
    "java",
    "python3",
    "node",
    "postgres",
    "nginx",
    "php-fpm8.2",
    "ruby",
    "dockerd",
    "gunicorn",
];

const LIBS: &[&str] = &[
    "libc.so.6",
    "libpthread.so.0",
    "libssl.so.3",
    "libstdc++.so.6.0.30",
    "ld-linux-x86-64.so.2",
];

const KERNEL: &[&str] = &[
    "usb 1-{n}: new high-speed USB device number {m} using xhci_hcd",
    "usb 1-{n}: New USB device found, idVendor=0781, idProduct=5581, bcdDevice= 1.00",
    "usb-storage 1-{n}:1.0: USB Mass Storage device detected",
    "usb 1-{n}: USB disconnect, device number {m}",
    "EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode. Quota mode: none.",
    "e1000e 0000:00:1f.6 eth0: NIC Link is Up 1000 Mbps Full Duplex, Flow Control: Rx/Tx",
    "e1000e 0000:00:1f.6 eth0: NIC Link is Down",
    "TCP: request_sock_TCP: Possible SYN flooding on port {port}. Sending cookies.  Check SNMP counters.",
    "nf_conntrack: nf_conntrack: table full, dropping packet",
    "audit: type=1400 audit({ts}.{ms}:{pid}): apparmor=\"DENIED\" operation=\"open\" profile=\"/usr/sbin/named\" name=\"/etc/shadow\" pid={pid} comm=\"named\" requested_mask=\"r\" denied_mask=\"r\" fsuid=106 ouid=0",
    "Memory cgroup out of memory: Killed process {pid} ({s}) total-vm:{n}kB, anon-rss:{m}kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:2048kB oom_score_adj:999",
];

const KERNEL_OOM: &str = "Out of memory: Killed process {pid} ({s}) total-vm:{n}kB, anon-rss:{m}kB, file-rss:0kB, shmem-rss:0kB, UID:{uid} pgtables:{port}kB oom_score_adj:0";

/// (port, weight): what the internet knocks on.
const SCANNED_PORTS: &[(u32, u16)] = &[
    (22, 22),
    (10, 23),
    (8, 80),
    (6, 443),
    (10, 445),
    (10, 3389),
    (6, 8080),
    (4, 5900),
    (4, 6379),
    (3, 1433),
    (4, 3306),
    (3, 25),
    (2, 53),
    (3, 8443),
    (2, 9200),
    (2, 2375),
];

const METHODS: &[(u32, &str)] = &[
    (850, "GET"),
    (110, "POST"),
    (15, "HEAD"),
    (10, "PUT"),
    (8, "DELETE"),
    (7, "OPTIONS"),
];

/// Paths real users hit; `{n}` is an id, `{m}` a page number, `{s}` a short hex hash.
const PATHS: &[(u32, &str)] = &[
    (60, "/"),
    (80, "/static/js/app.{s}.js"),
    (60, "/static/css/main.{s}.css"),
    (40, "/favicon.ico"),
    (120, "/api/v1/products?page={m}&sort=price"),
    (100, "/api/v1/products/{n}"),
    (60, "/api/v1/cart"),
    (40, "/api/v1/orders/{n}"),
    (30, "/api/v1/orders"),
    (25, "/api/v1/users/{n}/profile"),
    (20, "/login"),
    (10, "/logout"),
    (60, "/images/products/{n}.jpg"),
    (30, "/search?q=usb+c+cable&page={m}"),
    (20, "/robots.txt"),
    (15, "/sitemap.xml"),
];

const SCAN_PATHS: &[&str] = &[
    "/wp-login.php",
    "/xmlrpc.php",
    "/.env",
    "/.git/config",
    "/phpmyadmin/index.php",
    "/admin/config.php",
    "/cgi-bin/luci/;stok=/locale",
    "/vendor/phpunit/phpunit/src/Util/PHP/eval-stdin.php",
    "/actuator/health",
    "/server-status",
    "/boaform/admin/formLogin",
    "/?XDEBUG_SESSION_START=phpstorm",
    "/index.php?s=/Index/\\think\\app/invokefunction&function=call_user_func_array&vars[0]=md5&vars[1][]=HelloThinkPHP",
    "/cgi-bin/../../../../../../etc/passwd",
    "/owa/auth/logon.aspx",
    "/.aws/credentials",
    "/wp-content/plugins/wp-file-manager/readme.txt",
    "/HNAP1/",
];

const BROWSERS: &[&str] = &[
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4.1 Safari/605.1.15",
    "Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4.1 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.6367.82 Mobile Safari/537.36",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36 Edg/124.0.2478.67",
    "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
    "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
    "curl/8.5.0",
    "python-requests/2.31.0",
];

const SCANNER_AGENTS: &[&str] = &[
    "Mozilla/5.0 zgrab/0.x",
    "masscan/1.3 (https://github.com/robertdavidgraham/masscan)",
    "Go-http-client/1.1",
    "Mozilla/5.0 (compatible; CensysInspect/1.1; +https://about.censys.io/)",
    "sqlmap/1.8.4#stable (https://sqlmap.org)",
    "Nuclei - Open-source project (github.com/projectdiscovery/nuclei)",
    "-",
];

const REFERERS: &[&str] = &[
    "https://shop.example.com/",
    "https://shop.example.com/cart",
    "https://shop.example.com/search?q=usb+c+cable",
    "https://www.google.com/",
    "https://duckduckgo.com/",
];

impl Traffic {
    pub(super) fn syslog_line(&mut self, out: &mut Vec<u8>) -> Kind {
        if self.ssh_brute.is_none() && self.rng.below(100_000) < CAMPAIGN_START_PER_100K {
            self.ssh_brute = Some(Campaign::start(&mut self.rng, &self.world, &self.exposed));
        }
        if self.web_scan.is_none() && self.rng.below(100_000) < CAMPAIGN_START_PER_100K {
            self.web_scan = Some(Campaign::start(&mut self.rng, &self.world, &self.web));
        }
        if self.ssh_brute.is_some() && self.rng.chance(CAMPAIGN_SHARE) {
            self.ssh_brute_line(out);
            return Kind::SshdFailure;
        }
        if self.web_scan.is_some() && self.rng.chance(CAMPAIGN_SHARE) {
            self.web_scan_line(out);
            return Kind::WebAccess;
        }
        let kind = self.rng.weighted(MIX);
        match kind {
            Kind::WebAccess => self.web_access(out),
            Kind::Cron => self.cron(out),
            Kind::Systemd => self.systemd(out),
            Kind::Firewall => self.firewall(out),
            Kind::SshdSuccess => self.sshd_success(out),
            Kind::SshdSession => self.sshd_session(out),
            Kind::SshdFailure => self.sshd_failure(out),
            Kind::Sudo => self.sudo(out),
            Kind::Kernel => self.kernel(out),
            _ => unreachable!("not a syslog kind"),
        }
        kind
    }

    /// Writes `<PRI>` and the header up to the message, in the host's syslog dialect.
    fn header(&mut self, out: &mut Vec<u8>, host: usize, pri: (u8, u8), app: &str, pid: u64) {
        let (facility, severity) = pri;
        let h = &self.world.hosts[host];
        out.push(b'<');
        emit::u64(out, u64::from(facility) * 8 + u64::from(severity));
        out.push(b'>');
        if h.rfc5424 {
            out.extend_from_slice(b"1 ");
            self.civil.rfc3339(out, self.rng.below(1_000_000), 6);
            out.push(b' ');
            out.extend_from_slice(h.name.as_bytes());
            out.push(b' ');
            out.extend_from_slice(app.as_bytes());
            out.push(b' ');
            if pid == 0 {
                out.push(b'-');
            } else {
                emit::u64(out, pid);
            }
            // rsyslog with a time-quality aware source adds this element; others send none.
            if h.ip[3].is_multiple_of(2) {
                out.extend_from_slice(b" - [timeQuality tzKnown=\"1\" isSynced=\"1\"] ");
            } else {
                out.extend_from_slice(b" - - ");
            }
        } else {
            self.civil.rfc3164(out);
            out.push(b' ');
            out.extend_from_slice(h.name.as_bytes());
            out.push(b' ');
            out.extend_from_slice(app.as_bytes());
            if pid != 0 {
                out.push(b'[');
                emit::u64(out, pid);
                out.push(b']');
            }
            out.extend_from_slice(b": ");
        }
    }

    fn pid(&mut self) -> u64 {
        self.rng.range(300, 99_999)
    }

    /// A user: heavy-tailed over the population.
    fn any_user(&mut self) -> usize {
        self.rng.skewed(self.world.users.len())
    }

    /// An operator with shell access.
    fn admin_user(&mut self) -> usize {
        let i = self.rng.skewed(self.world.admins.len());
        self.world.admins[i]
    }

    fn sshd_success(&mut self, out: &mut Vec<u8>) {
        let to_bastion = self.rng.chance(550);
        let user = if to_bastion && self.rng.chance(300) {
            self.any_user()
        } else {
            self.admin_user()
        };
        let (host, ip) = if to_bastion {
            let h = self.rng.pick(&self.bastions);
            (h, self.world.users[user].ws_ip)
        } else {
            let h = self.rng.pick(&self.servers);
            let b = self.rng.pick(&self.bastions);
            (h, self.world.hosts[b].ip)
        };
        let pid = self.pid();
        self.header(out, host, (AUTH, INFO), "sshd", pid);
        let vars = Vars {
            user,
            ip,
            port: self.client_port(),
            n: u64::from(self.world.users[user].uid),
            ..Vars::default()
        };
        let tpl = if self.rng.chance(800) {
            "Accepted publickey for {user} from {ip} port {port} ssh2: ED25519 SHA256:{fp}"
        } else {
            "Accepted password for {user} from {ip} port {port} ssh2"
        };
        self.text(out, tpl, &vars);
    }

    fn sshd_session(&mut self, out: &mut Vec<u8>) {
        let user = self.admin_user();
        let host = self.rng.pick(&self.servers);
        let pid = self.pid();
        let tpl = self.rng.pick(SSH_SESSION);
        let sev = if tpl.starts_with("pam") {
            AUTHPRIV
        } else {
            AUTH
        };
        self.header(out, host, (sev, INFO), "sshd", pid);
        let vars = Vars {
            user,
            ip: self.world.users[user].ws_ip,
            port: self.client_port(),
            ..Vars::default()
        };
        self.text(out, tpl, &vars);
    }

    fn sshd_failure(&mut self, out: &mut Vec<u8>) {
        let pid = self.pid();
        if self.rng.chance(650) {
            // Background internet noise: many sources, a few attempts each.
            let host = self.rng.pick(&self.exposed);
            let src = if self.rng.chance(500) {
                self.rng.pick(&self.world.hostile).ip
            } else {
                self.external().ip
            };
            self.header(out, host, (AUTH, INFO), "sshd", pid);
            let vars = Vars {
                login: self.rng.pick(BAD_LOGINS),
                ip: src,
                port: self.client_port(),
                ..Vars::default()
            };
            let tpl = self.rng.pick(SSH_FAIL_HOSTILE);
            self.text(out, tpl, &vars);
        } else {
            // A colleague mistyping a password.
            let user = self.any_user();
            let host = self.rng.pick(&self.servers);
            self.header(out, host, (AUTH, INFO), "sshd", pid);
            let vars = Vars {
                user,
                ip: self.world.users[user].ws_ip,
                port: self.client_port(),
                // Some other key than the user's registered one.
                n: self.rng.below(1 << 20),
                ..Vars::default()
            };
            let tpl = self.rng.pick(SSH_FAIL_USER);
            self.text(out, tpl, &vars);
        }
    }

    fn ssh_brute_line(&mut self, out: &mut Vec<u8>) {
        let mut c = self.ssh_brute.take().expect("campaign running");
        let port = c.step(&mut self.rng);
        // One attacker uses one sshd child per connection; a few attempts share it.
        let pid = 20_000 + u64::from(port) % 40_000;
        self.header(out, c.target, (AUTH, INFO), "sshd", pid);
        let vars = Vars {
            login: if self.rng.chance(400) {
                "root"
            } else {
                self.rng.pick(BAD_LOGINS)
            },
            ip: c.src.ip,
            port: u64::from(port),
            ..Vars::default()
        };
        let tpl = match self.rng.below(10) {
            0..=5 => "Failed password for invalid user {login} from {ip} port {port} ssh2",
            6 => "Invalid user {login} from {ip} port {port}",
            7 => "Connection closed by invalid user {login} {ip} port {port} [preauth]",
            8 => "Failed password for root from {ip} port {port} ssh2",
            _ => {
                "pam_unix(sshd:auth): authentication failure; logname= uid=0 euid=0 tty=ssh ruser= rhost={ip}"
            }
        };
        self.text(out, tpl, &vars);
        if c.left > 0 {
            self.ssh_brute = Some(c);
        }
    }

    fn sudo(&mut self, out: &mut Vec<u8>) {
        let host = self.rng.pick(&self.servers);
        let admin = self.rng.chance(930);
        let user = if admin {
            self.admin_user()
        } else {
            self.any_user()
        };
        let command = if self.rng.chance(8) {
            self.rng.pick(SUDO_SUSPICIOUS)
        } else {
            self.rng.pick(SUDO_COMMANDS)
        };
        let vars = Vars {
            user,
            n: self.rng.below(4),
            s: command,
            ..Vars::default()
        };
        let (pri, tpl) = if !admin && !self.world.users[user].admin {
            (
                (AUTHPRIV, ALERT),
                "{user} : user NOT in sudoers ; TTY=pts/{n} ; PWD=/home/{user} ; USER=root ; COMMAND={s}",
            )
        } else {
            match self.rng.below(20) {
                0..=9 => (
                    (AUTHPRIV, NOTICE),
                    "{user} : TTY=pts/{n} ; PWD=/home/{user} ; USER=root ; COMMAND={s}",
                ),
                10..=14 => (
                    (AUTHPRIV, INFO),
                    "pam_unix(sudo:session): session opened for user root(uid=0) by {user}(uid={uid})",
                ),
                15..=18 => (
                    (AUTHPRIV, INFO),
                    "pam_unix(sudo:session): session closed for user root",
                ),
                _ => (
                    (AUTHPRIV, ALERT),
                    "{user} : 3 incorrect password attempts ; TTY=pts/{n} ; PWD=/home/{user} ; USER=root ; COMMAND={s}",
                ),
            }
        };
        self.header(out, host, pri, "sudo", 0);
        self.text(out, tpl, &vars);
    }

    fn cron(&mut self, out: &mut Vec<u8>) {
        let host = self.rng.pick(&self.linux);
        let (user, uid, cmd) = self.rng.pick(CRON_JOBS);
        let pid = self.pid();
        let v = self.rng.below(4);
        let facility = if v == 0 { CRON } else { AUTHPRIV };
        self.header(out, host, (facility, INFO), "CRON", pid);
        out.extend_from_slice(match v {
            0 | 1 => b"(",
            2 => b"pam_unix(cron:session): session opened for user ",
            _ => b"pam_unix(cron:session): session closed for user ",
        });
        out.extend_from_slice(user.as_bytes());
        match v {
            0 | 1 => {
                out.extend_from_slice(b") CMD (");
                out.extend_from_slice(cmd.as_bytes());
                out.push(b')');
            }
            2 => {
                out.extend_from_slice(b"(uid=");
                emit::u64(out, u64::from(uid));
                out.extend_from_slice(b") by (uid=0)");
            }
            _ => {}
        }
    }

    fn systemd(&mut self, out: &mut Vec<u8>) {
        let host = self.rng.pick(&self.linux);
        let (unit, desc) = self.rng.pick(UNITS);
        let session = self.next_session();
        let user = self.any_user();
        let vars = Vars {
            user,
            n: session,
            s: unit,
            t: desc,
            ..Vars::default()
        };
        match self.rng.below(20) {
            0..=4 => {
                self.header(out, host, (DAEMON, INFO), "systemd", 1);
                self.text(out, "Started Session {n} of User {user}.", &vars);
            }
            5..=8 => {
                let pid = 500 + self.rng.below(400);
                self.header(out, host, (AUTHPRIV, INFO), "systemd-logind", pid);
                let tpl = if self.rng.chance(500) {
                    "New session {n} of user {user}."
                } else {
                    "Removed session {n}."
                };
                self.text(out, tpl, &vars);
            }
            9 => {
                self.header(out, host, (DAEMON, ERR), "systemd", 1);
                let tpl = self.rng.pick(SYSTEMD_FAIL);
                let vars = Vars {
                    n: self.rng.range(1, 5),
                    ..vars
                };
                self.text(out, tpl, &vars);
            }
            _ => {
                self.header(out, host, (DAEMON, INFO), "systemd", 1);
                let tpl = self.rng.pick(SYSTEMD);
                self.text(out, tpl, &vars);
            }
        }
    }

    /// `[uptime.micros] ` as the kernel prefixes its ring buffer, consistent per host.
    fn uptime(&mut self, out: &mut Vec<u8>, host: usize) {
        // Wraps every ~115 days of generated time, which no load run spans.
        let up =
            (self.civil.unix.rem_euclid(10_000_000) + self.world.hosts[host].boot_offset) as u64;
        out.push(b'[');
        emit::spaced(out, up, 5);
        out.push(b'.');
        emit::padded(out, self.rng.below(1_000_000), 6);
        out.extend_from_slice(b"] ");
    }

    fn kernel(&mut self, out: &mut Vec<u8>) {
        let host = self.rng.pick(&self.linux);
        let pick = self.rng.below(16);
        let sev = match pick {
            0..=2 => ERR,
            3..=4 => INFO,
            _ => WARNING,
        };
        self.header(out, host, (KERN, sev), "kernel", 0);
        self.uptime(out, host);
        let user = self.any_user();
        let vars = Vars {
            user,
            pid: self.pid(),
            n: self.rng.range(1, 9),
            m: self.rng.range(2, 30),
            port: self.rng.pick(&[443, 80, 8080, 5432]),
            ts: self.civil.unix as u64,
            s: self.rng.pick(PROCESSES),
            t: self.rng.pick(LIBS),
            ..Vars::default()
        };
        match pick {
            0..=2 => {
                let vars = Vars {
                    n: self.rng.range(2_000_000, 16_000_000),
                    m: self.rng.range(1_000_000, 8_000_000),
                    port: self.rng.range(2_000, 30_000),
                    ..vars
                };
                self.text(out, KERNEL_OOM, &vars);
            }
            3..=4 => self.segfault(out, &vars),
            _ => {
                let vars = Vars {
                    n: self.rng.range(1, 4),
                    ..vars
                };
                let tpl = self.rng.pick(KERNEL);
                self.text(out, tpl, &vars);
            }
        }
    }

    /// `comm[pid]: segfault at ADDR ip IP sp SP error E in LIB[BASE+SIZE]`, with the faulting
    /// instruction inside the reported mapping as in real reports.
    fn segfault(&mut self, out: &mut Vec<u8>, vars: &Vars) {
        let base = 0x7f00_0000_0000 | (self.rng.below(0xff_ffff) << 20);
        let size = 0x1c_5000;
        let ip = base + self.rng.below(size);
        self.text(out, "{s}[{pid}]: segfault at ", vars);
        if self.rng.chance(600) {
            out.push(b'0');
        } else {
            emit::hex(out, self.rng.below(1 << 47), 12);
        }
        out.extend_from_slice(b" ip ");
        emit::hex(out, ip, 16);
        out.extend_from_slice(b" sp ");
        emit::hex(out, 0x7ffc_0000_0000 | self.rng.below(1 << 34), 16);
        out.extend_from_slice(b" error ");
        emit::u64(out, self.rng.pick(&[4, 6, 14]));
        out.extend_from_slice(b" in ");
        out.extend_from_slice(vars.t.as_bytes());
        out.push(b'[');
        emit::hex(out, base, 12);
        out.extend_from_slice(b"+1c5000]");
    }

    fn firewall(&mut self, out: &mut Vec<u8>) {
        let on_gateway = self.rng.chance(600);
        let host = if on_gateway {
            self.rng.pick(&self.gateways)
        } else {
            self.rng.pick(&self.exposed)
        };
        self.header(out, host, (KERN, WARNING), "kernel", 0);
        self.uptime(out, host);
        let outbound = on_gateway && self.rng.chance(200);
        let (src, dst) = if outbound {
            let u = self.any_user();
            (self.world.users[u].ws_ip, self.external().ip)
        } else {
            let src = match self.rng.below(10) {
                0..=5 => self.rng.pick(&self.world.hostile).ip,
                _ => self.external().ip,
            };
            let dst = if on_gateway {
                let web = self.rng.pick(&self.exposed);
                self.world.hosts[web].ip
            } else {
                self.world.hosts[host].ip
            };
            (src, dst)
        };
        out.extend_from_slice(match (on_gateway, outbound) {
            (false, _) => b"[UFW BLOCK] IN=eth0 OUT= MAC=",
            (true, false) => b"IPTABLES-DROP: IN=eth0 OUT= MAC=",
            (true, true) => b"FW-ACCEPT: IN=eth1 OUT=eth0 MAC=",
        });
        // Destination MAC (our NIC, derived from its address), source MAC (upstream router),
        // EtherType IPv4.
        let hip = self.world.hosts[host].ip;
        out.extend_from_slice(b"52:54:00");
        for b in &hip[1..] {
            out.push(b':');
            emit::hex(out, u64::from(*b), 2);
        }
        out.extend_from_slice(b":00:1c:73:a1:4e:02:08:00 SRC=");
        emit::ipv4(out, src);
        out.extend_from_slice(b" DST=");
        emit::ipv4(out, dst);
        let proto = self.rng.below(20);
        let len = match proto {
            0..=15 => 60,
            16..=18 => self.rng.range(40, 120),
            _ => 84,
        };
        out.extend_from_slice(b" LEN=");
        emit::u64(out, len);
        out.extend_from_slice(b" TOS=0x00 PREC=0x00 TTL=");
        emit::u64(out, self.rng.pick(&[52, 64, 113, 117, 242, 49]));
        out.extend_from_slice(b" ID=");
        emit::u64(out, self.rng.below(65_536));
        if self.rng.chance(600) {
            out.extend_from_slice(b" DF");
        }
        let spt = self.client_port();
        let dpt = if outbound {
            self.rng.pick(&[443, 443, 443, 80, 53, 123, 22])
        } else {
            u64::from(self.rng.weighted(SCANNED_PORTS))
        };
        match proto {
            0..=15 => {
                out.extend_from_slice(b" PROTO=TCP SPT=");
                emit::u64(out, spt);
                out.extend_from_slice(b" DPT=");
                emit::u64(out, dpt);
                out.extend_from_slice(b" WINDOW=");
                emit::u64(out, self.rng.pick(&[1024, 29_200, 64_240, 65_535]));
                out.extend_from_slice(b" RES=0x00 SYN URGP=0");
            }
            16..=18 => {
                out.extend_from_slice(b" PROTO=UDP SPT=");
                emit::u64(out, spt);
                out.extend_from_slice(b" DPT=");
                emit::u64(out, self.rng.pick(&[53, 123, 161, 1900, 5060, 11211]));
                out.extend_from_slice(b" LEN=");
                emit::u64(out, len - 20);
            }
            _ => {
                out.extend_from_slice(b" PROTO=ICMP TYPE=8 CODE=0 ID=");
                emit::u64(out, self.rng.below(65_536));
                out.extend_from_slice(b" SEQ=");
                emit::u64(out, self.rng.range(1, 20));
            }
        }
    }

    fn web_access(&mut self, out: &mut Vec<u8>) {
        let host = self.rng.pick(&self.web);
        let who = self.rng.below(100);
        if who < 2 {
            // A one-off probe outside any burst.
            let src = self.rng.pick(&self.world.hostile);
            self.header(out, host, (LOCAL7, INFO), "nginx", 0);
            self.scan_request(out, src.ip);
            return;
        }
        self.header(out, host, (LOCAL7, INFO), "nginx", 0);
        let (ip, remote_user) = match who {
            2..=66 => (self.external().ip, None),
            67..=93 => {
                let u = self.any_user();
                let named = self.rng.chance(150);
                (self.world.users[u].ws_ip, named.then_some(u))
            }
            _ => {
                let m = self.rng.pick(&self.monitors);
                // Health probes: fixed path and agent.
                emit::ipv4(out, self.world.hosts[m].ip);
                out.extend_from_slice(b" - - [");
                self.civil.clf(out);
                out.extend_from_slice(b"] \"GET /healthz HTTP/1.1\" 200 2 \"-\" \"");
                out.extend_from_slice(if self.rng.chance(500) {
                    b"kube-probe/1.29"
                } else {
                    b"Prometheus/2.51.2"
                });
                out.push(b'"');
                return;
            }
        };
        emit::ipv4(out, ip);
        out.extend_from_slice(b" - ");
        match remote_user {
            Some(u) => out.extend_from_slice(self.world.users[u].login.as_bytes()),
            None => out.push(b'-'),
        }
        out.extend_from_slice(b" [");
        self.civil.clf(out);
        out.extend_from_slice(b"] \"");
        let method = self.rng.weighted(METHODS);
        out.extend_from_slice(method.as_bytes());
        out.push(b' ');
        let path = self.rng.weighted(PATHS);
        let vars = Vars {
            n: self.rng.log_uniform(1, 250_000),
            m: self.rng.range(1, 40),
            s: self.rng.pick(&["3f9a1c2e", "b71d04aa", "9e0c55f3"]),
            ..Vars::default()
        };
        self.text(out, path, &vars);
        out.extend_from_slice(if self.rng.chance(300) {
            b" HTTP/2.0\" "
        } else {
            b" HTTP/1.1\" "
        });
        let is_static = path.starts_with("/static") || path.starts_with("/images");
        let status = match self.rng.below(1000) {
            0..=819 => 200,
            820..=889 if is_static => 304,
            820..=849 if method == "POST" => 201,
            820..=899 => 404,
            900..=939 => 301,
            940..=969 if !is_static => 401,
            940..=969 => 200,
            970..=979 => 403,
            980..=989 => 499,
            990..=995 => 500,
            _ => 502,
        };
        emit::u64(out, status);
        out.push(b' ');
        let bytes = match status {
            304 | 499 => 0,
            301 => 169,
            404 => 153,
            502 => 157,
            _ if is_static => self.rng.log_uniform(800, 900_000),
            _ => self.rng.log_uniform(60, 60_000),
        };
        emit::u64(out, bytes);
        out.extend_from_slice(b" \"");
        if self.rng.chance(400) {
            out.extend_from_slice(self.rng.pick(REFERERS).as_bytes());
        } else {
            out.push(b'-');
        }
        out.extend_from_slice(b"\" \"");
        let ua = BROWSERS[self.rng.skewed(BROWSERS.len())];
        out.extend_from_slice(ua.as_bytes());
        out.push(b'"');
    }

    fn web_scan_line(&mut self, out: &mut Vec<u8>) {
        let mut c = self.web_scan.take().expect("campaign running");
        c.step(&mut self.rng);
        self.header(out, c.target, (LOCAL7, INFO), "nginx", 0);
        self.scan_request(out, c.src.ip);
        if c.left > 0 {
            self.web_scan = Some(c);
        }
    }

    /// An nginx line for a vulnerability probe. nginx escapes `"` and binary bytes as `\xHH`,
    /// which is why the TLS-on-plain-HTTP probe is written that way.
    fn scan_request(&mut self, out: &mut Vec<u8>, src: [u8; 4]) {
        emit::ipv4(out, src);
        out.extend_from_slice(b" - - [");
        self.civil.clf(out);
        out.extend_from_slice(b"] \"");
        let status = if self.rng.chance(60) {
            out.extend_from_slice(b"\\x16\\x03\\x01\\x00\\xF4\\x01\\x00\\x00\\xF0\\x03\\x03");
            400
        } else {
            out.extend_from_slice(if self.rng.chance(850) {
                b"GET "
            } else {
                b"POST "
            });
            out.extend_from_slice(self.rng.pick(SCAN_PATHS).as_bytes());
            out.extend_from_slice(b" HTTP/1.1");
            self.rng.pick(&[404, 404, 404, 404, 403, 400, 301, 200])
        };
        out.extend_from_slice(b"\" ");
        emit::u64(out, status);
        out.push(b' ');
        emit::u64(
            out,
            match status {
                404 => 153,
                403 => 555,
                400 => 157,
                301 => 169,
                _ => self.rng.range(600, 9_000),
            },
        );
        out.extend_from_slice(b" \"-\" \"");
        out.extend_from_slice(self.rng.pick(SCANNER_AGENTS).as_bytes());
        out.push(b'"');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::Role;

    #[test]
    fn every_template_expands() {
        // Runs every template through the filler so an unknown placeholder fails here rather
        // than in the middle of a load run.
        let t = Traffic::new(0);
        let vars = Vars::default();
        let mut out = Vec::new();
        let all = SSH_FAIL_HOSTILE
            .iter()
            .chain(SSH_FAIL_USER)
            .chain(SSH_SESSION)
            .chain(SYSTEMD)
            .chain(SYSTEMD_FAIL)
            .chain(KERNEL)
            .chain([KERNEL_OOM].iter())
            .chain(PATHS.iter().map(|(_, p)| p));
        for tpl in all {
            out.clear();
            t.text(&mut out, tpl, &vars);
            assert!(!out.contains(&b'{'), "{tpl}");
        }
    }

    #[test]
    fn firewall_lines_look_like_netfilter() {
        let mut t = Traffic::new(3);
        t.tick(1_717_243_200);
        let mut out = Vec::new();
        for _ in 0..200 {
            out.clear();
            t.firewall(&mut out);
            let s = std::str::from_utf8(&out).unwrap();
            for f in [
                " IN=", " OUT=", " MAC=", " SRC=", " DST=", " LEN=", " PROTO=",
            ] {
                assert!(s.contains(f), "{f} in {s}");
            }
            assert!(s.contains("kernel: [") || s.contains(" kernel - "), "{s}");
        }
    }

    #[test]
    fn roles_are_respected() {
        let t = Traffic::new(0);
        assert!(t.web.iter().all(|&h| t.world.hosts[h].role == Role::Web));
        assert!(!t.linux.iter().any(|&h| t.world.hosts[h].role.is_windows()));
    }
}
