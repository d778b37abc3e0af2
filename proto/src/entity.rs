//! Entity identity: kinds, canonical names and UUID5 ids.
//!
//! An entity (an IP address, a user, a host, a domain) must get the same id whichever log mentions
//! it and however the log spells it, and other tools must be able to compute that id themselves. So
//! the id is a UUID5 over a fixed, documented namespace per kind, taken over a canonical spelling of
//! the name. The namespaces are themselves UUID5s of the DNS-free names `watchpost.entity.<kind>`
//! under the RFC 4122 URL namespace; `docs/entities.md` lists their values.

use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::net::IpAddr;
use std::sync::OnceLock;
use uuid::Uuid;

/// The kinds of entity the service tracks.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
#[repr(u8)]
pub enum EntityKind {
    /// An IPv4 or IPv6 address.
    Ip = 0,
    /// A user or service account.
    User = 1,
    /// A host name.
    Host = 2,
    /// A DNS domain.
    Domain = 3,
}

impl EntityKind {
    /// Every kind, in id order.
    pub const ALL: [EntityKind; 4] = [
        EntityKind::Ip,
        EntityKind::User,
        EntityKind::Host,
        EntityKind::Domain,
    ];

    /// The lower-case name used in the API and in the namespace names.
    pub fn name(self) -> &'static str {
        match self {
            EntityKind::Ip => "ip",
            EntityKind::User => "user",
            EntityKind::Host => "host",
            EntityKind::Domain => "domain",
        }
    }

    /// The inverse of `kind as u8`.
    pub fn from_u8(value: u8) -> Option<EntityKind> {
        EntityKind::ALL.get(value as usize).copied()
    }

    /// The UUID5 namespace of this kind.
    pub fn namespace(self) -> Uuid {
        static NS: OnceLock<[Uuid; 4]> = OnceLock::new();
        NS.get_or_init(|| {
            EntityKind::ALL.map(|k| {
                Uuid::new_v5(
                    &Uuid::NAMESPACE_URL,
                    format!("watchpost.entity.{}", k.name()).as_bytes(),
                )
            })
        })[self as usize]
    }
}

/// Writes the canonical spelling of `raw` as an entity of `kind` into `out` (cleared first) and
/// returns whether `raw` is a valid name of that kind. Writes into a caller's buffer so that the hot
/// path can canonicalise without allocating.
///
/// - ip: parsed; IPv4 dotted quad; IPv4-mapped IPv6 becomes IPv4; other IPv6 fully expanded,
///   lower-case (`2001:0db8:0000:0000:0000:0000:0000:0001`); a `%zone` suffix is dropped.
/// - host, domain: lower-case, trailing dot removed.
/// - user: lower-case; `DOMAIN\user` and `user@domain` both become `user@domain`.
pub fn canonicalize_into(kind: EntityKind, raw: &str, out: &mut String) -> bool {
    out.clear();
    let raw = raw.trim();
    if raw.is_empty() || raw == "-" {
        return false;
    }
    match kind {
        EntityKind::Ip => {
            let addr = raw.split('%').next().unwrap_or(raw);
            let addr = addr.trim_start_matches('[').trim_end_matches(']');
            match addr.parse::<IpAddr>() {
                Ok(IpAddr::V4(v4)) => {
                    let _ = write!(out, "{v4}");
                }
                Ok(IpAddr::V6(v6)) => {
                    if let Some(v4) = v6.to_ipv4_mapped() {
                        let _ = write!(out, "{v4}");
                    } else {
                        for (i, seg) in v6.segments().iter().enumerate() {
                            if i > 0 {
                                out.push(':');
                            }
                            let _ = write!(out, "{seg:04x}");
                        }
                    }
                }
                Err(_) => return false,
            }
        }
        EntityKind::Host | EntityKind::Domain => {
            let name = raw.strip_suffix('.').unwrap_or(raw);
            if name.is_empty() || name.bytes().any(|b| b.is_ascii_whitespace()) {
                return false;
            }
            push_lower(out, name);
        }
        EntityKind::User => {
            if let Some((domain, user)) = raw.split_once('\\') {
                if user.is_empty() {
                    return false;
                }
                push_lower(out, user);
                if !domain.is_empty() {
                    out.push('@');
                    push_lower(out, domain);
                }
            } else {
                push_lower(out, raw);
            }
        }
    }
    true
}

fn push_lower(out: &mut String, s: &str) {
    for c in s.chars() {
        if c.is_ascii() {
            out.push(c.to_ascii_lowercase());
        } else {
            out.extend(c.to_lowercase());
        }
    }
}

/// The UUID5 of an already canonical name.
pub fn entity_uuid(kind: EntityKind, canonical: &str) -> Uuid {
    Uuid::new_v5(&kind.namespace(), canonical.as_bytes())
}

/// Canonicalises `raw` and returns its UUID5, or `None` when it is not a valid name of `kind`.
pub fn entity_uuid_of(kind: EntityKind, raw: &str) -> Option<Uuid> {
    let mut buf = String::new();
    canonicalize_into(kind, raw, &mut buf).then(|| entity_uuid(kind, &buf))
}

/// An entity as the API shows it on an event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EntityRef {
    /// What kind of entity.
    pub kind: EntityKind,
    /// Where it appeared: `source`, `destination`, `subject`, `target` or `other`.
    pub role: String,
    /// The canonical name.
    pub value: String,
    /// UUID5 of the canonical name in the kind's namespace.
    pub uuid: Uuid,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(kind: EntityKind, raw: &str) -> Option<String> {
        let mut s = String::new();
        canonicalize_into(kind, raw, &mut s).then_some(s)
    }

    #[test]
    fn canonical_spellings() {
        assert_eq!(
            canon(EntityKind::Ip, "10.0.0.5").as_deref(),
            Some("10.0.0.5")
        );
        assert_eq!(
            canon(EntityKind::Ip, "2001:db8::1").as_deref(),
            Some("2001:0db8:0000:0000:0000:0000:0000:0001")
        );
        assert_eq!(
            canon(EntityKind::Ip, "::ffff:1.2.3.4").as_deref(),
            Some("1.2.3.4")
        );
        assert_eq!(
            canon(EntityKind::Ip, "fe80::1%eth0").as_deref(),
            Some("fe80:0000:0000:0000:0000:0000:0000:0001")
        );
        assert_eq!(canon(EntityKind::Ip, "999.1.1.1"), None);
        assert_eq!(
            canon(EntityKind::Host, "Web-01.Example.COM.").as_deref(),
            Some("web-01.example.com")
        );
        assert_eq!(
            canon(EntityKind::User, "CORP\\Alice").as_deref(),
            Some("alice@corp")
        );
        assert_eq!(
            canon(EntityKind::User, "alice@CORP").as_deref(),
            Some("alice@corp")
        );
        assert_eq!(canon(EntityKind::User, "-"), None);
    }

    #[test]
    fn ids_agree_across_spellings_and_differ_across_kinds() {
        let a = entity_uuid_of(EntityKind::User, "CORP\\alice").unwrap();
        let b = entity_uuid_of(EntityKind::User, "Alice@corp").unwrap();
        assert_eq!(a, b);
        assert_eq!(a.get_version_num(), 5);
        let h = entity_uuid_of(EntityKind::Host, "alice@corp").unwrap();
        assert_ne!(a, h);
    }

    #[test]
    fn namespaces_are_pinned() {
        // Other tools compute ids from these values (docs/entities.md): they must never change.
        // Computed independently with Python: uuid.uuid5(uuid.NAMESPACE_URL, "watchpost.entity.ip").
        let ns: Vec<String> = EntityKind::ALL
            .iter()
            .map(|k| k.namespace().to_string())
            .collect();
        assert_eq!(
            ns,
            vec![
                "2b241331-0d72-50a6-8c82-7b81da5351a3",
                "1da69596-4388-52d2-b8c9-93f5c8e7973d",
                "e433e1f3-dddf-5d06-ba44-1dc2510b5011",
                "c34a261e-09c1-5c43-b8c3-f8a6b3c2e7c6",
            ]
        );
        assert_eq!(
            entity_uuid(EntityKind::Ip, "10.0.0.5").to_string(),
            "ccd27fa8-8a9b-57bb-b798-be1d61a08b23"
        );
        assert_eq!(
            entity_uuid_of(EntityKind::User, "Alice")
                .unwrap()
                .to_string(),
            "cc992b5a-a9fe-576e-a7b3-de0b923acae1"
        );
    }
}

/// Where an entity appeared in the event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Role {
    /// Origin of the activity (client address, `source.ip`).
    Source = 0,
    /// Target address or host (`destination.ip`).
    Destination = 1,
    /// The acting user.
    Subject = 2,
    /// The user acted upon (sudo's `USER=`, `TargetUserName`).
    Target = 3,
    /// Mentioned otherwise.
    Other = 4,
    /// The host that produced the event.
    Reporter = 5,
}

impl Role {
    /// Name in API output.
    pub fn name(self) -> &'static str {
        match self {
            Role::Source => "source",
            Role::Destination => "destination",
            Role::Subject => "subject",
            Role::Target => "target",
            Role::Other => "other",
            Role::Reporter => "reporter",
        }
    }

    /// Inverse of `as u8`; unknown values read as `Other`.
    pub fn from_u8(value: u8) -> Role {
        match value {
            0 => Role::Source,
            1 => Role::Destination,
            2 => Role::Subject,
            3 => Role::Target,
            5 => Role::Reporter,
            _ => Role::Other,
        }
    }
}
