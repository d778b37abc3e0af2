//! Sigma matching of single lines outside the service, through the same normaliser and the same
//! in-place matching as stage A: `watchpost rules test` and the bundled rules' own tests use it,
//! so what they report is what live ingestion would raise.

use crate::line::{Format, LineMeta};
use crate::normalizer::{Normalizer, Tally};
use crate::template::{MinerConfig, MinerError, TemplateMiner};
use std::sync::Arc;
use watchpost_proto::InputId;
use watchpost_rules::RuleSet;
use watchpost_store::EncodedBlock;

/// Normalises lines one at a time and reports the rules each matches.
pub struct LineMatcher {
    norm: Normalizer,
    block: EncodedBlock,
    tally: Tally,
}

impl LineMatcher {
    /// A matcher for `rules` with the template and severity settings of `cfg`; fails only on a
    /// user mask of `templates.extra_masks` that does not compile.
    pub fn new(
        rules: Arc<RuleSet>,
        cfg: &watchpost_proto::Config,
    ) -> Result<LineMatcher, MinerError> {
        let miner = TemplateMiner::new(&MinerConfig::from_config(&cfg.templates))?;
        let mut norm = Normalizer::new(miner);
        norm.set_rules(Some(rules));
        norm.set_severity_scales(&cfg.severity);
        Ok(LineMatcher {
            norm,
            block: EncodedBlock::with_capacity(0, 1),
            tally: Tally::default(),
        })
    }

    /// The indexes (in the rule set) of the rules `line` matches: JSON when it starts with `{`,
    /// syslog otherwise, as a tailed file is read.
    pub fn matches(&mut self, line: &[u8]) -> &[u32] {
        self.block.clear();
        let meta = LineMeta {
            start: 0,
            len: line.len() as u32,
            received_ns: 0,
            truncated: false,
        };
        self.norm.push_line(
            line,
            &meta,
            InputId::File,
            Format::Auto,
            &mut self.block,
            &mut self.tally,
        );
        // Only the matches matter here: the records for stage B are dropped with the block.
        self.norm.detect_batch().clear();
        self.norm.last_matches()
    }
}
