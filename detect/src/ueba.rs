//! User and entity behaviour analytics: each entity (user, host, IP, service account) is compared
//! with its own history, and the blend of four sub-scores with a per-entity-type DSPOT threshold.
//!
//! The scoring functions the spec leaves open, decided here (each in [0, 1]):
//! - time_of_day: 0 when the event's UTC hour is an observed hour of the entity, otherwise
//!   `1 - exp(-d / 2.5)` where `d` is the circular distance in hours to the nearest observed hour
//!   (one hour off: 0.33, two: 0.55, four: 0.80, eight: 0.96). An hour counts as observed once it
//!   holds at least one event per thousand of the entity's events (and at least one), so a single
//!   3 a.m. login does not make 3 a.m. normal for an entity with years of office hours.
//! - source_novelty: 0 for a source among the entity's top-K (Space-Saving counts); 0.5 for a new
//!   address in a known network (IPv4 /24, IPv6 /48); 1 otherwise. Events without a source: 0.
//! - volume: `logistic4(z)`, `1 / (1 + exp(4 - z))`, of the running minute's event count
//!   against the EMA and exponentially weighted variance of the entity's active minutes.
//! - pattern_novelty: 1 for a template outside the top-K; otherwise `log2(W / w) / 10` where `w` is
//!   the template's LFU weight and `W` the total (a template behind 1/1024 of the weight scores 1).
//!
//! Beside the blend, one dimension far outside the entity's own history alerts on its own (an hour
//! never used, a hundredfold rate, a first host, a return after weeks of silence): see
//! [`crate::deviation`] for the signals and their calibration.
//!
//! Everything an entity needs is in fixed-size slices allocated once when the entity first appears,
//! so scoring a known entity allocates nothing.

use crate::deviation::{
    DeviationPart, Novelty, Signal, Slots, StrongDeviation, fold_source, hour_bits, rate_bits,
};
use crate::dspot::{Dspot, DspotConfig, Verdict};
use crate::error::Error;
use crate::fastmath::{log2, logistic4};
use crate::peers::{HostPeers, PeerBoard};
use crate::table::EntityTable;
use crate::time::{EventTime, NS_PER_HOUR};
use crate::topk::{Probe, TemplateChange, TopLists, network_of};
use bincode::de::Decoder;
use bincode::enc::Encoder;
use bincode::error::{DecodeError, EncodeError};
use bincode::{Decode, Encode};
use std::sync::Arc;
use watchpost_proto::{RiskPoint, U64Map};

/// The least blended score that may alert, whatever the threshold. An entity type whose normal
/// scores are all alike (a fleet of identical service accounts) gets a DSPOT threshold just above
/// that common value; without a floor, a trace of volume noise would then be an alert. 0.35 is
/// above any one sub-score at its default weight (0.30 at most): the blend alerts on deviations
/// of two dimensions together (an unusual hour from a new network), and one extreme dimension
/// alerts through its calibrated signal (the `deviation` module) instead, where "extreme" is judged
/// against the entity's own history rather than a fixed weight. On the realistic scenario
/// (docs/benchmarks.md) the old floor of 0.2 let single weak dimensions through: about 50 false
/// alerts per 170,000 events, mostly a first use of a template or a busy minute.
pub const MIN_ALERT_SCORE: f64 = 0.35;

/// The entity types UEBA scores, each with its own threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Encode, Decode)]
#[repr(u8)]
pub enum UebaType {
    /// A person's account.
    User = 0,
    /// A host.
    Host = 1,
    /// An IP address.
    Ip = 2,
    /// A non-human account (daemons, `svc-` names, machine accounts ending in `$`).
    ServiceAccount = 3,
}

impl UebaType {
    /// Every type, in index order.
    pub const ALL: [UebaType; 4] = [
        UebaType::User,
        UebaType::Host,
        UebaType::Ip,
        UebaType::ServiceAccount,
    ];

    /// Name in API output.
    pub fn name(self) -> &'static str {
        match self {
            UebaType::User => "user",
            UebaType::Host => "host",
            UebaType::Ip => "ip",
            UebaType::ServiceAccount => "service_account",
        }
    }
}

/// Whether a (canonical, lower-case) user name is a service account: Windows machine accounts
/// (`name$`), the usual prefixes (`svc`, `srv`, `sa-`, `service`), and the Unix daemon accounts
/// that log in by themselves.
pub fn is_service_account(user: &str) -> bool {
    const DAEMONS: [&str; 22] = [
        "root",
        "daemon",
        "bin",
        "sys",
        "nobody",
        "www-data",
        "apache",
        "nginx",
        "postgres",
        "mysql",
        "redis",
        "backup",
        "mail",
        "postfix",
        "systemd-network",
        "systemd-resolve",
        "sshd",
        "ntp",
        "chrony",
        "syslog",
        "messagebus",
        "_apt",
    ];
    let name = user.rsplit(['\\', '/']).next().unwrap_or(user);
    let name = name.split('@').next().unwrap_or(name);
    name.ends_with('$')
        || ["svc", "srv-", "srv_", "sa-", "sa_", "service"]
            .iter()
            .any(|p| name.starts_with(p))
        || DAEMONS.contains(&name)
}

/// UEBA settings, from `[ueba]`.
#[derive(Clone, Debug, PartialEq)]
pub struct UebaParams {
    /// Produce alerts (baselines learn either way).
    pub enabled: bool,
    /// Warmup length from the first event, ns.
    pub warmup_ns: i64,
    /// Events needed before scoring.
    pub warmup_min_events: u64,
    /// Top-K sources.
    pub source_cap: usize,
    /// Top-K templates.
    pub template_k: usize,
    /// Volume EMA smoothing.
    pub ema_alpha: f64,
    /// Cooldown after an alert, ns.
    pub cooldown_ns: i64,
    /// Entities kept in memory.
    pub max_entities: usize,
    /// Sub-score weights: time of day, source novelty, volume, pattern novelty.
    pub weights: [f64; 4],
    /// DSPOT risk of the per-type thresholds.
    pub risk: f64,
    /// `2^ueba.strong_deviation_bits`: the odds against an observation, under the entity's own
    /// history, from which one dimension alerts on its own. 0: off.
    pub strong_odds: f64,
    /// `ueba.strong_deviation_bits` (infinite when off): a found deviation at or past it alerts.
    pub strong_bits: f64,
    /// `2^ueba.signal_bits`: the odds from which one dimension short of `strong_odds` is a
    /// risk signal. 0: off.
    pub signal_odds: f64,
    /// `ueba.dormancy_days` in ns: the least silence that may count as dormancy. 0: off.
    pub dormancy_ns: i64,
}

impl UebaParams {
    /// From the `[ueba]` section of the configuration.
    pub fn from_config(config: &watchpost_proto::config::UebaConfig) -> UebaParams {
        let w = &config.sub_score_weights;
        UebaParams {
            enabled: config.enabled,
            warmup_ns: (config.warmup_days * 86_400e9) as i64,
            warmup_min_events: config.warmup_min_events,
            source_cap: config.source_ip_cap.max(1) as usize,
            template_k: config.template_top_k.max(1) as usize,
            ema_alpha: config.ema_alpha,
            cooldown_ns: config.alert_cooldown_seconds as i64 * 1_000_000_000,
            max_entities: config.max_entities.max(1) as usize,
            weights: [w.time_of_day, w.source_novelty, w.volume, w.pattern_novelty],
            risk: config.dspot_risk,
            strong_odds: if config.strong_deviation_bits > 0.0 {
                config.strong_deviation_bits.exp2()
            } else {
                0.0
            },
            strong_bits: if config.strong_deviation_bits > 0.0 {
                config.strong_deviation_bits
            } else {
                f64::INFINITY
            },
            signal_odds: if config.signal_bits > 0.0 {
                config.signal_bits.exp2()
            } else {
                0.0
            },
            dormancy_ns: (config.dormancy_days * 86_400e9) as i64,
        }
    }
}

impl Default for UebaParams {
    fn default() -> Self {
        UebaParams::from_config(&watchpost_proto::config::UebaConfig::default())
    }
}

/// One entity occurrence to score.
#[derive(Clone, Copy, Debug)]
pub struct Observation {
    /// Event time.
    pub time: EventTime,
    /// The entity's name hash (its key everywhere in the data plane).
    pub entity: u64,
    /// Which threshold it is judged by.
    pub kind: UebaType,
    /// The counterpart: the source address for users and hosts, the peer for IPs. IPv4 as
    /// IPv4-mapped IPv6.
    pub source: Option<u128>,
    /// The event's template.
    pub template: u64,
    /// For users and service accounts, the host the event is on (the reporter's hash); 0
    /// otherwise.
    pub host: u64,
    /// The event names an account (a user or service account). For an address or a host the
    /// account, not the address, is who acted: its own history judges whether the step is new
    /// (docs/detection.md, "The account judges its address"), so the address's new
    /// counterpart is not a signal of its own.
    pub account_named: bool,
    /// For a host: the person (the first user account) on the event, 0 if none. The host
    /// counts its people for the others' first visits (see [`crate::PeerBoard`]).
    pub person: u64,
    /// The event is a failed logon (a match of a rule mapped to T1110, see
    /// `engine::persistence::is_guessing`): someone tried the account, which is not the account
    /// being active, so it neither breaks nor ends a silence (dormancy).
    pub failed_logon: bool,
}

/// The four sub-scores, in the order of [`UebaParams::weights`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SubScores {
    /// Hour-of-day rarity.
    pub time_of_day: f64,
    /// Source novelty.
    pub source_novelty: f64,
    /// Volume against the EMA.
    pub volume: f64,
    /// Template rarity.
    pub pattern_novelty: f64,
}

impl SubScores {
    fn blend(&self, w: &[f64; 4]) -> f64 {
        w[0] * self.time_of_day
            + w[1] * self.source_novelty
            + w[2] * self.volume
            + w[3] * self.pattern_novelty
    }
}

/// Where an entity is in its lifecycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifecycle {
    /// Learning only.
    WarmingUp,
    /// Scored.
    Scoring,
    /// Scored, alerts suppressed until the cooldown ends.
    Cooldown,
}

/// A UEBA alert.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UebaAlert {
    /// The entity.
    pub entity: u64,
    /// Its type.
    pub kind: UebaType,
    /// Event time.
    pub ts_ns: i64,
    /// Blended score.
    pub score: f64,
    /// The type's DSPOT threshold when it fired.
    pub threshold: f64,
    /// What made up the score.
    pub sub_scores: SubScores,
    /// The one dimension that was extreme on its own, when that is what alerted (or was also
    /// true when the blend did).
    pub deviation: Option<StrongDeviation>,
}

/// What one observation produced.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Outcome {
    /// Learned, not scored (warming up).
    Learned,
    /// Scored below the threshold, or above it while alerts are off or in cooldown.
    Scored {
        /// Blended score.
        score: f64,
        /// The entity was in cooldown.
        suppressed: bool,
    },
    /// An alert.
    Alert(UebaAlert),
    /// One dimension past `ueba.signal_bits` but short of an alert: a risk signal (its
    /// `deviation` says which), the blend below its threshold.
    Signal(UebaAlert),
}

/// The first byte of a saved [`Baseline`]. The layouts before 0xFF began with the varint of
/// `first_seen_ns`, and no bincode varint of an i64 begins with 0xFE or 0xFF, so a baseline
/// saved by such a version is refused at its first byte instead of being read at the wrong
/// offsets (fields of the same total width, such as two f64 that became four f32, would
/// otherwise decode as garbage). 0xFE added the strong-deviation state at the end, and later
/// the busiest minute of each hour of day after it: no other first byte is free (a varint of
/// an i64 may begin with 0xFB to 0xFD), so a 0xFE record that ends before the peaks (each
/// baseline is a record of its own) reads with them at zero, and the rate signal then judges
/// as it did before, against the one per-minute baseline.
const BASELINE_LAYOUT: u8 = 0xFE;

/// The layout before the strong-deviation state: read, with that state starting empty, so that
/// an upgrade keeps every entity's learned behaviour instead of restarting its warmup.
const BASELINE_LAYOUT_NO_DEVIATION: u8 = 0xFF;

/// Writes [`BASELINE_LAYOUT`]; takes no room in memory. Reading is [`Baseline`]'s own, since
/// what follows depends on the layout.
#[derive(Clone, Copy, Debug, Default)]
struct BaselineLayout;

impl Encode for BaselineLayout {
    fn encode<E: Encoder>(&self, e: &mut E) -> Result<(), EncodeError> {
        BASELINE_LAYOUT.encode(e)
    }
}

/// The learned behaviour of one entity.
#[derive(Clone, Debug, Encode)]
pub struct Baseline {
    layout: BaselineLayout,
    /// First event, ns.
    pub first_seen_ns: i64,
    /// Last event, ns (the LRU clock).
    pub last_seen_ns: i64,
    /// Events seen.
    pub event_count: u64,
    /// Type of the entity.
    pub kind: UebaType,
    /// Events per UTC hour. A u16 is enough: the "observed" threshold is capped at its maximum,
    /// so a saturated slot always counts as observed.
    hour_counts: [u16; 24],
    /// Top-K templates and sources, in one block.
    lists: TopLists,
    template_total: f32,
    /// The running minute (since the epoch; an i32 holds every minute an i64 of nanoseconds
    /// can name) and its events.
    minute: i32,
    minute_count: u32,
    /// Per-minute volume EMA and exponentially weighted variance over active minutes. Single
    /// precision is plenty for event counts, and frees the room of [`Baseline::volume_inv_sd`].
    volume_ema: f32,
    volume_var: f32,
    /// `1 / max(sqrt(var), 1, sqrt(ema) / 2)`, the volume z-score's scale, worked out when a
    /// minute closes (the only time it changes) so that scoring an event multiplies where it
    /// took a square root and a division.
    volume_inv_sd: f32,
    /// Minutes with events (u32: eight thousand years of them), narrowed so that an entity with
    /// a full set of IPv6 sources stays within 2 KiB.
    active_minutes: u32,
    cooldown_until_ns: i64,
    /// Hour (since the epoch) of `risk_max`.
    risk_hour: i32,
    /// Highest blended score in `risk_hour`: one point of the risk history.
    risk_max: f32,
    /// Learned something since the last save.
    dirty: bool,
    /// Sources (for an IP entity, the hosts it reached) seen once and more often, for the
    /// new-source signal.
    sources_seen: Novelty,
    /// Hosts a user or service account has been on, for the new-host signal.
    hosts_seen: Novelty,
    /// The longest silence between two of the entity's events, seconds, for dormancy.
    longest_gap_s: u32,
    /// The busiest minute seen in each UTC hour of day (events, at most 255), fading while the
    /// entity stays active at that hour: the rate signal needs a minute busier than any the
    /// entity had at this hour, so a nightly batch burst is not news at night.
    hour_peaks: [u8; 24],
    /// For a host, from when the people who came to it (`hosts_seen`, which a host does not
    /// otherwise use) have been counted: its first event, or the first after a baseline saved
    /// before the count was read back (see [`crate::PeerBoard`]).
    people_since_ns: i64,
}

impl<C> Decode<C> for Baseline {
    fn decode<D: Decoder<Context = C>>(d: &mut D) -> Result<Self, DecodeError> {
        let layout = u8::decode(d)?;
        if layout != BASELINE_LAYOUT && layout != BASELINE_LAYOUT_NO_DEVIATION {
            return Err(Error::Layout {
                model: "UEBA baseline",
                found: layout,
                expected: BASELINE_LAYOUT,
            }
            .into());
        }
        let mut b = Baseline {
            layout: BaselineLayout,
            first_seen_ns: Decode::decode(d)?,
            last_seen_ns: Decode::decode(d)?,
            event_count: Decode::decode(d)?,
            kind: Decode::decode(d)?,
            hour_counts: Decode::decode(d)?,
            lists: Decode::decode(d)?,
            template_total: Decode::decode(d)?,
            minute: Decode::decode(d)?,
            minute_count: Decode::decode(d)?,
            volume_ema: Decode::decode(d)?,
            volume_var: Decode::decode(d)?,
            volume_inv_sd: Decode::decode(d)?,
            active_minutes: Decode::decode(d)?,
            cooldown_until_ns: Decode::decode(d)?,
            risk_hour: Decode::decode(d)?,
            risk_max: Decode::decode(d)?,
            dirty: Decode::decode(d)?,
            sources_seen: Novelty::default(),
            hosts_seen: Novelty::default(),
            longest_gap_s: 0,
            hour_peaks: [0; 24],
            people_since_ns: 0,
        };
        if layout == BASELINE_LAYOUT {
            b.sources_seen = Decode::decode(d)?;
            b.hosts_seen = Decode::decode(d)?;
            b.longest_gap_s = Decode::decode(d)?;
            b.hour_peaks = match Decode::decode(d) {
                Ok(peaks) => peaks,
                // Saved before the peaks: the record ends here.
                Err(DecodeError::UnexpectedEnd { .. }) => [0; 24],
                Err(e) => return Err(e),
            };
            b.people_since_ns = match Decode::decode(d) {
                Ok(since) => since,
                // Saved before its people were counted: they are from its next event on.
                Err(DecodeError::UnexpectedEnd { .. }) => b.last_seen_ns,
                Err(e) => return Err(e),
            };
        } else {
            b.people_since_ns = b.last_seen_ns;
        }
        Ok(b)
    }
}

bincode::impl_borrow_decode!(Baseline);

/// An entry of a baseline's top-K templates.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TemplateWeight {
    /// Template id.
    pub template_id: u64,
    /// LFU weight.
    pub weight: f64,
}

impl Baseline {
    fn new(kind: UebaType, ts_ns: i64, p: &UebaParams) -> Baseline {
        Baseline {
            layout: BaselineLayout,
            first_seen_ns: ts_ns,
            last_seen_ns: ts_ns,
            event_count: 0,
            kind,
            hour_counts: [0; 24],
            lists: TopLists::new(p.template_k, p.source_cap),
            template_total: 0.0,
            minute: i32::MIN,
            minute_count: 0,
            volume_ema: 0.0,
            volume_var: 0.0,
            volume_inv_sd: 1.0,
            active_minutes: 0,
            cooldown_until_ns: i64::MIN,
            risk_hour: 0,
            risk_max: 0.0,
            dirty: true,
            sources_seen: Novelty::default(),
            hosts_seen: Novelty::default(),
            longest_gap_s: 0,
            hour_peaks: [0; 24],
            people_since_ns: ts_ns,
        }
    }

    /// Per-minute volume EMA over active minutes.
    pub fn volume_ema(&self) -> f64 {
        f64::from(self.volume_ema)
    }

    /// For a host: what its worker publishes on the board (see [`crate::PeerBoard`]).
    fn host_peers(&self) -> HostPeers {
        HostPeers {
            people: self.hosts_seen.distinct(),
            crowd: self.sources_seen.is_crowd() || self.hosts_seen.is_crowd(),
            since_hour: (self.people_since_ns.max(0) / NS_PER_HOUR).min(i64::from(u32::MAX)) as u32,
        }
    }

    /// Warming up at `now_ns`?
    pub fn warming_up(&self, now_ns: i64, params: &UebaParams) -> bool {
        now_ns.saturating_sub(self.first_seen_ns) < params.warmup_ns
            || self.event_count < params.warmup_min_events
    }

    /// Lifecycle state at `now_ns`.
    pub fn lifecycle(&self, now_ns: i64, params: &UebaParams) -> Lifecycle {
        if self.warming_up(now_ns, params) {
            Lifecycle::WarmingUp
        } else if now_ns < self.cooldown_until_ns {
            Lifecycle::Cooldown
        } else {
            Lifecycle::Scoring
        }
    }

    /// Events still needed and nanoseconds still to pass before scoring starts at `now_ns`.
    pub fn warmup_remaining(&self, now_ns: i64, params: &UebaParams) -> (u64, i64) {
        (
            params.warmup_min_events.saturating_sub(self.event_count),
            (self.first_seen_ns.saturating_add(params.warmup_ns) - now_ns).max(0),
        )
    }

    /// UTC hours that count as observed.
    pub fn hours_active(&self) -> Vec<u8> {
        (0..24u8)
            .filter(|&h| self.hour_observed(h as usize))
            .collect()
    }

    /// The top sources, most frequent first.
    pub fn top_sources(&self) -> Vec<u128> {
        let l = &self.lists;
        let mut v: Vec<(u32, u128)> = (0..l.source_len())
            .map(|i| (l.count(i), l.source(i)))
            .collect();
        v.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        v.into_iter().map(|(_, s)| s).collect()
    }

    /// The top templates, heaviest first.
    pub fn top_templates(&self) -> Vec<TemplateWeight> {
        let l = &self.lists;
        let mut v: Vec<TemplateWeight> = (0..l.template_len())
            .map(|i| TemplateWeight {
                template_id: l.template(i),
                weight: f64::from(l.weight(i)),
            })
            .collect();
        v.sort_by(|a, b| b.weight.total_cmp(&a.weight));
        v
    }

    fn hour_observed(&self, h: usize) -> bool {
        let need = (self.event_count / 1000).clamp(1, u64::from(u16::MAX));
        u64::from(self.hour_counts[h]) >= need
    }

    #[cfg(test)]
    fn score(&self, o: &Observation, peer_share: f64) -> SubScores {
        self.score_probed(o, &self.lists.probe(o.template, o.source), peer_share)
    }

    /// The sub-scores of `o`, given what it found in the top-K lists.
    #[inline]
    fn score_probed(&self, o: &Observation, probe: &Probe, peer_share: f64) -> SubScores {
        SubScores {
            time_of_day: self.time_of_day_score(&o.time),
            // A new source is news in proportion to how rarely the entity meets one: an account
            // that internet scanners try from everywhere, or an edge host, meets new ones all
            // the time (see `deviation::Novelty::new_item_chance`).
            // An address's counterpart is the host it reached (a path, this engine's own
            // reading of "source" for addresses); on an event that names the account behind the
            // address, the account's history judges the step instead (see `deviation`).
            source_novelty: if o.account_named && self.kind == UebaType::Ip {
                0.0
            } else {
                source_score(o.source, probe) * (1.0 - self.sources_seen.new_item_chance())
            },
            volume: self.volume_score(&o.time),
            pattern_novelty: self.pattern_score(probe) * (1.0 - peer_share),
        }
    }

    fn time_of_day_score(&self, t: &EventTime) -> f64 {
        let h = usize::from(t.hour_of_day);
        if self.hour_observed(h) {
            return 0.0;
        }
        let mut best = None;
        for d in 1..=12usize {
            if self.hour_observed((h + d) % 24) || self.hour_observed((h + 24 - d) % 24) {
                best = Some(d);
                break;
            }
        }
        best.map_or(0.0, |d| HOUR_DISTANCE_SCORE[d - 1])
    }

    fn volume_score(&self, t: &EventTime) -> f64 {
        if self.active_minutes < 10 {
            return 0.0;
        }
        let count = if t.minute == self.minute {
            self.minute_count as f32 + 1.0
        } else {
            1.0
        };
        logistic4((count - self.volume_ema) * self.volume_inv_sd)
    }

    /// The most surprising single dimension of `o` whose surprisal reaches the bar `odds`, if any
    /// (see [`crate::deviation`]), one that alerts ([`alerts_alone`]) before one that does not.
    /// Each test compares counts against `odds` without a logarithm; the bits are worked out
    /// only for a signal that passes.
    fn strong_deviation(
        &self,
        o: &Observation,
        slots: &NoveltySlots,
        p: &UebaParams,
        odds: f64,
    ) -> Option<StrongDeviation> {
        let mut best: Option<StrongDeviation> = None;
        let mut second: Option<StrongDeviation> = None;
        let rank = |signal, bits: f64| (alerts_alone(signal, bits, p), bits);
        let mut offer = |signal, bits: f64, value| {
            let d = StrongDeviation {
                signal,
                bits,
                value,
                with: None,
                sustained: None,
            };
            if best.is_none_or(|b| rank(signal, bits) > rank(b.signal, b.bits)) {
                second = best;
                best = Some(d);
            } else if second.is_none_or(|s| bits > s.bits) {
                second = Some(d);
            }
        };
        // Hour counts saturate at u16::MAX: past that many events an hour's share is read against
        // what its slot can hold, not against events it could not count.
        let total = self.event_count.min(24 * u64::from(u16::MAX));
        let h = usize::from(o.time.hour_of_day);
        let near: u64 = (0..7)
            .map(|d| u64::from(self.hour_counts[(h + 21 + d) % 24]))
            .sum();
        // A server many clients reach (past `MAX_DISTINCT` sources) leaves its hour to the
        // account on the event: its hours are the sum of its clients' habits, so a traveller's
        // first morning abroad is new to the server, and only the person's own history says
        // whether it is news ("Servers are not people", docs/detection.md).
        let clients_judge =
            self.kind == UebaType::Host && o.account_named && self.sources_seen.is_crowd();
        let account_hour = self.kind == UebaType::Ip && o.account_named;
        if !clients_judge && !account_hour && total as f64 + 1.0 >= (near as f64 + 0.5) * odds {
            offer(Signal::NewHour, hour_bits(near, total), h as f64);
        }
        // An address's or a host's new counterpart on an event that names its account is judged
        // on the account (DHCP, NAT and VPN pools hand one address to many people in turn), and
        // so is an address's rate: it is the account's own burst, seen again.
        let account_judges = o.account_named && matches!(self.kind, UebaType::Host | UebaType::Ip);
        if self.active_minutes >= 30 && !account_judges {
            let count = if o.time.minute == self.minute {
                self.minute_count as f32 + 1.0
            } else {
                1.0
            };
            let z = f64::from((count - self.volume_ema) * self.volume_inv_sd);
            let busiest = f32::from(self.hour_peaks[usize::from(o.time.hour_of_day)]);
            if z > 0.0 && 1.0 + z * z >= odds && count > busiest {
                let usual = f64::from(self.volume_ema).max(1.0);
                offer(Signal::Rate, rate_bits(z), f64::from(count) / usual);
            }
        }
        let mut new_source = false;
        let account = self.is_account();
        if slots.source.is_some() && account && self.sources_seen.is_empty() {
            // The first address ever on an account's events: one that acted only locally (a
            // backup agent's service logons, cron, su) now arrives over the network. Of its
            // `n` events none had a source, so one with a source is `(n + 1) / 0.5` to one.
            let n = self.event_count as f64;
            if n + 1.0 >= 0.5 * odds {
                new_source = p.strong_odds > 0.0 && n + 1.0 >= 0.5 * p.strong_odds;
                offer(Signal::NewSource, ((n + 1.0) / 0.5).log2(), 0.0);
            }
        } else if let Some(source) = slots.source
            && !account_judges
            && !self.sources_seen.contains(source)
            && self.sources_seen.new_item_reaches(odds)
        {
            // Only a new source that alerts stands in for the host (a signal's worth does not
            // hide a first host that alerts).
            new_source = p.strong_odds > 0.0 && self.sources_seen.new_item_reaches(p.strong_odds);
            offer(Signal::NewSource, self.sources_seen.new_item_bits(), 0.0);
        }
        // A new source and a new host at once are one step from that source: the source names
        // the actor (and folds a spray from one address into one alert), so it alone is offered.
        // A person's first visit to a host is judged against the people who use it ("Servers
        // are not people", docs/detection.md): to a host `c` other people use it is `c` times
        // less news (an on-call admin paged onto a colleague's server), to a crowd (a VPN
        // gateway, a portal, a file server) none, and to an established host no person ever
        // used (a database only services reach) it alerts past the signal bar. A service
        // account's first host is news whoever else uses it.
        if let Some(host) = slots.host
            && account
            && !new_source
            && !slots.peers.is_some_and(|h| h.crowd)
            && !self.hosts_seen.contains(host)
            && self.hosts_seen.new_item_reaches(odds)
        {
            let own = self.hosts_seen.new_item_bits();
            // What lifts the signal bar to the alert bar (none with either off).
            let lift = if p.strong_odds > 0.0 && p.signal_odds > 0.0 {
                (p.strong_odds / p.signal_odds).log2().max(0.0)
            } else {
                0.0
            };
            let bits = match slots.peers {
                Some(h) if h.people == 0 && h.counted_for(p.warmup_ns, o.time.ts_ns) => own + lift,
                Some(h) => own - f64::from(h.people.max(1)).log2(),
                None => own,
            };
            if bits >= odds.log2() {
                offer(
                    Signal::NewHost,
                    bits,
                    slots.peers.map_or(0.0, |h| f64::from(h.people)),
                );
            }
        }
        if let Some(d) = self.dormancy(o, p) {
            offer(d.signal, d.bits, d.value);
        }
        // Two dimensions past the signal bar on one event are independent evidence: their
        // surprisals add, and past the alert bar together they alert where neither would alone
        // (a login at an hour the account never used *and* from a network it never used). Each
        // offer above passed the lower bar, so with signals on, both are signals at least; a pair
        // short of the alert bar stays the stronger one's signal.
        match (best, second) {
            (Some(b), Some(s))
                if p.signal_odds > 0.0
                    && !alerts_alone(b.signal, b.bits, p)
                    && b.bits + s.bits >= p.strong_bits =>
            {
                Some(StrongDeviation {
                    bits: b.bits + s.bits,
                    with: Some(DeviationPart {
                        signal: s.signal,
                        bits: s.bits,
                        value: s.value,
                    }),
                    ..b
                })
            }
            _ => best,
        }
    }

    /// Dormancy: a silence of at least `ueba.dormancy_days` that is also at least twice the
    /// longest gap before; its bits say only how much history the entity had.
    fn dormancy(&self, o: &Observation, p: &UebaParams) -> Option<StrongDeviation> {
        let gap_ns = o.time.ts_ns.saturating_sub(self.last_seen_ns);
        (p.dormancy_ns > 0
            && !o.failed_logon
            && self.event_count > 0
            && gap_ns >= p.dormancy_ns
            && gap_ns / 1_000_000_000 >= 2 * i64::from(self.longest_gap_s))
        .then(|| StrongDeviation {
            signal: Signal::Dormancy,
            bits: (self.event_count as f64 + 1.0).log2(),
            value: gap_ns as f64 / 86_400e9,
            with: None,
            sustained: None,
        })
    }

    /// Dormancy of an account still short of `ueba.warmup_min_events` (the leaver who worked a
    /// week and went quiet): the silence is judged once `ueba.warmup_days` have passed since
    /// the account appeared and it showed at least [`DORMANCY_MIN_EVENTS`] events, since a
    /// silence needs time behind it, not a full baseline. Alerts alone, as dormancy does.
    /// Accounts only: an address back after weeks is a DHCP lease handed out again as often
    /// as a returning actor (on the realistic scenario such returns were all of the first).
    fn dormant_in_warmup(&self, o: &Observation, p: &UebaParams) -> Option<StrongDeviation> {
        if !self.judged_thin(o, p) || self.event_count < DORMANCY_MIN_EVENTS {
            return None;
        }
        self.dormancy(o, p)
    }

    /// Whether an account still in warmup is judged on a thin history at `o`: alerting on,
    /// strong deviations on, and `ueba.warmup_days` passed since it appeared (its events may
    /// still be short of `ueba.warmup_min_events`).
    fn judged_thin(&self, o: &Observation, p: &UebaParams) -> bool {
        let days_passed = o.time.ts_ns.saturating_sub(self.first_seen_ns) >= p.warmup_ns;
        p.enabled && p.strong_odds > 0.0 && days_passed && self.is_account()
    }

    /// A user or service account.
    #[inline]
    fn is_account(&self) -> bool {
        matches!(self.kind, UebaType::User | UebaType::ServiceAccount)
    }

    /// An entity short of `ueba.warmup_min_events` once `ueba.warmup_days` have passed: a thin
    /// history (a person who logs on a few times a day, a nightly job). The blend needs a settled
    /// baseline and stays off, but the surprisal of each dimension carries its own evidence
    /// count (an hour never used in 140 events is at most 8.2 bits, short of an alert alone), so
    /// the deviations are judged as for a scored entity: a signal, two signals at once, or a
    /// signal that opens a sustained run ("Thin histories", docs/detection.md). Without this a
    /// sparse account is never judged at all, and an attacker using it goes unseen.
    fn judge_thin(
        &mut self,
        o: &Observation,
        slots: &NoveltySlots,
        probe: &Probe,
        peer_share: f64,
        p: &UebaParams,
        thresholds: &[Dspot; 4],
    ) -> Outcome {
        let bar = p.strong_odds.min(p.signal_odds);
        if !self.judged_thin(o, p) || p.signal_odds <= 0.0 || o.time.ts_ns < self.cooldown_until_ns
        {
            return Outcome::Learned;
        }
        // Dormancy in warmup has its own test (`dormant_in_warmup`), already passed over.
        let Some(d) = self
            .strong_deviation(o, slots, p, bar)
            .filter(|d| d.signal != Signal::Dormancy)
        else {
            return Outcome::Learned;
        };
        let sub = self.score_probed(o, probe, peer_share);
        let finding = UebaAlert {
            entity: o.entity,
            kind: self.kind,
            ts_ns: o.time.ts_ns,
            score: sub.blend(&p.weights),
            threshold: thresholds[self.kind as usize].threshold(),
            sub_scores: sub,
            deviation: Some(d),
        };
        // A signal the blend also finds past its type's threshold is an alarm, as for a scored
        // entity (the blend alone is not trusted on a thin history: with it, it confirms).
        let blend_agrees = finding.score >= finding.threshold && finding.score >= MIN_ALERT_SCORE;
        if alerts_alone(d.signal, d.bits, p) || blend_agrees {
            self.cooldown_until_ns = o.time.ts_ns.saturating_add(p.cooldown_ns);
            Outcome::Alert(finding)
        } else {
            Outcome::Signal(finding)
        }
    }

    /// Where `o`'s source and host lie in the novelty filters. A source counts by a person's
    /// network, by a host's or an address's exact counterpart (see [`crate::deviation`]).
    #[inline]
    fn novelty_slots(&self, o: &Observation) -> NoveltySlots {
        let source = o.source.map(|source| match self.kind {
            // A person's by network (a new DHCP lease is no news); a service account's, a
            // host's and an address's by exact counterpart: services run from servers that
            // keep their addresses, so a service account from a new desk is news even in a
            // known subnet.
            UebaType::User if source >> 127 == 0 => Slots::of(fold_source(network_of(source))),
            _ => Slots::of(fold_source(source)),
        });
        NoveltySlots {
            source,
            host: (o.host != 0).then(|| Slots::of(o.host)),
            person: (self.kind == UebaType::Host && o.person != 0).then(|| Slots::of(o.person)),
            peers: None,
        }
    }

    fn pattern_score(&self, probe: &Probe) -> f64 {
        match probe.template {
            None => 1.0,
            Some(i) => {
                let w = self.lists.weight(usize::from(i)).max(1e-9);
                let total = self.template_total.max(w);
                f64::from((log2(total / w) * 0.1).clamp(0.0, 1.0))
            }
        }
    }

    /// Learns one observation; says what became of the entity's top-K templates.
    fn learn(
        &mut self,
        o: &Observation,
        probe: &Probe,
        slots: &NoveltySlots,
        p: &UebaParams,
    ) -> TemplateChange {
        self.dirty = true;
        // A failed logon is someone trying the account: its silence goes on (dormancy reads the
        // gap from `last_seen_ns`), and so does its place in the eviction order.
        if !o.failed_logon {
            if self.event_count > 0 {
                let gap_s = (o.time.ts_ns.saturating_sub(self.last_seen_ns) / 1_000_000_000)
                    .clamp(0, i64::from(u32::MAX)) as u32;
                self.longest_gap_s = self.longest_gap_s.max(gap_s);
            }
            self.last_seen_ns = self.last_seen_ns.max(o.time.ts_ns);
        }
        self.event_count += 1;
        if let Some(source) = slots.source {
            self.sources_seen.learn(source);
        }
        if let Some(host) = slots.host {
            self.hosts_seen.learn(host);
        }
        if let Some(person) = slots.person {
            self.hosts_seen.learn(person);
        }
        let h = usize::from(o.time.hour_of_day);
        self.hour_counts[h] = self.hour_counts[h].saturating_add(1);
        if let Some(s) = o.source {
            self.lists.learn_source(s, probe);
        }
        let change = self.lists.learn_template(o.template, probe);
        self.template_total += 1.0;
        if self.template_total > 1e6 {
            self.lists.halve_weights();
            self.template_total *= 0.5;
        }
        let minute = o.time.minute;
        if minute != self.minute {
            self.close_minute(p);
            self.minute = minute;
            self.minute_count = 0;
        }
        self.minute_count = self.minute_count.saturating_add(1);
        change
    }

    fn close_minute(&mut self, p: &UebaParams) {
        if self.minute == i32::MIN || self.minute_count == 0 {
            return;
        }
        let x = f64::from(self.minute_count);
        let (mut ema, mut var) = (f64::from(self.volume_ema), f64::from(self.volume_var));
        if self.active_minutes == 0 {
            ema = x;
        } else {
            let d = x - ema;
            ema += p.ema_alpha * d;
            var = (1.0 - p.ema_alpha) * (var + p.ema_alpha * d * d);
        }
        self.volume_ema = ema as f32;
        self.volume_var = var as f32;
        // The hour's busiest minute, fading by a 64th per closed minute of that hour (a one-off
        // burst is forgotten within days of ordinary activity at that hour; peaks under 64
        // never fade, they are ordinary).
        let hour = self.minute.rem_euclid(1440) as usize / 60;
        let peak = &mut self.hour_peaks[hour];
        *peak = (*peak - *peak / 64).max(self.minute_count.min(255) as u8);
        // max(sqrt(var), 1, sqrt(ema) / 2) with one square root (sqrt is monotonic).
        self.volume_inv_sd = (1.0 / var.max(1.0).max(0.25 * ema).sqrt()) as f32;
        self.active_minutes = self.active_minutes.saturating_add(1);
    }
}

/// Whether a deviation alerts on its own: past `ueba.strong_deviation_bits`, or dormancy, whose
/// test is the silence itself (at least `ueba.dormancy_days` and twice the longest gap before)
/// and whose bits only say how much history the entity had.
#[inline]
fn alerts_alone(signal: Signal, bits: f64, p: &UebaParams) -> bool {
    bits >= p.strong_bits || (signal == Signal::Dormancy && p.strong_odds > 0.0)
}

/// Where an observation's source and host lie in its entity's novelty filters.
struct NoveltySlots {
    source: Option<Slots>,
    host: Option<Slots>,
    /// For a host, the person on the event (a user account), whom its people count.
    person: Option<Slots>,
    /// Who uses the host, where it is new to a person: its worker's word on the board.
    peers: Option<HostPeers>,
}

/// Events an entity in warmup must have shown before its silence can count as dormancy: a
/// pattern, not a name seen once or twice.
pub const DORMANCY_MIN_EVENTS: u64 = 20;

/// `1 - exp(-d / 2.5)` for an hour distance `d` of 1 to 12: the time-of-day score, tabled because
/// it is read on every observation and `exp` is the dearest step of it.
const HOUR_DISTANCE_SCORE: [f64; 12] = [
    0.3296799539643607,
    0.5506710358827784,
    0.6988057880877978,
    0.7981034820053446,
    0.8646647167633873,
    0.9092820467105875,
    0.9391899373747821,
    0.9592377960216338,
    0.9726762775527075,
    0.9816843611112658,
    0.9877226600969315,
    0.99177025295098,
];

/// Source novelty: 0 for a known source, 0.5 for a new one in a known network, 1 otherwise.
#[inline]
fn source_score(source: Option<u128>, probe: &Probe) -> f64 {
    match (source, probe.source, probe.same_network) {
        (None, _, _) | (_, Some(_), _) => 0.0,
        (Some(_), None, true) => 0.5,
        (Some(_), None, false) => 1.0,
    }
}

/// An IP address as the u128 UEBA keys sources by (IPv4 mapped into IPv6).
pub fn ip_key(ip: std::net::IpAddr) -> u128 {
    match ip {
        std::net::IpAddr::V4(v4) => u128::from(v4.to_ipv6_mapped()),
        std::net::IpAddr::V6(v6) => u128::from(v6),
    }
}

/// A source key as text: an address (see [`ip_key`]), or `host:<hash>` for the host an IP
/// entity reached (top bit set, the host's name hash in the high 64 bits).
pub fn source_text(key: u128) -> String {
    if key >> 127 == 1 {
        format!("host:{:016x}", (key >> 64) as u64)
    } else if key >> 32 == 0xffff {
        std::net::Ipv4Addr::from(key as u32).to_string()
    } else {
        std::net::Ipv6Addr::from(key).to_string()
    }
}

/// Key of a (template, entity type) pair in the peer counts.
fn peer_key(template: u64, kind: UebaType) -> u64 {
    watchpost_proto::fmix64(template ^ (kind as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// Entity keys are already hashes: hashing them again would only cost time.
type EntityMap = EntityTable<Baseline>;

/// Every entity's baseline and the per-type thresholds: the state of one UEBA worker.
pub struct Ueba {
    params: UebaParams,
    entities: EntityMap,
    thresholds: [Dspot; 4],
    evicted: u64,
    risk_points: Vec<RiskPoint>,
    /// Per (template, type): how many entities of the type have taken the template into their
    /// top-K. A template most of an entity's peers use (a mistyped password) is little news
    /// for it; one no peer uses (a reverse shell) is.
    peers: U64Map<u32>,
    /// Entities per type in memory, and the reciprocal of each (of at least 1), kept with the
    /// count so that a peer share is a multiplication: counts change only when an entity comes
    /// or goes, shares are read on every observation.
    type_counts: [u32; 4],
    type_count_inv: [f32; 4],
    /// Who uses each host, shared with the process's other workers (see [`crate::PeerBoard`]).
    board: Arc<PeerBoard>,
}

impl Ueba {
    /// An empty engine.
    pub fn new(params: UebaParams) -> Ueba {
        let dspot = Dspot::new(DspotConfig {
            risk: params.risk,
            bounded: true,
            ..DspotConfig::default()
        });
        Ueba {
            entities: EntityMap::with_capacity(params.max_entities.min(1 << 16)),
            thresholds: [dspot.clone(), dspot.clone(), dspot.clone(), dspot],
            params,
            evicted: 0,
            risk_points: Vec::with_capacity(4096),
            // Small at first and grown as templates come: a table sized for thousands of keys
            // spreads the hundred or so in use over 128 KB, which the baselines streaming
            // through push out of the cache (measured in docs/benchmarks.md, session 12).
            peers: U64Map::with_capacity_and_hasher(256, Default::default()),
            type_counts: [0; 4],
            type_count_inv: [1.0; 4],
            board: Arc::new(PeerBoard::default()),
        }
    }

    /// Shares `board` with the process's other workers (it starts with a board of its own),
    /// publishing on it what this worker's hosts know.
    pub fn set_board(&mut self, board: Arc<PeerBoard>) {
        for (host, b) in self.entities.iter() {
            if b.kind == UebaType::Host {
                board.publish(host, b.host_peers());
            }
        }
        self.board = board;
    }

    /// The board of who uses each host.
    pub fn board(&self) -> &Arc<PeerBoard> {
        &self.board
    }

    /// Share of the entities of `kind` that use `template` (0 to 1).
    fn peer_share(&self, template: u64, kind: UebaType) -> f64 {
        let users = self
            .peers
            .get(&peer_key(template, kind))
            .copied()
            .unwrap_or(0);
        f64::from((users as f32 * self.type_count_inv[kind as usize]).min(1.0))
    }

    /// One entity of `kind` more (`up`) or fewer.
    fn count_type(&mut self, kind: UebaType, up: bool) {
        let n = &mut self.type_counts[kind as usize];
        *n = if up { *n + 1 } else { n.saturating_sub(1) };
        self.type_count_inv[kind as usize] = 1.0 / (*n).max(1) as f32;
    }

    /// One more entity of `kind` keeps `template` in its top-K.
    fn add_peer(&mut self, template: u64, kind: UebaType) {
        *self.peers.entry(peer_key(template, kind)).or_insert(0) += 1;
    }

    /// One entity of `kind` fewer keeps `template` in its top-K: it was pushed out of the list
    /// or left with its entity. Without this, a template that churns through lists would count
    /// once per entry and read as used by every peer.
    fn remove_peer(&mut self, template: u64, kind: UebaType) {
        if let Some(n) = self.peers.get_mut(&peer_key(template, kind)) {
            *n = n.saturating_sub(1);
        }
    }

    /// Moves the risk-history points closed since the last call into `out`.
    pub fn take_risk_points(&mut self, out: &mut Vec<RiskPoint>) {
        out.append(&mut self.risk_points);
    }

    /// Calls `save` with every baseline changed since the last save, and marks them saved.
    pub fn save_dirty(&mut self, mut save: impl FnMut(u64, &Baseline)) {
        for (k, b) in self.entities.iter_mut() {
            if b.dirty {
                b.dirty = false;
                save(k, b);
            }
        }
    }

    /// Calls `visit` with every baseline, changed or not (a snapshot of the whole state, which
    /// a fleet's next owner of the partition starts from).
    pub fn for_each(&self, mut visit: impl FnMut(u64, &Baseline)) {
        for (k, b) in self.entities.iter() {
            visit(k, b);
        }
    }

    /// Puts back a saved baseline (at start).
    pub fn restore(&mut self, entity: u64, mut baseline: Baseline) {
        if self.entities.len() < self.params.max_entities {
            baseline.dirty = false;
            self.count_type(baseline.kind, true);
            for i in 0..baseline.lists.template_len() {
                self.add_peer(baseline.lists.template(i), baseline.kind);
            }
            if baseline.kind == UebaType::Host {
                self.board.publish(entity, baseline.host_peers());
            }
            self.entities.insert(entity, baseline);
        }
    }

    /// The four per-type thresholds, in [`UebaType`] order.
    pub fn thresholds(&self) -> &[Dspot; 4] {
        &self.thresholds
    }

    /// Puts back saved thresholds (at start).
    pub fn restore_thresholds(&mut self, thresholds: [Dspot; 4]) {
        self.thresholds = thresholds;
    }

    /// Its settings.
    pub fn params(&self) -> &UebaParams {
        &self.params
    }

    /// Turns alerting on or off; baselines keep learning either way.
    pub fn set_enabled(&mut self, on: bool) {
        self.params.enabled = on;
    }

    /// Entities in memory.
    pub fn len(&self) -> usize {
        self.entities.len()
    }

    /// No entities.
    pub fn is_empty(&self) -> bool {
        self.entities.is_empty()
    }

    /// Entities evicted so far.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// Prefetching in three stages, run for the events three, two and one places ahead of the
    /// one being scored (`ahead`): the table slot of `entity` first, then its baseline, then its
    /// top-K lists. Each stage reads only what the stage before started loading, so none stalls,
    /// and the cache misses of several events overlap with the work in between. With more
    /// entities than the cache holds, those misses are most of UEBA's cost.
    #[inline]
    pub fn prefetch(&self, entity: u64, ahead: usize) {
        match ahead {
            0 => {}
            1 => {
                if let Some(b) = self.entities.get(entity) {
                    b.lists.prefetch();
                }
            }
            2 => self.entities.prefetch_value(entity),
            _ => self.entities.prefetch_slot(entity),
        }
    }

    /// An entity's baseline.
    pub fn baseline(&self, entity: u64) -> Option<&Baseline> {
        self.entities.get(entity)
    }

    /// Ends an entity's alert cooldown: its alert was closed by an analyst, so its next alarm
    /// is a new alert rather than a repeat of the closed one.
    pub fn end_cooldown(&mut self, entity: u64) {
        if let Some(b) = self.entities.get_mut(entity) {
            b.cooldown_until_ns = i64::MIN;
        }
    }

    /// The threshold of a type.
    pub fn threshold(&self, kind: UebaType) -> &Dspot {
        &self.thresholds[kind as usize]
    }

    /// Mutable threshold (feedback moves its risk).
    pub fn threshold_mut(&mut self, kind: UebaType) -> &mut Dspot {
        &mut self.thresholds[kind as usize]
    }

    /// Scores one entity occurrence, then learns it.
    pub fn observe(&mut self, observation: &Observation) -> Outcome {
        let (at, new_entity) = match self.entities.position(observation.entity) {
            Some(at) => (at, false),
            None => {
                if self.entities.len() >= self.params.max_entities {
                    self.evict();
                }
                self.count_type(observation.kind, true);
                let at = self.entities.insert(
                    observation.entity,
                    Baseline::new(observation.kind, observation.time.ts_ns, &self.params),
                );
                (at, true)
            }
        };
        let peer_share = self.peer_share(observation.template, observation.kind);
        let p = &self.params;
        let Some(b) = self.entities.at_mut(at) else {
            return Outcome::Learned;
        };
        let probe = b.lists.probe(observation.template, observation.source);
        let mut slots = b.novelty_slots(observation);
        // Only for a host new to a person (rare): who else uses it, by its worker's word.
        if b.kind == UebaType::User && slots.host.is_some_and(|h| !b.hosts_seen.contains(h)) {
            slots.peers = self.board.read(observation.host);
        }
        // For a host: its first event, a new person, or a turn into a crowd is news for the
        // board.
        let host_before = (b.kind == UebaType::Host && !new_entity).then(|| b.host_peers());
        let state = b.lifecycle(observation.time.ts_ns, p);
        let dormant = if state == Lifecycle::WarmingUp {
            b.dormant_in_warmup(observation, p)
        } else {
            None
        };
        let outcome = if let Some(d) = dormant {
            b.cooldown_until_ns = observation.time.ts_ns.saturating_add(p.cooldown_ns);
            let sub = b.score_probed(observation, &probe, peer_share);
            Outcome::Alert(UebaAlert {
                entity: observation.entity,
                kind: b.kind,
                ts_ns: observation.time.ts_ns,
                score: sub.blend(&p.weights),
                threshold: self.thresholds[b.kind as usize].threshold(),
                sub_scores: sub,
                deviation: Some(d),
            })
        } else if state == Lifecycle::WarmingUp {
            b.judge_thin(observation, &slots, &probe, peer_share, p, &self.thresholds)
        } else {
            let sub = b.score_probed(observation, &probe, peer_share);
            let score = sub.blend(&p.weights);
            let hour = observation.time.hour;
            if hour != b.risk_hour {
                b.risk_hour = hour;
                b.risk_max = 0.0;
            }
            // Written each time the hour's highest score rises (a few times an hour per entity),
            // not when the hour closes: the hour of an alert is the one an analyst opens the
            // risk history for, and it closes only when the entity acts again, maybe never.
            if score as f32 > b.risk_max {
                b.risk_max = score as f32;
                self.risk_points.push(RiskPoint {
                    entity: observation.entity,
                    hour_ns: i64::from(hour) * NS_PER_HOUR,
                    max: b.risk_max,
                });
            }
            let dspot = &mut self.thresholds[b.kind as usize];
            let threshold = dspot.threshold();
            let verdict = dspot.update(score);
            let alarm = verdict == Verdict::Alarm && score >= MIN_ALERT_SCORE;
            // One pass finds the most surprising dimension past the lower of the two bars; past
            // the alert bar it alerts, short of it (and of the blend's threshold) it is a signal.
            let bar = match (p.strong_odds > 0.0, p.signal_odds > 0.0) {
                (true, true) => p.strong_odds.min(p.signal_odds),
                (true, false) => p.strong_odds,
                (false, true) => p.signal_odds,
                (false, false) => 0.0,
            };
            let found = if p.enabled && bar > 0.0 {
                b.strong_deviation(observation, &slots, p, bar)
            } else {
                None
            };
            let (deviation, weak) = match found {
                Some(d) if alerts_alone(d.signal, d.bits, p) => (Some(d), None),
                other => (None, other),
            };
            let alarm = alarm || deviation.is_some();
            let finding = |deviation| UebaAlert {
                entity: observation.entity,
                kind: b.kind,
                ts_ns: observation.time.ts_ns,
                score,
                threshold,
                sub_scores: sub,
                deviation,
            };
            if let Some(d) = weak
                && !alarm
                && p.enabled
                && state == Lifecycle::Scoring
            {
                Outcome::Signal(finding(Some(d)))
            } else if alarm && p.enabled && state == Lifecycle::Scoring {
                let alert = finding(deviation);
                b.cooldown_until_ns = observation.time.ts_ns.saturating_add(p.cooldown_ns);
                Outcome::Alert(alert)
            } else {
                Outcome::Scored {
                    score,
                    suppressed: alarm,
                }
            }
        };
        let kind = b.kind;
        match b.learn(observation, &probe, &slots, p) {
            TemplateChange::Counted => {}
            TemplateChange::Added => self.add_peer(observation.template, kind),
            TemplateChange::Replaced(old) => {
                self.add_peer(observation.template, kind);
                self.remove_peer(old, kind);
            }
        }
        if let Some(b) = self.entities.at(at)
            && b.kind == UebaType::Host
            && host_before.is_none_or(|before| b.host_peers() != before)
        {
            self.board.publish(observation.entity, b.host_peers());
        }
        outcome
    }

    /// Drops the least recently seen hundredth of the entities (at least one), so eviction runs
    /// once per that many new entities rather than on every one.
    fn evict(&mut self) {
        let n = (self.entities.len() / 100).max(1);
        let mut seen: Vec<i64> = self.entities.iter().map(|(_, b)| b.last_seen_ns).collect();
        let cut = *seen.select_nth_unstable(n - 1).1;
        let oldest: Vec<u64> = self
            .entities
            .iter()
            .filter(|(_, b)| b.last_seen_ns <= cut)
            .map(|(k, _)| k)
            .take(n)
            .collect();
        for k in oldest {
            if let Some(b) = self.entities.remove(k) {
                self.count_type(b.kind, false);
                // Its templates leave the peer counts with it, or shares would drift upwards.
                for i in 0..b.lists.template_len() {
                    self.remove_peer(b.lists.template(i), b.kind);
                }
                self.evicted += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::NS_PER_MINUTE;

    const DAY: i64 = 86_400_000_000_000;
    const HOUR: i64 = NS_PER_HOUR;

    fn obs(ts_ns: i64, entity: u64, source: Option<u128>, template: u64) -> Observation {
        Observation {
            time: EventTime::new(ts_ns),
            entity,
            kind: UebaType::User,
            source,
            template,
            host: 0,
            account_named: false,
            failed_logon: false,
            person: 0,
        }
    }

    fn ip(s: &str) -> Option<u128> {
        Some(ip_key(s.parse().unwrap()))
    }

    fn params() -> UebaParams {
        UebaParams {
            warmup_ns: 2 * DAY,
            warmup_min_events: 50,
            ..UebaParams::default()
        }
    }

    /// An office worker: weekdays 9 to 17, from two addresses in one /24, four templates.
    fn office_days(u: &mut Ueba, entity: u64, days: i64) {
        for d in 0..days {
            for h in 9..17 {
                for m in (0..60).step_by(10) {
                    let ts = d * DAY + h * HOUR + m * NS_PER_MINUTE;
                    let src = if m % 20 == 0 { "10.1.2.3" } else { "10.1.2.4" };
                    u.observe(&obs(ts, entity, ip(src), (m as u64 / 10) % 4));
                }
            }
        }
    }

    #[test]
    fn hour_distance_table_is_the_formula() {
        for (i, v) in HOUR_DISTANCE_SCORE.iter().enumerate() {
            let d = (i + 1) as f64;
            assert!((v - (1.0 - (-d / 2.5).exp())).abs() < 1e-12, "{d}");
        }
    }

    #[test]
    fn lifecycle_warmup_needs_both_days_and_events() {
        let p = params();
        let mut u = Ueba::new(p.clone());
        // Many events on day one: still warming up (days not elapsed).
        for i in 0..100 {
            assert_eq!(
                u.observe(&obs(i * NS_PER_MINUTE, 1, ip("10.0.0.1"), 1)),
                Outcome::Learned
            );
        }
        // Days elapsed, but a second entity has too few events.
        u.observe(&obs(0, 2, None, 1));
        assert_eq!(u.observe(&obs(3 * DAY, 2, None, 1)), Outcome::Learned);
        let b = u.baseline(1).unwrap();
        assert_eq!(b.lifecycle(3 * DAY, &p), Lifecycle::Scoring);
        assert_eq!(
            u.baseline(2).unwrap().lifecycle(3 * DAY, &p),
            Lifecycle::WarmingUp
        );
    }

    #[test]
    fn sub_scores_follow_the_spec_rules() {
        let mut u = Ueba::new(params());
        office_days(&mut u, 7, 10);
        let b = u.baseline(7).unwrap();
        let at = |h: i64| 10 * DAY + h * HOUR + 5 * NS_PER_MINUTE;
        // Usual everything: all zero but a trace of volume.
        let s = b.score(&obs(at(10), 7, ip("10.1.2.3"), 1), 0.0);
        assert_eq!((s.time_of_day, s.source_novelty), (0.0, 0.0));
        assert!(s.pattern_novelty < 0.3 && s.volume < 0.1, "{s:?}");
        // time_of_day grows with distance from the observed hours (9..17).
        let tod = |h| b.score(&obs(at(h), 7, None, 1), 0.0).time_of_day;
        assert!(
            tod(18) > 0.0 && tod(18) < tod(20) && tod(20) < tod(3),
            "{} {} {}",
            tod(18),
            tod(20),
            tod(3)
        );
        // A new address in a known network, and one from elsewhere.
        // Each is discounted by the chance of a new network for an entity that has used one
        // network 480 times (0.5 / 481): all but nothing here.
        let src = |a: &str| b.score(&obs(at(10), 7, ip(a), 1), 0.0).source_novelty;
        let kept = 1.0 - 0.5 / 481.0;
        assert!(
            (src("10.1.2.99") - 0.5 * kept).abs() < 1e-9,
            "{}",
            src("10.1.2.99")
        );
        assert!(
            (src("203.0.113.9") - kept).abs() < 1e-9,
            "{}",
            src("203.0.113.9")
        );
        // An unseen template.
        assert_eq!(
            b.score(&obs(at(10), 7, None, 999), 0.0).pattern_novelty,
            1.0
        );
        assert_eq!(b.hours_active(), (9..17).collect::<Vec<u8>>());
        assert_eq!(b.top_sources().len(), 2);
        assert_eq!(b.top_templates().len(), 4);
        // A burst: 200 events in one minute where a minute usually holds one.
        for _ in 0..200 {
            u.observe(&obs(at(11), 7, ip("10.1.2.3"), 1));
        }
        let b = u.baseline(7).unwrap();
        let burst = b.score(&obs(at(11), 7, None, 1), 0.0).volume;
        assert!(burst > 0.95, "{burst}");
    }

    #[test]
    fn an_off_hours_login_from_a_new_network_alerts_once_then_cools_down() {
        let mut u = Ueba::new(params());
        // Several users so the type threshold calibrates on plenty of normal scores.
        for e in 0..20 {
            office_days(&mut u, 100 + e, 14);
        }
        let t = 14 * DAY + 3 * HOUR;
        let first = u.observe(&obs(t, 105, ip("198.51.100.7"), 42));
        let Outcome::Alert(a) = first else {
            panic!("no alert: {first:?}")
        };
        assert_eq!(a.entity, 105);
        assert!(a.score > a.threshold);
        // Full novelty, but for the small chance that an entity with two networks meets a third.
        assert!(a.sub_scores.source_novelty > 0.99, "{:?}", a.sub_scores);
        // The same again within the cooldown: suppressed.
        let again = u.observe(&obs(t + NS_PER_MINUTE, 105, ip("198.51.100.8"), 43));
        assert!(
            matches!(
                again,
                Outcome::Scored {
                    suppressed: true,
                    ..
                }
            ),
            "{again:?}"
        );
    }

    #[test]
    fn disabled_ueba_learns_but_never_alerts_and_needs_no_new_warmup() {
        let mut u = Ueba::new(params());
        for e in 0..20 {
            office_days(&mut u, 100 + e, 14);
        }
        u.set_enabled(false);
        let t = 14 * DAY + 3 * HOUR;
        assert!(!matches!(
            u.observe(&obs(t, 105, ip("198.51.100.7"), 42)),
            Outcome::Alert(_)
        ));
        u.set_enabled(true);
        let later = t + 2 * 900_000_000_000;
        assert!(matches!(
            u.observe(&obs(later, 106, ip("192.0.2.1"), 77)),
            Outcome::Alert(_)
        ));
    }

    #[test]
    fn evicted_entities_leave_the_peer_counts() {
        let mut u = Ueba::new(UebaParams {
            max_entities: 2,
            ..params()
        });
        u.observe(&obs(0, 1, None, 5));
        u.observe(&obs(1, 2, None, 5));
        assert_eq!(u.peer_share(5, UebaType::User), 1.0);
        // A third entity evicts the coldest (entity 1): one of the two left uses template 5.
        u.observe(&obs(2, 3, None, 6));
        assert_eq!(u.evicted(), 1);
        assert_eq!(u.peer_share(5, UebaType::User), 0.5);
    }

    /// A template pushed out of an entity's top-K no longer counts as one it uses: otherwise
    /// templates that churn through the lists would pile up counts and read as used by every
    /// peer, and their pattern novelty would fade to nothing.
    #[test]
    fn templates_pushed_out_of_a_list_leave_the_peer_counts() {
        let mut u = Ueba::new(UebaParams {
            template_k: 2,
            ..params()
        });
        // Entity 1 cycles through three templates (two fit its list); entity 2 uses only 5.
        u.observe(&obs(0, 2, None, 5));
        for i in 0..300 {
            u.observe(&obs(1 + i, 1, None, 5 + (i as u64 % 3)));
        }
        let kept = u.baseline(1).unwrap().lists.template_len();
        assert_eq!(kept, 2);
        let shares: Vec<f64> = (5..8).map(|t| u.peer_share(t, UebaType::User)).collect();
        // Two user entities: each template is used by at most both of them, and entity 1's two
        // list entries plus entity 2's one make three uses in all.
        assert!(shares.iter().all(|&s| s <= 1.0), "{shares:?}");
        assert!(
            (shares.iter().sum::<f64>() - 1.5).abs() < 1e-9,
            "{shares:?}"
        );
    }

    #[test]
    fn the_coldest_entities_are_evicted_past_the_cap() {
        let mut u = Ueba::new(UebaParams {
            max_entities: 1000,
            ..params()
        });
        for e in 0..1500u64 {
            u.observe(&obs(e as i64 * NS_PER_MINUTE, e, None, 1));
        }
        assert!(u.len() <= 1000);
        assert!(u.evicted() >= 500);
        assert!(u.baseline(1499).is_some(), "the newest stays");
        assert!(u.baseline(0).is_none(), "the oldest goes");
    }

    #[test]
    fn service_accounts_are_recognised() {
        for n in ["svc_backup", "web01$", "CORP\\svc-sql", "www-data", "root"] {
            assert!(is_service_account(&n.to_lowercase()), "{n}");
        }
        for n in ["alice", "bob@corp.example", "service"] {
            let expect = n == "service";
            assert_eq!(is_service_account(n), expect, "{n}");
        }
    }

    #[test]
    fn a_template_most_peers_use_is_little_news() {
        let mut u = Ueba::new(params());
        for e in 1..=20u64 {
            u.observe(&obs(HOUR, e, None, 1));
            if e != 20 {
                u.observe(&obs(HOUR, e, None, 5));
            }
        }
        assert!((u.peer_share(5, UebaType::User) - 0.95).abs() < 1e-6);
        assert_eq!(u.peer_share(6, UebaType::User), 0.0);
        assert_eq!(u.peer_share(5, UebaType::Host), 0.0, "per type");
        let b = u.baseline(20).unwrap();
        let common = b.score(&obs(2 * HOUR, 20, None, 5), u.peer_share(5, UebaType::User));
        let unique = b.score(&obs(2 * HOUR, 20, None, 6), u.peer_share(6, UebaType::User));
        assert!(common.pattern_novelty < 0.1 && unique.pattern_novelty == 1.0);
    }

    #[test]
    fn a_saved_baseline_reads_back_and_an_unmarked_one_is_refused() {
        let mut u = Ueba::new(params());
        office_days(&mut u, 7, 3);
        let b = u.baseline(7).unwrap();
        let cfg = watchpost_proto::bincode_config();
        let bytes = bincode::encode_to_vec(b, cfg).unwrap();
        assert_eq!(bytes[0], BASELINE_LAYOUT);
        let (back, _): (Baseline, _) = bincode::decode_from_slice(&bytes, cfg).unwrap();
        assert_eq!(bincode::encode_to_vec(&back, cfg).unwrap(), bytes);
        let at = 3 * DAY + 10 * HOUR;
        let o = obs(at, 7, ip("10.1.2.3"), 1);
        assert_eq!(back.score(&o, 0.0), b.score(&o, 0.0));
        // Every earlier layout starts with the varint of `first_seen_ns`, without the marker.
        let err = bincode::decode_from_slice::<Baseline, _>(&bytes[1..], cfg).unwrap_err();
        assert!(err.to_string().contains("another layout"), "{err}");
    }

    #[test]
    fn the_volume_score_grows_with_the_minute_count_against_the_ema() {
        let mut u = Ueba::new(params());
        // Ten events a minute for an hour: the EMA settles at 10.
        for m in 0..60 {
            for s in 0..10 {
                u.observe(&obs(m * NS_PER_MINUTE + s * 1_000_000_000, 3, None, 1));
            }
        }
        let b = u.baseline(3).unwrap();
        assert!((b.volume_ema() - 10.0).abs() < 0.01, "{}", b.volume_ema());
        // The next minute's first event is far below the usual count; its hundredth far above.
        let next = 60 * NS_PER_MINUTE;
        let quiet = b.volume_score(&EventTime::new(next));
        assert!(quiet < 0.01, "{quiet}");
        for i in 0..99 {
            u.observe(&obs(next + i * 100_000_000, 3, None, 1));
        }
        let busy = u
            .baseline(3)
            .unwrap()
            .volume_score(&EventTime::new(next + 99 * 100_000_000));
        // Saturated exactly. On its own at its weight it stays under the blend's floor: one
        // extreme dimension alerts through its calibrated signal (`rate`), not the blend.
        assert_eq!(busy, 1.0);
        assert!(u.params().weights[2] * busy < MIN_ALERT_SCORE);
    }

    /// The deviation an observation raised, if it raised an alert.
    fn deviation_of(outcome: Outcome) -> Option<StrongDeviation> {
        match outcome {
            Outcome::Alert(a) => a.deviation,
            _ => None,
        }
    }

    fn alerted(outcome: Outcome) -> bool {
        matches!(outcome, Outcome::Alert(_))
    }

    #[test]
    fn an_hour_never_used_alerts_on_its_own_where_the_blend_cannot() {
        // The blend is blind to the hour here, so only the single-deviation path can alert.
        let mut u = Ueba::new(UebaParams {
            weights: [0.0, 0.4, 0.3, 0.3],
            ..params()
        });
        office_days(&mut u, 1, 20);
        let at = 20 * DAY + 3 * HOUR;
        let o = obs(at, 1, ip("10.1.2.3"), 1);
        let b = u.baseline(1).unwrap();
        let blend = b.score(&o, 0.0).blend(&u.params().weights);
        assert!(
            blend < MIN_ALERT_SCORE,
            "the blend alone stays quiet: {blend}"
        );
        let d = deviation_of(u.observe(&o)).expect("an alert with its deviation");
        assert_eq!(d.signal, Signal::NewHour);
        assert_eq!(d.value, 3.0);
        assert!(d.bits > 10.0, "{}", d.bits);
    }

    #[test]
    fn a_rare_hour_short_of_an_alert_is_a_signal() {
        let at = 2 * DAY + 3 * HOUR;
        let run = |signal_odds: f64| {
            // Blind to the hour in the blend, as above; two office days of history (96 events).
            let mut u = Ueba::new(UebaParams {
                weights: [0.0, 0.4, 0.3, 0.3],
                warmup_ns: DAY,
                signal_odds,
                ..params()
            });
            office_days(&mut u, 1, 2);
            u.observe(&obs(at, 1, ip("10.1.2.3"), 1))
        };
        // 03:00 after 96 daytime events: log2(97 / 0.5) = 7.6 bits, past the signal's 7 and
        // short of the alert's 9.
        match run(UebaParams::default().signal_odds) {
            Outcome::Signal(a) => {
                let d = a.deviation.expect("the deviation it is");
                assert_eq!(d.signal, Signal::NewHour);
                assert!(d.bits > 7.0 && d.bits < 9.0, "{}", d.bits);
            }
            other => panic!("{other:?}"),
        }
        // Signals off: a score, nothing more.
        assert!(matches!(run(0.0), Outcome::Scored { .. }));
    }

    #[test]
    fn two_signals_on_one_event_alert_where_neither_alone_would() {
        let at = 2 * DAY + 3 * HOUR;
        let run = |source: &str| {
            let mut u = Ueba::new(UebaParams {
                weights: [0.0, 0.4, 0.3, 0.3],
                warmup_ns: DAY,
                ..params()
            });
            office_days(&mut u, 1, 2);
            u.observe(&obs(at, 1, ip(source), 1))
        };
        // 03:00 after 96 daytime events from one network, and from a network never used: 7.6
        // bits each, a signal each, 15.2 together past the alert's 9.
        let Outcome::Alert(a) = run("192.0.2.9") else {
            panic!("two signals at once alert");
        };
        let d = a.deviation.expect("the deviations it is");
        let with = d.with.expect("the second dimension");
        assert_eq!(
            (d.signal, with.signal),
            (Signal::NewHour, Signal::NewSource)
        );
        assert!(with.bits > 7.0 && with.bits < 9.0, "{}", with.bits);
        assert!(
            (d.bits - 2.0 * with.bits).abs() < 0.5,
            "{} {}",
            d.bits,
            with.bits
        );
        // The same hour from the usual network: one signal, no alert.
        match run("10.1.2.3") {
            Outcome::Signal(a) => assert!(a.deviation.is_some_and(|d| d.with.is_none())),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_server_many_clients_reach_leaves_its_hour_to_the_account() {
        let server = |clients: u64, account_named: bool| {
            let mut u = Ueba::new(params());
            for d in 0..20 {
                for h in 9..17 {
                    for c in 0..clients {
                        let source = Some(ip_key(
                            std::net::Ipv4Addr::new(10, 9, 0, c as u8 + 1).into(),
                        ));
                        u.observe(&Observation {
                            kind: UebaType::Host,
                            account_named: true,
                            ..obs(d * DAY + h * HOUR + c as i64 * NS_PER_MINUTE, 5, source, 1)
                        });
                    }
                }
            }
            let night = Observation {
                kind: UebaType::Host,
                account_named,
                ..obs(20 * DAY + 3 * HOUR, 5, ip("10.9.0.1"), 1)
            };
            deviation_of(u.observe(&night)).map(|d| d.signal)
        };
        // Thirty clients: a client's night is the client's to judge, not the server's.
        assert_eq!(server(30, true), None);
        // Unless no account is named (the server itself acting), or few clients reach it.
        assert_eq!(server(30, false), Some(Signal::NewHour));
        assert_eq!(server(3, true), Some(Signal::NewHour));
    }

    #[test]
    fn an_on_call_account_at_night_and_a_late_evening_stay_quiet() {
        let mut u = Ueba::new(params());
        office_days(&mut u, 2, 20);
        // Every fifth night a call-out around 03:00.
        for d in (0..20).step_by(5) {
            for m in 0..4 {
                u.observe(&obs(
                    d * DAY + 3 * HOUR + m * 5 * NS_PER_MINUTE,
                    2,
                    ip("10.1.2.3"),
                    1,
                ));
            }
        }
        assert!(!alerted(u.observe(&obs(
            20 * DAY + 3 * HOUR,
            2,
            ip("10.1.2.3"),
            1
        ))));
        // Two hours past the usual last hour (16:00 to 16:59) is a late day, not a new habit.
        let mut v = Ueba::new(params());
        office_days(&mut v, 3, 20);
        assert!(!alerted(v.observe(&obs(
            20 * DAY + 19 * HOUR,
            3,
            ip("10.1.2.3"),
            1
        ))));
    }

    #[test]
    fn a_hundredfold_rate_alerts_a_bursty_batch_account_does_not() {
        let mut u = Ueba::new(params());
        office_days(&mut u, 4, 20);
        let start = 20 * DAY + 10 * HOUR;
        let mut fired = None;
        for i in 0..100 {
            let o = obs(start + i * 500_000_000, 4, ip("10.1.2.3"), 1);
            if let Some(d) = deviation_of(u.observe(&o)) {
                fired = Some((i, d));
                break;
            }
        }
        let (at, d) = fired.expect("the burst alerts");
        assert_eq!(d.signal, Signal::Rate);
        assert!(at < 60 && d.value >= 20.0, "after {at} events: {d:?}");
        // A batch account: quiet minutes and bursts of 300, over weeks.
        let mut batch = Ueba::new(params());
        for day in 0..20 {
            for minute in 0..120 {
                let n = if minute % 30 == 0 { 300 } else { 2 };
                for i in 0..n {
                    let ts = day * DAY + minute * NS_PER_MINUTE + i * 100_000_000;
                    batch.observe(&obs(ts, 5, ip("10.9.0.1"), 1));
                }
            }
        }
        let burst = 20 * DAY;
        let alerts = (0..300)
            .filter(|i| alerted(batch.observe(&obs(burst + i * 100_000_000, 5, ip("10.9.0.1"), 1))))
            .count();
        assert_eq!(alerts, 0);
    }

    #[test]
    fn a_nightly_burst_is_not_news_at_night_the_same_burst_at_noon_is() {
        // An account that logs a few events an hour all day, and a burst of 40 a minute for five
        // minutes at 01:50 every night: its per-minute baseline is low, its 01:00 is not.
        let nights = |u: &mut Ueba| {
            for day in 0..20 {
                for hour in 0..24 {
                    let at = day * DAY + hour * HOUR;
                    for k in 0..4 {
                        u.observe(&obs(at + k * 15 * NS_PER_MINUTE, 6, ip("10.9.0.2"), 1));
                    }
                    if hour == 1 {
                        for minute in 0..5 {
                            for i in 0..40 {
                                let ts = at + (50 + minute) * NS_PER_MINUTE + i * 1_000_000_000;
                                u.observe(&obs(ts, 6, ip("10.9.0.2"), 1));
                            }
                        }
                    }
                }
            }
        };
        // A rate deviation of either strength: an alert or a signal.
        let rate_at = |u: &mut Ueba, at: i64| {
            (0..40).any(|i| {
                match u.observe(&obs(at + i * 1_000_000_000, 6, ip("10.9.0.2"), 1)) {
                    Outcome::Alert(a) | Outcome::Signal(a) => a.deviation,
                    _ => None,
                }
                .is_some_and(|d| d.signal == Signal::Rate)
            })
        };
        let mut u = Ueba::new(params());
        nights(&mut u);
        assert!(
            !rate_at(&mut u, 20 * DAY + HOUR + 50 * NS_PER_MINUTE),
            "01:00 is its busy hour"
        );
        let mut u = Ueba::new(params());
        nights(&mut u);
        assert!(
            rate_at(&mut u, 20 * DAY + 12 * HOUR + 50 * NS_PER_MINUTE),
            "noon never was"
        );
    }

    #[test]
    fn a_first_host_is_news_for_a_settled_user_not_for_one_who_roams() {
        let settled = |hosts: u64, day: i64, u: &mut Ueba, entity: u64| {
            for i in 0..48 {
                let mut o = obs(
                    day * DAY + 9 * HOUR + i * 10 * NS_PER_MINUTE,
                    entity,
                    ip("10.1.2.3"),
                    1,
                );
                o.host = 100 + (i as u64 % hosts);
                u.observe(&o);
            }
        };
        let mut u = Ueba::new(params());
        for day in 0..20 {
            settled(3, day, &mut u, 6);
        }
        let mut hop = obs(20 * DAY + 10 * HOUR, 6, ip("10.1.2.3"), 1);
        hop.host = 999;
        let d = deviation_of(u.observe(&hop)).expect("a first host alerts");
        assert_eq!(d.signal, Signal::NewHost);
        // One who is on a different host most days.
        let mut roamer = Ueba::new(params());
        for day in 0..20 {
            settled(3, day, &mut roamer, 7);
            let mut o = obs(day * DAY + 15 * HOUR, 7, ip("10.1.2.3"), 1);
            o.host = 5000 + day as u64;
            roamer.observe(&o);
        }
        let mut next = obs(20 * DAY + 10 * HOUR, 7, ip("10.1.2.3"), 1);
        next.host = 999;
        assert!(!alerted(roamer.observe(&next)));
    }

    #[test]
    fn an_address_that_names_its_account_leaves_a_new_path_and_a_burst_to_the_account() {
        // An address that reached three servers every working hour for twenty days.
        let host_key = |h: u64| Some((u128::from(h) << 64) | (1u128 << 127));
        let address = |ts: i64, host: u64, account_named: bool| Observation {
            kind: UebaType::Ip,
            account_named,
            failed_logon: false,
            person: 0,
            ..obs(ts, 9, host_key(host), 1)
        };
        let run = |account_named: bool| {
            let mut u = Ueba::new(params());
            for day in 0..20 {
                for i in 0..48 {
                    let ts = day * DAY + 9 * HOUR + i * 10 * NS_PER_MINUTE;
                    u.observe(&address(ts, 100 + i as u64 % 3, account_named));
                }
            }
            let at = 20 * DAY + 10 * HOUR;
            let path = u.observe(&address(at, 999, account_named));
            let burst = (1..300)
                .map(|i| u.observe(&address(at + HOUR + i * 100_000_000, 100, account_named)))
                .collect::<Vec<_>>();
            (path, burst)
        };
        // Without an account, the new server is the lateral step to see, and a burst is the
        // address's own.
        let (path, burst) = run(false);
        assert_eq!(
            deviation_of(path).map(|d| d.signal),
            Some(Signal::NewSource)
        );
        assert!(
            burst
                .into_iter()
                .any(|o| deviation_of(o).is_some_and(|d| d.signal == Signal::Rate))
        );
        // With one (a DHCP lease now someone else's, a login naming its user), the account's
        // own history judges both: the address raises neither signal, and its blend sees no
        // new path.
        let (path, burst) = run(true);
        assert_eq!(deviation_of(path), None);
        match path {
            Outcome::Scored { score, .. } => assert!(score < 0.1, "{score}"),
            other => panic!("{other:?}"),
        }
        assert!(
            burst
                .into_iter()
                .all(|o| deviation_of(o).is_none_or(|d| d.signal != Signal::Rate))
        );
    }

    #[test]
    fn a_new_network_is_news_for_a_person_a_new_lease_in_the_old_one_is_not() {
        let mut u = Ueba::new(params());
        office_days(&mut u, 8, 20);
        let at = 20 * DAY + 10 * HOUR;
        assert!(!alerted(u.observe(&obs(at, 8, ip("10.1.2.77"), 1))));
        let d = deviation_of(u.observe(&obs(at + HOUR, 8, ip("172.16.5.5"), 1)))
            .expect("a new network alerts");
        assert_eq!(d.signal, Signal::NewSource);
    }

    #[test]
    fn a_return_after_weeks_of_silence_alerts_a_weekend_does_not() {
        let mut u = Ueba::new(params());
        // Five weeks of weekdays, so weekends are the longest gaps (about 2.7 days).
        for week in 0..5 {
            for d in 0..5 {
                for h in 9..17 {
                    let ts = (week * 7 + d) * DAY + h * HOUR;
                    u.observe(&obs(ts, 9, ip("10.1.2.3"), 1));
                }
            }
        }
        assert!(!alerted(u.observe(&obs(
            35 * DAY + 9 * HOUR,
            9,
            ip("10.1.2.3"),
            1
        ))));
        let back = 35 * DAY + 9 * HOUR + 30 * DAY;
        let d = deviation_of(u.observe(&obs(back, 9, ip("10.1.2.3"), 1))).expect("dormancy alerts");
        assert_eq!(d.signal, Signal::Dormancy);
        assert!((d.value - 30.0).abs() < 0.01, "{}", d.value);
    }

    #[test]
    fn a_leaver_silent_since_its_first_week_alerts_though_still_in_warmup() {
        let p = UebaParams {
            warmup_ns: 7 * DAY,
            warmup_min_events: 200,
            ..params()
        };
        let leaver = |events_a_day: i64| {
            let mut u = Ueba::new(p.clone());
            for d in 0..5 {
                for k in 0..events_a_day {
                    u.observe(&obs(d * DAY + 9 * HOUR + k * HOUR, 4, ip("10.1.2.3"), 1));
                }
            }
            u.observe(&obs(40 * DAY + 10 * HOUR, 4, ip("198.51.100.9"), 1))
        };
        // Forty events in its only week, then five weeks of silence: far short of 200 events.
        let d = deviation_of(leaver(8)).expect("dormancy alerts in warmup");
        assert_eq!(d.signal, Signal::Dormancy);
        assert!(d.value > 30.0, "{}", d.value);
        // A name seen a handful of times is no pattern to fall silent from.
        assert!(!alerted(leaver(1)));
    }

    #[test]
    fn failed_logons_against_a_silent_account_do_not_end_its_silence() {
        let mut u = Ueba::new(params());
        office_days(&mut u, 4, 10);
        // Three weeks later a wrong password at the usual hour, from the usual network: no
        // return of the account, no alert (a return would be a dormancy alert).
        let tried = Observation {
            failed_logon: true,
            person: 0,
            ..obs(31 * DAY + 10 * HOUR, 4, ip("10.1.2.3"), 1)
        };
        assert!(!alerted(u.observe(&tried)));
        // A week after that the account itself logs in: still a month of silence.
        let back = obs(38 * DAY + 10 * HOUR, 4, ip("10.1.2.3"), 1);
        let d = deviation_of(u.observe(&back)).expect("dormancy alerts");
        assert_eq!(d.signal, Signal::Dormancy);
        assert!(d.value > 28.0, "{}", d.value);
    }

    #[test]
    fn an_account_tried_from_everywhere_finds_a_new_network_no_news() {
        let mut u = Ueba::new(params());
        // `admin` as internet scanners see it: every attempt from another network.
        for i in 0..400u32 {
            let addr = format!("{}.{}.{}.1", 20 + i % 200, i / 200, i % 251);
            u.observe(&obs(i64::from(i) * 10 * NS_PER_MINUTE, 12, ip(&addr), 1));
        }
        let b = u.baseline(12).unwrap();
        let s = b.score(&obs(3 * DAY, 12, ip("198.18.7.7"), 1), 0.0);
        assert_eq!(s.source_novelty, 0.0, "{s:?}");
    }

    #[test]
    fn weak_traces_on_several_dimensions_stay_quiet() {
        let mut u = Ueba::new(params());
        office_days(&mut u, 10, 20);
        // An hour early, a new lease in the usual network, a template it rarely uses.
        let o = obs(20 * DAY + 8 * HOUR, 10, ip("10.1.2.9"), 3);
        assert!(!alerted(u.observe(&o)));
    }

    #[test]
    fn a_baseline_saved_before_the_hourly_peaks_reads_back_with_them_zero() {
        let mut u = Ueba::new(params());
        office_days(&mut u, 12, 3);
        let b = u.baseline(12).unwrap();
        assert!(b.hour_peaks[10] > 0, "{:?}", b.hour_peaks);
        let cfg = watchpost_proto::bincode_config();
        let bytes = bincode::encode_to_vec(b, cfg).unwrap();
        let since = bincode::encode_to_vec(b.people_since_ns, cfg)
            .unwrap()
            .len();
        let old = bytes[..bytes.len() - 24 - since].to_vec();
        let (back, read): (Baseline, _) = bincode::decode_from_slice(&old, cfg).unwrap();
        assert_eq!(read, old.len());
        assert_eq!(
            (back.event_count, back.longest_gap_s),
            (b.event_count, b.longest_gap_s)
        );
        assert_eq!(back.hour_peaks, [0; 24]);
    }

    #[test]
    fn a_baseline_saved_before_its_people_were_counted_counts_them_from_its_last_event() {
        let mut u = Ueba::new(params());
        office_days(&mut u, 12, 3);
        let b = u.baseline(12).unwrap();
        assert_eq!(b.people_since_ns, b.first_seen_ns);
        let cfg = watchpost_proto::bincode_config();
        let bytes = bincode::encode_to_vec(b, cfg).unwrap();
        let since = bincode::encode_to_vec(b.people_since_ns, cfg)
            .unwrap()
            .len();
        let old = bytes[..bytes.len() - since].to_vec();
        let (back, _): (Baseline, _) = bincode::decode_from_slice(&old, cfg).unwrap();
        assert_eq!(back.hour_peaks, b.hour_peaks);
        // Not its first event: an upgrade must not vouch that no person ever came to a host.
        assert_eq!(back.people_since_ns, b.last_seen_ns);
    }

    /// Twenty working days of a server that `people` people (ids from 1000) log on to and
    /// three application servers reach, as the host's worker sees them.
    fn server_days(u: &mut Ueba, host: u64, people: u64) {
        for d in 0..20 {
            for h in 9..17 {
                for k in 0..3u8 {
                    u.observe(&Observation {
                        kind: UebaType::Host,
                        account_named: true,
                        ..obs(
                            d * DAY + h * HOUR + i64::from(k) * NS_PER_MINUTE,
                            host,
                            Some(ip_key(std::net::Ipv4Addr::new(10, 5, 0, k + 1).into())),
                            1,
                        )
                    });
                }
                for person in 0..people {
                    u.observe(&Observation {
                        kind: UebaType::Host,
                        account_named: true,
                        person: 1000 + person,
                        ..obs(
                            d * DAY + h * HOUR + 30 * NS_PER_MINUTE,
                            host,
                            ip("10.1.2.3"),
                            2,
                        )
                    });
                }
            }
        }
    }

    #[test]
    fn a_first_visit_is_judged_against_the_people_who_use_the_host_on_the_shared_board() {
        // The hosts live with one worker, the person with another: they share a board.
        let board = Arc::new(PeerBoard::default());
        let mut hosts = Ueba::new(params());
        hosts.set_board(Arc::clone(&board));
        server_days(&mut hosts, 900, 12); // a colleague's application server
        server_days(&mut hosts, 901, 0); // a database only services reach
        assert_eq!(board.read(900).map(|h| h.people), Some(12));
        assert_eq!(board.read(901).map(|h| h.people), Some(0));
        let person = |u: &mut Ueba, entity: u64, day: i64| {
            for i in 0..40 {
                let mut o = obs(
                    day * DAY + 9 * HOUR + i * 10 * NS_PER_MINUTE,
                    entity,
                    ip("10.1.2.3"),
                    1,
                );
                o.host = 100 + (i as u64 % 2);
                u.observe(&o);
            }
        };
        let mut people = Ueba::new(params());
        people.set_board(Arc::clone(&board));
        for day in 0..20 {
            person(&mut people, 6, day);
            person(&mut people, 7, day);
        }
        let visit = |u: &mut Ueba, entity: u64, host: u64| {
            let mut o = obs(20 * DAY + 10 * HOUR, entity, ip("10.1.2.3"), 1);
            o.host = host;
            u.observe(&o)
        };
        // Alone the first host is worth a signal (800 events, two hosts: 10.6 bits less the
        // twelve people's 3.6), not an alert.
        let shared = visit(&mut people, 6, 900);
        assert!(!alerted(shared), "{shared:?}");
        // No person ever came to the database: the first one alerts, saying so.
        let d = deviation_of(visit(&mut people, 7, 901)).expect("a first person alerts");
        assert_eq!((d.signal, d.value), (Signal::NewHost, 0.0));
        // A host the board does not know is judged on the account alone, as before.
        let mut alone = Ueba::new(params());
        for day in 0..20 {
            person(&mut alone, 6, day);
        }
        let d = deviation_of(visit(&mut alone, 6, 900)).expect("alone, a first host alerts");
        assert_eq!(d.signal, Signal::NewHost);
    }

    #[test]
    fn a_person_new_to_a_crowd_is_no_news() {
        let board = Arc::new(PeerBoard::default());
        let mut u = Ueba::new(params());
        u.set_board(Arc::clone(&board));
        server_days(&mut u, 900, 30);
        assert!(board.read(900).is_some_and(|h| h.crowd));
        for day in 0..20 {
            for i in 0..40 {
                let mut o = obs(
                    day * DAY + 9 * HOUR + i * 10 * NS_PER_MINUTE,
                    6,
                    ip("10.1.2.3"),
                    1,
                );
                o.host = 100;
                u.observe(&o);
            }
        }
        let mut o = obs(20 * DAY + 10 * HOUR, 6, ip("10.1.2.3"), 1);
        o.host = 900;
        assert!(matches!(u.observe(&o), Outcome::Scored { .. }));
    }

    #[test]
    fn a_thin_account_past_its_warmup_days_is_judged_by_its_deviations_not_the_blend() {
        // Five events a working day for three weeks: 75, short of the 200 events of warmup.
        let p = UebaParams {
            warmup_ns: 7 * DAY,
            warmup_min_events: 200,
            ..UebaParams::default()
        };
        let mut u = Ueba::new(p);
        for d in 0..15 {
            for k in 0..5 {
                let o = obs(d * DAY + 10 * HOUR + k * HOUR, 8, ip("10.1.2.3"), 1);
                assert!(matches!(u.observe(&o), Outcome::Learned));
            }
        }
        assert_eq!(
            u.baseline(8).unwrap().lifecycle(15 * DAY, u.params()),
            Lifecycle::WarmingUp
        );
        // One new dimension is worth at most 7.2 bits here: a signal, no alert.
        let hour = u.observe(&obs(15 * DAY + 2 * HOUR, 8, ip("10.1.2.3"), 1));
        assert!(matches!(hour, Outcome::Signal(_)), "{hour:?}");
        // A new hour and a new network at once: two signals, an alert.
        let both = deviation_of(u.observe(&obs(16 * DAY + 22 * HOUR, 8, ip("203.0.113.9"), 1)))
            .expect("two deviations alert");
        assert!(both.with.is_some(), "{both:?}");
    }

    #[test]
    fn a_service_account_that_only_acted_locally_arriving_over_the_network_is_news() {
        let mut u = Ueba::new(params());
        for d in 0..20 {
            for k in 0..20 {
                u.observe(&Observation {
                    kind: UebaType::ServiceAccount,
                    ..obs(d * DAY + 2 * HOUR + k * NS_PER_MINUTE, 9, None, 1)
                });
            }
        }
        let d = deviation_of(u.observe(&Observation {
            kind: UebaType::ServiceAccount,
            ..obs(20 * DAY + 2 * HOUR, 9, ip("10.20.0.134"), 1)
        }))
        .expect("a first address alerts");
        assert_eq!(d.signal, Signal::NewSource);
        assert!(d.bits > 9.0, "{d:?}");
    }

    #[test]
    fn a_service_account_from_a_new_desk_in_its_known_subnet_is_news_a_person_is_not() {
        let run = |kind: UebaType| {
            let mut u = Ueba::new(params());
            for d in 0..20 {
                for k in 0..30 {
                    u.observe(&Observation {
                        kind,
                        ..obs(
                            d * DAY + 10 * HOUR + k * NS_PER_MINUTE,
                            9,
                            ip("10.20.0.5"),
                            1,
                        )
                    });
                }
            }
            u.observe(&Observation {
                kind,
                ..obs(20 * DAY + 10 * HOUR, 9, ip("10.20.0.134"), 1)
            })
        };
        let d = deviation_of(run(UebaType::ServiceAccount)).expect("a new desk alerts");
        assert_eq!(d.signal, Signal::NewSource);
        assert!(!alerted(run(UebaType::User)));
    }

    #[test]
    fn an_address_hour_and_a_host_rate_on_an_event_naming_its_account_are_the_accounts() {
        let mut u = Ueba::new(params());
        // A host and an address that a nightly job's account uses, a few events a minute.
        for kind in [UebaType::Host, UebaType::Ip] {
            for d in 0..20 {
                for k in 0..60 {
                    u.observe(&Observation {
                        kind,
                        account_named: true,
                        ..obs(
                            d * DAY + 2 * HOUR + k * NS_PER_MINUTE,
                            50 + kind as u64,
                            ip("10.5.0.1"),
                            1,
                        )
                    });
                }
            }
        }
        // The address at an hour it never saw, the host with a hundred events in a minute.
        let ip_noon = u.observe(&Observation {
            kind: UebaType::Ip,
            account_named: true,
            ..obs(
                20 * DAY + 12 * HOUR,
                50 + UebaType::Ip as u64,
                ip("10.5.0.1"),
                1,
            )
        });
        assert!(
            !alerted(ip_noon) && !matches!(ip_noon, Outcome::Signal(_)),
            "{ip_noon:?}"
        );
        for k in 0..100 {
            let burst = u.observe(&Observation {
                kind: UebaType::Host,
                account_named: true,
                ..obs(
                    21 * DAY + 2 * HOUR + k * 100_000_000,
                    50 + UebaType::Host as u64,
                    ip("10.5.0.1"),
                    1,
                )
            });
            assert!(deviation_of(burst).is_none(), "{k}: {burst:?}");
        }
    }

    #[test]
    fn a_baseline_saved_before_the_deviation_state_reads_back_with_it_empty() {
        let mut u = Ueba::new(params());
        office_days(&mut u, 11, 3);
        let b = u.baseline(11).unwrap();
        let cfg = watchpost_proto::bincode_config();
        let bytes = bincode::encode_to_vec(b, cfg).unwrap();
        let tail = bincode::encode_to_vec(
            (
                &b.sources_seen,
                &b.hosts_seen,
                b.longest_gap_s,
                b.hour_peaks,
                b.people_since_ns,
            ),
            cfg,
        )
        .unwrap()
        .len();
        let mut old = bytes[..bytes.len() - tail].to_vec();
        old[0] = BASELINE_LAYOUT_NO_DEVIATION;
        let (back, read): (Baseline, _) = bincode::decode_from_slice(&old, cfg).unwrap();
        assert_eq!(read, old.len());
        assert_eq!(back.event_count, b.event_count);
        assert_eq!(back.longest_gap_s, 0);
        assert!(
            !back
                .sources_seen
                .contains(Slots::of(fold_source(network_of(ip("10.1.2.3").unwrap()))))
        );
    }
}
