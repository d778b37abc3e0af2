//! The detection batch as bytes: the stable, versioned encoding of what stage A hands stage B.
//!
//! Inside one process a [`DetectBatch`] moves between threads as it is. Between hosts (a sensor
//! running stage A, a detector running stage B) it travels as bytes, and the two ends may run
//! different builds for the length of a rolling upgrade. So the encoding is fixed and named:
//!
//! ```text
//! format    u8 = DETECT_BATCH_FORMAT (2)
//! records   sequence of DetectRecord    (a length, then each record's fields in declaration order)
//! sigma     sequence of u64             (the records' Sigma matches as rule keys; each record names its run)
//! hits      sequence of CorrelationHit  (each carries its own DetectRecord)
//! ```
//!
//! Integers and sequences as bincode 2 writes them in its standard configuration (the one of
//! every stored record, [`watchpost_proto::bincode_config`]): variable-length little-endian
//! integers, a sequence as its length then its elements, fixed arrays without a length, an
//! `Option` as a 0/1 tag then the value. `docs/architecture.md` ("The detection batch on the
//! wire") lists every field; a test pins the bytes of one batch, so a change to a field changes
//! the test and must come with a new format number.
//!
//! Content travels by key, not by number ([`crate::content`]; format 1 sent the numbers, which
//! mean other rules on a host whose content arrived in another order): a Sigma match is its
//! rule's key; a record's `ioc` and `ioc_version` carry the low and high halves of the
//! indicator's key (0: none); a hit's `version` carries its correlation's key and its `corr`
//! is 0. The receiver turns keys back into its own numbers as it decodes, and drops (and
//! counts) a match whose content it does not hold.
//!
//! Decoding checks what the in-process code takes for granted (counts within their arrays,
//! matches within the batch, in record order): a batch from the network is refused with a
//! reason, never indexed out of bounds.

use crate::Error;
use crate::content::{NameContent, NumberContent, Unresolved};
use crate::record::{
    CorrelationHit, DetectBatch, DetectRecord, GROUP_TEXT_BYTES, RECORD_ENTITIES, SOURCE_NAME_BYTES,
};
use bincode::Decode;
use watchpost_proto::bincode_config;

/// The format number written first in every encoded batch. Bump it with any change to the fields
/// of [`DetectRecord`], [`crate::RecordEntity`] or [`crate::CorrelationHit`] or their order.
pub const DETECT_BATCH_FORMAT: u8 = 2;

/// What decoding errors name.
const MODEL: &str = "detection batch";

/// Highest severity a record may carry (`Severity::Critical`).
const MAX_SEVERITY: u8 = 5;

/// A Sigma match whose key this host does not hold, until the matches are compacted.
const UNKNOWN_RULE: u32 = u32::MAX;

impl DetectBatch {
    /// Appends the batch's encoding (see the module documentation) to `out`, its content named
    /// by `names`.
    pub fn encode_into(&self, out: &mut Vec<u8>, names: &mut (impl NameContent + ?Sized)) {
        out.push(DETECT_BATCH_FORMAT);
        let config = bincode_config();
        // Encoding into a Vec cannot fail for lack of space, and every field is encodable.
        let _ = bincode::encode_into_std_write(self.records.len() as u64, out, config);
        for r in &self.records {
            let _ = bincode::encode_into_std_write(keyed(r, names), out, config);
        }
        let _ = bincode::encode_into_std_write(self.sigma.len() as u64, out, config);
        for &rule in &self.sigma {
            let _ = bincode::encode_into_std_write(names.rule(rule), out, config);
        }
        let _ = bincode::encode_into_std_write(self.hits.len() as u64, out, config);
        for h in &self.hits {
            let hit = CorrelationHit {
                record: keyed(&h.record, names),
                version: names.correlation(h.version, h.corr),
                corr: 0,
                ..*h
            };
            let _ = bincode::encode_into_std_write(hit, out, config);
        }
    }

    /// Replaces the batch's content with the batch encoded in `bytes`, reusing its buffers, its
    /// content numbered by `numbers`; says what it dropped for want of content. On an error the
    /// batch is left empty.
    pub fn decode_from(
        &mut self,
        bytes: &[u8],
        numbers: &mut (impl NumberContent + ?Sized),
    ) -> Result<Unresolved, Error> {
        self.clear();
        let decoded = self.read(bytes, numbers);
        if decoded.is_err() {
            self.clear();
        }
        decoded
    }

    fn read(
        &mut self,
        bytes: &[u8],
        numbers: &mut (impl NumberContent + ?Sized),
    ) -> Result<Unresolved, Error> {
        let mut rest = after_format(bytes, MODEL, DETECT_BATCH_FORMAT)?;
        read_sequence(&mut rest, &mut self.records, "records")?;
        let matches: u64 = read(&mut rest, "sigma")?;
        if matches > rest.len() as u64 {
            return Err(inconsistent(format!(
                "sigma: {matches} announced, {} bytes left",
                rest.len()
            )));
        }
        for _ in 0..matches {
            let key: u64 = read(&mut rest, "sigma")?;
            self.sigma.push(numbers.rule(key).unwrap_or(UNKNOWN_RULE));
        }
        read_sequence(&mut rest, &mut self.hits, "hits")?;
        if !rest.is_empty() {
            return Err(inconsistent(format!(
                "{} bytes after the last hit",
                rest.len()
            )));
        }
        let mut end_before = 0;
        for (i, record) in self.records.iter().enumerate() {
            check_record(record).map_err(|what| inconsistent(format!("record {i}: {what}")))?;
            let end = record.sigma_at as usize + usize::from(record.n_sigma);
            if end > self.sigma.len() {
                return Err(inconsistent(format!(
                    "record {i}: matches {}..{end} past the {} of the batch",
                    record.sigma_at,
                    self.sigma.len()
                )));
            }
            if record.n_sigma > 0 {
                if (record.sigma_at as usize) < end_before {
                    return Err(inconsistent(format!(
                        "record {i}: matches {}..{end} overlap those of an earlier record",
                        record.sigma_at
                    )));
                }
                end_before = end;
            }
        }
        for (i, hit) in self.hits.iter().enumerate() {
            check_record(&hit.record).map_err(|what| inconsistent(format!("hit {i}: {what}")))?;
            if usize::from(hit.text_len) > GROUP_TEXT_BYTES {
                return Err(inconsistent(format!(
                    "hit {i}: group text of {} bytes, at most {GROUP_TEXT_BYTES}",
                    hit.text_len
                )));
            }
        }
        Ok(self.number(numbers))
    }

    /// Turns the decoded keys into this host's numbers: indicators of records and hits, the
    /// correlations of hits, and the Sigma matches (compacted past the unknown ones).
    fn number(&mut self, numbers: &mut (impl NumberContent + ?Sized)) -> Unresolved {
        let mut dropped = Unresolved::default();
        let mut write = 0;
        for r in &mut self.records {
            numbered_indicator(r, numbers, &mut dropped);
            let (at, n) = (r.sigma_at as usize, usize::from(r.n_sigma));
            r.sigma_at = write as u32;
            for read in at..at + n {
                let rule = self.sigma[read];
                if rule == UNKNOWN_RULE {
                    dropped.rules += 1;
                } else {
                    self.sigma[write] = rule;
                    write += 1;
                }
            }
            r.n_sigma = (write - r.sigma_at as usize) as u16;
        }
        self.sigma.truncate(write);
        self.hits.retain_mut(|h| {
            // A hit's own record is the matching event's; its indicator is counted (if
            // unknown) where the event's record is.
            numbered_indicator(&mut h.record, numbers, &mut Unresolved::default());
            match numbers.correlation(h.version) {
                Some((version, corr)) => {
                    h.version = version;
                    h.corr = corr;
                    true
                }
                None => {
                    dropped.correlations += 1;
                    false
                }
            }
        });
        dropped
    }
}

/// `r` with its indicator named by key (see the module's documentation).
fn keyed(r: &DetectRecord, names: &mut (impl NameContent + ?Sized)) -> DetectRecord {
    let key = if r.ioc == 0 {
        0
    } else {
        names.indicator(r.ioc_version, r.ioc)
    };
    DetectRecord {
        ioc: key as u32,
        ioc_version: (key >> 32) as u32,
        ..*r
    }
}

/// Turns the indicator key a decoded record carries into this host's version and number.
fn numbered_indicator(
    r: &mut DetectRecord,
    numbers: &mut (impl NumberContent + ?Sized),
    dropped: &mut Unresolved,
) {
    if r.ioc == 0 {
        r.ioc_version = 0;
        return;
    }
    let key = u64::from(r.ioc_version) << 32 | u64::from(r.ioc);
    (r.ioc_version, r.ioc) = numbers.indicator(key).unwrap_or_else(|| {
        dropped.indicators += 1;
        (0, 0)
    });
}

/// What follows the format byte of `model`'s encoding in `bytes`: refused when empty or of
/// another format (shared by every versioned encoding of the crate).
pub(crate) fn after_format<'a>(
    bytes: &'a [u8],
    model: &'static str,
    expected: u8,
) -> Result<&'a [u8], Error> {
    let Some((&found, rest)) = bytes.split_first() else {
        return Err(Error::Inconsistent {
            model,
            detail: "empty".into(),
        });
    };
    if found != expected {
        return Err(Error::Layout {
            model,
            found,
            expected,
        });
    }
    Ok(rest)
}

/// Reads one `T` of `model`'s encoding off the front of `rest`.
pub(crate) fn read_one<T: Decode<()>>(
    rest: &mut &[u8],
    model: &'static str,
    what: &str,
) -> Result<T, Error> {
    let (value, used) =
        bincode::decode_from_slice(rest, bincode_config()).map_err(|e| Error::Inconsistent {
            model,
            detail: format!("{what}: {e}"),
        })?;
    *rest = &rest[used..];
    Ok(value)
}

/// Reads a length and that many `T`s off the front of `rest` into `into`.
fn read_sequence<T: Decode<()>>(
    rest: &mut &[u8],
    into: &mut Vec<T>,
    what: &str,
) -> Result<(), Error> {
    let len: u64 = read(rest, what)?;
    // Every element takes at least one byte: a longer sequence is a lie about its length, and
    // refusing it here keeps a hostile length from reserving memory.
    if len > rest.len() as u64 {
        return Err(inconsistent(format!(
            "{what}: {len} announced, {} bytes left",
            rest.len()
        )));
    }
    for _ in 0..len {
        into.push(read(rest, what)?);
    }
    Ok(())
}

/// Reads one `T` of the batch off the front of `rest`.
fn read<T: Decode<()>>(rest: &mut &[u8], what: &str) -> Result<T, Error> {
    read_one(rest, MODEL, what)
}

/// What in a decoded record the accessors would trip on.
fn check_record(record: &DetectRecord) -> Result<(), String> {
    if usize::from(record.n_entities) > RECORD_ENTITIES {
        return Err(format!(
            "{} entities kept, at most {RECORD_ENTITIES}",
            record.n_entities
        ));
    }
    if usize::from(record.source_len) > SOURCE_NAME_BYTES {
        return Err(format!(
            "source name of {} bytes, at most {SOURCE_NAME_BYTES}",
            record.source_len
        ));
    }
    if record.severity > MAX_SEVERITY {
        return Err(format!("severity {}", record.severity));
    }
    Ok(())
}

fn inconsistent(detail: String) -> Error {
    Error::Inconsistent {
        model: MODEL,
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SameHost;
    use crate::record::{NOT_SCORED, RecordEntity};
    use crate::{SplitMix64, UebaType};

    /// A host that holds rule 700 only, and no correlation or indicator.
    struct Only700;

    impl NumberContent for Only700 {
        fn rule(&mut self, key: u64) -> Option<u32> {
            NumberContent::rule(&mut SameHost, key).filter(|&n| n == 700)
        }
        fn correlation(&mut self, _: u64) -> Option<(u64, u32)> {
            None
        }
        fn indicator(&mut self, _: u64) -> Option<(u32, u32)> {
            None
        }
    }

    #[test]
    fn content_this_host_lacks_is_dropped_and_counted_and_the_rest_kept_in_place() {
        let mut batch = sample();
        // A third record whose match follows the first's, to see the runs compacted.
        batch.push(DetectRecord::default(), &[700, 5]);
        let mut back = DetectBatch::default();
        let dropped = back.decode_from(&encoded(&batch), &mut Only700).unwrap();
        assert_eq!(
            dropped,
            Unresolved {
                rules: 2,
                correlations: 1,
                indicators: 1
            }
        );
        assert_eq!(back.sigma_of(&back.records[0]), [700]);
        assert_eq!(back.sigma_of(&back.records[1]), [] as [u32; 0]);
        assert_eq!(back.sigma_of(&back.records[2]), [700]);
        assert_eq!(back.sigma, [700, 700]);
        assert_eq!((back.records[0].ioc, back.records[0].ioc_version), (0, 0));
        assert!(back.hits.is_empty());
    }

    #[test]
    fn matches_out_of_record_order_are_refused() {
        let mut batch = sample();
        batch.push(DetectRecord::default(), &[1]);
        batch.records[2].sigma_at = 0;
        let err = DetectBatch::default()
            .decode_from(&encoded(&batch), &mut SameHost)
            .unwrap_err();
        assert!(err.to_string().contains("overlap"), "{err}");
    }

    /// A batch with every field set to something other than its default.
    fn sample() -> DetectBatch {
        let mut record = DetectRecord {
            block: *b"0123456789abcdef",
            pos: 513,
            ts_ns: 1_795_000_000_123_456_789,
            source: 0x1234_5678_9abc_def0,
            template: 42,
            client_ip: 0xffff_cb00_7109,
            reporter: 7,
            message_len: 300,
            severity: 4,
            entity_count: 9,
            n_entities: 2,
            owned: 0b101,
            ioc: 3,
            ioc_version: 2,
            ..DetectRecord::default()
        };
        record.set_source_name("sshd");
        record.entities[0] = RecordEntity {
            hash: 99,
            uuid: [1; 16],
            kind: 1,
            role: 2,
            ueba: UebaType::User as u8,
        };
        record.entities[1] = RecordEntity {
            hash: 100,
            uuid: [2; 16],
            kind: 0,
            role: 1,
            ueba: NOT_SCORED,
        };
        let mut batch = DetectBatch::default();
        batch.push(record, &[5, 700]);
        batch.push(DetectRecord::default(), &[]);
        let mut hit = CorrelationHit {
            record,
            version: 11,
            corr: 2,
            slot: 1,
            group: 0xdead_beef,
            value: 5,
            text: [0; GROUP_TEXT_BYTES],
            text_len: 0,
            entity: Some(record.entities[0]),
        };
        let text = b"SourceIp=203.0.113.9";
        hit.text[..text.len()].copy_from_slice(text);
        hit.text_len = text.len() as u8;
        batch.hits.push(hit);
        batch
    }

    fn encoded(batch: &DetectBatch) -> Vec<u8> {
        let mut out = Vec::new();
        batch.encode_into(&mut out, &mut SameHost);
        out
    }

    fn same(a: &DetectBatch, b: &DetectBatch) -> bool {
        a.records == b.records
            && a.sigma == b.sigma
            && a.hits.len() == b.hits.len()
            && a.hits.iter().zip(&b.hits).all(|(x, y)| {
                (
                    x.record, x.version, x.corr, x.slot, x.group, x.value, x.text_len, x.entity,
                ) == (
                    y.record, y.version, y.corr, y.slot, y.group, y.value, y.text_len, y.entity,
                ) && x.text() == y.text()
            })
    }

    #[test]
    fn a_batch_decodes_to_what_was_encoded() {
        let batch = sample();
        let mut back = DetectBatch::with_capacity(4);
        back.decode_from(&encoded(&batch), &mut SameHost).unwrap();
        assert!(same(&batch, &back));
        assert_eq!(back.sigma_of(&back.records[0]), [5, 700]);
        assert_eq!(back.records[0].source_name(), "sshd");
        assert_eq!(back.hits[0].text(), "SourceIp=203.0.113.9");
        // An empty batch too, and a decode replaces what the batch held.
        back.decode_from(&encoded(&DetectBatch::default()), &mut SameHost)
            .unwrap();
        assert!(back.is_empty() && back.sigma.is_empty());
    }

    /// The bytes of the sample batch, as format 2 writes them. A failure here means the encoding
    /// changed: a sensor and a detector of different builds would misread each other. Bump
    /// `DETECT_BATCH_FORMAT`, describe the change in docs/architecture.md, then update the bytes.
    #[test]
    fn the_encoding_of_format_2_is_pinned() {
        let hex: String = encoded(&sample())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(hex, PINNED_FORMAT_2);
    }

    const PINNED_FORMAT_2: &str = concat!(
        "020230313233343536373839616263646566fb0102fd2a9a5ec6fa3dd231fdf0debc9a785634122afd097100",
        "cbffff000007fb2c010409020405630101010101010101010101010101010101020064020202020202020202",
        "020202020202020001ff00000000000000000000000000000000000000000000000000000000000000000000",
        "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000",
        "000073736864000000000000000000000000000000000000000000000000000000000002fb0103fb00020000",
        "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000",
        "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000",
        "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000",
        "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000",
        "00000200000002fb0105fc01bc02000130313233343536373839616263646566fb0102fd2a9a5ec6fa3dd231",
        "fdf0debc9a785634122afd097100cbffff000007fb2c01040902040563010101010101010101010101010101",
        "0101020064020202020202020202020202020202020001ff0000000000000000000000000000000000000000",
        "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000",
        "0000000000000000000000000000000073736864000000000000000000000000000000000000000000000000",
        "000000000000fb0103fb0002fd01020000000b00000001fcefbeadde05536f7572636549703d3230332e302e",
        "3131332e39000000000000000000000000000000000000000000000000000000000000000000000000000000",
        "000000000014016301010101010101010101010101010101010200",
    );

    #[test]
    fn another_format_is_refused_by_number() {
        let mut bytes = encoded(&sample());
        bytes[0] = 1;
        let err = DetectBatch::default()
            .decode_from(&bytes, &mut SameHost)
            .unwrap_err();
        assert_eq!(
            err,
            Error::Layout {
                model: "detection batch",
                found: 1,
                expected: 2
            }
        );
    }

    #[test]
    fn every_cut_of_a_batch_is_an_error_and_the_batch_is_left_empty() {
        let bytes = encoded(&sample());
        let mut batch = sample();
        for end in 0..bytes.len() {
            assert!(
                batch.decode_from(&bytes[..end], &mut SameHost).is_err(),
                "cut at {end}"
            );
            assert!(batch.is_empty() && batch.sigma.is_empty());
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(batch.decode_from(&longer, &mut SameHost).is_err());
    }

    #[test]
    fn damaged_batches_never_panic_and_what_decodes_is_usable() {
        let bytes = encoded(&sample());
        let mut rng = SplitMix64::new(52);
        let mut batch = DetectBatch::default();
        for _ in 0..20_000 {
            let mut damaged = bytes.clone();
            for _ in 0..1 + rng.next_u64() % 4 {
                let at = (rng.next_u64() % damaged.len() as u64) as usize;
                damaged[at] = rng.next_u64() as u8;
            }
            if batch.decode_from(&damaged, &mut SameHost).is_ok() {
                // Every accessor the detectors use stays in bounds.
                for r in &batch.records {
                    let _ = (r.entities(), r.source_name(), batch.sigma_of(r));
                }
                for h in &batch.hits {
                    let _ = (h.text(), h.record.entities(), h.record.source_name());
                }
            }
        }
    }

    #[test]
    fn counts_past_their_arrays_are_refused() {
        let mut batch = sample();
        batch.records[1].n_entities = RECORD_ENTITIES as u8 + 1;
        let err = DetectBatch::default()
            .decode_from(&encoded(&batch), &mut SameHost)
            .unwrap_err();
        assert!(
            err.to_string().contains("record 1: 7 entities kept"),
            "{err}"
        );
        let mut batch = sample();
        batch.records[0].n_sigma = 3;
        let err = DetectBatch::default()
            .decode_from(&encoded(&batch), &mut SameHost)
            .unwrap_err();
        assert!(err.to_string().contains("past the 2 of the batch"), "{err}");
        let mut batch = sample();
        batch.hits[0].text_len = GROUP_TEXT_BYTES as u8 + 1;
        let err = DetectBatch::default()
            .decode_from(&encoded(&batch), &mut SameHost)
            .unwrap_err();
        assert!(err.to_string().contains("hit 0: group text"), "{err}");
    }
}
