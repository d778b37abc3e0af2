//! The on-disk encoding of events: blocks of bincode records with an offset table.
//!
//! Events are stored a block per worker batch (up to `dataplane.batch_size` events) under one
//! RocksDB key, not one key per event: a million events a second would otherwise mean several
//! million RocksDB writes a second once the indexes are counted. The offset table lets a reader
//! decode just the records an index points at. A small fixed-size header per block lives in its
//! own column family so that queries can skip blocks by time and severity without reading them.
//!
//! Record fields, in order (bincode 2, standard configuration): `timestamp_ns` i64, `received_ns`
//! i64, `input` u8, `severity` u8, `flags` u8, `template_id` u64, `source`, `host`, `message`
//! strings, `entities` as a sequence of (kind u8, role u8, canonical name), `attributes` as a
//! sequence of (key, value) strings.

use bincode::enc::Encoder;
use bincode::error::EncodeError;
use bincode::{Decode, Encode};
use std::borrow::Cow;
use std::ops::Range;
use watchpost_proto::{Role, bincode_config};

/// Storage format version written as the first byte of every new block (see [`BlockReader`]).
pub const BLOCK_VERSION: u8 = 2;

/// Record flag: the line was cut at `dataplane.max_line_bytes`.
pub const FLAG_TRUNCATED: u8 = 1;
/// Record flag: the line was not valid UTF-8 (invalid bytes replaced).
pub const FLAG_INVALID_UTF8: u8 = 2;
/// Record flag: the line did not parse as its input's format and is kept as free text.
pub const FLAG_MALFORMED: u8 = 4;

/// An entity of an event being built: its canonical name lives in the worker's arena.
#[derive(Clone, Debug)]
pub struct EntitySlot {
    /// `EntityKind as u8`.
    pub kind: u8,
    /// `Role as u8`.
    pub role: u8,
    /// Canonical name, in the arena.
    pub name: Range<u32>,
    /// `hash64_seeded(name, kind)`: the index key and the "seen before" key.
    pub hash: u64,
}

/// A borrowed view of one normalised event, encoded without copying into an owned record.
pub struct EventView<'a> {
    /// See [`StoredEvent`].
    pub timestamp_ns: i64,
    /// See [`StoredEvent`].
    pub received_ns: i64,
    /// See [`StoredEvent`].
    pub input: u8,
    /// See [`StoredEvent`].
    pub severity: u8,
    /// See [`StoredEvent`].
    pub flags: u8,
    /// See [`StoredEvent`].
    pub template_id: u64,
    /// Backing text of every range below.
    pub arena: &'a str,
    /// Source, in the arena.
    pub source: Range<u32>,
    /// Host, in the arena.
    pub host: Range<u32>,
    /// Message, in the arena.
    pub message: Range<u32>,
    /// Entities.
    pub entities: &'a [EntitySlot],
    /// Attribute key and value ranges, in the arena.
    pub attributes: &'a [(Range<u32>, Range<u32>)],
}

/// Sigma rules read the event being built in place, before it is encoded: no copy, no allocation.
impl watchpost_proto::EventFields for EventView<'_> {
    #[inline]
    fn attribute(&self, name: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| self.s(k) == name)
            .map(|(_, v)| self.s(v))
    }
    #[inline]
    fn source(&self) -> &str {
        self.s(&self.source)
    }
    #[inline]
    fn host(&self) -> &str {
        self.s(&self.host)
    }
    #[inline]
    fn message(&self) -> &str {
        self.s(&self.message)
    }
    #[inline]
    fn any_value(&self, f: &mut dyn FnMut(&str) -> bool) -> bool {
        f(self.s(&self.message)) || self.attributes.iter().any(|(_, v)| f(self.s(v)))
    }
    #[inline]
    fn any_attribute<'b>(&'b self, f: &mut dyn FnMut(&'b str, &'b str) -> bool) -> bool {
        self.attributes.iter().any(|(k, v)| f(self.s(k), self.s(v)))
    }
    #[inline]
    fn any_attribute_name<'b>(&'b self, f: &mut dyn FnMut(&'b [u8]) -> bool) -> bool {
        self.attributes.iter().any(|(k, _)| f(self.bytes(k)))
    }
    #[inline]
    fn attribute_value_at(&self, index: usize) -> Option<&str> {
        self.attributes.get(index).map(|(_, v)| self.s(v))
    }
    #[inline]
    fn attribute_name_at(&self, index: usize) -> Option<&[u8]> {
        self.attributes.get(index).map(|(k, _)| self.bytes(k))
    }
    #[inline]
    fn attribute_bytes_at(&self, index: usize) -> Option<&[u8]> {
        self.attributes.get(index).map(|(_, v)| self.bytes(v))
    }
    #[inline]
    fn values_text(&self) -> Option<&[u8]> {
        let (start, end) = self.values_bounds()?;
        self.arena.as_bytes().get(start..end)
    }
    fn entity(&self, kind: &str, role: Option<&str>) -> Option<&str> {
        self.entities
            .iter()
            .find(|e| {
                watchpost_proto::EntityKind::from_u8(e.kind).is_some_and(|k| k.name() == kind)
                    && role.is_none_or(|r| Role::from_u8(e.role).name() == r)
            })
            .map(|e| self.s(&e.name))
    }
}

impl EventView<'_> {
    /// The ranges of the values a keyword search reads: source, host, message, attributes'.
    fn value_ranges(&self) -> impl Iterator<Item = &Range<u32>> {
        [&self.source, &self.host, &self.message]
            .into_iter()
            .chain(self.attributes.iter().map(|(_, value)| value))
    }

    /// Where the event's non-empty values start and end in the arena (an empty range may sit
    /// anywhere, at 0 for a missing host).
    fn values_bounds(&self) -> Option<(usize, usize)> {
        self.value_ranges()
            .filter(|r| r.start < r.end)
            .fold(None, |bounds, r| {
                let (start, end) = (r.start as usize, r.end as usize);
                Some(bounds.map_or((start, end), |(s, e): (usize, usize)| {
                    (s.min(start), e.max(end))
                }))
            })
    }

    /// The bytes of `r`: for names, which the rule engine compares as bytes, without the
    /// check `s` makes that each end falls on a character's boundary.
    #[inline]
    fn bytes(&self, r: &Range<u32>) -> &[u8] {
        self.arena
            .as_bytes()
            .get(r.start as usize..r.end as usize)
            .unwrap_or_default()
    }

    #[inline]
    fn s(&self, r: &Range<u32>) -> &str {
        self.arena
            .get(r.start as usize..r.end as usize)
            .unwrap_or("")
    }
}

impl Encode for EventView<'_> {
    fn encode<E: Encoder>(&self, e: &mut E) -> Result<(), EncodeError> {
        self.timestamp_ns.encode(e)?;
        self.received_ns.encode(e)?;
        self.input.encode(e)?;
        self.severity.encode(e)?;
        self.flags.encode(e)?;
        self.template_id.encode(e)?;
        self.s(&self.source).encode(e)?;
        self.s(&self.host).encode(e)?;
        self.s(&self.message).encode(e)?;
        (self.entities.len() as u64).encode(e)?;
        for ent in self.entities {
            ent.kind.encode(e)?;
            ent.role.encode(e)?;
            self.s(&ent.name).encode(e)?;
        }
        (self.attributes.len() as u64).encode(e)?;
        for (k, v) in self.attributes {
            self.s(k).encode(e)?;
            self.s(v).encode(e)?;
        }
        Ok(())
    }
}

/// One event as decoded from the store.
#[derive(Clone, Debug, PartialEq, Decode)]
pub struct StoredEvent {
    /// Event time, ns.
    pub timestamp_ns: i64,
    /// Receive time, ns.
    pub received_ns: i64,
    /// `InputId as u8`.
    pub input: u8,
    /// 0..=5.
    pub severity: u8,
    /// `FLAG_*` bits.
    pub flags: u8,
    /// Template id; 0 when the event has no message.
    pub template_id: u64,
    /// Producing program or log.
    pub source: String,
    /// Producing host.
    pub host: String,
    /// Message text.
    pub message: String,
    /// (kind, role, canonical name).
    pub entities: Vec<(u8, u8, String)>,
    /// Other fields.
    pub attributes: Vec<(String, String)>,
}

impl StoredEvent {
    /// The event as Sigma rules read it outside the pipeline (dry runs, benches).
    pub fn into_plain(self) -> watchpost_proto::PlainEvent {
        watchpost_proto::PlainEvent {
            source: self.source,
            host: self.host,
            message: self.message,
            attributes: self.attributes,
            entities: self
                .entities
                .into_iter()
                .map(|(kind, role, name)| {
                    let kind = watchpost_proto::EntityKind::from_u8(kind)
                        .map_or("", |k| k.name())
                        .to_string();
                    (kind, Role::from_u8(role).name().to_string(), name)
                })
                .collect(),
        }
    }
}

/// Fixed-size summary of a block, kept apart from the block so scans can skip without reading it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockMeta {
    /// Events in the block.
    pub count: u16,
    /// Earliest `timestamp_ns`.
    pub min_ts: i64,
    /// Latest `timestamp_ns`.
    pub max_ts: i64,
    /// Events per severity 0..=5.
    pub severity_counts: [u32; 6],
}

/// Encoded size of [`BlockMeta`].
pub const BLOCK_META_LEN: usize = 2 + 8 + 8 + 24;

impl BlockMeta {
    /// Appends the fixed-size encoding to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.count.to_le_bytes());
        out.extend_from_slice(&self.min_ts.to_le_bytes());
        out.extend_from_slice(&self.max_ts.to_le_bytes());
        for c in self.severity_counts {
            out.extend_from_slice(&c.to_le_bytes());
        }
    }

    /// Reads it back; `None` if `bytes` is too short.
    pub fn decode(bytes: &[u8]) -> Option<BlockMeta> {
        if bytes.len() < BLOCK_META_LEN {
            return None;
        }
        let u16_at = |i: usize| u16::from_le_bytes([bytes[i], bytes[i + 1]]);
        let i64_at = |i: usize| i64::from_le_bytes(bytes[i..i + 8].try_into().unwrap_or([0; 8]));
        let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().unwrap_or([0; 4]));
        let mut severity_counts = [0u32; 6];
        for (n, c) in severity_counts.iter_mut().enumerate() {
            *c = u32_at(18 + 4 * n);
        }
        Some(BlockMeta {
            count: u16_at(0),
            min_ts: i64_at(2),
            max_ts: i64_at(10),
            severity_counts,
        })
    }
}

/// A stored block, opened for reading.
///
/// Two layouts exist. Version 1: version (1), count (u16 LE), an offset table (u32 LE per record,
/// relative to the first record) and the records. Version 2, written since: version (1), count
/// (u16 LE), the payload's length (u32 LE) and an LZ4 block holding the payload: the records, then
/// the offset table. The workers compress each block before it reaches the writer, so the WAL, the
/// memtable and every flush and compaction carry a third to a quarter of the bytes.
pub struct BlockReader<'a> {
    payload: Cow<'a, [u8]>,
    count: usize,
    records: Range<usize>,
    offsets_at: usize,
}

/// Version byte of an uncompressed block.
const BLOCK_V1: u8 = 1;
/// Largest payload a block may declare; a larger claim is corruption, not a block.
const MAX_PAYLOAD: usize = 256 << 20;

impl<'a> BlockReader<'a> {
    /// Checks the header (and decompresses a version 2 block); `None` for an unknown version, a
    /// short block or a payload that does not decompress.
    pub fn new(bytes: &'a [u8]) -> Option<BlockReader<'a>> {
        if bytes.len() < 3 {
            return None;
        }
        let count = u16::from_le_bytes([bytes[1], bytes[2]]) as usize;
        let table = 4 * count;
        match bytes[0] {
            BLOCK_V1 => {
                let payload = bytes.get(3..)?;
                if payload.len() < table {
                    return None;
                }
                let len = payload.len();
                Some(BlockReader {
                    payload: Cow::Borrowed(payload),
                    count,
                    records: table..len,
                    offsets_at: 0,
                })
            }
            BLOCK_VERSION => {
                let raw = u32::from_le_bytes(bytes.get(3..7)?.try_into().ok()?) as usize;
                if raw < table || raw > MAX_PAYLOAD {
                    return None;
                }
                let mut payload = vec![0u8; raw];
                if lz4::decompress(bytes.get(7..)?, &mut payload) != Some(raw) {
                    return None;
                }
                Some(BlockReader {
                    payload: Cow::Owned(payload),
                    count,
                    records: 0..raw - table,
                    offsets_at: raw - table,
                })
            }
            _ => None,
        }
    }

    /// Events in the block.
    pub fn len(&self) -> usize {
        self.count
    }

    /// No events.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Decodes record `index`.
    pub fn get(&self, index: usize) -> Option<StoredEvent> {
        if index >= self.count {
            return None;
        }
        let off = |n: usize| {
            let p = self.offsets_at + 4 * n;
            u32::from_le_bytes(self.payload[p..p + 4].try_into().unwrap_or([0; 4])) as usize
        };
        let start = self.records.start + off(index);
        let end = if index + 1 < self.count {
            self.records.start + off(index + 1)
        } else {
            self.records.end
        };
        let rec = self.payload.get(start..end.min(self.records.end))?;
        bincode::decode_from_slice::<StoredEvent, _>(rec, bincode_config())
            .ok()
            .map(|(e, _)| e)
    }
}

/// Writes an uncompressed (version 1) block into `out` (cleared first).
pub fn write_block(out: &mut Vec<u8>, offsets: &[u32], records: &[u8]) {
    out.clear();
    out.push(BLOCK_V1);
    out.extend_from_slice(&(offsets.len() as u16).to_le_bytes());
    for o in offsets {
        out.extend_from_slice(&o.to_le_bytes());
    }
    out.extend_from_slice(records);
}

/// Writes a compressed (version 2) block into `out` (cleared first).
///
/// The offset table is appended to `records` for the compressor and taken off again, so the only
/// buffers are the caller's, reused from block to block.
pub fn seal_block(out: &mut Vec<u8>, offsets: &[u32], records: &mut Vec<u8>) {
    let records_len = records.len();
    for o in offsets {
        records.extend_from_slice(&o.to_le_bytes());
    }
    out.clear();
    out.push(BLOCK_VERSION);
    out.extend_from_slice(&(offsets.len() as u16).to_le_bytes());
    out.extend_from_slice(&(records.len() as u32).to_le_bytes());
    let header = out.len();
    out.resize(header + lz4::bound(records.len()), 0);
    let compressed = lz4::compress(records, &mut out[header..]);
    records.truncate(records_len);
    match compressed {
        Some(n) => out.truncate(header + n),
        // Only for a payload over LZ4's 2 GiB limit; an uncompressed block is still right.
        None => write_block(out, offsets, records),
    }
}

/// LZ4 block compression through the C library that RocksDB already links.
///
/// The C compressor keeps its hash table on the stack, so compressing allocates nothing (pure-Rust
/// LZ4 crates put the table on the heap for every call, which the zero-allocation test catches).
mod lz4 {
    use std::os::raw::{c_char, c_int};

    /// Room the compressed form of `len` bytes may need (`LZ4_COMPRESSBOUND`).
    pub fn bound(len: usize) -> usize {
        len + len / 255 + 16
    }

    /// Compresses `src` into `dst` (at least `bound(src.len())` long); the compressed length.
    pub fn compress(src: &[u8], dst: &mut [u8]) -> Option<usize> {
        let src_len = c_int::try_from(src.len()).ok()?;
        let dst_len = c_int::try_from(dst.len()).ok()?;
        // SAFETY: both pointers are valid for the lengths passed, which fit in c_int; LZ4 reads
        // `src_len` bytes from `src` and writes at most `dst_len` bytes into `dst`.
        let n = unsafe {
            lz4_sys::LZ4_compress_default(
                src.as_ptr().cast::<c_char>(),
                dst.as_mut_ptr().cast::<c_char>(),
                src_len,
                dst_len,
            )
        };
        usize::try_from(n).ok().filter(|&n| n > 0 || src.is_empty())
    }

    /// Decompresses `src` into `dst`; the decompressed length, `None` for corrupt input.
    pub fn decompress(src: &[u8], dst: &mut [u8]) -> Option<usize> {
        let src_len = c_int::try_from(src.len()).ok()?;
        let dst_len = c_int::try_from(dst.len()).ok()?;
        // SAFETY: as above; `LZ4_decompress_safe` never reads past `src_len` bytes nor writes past
        // `dst_len` bytes whatever the input, and reports malformed input as a negative result.
        let n = unsafe {
            lz4_sys::LZ4_decompress_safe(
                src.as_ptr().cast::<c_char>(),
                dst.as_mut_ptr().cast::<c_char>(),
                src_len,
                dst_len,
            )
        };
        usize::try_from(n).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use watchpost_proto::EventFields;

    #[test]
    fn a_view_decodes_as_the_owned_record() {
        let arena = "sshdweb-01Accepted password for alice from 10.0.0.5alice10.0.0.5pidx42";
        let view = EventView {
            timestamp_ns: 5,
            received_ns: 7,
            input: 1,
            severity: 2,
            flags: FLAG_TRUNCATED,
            template_id: 99,
            arena,
            source: 0..4,
            host: 4..10,
            message: 10..51,
            entities: &[
                EntitySlot {
                    kind: 1,
                    role: 2,
                    name: 51..56,
                    hash: 1,
                },
                EntitySlot {
                    kind: 0,
                    role: 0,
                    name: 56..64,
                    hash: 2,
                },
            ],
            attributes: &[(64..67, 67..70)],
        };
        // The rule engine reads the names alone, and values by position.
        let mut names = Vec::new();
        view.any_attribute_name(&mut |name| {
            names.push(name);
            false
        });
        assert_eq!(names, [b"pid"]);
        assert_eq!(view.attribute_value_at(0), Some("x42"));
        assert_eq!(view.attribute_value_at(1), None);
        assert_eq!(view.attribute_bytes_at(0), Some(&b"x42"[..]));
        assert_eq!(view.attribute_bytes_at(1), None);
        assert_eq!(view.attribute_name_at(0), Some(&b"pid"[..]));
        assert_eq!(view.attribute_name_at(1), None);
        let mut records = Vec::new();
        let mut offsets = Vec::new();
        for _ in 0..2 {
            offsets.push(records.len() as u32);
            bincode::encode_into_std_write(&view, &mut records, bincode_config()).unwrap();
        }
        let mut plain = Vec::new();
        write_block(&mut plain, &offsets, &records);
        let mut sealed = Vec::new();
        let before = records.clone();
        seal_block(&mut sealed, &offsets, &mut records);
        assert_eq!(records, before, "sealing leaves the records as they were");
        assert_eq!(sealed[0], BLOCK_VERSION);
        for block in [&plain, &sealed] {
            let r = BlockReader::new(block).unwrap();
            assert_eq!(r.len(), 2);
            assert_eq!(r.get(0).unwrap(), r.get(1).unwrap());
        }
        let r = BlockReader::new(&sealed).unwrap();
        let e = r.get(1).unwrap();
        assert_eq!(e.source, "sshd");
        assert_eq!(e.host, "web-01");
        assert_eq!(e.message, "Accepted password for alice from 10.0.0.5");
        assert_eq!(
            e.entities,
            vec![(1, 2, "alice".into()), (0, 0, "10.0.0.5".into())]
        );
        assert_eq!(e.attributes, vec![("pid".into(), "x42".into())]);
        assert_eq!(
            (e.timestamp_ns, e.received_ns, e.template_id, e.flags),
            (5, 7, 99, FLAG_TRUNCATED)
        );
        assert!(r.get(2).is_none());
    }

    #[test]
    fn the_values_text_spans_the_values_only() {
        // An empty host at 0, as a record without one has: not the text's start.
        let arena = "zzsshdImagec:\\a.exeUserbob";
        let view = EventView {
            timestamp_ns: 0,
            received_ns: 0,
            input: 0,
            severity: 0,
            flags: 0,
            template_id: 0,
            arena,
            source: 2..6,
            host: 0..0,
            message: 6..6,
            entities: &[],
            attributes: &[(6..11, 11..19), (19..23, 23..26)],
        };
        // From the source to the last value, the names between.
        let text = view.values_text().unwrap();
        assert_eq!(text, "sshdImagec:\\a.exeUserbob".as_bytes());
        let bare = EventView {
            source: 0..0,
            attributes: &[],
            ..view
        };
        assert!(bare.values_text().is_none());
    }

    #[test]
    fn corrupt_blocks_are_refused_not_panicked_on() {
        assert!(BlockReader::new(&[]).is_none());
        assert!(BlockReader::new(&[9, 1, 0]).is_none());
        assert!(BlockReader::new(&[BLOCK_V1, 5, 0, 1]).is_none());
        let r = BlockReader::new(&[BLOCK_V1, 1, 0, 0, 0, 0, 0, 0xff]).unwrap();
        assert!(r.get(0).is_none());
        // A payload length far past the limit, garbage for LZ4, a short payload, an offset
        // past the end: refused or empty, never a panic.
        assert!(BlockReader::new(&[BLOCK_VERSION, 1, 0, 0xff, 0xff, 0xff, 0xff, 0]).is_none());
        assert!(BlockReader::new(&[BLOCK_VERSION, 1, 0, 8, 0, 0, 0, 0xff, 0x00]).is_none());
        assert!(BlockReader::new(&[BLOCK_VERSION, 1, 0, 8, 0]).is_none());
        let mut sealed = Vec::new();
        seal_block(&mut sealed, &[0, 900], &mut vec![1, 2, 3]);
        let r = BlockReader::new(&sealed).unwrap();
        assert!(r.get(0).is_none() && r.get(1).is_none());
    }

    #[test]
    fn block_meta_round_trips() {
        let m = BlockMeta {
            count: 3,
            min_ts: -1,
            max_ts: 9,
            severity_counts: [1, 0, 2, 0, 0, 7],
        };
        let mut b = Vec::new();
        m.encode(&mut b);
        assert_eq!(b.len(), BLOCK_META_LEN);
        assert_eq!(BlockMeta::decode(&b), Some(m));
        assert_eq!(BlockMeta::decode(&b[1..]), None);
    }
}
