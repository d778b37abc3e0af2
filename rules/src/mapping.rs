//! Logsource and field mappings: which events a rule's `logsource` covers, and where a Sigma field
//! name is found in Watchpost's event record.
//!
//! Both are data, in `rules/mappings/` (embedded into the binary), so supporting a new log shape is
//! an edit of YAML, not of code. Field references starting with `@` name the record's own fields:
//! `@source`, `@host`, `@message`; any other name is an attribute (a producer's field, flattened
//! with dots). See `docs/sigma.md` for the tables.

use crate::rule::{Body, Logsource, Rule};
use crate::yaml::{Node, parse_documents};
use std::collections::HashMap;

/// The bundled logsource table.
pub const BUNDLED_LOGSOURCES: &str = include_str!("../mappings/logsources.yml");
/// `product/service/category` of a logsource, the parts it names.
fn logsource_name(l: &Logsource) -> String {
    let parts: Vec<&str> = l.parts().map(|(_, v)| v).collect();
    if parts.is_empty() {
        "any".into()
    } else {
        parts.join("/")
    }
}

/// The bundled field table.
pub const BUNDLED_FIELDS: &str = include_str!("../mappings/fields.yml");

/// Where a value is read from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FieldSource {
    /// An attribute by its flattened name.
    Attr(Box<str>),
    /// The record's `source`.
    Source,
    /// The record's `host`.
    Host,
    /// The record's `message`.
    Message,
    /// An attribute whose values are spelled otherwise than the Sigma field's: Security 4688's
    /// `MandatoryLabel` is `S-1-16-12288` where Sysmon's `IntegrityLevel` is `High`. A value in
    /// the table reads as its translation (case-insensitive); any other as it is.
    Translated {
        /// Attribute name.
        name: Box<str>,
        /// (the producer's value, the value Sigma rules use), interned: see [`intern`].
        values: Box<[(Box<str>, &'static str)]>,
    },
    /// The first entity of a kind (`ip`, `user`, `host`...), with a role (`source`,
    /// `destination`...) or any: `@entity.ip.source`. Free-text logs (an sshd line) carry their
    /// addresses and accounts only as entities, and correlations group by them.
    Entity {
        /// Entity kind name.
        kind: Box<str>,
        /// Role name; `None` for any role.
        role: Option<Box<str>>,
    },
}

impl FieldSource {
    fn of(name: &str) -> FieldSource {
        match name {
            "@source" => FieldSource::Source,
            "@host" => FieldSource::Host,
            "@message" => FieldSource::Message,
            other => match other.strip_prefix("@entity.") {
                Some(rest) => {
                    let (kind, role) = match rest.split_once('.') {
                        Some((k, r)) => (k, Some(r.into())),
                        None => (rest, None),
                    };
                    FieldSource::Entity {
                        kind: kind.into(),
                        role,
                    }
                }
                None => FieldSource::Attr(other.into()),
            },
        }
    }
}

/// `text` with the process's lifetime, one copy per distinct text: a translated value is handed
/// out in place of the event's own, so it must outlive every event, and a mapping read again at
/// each rule reload must not grow memory.
fn intern(text: &str) -> &'static str {
    use std::collections::HashSet;
    use std::sync::{Mutex, OnceLock};
    static TEXTS: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut texts = TEXTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    match texts.get(text) {
        Some(known) => known,
        None => {
            let leaked: &'static str = Box::leak(text.to_string().into_boxed_str());
            texts.insert(leaked);
            leaked
        }
    }
}

/// One place a Sigma field is looked for: a name as [`FieldSource::of`] reads it, with the
/// translations of its values when the producer spells them otherwise.
#[derive(Clone, Debug)]
struct Alias {
    name: String,
    values: Vec<(String, String)>,
}

impl Alias {
    fn source(&self) -> FieldSource {
        if self.values.is_empty() {
            return FieldSource::of(&self.name);
        }
        FieldSource::Translated {
            name: self.name.as_str().into(),
            values: self
                .values
                .iter()
                .map(|(from, to)| (from.as_str().into(), intern(to)))
                .collect(),
        }
    }

    /// A list item of `fields.yml`: a name, or a one-key mapping of a name to its translations.
    fn read(item: &Node) -> Result<Alias, MappingError> {
        if let Some(name) = item.as_str() {
            return Ok(Alias {
                name: name.to_string(),
                values: Vec::new(),
            });
        }
        let bad = || {
            MappingError(format!(
                "line {}: an alias is a name, or a name mapped to its values' translations \
                 (`MandatoryLabel: {{'S-1-16-12288': 'High'}}`)",
                item.pos.line
            ))
        };
        let [(name, table)] = item.as_map().ok_or_else(bad)? else {
            return Err(bad());
        };
        let name = name.as_str().ok_or_else(bad)?;
        let values = table
            .as_map()
            .ok_or_else(bad)?
            .iter()
            .map(|(from, to)| match (from.as_str(), to.as_str()) {
                (Some(from), Some(to)) => Ok((from.to_string(), to.to_string())),
                _ => Err(bad()),
            })
            .collect::<Result<_, _>>()?;
        Ok(Alias {
            name: name.to_string(),
            values,
        })
    }
}

/// One way a logsource shows in events: every field listed must have one of its values.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Shape(pub Vec<(Vec<FieldSource>, Vec<String>)>);

/// An entry of the logsource table.
#[derive(Clone, Debug)]
pub struct LogsourceEntry {
    product: Option<String>,
    service: Option<String>,
    category: Option<String>,
    /// Alternatives; empty means every event.
    shapes: Vec<Shape>,
    /// The attributes its events carry, when the entry says (`fields:`, names or `prefix.*`):
    /// logs that arrive as text lines have the record's own fields, their entities and the
    /// syslog header's attributes, nothing else. `None`: any producer field may be there.
    fields: Option<Vec<String>>,
}

/// Both tables.
#[derive(Clone, Debug)]
pub struct Mapping {
    logsources: Vec<LogsourceEntry>,
    fields: HashMap<String, Vec<Alias>>,
}

/// A mapping file that does not read.
#[derive(Debug, Clone, PartialEq)]
pub struct MappingError(pub String);

impl std::fmt::Display for MappingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for MappingError {}

fn strs(n: &Node) -> Vec<String> {
    match n.as_seq() {
        Some(items) => items
            .iter()
            .filter_map(|i| i.as_str().map(str::to_string))
            .collect(),
        None => n.as_str().map(|s| vec![s.to_string()]).unwrap_or_default(),
    }
}

impl Mapping {
    /// The bundled tables.
    pub fn bundled() -> Mapping {
        let mut m = Mapping {
            logsources: Vec::new(),
            fields: HashMap::new(),
        };
        // The bundled files are tested to read (see the tests below).
        let _ = m.add_logsources(BUNDLED_LOGSOURCES);
        let _ = m.add_fields(BUNDLED_FIELDS);
        m
    }

    /// The bundled tables extended by the operator's files: `fields` in the format of
    /// `rules/mappings/fields.yml` (a name given again replaces the bundled aliases), then
    /// `logsources` in the format of `logsources.yml` (entries add event shapes). Fields go
    /// first so that the added logsources can use the added names. Errors name the file.
    pub fn configured(fields: &[String], logsources: &[String]) -> Result<Mapping, MappingError> {
        let mut m = Mapping::bundled();
        let read = |key: &str, path: &String| {
            std::fs::read_to_string(path)
                .map_err(|e| MappingError(format!("detection.{key}: {path}: cannot read: {e}")))
        };
        for path in fields {
            m.add_fields(&read("sigma_field_mappings", path)?)
                .map_err(|e| {
                    MappingError(format!("detection.sigma_field_mappings: {path}: {}", e.0))
                })?;
        }
        for path in logsources {
            m.add_logsources(&read("sigma_logsource_mappings", path)?)
                .map_err(|e| {
                    MappingError(format!(
                        "detection.sigma_logsource_mappings: {path}: {}",
                        e.0
                    ))
                })?;
        }
        Ok(m)
    }

    /// Adds logsource entries (a YAML list as in `rules/mappings/logsources.yml`).
    pub fn add_logsources(&mut self, text: &str) -> Result<(), MappingError> {
        let docs = parse_documents(text).map_err(|e| MappingError(e.to_string()))?;
        let Some(list) = docs.first().and_then(Node::as_seq) else {
            return Err(MappingError("the logsource table must be a list".into()));
        };
        for entry in list {
            let get = |k: &str| {
                entry
                    .get(k)
                    .and_then(Node::as_str)
                    .map(str::to_ascii_lowercase)
            };
            let mut shapes = Vec::new();
            for shape in entry.get("events").and_then(Node::as_seq).unwrap_or(&[]) {
                let Some(map) = shape.as_map() else {
                    return Err(MappingError(format!(
                        "line {}: each `events` alternative is a mapping of field to values",
                        shape.pos.line
                    )));
                };
                let conds = map
                    .iter()
                    .map(|(k, v)| {
                        let name = k.as_str().unwrap_or("");
                        (self.places(name), strs(v))
                    })
                    .collect();
                shapes.push(Shape(conds));
            }
            let e = LogsourceEntry {
                product: get("product"),
                service: get("service"),
                category: get("category"),
                shapes,
                fields: entry.get("fields").map(strs),
            };
            if e.product.is_none() && e.service.is_none() && e.category.is_none() {
                return Err(MappingError(format!(
                    "line {}: an entry needs product, service or category",
                    entry.pos.line
                )));
            }
            self.logsources.push(e);
        }
        Ok(())
    }

    /// Adds field aliases (a YAML mapping of Sigma name to the names to try, in order).
    pub fn add_fields(&mut self, text: &str) -> Result<(), MappingError> {
        let docs = parse_documents(text).map_err(|e| MappingError(e.to_string()))?;
        let Some(map) = docs.first().and_then(Node::as_map) else {
            return Err(MappingError("the field table must be a mapping".into()));
        };
        for (k, v) in map {
            let name = k.as_str().unwrap_or("").to_string();
            let aliases = match v.as_seq() {
                Some(items) => items.iter().map(Alias::read).collect::<Result<_, _>>()?,
                None => vec![Alias::read(v)?],
            };
            self.fields.insert(name, aliases);
        }
        Ok(())
    }

    /// Where to look for Sigma field `name`: its aliases in order, else the name itself.
    pub fn places(&self, name: &str) -> Vec<FieldSource> {
        match self.fields.get(name) {
            Some(aliases) => aliases.iter().map(Alias::source).collect(),
            None => vec![FieldSource::of(name)],
        }
    }

    /// The logsources whose entries name `source` in an `@source` test (case-insensitive), most
    /// specific first: what a rule about that program's events should say (rule drafting).
    pub fn logsources_naming_source(&self, source: &str) -> Vec<Logsource> {
        let mut out: Vec<Logsource> = self
            .logsources
            .iter()
            .filter(|e| {
                e.shapes.iter().any(|shape| {
                    shape.0.iter().any(|(places, values)| {
                        places.contains(&FieldSource::Source)
                            && values.iter().any(|v| v.eq_ignore_ascii_case(source))
                    })
                })
            })
            .map(|e| Logsource {
                product: e.product.clone(),
                service: e.service.clone(),
                category: e.category.clone(),
            })
            .collect();
        // An entry naming few sources (`service: sshd`) before one naming many (`service: auth`).
        out.sort_by_key(|l| {
            self.logsources
                .iter()
                .find(|e| {
                    e.product == l.product && e.service == l.service && e.category == l.category
                })
                .map_or(usize::MAX, |e| {
                    e.shapes
                        .iter()
                        .map(|s| s.0.iter().map(|(_, v)| v.len()).sum::<usize>())
                        .sum()
                })
        });
        out
    }

    /// Warnings for the fields of `rule` that no event of its logsource carries: on a logsource
    /// whose entries all say which attributes their events have (`fields:`, text logs such as
    /// sudo's), a field that names none of them, no entity and no record field can never match,
    /// and `rules test` would find nothing without a word (`COMMAND|contains` for sudo, whose
    /// command is in the message). Empty for a logsource that takes any producer field.
    pub fn field_warnings(&self, rule: &Rule) -> Vec<String> {
        let Body::Detection { searches, .. } = &rule.body else {
            return Vec::new();
        };
        let entries = self.entries(&rule.logsource);
        let carried: Vec<&String> = match entries
            .iter()
            .map(|e| e.fields.as_ref())
            .collect::<Option<Vec<_>>>()
        {
            Some(lists) if !entries.is_empty() => lists.into_iter().flatten().collect(),
            _ => return Vec::new(),
        };
        let carries = |place: &FieldSource| match place {
            FieldSource::Source
            | FieldSource::Host
            | FieldSource::Message
            | FieldSource::Entity { .. } => true,
            FieldSource::Attr(name) | FieldSource::Translated { name, .. } => {
                carried.iter().any(|c| match c.strip_suffix('*') {
                    Some(prefix) => name.starts_with(prefix),
                    None => c.as_str() == &**name,
                })
            }
        };
        let mut warned: Vec<&str> = Vec::new();
        let mut out = Vec::new();
        for item in searches.iter().flat_map(|s| s.any_of.iter().flatten()) {
            let Some(field) = item.field.as_deref() else {
                continue;
            };
            if warned.contains(&field) || self.places(field).iter().any(carries) {
                continue;
            }
            warned.push(field);
            let names: Vec<&str> = carried.iter().map(|c| c.as_str()).collect();
            out.push(format!(
                "line {}: field `{field}` is not carried by {} events (text lines: their message, \
                 host, source and entities, and {}): this item can never match; search the \
                 message with keywords or `@message`, or map the field in fields.yml",
                item.pos.line,
                logsource_name(&rule.logsource),
                names.join(", ")
            ));
        }
        out
    }

    /// The entries that cover `logsource`: those naming the most of its keys.
    fn entries(&self, logsource: &Logsource) -> Vec<&LogsourceEntry> {
        let product = logsource.product.as_deref();
        let service = logsource.service.as_deref();
        let category = logsource.category.as_deref();
        // `required`: a rule key the entry must name. A rule without a product still fits an
        // entry with one (`service: sshd` alone is the sshd of any product).
        let fits = |want: Option<&str>, have: &Option<String>, required: bool| match (want, have) {
            (_, None) => !required || want.is_none(),
            (Some(w), Some(h)) => w == h,
            (None, Some(_)) => !required,
        };
        // Entries fitting the most keys of the rule win; several at that level are alternatives.
        let mut best: Vec<&LogsourceEntry> = Vec::new();
        let mut best_keys = 0;
        for e in &self.logsources {
            // Service and category of the rule must be named by the entry; product may be left
            // open by it (a service name alone identifies some logs).
            if !fits(product, &e.product, false)
                || !fits(service, &e.service, true)
                || !fits(category, &e.category, true)
            {
                continue;
            }
            let keys = [&e.product, &e.service, &e.category]
                .iter()
                .filter(|k| k.is_some())
                .count();
            if keys > best_keys {
                best_keys = keys;
                best.clear();
            }
            if keys == best_keys {
                best.push(e);
            }
        }
        best
    }

    /// The event shapes a logsource covers: `None` when no entry maps it (the rule can match
    /// nothing), `Some(empty)` when it covers every event.
    pub fn shapes(&self, logsource: &Logsource) -> Option<Vec<Shape>> {
        let best = self.entries(logsource);
        if best.is_empty() {
            return None;
        }
        if best.iter().any(|e| e.shapes.is_empty()) {
            return Some(Vec::new());
        }
        Some(best.iter().flat_map(|e| e.shapes.iter().cloned()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 50, item 9: a rule on a field no sudo line carries validated without a word, and
    /// `rules test` then found nothing.
    #[test]
    fn a_field_that_text_logs_never_carry_is_warned_about_and_others_are_not() {
        let m = Mapping::bundled();
        let rule = |logsource: &str, detection: &str| {
            crate::parse_rule(&format!(
                "title: t\nid: 1f7c9d2e-3b4a-4c5d-8e9f-0a1b2c3d4e5f\nlogsource:\n{logsource}\ndetection:\n{detection}\n    condition: sel\n"
            ))
            .unwrap()
        };
        let sudo = "    product: linux\n    service: sudo";
        let warned = m.field_warnings(&rule(sudo, "    sel:\n        COMMAND|contains: shadow"));
        assert_eq!(warned.len(), 1, "{warned:?}");
        assert!(warned[0].contains("field `COMMAND`"), "{}", warned[0]);
        assert!(warned[0].contains("linux/sudo"), "{}", warned[0]);
        assert!(warned[0].starts_with("line 8:"), "{}", warned[0]);
        // What sudo lines do carry: the message, an entity-backed field, a syslog attribute.
        for fine in [
            "    sel:\n        message|contains: shadow",
            "    sel:\n        User: alice",
            "    sel:\n        syslog.facility: '10'",
            "    sel:\n        - 'COMMAND=/bin/cat /etc/shadow'",
        ] {
            assert!(m.field_warnings(&rule(sudo, fine)).is_empty(), "{fine}");
        }
        // A logsource whose producers send fields of their own is not second-guessed.
        let windows = "    product: windows\n    category: process_creation";
        assert!(
            m.field_warnings(&rule(windows, "    sel:\n        COMMAND|contains: x"))
                .is_empty()
        );
    }

    #[test]
    fn logsources_naming_a_source_come_most_specific_first() {
        let m = Mapping::bundled();
        let found = m.logsources_naming_source("SSHD");
        let names: Vec<(Option<&str>, Option<&str>)> = found
            .iter()
            .map(|l| (l.product.as_deref(), l.service.as_deref()))
            .collect();
        assert_eq!(
            names.first(),
            Some(&(Some("linux"), Some("sshd"))),
            "{names:?}"
        );
        assert!(names.contains(&(Some("linux"), Some("auth"))), "{names:?}");
        assert!(m.logsources_naming_source("no-such-program").is_empty());
    }

    #[test]
    fn bundled_tables_read() {
        let mut m = Mapping {
            logsources: Vec::new(),
            fields: HashMap::new(),
        };
        m.add_logsources(BUNDLED_LOGSOURCES).unwrap();
        m.add_fields(BUNDLED_FIELDS).unwrap();
        assert!(m.logsources.len() > 20);
        assert_eq!(m.places("Image")[0], FieldSource::Attr("Image".into()));
    }

    #[test]
    fn operator_files_extend_and_override_the_tables() {
        let dir = std::env::temp_dir().join(format!("wp-mapping-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fields = dir.join("fields.yml");
        std::fs::write(
            &fields,
            "CommandLine: ['cmd', 'CommandLine']\nAppUser: ['app.user']\n",
        )
        .unwrap();
        let sources = dir.join("logsources.yml");
        std::fs::write(
            &sources,
            "- product: acme\n  service: vpn\n  events:\n    - '@source': ['acme-vpn']\n",
        )
        .unwrap();
        let p = |f: &std::path::Path| f.display().to_string();
        let m = Mapping::configured(&[p(&fields)], &[p(&sources)]).unwrap();
        assert_eq!(m.places("CommandLine")[0], FieldSource::Attr("cmd".into()));
        assert_eq!(m.places("AppUser")[0], FieldSource::Attr("app.user".into()));
        let ls = Logsource {
            product: Some("acme".into()),
            service: Some("vpn".into()),
            category: None,
        };
        assert_eq!(m.shapes(&ls).unwrap().len(), 1);
        std::fs::write(&sources, "- events: []\n").unwrap();
        let e = Mapping::configured(&[], &[p(&sources)]).unwrap_err();
        assert!(
            e.0.contains("sigma_logsource_mappings") && e.0.contains("product"),
            "{e}"
        );
        let e = Mapping::configured(&[p(&dir.join("missing.yml"))], &[]).unwrap_err();
        assert!(e.0.contains("cannot read"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Every Windows service of the table selects its channel, and nothing else: a rule for
    /// `service: windefend` reads Defender's events only. (`rules validate` on the whole SigmaHQ
    /// set names the services still without an entry.)
    #[test]
    fn every_windows_service_selects_its_channel() {
        let m = Mapping::bundled();
        let entries: Vec<(String, String)> = BUNDLED_LOGSOURCES
            .split("\n- ")
            .filter_map(|e| {
                let service = e.lines().find_map(|l| l.trim().strip_prefix("service: "))?;
                let channel = e.lines().find_map(|l| {
                    let v = l.trim().strip_prefix("- 'Channel': ['")?;
                    v.strip_suffix("']")
                })?;
                e.starts_with("product: windows")
                    .then(|| (service.to_string(), channel.to_string()))
            })
            .collect();
        assert!(entries.len() >= 40, "{entries:?}");
        for service in ["windefend", "dns-client", "ldap", "smbserver-connectivity"] {
            assert!(entries.iter().any(|(s, _)| s == service), "{service}");
        }
        for (service, channel) in &entries {
            let shapes = m
                .shapes(&Logsource {
                    product: Some("windows".into()),
                    service: Some(service.clone()),
                    category: None,
                })
                .unwrap_or_else(|| panic!("service {service} is not mapped"));
            assert_eq!(shapes.len(), 1, "{service}");
            let tests = &shapes[0].0;
            assert_eq!(tests.len(), 1, "{service}: the channel alone");
            assert_eq!(tests[0].1, std::slice::from_ref(channel), "{service}");
        }
    }

    /// A value table reads its own spelling as the rules' and passes others through; a malformed
    /// alias is refused with its line.
    #[test]
    fn aliases_translate_values_and_bad_ones_name_their_line() {
        let m = Mapping::bundled();
        let places = m.places("IntegrityLevel");
        let FieldSource::Translated { name, values } = &places[1] else {
            panic!("{places:?}");
        };
        assert_eq!(&**name, "MandatoryLabel");
        assert!(
            values
                .iter()
                .any(|(from, to)| &**from == "S-1-16-12288" && *to == "High")
        );
        let mut m = Mapping::bundled();
        let e = m
            .add_fields("Initiated:\n  - 'Initiated'\n  - ['Direction']\n")
            .unwrap_err();
        assert!(e.0.contains("line 3"), "{e}");
        let e = m
            .add_fields("Initiated:\n  - Direction:\n      '%%14593': ['true']\n")
            .unwrap_err();
        assert!(e.0.contains("line 2"), "{e}");
        assert_eq!(intern("true"), intern(&String::from("true")));
        assert!(std::ptr::eq(intern("true"), intern("true")), "one copy");
    }

    #[test]
    fn logsources_resolve_to_shapes() {
        let m = Mapping::bundled();
        let ls = |p: Option<&str>, s: Option<&str>, c: Option<&str>| Logsource {
            product: p.map(str::to_string),
            service: s.map(str::to_string),
            category: c.map(str::to_string),
        };
        let pc = m.shapes(&ls(Some("windows"), None, Some("process_creation")));
        assert_eq!(pc.unwrap().len(), 2, "Sysmon 1 and Security 4688");
        assert!(m.shapes(&ls(Some("linux"), Some("sshd"), None)).is_some());
        assert!(
            m.shapes(&ls(Some("windows"), Some("no-such-service"), None))
                .is_none()
        );
        assert!(m.shapes(&ls(None, None, Some("webserver"))).is_some());
        assert!(
            m.shapes(&ls(None, Some("sshd"), None)).is_some(),
            "no product fits linux"
        );
    }
}
