//! What leaves the host for a cloud model: the values of sensitive fields (user names, e-mail
//! addresses, whatever `llm.cloud_sensitive_fields` names) are replaced in the prompt by stable
//! keyed pseudonyms (`user-5f0c2a9e41`), and the pseudonyms in the answer are replaced back, so
//! the operator reads real names and the provider never sees one.
//!
//! A pseudonym is an HMAC-SHA256 of the value's ASCII lower case under a key kept in the data
//! folder (`<data_dir>/llm/pseudonym.key`, made at first use, mode 0600): the same user is the
//! same pseudonym in every prompt and across restarts, so a model can follow one actor across
//! events, while without the key nobody can test a guess against it. Values are found wherever
//! they appear in the prompt (a raw log line repeats the user name its attributes hold), as
//! whole words and in any ASCII case, the longest first.

use ring::hmac;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use watchpost_proto::{EntityRef, Event};

/// Shortest value replaced: one character is in every word.
const MIN_VALUE_CHARS: usize = 2;

/// Hex digits of a pseudonym's hash: 40 bits, no collision among a fleet's users in practice.
const HASH_HEX_DIGITS: usize = 10;

/// The key pseudonyms are made with.
pub struct PseudonymKey(hmac::Key);

impl std::fmt::Debug for PseudonymKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PseudonymKey(..)")
    }
}

/// Why the pseudonym key cannot be read or made.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The file holds something other than a key.
    #[error("{}: {len} bytes where a key of 32 was expected", path.display())]
    Length {
        /// The key file.
        path: PathBuf,
        /// Its length.
        len: usize,
    },
    /// The system gave no random numbers.
    #[error("no random numbers for the pseudonym key")]
    Random,
    /// Reading the key, or making its folder or file, failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl PseudonymKey {
    /// The key in `path`, made (32 random bytes, readable by the owner only) when the file does
    /// not exist yet.
    pub fn load_or_create(path: &Path) -> Result<PseudonymKey, KeyError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| KeyError::Io { path, source }
        };
        match std::fs::read(path) {
            Ok(bytes) if bytes.len() == 32 => Ok(PseudonymKey::from_bytes(&bytes)),
            Ok(bytes) => Err(KeyError::Length {
                path: path.to_path_buf(),
                len: bytes.len(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut bytes = [0u8; 32];
                ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
                    .map_err(|_| KeyError::Random)?;
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).map_err(io(dir))?;
                }
                write_private(path, &bytes).map_err(io(path))?;
                Ok(PseudonymKey::from_bytes(&bytes))
            }
            Err(e) => Err(io(path)(e)),
        }
    }

    /// A key of these bytes (tests).
    pub fn from_bytes(bytes: &[u8]) -> PseudonymKey {
        PseudonymKey(hmac::Key::new(hmac::HMAC_SHA256, bytes))
    }

    /// The pseudonym of `value`, labelled by what it is (`user`, `email`).
    fn pseudonym(&self, label: &str, value: &str) -> String {
        let tag = hmac::sign(&self.0, value.to_lowercase().as_bytes());
        let mut out = format!("{label}-");
        for b in tag.as_ref() {
            out.push_str(&format!("{b:02x}"));
            if out.len() >= label.len() + 1 + HASH_HEX_DIGITS {
                break;
            }
        }
        out.truncate(label.len() + 1 + HASH_HEX_DIGITS);
        out
    }
}

/// Writes `bytes` to a new file only its owner may read.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// The sensitive values of the records a prompt is built from, each with its label.
#[derive(Debug, Default, Clone)]
pub struct Sensitive {
    /// (label, value).
    values: Vec<(String, String)>,
}

impl Sensitive {
    /// Nothing sensitive known (a hunt question is the operator's own text).
    pub fn none() -> Sensitive {
        Sensitive::default()
    }

    /// The values of `fields` (attribute names, `@entity.<kind>`) among `entities` (an
    /// alert's) and in `events`.
    pub fn of<'a>(
        fields: &[String],
        entities: impl IntoIterator<Item = &'a EntityRef>,
        events: &[Event],
    ) -> Sensitive {
        let mut out = Sensitive::default();
        let entity_kinds: Vec<&str> = fields
            .iter()
            .filter_map(|f| f.strip_prefix("@entity."))
            .collect();
        let entity = |e: &EntityRef, out: &mut Sensitive| {
            let kind = e.kind.name();
            if entity_kinds.contains(&kind) {
                out.add(kind, &e.value);
            }
        };
        for e in entities {
            entity(e, &mut out);
        }
        for event in events {
            for e in &event.entities {
                entity(e, &mut out);
            }
            for field in fields {
                if let Some(v) = event.attributes.get(field) {
                    out.add(label_of(field), v);
                }
            }
        }
        out
    }

    fn add(&mut self, label: &str, value: &str) {
        let value = value.trim();
        if value.chars().count() < MIN_VALUE_CHARS {
            return;
        }
        // `CORP\bob` and `bob@corp.example` are also `bob` in a message: each is hidden. Matching
        // folds ASCII case only, so a name with other letters is hidden in its lower and upper
        // case too (`Jörg`, `jörg`, `JÖRG`), all with one pseudonym (the hash folds them).
        let mut add_one = |v: &str| {
            let mut spellings = vec![v.to_string()];
            if !v.is_ascii() {
                spellings.push(v.to_lowercase());
                spellings.push(v.to_uppercase());
            }
            for v in spellings {
                if v.chars().count() >= MIN_VALUE_CHARS
                    && !self.values.iter().any(|(_, x)| x.eq_ignore_ascii_case(&v))
                {
                    self.values.push((label.to_string(), v));
                }
            }
        };
        add_one(value);
        if let Some((_, bare)) = value.rsplit_once('\\') {
            add_one(bare);
        }
        if label == "user"
            && let Some((bare, _)) = value.split_once('@')
        {
            add_one(bare);
        }
    }

    /// Whether there is nothing to hide.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

/// What a sensitive attribute is called in its pseudonym.
fn label_of(field: &str) -> &'static str {
    if field.to_ascii_lowercase().contains("mail") {
        "email"
    } else {
        "user"
    }
}

/// The replacements of one prompt and its answer.
#[derive(Debug)]
pub struct Masking {
    /// (original, pseudonym), the longest original first.
    pairs: Vec<(String, String)>,
    /// Pseudonym to the first spelling seen of its value.
    back: BTreeMap<String, String>,
}

impl Masking {
    /// The pseudonyms of `sensitive` under `key`.
    pub fn new(key: &PseudonymKey, sensitive: &Sensitive) -> Masking {
        let mut pairs: Vec<(String, String)> = sensitive
            .values
            .iter()
            .map(|(label, v)| (v.clone(), key.pseudonym(label, v)))
            .collect();
        pairs.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        let mut back = BTreeMap::new();
        for (original, pseudonym) in &pairs {
            back.entry(pseudonym.clone())
                .or_insert_with(|| original.clone());
        }
        Masking { pairs, back }
    }

    /// `text` with every sensitive value replaced by its pseudonym.
    pub fn hide(&self, text: &str) -> String {
        replace_words(
            text,
            self.pairs.iter().map(|(o, p)| (o.as_str(), p.as_str())),
        )
    }

    /// `text` with every pseudonym replaced by its value.
    pub fn reveal(&self, text: &str) -> String {
        replace_words(
            text,
            self.back.iter().map(|(p, o)| (p.as_str(), o.as_str())),
        )
    }
}

/// `text` with each `from` that stands as a whole word (no letter, digit or `_` on either
/// side; ASCII case ignored) replaced by its `to`, in one pass: a replacement is never
/// searched again, so a user called `user` does not eat into the pseudonyms.
fn replace_words<'a>(text: &str, pairs: impl Iterator<Item = (&'a str, &'a str)>) -> String {
    let mut pairs: Vec<(&str, &str)> = pairs.filter(|(from, _)| !from.is_empty()).collect();
    if pairs.is_empty() {
        return text.to_string();
    }
    pairs.sort_by_key(|pair| std::cmp::Reverse(pair.0.len()));
    let bytes = text.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    let mut copied = 0;
    while at < bytes.len() {
        let starts_word = at == 0 || !word(bytes[at - 1]);
        let found = starts_word
            .then(|| {
                pairs.iter().find(|(from, _)| {
                    let end = at + from.len();
                    end <= bytes.len()
                        && bytes[at..end].eq_ignore_ascii_case(from.as_bytes())
                        && (end == bytes.len() || !word(bytes[end]))
                        && text.is_char_boundary(end)
                })
            })
            .flatten();
        match found {
            Some((from, to)) => {
                out.push_str(&text[copied..at]);
                out.push_str(to);
                at += from.len();
                copied = at;
            }
            None => at += 1,
        }
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use watchpost_proto::EntityKind;

    fn key() -> PseudonymKey {
        PseudonymKey::from_bytes(&[7; 32])
    }

    fn event(attributes: &[(&str, &str)], message: &str) -> Event {
        Event {
            id: "e1".into(),
            timestamp_ns: 0,
            received_ns: 0,
            input: "syslog_tcp".into(),
            source: "security".into(),
            host: "ws-12".into(),
            severity: 3,
            message: message.into(),
            template_id: String::new(),
            entities: Vec::new(),
            attributes: attributes
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            sensor: String::new(),
        }
    }

    fn fields() -> Vec<String> {
        watchpost_proto::config::LlmConfig::default().cloud_sensitive_fields
    }

    #[test]
    fn user_names_are_hidden_wherever_they_appear_and_come_back_in_the_answer() {
        let events = [event(
            &[
                ("TargetUserName", "alice"),
                ("SubjectUserName", r"CORP\bob"),
                ("UserPrincipalName", "carol@corp.example"),
                ("User", "Jörg"),
            ],
            r"An account failed to log on: alice, by CORP\bob; Alice's laptop; malice.exe; carol; JÖRG",
        )];
        let masking = Masking::new(&key(), &Sensitive::of(&fields(), [], &events));
        let sent = masking.hide(&events[0].message);
        assert!(!sent.to_ascii_lowercase().contains("alice's"), "{sent}");
        assert!(!sent.contains("bob") && !sent.contains("carol"), "{sent}");
        assert!(!sent.contains("JÖRG"), "{sent}");
        assert_eq!(
            key().pseudonym("user", "Jörg"),
            key().pseudonym("user", "JÖRG"),
            "one person, one pseudonym"
        );
        // Only whole words: `malice.exe` is left alone.
        assert!(sent.contains("malice.exe"), "{sent}");
        let alice = key().pseudonym("user", "alice");
        assert_eq!(sent.matches(&alice).count(), 2, "{sent}");
        // Stable, and the same in any case.
        assert_eq!(alice, key().pseudonym("user", "ALICE"));
        assert_ne!(
            alice,
            PseudonymKey::from_bytes(&[8; 32]).pseudonym("user", "alice")
        );
        let answer = format!("{alice} was targeted; check {alice}'s sessions.");
        assert_eq!(
            masking.reveal(&answer),
            "alice was targeted; check alice's sessions."
        );
    }

    #[test]
    fn entities_of_the_named_kinds_are_sensitive() {
        let user = EntityRef {
            kind: EntityKind::User,
            role: "target".into(),
            value: "svc_backup".into(),
            uuid: Default::default(),
        };
        let ip = EntityRef {
            kind: EntityKind::Ip,
            role: "source".into(),
            value: "203.0.113.9".into(),
            uuid: Default::default(),
        };
        let masking = Masking::new(&key(), &Sensitive::of(&fields(), [&user, &ip], &[]));
        let sent = masking.hide("svc_backup logged in from 203.0.113.9");
        assert!(
            !sent.contains("svc_backup") && sent.contains("203.0.113.9"),
            "{sent}"
        );
    }

    #[test]
    fn a_user_called_like_a_pseudonym_label_does_not_corrupt_the_others() {
        let events = [event(&[("User", "user"), ("TargetUserName", "root")], "")];
        let masking = Masking::new(&key(), &Sensitive::of(&fields(), [], &events));
        let sent = masking.hide("user root and user");
        assert!(!sent.contains("root"));
        assert_eq!(masking.reveal(&sent), "user root and user");
    }

    #[test]
    fn the_key_is_made_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("llm/pseudonym.key");
        let first = PseudonymKey::load_or_create(&path).unwrap();
        let again = PseudonymKey::load_or_create(&path).unwrap();
        assert_eq!(first.pseudonym("user", "x1"), again.pseudonym("user", "x1"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(&path, b"short").unwrap();
        let err = PseudonymKey::load_or_create(&path).unwrap_err();
        assert!(err.to_string().contains("5 bytes"), "{err}");
    }
}
