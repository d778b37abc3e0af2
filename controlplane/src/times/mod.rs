//! Readable times beside the nanosecond ones: every `X_ns` field of an API answer gets a sibling
//! `X` with the same instant as RFC 3339 UTC (`first_seen_ns` and `first_seen`), null where the
//! integer is null or 0 (the API's "never"). Integers stay the contract (exact, sortable, what
//! the store keeps); the text is for people and for tools that read dates, such as a spreadsheet
//! or `jq`'s `fromdate`.
//!
//! Written while the answer is serialised ([`WithReadableTimes`], used by the API's
//! [`Json`](crate::answer::Json) answer), so that no route can forget it and no answer is parsed
//! back to add it. Why a serializer adapter rather than an attribute on each field: serde gives a
//! field's serializer no way to write a second key, the types are shared with the store and
//! the data plane (whose encodings must not change), and one answer type flattens another
//! (`AlertDetail` carries an `Alert`), so an attribute would have to be repeated on every type
//! and still miss the flattened ones.
//!
//! Which names: those the OpenAPI document lists (`openapi::describe_readable_times` describes
//! each added field beside its source). Producers' own data (`attributes`) is written untouched,
//! so a log field that happens to end in `_ns` is left as it came, and so is a map keyed by
//! something else (a source called `app_ns`). A field the object already has wins over the
//! added one: siblings are written when the object ends, those whose name was seen skipped.

mod read;

use read::{instant, key_kind};
use serde::ser::{
    Serialize, SerializeMap, SerializeSeq, SerializeStruct, SerializeStructVariant, SerializeTuple,
    SerializeTupleStruct, SerializeTupleVariant, Serializer,
};
use std::collections::HashSet;
use watchpost_normalize::Rfc3339;

/// Objects whose keys are a producer's, not the API's.
const OPAQUE: &[&str] = &["attributes"];

/// The `_ns` names that get a readable sibling, and the siblings' names. Lives as long as the
/// program (a struct writes the siblings' names as field names of its own, which serde wants
/// `'static`).
pub(crate) struct TimeNames {
    nanos: HashSet<String>,
    readable: HashSet<String>,
}

impl TimeNames {
    /// From the `_ns` field names of the answers.
    pub(crate) fn new(nanos: HashSet<String>) -> Self {
        let readable = nanos.iter().map(|n| readable_name(n).to_string()).collect();
        Self { nanos, readable }
    }

    /// What `key` is in an object of an answer.
    fn kind(&'static self, key: &str) -> Key {
        if key.ends_with("_ns") && self.nanos.contains(key) {
            match self.readable.get(readable_name(key)) {
                Some(sibling) => Key::Nanos(sibling),
                None => Key::Other,
            }
        } else if let Some(own) = self.readable.get(key) {
            Key::Readable(own)
        } else if OPAQUE.contains(&key) {
            Key::Opaque
        } else {
            Key::Other
        }
    }
}

fn readable_name(nanos: &str) -> &str {
    nanos.strip_suffix("_ns").unwrap_or(nanos)
}

/// What a key of an object is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Key {
    /// A nanosecond field; its readable sibling's name.
    Nanos(&'static str),
    /// The name a nanosecond field's sibling would have: the object's own field then wins.
    Readable(&'static str),
    /// A producer's data, written untouched.
    Opaque,
    Other,
}

/// `value` serialised with the readable sibling of every nanosecond field named in `names`.
pub(crate) struct WithReadableTimes<'a, T: ?Sized> {
    pub(crate) value: &'a T,
    pub(crate) names: &'static TimeNames,
}

impl<T: Serialize + ?Sized> Serialize for WithReadableTimes<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.value.serialize(Adapter {
            inner: serializer,
            names: self.names,
        })
    }
}

/// A serializer that passes everything to `inner`, wrapping what nests so that objects at any
/// depth get their siblings.
struct Adapter<S> {
    inner: S,
    names: &'static TimeNames,
}

fn wrap<'a, T: ?Sized>(value: &'a T, names: &'static TimeNames) -> WithReadableTimes<'a, T> {
    WithReadableTimes { value, names }
}

macro_rules! pass {
    ($($method:ident($ty:ty)),* $(,)?) => {
        $(fn $method(self, v: $ty) -> Result<S::Ok, S::Error> {
            self.inner.$method(v)
        })*
    };
}

impl<S: Serializer> Serializer for Adapter<S> {
    type Ok = S::Ok;
    type Error = S::Error;
    type SerializeSeq = Nested<S::SerializeSeq>;
    type SerializeTuple = Nested<S::SerializeTuple>;
    type SerializeTupleStruct = Nested<S::SerializeTupleStruct>;
    type SerializeTupleVariant = Nested<S::SerializeTupleVariant>;
    type SerializeMap = Object<S::SerializeMap>;
    type SerializeStruct = Object<S::SerializeStruct>;
    type SerializeStructVariant = Object<S::SerializeStructVariant>;

    pass!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_i128(i128),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_u128(u128),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_char(char),
        serialize_str(&str),
        serialize_bytes(&[u8]),
        serialize_unit_struct(&'static str),
    );

    fn serialize_none(self) -> Result<S::Ok, S::Error> {
        self.inner.serialize_none()
    }

    fn serialize_unit(self) -> Result<S::Ok, S::Error> {
        self.inner.serialize_unit()
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<S::Ok, S::Error> {
        self.inner.serialize_some(&wrap(value, self.names))
    }

    fn serialize_unit_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
    ) -> Result<S::Ok, S::Error> {
        self.inner.serialize_unit_variant(name, index, variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result<S::Ok, S::Error> {
        self.inner
            .serialize_newtype_struct(name, &wrap(value, self.names))
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<S::Ok, S::Error> {
        self.inner
            .serialize_newtype_variant(name, index, variant, &wrap(value, self.names))
    }

    fn serialize_seq(self, len: Option<usize>) -> Result<Self::SerializeSeq, S::Error> {
        Ok(Nested::new(self.inner.serialize_seq(len)?, self.names))
    }

    fn serialize_tuple(self, len: usize) -> Result<Self::SerializeTuple, S::Error> {
        Ok(Nested::new(self.inner.serialize_tuple(len)?, self.names))
    }

    fn serialize_tuple_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleStruct, S::Error> {
        let inner = self.inner.serialize_tuple_struct(name, len)?;
        Ok(Nested::new(inner, self.names))
    }

    fn serialize_tuple_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleVariant, S::Error> {
        let inner = self
            .inner
            .serialize_tuple_variant(name, index, variant, len)?;
        Ok(Nested::new(inner, self.names))
    }

    fn serialize_map(self, len: Option<usize>) -> Result<Self::SerializeMap, S::Error> {
        Ok(Object::new(self.inner.serialize_map(len)?, self.names))
    }

    fn serialize_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStruct, S::Error> {
        Ok(Object::new(
            self.inner.serialize_struct(name, len)?,
            self.names,
        ))
    }

    fn serialize_struct_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStructVariant, S::Error> {
        let inner = self
            .inner
            .serialize_struct_variant(name, index, variant, len)?;
        Ok(Object::new(inner, self.names))
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

/// An array or tuple: its elements wrapped.
struct Nested<C> {
    inner: C,
    names: &'static TimeNames,
}

impl<C> Nested<C> {
    fn new(inner: C, names: &'static TimeNames) -> Self {
        Self { inner, names }
    }
}

macro_rules! nested {
    ($trait:ident, $method:ident) => {
        impl<C: $trait> $trait for Nested<C> {
            type Ok = C::Ok;
            type Error = C::Error;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), C::Error> {
                self.inner.$method(&wrap(value, self.names))
            }
            fn end(self) -> Result<C::Ok, C::Error> {
                self.inner.end()
            }
        }
    };
}

nested!(SerializeSeq, serialize_element);
nested!(SerializeTuple, serialize_element);
nested!(SerializeTupleStruct, serialize_field);
nested!(SerializeTupleVariant, serialize_field);

/// An object (a struct, a struct variant or a map): what its keys are, and the siblings it owes
/// when it ends.
struct Object<C> {
    inner: C,
    names: &'static TimeNames,
    /// The kind of the map key written last (a map may write a key, then its value).
    key: Key,
    /// Siblings owed: name and instant (`None`: null).
    owed: Vec<(&'static str, Option<i64>)>,
    /// Sibling names the object wrote itself.
    own: Vec<&'static str>,
}

impl<C> Object<C> {
    fn new(inner: C, names: &'static TimeNames) -> Self {
        Self {
            inner,
            names,
            key: Key::Other,
            owed: Vec::new(),
            own: Vec::new(),
        }
    }

    /// Notes what a field of kind `key` owes or settles.
    fn note<T: Serialize + ?Sized>(&mut self, key: Key, value: &T) {
        match key {
            Key::Nanos(sibling) => {
                if let Some(at) = instant(value) {
                    self.owed.push((sibling, at));
                }
            }
            Key::Readable(own) => self.own.push(own),
            Key::Opaque | Key::Other => {}
        }
    }

    /// Writes, with `write`, the siblings owed that the object did not write itself.
    fn settle<E>(
        &mut self,
        mut write: impl FnMut(&mut C, &'static str, &Readable) -> Result<(), E>,
    ) -> Result<(), E> {
        let Self {
            inner, owed, own, ..
        } = self;
        for (name, at) in owed.drain(..) {
            if !own.contains(&name) {
                write(inner, name, &Readable(at))?;
            }
        }
        Ok(())
    }
}

/// A field's value as its key says it is written: a producer's data untouched, the rest
/// wrapped.
enum Field<'a, T: ?Sized> {
    Untouched(&'a T),
    Wrapped(WithReadableTimes<'a, T>),
}

impl<'a, T: ?Sized> Field<'a, T> {
    fn of(key: Key, value: &'a T, names: &'static TimeNames) -> Self {
        match key {
            Key::Opaque => Field::Untouched(value),
            _ => Field::Wrapped(wrap(value, names)),
        }
    }
}

impl<T: Serialize + ?Sized> Serialize for Field<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Field::Untouched(v) => v.serialize(serializer),
            Field::Wrapped(v) => v.serialize(serializer),
        }
    }
}

impl<C: SerializeMap> SerializeMap for Object<C> {
    type Ok = C::Ok;
    type Error = C::Error;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), C::Error> {
        self.key = key_kind(key, self.names);
        self.inner.serialize_key(key)
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), C::Error> {
        let key = std::mem::replace(&mut self.key, Key::Other);
        self.note(key, value);
        self.inner
            .serialize_value(&Field::of(key, value, self.names))
    }

    fn serialize_entry<K: Serialize + ?Sized, V: Serialize + ?Sized>(
        &mut self,
        key: &K,
        value: &V,
    ) -> Result<(), C::Error> {
        let kind = key_kind(key, self.names);
        self.note(kind, value);
        self.inner
            .serialize_entry(key, &Field::of(kind, value, self.names))
    }

    fn end(mut self) -> Result<C::Ok, C::Error> {
        self.settle(|inner, name, text| inner.serialize_entry(name, text))?;
        self.inner.end()
    }
}

macro_rules! structure {
    ($trait:ident) => {
        impl<C: $trait> $trait for Object<C> {
            type Ok = C::Ok;
            type Error = C::Error;

            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<(), C::Error> {
                let kind = self.names.kind(key);
                self.note(kind, value);
                self.inner
                    .serialize_field(key, &Field::of(kind, value, self.names))
            }

            fn skip_field(&mut self, key: &'static str) -> Result<(), C::Error> {
                self.inner.skip_field(key)
            }

            fn end(mut self) -> Result<C::Ok, C::Error> {
                self.settle(|inner, name, text| inner.serialize_field(name, text))?;
                self.inner.end()
            }
        }
    };
}

structure!(SerializeStruct);
structure!(SerializeStructVariant);

/// An instant as its readable sibling: RFC 3339, or null for null and 0 (the API's "never").
struct Readable(Option<i64>);

impl Serialize for Readable {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            None | Some(0) => serializer.serialize_none(),
            Some(ns) => serializer.collect_str(&Rfc3339(ns)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn names() -> &'static TimeNames {
        static NAMES: std::sync::OnceLock<TimeNames> = std::sync::OnceLock::new();
        NAMES.get_or_init(|| {
            TimeNames::new(
                ["first_seen_ns", "timestamp_ns", "expires_ns", "last_hit_ns"]
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
            )
        })
    }

    fn written<T: Serialize>(value: &T) -> Value {
        let text = serde_json::to_string(&WithReadableTimes {
            value,
            names: names(),
        })
        .unwrap();
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn known_ns_fields_get_their_rfc3339_sibling_at_any_depth() {
        let v = written(
            &json!({"items": [{"first_seen_ns": 1_795_255_200_123_456_789i64,
            "events": [{"timestamp_ns": 1}], "expires_ns": null, "last_hit_ns": 0}]}),
        );
        assert_eq!(
            v["items"][0]["first_seen"],
            "2026-11-21T10:00:00.123456789Z"
        );
        assert_eq!(
            v["items"][0]["events"][0]["timestamp"],
            "1970-01-01T00:00:00.000000001Z"
        );
        assert_eq!(v["items"][0]["expires"], Value::Null);
        assert_eq!(v["items"][0]["last_hit"], Value::Null, "0 is never");
        assert_eq!(
            v["items"][0]["first_seen_ns"], 1_795_255_200_123_456_789i64,
            "kept"
        );
    }

    #[test]
    fn producer_fields_and_unknown_names_are_left_alone() {
        let v = written(
            &json!({"attributes": {"timestamp_ns": 5}, "sources": {"app_ns": 3},
            "timestamp_ns": 5, "timestamp": "the producer's own"}),
        );
        assert!(v["attributes"].get("timestamp").is_none());
        assert!(v["sources"].get("app").is_none());
        assert_eq!(
            v["timestamp"], "the producer's own",
            "an existing field wins"
        );
    }

    #[derive(serde::Serialize)]
    struct Inner {
        first_seen_ns: i64,
        expires_ns: Option<i64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        last_hit_ns: Option<i64>,
    }

    #[derive(serde::Serialize)]
    struct Outer {
        #[serde(flatten)]
        inner: Inner,
        timestamp: &'static str,
        timestamp_ns: u64,
        nested: Vec<Option<Inner>>,
        attributes: std::collections::BTreeMap<&'static str, i64>,
    }

    #[derive(serde::Serialize)]
    enum Change {
        Moved { first_seen_ns: i64 },
    }

    #[test]
    fn typed_answers_get_the_same_siblings_flattened_nested_and_in_variants() {
        let inner = |ns| Inner {
            first_seen_ns: ns,
            expires_ns: None,
            last_hit_ns: None,
        };
        let v = written(&Outer {
            inner: inner(1_000_000_000),
            timestamp: "its own",
            timestamp_ns: u64::MAX,
            nested: vec![Some(inner(2)), None],
            attributes: [("first_seen_ns", 3)].into_iter().collect(),
        });
        assert_eq!(v["first_seen"], "1970-01-01T00:00:01.000000000Z", "{v}");
        assert_eq!(v["expires"], Value::Null, "{v}");
        assert!(v.get("last_hit").is_none(), "a skipped field owes nothing");
        assert_eq!(v["timestamp"], "its own");
        assert_eq!(
            v["nested"][0]["first_seen"],
            "1970-01-01T00:00:00.000000002Z"
        );
        assert_eq!(v["nested"][1], Value::Null);
        assert!(v["attributes"].get("first_seen").is_none(), "{v}");
        let v = written(&Change::Moved { first_seen_ns: 0 });
        assert_eq!(v["Moved"]["first_seen"], Value::Null, "{v}");
        assert_eq!(v["Moved"]["first_seen_ns"], 0);
    }

    #[test]
    fn an_integer_past_i64_gets_no_sibling() {
        let v = written(&json!({"first_seen_ns": u64::MAX, "timestamp_ns": "text"}));
        assert!(v.get("first_seen").is_none(), "{v}");
        assert!(v.get("timestamp").is_none(), "{v}");
    }
}
