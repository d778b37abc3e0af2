//! Every input behind one trait, in one list: the part of the configuration that enables it, the
//! format of its lines, how it binds, how it starts, and what its acknowledgement promises.
//!
//! The pipeline binds and starts what `INPUTS` (in `input/mod.rs`) lists, and `/health` reports what it lists, so
//! adding an input is one module with one `impl Input` and one entry there (plus its id and its
//! `[inputs.*]` section in `watchpost_proto`). Binding is separate from starting (Vector's config
//! half and runtime half): every socket is bound before any thread runs, so a port in use is a
//! start-up error naming its key and leaves nothing running.

use crate::Error;
use crate::input::ingest::HttpIngest;
use crate::input::outlet::Outlet;
use crate::stats::Stats;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::thread::JoinHandle;
use watchpost_normalize::Format;
use watchpost_proto::config::InputsConfig;
use watchpost_proto::{Config, InputId};
use watchpost_store::{SpooledRequest, Store};

/// What an input's acknowledgement promises (docs/guarantees.md, "What each input
/// acknowledges"); `/health` shows it per input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// No answer to the sender (UDP): what the kernel or a full ring drops is counted, not
    /// retried.
    Unacknowledged,
    /// The transport's own acknowledgement (TCP): lines read and not yet stored are lost in a
    /// crash, and the sender cannot know which.
    Transport,
    /// A durable position (tailed files): the offset is stored with the lines before it, and a
    /// restart reads on from it.
    Checkpointed,
    /// Acknowledged only once durable (HTTP ingest, RELP): nothing acknowledged is lost; what was
    /// acknowledged before a stop and not yet stored is replayed at the next start.
    Durable,
}

impl Delivery {
    /// Its name in `/health`.
    pub fn name(self) -> &'static str {
        match self {
            Delivery::Unacknowledged => "unacknowledged",
            Delivery::Transport => "transport",
            Delivery::Checkpointed => "checkpointed",
            Delivery::Durable => "durable",
        }
    }
}

/// One kind of input: its configuration half. Implementations are values listed in `INPUTS`.
pub trait Input: Sync {
    /// Its id: its counters, its `/health` entry, its spooled requests.
    fn id(&self) -> InputId;
    /// What its acknowledgement promises.
    fn delivery(&self) -> Delivery;
    /// Whether `[inputs]` turns it on.
    fn enabled(&self, inputs: &InputsConfig) -> bool;
    /// How its lines are read.
    fn format(&self, inputs: &InputsConfig) -> Format;
    /// Binds what it listens on (a failure names the config key); nothing runs yet.
    fn bind(&self, cfg: &Config) -> Result<Box<dyn Bound>, Error>;
}

/// An input bound and ready to start: its runtime half.
pub trait Bound: Send {
    /// Where it listens, if it listens on a socket of its own.
    fn local_addr(&self) -> Option<SocketAddr>;
    /// Starts its thread, which sends its lines through `with.outlet` until `with.stop` is set.
    fn start(self: Box<Self>, with: Start<'_>) -> Result<Running, Error>;
}

/// What a bound input is started with.
pub struct Start<'a> {
    pub(crate) cfg: &'a Config,
    pub(crate) outlet: Outlet,
    pub(crate) store: &'a Arc<Store>,
    pub(crate) stats: &'a Arc<Stats>,
    pub(crate) stop: &'a Arc<AtomicBool>,
    /// Requests this input acknowledged before the last stop and that were not stored then
    /// (only a [`Delivery::Durable`] input has any): replayed before it takes new ones.
    pub(crate) pending: Vec<SpooledRequest>,
}

/// A started input.
pub struct Running {
    pub(crate) thread: JoinHandle<()>,
    /// The handle the control plane hands HTTP ingest bodies to (the HTTP input only).
    pub(crate) http: Option<HttpIngest>,
}

impl Running {
    /// A started input that takes nothing from the control plane.
    pub(crate) fn thread(thread: JoinHandle<()>) -> Running {
        Running { thread, http: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::INPUTS;

    #[test]
    fn the_registry_lists_every_input_once_in_counter_order() {
        let ids: Vec<InputId> = INPUTS.iter().map(|i| i.id()).collect();
        assert_eq!(ids, InputId::ALL);
    }

    #[test]
    fn acknowledging_inputs_are_the_durable_ones() {
        let durable: Vec<&str> = INPUTS
            .iter()
            .filter(|i| i.delivery() == Delivery::Durable)
            .map(|i| i.id().name())
            .collect();
        assert_eq!(durable, ["http", "relp"]);
    }
}
