//! Encode: the event as stored (its record, its summary and index postings in the block) and as
//! stage B reads it (the detection record: UEBA types, the keys it is routed by, the matches).

use super::entities::{Known, text};
use super::header::Head;
use super::matching::Indicator;
use watchpost_detect::{DetectRecord, NOT_SCORED, RECORD_ENTITIES, RecordEntity, UebaType};
use watchpost_proto::{EntityKind, Role, bincode_config};
use watchpost_store::{EncodedBlock, EntitySlot, EventView, Posting, PostingKind};

/// Appends the event as stored at `pos` to the block: its record, its share of the block's
/// summary, and its index postings (source, template, each entity).
#[inline]
pub(super) fn stored_event(
    view: &EventView<'_>,
    pos: u16,
    source_hash: u64,
    out: &mut EncodedBlock,
) {
    if out.offsets.is_empty() {
        out.first_received_ns = view.received_ns;
        out.meta.min_ts = view.timestamp_ns;
        out.meta.max_ts = view.timestamp_ns;
    }
    out.offsets.push(out.records.len() as u32);
    // Encoding into a Vec cannot fail for lack of space; any error would be a bug in the view.
    let _ = bincode::encode_into_std_write(view, &mut out.records, bincode_config());
    out.meta.count += 1;
    out.meta.min_ts = out.meta.min_ts.min(view.timestamp_ns);
    out.meta.max_ts = out.meta.max_ts.max(view.timestamp_ns);
    out.meta.severity_counts[view.severity as usize] += 1;
    out.postings.push(Posting {
        kind: PostingKind::Source,
        tag: 0,
        hash: source_hash,
        pos,
    });
    if view.template_id != 0 {
        out.postings.push(Posting {
            kind: PostingKind::Template,
            tag: 0,
            hash: view.template_id,
            pos,
        });
    }
    for slot in view.entities {
        out.postings.push(Posting {
            kind: PostingKind::Entity,
            tag: slot.kind,
            hash: slot.hash,
            pos,
        });
    }
}

/// The event as stage B reads it: its header, the matched indicator, and its entities with their
/// UEBA types and the keys the record is routed by (client address, reporter). `known` is
/// parallel to `view.entities`.
#[inline]
pub(super) fn detect_record(
    head: &Head,
    view: &EventView<'_>,
    pos: u16,
    source_hash: u64,
    known: &[Known],
    indicator: Indicator,
) -> DetectRecord {
    let mut rec = DetectRecord {
        pos,
        ts_ns: head.timestamp_ns,
        source: source_hash,
        template: head.template_id,
        message_len: head.message.end - head.message.start,
        severity: head.severity,
        entity_count: view.entities.len().min(255) as u8,
        ioc: indicator.id,
        ioc_version: indicator.version,
        ..DetectRecord::default()
    };
    rec.set_source_name(text(view.arena, &head.source));
    for (slot, known) in view.entities.iter().zip(known) {
        if let Some(kind) = EntityKind::from_u8(slot.kind) {
            add_record_entity(&mut rec, slot, kind, *known);
        }
    }
    leave_targets_to_their_actor(&mut rec);
    rec
}

/// Adds an entity to the detect record: its UEBA type (by kind and role), the client address
/// and reporter the record keys on, and a slot of the record's entity list while one is free.
#[inline]
fn add_record_entity(rec: &mut DetectRecord, slot: &EntitySlot, kind: EntityKind, known: Known) {
    let role = Role::from_u8(slot.role);
    let ueba = match (kind, role) {
        (EntityKind::User, _) if known.service_account => UebaType::ServiceAccount as u8,
        (EntityKind::User, _) => UebaType::User as u8,
        (EntityKind::Host, Role::Reporter) => UebaType::Host as u8,
        (EntityKind::Ip, Role::Source) => UebaType::Ip as u8,
        _ => NOT_SCORED,
    };
    if kind == EntityKind::Ip && role == Role::Source && rec.client_ip == 0 {
        rec.client_ip = known.ip;
    }
    if role == Role::Reporter && rec.reporter == 0 {
        rec.reporter = slot.hash;
    }
    if (rec.n_entities as usize) < RECORD_ENTITIES {
        rec.entities[rec.n_entities as usize] = RecordEntity {
            hash: slot.hash,
            uuid: known.uuid,
            kind: slot.kind,
            role: slot.role,
            ueba,
        };
        rec.n_entities += 1;
    }
}

/// An account acted upon by a person (sudo's `USER=root`, su's target, explicit credentials) is
/// not the one behaving: the person is. Scoring the target would give `root` a baseline that is
/// every administrator's sudo use at once, noisy by construction, and would judge it again for
/// what the person's own baseline already judges. A target stays scored when no person acts
/// (a Windows logon, whose subject is the machine account), since it is then the actor.
fn leave_targets_to_their_actor(rec: &mut DetectRecord) {
    let entities = &mut rec.entities[..rec.n_entities as usize];
    let person_acts = entities
        .iter()
        .any(|e| e.role == Role::Subject as u8 && e.ueba == UebaType::User as u8);
    if person_acts {
        for e in entities.iter_mut() {
            if e.role == Role::Target as u8 && e.kind == EntityKind::User as u8 {
                e.ueba = NOT_SCORED;
            }
        }
    }
}
