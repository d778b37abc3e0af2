//! Reading one value while it is written: what a map key is, and the instant a nanosecond field
//! holds. Both are serializers that accept only the few shapes they read and refuse the rest,
//! so nothing is copied or allocated to look.

use super::{Key, TimeNames};
use serde::ser::{self, Impossible, Serialize, Serializer};
use std::fmt;

/// What a map key is, read without copying it (only text keys can name a field).
pub(super) fn key_kind<K: Serialize + ?Sized>(key: &K, names: &'static TimeNames) -> Key {
    key.serialize(KeyReader(names)).unwrap_or(Key::Other)
}

/// The instant a nanosecond field holds: `Some(None)` for null, `None` when it is not an
/// integer (then it gets no sibling, as an integer beyond `i64` does not).
pub(super) fn instant<T: Serialize + ?Sized>(value: &T) -> Option<Option<i64>> {
    value.serialize(InstantReader).ok()
}

/// Why a value was not what a reader looks for (never shown: the value is then left alone).
#[derive(Debug)]
struct NotRead;

impl fmt::Display for NotRead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not a value this reader reads")
    }
}

impl std::error::Error for NotRead {}

impl ser::Error for NotRead {
    fn custom<T: fmt::Display>(_: T) -> Self {
        NotRead
    }
}

/// The refusals of a reader for every kind of value it does not read.
macro_rules! refuse {
    ($($method:ident($($arg:ty),*)),* $(,)?) => {
        $(fn $method(self, $(_: $arg),*) -> Result<Self::Ok, NotRead> {
            Err(NotRead)
        })*
    };
}

macro_rules! refuse_compound {
    () => {
        type SerializeSeq = Impossible<Self::Ok, NotRead>;
        type SerializeTuple = Impossible<Self::Ok, NotRead>;
        type SerializeTupleStruct = Impossible<Self::Ok, NotRead>;
        type SerializeTupleVariant = Impossible<Self::Ok, NotRead>;
        type SerializeMap = Impossible<Self::Ok, NotRead>;
        type SerializeStruct = Impossible<Self::Ok, NotRead>;
        type SerializeStructVariant = Impossible<Self::Ok, NotRead>;

        fn serialize_newtype_variant<T: Serialize + ?Sized>(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: &T,
        ) -> Result<Self::Ok, NotRead> {
            Err(NotRead)
        }
        fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, NotRead> {
            Err(NotRead)
        }
        fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, NotRead> {
            Err(NotRead)
        }
        fn serialize_tuple_struct(
            self,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeTupleStruct, NotRead> {
            Err(NotRead)
        }
        fn serialize_tuple_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeTupleVariant, NotRead> {
            Err(NotRead)
        }
        fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, NotRead> {
            Err(NotRead)
        }
        fn serialize_struct(
            self,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeStruct, NotRead> {
            Err(NotRead)
        }
        fn serialize_struct_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeStructVariant, NotRead> {
            Err(NotRead)
        }
        fn serialize_unit_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
        ) -> Result<Self::Ok, NotRead> {
            Err(NotRead)
        }
    };
}

/// Reads what a map key is.
struct KeyReader(&'static TimeNames);

impl Serializer for KeyReader {
    type Ok = Key;
    type Error = NotRead;
    refuse_compound!();
    refuse!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_char(char),
        serialize_bytes(&[u8]),
        serialize_none(),
        serialize_unit(),
        serialize_unit_struct(&'static str),
    );

    fn serialize_str(self, v: &str) -> Result<Key, NotRead> {
        Ok(self.0.kind(v))
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<Key, NotRead> {
        v.serialize(self)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<Key, NotRead> {
        v.serialize(self)
    }
}

/// Integers narrower than `i64`, read as one.
macro_rules! widen {
    ($($method:ident($ty:ty)),* $(,)?) => {
        $(fn $method(self, v: $ty) -> Result<Option<i64>, NotRead> {
            Ok(Some(v.into()))
        })*
    };
}

/// Reads the instant of a nanosecond field.
struct InstantReader;

impl Serializer for InstantReader {
    type Ok = Option<i64>;
    type Error = NotRead;
    refuse_compound!();
    refuse!(
        serialize_bool(bool),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_char(char),
        serialize_str(&str),
        serialize_bytes(&[u8]),
        serialize_unit_struct(&'static str),
    );

    widen!(
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
    );
    fn serialize_i64(self, v: i64) -> Result<Option<i64>, NotRead> {
        Ok(Some(v))
    }
    fn serialize_u64(self, v: u64) -> Result<Option<i64>, NotRead> {
        i64::try_from(v).map(Some).map_err(|_| NotRead)
    }
    fn serialize_none(self) -> Result<Option<i64>, NotRead> {
        Ok(None)
    }
    fn serialize_unit(self) -> Result<Option<i64>, NotRead> {
        Ok(None)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<Option<i64>, NotRead> {
        v.serialize(self)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        v: &T,
    ) -> Result<Option<i64>, NotRead> {
        v.serialize(self)
    }
}
