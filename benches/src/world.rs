//! The simulated organisation: its users, hosts and the outside world they talk to.
//!
//! The population is built from a fixed seed, independent of the traffic seed, so every
//! connection of a load run (each with its own traffic seed) describes the same company: the same
//! ~200 users log into the same ~50 hosts from the same workstations. Entity extraction and
//! baselining only make sense if entities recur across the whole stream.

use crate::rng::Rng;
use std::collections::HashSet;

/// Seed of the population; changing it changes every name in every run, so it is a constant.
const WORLD_SEED: u64 = 0x5741_5443_4850_4f53; // "WATCHPOS"

/// What a host does, which decides the kinds of log it emits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// nginx front ends, exposed to the internet.
    Web,
    /// Application servers.
    App,
    /// Databases.
    Db,
    /// SSH jump hosts, exposed to the internet.
    Bastion,
    /// CI runners.
    Ci,
    /// Mail relays.
    Mail,
    /// Edge firewalls/routers logging packet filter decisions.
    Gateway,
    /// Kubernetes nodes.
    K8s,
    /// Monitoring.
    Monitor,
    /// Windows domain controllers.
    WinDc,
    /// Windows member servers.
    WinSrv,
    /// Windows workstations.
    WinWs,
}

impl Role {
    /// Windows hosts report through the event log (JSON), not syslog.
    pub fn is_windows(self) -> bool {
        matches!(self, Role::WinDc | Role::WinSrv | Role::WinWs)
    }
}

/// A machine of the organisation.
#[derive(Clone, Debug)]
pub struct Host {
    /// Short host name as syslog prints it (`web-01`, `WS-0142`).
    pub name: String,
    /// Its internal address.
    pub ip: [u8; 4],
    /// What it does.
    pub role: Role,
    /// Seconds between boot and the Unix epoch offset used for kernel uptimes, so a host's uptime
    /// grows consistently across its lines.
    pub boot_offset: i64,
    /// Whether its syslog daemon forwards in RFC 5424 rather than RFC 3164: a real fleet is mixed
    /// but each host is consistent.
    pub rfc5424: bool,
}

/// A person with an account.
#[derive(Clone, Debug)]
pub struct User {
    /// ASCII login (`jsmith`, `maria.garcia`).
    pub login: String,
    /// Display name, possibly non-ASCII (`María García`).
    pub full_name: String,
    /// POSIX uid.
    pub uid: u32,
    /// Windows RID, for the SID.
    pub rid: u32,
    /// Address of the user's workstation or VPN lease.
    pub ws_ip: [u8; 4],
    /// Index into [`World::hosts`] of the user's Windows workstation.
    pub workstation: usize,
    /// Whether the user is an operator with shell access and sudo rights.
    pub admin: bool,
    /// Department, for application events.
    pub department: &'static str,
}

/// An address outside the organisation.
#[derive(Clone, Copy, Debug)]
pub struct External {
    /// Public IPv4 address.
    pub ip: [u8; 4],
    /// ISO country code, for geo fields.
    pub country: &'static str,
}

/// The whole population.
#[derive(Clone, Debug)]
pub struct World {
    /// All hosts, Linux and Windows.
    pub hosts: Vec<Host>,
    /// All human users; lower indices are the more active ones.
    pub users: Vec<User>,
    /// Indices of users with `admin`.
    pub admins: Vec<usize>,
    /// Customers and partners: benign outside addresses.
    pub external: Vec<External>,
    /// Addresses that scan and brute-force: a small set, so they recur as the noisy IPs a real
    /// perimeter sees every day.
    pub hostile: Vec<External>,
}

/// (display, login) pairs, so logins stay ASCII while display names keep their accents.
const FIRST: &[(&str, &str)] = &[
    ("Alice", "alice"),
    ("Bob", "bob"),
    ("Carol", "carol"),
    ("David", "david"),
    ("Emma", "emma"),
    ("Farid", "farid"),
    ("Grace", "grace"),
    ("Hiroshi", "hiroshi"),
    ("Ines", "ines"),
    ("James", "james"),
    ("Karin", "karin"),
    ("Liam", "liam"),
    ("María", "maria"),
    ("Noah", "noah"),
    ("Olga", "olga"),
    ("Priya", "priya"),
    ("Quentin", "quentin"),
    ("Rosa", "rosa"),
    ("Sven", "sven"),
    ("Tomás", "tomas"),
    ("Uma", "uma"),
    ("Victor", "victor"),
    ("Wei", "wei"),
    ("Xavier", "xavier"),
    ("Yuki", "yuki"),
    ("Zoë", "zoe"),
    ("Ahmed", "ahmed"),
    ("Björn", "bjorn"),
    ("Chloé", "chloe"),
    ("Dmitri", "dmitri"),
    ("Elena", "elena"),
    ("François", "francois"),
    ("Giulia", "giulia"),
    ("Hannah", "hannah"),
    ("Ivan", "ivan"),
    ("Jürgen", "juergen"),
    ("Kofi", "kofi"),
    ("Lena", "lena"),
    ("Mohammed", "mohammed"),
    ("Nadia", "nadia"),
    ("Oscar", "oscar"),
    ("Paul", "paul"),
    ("Rahul", "rahul"),
    ("Sara", "sara"),
    ("Thomas", "thomas"),
    ("Łukasz", "lukasz"),
];

const LAST: &[(&str, &str)] = &[
    ("Smith", "smith"),
    ("Johnson", "johnson"),
    ("Williams", "williams"),
    ("Brown", "brown"),
    ("Jones", "jones"),
    ("García", "garcia"),
    ("Miller", "miller"),
    ("Davis", "davis"),
    ("Müller", "mueller"),
    ("Schmidt", "schmidt"),
    ("Nguyen", "nguyen"),
    ("Kim", "kim"),
    ("Patel", "patel"),
    ("Tanaka", "tanaka"),
    ("Rossi", "rossi"),
    ("Dubois", "dubois"),
    ("Kowalski", "kowalski"),
    ("Novak", "novak"),
    ("Ivanov", "ivanov"),
    ("Silva", "silva"),
    ("Hansen", "hansen"),
    ("Jensen", "jensen"),
    ("Okafor", "okafor"),
    ("Chen", "chen"),
    ("Wang", "wang"),
    ("Singh", "singh"),
    ("O'Brien", "obrien"),
    ("Fischer", "fischer"),
    ("Weber", "weber"),
    ("Martin", "martin"),
    ("Lopez", "lopez"),
    ("Andersson", "andersson"),
    ("Søndergaard", "sondergaard"),
    ("Yilmaz", "yilmaz"),
    ("Cohen", "cohen"),
    ("Haddad", "haddad"),
    ("Moreau", "moreau"),
    ("Bianchi", "bianchi"),
    ("Sato", "sato"),
    ("Park", "park"),
];

const DEPARTMENTS: &[&str] = &[
    "engineering",
    "engineering",
    "engineering",
    "sales",
    "support",
    "finance",
    "marketing",
    "hr",
    "operations",
    "legal",
];

const COUNTRIES: &[&str] = &[
    "US", "US", "US", "DE", "DE", "GB", "FR", "NL", "CA", "JP", "BR", "IN", "ES", "IT", "SE", "PL",
    "AU",
];

const HOSTILE_COUNTRIES: &[&str] = &["CN", "RU", "VN", "BR", "IN", "US", "NL", "KR", "IR", "RO"];

/// (name prefix, count, role, subnet third octet)
const FLEET: &[(&str, u32, Role, u8)] = &[
    ("web-", 6, Role::Web, 10),
    ("app-", 8, Role::App, 11),
    ("db-", 3, Role::Db, 12),
    ("bastion-", 2, Role::Bastion, 1),
    ("ci-runner-", 3, Role::Ci, 13),
    ("mail-", 2, Role::Mail, 14),
    ("fw-edge-", 2, Role::Gateway, 254),
    ("k8s-node-", 8, Role::K8s, 15),
    ("mon-", 2, Role::Monitor, 16),
    ("DC", 2, Role::WinDc, 30),
    ("FS", 2, Role::WinSrv, 30),
];

impl World {
    /// The one population every [`crate::Traffic`] shares.
    pub fn build() -> Self {
        let mut rng = Rng::new(WORLD_SEED);
        let mut hosts = Vec::new();
        for &(prefix, count, role, net) in FLEET {
            for n in 1..=count {
                hosts.push(Host {
                    name: format!("{prefix}{n:02}"),
                    ip: [10, 0, net, 10 + n as u8],
                    role,
                    boot_offset: rng.range(86_400, 90 * 86_400) as i64,
                    rfc5424: rng.chance(300),
                });
            }
        }
        // Windows workstations: a dozen shared/assigned desktops; users map onto them.
        let first_ws = hosts.len();
        for _ in 0..12 {
            let tag = rng.range(100, 999);
            hosts.push(Host {
                name: format!("WS-{tag:04}"),
                ip: [10, 20, 1, rng.range(10, 250) as u8],
                role: Role::WinWs,
                boot_offset: rng.range(3_600, 14 * 86_400) as i64,
                rfc5424: false,
            });
        }
        let workstations = hosts.len() - first_ws;

        let mut users = Vec::new();
        let mut seen = HashSet::new();
        while users.len() < 200 {
            let (fd, fl) = rng.pick(FIRST);
            let (ld, ll) = rng.pick(LAST);
            let login = match rng.below(5) {
                0..=2 => format!("{}{ll}", &fl[..1]),
                3 => format!("{fl}.{ll}"),
                _ => format!("{fl}{}", &ll[..1]),
            };
            if !seen.insert(login.clone()) {
                continue;
            }
            let i = users.len() as u32;
            users.push(User {
                login,
                full_name: format!("{fd} {ld}"),
                uid: 1001 + i,
                rid: 1104 + i,
                // VPN/office DHCP range: 10.20.2.0/23, distinct per user.
                ws_ip: [10, 20, 2 + (i / 200) as u8, 20 + (i % 200) as u8],
                workstation: first_ws + rng.index(workstations),
                admin: false,
                department: rng.pick(DEPARTMENTS),
            });
        }
        // Operators: spread over the activity ranking so some busy and some quiet users have
        // shell access.
        let mut admins = Vec::new();
        for i in (0..users.len()).step_by(13) {
            users[i].admin = true;
            users[i].department = "operations";
            admins.push(i);
        }

        let external = (0..80)
            .map(|_| External {
                ip: public_ip(&mut rng),
                country: rng.pick(COUNTRIES),
            })
            .collect();
        let hostile = (0..16)
            .map(|_| External {
                ip: public_ip(&mut rng),
                country: rng.pick(HOSTILE_COUNTRIES),
            })
            .collect();
        World {
            hosts,
            users,
            admins,
            external,
            hostile,
        }
    }

    /// Indices of hosts with one of `roles`.
    pub fn hosts_with(&self, roles: &[Role]) -> Vec<usize> {
        (0..self.hosts.len())
            .filter(|&i| roles.contains(&self.hosts[i].role))
            .collect()
    }
}

/// A random globally routable-looking IPv4 address (no private, loopback, link-local, CGNAT,
/// multicast or reserved space), so entity extraction classifies it as external.
pub(crate) fn public_ip(rng: &mut Rng) -> [u8; 4] {
    loop {
        let ip = (rng.next_u64() as u32).to_be_bytes();
        let private = match ip[0] {
            0 | 10 | 127 | 224..=255 => true,
            100 => (64..128).contains(&ip[1]),
            169 => ip[1] == 254,
            172 => (16..32).contains(&ip[1]),
            192 => ip[1] == 168 || (ip[1] == 0 && ip[2] == 2),
            198 => ip[1] == 18 || ip[1] == 19 || (ip[1] == 51 && ip[2] == 100),
            203 => ip[1] == 0 && ip[2] == 113,
            _ => false,
        };
        if !private && ip[3] != 0 && ip[3] != 255 {
            return ip;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn population_is_fixed_and_sized() {
        let a = World::build();
        let b = World::build();
        assert_eq!(a.users.len(), 200);
        assert!((45..=55).contains(&a.hosts.len()), "{}", a.hosts.len());
        assert_eq!(a.users[17].login, b.users[17].login);
        assert!(a.users.iter().all(|u| u.login.is_ascii()));
        assert!(!a.admins.is_empty());
        let logins: HashSet<_> = a.users.iter().map(|u| &u.login).collect();
        assert_eq!(logins.len(), 200);
    }
}
