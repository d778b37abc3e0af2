//! The MITRE ATT&CK Enterprise catalogue (v19.1), embedded, and the mapping of Sigma tags onto
//! it.
//!
//! The catalogue is MITRE's (licence in `rules/attack/LICENSE.txt`, which travels with the copy).
//! It is parsed once, on first use. Sigma rules name techniques as `attack.t1110.001` and tactics
//! as `attack.credential-access` (or `attack.credential_access`); [`Attack::mappings`] turns those
//! tags into (tactic, technique) pairs with their names.
//!
//! Rules written for v18 keep working: a technique that v19 revoked resolves to its replacement
//! (MITRE's `revoked-by`, shipped beside the catalogue), and the split tactic `defense-evasion`
//! resolves to the two it became. Nothing is dropped: a tag that names no current or retired id
//! stays on the alert as written, and [`Attack::tag_warnings`] says so where the rule is checked.

use serde::Deserialize;
use std::collections::HashMap;
use std::sync::OnceLock;
use watchpost_proto::AttackMapping;

/// The catalogue text, as embedded.
pub const CATALOGUE_JSON: &str = include_str!("../attack/enterprise-attack-19.1.json");
/// The fate of every id not current in the catalogue (revoked, deprecated, split).
pub const CHANGES_JSON: &str = include_str!("../attack/attack-id-changes-18.1-to-19.1.json");
/// MITRE's licence, which must accompany any copy of the catalogue.
pub const LICENSE: &str = include_str!("../attack/LICENSE.txt");

/// A tactic.
#[derive(Clone, Debug, Deserialize)]
pub struct Tactic {
    /// `TA0006`.
    pub id: String,
    /// `Credential Access`.
    pub name: String,
    /// `credential-access`.
    pub shortname: String,
}

/// A technique or sub-technique.
#[derive(Clone, Debug, Deserialize)]
pub struct Technique {
    /// `T1110` or `T1110.001`.
    pub id: String,
    /// Its name (a sub-technique's own name, without its parent's).
    pub name: String,
    /// Shortnames of its tactics.
    pub tactics: Vec<String>,
    /// Platforms.
    #[serde(default)]
    pub platforms: Vec<String>,
}

#[derive(Deserialize)]
struct Raw {
    attack_version: String,
    tactics: Vec<Tactic>,
    techniques: Vec<Technique>,
}

/// What became of an id that is not current.
#[derive(Clone, Debug, Deserialize)]
struct Fate {
    /// Its last name.
    name: String,
    /// `revoked-by`, `deprecated` (techniques) or `split` (tactics).
    fate: String,
    /// Current replacements of a revoked technique.
    #[serde(default)]
    by: Vec<String>,
    /// Current shortnames a split tactic became.
    #[serde(default)]
    into: Vec<String>,
    /// A split tactic's id, which one of the tactics it became kept.
    #[serde(default)]
    id: Option<String>,
}

#[derive(Deserialize, Default)]
struct Changes {
    #[serde(default)]
    tactics: HashMap<String, Fate>,
    #[serde(default)]
    techniques: HashMap<String, Fate>,
}

/// What a technique tag names.
enum Named<'a> {
    /// Current techniques: the one named, or the replacements of a revoked one.
    Current(Vec<&'a Technique>),
    /// Deprecated without a replacement: its last name.
    Retired(&'a str),
    /// Not an ATT&CK technique id of any version this catalogue knows.
    Unknown,
}

/// The catalogue, indexed.
pub struct Attack {
    /// `19.1`.
    pub version: String,
    /// Tactics in matrix order.
    pub tactics: Vec<Tactic>,
    /// Techniques in id order.
    pub techniques: Vec<Technique>,
    by_short: HashMap<String, usize>,
    by_id: HashMap<String, usize>,
    changes: Changes,
}

impl Attack {
    /// The embedded catalogue.
    pub fn get() -> &'static Attack {
        static CATALOGUE: OnceLock<Attack> = OnceLock::new();
        CATALOGUE.get_or_init(|| {
            // The files are part of the source tree; a parse failure is a build defect that the
            // tests catch, and an empty catalogue keeps the service running if one slipped by.
            let raw: Raw = serde_json::from_str(CATALOGUE_JSON).unwrap_or(Raw {
                attack_version: String::new(),
                tactics: Vec::new(),
                techniques: Vec::new(),
            });
            let changes: Changes = serde_json::from_str(CHANGES_JSON).unwrap_or_default();
            let mut techniques = raw.techniques;
            techniques.sort_by(|a, b| a.id.cmp(&b.id));
            Attack {
                version: raw.attack_version,
                by_short: raw
                    .tactics
                    .iter()
                    .enumerate()
                    .map(|(i, t)| (t.shortname.clone(), i))
                    .collect(),
                by_id: techniques
                    .iter()
                    .enumerate()
                    .map(|(i, t)| (t.id.clone(), i))
                    .collect(),
                tactics: raw.tactics,
                techniques,
                changes,
            }
        })
    }

    /// A tactic by shortname (`credential-access`, `credential_access`) or id (`TA0006`),
    /// case-insensitive. A retired shortname names the tactic that kept its id
    /// (`defense-evasion` is TA0005, now Stealth).
    pub fn tactic(&self, name: &str) -> Option<&Tactic> {
        let short = name.to_ascii_lowercase().replace('_', "-");
        if let Some(&i) = self.by_short.get(&short) {
            return Some(&self.tactics[i]);
        }
        if let Some(id) = self.changes.tactics.get(&short).and_then(|f| f.id.as_ref()) {
            return self.tactics.iter().find(|t| &t.id == id);
        }
        self.tactics
            .iter()
            .find(|t| t.id.eq_ignore_ascii_case(name) || t.name.eq_ignore_ascii_case(name))
    }

    /// The current tactics a tactic tag names: itself, or what a split one became.
    fn tactics_named(&self, tag: &str) -> Vec<&Tactic> {
        let short = tag.to_ascii_lowercase().replace('_', "-");
        if let Some(&i) = self.by_short.get(&short) {
            return vec![&self.tactics[i]];
        }
        match self.changes.tactics.get(&short) {
            Some(f) => f
                .into
                .iter()
                .filter_map(|s| self.by_short.get(s).map(|&i| &self.tactics[i]))
                .collect(),
            None => Vec::new(),
        }
    }

    /// A technique by id (`T1110.001`), case-insensitive: current ones only.
    pub fn technique(&self, id: &str) -> Option<&Technique> {
        self.by_id
            .get(&id.to_ascii_uppercase())
            .map(|&i| &self.techniques[i])
    }

    /// What technique id `id` names in this catalogue, following revocations.
    fn named(&self, id: &str) -> Named<'_> {
        if let Some(t) = self.technique(id) {
            return Named::Current(vec![t]);
        }
        match self.changes.techniques.get(&id.to_ascii_uppercase()) {
            Some(f) => {
                let now: Vec<&Technique> = f.by.iter().filter_map(|b| self.technique(b)).collect();
                if f.fate == "deprecated" || now.is_empty() {
                    Named::Retired(&f.name)
                } else {
                    Named::Current(now)
                }
            }
            None => Named::Unknown,
        }
    }

    /// The technique's full name: a sub-technique is named `Parent: Sub`, as ATT&CK shows it.
    pub fn technique_name(&self, technique: &Technique) -> String {
        match technique.id.split_once('.') {
            Some((parent, _)) => match self.technique(parent) {
                Some(p) => format!("{}: {}", p.name, technique.name),
                None => technique.name.clone(),
            },
            None => technique.name.clone(),
        }
    }

    /// What is worth telling the rule's author about its ATT&CK tags: ids this catalogue does
    /// not know (kept on alerts as written, counted nowhere) and techniques deprecated without a
    /// replacement. Ids revoked in favour of current ones resolve without a word, as do groups,
    /// software, mitigations and campaigns (`attack.g0032`, `attack.s0002`, ...).
    pub fn tag_warnings(&self, tags: &[String]) -> Vec<String> {
        let mut out = Vec::new();
        for tag in tags {
            let Some(rest) = tag.strip_prefix("attack.") else {
                continue;
            };
            if is_technique_id(rest) {
                match self.named(rest) {
                    Named::Current(_) => {}
                    Named::Retired(name) => out.push(format!(
                        "tag {tag}: {name} is deprecated in ATT&CK v{} with no replacement; kept as written",
                        self.version
                    )),
                    Named::Unknown => out.push(format!(
                        "tag {tag}: no such technique in ATT&CK v{} or earlier; kept as written",
                        self.version
                    )),
                }
            } else if is_tactic_name(rest) && self.tactics_named(rest).is_empty() {
                out.push(format!(
                    "tag {tag}: no such tactic in ATT&CK v{}; kept as written",
                    self.version
                ));
            }
        }
        out
    }

    /// The ATT&CK mappings of a rule's tags. Each technique pairs with the tactics the rule also
    /// names that the technique belongs to, or with all of its tactics when the rule names none
    /// of them; a tactic named without any technique of it stands alone (empty technique fields).
    /// A revoked technique maps to its replacements, a split tactic to what it became. A
    /// technique id known to no version is kept as written (upper case, no name) with the tactics
    /// the rule names, or none. Groups, software and other non-technique tags (`attack.g0032`,
    /// `cve.*`) are left out.
    pub fn mappings(&self, tags: &[String]) -> Vec<AttackMapping> {
        let mut tactics: Vec<&Tactic> = Vec::new();
        // Tactics named through a split one: they stand alone only as the one that kept the id.
        let mut via_split: Vec<bool> = Vec::new();
        let mut techniques: Vec<&Technique> = Vec::new();
        let mut unknown: Vec<(String, String)> = Vec::new();
        for tag in tags {
            let Some(rest) = tag.strip_prefix("attack.") else {
                continue;
            };
            if is_technique_id(rest) {
                match self.named(rest) {
                    Named::Current(now) => {
                        for t in now {
                            if !techniques.iter().any(|x| x.id == t.id) {
                                techniques.push(t);
                            }
                        }
                    }
                    Named::Retired(name) => unknown.push((rest.to_ascii_uppercase(), name.into())),
                    Named::Unknown => unknown.push((rest.to_ascii_uppercase(), String::new())),
                }
            } else {
                let named = self.tactics_named(rest);
                let split = named.len() > 1;
                for t in named {
                    match tactics.iter().position(|x| x.id == t.id) {
                        Some(i) => via_split[i] &= split,
                        None => {
                            tactics.push(t);
                            via_split.push(split);
                        }
                    }
                }
            }
        }
        let mut out = Vec::new();
        let mut used = vec![false; tactics.len()];
        for tech in &techniques {
            let named: Vec<usize> = (0..tactics.len())
                .filter(|&i| tech.tactics.contains(&tactics[i].shortname))
                .collect();
            let pairs: Vec<&Tactic> = if named.is_empty() {
                tech.tactics
                    .iter()
                    .filter_map(|s| self.by_short.get(s).map(|&i| &self.tactics[i]))
                    .collect()
            } else {
                named.iter().map(|&i| tactics[i]).collect()
            };
            for i in named {
                used[i] = true;
            }
            let name = self.technique_name(tech);
            for ta in pairs {
                out.push(AttackMapping {
                    tactic_id: ta.id.clone(),
                    tactic: ta.name.clone(),
                    technique_id: tech.id.clone(),
                    technique: name.clone(),
                });
            }
        }
        // Tactics named directly (not through a split one) pair with the unknown techniques.
        let direct: Vec<usize> = (0..tactics.len()).filter(|&i| !via_split[i]).collect();
        for (id, name) in unknown {
            if direct.is_empty() {
                out.push(AttackMapping {
                    tactic_id: String::new(),
                    tactic: String::new(),
                    technique_id: id,
                    technique: name,
                });
            } else {
                for &i in &direct {
                    used[i] = true;
                    let ta = tactics[i];
                    out.push(AttackMapping {
                        tactic_id: ta.id.clone(),
                        tactic: ta.name.clone(),
                        technique_id: id.clone(),
                        technique: name.clone(),
                    });
                }
            }
        }
        // A split tactic that no technique of the rule placed stands for the tactic that kept
        // its id (TA0005), not for both halves; one that a technique placed adds nothing more.
        let split_used = used.iter().zip(&via_split).any(|(u, s)| *u && *s);
        let split_ids: Vec<&str> = self
            .changes
            .tactics
            .values()
            .filter_map(|f| f.id.as_deref())
            .collect();
        for ((t, used), split) in tactics.iter().zip(used).zip(via_split) {
            if !used && (!split || !split_used && split_ids.contains(&t.id.as_str())) {
                out.push(AttackMapping {
                    tactic_id: t.id.clone(),
                    tactic: t.name.clone(),
                    technique_id: String::new(),
                    technique: String::new(),
                });
            }
        }
        out
    }
}

/// `t1059` or `t1059.001` (either case).
fn is_technique_id(tag: &str) -> bool {
    let b = tag.as_bytes();
    let digits = |s: &[u8]| !s.is_empty() && s.iter().all(u8::is_ascii_digit);
    b.len() >= 5
        && b[0].eq_ignore_ascii_case(&b't')
        && match tag[1..].split_once('.') {
            Some((main, sub)) => digits(main.as_bytes()) && digits(sub.as_bytes()),
            None => digits(&b[1..]),
        }
}

/// A tactic shortname's shape (`credential-access`, `credential_access`): letters and dashes,
/// as opposed to the ids of groups, software and the like (`g0032`, `s0002`).
fn is_tactic_name(tag: &str) -> bool {
    !tag.is_empty()
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphabetic() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn pairs(m: &[AttackMapping]) -> Vec<(&str, &str)> {
        m.iter()
            .map(|m| (m.tactic_id.as_str(), m.technique_id.as_str()))
            .collect()
    }

    #[test]
    fn the_embedded_catalogue_is_whole() {
        let a = Attack::get();
        assert_eq!(a.version, "19.1");
        assert_eq!(a.tactics.len(), 15);
        assert_eq!(a.techniques.len(), 697);
        assert!(LICENSE.contains("The MITRE Corporation"));
        for t in &a.techniques {
            for s in &t.tactics {
                assert!(a.tactic(s).is_some(), "{} names unknown tactic {s}", t.id);
            }
        }
        // Every replacement the changes name is current.
        for (id, f) in &a.changes.techniques {
            for by in &f.by {
                assert!(
                    a.technique(by).is_some(),
                    "{id} is replaced by unknown {by}"
                );
            }
        }
        assert!(!a.changes.techniques.is_empty() && !a.changes.tactics.is_empty());
    }

    #[test]
    fn tags_map_to_named_pairs() {
        let a = Attack::get();
        let m = a.mappings(&tags(&["attack.credential_access", "attack.t1110.001"]));
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].tactic_id, "TA0006");
        assert_eq!(m[0].tactic, "Credential Access");
        assert_eq!(m[0].technique_id, "T1110.001");
        assert_eq!(m[0].technique, "Brute Force: Password Guessing");
        // No tactic named: every tactic of the technique (T1078 has four).
        let m = a.mappings(&tags(&["attack.t1078"]));
        assert_eq!(m.len(), 4, "{m:?}");
        // A tactic alone; groups, software and CVEs left out.
        let m = a.mappings(&tags(&[
            "attack.persistence",
            "attack.g0032",
            "cve.2021-44228",
        ]));
        assert_eq!(pairs(&m), [("TA0003", "")]);
    }

    #[test]
    fn rules_tagged_for_v18_resolve_to_the_current_ids() {
        let a = Attack::get();
        // T1562.002 was revoked in v19 by T1685.001, which sits in Defense Impairment, one of
        // the two tactics Defense Evasion became; Stealth is not added beside it.
        let m = a.mappings(&tags(&["attack.defense-evasion", "attack.t1562.002"]));
        assert_eq!(pairs(&m), [("TA0112", "T1685.001")]);
        assert_eq!(
            m[0].technique,
            "Disable or Modify Tools: Disable or Modify Windows Event Log"
        );
        // A technique that stayed in the renamed half.
        let m = a.mappings(&tags(&["attack.defense_evasion", "attack.t1027"]));
        assert_eq!(pairs(&m), [("TA0005", "T1027")]);
        assert_eq!(m[0].tactic, "Stealth");
        // The old tactic alone is the one that kept its id.
        let m = a.mappings(&tags(&["attack.defense-evasion"]));
        assert_eq!(pairs(&m), [("TA0005", "")]);
        assert_eq!(a.tactic("defense-evasion").unwrap().id, "TA0005");
        // Resolving is not worth a warning.
        assert!(
            a.tag_warnings(&tags(&["attack.defense-evasion", "attack.t1562.002"]))
                .is_empty()
        );
    }

    #[test]
    fn an_unknown_or_deprecated_technique_is_kept_as_written_and_warned_about() {
        let a = Attack::get();
        let m = a.mappings(&tags(&["attack.t9999.001"]));
        assert_eq!(pairs(&m), [("", "T9999.001")]);
        let m = a.mappings(&tags(&["attack.execution", "attack.t9999"]));
        assert_eq!(pairs(&m), [("TA0002", "T9999")]);
        // Deprecated in favour of nothing: kept with its last name.
        let m = a.mappings(&tags(&["attack.t1043"]));
        assert_eq!(pairs(&m), [("", "T1043")]);
        assert_eq!(m[0].technique, "Commonly Used Port");
        let w = a.tag_warnings(&tags(&[
            "attack.t9999",
            "attack.t1043",
            "attack.lateral-movment",
            "attack.g0032",
            "attack.s0002",
            "attack.t1059.001",
        ]));
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(
            w[0].starts_with("tag attack.t9999: no such technique"),
            "{w:?}"
        );
        assert!(w[1].contains("Commonly Used Port is deprecated"), "{w:?}");
        assert!(
            w[2].starts_with("tag attack.lateral-movment: no such tactic"),
            "{w:?}"
        );
    }
}
