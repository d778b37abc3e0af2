//! What stage A hands stage B about one event: a fixed-size, `Copy` record.
//!
//! Detection needs a handful of numbers per event (time, source, template, severity, sizes, the
//! entities and the client address), not the event itself. A fixed-size record moves between
//! threads in pooled vectors without allocation, and keeps the detectors away from strings.

use crate::ueba::UebaType;
use bincode::{Decode, Encode};
use watchpost_proto::fmix64;

/// Entities kept on a record (the rest of an event's entities are stored, not scored).
pub const RECORD_ENTITIES: usize = 6;
/// Bytes of the source name kept on a record (longer names are cut; the hash is of the whole).
pub const SOURCE_NAME_BYTES: usize = 32;

/// No UEBA type: the entity is carried for context (related entities), not scored.
pub const NOT_SCORED: u8 = u8::MAX;

/// One entity of an event.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Encode, Decode)]
pub struct RecordEntity {
    /// Name hash, `hash64_seeded(canonical name, kind)`: the key of its UEBA baseline.
    pub hash: u64,
    /// UUID5 bytes.
    pub uuid: [u8; 16],
    /// `EntityKind as u8`.
    pub kind: u8,
    /// `Role as u8`.
    pub role: u8,
    /// `UebaType as u8`, or [`NOT_SCORED`].
    pub ueba: u8,
}

impl RecordEntity {
    /// The UEBA type it is scored as, if any.
    pub fn ueba_type(&self) -> Option<UebaType> {
        UebaType::ALL.get(self.ueba as usize).copied()
    }
}

/// An event as detection sees it. Between hosts it travels in a [`DetectBatch`]'s encoding
/// (`DetectBatch::encode_into`), whose layout follows these fields in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Encode, Decode)]
pub struct DetectRecord {
    /// Block key of the stored event (see [`watchpost_proto::event_id`]).
    pub block: [u8; 16],
    /// Position in the block.
    pub pos: u16,
    /// Event time, ns: the clock of every detector.
    pub ts_ns: i64,
    /// Hash of the source name (the `idx_source` key).
    pub source: u64,
    /// Template id.
    pub template: u64,
    /// The client address (first source-role IP), IPv4 mapped into IPv6; 0 when none.
    pub client_ip: u128,
    /// Hash of the reporting host; 0 when none.
    pub reporter: u64,
    /// Message length, bytes.
    pub message_len: u32,
    /// Severity 0 to 5.
    pub severity: u8,
    /// Entities found in the event (all of them, not only those kept).
    pub entity_count: u8,
    /// Entities kept in `entities`.
    pub n_entities: u8,
    /// Bytes used in `source_name`.
    pub source_len: u8,
    /// Which parts the receiving stage B worker owns: bit 0 the source's ensemble, bit 1 + i the
    /// UEBA baseline of `entities[i]`. With one stage B worker every bit is set.
    pub owned: u8,
    /// The entities.
    pub entities: [RecordEntity; RECORD_ENTITIES],
    /// The source name, cut to [`SOURCE_NAME_BYTES`].
    pub source_name: [u8; SOURCE_NAME_BYTES],
    /// Where its Sigma matches start in its batch's [`DetectBatch::sigma`].
    pub sigma_at: u32,
    /// How many Sigma matches it has there (see [`DetectBatch::sigma_of`]).
    pub n_sigma: u16,
    /// First indicator matched: its number in the IOC set + 1 (0: none).
    pub ioc: u32,
    /// Version of the IOC set `ioc` numbers into (see [`crate::IndicatorBook`]).
    pub ioc_version: u32,
}

impl Default for DetectRecord {
    fn default() -> DetectRecord {
        DetectRecord {
            block: [0; 16],
            pos: 0,
            ts_ns: 0,
            source: 0,
            template: 0,
            client_ip: 0,
            reporter: 0,
            message_len: 0,
            severity: 0,
            entity_count: 0,
            n_entities: 0,
            source_len: 0,
            owned: 0,
            entities: [RecordEntity::default(); RECORD_ENTITIES],
            source_name: [0; SOURCE_NAME_BYTES],
            sigma_at: 0,
            n_sigma: 0,
            ioc: 0,
            ioc_version: 0,
        }
    }
}

impl DetectRecord {
    /// The kept entities.
    pub fn entities(&self) -> &[RecordEntity] {
        &self.entities[..self.n_entities as usize]
    }

    /// The source name (possibly cut).
    pub fn source_name(&self) -> &str {
        let b = &self.source_name[..self.source_len as usize];
        match std::str::from_utf8(b) {
            Ok(s) => s,
            // Cut inside a character: keep the valid prefix.
            Err(e) => std::str::from_utf8(&b[..e.valid_up_to()]).unwrap_or(""),
        }
    }

    /// Sets the source name, cutting it to fit.
    pub fn set_source_name(&mut self, name: &str) {
        let n = name.len().min(SOURCE_NAME_BYTES);
        self.source_name[..n].copy_from_slice(&name.as_bytes()[..n]);
        self.source_len = n as u8;
    }

    /// The stage B worker that owns the source's ensemble.
    #[inline]
    pub fn source_shard(&self, shards: usize) -> usize {
        shard_of(self.source, shards)
    }
}

/// Bytes of a correlation group's text (`SourceIp=203.0.113.9`) kept on a hit.
pub const GROUP_TEXT_BYTES: usize = 64;

/// An event matched a rule that a correlation refers to: the group it joins, read in stage A
/// where the event's fields are at hand. Hits are rare next to events (only matches of
/// correlated rules), so they travel beside the records rather than growing every record.
#[derive(Clone, Copy, Debug, Encode, Decode)]
pub struct CorrelationHit {
    /// The matching event.
    pub record: DetectRecord,
    /// Catalogue version whose correlation plan numbered `corr`.
    pub version: u64,
    /// Correlation number in that plan.
    pub corr: u32,
    /// Position of the matched rule in the correlation's `rules`.
    pub slot: u8,
    /// Group key: the hashed group-by values. Hits shard by it.
    pub group: u64,
    /// Value key (`value_count`), else 0.
    pub value: u64,
    /// `field=value, ...` of the group, cut to fit.
    pub text: [u8; GROUP_TEXT_BYTES],
    /// Bytes used in `text`.
    pub text_len: u8,
    /// The entity the group's value names (the first group-by value that is one of the event's
    /// entities; the reporting host for a local address): what the alert is about.
    pub entity: Option<RecordEntity>,
}

impl CorrelationHit {
    /// The group's text.
    pub fn text(&self) -> &str {
        let b = &self.text[..self.text_len as usize];
        std::str::from_utf8(b).unwrap_or("")
    }
}

/// What one stage A worker hands one stage B worker per block.
#[derive(Debug, Default)]
pub struct DetectBatch {
    /// Records of the parts this worker owns.
    pub records: Vec<DetectRecord>,
    /// Correlation hits of the groups this worker owns.
    pub hits: Vec<CorrelationHit>,
    /// The records' Sigma matches (catalogue numbers, see [`crate::RuleBook`]), back to back:
    /// each record names its run. A list beside the records rather than an array in each keeps
    /// the records small and copyable while an event may match any number of rules, with no
    /// allocation per event once the list has grown to a batch's needs.
    pub sigma: Vec<u32>,
}

impl DetectBatch {
    /// Empty, with room for `events` records.
    pub fn with_capacity(events: usize) -> DetectBatch {
        DetectBatch {
            records: Vec::with_capacity(events),
            hits: Vec::with_capacity(16),
            sigma: Vec::with_capacity(events / 4),
        }
    }

    /// Nothing to send.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty() && self.hits.is_empty()
    }

    /// Empties it, keeping the capacity.
    pub fn clear(&mut self) {
        self.records.clear();
        self.hits.clear();
        self.sigma.clear();
    }

    /// The Sigma rules `record` (one of this batch's) matched.
    pub fn sigma_of(&self, record: &DetectRecord) -> &[u32] {
        let at = record.sigma_at as usize;
        self.sigma
            .get(at..at + usize::from(record.n_sigma))
            .unwrap_or(&[])
    }

    /// Appends `record` with `matches` as its Sigma matches.
    pub fn push(&mut self, mut record: DetectRecord, matches: &[u32]) {
        record.sigma_at = self.sigma.len() as u32;
        record.n_sigma = matches.len().min(usize::from(u16::MAX)) as u16;
        self.sigma
            .extend_from_slice(&matches[..usize::from(record.n_sigma)]);
        self.records.push(record);
    }
}

/// Hands each hit to the stage B worker that owns its group.
pub fn route_hits(hits: &[CorrelationHit], out: &mut [Box<DetectBatch>]) {
    let shards = out.len();
    for h in hits {
        out[shard_of(h.group, shards)].hits.push(*h);
    }
}

/// The stage B worker that owns key `key` among `shards`. Keys are hashes already; mixing them
/// once more keeps the shard independent of the bits a hash map uses inside the worker.
#[inline]
pub fn shard_of(key: u64, shards: usize) -> usize {
    if shards <= 1 {
        0
    } else {
        (fmix64(key ^ 0x5bd1_e995) % shards as u64) as usize
    }
}

/// Splits `batch`'s records between `shards` stage B workers: each record goes to every worker
/// that owns a part of it, with `owned` saying which parts. `out[i]` receives worker i's records;
/// the Sigma matches go with the record to the worker that owns its source (the one that acts on
/// them), and to no other.
pub fn route(batch: &DetectBatch, out: &mut [Box<DetectBatch>]) {
    let shards = out.len();
    if shards == 1 {
        for r in &batch.records {
            let mut r = *r;
            r.owned = u8::MAX;
            out[0].push(r, batch.sigma_of(&r));
        }
        return;
    }
    for r in &batch.records {
        // The workers owning a part, with the parts each owns: at most one per part (the
        // source and the kept entities), so a short list rather than an array per worker,
        // whatever the worker count (a fleet has 64 or 256 partitions).
        let mut parts = [(0usize, 0u8); RECORD_ENTITIES + 1];
        let mut n = 0;
        let mut own = |shard: usize, bit: u8| match parts[..n].iter_mut().find(|p| p.0 == shard) {
            Some(p) => p.1 |= bit,
            None => {
                parts[n] = (shard, bit);
                n += 1;
            }
        };
        own(r.source_shard(shards), 1);
        for (i, e) in r.entities().iter().enumerate() {
            if e.ueba != NOT_SCORED {
                own(shard_of(e.hash, shards), 2 << i);
            }
        }
        for &(s, mask) in &parts[..n] {
            let mut copy = *r;
            copy.owned = mask;
            let matches = if mask & 1 != 0 {
                batch.sigma_of(r)
            } else {
                &[]
            };
            out[s].push(copy, matches);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routing_gives_every_part_to_exactly_one_worker() {
        let mut rec = DetectRecord {
            source: 42,
            n_entities: 3,
            ..DetectRecord::default()
        };
        for (i, h) in [7u64, 99, 12345].into_iter().enumerate() {
            rec.entities[i] = RecordEntity {
                hash: h,
                ueba: if i == 1 { NOT_SCORED } else { 0 },
                ..RecordEntity::default()
            };
        }
        let mut batch = DetectBatch::default();
        batch.push(DetectRecord::default(), &[5]);
        batch.push(rec, &[1, 2, 3, 4, 5, 6, 7, 8, 9]);
        let mut out: Vec<Box<DetectBatch>> = (0..4).map(|_| Box::default()).collect();
        route(&batch, &mut out);
        let mut owned = 0u8;
        for b in &out {
            for r in b.records.iter().filter(|r| r.source == 42) {
                assert_eq!(owned & r.owned, 0, "a part owned twice");
                owned |= r.owned;
                // The matches travel with the source's part only, every one of them.
                let matches = b.sigma_of(r);
                if r.owned & 1 != 0 {
                    assert_eq!(matches, [1, 2, 3, 4, 5, 6, 7, 8, 9]);
                } else {
                    assert!(matches.is_empty());
                }
            }
        }
        assert_eq!(
            owned,
            1 | 2 | 8,
            "source and both scored entities, once each"
        );
        // A fleet's partition count, past the 64 bits of a mask.
        let mut many: Vec<Box<DetectBatch>> = (0..256).map(|_| Box::default()).collect();
        route(&batch, &mut many);
        let owned_many = many
            .iter()
            .flat_map(|b| b.records.iter().filter(|r| r.source == 42))
            .fold(0u8, |all, r| {
                assert_eq!(all & r.owned, 0, "a part owned twice");
                all | r.owned
            });
        assert_eq!(owned_many, 1 | 2 | 8);
        let mut one: Vec<Box<DetectBatch>> = vec![Box::default()];
        route(&batch, &mut one);
        assert_eq!(one[0].records[1].owned, u8::MAX);
        assert_eq!(one[0].sigma_of(&one[0].records[0]), [5]);
        assert_eq!(one[0].sigma_of(&one[0].records[1]).len(), 9);
    }

    #[test]
    fn long_source_names_are_cut_on_a_character_boundary() {
        let mut r = DetectRecord::default();
        r.set_source_name(&"é".repeat(20));
        assert_eq!(r.source_name(), "é".repeat(16));
    }
}
