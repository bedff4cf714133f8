//! The material store (DESIGN §2, §18): page and manifest bytes, content-addressed by
//! blake3, behind the small async trait [`MaterialStore`] the protocol writes through.
//!
//! Two places ([`Placement`]): the state store ([`state::StateStore`], the default: any
//! `serve` sharing the state store can read every material, so a job survives the loss of
//! the host that wrote them) or a local data directory ([`local::LocalDirStore`],
//! `--materials local`: today's behaviour, readable only on that host). With the state
//! store, the local data directory is a read-through cache.
//!
//! Why the write order of DESIGN §5 step 7 holds with either: `put` returns only once the
//! bytes are durable (fsynced and renamed; or every chunk and the head row committed), and
//! callers register a material and write the manifest only after `put` returned. Every
//! `get` verifies the bytes against their digest, so a registered material whose bytes
//! are missing or altered is seen (an audit failure, `evidence_corrupt`).
use kernel::ids::Digest;
use kernel::Result;
use sqlx::MySqlPool;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;

pub mod chunks;
mod local;
pub mod state;

pub use local::LocalDirStore;
pub use state::StateStore;

/// The future of one [`MaterialStore`] operation (boxed: the trait is used as `dyn`).
pub type Fut<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

/// Where material bytes live. Implementations must be durable when `put` returns.
pub trait MaterialStore: Send + Sync {
    /// Stores `bytes` durably under their blake3 digest (idempotent) and returns it.
    fn put<'a>(&'a self, bytes: &'a [u8]) -> Fut<'a, Digest>;
    /// The bytes stored under `digest`, verified against it; None if absent. Bytes that do
    /// not hash to `digest` are a definite `evidence_corrupt` error.
    fn get<'a>(&'a self, digest: &'a Digest) -> Fut<'a, Option<Vec<u8>>>;
    /// Like [`MaterialStore::get`], but from the copy every owner reads, never from a
    /// host's cache: the audit checks the shared evidence, so a corrupt or missing shared
    /// copy is not hidden by a good cached one. Same as `get` where there is no cache.
    fn get_shared<'a>(&'a self, digest: &'a Digest) -> Fut<'a, Option<Vec<u8>>> {
        self.get(digest)
    }
    /// True if something complete is stored under `digest` (not verified).
    fn contains<'a>(&'a self, digest: &'a Digest) -> Fut<'a, bool>;
    /// Removes a material (garbage of an abandoned attempt, retention). Absent is fine.
    fn remove<'a>(&'a self, digest: &'a Digest) -> Fut<'a, ()>;
}

/// Where a process keeps materials (`--materials state|local`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Placement {
    /// In the state store, chunked ([`chunks`]), the data directory as a cache.
    #[default]
    State,
    /// Only in the local data directory (one host: lost with it).
    Local,
}

impl Placement {
    /// The flag value.
    pub fn as_str(self) -> &'static str {
        match self {
            Placement::State => "state",
            Placement::Local => "local",
        }
    }
}

/// Opens the material store of `placement`: in the state store behind `pool` with
/// `data_dir` as its cache, or in `data_dir` alone.
pub fn open(
    placement: Placement,
    pool: &MySqlPool,
    data_dir: &Path,
) -> Result<Arc<dyn MaterialStore>> {
    let local = LocalDirStore::open(data_dir)?;
    Ok(match placement {
        Placement::State => Arc::new(StateStore::new(pool.clone(), Some(local))),
        Placement::Local => Arc::new(local),
    })
}
