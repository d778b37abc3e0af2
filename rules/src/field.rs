//! A field reference resolved through the mapping once, at compile time: the places (an
//! attribute, a translated attribute, the source, host, message or an entity) an event's value is
//! read from, first found wins. Shared by the Sigma engine, its gates and the correlations.

use crate::mapping::{FieldSource, Mapping};
use watchpost_proto::EventFields;

/// A field reference resolved through the mapping.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Field(pub(crate) Box<[FieldSource]>);

impl Field {
    /// The value of the first of its places the event has.
    #[inline]
    pub(crate) fn get<'e, E: EventFields>(&self, e: &'e E) -> Option<&'e str> {
        self.0.iter().find_map(|p| place_value(p, e))
    }
}

/// The value one place of a field reads from `e`.
#[inline]
pub(crate) fn place_value<'e, E: EventFields>(place: &FieldSource, e: &'e E) -> Option<&'e str> {
    match place {
        FieldSource::Attr(name) => e.attribute(name),
        FieldSource::Translated { name, values } => e.attribute(name).map(|v| {
            values
                .iter()
                .find(|(from, _)| from.eq_ignore_ascii_case(v))
                .map_or(v, |(_, to)| *to)
        }),
        FieldSource::Source => Some(e.source()).filter(|s| !s.is_empty()),
        FieldSource::Host => Some(e.host()).filter(|s| !s.is_empty()),
        FieldSource::Message => Some(e.message()).filter(|s| !s.is_empty()),
        FieldSource::Entity { kind, role } => e.entity(kind, role.as_deref()),
    }
}

pub(crate) fn resolve(mapping: &Mapping, name: &str) -> Field {
    Field(mapping.places(name).into_boxed_slice())
}
