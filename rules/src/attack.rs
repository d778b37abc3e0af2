//! The MITRE ATT&CK Enterprise catalogue (v18.1), embedded, and the mapping of Sigma tags onto
//! it.
//!
//! The catalogue is MITRE's (licence in `rules/attack/LICENSE.txt`, which travels with the copy).
//! It is parsed once, on first use. Sigma rules name techniques as `attack.t1110.001` and tactics
//! as `attack.credential-access` (or `attack.credential_access`); [`Attack::mappings`] turns those
//! tags into (tactic, technique) pairs with their names.

use serde::Deserialize;
use std::collections::HashMap;
use std::sync::OnceLock;
use watchpost_proto::AttackMapping;

/// The catalogue text, as embedded.
pub const CATALOGUE_JSON: &str = include_str!("../attack/enterprise-attack-18.1.json");
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

/// The catalogue, indexed.
pub struct Attack {
    /// `18.1`.
    pub version: String,
    /// Tactics in kill-chain order.
    pub tactics: Vec<Tactic>,
    /// Techniques in id order.
    pub techniques: Vec<Technique>,
    by_short: HashMap<String, usize>,
    by_id: HashMap<String, usize>,
}

impl Attack {
    /// The embedded catalogue.
    pub fn get() -> &'static Attack {
        static CATALOGUE: OnceLock<Attack> = OnceLock::new();
        CATALOGUE.get_or_init(|| {
            // The file is part of the source tree; a parse failure is a build defect that the
            // tests catch, and an empty catalogue keeps the service running if one slipped by.
            let raw: Raw = serde_json::from_str(CATALOGUE_JSON).unwrap_or(Raw {
                attack_version: String::new(),
                tactics: Vec::new(),
                techniques: Vec::new(),
            });
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
            }
        })
    }

    /// A tactic by shortname (`credential-access`, `credential_access`) or id (`TA0006`),
    /// case-insensitive.
    pub fn tactic(&self, name: &str) -> Option<&Tactic> {
        let short = name.to_ascii_lowercase().replace('_', "-");
        if let Some(&i) = self.by_short.get(&short) {
            return Some(&self.tactics[i]);
        }
        self.tactics
            .iter()
            .find(|t| t.id.eq_ignore_ascii_case(name) || t.name.eq_ignore_ascii_case(name))
    }

    /// A technique by id (`T1110.001`), case-insensitive.
    pub fn technique(&self, id: &str) -> Option<&Technique> {
        self.by_id
            .get(&id.to_ascii_uppercase())
            .map(|&i| &self.techniques[i])
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

    /// The ATT&CK mappings of a rule's tags. Each technique pairs with the tactics the rule also
    /// names that the technique belongs to, or with all of its tactics when the rule names none
    /// of them; a tactic named without any technique of it stands alone (empty technique fields).
    /// Unknown ids and non-ATT&CK tags (`attack.g0032` groups, `attack.s0002` software, `cve.*`)
    /// are left out.
    pub fn mappings(&self, tags: &[String]) -> Vec<AttackMapping> {
        let mut tactics: Vec<&Tactic> = Vec::new();
        let mut techniques: Vec<&Technique> = Vec::new();
        for tag in tags {
            let Some(rest) = tag.strip_prefix("attack.") else {
                continue;
            };
            let is_technique = rest.len() >= 5
                && rest.as_bytes()[0].eq_ignore_ascii_case(&b't')
                && rest.as_bytes()[1].is_ascii_digit();
            if is_technique {
                if let Some(t) = self.technique(rest)
                    && !techniques.iter().any(|x| x.id == t.id)
                {
                    techniques.push(t);
                }
            } else if let Some(t) = self
                .by_short
                .get(&rest.to_ascii_lowercase().replace('_', "-"))
            {
                let t = &self.tactics[*t];
                if !tactics.iter().any(|x| x.id == t.id) {
                    tactics.push(t);
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
        for (t, used) in tactics.iter().zip(used) {
            if !used {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_catalogue_is_whole() {
        let a = Attack::get();
        assert_eq!(a.version, "18.1");
        assert_eq!(a.tactics.len(), 14);
        assert_eq!(a.techniques.len(), 691);
        assert!(LICENSE.contains("The MITRE Corporation"));
        for t in &a.techniques {
            for s in &t.tactics {
                assert!(a.tactic(s).is_some(), "{} names unknown tactic {s}", t.id);
            }
        }
    }

    #[test]
    fn tags_map_to_named_pairs() {
        let a = Attack::get();
        let tags = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let m = a.mappings(&tags(&["attack.credential_access", "attack.t1110.001"]));
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].tactic_id, "TA0006");
        assert_eq!(m[0].tactic, "Credential Access");
        assert_eq!(m[0].technique_id, "T1110.001");
        assert_eq!(m[0].technique, "Brute Force: Password Guessing");
        // No tactic named: every tactic of the technique (T1078 has four).
        let m = a.mappings(&tags(&["attack.t1078"]));
        assert_eq!(m.len(), 4, "{m:?}");
        // A tactic alone, groups and unknown ids left out.
        let m = a.mappings(&tags(&[
            "attack.persistence",
            "attack.g0032",
            "attack.t9999",
            "cve.2021-44228",
        ]));
        assert_eq!(m.len(), 1);
        assert_eq!(
            (m[0].tactic_id.as_str(), m[0].technique_id.as_str()),
            ("TA0003", "")
        );
    }
}
