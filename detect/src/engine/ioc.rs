//! IOC alerts: an indicator of a feed seen in an event, per indicator or per entity.

use super::Detector;
use super::book::{MatchAlert, primary_entity};
use super::signal::{SignalOrigin, SignalTitle};
use super::sink::AlertSink;
use crate::record::DetectRecord;
use watchpost_proto::{AlertType, AttackMapping, fmix64};
use watchpost_rules::{IocId, IocKind, Level};

/// Salt of `ioc` dedup keys.
pub(super) const IOC_SALT: u64 = 0x696f_6300_0000_0006;

/// The alert (or signal) record of an indicator match; `dedup` is `ioc` or `signal:ioc`.
pub(super) fn ioc_match_alert(ind: &watchpost_rules::Indicator, dedup: &str) -> MatchAlert {
    MatchAlert {
        alert_type: AlertType::Ioc,
        severity: if dedup == "ioc" { 4 } else { 2 },
        title: SignalTitle::Indicator {
            kind: ind.kind.as_str(),
            value: &ind.value,
            label: ind.label.as_deref(),
        }
        .text()
        .into_owned(),
        detector: format!("ioc:{}", ind.source),
        detector_name: format!("Threat feed {}", ind.source),
        dedup: format!("{dedup}:{}", ind.value),
        attack: ioc_attack_of(ind.kind).to_vec(),
    }
}

/// ATT&CK of an indicator match, worked out once per kind of indicator: an address, name or URL
/// is contact with attacker infrastructure, a file hash a malicious file.
pub(super) fn ioc_attack_of(kind: IocKind) -> &'static [AttackMapping] {
    static BY_KIND: std::sync::LazyLock<[Vec<AttackMapping>; 2]> = std::sync::LazyLock::new(|| {
        [
            ["attack.command-and-control", "attack.t1071"],
            ["attack.execution", "attack.t1204.002"],
        ]
        .map(|tags| watchpost_rules::Attack::get().mappings(&tags.map(String::from)))
    });
    let file = matches!(kind, IocKind::Md5 | IocKind::Sha1 | IocKind::Sha256);
    &BY_KIND[usize::from(file)]
}

impl Detector {
    /// An indicator match: a new alert per indicator (naming every entity seen with it), or per
    /// indicator and subject without `detection.ioc_alert_per_indicator`; repeats inside
    /// `detection.ioc_alert_cooldown_seconds` fold into it.
    pub(super) fn raise_ioc(&mut self, r: &DetectRecord, sink: &mut impl AlertSink) {
        let Some(set) = self
            .iocs
            .as_ref()
            .and_then(|f| f.indicators(u64::from(r.ioc_version)))
        else {
            return;
        };
        let Some(ind) = set.get(IocId::from_index(r.ioc - 1)) else {
            return;
        };
        // The detector's name is built only when there are exceptions to hold it against.
        if !self.exceptions.is_empty()
            && self
                .exceptions
                .suppresses(&format!("ioc:{}", ind.source), Some(r), r.ts_ns)
        {
            return;
        }
        // A match of an indicator its feed is unsure of (a scanner list, an aged sighting) adds
        // risk to what it touched instead of alerting: on its own it is a lead, with other
        // signals on the same entity it is an intrusion.
        if ind
            .confidence
            .is_some_and(|c| c < self.params.ioc_min_confidence)
        {
            let origin = SignalOrigin {
                key: watchpost_proto::hash64(ind.value.as_bytes()) ^ IOC_SALT,
                id: SignalTitle::Prefixed {
                    prefix: "ioc:",
                    name: &ind.source,
                },
                title: SignalTitle::Indicator {
                    kind: ind.kind.as_str(),
                    value: &ind.value,
                    label: ind.label.as_deref(),
                },
                level: Some(Level::Low),
                attack: ioc_attack_of(ind.kind),
                entity: None,
                with_actor: true,
                guessing: false,
            };
            let build = |d: &mut Detector, key, primary| {
                let m = ioc_match_alert(ind, "signal:ioc");
                d.match_alert(r, key, primary, m)
            };
            self.raise_signal(r, &origin, build, sink);
            return;
        }
        let primary = primary_entity(r);
        let subject = primary.map_or(r.source, |i| r.entities[i].hash);
        let per_indicator = self.params.ioc_per_indicator;
        // Per indicator: one alert for every entity seen with it in the source.
        let scope = if per_indicator {
            r.source.rotate_left(13)
        } else {
            subject.rotate_left(29)
        };
        let key = fmix64(watchpost_proto::hash64(ind.value.as_bytes()) ^ IOC_SALT ^ scope);
        if self.open.get(&key).is_some_and(|o| r.ts_ns < o.until_ns) {
            self.repeat(key, r, 1.0, None);
            if per_indicator {
                self.note_entities(key, r);
            }
            return;
        }
        let m = ioc_match_alert(ind, "ioc");
        let until_ns = r.ts_ns.saturating_add(self.params.ioc_cooldown_ns);
        self.open_match(r, key, primary, m, until_ns, sink);
        if per_indicator {
            self.note_entities(key, r);
        }
    }
}
