//! `--materials state|local` of every command that opens the material store (`serve`,
//! `audit`, `demo`): where RAW/FINAL pages and manifests are kept (DESIGN §18).
use clap::{Args, ValueEnum};
use ledger::material::Placement;

/// Where materials live.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Materials {
    /// In the state store (chunked blobs), the data directory a read-through cache: any
    /// serve on the same state store can take a job over.
    #[default]
    State,
    /// Only in the local data directory: a job cannot move to another host.
    Local,
}

impl From<Materials> for Placement {
    fn from(m: Materials) -> Placement {
        match m {
            Materials::State => Placement::State,
            Materials::Local => Placement::Local,
        }
    }
}

/// The `--materials` flag.
#[derive(Clone, Copy, Debug, Args)]
pub struct MaterialsArg {
    /// Where RAW/FINAL pages and manifests are kept: `state` (the state store, readable
    /// by every serve sharing it; the data directory is a cache) or `local` (the data
    /// directory only). Every process of one state store must use the same value.
    #[arg(long, env = "BACKFILL_MATERIALS", value_enum, default_value_t = Materials::State)]
    pub materials: Materials,
}
