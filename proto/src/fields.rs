//! The event as rules read it: a trait over field access, so that Sigma matching reads the
//! record being built in place (no copy, no allocation), and a plain owned form for tests and
//! tools. It lives here because both the rules (which match) and the store (whose in-place
//! record implements it) need it, and neither may depend on the other.

/// Read access to one event.
pub trait EventFields {
    /// The attribute named `name` (a producer field, flattened with dots).
    fn attribute(&self, name: &str) -> Option<&str>;
    /// The record's `source`.
    fn source(&self) -> &str;
    /// The record's `host`.
    fn host(&self) -> &str;
    /// The record's `message`.
    fn message(&self) -> &str;
    /// Calls `f` with the message and every attribute value until it returns true; says whether
    /// it did (keyword searches).
    fn any_value(&self, f: &mut dyn FnMut(&str) -> bool) -> bool;
    /// Calls `f` with every attribute's name and value, in order, until it returns true; says
    /// whether it did. The rule engine reads them once per event into the fields its rules
    /// read, rather than looking each field up by name.
    fn any_attribute<'a>(&'a self, f: &mut dyn FnMut(&'a str, &'a str) -> bool) -> bool;
    /// Calls `f` with every attribute's name, in `any_attribute`'s order, until it returns true;
    /// says whether it did. The rule engine's pass over an event needs the names alone (it
    /// keeps positions, see `attribute_value_at`); implement it to skip making the values.
    /// Names are given as bytes, which the engine compares: taking each name out of a larger
    /// text as a `str` checks that both of its ends fall on a character's boundary, 2.5% of
    /// matching with the whole SigmaHQ set (callgrind).
    fn any_attribute_name<'a>(&'a self, f: &mut dyn FnMut(&'a [u8]) -> bool) -> bool {
        self.any_attribute(&mut |name, _| f(name.as_bytes()))
    }
    /// The value of the attribute `any_attribute` visits at `index` (from 0): the rule engine
    /// keeps where each field's value sits rather than the value, so that its per-thread
    /// table needs no clearing per event, and calls this at each read of a field. Implement it
    /// in constant time: this default goes through the attributes, which makes matching grow
    /// with the square of their number.
    fn attribute_value_at(&self, index: usize) -> Option<&str> {
        let (mut at, mut found) = (0, None);
        self.any_attribute(&mut |_, value| {
            if at == index {
                found = Some(value);
            }
            at += 1;
            found.is_some()
        });
        found
    }
    /// The bytes of the value `attribute_value_at` gives at `index`; implement it in constant
    /// time, as that one. The rule engine's gates and shape tests read values as bytes:
    /// taking a value out of a larger text as a `str` checks both of its ends for a
    /// character's boundary (2.5% of matching with the whole SigmaHQ set, callgrind, when
    /// every read did). The store's arena gives a value's range as it is: a range off character
    /// boundaries (which the normaliser never makes) gives bytes that equal no text, where
    /// `attribute_value_at` gives the empty text.
    fn attribute_bytes_at(&self, index: usize) -> Option<&[u8]> {
        self.attribute_value_at(index).map(str::as_bytes)
    }
    /// The name of the attribute `any_attribute` visits at `index` (from 0): the rule engine
    /// checks a remembered layout's long names this way. Implement it in constant time, as
    /// `attribute_value_at`; as bytes, as `any_attribute_name`.
    fn attribute_name_at(&self, index: usize) -> Option<&[u8]> {
        let (mut at, mut found) = (0, None);
        self.any_attribute_name(&mut |name| {
            if at == index {
                found = Some(name);
            }
            at += 1;
            found.is_some()
        });
        found
    }
    /// The bytes from the event's first value to its last (source, host, message, attributes'
    /// values), where they lie in one buffer (the data plane's arena): the rule engine's
    /// keyword gates search it in one vector loop rather than value by value. It must hold,
    /// byte for byte, every value `source`, `host` and `any_value` give: a value left out
    /// would lose its keyword matches without a word. Other bytes may lie between the values
    /// (attribute names): a literal found across a value and a name only lets a rule be
    /// evaluated, which reads the values themselves. `None` (the default): the values are
    /// read one by one.
    fn values_text(&self) -> Option<&[u8]> {
        None
    }
    /// The canonical name of the first entity of `kind` (`ip`, `user`, `host`...) with `role`
    /// (`source`, `destination`...; `None`: any role). Events without entities have none.
    fn entity(&self, kind: &str, role: Option<&str>) -> Option<&str> {
        let _ = (kind, role);
        None
    }
}

/// An event held as plain fields, for tests and tools.
#[derive(Clone, Debug, Default)]
pub struct PlainEvent {
    /// `source`.
    pub source: String,
    /// `host`.
    pub host: String,
    /// `message`.
    pub message: String,
    /// Attributes.
    pub attributes: Vec<(String, String)>,
    /// Entities: (kind, role, canonical name), as `ip`, `source`, `203.0.113.9`.
    pub entities: Vec<(String, String, String)>,
}

impl PlainEvent {
    /// An event of `source` with `attributes` (name, value) and nothing else: the usual test
    /// record.
    pub fn with_attributes(source: &str, attributes: &[(&str, &str)]) -> PlainEvent {
        PlainEvent {
            source: source.into(),
            attributes: attributes
                .iter()
                .map(|(name, value)| (name.to_string(), value.to_string()))
                .collect(),
            ..PlainEvent::default()
        }
    }
}

impl EventFields for PlainEvent {
    fn attribute(&self, name: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
    fn source(&self) -> &str {
        &self.source
    }
    fn host(&self) -> &str {
        &self.host
    }
    fn message(&self) -> &str {
        &self.message
    }
    fn any_value(&self, f: &mut dyn FnMut(&str) -> bool) -> bool {
        f(&self.message) || self.attributes.iter().any(|(_, v)| f(v))
    }
    fn any_attribute<'a>(&'a self, f: &mut dyn FnMut(&'a str, &'a str) -> bool) -> bool {
        self.attributes.iter().any(|(k, v)| f(k, v))
    }
    fn any_attribute_name<'a>(&'a self, f: &mut dyn FnMut(&'a [u8]) -> bool) -> bool {
        self.attributes.iter().any(|(k, _)| f(k.as_bytes()))
    }
    fn attribute_value_at(&self, index: usize) -> Option<&str> {
        self.attributes.get(index).map(|(_, v)| v.as_str())
    }
    fn attribute_name_at(&self, index: usize) -> Option<&[u8]> {
        self.attributes.get(index).map(|(k, _)| k.as_bytes())
    }
    fn entity(&self, kind: &str, role: Option<&str>) -> Option<&str> {
        self.entities
            .iter()
            .find(|(k, r, _)| k == kind && role.is_none_or(|want| r == want))
            .map(|(_, _, v)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::{EventFields, PlainEvent};

    /// An event that implements only what the trait requires, so that its defaults answer.
    struct Minimal(PlainEvent);

    impl EventFields for Minimal {
        fn attribute(&self, name: &str) -> Option<&str> {
            self.0.attribute(name)
        }
        fn source(&self) -> &str {
            self.0.source()
        }
        fn host(&self) -> &str {
            self.0.host()
        }
        fn message(&self) -> &str {
            self.0.message()
        }
        fn any_value(&self, f: &mut dyn FnMut(&str) -> bool) -> bool {
            self.0.any_value(f)
        }
        fn any_attribute<'a>(&'a self, f: &mut dyn FnMut(&'a str, &'a str) -> bool) -> bool {
            self.0.any_attribute(f)
        }
    }

    /// The names and positions the rule engine reads agree with `any_attribute`, through the
    /// trait's defaults and through `PlainEvent`'s own, repeated names and all.
    #[test]
    fn names_and_values_by_position_follow_any_attribute() {
        let plain = PlainEvent::with_attributes(
            "s",
            &[("Image", "a.exe"), ("User", "bob"), ("Image", "b.exe")],
        );
        let minimal = Minimal(plain.clone());
        let events: [&dyn EventFields; 2] = [&plain, &minimal];
        for event in events {
            let mut names = Vec::new();
            event.any_attribute_name(&mut |name| {
                names.push(String::from_utf8_lossy(name).into_owned());
                false
            });
            assert_eq!(names, ["Image", "User", "Image"]);
            let values: Vec<Option<&str>> = (0..4).map(|i| event.attribute_value_at(i)).collect();
            assert_eq!(values, [Some("a.exe"), Some("bob"), Some("b.exe"), None]);
            let bytes: Vec<Option<&[u8]>> = (0..4).map(|i| event.attribute_bytes_at(i)).collect();
            assert_eq!(
                bytes,
                [Some(&b"a.exe"[..]), Some(b"bob"), Some(b"b.exe"), None]
            );
            let names: Vec<Option<&[u8]>> = (0..4).map(|i| event.attribute_name_at(i)).collect();
            assert_eq!(
                names,
                [Some(&b"Image"[..]), Some(b"User"), Some(b"Image"), None]
            );
            // A name visitor that stops is not called again.
            let mut calls = 0;
            assert!(event.any_attribute_name(&mut |_| {
                calls += 1;
                true
            }));
            assert_eq!(calls, 1);
        }
    }
}
